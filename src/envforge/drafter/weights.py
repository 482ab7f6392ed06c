"""Safetensors weight files, read without trusting a byte: header, offsets, bounds, file type.

Format (https://github.com/huggingface/safetensors, README "Format"): 8 bytes little-endian
``N``, then ``N`` bytes of UTF-8 JSON (an object: tensor name -> ``{"dtype", "shape",
"data_offsets": [begin, end]}``, plus an optional ``"__metadata__"`` object of strings), then the
data buffer. :func:`parse_header` applies the rules the safetensors library itself enforces when it
loads a file (``safetensors/src/tensor.rs``, ``Metadata::validate``), so envforge never says "ok"
about a file the engine's loader would refuse:

- the header is a JSON **object** starting with ``{``, at most 100,000,000 bytes, inside the file;
- every entry has a known ``dtype``, a ``shape`` of non-negative integers and two integer
  ``data_offsets`` with ``begin <= end``; ``NaN``, ``Infinity``, floats (``1e400``), booleans and
  duplicate names are refused;
- ``numel(shape) x bits(dtype)`` is a whole number of bytes equal to ``end - begin``;
- the tensors, sorted by ``begin``, tile the data buffer exactly: no gap, no overlap, and the last
  ``end`` is the buffer's length (``file size - 8 - N``). A file cut short (field case B14) fails here.

Every error is an :class:`~envforge.core.errors.InputError` naming the file and the rule (exit 2).
Reads go through a :data:`ByteReader` that must return exactly the bytes asked for; local files are
opened only when they are regular files (a FIFO or a device named ``model.safetensors`` is refused
before any read can block) and only inside the drafter directory (a symlink leading elsewhere is
refused, except into the ``blobs/`` of a huggingface_hub cache, whose snapshots are symlinks).
"""

from __future__ import annotations

import json
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError

__all__ = [
    "DTYPE_BITS",
    "MAX_HEADER_BYTES",
    "ByteReader",
    "TensorInfo",
    "WeightFile",
    "local_reader",
    "open_regular",
    "parse_header",
    "read_weight_file",
]

MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit on the JSON header (tensor.rs MAX_HEADER_SIZE)
_FIRST_READ = 100_000  # one request covers most headers (as HfApi.parse_safetensors_file_metadata)

#: Bits per element of each safetensors dtype (safetensors ``Dtype::bitsize``, 0.8).
DTYPE_BITS = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

