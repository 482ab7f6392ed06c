"""Which EAGLE-3 drafter layouts the serving engines' loaders accept, read from their loaders.

Sources (the verdicts below follow these files line by line; tests/drafter/test_layout.py has one
test per layout):

- SGLang 0.5.9, ``sglang/srt/models/llama_eagle3.py`` (``LlamaForCausalLMEagle3``): refuses a config
  with ``num_hidden_layers != 1`` (``ValueError``); its parameters are ``model.embed_tokens``,
  ``model.fc`` (bias only with ``config.bias``), ``model.midlayer.*`` (q/k/v fused into qkv_proj
  with input ``2 * hidden``), ``model.norm`` and ``lm_head`` (``[draft_vocab_size, hidden]``;
  taken from the target when ``draft_vocab_size`` is unset; the embedding when
  ``tie_word_embeddings``). ``load_weights`` looks a name up as given, else with ``model.`` in front,
  and **silently ignores** any name it does not find (``layers.0.*``, ``fc.bias``, ...); ``t2d`` is
  skipped; ``d2t`` becomes ``hot_token_id = d2t + arange``. A tensor of another shape fails
  ``default_weight_loader``'s size assertion.
- vLLM 0.32.0, ``vllm/model_executor/models/llama_eagle3.py`` (``Eagle3LlamaForCausalLM``; the same
  loader as main at commit 00bd1493): any ``num_hidden_layers`` (``layers.0`` .. ``layers.N-1``); ``midlayer.`` is renamed
  ``layers.0.``; every name but ``lm_head*`` and ``d2t`` gets ``model.`` in front, so a name that
  already has it (``model.fc.weight``) has no parameter, and any name without a parameter fails
  (``params_dict[name]``: ``KeyError``); ``t2d`` is skipped; ``d2t`` loads into
  ``draft_id_to_target_id`` (zeros when absent: draft id ``i`` becomes target id ``i``);
  ``embed_tokens`` is optional (shared with the target); ``fc`` never has a bias.

EAGLE-3.1 drafters (``fc_norm``: one RMSNorm per auxiliary hidden state, ``fc_norm.{0,1,2}.weight``
``[target_hidden]``; ``norm_output``) load in vLLM 0.32.0 when ``config.fc_norm`` is true
(``llama_eagle3.py`` line 231 builds ``fc_norm``, line 252 reads ``norm_output``); SGLang 0.5.9's
class has neither, so its loader skips the ``fc_norm`` tensors without a word and ignores
``norm_output``: the drafter runs without the norms it was trained with (sglang#26506). SGLang
builds them from 0.5.20 on (``sglang/srt/models/llama_eagle3.py`` line 185 in 0.5.23).

These rules hold once the engine has built the EAGLE-3 class; which class it builds is decided
by ``config.architectures`` (:mod:`envforge.drafter.architecture`). A missing ``d2t`` with a
reduced draft vocabulary is named for its effect: SGLang leaves ``hot_token_id`` ``None`` and vLLM
``draft_id_to_target_id`` zero, so draft id ``i`` is proposed as target token ``i``.

Neither loader checks that every parameter was loaded: a missing tensor leaves a parameter at its
initial value and the drafter proposes garbage. envforge therefore also reports absent tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envforge.core.plural import counted
from envforge.drafter.weights import TensorInfo

__all__ = ["ENGINES", "LayoutProblem", "loader_problems"]

SGLANG, VLLM = "sglang-0.5.9", "vllm-0.32.0"
#: The engines whose loaders the checks follow.
ENGINES = (SGLANG, VLLM)

_LAYER = (
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "hidden_norm.weight",
)


@dataclass(frozen=True, slots=True)
class LayoutProblem:
    """One way a drafter does not load as trained in ``engines`` (a subset of :data:`ENGINES`)."""

    kind: str
    subject: str
    expected: str
    actual: str
    fix: str
    engines: tuple[str, ...]


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    v = config.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Expected shape of each tensor of layer 0 and the rest, by canonical (unprefixed) name."""
    h = int(config["hidden_size"])
    heads = _int(config, "num_attention_heads", 1) or 1
    kv = _int(config, "num_key_value_heads", heads) or heads
    hd = _int(config, "head_dim") or h // heads
    inter = _int(config, "intermediate_size", 0) or 0
    th = _int(config, "target_hidden_size") or h
    draft = _int(config, "draft_vocab_size") or int(config["vocab_size"])
    layer = {
        "self_attn.q_proj.weight": (heads * hd, 2 * h),
        "self_attn.k_proj.weight": (kv * hd, 2 * h),
        "self_attn.v_proj.weight": (kv * hd, 2 * h),
        "self_attn.o_proj.weight": (h, heads * hd),
        "mlp.gate_proj.weight": (inter, h),
        "mlp.up_proj.weight": (inter, h),
        "mlp.down_proj.weight": (h, inter),
        "input_layernorm.weight": (h,),
        "post_attention_layernorm.weight": (h,),
        "hidden_norm.weight": (h,),
    }
    out = {f"midlayer.{k}": v for k, v in layer.items()}
    out.update(
        {
            "fc.weight": (h, 3 * th),
            "norm.weight": (h,),
            "lm_head.weight": (draft, h),
            "embed_tokens.weight": (int(config["vocab_size"]), h),
            "d2t": (draft,),
        }
    )
    return out


