"""``[verify.smoke]`` settings, the prompt set, and the inert-patch warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envforge.bench.config import (
    Prompt,
    ServerConfig,
    SmokeConfig,
    inert_patch_warnings,
    load_prompts,
    shipped_prompts,
    smoke_config,
    url_config,
)
from envforge.bench.run import BenchPlan, _prepare
from envforge.core.errors import EnvforgeError, InputError
from envforge.env.fingerprint import Fingerprint
from envforge.recipe.load import load_recipe
from envforge.recipe.model import RecipeError

SGLANG = """
[recipe]
name = "r"
python = "3.12"

[verify.smoke]
model = "moonshotai/Kimi-K2.5"
concurrency = [1, 32]

[[verify.smoke.servers]]
name = "baseline"
args = ["-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}", "--port", "{port}", "--tp", "8"]

[[verify.smoke.servers]]
name = "eagle3"
speculative = true
args = ["-m", "sglang.launch_server", "--model-path", "{model}", "--port", "{port}",
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "3", "--tp", "8"]
env = { SGLANG_ENABLE_SPEC_V2 = "1" }
"""


def config_of(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "r.toml"
    path.write_text(text)
    recipe = load_recipe(path)
    return smoke_config(recipe.resolve().verify, path)


def test_defaults_and_servers(tmp_path: Path) -> None:
    cfg = config_of(tmp_path, SGLANG)
    assert (cfg.api, cfg.seed, cfg.max_new_tokens, cfg.temperature, cfg.repeats, cfg.warmup) == (
        "sglang",
        0,
        128,
        0.0,
        3,
        2,
    )
    assert (cfg.concurrency, cfg.load_timeout_s, cfg.port, cfg.health) == ((1, 32), 1800, 30000, "/health_generate")
    assert [s.name for s in cfg.servers] == ["baseline", "eagle3"]
    assert cfg.servers[1].speculative and cfg.servers[1].env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    assert cfg.servers[0].argv_tail(model="M", port=31000) == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "M",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
        "--tp",
        "8",
    ]
    assert len(cfg.prompts) == 32 and cfg.prompts_digest.startswith("sha256:")
    assert cfg.servers[0].model is None


def test_a_server_may_serve_another_checkpoint(tmp_path: Path) -> None:
    cfg = config_of(tmp_path, SGLANG.replace('name = "eagle3"', 'name = "eagle3"\nmodel = "/models/other"'))
    assert cfg.servers[1].model == "/models/other"


def test_requests_and_prompt_order(tmp_path: Path) -> None:
    cfg = config_of(tmp_path, SGLANG)
    # the default: max(5 x concurrency, 10) (SGLang: num-prompts >= 5 * max-concurrency for steady state)
    assert (cfg.requests_at(1), cfg.requests_at(2), cfg.requests_at(32)) == (10, 10, 160)
    # warm-up before each level: max(warmup, concurrency) at the level's concurrency; none for warmup = 0
    assert (cfg.warmup, cfg.warmup_at(1), cfg.warmup_at(4)) == (2, 2, 4)
    assert cfg.with_overrides(warmup=0).warmup_at(32) == 0
    assert not cfg.open_loop and cfg.with_overrides(request_rate=5.0).open_loop
    assert cfg.with_overrides(requests=8, repeats=None).requests_at(32) == 32
    order = cfg.prompt_order(40)
    assert order == cfg.prompt_order(40) and len({p.id for p in order[:32]}) == 32
    assert order != cfg.with_overrides(seed=1).prompt_order(40)


def test_openai_api_health_default_and_relative_prompts(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "one"}\n\n{"prompt": "two"}\n')
    cfg = config_of(tmp_path, SGLANG.replace("concurrency = [1, 32]", 'api = "openai"\nprompts = "p.jsonl"'))
    assert cfg.health == "/health" and [p.text for p in cfg.prompts] == ["one", "two"]


def test_missing_smoke_model_and_duplicate_names(tmp_path: Path) -> None:
    head = SGLANG.split("[verify.smoke]")[0]
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, head)
    assert exc.value.message == f"{tmp_path / 'r.toml'}: the recipe has no [verify.smoke] table"
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, SGLANG.replace('model = "moonshotai/Kimi-K2.5"', ""))
    assert exc.value.message == f"{tmp_path / 'r.toml'}: verify.smoke: 'model' is required"
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, SGLANG.replace('name = "eagle3"', 'name = "baseline"'))
    assert exc.value.message == (
        f"{tmp_path / 'r.toml'}: verify.smoke.servers[1].name: 'baseline' is used twice; names must be unique"
    )


def test_unknown_smoke_key_is_a_recipe_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="verify.smoke.repeat"):
        config_of(tmp_path, SGLANG.replace("concurrency = [1, 32]", "repeat = 3"))


def test_prompt_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"text": "no"}\n')
    with pytest.raises(InputError) as exc:
        load_prompts(bad)
    assert exc.value.message == f'{bad}:2: expected an object {{"prompt": "<non-empty text>"}}'
    bad.write_text("{\n")
    with pytest.raises(InputError, match=r"bad.jsonl:1: not valid JSON: "):
        load_prompts(bad)
    bad.write_text("\n")
    with pytest.raises(InputError, match=r"bad.jsonl: the prompt set is empty$"):
        load_prompts(bad)
    bad.write_bytes(b'{"prompt": "ok"}\n\xff\xfe{"prompt": "caf\xe9"}\n')  # UTF-16 BOM, Latin-1
    with pytest.raises(InputError) as exc:
        load_prompts(bad)
    assert (exc.value.message, exc.value.hint) == (
        f"{bad}:2: not UTF-8 text (byte 1 of the line)",
        "save the prompt set as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
    )
    with pytest.raises(InputError) as exc:
        load_prompts(Path("/dev/zero"))  # before: read to the end of memory (MemoryError, exit 70)
    assert exc.value.message == "prompt set /dev/zero is not a regular file (a character device)"
    with pytest.raises(InputError) as exc:
        load_prompts(tmp_path)
    assert exc.value.message == f"prompt set {tmp_path} is a directory, not a file"
    bad.write_text('{"prompt": ' + "[" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"bad.jsonl:1: not valid JSON: nested too deeply$"):
        load_prompts(bad)


def test_shipped_prompt_set_is_valid() -> None:
    prompts, digest = load_prompts(shipped_prompts())
    assert len(prompts) == 32 and len(digest) == len("sha256:") + 64


def test_inert_patch_warning_when_activation_flag_is_missing() -> None:
    pairs = [
        ("sm120-flashinfer-allreduce-fusion", "--enable-flashinfer-allreduce-fusion"),
        ("sm120-torch-symm-mem", None),
    ]
    assert inert_patch_warnings(["--tp", "8"], pairs) == [
        "patchset 'sm120-flashinfer-allreduce-fusion' is applied but inert: the launch arguments lack "
        "--enable-flashinfer-allreduce-fusion"
    ]
    assert inert_patch_warnings(["--enable-flashinfer-allreduce-fusion"], pairs) == []
    assert inert_patch_warnings(["--mode=fast"], [("p", "--mode=fast")]) == []
    assert ServerConfig("x", ("{port}{port}",)).argv_tail(model="m", port=1) == ["11"]


def test_shipped_kimi_recipe_activates_every_patchset_it_applies() -> None:
    """bench must not warn about the recipe's own activation flags (sm120-torch-symm-mem, fusion)."""
    from envforge.patching import load_patchsets
    from envforge.recipe.load import load_recipe

    root = Path(__file__).parents[2]
    recipe = load_recipe(root / "recipes" / "kimi-k25-sm120.toml")
    resolved = recipe.resolve("cu128")
    cfg = smoke_config(resolved.verify, recipe.path)
    # the patchsets the variant applies (retired ones never reach an environment)
    activations = [(p.id, p.activation) for p in load_patchsets(root / "patchsets", resolved.patchsets)]
    assert ("sm120-torch-symm-mem", "--enable-torch-symm-mem") in activations
    for s in cfg.servers:
        assert inert_patch_warnings(s.argv_tail(model=cfg.model, port=cfg.port), activations) == [], s.name


