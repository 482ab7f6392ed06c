"""A random EAGLE-3 head for the gpu-box target (scripts/gpu_box/models.py), the same bytes on every machine.

Usage: python eagle3.py OUT_DIR  ->  OUT_DIR/config.json, OUT_DIR/model.safetensors (about 140 MB, bf16)

The hub-compatible server of the gpu-box run serves this directory as a drafter repository; its commit sha
is derived from the files' sha256 (tests/support/hub_server.py), so the recipe can pin it
(`[verify.drafter]`) only if these bytes never change. Hence no torch RNG: every weight is drawn from
SHAKE-256 of its tensor name (int16 / 32768 * 0.02, rounded to bf16 by torch's round-to-nearest-even),
and config.json is a literal (no transformers_version). The layout is that of
yuhuili/EAGLE3-LLaMA3.1-Instruct-8B (midlayer q/k/v take 2 x hidden inputs, fc takes 3 x hidden); it matches
the target's hidden 2048, 16 heads / 8 KV heads (head_dim 128), intermediate 5632 and vocabulary 1000.
A random head is never right: vLLM accepts almost none of its drafts (accept length 1.000), bench's
`no-accepted-draft` / `accept-length-1` case on a real engine.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

H, I, NH, KV, HD, VOCAB = 2048, 5632, 16, 8, 128, 1000
AUX = [2, 6, 9]
CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "num_hidden_layers": 1,
    "hidden_size": H,
    "intermediate_size": I,
    "num_attention_heads": NH,
    "num_key_value_heads": KV,
    "head_dim": HD,
    "vocab_size": VOCAB,
    "draft_vocab_size": VOCAB,
    "target_hidden_size": H,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 3,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX},
}


def weight(name: str, *shape: int) -> torch.Tensor:
    """``shape`` bf16 values in [-0.02, 0.02) from SHAKE-256 of ``name``."""
    n = 1
    for s in shape:
        n *= s
    raw = bytearray(hashlib.shake_256(name.encode()).digest(2 * n))
    ints = torch.frombuffer(raw, dtype=torch.int16).to(torch.float32)
    return (ints * (0.02 / 32768)).to(torch.bfloat16).reshape(*shape).contiguous()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    one = lambda k: torch.ones(k, dtype=torch.bfloat16)  # noqa: E731
    tensors = {
        "fc.weight": weight("fc.weight", H, 3 * H),
        "norm.weight": one(H),
        "lm_head.weight": weight("lm_head.weight", VOCAB, H),
        "midlayer.hidden_norm.weight": one(H),
        "midlayer.input_layernorm.weight": one(H),
        "midlayer.post_attention_layernorm.weight": one(H),
    }
    for n, shape in [
        ("self_attn.q_proj", (NH * HD, 2 * H)),
        ("self_attn.k_proj", (KV * HD, 2 * H)),
        ("self_attn.v_proj", (KV * HD, 2 * H)),
        ("self_attn.o_proj", (H, NH * HD)),
        ("mlp.gate_proj", (I, H)),
        ("mlp.up_proj", (I, H)),
        ("mlp.down_proj", (H, I)),
    ]:
        tensors[f"midlayer.{n}.weight"] = weight(f"midlayer.{n}.weight", *shape)
    save_file(tensors, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    for f in sorted(out.iterdir()):
        print(f"{f.name} {hashlib.sha256(f.read_bytes()).hexdigest()} {f.stat().st_size}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
