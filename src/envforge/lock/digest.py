"""The ``packages-digest`` of a lock: a canonical sha256 of its ``[[packages]]`` tables.

It tells an accident (a hand edit, a cut file) from the lock ``envforge lock`` wrote; anyone can
recompute it, so it is no defence against an adversary (docs/guarantees.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["packages_digest"]


def packages_digest(packages: Sequence[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of the ``[[packages]]`` tables in a canonical form, independent of TOML layout.

    Canonical form: the array as :mod:`tomllib` reads it, serialised as JSON with keys sorted, no
    whitespace (``separators=(",", ":")``), non-ASCII kept as UTF-8, TOML date-times as ISO 8601
    text (``datetime.isoformat()``). ``envforge lock`` records it in ``[tool.envforge]
    packages-digest``; any added, removed, truncated or edited entry (a changed wheel hash) changes it.
    """
    text = json.dumps(list(packages), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_iso)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _iso(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    raise TypeError(f"{type(value).__name__} is not TOML data")