ByteReader = Callable[[str, int, int], bytes]
"""``read(file, start, length) -> bytes``: exactly ``length`` bytes of ``file`` from ``start``, or an
:class:`~envforge.core.errors.EnvforgeError`."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor from a validated safetensors header.

    ``offset`` is the absolute byte offset of its data in the file (``8 + N + data_offsets[0]``);
    ``nbytes`` its length in bytes (``data_offsets[1] - data_offsets[0]``, equal to numel x dtype
    size); ``file`` the repo-relative name of the safetensors file holding it.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    offset: int
    nbytes: int

    def describe(self) -> str:
        """``"I64 [32000]"``."""
        return f"{self.dtype} [{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True, slots=True)
class WeightFile:
    """A safetensors file whose header was validated: ``size`` in bytes, ``header_len`` (``N``)."""

    name: str
    size: int
    header_len: int
    tensors: tuple[TensorInfo, ...]


def _bad(where: str, why: str) -> InputError:
    return InputError(
        f"{where}: not a valid safetensors file: {why}",
        hint="the file is damaged or not safetensors; fetch it again (`envforge drafter fetch` "
        "re-hashes every file) or use the publisher's original",
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number safetensors accepts")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"key '{dup}' appears twice")
    return out


def _decode(raw: bytes, where: str) -> dict[str, Any]:
    if not raw.startswith(b"{"):
        raise _bad(where, "the header does not start with '{' (a JSON object)")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _bad(where, f"the header is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise _bad(where, f"the header is a JSON {type(data).__name__}, expected an object")
    return data


def _numel(shape: list[int]) -> int:
    """Product of ``shape``, capped just above 2**64 (no file holds more; big products stay cheap)."""
    n = 1
    for d in shape:
        n = min(n * d, 1 << 65)
    return n


_KEYS = frozenset({"dtype", "shape", "data_offsets"})


def _entry(name: str, entry: Any, where: str) -> tuple[str, tuple[int, ...], int, int]:
    if type(entry) is not dict:
        raise _bad(where, f"tensor '{name}': its entry is not a JSON object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    bits = DTYPE_BITS.get(dtype) if type(dtype) is str else None
    if bits is None:
        raise _bad(
            where,
            f"tensor '{name}': dtype {json.dumps(dtype)[:40]} is not a safetensors dtype ({', '.join(DTYPE_BITS)})",
        )
    if type(shape) is not list or not all(type(d) is int and 0 <= d < 1 << 64 for d in shape):
        raise _bad(where, f"tensor '{name}': shape {json.dumps(shape)[:60]} is not a list of integers in 0..2**64-1")
    if (
        type(offsets) is not list
        or len(offsets) != 2
        or type(offsets[0]) is not int
        or type(offsets[1]) is not int
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise _bad(
            where,
            f"tensor '{name}': data_offsets {json.dumps(offsets)[:60]} is not [begin, end] with 0 <= begin <= end",
        )
    nbits = _numel(shape) * bits
    if nbits % 8 or nbits // 8 != offsets[1] - offsets[0]:
        raise _bad(
            where,
            f"tensor '{name}': {dtype} {shape} needs {nbits / 8:g} bytes, data_offsets {offsets} "
            f"hold {offsets[1] - offsets[0]}",
        )
    if len(entry) > 3 and not entry.keys() <= _KEYS:
        raise _bad(where, f"tensor '{name}': unknown key(s) {', '.join(sorted(set(entry) - _KEYS))}")
    return str(dtype), tuple(shape), offsets[0], offsets[1]


def parse_header(raw: bytes, *, file: str, data_size: int, where: str | None = None) -> tuple[TensorInfo, ...]:
    """Validate the JSON header bytes ``raw`` of safetensors file ``file`` (module docstring's rules).

    :param data_size: bytes after the header (file size - 8 - ``len(raw)``); the tensors must tile it.
    :param where: how errors name the file (default ``file``).
    :returns: the tensors, sorted by name, with absolute offsets.
    :raises InputError: any rule broken, naming the file, the tensor and the rule.
    """
    where = where or file
    data = _decode(raw, where)
    meta = data.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise _bad(where, "__metadata__ is not an object of strings")
    entries = sorted(((n, *_entry(n, e, where)) for n, e in data.items()), key=lambda t: (t[3], t[4]))
    pos = 0
    for name, _, _, begin, end in entries:
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap at bytes {pos}..{begin}"
            raise _bad(where, f"tensor '{name}': data_offsets [{begin}, {end}] {what}")
        pos = end
    if pos != data_size:
        why = f"the tensors end at data byte {pos:,} but the file holds {data_size:,} data bytes " + (
            "(the file is cut short)" if pos > data_size else "(bytes no tensor accounts for)"
        )
        raise _bad(where, why)
    base = 8 + len(raw)
    return tuple(
        sorted((TensorInfo(n, dt, sh, file, base + b, e - b) for n, dt, sh, b, e in entries), key=lambda t: t.name)
    )


def read_weight_file(read: ByteReader, file: str, size: int, *, where: str | None = None) -> WeightFile:
    """Read and validate the header of ``file`` (``size`` bytes) through ``read``: one read of the
    first 100 kB, a second one only for a larger header.

    :raises InputError: shorter than 8 bytes, a header length beyond the file or 100 MB, or any
        :func:`parse_header` rule.
    """
    where = where or file
    if size < 8:
        raise _bad(where, f"{size} bytes, shorter than the 8-byte header length")
    first = read(file, 0, min(size, _FIRST_READ))
    (n,) = struct.unpack("<Q", first[:8])
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise _bad(
            where,
            f"header length {n:,} bytes does not fit "
            f"{'the 100 MB limit' if n > MAX_HEADER_BYTES else f'a file of {size:,} bytes'}",
        )
    raw = first[8 : 8 + n]
    if len(raw) < n:
        raw += read(file, len(first), 8 + n - len(first))
    tensors = parse_header(raw, file=file, data_size=size - 8 - n, where=where)
    return WeightFile(file, size, n, tensors)


def _inside(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def _hf_blob(path: Path, target: Path) -> bool:
    """``path`` is a snapshot entry of a huggingface_hub cache and ``target`` its blob
    (``<repo>/snapshots/<sha>/<file> -> <repo>/blobs/<hash>``, huggingface_hub ``file_download.py``)."""
    snap = path.parent
    return snap.parent.name == "snapshots" and target.parent == snap.parent.parent.resolve() / "blobs"


def open_regular(path: Path, root: Path) -> tuple[int, int]:
    """Open ``path`` for reading only if it is a regular file inside ``root`` (after symlinks).

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so a FIFO or a
    device is refused without blocking, and a file swapped after the check is still the one judged.

    :returns: ``(fd, size)``; the caller closes ``fd``.
    :raises InputError: missing, not a regular file, or a symlink out of ``root``.
    """
    target = path.resolve()
    if not _inside(target, root.resolve()) and not _hf_blob(path, target):
        raise InputError(
            f"{path}: a symlink to {target}, outside the drafter directory {root}",
            hint="copy the weights into the drafter directory (or fetch it with `envforge "
            "drafter fetch`); envforge reads no weight outside the directory it judges",
        )
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a directory"
            if stat.S_ISDIR(st.st_mode)
            else "a device or socket"
        )
        raise InputError(f"{path}: not a regular file ({kind})", hint="point at the real weight file")
    return fd, st.st_size


def local_reader(root: Path) -> ByteReader:
    """A :data:`ByteReader` over files of the directory ``root`` (names relative to it): each read
    opens the file through :func:`open_regular` and must get every byte asked for."""

    def read(file: str, start: int, length: int) -> bytes:
        fd, size = open_regular(root / file, root)
        try:
            data = os.pread(fd, length, start) if length else b""
        finally:
            os.close(fd)
        if len(data) != length:
            raise InputError(
                f"{root / file}: bytes {start:,}..{start + length:,} asked for, the file has "
                f"{size:,} bytes (it changed or is cut short)",
                hint="fetch the drafter again; envforge judges only complete files",
            )
        return data

    return read
