"""Locked pins yanked on their index since the lock was made (PEP 592; field case B48).

A lock keeps installing a version its index has since yanked, without a word: ``lock --check``
needs no network and a build installs the locked file URLs. ``envforge lock`` sees uv's yank
warnings (:func:`envforge.lock.resolve.yank_warnings`); this module asks the index itself, for
``envforge lock diff --yanked`` (the new side's pins): each index's simple page of each locked
name is read once (PEP 503 HTML or PEP 691 JSON, :func:`envforge.patching.releases.list_releases`,
a listing kept in the cache answering when the index cannot be reached), and a pin any of whose
locked files the page marks ``data-yanked`` / ``"yanked"`` is reported with the page's reason, in
the words ``envforge lock`` uses (cargo: "package X in Cargo.lock is yanked").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.patching.releases import IndexListing, IndexUnreachable, list_releases

__all__ = ["Pin", "YankCheck", "YankedPin", "yanked_pins"]

Pin = tuple[str, str, str, Sequence[str]]
"""``(name, version, simple index URL, file names the lock pins)`` of one locked entry
(:func:`envforge.lockdiff.model.index_pins`)."""


@dataclass(frozen=True, slots=True)
class YankedPin:
    """A pin whose locked file ``file`` the index marks yanked; ``reason`` is the page's (``""``
    when it gives none)."""

    name: str
    version: str
    index: str
    file: str
    reason: str

    def describe(self) -> str:
        """``guardkit 1.1 is yanked on its index (reason: "miscompiles the SM120 guard")``."""
        why = f' (reason: "{self.reason}")' if self.reason else ""
        return f"{self.name} {self.version} is yanked on its index{why}"


@dataclass(frozen=True, slots=True)
class YankCheck:
    """What :func:`yanked_pins` found: ``yanked`` pins in the order given; ``unchecked`` one line per
    page that could not be read and had no cached listing (``"<name> on <index>: <cause>"``);
    ``stale`` one line per page answered from a cached listing (``"<name> on <index>: listing of
    <RFC 3339 time>"``)."""

    yanked: tuple[YankedPin, ...]
    unchecked: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()


def yanked_pins(pins: Sequence[Pin], cache: Path | None) -> YankCheck:
    """Ask each pin's index whether its locked files are yanked (one page read per index and name).

    :param cache: where listings are kept (and read from when an index cannot be reached); None
        keeps none.
    :returns: a :class:`YankCheck`; an index that cannot be read is an ``unchecked`` line, never an
        error (the diff is still shown).
    """
    listings: dict[tuple[str, str], IndexListing | None] = {}
    unchecked: list[str] = []
    stale: list[str] = []
    yanked: list[YankedPin] = []
    for name, version, index, files in pins:
        if (index, name) not in listings:
            listings[(index, name)] = _listing(name, index, cache, unchecked, stale)
        listing = listings[(index, name)]
        if listing is None:
            continue
        hit = next((f for f in files if (info := listing.files.get(f)) is not None and info.yanked is not None), None)
        if hit is not None:
            yanked.append(YankedPin(name, version, index, hit, listing.files[hit].yanked or ""))
    return YankCheck(tuple(yanked), tuple(unchecked), tuple(stale))


def _listing(name: str, index: str, cache: Path | None, unchecked: list[str], stale: list[str]) -> IndexListing | None:
    try:
        listing = list_releases(name, index, cache)
    except (IndexUnreachable, InputError) as exc:
        unchecked.append(f"{name} on {index}: {exc.message}")
        return None
    if listing.cached is not None:
        stale.append(f"{name} on {index}: listing of {listing.cached}")
    return listing
