"""Benchmark reports: per-level results with their spread, failures, break-even, the environment
fingerprint, and the comparison of two reports.

A report is JSON (``envforge.bench/1``) so two runs can be compared later. Every request is
accounted for: a level with a failed request gets no figures (its ``tok_s`` and latencies are
``null`` and ``failed_requests`` says how many), and the report lists each failure. A speculative
server whose token counts are chunk counts gets no tok/s and no ITL (``refused`` says why): one
chunk carries a whole verify step (field case B23).

Comparing reports is refused unless asked for (``allow_different_env``) when their fingerprints
differ, when a server's effective variables differ, or when a fingerprint is empty (no envforge
lock: two unknown environments are not "the same"). Ratios are B / A of the median output tok/s;
the ratio interval is the conservative combination of the two 95% intervals
``[B_low / A_high, B_high / A_low]`` (min/max when a side has one repeat). Repeats inside one run do
not see run-to-run drift (two back-to-back runs of one server on a shared machine gave
"1.18x [1.08, 1.28]"), so a change is called only when the whole interval lies beyond
``1 + min_change`` (or below ``1 / (1 + min_change)``); otherwise the verdict is "no clear change".
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.bench.client import LevelRun
from envforge.bench.metrics import EngineWindow, sum_windows
from envforge.bench.stats import Summary, break_even_accept_length, summarize
from envforge.core.errors import InputError
from envforge.env.fingerprint import Fingerprint

__all__ = [
    "DEFAULT_MIN_CHANGE",
    "SCHEMA",
    "BenchReport",
    "BreakEven",
    "Comparison",
    "ComparisonRow",
    "Failure",
    "LevelResult",
    "RepeatResult",
    "ServerResult",
    "break_even_rows",
    "compare",
    "failures_of",
    "level_result",
    "read_report",
    "repeat_result",
    "report_warnings",
]

SCHEMA = "envforge.bench/1"
DEFAULT_MIN_CHANGE = 0.10


def _text(d: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """``d[key]`` when it is a string (``default`` when absent and given); else ``TypeError``
    naming the key, which :func:`read_report` turns into an input error naming the file."""
    if key not in d and default is None:
        raise KeyError(key)
    value = d.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"'{key}' must be a string, got {type(value).__name__}")
    return value


def _number(d: Mapping[str, Any], key: str) -> float | None:
    """``d[key]`` when it is a finite number or absent/null (``None``); else ``TypeError``/``ValueError``."""
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"'{key}' must be a number or null, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"'{key}' must be finite, got {value}")
    return float(value)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _median_ms(values: Sequence[float | None]) -> float | None:
    vs = [v * 1000.0 for v in values if v is not None]
    return statistics.median(vs) if vs else None


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed request: server, concurrency level, repeat (1-based; 0 = warm-up), the message and
    the status (HTTP status, or the ``status_code`` of a server abort; None for a connection error)."""

    server: str
    concurrency: int
    repeat: int
    message: str
    status: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "concurrency": self.concurrency, "repeat": self.repeat,
                "status": self.status, "message": self.message}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Failure:
        return cls(str(d["server"]), int(d["concurrency"]), int(d["repeat"]), str(d["message"]), d.get("status"))

    def line(self) -> str:
        """``server 'x', concurrency 4, repeat 2: <message> (status 503)``."""
        where = "warm-up" if self.repeat == 0 else f"concurrency {self.concurrency}, repeat {self.repeat}"
        status = f" (status {self.status})" if self.status is not None else ""
        return f"server '{self.server}', {where}: {self.message}{status}"


def failures_of(server: str, run: LevelRun, repeat: int) -> tuple[Failure, ...]:
    """The failed requests of one repeat (``repeat`` 0 for the warm-up) as :class:`Failure` rows."""
    return tuple(Failure(server, run.concurrency, repeat, r.error or "failed", r.status)
                 for r in run.results if not r.ok)


