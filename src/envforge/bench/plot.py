"""A PNG of a report: output tok/s per level, one line per server configuration (baseline solid,
speculative dashed) with the 95% interval (min/max for one repeat) as error bars, against
concurrency, or against the request rate when the report has open-loop levels at several rates (a
sweep: levels that met the SLO filled, the others hollow). Below it, for each server whose metrics
were read (:mod:`envforge.bench.gauges`), a panel of its engine's load over each level's time:
requests running (solid) and waiting (dashed) on the left axis, KV cache use (dotted, %) on the
right, one colour per level.

matplotlib is an optional extra (``pip install 'envforge-stack[plot]'``) imported only here, lazily, with
the non-interactive Agg backend.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envforge.bench.report import BenchReport
from envforge.bench.result import LevelResult, ServerResult
from envforge.core.errors import InputError
from envforge.core.fs import atomic_write

__all__ = ["plot_report"]


def _pyplot() -> Any:
    try:
        import matplotlib  # lazy: an optional extra, and slow to import
    except ImportError:
        raise InputError(
            "plotting needs matplotlib, which is not installed",
            hint="pip install 'envforge-stack[plot]' (or pass --no-plot)",
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after matplotlib.use("Agg")

    return plt


def _by_rate(report: BenchReport) -> bool:
    """Levels differ by their open-loop rate (a sweep), not only by concurrency."""
    return len({lv.request_rate for s in report.servers for lv in s.levels if lv.request_rate is not None}) > 1


def _passed(lv: LevelResult) -> bool:
    return not lv.failed_requests and (lv.goodput is None or lv.goodput.met)


def _throughput(ax: Any, report: BenchReport) -> None:
    by_rate = _by_rate(report)
    for s in report.servers:
        # failed levels: no point; by rate, closed-loop levels have none either
        levels = sorted(
            (lv for lv in s.levels if lv.tok_s is not None and not (by_rate and lv.request_rate is None)),
            key=lambda lv: (lv.request_rate or 0.0) if by_rate else lv.concurrency,
        )
        xs = [(lv.request_rate or 0.0) if by_rate else lv.concurrency for lv in levels]
        ys = [lv.tok_s.median for lv in levels if lv.tok_s is not None]
        lo = [max(0.0, t.median - t.bounds()[0]) for t in (lv.tok_s for lv in levels) if t is not None]
        hi = [max(0.0, t.bounds()[1] - t.median) for t in (lv.tok_s for lv in levels) if t is not None]
        label = f"{s.name} (speculative)" if s.speculative else s.name
        line = ax.errorbar(
            xs,
            ys,
            yerr=[lo, hi],
            marker=None if by_rate else "o",
            capsize=4,
            label=label,
            linestyle="--" if s.speculative else "-",
        )
        if by_rate:  # filled: the level met the SLO; hollow: it missed it (or had failed requests)
            colour = line.lines[0].get_color()
            for x, y, lv in zip(xs, ys, levels):
                ax.plot([x], [y], "o", color=colour, markerfacecolor=colour if _passed(lv) else "white")
    ax.set_xscale("log", base=2)
    ticks = sorted(
        {
            (lv.request_rate or 0.0) if by_rate else lv.concurrency
            for s in report.servers
            for lv in s.levels
            if not by_rate or lv.request_rate is not None
        }
    )
    ax.set_xticks(ticks, [format(t, "g") for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("request rate sent, requests/s (hollow: missed the SLO)" if by_rate else "concurrent requests")
    ax.set_ylabel("output tokens/s (median, 95% interval)")
    ax.grid(True, alpha=0.3)
    ax.legend()


def _load(ax: Any, server: ServerResult, plt: Any) -> None:
    """One server's engine load over each level's time (seconds from the level's start)."""
    levels = [lv for lv in server.levels if lv.server_metrics is not None and lv.server_metrics.samples]
    colours = plt.get_cmap("viridis")
    kv = ax.twinx()
    for i, lv in enumerate(levels):
        colour = colours(i / max(1, len(levels) - 1) * 0.9)
        samples = lv.server_metrics.samples if lv.server_metrics is not None else ()
        for n, rep in enumerate(sorted({s.repeat for s in samples})):  # a line per repeat: none across the gaps
            part = [s for s in samples if s.repeat == rep]
            _series(ax, part, "running", "-", colour, lv.label if n == 0 else None)
            _series(ax, part, "waiting", "--", colour, None)
            _series(kv, part, "kv_cache_use", ":", colour, None, scale=100.0)
    ax.set_title(
        f"server '{server.name}': engine load (running solid, waiting dashed, KV cache dotted)", fontsize="medium"
    )
    ax.set_xlabel("seconds from the level's start")
    ax.set_ylabel("requests")
    kv.set_ylabel("KV cache use, %")
    ax.grid(True, alpha=0.3)
    if levels:
        ax.legend(fontsize="small")


def _series(
    ax: Any, samples: Sequence[Any], key: str, style: str, colour: Any, label: str | None, scale: float = 1.0
) -> None:
    points = [(s.t_s, getattr(s, key) * scale) for s in samples if getattr(s, key) is not None]
    if points:
        ax.plot(
            [t for t, _ in points],
            [v for _, v in points],
            linestyle=style,
            marker=".",
            markersize=3,
            color=colour,
            label=label,
        )


def plot_report(report: BenchReport, path: Path, *, title: str | None = None) -> Path:
    """Write the plot of ``report`` to ``path`` (PNG, 800 px wide; 500 px high plus 350 px per
    server with metrics) and return it.

    :raises InputError: matplotlib is not installed.
    :raises OSError: the file cannot be written (a full disk): nothing is left at ``path``.
    """
    plt = _pyplot()
    loaded = [
        s for s in report.servers if any(lv.server_metrics is not None and lv.server_metrics.samples for lv in s.levels)
    ]
    fig, axes = plt.subplots(
        1 + len(loaded),
        1,
        figsize=(8, 5 + 3.5 * len(loaded)),
        dpi=100,
        squeeze=False,
        gridspec_kw={"height_ratios": [5] + [3.5] * len(loaded)},
    )
    _throughput(axes[0][0], report)
    axes[0][0].set_title(title or f"envforge bench: {report.config.get('model', '')}")
    for ax, server in zip((row[0] for row in axes[1:]), loaded):
        _load(ax, server, plt)
    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format="png", metadata={"Software": None})
    finally:
        plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, image.getvalue())  # a full disk leaves no 0-byte plot (issue 41)
    return path
