"""``envforge patches new`` / ``patches commit``: a hand edit of real sglang code becomes a patchset
that applies, re-applies, reverts, exports and is checked against other releases (issue 16.3)."""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from pathlib import Path

import pytest
from tests.conftest import CACHE, cached_wheel
from tests.support.patching_trees import slim_tree

from envforge.cli import main
from envforge.patching import load_patchsets, plan

COMM = "sglang/srt/layers/communicator.py"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edit_guard(path: Path) -> None:
    """The field's SM120 edit, by hand: a method body, a function body, a module-level line."""
    text = path.read_text()
    for old, new in (
        (
            "        (_is_sm90_supported or _is_sm100_supported)\n        and _is_flashinfer_available",
            "        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n"
            "        and _is_flashinfer_available",
        ),
        (
            "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
            "_is_sm100_supported = _is_cuda and is_sm100_supported()\n"
            "_is_sm120_supported = _is_cuda and torch.cuda.get_device_capability()[0] == 12\n",
        ),
        ("        )(context=context, **kwargs)\n", "        )(context=context, **kwargs)  # captured\n"),
    ):
        assert text.count(old) == 1
        text = text.replace(old, new)
    path.write_text(text)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "recipes").mkdir(parents=True)
    (root / "patchsets").mkdir()
    return root


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_captured_edit_round_trip_on_sglang_059(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    released = sha(sp / COMM)
    edit = tmp_path / "edit"
    code, out, err = cli(
        capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project)
    )
    assert (code, out) == (0, f"{edit}\n")
    assert err.startswith(
        "6 Python files of sglang 0.5.9 copied (as released); edit them, then: envforge patches "
        f"commit {edit} --id NAME --reason"
    )
    assert sha(edit / COMM) == released
    edit_guard(edit / COMM)
    code, out, err = cli(
        capsys,
        "patches",
        "commit",
        str(edit),
        "--id",
        "sm120-captured",
        "--reason",
        "SM120 guard",
        "--versions",
        ">=0.5.8,<0.5.21",
        "--project",
        str(project),
    )
    target = project / "patchsets" / "sm120-captured.toml"
    assert (code, out) == (0, f"{target}\n")
    assert err.splitlines() == [
        f"  replace-definition {COMM} apply_flashinfer_allreduce_fusion",
        f"  replace-definition {COMM} CommunicateSummableTensorPairFn.execute",
        f"  add-statement {COMM} `_is_sm120_supported = _is_cuda and torch.cuda.get_device_cap`",
    ]
    data = tomllib.loads(target.read_text())
    assert data["patchset"] == {
        "id": "sm120-captured",
        "distribution": "sglang",
        "versions": ">=0.5.8,<0.5.21",
        "reason": "SM120 guard",
    }
    ops = data["operation"]
    assert [(o["kind"], o.get("definition")) for o in ops] == [
        ("replace-definition", "apply_flashinfer_allreduce_fusion"),
        ("replace-definition", "CommunicateSummableTensorPairFn.execute"),
        ("add-statement", None),
    ]
    assert ops[0]["code"].startswith("def apply_flashinfer_allreduce_fusion(batch_size: int):\n    return (\n")
    assert "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)" in ops[0]["code"]
    assert ops[2] == {
        "kind": "add-statement",
        "file": COMM,  # anchored to the statement before it, by code
        "after-statement": "_is_sm100_supported = _is_cuda and is_sm100_supported()\n",
        "code": "_is_sm120_supported = _is_cuda and torch.cuda.get_device_capability()[0] == 12\n",
    }

    # applies to a fresh copy of the release: byte-identical to the hand edit; re-applies; reverts
    args = ("--site-packages", str(sp), "sm120-captured", "--project", str(project))
    code, out, _ = cli(capsys, "apply-patches", *args)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["applied"] * 3
    assert (sp / COMM).read_bytes() == (edit / COMM).read_bytes()
    code, out, _ = cli(capsys, "apply-patches", *args)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["already-applied"] * 3
    code, out, _ = cli(
        capsys,
        "patches",
        "export",
        "sm120-captured",
        "--site-packages",
        str(slim_tree(tmp_path / "plain", ("sglang", "0.5.9"))),
        "--project",
        str(project),
    )
    assert code == 0 and out.startswith(f"--- a/{COMM}\n+++ b/{COMM}\n")
    assert "+_is_sm120_supported = _is_cuda and torch.cuda.get_device_capability()[0] == 12\n" in out
    code, _, _ = cli(capsys, "apply-patches", "--site-packages", str(sp), "--revert", "--project", str(project))
    assert code == 0 and sha(sp / COMM) == released
    # a release that already has the edit (as an upstream fix would): upstream-fixed, nothing written
    fixed = slim_tree(tmp_path / "fixed", ("sglang", "0.5.9"))
    shutil.copyfile(edit / COMM, fixed / COMM)
    report = plan(fixed, load_patchsets(project / "patchsets"))
    assert [r.state for r in report.results] == ["upstream-fixed"] * 3 and report.changes == ()


