"""The main job, ``envforge up``: lock check, build (or reuse), verify, as one core function.

Like ``uv run`` and ``pixi run``, ``up`` locks on demand: a variant with no lock yet is locked
first (:func:`lock_if_missing`, saying so); a stale lock still stops the job with its reasons,
never re-locked behind the user's back (the change is for review: ``envforge lock``).

A generation ``up`` builds is verified before it is made live; one that fails verify is *held
back* (:func:`envforge.env.generations.hold_back`): the link keeps its generation, and the next
``up`` from the same lock stops with the recorded cause instead of building the same failure again
(a file edited in place through uv's hardlink is in uv's cache too: every build reinstalls it).
``--rebuild`` tries again.

The CLI parses, calls :func:`run_main_job` and renders the :class:`MainJobResult`; nothing of the
sequence lives in the CLI, so ``envforge up --json`` carries the same result as the text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envforge.core.errors import EXIT_CHECK_FAILED
from envforge.core.kinds import rebuild_repairs
from envforge.core.probe import ProbeError
from envforge.env import build
from envforge.env.generations import built_from, current_generation, describe_generation, held_back, hold_back, relink
from envforge.env.layout import Environment
from envforge.lock.check import LockCheck, check_lock
from envforge.lock.write import LockResult, lock_variant, patchset_refs
from envforge.recipe.model import ResolvedVariant
from envforge.recipe.project import Project
from envforge.verify import VerifyOptions, verify
from envforge.verify.findings import Finding, VerifyReport

__all__ = ["MainJobResult", "lock_if_missing", "repairable", "run_main_job"]


def repairable(finding: Finding) -> bool:
    """A finding a fresh build from the same lock repairs: its kind's registry entry says so
    (:attr:`envforge.core.kinds.Kind.rebuild_repairs`: files missing, edited, installed or removed
    since the build) and it is not about the recipe itself (:attr:`Finding.from_recipe`: an
    ``env-profile`` finding on a variable NCCL or the process would misread comes back in every
    build, so rebuilding for it would only pile up generations)."""
    return rebuild_repairs(finding.kind) and not finding.from_recipe


@dataclass(frozen=True)
class MainJobResult:
    """What ``up`` did: the lock check; the build (None when the live generation was reused or the
    lock is stale); the reused generation; the verify report (None when the lock is stale);
    ``damaged``: the failing report of a live generation built from this lock whose files were
    damaged since (then ``build`` is the fresh generation that replaced it); ``locked``: the lock
    this job wrote because there was none (:func:`lock_if_missing`), else None. ``held``: the
    generation this job built that failed verify and was not made live (``report`` is its report);
    ``stopped``: why nothing was built (a generation from this lock already failed verify), else None."""

    lock: LockCheck
    build: build.BuildResult | None
    reused: Path | None
    report: VerifyReport | None
    damaged: VerifyReport | None = None
    locked: LockResult | None = None
    held: Path | None = None
    stopped: str | None = None

    @property
    def exit_code(self) -> int:
        """1 for a stale lock, a held-back generation or a stop, else verify's (0 clean, 1 findings)."""
        if not self.lock.fresh or self.report is None or self.held is not None or self.stopped is not None:
            return EXIT_CHECK_FAILED
        return int(self.report.exit_code)


def lock_if_missing(
    project: Project,
    variant: ResolvedVariant,
    *,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    progress: Callable[[str], None] | None = None,
) -> LockResult | None:
    """Lock ``variant`` (:func:`envforge.lock.write.lock_variant`, as ``envforge lock RECIPE
    --variant V`` does) when ``lockfiles/pylock.<recipe>-<variant>.toml`` does not exist; None when
    it exists, fresh or stale (a stale one is :func:`run_main_job`'s to report, not to overwrite).
    ``progress`` gets one line before the lock (``[1/3] lock NAME: none yet, locking now ...``)
    and uv's progress.

    :raises LockError: unsatisfiable. :raises UvError: uv failed, e.g. an unreachable index.
    :raises CheckFailed: a package from an index not allowed for it.
    """
    path = project.lock_path(variant.lock_name)
    if path.is_file():
        return None
    say = progress or (lambda _line: None)
    say(
        f"[1/3] lock {path.name}: none yet, locking now (as `envforge lock {variant.recipe} --variant "
        f"{variant.variant}`; commit {path.parent.name}/{path.name})"
    )
    refs = patchset_refs(project.patchsets_dir, variant.patchsets)
    return lock_variant(variant, refs, path, find_links=find_links, offline=offline, progress=progress)


