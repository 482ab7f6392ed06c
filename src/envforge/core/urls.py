"""URL text patterns and the one credential redaction (:func:`redact_credentials`) everything envforge
prints or writes goes through, for text and for command lines.

``SCHEME`` matches a URL scheme and its ``://`` (RFC 3986 section 3.1: a letter, then letters, digits,
``+``, ``.``, ``-``) and is tried only where a run of such characters starts (the look-behind), so a
search over a text is linear in its length. Tried at every position, as a plain
``[A-Za-z][A-Za-z0-9+.-]*://`` is, a long run of letters without ``://`` (a 5 MB value in a lock)
costs quadratic time: hours. Group 1 is the scheme with ``://`` and the run's leading digits or
signs, which are not part of the scheme but are kept in the text as they were.

:func:`redact` hides the credentials of URLs in free text (every line the CLI prints passes through
it); :func:`redact_argv` hides, in a command line, those and the value of every argument whose name
says it holds a credential (``--api-key SECRET``, ``--hf-token=SECRET``, ``HF_TOKEN=SECRET``): a
started server's command line is printed and written into bench reports (issue 27).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "JOINED",
    "JOINED_BODY",
    "REDACTED",
    "SCHEME",
    "SCHEME_BODY",
    "SCHEME_START",
    "redact",
    "redact_argv",
    "redact_credentials",
    "secret_arg_name",
]

#: Where a run of scheme characters starts (nothing of the run before it).
SCHEME_START = r"(?<![A-Za-z0-9+.-])"
#: The run's leading digits or signs, the scheme and ``://`` (no group).
SCHEME_BODY = r"[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://"
SCHEME = SCHEME_START + "(" + SCHEME_BODY + ")"
#: As ``SCHEME_BODY``, also with one slash: what a path join makes of a URL (uv's "Failed to read
#: `--find-links` directory: /proj/http:/u:SECRET@host/...", field case N37). For redaction only.
JOINED_BODY = r"[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*:/{1,2}"
JOINED = SCHEME_START + "(" + JOINED_BODY + ")"

# ``scheme://user:password@``: a password in a URL never reaches a terminal, a file or a JSON document
# (issue 18). The user part stops at the first ":" (RFC 3986 userinfo), so the password's end is found once.
_PASSWORD_IN_URL = re.compile(JOINED + r"[^/@\s'\":]+:[^/@\s'\"]*@")
# ``https://TOKEN@host``: a token as the user name (GitHub, Hugging Face, GitLab deploy tokens) is a
# credential too; only ssh-style URLs (``git+ssh://git@host``) carry a user name that is not one.
_USER_IN_URL = re.compile(SCHEME_START + r"((?![A-Za-z0-9+.-]*ssh)" + JOINED_BODY + r")[^/@\s'\":]+@")


def redact_credentials(text: str) -> str:
    """``text`` with every ``scheme://user:password@`` (or ``scheme:/user:password@``) shown as
    ``scheme://<credentials>@`` (the scheme and its slashes as written); linear in the text (see ``SCHEME``).

    A user name alone is a credential in ``https://TOKEN@host`` (a token as the user name) and is
    redacted too, except in ssh-style URLs (``git+ssh://git@host``), where it is left as it is.
    """
    return _USER_IN_URL.sub(r"\1<credentials>@", _PASSWORD_IN_URL.sub(r"\1<credentials>@", text))


#: The name most callers use: the same function.
redact = redact_credentials

#: What stands in a command line for a credential's value.
REDACTED = "<redacted>"
# An argument name that says its value is a credential, its dashes as underscores, upper case: a word
# TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL(S), or a KEY of an API or access (``--api-key``,
# ``--hf-token``, ``--admin-api-key``, ``HF_TOKEN``); ``--max-tokens`` and ``--tokenizer`` are not.
_SECRET_ARG = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|(API|ACCESS|PRIVATE)_?KEY)(_|$)")
# Where a credential lives (``--token-file``, ``--api-key-path``) is not one.
_SECRET_LOCATION = re.compile(r"_(PATH|FILE|DIR)$")


def secret_arg_name(name: str) -> bool:
    """Whether a command-line argument or variable ``name`` says its value is a credential.

    >>> [secret_arg_name(n) for n in ("--api-key", "--hf-token", "HF_TOKEN", "--max-tokens", "--token-file")]
    [True, True, True, False, False]
    """
    key = name.lstrip("-").replace("-", "_").upper()
    return bool(key) and _SECRET_ARG.search(key) is not None and _SECRET_LOCATION.search(key) is None


def redact_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` safe to print and to write into a report.

    The value after a credential flag (``--api-key SECRET``, unless the next word is itself an
    option), the value of ``--api-key=SECRET`` and of ``NAME=SECRET`` where :func:`secret_arg_name`
    holds for the name become ``<redacted>``; every other argument passes through :func:`redact_credentials`
    (URL userinfo). Arguments are never joined, split or dropped: the result has ``len(argv)`` items.

    >>> redact_argv(["-m", "sglang", "--api-key", "s3", "--hf-token=s4", "--url", "http://u:p@h/"])
    ('-m', 'sglang', '--api-key', '<redacted>', '--hf-token=<redacted>', '--url', 'http://<credentials>@h/')
    """
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next and not arg.startswith("-"):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = False
        name, eq, _value = arg.partition("=")
        if eq and secret_arg_name(name):
            out.append(f"{name}={REDACTED}")
        elif arg.startswith("-") and secret_arg_name(arg):
            out.append(arg)
            secret_next = True
        else:
            out.append(redact_credentials(arg))
    return tuple(out)
