"""``patches import`` against its oracle, the releases upstream shipped (issue 39): for a pair of
consecutive releases, every ``.py`` file that changed is diffed with the real ``diff -u``, imported
onto the old release (the released wheels, unpacked in the test cache), and the patchset must give
the new release's file byte for byte (``import_diff`` refuses to write one that does not); on the new
release every operation holds (``upstream-fixed``) and nothing changes.

CI runs a fixed sample: the files of every kind of change ``patches import`` refused before (a helper
added beside a fix, a method added and a statement moved in a class, statements added at the start
of a class, comments closing a class or the module, comments changed above a statement, namesakes
removed, a property and its setter, an added statement whose neighbour occurs twice).
``ENVFORGE_CORPUS=full`` runs every changed file of every pair (docs/testing.md; the figures are in
docs/patchsets.md, "Upstream changes, measured").
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.patching import load_patchset
from envforge.patching.operations import OpContext
from envforge.patching.planning import evaluate_file
from envforge.patching.states import UPSTREAM_FIXED
from envforge.patching.upstream import import_diff
from tests.conftest import unpacked_wheel

pytestmark = [pytest.mark.slow, pytest.mark.network]  # real wheels, downloaded once into the test cache

PAIRS = {
    ("flashinfer-python", "0.6.3", "0.6.4"): ["flashinfer/__init__.py"],
    ("flashinfer-python", "0.6.16.post4", "0.6.17"): [
        "flashinfer/jit/comm.py",
        "flashinfer/comm/cuda_ipc.py",
        "flashinfer/fused_moe/api.py",
        "flashinfer/gdn_kernels/blackwell/gated_delta_net_chunked.py",
    ],
    ("flashinfer-python", "0.6.4", "0.6.5"): [],
    ("sglang", "0.5.10", "0.5.11"): ["sglang/srt/layers/attention/nsa/utils.py"],
    ("sglang", "0.5.9", "0.5.10"): [
        "sglang/multimodal_gen/runtime/distributed/parallel_state.py",
        "sglang/srt/configs/nemotron_h.py",
        "sglang/srt/models/qwen3_moe.py",
        "sglang/multimodal_gen/configs/sample/wan.py",
        "sglang/srt/disaggregation/utils.py",
    ],
}
FULL = os.environ.get("ENVFORGE_CORPUS") == "full"
#: Files the full corpus may refuse, with the reason (docs/patchsets.md lists them).
REFUSED: dict[str, str] = {
    # upstream pasted a block a second time: an addition identical to a statement already there holds
    "sglang/srt/lora/lora_moe_runners.py": "sglang/srt/lora/lora_moe_runners.py: the operations do not give the "
    "diff's result (other bytes); nothing written"
}


def changed_files(old: Path, new: Path) -> list[str]:
    """Every ``.py`` file both releases have whose bytes differ, sorted."""
    out = []
    for path in sorted(new.rglob("*.py")):
        rel = path.relative_to(new).as_posix()
        if ".dist-info" not in rel and (old / rel).is_file() and (old / rel).read_bytes() != path.read_bytes():
            out.append(rel)
    return out


def _cases() -> list[tuple[str, str, str, str]]:
    out = []
    for (dist, a, b), sample in PAIRS.items():
        files = changed_files(unpacked_wheel(dist, a), unpacked_wheel(dist, b)) if FULL else sample
        out += [(dist, a, b, f) for f in files]
    return out


def _import_and_check(tmp_path: Path, dist: str, a: str, b: str, rel: str) -> str | None:
    """Import ``diff -u`` of ``rel`` onto release ``a``; ``None`` when it reproduces release ``b``
    and holds there, else the refusal."""
    old, new = unpacked_wheel(dist, a), unpacked_wheel(dist, b)
    diff = subprocess.run(
        ["diff", "-u", "--label", f"a/{rel}", "--label", f"b/{rel}", str(old / rel), str(new / rel)],
        capture_output=True,
        check=False,
    ).stdout
    (tmp_path / "x.diff").write_bytes(diff)
    try:
        imported = import_diff(
            tmp_path / "x.diff", old, tmp_path / "patchsets", "corpus", "upstream change", versions=">=0"
        )
    except InputError as exc:
        return exc.message
    ps = load_patchset(imported.path)
    ctx = OpContext(read_text=lambda p: None, patchset_dir=imported.path.parent)
    after_old = evaluate_file(ps, rel, (old / rel).read_bytes(), ctx, already=False)[1]
    assert after_old == (new / rel).read_bytes(), rel  # import_diff's own round trip, checked again here
    results, after_new = evaluate_file(ps, rel, (new / rel).read_bytes(), ctx, already=False)
    assert after_new == (new / rel).read_bytes(), rel
    assert {state for _, state, _ in results} == {UPSTREAM_FIXED}, [
        (o.describe(), s, r.detail) for o, s, r in results if s != UPSTREAM_FIXED
    ]
    return None


@pytest.mark.parametrize(
    ("dist", "old", "new", "rel"),
    _cases() if FULL else [(d, a, b, f) for (d, a, b), files in PAIRS.items() for f in files],
)
def test_an_upstream_change_imports_reproduces_the_release_and_is_upstream_fixed_there(
    tmp_path: Path, dist: str, old: str, new: str, rel: str
) -> None:
    refused = _import_and_check(tmp_path, dist, old, new, rel)
    assert refused is None or REFUSED.get(rel) == refused, refused
