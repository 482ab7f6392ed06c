"""Smoke benchmark settings, read from a recipe's ``[verify.smoke]`` table, and the prompt set.

``[verify.smoke]`` keys (shapes validated by :mod:`envforge.recipe.schema`; meaning checked here):

=================  =======================================================================
``model``          model path or hub id, substituted for ``{model}`` in server args
``served-model-name`` the name requests carry in ``model`` when the server serves the checkpoint
                   under another name (vLLM's ``--served-model-name``), substituted for
                   ``{served_model_name}`` in server args (default: ``model``); a server's own
                   ``served-model-name`` overrides it
``api``            the engine (:mod:`envforge.bench.engines`): ``"sglang"`` (native ``/generate``),
                   ``"openai"`` (``/v1/completions``) or ``"vllm"`` (``/v1/completions`` with
                   ``ignore_eos``, plus the speculative-decoding counters of ``GET /metrics`` around
                   each repeat: :mod:`envforge.bench.metrics`)
``servers``        array of tables ``{name, args, env, speculative, model}``; ``args`` follow the
                   environment's interpreter (``["-m", "sglang.launch_server", ...]``) and may
                   use ``{model}``, ``{host}``, ``{port}``; ``model`` overrides the one below
``prompts``        a JSON-lines file of ``{"prompt": "..."}`` or a ShareGPT-format JSON file
                   (default: the shipped smoke set; ``--prompts FILE`` overrides)
``dataset``        ``"prompts"`` (default: the file of ``prompts``), or a dataset that gives each
                   request its own lengths (:mod:`envforge.bench.workload`): ``"random"``
                   (``random-input-len``, ``random-output-len``, ``random-range-ratio``: vLLM's),
                   ``"shared-prefix"`` (``gsp-num-groups``, ``gsp-prompts-per-group``,
                   ``gsp-system-prompt-len``, ``gsp-question-len``, ``gsp-output-len``: SGLang's),
                   ``"trace"`` (``trace``: a Mooncake-format file, relative to the recipe;
                   ``trace-time-scale``); a key of another dataset is refused
``tokenizer``      directory with the model's ``tokenizer.json``, for the input lengths of those
                   datasets (default: ``model``, when it is such a local directory)
``seed``           order in which prompts are drawn, and the generated datasets' draws (default 0)
``max-new-tokens`` output tokens per request (default 128); unused by random, shared-prefix and
                   trace, whose requests each ask for their own
``temperature``    sampling temperature (default 0.0: greedy)
``concurrency``    concurrency levels (default ``[1, 4, 16, 32]``)
``repeats``        measured repeats per level (default 3)
``warmup``         warm-up requests, excluded from results: before each level's first repeat (after
                   every server start), ``max(warmup, concurrency)`` requests at the level's own
                   concurrency (vLLM and SGLang warm up under ``max_concurrency``); 0 for none
                   (default 2)
``requests``       requests per level and repeat (default ``max(5 x concurrency, 10)``, SGLang's
                   "num-prompts >= 5 * max-concurrency" for steady state; never fewer than the
                   concurrency)
``load-timeout-s`` seconds a server may take to become ready (default 1800: big checkpoints
                   take over 10 minutes to load)
``port``           port the servers listen on, on 127.0.0.1 (default 30000)
``health``         readiness route (default: the engine's, ``/health_generate`` for sglang,
                   ``/health`` else)
``request-timeout-s`` seconds one request may take in total (default 600)
``idle-timeout-s`` seconds a request may go without progress, keep-alive pings being none
                   (default 120)
``interleave``     started servers take turns per repeat (A B A B ...), each restarted for its
                   turn, so drift hits all configurations alike (default false)
``flush-cache``    route POSTed before each repeat to empty the server's prefix cache (default:
                   the engine's, ``/flush_cache`` for sglang, none else; ``""`` for none)
=================  =======================================================================

Prompts: every request of a server's run gets a prompt no earlier request of that run had (warm-up
included): the set is drawn in a fixed shuffled order (``seed``), and once it is used up the same
order again with a distinct leading tag (``"[2] "``, ``"[3] "``, ...), so no request starts with a
prefix a previous one cached (field case B34). Every server gets the same sequence. A generated
dataset draws request ``i`` from the seed and ``i`` (:class:`envforge.bench.workload.Workload`):
new text in every pass, no text twice. A trace's measured repeat starts a new pass at its first
record, so each repeat replays the trace from its start.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.bench.arrivals import arrival_times
from envforge.bench.client import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_REQUEST_TIMEOUT_S
from envforge.bench.dataset import Prompt, sharegpt_prompts, sharegpt_turns
from envforge.bench.distribution import parse_percentiles
from envforge.bench.engines import Engine, engine
from envforge.bench.sampler import DEFAULT_INTERVAL_S
from envforge.bench.slo import Slo
from envforge.bench.sweep import RateSweep
from envforge.bench.workload import TraceWorkload, Workload, build_workload
from envforge.core.errors import InputError
from envforge.core.textfile import long_number_error, read_bytes

__all__ = [
    "DEFAULT_LOAD_TIMEOUT_S",
    "SWEEP_NEEDS_SLO",
    "PROMPTS_LIMIT",
    "Prompt",
    "ServerConfig",
    "SmokeConfig",
    "inert_patch_warnings",
    "load_prompts",
    "shipped_prompts",
    "smoke_config",
    "url_config",
]

#: The message and hint of a sweep without SLO targets (the CLI says it before reading the recipe).
SWEEP_NEEDS_SLO = (
    "--sweep-rate needs --slo: the sweep looks for the highest rate that meets it",
    "add the targets, e.g. --slo ttft:200 tpot:50",
)
DEFAULT_LOAD_TIMEOUT_S = 1800
DEFAULT_PORT = 30000
HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One server configuration: ``args`` after the interpreter, extra ``env``, speculative or not,
    and ``model`` when it serves another checkpoint than ``[verify.smoke].model``."""

    name: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    speculative: bool = False
    model: str | None = None
    served_model_name: str | None = None

    def argv_tail(self, *, model: str, port: int, host: str = HOST, served_model_name: str | None = None) -> list[str]:
        """``args`` with ``{model}``, ``{host}``, ``{port}`` and ``{served_model_name}`` (default: the
        model) substituted (nothing else is touched)."""
        subst = {
            "{model}": model,
            "{host}": host,
            "{port}": str(port),
            "{served_model_name}": served_model_name or model,
        }
        out = []
        for a in self.args:
            for k, v in subst.items():
                a = a.replace(k, v)
            out.append(a)
        return out


