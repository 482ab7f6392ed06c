"""The patch-result cache (issue 16.4) on real sglang code, and verify's note on the files of a
patched distribution that stay hardlinked."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from tests.support.patching_trees import PATCHSETS, SGLANG_PATCHSETS, slim_tree

from envforge.installed.distributions import installed_distributions
from envforge.patching import apply, load_patchsets, plan, planning
from envforge.patching import memo
from envforge.patching.memo import CachedFile, ResultCache
from envforge.verify.records import PatchedFile, shared_files_note

KIMI = "sglang/srt/models/kimi_k25.py"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_second_environment_takes_states_and_bytes_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResultCache(tmp_path / "cache")
    first = slim_tree(tmp_path / "one", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.17"))
    cold = apply(first, load_patchsets(PATCHSETS, SGLANG_PATCHSETS), cache=cache)
    assert [r.state for r in cold.results] == ["applied"] * 4
    assert len(list(cache.directory.glob("*.json"))) == 4 and len(list(cache.directory.glob("*.after"))) == 4

    def no_parsing(*args: object, **kwargs: object) -> object:
        raise AssertionError("a cache hit must not evaluate the file")

    monkeypatch.setattr(planning, "evaluate_file", no_parsing)
    second = slim_tree(tmp_path / "two", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.17"))
    warm = apply(second, load_patchsets(PATCHSETS, SGLANG_PATCHSETS), cache=cache)
    assert [(r.patchset, r.file, r.state, r.message) for r in warm.results] == [
        (r.patchset, r.file, r.state, r.message) for r in cold.results
    ]
    assert {c.path: sha(second / c.path) for c in warm.changes} == {c.path: sha(first / c.path) for c in cold.changes}
    assert (second / ".envforge" / "patches.json").read_bytes() == (first / ".envforge" / "patches.json").read_bytes()


def test_a_damaged_entry_or_a_changed_input_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    sets = load_patchsets(PATCHSETS, ["kimik25-eagle3-delegation"])
    sp = slim_tree(tmp_path / "one", ("sglang", "0.5.9"))
    apply(sp, sets, cache=cache)
    (after,) = cache.directory.glob("*.after")
    after.write_bytes(b"garbage\n")  # the recorded sha256 no longer matches: recomputed, not trusted
    again = slim_tree(tmp_path / "two", ("sglang", "0.5.9"))
    report = apply(again, sets, cache=cache)
    assert [r.state for r in report.results] == ["applied"] and b"garbage" not in (again / KIMI).read_bytes()
    # an entry whose state is not a patch state (an older envforge's, a hand edit): a miss, recomputed
    (entry,) = cache.directory.glob("*.json")
    entry.write_text(entry.read_text().replace('"applied"', '"Applied"'))
    report = apply(slim_tree(tmp_path / "four", ("sglang", "0.5.9")), sets, cache=cache)
    assert [r.state for r in report.results] == ["applied"]
    assert '"applied"' in entry.read_text()
    # the delegate file (signatures-from) is part of the key: another delegate, another result
    delegate = again.parent / "three"
    third = slim_tree(delegate, ("sglang", "0.5.9"))
    dv2 = third / "sglang/srt/models/deepseek_v2.py"
    dv2.write_text(dv2.read_text().replace("def set_eagle3_layers_to_capture(", "def set_eagle3_layers(", 1))
    (result,) = plan(third, sets, cache=cache).results
    assert (result.state, "has no method set_eagle3_layers_to_capture" in result.message) == ("drifted", True)


def test_a_manifest_written_from_the_cache_is_what_verify_expects(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    for name in ("one", "two"):
        sp = slim_tree(tmp_path / name, ("sglang", "0.5.9"))
        apply(sp, load_patchsets(PATCHSETS, ["sm120-torch-symm-mem"]), cache=cache)
        manifest = json.loads((sp / ".envforge" / "patches.json").read_text())
        assert all(sha(sp / f["path"]) == f["new_sha256"] for f in manifest["files"])


def test_verify_names_the_other_hardlinked_files_of_a_patched_distribution(tmp_path: Path) -> None:
    """Only patched files leave uv's cache now; the others stay hardlinks, and verify says so."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    shared = tmp_path / "uv-cache-copy"
    shared.mkdir()
    for rel in ("sglang/srt/models/deepseek_v2.py", "sglang/srt/layers/communicator.py"):
        os.link(sp / rel, shared / Path(rel).name)  # as uv's cache would hold them
    patched = [PatchedFile(KIMI, "0" * 64, "1" * 64, "kimik25-eagle3-delegation")]
    assert shared_files_note(sp, installed_distributions(sp).values(), patched) == (
        "hardlinked (shared with uv's cache): 2 of sglang other files of the patched distributions; envforge "
        "replaced only the files it patched, so edit none of the others in place"
    )
    assert shared_files_note(sp, installed_distributions(sp).values(), []) is None


def test_an_entry_is_written_whole_with_the_mode_open_would_give(tmp_path: Path) -> None:
    """Entries go through core.fs.atomic_write: no temp file left, 0644 under umask 022 (not mkstemp's 0600)."""
    cache = ResultCache(tmp_path / "cache")
    old = os.umask(0o022)
    try:
        cache.put("k", b"before\n", CachedFile((("applied", "added x", ""),), b"after\n"))
    finally:
        os.umask(old)
    assert sorted(p.name for p in cache.directory.iterdir()) == ["k.after", "k.json"]
    assert {p.name: p.stat().st_mode & 0o777 for p in cache.directory.iterdir()} == {"k.after": 0o644, "k.json": 0o644}
    assert cache.get("k", b"before\n") == CachedFile((("applied", "added x", ""),), b"after\n")


def test_the_engine_tag_hashes_every_module_that_decides_a_result() -> None:
    here = Path(memo.__file__).parent
    assert memo.ENGINE_SOURCES == (
        "states.py",
        "planning.py",
        "operations/__init__.py",
        "operations/base.py",
        "operations/edits.py",
        "operations/replacements.py",
        "syntax.py",
        "source.py",
        "soundness.py",
        "memo.py",
    )
    assert all((here / name).is_file() for name in memo.ENGINE_SOURCES)
    assert len(memo.engine_tag()) == 64
