"""scripts/mutate.py: the mirror folder it picks, the config it writes, the counts it prints.

The mutmut run itself is not run here (hours on two cores; docs/testing.md gives the figures)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutate", ROOT / "scripts" / "mutate.py")
assert _spec is not None and _spec.loader is not None
mutate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutate)


@pytest.mark.parametrize(
    ("module", "tests"),
    [
        ("src/envforge/patching/states.py", "tests/patching"),
        ("src/envforge/lock/markerspace.py", "tests/lock"),
        ("src/envforge/__main__.py", "tests"),
    ],
)
def test_the_mirror_folder_of_a_module(module: str, tests: str) -> None:
    assert mutate._mirror_tests(Path(module)) == Path(tests)


def test_the_config_goes_into_the_scratch_copy_only(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    mutate._configure(tmp_path, "src/envforge/patching/states.py", ["tests/patching"], ["-m", 'not "slow"'])
    assert (tmp_path / "pyproject.toml").read_text() == (
        '[project]\nname = "x"\n\n[tool.mutmut]\n'
        'source_paths = ["src/envforge/patching/states.py"]\n'
        'pytest_add_cli_args_test_selection = ["tests/patching"]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q", "-m", "not \\"slow\\""]\n'
        'also_copy = ["src/envforge", "lockfiles", "recipes", "patchsets", "benchmarks", "docs", "README.md"]\n'
    )
    assert (tmp_path / "mutants" / "src").is_dir()  # exists before mutmut starts (docs/testing.md)
    with pytest.raises(SystemExit, match=r"already has \[tool.mutmut\]"):
        mutate._configure(tmp_path, "src/envforge/patching/states.py", ["tests/patching"], [])


def test_counts_and_survivors_from_mutmut_results() -> None:
    results = (
        "    envforge.patching.states.x_a__mutmut_1: killed\n"
        "    envforge.patching.states.x_a__mutmut_2: survived\n"
        "    envforge.patching.states.x_b__mutmut_1: no tests\n"
        "    envforge.patching.states.x_b__mutmut_2: timeout\n"
        "    envforge.patching.states.x_b__mutmut_3: killed\n"
        "a line without a status\n"
    )
    counts, survivors = mutate._counts(results)
    assert counts == {
        "killed": 2,
        "survived": 1,
        "timeout": 1,
        "suspicious": 0,
        "no tests": 1,
        "skipped": 0,
        "not checked": 0,
    }
    assert survivors == ["envforge.patching.states.x_a__mutmut_2"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["src/envforge/nosuch.py"], "not a module under src/envforge/"),
        (["README.md"], "not a module under src/envforge/"),
        (["src/envforge/patching/states.py", "tests/nosuch"], "no such test path: tests/nosuch"),
    ],
)
def test_bad_arguments_exit_2_naming_them(args: list[str], said: str) -> None:
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "mutate.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and said in res.stderr and "Traceback" not in res.stderr


def test_the_summary_scores_the_mutants_run() -> None:
    counts = {
        "killed": 58,
        "survived": 2,
        "timeout": 0,
        "suspicious": 0,
        "no tests": 0,
        "skipped": 0,
        "not checked": 156,
    }
    assert mutate._summary("src/envforge/patching/resolution.py", counts) == (
        "src/envforge/patching/resolution.py: 58 killed of 60 checked (96.7 %); 2 survived, 156 not checked"
    )
    assert (
        mutate._summary("m.py", dict.fromkeys(counts, 0) | {"killed": 68}) == "m.py: 68 killed of 68 checked (100.0 %)"
    )
    assert mutate._summary("m.py", dict.fromkeys(counts, 0)) == "m.py: 0 killed of 0 checked (no mutants)"
