"""Prompts, and prompt datasets in other tools' formats read offline: a ShareGPT-format JSON file.

:class:`Prompt` is one request's prompt: its text and, for the datasets that give each request its
own lengths (random, shared prefix, trace: :mod:`envforge.bench.workload`), its output and input
tokens and its recorded arrival.

ShareGPT (what ``vllm bench serve --dataset-name sharegpt`` reads, ``vllm/benchmarks/datasets/
sharegpt.py``, ``ShareGPTDataset``): a JSON array of entries ``{"conversations": [{"from": "human",
"value": "..."}, {"from": "gpt", "value": "..."}, ...], ...}``. As vLLM does, entries with fewer than
two turns are left out and the prompt is the first turn's ``value``, the reply the second's. With
exact output lengths every request asks for ``max-new-tokens`` (vLLM's ``--sharegpt-output-len``),
so output lengths stay fixed and checked (docs/bench.md). With natural ones each request asks for
its reply's length in the model's tokens, and the pairs vLLM leaves out are left out
(:func:`reply_lengths`). The order is envforge's own (``seed``), not vLLM's shuffle.

Multi-turn (``turns`` above 1): an entry's later user turns (the third ``value``, the fifth, ...:
ShareGPT alternates the user's and the model's turns) follow its first, each sent with the
conversation so far (:func:`envforge.bench.load.run_conversations`), as SGLang's ``bench_serving.py``
(0.5.9) sends a conversation's questions; the model's recorded replies are not sent, its own are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError

__all__ = ["DATASETS", "KEYS", "Prompt", "reply_lengths", "sharegpt_prompts", "sharegpt_turns"]

#: The dataset names (``[verify.smoke] dataset``, ``--dataset``): ``prompts`` is a prompt file
#: (``envforge.bench.config.load_prompts``), the others are generated or replayed
#: (:mod:`envforge.bench.workload`).
DATASETS = ("prompts", "random", "shared-prefix", "trace")
#: Each dataset's own settings (recipe keys of ``[verify.smoke]`` and, with ``--``, flags).
KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("prompts",),
    "random": ("random-input-len", "random-output-len", "random-range-ratio"),
    "shared-prefix": (
        "gsp-num-groups",
        "gsp-prompts-per-group",
        "gsp-system-prompt-len",
        "gsp-question-len",
        "gsp-output-len",
    ),
    "trace": ("trace", "trace-time-scale"),
}


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: ``id`` is its 0-based index in its set (a prompt file's line, a generated
    dataset's position). ``output_len``: the output tokens this request asks for, exactly (None:
    ``max-new-tokens``, the same for every request); ``input_len``: its input tokens by the
    tokenizer's count (None: not counted); ``at_s``: its recorded arrival in seconds from the
    trace's start (None: not a trace); ``reply``: a ShareGPT entry's second turn (None: none);
    ``turns``: a ShareGPT entry's later user turns, sent after ``text`` in a multi-turn run."""

    id: int
    text: str
    output_len: int | None = None
    input_len: int | None = None
    at_s: float | None = None
    reply: str | None = None
    turns: tuple[str, ...] = ()


def sharegpt_turns(data: Sequence[Any], path: Path) -> list[tuple[str, ...]]:
    """Each entry's later user turns (the third turn's ``value``, the fifth, ...; those that are
    non-empty text, up to the first that is not), for the entries :func:`sharegpt_prompts` keeps,
    in the same order: call it after that function accepted ``data``."""
    out = []
    for entry in data:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, Sequence) or isinstance(turns, str) or len(turns) < 2:
            continue
        later = []
        for turn in turns[2::2]:
            value = turn.get("value") if isinstance(turn, dict) else None
            if not isinstance(value, str) or not value:
                break
            later.append(value)
        out.append(tuple(later))
    return out


def sharegpt_prompts(data: Any, path: Path) -> list[tuple[str, str | None]]:
    """The (prompt, reply) pairs of a parsed ShareGPT-format file ``data`` read from ``path`` (for
    messages); the reply is the second turn's ``value``, None when it is not a string.

    :raises InputError: not an array of objects, ``conversations`` not an array of objects with a
        string ``value``, an empty first turn, or no entry with two turns; the message names the
        entry (``[3].conversations[0].value``).
    """
    if not isinstance(data, list):
        raise InputError(
            f'{path}: a ShareGPT file is a JSON array of {{"conversations": [...]}} entries',
            hint='or give a JSON-lines file of {"prompt": "..."} objects',
        )
    out = []
    for i, entry in enumerate(data):
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(turns, Sequence) or isinstance(turns, str):
            if isinstance(entry, dict) and "conversations" not in entry:
                continue  # vLLM keeps only entries with conversations
            raise InputError(f'{path}: [{i}].conversations: expected an array of {{"from", "value"}} turns')
        if len(turns) < 2:
            continue  # vLLM: at least two conversation turns
        first = turns[0]
        value = first.get("value") if isinstance(first, dict) else None
        if not isinstance(value, str) or not value:
            raise InputError(f"{path}: [{i}].conversations[0].value: expected the prompt's non-empty text")
        second = turns[1]
        reply = second.get("value") if isinstance(second, dict) else None
        out.append((value, reply if isinstance(reply, str) else None))
    if not out:
        raise InputError(f"{path}: no ShareGPT entry has two conversation turns (the prompt and a reply)")
    return out


#: vLLM's ``is_valid_sequence`` defaults (``vllm/benchmarks/datasets/datasets.py``, 0.32.0): a
#: ShareGPT pair is left out when its prompt or reply is under 4 tokens, its prompt over 1,024, or
#: both together over 2,048.
MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048


def reply_lengths(prompts: Sequence[Prompt], count: Callable[[str], int]) -> tuple[tuple[Prompt, ...], int]:
    """``prompts`` with the output tokens each asks for set to its reply's length, as
    ``vllm bench serve --dataset-name sharegpt`` sets them without ``--sharegpt-output-len``
    (``ShareGPTDataset.sample``: ``len(tokenizer(completion).input_ids)``, special tokens included),
    ``input_len`` to its prompt's; the pairs vLLM leaves out (:data:`MIN_LEN`, :data:`MAX_PROMPT_LEN`,
    :data:`MAX_TOTAL_LEN`) and prompts without a reply are left out, the rest renumbered in order.

    :param count: tokens of a text by the length rule (:meth:`envforge.bench.tokenizer.LocalTokenizer.count`).
    :returns: the prompts kept and how many were left out.
    :raises InputError: none is kept.
    """
    kept: list[Prompt] = []
    for p in prompts:
        if p.reply is None:
            continue
        n_in, n_out = count(p.text), count(p.reply)
        if n_in < MIN_LEN or n_out < MIN_LEN or n_in > MAX_PROMPT_LEN or n_in + n_out > MAX_TOTAL_LEN:
            continue
        kept.append(Prompt(len(kept), p.text, output_len=n_out, input_len=n_in, reply=p.reply))
    if not kept:
        raise InputError(
            f"no prompt of the {len(prompts)} has a reply vLLM keeps (prompt and reply >= {MIN_LEN} "
            f"tokens, prompt <= {MAX_PROMPT_LEN}, both <= {MAX_TOTAL_LEN})",
            hint="give a ShareGPT file with longer replies, or fixed lengths with --max-new-tokens N",
        )
    return tuple(kept), len(prompts) - len(kept)