@dataclass(frozen=True, slots=True)
class RepeatResult:
    """One measured repeat at one level: output tok/s over the wall time; latencies are medians (ms).
    ``failed``: failed requests (their figures are left out of the level); ``token_count``:
    ``"server"``, ``"chunks"`` or ``"mixed"`` (how its output tokens were counted)."""

    tok_s: float
    wall_s: float
    requests: int
    output_tokens: int
    ttft_ms: float | None
    itl_ms: float | None
    e2e_ms: float
    verify_steps: int | None
    decode_s: float
    failed: int = 0
    token_count: str = "server"
    vllm: EngineWindow | None = None  # vLLM: counter deltas of GET /metrics around the repeat

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "tok_s": _r(self.tok_s), "wall_s": _r(self.wall_s), "requests": self.requests, "failed": self.failed,
            "output_tokens": self.output_tokens, "token_count": self.token_count, "ttft_ms": _r(self.ttft_ms),
            "itl_ms": _r(self.itl_ms), "e2e_ms": _r(self.e2e_ms), "verify_steps": self.verify_steps,
            "decode_s": _r(self.decode_s)}
        if self.vllm is not None:
            d["vllm"] = self.vllm.as_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RepeatResult:
        def opt(key: str) -> float | None:
            return _number(d, key)
        steps = d.get("verify_steps")
        def req(key: str) -> float:
            value = _number(d, key)
            if value is None:
                raise TypeError(f"'{key}' must be a number, got null")
            return value
        return cls(tok_s=req("tok_s"), wall_s=req("wall_s"), requests=int(d["requests"]),
                   output_tokens=int(d["output_tokens"]), ttft_ms=opt("ttft_ms"), itl_ms=opt("itl_ms"),
                   e2e_ms=req("e2e_ms"), verify_steps=None if steps is None else int(steps),
                   decode_s=float(d.get("decode_s") or 0.0), failed=int(d.get("failed") or 0),
                   token_count=str(d.get("token_count") or "server"),
                   vllm=EngineWindow.from_dict(d["vllm"]) if d.get("vllm") else None)


def _token_count(kinds: set[str]) -> str:
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "server"


