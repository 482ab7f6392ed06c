"""envforge.probe: the one runner of an environment's interpreter, its limits and its deadline."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from envforge.probe import ProbeError, ProbeTimeout, deadline, env_python, run_probe

PY = Path(sys.executable)
# A probe that starts a grandchild in its own process group and never answers.
HANG = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print(child.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def _wait_gone(pid: int, within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_last_stdout_line_is_the_answer() -> None:
    result = run_probe(PY, "import json, sys; print('noise'); print(json.dumps({'argv': sys.argv[1:]}))",
                       args=["a", "b"])
    assert result.data == {"argv": ["a", "b"]}
    assert result.elapsed_s > 0


def test_env_python_is_bin_python(tmp_path: Path) -> None:
    assert env_python(tmp_path / "env") == tmp_path / "env" / "bin" / "python"


def test_a_failing_or_silent_probe_is_a_probe_error() -> None:
    with pytest.raises(ProbeError) as failed:
        run_probe(PY, "import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    assert (failed.value.message, failed.value.returncode, failed.value.stderr_tail) == (
        "probe exited with status 3", 3, "boom")
    with pytest.raises(ProbeError) as silent:
        run_probe(PY, "print('not json')")
    assert silent.value.message == "probe printed no JSON on its last line"
    with pytest.raises(ProbeError) as missing:
        run_probe(Path("/nonexistent/bin/python"), "pass")
    assert missing.value.message.startswith("cannot start /nonexistent/bin/python: ")
    assert missing.value.exit_code == 3


def test_its_own_timeout_kills_the_whole_group() -> None:
    start = time.monotonic()
    with pytest.raises(ProbeTimeout) as late:
        run_probe(PY, HANG, timeout_s=1.5)
    assert time.monotonic() - start < 10
    assert late.value.message.startswith("probe ran past its 1.5 s limit and was killed (process group ")
    assert late.value.deadline_s is None


def test_a_deadline_cuts_the_timeout_and_leaves_no_process() -> None:
    start = time.monotonic()
    with deadline(1.5), pytest.raises(ProbeTimeout) as late:
        run_probe(PY, HANG + "\n", timeout_s=60)
    took = time.monotonic() - start
    assert 1.4 < took < 10
    assert late.value.deadline_s == 1.5
    assert late.value.message.startswith("probe ran past its caller's 1.5 s limit and was killed (process group ")
    pgid = int(late.value.message.rsplit(" ", 1)[1].rstrip(")"))
    assert _wait_gone(pgid)
    # The probe's own shorter limit still speaks for itself.
    with deadline(60), pytest.raises(ProbeTimeout) as own:
        run_probe(PY, HANG, timeout_s=1.0)
    assert own.value.deadline_s is None and "its 1 s limit" in own.value.message


def test_the_grandchild_dies_with_the_group(tmp_path: Path) -> None:
    marker = tmp_path / "child-pid"
    with deadline(2.0), pytest.raises(ProbeTimeout):
        run_probe(PY, HANG.replace("print(child.pid, flush=True)", "open(sys.argv[1], 'w').write(str(child.pid))"),
                  args=[str(marker)])
    assert _wait_gone(int(marker.read_text()))


def test_nothing_left_of_the_deadline_starts_nothing(tmp_path: Path) -> None:
    flag = tmp_path / "started"
    with deadline(0.01):
        time.sleep(0.05)
        with pytest.raises(ProbeTimeout) as late:
            run_probe(PY, f"open({str(flag)!r}, 'w').close(); print('{{}}')")
    assert late.value.message == "probe ran past its caller's 0.01 s limit and was not started"
    assert not flag.exists()


def test_nested_deadlines_keep_the_earlier_end() -> None:
    with deadline(1.0):
        with deadline(100.0), pytest.raises(ProbeTimeout) as inner:
            run_probe(PY, HANG, timeout_s=60)
        assert inner.value.deadline_s == 1.0
    with deadline(100.0):
        with deadline(1.0), pytest.raises(ProbeTimeout) as tighter:
            run_probe(PY, HANG, timeout_s=60)
        assert tighter.value.deadline_s == 1.0
    # Outside every block, no cut.
    assert run_probe(PY, "print('{}')", timeout_s=60).data == {}


def test_a_thread_given_the_context_keeps_the_deadline() -> None:
    from concurrent.futures import ThreadPoolExecutor
    from contextvars import copy_context

    with deadline(1.0), ThreadPoolExecutor(max_workers=1) as pool:
        late = pool.submit(copy_context().run, run_probe, PY, HANG, timeout_s=60).exception(timeout=30)
    assert isinstance(late, ProbeTimeout) and late.deadline_s == 1.0
