"""A patched file the interpreter never imports is not "applied" (field case B43).

Real charset-normalizer 3.4.2 wheel installed with the real uv; the interpreter of the environment is
asked (envforge.patching.resolution) which file `charset_normalizer.md` resolves to."""

from __future__ import annotations

import importlib.machinery
import subprocess
import sys
from pathlib import Path

from envforge import patching
from envforge.patching.resolution import Resolution, env_interpreter, module_name, not_imported, resolve_modules
from tests.support.charset_env import MD, PATCHSET_ID, charset_env, extensions, moved_aside


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_module_names_of_paths() -> None:
    assert module_name("charset_normalizer/md.py") == "charset_normalizer.md"
    assert module_name("charset_normalizer/__init__.py") == "charset_normalizer"
    assert module_name("top.py") == "top"
    assert module_name("pkg/data.json") is None
    assert module_name("pkg-1.0.data/scripts/run.py") is None
    assert module_name("__init__.py") is None


def test_the_interpreter_imports_the_compiled_module_so_the_patch_is_shadowed(tmp_path: Path) -> None:
    env = charset_env(tmp_path / "proj")
    so = extensions(env)
    assert [p.name.split(".")[0] for p in so] == ["md", "md__mypyc"]
    ext = next(p for p in so if p.name.startswith("md."))
    assert env_interpreter(env.site_packages) == env.python
    before = (env.site_packages / MD).read_bytes()

    sets = patching.load_patchsets(tmp_path / "proj" / "patchsets", [PATCHSET_ID])
    report = patching.apply(env.site_packages, sets)
    assert [(r.state, r.file) for r in report.results] == [("shadowed", MD)]
    assert not report.ok and not report.written and report.changes == ()
    suffixes = subprocess.run(
        [str(env.python), "-c", ("import importlib.machinery as m; print(', '.join(m.EXTENSION_SUFFIXES))")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert report.errors == (
        (
            f"{PATCHSET_ID}: {MD}: the edit would apply, but the interpreter imports charset_normalizer.md from "
            f"charset_normalizer/{ext.name}, a compiled extension module (the import system tries the extension "
            f"suffixes {suffixes} before .py): the patched source never runs; nothing written. Next step: patch the "
            f"code the interpreter runs: install a build of charset-normalizer without that module (its pure-Python "
            f"py3-none-any wheel, if it publishes one) and re-lock, or remove the patchset from the recipe; or narrow "
            f"`versions` in cn-threshold.toml to exclude this release"
        ),
    )
    assert (env.site_packages / MD).read_bytes() == before
    assert patching.read_manifest(env.site_packages) is None

    # the import system agrees: the extension is what runs
    origin = subprocess.run(
        [str(env.python), "-c", "import charset_normalizer.md as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(origin).name == ext.name

    cli = envforge(tmp_path / "proj", "apply-patches", "cn-default", PATCHSET_ID)
    assert cli.returncode == 1
    assert cli.stdout.splitlines() == [f"shadowed         {PATCHSET_ID}  {MD}"]
    assert f"but the interpreter imports charset_normalizer.md from charset_normalizer/{ext.name}" in cli.stderr
    dry = envforge(tmp_path / "proj", "apply-patches", "cn-default", PATCHSET_ID, "--dry-run")
    assert dry.returncode == 1 and "dry run: 0 files would change" in dry.stderr


def test_without_the_compiled_modules_the_source_is_imported_and_the_patch_applies(tmp_path: Path) -> None:
    env = charset_env(tmp_path / "proj")
    sets = patching.load_patchsets(tmp_path / "proj" / "patchsets", [PATCHSET_ID])
    with moved_aside(extensions(env), tmp_path / "aside"):
        report = patching.apply(env.site_packages, sets)
        assert [(r.state, r.file) for r in report.results] == [("applied", MD)] and report.written
        runs = subprocess.run(
            [
                str(env.python),
                "-c",
                (
                    "import inspect, charset_normalizer.md as m; "
                    "print(m.__file__.rsplit('/', 1)[1], inspect.signature(m.mess_ratio.__wrapped__)"
                    ".parameters['maximum_threshold'].default)"
                ),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert runs == ["md.py", "0.35"]
        again = patching.apply(env.site_packages, sets)
        assert [r.state for r in again.results] == ["already-applied"] and again.ok
    # the compiled module back (a reinstall of the same wheel, an upgrade): patched on disk, never run
    later = patching.apply(env.site_packages, sets)
    assert [r.state for r in later.results] == ["shadowed"] and not later.ok
    assert later.results[0].message.startswith(
        f"{PATCHSET_ID}: {MD}: the file is patched, but the interpreter "
        f"imports charset_normalizer.md from charset_normalizer/md."
    )
    assert "nothing written" not in later.results[0].message


def test_a_bare_directory_has_no_interpreter_to_ask(tmp_path: Path) -> None:
    sp = tmp_path / "site-packages"
    sp.mkdir()
    assert env_interpreter(sp) is None
    assert env_interpreter(tmp_path / "lib" / "python3.12" / "site-packages") is None


def test_resolution_chain_names_where_the_name_leaves_site_packages(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "pkg").mkdir(parents=True)
    (sp / "pkg" / "mod.py").write_text("")
    other = tmp_path / "elsewhere" / "pkg"
    elsewhere = Resolution(
        "pkg/mod.py",
        "pkg.mod",
        (
            {
                "module": "pkg",
                "origin": str(other / "__init__.py"),
                "loader": "SourceFileLoader",
                "locations": [str(other)],
            },
            {"module": "pkg.mod", "origin": str(other / "mod.py"), "loader": "SourceFileLoader", "locations": None},
        ),
    )
    assert not_imported(sp, elsewhere) == (
        f"the interpreter imports package pkg from {other / '__init__.py'}, not from this site-packages"
    )
    here = Resolution(
        "pkg/mod.py",
        "pkg.mod",
        (
            {"module": "pkg", "origin": None, "loader": "NamespaceLoader", "locations": [str(sp / "pkg")]},
            {
                "module": "pkg.mod",
                "origin": str(sp / "pkg" / "mod.py"),
                "loader": "SourceFileLoader",
                "locations": None,
            },
        ),
    )
    assert not_imported(sp, here) is None
    missing = Resolution(
        "pkg/mod.py",
        "pkg.mod",
        (
            {"module": "pkg", "origin": None, "loader": "NamespaceLoader", "locations": [str(sp / "pkg")]},
            {"module": "pkg.mod", "origin": None, "loader": None, "locations": None},
        ),
    )
    assert not_imported(sp, missing) == (
        "the interpreter finds no module pkg.mod (import pkg.mod fails or loads no file)"
    )
    broken = Resolution("pkg/mod.py", "pkg.mod", ({"module": "pkg", "error": "ValueError: pkg.__spec__ is None"},))
    assert not_imported(sp, broken) == "the interpreter cannot resolve pkg: ValueError: pkg.__spec__ is None"


def test_the_probe_runs_no_package_code_and_follows_namespace_packages(tmp_path: Path) -> None:
    """A package whose ``__init__`` would fail is resolved without running it; a namespace package
    (no ``__init__``) in between is followed."""
    sp = tmp_path / "sp"
    (sp / "loud").mkdir(parents=True)
    (sp / "loud" / "__init__.py").write_text("raise SystemExit('__init__ ran')\n")
    (sp / "loud" / "ns" / "deep").mkdir(parents=True)
    (sp / "loud" / "ns" / "deep" / "leaf.py").write_text("")
    (sp / "loud" / "ns" / "deep" / "__init__.py").write_text("raise SystemExit('deep __init__ ran')\n")
    ext = importlib.machinery.EXTENSION_SUFFIXES[0]  # .cpython-311-x86_64-linux-gnu.so here
    (sp / "loud" / "ns" / "deep" / f"leaf{ext}").write_bytes(b"not loaded")
    files = ["loud/ns/deep/leaf.py", "loud/__init__.py"]
    found = resolve_modules(Path(sys.executable), files, env={"PYTHONPATH": str(sp)})
    assert found["loud/__init__.py"].chain[0]["origin"] == str(sp / "loud" / "__init__.py")
    assert not_imported(sp, found["loud/__init__.py"]) is None
    leaf = found["loud/ns/deep/leaf.py"]
    assert [e["module"] for e in leaf.chain] == ["loud", "loud.ns", "loud.ns.deep", "loud.ns.deep.leaf"]
    assert leaf.chain[1]["origin"] is None and leaf.chain[1]["locations"] == [str(sp / "loud" / "ns")]
    assert not_imported(sp, leaf) == (
        f"the interpreter imports loud.ns.deep.leaf from loud/ns/deep/leaf{ext}, a compiled extension module (the "
        f"import system tries the extension suffixes {', '.join(importlib.machinery.EXTENSION_SUFFIXES)} before .py)"
    )


def _venv_at(root: Path, *, cfg: bool = True, python: bool = True) -> None:
    (root / "bin").mkdir(parents=True)
    if cfg:
        (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if python:
        (root / "bin" / "python").write_text("")


def test_env_interpreter_needs_lib_pyvenv_cfg_and_bin_python(tmp_path: Path, monkeypatch) -> None:
    _venv_at(tmp_path / "v")
    assert env_interpreter(tmp_path / "v" / "lib" / "python3.12" / "site-packages") == tmp_path / "v" / "bin" / "python"
    assert env_interpreter(tmp_path / "v" / "notlib" / "python3.12" / "site-packages") is None
    _venv_at(tmp_path / "nopython", python=False)
    assert env_interpreter(tmp_path / "nopython" / "lib" / "python3.12" / "site-packages") is None
    _venv_at(tmp_path / "nocfg", cfg=False)
    assert env_interpreter(tmp_path / "nocfg" / "lib" / "python3.12" / "site-packages") is None
    monkeypatch.chdir(tmp_path)  # a relative path of four parts is a venv's site-packages too
    assert env_interpreter(Path("v/lib/python3.12/site-packages")) == Path("v/bin/python")
    assert env_interpreter(Path("lib/python3.12/site-packages")) is None


def _res(sp: Path, module: str, chain: list[dict[str, object]], suffixes: tuple[str, ...] = ()) -> Resolution:
    path = module.replace(".", "/") + ".py"
    return Resolution(path, module, tuple(chain), suffixes)


def test_not_imported_names_the_level_that_leaves_site_packages(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "pkg" / "sub").mkdir(parents=True)
    here = {"module": "pkg", "origin": str(sp / "pkg" / "__init__.py"), "locations": [str(sp / "pkg")]}
    # the chain stops at a package imported from elsewhere (its last level is not the module)
    away = {"module": "pkg", "origin": "/src/pkg/__init__.py", "locations": ["/src/pkg"]}
    assert not_imported(sp, _res(sp, "pkg.mod", [away])) == (
        "the interpreter imports package pkg from /src/pkg/__init__.py, not from this site-packages"
    )
    # a sub-package from elsewhere, below a package that is here
    sub = {"module": "pkg.sub", "origin": "/src/pkg/sub/__init__.py", "locations": ["/src/pkg/sub"]}
    mod = {"module": "pkg.sub.mod", "origin": "/src/pkg/sub/mod.py"}
    assert not_imported(sp, _res(sp, "pkg.sub.mod", [here, sub, mod])) == (
        "the interpreter imports package pkg.sub from /src/pkg/sub/__init__.py, not from this site-packages"
    )
    # a namespace package: no origin, its locations named
    ns = {"module": "pkg", "origin": None, "locations": ["/a/pkg", "/b/pkg"]}
    assert not_imported(sp, _res(sp, "pkg.mod", [ns, {"module": "pkg.mod", "origin": "/a/pkg/mod.py"}])) == (
        "the interpreter imports package pkg from /a/pkg, /b/pkg, not from this site-packages"
    )
    nowhere = {"module": "pkg", "origin": None, "locations": []}
    assert not_imported(sp, _res(sp, "pkg.mod", [nowhere])) == (
        "the interpreter imports package pkg from nowhere, not from this site-packages"
    )


def test_not_imported_names_another_source_file_without_the_extension_clause(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "pkg").mkdir(parents=True)
    (sp / "pkg" / "mod.py").write_text("")
    here = {"module": "pkg", "origin": str(sp / "pkg" / "__init__.py"), "locations": [str(sp / "pkg")]}
    other = {"module": "pkg.mod", "origin": str(sp / "pkg" / "mod_impl.py")}
    suffixes = (".cpython-312-x86_64-linux-gnu.so", ".abi3.so", ".so")
    assert not_imported(sp, _res(sp, "pkg.mod", [here, other], suffixes)) == (
        "the interpreter imports pkg.mod from pkg/mod_impl.py"
    )
    ext = {"module": "pkg.mod", "origin": str(sp / "pkg" / "mod.abi3.so")}
    assert not_imported(sp, _res(sp, "pkg.mod", [here, ext], suffixes)) == (
        "the interpreter imports pkg.mod from pkg/mod.abi3.so, a compiled extension module (the import system tries "
        "the extension suffixes .cpython-312-x86_64-linux-gnu.so, .abi3.so, .so before .py)"
    )
    same = {"module": "pkg.mod", "origin": str(sp / "pkg" / "mod.py")}
    assert not_imported(sp, _res(sp, "pkg.mod", [here, same], suffixes)) is None


def test_resolve_modules_asks_the_probe_once_and_reads_a_partial_answer(monkeypatch, tmp_path: Path) -> None:
    """What is asked of the interpreter (one probe: the module names, the env, the timeout), and an
    answer without ``modules`` or ``extension_suffixes`` (an interpreter whose probe printed less)
    giving empty chains, never a crash. The real interpreter's answers: the tests above."""
    from envforge.core.probe import ProbeResult
    from envforge.patching import resolution

    calls: list[tuple[Path, list[str], object, float]] = []

    def fake(python: Path, script: str, *, args: list[str], env: object, timeout_s: float) -> ProbeResult:
        assert "find_spec" in script  # import_probe.py, read as the package's resource
        calls.append((python, list(args), env, timeout_s))
        return ProbeResult({}, "", 0.0)

    monkeypatch.setattr(resolution, "run_probe", fake)
    got = resolve_modules(
        tmp_path / "python", ["a/b.py", "a/data.json", "a/b.py", "c.py"], env={"X": "1"}, timeout_s=7.5
    )
    assert got == {"a/b.py": Resolution("a/b.py", "a.b", (), ()), "c.py": Resolution("c.py", "c", (), ())}
    assert calls == [(tmp_path / "python", ['{"modules": {"a/b.py": "a.b", "c.py": "c"}}'], {"X": "1"}, 7.5)]
    assert resolve_modules(tmp_path / "python", ["a/data.json"]) == {} and len(calls) == 1
    resolve_modules(tmp_path / "python", ["c.py"])
    assert calls[-1][2:] == (None, 60.0)


def test_a_file_beside_site_packages_is_named_by_its_own_path(tmp_path: Path) -> None:
    """A module loaded from a sibling directory whose name begins like site-packages'
    (``site-packages-old/``) is not inside site-packages: its path is given whole, never as
    ``../site-packages-old/...``."""
    sp = tmp_path / "site-packages"
    (sp / "pkg").mkdir(parents=True)
    here = {"module": "pkg", "origin": str(sp / "pkg" / "__init__.py"), "locations": [str(sp / "pkg")]}
    beside = str(tmp_path / "site-packages-old" / "pkg" / "mod.py")
    assert not_imported(sp, _res(sp, "pkg.mod", [here, {"module": "pkg.mod", "origin": beside}])) == (
        f"the interpreter imports pkg.mod from {beside}"
    )
