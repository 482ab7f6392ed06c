"""The command line as a user runs it: the real ``envforge`` script in a subprocess.

Command groups and their help, the ``envforge.error/1`` JSON envelope checked against the literal
block in docs/cli.md, internal errors (exit 70, one line, a log file, no traceback), bad input
files (exit 2 with file and reason), size limits, and shell completion through real bash.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from envforge.cli import _COMMAND_GROUPS, _GROUPS, _listing, build_parser, handler_of, main
from envforge.cli.commands import SUMMARIES
from envforge.cli.output import redact

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli.md"
ENVFORGE = Path(sys.executable).with_name("envforge")
HYPHENATED = ("lock-diff", "lock-textconv", "bench-compare", "patches-export", "patches-list", "env-show")


def envforge(
    *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the installed console script (PYTHONPATH from the test run: this checkout's code)."""
    return subprocess.run(
        [str(ENVFORGE), *argv],
        cwd=cwd or ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def documented_error_envelope() -> dict[str, Any]:
    """The JSON block under "The error envelope" in docs/cli.md."""
    section = DOC.read_text().split("### The error envelope", 1)[1]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None
    doc: dict[str, Any] = json.loads(block.group(1))
    return doc


def assert_error_envelope(stdout: str, *, kind: str, exit_code: int) -> dict[str, Any]:
    """stdout is exactly one envelope with the documented keys and types."""
    doc = json.loads(stdout)
    documented = documented_error_envelope()
    assert list(doc) == ["envforge", "schema", "data"]
    assert doc["schema"] == documented["schema"] == "envforge.error/1"
    assert list(doc["data"]) == list(documented["data"]) == ["kind", "message", "hint", "exit_code", "log"]
    assert doc["data"]["kind"] == kind and doc["data"]["exit_code"] == exit_code
    assert isinstance(doc["data"]["message"], str) and doc["data"]["message"]
    assert doc["data"]["hint"] is None or isinstance(doc["data"]["hint"], str)
    assert doc["data"]["log"] is None or isinstance(doc["data"]["log"], str)
    data: dict[str, Any] = doc["data"]
    return data


def assert_no_traceback(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stderr + res.stdout
    assert 'File "' not in res.stderr


# --- command groups ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, usage",
    [
        (["--help"], "usage: envforge [-h] [--version] COMMAND ..."),
        (["patches", "--help"], "usage: envforge patches [-h] COMMAND ..."),
        (["env", "--help"], "usage: envforge env [-h] COMMAND ..."),
        (["lock", "--help"], "usage: envforge lock [RECIPE] [--variant VARIANT] [--check] [options]"),
        (["lock", "diff", "--help"], "usage: envforge lock diff [-h]"),
        (["lock", "textconv", "--help"], "usage: envforge lock textconv [-h] FILE"),
        (["bench", "--help"], "usage: envforge bench [ENV] [--recipe RECIPE] [--url URL] [options]"),
        (["bench", "compare", "--help"], "usage: envforge bench compare [-h]"),
        (["bench", "serve-venv", "--help"], "usage: envforge bench [ENV] [--recipe RECIPE] [--url URL] [options]"),
        (["lock", "kimi", "--help"], "usage: envforge lock [RECIPE] [--variant VARIANT] [--check] [options]"),
        (["patches", "list", "--help"], "usage: envforge patches list [-h]"),
        (["patches", "export", "--help"], "usage: envforge patches export [-h]"),
        (["env", "show", "--help"], "usage: envforge env show [-h]"),
        (["env", "list", "--help"], "usage: envforge env list [-h]"),
        (["drafter", "--help"], "usage: envforge drafter [-h] COMMAND ..."),
        (["completion", "--help"], "usage: envforge completion [-h] SHELL"),
    ],
)
def test_every_group_and_subcommand_has_help(argv: list[str], usage: str) -> None:
    res = envforge(*argv)
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.startswith(usage)
    assert not any(name in res.stdout for name in HYPHENATED)


def test_apply_patches_help_says_revert_removes_the_env_profile() -> None:
    res = envforge("apply-patches", "--help")
    assert res.returncode == 0
    assert (
        " ".join(res.stdout.split()).count(
            "--revert restore the original files byte-exact; without PATCHSET names this also removes the "
            "environment's env profile hook (.pth or sitecustomize block)"
        )
        == 1
    )


def test_no_internal_hyphenated_name_in_any_help_or_usage() -> None:
    """Walk the whole parser tree: no command is named (or shown) by an internal joined name."""
    seen = []

    def walk(parser: Any) -> None:
        seen.append(parser.prog)
        text = parser.format_help()
        assert not any(name in text for name in HYPHENATED), parser.prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    assert {
        "envforge lock diff",
        "envforge patches list",
        "envforge env show",
        "envforge bench compare",
        "envforge drafter fetch",
        "envforge envs",
    } <= set(seen)


@pytest.mark.parametrize("group", ["patches", "env", "drafter"])
def test_bare_group_prints_its_help(group: str) -> None:
    res = envforge(group)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith(f"usage: envforge {group} [-h] COMMAND ...")
    assert "commands:" in res.stderr


def test_lock_recipe_works_beside_lock_diff() -> None:
    """``envforge lock RECIPE --check`` (options before or after the recipe) and ``lock diff``."""
    lock = ROOT / "lockfiles" / "pylock.quickstart-default.toml"
    for argv in (["lock", "quickstart", "--check"], ["lock", "--check", "quickstart"], ["lock", "--check"]):
        res = envforge(*argv, "--project", str(ROOT))
        assert (res.returncode, res.stdout) == (0, f"{lock}: up to date\n"), (argv, res.stderr)
    res = envforge("lock", "diff", str(lock), str(lock))
    assert res.returncode == 0 and "no changes" in (res.stdout + res.stderr).lower()


def test_unknown_option_is_reported_with_the_subcommands_usage() -> None:
    res = envforge("lock", "diff", "a", "b", "--bogus")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("usage: envforge lock diff [-h]")
    assert res.stderr.endswith("error: unrecognized arguments: --bogus\n")
    res = envforge("lock", "quickstart", "extra")
    assert res.stderr.splitlines()[0] == "usage: envforge lock [RECIPE] [--variant VARIANT] [--check] [options]"
    assert res.stderr.endswith("error: unrecognized arguments: extra\n")


# --- JSON errors ------------------------------------------------------------------------------


def test_documented_error_example_is_what_the_cli_prints() -> None:
    """The literal block in docs/cli.md is the output of the command it names."""
    res = envforge("lock", "diff", "/nonexistent", "b", "--json")
    assert res.returncode == 2
    documented = documented_error_envelope()
    documented["envforge"] = json.loads(res.stdout)["envforge"]
    assert json.loads(res.stdout) == documented
    assert res.stderr == (
        "error: /nonexistent: no such file\n  hint: a side is a lock path, REV:PATH "
        "(e.g. HEAD~1:lockfiles/pylock.NAME.toml), or use --git REV\n"
    )


def test_usage_error_with_json_prints_the_envelope() -> None:
    res = envforge("nope", "--json")
    data = assert_error_envelope(res.stdout, kind="usage-error", exit_code=2)
    assert res.returncode == 2
    assert data["message"].startswith("argument COMMAND: invalid choice: 'nope' (choose from 'lock', 'build'")
    assert data["hint"] == "usage: envforge [-h] [--version] COMMAND ..."
    res = envforge("lock", "diff", "--format", "json", "--bogus")
    assert (
        assert_error_envelope(res.stdout, kind="usage-error", exit_code=2)["message"]
        == "unrecognized arguments: --bogus"
    )


def test_input_error_with_json_for_build_and_rollback(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    res = envforge("rollback", "nothing-here", "--json", "--project", str(tmp_path))
    assert res.returncode == 2
    assert_error_envelope(res.stdout, kind="input-error", exit_code=2)
    res = envforge("build", "missing-recipe", "--json", "--project", str(tmp_path))
    assert res.returncode == 2
    data = assert_error_envelope(res.stdout, kind="input-error", exit_code=2)
    assert "missing-recipe" in data["message"]


def test_without_json_stdout_stays_empty_on_error() -> None:
    res = envforge("lock", "diff", "/nonexistent", "b")
    assert (res.returncode, res.stdout) == (2, "")


# --- internal errors --------------------------------------------------------------------------

BOOM = """
import sys
import envforge.lockdiff as lockdiff
def diff_sides(*args, **kwargs):
    raise RuntimeError("a bug\\nsecond line of the message")
lockdiff.diff_sides = diff_sides
from envforge.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_internal_error_is_one_line_exit_70_and_a_log(tmp_path: Path, json_flag: list[str]) -> None:
    """A bug (here a core function that raises RuntimeError) is exit 70: one line naming the log file,
    the traceback only in that file, never on the terminal."""
    res = subprocess.run(
        [sys.executable, "-c", BOOM, "lock", "diff", "a", "b", *json_flag],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    )
    assert res.returncode == 70
    assert_no_traceback(res)
    (line,) = res.stderr.splitlines()
    logs = list((tmp_path / "envforge" / "logs").glob("envforge-internal-*.log"))
    assert len(logs) == 1
    assert line == f"error: internal error (a bug in envforge): RuntimeError: a bug (full log: {logs[0]})"
    text = logs[0].read_text()
    assert text.startswith("envforge 0.1.0: internal error\ncommand: envforge lock diff a b")
    assert "Traceback (most recent call last):" in text and "in diff_sides" in text
    if json_flag:
        data = assert_error_envelope(res.stdout, kind="internal-error", exit_code=70)
        assert data["log"] == str(logs[0])
        assert data["hint"] == "please report it with the log file"
    else:
        assert res.stdout == ""


def test_internal_error_log_masks_url_credentials(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-c", BOOM, "lock", "diff", "https://user:s3cret@host/x", "b"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
    )
    assert res.returncode == 70
    (log,) = (tmp_path / "envforge" / "logs").glob("*.log")
    assert "s3cret" not in log.read_text() and "https://***@host/x" in log.read_text()


# --- bad input files ----------------------------------------------------------------------------


def project_with_recipe(tmp_path: Path, content: bytes) -> Path:
    (tmp_path / "recipes").mkdir(exist_ok=True)
    (tmp_path / "recipes" / "bad.toml").write_bytes(content)
    return tmp_path / "recipes" / "bad.toml"


@pytest.mark.parametrize(
    "content, reason",
    [
        (b'[recipe]\nname = "caf\xe9"\n', ":2: byte 0xe9 at offset 20 is not UTF-8"),
        ('[recipe]\nname = "x"\n'.encode("utf-16"), " is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8"),
        (
            b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
            ": not valid TOML for envforge: arrays or tables nested too deeply",
        ),
        (
            b"a = " + b"{b = " * 100_000 + b"}" * 100_000 + b"\n",
            ": not valid TOML for envforge: arrays or tables nested too deeply",
        ),
        (b"x" * ((1 << 20) + 1), " is larger than 1 MiB: not a recipe envforge reads"),
    ],
)
@pytest.mark.parametrize("command", [["lock", "bad", "--check"], ["build", "bad", "--dry-run"], ["up", "bad"]])
def test_bad_recipe_bytes_are_exit_2_with_file_and_reason(
    tmp_path: Path, content: bytes, reason: str, command: list[str]
) -> None:
    path = project_with_recipe(tmp_path, content)
    res = envforge(*command, "--project", str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert_no_traceback(res)
    first = res.stderr.splitlines()[0]
    assert first.startswith("error: ") and str(path) in first and reason in first, first


def test_lock_diff_of_dev_zero_stops_at_the_size_limit() -> None:
    """``lock diff /dev/zero x`` used to read until the kernel killed it; then it read 64 MiB + 1 and
    called a device "larger than 64 MiB"; now the file type is checked before any byte is read."""
    res = envforge("lock", "diff", "/dev/zero", "/dev/zero", timeout=60)
    assert res.returncode == 2
    assert res.stderr == (
        "error: lock /dev/zero is not a regular file (a character device)\n  hint: pass the path of a lock file\n"
    )
    assert_no_traceback(res)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\xff\xfel\x00o\x00c\x00k\x00", "error: {p} is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8"),
        (b'lock-version = "1.0"\n\x80\n', "error: {p}:2: byte 0x80 at offset 21 is not UTF-8"),
        (
            b"a = " + b"[" * 50_000 + b"]" * 50_000,
            "error: {p} is not a lock: arrays or tables nested too deeply (more than 64 levels)",
        ),
    ],
)
def test_bad_lock_bytes_in_lock_diff_and_textconv(tmp_path: Path, content: bytes, message: str) -> None:
    p = tmp_path / "pylock.x.toml"
    p.write_bytes(content)
    res = envforge("lock", "diff", str(p), str(p))
    assert res.returncode == 2 and res.stderr.splitlines()[0] == message.format(p=p)
    assert_no_traceback(res)


def test_bad_bench_report_is_exit_2(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    utf16 = tmp_path / "u.json"
    utf16.write_text("{}", encoding="utf-16")
    res = envforge("bench", "compare", str(deep), str(utf16), "--json")
    assert res.returncode == 2
    assert_no_traceback(res)
    assert (
        assert_error_envelope(res.stdout, kind="input-error", exit_code=2)["message"]
        == f"{deep}: not a bench report: arrays or objects nested too deeply"
    )


# --- shell completion --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shell, marker", [("bash", "complete "), ("zsh", "#compdef envforge"), ("fish", "complete --command envforge")]
)
def test_completion_scripts(shell: str, marker: str) -> None:
    res = envforge("completion", shell)
    assert res.returncode == 0 and marker in res.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "line, expected",
    [
        ("envforge pat", ["patches"]),
        ("envforge lock d", ["diff"]),
        ("envforge lock diff --e", ["--exit-code"]),
        ("envforge env ", ["list", "show"]),
        ("envforge completion ", ["bash", "fish", "zsh"]),
    ],
)
def test_bash_completes_groups_subcommands_and_options(line: str, expected: list[str]) -> None:
    """The real bash function from `envforge completion bash`, called the way bash calls it."""
    words = line.split(" ")
    script = (
        f'source <("{ENVFORGE}" completion bash)\n'
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f'COMP_LINE="{line}"; COMP_POINT={len(line)}\n'
        '_python_argcomplete envforge; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    res = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{ENVFORGE.parent}:{os.environ['PATH']}"},
    )
    words_out = [w.strip() for w in res.stdout.splitlines() if w.strip()]
    assert sorted(w for w in words_out if not w.startswith("-") or line.endswith("-e")) == expected, res.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "line, expected",
    [
        ("envforge lock ", ["diff", "kimi", "quickstart", "textconv"]),
        ("envforge lock q", ["quickstart"]),
        ("envforge build k", ["kimi"]),
        ("envforge rollback ", ["kimi-default", "quickstart-default"]),
        ("envforge bench q", ["quickstart-default"]),
        ("envforge verify k", ["kimi-default"]),
    ],
)
def test_bash_completes_recipes_and_environments(tmp_path: Path, line: str, expected: list[str]) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "envs").mkdir()
    for name in ("quickstart", "kimi"):
        (tmp_path / "recipes" / f"{name}.toml").write_text("")
        (tmp_path / "envs" / f"{name}-default").symlink_to(tmp_path)
    words = line.split(" ")
    script = (
        f'source <("{ENVFORGE}" completion bash)\n'
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f'COMP_LINE="{line}"; COMP_POINT={len(line)}\n'
        '_python_argcomplete envforge; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    res = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PATH": f"{ENVFORGE.parent}:{os.environ['PATH']}"},
    )
    assert sorted(w.strip() for w in res.stdout.splitlines() if w.strip() and not w.startswith("-")) == expected


def test_fish_protocol_completes_subcommands(tmp_path: Path) -> None:
    """What the fish function sets before calling envforge (argcomplete's fish protocol)."""
    out = tmp_path / "out"
    res = subprocess.run(
        [str(ENVFORGE)],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "fish",
            "_ARGCOMPLETE_IFS": "\n",
            "_ARGCOMPLETE_DFS": "\t",
            "COMP_LINE": "envforge bench ",
            "COMP_POINT": "15",
            "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
        },
    )
    assert res.returncode == 0
    assert "compare" in [w.split("\t")[0] for w in out.read_text().splitlines()]


def test_guarantees_page_names_tests_that_exist() -> None:
    """Every ``tests/FILE::TEST`` (and ``::TEST`` after it) on docs/guarantees.md is a real test."""
    text = (ROOT / "docs" / "guarantees.md").read_text()
    for row in text.splitlines():
        current = None
        for ref in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`", row):
            path, name = ref
            if path:
                current = ROOT / path
                assert current.is_file(), path
            if name:
                assert current is not None and f"def {name}(" in current.read_text(), (current, name)


def test_command_groups_are_the_modules_that_register_each_command() -> None:
    """``envforge COMMAND`` builds only the registration modules that register COMMAND: the map is
    what they register."""
    registered: dict[str, list[str]] = {}
    for group in _GROUPS:
        sub = argparse.ArgumentParser(prog="envforge").add_subparsers(dest="command")
        import_module(f"envforge.cli.commands.{group}").register(sub)
        for command in sub.choices:
            registered.setdefault(command, []).append(group)
    assert {c: tuple(g) for c, g in registered.items()} == _COMMAND_GROUPS


HANDLERS = {
    "envforge lock": "envforge.cli.lock:run_lock",
    "envforge lock diff": "envforge.cli.lockdiff:run_diff",
    "envforge lock textconv": "envforge.cli.lockdiff:run_textconv",
    "envforge build": "envforge.cli.build:run_build",
    "envforge rollback": "envforge.cli.build:run_rollback",
    "envforge up": "envforge.cli.up:run_up",
    "envforge run": "envforge.cli.run:run_command",
    "envforge env list": "envforge.cli.environments:run_list",
    "envforge env show": "envforge.cli.envprofile:run_show",
    "envforge envs": "envforge.cli.environments:run_list",
    "envforge gc": "envforge.cli.environments:run_gc",
    "envforge apply-patches": "envforge.cli.patches:_apply",
    "envforge patches export": "envforge.cli.patches:_export",
    "envforge patches check": "envforge.cli.patches:_check",
    "envforge patches diff": "envforge.cli.patches:_diff",
    "envforge patches new": "envforge.cli.patches:_new",
    "envforge patches commit": "envforge.cli.patches:_commit",
    "envforge patches import": "envforge.cli.patches:_import",
    "envforge sbom": "envforge.cli.sbom:_sbom",
    "envforge patches list": "envforge.cli.patches:_list",
    "envforge verify": "envforge.cli.verify:run_verify",
    "envforge drafter fetch": "envforge.cli.drafter:run_fetch",
    "envforge drafter inspect": "envforge.cli.drafter:run_inspect",
    "envforge drafter compare": "envforge.cli.drafter:run_compare",
    "envforge drafter check": "envforge.cli.drafter:run_check",
    "envforge bench": "envforge.cli.bench:_bench",
    "envforge bench compare": "envforge.cli.bench:_compare",
    "envforge fleet verify": "envforge.cli.fleet:_verify",
    "envforge fleet build": "envforge.cli.fleet:_build",
    "envforge fleet allreduce": "envforge.cli.fleet:_allreduce",
    "envforge fleet agent start": "envforge.cli.fleet:_agent_start",
    "envforge fleet agent stop": "envforge.cli.fleet:_agent_stop",
    "envforge init": "envforge.cli.init:run_init",
    "envforge completion": "envforge.cli.completion:run_completion",
    "envforge cache dir": "envforge.cli.cache:run_dir",
    "envforge cache clean": "envforge.cli.cache:run_clean",
    "envforge cache prune": "envforge.cli.cache:run_prune",
}


def test_every_command_names_its_handler_by_a_reference_that_resolves() -> None:
    """Registration sets ``handler`` to ``"envforge.cli.MODULE:FUNCTION"`` (imported only when the
    command runs); every reference names a function of that handler module."""
    found: dict[str, Any] = {}

    def walk(parser: Any) -> None:
        if "handler" in parser._defaults:
            found[parser.prog] = parser._defaults["handler"]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    references = {prog: ref for prog, ref in found.items() if isinstance(ref, str)}
    assert references == HANDLERS
    assert set(found) - set(references) == {
        "envforge patches",
        "envforge env",
        "envforge drafter",
        "envforge fleet",
        "envforge fleet agent",
        "envforge cache",
    }  # groups without a bare form: their help
    for ref in references.values():
        function = handler_of(ref)
        assert inspect.isfunction(function) and f"{function.__module__}:{function.__name__}" == ref


def test_a_function_handler_is_its_own_reference() -> None:
    def show(args: Any, ui: Any) -> int:
        return 2

    assert handler_of(show) is show


def test_the_listing_is_the_full_parsers_top_level() -> None:
    """``envforge --help`` (no command first) builds its listing from ``commands.SUMMARIES`` alone:
    the same help, usage and choices as the parser with every command registered."""
    full, listing = build_parser(), _listing()
    assert listing.format_help() == full.format_help()
    assert listing.format_usage() == full.format_usage() == "usage: envforge [-h] [--version] COMMAND ...\n"
    assert list(SUMMARIES) == [
        "lock",
        "build",
        "rollback",
        "up",
        "run",
        "env",
        "envs",
        "gc",
        "apply-patches",
        "patches",
        "sbom",
        "verify",
        "drafter",
        "bench",
        "fleet",
        "cache",
        "init",
        "completion",
    ]


@pytest.mark.parametrize(
    "argv, rc, stderr",
    [
        (
            ["bogus"],
            2,
            "error: argument COMMAND: invalid choice: 'bogus' (choose from 'lock', 'build', 'rollback', "
            "'up', 'run', 'env', 'envs', 'gc', 'apply-patches', 'patches', 'sbom', 'verify', 'drafter', 'bench', 'fleet', "
            "'cache', 'init', 'completion')",
        ),
        (["--bogus", "lock", "diff", "a"], 2, "error: unrecognized arguments: --bogus"),
        (["--json", "lock", "diff", "a", "b", "--nope"], 2, "error: unrecognized arguments: --json --nope"),
    ],
)
def test_words_before_the_command_are_parsed_with_the_full_parser(
    argv: list[str], rc: int, stderr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == rc
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == stderr
    if argv[0] != "bogus":  # the usage of the subcommand that was given them, not of a listing stub
        assert err.startswith("usage: envforge lock diff [-h]")


IMPORTS = """
import sys
from envforge.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, " ".join(sorted(m for m in sys.modules if m.startswith("envforge"))))
"""

_BASE = [
    "envforge",
    "envforge.cli",
    "envforge.cli.commands",
    "envforge.cli.output",
    "envforge.cli.parser",
    "envforge.core",
    "envforge.core.errors",
    "envforge.core.printable",
    "envforge.core.urls",
]


@pytest.mark.parametrize(
    "argv, modules",
    [
        (["--help"], []),
        ([], []),
        (
            ["lock", "diff", "--help"],
            ["envforge.cli.commands.lock", "envforge.cli.commands.lockdiff", "envforge.cli.options"],
        ),
        (["verify", "--help"], ["envforge.cli.commands.verify"]),
    ],
)
def test_help_imports_no_handler_and_no_stage_above_core(argv: list[str], modules: list[str]) -> None:
    """``--help`` registers commands (``cli/commands``) and imports no handler module (``cli/<group>.py``)
    and no stage package above ``envforge.core``."""
    res = subprocess.run([sys.executable, "-c", IMPORTS, *argv], capture_output=True, text=True, timeout=60)
    code, names = res.stdout.splitlines()[-1].split(" ", 1)  # after the help text
    assert code == ("2" if not argv else "0")
    assert names.split() == sorted(_BASE + modules)


def test_a_command_imports_only_its_handler_module() -> None:
    res = subprocess.run(
        [sys.executable, "-c", IMPORTS, "lock", "diff", "/nonexistent", "b"], capture_output=True, text=True, timeout=60
    )
    code, names = res.stdout.splitlines()[-1].split(" ", 1)
    assert code == "2"
    handlers = [n for n in names.split() if n.startswith("envforge.cli.") and not n.startswith("envforge.cli.commands")]
    assert handlers == ["envforge.cli.lockdiff", "envforge.cli.options", "envforge.cli.output", "envforge.cli.parser"]
    assert not [n for n in names.split() if n.startswith("envforge.recipe.")]  # two lock files need no recipe


@pytest.mark.parametrize(
    "command",
    [
        "lock",
        "build",
        "rollback",
        "up",
        "env",
        "envs",
        "gc",
        "apply-patches",
        "patches",
        "sbom",
        "verify",
        "drafter",
        "bench",
        "fleet",
        "cache",
        "init",
        "completion",
    ],
)
def test_one_command_parser_is_the_full_parser_for_that_command(command: str) -> None:
    """Every help text and usage under COMMAND is the same in the parser built for COMMAND alone."""

    def helps(parser: Any) -> dict[str, str]:
        out = {parser.prog: parser.format_help()}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out.update(helps(sub))
        return out

    def under(parser: Any) -> Any:
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]

    full, alone = helps(under(build_parser())), helps(under(build_parser(command)))
    assert alone == full
    assert f"envforge {command}" in alone


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://ghp_T0KEN@github.com/x", "https://<credentials>@github.com/x"),
        ("url=https://user:pw@pypi.example/simple", "url=https://<credentials>@pypi.example/simple"),
        (
            "added https://hf_T0KEN@huggingface.co/r and http://a@b/c",
            "added https://<credentials>@huggingface.co/r and http://<credentials>@b/c",
        ),
        ("git+ssh://git@github.com/o/r.git", "git+ssh://git@github.com/o/r.git"),
        ("ssh://git@host/r", "ssh://git@host/r"),
        ("mail me at a@b.c, see https://pypi.org/simple", "mail me at a@b.c, see https://pypi.org/simple"),
    ],
)
def test_redact_hides_a_token_given_as_the_user_name(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1abc://u:p@h", "1abc://<credentials>@h"),  # leading digits kept, scheme from the letter
        ("xhttps://tok@h/", "xhttps://<credentials>@h/"),
        ("_https://tok@h", "_https://<credentials>@h"),  # after an underscore too
        ("https://a:b:c@h", "https://<credentials>@h"),  # the password may hold ":"
        ("s = 'https://u:p@h' and 'http://t@h'", "s = 'https://<credentials>@h' and 'http://<credentials>@h'"),
        ("x" * 50 + "://u:p@h", "x" * 50 + "://<credentials>@h"),
    ],
)
def test_redact_edge_cases(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_redaction_is_linear_in_the_text() -> None:
    """A 5 MB lock value made a lock diff run for hours: the URL patterns backtracked quadratically on
    long runs of scheme characters without "://". A hang guard (a subprocess with a generous
    timeout; linear time is well under a second per text here), not a timing assertion."""
    code = (
        "from envforge.cli.output import redact\nfrom envforge.lock.routing import redact_userinfo\n"
        "from envforge.cli.crashlog import mask_userinfo\nfrom envforge.recipe.envvars import secret_problem\n"
        "n = 1_000_000\n"
        "texts = ['x' * n, 'a1' * n, 'a.b' * n, 'a://' + 'x:' * n, 'a://' * n, 'h://' + 'u' * n + ':' + 'p' * n]\n"
        "for t in texts:\n"
        "    assert redact(t) == t and redact_userinfo(t) == t and mask_userinfo(t) == t\n"
        "    assert secret_problem('NCCL_DEBUG', t) is None\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout) == (0, "ok\n"), out.stderr[-2000:]


def test_lock_textconv_and_diff_never_print_a_token_user_name(tmp_path: Path) -> None:
    """A lock written before recipes refused credentials, with `https://TOKEN@host` (no password):
    `lock textconv` (what `git diff` shows) and `lock diff` printed the token."""
    src = (Path(__file__).resolve().parents[2] / "lockfiles" / "pylock.quickstart-default.toml").read_text()
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(src)
    new.write_text(src.replace('url = "https://pypi.org/simple"}', 'url = "https://T0KSECRET@pypi.org/simple"}'))
    assert "T0KSECRET" in new.read_text()
    for argv in (
        ("lock", "textconv", str(new)),
        ("lock", "diff", str(old), str(new)),
        ("lock", "diff", "--json", str(old), str(new)),
    ):
        res = envforge(*argv, cwd=tmp_path)
        assert res.returncode in (0, 1), (argv, res.stderr)
        assert "T0KSECRET" not in res.stdout + res.stderr, argv
        assert "https://<credentials>@pypi.org/simple" in res.stdout, argv
