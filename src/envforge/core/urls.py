"""URL text patterns shared by every place that finds URLs in free text, and the one credential
redaction (:func:`redact_credentials`) everything envforge prints or writes goes through.

``SCHEME`` matches a URL scheme and its ``://`` (RFC 3986 section 3.1: a letter, then letters, digits,
``+``, ``.``, ``-``) and is tried only where a run of such characters starts (the look-behind), so a
search over a text is linear in its length. Tried at every position, as a plain
``[A-Za-z][A-Za-z0-9+.-]*://`` is, a long run of letters without ``://`` (a 5 MB value in a lock)
costs quadratic time: hours. Group 1 is the scheme with ``://`` and the run's leading digits or
signs, which are not part of the scheme but are kept in the text as they were.
"""

from __future__ import annotations

import re

__all__ = ["JOINED", "JOINED_BODY", "SCHEME", "SCHEME_BODY", "SCHEME_START", "redact_credentials"]

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
