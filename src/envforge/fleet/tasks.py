"""What runs on a fleet node: the verify, build and all-reduce tasks, and the node's time budget.

Each task is a plain function with JSON-able arguments and a JSON-able answer (a dict), run on its
node by the driver (:mod:`envforge.fleet.driver`, as a Ray task pinned to the node) or by the node's
long-lived agent (:mod:`envforge.fleet.agent`); this module knows neither, and imports no Ray.

Where the project lives on a node: the path the driver gives, unless that node's Ray processes have
:data:`ROOT_VARIABLE` (``ENVFORGE_FLEET_ROOT``) in their environment. A verify or build runs under an
:func:`envforge.core.deadline.deadline` of :func:`node_budget`, which ends a little before the
driver's ``timeout_s``: a probe or uv run still going then has its process group killed, and the
answer is an ``error`` with ``timed-out``.

An answer is ``{"fingerprint", "findings", "elapsed-s", "detail"?}`` (findings as
:meth:`envforge.verify.findings.Finding.as_dict` gives them), or ``{"error", "hint"?, "timed-out"?,
"elapsed-s", "detail"?}``; the all-reduce task's is ``{"rank", "sizes"}`` or ``{"rank", "error", "hint"}``.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from envforge.core.deadline import deadline
from envforge.core.errors import EnvforgeError
from envforge.env.build import execute_build, plan_build
from envforge.env.layout import resolve_environment
from envforge.env.profile import read_installed
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project
from envforge.uv.interpreter import find_python
from envforge.verify import VerifyOptions, verify

__all__ = ["COMPARED", "ROOT_VARIABLE", "allreduce_task", "build_task", "node_budget", "node_error", "verify_task"]

#: The environment variable of a node's Ray processes that names that node's project directory.
ROOT_VARIABLE = "ENVFORGE_FLEET_ROOT"

#: What must be identical on every node (keys of a node's ``fingerprint`` dict, in report order).
COMPARED = (
    "lock_digest",
    "patch_manifest_digest",
    "env_profile",
    "env_profile_digest",
    "env_profile_values",
    "python",
    "platform",
    "driver",
    "gpu",
    "gpu_count",
    "compute_capability",
)


def node_budget(timeout_s: float, deadline_wall: float, now_wall: float) -> float:
    """Seconds a node may spend in its verify or build so its answer reaches the driver before the driver's
    ``timeout_s`` ends at ``deadline_wall`` (``time.time()`` on the driver): what is left by this
    node's clock (``now_wall``), or ``timeout_s`` where the clocks disagree by more than that (a
    node whose clock is behind or far ahead), less a margin for the answer's way back of 5 % of
    ``timeout_s``, between 2 s and 15 s. Never below 0.
    """
    left = deadline_wall - now_wall
    if not 0 < left <= timeout_s:
        left = timeout_s
    return max(0.0, left - min(15.0, max(2.0, 0.05 * timeout_s)))


def _node_root(default: str) -> Path:
    return Path(os.environ.get(ROOT_VARIABLE) or default)


def _node_deadline(limit: tuple[float, float] | None) -> AbstractContextManager[None]:
    """:func:`envforge.core.deadline.deadline` of the node's :func:`node_budget` of ``limit`` (the driver's
    deadline as ``time.time()``, its timeout in s); no deadline when ``limit`` is None."""
    return nullcontext() if limit is None else deadline(node_budget(limit[1], limit[0], time.time()))


def node_error(action: str, exc: EnvforgeError, limit: tuple[float, float] | None) -> dict[str, Any]:
    """A task's ``error`` answer, with the error's ``hint`` when it has one (the fix the local command
    would print, e.g. the environments that exist on the node); ``timed-out`` (status ``timeout``)
    when the node's deadline stopped a probe or uv run (``deadline_s`` on the error, or on the cause
    of a build error). ``action`` names the task in the timed-out message (``verify``, ``build``);
    ``limit`` is (the driver's deadline as ``time.time()``, its timeout in s) or None."""
    hint = {"hint": exc.hint} if exc.hint else {}
    stopped = [getattr(e, "deadline_s", None) for e in (exc, getattr(exc, "cause", None))]
    if limit is None or stopped == [None, None]:
        return {"error": exc.message, **hint}
    return {
        "error": f"{action} did not finish within the {limit[1]:g} s limit: {exc.message}",
        **hint,
        "timed-out": True,
    }


def verify_task(
    env_name: str, root: str, levels: tuple[str, ...], limit: tuple[float, float] | None = None
) -> dict[str, Any]:
    """On one node: envforge's verify of ``env_name`` in this node's project (``root``, or
    :data:`ROOT_VARIABLE`); the answer holds the :data:`COMPARED` keys of the fingerprint (with the
    installed env profile's values) and the findings. ``levels``: verify levels (empty: the
    recipe's). ``limit``: (the driver's deadline as ``time.time()``, its timeout in s); every probe
    of the verify ends within :func:`node_budget` of it, and one that ran past it makes the answer
    an ``error`` with ``timed-out``. An envforge error is an ``error`` answer, never raised."""
    start = time.monotonic()
    try:
        with _node_deadline(limit):
            project = Project(_node_root(root))
            env = resolve_environment(project, env_name, env_name)
            report = verify(env, project, VerifyOptions(levels=levels or None, base_env=dict(os.environ)))
            installed = read_installed(env.site_packages)  # the record verify read: a regular file only
    except EnvforgeError as exc:
        return {**node_error("verify", exc, limit), "elapsed-s": round(time.monotonic() - start, 3)}
    fp = report.fingerprint.as_dict()
    fp["env_profile_values"] = dict(installed.env) if installed is not None else {}
    return {
        "fingerprint": {k: fp.get(k) for k in COMPARED},
        "findings": [f.as_dict() for f in report.findings],
        "elapsed-s": round(time.monotonic() - start, 3),
    }


def build_task(
    recipe: str,
    variant: str | None,
    root: str,
    find_links: tuple[str, ...],
    offline: bool,
    limit: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """On one node: envforge's build of the committed lock of ``recipe``/``variant``; ``detail``
    holds the live generation before and after (``g0003``, or None) and whether it flipped.
    ``limit`` as for :func:`verify_task`: a uv run still going at the node's deadline is stopped
    (process group killed), the build fails as any failed build does (the live generation kept),
    and the answer is ``timed-out``. An envforge error is an ``error`` answer, never raised."""
    start = time.monotonic()
    project = Project(_node_root(root))
    before = after = None
    try:
        with _node_deadline(limit):
            resolved = load_recipe(project.recipe_path(recipe)).resolve(variant)
            link = project.env_path(resolved.lock_name)
            before = _live(link)
            plan = plan_build(
                project,
                resolved,
                find_python(resolved.python),
                find_links=[Path(p) for p in find_links],
                offline=offline,
            )
            execute_build(plan)
            after = _live(link)
    except EnvforgeError as exc:
        return {
            **node_error("build", exc, limit),
            "elapsed-s": round(time.monotonic() - start, 3),
            "detail": {"before": before, "after": before, "flipped": False},
        }
    return {
        "fingerprint": {},
        "findings": [],
        "elapsed-s": round(time.monotonic() - start, 3),
        "detail": {"before": before, "after": after, "flipped": before != after},
    }


def _live(link: Path) -> str | None:
    """The generation ``envs/<name>`` points to (``g0003``), or None when there is none yet."""
    return link.resolve().name if link.is_symlink() else None


def allreduce_task(
    rank: int,
    world: int,
    master: str,
    port: int,
    backend: str,
    sizes: tuple[int, ...],
    env: Mapping[str, str],
    repeats: int,
) -> dict[str, Any]:
    """On one node: join the torch.distributed group (TCP rendezvous on ``master:port``) and time
    all-reduces of ``sizes`` bytes (float32), median of ``repeats``; the sum is checked. The answer
    is ``{"rank", "sizes": [{"bytes", "median-us", "bus-gbps", "sum-ok"}, ...]}``. torch is
    imported in the Python of Ray's workers (not an envforge environment's): where it is missing the
    answer is ``{"rank", "error", "hint"}`` saying so, not a traceback."""
    os.environ.update(env)
    try:
        # lazy: torch lives in the Python of the node's Ray workers, not among envforge's dependencies
        import torch
        import torch.distributed as dist
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "torch":
            raise
        return {
            "rank": rank,
            "error": f"torch is not installed in the Python of this node's Ray workers "
            f"({sys.executable}): the all-reduce runs there",
            "hint": "install torch into the Python that runs `ray start` on every node (it is not part of "
            "envforge-stack[fleet]: pick the build for the node's CUDA), then run it again",
        }

    dist.init_process_group(
        backend,
        init_method=f"tcp://{master}:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    out = []
    try:
        for size in sizes:
            t = torch.ones(size // 4, dtype=torch.float32, device=device)
            dist.all_reduce(t)  # warm-up (and the connection set-up)
            times = []
            for _ in range(repeats):
                t.fill_(1.0)
                if backend == "nccl":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                if backend == "nccl":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            ok = bool(torch.all(t == float(world)).item())
            med = statistics.median(times)
            out.append(
                {
                    "bytes": size,
                    "median-us": round(med * 1e6, 1),
                    "bus-gbps": round(2 * (world - 1) / world * size / med / 1e9, 3),
                    "sum-ok": ok,
                }
            )
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "sizes": out}
