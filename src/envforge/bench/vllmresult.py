"""A ``vllm bench serve --save-result`` file read as a one-level report, so ``bench compare`` takes it.

The keys are those ``vllm/benchmarks/serve.py`` (vLLM 0.32.0) writes: ``backend``, ``model_id``,
``num_prompts``, ``request_rate`` (a number, or ``"inf"`` for all at once), ``burstiness``,
``max_concurrency`` (null: no cap), ``completed``, ``failed``, ``output_throughput`` (output tok/s),
``request_throughput``, ``median_ttft_ms``, ``median_tpot_ms``, ``median_e2el_ms`` and, for a
speculative server, ``spec_decode_acceptance_length``. One run is one level of one repeat: its tok/s
has no interval, so ``bench compare`` calls no change against it ("no interval"); the file records no
environment (empty fingerprint: comparing needs ``--allow-different-env``) and no server variables;
a run with failed requests has no figures, as an envforge level with failures has none (vLLM
reports over the completed ones). What cannot be compared is said in :attr:`BenchReport.warnings`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envforge.bench.report import BenchReport, read_report
from envforge.bench.result import LevelResult, ServerResult
from envforge.bench.stats import summarize
from envforge.core.errors import InputError
from envforge.core.textfile import decode_utf8, long_number_error, read_bytes
from envforge.env.fingerprint import Fingerprint

__all__ = ["VLLM_SERVER", "from_vllm", "is_vllm_result", "paired", "read_compared", "vllm_report"]

#: The server name a vLLM result's one level is listed under (``bench compare`` pairs it by name).
VLLM_SERVER = "vllm bench serve"
_NEEDED = ("backend", "completed", "output_throughput")
_SOURCE = "vllm bench serve"  # config["source"] of such a report


def is_vllm_result(doc: Any) -> bool:
    """A JSON object without envforge's ``schema`` that has ``backend``, ``completed`` and ``output_throughput``."""
    return isinstance(doc, Mapping) and "schema" not in doc and all(k in doc for k in _NEEDED)


def _number(doc: Mapping[str, Any], key: str, path: Path, *, optional: bool = False) -> float | None:
    value = doc.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(
            f"{path}: {key}: expected a number >= 0 in a vllm bench serve result, got {value!r}",
            hint="give the file `vllm bench serve --save-result` wrote, unedited",
        )
    return float(value)


def vllm_report(doc: Mapping[str, Any], path: Path, *, server: str = VLLM_SERVER) -> BenchReport:
    """The one-level report of a vLLM result ``doc`` (read from ``path``), its level under ``server``.

    :raises InputError: a key it needs is missing or not a number of its kind (naming file and key).
    """
    completed = int(_number(doc, "completed", path) or 0)
    failed = int(_number(doc, "failed", path, optional=True) or 0)
    rate_value = doc.get("request_rate", "inf")
    rate = None if rate_value in ("inf", None) else _number(doc, "request_rate", path)
    cap = _number(doc, "max_concurrency", path, optional=True)
    concurrency = (
        int(cap) if cap is not None else int(_number(doc, "num_prompts", path, optional=True) or completed + failed)
    )
    accept = _number(doc, "spec_decode_acceptance_length", path, optional=True)

    def one(key: str) -> Any:
        value = None if failed else _number(doc, key, path, optional=True)
        return None if value is None else summarize([value])

    level = LevelResult(
        concurrency=concurrency,
        repeats=(),
        tok_s=one("output_throughput"),
        ttft_ms=one("median_ttft_ms"),
        tpot_ms=one("median_tpot_ms"),
        e2e_ms=one("median_e2el_ms"),
        accept_length=accept,
        verify_cycle_ms=None,
        failed_requests=failed,
        req_s=one("request_throughput"),
        request_rate=rate,
    )
    srv = ServerResult(
        server,
        accept is not None,
        str(doc.get("base_url") or ""),
        None,
        None,
        (level,),
        cache="unknown (a vllm bench serve result)",
    )
    config = {
        "model": doc.get("model_id"),
        "concurrency": [concurrency],
        "request-rate": rate,
        "burstiness": doc.get("burstiness"),
        "source": _SOURCE,
    }
    warnings = (
        f"{path} is a vllm bench serve result ({doc.get('backend')}, {doc.get('date', 'undated')}): one run "
        f"of {completed} completed requests, so its tok/s has no interval; it records no environment, no "
        "server variables and no per-request distributions; only model, concurrency, request rate and "
        "burstiness are compared as settings",
    )
    return BenchReport(Fingerprint(None, None, None, None), config, (srv,), (), warnings)


def from_vllm(r: BenchReport) -> bool:
    """Whether ``r`` is a vLLM result read by :func:`vllm_report` (its config's ``source``)."""
    return r.config.get("source") == _SOURCE


def paired(a: BenchReport, b: BenchReport) -> tuple[BenchReport, BenchReport]:
    """``a`` and ``b`` with a vLLM result's level listed under the other report's server when that
    report has exactly one (``bench compare`` pairs levels by server name); otherwise as they are."""
    for mine, other in ((a, b), (b, a)):
        if from_vllm(mine) and not from_vllm(other) and len(other.servers) == 1 and len(mine.servers) == 1:
            renamed = replace(mine, servers=(replace(mine.servers[0], name=other.servers[0].name),))
            return (renamed, b) if mine is a else (a, renamed)
    return a, b


def read_compared(path: Path) -> BenchReport:
    """What ``bench compare`` reads: an envforge bench report (:func:`read_report`) or a vLLM result
    (:func:`vllm_report`).

    :raises InputError: neither (the message names the file and both kinds).
    """
    text = decode_utf8(read_bytes(path, what="bench report"), label=str(path))
    try:
        doc = json.loads(text)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            return read_report(path)  # names the line
        raise long_number_error(str(path), text, exc) from None
    except RecursionError:
        return read_report(path)
    return vllm_report(doc, path) if is_vllm_result(doc) else read_report(path)
