"""Break-even rows of a report: at each level, the accept length at which speculative decoding pays.

The baseline's decode step against the speculative server's verify cycle
(:func:`envforge.bench.stats.break_even_accept_length`), from the engine's own counters where both
servers report them (vLLM's ``/metrics``), from the client's TPOT and verify cycle otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envforge.bench.result import ServerResult
from envforge.bench.stats import break_even_accept_length

__all__ = ["BreakEven", "break_even_rows"]


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


@dataclass(frozen=True, slots=True)
class BreakEven:
    """At one level: the baseline decode step (ms), the speculative verify cycle (ms), the accept
    length at which speculation pays (cycle / step), the measured accept length, and the verdict.

    With engine counters on both servers (vLLM) the step and cycle are the engine's mean decode-step
    times and the verdict compares ``tokens_per_cycle`` (output tokens per decode step, steps without
    a draft included) with the break-even, not the acceptance length, which counts drafted steps only.
    """

    baseline: str
    speculative: str
    concurrency: int
    decode_step_ms: float
    verify_cycle_ms: float
    break_even: float
    accept_length: float
    pays: bool
    tokens_per_cycle: float | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {
            "baseline": self.baseline,
            "speculative": self.speculative,
            "concurrency": self.concurrency,
            "decode_step_ms": _r(self.decode_step_ms),
            "verify_cycle_ms": _r(self.verify_cycle_ms),
            "break_even_accept_length": _r(self.break_even, 3),
            "accept_length": _r(self.accept_length, 3),
            "pays": self.pays,
        }
        if self.tokens_per_cycle is not None:
            d["tokens_per_cycle"] = _r(self.tokens_per_cycle, 3)
        return d


def break_even_rows(servers: Sequence[ServerResult]) -> tuple[BreakEven, ...]:
    """Break-even rows: the first non-speculative server against each speculative one that reports
    verify steps, at every concurrency level both measured without failures."""
    base = next((s for s in servers if not s.speculative), None)
    if base is None:
        return ()
    rows = []
    for spec in (s for s in servers if s.speculative):
        for lv in spec.levels:
            b = base.level(lv.concurrency, lv.request_rate)
            if (
                b is not None
                and lv.accept_length is not None
                and lv.counters is not None
                and b.counters is not None
                and not b.failed_requests
                and not lv.failed_requests
            ):
                step, cycle, per = b.counters.decode_step_ms, lv.counters.decode_step_ms, lv.counters.tokens_per_step
                if step is not None and cycle is not None and per is not None:  # both from the engine
                    be = break_even_accept_length(cycle, step)
                    rows.append(
                        BreakEven(
                            base.name, spec.name, lv.concurrency, step, cycle, be, lv.accept_length, per > be, per
                        )
                    )
                    continue
            if b is None or b.tpot_ms is None or lv.verify_cycle_ms is None or lv.accept_length is None:
                continue
            be = break_even_accept_length(lv.verify_cycle_ms, b.tpot_ms.median)
            rows.append(
                BreakEven(
                    base.name,
                    spec.name,
                    lv.concurrency,
                    b.tpot_ms.median,
                    lv.verify_cycle_ms,
                    be,
                    lv.accept_length,
                    lv.accept_length > be,
                )
            )
    return tuple(rows)
