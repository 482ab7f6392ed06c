"""Registration of ``envforge bench [ENV]`` and ``envforge bench compare A.json B.json`` (handlers:
:mod:`envforge.cli.bench`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.bench.dataset import DATASETS
from envforge.bench.engines import ENGINES
from envforge.bench.sweep import DEFAULT_MAX_STEPS, DEFAULT_PRECISION, parse_range
from envforge.cli.commands import SUMMARIES
from envforge.cli.parser import MAX_SECONDS, PORT, group, group_parser, integer, report_file, seconds
from envforge.core.limits import MAX_CONCURRENCY, MAX_REPEATS, MAX_REQUEST_TOKENS, MAX_REQUESTS, MAX_SEED, MAX_TURNS

__all__ = ["register"]


def _levels(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers, e.g. 1,4,16") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': concurrency levels must be >= 1")
    if max(values) > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"'{text}': concurrency levels must be <= {MAX_CONCURRENCY}")
    return values


def _float(text: str, example: str) -> float:
    """``text`` as a float, or a usage error giving ``example``."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number, e.g. {example}") from None


def _fraction(text: str) -> float:
    value = _float(text, "0.1 for 10%")
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"'{text}': use a fraction >= 0, e.g. 0.1 for 10%")
    return value


def _attainment(text: str) -> float:
    value = _float(text, "0.9 for 90%")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"'{text}': use a fraction in (0, 1], e.g. 0.9 for 90%")
    return value


def _positive(text: str, what: str, example: str) -> float:
    value = _float(text, example)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"'{text}': {what} must be > 0 (inf allowed), e.g. {example}")
    return value


def _range_ratio(text: str) -> float:
    value = _float(text, "0.5")
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f"'{text}': the range ratio must be in [0, 1) (vLLM's rule), e.g. 0.5 "
            "for lengths from half to 1.5 times the mean"
        )
    return value


def _time_scale(text: str) -> float:
    value = _positive(text, "the time scale", "2 to replay twice as slow")
    if value == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}': the time scale must be finite, e.g. 2 to replay twice as slow")
    return value


def _rate(text: str) -> float:
    return _positive(text, "the request rate", "10 for 10 requests/s")


def _burstiness(text: str) -> float:
    return _positive(text, "the burstiness", "1 for Poisson arrivals")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds, e.g. 0.5 (0: do not read)") from None
    if not (value == 0 or 0.1 <= value <= 3600):
        raise argparse.ArgumentTypeError(f"'{text}': use 0 (do not read) or 0.1 to 3600 seconds, e.g. 0.5")
    return value


