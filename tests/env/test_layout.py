"""``resolve_environment``: an environment argument as a name under ``envs/`` or a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.env.layout import resolve_environment
from envforge.recipe.project import Project


def test_a_missing_path_is_named_as_a_path_and_a_missing_name_lists_envs(tmp_path: Path) -> None:
    project = Project(tmp_path)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "envs" / "quickstart-default").mkdir(parents=True)
    with pytest.raises(InputError) as exc:  # before: "no environment '/…/nope' in …/envs"
        resolve_environment(project, str(tmp_path / "nope"), default="d")
    assert (exc.value.message, exc.value.hint) == (
        f"environment {tmp_path / 'nope'} does not exist",
        "give the path of a virtual environment, or an environment name under envs/",
    )
    with pytest.raises(InputError) as exc:
        resolve_environment(project, "nope", default="d")
    assert (exc.value.message, exc.value.hint) == (
        f"no environment 'nope' in {tmp_path / 'envs'}",
        "build it with `envforge build`; existing: quickstart-default",
    )
    assert (
        resolve_environment(project, None, default="quickstart-default").path
        == tmp_path / "envs" / "quickstart-default"
    )
