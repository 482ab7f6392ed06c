"""Released code of a distribution without installing it: list its releases on the index, fetch a
release's wheel and unpack its Python files into a cache, so patchsets can be evaluated on it
(``envforge patches check``). Neither pip nor uv is needed: envforge's own environment may have
no pip (``uv tool install``, ``uv venv``).

* Releases are read from the index's simple API (PEP 503 HTML or the PEP 691 JSON form, asked
  for with ``Accept``) with httpx2; only versions with at least one wheel that is not yanked
  count (PEP 592). Each successful read is kept in ``<cache>/index/``, so a later run whose index
  cannot be reached works from it (``IndexListing.cached`` says so).
* A wheel is downloaded from the URL its index page gives (relative links resolved against the
  page), at most :data:`MAX_WHEEL_BYTES`, each read limited to :data:`TIMEOUT_S`, into
  ``<cache>/wheels`` and checked against the page's ``sha256`` (the ``#sha256=`` fragment of PEP
  503, ``hashes`` of PEP 691). A wheel for this interpreter is preferred; any other one does, as
  only the Python files are read.
* ``<cache>/unpacked/<distribution>-<version>/`` holds the wheel's ``*.py`` files and its
  ``.dist-info`` (the layout of an installed site-packages, so the engine reads it unchanged),
  marked complete by ``.complete-py`` (or ``.complete`` when the whole wheel was unpacked).

The cache lives outside any environment: ``--cache``, else ``$ENVFORGE_CACHE_DIR``, else
``$XDG_CACHE_HOME/envforge`` (``~/.cache/envforge``).
"""

from __future__ import annotations

import hashlib
import html.parser
import json
import shutil
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx2
from packaging.specifiers import SpecifierSet
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envforge.core.errors import EXIT_TOOL_FAILED, EnvforgeError, InputError
from envforge.core.textfile import LARGE_LIMIT
from envforge.patching.fileindex import is_file_url, local_blocks, local_page
from envforge.patching.memo import default_cache

__all__ = [
    "DEFAULT_INDEX",
    "MAX_WHEEL_BYTES",
    "NOT_ASKED",
    "TIMEOUT_S",
    "IndexFile",
    "IndexListing",
    "IndexUnreachable",
    "default_cache",
    "fetch_release",
    "list_releases",
    "select_versions",
]

DEFAULT_INDEX = "https://pypi.org/simple"
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
TIMEOUT_S = 30.0  # seconds for connecting and for each read
MAX_WHEEL_BYTES = 2 * 1024**3  # a wheel larger than this is refused (sglang's are ~5 MB, flashinfer's ~10 MB)
_MAX_WHEEL_S = 600.0  # wall-clock seconds one wheel download may take
#: The cause of a ``cached_only`` read with no cached listing (:func:`list_releases`).
NOT_ASKED = "not asked: the index did not answer a read just before"


class IndexUnreachable(EnvforgeError):
    """The index (or a file on it) could not be read: DNS, refused, timeout, an HTTP status, a size
    or hash mismatch (exit 3, like a failed external tool)."""

    exit_code = EXIT_TOOL_FAILED


@dataclass(frozen=True, slots=True)
class IndexFile:
    """One file of an index page: absolute ``url``, ``sha256`` (hex, or None when the page gives
    none) and ``yanked`` (None, or the PEP 592 reason, ``""`` when none was given)."""

    url: str
    sha256: str | None
    yanked: str | None = None


@dataclass(frozen=True, slots=True)
class IndexListing:
    """The wheels of one distribution on an index: ``wheels[version]`` = file names (not yanked),
    ``files[file name]`` = where each file of the page is, its hash and its yank (yanked files and
    sdists too: :mod:`envforge.lock.yanks` reads them); ``cached`` is the time (RFC 3339) of the
    listing read before, when the index could not be reached and that one was used."""

    distribution: str
    index_url: str
    wheels: dict[str, tuple[str, ...]]
    files: Mapping[str, IndexFile] = field(default_factory=dict)
    cached: str | None = None

    @property
    def versions(self) -> tuple[str, ...]:
        """Versions with a wheel, oldest first (PEP 440 order)."""
        return tuple(sorted(self.wheels, key=Version))


