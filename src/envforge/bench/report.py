"""Benchmark reports: per-level results with their spread, break-even, the environment fingerprint,
and the comparison of two reports.

A report is JSON (``envforge.bench/1``) so two runs can be compared later. Comparing reports made
in different environment states is refused unless asked for (``allow_different_env``): the field
baseline drifted 82 -> 89 -> 92.6 tok/s because nobody recorded the state.

Ratios are B / A of the median output tok/s. The ratio interval is the conservative combination of
the two 95% intervals ``[B_low / A_high, B_high / A_low]`` (min/max when a side has one repeat); a
change is called only when that interval excludes 1.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.bench.client import LevelRun
from envforge.bench.metrics import SpecDecodeStats, sum_stats
from envforge.bench.stats import Summary, break_even_accept_length, summarize
from envforge.errors import InputError
from envforge.fingerprint import Fingerprint

__all__ = [
    "SCHEMA",
    "BenchReport",
    "BreakEven",
    "Comparison",
    "ComparisonRow",
    "LevelResult",
    "RepeatResult",
    "ServerResult",
    "break_even_rows",
    "compare",
    "level_result",
    "read_report",
    "repeat_result",
]

SCHEMA = "envforge.bench/1"


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _median_ms(values: Sequence[float | None]) -> float | None:
    vs = [v * 1000.0 for v in values if v is not None]
    return statistics.median(vs) if vs else None


@dataclass(frozen=True, slots=True)
class RepeatResult:
    """One measured repeat at one level: output tok/s over the wall time; latencies are medians (ms)."""

    tok_s: float
    wall_s: float
    requests: int
    output_tokens: int
    ttft_ms: float | None
    itl_ms: float | None
    e2e_ms: float
    verify_steps: int | None
    decode_s: float
    spec_decode: SpecDecodeStats | None = None  # vLLM: counter deltas of GET /metrics around the repeat

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tok_s": _r(self.tok_s), "wall_s": _r(self.wall_s), "requests": self.requests,
                             "output_tokens": self.output_tokens, "ttft_ms": _r(self.ttft_ms),
                             "itl_ms": _r(self.itl_ms), "e2e_ms": _r(self.e2e_ms),
                             "verify_steps": self.verify_steps, "decode_s": _r(self.decode_s)}
        if self.spec_decode is not None:
            d["spec_decode"] = self.spec_decode.as_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RepeatResult:
        def opt(key: str) -> float | None:
            return None if d.get(key) is None else float(d[key])
        steps = d.get("verify_steps")
        return cls(tok_s=float(d["tok_s"]), wall_s=float(d["wall_s"]), requests=int(d["requests"]),
                   output_tokens=int(d["output_tokens"]), ttft_ms=opt("ttft_ms"), itl_ms=opt("itl_ms"),
                   e2e_ms=float(d["e2e_ms"]), verify_steps=None if steps is None else int(steps),
                   decode_s=float(d.get("decode_s") or 0.0),
                   spec_decode=SpecDecodeStats.from_dict(d["spec_decode"]) if d.get("spec_decode") else None)


def repeat_result(run: LevelRun, spec: SpecDecodeStats | None = None) -> RepeatResult:
    """Aggregate one :class:`LevelRun` (all requests must have succeeded).

    ``spec``: vLLM's speculative-decoding counter deltas over the repeat (:mod:`envforge.bench.metrics`);
    its drafts are the repeat's verify steps (steps with a proposed draft) and the decode time is
    every request's.
    """
    rs = run.results
    tokens = sum(r.output_tokens for r in rs)
    if spec is not None:
        return RepeatResult(
            tok_s=tokens / run.wall_s if run.wall_s > 0 else 0.0, wall_s=run.wall_s, requests=len(rs),
            output_tokens=tokens, ttft_ms=_median_ms([r.ttft_s for r in rs]),
            itl_ms=_median_ms([r.itl_s for r in rs]), e2e_ms=_median_ms([r.e2e_s for r in rs]) or 0.0,
            verify_steps=spec.drafts, decode_s=sum(r.decode_s or 0.0 for r in rs), spec_decode=spec)
    steps = [r.verify_steps for r in rs if r.verify_steps is not None]
    return RepeatResult(
        tok_s=tokens / run.wall_s if run.wall_s > 0 else 0.0, wall_s=run.wall_s, requests=len(rs),
        output_tokens=tokens, ttft_ms=_median_ms([r.ttft_s for r in rs]),
        itl_ms=_median_ms([r.itl_s for r in rs]), e2e_ms=_median_ms([r.e2e_s for r in rs]) or 0.0,
        verify_steps=sum(steps) if steps else None,
        decode_s=sum(r.decode_s or 0.0 for r in rs if r.verify_steps is not None))


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One concurrency level over its repeats. ``accept_length`` = tokens / verify steps (speculative
    servers that report verify steps), or for vLLM 1 + accepted / drafts of ``spec_decode`` (the
    repeats' counter deltas summed); ``verify_cycle_ms`` = decode time / verify steps."""

    concurrency: int
    repeats: tuple[RepeatResult, ...]
    tok_s: Summary
    ttft_ms: Summary | None
    itl_ms: Summary | None
    e2e_ms: Summary | None
    accept_length: float | None
    verify_cycle_ms: float | None
    spec_decode: SpecDecodeStats | None = None

    def as_dict(self) -> dict[str, Any]:
        def s(x: Summary | None) -> dict[str, Any] | None:
            return None if x is None else x.as_dict()
        d: dict[str, Any] = {"concurrency": self.concurrency, "tok_s": s(self.tok_s), "ttft_ms": s(self.ttft_ms),
                             "itl_ms": s(self.itl_ms), "e2e_ms": s(self.e2e_ms),
                             "accept_length": _r(self.accept_length), "verify_cycle_ms": _r(self.verify_cycle_ms)}
        if self.spec_decode is not None:
            d["spec_decode"] = self.spec_decode.as_dict()
        d["repeats"] = [r.as_dict() for r in self.repeats]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelResult:
        def s(x: Any) -> Summary | None:
            return None if x is None else Summary.from_dict(x)
        tok = s(d["tok_s"])
        assert tok is not None
        return cls(int(d["concurrency"]), tuple(RepeatResult.from_dict(r) for r in d.get("repeats", ())), tok,
                   s(d.get("ttft_ms")), s(d.get("itl_ms")), s(d.get("e2e_ms")), d.get("accept_length"),
                   d.get("verify_cycle_ms"),
                   SpecDecodeStats.from_dict(d["spec_decode"]) if d.get("spec_decode") else None)


