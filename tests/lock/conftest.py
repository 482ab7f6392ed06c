"""Each lock test starts with the marker caches empty: ``markerspace`` remembers parsed markers and
pair verdicts (``functools.lru_cache``), which a test must not inherit from another (and which would
hide a mutant from mutation testing: mutmut forks each mutant from a process that ran the tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envforge.lock import markerspace


@pytest.fixture(autouse=True)
def _empty_marker_caches() -> Iterator[None]:
    for cached in (markerspace.parse, markerspace._pair_witness, markerspace._base):
        cached.cache_clear()
    yield
