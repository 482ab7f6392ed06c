"""Registration of ``envforge cache dir|clean|prune`` (handlers: :mod:`envforge.cli.cache`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.parser import group

__all__ = ["register"]

_ROOT = "$ENVFORGE_CACHE_DIR, else $XDG_CACHE_HOME/envforge, else ~/.cache/envforge"


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``cache`` group: ``dir``, ``clean``, ``prune``."""
    commands = group(
        sub,
        "cache",
        help=SUMMARIES["cache"],
        description=f"envforge's own caches under {_ROOT}: patch results (patch-results), released "
        "wheels and their Python files for `patches check` (releases), validated lock "
        "texts (valid-locks), lock diff's marker verdicts (marker-verdicts). They only save time: removing them costs the next run the "
        "work again. uv's cache is uv's: `uv cache dir|clean|prune`.",
    )
    d = commands.add_parser(
        "dir",
        help="print the cache directory, and each cache's size on stderr",
        description=f"Print envforge's cache directory ({_ROOT}) on stdout, and on stderr "
        "each cache in it with its files and size.",
    )
    c = commands.add_parser(
        "clean",
        help="remove envforge's caches (or the named ones)",
        description="Remove the caches named (default: every one) and say what that freed. "
        "Run it when no `envforge patches check` is running.",
    )
    c.add_argument(
        "names",
        nargs="*",
        metavar="CACHE",
        help="patch-results, releases, valid-locks or marker-verdicts (default: all)",
    )
    p = commands.add_parser(
        "prune",
        help="remove what no run reads again (unpacked wheels, interrupted leftovers)",
        description="Remove what no later run reads: downloaded wheels whose Python files are "
        "unpacked, leftovers of interrupted downloads, unpacks and writes, patched "
        "bytes without their record; say what that freed.",
    )
    for parser, handler in ((d, "run_dir"), (c, "run_clean"), (p, "run_prune")):
        parser.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
        parser.set_defaults(handler=f"envforge.cli.cache:{handler}")
