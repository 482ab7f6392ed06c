"""Start-up code no distribution owns (field case B36): a real environment built by ``envforge build``
with the real uv from a local index on 127.0.0.1 serving the real six 1.17.0 wheel (the recipe of
tests/data/b36/sixenv.toml plus an env profile), then the case's real ``litellm_init.pth`` (the
compromised litellm 1.82.8 wheel's kind of file) and ``sitecustomize.py`` dropped into site-packages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envforge.env.fingerprint import fingerprint_of, startup_digest, startup_files
from envforge.env.profile import block_source
from envforge.verify.startup import (
    StartupHook,
    StartupScan,
    blocking_startup_files,
    check_outside,
    hook_notes,
    pth_import_lines,
    scan_site_dir,
    startup_findings,
)
from tests.conftest import cached_wheel
from tests.support.localindex import LocalIndex, serve

CASE = Path(__file__).resolve().parents[1] / "data" / "b36"
ENVFORGE = [sys.executable, "-m", "envforge"]
PTH_LINE = 'import os, sys; os.environ.setdefault("PTH_PROBE", "startup hook ran in pid %d" % os.getpid())'


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("b36")
    idx = LocalIndex(tmp / "index")
    idx.add(cached_wheel("six", "1.17.0"))
    root = tmp / "p"
    (root / "recipes").mkdir(parents=True)
    with serve(idx):
        recipe = (
            CASE.joinpath("sixenv.toml")
            .read_text()
            .replace("[packages]", f'[indexes]\npypi = "{idx.url}"\n\n[packages]')
        )
        (root / "recipes" / "sixenv.toml").write_text(recipe + '\n[env.default]\nNCCL_BUFFSIZE = "131072"\n')
        res = envforge(root, "lock", "sixenv")
        assert res.returncode == 0, res.stderr
        res = envforge(root, "build", "sixenv")
        assert res.returncode == 0, res.stderr
    yield root


def site_packages(root: Path) -> Path:
    return next((root / "envs" / "sixenv-default").resolve().glob("lib/python3*/site-packages"))


def run_with_bytecode(root: Path, code: str) -> str:
    """Run ``code`` in the environment's interpreter with bytecode writing on (as a user's run is)."""
    python = root / "envs" / "sixenv-default" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PTH_PROBE", "SC_PROBE", "PYTHONDONTWRITEBYTECODE")}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=env, check=True).stdout


def verify_json(root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    res = envforge(root, "verify", "sixenv-default", "--json", *extra)
    return res.returncode, json.loads(res.stdout)["data"]


@pytest.fixture
def dropped(project: Path) -> Iterator[Path]:
    """The case's two files copied into site-packages; removed afterwards (with their bytecode)."""
    sp = site_packages(project)
    for name in ("litellm_init.pth", "sitecustomize.py"):
        shutil.copyfile(CASE / name, sp / name)
    run_with_bytecode(project, "pass")  # writes __pycache__/sitecustomize.cpython-312.pyc
    yield sp
    for name in ("litellm_init.pth", "sitecustomize.py"):
        (sp / name).unlink()
    for pyc in (sp / "__pycache__").glob("sitecustomize.*"):
        pyc.unlink()


def test_a_clean_built_environment_has_no_unowned_file(project: Path) -> None:
    sp = site_packages(project)
    run_with_bytecode(project, "import six")  # bytecode of owned modules is owned
    assert sorted(p.name for p in (sp / "__pycache__").iterdir()) == [
        "_envforge_env.cpython-312.pyc",
        "six.cpython-312.pyc",
    ]
    assert sorted(p.name for p in sp.iterdir()) == [
        ".envforge",
        "__pycache__",
        "_envforge_env.py",
        "envforge-env.pth",
        "six-1.17.0.dist-info",
        "six.py",
    ]
    rc, data = verify_json(project)
    assert rc == 0, data["findings"]
    startup = next(c for c in data["checks"] if c["name"] == "startup")
    assert startup == {
        "name": "startup",
        "level": "static",
        "status": "ok",
        "detail": "1 start-up hooks (0 owned by nothing), 0 other unowned files",
    }
    assert (
        "start-up code run at every interpreter start: envforge-env.pth (the envforge env profile 'default')"
        in data["notes"]
    )
    assert not any("no RECORD and no envforge record owns" in n for n in data["notes"])
    assert startup_files(sp) == ("envforge-env.pth",)


