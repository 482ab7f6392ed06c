"""Benchmark ``envforge patches check --against 'sglang>=0.5.8'``: every sglang release on PyPI
from 0.5.8 to the newest, the project's sglang patchsets, whole process.

Per run, in one process each (``python -m envforge patches check ...``), with the wheels already
downloaded and unpacked in the cache (the first, untimed run fetches them: minutes, network-bound):

1. warm: the cells cached (``<cache>/check``): what a CI job re-running the check pays;
2. reference, measured in the same run: the same command with the cell cache emptied first, so
   every patchset is planned with libcst on every release (the cost without the cell cache).

Median of N runs (default 3). Target (issue 16): warm under 60 s. Prints both medians, their
ratio and the warm time as a fraction of the 60 s budget.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("ENVFORGE_TEST_CACHE", Path.home() / ".cache" / "envforge-tests"))


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", default="sglang>=0.5.8")
    parser.add_argument("--cache", type=Path, default=CACHE, help="wheel cache (default: the test cache)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    argv = [
        sys.executable,
        "-m",
        "envforge",
        "patches",
        "check",
        "--against",
        args.against,
        "--cache",
        str(args.cache),
        "--project",
        str(REPO),
    ]
    first = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fetch, untimed
    print(f"first run (fetch what is missing, fill the cell cache): {time.perf_counter() - first:.1f} s")
    cells = args.cache / "check"
    uncached, warm = [], []
    for _ in range(args.runs):
        shutil.rmtree(cells, ignore_errors=True)
        uncached.append(_timed(argv, env))
        warm.append(_timed(argv, env))
    w, u = statistics.median(warm), statistics.median(uncached)
    releases = len(list((args.cache / "unpacked").glob("sglang-*")))
    print(f"patches check --against '{args.against}' ({releases} sglang trees in the cache), median of {args.runs}:")
    print(f"  warm (cells cached)        {w:.2f} s")
    print(f"  reference (no cell cache)  {u:.2f} s")
    print(f"  warm / reference           {w / u:.3f}")
    print(f"  warm / 60 s budget         {w / 60:.4f}  (target < 1)")


if __name__ == "__main__":
    main()
