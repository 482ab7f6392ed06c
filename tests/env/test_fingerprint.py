"""The environment fingerprint's human line: never a raw ``None``."""

from __future__ import annotations

from envforge.env.fingerprint import Fingerprint


def test_describe_without_gpu_facts() -> None:
    fp = Fingerprint(lock_digest="sha256:aa", patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    assert fp.describe() == "lock sha256:aa, patches none, profile none, gpu not probed, driver unknown"


def test_describe_no_gpu_and_gpus() -> None:
    fp = Fingerprint(lock_digest=None, patch_manifest_digest="sha256:bb", env_profile="pcie",
                     env_profile_digest="sha256:cc", gpu_count=0, driver="580.1")
    assert fp.describe() == "lock none, patches sha256:bb, profile pcie sha256:cc, no GPU, driver 580.1"
    fp = Fingerprint(lock_digest="sha256:aa", patch_manifest_digest=None, env_profile="nvlink",
                     env_profile_digest="sha256:dd", gpu="NVIDIA H200", gpu_count=2)
    assert fp.describe() == ("lock sha256:aa, patches none, profile nvlink sha256:dd, gpu 2x NVIDIA H200, "
                             "driver unknown")
    assert "None" not in Fingerprint(None, None, None, None, gpu_count=3).describe()


def test_differences_say_unknown() -> None:
    a = Fingerprint(lock_digest=None, patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    b = Fingerprint(lock_digest="sha256:aa", patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    assert a.differences(b) == ["lock_digest: unknown != sha256:aa"]