@pytest.mark.network
def test_captured_definitions_follow_their_code_not_their_lines(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5.8 has the same definitions two lines higher: applied; 0.5.10 changed the guard function:
    drifted, naming both digests."""
    cached_wheel("sglang", "0.5.8")
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit = tmp_path / "edit"
    assert (
        cli(capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project))[
            0
        ]
        == 0
    )
    edit_guard(edit / COMM)
    assert (
        cli(
            capsys,
            "patches",
            "commit",
            str(edit),
            "--id",
            "sm120-captured",
            "--reason",
            "r",
            "--versions",
            ">=0.5.8,<0.5.21",
            "--project",
            str(project),
        )[0]
        == 0
    )
    sets = load_patchsets(project / "patchsets")
    old = slim_tree(tmp_path / "old", ("sglang", "0.5.8"))
    assert [r.state for r in plan(old, sets).results] == ["applied"] * 3
    code, out, err = cli(
        capsys,
        "patches",
        "check",
        "--against",
        "sglang==0.5.8",
        "--against",
        "sglang==0.5.10",
        "--cache",
        str(CACHE),
        "--project",
        str(project),
    )
    assert code == 1
    assert out == "sglang  sm120-captured\n0.5.8   applied\n0.5.10  drifted\n"
    assert (
        "error: sm120-captured on sglang 0.5.10: sm120-captured: sglang/srt/layers/communicator.py: "
        "apply_flashinfer_allreduce_fusion changed upstream: digest sha256:280d0d26ad7038d6a68df4f7eafaae21"
        "f674e2863c5f915e7a41ad838270e8c0, the patch was written against sha256:"
    ) in err


def test_commit_refuses_what_it_cannot_express(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit = tmp_path / "edit"
    cli(capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project))
    base = ("patches", "commit", str(edit), "--id", "x", "--reason", "r", "--project", str(project))
    code, _, err = cli(capsys, *base)
    assert (code, err.splitlines()[0]) == (2, f"error: {edit}: no file differs from the released sglang 0.5.9")
    text = (edit / COMM).read_text()
    # a class turned into a function of the same name: no operation expresses it
    (edit / COMM).write_text(
        text.replace(
            "def apply_flashinfer_allreduce_fusion(batch_size: int):", "class apply_flashinfer_allreduce_fusion:", 1
        )
    )
    code, _, err = cli(capsys, *base)
    assert (code, err.splitlines()[0]) == (
        2,
        f"error: {COMM}: apply_flashinfer_allreduce_fusion changed between a function and a class",
    )
    (edit / COMM).write_text(text)
    code, _, err = cli(
        capsys, "patches", "commit", str(tmp_path), "--id", "x", "--reason", "r", "--project", str(project)
    )
    assert code == 2 and "not an edit directory (.envforge-edit.json" in err
    code, _, err = cli(
        capsys,
        "patches",
        "new",
        "nope",
        "--site-packages",
        str(sp),
        "-o",
        str(tmp_path / "e2"),
        "--project",
        str(project),
    )
    assert code == 2 and f"error: nope is not installed in {sp}" in err
    shutil.rmtree(edit)


@pytest.mark.parametrize(
    ("pid", "reason", "message"),
    [
        (
            "../../x",
            "r",
            "error: --id '../../x' is not a patchset id: letters, digits, '-' and '_', starting with a letter "
            "or digit, at most 100 characters (no '/', '.', space or empty id)",
        ),
        (
            "",
            "r",
            "error: --id '' is not a patchset id: letters, digits, '-' and '_', starting with a letter or digit, "
            "at most 100 characters (no '/', '.', space or empty id)",
        ),
        ("a/b", "r", None),
        ("cap 1", "r", None),
        ("x.y", "r", None),
        ("_x", "r", None),
        ("x" * 101, "r", None),
        ("ok-id_1", "", "error: --reason is empty: a patchset says why it exists"),
        ("ok-id_1", "  ", "error: --reason is empty: a patchset says why it exists"),
    ],
)
def test_commit_validates_id_and_reason_before_writing_anything(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], pid: str, reason: str, message: str | None
) -> None:
    """Field cases N89, N90: `--id ../../x` wrote outside the project, `--id ""` left patchsets/.toml."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit = tmp_path / "d1" / "d2" / "edit"
    cli(capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project))
    (edit / COMM).write_text((edit / COMM).read_text() + "\nCAPTURED = 1\n")
    before = sorted(p for p in tmp_path.rglob("*.toml"))
    code, out, err = cli(
        capsys, "patches", "commit", str(edit), "--id", pid, "--reason", reason, "--project", str(project)
    )
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == (
        message
        or f"error: --id {pid!r} is not a patchset id: letters, digits, '-' and "
        "'_', starting with a letter or digit, at most 100 characters (no '/', '.', "
        "space or empty id)"
    )
    assert sorted(p for p in tmp_path.rglob("*.toml")) == before  # nothing written anywhere
    assert cli(capsys, "patches", "list", "--project", str(project))[0] == 0