def _canonical(name: str) -> str:
    """The name as SGLang finds it: a leading ``model.`` dropped (both spellings load there)."""
    return name.removeprefix("model.")


def _vllm_name(name: str) -> str:
    return name.replace("midlayer.", "layers.0.")


def _needs(config: Mapping[str, Any], engine: str) -> list[str]:
    """Canonical names an engine needs from the drafter file (absent: an uninitialised parameter)."""
    names = [f"midlayer.{k}" for k in _LAYER] + ["norm.weight"]
    eagle = config.get("eagle_config")
    aux = eagle.get("use_aux_hidden_state", True) if isinstance(eagle, Mapping) else True
    if engine == SGLANG or aux:
        names.append("fc.weight")
    draft, vocab = _int(config, "draft_vocab_size"), _int(config, "vocab_size")
    tied = config.get("tie_word_embeddings") is True
    if engine == VLLM or (draft is not None and not tied):
        names.append("lm_head.weight")  # SGLang takes the target's lm_head when draft_vocab_size is unset
    if draft is not None and draft != vocab:
        names.append("d2t")
    return names


_FIX_NAMES = "rename the tensors to the SpecForge layout (midlayer.*, fc, norm, lm_head, d2t, no 'model.' prefix)"


def _sglang(config: Mapping[str, Any], by: Mapping[str, TensorInfo]) -> list[LayoutProblem]:
    out = []
    layers = _int(config, "num_hidden_layers", 32)  # transformers' LlamaConfig default
    if layers != 1:
        out.append(
            LayoutProblem(
                "eagle3-layers",
                "num_hidden_layers",
                "1",
                str(layers),
                "SGLang 0.5.9 raises 'EAGLE3 currently only supports 1 layer'; use a one-layer drafter or vLLM",
                (SGLANG,),
            )
        )
    norms = sorted(n for n in by if n.startswith("fc_norm."))
    if norms or config.get("norm_output") is True:
        what = (
            f"{counted(len(norms), 'fc_norm tensor')} ({', '.join(norms[:3])}) skipped without a word" if norms else ""
        )
        unread = (
            "norm_output: true is not read (draft steps feed the pre-norm hidden state)"
            if config.get("norm_output") is True
            else ""
        )
        out.append(
            LayoutProblem(
                "eagle3-fc-norm",
                "EAGLE-3.1 fc_norm / norm_output",
                "the per-aux norms and norm_output the drafter was trained with",
                "SGLang 0.5.9's LlamaForCausalLMEagle3 has no fc_norm: " + "; ".join(x for x in (what, unread) if x),
                "serve it with SGLang 0.5.20 or later (builds fc_norm and reads norm_output) or "
                "vLLM 0.32.0; keep the tensors, they are trained weights",
                (SGLANG,),
            )
        )
    ignored = sorted(n for n in by if n.startswith("layers.") and _canonical(n) not in _shapes(config))
    if ignored:
        out.append(
            LayoutProblem(
                "eagle3-names",
                "layers.* tensors",
                "the decoder layer under midlayer.*",
                f"{counted(len(ignored), 'tensor')} under layers.* (e.g. {ignored[0]}), which SGLang "
                "0.5.9 ignores without a word",
                _FIX_NAMES + " (vLLM accepts both)",
                (SGLANG,),
            )
        )
    return out


