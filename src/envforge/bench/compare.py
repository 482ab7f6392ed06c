"""The comparison of two benchmark reports: B / A ratios of median tok/s with their intervals.

Comparing reports is refused unless asked for (``allow_different_env``) when their fingerprints
differ, when a speculative server's drafter differs (:func:`envforge.bench.speculation.drafter_differences`),
when a server's effective variables differ, or when a fingerprint is empty (no envforge
lock: two unknown environments are not "the same"). Ratios are B / A of the median output tok/s;
the ratio interval is the conservative combination of the two 95% intervals
``[B_low / A_high, B_high / A_low]``. A side of one repeat has no interval, so neither has the ratio:
its verdict is "no interval", never a change (issue 42: two one-repeat reports of one server printed
"0.632 [0.632, 0.632] slower"). Repeats inside one run do
not see run-to-run drift (two back-to-back runs of one server on a shared machine gave
"1.18x [1.08, 1.28]"), so a change is called only when the whole interval lies beyond
``1 + min_change`` (or below ``1 / (1 + min_change)``); otherwise the verdict is "no clear change".
Reports of either schema compare (:func:`envforge.bench.report.read_report` reads both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envforge.bench.report import EMPTY_FINGERPRINT, BenchReport
from envforge.bench.result import LevelResult
from envforge.bench.speculation import drafter_differences
from envforge.bench.stats import Summary
from envforge.core.errors import InputError

__all__ = ["DEFAULT_MIN_CHANGE", "Comparison", "ComparisonRow", "compare"]

DEFAULT_MIN_CHANGE = 0.10


def _r(x: float) -> float:
    return round(x, 4)


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """B / A at one server and level (its concurrency and open-loop rate, None: closed loop):
    medians (tok/s), ratio, its interval, and the verdict."""

    server: str
    concurrency: int
    a_tok_s: float
    b_tok_s: float
    ratio: float
    ratio_low: float | None
    ratio_high: float | None
    verdict: str
    request_rate: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "a_tok_s": _r(self.a_tok_s),
            "b_tok_s": _r(self.b_tok_s),
            "ratio": _r(self.ratio),
            "ratio_low": None if self.ratio_low is None else _r(self.ratio_low),
            "ratio_high": None if self.ratio_high is None else _r(self.ratio_high),
            "verdict": self.verdict,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Rows for every (server, level) with figures in both reports, plus what differs between them
    and which levels could not be compared (``not_compared``: ``"<server> @ <level>: <why>"``)."""

    rows: tuple[ComparisonRow, ...]
    env_differences: tuple[str, ...]
    config_differences: tuple[str, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    not_compared: tuple[str, ...] = ()
    min_change: float = DEFAULT_MIN_CHANGE

    def as_dict(self) -> dict[str, Any]:
        return {
            "min_change": self.min_change,
            "rows": [r.as_dict() for r in self.rows],
            "env_differences": list(self.env_differences),
            "config_differences": list(self.config_differences),
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "not_compared": list(self.not_compared),
        }


def _row(server: str, a: Summary, b: Summary, lv: LevelResult, min_change: float) -> ComparisonRow:
    ratio = b.median / a.median if a.median > 0 else float("inf")
    single = [side for side, s in (("A", a), ("B", b)) if s.ci_low is None or s.ci_high is None]
    if single:
        verdict = (
            f"no interval ({' and '.join(single)}: {'1 repeat' if len(single) == 1 else '1 repeat each'}; "
            "run --repeats >= 3)"
        )
        return ComparisonRow(server, lv.concurrency, a.median, b.median, ratio, None, None, verdict, lv.request_rate)
    (alo, ahi), (blo, bhi) = a.bounds(), b.bounds()
    low = blo / ahi if ahi > 0 else float("inf")
    high = bhi / alo if alo > 0 else float("inf")
    verdict = "faster" if low > 1.0 + min_change else "slower" if high < 1.0 / (1.0 + min_change) else "no clear change"
    return ComparisonRow(server, lv.concurrency, a.median, b.median, ratio, low, high, verdict, lv.request_rate)


def _where(server: str, lv: LevelResult) -> str:
    """``baseline @ 4``, or with an open-loop rate ``baseline @ 4 @ 2.5 requests/s``."""
    return f"{server} @ {lv.concurrency}" + ("" if lv.request_rate is None else f" @ {lv.request_rate:g} requests/s")


def _env_differences(a: BenchReport, b: BenchReport) -> list[str]:
    out = [f"report {side}: {EMPTY_FINGERPRINT}" for side, r in (("A", a), ("B", b)) if r.fingerprint.empty]
    out += a.fingerprint.differences(b.fingerprint)
    out += drafter_differences(a.drafters, b.drafters)
    b_by_name = {s.name: s for s in b.servers}
    for sa in a.servers:
        sb = b_by_name.get(sa.name)
        if sb is None:
            continue
        if sa.env is None or sb.env is None:
            side = " and ".join(x for x, s in (("A", sa), ("B", sb)) if s.env is None)
            out.append(f"server '{sa.name}': the variables it ran with are unknown in {side}")
            continue
        for k in sorted(set(sa.env) | set(sb.env)):
            if sa.env.get(k) != sb.env.get(k):
                out.append(f"server '{sa.name}': {k}: {sa.env.get(k, '(unset)')} != {sb.env.get(k, '(unset)')}")
    return out


def _why_no_figure(lv: LevelResult, side: str, report: BenchReport, server: str) -> str | None:
    failed = next((f for f in report.speculation if f.server == server and f.concurrency == lv.concurrency), None)
    if failed is not None:
        return f"the speculation check failed in {side} ({failed.rule})"
    if lv.failed_requests:
        return f"{lv.failed_requests} failed requests in {side}"
    if lv.tok_s is None:
        return f"no tok/s in {side} ({lv.refused or 'refused'})"
    return None


def compare(
    a: BenchReport, b: BenchReport, *, allow_different_env: bool = False, min_change: float = DEFAULT_MIN_CHANGE
) -> Comparison:
    """Compare report ``b`` against ``a`` (ratios B / A); a change is called only beyond ``min_change``.

    :raises InputError: the environments differ or are unknown (fingerprints, a server's effective
        variables, an empty fingerprint) and ``allow_different_env`` is false; the message lists
        every difference.
    """
    env_diff = _env_differences(a, b)
    if env_diff and not allow_different_env:
        raise InputError(
            "the reports come from different or unknown environments; their numbers are not "
            "comparable:\n" + "\n".join(f"  {line}" for line in env_diff),
            hint="compare anyway with --allow-different-env",
        )
    keys = set(a.config) | set(b.config)
    if "source" in keys:  # a vllm bench serve result records only some settings: those are compared
        keys = (set(a.config) & set(b.config)) - {"source"}
    cfg_diff = [
        f"{k}: {a.config.get(k)} != {b.config.get(k)}" for k in sorted(keys) if a.config.get(k) != b.config.get(k)
    ]
    rows, only_a, skipped = [], [], []
    b_by_name = {s.name: s for s in b.servers}
    for sa in a.servers:
        sb = b_by_name.get(sa.name)
        for lv in sa.levels:
            other = sb.level(lv.concurrency, lv.request_rate) if sb else None
            if other is None:
                only_a.append(_where(sa.name, lv))
                continue
            why = _why_no_figure(lv, "A", a, sa.name) or _why_no_figure(other, "B", b, sa.name)
            if why is not None or lv.tok_s is None or other.tok_s is None:
                skipped.append(f"{_where(sa.name, lv)}: {why}")
                continue
            rows.append(_row(sa.name, lv.tok_s, other.tok_s, lv, min_change))
    a_keys = {(s.name, lv.concurrency, lv.request_rate) for s in a.servers for lv in s.levels}
    only_b = [
        _where(s.name, lv)
        for s in b.servers
        for lv in s.levels
        if (s.name, lv.concurrency, lv.request_rate) not in a_keys
    ]
    return Comparison(
        tuple(rows), tuple(env_diff), tuple(cfg_diff), tuple(only_a), tuple(only_b), tuple(skipped), min_change
    )