class _Links(html.parser.HTMLParser):
    """The ``<a>`` elements of a PEP 503 page: ``(text, href, data-yanked or None)``."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, str, str | None]] = []
        self._attrs: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._attrs = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._attrs is not None and data.strip():
            yanked = (self._attrs.get("data-yanked") or "") if "data-yanked" in self._attrs else None
            self.files.append((data.strip(), self._attrs.get("href") or "", yanked))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._attrs = None


def _cause(exc: httpx2.HTTPError, url: str) -> str:
    """What went wrong reaching ``url``, in words: DNS, refused, timeout, else httpx's message."""
    host = urlsplit(url).netloc.rpartition("@")[2]
    text = str(exc)
    if isinstance(exc, httpx2.TimeoutException):
        return f"no answer from {host} within {TIMEOUT_S:g} s (timeout)"
    if isinstance(exc, httpx2.ConnectError):
        if any(
            s in text
            for s in (
                "Name or service not known",
                "nodename nor servname",
                "getaddrinfo",
                "Temporary failure in name resolution",
                "[Errno -2]",
                "[Errno -3]",
            )
        ):
            return f"the name {host.rsplit(':', 1)[0]} does not resolve (DNS)"
        if "refused" in text.lower():
            return f"{host} refused the connection (nothing listens there)"
    return f"{type(exc).__name__}: {text}"


def _unreachable(url: str, cause: str) -> IndexUnreachable:
    return IndexUnreachable(
        f"cannot read the package index at {url}: {cause}", hint="check the network, or pass --index-url"
    )


_client_lock = threading.Lock()
_clients: list[httpx2.Client] = []


def _client() -> httpx2.Client:
    """One client for the process's page reads (thread-safe): its TLS context and keep-alive
    connections are shared, where a client per page loaded the CA bundle and shook hands again
    (165 PyPI pages read 8 at a time on a loaded 2-core machine: 16 s)."""
    with _client_lock:
        if not _clients:
            _clients.append(
                httpx2.Client(
                    follow_redirects=True, headers={"Accept": _ACCEPT}, limits=httpx2.Limits(max_connections=16)
                )
            )
        return _clients[0]


def _http_get(url: str) -> tuple[str, str]:
    """``(content type, text)`` of ``url``.

    A ``file:`` URL is a local PEP 503 directory (:mod:`envforge.patching.fileindex`): a missing
    page is HTTP 404's answer, a page that cannot be read IndexUnreachable's.

    :raises InputError: HTTP 404 (no such project). :raises IndexUnreachable: anything else.
    """
    if is_file_url(url):
        try:
            text = local_page(url, LARGE_LIMIT)
        except OSError as exc:
            raise _unreachable(url, str(exc)) from None
        if text is None:
            raise InputError(
                f"{url}: the index has no such project (no index.html there)",
                hint="check the distribution name in --against",
            )
        return "text/html", text
    try:
        response = _client().get(url, timeout=TIMEOUT_S)
    except httpx2.HTTPError as exc:
        raise _unreachable(url, _cause(exc, url)) from None
    if response.status_code == 404:
        raise InputError(
            f"{url}: the index has no such project (HTTP 404)", hint="check the distribution name in --against"
        )
    if response.status_code != 200:
        raise _unreachable(url, f"HTTP {response.status_code}")
    return str(response.headers.get("content-type", "")), str(response.text)