def _vllm(config: Mapping[str, Any], names: list[str]) -> list[LayoutProblem]:
    out = []
    prefixed = sorted(n for n in names if n.startswith("model.") and "d2t" not in n and "t2d" not in n)
    if prefixed:
        out.append(
            LayoutProblem(
                "eagle3-names",
                "model.* tensor names",
                "names without 'model.' (vLLM adds it)",
                f"{counted(len(prefixed), 'name')} like {prefixed[0]}: vLLM looks up "
                f"model.{prefixed[0]} and fails (KeyError)",
                _FIX_NAMES + " (SGLang accepts both)",
                (VLLM,),
            )
        )
    known = {_vllm_name(k) for k in _shapes(config)} | {"t2d", "mask_hidden"}
    if config.get("fc_norm"):  # llama_eagle3.py:231: one RMSNorm per aux hidden state (three)
        known |= {f"fc_norm.{i}.weight" for i in range(3)}
    layers = _int(config, "num_hidden_layers", 32) or 0

    def has_parameter(name: str) -> bool:
        head, _, rest = _vllm_name(name).partition(".")
        number, _, key = rest.partition(".")
        if head == "layers" and number.isdigit():
            return int(number) < max(layers, 1) and key in _LAYER
        return _vllm_name(name) in known

    unknown = sorted(n for n in names if not n.startswith("model.") and not has_parameter(n))
    norms = [n for n in unknown if n.startswith("fc_norm.")]
    if norms and not config.get("fc_norm"):
        out.append(
            LayoutProblem(
                "eagle3-fc-norm",
                "fc_norm tensors without config.fc_norm",
                '"fc_norm": true in config.json',
                f"{counted(len(norms), 'fc_norm tensor')} "
                f"({', '.join(norms[:3])}) and no fc_norm key: vLLM 0.32.0 builds no fc_norm and "
                "fails on them",
                'set "fc_norm": true in config.json (they are trained weights: never drop them)',
                (VLLM,),
            )
        )
        unknown = [n for n in unknown if n not in norms]
    if unknown:
        out.append(
            LayoutProblem(
                "eagle3-names",
                "tensors without a parameter",
                "only the parameters of Eagle3LlamaForCausalLM",
                ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else ""),
                "vLLM fails on a tensor it has no parameter for (fc never has a bias there); drop them",
                (VLLM,),
            )
        )
    return out


def _layer_tensor(by: Mapping[str, TensorInfo], name: str, engine: str) -> TensorInfo | None:
    if engine == VLLM and name.startswith("midlayer."):
        return by.get(name) or by.get(name.replace("midlayer.", "layers.0."))
    return by.get(name)


def _absent(config: Mapping[str, Any], name: str) -> tuple[str, str]:
    """``(actual, fix)`` for a tensor the engine needs and the drafter lacks."""
    if name != "d2t":
        return "absent", "the engine would run this parameter uninitialised; use a complete drafter"
    draft, vocab = _int(config, "draft_vocab_size"), _int(config, "vocab_size")
    return (
        f"absent, with draft_vocab_size {draft} {'<' if (draft or 0) < (vocab or 0) else '!='} vocab_size "
        f"{vocab}: draft ids are read as target ids (draft position i proposes target token i), so drafts "
        "propose wrong tokens and acceptance collapses (accept length ≈ 1)",
        "ship the d2t tensor from the training run (target id = i + d2t[i], built with the draft vocabulary); "
        "a d2t rebuilt from another vocabulary maps to other tokens",
    )


def loader_problems(config: Mapping[str, Any], tensors: tuple[TensorInfo, ...]) -> tuple[LayoutProblem, ...]:
    """Every way ``tensors`` (with ``config``) would not load as trained in SGLang 0.5.9 or vLLM.

    ``config`` must hold integer ``hidden_size`` and ``vocab_size`` (the caller checks). Problems
    that both engines share are merged into one with both engines named.
    """
    names = [t.name for t in tensors]
    by_sglang = {_canonical(t.name): t for t in tensors}
    by_vllm = {t.name: t for t in tensors if not t.name.startswith("model.")}
    shapes = _shapes(config)
    found: dict[tuple[str, str, str, str, str], list[str]] = {}
    for engine, by in ((SGLANG, by_sglang), (VLLM, by_vllm)):
        for name in _needs(config, engine):
            t = _layer_tensor(by, name, engine)
            want = f"[{', '.join(map(str, shapes[name]))}]"
            if t is None:
                key = (f"eagle3-{name.split('.')[0]}", name, want, *_absent(config, name))
                found.setdefault(key, []).append(engine)
        for name, shape in shapes.items():
            t = _layer_tensor(by, name, engine)
            if t is not None and t.shape != shape:
                key = (
                    f"eagle3-{name.split('.')[0]}",
                    name,
                    f"[{', '.join(map(str, shape))}]",
                    t.describe(),
                    "the loader's size assertion fails on this tensor; the drafter does not match its config",
                )
                found.setdefault(key, []).append(engine)
    out = [LayoutProblem(*k, tuple(e)) for k, e in found.items()]
    return tuple(out + _sglang(config, by_sglang) + _vllm(config, names))
