"""Comparing two drafters: tensors, config, and what their draft vocabularies map to.

The vocabulary mapping is the one SGLang builds from ``d2t`` when it loads an EAGLE-3 drafter
(``llama_eagle3.py``: ``hot_token_id = d2t + arange(len(d2t))``): draft position ``i`` proposes
target token ``i + d2t[i]``. Two drafters with equal shapes can still map most positions to
different target tokens (the field team found 31,748 of 32,000); the comparison counts them.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envforge.core.errors import InputError
from envforge.drafter.model import Drafter, DrafterIssue
from envforge.drafter.weights import ByteReader

__all__ = [
    "ConfigDiff",
    "DrafterComparison",
    "TensorDiff",
    "VocabComparison",
    "compare_drafters",
    "comparison_issues",
    "decode_d2t",
    "vocab_map",
]

# config keys that say nothing about the model itself
_VOLATILE = frozenset({"_name_or_path", "transformers_version", "torch_dtype", "dtype"})
_INT_CODES = {"I64": "q", "I32": "i"}


@dataclass(frozen=True, slots=True)
class TensorDiff:
    """A tensor that differs: ``a`` / ``b`` are ``"I64 [32000]"`` or ``"absent"``."""

    name: str
    a: str
    b: str


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    """A ``config.json`` key whose values differ; ``a`` / ``b`` are JSON text or ``"absent"``."""

    key: str
    a: str
    b: str


@dataclass(frozen=True, slots=True)
class VocabComparison:
    """How two ``d2t`` mappings relate.

    ``positions``: draft positions compared (the shorter ``d2t``); ``same`` / ``different``: positions
    mapping to the same / a different target token; ``a_tokens`` / ``b_tokens``: distinct target
    tokens each draft vocabulary covers; ``overlap``: target tokens in both sets.
    """

    positions: int
    same: int
    different: int
    a_tokens: int
    b_tokens: int
    overlap: int


@dataclass(frozen=True, slots=True)
class DrafterComparison:
    """Result of :func:`compare_drafters`; ``vocab`` is ``None`` when either side lacks ``d2t``."""

    a: str
    b: str
    tensors: tuple[TensorDiff, ...]
    config: tuple[ConfigDiff, ...]
    vocab: VocabComparison | None


def decode_d2t(raw: bytes, dtype: str) -> array[int]:
    """Decode little-endian ``I64`` / ``I32`` tensor bytes (safetensors stores little-endian)."""
    code = _INT_CODES.get(dtype)
    if code is None:
        raise InputError(
            f"d2t has dtype {dtype}; expected I64 or I32", hint="d2t holds integer offsets (target id = i + d2t[i])"
        )
    values = array(code)
    if len(raw) % values.itemsize:
        raise InputError(f"d2t: {len(raw)} bytes is not a whole number of {dtype} values")
    values.frombytes(raw)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def vocab_map(d: Drafter, read: ByteReader) -> list[int] | None:
    """Target token id of every draft position (``i + d2t[i]``), or ``None`` without ``d2t``.

    ``read`` gives exactly the bytes asked for of the weight files (local reads or remote ranges;
    a short read is an error, never a shorter mapping).
    """
    t = d.tensor("d2t")
    if t is None:
        return None
    offsets = decode_d2t(read(t.file, t.offset, t.nbytes), t.dtype)
    return [i + int(v) for i, v in enumerate(offsets)]


def _tensor_diffs(a: Drafter, b: Drafter) -> tuple[TensorDiff, ...]:
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    out = []
    for name in sorted(ta.keys() | tb.keys()):
        da = ta[name].describe() if name in ta else "absent"
        db = tb[name].describe() if name in tb else "absent"
        if da != db:
            out.append(TensorDiff(name, da, db))
    return tuple(out)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _config_diffs(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[ConfigDiff, ...]:
    out = []
    for key in sorted((a.keys() | b.keys()) - _VOLATILE):
        va = _json(a[key]) if key in a else "absent"
        vb = _json(b[key]) if key in b else "absent"
        if va != vb:
            out.append(ConfigDiff(key, va, vb))
    return tuple(out)


def _vocab(ma: list[int], mb: list[int]) -> VocabComparison:
    n = min(len(ma), len(mb))
    same = sum(1 for i in range(n) if ma[i] == mb[i])
    sa, sb = set(ma), set(mb)
    return VocabComparison(n, same, n - same, len(sa), len(sb), len(sa & sb))


def compare_drafters(a: Drafter, b: Drafter, read_a: ByteReader, read_b: ByteReader) -> DrafterComparison:
    """Compare drafters ``a`` and ``b``: tensors differing in presence, shape or dtype; config keys
    with different values (ignoring ``_name_or_path``, ``transformers_version``, ``torch_dtype``);
    and the ``d2t`` vocabulary mapping (reads only the two ``d2t`` tensors)."""
    ma, mb = vocab_map(a, read_a), vocab_map(b, read_b)
    vocab = _vocab(ma, mb) if ma is not None and mb is not None else None
    return DrafterComparison(a.source, b.source, _tensor_diffs(a, b), _config_diffs(a.config, b.config), vocab)


def _tensor_issue(c: DrafterComparison, t: TensorDiff) -> DrafterIssue:
    return DrafterIssue(
        "drafter-tensor",
        f"{c.a} vs {c.b}: {t.name}",
        t.b,
        t.a,
        "the drafters do not have the same layout; retrain or pick the matching drafter",
    )


def comparison_issues(c: DrafterComparison) -> tuple[DrafterIssue, ...]:
    """Findings for verify: differing tensors, and draft positions mapping to other target tokens.

    ``expected`` is the reference drafter's value (``b``), ``actual`` the checked drafter's (``a``).
    """
    out = [_tensor_issue(c, t) for t in c.tensors]
    v = c.vocab
    if v is not None and v.different:
        out.append(
            DrafterIssue(
                "vocab-mapping",
                f"{c.a} vs {c.b}: d2t",
                f"{v.positions:,} of {v.positions:,} draft positions map to the same target token",
                f"{v.different:,} of {v.positions:,} differ; vocabularies overlap in {v.overlap:,} tokens",
                "a fine-tune from one drafter onto the other's vocabulary starts from the wrong tokens; "
                "rebuild d2t/t2d from one vocabulary",
            )
        )
    return tuple(out)
