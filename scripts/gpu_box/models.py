# Copied from the measured H200 recipe of 2026-12-01 (the vLLM 0.20.0 field run); run by scripts/gpu_box.sh
# on the device with the image's python3 (torch, transformers, tokenizers, safetensors are the image's).
"""Random Llama target + draft model + EAGLE-3 head for vLLM on a GPU, made offline (no hub).

Usage: python mk_models.py OUT_DIR [--small]   ->  OUT_DIR/{target,draft,eagle3}

* tokenizer: BPE (vocab 1000) trained on the stdlib .py files.
* target: LlamaConfig hidden 2048, 12 layers, 16 heads (head_dim 128), 8 KV heads, intermediate 5632,
  bf16 (~0.58 B parameters). Layers 2..11 have o_proj and down_proj scaled by 0.01, so the first two
  layers decide the output nearly alone: a draft made of those two layers agrees with the target
  often (speculation has something to accept) while the target still pays for 12 layers.
* draft: the target's embed_tokens, layers 0-1, norm and lm_head (LlamaForCausalLM, 2 layers).
* eagle3: a random EAGLE-3 head (LlamaForCausalLMEagle3, aux layers 2, 6, 9); it accepts ~nothing.
"""

import glob, json, os, re, sys, sysconfig, time

t0 = time.time()
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, normalizers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from safetensors.torch import save_file

out = sys.argv[1]
small = "--small" in sys.argv
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
stdlib = sysconfig.get_paths()["stdlib"]


def corpus():
    for f in sorted(glob.glob(os.path.join(stdlib, "*.py")))[:120]:
        with open(f, encoding="utf-8", errors="ignore") as fh:
            for line in fh:
                line = re.sub(r"[^A-Za-z0-9 .,:;!?'()-]", " ", line).strip()
                if line:
                    yield line


specials = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>"]
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.normalizer = normalizers.NFKC()
tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
tok.train_from_iterator(
    corpus(), trainers.BpeTrainer(vocab_size=1000, special_tokens=specials, limit_alphabet=80, min_frequency=2)
)
chat_template = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
hf_tok = PreTrainedTokenizerFast(
    tokenizer_object=tok,
    unk_token="<unk>",
    bos_token="<s>",
    eos_token="</s>",
    pad_token="<pad>",
    chat_template=chat_template,
    model_max_length=4096,
)
H, I, L, NH, KV = (256, 512, 4, 2, 1) if small else (2048, 5632, 12, 16, 8)
HD = H // NH
common = dict(
    vocab_size=len(hf_tok),
    hidden_size=H,
    intermediate_size=I,
    num_attention_heads=NH,
    num_key_value_heads=KV,
    head_dim=HD,
    max_position_embeddings=4096,
    bos_token_id=hf_tok.bos_token_id,
    eos_token_id=hf_tok.eos_token_id,
    pad_token_id=hf_tok.pad_token_id,
    tie_word_embeddings=False,
    torch_dtype="bfloat16",
)
gen = GenerationConfig(
    bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id
)


def save(model, d):
    model.generation_config = gen
    model.save_pretrained(d)
    hf_tok.save_pretrained(d)


cfg = LlamaConfig(num_hidden_layers=L, **common)
with torch.device(dev):
    target = LlamaForCausalLM(cfg).to(torch.bfloat16)
with torch.no_grad():
    for i in range(2, L):
        target.model.layers[i].self_attn.o_proj.weight.mul_(0.01)
        target.model.layers[i].mlp.down_proj.weight.mul_(0.01)
save(target, f"{out}/target")
print(f"target: {sum(p.numel() for p in target.parameters()) / 1e6:.1f} M params, {time.time() - t0:.1f}s", flush=True)

dcfg = LlamaConfig(num_hidden_layers=2, **common)
with torch.device(dev):
    draft = LlamaForCausalLM(dcfg).to(torch.bfloat16)
sd = {k: v for k, v in target.state_dict().items() if not k.startswith("model.layers.") or int(k.split(".")[2]) < 2}
draft.load_state_dict(sd, strict=True)
save(draft, f"{out}/draft")
print(f"draft: {sum(p.numel() for p in draft.parameters()) / 1e6:.1f} M params, {time.time() - t0:.1f}s", flush=True)

# EAGLE-3 head (layout of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): midlayer q/k/v take 2H inputs
e3 = f"{out}/eagle3"
os.makedirs(e3, exist_ok=True)
ecfg = cfg.to_dict()
aux = [2, L // 2, L - 3]
ecfg.update(
    architectures=["LlamaForCausalLMEagle3"],
    num_hidden_layers=1,
    model_type="llama",
    draft_vocab_size=cfg.vocab_size,
    target_hidden_size=H,
    eagle_config={"eagle_aux_hidden_state_layer_ids": aux},
)
with open(f"{e3}/config.json", "w") as fh:
    json.dump(ecfg, fh, indent=2)
g = torch.Generator().manual_seed(2)
r = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(torch.bfloat16).contiguous()
one = lambda n: torch.ones(n, dtype=torch.bfloat16)
esd = {
    "fc.weight": r(H, 3 * H),
    "norm.weight": one(H),
    "lm_head.weight": target.lm_head.weight.detach().cpu().clone().contiguous(),
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
    esd[f"midlayer.{n}.weight"] = r(*shape)
save_file(esd, f"{e3}/model.safetensors")
hf_tok.save_pretrained(e3)
print(f"eagle3 (aux layers {aux}): {time.time() - t0:.1f}s", flush=True)

# greedy agreement check of draft vs target on a few prompts (HF, 32 tokens)
with torch.no_grad():
    agree = tot = 0
    for p in ["def main():", "The quick brown fox", "import os, sys"]:
        ids = hf_tok(p, return_tensors="pt").input_ids.to(dev)
        a = target.generate(ids, max_new_tokens=32, do_sample=False, suppress_tokens=[hf_tok.eos_token_id])
        b = draft.generate(ids, max_new_tokens=32, do_sample=False, suppress_tokens=[hf_tok.eos_token_id])
        n = ids.shape[1]
        agree += int((a[0, n:] == b[0, n:]).cumprod(0).sum())
        tot += 32
        print("target:", hf_tok.decode(a[0, n:])[:80], flush=True)
    print(f"draft==target greedy prefix agreement: {agree}/{tot}; total {time.time() - t0:.1f}s", flush=True)
