"""The auxiliary-layer verdict (field case B52): what each engine version captures for a drafter
on a target, and which engine is named. The engines' rules are checked against their code in
tests/drafter/test_engines.py; here the verdict built on them is pinned with literal values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envforge.cli import main
from envforge.drafter.auxlayers import Reference, aux_verdict, reference
from envforge.drafter.engines import ENGINE_FACTS, facts_for
from tests.support.hub_server import eagle3_config, eagle3_tensors, write_drafter

#: Kimi-K2.5's target config as the verdict reads it: the multimodal class, 61 text layers.
KIMI = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {"model_type": "kimi_k2", "hidden_size": 64, "vocab_size": 4096, "num_hidden_layers": 61},
}
#: sglang 0.5.9 with the kimik25-eagle3-delegation patchset: the class hands the ids to DeepSeek-V3.
PATCHED = {"KimiK25ForConditionalGeneration": "DeepseekV3ForCausalLM"}
SG9 = "sglang/srt/models/deepseek_v2.py:2963"
SG23 = "sglang/srt/models/deepseek_v2.py:3458"
VL = "vllm/model_executor/models/interfaces.py:1712"
NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"


def drafter(nested: list[Any] | None = None, top: list[Any] | None = None) -> dict[str, Any]:
    config = eagle3_config()
    if nested is None:
        del config["eagle_config"]
    else:
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = nested  # type: ignore[index]
    if top is not None:
        config["eagle_aux_hidden_state_layer_ids"] = top
    return config


def problems(config: dict[str, Any], **kw: Any) -> list[tuple[str, str, str]]:
    return [(p.kind, p.engine, p.expected) for p in aux_verdict(config, KIMI, patched=PATCHED, **kw).problems]


def test_capture_before_ids_name_sglang_0_5_9_with_what_it_captures() -> None:
    """B52 / sglang#25454: ids [2, 30, 58] in eagle_config; 0.5.9 adds 1, 0.5.23 does not."""
    v = aux_verdict(drafter([2, 30, 58]), KIMI, patched=PATCHED)
    assert v.basis == "sglang 0.5.23 reads this file's ids as the inputs of layers 2, 30, 58"
    assert [(p.kind, p.engine, p.expected, p.actual, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "the inputs of layers 2, 30, 58 (sglang 0.5.23 reads this file's ids as the inputs of layers 2, 30, 58)",
            f"sglang 0.5.9 captures the inputs of layers 3, 31, 59 (ids [2, 30, 58] from {NESTED}, + 1: {SG9})",
            f"for sglang 0.5.9, set {NESTED} to [1, 29, 57] in the drafter's config.json (it captures 2, 30, 58 "
            "then); check other engines again after the change",
        )
    ]
    assert [c.describe() for c in v.captures] == [
        f"sglang 0.5.9 captures the inputs of layers 3, 31, 59 (ids [2, 30, 58] from {NESTED}, + 1: {SG9})",
        f"sglang 0.5.23 captures the inputs of layers 2, 30, 58 (ids [2, 30, 58] from {NESTED}, + 1 only when the "
        f"first id is 1: {SG23})",
        "vllm 0.32.0 (Model Runner V2, the default) captures the inputs of layers 2, 30, 58 (no ids read: the "
        f"default [2, n // 2, n - 3]: {VL})",
        "vllm 0.32.0 (VLLM_USE_V2_MODEL_RUNNER=0) captures the inputs of layers 2, 30, 58 (ids [2, 30, 58] from "
        f"{NESTED}, as given: {VL})",
    ]


def test_specforge_default_ids_load_as_trained_everywhere_but_vllm_v1_is_shown() -> None:
    v = aux_verdict(drafter([1, 29, 57]), KIMI, patched=PATCHED)
    assert v.problems == ()
    assert [c.layers for c in v.captures] == [(2, 30, 58), (2, 30, 58), (2, 30, 58), (1, 29, 57)]


