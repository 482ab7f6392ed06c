"""The finding kinds of ``envforge verify``: one registry from which verify, its report, acceptance and ``up`` derive.

Each kind is one :class:`Kind` entry of :data:`REGISTRY`: what it means, the verify level that
produces it, the checks whose JUnit case lists it, and whether a fresh build from the same lock
repairs it. Drafter kinds (``eagle3-fc``, ``target-hidden-size``, ...) come from
:mod:`envforge.drafter` and are known by prefix (:data:`DRAFTER_KIND_PREFIXES`), all as :data:`DRAFTER`.
Adding a kind is one entry here (and its row in docs/verify.md).

Read by the recipe (``[[verify.accept]] kind`` is checked at load), verify, its report and ``up``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from envforge.core.errors import InputError

__all__ = [
    "DRAFTER",
    "DRAFTER_KIND_PREFIXES",
    "KINDS",
    "LEVELS",
    "Level",
    "LEVEL_WIDE_CHECKS",
    "REGISTRY",
    "Kind",
    "belongs_to",
    "check_levels",
    "is_known_kind",
    "kind_of",
    "level_of",
    "rebuild_repairs",
]

#: A verify level.
Level = Literal["static", "gpu", "drafter"]
#: Verify levels, in the order they run.
LEVELS: Final[tuple[Level, ...]] = get_args(Level)
_BY_NAME: Final[dict[str, Level]] = {lv: lv for lv in LEVELS}


def check_levels(levels: Iterable[str]) -> tuple[Level, ...]:
    """``levels`` as verify levels, in the given order; refuses names not in :data:`LEVELS`
    (``verify``, and ``fleet verify`` on its driver).

    :raises InputError: ``unknown verify level bogus`` with the known levels as the hint (exit 2).
    """
    given = tuple(levels)
    bad = [lv for lv in given if lv not in _BY_NAME]
    if bad:
        raise InputError(f"unknown verify level {', '.join(bad)}", hint=f"levels: {', '.join(LEVELS)}")
    return tuple(_BY_NAME[lv] for lv in given)


@dataclass(frozen=True, slots=True)
class Kind:
    """One finding kind.

    ``meaning``: one line (docs/verify.md lists the kinds with their fixes). ``level``: the verify
    level (one of :data:`LEVELS`) that produces it; an ``[[verify.accept]]`` entry of the kind is
    held to a run only when that level ran. ``checks``: the names of the checks
    (:class:`envforge.verify.findings.Check`) whose JUnit test case lists its findings.
    ``rebuild_repairs``: the kind means the live generation's files were damaged after it was built,
    so a fresh build from the same lock repairs it (``envforge up`` rebuilds for it).
    ``any_level``: produced at whichever level it concerns (``level`` is then where an acceptance
    of it is held, ``static``).
    """

    meaning: str
    level: Level
    checks: tuple[str, ...]
    rebuild_repairs: bool = False
    any_level: bool = False


def _static(meaning: str, *checks: str, rebuild_repairs: bool = False) -> Kind:
    return Kind(meaning, "static", checks, rebuild_repairs)


def _gpu(meaning: str, *checks: str) -> Kind:
    return Kind(meaning, "gpu", checks)


def _any(meaning: str, *checks: str) -> Kind:
    return Kind(meaning, "static", checks, any_level=True)


#: Every finding kind but the drafter ones (:data:`DRAFTER`).
REGISTRY: Mapping[str, Kind] = {
    # static
    "platform": _static(
        "this machine cannot run the lock's platform (another architecture or OS, an older glibc)", "platform"
    ),
    "stale-environment": _static("the project's lock changed since this environment was built", "lock-current"),
    "stale-process": _static(
        "a process still runs from a generation that is no longer live, or was started "
        "through the link before its last flip (B39)",
        "processes",
    ),
    "lock-integrity": _static(
        "a lock is not what `envforge lock` wrote (packages-digest, [tool.envforge]): hand-edited or cut short",
        "lock-integrity",
    ),
    "missing-lock": _static("the project's lock for this environment does not exist", "lock-current"),
    "version-mismatch": _static(
        "an installed distribution's version differs from the lock", "versions", rebuild_repairs=True
    ),
    "local-label-mismatch": _static(
        "same public version, different local label (e.g. +cu128 vs +cu130)", "versions", rebuild_repairs=True
    ),
    "variant-unconfirmed": _static(
        "metadata lacks the lock's local label (B04) and nothing confirms the file", "versions"
    ),
    "provided": _static(
        "a [provided] distribution is absent from the base interpreter, its version (metadata or "
        "import) differs from the recipe's, or the environment holds its own copy",
        "provided",
    ),
    "missing": _static("a distribution of the lock is not installed", "versions", rebuild_repairs=True),
    "unexpected": _static("a distribution is installed but not in the lock", "versions", rebuild_repairs=True),
    "missing-file": _static(
        "a file listed in a distribution's RECORD is absent", "record", "patched-files", rebuild_repairs=True
    ),
    "tampered": _static(
        "an installed file differs from its RECORD and no envforge patch explains it", "record", rebuild_repairs=True
    ),
    "hardlinked": _static(
        "a patched file shares its inode with another path (uv cache, B09)", "patched-files", rebuild_repairs=True
    ),
    "stale-bytecode": _static(
        "bytecode of a patched module may hide the patch (B10)", "patched-files", rebuild_repairs=True
    ),
    "patch-state": _static("a patchset operation is not in its expected state", "patch-states", rebuild_repairs=True),
    "patchset-out-of-range": _static(
        "a patchset the lock lists does not apply to the installed version (outside its "
        "versions) and the recipe does not retire it: its fix is not there (B41)",
        "patch-states",
    ),
    "patchset-changed": _static("a patchset file differs from the digest the lock recorded", "patch-states"),
    "env-profile": _static(
        "the env profile does not reach a spawned child, or is not the locked one", "env-profile", rebuild_repairs=True
    ),
    "launcher-override": _static(
        "the engine's launch code sets a variable of the env profile to another value in the served process (B38)",
        "effective-env",
    ),
    "family-mismatch": _static("distributions of one family are at different versions (B05)", "families"),
    "cuda-major-mismatch": _static("a CUDA runtime wheel of the other CUDA major (B03)", "cuda-major"),
    "metadata-mismatch": _static(
        "importlib.metadata in the environment's interpreter reports another version, or "
        "reads the dist-info from outside site-packages",
        "metadata",
    ),
    "cuda-library": _static(
        "a shared object links another CUDA major's runtime library (NEEDED libcudart.so.12 in a CUDA 13 variant, B54)",
        "cuda-major",
    ),
    "torch-abi": _static(
        "a compiled extension links torch's libraries and its distribution pins another torch than "
        "the installed one (an override moved torch): its import fails with `undefined symbol`",
        "torch-abi",
    ),
    "file-conflict": _static(
        "two distributions' RECORDs list one file; the installed bytes are one of them's", "record"
    ),
    "shadowed-patch": _static(
        "a patched file is not the file the interpreter imports for its module (a compiled "
        "module of the same name beside it, B43): the patch never runs",
        "patch-effect",
    ),
    "unlisted-patchset": _static(
        "a patchset is applied that the environment's lock does not list (applied by hand)", "patch-effect"
    ),
    "editable-install": _static(
        "a distribution is an editable install (PEP 610): patchsets cannot act on site-packages (B21)", "patch-states"
    ),
    "startup-code": _static(
        "a file in site-packages that no RECORD and no envforge record owns runs at every "
        "interpreter start: a .pth import line, sitecustomize or usercustomize (B36)",
        "startup",
        rebuild_repairs=True,
    ),
    "yanked": _static(
        "a locked version is yanked on its index since the lock was made (PEP 592, B48; "
        "only with verify --yanked, which asks the indexes)",
        "yanked",
    ),
    "startup-code-outside": _static(
        "code outside the environment (another site directory, PYTHONPATH) that no "
        "RECORD owns runs at every interpreter start; a rebuild keeps it (B36)",
        "startup",
    ),
    # any level (a level all of whose checks were skipped has no check of its own to list it)
    "nothing-to-check": _any("a level was asked for but there is nothing for it to check (e.g. no [verify.drafter])"),
    "acceptance-expired": _any(
        "a recipe [[verify.accept]] entry is past its expiry date; its finding fails again", "accept"
    ),
    "acceptance-unmatched": _any("a recipe [[verify.accept]] entry matches no finding of a level that ran", "accept"),
    # gpu
    "no-gpu": _gpu("the gpu level was asked for explicitly (--level gpu) on a machine without an NVIDIA GPU", "gpu"),
    "cuda-unavailable": _gpu("the environment's torch cannot use CUDA on a machine with NVIDIA GPUs", "cuda"),
    "gpu-count": _gpu("the number of visible GPUs differs from the recipe target", "gpu-count"),
    "capability": _gpu("a GPU's compute capability differs from the recipe target", "capability"),
    "arch-list": _gpu("the installed torch has no kernels for a GPU's (or the target's) architecture", "arch-list"),
    "cuda-runtime": _gpu("torch's CUDA runtime differs from the variant's CUDA version", "cuda-runtime"),
    "driver-floor": _gpu("the driver is older than the CUDA runtime needs", "driver-floor"),
    "interconnect": _gpu(
        "the GPUs' links contradict [target] interconnect: pcie on an all-NVLink machine, or nvlink "
        "where some GPU pair has no NVLink",
        "interconnect",
    ),
    "nccl-library": _gpu("the process loaded another libnccl than the lock's wheel copy, or two copies (B31)", "nccl"),
    "native-op": _gpu("a small operation of a native package failed", "native-ops"),
    "allreduce-failed": _gpu("the all-reduce test failed or gave a wrong sum", "allreduce"),
    "allreduce-timeout": _gpu("the all-reduce test hung and was killed (B12)", "allreduce"),
    "env-profile-slower": _gpu(
        "an env profile makes an all-reduce size more than 20% slower than NCCL's default", "allreduce"
    ),
    "engine-variable": _static(
        "an env profile variable the installed engine (sglang, vLLM) does not read as "
        "written: a name its registry and code lack, or a value its parser refuses (B60)",
        "env-profile",
    ),
    "gpu-model": _gpu("a GPU is not the recipe's [target] gpu model (an H100 for an H200 target)", "capability"),
    "gpu-probe-failed": _gpu("the GPU probe could not run in the environment's interpreter", "gpu-info"),
}

#: Finding kinds of the drafter level come from :mod:`envforge.drafter` (``eagle3-fc``, ...).
DRAFTER_KIND_PREFIXES = ("eagle3-", "target-", "drafter-", "vocab-")

#: Every drafter kind (one of :data:`DRAFTER_KIND_PREFIXES`).
DRAFTER = Kind("an issue of the recipe's [verify.drafter] checks (docs/drafters.md)", "drafter", ("drafter",))

#: Checks whose JUnit case lists every finding of their level: the drafter level has one check.
LEVEL_WIDE_CHECKS = frozenset({"drafter"})

#: Every registered kind and what it means (the recipe loader's did-you-mean reads the keys).
KINDS: Mapping[str, str] = {name: k.meaning for name, k in REGISTRY.items()}


def kind_of(kind: str) -> Kind | None:
    """The :class:`Kind` of ``kind``: its :data:`REGISTRY` entry, :data:`DRAFTER` for a drafter
    kind, None for an unknown one."""
    found = REGISTRY.get(kind)
    if found is None and kind.startswith(DRAFTER_KIND_PREFIXES):
        return DRAFTER
    return found


def is_known_kind(kind: str) -> bool:
    """A key of :data:`REGISTRY`, or a drafter kind (one of :data:`DRAFTER_KIND_PREFIXES`)."""
    return kind_of(kind) is not None


def level_of(kind: str) -> Level:
    """The verify level that produces findings of ``kind`` (``static`` for the any-level ones and
    for an unknown kind)."""
    k = kind_of(kind)
    return k.level if k is not None else "static"


def rebuild_repairs(kind: str) -> bool:
    """Whether a fresh build from the same lock repairs a finding of ``kind`` (False when unknown)."""
    k = kind_of(kind)
    return k is not None and k.rebuild_repairs


def belongs_to(kind: str, check: str) -> bool:
    """Whether the JUnit case of ``check`` lists a finding of ``kind`` (of the check's level):
    ``check`` is one of the kind's checks, or one of :data:`LEVEL_WIDE_CHECKS`."""
    k = kind_of(kind)
    return check in LEVEL_WIDE_CHECKS or (k is not None and check in k.checks)
