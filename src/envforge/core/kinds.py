"""The finding kinds of ``envforge verify``: what each means and the level that produces it.

Read by the recipe (``[[verify.accept]] kind`` is checked at load), verify, its report and ``up``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envforge.core.errors import InputError

__all__ = ["DRAFTER_KIND_PREFIXES", "KINDS", "LEVELS", "check_levels", "is_known_kind", "level_of"]

#: Verify levels, in the order they run.
LEVELS = ("static", "gpu", "drafter")


def check_levels(levels: Iterable[str]) -> None:
    """Refuse levels that are not in :data:`LEVELS` (``verify``, and ``fleet verify`` on its driver).

    :raises InputError: ``unknown verify level bogus`` with the known levels as the hint (exit 2).
    """
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise InputError(f"unknown verify level {', '.join(bad)}", hint=f"levels: {', '.join(LEVELS)}")


#: Every finding kind and what it means (docs/verify.md lists them with their fixes).
KINDS: Mapping[str, str] = {
    # static
    "platform": "this machine cannot run the lock's platform (another architecture or OS, an older glibc)",
    "stale-environment": "the project's lock changed since this environment was built",
    "lock-integrity": "a lock is not what `envforge lock` wrote (packages-digest, [tool.envforge]): hand-edited or cut short",
    "missing-lock": "the project's lock for this environment does not exist",
    "version-mismatch": "an installed distribution's version differs from the lock",
    "local-label-mismatch": "same public version, different local label (e.g. +cu128 vs +cu130)",
    "variant-unconfirmed": "metadata lacks the lock's local label (B04) and nothing confirms the file",
    "missing": "a distribution of the lock is not installed",
    "nccl-library": "the process loaded another libnccl than the lock's wheel copy, or two copies (B31)",
    "unexpected": "a distribution is installed but not in the lock",
    "missing-file": "a file listed in a distribution's RECORD is absent",
    "tampered": "an installed file differs from its RECORD and no envforge patch explains it",
    "hardlinked": "a patched file shares its inode with another path (uv cache, B09)",
    "stale-bytecode": "bytecode of a patched module may hide the patch (B10)",
    "patch-state": "a patchset operation is not in its expected state",
    "patchset-changed": "a patchset file differs from the digest the lock recorded",
    "env-profile": "the env profile does not reach a spawned child, or is not the locked one",
    "family-mismatch": "distributions of one family are at different versions (B05)",
    "cuda-major-mismatch": "a CUDA runtime wheel of the other CUDA major (B03)",
    "file-conflict": "two distributions' RECORDs list one file; the installed bytes are one of them's",
    "editable-install": "a distribution is an editable install (PEP 610): patchsets cannot act on site-packages (B21)",
    # any level
    "nothing-to-check": "a level was asked for but there is nothing for it to check (e.g. no [verify.drafter])",
    "acceptance-expired": "a recipe [[verify.accept]] entry is past its expiry date; its finding fails again",
    "acceptance-unmatched": "a recipe [[verify.accept]] entry matches no finding of a level that ran",
    # gpu
    "no-gpu": "the gpu level was asked for explicitly (--level gpu) on a machine without an NVIDIA GPU",
    "cuda-unavailable": "the environment's torch cannot use CUDA on a machine with NVIDIA GPUs",
    "gpu-count": "the number of visible GPUs differs from the recipe target",
    "capability": "a GPU's compute capability differs from the recipe target",
    "arch-list": "the installed torch has no kernels for a GPU's (or the target's) architecture",
    "cuda-runtime": "torch's CUDA runtime differs from the variant's CUDA version",
    "driver-floor": "the driver is older than the CUDA runtime needs",
    "native-op": "a small operation of a native package failed",
    "allreduce-failed": "the all-reduce test failed or gave a wrong sum",
    "allreduce-timeout": "the all-reduce test hung and was killed (B12)",
    "env-profile-slower": "an env profile makes an all-reduce size more than 20% slower than NCCL's default",
    "gpu-probe-failed": "the GPU probe could not run in the environment's interpreter",
}


#: Finding kinds of the drafter level come from :mod:`envforge.drafter` (``eagle3-fc``, ...).
DRAFTER_KIND_PREFIXES = ("eagle3-", "target-", "drafter-", "vocab-")

_GPU_KINDS = frozenset({"no-gpu", "cuda-unavailable", "gpu-count", "capability", "arch-list", "cuda-runtime",
                        "driver-floor", "native-op", "allreduce-failed", "allreduce-timeout", "env-profile-slower",
                        "gpu-probe-failed"})


def is_known_kind(kind: str) -> bool:
    """A key of :data:`KINDS`, or a drafter kind (one of :data:`DRAFTER_KIND_PREFIXES`)."""
    return kind in KINDS or kind.startswith(DRAFTER_KIND_PREFIXES)


def level_of(kind: str) -> str:
    """The verify level that can produce findings of ``kind`` (``static`` for the level-less ones)."""
    if kind.startswith(DRAFTER_KIND_PREFIXES):
        return "drafter"
    return "gpu" if kind in _GPU_KINDS else "static"