def test_top_level_ids_are_not_read_by_either_sglang() -> None:
    assert problems(drafter(None, [3, 20, 40])) == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "the inputs of layers 3, 20, 40 (vllm 0.32.0 reads this file's ids as the inputs of layers 3, 20, 40)",
        ),
        (
            "eagle3-aux-layers",
            "sglang-0.5.23",
            "the inputs of layers 3, 20, 40 (vllm 0.32.0 reads this file's ids as the inputs of layers 3, 20, 40)",
        ),
    ]


def test_nested_custom_ids_are_not_read_by_vllm_model_runner_v2() -> None:
    v = aux_verdict(drafter([1, 20, 40]), KIMI, patched=PATCHED)
    assert [(p.kind, p.engine, p.actual, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "vllm-0.32.0",
            "vllm 0.32.0 (Model Runner V2, the default) captures the inputs of layers 2, 30, 58 (no ids "
            f"read: the default [2, n // 2, n - 3]: {VL})",
            "for vllm 0.32.0, set eagle_aux_hidden_state_layer_ids to [2, 21, 41] in the drafter's config.json (it "
            "captures 2, 21, 41 then); check other engines again after the change",
        )
    ]


def test_stated_training_layers_name_each_engine_that_differs() -> None:
    assert problems(drafter([2, 30, 58]), trained=[58, 2, 30, 30]) == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "the inputs of layers 2, 30, 58 (trained on the inputs of layers 58, 2, 30, 30)",
        )
    ]
    v = aux_verdict(drafter([1, 29, 57]), KIMI, patched=PATCHED, trained=[1, 29, 57])
    assert [(p.engine, p.fix) for p in v.problems] == [
        (
            "sglang-0.5.9",
            f"for sglang 0.5.9, set {NESTED} to [0, 28, 56] in the drafter's config.json (it captures "
            "1, 29, 57 then); check other engines again after the change",
        ),
        # 0.5.23's DeepSeek hook adds 1 when the first id is 1 and not otherwise: no ids give 1, 29, 57
        ("sglang-0.5.23", "serve it with an engine version that captures 1, 29, 57"),
        (
            "vllm-0.32.0",
            "for vllm 0.32.0, set eagle_aux_hidden_state_layer_ids to [1, 29, 57] in the drafter's "
            "config.json (it captures 1, 29, 57 then); check other engines again after the change",
        ),
    ]
    # no negative ids are proposed: layer 0 cannot be reached through + 1
    zero = aux_verdict(drafter([1, 29, 57]), KIMI, patched=PATCHED, trained=[0, 29, 57])
    assert zero.problems[0].fix == "serve it with an engine version that captures 0, 29, 57"
    assert problems(drafter([1, 29, 57]), trained=[]) == []  # an empty list states nothing


def test_the_newest_engines_disagreeing_asks_for_the_training_layers() -> None:
    v = aux_verdict(drafter([1, 29, 57], [3, 20, 40]), KIMI, patched=PATCHED, engines=[facts_for("sglang", "0.5.9")])  # type: ignore[list-item]
    assert v.basis == (
        f"sglang 0.5.23 captures the inputs of layers 2, 30, 58 (ids [1, 29, 57] from {NESTED}, + 1 "
        f"only when the first id is 1: {SG23}); vllm 0.32.0 (Model Runner V2, the default) captures "
        f"the inputs of layers 3, 20, 40 (ids [3, 20, 40] from eagle_aux_hidden_state_layer_ids, "
        f"as given: {VL})"
    )
    assert [(p.kind, p.engine, p.expected, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "one reading of the ids",
            "state the layers the drafter was trained on ([verify.drafter] "
            "trained-aux-layers, or --trained-aux-layers)",
        )
    ]
    assert v.problems[0].actual.startswith(
        f"sglang 0.5.9 captures the inputs of layers 2, 30, 58 (ids [1, 29, 57] "
        f"from {NESTED}, + 1: {SG9}); the newest engines disagree: sglang 0.5.23"
    )


