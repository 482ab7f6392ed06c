"""envforge.drafter against a local hub-compatible server (tests/support/hub_server.py) on 127.0.0.1.

huggingface_hub runs for real (model_info, hf_hub_download, parse_safetensors_file_metadata); the
drafters are small EAGLE-3-shaped safetensors files built here. The real hub is never contacted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tests.support.hub_server import HubServer, eagle3_config, eagle3_files, eagle3_tensors, running_hub, write_drafter

from envforge.drafter import check_target, compare, drafter_checks, fetch_drafter, inspect_drafter
from envforge.drafter.hub import resolve_revision
from envforge.drafter.sources import open_local
from envforge.core.errors import CheckFailed, ExternalToolError, InputError

# The field case: K2-sized vocabularies, 31,748 of 32,000 draft positions mapping elsewhere.
VOCAB, DRAFT, SAME = 163_840, 32_000, 252
TOKEN = "hf_test_secret_token_0123456789"


@dataclass
class Hub:
    server: HubServer
    url: str
    a: str  # drafter-a@main
    b: str  # drafter-b, d2t differs from a in DRAFT - SAME positions
    dev: str  # drafter-a@dev (a branch)
    corrupt: str
    pickle: str
    mixed: str  # safetensors + a pickle file + README + code
    short: str  # test-org/truncated: half the weights served, size announced
    silent: str  # test-org/truncated-silently: half served, size hidden from HEAD


def _field_pair() -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(DRAFT, dtype=np.int64) * 2
    b = a.copy()
    b[SAME:] += 1  # odd ids: outside a's vocabulary
    return a, b


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    cfg = eagle3_config(vocab=VOCAB, draft_vocab=DRAFT)
    ids_a, ids_b = _field_pair()
    tensors_b = eagle3_tensors({**cfg, "rope_theta": 50000.0}, ids_b)
    tensors_b["lm_head.weight"] = np.zeros((DRAFT, 64), dtype=np.float32)
    server = HubServer()
    a = server.add_commit("test-org/drafter-a", eagle3_files(cfg, eagle3_tensors(cfg, ids_a)))
    dev = server.add_commit("test-org/drafter-a", eagle3_files({**cfg, "hidden_act": "silu"}), branch="dev")
    server.set_ref("test-org/drafter-a", "main", a)
    b = server.add_commit("test-org/drafter-b", eagle3_files({**cfg, "rope_theta": 50000.0}, tensors_b))
    small = eagle3_config()
    corrupt = server.add_commit("test-org/drafter-corrupt", eagle3_files(small))
    server.corrupt("test-org/drafter-corrupt", corrupt, "model.safetensors")
    pickle = server.add_commit(
        "test-org/pickle-only", {"config.json": json.dumps(small).encode(), "pytorch_model.bin": b"\x80\x04pickle" * 64}
    )
    mixed = server.add_commit(
        "test-org/mixed",
        {
            **eagle3_files(small),
            "README.md": b"# drafter\n",
            "pytorch_model.bin": b"\x80\x04",
            "modeling.py": b"import os\n",
        },
    )
    short = server.add_commit("test-org/truncated", eagle3_files(small))
    server.truncate("test-org/truncated", short, "model.safetensors")
    silent = server.add_commit("test-org/truncated-silently", eagle3_files(small))
    server.truncate("test-org/truncated-silently", silent, "model.safetensors", announce_size=False)
    with running_hub(server):
        yield Hub(server, server.url, a, b, dev, corrupt, pickle, mixed, short, silent)


# -- fetch --------------------------------------------------------------------------------------


def test_fetch_pinned_downloads_only_safetensors_and_json_and_records_digests(hub: Hub, tmp_path: Path) -> None:
    result = fetch_drafter("test-org/mixed", hub.mixed, tmp_path / "d", root=tmp_path, endpoint=hub.url)
    assert [f.name for f in result.files] == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in (tmp_path / "d").iterdir() if not p.name.startswith(".")) == [
        "config.json",
        "envforge-drafter.json",
        "model.safetensors",
    ]
    record = json.loads(result.record.read_text())
    assert record["revision"] == hub.mixed and record["pinned"] is True
    assert record["skipped"] == ["README.md", "modeling.py", "pytorch_model.bin"]
    assert record["files"][1]["sha256"] == hub.server.repos["test-org/mixed"][hub.mixed]["model.safetensors"].sha256


def test_fetch_reads_each_file_once_to_verify_and_writes_the_record_atomically(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sha256 in the record is the one computed to check the hub's digest (no second pass over
    the weights); the record is replaced whole (temp file + os.replace) with mode 0666 & ~umask."""
    dest = tmp_path / "d"
    reads: list[str] = []
    real_open = Path.open

    def counting_open(self: Path, mode: str = "r", *args: object, **kwargs: object) -> object:
        if mode == "rb" and self.parent == dest:
            reads.append(self.name)
        return real_open(self, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", counting_open)
    old = os.umask(0o022)
    try:
        result = fetch_drafter("test-org/drafter-a", hub.a, dest, root=tmp_path, endpoint=hub.url)
    finally:
        os.umask(old)
    assert sorted(reads) == ["config.json", "model.safetensors"]  # once each: LFS sha256, git blob sha1
    served = hub.server.repos["test-org/drafter-a"][hub.a]
    assert [(f.name, f.sha256) for f in result.files] == [
        (n, served[n].sha256) for n in ("config.json", "model.safetensors")
    ]
    assert result.record.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in dest.iterdir() if "envforge-tmp" in p.name] == []


