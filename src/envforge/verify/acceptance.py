"""Accepted findings: a reviewed, expiring way to live with a known finding (shared design, decision 11).

A recipe lists entries under ``[[verify.accept]]``::

    [[verify.accept]]
    kind = "file-conflict"              # a verify finding kind (docs/verify.md)
    subject = "build_backend.py"        # the finding's subject, exactly as verify prints it
    reason = "upstream packaging bug: ..."
    expires = 2027-03-31                # a TOML date; the entry holds through that day

The recipe loader validates the entries (key paths and lines). :func:`apply_acceptances` splits a
verify run's findings: a finding an entry in force matches (same kind and subject) becomes an
:class:`~envforge.verify.findings.AcceptedFinding` (still printed and in the JSON, not failing);
an entry past its date accepts nothing and is itself an ``acceptance-expired`` finding; an entry
whose kind belongs to a level that ran but that matches no finding is an ``acceptance-unmatched``
finding, so entries are removed when the problem they accept goes away.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.verify.findings import AcceptedFinding, Finding, level_of

__all__ = ["Acceptance", "acceptances_from", "apply_acceptances"]


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One ``[[verify.accept]]`` entry (``index`` is its position, for messages)."""

    kind: str
    subject: str
    reason: str
    expires: dt.date
    index: int = 0

    @property
    def where(self) -> str:
        """``verify.accept[0]``: where the entry is in the recipe."""
        return f"verify.accept[{self.index}]"


def acceptances_from(recipe: Mapping[str, Any]) -> tuple[Acceptance, ...]:
    """The entries of a validated recipe's ``[[verify.accept]]`` (its parsed TOML data)."""
    entries: Sequence[Mapping[str, Any]] = recipe.get("verify", {}).get("accept", [])
    return tuple(Acceptance(str(e["kind"]), str(e["subject"]), str(e["reason"]), e["expires"], i)
                 for i, e in enumerate(entries))


def _expired(a: Acceptance) -> Finding:
    return Finding("acceptance-expired", f"{a.where}: {a.kind} {a.subject}",
                   f"an acceptance in force (expires {a.expires.isoformat()})", f"expired on {a.expires.isoformat()}",
                   "review the finding again: fix it, or renew the entry with a new expires date and reason")


def _unmatched(a: Acceptance) -> Finding:
    return Finding("acceptance-unmatched", f"{a.where}: {a.kind} {a.subject}",
                   f"a {a.kind} finding with subject '{a.subject}'", "no such finding",
                   "the accepted problem is gone (or the subject is misspelt): remove the entry from the recipe",
                   level=level_of(a.kind))


def apply_acceptances(findings: Iterable[Finding], acceptances: Sequence[Acceptance], *, today: dt.date,
                      levels: Sequence[str]) -> tuple[list[Finding], list[AcceptedFinding]]:
    """Split ``findings`` into (failing, accepted) under ``acceptances`` on ``today``.

    The failing list also gets an ``acceptance-expired`` finding per entry past its date and an
    ``acceptance-unmatched`` one per entry in force, of a level in ``levels``, that matched nothing.
    """
    live = [a for a in acceptances if today <= a.expires]
    failing: list[Finding] = []
    accepted: list[AcceptedFinding] = []
    used: set[int] = set()
    for f in findings:
        a = next((a for a in live if a.kind == f.kind and a.subject == f.subject), None)
        if a is None:
            failing.append(f)
        else:
            used.add(a.index)
            accepted.append(AcceptedFinding(f, a.reason, a.expires.isoformat()))
    failing += [_expired(a) for a in acceptances if today > a.expires]
    failing += [_unmatched(a) for a in live if a.index not in used and level_of(a.kind) in levels]
    return failing, accepted
