"""What reaches uv: the caller's shell never changes a lock or an install (field case B18), and
credentials reach uv only through its own variables, never a file or an output (issue 18, item 1).

Real uv against real local indexes on 127.0.0.1 (tests/support/localindex.py): a PEP 503 index whose JSON
pages carry PEP 700 upload times (what ``--exclude-newer`` reads), and private indexes that
require HTTP basic authentication.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.uv.run import UvError, UvSettingsRefused, cache_dir, refused_settings, run_uv, uv_environment
from envforge.uv.settings import REFUSED, UV_VERSION, classify
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]
RELEASES = (("2.20.0", "2018-06-14T00:00:00Z"), ("2.31.0", "2023-05-22T00:00:00Z"), ("2.32.3", "2024-05-29T00:00:00Z"))


def envforge(
    cwd: Path, *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env={**base, **(env or {})}
    )


# --------------------------------------------------------------------------------------------
# The classification (data from uv's env_vars.rs)


def test_classification_of_uv_variables_is_pinned() -> None:
    assert UV_VERSION == "0.13.9"
    assert [
        classify(n)
        for n in (
            "UV_RESOLUTION",
            "UV_EXCLUDE_NEWER",
            "UV_INDEX_URL",
            "UV_EXTRA_INDEX_URL",
            "UV_INDEX",
            "UV_DEFAULT_INDEX",
            "UV_FIND_LINKS",
            "UV_CONSTRAINT",
            "UV_OVERRIDE",
            "UV_INDEX_STRATEGY",
            "UV_NO_BINARY",
            "UV_NO_BUILD",
            "UV_TORCH_BACKEND",
            "UV_PYTHON",
            "UV_PRERELEASE",
        )
    ] == ["refused"] * 15
    assert [
        classify(n)
        for n in (
            "UV_COMPILE_BYTECODE",
            "UV_LINK_MODE",
            "UV",
            "UV_RUN_RECURSION_DEPTH",
            "UV_SOMETHING_NEWER",
            "PIP_INDEX_URL",
            "PIP_NO_BINARY",
            "PYTHONPATH",
            "UV_PYTHON_DOWNLOADS",
        )
    ] == ["dropped"] * 9
    assert [
        classify(n)
        for n in (
            "UV_CACHE_DIR",
            "UV_HTTP_TIMEOUT",
            "UV_INDEX_PYPI_PASSWORD",
            "UV_INDEX_MY_PRIV_USERNAME",
            "UV_KEYRING_PROVIDER",
            "SSL_CERT_FILE",
            "HTTPS_PROXY",
            "NETRC",
            "PATH",
            "HOME",
        )
    ] == ["passed"] * 10
    # a credential-looking name that is really a refused setting stays refused
    assert classify("UV_INDEX_URL") == "refused"
    assert REFUSED["UV_EXCLUDE_NEWER"] == '[recipe] exclude-newer = "2024-01-01T00:00:00Z" (recorded in the lock)'


def test_uv_environment_keeps_transport_and_drops_the_rest() -> None:
    env = uv_environment(
        {
            "UV_RESOLUTION": "lowest",
            "UV_CACHE_DIR": "/c",
            "PIP_INDEX_URL": "http://x",
            "UV_INDEX_PYPI_PASSWORD": "pw",
            "UV_COMPILE_BYTECODE": "1",
            "PATH": "/bin",
            "UV_HTTP_TIMEOUT": "5",
            "UV_PYTHON_DOWNLOADS": "automatic",
        },
        {"PATH": "/usr/bin"},
    )
    assert env == {
        "UV_CACHE_DIR": "/c",
        "UV_INDEX_PYPI_PASSWORD": "pw",
        "PATH": "/usr/bin",
        "UV_HTTP_TIMEOUT": "5",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_HTTP_RETRIES": "1",
        "NO_COLOR": "1",
    }
    assert refused_settings({"UV_RESOLUTION": "x", "UV_PRERELEASE": "allow", "UV_CACHE_DIR": "y"}) == [
        "UV_PRERELEASE",
        "UV_RESOLUTION",
    ]


def test_a_non_resolving_uv_call_runs_with_refused_variables_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    # `uv venv` / `uv pip sync` / `uv python find` never resolve: the variables are dropped, not refused.
    monkeypatch.setenv("UV_RESOLUTION", "lowest")
    out = run_uv(["--version"])
    assert out.stdout.startswith("uv ")  # the list is for UV_VERSION; a newer uv still starts
    with pytest.raises(UvSettingsRefused) as exc:
        run_uv(["pip", "compile", "--help"])
    assert exc.value.message.splitlines()[0] == (
        "your environment sets 1 uv variable that would change what uv resolves, and the lock would not record it:"
    )


# --------------------------------------------------------------------------------------------
# B18 with real uv


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    root = tmp_path_factory.mktemp("releases")
    idx = LocalIndex(root / "index")
    for version, when in RELEASES:
        idx.add(make_wheel(root / "w", "requests", version), upload_time=when)
    with serve(idx):
        yield idx


def requests_project(root: Path, index: LocalIndex, extra: str = "") -> Path:
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    (root / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n{extra}\n[indexes]\npypi = "{index.url}"\n\n'
        '[packages]\nrequests = ">=2.20"\n'
    )
    return root


def locked(proj: Path) -> dict[str, str]:
    data = tomllib.loads((proj / "lockfiles" / "pylock.r-default.toml").read_text())
    return {p["name"]: str(p["version"]) for p in data["packages"]}


def test_b18_resolution_variables_in_the_shell_are_refused_by_name(tmp_path: Path, releases: LocalIndex) -> None:
    proj = requests_project(tmp_path, releases)
    res = envforge(proj, "lock", "r", env={"UV_RESOLUTION": "lowest", "UV_EXCLUDE_NEWER": "2019-01-01T00:00:00Z"})
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-4:] == [
        "error: your environment sets 2 uv variables that would change what uv resolves, and the lock "
        "would not record them:",
        '  UV_EXCLUDE_NEWER: instead, [recipe] exclude-newer = "2024-01-01T00:00:00Z" (recorded in the lock)',
        '  UV_RESOLUTION: instead, pin the versions you want in [packages] (e.g. requests = "==2.20.0"); '
        "envforge resolves the highest versions the recipe allows",
        "  hint: unset them for envforge (`env -u UV_EXCLUDE_NEWER -u UV_RESOLUTION envforge ...`) and say it "
        "in the recipe; see docs/recipes.md (uv 0.13.9 settings)",
    ]
    assert not (proj / "lockfiles").exists()
    # Without them: the highest version the recipe allows.
    plain = envforge(proj, "lock", "r")
    assert plain.returncode == 0, plain.stderr
    assert locked(proj) == {"requests": "2.32.3"}


def test_b18_dropped_variables_change_nothing(tmp_path: Path, releases: LocalIndex) -> None:
    proj = requests_project(tmp_path / "a", releases)
    assert envforge(proj, "lock", "r").returncode == 0
    clean = (proj / "lockfiles" / "pylock.r-default.toml").read_bytes()
    noisy = {
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_CONSTRAINT": "/nonexistent",
        "UV_COMPILE_BYTECODE": "1",
        "UV_LINK_MODE": "symlink",
        "UV_SOMETHING_NEWER": "1",
        "UV_NO_INSTALLER_METADATA": "1",
        "UV_CUSTOM_COMPILE_COMMAND": "make lock",
    }
    (proj / "lockfiles" / "pylock.r-default.toml").unlink()
    res = envforge(proj, "lock", "r", env=noisy)
    assert res.returncode == 0, res.stderr
    assert (proj / "lockfiles" / "pylock.r-default.toml").read_bytes() == clean


def test_b18_exclude_newer_in_the_recipe_is_recorded_and_relocks_byte_identical(
    tmp_path: Path, releases: LocalIndex
) -> None:
    proj = requests_project(tmp_path, releases, 'exclude-newer = "2024-01-01T00:00:00Z"\n')
    assert envforge(proj, "lock", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    assert locked(proj) == {"requests": "2.31.0"}
    tool = tomllib.loads(lock.read_text())["tool"]["envforge"]
    assert tool["inputs"]["exclude-newer"] == "2024-01-01T00:00:00Z"
    first = lock.read_bytes()
    # Later: a newer release appears on the index. A plain re-lock of the unchanged recipe is identical.
    releases.add(make_wheel(tmp_path / "w", "requests", "2.33.0"), upload_time="2026-11-01T00:00:00Z")
    lock.unlink()
    again = envforge(proj, "lock", "r")
    assert again.returncode == 0, again.stderr
    assert lock.read_bytes() == first
    # --check sees a change of the key.
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace("2024-01-01T00:00:00Z", "2025-01-01"))
    stale = envforge(proj, "lock", "r", "--check")
    assert (stale.returncode, stale.stdout) == (
        1,
        f"{lock}: stale\n  exclude-newer: locked '2024-01-01T00:00:00Z', recipe now '2025-01-01'\n",
    )
    # A re-lock records the new point in time (uv keeps the locked version unless asked to upgrade it:
    # it is still allowed); lock diff shows the setting and the upgrade it then lets in.
    old = tmp_path / "old" / "pylock.r-default.toml"
    old.parent.mkdir()
    old.write_bytes(first)
    assert envforge(proj, "lock", "r", "--upgrade-package", "requests").returncode == 0
    assert locked(proj) == {"requests": "2.32.3"}
    diff = envforge(proj, "lock", "diff", str(old), str(lock))
    assert "  inputs exclude-newer: 2024-01-01T00:00:00Z -> 2025-01-01" in diff.stdout.splitlines()


@pytest.mark.parametrize(
    "value, shown",
    [("1 week", "'1 week'"), ("2024-01-01T00:00:00", "'2024-01-01T00:00:00'"), ("2024-13-01", "'2024-13-01'")],
)
def test_exclude_newer_must_be_a_fixed_point_in_time(tmp_path: Path, value: str, shown: str) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(f'[recipe]\nname = "r"\npython = "3.12"\nexclude-newer = "{value}"\n')
    res = envforge(tmp_path, "lock", "r", "--check")
    assert res.returncode == 2
    assert (
        f"recipes/r.toml:4: recipe.exclude-newer: {shown} is not a fixed point in time; write an RFC 3339 "
        'timestamp with its zone, e.g. "2024-01-01T00:00:00Z", or a date "2024-01-01" (a relative span '
        "would not give the same lock later)" in res.stderr
    )


def test_b18_build_from_a_lock_ignores_uv_and_pip_variables(tmp_path: Path, releases: LocalIndex) -> None:
    proj = requests_project(tmp_path, releases, 'exclude-newer = "2024-01-01T00:00:00Z"\n')
    assert envforge(proj, "lock", "r").returncode == 0
    hostile = {
        "UV_RESOLUTION": "lowest",
        "UV_EXCLUDE_NEWER": "2019-01-01T00:00:00Z",
        "UV_INDEX_URL": "http://127.0.0.1:9/simple",
        "UV_NO_BINARY": "1",
        "UV_COMPILE_BYTECODE": "1",
        "UV_LINK_MODE": "symlink",
        "UV_NO_INSTALLER_METADATA": "1",
        "UV_VENV_SEED": "1",
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_NO_BINARY": ":all:",
    }
    res = envforge(proj, "build", "r", env=hostile)
    assert res.returncode == 0, res.stderr
    sp = next((proj / "envs" / "r-default" / "lib").glob("python3*/site-packages"))
    assert sorted(p.name for p in sp.glob("*.dist-info")) == ["requests-2.31.0.dist-info"]
    info = sp / "requests-2.31.0.dist-info"
    assert (
        info / "INSTALLER"
    ).read_text().strip() == "uv"  # installer metadata written: UV_NO_INSTALLER_METADATA dropped
    assert not list(sp.glob("requests/__pycache__/*.pyc"))  # UV_COMPILE_BYTECODE dropped
    # UV_LINK_MODE is not passed to uv, but envforge reads it as its --link-mode, says it in the record
    assert (sp / "requests" / "__init__.py").is_symlink()
    assert json.loads((sp / ".envforge" / "generation.json").read_text())["link-mode"] == "symlink"
    assert not list(sp.glob("pip*"))  # UV_VENV_SEED dropped


# --------------------------------------------------------------------------------------------
# Issue 18.1: credentials


SECRETS = ("s3cr3t-pub-PW", "s3cr3t-priv-PW")


@pytest.fixture
def private(tmp_path: Path) -> Iterator[tuple[LocalIndex, LocalIndex]]:
    pub, priv = LocalIndex(tmp_path / "pub"), LocalIndex(tmp_path / "priv")
    pub.add(make_wheel(tmp_path / "w", "app", "1.0", requires=["secretlib"]))
    pub.add(make_wheel(tmp_path / "w", "secretlib", "0.1"))  # a decoy on the default index
    priv.add(make_wheel(tmp_path / "w2", "secretlib", "3.0"))
    with serve(pub, auth=("alice", SECRETS[0])), serve(priv, auth=("bob", SECRETS[1])):
        yield pub, priv


def private_project(root: Path, pub: LocalIndex, priv: LocalIndex, pub_url: str | None = None) -> Path:
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    (root / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{pub_url or pub.url}"\nmy-priv = "{priv.url}"\n\n'
        '[packages]\napp = "==1.0"\nsecretlib = { version = "==3.0", index = "my-priv" }\n\n'
        '[env.default]\nENVFORGE_TEST_FLAG = "on"\n'
    )
    return root


CREDENTIALS = {
    "UV_INDEX_PYPI_USERNAME": "alice",
    "UV_INDEX_PYPI_PASSWORD": SECRETS[0],
    "UV_INDEX_MY_PRIV_USERNAME": "bob",
    "UV_INDEX_MY_PRIV_PASSWORD": SECRETS[1],
}


def test_credentials_in_a_recipe_url_are_refused_without_echoing_them(tmp_path: Path, private) -> None:  # type: ignore[no-untyped-def]
    pub, priv = private
    url = pub.url.replace("http://", f"http://alice:{SECRETS[0]}@")
    proj = private_project(tmp_path / "p", pub, priv, pub_url=url)
    for args in (("lock", "r"), ("lock", "r", "--check"), ("build", "r"), ("lock", "r", "--check", "--json")):
        res = envforge(proj, *args)
        assert res.returncode == 2, (args, res.stderr)
        assert SECRETS[0] not in res.stdout + res.stderr and "alice" not in res.stdout + res.stderr
    assert (
        f"recipes/r.toml:6: indexes.pypi: 'http://<credentials>@{pub.url.split('://')[1]}' carries "
        "credentials in the URL, which would be written into the lock and printed; remove them and give "
        "them the way uv takes them: UV_INDEX_<NAME>_USERNAME and UV_INDEX_<NAME>_PASSWORD (NAME: the "
        "index's recipe name upper-cased, '-' as '_'), a ~/.netrc entry for the host, or a keyring "
        "(UV_KEYRING_PROVIDER=subprocess)" in res.stdout + res.stderr
    )
    assert not (proj / "lockfiles").exists()


def test_a_token_in_an_index_url_query_is_refused_without_echoing_it(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npriv = "https://pkgs.example/simple?private_token=tok-123"\n'
    )
    res = envforge(tmp_path, "lock", "r", "--check")
    assert res.returncode == 2 and "tok-123" not in res.stdout + res.stderr
    assert (
        "recipes/r.toml:6: indexes.priv: an index URL has no query string or fragment, and one may carry a "
        "token that would be written into the lock and printed; remove it and give credentials as "
        "UV_INDEX_<NAME>_USERNAME / UV_INDEX_<NAME>_PASSWORD, a ~/.netrc entry or a keyring" in res.stderr
    )


def test_a_lock_written_before_the_refusal_never_prints_its_password(tmp_path: Path, releases: LocalIndex) -> None:
    proj = requests_project(tmp_path, releases)
    assert envforge(proj, "lock", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    clean = lock.read_text()
    legacy = tmp_path / "legacy" / "pylock.r-default.toml"
    legacy.parent.mkdir()
    from envforge.lock.write import restamp

    # as an envforge of that time wrote it: credentials in the URLs, its packages-digest recorded
    legacy.write_text(restamp(clean.replace("http://127.0.0.1", "http://alice:hunter2-PW@127.0.0.1")))
    assert "hunter2-PW" in legacy.read_text()
    outputs = [
        envforge(proj, "lock", "textconv", str(legacy)),
        envforge(proj, "lock", "diff", "--all", str(legacy), str(lock)),
        envforge(proj, "lock", "diff", "--json", str(legacy), str(lock)),
    ]
    lock.write_text(legacy.read_text())
    outputs += [envforge(proj, "lock", "r", "--check"), envforge(proj, "lock", "r", "--check", "--json")]
    for res in outputs:
        assert res.returncode in (0, 1), res.stderr
        assert "hunter2-PW" not in res.stdout + res.stderr
    assert "http://<credentials>@127.0.0.1" in outputs[0].stdout


def test_the_guard_compares_indexes_without_userinfo() -> None:
    from envforge.recipe.model import Index
    from envforge.lock.routing import attribute, redact_userinfo, without_userinfo

    idx = [Index("pypi", "https://pypi.org/simple"), Index("priv", "http://bob:pw@10.0.0.1:8080/simple")]
    assert attribute("http://10.0.0.1:8080/files/x-1.0-py3-none-any.whl", idx) == "priv"
    assert attribute("http://bob:pw@10.0.0.1:8080/packages/x.whl", idx) == "priv"
    assert attribute("http://other:1/x.whl", idx) == "unknown (other:1)"
    assert without_userinfo("http://bob:pw@h/simple") == "http://h/simple"
    assert redact_userinfo("see http://bob:pw@h/simple and git+ssh://git@github.com/a") == (
        "see http://<credentials>@h/simple and git+ssh://git@github.com/a"
    )  # the one redaction: ssh's user stays


@pytest.mark.slow
def test_private_indexes_with_uv_credentials_never_leak(tmp_path: Path, private) -> None:  # type: ignore[no-untyped-def]
    pub, priv = private
    proj = private_project(tmp_path / "p", pub, priv)
    outputs: list[str] = []

    def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        res = envforge(proj, *args, env=CREDENTIALS)
        outputs.append(res.stdout + res.stderr)
        assert res.returncode == code, (args, res.stdout, res.stderr)
        return res

    # Without credentials uv cannot read the index: the failure says so, and no lock is written.
    bare = envforge(proj, "lock", "r", drop=tuple(CREDENTIALS))
    assert bare.returncode == 2 and "401 Unauthorized" in bare.stderr
    run("lock", "r")
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    data = tomllib.loads(lock.read_text())
    assert {p["name"]: (str(p["version"]), p["index"]) for p in data["packages"]} == {
        "app": ("1.0", pub.url),
        "secretlib": ("3.0", priv.url),
    }  # the guard accepts the private index's files
    run("lock", "r", "--check")
    check = json.loads(run("lock", "r", "--check", "--json").stdout)
    assert [row["fresh"] for row in check["data"]["locks"]] == [True]
    old = tmp_path / "old" / "pylock.r-default.toml"
    old.parent.mkdir()
    old.write_text(lock.read_text().replace('"==3.0"', '"==2.0"'))
    run("lock", "diff", "--all", str(old), str(lock))
    run("lock", "diff", "--all", "--json", str(old), str(lock))
    subprocess.run([*ENVFORGE, "lock", "textconv", str(lock)], cwd=proj, capture_output=True, text=True, check=True)
    outputs.append(
        subprocess.run([*ENVFORGE, "lock", "textconv", str(lock)], cwd=proj, capture_output=True, text=True).stdout
    )
    run("build", "r")
    run("verify", "r-default")
    run("verify", "r-default", "--json")
    run("env", "show", "r-default")
    for text in outputs:
        for secret in SECRETS:
            assert secret not in text
    leaked = subprocess.run(
        ["grep", "-rlF", "-e", SECRETS[0], "-e", SECRETS[1], str(proj)], capture_output=True, text=True
    )
    assert leaked.stdout == "" and leaked.returncode == 1  # no file in the project or its environments


# --------------------------------------------------------------------------------------------
# Time limits: uv's own, and the caller's deadline (envforge.core.deadline)


def _stuck_uv(tmp_path: Path) -> tuple[Path, Path]:
    """A uv that never answers: a shell that records the pid of its ``sleep`` child and waits."""
    pid_file = tmp_path / "sleep.pid"
    script = tmp_path / "uv"
    script.write_text(f"#!/bin/sh\nsleep 301 &\necho $! > {pid_file}\nwait\n")
    script.chmod(0o755)
    return script, pid_file


def _gone(pid_file: Path) -> bool:
    import time

    pid = int(pid_file.read_text())
    for _ in range(100):
        stat = Path(f"/proc/{pid}/stat")
        if not stat.exists() or stat.read_text().split(") ")[1].startswith("Z"):
            return True
        time.sleep(0.05)
    return False


def test_uv_stopped_by_its_own_timeout_or_the_callers_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envforge.core.deadline import deadline
    from envforge.uv.run import UvError

    script, pid_file = _stuck_uv(tmp_path)
    monkeypatch.setenv("ENVFORGE_UV", str(script))
    with pytest.raises(UvError) as own:
        run_uv(["venv", "x"], timeout_s=1.0)
    assert (own.value.message, own.value.deadline_s) == ("uv ran past 1 s and was stopped", None)
    assert _gone(pid_file)  # the whole process group
    pid_file.unlink()
    with deadline(1.5), pytest.raises(UvError) as late:
        run_uv(["venv", "x"], timeout_s=60)
    assert (late.value.message, late.value.deadline_s) == (
        "uv venv ran past its caller's 1.5 s limit and was stopped",
        1.5,
    )
    assert late.value.exit_code == 3
    assert _gone(pid_file)
    pid_file.unlink()
    with deadline(0.0), pytest.raises(UvError) as never:
        run_uv(["pip", "install", "x"])
    assert (never.value.message, never.value.deadline_s) == (
        "uv pip ran past its caller's 0 s limit and was not started",
        0.0,
    )
    assert not pid_file.exists()


def test_cache_dir_is_what_uv_reports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``cache_dir()`` runs ``uv cache dir``: ``$UV_CACHE_DIR``, else ``$XDG_CACHE_HOME/uv``."""
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "uv"
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.setenv("ENVFORGE_UV", "/bin/false")
    with pytest.raises(UvError, match=r"^uv cache dir failed with exit status 1$"):
        cache_dir()


def test_uv_output_with_a_password_is_redacted_in_text_and_json(tmp_path: Path) -> None:
    """Field case N37: uv joins a --find-links value to the working directory and prints it with
    its password; a URL itself is refused as --find-links (exit 2) without being echoed."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "tiny.toml").write_text(
        '[recipe]\nname = "tiny"\npython = "3.12"\nresolution = "no-deps"\n[packages]\ntinypkg = "==1.0"\n'
    )
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "envforge", "lock", "tiny", "--offline", *a],  # noqa: E731
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for extra in ((), ("--json",)):
        joined = run("--find-links", "sub/http:/u:SECRET@127.0.0.1:1/files/", *extra)
        assert joined.returncode == 3
        assert "SECRET" not in joined.stdout + joined.stderr
        assert f"{tmp_path}/sub/http:/<credentials>@127.0.0.1:1/files" in joined.stdout + joined.stderr
        url = run("--find-links", "http://u:SECRET@127.0.0.1:1/files/", *extra)
        assert url.returncode == 2
        assert "SECRET" not in url.stdout + url.stderr
        assert (
            "argument --find-links: takes a local directory of wheels, not a URL (the URL is not shown: it may "
            "carry a password); download the wheels and pass their directory"
        ) in url.stdout + url.stderr
