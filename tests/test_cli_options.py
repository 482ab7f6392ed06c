"""Every numeric option of every envforge command goes through the shared argparse types of
``envforge.cli.parser`` (``seconds``, ``integer``, ``PORT``): NaN, infinities, negative, zero and
out-of-range values are usage errors (exit 2) naming the option and what it takes; valid values,
large ones included, still parse. In-process (``envforge.cli.main``): a usage error is raised before
any handler runs, so nothing here starts Ray, uv or a server."""

from __future__ import annotations

import argparse
import pytest

from envforge.cli import build_parser, main
from envforge.cli.parser import PORT, integer, seconds

STEP_S = "must be a finite number of seconds from 1 to 1,000,000,000"
ANY_S = "must be a positive finite number of seconds (at most 1,000,000,000)"
PORT_RANGE = "must be a TCP port from 1 to 65535"

# (the command line up to the option, the option, what the error says it must be)
OPTIONS = [
    (["verify"], "--step-timeout", STEP_S),
    (["bench"], "--request-timeout", ANY_S),
    (["bench"], "--idle-timeout", ANY_S),
]
BAD_SECONDS = ["nan", "NaN", "inf", "-inf", "0", "-0", "-1", "1e-9", "1e10", "1e400", "x", ""]


@pytest.mark.parametrize("argv, option, must", OPTIONS, ids=[f"{i}-{a[0]}-{o}" for i, (a, o, _) in enumerate(OPTIONS)])
def test_every_time_option_refuses_what_is_not_a_finite_positive_number_of_seconds(
        argv: list[str], option: str, must: str, capsys: pytest.CaptureFixture[str]) -> None:
    for value in BAD_SECONDS if must != ANY_S else [v for v in BAD_SECONDS if v != "1e-9"]:  # bench: any s > 0
        assert main([*argv, f"{option}={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument {option}: {must}, got {value!r}"


INTEGERS = [
    (["bench"], "--port", PORT_RANGE, ["0", "65536", "inf"]),
    (["bench"], "--repeats", "must be an integer >= 1", ["0", "-3", "nan", "2.5"]),
    (["bench"], "--requests", "must be an integer >= 1", ["0", "inf"]),
    (["bench"], "--warmup", "must be an integer >= 0", ["-1", "nan"]),
    (["bench"], "--max-new-tokens", "must be an integer >= 1", ["0", "-1"]),
    (["bench"], "--load-timeout", "must be an integer from 1 to 1000000000", ["0", "-5", "10000000000", "nan"]),
]


@pytest.mark.parametrize("argv, option, must, values", INTEGERS, ids=[f"{a[0]}-{o}" for a, o, _, _ in INTEGERS])
def test_every_integer_option_refuses_values_out_of_its_range(argv: list[str], option: str, must: str,
                                                              values: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    for value in values:
        assert main([*argv, f"{option}={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument {option}: {must}, got {value!r}"


def test_valid_values_still_parse_large_ones_included() -> None:
    verify = build_parser("verify")
    assert verify.parse_args(["verify", "--step-timeout", "1"]).step_timeout == 1.0
    assert verify.parse_args(["verify"]).step_timeout == 120.0
    bench = build_parser("bench")
    args = bench.parse_args(["bench", "--repeats", "1", "--warmup", "0", "--port", "30000", "--load-timeout",
                             "1800", "--request-timeout", "0.5", "--idle-timeout", "1e9", "--max-new-tokens", "1"])
    assert (args.repeats, args.warmup, args.port, args.load_timeout, args.request_timeout, args.idle_timeout,
            args.max_new_tokens) == (1, 0, 30000, 1800, 0.5, 1e9, 1)


def test_the_shared_types_themselves() -> None:
    assert seconds()("0.25") == 0.25
    assert seconds(minimum=5)("5") == 5.0
    assert integer(0)("0") == 0 and PORT("443") == 443
    with pytest.raises(argparse.ArgumentTypeError) as info:
        seconds(minimum=5)("4.99")
    assert str(info.value) == "must be a finite number of seconds from 5 to 1,000,000,000, got '4.99'"
    with pytest.raises(argparse.ArgumentTypeError) as info:
        seconds()("1000000001")
    assert str(info.value) == "must be a positive finite number of seconds (at most 1,000,000,000), got '1000000001'"
    with pytest.raises(argparse.ArgumentTypeError) as info:
        integer(2, 4)("5")
    assert str(info.value) == "must be an integer from 2 to 4, got '5'"
