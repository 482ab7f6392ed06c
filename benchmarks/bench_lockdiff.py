"""Benchmark: ``envforge lock diff`` of two 235-entry locks, whole process.

Reference (the floor for any Python tool): a bare ``python -c`` process that only parses both files
with ``tomllib``. ``git diff --no-index`` of the same files is shown for scale. The three commands
run interleaved, ``--runs`` times each (default 7); the medians are printed, and the ratio
envforge / tomllib-floor is the median of the per-round ratios (each round runs every command back
to back, so a shared machine's drift between rounds cancels). Also printed: envforge / the
validation floor (tomllib parse plus ``Pylock.from_dict`` of both: the work any tool that validates
with packaging cannot avoid), the target: <= 1.25x, warm and cold (``--check`` exits 1 when either
CPU ratio to the validation floor is above; CPU, as wall time on a shared machine is noisy).

Usage: ``python benchmarks/bench_lockdiff.py [--runs N] [--check] [--uvlock | OLD NEW]``; defaults are the
generated real-world-sized pair under tests/data/lockdiff (``notebook-235-*.toml``, 235 entries
each, written by make_cases.py there: every entry moves index path, six change otherwise). The
real ~170-package kimi locks (tests/data/locks) can be passed as OLD NEW. ``--uvlock`` measures a
3 MB uv.lock with ``conflicts`` (benchmarks/data/uvlock-3mb: 512 entries, 525 conflict markers,
``cpu``/``gpu`` torch extras; written by uv 0.13.9 from the pyproject.toml beside it, resolved
against PyPI on 2026-12-07) against a copy with one upgrade. A uv.lock has no validator beside
uv's own reader, so its validation floor is the tomllib parse itself.

Breakdown (where the time above the floor goes), as further reference processes measured in the
same interleaved runs: ``python -c pass`` (interpreter start), the floor plus ``import
packaging.pylock``, and the floor plus ``Pylock.from_dict`` of both documents (the validation
floor: what any tool pays that validates both files with packaging). ``envforge lock diff`` is
measured twice: with a cold validation cache (``ENVFORGE_NO_LOCK_CACHE=1``: every file validated
by packaging, the first read of a lock) and with a warm one (the same bytes read before). Figures
and their analysis: docs/lock-diff.md, "Speed". CPU is
user + system time of the child from ``resource.getrusage`` (microseconds; ``os.times`` counts
10 ms ticks).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "tests" / "data" / "lockdiff"
DEFAULT_OLD = LOCKS / "notebook-235-old.toml"
DEFAULT_NEW = LOCKS / "notebook-235-new.toml"
FLOOR = "import sys, tomllib\nfor p in sys.argv[1:]:\n    tomllib.load(open(p, 'rb'))"
IMPORT = "import sys, tomllib, packaging.pylock\nfor p in sys.argv[1:]:\n    tomllib.load(open(p, 'rb'))"
VALIDATE = (
    "import sys, tomllib\nfrom packaging.pylock import Pylock\nfor p in sys.argv[1:]:\n"
    "    Pylock.from_dict(tomllib.load(open(p, 'rb')))"
)
ENVFORGE = "envforge lock diff (warm cache)"
COLD = "envforge lock diff (cold)"
FLOOR_NAME = "python + tomllib (floor)"


UVLOCK = ROOT / "benchmarks" / "data" / "uvlock-3mb" / "uv.lock"
VALID = "floor + Pylock.from_dict (valid.)"


def is_uv_lock(path: Path) -> bool:
    """A uv.lock (no packaging validator: the tomllib floor is its validation floor)."""
    return path.name.endswith(".lock") or "\n[[package]]\n" in path.read_text()[:200_000]


def commands(old: Path, new: Path) -> dict[str, list[str]]:
    """Name -> argv of each measured command."""
    script = Path(sys.executable).with_name("envforge")  # the console script users run
    envforge = [str(script)] if script.is_file() else [sys.executable, "-m", "envforge"]
    diff = [*envforge, "lock", "diff", str(old), str(new)]
    cmds = {
        ENVFORGE: diff,
        COLD: ["env", "ENVFORGE_NO_LOCK_CACHE=1", *diff],
        FLOOR_NAME: [sys.executable, "-c", FLOOR, str(old), str(new)],
        "python -c pass (start)": [sys.executable, "-c", "pass"],
    }
    if not (is_uv_lock(old) or is_uv_lock(new)):
        cmds["floor + import packaging.pylock"] = [sys.executable, "-c", IMPORT, str(old), str(new)]
        cmds[VALID] = [sys.executable, "-c", VALIDATE, str(old), str(new)]
    git = shutil.which("git")
    if git:
        cmds["git diff --no-index (scale)"] = [git, "diff", "--no-index", "--stat", str(old), str(new)]
    return cmds


def child_env(pycache: str) -> dict[str, str]:
    """The environment of the measured processes: bytecode cached, as in any installed
    environment (``PYTHONDONTWRITEBYTECODE`` dropped), the cache kept out of the tree in a temp
    dir (``PYTHONPYCACHEPREFIX``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def time_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms user+system) of one run; the command's output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", nargs="?", type=Path, default=DEFAULT_OLD)
    parser.add_argument("new", nargs="?", type=Path, default=DEFAULT_NEW)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a CPU ratio to the validation floor is above 1.25"
    )
    parser.add_argument(
        "--uvlock", action="store_true", help="the 3 MB uv.lock with conflicts, and a copy with one upgrade"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envforge-bench-") as work:
        if args.uvlock:
            args.old = UVLOCK
            args.new = Path(work) / "uv.lock"
            text = UVLOCK.read_text()
            bumped = text.replace('name = "zstandard"\nversion = "0.25.0"', 'name = "zstandard"\nversion = "0.26.0"', 1)
            assert bumped != text
            args.new.write_text(bumped)
        return measure(args)


def measure(args: argparse.Namespace) -> int:
    """Run the interleaved rounds of :func:`commands` on ``args.old`` / ``args.new`` and print."""
    cmds = commands(args.old, args.new)
    with tempfile.TemporaryDirectory(prefix="envforge-bench-pycache-") as pycache:
        env = child_env(pycache)
        for argv in cmds.values():  # warm the OS file cache and the bytecode cache
            time_once(argv, env)
        wall: dict[str, list[float]] = {name: [] for name in cmds}
        cpu: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(max(args.runs, 5)):
            for name, argv in cmds.items():
                w, c = time_once(argv, env)
                wall[name].append(w)
                cpu[name].append(c)
    runs = len(wall[ENVFORGE])
    print(
        f"lock diff benchmark: {args.old} ({args.old.stat().st_size} bytes) vs {args.new} "
        f"({args.new.stat().st_size} bytes); median of {runs} runs each, interleaved"
    )
    print(f"  {'command':<34} {'wall ms':>8} {'(range)':>13} {'cpu ms':>8} {'cpu / floor':>11}")
    floor_cpu = statistics.median(cpu[FLOOR_NAME])
    for name in cmds:
        spread = f"({min(wall[name]):.0f}-{max(wall[name]):.0f})"
        print(
            f"  {name:<34} {statistics.median(wall[name]):8.1f} {spread:>13} "
            f"{statistics.median(cpu[name]):8.1f} {statistics.median(cpu[name]) / floor_cpu:10.2f}x"
        )
    med = {name: statistics.median(cpu[name]) for name in cmds}
    start = med["python -c pass (start)"]
    valid = VALID if VALID in cmds else FLOOR_NAME
    if VALID in cmds:
        imp = med["floor + import packaging.pylock"] - med[FLOOR_NAME]
        val = med[VALID] - med[FLOOR_NAME]
        print(
            f"breakdown (cpu ms, differences of medians): interpreter start {start:.1f}; tomllib import + "
            f"parse of both {med[FLOOR_NAME] - start:.1f}; import packaging.pylock {imp:.1f}; "
            f"Pylock.from_dict of both {val - imp:.1f}; envforge's own work (imports, reading, "
            f"classify, render) {med[COLD] - med[VALID]:.1f} cold, "
            f"{med[ENVFORGE] - med[FLOOR_NAME]:.1f} above the floor warm"
        )
    else:
        print(
            f"breakdown (cpu ms, differences of medians): interpreter start {start:.1f}; tomllib import + "
            f"parse of both {med[FLOOR_NAME] - start:.1f} (a uv.lock: the validation floor); envforge's own "
            f"work {med[COLD] - med[FLOOR_NAME]:.1f} cold, {med[ENVFORGE] - med[FLOOR_NAME]:.1f} warm"
        )

    # Paired ratios: each round runs every command back to back, so dividing within a round cancels
    # the drift of a shared machine's speed between rounds; the median of the rounds' ratios is kept.
    def paired(name: str, series: dict[str, list[float]]) -> float:
        return statistics.median(x / f for x, f in zip(series[name], series[FLOOR_NAME], strict=True))

    warm, cold = paired(ENVFORGE, wall), paired(COLD, wall)
    print(
        f"ratio envforge / tomllib floor (median of per-round ratios): warm cache {warm:.2f}x wall, "
        f"{paired(ENVFORGE, cpu):.2f}x cpu; cold {cold:.2f}x wall, {paired(COLD, cpu):.2f}x cpu; "
        f"validation floor alone {paired(valid, wall):.2f}x "
        f"wall, {paired(valid, cpu):.2f}x cpu; load average "
        f"{os.getloadavg()[0]:.2f}"
    )

    def to_valid(name: str, series: dict[str, list[float]]) -> float:
        return statistics.median(x / f for x, f in zip(series[name], series[valid], strict=True))

    print(
        f"ratio envforge / validation floor ({'tomllib parse + Pylock.from_dict' if valid == VALID else 'tomllib parse'}"
        ", issue target <= 1.25x cold, warm <= 1.5x the tomllib floor): "
        f"warm cache {to_valid(ENVFORGE, wall):.2f}x wall, {to_valid(ENVFORGE, cpu):.2f}x cpu; "
        f"cold {to_valid(COLD, wall):.2f}x wall, {to_valid(COLD, cpu):.2f}x cpu"
    )
    worst = max(to_valid(ENVFORGE, cpu), to_valid(COLD, cpu))
    return 1 if args.check and worst > 1.25 else 0


if __name__ == "__main__":
    sys.exit(main())
