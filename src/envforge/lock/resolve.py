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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge import __version__
from packaging.utils import canonicalize_name

from envforge.recipe.cuda import cuda_major, cuda_mismatches
from envforge.core.errors import CheckFailed, InputError
from envforge.recipe.model import ResolvedVariant
from envforge.lock.routing import DEFAULT_INDEX, index_violations, uv_pyproject
from envforge.lock.read import refuse_ambiguous  # hook (issue 26, lockreader): install-time ambiguity refusal
from envforge.uv.run import UvError, run_uv

__all__ = [
    "LOCK_SCHEMA",
    "LockCheck",
    "LockError",
    "LockIntegrityError",
    "LockResult",
    "Lock",
    "LockedPackage",
    "LockedWheel",
    "PatchsetRef",
    "check_integrity",
    "check_lock",
    "guard_lock",
    "integrity_problems",
    "patchset_refs",
    "expected_tool_table",
    "lock_variant",
    "read_lock",
]

LOCK_SCHEMA = 1
_INPUT_PROJECT = "envforge-lock-input"  # the project name routing.uv_pyproject gives uv
Progress = Callable[[str], None]


class LockError(InputError):
    """A lock cannot be made or read (exit 2): unsatisfiable, unreachable index, bad file."""


class LockIntegrityError(LockError):
    """The lock is not what ``envforge lock`` wrote (exit 2): no ``[tool.envforge]`` table (or cut
    before it), no or another ``packages-digest`` than its packages hash to (an entry added, removed
    or edited by hand, e.g. a changed wheel hash), or a recipe package missing. ``problems`` holds
    one line per problem."""

    def __init__(self, path: Path, problems: Sequence[str], *, hint: str) -> None:
        super().__init__(f"{path} is not the lock `envforge lock` wrote:\n"
                         + "\n".join("  " + p for p in problems), hint=hint)
        self.problems = tuple(problems)


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
    """A lock as read back: its path, packages and the ``[tool.envforge]`` table; ``digest`` is the
    :func:`envforge.lock.read.packages_digest` of the ``[[packages]]`` tables as they are in the
    file (``tables``), to compare with the ``packages-digest`` ``envforge lock`` recorded."""

    path: Path
    packages: tuple[LockedPackage, ...]
    envforge: Mapping[str, Any]
    digest: str = ""
    tables: tuple[Mapping[str, Any], ...] = ()


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
    if variant.cuda_exceptions:
        table["cuda-exceptions"] = [{"name": k, "reason": v} for k, v in variant.cuda_exceptions.items()]
    if variant.source_builds:
        table["build-from-source"] = [{"name": k, "reason": v} for k, v in variant.source_builds.items()]
    if variant.build_constraints:
        table["build-constraints"] = list(variant.build_constraints)
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
        args += ["--default-index", f"{default.name}={default.url}"]  # named: UV_INDEX_PYPI_PASSWORD applies
    if variant.overrides:
        args += ["--override", "overrides.txt"]
    if variant.resolution == "no-deps":
        args.append("--no-deps")
    if variant.exclude_newer:  # recorded in [tool.envforge] inputs: a later re-lock resolves the same
        args += ["--exclude-newer", variant.exclude_newer]
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
    if m := re.search(r"Wheels are available for `([^`]+)` \(v([^)]+)\) on the following platforms: (.+)$",
                      tail, re.MULTILINE):
        return _platform_error(variant, m.group(1), m.group(2), re.findall(r"`([^`]+)`", m.group(3)))
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


@contextmanager
def _workdir(variant: ResolvedVariant) -> Iterator[Path]:
    """A temporary uv project for ``variant``: ``pyproject.toml`` (routing) and ``overrides.txt``."""
    with tempfile.TemporaryDirectory(prefix="envforge-lock-") as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text(uv_pyproject(variant))
        (work / "overrides.txt").write_text("".join(o.requirement() + "\n" for o in variant.overrides))
        yield work