def test_the_case_files_are_findings_in_fast_and_deep_mode(project: Path, dropped: Path) -> None:
    for extra in ((), ("--deep",)):
        rc, data = verify_json(project, *extra)
        assert rc == 1
        got = [(f["kind"], f["subject"], f["actual"]) for f in data["findings"]]
        assert got == [
            ("startup-code", "litellm_init.pth", f"executed at every interpreter start: {PTH_LINE}; no RECORD owns it"),
            (
                "startup-code",
                "sitecustomize.py",
                (
                    "`sitecustomize` imported at every interpreter start (site imports "
                    "the first one on sys.path); no RECORD owns it"
                ),
            ),
        ]
        assert data["findings"][0]["expected"] == "start-up code that a distribution's RECORD or envforge installed"
        assert data["findings"][0]["fix"].endswith(
            "then remove it, or rebuild: `envforge build sixenv --variant default` (a fresh generation holds only "
            "what the lock installs)"
        )
        assert (
            "start-up code run at every interpreter start: envforge-env.pth (the envforge env profile "
            "'default'), litellm_init.pth (owned by nothing), sitecustomize.py (owned by nothing)"
        ) in data["notes"]
        assert (
            "1 file in site-packages that no RECORD and no envforge record owns (not run at start-up; they "
            "run only when imported): __pycache__/sitecustomize.cpython-312.pyc"
        ) in data["notes"]


def test_text_output_names_the_finding(project: Path, dropped: Path) -> None:
    res = envforge(project, "verify", "sixenv-default")
    assert res.returncode == 1
    assert "startup-code: litellm_init.pth\n" in res.stdout
    assert "startup-code: sitecustomize.py\n" in res.stdout
    assert "note: start-up code run at every interpreter start: envforge-env.pth" in res.stdout


def test_the_fingerprint_changes_with_a_new_pth(project: Path) -> None:
    sp = site_packages(project)
    clean = fingerprint_of(sp)
    shutil.copyfile(CASE / "litellm_init.pth", sp / "litellm_init.pth")
    try:
        dirty = fingerprint_of(sp)
        _, data = verify_json(project)
    finally:
        (sp / "litellm_init.pth").unlink()
    assert clean.differences(dirty) == [f"startup_digest: {clean.startup_digest} != {dirty.startup_digest}"]
    assert data["fingerprint"]["startup_digest"] == dirty.startup_digest
    assert fingerprint_of(sp) == clean


def test_the_pth_really_runs_in_the_environment(project: Path, dropped: Path) -> None:
    """What verify calls start-up code does run: both variables are set in a plain interpreter start."""
    out = run_with_bytecode(project, "import os; print(os.environ['PTH_PROBE'][:16], os.environ['SC_PROBE'])")
    assert out == "startup hook ran sitecustomize ran\n"


def test_an_owned_hook_is_named_with_its_distribution(tmp_path: Path) -> None:
    sp = tmp_path / "site-packages"
    info = sp / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
    (sp / "demo-precedence.pth").write_text("import os; var = 'x'\n")
    (sp / "demo.py").write_text("")
    (sp / "__pycache__").mkdir()
    (sp / "__pycache__" / "demo.cpython-312.pyc").write_bytes(b"")
    (sp / "stray.txt").write_text("x")
    (info / "RECORD").write_text("demo-precedence.pth,,\ndemo.py,,\ndemo-1.0.dist-info/RECORD,,\n")
    scan = scan_site_dir(sp)
    assert scan == StartupScan(
        hooks=(StartupHook(str(sp), "demo-precedence.pth", "demo 1.0", ("import os; var = 'x'",)),),
        unowned=("stray.txt",),
    )
    assert startup_findings(scan) == []


