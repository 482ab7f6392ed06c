"""Accepted findings: a reviewed, expiring way to live with a known finding (shared design, decision 11).

A recipe lists entries under ``[[verify.accept]]``::

    [[verify.accept]]
    kind = "file-conflict"              # a verify finding kind (docs/verify.md)
    subject = "build_backend.py"        # the finding's subject, exactly as verify prints it
    reason = "upstream packaging bug: ..."
    expires = 2027-03-31                # a TOML date; the entry holds through that day
    between = ["flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"]  # optional, file-conflict only
    # actual = "..."                    # optional, any kind: the finding's actual text, exactly
    # variants = ["cu128"]              # optional: only environments of these variants

The recipe loader validates the entries (key paths and lines). :func:`apply_acceptances` splits a
verify run's findings: a finding an entry in force matches (same kind and subject, and the same
claimants / actual text where the entry pins them) becomes an
:class:`~envforge.verify.findings.AcceptedFinding` (still printed and in the JSON, not failing);
an entry past its date accepts nothing and is itself an ``acceptance-expired`` finding; an entry
whose kind belongs to a level that ran but that matches no finding is an ``acceptance-unmatched``
finding, so entries are removed when the problem they accept goes away. An entry that pins
``between`` or ``actual`` and whose kind and subject match a finding that differs there accepts
nothing: the finding fails, and the entry's ``acceptance-unmatched`` finding says what changed
("accepted only between A and B; now between A and C"). An entry without either matches by kind
and subject only (kept for old recipes; docs/verify.md recommends pinning).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.core.kinds import level_of
from envforge.verify.findings import AcceptedFinding, Finding
from envforge.verify.records import conflict_claimants

__all__ = ["Acceptance", "acceptances_from", "apply_acceptances"]


@dataclass(frozen=True, slots=True)
class Acceptance:
    """One ``[[verify.accept]]`` entry (``index`` is its position, for messages).

    ``between`` (the ``"<name> <version>"`` claimants of a ``file-conflict``, any order) and
    ``actual`` (a finding's actual text, exactly) pin the finding; None: not pinned."""

    kind: str
    subject: str
    reason: str
    expires: dt.date
    index: int = 0
    between: tuple[str, ...] | None = None
    actual: str | None = None

    def mismatch(self, f: Finding) -> str | None:
        """Why ``f`` (same kind and subject) is not the finding this entry pins, or None when it is."""
        if self.between is not None:
            now = conflict_claimants(f.actual)
            if now != tuple(sorted(self.between)):
                return f"accepted only between {_and(sorted(self.between))}; now between {_and(now) or f.actual}"
        if self.actual is not None and f.actual != self.actual:
            return f"accepted only with actual '{self.actual}'; now '{f.actual}'"
        return None

    @property
    def where(self) -> str:
        """``verify.accept[0]``: where the entry is in the recipe."""
        return f"verify.accept[{self.index}]"


def acceptances_from(recipe: Mapping[str, Any], variant: str | None = None) -> tuple[Acceptance, ...]:
    """The entries of a validated recipe's ``[[verify.accept]]`` (its parsed TOML data) in force for
    an environment of ``variant``: an entry with ``variants`` holds only for those (None: the
    variant is unknown, only entries without ``variants``)."""
    entries: Sequence[Mapping[str, Any]] = recipe.get("verify", {}).get("accept", [])
    return tuple(
        Acceptance(
            str(e["kind"]),
            str(e["subject"]),
            str(e["reason"]),
            e["expires"],
            i,
            tuple(str(b) for b in e["between"]) if "between" in e else None,
            str(e["actual"]) if "actual" in e else None,
        )
        for i, e in enumerate(entries)
        if "variants" not in e or variant in e["variants"]
    )


def _and(items: Sequence[str]) -> str:
    return " and ".join([", ".join(items[:-1]), items[-1]]) if len(items) > 1 else "".join(items)


def _expired(a: Acceptance) -> Finding:
    return Finding(
        "acceptance-expired",
        f"{a.where}: {a.kind} {a.subject}",
        f"an acceptance in force (expires {a.expires.isoformat()})",
        f"expired on {a.expires.isoformat()}",
        "review the finding again: fix it, or renew the entry with a new expires date and reason",
    )


def _unmatched(a: Acceptance, why: str | None) -> Finding:
    if why is not None:
        return Finding(
            "acceptance-unmatched",
            f"{a.where}: {a.kind} {a.subject}",
            f"the {a.kind} finding with subject '{a.subject}' this entry pins",
            why,
            "this is not the finding that was reviewed: review it, then fix it or update the entry",
            level=level_of(a.kind),
        )
    return Finding(
        "acceptance-unmatched",
        f"{a.where}: {a.kind} {a.subject}",
        f"a {a.kind} finding with subject '{a.subject}'",
        "no such finding",
        "the accepted problem is gone (or the subject is misspelt): remove the entry from the recipe",
        level=level_of(a.kind),
    )


def apply_acceptances(
    findings: Iterable[Finding], acceptances: Sequence[Acceptance], *, today: dt.date, levels: Sequence[str]
) -> tuple[list[Finding], list[AcceptedFinding]]:
    """Split ``findings`` into (failing, accepted) under ``acceptances`` on ``today``.

    The failing list also gets an ``acceptance-expired`` finding per entry past its date and an
    ``acceptance-unmatched`` one per entry in force, of a level in ``levels``, that matched nothing.
    """
    live = [a for a in acceptances if today <= a.expires]
    failing: list[Finding] = []
    accepted: list[AcceptedFinding] = []
    used: set[int] = set()
    why: dict[int, str] = {}  # entry index -> why a finding of its kind and subject is not the pinned one
    for f in findings:
        same = [a for a in live if a.kind == f.kind and a.subject == f.subject]
        a = next((a for a in same if a.mismatch(f) is None), None)
        if a is None:
            for b in same:
                why.setdefault(b.index, str(b.mismatch(f)))
            failing.append(f)
        else:
            used.add(a.index)
            accepted.append(AcceptedFinding(f, a.reason, a.expires.isoformat()))
    failing += [_expired(a) for a in acceptances if today > a.expires]
    failing += [_unmatched(a, why.get(a.index)) for a in live if a.index not in used and level_of(a.kind) in levels]
    return failing, accepted
