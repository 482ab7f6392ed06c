"""Safetensors files read without trusting a byte (issue 18.4, B14): real files written by the
safetensors library, then cut, rewritten or replaced by a FIFO or a symlink on disk."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.hub_server import eagle3_config, eagle3_tensors, write_drafter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envforge.cli import main
from envforge.drafter import compare, inspect_drafter
from envforge.drafter.weights import parse_header
from envforge.core.errors import InputError

HINT = (
    "  hint: the file is damaged or not safetensors; fetch it again (`envforge drafter fetch` re-hashes every "
    "file) or use the publisher's original\n"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["drafter", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def drafter(tmp_path: Path) -> Path:
    return write_drafter(tmp_path / "d", eagle3_config())


def _with_header(directory: Path, header: bytes, data: bytes = b"", length: int | None = None) -> Path:
    path = directory / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + data)
    return path


def test_a_truncated_file_is_never_ok_and_compare_against_it_is_an_error(
    drafter: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = shutil.copytree(drafter, tmp_path / "good")
    weights = drafter / "model.safetensors"
    size = weights.stat().st_size
    with weights.open("r+b") as f:
        f.truncate(size // 2)  # a real file cut short, as a download that "succeeded" (B14)
    code, out, err = run(capsys, "inspect", str(drafter))
    assert (code, out) == (2, "")
    assert "EAGLE-3 checks: ok" not in err
    data = size - 8 - struct.unpack("<Q", (good / "model.safetensors").read_bytes()[:8])[0]
    assert err == (
        f"error: {weights}: not a valid safetensors file: the tensors end at data byte {data:,} but the "
        f"file holds {data - (size - size // 2):,} data bytes (the file is cut short)\n" + HINT
    )
    code, out, err = run(capsys, "compare", str(good), str(drafter))
    assert (code, out) == (2, "")
    assert "0 of" not in err and err.startswith(f"error: {weights}: not a valid safetensors file")


def test_a_file_cut_after_its_header_was_read_is_an_error_not_a_short_mapping(drafter: Path, tmp_path: Path) -> None:
    good = shutil.copytree(drafter, tmp_path / "good")
    d = inspect_drafter(str(drafter)).drafter
    t = d.tensor("d2t")
    assert t is not None
    with (drafter / "model.safetensors").open("r+b") as f:
        f.truncate(t.offset + t.nbytes // 2)
    from envforge.drafter.compare import compare_drafters
    from envforge.drafter.sources import byte_reader, open_local

    with pytest.raises(InputError) as exc:
        compare_drafters(d, open_local(good), byte_reader(d), byte_reader(open_local(good)))
    assert exc.value.message == (
        f"{drafter / 'model.safetensors'}: bytes {t.offset:,}..{t.offset + t.nbytes:,} asked for, the file has "
        f"{t.offset + t.nbytes // 2:,} bytes (it changed or is cut short)"
    )


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (b"[1,2,3]", "the header does not start with '{' (a JSON object)"),
        (b"null", "the header does not start with '{' (a JSON object)"),
        (b'{"a": 1', "the header is not valid JSON: Expecting ',' delimiter: line 1 column 8 (char 7)"),
        (b'{"t": [1]}', "tensor 't': its entry is not a JSON object"),
        (
            b'{"t": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}',
            "tensor 't': shape [Infinity] is not a list of integers in 0..2**64-1",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}',
            "tensor 't': shape [-1] is not a list of integers in 0..2**64-1",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}',
            "tensor 't': shape [true] is not a list of integers in 0..2**64-1",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}',
            "the header is not valid JSON: NaN is not a JSON number safetensors accepts",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}',
            "tensor 't': data_offsets [4, 0] is not [begin, end] with 0 <= begin <= end",
        ),
        (
            b'{"t": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}}',
            "tensor 't': dtype \"Q4\" is not a safetensors dtype (BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, "
            "F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64)",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}',
            "tensor 't': F32 [2] needs 8 bytes, data_offsets [0, 4] hold 4",
        ),
        (
            b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "t": {}}',
            "the header is not valid JSON: key 't' appears twice",
        ),
        (
            b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
            b'"b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}}',
            "tensor 'b': data_offsets [2, 6] overlaps the previous tensor",
        ),
        (
            b'{"__metadata__": [1], "t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
            "__metadata__ is not an object of strings",
        ),
    ],
)
def test_headers_of_the_wrong_shape_are_exit_2_errors(
    drafter: Path, capsys: pytest.CaptureFixture[str], header: bytes, why: str
) -> None:
    path = _with_header(drafter, header, b"\0" * 4)
    code, out, err = run(capsys, "inspect", str(drafter))
    assert (code, out) == (2, "")
    assert err == f"error: {path}: not a valid safetensors file: {why}\n" + HINT


@pytest.mark.parametrize(
    ("length", "why"),
    [
        (1 << 62, "header length 4,611,686,018,427,387,904 bytes does not fit the 100 MB limit"),
        (1000, "header length 1,000 bytes does not fit a file of 20 bytes"),
    ],
)
def test_a_huge_or_overlong_header_length_is_refused_before_reading(
    drafter: Path, capsys: pytest.CaptureFixture[str], length: int, why: str
) -> None:
    path = _with_header(drafter, b"{}" + b" " * 10, length=length)
    code, _, err = run(capsys, "inspect", str(drafter))
    assert (code, err) == (2, f"error: {path}: not a valid safetensors file: {why}\n" + HINT)


def test_a_fifo_named_model_safetensors_is_refused_without_blocking(drafter: Path) -> None:
    weights = drafter / "model.safetensors"
    weights.unlink()
    os.mkfifo(weights)
    try:  # a real process: before the fix, it blocked for ever in open()
        proc = subprocess.run(
            [sys.executable, "-m", "envforge", "drafter", "inspect", str(drafter)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("inspect blocked on the FIFO")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        "",
        f"error: {weights}: not a regular file (a FIFO)\n  hint: point at the real weight file\n",
    )


def test_a_weight_symlinked_out_of_the_drafter_directory_is_refused(
    drafter: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere.safetensors"
    (drafter / "model.safetensors").rename(outside)
    (drafter / "model.safetensors").symlink_to(outside)
    code, out, err = run(capsys, "inspect", str(drafter))
    assert (code, out) == (2, "")
    assert err == (
        f"error: {drafter / 'model.safetensors'}: a symlink to {outside}, outside the drafter directory "
        f"{drafter}\n  hint: copy the weights into the drafter directory (or fetch it with `envforge "
        "drafter fetch`); envforge reads no weight outside the directory it judges\n"
    )


def test_a_symlink_inside_the_directory_and_a_huggingface_cache_snapshot_are_read(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--d"
    snap = write_drafter(repo / "snapshots" / ("a" * 40), eagle3_config())
    (repo / "blobs").mkdir()
    for name in ("model.safetensors", "config.json"):
        blob = repo / "blobs" / f"blob-{name}"
        (snap / name).rename(blob)
        (snap / name).symlink_to(os.path.relpath(blob, snap))  # huggingface_hub's cache layout
    assert inspect_drafter(str(snap)).issues == ()


def test_a_valid_file_reads_with_absolute_offsets(drafter: Path) -> None:
    raw = (drafter / "model.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    tensors = parse_header(raw[8 : 8 + n], file="model.safetensors", data_size=len(raw) - 8 - n)
    d2t = next(t for t in tensors if t.name == "d2t")
    assert np.frombuffer(raw[d2t.offset : d2t.offset + d2t.nbytes], dtype="<i8").tolist()[:3] == [0, 1, 2]


def test_compare_of_two_intact_drafters_still_counts(tmp_path: Path) -> None:
    cfg = eagle3_config()
    a = write_drafter(tmp_path / "a", cfg)
    ids = np.arange(512, dtype=np.int64) * 2
    ids[:10] += 1
    b = write_drafter(tmp_path / "b", cfg, eagle3_tensors(cfg, ids))
    c = compare(str(a), str(b))
    assert c.vocab is not None and (c.vocab.positions, c.vocab.different) == (512, 10)


# -- fuzz: the header parser raises InputError or nothing ----------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_ENTRY = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "I64", "BOOL", "F4", "x", 3]),
        "shape": st.lists(st.integers(-2, 1 << 66), max_size=4) | _JSON,
        "data_offsets": st.lists(st.integers(-2, 64), min_size=0, max_size=3) | _JSON,
    }
)
_HEADERS = (
    st.binary(max_size=64)
    | _JSON.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(st.text(max_size=6), _ENTRY | _JSON, max_size=4).map(lambda v: json.dumps(v).encode())
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_HEADERS, data_size=st.integers(0, 128))
def test_fuzz_header_parser_raises_only_input_error(raw: bytes, data_size: int) -> None:
    try:
        tensors = parse_header(raw, file="f", data_size=data_size)
    except InputError as exc:
        assert exc.message.startswith("f")
        return
    assert sum(t.nbytes for t in tensors) == data_size


# -- fuzz: configs of any JSON shape give findings, never a traceback --------------------------------------

_VALUE = (
    st.none()
    | st.booleans()
    | st.integers(-3, 1 << 70)
    | st.floats()
    | st.text(max_size=4)
    | st.lists(st.integers(-3, 100) | st.text(max_size=2), max_size=4)
    | st.dictionaries(st.text(max_size=3), st.integers())
)
_KEYS = [
    "hidden_size",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "tie_word_embeddings",
    "eagle_config",
    "eagle_aux_hidden_state_layer_ids",
    "architectures",
    "text_config",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=st.dictionaries(st.sampled_from(_KEYS), _VALUE, max_size=10),
    target=st.dictionaries(st.sampled_from(_KEYS), _VALUE, max_size=6),
    shapes=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "d2t",
                    "t2d",
                    "fc.weight",
                    "lm_head.weight",
                    "norm.weight",
                    "layers.7.mlp.up_proj.weight",
                    "model.fc.weight",
                    "x",
                ]
            ),
            st.lists(st.integers(0, 9), max_size=3),
        ),
        max_size=6,
        unique_by=lambda t: t[0],
    ),
)
def test_fuzz_drafter_checks_on_any_config_shape(
    config: dict[str, object], target: dict[str, object], shapes: list[tuple[str, list[int]]]
) -> None:
    from envforge.drafter.model import Drafter, eagle3_issues, target_issues
    from envforge.drafter.weights import TensorInfo

    tensors = tuple(TensorInfo(n, "I64", tuple(s), "m.safetensors", 8, 0) for n, s in shapes)
    d = Drafter("d", None, None, config, tensors, ("m.safetensors",))
    for issue in eagle3_issues(d) + target_issues(d, target, "t"):
        assert issue.kind and issue.subject.startswith("d: ")


def test_a_fifo_named_config_json_is_refused_without_blocking(drafter: Path) -> None:
    config = drafter / "config.json"
    config.unlink()
    os.mkfifo(config)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "envforge", "drafter", "inspect", str(drafter)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("inspect blocked on the FIFO")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2,
        "",
        f"error: {config}: not a regular file\n  hint: point at the real config.json\n",
    )
