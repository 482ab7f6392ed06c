"""What plan, apply and revert report: one state per operation, the files changed, the refusals.

The states (docs/design.md decision 4):

``applied``         the edit is (or, in a plan or dry run, would be) made,
``already-applied`` envforge made it before (manifest) and it still holds: re-running writes nothing,
``upstream-fixed``  the installed release already does it: the patch is obsolete there,
``out-of-range``    the distribution is absent or its version is outside the patchset's specifier,
``drifted``         the anchor is missing or ambiguous: an error, never a silent no-op,
``shadowed``        the interpreter does not import the patched file (a compiled module of the same
                    name beside it, B43; another copy earlier on ``sys.path``): an error, nothing written;

and ``reverted`` (revert only).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from envforge.patching.source import decode_source, lines_of

__all__ = [
    "ALREADY_APPLIED",
    "APPLIED",
    "DRIFTED",
    "FAILED",
    "OUT_OF_RANGE",
    "REVERTED",
    "SHADOWED",
    "STATES",
    "State",
    "UPSTREAM_FIXED",
    "state_of",
    "FileChange",
    "OperationResult",
    "PatchReport",
    "Unmet",
    "unified_diff",
]

#: An operation's state (the module docstring says what each means).
State = Literal["applied", "already-applied", "upstream-fixed", "out-of-range", "drifted", "shadowed", "reverted"]
APPLIED: Final = "applied"
ALREADY_APPLIED: Final = "already-applied"
UPSTREAM_FIXED: Final = "upstream-fixed"
OUT_OF_RANGE: Final = "out-of-range"
DRIFTED: Final = "drifted"
SHADOWED: Final = "shadowed"
REVERTED: Final = "reverted"  # revert only
#: The states plan and apply report, in this order.
STATES: Final[tuple[State, ...]] = (APPLIED, ALREADY_APPLIED, UPSTREAM_FIXED, OUT_OF_RANGE, DRIFTED, SHADOWED)
#: The states that are errors: the patchset is not written and the run exits non-zero.
FAILED: Final[tuple[State, ...]] = (DRIFTED, SHADOWED)
_BY_NAME: Final[dict[str, State]] = {s: s for s in (*STATES, REVERTED)}


def state_of(text: object) -> State:
    """``text`` (read back from a file envforge wrote) as a :data:`State`.

    :raises ValueError: ``text`` is not one of the states.
    """
    if not isinstance(text, str) or text not in _BY_NAME:
        raise ValueError(f"not a patch state: {text!r}")
    return _BY_NAME[text]


@dataclass(frozen=True, slots=True)
class OperationResult:
    """One operation's state. ``file`` is relative to site-packages; ``message`` says what was
    found or done; for ``drifted`` it names patchset, file, anchor, installed version, range and
    the next step."""

    patchset: str
    file: str
    operation: str
    state: State
    message: str


@dataclass(frozen=True, slots=True)
class FileChange:
    """A file a patchset changes: bytes ``before`` and ``after`` (relative ``path``)."""

    patchset: str
    path: str
    before: bytes
    after: bytes


@dataclass(frozen=True, slots=True)
class Unmet:
    """A patchset refused because none of a requirement's alternatives is met."""

    patchset: str
    requirement: str
    message: str


@dataclass(frozen=True, slots=True)
class PatchReport:
    """What plan / apply / revert found and did.

    ``changes`` are the files written (apply), or that would be (plan, dry run); ``written`` says
    which. ``activations`` maps an applied (or already-applied) patchset to the launch flag it
    needs. ``ok`` is false when an operation drifted or is shadowed, or a requirement is unmet.
    """

    site_packages: Path
    results: tuple[OperationResult, ...] = ()
    changes: tuple[FileChange, ...] = ()
    unmet: tuple[Unmet, ...] = ()
    activations: tuple[tuple[str, str], ...] = ()
    written: bool = False
    recovered: tuple[str, ...] = ()  # what :func:`envforge.patching.journal.recover` did first (an interrupted write)

    @property
    def ok(self) -> bool:
        """No operation drifted or is shadowed, and no requirement is unmet."""
        return not self.unmet and all(r.state not in FAILED for r in self.results)

    @property
    def errors(self) -> tuple[str, ...]:
        """Every drift and shadow message and refusal, one string each."""
        return (*(r.message for r in self.results if r.state in FAILED), *(u.message for u in self.unmet))

    def diff(self, prefixes: dict[str, str] | None = None) -> str:
        """The unified diff of ``changes`` (``a/``/``b/`` paths; ``prefixes`` per patchset id)."""
        return "".join(unified_diff(c, (prefixes or {}).get(c.patchset, "")) for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (bytes left out; ``diff`` included)."""
        return {
            "site-packages": str(self.site_packages),
            "written": self.written,
            "ok": self.ok,
            "results": [
                {
                    "patchset": r.patchset,
                    "file": r.file,
                    "operation": r.operation,
                    "state": r.state,
                    "message": r.message,
                }
                for r in self.results
            ],
            "unmet": [{"patchset": u.patchset, "requirement": u.requirement, "message": u.message} for u in self.unmet],
            "activations": [{"patchset": p, "flag": f} for p, f in self.activations],
            "files": [c.path for c in self.changes],
            "recovered": list(self.recovered),
        }


def unified_diff(change: FileChange, prefix: str = "") -> str:
    """``difflib`` unified diff of one change, paths ``a/<prefix><path>`` and ``b/<prefix><path>``;
    the bytes read in the encoding each declares (PEP 263)."""
    before = lines_of(decode_source(change.before))
    after = lines_of(decode_source(change.after))
    name = f"{prefix}{change.path}"
    return "".join(difflib.unified_diff(before, after, f"a/{name}", f"b/{name}"))
