"""bench/records.py: the per-request record and CSV schema, pinned with literal values."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.dataset import Prompt
from envforge.bench.records import FIELDS, csv_text, request_records, write_csv

OK = RequestResult(
    ok=True,
    output_tokens=3,
    e2e_s=0.31,
    ttft_s=0.1,
    tpot_s=0.1,
    decode_s=0.2,
    e2el_s=0.3,
    itl_s=(0.1, 0.1),
    itl_tokens=(1, 1),
    status=200,
    finish="length",
    chunks=3,
    turn=2,
    prompt_tokens=40,
)
BAD = RequestResult(
    ok=False,
    output_tokens=1,
    e2e_s=0.05,
    error="1 of 3 tokens (finish reason 'stop'): a request must yield exactly max-new-tokens",
    status=200,
    finish="stop",
    token_count="chunks",
    chunks=1,
)
RUN = LevelRun(2, (OK, BAD), 0.4, (), (0.0, 0.0125))


def test_a_record_per_request_in_send_order() -> None:
    recs = request_records("baseline", 2, 4.0, 1, RUN, [Prompt(7, "a", input_len=32), Prompt(3, "b")], [3, 3])
    assert recs == [
        {
            "server": "baseline",
            "concurrency": 2,
            "request_rate": 4.0,
            "repeat": 1,
            "index": 0,
            "prompt_id": 7,
            "turn": 2,
            "sent_ms": 0.0,
            "ttft_ms": 100.0,
            "tpot_ms": 100.0,
            "e2el_ms": 300.0,
            "e2e_ms": 310.0,
            "input_tokens": 32,
            "prompt_tokens": 40,
            "asked_tokens": 3,
            "output_tokens": 3,
            "token_count": "server",
            "chunks": 3,
            "ok": True,
            "status": 200,
            "finish": "length",
            "error": None,
            "itl_ms": [100.0, 100.0],
        },
        {
            "server": "baseline",
            "concurrency": 2,
            "request_rate": 4.0,
            "repeat": 1,
            "index": 1,
            "prompt_id": 3,
            "turn": None,
            "sent_ms": 12.5,
            "ttft_ms": None,
            "tpot_ms": None,
            "e2el_ms": None,
            "e2e_ms": 50.0,
            "input_tokens": None,
            "prompt_tokens": None,
            "asked_tokens": 3,
            "output_tokens": 1,
            "token_count": "chunks",
            "chunks": 1,
            "ok": False,
            "status": 200,
            "finish": "stop",
            "error": "1 of 3 tokens (finish reason 'stop'): a request must yield exactly max-new-tokens",
            "itl_ms": [],
        },
    ]
    assert all(tuple(r) == FIELDS for r in recs)
    assert request_records("s", 1, None, 2, LevelRun(1, (OK,), 0.3), [Prompt(0, "a")], [3])[0]["sent_ms"] is None
    with pytest.raises(ValueError, match="^2 results, 1 prompts, 2 lengths, 2 starts$"):
        request_records("s", 2, None, 1, RUN, [Prompt(0, "a")], [3, 3])


def test_csv_has_the_header_and_one_row_a_request(tmp_path: Path) -> None:
    recs = request_records("baseline", 2, None, 1, RUN, [Prompt(7, "a, with a comma"), Prompt(3, "b")], [3, 3])
    text = csv_text(recs)
    assert text.splitlines() == [
        "server,concurrency,request_rate,repeat,index,prompt_id,turn,sent_ms,ttft_ms,tpot_ms,e2el_ms,e2e_ms,"
        "input_tokens,prompt_tokens,asked_tokens,output_tokens,token_count,chunks,ok,status,finish,error,itl_ms",
        "baseline,2,,1,0,7,2,0.0,100.0,100.0,300.0,310.0,,40,3,3,server,3,true,200,length,,100 100",
        "baseline,2,,1,1,3,,12.5,,,,50.0,,,3,1,chunks,1,false,200,stop,1 of 3 tokens (finish reason 'stop'): a "
        "request must yield exactly max-new-tokens,",
    ]
    assert text.endswith("\r\n")
    write_csv(recs, tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_bytes() == text.encode()
    assert csv_text([]) == ",".join(FIELDS) + "\r\n"
