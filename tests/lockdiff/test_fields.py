"""Every field docs/lock-diff.md ("Fields compared") lists is handled as it says: two locks that
differ only in that field show a change (``shown``), or show one only with ``--all`` (``hidden``)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from envforge.lock.read import InvalidLock
from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.model import parse_lock
from envforge.lockdiff.render import render_terminal

DOC = Path(__file__).parents[2] / "docs" / "lock-diff.md"
PYPI_FILES = "https://files.pythonhosted.org/packages/b7"
WHEEL = f"{PYPI_FILES}/six-1.17.0-py2.py3-none-any.whl"
H1, H2 = "1" * 64, "2" * 64

Doc = dict[str, Any]
Setter = Callable[[Doc, Any], None]


def pylock() -> Doc:
    return {
        "lock-version": "1.0",
        "created-by": "uv",
        "packages": [
            {
                "name": "six",
                "version": "1.17.0",
                "index": "https://pypi.org/simple",
                "wheels": [{"url": WHEEL, "hashes": {"sha256": H1}}],
            }
        ],
    }


def uvlock() -> Doc:
    return {
        "version": 1,
        "revision": 3,
        "requires-python": ">=3.12",
        "package": [
            {
                "name": "six",
                "version": "1.17.0",
                "source": {"registry": "https://pypi.org/simple"},
                "wheels": [{"url": WHEEL, "hash": f"sha256:{H1}"}],
            }
        ],
    }


def top(key: str) -> Setter:
    def put(d: Doc, v: Any) -> None:
        d[key] = v

    return put


def sub(table: str, key: str) -> Setter:
    def put(d: Doc, v: Any) -> None:
        d.setdefault(table, {})[key] = v

    return put


def pkg(key: str, *, drop: tuple[str, ...] = ()) -> Setter:
    def put(d: Doc, v: Any) -> None:
        p = (d.get("packages") or d["package"])[0]
        for k in drop:
            p.pop(k, None)
        p[key] = v

    return put


def meta(key: str) -> Setter:
    def put(d: Doc, v: Any) -> None:
        d["package"][0].setdefault("metadata", {})[key] = v

    return put


def version(d: Doc, v: str) -> None:
    p = (d.get("packages") or d["package"])[0]
    p["version"] = v
    w = p["wheels"][0]
    w["url"] = f"{PYPI_FILES}/six-{v}-py2.py3-none-any.whl"


def wheel_hash(d: Doc, v: str) -> None:
    w = (d.get("packages") or d["package"])[0]["wheels"][0]
    if "hashes" in w:
        w["hashes"] = {"sha256": v}
    else:
        w["hash"] = f"sha256:{v}"


NO_FILES = ("index", "wheels")
REQ = [{"name": "torch", "specifier": ">=2.9.0", "index": "https://download.pytorch.org/whl/cu128"}]
REQ2 = [{"name": "torch", "specifier": ">=2.9.0", "index": "https://download.pytorch.org/whl/cu130"}]
PY_SDIST = f"{PYPI_FILES}/six-1.17.0.tar.gz"

#: (format, field) -> (base document, setter, old value, new value)
CASES: dict[tuple[str, str], tuple[Callable[[], Doc], Setter, Any, Any]] = {
    ("pylock", "lock-version"): (pylock, top("lock-version"), "1.0", "1.1"),
    ("pylock", "created-by"): (pylock, top("created-by"), "uv", "pdm"),
    ("pylock", "requires-python"): (pylock, top("requires-python"), ">=3.10", ">=3.11"),
    ("pylock", "environments"): (
        pylock,
        top("environments"),
        ["sys_platform == 'linux'"],
        ["sys_platform == 'darwin'"],
    ),
    ("pylock", "extras"): (pylock, top("extras"), ["a"], ["b"]),
    ("pylock", "dependency-groups"): (pylock, top("dependency-groups"), ["dev"], ["test"]),
    ("pylock", "default-groups"): (pylock, top("default-groups"), ["dev"], ["test"]),
    ("pylock", "tool.envforge"): (pylock, sub("tool", "envforge"), {"cuda": "12.8"}, {"cuda": "13.0"}),
    ("pylock", "tool.* (other tools)"): (pylock, sub("tool", "pdm"), {"strategy": ["a"]}, {"strategy": ["b"]}),
    ("pylock", "packages.version"): (pylock, version, "1.17.0", "1.16.0"),
    ("pylock", "packages.marker"): (pylock, pkg("marker"), "sys_platform == 'linux'", "sys_platform == 'win32'"),
    ("pylock", "packages.requires-python"): (pylock, pkg("requires-python"), ">=3.8", ">=3.9"),
    ("pylock", "packages.dependencies"): (pylock, pkg("dependencies"), [{"name": "a"}], [{"name": "b"}]),
    ("pylock", "packages.index"): (pylock, pkg("index"), "https://pypi.org/simple", "https://mirror.example/simple"),
    ("pylock", "packages.vcs"): (
        pylock,
        pkg("vcs", drop=NO_FILES),
        {"type": "git", "url": "https://g.example/six", "commit-id": "a" * 40},
        {"type": "git", "url": "https://g.example/six", "commit-id": "b" * 40},
    ),
    ("pylock", "packages.directory"): (
        pylock,
        pkg("directory", drop=NO_FILES),
        {"path": "../six"},
        {"path": "../six", "editable": True},
    ),
    ("pylock", "packages.archive"): (
        pylock,
        pkg("archive", drop=NO_FILES),
        {"url": "https://e.example/six.tar.gz", "hashes": {"sha256": H1}},
        {"url": "https://e.example/six.tar.gz", "hashes": {"sha256": H2}},
    ),
    ("pylock", "packages.sdist"): (
        pylock,
        pkg("sdist"),
        {"url": PY_SDIST, "hashes": {"sha256": H1}},
        {"url": PY_SDIST, "hashes": {"sha256": H2}},
    ),
    ("pylock", "packages.wheels"): (pylock, wheel_hash, H1, H2),
    ("pylock", "packages.attestation-identities"): (
        pylock,
        pkg("attestation-identities"),
        [{"kind": "GitHub", "repository": "a/six"}],
        [{"kind": "GitHub", "repository": "b/six"}],
    ),
    ("pylock", "packages.tool"): (pylock, pkg("tool"), {"x": {"y": 1}}, {"x": {"y": 2}}),
    ("uv.lock", "version"): (uvlock, top("version"), 1, 2),
    ("uv.lock", "revision"): (uvlock, top("revision"), 2, 3),
    ("uv.lock", "requires-python"): (uvlock, top("requires-python"), ">=3.11", ">=3.12"),
    ("uv.lock", "resolution-markers"): (
        uvlock,
        top("resolution-markers"),
        ["sys_platform == 'linux'"],
        ["sys_platform != 'linux'"],
    ),
    ("uv.lock", "supported-markers"): (
        uvlock,
        top("supported-markers"),
        ["sys_platform == 'linux'"],
        ["sys_platform != 'linux'"],
    ),
    ("uv.lock", "required-markers"): (
        uvlock,
        top("required-markers"),
        ["sys_platform == 'linux'"],
        ["sys_platform != 'linux'"],
    ),
    ("uv.lock", "conflicts"): (
        uvlock,
        top("conflicts"),
        [[{"package": "d", "extra": "a"}, {"package": "d", "extra": "b"}]],
        [[{"package": "d", "extra": "a"}, {"package": "d", "extra": "c"}]],
    ),
    ("uv.lock", "options.* (resolution-mode, prerelease-mode, exclude-newer...)"): (
        uvlock,
        top("options"),
        {"resolution-mode": "highest", "exclude-newer-package": {"six": "2025-01-01T00:00:00Z"}},
        {"resolution-mode": "highest", "exclude-newer-package": {"six": "2025-02-01T00:00:00Z"}},
    ),
    ("uv.lock", "manifest.members"): (uvlock, sub("manifest", "members"), ["a"], ["a", "b"]),
    ("uv.lock", "manifest.requirements"): (uvlock, sub("manifest", "requirements"), REQ, REQ2),
    ("uv.lock", "manifest.constraints"): (uvlock, sub("manifest", "constraints"), REQ, REQ2),
    ("uv.lock", "manifest.overrides"): (uvlock, sub("manifest", "overrides"), REQ, REQ2),
    ("uv.lock", "manifest.build-constraints"): (uvlock, sub("manifest", "build-constraints"), REQ, REQ2),
    ("uv.lock", "manifest.dependency-groups"): (
        uvlock,
        sub("manifest", "dependency-groups"),
        {"dev": REQ},
        {"dev": REQ2},
    ),
    ("uv.lock", "manifest.dependency-metadata"): (
        uvlock,
        sub("manifest", "dependency-metadata"),
        [{"name": "x", "version": "1"}],
        [{"name": "x", "version": "2"}],
    ),
    ("uv.lock", "package.version"): (uvlock, version, "1.17.0", "1.16.0"),
    ("uv.lock", "package.source"): (
        uvlock,
        pkg("source"),
        {"registry": "https://pypi.org/simple"},
        {"editable": "../six"},
    ),
    ("uv.lock", "package.resolution-markers"): (
        uvlock,
        pkg("resolution-markers"),
        ["sys_platform == 'linux'"],
        ["sys_platform != 'linux'"],
    ),
    ("uv.lock", "package.dependencies"): (uvlock, pkg("dependencies"), [{"name": "a"}], [{"name": "b"}]),
    ("uv.lock", "package.optional-dependencies"): (
        uvlock,
        pkg("optional-dependencies"),
        {"x": [{"name": "a"}]},
        {"x": [{"name": "b"}]},
    ),
    ("uv.lock", "package.dev-dependencies"): (
        uvlock,
        pkg("dev-dependencies"),
        {"dev": [{"name": "a"}]},
        {"dev": [{"name": "b"}]},
    ),
    ("uv.lock", "package.sdist"): (
        uvlock,
        pkg("sdist"),
        {"url": PY_SDIST, "hash": f"sha256:{H1}"},
        {"url": PY_SDIST, "hash": f"sha256:{H2}"},
    ),
    ("uv.lock", "package.wheels"): (uvlock, wheel_hash, H1, H2),
    ("uv.lock", "package.metadata.requires-dist"): (
        uvlock,
        meta("requires-dist"),
        [{"name": "a"}],
        [{"name": "a", "specifier": ">=1"}],
    ),
    ("uv.lock", "package.metadata.requires-dev"): (
        uvlock,
        meta("requires-dev"),
        {"dev": [{"name": "a"}]},
        {"dev": [{"name": "b"}]},
    ),
    ("uv.lock", "package.metadata.provides-extras"): (uvlock, meta("provides-extras"), ["a"], ["b"]),
    ("both", "any other key (top level or package)"): (uvlock, pkg("future-key"), "a", "b"),
}


def documented() -> dict[tuple[str, str], str]:
    text = DOC.read_text()
    table = text[text.index("<!-- fields -->") : text.index("<!-- /fields -->")]
    rows = re.findall(
        r"^\| (pylock|uv\.lock|both) \| `?([^|`]+?)`?( \([^|]*\))? \| (shown|hidden|refused) \|", table, re.MULTILINE
    )
    return {(fmt, field + (extra or "")): how for fmt, field, extra, how in rows}


def test_the_table_lists_every_case() -> None:
    assert set(documented()) == set(CASES)


def lock(doc: Doc, label: str) -> Any:
    return parse_lock(tomlkit.dumps(doc), label=label)


@pytest.mark.parametrize("field", sorted(CASES), ids=lambda f: f"{f[0]}:{f[1]}")
def test_field_is_handled_as_documented(field: tuple[str, str]) -> None:
    base, put, a, b = CASES[field]
    old, new = base(), base()
    put(old, copy.deepcopy(a))
    put(new, copy.deepcopy(b))
    if documented()[field] == "refused":
        with pytest.raises(InvalidLock, match="is not supported"):
            lock(new, "new")
        return
    diff = diff_locks(lock(old, "old"), lock(new, "new"))
    if documented()[field] == "shown":
        assert diff.has_changes(), render_terminal(diff, show_all=True)
    else:
        assert not diff.has_changes() and diff.has_changes(show_all=True), render_terminal(diff, show_all=True)
    same = diff_locks(lock(old, "old"), lock(copy.deepcopy(old), "again"))
    assert not same.has_changes(show_all=True)
