"""A CycloneDX 1.6 SBOM of a built environment: ``envforge sbom ENV`` (issue 31).

Made with `cyclonedx-python-lib <https://pypi.org/project/cyclonedx-python-lib/>`_ and checked
with its own JSON validator against the CycloneDX 1.6 schema before it is returned. What it says:

* ``metadata.component``: the environment (``<recipe>-<variant>``, version = its generation
  ``gNNNN``), with the lock digest and the patch manifest's sha256 as properties; the time is when
  the generation was built (``generation.json``'s mtime), so the same generation gives the same bytes.
* one ``library`` component per installed distribution (``*.dist-info``): name, version, a
  ``pkg:pypi`` purl (``repository_url`` when the lock routes it to an index other than PyPI), the
  local version label (``envforge:local-version-label``), the index and the sha256 of the locked
  wheel that was installed (its tags are the ``Tag:`` lines of the dist-info's ``WHEEL``; every
  locked wheel of the entry when none matches). A distribution the lock does not hold says so
  (``envforge:locked = false``).
* for each distribution envforge patched (the patch manifest), ``pedigree.patches``: one patch per
  patchset, ``unofficial`` (written for this stack) or ``backport`` (imported from an upstream diff,
  ``patches import``), its ``diff`` the unified diff ``patches export`` writes, ``resolves`` the
  patchset id and reason (and its upstream link); the patchset digest in ``pedigree.notes`` and as a
  property ``envforge:patchset:<id>``.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cyclonedx.model import (
    AttachedText,
    ExternalReference,
    ExternalReferenceType,
    HashAlgorithm,
    HashType,
    Property,
    XsUri,
)
from cyclonedx.model.bom import Bom, BomMetaData
from cyclonedx.model.component import Component, ComponentType, Diff, Patch, PatchClassification, Pedigree
from cyclonedx.model.issue import IssueClassification, IssueType, IssueTypeSource
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

import envforge
from envforge.core.errors import CheckFailed, InputError
from envforge.core.fs import sha256_hex
from envforge.core.state import StateDir
from envforge.core.textfile import SMALL_LIMIT, read_state
from envforge.installed.distributions import Installed, installed_distributions, refuse_unreadable
from envforge.lock.model import LockedPackage, LockedWheel, read_lock
from envforge.patching.export import export_diff
from envforge.patching.manifest import AppliedPatchset, manifest_sha256, read_manifest, rebuild_hint
from envforge.patching.patchset import Patchset, load_patchset

__all__ = ["SBOM_SPEC", "EnvironmentSbom", "environment_sbom"]

SBOM_SPEC = "CycloneDX 1.6 (JSON)"
PYPI = "https://pypi.org/simple"
_NO_LOCK = "build the environment with `envforge build RECIPE` (it keeps the lock it was built from)"


@dataclass(frozen=True, slots=True)
class EnvironmentSbom:
    """The SBOM of one environment: ``text`` (the CycloneDX 1.6 JSON, validated), the environment's
    ``name`` and ``generation``, the number of ``components`` and ``patched`` (``dist version:
    patchset ids`` per patched distribution)."""

    text: str
    name: str
    generation: str
    components: int
    patched: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    """What the SBOM could not say and why (a damaged ``generation.json``: the generation is "unknown")."""


def _tags(dist: Installed) -> set[str]:
    """The wheel tags (``py3-none-any``) of an installed distribution: ``Tag:`` lines of ``WHEEL``."""
    try:
        raw = read_state(dist.dist_info / "WHEEL", what="WHEEL", limit=SMALL_LIMIT)
    except FileNotFoundError:
        return set()
    return {
        line.split(":", 1)[1].strip() for line in raw.decode("utf-8", "replace").splitlines() if line.startswith("Tag:")
    }


def _installed_wheels(dist: Installed, entry: LockedPackage) -> tuple[LockedWheel, ...]:
    """The locked wheels of ``entry`` that were installed (by tag), else all of them."""
    tags = _tags(dist)
    chosen = []
    for wheel in entry.wheels:
        try:
            wtags = {str(t) for t in parse_wheel_filename(wheel.name or "")[3]}
        except InvalidWheelFilename:
            continue
        if wtags & tags:
            chosen.append(wheel)
    return tuple(chosen) or entry.wheels


def _entry(lock: Sequence[LockedPackage], dist: Installed) -> LockedPackage | None:
    return next((p for p in lock if p.name == dist.name and p.version == dist.version), None)


def _local_label(version: str) -> str | None:
    try:
        return Version(version).local
    except InvalidVersion:
        return None


def _patch(ps: Patchset, diff: str) -> Patch:
    source = ps.upstream or (ps.diff_origin if ps.diff_origin and "://" in ps.diff_origin else None)
    issue = IssueType(
        type=IssueClassification.DEFECT,
        id=ps.id,
        name=ps.id,
        description=ps.reason,
        source=IssueTypeSource(name="envforge patchset", url=XsUri(source)) if source else None,
    )
    kind = PatchClassification.BACKPORT if ps.diff_sha256 else PatchClassification.UNOFFICIAL
    return Patch(type=kind, diff=Diff(text=AttachedText(content=diff, content_type="text/x-diff")), resolves=[issue])


def _component(dist: Installed, entry: LockedPackage | None, patches: Sequence[tuple[Patchset, str]]) -> Component:
    index = entry.index if entry is not None else None
    qualifiers = {"repository_url": index} if index and index.rstrip("/") != PYPI else {}
    purl = PackageURL(type="pypi", name=dist.name, version=dist.version, qualifiers=qualifiers)
    props = [Property(name="envforge:locked", value="true" if entry is not None else "false")]
    if (label := _local_label(dist.version)) is not None:
        props.append(Property(name="envforge:local-version-label", value=label))
    if index:
        props.append(Property(name="envforge:index", value=index))
    props += [Property(name=f"envforge:patchset:{ps.id}", value=ps.digest) for ps, _ in patches]
    wheels = _installed_wheels(dist, entry) if entry is not None else ()
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=w.sha256) for w in wheels if w.sha256]
    refs = [
        ExternalReference(
            type=ExternalReferenceType.DISTRIBUTION,
            url=XsUri(w.url),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=w.sha256)] if w.sha256 else None,
        )
        for w in wheels
        if w.url
    ]
    pedigree = None
    if patches:
        notes = "envforge patchsets: " + ", ".join(f"{ps.id} {ps.digest}" for ps, _ in patches)
        pedigree = Pedigree(patches=[_patch(ps, diff) for ps, diff in patches], notes=notes)
    return Component(
        type=ComponentType.LIBRARY,
        name=dist.name,
        version=dist.version,
        purl=purl,
        bom_ref=purl.to_string(),
        hashes=hashes,
        external_references=refs,
        properties=props,
        pedigree=pedigree,
    )


def _patchsets(
    site_packages: Path, patchsets_dir: Path, applied: Sequence[AppliedPatchset]
) -> dict[str, list[tuple[Patchset, str]]]:
    """Per distribution: the applied patchsets that changed files, each with its exported diff.

    :raises CheckFailed: a patchset file is missing or is not the one the environment was patched
        with (its digest differs).
    """
    manifest = read_manifest(site_packages)
    changed = {f.patchset for f in manifest.files} if manifest else set()
    out: dict[str, list[tuple[Patchset, str]]] = {}
    for ref in applied:
        if ref.id not in changed:
            continue
        path = patchsets_dir / f"{ref.id}.toml"
        if not path.is_file():
            raise CheckFailed(
                f"patchset {ref.id} applied to {site_packages} is not in {patchsets_dir}",
                hint="run from the project that built the environment (--project DIR)",
            )
        ps = load_patchset(path)
        if ps.digest != ref.digest:
            raise CheckFailed(
                f"{path} is not the patchset the environment was patched with "
                f"(applied {ref.digest}, the file is {ps.digest}): its diff would not be the one applied",
                hint="restore the patchset file, or rebuild the environment with it (`envforge build`)",
            )
        out.setdefault(ref.distribution, []).append((ps, export_diff(site_packages, ps)))
    return out


def _metadata(name: str, generation: str, state: StateDir, lock_digest: str, built: dt.datetime) -> BomMetaData:
    root = Component(
        type=ComponentType.APPLICATION,
        name=name,
        version=generation,
        bom_ref=f"envforge-env:{name}",
        properties=[
            Property(name="envforge:lock-digest", value=lock_digest),
            Property(name="envforge:patch-manifest-sha256", value=manifest_sha256(state.site_packages)),
        ],
    )
    meta = BomMetaData(component=root, timestamp=built)
    meta.tools.components.add(
        Component(
            type=ComponentType.APPLICATION, name="envforge", version=envforge.__version__, bom_ref="envforge-tool"
        )
    )
    return meta


def environment_sbom(site_packages: Path, patchsets_dir: Path, *, name: str) -> EnvironmentSbom:
    """The CycloneDX 1.6 SBOM of the environment whose purelib is ``site_packages`` (see the module
    doc). ``name`` names the environment (``quickstart-default``); ``patchsets_dir`` holds the
    patchsets its patch manifest records.

    :raises InputError: no ``.envforge/pylock.toml`` (not built by envforge), an unreadable
        lock copy, patch manifest or patchset, or a ``*.dist-info`` whose METADATA cannot be read
        (missing, empty, a FIFO: the SBOM would leave it out; issue 41 found "0 components", rc 0).
    :raises CheckFailed: a patchset file missing or changed since it was applied; an SBOM the
        CycloneDX 1.6 schema rejects (a bug: never expected).
    """
    state = StateDir(site_packages)
    lock = read_lock(state.lock_copy, state_hint=_NO_LOCK)
    record = state.generation_record
    generation, unread = _generation(record)
    built = dt.datetime.fromtimestamp(
        record.stat().st_mtime if record.is_file() else state.lock_copy.stat().st_mtime, tz=dt.UTC
    ).replace(microsecond=0)
    manifest = read_manifest(site_packages)
    patched = _patchsets(site_packages, patchsets_dir, manifest.patchsets if manifest else ())
    lock_digest = "sha256:" + sha256_hex(state.lock_copy.read_bytes())
    dists = installed_distributions(site_packages)
    refuse_unreadable(site_packages, what="the SBOM", fix=rebuild_hint(site_packages))
    components = [_component(d, _entry(lock.packages, d), patched.get(d.name, ())) for d in dists.values()]
    bom = Bom(
        components=components,
        metadata=_metadata(name, generation, state, lock_digest, built),
        serial_number=uuid.uuid5(
            uuid.NAMESPACE_URL, f"envforge:{name}:{generation}:{lock_digest}:{manifest_sha256(site_packages)}"
        ),
    )
    bom.register_dependency(bom.metadata.component, components)  # type: ignore[arg-type]
    text = JsonV1Dot6(bom).output_as_string(indent=2) + "\n"
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise CheckFailed(f"the SBOM of {name} does not validate against CycloneDX 1.6: {error}")
    rows = tuple(
        f"{d.name} {d.version}: {', '.join(ps.id for ps, _ in patched[d.name])}"
        for d in dists.values()
        if d.name in patched
    )
    return EnvironmentSbom(text, name, generation, len(components), rows, () if unread is None else (unread,))


def _generation(record: Path) -> tuple[str, str | None]:
    """The generation name ``generation.json`` records (``g0001``), else ``unknown``; with why when the
    record is there but cannot be read (never silently "unknown": issue 41)."""
    try:
        data: object = json.loads(read_state(record, what="generation record", limit=SMALL_LIMIT))
    except FileNotFoundError:
        return "unknown", None
    except InputError as exc:
        return "unknown", f'{exc.message}: the SBOM names the generation "unknown"'
    except (ValueError, RecursionError) as exc:
        return "unknown", f'generation record {record} is not JSON ({exc}): the SBOM names the generation "unknown"'
    if not isinstance(data, Mapping) or not isinstance(data.get("generation"), str):
        return "unknown", f'generation record {record} names no generation: the SBOM names it "unknown"'
    return str(data["generation"]), None
