"""Generated and replayed datasets, offline: random, shared prefix, and a recorded trace.

Each gives every request its own prompt, its own output length (asked for with ``ignore_eos`` and
checked to be exactly that many tokens) and an input length counted with the model's tokenizer
(:mod:`envforge.bench.tokenizer`: the length rule). Modelled on the real tools:

``random`` (vLLM's ``--dataset-name random``, ``vllm/benchmarks/datasets/random.py``,
``RandomDataset``): input lengths uniform in ``[floor(L' x (1 - r)), ceil(L' x (1 + r))]`` where
``L'`` is ``random-input-len`` less the tokenizer's special tokens, output lengths uniform in
``[max(floor(O x (1 - r)), 1), ceil(O x (1 + r))]`` (``--random-input-len``,
``--random-output-len``, ``--random-range-ratio``, ``r`` in ``[0, 1)``); the prompt is ids drawn
uniformly from the vocabulary (special tokens left out), decoded and re-encoded to its length.

``shared-prefix`` (SGLang's ``--dataset-name generated-shared-prefix``,
``python/sglang/benchmark/datasets/generated_shared_prefix.py``,
``sample_generated_shared_prefix_requests``): ``gsp-num-groups`` system prompts of
``gsp-system-prompt-len`` tokens, each followed by ``gsp-prompts-per-group`` questions of
``gsp-question-len`` tokens, joined as SGLang joins them (``f"{system}\\n\\n{question}"``), every
request asking for ``gsp-output-len`` tokens, the requests shuffled; so a prefix-caching server
computes each group's system prompt once and the cache's effect can be measured.

``trace`` (Mooncake's trace format, :mod:`envforge.bench.trace`; SGLang's ``--dataset-name
mooncake``, ``python/sglang/benchmark/datasets/mooncake.py``): each record's output length and
arrival as recorded, its prompt ``input_length`` tokens made of one block of 512 drawn ids per
``hash_ids`` entry (the same id, the same block: the prefixes the recording shared are shared
again) and drawn ids past its blocks. SGLang instead writes each hash id as ``"{id}"`` and 128
``"hi"``s and does not use ``input_length``. Replayed open loop at the recorded times, scaled by
``trace-time-scale`` (SGLang's ``--mooncake-slowdown-factor``: 2 is half as fast).

**Positions and passes.** A dataset is an endless sequence of requests: position ``i`` depends only
on the seed and ``i``, so every server gets the same requests in the same order. Shared prefix and
trace repeat their set in passes (``i // set size``); every pass draws new text (new system prompts,
new blocks), so no pass hits the cache another filled, while inside a pass the sharing is as
designed. No two requests a run sends share a text (docs/bench.md, "Prompts and caches"): a prompt
equal to one already sent is drawn again (random: all of it; shared prefix: the question; trace:
its last token), at most :data:`ATTEMPTS` times.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from envforge.bench.dataset import DATASETS, KEYS, Prompt
from envforge.bench.tokenizer import LocalTokenizer, load_tokenizer
from envforge.bench.trace import BLOCK_TOKENS, TraceRecord, read_trace
from envforge.core.errors import InputError
from envforge.core.limits import MAX_DATASET_TOKENS, MAX_REQUEST_TOKENS, MAX_TRACE_SPAN_S

__all__ = [
    "ATTEMPTS",
    "DATASETS",
    "KEYS",
    "RandomWorkload",
    "SharedPrefixWorkload",
    "TraceWorkload",
    "Workload",
    "build_workload",
    "find_tokenizer",
]

#: Draws of one position before giving up on a text distinct from every one sent before.
ATTEMPTS = 100
# Streams of the seeded generators: every draw is numpy.random.default_rng([seed, stream, ...]).
_RANDOM, _ORDER, _SYSTEM, _QUESTION, _BLOCK, _TAIL = range(6)


@dataclass(frozen=True, slots=True)
class _Made:
    """What position ``i`` became: which attempt, its drawn input tokens, counted ones, output tokens."""

    attempt: int
    target: int
    input_len: int
    output_len: int


@dataclass(frozen=True, eq=False, kw_only=True)
class Workload:
    """A dataset of generated requests (subclasses: one per dataset), drawn by position."""

    tokenizer: LocalTokenizer
    _made: dict[int, dict[int, _Made]] = field(default_factory=dict, repr=False)
    _sent: dict[int, set[bytes]] = field(default_factory=dict, repr=False)

    name = ""

    @property
    def size(self) -> int | None:
        """Requests in one pass over a recorded set (a trace's records); None when unbounded."""
        return None

    def items(self, start: int, count: int, seed: int) -> list[Prompt]:
        """The requests at positions ``start .. start + count - 1`` with ``seed``, each with its text,
        output length, input length and (trace) arrival.

        :raises InputError: no text distinct from every one drawn before in :data:`ATTEMPTS` draws
            (prompts too short for the tokenizer's vocabulary).
        """
        made = self._made.setdefault(seed, {})
        sent = self._sent.setdefault(seed, set())
        out = []
        for i in range(start, start + count):
            if i in made:
                p, _ = self._make(i, seed, made[i].attempt)
                out.append(p)
                continue
            for attempt in range(ATTEMPTS):
                p, target = self._make(i, seed, attempt)
                key = hashlib.sha256(p.text.encode("utf-8", "surrogatepass")).digest()
                if key not in sent:
                    break
            else:
                raise InputError(
                    f"dataset '{self.name}': request {i} drew a prompt already sent in each of "
                    f"{ATTEMPTS} tries: prompts this short repeat over this vocabulary",
                    hint="ask for longer prompts, or give the tokenizer of the model served",
                )
            sent.add(key)
            made[i] = _Made(attempt, target, p.input_len or 0, p.output_len or 0)
            out.append(p)
        return out

    def _make(self, i: int, seed: int, attempt: int) -> tuple[Prompt, int]:
        """Position ``i``'s request and its drawn input tokens (specials included)."""
        raise NotImplementedError

    def parameters(self) -> dict[str, Any]:
        """The dataset's settings, JSON-able, in a fixed order (the report's ``config.dataset``)."""
        raise NotImplementedError

    def lengths(self, natural: bool = False) -> str:
        """How this dataset's lengths are set and which are exact (the report's ``method.dataset.lengths``);
        ``natural``: output lengths are each request's max_tokens, not forced (``--output-lengths natural``)."""
        asked = (
            "asked for as each request's max_tokens (natural lengths: no ignore_eos; the actual lengths are reported)"
            if natural
            else "asked for (with ignore_eos where the server takes it) and checked exactly"
        )
        return (
            f"output tokens per request as drawn, {asked}; input tokens "
            f"counted with {self.tokenizer.path} (special tokens included, no chat template): exact for a "
            f"server that tokenizes with the same file; drawn lengths are met by decode / re-encode rounds "
            f"(vLLM's), and off_target counts the prompts that came out otherwise"
        )

    def as_dict(self) -> dict[str, Any]:
        """``config.dataset``: the name, the settings and the tokenizer's digest."""
        return {"name": self.name, **self.parameters(), "tokenizer": self.tokenizer.digest}

    def describe(self, seed: int, natural: bool = False) -> dict[str, Any]:
        """``method.dataset``: the name, settings, seed, tokenizer, length rule, and the input and
        output tokens of every request drawn so far with ``seed`` (min, mean, max), and how many
        prompts' input tokens differ from their drawn length (``off_target``)."""
        made = list(self._made.get(seed, {}).values())

        def spread(xs: list[int]) -> dict[str, float] | None:
            return {"min": min(xs), "mean": round(statistics.fmean(xs), 2), "max": max(xs)} if xs else None

        return {
            "name": self.name,
            "parameters": self.parameters(),
            "seed": seed,
            "tokenizer": {
                "path": str(self.tokenizer.path),
                "digest": self.tokenizer.digest,
                "special_tokens": self.tokenizer.specials,
            },
            "lengths": self.lengths(natural),
            "prompts": len(made),
            "input_tokens": spread([m.input_len for m in made]),
            "output_tokens": spread([m.output_len for m in made]),
            "off_target": sum(m.input_len != m.target for m in made),
        }


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(list(key))


@dataclass(frozen=True, eq=False, kw_only=True)
class RandomWorkload(Workload):
    """vLLM's random dataset (module docstring): ``input_len`` and ``output_len`` tokens (means),
    ``range_ratio`` in ``[0, 1)``."""

    input_len: int = 1024
    output_len: int = 128
    range_ratio: float = 0.0
    name = "random"

    def bounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The drawn ranges, vLLM's: ``((input low, input high), (output low, output high))``, input
        tokens without the tokenizer's special tokens, both ends included."""
        real = max(0, self.input_len - self.tokenizer.specials)
        r = self.range_ratio
        return (
            (math.floor(real * (1 - r)), math.ceil(real * (1 + r))),
            (max(math.floor(self.output_len * (1 - r)), 1), max(math.ceil(self.output_len * (1 + r)), 1)),
        )

    def _make(self, i: int, seed: int, attempt: int) -> tuple[Prompt, int]:
        (lo, hi), (olo, ohi) = self.bounds()
        rng = _rng(seed, _RANDOM, i, attempt)
        n_in, n_out = int(rng.integers(lo, hi + 1)), int(rng.integers(olo, ohi + 1))
        tok = self.tokenizer
        text, _ = tok.text_of(tok.draw(rng, n_in), rng)
        return Prompt(i, text, output_len=n_out, input_len=tok.count(text)), n_in + tok.specials

    def parameters(self) -> dict[str, Any]:
        return {
            "random-input-len": self.input_len,
            "random-output-len": self.output_len,
            "random-range-ratio": self.range_ratio,
        }


@lru_cache(maxsize=8)
def _order(seed: int, pass_: int, n: int) -> tuple[int, ...]:
    return tuple(int(x) for x in _rng(seed, _ORDER, pass_).permutation(n))


@dataclass(frozen=True, eq=False, kw_only=True)
class SharedPrefixWorkload(Workload):
    """SGLang's generated shared prefix (module docstring); lengths in tokens."""

    num_groups: int = 64
    prompts_per_group: int = 16
    system_prompt_len: int = 2048
    question_len: int = 128
    output_len: int = 256
    _systems: dict[tuple[int, int, int], str] = field(default_factory=dict, repr=False)
    name = "shared-prefix"

    @property
    def per_pass(self) -> int:
        return self.num_groups * self.prompts_per_group

    def _system(self, seed: int, pass_: int, group: int) -> str:
        key = (seed, pass_, group)
        if key not in self._systems:
            if len(self._systems) >= 4 * self.num_groups:
                self._systems.clear()
            rng = _rng(seed, _SYSTEM, pass_, group)
            self._systems[key] = self.tokenizer.text_of(self.tokenizer.draw(rng, self.system_prompt_len), rng)[0]
        return self._systems[key]

    def _make(self, i: int, seed: int, attempt: int) -> tuple[Prompt, int]:
        pass_, j = divmod(i, self.per_pass)
        group, q = divmod(_order(seed, pass_, self.per_pass)[j], self.prompts_per_group)
        tok = self.tokenizer
        rng = _rng(seed, _QUESTION, pass_, group, q, attempt)
        question, _ = tok.text_of(tok.draw(rng, self.question_len), rng)
        text = f"{self._system(seed, pass_, group)}\n\n{question}"
        return (
            Prompt(i, text, output_len=self.output_len, input_len=tok.count(text)),
            self.system_prompt_len + self.question_len + tok.specials,
        )

    def parameters(self) -> dict[str, Any]:
        return {
            "gsp-num-groups": self.num_groups,
            "gsp-prompts-per-group": self.prompts_per_group,
            "gsp-system-prompt-len": self.system_prompt_len,
            "gsp-question-len": self.question_len,
            "gsp-output-len": self.output_len,
        }

    def lengths(self, natural: bool = False) -> str:
        return (
            super().lengths(natural) + "; the drawn length is system prompt + question + special tokens, the "
            "blank line between them (SGLang's) adds its own tokens"
        )


@dataclass(frozen=True, eq=False, kw_only=True)
class TraceWorkload(Workload):
    """A Mooncake-format trace replayed (module docstring): ``records`` in file order, ``digest``
    of the file, arrival times multiplied by ``time_scale``."""

    path: Path
    records: tuple[TraceRecord, ...]
    digest: str
    time_scale: float = 1.0
    name = "trace"

    @property
    def size(self) -> int:
        return len(self.records)

    def _make(self, i: int, seed: int, attempt: int) -> tuple[Prompt, int]:
        pass_, r = divmod(i, len(self.records))
        rec = self.records[r]
        tok = self.tokenizer
        need = rec.input_length - tok.specials
        ids: list[int] = []
        for h in rec.hash_ids:
            if len(ids) >= need:
                break
            ids += tok.draw(_rng(seed, _BLOCK, pass_, h), BLOCK_TOKENS)
        rng = _rng(seed, _TAIL, pass_, r, attempt)
        ids = ids[:need] + tok.draw(rng, need - len(ids))
        if attempt:
            ids[-1] = tok.draw(rng, 1)[0]
        text, _ = tok.text_of(ids, rng)
        return (
            Prompt(i, text, output_len=rec.output_length, input_len=tok.count(text), at_s=rec.timestamp_ms / 1000.0),
            rec.input_length,
        )

    def schedule(self, items: list[Prompt]) -> tuple[float, ...]:
        """Send times of ``items`` (seconds from the first one's): the recorded gaps x ``time_scale``."""
        t0 = (items[0].at_s or 0.0) if items else 0.0
        return tuple(((p.at_s or 0.0) - t0) * self.time_scale for p in items)

    def parameters(self) -> dict[str, Any]:
        return {
            "trace": str(self.path),
            "trace-digest": self.digest,
            "trace-records": len(self.records),
            "trace-time-scale": self.time_scale,
        }

    def lengths(self, natural: bool = False) -> str:
        return (
            super().lengths(natural).replace("as drawn", "as recorded") + f"; prompts are made of one block of "
            f"{BLOCK_TOKENS} drawn tokens per hash_ids entry (shared ids, shared text), so the recorded "
            "prefix sharing is replayed as text"
        )


def _number(settings: Mapping[str, Any], key: str, default: Any, label: Callable[[str], str]) -> Any:
    v = settings.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise InputError(f"{label(key)}: must be a number, got {v!r}")
    return v


def _count(
    settings: Mapping[str, Any], key: str, default: int, label: Callable[[str], str], most: int = MAX_REQUEST_TOKENS
) -> int:
    v = _number(settings, key, default, label)
    if not isinstance(v, int) or v < 1:
        raise InputError(
            f"{label(key)}: must be a whole number >= 1, got {v!r}",
            hint="lengths and counts of 0 send nothing to measure",
        )
    if v > most:
        raise InputError(
            f"{label(key)}: {v:,} is more than {most:,}, the most envforge generates",
            hint="a request of more than 10M tokens exceeds every model's context; check the value",
        )
    return v


def find_tokenizer(settings: Mapping[str, Any], base: Path, model: str) -> LocalTokenizer | None:
    """The tokenizer ``settings`` names (``tokenizer``: a directory, relative to ``base``), else the
    model's directory when it holds a ``tokenizer.json``; None when neither.

    :raises InputError: a named directory without a readable ``tokenizer.json`` (:func:`load_tokenizer`).
    """
    if settings.get("tokenizer"):
        path = Path(settings["tokenizer"])
        return load_tokenizer(path if path.is_absolute() else base / path)
    if (Path(model) / "tokenizer.json").is_file():
        return load_tokenizer(Path(model))
    return None


def _tokenizer_dir(
    settings: Mapping[str, Any], base: Path, model: str, name: str, label: Callable[[str], str]
) -> LocalTokenizer:
    found = find_tokenizer(settings, base, model)
    if found is not None:
        return found
    raise InputError(
        f"dataset '{name}' counts input tokens with the model's tokenizer, and model '{model}' is not "
        f"a local directory with a tokenizer.json",
        hint=f"give {label('tokenizer')} DIR: the checkpoint directory the server loads (envforge reads "
        "its tokenizer.json offline and never downloads one)",
    )


def build_workload(
    settings: Mapping[str, Any], *, base: Path, model: str, label: Callable[[str], str]
) -> Workload | None:
    """The dataset ``settings`` name (recipe keys: ``dataset``, ``tokenizer`` and :data:`KEYS`),
    read and checked; None for ``prompts`` (a prompt file, read by the caller).

    :param base: the directory relative ``tokenizer`` and ``trace`` paths are taken from (the recipe's).
    :param model: the served model; its directory is the tokenizer when ``tokenizer`` is not given.
    :param label: how a message names a key (``"recipe.toml: verify.smoke.random-input-len"``, ``"--trace"``).
    :raises InputError: an unknown dataset, a key of another dataset, a value out of range (a
        range ratio outside ``[0, 1)``, a length or count of 0, a time scale not > 0), no
        tokenizer, a bad trace (naming its line), or lengths the tokenizer's special tokens use up.
    """
    name = settings.get("dataset", "prompts")
    if name not in DATASETS:
        raise InputError(f"{label('dataset')}: unknown dataset '{name}'", hint=f"one of {', '.join(DATASETS)}")
    for other, keys in KEYS.items():
        for key in keys:
            if other != name and key in settings:
                raise InputError(
                    f"{label(key)}: a setting of dataset '{other}', but the dataset is '{name}'",
                    hint=f"drop it, or use {label('dataset')} {other}",
                )
    if name == "prompts":
        return None
    tok = _tokenizer_dir(settings, base, model, name, label)
    if name == "random":
        ratio = _number(settings, "random-range-ratio", 0.0, label)
        if not 0 <= ratio < 1:
            raise InputError(
                f"{label('random-range-ratio')}: must be in [0, 1), got {ratio}",
                hint="0 gives every request the same lengths; 0.5 draws them from half to 1.5 times",
            )
        w = RandomWorkload(
            tokenizer=tok,
            input_len=_count(settings, "random-input-len", 1024, label),
            output_len=_count(settings, "random-output-len", 128, label),
            range_ratio=float(ratio),
        )
        low = w.bounds()[0][0]
        if low < 1:
            raise InputError(
                f"{label('random-input-len')}: {w.input_len} with range ratio {w.range_ratio:g} allows "
                f"prompts of {low} tokens besides the tokenizer's {tok.specials} special token(s)",
                hint="raise the input length or lower the range ratio (vLLM refuses the same)",
            )
        return w
    if name == "shared-prefix":
        gsp = SharedPrefixWorkload(
            tokenizer=tok,
            num_groups=_count(settings, "gsp-num-groups", 64, label),
            prompts_per_group=_count(settings, "gsp-prompts-per-group", 16, label),
            system_prompt_len=_count(settings, "gsp-system-prompt-len", 2048, label),
            question_len=_count(settings, "gsp-question-len", 128, label),
            output_len=_count(settings, "gsp-output-len", 256, label),
        )
        if gsp.num_groups * gsp.system_prompt_len > MAX_DATASET_TOKENS:
            raise InputError(
                f"{label('gsp-num-groups')} {gsp.num_groups:,} x {label('gsp-system-prompt-len')} "
                f"{gsp.system_prompt_len:,}: {gsp.num_groups * gsp.system_prompt_len:,} tokens of system "
                f"prompts, more than the {MAX_DATASET_TOKENS:,} envforge keeps",
                hint="fewer groups or shorter system prompts",
            )
        return gsp
    if not settings.get("trace"):
        raise InputError(
            f"dataset 'trace' needs {label('trace')} FILE: a Mooncake-format JSON-lines trace",
            hint='each line {"timestamp": <ms>, "input_length": <tokens>, "output_length": <tokens>}',
        )
    scale = _number(settings, "trace-time-scale", 1.0, label)
    if not scale > 0:
        raise InputError(
            f"{label('trace-time-scale')}: must be > 0, got {scale}",
            hint="1 replays at the recorded times, 2 twice as slow, 0.5 twice as fast",
        )
    path = Path(settings["trace"])
    path = path if path.is_absolute() else base / path
    records, digest = read_trace(path)
    late = next(
        (r for r in records if (r.timestamp_ms - records[0].timestamp_ms) * scale / 1000 > MAX_TRACE_SPAN_S), None
    )
    if late is not None:
        raise InputError(
            f"{path}:{late.line}: timestamp {late.timestamp_ms:g} ms is more than "
            f"{MAX_TRACE_SPAN_S // 86400} days after the first request's ({records[0].timestamp_ms:g} ms"
            f"{f' x time scale {scale:g}' if scale != 1 else ''}): the replay would wait that long",
            hint="timestamps are milliseconds from the start of the recording; cut the trace or lower "
            "--trace-time-scale",
        )
    for rec in records:
        if rec.input_length <= tok.specials:
            raise InputError(
                f"{path}:{rec.line}: input_length {rec.input_length} leaves no prompt token besides the "
                f"tokenizer's {tok.specials} special token(s)",
                hint="leave the request out of the trace, or use a tokenizer without them",
            )
    return TraceWorkload(tokenizer=tok, path=path, records=records, digest=digest, time_scale=float(scale))
