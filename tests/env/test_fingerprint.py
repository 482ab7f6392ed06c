"""The environment fingerprint's human line: never a raw ``None``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from envforge.env.fingerprint import Fingerprint, fingerprint_of, startup_digest


def test_describe_without_gpu_facts() -> None:
    fp = Fingerprint(lock_digest="sha256:aa", patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    assert fp.describe() == "lock sha256:aa, patches none, profile none, gpu not probed, driver unknown"


def test_describe_no_gpu_and_gpus() -> None:
    fp = Fingerprint(
        lock_digest=None,
        patch_manifest_digest="sha256:bb",
        env_profile="pcie",
        env_profile_digest="sha256:cc",
        gpu_count=0,
        driver="580.1",
    )
    assert fp.describe() == "lock none, patches sha256:bb, profile pcie sha256:cc, no GPU, driver 580.1"
    fp = Fingerprint(
        lock_digest="sha256:aa",
        patch_manifest_digest=None,
        env_profile="nvlink",
        env_profile_digest="sha256:dd",
        gpu="NVIDIA H200",
        gpu_count=2,
    )
    assert fp.describe() == (
        "lock sha256:aa, patches none, profile nvlink sha256:dd, gpu 2x NVIDIA H200, driver unknown"
    )
    assert "None" not in Fingerprint(None, None, None, None, gpu_count=3).describe()


def test_differences_say_unknown() -> None:
    a = Fingerprint(lock_digest=None, patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    b = Fingerprint(lock_digest="sha256:aa", patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    assert a.differences(b) == ["lock_digest: unknown != sha256:aa"]


def test_the_json_shape_names_every_field_in_order() -> None:
    """docs/verify.md and docs/architecture.md document these keys (``envforge.verify/1``, bench reports)."""
    fp = Fingerprint("sha256:aa", None, "pcie", "sha256:cc", startup_digest="sha256:dd")
    assert fp.as_dict() == {
        "lock_digest": "sha256:aa",
        "patch_manifest_digest": None,
        "env_profile": "pcie",
        "env_profile_digest": "sha256:cc",
        "python": None,
        "driver": None,
        "gpu": None,
        "gpu_count": None,
        "compute_capability": None,
        "platform": None,
        "effective_env_digest": None,
        "startup_digest": "sha256:dd",
        "nccl_conf_digest": None,
    }
    assert Fingerprint.from_dict({"lock_digest": "sha256:aa"}).startup_digest is None  # reports older than B36


def test_startup_digest_of_a_site_packages(tmp_path: Path) -> None:
    """sha256 of the canonical JSON ``{name: "sha256:<hex of its bytes>"}`` of the start-up files."""
    (tmp_path / "a.pth").write_bytes(b"import os\n")
    (tmp_path / "six.py").write_bytes(b"")  # not a start-up file
    inner = "sha256:" + hashlib.sha256(b"import os\n").hexdigest()
    blob = json.dumps({"a.pth": inner}, separators=(",", ":")).encode()
    assert startup_digest(tmp_path) == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert fingerprint_of(tmp_path).startup_digest == startup_digest(tmp_path)
    assert fingerprint_of(tmp_path).lock_digest is None
    before = startup_digest(tmp_path)
    (tmp_path / "sitecustomize.py").write_bytes(b"")
    assert startup_digest(tmp_path) != before
