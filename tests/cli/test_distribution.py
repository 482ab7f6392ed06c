"""The distribution's own name: ``envforge-stack`` (PyPI's ``envforge`` is an unrelated project).

The import name and the command stay ``envforge``; every install line a user copies names the
distribution, so none of them installs the other project.
"""

import re
import tomllib
from pathlib import Path

import envforge

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_distribution_name_is_not_pypis_envforge():
    assert PROJECT["name"] == "envforge-stack"
    assert PROJECT["scripts"] == {"envforge": "envforge.__main__:run"}
    assert PROJECT["version"] == envforge.__version__


def test_extras_refer_to_the_distribution_itself():
    test = PROJECT["optional-dependencies"]["test"]
    assert [r for r in test if r.startswith("envforge")] == [
        "envforge-stack[bench,drafter,plot,sbom]",
        "envforge-stack[bench-test]",
        "envforge-stack[fleet]",
    ]


def _install_lines() -> list[tuple[str, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "src").rglob("*.py"))]
    pattern = re.compile(r"(?:pip|uv\s+tool|pipx|uv\s+pip)\s+install\s+(?:--?[\w-]+\s+)*'?(envforge[^\s'`]*)")
    return [(f.name, m.group(1)) for f in files for m in pattern.finditer(f.read_text())]


def test_every_install_line_names_the_distribution():
    lines = _install_lines()
    assert ("README.md", "envforge-stack") in lines
    assert ("README.md", "envforge-stack[fleet]") in lines
    assert ("fleet.md", "envforge-stack[fleet]") in lines
    assert ("driver.py", "envforge-stack[fleet]") in lines
    assert ("plot.py", "envforge-stack[plot]") in lines
    assert ("README.md", "envforge-stack[bench]") in lines and ("bench.md", "envforge-stack[bench]") in lines
    assert ("drafters.md", "envforge-stack[drafter]") in lines
    assert ("scaffold.py", "envforge-stack") in lines
    assert [(f, name) for f, name in lines if not name.startswith("envforge-stack")] == []


def test_no_extra_is_named_on_the_bare_import_name():
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "src").rglob("*.py"))]
    assert [f.name for f in files if re.search(r"(?<![\w.-])envforge\[", f.read_text())] == []
