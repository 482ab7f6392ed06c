"""``envforge apply-patches``, ``patches export``, ``patches list`` through the real CLI entry point."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.patching_trees import PATCHSETS, slim_tree
from tests.support.verify_envs import DAMAGE_KIND, build_quickstart, damaged

from envforge.cli import main

LOCK = """\
lock-version = "1.0"
created-by = "envforge"
packages = []

[tool.envforge]
schema = 1

[[tool.envforge.patchsets]]
id = "flashinfer-sm120-trtllm-comm"
digest = "sha256:0"

[[tool.envforge.patchsets]]
id = "sm120-flashinfer-allreduce-fusion"
digest = "sha256:0"

[[tool.envforge.patchsets]]
id = "sm120-torch-symm-mem"
digest = "sha256:0"

[[tool.envforge.patchsets]]
id = "kimik25-eagle3-delegation"
digest = "sha256:0"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose default environment (envs/quickstart-default, a generation symlink) has
    sglang 0.5.9 and flashinfer-python 0.6.4 and the lock copy that build writes."""
    root = tmp_path / "proj"
    (root / "recipes").mkdir(parents=True)
    shutil.copytree(PATCHSETS, root / "patchsets")
    gen = root / "envs" / ".generations" / "quickstart-default" / "g0001"
    sp = slim_tree(gen / "lib" / "python3.12" / "site-packages", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    (sp / ".envforge").mkdir()
    (sp / ".envforge" / "pylock.toml").write_text(LOCK)
    (root / "envs" / "quickstart-default").symlink_to(gen)
    return root


def sp_of(project: Path) -> Path:
    return project / "envs" / "quickstart-default" / "lib" / "python3.12" / "site-packages"


def test_apply_patches_on_the_default_environment(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply-patches", "--project", str(project)]) == 0
    out, err = capsys.readouterr()
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["applied", "flashinfer-sm120-trtllm-comm"],
        ["applied", "sm120-flashinfer-allreduce-fusion"],
        ["applied", "sm120-torch-symm-mem"],
        ["applied", "sm120-torch-symm-mem"],
        ["applied", "kimik25-eagle3-delegation"],
    ]
    assert (
        "note: sm120-flashinfer-allreduce-fusion takes effect only when the server is launched with "
        "--enable-flashinfer-allreduce-fusion"
    ) in err
    assert main(["apply-patches", "--project", str(project), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "envforge.apply-patches/1"
    assert {r["state"] for r in data["data"]["results"]} == {"already-applied"} and data["data"]["ok"]
    assert main(["apply-patches", "quickstart-default", "--revert", "--project", str(project)]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["reverted"] * 5


def test_dry_run_prints_the_diff(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sp = sp_of(project)
    assert (
        main(
            [
                "apply-patches",
                "--site-packages",
                str(sp),
                "kimik25-eagle3-delegation",
                "--dry-run",
                "--project",
                str(project),
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    status, diff = out.split("\n", 1)  # the status lines on stdout as without --dry-run, then the diff
    assert status == (
        "applied          kimik25-eagle3-delegation  sglang/srt/models/kimi_k25.py  added "
        "get_embed_and_head, set_embed_and_head, set_eagle3_layers_to_capture to KimiK25ForConditionalGeneration"
    )
    assert diff.startswith("--- a/sglang/srt/models/kimi_k25.py\n+++ b/sglang/srt/models/kimi_k25.py\n")
    assert "+    def set_eagle3_layers_to_capture(self, layer_ids=None):\n" in out
    assert err.splitlines()[-1] == "dry run: 1 file would change, nothing written"
    assert not (sp / ".envforge" / "patches.json").exists()


def test_dry_run_of_a_hand_edited_patched_file_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply-patches", "--project", str(project)]) == 0
    guard = sp_of(project) / "sglang/srt/layers/communicator.py"
    with guard.open("a") as fh:
        fh.write("x = 1\n")
    capsys.readouterr()
    assert main(["apply-patches", "--dry-run", "--project", str(project)]) == 1
    out, err = capsys.readouterr()
    assert "drifted          sm120-flashinfer-allreduce-fusion  sglang/srt/layers/communicator.py" in out.splitlines()
    assert (
        "error: sm120-flashinfer-allreduce-fusion: sglang/srt/layers/communicator.py: changed since envforge "
        "patched it (manifest sha256 " in err
    )


def test_unmet_requirement_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply-patches", "sm120-flashinfer-allreduce-fusion", "--project", str(project)]) == 1
    err = capsys.readouterr().err
    assert "error: sm120-flashinfer-allreduce-fusion refused: requirement `patchset:flashinfer-sm120-trtllm-comm" in err


def test_unknown_patchset_and_environment_exit_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply-patches", "--site-packages", str(sp_of(project)), "nope", "--project", str(project)]) == 2
    assert "error: no patchset named 'nope'" in capsys.readouterr().err
    assert main(["apply-patches", "other-env", "--project", str(project)]) == 2
    assert "error: no environment 'other-env'" in capsys.readouterr().err


def test_patches_export_and_list(project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "fusion.patch"
    assert (
        main(
            [
                "patches",
                "export",
                "sm120-torch-symm-mem",
                "--site-packages",
                str(sp_of(project)),
                "-o",
                str(out_file),
                "--project",
                str(project),
            ]
        )
        == 0
    )
    assert out_file.read_text().startswith(
        "--- a/python/sglang/srt/distributed/device_communicators/all_reduce_utils.py\n"
    )
    capsys.readouterr()
    assert main(["patches", "list", "--json", "--project", str(project)]) == 0
    rows = json.loads(capsys.readouterr().out)["data"]
    assert [r["id"] for r in rows][0] == "flashinfer-sm120-trtllm-comm"
    assert rows[2]["requires"] == ["patchset:flashinfer-sm120-trtllm-comm | flashinfer-python>=0.6.17"]
    assert [(r["diff-sha256"], r["diff-origin"]) for r in rows] == [(None, None)] * len(rows)


def test_patches_list_shows_where_an_imported_patchset_came_from(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``patches import`` records the diff's sha256 and origin; ``patches list`` shows both."""
    sha = hashlib.sha256(b"the diff").hexdigest()
    origin = "https://github.com/flashinfer-ai/flashinfer/compare/v0.6.16.post4...v0.6.17"
    src = (project / "patchsets" / "flashinfer-sm120-trtllm-comm.toml").read_text()
    (project / "patchsets" / "flashinfer-sm120-trtllm-comm.toml").write_text(
        src.replace(
            'upstream-prefix = ""\n', f'upstream-prefix = ""\ndiff-sha256 = "{sha}"\ndiff-origin = "{origin}"\n'
        )
    )
    assert main(["patches", "list", "--json", "--project", str(project)]) == 0
    row = json.loads(capsys.readouterr().out)["data"][0]
    assert (row["id"], row["diff-sha256"], row["diff-origin"]) == ("flashinfer-sm120-trtllm-comm", sha, origin)
    assert main(["patches", "list", "--project", str(project)]) == 0
    assert capsys.readouterr().out.splitlines()[1:3] == [
        "    flashinfer's all-reduce fusion kernels are not built for SM120 before 0.6.17",
        f"    imported from {origin} (diff sha256 {sha[:16]}...)",
    ]


