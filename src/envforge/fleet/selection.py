"""Which alive nodes of a Ray cluster a fleet command runs on: the nodes that carry the stack.

A Ray cluster often has nodes that carry no stack: a dedicated head that runs only the control plane
(``ray start --head --num-gpus 0``, no project, no environments), CPU nodes for data loading. A fleet
command takes the alive nodes a :class:`NodeSelection` names (:func:`select_nodes`) and lists every
other alive node as a :class:`~envforge.fleet.report.SkippedNode` with the reason, never as a failed
one. What a node offers is what Ray knows of it (an entry of ``ray.nodes()``): its ``Resources``
(``GPU``, the count ``ray start --num-gpus`` gave or Ray detected; custom ones from ``ray start
--resources '{"NAME": N}'``) and its ``Labels`` (``ray start --labels KEY=VALUE``).

The GPU count a node needs comes from the recipe's ``[target] gpus`` (GPUs per node,
:class:`envforge.recipe.model.Target`), as the lock of the environment records it
(:func:`lock_gpus`), unless the user names the nodes (``--num-gpus``, ``--label``, ``--resource``,
``--all-nodes``; docs/fleet.md). The all-reduce's backend follows the selected nodes' GPU resources
(:func:`choose_backend`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.fleet.report import SkippedNode

__all__ = ["NodeSelection", "Selected", "choose_backend", "gpus_of", "lock_gpus", "select_nodes"]


@dataclass(frozen=True, slots=True)
class NodeSelection:
    """Which alive nodes a fleet command runs on; every criterion given must hold.

    ``gpus``: at least this many ``GPU`` resources per node; ``source`` says where that count comes
    from (``--num-gpus 8``, ``[target] gpus = 8 in lockfiles/pylock.x.toml``), or, with ``every``,
    why every alive node is taken. ``labels``: ``(key, value)`` pairs a node's Ray labels must have
    (value None: any value). ``resources``: ``(name, amount)``, at least ``amount`` of that Ray
    resource. ``every``: every alive node, whatever it has. Nothing given (the default): the nodes with
    GPU resources when any alive node has some, else every alive node (a CPU-only cluster).
    """

    gpus: int | None = None
    source: str = ""
    labels: tuple[tuple[str, str | None], ...] = ()
    resources: tuple[tuple[str, float], ...] = ()
    every: bool = False

    def rule(self, nodes: Sequence[Mapping[str, Any]] = ()) -> str:
        """The rule in words, for the report (``nodes``: the alive nodes, for the default rule)."""
        if self.every:
            return "every alive node" + (f" ({self.source})" if self.source else "")
        parts = [f"label {k}={v}" if v is not None else f"label {k}" for k, v in self.labels]
        parts += [f"resource {name} >= {amount:g}" for name, amount in self.resources]
        if self.gpus is not None:
            parts.append(
                f"at least {self.gpus} GPU{'s' if self.gpus != 1 else ''}"
                + (f" ({self.source})" if self.source else "")
            )
        if parts:
            return "nodes with " + ", ".join(parts)
        if any(_gpus(n) > 0 for n in nodes):
            return "nodes with GPU resources (the GPU count the stack needs is not known here: --num-gpus N sets it)"
        return "every alive node (none has GPU resources)"


@dataclass(frozen=True, slots=True)
class Selected:
    """The outcome of :func:`select_nodes`: the nodes to run on (Ray's records, in the order given),
    the alive nodes skipped with the reason, and the rule in words."""

    nodes: tuple[Mapping[str, Any], ...]
    skipped: tuple[SkippedNode, ...]
    rule: str


def select_nodes(alive: Sequence[Mapping[str, Any]], selection: NodeSelection) -> Selected:
    """The nodes of ``alive`` (entries of ``ray.nodes()``) that ``selection`` names, and the others as
    skipped, each with every criterion it misses (``no GPU resources (needs 8)``, ``4 GPUs (needs 8)``,
    ``no label pool (needs pool=gpu)``, ``label pool=cpu (needs pool=gpu)``, ``no resource
    stack (needs >= 1)``, ``resource stack 0.5 (needs >= 1)``), joined with ``; ``."""
    rule = selection.rule(alive)
    gpus = selection.gpus
    if selection.every:
        return Selected(tuple(alive), (), rule)
    if gpus is None and not selection.labels and not selection.resources:
        if not any(_gpus(n) > 0 for n in alive):
            return Selected(tuple(alive), (), rule)
        gpus = 1
    taken, skipped = [], []
    for node in alive:
        misses = _misses(node, gpus, selection)
        if misses:
            skipped.append(SkippedNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "; ".join(misses)))
        else:
            taken.append(node)
    return Selected(tuple(taken), tuple(skipped), rule)


def _misses(node: Mapping[str, Any], gpus: int | None, selection: NodeSelection) -> list[str]:
    labels: Mapping[str, str] = node.get("Labels") or {}
    resources: Mapping[str, float] = node.get("Resources") or {}
    out = []
    for key, value in selection.labels:
        want = f"{key}={value}" if value is not None else key
        if key not in labels:
            out.append(f"no label {key} (needs {want})")
        elif value is not None and labels[key] != value:
            out.append(f"label {key}={labels[key]} (needs {want})")
    for name, amount in selection.resources:
        have = float(resources.get(name, 0))
        if have <= 0:
            out.append(f"no resource {name} (needs >= {amount:g})")
        elif have < amount:
            out.append(f"resource {name} {have:g} (needs >= {amount:g})")
    if gpus is not None and _gpus(node) < gpus:
        have = _gpus(node)
        text = "no GPU resources" if have <= 0 else f"{have:g} GPU{'s' if have != 1 else ''}"
        out.append(f"{text} (needs {gpus})")
    return out


def _gpus(node: Mapping[str, Any]) -> float:
    return float((node.get("Resources") or {}).get("GPU", 0))


def choose_backend(nodes: Sequence[Mapping[str, Any]], asked: str | None) -> tuple[str, str]:
    """The all-reduce's torch.distributed backend for ``nodes`` and why: ``asked`` when given
    (``--backend``); else ``nccl`` when every node has GPU resources, ``gloo`` when one or more has
    none (NCCL needs a GPU on every rank)."""
    if asked:
        return asked, f"--backend {asked}"
    without = sum(1 for n in nodes if _gpus(n) <= 0)
    if not nodes:
        return "gloo", "no node selected"
    if without == 0:
        return "nccl", "every selected node has GPU resources"
    if without == len(nodes):
        return "gloo", "the selected nodes have no GPU resources (nccl needs a GPU on every rank)"
    return "gloo", (f"{without} of {len(nodes)} selected nodes have no GPU resources (nccl needs a GPU on every rank)")


def lock_gpus(root: Path, env_name: str) -> tuple[int | None, str] | None:
    """``[target] gpus`` of environment ``env_name`` as its lock in the driver's project records it
    (``lockfiles/pylock.<env_name>.toml``, table ``tool.envforge.target``) and where it came from;
    ``(None, why)`` when the lock records no GPU count; None when the driver has no readable lock
    (the nodes say what is wrong with theirs)."""
    path = root / "lockfiles" / f"pylock.{env_name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # TOMLDecodeError, UnicodeDecodeError, a number too long to convert
        return None
    target = data.get("tool", {}).get("envforge", {}).get("target", {})
    where = f"lockfiles/{path.name}"
    return gpus_of(target.get("gpus") if isinstance(target, Mapping) else None, where)


def gpus_of(gpus: Any, where: str) -> tuple[int | None, str]:
    """A recipe's ``[target] gpus`` (``gpus``, from ``where``) as ``lock_gpus`` answers it."""
    if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0:
        return gpus, f"[target] gpus = {gpus} in {where}"
    return None, f"{where} names no [target] gpus"
