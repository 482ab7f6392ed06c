"""Installed versions against the lock: mismatches, local labels (B04), families (B05), CUDA majors (B03).

B04: some CUDA wheels carry ``+cu130`` in the file name but not in METADATA (sglang issues 14327,
20953), so an installed ``1.0`` for a locked ``1.0+cu130`` is not a mismatch when something else
confirms the file: the PEP 610 ``direct_url.json`` (hash or file name), or uv's cache, whose
``wheels-v*/<index>/<name>/<version>-<tags>`` link names the wheel and points at the unpacked archive
the installed files are hardlinked to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.markers import Marker
from packaging.version import InvalidVersion, Version

from envforge.core.plural import counted
from envforge.installed.torchabi import torch_builds, unmet_builds
from envforge.recipe.cuda import cuda_major, cuda_mismatches
from envforge.verify.findings import Finding
from envforge.verify.inventory import EnvLock, Installed, LockedPackage, direct_url
from envforge.verify.records import read_record

__all__ = [
    "FAMILIES",
    "check_cuda_major",
    "check_families",
    "check_torch_builds",
    "check_versions",
    "cuda_major_of",
    "uv_cache_wheel",
]

#: Distributions that must share one public version (field case B05).
FAMILIES: Mapping[str, tuple[str, ...]] = {
    "flashinfer": ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
}

_FIX_RELOCK = "rebuild the environment from its lock: `envforge build`"


def cuda_major_of(name: str, version: str) -> int | None:
    """The CUDA major a distribution is built for, or None (the curated map of :mod:`envforge.recipe.cuda`)."""
    found = cuda_major(name, version)
    return found[0] if found else None


def _applies(pkg: LockedPackage, markers: Mapping[str, str] | None) -> bool:
    if pkg.marker is None or markers is None:
        return True
    return Marker(pkg.marker).evaluate(dict(markers))


def check_versions(
    lock: EnvLock,
    installed: Mapping[str, Installed],
    markers: Mapping[str, str] | None,
    uv_cache: Path | None,
    *,
    python: Path | None = None,
) -> tuple[list[Finding], list[str]]:
    """Missing, unexpected and mismatched distributions. Returns (findings, notes). ``python``
    (the environment's interpreter) is named in the uninstall command of an ``unexpected`` finding."""
    findings: list[Finding] = []
    notes: list[str] = []
    locked = {p.name: p for p in lock.packages}
    for pkg in lock.packages:
        if not _applies(pkg, markers):
            continue
        dist = installed.get(pkg.name)
        if dist is None:
            findings.append(
                Finding("missing", pkg.name, f"{pkg.name} {pkg.version} (in the lock)", "not installed", _FIX_RELOCK)
            )
        elif pkg.version is not None:
            _compare(pkg, dist, uv_cache, findings, notes)
    for name, dist in sorted(installed.items()):
        if name not in locked:
            findings.append(
                Finding(
                    "unexpected",
                    f"{name} {dist.version}",
                    "not installed (absent from the lock)",
                    f"installed but not in lock: {name} {dist.version}",
                    f"remove it (`uv pip uninstall{f' --python {python}' if python else ''} {name}`) "
                    "or add it to the recipe and relock; "
                    "`envforge build` installs exactly the lock",
                )
            )
    return findings, notes


def _compare(
    pkg: LockedPackage, dist: Installed, uv_cache: Path | None, findings: list[Finding], notes: list[str]
) -> None:
    assert pkg.version is not None
    try:
        want, have = Version(pkg.version), Version(dist.version)
    except InvalidVersion:
        if pkg.version != dist.version:
            findings.append(Finding("version-mismatch", pkg.name, pkg.version, dist.version, _FIX_RELOCK))
        return
    if have == want:
        return
    if have.public != want.public:
        findings.append(Finding("version-mismatch", pkg.name, pkg.version, dist.version, _FIX_RELOCK))
    elif want.local and not have.local:
        evidence = confirm_variant(pkg, dist, uv_cache)
        if evidence:
            notes.append(
                f"{pkg.name}: METADATA says {dist.version}, the lock {pkg.version} (B04); "
                f"variant confirmed by {evidence}"
            )
        else:
            findings.append(
                Finding(
                    "variant-unconfirmed",
                    pkg.name,
                    f"{pkg.version} (wheel {_wheel_names(pkg) or '?'})",
                    _unconfirmed(pkg, dist),
                    "reinstall from the lock with uv (`envforge build`) so the wheel file can be confirmed",
                )
            )
    else:
        findings.append(Finding("local-label-mismatch", pkg.name, pkg.version, dist.version, _FIX_RELOCK))


def _wheel_names(pkg: LockedPackage) -> str:
    return ", ".join(w.name for w in pkg.wheels if w.name)


def _recorded(dist: Installed) -> tuple[str | None, str | None]:
    """``(sha256 hex, wheel file name)`` the PEP 610 ``direct_url.json`` of ``dist`` records, each
    None when absent. Its writers differ: pip records the archive's hash (``archive_info.hashes``
    and the older ``archive_info.hash``, ``"sha256=<hex>"``) and a percent-encoded file URL
    (``pkgx-1.0%2Bcu130-py3-none-any.whl``); uv records the URL only (``"archive_info": {}``)."""
    du = direct_url(dist)
    if du is None:
        return None, None
    info = du.get("archive_info", {})
    hashes = info.get("hashes")
    digest = hashes.get("sha256") if isinstance(hashes, dict) else None
    legacy = info.get("hash")
    if not isinstance(digest, str) and isinstance(legacy, str) and legacy.startswith("sha256="):
        digest = legacy.removeprefix("sha256=")
    name = Path(unquote(urlparse(du["url"]).path)).name
    return (digest.lower() if isinstance(digest, str) and digest else None), (name or None)


def confirm_variant(pkg: LockedPackage, dist: Installed, uv_cache: Path | None) -> str | None:
    """How the installed files are known to come from one of the lock's wheels, or None.

    Evidence, in order: the archive hash ``direct_url.json`` records equals a locked wheel's
    sha256; else the file name it records is a locked wheel's, provided no hash can be compared
    (a recorded hash that matches no locked wheel is another file, even under the locked name: a
    wheel rebuilt under one name); else uv's cache holds the installed files as hardlinks of a
    locked wheel (:func:`uv_cache_wheel`).

    :raises InputError: a damaged ``direct_url.json`` (:func:`envforge.installed.distributions.read_direct_url`).
    """
    digest, name = _recorded(dist)
    if digest and any(w.sha256 == digest for w in pkg.wheels):
        return f"the file hash in direct_url.json (sha256:{digest[:12]}...)"
    named = [w for w in pkg.wheels if name and w.name == name]
    if named and not (digest and any(w.sha256 for w in named)):
        return f"the wheel file name in direct_url.json ({name})"
    wheel = uv_cache_wheel(dist, uv_cache) if uv_cache else None
    if wheel and any(w.name and _same_wheel(w.name, wheel) for w in pkg.wheels):
        return f"uv's cache: the installed files are hardlinks of the cached wheel {wheel}"
    return None


def _unconfirmed(pkg: LockedPackage, dist: Installed) -> str:
    """What a ``variant-unconfirmed`` finding says was found instead of the evidence."""
    digest, name = _recorded(dist)
    other = next((w.sha256 for w in pkg.wheels if name and w.name == name and w.sha256), None)
    if digest and other:
        return (
            f"{dist.version} in METADATA, and direct_url.json records {name} with sha256:{digest[:12]}..., "
            f"the lock's has sha256:{other[:12]}... (another file under the locked name)"
        )
    if name:
        return f"{dist.version} in METADATA, direct_url.json names {name}, which is none of the lock's wheels"
    return f"{dist.version} in METADATA, and neither direct_url.json nor uv's cache names the wheel"


def _same_wheel(a: str, b: str) -> bool:
    return a.lower().replace("_", "-") == b.lower().replace("_", "-")


def uv_cache_wheel(dist: Installed, uv_cache: Path) -> str | None:
    """File name of the wheel in uv's cache whose unpacked archive holds ``dist``'s installed files."""
    sample = next(
        (e.path for e in read_record(dist) if e.sha256 and not e.path.startswith("..") and ".dist-info/" not in e.path),
        None,
    )
    if sample is None:
        return None
    site = dist.dist_info.parent
    try:
        ino = os.stat(site / sample)
    except FileNotFoundError:
        return None
    for entry in [*uv_cache.glob(f"wheels-v*/*/{dist.name}/*"), *uv_cache.glob(f"wheels-v*/*/*/{dist.name}/*")]:
        for archive in _archives(entry, uv_cache):
            try:
                if os.path.samestat(os.stat(archive / sample), ino):
                    stem = entry.name.removesuffix(entry.suffix) if not entry.is_symlink() else entry.name
                    return f"{dist.name.replace('-', '_')}-{stem}.whl"
            except OSError:
                continue
    return None


_ARCHIVE_ID = re.compile(rb"[A-Za-z0-9_-]{16,32}")


def _archives(entry: Path, uv_cache: Path) -> list[Path]:
    """Unpacked archives an entry of uv's wheel cache points to (a link, or ids in a .rev/.msgpack)."""
    if entry.is_symlink():
        return [entry]
    if entry.suffix not in (".rev", ".msgpack", ".http"):
        return []
    try:
        blob = entry.read_bytes()[:4096]
    except OSError:
        return []
    return [
        uv_cache / "archive-v0" / m.decode()
        for m in _ARCHIVE_ID.findall(blob)
        if (uv_cache / "archive-v0" / m.decode()).is_dir()
    ]


def check_families(installed: Mapping[str, Installed]) -> list[Finding]:
    """Each family of :data:`FAMILIES` installed at one public version (B05)."""
    out = []
    for family, members in FAMILIES.items():
        present = [installed[m] for m in members if m in installed]
        publics = {_public(d.version) for d in present}
        if len(publics) > 1:
            head = present[0]
            out.append(
                Finding(
                    "family-mismatch",
                    f"{family} family",
                    f"one public version ({head.name} {_public(head.version)})",
                    ", ".join(f"{d.name} {d.version}" for d in present),
                    f"lock every {family} distribution at one version (recipe [packages]) and rebuild",
                )
            )
    return out


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def check_cuda_major(installed: Iterable[Installed], cuda: str) -> list[Finding]:
    """No CUDA runtime wheel of another major than the variant's ``cuda`` (B03; :mod:`envforge.recipe.cuda`)."""
    want = int(cuda.split(".")[0])
    return [
        Finding(
            "cuda-major-mismatch",
            f"{m.name} {m.version}",
            f"CUDA {want} wheels (variant cuda {cuda})",
            f"built for CUDA {m.major} ({m.why})",
            f"pin a CUDA {want} build in the recipe (an override with a reason if an upstream pin pulls it in), "
            "relock and rebuild",
        )
        for m in cuda_mismatches(((d.name, d.version) for d in installed), cuda)
    ]


def check_torch_builds(
    site_packages: Path,
    installed: Mapping[str, Installed],
    records: Mapping[Installed, Sequence[Any]],
    markers: Mapping[str, str] | None,
) -> tuple[list[Finding], str]:
    """Every compiled extension that links torch's libraries and whose distribution pins a torch the
    installed one does not meet (:mod:`envforge.installed.torchabi`), and the check's detail line.
    ``installed`` must hold torch.

    :raises InputError: a METADATA file is not a regular file or too large.
    """
    torch = installed["torch"]
    builds = torch_builds(site_packages, records, markers)
    found = [
        Finding(
            "torch-abi",
            f"{b.distribution} {b.version}: {b.extension}",
            f"{b.requirement} (the torch {b.distribution} {b.version} declares: the one its extensions were built against)",
            f"torch {torch.version}: {b.extension} links {b.library}, whose C++ symbols change between torch releases; "
            "its import fails (`undefined symbol`) or it misbehaves",
            f"lock the {b.distribution} build made for torch {torch.version}, or lock {b.requirement} and drop the "
            "override that moved torch; then rebuild",
        )
        for b in unmet_builds(builds, torch.version)
    ]
    return found, f"torch {torch.version}; {counted(len(builds), 'extension distribution')} pinning torch"
