"""The bounds are numpy's seed range and the stated concurrency cap, pinned literally."""

from __future__ import annotations

import numpy as np
import pytest

from envforge.core.limits import MAX_CONCURRENCY, MAX_SEED


def test_the_largest_seed_is_the_largest_numpy_takes() -> None:
    assert (MAX_SEED, MAX_CONCURRENCY) == (4294967295, 100000)
    np.random.RandomState(MAX_SEED)
    with pytest.raises(ValueError):
        np.random.RandomState(MAX_SEED + 1)
