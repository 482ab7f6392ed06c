"""envforge's own caches (``envforge.core.cache``) on a real cache tree laid out as patching/memo.py,
patching/releases.py and lock/read.py write it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envforge.core.cache import CACHES, cache_root, cache_sizes, clean, prune
from envforge.patching.memo import default_cache
from envforge.core.errors import InputError


def _file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def _tree(root: Path) -> dict[str, Path]:
    """A cache as the writers leave it: two results (one interrupted), a release unpacked from its
    wheel, one downloaded and never unpacked, an interrupted download and unpack, lock markers."""
    rel = root / "releases"
    (rel / "unpacked" / "sglang-0.5.9" / "sglang").mkdir(parents=True)
    _file(rel / "unpacked" / "sglang-0.5.9" / "sglang" / "__init__.py", 100)
    (rel / "unpacked" / "sglang-0.5.9" / ".complete-py").write_text("sglang-0.5.9-py3-none-any.whl\n")
    return {
        "result": _file(root / "patch-results" / "aa.json", 10),
        "result-bytes": _file(root / "patch-results" / "aa.after", 20),
        "orphan-bytes": _file(root / "patch-results" / "bb.after", 30),
        "tmp": _file(root / "patch-results" / ".cc.json.x1.envforge-tmp", 5),
        "read-wheel": _file(rel / "wheels" / "sglang-0.5.9-py3-none-any.whl", 1000),
        "unread-wheel": _file(rel / "wheels" / "sglang-0.5.10-py3-none-any.whl", 2000),
        "part": _file(rel / "wheels" / "sglang-0.5.11-py3-none-any.whl.part", 300),
        "partial": _file(rel / "unpacked" / "sglang-0.5.12.partial" / "sglang" / "x.py", 40),
        "unmarked": _file(rel / "unpacked" / "sglang-0.5.13" / "sglang" / "x.py", 50),
        "listing": _file(rel / "index" / "0123" / "sglang.json", 60),
        "marker": _file(root / "valid-locks" / "ab12", 0),
    }


def test_the_root_follows_the_environment() -> None:
    assert cache_root({"ENVFORGE_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c")
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/envforge")
    assert cache_root({}) == Path.home() / ".cache" / "envforge"


def test_a_relative_root_is_said_as_the_absolute_path_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENVFORGE_CACHE_DIR=rel is rel under the current directory (as uv reads UV_CACHE_DIR), and every
    cache and `envforge cache dir` name it absolutely; ~ is expanded."""
    monkeypatch.chdir(tmp_path)
    assert cache_root({"ENVFORGE_CACHE_DIR": "rel"}) == tmp_path / "rel"
    assert cache_root({"XDG_CACHE_HOME": "x"}) == tmp_path / "x" / "envforge"
    assert cache_root({"ENVFORGE_CACHE_DIR": "~/c"}) == Path.home() / "c"
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", "rel")
    assert default_cache() == tmp_path / "rel"


def test_sizes_count_each_inode_once_and_follow_no_link(tmp_path: Path) -> None:
    root = tmp_path / "c"
    files = _tree(root)
    os.link(files["read-wheel"], root / "releases" / "wheels" / "hardlink.whl")
    (root / "releases" / "wheels" / "elsewhere").symlink_to(tmp_path)
    assert [(s.name, s.files, s.bytes) for s in cache_sizes(root)] == [
        ("patch-results", 4, 65),
        ("releases", 8, 3580),
        ("valid-locks", 1, 0),
        ("marker-verdicts", 0, 0),
    ]
    assert [s.name for s in cache_sizes(tmp_path / "none")] == list(CACHES)
    assert sum(s.bytes for s in cache_sizes(tmp_path / "none")) == 0


def test_prune_removes_only_what_no_run_reads_again(tmp_path: Path) -> None:
    root = tmp_path / "c"
    files = _tree(root)
    removal = prune(root)
    rel = root / "releases"
    assert removal.paths == tuple(
        sorted(
            [
                files["orphan-bytes"],
                files["tmp"],
                rel / "unpacked" / "sglang-0.5.12.partial",
                rel / "unpacked" / "sglang-0.5.13",
                files["read-wheel"],
                files["part"],
            ]
        )
    )
    assert (removal.files, removal.bytes) == (6, 30 + 5 + 40 + 50 + 1000 + 300)
    kept = ["result", "result-bytes", "unread-wheel", "listing", "marker"]
    assert [name for name, path in files.items() if path.exists()] == kept
    assert (rel / "unpacked" / "sglang-0.5.9" / "sglang" / "__init__.py").is_file()
    assert prune(root).paths == ()


def test_clean_removes_the_named_caches_or_all(tmp_path: Path) -> None:
    root = tmp_path / "c"
    _tree(root)
    removal = clean(root, ["valid-locks"])
    assert (removal.paths, removal.files, removal.bytes) == ((root / "valid-locks",), 1, 0)
    assert sorted(p.name for p in root.iterdir()) == ["patch-results", "releases"]
    with pytest.raises(InputError) as exc:
        clean(root, ["releases", "wheels"])
    assert str(exc.value) == (
        "no cache named 'wheels'\n  hint: envforge's caches: patch-results, releases, valid-locks, marker-verdicts"
    )
    assert (root / "releases").is_dir()
    with pytest.raises(InputError) as exc:
        clean(root, ["relases", "patch-result"])
    assert exc.value.message == "no cache named 'relases', 'patch-result'; did you mean 'releases', 'patch-results'?"
    assert clean(root).paths == (root / "patch-results", root / "releases") and list(root.iterdir()) == []


def test_a_fifo_in_the_cache_never_blocks(tmp_path: Path) -> None:
    """A FIFO where an unpack marker or a result should be is judged by its type, never opened."""
    root = tmp_path / "c"
    tree = root / "releases" / "unpacked" / "sglang-0.5.9"
    tree.mkdir(parents=True)
    os.mkfifo(tree / ".complete-py")
    os.mkfifo(_file(root / "patch-results" / "x", 0).with_name("aa.after"))
    assert [(s.name, s.files) for s in cache_sizes(root)] == [
        ("patch-results", 1),
        ("releases", 0),
        ("valid-locks", 0),
        ("marker-verdicts", 0),
    ]
    assert prune(root).paths == (root / "patch-results" / "aa.after", tree)
