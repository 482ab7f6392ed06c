"""A source build that needs torch at build time is built against the locked torch (field case B55),
for real: real uv, a local index with two torch-like versions, an sdist whose setup.py records the
torch-like version present when it was built (as a compiled extension is bound to it)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from envforge.env.buildconstraints import build_constraints
from envforge.lock.model import LockedPackage
from tests.conftest import cached_wheel
from tests.support.localindex import LocalIndex, make_wheel, serve

SETUP = """import torchlike
from setuptools import setup
open("extkit/_built_with.py", "w").write(f"TORCHLIKE = {torchlike.__version__!r}\\n")
setup(packages=["extkit"])
"""
PYPROJECT = """[build-system]
requires = ["setuptools", "torchlike"]
build-backend = "setuptools.build_meta"
[project]
name = "extkit"
version = "1.0"
dependencies = ["torchlike"]
"""
PKG_INFO = "Metadata-Version: 2.2\nName: extkit\nVersion: 1.0\nRequires-Dist: torchlike\n"


def sdist(dest: Path) -> Path:
    path = dest / "extkit-1.0.tar.gz"
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        for name, text in (
            ("PKG-INFO", PKG_INFO),
            ("setup.py", SETUP),
            ("pyproject.toml", PYPROJECT),
            ("extkit/__init__.py", ""),
        ):
            data = text.encode()
            info = tarfile.TarInfo(f"extkit-1.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_build_constraints_pin_every_locked_distribution_after_the_recorded_backend() -> None:
    packages = [
        LockedPackage("torchlike", "2.9.1", None, None, ()),
        LockedPackage("Setuptools", "80.0", None, None, ()),
        LockedPackage("nv_x", "1.0+cu130", "sys_platform == 'linux'", None, ()),
        LockedPackage("vcs", None, None, None, ()),
    ]
    tool = {"build-constraints": ["setuptools==80.9.0"], "build-from-source": [{"name": "extkit", "reason": "r"}]}
    assert build_constraints(tool, packages) == [
        "setuptools==80.9.0",
        "torchlike==2.9.1",
        "nv_x==1.0+cu130 ; sys_platform == 'linux'",
    ]
    assert build_constraints({}, packages[:1]) == ["torchlike==2.9.1"]


@pytest.mark.slow
def test_an_opted_in_source_build_gets_the_locked_torch_not_the_newest(tmp_path: Path) -> None:
    idx = LocalIndex(tmp_path / "index")
    for version in ("2.9.1", "2.10.0"):
        idx.add(make_wheel(tmp_path / "w", "torchlike", version))
    idx.add(cached_wheel("setuptools", "80.9.0"))
    idx.add(sdist(tmp_path / "s"))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    env = {**os.environ, "UV_NO_CONFIG": "1"}
    with serve(idx):
        (proj / "recipes" / "ext.toml").write_text(
            f'[recipe]\nname = "ext"\npython = "3.12"\nresolution = "full"\nbuild-constraints = ["setuptools==80.9.0"]\n\n'
            f'[indexes]\nlocal = "{idx.url}"\n\n[packages]\ntorchlike = {{ version = "==2.9.1", index = "local" }}\n'
            'extkit = { version = "==1.0", index = "local" }\n\n'
            '[build-from-source]\nextkit = "upstream ships no wheel for this torch/CUDA"\n'
        )
        for step in (["lock", "ext"], ["build", "ext"]):
            res = subprocess.run(
                [sys.executable, "-m", "envforge", *step],
                cwd=proj,
                capture_output=True,
                text=True,
                timeout=600,
                env=env,
            )
            assert res.returncode == 0, (step, res.stdout, res.stderr[:3000])
    built = next((proj / "envs" / "ext-default").resolve().glob("lib/python3*/site-packages/extkit/_built_with.py"))
    assert built.read_text() == "TORCHLIKE = '2.9.1'\n"  # the lock's, while 2.10.0 is the newest on the index
