"""The extras of envforge-stack (``envforge.core.extras``): the table agrees with pyproject.toml, the
base install leaves the heavy distributions out, and a command whose extra is missing stops with
exit 2 and the install line (in a real process whose import system has the extra's modules taken
out: ``sys.modules[name] = None`` makes both ``import`` and ``find_spec`` see them as absent)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from envforge.core.extras import EXTRAS, MissingExtra, extra_of, missing_extra, require

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
HEAVY = {"scipy", "numpy", "huggingface-hub", "prometheus-client", "ray", "matplotlib", "cyclonedx-python-lib"}
#: Import names whose distribution is named otherwise.
DISTRIBUTION_OF = {"cyclonedx": "cyclonedx-python-lib", "packageurl": "packageurl-python"}


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def test_the_table_is_pyprojects_extras() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        assert _names(extras[extra]) == {DISTRIBUTION_OF.get(m, m).replace("_", "-") for m in modules}, extra


def test_the_base_install_leaves_the_heavy_distributions_out() -> None:
    base = _names(PYPROJECT["project"]["dependencies"])
    assert base & HEAVY == set()
    assert "envforge-stack[bench,drafter,plot,sbom]" in PYPROJECT["project"]["optional-dependencies"]["test"]


def test_extra_of_and_the_error() -> None:
    assert (extra_of("scipy.stats"), extra_of("huggingface_hub.errors"), extra_of("libcst")) == (
        "bench",
        "drafter",
        None,
    )
    err = missing_extra(ModuleNotFoundError("No module named 'scipy'", name="scipy.stats"), "envforge bench compare")
    assert isinstance(err, MissingExtra) and err.exit_code == 2
    assert str(err) == (
        "envforge bench compare needs scipy, which the base install of envforge-stack leaves out\n"
        "  hint: pip install 'envforge-stack[bench]' (uv: uv tool install 'envforge-stack[bench]'), "
        "then run it again"
    )
    assert missing_extra(ModuleNotFoundError("No module named 'libcst'", name="libcst"), "x") is None
    require("bench", "envforge bench")  # installed here: nothing raised


def _without(modules: list[str], argv: list[str]) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys\nfor m in {modules!r}: sys.modules[m] = None\n"
        f"from envforge.cli import main\nsys.exit(main({argv!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "modules, argv, missing, extra",
    [
        (["scipy"], ["bench", "--url", "http://127.0.0.1:9"], "scipy", "bench"),  # before any request
        (["prometheus_client"], ["bench", "--url", "http://127.0.0.1:9"], "prometheus_client", "bench"),
        (["aiohttp"], ["bench", "--url", "http://127.0.0.1:9"], "aiohttp", "bench"),
        (
            ["huggingface_hub"],
            ["drafter", "fetch", "org/drafter", "--revision", "0" * 40, "--dry-run"],
            "huggingface_hub",
            "drafter",
        ),
        (["cyclonedx"], ["sbom", "quickstart-default"], "cyclonedx", "sbom"),
    ],
)
def test_a_command_without_its_extra_is_exit_2_naming_it(
    modules: list[str], argv: list[str], missing: str, extra: str
) -> None:
    res = _without(modules, argv)
    assert (res.returncode, res.stdout) == (2, "")
    command = "envforge " + " ".join(argv[:2] if argv[0] == "drafter" else argv[:1])
    assert res.stderr.splitlines() == [
        f"error: {command} needs {missing}, which the base install of envforge-stack leaves out",
        f"  hint: pip install 'envforge-stack[{extra}]' (uv: uv tool install 'envforge-stack[{extra}]'), "
        "then run it again",
    ]


def test_a_missing_module_of_the_base_install_is_an_internal_error() -> None:
    res = _without(["httpx2"], ["patches", "list"])
    assert res.returncode == 70 and "internal error (a bug in envforge): ModuleNotFoundError" in res.stderr