def test_draw_gives_every_request_its_own_prompt() -> None:
    prompts = tuple(Prompt(i, f"p{i}") for i in range(3))
    cfg = SmokeConfig(model="m", api="openai", servers=(), prompts=prompts, prompts_digest="sha256:00", seed=0)
    order = [p.text for p in cfg.prompt_order(3)]
    assert cfg.draw(0, 7) == order + [f"[2] {t}" for t in order] + [f"[3] {order[0]}"]
    assert cfg.draw(2, 2) == [order[2], f"[2] {order[0]}"]
    assert len(set(cfg.draw(0, 100))) == 100


def test_timeouts_and_new_keys_are_read(tmp_path: Path) -> None:
    recipe = tmp_path / "r.toml"
    cfg = smoke_config(
        {"smoke": {"model": "m", "api": "openai", "request-timeout-s": 30, "idle-timeout-s": 5, "interleave": True}},
        recipe,
    )
    assert (cfg.request_timeout_s, cfg.idle_timeout_s, cfg.interleave, cfg.flush_cache) == (30.0, 5.0, True, "")
    assert smoke_config({"smoke": {"model": "m"}}, recipe).flush_cache == "/flush_cache"
    assert cfg.as_dict()["request-timeout-s"] == 30.0 and cfg.as_dict()["flush-cache"] is None
    with pytest.raises(InputError) as exc:
        smoke_config({"smoke": {"model": "m", "idle-timeout-s": 0}}, recipe)
    assert exc.value.message == f"{recipe}: verify.smoke.idle-timeout-s: must be > 0 seconds, got 0"


