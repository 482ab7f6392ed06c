"""Adopting an environment a team already has: ``envforge init --from-env PATH``.

Reads what is installed in a virtual environment, as files (:mod:`envforge.installed.distributions`: dist-info,
METADATA, RECORD, PEP 610 ``direct_url.json``, the PEP 376 ``INSTALLER`` file), and returns a
recipe that pins every distribution to its exact version (local labels included) with
``resolution = "no-deps"``, so that ``envforge lock`` + ``envforge build`` reproduce the same set,
plus what cannot come from an index (direct URL, VCS and editable installs, named with their URL)
and every file whose bytes differ from its RECORD hash: the hand edits (``sed`` on site-packages),
which :func:`capture_hand_edits` offers as captured patchsets (``patchsets/adopted-<dist>.toml``).

Where each distribution came from: pip and uv do not record the index of an index install (PEP
610 covers direct URLs only). The recipe names one index (``--index-url``, default PyPI) and routes
the distributions whose local label is a PyTorch build tag (``+cu128``, ``+cpu``, ``+rocm6.3``)
to the matching ``https://download.pytorch.org/whl/<tag>`` index, where those builds are published.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from envforge.core.errors import EnvforgeError, InputError
from envforge.core.textfile import SMALL_LIMIT, file_kind, read_state
from envforge.core.urls import redact_credentials
from envforge.env.layout import site_packages
from envforge.installed.distributions import direct_url, installed_distributions, read_record, refuse_unreadable
from envforge.lock.routing import without_userinfo
from envforge.lock.write import lock_variant, patchset_refs
from envforge.patching.capture import commit_edit, new_edit
from envforge.patching.memo import default_cache
from envforge.patching.patchset import load_patchset
from envforge.patching.planning import plan
from envforge.patching.releases import fetch_release, list_releases
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project
from envforge.recipe.scaffold import scaffold
from envforge.recipe.schema import lock_name_problem

__all__ = [
    "AdoptedProject",
    "Adoption",
    "AdoptedDistribution",
    "Capture",
    "HandEdit",
    "PYPI",
    "PYTORCH_INDEX",
    "adopt_environment",
    "adopt_into_project",
    "capture_hand_edits",
    "recipe_name_of",
    "with_patchsets",
]

PYPI = "https://pypi.org/simple"
PYTORCH_INDEX = "https://download.pytorch.org/whl/{tag}"
_TORCH_TAG = re.compile(r"\+(cu\d{3}|cpu|rocm\d+(?:\.\d+)*)$")
# Distributions the PyTorch index publishes with a build tag in the version.
_TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})


@dataclass(frozen=True, slots=True)
class AdoptedDistribution:
    """One installed distribution.

    :ivar source: ``index`` (reproducible from an index), ``url`` (a direct archive URL),
        ``vcs``, ``directory`` or ``editable`` (PEP 610 ``direct_url.json``).
    :ivar url: the PEP 610 URL for non-index sources, else None.
    :ivar index: the recipe's index name it is routed to (None: the default index, or not an
        index install).
    :ivar installer: the PEP 376 ``INSTALLER`` file's content (``pip``, ``uv``), or None.
    :ivar credentials_removed: ``direct_url.json`` held a URL with ``user:password@`` (or a token as
        the user name); ``url`` is shown without it and no file envforge writes holds it (field case N39).
    """

    name: str
    version: str
    source: str
    url: str | None
    index: str | None
    installer: str | None
    credentials_removed: bool = False


@dataclass(frozen=True, slots=True)
class HandEdit:
    """A file of ``distribution`` whose bytes differ from its RECORD hash (``actual_sha256`` None:
    the file is missing). ``path`` is relative to site-packages."""

    distribution: str
    path: str
    recorded_sha256: str
    actual_sha256: str | None


@dataclass(frozen=True, slots=True)
class Adoption:
    """What :func:`adopt_environment` found, and the recipe text that reproduces it."""

    env: Path
    name: str
    python: str
    indexes: tuple[tuple[str, str], ...]
    distributions: tuple[AdoptedDistribution, ...]
    edits: tuple[HandEdit, ...]
    recipe_text: str

    @property
    def not_from_an_index(self) -> tuple[AdoptedDistribution, ...]:
        """Distributions the recipe cannot pin (direct URL, VCS, directory, editable)."""
        return tuple(d for d in self.distributions if d.source != "index")

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge init --from-env --json`` (``envforge.adopt/1``)."""
        return {
            "env": str(self.env),
            "recipe": self.name,
            "python": self.python,
            "indexes": [{"name": n, "url": u} for n, u in self.indexes],
            "distributions": [
                {
                    "name": d.name,
                    "version": d.version,
                    "source": d.source,
                    "url": d.url,
                    "index": d.index,
                    "installer": d.installer,
                    "credentials_removed": d.credentials_removed,
                }
                for d in self.distributions
            ],
            "hand_edits": [
                {
                    "distribution": e.distribution,
                    "path": e.path,
                    "recorded_sha256": e.recorded_sha256,
                    "actual_sha256": e.actual_sha256,
                }
                for e in self.edits
            ],
        }


