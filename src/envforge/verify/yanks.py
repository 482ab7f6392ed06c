"""The ``yanked`` check of ``envforge verify --yanked`` (online; field case B48).

A version its index yanked after the lock was made (PEP 592) keeps installing from the lock and
passes every offline check. With ``--yanked``, verify asks each locked pin's index
(:func:`envforge.lock.yanks.yanked_pins`: one simple page per index and name, PEP 503 or PEP 691)
and reports a pin any of whose locked files the page marks yanked as a ``yanked`` finding, with the
index's reason. A page that cannot be read, and has no listing kept in the cache, is a "not checked"
note: never a pass (the check is ``skipped`` when no page could be read) and never an error.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from envforge.core.plural import counted
from envforge.lock.model import Lock
from envforge.lock.yanks import YankedPin, check_lock, lock_pins, warning_lines
from envforge.verify.findings import Check, CheckStatus, Finding

__all__ = ["yanked_check"]


def yanked_check(lock: Lock, cache: Path | None) -> tuple[list[Finding], Check, list[str]]:
    """``(findings, check, notes)`` of the ``yanked`` check on ``lock`` (the environment's lock).

    :param cache: where index listings are kept, and read from when an index cannot be reached.
    :returns: a ``yanked`` finding per yanked pin; the check (``findings``, ``ok``, or ``skipped``
        when the lock pins nothing from an index or no page could be read); a note per page not
        checked or answered from a cached listing.
    """
    pins = lock_pins(lock)
    check = check_lock(lock, cache)
    if not pins:
        return (
            [],
            Check("yanked", "static", "skipped", "the lock pins nothing from an index"),
            list(warning_lines(check, "the environment's lock")),
        )
    found = [_finding(y) for y in check.yanked]
    notes = list(warning_lines(replace(check, yanked=()), "the environment's lock"))
    indexes = len({index for _, _, index, _ in pins})
    detail = f"{counted(len(pins), 'pin')} asked of {counted(indexes, 'index', 'indexes')}"
    if check.unread:
        detail += f"; {counted(check.unread, 'page')} not checked (notes say why)"
    status: CheckStatus = "findings" if found else "ok" if check.checked else "skipped"
    return found, Check("yanked", "static", status, detail), notes


def _finding(y: YankedPin) -> Finding:
    why = f': "{y.reason}"' if y.reason else " (no reason given)"
    return Finding(
        "yanked",
        f"{y.name} {y.version}",
        "a version its index does not mark yanked (PEP 592)",
        f"{y.file} is yanked on {y.index}{why}",
        "relock to a version that is not yanked (`envforge lock`); while none is fixed, accept it "
        "in [[verify.accept]] with the reason and an expiry date",
    )