def level_result(concurrency: int, runs: Sequence[LevelRun],
                 specs: Sequence[SpecDecodeStats] | None = None) -> LevelResult:
    """Summaries over the repeats ``runs`` of one level (at least one); ``specs``: vLLM's counter
    deltas, one per repeat (then the accept length is vLLM's 1 + accepted / drafts over the level,
    None when no draft was proposed)."""
    if specs is not None:
        assert len(specs) == len(runs), "one counter window per repeat"
        reps = tuple(repeat_result(r, s) for r, s in zip(runs, specs))
    else:
        reps = tuple(repeat_result(r) for r in runs)
    tok = summarize([r.tok_s for r in reps])
    assert tok is not None, "a level needs at least one repeat"
    tokens = sum(r.output_tokens for r in reps if r.verify_steps)
    steps = sum(r.verify_steps or 0 for r in reps)
    decode = sum(r.decode_s for r in reps if r.verify_steps)
    spec = sum_stats(specs) if specs else None
    if spec is not None:
        return LevelResult(
            concurrency=concurrency, repeats=reps, tok_s=tok,
            ttft_ms=summarize([r.ttft_ms for r in reps if r.ttft_ms is not None]),
            itl_ms=summarize([r.itl_ms for r in reps if r.itl_ms is not None]),
            e2e_ms=summarize([r.e2e_ms for r in reps]), accept_length=spec.mean_acceptance_length,
            verify_cycle_ms=decode * 1000.0 / spec.drafts if spec.drafts else None, spec_decode=spec)
    return LevelResult(
        concurrency=concurrency, repeats=reps, tok_s=tok,
        ttft_ms=summarize([r.ttft_ms for r in reps if r.ttft_ms is not None]),
        itl_ms=summarize([r.itl_ms for r in reps if r.itl_ms is not None]),
        e2e_ms=summarize([r.e2e_ms for r in reps]),
        accept_length=tokens / steps if steps else None,
        verify_cycle_ms=decode * 1000.0 / steps if steps else None)


