"""What a text must be before libcst parses it: libcst's native parser crashes the process (a
segfault, no message) on brackets nested a few thousand deep, and its tree building recurses once
per operator of a chain (``1+1+...``: quadratic time, then ``RecursionError``). CPython's own parser
refuses more than 200 nested brackets (``too many nested parentheses``, Python's ``Parser/parser.h``
``MAXSTACK``), so no real module comes near these limits; a diff or an edit that does is refused
before libcst sees it, naming the line.

:func:`check_text` scans with :mod:`tokenize` (linear time, no recursion): control characters other
than tab, line feed, carriage return and form feed; bracket depth per logical line at most
:data:`MAX_DEPTH`; binary and boolean operators chained at one bracket level at most
:data:`MAX_CHAIN`.
"""

from __future__ import annotations

import io
import re
import tokenize

from envforge.core.errors import InputError

__all__ = ["MAX_CHAIN", "MAX_DEPTH", "check_control", "check_text"]

MAX_DEPTH = 100  # nested brackets on one logical line (CPython itself stops at 200)
MAX_CHAIN = 1000  # operators chained at one bracket level in one logical line
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_CHAINING = frozenset(
    {"+", "-", "*", "/", "//", "%", "@", "**", "<<", ">>", "&", "|", "^", "<", ">", "<=", ">=", "==", "!=", "and", "or"}
)


def check_control(text: str, label: str) -> None:
    """Refuse a control character (NUL, ESC, ...; tab, LF, CR and form feed are text) in ``text``.

    :raises InputError: ``<label>:<line>: a control character (\\x00) ...``, exit 2.
    """
    found = _CONTROL.search(text)
    if found is not None:
        line = text.count("\n", 0, found.start()) + 1
        raise InputError(
            f"{label}:{line}: a control character ({ascii(found.group())[1:-1]}) in the text: not "
            "Python source or a diff of it",
            hint="remove it (a diff is text; a binary file is not patched by envforge)",
        )


def check_text(text: str, label: str) -> None:
    """Refuse what libcst cannot parse safely (see the module doc), naming the line of ``text``.

    A text that does not tokenize is left to the parser (it reports the syntax error itself).

    :raises InputError: a control character; brackets nested deeper than :data:`MAX_DEPTH`; more
        than :data:`MAX_CHAIN` operators chained at one level.
    """
    check_control(text, label)
    depth = 0
    chains = [0]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
                chains.append(0)
                if depth > MAX_DEPTH:
                    raise InputError(
                        f"{label}:{tok.start[0]}: brackets nested more than {MAX_DEPTH} deep: envforge "
                        "does not parse such code (CPython refuses 200)",
                        hint="split the expression",
                    )
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(depth - 1, 0)
                if len(chains) > 1:
                    chains.pop()
            elif tok.string in _CHAINING and tok.type in (tokenize.OP, tokenize.NAME):
                chains[-1] += 1
                if chains[-1] > MAX_CHAIN:
                    raise InputError(
                        f"{label}:{tok.start[0]}: more than {MAX_CHAIN} operators chained in one "
                        "expression: envforge does not parse such code",
                        hint="split the expression",
                    )
            elif tok.type == tokenize.OP and tok.string in (",", ";", "=", ":"):
                chains[-1] = 0
            elif tok.type == tokenize.NEWLINE:
                depth, chains = 0, [0]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return