def test_a_class_without_the_hook_stops_the_start_and_names_the_patch_route() -> None:
    v = aux_verdict(drafter([1, 29, 57]), KIMI, engines=[facts_for("sglang", "0.5.9")])  # type: ignore[list-item]
    assert [(p.kind, p.engine, p.expected, p.actual, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "EAGLE-3 starts",
            "sglang 0.5.9: the target class KimiK25ForConditionalGeneration has no set_eagle3_layers_to_capture: EAGLE-3 "
            f"stops at start-up (AttributeError) (ids [1, 29, 57] from {NESTED}; "
            "sglang/srt/model_executor/model_runner.py:363)",
            "apply a patchset that gives the target class the hook (add-delegating-methods to its language model) or "
            "use an engine version that has it",
        )
    ]


def test_ids_that_are_not_integers_fail_the_start_in_sglang_only() -> None:
    v = aux_verdict(drafter([1, "a", 3]), KIMI, patched=PATCHED)
    assert v.basis == "no engine reads ids from this file"
    assert [(p.kind, p.expected, p.engine, p.actual, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "EAGLE-3 starts",
            f"sglang-{version}",
            f"sglang {version}: start-up fails: {NESTED} is [1, 'a', 3], not a list of integer layer "
            f"ids (ids [1, 'a', 3] from {NESTED}, {rule}: {src})",
            f"write a list of integer layer ids under {NESTED}, or remove it (the engine then uses its default)",
        )
        for version, rule, src in (("0.5.9", "+ 1", SG9), ("0.5.23", "+ 1 only when the first id is 1", SG23))
    ]


def test_layers_the_target_lacks_are_named_per_engine_range() -> None:
    """SGLang captures inputs of layers 0..n-1; vLLM also the last layer's output (n)."""
    assert problems(drafter(None, [2, 30, 61])) == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "the inputs of layers 2, 30, 61 (vllm 0.32.0 reads this file's ids as the inputs of layers 2, 30, 61)",
        ),
        (
            "eagle3-aux-layers",
            "sglang-0.5.23",
            "the inputs of layers 2, 30, 61 (vllm 0.32.0 reads this file's ids as the inputs of layers 2, 30, 61)",
        ),
    ]
    v = aux_verdict(drafter(None, [2, 30, 62]), KIMI, patched=PATCHED)
    assert v.basis == (
        "vllm 0.32.0 reads this file's ids as the inputs of layers 2, 30, 62, which the target "
        "(61 layers) does not have"
    )
    assert [(p.kind, p.engine, p.expected, p.actual, p.fix) for p in v.problems] == [
        (
            "target-layer-count",
            "vllm-0.32.0",
            "layers 0..61 (the target has 61)",
            "vllm 0.32.0 (Model Runner V2, the default) captures the inputs of layers 2, 30, 62 (ids [2, 30, 62] from "
            f"eagle_aux_hidden_state_layer_ids, as given: {VL})",
            "vllm 0.32.0 captures nothing for 62: the drafter gets fewer hidden states than it fuses; pick ids the "
            "target has",
        )
    ]
    assert problems(drafter([59, 60, 0])) == [  # 0.5.9: 60 + 1 = 61 is past the last layer; 0.5.23 takes them as given
        ("target-layer-count", "sglang-0.5.9", "layers 0..60 (the target has 61)"),
        (
            "eagle3-aux-layers",
            "vllm-0.32.0",
            "the inputs of layers 0, 59, 60 (sglang 0.5.23 reads this file's ids as the inputs of layers 0, 59, 60)",
        ),
    ]


def test_no_aux_hidden_state_captures_nothing_and_is_no_finding() -> None:
    config = drafter([1, 29, 57])
    config["eagle_config"]["use_aux_hidden_state"] = False
    v = aux_verdict(config, KIMI, patched=PATCHED)
    assert (v.problems, {c.layers for c in v.captures}) == ((), {()})
    assert v.basis == "sglang 0.5.23 reads this file's ids as the inputs of layers none"


