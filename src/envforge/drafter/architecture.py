"""Which model class each serving engine builds for a drafter: ``config.architectures`` → class.

Both engines pick the class **by name** from ``config.json``'s ``architectures``; the tensor
layout (:mod:`envforge.drafter.layout`) only matters once the class is the EAGLE-3 one whose
loader it follows. Read from the engines' own code:

- **SGLang 0.5.9** (the ``sglang-0.5.9`` wheel): ``srt/models/registry.py`` maps every name in a
  model module's ``EntryClass`` to that class, and ``resolve_model_cls`` takes the first listed
  name it has (names it lacks are dropped and ``TransformersForCausalLM`` is appended as a
  fallback). ``srt/configs/model_config.py`` ``_config_draft_model`` renames MTP drafts
  (``DeepseekV3ForCausalLM`` → ``…NextN``, ...) but no EAGLE-3 draft: the name is used as written.
  The only EAGLE-3 class is ``LlamaForCausalLMEagle3`` (``srt/models/llama_eagle3.py``,
  ``EntryClass = [LlamaForCausalLMEagle3]``). ``LlamaForCausalLM`` is the plain target-model class
  of ``srt/models/llama.py``: its ``load_weights`` looks names up exactly as written, so the
  SpecForge tensors (``midlayer.*``, ``fc``, ``norm``, ``d2t``, ``t2d``) find no parameter and are
  dropped (``logger.warning("Parameter ... not found in params_dict")``), and its ``lm_head`` is
  ``[vocab_size, hidden]``, so a draft-vocabulary head fails the size assertion of
  ``ParallelLMHead.weight_loader``. The EAGLE-3 worker (``srt/speculative/eagle_worker.py`` and
  ``eagle_worker_v2.py``) then reads ``draft_model.hot_token_id``, an attribute only
  ``LlamaForCausalLMEagle3`` has: any other class stops the server with ``AttributeError``.
- **vLLM 0.32.0**: for ``method = "eagle3"`` (given, or detected from ``eagle3`` in the draft
  path: ``vllm/config/speculative.py``) the draft config is wrapped in ``EAGLEConfig``
  (``vllm/transformers_utils/configs/eagle.py``), which renames every architecture that neither
  starts nor ends with ``Eagle3`` to ``Eagle3<name>``: ``LlamaForCausalLM`` becomes
  ``Eagle3LlamaForCausalLM``, ``LlamaForCausalLMEagle3`` stays. The registry
  (``vllm/model_executor/models/registry.py``, ``_SPECULATIVE_DECODING_MODELS``) then takes the
  first name it has; :data:`VLLM_EAGLE3` is every entry a renamed name can hit. A draft launched
  without ``method`` from a path without ``eagle3`` is a plain ``draft_model`` and never EAGLE-3:
  that is the launch command's choice, not the drafter's, and is not judged here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envforge.core.plural import counted
from envforge.drafter.layout import SGLANG, VLLM, LayoutProblem
from envforge.drafter.weights import TensorInfo

__all__ = ["SGLANG_EAGLE3", "VLLM_EAGLE3", "ModelClass", "architecture_problems", "architectures", "model_classes"]

#: SGLang 0.5.9's EAGLE-3 class: the name its registry maps to ``llama_eagle3.py``.
SGLANG_EAGLE3 = "LlamaForCausalLMEagle3"

#: Names in SGLang 0.5.9's registry that a drafter's config plausibly names: name -> module file.
_SGLANG_KNOWN = {
    SGLANG_EAGLE3: "llama_eagle3.py",
    "LlamaForCausalLM": "llama.py",
    "LlamaForCausalLMEagle": "llama_eagle.py",
    "Qwen2ForCausalLMEagle": "qwen2_eagle.py",
    "MistralLarge3ForCausalLMEagle": "mistral_large_3_eagle.py",
}

#: vLLM 0.32.0's registry entries whose names start or end with ``Eagle3`` (the only names an
#: EAGLE-3 draft's renamed architecture can be): name -> (module file, class).
VLLM_EAGLE3 = {
    "Eagle3LlamaForCausalLM": ("llama_eagle3.py", "Eagle3LlamaForCausalLM"),
    "Eagle3MiniMaxM2ForCausalLM": ("llama_eagle3.py", "Eagle3LlamaForCausalLM"),
    "LlamaForCausalLMEagle3": ("llama_eagle3.py", "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen2_5vlForCausalLM": ("llama_eagle3.py", "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen3vlForCausalLM": ("llama_eagle3.py", "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen3ForCausalLM": ("qwen3_eagle3.py", "Eagle3Qwen3ForCausalLM"),
    "Eagle3DeepseekV2ForCausalLM": ("deepseek_eagle3.py", "Eagle3DeepseekV2ForCausalLM"),
    "Eagle3DeepseekV3ForCausalLM": ("deepseek_eagle3.py", "Eagle3DeepseekV2ForCausalLM"),
}

_FIX = (
    f'set config.json "architectures" to ["{SGLANG_EAGLE3}"] (the name SGLang maps to its EAGLE-3 loader; '
    "vLLM maps it to the same layout)"
)
_PLAIN_LAYER = re.compile(
    r"model\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj|"
    r"(input|post_attention)_layernorm)\.weight"
)


@dataclass(frozen=True, slots=True)
class ModelClass:
    """The class ``engine`` builds for a drafter config.

    ``looked_up``: the architecture name the engine's registry is asked for (vLLM's ``Eagle3``
    rename applied; ``""`` when the config names none); ``name`` / ``module``: the class and its
    file under the engine's ``models/`` (``None`` when the engine has no class by that name, or,
    for SGLang, when envforge does not know the name); ``eagle3``: it is the class whose loader
    :mod:`envforge.drafter.layout` follows (SGLang ``LlamaForCausalLMEagle3``, vLLM
    ``Eagle3LlamaForCausalLM``).
    """

    engine: str
    looked_up: str
    name: str | None
    module: str | None
    eagle3: bool

    def describe(self) -> str:
        """``"Eagle3LlamaForCausalLM (llama_eagle3.py)"``, or why there is none."""
        if self.name is not None:
            return f"{self.name} ({self.module})"
        return "no model class" if not self.looked_up else f"{self.looked_up} (not a class envforge knows)"


def architectures(config: Mapping[str, Any]) -> list[str]:
    """``config.architectures`` as the engines read it: a string is one name; anything else but a
    list of strings is none."""
    archs = config.get("architectures")
    if isinstance(archs, str):
        return [archs]
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def _sglang(archs: list[str]) -> ModelClass:
    if not archs:
        return ModelClass(SGLANG, "", None, None, False)
    first = archs[0]  # resolve_model_cls takes the first listed name its registry has
    module = _SGLANG_KNOWN.get(first)
    return ModelClass(SGLANG, first, first if module else None, module, first == SGLANG_EAGLE3)


def _vllm_name(arch: str) -> str:
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def _vllm(archs: list[str]) -> ModelClass:
    renamed = [_vllm_name(a) for a in archs]
    for name in renamed:
        if name in VLLM_EAGLE3:
            module, cls = VLLM_EAGLE3[name]
            return ModelClass(VLLM, name, cls, module, cls == "Eagle3LlamaForCausalLM")
    return ModelClass(VLLM, renamed[0] if renamed else "", None, None, False)


def model_classes(config: Mapping[str, Any]) -> tuple[ModelClass, ModelClass]:
    """The class SGLang 0.5.9 and vLLM (method ``eagle3``) build for ``config``, in that order."""
    archs = architectures(config)
    return _sglang(archs), _vllm(archs)


def _plain_llama(config: Mapping[str, Any], tensors: tuple[TensorInfo, ...]) -> tuple[str, bool]:
    """What SGLang 0.5.9's plain ``LlamaForCausalLM.load_weights`` does with ``tensors``, and
    whether loading itself fails (a size assertion) before the EAGLE-3 worker is reached."""
    tied = config.get("tie_word_embeddings") is True
    vocab, hidden = config.get("vocab_size"), config.get("hidden_size")

    def has_parameter(name: str) -> bool:
        return (
            name in ("model.embed_tokens.weight", "model.norm.weight")
            or bool(_PLAIN_LAYER.fullmatch(name))
            or (name == "lm_head.weight" and not tied)
        )

    dropped = [t.name for t in tensors if not has_parameter(t.name)]
    shown = ", ".join(dropped[:4]) + (", ..." if len(dropped) > 4 else "")
    text = (
        "SGLang 0.5.9 loads it as a plain Llama, not as EAGLE-3: llama.py's LlamaForCausalLM finds no parameter "
        f"for {len(dropped)} of {counted(len(tensors), 'tensor')} ({shown}) and drops them with a warning"
    )
    head = next((t for t in tensors if t.name == "lm_head.weight"), None)
    if head is not None and not tied and head.shape[:1] != (vocab,):
        return text + f"; lm_head.weight {head.describe()} fails its [{vocab}, {hidden}] size assertion", True
    return text, False


def _sglang_problem(
    config: Mapping[str, Any], tensors: tuple[TensorInfo, ...], c: ModelClass, archs: list[str]
) -> LayoutProblem | None:
    if c.eagle3:
        return None
    worker = f"its EAGLE-3 worker then stops: only {SGLANG_EAGLE3} has hot_token_id (AttributeError)"
    if c.name == "LlamaForCausalLM":
        text, load_fails = _plain_llama(config, tensors)
        actual = f"LlamaForCausalLM: {text}" + (" and stops the server" if load_fails else f"; {worker}")
    elif SGLANG_EAGLE3 in archs:
        actual = (
            f"{_json_list(archs)}: SGLang 0.5.9 takes the first listed name its registry has, and {archs[0]} "
            f"comes before {SGLANG_EAGLE3}"
        )
    elif c.name is not None:
        actual = f"{c.name}: SGLang 0.5.9 builds {c.describe()}, not its EAGLE-3 class {SGLANG_EAGLE3}; {worker}"
    else:
        actual = (
            f"{archs[0]}: not SGLang 0.5.9's EAGLE-3 class {SGLANG_EAGLE3}; SGLang builds the class of that name "
            f"if its registry or the Transformers fallback has one, and {worker}"
        )
    return LayoutProblem("eagle3-architecture", "config.architectures", SGLANG_EAGLE3, actual, _FIX, (SGLANG,))


def _vllm_problem(c: ModelClass) -> LayoutProblem | None:
    if c.eagle3:
        return None
    if c.name is None:
        actual = (
            f"vLLM (method eagle3) looks up {c.looked_up}, which its registry does not have "
            "(ValueError: architecture not supported)"
        )
        return LayoutProblem("eagle3-architecture", "config.architectures", SGLANG_EAGLE3, actual, _FIX, (VLLM,))
    actual = (
        f"vLLM (method eagle3) builds {c.describe()}, an EAGLE-3 class whose loader envforge does not follow: "
        "the vllm verdict is not proven"
    )
    return LayoutProblem(
        "eagle3-architecture",
        "config.architectures",
        "Eagle3LlamaForCausalLM (llama_eagle3.py)",
        actual,
        "serve it in vLLM to check it; envforge checks the llama_eagle3 layout only",
        (VLLM,),
    )


def _json_list(names: list[str]) -> str:
    """``["A", "B"]``, as config.json writes it."""
    return "[" + ", ".join(f'"{n}"' for n in names) + "]"


def architecture_problems(config: Mapping[str, Any], tensors: tuple[TensorInfo, ...]) -> tuple[LayoutProblem, ...]:
    """The ways ``config.architectures`` makes an engine build something other than the EAGLE-3
    class :mod:`envforge.drafter.layout` follows (module docstring): one problem per engine, or
    one naming both when the config names no architecture at all."""
    archs = architectures(config)
    if not archs:
        return (
            LayoutProblem(
                "eagle3-architecture",
                "config.architectures",
                SGLANG_EAGLE3,
                "absent: neither engine can pick a model class (both select it by this name)",
                _FIX,
                (SGLANG, VLLM),
            ),
        )
    sglang, vllm = model_classes(config)
    found = (_sglang_problem(config, tensors, sglang, archs), _vllm_problem(vllm))
    return tuple(p for p in found if p is not None)
