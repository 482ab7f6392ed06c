"""The engine's own class selection: ``config.architectures`` -> model class -> what its loader loads.

Field case B45: two drafters with identical SpecForge tensors, one naming
``LlamaForCausalLMEagle3`` (SGLang 0.5.9's EAGLE-3 class), one naming ``LlamaForCausalLM`` as
community drafters publish it. SGLang 0.5.9 builds its plain Llama for the latter; vLLM (method
``eagle3``) renames it ``Eagle3LlamaForCausalLM`` and loads it as EAGLE-3 (read in
src/envforge/drafter/architecture.py). Field case B22: a reduced draft vocabulary without ``d2t``.
Real safetensors files, the real CLI, and one remote inspect through huggingface_hub against the
local hub server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.support.hub_server import HubServer, eagle3_config, eagle3_files, eagle3_tensors, running_hub, write_drafter

from envforge.cli import main
from envforge.drafter import inspect_drafter
from envforge.drafter.architecture import architecture_problems, model_classes

SGLANG_ONLY = ["sglang-0.5.9"]
FIX = (
    'set config.json "architectures" to ["LlamaForCausalLMEagle3"] (the name SGLang maps to its EAGLE-3 '
    "loader; vLLM maps it to the same layout)"
)
PLAIN_LLAMA = (
    "LlamaForCausalLM: SGLang 0.5.9 loads it as a plain Llama, not as EAGLE-3: llama.py's "
    "LlamaForCausalLM finds no parameter for 14 of 15 tensors (d2t, fc.weight, midlayer.hidden_norm.weight, "
    "midlayer.input_layernorm.weight, ...) and drops them with a warning"
)
WORKER = "its EAGLE-3 worker then stops: only LlamaForCausalLMEagle3 has hot_token_id (AttributeError)"
NO_D2T = (
    "absent, with draft_vocab_size 512 < vocab_size 4096: draft ids are read as target ids (draft position i "
    "proposes target token i), so drafts propose wrong tokens and acceptance collapses (accept length ≈ 1)"
)
NO_D2T_FIX = (
    "ship the d2t tensor from the training run (target id = i + d2t[i], built with the draft vocabulary); "
    "a d2t rebuilt from another vocabulary maps to other tokens"
)


def inspect_json(d: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["drafter", "inspect", str(d), "--json"])
    return code, json.loads(capsys.readouterr().out)["data"]


def named(config: dict[str, Any], *archs: str) -> dict[str, Any]:
    return {**config, "architectures": list(archs)}


def issues_of(data: dict[str, Any], d: Path) -> list[tuple[str, str, str, str, str, list[str]]]:
    return [
        (i["kind"], i["subject"].removeprefix(f"{d}: "), i["expected"], i["actual"], i["fix"], i["engines"])
        for i in data["issues"]
    ]


def test_llama_named_eagle3_drafter_does_not_load_as_eagle3_in_sglang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = eagle3_config()
    d = write_drafter(tmp_path / "d-base", named(cfg, "LlamaForCausalLM"), eagle3_tensors(cfg))
    code, data = inspect_json(d, capsys)
    assert (code, data["loads"]) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": True})
    assert issues_of(data, d) == [
        (
            "eagle3-architecture",
            "config.architectures",
            "LlamaForCausalLMEagle3",
            PLAIN_LLAMA + "; lm_head.weight F16 [512, 64] fails its [4096, 64] size assertion and stops the server",
            FIX,
            SGLANG_ONLY,
        )
    ]
    assert data["classes"] == {
        "sglang-0.5.9": {
            "looked-up": "LlamaForCausalLM",
            "class": "LlamaForCausalLM",
            "module": "llama.py",
            "eagle3": False,
        },
        "vllm-0.32.0": {
            "looked-up": "Eagle3LlamaForCausalLM",
            "class": "Eagle3LlamaForCausalLM",
            "module": "llama_eagle3.py",
            "eagle3": True,
        },
    }
    assert main(["drafter", "inspect", str(d)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[2] == (
        "  model class built: sglang-0.5.9 LlamaForCausalLM (llama.py), "
        "vllm-0.32.0 Eagle3LlamaForCausalLM (llama_eagle3.py)"
    )
    assert out[-1] == (
        "loads as trained in: sglang-0.5.9 no, vllm-0.32.0 yes (class and tensors; the auxiliary "
        "layers need the target: drafter check --target)"
    )


def test_correct_name_loads_as_eagle3_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    d = write_drafter(tmp_path / "d-eagle3", cfg)
    code, data = inspect_json(d, capsys)
    assert (code, data["loads"], data["issues"]) == (0, {"sglang-0.5.9": True, "vllm-0.32.0": True}, [])
    assert data["classes"]["sglang-0.5.9"] == {
        "looked-up": "LlamaForCausalLMEagle3",
        "class": "LlamaForCausalLMEagle3",
        "module": "llama_eagle3.py",
        "eagle3": True,
    }
    assert data["classes"]["vllm-0.32.0"]["looked-up"] == "LlamaForCausalLMEagle3"  # vLLM keeps a name ending in Eagle3


def test_full_vocabulary_plain_llama_gets_past_loading_and_stops_in_the_worker(tmp_path: Path) -> None:
    cfg = eagle3_config(vocab=512, draft_vocab=512)
    d = write_drafter(tmp_path / "d", named(cfg, "LlamaForCausalLM"), eagle3_tensors(cfg, np.arange(512)))
    [issue] = inspect_drafter(str(d)).issues
    assert (issue.actual, issue.engines) == (f"{PLAIN_LLAMA}; {WORKER}", ("sglang-0.5.9",))


@pytest.mark.parametrize(
    ("archs", "sglang", "vllm"),
    [
        (["LlamaForCausalLM"], "LlamaForCausalLM (llama.py)", "Eagle3LlamaForCausalLM (llama_eagle3.py)"),
        (
            ["LlamaForCausalLMEagle3"],
            "LlamaForCausalLMEagle3 (llama_eagle3.py)",
            "Eagle3LlamaForCausalLM (llama_eagle3.py)",
        ),
        (
            ["Eagle3LlamaForCausalLM"],
            "Eagle3LlamaForCausalLM (not a class envforge knows)",
            "Eagle3LlamaForCausalLM (llama_eagle3.py)",
        ),
        (
            ["Qwen3ForCausalLM"],
            "Qwen3ForCausalLM (not a class envforge knows)",
            "Eagle3Qwen3ForCausalLM (qwen3_eagle3.py)",
        ),
        (
            ["LlamaForCausalLMEagle"],
            "LlamaForCausalLMEagle (llama_eagle.py)",
            "Eagle3LlamaForCausalLMEagle (not a class envforge knows)",
        ),
        (
            ["Foo", "LlamaForCausalLMEagle3"],
            "Foo (not a class envforge knows)",
            "Eagle3LlamaForCausalLM (llama_eagle3.py)",
        ),
        ([], "no model class", "no model class"),
    ],
)
def test_each_engine_selects_by_name(archs: list[str], sglang: str, vllm: str) -> None:
    assert [c.describe() for c in model_classes({"architectures": archs})] == [sglang, vllm]


def test_vllm_verdicts_follow_its_eagle3_rename() -> None:
    cfg = eagle3_config()

    def vllm(*archs: str) -> list[tuple[str, str, str]]:
        found = architecture_problems(named(cfg, *archs), ())
        return [(p.expected, p.actual, p.fix) for p in found if p.engines == ("vllm-0.32.0",)]

    assert vllm("LlamaForCausalLM") == vllm("LlamaForCausalLMEagle3") == vllm("Eagle3LlamaForCausalLM") == []
    assert vllm("MistralForCausalLM") == [
        (
            "LlamaForCausalLMEagle3",
            "vLLM (method eagle3) looks up "
            "Eagle3MistralForCausalLM, which its registry does not have (ValueError: "
            "architecture not supported)",
            FIX,
        )
    ]
    assert vllm("Qwen3ForCausalLM") == [
        (
            "Eagle3LlamaForCausalLM (llama_eagle3.py)",
            "vLLM (method eagle3) builds Eagle3Qwen3ForCausalLM "
            "(qwen3_eagle3.py), an EAGLE-3 class whose loader envforge does not follow: the vllm verdict is not proven",
            "serve it in vLLM to check it; envforge checks the llama_eagle3 layout only",
        )
    ]


def test_sglang_verdicts_for_other_names() -> None:
    cfg = eagle3_config()

    def sglang(*archs: str) -> list[str]:
        return [p.actual for p in architecture_problems(named(cfg, *archs), ()) if "sglang-0.5.9" in p.engines]

    assert sglang("LlamaForCausalLMEagle3") == []
    assert sglang("LlamaForCausalLMEagle") == [
        f"LlamaForCausalLMEagle: SGLang 0.5.9 builds LlamaForCausalLMEagle (llama_eagle.py), not its EAGLE-3 class "
        f"LlamaForCausalLMEagle3; {WORKER}"
    ]
    assert sglang("Eagle3LlamaForCausalLM") == [
        "Eagle3LlamaForCausalLM: not SGLang 0.5.9's EAGLE-3 class LlamaForCausalLMEagle3; SGLang builds the class of "
        f"that name if its registry or the Transformers fallback has one, and {WORKER}"
    ]
    assert sglang("Foo", "LlamaForCausalLMEagle3") == [
        '["Foo", "LlamaForCausalLMEagle3"]: SGLang 0.5.9 takes the first listed name its registry has, and Foo comes '
        "before LlamaForCausalLMEagle3"
    ]
    assert [(p.actual, p.engines) for p in architecture_problems({**cfg, "architectures": None}, ())] == [
        ("absent: neither engine can pick a model class (both select it by this name)", ("sglang-0.5.9", "vllm-0.32.0"))
    ]


def test_reduced_vocabulary_without_d2t_says_what_happens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = eagle3_tensors(cfg)
    del tensors["d2t"]
    d = write_drafter(tmp_path / "d", cfg, tensors)
    code, data = inspect_json(d, capsys)
    assert (code, data["loads"]) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": False})
    assert issues_of(data, d) == [("eagle3-d2t", "d2t", "[512]", NO_D2T, NO_D2T_FIX, ["sglang-0.5.9", "vllm-0.32.0"])]


def test_remote_inspect_of_a_llama_named_drafter(tmp_path: Path) -> None:
    cfg = eagle3_config()
    server = HubServer()
    sha = server.add_commit("test-org/d-base", eagle3_files(named(cfg, "LlamaForCausalLM"), eagle3_tensors(cfg)))
    with running_hub(server):
        report = inspect_drafter(f"test-org/d-base@{sha}", endpoint=server.url, cache_dir=tmp_path)
    assert report.loads == {"sglang-0.5.9": False, "vllm-0.32.0": True}
    assert [(i.kind, i.subject, i.engines) for i in report.issues] == [
        ("eagle3-architecture", f"test-org/d-base@{sha}: config.architectures", ("sglang-0.5.9",))
    ]