def test_venv_tool_hook_is_the_venvs_only_with_its_exact_line(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    sp = env / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nvirtualenv = 20.26.6\n")
    (sp / "_virtualenv.pth").write_text("import _virtualenv")
    (sp / "_virtualenv.py").write_text("")
    assert [(h.name, h.owner) for h in scan_site_dir(sp).hooks] == [
        ("_virtualenv.pth", "the venv (virtualenv 20.26.6)")
    ]
    assert scan_site_dir(sp).unowned == ()
    (sp / "_virtualenv.pth").write_text("import _virtualenv; import evil")
    scan = scan_site_dir(sp)
    assert [(h.name, h.owner) for h in scan.hooks] == [("_virtualenv.pth", None)]
    assert scan.unowned == ("_virtualenv.py",)


def test_pth_lines_site_executes() -> None:
    data = b"\xef\xbb\xbfimport a\n# import b\n import c\nimport\td\nimportx\n/some/path\r\nimport e\rimport f\n"
    assert pth_import_lines(data) == ("import a", "import\td", "import e", "import f")
    assert pth_import_lines(CASE.joinpath("litellm_init.pth").read_bytes()) == (PTH_LINE,)


def test_a_long_import_line_is_cut_at_100_characters() -> None:
    hook = StartupHook("/sp", "x.pth", None, ("import " + "a" * 200, "import b"))
    (found,) = startup_findings(StartupScan((hook,), ()))
    assert found.actual == (
        "executed at every interpreter start: import " + "a" * 93 + "… (+1 more import lines); no RECORD owns it"
    )
    assert startup_findings(StartupScan((StartupHook("/sp", "y.pth", "demo 1.0", ("import y",)),), ())) == []


def test_startup_files_and_digest(tmp_path: Path) -> None:
    sp = tmp_path
    assert startup_files(sp) == ()
    empty = startup_digest(sp)
    assert empty == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256 of b"{}"
    (sp / "paths.pth").write_text("/x\n")
    (sp / "usercustomize.cpython-312-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (sp / "sitecustomize").mkdir()
    (sp / "sitecustomize" / "__init__.py").write_text("")
    (sp / "sitecustomize_helper.py").write_text("")
    os.mkfifo(sp / "fifo.pth")
    assert startup_files(sp) == (
        "paths.pth",
        "sitecustomize/__init__.py",
        "usercustomize.cpython-312-x86_64-linux-gnu.so",
    )
    assert startup_digest(sp) != empty
    assert startup_digest(sp / "absent") is None


def test_start_up_code_outside_the_environment(tmp_path: Path) -> None:
    """Another site directory is judged by its own RECORDs; the standard library's sitecustomize is
    the interpreter's (named); one from anywhere else (PYTHONPATH) is owned by nothing."""
    sp, base, stdlib, elsewhere = (tmp_path / d for d in ("env-sp", "base-sp", "stdlib", "pythonpath"))
    for d in (sp, base, stdlib, elsewhere):
        d.mkdir()
    shutil.copyfile(CASE / "litellm_init.pth", base / "litellm_init.pth")
    (base / "paths-only.pth").write_text("/opt/x\n")
    (stdlib / "sitecustomize.py").write_text("")
    (elsewhere / "usercustomize.py").write_text("")
    site = {
        "dirs": [str(sp), str(base)],
        "stdlib": [str(stdlib)],
        "sitecustomize": str(stdlib / "sitecustomize.py"),
        "usercustomize": str(elsewhere / "usercustomize.py"),
    }
    hooks, found = check_outside(sp, site)
    assert [(h.site_dir, h.name, h.owner) for h in hooks] == [
        (str(base), "litellm_init.pth", None),
        (str(stdlib), "sitecustomize.py", "the interpreter"),
        (str(elsewhere), "usercustomize.py", None),
    ]
    assert [(f.kind, f.subject) for f in found] == [
        ("startup-code-outside", str(base / "litellm_init.pth")),
        ("startup-code-outside", str(elsewhere / "usercustomize.py")),
    ]
    assert found[0].fix.startswith("outside this environment, so a rebuild keeps it")
    assert hook_notes(hooks, (), sp) == [
        (
            f"start-up code run at every interpreter start: {base / 'litellm_init.pth'} (owned by nothing), "
            f"{stdlib / 'sitecustomize.py'} (the interpreter), {elsewhere / 'usercustomize.py'} (owned by nothing)"
        )
    ]
    assert check_outside(sp, {}) == ([], [])


def test_a_standard_library_sitecustomize_linked_into_etc_is_the_interpreters(tmp_path: Path) -> None:
    """Ubuntu's /usr/lib/python3.12/sitecustomize.py is a symlink to /etc/python3.12/sitecustomize.py
    (seen on the lent H200's image, docs/gpu/vllm-h200): the entry is in the standard library, so it is
    named as the interpreter's, not a startup-code-outside finding; a link from elsewhere to a file of
    the standard library stays the interpreter's too (the file it runs is)."""
    sp, stdlib, etc, elsewhere = (tmp_path / d for d in ("env-sp", "usr-lib-python3.12", "etc-python3.12", "pp"))
    for d in (sp, stdlib, etc, elsewhere):
        d.mkdir()
    (etc / "sitecustomize.py").write_text("# Ubuntu's\n")
    (stdlib / "sitecustomize.py").symlink_to(etc / "sitecustomize.py")
    (stdlib / "usercustomize.py").write_text("")
    (elsewhere / "usercustomize.py").symlink_to(stdlib / "usercustomize.py")
    site = {
        "dirs": [str(sp)],
        "stdlib": [str(stdlib)],
        "sitecustomize": str(stdlib / "sitecustomize.py"),
        "usercustomize": str(elsewhere / "usercustomize.py"),
    }
    hooks, found = check_outside(sp, site)
    assert [(h.site_dir, h.name, h.owner) for h in hooks] == [
        (str(stdlib), "sitecustomize.py", "the interpreter"),
        (str(elsewhere), "usercustomize.py", "the interpreter"),
    ]
    assert found == []


def test_unowned_files_note_lists_ten_names() -> None:
    names = tuple(f"f{i:02d}.txt" for i in range(12))
    assert hook_notes((), names, Path("/sp")) == [
        (
            "12 files in site-packages that no RECORD and no envforge record owns (not run at start-up; they run only "
            "when imported): f00.txt, f01.txt, f02.txt, f03.txt, f04.txt, f05.txt, f06.txt, f07.txt, f08.txt, f09.txt "
            "(+2 more)"
        )
    ]


def test_envforge_sitecustomize_block_is_owned_but_not_the_text_it_was_merged_into(tmp_path: Path) -> None:
    block = block_source("pcie", {"NCCL_BUFFSIZE": "131072"})
    (tmp_path / "sitecustomize.py").write_text(block)
    record = {
        "profile": "pcie",
        "mode": "sitecustomize",
        "files": ["sitecustomize.py"],
        "sitecustomize": {"created": True},
    }
    assert [h.owner for h in scan_site_dir(tmp_path, profile=record).hooks] == ["the envforge env profile 'pcie'"]
    (tmp_path / "sitecustomize.py").write_text("import os\n" + block)
    merged = {**record, "sitecustomize": {"created": False}}
    assert [h.owner for h in scan_site_dir(tmp_path, profile=merged).hooks] == [None]


@pytest.mark.parametrize("where", ["evil.pth", "sitecustomize.py", "pyvenv.cfg"])
def test_a_fifo_the_interpreter_reads_at_start_is_exit_2_before_it_is_started(tmp_path: Path, where: str) -> None:
    """Fault suite N46: a FIFO where every interpreter start reads (a ``.pth``, ``sitecustomize``,
    ``pyvenv.cfg``) made verify's probe of the interpreter hang until its 60 s timeout. Now verify
    (also ``--deep``) names it, exit 2, without starting the interpreter. A real FIFO, bounded."""
    from tests.support.verify_envs import build_tiny

    sp = build_tiny(tmp_path / "p")
    env = tmp_path / "p" / "envs" / "tiny-default"
    fifo = env / "pyvenv.cfg" if where == "pyvenv.cfg" else sp / where
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    assert blocking_startup_files(sp, env / "bin" / "python") == [(fifo, "a FIFO")]
    for deep in ([], ["--deep"]):
        res = subprocess.run(
            [sys.executable, "-m", "envforge", "verify", "tiny-default", *deep],
            cwd=tmp_path / "p",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (res.returncode, res.stdout) == (2, "")
        assert res.stderr.splitlines()[-2:] == [
            f"error: the environment's interpreter reads {fifo} (a FIFO) at every start and would block on it; "
            "nothing was run",
            "  hint: remove it (a start-up file is a regular file), or rebuild the environment: `envforge build`",
        ]


def test_blocking_startup_files_skips_regular_files_directories_and_absent_ones(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "sitecustomize").mkdir(parents=True)
    (sp / "ok.pth").write_text("import os\n")
    (sp / "dir.pth").mkdir()
    os.mkfifo(sp / "sitecustomize" / "__init__.py")
    os.mkfifo(sp / "not-a-startup-file.py")
    assert blocking_startup_files(sp, tmp_path / "bin" / "python") == [(sp / "sitecustomize" / "__init__.py", "a FIFO")]


def test_the_hook_of_a_build_without_an_env_profile_is_named_without_a_raw_none(tmp_path: Path) -> None:
    from tests.support.verify_envs import build_tiny

    build_tiny(tmp_path / "p")
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "verify", "tiny-default"],
        cwd=tmp_path / "p",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert (
        "note: start-up code run at every interpreter start: envforge-env.pth (envforge (no env profile))\n"
        in res.stdout
    )
    assert "None" not in res.stdout + res.stderr
