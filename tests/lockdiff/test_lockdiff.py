"""Lock diff core: every change kind on real locks (tests/data/locks, tests/data/uv-locks).

Expected lines are compared with runs of spaces collapsed (column widths depend on the diff).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.lockdiff.changes import LockDiff
from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.model import Lock, parse_lock
from envforge.lockdiff.render import diff_data, render_markdown, render_terminal, render_textconv

DATA = Path(__file__).parents[1] / "data"
CU128 = DATA / "locks" / "sglang-0.5.9" / "pylock.kimi-k25-sm120-cu128.toml"
CU130 = DATA / "locks" / "sglang-0.5.9" / "pylock.kimi-k25-sm120-cu130.toml"
NEXT = DATA / "locks" / "sglang-0.5.10" / "pylock.kimi-k25-sm120-cu128.toml"
UV_OLD = DATA / "uv-locks" / "test-pkg-82fd4d6.uv.lock"
UV_NEW = DATA / "uv-locks" / "test-pkg-relock.uv.lock"


def load(path: Path, text: str | None = None, label: str | None = None) -> Lock:
    return parse_lock(path.read_text() if text is None else text, label=label or path.name)


def term(diff: LockDiff, *, show_all: bool = False) -> str:
    """The terminal rendering without wrapping (wrapping has its own tests)."""
    return render_terminal(diff, show_all=show_all, width=None)


def rows(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


@pytest.fixture(scope="module")
def cu128() -> Lock:
    return load(CU128)


@pytest.fixture(scope="module")
def upgrade_rows(cu128: Lock) -> list[str]:
    return rows(term(diff_locks(cu128, load(NEXT))))


@pytest.fixture(scope="module")
def cuda_rows(cu128: Lock) -> list[str]:
    return rows(term(diff_locks(cu128, load(CU130))))


def edited(cu128_text: str, old: str, new: str) -> Lock:
    assert old in cu128_text, old
    return parse_lock(cu128_text.replace(old, new, 1), label="edited.toml")


# --- reading ---------------------------------------------------------------------------------


def test_reads_real_pylock_and_uv_lock(cu128: Lock) -> None:
    assert (cu128.kind, len(cu128.packages)) == ("pylock", 169)
    torch = cu128.packages["torch"]
    assert (torch.version, torch.source) == ("2.9.1", "https://pypi.org/simple")
    assert cu128.envforge["variant"] == "cu128"
    uv = load(UV_OLD)
    assert (uv.kind, len(uv.packages), uv.header["revision"]) == ("uv.lock", 8, "1")
    assert uv.packages["test-pkg"].source == "virtual ."


def test_index_key_of_pep751_is_the_source() -> None:
    torch = load(CU130).packages["torch"]
    assert (torch.version, torch.source) == ("2.9.1+cu130", "https://download.pytorch.org/whl/cu130")
    assert torch.artifacts[0].filename == "torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"


# --- change kinds ----------------------------------------------------------------------------


def test_upgrade_levels_added_removed(upgrade_rows: list[str]) -> None:
    assert upgrade_rows[1] == ("169 -> 183 packages: 16 added, 2 removed, 13 upgraded, 1 marker, 2 lock settings")
    for line in (
        "upgraded sglang 0.5.9 -> 0.5.10 patch",
        "upgraded torchcodec 0.8.0 -> 0.9.1 minor",
        "upgraded transformers 4.57.1 -> 5.3.0 major",
        "upgraded flashinfer-python 0.6.3 -> 0.6.7.post2 patch",
        "added sglang-kernel 0.4.1",
        "removed hf-transfer 0.1.9",
    ):
        assert line in upgrade_rows


def test_downgrade(cu128: Lock) -> None:
    out = rows(term(diff_locks(load(NEXT), cu128)))
    assert "downgraded sglang 0.5.10 -> 0.5.9 patch" in out
    assert "downgraded huggingface-hub 1.33.0 -> 0.36.2 major" in out


def test_marker_change_is_shown(upgrade_rows: list[str]) -> None:
    assert "marker hf-xet 1.8.0 marker +platform_machine == 'AMD64'" in upgrade_rows


def test_cuda_move_local_labels_replacements_and_index(cuda_rows: list[str]) -> None:
    assert cuda_rows[1] == (
        "169 -> 170 packages: 1 index move (3 packages), 1 added, 15 replaced, "
        "2 upgraded, 4 local label, 7 lock settings"
    )
    # the three torch packages move together: said once, not on each line
    assert cuda_rows[2] == "3 packages moved index pypi -> pytorch-cu130 (torch, torchaudio, torchvision)"
    for line in (
        "local label torch 2.9.1 -> 2.9.1+cu130 no label -> +cu130",
        "local label sgl-kernel 0.3.21 -> 0.3.21+cu130 no label -> +cu130; index pypi -> sgl-kernel-cu130",
        "replaced nvidia-cublas-cu12 12.8.4.1 -> nvidia-cublas 13.0.0.19 -cu12 -> unsuffixed; "
        "marker \"platform_machine == 'x86_64' and sys_platform == 'linux'\" -> (none)",
        "replaced nvidia-nccl-cu12 2.27.5 -> nvidia-nccl-cu13 2.27.7 -cu12 -> -cu13; "
        "marker \"platform_machine == 'x86_64' and sys_platform == 'linux'\" -> (none)",
        "added flashinfer-jit-cache 0.6.4+cu130 index flashinfer-cu130",
        "upgraded flashinfer-python 0.6.3 -> 0.6.4 patch",
    ):
        assert line in cuda_rows


def test_families_grouped_in_order(cu128: Lock) -> None:
    text = term(diff_locks(cu128, load(CU130)))
    headings = [line for line in text.splitlines()[3:] if not line.startswith(" ")]
    assert headings == [
        "torch family (3 local label)",
        "nvidia-* / cuda-* (15 replaced)",
        "flashinfer-* (1 added, 2 upgraded)",
        "sglang (1 local label)",
        "lock settings ([tool.envforge] and header)",
    ]


def test_local_label_between_two_labels() -> None:
    text = CU130.read_text()
    old = parse_lock(
        re.sub(
            r"/(torch|torchaudio)-2\.9\.1(\+|%2B)cu130",
            r"/\1-2.9.1\2cu128",
            text.replace('version = "2.9.1+cu130"', 'version = "2.9.1+cu128"'),
        ),
        label="a.toml",
    )
    out = rows(term(diff_locks(old, parse_lock(text, label="b.toml"))))
    assert "local label torch 2.9.1+cu128 -> 2.9.1+cu130 +cu128 -> +cu130" in out


def test_index_change_same_version() -> None:
    text = CU128.read_text()
    new = edited(
        text,
        'name = "idna"\nversion = "3.20"\n',
        'name = "idna"\nversion = "3.20"\nindex = "https://mirror.example/simple"\n',
    )
    out = rows(term(diff_locks(load(CU128), new)))
    # same files (same hashes) from another index: moved, not a rebuild
    assert "moved idna 3.20 index pypi -> https://mirror.example/simple" in out


def test_same_version_new_hashes_is_flagged() -> None:
    text = CU128.read_text()
    digest = re.search(r'name = "aiosignal"\n.*?sha256 = "([0-9a-f]{64})"', text, re.S)
    assert digest
    new = edited(text, digest.group(1), "0" * 64)
    diff = diff_locks(load(CU128), new)
    (change,) = diff.packages
    assert (change.kind, change.flagged) == ("rehashed", True)
    assert "! REHASHED aiosignal 1.4.0 same version, new hashes: aiosignal-1.4.0.tar.gz" in rows(term(diff))
    assert "| ⚠️ REHASHED | `aiosignal` |" in render_markdown(diff)


def test_files_added_or_removed_same_version() -> None:
    text = CU128.read_text()
    sdist = re.search(r'(?m)^name = "aiosignal"\nversion = "1.4.0"\n(sdist = .*\n)', text)
    assert sdist
    new = edited(text, sdist.group(1), "")
    out = rows(term(diff_locks(load(CU128), new)))
    assert "files aiosignal 1.4.0 sdist removed" in out


def test_metadata_churn_hidden_unless_all() -> None:
    diff = diff_locks(load(UV_OLD), load(UV_NEW))
    out = rows(term(diff))
    assert out[1] == ("8 -> 9 packages: 1 added, 2 upgraded, 1 lock setting (6 metadata-only hidden; --all shows them)")
    assert (
        "upgraded polars 1.32.3 -> 1.34.0 minor; wheels +any, +py3, -linux aarch64, -linux x86_64, "
        "-macos arm64, -macos x86_64, -win amd64, -win arm64, -cp39-abi3; "
        "dependencies +polars-runtime-32"
    ) in out
    assert "added polars-runtime-32 1.34.0" in out
    assert "options.exclude-newer: added 2025-10-15T00:00:00Z" in out
    assert not any(r.startswith("metadata") for r in out)
    everything = rows(term(diff, show_all=True))
    assert "metadata colorama 0.4.6 upload-time of identical files" in everything
    assert "revision: 1 -> 5" in everything


def test_generator_comment_churn_is_metadata() -> None:
    text = CU128.read_text()
    a = parse_lock("# generated by uv at /tmp/a\n" + text, label="a")
    b = parse_lock("# generated by uv at /tmp/b\n" + text, label="b")
    diff = diff_locks(a, b)
    assert not diff.has_changes() and diff.has_changes(show_all=True)
    assert "comments: 1 line -> 1 line" in rows(term(diff, show_all=True))


def test_identical_locks_have_no_changes(cu128: Lock) -> None:
    diff = diff_locks(cu128, load(CU128))
    assert not diff.has_changes(show_all=True)
    assert rows(term(diff))[1] == "169 -> 169 packages: no changes"


def one_package(version: str) -> Lock:
    wheel = f"https://files.pythonhosted.org/packages/xx/demo-{version}-py3-none-any.whl"
    return parse_lock(
        f'lock-version = "1.0"\ncreated-by = "t"\n[[packages]]\nname = "demo"\n'
        f'version = "{version}"\nwheels = [{{ url = "{wheel}", hashes = {{ sha256 = "00" }} }}]\n',
        label=version,
    )


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        ("1.0rc1", "1.0", "upgraded demo 1.0rc1 -> 1.0 pre"),
        ("1.0", "1.0.post1", "upgraded demo 1.0 -> 1.0.post1 post"),
        ("12.8.4.1", "12.8.4.2", "upgraded demo 12.8.4.1 -> 12.8.4.2 patch"),
        ("2.9.0+cu128", "2.9.1+cu130", "upgraded demo 2.9.0+cu128 -> 2.9.1+cu130 patch; local label +cu128 -> +cu130"),
        ("2.0", "1!1.0", "upgraded demo 2.0 -> 1!1.0 major"),
    ],
)
def test_version_levels(old: str, new: str, line: str) -> None:
    assert rows(term(diff_locks(one_package(old), one_package(new))))[3] == line


# --- [tool.envforge] -------------------------------------------------------------------------


def test_envforge_overrides_indexes_cuda(cuda_rows: list[str]) -> None:
    for line in (
        "cuda: 12.8 -> 13.0.1",
        "variant: cu128 -> cu130",
        "index pytorch-cu130: added url=https://download.pytorch.org/whl/cu130, "
        "packages=[torch, torchaudio, torchvision]",
        "override flashinfer-python: added ==0.6.4 (SM120 allreduce fusion and CUDA 13 "
        "fixes; sglang 0.5.9 pins ==0.6.3)",
    ):
        assert line in cuda_rows


def test_envforge_patchsets_profile_target_env_reason() -> None:
    text = CU130.read_text()
    edits = [
        ('id = "kimik25-eagle3-delegation"', 'id = "kimik25-eagle3-hooks"'),
        ('digest = "sha256:c8a69dad8e40', 'digest = "sha256:000000000000'),
        ('env-profile = "pcie"', 'env-profile = "nvlink"'),
        ("gpus = 8", "gpus = 4"),
        ('NCCL_BUFFSIZE = "131072"\n', ""),
        ('reason = "SM120 allreduce fusion', 'reason = "CUDA 13: SM120 allreduce fusion'),
    ]
    new = text
    for a, b in edits:
        assert a in new, a
        new = new.replace(a, b, 1)
    out = rows(term(diff_locks(load(CU130), parse_lock(new, label="new.toml"))))
    assert out[2:] == [
        "lock settings ([tool.envforge] and header)",
        "env-profile: pcie -> nvlink",
        "target gpus: 8 -> 4",
        "env NCCL_BUFFSIZE: removed 131072",
        "override flashinfer-python: reason 'SM120 allreduce fusion and CUDA 13 fixes; sglang "
        "0.5.9 pins ==0.6.3' -> 'CUDA 13: SM120 allreduce fusion and CUDA 13 fixes; sglang 0.5.9 "
        "pins ==0.6.3'",
        "patchset kimik25-eagle3-delegation: removed sha256:d1413fde2657",
        "patchset kimik25-eagle3-hooks: added sha256:d1413fde2657",
        "patchset sm120-torch-symm-mem: sha256:c8a69dad8e40 -> sha256:000000000000",
    ]


# --- errors ----------------------------------------------------------------------------------


def test_merge_conflict_markers_name_file_and_line() -> None:
    text = CU128.read_text().replace(
        'name = "idna"\nversion = "3.20"\n',
        '<<<<<<< HEAD\nname = "idna"\nversion = "3.20"\n=======\nname = "idna"\nversion = "3.19"\n>>>>>>> other\n',
        1,
    )
    line = text.splitlines().index("<<<<<<< HEAD") + 1
    with pytest.raises(InputError) as err:
        parse_lock(text, label="lockfiles/pylock.kimi-k25-sm120-cu128.toml")
    assert str(err.value) == (
        f"lockfiles/pylock.kimi-k25-sm120-cu128.toml:{line}: merge-conflict marker '<<<<<<<': "
        "the lockfile was merged with unresolved conflicts\n"
        "  hint: resolve the conflict in git (take one side, e.g. `git checkout --theirs -- FILE`), "
        "then re-run `envforge lock` to regenerate the lock"
    )


def test_recipe_is_not_a_lock() -> None:
    recipe = Path(__file__).parents[2] / "recipes" / "kimi-k25-sm120.toml"
    with pytest.raises(InputError) as err:
        load(recipe, label="recipes/kimi-k25-sm120.toml")
    assert err.value.message == (
        "recipes/kimi-k25-sm120.toml is TOML but not a lock (it looks like an envforge recipe): it "
        "has neither `lock-version` and `[[packages]]` (PEP 751 pylock.toml) nor `version` and "
        "`[[package]]` (uv.lock)"
    )


def test_invalid_toml_and_malformed_pylock() -> None:
    with pytest.raises(InputError) as err:
        parse_lock('lock-version = "1.0"\npackages = [', label="x.toml")
    assert err.value.message.startswith("x.toml is not valid TOML: ")
    with pytest.raises(InputError) as err:
        parse_lock('lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nversion = "1"\n', label="x.toml")
    assert err.value.message == ("x.toml is not a valid PEP 751 lock at `packages[0].name`: Missing required value")


# --- outputs ---------------------------------------------------------------------------------


def test_markdown_table(cu128: Lock) -> None:
    md = render_markdown(diff_locks(cu128, load(CU130)))
    lines = md.splitlines()
    assert lines[0] == ("### Lock diff: `pylock.kimi-k25-sm120-cu128.toml` → `pylock.kimi-k25-sm120-cu130.toml`")
    assert "| **torch family** | local label | `torch` | 2.9.1 → 2.9.1+cu130 | no label → +cu130 |" in lines
    assert (
        "| **sglang** | local label | `sgl-kernel` | 0.3.21 → 0.3.21+cu130 | no label → +cu130<br>index "
        "pypi → sgl-kernel-cu130 |" in lines
    )
    assert lines[4:10] == [
        "- **3 packages** moved index `pypi → pytorch-cu130`",
        "  <details><summary>packages</summary>",
        "",
        "  torch, torchaudio, torchvision",
        "",
        "  </details>",
    ]
    assert (
        "| **nvidia-\\* / cuda-\\*** | replaced | `nvidia-cublas-cu12` | 12.8.4.1 → nvidia-cublas "
        "13.0.0.19 | -cu12 → unsuffixed<br>marker \"platform_machine == 'x86_64' and sys_platform == "
        "'linux'\" → (none) |" in lines
    )
    assert "| `cuda` | 12.8 → 13.0.1 |" in lines


def test_json_data_is_serializable(cu128: Lock) -> None:
    data = diff_data(diff_locks(cu128, load(CU130)))
    assert data["summary"] == {"local": 4, "replaced": 15, "upgraded": 2, "added": 1}
    torch = next(c for c in data["changes"] if c["new_name"] == "torch")
    assert torch["kind"] == "local" and torch["new_source"] is None  # in the index move
    assert data["index_moves"] == [
        {
            "old": "https://pypi.org/simple",
            "new": "https://download.pytorch.org/whl/cu130",
            "old_name": "pypi",
            "new_name": "pytorch-cu130",
            "packages": ["torch", "torchaudio", "torchvision"],
        }
    ]
    json.dumps(data)


def test_textconv_is_stable_and_ignores_metadata() -> None:
    old, new = render_textconv(load(UV_OLD)), render_textconv(load(UV_NEW))
    assert render_textconv(load(UV_OLD)) == old
    colorama = [line for line in old.splitlines() if line.startswith("colorama")]
    assert colorama == [line for line in new.splitlines() if line.startswith("colorama")]
    cu130 = render_textconv(load(CU130)).splitlines()
    assert cu130[0] == "# envforge lock textconv: pylock, 170 packages"
    assert any(line.startswith("torch  2.9.1+cu130  index=pytorch-cu130  files=1:") for line in cu130)
    assert (
        "override.flashinfer-python = ==0.6.4  # SM120 allreduce fusion and CUDA 13 fixes; "
        "sglang 0.5.9 pins ==0.6.3" in cu130
    )


PIP_LOCK = """\
lock-version = "1.0"
created-by = "pip"

