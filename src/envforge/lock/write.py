"""``envforge lock``: resolve, guard and write a PEP 751 ``pylock.toml`` deterministically (same inputs, same bytes).

:func:`lock_variant` resolves a variant with uv (:mod:`envforge.lock.resolve`), runs the guards
(:mod:`envforge.lock.guards`) and writes what uv does not know beside uv's packages: each package's
``index`` (PEP 751 ``packages.index``), attributed from its file URLs, and ``[tool.envforge]``
(:func:`expected_tool_table`): recipe, variant, recipe digest, CUDA, target, the inputs by recipe
key (so ``--check`` can say which key changed), indexes with the packages they serve, overrides
with their reasons, patchset ids and digests, the retired patchsets with their reasons, env profile. File name: ``pylock.<recipe>-<variant>.toml``
(PEP 751 forbids dots in the middle part; :mod:`envforge.recipe.schema` validates names).

Layout follows uv's own output (one ``[[packages]]`` table per distribution, files as inline tables,
one per line) so diffs stay small, with keys in a fixed order. ``tomlkit`` renders TOML values.
Sources: PEP 751 (https://peps.python.org/pep-0751/) for the keys; ``packages.index`` is the PEP 503
base URL the files were found at. ``[tool.envforge] packages-digest`` records what was written
(:func:`envforge.lock.digest.packages_digest`), so a hand-added, edited or truncated package table is
detected at ``lock --check``, build and verify.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from packaging.utils import canonicalize_name

from envforge import __version__
from envforge.lock.digest import packages_digest
from envforge.core.errors import EXIT_TOOL_FAILED, EnvforgeError, InputError
from envforge.core.fs import atomic_write
from envforge.lock.guards import guard_resolution
from envforge.lock.model import LOCK_SCHEMA, PatchsetRef
from envforge.lock.patchsets import require_applicable, retired_rows
from envforge.lock.resolve import Progress, resolve_variant
from envforge.lock.routing import DEFAULT_INDEX, attribute_packages, effective_indexes
from envforge.lock.wheelhouse import local_files, refusal, restore_urls
from envforge.patching import load_patchsets
from envforge.recipe.envvars import release_problems
from envforge.recipe.model import ResolvedVariant

__all__ = ["LockResult", "expected_tool_table", "lock_variant", "patchset_refs", "render", "restamp"]

_PKG_KEYS = (
    "name",
    "version",
    "marker",
    "requires-python",
    "index",
    "dependencies",
    "vcs",
    "directory",
    "archive",
    "sdist",
    "wheels",
)
_FILE_KEYS = ("name", "url", "path", "upload-time", "size", "hashes")


@dataclass(frozen=True, slots=True)
class LockResult:
    """What ``lock`` wrote: ``path``, package count, whether the bytes changed, and ``warnings``
    (locked versions yanked upstream, with uv's reason)."""

    path: Path
    packages: int
    changed: bool
    warnings: tuple[str, ...] = ()


def expected_tool_table(variant: ResolvedVariant, patchsets: Sequence[PatchsetRef]) -> dict[str, Any]:
    """The ``[tool.envforge]`` table for ``variant`` (without per-index package lists), key order fixed."""
    table: dict[str, Any] = {
        "schema": LOCK_SCHEMA,
        "recipe": variant.recipe,
        "variant": variant.variant,
        "recipe-digest": variant.digest(),
    }
    if variant.cuda:
        table["cuda"] = variant.cuda
    table["target"] = variant.target.as_dict()
    table["inputs"] = variant.inputs()
    table["overrides"] = [{"name": o.name, "version": o.specifier, "reason": o.reason} for o in variant.overrides]
    if variant.cuda_exceptions:
        table["cuda-exceptions"] = [{"name": k, "reason": v} for k, v in variant.cuda_exceptions.items()]
    if variant.source_builds:
        table["build-from-source"] = [{"name": k, "reason": v} for k, v in variant.source_builds.items()]
    if variant.build_constraints:
        table["build-constraints"] = list(variant.build_constraints)
    table["patchsets"] = [{"id": p.id, "digest": p.digest} for p in patchsets]
    if variant.retired_patchsets:
        table["retired-patchsets"] = retired_rows(variant)
    if variant.provided:  # what the base interpreter must provide; verify's `provided` check reads it
        table["provided"] = [p.as_dict() for p in variant.provided]
    if variant.env_profile:
        table["env-profile"] = variant.env_profile
    table["env"] = dict(variant.env)
    return table


def lock_variant(
    variant: ResolvedVariant,
    patchsets: Sequence[PatchsetRef],
    out: Path,
    *,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    upgrade: Sequence[str] = (),
    progress: Progress | None = None,
    local_paths: bool = False,
) -> LockResult:
    """Resolve ``variant`` with uv and write the lock to ``out`` (atomically, only if changed).

    A file uv found in a ``find_links`` wheelhouse is recorded as the project's locks record it
    (same name and sha256: index URL and hashes, :func:`envforge.lock.wheelhouse.restore_urls`);
    one no lock records is refused, unless ``local_paths`` (a lock for this machine only).

    :raises LockError: unsatisfiable (with uv's conflict chain and an override hint).
    :raises CheckFailed: a package from an index not allowed for it, or for another CUDA major.
    :raises PatchsetsNotApplied: a patchset of ``patchsets`` applies to no locked version of its
        distribution (B41; nothing written).
    :raises UvError: uv failed otherwise, e.g. an unreachable index (named, with the offline hint).
    :raises LocalPathsRefused: wheelhouse files no lock of the project records by URL (exit 2).
    """
    warnings: list[str] = []
    raw = resolve_variant(variant, out, find_links, offline, upgrade, progress, warnings)
    if find_links:
        raw = {**raw, "packages": restore_urls(raw.get("packages", []), out.parent, find_links)}
    packages = raw.get("packages", [])
    guard_resolution(packages, variant, find_links, offline)
    _guard_nccl_names(packages, variant, out)
    left = local_files(packages, [i.url for i in effective_indexes(variant)])
    if left and not local_paths:
        raise refusal(
            f"{out.name} (recipe {variant.recipe}, variant {variant.variant})",
            left,
            f"envforge lock {variant.recipe} --variant {variant.variant}",
        )
    require_applicable(
        f"{out.name} (recipe {variant.recipe}, variant {variant.variant})",
        variant,
        patchsets,
        ((p["name"], p.get("version")) for p in packages),
    )
    text = render(raw, variant, expected_tool_table(variant, patchsets), find_links, __version__)
    changed = not out.is_file() or out.read_text() != text
    if changed:
        out.parent.mkdir(parents=True, exist_ok=True)
        try:  # a temp file beside it, removed on any failure (a full disk left an empty one, N56)
            atomic_write(out, text.encode("utf-8"))
        except OSError as exc:
            raise _write_error(out, exc) from None
    return LockResult(out, len(packages), changed, tuple(warnings))


_NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13")


def _guard_nccl_names(packages: Sequence[Mapping[str, Any]], variant: ResolvedVariant, out: Path) -> None:
    """Refuse an env profile that sets NCCL variables the NCCL this lock installs does not read
    (:func:`envforge.recipe.envvars.release_problems`; the recipe's ``[nccl-unknown]`` is reviewed).

    :raises InputError: one line per variable, with the recipe key (exit 2; nothing written).
    """
    nccl = next((p for p in packages if canonicalize_name(str(p.get("name"))) in _NCCL_DISTRIBUTIONS), None)
    if nccl is None or not variant.env:
        return
    found = release_problems(variant.env, str(nccl.get("version")), variant.nccl_unknown)
    if found:
        where = f"env.{variant.env_profile}" if variant.env_profile else "env"
        raise InputError(
            f"{out.name} (recipe {variant.recipe}, variant {variant.variant}) installs {nccl['name']} "
            f"{nccl.get('version')}, which does not read what the env profile sets:\n"
            + "\n".join(f"  {where}.{line}" for line in found),
            hint="remove the variable, or lock a variant whose NCCL reads it; reviewed, list it in the "
            'recipe\'s [nccl-unknown] with the reason (NCCL_X = "read by NCCL 2.31, release notes")',
        )


def _write_error(out: Path, exc: OSError) -> EnvforgeError:
    """An OS error writing the lock ``out`` as exit 3, naming the file (the old lock is intact)."""
    err = EnvforgeError(f"cannot write {out}: {exc.strerror or exc}; the previous lock is unchanged")
    err.exit_code = EXIT_TOOL_FAILED
    return err


def patchset_refs(directory: Path, ids: Sequence[str]) -> tuple[PatchsetRef, ...]:
    """``PatchsetRef`` (id, sha256 digest of the file) for each patchset the recipe names.

    The patchsets are loaded and validated (:func:`envforge.patching.load_patchsets`), so a lock
    never records a patchset that cannot be applied.

    :raises PatchsetError: a patchset file is missing or invalid (file, line, key, did-you-mean).
    """
    if not ids:
        return ()
    by_id = {p.id: p for p in load_patchsets(directory, ids)}
    return tuple(PatchsetRef(pid, by_id[pid].digest, by_id[pid].distribution, by_id[pid].versions) for pid in ids)


def _inline(entry: Mapping[str, Any]) -> Any:
    t = tomlkit.inline_table()
    for k in _FILE_KEYS:
        if k in entry:
            t[k] = entry[k]
    for k in sorted(set(entry) - set(_FILE_KEYS)):
        t[k] = entry[k]
    return t


def _files_array(files: Sequence[Mapping[str, Any]]) -> Any:
    arr = tomlkit.array()
    for f in files:
        arr.append(_inline(f))
    arr.multiline(len(files) > 1)
    return arr


def _package(raw: Mapping[str, Any], index_url: str | None) -> Any:
    t = tomlkit.table()
    data = dict(raw)
    if index_url is not None:
        data["index"] = index_url
    for k in _PKG_KEYS:
        if k not in data:
            continue
        v = data[k]
        if k == "wheels":
            t[k] = _files_array(v)
        elif k == "sdist":
            t[k] = _inline(v)
        else:
            t[k] = v
    return t


def _array_of_tables(rows: Sequence[Mapping[str, Any]]) -> Any:
    arr = tomlkit.array()
    for row in rows:
        it = tomlkit.inline_table()
        it.update(row)
        arr.append(it)
    arr.multiline(True)
    return arr


def _tool_table(tool: Mapping[str, Any], indexes: Sequence[Mapping[str, Any]], digest: str) -> Any:
    t = tomlkit.table()
    for k, v in tool.items():
        if k in ("target", "inputs", "env"):
            sub = tomlkit.table()
            for sk, sv in v.items():
                sub[sk] = _array_of_strings(sv) if isinstance(sv, list) else sv
            t[k] = sub
        elif k in ("overrides", "patchsets", "retired-patchsets", "provided"):
            t[k] = _array_of_tables(v)
        else:
            t[k] = v
        if k == "recipe-digest":
            t["packages-digest"] = digest
            t["indexes"] = _array_of_tables(indexes)
    return t


def _array_of_strings(items: Sequence[str]) -> Any:
    arr = tomlkit.array()
    arr.extend(items)
    arr.multiline(len(items) > 1)
    return arr


def render(
    raw: Mapping[str, Any], variant: ResolvedVariant, tool: Mapping[str, Any], find_links: Sequence[Path], version: str
) -> str:
    """The lock text for uv's resolution ``raw`` (parsed pylock) plus envforge's ``tool`` table.

    Index attribution is recorded per package (``index``) and per index in
    ``[tool.envforge].indexes`` (name, url, packages).
    """
    by_pkg = attribute_packages(raw.get("packages", []), variant, find_links)
    urls = {i.name: i.url for i in (DEFAULT_INDEX, *variant.indexes)}  # the recipe's pypi wins
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            f"envforge lock of recipe {variant.recipe}, variant {variant.variant}. "
            "Regenerate with `envforge lock`; do not edit."
        )
    )
    doc["lock-version"] = "1.0"
    doc["environments"] = [_environment_marker(variant.target.platform)]
    doc["requires-python"] = f"=={variant.python}.*" if variant.python.count(".") == 1 else f"=={variant.python}"
    doc["created-by"] = "envforge"
    packages = tomlkit.aot()
    for p in sorted(raw.get("packages", []), key=lambda p: p["name"]):
        packages.append(_package(p, urls.get(by_pkg[p["name"]])))
    doc["packages"] = packages
    served: dict[str, list[str]] = {}
    for name, idx in sorted(by_pkg.items()):
        served.setdefault(idx, []).append(name)
    indexes = [
        {"name": n, "url": urls.get(n, n), **({"packages": served[n]} if n != DEFAULT_INDEX.name else {})}
        for n in sorted(served)
    ]
    digest = packages_digest(tomllib.loads(tomlkit.dumps(doc))["packages"])
    tool_doc = tomlkit.table(is_super_table=True)
    tool_doc["envforge"] = _tool_table(tool, indexes, digest)
    doc["tool"] = tool_doc
    return tomlkit.dumps(doc)


