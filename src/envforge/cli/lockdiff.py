"""CLI for lock diff: ``envforge lock diff ...`` and ``envforge lock textconv FILE``.

Parses, calls one function of :mod:`envforge.lockdiff`, renders (registration, which imports none
of it: :mod:`envforge.cli.commands.lockdiff`). Exit status: 0, or 1 with ``--exit-code`` when changes
are shown; 2 for bad input (missing file, conflict markers, not a lock).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.core.errors import EXIT_CHECK_FAILED, EXIT_OK, InputError
from envforge.core.plural import counted
from envforge.core.textfile import read_bytes
from envforge.lockdiff import diff_git, diff_sides, diff_variants, render, textconv

__all__ = ["run_diff", "run_textconv"]

_USAGE_HINT = (
    "use `envforge lock diff OLD NEW` (paths or REV:PATH), "
    "`envforge lock diff --git REV`, or `envforge lock diff RECIPE --variants`"
)


def run_diff(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge lock diff``: 0, or 1 with ``--exit-code`` when changes are shown."""
    fmt = "json" if args.json else args.format
    if args.yanked and (args.git or args.variants or len(args.sides) != 2):
        raise InputError("--yanked checks the NEW side of `envforge lock diff OLD NEW`", hint=_USAGE_HINT)
    if args.variants:
        if len(args.sides) != 1 or args.git:
            raise InputError("--variants takes exactly one RECIPE", hint=_USAGE_HINT)
        return _variants(args.sides[0], args, fmt, ui)
    if args.git:
        if args.sides:
            raise InputError("--git REV takes no lock paths", hint=_USAGE_HINT)
        diffs = diff_git(args.git, base=Path.cwd())
        if not diffs and fmt != "json":
            ui.info(f"no lockfile changed since {args.git}")
    elif len(args.sides) == 2:
        diffs = (diff_sides(args.sides[0], args.sides[1], base=Path.cwd()),)
    else:
        raise InputError(f"lock diff needs two sides, got {len(args.sides)}", hint=_USAGE_HINT)
    yanks = _yanks(args) if args.yanked else None
    _render(diffs, fmt, args.show_all, ui, yanks)
    changed = any(d.has_changes(args.show_all) for d in diffs) or bool(yanks and yanks.yanked)
    return EXIT_CHECK_FAILED if args.exit_code and changed else EXIT_OK


def _yanks(args: argparse.Namespace) -> Any:
    """``--yanked``: the NEW side's pins asked of their indexes (:mod:`envforge.lock.yanks`)."""
    # lazy: only --yanked reads indexes (httpx2)
    from envforge.lock.yanks import yanked_pins
    from envforge.lockdiff.model import index_pins, unindexed_entries
    from envforge.lockdiff.sources import read_side
    from envforge.patching.memo import default_cache

    lock = read_side(args.sides[1], base=Path.cwd())
    return replace(yanked_pins(index_pins(lock), default_cache()), no_index=unindexed_entries(lock))


def _render(diffs: Any, fmt: str, show_all: bool, ui: Ui, yanks: Any = None) -> None:
    if fmt == "json":
        data: dict[str, Any] = {"diffs": [render.diff_data(d, show_all=show_all) for d in diffs]}
        if yanks is not None:
            data.update(
                yanked=[asdict(y) for y in yanks.yanked],
                unchecked=list(yanks.unchecked),
                stale=list(yanks.stale),
                no_index=list(yanks.no_index),
            )
        ui.emit_json("lockdiff", data, version=render.SCHEMA_VERSION)
        return
    if yanks is not None:
        from envforge.lock.yanks import warning_lines  # lazy: loaded already by --yanked

        for line in warning_lines(yanks, diffs[0].new_label):
            ui.warn(line)
        if not yanks.yanked and yanks.pages > yanks.unread:  # said, so a clean check is seen to have run
            ui.info(
                f"{diffs[0].new_label}: no pin it could check is yanked "
                f"({yanks.pages - yanks.unread} of {counted(yanks.pages, 'index page')} read)"
            )
    if not diffs:  # `--git REV` with no lockfile changed: said on stderr; nothing on stdout
        return
    draw = render.render_markdown if fmt == "markdown" else render.render_terminal
    ui.result("\n\n".join(draw(d, show_all=show_all) for d in diffs))


def _variants(recipe: str, args: argparse.Namespace, fmt: str, ui: Ui) -> int:
    # lazy: only --variants loads the project's recipes and the matrix
    from envforge.cli.project import project_of
    from envforge.lockdiff import matrix

    proj = project_of(args, ui)
    m = diff_variants(recipe, lockfiles_dir=proj.lockfiles_dir)
    unlocked = _unlocked_variants(proj.recipes_dir / f"{recipe}.toml", m.variants)
    if unlocked:
        ui.warn(
            f"variants of {recipe} without a lock (not in the matrix): {', '.join(unlocked)}; "
            f"lock them with `envforge lock {recipe} --variant {unlocked[0]}`"
        )
    if fmt == "json":
        ui.emit_json("lockdiff.matrix", matrix.matrix_data(m))
    elif fmt == "markdown":
        ui.result(matrix.render_matrix_markdown(m))
    else:
        ui.result(matrix.render_matrix_terminal(m))
    return 0


def _unlocked_variants(recipe_file: Path, locked: tuple[str, ...]) -> list[str]:
    """Variants the recipe defines that have no lock (empty when the recipe file is not there)."""
    if not recipe_file.is_file():
        return []
    # lazy: two plain locks never load the recipe modules
    from envforge.recipe.load import load_recipe

    return [v for v in load_recipe(recipe_file).variants if v not in locked]


def run_textconv(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge lock textconv FILE``: the readable text of a lock (its raw text when it is none)."""
    try:
        ui.result(textconv(args.file))
    except InputError as exc:
        # git shows whatever textconv prints: fall back to the raw text so `git diff` still works,
        # read with the same limits (a regular file, at most 64 MiB); with no raw text, exit 2.
        raw = read_bytes(args.file, what="lock")
        ui.warn(f"{exc.message}; showing the raw file")
        ui.out.write(raw.decode("utf-8", errors="replace"))
    return 0