def repeat_result(run: LevelRun, vllm: EngineWindow | None = None) -> RepeatResult:
    """Aggregate one :class:`LevelRun` over its successful requests; ``failed`` counts the others.

    ``vllm``: vLLM's engine counter deltas over the repeat (:mod:`envforge.bench.metrics`); with
    speculation its drafts are the repeat's verify steps (steps with a proposed draft) and the decode
    time is every request's.
    """
    spec = vllm.spec if vllm is not None else None
    rs = [r for r in run.results if r.ok]
    tokens = sum(r.output_tokens for r in rs)
    steps = [r.verify_steps for r in rs if r.verify_steps is not None]
    verify = spec.drafts if spec is not None else sum(steps) if steps else None
    decode = sum(r.decode_s or 0.0 for r in rs if spec is not None or r.verify_steps is not None)
    return RepeatResult(
        tok_s=tokens / run.wall_s if run.wall_s > 0 else 0.0, wall_s=run.wall_s, requests=len(run.results),
        output_tokens=tokens, ttft_ms=_median_ms([r.ttft_s for r in rs]),
        itl_ms=_median_ms([r.itl_s for r in rs]), e2e_ms=_median_ms([r.e2e_s for r in rs]) or 0.0,
        verify_steps=verify, decode_s=decode, failed=len(run.results) - len(rs),
        token_count=_token_count({r.token_count for r in rs}), vllm=vllm)


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One concurrency level over its repeats. ``accept_length`` = tokens / verify steps (speculative
    servers that report verify steps), or for vLLM 1 + accepted / drafts of ``vllm.spec`` (the
    repeats' counter deltas summed); ``verify_cycle_ms`` = decode time / verify steps, for vLLM the
    engine's mean decode-step time (``vllm.decode_step_ms``, :mod:`envforge.bench.metrics`).

    ``failed_requests`` > 0: no figure (``tok_s`` and every summary None). ``refused``: why tok/s
    and ITL are None although every request succeeded (chunk-counted tokens on a speculative server).
    """

    concurrency: int
    repeats: tuple[RepeatResult, ...]
    tok_s: Summary | None
    ttft_ms: Summary | None
    itl_ms: Summary | None
    e2e_ms: Summary | None
    accept_length: float | None
    verify_cycle_ms: float | None
    failed_requests: int = 0
    token_count: str = "server"
    refused: str | None = None
    vllm: EngineWindow | None = None

    def as_dict(self) -> dict[str, Any]:
        def s(x: Summary | None) -> dict[str, Any] | None:
            return None if x is None else x.as_dict()
        d: dict[str, Any] = {
            "concurrency": self.concurrency, "failed_requests": self.failed_requests,
            "token_count": self.token_count, "refused": self.refused, "tok_s": s(self.tok_s),
            "ttft_ms": s(self.ttft_ms), "itl_ms": s(self.itl_ms), "e2e_ms": s(self.e2e_ms),
            "accept_length": _r(self.accept_length), "verify_cycle_ms": _r(self.verify_cycle_ms)}
        if self.vllm is not None:
            d["vllm"] = self.vllm.as_dict()
        d["repeats"] = [r.as_dict() for r in self.repeats]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelResult:
        def s(x: Any) -> Summary | None:
            return None if x is None else Summary.from_dict(x)
        return cls(int(d["concurrency"]), tuple(RepeatResult.from_dict(r) for r in d.get("repeats", ())),
                   s(d.get("tok_s")), s(d.get("ttft_ms")), s(d.get("itl_ms")), s(d.get("e2e_ms")),
                   _number(d, "accept_length"), _number(d, "verify_cycle_ms"), int(d.get("failed_requests") or 0),
                   str(d.get("token_count") or "server"), None if d.get("refused") is None else _text(d, "refused"),
                   EngineWindow.from_dict(d["vllm"]) if d.get("vllm") else None)


REFUSED_CHUNKS = ("tokens were counted as chunks (the server sent no usage) and one chunk of a speculative "
                  "server carries a whole verify step: no tok/s or ITL")


def level_result(concurrency: int, runs: Sequence[LevelRun], vllm: Sequence[EngineWindow] | None = None, *,
                 speculative: bool = False) -> LevelResult:
    """Summaries over the repeats ``runs`` of one level (at least one); none when a request failed.

    ``vllm``: vLLM's engine counter deltas, one per repeat (then the accept length is vLLM's
    1 + accepted / drafts over the level, None when no draft was proposed, and the verify cycle is
    the engine's mean decode-step time).
    """
    if vllm:
        assert len(vllm) == len(runs), "one counter window per repeat"
        reps = tuple(repeat_result(r, w) for r, w in zip(runs, vllm))
    else:
        reps = tuple(repeat_result(r) for r in runs)
    failed = sum(r.failed for r in reps)
    count = _token_count({r.token_count for r in reps})
    if failed:
        return LevelResult(concurrency, reps, None, None, None, None, None, None, failed, count)
    refused = REFUSED_CHUNKS if speculative and count != "server" else None
    tokens = sum(r.output_tokens for r in reps if r.verify_steps)
    steps = sum(r.verify_steps or 0 for r in reps)
    decode = sum(r.decode_s for r in reps if r.verify_steps)
    engine = sum_windows(vllm) if vllm else None
    if engine is not None:
        spec = engine.spec
        cycle = engine.decode_step_ms if engine.decode_step_ms is not None else (
            decode * 1000.0 / steps if steps else None)
        return LevelResult(
            concurrency=concurrency, repeats=reps, tok_s=None if refused else summarize([r.tok_s for r in reps]),
            ttft_ms=summarize([r.ttft_ms for r in reps if r.ttft_ms is not None]),
            itl_ms=None if refused else summarize([r.itl_ms for r in reps if r.itl_ms is not None]),
            e2e_ms=summarize([r.e2e_ms for r in reps]),
            accept_length=spec.mean_acceptance_length if spec else None,
            verify_cycle_ms=cycle if spec and spec.drafts else None, token_count=count, refused=refused,
            vllm=engine)
    return LevelResult(
        concurrency=concurrency, repeats=reps, tok_s=None if refused else summarize([r.tok_s for r in reps]),
        ttft_ms=summarize([r.ttft_ms for r in reps if r.ttft_ms is not None]),
        itl_ms=None if refused else summarize([r.itl_ms for r in reps if r.itl_ms is not None]),
        e2e_ms=summarize([r.e2e_ms for r in reps]),
        accept_length=tokens / steps if steps else None,
        verify_cycle_ms=decode * 1000.0 / steps if steps else None, token_count=count, refused=refused)


@dataclass(frozen=True, slots=True)
class ServerResult:
    """All levels of one server configuration; ``argv`` when envforge started it, ``url`` always.

    ``env``: the tracked variables it started with (None when envforge did not start it);
    ``ignore_eos``: whether requests asked for a fixed length (False: the server rejected the field);
    ``cache``: ``"flushed before each repeat"``, or why not.
    """

    name: str
    speculative: bool
    url: str
    argv: tuple[str, ...] | None
    load_s: float | None
    levels: tuple[LevelResult, ...]
    env: Mapping[str, str] | None = None
    ignore_eos: bool = True
    cache: str = "not flushed"

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "speculative": self.speculative, "url": self.url,
                "argv": list(self.argv) if self.argv is not None else None, "load_s": _r(self.load_s, 2),
                "env": dict(self.env) if self.env is not None else None, "ignore_eos": self.ignore_eos,
                "cache": self.cache, "levels": [lv.as_dict() for lv in self.levels]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServerResult:
        env = d.get("env")
        argv = d.get("argv")
        if argv is not None and (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)):
            raise TypeError("'argv' must be a list of strings or null")
        return cls(_text(d, "name"), bool(d.get("speculative")), _text(d, "url", ""),
                   tuple(argv) if argv is not None else None, _number(d, "load_s"),
                   tuple(LevelResult.from_dict(x) for x in d.get("levels", ())),
                   {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else None,
                   bool(d.get("ignore_eos", True)), str(d.get("cache") or "not flushed"))


@dataclass(frozen=True, slots=True)
class BreakEven:
    """At one level: the baseline decode step (ms), the speculative verify cycle (ms), the accept
    length at which speculation pays (cycle / step), the measured accept length, and the verdict.

    For vLLM (both servers with engine counters) the step and cycle are the engine's mean decode-step
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
        d = {"baseline": self.baseline, "speculative": self.speculative, "concurrency": self.concurrency,
             "decode_step_ms": _r(self.decode_step_ms), "verify_cycle_ms": _r(self.verify_cycle_ms),
             "break_even_accept_length": _r(self.break_even, 3), "accept_length": _r(self.accept_length, 3),
             "pays": self.pays}
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
            b = base.level(lv.concurrency)
            if (b is not None and lv.accept_length is not None and lv.vllm is not None and b.vllm is not None
                    and not b.failed_requests and not lv.failed_requests):
                step, cycle, per = b.vllm.decode_step_ms, lv.vllm.decode_step_ms, lv.vllm.tokens_per_step
                if step is not None and cycle is not None and per is not None:  # both from the engine
                    be = break_even_accept_length(cycle, step)
                    rows.append(BreakEven(base.name, spec.name, lv.concurrency, step, cycle, be, lv.accept_length,
                                          per > be, per))
                    continue
            if b is None or b.itl_ms is None or lv.verify_cycle_ms is None or lv.accept_length is None:
                continue
            be = break_even_accept_length(lv.verify_cycle_ms, b.itl_ms.median)
            rows.append(BreakEven(base.name, spec.name, lv.concurrency, b.itl_ms.median, lv.verify_cycle_ms,
                                  be, lv.accept_length, lv.accept_length > be))
    return tuple(rows)


EMPTY_FINGERPRINT = ("the environment fingerprint is empty (no envforge lock: a plain virtual environment, or "
                     "--url without ENV): these numbers are tied to no environment state, and `bench compare` "
                     "never calls two such reports the same environment")


def report_warnings(fingerprint: Fingerprint, servers: Sequence[ServerResult]) -> list[str]:
    """The warnings every report carries about its own trustworthiness, in a fixed order: an empty
    fingerprint, unknown server variables, chunk-counted tokens, refused figures, unforced lengths."""
    out = [EMPTY_FINGERPRINT] if fingerprint.empty else []
    for s in servers:
        if s.env is None:
            out.append(f"server '{s.name}': not started by envforge; the variables it runs with are unknown")
        counts = {lv.token_count for lv in s.levels}
        if counts - {"server"}:
            out.append(f"server '{s.name}': output tokens counted as chunks (the server sent no usage); exact "
                       "only when every chunk holds one token")
        for lv in s.levels:
            if lv.refused:
                out.append(f"server '{s.name}', concurrency {lv.concurrency}: {lv.refused}")
        if not s.ignore_eos:
            out.append(f"server '{s.name}': the server rejected ignore_eos; output lengths are not forced, and a "
                       "request that stops early fails")
    return out


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole run: fingerprint, settings, method, per-server results, break-even rows, failures,
    warnings. ``method``: how prompts were drawn, the cache handled and configurations ordered."""

    fingerprint: Fingerprint
    config: Mapping[str, Any]
    servers: tuple[ServerResult, ...]
    break_even: tuple[BreakEven, ...]
    warnings: tuple[str, ...] = ()
    failures: tuple[Failure, ...] = ()
    method: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order (the ``data`` of an ``envforge.bench/1`` envelope)."""
        return {"fingerprint": self.fingerprint.as_dict(), "config": dict(self.config),
                "method": dict(self.method or {}), "servers": [s.as_dict() for s in self.servers],
                "break_even": [b.as_dict() for b in self.break_even],
                "failures": [f.as_dict() for f in self.failures], "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchReport:
        for key, kind in (("servers", list), ("failures", list), ("warnings", list), ("config", dict),
                          ("method", dict), ("fingerprint", dict)):
            if d.get(key) is not None and not isinstance(d[key], kind):
                raise TypeError(f"'{key}' must be a{'n array' if kind is list else 'n object'}")
        if not all(isinstance(w, str) for w in d.get("warnings") or ()):
            raise TypeError("'warnings' must be an array of strings")
        servers = tuple(ServerResult.from_dict(s) for s in d.get("servers") or ())
        return cls(Fingerprint.from_dict(d.get("fingerprint") or {}), d.get("config") or {}, servers,
                   break_even_rows(servers), tuple(d.get("warnings") or ()),
                   tuple(Failure.from_dict(f) for f in d.get("failures") or ()), d.get("method") or {})


def read_report(path: Path) -> BenchReport:
    """Read a report written by ``envforge bench`` (the ``envforge.bench/1`` JSON envelope).

    :raises InputError: unreadable, not JSON, or not a bench report (the message names the file).
    """
    from envforge.core.textfile import decode_utf8, read_bytes

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
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
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
        return {"min_change": self.min_change, "rows": [r.as_dict() for r in self.rows],
                "env_differences": list(self.env_differences),
                "config_differences": list(self.config_differences), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b), "not_compared": list(self.not_compared)}


def _row(server: str, a: Summary, b: Summary, concurrency: int, min_change: float) -> ComparisonRow:
    (alo, ahi), (blo, bhi) = a.bounds(), b.bounds()
    ratio = b.median / a.median if a.median > 0 else float("inf")
    low = blo / ahi if ahi > 0 else float("inf")
    high = bhi / alo if alo > 0 else float("inf")
    verdict = ("faster" if low > 1.0 + min_change else "slower" if high < 1.0 / (1.0 + min_change)
               else "no clear change")
    return ComparisonRow(server, concurrency, a.median, b.median, ratio, low, high, verdict)


def _env_differences(a: BenchReport, b: BenchReport) -> list[str]:
    out = [f"report {side}: {EMPTY_FINGERPRINT}" for side, r in (("A", a), ("B", b)) if r.fingerprint.empty]
    out += a.fingerprint.differences(b.fingerprint)
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


def _why_no_figure(lv: LevelResult, side: str) -> str | None:
    if lv.failed_requests:
        return f"{lv.failed_requests} failed requests in {side}"
    if lv.tok_s is None:
        return f"no tok/s in {side} ({lv.refused or 'refused'})"
    return None


def compare(a: BenchReport, b: BenchReport, *, allow_different_env: bool = False,
            min_change: float = DEFAULT_MIN_CHANGE) -> Comparison:
    """Compare report ``b`` against ``a`` (ratios B / A); a change is called only beyond ``min_change``.

    :raises InputError: the environments differ or are unknown (fingerprints, a server's effective
        variables, an empty fingerprint) and ``allow_different_env`` is false; the message lists
        every difference.
    """
    env_diff = _env_differences(a, b)
    if env_diff and not allow_different_env:
        raise InputError("the reports come from different or unknown environments; their numbers are not "
                         "comparable:\n" + "\n".join(f"  {line}" for line in env_diff),
                         hint="compare anyway with --allow-different-env")
    cfg_diff = [f"{k}: {a.config.get(k)} != {b.config.get(k)}"
                for k in sorted(set(a.config) | set(b.config)) if a.config.get(k) != b.config.get(k)]
    rows, only_a, skipped = [], [], []
    b_by_name = {s.name: s for s in b.servers}
    for sa in a.servers:
        sb = b_by_name.get(sa.name)
        for lv in sa.levels:
            other = sb.level(lv.concurrency) if sb else None
            if other is None:
                only_a.append(f"{sa.name} @ {lv.concurrency}")
                continue
            why = _why_no_figure(lv, "A") or _why_no_figure(other, "B")
            if why is not None or lv.tok_s is None or other.tok_s is None:
                skipped.append(f"{sa.name} @ {lv.concurrency}: {why}")
                continue
            rows.append(_row(sa.name, lv.tok_s, other.tok_s, lv.concurrency, min_change))
    a_keys = {(s.name, lv.concurrency) for s in a.servers for lv in s.levels}
    only_b = [f"{s.name} @ {lv.concurrency}" for s in b.servers for lv in s.levels
              if (s.name, lv.concurrency) not in a_keys]
    return Comparison(tuple(rows), tuple(env_diff), tuple(cfg_diff), tuple(only_a), tuple(only_b),
                      tuple(skipped), min_change)
