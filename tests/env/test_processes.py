"""A running server across a generation flip (field case B39), with a real built environment, a
real second process started through the link, and a real flip (a second ``envforge build``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.bench.server import ServerLaunch, pinned_interpreter
from envforge.env.processes import StaleProcess, can_scan, stale_processes, warning_lines
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
            '[packages]\nmodel-kernels = "==1.0"\n')
        assert envforge(proj, "lock", "flip").returncode == 0
        assert envforge(proj, "build", "flip").returncode == 0
        yield proj


def _start(cwd: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
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
            "later build or rollback cannot change what they import"]

        listed = envforge(project, "envs")
        assert listed.returncode == 0 and listed.stderr.splitlines() == warnings
        verified = envforge(project, "verify", "flip-default")
        assert verified.returncode == 1
        lines = verified.stdout.splitlines()
        at = lines.index(f"stale-process: pid {pinned.pid}")
        assert lines[at:at + 4] == [
            f"stale-process: pid {pinned.pid}",
            "    expected: every process of flip-default runs the live generation g0002",
            f"    actual:   {link.parent / '.generations' / 'flip-default' / 'g0001'}/bin/python -c import time; "
            "time.sleep(121): still runs from g0001, which is no longer live (live: g0002)",
            "    fix:      restart it from envs/.generations/flip-default/g0002/bin/python (a server pinned to its "
            "generation keeps importing from it after a build or rollback)"]
        assert f"stale-process: pid {through_link.pid}" in lines

        back = envforge(project, "rollback", "flip-default")
        assert back.stdout == "envs/flip-default: g0002 -> g0001\n"
        # Back on g0001: the pinned process runs the live generation again; the one through the link
        # started before this flip too.
        assert back.stderr.splitlines()[0] == (
            f"warning: envs/flip-default: pid {through_link.pid} was started through the link before it was "
            "flipped to g0001: its lazy imports and spawned workers now come from g0001: "
            "envs/flip-default/bin/python -c import time; time.sleep(120)")
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
    assert warning_lines("x", (one,))[0] == ("envs/x: pid 7 still has its working directory in g0001, which is no "
                                             "longer live (live: g0002): python s.py")
