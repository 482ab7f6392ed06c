"""Prompt datasets in other tools' formats, read offline: a ShareGPT-format JSON file.

ShareGPT (what ``vllm bench serve --dataset-name sharegpt`` reads, ``vllm/benchmarks/datasets/
sharegpt.py``, ``ShareGPTDataset``): a JSON array of entries ``{"conversations": [{"from": "human",
"value": "..."}, {"from": "gpt", "value": "..."}, ...], ...}``. As vLLM does, entries with fewer than
two turns are left out and the prompt is the first turn's ``value``. The reply's length is not used:
every request asks for ``max-new-tokens`` (vLLM's ``--sharegpt-output-len``), so output lengths stay
fixed and checked (docs/bench.md). The order is envforge's own (``seed``), not vLLM's shuffle.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError

__all__ = ["sharegpt_prompts"]


def sharegpt_prompts(data: Any, path: Path) -> list[str]:
    """The prompts of a parsed ShareGPT-format file ``data`` read from ``path`` (for messages).

    :raises InputError: not an array of objects, ``conversations`` not an array of objects with a
        string ``value``, an empty first turn, or no entry with two turns; the message names the
        entry (``[3].conversations[0].value``).
    """
    if not isinstance(data, list):
        raise InputError(f"{path}: a ShareGPT file is a JSON array of {{\"conversations\": [...]}} entries",
                         hint="or give a JSON-lines file of {\"prompt\": \"...\"} objects")
    out = []
    for i, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(turns, Sequence) or isinstance(turns, str):
            if isinstance(entry, dict) and "conversations" not in entry:
                continue  # vLLM keeps only entries with conversations
            raise InputError(f"{path}: [{i}].conversations: expected an array of {{\"from\", \"value\"}} turns")
        if len(turns) < 2:
            continue  # vLLM: at least two conversation turns
        first = turns[0]
        value = first.get("value") if isinstance(first, dict) else None
        if not isinstance(value, str) or not value:
            raise InputError(f"{path}: [{i}].conversations[0].value: expected the prompt's non-empty text")
        out.append(value)
    if not out:
        raise InputError(f"{path}: no ShareGPT entry has two conversation turns (the prompt and a reply)")
    return out