def _python_of(env: Path) -> str:
    cfg = env / "pyvenv.cfg"
    try:
        text = read_state(cfg, what="pyvenv.cfg", limit=SMALL_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        raise InputError(
            f"{env} is not a virtual environment (no pyvenv.cfg)",
            hint="pass the directory that holds bin/python and pyvenv.cfg",
        ) from None
    m = re.search(r"^\s*(?:version_info|version)\s*=\s*(\d+)\.(\d+)", text, re.M)
    if m is None:
        raise InputError(f"{cfg} names no Python version (version / version_info)")
    return f"{m.group(1)}.{m.group(2)}"


def _without_credentials(url: str) -> str:
    """``url`` without its userinfo (pip and uv strip it themselves; a venv can hold anything)."""
    try:
        return without_userinfo(url)
    except ValueError:  # not a URL urlsplit reads (an open "[" host): the redaction still hides it
        return redact_credentials(url)


def _source(dist: Any) -> tuple[str, str | None]:
    info = direct_url(dist)
    if info is None:
        return "index", None
    url = _without_credentials(str(info.get("url", "")))
    if "vcs_info" in info:
        return "vcs", url
    if isinstance(info.get("dir_info"), dict):
        return ("editable" if info["dir_info"].get("editable") else "directory"), url
    return "url", url


def _regular_file_sha256(path: Path) -> str | None:
    """Hex sha256 of ``path`` streamed (a CUDA library is gigabytes), or None when it is not a
    regular file: opened non-blocking and checked with ``fstat`` first, so a FIFO never blocks."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as fh:
        if file_kind(os.fstat(fd).st_mode) is not None:
            return None
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _edits(sp: Path, dist: Any) -> list[HandEdit]:
    out = []
    for entry in read_record(dist):
        if entry.sha256 is None:
            continue
        path = Path(os.path.normpath(sp / entry.path))
        if not path.is_relative_to(sp):  # judged by the RECORD path, not where a symlink in it points (issue 41)
            continue  # scripts in bin/ (../../../bin/x): outside site-packages, launchers rewritten at install
        try:  # only a regular file is read: a FIFO in its place would block (field case N44)
            actual: str | None = _regular_file_sha256(path)
        except (OSError, InputError):
            actual = None
        if actual != entry.sha256:
            out.append(HandEdit(dist.name, entry.path, entry.sha256, actual))
    return out


def adopt_environment(env: Path, *, name: str, index_url: str = PYPI) -> Adoption:
    """Read the virtual environment ``env`` and return the recipe that reproduces it.

    :param name: the recipe name (checked like every recipe name).
    :param index_url: the recipe's default index.
    :raises InputError: not a virtual environment, no distributions, or a bad name.
    """
    problem = lock_name_problem(name)
    if problem:
        raise InputError(f"--name {name!r}: {problem}")
    python = _python_of(env)
    sp = site_packages(env)
    found = installed_distributions(sp)
    refuse_unreadable(
        sp,
        what="the adopted lock",
        fix="reinstall those distributions in the environment (or remove "
        "the leftover *.dist-info directories), then adopt it again",
    )
    if not found:
        raise InputError(f"{env} has no installed distributions (no *.dist-info in {sp})")
    indexes: dict[str, str] = {"pypi": index_url}
    dists: list[AdoptedDistribution] = []
    edits: list[HandEdit] = []
    for key in sorted(found):
        dist = found[key]
        source, url = _source(dist)
        info = direct_url(dist) if url is not None else None
        removed = info is not None and url != str(info.get("url", ""))
        tag = _TORCH_TAG.search(dist.version)
        index = None
        if source == "index" and tag and dist.name in _TORCH_FAMILY:
            index = f"pytorch-{tag.group(1).replace('.', '')}"
            indexes[index] = PYTORCH_INDEX.format(tag=tag.group(1))
        installer_file = dist.dist_info / "INSTALLER"
        installer = (
            (
                read_state(installer_file, what="INSTALLER", limit=SMALL_LIMIT)
                .decode("utf-8", errors="replace")
                .strip()
                or None
            )
            if installer_file.is_file()
            else None
        )
        dists.append(AdoptedDistribution(dist.name, dist.version, source, url, index, installer, removed))
        edits += _edits(sp, dist)
    text = _recipe_text(env, name, python, indexes, dists)
    return Adoption(env, name, python, tuple(indexes.items()), tuple(dists), tuple(edits), text)


def _recipe_text(env: Path, name: str, python: str, indexes: dict[str, str], dists: list[AdoptedDistribution]) -> str:

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Adopted from {env} by `envforge init --from-env`: every distribution"))
    doc.add(tomlkit.comment("pinned as installed; `envforge lock` then `envforge build` reproduce it."))
    skipped = [d for d in dists if d.source != "index"]
    for d in skipped:
        doc.add(
            tomlkit.comment(
                f"not from an index, not pinned here: {d.name} {d.version} ({d.source} {d.url}"
                + ("; credentials removed from its URL)" if d.credentials_removed else ")")
            )
        )
    doc.add(tomlkit.nl())
    recipe = tomlkit.table()
    recipe.update({"name": name, "description": f"adopted from {env}", "python": python, "resolution": "no-deps"})
    doc["recipe"] = recipe
    doc["indexes"] = dict(indexes)
    packages = tomlkit.table()
    for d in dists:
        if d.source != "index":
            continue
        if d.index is None:
            packages[d.name] = f"=={d.version}"
        else:
            pin = tomlkit.inline_table()
            pin.update({"version": f"=={d.version}", "index": d.index})
            packages[d.name] = pin
    doc["packages"] = packages
    return tomlkit.dumps(doc)


@dataclass(frozen=True, slots=True)
class Capture:
    """The hand edits of one distribution turned into ``patchset`` (None: none could be).

    :ivar captured: paths (relative to site-packages) the patchset reproduces.
    :ivar not_captured: ``(path, reason)`` for each hand edit it does not.
    :ivar operations: one line per operation (``replace-definition FILE NAME``, ``replace-text FILE``).
    """

    distribution: str
    patchset: Path | None
    captured: tuple[str, ...]
    not_captured: tuple[tuple[str, str], ...]
    operations: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of one entry of the report's ``captured`` list."""
        return {
            "distribution": self.distribution,
            "patchset": None if self.patchset is None else self.patchset.stem,
            "captured": list(self.captured),
            "operations": list(self.operations),
            "not_captured": [{"path": p, "reason": r} for p, r in self.not_captured],
        }


def capture_hand_edits(adoption: Adoption, patchsets_dir: Path, cache: Path) -> tuple[Capture, ...]:
    """Offer the hand edits of ``adoption`` as captured patchsets: per distribution with edited
    ``.py`` files, ``<patchsets_dir>/adopted-<dist>.toml``, written by the same capture as
    ``envforge patches commit`` (:func:`envforge.patching.capture.commit_edit`) from the released
    files (the same release's wheel, fetched from the distribution's index into ``cache`` by
    :func:`envforge.patching.releases.fetch_release`, as ``patches check`` does) and the edited ones.

    Not captured, with the reason: non-``.py`` files, deleted files, distributions not installed
    from an index, a wheel that cannot be fetched (offline, not on the index), an edit the capture
    cannot express, or whose patchset applied to the released files does not give the edited
    bytes (checked with :func:`envforge.patching.planning.plan`, nothing written). Returns one
    :class:`Capture` per distribution with hand edits, sorted by name.
    """

    sp = site_packages(adoption.env)
    dists = {d.name: d for d in adoption.distributions}
    indexes = dict(adoption.indexes)
    by_dist: dict[str, list[HandEdit]] = {}
    for e in adoption.edits:
        by_dist.setdefault(e.distribution, []).append(e)
    out = []
    for name in sorted(by_dist):
        edits, d = by_dist[name], dists[name]
        skipped = [
            (e.path, "deleted: a patchset changes files, it does not delete them")
            for e in edits
            if e.actual_sha256 is None
        ]
        skipped += [
            (e.path, "not a .py file: capture edits Python files only")
            for e in edits
            if e.actual_sha256 is not None and not e.path.endswith(".py")
        ]
        py = [e.path for e in edits if e.actual_sha256 is not None and e.path.endswith(".py")]
        reason = None
        if py and d.source != "index":
            reason = f"{name} {d.version} was installed from {d.source} {d.url}, not from an index"
        patchset: Path | None = None
        ops: tuple[str, ...] = ()
        released: Path | None = None
        if py and reason is None:
            try:
                released = fetch_release(list_releases(name, indexes[d.index or "pypi"]), d.version, cache)
            except EnvforgeError as exc:
                reason = f"original wheel unavailable: {exc}"
        if released is not None:
            with tempfile.TemporaryDirectory(prefix="envforge-adopt-") as tmp:
                try:
                    work = Path(tmp) / "edit"
                    new_edit(released, name, work)
                    for path in py:
                        if not (work / path).is_file():
                            raise InputError(f"{path} is not in the released {name} {d.version}")
                        shutil.copyfile(sp / path, work / path)
                    done = commit_edit(
                        work,
                        patchsets_dir,
                        f"adopted-{name}",
                        f"captured from hand edits in {adoption.env} by envforge init --from-env",
                    )
                    _check_reproduces(done.path, released, {p: (sp / p).read_bytes() for p in py})
                    patchset, ops = done.path, done.operations
                except EnvforgeError as exc:
                    reason = f"cannot be captured: {exc}"
        if reason is not None:
            skipped += [(p, reason) for p in py]
            py = []
        out.append(Capture(name, patchset, tuple(py), tuple(sorted(skipped)), tuple(ops)))
    return tuple(out)


def _check_reproduces(patchset: Path, released: Path, edited: dict[str, bytes]) -> None:
    """Plan ``patchset`` on the released tree (nothing written) and require the edited bytes of
    every file in ``edited``; else delete the patchset and raise :class:`InputError`."""
    report = plan(released, [load_patchset(patchset)])
    after = {c.path: c.after for c in report.changes}
    wrong = sorted(p for p, data in edited.items() if after.get(p) != data)
    if wrong or not report.ok:
        patchset.unlink()
        raise InputError(
            f"applying the captured patchset to the released file does not give the edited bytes "
            f"({', '.join(wrong) or 'an operation drifted'})"
        )


def with_patchsets(recipe_text: str, ids: tuple[str, ...]) -> str:
    """``recipe_text`` with ``ids`` listed in ``[recipe].patchsets`` (tomlkit keeps the rest)."""
    if not ids:
        return recipe_text
    doc = tomlkit.parse(recipe_text)
    doc["recipe"]["patchsets"] = list(ids)
    return tomlkit.dumps(doc)


@dataclass(frozen=True, slots=True)
class AdoptedProject:
    """What :func:`adopt_into_project` found and wrote (paths are absolute, under the project root).

    :ivar report: the adoption report written to ``report_file`` (``envforge.adopt/1`` without the
        file names): :meth:`Adoption.as_dict` plus ``captured``.
    :ivar lock_file: the lock written, or None (``lock=False``).
    """

    adoption: Adoption
    captures: tuple[Capture, ...]
    recipe_file: Path
    report_file: Path
    lock_file: Path | None
    report: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge init --from-env --json`` (``envforge.adopt/1``)."""
        return {
            **self.report,
            "recipe_file": str(self.recipe_file),
            "report_file": str(self.report_file),
            "lock_file": None if self.lock_file is None else str(self.lock_file),
        }


def recipe_name_of(env: Path) -> str:
    """The default recipe name for adopting ``env``: its directory name, lower case, each run of
    characters other than letters, digits, ``-`` and ``_`` made one ``-`` (``My Env.3`` → ``my-env-3``);
    ``adopted`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", env.name).strip("-_").lower() or "adopted"


def adopt_into_project(
    env: Path,
    root: Path,
    *,
    name: str | None = None,
    index_url: str | None = None,
    lock_it: bool = True,
    progress: Callable[[str], None] | None = None,
) -> AdoptedProject:
    """``envforge init --from-env ENV``: adopt the virtual environment ``env`` into the project at
    ``root``. Reads ``env`` (:func:`adopt_environment`), scaffolds the project without an embedded
    recipe, captures the hand edits as patchsets (:func:`capture_hand_edits`, released wheels from
    the cache's ``releases/``), writes ``recipes/NAME.toml`` naming those patchsets and the report
    ``recipes/NAME.adopted.json``, then (``lock_it``) locks the recipe's default variant.

    :param name: the recipe name (default: :func:`recipe_name_of` ``env``).
    :param index_url: the recipe's default index (default: :data:`PYPI`).
    :param progress: gets uv's progress lines while locking.
    :raises InputError: ``recipes/NAME.toml`` exists already (hint: ``--name``), ``env`` is no
        virtual environment, or what :func:`adopt_environment` and the capture refuse.
    :raises UvError: locking failed (the recipe and report are written by then).
    """
    env = env.resolve()
    name = name or recipe_name_of(env)
    adoption = adopt_environment(env, name=name, index_url=index_url or PYPI)
    project = Project(root)
    recipe_file = project.recipes_dir / f"{name}.toml"
    if recipe_file.exists():
        raise InputError(f"{recipe_file} already exists", hint="pass --name NAME for another recipe name")
    scaffold(root, None)
    captures = capture_hand_edits(adoption, project.patchsets_dir, default_cache() / "releases")
    ids = tuple(c.patchset.stem for c in captures if c.patchset is not None)
    recipe_file.write_text(with_patchsets(adoption.recipe_text, ids), encoding="utf-8")
    report = {**adoption.as_dict(), "captured": [c.as_dict() for c in captures]}
    report_file = project.recipes_dir / f"{name}.adopted.json"
    report_file.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    lock_file = None
    if lock_it:
        variant = load_recipe(recipe_file).resolve(None)
        lock_file = lock_variant(
            variant,
            patchset_refs(project.patchsets_dir, variant.patchsets),
            project.lock_path(variant.lock_name),
            progress=progress,
        ).path
    return AdoptedProject(adoption, captures, recipe_file, report_file, lock_file, report)
