"""A running server across a generation flip (field case B39), with a real built environment, a
real second process started through the link, and a real flip (a second ``envforge build``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.bench.server import ServerLaunch, pinned_interpreter
from envforge.env.processes import StaleProcess, can_scan, generation_users, stale_processes, warning_lines
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]
pytestmark = pytest.mark.skipif(not can_scan(), reason="reads a Linux /proc")


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    with serve(idx):
        (proj / "recipes" / "flip.toml").write_text(
            f'[recipe]\nname = "flip"\npython = "3.12"\nresolution = "no-deps"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nmodel-kernels = "==1.0"\n'
        )
        assert envforge(proj, "lock", "flip").returncode == 0
        assert envforge(proj, "build", "flip").returncode == 0
        yield proj


def _start(cwd: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.2)  # well before the flip: the link's mtime and the start time are compared
    return proc


def _rebuild(project: Path) -> subprocess.CompletedProcess[str]:
    recipe = project / "recipes" / "flip.toml"
    recipe.write_text(recipe.read_text().replace('"==1.0"', '"==2.0"'))
    assert envforge(project, "lock", "flip").returncode == 0
    return envforge(project, "build", "flip")


def test_build_rollback_envs_and_verify_name_a_process_of_the_old_generation(project: Path) -> None:
    link = project / "envs" / "flip-default"
    through_link = _start(project, ["envs/flip-default/bin/python", "-c", "import time; time.sleep(120)"])
    pinned = _start(project, [str(link.resolve() / "bin" / "python"), "-c", "import time; time.sleep(121)"])
    try:
        assert stale_processes(link) == ()  # nothing flipped yet
        built = _rebuild(project)
        assert built.returncode == 0, built.stderr
        warnings = [line for line in built.stderr.splitlines() if line.startswith("warning: ")]
        assert warnings == [
            f"warning: envs/flip-default: pid {through_link.pid} was started through the link before it was "
            "flipped to g0002: its lazy imports and spawned workers now come from g0002: "
            "envs/flip-default/bin/python -c import time; time.sleep(120)",
            f"warning: envs/flip-default: pid {pinned.pid} still runs from g0001, which is no longer live "
            f"(live: g0002): {link.parent / '.generations' / 'flip-default' / 'g0001'}/bin/python -c import time; "
            "time.sleep(121)",
            "warning: envs/flip-default: restart them to run the live generation; start servers from "
            "envs/.generations/flip-default/<generation>/bin/python (as `envforge bench` does) so that a "
            "later build or rollback cannot change what they import",
        ]

        listed = envforge(project, "envs")
        assert listed.returncode == 0 and listed.stderr.splitlines() == warnings
        verified = envforge(project, "verify", "flip-default")
        assert verified.returncode == 1
        lines = verified.stdout.splitlines()
        at = lines.index(f"stale-process: pid {pinned.pid}")
        assert lines[at : at + 4] == [
            f"stale-process: pid {pinned.pid}",
            "    expected: every process of flip-default runs the live generation g0002",
            f"    actual:   {link.parent / '.generations' / 'flip-default' / 'g0001'}/bin/python -c import time; "
            "time.sleep(121): still runs from g0001, which is no longer live (live: g0002)",
            "    fix:      restart it from envs/.generations/flip-default/g0002/bin/python (a server pinned to its "
            "generation keeps importing from it after a build or rollback)",
        ]
        assert f"stale-process: pid {through_link.pid}" in lines

        back = envforge(project, "rollback", "flip-default")
        assert back.stdout == "envs/flip-default: g0002 -> g0001\n"
        # Back on g0001: the pinned process runs the live generation again; the one through the link
        # started before this flip too.
        assert back.stderr.splitlines()[0] == (
            f"warning: envs/flip-default: pid {through_link.pid} was started through the link before it was "
            "flipped to g0001: its lazy imports and spawned workers now come from g0001: "
            "envs/flip-default/bin/python -c import time; time.sleep(120)"
        )
        assert [p.pid for p in stale_processes(link)] == [through_link.pid]
    finally:
        for p in (through_link, pinned):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert stale_processes(link) == ()


def test_a_server_started_by_bench_runs_from_the_generation(project: Path, tmp_path: Path) -> None:
    link = project / "envs" / "flip-default"
    launch = ServerLaunch("s", (str(link / "bin" / "python"), "-m", "x"), {}, "http://127.0.0.1:1/", tmp_path / "l")
    gen = link.parent / ".generations" / "flip-default" / "g0001"
    assert launch.argv == (f"{gen.resolve()}/bin/python", "-m", "x")
    assert pinned_interpreter("python") == "python"
    # The pinned interpreter is still the venv's: its sys.prefix is the generation, not the link.
    out = subprocess.run([launch.argv[0], "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert out.stdout.strip() == str(gen.resolve())


def test_without_proc_nothing_is_scanned_and_no_warning_is_printed(tmp_path: Path) -> None:
    assert can_scan(tmp_path) is False
    assert stale_processes(tmp_path / "envs" / "x", proc=tmp_path) == ()
    assert warning_lines("x", ()) == []
    one = StaleProcess(7, "python s.py", "g0001", "cwd", "g0002")
    assert warning_lines("x", (one,))[0] == (
        "envs/x: pid 7 still has its working directory in g0001, which is no longer live (live: g0002): python s.py"
    )


def _users_of(project: Path, pid: int) -> list[str]:
    root = project / "envs" / ".generations" / "flip-default"
    return [u.generation for u in generation_users(root) if u.pid == pid]


def test_gc_keeps_the_generation_a_running_envforge_run_uses(project: Path) -> None:
    """Issue 41: ``gc --keep 1`` removed the generation of a running ``envforge run`` (rc 0, no word);
    the process then failed ``ModuleNotFoundError`` at its next import. Real processes: the run is
    pinned to g0001, a build makes g0002 live, gc keeps g0001 while the run lives and removes it after."""
    run = subprocess.Popen(
        [*ENVFORGE, "run", "flip-default", "--", "python", "-c", "import time; time.sleep(300)"],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while not _users_of(project, run.pid):  # until the exec: `envforge run` replaces itself
            assert run.poll() is None, "envforge run ended"
            time.sleep(0.05)
        assert _users_of(project, run.pid) == ["g0001"]
        assert _rebuild(project).returncode == 0
        gen = project / "envs" / ".generations" / "flip-default" / "g0001"
        gc = envforge(project, "gc", "--keep", "1", "--json")
        data = json.loads(gc.stdout)["data"]
        assert (gc.returncode, data["removed"], data["kept"]) == (
            0,
            [],
            [{"env": "flip-default", "generation": "g0001"}, {"env": "flip-default", "generation": "g0002"}],
        )
        assert [(u["env"], u["generation"], u["pid"]) for u in data["in_use"]] == [("flip-default", "g0001", run.pid)]
        assert data["in_use"][0]["command"] == f"{gen}/bin/python -c import time; time.sleep(300)"
        text = envforge(project, "gc", "--keep", "1")
        assert text.stderr.splitlines()[0] == (
            f"warning: kept flip-default/g0001: in use by pid {run.pid} ({gen}/bin/python -c import time; "
            "time.sleep(300)); run gc again once it has stopped"
        )
        assert gen.is_dir() and run.poll() is None
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    gc = envforge(project, "gc", "--keep", "1", "--json")
    data = json.loads(gc.stdout)["data"]
    assert ([r["generation"] for r in data["removed"]], data["in_use"]) == (["g0001"], [])
    assert not gen.exists()


def test_generation_users_counts_cwd_argv_and_mapped_code(tmp_path: Path) -> None:
    root = tmp_path / "envs" / ".generations" / "e"
    for g in ("g0001", "g0002", "g0003"):
        (root / g).mkdir(parents=True)
    (root / "g0002" / "s.py").write_text("import time; time.sleep(300)\n")
    by_cwd = _start(root / "g0001", [sys.executable, "-c", "import time; time.sleep(300)"])
    by_argv = _start(tmp_path, [sys.executable, str(root / "g0002" / "s.py")])
    try:
        found = [(u.pid, u.generation) for u in generation_users(root)]
        assert found == sorted([(by_cwd.pid, "g0001"), (by_argv.pid, "g0002")])
        assert generation_users(root, skip=[by_cwd.pid, by_argv.pid]) == ()
        assert generation_users(root, proc=tmp_path) == ()  # no /proc there: nothing scanned
    finally:
        for p in (by_cwd, by_argv):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
