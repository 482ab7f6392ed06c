"""Re-checking a fetched drafter with huggingface_hub offline (field case B32).

The Hugging Face hub cannot be reached from our machines: the drafter is fetched for real with
huggingface_hub from the local hub-compatible server (tests/support/hub_server.py, ``HF_ENDPOINT``), then
``envforge drafter fetch`` runs again in a real process with ``HF_HUB_OFFLINE=1`` (huggingface_hub
reads it at import, so only a fresh process sees it) and the server's request log proves that
nothing was asked of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.drafter.test_drafter import Hub, hub  # noqa: F401  (module-scoped fixture: the local hub)

from envforge.drafter import fetch_drafter
from tests.support.pythons import python_for


def offline(hub: Hub, *argv: str) -> subprocess.CompletedProcess[str]:  # noqa: F811
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": hub.url, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "envforge", "drafter", *argv], capture_output=True, text=True, timeout=120, env=env
    )


def test_offline_recheck_of_a_pinned_fetched_drafter_rehashes_it_and_passes(hub: Hub, tmp_path: Path) -> None:  # noqa: F811
    dest = tmp_path / "d"
    online = fetch_drafter("test-org/drafter-a", hub.a, dest, root=tmp_path, endpoint=hub.url)
    hub.server.reset_counters()
    proc = offline(hub, "fetch", "test-org/drafter-a", "--revision", hub.a, "--dest", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert hub.server.requests == []  # the hub was not asked anything
    files = {f.name: f for f in online.files}
    assert proc.stdout == (
        f"offline (HF_HUB_OFFLINE is set): re-checked the recorded copy of test-org/drafter-a@{hub.a} in {dest}\n"
        f"  config.json  {files['config.json'].size:,} bytes  sha256 {files['config.json'].sha256}  matches the "
        "fetch record\n"
        f"  model.safetensors  {files['model.safetensors'].size:,} bytes  sha256 "
        f"{files['model.safetensors'].sha256}  matches the fetch record\n"
    )
    assert "failed talking" not in proc.stderr
    assert proc.stderr == "nothing was downloaded; the hub's metadata was checked when the copy was fetched\n"


def test_offline_recheck_finds_a_changed_local_copy(hub: Hub, tmp_path: Path) -> None:  # noqa: F811
    dest = tmp_path / "d"
    fetch_drafter("test-org/drafter-a", hub.a, dest, root=tmp_path, endpoint=hub.url)
    weights = dest / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as f:
        f.truncate(size - 100)
    proc = offline(hub, "fetch", "test-org/drafter-a", "--revision", hub.a, "--dest", str(dest))
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        f"error: model.safetensors of test-org/drafter-a@{hub.a} in {dest} differs from its fetch record: sha256 "
    )
    assert f"({size - 100:,} bytes), recorded " in proc.stderr and weights.exists()  # nothing removed offline


def test_offline_without_a_recorded_copy_says_offline_not_network(hub: Hub, tmp_path: Path) -> None:  # noqa: F811
    proc = offline(hub, "fetch", "test-org/drafter-a", "--revision", hub.a, "--dest", str(tmp_path / "none"))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: huggingface_hub is in offline mode (HF_HUB_OFFLINE is set) and {tmp_path / 'none'} holds no "
        f"recorded copy of test-org/drafter-a@{hub.a} (no envforge-drafter.json)\n"
        "  hint: fetch it once with the hub reachable (unset HF_HUB_OFFLINE), or pass --dest DIR of an earlier "
        "fetch\n"
    )
    remote = offline(hub, "inspect", f"test-org/drafter-a@{hub.a}")
    assert remote.returncode == 2
    assert remote.stderr.startswith(
        f"error: huggingface_hub is in offline mode (HF_HUB_OFFLINE is set): model_info "
        f"test-org/drafter-a@{hub.a} needs the hub\n"
    )


def test_verify_drafter_level_offline_checks_the_recorded_copy(hub: Hub, tmp_path: Path) -> None:  # noqa: F811
    import json

    import pytest
    import uv
    from tests.conftest import cached_wheel
    from tests.support.verify_envs import make_env

    py312 = str(python_for("3.12"))
    if not Path(py312).exists():
        pytest.skip("needs the pyenv Python 3.12.1")
    root = tmp_path / "proj"
    make_env(
        root,
        [cached_wheel("flashinfer-python", "0.6.4")],
        uv=uv.find_uv_bin(),
        python=py312,
        patchsets=(),
        profile=None,
    )
    recipe = root / "recipes" / "quickstart.toml"
    recipe.write_text(recipe.read_text() + f'\n[verify.drafter]\nrepo = "test-org/drafter-a"\nrevision = "{hub.a}"\n')
    fetch_drafter("test-org/drafter-a", hub.a, None, root=root / "drafters", endpoint=hub.url)  # default dest
    hub.server.reset_counters()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": hub.url}
    proc = subprocess.run(
        [sys.executable, "-m", "envforge", "verify", "--level", "drafter", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert hub.server.requests == []
    data = json.loads(proc.stdout)["data"]
    assert data["findings"] == []
    assert data["checks"] == [
        {
            "name": "drafter",
            "level": "drafter",
            "status": "ok",
            "detail": f"test-org/drafter-a@{hub.a} (offline, HF_HUB_OFFLINE: the copy recorded "
            f"under {root / 'drafters'}, re-hashed)",
        }
    ]
