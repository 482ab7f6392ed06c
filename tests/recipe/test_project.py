"""The project's defaults: which recipe and environment a command given none uses (as uv and pixi
pick the project's own), from ``envforge.toml``, ``recipes/`` and ``envs/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.recipe.project import Project
from envforge.recipe.scaffold import embedded_root


def recipe(root: Path, name: str, variants: tuple[str, ...] = ()) -> Path:
    path = root / "recipes" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'[recipe]\nname = "{name}"\npython = "3.12"\n\n[packages]\nsix = "==1.16.0"\n'
    text += "".join(f"\n[variant.{v}]\n" for v in variants)
    path.write_text(text)
    return path


def built(root: Path, *names: str) -> None:
    for name in names:
        (root / "envs" / ".generations" / name).mkdir(parents=True)
        (root / "envs" / name).symlink_to(Path(".generations") / name)


def test_the_only_recipe_is_the_default(tmp_path: Path) -> None:
    own = recipe(tmp_path, "team")
    project = Project(tmp_path)
    assert project.default_recipe() == own
    assert project.recipe_path(None) == own
    assert project.default_environment() == "team-default"


def test_the_only_variant_names_the_environment(tmp_path: Path) -> None:
    recipe(tmp_path, "team", ("cu128",))
    assert Project(tmp_path).default_environment() == "team-cu128"


def test_several_variants_default_to_the_default_variant(tmp_path: Path) -> None:
    recipe(tmp_path, "team", ("cu128", "default"))
    assert Project(tmp_path).default_environment() == "team-default"


def test_the_project_names_its_default(tmp_path: Path) -> None:
    recipe(tmp_path, "alpha")
    beta = recipe(tmp_path, "beta")
    (tmp_path / "envforge.toml").write_text('[project]\ndefault = "beta"\n')
    built(tmp_path, "alpha-default")
    project = Project(tmp_path)
    assert project.named_default() == "beta"
    assert project.default_recipe() == beta
    assert project.default_environment() == "beta-default"  # the named default wins over the only env


def test_quickstart_among_several_recipes(tmp_path: Path) -> None:
    recipe(tmp_path, "alpha")
    own = recipe(tmp_path, "quickstart")
    assert Project(tmp_path).default_recipe() == own
    assert Project(tmp_path).default_environment() == "quickstart-default"


def test_no_recipe_is_the_embedded_quickstart(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    assert Project(tmp_path).default_recipe() == embedded_root() / "recipes" / "quickstart.toml"
    assert Project(tmp_path / "nothing").default_recipe() == embedded_root() / "recipes" / "quickstart.toml"
    assert Project(tmp_path).default_environment() == "quickstart-default"


def test_the_only_environment_is_the_default_environment(tmp_path: Path) -> None:
    recipe(tmp_path, "alpha")
    recipe(tmp_path, "beta")
    built(tmp_path, "beta-cu128")
    assert Project(tmp_path).default_environment() == "beta-cu128"


def test_several_recipes_and_no_default_say_how_to_name_one(tmp_path: Path) -> None:
    recipe(tmp_path, "alpha")
    recipe(tmp_path, "beta")
    with pytest.raises(InputError) as err:
        Project(tmp_path).default_recipe()
    assert err.value.message == (
        f"which recipe? {tmp_path / 'recipes'} has alpha, beta and {tmp_path / 'envforge.toml'} names no default"
    )
    assert err.value.hint == (
        "name one (e.g. `envforge up alpha`), or set the project's default: "
        'default = "alpha" under [project] in envforge.toml'
    )
    built(tmp_path, "alpha-default", "beta-default")
    with pytest.raises(InputError, match="^which recipe"):
        Project(tmp_path).default_environment()


def test_a_named_default_that_does_not_exist(tmp_path: Path) -> None:
    recipe(tmp_path, "alpha")
    (tmp_path / "envforge.toml").write_text('[project]\ndefault = "gone"\n')
    with pytest.raises(InputError) as err:
        Project(tmp_path).recipe_path(None)
    assert err.value.message == (
        f"{tmp_path / 'envforge.toml'} names the default recipe 'gone', but {tmp_path / 'recipes'} has no gone.toml"
    )
    assert err.value.hint == "known recipes: alpha"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[project]\ndefault = 3\n", "[project] default must be a recipe name (a string), not 3"),
        ('[project]\ndefault = ""\n', "[project] default must be a recipe name (a string), not ''"),
        ("[project\n", "not valid TOML: "),
    ],
)
def test_an_invalid_project_file(tmp_path: Path, text: str, message: str) -> None:
    recipe(tmp_path, "alpha")
    (tmp_path / "envforge.toml").write_text(text)
    with pytest.raises(InputError) as err:
        Project(tmp_path).named_default()
    assert err.value.message.startswith(f"{tmp_path / 'envforge.toml'}: {message}")


def test_a_project_file_without_a_default(tmp_path: Path) -> None:
    own = recipe(tmp_path, "alpha")
    (tmp_path / "envforge.toml").write_text("[other]\nx = 1\n")
    assert Project(tmp_path).named_default() is None
    assert Project(tmp_path).default_recipe() == own
