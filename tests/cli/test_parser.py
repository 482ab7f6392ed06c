"""Every numeric option of every envforge command goes through the shared argparse types of
``envforge.cli.parser`` (``seconds``, ``integer``, ``PORT``): NaN, infinities, negative, zero and
out-of-range values are usage errors (exit 2) naming the option and what it takes; valid values,
large ones included, still parse. In-process (``envforge.cli.main``): a usage error is raised before
any handler runs, so nothing here starts Ray, uv or a server."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from envforge.cli import build_parser, main
from envforge.cli.parser import MAX_SECONDS, PORT, integer, output_file, report_file, seconds

FLEET_S = "must be a finite number of seconds from 5 to 1,000,000,000"
STEP_S = "must be a finite number of seconds from 1 to 1,000,000,000"
ANY_S = "must be a positive finite number of seconds (at most 1,000,000,000)"
PORT_RANGE = "must be a TCP port from 1 to 65535"

# (the command line up to the option, the option, what the error says it must be)
OPTIONS = [
    (["fleet", "verify", "quickstart-default", "--ray", "auto"], "--timeout", FLEET_S),
    (["fleet", "verify", "quickstart-default", "--ray", "auto", "--no-agent"], "--timeout", FLEET_S),
    (["fleet", "build", "quickstart", "--ray", "auto"], "--timeout", FLEET_S),
    (["fleet", "allreduce", "--ray", "auto"], "--timeout", FLEET_S),
    (["fleet", "agent", "start", "--ray", "auto"], "--timeout", FLEET_S),
    (["verify"], "--step-timeout", STEP_S),
    (["bench"], "--request-timeout", ANY_S),
    (["bench"], "--idle-timeout", ANY_S),
]
BAD_SECONDS = ["nan", "NaN", "inf", "-inf", "0", "-0", "-1", "1e-9", "1e10", "1e400", "x", ""]


@pytest.mark.parametrize("argv, option, must", OPTIONS, ids=[f"{i}-{a[0]}-{o}" for i, (a, o, _) in enumerate(OPTIONS)])
def test_every_time_option_refuses_what_is_not_a_finite_positive_number_of_seconds(
    argv: list[str], option: str, must: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in BAD_SECONDS if must != ANY_S else [v for v in BAD_SECONDS if v != "1e-9"]:  # bench: any s > 0
        assert main([*argv, f"{option}={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument {option}: {must}, got {value!r}"


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_time_option_error_with_json_is_one_usage_error_envelope(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", "verify", "quickstart-default", "--ray", "auto", "--timeout", value, "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.error/1"
    assert (doc["data"]["kind"], doc["data"]["message"], doc["data"]["exit_code"]) == (
        "usage-error",
        f"argument --timeout: {FLEET_S}, got {value!r}",
        2,
    )


INTEGERS = [
    (["fleet", "allreduce", "--ray", "auto"], "--port", PORT_RANGE, ["0", "-1", "70000", "65536", "nan", "1.5", ""]),
    (["bench"], "--port", PORT_RANGE, ["0", "65536", "inf"]),
    (["bench"], "--repeats", "must be an integer from 1 to 10000", ["0", "-3", "nan", "2.5", "10001"]),
    (["bench"], "--requests", "must be an integer from 1 to 10000000", ["0", "inf", "10000001"]),
    (["bench"], "--warmup", "must be an integer from 0 to 10000000", ["-1", "nan", "10000001"]),
    (["bench"], "--max-new-tokens", "must be an integer from 1 to 10000000", ["0", "-1", "10000001"]),
    (["bench"], "--random-input-len", "must be an integer from 1 to 10000000", ["0", "1000000000", "9" * 5000]),
    (["bench"], "--gsp-system-prompt-len", "must be an integer from 1 to 10000000", ["0", "1000000000000"]),
    (["bench"], "--gsp-num-groups", "must be an integer from 1 to 10000000", ["0", "10000001"]),
    (["bench"], "--load-timeout", "must be an integer from 1 to 1000000000", ["0", "-5", "10000000000", "nan"]),
]


@pytest.mark.parametrize("argv, option, must, values", INTEGERS, ids=[f"{a[0]}-{o}" for a, o, _, _ in INTEGERS])
def test_every_integer_option_refuses_values_out_of_its_range(
    argv: list[str], option: str, must: str, values: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    for value in values:
        assert main([*argv, f"{option}={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument {option}: {must}, got {value!r}"


def test_valid_values_still_parse_large_ones_included() -> None:
    fleet = build_parser("fleet")
    args = fleet.parse_args(["fleet", "verify", "e", "--ray", "auto", "--timeout", "1e9"])
    assert args.timeout == 1e9 == MAX_SECONDS
    assert fleet.parse_args(["fleet", "verify", "e", "--ray", "auto", "--timeout", "5"]).timeout == 5.0
    assert fleet.parse_args(["fleet", "verify", "e", "--ray", "auto"]).timeout == 600.0  # the defaults are untouched
    assert fleet.parse_args(["fleet", "build", "r", "--ray", "auto"]).timeout == 3600.0
    assert fleet.parse_args(["fleet", "agent", "start", "--ray", "auto"]).timeout == 120.0
    assert fleet.parse_args(["fleet", "allreduce", "--ray", "auto"]).port == 29517
    assert fleet.parse_args(["fleet", "allreduce", "--ray", "auto", "--port", "1"]).port == 1
    assert fleet.parse_args(["fleet", "allreduce", "--ray", "auto", "--port", "65535"]).port == 65535
    verify = build_parser("verify")
    assert verify.parse_args(["verify", "--step-timeout", "1"]).step_timeout == 1.0
    assert verify.parse_args(["verify"]).step_timeout == 120.0
    bench = build_parser("bench")
    args = bench.parse_args(
        [
            "bench",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--port",
            "30000",
            "--load-timeout",
            "1800",
            "--request-timeout",
            "0.5",
            "--idle-timeout",
            "1e9",
            "--max-new-tokens",
            "1",
        ]
    )
    assert (
        args.repeats,
        args.warmup,
        args.port,
        args.load_timeout,
        args.request_timeout,
        args.idle_timeout,
        args.max_new_tokens,
    ) == (1, 0, 30000, 1800, 0.5, 1e9, 1)


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


@pytest.mark.parametrize(
    "argv, usage, message",
    [
        (
            ["verfy"],
            "usage: envforge [-h] [--version] COMMAND ...",
            "invalid choice: 'verfy'; did you mean 'verify'? (choose from 'lock', 'build', 'rollback', 'up', 'run', 'env', "
            "'envs', 'gc', 'apply-patches', 'patches', 'sbom', 'verify', 'drafter', 'bench', 'fleet', 'cache', 'init', 'completion')",
        ),
        (
            ["patches", "lsit"],
            "usage: envforge patches [-h] COMMAND ...",
            "invalid choice: 'lsit'; did you mean 'list'? (choose from 'export', 'check', 'diff', 'new', 'commit', 'import', 'list')",
        ),
        (
            ["env", "shwo"],
            "usage: envforge env [-h] COMMAND ...",
            "invalid choice: 'shwo'; did you mean 'show'? (choose from 'list', 'show')",
        ),
        (
            ["fleet", "xyzzy"],
            "usage: envforge fleet [-h] COMMAND ...",
            "invalid choice: 'xyzzy' (choose from 'verify', 'build', 'allreduce', 'agent')",
        ),
    ],
)
def test_a_mistyped_command_is_exit_2_with_the_nearest_command(
    argv: list[str], usage: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [usage, f"error: argument COMMAND: {message}"]
    assert main([*argv, "--json"]) == 2
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["kind"], data["message"], data["exit_code"]) == ("usage-error", f"argument COMMAND: {message}", 2)


OUTPUTS = [(["sbom"], "-o/--output", "-o"), (["patches", "export", "p"], "-o/--output", "--output")]


@pytest.mark.parametrize("argv, name, option", OUTPUTS, ids=[a[0] for a, _, _ in OUTPUTS])
def test_every_output_file_option_refuses_a_directory_or_a_missing_parent(
    argv: list[str], name: str, option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any handler runs: no temp file is made beside the target (``/`` for ``-o /tmp``)."""
    missing = tmp_path / "no" / "x.json"
    cases = [
        (str(tmp_path), f"{tmp_path}: is a directory; give a file name in it, e.g. {tmp_path / 'out.json'}"),
        (
            str(missing),
            f"{missing}: no directory {missing.parent}; make it first (mkdir -p {missing.parent}) "
            "or give a file in an existing directory",
        ),
        ("", "empty path; give the file to write, e.g. -o out.json"),
    ]
    for value, message in cases:
        assert main([*argv, f"{option}={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument {name}: {message}"
    assert list(tmp_path.iterdir()) == []
    assert output_file(str(tmp_path / "x.json")) == tmp_path / "x.json"


def test_bench_output_may_name_directories_bench_makes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench makes the report's missing parent directories (runs/today/a.json); it refuses only an
    empty path, a directory, or a path under a file, before anything runs."""
    (tmp_path / "a.txt").write_text("")
    cases = [
        (str(tmp_path), f"{tmp_path}: is a directory; give a file name in it, e.g. {tmp_path / 'bench.json'}"),
        (
            str(tmp_path / "a.txt" / "x.json"),
            f"{tmp_path / 'a.txt' / 'x.json'}: {tmp_path / 'a.txt'} is not a directory; give a file in a directory",
        ),
        ("", "empty path; give the file to write, e.g. --output bench.json"),
    ]
    for value, message in cases:
        assert main(["bench", f"--output={value}"]) == 2, value
        assert capsys.readouterr().err.splitlines()[-1] == f"error: argument --output: {message}"
    assert report_file(str(tmp_path / "runs" / "today" / "a.json")) == tmp_path / "runs" / "today" / "a.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


@pytest.mark.parametrize(
    "argv, dest",
    [
        (["patches", "import", "d.diff", "--id", "x", "--reason", "y", "ENV"], "diff"),
        (["patches", "export", "p", "-o", "x.diff", "ENV"], "patchset"),
        (["patches", "new", "sglang", "--json", "ENV"], "distribution"),
    ],
)
def test_an_optional_env_after_options_is_the_env_not_unrecognized(argv: list[str], dest: str) -> None:
    """``DIFF --id x --reason y ENV`` as the usage line writes it (argparse 3.11-3.13 alone: ``unrecognized
    arguments: ENV``); the first positional and the options are still read."""
    args, extra = build_parser("patches").parse_known_args(argv)
    assert (args.env, extra, getattr(args, dest)) == ("ENV", [], Path(argv[2]) if dest == "diff" else argv[2])


def test_options_between_positionals_still_refuse_an_extra_word(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["patches", "import", "d.diff", "--id", "x", "--reason", "y", "ENV", "more"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "error: unrecognized arguments: more"