def run_main_job(
    project: Project,
    plan: build.BuildPlan,
    options: VerifyOptions,
    *,
    rebuild: bool = False,
    progress: Callable[[str], None] | None = None,
    terminal: Callable[[str], None] | None = None,
    locked: LockResult | None = None,
) -> MainJobResult:
    """Check the lock against the recipe and patchsets; build a generation unless the live one was
    built from these exact lock bytes (or ``rebuild``); verify it. When a reused live generation
    fails verify with findings a rebuild repairs (:func:`repairable`: files missing, edited,
    installed or removed since), a fresh generation is built from the same lock and verified;
    the damaged one stays for ``envforge rollback``.

    A stale lock stops the job before anything is built (exit 1, with the changed keys).
    ``progress`` receives one line as each stage starts (``[1/3] lock ...``) and the build's progress.
    ``locked``: the lock :func:`lock_if_missing` just wrote (stage 1 then says how many packages).

    :raises BuildError: a build step failed (the live environment is unchanged).
    :raises EnvforgeError: bad recipe, patchsets or lock.
    """
    say = progress or (lambda _line: None)
    refs = patchset_refs(project.patchsets_dir, plan.variant.patchsets)
    check = check_lock(plan.variant, refs, plan.lock, plan.find_links)
    if locked is not None and check.fresh:
        count = f"{locked.packages} package{'' if locked.packages == 1 else 's'}"
        say(f"  {plan.lock.parent.name}/{plan.lock.name}: {count}, locked now")
    else:
        say(f"[1/3] lock {plan.lock.name}: {'up to date' if check.fresh else 'stale'}")
    if not check.fresh:
        return MainJobResult(check, None, None, None, locked=locked)
    reused = None if rebuild else current_generation(plan.link, plan.lock, plan.variant)
    failed = None if rebuild else held_back(plan.link, plan.lock)
    damaged: VerifyReport | None = None
    if reused is not None:
        say(
            f"[2/3] build {plan.link.name}: reusing {reused.name} (built from this lock; --rebuild to force a new "
            f"one); verifying before trusting it"
        )
        say(f"[3/3] verify {plan.link.name}")
        try:
            damaged = verify(Environment(plan.link), project, options)
        except ProbeError as exc:  # its interpreter is gone or cannot start: damage a rebuild repairs
            why = f"cannot run its interpreter ({exc.message})"
        else:
            damage = sorted({f.kind for f in damaged.findings if repairable(f)})
            if not damage:
                return MainJobResult(check, None, reused, damaged, locked=locked)
            forced = describe_generation(reused)
            failed_then = forced.get("verify-failed") if isinstance(forced.get("made-live"), Mapping) else None
            if isinstance(failed_then, Mapping) and set(damage) <= set(failed_then.get("kinds", [])):
                why = (
                    f"{reused.name} failed verify when it was built ({', '.join(failed_then.get('kinds', []))}) "
                    f"and was made live with `envforge rollback --to`; it fails the same way now, not because its "
                    f"files changed: {failed_then.get('cause', '')}"
                )
                say(f"  stopped: {why}")
                return MainJobResult(check, None, reused, damaged, locked=locked, stopped=why)
            why = f"fails verify ({', '.join(damage)}): its files changed since it was built"
        if failed is not None:
            return _stop(check, plan, failed, say, reused, damaged, locked)
        say(
            f"  damaged: {reused.name} {why}; rebuilding as {plan.generation.name} from the same lock "
            f"({reused.name} stays for rollback)"
        )
        return _build_and_verify(project, plan, options, check, say, progress, terminal, locked, damaged, " again")
    if failed is not None:
        return _stop(check, plan, failed, say, None, None, locked)
    earlier = None if rebuild else built_from(plan.link, plan.lock)
    if earlier is not None:  # after a rollback: the generation of this lock is there already (issue 44)
        say(
            f"[2/3] build {plan.link.name}: {earlier.name} was built from this lock (--rebuild to build a new one); "
            "verifying it before making it live again"
        )
        say(f"[3/3] verify {plan.link.name} ({earlier.name})")
        again = verify(Environment(earlier), project, options)
        if again.clean:
            relink(plan.link, earlier, why=" (made live again by `envforge up`)")
            say(f"  {plan.link.parent.name}/{plan.link.name} -> {earlier.name}")
            return MainJobResult(check, None, earlier, replace(again, environment=str(plan.link)), locked=locked)
        say(f"  {earlier.name} fails verify ({', '.join(again.kinds())}): building a new generation instead")
    say(f"[2/3] build {plan.link.name} ({plan.generation.name})")
    return _build_and_verify(project, plan, options, check, say, progress, terminal, locked, None, "")


