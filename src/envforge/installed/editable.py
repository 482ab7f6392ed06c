"""Editable installs (``pip install -e``, ``uv pip install -e``): where a distribution's code really is.

An editable install puts no code in site-packages: the ``<name>-<version>.dist-info`` holds a PEP 610
``direct_url.json`` with ``{"url": "file:///checkout", "dir_info": {"editable": true}}``, and
setuptools' PEP 660 backend adds an import hook, ``__editable___<name>_<version>_finder.py``, whose
``MAPPING`` names the directory of each top-level package (or, in its "compat"/path mode, a
``__editable__.<name>-<version>.pth`` that adds a directory to ``sys.path``). Patchsets name files
relative to site-packages (``sglang/srt/...``); for an editable install those files live in the
checkout, so envforge refuses to patch and says where the code is (field case B21, kvcached issue
470) rather than calling every file "missing". The finder is read with :mod:`ast`, never imported.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from envforge.installed.distributions import read_direct_url

__all__ = ["EditableInstall", "editable_install"]


@dataclass(frozen=True, slots=True)
class EditableInstall:
    """An editable install of ``distribution`` ``version``: ``project`` is the PEP 610 URL's
    directory (the checkout), ``packages`` maps each top-level import name to its directory (from
    the ``__editable__`` finder's ``MAPPING``, or the ``.pth`` path), possibly empty."""

    distribution: str
    version: str
    project: Path
    packages: tuple[tuple[str, Path], ...] = ()

    def source_of(self, path: str) -> Path | None:
        """Where site-packages-relative ``path`` (``sglang/srt/x.py``) lives in the checkout, or None."""
        top, _, rest = path.partition("/")
        for name, directory in self.packages:
            if name == top:
                return directory / rest if rest else directory
        return None

    def import_root(self, path: str) -> Path:
        """The directory that plays site-packages' role for ``path`` in the checkout (the parent of
        its top-level package), else the project directory."""
        top = path.partition("/")[0]
        for name, directory in self.packages:
            if name == top:
                return directory.parent
        return self.project


def _dist_info(site_packages: Path, distribution: str) -> Path | None:
    want = canonicalize_name(distribution)
    for info in sorted(site_packages.glob("*.dist-info")):
        name = info.name[: -len(".dist-info")].partition("-")[0]
        if canonicalize_name(name) == want:
            return info
    return None


def _mapping(site_packages: Path, name: str, version: str) -> tuple[tuple[str, Path], ...]:
    """``MAPPING`` of ``__editable___<name>_<version>_finder.py`` (setuptools ``editable_wheel.py``,
    non-word characters as ``_``; a dict literal), else the directory a ``.pth`` line adds."""
    finder = site_packages / f"__editable___{re.sub(r'[^A-Za-z0-9_]', '_', f'{name}_{version}')}_finder.py"
    if finder.is_file():
        try:
            tree = ast.parse(finder.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            return ()
        for node in tree.body:
            target: ast.expr
            value: ast.expr | None
            if isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id == "MAPPING" and value is not None:
                try:
                    mapping = ast.literal_eval(value)
                except ValueError:
                    return ()
                if isinstance(mapping, dict):
                    return tuple(sorted((str(k), Path(str(v))) for k, v in mapping.items()))
    pth = site_packages / f"__editable__.{name}-{version}.pth"
    if pth.is_file():
        lines = [ln.strip() for ln in pth.read_text(encoding="utf-8", errors="replace").splitlines()]
        dirs = [Path(ln) for ln in lines if ln and not ln.startswith(("import ", "#"))]
        return tuple(
            (p.name, p)
            for d in dirs
            if d.is_dir()
            for p in sorted(d.iterdir())
            if p.is_dir() and (p / "__init__.py").is_file()
        )
    return ()


def editable_install(site_packages: Path, distribution: str) -> EditableInstall | None:
    """The editable install of ``distribution`` in ``site_packages``, or None when it is not one
    (no ``direct_url.json``, or one without ``dir_info.editable``; PEP 610).

    :raises InputError: a damaged ``direct_url.json`` (:func:`envforge.installed.distributions.read_direct_url`):
        never silently taken for an index install.
    """
    info = _dist_info(site_packages, distribution)
    if info is None:
        return None
    data = read_direct_url(info)
    dir_info = data.get("dir_info") if data is not None else None
    if data is None or not isinstance(dir_info, dict) or dir_info.get("editable") is not True:
        return None
    url = urlsplit(str(data.get("url", "")))
    project = Path(unquote(url.path)) if url.scheme == "file" else Path(str(data.get("url", "")))
    name, _, version = info.name[: -len(".dist-info")].partition("-")
    return EditableInstall(name, version, project, _mapping(site_packages, name, version))
