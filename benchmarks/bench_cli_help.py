"""Benchmark: ``envforge --help`` and other commands that only parse, whole process.

Reference measured in the same run: a bare ``python -c pass`` (the interpreter's own start-up,
the floor for any Python CLI). The commands run interleaved, ``--runs`` times each (default 15);
medians are printed with the ratio envforge / floor. Budget (issue 15): ``envforge --help``
<= 0.3 s; ``--check`` exits 1 when the median is above it. Run it with compiled bytecode (a first
run writes ``__pycache__``; under ``PYTHONDONTWRITEBYTECODE=1`` every run compiles the sources and
measures that instead).

Usage: ``python benchmarks/bench_cli_help.py [--runs N] [--check]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 0.3


def commands() -> dict[str, list[str]]:
    """Name -> argv of each measured command (the console script users run)."""
    script = Path(sys.executable).with_name("envforge")
    envforge = [str(script)] if script.is_file() else [sys.executable, "-m", "envforge"]
    return {
        "envforge --help": [*envforge, "--help"],
        "envforge lock --help": [*envforge, "lock", "--help"],
        "envforge lock diff --help": [*envforge, "lock", "diff", "--help"],
        "envforge verify --help": [*envforge, "verify", "--help"],
        "envforge completion bash": [*envforge, "completion", "bash"],
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--check", action="store_true", help=f"exit 1 when envforge --help > {BUDGET_S} s")
    opts = ap.parse_args()
    cmds = commands()
    times: dict[str, list[float]] = {name: [] for name in cmds}
    env = dict(os.environ)
    for _ in range(opts.runs):
        for name, argv in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
            times[name].append(time.perf_counter() - t0)
    floor = statistics.median(times["python -c pass (floor)"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<28} median {med * 1000:7.1f} ms  ({med / floor:4.1f}x the floor)")
    help_s = statistics.median(times["envforge --help"])
    print(f"envforge --help: {help_s:.3f} s (budget {BUDGET_S} s)")
    return 1 if opts.check and help_s > BUDGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
