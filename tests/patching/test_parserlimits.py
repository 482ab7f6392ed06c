"""Hostile diffs and origins for ``envforge patches import`` (issue 39; the inputs of the field's
gen_diffs.py): never a crash (libcst's native parser segfaults on 2,000 nested brackets), never a
quadratic stall (a chain of 5,000 operators), never rc 70 (a NUL in the diff, ESC in ``--origin``),
never a secret written (``--origin`` with credentials and no scheme). Exit 2 naming the line.

The package is a real site-packages tree made here: ``tinypkg`` 1.0 with its dist-info and RECORD.
The crash cases run ``envforge`` in a subprocess: a segfault would be rc 139 there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.patching.parserlimits import MAX_CHAIN, MAX_DEPTH, check_control, check_text
from tests.support.patching_trees import project_tree

INIT = "VALUE = 1\n\ndef f(x):\n    return x + 1\n"


def _site(root: Path) -> Path:
    sp = root / "sp"
    (sp / "tinypkg").mkdir(parents=True)
    (sp / "tinypkg" / "__init__.py").write_text(INIT)
    info = sp / "tinypkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        "tinypkg/__init__.py,,\ntinypkg-1.0.dist-info/METADATA,,\ntinypkg-1.0.dist-info/RECORD,,\n"
    )
    return sp


def _diff(new: str) -> str:
    return (
        "--- a/tinypkg/__init__.py\n+++ b/tinypkg/__init__.py\n@@ -1,4 +1,4 @@\n VALUE = 1\n \n def f(x):\n"
        f"-    return x + 1\n+{new}\n"
    )


def _import(tmp_path: Path, diff: str, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "x.diff"
    path.write_text(diff)
    project = project_tree(tmp_path / "proj")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "patches",
            "import",
            str(path),
            "--id",
            "x",
            "--reason",
            "r",
            "--site-packages",
            str(_site(tmp_path)),
            "--project",
            str(project),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (
            "    return " + "(" * 2000 + "x" + ")" * 2000,
            "4: brackets nested more than 100 deep: envforge does not parse such code (CPython refuses 200)",
        ),
        (
            "    return x + " + "1+" * 5000 + "1",
            "4: more than 1000 operators chained in one expression: envforge does not parse such code",
        ),
    ],
)
def test_code_libcst_cannot_parse_safely_is_refused_naming_the_line(tmp_path: Path, new: str, message: str) -> None:
    res = _import(tmp_path, _diff(new))
    assert res.returncode == 2, res.stderr[-500:]
    assert res.stderr.splitlines()[0] == (
        f"error: {tmp_path / 'x.diff'}: tinypkg/__init__.py (as the diff makes it):{message}"
    )
    assert not list((tmp_path / "proj" / "patchsets").iterdir())


def test_a_nul_in_the_diff_is_refused_naming_its_line(tmp_path: Path) -> None:
    res = _import(tmp_path, _diff("    return x + 3  # \x00"))
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == (
        f"error: {tmp_path / 'x.diff'}:8: a control character (\\x00) in the text: not Python source or a diff of it"
    )


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("alice:SECRET@github.com/x.diff", "<credentials>@github.com/x.diff"),
        ("https://alice:SECRET@github.com/x.diff", "https://<credentials>@github.com/x.diff"),
        ("github.com/x.diff?token=SECRET", "github.com/x.diff"),
    ],
)
def test_an_origin_with_a_secret_is_refused_with_or_without_a_scheme(tmp_path: Path, origin: str, shown: str) -> None:
    res = _import(tmp_path, _diff("    return x + 3"), "--origin", origin)
    assert res.returncode == 2
    assert "SECRET" not in res.stderr + res.stdout
    assert res.stderr.splitlines()[0] == (
        f"error: --origin '{shown}' carries credentials or a query string, which "
        "would be written into the patchset (committed with the project) and printed"
    )
    assert not list((tmp_path / "proj" / "patchsets").iterdir())


def test_an_escape_in_the_origin_is_refused(tmp_path: Path) -> None:
    res = _import(tmp_path, _diff("    return x + 3"), "--origin", "https://x/\x1b[31mred.diff")
    assert (res.returncode, res.stderr.splitlines()[0]) == (
        2,
        "error: --origin:1: a control character (\\x1b) in the text: not Python source or a diff of it",
    )


def test_the_good_diff_still_imports(tmp_path: Path) -> None:
    res = _import(tmp_path, _diff("    return x + 3"), "--origin", "https://github.com/o/r/pull/1.diff")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[1:] == ["  replace-definition tinypkg/__init__.py f"]


def test_the_limits_and_their_boundaries() -> None:
    check_text("x = " + "(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH + "\n", "f.py")
    with pytest.raises(InputError) as err:
        check_text("x = 1\ny = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n", "f.py")
    assert err.value.message.startswith("f.py:2: brackets nested more than 100 deep")
    check_text("x = " + "+".join(["1"] * (MAX_CHAIN + 1)) + "\n", "f.py")  # MAX_CHAIN operators: fine
    with pytest.raises(InputError) as err:
        check_text("x = " + " or ".join(["a"] * (MAX_CHAIN + 2)) + "\n", "f.py")
    assert err.value.message.startswith("f.py:1: more than 1000 operators chained")
    check_text("x = [" + ", ".join(["a + b"] * 5000) + "]\n", "f.py")  # a long list: each element its own chain
    check_text("x = 1 +\n", "f.py")  # does not tokenize: left to the parser, which names the syntax error
    check_control("tab\there\r\n\f", "f.py")
    with pytest.raises(InputError):
        check_control("a\x7fb", "f.py")
