"""``envforge patches import``: an upstream unified diff becomes a patchset of per-definition
operations (issue 31), on the real flashinfer-python 0.6.16.post4 and 0.6.17 wheels.

tests/data/diffs/ holds the real change (``diff -u`` of ``flashinfer/jit/comm.py`` of the two
released wheels; README.md there says how it was made). ``patches check`` reads the two wheels from
a real local PEP 503 index on 127.0.0.1 (tests/support/localindex.py) serving them.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from tests.conftest import cached_wheel, unpacked_wheel
from tests.support.localindex import LocalIndex, serve
from tests.support.patching_trees import project_tree

from envforge.cli import main
from envforge.patching import load_patchset

DIFFS = Path(__file__).parent.parent / "data" / "diffs"
HUNK = DIFFS / "flashinfer-0.6.17-trtllm-comm-sm120.diff"
FULL = DIFFS / "flashinfer-0.6.16.post4-to-0.6.17-comm.diff"
COMM = "flashinfer/jit/comm.py"
ORIGIN = "https://github.com/flashinfer-ai/flashinfer/compare/v0.6.16.post4...v0.6.17"

pytestmark = [pytest.mark.slow, pytest.mark.network]  # the two real wheels, downloaded once into the test cache


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return project_tree(tmp_path / "proj")


def released(version: str) -> Path:
    """The unpacked real wheel (a site-packages tree), read only."""
    return unpacked_wheel("flashinfer-python", version)


def importing(project: Path, diff: Path, version: str, *extra: str) -> list[str]:
    return [
        "patches",
        "import",
        str(diff),
        "--id",
        "fi-sm120",
        "--reason",
        "SM120 trtllm comm",
        "--site-packages",
        str(released(version)),
        "--project",
        str(project),
        *extra,
    ]


def test_the_real_hunk_imports_applies_to_0_6_16_post4_and_is_upstream_fixed_on_0_6_17(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, *importing(project, HUNK, "0.6.16.post4", "--versions", ">=0.6.3,<=0.7.4", "--origin", ORIGIN)
    )
    assert (code, out) == (0, f"{project / 'patchsets' / 'fi-sm120.toml'}\n")
    sha = hashlib.sha256(HUNK.read_bytes()).hexdigest()
    assert err == (
        f"1 hunk applied exactly to flashinfer-python 0.6.16.post4 (diff sha256 {sha[:16]}...):\n"
        f"  replace-definition {COMM} gen_trtllm_comm_module\n"
    )
    text = (project / "patchsets" / "fi-sm120.toml").read_text()
    assert text == textwrap.dedent(f"""\
        # Imported by `envforge patches import` from {ORIGIN} on flashinfer-python 0.6.16.post4.

        [patchset]
        id = "fi-sm120"
        distribution = "flashinfer-python"
        versions = ">=0.6.3,<=0.7.4"
        reason = "SM120 trtllm comm"
        upstream-prefix = ""
        diff-sha256 = "{sha}"
        diff-origin = "{ORIGIN}"

        [[operation]]
        kind = "replace-definition"
        file = "flashinfer/jit/comm.py"
        definition = "gen_trtllm_comm_module"
        original-digest = "sha256:4e821219eb3b254a9f62472bd96c9e0a1eb4de0a9880f453956a0eb0a2fb7b91"
        code = '''def gen_trtllm_comm_module() -> JitSpec:
            nvcc_flags = current_compilation_context.get_nvcc_flags_list(
                supported_major_versions=[9, 10, 12]
            )
            return gen_jit_spec(
                "trtllm_comm",
                [
                    jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
                    jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce_fusion.cu",
                    jit_env.FLASHINFER_CSRC_DIR / "trtllm_moe_allreduce_fusion.cu",
                ],
                extra_cuda_cflags=nvcc_flags,
            )
        '''
        """)
    ps = load_patchset(project / "patchsets" / "fi-sm120.toml")
    assert (ps.diff_sha256, ps.diff_origin) == (sha, ORIGIN)

    # applied to a copy of the release, the file is what the diff makes of it, byte for byte
    sp = tmp_path / "sp"
    shutil.copytree(released("0.6.16.post4"), sp, ignore=shutil.ignore_patterns("*.so", "data", "csrc", ".complete"))
    assert run(capsys, "apply-patches", "--site-packages", str(sp), "fi-sm120", "--project", str(project))[0] == 0
    by_patch = tmp_path / "by-patch"
    (by_patch / COMM).parent.mkdir(parents=True)
    shutil.copy(released("0.6.16.post4") / COMM, by_patch / COMM)
    subprocess.run(["patch", "-p1", "-s", "-d", str(by_patch), "-i", str(HUNK)], check=True)  # GNU patch
    assert (sp / COMM).read_bytes() == (by_patch / COMM).read_bytes()

    index = LocalIndex(tmp_path / "index")
    for version in ("0.6.4", "0.6.16.post4", "0.6.17"):  # 0.6.4: an earlier release with the same code
        index.add(cached_wheel("flashinfer-python", version))
    with serve(index) as served:
        code, out, err = run(
            capsys,
            "patches",
            "check",
            "fi-sm120",
            "--against",
            "flashinfer-python>=0.6.4",
            "--index-url",
            served.url,
            "--cache",
            str(tmp_path / "cache"),
            "--project",
            str(project),
        )
    assert (code, out) == (
        0,
        textwrap.dedent("""\
        flashinfer-python  fi-sm120
        0.6.4              applied
        0.6.16.post4       applied
        0.6.17             upstream-fixed
        """),
    )


def test_the_whole_release_diff_adds_the_helper_beside_the_fix_and_is_upstream_fixed_on_0_6_17(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The release diff of comm.py adds gen_ulysses_a2a_module next to the guard fix (refused before
    issue 39): one replace-definition and one add-definition anchored after its neighbour; applied,
    the file is 0.6.17's byte for byte; on 0.6.17 both hold (upstream-fixed); revert gives back
    0.6.16.post4's bytes."""
    code, out, err = run(capsys, *importing(project, FULL, "0.6.16.post4", "--versions", ">=0.6.16"))
    assert (code, out) == (0, f"{project / 'patchsets' / 'fi-sm120.toml'}\n")
    assert err.splitlines()[1:] == [
        f"  replace-definition {COMM} gen_trtllm_comm_module",
        f"  add-definition {COMM} gen_ulysses_a2a_module",
    ]
    ops = load_patchset(project / "patchsets" / "fi-sm120.toml").operations
    assert [(op.kind, getattr(op, "after_definition", None)) for op in ops] == [
        ("replace-definition", None),
        ("add-definition", "gen_vllm_comm_module"),
    ]
    sp = tmp_path / "sp"
    shutil.copytree(released("0.6.16.post4"), sp, ignore=shutil.ignore_patterns("*.so", "data", "csrc", ".complete"))
    args = ("--site-packages", str(sp), "fi-sm120", "--project", str(project))
    code, out, _ = run(capsys, "apply-patches", *args)
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["applied", "applied"]
    assert (sp / COMM).read_bytes() == (released("0.6.17") / COMM).read_bytes()
    code, out, _ = run(capsys, "apply-patches", "--revert", *args)
    assert code == 0 and (sp / COMM).read_bytes() == (released("0.6.16.post4") / COMM).read_bytes()
    fixed = tmp_path / "fixed"
    shutil.copytree(released("0.6.17"), fixed, ignore=shutil.ignore_patterns("*.so", "data", "csrc", ".complete"))
    code, out, _ = run(
        capsys, "apply-patches", "--site-packages", str(fixed), "fi-sm120", "--project", str(project), "--dry-run"
    )
    assert code == 0 and [line.split()[0] for line in out.splitlines() if line.strip()] == [
        "upstream-fixed",
        "upstream-fixed",
    ]


