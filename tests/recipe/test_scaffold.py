"""``envforge init`` and ``envforge up`` outside a project: unit tests of scaffold.py, the CLI in a
subprocess, and a real wheel (``uv build``) installed into a fresh venv in an empty directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.recipe.scaffold import GITATTRIBUTES, GITIGNORE, default_project_dir, embedded_recipes, scaffold

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_FILES = [
    "recipes/quickstart.toml",
    "patchsets/flashinfer-sm120-trtllm-comm.toml",
    "patchsets/sm120-flashinfer-allreduce-fusion.toml",
    "patchsets/sm120-torch-symm-mem.toml",
    "patchsets/kimik25-eagle3-delegation.toml",
    "lockfiles/pylock.quickstart-default.toml",
]


def test_scaffold_writes_the_quickstart_project_and_never_overwrites(tmp_path: Path) -> None:
    res = scaffold(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in res.created] == [*QUICKSTART_FILES, ".gitattributes", ".gitignore"]
    assert res.kept == ()
    for rel in QUICKSTART_FILES:
        assert (tmp_path / rel).read_bytes() == (ROOT / rel).read_bytes()
    assert (tmp_path / ".gitattributes").read_text() == GITATTRIBUTES
    assert GITATTRIBUTES.endswith("pylock.*.toml diff=pylock\n") and GITIGNORE.endswith("/envs/\n")
    (tmp_path / "recipes" / "quickstart.toml").write_text("# mine\n")
    again = scaffold(tmp_path)
    assert again.created == () and len(again.kept) == 8
    assert (tmp_path / "recipes" / "quickstart.toml").read_text() == "# mine\n"


def test_scaffold_appends_to_an_existing_gitignore(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.pyc")
    scaffold(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n" + GITIGNORE


def test_unknown_embedded_recipe(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        scaffold(tmp_path, "nope")
    assert (exc.value.message, exc.value.hint) == (
        "no embedded recipe named 'nope'",
        f"embedded recipes: {', '.join(embedded_recipes())}",
    )
    assert "quickstart" in embedded_recipes()


def test_default_project_dir() -> None:
    assert default_project_dir({"ENVFORGE_HOME": "/x"}) == Path("/x")
    assert default_project_dir({"XDG_DATA_HOME": "/d", "HOME": "/h"}) == Path("/d/envforge/default")
    assert default_project_dir({"HOME": "/h"}) == Path("/h/.local/share/envforge/default")


def test_init_cli(tmp_path: Path) -> None:
    envforge = Path(sys.executable).with_name("envforge")
    res = subprocess.run([str(envforge), "init", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "envforge.init/1"
    assert doc["data"] == {
        "root": str(tmp_path.resolve()),
        "recipe": "quickstart",
        "created": [*QUICKSTART_FILES, ".gitattributes", ".gitignore"],
        "kept": [],
    }
    res = subprocess.run([str(envforge), "lock", "--check"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout) == (
        0,
        f"{tmp_path.resolve() / 'lockfiles' / 'pylock.quickstart-default.toml'}: up to date\n",
    )
    res = subprocess.run([str(envforge), "init", "--recipe", "nope"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: no embedded recipe named 'nope'\n")


@pytest.mark.slow
@pytest.mark.network
def test_wheel_in_a_fresh_venv_runs_up_in_an_empty_directory(tmp_path: Path) -> None:
    """A new user: build the wheel, install it into a fresh venv, `envforge up` in an empty directory
    (the quickstart stack is built in the user data directory it names), then verify and envs."""
    if os.environ.get("ENVFORGE_OFFLINE") == "1":
        pytest.skip("needs the package index (ENVFORGE_OFFLINE=1)")
    from envforge.uv.run import uv_binary

    uv = uv_binary()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ENVFORGE_HOME")}
    env |= {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv")),
    }
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        env=env,
        timeout=600,
    )
    (wheel,) = (tmp_path / "dist").glob("envforge_stack-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"envforge/data/{rel}" for rel in QUICKSTART_FILES} <= set(names)
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(tmp_path / "venv")], check=True, env=env, timeout=300
    )
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(tmp_path / "venv" / "bin" / "python"), str(wheel)],
        check=True,
        env=env,
        timeout=600,
    )
    envforge = str(tmp_path / "venv" / "bin" / "envforge")
    empty = tmp_path / "empty"
    empty.mkdir()

    up = subprocess.run([envforge, "up"], cwd=empty, capture_output=True, text=True, env=env, timeout=900)
    home = tmp_path / "data" / "envforge" / "default"
    assert up.returncode == 0, up.stderr
    assert up.stderr.splitlines()[0] == (
        f"not inside an envforge project: using {home} (the embedded quickstart "
        "project, created now); `envforge init` makes a project here instead"
    )
    assert "[1/3] lock pylock.quickstart-default.toml: up to date" in up.stderr
    assert up.stdout.splitlines()[-1].startswith("verify static: clean")
    assert list(empty.iterdir()) == []  # nothing written into the user's directory
    verify = subprocess.run(
        [envforge, "verify", "--json"], cwd=empty, capture_output=True, text=True, env=env, timeout=300
    )
    assert verify.returncode == 0, verify.stderr
    envs = json.loads(
        subprocess.run(
            [envforge, "envs", "--json"], cwd=empty, capture_output=True, text=True, env=env, timeout=120
        ).stdout
    )["data"]["environments"]
    assert [(e["name"], e["live"]) for e in envs] == [("quickstart-default", "g0001")]
    # and `init` turns the empty directory into a project whose lock is fresh
    init = subprocess.run([envforge, "init"], cwd=empty, capture_output=True, text=True, env=env, timeout=120)
    assert init.returncode == 0 and "created recipes/quickstart.toml" in init.stdout
    check = subprocess.run([envforge, "lock", "--check"], cwd=empty, capture_output=True, text=True, env=env)
    assert check.returncode == 0, check.stderr
    # the wheel is the repository: the kimi recipe, all its patchsets and its committed locks come with it
    kimi = tmp_path / "kimi"
    kimi.mkdir()
    init = subprocess.run(
        [envforge, "init", "--recipe", "kimi-k25-sm120"], cwd=kimi, capture_output=True, text=True, env=env, timeout=120
    )
    assert init.returncode == 0, init.stderr
    listed = tomllib.loads((ROOT / "recipes" / "kimi-k25-sm120.toml").read_text())["recipe"]["patchsets"]
    assert sorted(p.name for p in (kimi / "patchsets").iterdir()) == sorted(f"{name}.toml" for name in listed)
    check = subprocess.run(
        [envforge, "lock", "kimi-k25-sm120", "--variant", "cu128", "--check"],
        cwd=kimi,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr


def test_init_next_steps_work_in_a_directory_that_is_not_a_git_repository(tmp_path: Path) -> None:
    """A fresh user runs the printed next steps literally: outside a repository `git config` fails
    ("fatal: not in a git directory"), so init says `git init` first; in a repository without the
    textconv it names `git config`; once configured only `envforge up` is left."""
    import shlex

    envforge = Path(sys.executable).with_name("envforge")
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(tmp_path),
    }
    (tmp_path / "home").mkdir()
    proj = tmp_path / "p"
    proj.mkdir()

    def init() -> str:
        res = subprocess.run([str(envforge), "init"], cwd=proj, capture_output=True, text=True, env=env, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stderr.splitlines()[-1]

    line = init()
    assert line == (
        "next: `envforge up quickstart`; to review lock changes with `git diff`, make it a git "
        "repository first: `git init`, then `git config diff.pylock.textconv 'envforge lock textconv'`"
    )
    fails = subprocess.run(
        shlex.split("git config diff.pylock.textconv 'envforge lock textconv'"),
        cwd=proj,
        capture_output=True,
        text=True,
        env=env,
    )
    assert fails.returncode != 0  # why the old hint was wrong here
    for cmd in ("git init -q", "git config diff.pylock.textconv 'envforge lock textconv'"):
        assert subprocess.run(shlex.split(cmd), cwd=proj, env=env).returncode == 0
    assert init() == "next: `envforge up quickstart`"
    subprocess.run(["git", "config", "--unset", "diff.pylock.textconv"], cwd=proj, env=env, check=True)
    assert init() == (
        "next: `git config diff.pylock.textconv 'envforge lock textconv'` (once per clone), "
        "then `envforge up quickstart`"
    )
    res = subprocess.run(
        [str(envforge), "init", str(tmp_path / "q")], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
    )
    q = (tmp_path / "q").resolve()
    assert res.stderr.splitlines()[-1] == (
        f"next: `envforge up quickstart` in {q}; to review lock changes with `git diff`, make it a git repository "
        f"first: `git init`, then `git config diff.pylock.textconv 'envforge lock textconv'` in {q}"
    )
    # issue 44: a recipe of several variants: `up RECIPE` alone fails, so the step names one whose lock
    # is committed and whose platform this machine runs (kimi-k25-sm120: cu128, x86_64)
    res = subprocess.run(
        [str(envforge), "init", str(tmp_path / "k"), "--recipe", "kimi-k25-sm120"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    k = (tmp_path / "k").resolve()
    assert res.stderr.splitlines()[-1].startswith(f"next: `envforge up kimi-k25-sm120 --variant cu128` in {k}; ")


def test_commands_outside_a_project_say_so_or_name_the_default_home(tmp_path: Path) -> None:
    """Outside any project: no project is the error (exit 2, `init`/`up` as the fix), never a missing
    patchsets/ of the working directory; once `up` made the default home, every command that falls
    back to it names it on stderr first."""
    envforge = str(Path(sys.executable).with_name("envforge"))
    env = {k: v for k, v in os.environ.items() if k not in ("ENVFORGE_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path / "home")
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    home = tmp_path / "home" / ".local" / "share" / "envforge" / "default"
    commands = (
        ["lock", "--check"],
        ["envs"],
        ["gc"],
        ["verify"],
        ["patches", "list"],
        ["rollback", "x"],
        ["env", "show"],
        ["build", "--dry-run"],
        ["lock", "diff", "quickstart", "--variants"],
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([envforge, *args], cwd=nowhere, capture_output=True, text=True, env=env, timeout=120)

    for args in commands:
        res = run(*args)
        assert (res.returncode, res.stdout, res.stderr) == (
            2,
            "",
            (
                f"error: not inside an envforge project: no recipes/ directory in {nowhere} or above, and no default "
                f"project at {home}\n  hint: `envforge init` makes a project here; `envforge up` builds the quickstart "
                "in the default project\n"
            ),
        ), args

    scaffold(home, git_files=False)  # what `envforge up` outside a project writes first
    note = (
        f"not inside an envforge project: using the default project {home} (made by `envforge up`); "
        "`envforge init` makes a project here instead"
    )
    for args in commands:
        assert run(*args).stderr.splitlines()[0] == note, args
    check = run("lock", "--check")
    assert (check.returncode, check.stdout) == (
        0,
        f"{home / 'lockfiles' / 'pylock.quickstart-default.toml'}: up to date\n",
    )
    envs = run("envs")
    assert (envs.returncode, envs.stderr) == (
        0,
        note + "\nno environments yet: `envforge up` or `envforge build RECIPE` makes one\n",
    )
