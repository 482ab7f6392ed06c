"""The finding-kind registry (envforge.core.kinds): levels, meanings, checks and rebuild repairs of every kind."""

from __future__ import annotations

import dataclasses

import pytest

from envforge.core.errors import InputError
from envforge.core.kinds import (
    DRAFTER,
    DRAFTER_KIND_PREFIXES,
    KINDS,
    LEVELS,
    REGISTRY,
    Kind,
    belongs_to,
    check_levels,
    is_known_kind,
    kind_of,
    level_of,
    rebuild_repairs,
)

GPU_KINDS = [
    "no-gpu",
    "cuda-unavailable",
    "gpu-count",
    "capability",
    "arch-list",
    "cuda-runtime",
    "driver-floor",
    "interconnect",
    "nccl-library",
    "native-op",
    "allreduce-failed",
    "allreduce-timeout",
    "env-profile-slower",
    "gpu-probe-failed",
    "gpu-model",
]


def test_the_levels_of_every_kind() -> None:
    assert sorted(k for k, v in REGISTRY.items() if v.level == "gpu") == sorted(GPU_KINDS)
    assert sorted(k for k, v in REGISTRY.items() if v.any_level) == [
        "acceptance-expired",
        "acceptance-unmatched",
        "nothing-to-check",
    ]
    assert {v.level for v in REGISTRY.values()} == {"static", "gpu"}
    assert len(REGISTRY) == 51


def test_nccl_library_is_a_gpu_kind() -> None:
    """It is produced by the gpu level's ``nccl`` check (verify/gpu.py), not by static verify."""
    assert level_of("nccl-library") == "gpu"
    assert REGISTRY["nccl-library"] == Kind(
        "the process loaded another libnccl than the lock's wheel copy, or two copies (B31)", "gpu", ("nccl",)
    )


@pytest.mark.parametrize(
    ("kind", "level"),
    [
        ("tampered", "static"),
        ("env-profile", "static"),
        ("acceptance-unmatched", "static"),
        ("nothing-to-check", "static"),
        ("capability", "gpu"),
        ("allreduce-timeout", "gpu"),
        ("eagle3-d2t", "drafter"),
        ("target-hidden-size", "drafter"),
        ("drafter-error", "drafter"),
        ("vocab-mapping", "drafter"),
        ("no-such-kind", "static"),
    ],
)
def test_level_of(kind: str, level: str) -> None:
    assert level_of(kind) == level


def test_drafter_kinds_are_known_by_prefix() -> None:
    assert DRAFTER_KIND_PREFIXES == ("eagle3-", "target-", "drafter-", "vocab-")
    assert [kind_of(k) for k in ("eagle3-fc", "vocab-mapping")] == [DRAFTER, DRAFTER]
    assert DRAFTER == Kind(
        "an issue of the recipe's [verify.drafter] checks (docs/drafters.md)", "drafter", ("drafter",)
    )
    assert not any(k.startswith(DRAFTER_KIND_PREFIXES) for k in REGISTRY)  # the prefix never shadows an entry


def test_known_kinds() -> None:
    assert [
        is_known_kind(k) for k in ("file-conflict", "nccl-library", "eagle3-fc", "file-conflicts", "eagle3", "")
    ] == [True, True, True, False, False, False]
    assert kind_of("file-conflicts") is None


def test_meanings_derive_from_the_registry() -> None:
    assert list(KINDS) == list(REGISTRY)
    assert KINDS["file-conflict"] == "two distributions' RECORDs list one file; the installed bytes are one of them's"
    assert all(KINDS[k] == v.meaning and v.meaning for k, v in REGISTRY.items())


def test_the_kinds_a_rebuild_repairs() -> None:
    assert sorted(k for k in REGISTRY if rebuild_repairs(k)) == [
        "env-profile",
        "hardlinked",
        "local-label-mismatch",
        "missing",
        "missing-file",
        "patch-state",
        "stale-bytecode",
        "startup-code",
        "tampered",
        "unexpected",
        "version-mismatch",
    ]
    assert [rebuild_repairs(k) for k in ("eagle3-fc", "no-such-kind", "file-conflict", "startup-code-outside")] == [
        False,
        False,
        False,
        False,
    ]


def test_the_checks_that_list_each_kind() -> None:
    by_check: dict[str, list[str]] = {}
    for name, k in REGISTRY.items():
        for c in k.checks:
            by_check.setdefault(c, []).append(name)
    assert by_check == {
        "platform": ["platform"],
        "lock-current": ["stale-environment", "missing-lock"],
        "lock-integrity": ["lock-integrity"],
        "versions": ["version-mismatch", "local-label-mismatch", "variant-unconfirmed", "missing", "unexpected"],
        "record": ["missing-file", "tampered", "file-conflict"],
        "patched-files": ["missing-file", "hardlinked", "stale-bytecode"],
        "patch-states": ["patch-state", "patchset-out-of-range", "patchset-changed", "editable-install"],
        "env-profile": ["env-profile", "engine-variable"],
        "families": ["family-mismatch"],
        "metadata": ["metadata-mismatch"],
        "cuda-major": ["cuda-major-mismatch", "cuda-library"],
        "torch-abi": ["torch-abi"],
        "startup": ["startup-code", "startup-code-outside"],
        "yanked": ["yanked"],
        "accept": ["acceptance-expired", "acceptance-unmatched"],
        "gpu": ["no-gpu"],
        "cuda": ["cuda-unavailable"],
        "gpu-count": ["gpu-count"],
        "capability": ["capability", "gpu-model"],
        "arch-list": ["arch-list"],
        "cuda-runtime": ["cuda-runtime"],
        "driver-floor": ["driver-floor"],
        "interconnect": ["interconnect"],
        "nccl": ["nccl-library"],
        "native-ops": ["native-op"],
        "allreduce": ["allreduce-failed", "allreduce-timeout", "env-profile-slower"],
        "gpu-info": ["gpu-probe-failed"],
        "patch-effect": ["shadowed-patch", "unlisted-patchset"],
        "effective-env": ["launcher-override"],
        "processes": ["stale-process"],
        "provided": ["provided"],
    }
    assert REGISTRY["nothing-to-check"].checks == ()


@pytest.mark.parametrize(
    ("kind", "check", "listed"),
    [
        ("missing-file", "record", True),
        ("missing-file", "patched-files", True),
        ("missing-file", "versions", False),
        ("nccl-library", "nccl", True),
        ("nccl-library", "env-profile", False),
        ("eagle3-fc", "drafter", True),
        ("nothing-to-check", "drafter", True),
        ("acceptance-unmatched", "drafter", True),
        ("nothing-to-check", "versions", False),
        ("no-such-kind", "record", False),
    ],
)
def test_belongs_to(kind: str, check: str, listed: bool) -> None:
    assert belongs_to(kind, check) is listed


def test_kinds_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY["tampered"].rebuild_repairs = False  # type: ignore[misc]


def test_check_levels() -> None:
    assert LEVELS == ("static", "gpu", "drafter")
    assert check_levels(["static", "gpu", "drafter"]) == ("static", "gpu", "drafter")
    assert check_levels(["drafter", "static", "drafter"]) == ("drafter", "static", "drafter")  # as given
    assert check_levels([]) == ()
    with pytest.raises(InputError) as exc:
        check_levels(["GPU"])
    assert exc.value.message == "unknown verify level GPU"
    with pytest.raises(InputError) as exc:
        check_levels(["static", "bogus", "smoke"])
    assert (exc.value.message, exc.value.hint) == ("unknown verify level bogus, smoke", "levels: static, gpu, drafter")
