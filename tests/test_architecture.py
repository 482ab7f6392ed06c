"""The architecture contracts of docs/architecture.md, kept by CI.

- import-linter (``.importlinter``): the stage packages import only from the stages below them, and the
  independence contracts (bench and verify; lockdiff, patching and drafter) hold; no cycle between stages.
- deptry (``[tool.deptry]`` in pyproject.toml): no undeclared import and no unused dependency.
- mypy ``--strict`` (``[tool.mypy]`` in pyproject.toml) over ``src/envforge``: no type error.
- ruff's formatter (``[tool.ruff]`` in pyproject.toml, 120 columns): every Python file of the checkout is
  formatted (``ruff format --check``).
- No module over 600 lines (as the formatter writes them; the house style: modules under about 600 lines);
  no top-level modules besides ``__init__`` and ``__main__``.
- Function-level imports only for start-up time of heavy optional dependencies, each marked ``# lazy: ...``.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "envforge"
MAX_LINES = 600


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def test_import_contracts_are_kept() -> None:
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " 0 broken." in proc.stdout


def test_dependencies_are_declared_and_used() -> None:
    proc = subprocess.run([_tool("deptry"), "src"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_the_source_type_checks_under_mypy_strict() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "src/envforge"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.startswith("Success: no issues found")


def test_every_python_file_is_formatted() -> None:
    proc = subprocess.run([_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.stdout.rstrip().endswith("files already formatted")


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "data" not in p.relative_to(SRC).parts)


#: Probe scripts run in the environment's own interpreter (envforge.core.probe), not envforge's: they import
#: the optional GPU packages of that environment inside the function that tries each one.
PROBES = ("env_probe.py", "gpu_probe.py")


def test_no_module_is_over_600_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_top_level_holds_only_the_entry_points() -> None:
    assert sorted(p.name for p in SRC.glob("*.py")) == ["__init__.py", "__main__.py"]


def _marked_lazy(lines: list[str], node: ast.Import | ast.ImportFrom) -> bool:
    """``# lazy:`` on the import's own lines, or on the comment line just above its run of imports."""
    if any("# lazy:" in lines[i] for i in range(node.lineno - 1, node.end_lineno)):
        return True
    i = node.lineno - 2
    while i >= 0 and lines[i].strip().startswith(("import ", "from ")):
        i -= 1
    return i >= 0 and lines[i].strip().startswith("# lazy:")


def test_function_level_imports_are_only_the_marked_lazy_ones() -> None:
    found = []
    for path in (p for p in _modules() if p.name not in PROBES):
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and not _marked_lazy(lines, node):
                        found.append(f"{path.relative_to(SRC)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert sorted(set(found)) == []


def test_docs_architecture_lists_every_module_under_its_package() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    missing = []
    for path in _modules():
        rel = path.relative_to(SRC)
        if len(rel.parts) == 1:
            continue
        head = f"### `{rel.parts[0]}/`"
        section = doc.split(head, 1)[1].split("\n### ", 1)[0] if head in doc else ""
        inner = "/".join(rel.parts[1:])
        name = inner[: -len("/__init__.py")] + "/" if inner.endswith("/__init__.py") else inner
        if inner != "__init__.py" and f"`{name}`" not in section:
            missing.append(str(rel))
    assert missing == []
