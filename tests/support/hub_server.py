"""A local Hugging Face hub-compatible HTTP server on 127.0.0.1, for tests and the benchmark.

It implements the subset of the hub HTTP API that huggingface_hub's ``HfApi.model_info``,
``hf_hub_download`` (to a ``local_dir``) and ``parse_safetensors_file_metadata`` use (read from
huggingface_hub 1.x/2.x ``hf_api.py``, ``file_download.py``, ``utils/_http.py``):

- ``GET /api/models/{repo}[/revision/{rev}]`` (``?blobs=true``): ``sha`` and ``siblings`` with
  ``size``, ``blobId`` (git blob sha1) and, for LFS files, ``lfs.sha256`` / ``lfs.size``.
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: ``X-Repo-Commit``, ``ETag`` (git sha1) or
  ``X-Linked-Etag`` + ``X-Linked-Size`` (LFS sha256), ``Accept-Ranges``, ``Range`` -> 206.
- Errors as the hub sends them: 404 with ``X-Error-Code`` ``RepoNotFound``, ``RevisionNotFound``,
  ``EntryNotFound``.

Every response body byte is counted (``bytes_served``) and every request logged with whether an
``Authorization`` header came with it, so tests can assert what crossed the wire. A file can be
served *corrupted*: the metadata announces the sha256 of the real bytes while different bytes of
the same length are sent (huggingface_hub issue 3643, field case B14).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support.httpserve import QuietServer

__all__ = [
    "HubServer",
    "Request",
    "eagle3_config",
    "eagle3_files",
    "eagle3_tensors",
    "git_blob_sha1",
    "running_hub",
    "write_drafter",
]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl")
_API = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


def git_blob_sha1(data: bytes) -> str:
    """The git blob id of ``data`` (``sha1(b"blob <len>\\0" + data)``), the hub's ETag of non-LFS files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class _File:
    source: bytes | Path
    size: int
    sha256: str
    blob: str
    served: bytes | None = None  # corrupted or truncated bytes served instead of ``source``
    announce_size: bool = True  # HEAD sends X-Linked-Size / Content-Length

    def read(self, start: int, end: int) -> bytes:
        if self.served is not None:
            return self.served[start:end]
        if isinstance(self.source, bytes):
            return self.source[start:end]
        with self.source.open("rb") as f:
            f.seek(start)
            return f.read(end - start)


@dataclass(frozen=True)
class Request:
    """One request the server answered: method, path, ``Range`` header, whether auth came with it."""

    method: str
    path: str
    range: str | None
    authorization: str | None
    body_bytes: int


