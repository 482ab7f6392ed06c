"""``file://`` index URLs: a local PEP 503 directory, read as pip and uv read it.

An air-gapped GPU box carries its wheels in a local simple index (``file:///wheels/simple``:
``<project>/index.html`` per project, the wheels beside or below it); pip and uv accept such an index
URL, and so do ``patches check --index-url`` and the lock's yank check. httpx has no ``file://``
support (its client takes a host-less URL for a relative one), so the index client asks this
module for ``file:`` URLs: a directory is its ``index.html`` (PEP 503's page of a project), a
regular file its bytes. Nothing that is not a regular file is opened (a FIFO would block).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

from envforge.core.textfile import file_kind

__all__ = ["is_file_url", "local_blocks", "local_page"]

_BLOCK = 1 << 20


def is_file_url(url: str) -> bool:
    """``url`` names a local file (``file:``), not an HTTP(S) resource."""
    return urlsplit(url).scheme == "file"


def _path(url: str) -> Path:
    path = Path(unquote(urlsplit(url).path))
    return path / "index.html" if path.is_dir() else path


def _open(url: str) -> tuple[int, int] | str:
    """``(descriptor, size)`` of the file ``url`` names, or why it cannot be read: ``"missing"``,
    or its kind (``"a FIFO"``...) for anything that is not a regular file, never opened."""
    path = _path(url)
    try:
        st = path.stat()
    except OSError:
        return "missing"
    if (kind := file_kind(st.st_mode)) is not None:
        return kind
    try:  # non-blocking: a FIFO swapped in since the stat never blocks the open
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        return exc.strerror or "unreadable"
    if (kind := file_kind(os.fstat(fd).st_mode)) is not None:
        os.close(fd)
        return kind
    return fd, st.st_size


def local_page(url: str, limit: int) -> str | None:
    """The text of the page ``url`` names (a directory's ``index.html``), or None when there is none.

    :raises OSError: it is not a regular file (the message names its kind), is larger than
        ``limit`` bytes, or cannot be read; not UTF-8 reads with replacement characters, as a
        browser would.
    """
    opened = _open(url)
    if opened == "missing":
        return None
    if isinstance(opened, str):
        raise OSError(f"{_path(url)} is {opened}, not a file")
    fd, size = opened
    with open(fd, "rb", buffering=0) as fh:
        if size > limit:
            raise OSError(f"{_path(url)} is larger than {limit} bytes")
        return fh.read(limit + 1).decode("utf-8", errors="replace")


def local_blocks(url: str) -> Iterator[bytes]:
    """The bytes of the file ``url`` names, 1 MiB at a time.

    :raises OSError: missing, not a regular file (its kind named), or unreadable.
    """
    opened = _open(url)
    if isinstance(opened, str):
        raise OSError(f"{_path(url)}: {'no such file' if opened == 'missing' else opened}")
    fd, _ = opened
    with open(fd, "rb", buffering=0) as fh:
        while block := fh.read(_BLOCK):
            yield block
