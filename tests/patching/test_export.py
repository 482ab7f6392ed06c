"""``patches export``: a unified diff that ``git apply`` accepts in the upstream layout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.patching_trees import ALL_PATCHSETS, PATCHSETS, slim_tree

from envforge.core.errors import CheckFailed
from envforge.patching import apply, export_diff, load_patchsets

GIT = shutil.which("git")


def upstream_checkout(tmp_path: Path, files: dict[str, bytes]) -> Path:
    repo = tmp_path / "upstream"
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    subprocess.run([GIT or "git", "init", "-q", str(repo)], check=True)
    return repo


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize(
    "pid", ["sm120-flashinfer-allreduce-fusion", "sm120-torch-symm-mem", "kimik25-eagle3-delegation"]
)
def test_export_applies_with_git_in_the_upstream_layout(tmp_path: Path, pid: str) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    (ps,) = load_patchsets(PATCHSETS, [pid])
    originals = {f: (sp / f).read_bytes() for f in ps.files}
    diff = export_diff(sp, ps)
    assert diff.startswith(f"--- a/python/{ps.files[0]}\n+++ b/python/{ps.files[0]}\n")
    repo = upstream_checkout(tmp_path, {f"python/{f}": data for f, data in originals.items()})
    (tmp_path / "x.patch").write_text(diff)
    subprocess.run(["git", "apply", "--check", str(tmp_path / "x.patch")], cwd=repo, check=True)
    subprocess.run(["git", "apply", str(tmp_path / "x.patch")], cwd=repo, check=True)
    apply(sp, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    for f in ps.files:  # git's result is what envforge writes
        assert (repo / "python" / f).read_bytes() == (sp / f).read_bytes()
    assert export_diff(sp, ps) == diff  # after apply, the diff still starts from the originals


def test_export_flashinfer_has_no_prefix(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("flashinfer-python", "0.6.4"))
    (ps,) = load_patchsets(PATCHSETS, ["flashinfer-sm120-trtllm-comm"])
    assert export_diff(sp, ps).startswith("--- a/flashinfer/jit/comm.py\n+++ b/flashinfer/jit/comm.py\n")


def test_nothing_to_export_when_upstream_fixed(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("flashinfer-python", "0.6.17"))
    (ps,) = load_patchsets(PATCHSETS, ["flashinfer-sm120-trtllm-comm"])
    with pytest.raises(CheckFailed) as exc:
        export_diff(sp, ps)
    assert str(exc.value) == (
        "nothing to export: flashinfer-python 0.6.17 already does what "
        "flashinfer-sm120-trtllm-comm does\n  hint: the patch is upstream-fixed for this version"
    )


def test_export_out_of_range(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.8"))
    (ps,) = load_patchsets(PATCHSETS, ["kimik25-eagle3-delegation"])
    with pytest.raises(CheckFailed) as exc:
        export_diff(sp, ps)
    assert str(exc.value) == (
        "cannot export kimik25-eagle3-delegation: sglang 0.5.8 is outside >=0.5.9,<=0.5.23\n"
        "  hint: point --site-packages at an environment with sglang>=0.5.9,<=0.5.23"
    )
