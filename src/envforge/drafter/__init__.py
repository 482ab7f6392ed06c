"""EAGLE-3 drafters through huggingface_hub: fetch, inspect, compare, check (docs/design.md, 7).

Data flow::

    REPO@SHA ── hub.resolve_revision ──▶ HubRevision ── hub.fetch ──▶ DIR (+ envforge-drafter.json)
    DIR | REPO@SHA ── sources.open_drafter ──▶ Drafter (config + safetensors headers, no weights)
    Drafter.config ── architecture.model_classes ──▶ ModelClass per engine (chosen by architectures)
    Drafter ── model.eagle3_issues / model.target_issues ──▶ DrafterIssue...
    Drafter × Drafter ── compare.compare_drafters (reads only d2t) ──▶ DrafterComparison

Public entry points: :func:`fetch_drafter`, :func:`inspect_drafter`, :func:`compare`,
:func:`check_target` and, for ``envforge verify --level drafter``::

    drafter_checks(settings: Mapping[str, Any], *, cache_dir: Path | None = None,
                   endpoint: str | None = None) -> tuple[DrafterIssue, ...]

``settings`` is the recipe's ``[verify.drafter]`` table: ``repo`` and ``revision`` (a 40-hex commit
sha; required), ``target-config`` (a ``config.json`` path, a directory, or ``owner/name@sha``),
``compare`` (a list of other drafters, ``owner/name@sha`` or paths, that must map the draft
vocabulary identically), ``allow-pickle`` (bool). Checks run remotely (headers and configs only,
no weights downloaded); ``cache_dir`` is where the small JSON configs are cached (huggingface_hub's
cache when ``None``). Every finding is a :class:`DrafterIssue` (kind, subject, expected, actual,
fix); an error that stops one check (repo not found, revision not pinned) becomes one issue of
kind ``drafter-error`` and the other checks still run. Tests use a local hub-compatible server
(``tests/support/hub_server.py``); the real hub is never contacted by the test suite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.drafter.architecture import ModelClass, model_classes
from envforge.drafter.auxlayers import AuxVerdict, aux_verdict
from envforge.drafter.compare import (
    ConfigDiff,
    DrafterComparison,
    TensorDiff,
    VocabComparison,
    compare_drafters,
    comparison_issues,
)
from envforge.drafter.hub import (
    FetchResult,
    HubRevision,
    Progress,
    fetch,
    offline_mode,
    recheck_offline,
    resolve_revision,
)
from envforge.drafter.engines import ENGINE_FACTS, Capture, EngineFacts, facts_for
from envforge.drafter.layout import ENGINES
from envforge.drafter.model import Drafter, DrafterIssue, TensorInfo, eagle3_issues, target_issues
from envforge.drafter.sources import byte_reader, open_drafter, open_local, read_config
from envforge.core.errors import EnvforgeError, InputError

__all__ = [
    "AuxVerdict",
    "Capture",
    "CheckReport",
    "ConfigDiff",
    "Drafter",
    "DrafterComparison",
    "DrafterIssue",
    "ENGINES",
    "ENGINE_FACTS",
    "EngineFacts",
    "FetchResult",
    "HubRevision",
    "InspectReport",
    "ModelClass",
    "TensorDiff",
    "TensorInfo",
    "VocabComparison",
    "check_target",
    "compare",
    "default_dest",
    "drafter_checks",
    "engine_facts",
    "facts_for",
    "fetch_drafter",
    "inspect_drafter",
    "resolve_revision",
]


@dataclass(frozen=True, slots=True)
class InspectReport:
    """A drafter, its EAGLE-3 findings (empty when consistent), the model class each engine
    builds for its ``config.architectures`` (:func:`architecture.model_classes`: SGLang 0.5.9, vLLM
    0.32.0) and what each engine version reads as its aux layer ids (``aux``: no target, so no
    layers and nothing judged; ``drafter check`` judges them)."""

    drafter: Drafter
    issues: tuple[DrafterIssue, ...]
    classes: tuple[ModelClass, ...]
    aux: AuxVerdict | None = None

    @property
    def loads(self) -> dict[str, bool]:
        """Per engine of :data:`ENGINES`: does the drafter load as trained (no issue names that engine)."""
        return {e: not any(e in i.engines for i in self.issues) for e in ENGINES}


@dataclass(frozen=True, slots=True)
class CheckReport:
    """A drafter checked against a target config: its own EAGLE-3 findings plus compatibility ones,
    and ``aux``: the layers each engine version captures for it on that target and the problems
    of the engines judged (:func:`envforge.drafter.auxlayers.aux_verdict`)."""

    drafter: Drafter
    target: str
    issues: tuple[DrafterIssue, ...]
    aux: AuxVerdict | None = None


def engine_facts(specs: Sequence[str]) -> tuple[EngineFacts, ...]:
    """The engine versions ``specs`` name (``sglang==0.5.9``, ``vllm``: the newest envforge has);
    every one envforge has facts for when ``specs`` is empty.

    :raises InputError: a spec names an engine or version envforge has no facts for (the message
        lists the ones it has).
    """
    if not specs:
        return ENGINE_FACTS
    out = []
    for spec in specs:
        engine, _, version = spec.partition("==")
        found = facts_for(engine.strip().lower(), version.strip() or None)
        if found is None:
            known = ", ".join(f"{f.engine}=={f.version}" for f in ENGINE_FACTS)
            raise InputError(
                f"--engine {spec}: envforge has no facts for this engine version",
                hint=f"one of {known}; the facts are read from each version's code (docs/drafters.md, Engine versions)",
            )
        out.append(found)
    return tuple(out)


def aux_issues(d: Drafter, verdict: AuxVerdict) -> tuple[DrafterIssue, ...]:
    """``verdict``'s problems as findings about ``d`` (one per engine version)."""
    return tuple(
        DrafterIssue(p.kind, f"{d.source}: auxiliary layers", p.expected, p.actual, p.fix, (p.engine,))
        for p in verdict.problems
    )


