"""One next step for a patched file changed under envforge, through the real CLI: `apply-patches`,
`apply-patches --revert` and `verify` all name a command that works for the environment's state
(a rebuild of the recipe/variant it was built from; never `apply-patches`, which refuses a drifted
file). Real sglang 0.5.9 / flashinfer-python 0.6.4 wheels installed with the real uv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import uv
from tests.conftest import cached_wheel
from tests.support.verify_envs import make_env
from tests.support.pythons import python_for

from envforge.patching import read_manifest

PY312 = str(python_for("3.12"))
pytestmark = pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")
REBUILD = (
    "rebuild the environment: `envforge build quickstart --variant default` (or `envforge up --rebuild`) "
    "(a fresh generation, patched from its lock)"
)
NOT_BUILT = (
    "this environment was not built by envforge: reinstall the patched distributions (`uv pip install "
    "--python <env>/bin/python --reinstall DIST==VERSION`), then run `envforge apply-patches` again"
)


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_drifted_patched_file_gets_the_same_working_fix_everywhere(tmp_path: Path) -> None:
    env = make_env(
        tmp_path / "proj",
        [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")],
        uv=uv.find_uv_bin(),
        python=PY312,
    )
    proj = tmp_path / "proj"
    manifest = read_manifest(env.site_packages)
    assert manifest is not None
    path = env.site_packages / manifest.files[0].path
    data = path.read_bytes()
    path.unlink()  # a new file: the installed one may be a hardlink into uv's cache
    path.write_bytes(data + b"# edited after the patch\n")

    revert = envforge(proj, "apply-patches", "quickstart-default", "--revert")
    assert revert.returncode == 1 and revert.stderr.splitlines()[-1] == f"  hint: {REBUILD}"
    again = envforge(proj, "apply-patches", "quickstart-default")
    assert again.returncode == 1
    assert f"Next step: undo the edit, or {REBUILD}; to keep the change, write it as a patchset" in again.stderr

    report = json.loads(envforge(proj, "verify", "quickstart-default", "--json").stdout)["data"]
    fixes = {f["kind"]: f["fix"] for f in report["findings"]}
    expected = (
        "undo the edit, or rebuild the environment: `envforge build quickstart --variant default` (a fresh "
        "generation, patched from its lock)"
    )
    assert fixes["tampered"] == expected + "; to keep the change, write it as a patchset, relock and rebuild"
    assert fixes["patch-state"] == expected
    assert not [f for f in fixes.values() if "apply-patches" in f]

    manifest_file = env.site_packages / ".envforge" / "patches.json"
    saved = manifest_file.read_bytes()
    manifest_file.write_text("{not json")  # the record itself damaged: the same rebuild
    broken = envforge(proj, "apply-patches", "quickstart-default", "--revert")
    assert (
        broken.returncode == 2 and broken.stderr.splitlines()[-1] == f"  hint: restore it from a backup, or {REBUILD}"
    )
    manifest_file.write_bytes(saved)

    (env.site_packages / ".envforge" / "generation.json").unlink()  # a venv envforge did not build
    revert = envforge(proj, "apply-patches", "quickstart-default", "--revert")
    assert revert.returncode == 1 and revert.stderr.splitlines()[-1] == f"  hint: {NOT_BUILT}"
