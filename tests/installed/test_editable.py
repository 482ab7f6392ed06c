"""B21: patchsets on an editable install, on a REAL editable install of the sglang 0.5.9 sdist.

The sdist comes from PyPI (``pip download --no-binary :all: --no-deps``) into the test cache; real uv
builds it editable (setuptools' PEP 660 backend: a ``direct_url.json`` with ``dir_info.editable``
and an ``__editable__`` finder) into a Python 3.12 venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uv
from tests.conftest import CACHE, cached_wheel
from tests.support.verify_envs import make_env
from tests.support.pythons import python_for

from envforge.installed.editable import editable_install

PY312 = str(python_for("3.12"))
UV = uv.find_uv_bin()
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")]


def _sdist() -> Path:
    d = CACHE / "sdists"
    found = list(d.glob("sglang-0.5.9.tar.gz"))
    if not found:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-binary",
                ":all:",
                "--no-deps",
                "-d",
                str(d),
                "sglang==0.5.9",
            ],
            capture_output=True,
            text=True,
        )
        found = list(d.glob("sglang-0.5.9.tar.gz"))
        if proc.returncode or not found:
            pytest.skip(f"cannot download the sglang 0.5.9 sdist: {proc.stderr[-300:]}")
    return found[0]


def install_editable(python: Path, dest: Path) -> Path:
    """Unpack the sdist into ``dest`` and install it editable into ``python``'s environment."""
    with tarfile.open(_sdist()) as tf:
        tf.extractall(dest, filter="data")
    checkout = dest / "sglang-0.5.9"
    proc = subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(python), "--no-deps", "-e", str(checkout)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode:
        pytest.skip(f"cannot build the sglang sdist editable here: {proc.stderr[-400:]}")
    return checkout


@dataclass
class Editable:
    venv: Path
    site_packages: Path
    checkout: Path


@pytest.fixture(scope="module")
def editable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Editable]:
    base = tmp_path_factory.mktemp("editable")
    subprocess.run([UV, "venv", "-q", "-p", PY312, str(base / "venv")], check=True)
    checkout = install_editable(base / "venv" / "bin" / "python", base)
    yield Editable(base / "venv", base / "venv" / "lib" / "python3.12" / "site-packages", checkout)


def envforge(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=dict(os.environ),
    )


def test_the_real_editable_install_is_read_from_pep_610_and_the_finder(editable: Editable) -> None:
    ed = editable_install(editable.site_packages, "SGLang")
    assert ed is not None
    assert (ed.distribution, ed.version, ed.project) == ("sglang", "0.5.9", editable.checkout)
    assert ed.source_of("sglang/srt/models/llama.py") == editable.checkout / "sglang" / "srt" / "models" / "llama.py"
    assert editable_install(editable.site_packages, "flashinfer-python") is None


def test_apply_patches_says_editable_and_what_to_do_never_narrow_the_versions(editable: Editable) -> None:
    def listing() -> list[str]:  # .envforge/ may hold the environment's lock file, never a manifest
        return sorted(p.name for p in editable.site_packages.iterdir() if p.name != ".envforge")

    before = listing()
    proc = envforge("apply-patches", "--site-packages", str(editable.site_packages), "sm120-torch-symm-mem")
    assert proc.returncode == 1
    assert "narrow" not in proc.stderr and "file is missing" not in proc.stderr
    sp, co = editable.site_packages, editable.checkout
    assert proc.stderr.splitlines()[0] == (
        "error: sm120-torch-symm-mem: sglang/srt/distributed/device_communicators/all_reduce_utils.py: sglang 0.5.9 "
        f"is an editable install from {co} (PEP 610 direct_url.json: dir_info.editable): its code is in that "
        "checkout, not in site-packages, so nothing was written. Next step: apply the patchset's diff in the "
        f"checkout (`envforge patches export sm120-torch-symm-mem --site-packages {sp} -o sm120-torch-symm-mem.diff`, "
        f"then `patch -p2 -d {co} < sm120-torch-symm-mem.diff`), or install the released wheel instead (`uv pip "
        "install --python <env>/bin/python sglang==0.5.9`) and run apply-patches again"
    )
    assert listing() == before and not (editable.site_packages / ".envforge" / "patches.json").exists()


def test_the_hint_works_the_exported_diff_applies_in_a_copy_of_the_checkout(editable: Editable, tmp_path: Path) -> None:
    diff = tmp_path / "symm.diff"
    proc = envforge(
        "patches", "export", "sm120-torch-symm-mem", "--site-packages", str(editable.site_packages), "-o", str(diff)
    )
    assert proc.returncode == 0, proc.stderr
    copy = shutil.copytree(editable.checkout / "sglang", tmp_path / "co" / "sglang")
    applied = subprocess.run(
        ["patch", "-p2", "-d", str(copy.parent)], stdin=diff.open(), capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    utils = (copy / "srt" / "distributed" / "device_communicators" / "all_reduce_utils.py").read_text()
    assert (
        utils
        != (
            editable.checkout / "sglang" / "srt" / "distributed" / "device_communicators" / "all_reduce_utils.py"
        ).read_text()
    )
    assert "12:" in utils  # the SM120 (capability 12) entry the patchset adds


def test_verify_reports_the_editable_install_once_with_the_way_forward(tmp_path: Path) -> None:
    env = make_env(
        tmp_path / "proj",
        [cached_wheel("flashinfer-python", "0.6.4")],
        uv=UV,
        python=PY312,
        patchsets=("sm120-torch-symm-mem",),
        profile=None,
        locked=[("sglang", "0.5.9", None), ("flashinfer-python", "0.6.4", None)],
    )
    checkout = install_editable(env.python, tmp_path)
    from envforge.env.layout import Environment
    from envforge.recipe.project import Project
    from envforge.verify import VerifyOptions, verify

    report = verify(Environment(env.path), Project(tmp_path / "proj"), VerifyOptions(base_env=dict(os.environ)))
    found = [f.as_dict() for f in report.findings if f.kind in ("editable-install", "patch-state")]
    assert found == [
        {
            "kind": "editable-install",
            "level": "static",
            "subject": "sglang 0.5.9",
            "expected": "installed from a wheel into site-packages, where patchsets act",
            "actual": f"an editable install from {checkout} (sm120-torch-symm-mem not applied)",
            "fix": "apply the patchset's diff in the checkout (`envforge patches export sm120-torch-symm-mem "
            f"--site-packages {env.site_packages} -o sm120-torch-symm-mem.diff`, then `patch -p2 -d {checkout} < "
            "sm120-torch-symm-mem.diff`), or install the released wheel instead (`uv pip install --python "
            "<env>/bin/python sglang==0.5.9`) and run apply-patches again",
        }
    ]