def test_default_patchsets_without_a_lock_are_those_of_installed_distributions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sp = slim_tree(tmp_path / "sp", ("flashinfer-python", "0.6.4"))
    assert main(["apply-patches", "--site-packages", str(sp), "--project", str(PATCHSETS.parent)]) == 0
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [
        ["applied", "flashinfer-sm120-trtllm-comm"]
    ]


def test_revert_after_the_patched_file_was_deleted_is_an_error_not_a_traceback(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sp = sp_of(project)
    assert (
        main(["apply-patches", "--site-packages", str(sp), "kimik25-eagle3-delegation", "--project", str(project)]) == 0
    )
    kimi = sp / "sglang" / "srt" / "models" / "kimi_k25.py"
    kimi.unlink()
    capsys.readouterr()
    assert (
        main(
            [
                "apply-patches",
                "--site-packages",
                str(sp),
                "--revert",
                "kimik25-eagle3-delegation",
                "--project",
                str(project),
            ]
        )
        == 1
    )
    assert capsys.readouterr().err == (
        f"error: cannot revert kimik25-eagle3-delegation: sglang/srt/models/kimi_k25.py is missing ({kimi}): "
        "deleted after envforge patched it; nothing was changed\n"
        "  hint: this environment was not built by envforge: reinstall the patched distributions "
        "(`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run `envforge apply-patches` again\n"
    )


def test_patches_diff_shows_the_applied_diff_against_the_originals(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a patched environment `apply-patches --dry-run` has nothing left to do; `patches diff`
    shows what was changed, from the saved originals."""
    assert main(["patches", "diff", "--project", str(project)]) == 0
    assert capsys.readouterr() == ("", "no patches applied (no .envforge/patches.json)\n")
    assert main(["apply-patches", "--project", str(project)]) == 0
    capsys.readouterr()
    assert main(["apply-patches", "--dry-run", "--project", str(project)]) == 0
    assert "dry run: 0 files would change, nothing written" in capsys.readouterr().err
    assert main(["patches", "diff", "--project", str(project)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    heads = [line for line in out.splitlines() if line.startswith("--- a/")]
    assert heads == [
        "--- a/flashinfer/jit/comm.py",
        "--- a/sglang/srt/distributed/device_communicators/all_reduce_utils.py",
        "--- a/sglang/srt/distributed/device_communicators/torch_symm_mem.py",
        "--- a/sglang/srt/layers/communicator.py",
        "--- a/sglang/srt/models/kimi_k25.py",
    ]
    assert main(["patches", "diff", "--json", "--project", str(project)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.patches-diff/1"
    files = doc["data"]["files"]
    assert [list(f) for f in files] == [["path", "patchsets", "diff", "as_recorded"]] * len(files)
    assert all(f["as_recorded"] and f["diff"].startswith(f"--- a/{f['path']}\n+++ b/{f['path']}\n") for f in files)
    # a hand edit after patching: exit 1, named, and the diff shows the file as it is now
    target = sp_of(project) / files[0]["path"]
    target.write_text(target.read_text() + "# hand edit\n")
    assert main(["patches", "diff", "--project", str(project)]) == 1
    out, err = capsys.readouterr()
    assert "+# hand edit" in out
    assert err == (
        f"warning: {files[0]['path']} changed since envforge patched it (verify reports it as "
        "tampered); the diff shows it as it is now\n"
    )
    # a full revert restores the originals and removes the env profile hook, and says so
    target.write_text(target.read_text().replace("# hand edit\n", ""))
    assert main(["apply-patches", "--revert", "--project", str(project)]) == 0
    capsys.readouterr()
    assert main(["patches", "diff", "--project", str(project)]) == 0
    assert capsys.readouterr().err == "no patches applied (no .envforge/patches.json)\n"


# --- envforge's own patch state damaged, through the real script: exit 2 at once, never a hang -------

REBUILD = (
    "rebuild the environment: `envforge build quickstart --variant default` (or `envforge up --rebuild`) "
    "(a fresh generation, patched from its lock)"
)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with ``envs/quickstart-default`` built by the real ``envforge build quickstart``."""
    return build_quickstart(tmp_path_factory.mktemp("state").resolve() / "proj")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fifo", "dev-zero", "directory", "oversized"])
@pytest.mark.parametrize(
    "name, what, hint",
    [
        ("patches.json", "patch manifest", f"restore it from a backup, or {REBUILD}"),
        ("patch-intent.json", "patch intent record", REBUILD),
    ],
)
@pytest.mark.parametrize("revert", [False, True])
def test_damaged_patch_state_is_exit_2_naming_it(
    quickstart: Path, name: str, what: str, hint: str, how: str, revert: bool
) -> None:
    sp = next((quickstart / "envs" / "quickstart-default").glob("lib/python3*/site-packages"))
    path = sp / ".envforge" / name
    if name == "patch-intent.json":  # left only by a killed apply: stand one in to damage
        path.write_text("{}")
    try:
        with damaged(path, how):
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "envforge",
                    "apply-patches",
                    "quickstart-default",
                    *(["--revert"] if revert else []),
                ],
                cwd=quickstart,
                capture_output=True,
                text=True,
                timeout=60,
                env=dict(os.environ),
            )
    finally:
        if name == "patch-intent.json":
            path.unlink()
    reason = (
        "is larger than 64 MiB: envforge never writes one that large"
        if how == "oversized"
        else f"is not a regular file ({DAMAGE_KIND[how]})"
    )
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-2:] == [f"error: {what} {path} {reason}", f"  hint: {hint}"]
    assert "Traceback" not in res.stderr