def test_the_loader_refuses_the_ids_commit_refuses(tmp_path: Path) -> None:
    from envforge.patching.patchset import PatchsetError, load_patchset

    for stem, reason in (("x.y", "r"), ("cap 1", "r"), ("ok", "")):
        path = tmp_path / f"{stem}.toml"
        path.write_text(
            f'[patchset]\nid = "{stem}"\ndistribution = "d"\nversions = "==1"\nreason = "{reason}"\n'
            '\n[[operation]]\nkind = "replace-text"\nfile = "d/a.py"\nbefore = "a"\nafter = "b"\n'
        )
        with pytest.raises(
            PatchsetError,
            match=r"patchset\.(id: '" + stem.replace(".", r"\.") + "' is not a patchset "
            r"id|reason is empty)",
        ):
            load_patchset(path)


def test_commit_of_a_non_utf8_edit_is_exit_2_naming_the_byte(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Field case N88: it was exit 70 (SyntaxError from the parser)."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit = tmp_path / "edit"
    cli(capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project))
    for data, message in (
        (b"\xff\xfeVALUE\n", "is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8"),
        (b"VALUE = 1\n\xe9\n", ":2: byte 0xe9 at offset 10 is not UTF-8"),
    ):
        (edit / COMM).write_bytes(data)
        code, _, err = cli(
            capsys, "patches", "commit", str(edit), "--id", "cap1", "--reason", "x", "--project", str(project)
        )
        assert (code, err.splitlines()[0]) == (2, f"error: {edit / COMM}{' ' if message[0] == 'i' else ''}{message}")
    assert not (project / "patchsets" / "cap1.toml").exists()


def test_write_patchset_puts_the_target_back_when_its_check_fails(tmp_path: Path) -> None:
    """A refused import (its round trip) or a --force over an existing patchset leaves the old bytes."""
    from envforge.core.errors import InputError
    from envforge.patching.capture import check_versions, write_patchset

    meta = {"id": "p", "distribution": "sglang", "versions": "==0.5.9", "reason": "r"}
    ops = [{"kind": "replace-text", "file": "sglang/a.py", "before": "a = 1\n", "after": "a = 2\n"}]

    def refuse(_: Path) -> None:
        raise InputError("refused")

    target = tmp_path / "p.toml"
    with pytest.raises(InputError) as refused:
        write_patchset(target, meta, ops, comment="c", check=refuse)
    assert refused.value.message == "refused"
    assert list(tmp_path.iterdir()) == []
    target.write_bytes(b"# the user's patchset\n")
    with pytest.raises(InputError) as refused:
        write_patchset(target, meta, ops, comment="c", check=refuse)
    assert refused.value.message == "refused"
    assert [p.name for p in tmp_path.iterdir()] == ["p.toml"]
    assert target.read_bytes() == b"# the user's patchset\n"
    with pytest.raises(InputError) as exc:
        check_versions("garbage")
    assert (exc.value.message, exc.value.hint) == (
        "--versions 'garbage' is not a PEP 440 version specifier",
        "e.g. --versions '>=0.5.8,<0.5.11', or leave it out for ==<the release>",
    )
    check_versions(">=0.5.8,<0.5.11")
    check_versions(None)


