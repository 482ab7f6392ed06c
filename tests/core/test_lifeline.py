"""envforge.core.lifeline: a child's whole process group dies with envforge, however envforge dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import envforge
from envforge.core.lifeline import spawned

#: The parent processes below import this very envforge (a worktree's, a mutation run's copy).
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(Path(envforge.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
}


def _gone(pid: int, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().split(") ")[1].startswith("Z"):
            return True
        time.sleep(0.05)
    return False


def _stuck(tmp_path: Path) -> tuple[list[str], Path]:
    """A child that starts a grandchild (``sleep 303``), records its pid, and waits."""
    pid_file = tmp_path / "grandchild.pid"
    return ["/bin/sh", "-c", f"sleep 303 & echo $! > {pid_file}; wait"], pid_file


def _wait_for(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def test_the_exit_status_output_and_stdin_of_the_child(tmp_path: Path) -> None:
    with spawned(
        [sys.executable, "-c", "import sys; print(repr(sys.stdin.read())); sys.exit(3)"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        out, _ = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (3, "''\n")  # stdin is /dev/null, not the lifeline's pipe


def test_a_child_killed_by_a_signal_reports_128_plus_n() -> None:
    with spawned([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]) as proc:
        proc.wait(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM


def test_leaving_the_block_kills_the_group(tmp_path: Path) -> None:
    argv, pid_file = _stuck(tmp_path)
    with spawned(argv) as proc:
        grandchild = _wait_for(pid_file)
    assert _gone(grandchild)
    assert proc.wait(timeout=10) < 0  # the shell too


def test_a_sigkilled_parent_takes_the_group_with_it(tmp_path: Path) -> None:
    argv, pid_file = _stuck(tmp_path)
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        from envforge.core.lifeline import spawned
        with spawned({argv!r}):
            print("started", flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert parent.stdout is not None and parent.stdout.readline() == "started\n"
    grandchild = _wait_for(pid_file)
    os.kill(parent.pid, signal.SIGKILL)  # no finally, no handler: only the kernel closes the pipe
    parent.wait(timeout=10)
    assert _gone(grandchild)


def test_a_sigkilled_probe_runner_leaves_no_probe(tmp_path: Path) -> None:
    pid_file = tmp_path / "probe-child.pid"
    script = (
        f"import subprocess, sys, time; c = subprocess.Popen(['sleep', '304']); "
        f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(600)"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from envforge.core.probe import run_probe
        run_probe(Path(sys.executable), {script!r}, timeout_s=600)
        """),
        ],
        env=ENV,
    )
    grandchild = _wait_for(pid_file)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(timeout=10)
    assert _gone(grandchild)


def test_what_cannot_start_raises_as_popen_does(tmp_path: Path) -> None:
    import errno

    with pytest.raises(FileNotFoundError) as missing, spawned([str(tmp_path / "nope")]):
        pass
    assert (missing.value.errno, missing.value.strerror, missing.value.filename) == (
        errno.ENOENT,
        "No such file or directory",
        str(tmp_path / "nope"),
    )  # what probe and uv messages show
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError) as denied, spawned([str(plain)]):
        pass
    assert (denied.value.errno, denied.value.strerror, denied.value.filename) == (
        errno.EACCES,
        "Permission denied",
        str(plain),
    )
    with pytest.raises(PermissionError), spawned([str(tmp_path)]):
        pass
    with pytest.raises(FileNotFoundError), spawned(["envforge-no-such-program-on-path"]):
        pass
    with spawned(["true"]) as proc:  # found on PATH
        assert proc.wait(timeout=10) == 0
