"""Locked pins yanked on their index since the lock was made (PEP 592; field case B48).

A lock keeps installing a version its index has since yanked, without a word: ``lock --check``
needs no network and a build installs the locked file URLs. ``envforge lock`` sees uv's yank
warnings (:func:`envforge.lock.resolve.yank_warnings`); this module asks the index itself, for
``envforge lock diff --yanked`` (the new side's pins), ``envforge build`` (a warning per yanked pin
of the lock it installs) and ``envforge verify --yanked`` (a ``yanked`` finding): each index's
simple page of each locked name is read once (PEP 503 HTML or PEP 691 JSON,
:func:`envforge.patching.releases.list_releases`, up to :data:`WORKERS` pages at a time, a listing
kept in the cache answering when the index cannot be reached), and a pin any of whose locked files
the page marks ``data-yanked`` / ``"yanked"`` is reported with the page's reason, in the words
``envforge lock`` uses (cargo: "package X in Cargo.lock is yanked"). A page that cannot be read is
a "not checked" line, never a pass and never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from envforge.core.errors import InputError
from envforge.lock.model import Lock, LockedPackage
from envforge.lock.routing import DEFAULT_INDEX, attribute
from envforge.patching.releases import NOT_ASKED, IndexListing, IndexUnreachable, list_releases

__all__ = ["WORKERS", "Pin", "YankCheck", "YankedPin", "check_lock", "lock_pins", "warning_lines", "yanked_pins"]

#: Simple pages read at a time (a 235-entry lock is 235 pages on one index).
WORKERS = 8

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
    <RFC 3339 time>"``); ``no_index`` the entries (``"<name> <version>"``) the caller could not ask
    about because the lock names no index for them (``pip lock`` writes none); ``pages`` how many
    distinct (index, name) pages were asked for, ``unread`` how many of them gave no listing (the
    pages of an index that did not answer are one ``unchecked`` line)."""

    yanked: tuple[YankedPin, ...]
    unchecked: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    no_index: tuple[str, ...] = ()
    pages: int = 0
    unread: int = 0

    @property
    def checked(self) -> bool:
        """Whether any page was read (live or cached): False when nothing could be asked."""
        return bool(self.yanked) or self.pages > self.unread


def lock_pins(lock: Lock) -> tuple[Pin, ...]:
    """The pins of a pylock read by :func:`envforge.lock.model.read_lock` that an index serves: every
    entry with a version and an ``http(s)`` ``index``, or without one whose wheels are all on PyPI's
    file host (PyPI's), with its wheels' file names."""
    return tuple(
        (p.name, p.version, index, tuple(w.name for w in p.wheels if w.name))
        for p in lock.packages
        if p.version and (index := _index_of(p)) is not None
    )


def check_lock(lock: Lock, cache: Path | None) -> YankCheck:
    """:func:`yanked_pins` of :func:`lock_pins`, with ``no_index`` the entries whose wheels come
    from an ``http(s)`` URL no ``index`` names (``"name version"``)."""
    unnamed = tuple(
        f"{p.name} {p.version}"
        for p in lock.packages
        if p.version
        and _index_of(p) is None
        and p.index is None
        and any((w.url or "").startswith(("http://", "https://")) for w in p.wheels)
    )
    return replace(yanked_pins(lock_pins(lock), cache), no_index=unnamed)


def _index_of(p: LockedPackage) -> str | None:
    if p.index:
        return p.index.rstrip("/") if p.index.startswith(("http://", "https://")) else None
    urls = [w.url for w in p.wheels]
    on_pypi = bool(urls) and all(u and attribute(u, [DEFAULT_INDEX]) == DEFAULT_INDEX.name for u in urls)
    return DEFAULT_INDEX.url if on_pypi else None


