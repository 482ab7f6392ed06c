"""CLI for ``envforge cache dir|clean|prune``: envforge's own caches (:mod:`envforge.core.cache`)."""

from __future__ import annotations

import argparse

from envforge.cli.output import Ui, size_text
from envforge.core.cache import CACHES, Removal, cache_root, cache_sizes, clean, prune
from envforge.core.plural import counted

__all__ = ["run_clean", "run_dir", "run_prune"]


def run_dir(args: argparse.Namespace, ui: Ui) -> int:
    """``cache dir``: the root on stdout; each cache's files and size on stderr (JSON: ``envforge.cache/1``)."""
    root = cache_root()
    sizes = cache_sizes(root)
    if ui.json_mode:
        ui.emit_json(
            "cache", {"root": str(root), "caches": [s.as_dict() for s in sizes], "bytes": sum(s.bytes for s in sizes)}
        )
        return 0
    ui.result(str(root))
    width = max(len(name) for name in CACHES)
    for s in sizes:
        ui.info(f"  {s.name:<{width}}  {size_text(s.bytes):>10}  {counted(s.files, 'file')}")
    return 0


def run_clean(args: argparse.Namespace, ui: Ui) -> int:
    """``cache clean [CACHE...]``: remove whole caches (JSON: ``envforge.cache-removal/1``)."""
    return _render(clean(cache_root(), args.names), ui)


def run_prune(args: argparse.Namespace, ui: Ui) -> int:
    """``cache prune``: remove what no run reads again (JSON: ``envforge.cache-removal/1``)."""
    return _render(prune(cache_root()), ui)


def _render(removal: Removal, ui: Ui) -> int:
    if ui.json_mode:
        ui.emit_json("cache-removal", removal.as_dict())
        return 0
    for path in removal.paths:
        ui.info(f"removed {path}")
    ui.result(
        f"removed {counted(removal.files, 'file')} ({size_text(removal.bytes)})"
        if removal.paths
        else "nothing to remove"
    )
    return 0
