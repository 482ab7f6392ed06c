"""The one error hierarchy of envforge, and the exit codes it maps to.

Exit statuses (docs/design.md, decision 6; the same four as uv):

====  ==========================================================
0     success, clean
1     a check failed: findings, a stale lock, a drifted patch
2     usage or input error: a bad recipe, lock, patchset, argument
3     an external tool failed: uv, git, the environment's interpreter
70    an internal error: a bug in envforge (BSD sysexits ``EX_SOFTWARE``); the traceback goes to
      a log file whose path the one-line message names, never to the terminal
====  ==========================================================

Every error carries a message that says what happened and where (file, key, line) and, in
``hint``, what to do next. Only :mod:`envforge.cli` turns errors into text and exit codes.
"""

from __future__ import annotations

from collections.abc import Sequence

from envforge.core.urls import redact_credentials

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_INPUT_ERROR",
    "EXIT_INTERNAL_ERROR",
    "EXIT_OK",
    "EXIT_TOOL_FAILED",
    "CheckFailed",
    "EnvforgeError",
    "ExternalToolError",
    "InputError",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_INPUT_ERROR = 2
EXIT_TOOL_FAILED = 3
EXIT_INTERNAL_ERROR = 70


class EnvforgeError(Exception):
    """Base of every error envforge raises on purpose.

    :param message: what happened and where, one or a few lines.
    :param hint: the next step for the user, or ``None``.
    """

    exit_code: int = EXIT_INPUT_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class InputError(EnvforgeError):
    """Bad input: a recipe, lock, patchset, report or argument (exit 2)."""

    exit_code = EXIT_INPUT_ERROR


class CheckFailed(EnvforgeError):
    """A check ran and failed: stale lock, index guard, drifted patch, unmet requirement (exit 1)."""

    exit_code = EXIT_CHECK_FAILED


class ExternalToolError(EnvforgeError):
    """An external program (uv, git, the environment's interpreter) failed (exit 3).

    Keeps the argv, the exit status and the last lines of stderr so the message can show them.

    :param tool: short name, e.g. ``"uv"``.
    :param argv: the full command line that was run.
    :param returncode: its exit status, or ``None`` when it could not start or timed out.
    :param stderr_tail: the last lines of its standard error.

    ``deadline_s`` is the caller's limit in seconds when that, not the tool's own timeout, is what
    stopped it (:mod:`envforge.core.deadline`), else None.
    """

    exit_code = EXIT_TOOL_FAILED
    deadline_s: float | None = None

    def __init__(
        self,
        message: str,
        *,
        tool: str,
        argv: Sequence[str],
        returncode: int | None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(redact_credentials(message), hint=hint)
        self.tool = tool
        self.argv = tuple(redact_credentials(a) for a in argv)  # a tool's words reach no output raw
        self.returncode = returncode
        self.stderr_tail = redact_credentials(stderr_tail)

    def __str__(self) -> str:
        lines = [self.message]
        if self.stderr_tail:
            lines.append(f"  {self.tool} said:")
            lines.extend("    " + line for line in self.stderr_tail.splitlines())
        if self.hint:
            lines.append(f"  hint: {self.hint}")
        return "\n".join(lines)
