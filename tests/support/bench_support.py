"""Helpers for the bench tests: a tiny real model, the interpreter that can serve it, and a local
HTTP server that replays recorded SGLang / OpenAI streams chunk by chunk.

The tiny model is a 2-layer Llama with random weights (seeded) written with numpy + safetensors and a
word-level tokenizer whose vocabulary is the words of envforge's shipped prompt set, so
``transformers serve`` loads it on CPU in a second and generates real tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script (a test recipe's server): make `tests.support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.httpserve import QuietServer, serving  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "bench"
SERVE_MODULES = ("torch", "transformers", "fastapi", "uvicorn")


def server_python() -> Path | None:
    """The interpreter that runs ``transformers serve``: ``$ENVFORGE_BENCH_PYTHON`` or this one;
    None when it lacks torch, transformers, fastapi or uvicorn (extra ``bench-test``)."""
    python = Path(os.environ.get("ENVFORGE_BENCH_PYTHON", sys.executable))
    probe = "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in sys.argv[1:]) else 1)"
    ok = subprocess.run([str(python), "-c", probe, *SERVE_MODULES], capture_output=True).returncode == 0
    return python if ok else None


def transformers_serve_python() -> Path:
    """:func:`server_python`, or skip the calling test when there is none (``pytest.skip``)."""
    import pytest

    python = server_python()
    if python is None:
        pytest.skip("transformers serve is not installed (pip install -e '.[bench-test]')")
    return python


#: A ``[[verify.smoke.servers]]`` entry's ``args`` and ``env`` for ``transformers serve`` on CPU, as
#: recipe-template text for ``str.format`` (braces doubled: ``{{model}}`` reaches the recipe as ``{model}``).
TRANSFORMERS_SERVE_TOML = """args = ["-m", "transformers.cli.transformers", "serve", "{{model}}", "--host", "{{host}}", "--port", "{{port}}",
        "--device", "cpu"]
