"""Issue 41: a number of more digits than CPython converts to an ``int`` (4,300 by default since
3.11) in any file envforge reads is exit 2 naming the file and the line, never rc 70.

Every reader that met one raised ``ValueError: Exceeds the limit (4300 digits) for integer string
conversion`` as an internal error before: the recipe (``lock``), a bench report (``bench compare``),
a prompt set (JSON lines and ShareGPT), a trace, the project file, an index's PEP 691 page. The
pylock and uv.lock readers are tested in tests/lock/test_read.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.bench.config import load_prompts
from envforge.bench.trace import read_trace
from envforge.cli import main
from envforge.core.errors import InputError
from envforge.core.textfile import long_number_error, long_number_line, parse_json, parse_toml
from envforge.recipe.project import Project

BIG = "9" * 5000
HINT = "no value envforge reads needs one: fix the file"


def test_long_number_line_counts_lines_in_text_and_bytes() -> None:
    assert long_number_line("a = 1\nb = " + BIG + "\n") == 2
    assert long_number_line(b"x\ny\n" + BIG.encode()) == 3
    assert long_number_line("a = " + "9" * 4300) is None  # the limit itself converts
    assert long_number_line("a = " + "9" * 4301) == 1


def test_long_number_error_names_the_line_unless_told_it_is_one() -> None:
    exc = ValueError("Exceeds the limit (4300 digits) for integer string conversion")
    assert (
        long_number_error("f.json", '{\n"a": ' + BIG + "}", exc).message
        == "f.json:2: a number of more than 4,300 digits"
    )
    assert (
        long_number_error("f.jsonl:7", BIG, exc, lines=False).message == "f.jsonl:7: a number of more than 4,300 digits"
    )
    assert (
        long_number_error("f.json", "{}", ValueError("something else")).message
        == "f.json: not readable: something else"
    )
    assert long_number_error("f.json", "x", exc).hint == HINT


def test_parse_toml_and_json_name_the_line() -> None:
    with pytest.raises(InputError) as err:
        parse_toml("a = 1\n\nb = " + BIG + "\n", label="r.toml")
    assert (err.value.message, err.value.hint) == ("r.toml:3: a number of more than 4,300 digits", HINT)
    with pytest.raises(InputError) as err:
        parse_json('{"a":\n' + BIG + "}", label="r.json")
    assert err.value.message == "r.json:2: a number of more than 4,300 digits"
    with pytest.raises(InputError) as err:
        parse_json(b"[" + BIG.encode() + b"]", label="r.json")
    assert err.value.message == "r.json:1: a number of more than 4,300 digits"


def test_prompt_sets_and_traces_name_the_line(tmp_path: Path) -> None:
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"prompt": "hi"}\n{"prompt": "x", "n": ' + BIG + "}\n")
    with pytest.raises(InputError) as err:
        load_prompts(lines)
    assert err.value.message == f"{lines}:2: a number of more than 4,300 digits"
    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text('[\n{"conversations": [{"from": "human", "value": ' + BIG + "}]}]")
    with pytest.raises(InputError) as err:
        load_prompts(sharegpt)
    assert err.value.message == f"{sharegpt}:2: a number of more than 4,300 digits"
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 5}\n'
        '{"timestamp": ' + BIG + ', "input_length": 5, "output_length": 5}\n'
    )
    with pytest.raises(InputError) as err:
        read_trace(trace)
    assert err.value.message == f"{trace}:2: a number of more than 4,300 digits"


def test_the_project_file_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "envforge.toml").write_text("[project]\ndefault = " + BIG + "\n")
    with pytest.raises(InputError) as err:
        Project(tmp_path).named_default()
    assert err.value.message == f"{tmp_path / 'envforge.toml'}:2: a number of more than 4,300 digits"


@pytest.mark.parametrize("command", ["compare", "recipe"])
def test_cli_exit_2_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    if command == "compare":
        report = tmp_path / "r.json"
        report.write_text('{"schema": "envforge.bench/4",\n "data": {"n": ' + BIG + "}}")
        argv, where = ["bench", "compare", str(report), str(report)], f"{report}:2"
    else:
        recipe = tmp_path / "r.toml"
        recipe.write_text('[recipe]\nname = "r"\n\n[x]\nn = ' + BIG + "\n")
        argv, where = ["lock", str(recipe), "--offline"], f"{recipe}:5"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[:2] == [f"error: {where}: a number of more than 4,300 digits", f"  hint: {HINT}"]


def test_readers_that_skip_an_unreadable_file_skip_one_with_a_long_number(tmp_path: Path) -> None:
    """Display-only and best-effort readers (lock diff's index names here, the wheelhouse's URL restore
    below) skip a file they cannot read; a number too long to convert is one (it was rc 70 there)."""
    from envforge.lockdiff.model import parse_lock  # noqa: PLC0415
    from envforge.lockdiff.sources import recipe_index_names  # noqa: PLC0415

    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text('[recipe]\nname = "r"\nn = ' + BIG + "\n")
    lock = parse_lock(
        'lock-version = "1.0"\ncreated-by = "x"\npackages = []\n[tool.envforge]\nrecipe = "r"\n', label="pylock.toml"
    )
    assert recipe_index_names([lock], tmp_path) == {}


def test_the_wheelhouse_restore_skips_a_lock_with_a_long_number(tmp_path: Path) -> None:
    from envforge.lock.wheelhouse import restore_urls  # noqa: PLC0415

    lockfiles = tmp_path / "lockfiles"
    lockfiles.mkdir()
    (lockfiles / "pylock.r-default.toml").write_text('lock-version = "1.0"\nn = ' + BIG + "\n")
    packages = [{"name": "a", "version": "1", "wheels": [{"path": str(tmp_path / "a-1-py3-none-any.whl")}]}]
    assert restore_urls(packages, lockfiles, [tmp_path]) == packages
