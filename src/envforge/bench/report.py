"""Benchmark reports: the whole run (fingerprint, settings, method, results, break-even, failures,
saturation sweeps, warnings), its trustworthiness warnings, and reading a saved report back.

A report is JSON in the envelope ``{"envforge", "schema": "envforge.bench/4", "data"}`` so two runs
can be compared later (:mod:`envforge.bench.compare`). Schema ``/4`` adds the dataset and the
server's own load: ``config.dataset`` (its name, settings and tokenizer digest; ``{"name": "prompts"}``
for a prompt file) and ``method.dataset`` (what was sent: settings, seed, tokenizer, the length rule
and the lengths drawn), ``config.max-new-tokens`` null when each request asked for its own output
tokens (:mod:`envforge.bench.workload`); to each level its ``request_rate`` (requests/s of an
open-loop level, null for closed loop) and ``server_metrics`` (the server's own gauges over time,
:mod:`envforge.bench.gauges`, null when not scraped), to each server ``server_metrics`` (how they were
read, or why not), and to ``data`` the ``sweep`` results (:mod:`envforge.bench.sweep`, empty without
``--sweep-rate``). Schema ``/3`` uses vLLM's names: each level and repeat has ``tpot_ms`` (what ``/1``
and ``/2`` called ``itl_ms``: decode time per output token after the first), each level ``req_s`` and
the per-request distributions under ``latency``
(``ttft_ms``, ``tpot_ms``, ``itl_ms`` = the gaps between chunks, ``itl_per_token_ms``, ``e2el_ms``).
``/2`` keeps an engine's counters under ``"engine": {"name": "vllm", "counters": {...}}`` in each
level and repeat (:mod:`envforge.bench.result`); ``/1`` had them under ``"vllm": {...}``.
:func:`read_report` reads all four: a ``/1`` report is upgraded to the ``/2`` shape
(:func:`upgrade_v1`), a ``/2`` one to the ``/3`` shape (:func:`upgrade_v2`: ``itl_ms`` read as
``tpot_ms``; no distributions, ``req_s`` or goodput: those were never measured), a ``/3`` one to
the ``/4`` shape (:func:`upgrade_v3`: its prompts were a prompt file; each level's ``request_rate``
is the run's ``config["request-rate"]``; no server metrics, no sweep).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.bench.breakeven import BreakEven, break_even_rows
from envforge.bench.result import Failure, ServerResult
from envforge.bench.speculation import Drafter, SpeculationFailure, check_servers
from envforge.bench.sweep import SweepResult
from envforge.core.errors import InputError
from envforge.core.textfile import decode_utf8, long_number_error, read_bytes
from envforge.env.fingerprint import Fingerprint

__all__ = [
    "EMPTY_FINGERPRINT",
    "SCHEMA",
    "SCHEMA_V1",
    "SCHEMA_V2",
    "SCHEMA_V3",
    "SCHEMA_VERSION",
    "BenchReport",
    "read_report",
    "report_warnings",
    "upgrade_v1",
    "upgrade_v2",
    "upgrade_v3",
]

#: The shape version of ``data`` that ``envforge bench`` writes (the envelope's ``version``).
SCHEMA_VERSION = 4
SCHEMA = f"envforge.bench/{SCHEMA_VERSION}"
SCHEMA_V1 = "envforge.bench/1"
SCHEMA_V2 = "envforge.bench/2"
SCHEMA_V3 = "envforge.bench/3"


EMPTY_FINGERPRINT = (
    "the environment fingerprint is empty (no envforge lock: a plain virtual environment, or "
    "--url without ENV): these numbers are tied to no environment state, and `bench compare` "
    "never calls two such reports the same environment"
)


def report_warnings(fingerprint: Fingerprint, servers: Sequence[ServerResult], *, natural: bool = False) -> list[str]:
    """The warnings every report carries about its own trustworthiness, in a fixed order: an empty
    fingerprint, unknown server variables, chunk-counted tokens, refused figures, unforced lengths
    (not with ``natural`` output lengths, which never force them)."""
    out = [EMPTY_FINGERPRINT] if fingerprint.empty else []
    for s in servers:
        if s.env is None:
            out.append(f"server '{s.name}': not started by envforge; the variables it runs with are unknown")
        counts = {lv.token_count for lv in s.levels}
        if counts - {"server"}:
            out.append(
                f"server '{s.name}': output tokens counted as chunks (the server sent no usage); exact "
                "only when every chunk holds one token"
            )
        for lv in s.levels:
            if lv.refused:
                out.append(f"server '{s.name}', {lv.label}: {lv.refused}")
        if not s.ignore_eos and not natural:
            out.append(
                f"server '{s.name}': the server rejected ignore_eos; output lengths are not forced, and a "
                "request that stops early fails"
            )
    return out


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole run: fingerprint, settings, method, per-server results, break-even rows, failures,
    warnings. ``method``: how prompts were drawn, the cache handled and configurations ordered.
    ``drafters``: speculative server -> the drafter it was started with (None: unknown), saved in
    the fingerprint (None: a report written before drafters were recorded); ``speculation``: the
    levels that failed a speculation check (:mod:`envforge.bench.speculation`); ``sweep``: each
    server's saturation sweep (:mod:`envforge.bench.sweep`; empty without ``--sweep-rate``)."""

    fingerprint: Fingerprint
    config: Mapping[str, Any]
    servers: tuple[ServerResult, ...]
    break_even: tuple[BreakEven, ...]
    warnings: tuple[str, ...] = ()
    failures: tuple[Failure, ...] = ()
    method: Mapping[str, Any] | None = None
    drafters: Mapping[str, Drafter | None] | None = None
    speculation: tuple[SpeculationFailure, ...] = ()
    sweep: tuple[SweepResult, ...] = ()
    requests: tuple[Mapping[str, Any], ...] = ()  # --save-detailed (envforge.bench.records)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order (the ``data`` of an ``envforge.bench/4`` envelope)."""
        drafters = (
            None if self.drafters is None else {k: None if v is None else v.as_dict() for k, v in self.drafters.items()}
        )
        return {
            "fingerprint": {**self.fingerprint.as_dict(), "drafters": drafters},
            "config": dict(self.config),
            "method": dict(self.method or {}),
            "servers": [s.as_dict() for s in self.servers],
            "break_even": [b.as_dict() for b in self.break_even],
            "failures": [f.as_dict() for f in self.failures],
            "speculation": [f.as_dict() for f in self.speculation],
            "sweep": [x.as_dict() for x in self.sweep],
            "warnings": list(self.warnings),
            **({"requests": [dict(r) for r in self.requests]} if self.requests else {}),
        }

    def slo_misses(self) -> list[str]:
        """One line per level whose goodput missed the SLO gate (fewer good requests than the
        attainment in ``config.slo``), in report order; empty when every level met it or no SLO
        was given."""
        slo = self.config.get("slo") or {}
        targets = ", ".join(f"{k} <= {v:g} ms" for k, v in (slo.get("targets_ms") or {}).items())
        need = slo.get("attainment")
        return [
            f"server '{s.name}', {lv.label}: {lv.goodput.good} of {lv.goodput.completed} "
            f"requests ({lv.goodput.attained:.1%}) met {targets}; the gate needs {need:.0%}"
            for s in self.servers
            for lv in s.levels
            if lv.goodput is not None and not lv.goodput.met
        ]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchReport:
        for key, kind in (
            ("servers", list),
            ("failures", list),
            ("warnings", list),
            ("config", dict),
            ("method", dict),
            ("fingerprint", dict),
            ("sweep", list),
            ("requests", list),
        ):
            if d.get(key) is not None and not isinstance(d[key], kind):
                raise TypeError(f"'{key}' must be a{'n array' if kind is list else 'n object'}")
        if not all(isinstance(w, str) for w in d.get("warnings") or ()):
            raise TypeError("'warnings' must be an array of strings")
        servers = tuple(ServerResult.from_dict(s) for s in d.get("servers") or ())
        fp = d.get("fingerprint") or {}
        drafters = fp.get("drafters")
        if drafters is not None and not isinstance(drafters, Mapping):
            raise TypeError("'fingerprint.drafters' must be an object")
        return cls(
            Fingerprint.from_dict(fp),
            d.get("config") or {},
            servers,
            break_even_rows(servers),
            tuple(d.get("warnings") or ()),
            tuple(Failure.from_dict(f) for f in d.get("failures") or ()),
            d.get("method") or {},
            None
            if drafters is None
            else {str(k): None if v is None else Drafter.from_dict(v) for k, v in drafters.items()},
            check_servers(servers),
            tuple(SweepResult.from_dict(x) for x in d.get("sweep") or ()),
            tuple(dict(r) for r in d.get("requests") or ()),
        )


def upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data`` of an ``envforge.bench/1`` report in the ``/2`` shape: each level's and
    repeat's ``"vllm": {...}`` becomes ``"engine": {"name": "vllm", "counters": {...}}`` (``/1``
    knew no other engine with counters); everything else is kept as it is.

    Malformed parts are left for :meth:`BenchReport.from_dict` to name.
    """

    def move(x: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in x.items() if k != "vllm"}
        if x.get("vllm"):  # /1 read an empty or null "vllm" as none
            out["engine"] = {"name": "vllm", "counters": x["vllm"]}
        return out

    return _levels_and_repeats(data, move)


def _levels_and_repeats(data: Mapping[str, Any], change: Any) -> dict[str, Any]:
    """``data`` with ``change(level_or_repeat)`` applied to every level and repeat object."""

    def level_or_repeat(x: Any) -> Any:
        if not isinstance(x, Mapping):
            return x
        out = change(x)
        if isinstance(x.get("repeats"), list):
            out["repeats"] = [level_or_repeat(r) for r in x["repeats"]]
        return out

    def server(s: Any) -> Any:
        if not isinstance(s, Mapping) or not isinstance(s.get("levels"), list):
            return s
        return {**s, "levels": [level_or_repeat(lv) for lv in s["levels"]]}

    servers = data.get("servers")
    return {**data, "servers": [server(s) for s in servers]} if isinstance(servers, list) else dict(data)


def upgrade_v2(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data`` of an ``envforge.bench/2`` report in the ``/3`` shape: each level's and
    repeat's ``itl_ms`` becomes ``tpot_ms`` (it was (last chunk - first chunk) / tokens after the
    first: vLLM's TPOT under another name); everything else is kept. ``/2`` measured no
    distributions, request throughput or goodput, so those read as absent.
    """

    def rename(x: Mapping[str, Any]) -> dict[str, Any]:
        return {("tpot_ms" if k == "itl_ms" else k): v for k, v in x.items()}

    return _levels_and_repeats(data, rename)


