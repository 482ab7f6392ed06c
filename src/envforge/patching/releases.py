"""Released code of a distribution without installing it: list its releases on the index, fetch a
release's wheel and unpack its Python files into a cache, so patchsets can be evaluated on it
(``envforge patches check``).

* Releases are read from the index's simple API (PEP 503 HTML or the PEP 691 JSON form, asked
  for with ``Accept``), with huggingface_hub's HTTP client (httpx); only versions with at least
  one wheel that is not yanked count (PEP 592).
* A wheel is downloaded by ``pip download --no-deps --only-binary :all:`` into
  ``<cache>/wheels``; when no wheel of the release fits this interpreter (a release built for
  other CPython versions only), pip is told the tags of one it has (``--python-version``,
  ``--implementation``, ``--abi``, ``--platform``): only the Python files are read.
* ``<cache>/unpacked/<distribution>-<version>/`` holds the wheel's ``*.py`` files and its
  ``.dist-info`` (the layout of an installed site-packages, so the engine reads it unchanged),
  marked complete by ``.complete-py`` (or ``.complete`` when the whole wheel was unpacked).

The cache lives outside any environment: ``--cache``, else ``$ENVFORGE_CACHE_DIR``, else
``$XDG_CACHE_HOME/envforge`` (``~/.cache/envforge``).
"""

from __future__ import annotations

import html.parser
import importlib
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envforge.core.errors import CheckFailed, ExternalToolError, InputError
from envforge.patching.memo import default_cache

__all__ = ["DEFAULT_INDEX", "IndexListing", "default_cache", "fetch_release", "list_releases", "select_versions"]

DEFAULT_INDEX = "https://pypi.org/simple"
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True, slots=True)
class IndexListing:
    """The wheels of one distribution on an index: ``wheels[version]`` = file names (not yanked)."""

    distribution: str
    index_url: str
    wheels: dict[str, tuple[str, ...]]

    @property
    def versions(self) -> tuple[str, ...]:
        """Versions with a wheel, oldest first (PEP 440 order)."""
        return tuple(sorted(self.wheels, key=Version))


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, bool]] = []  # (file name, yanked)
        self._attrs: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._attrs = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._attrs is not None and data.strip():
            self.files.append((data.strip(), "data-yanked" in self._attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._attrs = None


def _http_get(url: str) -> tuple[str, str]:
    """``(content type, text)`` of ``url``. :raises CheckFailed: transport error or HTTP status."""
    for module in ("httpx2", "httpx"):  # huggingface_hub's HTTP client, depending on its version
        try:
            client: Any = importlib.import_module(module)
            break
        except ImportError:
            continue
    else:  # pragma: no cover - huggingface_hub always brings one
        raise CheckFailed("no HTTP client (httpx) is installed", hint="pip install httpx")
    try:
        response = client.get(url, headers={"Accept": _ACCEPT}, follow_redirects=True, timeout=30.0)
    except client.HTTPError as exc:
        raise CheckFailed(f"cannot read the package index at {url}: {exc}",
                          hint="check the network, or pass --index-url") from None
    if response.status_code == 404:
        raise InputError(f"{url}: the index has no such project (HTTP 404)",
                         hint="check the distribution name in --against")
    if response.status_code != 200:
        raise CheckFailed(f"cannot read the package index at {url}: HTTP {response.status_code}",
                          hint="check the network, or pass --index-url")
    return str(response.headers.get("content-type", "")), str(response.text)


def list_releases(distribution: str, index_url: str = DEFAULT_INDEX) -> IndexListing:
    """The wheels of ``distribution`` on the simple index ``index_url`` (PEP 503 / PEP 691).

    :raises InputError: the index has no such project. :raises CheckFailed: the index cannot be read.
    """
    name = canonicalize_name(distribution)
    url = f"{index_url.rstrip('/')}/{name}/"
    ctype, text = _http_get(url)
    if "json" in ctype:
        data = json.loads(text)
        files = [(str(f["filename"]), bool(f.get("yanked"))) for f in data.get("files", [])]
    else:
        parser = _Links()
        parser.feed(text)
        files = parser.files
    wheels: dict[str, list[str]] = {}
    for filename, yanked in files:
        if yanked or not filename.endswith(".whl"):
            continue
        try:
            wname, version, _, _ = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if wname == name:
            wheels.setdefault(str(version), []).append(filename)
    return IndexListing(name, index_url, {v: tuple(f) for v, f in wheels.items()})


def select_versions(listing: IndexListing, specifier: SpecifierSet) -> tuple[str, ...]:
    """The listed versions ``specifier`` contains, oldest first. Pre-releases count only when no
    final release matches (``SpecifierSet.filter``: PEP 440's default, as pip does)."""
    chosen = set(specifier.filter(listing.versions))
    return tuple(v for v in listing.versions if v in chosen)


def _pip_tags(filenames: tuple[str, ...]) -> list[str]:
    """pip options that make it accept one of ``filenames`` when none fits this interpreter."""
    mine = set(sys_tags())
    parsed = [parse_wheel_filename(f)[3] for f in filenames]
    if any(tags & mine for tags in parsed):
        return []
    tag = sorted(parsed[0], key=str)[0]
    digits = tag.interpreter[2:]
    if not digits.isdigit() or len(digits) < 2:
        return []
    return ["--python-version", f"{digits[0]}.{digits[1:]}", "--implementation", tag.interpreter[:2],
            "--abi", tag.abi, "--platform", tag.platform]


def fetch_release(listing: IndexListing, version: str, cache: Path) -> Path:
    """The unpacked Python files of ``listing.distribution==version`` under ``cache`` (downloaded
    and unpacked once; later calls only look the directory up).

    :raises ExternalToolError: pip could not download the wheel.
    :raises InputError: the version has no wheel on the index.
    """
    name = listing.distribution
    target = cache / "unpacked" / f"{name}-{version}"
    if (target / ".complete-py").exists() or (target / ".complete").exists():
        return target
    filenames = listing.wheels.get(version)
    if not filenames:
        raise InputError(f"{name} {version} has no wheel on {listing.index_url}",
                         hint=f"versions with wheels: {', '.join(listing.versions[-8:])}")
    wheel = _download(listing, version, filenames, cache / "wheels")
    shutil.rmtree(target, ignore_errors=True)
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if m.endswith(".py") or ".dist-info/" in m]
        zf.extractall(tmp, members)
    (tmp / ".complete-py").write_text(wheel.name + "\n")
    tmp.rename(target)
    return target


def _download(listing: IndexListing, version: str, filenames: tuple[str, ...], wheels: Path) -> Path:
    stem = listing.distribution.replace("-", "_")

    def found() -> list[Path]:
        return [p for p in wheels.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-".lower())
                and p.name in filenames]

    if found():
        return found()[0]
    wheels.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
            "--only-binary", ":all:", "--dest", str(wheels), *_pip_tags(filenames)]
    if listing.index_url != DEFAULT_INDEX:
        argv += ["--index-url", listing.index_url]
    proc = subprocess.run([*argv, f"{listing.distribution}=={version}"], capture_output=True, text=True)
    if proc.returncode != 0 or not found():
        raise ExternalToolError(f"pip could not download {listing.distribution}=={version} (a wheel)",
                                tool="pip", argv=argv, returncode=proc.returncode,
                                stderr_tail="\n".join(proc.stderr.strip().splitlines()[-6:]),
                                hint="check the network and the index (--index-url)")
    return found()[0]