def test_url_config_needs_a_model_for_openai() -> None:
    with pytest.raises(InputError) as exc:
        url_config(api="openai", model=None)
    assert exc.value.message == "--url with --api openai needs the served model's name"
    cfg = url_config(api="sglang", model=None)
    assert (cfg.model, cfg.health, cfg.flush_cache, cfg.servers) == ("default", "/health_generate", "/flush_cache", ())


VLLM = """
[recipe]
name = "r"
python = "3.12"

[verify.smoke]
model = "/models/target"
served-model-name = "tiny"
api = "vllm"

[[verify.smoke.servers]]
name = "baseline"
args = ["-m", "vllm.entrypoints.cli.main", "serve", "{model}", "--served-model-name", "{served_model_name}",
        "--port", "{port}"]

[[verify.smoke.servers]]
name = "other"
served-model-name = "tiny-2"
args = ["-m", "vllm.entrypoints.cli.main", "serve", "{model}", "--served-model-name", "{served_model_name}"]
"""


def test_served_model_name_is_what_the_flag_and_the_requests_name(tmp_path: Path) -> None:
    """vLLM answers a request naming the checkpoint path with 404 when --served-model-name is set
    (seen on the H200): the requests carry the served name, and the flag gets the same string."""
    cfg = config_of(tmp_path, VLLM)
    assert (cfg.model, cfg.served_model_name) == ("/models/target", "tiny")
    assert [s.served_model_name for s in cfg.servers] == [None, "tiny-2"]
    assert cfg.as_dict()["served-model-name"] == "tiny"
    plan = BenchPlan(
        cfg, Path(sys.executable), {}, tmp_path, Fingerprint(None, None, None, None), site_packages=tmp_path
    )
    names = []
    for server in cfg.servers:
        started, _ = _prepare(plan, server, lambda _line: None)
        names.append((started.launch.argv[5:7], started.session.opts.model))
    assert names == [(("--served-model-name", "tiny"), "tiny"), (("--served-model-name", "tiny-2"), "tiny-2")]
    assert ServerConfig("s", ("{served_model_name}",)).argv_tail(model="M", port=1) == ["M"]  # default: the model


def test_the_recipe_names_a_dataset_and_its_settings(tmp_path: Path) -> None:
    """``dataset`` and its keys in [verify.smoke]: paths relative to the recipe, the tokenizer from the
    model's directory by default; a value out of range names the recipe key, a key of another dataset
    is refused, and a length of 0 is a recipe (schema) error."""
    from tests.support.bench_support import make_tiny_model

    from envforge.bench.workload import RandomWorkload, TraceWorkload

    model = make_tiny_model(tmp_path / "model")
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    random = SGLANG.replace(
        "concurrency = [1, 32]",
        f'model = "{model}"\ndataset = "random"\nrandom-input-len = 64\n'
        "random-output-len = 16\nrandom-range-ratio = 0.25",
    ).replace('model = "moonshotai/Kimi-K2.5"\n', "", 1)
    cfg = config_of(tmp_path, random)
    assert isinstance(cfg.dataset, RandomWorkload) and cfg.per_request
    with pytest.raises(InputError) as turns:  # multi-turn needs a conversation's later turns
        cfg.with_overrides(turns=2, api="openai-chat").check()
    assert (turns.value.message, turns.value.hint) == (
        "--turns 2 with a generated dataset: its requests have no later turns",
        "give a ShareGPT file of conversations with --prompts FILE.json",
    )
    assert (cfg.dataset.input_len, cfg.dataset.output_len, cfg.dataset.range_ratio) == (64, 16, 0.25)
    assert cfg.dataset.tokenizer.path == model / "tokenizer.json"
    assert cfg.as_dict()["dataset"] == {
        "name": "random",
        "random-input-len": 64,
        "random-output-len": 16,
        "random-range-ratio": 0.25,
        "tokenizer": cfg.dataset.tokenizer.digest,
    }
    trace = config_of(
        tmp_path,
        SGLANG.replace(
            "concurrency = [1, 32]", 'dataset = "trace"\ntrace = "t.jsonl"\ntokenizer = "model"\ntrace-time-scale = 3'
        ),
    )
    assert isinstance(trace.dataset, TraceWorkload) and trace.dataset.path == tmp_path / "t.jsonl"
    assert trace.dataset.time_scale == 3.0 and trace.requests_at(8) == 1
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, random.replace("random-range-ratio = 0.25", "random-range-ratio = 1.5"))
    assert exc.value.message == f"{tmp_path / 'r.toml'}: verify.smoke.random-range-ratio: must be in [0, 1), got 1.5"
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, random.replace('dataset = "random"', 'dataset = "random"\ngsp-num-groups = 4'))
    assert exc.value.message == (
        f"{tmp_path / 'r.toml'}: verify.smoke.gsp-num-groups: a setting of dataset "
        "'shared-prefix', but the dataset is 'random'"
    )
    with pytest.raises(RecipeError, match="verify.smoke.random-output-len"):
        config_of(tmp_path, random.replace("random-output-len = 16", "random-output-len = 0"))
    with pytest.raises(RecipeError, match="verify.smoke.dataset"):
        config_of(tmp_path, random.replace('dataset = "random"', 'dataset = "sharegpt"'))


