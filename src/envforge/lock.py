"""``envforge lock``: resolve a recipe variant with uv into a PEP 751 lock, and check it.

uv resolves (``uv pip compile --format pylock.toml`` for the recipe's target platform and Python,
from any machine); envforge adds what uv does not know and writes the lock deterministically:

- each package's ``index`` (PEP 751 ``packages.index``), attributed from its file URLs;
- ``[tool.envforge]``: recipe, variant, recipe digest, CUDA, target, the inputs by recipe key (so
  ``--check`` can say which key changed), indexes with the packages they serve, overrides with
  their reasons, patchset ids and digests, env profile.

Guards run after resolution: every package came from an index allowed for it (B01), and no
package is built for another CUDA major than the variant's (B03). ``--check`` never writes and
needs no network. File name: ``pylock.<recipe>-<variant>.toml`` (PEP 751 forbids dots in the
middle part; recipe.py validates names).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from urllib.parse import unquote, urlparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge import __version__
from packaging.utils import canonicalize_name

from envforge.cuda import cuda_mismatches
from envforge.errors import CheckFailed, InputError
from envforge.recipe import ResolvedVariant
from envforge.routing import DEFAULT_INDEX, index_violations, uv_pyproject
from envforge.uv import UvError, run_uv

__all__ = [
    "LOCK_SCHEMA",
    "LockCheck",
    "LockError",
    "LockResult",
    "Lock",
    "LockedPackage",
    "LockedWheel",
    "PatchsetRef",
    "check_lock",
    "patchset_refs",
    "expected_tool_table",
    "lock_variant",
    "read_lock",
]

LOCK_SCHEMA = 1
Progress = Callable[[str], None]


class LockError(InputError):
    """A lock cannot be made or read (exit 2): unsatisfiable, unreachable index, bad file."""


@dataclass(frozen=True, slots=True)
class PatchsetRef:
    """A patchset recorded in a lock: ``id`` and ``digest`` (``sha256:<hex>`` of its file)."""

    id: str
    digest: str


@dataclass(frozen=True, slots=True)
class LockedWheel:
    """One wheel of a locked package: file ``name``, ``url`` or ``path``, ``sha256`` hex (or None)."""

    name: str | None
    url: str | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """A ``[[packages]]`` entry: canonical ``name``, ``version`` string, ``marker`` text, wheels."""

    name: str
    version: str | None
    marker: str | None
    index: str | None
    wheels: tuple[LockedWheel, ...]


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock as read back: its path, packages and the ``[tool.envforge]`` table."""

    path: Path
    packages: tuple[LockedPackage, ...]
    envforge: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class LockResult:
    """What ``lock`` wrote: ``path``, package count, and whether the bytes changed."""

    path: Path
    packages: int
    changed: bool


@dataclass(frozen=True, slots=True)
class LockCheck:
    """``lock --check``: ``fresh`` or not, and one reason per changed recipe key."""

    path: Path
    fresh: bool
    reasons: tuple[str, ...]


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
    table["patchsets"] = [{"id": p.id, "digest": p.digest} for p in patchsets]
    if variant.env_profile:
        table["env-profile"] = variant.env_profile
    table["env"] = dict(variant.env)
    return table


def _compile_args(variant: ResolvedVariant, out: Path, find_links: Sequence[Path], offline: bool,
                  upgrade: Sequence[str]) -> list[str]:
    args = ["pip", "compile", "pyproject.toml", "--no-config", "--no-header", "--format", "pylock.toml",
            "--python-version", variant.python, "--python-platform", variant.target.platform, "-o", str(out)]
    default = next((i for i in variant.indexes if i.name == DEFAULT_INDEX.name), None)
    if default is not None:
        args += ["--default-index", default.url]
    if variant.overrides:
        args += ["--override", "overrides.txt"]
    if variant.resolution == "no-deps":
        args.append("--no-deps")
    for d in find_links:
        args += ["--find-links", str(d.resolve())]
    if offline:
        args += ["--offline", "--no-index"]
    for p in upgrade:
        args += ["--upgrade-package", p]
    return args


