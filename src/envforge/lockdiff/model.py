"""A normalized lock model read from PEP 751 ``pylock.toml`` and from uv's ``uv.lock``.

Both formats become one :class:`Lock`: packages keyed by normalized name, each with its version, its
source (the index URL, or the VCS / directory / archive it comes from) and its files with hashes,
sizes and upload times; plus the ``[tool.envforge]`` table of envforge locks as a plain mapping.

Sources of the formats: PEP 751 (https://peps.python.org/pep-0751/, keys ``lock-version``,
``created-by``, ``[[packages]]`` with ``index``, ``sdist``, ``wheels``, ``vcs``, ``directory``,
``archive``); uv's lockfile (https://docs.astral.sh/uv/concepts/projects/layout/#the-lockfile, keys
``version``, ``revision``, ``[[package]]`` with ``source``, ``sdist``, ``wheels`` and ``hash``).

Every text is validated by :mod:`envforge.lock.read` (``packaging.pylock`` for pylock files, uv's
documented shape for uv.lock; same-name entries that can be active together are a finding); a
pylock is then read from packaging's validated model (its file names, names, versions and markers),
and its same-name entries that can be active together are kept as :attr:`Lock.ambiguities`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from envforge.core.errors import InputError
from envforge.lock.read import read_lock_text

__all__ = ["PYPI", "Artifact", "Lock", "LockedPackage", "entry_key", "index_pins", "normalize_name", "parse_lock"]

PYPI = "https://pypi.org/simple"
_PYPI_FILE_HOSTS = ("https://files.pythonhosted.org/",)
_NAME_SEP = re.compile(r"-+")


def normalize_name(name: str) -> str:
    """PEP 503 normalized project name (``Sgl_Kernel`` -> ``sgl-kernel``)."""
    out = name.lower().replace("_", "-").replace(".", "-")
    return _NAME_SEP.sub("-", out) if "--" in out else out


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file of a package: a wheel, an sdist or a direct archive.

    ``hashes`` is sorted ``(algorithm, hex digest)`` pairs; ``size`` is in bytes;
    ``upload_time`` as TOML gave it: a ``datetime`` (pylock) or ISO 8601 text (uv.lock), ``None``
    when absent. Only compared for equality.
    """

    filename: str
    url: str | None
    hashes: tuple[tuple[str, str], ...]
    size: int | None
    upload_time: datetime | str | None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """One locked package.

    ``name`` is normalized; ``version`` as written (``None`` for some direct sources);
    ``marker`` is the PEP 751 ``marker``, or for uv.lock the entry's ``resolution-markers`` joined
    with `` or `` (``None`` when the entry applies everywhere); ``source`` is an index URL
    (``https://pypi.org/simple`` for files on PyPI's file host) or ``"git <url>@<commit>"``,
    ``"directory <path>"``, ``"archive <url>"``, ``"virtual <path>"``; ``dependencies`` are the
    entry's dependency edges as sorted text (uv.lock ``dependencies``, ``optional-dependencies``
    as ``[extra] name``, ``dev-dependencies`` as ``(group) name``; PEP 751
    ``packages.dependencies``): ``name``, then `` ==version`` and `` @ source`` where the lock
    names them (they pick one of several same-name entries), then `` ; marker``; ``attrs`` are
    the entry's other fields as sorted ``(key, text)`` pairs, an array one pair per item (uv.lock
    ``metadata.requires-dist``, ``metadata.requires-dev.GROUP``, ``metadata.provides-extras``;
    PEP 751 ``requires-python``, ``attestation-identities``, ``tool.*``, ``vcs.requested-revision``,
    ``directory.editable``, ``*.subdirectory``; any key neither format documents). uv.lock
    ``resolution-markers`` are sorted before they are joined: their order means nothing.
    ``index_named`` is False for a pylock entry with files and no ``index`` key (``pip lock``
    writes none): its ``source`` is then only where its files are (PyPI, or their URL folder).
    """

    name: str
    version: str | None
    marker: str | None
    source: str
    artifacts: tuple[Artifact, ...]
    dependencies: tuple[str, ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()
    index_named: bool = True


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock file read into the common model.

    ``label`` names it in messages (a path or ``REV:PATH``); ``kind`` is ``"pylock"`` or ``"uv.lock"``;
    ``header`` holds the top-level scalars (``lock-version``, ``created-by``, ``requires-python``,
    ``revision``, uv's ``options.*``...) as text; ``comments`` the leading ``#`` lines (generator
    comments); ``packages`` maps a unique key to each entry, in key order: the name when the
    name has one entry, else ``"name version ; marker"`` (plus `` @ source`` and then ``#n``
    where that is still not unique), so no entry is ever dropped; ``envforge`` is the
    ``[tool.envforge]`` table or ``{}``; ``lists`` holds the top-level arrays, one text per item
    (pylock ``environments``, ``extras``, ``dependency-groups``, ``default-groups``; uv.lock
    ``resolution-markers``, ``supported-markers``, ``required-markers``, ``conflicts`` as
    ``"pkg[extra] / pkg[extra]"``, and ``manifest.*`` arrays); ``ambiguities`` one text per name whose
    entries can be active together (a pylock packaging reads, which no installer can select from
    where both are active: ``packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no
    marker) can be active together``).
    """

    label: str
    kind: str
    header: Mapping[str, str]
    comments: tuple[str, ...]
    packages: Mapping[str, LockedPackage]
    envforge: Mapping[str, Any]
    lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ambiguities: tuple[str, ...] = ()


def parse_lock(text: str, *, label: str) -> Lock:
    """Read a pylock.toml or uv.lock text into a :class:`Lock`.

    Validation is :func:`envforge.lock.read.read_lock_text` (``packaging.pylock`` for pylock files,
    uv's documented shape for uv.lock); a pylock is then read from packaging's validated model, so
    file names, names and versions are exactly what packaging reads; the same-name entries of
    either format that can be active together are :attr:`Lock.ambiguities` (a finding, never a
    refusal: the tool that wrote the lock reads it).

    :param label: how messages name the file (a path, or ``REV:PATH``).
    :raises InputError: merge-conflict markers (names the line), invalid TOML, TOML that is not a
        lock (says what it looks like), or an invalid lock (names the key path and the reason).
    """
    doc = read_lock_text(text, label=label)
    if doc.kind == "pylock":
        lock = _read_pylock(doc.entries, doc.data, label, doc.comments, doc.envforge)
    else:
        lock = _read_uv_lock(doc.data, label, doc.comments)
    return replace(lock, ambiguities=tuple(a.describe() for a in doc.ambiguities))


class _Malformed(Exception):
    """Internal: the fast walk met something it cannot read (a key path and what is wrong)."""


def _read_pylock(
    entries: Sequence[Any], doc: Mapping[str, Any], label: str, comments: tuple[str, ...], envforge: Mapping[str, Any]
) -> Lock:
    raw = doc.get("packages")
    tables = raw if isinstance(raw, list) and len(raw) == len(entries) else [{}] * len(entries)
    packages = [_pylock_package(e, t) for e, t in zip(entries, tables)]
    header = {k: _scalar(doc[k]) for k in ("lock-version", "created-by", "requires-python") if k in doc}
    lists = {k: tuple(str(v) for v in doc[k]) for k in _PYLOCK_LISTS if isinstance(doc.get(k), list)}
    tool = doc.get("tool")
    if isinstance(tool, Mapping):
        lists.update(_other_lists({k: v for k, v in tool.items() if k != "envforge"}, "tool."))
    lists.update(_other_lists({k: v for k, v in doc.items() if k not in PYLOCK_KEYS}, ""))
    return Lock(label, "pylock", header, comments, _keyed(packages), envforge, lists)


_PYLOCK_LISTS = ("environments", "extras", "dependency-groups", "default-groups")
_UV_LISTS = ("resolution-markers", "supported-markers", "required-markers")
#: Top-level keys read into the model by their own rule; any other key is compared item by item.
PYLOCK_KEYS = frozenset({"lock-version", "created-by", "requires-python", *_PYLOCK_LISTS, "packages", "tool"})
UV_KEYS = frozenset(
    {"version", "revision", "requires-python", *_UV_LISTS, "conflicts", "manifest", "options", "package"}
)
#: Package keys read into the model by their own rule; any other key is one of its ``attrs``.
_PYLOCK_PACKAGE_KEYS = frozenset({"name", "version", "marker", "dependencies", "index", "sdist", "wheels"})
_UV_PACKAGE_KEYS = frozenset(
    {
        "name",
        "version",
        "source",
        "resolution-markers",
        "dependencies",
        "optional-dependencies",
        "dev-dependencies",
        "sdist",
        "wheels",
    }
)
_PYLOCK_SOURCE_KEYS = _PYLOCK_PACKAGE_KEYS | {"vcs", "directory", "archive"}
#: Keys of a PEP 751 direct source that name where it is (the rest, e.g. ``subdirectory``, are attrs).
_WHERE_KEYS = frozenset({"type", "url", "path", "commit-id", "hashes", "size", "upload-time"})


def _value_items(value: Any, key: str) -> Iterator[tuple[str, str]]:
    """``(key, text)`` pairs of any TOML value: a table by its dotted keys, an array one pair per
    item (tables with a ``name`` in it as dependency text, others as ``{key=value, ...}``: pdm's
    ``tool.pdm.targets``), a scalar as its text."""
    if isinstance(value, Mapping):
        for sub, item in value.items():
            yield from _value_items(item, f"{key}.{sub}" if key else str(sub))
    elif isinstance(value, list):
        for item in value:
            yield key, _dep_text(item) if isinstance(item, Mapping) and "name" in item else _item_text(item)
    else:
        yield key, _item_text(value)


def _item_text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_item_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={_item_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _other_lists(table: Mapping[str, Any], prefix: str) -> dict[str, tuple[str, ...]]:
    """Keys no rule reads, as top-level arrays: one sorted text per item or scalar."""
    out: dict[str, list[str]] = {}
    for key, value in table.items():
        for sub, text in _value_items(value, f"{prefix}{key}"):
            out.setdefault(sub, []).append(text)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _attrs(table: Mapping[str, Any], known: frozenset[str]) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(pair for key, value in table.items() if key not in known for pair in _value_items(value, str(key)))
    )


def _scalar(value: Any) -> str:
    """Header values as text: arrays joined with ``" | "`` (markers contain commas)."""
    if isinstance(value, list):
        return " | ".join(str(v) for v in value)
    return str(value)


def _seq(d: Mapping[str, Any], key: str, path: str = "") -> Sequence[Any]:
    value = d.get(key, [])
    if not isinstance(value, list):
        raise _Malformed(f"`{path}{key}` should be an array")
    return value


def _text(d: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    value = d.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _Malformed(f"`{path}.{key}` should be a string")
    return value


def _pylock_package(e: Any, table: Mapping[str, Any]) -> LockedPackage:
    """One package of a validated pylock (:class:`envforge.lock.read.LockEntry`: packaging's
    reading; ``table``: its raw table, for the fields packaging's reading leaves out)."""
    files = [_pylock_file(f) for f in (*e.wheels, *(x for x in (e.sdist, e.archive) if x is not None))]
    edges = tuple(sorted(_dep_text(d) for d in e.dependencies)) if e.dependencies else ()
    attrs = _attrs(table, _PYLOCK_SOURCE_KEYS) if table.keys() - _PYLOCK_SOURCE_KEYS else ()
    for key in ("vcs", "directory", "archive"):
        where = table.get(key)
        if isinstance(where, Mapping):
            attrs += tuple((f"{key}.{k}", v) for k, v in _attrs(where, _WHERE_KEYS))
    named = e.index is not None or e.vcs is not None or e.directory is not None or e.archive is not None
    return LockedPackage(
        e.name, e.version, e.marker, _pylock_source(e, files), tuple(files), edges, tuple(sorted(attrs)), named
    )


def _hash_pairs(hashes: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(hashes.items()) if len(hashes) == 1 else tuple(sorted(hashes.items()))


def _pylock_file(f: Any) -> Artifact:
    # Hot path (about 1,000 files a lock): the reader's file, named as packaging names it.
    return Artifact(f.filename, f.where, _hash_pairs(f.hashes), f.size, f.upload_time)


def _pylock_source(e: Any, files: Sequence[Artifact]) -> str:
    if e.index is not None:
        return str(e.index).rstrip("/")
    if e.vcs is not None:
        return f"{e.vcs.get('type', 'vcs')} {e.vcs.get('url') or e.vcs.get('path')}@{e.vcs.get('commit-id')}"
    if e.directory is not None:
        return f"directory {e.directory.get('path')}"
    if e.archive is not None and files:
        return f"archive {files[-1].url}"
    return _host_of(files)


def _host_of(files: Sequence[Artifact]) -> str:
    """Where the files come from when the lock does not name an index: PyPI or the file's folder."""
    urls = [f.url for f in files if f.url]
    if not urls:
        return "unknown"
    if all(u.startswith(_PYPI_FILE_HOSTS) for u in urls):
        return PYPI
    return urls[0].rsplit("/", 1)[0]


def _read_uv_lock(doc: Mapping[str, Any], label: str, comments: tuple[str, ...]) -> Lock:
    try:
        packages = [_uv_package(p, f"package[{i}]") for i, p in enumerate(_seq(doc, "package"))]
    except _Malformed as exc:
        raise InputError(f"{label} is not a valid uv.lock: {exc}", hint="regenerate it with `uv lock`") from None
    header = {k: _scalar(doc[k]) for k in ("version", "revision", "requires-python") if k in doc}
    options = doc.get("options", {})
    if isinstance(options, Mapping):
        header.update((f"options.{k}", _scalar(v)) for k, v in options.items() if not isinstance(v, Mapping))
        for k, v in options.items():
            if isinstance(v, Mapping):
                header.update((f"options.{k}.{sub}", _scalar(x)) for sub, x in v.items())
    lists = {k: tuple(str(v) for v in doc[k]) for k in _UV_LISTS if isinstance(doc.get(k), list)}
    if isinstance(doc.get("conflicts"), list):
        lists["conflicts"] = tuple(_conflict_text(c) for c in doc["conflicts"])
    manifest = doc.get("manifest")
    if isinstance(manifest, Mapping):
        lists.update(_manifest_lists(manifest, "manifest."))
    lists.update(_other_lists({k: v for k, v in doc.items() if k not in UV_KEYS}, ""))
    return Lock(label, "uv.lock", header, comments, _keyed(packages), {}, lists)


def _conflict_text(conflict: Any) -> str:
    """A uv conflict set as ``"project[cpu] / project[cu124]"`` (groups as ``project:group``)."""
    if not isinstance(conflict, list):
        return str(conflict)
    items = []
    for item in conflict:
        if not isinstance(item, Mapping):
            items.append(str(item))
            continue
        who = str(item.get("package", ""))
        if "extra" in item:
            items.append(f"{who}[{item['extra']}]")
        elif "group" in item:
            items.append(f"{who}:{item['group']}")
        else:
            items.append(who)
    return " / ".join(items)


def _manifest_lists(table: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """uv.lock ``[manifest]`` arrays, one text per item (requirements as dependency text)."""
    for key, value in table.items():
        if isinstance(value, list):
            yield f"{prefix}{key}", tuple(sorted(_dep_text(v) if isinstance(v, Mapping) else str(v) for v in value))
        elif isinstance(value, Mapping):
            yield from _manifest_lists(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", (_item_text(value),)


def _dep_text(dep: Any) -> str:
    """A dependency edge as text: ``name[extras] ==version @ source specifier {key=value...} ;
    marker`` (parts as given; keys no rule names, e.g. a manifest override's ``index``, in braces)."""
    if not isinstance(dep, Mapping):
        return str(dep)
    text = str(dep.get("name", "?"))
    extra = dep.get("extra") or dep.get("extras")
    if isinstance(extra, list) and extra:
        text += "[" + ",".join(str(e) for e in extra) + "]"
    if dep.get("version"):
        text += f" =={dep['version']}"
    source = dep.get("source")
    if isinstance(source, Mapping) and source:
        kind, value = next(iter(source.items()))
        text += f" @ {str(value).rstrip('/')}" if kind == "registry" else f" @ {kind} {value}"
    if dep.get("specifier"):
        text += f" {dep['specifier']}"
    rest = [k for k in dep if k not in _DEP_KEYS]
    if rest:
        text += " {" + ", ".join(f"{k}={_item_text(dep[k])}" for k in sorted(rest)) + "}"
    if dep.get("marker"):
        text += f" ; {dep['marker']}"
    return text


_DEP_KEYS = frozenset({"name", "extra", "extras", "version", "source", "specifier", "marker"})


def _uv_package(p: Any, path: str) -> LockedPackage:
    if not isinstance(p, Mapping):
        raise _Malformed(f"`{path}` should be a table")
    name = _text(p, "name", path, required=True)
    assert name is not None
    files = [_uv_file(w, f"{path}.wheels[{i}]") for i, w in enumerate(_seq(p, "wheels", path))]
    if isinstance(p.get("sdist"), Mapping):
        files.append(_uv_file(p["sdist"], f"{path}.sdist"))
    markers = p.get("resolution-markers")
    marker = " or ".join(sorted(str(m) for m in markers)) if isinstance(markers, list) and markers else None
    attrs = _attrs(p, _UV_PACKAGE_KEYS) if p.keys() - _UV_PACKAGE_KEYS else ()
    return LockedPackage(
        normalize_name(name),
        _text(p, "version", path),
        marker,
        _uv_source(p.get("source"), path),
        tuple(files),
        _uv_edges(p),
        attrs,
    )


def _uv_edges(p: Mapping[str, Any]) -> tuple[str, ...]:
    edges = [_dep_text(d) for d in p.get("dependencies", ()) or ()]
    for table, fmt in (("optional-dependencies", "[{}] "), ("dev-dependencies", "({}) ")):
        groups = p.get(table)
        if isinstance(groups, Mapping):
            edges.extend(
                fmt.format(g) + _dep_text(d) for g, deps in groups.items() if isinstance(deps, list) for d in deps
            )
    return tuple(sorted(edges))


def _uv_file(f: Any, path: str) -> Artifact:
    if not isinstance(f, Mapping):
        raise _Malformed(f"`{path}` should be a table")
    where = _text(f, "url", path) or _text(f, "path", path) or _text(f, "filename", path) or ""
    algo, _, digest = (_text(f, "hash", path) or "").partition(":")
    hashes = ((algo, digest),) if digest else ()
    return Artifact(
        where.rsplit("/", 1)[-1].replace("%2B", "+"), where or None, hashes, f.get("size"), f.get("upload-time")
    )


def _uv_source(source: Any, path: str) -> str:
    if not isinstance(source, Mapping) or not source:
        raise _Malformed(f"`{path}.source` is missing")
    kind, value = next(iter(source.items()))
    if kind == "registry":
        return str(value).rstrip("/")
    return f"{kind} {value}"


def index_pins(lock: Lock) -> tuple[tuple[str, str, str, tuple[str, ...]], ...]:
    """``(name, version, simple index URL, file names)`` of every entry with a version from an
    index the lock names (PyPI for a pylock's files on PyPI's file host; an entry whose index is
    only the folder of its files is left out): what :func:`envforge.lock.yanks.yanked_pins` asks."""
    return tuple(
        (p.name, p.version, p.source, tuple(f.filename for f in p.artifacts))
        for p in lock.packages.values()
        if p.version and p.source.startswith(("http://", "https://")) and (p.index_named or p.source == PYPI)
    )


def unindexed_entries(lock: Lock) -> tuple[str, ...]:
    """``"name version"`` of every entry :func:`index_pins` leaves out because the lock names no
    index for it and its files are not on PyPI's file host (``pip lock`` writes no ``index``):
    no index can be asked whether it is yanked."""
    return tuple(
        f"{p.name} {p.version}"
        for p in lock.packages.values()
        if p.version and not p.index_named and p.source != PYPI and p.source.startswith(("http://", "https://"))
    )


def entry_key(p: LockedPackage, *, source: bool = False) -> str:
    """``"name version ; marker"`` (``" @ source"`` added with ``source``): how an entry of a name
    with several entries is named in keys and messages."""
    key = f"{p.name} {p.version or '(no version)'}"
    if source:
        key += f" @ {p.source}"
    return f"{key} ; {p.marker}" if p.marker else key


def _keyed(packages: Sequence[LockedPackage]) -> dict[str, LockedPackage]:
    """Key packages by name; a name with several entries gets :func:`entry_key`, then the source,
    then ``#n``, until unique. Every entry is kept (PEP 751 and uv.lock allow one name several
    times: per marker, per extra, or per index)."""
    counts: dict[str, int] = {}
    for p in packages:
        counts[p.name] = counts.get(p.name, 0) + 1
    out: dict[str, LockedPackage] = {}
    for p in packages:
        if counts[p.name] == 1:
            out[p.name] = p
            continue
        key = entry_key(p)
        if key in out:
            key = entry_key(p, source=True)
        base, n = key, 1
        while key in out:
            n += 1
            key = f"{base} #{n}"
        out[key] = p
    return dict(sorted(out.items()))
