"""The model's tokenizer, read offline from a local ``tokenizer.json``: how generated prompts get
their length in tokens.

The random, shared-prefix and trace datasets (:mod:`envforge.bench.workload`) ask for prompts of a
given number of input tokens, which only the model's tokenizer can say. envforge reads the
``tokenizer.json`` of a local directory (the checkpoint directory the server loads, or any
directory holding the same file) with the ``tokenizers`` library: the Rust tokenizer behind every
Hugging Face "fast" tokenizer, the file a vLLM or SGLang server's fast tokenizer loads too. Nothing
is downloaded and no model code runs (a model that ships only custom tokenizer code and no
``tokenizer.json`` is refused, exit 2).

**The length rule** (docs/bench.md, "Datasets"): a prompt's input length is
``len(tokenizer.encode(text, add_special_tokens=True))``: the tokens the file's tokenizer makes of
the prompt text, the special tokens its post-processor adds (a BOS) included, no chat template.
This is what a server that tokenizes with the same file counts for ``/v1/completions`` and SGLang's
``/generate``; a server with another tokenizer revision or a chat template counts otherwise.

Text of a wanted length is made as vLLM makes it (``vllm/benchmarks/datasets/utils.py``,
``gen_prompt_decode_to_target_len``): token ids are decoded to text and the text encoded again, and
since some ids do not survive the round trip (GPT-2: ``[6880, 6881]`` -> ``'Ġcalls', 'here'`` ->
three tokens), the sequence is cut or extended with more drawn ids and tried again, at most 10
times. Whatever comes out is counted again, so a recorded length is always the real count. Unlike
vLLM, ids are drawn only from tokens that survive the round trip alone (decoded, they are text
without U+FFFD that encodes back to the same one id): a byte-level vocabulary's pieces of a UTF-8
sequence decode to U+FFFD, which encodes to other tokens, so drawing them would miss most lengths.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envforge.core.errors import InputError
from envforge.core.textfile import read_bytes

__all__ = ["ROUND_TRIPS", "TOKENIZER_LIMIT", "LocalTokenizer", "load_tokenizer"]

#: The largest tokenizer.json read (256 MiB; large vocabularies' files are 10-40 MB).
TOKENIZER_LIMIT = 256 << 20
#: Decode / re-encode rounds before a text is taken as it is (vLLM's ``max_retry``).
ROUND_TRIPS = 10


@dataclass(frozen=True, slots=True, eq=False)
class LocalTokenizer:
    """A ``tokenizer.json`` read from ``path``.

    ``digest``: ``sha256:<hex>`` of the file's bytes (the report records it). ``specials``: the
    tokens its post-processor adds around one text (1 for a BOS). ``allowed``: the ids generated
    text is drawn from, ascending: the vocabulary less its added and special tokens and less the
    tokens that do not survive a decode / re-encode alone (module docstring)."""

    path: Path
    digest: str
    specials: int
    allowed: np.ndarray = field(repr=False)
    _tok: Any = field(repr=False)

    def count(self, text: str) -> int:
        """Input tokens of ``text`` by the length rule (special tokens included)."""
        return len(self._tok.encode(text, add_special_tokens=True).ids)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text`` without special tokens."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens skipped)."""
        return str(self._tok.decode([int(i) for i in ids], skip_special_tokens=True))

    def draw(self, rng: np.random.Generator, n: int) -> list[int]:
        """``n`` ids drawn uniformly from :attr:`allowed` with ``rng``."""
        return [int(i) for i in self.allowed[rng.integers(0, len(self.allowed), size=n)]] if n > 0 else []

    def text_of(self, ids: Sequence[int], rng: np.random.Generator) -> tuple[str, int]:
        """Text that encodes to ``len(ids)`` tokens (without special tokens), made from ``ids`` by
        vLLM's decode / re-encode rounds (cut when longer, extended with ids drawn from ``rng``
        when shorter; :data:`ROUND_TRIPS` at most).

            :returns: the text and its tokens without special tokens (``len(ids)`` unless the rounds ran out).
        """
        target = len(ids)
        seq = [int(i) for i in ids]
        text = ""
        for round_ in range(ROUND_TRIPS + 1):
            text = self.decode(seq)
            seq = self.encode(text)
            if len(seq) == target or round_ == ROUND_TRIPS:
                break
            seq = seq[:target] if len(seq) > target else seq + self.draw(rng, target - len(seq))
        return text, len(seq)


def load_tokenizer(path: Path) -> LocalTokenizer:
    """Read ``path``: a directory holding ``tokenizer.json``, or such a file.

    :raises InputError: no such file, not a ``tokenizer.json`` the ``tokenizers`` library reads,
        or a vocabulary with no ordinary token.
    :raises ModuleNotFoundError: ``tokenizers`` is not installed (the ``bench`` extra; the CLI
        names the install line).
    """
    # lazy: the bench extra's tokenizers is needed only by the generated datasets
    from tokenizers import Tokenizer

    file = path / "tokenizer.json" if path.is_dir() else path
    hint = (
        "give a directory with the model's tokenizer.json (the checkpoint directory the server loads); "
        "envforge reads it offline and never downloads one"
    )
    if path.is_dir() and not file.exists():
        raise InputError(f"tokenizer: {path} has no tokenizer.json", hint=hint)
    raw = read_bytes(file, what="tokenizer", limit=TOKENIZER_LIMIT, hint=hint)
    try:
        tok = Tokenizer.from_buffer(raw)
    except Exception as exc:  # the Rust library raises a plain Exception for every parse error
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(
            f"tokenizer {file}: not a tokenizer.json the tokenizers library reads: {first}", hint=hint
        ) from None
    added = set(tok.get_added_tokens_decoder())
    ids = sorted(set(tok.get_vocab(with_added_tokens=False).values()) - added)
    texts = tok.decode_batch([[i] for i in ids], skip_special_tokens=True)
    back = tok.encode_batch(texts, add_special_tokens=False)
    allowed = np.array(
        [i for i, t, e in zip(ids, texts, back) if t and "\ufffd" not in t and e.ids == [i]], dtype=np.int64
    )
    if not len(allowed):
        raise InputError(f"tokenizer {file}: no token of the vocabulary decodes to text that encodes back to it")
    return LocalTokenizer(
        file, "sha256:" + hashlib.sha256(raw).hexdigest(), int(tok.num_special_tokens_to_add(False)), allowed, tok
    )
