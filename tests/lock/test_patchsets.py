"""A listed patchset that stops applying after an upgrade (field case B41; envforge.lock.patchsets).

Real inputs, as the field case has them: recipe ``gk`` routing guardkit to a local PEP 503 index on
127.0.0.1, patchset ``guardkit-sm120`` (``versions = ">=1.0,<1.1"``, one add-list-element operation
on guardkit/arch.py), guardkit 1.0 and 1.1 wheels built here (the 1.1 code still lacks SM120). Locked
by the real uv; built with the real uv; verified; lock diff of the real locks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomlkit

from envforge.cli import main
from envforge.core.state import StateDir
from envforge.env.layout import Environment, site_packages
from envforge.recipe.project import Project
from envforge.verify import VerifyOptions, verify
from tests.support.localindex import LocalIndex, make_wheel, serve
from tests.support.pythons import python_for

PY312 = str(python_for("3.12"))
ARCH = (
    "def get_flags(supported_major_versions):\n    return supported_major_versions\n\n\n"
    "def build_flags():\n    return get_flags(supported_major_versions=[9, 10])\n"
)
PATCHSET = """\
[patchset]
id = "guardkit-sm120"
distribution = "guardkit"
versions = ">=1.0,<1.1"
reason = "SM120 missing from the capability list (read on guardkit 1.0 only)"

[[operation]]
kind = "add-list-element"
file = "guardkit/arch.py"
function = "build_flags"
call = "get_flags"
keyword = "supported_major_versions"
element = "12"
anchor = "[9, 10]"
"""
DIGEST = "sha256:" + hashlib.sha256(PATCHSET.encode()).hexdigest()
REASON = "1.1 has SM120 itself"
RETIRE = f'retire-patchsets = [{{ id = "guardkit-sm120", reason = "{REASON}" }}]\n'
LOCK = "pylock.gk-default.toml"
REFUSED = (
    "error: pylock.gk-default.toml (recipe gk, variant default): the recipe lists a patchset that does not apply "
    "to the locked versions; a build would skip it and the fix would be gone:\n"
    "  patchset guardkit-sm120 does not apply to the locked guardkit 1.1 (its versions: >=1.0,<1.1)\n"
    "  hint: check guardkit-sm120 on guardkit==1.1 (`envforge patches check guardkit-sm120 --against guardkit==1.1`) "
    "and widen `versions` in patchsets/guardkit-sm120.toml, or retire it with the reason: retire-patchsets = "
    '[{ id = "guardkit-sm120", reason = "..." }] under [variant.default] (or [recipe] for every variant) of '
    "recipes/gk.toml, then `envforge lock gk --variant default`\n"
)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    root = tmp_path_factory.mktemp("gk-index")
    idx = LocalIndex(root / "simple")
    for version in ("1.0", "1.1"):
        idx.add(
            make_wheel(
                root / "w",
                "guardkit",
                version,
                files={"guardkit/__init__.py": f'__version__ = "{version}"\n', "guardkit/arch.py": ARCH},
            )
        )
    with serve(idx):
        yield idx


def project(root: Path, index: LocalIndex, version: str, retire: str = "") -> Path:
    """The field case's project: recipes/gk.toml (guardkit ``==version``), patchsets/guardkit-sm120.toml."""
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    (root / "patchsets").mkdir(exist_ok=True)
    (root / "patchsets" / "guardkit-sm120.toml").write_text(PATCHSET)
    (root / "recipes" / "gk.toml").write_text(
        f'[recipe]\nname = "gk"\npython = "3.12"\nresolution = "no-deps"\npatchsets = ["guardkit-sm120"]\n{retire}\n'
        f'[packages]\nguardkit = {{ version = "=={version}", index = "gk-local" }}\n\n'
        f'[indexes]\ngk-local = "{index.url}"\n'
    )
    return root


