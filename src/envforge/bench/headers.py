"""The headers bench sends with every request to a server: ``--header NAME=VALUE`` and the API key.

As ``vllm bench serve`` does (``vllm/benchmarks/lib/endpoint_request_func.py``, 0.32.0:
``_get_headers`` and ``--header``), ``OPENAI_API_KEY`` from the environment becomes
``Authorization: Bearer <key>`` and each ``--header KEY=VALUE`` is added (a ``--header
Authorization=...`` wins over the key). They are credentials: never written into a report, a log or
an error message (a malformed ``--header`` is named by its position and name, never its value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from envforge.core.errors import InputError

__all__ = ["request_headers"]

# RFC 9110, section 5.6.2: a field name is a token
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def request_headers(given: Sequence[str], environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``(name, value)`` pairs: ``Authorization: Bearer $OPENAI_API_KEY`` when that is set and not
    empty, then each ``NAME=VALUE`` of ``given`` in order (a later one of the same name, compared
    without case, replaces the earlier).

    :raises InputError: an item without ``=``, a name that is not an HTTP token, a value with a
        line break or another control character (exit 2, naming ``--header`` by position and name).
    """
    out: dict[str, tuple[str, str]] = {}
    if key := environ.get("OPENAI_API_KEY", ""):
        if _bad_value(key):
            raise InputError(
                "OPENAI_API_KEY holds a line break or another control character (not shown)",
                hint="set OPENAI_API_KEY to the key alone",
            )
        out["authorization"] = ("Authorization", f"Bearer {key}")
    for i, item in enumerate(given, 1):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not _TOKEN.fullmatch(name):
            shown = f" ({name!r})" if _TOKEN.fullmatch(name) else ""
            raise InputError(
                f"--header #{i}{shown}: expected NAME=VALUE with an HTTP field name (the value is not shown)",
                hint="e.g. --header X-Tenant=team-a",
            )
        if _bad_value(value):
            raise InputError(
                f"--header #{i} ({name!r}): the value holds a line break or another control character (not shown)",
                hint="give the value on one line",
            )
        out[name.lower()] = (name, value.strip())
    return tuple(out.values())


def _bad_value(value: str) -> bool:
    return any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F for c in value)
