"""Reports: per-level results, break-even, JSON round trip, compare and its refusal."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.report import (
    SCHEMA,
    BenchReport,
    ServerResult,
    break_even_rows,
    compare,
    level_result,
    read_report,
)
from envforge.cli import main
from envforge.cli.output import envelope
from envforge.errors import InputError
from envforge.fingerprint import Fingerprint

FP = Fingerprint("sha256:aa", None, "pcie", "sha256:bb", "3.12", "580.65", "RTX PRO 6000", 8, "12.0")


def run(c: int, wall_s: float, n: int, *, tokens: int = 100, itl_s: float = 0.0122, verify: int | None = None,
        decode_s: float = 1.0) -> LevelRun:
    r = RequestResult(ok=True, output_tokens=tokens, e2e_s=wall_s, ttft_s=0.05, itl_s=itl_s, decode_s=decode_s,
                      verify_steps=verify)
    return LevelRun(c, tuple(r for _ in range(n)), wall_s)


def server(name: str, speculative: bool, walls: list[float], **kw: object) -> ServerResult:
    lv = level_result(1, [run(1, w, 2, **kw) for w in walls])  # type: ignore[arg-type]
    return ServerResult(name, speculative, "http://127.0.0.1:30000", None, None, (lv,))


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
    assert c.env_differences == () and c.only_in_a == () and c.only_in_b == ()


def test_compare_refuses_different_fingerprints_and_lists_them() -> None:
    other = replace(FP, lock_digest="sha256:cc", driver="590.10")
    with pytest.raises(InputError) as exc:
        compare(report(), report(fp=other))
    assert exc.value.message == ("the reports come from different environments; their numbers are not comparable:\n"
                                 "  lock_digest: sha256:aa != sha256:cc\n  driver: 580.65 != 590.10")
    assert exc.value.hint == "compare anyway with --allow-different-env"
    allowed = compare(report(), report(fp=other), allow_different_env=True)
    assert allowed.env_differences == ("lock_digest: sha256:aa != sha256:cc", "driver: 580.65 != 590.10")


def test_cli_compare_refuses_then_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(envelope("bench", report().as_dict())))
    b.write_text(json.dumps(envelope("bench", report(fp=replace(FP, gpu="H200")).as_dict())))
    assert main(["bench", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "error: the reports come from different environments" in err and "gpu: RTX PRO 6000 != H200" in err
    assert main(["bench", "compare", str(a), str(b), "--allow-different-env"]) == 0
    out, err = capsys.readouterr()
    assert "warning: different environments (allowed): gpu: RTX PRO 6000 != H200" in err
    assert "baseline" in out and "1.000" in out and "no clear change" in out
    assert main(["bench", "compare", str(a), str(a), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.bench-compare/1" and doc["data"]["rows"][0]["ratio"] == 1.0