def test_without_a_target_nothing_is_judged_and_sglang_needs_the_class() -> None:
    v = aux_verdict(drafter([1, 29, 57]), None)
    assert (v.basis, v.problems) == ("", ())
    assert [(c.engine, c.key, c.layers, c.reason) for c in v.captures] == [
        (
            "sglang 0.5.9",
            NESTED,
            None,
            "which layers depends on the target's class and layer count (give the target config)",
        ),
        (
            "sglang 0.5.23",
            NESTED,
            None,
            "which layers depends on the target's class and layer count (give the target config)",
        ),
        ("vllm 0.32.0", None, None, "which layers depends on the target's layer count (give the target config)"),
        ("vllm 0.32.0", NESTED, (1, 29, 57), ""),
    ]
    # a target without architectures: vLLM is judged, SGLang is not
    nameless = {"num_hidden_layers": 61}
    assert [p.engine for p in aux_verdict(drafter(None, [2, 30, 62]), nameless).problems] == ["vllm-0.32.0"]
    assert aux_verdict(drafter([1, 29, 57]), {"architectures": ["X"], "num_hidden_layers": 0}).problems == ()


def test_reference_is_the_newest_readers_agreement() -> None:
    assert reference(drafter([1, 29, 57]), "KimiK25ForConditionalGeneration", 61) == Reference(
        (2, 30, 58), "sglang 0.5.23 reads this file's ids as the inputs of layers 2, 30, 58"
    )
    assert reference(drafter([3, 20, 40], [3, 20, 40]), "LlamaForCausalLM", 61) == Reference(
        None,
        "sglang 0.5.23 captures the inputs of layers 4, 21, 41 (ids [3, 20, 40] from "
        f"{NESTED}, + 1: sglang/srt/models/llama.py:929); vllm 0.32.0 (Model Runner V2, the default) captures the "
        f"inputs of layers 3, 20, 40 (ids [3, 20, 40] from eagle_aux_hidden_state_layer_ids, as given: {VL})",
        True,
    )
    assert reference(drafter([2, 30, 58], [2, 30, 58]), "KimiK25ForConditionalGeneration", 61) == Reference(
        (2, 30, 58), "sglang 0.5.23 and vllm 0.32.0 read this file's ids as the inputs of layers 2, 30, 58"
    )
    assert reference(drafter(), "LlamaForCausalLM", 61) == Reference(None, "no engine reads ids from this file")
    assert len(ENGINE_FACTS) == 3


# -- the CLI -----------------------------------------------------------------------------------------------


@pytest.fixture
def b52(tmp_path: Path) -> tuple[Path, Path]:
    cfg = drafter([2, 30, 58])
    d = write_drafter(tmp_path / "d-capture-before", cfg, eagle3_tensors(cfg))
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(KIMI))
    return d, target


