"""envforge.core.probe: the one runner of an environment's interpreter, its limits and its deadline."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from envforge.core.probe import ProbeError, ProbeTimeout, deadline, env_python, run_probe

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
    result = run_probe(
        PY, "import json, sys; print('noise'); print(json.dumps({'argv': sys.argv[1:]}))", args=["a", "b"]
    )
    assert result.data == {"argv": ["a", "b"]}
    assert result.elapsed_s > 0


def test_env_python_is_bin_python(tmp_path: Path) -> None:
    assert env_python(tmp_path / "env") == tmp_path / "env" / "bin" / "python"


def test_a_failing_or_silent_probe_is_a_probe_error() -> None:
    with pytest.raises(ProbeError) as failed:
        run_probe(PY, "import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    assert (failed.value.message, failed.value.returncode, failed.value.stderr_tail) == (
        "probe exited with status 3",
        3,
        "boom",
    )
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
    assert time.monotonic() - start < 150  # the probe sleeps 300 s: it was not waited for
    assert late.value.message.startswith("probe ran past its 1.5 s limit and was killed (process group ")
    assert late.value.deadline_s is None


def test_a_deadline_cuts_the_timeout_and_leaves_no_process() -> None:
    start = time.monotonic()
    with deadline(1.5), pytest.raises(ProbeTimeout) as late:
        run_probe(PY, HANG + "\n", timeout_s=60)
    took = time.monotonic() - start
    assert 1.4 < took < 30  # cut to the deadline: the probe's own limit would be 60 s
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
        run_probe(
            PY,
            HANG.replace("print(child.pid, flush=True)", "open(sys.argv[1], 'w').write(str(child.pid))"),
            args=[str(marker)],
        )
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


# What a ProbeError carries: the tool, the argv without the script, the status and the tail of the output.
ARGV = (str(PY), "-c", "<probe>")


def test_a_failed_probe_names_the_tool_and_hides_the_script() -> None:
    with pytest.raises(ProbeError) as failed:
        run_probe(PY, "import sys; sys.stderr.write('boom\\nbang\\n'); sys.exit(3)", args=["x"])
    assert (failed.value.tool, failed.value.argv, failed.value.returncode, failed.value.stderr_tail) == (
        "python",
        ARGV,
        3,
        "boom\nbang",
    )
    assert failed.value.hint is None


def test_the_stderr_tail_is_the_last_20_lines() -> None:
    with pytest.raises(ProbeError) as failed:
        run_probe(PY, "import sys\nfor i in range(1, 26): print(f'line {i}', file=sys.stderr)\nsys.exit(1)")
    assert failed.value.stderr_tail == "\n".join(f"line {i}" for i in range(6, 26))


def test_no_json_shows_stdout_then_stderr() -> None:
    with pytest.raises(ProbeError) as silent:
        run_probe(PY, "import sys; print('not json'); sys.stderr.write('a warning\\n')")
    assert (
        silent.value.message,
        silent.value.tool,
        silent.value.argv,
        silent.value.returncode,
        silent.value.stderr_tail,
    ) == ("probe printed no JSON on its last line", "python", ARGV, 0, "not json\n\na warning")
    with pytest.raises(ProbeError) as empty:
        run_probe(PY, "pass")
    assert (empty.value.message, empty.value.returncode, empty.value.stderr_tail) == (
        "probe printed no JSON on its last line",
        0,
        "",
    )
    with pytest.raises(ProbeError) as null:
        run_probe(PY, "print('{\"a\": 1}'); print('null')")
    assert null.value.message == "probe printed no JSON on its last line"


def test_a_probe_that_cannot_start_says_what_to_do() -> None:
    with pytest.raises(ProbeError) as missing:
        run_probe(Path("/nonexistent/bin/python"), "pass", args=["a"])
    assert (
        missing.value.message,
        missing.value.tool,
        missing.value.argv,
        missing.value.returncode,
        missing.value.hint,
    ) == (
        "cannot start /nonexistent/bin/python: No such file or directory",
        "python",
        ("/nonexistent/bin/python", "-c", "pass", "a"),
        None,
        "is the environment built? run `envforge build`",
    )


def test_the_answer_keeps_stderr_and_the_elapsed_time_of_the_clock() -> None:
    ticks = iter([10.0, 12.5])
    result = run_probe(PY, "import sys; sys.stderr.write('note\\n'); print('[1, 2]')", clock=lambda: next(ticks))
    assert (result.data, result.stderr, result.elapsed_s) == ([1, 2], "note\n", 2.5)


def test_env_is_the_whole_environment_of_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import json, os; print(json.dumps([os.environ.get('PROBE_MARK'), os.environ.get('PROBE_OTHER')]))"
    monkeypatch.setenv("PROBE_OTHER", "inherited")
    assert run_probe(PY, script).data == [None, "inherited"]
    assert run_probe(PY, script, env={"PROBE_MARK": "given"}).data == ["given", None]


def test_interpreter_flags_come_before_the_script() -> None:
    assert run_probe(
        PY,
        "import json, sys; print(json.dumps([sys.flags.isolated, sys.argv[1:]]))",
        interpreter_flags=["-I"],
        args=["-I"],
    ).data == [1, ["-I"]]


STDERR_THEN_HANG = "import sys, time; sys.stderr.write('waiting\\n'); sys.stderr.flush(); time.sleep(300)"


def test_a_timed_out_probe_keeps_its_stderr() -> None:
    with pytest.raises(ProbeTimeout) as own:
        run_probe(PY, STDERR_THEN_HANG, timeout_s=1.5)
    assert (own.value.tool, own.value.argv, own.value.returncode, own.value.stderr_tail) == (
        "python",
        ARGV,
        None,
        "waiting",
    )
    with deadline(1.5), pytest.raises(ProbeTimeout) as cut:
        run_probe(PY, STDERR_THEN_HANG, timeout_s=60)
    assert (cut.value.tool, cut.value.argv, cut.value.returncode, cut.value.stderr_tail, cut.value.deadline_s) == (
        "python",
        ARGV,
        None,
        "waiting",
        1.5,
    )


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The probe's and the deadline's clock stand still at 1000 s, and the first wait for the probe times out at
    once (the group is then killed as on a real timeout). Returns the timeouts the waits were given.
    The probe must lead its own process group, the first wait must have a limit and the group must be
    dead after it: otherwise the test fails at once (and kills the probe) instead of hanging."""
    import subprocess
    import types

    import envforge.core.deadline
    import envforge.core.probe

    still = types.SimpleNamespace(monotonic=lambda: 1000.0)
    monkeypatch.setattr(envforge.core.probe, "time", still)
    monkeypatch.setattr(envforge.core.deadline, "time", still)  # (where the deadline's clock is read)
    real = subprocess.Popen.wait
    waits: list[float | None] = []

    def fail(proc: subprocess.Popen[str], why: str) -> None:
        proc.kill()
        real(proc)
        raise AssertionError(why)

    def wait(self, timeout=None):  # type: ignore[no-untyped-def]
        waits.append(timeout)
        if len(waits) == 1:
            if os.getpgid(self.pid) != self.pid:
                fail(self, "the probe does not lead its own process group")
            if timeout is None:
                fail(self, "the probe was waited for without a limit")
            raise subprocess.TimeoutExpired(self.args, timeout)
        try:
            return real(self, timeout=10)
        except subprocess.TimeoutExpired:
            fail(self, "the probe's process group was not killed")

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    return waits


