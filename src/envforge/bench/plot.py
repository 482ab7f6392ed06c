"""A PNG of output tok/s against concurrency, one line per server configuration (baseline solid,
speculative dashed), with the 95% interval (min/max for one repeat) as error bars.

matplotlib is an optional extra (``pip install 'envforge-stack[plot]'``) imported only here, lazily, with
the non-interactive Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envforge.bench.report import BenchReport
from envforge.core.errors import InputError

__all__ = ["plot_report"]


def _pyplot() -> Any:
    try:
        import matplotlib  # lazy: an optional extra, and slow to import
    except ImportError:
        raise InputError("plotting needs matplotlib, which is not installed",
                         hint="pip install 'envforge-stack[plot]' (or pass --no-plot)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg")

    return plt


def plot_report(report: BenchReport, path: Path, *, title: str | None = None) -> Path:
    """Write the tok/s-vs-concurrency plot of ``report`` to ``path`` (PNG, 800x500 px) and return it.

    :raises InputError: matplotlib is not installed.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for s in report.servers:
        tok = [(lv.concurrency, lv.tok_s) for lv in s.levels if lv.tok_s is not None]  # failed levels: no point
        xs = [c for c, _ in tok]
        ys = [t.median for _, t in tok]
        lo = [max(0.0, t.median - t.bounds()[0]) for _, t in tok]
        hi = [max(0.0, t.bounds()[1] - t.median) for _, t in tok]
        label = f"{s.name} (speculative)" if s.speculative else s.name
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=label,
                    linestyle="--" if s.speculative else "-")
    levels = sorted({lv.concurrency for s in report.servers for lv in s.levels})
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("output tokens/s (median, 95% interval)")
    ax.set_title(title or f"envforge bench: {report.config.get('model', '')}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
    return path
