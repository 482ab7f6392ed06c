"""``envforge verify``: prove an environment is what its lock, patchsets and env profile say, and
that the GPU box suits it.

Modules, in data-flow order: :mod:`.inventory` (lock and installed distributions),
:mod:`.versions` and :mod:`.records` (static comparisons), :mod:`.static` (the static level),
:mod:`.gpu` with the probe scripts ``env_probe.py`` / ``gpu_probe.py`` (run in the environment's own
interpreter), :mod:`.findings` (the report values), :mod:`.runner` (:func:`verify`, the entry point)
and :mod:`.report` (text, JSON, JUnit).
"""

from __future__ import annotations

from envforge.verify.findings import KINDS, LEVELS, Check, Finding, VerifyReport
from envforge.verify.runner import VerifyOptions, verify

__all__ = ["KINDS", "LEVELS", "Check", "Finding", "VerifyOptions", "VerifyReport", "verify"]