def upgrade_v3(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data`` of an ``envforge.bench/3`` (or upgraded older) report in the ``/4`` shape: before
    datasets every request's prompt came from a prompt file, so ``config.dataset`` is
    ``{"name": "prompts"}`` (what a ``/4`` report of a prompt file says); each level's
    ``request_rate`` is the run's ``config["request-rate"]`` (every level of a ``/3`` run had it;
    null for closed loop and before ``/3``); everything else is kept (no server metrics and no
    sweep: they read as absent).
    """
    config = data.get("config")
    rate = config.get("request-rate") if isinstance(config, Mapping) else None

    def level(x: Mapping[str, Any]) -> dict[str, Any]:
        return {**x, "request_rate": x.get("request_rate", rate)} if "concurrency" in x else dict(x)

    out = _levels_and_repeats(data, level)
    if isinstance(config, Mapping) and "dataset" not in config:
        out["config"] = {**config, "dataset": {"name": "prompts"}}
    return out


def read_report(path: Path) -> BenchReport:
    """Read a report written by ``envforge bench``: an ``envforge.bench/4`` JSON envelope, or a
    ``/3``, ``/2`` or ``/1`` one upgraded to the ``/4`` shape (:func:`upgrade_v3`, :func:`upgrade_v2`,
    :func:`upgrade_v1`).

    :raises InputError: unreadable, not JSON, or not a bench report (the message names the file).
    """
    text = decode_utf8(read_bytes(path, what="bench report"), label=str(path))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: not a bench report: arrays or objects nested too deeply") from None
    except ValueError as exc:  # a number of more digits than CPython converts
        raise long_number_error(str(path), text, exc) from None
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema not in (SCHEMA, SCHEMA_V3, SCHEMA_V2, SCHEMA_V1) or not isinstance(doc.get("data"), dict):
        found = schema if isinstance(doc, dict) else type(doc).__name__
        raise InputError(
            f"{path} is not an envforge bench report (schema {found!r}, expected {SCHEMA!r}, "
            f"{SCHEMA_V3!r}, {SCHEMA_V2!r} or {SCHEMA_V1!r})",
            hint="write one with `envforge bench --output FILE`",
        )
    data = doc["data"]
    if schema == SCHEMA_V1:
        data = upgrade_v1(data)
    if schema in (SCHEMA_V1, SCHEMA_V2):
        data = upgrade_v2(data)
    if schema != SCHEMA:
        data = upgrade_v3(data)
    try:
        return BenchReport.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed bench report: {type(exc).__name__}: {exc}") from None