@dataclass(frozen=True, slots=True)
class SmokeConfig:
    """Everything a smoke benchmark run needs besides the environment (see the module table)."""

    model: str
    api: str
    servers: tuple[ServerConfig, ...]
    prompts: tuple[Prompt, ...]
    prompts_digest: str
    seed: int = 0
    max_new_tokens: int = 128
    temperature: float = 0.0
    concurrency: tuple[int, ...] = (1, 4, 16, 32)
    repeats: int = 3
    warmup: int = 2
    requests: int | None = None
    load_timeout_s: int = DEFAULT_LOAD_TIMEOUT_S
    port: int = DEFAULT_PORT
    health: str = "/health_generate"
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    served_model_name: str | None = None
    interleave: bool = False
    flush_cache: str = ""
    slo: Slo = field(default_factory=Slo)
    request_rate: float = math.inf
    burstiness: float = 1.0
    dataset: Workload | None = None  # None: the prompt set above; else each request has its own lengths
    metrics_interval_s: float = DEFAULT_INTERVAL_S  # the server's gauges every so often; 0: not read
    sweep: RateSweep | None = None  # --sweep-rate: levels at rates searched for the SLO's limit
    percentiles: tuple[float, ...] = ()  # --percentiles beyond p90, p95, p99 (envforge.bench.distribution)
    output_lengths: str = "exact"  # "exact" (ignore_eos, checked) or "natural" (the server stops where it stops)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # credentials: never in as_dict
    save_detailed: bool = False  # per-request records in the report (envforge.bench.records)
    ca_cert: str | None = None  # --ca-cert: the CA file an https --url server is verified with
    turns: int = 1  # --turns: user turns of each ShareGPT conversation sent (envforge.bench.load.run_conversations)

    @property
    def engine(self) -> Engine:
        """The engine named by ``api`` (:func:`envforge.bench.engines.engine`; raises
        :class:`InputError` for an unknown name)."""
        return engine(self.api)

    def requests_at(self, concurrency: int) -> int:
        """Requests per repeat at ``concurrency``: ``requests`` (default ``max(5 x concurrency, 10)``,
        SGLang's steady-state guidance) but at least ``concurrency``. A trace: ``requests`` (default:
        all its records), whatever the concurrency (it caps what the recording puts in flight)."""
        size = self.dataset.size if self.dataset is not None else None
        if size is not None:
            return self.requests or size
        return max(self.requests or max(5 * concurrency, 10), concurrency)

    @property
    def natural(self) -> bool:
        """``--output-lengths natural``: no ignore_eos; a request completes with whatever it yields."""
        return self.output_lengths == "natural"

    @property
    def per_request(self) -> bool:
        """Each request asks for its own output tokens (a generated dataset, or ShareGPT replies in
        natural mode: :func:`envforge.bench.dataset.reply_lengths`), not ``max_new_tokens``."""
        return self.dataset is not None or any(p.output_len is not None for p in self.prompts)

    @property
    def trace(self) -> TraceWorkload | None:
        """The trace replayed, if the dataset is one."""
        return self.dataset if isinstance(self.dataset, TraceWorkload) else None

    def check(self) -> None:
        """Refuse settings that contradict each other: what :meth:`check_sweep` refuses, then a
        trace with a request rate or a sweep (the trace gives the send times) or with more requests
        per repeat than it has records.

        :raises InputError: either, or what :meth:`check_sweep` or :meth:`check_turns` refuses.
        """
        self.check_sweep()
        self.check_turns()
        trace = self.trace
        if trace is None:
            return
        if self.sweep is not None:
            raise InputError(
                f"--sweep-rate with the trace {trace.path}: the trace gives every request's send time",
                hint="drop --sweep-rate, or sweep a generated dataset (--dataset random)",
            )
        if self.open_loop:
            raise InputError(
                f"--request-rate {self.request_rate:g} with the trace {trace.path}: the trace gives "
                "every request's send time",
                hint="drop --request-rate, or scale the recorded times with --trace-time-scale",
            )
        if self.requests is not None and self.requests > trace.size:
            raise InputError(
                f"requests = {self.requests} per repeat, but the trace {trace.path} has "
                f"{trace.size} records: a repeat replays the trace once from its start",
                hint=f"ask for at most {trace.size} requests (the default is the whole trace)",
            )

    def warmup_at(self, concurrency: int) -> int:
        """Warm-up requests before a level: ``max(warmup, concurrency)``, none when ``warmup`` is 0."""
        return max(self.warmup, concurrency) if self.warmup else 0

    @property
    def open_loop(self) -> bool:
        """Requests are sent at ``request_rate`` (a finite rate), not all at once under the cap."""
        return not math.isinf(self.request_rate)

    def prompt_order(self, count: int) -> list[Prompt]:
        """``count`` prompts in a fixed order drawn with ``seed``: the same for every server and level."""
        order = list(self.prompts)
        random.Random(self.seed).shuffle(order)
        return [order[i % len(order)] for i in range(count)]

    def draw(self, start: int, count: int) -> list[str]:
        """The texts of requests ``start .. start + count - 1`` of a server's run: position ``i``
        is prompt ``i % len(prompts)`` of the shuffled order, tagged ``"[k] "`` in its ``k``-th
        pass over the set (``k >= 2``), so no two positions share a text or its first words; with
        a generated dataset, its requests (:meth:`requests`)."""
        return [p.text for p in self.draw_requests(start, count)]

    def draw_requests(self, start: int, count: int) -> list[Prompt]:
        """The requests at positions ``start .. start + count - 1`` of a server's run (:meth:`draw`'s
        texts); a generated dataset's carry their own output and input tokens (and a trace's, their
        arrival), drawn with ``seed``.

        :raises InputError: a generated dataset ran out of distinct prompts (too short for its vocabulary).
        """
        if self.dataset is not None:
            return self.dataset.items(start, count, self.seed)
        order = self.prompt_order(len(self.prompts))
        n = len(order)
        return [
            Prompt(p.id, p.text, output_len=p.output_len, input_len=p.input_len, turns=p.turns)
            if i < n
            else Prompt(p.id, f"[{i // n + 1}] {p.text}", output_len=p.output_len, turns=p.turns)
            for i in range(start, start + count)
            for p in (order[i % n],)
        ]

    def repeat_start(self, drawn: int) -> int:
        """Where a measured repeat starts after ``drawn`` requests: ``drawn``; for a trace, the first
        record of its next pass, so every repeat replays the trace from the start with new text."""
        size = self.dataset.size if self.dataset is not None else None
        return -(-drawn // size) * size if size else drawn

    def schedule(self, items: Sequence[Prompt], rate: float | None = None) -> tuple[float, ...] | None:
        """Intended send times (seconds from the first) of a measured repeat's ``items``: a trace's
        recorded times x its time scale; at ``rate`` requests/s (default ``request_rate``; a sweep's
        level passes its own) open loop, vLLM's arrivals (:func:`envforge.bench.arrivals.arrival_times`);
        None closed loop (an infinite rate: all due at once)."""
        trace = self.trace
        if trace is not None:
            return trace.schedule(list(items))
        rate = self.request_rate if rate is None else rate
        if not math.isinf(rate):
            return arrival_times(len(items), rate, self.burstiness, self.seed)
        return None

    def with_overrides(self, **changes: Any) -> SmokeConfig:
        """A copy with CLI overrides applied (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict[str, Any]:
        """The settings that determine comparability, JSON-able, keys in a fixed order."""
        return {
            "model": self.model,
            "api": self.api,
            "prompts-digest": self.prompts_digest,
            "prompts": len(self.prompts),
            "seed": self.seed,
            "dataset": self.dataset.as_dict() if self.dataset is not None else {"name": "prompts"},
            "max-new-tokens": None if self.per_request else self.max_new_tokens,
            "output-lengths": self.output_lengths,
            **({"turns": self.turns} if self.turns > 1 else {}),
            "temperature": self.temperature,
            "concurrency": list(self.concurrency),
            "repeats": self.repeats,
            "warmup": self.warmup,
            "requests": self.requests,
            "request-timeout-s": self.request_timeout_s,
            "idle-timeout-s": self.idle_timeout_s,
            "interleave": self.interleave,
            "flush-cache": self.flush_cache or None,
            "slo": self.slo.as_dict() if self.slo.targets else None,
            "request-rate": None if math.isinf(self.request_rate) else self.request_rate,
            "burstiness": self.burstiness,
            **({"served-model-name": self.served_model_name} if self.served_model_name else {}),
            **({"sweep-rate": self.sweep.as_dict()} if self.sweep is not None else {}),
            **({"percentiles": list(self.percentiles)} if self.percentiles else {}),
        }

    def check_turns(self) -> None:
        """With ``turns`` above 1 (multi-turn): an engine that sends a conversation's history (``api =
        "openai-chat"``), a prompt set (a generated dataset has no later turns) with at least one
        conversation of two user turns.

        :raises InputError: any of these is missing, with what to change.
        """
        if self.turns == 1:
            return
        if not self.engine.conversations:
            raise InputError(
                f"--turns {self.turns} with --api {self.api}: only the chat route sends a conversation's history",
                hint="add --api openai-chat (the server applies its chat template to the messages)",
            )
        if self.dataset is not None:
            raise InputError(
                f"--turns {self.turns} with a generated dataset: its requests have no later turns",
                hint="give a ShareGPT file of conversations with --prompts FILE.json",
            )
        if not any(p.turns for p in self.prompts):
            raise InputError(
                f"--turns {self.turns}: no conversation of the prompt set has a second user turn",
                hint="give a ShareGPT file whose entries have a third turn (user, model, user, ...)",
            )

    def check_sweep(self) -> None:
        """With :attr:`sweep`: the settings a saturation sweep needs (:mod:`envforge.bench.sweep`).

        :raises InputError: no SLO targets (nothing to meet), a fixed ``--request-rate`` besides it,
            several concurrency levels (the sweep varies the rate under one cap), or interleaving (a
            sweep picks each rate from the levels before it).
        """
        if self.sweep is None:
            return
        if not self.slo.targets:
            raise InputError(SWEEP_NEEDS_SLO[0], hint=SWEEP_NEEDS_SLO[1])
        if self.open_loop:
            raise InputError(
                f"--sweep-rate and --request-rate {self.request_rate:g} contradict each other: the "
                "sweep picks the rates",
                hint="drop --request-rate",
            )
        if len(self.concurrency) != 1:
            raise InputError(
                f"--sweep-rate measures one concurrency cap, but {len(self.concurrency)} levels are "
                f"set ({', '.join(map(str, self.concurrency))})",
                hint="give --concurrency N: the most requests in flight at any rate (vLLM's --max-concurrency)",
            )
        if self.interleave:
            raise InputError(
                "--sweep-rate cannot interleave servers: each rate is chosen from the levels before it",
                hint="drop --interleave (or interleave = true from [verify.smoke])",
            )


def shipped_prompts() -> Path:
    """The prompt set shipped with envforge (``envforge/data/prompts/smoke.jsonl``)."""
    return Path(str(resources.files("envforge") / "data" / "prompts" / "smoke.jsonl"))


#: The largest prompt set read (1 GiB): ShareGPT_V3_unfiltered_cleaned_split.json, the set vLLM's
#: benchmarks use, is about 642 MB; past this a file is a wrong path, not prompts.
PROMPTS_LIMIT = 1 << 30


def load_prompts(path: Path) -> tuple[tuple[Prompt, ...], str]:
    """Read a prompt set: a JSON-lines file of one ``{"prompt": "..."}`` object a line (blank lines
    skipped), or a ShareGPT-format JSON array (a file whose first non-blank byte is ``[``;
    :func:`envforge.bench.dataset.sharegpt_prompts`; a first turn seen before is left out, so no two
    prompts of the set are the same text).

    :returns: the prompts and ``sha256:<hex>`` of the file bytes.
    :raises InputError: unreadable, missing, a device (``/dev/zero``) or larger than
        :data:`PROMPTS_LIMIT` (:func:`envforge.core.textfile.read_bytes`; a pipe is read to the limit),
        a line that is not such an object, a malformed ShareGPT file, or no prompts.
    """
    raw = read_bytes(
        path,
        what="prompt set",
        limit=PROMPTS_LIMIT,
        hint="give a JSON-lines prompt file or a ShareGPT JSON file (docs/bench.md)",
    )
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    if raw.lstrip()[:1] == b"[":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise InputError(f"{path}: not valid JSON: {getattr(exc, 'msg', type(exc).__name__)}") from None
        except ValueError as exc:  # a number of more digits than CPython converts
            raise long_number_error(str(path), raw, exc) from None
        pairs: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        for (text, reply), later in zip(sharegpt_prompts(data, path), sharegpt_turns(data, path), strict=True):
            pairs.setdefault(text, (reply, later))  # first occurrence of each text, in file order
        return tuple(Prompt(i, t, reply=r, turns=k) for i, (t, (r, k)) in enumerate(pairs.items())), digest
    prompts: list[Prompt] = []
    for n, data_line in enumerate(raw.splitlines(), start=1):
        if not data_line.strip():
            continue
        try:
            obj = json.loads(data_line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{path}:{n}: not UTF-8 text (byte {exc.start + 1} of the line)",
                hint="save the prompt set as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
            ) from None
        except RecursionError:
            raise InputError(f"{path}:{n}: not valid JSON: nested too deeply") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{n}: not valid JSON: {exc.msg}") from None
        except ValueError as exc:  # a number of more digits than CPython converts
            raise long_number_error(f"{path}:{n}", data_line, exc, lines=False) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"]:
            raise InputError(f'{path}:{n}: expected an object {{"prompt": "<non-empty text>"}}')
        prompts.append(Prompt(len(prompts), obj["prompt"]))
    if not prompts:
        raise InputError(f"{path}: the prompt set is empty")
    return tuple(prompts), digest


def smoke_config(verify: Mapping[str, Any], recipe_path: Path) -> SmokeConfig:
    """Build a :class:`SmokeConfig` from a recipe's already shape-validated ``[verify]`` table.

    A relative ``prompts`` path is taken relative to the recipe file.

    :raises InputError: no ``[verify.smoke]``, no ``model``, an unknown ``api``, duplicate server
        names, a bad prompt set, or a bad dataset (:func:`envforge.bench.workload.build_workload`:
        a key of another dataset, a value out of range, no tokenizer, a bad trace line). (No
        servers is allowed: ``--url`` measures a running one.)
    """
    smoke = verify.get("smoke")
    where = f"{recipe_path}: verify.smoke"
    if not smoke:
        raise InputError(
            f"{recipe_path}: the recipe has no [verify.smoke] table",
            hint="add [verify.smoke] with model and [[verify.smoke.servers]], see docs/bench.md",
        )
    if "model" not in smoke:
        raise InputError(f"{where}: 'model' is required", hint='e.g. model = "moonshotai/Kimi-K2.5"')
    servers = tuple(
        ServerConfig(
            s["name"],
            tuple(s["args"]),
            dict(s.get("env", {})),
            bool(s.get("speculative")),
            s.get("model"),
            s.get("served-model-name"),
        )
        for s in smoke.get("servers", ())
    )
    _check_servers(servers, where)
    for key in ("request-timeout-s", "idle-timeout-s"):
        if key in smoke and not smoke[key] > 0:
            raise InputError(f"{where}.{key}: must be > 0 seconds, got {smoke[key]}")
    dataset = build_workload(smoke, base=recipe_path.parent, model=smoke["model"], label=lambda key: f"{where}.{key}")
    prompts_path = Path(smoke["prompts"]) if "prompts" in smoke else shipped_prompts()
    if not prompts_path.is_absolute():
        prompts_path = recipe_path.parent / prompts_path
    prompts, digest = load_prompts(prompts_path)
    api = smoke.get("api", "sglang")
    try:
        eng = engine(api)
    except InputError as exc:
        raise InputError(f"{where}.api: {exc.message}", hint=exc.hint) from None
    return SmokeConfig(
        model=smoke["model"],
        api=api,
        servers=servers,
        prompts=prompts,
        prompts_digest=digest,
        seed=smoke.get("seed", 0),
        max_new_tokens=smoke.get("max-new-tokens", 128),
        temperature=float(smoke.get("temperature", 0.0)),
        concurrency=tuple(smoke.get("concurrency", (1, 4, 16, 32))),
        repeats=smoke.get("repeats", 3),
        warmup=smoke.get("warmup", 2),
        requests=smoke.get("requests"),
        load_timeout_s=smoke.get("load-timeout-s", DEFAULT_LOAD_TIMEOUT_S),
        port=smoke.get("port", DEFAULT_PORT),
        health=smoke.get("health", eng.health),
        request_timeout_s=float(smoke.get("request-timeout-s", DEFAULT_REQUEST_TIMEOUT_S)),
        idle_timeout_s=float(smoke.get("idle-timeout-s", DEFAULT_IDLE_TIMEOUT_S)),
        interleave=bool(smoke.get("interleave", False)),
        flush_cache=smoke.get("flush-cache", eng.flush),
        served_model_name=smoke.get("served-model-name"),
        dataset=dataset,
        output_lengths=smoke.get("output-lengths", "exact"),
        turns=smoke.get("turns", 1),
        percentiles=parse_percentiles(",".join(f"{p}" for p in smoke["percentiles"]), source=f"{where}.percentiles")
        if smoke.get("percentiles")
        else (),
    )


def url_config(*, api: str, model: str | None) -> SmokeConfig:
    """Settings for ``bench --url`` without a recipe's ``[verify.smoke]``: defaults, the shipped
    prompt set, no server configurations; the CLI applies its flags with :meth:`SmokeConfig.with_overrides`.

    :raises InputError: an unknown ``api``, or no model for an engine whose requests name it
        (``openai``, ``vllm``).
    """
    eng = engine(api)
    if model is None and eng.needs_model:
        raise InputError(
            f"--url with --api {api} needs the served model's name",
            hint="pass --model NAME (what GET /v1/models lists), or a recipe with [verify.smoke]",
        )
    prompts, digest = load_prompts(shipped_prompts())
    return SmokeConfig(
        model=model or "default",
        api=api,
        servers=(),
        prompts=prompts,
        prompts_digest=digest,
        health=eng.health,
        flush_cache=eng.flush,
    )


def _check_servers(servers: Sequence[ServerConfig], where: str) -> None:
    seen: set[str] = set()
    for i, s in enumerate(servers):
        if s.name in seen:
            raise InputError(f"{where}.servers[{i}].name: '{s.name}' is used twice; names must be unique")
        seen.add(s.name)


def inert_patch_warnings(server_args: Sequence[str], activations: Iterable[tuple[str, str | None]]) -> list[str]:
    """Warnings for applied patchsets that a launch configuration leaves inert.

    A patchset may name the launch flag that activates it (e.g. sglang 0.5.9 enables flashinfer
    all-reduce fusion by itself only on SM90/SM100, so on SM120 the ``sm120-flashinfer-allreduce-fusion``
    patch does nothing without ``--enable-flashinfer-allreduce-fusion``; docs/design.md decision 4).

    :param server_args: the server's argv after the interpreter.
    :param activations: ``(patchset id, activation flag or None)`` pairs, e.g. from
        ``envforge.patching.load_patchsets(dir)`` as ``(p.id, p.activation)``.
    :returns: one line per inert patchset, in input order; flags given as ``--flag=value`` count.
    """
    present = {a.split("=", 1)[0] for a in server_args}
    return [
        f"patchset '{pid}' is applied but inert: the launch arguments lack {flag}"
        for pid, flag in activations
        if flag and flag.split("=", 1)[0] not in present
    ]
