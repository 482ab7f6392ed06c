"""Reports: per-level results, break-even, JSON round trip, compare and its refusal."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.report import (
    REFUSED_CHUNKS,
    SCHEMA,
    BenchReport,
    Failure,
    LevelResult,
    RepeatResult,
    ServerResult,
    break_even_rows,
    compare,
    failures_of,
    level_result,
    read_report,
    repeat_result,
    report_warnings,
)
from envforge.bench.stats import Summary
from envforge.cli import main
from envforge.cli.output import envelope
from envforge.core.errors import InputError
from envforge.env.fingerprint import Fingerprint

FP = Fingerprint("sha256:aa", None, "pcie", "sha256:bb", "3.12", "580.65", "RTX PRO 6000", 8, "12.0")


def run(c: int, wall_s: float, n: int, *, tokens: int = 100, itl_s: float = 0.0122, verify: int | None = None,
        decode_s: float = 1.0) -> LevelRun:
    r = RequestResult(ok=True, output_tokens=tokens, e2e_s=wall_s, ttft_s=0.05, itl_s=itl_s, decode_s=decode_s,
                      verify_steps=verify)
    return LevelRun(c, tuple(r for _ in range(n)), wall_s)


def server(name: str, speculative: bool, walls: list[float], **kw: object) -> ServerResult:
    lv = level_result(1, [run(1, w, 2, **kw) for w in walls])  # type: ignore[arg-type]
    return ServerResult(name, speculative, "http://127.0.0.1:30000", None, None, (lv,), {})


def report(fp: Fingerprint = FP, walls: list[float] = [2.0, 2.1, 1.9]) -> BenchReport:  # noqa: B006
    base = server("baseline", False, walls)
    # 100 tokens in 40 verify steps over 1.2 s of decode: accept 2.5, cycle 30 ms
    spec = server("eagle3", True, walls, verify=40, decode_s=1.2)
    return BenchReport(fp, {"model": "m"}, (base, spec), break_even_rows([base, spec]))


def test_level_result_tok_s_accept_length_and_verify_cycle() -> None:
    lv = level_result(4, [run(4, 2.0, 4, verify=40, decode_s=1.2), run(4, 4.0, 4, verify=40, decode_s=1.2)])
    assert lv.tok_s.median == pytest.approx((200 + 100) / 2)  # 400 tokens over 2 s and over 4 s
    assert lv.accept_length == pytest.approx(2.5)
    assert lv.verify_cycle_ms == pytest.approx(30.0)
    assert lv.itl_ms is not None and lv.itl_ms.median == pytest.approx(12.2)


def test_break_even_row_from_measured_step_and_cycle() -> None:
    (row,) = report().break_even
    assert (row.baseline, row.speculative, row.concurrency) == ("baseline", "eagle3", 1)
    assert row.decode_step_ms == pytest.approx(12.2) and row.verify_cycle_ms == pytest.approx(30.0)
    assert round(row.break_even, 2) == 2.46 and row.accept_length == pytest.approx(2.5) and row.pays


def test_report_round_trips_through_json(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(envelope("bench", report().as_dict())))
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
                                 f"(schema 'envforge.verify/1', expected '{SCHEMA}')")


def test_compare_same_environment_gives_ratios_with_intervals() -> None:
    a, b = report(), report(walls=[1.0, 1.05, 0.95])  # B twice as fast
    c = compare(a, b)
    rows = {r.server: r for r in c.rows}
    assert rows["baseline"].ratio == pytest.approx(2.0)
    assert rows["baseline"].ratio_low > 1.0 and rows["baseline"].verdict == "faster"
    assert compare(a, a).rows[0].verdict == "no clear change"
    assert compare(b, a).rows[0].verdict == "slower"
    assert c.env_differences == () and c.only_in_a == () and c.only_in_b == () and c.not_compared == ()


def test_compare_refuses_different_fingerprints_and_lists_them() -> None:
    other = replace(FP, lock_digest="sha256:cc", driver="590.10")
    with pytest.raises(InputError) as exc:
        compare(report(), report(fp=other))
    assert exc.value.message == ("the reports come from different or unknown environments; their numbers are not "
                                 "comparable:\n  lock_digest: sha256:aa != sha256:cc\n  driver: 580.65 != 590.10")
    assert exc.value.hint == "compare anyway with --allow-different-env"
    allowed = compare(report(), report(fp=other), allow_different_env=True)
    assert allowed.env_differences == ("lock_digest: sha256:aa != sha256:cc", "driver: 580.65 != 590.10")


def test_cli_compare_refuses_then_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(envelope("bench", report().as_dict())))
    b.write_text(json.dumps(envelope("bench", report(fp=replace(FP, gpu="H200")).as_dict())))
    assert main(["bench", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "error: the reports come from different or unknown environments" in err
    assert "gpu: RTX PRO 6000 != H200" in err
    assert main(["bench", "compare", str(a), str(b), "--allow-different-env"]) == 0
    out, err = capsys.readouterr()
    assert "warning: different environments (allowed): gpu: RTX PRO 6000 != H200" in err
    assert "baseline" in out and "1.000" in out and "no clear change" in out
    assert main(["bench", "compare", str(a), str(a), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.bench-compare/1" and doc["data"]["rows"][0]["ratio"] == 1.0


def ok(tokens: int = 100, **kw: object) -> RequestResult:
    return RequestResult(ok=True, output_tokens=tokens, e2e_s=1.0, ttft_s=0.05, itl_s=0.01, decode_s=0.99,
                         **kw)  # type: ignore[arg-type]


def bad(message: str, status: int | None) -> RequestResult:
    return RequestResult(ok=False, output_tokens=0, e2e_s=0.5, error=message, status=status, finish="abort")


def test_failed_requests_leave_the_level_without_figures_and_are_listed() -> None:
    runs = [LevelRun(4, (ok(), bad("aborted by the server: overloaded", 503)), 2.0), LevelRun(4, (ok(), ok()), 2.0)]
    lv = level_result(4, runs)
    assert lv.as_dict() == {
        "concurrency": 4, "failed_requests": 1, "token_count": "server", "refused": None, "tok_s": None,
        "ttft_ms": None, "itl_ms": None, "e2e_ms": None, "accept_length": None, "verify_cycle_ms": None,
        "repeats": [
            {"tok_s": 50.0, "wall_s": 2.0, "requests": 2, "failed": 1, "output_tokens": 100, "token_count": "server",
             "ttft_ms": 50.0, "itl_ms": 10.0, "e2e_ms": 1000.0, "verify_steps": None, "decode_s": 0.0},
            {"tok_s": 100.0, "wall_s": 2.0, "requests": 2, "failed": 0, "output_tokens": 200,
             "token_count": "server", "ttft_ms": 50.0, "itl_ms": 10.0, "e2e_ms": 1000.0, "verify_steps": None,
             "decode_s": 0.0}]}
    (f,) = failures_of("eagle3", runs[0], 1)
    assert f.as_dict() == {"server": "eagle3", "concurrency": 4, "repeat": 1, "status": 503,
                           "message": "aborted by the server: overloaded"}
    assert f.line() == "server 'eagle3', concurrency 4, repeat 1: aborted by the server: overloaded (status 503)"
    assert Failure("s", 1, 0, "x", None).line() == "server 's', warm-up: x"
    assert Failure.from_dict(f.as_dict()) == f


def test_speculative_chunk_counts_refuse_tok_s_and_itl() -> None:
    runs = [LevelRun(1, (ok(token_count="chunks"),), 1.0)]
    spec = level_result(1, runs, speculative=True)
    assert (spec.tok_s, spec.itl_ms, spec.token_count) == (None, None, "chunks")
    assert spec.refused == ("tokens were counted as chunks (the server sent no usage) and one chunk of a "
                            "speculative server carries a whole verify step: no tok/s or ITL")
    assert spec.ttft_ms is not None and spec.ttft_ms.median == 50.0
    plain = level_result(1, runs)
    assert plain.refused is None and plain.tok_s is not None and plain.tok_s.median == 100.0
    mixed = level_result(1, [LevelRun(1, (ok(), ok(token_count="chunks")), 1.0)])
    assert mixed.token_count == "mixed"


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


def with_env(r: BenchReport, env: dict[str, str] | None, fp: Fingerprint = FP) -> BenchReport:
    return replace(r, fingerprint=fp, servers=tuple(replace(s, env=env) for s in r.servers))


def test_compare_refuses_different_effective_variables_and_empty_fingerprints() -> None:
    a = with_env(report(), {"NCCL_MAX_NCHANNELS": "2"})
    b = with_env(report(), {"NCCL_MAX_NCHANNELS": "32", "NCCL_ALGO": "Ring"})
    with pytest.raises(InputError) as exc:
        compare(a, b)
    assert exc.value.message == (
        "the reports come from different or unknown environments; their numbers are not comparable:\n"
        "  server 'baseline': NCCL_ALGO: (unset) != Ring\n"
        "  server 'baseline': NCCL_MAX_NCHANNELS: 2 != 32\n"
        "  server 'eagle3': NCCL_ALGO: (unset) != Ring\n"
        "  server 'eagle3': NCCL_MAX_NCHANNELS: 2 != 32")
    empty = Fingerprint(None, None, None, None)
    e = with_env(report(), {}, empty)
    with pytest.raises(InputError) as exc:
        compare(e, e)
    assert exc.value.message.splitlines()[1:] == [
        "  report A: the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url "
        "without ENV): these numbers are tied to no environment state, and `bench compare` never calls two such "
        "reports the same environment",
        "  report B: the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url "
        "without ENV): these numbers are tied to no environment state, and `bench compare` never calls two such "
        "reports the same environment"]
    u = with_env(report(), None)
    with pytest.raises(InputError) as exc:
        compare(a, u)
    assert exc.value.message.splitlines()[1:] == [
        "  server 'baseline': the variables it ran with are unknown in B",
        "  server 'eagle3': the variables it ran with are unknown in B"]
    assert compare(a, a).env_differences == ()
    allowed = compare(e, u, allow_different_env=True)
    assert allowed.env_differences[-2:] == ("server 'baseline': the variables it ran with are unknown in B",
                                            "server 'eagle3': the variables it ran with are unknown in B")
    assert allowed.env_differences[1] == "lock_digest: unknown != sha256:aa"
    assert allowed.rows[0].verdict == "no clear change"


def summary(lo: float, med: float, hi: float) -> Summary:
    return Summary(3, med, med, lo, hi, lo, hi)


def one_level(tok: Summary | None, failed: int = 0) -> BenchReport:
    lv = LevelResult(1, (), tok, None, None, None, None, None, failed)
    return BenchReport(FP, {}, (ServerResult("s", False, "u", None, None, (lv,), {}),), ())


@pytest.mark.parametrize(("a", "b", "verdict"), [
    (summary(95, 100, 105), summary(113.5, 118, 122.5), "faster"),      # low 1.081 ... but min-change below
    (summary(99, 100, 101), summary(112, 118, 124), "faster"),          # low 1.1089 > 1.10
    (summary(99, 100, 101), summary(110, 118, 124), "no clear change"),  # low 1.0891: drift could do that
    (summary(99, 100, 101), summary(80, 85, 89), "slower"),             # high 0.899 < 1/1.1 = 0.909
    (summary(99, 100, 101), summary(80, 85, 91.8), "no clear change"),  # high 0.9273
])
def test_verdict_needs_the_whole_interval_beyond_the_drift_margin(a: Summary, b: Summary, verdict: str) -> None:
    min_change = 0.0 if a.median == 100 and a.min == 95 else 0.10
    (row,) = compare(one_level(a), one_level(b), min_change=min_change).rows
    assert row.verdict == verdict


def test_drift_like_the_field_is_no_clear_change() -> None:
    """Two back-to-back runs of one server gave "1.18x [1.08, 1.28]": with the default margin, no change."""
    c = compare(one_level(summary(97.5, 100, 102.5)), one_level(summary(110.7, 118, 125.3)))
    (row,) = c.rows
    assert (round(row.ratio_low, 3), round(row.ratio_high, 3), row.verdict) == (1.08, 1.285, "no clear change")
    assert c.as_dict()["min_change"] == 0.1
    assert compare(one_level(summary(97.5, 100, 102.5)), one_level(summary(110.7, 118, 125.3)),
                   min_change=0.05).rows[0].verdict == "faster"


def test_compare_skips_levels_without_figures_and_says_why() -> None:
    c = compare(one_level(summary(99, 100, 101)), one_level(None, failed=2))
    assert c.rows == () and c.not_compared == ("s @ 1: 2 failed requests in B",)
    c = compare(one_level(None), one_level(summary(99, 100, 101)))
    assert c.not_compared == ("s @ 1: no tok/s in A (refused)",)
    assert c.as_dict()["not_compared"] == ["s @ 1: no tok/s in A (refused)"]


def test_level_result_with_vllm_counters_is_pinned() -> None:
    from envforge.bench.metrics import EngineWindow, SpecDecodeStats

    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, itl_s=0.004, decode_s=0.1)
    windows = [EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))),
               EngineWindow(1, 32, 12, 0.12, SpecDecodeStats(8, 24, 16, (8, 5, 3)))]
    lv = level_result(1, [LevelRun(1, (r,), 0.25), LevelRun(1, (r,), 0.5)], windows)
    d = lv.as_dict()
    # accept 1 + 36 / 16; cycle = the engine's decode step 0.22 s / 22 steps; (64 - 2) / 22 tokens a step
    assert (d["accept_length"], d["verify_cycle_ms"], d["failed_requests"], d["refused"]) == (3.25, 10.0, 0, None)
    assert d["tok_s"] == {"n": 2, "median": 96.0, "mean": 96.0, "min": 64.0, "max": 128.0, "ci_low": 0.0,
                          "ci_high": 502.5986}  # 96 + 12.7062 x 32
    assert d["vllm"] == {"source": "vllm /metrics", "requests": 2, "generation_tokens": 64, "decode_steps": 22,
                         "decode_s": 0.22, "decode_step_ms": 10.0, "tokens_per_step": 2.8182,
                         "spec_decode": {"drafts": 16, "draft_tokens": 48, "accepted": 36,
                                         "per_position_accepted": [16, 12, 8], "mean_acceptance_length": 3.25,
                                         "draft_acceptance_rate": 0.75, "per_position_rates": [1.0, 0.75, 0.5]}}
    assert d["repeats"][0] == {
        "tok_s": 128.0, "wall_s": 0.25, "requests": 1, "failed": 0, "output_tokens": 32, "token_count": "server",
        "ttft_ms": 50.0, "itl_ms": 4.0, "e2e_ms": 200.0, "verify_steps": 8, "decode_s": 0.1,
        "vllm": {"source": "vllm /metrics", "requests": 1, "generation_tokens": 32, "decode_steps": 10,
                 "decode_s": 0.1, "decode_step_ms": 10.0, "tokens_per_step": 3.1,
                 "spec_decode": {"drafts": 8, "draft_tokens": 24, "accepted": 20, "per_position_accepted": [8, 7, 5],
                                 "mean_acceptance_length": 3.5, "draft_acceptance_rate": 0.8333,
                                 "per_position_rates": [1.0, 0.875, 0.625]}}}
    assert LevelResult.from_dict(d).as_dict() == d
    assert LevelResult.from_dict(d).vllm == EngineWindow(2, 64, 22, 0.22, SpecDecodeStats(16, 48, 36, (16, 12, 8)))


def test_sglang_level_accept_length_and_cycle_only_from_requests_with_verify_steps() -> None:
    spec = RequestResult(ok=True, output_tokens=30, e2e_s=1.0, ttft_s=0.1, itl_s=0.01, decode_s=0.3, verify_steps=10)
    plain = RequestResult(ok=True, output_tokens=50, e2e_s=1.0, ttft_s=0.1, itl_s=0.01, decode_s=0.7)
    lv = level_result(2, [LevelRun(2, (spec, plain), 1.0)])
    assert (lv.accept_length, lv.verify_cycle_ms) == (8.0, 30.0)  # repeat: 80 tokens / 10 steps; 0.3 s / 10
    rep = lv.repeats[0]
    assert (rep.verify_steps, rep.decode_s, rep.output_tokens, rep.requests) == (10, 0.3, 80, 2)
    none = level_result(2, [LevelRun(2, (plain,), 1.0)])
    assert (none.accept_length, none.verify_cycle_ms, none.repeats[0].verify_steps) == (None, None, None)
    empty = repeat_result(LevelRun(1, (), 0.0))
    assert (empty.tok_s, empty.e2e_ms, empty.ttft_ms, empty.token_count) == (0.0, 0.0, None, "server")


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
    assert (blv.failed_requests, blv.token_count, blv.refused, blv.vllm, blv.tok_s) == (0, "server", None, None,
                                                                                             None)
    assert blv.repeats == (RepeatResult(1.0, 1.0, 1, 1, None, None, 1.0, None, 0.0, 0, "server"),)
    assert (bare.failures, bare.warnings, bare.method, bare.config) == ((), (), {}, {})
    assert bare.fingerprint == Fingerprint(None, None, None, None)


def test_comparison_json_is_pinned() -> None:
    c = compare(one_level(summary(99, 100, 101)), one_level(summary(112, 118, 124)))
    assert c.as_dict() == {
        "min_change": 0.1,
        "rows": [{"server": "s", "concurrency": 1, "a_tok_s": 100.0, "b_tok_s": 118.0, "ratio": 1.18,
                  "ratio_low": 1.1089, "ratio_high": 1.2525, "verdict": "faster"}],
        "env_differences": [], "config_differences": [], "only_in_a": [], "only_in_b": [], "not_compared": []}


def test_compare_zero_and_one_repeat_edges() -> None:
    zero = Summary(1, 0.0, 0.0, 0.0, 0.0, None, None)
    (row,) = compare(one_level(zero), one_level(summary(1, 2, 3))).rows
    assert (row.ratio, row.ratio_low, row.ratio_high, row.verdict) == (float("inf"), float("inf"), float("inf"),
                                                                       "faster")
    one = Summary(1, 100.0, 100.0, 100.0, 100.0, None, None)  # a single repeat: min..max bounds
    (row,) = compare(one_level(one), one_level(Summary(1, 80.0, 80.0, 80.0, 80.0, None, None))).rows
    assert (row.ratio, row.ratio_low, row.ratio_high, row.verdict) == (0.8, 0.8, 0.8, "slower")


def test_compare_lists_settings_and_levels_present_on_one_side() -> None:
    a = replace(report(), config={"model": "m", "repeats": 3})
    b = replace(report(), config={"model": "m", "repeats": 5, "seed": 1},
                servers=(replace(report().servers[0], levels=(replace(report().servers[0].levels[0], concurrency=4),)),))
    c = compare(a, b)
    assert c.config_differences == ("repeats: 3 != 5", "seed: None != 1")
    assert c.only_in_a == ("baseline @ 1", "eagle3 @ 1") and c.only_in_b == ("baseline @ 4",)
    assert c.rows == ()


def test_env_differences_name_the_side_whose_variables_are_unknown() -> None:
    known, unknown = with_env(report(), {"NCCL_X": "1"}), with_env(report(), None)
    assert compare(unknown, known, allow_different_env=True).env_differences == (
        "server 'baseline': the variables it ran with are unknown in A",
        "server 'eagle3': the variables it ran with are unknown in A")
    assert compare(unknown, unknown, allow_different_env=True).env_differences[0] == (
        "server 'baseline': the variables it ran with are unknown in A and B")
    fewer = replace(known, servers=known.servers[:1])
    assert compare(known, fewer).env_differences == ()


def test_read_report_malformed_and_nested(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"schema": SCHEMA, "data": {"servers": [{"levels": []}]}}))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p}: malformed bench report: KeyError: 'name'"
    p.write_text(json.dumps([1]))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p} is not an envforge bench report (schema 'list', expected 'envforge.bench/1')"
    assert exc.value.hint == "write one with `envforge bench --output FILE`"
    p.write_text(json.dumps({"schema": SCHEMA, "data": []}))
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p} is not an envforge bench report (schema 'envforge.bench/1', expected " \
                                "'envforge.bench/1')"
    p.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message in (f"{p}: not a bench report: arrays or objects nested too deeply",
                                 f"{p} is not an envforge bench report (schema 'list', expected 'envforge.bench/1')")
    p.write_text('{"schema": "envforge.bench/1",\n "data": x}')
    with pytest.raises(InputError) as exc:
        read_report(p)
    assert exc.value.message == f"{p}:2: not valid JSON: Expecting value"


def test_break_even_needs_a_baseline_and_measured_levels() -> None:
    base = server("baseline", False, [2.0])
    spec = server("eagle3", True, [2.0], verify=40, decode_s=1.2)
    assert break_even_rows([spec]) == ()
    assert break_even_rows([base]) == ()
    other = replace(spec, levels=(replace(spec.levels[0], concurrency=4),))
    assert break_even_rows([base, other]) == ()
    no_cycle = replace(spec, levels=(replace(spec.levels[0], verify_cycle_ms=None),))
    assert break_even_rows([base, no_cycle]) == ()
    slow = server("eagle3", True, [2.0], verify=40, decode_s=2.4)  # cycle 60 ms: break-even 4.92 > 2.5
    (row,) = break_even_rows([base, slow, server("second", False, [2.0])])
    assert (row.baseline, row.pays, round(row.break_even, 3)) == ("baseline", False, 4.918)
    assert row.as_dict() == {"baseline": "baseline", "speculative": "eagle3", "concurrency": 1,
                             "decode_step_ms": 12.2, "verify_cycle_ms": 60.0, "break_even_accept_length": 4.918,
                             "accept_length": 2.5, "pays": False}


def vllm_server(name: str, speculative: bool, window: object, failed: bool = False) -> ServerResult:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, itl_s=0.004, decode_s=0.1)
    results = (r, bad("aborted by the server: x", 503)) if failed else (r,)
    lv = level_result(1, [LevelRun(1, results, 0.25)], [window])  # type: ignore[list-item]
    return ServerResult(name, speculative, "u", None, None, (lv,), {})


def test_vllm_break_even_uses_engine_step_times_and_tokens_per_step() -> None:
    from envforge.bench.metrics import EngineWindow, SpecDecodeStats

    base = vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124))  # 4 ms a step
    # 32 tokens in 10 steps of 10 ms: 3.1 tokens a step against break-even 10 / 4 = 2.5
    spec = vllm_server("draft", True, EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([spec, base])
    assert row.as_dict() == {"baseline": "plain", "speculative": "draft", "concurrency": 1, "decode_step_ms": 4.0,
                             "verify_cycle_ms": 10.0, "break_even_accept_length": 2.5, "accept_length": 3.5,
                             "pays": True, "tokens_per_cycle": 3.1}
    slow = vllm_server("draft", True, EngineWindow(1, 32, 10, 0.14, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([base, slow])  # 14 ms a step: break-even 3.5 > 3.1 tokens a step
    assert (row.pays, round(row.break_even, 3), row.tokens_per_cycle) == (False, 3.5, 3.1)
    # no engine step time on one side: the ITL-based row (baseline ITL 4 ms; cycle = 0.1 s / 8 drafts)
    no_step = vllm_server("plain", False, EngineWindow(1, 32, None, None))
    (row,) = break_even_rows([no_step, spec])
    assert row.as_dict() == {"baseline": "plain", "speculative": "draft", "concurrency": 1, "decode_step_ms": 4.0,
                             "verify_cycle_ms": 10.0, "break_even_accept_length": 2.5, "accept_length": 3.5,
                             "pays": True}
    assert break_even_rows([vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124), failed=True), spec]) == ()
    no_tokens = vllm_server("draft", True, EngineWindow(1, None, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([base, no_tokens])
    assert row.tokens_per_cycle is None and row.decode_step_ms == 4.0 and "tokens_per_cycle" not in row.as_dict()


def test_vllm_levels_without_drafts_or_engine_step_time() -> None:
    from envforge.bench.metrics import EngineWindow, SpecDecodeStats

    (plain,) = vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124)).levels
    assert (plain.accept_length, plain.verify_cycle_ms, plain.vllm) == (None, None, EngineWindow(1, 32, 31, 0.124))
    assert plain.tok_s is not None and plain.tok_s.median == 128.0 and plain.itl_ms is not None
    (idle,) = vllm_server("d", True, EngineWindow(1, 32, 31, 0.124, SpecDecodeStats(0, 0, 0, (0, 0, 0)))).levels
    assert (idle.accept_length, idle.verify_cycle_ms, idle.repeats[0].verify_steps) == (None, None, 0)
    (no_step,) = vllm_server("d", True, EngineWindow(1, 32, None, None, SpecDecodeStats(8, 24, 20, (8, 7, 5)))).levels
    assert (no_step.accept_length, no_step.verify_cycle_ms) == (3.5, 12.5)  # 0.1 s of decode / 8 drafts
    (failed,) = vllm_server("d", True, EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))),
                            failed=True).levels
    assert (failed.tok_s, failed.accept_length, failed.vllm, failed.failed_requests) == (None, None, None, 1)
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, itl_s=0.004, decode_s=0.1,
                      token_count="chunks")
    refused = level_result(1, [LevelRun(1, (r,), 0.25)], [EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20))],
                           speculative=True)
    assert (refused.tok_s, refused.itl_ms, refused.accept_length, refused.refused) == (None, None, 3.5, REFUSED_CHUNKS)
    assert refused.ttft_ms is not None and refused.e2e_ms is not None and refused.token_count == "chunks"


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
