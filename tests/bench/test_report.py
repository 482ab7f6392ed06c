"""Reports: the JSON (schema envforge.bench/4) pinned, reading /3, /2 and /1 reports back, warnings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.bench_reports import FP, ok, report

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.metrics import EngineWindow, SpecDecodeStats
from envforge.bench.report import (
    SCHEMA,
    SCHEMA_VERSION,
    BenchReport,
    read_report,
    report_warnings,
    upgrade_v1,
    upgrade_v2,
    upgrade_v3,
)
from envforge.bench.result import Failure, LevelResult, RepeatResult, ServerResult, level_result
from envforge.bench.stats import Summary
from envforge.bench.sweep import RateSweep, SweepResult
from envforge.cli import main
from envforge.cli.output import envelope
from envforge.core.errors import InputError
from envforge.env.fingerprint import Fingerprint


def test_report_round_trips_through_json(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(envelope("bench", report().as_dict(), SCHEMA_VERSION)))
    back = read_report(path)
    assert back.as_dict() == json.loads(path.read_text())["data"]
    assert back.fingerprint == FP


def test_read_report_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match=r"bad.json:1: not valid JSON: Expecting property name"):
        read_report(tmp_path / "bad.json")
    (tmp_path / "verify.json").write_text(json.dumps({"schema": "envforge.verify/1", "data": {}}))
    with pytest.raises(InputError) as exc:
        read_report(tmp_path / "verify.json")
    assert exc.value.message == (
        f"{tmp_path / 'verify.json'} is not an envforge bench report "
        f"(schema 'envforge.verify/1', expected 'envforge.bench/4', "
        "'envforge.bench/3', 'envforge.bench/2' or 'envforge.bench/1')"
    )


def test_report_json_keys_are_pinned() -> None:
    base = ServerResult(
        "baseline",
        False,
        "http://127.0.0.1:1",
        ("py", "-m", "x"),
        1.234,
        (),
        {"NCCL_X": "1"},
        False,
        "flushed before each repeat (POST /flush_cache)",
        server_metrics="GET /metrics every 0.5 s during each measured repeat",
    )
    sweep = SweepResult(
        "baseline",
        8,
        RateSweep(0.5, 8.0),
        ((0.5, True), (1.0, True), (2.0, False), (1.5, True), (1.75, False), (1.625, True)),
    )
    r = BenchReport(
        FP,
        {"model": "m"},
        (base,),
        (),
        ("w",),
        (Failure("baseline", 1, 2, "m", 200),),
        {"prompts": "p", "order": "sequential"},
        sweep=(sweep,),
    )
    assert r.as_dict() == {
        "fingerprint": {
            "lock_digest": "sha256:aa",
            "patch_manifest_digest": None,
            "env_profile": "pcie",
            "env_profile_digest": "sha256:bb",
            "python": "3.12",
            "driver": "580.65",
            "gpu": "RTX PRO 6000",
            "gpu_count": 8,
            "compute_capability": "12.0",
            "platform": None,
            "effective_env_digest": None,
            "startup_digest": None,
            "nccl_conf_digest": None,
            "drafters": None,
        },
        "config": {"model": "m"},
        "method": {"prompts": "p", "order": "sequential"},
        "servers": [
            {
                "name": "baseline",
                "speculative": False,
                "url": "http://127.0.0.1:1",
                "argv": ["py", "-m", "x"],
                "load_s": 1.23,
                "env": {"NCCL_X": "1"},
                "env_sources": None,
                "ignore_eos": False,
                "cache": "flushed before each repeat (POST /flush_cache)",
                "server_metrics": "GET /metrics every 0.5 s during each measured repeat",
                "levels": [],
            }
        ],
        "break_even": [],
        "failures": [{"server": "baseline", "concurrency": 1, "repeat": 2, "status": 200, "message": "m"}],
        "speculation": [],
        "sweep": [
            {
                "server": "baseline",
                "concurrency": 8,
                "low": 0.5,
                "high": 8.0,
                "precision": 0.1,
                "max_steps": 12,
                "levels": [
                    {"request_rate": 0.5, "met": True},
                    {"request_rate": 1.0, "met": True},
                    {"request_rate": 2.0, "met": False},
                    {"request_rate": 1.5, "met": True},
                    {"request_rate": 1.75, "met": False},
                    {"request_rate": 1.625, "met": True},
                ],
                "highest_passing_rate": 1.625,
                "lowest_failing_rate": 1.75,
                "outcome": "found",
                "line": "sweep 'baseline' (concurrency 8): 1.625 requests/s is the highest rate that met the "
                "SLO; 1.75 missed it (within 10% after 6 levels)",
            }
        ],
        "warnings": ["w"],
    }
    assert BenchReport.from_dict(r.as_dict()).as_dict() == r.as_dict()
    (be,) = report().break_even
    assert be.as_dict() == {
        "baseline": "baseline",
        "speculative": "eagle3",
        "concurrency": 1,
        "decode_step_ms": 12.2,
        "verify_cycle_ms": 30.0,
        "break_even_accept_length": 2.459,
        "accept_length": 2.5,
        "pays": True,
    }


def test_report_warnings_are_pinned() -> None:
    url = ServerResult(
        "url",
        True,
        "http://h:1",
        None,
        None,
        (level_result(1, [LevelRun(1, (ok(token_count="chunks"),), 1.0)], speculative=True),),
        None,
        False,
    )
    started = ServerResult("baseline", False, "http://h:1", (), 1.0, (), {}, True)
    assert report_warnings(Fingerprint(None, None, None, None), [url, started]) == [
        "the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url without "
        "ENV): these numbers are tied to no environment state, and `bench compare` never calls two such reports "
        "the same environment",
        "server 'url': not started by envforge; the variables it runs with are unknown",
        "server 'url': output tokens counted as chunks (the server sent no usage); exact only when every chunk "
        "holds one token",
        "server 'url', concurrency 1: tokens were counted as chunks (the server sent no usage) and one chunk of a "
        "speculative server carries a whole verify step: no tok/s, TPOT or ITL",
        "server 'url': the server rejected ignore_eos; output lengths are not forced, and a request that stops "
        "early fails",
    ]
    assert report_warnings(FP, [started]) == []


REPORT_DOC = {
    "fingerprint": {"lock_digest": "sha256:aa", "gpu_count": 8},
    "config": {"model": "m"},
    "method": {"order": "interleaved"},
    "servers": [
        {
            "name": "eagle3",
            "speculative": True,
            "url": "http://h:1",
            "argv": ["py", "-m", "sglang"],
            "load_s": 61.5,
            "env": {"NCCL_BUFFSIZE": 131072},
            "ignore_eos": False,
            "cache": "not flushed: POST /flush_cache answered HTTP 404",
            "levels": [
                {
                    "concurrency": 4,
                    "failed_requests": 2,
                    "token_count": "chunks",
                    "refused": "why",
                    "tok_s": {"n": 2, "median": 10, "mean": 11, "min": 9, "max": 13, "ci_low": 1, "ci_high": 21},
                    "ttft_ms": None,
                    "tpot_ms": None,
                    "e2e_ms": None,
                    "accept_length": 2.5,
                    "verify_cycle_ms": 30,
                    "repeats": [
                        {
                            "tok_s": 10,
                            "wall_s": 2,
                            "requests": 4,
                            "failed": 2,
                            "output_tokens": 20,
                            "token_count": "chunks",
                            "ttft_ms": 5,
                            "tpot_ms": None,
                            "e2e_ms": 7,
                            "verify_steps": 8,
                            "decode_s": 1.5,
                        }
                    ],
                }
            ],
        }
    ],
    "failures": [{"server": "eagle3", "concurrency": 4, "repeat": 1, "status": None, "message": "cancelled"}],
    "warnings": ["w1", "w2"],
}


def test_report_from_dict_reads_every_key() -> None:
    r = BenchReport.from_dict(REPORT_DOC)
    assert r.fingerprint == Fingerprint("sha256:aa", None, None, None, gpu_count=8)
    assert (r.config, r.method, r.warnings) == ({"model": "m"}, {"order": "interleaved"}, ("w1", "w2"))
    assert r.failures == (Failure("eagle3", 4, 1, "cancelled", None),)
    (s,) = r.servers
    assert (s.name, s.speculative, s.url, s.argv, s.load_s, s.env, s.ignore_eos, s.cache) == (
        "eagle3",
        True,
        "http://h:1",
        ("py", "-m", "sglang"),
        61.5,
        {"NCCL_BUFFSIZE": "131072"},
        False,
        "not flushed: POST /flush_cache answered HTTP 404",
    )
    (lv,) = s.levels
    assert lv == LevelResult(
        4,
        (RepeatResult(10.0, 2.0, 4, 20, 5.0, None, 7.0, 8, 1.5, 2, "chunks"),),
        Summary(2, 10.0, 11.0, 9.0, 13.0, 1.0, 21.0),
        None,
        None,
        None,
        2.5,
        30,
        2,
        "chunks",
        "why",
    )
    assert s.level(4) is lv and s.level(8) is None
    bare = BenchReport.from_dict(
        {
            "servers": [
                {
                    "name": "x",
                    "levels": [
                        {
                            "concurrency": 1,
                            "tok_s": None,
                            "repeats": [{"tok_s": 1, "wall_s": 1, "requests": 1, "output_tokens": 1, "e2e_ms": 1}],
                        }
                    ],
                }
            ]
        }
    )
    (bs,) = bare.servers
    assert (bs.speculative, bs.url, bs.argv, bs.load_s, bs.env, bs.ignore_eos, bs.cache) == (
        False,
        "",
        None,
        None,
        None,
        True,
        "not flushed",
    )
    (blv,) = bs.levels
    assert (blv.failed_requests, blv.token_count, blv.refused, blv.counters, blv.tok_s) == (
        0,
        "server",
        None,
        None,
        None,
    )
    assert blv.repeats == (RepeatResult(1.0, 1.0, 1, 1, None, None, 1.0, None, 0.0, 0, "server"),)
    assert (bare.failures, bare.warnings, bare.method, bare.config) == ((), (), {}, {})
    assert bare.fingerprint == Fingerprint(None, None, None, None)


def test_read_report_malformed_and_nested(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"schema": SCHEMA, "data": {"servers": [{"levels": []}]}}))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p}: malformed bench report: KeyError: 'name'"
    p.write_text(json.dumps([1]))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == (
        f"{p} is not an envforge bench report (schema 'list', expected "
        "'envforge.bench/4', 'envforge.bench/3', 'envforge.bench/2' or 'envforge.bench/1')"
    )
    assert exc.value.hint == "write one with `envforge bench --output FILE`"
    p.write_text(json.dumps({"schema": SCHEMA, "data": []}))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == (
        f"{p} is not an envforge bench report (schema 'envforge.bench/4', expected "
        "'envforge.bench/4', 'envforge.bench/3', 'envforge.bench/2' or 'envforge.bench/1')"
    )
    p.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message in (
        f"{p}: not a bench report: arrays or objects nested too deeply",
        f"{p} is not an envforge bench report (schema 'list', expected 'envforge.bench/4', "
        "'envforge.bench/3', 'envforge.bench/2' or 'envforge.bench/1')",
    )
    p.write_text('{"schema": "envforge.bench/1",\n "data": x}')
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p}:2: not valid JSON: Expecting value"


def test_read_report_refuses_wrong_types_where_compare_would_crash(tmp_path: Path) -> None:
    """Found by mutating a real report's fields (envforge bench --url against a closed port): a server
    name that is a list crashed `bench compare` (exit 70, TypeError: unhashable type); a "NaN" or
    1e999 tok/s was read as a number. Each is now exit 2 naming the file and the key."""
    base = {
        "schema": SCHEMA,
        "data": {
            "servers": [
                {
                    "name": "a",
                    "levels": [
                        {
                            "concurrency": 1,
                            "repeats": [
                                {"tok_s": 1.0, "wall_s": 1.0, "requests": 1, "output_tokens": 1, "e2e_ms": 1.0}
                            ],
                        }
                    ],
                }
            ]
        },
    }
    p = tmp_path / "r.json"
    p.write_text(json.dumps(base))
    assert read_report(p).servers[0].levels[0].repeats[0].tok_s == 1.0
    cases = [
        (("name",), ["a"], "TypeError: 'name' must be a string, got list"),
        (("name",), {"x": 1}, "TypeError: 'name' must be a string, got dict"),
        (("url",), 5, "TypeError: 'url' must be a string, got int"),
        (("argv",), "sglang --x", "TypeError: 'argv' must be a list of strings or null"),
        (("load_s",), "slow", "TypeError: 'load_s' must be a number or null, got str"),
        (("levels", 0, "accept_length"), [], "TypeError: 'accept_length' must be a number or null, got list"),
        (("levels", 0, "refused"), 1, "TypeError: 'refused' must be a string, got int"),
        (("levels", 0, "repeats", 0, "tok_s"), "NaN", "TypeError: 'tok_s' must be a number or null, got str"),
        (("levels", 0, "repeats", 0, "tok_s"), float("inf"), "ValueError: 'tok_s' must be finite, got inf"),
        (("levels", 0, "repeats", 0, "e2e_ms"), None, "TypeError: 'e2e_ms' must be a number, got null"),
        (("levels", 0, "repeats", 0, "ttft_ms"), True, "TypeError: 'ttft_ms' must be a number or null, got bool"),
    ]
    for path, value, reason in cases:
        doc = json.loads(json.dumps(base))
        node = doc["data"]["servers"][0]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        p.write_text(json.dumps(doc))
        with pytest.raises(InputError) as exc:
            read_report(p)
        assert exc.value.message == f"{p}: malformed bench report: {reason}", path
    for key, value, reason in [
        ("servers", {}, "TypeError: 'servers' must be an array"),
        ("config", [], "TypeError: 'config' must be an object"),
        ("warnings", [1], "TypeError: 'warnings' must be an array of strings"),
    ]:
        doc = json.loads(json.dumps(base))
        doc["data"][key] = value
        p.write_text(json.dumps(doc))
        with pytest.raises(InputError) as exc:
            read_report(p)
        assert exc.value.message == f"{p}: malformed bench report: {reason}"


DOCS = Path(__file__).parents[2] / "docs" / "bench"
V4_LEVEL_KEYS = [
    "concurrency",
    "request_rate",
    "failed_requests",
    "token_count",
    "refused",
    "tok_s",
    "req_s",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "latency",
    "goodput",
    "send_lag_ms",
    "accept_length",
    "verify_cycle_ms",
    "server_metrics",
    "engine",
    "repeats",
]
REPEAT_KEYS = [
    "tok_s",
    "req_s",
    "wall_s",
    "requests",
    "failed",
    "output_tokens",
    "token_count",
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "verify_steps",
    "decode_s",
    "engine",
]
V2_REPORT = Path(__file__).parents[1] / "data" / "bench" / "vllm-cpu-draft-model.v2.json"
COUNTER_KEYS = [
    "source",
    "requests",
    "generation_tokens",
    "decode_steps",
    "decode_s",
    "decode_step_ms",
    "tokens_per_step",
    "spec_decode",
]


def v1_as_v4(tmp_path: Path, name: str) -> Path:
    """The committed ``/1`` report ``name`` read and written again as envforge bench writes today."""
    out = tmp_path / f"{name}.v4.json"
    out.write_text(json.dumps(envelope("bench", read_report(DOCS / name).as_dict(), SCHEMA_VERSION)))
    return out


@pytest.mark.parametrize("name", ["vllm-cpu-draft-model.json", "cpu-demo.json", "cpu-demo-b.json"])
def test_committed_v1_reports_read_as_their_v4_shape(name: str) -> None:
    doc = json.loads((DOCS / name).read_text())
    assert doc["schema"] == "envforge.bench/1"
    expected = upgrade_v3(upgrade_v2(upgrade_v1(doc["data"])))
    assert expected["config"]["dataset"] == {"name": "prompts"}  # before /4 every prompt came from a prompt file
    assert "startup_digest" not in expected["fingerprint"]  # written before B36: read as unknown
    expected["fingerprint"] = {**expected["fingerprint"], "startup_digest": None}
    # keys added since these reports were written read as null (B38/B44: sources, NCCL's files)
    assert "nccl_conf_digest" not in expected["fingerprint"]
    expected["fingerprint"]["nccl_conf_digest"] = None
    assert "drafters" not in expected["fingerprint"]  # written before B42: drafters unknown
    expected["fingerprint"]["drafters"] = None
    expected["speculation"] = []  # recomputed from the levels: none of these fails a speculation check
    expected["sweep"] = []  # no sweep before /4
    for s in expected["servers"]:
        assert "env_sources" not in s
        s["env_sources"] = None
        s["server_metrics"] = "not scraped"  # never read before /4
        for lv in s["levels"]:  # never measured before /3: absent; a repeat's req_s follows from its counts
            assert lv["request_rate"] is None  # /1 ran closed loop only: upgrade_v3 gave the config's none
            lv.update(req_s=None, latency=None, goodput=None, send_lag_ms=None, server_metrics=None)
            for r in lv["repeats"]:
                r["req_s"] = round((r["requests"] - r["failed"]) / r["wall_s"], 4)
    assert read_report(DOCS / name).as_dict() == expected


def test_v1_vllm_counters_become_the_engine_key(tmp_path: Path) -> None:
    doc = json.loads((DOCS / "vllm-cpu-draft-model.json").read_text())
    r = read_report(DOCS / "vllm-cpu-draft-model.json")
    draft = r.servers[1].level(1)
    assert draft is not None and draft.counters is not None
    assert (draft.counters.engine, draft.counters.requests, draft.counters.decode_steps, draft.accept_length) == (
        "vllm",
        6,
        96,
        4.0,
    )
    assert draft.counters.spec == SpecDecodeStats(96, 288, 288, (96, 96, 96))
    assert [b.as_dict() for b in r.break_even] == doc["data"]["break_even"]
    saved = json.loads(v1_as_v4(tmp_path, "vllm-cpu-draft-model.json").read_text())
    assert saved["schema"] == "envforge.bench/4"
    lv = saved["data"]["servers"][1]["levels"][0]
    assert list(lv) == V4_LEVEL_KEYS and list(lv["repeats"][0]) == REPEAT_KEYS
    assert lv["engine"] == {"name": "vllm", "counters": doc["data"]["servers"][1]["levels"][0]["vllm"]}
    assert list(lv["engine"]["counters"]) == COUNTER_KEYS
    assert lv["repeats"][0]["engine"]["counters"]["spec_decode"]["drafts"] == 32
    assert read_report(tmp_path / "vllm-cpu-draft-model.json.v4.json").as_dict() == saved["data"]


def test_v4_schema_keys_are_pinned() -> None:
    window = EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5)))
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1)
    lv = level_result(1, [LevelRun(1, (r,), 0.25)], [window], speculative=True)
    plain = level_result(1, [LevelRun(1, (r,), 0.25)])
    levels = (lv, replace(plain, concurrency=2))
    rep = BenchReport(FP, {"api": "vllm"}, (ServerResult("d", True, "u", None, None, levels, {}),), ())
    doc = envelope("bench", rep.as_dict(), SCHEMA_VERSION)
    assert list(doc) == ["envforge", "schema", "data"] and doc["schema"] == SCHEMA == "envforge.bench/4"
    assert list(doc["data"]) == [
        "fingerprint",
        "config",
        "method",
        "servers",
        "break_even",
        "failures",
        "speculation",
        "sweep",
        "warnings",
    ]
    (s,) = doc["data"]["servers"]
    assert list(s) == [
        "name",
        "speculative",
        "url",
        "argv",
        "load_s",
        "env",
        "env_sources",
        "ignore_eos",
        "cache",
        "server_metrics",
        "levels",
    ]
    counted, uncounted = s["levels"]
    assert list(counted) == V4_LEVEL_KEYS and list(counted["repeats"][0]) == REPEAT_KEYS
    assert list(counted["latency"]) == ["ttft_ms", "tpot_ms", "itl_ms", "itl_per_token_ms", "e2el_ms"]
    assert counted["latency"]["ttft_ms"] == {
        "n": 1,
        "mean": 50.0,
        "median": 50.0,
        "p90": 50.0,
        "p95": 50.0,
        "p99": 50.0,
        "max": 50.0,
    }
    assert counted["tpot_ms"]["median"] == 4.0 and "itl_ms" not in counted
    assert "engine" not in uncounted and "engine" not in uncounted["repeats"][0] and "vllm" not in uncounted
    assert counted["repeats"][0]["engine"] == {
        "name": "vllm",
        "counters": {
            "source": "vllm /metrics",
            "requests": 1,
            "generation_tokens": 32,
            "decode_steps": 10,
            "decode_s": 0.1,
            "decode_step_ms": 10.0,
            "tokens_per_step": 3.1,
            "spec_decode": {
                "drafts": 8,
                "draft_tokens": 24,
                "accepted": 20,
                "per_position_accepted": [8, 7, 5],
                "mean_acceptance_length": 3.5,
                "draft_acceptance_rate": 0.8333,
                "per_position_rates": [1.0, 0.875, 0.625],
            },
        },
    }
    assert BenchReport.from_dict(doc["data"]).as_dict() == doc["data"]


def test_upgrade_v1_moves_only_the_vllm_key() -> None:
    assert upgrade_v1(
        {
            "servers": [
                {
                    "name": "s",
                    "levels": [
                        {
                            "concurrency": 1,
                            "vllm": {"requests": 1},
                            "repeats": [{"tok_s": 1, "vllm": {"requests": 1}}, {"tok_s": 2}],
                        },
                        {"concurrency": 2, "vllm": None},
                        {"concurrency": 4, "vllm": {}},
                    ],
                }
            ],
            "warnings": ["w"],
        }
    ) == {
        "servers": [
            {
                "name": "s",
                "levels": [
                    {
                        "concurrency": 1,
                        "engine": {"name": "vllm", "counters": {"requests": 1}},
                        "repeats": [
                            {"tok_s": 1, "engine": {"name": "vllm", "counters": {"requests": 1}}},
                            {"tok_s": 2},
                        ],
                    },
                    {"concurrency": 2},
                    {"concurrency": 4},
                ],
            }
        ],
        "warnings": ["w"],
    }
    assert upgrade_v1({"servers": {}}) == {"servers": {}}
    assert upgrade_v1({"servers": [1, {"levels": "x"}]}) == {"servers": [1, {"levels": "x"}]}


def test_v2_engine_key_is_checked(tmp_path: Path) -> None:
    rep = {"tok_s": 1.0, "wall_s": 1.0, "requests": 1, "output_tokens": 1, "e2e_ms": 1.0}
    p = tmp_path / "r.json"
    for engine, reason in [
        (
            {"name": "trtllm", "counters": {"requests": 1}},
            "ValueError: engine 'trtllm' is not one of sglang, openai, vllm, openai-chat",
        ),
        ({"name": "vllm"}, 'TypeError: \'engine\' must be an object {"name": ..., "counters": {...}}'),
        ({"name": 1, "counters": {}}, "TypeError: 'name' must be a string, got int"),
    ]:
        p.write_text(
            json.dumps(
                {
                    "schema": SCHEMA,
                    "data": {
                        "servers": [
                            {"name": "a", "levels": [{"concurrency": 1, "repeats": [{**rep, "engine": engine}]}]}
                        ]
                    },
                }
            )
        )
        with pytest.raises(InputError) as exc:
            read_report(p)
        assert exc.value.message == f"{p}: malformed bench report: {reason}"
    p.write_text(
        json.dumps(
            {
                "schema": SCHEMA,
                "data": {
                    "servers": [
                        {"name": "a", "levels": [{"concurrency": 1, "vllm": {"requests": 1}, "repeats": [rep]}]}
                    ]
                },
            }
        )
    )
    assert read_report(p).servers[0].levels[0].counters is None  # a /2 report's "vllm" key means nothing


def test_upgrade_v2_renames_itl_to_tpot() -> None:
    assert upgrade_v2(
        {
            "servers": [
                {
                    "name": "s",
                    "levels": [
                        {"concurrency": 1, "itl_ms": {"n": 1}, "repeats": [{"tok_s": 1, "itl_ms": 9.8}, {"tok_s": 2}]}
                    ],
                }
            ]
        }
    ) == {
        "servers": [
            {
                "name": "s",
                "levels": [
                    {"concurrency": 1, "tpot_ms": {"n": 1}, "repeats": [{"tok_s": 1, "tpot_ms": 9.8}, {"tok_s": 2}]}
                ],
            }
        ]
    }


def test_a_v2_report_reads_its_itl_as_tpot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A report written by envforge before /3 (schema /2, its 'itl_ms' = TPOT) still reads and compares."""
    doc = json.loads(V2_REPORT.read_text())
    assert doc["schema"] == "envforge.bench/2"
    old = doc["data"]["servers"][0]["levels"][0]
    new = read_report(V2_REPORT).servers[0].levels[0]
    assert new.tpot_ms is not None and new.tpot_ms.as_dict() == old["itl_ms"]
    assert new.repeats[0].tpot_ms == old["repeats"][0]["itl_ms"] and new.latency is None
    v4 = v1_as_v4(tmp_path, "vllm-cpu-draft-model.json")
    assert main(["bench", "compare", str(V2_REPORT), str(v4), "--allow-different-env", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["data"]["rows"]
    assert [(r["server"], r["ratio"]) for r in rows] == [
        (s, 1.0) for s in ("baseline", "draft-model", "ngram") for _ in (1, 2, 4)
    ]


def test_compare_refuses_an_unknown_schema_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(V2_REPORT.read_text())
    doc["schema"] = "envforge.bench/5"
    future = tmp_path / "future.json"
    future.write_text(json.dumps(doc))
    assert main(["bench", "compare", str(V2_REPORT), str(future), "--allow-different-env"]) == 2
    assert (
        f"error: {future} is not an envforge bench report (schema 'envforge.bench/5', expected "
        "'envforge.bench/4', 'envforge.bench/3', 'envforge.bench/2' or 'envforge.bench/1')"
    ) in capsys.readouterr().err


def test_upgrade_v3_says_the_prompts_came_from_a_prompt_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A /3 report (written before datasets) reads as a /4 report of a prompt file, so it compares with
    one without a 'different settings' line for the dataset."""
    assert upgrade_v3({"config": {"model": "m"}, "servers": []}) == {
        "config": {"model": "m", "dataset": {"name": "prompts"}},
        "servers": [],
    }
    assert upgrade_v3({"config": {"dataset": {"name": "random"}}}) == {"config": {"dataset": {"name": "random"}}}
    assert upgrade_v3({"config": None}) == {"config": None}
    v4 = v1_as_v4(tmp_path, "vllm-cpu-draft-model.json")
    doc = json.loads(v4.read_text())
    assert doc["schema"] == "envforge.bench/4" and doc["data"]["config"]["dataset"] == {"name": "prompts"}
    doc["schema"], v3 = "envforge.bench/3", tmp_path / "v3.json"
    del doc["data"]["config"]["dataset"]
    v3.write_text(json.dumps(doc))
    assert read_report(v3).config["dataset"] == {"name": "prompts"}
    assert main(["bench", "compare", str(v3), str(v4), "--allow-different-env"]) == 0
    assert "different settings" not in capsys.readouterr().err


def test_cli_compares_a_v1_and_a_v4_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1, v2 = DOCS / "vllm-cpu-draft-model.json", v1_as_v4(tmp_path, "vllm-cpu-draft-model.json")
    assert main(["bench", "compare", str(v1), str(v2), "--allow-different-env", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["data"]["rows"]
    assert [(r["server"], r["concurrency"], r["ratio"], r["verdict"]) for r in rows] == [
        (s, c, 1.0, "no clear change") for s in ("baseline", "draft-model", "ngram") for c in (1, 2, 4)
    ]
    assert (
        main(
            [
                "bench",
                "compare",
                str(DOCS / "cpu-demo.json"),
                str(DOCS / "cpu-demo-b.json"),
                "--allow-different-env",
                "--json",
            ]
        )
        == 0
    )
    c = json.loads(capsys.readouterr().out)["data"]
    assert [(r["server"], r["concurrency"]) for r in c["rows"]] == [("baseline", n) for n in (1, 2, 4, 8)]
    assert main(["bench", "compare", str(v1), str(v2)]) == 2  # empty fingerprints: refused, as for /2 pairs


def test_a_v3_report_reads_its_levels_at_the_run_s_request_rate(tmp_path: Path) -> None:
    """/3 kept one open-loop rate for the whole run in config; /4 keeps it per level (a sweep has many)."""
    rep = {"tok_s": 1.0, "wall_s": 1.0, "requests": 1, "output_tokens": 1, "e2e_ms": 1.0}
    data = {
        "config": {"request-rate": 20.0},
        "servers": [
            {"name": "a", "levels": [{"concurrency": 2, "repeats": [rep]}, {"concurrency": 4, "repeats": [rep]}]}
        ],
    }
    assert upgrade_v3(data)["servers"][0]["levels"] == [
        {"concurrency": 2, "request_rate": 20.0, "repeats": [rep]},
        {"concurrency": 4, "request_rate": 20.0, "repeats": [rep]},
    ]
    p = tmp_path / "v3.json"
    p.write_text(json.dumps({"schema": "envforge.bench/3", "data": data}))
    r = read_report(p)
    assert [(lv.concurrency, lv.request_rate, lv.server_metrics) for lv in r.servers[0].levels] == [
        (2, 20.0, None),
        (4, 20.0, None),
    ]
    assert r.servers[0].level(2, 20.0) is r.servers[0].levels[0] and r.servers[0].level(2) is None
    assert (r.sweep, r.servers[0].server_metrics) == ((), "not scraped")
    closed = upgrade_v3({"config": {"request-rate": None}, "servers": [{"name": "a", "levels": [{"concurrency": 1}]}]})
    assert closed["servers"][0]["levels"] == [{"concurrency": 1, "request_rate": None}]
    p.write_text(json.dumps({"schema": SCHEMA, "data": {**data, "sweep": {}}}))
    with pytest.raises(InputError, match="malformed bench report: TypeError: 'sweep' must be an array"):
        read_report(p)
