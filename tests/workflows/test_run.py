"""``envforge run [ENV] -- CMD`` (envforge.workflows.run, envforge.cli.run): a command in the live
generation by its resolved path (field case B39), with real builds (real uv, a local index)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.cli.run import split_words
from envforge.core.errors import InputError
from envforge.recipe.project import Project
from envforge.workflows.run import command_environment, plan_run
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )


def fake_generation(root: Path, name: str = "r-default", gen: str = "g0001") -> Path:
    """``envs/<name>`` -> ``.generations/<name>/<gen>`` with an executable ``bin/python``."""
    directory = root / "envs" / ".generations" / name / gen
    (directory / "bin").mkdir(parents=True)
    (directory / "bin" / "python").write_text("#!/bin/sh\n")
    (directory / "bin" / "python").chmod(0o755)
    link = root / "envs" / name
    if link.is_symlink():
        link.unlink()
    link.symlink_to(Path(".generations") / name / gen)
    (root / "recipes").mkdir(exist_ok=True)
    return directory


def test_command_environment_is_an_activated_generation(tmp_path: Path) -> None:
    gen = tmp_path / "g0001"
    base = {"PATH": f"/usr/bin:{gen}/bin:/bin", "PYTHONHOME": "/elsewhere", "HOME": "/h"}
    assert command_environment(gen, base) == {"PATH": f"{gen}/bin:/usr/bin:/bin", "HOME": "/h", "VIRTUAL_ENV": str(gen)}
    assert base["PYTHONHOME"] == "/elsewhere"  # the caller's mapping is not changed


def test_split_words() -> None:
    assert split_words(["--", "python", "-V"]) == (None, ["python", "-V"])
    assert split_words(["r-default", "--", "ls", "--", "-l"]) == ("r-default", ["ls", "--", "-l"])
    assert split_words(["r-default", "--"]) == ("r-default", [])
    with pytest.raises(InputError) as no_dashes:
        split_words(["python", "-V"])
    assert no_dashes.value.message == "envforge run needs -- before the command: envforge run [ENV] -- CMD [ARG...]"
    # issue 44: the hint took the command for an environment (`envforge run python -- ...` then failed)
    assert no_dashes.value.hint == (
        "e.g. envforge run -- python -V (the project's default environment), or envforge run ENV -- python -V"
    )
    # the words as a shell takes them: the suggested command runs when pasted
    with pytest.raises(InputError) as quoted:
        split_words(["python", "-c", "print(1)"])
    assert quoted.value.hint == (
        "e.g. envforge run -- python -c 'print(1)' (the project's default environment), "
        "or envforge run ENV -- python -c 'print(1)'"
    )
    with pytest.raises(InputError) as nothing:
        split_words([])
    assert nothing.value.hint == (
        "e.g. envforge run -- python (the project's default environment), or envforge run ENV -- python"
    )
    with pytest.raises(InputError) as two:
        split_words(["a", "b", "--", "ls"])
    assert two.value.message == "envforge run takes one environment before --, not a b"


def test_plan_run_resolves_the_live_generation(tmp_path: Path) -> None:
    gen = fake_generation(tmp_path)
    plan = plan_run(Project(tmp_path), None, ["python", "-c", "pass"], {"PATH": "/usr/bin:/bin"})
    assert (plan.env, plan.generation) == ("r-default", gen.resolve())
    assert plan.argv == (str(gen.resolve() / "bin" / "python"), "-c", "pass")
    assert plan.environ == {"PATH": f"{gen.resolve()}/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(gen.resolve())}
    assert plan.describe() == f"envforge run: r-default -> g0001 ({gen.resolve()})"
    assert plan_run(Project(tmp_path), None, ["sh", "-c", "x"], {"PATH": "/bin"}).argv[0] == "/bin/sh"


def test_plan_run_refusals(tmp_path: Path) -> None:
    gen = fake_generation(tmp_path)
    with pytest.raises(InputError) as none:
        plan_run(Project(tmp_path), "r-default", [], {"PATH": "/bin"})
    assert (none.value.message, none.value.hint) == ("no command to run", "envforge run [ENV] -- CMD [ARG...]")
    with pytest.raises(InputError) as missing:
        plan_run(Project(tmp_path), "r-default", ["no-such-tool-here"], {"PATH": "/nonexistent"})
    assert missing.value.message == (
        f"command not found: no-such-tool-here (PATH of r-default: {gen.resolve() / 'bin'} first)"
    )
    (gen / "bin" / "python").unlink()
    with pytest.raises(InputError) as broken:
        plan_run(Project(tmp_path), "r-default", ["ls"], {"PATH": "/bin"})
    assert broken.value.message == f"{gen.resolve()} is not a virtual environment (no bin/python)"
    with pytest.raises(InputError, match="^no environment 'other' in "):
        plan_run(Project(tmp_path), "other", ["ls"], {"PATH": "/bin"})


@pytest.fixture
def project(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "model-kernels", "1.0"))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    with serve(idx):
        (proj / "recipes" / "r.toml").write_text(
            f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nmodel-kernels = "==1.0"\n\n[env.default]\nENVFORGE_TEST_FLAG = "on"\n'
        )
        up = envforge(proj, "up")
        assert up.returncode == 0, up.stderr
        yield proj


@pytest.mark.slow
def test_run_in_a_real_built_environment(project: Path) -> None:
    g1 = (project / "envs" / "r-default").resolve()
    assert g1.name == "g0001"
    res = envforge(project, "run", "r-default", "--", "python", "-c", "import sys; print(sys.prefix)")
    assert (res.returncode, res.stdout) == (0, f"{g1}\n")
    assert res.stderr == f"envforge run: r-default -> g0001 ({g1})\n"

    code = (
        "import os, model_kernels; print(os.environ['ENVFORGE_TEST_FLAG'], os.environ['VIRTUAL_ENV'], "
        "model_kernels.__file__.startswith(os.environ['VIRTUAL_ENV']))"
    )
    seen = envforge(project, "run", "--", "python", "-c", code)  # ENV: the project's only environment
    assert (seen.returncode, seen.stdout) == (0, f"on {g1} True\n"), seen.stderr

    failed = envforge(project, "run", "--", "python", "-c", "raise SystemExit(7)")
    assert (failed.returncode, failed.stderr) == (7, f"envforge run: r-default -> g0001 ({g1})\n")

    gone = envforge(project, "run", "--", "no-such-tool-here")
    assert gone.returncode == 2
    assert gone.stderr.startswith("error: command not found: no-such-tool-here (PATH of r-default: ")


@pytest.mark.slow
def test_a_flip_does_not_change_a_running_command(project: Path) -> None:
    g1 = (project / "envs" / "r-default").resolve()
    waiting = subprocess.Popen(
        [
            *ENVFORGE,
            "run",
            "--",
            "python",
            "-c",
            "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); input(); import model_kernels; "
            "print(sys.prefix, model_kernels.__file__)",
        ],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert waiting.stdout is not None and waiting.stdout.readline() == "ready\n"
        rebuilt = envforge(project, "build")  # g0002; envs/r-default flips to it
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert (project / "envs" / "r-default").resolve().name == "g0002"
        out, _ = waiting.communicate("\n", timeout=60)
    finally:
        waiting.kill()
    prefix, module = out.split()
    assert prefix == str(g1)
    assert module.startswith(f"{g1}/lib/python3.") and module.endswith("/site-packages/model_kernels/__init__.py")
    after = envforge(project, "run", "--", "python", "-c", "import sys; print(sys.prefix)")
    assert after.stdout == f"{g1.with_name('g0002')}\n"


@pytest.mark.slow
def test_a_callers_pythonpath_checkout_does_not_shadow_the_environment(project: Path, tmp_path: Path) -> None:
    """B53: a PYTHONPATH naming an unpatched checkout of a package the environment has."""
    checkout = tmp_path / "checkout"
    (checkout / "model_kernels").mkdir(parents=True)
    (checkout / "model_kernels" / "__init__.py").write_text("VERSION = 'the checkout'\n")
    g1 = (project / "envs" / "r-default").resolve()
    code = "import os, model_kernels; print(os.environ.get('PYTHONPATH'), model_kernels.__file__)"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    res = subprocess.run(
        [*ENVFORGE, "run", "--", "python", "-c", code],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"None {g1}/lib/python3.12/site-packages/model_kernels/")
    assert res.stderr.splitlines()[1] == (
        f"warning: envforge run: PYTHONPATH={checkout} dropped: it would put other "
        "code ahead of the environment's site-packages (--keep-pythonpath keeps it)"
    )
    kept = subprocess.run(
        [*ENVFORGE, "run", "--keep-pythonpath", "--", "python", "-c", code],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert (kept.returncode, kept.stdout) == (0, f"{checkout} {checkout}/model_kernels/__init__.py\n")
    assert kept.stderr.splitlines()[1] == (
        f"warning: envforge run: PYTHONPATH={checkout} kept (--keep-pythonpath): "
        "modules found there shadow the environment's"
    )


def test_plan_run_drops_pythonpath_and_pythonhome_unless_kept(tmp_path: Path) -> None:
    gen = fake_generation(tmp_path)
    base = {"PATH": "/bin", "PYTHONPATH": "/src/sglang/python", "PYTHONHOME": "/h", "X": "1"}
    plan = plan_run(Project(tmp_path), "r-default", ["python"], base)
    assert {k: v for k, v in plan.environ.items() if k != "PATH"} == {"X": "1", "VIRTUAL_ENV": str(gen)}
    assert plan.notes == (
        "envforge run: PYTHONPATH=/src/sglang/python dropped: it would put other code ahead of the environment's "
        "site-packages (--keep-pythonpath keeps it)",
        "envforge run: PYTHONHOME=/h dropped: it would make the environment's interpreter another installation",
    )
    kept = plan_run(Project(tmp_path), "r-default", ["python"], base, keep_pythonpath=True)
    assert (kept.environ["PYTHONPATH"], "PYTHONHOME" in kept.environ) == ("/src/sglang/python", False)
    assert kept.notes == (
        "envforge run: PYTHONHOME=/h dropped: it would make the environment's interpreter another installation",
        "envforge run: PYTHONPATH=/src/sglang/python kept (--keep-pythonpath): modules found there shadow the "
        "environment's",
    )
    assert plan_run(Project(tmp_path), "r-default", ["python"], {"PATH": "/bin", "PYTHONPATH": ""}).notes == ()
