"""`drafter inspect` agrees with the serving engines' EAGLE-3 loaders, one test per layout.

The verdicts follow SGLang 0.5.9's ``sglang/srt/models/llama_eagle3.py`` and vLLM's
``vllm/model_executor/models/llama_eagle3.py`` (read in src/envforge/drafter/layout.py): SGLang
looks names up with or without ``model.`` and ignores unknown ones; vLLM renames ``midlayer.`` to
``layers.0.``, prefixes ``model.`` itself and fails on a name it has no parameter for; both skip
``t2d``; SGLang refuses ``num_hidden_layers != 1``. Real safetensors files, the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.support.hub_server import eagle3_config, eagle3_tensors, write_drafter

from envforge.cli import main

BOTH = ["sglang-0.5.9", "vllm-0.32.0"]


def inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], tensors: dict[str, Any]
) -> tuple[int, dict[str, bool], list[tuple[str, str, str, str, list[str]]]]:
    d = write_drafter(tmp_path / "d", config, tensors)
    code = main(["drafter", "inspect", str(d), "--json"])
    data = json.loads(capsys.readouterr().out)["data"]
    issues = [
        (i["kind"], i["subject"].removeprefix(f"{d}: "), i["expected"], i["actual"], i["engines"])
        for i in data["issues"]
    ]
    return code, data["loads"], issues


def rename(tensors: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {k.replace(old, new, 1) if k.startswith(old) else k: v for k, v in tensors.items()}


def test_specforge_layout_loads_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    assert inspect(tmp_path, capsys, cfg, eagle3_tensors(cfg)) == (0, {"sglang-0.5.9": True, "vllm-0.32.0": True}, [])


def test_model_prefixed_names_load_in_sglang_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = {
        ("model." + k if k not in ("d2t", "t2d", "lm_head.weight") else k): v for k, v in eagle3_tensors(cfg).items()
    }
    code, loads, issues = inspect(tmp_path, capsys, cfg, tensors)
    assert (code, loads) == (1, {"sglang-0.5.9": True, "vllm-0.32.0": False})
    names = [i for i in issues if i[0] == "eagle3-names"]
    assert names == [
        (
            "eagle3-names",
            "model.* tensor names",
            "names without 'model.' (vLLM adds it)",
            "12 names like model.fc.weight: vLLM looks up model.model.fc.weight and fails (KeyError)",
            ["vllm-0.32.0"],
        )
    ]
    assert all(i[4] == ["vllm-0.32.0"] for i in issues)


def test_layers_0_names_load_in_vllm_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    code, loads, issues = inspect(tmp_path, capsys, cfg, rename(eagle3_tensors(cfg), "midlayer.", "layers.0."))
    assert (code, loads) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": True})
    assert issues[0] == ("eagle3-midlayer", "midlayer.self_attn.q_proj.weight", "[64, 128]", "absent", ["sglang-0.5.9"])
    assert issues[-1] == (
        "eagle3-names",
        "layers.* tensors",
        "the decoder layer under midlayer.*",
        "10 tensors under layers.* (e.g. layers.0.hidden_norm.weight), which SGLang 0.5.9 ignores without a word",
        ["sglang-0.5.9"],
    )
    assert len(issues) == 11


def test_without_t2d_loads_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = eagle3_tensors(cfg)
    del tensors["t2d"]
    assert inspect(tmp_path, capsys, cfg, tensors) == (0, {"sglang-0.5.9": True, "vllm-0.32.0": True}, [])


def test_full_vocabulary_without_d2t_loads_in_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config(vocab=512, draft_vocab=512)
    del cfg["draft_vocab_size"]
    tensors = eagle3_tensors({**cfg, "draft_vocab_size": 512}, np.arange(512))
    del tensors["d2t"], tensors["t2d"]
    assert inspect(tmp_path, capsys, cfg, tensors) == (0, {"sglang-0.5.9": True, "vllm-0.32.0": True}, [])


def test_reduced_vocabulary_without_d2t_loads_in_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = eagle3_tensors(cfg)
    del tensors["d2t"]
    code, loads, issues = inspect(tmp_path, capsys, cfg, tensors)
    assert (code, loads, issues) == (
        1,
        {"sglang-0.5.9": False, "vllm-0.32.0": False},
        [
            (
                "eagle3-d2t",
                "d2t",
                "[512]",
                "absent, with draft_vocab_size 512 < vocab_size 4096: draft ids are read as "
                "target ids (draft position i proposes target token i), so drafts propose wrong tokens and acceptance "
                "collapses (accept length ≈ 1)",
                BOTH,
            )
        ],
    )


def test_fc_for_another_target_width_loads_in_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = eagle3_tensors(cfg)
    tensors["fc.weight"] = np.zeros((64, 3 * 96), dtype=np.float16)
    assert inspect(tmp_path, capsys, cfg, tensors) == (
        1,
        {"sglang-0.5.9": False, "vllm-0.32.0": False},
        [("eagle3-fc", "fc.weight", "[64, 192]", "F16 [64, 288]", BOTH)],
    )


def test_fc_bias_loads_in_sglang_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = {**eagle3_tensors(cfg), "fc.bias": np.zeros(64, dtype=np.float16)}
    assert inspect(tmp_path, capsys, cfg, tensors) == (
        1,
        {"sglang-0.5.9": True, "vllm-0.32.0": False},
        [
            (
                "eagle3-names",
                "tensors without a parameter",
                "only the parameters of Eagle3LlamaForCausalLM",
                "fc.bias",
                ["vllm-0.32.0"],
            )
        ],
    )


def test_no_lm_head_and_no_draft_vocab_loads_in_sglang_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config(vocab=512, draft_vocab=512)
    tensors = eagle3_tensors(cfg, np.arange(512))
    del cfg["draft_vocab_size"], tensors["lm_head.weight"]  # SGLang takes the target's lm_head
    assert inspect(tmp_path, capsys, cfg, tensors) == (
        1,
        {"sglang-0.5.9": True, "vllm-0.32.0": False},
        [("eagle3-lm_head", "lm_head.weight", "[512, 64]", "absent", ["vllm-0.32.0"])],
    )


def test_two_decoder_layers_load_in_vllm_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {**eagle3_config(), "num_hidden_layers": 2}
    base = rename(eagle3_tensors(cfg), "midlayer.", "layers.0.")
    second = {k.replace("layers.0.", "layers.1."): v for k, v in base.items() if k.startswith("layers.0.")}
    code, loads, issues = inspect(tmp_path, capsys, cfg, {**base, **second})
    assert (code, loads) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": True})
    assert ("eagle3-layers", "num_hidden_layers", "1", "2", ["sglang-0.5.9"]) in issues
    assert {i[4] == ["sglang-0.5.9"] for i in issues} == {True}


def test_missing_final_norm_loads_in_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = eagle3_tensors(cfg)
    del tensors["norm.weight"]
    assert inspect(tmp_path, capsys, cfg, tensors) == (
        1,
        {"sglang-0.5.9": False, "vllm-0.32.0": False},
        [("eagle3-norm", "norm.weight", "[64]", "absent", BOTH)],
    )


def test_embed_tokens_of_the_wrong_shape_loads_in_neither(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    tensors = {**eagle3_tensors(cfg), "embed_tokens.weight": np.zeros((512, 64), dtype=np.float16)}
    assert inspect(tmp_path, capsys, cfg, tensors) == (
        1,
        {"sglang-0.5.9": False, "vllm-0.32.0": False},
        [("eagle3-embed_tokens", "embed_tokens.weight", "[4096, 64]", "F16 [512, 64]", BOTH)],
    )


def _eagle31(fc_norm: bool | None, norm_output: bool | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """An EAGLE-3.1 drafter (sglang#26506): one fc_norm RMSNorm per aux hidden state, config flags."""
    cfg = eagle3_config()
    if fc_norm is not None:
        cfg["fc_norm"] = fc_norm
    if norm_output is not None:
        cfg["norm_output"] = norm_output
    tensors = eagle3_tensors(cfg)
    for i in range(3):
        tensors[f"fc_norm.{i}.weight"] = np.ones(64, dtype="float16")
    return cfg, tensors


def test_eagle31_norms_are_skipped_by_sglang_0_5_9_and_load_in_vllm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B61: SGLang 0.5.9 has no fc_norm (its loader drops the tensors, norm_output is unread);
    vLLM 0.32.0 builds fc_norm when config.fc_norm is true (llama_eagle3.py:231)."""
    code, loads, issues = inspect(tmp_path, capsys, *_eagle31(True, True))
    assert (code, loads) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": True})
    assert issues == [
        (
            "eagle3-fc-norm",
            "EAGLE-3.1 fc_norm / norm_output",
            "the per-aux norms and norm_output the drafter was trained with",
            "SGLang 0.5.9's LlamaForCausalLMEagle3 has no fc_norm: 3 fc_norm tensors (fc_norm.0.weight, fc_norm.1.weight, "
            "fc_norm.2.weight) skipped without a word; norm_output: true is not read (draft steps feed the pre-norm "
            "hidden state)",
            ["sglang-0.5.9"],
        )
    ]


def test_eagle31_norms_without_the_config_flag_fail_in_vllm_and_are_never_to_be_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, loads, issues = inspect(tmp_path, capsys, *_eagle31(None, None))
    assert (code, loads) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": False})
    assert [(i[0], i[2], i[4]) for i in issues] == [
        ("eagle3-fc-norm", "the per-aux norms and norm_output the drafter was trained with", ["sglang-0.5.9"]),
        ("eagle3-fc-norm", '"fc_norm": true in config.json', ["vllm-0.32.0"]),
    ]
    assert issues[0][3].endswith(
        "3 fc_norm tensors (fc_norm.0.weight, fc_norm.1.weight, fc_norm.2.weight) skipped without a word"
    )
    assert issues[1][3] == (
        "3 fc_norm tensors (fc_norm.0.weight, fc_norm.1.weight, fc_norm.2.weight) and no fc_norm "
        "key: vLLM 0.32.0 builds no fc_norm and fails on them"
    )
    d = write_drafter(tmp_path / "d2", *_eagle31(None, None))
    main(["drafter", "inspect", str(d), "--json"])
    fixes = [i["fix"] for i in json.loads(capsys.readouterr().out)["data"]["issues"]]
    assert fixes == [
        "serve it with SGLang 0.5.20 or later (builds fc_norm and reads norm_output) or vLLM 0.32.0; "
        "keep the tensors, they are trained weights",
        'set "fc_norm": true in config.json (they are trained weights: never drop them)',
    ]


def test_norm_output_alone_is_named_for_sglang_0_5_9(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = eagle3_config()
    cfg["norm_output"] = True
    code, loads, issues = inspect(tmp_path, capsys, cfg, eagle3_tensors(cfg))
    assert (code, loads) == (1, {"sglang-0.5.9": False, "vllm-0.32.0": True})
    assert [i[3] for i in issues] == [
        "SGLang 0.5.9's LlamaForCausalLMEagle3 has no fc_norm: norm_output: true is not "
        "read (draft steps feed the pre-norm hidden state)"
    ]
    cfg["norm_output"] = False
    assert inspect(tmp_path, capsys, cfg, eagle3_tensors(cfg))[0] == 0