def test_drafter_check_json_carries_every_capture_and_the_basis(
    b52: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    d, target = b52
    code = main(
        [
            "drafter",
            "check",
            str(d),
            "--target",
            str(target),
            "--engine",
            "sglang==0.5.23",
            "--engine",
            "VLLM",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)["data"]
    assert (code, data["issues"]) == (0, [])
    assert data["aux-layers"]["basis"] == "sglang 0.5.23 reads this file's ids as the inputs of layers 2, 30, 58"
    assert [(c["engine"], c["path"], c["key"], c["ids"], c["layers"]) for c in data["aux-layers"]["captures"]] == [
        ("sglang 0.5.9", None, NESTED, [2, 30, 58], None),  # no hook on the unpatched class
        ("sglang 0.5.23", None, NESTED, [2, 30, 58], [2, 30, 58]),
        ("vllm 0.32.0", "Model Runner V2, the default", None, None, [2, 30, 58]),
        ("vllm 0.32.0", "VLLM_USE_V2_MODEL_RUNNER=0", NESTED, [2, 30, 58], [2, 30, 58]),
    ]


def test_drafter_check_with_training_layers_and_bad_options(
    b52: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    d, target = b52
    code = main(
        [
            "drafter",
            "check",
            str(d),
            "--target",
            str(target),
            "--engine",
            "vllm==0.32.0",
            "--trained-aux-layers",
            "3,31,59",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "judged against: trained on the inputs of layers 3, 31, 59" in out
    assert "[eagle3-aux-layers] " in out and "(vllm-0.32.0)" in out
    assert main(["drafter", "check", str(d), "--target", str(target), "--engine", "sglang==0.5.10"]) == 2
    assert "--engine sglang==0.5.10: envforge has no facts for this engine version" in capsys.readouterr().err
    for argv, message in (
        (["--trained-aux-layers", "2,x"], "'2,x': give layer numbers, like 2,30,58"),
        (["--trained-aux-layers=-1,2"], "'-1,2': give layer numbers, like 2,30,58"),
    ):
        assert main(["drafter", "check", str(d), "--target", str(target), *argv]) == 2
        assert message in capsys.readouterr().err


def test_start_up_failures_name_the_ids_to_write() -> None:
    v = aux_verdict(drafter([1, "a", 3]), KIMI, patched=PATCHED, trained=[2, 30, 58])
    assert [(p.kind, p.engine, p.expected, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.9",
            "EAGLE-3 starts",
            f"for sglang 0.5.9, set {NESTED} to [1, 29, 57] in the drafter's config.json (it captures 2, 30, 58 then); "
            "check other engines again after the change",
        ),
        (
            "eagle3-aux-layers",
            "sglang-0.5.23",
            "EAGLE-3 starts",
            f"for sglang 0.5.23, set {NESTED} to [2, 30, 58] in the drafter's config.json (it captures 2, 30, 58 then); "
            "check other engines again after the change",
        ),
    ]
    qwen = {"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 61}  # its hook takes ids as given, no default
    v = aux_verdict(drafter(), qwen, engines=[facts_for("sglang", "0.5.23")])  # type: ignore[list-item]
    assert [(p.kind, p.engine, p.expected, p.actual, p.fix) for p in v.problems] == [
        (
            "eagle3-aux-layers",
            "sglang-0.5.23",
            "EAGLE-3 starts",
            "sglang 0.5.23: start-up fails: the hook iterates the ids and there are none (TypeError) (no ids read: "
            "sglang/srt/models/qwen3_5.py:1894)",
            f"write the layer ids under {NESTED}: this target class's hook has no default",
        )
    ]


def test_the_target_is_read_as_the_engines_read_it() -> None:
    sg9 = [facts_for("sglang", "0.5.9")]
    # architectures as a string is no list of names: no class, nothing judged for SGLang
    assert (
        aux_verdict(
            drafter([1, 29, 57]),
            {"architectures": "KimiK25ForConditionalGeneration", "num_hidden_layers": 61},
            engines=sg9,
        ).problems
        == ()
    )  # type: ignore[arg-type]
    one = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1}  # a one-layer target is judged
    assert [(p.kind, p.engine, p.expected) for p in aux_verdict(drafter([0]), one).problems] == [
        ("target-layer-count", "sglang-0.5.9", "layers 0..0 (the target has 1)"),
        ("target-layer-count", "sglang-0.5.23", "layers 0..0 (the target has 1)"),
        ("target-layer-count", "vllm-0.32.0", "layers 0..1 (the target has 1)"),
    ]
    assert aux_verdict(drafter([0]), {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": True}).problems == ()


def test_json_true_is_layer_1_to_the_engines_as_to_python() -> None:
    v = aux_verdict(drafter([True, 29, 57]), KIMI, patched=PATCHED)
    assert (v.problems, [c.layers for c in v.captures][:2]) == ((), [(2, 30, 58), (2, 30, 58)])