SLEEP = "import time; time.sleep(300)"


def test_the_default_limit_is_60_s(frozen: list[float | None]) -> None:
    with pytest.raises(ProbeTimeout) as late:
        run_probe(PY, SLEEP)
    assert frozen == [60.0, None]
    assert late.value.message.startswith("probe ran past its 60 s limit and was killed (process group ")


def test_a_deadline_ending_with_the_own_limit_leaves_the_own_limit(frozen: list[float | None]) -> None:
    with deadline(5), pytest.raises(ProbeTimeout) as late:
        run_probe(PY, SLEEP, timeout_s=5)
    assert frozen == [5, None]
    assert late.value.deadline_s is None
    assert late.value.message.startswith("probe ran past its 5 s limit and was killed (process group ")


def test_a_deadline_cuts_the_limit_to_what_is_left(frozen: list[float | None]) -> None:
    with deadline(0.5), pytest.raises(ProbeTimeout) as late:
        run_probe(PY, SLEEP, timeout_s=5)
    assert frozen == [0.5, None]
    assert late.value.deadline_s == 0.5
    assert late.value.message.startswith("probe ran past its caller's 0.5 s limit and was killed (process group ")


def test_a_deadline_with_exactly_nothing_left_starts_nothing(frozen: list[float | None], tmp_path: Path) -> None:
    flag = tmp_path / "started"
    with deadline(0), pytest.raises(ProbeTimeout) as late:
        run_probe(PY, f"open({str(flag)!r}, 'w').close()", timeout_s=5)
    assert frozen == []
    assert (
        late.value.message,
        late.value.deadline_s,
        late.value.tool,
        late.value.argv,
        late.value.returncode,
        late.value.stderr_tail,
    ) == ("probe ran past its caller's 0 s limit and was not started", 0, "python", ARGV, None, "")
    assert not flag.exists()


