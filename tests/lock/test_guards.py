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
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )


def project(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    house = tmp_path / "wheelhouse"
    for v in ("1.0", "1.1"):  # built today: both far newer than the cutoff
        make_wheel(house, "tinypkg", v)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "lowt.toml").write_text(
        '[recipe]\nname = "lowt"\npython = "3.12"\nexclude-newer = "0001-01-01T00:00:00Z"\n\n'
        f'[packages]\ntinypkg = ">=1.0"\n{extra}'
    )
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
        'exempt each package with the reason reviewers read: [exclude-newer-exempt] tinypkg = "from a wheelhouse, '
        "no upload times\" (recorded in the lock's inputs)",
    ]
    assert not (proj / "lockfiles").exists()


def test_an_exempt_package_from_find_links_is_locked_and_the_exemption_recorded(tmp_path: Path) -> None:
    proj, house = project(tmp_path, '\n[exclude-newer-exempt]\ntinypkg = "from a wheelhouse, no upload times"\n')
    res = envforge(proj, "lock", "lowt", "--offline", "--find-links", str(house), "--local-paths")
    assert res.returncode == 0, res.stderr
    data = tomllib.loads((proj / "lockfiles" / "pylock.lowt-default.toml").read_text())
    assert [(p["name"], p["version"]) for p in data["packages"]] == [("tinypkg", "1.1")]
    assert data["tool"]["envforge"]["inputs"]["exclude-newer-exempt"] == ["tinypkg: from a wheelhouse, no upload times"]


def test_an_override_of_a_routed_package_is_not_silently_outside_the_cutoff(tmp_path: Path) -> None:
    """An override of a routed package is found through the index's page as --find-links (B51), which has no
    upload times: with exclude-newer 2024-01-01, uv locked kit 1.1, uploaded 2025-06-01. Refused unless exempt."""
    from tests.support.localindex import LocalIndex, serve

    built = tmp_path / "built"
    default, cuda = LocalIndex(tmp_path / "default"), LocalIndex(tmp_path / "cuda")
    default.add(make_wheel(built / "d", "app", "1.0", requires=["kit==1.0"]), upload_time="2023-01-01T00:00:00Z")
    for version, uploaded in (("1.0", "2023-01-01T00:00:00Z"), ("1.1", "2025-06-01T00:00:00Z")):
        cuda.add(make_wheel(built / "c", "kit", version), upload_time=uploaded)
    with serve(default), serve(cuda):
        (tmp_path / "recipes").mkdir()
        recipe = (
            f'[recipe]\nname = "r"\npython = "3.12"\nexclude-newer = "2024-01-01T00:00:00Z"\n\n'
            f'[indexes]\npypi = "{default.url}"\ncu130 = "{cuda.url}"\n\n'
            '[packages]\napp = "==1.0"\nkit = { version = ">=1.0", index = "cu130" }\n\n'
            '[overrides]\nkit = { version = ">=1.0", reason = "upstream pins kit 1.0" }\n'
        )
        (tmp_path / "recipes" / "r.toml").write_text(recipe)
        res = envforge(tmp_path, "lock", "r")
        assert res.returncode == 2, res.stderr
        assert res.stderr.splitlines()[-2:] == [
            "error: r-default: [recipe] exclude-newer (2024-01-01T00:00:00Z) cannot be applied to kit 1.1: an override "
            "of a package routed to an index is looked up through that index's page of the package given as "
            "--find-links (B51, uv#16933), which has no upload times, so uv keeps its files whatever their date, "
            "and the lock would record the cutoff as if it held",
            '  hint: exempt it with the reason reviewers read: [exclude-newer-exempt] kit = "override of a routed '
            "package: no upload times\" (recorded in the lock's inputs), and pin the override with ==; or drop the "
            "override",
        ]
        assert not (tmp_path / "lockfiles").exists()
        (tmp_path / "recipes" / "r.toml").write_text(recipe + '\n[exclude-newer-exempt]\nkit = "B51 route"\n')
        ok = envforge(tmp_path, "lock", "r")
        assert ok.returncode == 0, ok.stderr
        data = tomllib.loads((tmp_path / "lockfiles" / "pylock.r-default.toml").read_text())
        assert {p["name"]: p["version"] for p in data["packages"]} == {"app": "1.0", "kit": "1.1"}
        assert data["tool"]["envforge"]["inputs"]["exclude-newer-exempt"] == ["kit: B51 route"]