def _page_files(url: str, ctype: str, text: str) -> list[tuple[str, IndexFile]]:
    """``(file name, IndexFile)`` of a simple page at ``url`` (PEP 691 JSON or PEP 503 HTML)."""
    out: list[tuple[str, IndexFile]] = []
    if "json" in ctype:
        try:
            files = json.loads(text).get("files", [])
        except (ValueError, RecursionError, AttributeError):  # not JSON, a number too long, not an object
            raise _unreachable(url, "the index page is not PEP 691 JSON") from None
        for f in files:
            yanked = f.get("yanked")
            reason = None if not yanked else (yanked if isinstance(yanked, str) else "")
            out.append(
                (
                    str(f["filename"]),
                    IndexFile(urljoin(url, str(f.get("url", ""))), (f.get("hashes") or {}).get("sha256"), reason),
                )
            )
        return out
    parser = _Links()
    parser.feed(text)
    for filename, href, yanked in parser.files:
        target, fragment = urldefrag(urljoin(url, href))
        sha = fragment[len("sha256=") :] if fragment.startswith("sha256=") else None
        out.append((filename, IndexFile(target, sha, yanked)))
    return out


def _listing_cache(cache: Path, index_url: str, name: str) -> Path:
    key = hashlib.sha256(index_url.rstrip("/").encode()).hexdigest()[:16]
    return cache / "index" / key / f"{name}.json"


