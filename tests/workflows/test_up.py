"""``envforge up`` (envforge.workflows.up) on a live generation damaged after it was built: real
quickstart build (real uv, the real sglang 0.5.9 and flashinfer-python 0.6.4 wheels), real damage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.localindex import LocalIndex, make_wheel, serve
from tests.support.verify_envs import DAMAGE_KIND, build_quickstart, damaged

from envforge.core.kinds import REGISTRY
from envforge.verify import Finding
from envforge.verify.variables import misread_findings as _misread
from envforge.workflows.up import repairable

ROOT = Path(__file__).resolve().parents[2]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )


def _built_quickstart(tmp_path: Path) -> Path:
    """A copy of the project with the quickstart environment built by `envforge up`."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for d in ("recipes", "patchsets", "lockfiles"):
        subprocess.run(["cp", "-rL", str(ROOT / d), str(proj / d)], check=True)
    first = envforge(proj, "up")
    if first.returncode != 0 and "cannot reach" in first.stderr:
        pytest.skip("the package index cannot be reached")
    assert first.returncode == 0, first.stderr
    return proj


@pytest.mark.slow
def test_up_rebuilds_a_live_generation_damaged_since_it_was_built(tmp_path: Path) -> None:
    proj = _built_quickstart(tmp_path)
    sp = next((proj / "envs" / "quickstart-default").glob("lib/python3*/site-packages"))
    (sp / "sglang" / "version.py").unlink()  # a file removed
    edited = sp / "sglang" / "lang" / "api.py"  # a file edited as `sed -i` does: a new file replaces it
    edited.unlink()  # (writing in place would write through uv's hardlink into the shared cache)
    edited.write_text("raise SystemExit\n")
    damaged = envforge(proj, "verify")
    assert damaged.returncode == 1 and "missing-file: sglang 0.5.9: sglang/version.py" in damaged.stdout

    again = envforge(proj, "up", "--json")
    assert again.returncode == 0, again.stderr
    assert (
        "[2/3] build quickstart-default: reusing g0001 (built from this lock; --rebuild to force a new one); "
        "verifying before trusting it\n"
        "[3/3] verify quickstart-default\n"
        "  damaged: g0001 fails verify (missing-file, tampered): its files changed since it was built; "
        "rebuilding as g0002 from the same lock (g0001 stays for rollback)\n"
    ) in again.stderr
    assert "up to date" not in again.stderr.split("[2/3]", 1)[1]  # never about the generation it replaces
    assert "[3/3] verify quickstart-default again" in again.stderr
    data = json.loads(again.stdout)["data"]
    assert (data["build"]["generation"], data["reused"], data["verify"]["clean"]) == ("g0002", None, True)
    assert sorted({f["kind"] for f in data["damaged"]["findings"]}) == ["missing-file", "tampered"]
    assert os.readlink(proj / "envs" / "quickstart-default").endswith("g0002")
    assert (proj / "envs" / ".generations" / "quickstart-default" / "g0001").is_dir()  # kept for rollback

    third = envforge(proj, "up")  # intact now: reused, no third generation
    assert third.returncode == 0
    assert (
        "[2/3] build quickstart-default: reusing g0002 (built from this lock; --rebuild to force a new one); "
        "verifying before trusting it\n"
    ) in third.stderr


def test_only_damage_a_rebuild_repairs_triggers_one() -> None:
    hook_gone = Finding(
        "env-profile",
        "hook",
        "profile pcie installed (.envforge/env-profile.json)",
        "no env profile installed",
        "reinstall",
    )
    (misread,) = _misread({"NCCL_BUFFSIZE": "128K"})  # about the recipe: every build from this lock has it
    assert (misread.kind, misread.from_recipe, hook_gone.from_recipe) == ("env-profile", True, False)
    assert [repairable(f) for f in (hook_gone, misread)] == [True, False]
    # the structured reason, not the text: the same words without it are damage a rebuild repairs
    assert repairable(replace(misread, from_recipe=False)) is True
    assert repairable(replace(hook_gone, from_recipe=True)) is False
    assert [
        repairable(Finding(k, "s", "e", "a", "f"))
        for k in ("tampered", "missing-file", "file-conflict", "capability", "patchset-changed")
    ] == [True, True, False, False, False]


