"""``envforge lock --check --all`` (issue 44: in a project with several recipes, ``lock --check`` checked
only the default one, so a stale lock of the team's own recipe passed). Real locks by the real uv from
a local PEP 503 index on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.localindex import LocalIndex, make_wheel, serve


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_check_all_checks_every_recipe_and_the_default_says_which_it_checked(tmp_path: Path) -> None:
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    (proj / "envforge.toml").write_text('[project]\ndefault = "a"\n')

    def recipe(name: str, version: str) -> None:
        (proj / "recipes" / f"{name}.toml").write_text(
            f'[recipe]\nname = "{name}"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            f'[packages]\nmodel-kernels = "=={version}"\n'
        )

    with serve(idx):
        recipe("a", "1.0")
        recipe("b", "1.0")
        assert envforge(proj, "lock", "--all").returncode == 0
        recipe("b", "2.0")  # the team's own recipe changed; its lock is stale now
        default = envforge(proj, "lock", "--check")
        every = envforge(proj, "lock", "--check", "--all")
        both = envforge(proj, "lock", "b", "--all")
    assert (default.returncode, default.stdout) == (0, f"{proj / 'lockfiles' / 'pylock.a-default.toml'}: up to date\n")
    assert default.stderr == (
        "checking the project's default recipe (a); 1 other recipe not checked: `envforge lock "
        "--check --all` checks every one\n"
    )
    assert every.returncode == 1
    lines = every.stdout.splitlines()
    assert lines[0] == f"{proj / 'lockfiles' / 'pylock.a-default.toml'}: up to date"
    assert lines[1] == f"{proj / 'lockfiles' / 'pylock.b-default.toml'}: stale"
    assert (both.returncode, both.stderr.splitlines()[0]) == (
        2,
        "error: --all with RECIPE: --all takes every recipe and variant",
    )
