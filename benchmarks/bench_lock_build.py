"""Benchmark: envforge lock and build against bare uv on the same input, median of N runs.

    python benchmarks/bench_lock_build.py [--runs 5]

lock:  ``envforge lock kimi-k25-sm120 --variant cu128`` (169 packages from PyPI, uv cache warm)
       vs ``uv pip compile`` of the same pyproject/platform/Python with no previous lock.
build: ``envforge build`` of the same recipe without patchsets (quickstart's packages, warm cache)
       vs ``uv venv`` + ``uv pip sync`` of the same lock; and the full quickstart build (with the
       four patchsets and the env hook) printed beside it for scale.
startup: ``envforge --help`` vs ``python -c pass``.
Whole processes, wall clock, interleaved runs; prints medians and ratios. Targets: lock and build
<= 1.15x, ``--help`` <= 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVFORGE = [sys.executable, "-m", "envforge"]


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env={**os.environ, **(env or {})})
    return time.perf_counter() - t


def _no_patchsets(recipe_text: str) -> str:
    """The recipe without ``patchsets`` and the ``retire-patchsets`` entries that name them (each a
    whole TOML line, or an array over several lines)."""
    return re.sub(r"^(retire-)?patchsets = \[.*?\]\n", "", recipe_text, flags=re.S | re.M)


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def lock_pair(work: Path) -> tuple[float, float]:
    from envforge.recipe.load import load_recipe
    from envforge.lock.routing import uv_pyproject

    proj = work / "lockproj"
    shutil.rmtree(proj, ignore_errors=True)
    (proj / "recipes").mkdir(parents=True)
    text = (ROOT / "recipes" / "kimi-k25-sm120.toml").read_text()
    (proj / "recipes" / "kimi-k25-sm120.toml").write_text(_no_patchsets(text))
    variant = load_recipe(proj / "recipes" / "kimi-k25-sm120.toml").resolve("cu128")
    bare = work / "bare"
    shutil.rmtree(bare, ignore_errors=True)
    bare.mkdir()
    (bare / "pyproject.toml").write_text(uv_pyproject(variant))
    t_env = timed([*ENVFORGE, "lock", "kimi-k25-sm120", "--variant", "cu128"], proj)
    t_uv = timed(
        [
            uv(),
            "pip",
            "compile",
            "pyproject.toml",
            "--no-config",
            "--no-header",
            "--format",
            "pylock.toml",
            "--python-version",
            "3.12",
            "--python-platform",
            variant.target.platform,
            "-o",
            "pylock.toml",
            "-q",
        ],
        bare,
        {"UV_PYTHON_DOWNLOADS": "never"},
    )
    return t_env, t_uv


def build_pair(work: Path) -> tuple[float, float, float]:
    proj = work / "buildproj"
    if not proj.exists():
        (proj / "recipes").mkdir(parents=True)
        for d in ("patchsets",):
            shutil.copytree(ROOT / d, proj / d)
        text = (ROOT / "recipes" / "quickstart.toml").read_text()
        (proj / "recipes" / "quickstart.toml").write_text(text)
        (proj / "recipes" / "plain.toml").write_text(
            _no_patchsets(text.replace('name = "quickstart"', 'name = "plain"')).split("[env.default]")[0]
        )
        subprocess.run([*ENVFORGE, "lock", "plain"], cwd=proj, check=True, capture_output=True)
        subprocess.run([*ENVFORGE, "lock", "quickstart"], cwd=proj, check=True, capture_output=True)
    t_env = timed([*ENVFORGE, "build", "plain"], proj)
    t_full = timed([*ENVFORGE, "build", "quickstart"], proj)
    return t_env, bare_build(work / "bare-venv", proj / "lockfiles" / "pylock.plain-default.toml"), t_full


def bare_build(venv: Path, lock: Path) -> float:
    """Seconds for bare ``uv venv`` + ``uv pip sync`` of ``lock`` into a fresh ``venv``."""
    from envforge.uv.interpreter import find_python

    shutil.rmtree(venv, ignore_errors=True)
    py = str(find_python("3.12").path)
    t = time.perf_counter()
    subprocess.run(
        [uv(), "venv", "-q", "--python", py, str(venv)], check=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    )
    subprocess.run(
        [
            uv(),
            "pip",
            "sync",
            "-q",
            "--preview-features",
            "pylock",
            "--python",
            str(venv / "bin" / "python"),
            str(lock),
        ],
        check=True,
    )
    return time.perf_counter() - t


def big_build_pair(work: Path) -> tuple[float, float]:
    """The real stack: kimi-k25-sm120 cu128 (169 distributions, torch and CUDA wheels, patchsets)."""
    proj = work / "bigproj"
    if not proj.exists():
        proj.mkdir()
        for d in ("recipes", "patchsets", "lockfiles"):
            shutil.copytree(ROOT / d, proj / d)
    t_env = timed([*ENVFORGE, "build", "kimi-k25-sm120", "--variant", "cu128"], proj)
    return t_env, bare_build(work / "big-bare-venv", proj / "lockfiles" / "pylock.kimi-k25-sm120-cu128.toml")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-lock", action="store_true", help="skip the PyPI-resolving lock pair")
    ap.add_argument(
        "--big",
        action="store_true",
        help="also build the real kimi-k25-sm120 cu128 stack (about 4.5 GB of wheels on the first run)",
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="envforge-bench-"))
    if args.big:
        big_build_pair(work)  # warm the cache
        pairs = [big_build_pair(work) for _ in range(args.runs)]
        a, b = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
        print(
            f"kimi cu128 build {a:.1f} s, uv venv + pip sync {b:.1f} s: {a / b:.2f}x "
            f"(envforge includes 4 patchsets (only the patched files leave uv's cache) and the env hook; median of {args.runs})"
        )
    rows: dict[str, list[float]] = {
        k: [] for k in ("lock", "uv compile", "build", "uv venv+sync", "build+patches", "--help", "python -c pass")
    }
    build_pair(work)  # warm the uv cache and the locks
    for _ in range(args.runs):
        if not args.skip_lock:
            a, b = lock_pair(work)
            rows["lock"].append(a)
            rows["uv compile"].append(b)
        a, b, c = build_pair(work)
        rows["build"].append(a)
        rows["uv venv+sync"].append(b)
        rows["build+patches"].append(c)
        rows["--help"].append(timed([*ENVFORGE, "--help"], work))
        rows["python -c pass"].append(timed([sys.executable, "-c", "pass"], work))
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    for k, v in med.items():
        print(f"{k:<16} {v * 1000:8.0f} ms  (median of {len(rows[k])})")
    if "lock" in med:
        print(f"lock  / uv pip compile       = {med['lock'] / med['uv compile']:.2f}x  (target <= 1.15x)")
    print(f"build / uv venv + pip sync   = {med['build'] / med['uv venv+sync']:.2f}x  (target <= 1.15x)")
    print(f"build with 4 patchsets + hook = {med['build+patches'] / med['uv venv+sync']:.2f}x of bare uv (scale)")
    print(
        f"envforge --help = {med['--help'] * 1000:.0f} ms (target <= 300 ms); python -c pass = "
        f"{med['python -c pass'] * 1000:.0f} ms"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
