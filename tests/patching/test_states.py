"""patching/states.py: the report's verdict (ok, errors), its JSON form and its diff, pinned with
literal values (the schema docs/patching.md documents for ``apply-patches --json``)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from envforge.patching.states import (
    ALREADY_APPLIED,
    APPLIED,
    DRIFTED,
    FAILED,
    OUT_OF_RANGE,
    SHADOWED,
    STATES,
    UPSTREAM_FIXED,
    FileChange,
    State,
    OperationResult,
    PatchReport,
    Unmet,
    state_of,
    unified_diff,
)


def _result(state: str, message: str = "m", patchset: str = "p") -> OperationResult:
    return OperationResult(patchset, "pkg/mod.py", "replace", state, message)


def test_the_state_names_are_the_documented_spellings() -> None:
    assert STATES == ("applied", "already-applied", "upstream-fixed", "out-of-range", "drifted", "shadowed")
    assert FAILED == ("drifted", "shadowed")


def test_ok_and_errors_for_each_state() -> None:
    for state in (APPLIED, ALREADY_APPLIED, UPSTREAM_FIXED, OUT_OF_RANGE):
        report = PatchReport(Path("/sp"), results=(_result(state, "fine"),))
        assert report.ok and report.errors == ()
    for state in (DRIFTED, SHADOWED):
        report = PatchReport(Path("/sp"), results=(_result(APPLIED, "fine"), _result(state, f"{state} here")))
        assert not report.ok and report.errors == (f"{state} here",)
    unmet = PatchReport(
        Path("/sp"),
        results=(_result(DRIFTED, "d1"), _result(SHADOWED, "s1")),
        unmet=(Unmet("q", "torch>=2.9", "q needs torch>=2.9"),),
    )
    assert not unmet.ok and unmet.errors == ("d1", "s1", "q needs torch>=2.9")
    assert not PatchReport(Path("/sp"), unmet=(Unmet("q", "r", "u"),)).ok
    assert PatchReport(Path("/sp")).ok


def test_to_dict_is_the_documented_json_with_several_of_each() -> None:
    report = PatchReport(
        Path("/env/lib/python3.12/site-packages"),
        results=(
            OperationResult("sm120", "sglang/a.py", "replace #1", APPLIED, "applied"),
            OperationResult("eagle3", "sglang/b.py", "insert #2", DRIFTED, "anchor missing"),
        ),
        changes=(
            FileChange("sm120", "sglang/a.py", b"x = 1\n", b"x = 2\n"),
            FileChange("eagle3", "sglang/b.py", b"", b"y = 1\n"),
        ),
        unmet=(Unmet("eagle3", "sglang>=0.5.9", "eagle3 needs sglang>=0.5.9"),),
        activations=(("sm120", "--enable-sm120"), ("eagle3", "--speculative-algorithm EAGLE3")),
        written=True,
        recovered=("restored sglang/a.py",),
    )
    assert report.to_dict() == {
        "site-packages": "/env/lib/python3.12/site-packages",
        "written": True,
        "ok": False,
        "results": [
            {
                "patchset": "sm120",
                "file": "sglang/a.py",
                "operation": "replace #1",
                "state": "applied",
                "message": "applied",
            },
            {
                "patchset": "eagle3",
                "file": "sglang/b.py",
                "operation": "insert #2",
                "state": "drifted",
                "message": "anchor missing",
            },
        ],
        "unmet": [{"patchset": "eagle3", "requirement": "sglang>=0.5.9", "message": "eagle3 needs sglang>=0.5.9"}],
        "activations": [
            {"patchset": "sm120", "flag": "--enable-sm120"},
            {"patchset": "eagle3", "flag": "--speculative-algorithm EAGLE3"},
        ],
        "files": ["sglang/a.py", "sglang/b.py"],
        "recovered": ["restored sglang/a.py"],
    }
    assert PatchReport(Path("/sp")).to_dict() == {
        "site-packages": "/sp",
        "written": False,
        "ok": True,
        "results": [],
        "unmet": [],
        "activations": [],
        "files": [],
        "recovered": [],
    }


def test_diff_of_several_changes_with_a_prefix_per_patchset() -> None:
    report = PatchReport(
        Path("/sp"),
        changes=(
            FileChange("sm120", "sglang/a.py", b"x = 1\ny = 1\n", b"x = 2\ny = 1\n"),
            FileChange("eagle3", "sglang/b.py", b"z = 1\n", b"z = 1\nw = 2\n"),
        ),
    )
    assert report.diff({"sm120": "site-packages/"}) == (
        "--- a/site-packages/sglang/a.py\n+++ b/site-packages/sglang/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 1\n"
        "--- a/sglang/b.py\n+++ b/sglang/b.py\n@@ -1 +1,2 @@\n z = 1\n+w = 2\n"
    )
    assert report.diff() == (
        "--- a/sglang/a.py\n+++ b/sglang/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 1\n"
        "--- a/sglang/b.py\n+++ b/sglang/b.py\n@@ -1 +1,2 @@\n z = 1\n+w = 2\n"
    )
    assert PatchReport(Path("/sp")).diff() == ""


def test_unified_diff_reads_each_side_in_its_declared_encoding() -> None:
    before = "# -*- coding: latin-1 -*-\nname = 'caf\u00e9'\n".encode("latin-1")
    after = "# -*- coding: latin-1 -*-\nname = 'caf\u00e9s'\n".encode("latin-1")
    assert unified_diff(FileChange("p", "m.py", before, after)) == (
        "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n # -*- coding: latin-1 -*-\n-name = 'caf\u00e9'\n"
        "+name = 'caf\u00e9s'\n"
    )
    assert unified_diff(FileChange("p", "m.py", b"a\n", b"a\n")) == ""


def test_the_state_type_lists_every_state_and_reads_back_only_those() -> None:
    assert get_args(State) == (
        "applied", "already-applied", "upstream-fixed", "out-of-range", "drifted", "shadowed", "reverted"
    )  # fmt: skip
    assert [state_of(s) for s in get_args(State)] == list(get_args(State))
    for bad in ("Applied", "", "applied ", None, 1, ["applied"]):
        with pytest.raises(ValueError) as exc:
            state_of(bad)
        assert str(exc.value) == f"not a patch state: {bad!r}"
