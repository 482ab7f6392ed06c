"""URL text patterns shared by every place that finds URLs in free text (credential redaction).

``SCHEME`` matches a URL scheme and its ``://`` (RFC 3986 section 3.1: a letter, then letters, digits,
``+``, ``.``, ``-``) and is tried only where a run of such characters starts (the look-behind), so a
search over a text is linear in its length. Tried at every position, as a plain
``[A-Za-z][A-Za-z0-9+.-]*://`` is, a long run of letters without ``://`` (a 5 MB value in a lock)
costs quadratic time: hours. Group 1 is the scheme with ``://`` and the run's leading digits or
signs, which are not part of the scheme but are kept in the text as they were.
"""

from __future__ import annotations

__all__ = ["SCHEME", "SCHEME_BODY", "SCHEME_START"]

#: Where a run of scheme characters starts (nothing of the run before it).
SCHEME_START = r"(?<![A-Za-z0-9+.-])"
#: The run's leading digits or signs, the scheme and ``://`` (no group).
SCHEME_BODY = r"[0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://"
SCHEME = SCHEME_START + "(" + SCHEME_BODY + ")"
