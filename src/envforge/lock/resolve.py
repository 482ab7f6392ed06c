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
from envforge.lock.routing import DEFAULT_INDEX, uv_pyproject
from envforge.recipe.model import ResolvedVariant
from envforge.uv.run import UvError, run_uv

__all__ = ["Progress", "dependency_chains", "resolve_variant"]

_INPUT_PROJECT = "envforge-lock-input"  # the project name routing.uv_pyproject gives uv
Progress = Callable[[str], None]


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


def resolve_variant(variant: ResolvedVariant, previous: Path | None, find_links: Sequence[Path], offline: bool,
                    upgrade: Sequence[str], progress: Progress | None) -> dict[str, Any]:
    """uv's resolution of ``variant`` as parsed ``pylock.toml`` (``{"packages": [...], ...}``).

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
