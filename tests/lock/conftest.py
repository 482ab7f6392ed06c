"""Each lock test starts with the marker caches empty: ``markerspace`` remembers parsed markers and
pair verdicts (``functools.lru_cache``), which a test must not inherit from another (and which would
hide a mutant from mutation testing: mutmut forks each mutant from a process that ran the tests);
the validation cache on disk likewise starts empty, in a directory of the test's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envforge.lock import markerspace


@pytest.fixture(autouse=True)
def _empty_marker_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # the lock reader's validation cache (ambiguities found) starts empty too: its own directory
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("envforge-cache")))
    for cached in (markerspace.parse, markerspace._pair_witness, markerspace._base):
        cached.cache_clear()
    yield
