"""Findings and the verify report: what ``envforge verify`` found, as values.

A :class:`Finding` is one way the environment is not what its lock, patchsets, env profile or recipe
target say (``kind``, ``subject``, ``expected``, ``actual``, ``fix``). A :class:`Check` records that a
check ran, was skipped (with the reason) or produced findings, so a clean report says what it proved.
:class:`VerifyReport` carries every finding at once, the environment fingerprint
(:mod:`envforge.env.fingerprint`) and the GPU measurements; its :attr:`VerifyReport.exit_code` is 0 when
clean and 1 when there are findings (docs/design.md, decision 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from envforge.core.errors import EXIT_CHECK_FAILED, EXIT_OK
from envforge.core.kinds import KINDS, LEVELS, Level, check_levels, is_known_kind, level_of
from envforge.env.fingerprint import Fingerprint

__all__ = [
    "KINDS",
    "LEVELS",
    "AcceptedFinding",
    "Check",
    "CheckStatus",
    "Finding",
    "Level",
    "VerifyReport",
    "check_levels",
    "is_known_kind",
    "level_of",
]


#: What became of a check: it ran clean, it produced findings, or it was skipped (with the reason).
CheckStatus = Literal["ok", "findings", "skipped"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One discrepancy. ``kind`` is a known kind (:func:`envforge.core.kinds.is_known_kind`);
    ``level`` the verify level that found it. ``from_recipe``: the finding is about the recipe itself
    (e.g. an ``[env.*]`` variable NCCL would misread), so every build from the same lock has it again
    and ``envforge up`` does not rebuild for it; not part of the JSON (:meth:`as_dict`)."""

    kind: str
    subject: str
    expected: str
    actual: str
    fix: str
    level: Level = "static"
    from_recipe: bool = False

    def as_dict(self) -> dict[str, str]:
        """Keys in a fixed order (JSON-able)."""
        return {
            "kind": self.kind,
            "level": self.level,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True)
class AcceptedFinding:
    """A finding a recipe ``[[verify.accept]]`` entry accepts: still reported, does not fail.
    ``expires`` is the entry's date as ISO text (``2027-03-31``)."""

    finding: Finding
    reason: str
    expires: str

    def as_dict(self) -> dict[str, str]:
        """The finding's keys, then ``reason`` and ``expires``."""
        return {**self.finding.as_dict(), "reason": self.reason, "expires": self.expires}


@dataclass(frozen=True, slots=True)
class Check:
    """A check that ran (``status`` ``ok`` / ``findings``) or was ``skipped`` (``detail`` says why)."""

    name: str
    level: Level
    status: CheckStatus
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        """Keys in a fixed order (JSON-able)."""
        return {"name": self.name, "level": self.level, "status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Everything one verify run found.

    ``measurements`` holds the GPU level's figures (``allreduce``: per profile and size, latency in
    µs), ``notes`` informational lines (a B04 variant confirmed by file hash, a target taken from the
    machine). ``findings`` fail the run; ``accepted`` are findings a recipe entry accepts (reported,
    not failing). ``elapsed_s`` is the wall time of the run in seconds as measured by the caller.
    """

    environment: str
    levels: tuple[str, ...]
    fingerprint: Fingerprint
    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    notes: tuple[str, ...] = ()
    measurements: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)
    elapsed_s: float | None = None
    accepted: tuple[AcceptedFinding, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings."""
        return EXIT_OK if self.clean else EXIT_CHECK_FAILED

    def kinds(self) -> list[str]:
        """The finding kinds present, sorted (handy in tests and summaries)."""
        return sorted({f.kind for f in self.findings})