def test_fetch_default_dest_and_second_fetch_downloads_nothing(hub: Hub, tmp_path: Path) -> None:
    first = fetch_drafter("test-org/drafter-a", hub.a, None, root=tmp_path, endpoint=hub.url)
    assert first.dest == tmp_path / "test-org--drafter-a" / hub.a
    hub.server.reset_counters()
    again = fetch_drafter("test-org/drafter-a", hub.a, None, root=tmp_path, endpoint=hub.url)
    assert again.files == first.files
    assert [r.method for r in hub.server.requests if "resolve" in r.path] == []  # re-hashed, not re-fetched


def test_a_local_file_swapped_after_the_fetch_is_named_never_blamed_on_the_host(hub: Hub, tmp_path: Path) -> None:
    """B59: another commit's config.json of the same size with an old mtime (``cp -p``), which
    huggingface_hub's local_dir would take as already downloaded (huggingface_hub PR 2223)."""
    import os

    first = fetch_drafter("test-org/drafter-a", hub.a, None, root=tmp_path, endpoint=hub.url)
    config = first.dest / "config.json"
    original = config.read_bytes()
    swapped = original.replace(b'"rms_norm_eps"', b'"rms_norm_epz"')
    assert len(swapped) == len(original) and swapped != original
    config.write_bytes(swapped)
    os.utime(config, (1_600_000_000, 1_600_000_000))
    hub.server.reset_counters()
    with pytest.raises(CheckFailed) as err:
        fetch_drafter("test-org/drafter-a", hub.a, None, root=tmp_path, endpoint=hub.url)
    assert err.value.message.startswith(
        f"{config} is already there and is not config.json of test-org/drafter-a@{hub.a} (git-sha1 "
    )
    assert err.value.message.endswith("it was changed or replaced after an earlier fetch")
    assert "host" not in str(err.value) and "corrupt" not in str(err.value)
    assert config.read_bytes() == swapped  # kept: nothing lost
    assert [r for r in hub.server.requests if "resolve" in r.path] == []  # nothing downloaded
    d = open_local(first.dest)  # what inspect reads: not attributed to the pinned commit
    assert (d.repo, d.revision, d.modified) == (None, None, ("config.json",))
    config.write_bytes(original)
    d = open_local(first.dest)
    assert (d.repo, d.revision, d.modified) == ("test-org/drafter-a", hub.a, ())


@pytest.mark.parametrize("revision", ["main", "short"])
def test_fetch_refuses_a_branch_or_short_sha(hub: Hub, tmp_path: Path, revision: str) -> None:
    revision = hub.a[:7] if revision == "short" else revision
    hub.server.set_ref("test-org/drafter-a", hub.a[:7], hub.a)
    asked = len(hub.server.requests)
    with pytest.raises(InputError) as err:
        fetch_drafter("test-org/drafter-a", revision, tmp_path, root=tmp_path, endpoint=hub.url)
    assert str(err.value) == (
        f"revision '{revision}' of test-org/drafter-a is not a commit sha (40 hex digits); the hub was not "
        f"contacted\n  hint: find the sha with `envforge drafter fetch test-org/drafter-a --revision {revision} "
        "--allow-unpinned --dry-run` (or the repository's commit history on the hub) and pass it, or pass "
        f"--allow-unpinned to take what '{revision}' points at and record the sha"
    )
    assert len(hub.server.requests) == asked  # refused before any request
    assert not (tmp_path / "config.json").exists()


