"""envforge build / rollback / up: generations behind a symlink, with the real uv and real indexes."""

from __future__ import annotations

import hashlib
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envforge.env.build import _manifest
from envforge.uv.interpreter import PythonNotFound, find_python
from envforge.lock.write import restamp
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]
ROOT = Path(__file__).resolve().parents[2]


def envforge(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


def make_project(tmp_path: Path, index: LocalIndex, version: str = "1.0") -> Path:
    (tmp_path / "recipes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{index.url}"\n\n'
        f'[packages]\nmodel-kernels = "=={version}"\n\n[env.default]\nENVFORGE_TEST_FLAG = "on"\n'
    )
    return tmp_path


def env_python_says(proj: Path, code: str) -> str:
    out = subprocess.run(
        [str(proj / "envs" / "r-default" / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def index(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    idx.add(make_wheel(tmp_path / "w", "kern", "1.0+cu130", metadata_version="1.0"))
    with serve(idx):
        yield idx


def test_build_makes_generations_and_rollback_flips_back(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path / "p", index)
    assert envforge(proj, "lock", "r").returncode == 0
    first = envforge(proj, "build", "r")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "envs/r-default -> g0001\n"
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0001"
    assert (
        env_python_says(
            proj, "import model_kernels, os; print(model_kernels.__version__, os.environ['ENVFORGE_TEST_FLAG'])"
        )
        == "1.0 on"
    )
    record = json.loads(
        next((proj / "envs" / "r-default").glob("lib/python3*/site-packages/.envforge/generation.json")).read_text()
    )
    assert (record["recipe"], record["variant"], record["generation"]) == ("r", "default", "g0001")

    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace("==1.0", "==2.0"))
    assert envforge(proj, "lock", "r").returncode == 0
    assert envforge(proj, "build", "r").stdout.endswith("-> g0002\n")
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "2.0"

    back = envforge(proj, "rollback", "r-default")
    assert (back.returncode, back.stdout) == (0, "envs/r-default: g0002 -> g0001\n")
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "1.0"


def test_failed_build_leaves_the_live_environment_and_names_the_step(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path / "p", index)
    envforge(proj, "lock", "r")
    assert envforge(proj, "build", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    text = lock.read_text()
    digest = text.split('sha256 = "')[1].split('"')[0]
    # A lock envforge wrote whose file then changed on the index: the digest is re-recorded, the
    # hash cannot match the file uv downloads.
    lock.write_text(restamp(text.replace(digest, "0" * 64)))
    res = envforge(proj, "build", "r")
    assert res.returncode == 3
    assert "error: build failed at step 'sync': uv pip sync failed with exit status" in res.stderr
    assert "the live environment was not changed; the failed generation was removed (g0002)" in res.stderr
    assert "Hash mismatch" in res.stderr
    log = proj / "envs" / ".generations" / "r-default" / "g0002.log"
    assert f"\n  full log: {log}\n" in res.stderr  # the failed build's log outlives its generation
    assert "error: build failed at step 'sync'" in log.read_text() and "Hash mismatch" in log.read_text()
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0001"
    assert not (proj / "envs" / ".generations" / "r-default" / "g0002").exists()
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "1.0"


def test_killed_build_leaves_the_previous_environment_importable(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path / "p", index)
    envforge(proj, "lock", "r")
    assert envforge(proj, "build", "r").returncode == 0
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace("==1.0", "==2.0"))
    assert envforge(proj, "lock", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    slow = LocalIndex(index.root)
    with serve(slow, delay_s=60):  # the same files from a mirror that stalls on every wheel
        # The recipe and its lock (digest re-recorded) name the mirror, so the index guard allows it.
        recipe.write_text(recipe.read_text().replace(index.url, slow.url))
        lock.write_text(restamp(lock.read_text().replace(index.url.rsplit("/", 1)[0], slow.url.rsplit("/", 1)[0])))
        proc = subprocess.Popen(
            [*ENVFORGE, "build", "r"], cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        gen = proj / "envs" / ".generations" / "r-default" / "g0002"
        for _ in range(300):  # wait until the new generation exists and sync is downloading
            if (gen / "pyvenv.cfg").exists():
                break
            time.sleep(0.1)
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    recipe.write_text(recipe.read_text().replace(slow.url, index.url))
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0001"
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "1.0"
    # SIGKILL cannot clean up: the leftover is listed as incomplete, never as a generation, and
    # `envforge gc` removes it.
    listed = json.loads(envforge(proj, "envs", "--json").stdout)["data"]["environments"][0]
    assert (listed["live"], [(g["name"], g["complete"], g["live"]) for g in listed["generations"]]) == (
        "g0001",
        [("g0001", True, True), ("g0002", False, False)],
    )
    assert envforge(proj, "rollback", "r-default", "--to", "g0002").returncode == 2
    gc = json.loads(envforge(proj, "gc", "--json").stdout)["data"]
    assert [(r["env"], r["generation"]) for r in gc["removed"]] == [("r-default", "g0002")] and not gen.exists()
    # The next build succeeds.
    assert envforge(proj, "lock", "r").returncode == 0
    res = envforge(proj, "build", "r")
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith("-> g0002\n")


def test_hand_edited_lock_builds_nothing(tmp_path: Path, index: LocalIndex) -> None:
    """Issue 18.3: a [[packages]] entry added by hand (a real wheel, its correct hash) or a lock cut
    before a package never builds: exit 2 before a generation is made, the live one untouched."""
    proj = make_project(tmp_path / "p", index)
    envforge(proj, "lock", "r")
    assert envforge(proj, "build", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    text = lock.read_text()
    wheel = make_wheel(tmp_path / "w", "extra-pkg", "1.0")
    entry = (
        f'[[packages]]\nname = "extra-pkg"\nversion = "1.0"\nwheels = [{{ path = "{wheel}", hashes = '
        f'{{ sha256 = "{hashlib.sha256(wheel.read_bytes()).hexdigest()}" }} }}]\n\n'
    )
    cases = (
        (text.replace("[tool.envforge]", entry + "[tool.envforge]", 1), "is not the lock `envforge lock` wrote:"),
        (text[: text.index("[[packages]]")] + "[tool.envforge]", "is not a valid PEP 751 lock at `packages`:"),
        (text[: text.index("[tool.envforge]")], "is not the lock `envforge lock` wrote:"),
    )
    for bad, says in cases:
        lock.write_text(bad)
        res = envforge(proj, "build", "r")
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith(f"error: {lock} {says}"), res.stderr
        assert sorted(
            p.name for p in (proj / "envs" / ".generations" / "r-default").iterdir() if re.fullmatch(r"g\d+", p.name)
        ) == ["g0001"]
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__name__)") == "model_kernels"


def test_index_guard_runs_at_build(tmp_path: Path, index: LocalIndex) -> None:
    """A lock (digest re-recorded, as a tool would) whose file URL points at an index the recipe does
    not allow is refused at build, before uv runs, as `lock` refuses it."""
    proj = make_project(tmp_path / "p", index)
    envforge(proj, "lock", "r")
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    lock.write_text(restamp(lock.read_text().replace(index.url.rsplit("/simple", 1)[0], "http://mirror.invalid")))
    res = envforge(proj, "build", "r")
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[:2] == [
        f"error: {lock}: packages come from indexes not allowed for them:",
        "  model-kernels 1.0 came from unknown (mirror.invalid); allowed: pypi",
    ]
    assert not (proj / "envs" / "r-default").exists()


def test_b04_local_label_missing_from_metadata_is_reported_not_silent(tmp_path: Path, index: LocalIndex) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\ncu130 = "{index.url}"\n\n'
        '[packages]\nkern = { version = "==1.0+cu130", index = "cu130" }\n'
    )
    assert envforge(tmp_path, "lock", "r").returncode == 0
    res = envforge(tmp_path, "build", "r")
    assert res.returncode == 0
    assert (
        f"warning: kern: the lock and the wheel file name say 1.0+cu130 (index {index.url}), "
        "its installed METADATA says 1.0 (field case B04)"
    ) in res.stderr


def test_a_pin_yanked_since_the_lock_is_warned_with_the_index_reason(tmp_path: Path) -> None:
    """B48: the real uv locks model-kernels 1.0 from a local PEP 691 index, the index then yanks it
    (``"yanked": "<reason>"``); the build installs the lock as it is and warns with the reason."""
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "model-kernels", "1.0"), upload_time="2026-01-01T00:00:00Z")
    with serve(idx):
        proj = make_project(tmp_path / "p", idx)
        assert envforge(proj, "lock", "r").returncode == 0
        idx.yank("model_kernels-1.0-py3-none-any.whl", "wrong SM120 kernels; use 1.1")
        res = envforge(proj, "build", "r", env={"ENVFORGE_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    assert (
        "warning: pylock.r-default.toml: model-kernels 1.0 is yanked on its index "
        '(reason: "wrong SM120 kernels; use 1.1")'
    ) in res.stderr.splitlines()


def test_build_without_a_lock_says_what_to_run(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path, index)
    res = envforge(proj, "build", "r")
    assert res.returncode == 2
    assert res.stderr == (
        f"error: no lock for r-default: {proj / 'lockfiles' / 'pylock.r-default.toml'} does not exist\n"
        "  hint: run `envforge lock r --variant default` first\n"
    )


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path, index)
    envforge(proj, "lock", "r")
    res = envforge(proj, "build", "r", "--dry-run")
    assert res.returncode == 0
    assert res.stdout.splitlines()[0] == f"environment  {proj / 'envs' / 'r-default'} -> .generations/r-default/g0001"
    assert not (proj / "envs").exists()


def test_missing_python_names_the_version_and_how_to_provide_it() -> None:
    with pytest.raises(PythonNotFound) as e:
        find_python("3.99")
    assert str(e.value) == (
        "no Python 3.99 found on this machine (searched pyenv installs and uv's discovery; envforge never "
        "downloads Pythons)\n  hint: install Python 3.99 (e.g. `pyenv install 3.99` or `apt-get install "
        "python3.99`) or pass --python PATH"
    )
    with pytest.raises(
        PythonNotFound, match=r"^--python /bin/true is not a Python interpreter; the recipe needs Python 3.12$"
    ):
        find_python("3.12", Path("/bin/true"))


@pytest.mark.slow
def test_up_runs_the_main_job_on_the_quickstart_recipe(tmp_path: Path) -> None:
    """The README's first command, on a copy of the project: lock check, build, patches, verify."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for d in ("recipes", "patchsets", "lockfiles"):
        subprocess.run(["cp", "-rL", str(ROOT / d), str(proj / d)], check=True)
    res = envforge(proj, "up")
    if res.returncode != 0 and "cannot reach" in res.stderr:
        pytest.skip("the package index cannot be reached")
    assert res.returncode == 0, res.stderr
    assert "[1/3] lock pylock.quickstart-default.toml: up to date" in res.stderr
    assert "verify static: clean" in res.stdout
    second = envforge(proj, "up")  # nothing changed: verify again, no new generation
    assert second.returncode == 0
    assert (
        "[2/3] build quickstart-default: reusing g0001 (built from this lock; --rebuild to force a new one); "
        "verifying before trusting it" in second.stderr
    )
    sp = next((proj / "envs" / "quickstart-default").glob("lib/python3*/site-packages"))
    manifest = json.loads((sp / ".envforge" / "patches.json").read_text())
    patched = [sp / f["path"] for f in manifest["files"]]
    assert patched and all(p.stat().st_nlink == 1 for p in patched)  # B09: never shared with uv's cache

    # apply-patches --revert takes the patches and the env hook away, byte-exact; apply-patches
    # puts both back from the environment's lock, and verify is clean again.
    before = {f["path"]: f["new_sha256"] for f in manifest["files"]}
    reverted = envforge(proj, "apply-patches", "--revert")
    assert reverted.returncode == 0 and "env profile hook removed" in reverted.stderr
    assert not (sp / "envforge-env.pth").exists()
    assert envforge(proj, "verify").returncode == 1
    again = envforge(proj, "apply-patches")
    assert again.returncode == 0 and "env profile pcie: 3 variables (pth)" in again.stderr
    assert (sp / "envforge-env.pth").exists()
    assert {
        f["path"]: f["new_sha256"] for f in json.loads((sp / ".envforge" / "patches.json").read_text())["files"]
    } == before
    assert envforge(proj, "verify").returncode == 0


def test_offline_build_from_a_wheelhouse(tmp_path: Path) -> None:
    """An air-gapped GPU box: lock and build from a directory of wheels, no index at all."""
    house = tmp_path / "wheelhouse"
    make_wheel(house, "model-kernels", "1.0")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\n\n[packages]\nmodel-kernels = "==1.0"\n'
    )
    offline = ("--offline", "--find-links", str(house))
    assert envforge(tmp_path, "lock", "r", *offline, "--local-paths").returncode == 0
    res = envforge(tmp_path, "build", "r", *offline, env={"UV_INDEX_URL": "http://127.0.0.1:9/simple"})
    assert res.returncode == 0, res.stderr
    assert env_python_says(tmp_path, "import model_kernels; print(model_kernels.__version__)") == "1.0"


def _processes_mentioning(text: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and text in (d / "cmdline").read_bytes().decode(errors="replace"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


def test_sigterm_stops_the_build_and_its_uv_and_keeps_the_live_environment(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path / "p", index)
    envforge(proj, "lock", "r")
    assert envforge(proj, "build", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    slow = LocalIndex(index.root)
    with serve(slow, delay_s=60):
        # The recipe and its lock (digest re-recorded) name the mirror, so the index guard allows it.
        recipe = proj / "recipes" / "r.toml"
        recipe.write_text(recipe.read_text().replace(index.url, slow.url))
        lock.write_text(restamp(lock.read_text().replace(index.url.rsplit("/", 1)[0], slow.url.rsplit("/", 1)[0])))
        proc = subprocess.Popen(
            [*ENVFORGE, "build", "r"], cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        gen = proj / "envs" / ".generations" / "r-default" / "g0002"
        for _ in range(300):
            if _processes_mentioning(str(gen)) and (gen / "pyvenv.cfg").exists():
                break
            time.sleep(0.1)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)  # Slurm's scancel, timeout(1): not the whole group
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    log = gen.with_name("g0002.log")
    assert err.splitlines()[-1] == (
        f"error: stopped by signal SIGTERM during build step 'sync' of r-default (g0002); the live environment "
        f"was not changed, the half-built generation was moved out of the listings (the next build or `envforge gc` "
        f"removes its files); full log: {log}"
    )
    assert not gen.exists() and "Traceback" not in err
    (trashed,) = (gen.parent / ".trash").iterdir()  # renamed, not removed: the stop did not wait for a removal
    assert trashed.name.startswith("g0002.")
    assert log.read_text().splitlines()[-1].startswith("stopped during build step 'sync' of r-default (g0002)")
    assert _processes_mentioning(str(gen)) == []  # uv, in its own session, was stopped too
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0001"
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "1.0"


def test_up_stops_at_a_stale_lock_and_builds_nothing(tmp_path: Path, index: LocalIndex) -> None:
    proj = make_project(tmp_path, index)
    assert envforge(proj, "lock", "r").returncode == 0
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace("==1.0", "==2.0"))
    res = envforge(proj, "up", "r")
    assert res.returncode == 1
    assert res.stderr.splitlines() == [
        "[1/3] lock pylock.r-default.toml: stale",
        "  packages.model-kernels: locked model-kernels==1.0, recipe now model-kernels==2.0",
        "  run `envforge lock r --variant default` and review the change",
    ]
    assert not (proj / "envs").exists()


def _run_on_a_terminal(argv: list[str], cwd: Path, timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with stdin/stdout/stderr on a real pseudo-terminal; return (status, output)."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal_and_plain_lines_otherwise(tmp_path: Path) -> None:
    """On a terminal uv draws its own progress (redrawn lines: bytes, packages); piped, plain
    lines. The build log keeps plain lines either way."""
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "model-kernels", "1.0"))
    with serve(idx, delay_s=2.0):  # a slow mirror: uv's progress is on screen for a while
        proj = make_project(tmp_path / "p", idx)
        assert envforge(proj, "lock", "r").returncode == 0
        status, out = _run_on_a_terminal([*ENVFORGE, "build", "r"], proj)
        assert status == 0, out
        import re

        assert "Preparing packages... (0/1)" in out  # uv's own display, redrawn in place: packages ...
        assert re.search(r"model-kernels +-+ +[0-9.]+ (B|KiB)/[0-9.]+ KiB", out)  # ... bytes of each download
        assert "[0/1] Installing wheels..." in out and "\x1b[2K" in out
        log = proj / "envs" / ".generations" / "r-default" / "g0001.log"
        text = log.read_text()
        assert "\x1b" not in text and "\r" not in text
        assert "  sync " in text and text.splitlines()[-1] == "r-default -> g0001"
        piped = envforge(proj, "build", "r")
        assert piped.returncode == 0 and "\r" not in piped.stderr and "\x1b" not in piped.stderr


def test_build_refuses_a_profile_the_lock_does_not_record(tmp_path: Path) -> None:
    """A recipe profile edited since the lock (or --env-profile naming another profile) was built,
    then verify failed on the new generation (it holds the env to the lock's profile) and its fix,
    `envforge build`, did the same again. Now refused before anything is written."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for d in ("recipes", "patchsets", "lockfiles"):
        subprocess.run(["cp", "-rL", str(ROOT / d), str(proj / d)], check=True)
    recipe = proj / "recipes" / "quickstart.toml"
    recipe.write_text(recipe.read_text().replace('NCCL_BUFFSIZE = "131072"', 'NCCL_BUFFSIZE = "262144"'))
    lock = proj / "lockfiles" / "pylock.quickstart-default.toml"
    no_uv = {"ENVFORGE_UV": "/bin/false"}
    edited = envforge(proj, "build", env=no_uv)
    assert (edited.returncode, edited.stderr) == (
        2,
        (
            f"error: {lock}: the env profile to install is not the one the lock records:\n"
            "  env.NCCL_BUFFSIZE: locked '131072', building '262144'\n"
            "  hint: record it first: `envforge lock quickstart --variant default --env-profile pcie` "
            "(or `envforge up`, which locks then builds)\n"
        ),
    )
    other = envforge(proj, "build", "--env-profile", "nvlink", env=no_uv)
    assert other.returncode == 2
    assert other.stderr.splitlines()[1:4] == [
        "  env-profile: locked 'pcie', building 'nvlink'",
        "  env.NCCL_BUFFSIZE: locked '131072', building (absent)",
        "  env.NCCL_MAX_NCHANNELS: locked '2', building (absent)",
    ]
    assert not (proj / "envs").exists()


def test_the_manifest_step_copies_the_lock_and_writes_the_record_last(tmp_path: Path) -> None:
    """The manifest step, without uv: the lock copy is the lock's bytes, the record names its digest."""
    lock = tmp_path / "pylock.demo-cpu.toml"
    lock.write_bytes(b'lock-version = "1.0"\n')
    gen = tmp_path / "envs" / ".generations" / "demo-cpu" / "g0002"
    sp = gen / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    plan: Any = SimpleNamespace(
        lock=lock,
        generation=gen,
        python=SimpleNamespace(version="3.12.1"),
        variant=SimpleNamespace(recipe="demo", variant="cpu", env_profile="pcie"),
        link_mode="copy",
    )
    old = os.umask(0o022)
    try:
        assert _manifest(plan, sp) == ".envforge/generation.json"
    finally:
        os.umask(old)
    assert (sp / ".envforge" / "pylock.toml").read_bytes() == b'lock-version = "1.0"\n'
    assert json.loads((sp / ".envforge" / "generation.json").read_text()) == {
        "schema": 1,
        "recipe": "demo",
        "variant": "cpu",
        "lock": str(lock),
        "lock-digest": "sha256:" + hashlib.sha256(b'lock-version = "1.0"\n').hexdigest(),
        "generation": "g0002",
        "python": "3.12.1",
        "env-profile": "pcie",
        "link-mode": "copy",
    }
    assert sorted(p.name for p in (sp / ".envforge").iterdir()) == ["generation.json", "pylock.toml"]
    assert {oct(p.stat().st_mode & 0o7777) for p in (sp / ".envforge").iterdir()} == {"0o644"}


_TERM_AFTER_FLIP = """
import os, signal, sys
import envforge.env.build as build
real = build.replace_symlink
def flip_then_term(link, target):
    real(link, target)
    os.kill(os.getpid(), signal.SIGTERM)  # the signal lands the instant the link is flipped
build.replace_symlink = flip_then_term
from envforge.cli import run
sys.argv = ["envforge", "build", "r"]
run()
"""


def test_sigterm_right_after_the_flip_keeps_the_generation_it_made_live(tmp_path: Path, index: LocalIndex) -> None:
    """Field case N50: the handler re-reads the link and never removes the generation it points at."""
    proj = make_project(tmp_path / "p", index)
    assert envforge(proj, "lock", "r").returncode == 0
    assert envforge(proj, "build", "r").returncode == 0
    res = subprocess.run(
        [sys.executable, "-c", _TERM_AFTER_FLIP],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    gen = proj / "envs" / ".generations" / "r-default" / "g0002"
    log = gen.with_name("g0002.log")
    assert res.returncode == 128 + signal.SIGTERM, res.stderr
    assert res.stderr.splitlines()[-1] == (
        f"error: stopped by signal SIGTERM after the flip of r-default to g0002: the build was complete and "
        f"g0002 is live; nothing was removed; full log: {log}"
    )
    assert "was not changed" not in res.stderr
    assert os.readlink(proj / "envs" / "r-default") == ".generations/r-default/g0002"
    assert (gen / "lib" / "python3.12" / "site-packages" / ".envforge" / "generation.json").is_file()
    assert env_python_says(proj, "import model_kernels; print(model_kernels.__version__)") == "1.0"
    assert envforge(proj, "verify", "r-default").returncode == 0


def test_link_mode_from_the_option_or_uv_link_mode_is_used_and_recorded(tmp_path: Path, index: LocalIndex) -> None:
    """uv hardlinks from its cache by default; `--link-mode copy` (or UV_LINK_MODE=copy, no longer
    dropped without a word) gives the generation its own files, and generation.json records the mode."""
    proj = make_project(tmp_path / "p", index)
    cache = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}  # beside the project: one filesystem, so uv can link
    assert envforge(proj, "lock", "r", env=cache).returncode == 0
    root = proj / "envs" / ".generations" / "r-default"

    def built(*args: str, env: dict[str, str]) -> tuple[str | None, int]:
        res = envforge(proj, "build", "r", *args, env={**cache, **env})
        assert res.returncode == 0, res.stderr
        gen = root / os.readlink(proj / "envs" / "r-default").rsplit("/", 1)[-1]
        sp = next(gen.glob("lib/python3*/site-packages"))
        record = json.loads((sp / ".envforge" / "generation.json").read_text())
        return record["link-mode"], (sp / "model_kernels" / "__init__.py").stat().st_nlink

    assert built(env={}) == (None, 2)  # uv's default: a hardlink of the cached file
    assert built("--link-mode", "copy", env={}) == ("copy", 1)
    assert built(env={"UV_LINK_MODE": "copy"}) == ("copy", 1)
    assert built("--link-mode", "hardlink", env={"UV_LINK_MODE": "copy"}) == ("hardlink", 3)  # the option wins
    plan = envforge(proj, "build", "r", "--dry-run", "--link-mode", "copy", env=cache)
    assert "install      uv pip sync (hashes from the lock), link mode copy" in plan.stdout.splitlines()
    recipe = proj / "recipes" / "r.toml"  # the team's choice, committed: [recipe] link-mode
    recipe.write_text(recipe.read_text().replace('python = "3.12"\n', 'python = "3.12"\nlink-mode = "copy"\n'))
    assert envforge(proj, "lock", "r", "--check", env=cache).returncode == 0  # not a lock input
    assert built(env={}) == ("copy", 1)
    assert built(env={"UV_LINK_MODE": "hardlink"}) == ("hardlink", 4)  # the caller's variable wins, as with uv
    bad = envforge(proj, "build", "r", env={**cache, "UV_LINK_MODE": "reflink"})
    assert bad.returncode == 2
    assert bad.stderr.splitlines()[-2:] == [
        "error: unknown link mode 'reflink' (from --link-mode or UV_LINK_MODE)",
        "  hint: one of clone, copy, hardlink, symlink; `copy` gives every generation its own files, so an "
        "in-place edit never reaches uv's cache",
    ]
