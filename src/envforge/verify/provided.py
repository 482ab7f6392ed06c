"""Verify's ``provided`` check: the base interpreter provides each ``[provided]`` distribution, at
exactly the declared version, as its metadata and its import report it, and the environment does
not hold a copy of its own.

The declared rows come from the lock (``[tool.envforge] provided``: name, version with its local
label, import name); the facts from one probe in the environment's interpreter
(``provided_probe.py``), which sees the base through the generation's ``.pth``
(:mod:`envforge.env.provided`). A torch whose METADATA says ``2.11.0+cu130`` but whose
``torch.__version__`` says otherwise (or the reverse, field case B04's shape) is a finding either way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envforge.core.probe import run_probe
from envforge.verify.findings import Finding

__all__ = ["check_provided", "provided_rows"]

_FIX = (
    "make the base interpreter provide exactly this version (the image's own install), or change "
    "[provided] in the recipe to what the base provides and relock"
)


def provided_rows(envforge_table: Mapping[str, Any]) -> list[dict[str, str]]:
    """The lock's ``[tool.envforge] provided`` rows that are well formed (name, version, import)."""
    rows = envforge_table.get("provided", [])
    return [
        {k: str(r[k]) for k in ("name", "version", "import")}
        for r in rows
        if isinstance(rows, list)
        and isinstance(r, Mapping)
        and all(isinstance(r.get(k), str) for k in ("name", "version", "import"))
    ]


def _inside(path: str | None, sp: Path) -> bool:
    if not path:
        return False
    real, own = os.path.realpath(path), os.path.realpath(sp)
    return real == own or real.startswith(own + os.sep)


def _findings(row: Mapping[str, str], got: Mapping[str, Any], sp: Path) -> list[Finding]:
    name, want, module = row["name"], row["version"], row["import"]
    expected = f"{name} {want} provided by the base interpreter"
    out = []
    if got.get("metadata") is None:
        out.append(
            Finding("provided", name, expected, "no distribution of that name on the environment's sys.path", _FIX)
        )
    elif got["metadata"] != want:
        out.append(
            Finding("provided", name, expected, f"its metadata says {got['metadata']} ({got.get('location')})", _FIX)
        )
    if got.get("error"):
        out.append(
            Finding(
                "provided",
                f"{name} (import {module})",
                f"import {module} reports {want}",
                f"import failed: {got['error']}",
                _FIX,
            )
        )
    elif got.get("import_version") != want:
        out.append(
            Finding(
                "provided",
                f"{name} (import {module})",
                f"{module}.__version__ == {want!r}",
                f"{module}.__version__ is {got.get('import_version')!r} ({got.get('file')})",
                _FIX,
            )
        )
    if _inside(got.get("location"), sp) or _inside(got.get("file"), sp):
        out.append(
            Finding(
                "provided",
                name,
                f"{name} from the base interpreter, not installed in the environment",
                f"installed in the environment's site-packages ({got.get('location') or got.get('file')})",
                "remove it from the lock (a [provided] distribution is never installed): relock and rebuild",
            )
        )
    return out


def check_provided(
    python: Path, sp: Path, rows: Sequence[Mapping[str, str]], script: str, env: Mapping[str, str] | None = None
) -> tuple[list[Finding], str]:
    """Findings of kind ``provided`` for ``rows``, and the check's one-line detail.

    :param python: the environment's interpreter; ``sp`` its site-packages.
    :param script: the source of ``provided_probe.py``.
    :raises envforge.core.probe.ProbeError: the interpreter cannot run (exit 3).
    """
    args = [json.dumps([{"name": r["name"], "import": r["import"]} for r in rows])]
    data: Mapping[str, Any] = run_probe(
        python, script, args=args, env=dict(env) if env is not None else None, timeout_s=120.0
    ).data
    found: list[Finding] = []
    seen = []
    for row in rows:
        got = data.get(row["name"], {})
        found += _findings(row, got, sp)
        seen.append(
            f"{row['name']} {got.get('metadata')} (import {got.get('import_version')}) from {got.get('location')}"
        )
    return found, "; ".join(seen)
