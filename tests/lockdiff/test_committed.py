"""lock diff on locks written by `envforge lock` itself: the committed kimi cu128 lock against the
same recipe locked with sglang 0.5.10 (tests/data/locks/envforge-sglang-0.5.10, made by
`envforge lock kimi-k25-sm120 --variant cu128` after editing the sglang pin)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLD = "lockfiles/pylock.kimi-k25-sm120-cu128.toml"
NEW = "tests/data/locks/envforge-sglang-0.5.10/pylock.kimi-k25-sm120-cu128.toml"


def test_sglang_upgrade_between_envforge_locks() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "lock", "diff", OLD, NEW, "--exit-code"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1  # changes: the CI gate trips
    lines = [ln.split() for ln in res.stdout.splitlines()]
    assert ["upgraded", "sglang", "0.5.9", "->", "0.5.10", "patch"] in lines
    assert ["upgraded", "flashinfer-python", "0.6.3", "->", "0.6.7.post2", "patch"] in lines
    assert res.stdout.splitlines()[1].startswith("169 -> 182 packages:")
    joined = re.sub(r"\n {6,}", " ", res.stdout)  # a long setting is wrapped at 120 columns
    settings = [ln.strip() for ln in joined.splitlines() if ln.strip().startswith("inputs packages:")]
    assert settings and "sglang==0.5.9" in settings[0] and "sglang==0.5.10" in settings[0]


def test_variants_matrix_names_the_variants_without_a_lock() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "lock", "diff", "kimi-k25-sm120", "--variants"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0
    assert res.stderr == (
        "warning: variants of kimi-k25-sm120 without a lock (not in the matrix): cu130; "
        "lock them with `envforge lock kimi-k25-sm120 --variant cu130`\n"
    )
    assert res.stdout.startswith(
        "kimi-k25-sm120: 3 variants (cu128, cu130-aarch64, cu130-current); 80 packages identical, 134 differ"
    )
