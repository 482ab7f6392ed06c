"""Cost of checking env profile values at recipe load (recipe/envvars.py: B19, B31).

Loads the shipped kimi recipe (and a recipe with a 40-variable profile) ``--loads`` times with the
full checks, and the same with the env value check replaced by a no-op (the reference, measured
in the same run, interleaved). The figure is the median over ``--runs`` of the mean load time, in
ms, and the ratio against the reference.

Usage: ``python benchmarks/bench_recipe_validation.py [--runs 7] [--loads 200]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from envforge.recipe import load as recipe
from envforge.recipe.envvars import NCCL_INT

ROOT = Path(__file__).resolve().parents[1]


def mean_load_ms(path: Path, loads: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loads):
        recipe.load_recipe(path)
    return (time.perf_counter() - t0) * 1000 / loads


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--loads", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.toml"
        names = sorted(NCCL_INT)[:40]
        big.write_text(
            '[recipe]\nname = "big"\npython = "3.12"\n\n[env.pcie]\n' + "".join(f'{n} = "1"\n' for n in names)
        )
        for label, path in (
            ("kimi-k25-sm120.toml", ROOT / "recipes" / "kimi-k25-sm120.toml"),
            ("40 NCCL variables", big),
        ):
            full, ref = [], []
            for _ in range(args.runs):
                full.append(mean_load_ms(path, args.loads))
                with (
                    mock.patch.object(recipe, "env_value_problems", lambda name, value: []),
                    mock.patch.object(recipe, "startup_reader", lambda name: None),
                ):
                    ref.append(mean_load_ms(path, args.loads))
            f, r = statistics.median(full), statistics.median(ref)
            print(f"{label:22} load with env checks {f:.3f} ms, without {r:.3f} ms, ratio {f / r:.3f}")


if __name__ == "__main__":
    main()