@dataclass(frozen=True, slots=True)
class ServerResult:
    """All levels of one server configuration; ``argv`` when envforge started it, ``url`` always."""

    name: str
    speculative: bool
    url: str
    argv: tuple[str, ...] | None
    load_s: float | None
    levels: tuple[LevelResult, ...]

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "speculative": self.speculative, "url": self.url,
                "argv": list(self.argv) if self.argv is not None else None, "load_s": _r(self.load_s, 2),
                "levels": [lv.as_dict() for lv in self.levels]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServerResult:
        return cls(d["name"], bool(d.get("speculative")), d.get("url", ""),
                   tuple(d["argv"]) if d.get("argv") is not None else None, d.get("load_s"),
                   tuple(LevelResult.from_dict(x) for x in d.get("levels", ())))


@dataclass(frozen=True, slots=True)
class BreakEven:
    """At one level: the baseline decode step (ms), the speculative verify cycle (ms), the accept
    length at which speculation pays (cycle / step), the measured accept length, and the verdict."""

    baseline: str
    speculative: str
    concurrency: int
    decode_step_ms: float
    verify_cycle_ms: float
    break_even: float
    accept_length: float
    pays: bool

    def as_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "speculative": self.speculative, "concurrency": self.concurrency,
                "decode_step_ms": _r(self.decode_step_ms), "verify_cycle_ms": _r(self.verify_cycle_ms),
                "break_even_accept_length": _r(self.break_even, 3), "accept_length": _r(self.accept_length, 3),
                "pays": self.pays}