def default_dest(root: Path, rev: HubRevision) -> Path:
    """Where a fetch goes without ``--dest``: ``<root>/<owner>--<name>/<sha>``."""
    return root / rev.repo.replace("/", "--") / rev.sha


def fetch_drafter(
    repo: str,
    revision: str,
    dest: Path | None,
    *,
    root: Path,
    allow_unpinned: bool = False,
    allow_pickle: bool = False,
    endpoint: str | None = None,
    progress: Progress | None = None,
) -> FetchResult:
    """Resolve, select and download a drafter into ``dest`` (``None``: :func:`default_dest` under
    ``root``). See :func:`hub.resolve_revision` and :func:`hub.fetch` for the refusals
    (:class:`InputError`) and integrity failures (:class:`CheckFailed`). In huggingface_hub's offline
    mode (``HF_HUB_OFFLINE=1``) nothing is downloaded: :func:`hub.recheck_offline` re-hashes the
    copy an earlier fetch recorded in ``dest`` (B32)."""
    if offline_mode():
        return recheck_offline(repo, revision, dest or root / repo.replace("/", "--") / revision)
    rev = resolve_revision(repo, revision, allow_unpinned=allow_unpinned, allow_pickle=allow_pickle, endpoint=endpoint)
    return fetch(rev, dest or default_dest(root, rev), endpoint=endpoint, progress=progress)


def inspect_drafter(
    spec: str,
    *,
    allow_unpinned: bool = False,
    allow_pickle: bool = False,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
) -> InspectReport:
    """Open ``spec`` (path or ``REPO@SHA``, remote reads headers only) and run the EAGLE-3 checks."""
    d = open_drafter(
        spec, allow_unpinned=allow_unpinned, allow_pickle=allow_pickle, endpoint=endpoint, cache_dir=cache_dir
    )
    return InspectReport(d, eagle3_issues(d), model_classes(d.config), aux_verdict(d.config, None))


def compare(
    spec_a: str,
    spec_b: str,
    *,
    allow_unpinned: bool = False,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
) -> DrafterComparison:
    """Compare two drafters (paths or ``REPO@SHA``); remote ones transfer headers and ``d2t`` only."""
    kw: dict[str, Any] = {"allow_unpinned": allow_unpinned, "endpoint": endpoint, "cache_dir": cache_dir}
    a, b = open_drafter(spec_a, **kw), open_drafter(spec_b, **kw)
    return compare_drafters(a, b, byte_reader(a, endpoint=endpoint), byte_reader(b, endpoint=endpoint))