def _explain_uv_failure(exc: UvError, variant: ResolvedVariant) -> LockError | UvError:
    tail = exc.stderr_tail
    if m := re.search(r"Failed to fetch: `?(\S+?)`?\s*$", tail, re.MULTILINE):
        url = m.group(1)
        idx = next((i for i in variant.indexes if url.startswith(i.url.rstrip("/"))), None)
        name = f"index '{idx.name}' ({idx.url})" if idx else url
        return UvError(f"cannot reach {name} while locking {variant.lock_name}", tool="uv", argv=exc.argv,
                       returncode=exc.returncode, stderr_tail=tail,
                       hint="lock offline: download the wheels on a machine that reaches the index "
                            f"into a directory (a wheelhouse), then run `envforge lock {variant.recipe} --variant "
                            f"{variant.variant} --offline --find-links DIR`")
    if "No solution found" in tail or "unsatisfiable" in tail:
        tail = "\n".join(ln for ln in tail.replace("envforge-lock-input", "the recipe").splitlines()
                         if not ln.startswith("warning:"))
        pins = [m.group(2) for m in re.finditer(r"([\w.-]+)(?:==\S+)? depends? on ([\w.-]+)==", tail)
                if m.group(1) != "recipe"]
        hint = ("if the upstream pin is wrong for your stack, override it with a reason, e.g. "
                + (f"[variant.{variant.variant}.overrides] {pins[0]} = {{ version = \"==X\", reason = \"...\" }}"
                   if pins else "[overrides] NAME = { version = \"==X\", reason = \"...\" }"))
        return LockError(f"{variant.lock_name} cannot be resolved; uv explains the conflict:\n"
                         + "\n".join("  " + line for line in tail.splitlines()), hint=hint)
    return exc


def _resolve(variant: ResolvedVariant, previous: Path | None, find_links: Sequence[Path], offline: bool,
             upgrade: Sequence[str], progress: Progress | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="envforge-lock-") as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text(uv_pyproject(variant))
        (work / "overrides.txt").write_text("".join(o.requirement() + "\n" for o in variant.overrides))
        out = work / "pylock.toml"
        if previous is not None and previous.is_file():
            shutil.copyfile(previous, out)  # uv prefers the versions already locked
        try:
            run_uv(_compile_args(variant, out, find_links, offline, upgrade), cwd=work, progress=progress)
        except UvError as exc:
            raise _explain_uv_failure(exc, variant) from None
        return tomllib.loads(out.read_text())


def _guards(packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path]) -> None:
    problems = [v.describe() for v in index_violations(packages, variant, find_links)]
    if problems:
        raise CheckFailed(f"{variant.lock_name}: packages came from indexes not allowed for them:\n"
                          + "\n".join("  " + p for p in problems),
                          hint="route the package to its index in the recipe, or remove the extra index "
                               "from your uv configuration (UV_INDEX_URL, UV_EXTRA_INDEX_URL)")
    wrong = cuda_mismatches(((p["name"], str(p["version"])) for p in packages), variant.cuda)
    if wrong:
        raise CheckFailed(f"{variant.lock_name}: packages built for another CUDA major than the variant's "
                          f"CUDA {variant.cuda}:\n" + "\n".join("  " + w.describe() for w in wrong),
                          hint="pin the package to a build for this CUDA major, or override the upstream "
                               "pin that pulls it in (with a reason)")


def lock_variant(
    variant: ResolvedVariant,
    patchsets: Sequence[PatchsetRef],
    out: Path,
    *,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    upgrade: Sequence[str] = (),
    progress: Progress | None = None,
) -> LockResult:
    """Resolve ``variant`` with uv and write the lock to ``out`` (atomically, only if changed).

    :raises LockError: unsatisfiable (with uv's conflict chain and an override hint).
    :raises CheckFailed: a package from an index not allowed for it, or for another CUDA major.
    :raises UvError: uv failed otherwise, e.g. an unreachable index (named, with the offline hint).
    """
    raw = _resolve(variant, out, find_links, offline, upgrade, progress)
    packages = raw.get("packages", [])
    _guards(packages, variant, find_links)
    from envforge import lockfile

    text = lockfile.render(raw, variant, expected_tool_table(variant, patchsets), find_links, __version__)
    changed = not out.is_file() or out.read_text() != text
    if changed:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text)
        tmp.replace(out)
    return LockResult(out, len(packages), changed)


def _wheel_of(w: Mapping[str, Any]) -> LockedWheel:
    url = w.get("url") or w.get("path")
    name = w.get("name") or (Path(unquote(urlparse(url).path)).name if url else None)
    return LockedWheel(name=name, url=url, sha256=(w.get("hashes") or {}).get("sha256"))


def _package(path: Path, i: int, p: Any) -> LockedPackage:
    if not isinstance(p, Mapping) or not isinstance(p.get("name"), str):
        raise LockError(f"{path}: packages[{i}].name: missing or not a string (PEP 751)")
    wheels = p.get("wheels", [])
    if not isinstance(wheels, list) or not all(isinstance(w, Mapping) for w in wheels):
        raise LockError(f"{path}: packages[{i}].wheels: not an array of tables (PEP 751)")
    version = p.get("version")
    return LockedPackage(name=canonicalize_name(p["name"]), version=str(version) if version is not None else None,
                         marker=p.get("marker"), index=p.get("index"), wheels=tuple(_wheel_of(w) for w in wheels))


