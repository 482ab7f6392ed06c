"""The build constraints of an environment's source builds: what an isolated build may install.

uv builds an sdist in an isolated environment whose build requirements it resolves afresh; a build
that needs torch would get the newest torch on the index while the lock pins another (field case
B55; LMCache#1489; uv's ``match-runtime``, uv#18690). ``uv pip sync --build-constraints`` constrains
exactly what a build asks for, so the locked versions are given there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

__all__ = ["build_constraints"]


def build_constraints(tool: Mapping[str, Any], packages: Sequence[Any]) -> list[str]:
    """The build constraints of a source build: the recipe's recorded ``build-constraints`` (the
    backend, B28), then ``name==version`` (with its marker) for every other locked distribution, so
    an isolated build that needs the runtime's torch gets the locked torch, not the newest on the
    index (B55; the role of uv's ``match-runtime``, derived from the lock). ``--build-constraints``
    only constrains what a build asks for: nothing is added to a build that does not need it."""
    recorded = [str(c) for c in tool.get("build-constraints", [])]
    named = {canonicalize_name(Requirement(c).name) for c in recorded}  # requirements: the recipe schema checked them
    out = list(recorded)
    for p in packages:
        if p.version and canonicalize_name(p.name) not in named:
            out.append(f"{p.name}=={p.version}" + (f" ; {p.marker}" if p.marker else ""))
    return out
