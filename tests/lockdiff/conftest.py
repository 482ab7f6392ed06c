"""Each lock diff test starts with empty caches: its own envforge cache directory (the lock reader's
validation cache and ``lock diff``'s marker verdicts live there) and empty in-process marker caches.
A verdict remembered by an earlier test, or by the run mutmut forks its mutants from, would answer
in place of the code under test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envforge.lock import markerspace
from envforge.lockdiff import classify


@pytest.fixture(autouse=True)
def _empty_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("envforge-cache")))
    for cached in (markerspace.parse, markerspace._pair_witness, markerspace._base, classify._same_space):
        cached.cache_clear()
    yield
