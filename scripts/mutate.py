"""Mutation testing of one envforge module against its tests, with mutmut 3 (issue 47).

Usage (from a checkout with the development install and ``pip install -e '.[test,mutation]'``)::

    python scripts/mutate.py src/envforge/patching/states.py            # against tests/patching/
    python scripts/mutate.py src/envforge/lock/markerspace.py tests/lock/test_markerspace.py
    python scripts/mutate.py src/envforge/patching/states.py --only 'x_compare_state__mutmut_*'

What it does, so that the mutants are what the tests import:

- copies the working tree (``git ls-files``: committed and uncommitted edits, never ``.venv`` or
  ``mutants``) into a scratch directory (``--workdir``, default a new temporary directory) and
  writes ``[tool.mutmut]`` into that copy's ``pyproject.toml`` only;
- runs mutmut in a venv of this venv's base interpreter whose ``.pth`` file puts ``mutants/src``,
  ``mutants`` and this venv's site-packages on ``sys.path`` (:func:`_venv`): the editable
  install's import hook (which would import the checkout's unmutated ``src/envforge``) never runs,
  ``python -m envforge`` in a test's subprocess imports the mutant, no ``PYTHONPATH`` leaks into the
  interpreters the tests build, and ``mutants/`` exists before the run (a path missing at start-up
  is cached as unimportable);
- prints one line of counts (killed, survived, timeout, suspicious, no tests, skipped) and the
  name of every survivor, for a person to sort into equivalent or "needs a test".

Subprocess tests (``python -m envforge`` in a child, with the test's ``sys.executable``) see the mutant:
mutmut switches it on through the ``MUTANT_UNDER_TEST`` environment variable, which children inherit.
But mutmut runs, for each mutant, only the tests it saw call the function in its own process: a
function reached only through a child process is never tested against its mutants (they "survive");
pin such a verdict with an in-process call as well.

Exit status: 0 when the run finished (whatever the score), 2 on bad arguments, mutmut's own status
when it fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALSO_COPY = ["src/envforge", "lockfiles", "recipes", "patchsets", "benchmarks", "docs", "README.md"]
STATUSES = ("killed", "survived", "timeout", "suspicious", "no tests", "skipped", "not checked")


def _mirror_tests(module: Path) -> Path:
    """``src/envforge/<pkg>/<mod>.py`` -> ``tests/<pkg>/`` (the mirror folder, docs/architecture.md)."""
    parts = module.relative_to("src/envforge").parts
    return Path("tests", *parts[:-1]) if len(parts) > 1 else Path("tests")


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items) + "]"


def _copy_tree(dest: Path) -> None:
    """Copy every file git knows (tracked or untracked, not ignored) as it is now in the working tree."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in filter(None, names):
        rel = Path(os.fsdecode(raw))
        src = ROOT / rel
        if not src.is_file():  # deleted in the working tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def _configure(dest: Path, module: str, tests: list[str], pytest_args: list[str]) -> None:
    pyproject = dest / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    if "[tool.mutmut]" in text:
        raise SystemExit("error: pyproject.toml already has [tool.mutmut]; remove it (this script writes its own)")
    pyproject.write_text(
        text + "\n[tool.mutmut]\n"
        f"source_paths = {_toml_list([module])}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        f"pytest_add_cli_args = {_toml_list(['-p', 'no:cacheprovider', '-x', '-q', *pytest_args])}\n"
        f"also_copy = {_toml_list(ALSO_COPY)}\n",
        encoding="utf-8",
    )
    (dest / "mutants" / "src").mkdir(parents=True, exist_ok=True)