def test_new_commit_and_export_print_json_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``patches new``, ``commit`` and ``export`` take ``--json`` like every command with a result."""
    project = tmp_path / "proj"
    (project / "recipes").mkdir(parents=True)
    (project / "patchsets").mkdir()
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    edit, where = tmp_path / "edit", ("--project", str(project))
    assert main(["patches", "new", "sglang", "--site-packages", str(sp), "-o", str(edit), "--json", *where]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["data"]) == (
        "envforge.patches-new/1",
        {"path": str(edit), "distribution": "sglang", "version": "0.5.9", "files": 6},
    )
    comm = edit / "sglang/srt/layers/communicator.py"
    comm.write_text(
        comm.read_text().replace(
            "        )(context=context, **kwargs)\n", "        )(context=context, **kwargs)  # edited\n", 1
        )
    )
    assert main(["patches", "commit", str(edit), "--id", "cap", "--reason", "r", "--json", *where]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["data"]) == (
        "envforge.patches-commit/1",
        {
            "path": str(project / "patchsets" / "cap.toml"),
            "id": "cap",
            "operations": [
                "replace-definition sglang/srt/layers/communicator.py CommunicateSummableTensorPairFn.execute"
            ],
        },
    )
    plain = slim_tree(tmp_path / "plain", ("sglang", "0.5.9"))
    assert main(["patches", "export", "cap", "--site-packages", str(plain), "--json", *where]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.patches-export/1" and (doc["data"]["patchset"], doc["data"]["output"]) == (
        "cap",
        None,
    )
    assert doc["data"]["diff"].startswith("--- a/sglang/srt/layers/communicator.py\n")
    out = tmp_path / "cap.diff"
    assert main(["patches", "export", "cap", "--site-packages", str(plain), "-o", str(out), "--json", *where]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["data"]["output"] == str(out) and out.read_text() == doc["data"]["diff"]