@dataclass
class HubServer:
    """Repositories served: ``add_commit`` files, ``set_ref`` branches and tags, ``corrupt`` a file."""

    repos: dict[str, dict[str, dict[str, _File]]] = field(default_factory=dict)
    refs: dict[str, dict[str, str]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_commit(self, repo: str, files: dict[str, bytes | Path], *, branch: str | None = "main") -> str:
        """Add a commit with ``files`` (name -> bytes or a path on disk); return its 40-hex sha."""
        entries: dict[str, _File] = {}
        digest = hashlib.sha1(repo.encode())
        for name in sorted(files):
            src = files[name]
            data = src if isinstance(src, bytes) else src.read_bytes()
            entries[name] = _File(src, len(data), hashlib.sha256(data).hexdigest(), git_blob_sha1(data))
            digest.update(name.encode() + entries[name].sha256.encode())
        sha = digest.hexdigest()
        self.repos.setdefault(repo, {})[sha] = entries
        if branch is not None:
            self.set_ref(repo, branch, sha)
        return sha

    def set_ref(self, repo: str, ref: str, sha: str) -> None:
        """Point branch or tag ``ref`` of ``repo`` at commit ``sha``."""
        self.refs.setdefault(repo, {})[ref] = sha

    def corrupt(self, repo: str, sha: str, name: str) -> None:
        """Serve different bytes of the same length for ``name`` (its metadata still says the real sha256)."""
        f = self.repos[repo][sha][name]
        data = bytearray(f.read(0, f.size))
        for i in range(len(data) - 1, max(len(data) - 65, -1), -1):
            data[i] ^= 0xFF
        f.served = bytes(data)

    def truncate(self, repo: str, sha: str, name: str, *, announce_size: bool = True) -> None:
        """Serve only the first half of ``name``; with ``announce_size=False`` HEAD hides the size, so
        huggingface_hub cannot notice (huggingface_hub issue 3643: a truncated blob "succeeds")."""
        f = self.repos[repo][sha][name]
        f.served = f.read(0, f.size)[: f.size // 2]
        f.announce_size = announce_size

    @property
    def bytes_served(self) -> int:
        """Total response-body bytes sent so far."""
        with self._lock:
            return sum(r.body_bytes for r in self.requests)

    def reset_counters(self) -> None:
        """Forget the request log (and so the byte count)."""
        with self._lock:
            self.requests.clear()

    # -- request handling --------------------------------------------------------------------

    def _resolve(self, repo: str, rev: str) -> tuple[str, dict[str, _File]] | str:
        if repo not in self.repos:
            return "RepoNotFound"
        sha = self.refs.get(repo, {}).get(rev, rev)
        if sha not in self.repos[repo]:
            return "RevisionNotFound"
        return sha, self.repos[repo][sha]

    def _log(self, handler: BaseHTTPRequestHandler, body_bytes: int) -> None:
        with self._lock:
            self.requests.append(
                Request(
                    handler.command,
                    handler.path,
                    handler.headers.get("Range"),
                    handler.headers.get("Authorization"),
                    body_bytes,
                )
            )

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        path = unquote(urlsplit(h.path).path)
        if (m := _API.match(path)) and h.command == "GET":
            self._model_info(h, m.group(1), m.group(2) or "main")
        elif m := _RESOLVE.match(path):
            self._resolve_file(h, m.group(1), m.group(2), m.group(3))
        else:
            self._error(h, 404, "EntryNotFound", {})

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str, extra: dict[str, str]) -> None:
        body = json.dumps({"error": code}).encode()
        h.send_response(status)
        for key, value in {"X-Error-Code": code, "X-Error-Message": code, **extra}.items():
            h.send_header(key, value)
        self._send_body(h, body, "application/json")

    def _send_body(self, h: BaseHTTPRequestHandler, body: bytes, ctype: str) -> None:
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        sent = 0 if h.command == "HEAD" else len(body)
        if sent:
            h.wfile.write(body)
        self._log(h, sent)

    def _model_info(self, h: BaseHTTPRequestHandler, repo: str, rev: str) -> None:
        found = self._resolve(repo, rev)
        if isinstance(found, str):
            self._error(h, 404, found, {})
            return
        sha, files = found
        siblings = []
        for name, f in files.items():
            entry: dict[str, object] = {"rfilename": name, "size": f.size, "blobId": f.blob}
            if name.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": 134}
            siblings.append(entry)
        data = {
            "_id": sha[:24],
            "id": repo,
            "modelId": repo,
            "sha": sha,
            "private": False,
            "tags": [],
            "siblings": siblings,
        }
        h.send_response(200)
        self._send_body(h, json.dumps(data).encode(), "application/json")

    def _resolve_file(self, h: BaseHTTPRequestHandler, repo: str, rev: str, name: str) -> None:
        found = self._resolve(repo, rev)
        if isinstance(found, str):
            self._error(h, 404, found, {})
            return
        sha, files = found
        if name not in files:
            self._error(h, 404, "EntryNotFound", {"X-Repo-Commit": sha})
            return
        f = files[name]
        start, end = 0, f.size
        status = 200
        if (rng := h.headers.get("Range")) and (m := re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())):
            start = int(m.group(1))
            end = min(f.size, int(m.group(2)) + 1) if m.group(2) else f.size
            status = 206
        h.send_response(status)
        h.send_header("X-Repo-Commit", sha)
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{f.blob}"')
        if name.endswith(LFS_SUFFIXES):
            h.send_header("X-Linked-Etag", f'"{f.sha256}"')
            if f.announce_size:
                h.send_header("X-Linked-Size", str(f.size))
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end - 1}/{f.size}")
        body = f.read(start, end) if h.command == "GET" else b""
        if h.command == "HEAD":
            if f.announce_size:
                h.send_header("Content-Length", str(end - start))
            h.end_headers()
            self._log(h, 0)
            return
        self._send_body(h, body, "application/octet-stream")


