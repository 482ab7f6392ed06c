"""Counted nouns in what envforge prints: ``1 check``, ``2 checks``, ``0 findings``, never ``1 checks``
or ``finding(s)``.

Every renderer that puts a number before a noun goes through :func:`counted` (or :func:`noun` when the
number is printed elsewhere), so the rule lives in one place. English only; the nouns envforge prints
are regular (``check``, ``request``, ``package``; ``process`` -> ``processes``, ``entry`` -> ``entries``)
or are given their plural (``counted(n, "index", "indexes")``).
"""

from __future__ import annotations

__all__ = ["counted", "noun"]

_SIBILANT = ("s", "x", "z", "ch", "sh")


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """``singular`` when ``n`` is 1 (or -1), else its plural: ``plural`` when given, else the regular
    English one (``-es`` after s, x, z, ch, sh; consonant + ``y`` -> ``-ies``; otherwise ``-s``).

    >>> noun(1, "check"), noun(2, "check"), noun(0, "process"), noun(3, "entry")
    ('check', 'checks', 'processes', 'entries')
    """
    if abs(n) == 1:
        return singular
    if plural is not None:
        return plural
    if singular.endswith(_SIBILANT):
        return singular + "es"
    if len(singular) > 1 and singular.endswith("y") and singular[-2] not in "aeiou":
        return singular[:-1] + "ies"
    return singular + "s"


def counted(n: int, singular: str, plural: str | None = None, *, thousands: bool = False) -> str:
    """``n`` and the noun that agrees with it: ``counted(1, "check")`` is ``"1 check"``,
    ``counted(3, "request")`` ``"3 requests"``; ``thousands`` writes ``n`` with separators
    (``1,234 bytes``). See :func:`noun` for the plural rule.
    """
    return f"{n:,} {noun(n, singular, plural)}" if thousands else f"{n} {noun(n, singular, plural)}"
