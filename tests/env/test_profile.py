"""Env profiles in a real virtual environment made by the real uv (field cases B11, B12).

One module-scoped venv (Python 3.12 from pyenv, ``uv venv`` with downloads off, as env/build.py makes
them); each test installs a profile and reverts it. Children are started the ways SGLang and users
start them: ``multiprocessing`` spawn, ``subprocess``, ``python -I``, ``PYTHONNOUSERSITE=1``, ``-S``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import uv

from envforge.cli import main
from envforge.env.profile import (
    BLOCK_BEGIN,
    BLOCK_END,
    InstalledProfile,
    SitecustomizeShadowed,
    block_source,
    cache_variables,
    check_reach,
    hook_source,
    install,
    installed_problems,
    pth_source,
    read_installed,
    recorded_profile,
    revert,
    show,
)
from envforge.core.errors import InputError
from envforge.env.profile import view
from envforge.recipe.model import RecipeError
from envforge.recipe.load import load_recipe
from tests.support.pythons import python_for
from tests.conftest import cached_wheel

PYTHON312 = python_for("3.12")
DEBIAN_PYTHON = Path("/usr/bin/python3.11")
DEBIAN_SITECUSTOMIZE = Path("/usr/lib/python3.11/sitecustomize.py")
RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PCIE = {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"}


def make_venv(base: Path, python: Path) -> Path:
    """``uv venv`` with the real uv and no interpreter downloads; returns the venv directory."""
    if not python.exists():
        pytest.skip(f"{python} is not installed")
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run(
        [uv.find_uv_bin(), "venv", "-q", "--python", str(python), str(base)], check=True, env=env, capture_output=True
    )
    return base


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without profile variables or PYTHON* settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in PCIE and not k.startswith("PYTHON")}
    return {**env, **extra}


def run_py(
    python: Path, code: str, *flags: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *flags, "-c", code],
        capture_output=True,
        text=True,
        env=dict(env if env is not None else clean_env()),
        timeout=60,
    )


def seen(python: Path, *flags: str, env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    proc = run_py(
        python,
        f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {sorted(PCIE)!r}}}))",
        *flags,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def tree_digest(root: Path) -> str:
    """sha256 over every path (directories, files with their bytes, links) under ``root``."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            h.update(f"l {rel} {os.readlink(path)}\n".encode())
        elif path.is_dir():
            h.update(f"d {rel}\n".encode())
        else:
            h.update(f"f {rel} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("envprofile") / "venv", PYTHON312)


@pytest.fixture
def env_dir(venv: Path) -> Iterator[Path]:
    """The shared venv, with whatever a test installed reverted afterwards."""
    yield venv
    sp = site(venv)
    revert(sp)
    (sp / "sitecustomize.py").unlink(missing_ok=True)


def site(env_dir: Path) -> Path:
    return next(env_dir.glob("lib/python3*/site-packages"))


def py(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


# --- generated files ------------------------------------------------------------------------


def test_install_writes_deterministic_bytes_and_record(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    install(a, "pcie", PCIE)
    install(b, "pcie", dict(reversed(list(PCIE.items()))))
    for name in ("envforge-env.pth", "_envforge_env.py", ".envforge/env-profile.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / "envforge-env.pth").read_text() == pth_source()
    assert (a / "_envforge_env.py").read_text() == hook_source("pcie", PCIE)
    assert len(pth_source().splitlines()) == 1
    assert json.loads((a / ".envforge/env-profile.json").read_text()) == {
        "schema": 1,
        "profile": "pcie",
        "mode": "pth",
        "env": {"NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"},
        "files": ["envforge-env.pth", "_envforge_env.py"],
        "absent-before": [".envforge", "__pycache__"],
        "sitecustomize": None,
        "caches": {},
    }
    assert read_installed(a) == InstalledProfile(
        "pcie",
        "pth",
        {"NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"},
        ("envforge-env.pth", "_envforge_env.py"),
        (".envforge", "__pycache__"),
        None,
    )


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_written_files_are_0644_under_umask_022_so_other_users_pythons_read_the_pth(
    tmp_path: Path, umask022: None
) -> None:
    install(tmp_path, "pcie", PCIE)
    assert {
        n: oct(mode(tmp_path / n)) for n in ("envforge-env.pth", "_envforge_env.py", ".envforge/env-profile.json")
    } == {"envforge-env.pth": "0o644", "_envforge_env.py": "0o644", ".envforge/env-profile.json": "0o644"}


def test_recorded_profile_names_a_broken_lock_copy(tmp_path: Path) -> None:
    lock = tmp_path / ".envforge" / "pylock.toml"
    lock.parent.mkdir()
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "t"\npackages = []\n'
        '[tool.envforge]\nenv-profile = "pcie"\nenv = { NCCL_BUFFSIZE = "131072" }\n'
    )
    assert recorded_profile(tmp_path) == ("pcie", {"NCCL_BUFFSIZE": "131072"})
    lock.write_text("[tool.envforge\n")
    with pytest.raises(InputError) as exc:
        recorded_profile(tmp_path)
    assert str(exc.value) == (
        f"{lock} is not valid TOML: Expected ']' at the end of a table declaration "
        "(at line 1, column 15)\n  hint: fix the file or regenerate it with `envforge lock`"
    )
    lock.write_text('[tool.envforge]\nenv-profile = "pcie"\n')
    with pytest.raises(InputError) as exc:
        recorded_profile(tmp_path)
    assert exc.value.message == (
        f"{lock} is TOML but not a lock: it has neither `lock-version` and "
        "`[[packages]]` (PEP 751 pylock.toml) nor `version` and `[[package]]` (uv.lock)"
    )


def test_reinstall_replaces_cleanly_and_empty_profile_installs_nothing(tmp_path: Path) -> None:
    install(tmp_path, "pcie", PCIE)
    result = install(tmp_path, "nvlink", {"NCCL_DEBUG": "WARN"})
    assert result.files == ("envforge-env.pth", "_envforge_env.py")
    assert "NCCL_BUFFSIZE" not in (tmp_path / "_envforge_env.py").read_text()
    assert read_installed(tmp_path).profile == "nvlink"  # type: ignore[union-attr]
    assert install(tmp_path, None, {}).files == ()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_invalid_inputs_are_refused_with_exact_messages(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        install(tmp_path, "pcie", {"NCCL-BUFFSIZE": "1"})
    assert exc.value.message == "env profile 'pcie': 'NCCL-BUFFSIZE' is not a valid environment variable name"
    with pytest.raises(InputError) as exc:
        install(tmp_path, "pcie", PCIE, mode="usercustomize")
    assert exc.value.message == "env profile mode 'usercustomize' is not one of: pth, sitecustomize"
    (tmp_path / "_envforge_env.py").write_text("# someone else's module\n")
    with pytest.raises(InputError) as exc:
        install(tmp_path, "pcie", PCIE)
    assert exc.value.message == (
        f"{tmp_path / '_envforge_env.py'} exists and was not written by envforge; refusing to overwrite it"
    )


def test_read_installed_names_a_broken_record(tmp_path: Path) -> None:
    (tmp_path / ".envforge").mkdir()
    (tmp_path / ".envforge/env-profile.json").write_text('{"schema": 7, "mode": "pth"}')
    with pytest.raises(InputError) as exc:
        read_installed(tmp_path)
    assert (
        exc.value.message
        == f"{tmp_path / '.envforge/env-profile.json'}: not an env profile record of schema 1 (schema=7)"
    )
    assert read_installed(tmp_path / "nowhere") is None


# --- reach: every way a process of the environment starts -----------------------------------


def test_hook_reaches_spawn_subprocess_isolated_and_nousersite_children(env_dir: Path) -> None:
    python = py(env_dir)
    install(site(env_dir), "pcie", PCIE)
    assert seen(python) == PCIE
    assert seen(python, "-I") == PCIE
    assert seen(python, env=clean_env(PYTHONNOUSERSITE="1")) == PCIE
    child = run_py(
        python,
        "import os, subprocess, sys\n"
        "for k in ('NCCL_MAX_NCHANNELS', 'NCCL_BUFFSIZE'): os.environ.pop(k)\n"
        "subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"NCCL_BUFFSIZE\"])'])",
    )
    assert (child.returncode, child.stdout, child.stderr) == (0, "131072\n", "")
    for flags, extra in (((), {}), (("-I",), {}), ((), {"PYTHONNOUSERSITE": "1"})):
        report = check_reach(python, PCIE, flags=flags, caller_env=clean_env(**extra))
        assert report.ok, report
        assert report.seen == PCIE


def test_python_dash_S_skips_the_hook_the_documented_limitation(env_dir: Path) -> None:
    python = py(env_dir)
    install(site(env_dir), "pcie", PCIE)
    assert seen(python, "-S") == {"NCCL_BUFFSIZE": None, "NCCL_MAX_NCHANNELS": None}
    report = check_reach(python, PCIE, flags=("-S",), caller_env=clean_env())
    assert report.missing == ("NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS")


def test_caller_explicit_value_wins_and_show_says_so(env_dir: Path) -> None:
    python = py(env_dir)
    install(site(env_dir), "pcie", PCIE)
    caller = clean_env(NCCL_BUFFSIZE="999")
    assert seen(python, env=caller) == {"NCCL_BUFFSIZE": "999", "NCCL_MAX_NCHANNELS": "2"}
    report = check_reach(python, PCIE, caller_env=caller)
    assert report.ok and report.seen == {"NCCL_BUFFSIZE": "999", "NCCL_MAX_NCHANNELS": "2"}
    view = show(python, env=caller)
    assert (view.active, view.mode, view.profile) == (True, "pth", "pcie")
    assert [(v.name, v.value, v.profile_value, v.source) for v in view.variables] == [
        ("NCCL_BUFFSIZE", "999", "131072", "caller"),
        ("NCCL_MAX_NCHANNELS", "2", "2", "profile"),
    ]
    assert view.installed == read_installed(site(env_dir))


def test_reinstall_never_runs_stale_bytecode(env_dir: Path) -> None:
    """Same size, same second: without removing the old .pyc the previous values would apply."""
    python = py(env_dir)
    install(site(env_dir), "pcie", {"NCCL_BUFFSIZE": "1"})
    assert seen(python)["NCCL_BUFFSIZE"] == "1"
    install(site(env_dir), "pcie", {"NCCL_BUFFSIZE": "2"})
    assert seen(python)["NCCL_BUFFSIZE"] == "2"


def test_broken_or_missing_hook_gives_one_warning_and_start_succeeds(env_dir: Path) -> None:
    python, sp = py(env_dir), site(env_dir)
    install(sp, "pcie", PCIE)
    assert installed_problems(sp) == ()
    (sp / "_envforge_env.py").write_text("ENV = {\n")
    assert installed_problems(sp) == (
        f"{sp / '_envforge_env.py'}: not the bytes envforge writes for env profile 'pcie'",
    )
    proc = run_py(python, "print('up')")
    assert (proc.returncode, proc.stdout) == (0, "up\n")
    assert proc.stderr == (
        "envforge: env profile hook not loaded (SyntaxError: '{' was never closed "
        "(_envforge_env.py, line 1)); its variables are not set: run `envforge "
        "apply-patches` to repair or `--revert` to remove envforge-env.pth\n"
    )
    (sp / "_envforge_env.py").unlink()
    assert installed_problems(sp) == (
        f"{sp / '_envforge_env.py'}: missing (the env profile 'pcie' is recorded as installed)",
    )
    proc = run_py(python, "print('up')")
    assert (proc.returncode, proc.stdout, proc.stderr.count("\n")) == (0, "up\n", 1)
    assert "(ModuleNotFoundError: No module named '_envforge_env')" in proc.stderr
    view = show(python, env=clean_env())
    assert not view.active and len(view.warnings) == 1


def test_revert_leaves_site_packages_byte_identical_pth_mode(env_dir: Path) -> None:
    python, sp = py(env_dir), site(env_dir)
    seen(python)  # a used environment: whatever Python caches on its own is already there
    before = tree_digest(sp)
    install(sp, "pcie", PCIE)
    assert seen(python) == PCIE  # writes __pycache__/_envforge_env.*.pyc
    result = revert(sp)
    assert result.removed == ("envforge-env.pth", "_envforge_env.py")
    assert tree_digest(sp) == before
    assert seen(python) == {"NCCL_BUFFSIZE": None, "NCCL_MAX_NCHANNELS": None}
    assert revert(sp).removed == ()


@pytest.mark.parametrize("version", ["3.10", "3.13"])
def test_hook_works_on_other_pythons(tmp_path: Path, version: str) -> None:
    env_dir = make_venv(tmp_path / "venv", python_for(version))
    install(site(env_dir), "pcie", PCIE)
    assert seen(py(env_dir)) == PCIE
    assert seen(py(env_dir), "-I", env=clean_env(NCCL_BUFFSIZE="7")) == {**PCIE, "NCCL_BUFFSIZE": "7"}


# --- sitecustomize mode ---------------------------------------------------------------------


def test_sitecustomize_block_merges_and_reverts_byte_exact(env_dir: Path) -> None:
    python, sp = py(env_dir), site(env_dir)
    original = "import os\nos.environ['TEAM_SITECUSTOMIZE'] = 'ran'  # no newline at end"
    (sp / "sitecustomize.py").write_text(original)
    os.chmod(sp / "sitecustomize.py", 0o644)
    before = tree_digest(sp)
    result = install(sp, "pcie", PCIE, mode="sitecustomize", probe_env=clean_env())
    assert result.files == ("sitecustomize.py",)
    assert mode(sp / "sitecustomize.py") == 0o644  # merged, not narrowed to mkstemp's 0600
    text = (sp / "sitecustomize.py").read_text()
    assert text == original + "\n" + block_source("pcie", PCIE, cache_variables(str(env_dir.resolve()), PCIE))
    assert text.count(BLOCK_BEGIN) == text.count(BLOCK_END) == 1
    assert seen(python) == PCIE
    assert run_py(python, "import os; print(os.environ['TEAM_SITECUSTOMIZE'])").stdout == "ran\n"
    assert check_reach(python, PCIE, caller_env=clean_env()).ok
    assert installed_problems(sp) == ()
    view = show(python, env=clean_env())
    assert (view.active, view.mode, view.hook) == (True, "sitecustomize", str(sp / "sitecustomize.py"))
    install(sp, "pcie", PCIE, mode="sitecustomize", probe_env=clean_env())  # re-install: one block
    assert (sp / "sitecustomize.py").read_text().count(BLOCK_BEGIN) == 1
    assert revert(sp).restored == ("sitecustomize.py",)
    assert (sp / "sitecustomize.py").read_text() == original and mode(sp / "sitecustomize.py") == 0o644
    assert tree_digest(sp) == before


def test_sitecustomize_created_by_envforge_is_deleted_on_revert(env_dir: Path) -> None:
    python, sp = py(env_dir), site(env_dir)
    before = tree_digest(sp)
    install(sp, "pcie", PCIE, mode="sitecustomize", probe_env=clean_env())
    assert (sp / "sitecustomize.py").read_text() == block_source(
        "pcie", PCIE, cache_variables(str(env_dir.resolve()), PCIE)
    )
    assert seen(python) == PCIE
    assert revert(sp).removed == ("sitecustomize.py",)
    assert tree_digest(sp) == before


def test_sitecustomize_shadowed_by_an_earlier_sys_path_entry(env_dir: Path, tmp_path: Path) -> None:
    sp = site(env_dir)
    (tmp_path / "sitecustomize.py").write_text("# the team's other sitecustomize\n")
    install(sp, "nvlink", {"NCCL_DEBUG": "WARN"})
    seen(py(env_dir))  # bytecode Python caches on its own is there already
    before = tree_digest(sp)
    with pytest.raises(SitecustomizeShadowed) as exc:
        install(sp, "pcie", PCIE, mode="sitecustomize", probe_env=clean_env(PYTHONPATH=str(tmp_path)))
    assert exc.value.message == (
        f"sitecustomize mode would not run: {py(env_dir)} imports {tmp_path / 'sitecustomize.py'}, "
        f"which precedes {sp / 'sitecustomize.py'} on sys.path (only the first `sitecustomize` is imported)"
    )
    assert exc.value.hint == (
        "use the .pth mode (the default: `--env-mode pth`); a .pth hook runs "
        "whichever sitecustomize the interpreter imports"
    )
    assert exc.value.exit_code == 1
    assert tree_digest(sp) == before  # refused before touching anything: the nvlink hook is still there
    install(sp, "pcie", PCIE)  # the .pth mode works whatever sitecustomize wins
    assert seen(py(env_dir), env=clean_env(PYTHONPATH=str(tmp_path))) == PCIE


@pytest.mark.skipif(not DEBIAN_SITECUSTOMIZE.exists(), reason="needs a Debian/Ubuntu system Python 3.11")
def test_b11_debian_system_sitecustomize_shadows_a_venv_one(tmp_path: Path) -> None:
    env_dir = make_venv(tmp_path / "debian-venv", DEBIAN_PYTHON)
    sp = site(env_dir)
    with pytest.raises(SitecustomizeShadowed) as exc:
        install(sp, "pcie", PCIE, mode="sitecustomize", probe_env=clean_env())
    assert f"imports {DEBIAN_SITECUSTOMIZE}, which precedes {sp / 'sitecustomize.py'}" in exc.value.message
    install(sp, "pcie", PCIE)
    assert seen(py(env_dir)) == PCIE


# --- CLI ------------------------------------------------------------------------------------


def test_cli_env_show_json_and_text(
    env_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    install(site(env_dir), "pcie", PCIE)
    for k in PCIE:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NCCL_BUFFSIZE", "4096")
    assert main(["env", "show", str(env_dir), "--json", "--project", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["schema"], out["data"]["profile"], out["data"]["active"]) == ("envforge.env-show/1", "pcie", True)
    assert main(["env", "show", str(env_dir), "--project", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        f"env profile: pcie (pth: {site(env_dir) / '_envforge_env.py'})",
        "  NCCL_BUFFSIZE      = 4096  [caller]  (profile: 131072)",
        "  NCCL_MAX_NCHANNELS = 2  [profile]",
    ]
    (site(env_dir) / "envforge-env.pth").unlink()  # recorded but inert: exit 1 with a warning
    assert main(["env", "show", str(env_dir), "--project", str(tmp_path)]) == 1
    head = f"warning: profile 'pcie' is installed in {site(env_dir)} but no hook ran at start-up; "
    assert capsys.readouterr().err == head + (
        "the environment's lock records no env profile, so `envforge apply-patches` cannot re-install it: "
        "rebuild the environment (`envforge build`)\n"
    )
    (site(env_dir) / ".envforge" / "pylock.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "t"\npackages = []\n'
        '[tool.envforge]\nenv-profile = "pcie"\nenv = { NCCL_MAX_NCHANNELS = "2" }\n'
    )
    assert main(["env", "show", str(env_dir), "--project", str(tmp_path)]) == 1
    assert capsys.readouterr().err == head + (
        f"re-install it with `envforge apply-patches {env_dir}` (the .pth mode is the default)\n"
    )
    assert main(["env", "show", str(env_dir), "--json", "--project", str(tmp_path)]) == 1
    assert json.loads(capsys.readouterr().out)["data"]["warnings"] == [
        head[len("warning: ") :]
        + f"re-install it with `envforge apply-patches {env_dir}` (the .pth mode is the default)"
    ]


def test_sitecustomize_mode_needs_to_know_the_interpreter(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        install(tmp_path, "pcie", PCIE, mode="sitecustomize")
    assert exc.value.message == (
        f"cannot tell which interpreter uses {tmp_path}, so cannot check which sitecustomize it imports"
    )
    assert list(tmp_path.iterdir()) == []


# --- from the recipe ------------------------------------------------------------------------


def test_recipe_profile_by_interconnect_or_by_name_reaches_the_env(env_dir: Path) -> None:
    recipe = load_recipe(RECIPES / "quickstart.toml")
    by_target = recipe.resolve()
    assert (by_target.env_profile, dict(by_target.env)) == (
        "pcie",
        {"ENVFORGE_PROFILE_PROBE": "1", "NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"},
    )
    nvlink = recipe.resolve(env_profile="nvlink")
    assert (nvlink.env_profile, dict(nvlink.env)) == ("nvlink", {"ENVFORGE_PROFILE_PROBE": "1"})
    with pytest.raises(RecipeError) as exc:
        recipe.resolve(env_profile="infiniband")
    assert exc.value.message.endswith("env profile 'infiniband' is not defined (defined: default, nvlink, pcie)")
    install(site(env_dir), nvlink.env_profile, nvlink.env)
    install(site(env_dir), by_target.env_profile, by_target.env)  # a rebuild with another profile
    view = show(py(env_dir), env=clean_env())
    assert [(v.name, v.value, v.source) for v in view.variables] == [
        ("ENVFORGE_PROFILE_PROBE", "1", "profile"),
        ("NCCL_BUFFSIZE", "131072", "profile"),
        ("NCCL_MAX_NCHANNELS", "2", "profile"),
    ]


def test_the_show_probe_reads_the_record_where_install_writes_it() -> None:
    assert "    record = os.path.join(purelib, *('.envforge', 'env-profile.json'))\n" in view._SHOW_PROBE
    assert "RECORD_PARTS" not in view._SHOW_PROBE


# --- the served process: NCCL's files (B44), the engine's launcher (B38) ---------------------------

B44_CONF = (
    "# as container images write it (aws/deep-learning-containers Dockerfile: echo ... >> /etc/nccl.conf)\n"
    "NCCL_SOCKET_IFNAME=^docker0\nNCCL_P2P_DISABLE=1\nNCCL_BUFFSIZE=128K\nNCCL_MAX_NCHANNELS=32\n"
)


def test_cli_env_show_names_the_values_an_nccl_conf_file_sets(
    env_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    install(site(env_dir), "pcie", PCIE)
    for k in [*PCIE, "NCCL_SOCKET_IFNAME", "NCCL_P2P_DISABLE"]:
        monkeypatch.delenv(k, raising=False)
    conf = tmp_path / "nccl.conf"
    conf.write_text(B44_CONF)
    digest = "sha256:" + hashlib.sha256(B44_CONF.encode()).hexdigest()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NCCL_CONF_FILE", str(conf))
    assert main(["env", "show", str(env_dir), "--project", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        f"env profile: pcie (pth: {site(env_dir) / '_envforge_env.py'})",
        "  NCCL_BUFFSIZE      = 131072  [profile]",
        "  NCCL_MAX_NCHANNELS = 2  [profile]",
        "served process (no [verify.smoke] server):",
        "  NCCL_BUFFSIZE      = 131072  [profile]",
        "  NCCL_MAX_NCHANNELS = 2  [profile]",
        f"  NCCL_P2P_DISABLE   = 1  [nccl.conf {conf}]",
        f"  NCCL_SOCKET_IFNAME = ^docker0  [nccl.conf {conf}]",
        f"  NCCL reads {conf} ({digest})",
    ]
    assert main(["env", "show", str(env_dir), "--json", "--project", str(tmp_path)]) == 0
    (served,) = json.loads(capsys.readouterr().out)["data"]["served"]
    assert served["nccl-conf-files"] == [{"path": str(conf), "digest": digest}]
    assert {v["name"]: v["source"] for v in served["variables"]}["NCCL_SOCKET_IFNAME"] == f"nccl.conf {conf}"


B38_RECIPE = """[recipe]
name = "sgl-env"
python = "3.12"
resolution = "no-deps"

[target]
gpu = "RTX PRO 6000 Blackwell"
compute-capability = "12.0"
gpus = 8
interconnect = "pcie"

[packages]
sglang = "==0.5.9"

[env.pcie]
CUDA_DEVICE_MAX_CONNECTIONS = "1"
CUDA_MODULE_LOADING = "EAGER"
NCCL_CUMEM_ENABLE = "0"
NCCL_NVLS_ENABLE = "0"

[verify.smoke]
model = "stub"
api = "sglang"

[[verify.smoke.servers]]
name = "symm-mem"
args = ["-m", "sglang.launch_server", "--model-path", "{model}", "--port", "{port}", "--enable-symm-mem"]
"""
B38_PROFILE = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "CUDA_MODULE_LOADING": "EAGER",
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_NVLS_ENABLE": "0",
}


@pytest.fixture
def sglang_env(env_dir: Path, tmp_path: Path) -> Iterator[Path]:
    """The shared venv with the real sglang 0.5.9 wheel's METADATA, built from B38's recipe."""
    sp = site(env_dir)
    dist = sp / "sglang-0.5.9.dist-info"
    dist.mkdir()
    with zipfile.ZipFile(cached_wheel("sglang", "0.5.9")) as zf:
        (dist / "METADATA").write_bytes(zf.read("sglang-0.5.9.dist-info/METADATA"))
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "sgl-env.toml").write_text(B38_RECIPE)
    install(sp, "pcie", B38_PROFILE)
    (sp / ".envforge" / "generation.json").write_text(json.dumps({"recipe": "sgl-env", "variant": "default"}))
    try:
        yield env_dir
    finally:
        shutil.rmtree(dist)
        (sp / ".envforge" / "generation.json").unlink()


def test_cli_env_show_says_what_the_launcher_overwrites(
    sglang_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in [*B38_PROFILE, "NCCL_CONF_FILE", "TRTLLM_ENABLE_PDL", "CUTE_DSL_LOG_LEVEL", "CUTE_DSL_LOG_TO_CONSOLE"]:
        monkeypatch.delenv(k, raising=False)
    assert main(["env", "show", str(sglang_env), "--project", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[6:] == [
        "served process (server 'symm-mem', launcher sglang-0.5.9):",
        "  CUDA_DEVICE_MAX_CONNECTIONS = 8  [launcher sglang-0.5.9]  (profile: 1)",
        "  CUDA_MODULE_LOADING         = AUTO  [launcher sglang-0.5.9]  (profile: EAGER)",
        "  CUTE_DSL_LOG_LEVEL          = 30  [launcher sglang-0.5.9]",
        "  CUTE_DSL_LOG_TO_CONSOLE     = 1  [launcher sglang-0.5.9]",
        "  NCCL_CUMEM_ENABLE           = 1  [launcher sglang-0.5.9 (--enable-symm-mem)]  (profile: 0)",
        "  NCCL_NVLS_ENABLE            = 1  [launcher sglang-0.5.9 (--enable-symm-mem)]  (profile: 0)",
        "  TRTLLM_ENABLE_PDL           = 1  [launcher sglang-0.5.9]",
    ]
    assert captured.err.splitlines() == [
        "warning: envforge: served process 'symm-mem': CUDA_DEVICE_MAX_CONNECTIONS=8 from launcher sglang-0.5.9 "
        "overrides the env profile 'pcie' (CUDA_DEVICE_MAX_CONNECTIONS=1)",
        "warning: envforge: served process 'symm-mem': CUDA_MODULE_LOADING=AUTO from launcher sglang-0.5.9 "
        "overrides the env profile 'pcie' (CUDA_MODULE_LOADING=EAGER)",
        "warning: envforge: served process 'symm-mem': NCCL_CUMEM_ENABLE=1 from launcher sglang-0.5.9 "
        "(--enable-symm-mem) overrides the env profile 'pcie' (NCCL_CUMEM_ENABLE=0)",
        "warning: envforge: served process 'symm-mem': NCCL_NVLS_ENABLE=1 from launcher sglang-0.5.9 "
        "(--enable-symm-mem) overrides the env profile 'pcie' (NCCL_NVLS_ENABLE=0)",
    ]