def lock(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["lock", "gk", "--project", str(root), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def tool(root: Path) -> dict:  # type: ignore[type-arg]
    return tomllib.loads((root / "lockfiles" / LOCK).read_text())["tool"]["envforge"]


def unretired(text: str) -> str:
    """A 1.1 lock as envforge wrote it before B41: the patchset listed, nothing retired (same packages)."""
    doc = tomlkit.parse(text)
    table = doc["tool"]["envforge"]
    del table["retired-patchsets"]
    table["patchsets"] = [{"id": "guardkit-sm120", "digest": DIGEST}]
    return tomlkit.dumps(doc)


def test_lock_at_1_0_records_the_patchset(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, index, "1.0")
    assert lock(root, capsys)[0] == 0
    recorded = tool(root)
    assert [p["id"] for p in recorded["patchsets"]] == ["guardkit-sm120"]
    assert "retired-patchsets" not in recorded


def test_lock_at_1_1_refuses_the_patchset_that_no_longer_applies(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, index, "1.0")
    assert lock(root, capsys)[0] == 0
    before = (root / "lockfiles" / LOCK).read_bytes()
    project(tmp_path, index, "1.1")
    code, out, err = lock(root, capsys)
    assert (code, out, err[err.index("error: ") :]) == (1, "", REFUSED)
    assert (root / "lockfiles" / LOCK).read_bytes() == before  # nothing written


def test_a_retirement_locks_records_its_reason_and_lock_diff_says_it(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path, index, "1.0")
    assert lock(root, capsys)[0] == 0
    shutil.copy(root / "lockfiles" / LOCK, tmp_path / "pylock.gk-1.0.toml")
    project(tmp_path, index, "1.1", RETIRE)
    assert lock(root, capsys)[0] == 0
    recorded = tool(root)
    assert (recorded["patchsets"], recorded["retired-patchsets"]) == ([], [{"id": "guardkit-sm120", "reason": REASON}])
    path = root / "lockfiles" / LOCK
    monkeypatch.setenv("ENVFORGE_UV", "/bin/false")  # --check never starts uv
    assert lock(root, capsys, "--check") == (0, f"{path}: up to date\n", "")
    # the retirement dropped from the recipe: the lock is stale, and says why
    project(tmp_path, index, "1.1")
    code, out, _ = lock(root, capsys, "--check")
    assert (code, out.splitlines()) == (
        1,
        [
            f"{path}: stale",
            f"  patchsets.guardkit-sm120: locked (absent), patchset file now digest={DIGEST}",
            f"  retired-patchsets.guardkit-sm120: locked reason={REASON}, recipe now (absent)",
            "  patchsets.guardkit-sm120: does not apply to the locked guardkit 1.1 (its versions: >=1.0,<1.1); check "
            "guardkit-sm120 on guardkit==1.1 (`envforge patches check guardkit-sm120 --against guardkit==1.1`) and "
            "widen `versions` in patchsets/guardkit-sm120.toml, or retire it with the reason: retire-patchsets = "
            '[{ id = "guardkit-sm120", reason = "..." }]',
        ],
    )
    monkeypatch.chdir(root)
    assert main(["lock", "diff", str(tmp_path / "pylock.gk-1.0.toml"), str(path)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert (
        f"  patchset: guardkit-sm120 no longer applies to guardkit 1.1 (versions >=1.0,<1.1; retired: {REASON})"
        in shown
    )
    assert f"  retired-patchset guardkit-sm120: added reason={REASON}" in shown
    # the field's two locks (1.1 written before B41, the patchset still listed): the same line, no retirement
    (tmp_path / "pylock.gk-1.1.toml").write_text(unretired(path.read_text()))
    assert (
        main(
            [
                "lock",
                "diff",
                str(tmp_path / "pylock.gk-1.0.toml"),
                str(tmp_path / "pylock.gk-1.1.toml"),
                "--format",
                "markdown",
            ]
        )
        == 0
    )
    assert (
        "| `patchset` | guardkit-sm120 no longer applies to guardkit 1.1 (versions >=1.0,<1.1) |"
        in capsys.readouterr().out.splitlines()
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")
def test_build_refuses_and_verify_finds_a_patchset_out_of_range(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path, index, "1.1", RETIRE)
    assert lock(root, capsys)[0] == 0
    assert main(["build", "gk", "--python", PY312, "--project", str(root)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    link = root / "envs" / "gk-default"
    # the environment of a lock made before B41: guardkit 1.1 installed, the patchset still listed
    old = unretired((root / "lockfiles" / LOCK).read_text())
    (root / "lockfiles" / LOCK).write_text(old)
    StateDir(site_packages(link.resolve())).lock_copy.write_text(old)
    project(tmp_path, index, "1.1")
    report = verify(Environment(link), Project(root), VerifyOptions(levels=("static",), base_env=dict(os.environ)))
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        (
            "patchset-out-of-range",
            "guardkit-sm120",
            "guardkit>=1.0,<1.1 (the patchset's versions)",
            "guardkit 1.1 installed: guardkit-sm120 is not applied (out-of-range)",
        )
    ]
    assert report.findings[0].fix == (
        "check the fix on guardkit 1.1 and widen `versions` in patchsets/guardkit-sm120.toml, or retire it in the "
        'recipe with the reason (retire-patchsets = [{ id = "guardkit-sm120", reason = "..." }]); then relock '
        "(`envforge lock gk --variant default`) and rebuild (`envforge build gk --variant default`)"
    )
    # a build from that lock stops before anything is built
    assert main(["build", "gk", "--python", PY312, "--project", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {root / 'lockfiles' / LOCK}: the recipe lists a patchset that does not apply")
    assert "  patchset guardkit-sm120 does not apply to the locked guardkit 1.1 (its versions: >=1.0,<1.1)\n" in err
    assert sorted(p.name for p in (root / "envs" / ".generations" / "gk-default").iterdir()) == [
        ".lock",
        "g0001",
        "g0001.log",
    ]
