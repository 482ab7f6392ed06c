"""The generated and replayed datasets: vLLM's random lengths, SGLang's shared prefix, a Mooncake
trace's arrivals and shared blocks; every request's own lengths, distinct texts, and bad settings
refused (exit 2). Tokenizers are real: the tiny test model's word-level tokenizer.json and a
byte-level BPE trained here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.support.bench_support import make_bpe_tokenizer, make_tiny_model

from envforge.bench.config import SmokeConfig
from envforge.bench.dataset import Prompt
from envforge.bench.workload import RandomWorkload, SharedPrefixWorkload, TraceWorkload, build_workload
from envforge.core.errors import InputError

SMALL = Path(__file__).parents[1] / "data" / "bench" / "mooncake_trace_small.jsonl"


def shared(a: list[str], b: list[str]) -> int:
    """How many leading words ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def flag(key: str) -> str:
    return f"--{key}"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("m") / "model")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_bpe_tokenizer(tmp_path_factory.mktemp("t") / "bpe")


def build(model: Path, **settings: object) -> object:
    return build_workload(
        {k.replace("_", "-"): v for k, v in settings.items()}, base=SMALL.parent, model=str(model), label=flag
    )


def test_random_draws_vllms_ranges_and_counts_every_prompt(model: Path, bpe: Path) -> None:
    w = build(model, dataset="random", random_input_len=16, random_output_len=8, random_range_ratio=0.5)
    assert isinstance(w, RandomWorkload) and w.tokenizer.specials == 0
    assert w.bounds() == ((8, 24), (4, 12))  # floor(16 x 0.5), ceil(16 x 1.5); floor(8 x 0.5), ceil(8 x 1.5)
    items = w.items(0, 60, seed=0)
    assert [p.id for p in items] == list(range(60)) and len({p.text for p in items}) == 60
    assert all(8 <= (p.input_len or 0) <= 24 and 4 <= (p.output_len or 0) <= 12 for p in items)
    assert all(p.input_len == w.tokenizer.count(p.text) == len(p.text.split()) for p in items)
    assert len({p.output_len for p in items}) > 5 and len({p.input_len for p in items}) > 5  # they vary
    # position i depends on the seed and i only: a second server gets the same; another seed not
    again = build(model, dataset="random", random_input_len=16, random_output_len=8, random_range_ratio=0.5)
    assert again.items(10, 5, seed=0) == items[10:15] and w.items(10, 5, seed=0) == items[10:15]
    assert w.items(0, 5, seed=1) != items[:5]
    d = w.describe(0)
    assert list(d) == [
        "name",
        "parameters",
        "seed",
        "tokenizer",
        "lengths",
        "prompts",
        "input_tokens",
        "output_tokens",
        "off_target",
    ]
    assert (d["name"], d["parameters"], d["seed"], d["prompts"], d["off_target"]) == (
        "random",
        {"random-input-len": 16, "random-output-len": 8, "random-range-ratio": 0.5},
        0,
        60,
        0,
    )
    assert d["tokenizer"] == {"path": str(model / "tokenizer.json"), "digest": w.tokenizer.digest, "special_tokens": 0}
    assert d["input_tokens"]["min"] >= 8 and d["output_tokens"]["max"] <= 12
    assert w.as_dict() == {
        "name": "random",
        "random-input-len": 16,
        "random-output-len": 8,
        "random-range-ratio": 0.5,
        "tokenizer": w.tokenizer.digest,
    }
    # with a BOS: the drawn part is the length less the special token, and the count includes it
    b = build(model, dataset="random", tokenizer=str(bpe), random_input_len=33, random_output_len=8)
    assert b.bounds() == ((32, 32), (8, 8))
    assert {(p.input_len, p.output_len) for p in b.items(0, 20, seed=0)} == {(33, 8)}
    assert b.describe(0)["off_target"] == 0


