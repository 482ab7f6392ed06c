"""``envforge build``: a new generation of an environment, made in full, then the link flipped to it.

``envs/<recipe>-<variant>`` is a relative symlink to ``envs/.generations/<recipe>-<variant>/gNNNN``.
A build makes a new generation (``uv venv``, ``uv pip sync`` of the lock with its hashes, patches,
env profile hook, manifest) and flips the link with one ``os.replace`` only after every step
succeeded (docs/design.md, decision 3). A failed or killed build never touches the live
generation: Ctrl-C, SIGTERM and SIGHUP remove the half-built generation and name the step; after
SIGKILL the leftover (no ``generation.json``) is removed by the next build or ``envforge gc``. A
signal that lands after the flip removes nothing: the link is read again first (field case N50).
With ``flip=False`` the generation is made complete but not
made live: ``envforge up`` verifies it first and flips only a clean one (:func:`make_live`).
Builds never delete old generations (``gc``, :mod:`envforge.env.inventory`, does, when asked). Every
build writes its log to ``gNNNN.log`` beside its directory. Naming, listing and ``rollback`` are
:mod:`envforge.env.generations`.

Plan first, then execute: :func:`plan_build` is pure (no writes), :func:`execute_build` does it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote

import tomlkit

from envforge import patching
from envforge.core.errors import EXIT_TOOL_FAILED, CheckFailed, EnvforgeError, InputError
from envforge.core.fs import atomic_write, replace_symlink, sha256_hex
from envforge.core.plural import counted
from envforge.core.state import StateDir
from envforge.env import profile as envprofile
from envforge.env.buildconstraints import build_constraints
from envforge.env.buildnotes import installed_notes
from envforge.env.generations import (
    discard_generation,
    exclusive_generations,
    generation_root,
    next_generation,
    relink,
    remove_incomplete,
)
from envforge.env.layout import site_packages
from envforge.env.provided import link_base
from envforge.lock.check import guard_lock
from envforge.lock.model import read_lock
from envforge.lock.patchsets import require_applicable
from envforge.lock.write import patchset_refs
from envforge.patching.memo import default_result_cache
from envforge.recipe.envvars import secret_problem
from envforge.recipe.model import ResolvedVariant
from envforge.recipe.platforms import host_problem, platform_problem
from envforge.recipe.project import Project
from envforge.uv.interpreter import Interpreter
from envforge.uv.run import run_uv

__all__ = [
    "BuildError",
    "BuildPlan",
    "BuildResult",
    "StepResult",
    "LINK_MODES",
    "execute_build",
    "make_live",
    "plan_build",
]

Progress = Callable[[str], None]

#: uv's ``--link-mode`` values (uv's ``LinkMode``): how files get from uv's cache into the generation.
#: uv's default on Linux is ``hardlink``: every installed file shares its inode with the cache, so an
#: in-place edit of one (``sed -i`` excepted, ``echo >>`` included) changes the cache and every later build.
LINK_MODES = ("clone", "copy", "hardlink", "symlink")


class BuildError(EnvforgeError):
    """A build step failed; the live environment is unchanged. Exit code is the cause's."""

    def __init__(self, step: str, cause: EnvforgeError, generation: Path, log: Path | None = None) -> None:
        super().__init__(
            f"build failed at step '{step}': {cause.message}\n"
            f"  the live environment was not changed; the failed generation was removed "
            f"({generation.name})" + (f"\n  full log: {log}" if log is not None else ""),
            hint=cause.hint,
        )
        self.log = log
        self.exit_code = cause.exit_code
        self.step = step
        self.cause = cause

    def __str__(self) -> str:
        base = super().__str__()
        tail = getattr(self.cause, "stderr_tail", "")
        return base + ("\n  uv said:\n" + "\n".join("    " + ln for ln in tail.splitlines()) if tail else "")


