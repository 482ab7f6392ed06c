"""The Pythons tests build environments with, found as the product finds them
(:func:`envforge.uv.interpreter.find_python`: pyenv installs, then ``uv python find``), never a path
written into a test: the suite runs where pyenv keeps them elsewhere, or in a ``uv venv``."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from envforge.uv.interpreter import PythonNotFound, find_python


@cache
def python_for(version: str) -> Path:
    """The interpreter of Python ``version`` (``"3.12"``); the calling test is skipped, saying so,
    when this machine has none."""
    try:
        return find_python(version).path
    except PythonNotFound as exc:
        pytest.skip(f"needs Python {version}: {exc.message}", allow_module_level=True)
