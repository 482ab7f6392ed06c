"""``envforge envs`` / ``env list``, ``rollback --to`` (back and forward) and ``envforge gc``, through
the real CLI on environments built with the real uv from a local index on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from envforge.env.inventory import disk_usage
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]
GEN_KEYS = [
    "name",
    "path",
    "complete",
    "live",
    "recipe",
    "variant",
    "lock_digest",
    "size_bytes",
    "own_bytes",
    "shared_bytes",
    "built_at",
    "log",
    "held_back",
    "made_live",
]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def data_of(res: subprocess.CompletedProcess[str], schema: str) -> Any:
    doc = json.loads(res.stdout)
    assert list(doc) == ["envforge", "schema", "data"] and doc["schema"] == schema
    return doc["data"]


@pytest.fixture
def proj(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    root = tmp_path / "p"
    (root / "recipes").mkdir(parents=True)
    with serve(idx):
        (root / "recipes" / "r.toml").write_text(
            f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nmodel-kernels = "==1.0"\n'
        )
        yield root


def lock_and_build(proj: Path, version: str) -> None:
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace('"==1.0"', f'"=={version}"').replace('"==2.0"', f'"=={version}"'))
    assert envforge(proj, "lock", "r").returncode == 0
    res = envforge(proj, "build", "r")
    assert res.returncode == 0, res.stderr


def test_no_environments_yet(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    res = envforge(tmp_path, "envs")
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == "no environments yet: `envforge up` or `envforge build RECIPE` makes one\n"
    assert data_of(envforge(tmp_path, "env", "list", "--json"), "envforge.envs/1") == {"environments": []}
    res = envforge(tmp_path, "envs", "nope", "--json")
    assert (
        res.returncode == 2
        and json.loads(res.stdout)["data"]["message"] == f"no environment named 'nope' in {tmp_path / 'envs'}"
    )


@pytest.mark.slow
def test_envs_rollback_to_and_forward_and_gc(proj: Path) -> None:
    lock_and_build(proj, "1.0")
    digest1 = "sha256:" + hashlib.sha256((proj / "lockfiles" / "pylock.r-default.toml").read_bytes()).hexdigest()
    lock_and_build(proj, "2.0")
    lock_and_build(proj, "2.0")
    digest2 = "sha256:" + hashlib.sha256((proj / "lockfiles" / "pylock.r-default.toml").read_bytes()).hexdigest()

    data = data_of(envforge(proj, "envs", "--json"), "envforge.envs/1")
    (env,) = data["environments"]
    assert (env["name"], env["link"], env["live"]) == ("r-default", str(proj / "envs" / "r-default"), "g0003")
    gens = env["generations"]
    assert [list(g) for g in gens] == [GEN_KEYS] * 3
    assert [(g["name"], g["complete"], g["live"], g["recipe"], g["variant"], g["lock_digest"]) for g in gens] == [
        ("g0001", True, False, "r", "default", digest1),
        ("g0002", True, False, "r", "default", digest2),
        ("g0003", True, True, "r", "default", digest2),
    ]
    root = proj / "envs" / ".generations" / "r-default"
    for g in gens:
        assert g["path"] == str(root / g["name"]) and g["log"] == str(root / f"{g['name']}.log")
        usage = disk_usage(root / g["name"])
        assert (g["own_bytes"], g["shared_bytes"]) == (usage.own_bytes, usage.shared_bytes)
        assert g["size_bytes"] == g["own_bytes"] + g["shared_bytes"] > 100_000
        assert time.time() - 600 < g["built_at"] <= time.time()
    assert (root / "g0003.log").read_text().splitlines()[-1] == "r-default -> g0003"

    human = envforge(proj, "env", "list").stdout.splitlines()
    assert human[0] == "r-default  (live: g0003)"
    assert human[3].startswith(f"  * g0003  r/default  {digest2[:19]}  ") and human[3].endswith(" s ago")

    back = envforge(proj, "rollback", "r-default", "--to", "g0001", "--json")
    assert data_of(back, "envforge.rollback/1") == {
        "env": "r-default",
        "link": str(proj / "envs" / "r-default"),
        "previous": "g0003",
        "current": "g0001",
    }
    fwd = envforge(proj, "rollback", "r-default", "--to", "3")
    assert (fwd.returncode, fwd.stdout) == (0, "envs/r-default: g0001 -> g0003\n")
    bad = envforge(proj, "rollback", "r-default", "--to", "g0009")
    assert bad.returncode == 2
    assert (
        bad.stderr.splitlines()[0]
        == "error: r-default has no complete generation 'g0009' (generations: g0001, g0002, g0003)"
    )

    gc = data_of(envforge(proj, "gc", "--keep", "1", "--json"), "envforge.gc/1")
    assert [(r["env"], r["generation"]) for r in gc["removed"]] == [("r-default", "g0001"), ("r-default", "g0002")]
    assert gc["kept"] == [{"env": "r-default", "generation": "g0003"}]
    assert gc["freed_bytes"] >= sum(r["own_bytes"] for r in gc["removed"]) > 0
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["g0003", "g0003.log"]
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0003"
    res = envforge(proj, "gc", "--keep", "0")
    assert res.returncode == 2 and res.stderr.startswith("error: --keep 0: keep at least 1 generation")


@pytest.mark.slow
def test_builds_no_longer_prune_silently(proj: Path) -> None:
    for _ in range(4):
        lock_and_build(proj, "1.0")
    data = data_of(envforge(proj, "envs", "--json"), "envforge.envs/1")
    assert [g["name"] for g in data["environments"][0]["generations"]] == ["g0001", "g0002", "g0003", "g0004"]


def _allocated(*paths: Path) -> int:
    return sum(os.lstat(p).st_blocks * 512 for p in paths)


def _fake_generation(envs: Path, name: str, files: dict[str, Path | bytes]) -> Path:
    """envs/.generations/e/<name>, complete, with each file written (bytes) or hardlinked (Path)."""
    gen = envs / ".generations" / "e" / name
    meta = gen / "lib" / "python3.12" / "site-packages" / ".envforge"
    meta.mkdir(parents=True)
    (meta / "generation.json").write_text('{"recipe": "r", "variant": "default", "lock-digest": "sha256:ab"}')
    for rel, what in files.items():
        if isinstance(what, Path):
            os.link(what, gen / rel)
        else:
            (gen / rel).write_bytes(what)
    return gen


def _tree(gen: Path, but: set[str] = set()) -> list[Path]:
    out = [gen]
    for d, dirs, files in os.walk(gen):
        out += [Path(d) / x for x in dirs] + [Path(d) / f for f in files if f not in but]
    return out


def test_envs_and_gc_count_hardlinks_into_uv_cache_as_shared_not_freed(tmp_path: Path) -> None:
    """Builds hardlink files from uv's cache: removing a generation frees only the inodes no other
    path keeps alive. g0001 and g0002 share `pair.so` (only between them), both share `cache.so` with
    a file outside (uv's cache); gc --keep 1 removes both, and frees pair.so once, never cache.so."""
    (tmp_path / "recipes").mkdir()
    envs = tmp_path / "envs"
    cache = tmp_path / "uv-cache" / "cache.so"
    cache.parent.mkdir()
    cache.write_bytes(os.urandom(1 << 20))
    g1 = _fake_generation(
        envs, "g0001", {"cache.so": cache, "pair.so": os.urandom(256 << 10), "own.py": os.urandom(64 << 10)}
    )
    g2 = _fake_generation(envs, "g0002", {"cache.so": cache, "pair.so": g1 / "pair.so"})
    g3 = _fake_generation(envs, "g0003", {"cache.so": cache})
    (envs / "e").symlink_to(".generations/e/g0003")
    shared = _allocated(cache)
    pair = _allocated(g1 / "pair.so")

    gens = data_of(envforge(tmp_path, "envs", "--json"), "envforge.envs/1")["environments"][0]["generations"]
    own1 = _allocated(*_tree(g1, {"cache.so", "pair.so"}))
    assert [(g["name"], g["own_bytes"], g["shared_bytes"]) for g in gens] == [
        ("g0001", own1, shared + pair),
        ("g0002", _allocated(*_tree(g2, {"cache.so", "pair.so"})), shared + pair),
        ("g0003", _allocated(*_tree(g3, {"cache.so"})), shared),
    ]
    assert shared == 1 << 20 and gens[0]["size_bytes"] == own1 + shared + pair

    human = envforge(tmp_path, "envs")
    assert human.returncode == 0
    line = human.stdout.splitlines()[1]
    assert line.startswith("    g0001  r/default  sha256:ab  ")
    assert f"  {own1 / 1024:.1f} KiB own (+{(shared + pair) / 1048576:.1f} MiB shared with uv's cache)  " in line

    freed = own1 + pair + _allocated(*_tree(g2, {"cache.so", "pair.so"}))
    gc = envforge(tmp_path, "gc", "--keep", "1")
    assert gc.returncode == 0, gc.stderr
    assert gc.stderr == (
        f"gc: removed 2 generations, freed {freed / 1024:.1f} KiB; kept 1; files hardlinked "
        "from uv's cache stay (`uv cache prune` frees those)\n"
    )
    assert gc.stdout.splitlines()[0].startswith("removed e/g0001  ")
    assert len(cache.read_bytes()) == 1 << 20 and not g1.exists() and not g2.exists()


def test_gc_json_freed_bytes_excludes_files_kept_alive_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    envs = tmp_path / "envs"
    cache = tmp_path / "uv-cache" / "cache.so"
    cache.parent.mkdir()
    cache.write_bytes(os.urandom(1 << 20))
    g1 = _fake_generation(envs, "g0001", {"cache.so": cache, "pair.so": os.urandom(256 << 10)})
    g2 = _fake_generation(envs, "g0002", {"cache.so": cache, "pair.so": g1 / "pair.so"})
    _fake_generation(envs, "g0003", {"cache.so": cache})
    (envs / "e").symlink_to(".generations/e/g0003")
    expected = _allocated(*_tree(g1, {"cache.so"})) + _allocated(*_tree(g2, {"cache.so", "pair.so"}))
    own = [_allocated(*_tree(g, {"cache.so", "pair.so"})) for g in (g1, g2)]
    pair = _allocated(g1 / "pair.so")

    gc = data_of(envforge(tmp_path, "gc", "--keep", "1", "--json"), "envforge.gc/1")
    assert gc == {
        "removed": [
            {"env": "e", "generation": "g0001", "own_bytes": own[0], "shared_bytes": (1 << 20) + pair},
            {"env": "e", "generation": "g0002", "own_bytes": own[1], "shared_bytes": (1 << 20) + pair},
        ],
        "kept": [{"env": "e", "generation": "g0003"}],
        "in_use": [],
        "freed_bytes": expected,
    }
    assert expected < (1 << 20) and len(cache.read_bytes()) == 1 << 20


_SLOW_BUILD = """
import sys, time
import envforge.env.build as build
real = build._manifest
def slow_manifest(*a, **k):
    time.sleep(3)  # the generation exists, incomplete, while gc lists
    return real(*a, **k)
build._manifest = slow_manifest
from envforge.cli import run
sys.argv = ["envforge", "build", "r"]
run()
"""

_SLOW_GC = """
import fcntl, os, sys, time
from pathlib import Path
import envforge.env.inventory as inv
real = inv.list_environments
link = Path("envs/r-default")
def build_done():
    if os.readlink(link).endswith("g0001"):
        return False
    with open("envs/.generations/r-default/.lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
    return True
def listing_then_wait(*a, **k):
    found = real(*a, **k)
    deadline = time.monotonic() + 60  # widen the window until the racing build has flipped and let go
    while time.monotonic() < deadline and not build_done():
        time.sleep(0.05)
    return found
inv.list_environments = listing_then_wait
from envforge.cli import run
sys.argv = ["envforge", "gc", "--keep", "100"]
run()
"""


def _live_is_intact(proj: Path) -> str:
    link = proj / "envs" / "r-default"
    record = link / "lib" / "python3.12" / "site-packages" / ".envforge" / "generation.json"
    assert record.is_file(), f"{os.readlink(link)} is gone"
    return os.readlink(link)


def test_gc_racing_a_build_never_removes_the_generation_the_build_makes_live(proj: Path) -> None:
    """Field case N48, two real processes: gc's listing is widened until the build has flipped;
    gc decides only on a listing made under the build lock, so the new live generation stays."""
    lock_and_build(proj, "1.0")
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace('"==1.0"', '"==2.0"'))
    assert envforge(proj, "lock", "r").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    build = subprocess.Popen(
        [sys.executable, "-c", _SLOW_BUILD],
        cwd=proj,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    gen = proj / "envs" / ".generations" / "r-default" / "g0002"
    deadline = time.monotonic() + 120
    while not (gen / "pyvenv.cfg").is_file() and time.monotonic() < deadline:
        time.sleep(0.02)
    gc = subprocess.run(
        [sys.executable, "-c", _SLOW_GC], cwd=proj, capture_output=True, text=True, timeout=120, env=env
    )
    _, err = build.communicate(timeout=120)
    assert build.returncode == 0, err
    assert "removed r-default/g0002" not in gc.stdout + gc.stderr
    assert gc.returncode in (0, 2), gc.stderr
    if gc.returncode == 2:  # it found the build's lock held: refused, named the lock
        assert "another envforge build of r-default is running" in gc.stderr
    assert _live_is_intact(proj) == ".generations/r-default/g0002"


def test_builds_and_gcs_at_random_moments_keep_the_live_generation(proj: Path) -> None:
    """Real build and gc processes started together at several offsets, bounded to about a minute:
    after each round the link points at a complete generation and gc removed nothing live."""
    lock_and_build(proj, "1.0")
    deadline = time.monotonic() + 60
    for delay in (0.0, 0.3, 0.6, 0.9, 1.2, 1.5):
        if time.monotonic() > deadline:
            break
        build = subprocess.Popen(
            [*ENVFORGE, "build", "r"], cwd=proj, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(delay)
        gc = envforge(proj, "gc", "--keep", "50")
        assert build.wait(timeout=120) in (0, 2)
        live = _live_is_intact(proj)
        assert f"r-default/{live.rsplit('/', 1)[1]}" not in gc.stdout, gc.stdout