def warning_lines(check: YankCheck, label: str) -> tuple[str, ...]:
    """One line per yanked pin, page not checked, page answered from the cache, and one for the
    entries naming no index, each starting with ``label`` (the lock's name):
    ``pylock.toml: guardkit 1.1 is yanked on its index (reason: "...")``."""
    lines = [f"{label}: {y.describe()}" for y in check.yanked]
    lines += [f"{label}: not checked for yanks: {line}" for line in check.unchecked]
    lines += [f"{label}: checked for yanks from a cached listing: {line}" for line in check.stale]
    if check.no_index:
        shown = ", ".join(check.no_index[:5]) + (
            f" and {len(check.no_index) - 5} more" if len(check.no_index) > 5 else ""
        )
        lines.append(
            f"{label}: not checked for yanks: {len(check.no_index)} "
            f"{'entry names' if len(check.no_index) == 1 else 'entries name'} no index: {shown}"
        )
    return tuple(lines)


def yanked_pins(pins: Sequence[Pin], cache: Path | None) -> YankCheck:
    """Ask each pin's index whether its locked files are yanked (one page read per index and name).

    :param cache: where listings are kept (and read from when an index cannot be reached); None
        keeps none.
    :returns: a :class:`YankCheck`; an index that cannot be read is an ``unchecked`` line, never an
        error (the diff is still shown).
    """
    pages = list(dict.fromkeys((index, name) for name, _, index, _ in pins))
    down: dict[str, str] = {}  # index -> why its first page could not be read: later pages only from the cache
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        read = dict(zip(pages, pool.map(lambda page: _listing(page[1], page[0], cache, down), pages)))
    unread = [(index, name) for index, name in pages if isinstance(read[(index, name)], str)]
    unchecked = _unchecked(unread, read, down)
    stale = [
        f"{name} on {index}: listing of {listing.cached}"
        for (index, name), listing in read.items()
        if isinstance(listing, IndexListing) and listing.cached is not None
    ]
    yanked: list[YankedPin] = []
    for name, version, index, files in pins:
        listing = read[(index, name)]
        if isinstance(listing, str):
            continue
        hit = next((f for f in files if (info := listing.files.get(f)) is not None and info.yanked is not None), None)
        if hit is not None:
            yanked.append(YankedPin(name, version, index, hit, listing.files[hit].yanked or ""))
    return YankCheck(tuple(yanked), tuple(unchecked), tuple(stale), pages=len(pages), unread=len(unread))


def _unchecked(
    unread: Sequence[tuple[str, str]], read: dict[tuple[str, str], IndexListing | str], down: dict[str, str]
) -> list[str]:
    """One line per page not read, except that the pages of an index that did not answer are one
    line for that index (``guardkit and 234 more names on URL: <the first cause>``)."""
    lines: list[str] = []
    by_index: dict[str, list[str]] = {}
    for index, name in unread:
        if index in down:
            by_index.setdefault(index, []).append(name)
        else:
            lines.append(f"{name} on {index}: {read[(index, name)]}")
    for index, names in by_index.items():  # led by the first page (in lock order) that was really asked
        first = next((n for n in names if not str(read[(index, n)]).endswith(NOT_ASKED)), names[0])
        more = f" and {len(names) - 1} more {'name' if len(names) == 2 else 'names'}" if len(names) > 1 else ""
        lines.append(f"{first}{more} on {index}: {read[(index, first)]}")
    return lines


def _listing(name: str, index: str, cache: Path | None, down: dict[str, str]) -> IndexListing | str:
    """The page's listing, or why it could not be read (a page that is not a simple page counts).
    Once a page of an index could not be read (``down``), its other pages are taken from the cache
    only: a black-holed index costs one timeout per worker, not one per locked name."""
    try:
        return list_releases(name, index, cache, cached_only=index in down)
    except IndexUnreachable as exc:
        down.setdefault(index, exc.message)
        return exc.message
    except InputError as exc:
        return exc.message
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON that is not PEP 691
        return f"{index}/{name}/ is not a readable simple page ({type(exc).__name__}: {exc})"
