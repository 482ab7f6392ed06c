"""Static verify of the env profile's variables as their readers read them.

NCCL, CUDA and the interpreter (:func:`envforge.env.profile.profile_problems`, field cases B19,
B31), and the installed serving engine by its own registry of the variables it reads
(:mod:`envforge.env.enginevars`: sglang's ``srt/environ.py``, vLLM's ``vllm/envs.py``; B60).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from envforge.env.enginevars import engine_variables
from envforge.env.enginevars import problems as engine_variable_problems
from envforge.env.profile import profile_problems
from envforge.verify.findings import Finding

__all__ = ["engine_variable_findings", "misread_findings"]


def engine_variable_findings(env: Mapping[str, str], site_packages: Path) -> list[Finding]:
    """Profile variables the installed engine (sglang, vLLM) does not read as written: judged by
    its own registry (:mod:`envforge.env.enginevars`, B60). Reviewed names (read by your own code
    or a newer engine) are accepted with ``[[verify.accept]]``."""
    if not any(k.startswith(("SGLANG_", "SGL_", "VLLM_")) for k in env):
        return []
    out = []
    for line in engine_variable_problems(env, engine_variables(site_packages)):
        name, _, why = line.partition(": ")
        out.append(
            Finding(
                "engine-variable",
                name,
                f"{name} as the installed engine reads it",
                why,
                "fix it in the recipe's [env.*] table, re-lock and rebuild; a name read by your own code "
                f'or a newer engine: [[verify.accept]] kind = "engine-variable", subject = "{name}", '
                "with the reason",
                from_recipe=True,
            )
        )
    return out


def misread_findings(env: Mapping[str, str], reviewed: Sequence[str] = ()) -> list[Finding]:
    """A profile variable NCCL, CUDA or the process would misread, or one read at process start
    that the hook sets for children only (B19, B31): reaching the child is not enough. The
    findings are about the recipe (``from_recipe``): a rebuild from the same lock has them again."""
    out = []
    for line in profile_problems(env, reviewed):
        name, _, why = line.partition(": ")
        out.append(
            Finding(
                "env-profile",
                name,
                f"{name} as the profile means it",
                why,
                "fix the recipe's [env.*] table (see docs/env-profiles.md), re-lock and rebuild",
                from_recipe=True,
            )
        )
    return out
