"""Prompts, and prompt datasets in other tools' formats read offline: a ShareGPT-format JSON file.

:class:`Prompt` is one request's prompt: its text and, for the datasets that give each request its
own lengths (random, shared prefix, trace: :mod:`envforge.bench.workload`), its output and input
tokens and its recorded arrival.

ShareGPT (what ``vllm bench serve --dataset-name sharegpt`` reads, ``vllm/benchmarks/datasets/
sharegpt.py``, ``ShareGPTDataset``): a JSON array of entries ``{"conversations": [{"from": "human",
"value": "..."}, {"from": "gpt", "value": "..."}, ...], ...}``. As vLLM does, entries with fewer than
two turns are left out and the prompt is the first turn's ``value``. The reply's length is not used:
every request asks for ``max-new-tokens`` (vLLM's ``--sharegpt-output-len``), so output lengths stay
fixed and checked (docs/bench.md). The order is envforge's own (``seed``), not vLLM's shuffle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError

__all__ = ["DATASETS", "KEYS", "Prompt", "sharegpt_prompts"]

#: The dataset names (``[verify.smoke] dataset``, ``--dataset``): ``prompts`` is a prompt file
#: (``envforge.bench.config.load_prompts``), the others are generated or replayed
#: (:mod:`envforge.bench.workload`).
DATASETS = ("prompts", "random", "shared-prefix", "trace")
#: Each dataset's own settings (recipe keys of ``[verify.smoke]`` and, with ``--``, flags).
KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("prompts",),
    "random": ("random-input-len", "random-output-len", "random-range-ratio"),
    "shared-prefix": ("gsp-num-groups", "gsp-prompts-per-group", "gsp-system-prompt-len", "gsp-question-len",
                      "gsp-output-len"),
    "trace": ("trace", "trace-time-scale"),
}


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: ``id`` is its 0-based index in its set (a prompt file's line, a generated
    dataset's position). ``output_len``: the output tokens this request asks for, exactly (None:
    ``max-new-tokens``, the same for every request); ``input_len``: its input tokens by the
    tokenizer's count (None: not counted); ``at_s``: its recorded arrival in seconds from the
    trace's start (None: not a trace)."""

    id: int
    text: str
    output_len: int | None = None
    input_len: int | None = None
    at_s: float | None = None


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
