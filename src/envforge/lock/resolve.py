"""Resolving a recipe variant with uv: ``uv pip compile --format pylock.toml``, and its failures explained.

uv resolves for the recipe's target platform and Python, from any machine, in a temporary uv
project that routes each package to its index (:func:`envforge.lock.routing.uv_pyproject`).
:func:`resolve_variant` returns uv's pylock as parsed TOML; envforge's guards
(:mod:`envforge.lock.guards`) and writer (:mod:`envforge.lock.write`) take it from there. uv's
failures are turned into errors that name the fix: an unreachable index (lock offline), a pin with
no wheel for the target platform (the fix is the platform), a conflict (an override with a reason).
:func:`dependency_chains` says which requirements pull a package in (uv's ``# via`` annotations).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.lock.model import LockError
from envforge.lock.routing import DEFAULT_INDEX, override_routes, routed_files_only, uv_pyproject
from envforge.recipe.model import ResolvedVariant
from envforge.recipe.schema import exclude_newer_cutoff
from envforge.uv.run import UvError, run_uv

__all__ = ["Progress", "dependency_chains", "resolve_variant", "yank_warnings"]

_INPUT_PROJECT = "envforge-lock-input"  # the project name routing.uv_pyproject gives uv
Progress = Callable[[str], None]


def _compile_args(
    variant: ResolvedVariant, out: Path, find_links: Sequence[Path], offline: bool, upgrade: Sequence[str]
) -> list[str]:
    args = [
        "pip",
        "compile",
        "pyproject.toml",
        "--no-config",
        "--no-header",
        "--format",
        "pylock.toml",
        "--python-version",
        variant.python,
        "--python-platform",
        variant.target.platform,
        "-o",
        str(out),
    ]
    default = next((i for i in variant.indexes if i.name == DEFAULT_INDEX.name), None)
    if default is not None:
        args += ["--default-index", f"{default.name}={default.url}"]  # named: UV_INDEX_PYPI_PASSWORD applies
    if variant.overrides:
        args += ["--override", "overrides.txt"]
    if variant.resolution == "no-deps":
        args.append("--no-deps")
    elif variant.provided or variant.excludes:  # neither locked nor followed (uv >= 0.8 --excludes)
        args += ["--excludes", "excludes.txt"]
    if variant.exclude_newer:  # recorded in [tool.envforge] inputs: a later re-lock resolves the same
        args += ["--exclude-newer", exclude_newer_cutoff(variant.exclude_newer)]  # a date: its end in UTC
        for name in variant.exclude_newer_exempt:  # indexes without upload times (B40)
            args += ["--exclude-newer-package", f"{name}=false"]
    for d in find_links:
        args += ["--find-links", str(d.resolve())]
    if not offline:  # an override of a routed package keeps its route (B51)
        for url in override_routes(variant).values():
            args += ["--find-links", url]
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
        return UvError(
            f"cannot reach {name} while locking {variant.lock_name}",
            tool="uv",
            argv=exc.argv,
            returncode=exc.returncode,
            stderr_tail=tail,
            hint="lock where the index is reachable and commit the lock; on this machine, build from "
            "a wheelhouse of its files: `envforge build "
            f"{variant.recipe} --variant {variant.variant} --offline --find-links DIR` (an offline "
            "relock keeps the URLs the committed locks record; `--local-paths` makes a lock for this "
            "machine only)",
        )
    if m := re.search(
        r"Wheels are available for `([^`]+)` \(v([^)]+)\) on the following platforms: (.+)$", tail, re.MULTILINE
    ):
        return _platform_error(variant, m.group(1), m.group(2), re.findall(r"`([^`]+)`", m.group(3)))
    if filtered := re.findall(r"`([^`]+)` was filtered by `exclude-newer`", tail):
        return _exclude_newer_error(variant, tail, filtered)
    if m := re.search(r"Because ([\w.-]+) was not found in the package registry", tail):
        return _not_found_error(variant, tail, canonicalize_name(m.group(1)))
    if "No solution found" in tail or "unsatisfiable" in tail:
        tail = "\n".join(
            ln for ln in tail.replace("envforge-lock-input", "the recipe").splitlines() if not ln.startswith("warning:")
        )
        pins = [
            m.group(2)
            for m in re.finditer(r"([\w.-]+)(?:==\S+)? depends? on ([\w.-]+)==", tail)
            if m.group(1) != "recipe"
        ]
        hint = "if the upstream pin is wrong for your stack, override it with a reason, e.g. " + (
            f'[variant.{variant.variant}.overrides] {pins[0]} = {{ version = "==X", reason = "..." }}'
            if pins
            else '[overrides] NAME = { version = "==X", reason = "..." }'
        )
        return LockError(
            f"{variant.lock_name} cannot be resolved; uv explains the conflict:\n"
            + "\n".join("  " + line for line in tail.splitlines()),
            hint=hint,
        )
    return exc


def _uv_lines(tail: str) -> list[str]:
    return [ln for ln in tail.replace("envforge-lock-input", "the recipe").splitlines() if ln.strip()]


def _exclude_newer_error(variant: ResolvedVariant, tail: str, names: Sequence[str]) -> LockError:
    """``exclude-newer`` filtered out every candidate of ``names``: uv's own lines kept (the cause
    and, for an index that publishes no upload times, "missing an upload date"), and the recipe
    key that exempts a package named (B40)."""
    names = [canonicalize_name(n) for n in dict.fromkeys(names)]
    undated: dict[str, list[str]] = {}
    for line in _uv_lines(tail):
        if (m := re.match(r"warning: `([^`]+)` is missing an upload date", line)) and m.group(1).endswith(
            (".whl", ".tar.gz", ".zip")
        ):
            undated.setdefault(canonicalize_name(m.group(1).split("-")[0]), []).append(line)
    shown = [ln for ln in _uv_lines(tail) if not ln.startswith("warning:") or "missing an upload date" in ln]
    kept: list[str] = []
    for line in shown:
        m = re.match(r"warning: `([^`]+)` is missing an upload date", line)
        name = canonicalize_name(m.group(1).split("-")[0]) if m else None
        if name is not None and undated[name][0] != line:
            continue
        kept.append(
            line
            + (
                f" (and {len(undated[name]) - 1} more files of {name})"
                if name is not None and len(undated[name]) > 1
                else ""
            )
        )
    first = names[0]
    why = (
        "its index publishes no upload times"
        if first in undated
        else f"every matching version was uploaded after {variant.exclude_newer}"
    )
    hint = (
        f"{why}: exempt it from exclude-newer in the recipe, with a reason: [exclude-newer-exempt] "
        f"{first} = \"...\" (uv's exclude-newer-package, recorded in the lock's inputs)"
    )
    if first not in undated:
        hint += ", or move [recipe] exclude-newer later"
    return LockError(
        f"{variant.lock_name} cannot be resolved: exclude-newer ({variant.exclude_newer}) left no "
        f"version of {', '.join(names)}; uv says:\n" + "\n".join("  " + ln for ln in kept),
        hint=hint,
    )


def _not_found_error(variant: ResolvedVariant, tail: str, name: str) -> LockError:
    """uv found no ``name`` on the indexes it asked: where the recipe looks for it, and how to
    route it (an override would not help: it is looked up the same way; B51)."""
    pin = next((p for p in variant.packages if p.name == name), None)
    where = (
        f"the index '{pin.index}' the recipe routes it to"
        if pin is not None and pin.index
        else f"the default index '{DEFAULT_INDEX.name}'"
    )
    lines = [ln for ln in _uv_lines(tail) if not ln.startswith("warning:")]
    return LockError(
        f"{variant.lock_name} cannot be resolved: {name} is not on {where}; uv says:\n"
        + "\n".join("  " + ln for ln in lines),
        hint=f"check the name, or route it to the index that has it: [packages] {name} = "
        '{ version = "...", index = "NAME" } with NAME in [indexes]',
    )


@contextmanager
def _workdir(variant: ResolvedVariant) -> Iterator[Path]:
    """A temporary uv project for ``variant``: ``pyproject.toml`` (routing) and ``overrides.txt``."""
    with tempfile.TemporaryDirectory(prefix="envforge-lock-") as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text(uv_pyproject(variant))
        (work / "overrides.txt").write_text("".join(o.requirement() + "\n" for o in variant.overrides))
        names = sorted({p.name for p in variant.provided} | set(variant.excludes))
        (work / "excludes.txt").write_text("".join(n + "\n" for n in names))
        yield work


def _platform_error(variant: ResolvedVariant, name: str, version: str, tags: Sequence[str]) -> LockError:
    """A pin with no wheel for the target platform: the fix is the platform, not an override."""
    here = variant.target.platform
    machine = here.split("-", 1)[0]
    same_arch = sorted(
        (t for t in tags if t.endswith(machine) and t.startswith("manylinux_")),
        key=lambda t: [int(x) for x in re.findall(r"\d+", t.split(machine)[0])],
    )
    msg = (
        f"{variant.lock_name}: {name} {version} has no wheel for the target platform {here}; "
        f"its wheels are for: {', '.join(tags)}"
    )
    if same_arch:
        m = re.match(r"manylinux_(\d+)_(\d+)", same_arch[0])
        assert m is not None
        wanted = f"{machine}-manylinux_{m.group(1)}_{m.group(2)}"
        return LockError(
            msg,
            hint=(
                f'the fix is the platform, not an override: set platform = "{wanted}" in '
                f"[variant.{variant.variant}] (or [target]); machines that build this lock then need "
                f"glibc {m.group(1)}.{m.group(2)} or newer (`ldd --version` tells)"
            ),
        )
    return LockError(
        msg,
        hint=f"choose a platform its wheels support in [variant.{variant.variant}] platform, "
        "or a version of it with wheels for this platform",
    )


def yank_warnings(stderr: str) -> tuple[str, ...]:
    """uv's warnings about locked versions yanked on their index (PEP 592), as
    ``"guardkit 1.1 is yanked on its index (reason: \"...\")"``, in uv's order (field case B48)."""
    out = []
    for m in re.finditer(r"^warning: `([^`=]+)==([^`]+)` is yanked(?: \(reason: (.*)\))?\s*$", stderr, re.MULTILINE):
        out.append(
            f"{canonicalize_name(m.group(1))} {m.group(2)} is yanked on its index"
            + (f" (reason: {m.group(3)})" if m.group(3) else " (no reason given)")
        )
    return tuple(dict.fromkeys(out))


