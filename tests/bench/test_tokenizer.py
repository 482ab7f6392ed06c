"""The model's tokenizer read offline from tokenizer.json: the length rule (special tokens counted),
vLLM's decode / re-encode rounds, and what is refused. Real tokenizers: the tiny test model's
word-level one and a byte-level BPE trained here (GPT-2's pre-tokenizer, a BOS post-processor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.bench_support import make_bpe_tokenizer, make_tiny_model

from envforge.bench.tokenizer import load_tokenizer
from envforge.core.errors import InputError


def test_a_word_level_tokenizer_counts_words_and_round_trips(tmp_path: Path) -> None:
    tok = load_tokenizer(make_tiny_model(tmp_path / "m"))
    assert tok.path == tmp_path / "m" / "tokenizer.json" and tok.digest.startswith("sha256:")
    assert tok.specials == 0 and 0 not in tok.allowed and 2 not in tok.allowed  # <unk>, </s> are never drawn
    rng = np.random.default_rng(0)
    ids = tok.draw(rng, 12)
    text, n = tok.text_of(ids, rng)
    assert n == 12 == tok.count(text) and len(text.split()) == 12


def test_a_byte_level_bpe_counts_its_bos_and_meets_lengths_by_rounds(tmp_path: Path) -> None:
    """A byte-level vocabulary's pieces of UTF-8 sequences decode to U+FFFD alone: they are never
    drawn. Drawn ids may still merge when decoded together: the rounds cut or extend until the
    text is the wanted length, and count() adds the BOS."""
    tok = load_tokenizer(make_bpe_tokenizer(tmp_path / "bpe") / "tokenizer.json")
    assert tok.specials == 1
    vocab = 400 - 2  # less <s> and </s>
    pieces = [i for i in range(2, 400) if "\ufffd" in tok.decode([i]) or tok.encode(tok.decode([i])) != [i]]
    assert pieces and len(tok.allowed) == vocab - len(pieces) and not set(pieces) & set(tok.allowed.tolist())
    rng = np.random.default_rng(1)
    merged = 0
    for n in [30] * 20 + [3] * 20:
        ids = tok.draw(rng, n)
        merged += len(tok.encode(tok.decode(ids))) != n
        text, got = tok.text_of(ids, rng)
        assert tok.count(text) == got + 1 == len(tok.encode(text)) + 1 and got == n
    assert merged  # the rounds had something to do


def test_bad_tokenizers_are_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as exc:
        load_tokenizer(tmp_path / "empty")
    assert exc.value.message == f"tokenizer: {tmp_path / 'empty'} has no tokenizer.json"
    assert "never downloads one" in (exc.value.hint or "")
    (tmp_path / "bad.json").write_text('{"version": "1.0"}')
    with pytest.raises(InputError) as exc:
        load_tokenizer(tmp_path / "bad.json")
    assert exc.value.message.startswith(
        f"tokenizer {tmp_path / 'bad.json'}: not a tokenizer.json the tokenizers library reads: "
    )
    with pytest.raises(InputError, match="does not exist"):
        load_tokenizer(tmp_path / "missing.json")
