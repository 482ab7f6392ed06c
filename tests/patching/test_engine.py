"""plan / apply / revert on real sglang and flashinfer-python releases (slim trees of real code)."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet
from tests.support.patching_trees import ALL_PATCHSETS, PATCHSETS, SGLANG_PATCHSETS, slim_tree

from envforge.core.errors import CheckFailed, InputError
from envforge.patching import apply, load_patchsets, plan, read_manifest, revert
from envforge.patching.manifest import manifest_path

GUARD = "sglang/srt/layers/communicator.py"
SIZES = "sglang/srt/distributed/device_communicators/all_reduce_utils.py"
MULTIMEM = "sglang/srt/distributed/device_communicators/torch_symm_mem.py"
KIMI = "sglang/srt/models/kimi_k25.py"
COMM = "flashinfer/jit/comm.py"


def states(report: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in report.results:
        out.setdefault(r.patchset, []).append(r.state)
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# What the released code calls for, read from each release (see the comments in patchsets/*.toml).
SGLANG_MATRIX = {
    "0.5.8": {
        "sm120-flashinfer-allreduce-fusion": ["applied"],
        "sm120-torch-symm-mem": ["applied", "applied"],
        "kimik25-eagle3-delegation": ["out-of-range"],
    },
    "0.5.9": {
        "sm120-flashinfer-allreduce-fusion": ["applied"],
        "sm120-torch-symm-mem": ["applied", "applied"],
        "kimik25-eagle3-delegation": ["applied"],
    },
    "0.5.10": {
        "sm120-flashinfer-allreduce-fusion": ["applied"],
        "sm120-torch-symm-mem": ["applied", "applied"],
        "kimik25-eagle3-delegation": ["upstream-fixed"],
    },
    "0.5.23": {
        "sm120-flashinfer-allreduce-fusion": ["out-of-range"],
        "sm120-torch-symm-mem": ["applied", "applied"],
        "kimik25-eagle3-delegation": ["upstream-fixed"],
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(SGLANG_MATRIX))
def test_sglang_version_matrix(tmp_path: Path, version: str) -> None:
    # flashinfer-python 0.6.17 meets patchset 1's requirement by version.
    sp = slim_tree(tmp_path / "sp", ("sglang", version), ("flashinfer-python", "0.6.17"))
    report = plan(sp, load_patchsets(PATCHSETS, SGLANG_PATCHSETS))
    assert states(report) == SGLANG_MATRIX[version]
    assert report.ok and report.unmet == ()
    applied = apply(sp, load_patchsets(PATCHSETS, SGLANG_PATCHSETS))
    for change in applied.changes:
        compile((sp / change.path).read_bytes(), change.path, "exec")  # every patched file compiles
    again = plan(sp, load_patchsets(PATCHSETS, SGLANG_PATCHSETS))
    assert {s for v in states(again).values() for s in v} <= {"already-applied", "upstream-fixed", "out-of-range"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "state"), [("0.6.3", "applied"), ("0.6.4", "applied"), ("0.6.17", "upstream-fixed")]
)
def test_flashinfer_version_matrix(tmp_path: Path, version: str, state: str) -> None:
    sp = slim_tree(tmp_path / "sp", ("flashinfer-python", version))
    report = apply(sp, load_patchsets(PATCHSETS, ["flashinfer-sm120-trtllm-comm"]))
    assert states(report) == {"flashinfer-sm120-trtllm-comm": [state]}
    fn = _function(ast.parse((sp / COMM).read_text()), "gen_trtllm_comm_module")
    call = next(
        n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "get_nvcc_flags_list"
    )
    assert ast.literal_eval(call.keywords[0].value) == [9, 10, 12]


@pytest.fixture
def sp059(tmp_path: Path) -> Path:
    return slim_tree(tmp_path / "sp", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))


def _function(tree: ast.Module | ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _assigned(tree: ast.Module | ast.ClassDef, name: str) -> ast.expr:
    return next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name
    )


def test_apply_on_059_patched_ast(sp059: Path) -> None:
    report = apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    assert report.ok and report.written
    assert {s for v in states(report).values() for s in v} == {"applied"}
    assert report.activations == (
        ("sm120-flashinfer-allreduce-fusion", "--enable-flashinfer-allreduce-fusion"),
        ("sm120-torch-symm-mem", "--enable-torch-symm-mem"),
    )

    guard = ast.parse((sp059 / GUARD).read_text())
    ret = _function(guard, "apply_flashinfer_allreduce_fusion").body[0]
    assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.BoolOp)
    assert ast.unparse(ret.value.values[0]) == "_is_sm90_supported or _is_sm100_supported or _is_sm120_supported"
    assert ast.unparse(_assigned(guard, "_is_sm120_supported")) == "_is_cuda and is_sm120_supported()"
    utils = next(n for n in guard.body if isinstance(n, ast.ImportFrom) and n.module == "sglang.srt.utils")
    assert "is_sm120_supported" in [a.name for a in utils.names]

    namespace: dict[str, Any] = {}
    exec(compile((sp059 / SIZES).read_bytes(), SIZES, "exec"), namespace)  # self-contained module
    sizes = namespace["TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"]
    assert sizes[12] == sizes[10] == {2: 64 << 20, 4: 64 << 20, 6: 128 << 20, 8: 128 << 20}
    comm = _class(ast.parse((sp059 / MULTIMEM).read_text()), "TorchSymmMemCommunicator")
    assert ast.literal_eval(_assigned(comm, "_WORLD_SIZES_MULTIMEM")) == {9: [4, 6, 8], 10: [6, 8], 12: []}

    kimi = _class(ast.parse((sp059 / KIMI).read_text()), "KimiK25ForConditionalGeneration")
    sigs = {f.name: ast.unparse(f.args) for f in kimi.body if isinstance(f, ast.FunctionDef)}
    assert sigs["get_embed_and_head"] == "self"
    assert sigs["set_embed_and_head"] == "self, embed, head"
    assert sigs["set_eagle3_layers_to_capture"] == "self, layer_ids=None"
    _check_delegation_behaviour(kimi)


def _check_delegation_behaviour(kimi: ast.ClassDef) -> None:
    """Run the added methods on a stand-in language model: they forward every argument, and
    set_eagle3_layers_to_capture also works with no argument."""
    names = ("get_embed_and_head", "set_embed_and_head", "set_eagle3_layers_to_capture")
    cls = ast.ClassDef("K", [], [], [f for f in kimi.body if isinstance(f, ast.FunctionDef) and f.name in names], [])
    namespace: dict[str, Any] = {}
    exec(compile(ast.fix_missing_locations(ast.Module([cls], [])), "kimi", "exec"), namespace)
    calls: list[tuple[str, tuple[Any, ...]]] = []

    class LM:
        def __getattr__(self, name: str) -> Any:
            return lambda *a: calls.append((name, a)) or name

    k = namespace["K"]()
    k.language_model = LM()
    assert k.get_embed_and_head() == "get_embed_and_head"
    k.set_embed_and_head("E", "H")
    k.set_eagle3_layers_to_capture()
    k.set_eagle3_layers_to_capture([1, 2])
    assert calls == [
        ("get_embed_and_head", ()),
        ("set_embed_and_head", ("E", "H")),
        ("set_eagle3_layers_to_capture", (None,)),
        ("set_eagle3_layers_to_capture", ([1, 2],)),
    ]


def test_reapply_is_a_byte_noop(sp059: Path) -> None:
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    files = [sp059 / p for p in (GUARD, SIZES, MULTIMEM, KIMI, COMM)]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in files}
    manifest = manifest_path(sp059).read_bytes()
    again = apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    assert {s for v in states(again).values() for s in v} == {"already-applied"}
    assert again.changes == () and not again.written
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino) for p in files} == before
    assert manifest_path(sp059).read_bytes() == manifest


def test_revert_restores_original_sha256(sp059: Path) -> None:
    files = [sp059 / p for p in (GUARD, SIZES, MULTIMEM, KIMI, COMM)]
    original = {p: sha(p) for p in files}
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    assert all(sha(p) != original[p] for p in files)
    manifest = read_manifest(sp059)
    assert manifest is not None and [f.original_sha256 for f in manifest.files] == [
        original[sp059 / f.path] for f in manifest.files
    ]
    report = revert(sp059)
    assert {r.state for r in report.results} == {"reverted"} and len(report.results) == 5
    assert {p: sha(p) for p in files} == original
    assert read_manifest(sp059) is None and not (sp059 / ".envforge" / "originals").exists()
    assert revert(sp059).results == ()  # reverting twice is a no-op


def test_revert_one_patchset_keeps_the_others(sp059: Path) -> None:
    original = sha(sp059 / KIMI)
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    revert(sp059, ["kimik25-eagle3-delegation"])
    manifest = read_manifest(sp059)
    assert manifest is not None and "kimik25-eagle3-delegation" not in [p.id for p in manifest.patchsets]
    assert sha(sp059 / KIMI) == original
    assert states(plan(sp059, load_patchsets(PATCHSETS, ["sm120-torch-symm-mem"]))) == {
        "sm120-torch-symm-mem": ["already-applied", "already-applied"]
    }


def test_revert_refuses_a_tampered_file(sp059: Path) -> None:
    apply(sp059, load_patchsets(PATCHSETS, ["kimik25-eagle3-delegation"]))
    patched = sha(sp059 / KIMI)
    (sp059 / KIMI).write_text("# edited by hand\n")
    manifest = read_manifest(sp059)
    assert manifest is not None
    with pytest.raises(CheckFailed) as exc:
        revert(sp059)
    assert str(exc.value) == (
        f"{KIMI} changed since envforge patched it: sha256 {sha(sp059 / KIMI)}, expected {patched} (patched) "
        f"or {manifest.files[0].original_sha256} (original)\n  hint: this environment was not built by envforge: reinstall the patched distributions "
        "(`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run `envforge apply-patches` "
        "again"
    )


def test_hardlinked_target_is_replaced_not_edited(sp059: Path, tmp_path: Path) -> None:
    twin = tmp_path / "uv-cache-twin.py"
    os.link(sp059 / GUARD, twin)
    original = twin.read_bytes()
    assert (sp059 / GUARD).stat().st_nlink == 2
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    assert (sp059 / GUARD).stat().st_nlink == 1
    assert twin.read_bytes() == original and (sp059 / GUARD).read_bytes() != original
    revert(sp059)
    assert (sp059 / GUARD).read_bytes() == original and twin.stat().st_nlink == 1


def test_stale_bytecode_of_patched_modules_is_removed(sp059: Path) -> None:
    cache = sp059 / "sglang/srt/layers/__pycache__"
    cache.mkdir()
    stale = [cache / "communicator.cpython-311.pyc", cache / "communicator.cpython-312.opt-1.pyc"]
    other = cache / "linear.cpython-311.pyc"
    for p in (*stale, other):
        p.write_bytes(b"stale")
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    assert [p.exists() for p in stale] == [False, False] and other.exists()


def test_dry_run_writes_nothing(sp059: Path) -> None:
    before = {p: sha(sp059 / p) for p in (GUARD, KIMI)}
    report = apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS), dry_run=True)
    assert not report.written and len(report.changes) == 5
    assert {p: sha(sp059 / p) for p in (GUARD, KIMI)} == before and not (sp059 / ".envforge").exists()
    diff = report.diff()
    assert diff.startswith("--- a/flashinfer/jit/comm.py\n+++ b/flashinfer/jit/comm.py\n")
    assert (
        "-        (_is_sm90_supported or _is_sm100_supported)\n"
        "+        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)\n" in diff
    )


def test_requirement_unmet_is_refused_and_named(sp059: Path) -> None:
    original = sha(sp059 / GUARD)
    report = apply(sp059, load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion"]))
    assert not report.ok and report.results == () and sha(sp059 / GUARD) == original
    assert report.errors == (
        "sm120-flashinfer-allreduce-fusion refused: requirement `patchset:flashinfer-sm120-trtllm-comm | "
        "flashinfer-python>=0.6.17` is unmet (patchset flashinfer-sm120-trtllm-comm is not applied; "
        "flashinfer-python is 0.6.4); flashinfer-python before 0.6.17 builds its all-reduce fusion "
        "kernels for SM90/SM100 only",
    )
    # Named in either order, the requirement is applied first; once recorded, it stays met.
    ordered = apply(
        sp059, load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion", "flashinfer-sm120-trtllm-comm"])
    )
    assert [r.patchset for r in ordered.results] == [
        "flashinfer-sm120-trtllm-comm",
        "sm120-flashinfer-allreduce-fusion",
    ]
    assert ordered.ok
    revert(sp059, ["sm120-flashinfer-allreduce-fusion"])
    assert apply(sp059, load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion"])).ok


def test_out_of_range_when_not_installed(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    report = plan(sp, load_patchsets(PATCHSETS, ["flashinfer-sm120-trtllm-comm"]))
    assert [(r.state, r.message) for r in report.results] == [
        (
            "out-of-range",
            "flashinfer-python is not installed; flashinfer-sm120-trtllm-comm is written for "
            "flashinfer-python>=0.6.3,<=0.7.4",
        )
    ]


def _widened(tmp_path: Path, pid: str, old: str, new: str) -> Path:
    d = tmp_path / "patchsets"
    d.mkdir(exist_ok=True)
    (d / f"{pid}.toml").write_text((PATCHSETS / f"{pid}.toml").read_text().replace(old, new))
    return d


@pytest.mark.slow
def test_drift_names_patchset_file_anchor_version_range_and_next_step(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.23"), ("flashinfer-python", "0.6.17"))
    d = _widened(tmp_path, "sm120-flashinfer-allreduce-fusion", 'versions = ">=0.5.8,<0.5.21"', 'versions = ">=0.5.8"')
    report = apply(sp, load_patchsets(d))
    assert not report.ok and report.changes == ()
    assert report.errors == (
        "sm120-flashinfer-allreduce-fusion: sglang/srt/layers/communicator.py: file is missing; anchor "
        "`_is_sm90_supported or _is_sm100_supported` in apply_flashinfer_allreduce_fusion(); installed sglang "
        "0.5.23, patchset written for sglang>=0.5.8. Next step: read the installed file, then update the anchor "
        "in sm120-flashinfer-allreduce-fusion.toml or narrow its `versions` to exclude 0.5.23",
    )


def test_patchset_is_all_or_nothing(sp059: Path, tmp_path: Path) -> None:
    d = _widened(
        tmp_path,
        "sm120-torch-symm-mem",
        'target = "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM"',
        'target = "TorchSymmMemCommunicator._WORLD_SIZES_MULTICAST"',
    )
    before = sha(sp059 / SIZES)
    report = apply(sp059, load_patchsets(d))
    assert [(r.file, r.state) for r in report.results] == [(SIZES, "applied"), (MULTIMEM, "drifted")]
    assert report.results[0].message == (
        "added key 12 to TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES; not written: another operation of this patchset drifted"
    )
    assert "assignment of TorchSymmMemCommunicator._WORLD_SIZES_MULTICAST found 0 times, expected 1" in report.errors[0]
    assert sha(sp059 / SIZES) == before and report.changes == () and read_manifest(sp059) is None


def test_a_key_of_the_wrong_type_drifts_and_writes_nothing(sp059: Path, tmp_path: Path) -> None:
    d = _widened(tmp_path, "sm120-torch-symm-mem", 'key = 12\nvalue = """{', 'key = "12"\nvalue = """{')
    before = sha(sp059 / SIZES)
    report = apply(sp059, load_patchsets(d))
    assert [(r.file, r.state) for r in report.results] == [(SIZES, "drifted"), (MULTIMEM, "applied")]
    assert report.errors == (
        f"sm120-torch-symm-mem: {SIZES}: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES: existing keys are int, the "
        'patchset\'s key is str ("12"); installed sglang 0.5.9. Next step: in sm120-torch-symm-mem.toml, '
        "write `key` as a TOML integer (key = 12)",
    )
    assert sha(sp059 / SIZES) == before and report.changes == () and read_manifest(sp059) is None


def test_changed_patchset_reapplies_on_top(sp059: Path, tmp_path: Path) -> None:
    apply(sp059, load_patchsets(PATCHSETS, ["kimik25-eagle3-delegation"]))
    original = read_manifest(sp059)
    d = _widened(tmp_path, "kimik25-eagle3-delegation", "reason = ", "# edited\nreason = ")
    (edited,) = load_patchsets(d, ["kimik25-eagle3-delegation"])
    report = apply(sp059, [edited])
    assert states(report) == {"kimik25-eagle3-delegation": ["already-applied"]}
    manifest = read_manifest(sp059)
    assert original is not None and manifest is not None and manifest.files == original.files
    assert [p.digest for p in manifest.patchsets] == [edited.digest] != [p.digest for p in original.patchsets]
    shutil.rmtree(tmp_path / "patchsets")
    again = plan(sp059, [edited])  # the fast path holds again with the new digest
    assert [r.message for r in again.results] == ["recorded in the patch manifest; file unchanged since"]


@pytest.mark.slow
def test_full_wheels_apply_and_revert(site_packages_of: Any) -> None:
    """The whole unpacked sglang 0.5.9 and flashinfer-python 0.6.4 wheels, as an env has them."""
    sp = site_packages_of(("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    originals = {p: sha(sp / p) for p in (GUARD, SIZES, MULTIMEM, KIMI, COMM)}
    report = apply(sp, load_patchsets(PATCHSETS))
    assert report.ok and len(report.changes) == 5
    revert(sp)
    assert {p: sha(sp / p) for p in originals} == originals


def _demo_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A one-file distribution and two patchsets editing the same file."""
    sp = tmp_path / "sp"
    (sp / "demo").mkdir(parents=True)
    (sp / "demo-1.0.dist-info").mkdir()
    (sp / "demo" / "t.py").write_text("T = {\n    1: 1,\n}\n")
    d = tmp_path / "ps"
    d.mkdir()
    for pid, key in (("a", 2), ("b", 3)):
        (d / f"{pid}.toml").write_text(
            f'[patchset]\nid = "{pid}"\ndistribution = "demo"\nversions = "==1.0"\nreason = "r"\n'
            + ('\n[[patchset.requires]]\nany-of = ["patchset:a"]\n' if pid == "b" else "")
            + f'\n[[operation]]\nkind = "add-dict-entry"\nfile = "demo/t.py"\ntarget = "T"\nkey = {key}\nvalue = "{key}"\n'
        )
    return sp, d


def test_two_patchsets_on_one_file_stack_and_revert(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    original = (sp / "demo" / "t.py").read_bytes()
    report = apply(sp, load_patchsets(d))
    assert [r.state for r in report.results] == ["applied", "applied"]
    assert (sp / "demo" / "t.py").read_text() == "T = {\n    1: 1,\n    2: 2,\n    3: 3,\n}\n"
    with pytest.raises(CheckFailed) as exc:
        revert(sp, ["a"])
    assert str(exc.value) == (
        "cannot revert a: demo/t.py was patched after it by b\n  hint: revert b too (envforge apply-patches --revert)"
    )
    revert(sp, ["b"])
    assert (sp / "demo" / "t.py").read_text() == "T = {\n    1: 1,\n    2: 2,\n}\n"
    apply(sp, load_patchsets(d))
    report = revert(sp)
    assert [r.patchset for r in report.results] == ["b", "a"] and len(report.changes) == 1
    assert (sp / "demo" / "t.py").read_bytes() == original and read_manifest(sp) is None


def test_a_hand_edit_to_a_patched_file_drifts(sp059: Path) -> None:
    apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS))
    patched = sha(sp059 / GUARD)
    with (sp059 / GUARD).open("a") as fh:
        fh.write("x = 1\n")
    report = apply(sp059, load_patchsets(PATCHSETS, ALL_PATCHSETS), dry_run=True)
    assert not report.ok and report.changes == ()
    assert [(r.patchset, r.state) for r in report.results if r.file == GUARD] == [
        ("sm120-flashinfer-allreduce-fusion", "drifted")
    ]
    assert report.errors == (
        f"sm120-flashinfer-allreduce-fusion: {GUARD}: changed since envforge patched it (manifest sha256 "
        f"{patched}, now {sha(sp059 / GUARD)}); `envforge apply-patches --revert` refuses it too. Next step: "
        "undo the edit, or this environment was not built by envforge: reinstall the patched distributions "
        "(`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run `envforge apply-patches` again; to keep the change, write it as a patchset",
    )
    assert {r.state for r in report.results if r.file != GUARD} == {"already-applied"}