def _platform_error(variant: ResolvedVariant, name: str, version: str, tags: Sequence[str]) -> LockError:
    """A pin with no wheel for the target platform: the fix is the platform, not an override."""
    here = variant.target.platform
    machine = here.split("-", 1)[0]
    same_arch = sorted((t for t in tags if t.endswith(machine) and t.startswith("manylinux_")),
                       key=lambda t: [int(x) for x in re.findall(r"\d+", t.split(machine)[0])])
    msg = (f"{variant.lock_name}: {name} {version} has no wheel for the target platform {here}; "
           f"its wheels are for: {', '.join(tags)}")
    if same_arch:
        m = re.match(r"manylinux_(\d+)_(\d+)", same_arch[0])
        assert m is not None
        wanted = f"{machine}-manylinux_{m.group(1)}_{m.group(2)}"
        return LockError(msg, hint=(
            f"the fix is the platform, not an override: set platform = \"{wanted}\" in "
            f"[variant.{variant.variant}] (or [target]); machines that build this lock then need "
            f"glibc {m.group(1)}.{m.group(2)} or newer (`ldd --version` tells)"))
    return LockError(msg, hint=f"choose a platform its wheels support in [variant.{variant.variant}] platform, "
                               "or a version of it with wheels for this platform")


def _resolve(variant: ResolvedVariant, previous: Path | None, find_links: Sequence[Path], offline: bool,
             upgrade: Sequence[str], progress: Progress | None) -> dict[str, Any]:
    with _workdir(variant) as work:
        out = work / "pylock.toml"
        if previous is not None and previous.is_file():
            shutil.copyfile(previous, out)  # uv prefers the versions already locked
        try:
            run_uv(_compile_args(variant, out, find_links, offline, upgrade), cwd=work, progress=progress)
        except UvError as exc:
            raise _explain_uv_failure(exc, variant) from None
        return tomllib.loads(out.read_text())


def dependency_chains(variant: ResolvedVariant, names: Sequence[str], *, find_links: Sequence[Path] = (),
                      offline: bool = False) -> dict[str, list[str]]:
    """For each of ``names``, the chain of requirements that pulls it into the resolution.

    uv's pylock output carries no dependency edges, so this resolves once more (metadata is cached)
    in requirements format, whose ``# via`` annotations name each package's dependents, and walks
    them up to the recipe: ``{"nvidia-cutlass-dsl-libs-cu12": ["the recipe", "sglang",
    "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu12"]}``. Only the first dependent is followed
    at each step. Returns ``{}`` when uv fails (the chain is an explanation, not a guard).
    """
    with _workdir(variant) as work:
        out = work / "requirements.txt"
        args = _compile_args(variant, out, find_links, offline, ())
        args[args.index("--format") + 1] = "requirements.txt"
        try:
            run_uv(args, cwd=work)
        except UvError:
            return {}
        via = _parse_via(out.read_text())
    return {canonicalize_name(n): _shortest_chain(via, canonicalize_name(n)) for n in names}


def _shortest_chain(via: Mapping[str, list[str]], name: str) -> list[str]:
    """Breadth-first up the ``# via`` edges from ``name`` to the recipe; the shortest chain wins."""
    paths: dict[str, list[str]] = {name: [name]}
    queue = [name]
    while queue:
        node = queue.pop(0)
        for parent in via.get(node, []):
            if parent.startswith("-r ") or parent == _INPUT_PROJECT:
                return ["the recipe", *paths[node]]
            if parent not in paths:
                paths[parent] = [parent, *paths[node]]
                queue.append(parent)
    return paths[name]


def _parse_via(text: str) -> dict[str, list[str]]:
    """``name -> [dependents]`` from uv/pip-compile ``# via`` annotations (one-line and list forms)."""
    via: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            current = canonicalize_name(re.split(r"[=<>!~ ;@\[]", line, maxsplit=1)[0])
            via[current] = []
        elif current is not None and (m := re.match(r"\s+#\s+(?:via\s+)?(\S.*)$", line)):
            item = m.group(1).strip()
            if item != "via":
                via[current].append(item if item.startswith("-r ") else canonicalize_name(item.split()[0]))
    return via


