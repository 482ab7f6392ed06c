"""Representative Python versions for environment markers: where a comparison with a version
literal can change its truth value, and one release on each side (used by
:mod:`envforge.lock.markerspace`'s search; PEP 508's ``python_version`` is the first two parts of
``python_full_version``, so both are read as one full version)."""

from __future__ import annotations

import re

__all__ = ["representative_versions"]


def representative_versions(literals: set[str]) -> list[str]:
    """Representative full versions for the Python version literals ``literals``.

    A comparison's truth value changes only at a breakpoint: the literal ``L`` (zero-padded to
    three parts), the next minor release ``X.(Y+1).0`` (``python_version`` is two parts, so
    ``python_version <= '3.11'`` is ``python_full_version < '3.12.0'``, and ``== '3.11.*'`` ends
    there) and, for a one-part literal, the next major ``(X+1).0.0``. Each breakpoint and the micro
    release after it (inside the interval above it) are tried, and the release just below ``L``,
    borrowing as subtraction does (``3.11.0`` -> ``3.10.99``, ``3.0`` -> ``2.99.99``): so two
    markers are true together here exactly when packaging finds them true together at some release
    (tests/lock/test_markerspace.py checks every pair of a grid against packaging). ``0`` has
    nothing below it; a literal without digits is read as ``3``; parts past the third are ignored.
    """
    out: set[tuple[int, ...]] = set()  # called for a group some marker names: never without literals
    for lit in literals:
        given = [int(d) for d in re.findall(r"\d+", lit)[:3]] or [3]
        x, y, z = given + [0] * (3 - len(given))
        breaks = [(x, y, z), (x, y + 1, 0)] + ([(x + 1, 0, 0)] if len(given) == 1 else [])
        out.update(b for a, m, n in breaks for b in ((a, m, n), (a, m, n + 1)))
        below = _below((x, y, z))
        if below is not None:
            out.add(below)
    return sorted(".".join(map(str, v)) for v in out)


def _below(parts: tuple[int, int, int]) -> tuple[int, ...] | None:
    """The release just below ``parts`` (a zero part borrows: 99), or ``None`` at 0.0.0."""
    for k in (2, 1, 0):
        if parts[k] > 0:
            return parts[:k] + (parts[k] - 1,) + (99,) * (2 - k)
    return None