def read_lock(path: Path) -> Lock:
    """Read a PEP 751 lock: the keys envforge uses, checked with the key path in the message.

    Read with :mod:`tomllib` only: ``lock`` wrote it deterministically, and importing
    :mod:`packaging.pylock` would cost a fifth of a static verify.

    :raises LockError: missing, not TOML (with the line), or not a PEP 751 lock (with the key).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LockError(f"lock {path} does not exist", hint="create it with `envforge lock RECIPE`") from None
    except tomllib.TOMLDecodeError as exc:
        raise LockError(f"{path}: not valid TOML: {exc}") from None
    if "lock-version" not in data or not isinstance(data.get("packages", []), list):
        raise LockError(f"{path}: not a PEP 751 lock (no lock-version, or packages is not an array)")
    packages = tuple(_package(path, i, p) for i, p in enumerate(data.get("packages", [])))
    return Lock(path=path, packages=packages, envforge=data.get("tool", {}).get("envforge", {}))


def _diff_list(key: str, old: Sequence[str], new: Sequence[str]) -> list[str]:
    def by_name(items: Sequence[str]) -> dict[str, str]:
        return {re.split(r"[=<>!~ @]", s, maxsplit=1)[0]: s for s in items}
    o, n = by_name(old), by_name(new)
    out = []
    for name in sorted(set(o) | set(n)):
        if o.get(name) != n.get(name):
            out.append(f"{key}.{name}: locked {o.get(name, '(absent)')!s}, recipe now {n.get(name, '(absent)')!s}")
    return out


def _diff_tables(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, list) and isinstance(b, list) and all(isinstance(x, str) for x in a + b):
            out += _diff_list(f"{prefix}{key}", a, b)
        elif isinstance(a, list) or isinstance(b, list):
            ia, ib = _by_id(a), _by_id(b)
            now = "patchset file now" if key == "patchsets" else "recipe now"
            for k in sorted(set(ia) | set(ib)):
                if ia.get(k) != ib.get(k):
                    out.append(f"{prefix}{key}.{k}: locked {_short(ia.get(k))}, {now} {_short(ib.get(k))}")
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            out += _diff_tables(f"{prefix}{key}.", a, b)
        else:
            out.append(f"{prefix}{key}: locked {a!r}, recipe now {b!r}")
    return out


def _by_id(rows: list[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    return {str(x.get("id") or x.get("name")): x for x in (rows or [])}


def _short(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "(absent)"
    return ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ("id", "name"))


def check_lock(variant: ResolvedVariant, patchsets: Sequence[PatchsetRef], path: Path) -> LockCheck:
    """Is the lock at ``path`` up to date with the recipe and patchsets? Never writes, no network.

    Each reason names the recipe key that changed, e.g.
    ``packages.sglang: locked sglang==0.5.9, recipe now sglang==0.5.10``.

    A missing lock is stale (reason ``no lock yet: run envforge lock``), not an error.

    :raises LockError: the lock is unreadable.
    """
    if not path.is_file():
        return LockCheck(path, False, (f"no lock yet: run `envforge lock {variant.recipe} --variant {variant.variant}`",))
    stored = dict(read_lock(path).envforge)
    stored.pop("indexes", None)
    expected = expected_tool_table(variant, patchsets)
    expected_inputs = expected.pop("inputs")
    stored_inputs = stored.pop("inputs", {})
    reasons = _diff_tables("", stored_inputs, expected_inputs)
    stored.pop("recipe-digest", None)
    expected.pop("recipe-digest", None)
    reasons += _diff_tables("", stored, expected)
    return LockCheck(path, not reasons, tuple(reasons))


def patchset_refs(directory: Path, ids: Sequence[str]) -> tuple[PatchsetRef, ...]:
    """``PatchsetRef`` (id, sha256 digest of the file) for each patchset the recipe names.

    The patchsets are loaded and validated (:func:`envforge.patching.load_patchsets`), so a lock
    never records a patchset that cannot be applied.

    :raises PatchsetError: a patchset file is missing or invalid (file, line, key, did-you-mean).
    """
    if not ids:
        return ()
    from envforge.patching import load_patchsets

    by_id = {p.id: p for p in load_patchsets(directory, ids)}
    return tuple(PatchsetRef(pid, by_id[pid].digest) for pid in ids)