@dataclass(frozen=True, slots=True)
class BuildPlan:
    """What a build will do: the link, the new generation directory, the lock, the interpreter."""

    variant: ResolvedVariant
    link: Path
    generation: Path
    lock: Path
    python: Interpreter
    patchsets_dir: Path
    find_links: tuple[Path, ...] = ()
    offline: bool = False
    env_mode: str = "pth"
    link_mode: str | None = None  # uv's --link-mode (LINK_MODES); None: uv's default

    def describe(self) -> list[str]:
        """Human lines for ``--dry-run``."""
        return [
            f"environment  {self.link} -> {self.generation.relative_to(self.link.parent)}",
            f"python       {self.python.path} ({self.python.version}, via {self.python.source})",
            f"lock         {self.lock}",
            f"install      uv pip sync (hashes from the lock){' offline from ' + ', '.join(map(str, self.find_links)) if self.offline else ''}"
            f", link mode {self.link_mode or 'uv default (hardlink)'}",
            f"patchsets    {', '.join(self.variant.patchsets) or 'none'}",
            f"env profile  {self.variant.env_profile or 'none'} ({counted(len(self.variant.env), 'variable')})",
        ]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One build step: ``name``, wall time in seconds, and a one-line ``detail``."""

    name: str
    seconds: float
    detail: str

    def line(self) -> str:
        """``  sync            0.3 s  2 distributions from ...`` (the build's progress line)."""
        return f"  {self.name:<12} {self.seconds:6.1f} s  {self.detail}"


@dataclass(frozen=True)
class BuildResult:
    """A finished build: the live link, the generation it points to, the steps, patch states."""

    link: Path
    generation: Path
    steps: tuple[StepResult, ...]
    patch_states: tuple[tuple[str, str, str], ...] = field(default=())  # (patchset, file, state)
    notes: tuple[str, ...] = field(default=())  # things the user must know, e.g. B04 disagreements


def plan_build(
    project: Project,
    variant: ResolvedVariant,
    python: Interpreter,
    *,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    env_mode: str = "pth",
    link_mode: str | None = None,
) -> BuildPlan:
    """Plan a build of ``variant`` from its committed lock. Pure: reads, never writes.
    ``link_mode``: uv's ``--link-mode`` (:data:`LINK_MODES`; None: uv's default), recorded in the
    generation's ``generation.json``.

    :raises InputError: the lock does not exist (run ``envforge lock`` first).
    :raises envforge.lock.model.LockIntegrityError: the lock is not what ``envforge lock`` wrote (hand-added
        or edited entry, cut short, no ``[tool.envforge]``, a recipe package missing): never a
        smaller environment.
    :raises CheckFailed: a locked package comes from an index the recipe does not allow for it.
    :raises envforge.lock.patchsets.PatchsetsNotApplied: a patchset the variant lists applies to no
        locked version of its distribution (retire it in the recipe, with a reason, or widen it).
    """
    lock = project.lock_path(variant.lock_name)
    if not lock.is_file():
        raise InputError(
            f"no lock for {variant.lock_name}: {lock} does not exist",
            hint=f"run `envforge lock {variant.recipe} --variant {variant.variant}` first",
        )
    locked = guard_lock(lock, variant, find_links)
    require_applicable(
        str(lock),
        variant,
        patchset_refs(project.patchsets_dir, variant.patchsets),
        ((p.name, p.version) for p in locked.packages),
    )  # B41: never a build that skips a fix
    _check_machine(lock, python, variant)
    _check_profile(lock, variant)
    gen = next_generation(generation_root(project, variant.lock_name))
    return BuildPlan(
        variant,
        project.env_path(variant.lock_name),
        gen,
        lock,
        python,
        project.patchsets_dir,
        tuple(find_links),
        offline,
        env_mode,
        _link_mode(link_mode),
    )


def _link_mode(mode: str | None) -> str | None:
    """``mode`` when uv knows it (:data:`LINK_MODES`). :raises InputError: it does not."""
    if mode is not None and mode not in LINK_MODES:
        raise InputError(
            f"unknown link mode {mode!r} (from --link-mode or UV_LINK_MODE)",
            hint=f"one of {', '.join(LINK_MODES)}; `copy` gives every generation its own files, "
            "so an in-place edit never reaches uv's cache",
        )
    return mode


def _check_profile(lock: Path, variant: ResolvedVariant) -> None:
    """Refuse, before anything is written, to install an env profile the lock does not record.

    A generation keeps a copy of its lock, and verify, ``env show`` and ``apply-patches`` hold the
    environment to the profile recorded there (``[tool.envforge] env-profile`` and ``env``). A
    recipe profile edited since the lock, or ``--env-profile`` naming another profile, would give
    a generation that fails verify at once, and verify's fix (build again) would do it again.

    :raises InputError: the profile name or a variable differs; each difference is named.
    """
    tool = read_lock(lock).envforge
    locked_env = tool.get("env", {}) if isinstance(tool.get("env", {}), Mapping) else {}
    diffs = []
    if tool.get("env-profile") != variant.env_profile:
        diffs.append(f"env-profile: locked {tool.get('env-profile')!r}, building {variant.env_profile!r}")
    for name in sorted(set(locked_env) | set(variant.env)):
        if locked_env.get(name) != variant.env.get(name):
            diffs.append(
                f"env.{name}: locked {_shown(name, locked_env.get(name))}, "
                f"building {_shown(name, variant.env.get(name))}"
            )
    if diffs:
        raise InputError(
            f"{lock}: the env profile to install is not the one the lock records:\n"
            + "\n".join(f"  {d}" for d in diffs),
            hint=f"record it first: `envforge lock {variant.recipe} --variant {variant.variant}"
            + (f" --env-profile {variant.env_profile}`" if variant.env_profile else "`")
            + " (or `envforge up`, which locks then builds)",
        )


def _shown(name: str, value: object) -> str:
    if value is None:
        return "(absent)"
    return "<redacted>" if secret_problem(name, str(value)) else repr(value)


def _check_machine(lock: Path, python: Interpreter, variant: ResolvedVariant | None = None) -> None:
    """Refuse, before anything is written, a lock made for another platform or Python (B27).

    :raises InputError: the lock's platform (``[tool.envforge] inputs.platform``) cannot run here
        (another architecture or OS, or a newer glibc than this machine's), or its Python
        (``inputs.python``) is not the interpreter's: named a stale lock where the recipe's
        ``python`` (``variant``) changed since the lock, else a missing interpreter.
    """
    inputs = read_lock(lock).envforge.get("inputs", {})
    plat, want_py = inputs.get("platform"), inputs.get("python")
    if isinstance(plat, str):
        why = platform_problem(plat) or host_problem(plat)
        if why is not None:
            raise InputError(
                f"{lock}: cannot build here: {why}",
                hint="build this lock on a machine of its platform; lock another variant "
                "for this machine (a variant's `platform` key)",
            )
    if isinstance(want_py, str) and not (python.version == want_py or python.version.startswith(want_py + ".")):
        if variant is not None and variant.python != want_py:  # the recipe moved on: the lock is stale
            raise InputError(
                f"{lock}: the lock is for Python {want_py}, the recipe now asks for {variant.python}: "
                "the lock is stale",
                hint=f"relock: `envforge lock {variant.recipe} --variant {variant.variant}` "
                "(with `--check` it shows what changed)",
            )
        raise InputError(
            f"{lock}: the lock is for Python {want_py}, the interpreter found is {python.version} ({python.path})",
            hint=f"install Python {want_py} (pyenv install {want_py}) or pass --python",
        )


def _offline_lock(lock: Path, find_links: Sequence[Path], dest: Path) -> Path:
    """A copy of ``lock`` whose wheel and sdist entries point (``path``) at files in the wheelhouses."""
    doc = tomlkit.parse(lock.read_text())
    files = {p.name: p.resolve() for d in find_links for p in d.iterdir() if p.is_file()}
    for pkg in doc.get("packages", []):
        entries = list(pkg.get("wheels", [])) + ([pkg["sdist"]] if "sdist" in pkg else [])
        for entry in entries:
            fname = unquote(Path(str(entry.get("url") or entry.get("path", ""))).name)
            if fname in files:
                entry.pop("url", None)
                entry["path"] = str(files[fname])
    out = dest / "pylock.offline.toml"
    out.write_text(tomlkit.dumps(doc))
    return out


def _sync(plan: BuildPlan, progress: Progress | None, terminal: Progress | None = None) -> str:
    """``uv pip sync`` of the lock. Nothing is built from source unless the lock records the
    recipe's opt-in (``[tool.envforge] build-from-source``); then the build backends are held to
    the recorded ``build-constraints`` (B28)."""
    python = plan.generation / "bin" / "python"
    lock = plan.lock
    locked = guard_lock(plan.lock, plan.variant, plan.find_links)  # again: the file may have changed since the plan
    tool = locked.envforge
    args = ["pip", "sync", "--no-config", "--preview-features", "pylock", "--python", str(python)]
    if not tool.get("build-from-source"):
        args.append("--no-build")
    if plan.link_mode is not None:
        args += ["--link-mode", plan.link_mode]
    if tool.get("build-constraints") or tool.get("build-from-source"):
        constraints = plan.generation / "build-constraints.txt"
        constraints.write_text("".join(f"{c}\n" for c in build_constraints(tool, locked.packages)))
        args += ["--build-constraints", str(constraints)]
    if plan.offline:
        lock = _offline_lock(plan.lock, plan.find_links, plan.generation)
        args += ["--offline"] + [a for d in plan.find_links for a in ("--find-links", str(d.resolve()))]
    else:
        args += _index_args(tool)
    run_uv([*args, str(lock)], progress=progress, terminal=terminal)
    count = len(locked.packages)
    return f"{counted(count, 'distribution')} from {plan.lock.name}"


def _index_args(tool: Mapping[str, Any]) -> list[str]:
    """``--index NAME=URL`` for each index the lock records: the lock's file URLs already say where
    each file comes from, but uv attaches a private index's credentials (``UV_INDEX_<NAME>_USERNAME``
    / ``_PASSWORD``, which envforge never writes anywhere) only to the indexes it is told about."""
    out: list[str] = []
    for idx in tool.get("indexes", []):
        if isinstance(idx, Mapping) and isinstance(idx.get("name"), str) and isinstance(idx.get("url"), str):
            out += ["--index", f"{idx['name']}={idx['url']}"]
    return out


def _yank_warnings(plan: BuildPlan) -> tuple[str, ...]:
    """A line per locked pin its index marks yanked since the lock was made (PEP 592, field case
    B48: ``pylock.r-default.toml: guardkit 1.1 is yanked on its index (reason: "...")``), and per
    index page that could not be read (not checked) or was answered from the cache
    (:mod:`envforge.lock.yanks`). None offline: an offline build asks no index."""
    if plan.offline:
        return ()
    # lazy: httpx2 (index pages), only for a build that is online
    from envforge.lock.yanks import check_lock, warning_lines
    from envforge.patching.memo import default_cache

    return warning_lines(check_lock(read_lock(plan.lock), default_cache()), plan.lock.name)


class _Background:
    """``fn`` run from now in a daemon thread (a build interrupted before it asks leaves it behind,
    never waits for it); :meth:`result` waits for its value or raises its exception."""

    def __init__(self, fn: Callable[[], tuple[str, ...]]) -> None:
        self._fn = fn
        self._value: tuple[str, ...] = ()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="envforge-yank-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> tuple[str, ...]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _provided(plan: BuildPlan, sp: Path) -> str:
    """Make the base interpreter's ``[provided]`` distributions visible, never installed
    (:mod:`envforge.env.provided` says why a ``.pth`` rather than system site packages)."""
    link = link_base(sp, plan.python.path, plan.variant.provided)
    names = ", ".join(f"{p.name} {p.version}" for p in plan.variant.provided)
    return f"{names} from {', '.join(link.dirs) or 'no site directory'} ({link.pth.name})"


def _patch(plan: BuildPlan, sp: Path) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    if not plan.variant.patchsets:
        return "no patchsets", ()
    sets = patching.load_patchsets(plan.patchsets_dir, plan.variant.patchsets)
    # Only the patched files leave uv's cache: apply replaces them (temp file + os.replace, B09),
    # every other file stays a hardlink (verify names them). Results come from the patch cache.
    report = patching.apply(sp, sets, cache=default_result_cache())
    states = tuple((r.patchset, r.file, r.state) for r in report.results)
    if not report.ok:
        raise CheckFailed(
            "patchsets could not be applied:\n" + "\n".join("  " + e for e in report.errors),
            hint="see `envforge apply-patches --dry-run` on the environment for details",
        )
    counts: dict[str, int] = {}
    for _, _, state in states:
        counts[state] = counts.get(state, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), states


def _profile(plan: BuildPlan, sp: Path) -> str:
    """Install the profile, and the hook that keeps kernel caches in the generation (B49): always."""
    done = envprofile.install(
        sp,
        plan.variant.env_profile,
        plan.variant.env,
        mode=plan.env_mode,
        python=plan.generation / "bin" / "python",
        reviewed=plan.variant.nccl_unknown,
    )
    caches = f"; {len(done.caches)} kernel caches under {plan.generation.name}/" if done.caches else ""
    if not plan.variant.env and plan.variant.env_profile is None:
        return "no env profile" + caches
    hook = ".pth hook" if plan.env_mode == "pth" else "sitecustomize block"
    return f"profile {plan.variant.env_profile or 'default'}: {counted(len(plan.variant.env), 'variable')} ({hook}){caches}"


def _manifest(plan: BuildPlan, sp: Path) -> str:
    """Copy the lock into the generation and write its record, last: the generation is complete."""
    state = StateDir(sp)
    state.path.mkdir(exist_ok=True)
    lock = plan.lock.read_bytes()
    atomic_write(state.lock_copy, lock)
    record = {
        "schema": 1,
        "recipe": plan.variant.recipe,
        "variant": plan.variant.variant,
        "lock": str(plan.lock),
        "lock-digest": "sha256:" + sha256_hex(lock),
        "generation": plan.generation.name,
        "python": plan.python.version,
        "env-profile": plan.variant.env_profile,
        "link-mode": plan.link_mode,
    }
    atomic_write(state.generation_record, (json.dumps(record, indent=2) + "\n").encode())
    return state.generation_record.relative_to(sp).as_posix()


def execute_build(
    plan: BuildPlan,
    *,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    terminal: Progress | None = None,
    flip: bool = True,
) -> BuildResult:
    """Run the plan: venv, sync, patches, env profile, manifest, then flip the link (with
    ``flip=False`` the complete generation is left beside the live one: :func:`make_live` flips it).

    Every line (steps, uv's output) also goes to the build log ``<generation>.log`` beside the
    generation directory. With ``terminal`` (the caller's stderr is a terminal), uv draws its own
    progress bars (bytes, packages) there instead of plain lines (:func:`envforge.uv.run.run_uv`).

    :raises BuildError: a step failed (its name, the cause and its hint); the new generation is
        removed and the live one is untouched. Exit code is the cause's (3 for uv, 1 for drifted
        patches, 2 for bad input).
    """
    root = plan.generation.parent
    with exclusive_generations(root):
        remove_incomplete(root, keep=plan.generation)
        log_path = root / f"{plan.generation.name}.log"
        with open(log_path, "w", encoding="utf-8") as log:
            return _execute(plan, log_path, log, progress, clock, terminal, flip)


def make_live(plan: BuildPlan) -> None:
    """Point ``plan.link`` at ``plan.generation`` (built by :func:`execute_build` with ``flip=False``),
    with one ``os.replace``, under the generations' build lock."""
    relink(plan.link, plan.generation)


def _execute(
    plan: BuildPlan,
    log_path: Path,
    log: TextIO,
    progress: Progress | None,
    clock: Callable[[], float],
    terminal: Progress | None,
    flip: bool = True,
) -> BuildResult:
    """The body of :func:`execute_build`, under its lock; every line also goes to the build log."""

    def say(line: str, *, log_only: bool = False) -> None:
        log.write(line + "\n")
        log.flush()
        if progress is not None and not log_only:
            progress(line)

    say(f"build {plan.link.name} ({plan.generation.name}) from {plan.lock}", log_only=True)
    if plan.generation.exists():  # planned before another build took this number
        raise InputError(f"{plan.generation} already exists: the plan is stale", hint="plan the build again")
    if plan.link.exists() and not plan.link.is_symlink():
        raise InputError(
            f"{plan.link} exists and is not an envforge environment link",
            hint="move it away; envforge manages envs/<recipe>-<variant> as a symlink",
        )
    steps: list[StepResult] = []
    patch_states: tuple[tuple[str, str, str], ...] = ()
    yanks = _Background(lambda: _yank_warnings(plan))  # index pages asked while uv works (issue 44)
    step = "venv"
    try:
        t = clock()
        run_uv(["venv", "--quiet", "--no-config", "--python", str(plan.python.path), str(plan.generation)])
        steps.append(StepResult("venv", clock() - t, f"python {plan.python.version}"))
        say(steps[-1].line())
        sp = site_packages(plan.generation)
        sync_lines: Progress = (lambda line: say(line, log_only=True)) if terminal is not None else say
        provided = (("provided", lambda: _provided(plan, sp)),) if plan.variant.provided else ()
        for step, fn in (
            ("sync", lambda: _sync(plan, sync_lines, terminal)),
            *provided,
            ("patches", lambda: _patch(plan, sp)),
            ("env-profile", lambda: _profile(plan, sp)),
            ("manifest", lambda: _manifest(plan, sp)),
        ):
            t = clock()
            detail = fn()
            if isinstance(detail, tuple):
                detail, patch_states = detail
            steps.append(StepResult(step, clock() - t, detail))
            say(steps[-1].line())
        step = "checks"  # metadata against the lock, yanked files: a signal here is not the manifest step's
        notes = installed_notes(sp, plan.lock, plan.variant.env, plan.variant.cuda) + yanks.result()
        if not flip:
            say(f"{plan.generation.name} complete, not made live yet", log_only=True)
            return BuildResult(plan.link, plan.generation, tuple(steps), patch_states, notes)
        step = "flip"
        plan.link.parent.mkdir(parents=True, exist_ok=True)
        replace_symlink(plan.link, plan.generation)  # the link is either the old or the new generation
    except (EnvforgeError, OSError) as exc:
        if _is_live(plan):  # the flip happened: the generation is complete and live, never removed
            raise
        discard_generation(plan.generation)
        cause = exc if isinstance(exc, EnvforgeError) else _os_error(exc)
        err = BuildError(step, cause, plan.generation, log_path)
        say(f"error: {err}", log_only=True)
        raise err from None
    except BaseException as exc:  # Ctrl-C, SIGTERM, SIGHUP: no half-built generation stays
        if _is_live(plan):  # the signal landed after the flip's os.replace (field case N50)
            note = (
                f"after the flip of {plan.link.name} to {plan.generation.name}: the build was complete "
                f"and {plan.generation.name} is live; nothing was removed; full log: {log_path}"
            )
        else:
            discard_generation(plan.generation, remove=False)  # one rename: the stop is not delayed by a removal
            note = (
                f"during build step '{step}' of {plan.link.name} ({plan.generation.name}); the live "
                f"environment was not changed, the half-built generation was moved out of the listings (the "
                f"next build or `envforge gc` removes its files); full log: {log_path}"
            )
        say(f"stopped {note}", log_only=True)
        exc.add_note(note)
        raise
    say(f"{plan.link.name} -> {plan.generation.name}", log_only=True)
    return BuildResult(plan.link, plan.generation, tuple(steps), patch_states, notes)


def _is_live(plan: BuildPlan) -> bool:
    """Whether ``plan.link`` points at ``plan.generation`` now (read again from the disk): once
    the flip's ``os.replace`` is done, no cleanup may remove the generation it made live."""
    try:
        return (
            plan.link.is_symlink()
            and (plan.link.parent / os.readlink(plan.link)).resolve() == plan.generation.resolve()
        )
    except OSError:
        return False


def _os_error(exc: OSError) -> EnvforgeError:
    err = EnvforgeError(f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}")
    err.exit_code = EXIT_TOOL_FAILED
    return err
