"""envforge's safetensors header validation vs the safetensors library's own load, same files, same run.

Writes one safetensors file with ``--tensors`` small tensors (a many-tensor header: the validator's
cost grows with the tensor count, not the weights), then, interleaved, ``--runs`` (>= 5) times each:

- reference: ``safetensors.safe_open(path, "numpy")`` and ``keys()`` (the Rust loader, which parses
  and validates the same header, ``Metadata::validate``);
- envforge: ``envforge.drafter.sources.local_weight_file`` (regular-file check, one read of the
  header, :func:`envforge.drafter.weights.parse_header`).

Prints the median wall time (ms) of each and the ratio envforge / reference.

Usage: ``python benchmarks/bench_safetensors_header.py [--runs 7] [--tensors 2000]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from envforge.drafter.sources import local_weight_file


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--tensors", type=int, default=2000)
    args = ap.parse_args()
    runs = max(args.runs, 5)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        save_file(
            {f"layers.{i}.w": np.zeros((4, 8), dtype=np.float16) for i in range(args.tensors)},
            str(d / "model.safetensors"),
        )
        ref, ours = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            with safe_open(str(d / "model.safetensors"), "numpy") as f:
                n_ref = len(list(f.keys()))
            ref.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            n_ours = len(local_weight_file(d, "model.safetensors").tensors)
            ours.append((time.perf_counter() - t0) * 1000)
        assert n_ref == n_ours == args.tensors
    r, o = statistics.median(ref), statistics.median(ours)
    print(
        f"{args.tensors} tensors, median of {runs}: safetensors.safe_open {r:.2f} ms, "
        f"envforge {o:.2f} ms, ratio {o / r:.2f}"
    )


if __name__ == "__main__":
    main()
