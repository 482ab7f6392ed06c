"""``envforge/__main__.py``: the console script's entry point. A Ctrl-C while the CLI's modules are
still being imported (issue 41: a traceback, in the first ~50 ms) is ``error: interrupted``, exit 130.

The window is reached from outside: the child process raises KeyboardInterrupt at the import of
``envforge.cli`` (where a real SIGINT in those milliseconds lands), then runs the real entry point."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

INTERRUPTED_AT_IMPORT = """
import builtins
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == "envforge.cli":
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
from envforge.__main__ import run
run()
"""


def test_a_ctrl_c_while_the_cli_is_imported_is_one_line_and_exit_130() -> None:
    res = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_IMPORT, "--help"], capture_output=True, text=True, timeout=60
    )
    assert (res.returncode, res.stdout, res.stderr) == (130, "", "error: interrupted\n")


def test_the_console_script_is_this_entry_point() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"] == {"envforge": "envforge.__main__:run"}
    res = subprocess.run([sys.executable, "-m", "envforge", "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("envforge ")