def list_releases(
    distribution: str, index_url: str = DEFAULT_INDEX, cache: Path | None = None, *, cached_only: bool = False
) -> IndexListing:
    """The wheels of ``distribution`` on the simple index ``index_url`` (PEP 503 / PEP 691).

    :param cache: where the listing is kept after a successful read, and read from (``cached``
        set) when the index cannot be reached.
    :param cached_only: do not ask the index (it did not answer a read just before): the cached
        listing, else :class:`IndexUnreachable`.
    :raises InputError: the index has no such project.
    :raises IndexUnreachable: the index cannot be read and no listing of it is cached (the cause
        named: DNS, refused, timeout, HTTP status).
    """
    name = canonicalize_name(distribution)
    url = f"{index_url.rstrip('/')}/{name}/"
    kept = _listing_cache(cache, index_url, name) if cache is not None else None
    try:
        if cached_only:
            raise _unreachable(url, NOT_ASKED)
        ctype, text = _http_get(url)
    except IndexUnreachable as unreachable:
        if kept is None or not kept.is_file():
            raise
        try:
            data = json.loads(kept.read_text())
            ctype, text = str(data["content-type"]), str(data["text"])
            cached: str | None = str(data["read-at"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # a damaged copy: as if none were kept
            raise unreachable from None
    else:
        cached = None
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            read_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            kept.write_text(json.dumps({"url": url, "read-at": read_at, "content-type": ctype, "text": text}))
    wheels: dict[str, list[str]] = {}
    files: dict[str, IndexFile] = {}
    for filename, info in _page_files(url, ctype, text):
        if not filename.endswith(".whl"):
            files.setdefault(filename, info)  # an sdist: listed (a lock may pin it), never fetched
            continue
        try:
            wname, version, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if wname == name:
            files[filename] = info
            if info.yanked is None:
                wheels.setdefault(str(version), []).append(filename)
    return IndexListing(name, index_url, {v: tuple(f) for v, f in wheels.items()}, files, cached)


def select_versions(listing: IndexListing, specifier: SpecifierSet) -> tuple[str, ...]:
    """The listed versions ``specifier`` contains, oldest first. Pre-releases count only when no
    final release matches (``SpecifierSet.filter``: PEP 440's default, as pip does)."""
    chosen = set(specifier.filter(listing.versions))
    return tuple(v for v in listing.versions if v in chosen)


def _preferred(filenames: tuple[str, ...]) -> str:
    """The wheel to read: the first (sorted) that fits this interpreter, else the first; only its
    Python files are read, so one built for another CPython serves as well."""
    mine = set(sys_tags())
    ordered = sorted(filenames)
    return next((f for f in ordered if parse_wheel_filename(f)[3] & mine), ordered[0])


def fetch_release(listing: IndexListing, version: str, cache: Path) -> Path:
    """The unpacked Python files of ``listing.distribution==version`` under ``cache`` (downloaded
    and unpacked once; later calls only look the directory up, with no index needed).

    :raises IndexUnreachable: the wheel could not be downloaded (cause named), was larger than
        :data:`MAX_WHEEL_BYTES`, or its sha256 is not the one the index page gives.
    :raises InputError: the version has no wheel on the index.
    """
    name = listing.distribution
    target = cache / "unpacked" / f"{name}-{version}"
    if (target / ".complete-py").exists() or (target / ".complete").exists():
        return target
    filenames = listing.wheels.get(version)
    if not filenames:
        raise InputError(
            f"{name} {version} has no wheel on {listing.index_url}",
            hint=f"versions with wheels: {', '.join(listing.versions[-8:])}",
        )
    wheel = _download(listing, filenames, cache / "wheels")
    shutil.rmtree(target, ignore_errors=True)
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.endswith(".py") or ".dist-info/" in m]
        zf.extractall(tmp, members)
    (tmp / ".complete-py").write_text(wheel.name + "\n")
    tmp.rename(target)
    return target


@contextmanager
def _blocks(url: str, filename: str) -> Iterator[Iterator[bytes]]:
    """The bytes at ``url`` in 1 MiB blocks: a ``file:`` URL's from the disk, else a streamed GET.

    :raises IndexUnreachable: a status other than 200. :raises httpx2.HTTPError, OSError: the read.
    """
    if is_file_url(url):
        yield local_blocks(url)
        return
    with _client().stream("GET", url, timeout=TIMEOUT_S) as response:
        if response.status_code != 200:
            raise IndexUnreachable(
                f"cannot download {filename} from {url}: HTTP {response.status_code}",
                hint="check the index (--index-url)",
            )
        yield response.iter_bytes(1 << 20)


def _download(listing: IndexListing, filenames: tuple[str, ...], wheels: Path) -> Path:
    """A wheel of ``filenames`` in ``wheels``: one already there, else the preferred one downloaded."""
    for present in sorted(filenames):
        if (wheels / present).is_file():
            return wheels / present
    filename = _preferred(filenames)
    info = listing.files.get(filename) or IndexFile(
        urljoin(f"{listing.index_url.rstrip('/')}/{listing.distribution}/", filename), None
    )
    wheels.mkdir(parents=True, exist_ok=True)
    dest = wheels / filename
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    size = 0
    started = time.monotonic()
    try:
        with _blocks(info.url, filename) as blocks, part.open("wb") as fh:
            for chunk in blocks:
                size += len(chunk)
                if size > MAX_WHEEL_BYTES:
                    raise IndexUnreachable(
                        f"{filename} from {info.url} is larger than {MAX_WHEEL_BYTES} bytes; not downloaded"
                    )
                if time.monotonic() - started > _MAX_WHEEL_S:
                    raise IndexUnreachable(
                        f"downloading {filename} from {info.url} took more than {_MAX_WHEEL_S:g} s; stopped",
                        hint="check the network",
                    )
                digest.update(chunk)
                fh.write(chunk)
    except httpx2.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise IndexUnreachable(
            f"cannot download {filename}: {_cause(exc, info.url)}", hint="check the network, or pass --index-url"
        ) from None
    except OSError as exc:  # reading a file: index's wheel, or writing the .part here
        part.unlink(missing_ok=True)
        raise IndexUnreachable(f"cannot download {filename}: {exc}", hint="check the index (--index-url)") from None
    except IndexUnreachable:
        part.unlink(missing_ok=True)
        raise
    if info.sha256 is not None and digest.hexdigest() != info.sha256.lower():
        part.unlink(missing_ok=True)
        raise IndexUnreachable(
            f"{filename} from {info.url}: sha256 {digest.hexdigest()} is not the "
            f"{info.sha256} its index page gives (hash mismatch); not used",
            hint="the index or a proxy between serves another file; check it",
        )
    part.replace(dest)
    return dest
