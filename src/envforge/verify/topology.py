"""The recipe's ``[target] interconnect`` against the GPU links the topology probe saw.

The link labels are ``nvidia-smi topo -m``'s (its legend: ``NV#`` is "a bonded set of # NVLinks";
PIX, PXB, PHB, NODE and SYS are PCIe paths), or NVML's answer mapped to the same labels by
``gpu_probe.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envforge.core.plural import counted
from envforge.verify.findings import Finding

__all__ = ["interconnect_check"]


def _f(kind: str, subject: str, expected: str, actual: str, fix: str) -> Finding:
    return Finding(kind, subject, expected, actual, fix, level="gpu")


def _by_label(links: Mapping[str, str]) -> str:
    """``NV18: 0-1, 0-2; SYS: 0-4``: the pairs grouped by link label, labels sorted."""
    groups: dict[str, list[str]] = {}
    for pair, label in links.items():
        groups.setdefault(label, []).append(pair)
    return "; ".join(f"{label}: {', '.join(pairs)}" for label, pairs in sorted(groups.items()))


def interconnect_check(declared: str | None, topo: Mapping[str, Any]) -> tuple[str, list[Finding], str]:
    """The recipe's ``[target] interconnect`` (``pcie``, ``nvlink`` or None) against the GPU links.

    ``topo`` is the probe's ``topology`` answer (``source``, ``gpus``, ``links``: ``{"0-1": "NV18"}``
    with nvidia-smi's labels, ``tried``). A link is NVLink when its label starts with ``NV``
    (``NV#``: "a bonded set of # NVLinks" in the legend of ``nvidia-smi topo -m``); every other
    label (PIX, PXB, PHB, NODE, SYS) is a PCIe path. ``pcie`` declared while every pair is NVLink,
    or ``nvlink`` declared while some pair is not, is an ``interconnect`` finding naming the pairs.
    Fewer than two GPUs, no link information, or nothing declared: skipped, with the reason.
    :returns: ``(status, findings, detail)``, status ``ok``, ``findings`` or ``skipped``.
    """
    gpus, links = list(topo.get("gpus") or []), dict(topo.get("links") or {})
    source = {"nvml": "NVML", "nvidia-smi": "nvidia-smi topo -m"}.get(str(topo.get("source")))
    if source is None:
        return "skipped", [], "no GPU link information: " + ("; ".join(topo.get("tried") or []) or "no source")
    if len(gpus) < 2:
        return "skipped", [], f"no peer GPUs ({len(gpus)} GPU, from {source})"
    seen = f"{counted(len(gpus), 'GPU')}, {counted(len(links), 'pair')} ({source}): {_by_label(links)}"
    if declared not in ("pcie", "nvlink"):
        return "skipped", [], f"the recipe declares no [target] interconnect; {seen}"
    nvlink = {p: lb for p, lb in links.items() if lb.startswith("NV")}
    other = {p: lb for p, lb in links.items() if not lb.startswith("NV")}
    if declared == "pcie" and links and not other:
        return (
            "findings",
            [
                _f(
                    "interconnect",
                    "[target] interconnect",
                    "pcie: GPU pairs linked over PCIe (PIX, PXB, PHB, NODE or SYS)",
                    f"every pair is linked by NVLink ({source}): {_by_label(nvlink)}",
                    'declare interconnect = "nvlink" in the recipe\'s [target] (its [env.nvlink] profile is installed), '
                    "or run on the PCIe machine the recipe targets",
                )
            ],
            f"pcie declared; {seen}",
        )
    if declared == "nvlink" and other:
        return (
            "findings",
            [
                _f(
                    "interconnect",
                    "[target] interconnect",
                    "nvlink: every GPU pair linked by NVLink (NV#)",
                    f"{len(other)} of {counted(len(links), 'pair')} not linked by NVLink ({source}): {_by_label(other)}",
                    'declare interconnect = "pcie" in the recipe\'s [target] (its [env.pcie] profile is installed), '
                    "or run on the NVLink machine the recipe targets",
                )
            ],
            f"nvlink declared; {seen}",
        )
    return "ok", [], f"{declared} declared; {seen}"