def test_a_hunk_made_for_other_code_is_refused_with_the_line_it_needs(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *importing(project, HUNK, "0.6.17"))  # 0.6.17 already has [9, 10, 12]
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == (
        f"error: {HUNK}: {COMM} hunk @@ -189,7 +189,7 @@ does not apply exactly: line 192 is "
        "'        supported_major_versions=[9, 10, 12]', the hunk expects '        supported_major_versions=[9, 10]'; "
        "nothing written"
    )
    assert list((project / "patchsets").iterdir()) == []


def test_two_places_in_one_function_give_one_replace_definition(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a" / COMM, tmp_path / "b" / COMM
    original = (released("0.6.16.post4") / COMM).read_text()
    edited = original.replace(
        'source_paths = [jit_env.FLASHINFER_CSRC_DIR / "mixed_comm.cu"]',
        'source_paths = [jit_env.FLASHINFER_CSRC_DIR / "mixed_comm.cu"]  # SM120 too',
        1,
    )
    edited = edited.replace(
        "        return (local_tp_size * local_dp_size) % block_size_y == 0",
        "        return (local_tp_size * local_dp_size) % block_size_y == 0  # checked",
        1,
    )
    for path, text in ((a, original), (b, edited)):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    diff = subprocess.run(["diff", "-u", f"a/{COMM}", f"b/{COMM}"], cwd=tmp_path, capture_output=True, text=True)
    assert diff.stdout.count("\n@@ ") == 2  # two hunks, one function
    (tmp_path / "two.diff").write_text(diff.stdout)
    code, _, err = run(capsys, *importing(project, tmp_path / "two.diff", "0.6.16.post4"))
    assert code == 0
    assert err.splitlines()[1:] == [f"  replace-definition {COMM} gen_mixed_comm_module"]
    assert err.splitlines()[0].startswith("2 hunks applied exactly to flashinfer-python 0.6.16.post4 ")
    (op,) = load_patchset(project / "patchsets" / "fi-sm120.toml").operations
    assert op.kind == "replace-definition"


@pytest.mark.parametrize(
    ("diff", "message"),
    [
        ("not a diff\n", "{diff}: no file header (--- a/PATH, +++ b/PATH) in it"),
        (
            f"--- a/{COMM}\n+++ b/{COMM}\n@@ -1,2 +1,2 @@\n-x\n",
            "{diff}: not a unified diff: Hunk is shorter than expected",
        ),
        ("--- a/flashinfer/new.py\n+++ b/flashinfer/new.py\n", None),
        (
            "--- /dev/null\n+++ b/flashinfer/new.py\n@@ -0,0 +1 @@\n+x = 1\n",
            "{diff}: flashinfer/new.py hunk @@ -0,0 +1,1 @@: creates a file; a patchset edits existing Python files",
        ),
        (
            f"--- a/src/{COMM}\n+++ b/src/{COMM}\n@@ -1 +1 @@\n-a\n+b\n",
            "{diff}: src/flashinfer/jit/comm.py is not a file of any distribution installed in {sp}",
        ),
        (
            "diff --git a/flashinfer/a.py b/flashinfer/b.py\nsimilarity index 100%\nrename from flashinfer/a.py\n"
            "rename to flashinfer/b.py\n",
            "{diff}: flashinfer/a.py: renamed to flashinfer/b.py; a patchset edits files in place",
        ),
        (
            "diff --git a/flashinfer/x.so b/flashinfer/x.so\nindex 1..2 100644\n"
            "Binary files a/flashinfer/x.so and b/flashinfer/x.so differ\n",
            "{diff}: flashinfer/x.so: a binary file; a patchset edits Python source",
        ),
        (
            "--- a/flashinfer/README.md\n+++ b/flashinfer/README.md\n@@ -1 +1 @@\n-a\n+b\n",
            "{diff}: flashinfer/README.md hunk @@ -1,1 +1,1 @@: not a Python file; a patchset edits Python source",
        ),
        (
            "--- a/../etc/x.py\n+++ b/../etc/x.py\n@@ -1 +1 @@\n-a\n+b\n",
            "{diff}: ../etc/x.py: '../etc/x.py' must be a relative POSIX path inside site-packages (no '..' parts, not "
            "absolute), e.g. 'sglang/srt/server_args.py'",
        ),
    ],
)
def test_bad_input_exits_2_with_the_fix(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], diff: str, message: str | None
) -> None:
    path = tmp_path / "bad.diff"
    path.write_text(diff)
    code, out, err = run(capsys, *importing(project, path, "0.6.16.post4"))
    assert (code, out) == (2, "")
    if message is not None:
        assert err.splitlines()[0] == "error: " + message.format(diff=path, sp=released("0.6.16.post4"))
    assert "hint: " in err
    assert list((project / "patchsets").iterdir()) == []


