"""The guards ``envforge lock`` runs on uv's resolution (envforge.lock.guards), through the real CLI
and the real uv.

``exclude-newer`` with ``--find-links`` (issue 27, fault suite N32): a wheelhouse has no upload times and
uv keeps its files whatever their date, so a lock made from one would record a cutoff that did not
hold. envforge refuses it (exit 2, nothing written) unless the package is exempt, with its reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.localindex import make_wheel

ENVFORGE = [sys.executable, "-m", "envforge"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))


def project(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    house = tmp_path / "wheelhouse"
    for v in ("1.0", "1.1"):  # built today: both far newer than the cutoff
        make_wheel(house, "tinypkg", v)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "lowt.toml").write_text(
        '[recipe]\nname = "lowt"\npython = "3.12"\nexclude-newer = "0001-01-01T00:00:00Z"\n\n'
        f'[packages]\ntinypkg = ">=1.0"\n{extra}')
    return tmp_path, house


def test_exclude_newer_with_find_links_is_refused_not_silently_unapplied(tmp_path: Path) -> None:
    proj, house = project(tmp_path)
    res = envforge(proj, "lock", "lowt", "--offline", "--find-links", str(house))
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-2:] == [
        "error: lowt-default: [recipe] exclude-newer (0001-01-01T00:00:00Z) cannot be applied to files from "
        "--find-links, which have no upload times (uv keeps them whatever their date), and the lock would record "
        "the cutoff as if it held: tinypkg 1.1",
        "  hint: lock where the index is reachable, without --find-links (uv reads the index's upload times), or "
        "exempt each package with the reason reviewers read: [exclude-newer-exempt] tinypkg = \"from a wheelhouse, "
        "no upload times\" (recorded in the lock's inputs)"]
    assert not (proj / "lockfiles").exists()


def test_an_exempt_package_from_find_links_is_locked_and_the_exemption_recorded(tmp_path: Path) -> None:
    proj, house = project(tmp_path, '\n[exclude-newer-exempt]\ntinypkg = "from a wheelhouse, no upload times"\n')
    res = envforge(proj, "lock", "lowt", "--offline", "--find-links", str(house), "--local-paths")
    assert res.returncode == 0, res.stderr
    data = tomllib.loads((proj / "lockfiles" / "pylock.lowt-default.toml").read_text())
    assert [(p["name"], p["version"]) for p in data["packages"]] == [("tinypkg", "1.1")]
    assert data["tool"]["envforge"]["inputs"]["exclude-newer-exempt"] == [
        "tinypkg: from a wheelhouse, no upload times"]