def break_even_rows(servers: Sequence[ServerResult]) -> tuple[BreakEven, ...]:
    """Break-even rows: the first non-speculative server against each speculative one that reports
    verify steps, at every concurrency level both measured."""
    base = next((s for s in servers if not s.speculative), None)
    if base is None:
        return ()
    rows = []
    for spec in (s for s in servers if s.speculative):
        for lv in spec.levels:
            b = base.level(lv.concurrency)
            if b is None or b.itl_ms is None or lv.verify_cycle_ms is None or lv.accept_length is None:
                continue
            be = break_even_accept_length(lv.verify_cycle_ms, b.itl_ms.median)
            rows.append(BreakEven(base.name, spec.name, lv.concurrency, b.itl_ms.median, lv.verify_cycle_ms,
                                  be, lv.accept_length, lv.accept_length > be))
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole run: fingerprint, settings, per-server results, break-even rows, warnings."""

    fingerprint: Fingerprint
    config: Mapping[str, Any]
    servers: tuple[ServerResult, ...]
    break_even: tuple[BreakEven, ...]
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order (the ``data`` of an ``envforge.bench/1`` envelope)."""
        return {"fingerprint": self.fingerprint.as_dict(), "config": dict(self.config),
                "servers": [s.as_dict() for s in self.servers],
                "break_even": [b.as_dict() for b in self.break_even], "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchReport:
        servers = tuple(ServerResult.from_dict(s) for s in d.get("servers", ()))
        return cls(Fingerprint.from_dict(d.get("fingerprint") or {}), d.get("config") or {}, servers,
                   break_even_rows(servers), tuple(d.get("warnings", ())))


def read_report(path: Path) -> BenchReport:
    """Read a report written by ``envforge bench`` (the ``envforge.bench/1`` JSON envelope).

    :raises InputError: unreadable, not JSON, or not a bench report (the message names the file).
    """
    from envforge.textfile import decode_utf8, read_bytes

    text = decode_utf8(read_bytes(path, what="bench report"), label=str(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: not a bench report: arrays or objects nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("data"), dict):
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{path} is not an envforge bench report (schema {found!r}, expected {SCHEMA!r})",
                         hint="write one with `envforge bench --output FILE`")
    try:
        return BenchReport.from_dict(doc["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}: malformed bench report: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """B / A at one server and level: medians (tok/s), ratio, its interval, and the verdict."""

    server: str
    concurrency: int
    a_tok_s: float
    b_tok_s: float
    ratio: float
    ratio_low: float
    ratio_high: float
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "concurrency": self.concurrency, "a_tok_s": _r(self.a_tok_s),
                "b_tok_s": _r(self.b_tok_s), "ratio": _r(self.ratio), "ratio_low": _r(self.ratio_low),
                "ratio_high": _r(self.ratio_high), "verdict": self.verdict}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Rows for every (server, level) in both reports, plus what differs between them."""

    rows: tuple[ComparisonRow, ...]
    env_differences: tuple[str, ...]
    config_differences: tuple[str, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"rows": [r.as_dict() for r in self.rows], "env_differences": list(self.env_differences),
                "config_differences": list(self.config_differences), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b)}


def _row(server: str, a: LevelResult, b: LevelResult) -> ComparisonRow:
    (alo, ahi), (blo, bhi) = a.tok_s.bounds(), b.tok_s.bounds()
    ratio = b.tok_s.median / a.tok_s.median if a.tok_s.median > 0 else float("inf")
    low = blo / ahi if ahi > 0 else float("inf")
    high = bhi / alo if alo > 0 else float("inf")
    verdict = "faster" if low > 1.0 else "slower" if high < 1.0 else "no clear change"
    return ComparisonRow(server, a.concurrency, a.tok_s.median, b.tok_s.median, ratio, low, high, verdict)


def compare(a: BenchReport, b: BenchReport, *, allow_different_env: bool = False) -> Comparison:
    """Compare report ``b`` against ``a`` (ratios B / A).

    :raises InputError: the fingerprints differ and ``allow_different_env`` is false; the message
        lists every differing field.
    """
    env_diff = a.fingerprint.differences(b.fingerprint)
    if env_diff and not allow_different_env:
        raise InputError("the reports come from different environments; their numbers are not comparable:\n"
                         + "\n".join(f"  {line}" for line in env_diff),
                         hint="compare anyway with --allow-different-env")
    cfg_diff = [f"{k}: {a.config.get(k)} != {b.config.get(k)}"
                for k in sorted(set(a.config) | set(b.config)) if a.config.get(k) != b.config.get(k)]
    rows, only_a, only_b = [], [], []
    b_by_name = {s.name: s for s in b.servers}
    for sa in a.servers:
        sb = b_by_name.get(sa.name)
        for lv in sa.levels:
            other = sb.level(lv.concurrency) if sb else None
            if other is None:
                only_a.append(f"{sa.name} @ {lv.concurrency}")
            else:
                rows.append(_row(sa.name, lv, other))
    a_keys = {(r.server, r.concurrency) for r in rows}
    only_b = [f"{s.name} @ {lv.concurrency}" for s in b.servers for lv in s.levels
              if (s.name, lv.concurrency) not in a_keys]
    return Comparison(tuple(rows), tuple(env_diff), tuple(cfg_diff), tuple(only_a), tuple(only_b))
