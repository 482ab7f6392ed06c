"""CLI for ``envforge init``: scaffold a project."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``init``."""
