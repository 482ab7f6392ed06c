"""envforge.core.deadline: one caller's limit, as the child-process runners see it."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context

import pytest

from envforge.core.deadline import Cut, cut, deadline


def test_no_deadline_keeps_the_own_timeout() -> None:
    assert cut(60.0) == Cut(60.0, None)
    assert cut(None) == Cut(None, None)
    assert not cut(None).expired


def test_the_earlier_end_wins() -> None:
    with deadline(100.0):
        assert cut(5.0) == Cut(5.0, None)  # its own limit ends first: no deadline named
        within = cut(500.0)
        assert within.limit_s == 100.0 and 99.0 < (within.timeout_s or 0) <= 100.0
        unlimited = cut(None)  # a run without a limit of its own gets the deadline's
        assert unlimited.limit_s == 100.0 and 99.0 < (unlimited.timeout_s or 0) <= 100.0
    assert cut(500.0) == Cut(500.0, None)  # the block ended


def test_an_expired_deadline() -> None:
    with deadline(0.01):
        time.sleep(0.03)
        assert cut(60.0) == Cut(0.0, 0.01)
        assert cut(60.0).expired and cut(None).expired
    assert not Cut(0.0, None).expired  # (an own limit of 0 is not the caller's deadline)
    assert not Cut(1.0, 2.0).expired


def test_nesting_keeps_the_earlier_end() -> None:
    with deadline(10.0):
        with deadline(1000.0):
            assert cut(None).limit_s == 10.0
        with deadline(2.0):
            assert cut(None).limit_s == 2.0
        assert cut(None).limit_s == 10.0


def test_threads_see_it_only_with_the_context() -> None:
    with deadline(10.0), ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(copy_context().run, cut, None).result().limit_s == 10.0
        assert pool.submit(cut, None).result() == Cut(None, None)


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_a_deadline_with_nothing_in_it_is_expired_at_once(seconds: float) -> None:
    with deadline(seconds):
        assert cut(60.0).expired


def test_an_own_limit_equal_to_what_is_left_speaks_for_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    import envforge.core.deadline as module

    monkeypatch.setattr(module.time, "monotonic", lambda: 100.0)  # a frozen clock: exactly 5 s left
    with deadline(5.0):
        assert cut(5.0) == Cut(5.0, None)
        assert cut(5.000001) == Cut(5.0, 5.0)
