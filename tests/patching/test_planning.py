"""patching/planning.py's verdicts on small trees made here, pinned word for word: requirements met
or not (pre-releases included, every alternative named), the installed version read from the
dist-info name. Real wheels: tests/patching/test_engine.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envforge.patching import apply, load_patchsets, plan
from envforge.patching.patchset import Patchset
from envforge.core.errors import CheckFailed, InputError
from envforge.patching.manifest import Intent, IntentFile, intent_path, write_intent
from envforge.patching.planning import inside, installed_version, refuse_interrupted
from envforge.patching.resolution import shadow_fix
from envforge.patching.states import PatchReport

PATCHSET = """\
[patchset]
id = "demo"
distribution = "Demo_Pkg"
versions = ">=1.0,<2"
reason = "because"
{requires}
[[operation]]
kind = "add-list-element"
file = "demo/m.py"
function = "f"
call = "c"
keyword = "k"
element = "1"
"""


def _tree(tmp_path: Path, requires: str, *dists: str) -> tuple[Path, Path]:
    sp = tmp_path / "sp"
    (sp / "demo").mkdir(parents=True)
    (sp / "demo" / "m.py").write_text("def f():\n    return c(k=[0])\n")
    for d in ("demo_pkg-1.0", *dists):
        (sp / f"{d}.dist-info").mkdir()
    sets = tmp_path / "patchsets"
    sets.mkdir()
    (sets / "demo.toml").write_text(PATCHSET.format(requires=requires))
    return sp, sets


def test_installed_version_is_read_from_the_dist_info_name(tmp_path: Path) -> None:
    for d in ("flashinfer_python-0.6.4", "sgl_kernel-0.3.21+cu130", "not-a-dist-info"):
        (tmp_path / f"{d}.dist-info").mkdir()
    (tmp_path / "torch-2.9.1.dist-info").write_text("")  # a file of that name still names the version
    assert installed_version(tmp_path, "flashinfer-python") == "0.6.4"
    assert installed_version(tmp_path, "SGL_Kernel") == "0.3.21+cu130"  # the version keeps its label
    assert installed_version(tmp_path, "torch") == "2.9.1"
    assert installed_version(tmp_path, "not") == "a-dist-info"  # the first '-' splits name and version
    assert installed_version(tmp_path, "absent") is None


@pytest.mark.parametrize(
    ("requires", "dists", "unmet"),
    [
        # a pre-release inside the specifier meets it (planning asks with prereleases=True)
        ('[[patchset.requires]]\nany-of = ["other-dist>=2.0"]\n', ("other_dist-2.1rc1",), None),
        (
            '[[patchset.requires]]\nany-of = ["other-dist>=2.0"]\n',
            ("other_dist-1.9",),
            "demo refused: requirement `other-dist>=2.0` is unmet (other-dist is 1.9)",
        ),
        (
            '[[patchset.requires]]\nany-of = ["other-dist>=2.0", "patchset:base"]\nreason = "needs the new API"\n',
            (),
            "demo refused: requirement `other-dist>=2.0 | patchset:base` is unmet (other-dist is not installed; "
            "patchset base is not applied); needs the new API",
        ),
    ],
)
def test_requirements_met_or_refused_naming_every_alternative(
    tmp_path: Path, requires: str, dists: tuple[str, ...], unmet: str | None
) -> None:
    sp, sets = _tree(tmp_path, requires, *dists)
    report = plan(sp, load_patchsets(sets, ["demo"]))
    if unmet is None:
        assert report.ok and [(r.patchset, r.state) for r in report.results] == [("demo", "applied")]
        return
    assert report.results == () and [(u.patchset, u.requirement, u.message) for u in report.unmet] == [
        ("demo", unmet.split("`")[1], unmet)
    ]


def _dict_tree(tmp_path: Path, source: str, value: str) -> tuple[Path, Path]:
    """``demo/m.py`` = ``source``; patchset ``demo``: key 1 into T (there already), key 3 = ``value`` into U."""
    sp = tmp_path / "sp"
    (sp / "demo").mkdir(parents=True)
    (sp / "demo" / "m.py").write_text(source, encoding="utf-8")
    (sp / "demo_pkg-1.0.dist-info").mkdir()
    sets = tmp_path / "patchsets"
    sets.mkdir()
    (sets / "demo.toml").write_text(
        '[patchset]\nid = "demo"\ndistribution = "Demo_Pkg"\nversions = ">=1.0,<2"\nreason = "because"\n'
        '[[operation]]\nkind = "add-dict-entry"\nfile = "demo/m.py"\ntarget = "T"\nkey = 1\nvalue = "1"\n'
        f'[[operation]]\nkind = "add-dict-entry"\nfile = "demo/m.py"\ntarget = "U"\nkey = 3\nvalue = {value}\n'
    )
    return sp, sets


def test_an_edit_that_would_not_run_drifts_only_the_operations_that_edit(tmp_path: Path) -> None:
    sp, sets = _dict_tree(tmp_path, "T = {1: 1}\nU = {2: 2}\n", '"undefined_one + undefined_two"')
    report = plan(sp, load_patchsets(sets, ["demo"]))
    assert [(r.state, r.message) for r in report.results] == [
        ("upstream-fixed", "T already has key 1"),
        (
            "drifted",
            "demo: demo/m.py: the patched file would not run: pyflakes: line 2: undefined name "
            "'undefined_one'; pyflakes: line 2: undefined name 'undefined_two'; nothing written; installed "
            "demo-pkg 1.0. Next step: in demo.toml, change the operation so the patched module compiles and "
            "defines every name it uses (or narrow `versions` to exclude this release)",
        ),
    ]
    assert report.changes == ()


def test_an_edit_the_declared_encoding_cannot_hold_drifts_only_the_operations_that_edit(tmp_path: Path) -> None:
    sp, sets = _dict_tree(tmp_path, "# -*- coding: ascii -*-\nT = {1: 1}\nU = {2: 2}\n", '"\\"caf\\u00e9\\""')
    report = plan(sp, load_patchsets(sets, ["demo"]))
    assert [(r.state, r.message) for r in report.results] == [
        ("upstream-fixed", "T already has key 1"),
        (
            "drifted",
            "demo: demo/m.py: the patched file cannot be written back: the edit holds 'é' (U+00E9), which "
            "the file's declared encoding ascii (PEP 263 coding cookie) cannot hold; nothing written; "
            "installed demo-pkg 1.0. Next step: in demo.toml, write 'é' as the escape \\xe9 (in a string "
            "literal) in the operation's code, so the file stays ascii",
        ),
    ]


def test_a_file_that_does_not_parse_drifts_every_operation_on_it(tmp_path: Path) -> None:
    sp, sets = _dict_tree(tmp_path, "def f(:\n", '"3"')
    report = plan(sp, load_patchsets(sets, ["demo"]))
    assert [(r.state, r.message) for r in report.results] == [
        (
            "drifted",
            f"demo: demo/m.py: file does not parse: invalid syntax (<unknown>, line 1); anchor {anchor}; "
            "installed demo-pkg 1.0, patchset written for demo-pkg>=1.0,<2. Next step: read the installed "
            f"file, then update the anchor in demo.toml or narrow its `versions` to exclude 1.0",
        )
        for anchor in ("`T = {...}`", "`U = {...}`")
    ]


TWO_FILES = {"demo/a.py": "T = {1: 1}\n", "demo/b.py": "U = {2: 2}\n"}
TWO_OPS = (
    '[[operation]]\nkind = "add-dict-entry"\nfile = "demo/a.py"\ntarget = "T"\nkey = 3\nvalue = "3"\n'
    '[[operation]]\nkind = "add-dict-entry"\nfile = "demo/b.py"\ntarget = "U"\nkey = 4\nvalue = "4"\n'
)


def _two(
    tmp_path: Path, files: dict[str, str] = TWO_FILES, dist: str = "demo_pkg-1.0", requires: str = ""
) -> tuple[Path, list[Patchset]]:
    sp = tmp_path / "sp"
    for rel, text in files.items():
        (sp / rel).parent.mkdir(parents=True, exist_ok=True)
        (sp / rel).write_text(text)
    (sp / f"{dist}.dist-info").mkdir(parents=True)
    sets = tmp_path / "patchsets"
    sets.mkdir()
    (sets / "demo.toml").write_text(
        '[patchset]\nid = "demo"\ndistribution = "Demo_Pkg"\nversions = ">=1.0,<2"\n'
        'reason = "because"\n' + requires + TWO_OPS
    )
    return sp, list(load_patchsets(sets, ["demo"]))


def _rows(report: PatchReport) -> list[tuple[str, str, str, str, str]]:
    return [(r.patchset, r.file, r.operation, r.state, r.message) for r in report.results]


def test_out_of_range_names_the_installed_version_and_a_prerelease_inside_is_in_range(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path / "a", dist="demo_pkg-2.0")
    assert _rows(plan(sp, sets)) == [
        (
            "demo",
            "demo/a.py",
            "add-dict-entry T[3]",
            "out-of-range",
            "installed demo-pkg 2.0; demo is written for demo-pkg>=1.0,<2",
        ),
        (
            "demo",
            "demo/b.py",
            "add-dict-entry U[4]",
            "out-of-range",
            "installed demo-pkg 2.0; demo is written for demo-pkg>=1.0,<2",
        ),
    ]
    sp, sets = _two(tmp_path / "b", dist="demo_pkg-1.5rc1")
    assert [r.state for r in plan(sp, sets).results] == ["applied", "applied"]


def test_an_editable_install_drifts_every_operation_naming_its_checkout(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path)
    (sp / "demo_pkg-1.0.dist-info" / "direct_url.json").write_text(
        json.dumps({"url": "file:///src/demo", "dir_info": {"editable": True}})
    )
    msg = (
        "demo: {f}: demo_pkg 1.0 is an editable install from /src/demo (PEP 610 direct_url.json: "
        "dir_info.editable): its code is in that checkout, not in site-packages, so nothing was written. Next step: "
        f"apply the patchset's diff in the checkout (`envforge patches export demo --site-packages {sp} -o "
        "demo.diff`, then `patch -p1 -d /src/demo < demo.diff`), or install the released wheel instead (`uv pip "
        "install --python <env>/bin/python demo_pkg==1.0`) and run apply-patches again"
    )
    assert _rows(plan(sp, sets)) == [
        ("demo", "demo/a.py", "add-dict-entry T[3]", "drifted", msg.format(f="demo/a.py")),
        ("demo", "demo/b.py", "add-dict-entry U[4]", "drifted", msg.format(f="demo/b.py")),
    ]


def test_one_shadowed_file_holds_back_the_patchset_s_other_files(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path)
    report = plan(sp, sets, shadowed={"demo/b.py": "the interpreter imports demo.b from demo/b.so"})
    assert _rows(report)[0] == (
        "demo",
        "demo/a.py",
        "add-dict-entry T[3]",
        "applied",
        "added key 3 to T; not written: another file of this patchset is not the one the interpreter imports",
    )
    assert _rows(report)[1][:4] == ("demo", "demo/b.py", "add-dict-entry U[4]", "shadowed")
    assert report.changes == ()


def test_a_missing_file_drifts_and_the_next_file_is_still_planned(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path, files={"demo/b.py": "U = {2: 2}\n"})
    assert _rows(plan(sp, sets)) == [
        (
            "demo",
            "demo/a.py",
            "add-dict-entry T[3]",
            "drifted",
            "demo: demo/a.py: file is missing; anchor `T = {...}`; installed demo-pkg 1.0, patchset written for "
            "demo-pkg>=1.0,<2. Next step: read the installed file, then update the anchor in demo.toml or narrow its "
            "`versions` to exclude 1.0",
        ),
        (
            "demo",
            "demo/b.py",
            "add-dict-entry U[4]",
            "applied",
            "added key 4 to U; not written: another operation of this patchset drifted",
        ),
    ]


def test_every_unmet_requirement_is_named(tmp_path: Path) -> None:
    sp, sets = _two(
        tmp_path,
        requires='[[patchset.requires]]\nany-of = ["x-dist>=1"]\n[[patchset.requires]]\nany-of = ["y-dist>=1"]\n',
    )
    assert [(u.patchset, u.requirement, u.message) for u in plan(sp, sets).unmet] == [
        ("demo", "x-dist>=1", "demo refused: requirement `x-dist>=1` is unmet (x-dist is not installed)"),
        ("demo", "y-dist>=1", "demo refused: requirement `y-dist>=1` is unmet (y-dist is not installed)"),
    ]


def test_already_applied_after_an_apply(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path)
    assert apply(sp, sets).written
    assert _rows(plan(sp, sets)) == [
        (
            "demo",
            "demo/a.py",
            "add-dict-entry T[3]",
            "already-applied",
            "recorded in the patch manifest; file unchanged since",
        ),
        (
            "demo",
            "demo/b.py",
            "add-dict-entry U[4]",
            "already-applied",
            "recorded in the patch manifest; file unchanged since",
        ),
    ]


def test_an_operation_that_raises_is_drifted_with_its_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operation never raises by design; one that does (a bug in it) is a drift naming the
    exception, never upstream-fixed or already-applied."""
    sp, sets = _two(tmp_path)
    op = sets[0].operations[0]

    def boom(self: object, module: object, ctx: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(type(op), "run", boom)
    assert [(r.state, r.message.split("; anchor")[0]) for r in plan(sp, sets).results] == [
        ("drifted", "demo: demo/a.py: operation failed: RuntimeError: boom"),
        ("drifted", "demo: demo/b.py: operation failed: RuntimeError: boom"),
    ]


def test_inside_refuses_a_path_that_leaves_site_packages_or_names_no_file(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "demo").mkdir(parents=True)
    assert inside(sp, "demo/m.py") == sp / "demo" / "m.py"
    for path in ("demo/..", "../x.py", "/etc/passwd", "demo/../../x.py"):
        with pytest.raises(InputError, match=r"outside site-packages"):
            inside(sp, path)


def test_a_shadowed_file_says_what_its_state_was(tmp_path: Path) -> None:
    sp, sets = _two(tmp_path, files={"demo/a.py": "T = {1: 1, 3: 3}\n", "demo/b.py": "U = {2: 2}\n"})
    why = "the interpreter imports demo.a from demo/a.so"
    (row,) = [r for r in plan(sp, sets, shadowed={"demo/a.py": why}).results if r.file == "demo/a.py"]
    assert (row.state, row.message) == (
        "shadowed",
        f"demo: demo/a.py: the source already has the fix, but {why}: "
        "the patched source never runs. Next step: " + shadow_fix("demo-pkg", "demo.toml"),
    )


def test_an_interrupted_revert_of_two_patchsets_names_both_and_each_file_s_state(tmp_path: Path) -> None:
    sp, _ = _two(tmp_path)
    a = hashlib.sha256(b"T = {1: 1}\n").hexdigest()
    write_intent(
        sp,
        Intent(
            "revert",
            ("demo", "other"),
            "absent",
            (IntentFile("demo/a.py", "0" * 64, a), IntentFile("../outside.py", "0" * 64, a)),
        ),
    )
    with pytest.raises(CheckFailed) as exc:
        refuse_interrupted(sp)
    assert exc.value.message == (
        f"an `apply-patches --revert` of demo, other was interrupted while writing demo/a.py, ../outside.py (record "
        f"{intent_path(sp)}): some of these files may be written and others not (written: demo/a.py; changed "
        "otherwise: ../outside.py)"
    )


def test_a_drifted_patchset_does_not_meet_a_later_patchset_s_requirement(tmp_path: Path) -> None:
    """``later`` requires patchset ``demo``. When ``demo`` applies, ``later`` is planned; when it
    drifts (its call is gone from the installed file), ``later`` is refused naming it."""
    later = (
        '[patchset]\nid = "later"\ndistribution = "Demo_Pkg"\nversions = ">=1.0,<2"\nreason = "after demo"\n'
        '[[patchset.requires]]\nany-of = ["patchset:demo"]\n'
        '[[operation]]\nkind = "add-dict-entry"\nfile = "demo/n.py"\ntarget = "T"\nkey = 2\nvalue = "2"\n'
    )
    for source, states, unmet in (
        ("def f():\n    return c(k=[0])\n", [("demo", "applied"), ("later", "applied")], []),
        ("def f():\n    return 0\n", [("demo", "drifted")], [("later", "patchset:demo")]),
    ):
        sp, sets = _tree(tmp_path / str(len(states)), "")
        (sp / "demo" / "m.py").write_text(source)
        (sp / "demo" / "n.py").write_text("T = {1: 1}\n")
        (sets / "later.toml").write_text(later)
        report = plan(sp, load_patchsets(sets, ["demo", "later"]))
        assert [(r.patchset, r.state) for r in report.results] == states
        assert [(u.patchset, u.requirement) for u in report.unmet] == unmet
    assert (
        report.unmet[0].message == "later refused: requirement `patchset:demo` is unmet (patchset demo is not applied)"
    )
