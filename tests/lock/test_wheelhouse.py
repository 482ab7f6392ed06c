"""envforge.lock.wheelhouse: an offline lock records index URLs and hashes, never the wheelhouse's
paths (issue 29), with the real uv, a real index on 127.0.0.1 and a wheelhouse directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )


def test_an_offline_relock_keeps_the_index_urls_and_a_new_wheel_is_refused(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(wheels, "tinypkg", "1.0"))
    house = tmp_path / "house"  # the wheelhouse: the same wheel files, carried to a machine without the index
    house.mkdir()
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    recipe = proj / "recipes" / "tiny.toml"
    lock = proj / "lockfiles" / "pylock.tiny-default.toml"
    with serve(idx):
        recipe.write_text(
            f'[recipe]\nname = "tiny"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\ntinypkg = "==1.0"\n'
        )
        assert envforge(proj, "lock", "tiny").returncode == 0
    online = lock.read_text()
    assert f'url = "{idx.url.removesuffix("/simple")}/files/tinypkg-1.0-py3-none-any.whl"' in online
    shutil.copy(wheels / "tinypkg-1.0-py3-none-any.whl", house)

    # the index is gone; the wheelhouse carries the same file: the lock keeps its URL and hash, byte for byte
    offline = envforge(proj, "lock", "tiny", "--offline", "--find-links", str(house))
    assert offline.returncode == 0, offline.stderr
    assert lock.read_text() == online and "file:" not in online
    assert envforge(proj, "lock", "tiny", "--check").returncode == 0

    # a wheel no lock records: refused, the lock unchanged
    make_wheel(house, "tinypkg", "1.1")
    recipe.write_text(recipe.read_text().replace("==1.0", "==1.1"))
    refused = envforge(proj, "lock", "tiny", "--offline", "--find-links", str(house))
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-2:] == [
        "error: pylock.tiny-default.toml (recipe tiny, variant default): an offline lock would record 1 wheelhouse "
        "file as local paths (tinypkg-1.1-py3-none-any.whl): a committed lock says where each file comes from (its "
        "index URL and sha256), never a path on this machine",
        "  hint: lock once where the indexes are reachable (`envforge lock tiny --variant default`) and commit it: "
        "offline relocks keep the URLs and hashes it records for the same files; a lock that stays on this machine: "
        "`envforge lock tiny --variant default --offline --find-links DIR --local-paths` (`lock --check` then calls "
        "it stale, except with --find-links DIR)",
    ]
    assert lock.read_text() == online

    # asked for: a lock for this machine only, which `lock --check` calls stale unless given its wheelhouse
    local = envforge(proj, "lock", "tiny", "--offline", "--find-links", str(house), "--local-paths")
    assert local.returncode == 0, local.stderr
    assert f'url = "file://{house.resolve()}/tinypkg-1.1-py3-none-any.whl"' in lock.read_text()
    check = envforge(proj, "lock", "tiny", "--check")
    assert check.returncode == 1
    assert check.stdout.splitlines() == [
        f"{lock}: stale",
        "  wheelhouse: 1 package locked as local paths, not index URLs (tinypkg; "
        f"file://{house.resolve()}/tinypkg-1.1-py3-none-any.whl): relock where the indexes are reachable: "
        "`envforge lock tiny --variant default`",
    ]
    assert envforge(proj, "lock", "tiny", "--check", "--find-links", str(house)).returncode == 0
