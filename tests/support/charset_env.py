"""A real environment for field case B43: charset-normalizer 3.4.2's real wheel, installed with uv.

Its ``charset_normalizer/md.py`` sits beside the compiled ``md.cpython-3XX-x86_64-linux-gnu.so`` (and
``md__mypyc…so``); the import system loads the extension. The field patchset ``cn-threshold``
(captured by ``envforge patches commit`` from an edit of ``md.py``) replaces ``mess_ratio`` with a
0.35 default threshold. The interpreter is the pyenv Python whose version the cached wheel is built for.
"""

from __future__ import annotations

import glob
import hashlib
import shutil
from pathlib import Path

import pytest
import uv

from tests.conftest import cached_wheel
from tests.support.verify_envs import BuiltEnv, make_env

PATCHSET_ID = "cn-threshold"
MD = "charset_normalizer/md.py"

PATCHSET = f'''[patchset]
id = "{PATCHSET_ID}"
distribution = "charset-normalizer"
versions = "==3.4.2"
reason = "raise the default mess threshold (field edit)"

[[operation]]
kind = "replace-definition"
file = "{MD}"
definition = "mess_ratio"
original-digest = "sha256:04b94013aab725a4ab8ebb93c7c24af8d7ac8fb25be32d7b02659a08643dae80"
code = \'\'\'@lru_cache(maxsize=2048)
def mess_ratio(
    decoded_sequence: str, maximum_threshold: float = 0.35, debug: bool = False
) -> float:
    """
    Compute a mess ratio given a decoded bytes sequence. The maximum threshold does stop the computation earlier.
    """

    detectors: list[MessDetectorPlugin] = [
        md_class() for md_class in MessDetectorPlugin.__subclasses__()
    ]

    length: int = len(decoded_sequence) + 1

    mean_mess_ratio: float = 0.0

    if length < 512:
        intermediary_mean_mess_ratio_calc: int = 32
    elif length <= 1024:
        intermediary_mean_mess_ratio_calc = 64
    else:
        intermediary_mean_mess_ratio_calc = 128

    for character, index in zip(decoded_sequence + "\\n", range(length)):
        for detector in detectors:
            if detector.eligible(character):
                detector.feed(character)

        if (
            index > 0 and index % intermediary_mean_mess_ratio_calc == 0
        ) or index == length - 1:
            mean_mess_ratio = sum(dt.ratio for dt in detectors)

            if mean_mess_ratio >= maximum_threshold:
                break

    if debug:
        logger = getLogger("charset_normalizer")

        logger.log(
            TRACE,
            "Mess-detector extended-analysis start. "
            f"intermediary_mean_mess_ratio_calc={{intermediary_mean_mess_ratio_calc}} mean_mess_ratio={{mean_mess_ratio}} "
            f"maximum_threshold={{maximum_threshold}}",
        )

        if len(decoded_sequence) > 16:
            logger.log(TRACE, f"Starting with: {{decoded_sequence[:16]}}")
            logger.log(TRACE, f"Ending with: {{decoded_sequence[-16::]}}")

        for dt in detectors:
            logger.log(TRACE, f"{{dt.__class__}}: {{dt.ratio}}")

    return round(mean_mess_ratio, 3)
\'\'\'
'''


def charset_wheel() -> tuple[Path, str]:
    """The cached real charset-normalizer 3.4.2 wheel and the pyenv interpreter of its CPython tag
    (``cp311`` -> ``/root/.pyenv/versions/3.11.*/bin/python3.11``); skips when there is none."""
    wheel = cached_wheel("charset-normalizer", "3.4.2")
    tag = wheel.name.split("-")[2]
    if not tag.startswith("cp3"):
        pytest.skip(f"the cached wheel {wheel.name} is not a CPython build")
    minor = tag[3:]
    found = sorted(glob.glob(f"/root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    if not found:
        pytest.skip(f"needs a pyenv Python 3.{minor} for {wheel.name}")
    return wheel, found[-1]


def extensions(env: BuiltEnv) -> list[Path]:
    """The compiled ``md`` modules of the installed wheel (``md.cpython-3XX-…so``, ``md__mypyc…so``)."""
    return sorted((env.site_packages / "charset_normalizer").glob("md*.so"))


def charset_env(root: Path, *, listed: bool = True) -> BuiltEnv:
    """``root/envs/cn-default`` with the real wheel installed by uv, nothing patched; the project's
    ``patchsets/cn-threshold.toml`` written; the lock lists the patchset when ``listed``."""
    (root / "patchsets").mkdir(parents=True)
    path = root / "patchsets" / f"{PATCHSET_ID}.toml"
    path.write_text(PATCHSET)
    (root / "recipes").mkdir()
    wheel, python = charset_wheel()
    ref = {"id": PATCHSET_ID, "digest": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()}
    return make_env(
        root,
        [wheel],
        uv=uv.find_uv_bin(),
        python=python,
        name="cn-default",
        patchsets=(),
        profile=None,
        envforge={"patchsets": [ref] if listed else []},
    )


class moved_aside:
    """Context manager: the given files moved into a directory beside site-packages, put back on exit."""

    def __init__(self, files: list[Path], where: Path) -> None:
        self.files, self.where = files, where

    def __enter__(self) -> None:
        self.where.mkdir(exist_ok=True)
        for f in self.files:
            shutil.move(f, self.where / f.name)

    def __exit__(self, *exc: object) -> None:
        for f in self.files:
            shutil.move(self.where / f.name, f)
