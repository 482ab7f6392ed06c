"""Kernel and compile caches live in the generation (field case B49), with the real uv, a real
``envforge build`` and flashinfer 0.6.4's own code computing where its JIT kernels go.

Before: every generation and CUDA variant shared ``~/.cache/flashinfer/<version>/<arch>``, so a
rollback ran kernels compiled for the other generation.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.env.profile import CACHE_VARIABLES, cache_variables, install, installed_problems, read_installed
from tests.conftest import cached_wheel
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]
NAMES = sorted(CACHE_VARIABLES)
# What a grandchild of the env's interpreter sees, with flashinfer's own assignments of
# flashinfer/jit/env.py run as written (as the B49 input does).
INNER = r"""
import ast, json, os, pathlib, sysconfig
sp = pathlib.Path(sysconfig.get_paths()["purelib"])
ns = {"os": os, "pathlib": pathlib}
for node in ast.parse((sp / "flashinfer/jit/env.py").read_text()).body:
    if isinstance(node, ast.AnnAssign) and node.target.id in ("FLASHINFER_BASE_DIR", "FLASHINFER_CACHE_DIR"):
        exec(compile(ast.Module([node], []), "env.py", "exec"), ns)
print(json.dumps({"env": {k: os.environ.get(k) for k in NAMES}, "flashinfer": str(ns["FLASHINFER_CACHE_DIR"])}))
""".replace("NAMES", repr(NAMES))
OUTER = (
    "import subprocess, sys; sys.stdout.write(subprocess.run([sys.executable, '-c', sys.argv[1]], "
    "capture_output=True, text=True, check=True).stdout)"
)


def envforge(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}
    )


def child_sees(python: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    base = {k: v for k, v in os.environ.items() if k not in CACHE_VARIABLES}
    out = subprocess.run(
        [str(python), "-c", OUTER, INNER], capture_output=True, text=True, timeout=120, env={**base, **(env or {})}
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def expected(gen: Path) -> dict[str, str]:
    return {
        "FLASHINFER_WORKSPACE_BASE": str(gen),
        "SGLANG_CACHE_DIR": f"{gen}/.cache/sglang",
        "SGLANG_DG_CACHE_DIR": f"{gen}/.cache/deep_gemm",
        "TORCHINDUCTOR_CACHE_DIR": f"{gen}/.cache/torchinductor",
        "TRITON_CACHE_DIR": f"{gen}/.cache/triton",
        "VLLM_CACHE_ROOT": f"{gen}/.cache/vllm",
    }


@pytest.fixture
def project(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    idx.add(cached_wheel("flashinfer-python", "0.6.4"))
    for v in ("1.0", "2.0"):
        idx.add(make_wheel(tmp_path / "w", "model-kernels", v))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    with serve(idx):
        (proj / "recipes" / "fi.toml").write_text(
            f'[recipe]\nname = "fi"\npython = "3.12"\nresolution = "no-deps"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nflashinfer-python = "==0.6.4"\nmodel-kernels = "==1.0"\n'
        )
        yield proj


def test_each_generation_compiles_into_its_own_cache_and_rollback_goes_back_to_it(project: Path) -> None:
    assert envforge(project, "lock", "fi").returncode == 0
    first = envforge(project, "build", "fi")
    assert first.returncode == 0, first.stderr
    g1 = (project / "envs" / ".generations" / "fi-default" / "g0001").resolve()
    step = next(line for line in first.stderr.splitlines() if line.startswith("  env-profile "))
    assert step.endswith(" s  no env profile; 6 kernel caches under g0001/")
    python = project / "envs" / "fi-default" / "bin" / "python"  # through the link, as users start it
    seen = child_sees(python)
    assert seen == {"env": expected(g1), "flashinfer": f"{g1}/.cache/flashinfer"}
    sp = next(g1.glob("lib/python3*/site-packages"))
    assert read_installed(sp).caches == expected(g1)  # type: ignore[union-attr]
    assert json.loads((sp / ".envforge" / "env-profile.json").read_text())["caches"] == expected(g1)

    recipe = project / "recipes" / "fi.toml"
    recipe.write_text(recipe.read_text().replace('"==1.0"', '"==2.0"'))
    assert envforge(project, "lock", "fi").returncode == 0
    assert envforge(project, "build", "fi").returncode == 0
    g2 = g1.parent / "g0002"
    assert child_sees(python) == {"env": expected(g2), "flashinfer": f"{g2}/.cache/flashinfer"}
    assert expected(g1)["TRITON_CACHE_DIR"] != expected(g2)["TRITON_CACHE_DIR"]
    assert envforge(project, "verify", "fi-default").returncode == 0  # the hook is envforge's own

    assert envforge(project, "rollback", "fi-default").returncode == 0
    assert child_sees(python)["flashinfer"] == f"{g1}/.cache/flashinfer"
    # A variable the user exports wins over the generation's directory (setdefault, as for profiles).
    mine = child_sees(python, {"TRITON_CACHE_DIR": "/srv/warm/triton"})
    assert mine["env"] == {**expected(g1), "TRITON_CACHE_DIR": "/srv/warm/triton"}  # type: ignore[index]


def test_cache_variables_skip_what_the_profile_sets_the_recipe_opt_out() -> None:
    assert cache_variables("/e/g0003", {}) == expected(Path("/e/g0003"))
    shared = cache_variables("/e/g0003", {"FLASHINFER_WORKSPACE_BASE": "/srv/warm", "NCCL_DEBUG": "WARN"})
    assert sorted(shared) == [
        "SGLANG_CACHE_DIR",
        "SGLANG_DG_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "VLLM_CACHE_ROOT",
    ]


def test_install_records_caches_only_for_a_venv_and_can_leave_them_out(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    assert install(bare, None, {}).files == ()  # not a venv's site-packages: nothing to isolate
    sp = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    done = install(sp, None, {})
    assert (done.files, done.caches) == (("envforge-env.pth", "_envforge_env.py"), expected(tmp_path / "venv"))
    assert "CACHES = {" in (sp / "_envforge_env.py").read_text()
    assert installed_problems(sp) == ()
    off = install(sp, "p", {"NCCL_DEBUG": "WARN"}, caches=False)
    assert off.caches == {} and "CACHES" not in (sp / "_envforge_env.py").read_text()
    opted = install(sp, "p", {"TRITON_CACHE_DIR": "/srv/warm/triton"})
    assert "TRITON_CACHE_DIR" not in opted.caches and len(opted.caches) == 5


def test_verify_names_caches_recorded_for_another_generation(tmp_path: Path) -> None:
    sp = tmp_path / "g0002" / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    install(sp, None, {})
    record = sp / ".envforge" / "env-profile.json"
    data = json.loads(record.read_text())
    data["caches"] = expected(tmp_path / "g0001")
    record.write_text(json.dumps(data))
    problems = installed_problems(sp)
    assert problems[0] == (
        f"{record}: its kernel caches are not under this generation {tmp_path / 'g0002'} "
        "(copied from another environment?)"
    )
    assert ast.parse((sp / "_envforge_env.py").read_text())  # the hook itself still parses