def test_a_branch_is_refused_offline_before_the_hub_is_asked(tmp_path: Path) -> None:
    with running_hub() as dead:
        url = dead.url
    with pytest.raises(InputError) as err:
        resolve_revision("test-org/drafter-a", "main", endpoint=url)
    assert err.value.message.startswith("revision 'main' of test-org/drafter-a is not a commit sha (40 hex digits)")


def test_allow_unpinned_records_the_resolved_sha(hub: Hub, tmp_path: Path) -> None:
    result = fetch_drafter("test-org/drafter-a", "dev", tmp_path, root=tmp_path, allow_unpinned=True, endpoint=hub.url)
    record = json.loads(result.record.read_text())
    assert (record["requested"], record["revision"], record["pinned"]) == ("dev", hub.dev, False)


def test_pickle_only_is_refused_unless_allowed(hub: Hub, tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        fetch_drafter("test-org/pickle-only", hub.pickle, tmp_path, root=tmp_path, endpoint=hub.url)
    assert str(err.value) == (
        f"test-org/pickle-only@{hub.pickle} has only pickle weights (pytorch_model.bin); loading pickle "
        "can run arbitrary code\n"
        "  hint: use a revision with safetensors weights, or pass --allow-pickle (allow-pickle = true) "
        "if you trust this repository"
    )
    result = fetch_drafter(
        "test-org/pickle-only", hub.pickle, tmp_path, root=tmp_path, allow_pickle=True, endpoint=hub.url
    )
    assert [f.name for f in result.files] == ["config.json", "pytorch_model.bin"]


def test_corrupt_download_is_detected_by_rehash_and_removed(hub: Hub, tmp_path: Path) -> None:
    f = hub.server.repos["test-org/drafter-corrupt"][hub.corrupt]["model.safetensors"]
    import hashlib

    served = hashlib.sha256(f.served or b"").hexdigest()
    with pytest.raises(CheckFailed) as err:
        fetch_drafter("test-org/drafter-corrupt", hub.corrupt, tmp_path, root=tmp_path, endpoint=hub.url)
    assert str(err.value) == (
        f"model.safetensors of test-org/drafter-corrupt@{hub.corrupt} does not match the hub's metadata: "
        f"sha256 {served}, expected {f.sha256} ({f.size} of {f.size} bytes); "
        f"removed {tmp_path / 'model.safetensors'}\n"
        "  hint: the download is corrupt (huggingface_hub issue 3643); fetch again, and report it to "
        "the host if it repeats"
    )
    assert not (tmp_path / "model.safetensors").exists()


def test_truncated_download_fails_loudly_and_leaves_no_partial(hub: Hub, tmp_path: Path) -> None:
    with pytest.raises(ExternalToolError) as err:
        fetch_drafter("test-org/truncated", hub.short, tmp_path, root=tmp_path, endpoint=hub.url)
    assert err.value.message == (
        f"huggingface_hub failed talking to {hub.url.split('//')[1]}: "
        f"hf_hub_download test-org/truncated@{hub.short} model.safetensors"
    )
    assert "Consistency check failed" in err.value.stderr_tail
    assert list(tmp_path.rglob("*.incomplete")) == []
    assert not (tmp_path / "model.safetensors").exists()


def test_silently_truncated_download_is_caught_by_rehash(hub: Hub, tmp_path: Path) -> None:
    f = hub.server.repos["test-org/truncated-silently"][hub.silent]["model.safetensors"]
    with pytest.raises(CheckFailed) as err:
        fetch_drafter("test-org/truncated-silently", hub.silent, tmp_path, root=tmp_path, endpoint=hub.url)
    assert err.value.message.endswith(
        f"expected {f.sha256} ({f.size // 2} of {f.size} bytes); removed {tmp_path / 'model.safetensors'}"
    )


def test_leftover_partial_download_is_an_error_naming_it(hub: Hub, tmp_path: Path) -> None:
    partial = tmp_path / ".cache" / "huggingface" / "download" / "Xk2.0123abcd.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"half a blob")
    with pytest.raises(CheckFailed) as err:
        fetch_drafter("test-org/drafter-a", hub.a, tmp_path, root=tmp_path, endpoint=hub.url)
    assert str(err.value) == (
        f"a partial download was left in {tmp_path}: .cache/huggingface/download/Xk2.0123abcd.incomplete\n"
        "  hint: a download was interrupted or failed silently (huggingface_hub issue 3643); delete the "
        "partial file and fetch again"
    )
    with pytest.raises(CheckFailed, match="a partial download was left in"):
        inspect_drafter(str(tmp_path))


def test_token_from_environment_is_sent_and_never_written(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.server.reset_counters()
    fetch_drafter("test-org/drafter-a", hub.a, tmp_path, root=tmp_path, endpoint=hub.url)
    assert {r.authorization for r in hub.server.requests} == {f"Bearer {TOKEN}"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_unknown_repo_revision_and_spec(hub: Hub, tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        resolve_revision("test-org/nope", hub.a, endpoint=hub.url)
    assert str(err.value) == (
        "repository test-org/nope not found on the hub\n  hint: check the id; a private "
        "or gated repository needs HF_TOKEN in the environment"
    )
    with pytest.raises(InputError) as err:
        resolve_revision("test-org/drafter-a", "0" * 40, endpoint=hub.url)
    assert err.value.message == f"revision '{'0' * 40}' not found in test-org/drafter-a"
    with pytest.raises(InputError) as err:
        inspect_drafter("test-org/drafter-a")
    assert err.value.message == "'test-org/drafter-a' is neither an existing path nor REPO@SHA"


def test_unreachable_hub_is_an_external_tool_error(tmp_path: Path) -> None:
    with running_hub() as dead:
        url = dead.url
    with pytest.raises(ExternalToolError) as err:
        resolve_revision("test-org/drafter-a", "0" * 40, endpoint=url)
    assert (err.value.message, err.value.hint) == (
        f"huggingface_hub failed talking to {url.split('//')[1]}: model_info test-org/drafter-a@{'0' * 40}",
        f"check the network and HF_ENDPOINT (the hub in use: {url}), then run again",
    )


# -- inspect --------------------------------------------------------------------------------------


@pytest.mark.slow  # writes and hashes a 112 MB safetensors file
def test_remote_inspect_of_100_mb_drafter_transfers_under_1_mb(tmp_path: Path) -> None:
    cfg = eagle3_config(hidden=1024, intermediate=4096, heads=16, vocab=VOCAB, draft_vocab=DRAFT)
    local = write_drafter(tmp_path / "big", cfg)
    weights = local / "model.safetensors"
    assert weights.stat().st_size > 100_000_000
    server = HubServer()
    sha = server.add_commit("test-org/big", {"config.json": local / "config.json", "model.safetensors": weights})
    with running_hub(server):
        server.reset_counters()
        remote = inspect_drafter(f"test-org/big@{sha}", endpoint=server.url, cache_dir=tmp_path / "cache")
        transferred = server.bytes_served
    assert transferred < 1_000_000, transferred
    assert remote.issues == ()
    assert [(t.name, t.dtype, t.shape) for t in remote.drafter.tensors] == [
        (t.name, t.dtype, t.shape) for t in inspect_drafter(str(local)).drafter.tensors
    ]


def test_inspect_reads_architecture_config_and_tensors(hub: Hub, tmp_path: Path) -> None:
    report = inspect_drafter(f"test-org/drafter-a@{hub.a}", endpoint=hub.url, cache_dir=tmp_path)
    d = report.drafter
    assert (d.architecture, d.repo, d.revision) == ("LlamaForCausalLMEagle3", "test-org/drafter-a", hub.a)
    assert d.tensor("d2t") is not None and d.tensor("d2t").describe() == "I64 [32000]"  # type: ignore[union-attr]
    assert d.tensor("t2d").describe() == "BOOL [163840]"  # type: ignore[union-attr]
    assert d.tensor("fc.weight").describe() == "F16 [64, 192]"  # type: ignore[union-attr]
    assert report.issues == ()


def test_inspect_reports_eagle3_shape_problems(tmp_path: Path) -> None:
    cfg = eagle3_config(draft_vocab=512, vocab=4096, aux=(1, 3))
    tensors = eagle3_tensors(cfg)
    tensors["d2t"] = np.zeros(500, dtype=np.int64)
    tensors["t2d"] = np.zeros(4096, dtype=np.int8)
    tensors["fc.weight"] = np.zeros((64, 128), dtype=np.float16)
    d = write_drafter(tmp_path / "bad", cfg, tensors)
    issues = inspect_drafter(str(d)).issues
    both = ("sglang-0.5.9", "vllm-0.32.0")
    # t2d is skipped by both engines' loaders (an I8 t2d loads fine), so it is no finding
    assert [(i.kind, i.subject, i.expected, i.actual, i.engines) for i in issues] == [
        ("eagle3-fc", f"{d}: fc.weight", "[64, 192]", "F16 [64, 128]", both),
        ("eagle3-d2t", f"{d}: d2t", "[512]", "I64 [500]", both),
        ("eagle3-aux-layers", f"{d}: eagle_aux_hidden_state_layer_ids", "three non-negative layer ids", "[1, 3]", ()),
    ]


def test_inspect_target_hidden_size_widens_fc(tmp_path: Path) -> None:
    cfg = eagle3_config(target_hidden=96)
    d = write_drafter(tmp_path / "th", cfg)
    assert inspect_drafter(str(d)).drafter.tensor("fc.weight").shape == (64, 288)  # type: ignore[union-attr]
    assert inspect_drafter(str(d)).issues == ()


# -- compare ---------------------------------------------------------------------------------------


def test_compare_counts_the_field_case_d2t_difference(hub: Hub, tmp_path: Path) -> None:
    a = fetch_drafter("test-org/drafter-a", hub.a, tmp_path / "a", root=tmp_path, endpoint=hub.url).dest
    c = compare(str(a), f"test-org/drafter-b@{hub.b}", endpoint=hub.url, cache_dir=tmp_path / "cache")
    assert c.vocab is not None
    assert (c.vocab.positions, c.vocab.same, c.vocab.different) == (32_000, 252, 31_748)
    assert (c.vocab.a_tokens, c.vocab.b_tokens, c.vocab.overlap) == (32_000, 32_000, 252)
    assert [(t.name, t.a, t.b) for t in c.tensors] == [("lm_head.weight", "F16 [32000, 64]", "F32 [32000, 64]")]
    assert [(k.key, k.a, k.b) for k in c.config] == [("rope_theta", "absent", "50000.0")]


def test_compare_remote_pair_reads_headers_and_d2t_only(hub: Hub, tmp_path: Path) -> None:
    hub.server.reset_counters()
    c = compare(f"test-org/drafter-a@{hub.a}", f"test-org/drafter-b@{hub.b}", endpoint=hub.url, cache_dir=tmp_path)
    assert c.vocab is not None and c.vocab.different == 31_748
    weights = 2 * hub.server.repos["test-org/drafter-a"][hub.a]["model.safetensors"].size
    assert hub.server.bytes_served < weights / 4


# -- check against the target, and verify's entry point -------------------------------------------


def test_check_target_compatibility(hub: Hub, tmp_path: Path) -> None:
    target = tmp_path / "k2" / "config.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"hidden_size": 64, "vocab_size": VOCAB, "num_hidden_layers": 61}))
    spec = f"test-org/drafter-a@{hub.a}"
    assert check_target(spec, str(target.parent), endpoint=hub.url, cache_dir=tmp_path).issues == ()
    wrapped = tmp_path / "k25.json"  # multimodal K2.5 nests the language model under text_config
    wrapped.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "text_config": {"hidden_size": 7168, "vocab_size": 163_840, "num_hidden_layers": 5},
            }
        )
    )
    issues = check_target(spec, str(wrapped), endpoint=hub.url, cache_dir=tmp_path).issues
    # ids [1, 3, 5]: both SGLang versions add 1 on a Llama target, and layer 6 is past the last (4)
    assert [(i.kind, i.engines, i.expected) for i in issues] == [
        ("target-hidden-size", (), "7168"),
        ("target-layer-count", ("sglang-0.5.9",), "layers 0..4 (the target has 5)"),
        ("target-layer-count", ("sglang-0.5.23",), "layers 0..4 (the target has 5)"),
    ]  # vLLM's default capture is not judged against layers the target lacks
    assert issues[1].actual == (
        "sglang 0.5.9 captures the inputs of layers 2, 4, 6 (ids [1, 3, 5] from "
        "eagle_config.eagle_aux_hidden_state_layer_ids, + 1: sglang/srt/models/llama.py:778)"
    )


def test_drafter_checks_runs_the_recipe_table(hub: Hub, tmp_path: Path) -> None:
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"hidden_size": 64, "vocab_size": 1000, "num_hidden_layers": 61}))
    settings = {
        "repo": "test-org/drafter-a",
        "revision": hub.a,
        "target-config": str(target),
        "compare": [f"test-org/drafter-b@{hub.b}", "test-org/drafter-b@main"],
    }
    issues = drafter_checks(settings, cache_dir=tmp_path / "cache", endpoint=hub.url)
    assert [i.kind for i in issues] == ["target-vocab-size", "drafter-tensor", "vocab-mapping", "drafter-error"]
    assert issues[2].actual == "31,748 of 32,000 differ; vocabularies overlap in 252 tokens"
    assert issues[3].actual == (
        "revision 'main' of test-org/drafter-b is not a commit sha (40 hex digits); the hub was not contacted"
    )
    unpinned = drafter_checks({"repo": "test-org/drafter-a", "revision": "main"}, cache_dir=tmp_path, endpoint=hub.url)
    assert [(i.kind, i.subject) for i in unpinned] == [("drafter-error", "test-org/drafter-a@main")]