def test_the_recipe_schema_lists_exactly_the_datasets_and_their_keys() -> None:
    """The recipe layer sits below bench and lists the datasets and their keys on its own."""
    from envforge.bench.dataset import DATASETS, KEYS
    from envforge.recipe.schema import _SMOKE

    assert _SMOKE.keys["dataset"].check("x") == (  # type: ignore[attr-defined]
        f"must be one of {', '.join(repr(d) for d in DATASETS)}, got 'x'"
    )
    keys = {k for name, ks in KEYS.items() for k in ks} | {"dataset", "tokenizer"}
    assert keys <= set(_SMOKE.keys)


def test_output_lengths_and_percentiles_from_the_recipe(tmp_path: Path) -> None:
    cfg = config_of(
        tmp_path,
        SGLANG.replace("[verify.smoke]\n", '[verify.smoke]\noutput-lengths = "natural"\npercentiles = [50, 99.9]\n', 1),
    )
    assert (cfg.output_lengths, cfg.natural, cfg.percentiles) == ("natural", True, (50.0, 99.9))
    assert cfg.as_dict()["output-lengths"] == "natural" and cfg.as_dict()["percentiles"] == [50.0, 99.9]
    plain = config_of(tmp_path, SGLANG)
    assert (plain.output_lengths, plain.natural, plain.percentiles) == ("exact", False, ())
    assert "percentiles" not in plain.as_dict()
    with pytest.raises(InputError) as exc:
        config_of(tmp_path, SGLANG.replace("[verify.smoke]\n", "[verify.smoke]\npercentiles = [50, 0]\n", 1))
    assert exc.value.message.endswith(
        "verify.smoke.percentiles '50,0': '0' is not a percentile (a number above 0, at most 100)"
    )
    with pytest.raises(EnvforgeError) as exc2:
        config_of(tmp_path, SGLANG.replace("[verify.smoke]\n", '[verify.smoke]\noutput-lengths = "short"\n', 1))
    assert "verify.smoke.output-lengths: must be one of 'exact', 'natural', got 'short'" in exc2.value.message


def test_turns_need_the_chat_route_a_prompt_set_and_a_conversation(tmp_path: Path) -> None:
    sharegpt = Path(__file__).parents[1] / "data" / "bench" / "sharegpt_small.json"
    chat = SGLANG.replace(
        "[verify.smoke]\n", f'[verify.smoke]\nturns = 3\napi = "openai-chat"\nprompts = "{sharegpt}"\n', 1
    )
    cfg = config_of(tmp_path, chat)
    cfg.check()
    assert cfg.turns == 3 and cfg.as_dict()["turns"] == 3
    assert "turns" not in config_of(tmp_path, SGLANG).as_dict() and config_of(tmp_path, SGLANG).turns == 1
    with pytest.raises(InputError) as exc:
        cfg.with_overrides(api="openai").check()
    assert (exc.value.message, exc.value.hint) == (
        "--turns 3 with --api openai: only the chat route sends a conversation's history",
        "add --api openai-chat (the server applies its chat template to the messages)",
    )
    with pytest.raises(InputError) as exc:
        cfg.with_overrides(prompts=tuple(p for p in cfg.prompts if not p.turns)).check()
    assert exc.value.message == "--turns 3: no conversation of the prompt set has a second user turn"
    with pytest.raises(EnvforgeError) as exc2:
        config_of(tmp_path, SGLANG.replace("[verify.smoke]\n", "[verify.smoke]\nturns = 0\n", 1))
    assert "verify.smoke.turns" in exc2.value.message
    drawn = cfg.draw_requests(0, 6)  # two passes over the 3 prompts: the second tags the text ("[2] ...")
    asked = [p for p in drawn if "Name two ways" in p.text]
    assert len(asked) == 2 and all(p.turns == ("Which one does vLLM use?",) for p in asked)
    assert all(p.turns == () for p in drawn if p not in asked)
