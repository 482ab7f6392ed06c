"""CLI for the `verify` command group (placeholder: commands are registered as they land)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register this group's commands on the top-level subparsers."""