def _guards(packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path],
            offline: bool = False) -> None:
    problems = [v.describe() for v in index_violations(packages, variant, find_links)]
    if problems:
        raise CheckFailed(f"{variant.lock_name}: packages came from indexes not allowed for them:\n"
                          + "\n".join("  " + p for p in problems),
                          hint="route the package to its index in the recipe, or remove the extra index "
                               "from your uv configuration (UV_INDEX_URL, UV_EXTRA_INDEX_URL)")
    _cuda_guard(packages, variant, find_links, offline)
    _no_cuda_guard(packages, variant)
    _source_build_guard(packages, variant)


def _cuda_guard(packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path],
                offline: bool) -> None:
    """B03: nothing built for another CUDA major, except the recipe's reviewed ``cuda-exceptions``;
    an exception that matches no such package is itself an error (it would hide the next one)."""
    found = cuda_mismatches(((p["name"], str(p["version"])) for p in packages), variant.cuda)
    wrong = [w for w in found if w.name not in variant.cuda_exceptions]
    unused = sorted(set(variant.cuda_exceptions) - {w.name for w in found})
    if unused:
        raise LockError(f"{variant.lock_name}: cuda-exceptions name packages that are not built for another "
                        f"CUDA major in this lock: {', '.join(unused)}",
                        hint="remove them from the recipe's cuda-exceptions (the exception is no longer needed)")
    if not wrong:
        return
    chains = dependency_chains(variant, [w.name for w in wrong], find_links=find_links, offline=offline)
    lines = []
    for w in wrong:
        chain = chains.get(w.name)
        lines.append(w.describe() + (f"\n    pulled in by: {' -> '.join(chain)}" if chain and len(chain) > 1 else ""))
    raise CheckFailed(f"{variant.lock_name}: packages built for another CUDA major than the variant's "
                      f"CUDA {variant.cuda}:\n" + "\n".join("  " + ln for ln in lines),
                      hint="pin the package to a build for this CUDA major, override the upstream pin that "
                           "pulls it in (with a reason), or, where upstream requires it unconditionally, accept "
                           f"it: [variant.{variant.variant}.cuda-exceptions] {wrong[0].name} = \"<reason>\"")


def _no_cuda_guard(packages: list[dict[str, Any]], variant: ResolvedVariant) -> None:
    """B26: a variant that declares a CUDA version must resolve at least one CUDA build.

    PyPI's aarch64 torch wheels of some releases are CPU-only (their metadata limits every
    ``nvidia-*`` requirement to x86_64; pytorch issue 160162), so a CUDA variant locked for aarch64
    can silently become a CPU stack. Checked for full resolutions only (``no-deps`` locks list only
    the recipe's own pins).
    """
    if not variant.cuda or variant.resolution != "full":
        return
    if any(cuda_major(p["name"], str(p.get("version"))) is not None for p in packages):
        return
    torch = next((p for p in packages if canonicalize_name(p["name"]) == "torch"), None)
    what = f"torch {torch['version']} has no +cuXXX local label and " if torch else ""
    raise CheckFailed(
        f"{variant.lock_name}: the variant declares CUDA {variant.cuda} but the lock for "
        f"{variant.target.platform} contains no CUDA build: {what}no CUDA runtime wheel (nvidia-*, cuda-*) "
        f"was resolved ({len(packages)} packages)",
        hint=(f"route torch to an index that has CUDA builds for {variant.target.platform}, e.g. "
              f"[variant.{variant.variant}.indexes] pytorch-cu{variant.cuda.replace('.', '')[:3]} = "
              f"\"https://download.pytorch.org/whl/cu{variant.cuda.replace('.', '')[:3]}\" and "
              f"torch = {{ version = \"==X+cu{variant.cuda.replace('.', '')[:3]}\", index = \"pytorch-cu"
              f"{variant.cuda.replace('.', '')[:3]}\" }}, or choose a torch release whose PyPI wheels for this "
              "platform are CUDA builds; or drop `cuda` from a variant that is meant to be CPU-only"))