def _build_and_verify(
    project: Project,
    plan: build.BuildPlan,
    options: VerifyOptions,
    check: LockCheck,
    say: Callable[[str], None],
    progress: Callable[[str], None] | None,
    terminal: Callable[[str], None] | None,
    locked: LockResult | None,
    damaged: VerifyReport | None,
    again: str,
) -> MainJobResult:
    """Build ``plan``'s generation, verify it before it is live, and flip only a clean one."""
    result = build.execute_build(plan, progress=progress, terminal=terminal, flip=False)
    gen = result.generation
    say(f"[3/3] verify {plan.link.name}{again} ({gen.name}, before it is made live)")
    report = verify(Environment(gen), project, options)
    if report.clean:
        build.make_live(plan)
        say(f"  {plan.link.parent.name}/{plan.link.name} -> {gen.name}")
        return MainJobResult(check, result, None, replace(report, environment=str(plan.link)), damaged, locked)
    cause = _cause(report, plan)
    hold_back(gen, report.kinds(), cause)
    live = f"stays at {plan.link.resolve().name}" if plan.link.is_symlink() else "has no live generation yet"
    say(
        f"  {gen.name} fails verify: not made live; {plan.link.parent.name}/{plan.link.name} {live} "
        f"(to use it anyway: `envforge rollback {plan.link.name} --to {gen.name}`)"
    )
    return MainJobResult(check, result, None, report, damaged, locked, held=gen, stopped=None)


def _cause(report: VerifyReport, plan: build.BuildPlan) -> str:
    """Why a generation built just now fails verify, and what to do; names ``uv cache clean DIST``
    when files are not their RECORD's (uv installed them from a cache an in-place edit changed)."""
    again = f"`envforge up {plan.variant.recipe} --variant {plan.variant.variant} --rebuild`"
    cached = sorted({f.subject.split(" ", 1)[0] for f in report.findings if f.kind == "tampered"})
    if cached:
        return (
            f"installed files are not their RECORD's bytes ({', '.join(cached)}) in a generation built just now: "
            f"uv installed them from its cache, which an in-place edit through a hardlink changed; run "
            f"`uv cache clean {' '.join(cached)}`, then {again} (--link-mode copy keeps edits out of uv's cache)"
        )
    return f"a generation built just now fails verify ({', '.join(report.kinds())}): fix what the findings say, then {again}"


def _stop(
    check: LockCheck,
    plan: build.BuildPlan,
    failed: tuple[Path, Mapping[str, Any]],
    say: Callable[[str], None],
    reused: Path | None,
    damaged: VerifyReport | None,
    locked: LockResult | None,
) -> MainJobResult:
    """Nothing built: ``failed`` (a generation from this lock, held back) would be built again."""
    gen, record = failed
    why = (
        f"{gen.name}, built from this lock, failed verify ({', '.join(record.get('kinds', []))}) and was not "
        f"made live; a build from the same lock fails the same way: {record.get('cause', '')}"
    )
    say(f"  stopped: {why}")
    return MainJobResult(check, None, reused, damaged, locked=locked, stopped=why)
