"""Checks across recipe keys that :func:`envforge.recipe.load.load_recipe` makes (issue 27).

A ``[build-from-source]`` opt-in without ``[recipe] build-constraints`` would build an sdist with an
unpinned backend (fault suite N83): refused at load, exit 2 through the real CLI, before uv runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envforge.recipe.load import load_recipe
from envforge.recipe.model import RecipeError

HEAD = '[recipe]\nname = "sd"\npython = "3.12"\nresolution = "no-deps"\n'


def recipe(tmp_path: Path, text: str) -> Path:
    (tmp_path / "recipes").mkdir(exist_ok=True)
    path = tmp_path / "recipes" / "sd.toml"
    path.write_text(text)
    return path


def test_build_from_source_without_build_constraints_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = recipe(
        tmp_path,
        HEAD + '\n[packages]\nsdpkg = "==1.0"\n\n[build-from-source]\nsdpkg = "no wheel upstream"\n'
        '\n[variant.a]\n\n[variant.b.build-from-source]\nother = "also none"\n',
    )
    with pytest.raises(RecipeError) as e:
        load_recipe(path)
    why = (
        "is built from source at install time, but [recipe] build-constraints pins no build backend, so the "
        "build would use whatever version uv finds that day; pin the backend its pyproject.toml [build-system] "
        'requires, e.g. build-constraints = ["setuptools==80.9.0"]'
    )
    assert str(e.value) == "\n".join(
        [
            f"recipe {path} is invalid (2 problems):",
            f"  {path}:10: build-from-source.sdpkg: {why}",
            f"  {path}:15: variant.b.build-from-source.other: {why}",
            '  hint: see docs/recipes.md, "Source builds (B28)"',
        ]
    )
    assert e.value.exit_code == 2


@pytest.mark.parametrize("constraints", ["build-constraints = []\n", ""])
def test_the_cli_refuses_it_before_uv_runs(tmp_path: Path, constraints: str) -> None:
    recipe(tmp_path, HEAD + constraints + '\n[packages]\nsdpkg = "==1.0"\n\n[build-from-source]\nsdpkg = "x"\n')
    for args in (("lock", "sd"), ("lock", "sd", "--check")):
        res = subprocess.run(
            [sys.executable, "-m", "envforge", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 2, res.stderr
        assert (
            "build-from-source.sdpkg: is built from source at install time, but [recipe] build-constraints "
            "pins no build backend" in res.stderr
        )
    assert not (tmp_path / "lockfiles").exists()


def test_pinned_backend_or_an_empty_opt_in_table_loads(tmp_path: Path) -> None:
    pinned = recipe(
        tmp_path,
        HEAD.replace('"no-deps"\n', '"no-deps"\nbuild-constraints = ["setuptools==80.9.0"]\n')
        + '\n[packages]\nsdpkg = "==1.0"\n\n[build-from-source]\nsdpkg = "no wheel upstream"\n',
    )
    assert load_recipe(pinned).resolve().source_builds == {"sdpkg": "no wheel upstream"}
    empty = recipe(tmp_path, HEAD + '\n[packages]\nsdpkg = "==1.0"\n\n[build-from-source]\n')
    assert load_recipe(empty).resolve().source_builds == {}


def test_a_provided_or_excluded_distribution_named_as_a_package_or_override_too_is_refused(tmp_path: Path) -> None:
    """``[provided]`` and ``[excludes]`` names are never locked: asking for one in ``packages`` or
    ``overrides`` (base or variant) is refused, naming key and line; a variant's own excludes count
    for that variant only."""
    path = tmp_path / "r.toml"
    path.write_text(
        '[recipe]\nname = "r"\npython = "3.12"\n\n'
        '[packages]\nTorch = "==2.11.0"\nTorchVision = "==0.26"\napp = "==1"\n\n'
        '[overrides]\ntorchaudio = { version = "==2", reason = "r" }\n\n'
        '[provided]\ntorch = "==2.11.0+cu130"\n\n'
        '[excludes]\ntorchvision = "a CUDA build"\nTorchAudio = "a CUDA build"\n\n'
        '[variant.a]\npackages = { cudalib = "==1" }\nexcludes = { cudalib = "not here" }\n\n'
        '[variant.b]\npackages = { cudalib = "==1" }\noverrides = { torchvision = { version = "==1", reason = "r" } }\n'
    )
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    assert exc.value.message == (
        f"recipe {path} is invalid (5 problems):\n"
        f"  {path}:6: packages.Torch: 'Torch' is declared in [provided] (the base interpreter provides it, "
        "envforge never installs it); remove one of the two\n"
        f"  {path}:7: packages.TorchVision: 'TorchVision' is declared in [excludes] (left out of the resolution); "
        "remove one of the two\n"
        f"  {path}:11: overrides.torchaudio: 'torchaudio' is declared in [excludes] (left out of the resolution); "
        "remove one of the two\n"
        f"  {path}:21: variant.a.packages.cudalib: 'cudalib' is declared in [excludes] (left out of the "
        "resolution); remove one of the two\n"
        f"  {path}:26: variant.b.overrides.torchvision: 'torchvision' is declared in [excludes] (left out of the "
        "resolution); remove one of the two"
    )
