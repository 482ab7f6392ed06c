"""Each hand-written bug of ``scripts/seeded_bugs.toml``, alone, against the tests it names (issue 47).

Usage (from a checkout with the development install)::

    python scripts/seeded_bugs.py                       # every bug
    python scripts/seeded_bugs.py --module verify/versions.py

mutmut's mutants are one kind of bug; these are another, written as a developer would get them
wrong (an off-by-one, a forgotten early return, a comparison of spelled names). The working tree
(committed and uncommitted edits) is copied into a scratch directory, and the tests run in a venv
whose ``.pth`` puts the copy's ``src`` first (as ``scripts/mutate.py`` does for mutants, so CLI
subprocesses import the bug too). Each bug is written into the copy, its tests are run
(``pytest -x -q``), and the module is restored. A line per bug: ``caught`` (the tests failed) or
``MISSED``; then the count.

Exit status: 0 when every bug was caught, 1 when one was missed, 2 on bad arguments or a bug whose
``old`` text is not exactly once in its module (the table is out of date).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutate import ROOT, _copy_tree, _venv  # noqa: E402

TABLE = ROOT / "scripts" / "seeded_bugs.toml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hand-written bugs against the verdict modules' tests")
    parser.add_argument("--module", help="only the bugs of the modules whose path holds this (e.g. verify/versions.py)")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a new temporary one, kept)")
    args = parser.parse_args(argv)
    bugs = tomllib.loads(TABLE.read_text(encoding="utf-8"))["bug"]
    if args.module:
        bugs = [b for b in bugs if args.module in b["module"]]
        if not bugs:
            parser.error(f"{args.module}: no bug in {TABLE.name} names it")
    for b in bugs:
        count = (ROOT / b["module"]).read_text(encoding="utf-8").count(b["old"])
        if count != 1:
            print(f"error: {b['module']}: the text of bug {b['why']!r} occurs {count} times (must be once)")
            return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="envforge-seeded-"))
    work.mkdir(parents=True, exist_ok=True)
    _copy_tree(work)
    # _venv puts work/mutants/src first on sys.path: make that the copy's src
    (work / "mutants").mkdir(exist_ok=True)
    if not (work / "mutants" / "src").exists():
        (work / "mutants" / "src").symlink_to(work / "src")
    python = str(_venv(work))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

    def tests_fail(tests: list[str]) -> bool:
        cmd = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True).returncode != 0

    for tests in dict.fromkeys(tuple(b["tests"]) for b in bugs):  # without a bug they must pass
        if tests_fail(list(tests)):
            print(f"error: {' '.join(tests)} fail without any bug (in {work}); fix them first")
            return 2
    missed = 0
    for b in bugs:
        path = work / b["module"]
        original = path.read_text(encoding="utf-8")
        path.write_text(original.replace(b["old"], b["new"]), encoding="utf-8")
        try:
            caught = tests_fail(b["tests"])
        finally:
            path.write_text(original, encoding="utf-8")
        missed += not caught
        print(
            f"{'caught' if caught else 'MISSED'}  {b['module'].removeprefix('src/envforge/')}: {b['why']}", flush=True
        )
    print(f"{len(bugs) - missed} of {len(bugs)} seeded bugs caught by their tests")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