def _handler_for(hub: HubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            hub.handle(self)

        def do_HEAD(self) -> None:  # noqa: N802
            hub.handle(self)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


@contextmanager
def running_hub(hub: HubServer | None = None, *, port: int = 0) -> Iterator[HubServer]:
    """Serve ``hub`` on 127.0.0.1 (``port``; 0: a free one) in a thread; ``hub.url`` is the endpoint."""
    hub = hub or HubServer()
    server = QuietServer(("127.0.0.1", port), _handler_for(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# -- EAGLE-3-shaped drafters, built with real safetensors files ------------------------------------


def eagle3_config(
    *,
    hidden: int = 64,
    intermediate: int = 128,
    heads: int = 4,
    vocab: int = 4096,
    draft_vocab: int = 512,
    aux: tuple[int, ...] = (1, 3, 5),
    target_hidden: int | None = None,
) -> dict[str, object]:
    """A ``config.json`` shaped like SpecForge's LlamaForCausalLMEagle3 drafters."""
    config: dict[str, object] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "num_hidden_layers": 1,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
        "tie_word_embeddings": False,
        "rms_norm_eps": 1e-5,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux), "use_aux_hidden_state": True},
    }
    if target_hidden is not None:
        config["target_hidden_size"] = target_hidden
    return config


def eagle3_tensors(
    config: dict[str, object], target_ids: "object | None" = None, dtype: str = "float16"
) -> dict[str, "object"]:
    """Numpy tensors of an EAGLE-3 drafter for ``config``; ``target_ids[i]`` is draft position i's
    target token (default: ``2 * i``), stored as ``d2t = target_ids - arange`` and ``t2d``."""
    import numpy as np

    h, inter = int(config["hidden_size"]), int(config["intermediate_size"])  # type: ignore[call-overload]
    vocab, draft = int(config["vocab_size"]), int(config["draft_vocab_size"])  # type: ignore[call-overload]
    th = int(config.get("target_hidden_size") or h)  # type: ignore[call-overload]
    ids = np.asarray(target_ids if target_ids is not None else np.arange(draft) * 2, dtype=np.int64)
    t2d = np.zeros(vocab, dtype=np.bool_)
    t2d[ids] = True

    def w(*shape: int) -> object:
        return np.zeros(shape, dtype=dtype)

    return {
        "d2t": ids - np.arange(draft, dtype=np.int64),
        "t2d": t2d,
        "fc.weight": w(h, 3 * th),
        "midlayer.self_attn.q_proj.weight": w(h, 2 * h),
        "midlayer.self_attn.k_proj.weight": w(h, 2 * h),
        "midlayer.self_attn.v_proj.weight": w(h, 2 * h),
        "midlayer.self_attn.o_proj.weight": w(h, h),
        "midlayer.mlp.gate_proj.weight": w(inter, h),
        "midlayer.mlp.up_proj.weight": w(inter, h),
        "midlayer.mlp.down_proj.weight": w(h, inter),
        "midlayer.hidden_norm.weight": w(h),
        "midlayer.input_layernorm.weight": w(h),
        "midlayer.post_attention_layernorm.weight": w(h),
        "norm.weight": w(h),
        "lm_head.weight": w(draft, h),
    }


def eagle3_files(config: dict[str, object], tensors: dict[str, object] | None = None) -> dict[str, bytes | Path]:
    """``config.json`` + ``model.safetensors`` (bytes) of a drafter, ready for ``HubServer.add_commit``."""
    from safetensors.numpy import save

    tensors = tensors if tensors is not None else eagle3_tensors(config)
    return {"config.json": json.dumps(config, indent=2).encode(), "model.safetensors": save(tensors)}  # type: ignore[arg-type]


def write_drafter(directory: Path, config: dict[str, object], tensors: dict[str, object] | None = None) -> Path:
    """Write a drafter directory (``config.json`` + ``model.safetensors``) and return it."""
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_file(
        tensors if tensors is not None else eagle3_tensors(config),  # type: ignore[arg-type]
        str(directory / "model.safetensors"),
    )
    return directory