def test_no_two_requests_share_a_text_even_when_the_vocabulary_runs_out(model: Path) -> None:
    """One-token prompts over a 281-token vocabulary: 281 distinct texts, then no more (exit 2)."""
    w = build(model, dataset="random", random_input_len=1, random_output_len=2)
    items = w.items(0, len(w.tokenizer.allowed), seed=0)
    assert len({p.text for p in items}) == len(items) == 281
    with pytest.raises(InputError) as exc:
        w.items(281, 1, seed=0)
    assert exc.value.message == (
        "dataset 'random': request 281 drew a prompt already sent in each of 100 tries: "
        "prompts this short repeat over this vocabulary"
    )


def test_shared_prefix_groups_share_their_system_prompt_and_passes_do_not(model: Path) -> None:
    w = build(
        model,
        dataset="shared-prefix",
        gsp_num_groups=3,
        gsp_prompts_per_group=4,
        gsp_system_prompt_len=20,
        gsp_question_len=5,
        gsp_output_len=7,
    )
    assert isinstance(w, SharedPrefixWorkload)
    first, second = w.items(0, 12, seed=0), w.items(12, 12, seed=0)
    systems = [p.text.split("\n\n")[0] for p in first]
    assert len(set(systems)) == 3 and sorted(systems.count(s) for s in set(systems)) == [4, 4, 4]
    assert systems != sorted(systems, key=systems.index)  # shuffled, as SGLang does, not group by group
    assert all(len(s.split()) == 20 and len(p.text.split("\n\n")[1].split()) == 5 for s, p in zip(systems, first))
    assert {(p.input_len, p.output_len) for p in first + second} == {(25, 7)}
    assert not {p.text.split("\n\n")[0] for p in second} & set(systems)  # a new pass: new system prompts
    assert len({p.text for p in first + second}) == 24
    assert w.as_dict()["gsp-system-prompt-len"] == 20 and w.describe(0)["prompts"] == 24


def test_a_trace_keeps_its_arrivals_lengths_and_shared_blocks(model: Path) -> None:
    w = build(model, dataset="trace", trace="mooncake_trace_small.jsonl", trace_time_scale=0.5)
    assert isinstance(w, TraceWorkload) and w.size == 6 and w.path == SMALL
    items = w.items(0, 6, seed=0)
    assert [(p.input_len, p.output_len, p.at_s) for p in items] == [
        (530, 6, 0.0),
        (610, 3, 0.0),
        (300, 8, 1.0),
        (540, 1, 1.0),
        (90, 5, 2.999),
        (700, 12, 3.0),
    ]
    words = [p.text.split() for p in items]
    # decoding joins some words ("word ?" reads back as "word?"), so blocks are compared as shared words
    assert 500 <= shared(words[0], words[1]) < 512 and 500 <= shared(words[1], words[5]) < 512  # block 0
    assert shared(words[0], words[3]) >= 520  # blocks 0 and 1: 530 and 540 tokens of the same blocks
    assert shared(words[2], words[4]) == 0 and shared(words[0], words[2]) == 0  # blocks 3, 4 and 0 differ
    assert w.schedule(items) == (0.0, 0.0, 0.5, 0.5, 1.4995, 1.5)  # the recorded gaps x 0.5
    assert w.schedule(items[2:4]) == (0.0, 0.0)
    again = w.items(6, 6, seed=0)  # the next pass: the same lengths and arrivals, new text
    assert [(p.input_len, p.output_len, p.at_s) for p in again] == [(p.input_len, p.output_len, p.at_s) for p in items]
    assert not {p.text for p in again} & {p.text for p in items} and again[0].text[:100] != items[0].text[:100]
    d = w.describe(0)
    assert d["parameters"] == {
        "trace": str(SMALL),
        "trace-digest": w.digest,
        "trace-records": 6,
        "trace-time-scale": 0.5,
    }
    assert (d["prompts"], d["input_tokens"], d["output_tokens"], d["off_target"]) == (
        12,
        {"min": 90, "mean": 461.67, "max": 700},
        {"min": 1, "mean": 5.83, "max": 12},
        0,
    )


