"""[provided]: a base interpreter's own distribution (a preinstalled torch) locked around, made
visible, never installed, and proved by verify: real uv, a real base venv holding a real wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envforge.env.provided import PTH_NAME
from tests.support.localindex import make_wheel

ENVFORGE = [sys.executable, "-m", "envforge"]
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
NO_INDEX: dict[str, str] = {}  # --offline: uv asks no index


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **NO_INDEX}
    )


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A base interpreter (itself a venv, as on the H200 image) that provides tinytorch 2.11.0+cu130."""
    house = tmp_path / "base-wheels"
    wheel = make_wheel(house, "tinytorch", "2.11.0+cu130")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "base")], check=True)
    py = tmp_path / "base" / "bin" / "python"
    uv = Path(sys.executable).with_name("uv")
    subprocess.run(
        [str(uv), "pip", "install", "--no-config", "--offline", "--python", str(py), str(wheel)],
        check=True,
        capture_output=True,
    )
    return py


def project(root: Path, provided: str = '"==2.11.0+cu130"') -> tuple[Path, tuple[str, ...]]:
    """A project whose app requires tinytorch==2.11.0+cu130, with app in an offline wheelhouse."""
    house = root / "wheelhouse"
    make_wheel(house, "app", "1.0", requires=["tinytorch==2.11.0+cu130"])
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "{PY}"\n\n[packages]\napp = "==1.0"\n\n[provided]\ntinytorch = {provided}\n'
    )
    return root, ("--offline", "--find-links", str(house))


def test_the_lock_leaves_the_provided_distribution_out_and_records_it(tmp_path: Path, base: Path) -> None:
    proj, offline = project(tmp_path / "p")
    res = envforge(proj, "lock", "r", *offline, "--local-paths")
    assert res.returncode == 0, res.stderr
    lock = tomllib.loads((proj / "lockfiles" / "pylock.r-default.toml").read_text())
    assert [p["name"] for p in lock["packages"]] == ["app"]  # uv --excludes: tinytorch neither locked nor looked up
    assert lock["tool"]["envforge"]["provided"] == [
        {"name": "tinytorch", "version": "2.11.0+cu130", "import": "tinytorch"}
    ]
    assert lock["tool"]["envforge"]["inputs"]["provided"] == ["tinytorch==2.11.0+cu130 import=tinytorch"]


def test_build_makes_it_visible_without_installing_it_and_verify_proves_it(tmp_path: Path, base: Path) -> None:
    proj, offline = project(tmp_path / "p")
    assert envforge(proj, "lock", "r", *offline, "--local-paths").returncode == 0
    res = envforge(proj, "build", "r", *offline, "--python", str(base))
    assert res.returncode == 0, res.stderr
    env_py = proj / "envs" / "r-default" / "bin" / "python"
    sp = next((proj / "envs" / "r-default").glob("lib/python3*/site-packages"))
    assert not list(sp.glob("tinytorch*"))  # never installed
    base_sp = next(base.parent.parent.glob("lib/python3*/site-packages"))
    assert (sp / PTH_NAME).read_text() == f"{base_sp}\n"
    out = subprocess.run(
        [str(env_py), "-c", "import tinytorch, app; print(tinytorch.__version__, tinytorch.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == "2.11.0+cu130" and out[1].startswith(str(base_sp))
    record = json.loads((sp / ".envforge" / "provided.json").read_text())
    assert record == {
        "schema": 1,
        "base-python": str(base),
        "site-packages": [str(base_sp)],
        "pth": PTH_NAME,
        "provided": [{"name": "tinytorch", "version": "2.11.0+cu130", "import": "tinytorch"}],
    }

    verify = envforge(proj, "verify", "r-default", "--level", "static", "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = json.loads(verify.stdout)["data"]
    check = next(c for c in report["checks"] if c["name"] == "provided")
    assert check["status"] == "ok"
    assert check["detail"] == f"tinytorch 2.11.0+cu130 (import 2.11.0+cu130) from {base_sp}"
    assert PTH_NAME not in json.dumps(report["notes"])  # owned: no unowned-file note about it


def test_verify_fails_when_the_base_provides_another_version(tmp_path: Path, base: Path) -> None:
    proj, offline = project(tmp_path / "p", provided='{ version = "==2.11.0+cu128", import = "tinytorch" }')
    (proj / "wheelhouse" / "app-1.0-py3-none-any.whl").unlink()
    make_wheel(proj / "wheelhouse", "app", "1.0", requires=["tinytorch"])
    assert envforge(proj, "lock", "r", *offline, "--local-paths").returncode == 0
    assert envforge(proj, "build", "r", *offline, "--python", str(base)).returncode == 0
    verify = envforge(proj, "verify", "r-default", "--level", "static", "--json")
    assert verify.returncode == 1
    found = [f for f in json.loads(verify.stdout)["data"]["findings"] if f["kind"] == "provided"]
    base_sp = next(base.parent.parent.glob("lib/python3*/site-packages"))
    assert [(f["subject"], f["expected"], f["actual"]) for f in found] == [
        (
            "tinytorch",
            "tinytorch 2.11.0+cu128 provided by the base interpreter",
            f"its metadata says 2.11.0+cu130 ({base_sp})",
        ),
        (
            "tinytorch (import tinytorch)",
            "tinytorch.__version__ == '2.11.0+cu128'",
            f"tinytorch.__version__ is '2.11.0+cu130' ({base_sp}/tinytorch/__init__.py)",
        ),
    ]


def test_a_provided_distribution_named_in_packages_too_is_refused(tmp_path: Path) -> None:
    proj, _ = project(tmp_path / "p")
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace('app = "==1.0"', 'app = "==1.0"\ntinytorch = "==2.11.0"'))
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2
    assert "packages.tinytorch: 'tinytorch' is declared in [provided]" in res.stderr


def test_a_provided_range_is_refused(tmp_path: Path) -> None:
    proj, _ = project(tmp_path / "p", provided='">=2.11"')
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2
    assert (
        "provided.tinytorch: '>=2.11' does not pin one exact version; write the version the base "
        "interpreter reports, local label included, e.g. '==2.11.0+cu130'"
    ) in res.stderr
