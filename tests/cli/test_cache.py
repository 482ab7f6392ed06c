"""``envforge cache dir|clean|prune`` through the real CLI entry point, on the cache tree of
tests/core/test_cache.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.core.test_cache import _tree

from envforge.cli import main


def test_the_cache_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    _tree(root)
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(root))
    assert main(["cache", "dir"]) == 0
    out, err = capsys.readouterr()
    assert (out, err.splitlines()) == (
        f"{root}\n",
        [
            "  patch-results          65 B  4 files",
            "  releases            3.5 KiB  8 files",
            "  valid-locks             0 B  1 file",
            "  marker-verdicts         0 B  0 files",
        ],
    )
    assert main(["cache", "dir", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["data"]["root"], doc["data"]["bytes"], doc["data"]["caches"][2]) == (
        "envforge.cache/1",
        str(root),
        3645,
        {"name": "valid-locks", "path": str(root / "valid-locks"), "files": 1, "bytes": 0},
    )
    assert main(["cache", "prune"]) == 0
    out, err = capsys.readouterr()
    assert out == "removed 6 files (1.4 KiB)\n" and len(err.splitlines()) == 6
    assert main(["cache", "prune"]) == 0 and capsys.readouterr().out == "nothing to remove\n"
    assert main(["cache", "clean", "releases", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["data"]) == (
        "envforge.cache-removal/1",
        {"removed": [str(root / "releases")], "files": 4, "bytes": 2190},
    )
    assert main(["cache", "clean", "nope"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == "error: no cache named 'nope'"