def test_a_bad_versions_specifier_writes_nothing_and_keeps_a_forced_patchset(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = project / "patchsets" / "fi-sm120.toml"
    code, out, err = run(capsys, *importing(project, HUNK, "0.6.16.post4", "--versions", "garbage"))
    assert (code, out, err.splitlines()[0]) == (2, "", "error: --versions 'garbage' is not a PEP 440 version specifier")
    assert list((project / "patchsets").iterdir()) == []
    target.write_text("# kept\n")
    code, _, _ = run(capsys, *importing(project, HUNK, "0.6.16.post4", "--versions", "garbage", "--force"))
    assert (code, target.read_text()) == (2, "# kept\n")


@pytest.mark.parametrize(
    "origin",
    [
        "https://ghp_s3cret@github.com/o/r/pull/1.diff",
        "https://user:s3cret@github.com/o/r/pull/1.diff",
        "https://raw.githubusercontent.com/o/r/main/x.diff?token=s3cret",
    ],
)
def test_an_origin_with_credentials_is_refused_and_not_echoed(
    project: Path, origin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The origin is written into the patchset (committed): a token there would be published."""
    code, out, err = run(capsys, *importing(project, HUNK, "0.6.16.post4", "--origin", origin))
    assert (code, out, "s3cret" in err) == (2, "", False)
    assert err.splitlines()[0].endswith(
        "carries credentials or a query string, which would be written into the "
        "patchset (committed with the project) and printed"
    )
    assert list((project / "patchsets").iterdir()) == []


def test_paths_with_the_repository_layout_name_the_prefix(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "src.diff"
    path.write_text(HUNK.read_text().replace(f"a/{COMM}", f"a/python/{COMM}").replace(f"b/{COMM}", f"b/python/{COMM}"))
    code, _, err = run(capsys, *importing(project, path, "0.6.16.post4"))
    assert code == 2
    assert (
        err.splitlines()[1] == "  hint: the diff's paths carry the repository's layout: pass --upstream-prefix python/"
    )
    code, _, err = run(capsys, *importing(project, path, "0.6.16.post4", "--upstream-prefix", "python/"))
    assert code == 0
    assert 'upstream-prefix = "python/"' in (project / "patchsets" / "fi-sm120.toml").read_text()


def test_a_module_level_hunk_and_a_function_hunk_give_add_statement_and_replace_definition(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a" / COMM, tmp_path / "b" / COMM
    original = (released("0.6.16.post4") / COMM).read_text()
    edited = original.replace("import jinja2\n", "import jinja2\nimport functools\n", 1)
    guard = (
        "def gen_trtllm_comm_module() -> JitSpec:\n    nvcc_flags = current_compilation_context.get_nvcc_flags_list(\n"
    )
    edited = edited.replace(
        guard + "        supported_major_versions=[9, 10]\n",
        guard + "        supported_major_versions=[9, 10, 12]\n",
        1,
    )
    for path, text in ((a, original), (b, edited)):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    diff = subprocess.run(["diff", "-u", f"a/{COMM}", f"b/{COMM}"], cwd=tmp_path, capture_output=True, text=True)
    (tmp_path / "mixed.diff").write_text(diff.stdout)
    code, _, err = run(capsys, *importing(project, tmp_path / "mixed.diff", "0.6.16.post4"))
    assert code == 0
    assert err.splitlines()[1:] == [
        f"  replace-definition {COMM} gen_trtllm_comm_module",
        f"  add-statement {COMM} `import functools`",
    ]
    ops = load_patchset(project / "patchsets" / "fi-sm120.toml").operations
    assert [(op.kind, getattr(op, "after_statement", None), getattr(op, "code", "")) for op in ops][1] == (
        "add-statement",
        "import jinja2\n",
        "import functools\n",
    )  # anchored after the statement before it


def test_a_hunk_whose_code_moved_applies_at_its_one_other_place(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.6.4 has the same function at line 58, not 189: an offset, as `git apply` takes it, never fuzz."""
    code, _, err = run(capsys, *importing(project, HUNK, "0.6.4"))
    assert code == 0
    assert err.splitlines()[0].startswith("1 hunk applied exactly to flashinfer-python 0.6.4 ")
    (op,) = load_patchset(project / "patchsets" / "fi-sm120.toml").operations
    assert op.original_digest == "sha256:4e821219eb3b254a9f62472bd96c9e0a1eb4de0a9880f453956a0eb0a2fb7b91"  # type: ignore[attr-defined]


def test_a_diff_saved_with_crlf_line_endings_says_so(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``comm.py\\r ... not a Python file``, or ``line 189 is 'x', the hunk expects 'x'``."""
    crlf = tmp_path / "crlf.diff"
    crlf.write_bytes(HUNK.read_bytes().replace(b"\n", b"\r\n"))  # a Windows download
    code, out, err = run(capsys, *importing(project, crlf, "0.6.16.post4"))
    header = next(n for n, line in enumerate(HUNK.read_text().splitlines(), start=1) if line.startswith("--- "))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {crlf}:{header}: the file header ends in CRLF (\\r\\n): the diff was saved with Windows line "
        "endings, so no hunk matches the released files",
        f"  hint: convert it (dos2unix {crlf}) and import it again",
    ]
    body = tmp_path / "body.diff"  # headers kept, the hunk's lines converted (an editor's save)
    lines = HUNK.read_text().splitlines(keepends=True)
    body.write_text(
        "".join(
            line if line.startswith(("--- ", "+++ ", "diff ", "index ", "@@")) else line.replace("\n", "\r\n")
            for line in lines
        ),
        newline="",
    )
    code, out, err = run(capsys, *importing(project, body, "0.6.16.post4"))
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == (
        f"error: {body}: {COMM} hunk @@ -189,7 +189,7 @@ does not apply exactly: line 189 ends in LF (\\n), the hunk's "
        "in CRLF (\\r\\n) (a diff saved with other line endings: convert it, e.g. dos2unix); nothing written"
    )
    assert list((project / "patchsets").iterdir()) == []
