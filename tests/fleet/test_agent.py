"""The envforge agent (``envforge.fleet.agent.NodeAgent``) as a plain object, without Ray: what it loads,
its code stamp going stale, and ``start``'s ``no-project`` finding. Through a real cluster:
tests/fleet/test_driver.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.fleet.agent import PRELOAD, STALE, NodeAgent
from envforge.fleet.tasks import ROOT_VARIABLE

SRC = Path(__file__).resolve().parents[2] / "src"


def test_an_agent_loads_the_node_side_of_the_fleet_only_and_stamps_it() -> None:
    code = (
        "import json, sys; from envforge.fleet.agent import NodeAgent; a = NodeAgent(); "
        "print(json.dumps([sorted(m for m in sys.modules if m.startswith('envforge.fleet')), "
        "sorted(p.rsplit('/', 1)[-1] for p in a._stamp if '/envforge/fleet/' in p)]))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    modules, stamped = json.loads(res.stdout)
    assert modules == ["envforge.fleet", "envforge.fleet.agent", "envforge.fleet.tasks"]  # never the driver
    assert stamped == ["__init__.py", "agent.py", "tasks.py"]
    assert PRELOAD[0] == "envforge.fleet.tasks"


def test_a_changed_file_makes_every_call_answer_stale_without_running(tmp_path: Path) -> None:
    agent = NodeAgent()
    watched = tmp_path / "module.py"
    watched.write_text("x = 1\n")
    st = watched.stat()
    agent._stamp[str(watched)] = (st.st_mtime_ns, st.st_size)
    assert agent.start("")["findings"] == []
    os.utime(watched, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as an upgrade would
    started = agent.start("")
    verified = agent.verify("quickstart-default", str(tmp_path), ("static",))
    assert (started[STALE], verified[STALE]) == ([str(watched)], [str(watched)])
    assert (started["agent"]["calls"], verified["agent"]["calls"]) == (1, 1)  # neither call ran
    assert set(verified) == {STALE, "agent"}


def test_start_names_a_project_without_recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ROOT_VARIABLE, raising=False)
    agent = NodeAgent()
    answer = agent.start(str(tmp_path))
    assert answer["findings"] == [{"kind": "no-project", "subject": str(tmp_path)}]
    assert answer["agent"]["calls"] == 1 and answer["agent"]["pid"] == os.getpid()
    (tmp_path / "recipes").mkdir()
    assert agent.start(str(tmp_path))["findings"] == []
    assert agent.start("")["findings"] == []  # no path given: nothing checked
