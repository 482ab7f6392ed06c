"""Text from a lock or another input, made safe to print on one line of a terminal or a diff.

A lock's strings are the author's: a ``[tool.envforge]`` value, a ``created-by``, a URL can hold an
escape sequence (ESC ``[31m`` recolours, moves the cursor or rewrites the terminal title), a carriage
return, a newline that makes ``lock textconv`` print a package line that is not in the lock (``git
diff`` would show it), or a bidirectional override that shows text in another order (CVE-2021-42574,
"Trojan Source"). :func:`escape_controls` shows each such character as a visible escape.
"""

from __future__ import annotations

__all__ = ["escape_controls"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL, C1 controls (Unicode category Cc) and the bidirectional formatting characters
# (Unicode Bidirectional Algorithm, UAX #9: LRM, RLM, embeddings, overrides, isolates).
_ESCAPED = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_TABLES: dict[str, dict[int, str]] = {}


def _table(keep: str) -> dict[int, str]:
    table = _TABLES.get(keep)
    if table is None:
        table = {
            c: _NAMED.get(chr(c)) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")
            for c in _ESCAPED
            if chr(c) not in keep
        }
        _TABLES[keep] = table
    return table


def escape_controls(text: str, *, keep: str = "") -> str:
    """``text`` with every control character (U+0000-U+001F, U+007F-U+009F) and bidirectional
    formatting character (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) shown as ``\\n``, ``\\r``,
    ``\\t``, ``\\xNN`` or ``\\uNNNN``, except the characters in ``keep`` (``"\\n\\t"`` for a
    multi-line message). Printable text is returned as it is (the common case costs one scan)."""
    if text.isprintable():  # False for every character escaped here (categories Cc and Cf)
        return text
    return text.translate(_table(keep))
