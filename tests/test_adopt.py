"""``envforge init --from-env``: adopt a hand-built environment (installed with the real uv from a
local index on 127.0.0.1, then edited by hand), lock it, rebuild it, and compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.adopt import PYTORCH_INDEX, adopt_environment
from envforge.errors import InputError
from envforge.uv import uv_binary
from localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def hand_built_env(tmp: Path, index: LocalIndex, wheel: Path) -> Path:
    """What a team has: a uv venv, one package from the index, one wheel installed by path."""
    uv = uv_binary()
    env = tmp / "handmade"
    from envforge.interpreter import find_python

    python = str(find_python("3.12", None).path)
    subprocess.run([uv, "venv", "--quiet", "--python", python, str(env)], check=True, timeout=120,
                   env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    py = str(env / "bin" / "python")
    # --link-mode copy: the shared uv cache stays out of reach of the hand edits below
    subprocess.run([uv, "pip", "install", "--quiet", "--link-mode", "copy", "--python", py, "--index-url", index.url,
                    "model-kernels==1.0"], check=True, timeout=300)
    subprocess.run([uv, "pip", "install", "--quiet", "--link-mode", "copy", "--python", py, str(wheel)], check=True,
                   timeout=300)
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
        ("model-kernels", "1.0", "index", None, "uv"), ("side-car", "0.3", "url", None, "uv")]
    assert d["distributions"][1]["url"].startswith("file://") and d["python"] == "3.12"
    assert [(e["distribution"], e["path"], e["actual_sha256"] is not None) for e in d["hand_edits"]] == [
        ("model-kernels", edited, True)]
    recipe = (proj / "recipes" / "team.toml").read_text()
    assert recipe.splitlines()[2:] == [
        f"# not from an index, not pinned here: side-car 0.3 (url {d['distributions'][1]['url']})",
        "", "[recipe]", 'name = "team"', f'description = "adopted from {env}"', 'python = "3.12"',
        'resolution = "no-deps"', "", "[indexes]", f'pypi = "{idx.url}"', "", "[packages]",
        'model-kernels = "==1.0"']
    assert json.loads((proj / "recipes" / "team.adopted.json").read_text())["hand_edits"] == d["hand_edits"]
    assert (proj / "lockfiles" / "pylock.team-default.toml").is_file()
    # the next build reproduces the index part, with the released (unedited) file
    built = envforge(proj, "build", "team")
    assert built.returncode == 0, built.stderr
    (new,) = (proj / "envs" / "team-default").glob("lib/python3*/site-packages")
    assert (new / edited).read_text() != (next(env.glob("lib/python3*/site-packages")) / edited).read_text()
    assert "PATCHED_BY_SED" not in (new / edited).read_text()
    listed = subprocess.run([uv_binary(), "pip", "list", "--python", str(proj / "envs" / "team-default" / "bin" / "python"),
                             "--format", "json"], capture_output=True, text=True, check=True).stdout
    assert [(p["name"], p["version"]) for p in json.loads(listed)] == [("model-kernels", "1.0")]
    # verify on the old environment, against the adopted lock, lists exactly how it differs
    old = envforge(proj, "verify", str(env), "--lock", "lockfiles/pylock.team-default.toml", "--json")
    assert old.returncode == 1, old.stderr
    found = sorted((f["kind"], f["subject"]) for f in json.loads(old.stdout)["data"]["findings"])
    assert found == [("tampered", "model-kernels 1.0: model_kernels/__init__.py"), ("unexpected", "side-car 0.3")]
    new_env = envforge(proj, "verify", "team-default")
    assert new_env.returncode == 0, new_env.stdout + new_env.stderr


@pytest.mark.slow
def test_adopt_human_output_and_refusals(setup) -> None:  # type: ignore[no-untyped-def]
    tmp, idx, env = setup
    edited = edit_a_file(env)
    proj = tmp / "proj"
    proj.mkdir()
    res = envforge(proj, "init", "--from-env", str(env), "--index-url", idx.url, "--no-lock")
    assert res.returncode == 1
    assert res.stdout.splitlines() == ["created recipes/handmade.toml: 1 distributions pinned (python 3.12)",
                                       "created recipes/handmade.adopted.json"]
    err = res.stderr.splitlines()
    assert err[0].startswith("warning: side-car 0.3 was installed from url file://")
    assert err[1] == (f"warning: hand edit: {edited} (model-kernels) differs from its RECORD hash; capture it as "
                      "a patchset (docs/patchsets.md)")
    again = envforge(proj, "init", "--from-env", str(env), "--no-lock")
    assert again.returncode == 2 and again.stderr.startswith(f"error: {proj / 'recipes' / 'handmade.toml'} already exists")
    notenv = envforge(proj, "init", "--from-env", str(tmp))
    assert notenv.returncode == 2 and notenv.stderr.startswith(f"error: {tmp} is not a virtual environment (no pyvenv.cfg)")


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
    assert a.indexes == (("pypi", "https://pypi.org/simple"), ("pytorch-cu128", PYTORCH_INDEX.format(tag="cu128")),
                         ("pytorch-cpu", "https://download.pytorch.org/whl/cpu"))
    assert a.recipe_text.split("[packages]\n")[1] == (
        'numpy = "==2.3.0"\ntorch = {version = "==2.9.1+cu128", index = "pytorch-cu128"}\n'
        'torchvision = {version = "==0.24.1+cpu", index = "pytorch-cpu"}\n')
    with pytest.raises(InputError, match="^--name 'a.b': "):
        adopt_environment(env, name="a.b")
