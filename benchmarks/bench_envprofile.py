"""Interpreter start-up cost of the env profile hook.

Builds three venvs with the real uv (downloads off) from the same Python: one without a profile
(the reference), one with the ``.pth`` hook, one with the sitecustomize block. Each run starts
``python -c pass`` ``--starts`` times per venv, interleaved so machine noise hits all alike; the
figure is the median over ``--runs`` (>= 5) of the mean start time, in ms, and the ratio against
the reference measured in the same run.

Usage: ``python benchmarks/bench_envprofile.py [--python PATH] [--runs 7] [--starts 20]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import uv

from envforge.env.profile import install

PCIE = {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"}


def make_venv(path: Path, python: str) -> Path:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", python, str(path)], check=True, env=env)
    return path


def mean_start_ms(python: Path, starts: int, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    for _ in range(starts):
        subprocess.run([str(python), "-c", "pass"], check=True, env=env)
    return (time.perf_counter() - t0) * 1000 / starts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--python", help="the interpreter of the environment (default: a Python 3.12, found as envforge finds one)"
    )
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--starts", type=int, default=20)
    a = ap.parse_args()
    if a.python is None:
        from envforge.uv.interpreter import find_python  # lazy: as the product finds a Python 3.12

        a.python = str(find_python("3.12").path)
    runs = max(a.runs, 5)
    env = {k: v for k, v in os.environ.items() if k not in PCIE and not k.startswith("PYTHON")}
    with tempfile.TemporaryDirectory() as tmp:
        venvs = {name: make_venv(Path(tmp) / name, a.python) for name in ("none", "pth", "sitecustomize")}
        for mode in ("pth", "sitecustomize"):
            sp = next(venvs[mode].glob("lib/python3*/site-packages"))
            install(sp, "pcie", PCIE, mode=mode, probe_env=env)
        pythons = {name: d / "bin" / "python" for name, d in venvs.items()}
        for p in pythons.values():  # warm: bytecode written, files cached
            mean_start_ms(p, 3, env)
        samples: dict[str, list[float]] = {name: [] for name in pythons}
        for _ in range(runs):
            for name, p in pythons.items():
                samples[name].append(mean_start_ms(p, a.starts, env))
    ref = statistics.median(samples["none"])
    print(f"python -c pass start-up, median of {runs} runs x {a.starts} starts ({a.python})")
    print(f"  no profile (reference) {ref:7.2f} ms")
    for name in ("pth", "sitecustomize"):
        med = statistics.median(samples[name])
        spread = max(samples[name]) - min(samples[name])
        print(f"  {name:<22} {med:7.2f} ms  ratio {med / ref:.3f}  (spread {spread:.2f} ms)")


if __name__ == "__main__":
    main()
