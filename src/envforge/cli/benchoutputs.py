"""Where ``envforge bench`` writes (report, plot, per-request CSV), checked before anything is measured."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from envforge.core.errors import InputError

__all__ = ["check_outputs"]

_WHAT = {"--output": "report", "--plot": "plot", "--csv": "CSV"}


def check_outputs(args: argparse.Namespace) -> None:
    """Before anything is measured: the report, the plot and the CSV can be written where they are
    asked for, and none would be written over another or over an input (prompts, trace).

    :raises InputError: either (exit 2, naming the flag and the path).
    """
    output: Path = args.output
    plot: Path | None = None if args.no_plot else (args.plot or output.with_suffix(".png"))
    if plot is not None and plot.resolve() == output.resolve():
        raise InputError(
            f"--output {output}: the plot would be written over the report",
            hint="give the report a .json name, --plot PATH elsewhere, or --no-plot",
        )
    if args.csv is not None and args.csv.resolve() in {output.resolve(), *([plot.resolve()] if plot else [])}:
        raise InputError(
            f"--csv {args.csv}: the records would be written over the report or the plot",
            hint="give the CSV a .csv name of its own",
        )
    inputs = {"--prompts": args.prompts, "--trace": args.trace}
    for flag, path in inputs.items():
        for what, out in (("--output", output), ("--plot", plot), ("--csv", args.csv)):
            if path is not None and out is not None and out.resolve() == Path(path).resolve():
                raise InputError(
                    f"{what} {out} is the {flag} file: the run would write over its own input",
                    hint=f"write the {_WHAT[what]} elsewhere",
                )
    for what, out in (("--output", output), ("--plot", plot), ("--csv", args.csv)):
        if out is None:
            continue
        if out.is_dir():
            raise InputError(
                f"{what} {out}: is a directory",
                hint=f"give {what} a file name, e.g. {out / 'bench'}"
                + (".json" if what == "--output" else ".png" if what == "--plot" else ".csv"),
            )
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".envforge-check"):
                pass
        except OSError as exc:
            raise InputError(
                f"{what} {out}: cannot write in {out.parent}: {exc.strerror or exc}",
                hint=f"give {what} a path in a writable directory",
            ) from None