[[packages]]
name = "torchy"
version = "2.1.0+cpu"

[[packages.wheels]]
name = "torchy-2.1.0+cpu-py3-none-any.whl"
url = "https://download.pytorch.org/whl/cpu/torchy-2.1.0%2Bcpu-py3-none-any.whl"
[packages.wheels.hashes]
sha256 = "{a}"

[[packages]]
name = "six"
version = "1.17.0"

[[packages.wheels]]
name = "six-1.17.0-py2.py3-none-any.whl"
url = "https://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl"
[packages.wheels.hashes]
sha256 = "{b}"

[[packages]]
name = "helper"
version = "1.0"
index = "https://download.pytorch.org/whl/cpu"

[[packages.wheels]]
url = "https://download.pytorch.org/whl/cpu/helper-1.0-py3-none-any.whl"
[packages.wheels.hashes]
sha256 = "{c}"
""".format(a="a" * 64, b="b" * 64, c="c" * 64)


def test_textconv_of_a_pip_lock_shows_no_index_where_pip_wrote_none() -> None:
    """``pip lock`` writes no ``index`` key: the entry's line names none (the folder of its files
    was shown as ``index=`` before), while an entry that names one still shows it."""
    lines = render_textconv(parse_lock(PIP_LOCK, label="pip.toml")).splitlines()
    assert [line.split("  files=")[0] for line in lines[2:]] == [
        "helper  1.0  index=https://download.pytorch.org/whl/cpu",
        "six  1.17.0",
        "torchy  2.1.0+cpu",
    ]


# --- docs/lock-diff.md examples --------------------------------------------------------------

DOC = Path(__file__).parents[2] / "docs" / "lock-diff.md"
_EXAMPLE = re.compile(r"(<!-- example: ([a-z-]+) -->\n)(.*?)(<!-- /example -->)", re.S)


def doc_examples() -> dict[str, str]:
    """The outputs docs/lock-diff.md shows, computed from the test data."""
    name = "lockfiles/pylock.kimi-k25-sm120-"
    cu128, cu130 = load(CU128, label=f"{name}cu128.toml"), load(CU130, label=f"{name}cu130.toml")
    before, after = load(CU128, label=f"HEAD~1:{name}cu128.toml"), load(NEXT, label=f"{name}cu128.toml")
    uv = diff_locks(load(UV_OLD, label="uv.lock@82fd4d6"), load(UV_NEW, label="uv.lock"))
    shapes = DATA / "lockdiff"

    def pair(case: str, ext: str = ".toml") -> LockDiff:
        return diff_locks(
            load(shapes / f"{case}-old{ext}", label=f"{case}-old{ext}"),
            load(shapes / f"{case}-new{ext}", label=f"{case}-new{ext}"),
        )

    moved = diff_data(pair("index-move"))
    return {
        "json": "```json\n" + json.dumps(moved, indent=2) + "\n```",
        "shared-json": "```json\n" + json.dumps(diff_data(pair("marker-rewrite"))["shared"], indent=2) + "\n```",
        "shared-terminal": "```text\n" + render_terminal(pair("marker-rewrite")) + "\n```",
        "notebook-markdown": render_markdown(pair("notebook-235")),
        "torch-terminal": "```text\n" + render_terminal(pair("torch-variants")) + "\n```",
        "uv-torch-terminal": "```text\n" + render_terminal(pair("uv-torch", ".lock")) + "\n```",
        "cuda-markdown": render_markdown(diff_locks(cu128, cu130)),
        "upgrade-markdown": render_markdown(diff_locks(before, after)),
        "cuda-terminal": "```text\n" + render_terminal(diff_locks(cu128, cu130)) + "\n```",
        "uv-terminal": "```text\n" + render_terminal(uv) + "\n```",
    }


def write_doc_examples() -> None:
    examples = doc_examples()
    DOC.write_text(_EXAMPLE.sub(lambda m: m.group(1) + examples[m.group(2)] + "\n" + m.group(4), DOC.read_text()))


def test_docs_examples_are_current() -> None:
    found = {m.group(2): m.group(3).rstrip("\n") for m in _EXAMPLE.finditer(DOC.read_text())}
    assert found == doc_examples(), "run `python tests/lockdiff/test_lockdiff.py` to refresh docs/lock-diff.md"


def test_uv_lock_git_source_change() -> None:
    def lock(commit: str) -> Lock:
        return parse_lock(
            'version = 1\nrevision = 3\nrequires-python = ">=3.11"\n\n[[package]]\n'
            'name = "sglang"\nversion = "0.5.9"\n'
            f'source = {{ git = "https://github.com/sgl-project/sglang?rev=main#{commit}" }}\n',
            label=f"uv.lock@{commit}",
        )

    out = rows(term(diff_locks(lock("aaaa"), lock("bbbb"))))
    assert out[3] == (
        "source sglang 0.5.9 source git https://github.com/sgl-project/sglang?rev=main#aaaa"
        " -> git https://github.com/sgl-project/sglang?rev=main#bbbb"
    )


if __name__ == "__main__":
    write_doc_examples()
