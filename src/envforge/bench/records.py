"""Per-request records of the measured repeats (``--save-detailed``, ``--csv``): results to take elsewhere.

One flat record per request of every measured repeat (warm-up and probe requests are not measured),
in send order within a repeat, under the report's ``requests`` and, with ``--csv``, one CSV row
each (the same columns, :data:`FIELDS`; ``itl_ms`` space-separated). Times are milliseconds:
``sent_ms`` from the repeat's first send, the others from the request's own send, as
``vllm bench serve --save-detailed`` keeps ``start_times``, ``ttfts``, ``itls`` and ``latencies``
(``vllm/benchmarks/serve.py``, 0.32.0). Input tokens are a generated dataset's count by its
tokenizer (null for a prompt file: not counted). ``turn``: a multi-turn run's turn of the
conversation ``prompt_id`` (1 the first), null outside one. ``prompt_tokens``: the server's own count
of the request's input tokens (its usage; what a multi-turn conversation's later turns resend shows
there), null when it sent none.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envforge.bench.client import LevelRun
from envforge.bench.dataset import Prompt
from envforge.core.fs import atomic_write

__all__ = ["FIELDS", "csv_text", "request_records", "write_csv"]

#: The keys of a record, in order (also the CSV header).
FIELDS = (
    "server",
    "concurrency",
    "request_rate",
    "repeat",
    "index",
    "prompt_id",
    "turn",
    "sent_ms",
    "ttft_ms",
    "tpot_ms",
    "e2el_ms",
    "e2e_ms",
    "input_tokens",
    "prompt_tokens",
    "asked_tokens",
    "output_tokens",
    "token_count",
    "chunks",
    "ok",
    "status",
    "finish",
    "error",
    "itl_ms",
)


def _ms(s: float | None) -> float | None:
    return None if s is None else round(s * 1000.0, 4)


def request_records(
    server: str,
    concurrency: int,
    request_rate: float | None,
    repeat: int,
    run: LevelRun,
    prompts: Sequence[Prompt],
    asked: Sequence[int],
) -> list[dict[str, Any]]:
    """The records of one measured repeat: ``run``'s results with the ``prompts`` they sent and the
    output tokens each ``asked`` for (parallel sequences); ``request_rate`` None for a closed loop.

    :raises ValueError: the sequences are not parallel.
    """
    n = len(run.results)
    if len(prompts) != n or len(asked) != n or (run.starts_s and len(run.starts_s) != n):
        raise ValueError(f"{n} results, {len(prompts)} prompts, {len(asked)} lengths, {len(run.starts_s)} starts")
    out = []
    for i, (r, p, k) in enumerate(zip(run.results, prompts, asked)):
        out.append(
            {
                "server": server,
                "concurrency": concurrency,
                "request_rate": request_rate,
                "repeat": repeat,
                "index": i,
                "prompt_id": p.id,
                "turn": r.turn,
                "sent_ms": _ms(run.starts_s[i]) if run.starts_s else None,
                "ttft_ms": _ms(r.ttft_s),
                "tpot_ms": _ms(r.tpot_s),
                "e2el_ms": _ms(r.e2el_s),
                "e2e_ms": _ms(r.e2e_s),
                "input_tokens": p.input_len,
                "prompt_tokens": r.prompt_tokens,
                "asked_tokens": k,
                "output_tokens": r.output_tokens,
                "token_count": r.token_count,
                "chunks": r.chunks,
                "ok": r.ok,
                "status": r.status,
                "finish": r.finish,
                "error": r.error,
                "itl_ms": [_ms(g) for g in r.itl_s],
            }
        )
    return out


def csv_text(records: Iterable[Mapping[str, Any]]) -> str:
    """The records as CSV (RFC 4180, ``\\r\\n`` line ends as the csv module writes them): the header
    :data:`FIELDS`, then one row each; null is an empty cell, booleans ``true``/``false``, ``itl_ms``
    its values joined by spaces."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(FIELDS)
    for rec in records:
        w.writerow([_cell(k, rec.get(k)) for k in FIELDS])
    return buf.getvalue()


def _cell(key: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if key == "itl_ms":
        return " ".join(f"{v:g}" for v in value)
    return str(value)


def write_csv(records: Iterable[Mapping[str, Any]], path: Path) -> None:
    """Write :func:`csv_text` of ``records`` to ``path`` atomically (no half-written file).

    :raises OSError: the file cannot be written.
    """
    atomic_write(path, csv_text(records).encode("utf-8"))