def test_a_repeated_trace_request_gets_its_own_last_token(model: Path, tmp_path: Path) -> None:
    """Two recorded requests with the same blocks and length would be one text: the second is drawn
    again at its last token only, so the shared prefix stays."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [7]}\n' * 2)
    a, b = build(model, dataset="trace", trace=str(p)).items(0, 2, seed=0)
    assert a.text != b.text and shared(a.text.split(), b.text.split()) >= 30 and a.input_len == b.input_len == 40


@pytest.mark.parametrize(
    "settings, message, hint",
    [
        (
            {"dataset": "random", "random-range-ratio": 1.0},
            "--random-range-ratio: must be in [0, 1), got 1.0",
            "0 gives every request the same lengths",
        ),
        (
            {"dataset": "random", "random-range-ratio": -0.1},
            "--random-range-ratio: must be in [0, 1), got -0.1",
            "0 gives",
        ),
        (
            {"dataset": "random", "random-input-len": 0},
            "--random-input-len: must be a whole number >= 1, got 0",
            "lengths and counts of 0 send nothing to measure",
        ),
        (
            {"dataset": "shared-prefix", "gsp-output-len": 0},
            "--gsp-output-len: must be a whole number >= 1, got 0",
            "lengths and counts of 0",
        ),
        (
            {"dataset": "random", "gsp-num-groups": 2},
            "--gsp-num-groups: a setting of dataset 'shared-prefix', but the dataset is 'random'",
            "drop it, or use --dataset shared-prefix",
        ),
        (
            {"dataset": "random", "prompts": "p.jsonl"},
            "--prompts: a setting of dataset 'prompts', but the dataset is 'random'",
            "drop it, or use --dataset prompts",
        ),
        (
            {"dataset": "sharegpt"},
            "--dataset: unknown dataset 'sharegpt'",
            "one of prompts, random, shared-prefix, trace",
        ),
        ({"dataset": "trace"}, "dataset 'trace' needs --trace FILE: a Mooncake-format JSON-lines trace", '"timestamp"'),
        (
            {"dataset": "trace", "trace": "mooncake_trace_small.jsonl", "trace-time-scale": 0},
            "--trace-time-scale: must be > 0, got 0",
            "1 replays at the recorded times",
        ),
        # Issue 41: sizes are checked before anything is allocated (a shared prefix of 1e12 was rc 70 MemoryError).
        (
            {"dataset": "random", "random-input-len": 10_000_001},
            "--random-input-len: 10,000,001 is more than 10,000,000, the most envforge generates",
            "check the value",
        ),
        (
            {"dataset": "shared-prefix", "gsp-system-prompt-len": 10**12},
            "--gsp-system-prompt-len: 1,000,000,000,000 is more than 10,000,000, the most envforge generates",
            "exceeds every model's context",
        ),
        (
            {"dataset": "shared-prefix", "gsp-num-groups": 5000, "gsp-system-prompt-len": 5001},
            "--gsp-num-groups 5,000 x --gsp-system-prompt-len 5,001: 25,005,000 tokens of system prompts, more than the "
            "25,000,000 envforge keeps",
            "fewer groups or shorter system prompts",
        ),
    ],
)
def test_bad_settings_are_refused_with_the_fix(
    model: Path, settings: dict[str, object], message: str, hint: str
) -> None:
    with pytest.raises(InputError) as exc:
        build_workload(settings, base=SMALL.parent, model=str(model), label=flag)
    assert exc.value.message == message and hint in (exc.value.hint or "")


def test_lengths_the_special_tokens_use_up_are_refused(bpe: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        build_workload(
            {"dataset": "random", "tokenizer": str(bpe), "random-input-len": 2, "random-range-ratio": 0.5},
            base=tmp_path,
            model="m",
            label=flag,
        )
    assert exc.value.message == (
        "--random-input-len: 2 with range ratio 0.5 allows prompts of 0 tokens besides the "
        "tokenizer's 1 special token(s)"
    )
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 9, "output_length": 1}\n{"timestamp": 0, "input_length": 1, '
        '"output_length": 1}\n'
    )
    with pytest.raises(InputError) as exc:
        build_workload(
            {"dataset": "trace", "tokenizer": str(bpe), "trace": str(p)}, base=tmp_path, model="m", label=flag
        )
    assert (
        exc.value.message == f"{p}:2: input_length 1 leaves no prompt token besides the tokenizer's 1 special token(s)"
    )


def test_no_tokenizer_is_refused_offline(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        build_workload({"dataset": "random"}, base=tmp_path, model="moonshotai/Kimi-K2.5", label=flag)
    assert exc.value.message == (
        "dataset 'random' counts input tokens with the model's tokenizer, and model "
        "'moonshotai/Kimi-K2.5' is not a local directory with a tokenizer.json"
    )
    assert exc.value.hint is not None and exc.value.hint.startswith("give --tokenizer DIR: the checkpoint directory")
    assert build_workload({"dataset": "prompts"}, base=tmp_path, model="x", label=flag) is None


def config(dataset: object, **kw: object) -> SmokeConfig:
    return SmokeConfig(
        model="m",
        api="openai",
        servers=(),
        prompts=(Prompt(0, "p"),),
        prompts_digest="sha256:00",
        dataset=dataset,
        **kw,
    )  # type: ignore[arg-type]


def test_a_trace_sets_the_requests_and_the_schedule_of_a_repeat(model: Path) -> None:
    trace = build(model, dataset="trace", trace="mooncake_trace_small.jsonl", trace_time_scale=2)
    cfg = config(trace)
    assert cfg.per_request and cfg.trace is trace
    assert [cfg.requests_at(c) for c in (1, 4, 32)] == [6, 6, 6]  # the whole trace, whatever the cap
    assert config(trace, requests=4).requests_at(32) == 4
    assert [cfg.repeat_start(n) for n in (0, 1, 6, 7, 12)] == [0, 6, 6, 12, 12]  # a new pass from its first record
    assert cfg.schedule(cfg.draw_requests(6, 6)) == (0.0, 0.0, 2.0, 2.0, 5.998, 6.0)
    assert cfg.as_dict()["dataset"] == trace.as_dict() and cfg.as_dict()["max-new-tokens"] is None
    with pytest.raises(InputError) as exc:
        config(trace, request_rate=5.0).check()
    assert exc.value.message == f"--request-rate 5 with the trace {SMALL}: the trace gives every request's send time"
    with pytest.raises(InputError) as exc:
        config(trace, requests=7).check()
    assert exc.value.message == (
        f"requests = 7 per repeat, but the trace {SMALL} has 6 records: a repeat replays the trace once from its start"
    )
    rnd = config(build(model, dataset="random", random_input_len=4, random_output_len=3), request_rate=10.0)
    rnd.check()
    assert (
        rnd.requests_at(4) == 20 and rnd.repeat_start(7) == 7 and len(rnd.schedule(rnd.draw_requests(0, 3)) or ()) == 3
    )
    assert rnd.draw(0, 2) == [p.text for p in rnd.draw_requests(0, 2)]
    plain = config(None)
    assert plain.schedule(plain.draw_requests(0, 2)) is None and plain.as_dict()["dataset"] == {"name": "prompts"}
    assert not math.isnan(plain.as_dict()["max-new-tokens"])


URL = ["bench", "--url", "http://127.0.0.1:9", "--api", "openai", "--no-plot"]  # nothing listens: never asked


@pytest.mark.parametrize(
    "argv, error",
    [
        (
            ["--dataset", "random", "--random-range-ratio", "1"],
            "error: argument --random-range-ratio: '1': the range ratio must be in [0, 1) (vLLM's rule), e.g. 0.5 for "
            "lengths from half to 1.5 times the mean",
        ),
        (
            ["--dataset", "random", "--random-input-len", "0"],
            "error: argument --random-input-len: must be an integer from 1 to 10000000, got '0'",
        ),
        (
            ["--dataset", "trace", "--trace", "T", "--trace-time-scale", "0"],
            "error: argument --trace-time-scale: '0': the time scale must be > 0 (inf allowed), e.g. 2 to replay twice as "
            "slow",
        ),
        (
            ["--dataset", "trace", "--random-input-len", "5", "--trace", "T"],
            "error: --random-input-len: a setting of dataset 'random', but the dataset is 'trace'",
        ),
        (
            ["--random-output-len", "5"],
            "error: --random-output-len: a setting of dataset 'random', but the dataset is 'prompts'",
        ),
        (
            ["--dataset", "random", "--prompts", "P"],
            "error: --prompts P with dataset 'random': a prompt file is dataset 'prompts'",
        ),
        (
            ["--dataset", "random", "--max-new-tokens", "5"],
            "error: --max-new-tokens 5 with dataset 'random': each of its requests asks for its own output tokens",
        ),
        (
            ["--dataset", "trace", "--trace", "T", "--request-rate", "5"],
            "error: --request-rate 5 with the trace {T}: the trace gives every request's send time",
        ),
        (
            ["--dataset", "trace", "--trace", "T", "--requests", "7"],
            "error: requests = 7 per repeat, but the trace {T} has 6 "
            "records: a repeat replays the trace once from its start",
        ),
    ],
)
def test_the_cli_refuses_contradicting_dataset_flags_with_exit_2(
    model: Path,
    tmp_path: Path,
    argv: list[str],
    error: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from envforge.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "T").write_text(SMALL.read_text())
    (tmp_path / "P").write_text('{"prompt": "p"}\n')
    out = tmp_path / "o.json"
    assert main([*URL, "--model", str(model), "--output", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert error.format(T=tmp_path / "T") in err, err
    assert not out.exists()


def test_the_cli_needs_a_tokenizer_for_a_generated_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from envforge.cli import main

    assert main([*URL, "--model", "tiny", "--dataset", "shared-prefix", "--output", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert (
        "error: dataset 'shared-prefix' counts input tokens with the model's tokenizer, and model 'tiny' is not a "
        "local directory with a tokenizer.json"
    ) in err
    assert "hint: give --tokenizer DIR: the checkpoint directory the server loads" in err


def test_a_trace_whose_replay_would_take_more_than_a_week_is_refused(bpe: Path, tmp_path: Path) -> None:
    """Issue 41: a record 10^15 ms after the one before waited silently for millennia."""
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 5, "input_length": 9, "output_length": 1}\n'
        '{"timestamp": 86400000, "input_length": 9, "output_length": 1}\n'
        '{"timestamp": 1000000000000000, "input_length": 9, "output_length": 1}\n'
    )
    with pytest.raises(InputError) as exc:
        build_workload(
            {"dataset": "trace", "tokenizer": str(bpe), "trace": str(p)}, base=tmp_path, model="m", label=flag
        )
    assert exc.value.message == (
        f"{p}:3: timestamp 1e+15 ms is more than 7 days after the first request's (5 ms): "
        "the replay would wait that long"
    )
    with pytest.raises(InputError) as exc:  # a day, replayed 8 times slower
        build_workload(
            {"dataset": "trace", "tokenizer": str(bpe), "trace": str(p), "trace-time-scale": 8},
            base=tmp_path,
            model="m",
            label=flag,
        )
    assert exc.value.message.startswith(
        f"{p}:2: timestamp 8.64e+07 ms is more than 7 days after the first request's (5 ms x time scale 8)"
    )
    assert "lower --trace-time-scale" in (exc.value.hint or "")
