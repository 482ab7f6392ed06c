"""Mooncake-format traces: the shape of the released files read, everything else refused with the
line and the fix (exit 2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envforge.bench.trace import BLOCK_TOKENS, TraceRecord, read_trace
from envforge.cli import main
from envforge.core.errors import InputError

SMALL = Path(__file__).parents[1] / "data" / "bench" / "mooncake_trace_small.jsonl"
README_SAMPLE = [  # the two lines of Mooncake's FAST25-release/README.md
    {
        "timestamp": 27482,
        "input_length": 6955,
        "output_length": 52,
        "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354],
    },
    {
        "timestamp": 30535,
        "input_length": 6472,
        "output_length": 26,
        "hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366],
    },
]


def test_the_small_trace_reads_as_recorded() -> None:
    records, digest = read_trace(SMALL)
    assert digest == "sha256:" + hashlib.sha256(SMALL.read_bytes()).hexdigest()
    assert records[0] == TraceRecord(0.0, 530, 6, (0, 1), 1)
    assert [(r.timestamp_ms, r.input_length, r.output_length, r.line) for r in records] == [
        (0.0, 530, 6, 1),
        (0.0, 610, 3, 2),
        (1000.0, 300, 8, 3),
        (1000.0, 540, 1, 4),
        (2999.0, 90, 5, 5),
        (3000.0, 700, 12, 6),
    ]
    # the released files' rule: one block hash per started block of 512 tokens
    assert all(len(r.hash_ids) == -(-r.input_length // BLOCK_TOKENS) for r in records)


def test_the_readme_sample_reads_and_optional_hash_ids(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        "\n".join(json.dumps(x) for x in README_SAMPLE)
        + "\n\n"
        + '{"timestamp": 30535.5, "input_length": 7, "output_length": 1}\n'
    )
    records, _ = read_trace(p)
    assert [len(r.hash_ids) for r in records] == [14, 13, 0]
    assert len(records[0].hash_ids) == -(-6955 // BLOCK_TOKENS) and records[2].timestamp_ms == 30535.5


@pytest.mark.parametrize(
    "line, message, hint",
    [
        ('{"input_length": 5, "output_length": 1}', "no 'timestamp'", "every line needs its arrival in milliseconds"),
        (
            '{"timestamp": -1, "input_length": 5, "output_length": 1}',
            "'timestamp' must be a number of milliseconds >= 0, got -1",
            "a Mooncake trace line is",
        ),
        (
            '{"timestamp": "0", "input_length": 5, "output_length": 1}',
            "'timestamp' must be a number of milliseconds >= 0, got \"0\"",
            "a Mooncake trace line is",
        ),
        (
            '{"timestamp": 1, "input_length": 0, "output_length": 1}',
            "'input_length' must be at least 1 token, got 0",
            "leave the request out of the trace",
        ),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 0}',
            "'output_length' must be at least 1 token, got 0",
            "leave the request out of the trace",
        ),
        (
            '{"timestamp": 1, "input_length": 5.5, "output_length": 1}',
            "'input_length' must be a whole number of tokens, got 5.5",
            "a Mooncake trace line is",
        ),
        ('{"timestamp": 1, "input_length": 5}', "no 'output_length'", "a Mooncake trace line is"),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1, "2"]}',
            "'hash_ids' must be an array of integers >= 0",
            "a Mooncake trace line is",
        ),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 1, "session_id": 3}',
            "unknown key 'session_id'",
            "a Mooncake trace line is",
        ),
        # Issue 41: a length of 1e9 took bench past 2 GB before a request was sent.
        (
            '{"timestamp": 1, "input_length": 1000000000, "output_length": 1}',
            "'input_length' 1,000,000,000 is more than 10,000,000 tokens, the most envforge replays",
            "exceeds every model's context",
        ),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 10000001}',
            "'output_length' 10,000,001 is more than 10,000,000 tokens, the most envforge replays",
            "check the line",
        ),
        ("[1, 2]", "expected an object, got list", "a Mooncake trace line is"),
        (
            '{"timestamp": 1,',
            "not valid JSON: Expecting property name enclosed in double quotes",
            "a Mooncake trace line is",
        ),
        (
            '{"timestamp": 1, "input_length": 5, "output_length": 1}\n{"timestamp": 0.5, "input_length": 5, '
            '"output_length": 1}',
            "timestamp 0.5 ms is earlier than 1 ms on line 2: a trace is in arrival order",
            "sort the trace by timestamp",
        ),
    ],
)
def test_bad_lines_are_refused_naming_the_line(tmp_path: Path, line: str, message: str, hint: str) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n' + line + "\n")
    with pytest.raises(InputError) as exc:
        read_trace(p)
    last = 2 + line.count("\n")
    assert exc.value.message == f"{p}:{last}: {message}" and hint in (exc.value.hint or "")


def test_an_empty_trace_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text("\n\n")
    with pytest.raises(InputError) as exc:
        read_trace(p)
    assert exc.value.message == f"{p}: the trace has no request"


def test_the_cli_refuses_a_bad_trace_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before any request (the URL is never asked: nothing listens there)."""
    from tests.support.bench_support import make_tiny_model

    model = make_tiny_model(tmp_path / "m")
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"input_length": 5, "output_length": 1}\n')
    assert (
        main(
            [
                "bench",
                "--url",
                "http://127.0.0.1:9",
                "--api",
                "openai",
                "--model",
                str(model),
                "--dataset",
                "trace",
                "--trace",
                str(p),
                "--no-plot",
                "--output",
                str(tmp_path / "o.json"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"error: {p}:2: no 'timestamp'" in err and "hint: every line needs its arrival in milliseconds" in err
    assert not (tmp_path / "o.json").exists()


def test_a_line_longer_than_the_bound_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """Issue 41: a 600 MB line under the 1 GiB file limit was parsed whole (past 2 GB of memory)."""
    p = tmp_path / "t.jsonl"
    ids = ", ".join(["1"] * (6 << 20))  # 18 MiB of hash ids
    p.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 1}\n'
        '{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [' + ids + "]}\n"
    )
    size = len(p.read_bytes().splitlines()[1])
    with pytest.raises(InputError) as exc:
        read_trace(p)
    assert exc.value.message == (
        f"{p}:2: a line of {size:,} bytes, more than 16 MiB (a 10M-token request's line is about 200 KB)"
    )
