"""``envforge init --from-env``: adopt a hand-built environment (installed with the real uv from a
local index on 127.0.0.1, then edited by hand), lock it, rebuild it, and compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.workflows.adopt import PYTORCH_INDEX, adopt_environment, recipe_name_of
from envforge.core.errors import InputError
from envforge.uv.run import uv_binary
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def hand_built_env(tmp: Path, index: LocalIndex, wheel: Path) -> Path:
    """What a team has: a uv venv, one package from the index, one wheel installed by path."""
    uv = uv_binary()
    env = tmp / "handmade"
    from envforge.uv.interpreter import find_python

    python = str(find_python("3.12", None).path)
    subprocess.run(
        [uv, "venv", "--quiet", "--python", python, str(env)],
        check=True,
        timeout=120,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    py = str(env / "bin" / "python")
    # --link-mode copy: the shared uv cache stays out of reach of the hand edits below
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--link-mode",
            "copy",
            "--python",
            py,
            "--index-url",
            index.url,
            "model-kernels==1.0",
        ],
        check=True,
        timeout=300,
    )
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--link-mode", "copy", "--python", py, str(wheel)], check=True, timeout=300
    )
    return env


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "model-kernels", "1.0"))
    local = make_wheel(tmp_path / "local", "side-car", "0.3")
    with serve(idx):
        yield tmp_path, idx, hand_built_env(tmp_path, idx, local)


def edit_a_file(env: Path) -> str:
    """As ``sed -i`` does: a new file renamed over the old one (an in-place write would also change
    the copy in uv's cache, which uv hardlinked into the environment: field case B09)."""
    (target,) = env.glob("lib/python3*/site-packages/model_kernels/__init__.py")
    tmp = target.with_name("sedAbc123")
    tmp.write_text(target.read_text() + "PATCHED_BY_SED = True\n")
    os.replace(tmp, target)
    return "model_kernels/__init__.py"


@pytest.mark.slow
def test_adopt_lock_rebuild_and_report_hand_edits(setup) -> None:  # type: ignore[no-untyped-def]
    tmp, idx, env = setup
    edited = edit_a_file(env)
    proj = tmp / "proj"
    proj.mkdir()
    res = envforge(proj, "init", "--from-env", str(env), "--name", "team", "--index-url", idx.url, "--json")
    assert res.returncode == 1, res.stderr  # findings: a hand edit and a wheel from a path
    data = json.loads(res.stdout)
    assert data["schema"] == "envforge.adopt/1"
    d = data["data"]
    assert [(x["name"], x["version"], x["source"], x["index"], x["installer"]) for x in d["distributions"]] == [
        ("model-kernels", "1.0", "index", None, "uv"),
        ("side-car", "0.3", "url", None, "uv"),
    ]
    assert d["distributions"][1]["url"].startswith("file://") and d["python"] == "3.12"
    assert [(e["distribution"], e["path"], e["actual_sha256"] is not None) for e in d["hand_edits"]] == [
        ("model-kernels", edited, True)
    ]
    recipe = (proj / "recipes" / "team.toml").read_text()
    assert recipe.splitlines()[2:] == [
        f"# not from an index, not pinned here: side-car 0.3 (url {d['distributions'][1]['url']})",
        "",
        "[recipe]",
        'name = "team"',
        f'description = "adopted from {env}"',
        'python = "3.12"',
        'resolution = "no-deps"',
        'patchsets = ["adopted-model-kernels"]',
        "",
        "[indexes]",
        f'pypi = "{idx.url}"',
        "",
        "[packages]",
        'model-kernels = "==1.0"',
    ]
    assert json.loads((proj / "recipes" / "team.adopted.json").read_text())["hand_edits"] == d["hand_edits"]
    assert (proj / "lockfiles" / "pylock.team-default.toml").is_file()
    assert d["captured"] == [
        {
            "distribution": "model-kernels",
            "patchset": "adopted-model-kernels",
            "captured": [edited],
            "operations": [f"add-statement {edited} `PATCHED_BY_SED = True`"],
            "not_captured": [],
        }
    ]
    # the next build reproduces the index part and, through the captured patchset, the hand edit
    built = envforge(proj, "build", "team")
    assert built.returncode == 0, built.stderr
    (new,) = (proj / "envs" / "team-default").glob("lib/python3*/site-packages")
    assert (new / edited).read_text() == (next(env.glob("lib/python3*/site-packages")) / edited).read_text()
    assert (new / edited).read_text() == "__version__ = '1.0'\nPATCHED_BY_SED = True\n"
    listed = subprocess.run(
        [
            uv_binary(),
            "pip",
            "list",
            "--python",
            str(proj / "envs" / "team-default" / "bin" / "python"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [(p["name"], p["version"]) for p in json.loads(listed)] == [("model-kernels", "1.0")]
    # verify on the old environment, against the adopted lock, lists exactly how it differs
    old = envforge(proj, "verify", str(env), "--lock", "lockfiles/pylock.team-default.toml", "--json")
    assert old.returncode == 1, old.stderr
    found = sorted((f["kind"], f["subject"]) for f in json.loads(old.stdout)["data"]["findings"])
    # the hand edit is there (the captured add-statement holds on it), and the file is not the released one
    assert found == [("tampered", "model-kernels 1.0: model_kernels/__init__.py"), ("unexpected", "side-car 0.3")]
    new_env = envforge(proj, "verify", "team-default")
    assert new_env.returncode == 0, new_env.stdout + new_env.stderr
    # the project's only recipe and only environment are the defaults: nothing asks for quickstart
    checked = envforge(proj, "lock", "--check")
    assert (checked.returncode, checked.stdout) == (
        0,
        f"{proj / 'lockfiles' / 'pylock.team-default.toml'}: up to date\n",
    )
    plain = envforge(proj, "verify")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    shown = envforge(proj, "env", "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].startswith(f"environment: {proj / 'envs' / 'team-default'} (")


@pytest.mark.slow
def test_adopt_human_output_and_refusals(setup) -> None:  # type: ignore[no-untyped-def]
    tmp, idx, env = setup
    edited = edit_a_file(env)
    proj = tmp / "proj"
    proj.mkdir()
    res = envforge(proj, "init", "--from-env", str(env), "--index-url", idx.url, "--no-lock")
    assert res.returncode == 1
    assert res.stdout.splitlines() == [
        "created recipes/handmade.toml: 1 distribution pinned (python 3.12)",
        "created recipes/handmade.adopted.json",
        "created patchsets/adopted-model-kernels.toml: captured "
        f"{edited} (1 operation; review it, `envforge build` applies it)",
    ]
    err = res.stderr.splitlines()
    assert err[0].startswith("warning: side-car 0.3 was installed from url file://")
    assert len(err) == 1
    again = envforge(proj, "init", "--from-env", str(env), "--no-lock")
    assert again.returncode == 2 and again.stderr.startswith(
        f"error: {proj / 'recipes' / 'handmade.toml'} already exists"
    )
    notenv = envforge(proj, "init", "--from-env", str(tmp))
    assert notenv.returncode == 2 and notenv.stderr.startswith(
        f"error: {tmp} is not a virtual environment (no pyvenv.cfg)"
    )


def test_torch_builds_are_routed_to_the_pytorch_index(tmp_path: Path) -> None:
    env = tmp_path / "v"
    sp = env / "lib" / "python3.12" / "site-packages"
    for name, version in (("torch", "2.9.1+cu128"), ("numpy", "2.3.0"), ("torchvision", "0.24.1+cpu")):
        di = sp / f"{name}-{version}.dist-info"
        di.mkdir(parents=True)
        (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
        (di / "RECORD").write_text("")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1.final.0\n")
    a = adopt_environment(env, name="gpu")
    assert a.indexes == (
        ("pypi", "https://pypi.org/simple"),
        ("pytorch-cu128", PYTORCH_INDEX.format(tag="cu128")),
        ("pytorch-cpu", "https://download.pytorch.org/whl/cpu"),
    )
    assert a.recipe_text.split("[packages]\n")[1] == (
        'numpy = "==2.3.0"\ntorch = {version = "==2.9.1+cu128", index = "pytorch-cu128"}\n'
        'torchvision = {version = "==0.24.1+cpu", index = "pytorch-cpu"}\n'
    )
    with pytest.raises(InputError, match="^--name 'a.b': "):
        adopt_environment(env, name="a.b")


def replace_file(path: Path, old: str, new: str) -> None:
    """A hand edit as an editor saving a new file does (never in place: uv may hardlink its cache)."""
    text = path.read_text()
    assert text.count(old) == 1
    tmp = path.with_name(path.name + ".swp")
    tmp.write_text(text.replace(old, new))
    os.replace(tmp, path)


@pytest.mark.slow
def test_hand_edits_of_a_real_wheel_become_a_patchset_the_next_build_applies(tmp_path: Path) -> None:
    from tests.conftest import cached_wheel
    from envforge.uv.interpreter import find_python

    idx = LocalIndex(tmp_path / "index")
    idx.add(cached_wheel("sglang", "0.5.9"))
    uv, env = uv_binary(), tmp_path / "team"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", str(find_python("3.12", None).path), str(env)],
        check=True,
        timeout=120,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    cache = {**os.environ, "ENVFORGE_CACHE_DIR": str(tmp_path / "cache")}
    with serve(idx):
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--python",
                str(env / "bin" / "python"),
                "--index-url",
                idx.url,
                "sglang==0.5.9",
            ],
            check=True,
            timeout=300,
        )
        (sp,) = env.glob("lib/python3*/site-packages")
        replace_file(
            sp / "sglang" / "utils.py",
            "def info_once(message: str):\n    logger.info(message)",
            "def info_once(message: str):\n    logger.warning(message)",
        )
        replace_file(sp / "sglang" / "README.md", "SGLang", "SGLang (team fork)")
        proj = tmp_path / "proj"
        proj.mkdir()
        res = subprocess.run(
            [*ENVFORGE, "init", "--from-env", str(env), "--index-url", idx.url],
            cwd=proj,
            capture_output=True,
            text=True,
            timeout=300,
            env=cache,
        )
        assert res.returncode == 1, res.stderr
        assert res.stdout.splitlines() == [
            "created recipes/team.toml: 1 distribution pinned (python 3.12)",
            "created lockfiles/pylock.team-default.toml",
            "created recipes/team.adopted.json",
            "created patchsets/adopted-sglang.toml: captured sglang/utils.py (1 operation; review it, "
            "`envforge build` applies it)",
        ]
        assert [x for x in res.stderr.splitlines() if x.startswith("warning")] == [
            "warning: hand edit: sglang/README.md (sglang) not captured: "
            "not a .py file: capture edits Python files only"
        ]
        patchset = (proj / "patchsets" / "adopted-sglang.toml").read_text()
        assert 'id = "adopted-sglang"\ndistribution = "sglang"\nversions = "==0.5.9"\n' in patchset
        assert f'reason = "captured from hand edits in {env} by envforge init --from-env"' in patchset
        assert 'kind = "replace-definition"\nfile = "sglang/utils.py"\ndefinition = "info_once"' in patchset
        assert 'patchsets = ["adopted-sglang"]' in (proj / "recipes" / "team.toml").read_text()
        report = json.loads((proj / "recipes" / "team.adopted.json").read_text())["captured"]
        assert report == [
            {
                "distribution": "sglang",
                "patchset": "adopted-sglang",
                "captured": ["sglang/utils.py"],
                "operations": ["replace-definition sglang/utils.py info_once"],
                "not_captured": [
                    {"path": "sglang/README.md", "reason": "not a .py file: capture edits Python files only"}
                ],
            }
        ]
        built = subprocess.run(
            [*ENVFORGE, "build", "team"], cwd=proj, capture_output=True, text=True, timeout=300, env=cache
        )
        assert built.returncode == 0, built.stderr
    (new,) = (proj / "envs" / "team-default").glob("lib/python3*/site-packages")
    assert (new / "sglang" / "utils.py").read_bytes() == (sp / "sglang" / "utils.py").read_bytes()
    assert "team fork" not in (new / "sglang" / "README.md").read_text()
    clean = subprocess.run(
        [*ENVFORGE, "verify", "team-default"], cwd=proj, capture_output=True, text=True, timeout=300, env=cache
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    # offline (the index is gone, the release cache empty): the edit is reported, not captured
    other = tmp_path / "other"
    other.mkdir()
    off = subprocess.run(
        [*ENVFORGE, "init", "--from-env", str(env), "--index-url", idx.url, "--no-lock", "--json"],
        cwd=other,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ENVFORGE_CACHE_DIR": str(tmp_path / "cache2")},
    )
    assert off.returncode == 1, off.stderr
    (entry,) = json.loads(off.stdout)["data"]["captured"]
    assert entry["patchset"] is None and entry["captured"] == [] and entry["operations"] == []
    assert [n["path"] for n in entry["not_captured"]] == ["sglang/README.md", "sglang/utils.py"]
    assert entry["not_captured"][1]["reason"].startswith(
        f"original wheel unavailable: cannot read the package index at {idx.url}"
    )
    assert not (other / "patchsets" / "adopted-sglang.toml").exists()
    assert "patchsets" not in (other / "recipes" / "team.toml").read_text()


def test_edits_that_cannot_be_captured_are_reported_with_the_reason(tmp_path: Path) -> None:
    import base64
    import hashlib

    from envforge.workflows.adopt import capture_hand_edits

    def rec(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    env = tmp_path / "v"
    sp = env / "lib" / "python3.12" / "site-packages"
    (env / "lib").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1.final.0\n")
    files = {"side/__init__.py": b"X = 1\n", "side/data.json": b"{}\n", "side/gone.py": b"Y = 2\n"}
    di = sp / "side-0.3.dist-info"
    di.mkdir(parents=True)
    for path, data in files.items():
        (sp / path).parent.mkdir(parents=True, exist_ok=True)
        (sp / path).write_bytes(data + b"# edited\n")
    (sp / "side" / "gone.py").unlink()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: side\nVersion: 0.3\n\n")
    (di / "RECORD").write_text("".join(f"{p},{rec(d)},{len(d)}\n" for p, d in files.items()))
    (di / "direct_url.json").write_text('{"url": "file:///w/side-0.3-py3-none-any.whl", "archive_info": {}}')
    adoption = adopt_environment(env, name="v")
    (c,) = capture_hand_edits(adoption, tmp_path / "patchsets", tmp_path / "cache")
    assert c.as_dict() == {
        "distribution": "side",
        "patchset": None,
        "captured": [],
        "operations": [],
        "not_captured": [
            {
                "path": "side/__init__.py",
                "reason": "side 0.3 was installed from url file:///w/side-0.3-py3-none-any.whl, not from an index",
            },
            {"path": "side/data.json", "reason": "not a .py file: capture edits Python files only"},
            {"path": "side/gone.py", "reason": "deleted: a patchset changes files, it does not delete them"},
        ],
    }
    assert not (tmp_path / "patchsets").exists() and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_comments_added_above_a_definition_are_captured_with_it(tmp_path: Path) -> None:
    """A comment added above a function used to be in no operation (the capture was refused as
    losing part of the edit); ``replace-definition`` now carries the comments above the definition
    (issue 39), so the patchset gives the edited bytes."""
    import shutil

    from tests.conftest import cached_wheel, unpacked_wheel
    from envforge.patching import load_patchset
    from envforge.workflows.adopt import capture_hand_edits

    env = tmp_path / "v"
    sp = env / "lib" / "python3.12" / "site-packages"
    shutil.copytree(unpacked_wheel("sglang", "0.5.9"), sp, ignore=shutil.ignore_patterns(".complete"))
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1.final.0\n")
    replace_file(
        sp / "sglang" / "utils.py",
        "def info_once(message: str):\n    logger.info(message)",
        "def info_once(message: str):\n    logger.warning(message)  # team note",
    )
    replace_file(
        sp / "sglang" / "utils.py",
        "logger = logging.getLogger(__name__)\n\n\ndef execute_once",
        "logger = logging.getLogger(__name__)\n\n\n# team note\ndef execute_once",
    )
    idx = LocalIndex(tmp_path / "index")
    idx.add(cached_wheel("sglang", "0.5.9"))
    with serve(idx):
        adoption = adopt_environment(env, name="v", index_url=idx.url)
        (c,) = capture_hand_edits(adoption, tmp_path / "patchsets", tmp_path / "cache")
    assert c.as_dict() == {
        "distribution": "sglang",
        "patchset": "adopted-sglang",
        "captured": ["sglang/utils.py"],
        "operations": [
            "replace-definition sglang/utils.py execute_once",
            "replace-definition sglang/utils.py info_once",
        ],
        "not_captured": [],
    }
    ops = {op.definition: op for op in load_patchset(tmp_path / "patchsets" / "adopted-sglang.toml").operations}
    assert ops["execute_once"].comments == "\n\n# team note\n"


@pytest.mark.parametrize(
    "directory, name", [("My Env.3", "my-env-3"), ("venv_prod-", "venv_prod"), ("...", "adopted"), (".venv", "venv")]
)
def test_the_default_recipe_name_is_the_environments_directory_name(directory: str, name: str) -> None:
    assert recipe_name_of(Path("/x") / directory) == name


def _fake_env(tmp_path: Path, direct: str | None) -> Path:
    env = tmp_path / "v"
    sp = env / "lib" / "python3.12" / "site-packages"
    di = sp / "otherpkg-2.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: otherpkg\nVersion: 2.0\n\n")
    (di / "RECORD").write_text("")
    if direct is not None:
        (di / "direct_url.json").write_text(direct)
    (env / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1.final.0\n")
    return env


@pytest.mark.parametrize(
    "url",
    [
        "https://alice:SECRET@127.0.0.1:18603/files/otherpkg-2.0-py3-none-any.whl",
        "https://SECRET@127.0.0.1:18603/files/otherpkg-2.0-py3-none-any.whl",
    ],
)
def test_credentials_in_direct_url_json_reach_no_file_and_are_named(tmp_path: Path, url: str) -> None:
    """Field case N39: the recipe, its comment and the adoption record hold the URL without userinfo."""
    env = _fake_env(tmp_path, json.dumps({"url": url, "archive_info": {}}))
    proj = tmp_path / "proj"
    proj.mkdir()
    res = envforge(proj, "init", "--from-env", str(env), "--name", "adopted1", "--no-lock")
    written = "".join(p.read_text() for p in (proj / "recipes").iterdir())
    assert "SECRET" not in written + res.stdout + res.stderr
    clean = "https://127.0.0.1:18603/files/otherpkg-2.0-py3-none-any.whl"
    assert (
        f"# not from an index, not pinned here: otherpkg 2.0 (url {clean}; credentials removed from its URL)" in written
    )
    assert (
        "otherpkg 2.0 was installed from url " + clean + ": not in the recipe; add it by hand; its "
        "direct_url.json URL carried credentials, removed from every file written"
    ) in res.stderr
    a = adopt_environment(env, name="a1")
    assert [(d.url, d.credentials_removed) for d in a.distributions] == [(clean, True)]
    assert a.as_dict()["distributions"][0]["credentials_removed"] is True


@pytest.mark.parametrize(
    ("fifo", "message"),
    [
        ("pyvenv.cfg", "pyvenv.cfg {env}/pyvenv.cfg is not a regular file (a FIFO)"),
        (
            "lib/python3.12/site-packages/otherpkg-2.0.dist-info/RECORD",
            "RECORD {env}/lib/python3.12/site-packages/otherpkg-2.0.dist-info/RECORD is not a regular file (a FIFO)",
        ),
        (
            "lib/python3.12/site-packages/otherpkg-2.0.dist-info/direct_url.json",
            "PEP 610 record {env}/lib/python3.12/site-packages/otherpkg-2.0.dist-info/direct_url.json is not a regular "
            "file (a FIFO)",
        ),
    ],
)
def test_a_fifo_in_the_environment_is_exit_2_not_a_hang(tmp_path: Path, fifo: str, message: str) -> None:
    """Field case N44: `init --from-env` hung on a FIFO pyvenv.cfg, RECORD or direct_url.json."""
    env = _fake_env(tmp_path, None)
    (env / fifo).unlink(missing_ok=True)
    os.mkfifo(env / fifo)
    proj = tmp_path / "proj"
    proj.mkdir()
    res = subprocess.run(
        [*ENVFORGE, "init", "--from-env", str(env), "--name", "a1", "--no-lock"],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[0] == "error: " + message.format(env=env)
    assert not (proj / "recipes" / "a1.toml").exists()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("missing", "no METADATA"),
        ("empty", "METADATA names no Name or Version"),
        ("fifo", "METADATA is not a regular file (a FIFO)"),
    ],
)
def test_a_distribution_whose_metadata_cannot_be_read_is_exit_2_never_dropped(
    tmp_path: Path, damage: str, reason: str
) -> None:
    """Issue 41: `init --from-env` left out a distribution whose METADATA was missing or empty (rc 0)."""
    env = _fake_env(tmp_path, None)
    sp = env / "lib" / "python3.12" / "site-packages"
    meta = sp / "otherpkg-2.0.dist-info" / "METADATA"
    meta.unlink()
    if damage == "empty":
        meta.write_text("")
    elif damage == "fifo":
        os.mkfifo(meta)
    proj = tmp_path / "proj"
    proj.mkdir()
    res = subprocess.run(
        [*ENVFORGE, "init", "--from-env", str(env), "--name", "a1", "--no-lock"],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [
        f"error: the adopted lock would leave out 1 distribution of {sp} whose METADATA cannot be read: "
        f"otherpkg-2.0.dist-info ({reason})",
        "  hint: reinstall those distributions in the environment (or remove the leftover *.dist-info directories), "
        "then adopt it again",
    ]
    assert not (proj / "recipes" / "a1.toml").exists()


@pytest.mark.parametrize("how", ["file", "directory"])
def test_a_hand_edit_reached_through_a_symlink_is_reported(tmp_path: Path, how: str) -> None:
    """Issue 41: a package file (or directory) replaced by a symlink to an edited copy outside
    site-packages was taken for a script outside it and skipped: the venv ran the edit, adoption
    reported none."""
    import base64  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import hashlib  # noqa: PLC0415

    env = _fake_env(tmp_path, None)
    sp = env / "lib" / "python3.12" / "site-packages"
    released = b"VALUE = 1\n"
    (sp / "otherpkg").mkdir()
    (sp / "otherpkg" / "__init__.py").write_bytes(released)
    digest = base64.urlsafe_b64encode(hashlib.sha256(released).digest()).rstrip(b"=").decode()
    (sp / "otherpkg-2.0.dist-info" / "RECORD").write_text(
        f"otherpkg/__init__.py,sha256={digest},{len(released)}\notherpkg-2.0.dist-info/RECORD,,\n"
    )
    assert adopt_environment(env, name="a1").edits == ()
    checkout = tmp_path / "checkout" / "otherpkg"
    checkout.mkdir(parents=True)
    (checkout / "__init__.py").write_bytes(b"VALUE = 2  # edited\n")
    if how == "file":
        (sp / "otherpkg" / "__init__.py").unlink()
        (sp / "otherpkg" / "__init__.py").symlink_to(checkout / "__init__.py")
    else:
        shutil.rmtree(sp / "otherpkg")
        (sp / "otherpkg").symlink_to(checkout)
    (edit,) = adopt_environment(env, name="a1").edits
    assert (edit.distribution, edit.path, edit.actual_sha256) == (
        "otherpkg",
        "otherpkg/__init__.py",
        hashlib.sha256(b"VALUE = 2  # edited\n").hexdigest(),
    )
