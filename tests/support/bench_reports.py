"""Builders of bench results and reports for the result, report and compare tests (no server)."""

from __future__ import annotations

from dataclasses import replace

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.report import BenchReport
from envforge.bench.breakeven import break_even_rows
from envforge.bench.result import LevelResult, ServerResult, level_result
from envforge.bench.stats import Summary
from envforge.env.fingerprint import Fingerprint

FP = Fingerprint("sha256:aa", None, "pcie", "sha256:bb", "3.12", "580.65", "RTX PRO 6000", 8, "12.0")


def run(
    c: int,
    wall_s: float,
    n: int,
    *,
    tokens: int = 100,
    itl_s: float = 0.0122,
    verify: int | None = None,
    decode_s: float = 1.0,
) -> LevelRun:
    r = RequestResult(
        ok=True, output_tokens=tokens, e2e_s=wall_s, ttft_s=0.05, tpot_s=itl_s, decode_s=decode_s, verify_steps=verify
    )
    return LevelRun(c, tuple(r for _ in range(n)), wall_s)


def server(name: str, speculative: bool, walls: list[float], **kw: object) -> ServerResult:
    lv = level_result(1, [run(1, w, 2, **kw) for w in walls])  # type: ignore[arg-type]
    return ServerResult(name, speculative, "http://127.0.0.1:30000", None, None, (lv,), {})


def report(fp: Fingerprint = FP, walls: list[float] = [2.0, 2.1, 1.9]) -> BenchReport:  # noqa: B006
    base = server("baseline", False, walls)
    # 100 tokens in 40 verify steps over 1.2 s of decode: accept 2.5, cycle 30 ms
    spec = server("eagle3", True, walls, verify=40, decode_s=1.2)
    return BenchReport(fp, {"model": "m"}, (base, spec), break_even_rows([base, spec]))


def ok(tokens: int = 100, **kw: object) -> RequestResult:
    return RequestResult(ok=True, output_tokens=tokens, e2e_s=1.0, ttft_s=0.05, tpot_s=0.01, decode_s=0.99, **kw)  # type: ignore[arg-type]


def bad(message: str, status: int | None) -> RequestResult:
    return RequestResult(ok=False, output_tokens=0, e2e_s=0.5, error=message, status=status, finish="abort")


def with_env(r: BenchReport, env: dict[str, str] | None, fp: Fingerprint = FP) -> BenchReport:
    return replace(r, fingerprint=fp, servers=tuple(replace(s, env=env) for s in r.servers))


def summary(lo: float, med: float, hi: float) -> Summary:
    return Summary(3, med, med, lo, hi, lo, hi)


def one_level(tok: Summary | None, failed: int = 0) -> BenchReport:
    lv = LevelResult(1, (), tok, None, None, None, None, None, failed)
    return BenchReport(FP, {}, (ServerResult("s", False, "u", None, None, (lv,), {}),), ())


def vllm_server(name: str, speculative: bool, window: object, failed: bool = False) -> ServerResult:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1)
    results = (r, bad("aborted by the server: x", 503)) if failed else (r,)
    lv = level_result(1, [LevelRun(1, results, 0.25)], [window])  # type: ignore[list-item]
    return ServerResult(name, speculative, "u", None, None, (lv,), {})
