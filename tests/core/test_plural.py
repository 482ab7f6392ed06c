"""Counted nouns (``envforge.core.plural``): the one place the plural rule lives."""

from __future__ import annotations

import pytest

from envforge.core.plural import counted, noun


@pytest.mark.parametrize(
    "n, singular, plural, expected",
    [
        (1, "check", None, "1 check"),
        (0, "check", None, "0 checks"),
        (2, "request", None, "2 requests"),
        (1, "package", None, "1 package"),
        (3, "process", None, "3 processes"),
        (2, "index", None, "2 indexes"),
        (2, "patch", None, "2 patches"),
        (2, "entry", None, "2 entries"),
        (2, "key", None, "2 keys"),
        (2, "GPU", None, "2 GPUs"),
        (1, "[[verify.accept]] entry", "[[verify.accept]] entries", "1 [[verify.accept]] entry"),
        (4, "[[verify.accept]] entry", "[[verify.accept]] entries", "4 [[verify.accept]] entries"),
        (-1, "byte", None, "-1 byte"),
    ],
)
def test_counted_agrees_with_the_number(n: int, singular: str, plural: str | None, expected: str) -> None:
    assert counted(n, singular, plural) == expected


def test_thousands_and_noun_alone() -> None:
    assert counted(1234, "byte", thousands=True) == "1,234 bytes"
    assert (noun(1, "finding"), noun(5, "finding")) == ("finding", "findings")