def test_stop_running_probes_ends_a_probe_in_another_thread_and_its_grandchild(tmp_path: Path) -> None:
    """A caller unwinding from SIGTERM kills the probes its worker threads wait on (issue 27, N46): those of
    its :func:`probe_group` only (threads given a copy of its context); another caller's probe runs on."""
    import threading
    from contextvars import copy_context

    from envforge.core.probe import probe_group, stop_running_probes

    errors: list[BaseException] = []

    def worker(marker: Path) -> None:
        try:
            run_probe(
                PY,
                HANG.replace("print(child.pid, flush=True)", "open(sys.argv[1], 'w').write(str(child.pid))"),
                args=[str(marker)],
                timeout_s=300,
            )
        except ProbeError as exc:
            errors.append(exc)

    mine, other = tmp_path / "mine", tmp_path / "other"
    with probe_group() as group:
        ours = threading.Thread(target=copy_context().run, args=(worker, mine))
    theirs = threading.Thread(target=worker, args=(other,))
    start = time.monotonic()
    ours.start()
    theirs.start()
    for marker in (mine, other):
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() - start < 30, "the probe never started"
            time.sleep(0.02)
    assert stop_running_probes(group) == 1
    ours.join(timeout=10)
    assert not ours.is_alive() and theirs.is_alive()
    assert [type(e) for e in errors] == [ProbeError] and errors[0].message.startswith("probe exited with status ")
    assert _wait_gone(int(mine.read_text())) and not _wait_gone(int(other.read_text()), 0.5)
    assert stop_running_probes() == 1  # no group: every probe
    theirs.join(timeout=10)
    assert not theirs.is_alive() and len(errors) == 2 and _wait_gone(int(other.read_text()))
    assert stop_running_probes() == 0


def test_a_probe_that_prints_without_end_is_killed_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: a module printing 1 GiB at import took the runner to 2 GB of memory. A real child writes
    standard output for ever; the runner keeps at most STDOUT_LIMIT bytes (lowered here to 1 MiB), kills
    the group and names the cause. Standard error is kept to its last STDERR_KEEP bytes."""
    import envforge.core.probe as probe

    monkeypatch.setattr(probe, "STDOUT_LIMIT", 1 << 20)
    script = (
        "import sys\nsys.stderr.write('e' * (600 << 10) + 'last words')\nsys.stderr.flush()\n"
        "while True:\n    sys.stdout.write('x' * 65536)\n"
    )
    with pytest.raises(ProbeError) as flood:
        run_probe(PY, script, timeout_s=120)
    assert flood.value.message.startswith(
        "probe printed more than 1 MiB on standard output and was killed (process group "
    )
    assert flood.value.message.endswith(
        "something the interpreter runs prints without end (start-up code, a module at import)"
    )
    assert flood.value.hint == "run the environment's `python -c pass` and see what it prints"
    assert flood.value.stderr_tail.endswith("last words") and len(flood.value.stderr_tail) <= probe.STDERR_KEEP
    assert not isinstance(flood.value, ProbeTimeout)
