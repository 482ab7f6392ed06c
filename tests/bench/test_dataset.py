"""ShareGPT-format prompt files (vLLM's sharegpt dataset), read offline, with exact messages."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from envforge.bench.config import load_prompts
from envforge.bench.dataset import sharegpt_prompts
from envforge.core.errors import InputError

SHAREGPT = Path(__file__).parents[1] / "data" / "bench" / "sharegpt_small.json"


def test_sharegpt_file_gives_first_turns_of_two_turn_entries_once() -> None:
    prompts, digest = load_prompts(SHAREGPT)
    assert [p.text for p in prompts] == ["Explain what a KV cache stores during decoding.",
                                         "Name two ways to batch requests on a GPU server.",
                                         "Why does speculative decoding need a drafter?"]
    assert [p.id for p in prompts] == [0, 1, 2]
    assert digest == "sha256:" + hashlib.sha256(SHAREGPT.read_bytes()).hexdigest()


@pytest.mark.parametrize(("data", "message"), [
    ({"conversations": []}, 'a ShareGPT file is a JSON array of {"conversations": [...]} entries'),
    ([{"conversations": "hi"}], '[0].conversations: expected an array of {"from", "value"} turns'),
    ([1], '[0].conversations: expected an array of {"from", "value"} turns'),
    ([{"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}],
     "[0].conversations[0].value: expected the prompt's non-empty text"),
    ([{"conversations": [{"from": "human", "value": "only one"}]}],
     "no ShareGPT entry has two conversation turns (the prompt and a reply)"),
])
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
