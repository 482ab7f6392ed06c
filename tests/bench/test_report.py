"""Reports: the JSON (schema envforge.bench/2) pinned, reading /2 and /1 reports back, warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.bench_reports import FP, ok, report

from envforge.bench.client import LevelRun
from envforge.bench.report import SCHEMA, SCHEMA_VERSION, BenchReport, read_report, report_warnings
from envforge.bench.result import Failure, LevelResult, RepeatResult, ServerResult, level_result
from envforge.bench.stats import Summary
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
    assert exc.value.message == (f"{tmp_path / 'verify.json'} is not an envforge bench report "
                                 f"(schema 'envforge.verify/1', expected 'envforge.bench/2' or 'envforge.bench/1')")


def test_report_json_keys_are_pinned() -> None:
    base = ServerResult("baseline", False, "http://127.0.0.1:1", ("py", "-m", "x"), 1.234, (), {"NCCL_X": "1"},
                        False, "flushed before each repeat (POST /flush_cache)")
    r = BenchReport(FP, {"model": "m"}, (base,), (), ("w",), (Failure("baseline", 1, 2, "m", 200),),
                    {"prompts": "p", "order": "sequential"})
    assert r.as_dict() == {
        "fingerprint": {"lock_digest": "sha256:aa", "patch_manifest_digest": None, "env_profile": "pcie",
                        "env_profile_digest": "sha256:bb", "python": "3.12", "driver": "580.65",
                        "gpu": "RTX PRO 6000", "gpu_count": 8, "compute_capability": "12.0", "platform": None,
                        "effective_env_digest": None},
        "config": {"model": "m"}, "method": {"prompts": "p", "order": "sequential"},
        "servers": [{"name": "baseline", "speculative": False, "url": "http://127.0.0.1:1", "argv": ["py", "-m", "x"],
                     "load_s": 1.23, "env": {"NCCL_X": "1"}, "ignore_eos": False,
                     "cache": "flushed before each repeat (POST /flush_cache)", "levels": []}],
        "break_even": [], "failures": [{"server": "baseline", "concurrency": 1, "repeat": 2, "status": 200,
                                        "message": "m"}],
        "warnings": ["w"]}
    assert BenchReport.from_dict(r.as_dict()).as_dict() == r.as_dict()
    (be,) = report().break_even
    assert be.as_dict() == {"baseline": "baseline", "speculative": "eagle3", "concurrency": 1, "decode_step_ms": 12.2,
                            "verify_cycle_ms": 30.0, "break_even_accept_length": 2.459, "accept_length": 2.5,
                            "pays": True}


def test_report_warnings_are_pinned() -> None:
    url = ServerResult("url", True, "http://h:1", None, None, (level_result(1, [LevelRun(1, (ok(token_count="chunks"),),
                                                                                         1.0)], speculative=True),),
                       None, False)
    started = ServerResult("baseline", False, "http://h:1", (), 1.0, (), {}, True)
    assert report_warnings(Fingerprint(None, None, None, None), [url, started]) == [
        "the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url without "
        "ENV): these numbers are tied to no environment state, and `bench compare` never calls two such reports "
        "the same environment",
        "server 'url': not started by envforge; the variables it runs with are unknown",
        "server 'url': output tokens counted as chunks (the server sent no usage); exact only when every chunk "
        "holds one token",
        "server 'url', concurrency 1: tokens were counted as chunks (the server sent no usage) and one chunk of a "
        "speculative server carries a whole verify step: no tok/s or ITL",
        "server 'url': the server rejected ignore_eos; output lengths are not forced, and a request that stops "
        "early fails"]
    assert report_warnings(FP, [started]) == []


REPORT_DOC = {
    "fingerprint": {"lock_digest": "sha256:aa", "gpu_count": 8},
    "config": {"model": "m"}, "method": {"order": "interleaved"},
    "servers": [{
        "name": "eagle3", "speculative": True, "url": "http://h:1", "argv": ["py", "-m", "sglang"], "load_s": 61.5,
        "env": {"NCCL_BUFFSIZE": 131072}, "ignore_eos": False, "cache": "not flushed: POST /flush_cache answered HTTP 404",
        "levels": [{"concurrency": 4, "failed_requests": 2, "token_count": "chunks", "refused": "why",
                    "tok_s": {"n": 2, "median": 10, "mean": 11, "min": 9, "max": 13, "ci_low": 1, "ci_high": 21},
                    "ttft_ms": None, "itl_ms": None, "e2e_ms": None, "accept_length": 2.5, "verify_cycle_ms": 30,
                    "repeats": [{"tok_s": 10, "wall_s": 2, "requests": 4, "failed": 2, "output_tokens": 20,
                                 "token_count": "chunks", "ttft_ms": 5, "itl_ms": None, "e2e_ms": 7,
                                 "verify_steps": 8, "decode_s": 1.5}]}]}],
    "failures": [{"server": "eagle3", "concurrency": 4, "repeat": 1, "status": None, "message": "cancelled"}],
    "warnings": ["w1", "w2"]}


def test_report_from_dict_reads_every_key() -> None:
    r = BenchReport.from_dict(REPORT_DOC)
    assert r.fingerprint == Fingerprint("sha256:aa", None, None, None, gpu_count=8)
    assert (r.config, r.method, r.warnings) == ({"model": "m"}, {"order": "interleaved"}, ("w1", "w2"))
    assert r.failures == (Failure("eagle3", 4, 1, "cancelled", None),)
    (s,) = r.servers
    assert (s.name, s.speculative, s.url, s.argv, s.load_s, s.env, s.ignore_eos, s.cache) == (
        "eagle3", True, "http://h:1", ("py", "-m", "sglang"), 61.5, {"NCCL_BUFFSIZE": "131072"}, False,
        "not flushed: POST /flush_cache answered HTTP 404")
    (lv,) = s.levels
    assert lv == LevelResult(4, (RepeatResult(10.0, 2.0, 4, 20, 5.0, None, 7.0, 8, 1.5, 2, "chunks"),),
                             Summary(2, 10.0, 11.0, 9.0, 13.0, 1.0, 21.0), None, None, None, 2.5, 30, 2, "chunks", "why")
    assert s.level(4) is lv and s.level(8) is None
    bare = BenchReport.from_dict({"servers": [{"name": "x", "levels": [{"concurrency": 1, "tok_s": None, "repeats": [
        {"tok_s": 1, "wall_s": 1, "requests": 1, "output_tokens": 1, "e2e_ms": 1}]}]}]})
    (bs,) = bare.servers
    assert (bs.speculative, bs.url, bs.argv, bs.load_s, bs.env, bs.ignore_eos, bs.cache) == (
        False, "", None, None, None, True, "not flushed")
    (blv,) = bs.levels
    assert (blv.failed_requests, blv.token_count, blv.refused, blv.counters, blv.tok_s) == (0, "server", None, None,
                                                                                             None)
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
    assert exc.value.message == (f"{p} is not an envforge bench report (schema 'list', "
                                 "expected 'envforge.bench/2' or 'envforge.bench/1')")
    assert exc.value.hint == "write one with `envforge bench --output FILE`"
    p.write_text(json.dumps({"schema": SCHEMA, "data": []}))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == (f"{p} is not an envforge bench report (schema 'envforge.bench/2', expected "
                                 "'envforge.bench/2' or 'envforge.bench/1')")
    p.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message in (f"{p}: not a bench report: arrays or objects nested too deeply",
                                 f"{p} is not an envforge bench report (schema 'list', expected 'envforge.bench/2' "
                                 "or 'envforge.bench/1')")
    p.write_text('{"schema": "envforge.bench/1",\n "data": x}')
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p}:2: not valid JSON: Expecting value"


def test_read_report_refuses_wrong_types_where_compare_would_crash(tmp_path: Path) -> None:
    """Found by mutating a real report's fields (envforge bench --url against a closed port): a server
    name that is a list crashed `bench compare` (exit 70, TypeError: unhashable type); a "NaN" or
    1e999 tok/s was read as a number. Each is now exit 2 naming the file and the key."""
    base = {"schema": SCHEMA, "data": {"servers": [{"name": "a", "levels": [{"concurrency": 1, "repeats": [
        {"tok_s": 1.0, "wall_s": 1.0, "requests": 1, "output_tokens": 1, "e2e_ms": 1.0}]}]}]}}
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
    for key, value, reason in [("servers", {}, "TypeError: 'servers' must be an array"),
                               ("config", [], "TypeError: 'config' must be an object"),
                               ("warnings", [1], "TypeError: 'warnings' must be an array of strings")]:
        doc = json.loads(json.dumps(base))
        doc["data"][key] = value
        p.write_text(json.dumps(doc))
        with pytest.raises(InputError) as exc:
            read_report(p)
        assert exc.value.message == f"{p}: malformed bench report: {reason}"