def source_builds(packages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(name, version)`` of every locked package with no wheel: uv builds it from its sdist (or
    directory, VCS checkout) at install time, with whatever build backend it resolves then (B28)."""
    return [(canonicalize_name(p["name"]), str(p.get("version", "")))
            for p in packages if not p.get("wheels")]


def _source_build_guard(packages: list[dict[str, Any]], variant: ResolvedVariant) -> None:
    found = source_builds(packages)
    missing = [(n, v) for n, v in found if n not in variant.source_builds]
    unused = sorted(set(variant.source_builds) - {n for n, _ in found})
    if missing:
        listed = ", ".join(f"{n} {v}" for n, v in missing)
        raise CheckFailed(
            f"{variant.lock_name}: {listed} {'has' if len(missing) == 1 else 'have'} no wheel for "
            f"{variant.target.platform} and would be built from source at install time",
            hint=(f"opt in with the reason reviewers read: [build-from-source] {missing[0][0]} = \"<reason>\", and pin "
                  "the build backend with [recipe] build-constraints = [\"setuptools==X.Y.Z\"]; or pin a "
                  "version that ships a wheel"))
    if unused:
        raise LockError(f"{variant.lock_name}: build-from-source names packages that have wheels in this lock: "
                        f"{', '.join(unused)}", hint="remove them from the recipe's build-from-source")


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
    _guards(packages, variant, find_links, offline)
    from envforge.lock import write as lockfile
    text = lockfile.render(raw, variant, expected_tool_table(variant, patchsets), find_links, __version__)
    changed = not out.is_file() or out.read_text() != text
    if changed:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp")
        tmp.write_text(text)
        tmp.replace(out)
    return LockResult(out, len(packages), changed)


def read_lock(path: Path, *, state_hint: str | None = None) -> Lock:
    """Read a PEP 751 lock through :func:`envforge.lock.read.read_lock_file` (validated by
    ``packaging.pylock``, same-name entries that can be active together refused) into the keys
    envforge uses. Wheel names are packaging's ``PackageWheel.filename`` (name, else path, else url).

    :param state_hint: given when ``path`` is an environment's own copy (``.envforge/pylock.toml``):
        read as envforge state (a regular file only; a FIFO or device is named, never opened), and
        the hint of every error, the missing copy's included.
    :raises LockError: missing (with the hint to run ``envforge lock``, or ``state_hint``).
    :raises InputError: not UTF-8, not TOML (with the line), not a valid PEP 751 lock (key path and
        packaging's reason), or a uv.lock (envforge builds and verifies from pylock files only);
        with ``state_hint``, not a regular file.
    """
    from envforge.lock.read import read_lock_file

    if state_hint is not None:
        try:
            doc = read_lock_file(path, state_hint=state_hint)
        except FileNotFoundError:
            raise LockError(f"lock {path} does not exist", hint=state_hint) from None
    elif not path.exists():  # (a pipe, `--lock <(git show REV:LOCK)`, is read; a directory or device named)
        raise LockError(f"lock {path} does not exist", hint="create it with `envforge lock RECIPE`")
    else:
        doc = read_lock_file(path)
    if doc.kind != "pylock":
        raise LockError(f"{path} is a uv.lock; envforge builds and verifies from PEP 751 pylock files",
                        hint="create one with `envforge lock RECIPE`")
    packages = tuple(
        LockedPackage(name=e.name, version=e.version, marker=e.marker, index=e.index,
                      wheels=tuple(LockedWheel(w.filename, w.where, w.hashes.get("sha256")) for w in e.wheels))
        for e in doc.entries)
    from envforge.lock.read import packages_digest

    return Lock(path=path, packages=packages, envforge=doc.envforge, digest=packages_digest(doc.packages),
                tables=tuple(doc.packages))


def integrity_problems(lock: Lock, variant: ResolvedVariant | None = None) -> list[str]:
    """What makes ``lock`` other than what ``envforge lock`` wrote; ``[]`` when it is intact.

    Checks: the ``[tool.envforge]`` table exists (``lock`` writes it last, so a file cut short lacks
    it); its ``packages-digest`` equals the digest of the file's ``[[packages]]``; with ``variant``,
    every package the recipe names is locked.
    """
    if not lock.envforge:
        return ["it has no [tool.envforge] table: not written by `envforge lock`, or cut short before its end"]
    out = []
    recorded = lock.envforge.get("packages-digest")
    if recorded is None:
        out.append("[tool.envforge] records no packages-digest (a lock from before envforge recorded it, "
                   "or the key was removed by hand)")
    elif recorded != lock.digest:
        out.append(f"its [[packages]] are not the ones `envforge lock` wrote: packages-digest {recorded}, "
                   f"the file's packages hash to {lock.digest} (an entry added, removed, cut off or "
                   "edited by hand, e.g. a changed wheel hash)")
    if variant is not None:
        names = {p.name for p in lock.packages}
        out += [f"recipe package {p.name} is not in the lock" for p in variant.packages
                if canonicalize_name(p.name) not in names]
    return out


def check_integrity(lock: Lock, variant: ResolvedVariant | None = None) -> None:
    """Raise unless ``lock`` is what ``envforge lock`` wrote (see :func:`integrity_problems`).

    :raises LockIntegrityError: one line per problem, with the command that regenerates the lock.
    """
    problems = integrity_problems(lock, variant)
    if problems:
        cmd = (f"envforge lock {variant.recipe} --variant {variant.variant}" if variant is not None
               else "envforge lock RECIPE --variant VARIANT")
        raise LockIntegrityError(lock.path, problems,
                                 hint=f"regenerate it with `{cmd}` and review the diff; never edit a lock by hand")


def guard_lock(path: Path, variant: ResolvedVariant, find_links: Sequence[Path] = ()) -> Lock:
    """Read the lock at ``path`` for a build of ``variant``: intact (:func:`check_integrity`), and
    every package from an index the recipe allows for it (the index guard ``lock`` runs, again).

    :raises InvalidLock: two entries of one name are both selected for the variant's Python on this
        machine (:func:`envforge.lock.read.refuse_ambiguous`).
    :raises LockIntegrityError: see :func:`check_integrity`.
    :raises CheckFailed: a package comes from an index not allowed for it.
    """
    lock = read_lock(path)
    refuse_ambiguous(str(path), lock.packages, python=variant.python)  # hook (issue 26): two entries selected
    check_integrity(lock, variant)
    problems = [v.describe() for v in index_violations(lock.tables, variant, find_links)]
    if problems:
        from envforge.lock.routing import redact_userinfo

        raise CheckFailed(f"{path}: packages come from indexes not allowed for them:\n"
                          + "\n".join("  " + redact_userinfo(p) for p in problems),
                          hint=f"regenerate the lock with `envforge lock {variant.recipe} --variant {variant.variant}`")
    return lock


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
    :raises LockIntegrityError: the lock is not what ``envforge lock`` wrote (:func:`check_integrity`).
    """
    if not path.is_file():
        return LockCheck(path, False, (f"no lock yet: run `envforge lock {variant.recipe} --variant {variant.variant}`",))
    lock = read_lock(path)
    check_integrity(lock, variant)
    stored = dict(lock.envforge)
    stored.pop("indexes", None)
    stored.pop("packages-digest", None)
    expected = expected_tool_table(variant, patchsets)
    expected_inputs = expected.pop("inputs")
    stored_inputs = stored.pop("inputs", {})
    reasons = _diff_tables("", stored_inputs, expected_inputs)
    stored.pop("recipe-digest", None)
    expected.pop("recipe-digest", None)
    reasons += _diff_tables("", stored, expected)
    from envforge.lock.routing import redact_userinfo

    return LockCheck(path, not reasons, tuple(redact_userinfo(r) for r in reasons))


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