def test_a_hand_edit_that_appends_a_helper_and_calls_it_is_captured(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39: the commonest shape of a real fix, a helper added beside the guard that uses it, was
    refused ("definitions were added ... next to a module-level edit"); now one add-definition
    anchored after its neighbour, and the applied file is the edit byte for byte."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit = tmp_path / "edit"
    cli(capsys, "patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--project", str(project))
    text = (edit / COMM).read_text()
    anchor = "def apply_flashinfer_allreduce_fusion(batch_size: int):"
    helper = (
        'def _is_sm120(major: int) -> bool:\n    """SM120 (RTX PRO 6000 Blackwell)."""\n    return major == 12\n\n\n'
    )
    (edit / COMM).write_text(
        text.replace(anchor, helper + anchor, 1) + "\n\n# appended by hand\nSM120 = _is_sm120(12)\n"
    )
    code, out, err = cli(
        capsys, "patches", "commit", str(edit), "--id", "helper", "--reason", "r", "--project", str(project)
    )
    assert code == 0, err
    assert err.splitlines() == [f"  add-definition {COMM} _is_sm120", f"  add-statement {COMM} `SM120 = _is_sm120(12)`"]
    ops = tomllib.loads((project / "patchsets" / "helper.toml").read_text())["operation"]
    assert [{k: v for k, v in op.items() if k != "file"} for op in ops] == [
        {
            "kind": "add-definition",
            "definition": "_is_sm120",
            "after-statement": "FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048\n",
            "code": "\n\n" + helper.rstrip("\n") + "\n",
        },  # with the blank lines above it, as in the edit
        {
            "kind": "add-statement",
            "after-definition": "CommunicateSummableTensorPairFn",
            "code": "\n\n# appended by hand\nSM120 = _is_sm120(12)\n",
        },
    ]
    code, out, _ = cli(capsys, "apply-patches", "--site-packages", str(sp), "helper", "--project", str(project))
    assert code == 0 and (sp / COMM).read_bytes() == (edit / COMM).read_bytes()
    code, out, _ = cli(capsys, "apply-patches", "--site-packages", str(sp), "helper", "--project", str(project))
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["already-applied"] * 2


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("# temp debugging\nimport a\nimport b\n", "import b\n"),  # sglang 0.5.11 nsa/utils.py: the header comment goes
        ("import a\n", "# Copyright 2026\n\nimport a\n"),  # a licence header added
        ("import a\n# end\n", "import a\n"),  # a closing comment removed
        ("import a\n", "import a\n\n# end\n\n"),
    ],
)
def test_module_header_and_footer_comments_round_trip(old: str, new: str) -> None:
    import libcst as cst

    from envforge.patching.capture import capture_file
    from envforge.patching.operations import OPERATIONS, OpContext

    ops, _ = capture_file("m.py", old.encode(), new.encode(), label="m.py")
    module = cst.parse_module(old)
    for table in ops:
        op, problems = OPERATIONS[table["kind"]].from_table(dict(table), "operation", "")
        assert op is not None and not problems
        outcome = op.run(module, OpContext(read_text=lambda p: None, patchset_dir=Path(".")))
        assert outcome.status == "changed", outcome.detail
        module = outcome.module
    assert module.code == new
    again = cst.parse_module(new)
    for table in ops:  # on the patched text every operation holds
        op, _ = OPERATIONS[table["kind"]].from_table(dict(table), "operation", "")
        assert (
            op is not None
            and op.run(again, OpContext(read_text=lambda p: None, patchset_dir=Path("."))).status == "holds"
        )


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ('{"schema": 2, "files": {}}', "unknown schema"),
        ('{"schema": 1}', "unknown schema"),
        (
            "[" * 100_000 + "]" * 100_000,
            "maximum recursion depth exceeded while decoding a JSON array from a unicode string",
        ),
    ],
)
def test_a_damaged_edit_record_is_refused_with_its_words(tmp_path: Path, record: str, reason: str) -> None:
    """The record ``patches new`` writes, damaged: refused naming the directory and why, with the way
    to make a new one (nested too deeply was exit 70 before)."""
    from envforge.core.errors import InputError
    from envforge.patching.capture import RECORD_NAME, commit_edit

    (tmp_path / "edit").mkdir()
    (tmp_path / "edit" / RECORD_NAME).write_text(record)
    with pytest.raises(InputError) as refused:
        commit_edit(tmp_path / "edit", tmp_path / "patchsets", "demo-fix", "because")
    assert refused.value.message == f"{tmp_path / 'edit'}: not an edit directory ({RECORD_NAME}: {reason})"
    assert refused.value.hint == "make one with `envforge patches new DIST`"
