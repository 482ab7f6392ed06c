"""The validation cache of :mod:`envforge.lock.read`: "this exact text passed this reader under this
packaging version", and the ambiguities found in it, kept under envforge's cache directory as
``valid-locks/<sha256 of reader version, packaging version and the text>`` (a small JSON list of
``[key, first, second, first entry, second entry, witness]``). A warm read skips ``Pylock.from_dict``,
uv.lock's shape check and the same-name overlap search. ``ENVFORGE_NO_LOCK_CACHE=1`` turns it off.
Whoever can write the cache directory can make an invalid lock pass validation, as they can corrupt
uv's cache beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import packaging

from envforge.core.cache import cache_root
from envforge.core.errors import InputError
from envforge.core.fs import atomic_write
from envforge.core.textfile import LARGE_LIMIT, SMALL_LIMIT, read_state
from envforge.lock.ambiguity import Ambiguity

__all__ = ["READER", "recalled", "recalled_verdict", "remember", "remember_verdict", "validated_marker", "verdict_path"]

# bump when what the reader accepts or finds changes: old cache entries stop counting
# (4: the overlap search tries the Python versions below a zero part and after each breakpoint)
READER = "envforge.lockreader/4"


def validated_marker(text: str) -> Path | None:
    """Where the fact "this exact text passed this reader under this packaging version" is kept:
    ``$ENVFORGE_CACHE_DIR`` (else ``$XDG_CACHE_HOME/envforge``, ``~/.cache/envforge``)
    ``/valid-locks/<sha256>``; ``None`` when ``ENVFORGE_NO_LOCK_CACHE`` is set."""
    if os.environ.get("ENVFORGE_NO_LOCK_CACHE"):
        return None
    base = cache_root()
    key = hashlib.sha256(f"{READER}\0{packaging.__version__}\0".encode() + text.encode("utf-8")).hexdigest()
    return base / "valid-locks" / key


def remember(marker: Path | None, found: Sequence[Ambiguity]) -> None:
    """Keep "this text passed" and its ambiguities (a JSON list of ``[key, first, second, first
    entry, second entry, witness]``) at ``marker``."""
    if marker is None:
        return
    body = [[a.key, a.first, a.second, a.first_entry, a.second_entry, dict(a.witness)] for a in found]
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(marker, json.dumps(body).encode())
    except OSError:
        pass  # a read-only cache only costs the next read a validation


def recalled(marker: Path | None) -> tuple[Ambiguity, ...] | None:
    """The ambiguities kept at ``marker`` when this text passed before; ``None`` when it did not (or
    the entry cannot be read: it is then validated again)."""
    if marker is None:
        return None
    try:
        body = json.loads(read_state(marker, what="validation cache entry", limit=LARGE_LIMIT))
        return tuple(
            Ambiguity(str(k), int(i), int(j), str(a), str(b), {str(x): str(y) for x, y in w.items()})
            for k, i, j, a, b, w in body
        )
    except (
        OSError,
        ValueError,
        TypeError,
        AttributeError,
        RecursionError,
        InputError,
    ):  # a FIFO planted there: named, never opened
        return None


def verdict_path(a: str | None, b: str | None) -> Path | None:
    """Where the verdict "markers ``a`` and ``b`` are true in the same environments" of ``lock diff``
    is kept (``None``: no marker): ``<cache root>/marker-verdicts/<sha256 of reader version, packaging
    version, repr(a), repr(b)>``; ``None`` when ``ENVFORGE_NO_LOCK_CACHE`` is set. A warm diff of
    the same two locks then needs no marker parse (packaging.markers and its imports: about 45 ms)."""
    if os.environ.get("ENVFORGE_NO_LOCK_CACHE"):
        return None
    key = hashlib.sha256(f"{READER}\0{packaging.__version__}\0{a!r}\0{b!r}".encode()).hexdigest()
    return cache_root() / "marker-verdicts" / key


def remember_verdict(path: Path | None, same: bool) -> None:
    """Keep the verdict at ``path`` (the byte ``1``: same environments, ``0``: not)."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, b"1" if same else b"0")
    except OSError:
        pass  # a read-only cache only costs the next diff a marker parse


def recalled_verdict(path: Path | None) -> bool | None:
    """The verdict kept at ``path``, or ``None`` (none kept, unreadable, or not ``0``/``1``: decided again)."""
    if path is None:
        return None
    try:
        return {b"1": True, b"0": False}.get(read_state(path, what="marker verdict", limit=SMALL_LIMIT))
    except (OSError, InputError):  # not a regular file (a FIFO would block): decided again
        return None