@pytest.mark.parametrize("kind", sorted(REGISTRY))
def test_a_rebuild_is_for_the_kinds_the_registry_says_it_repairs(kind: str) -> None:
    level = REGISTRY[kind].level
    assert repairable(Finding(kind, "s", "e", "a", "f", level)) is REGISTRY[kind].rebuild_repairs
    assert repairable(Finding(kind, "s", "e", "a", "f", level, from_recipe=True)) is False


def test_drafter_and_unknown_kinds_are_not_repaired_by_a_rebuild() -> None:
    assert [repairable(Finding(k, "s", "e", "a", "f", "drafter")) for k in ("eagle3-d2t", "no-such-kind")] == [
        False,
        False,
    ]


@pytest.mark.slow
def test_up_rebuilds_a_generation_whose_interpreter_is_gone(tmp_path: Path) -> None:
    """`envforge up` on a live generation whose bin/python was removed: verify could not start the
    interpreter and up stopped with exit 3 ("is the environment built? run `envforge build`"),
    though a rebuild repairs it. Now up says so and rebuilds from the same lock."""
    proj = _built_quickstart(tmp_path)
    python = proj / "envs" / "quickstart-default" / "bin" / "python"
    python.unlink()
    again = envforge(proj, "up", "--json")
    assert again.returncode == 0, again.stderr
    assert (
        f"  damaged: g0001 cannot run its interpreter (cannot start {python}: No such file or directory); "
        "rebuilding as g0002 from the same lock (g0001 stays for rollback)\n"
    ) in again.stderr
    data = json.loads(again.stdout)["data"]
    assert (data["build"]["generation"], data["reused"], data["verify"]["clean"], data["damaged"]) == (
        "g0002",
        None,
        True,
        None,
    )
    assert os.readlink(proj / "envs" / "quickstart-default").endswith("g0002")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with ``envs/quickstart-default`` built by the real ``envforge build quickstart``."""
    return build_quickstart(tmp_path_factory.mktemp("state").resolve() / "proj")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fifo", "dev-zero", "directory", "oversized"])
def test_up_on_a_damaged_generation_record_is_exit_2_naming_it(quickstart: Path, how: str) -> None:
    """`up` reads the live generation's generation.json to decide whether to reuse it: a FIFO there
    must not block it; one error line and a working hint, nothing built. `envs` lists it."""
    proj = quickstart
    gen = proj / "envs" / ".generations" / "quickstart-default" / "g0001"
    path = next(gen.glob("lib/python3*/site-packages")) / ".envforge" / "generation.json"
    with damaged(path, how, limit=1 << 20):
        res = subprocess.run(
            [sys.executable, "-m", "envforge", "up"],
            cwd=proj,
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
        listed = subprocess.run(
            [sys.executable, "-m", "envforge", "envs"],
            cwd=proj,
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
    reason = (
        "is larger than 1 MiB: envforge never writes one that large"
        if how == "oversized"
        else f"is not a regular file ({DAMAGE_KIND[how]})"
    )
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-2:] == [
        f"error: generation record {path} {reason}",
        "  hint: build a new generation: `envforge up quickstart --variant default --rebuild` (g0001 stays for rollback)",
    ]
    assert "Traceback" not in res.stderr
    assert os.readlink(proj / "envs" / "quickstart-default").endswith("g0001")  # nothing built or flipped
    # `envforge envs` lists it (its record unknown) instead of blocking on it
    assert listed.returncode == 0 and "* g0001" in listed.stdout and "Traceback" not in listed.stderr


@pytest.fixture
def index(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    with serve(idx):
        yield idx


def _pinned(proj: Path, index: LocalIndex, version: str) -> None:
    (proj / "recipes").mkdir(parents=True, exist_ok=True)
    (proj / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{index.url}"\n\n'
        f'[packages]\nmodel-kernels = "=={version}"\n'
    )


@pytest.mark.slow
def test_up_locks_when_there_is_no_lock_and_stops_on_a_stale_one(tmp_path: Path, index: LocalIndex) -> None:
    proj = tmp_path / "p"
    _pinned(proj, index, "1.0")
    first = envforge(proj, "up", "r")
    assert first.returncode == 0, first.stderr
    ours = [line for line in first.stderr.splitlines() if line.startswith(("[", "  lockfiles/"))]
    assert ours[:3] == [
        "[1/3] lock pylock.r-default.toml: none yet, locking now (as `envforge lock r --variant default`; "
        "commit lockfiles/pylock.r-default.toml)",
        "  lockfiles/pylock.r-default.toml: 1 package, locked now",
        "[2/3] build r-default (g0001)",
    ]
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    locked = lock.read_bytes()
    assert b'name = "model-kernels"\nversion = "1.0"' in locked

    again = envforge(proj, "up", "--json")  # a lock now: checked, not re-locked; the only recipe is the default
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0] == "[1/3] lock pylock.r-default.toml: up to date"
    assert json.loads(again.stdout)["data"]["lock"]["created"] is False

    _pinned(proj, index, "2.0")  # the recipe moved on: a stale lock stops the job, as before, unchanged
    stale = envforge(proj, "up", "r")
    assert stale.returncode == 1
    assert stale.stderr.splitlines() == [
        "[1/3] lock pylock.r-default.toml: stale",
        "  packages.model-kernels: locked model-kernels==1.0, recipe now model-kernels==2.0",
        "  run `envforge lock r --variant default` and review the change",
    ]
    assert lock.read_bytes() == locked
    assert sorted(p.name for p in (proj / "envs" / ".generations" / "r-default").glob("g*")) == ["g0001", "g0001.log"]

    lock.unlink()  # no lock again: --json says it was created
    made = envforge(proj, "up", "r", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["data"]["lock"] == {"path": str(lock), "fresh": True, "reasons": [], "created": True}
    assert b'name = "model-kernels"\nversion = "2.0"' in lock.read_bytes()


@pytest.mark.slow
def test_an_in_place_edit_through_uvs_hardlink_stops_after_one_failed_rebuild(
    tmp_path: Path, index: LocalIndex
) -> None:
    """`echo >> file` in a generation writes through uv's hardlink into its cache: every build from the
    lock installs the edited bytes again. `up` rebuilds once, verifies the new generation before it is
    live, holds it back, and the next `up` stops with the cause instead of building g0003, g0004, ..."""
    proj = tmp_path / "p"
    _pinned(proj, index, "1.0")
    env = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")}  # one filesystem with the project

    def up(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "envforge", "up", "r", *args],
            cwd=proj,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    assert up().returncode == 0
    link = proj / "envs" / "r-default"
    edited = next(link.glob("lib/python3*/site-packages")) / "model_kernels" / "__init__.py"
    assert edited.stat().st_nlink == 2  # the generation's file and uv's cached copy
    with open(edited, "a") as fh:  # in place: the cached copy changes too
        fh.write("EDITED = True\n")

    again = up()
    assert again.returncode == 1
    ours = [line for line in again.stderr.splitlines() if line.startswith(("[", "  damaged", "  g0002"))]
    assert ours == [
        "[1/3] lock pylock.r-default.toml: up to date",
        "[2/3] build r-default: reusing g0001 (built from this lock; --rebuild to force a new one); verifying "
        "before trusting it",
        "[3/3] verify r-default",
        "  damaged: g0001 fails verify (tampered): its files changed since it was built; rebuilding as g0002 from "
        "the same lock (g0001 stays for rollback)",
        "[3/3] verify r-default again (g0002, before it is made live)",
        "  g0002 fails verify: not made live; envs/r-default stays at g0001 (to use it anyway: `envforge rollback "
        "r-default --to g0002`)",
    ]
    assert "tampered: model-kernels 1.0: model_kernels/__init__.py" in again.stdout
    assert os.readlink(link) == ".generations/r-default/g0001"  # never flipped to what failed verify
    g2 = proj / "envs" / ".generations" / "r-default" / "g0002"
    cause = (
        "installed files are not their RECORD's bytes (model-kernels) in a generation built just now: uv "
        "installed them from its cache, which an in-place edit through a hardlink changed; run `uv cache "
        "clean model-kernels`, then `envforge up r --variant default --rebuild` (--link-mode copy keeps edits "
        "out of uv's cache)"
    )
    record = json.loads(next(g2.glob("lib/python3*/site-packages/.envforge/generation.json")).read_text())
    assert record["verify-failed"] == {"kinds": ["tampered"], "cause": cause}

    third = up("--json")  # one failed rebuild is enough: no g0003, the cause instead
    assert third.returncode == 1
    assert third.stderr.splitlines()[-1] == (
        f"  stopped: g0002, built from this lock, failed verify (tampered) and was not made live; a build from the "
        f"same lock fails the same way: {cause}"
    )
    data = json.loads(third.stdout)["data"]
    assert (data["build"], data["reused"], data["held"]) == (None, "g0001", None)
    assert data["stopped"].startswith("g0002, built from this lock, failed verify (tampered)")
    assert sorted(p.name for p in g2.parent.glob("g000?")) == ["g0001", "g0002"]
    listed = subprocess.run(
        [sys.executable, "-m", "envforge", "envs"], cwd=proj, capture_output=True, text=True, timeout=120, env=env
    ).stdout.splitlines()
    assert [line[:10] for line in listed] == ["r-default ", "  * g0001 ", "    g0002 "]
    assert "held back" not in listed[1]
    assert "  held back: failed verify (tampered), never live  " in listed[2]

    # another project on the same uv cache: its first generation fails verify too and is held back, no
    # link; `rollback --to` makes it live when the user decides to (the way on, never a dead end)
    other = tmp_path / "other"
    shutil.copytree(proj / "recipes", other / "recipes")
    shutil.copytree(proj / "lockfiles", other / "lockfiles")
    first = subprocess.run(
        [sys.executable, "-m", "envforge", "up", "r"], cwd=other, capture_output=True, text=True, timeout=300, env=env
    )
    assert first.returncode == 1
    assert (
        "  g0001 fails verify: not made live; envs/r-default has no live generation yet (to use it anyway: "
        "`envforge rollback r-default --to g0001`)"
    ) in first.stderr.splitlines()
    assert not (other / "envs" / "r-default").is_symlink()
    forced = subprocess.run(
        [sys.executable, "-m", "envforge", "rollback", "r-default", "--to", "g0001"],
        cwd=other,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert (forced.returncode, forced.stdout) == (0, "envs/r-default: g0001 -> g0001\n"), forced.stderr
    assert os.readlink(other / "envs" / "r-default") == ".generations/r-default/g0001"
    # Issue 41: it was still "never live", and the next `up` blamed files changed since the build.
    shown = subprocess.run(
        [sys.executable, "-m", "envforge", "envs"], cwd=other, capture_output=True, text=True, timeout=120, env=env
    ).stdout.splitlines()
    assert "  failed verify when built (tampered); made live by `envforge rollback --to`  " in shown[1]
    again_other = subprocess.run(
        [sys.executable, "-m", "envforge", "up", "r"], cwd=other, capture_output=True, text=True, timeout=300, env=env
    )
    assert again_other.returncode == 1
    assert again_other.stderr.splitlines()[-1] == (
        f"  stopped: g0001 failed verify when it was built (tampered) and was made live with `envforge rollback "
        f"--to`; it fails the same way now, not because its files changed: {cause}"
    )
    assert sorted(p.name for p in (other / "envs" / ".generations" / "r-default").glob("g000?")) == ["g0001"]

    from envforge.uv.run import uv_binary

    subprocess.run([uv_binary(), "cache", "clean", "model-kernels"], check=True, env=env, capture_output=True)
    fixed = up("--rebuild")  # what the cause says: a clean cache, then one more build
    assert fixed.returncode == 0, fixed.stderr
    assert "  envs/r-default -> g0003" in fixed.stderr.splitlines()
    assert os.readlink(link) == ".generations/r-default/g0003"


@pytest.mark.slow
def test_up_after_a_rollback_makes_the_generation_of_this_lock_live_again(tmp_path: Path, index: LocalIndex) -> None:
    """Issue 44: `up` after `rollback` built a duplicate of the generation it had rolled back from."""
    proj = tmp_path / "p"
    _pinned(proj, index, "1.0")
    assert envforge(proj, "up", "r").returncode == 0
    _pinned(proj, index, "2.0")
    assert envforge(proj, "lock", "r").returncode == 0
    assert envforge(proj, "up", "r").returncode == 0
    link = proj / "envs" / "r-default"
    assert os.readlink(link) == ".generations/r-default/g0002"
    assert envforge(proj, "rollback", "r-default").returncode == 0
    again = envforge(proj, "up", "r")
    assert again.returncode == 0, again.stderr
    ours = [line for line in again.stderr.splitlines() if line.startswith(("[", "  envs/"))]
    assert ours == [
        "[1/3] lock pylock.r-default.toml: up to date",
        "[2/3] build r-default: g0002 was built from this lock (--rebuild to build a new one); verifying it before "
        "making it live again",
        "[3/3] verify r-default (g0002)",
        "  envs/r-default -> g0002",
    ]
    assert os.readlink(link) == ".generations/r-default/g0002"
    gens = sorted(p.name for p in (proj / "envs" / ".generations" / "r-default").glob("g000?"))
    assert gens == ["g0001", "g0002"]  # no duplicate
    rebuilt = envforge(proj, "up", "r", "--rebuild")  # asked for: a new one
    assert rebuilt.returncode == 0 and os.readlink(link) == ".generations/r-default/g0003"


STATE_FILES = ("generation.json", "patches.json", "env-profile.json", "patches.intent.json")
CONTENTS = {
    "truncated": b'{"schema": 1, "fi',
    "nested": b"[" * 100_000 + b"]" * 100_000,
    "long-number": b'{"schema": ' + b"9" * 5000 + b"}",
    "not-utf8": b'{"schema": "\xff"}',
    "not-an-object": b"[1, 2, 3]",
}


@pytest.mark.slow
@pytest.mark.parametrize("content", sorted(CONTENTS))
def test_a_damaged_state_file_is_never_an_internal_error(quickstart: Path, content: str) -> None:
    """Every JSON record envforge keeps in an environment (``.envforge/``: the generation record, the
    patch manifest, the env profile record, an interrupted patch's intent), each written with each kind
    of damage, read by every command that reads it: an answer or exit 2 naming the file, never exit 70
    or a traceback. (A hostile-input round found exit 70 on a deeply nested patches.json and
    env-profile.json: `json.loads` raised RecursionError past the ValueError handlers.)"""
    sp = next((quickstart / "envs" / "quickstart-default").resolve().glob("lib/python3*/site-packages"))
    bad = []
    for name in STATE_FILES:
        path = sp / ".envforge" / name
        saved = path.read_bytes() if path.exists() else None
        path.write_bytes(CONTENTS[content])
        try:
            for argv in (["verify"], ["sbom"], ["envs"], ["env", "show"], ["apply-patches", "--dry-run"]):
                res = subprocess.run(
                    [sys.executable, "-m", "envforge", *argv],
                    cwd=quickstart,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env=dict(os.environ),
                )
                if res.returncode not in (0, 1, 2) or "Traceback" in res.stderr:
                    bad.append((name, " ".join(argv), res.returncode, res.stderr[-300:]))
                elif res.returncode == 2 and name not in res.stderr:
                    bad.append((name, " ".join(argv), "exit 2 without naming the file", res.stderr[-300:]))
        finally:
            path.unlink()
            if saved is not None:
                path.write_bytes(saved)
    assert bad == []