def test_local_inspect_of_a_fetch_uses_its_record(hub: Hub, tmp_path: Path) -> None:
    dest = fetch_drafter("test-org/drafter-a", hub.a, tmp_path, root=tmp_path, endpoint=hub.url).dest
    write_drafter(tmp_path / "old", eagle3_config())
    (tmp_path / "old" / "model.safetensors").rename(dest / "model-stale.safetensors")  # an earlier revision's file
    d = inspect_drafter(str(dest)).drafter
    assert (d.repo, d.revision, d.files) == ("test-org/drafter-a", hub.a, ("model.safetensors",))


# -- hostile file names (issue 27, fault suite N91) ----------------------------------------------

ESCAPING = {
    "../../../../EVIL1.json": "a '..' part",
    "sub/../../../../EVIL2.json": "a '..' part",
    "..\\..\\EVIL4.json": "a '..' part",
    "/EVIL3.json": "an absolute path",
    "\\EVIL5.json": "an absolute path",
    "C:EVIL6.json": "an absolute path",
}


@pytest.mark.parametrize("name", list(ESCAPING))
def test_a_file_name_pointing_outside_is_refused_by_envforge_in_fetch_and_dry_run(tmp_path: Path, name: str) -> None:
    """envforge refuses the revision itself (exit 2, the name and why), before any download: the dry
    run too, where huggingface_hub never sees the name; nothing is written anywhere."""
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    with running_hub() as server:
        sha = server.add_commit("evil/drafter", {**eagle3_files(eagle3_config()), name: b"{}"})
        env = {**os.environ, "HF_ENDPOINT": server.url, "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hf")}
        for extra in (["--dry-run"], ["--dest", str(work / "dest")], ["--dry-run", "--json"]):
            server.reset_counters()
            res = subprocess.run(
                [sys.executable, "-m", "envforge", "drafter", "fetch", "evil/drafter", "--revision", sha, *extra],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert res.returncode == 2, (extra, res.stderr)
            message = (
                f"evil/drafter@{sha} has file names that point outside the download directory: "
                f"{name!r} ({ESCAPING[name]}); nothing was downloaded"
            )
            assert f"error: {message}\n" in res.stderr
            if "--json" in extra:
                assert json.loads(res.stdout)["data"]["message"] == message
            assert [r.path for r in server.requests if "/resolve/" in r.path] == []
            assert TOKEN not in res.stdout + res.stderr
    assert [p for p in tmp_path.rglob("EVIL*")] == [] and not (work / "dest").exists()