def restamp(text: str) -> str:
    """``text`` (a lock ``envforge lock`` wrote) with its ``[tool.envforge]`` table rewritten by the
    same code as :func:`render`, so it records the ``packages-digest`` of the packages it holds.

    For locks written before the digest existed: the ``[[packages]]`` bytes are kept as they are.
    Only for locks envforge wrote and a maintainer has reviewed; a hand-edited lock must be
    re-locked instead.

    :raises KeyError: the text has no ``[tool.envforge]`` table.
    """
    doc = tomlkit.parse(text)
    plain = tomllib.loads(text)
    tool = {k: v for k, v in plain["tool"]["envforge"].items() if k not in ("indexes", "packages-digest")}
    doc["tool"]["envforge"] = _tool_table(
        tool, plain["tool"]["envforge"].get("indexes", []), packages_digest(plain["packages"])
    )
    return tomlkit.dumps(doc)


def _environment_marker(platform: str) -> str:
    """A PEP 508 marker for a uv ``--python-platform`` target like ``x86_64-manylinux_2_28``."""
    machine = platform.split("-", 1)[0]
    if "linux" in platform:
        return f"sys_platform == 'linux' and platform_machine == '{machine}'"
    if "macos" in platform or "apple" in platform:
        return f"sys_platform == 'darwin' and platform_machine == '{machine}'"
    if "windows" in platform:
        return "sys_platform == 'win32'"
    return f"platform_machine == '{machine}'"
