"""Which libnccl a process loaded: one copy, and the lock's own (field case B31).

Read from the GPU probe's ``nccl_libraries`` answer (the ``libnccl`` mappings of the probe process
in ``/proc/self/maps``, and the copies it could load).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envforge.verify.findings import Finding

__all__ = ["nccl_library_findings"]


def nccl_library_findings(libs: Mapping[str, Any], site_packages: Path | None) -> list[Finding]:
    """Findings from the probe's ``nccl_libraries`` (``loaded``, ``candidates``: real paths).

    Two copies mapped in one process is a finding; so is a process that loaded a libnccl other
    than the environment's own wheel copy (``<site-packages>/nvidia/nccl/lib``) while that copy
    exists (an ``LD_LIBRARY_PATH`` or system copy shadowing the locked one, field case B31). With
    one candidate, or none loaded, there is nothing to say.
    """
    loaded = [str(p) for p in libs.get("loaded", [])]
    candidates = [str(p) for p in libs.get("candidates", [])]
    fix = (
        "remove the other copy from LD_LIBRARY_PATH (or the launcher's environment) so the process loads "
        "the lock's wheel copy; `envforge env show` lists what the profile sets"
    )
    if len(loaded) > 1:
        return [
            Finding(
                "nccl-library",
                "libnccl",
                "one libnccl in the process",
                "loaded: " + ", ".join(loaded),
                fix,
                level="gpu",
            )
        ]
    own = None
    if site_packages is not None:
        lib = site_packages / "nvidia" / "nccl" / "lib"
        own = next((c for c in candidates if Path(c).parent == lib.resolve()), None)
    if loaded and own is not None and loaded[0] != own:
        return [
            Finding(
                "nccl-library",
                "libnccl",
                f"{own} (the lock's nvidia-nccl wheel)",
                f"loaded {loaded[0]}",
                fix,
                level="gpu",
            )
        ]
    return []
