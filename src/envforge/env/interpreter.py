"""The interpreter's own inputs: environment variables that put code other than the
environment's ahead of it when Python starts (field case B53).

``PYTHONPATH`` entries go on ``sys.path`` before site-packages, so an unpatched checkout named
there is what ``import sglang`` loads, patched site-packages or not; ``PYTHONHOME`` points the
interpreter at another prefix (Python documentation, "Command line and environment"). ``envforge
run`` and bench's servers start without them unless asked to keep them, and say what they dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SHADOWING", "Isolated", "isolate"]

#: The variables that change where the environment's interpreter imports from.
SHADOWING: tuple[str, ...] = ("PYTHONPATH", "PYTHONHOME")


@dataclass(frozen=True, slots=True)
class Isolated:
    """``environ``: the environment a command gets; ``dropped``: name -> value removed;
    ``kept``: name -> value left in place because the caller asked to keep it."""

    environ: Mapping[str, str]
    dropped: Mapping[str, str]
    kept: Mapping[str, str]

    def notes(self, who: str, keep_flag: str) -> list[str]:
        """One line per dropped or kept variable, for stderr and reports."""
        out = [
            f"{who}: {k}={v} dropped: it would put other code ahead of the environment's site-packages "
            f"({keep_flag} keeps it)"
            if k == "PYTHONPATH"
            else f"{who}: {k}={v} dropped: it would make the environment's interpreter another installation"
            for k, v in self.dropped.items()
        ]
        out += [
            f"{who}: {k}={v} kept ({keep_flag}): modules found there shadow the environment's"
            for k, v in self.kept.items()
        ]
        return out


def isolate(base: Mapping[str, str], *, keep: bool = False) -> Isolated:
    """``base`` without :data:`SHADOWING` (empty values count as unset); with ``keep``,
    ``PYTHONPATH`` stays (recorded as kept). ``PYTHONHOME`` always goes: it would make the
    environment's interpreter another installation."""
    found = {k: base[k] for k in SHADOWING if base.get(k)}
    kept = {k: v for k, v in found.items() if keep and k == "PYTHONPATH"}
    dropped = {k: v for k, v in found.items() if k not in kept}
    return Isolated(
        {k: v for k, v in base.items() if k not in dropped and (k in kept or k not in SHADOWING)}, dropped, kept
    )
