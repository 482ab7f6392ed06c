"""Extensions built against one torch, installed beside another (issue 40).

A compiled extension made with ``torch.utils.cpp_extension`` links torch's own libraries
(``DT_NEEDED libc10.so``, ``libtorch.so``, ``libtorch_cpu.so``, ``libtorch_cuda.so``,
``libtorch_python.so``) and calls C++ symbols whose names and layouts change between torch
releases: loaded beside another torch it fails with ``undefined symbol`` at import, or worse. The
torch it was built for can be read where its distribution says so: vLLM 0.32.0's METADATA has
``Requires-Dist: torch==2.13.0+cpu`` beside ``vllm/_C.abi3.so``, which links ``libc10.so`` and
``libtorch.so``. An installer keeps that pin unless told otherwise, so a mismatch comes from an
override (uv's ``override-dependencies``, the way a serving stack moves torch under an engine that
pins another) or an install by hand; lock and build then pass, and the import fails on the box.

Read here: each distribution's ``Requires-Dist: torch ...`` whose marker is true in the
environment (packaging's requirement and marker parsers) and which pins something (a specifier),
and whether a shared object it installs (its RECORD) links a torch library (pyelftools, nothing is
loaded). A distribution that links torch without a torch requirement says nothing checkable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

from envforge.core.textfile import read_state
from envforge.installed.distributions import Installed, installed_distributions, read_record
from envforge.installed.sharedlibs import needed

__all__ = ["TorchBuild", "torch_builds", "torch_notes", "unmet_builds"]

_SHARED = re.compile(r"\.so(\.\d+)*$")
_TORCH_SONAME = re.compile(r"lib(c10|c10_cuda|torch|torch_cpu|torch_cuda|torch_python)\.so(\.[\d.]+)?$")


@dataclass(frozen=True, slots=True)
class TorchBuild:
    """``distribution`` ``version`` installs ``extension`` (relative to site-packages), which
    links ``library`` (a torch library), and requires ``requirement`` (``torch==2.13.0+cpu``:
    its Requires-Dist, marker dropped)."""

    distribution: str
    version: str
    extension: str
    library: str
    requirement: str


def _torch_requirements(dist: Installed, markers: Mapping[str, str] | None) -> list[Any]:
    """The ``Requires-Dist`` entries of ``dist`` naming torch with a specifier, whose marker is
    true for ``markers`` (the environment's; ``None``: this interpreter's); unparseable ones skipped."""
    from packaging.requirements import InvalidRequirement, Requirement  # lazy: verify only

    try:
        raw = read_state(dist.dist_info / "METADATA", what="METADATA")
    except (FileNotFoundError, NotADirectoryError):
        return []
    headers = BytesHeaderParser().parsebytes(raw)
    out = []
    for line in headers.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(line))
        except InvalidRequirement:
            continue
        if req.name.lower() != "torch" or not req.specifier:
            continue
        if req.marker is not None and not req.marker.evaluate(dict(markers or {})):  # extra: "" (packaging's default)
            continue
        out.append(req)
    return out


def torch_builds(
    site_packages: Path, records: Mapping[Installed, Sequence[Any]], markers: Mapping[str, str] | None = None
) -> list[TorchBuild]:
    """One :class:`TorchBuild` per distribution (other than torch) with a shared object in its
    RECORD (rows with ``.path``) that links a torch library and a torch requirement with a
    specifier; sorted by distribution. ``markers``: the environment's marker variables.

    :raises InputError: a METADATA file is not a regular file or larger than its limit.
    """
    out: list[TorchBuild] = []
    for dist, rows in sorted(records.items(), key=lambda item: item[0].name):
        reqs = _torch_requirements(dist, markers)  # torch itself requires no torch
        if not reqs:  # METADATA first: only the distributions that pin torch have their ELF files read
            continue
        linked = next(
            (
                (str(r.path), lib)
                for r in rows
                if _shared(str(r.path))
                for lib in needed(site_packages / str(r.path))
                if _TORCH_SONAME.match(lib)
            ),
            None,
        )
        if linked is not None:
            out.extend(TorchBuild(dist.name, dist.version, linked[0], linked[1], f"torch{r.specifier}") for r in reqs)
    return out


def torch_notes(site_packages: Path) -> list[str]:
    """What ``build`` notes for :func:`unmet_builds` (verify's ``torch-abi`` finding says the same
    with its fix): ``"torch-abi: kernelkit 0.3.21's kernelkit/_ops.abi3.so links libc10.so and
    kernelkit pins torch==1.0.0; torch 2.0.0 is installed: its import fails (undefined symbol)"``;
    [] without torch. Markers are this interpreter's (build runs beside the environment).

    :raises InputError: a METADATA or RECORD file is not a regular file or too large.
    """
    installed = installed_distributions(site_packages)
    torch = installed.get("torch")
    if torch is None:
        return []
    builds = torch_builds(site_packages, {d: read_record(d) for d in installed.values()})
    return [
        f"torch-abi: {b.distribution} {b.version}'s {b.extension} links {b.library} and {b.distribution} pins "
        f"{b.requirement}; torch {torch.version} is installed: its import fails (undefined symbol)"
        for b in unmet_builds(builds, torch.version)
    ]


def unmet_builds(builds: Sequence[TorchBuild], torch_version: str) -> list[TorchBuild]:
    """The builds whose requirement ``torch_version`` (the installed torch's, e.g. ``2.9.1+cu130``)
    does not meet (PEP 440, pre-releases allowed: a nightly torch pinned exactly)."""
    from packaging.specifiers import SpecifierSet  # lazy: verify only

    return [
        b for b in builds if not SpecifierSet(b.requirement[len("torch") :]).contains(torch_version, prereleases=True)
    ]


def _shared(path: str) -> bool:
    """A RECORD path naming a shared object: ``.so``, or a versioned ``.so.1.2`` (a file name, never a directory's)."""
    return _SHARED.search(path) is not None
