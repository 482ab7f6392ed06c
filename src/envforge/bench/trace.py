"""Recorded request traces in the Mooncake format, read offline.

The shape is Mooncake's (kvcache-ai/Mooncake, ``FAST25-release/README.md`` and the released
``FAST25-release/traces/*.jsonl``), the one SGLang's ``bench_serving --dataset-name mooncake``
replays (``python/sglang/benchmark/datasets/mooncake.py``): JSON lines, one request a line,

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2354]}

``timestamp``: the arrival in milliseconds from the start of the recording; ``input_length`` and
``output_length``: the request's prompt and output tokens; ``hash_ids`` (optional): the remapped
hashes of the prompt's blocks of :data:`BLOCK_TOKENS` tokens, so two requests whose lists start
alike shared that prefix (``ceil(input_length / 512)`` ids a line in the released files). Lines
are in arrival order; many share a timestamp (the released traces record whole seconds).

Read strictly: a line without one of the three numbers, with a length below 1, a negative or
non-finite timestamp, a timestamp earlier than the line before (SGLang sorts; envforge refuses,
since a recording out of order is a spliced or edited file), ``hash_ids`` that are not an array of
integers >= 0, a length above :data:`envforge.core.limits.MAX_REQUEST_TOKENS`, a line longer than
:data:`~envforge.core.limits.MAX_TRACE_LINE` bytes, or any other key is bad input naming the line (exit 2).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.limits import MAX_REQUEST_TOKENS, MAX_TRACE_LINE
from envforge.core.textfile import long_number_error, read_bytes

__all__ = ["BLOCK_TOKENS", "TRACE_LIMIT", "TraceRecord", "read_trace"]

#: Tokens per ``hash_ids`` block in Mooncake's traces (the README's sample: 6955 input tokens, 14 ids).
BLOCK_TOKENS = 512
#: The largest trace read (1 GiB; the released conversation trace is about 3 MB).
TRACE_LIMIT = 1 << 30
_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
_SHAPE = (
    'a Mooncake trace line is {"timestamp": <ms>, "input_length": <tokens>, "output_length": <tokens>} '
    'with optional "hash_ids": [<int>, ...]'
)


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request of a trace: its arrival (ms from the recording's start), its prompt and output
    tokens, the hashes of its prompt's blocks (empty: none recorded), and its line in the file."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    line: int


def _length(obj: dict[str, Any], key: str, where: str) -> int:
    v = obj.get(key)
    if v is None:
        raise InputError(f"{where}: no '{key}'", hint=_SHAPE)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: '{key}' must be a whole number of tokens, got {json.dumps(v)}", hint=_SHAPE)
    if v < 1:
        raise InputError(
            f"{where}: '{key}' must be at least 1 token, got {v}",
            hint="leave the request out of the trace, or give its real length",
        )
    if v > MAX_REQUEST_TOKENS:
        raise InputError(
            f"{where}: '{key}' {v:,} is more than {MAX_REQUEST_TOKENS:,} tokens, the most envforge replays",
            hint="a request of more than 10M tokens exceeds every model's context; check the line",
        )
    return v


def read_trace(path: Path) -> tuple[tuple[TraceRecord, ...], str]:
    """Read a Mooncake-format trace (module docstring); blank lines are skipped.

    :returns: the records in file order and ``sha256:<hex>`` of the file bytes.
    :raises InputError: unreadable, not UTF-8 JSON lines, a line of another shape (the message
        names ``<path>:<line>`` and the key), timestamps going backwards, or no record.
    """
    raw = read_bytes(
        path,
        what="trace",
        limit=TRACE_LIMIT,
        hint='give a Mooncake-format JSON-lines trace (docs/bench.md, "Datasets")',
    )
    records: list[TraceRecord] = []
    for n, data_line in enumerate(raw.splitlines(), start=1):
        if not data_line.strip():
            continue
        where = f"{path}:{n}"
        if len(data_line) > MAX_TRACE_LINE:  # parsed whole, a line costs many times its bytes in memory
            raise InputError(
                f"{where}: a line of {len(data_line):,} bytes, more than {MAX_TRACE_LINE >> 20} MiB (a "
                "10M-token request's line is about 200 KB)",
                hint=_SHAPE,
            )
        try:
            obj = json.loads(data_line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text (byte {exc.start + 1} of the line)") from None
        except RecursionError:
            raise InputError(f"{where}: not valid JSON: nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON: {exc.msg}", hint=_SHAPE) from None
        except ValueError as exc:  # a number of more digits than CPython converts
            raise long_number_error(where, data_line, exc, lines=False, hint=_SHAPE) from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected an object, got {type(obj).__name__}", hint=_SHAPE)
        unknown = [k for k in obj if k not in _KEYS]
        if unknown:
            raise InputError(f"{where}: unknown key '{unknown[0]}'", hint=_SHAPE)
        ts = obj.get("timestamp")
        if ts is None:
            raise InputError(
                f"{where}: no 'timestamp'",
                hint="every line needs its arrival in milliseconds from the start of the recording; " + _SHAPE,
            )
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
            raise InputError(
                f"{where}: 'timestamp' must be a number of milliseconds >= 0, got {json.dumps(ts)}", hint=_SHAPE
            )
        if records and ts < records[-1].timestamp_ms:
            raise InputError(
                f"{where}: timestamp {ts:g} ms is earlier than {records[-1].timestamp_ms:g} ms on "
                f"line {records[-1].line}: a trace is in arrival order",
                hint="sort the trace by timestamp (e.g. jq -c -s 'sort_by(.timestamp)[]' trace.jsonl)",
            )
        ids = obj.get("hash_ids", [])
        if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) or h < 0 for h in ids):
            raise InputError(f"{where}: 'hash_ids' must be an array of integers >= 0", hint=_SHAPE)
        records.append(
            TraceRecord(
                float(ts), _length(obj, "input_length", where), _length(obj, "output_length", where), tuple(ids), n
            )
        )
    if not records:
        raise InputError(f"{path}: the trace has no request", hint=_SHAPE)
    return tuple(records), "sha256:" + hashlib.sha256(raw).hexdigest()