def resolve_variant(
    variant: ResolvedVariant,
    previous: Path | None,
    find_links: Sequence[Path],
    offline: bool,
    upgrade: Sequence[str],
    progress: Progress | None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """uv's resolution of ``variant`` as parsed ``pylock.toml`` (``{"packages": [...], ...}``).

    :param warnings: when given, uv's warnings worth the user's eye are appended: locked versions
        yanked upstream (:func:`yank_warnings`).

    :param previous: the lock written before, if any: uv prefers the versions already locked.
    :param upgrade: packages allowed to move to newer versions (``--upgrade-package``).
    :raises LockError: unsatisfiable (uv's conflict chain, an override hint) or no wheel for the
        target platform (the platform to choose).
    :raises UvError: uv failed otherwise, e.g. an unreachable index (named, with the offline hint).
    """
    with _workdir(variant) as work:
        out = work / "pylock.toml"
        if previous is not None and previous.is_file():
            shutil.copyfile(previous, out)  # uv prefers the versions already locked
        try:
            res = run_uv(_compile_args(variant, out, find_links, offline, upgrade), cwd=work, progress=progress)
        except UvError as exc:
            raise _explain_uv_failure(exc, variant) from None
        if warnings is not None:
            warnings.extend(yank_warnings(res.stderr))
        raw = tomllib.loads(out.read_text())
        routed_files_only(raw.get("packages", []), variant)
        return raw


def dependency_chains(
    variant: ResolvedVariant, names: Sequence[str], *, find_links: Sequence[Path] = (), offline: bool = False
) -> dict[str, list[str]]:
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