def _sweep_range(text: str) -> tuple[float, float]:
    try:
        return parse_range(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _precision(text: str) -> float:
    value = _float(text, "0.1 for 10%")
    if not 0.001 <= value <= 1:
        raise argparse.ArgumentTypeError(f"'{text}': use a fraction from 0.001 to 1, e.g. 0.1 for 10%")
    return value


def _bench_env(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "env",
        nargs="?",
        metavar="ENV",
        help="environment name under envs/ or a path to a virtual environment "
        "(default: the recipe's <recipe>-<variant>)",
    )


def _bench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--recipe", metavar="RECIPE", help="recipe name or path (default: the project's, docs/cli.md)")
    p.add_argument("--variant", metavar="VARIANT", help="recipe variant (default: the only one)")
    p.add_argument(
        "--project", type=Path, default=None, metavar="DIR", help="project directory (default: nearest with recipes/)"
    )
    p.add_argument("--url", metavar="URL", help="measure the server already running at this URL; start nothing")
    p.add_argument(
        "--keep-pythonpath",
        action="store_true",
        help="start servers with the caller's PYTHONPATH (dropped by default: it shadows the environment)",
    )
    p.add_argument(
        "--name", default="url", metavar="NAME", help="name of the --url server in the report (default: url)"
    )
    p.add_argument("--speculative", action="store_true", help="the --url server runs speculative decoding")
    p.add_argument(
        "--api",
        choices=ENGINES,
        help="--url without a recipe's [verify.smoke]: the server's API (default: recognised from "
        "the server's /v1/models or /metrics, else sglang)",
    )
    p.add_argument(
        "--model", metavar="MODEL", help="override the model (the served model's name for --api openai/vllm)"
    )
    p.add_argument(
        "--server", action="append", default=[], metavar="NAME", help="run only this server configuration (repeatable)"
    )
    p.add_argument(
        "--concurrency",
        "--max-concurrency",
        type=_levels,
        metavar="LEVELS",
        help="override the concurrency levels, e.g. 1,4,16: with --request-rate, the cap on requests "
        "in flight of each level (vLLM's --max-concurrency)",
    )
    p.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help='override the prompt set: JSON lines of {"prompt": ...} or a ShareGPT-format JSON '
        "file (the first turn of each conversation, as vLLM's sharegpt dataset)",
    )
    p.add_argument(
        "--dataset",
        "--dataset-name",
        choices=DATASETS,
        dest="dataset",
        help="what to send (default: the recipe's, else prompts): prompts (--prompts FILE), random "
        "(vLLM's), shared-prefix (SGLang's generated-shared-prefix), trace (a Mooncake-format "
        "trace replayed at its recorded times); the last three give each request its own lengths",
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        metavar="DIR",
        help="directory with the model's tokenizer.json, read offline, to count input tokens of the "
        "random, shared-prefix and trace datasets (default: the model, when it is such a directory)",
    )
    p.add_argument(
        "--random-input-len",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="random: mean input tokens per request (default 1024)",
    )
    p.add_argument(
        "--random-output-len",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="random: mean output tokens per request (default 128)",
    )
    p.add_argument(
        "--random-range-ratio",
        type=_range_ratio,
        metavar="R",
        help="random: lengths drawn uniformly from [L x (1 - R), L x (1 + R)], R in [0, 1) (default 0)",
    )
    p.add_argument(
        "--gsp-num-groups",
        type=integer(1, MAX_REQUESTS),
        metavar="N",
        help="shared-prefix: groups, one system prompt each (default 64)",
    )
    p.add_argument(
        "--gsp-prompts-per-group",
        type=integer(1, MAX_REQUESTS),
        metavar="N",
        help="shared-prefix: questions per system prompt (default 16)",
    )
    p.add_argument(
        "--gsp-system-prompt-len",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="shared-prefix: system prompt tokens (default 2048)",
    )
    p.add_argument(
        "--gsp-question-len",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="shared-prefix: question tokens (default 128)",
    )
    p.add_argument(
        "--gsp-output-len",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="shared-prefix: output tokens per request (default 256)",
    )
    p.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help='trace: a Mooncake-format JSON-lines trace ({"timestamp": ms, "input_length", '
        '"output_length", "hash_ids"} a line)',
    )
    p.add_argument(
        "--trace-time-scale",
        type=_time_scale,
        metavar="F",
        help="trace: multiply the recorded times by F (2: twice as slow; SGLang's "
        "--mooncake-slowdown-factor; default 1)",
    )
    p.add_argument(
        "--seed",
        type=integer(0, MAX_SEED),
        metavar="N",
        help="the seed of the prompt order, the generated datasets and open-loop arrivals (default 0)",
    )
    p.add_argument(
        "--request-rate",
        type=_rate,
        metavar="REQ_PER_S",
        help="open loop: send requests at this rate (requests/s; inf = all at once, the default)",
    )
    p.add_argument(
        "--burstiness",
        type=_burstiness,
        metavar="B",
        help="with --request-rate: gamma-distributed gaps of shape B (1 = Poisson, the default; "
        "< 1 burstier, > 1 more uniform, inf = constant), as vLLM",
    )
    p.add_argument("--repeats", type=integer(1, MAX_REPEATS), metavar="N", help="override the repeats per level")
    p.add_argument(
        "--requests", type=integer(1, MAX_REQUESTS), metavar="N", help="override the requests per level and repeat"
    )
    p.add_argument("--warmup", type=integer(0, MAX_REQUESTS), metavar="N", help="override the warm-up requests")
    p.add_argument(
        "--max-new-tokens",
        type=integer(1, MAX_REQUEST_TOKENS),
        metavar="N",
        help="override the output tokens per request",
    )
    p.add_argument("--port", type=PORT, metavar="PORT", help="override the port the servers listen on")
    p.add_argument(
        "--load-timeout",
        type=integer(1, int(MAX_SECONDS)),
        metavar="SECONDS",
        help="override the load timeout (default 1800 s)",
    )
    p.add_argument(
        "--request-timeout",
        type=seconds(),
        metavar="SECONDS",
        help="seconds one request may take in total (default 600)",
    )
    p.add_argument(
        "--idle-timeout",
        type=seconds(),
        metavar="SECONDS",
        help="seconds a request may go without progress; keep-alive pings are none (default 120)",
    )
    p.add_argument(
        "--interleave",
        action="store_true",
        default=None,
        help="started servers take turns per repeat (A B A B), each restarted for its turn",
    )
    p.add_argument(
        "--slo",
        nargs="+",
        metavar="METRIC:MS",
        help="latency targets per request, e.g. --slo ttft:200 tpot:50 (metrics ttft, tpot, e2el; "
        "vLLM's --goodput): goodput per level, exit 1 when a level misses the gate",
    )
    p.add_argument(
        "--slo-attainment",
        type=_attainment,
        default=None,
        metavar="FRACTION",
        help="the share of a level's requests that must meet every --slo target (default 0.9, DistServe's 90%%)",
    )
    p.add_argument(
        "--save-detailed",
        action="store_true",
        help="keep one record per measured request in the report (requests: send time, TTFT, each "
        "ITL, E2EL, tokens, status, error; vLLM's --save-detailed)",
    )
    p.add_argument(
        "--csv",
        type=Path,
        default=None,
        metavar="PATH",
        help="also write those per-request records as CSV (implies --save-detailed)",
    )
    p.add_argument(
        "--ca-cert",
        type=Path,
        default=None,
        metavar="PEM",
        help="verify an https --url server with the CA certificates in this file (default: the system's)",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header every request to the server carries (vLLM's --header), repeatable; "
        "OPENAI_API_KEY in the environment is sent as 'Authorization: Bearer <key>'; "
        "neither is written or printed",
    )
    p.add_argument(
        "--output-lengths",
        choices=("exact", "natural"),
        default=None,
        help="exact (default): every request must yield its output tokens (ignore_eos), one that stops "
        "early fails; natural: no ignore_eos, the server stops where it stops (vLLM's default; "
        "a dataset's output lengths are max_tokens), figures over completed requests",
    )
    p.add_argument(
        "--turns",
        type=integer(1, MAX_TURNS),
        default=None,
        metavar="N",
        help="multi-turn chat (with --api openai-chat and a ShareGPT --prompts file): up to N user turns "
        "of each conversation, each sent with the conversation so far and the server's own replies, "
        "measured per turn (default 1)",
    )
    p.add_argument(
        "--percentiles",
        default=None,
        metavar="LIST",
        help="latency percentiles to report beside p90, p95, p99, e.g. 50,99.9 (vLLM's "
        "--metric-percentiles; numpy's linear method)",
    )
    p.add_argument(
        "--sweep-rate",
        type=_sweep_range,
        default=None,
        metavar="LO:HI",
        help="find the highest open-loop rate (requests/s) that meets --slo: LO, doubling up to HI, then "
        "bisection (vllm bench sweep serve_sla's search); needs --slo and one --concurrency",
    )
    p.add_argument(
        "--sweep-precision",
        type=_precision,
        default=None,
        metavar="FRACTION",
        help=f"with --sweep-rate: bisect until the first failing rate is within FRACTION above the "
        f"highest passing one (default {DEFAULT_PRECISION:g})",
    )
    p.add_argument(
        "--sweep-steps",
        type=integer(1, 100),
        default=None,
        metavar="N",
        help=f"with --sweep-rate: measure at most N rates (default {DEFAULT_MAX_STEPS})",
    )
    p.add_argument(
        "--metrics-interval",
        type=_interval,
        default=None,
        metavar="SECONDS",
        help="read the server's metrics route (requests running and waiting, KV cache use) every "
        "SECONDS while a level is measured (default 0.5; 0: do not read)",
    )
    p.add_argument(
        "--output",
        type=report_file,
        default=Path("bench.json"),
        metavar="PATH",
        help="report file (default: bench.json)",
    )
    p.add_argument("--plot", type=Path, metavar="PATH", help="PNG plot file (default: the report name with .png)")
    p.add_argument("--no-plot", action="store_true", help="write no plot")
    p.add_argument("--json", action="store_true", help="print the versioned JSON report on stdout")


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``bench`` group: ``bench [ENV]`` and ``bench compare``."""
    commands = group(
        sub,
        "bench",
        help=SUMMARIES["bench"],
        description="Start each server configuration of the recipe's [verify.smoke] with the environment's "
        "interpreter, wait for its health endpoint, measure output tok/s, TTFT, TPOT, ITL, E2EL "
        "and accept length per concurrency level over repeats, stop it, and write a JSON report "
        "with the environment fingerprint (and a PNG plot). --url measures a running server. "
        "ENV: an environment name under envs/ or a path to a virtual environment.",
        bare=(_bench_env, _bench_options),
        bare_usage="[ENV] [--recipe RECIPE] [--url URL] [options]",
    )
    group_parser(sub, "bench").set_defaults(handler="envforge.cli.bench:_bench", env=None)

    c = commands.add_parser(
        "compare",
        help="compare two bench reports: B / A ratios with intervals",
        description="Compare bench report B against A per server and concurrency level: ratio of median tok/s "
        "with a 95% interval; a change is called only beyond --min-change. Refuses reports of "
        "different or unknown environments (fingerprints, effective variables). Either side may "
        "be a `vllm bench serve --save-result` file: one level of one run (no interval).",
    )
    c.add_argument("a", type=Path, metavar="A.json", help="the earlier report (the baseline)")
    c.add_argument("b", type=Path, metavar="B.json", help="the later report, compared against A")
    c.add_argument(
        "--allow-different-env",
        action="store_true",
        help="compare even when the environment fingerprints differ (the differences are printed)",
    )
    c.add_argument(
        "--min-change",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="smallest change called faster/slower: the whole 95%% interval must lie beyond "
        "1 + FRACTION or below 1 / (1 + FRACTION) (default 0.10: run-to-run drift)",
    )
    c.add_argument("--json", action="store_true", help="print a versioned JSON comparison on stdout")
    c.set_defaults(handler="envforge.cli.bench:_compare")
