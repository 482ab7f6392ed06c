"""Remote inspect of a drafter vs a full download of the same repository, bytes and time.

Serves one EAGLE-3-shaped drafter (K2-sized vocabularies, about 100 MB of safetensors weights by
default) from the local hub-compatible server of the tests (``tests/support/hub_server.py``, 127.0.0.1:
the real hub is never contacted), then, interleaved, ``--runs`` (>= 5) times each:

- reference: ``fetch_drafter`` into a fresh directory (``hf_hub_download`` + re-hash), then
  ``inspect_drafter`` on it;
- remote: ``inspect_drafter("repo@sha")`` (config + safetensors header by range requests).

Prints the median bytes served and wall time (ms) of each and the ratios remote / reference.
Loopback HTTP makes the download far cheaper than on a real network: the byte ratio is the figure
that carries over, the time ratio is a lower bound on the gain.

Usage: ``python benchmarks/bench_drafter.py [--runs 7] [--hidden 1024] [--intermediate 4096]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hub_server import HubServer, eagle3_config, running_hub, write_drafter  # noqa: E402

from envforge.drafter import fetch_drafter, inspect_drafter  # noqa: E402


def measure(server: HubServer, action: Callable[[], object]) -> tuple[int, float]:
    """(bytes served, wall ms) of one call of ``action``."""
    server.reset_counters()
    t0 = time.perf_counter()
    action()
    return server.bytes_served, (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=4096)
    args = parser.parse_args()
    runs = max(5, args.runs)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cfg = eagle3_config(
            hidden=args.hidden, intermediate=args.intermediate, heads=16, vocab=163_840, draft_vocab=32_000
        )
        local = write_drafter(tmp / "src", cfg)
        weights = (local / "model.safetensors").stat().st_size
        server = HubServer()
        sha = server.add_commit(
            "bench/drafter", {"config.json": local / "config.json", "model.safetensors": local / "model.safetensors"}
        )
        full: list[tuple[int, float]] = []
        remote: list[tuple[int, float]] = []
        with running_hub(server):
            for i in range(runs):
                dest = tmp / f"fetch-{i}"
                full.append(
                    measure(
                        server,
                        lambda: inspect_drafter(
                            str(fetch_drafter("bench/drafter", sha, dest, root=tmp, endpoint=server.url).dest)
                        ),
                    )
                )
                remote.append(
                    measure(
                        server,
                        lambda: inspect_drafter(
                            f"bench/drafter@{sha}", endpoint=server.url, cache_dir=tmp / f"cache-{i}"
                        ),
                    )
                )
    fb, ft = statistics.median(b for b, _ in full), statistics.median(t for _, t in full)
    rb, rt = statistics.median(b for b, _ in remote), statistics.median(t for _, t in remote)
    print(f"drafter: {weights / 1e6:.1f} MB of safetensors weights, {runs} runs, medians")
    print(f"reference (fetch + inspect): {fb:>12,.0f} bytes  {ft:8.1f} ms")
    print(f"remote inspect (headers):    {rb:>12,.0f} bytes  {rt:8.1f} ms")
    print(
        f"ratio remote / reference:    bytes {rb / fb:.5f} ({fb / rb:,.0f}x fewer)  "
        f"time {rt / ft:.3f} ({ft / rt:.1f}x faster)"
    )


if __name__ == "__main__":
    main()