def check_target(
    spec: str,
    target: str,
    *,
    allow_unpinned: bool = False,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
    engines: Sequence[EngineFacts] = ENGINE_FACTS,
    trained: Sequence[int] | None = None,
) -> CheckReport:
    """Check drafter ``spec`` against the target model config ``target`` (file, dir or ``REPO@SHA``);
    the auxiliary layers of ``engines`` are judged (``trained``: the layers it was trained on, see
    :mod:`envforge.drafter.auxlayers`)."""
    d = open_drafter(spec, allow_unpinned=allow_unpinned, endpoint=endpoint, cache_dir=cache_dir)
    config = read_config(target, endpoint=endpoint, cache_dir=cache_dir)
    aux = aux_verdict(d.config, config, engines=engines, trained=trained)
    return CheckReport(d, target, eagle3_issues(d) + target_issues(d, config, target) + aux_issues(d, aux), aux)


def _error_issue(subject: str, exc: EnvforgeError) -> DrafterIssue:
    return DrafterIssue(
        "drafter-error", subject, "a readable, pinned drafter", exc.message, exc.hint or "see the message"
    )


def drafter_checks(
    settings: Mapping[str, Any],
    *,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    local_root: Path | None = None,
    engines: Sequence[EngineFacts] = ENGINE_FACTS,
    patched_for: Callable[[str], Mapping[str, str]] | None = None,
) -> tuple[DrafterIssue, ...]:
    """Run the recipe's ``[verify.drafter]`` checks remotely; every finding at once (see module doc).

    In huggingface_hub's offline mode (``HF_HUB_OFFLINE=1``, B32) the drafter is checked from the
    copy ``envforge drafter fetch`` recorded under ``local_root`` (``<owner>--<name>/<sha>``, the
    fetch's default destination) after re-hashing it against its record; without one, the
    ``drafter-error`` says offline mode.

    With ``target-config``, the auxiliary layers of ``engines`` (the engine versions the lock
    installs) are judged against ``trained-aux-layers`` when the table has it (a list of layer
    numbers), else against what the newest engines make of the file. ``patched_for``: called with the
    target's architecture, returns the delegations the installed code adds (``patched`` of
    :meth:`envforge.drafter.engines.EngineFacts.hook`; the target config is read once, here).
    """
    repo, revision = str(settings["repo"]), str(settings["revision"])
    spec = f"{repo}@{revision}"
    try:
        if offline_mode() and local_root is not None:
            dest = local_root / repo.replace("/", "--") / revision
            recheck_offline(repo, revision, dest)
            d = open_local(dest)
        else:
            d = open_drafter(
                spec, allow_pickle=bool(settings.get("allow-pickle", False)), endpoint=endpoint, cache_dir=cache_dir
            )
    except EnvforgeError as exc:
        return (_error_issue(spec, exc),)
    issues = list(eagle3_issues(d))
    if target := settings.get("target-config"):
        try:
            target_config = read_config(str(target), endpoint=endpoint, cache_dir=cache_dir)
            issues += target_issues(d, target_config, str(target))
            trained = settings.get("trained-aux-layers") or None
            archs = target_config.get("architectures")
            patched = (
                patched_for(archs[0])
                if patched_for is not None and isinstance(archs, list) and archs and isinstance(archs[0], str)
                else None
            )
            issues += aux_issues(
                d, aux_verdict(d.config, target_config, engines=engines, patched=patched, trained=trained)
            )
        except EnvforgeError as exc:
            issues.append(_error_issue(str(target), exc))
    for other in settings.get("compare", []):
        try:
            ref = open_drafter(str(other), endpoint=endpoint, cache_dir=cache_dir)
            c = compare_drafters(d, ref, byte_reader(d, endpoint=endpoint), byte_reader(ref, endpoint=endpoint))
            issues += comparison_issues(c)
        except EnvforgeError as exc:
            issues.append(_error_issue(str(other), exc))
    return tuple(issues)