def test_stacked_patches_a_reinstall_and_a_new_version_are_not_hand_edits(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    original = (sp / "demo" / "t.py").read_bytes()
    apply(sp, load_patchsets(d))  # b patched the file after a: a's recorded new sha256 is not the file's
    assert [r.state for r in plan(sp, load_patchsets(d)).results] == ["already-applied", "already-applied"]
    (sp / "demo" / "t.py").write_bytes(original)  # reinstalled at the same version
    assert [r.state for r in plan(sp, load_patchsets(d)).results] == ["applied", "applied"]
    (sp / "demo" / "t.py").write_text("T = {\n    1: 1,\n    0: 0,\n}\n")  # demo 1.1 ships other bytes
    (sp / "demo-1.0.dist-info").rename(sp / "demo-1.1.dist-info")
    widened = [replace(ps, specifier=SpecifierSet(">=1.0")) for ps in load_patchsets(d)]
    assert [r.state for r in plan(sp, widened).results] == ["applied", "applied"]


def test_revert_dry_run_and_read_only_target(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    apply(sp, load_patchsets(d))
    patched = (sp / "demo" / "t.py").read_bytes()
    report = revert(sp, dry_run=True)
    assert not report.written and [r.state for r in report.results] == ["reverted", "reverted"]
    assert report.diff().startswith("--- a/demo/t.py\n+++ b/demo/t.py\n")
    assert (sp / "demo" / "t.py").read_bytes() == patched and read_manifest(sp) is not None
    revert(sp)


def test_a_failed_write_restores_the_files_already_replaced(sp059: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second file of sm120-torch-symm-mem cannot be written (as in a read-only directory):
    the first, already replaced, is put back and nothing is recorded."""
    before = {p: sha(sp059 / p) for p in (SIZES, MULTIMEM)}
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if str(dst).endswith("torch_symm_mem.py"):
            raise PermissionError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(InputError) as exc:
        apply(sp059, load_patchsets(PATCHSETS, ["sm120-torch-symm-mem"]))
    assert str(exc.value) == (
        f"cannot write {sp059 / MULTIMEM}: Permission denied; 1 file of this patchset restored, nothing changed\n"
        "  hint: run as the owner of the environment, or patch a virtual environment"
    )
    assert {p: sha(sp059 / p) for p in (SIZES, MULTIMEM)} == before
    assert read_manifest(sp059) is None and list((sp059 / ".envforge" / "originals").iterdir()) == []
    assert [p.name for p in (sp059 / MULTIMEM).parent.iterdir() if "envforge-tmp" in p.name] == []


def test_a_path_outside_site_packages_is_neither_read_nor_written(tmp_path: Path) -> None:
    """A patchset built without the schema check (or a symlinked directory) cannot reach a file
    outside site-packages: plan and apply refuse before reading it."""
    sp, d = _demo_tree(tmp_path)
    victim = tmp_path / "outside" / "victim.py"
    victim.parent.mkdir()
    victim.write_text("T = {\n    1: 1,\n}\n")
    a = load_patchsets(d, ["a"])[0]
    escaping = replace(a, operations=tuple(replace(op, file="../outside/victim.py") for op in a.operations))
    with pytest.raises(InputError) as exc:
        apply(sp, [escaping])
    assert str(exc.value) == (
        f"../outside/victim.py: outside site-packages {sp} (resolves to {victim}); envforge reads and writes "
        "only files under site-packages\n  hint: fix `file` in the patchset, or the path in "
        ".envforge/patches.json (or rebuild the environment with `envforge build`)"
    )
    (sp / "evil").symlink_to(victim.parent)
    via_link = replace(a, operations=tuple(replace(op, file="evil/victim.py") for op in a.operations))
    with pytest.raises(InputError, match=r"^evil/victim.py: outside site-packages "):
        apply(sp, [via_link])
    assert victim.read_text() == "T = {\n    1: 1,\n}\n" and read_manifest(sp) is None


def test_revert_refuses_a_hand_edited_manifest_path(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    apply(sp, load_patchsets(d, ["a"]))
    victim = tmp_path / "victim.py"
    victim.write_bytes((sp / "demo" / "t.py").read_bytes())
    path = manifest_path(sp)
    path.write_text(path.read_text().replace('"demo/t.py"', '"../victim.py"'))
    with pytest.raises(InputError) as exc:
        revert(sp)
    assert str(exc.value).startswith(f"../victim.py: outside site-packages {sp} (resolves to {victim}); ")
    path.write_text(path.read_text().replace('"original_sha256": "', '"original_sha256": "../../'))
    with pytest.raises(InputError) as exc:
        revert(sp)
    assert str(exc.value).startswith(f"{path}: malformed patch manifest: ../victim.py: '../../")
    assert str(exc.value).endswith(
        "' is not a hex sha256\n  hint: this environment was not built by envforge: reinstall the patched "
        "distributions (`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run "
        "`envforge apply-patches` again"
    )


def test_written_state_files_are_0644_under_umask_022_and_patched_files_keep_their_mode(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    os.chmod(sp / "demo" / "t.py", 0o640)
    old = os.umask(0o022)
    try:
        apply(sp, load_patchsets(d, ["a"]))
    finally:
        os.umask(old)
    originals = list((sp / ".envforge" / "originals").iterdir())
    assert [oct(p.stat().st_mode & 0o777) for p in (manifest_path(sp), *originals)] == ["0o644", "0o644"]
    assert (sp / "demo" / "t.py").stat().st_mode & 0o777 == 0o640
    revert(sp)
    assert (sp / "demo" / "t.py").stat().st_mode & 0o777 == 0o640


def test_revert_names_a_missing_saved_original_and_writes_nothing(tmp_path: Path) -> None:
    sp, d = _demo_tree(tmp_path)
    apply(sp, load_patchsets(d, ["a"]))
    patched = (sp / "demo" / "t.py").read_bytes()
    (saved,) = (sp / ".envforge" / "originals").iterdir()
    saved.unlink()
    with pytest.raises(CheckFailed) as exc:
        revert(sp)
    assert str(exc.value) == (
        f"cannot revert a: the saved original of demo/t.py is missing ({saved}); nothing was changed\n"
        "  hint: this environment was not built by envforge: reinstall the patched distributions "
        "(`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run `envforge apply-patches` again"
    )
    assert (sp / "demo" / "t.py").read_bytes() == patched and read_manifest(sp) is not None


LAYER_BOUNDARY = "sm120-flashinfer-allreduce-fusion-layer-boundary"
ADD_NORM = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
COMM_FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "guard"),
    [
        ("0.5.21", "apply_flashinfer_allreduce_fusion"),
        ("0.5.22", "flashinfer_ar_fusion_applies"),
        ("0.5.23", "flashinfer_ar_fusion_applies"),
    ],
)
def test_fusion_guard_where_it_moved_from_0521(tmp_path: Path, version: str, guard: str) -> None:
    """Issue 16.2: on every release from 0.5.21 to the newest the guard is in add_norm.py (renamed
    in 0.5.22) and _resolve_backend refuses all but SM90/SM100; both gain SM120."""
    sp = slim_tree(tmp_path / "sp", ("sglang", version), ("flashinfer-python", "0.6.17"))
    pristine = {p: sha(sp / p) for p in (ADD_NORM, COMM_FUSION)}
    sets = load_patchsets(PATCHSETS, [LAYER_BOUNDARY])
    report = apply(sp, sets)
    assert [(r.file, r.state, r.message) for r in report.results] == [
        (ADD_NORM, "applied", f"added `_is_sm120_supported` to the guard in {guard}(); defined _is_sm120_supported"),
        (COMM_FUSION, "applied", "added `get_platform().is_sm120` to the guard in _resolve_backend()"),
    ]
    assert report.activations == ((LAYER_BOUNDARY, "--flashinfer-allreduce-fusion-backend=auto"),)
    norm = ast.parse((sp / ADD_NORM).read_text())
    assert "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)" in ast.unparse(_function(norm, guard))
    assert "_is_sm120_supported = _is_cuda and get_platform().is_sm120" in (sp / ADD_NORM).read_text().splitlines()
    fusion = ast.unparse(_function(ast.parse((sp / COMM_FUSION).read_text()), "_resolve_backend"))
    assert "not (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120)" in fusion
    assert [r.state for r in apply(sp, sets).results] == ["already-applied", "already-applied"]
    revert(sp)
    assert {p: sha(sp / p) for p in pristine} == pristine
    # the old patchset is out of range here, the new one out of range before 0.5.21
    assert [r.state for r in plan(sp, load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion"])).results] == [
        "out-of-range"
    ]


@pytest.mark.slow
def test_fusion_guard_upstream_fixed_and_drifted(tmp_path: Path) -> None:
    """upstream-fixed: sglang 0.5.23 with SM120 in both guards, as an upstream fix would write it
    (no release has it yet); drifted: the patchset widened to 0.5.20, which has no add_norm.py."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.23"), ("flashinfer-python", "0.6.17"))
    for rel, old, new in (
        (
            ADD_NORM,
            "(_is_sm90_supported or _is_sm100_supported)",
            "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)",
        ),
        (
            ADD_NORM,
            "_is_sm100_supported = _is_cuda and get_platform().is_sm100\n",
            "_is_sm100_supported = _is_cuda and get_platform().is_sm100\n"
            "_is_sm120_supported = _is_cuda and get_platform().is_sm120\n",
        ),
        (
            COMM_FUSION,
            "get_platform().is_sm90 or get_platform().is_sm100)",
            "get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120)",
        ),
    ):
        text = (sp / rel).read_text()
        assert text.count(old) == 1
        (sp / rel).write_text(text.replace(old, new))
    (ps,) = load_patchsets(PATCHSETS, [LAYER_BOUNDARY])
    assert [(r.state, r.message) for r in apply(sp, [ps]).results] == [
        ("upstream-fixed", "`_is_sm120_supported` already in the guard"),
        ("upstream-fixed", "`get_platform().is_sm120` already in the guard"),
    ]
    old = slim_tree(tmp_path / "old", ("sglang", "0.5.20"), ("flashinfer-python", "0.6.17"))
    widened = replace(ps, specifier=SpecifierSet(">=0.5.20"), _versions=">=0.5.20")
    report = plan(old, [widened])
    results = report.results
    assert [r.state for r in results] == ["drifted", "applied"] and not report.ok and report.changes == ()
    assert results[1].message.endswith("; not written: another operation of this patchset drifted")
    assert results[0].message.startswith(
        f"{LAYER_BOUNDARY}: {ADD_NORM}: file is missing; anchor `_is_sm90_supported or _is_sm100_supported` in "
        "flashinfer_ar_fusion_applies() | apply_flashinfer_allreduce_fusion(); installed sglang 0.5.20"
    )
