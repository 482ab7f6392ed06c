"""Writing files safely: atomic replacement with the right permission bits, and content digests.

A write goes to a temp file in the same directory, is fsynced and ``os.replace``d over the target, so a
reader sees the old bytes or the new ones and a hardlinked target (uv's cache, field case B09) is
replaced, never edited in place. A symlink is replaced the same way (:func:`replace_symlink`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "current_umask", "file_identity", "file_mode", "replace_symlink", "sha256_hex"]


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def current_umask() -> int:
    """This process's umask, read from ``/proc/self/status`` (Linux >= 4.7, ``Umask:`` line) so no
    thread sees it changed; elsewhere set and restored with ``os.umask`` (racy only if another
    thread creates a file in between)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode(path: Path) -> int:
    """The permission bits a rewrite of ``path`` should get: those of the existing file, else what
    ``open()`` would give a new one (``0o666 & ~umask``, e.g. 0644 under umask 022).
    ``tempfile.mkstemp`` creates 0600, which would hide a ``.pth`` from other users' Pythons."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def file_identity(path: Path) -> tuple[int, int, int]:
    """``(size, mtime_ns, inode)`` of ``path``: a file read earlier is still the same file while
    this is unchanged (no writer keeps all three)."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


def atomic_write(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to a temp file next to ``path`` and ``os.replace`` it (field case B09: a
    hardlinked ``path`` is replaced, never edited in place, so its twins keep their bytes).
    ``mode`` (permission bits) defaults to :func:`file_mode` (the existing file's, else 0666 & ~umask)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".envforge-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode(path) if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_symlink(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` with one ``os.replace`` of a new relative symlink: a reader sees
    the old target or the new one, never no link (rename(2) is atomic on POSIX).

    The new link is made as ``.<name>.new-link`` beside ``link`` (a leftover of a killed run is
    removed first); it reads ``os.path.relpath(target, link.parent)``, so the tree can move.
    """
    tmp = link.with_name(f".{link.name}.new-link")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)