env = {{ HF_HUB_OFFLINE = "1", OMP_NUM_THREADS = "1" }}
"""


def venv_of(python: Path) -> Path:
    """``sys.prefix`` of ``python`` (a virtual environment directory)."""
    out = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    return Path(out.stdout.strip())


def _words() -> list[str]:
    from envforge.bench.config import load_prompts, shipped_prompts

    prompts, _ = load_prompts(shipped_prompts())
    return sorted({w for p in prompts for w in p.text.split()})


def make_tiny_model(
    out: Path, *, hidden: int = 32, layers: int = 2, seed: int = 0, stops_at_once: bool = False
) -> Path:
    """Write a tiny random-weight Llama (safetensors, config, word-level tokenizer) into ``out``.

    ``stops_at_once``: the final norm's weights are zero, so every logit is 0 and greedy decoding
    picks token 0, which the generation config names as end of sequence: a model that stops early
    (field case B35)."""
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {w: i for i, w in enumerate(specials + _words())}
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    inter = 2 * hidden
    tensors = {
        "model.embed_tokens.weight": w(len(vocab), hidden),
        "lm_head.weight": w(len(vocab), hidden),
        "model.norm.weight": np.zeros(hidden, np.float32) if stops_at_once else np.ones(hidden, np.float32),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update(
            {
                p + "input_layernorm.weight": np.ones(hidden, np.float32),
                p + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
                p + "mlp.gate_proj.weight": w(inter, hidden),
                p + "mlp.up_proj.weight": w(inter, hidden),
                p + "mlp.down_proj.weight": w(hidden, inter),
            }
        )
        for proj in "qkvo":
            tensors[p + f"self_attn.{proj}_proj.weight"] = w(hidden, hidden)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": len(vocab),
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": hidden // 2,
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    # No eos in the generation config: every request produces exactly max_tokens tokens.
    gen = {"bos_token_id": 1, "eos_token_id": 0} if stops_at_once else {"bos_token_id": 1}
    (out / "generation_config.json").write_text(json.dumps(gen))
    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(specials)
    ]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    # a chat template, so the server's /v1/chat/completions can render a conversation
    template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "chat_template": template,
            }
        )
    )
    return out


def make_bpe_tokenizer(out: Path, *, vocab_size: int = 400) -> Path:
    """Train a byte-level BPE ``tokenizer.json`` (GPT-2's pre-tokenizer and decoder) on the words of
    envforge's shipped prompt set and write it into ``out``; its post-processor adds a BOS ``<s>``
    to every text (as Llama's does), so it has one special token to count and ids that do not
    survive a decode / re-encode round trip."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from envforge.bench.config import load_prompts, shipped_prompts

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    prompts, _ = load_prompts(shipped_prompts())
    tok.train_from_iterator([p.text for p in prompts], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    tok.save(str(out / "tokenizer.json"))
    return out


def sse_events(name: str) -> list[bytes]:
    """The ``data:`` events of a recorded stream in tests/data/bench, each with its blank line."""
    text = (DATA / name).read_text()
    return [(block + "\n\n").encode() for block in text.split("\n\n") if block.strip()]


@contextmanager
def replay_server(
    routes: Mapping[str, str],
    gap_s: float = 0.0,
    port: int = 0,
    log: list[tuple[str, bytes]] | None = None,
    peers: list[int] | None = None,
) -> Iterator[str]:
    """A local HTTP server (127.0.0.1, ``port`` or a free one) that answers ``POST <path>`` by
    streaming the recorded events of ``routes[path]`` with ``gap_s`` seconds between them (chunked
    encoding), and ``GET /health`` / ``/health_generate`` with 200. Yields its base URL.

    ``routes[path] = "keepalive:<file>"`` streams the file's first event, then only SSE comment
    lines (``: ping``, what servers send to keep a connection open) every ``gap_s`` seconds, forever;
    ``"blanks:<file>"`` the same with bare empty lines.
    ``routes["GET <path>"] = "<file>"`` answers ``GET <path>`` with the file (a recorded metrics body).
    ``POST /flush_cache`` answers 200 (SGLang's route). ``log`` receives ``(path, body)`` of every POST,
    ``peers`` the client's port of every POST (one port per connection: HTTP/1.1 keeps a connection
    open after a recorded stream, as uvicorn does; the keep-alive routes close theirs).
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if f"GET {self.path}" in routes:  # a recorded answer: a metrics body
                data = (DATA / routes[f"GET {self.path}"]).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            self.send_response(200 if self.path in ("/health", "/health_generate") else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if log is not None:
                log.append((self.path, body))
            if peers is not None:
                peers.append(self.client_address[1])
            if self.path == "/flush_cache" and self.path not in routes:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path not in routes:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            route = routes[self.path]
            if route.startswith(("keepalive:", "blanks:")):
                kind, name = route.split(":", 1)
                self._keepalive(sse_events(name)[0], b": ping\n\n" if kind == "keepalive" else b"\n")
                return
            for event in sse_events(route):
                time.sleep(gap_s)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def _keepalive(self, first: bytes, ping: bytes) -> None:
            self.close_connection = True
            try:
                for event in [first] + [ping] * 100_000:  # bounded: about gap_s x 1e5 seconds
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                    time.sleep(gap_s)
            except OSError:
                return  # the client went away

    server = QuietServer(("127.0.0.1", port), Handler)
    with serving(server) as url:
        yield url


if __name__ == "__main__":
    # Script mode: ``python bench_support.py PORT GAP_S /PATH=FILE... [other args ignored]`` serves in
    # the foreground (a real server process for lifecycle tests), with GET /health and /health_generate.
    routes = dict(a.split("=", 1) for a in sys.argv[3:] if a.startswith("/"))
    with replay_server(routes, float(sys.argv[2]), port=int(sys.argv[1])):
        print(f"serving on 127.0.0.1:{sys.argv[1]}", flush=True)
        threading.Event().wait()