def _venv(work: Path) -> Path:
    """A venv ``work/.venv`` of this venv's base interpreter whose ``_mutants.pth`` puts
    ``mutants/src``, ``mutants`` and this venv's site-packages on ``sys.path``; its python.

    Paths named in a ``.pth`` file are added as they are, not as site directories, so the development
    venv's own ``.pth`` files (the editable install's import hook, which would import the checkout's
    unmutated ``src/envforge``) never run; ``sys.executable`` of the tests is this venv's python, so
    ``python -m envforge`` in a test's subprocess imports the mutant too, and no ``PYTHONPATH`` leaks
    into the interpreters the tests build (their venvs would import the development venv's packages)."""
    venv = work / ".venv"
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    paths = [work / "mutants" / "src", work / "mutants", Path(sysconfig.get_paths()["purelib"])]
    # A test's child (``python -m envforge`` in its own project directory) records trampoline hits in
    # mutmut's "stats" pass, which reads [tool.mutmut] from the working directory: load it from ``work``.
    preload = (
        "import os; exec(\"if 'MUTANT_UNDER_TEST' in os.environ:\\n import mutmut.configuration as c\\n"
        f' d = os.getcwd(); os.chdir({str(work)!r}); c.config(); os.chdir(d)")\n'
    )
    (Path(site) / "_mutants.pth").write_text("".join(f"{p}\n" for p in paths) + preload, encoding="utf-8")
    return python


def _counts(results: str) -> tuple[dict[str, int], list[str]]:
    """Count ``mutmut results --all true`` lines (``name: status``); return counts and survivors."""
    counts = dict.fromkeys(STATUSES, 0)
    survivors = []
    for line in results.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if not sep:
            continue
        counts[status] = counts.get(status, 0) + 1
        if status == "survived":
            survivors.append(name)
    return counts, survivors


def _summary(module: str, counts: dict[str, int]) -> str:
    """``<module>: K killed of N checked (S %); ...``: the score over the mutants run (``--only``
    leaves the others "not checked"), then every other count that is not zero."""
    total = sum(v for k, v in counts.items() if k != "not checked")
    score = f"{100 * counts['killed'] / total:.1f} %" if total else "no mutants"
    rest = ", ".join(f"{v} {k}" for k, v in counts.items() if k != "killed" and v)
    return f"{module}: {counts['killed']} killed of {total} checked ({score})" + (f"; {rest}" if rest else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mutmut on one module against its tests (issue 47)")
    parser.add_argument("module", help="src/envforge/<pkg>/<module>.py")
    parser.add_argument("tests", nargs="*", help="test files or folders (default: the module's mirror folder)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="mutant names to run (mutmut's globs), repeatable; default all",
    )
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (default 2)")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a new temporary one, kept)")
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra pytest argument, e.g. --pytest-arg=-m --pytest-arg='not slow'",
    )
    args = parser.parse_args(argv)
    module = Path(args.module)
    if module.is_absolute():
        module = module.relative_to(ROOT)
    if module.suffix != ".py" or not (ROOT / module).is_file() or module.parts[:2] != ("src", "envforge"):
        parser.error(f"{args.module}: not a module under src/envforge/")
    tests = args.tests or [str(_mirror_tests(module))]
    missing = [t for t in tests if not (ROOT / t).exists()]
    if missing:
        parser.error(f"no such test path: {', '.join(missing)}")
    if shutil.which("git") is None:
        parser.error("git is needed to copy the working tree")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="envforge-mutate-"))
    if work.exists() and any(work.iterdir()):
        parser.error(f"{work}: not empty (give a new --workdir)")
    work.mkdir(parents=True, exist_ok=True)
    _copy_tree(work)
    _configure(work, str(module), tests, args.pytest_arg)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    python = str(_venv(work))
    print(f"mutating {module} against {' '.join(tests)} in {work}", flush=True)
    run = subprocess.run(
        [python, "-m", "mutmut", "run", "--max-children", str(args.max_children), *args.only], cwd=work, env=env
    )
    if run.returncode != 0:
        print(f"error: mutmut run exited {run.returncode}; the scratch copy stays in {work}", file=sys.stderr)
        return run.returncode
    results = subprocess.run(
        [python, "-m", "mutmut", "results", "--all", "true"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    counts, survivors = _counts(results)
    print(_summary(str(module), counts))
    for name in survivors:
        print(f"  survived: {name}   (show: cd {work} && python -m mutmut show {name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
