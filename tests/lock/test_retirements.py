"""Which patchsets a recipe can retire (``patches check --recipe``, issue 31): the repository's own
kimi-k25-sm120 recipe and committed locks, and the real flashinfer-sm120-trtllm-comm patchset.

The unit tests build the matrix from cells (no wheels); the CLI test checks the real
flashinfer-python 0.6.16.post4, 0.6.17 and 0.7.2 wheels from a local PEP 503 index on 127.0.0.1
(tests/support/localindex.py) serving them from the test cache.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from tests.conftest import cached_wheel
from tests.support.localindex import LocalIndex, serve
from tests.support.patching_trees import REPO

from envforge.cli import main
from envforge.lock.retirements import propose_retirements
from envforge.patching import load_patchsets
from envforge.patching.compat import Cell, CompatMatrix
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project

PID = "flashinfer-sm120-trtllm-comm"
MESSAGE = "supported_major_versions already lists 12"  # the real operation's message on 0.6.17
EVIDENCE = f"flashinfer/jit/comm.py: {MESSAGE}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "recipes").mkdir(parents=True)
    shutil.copy(REPO / "recipes" / "kimi-k25-sm120.toml", root / "recipes")
    shutil.copytree(REPO / "patchsets", root / "patchsets")
    shutil.copytree(REPO / "lockfiles", root / "lockfiles")
    return root


def matrix(project: Path, states: dict[str, str]) -> CompatMatrix:
    (ps,) = load_patchsets(project / "patchsets", [PID])
    cells = tuple(
        Cell(
            PID,
            ps.distribution,
            v,
            s,
            (("flashinfer/jit/comm.py", "add-list-element", s, MESSAGE if s == "upstream-fixed" else "added 12"),),
        )
        for v, s in states.items()
    )
    return CompatMatrix((ps,), (("flashinfer-python", tuple(states)),), cells)


def test_variants_locking_a_fixed_release_retire_now_the_others_after_the_upgrade(project: Path) -> None:
    m = matrix(project, {"0.6.16.post4": "applied", "0.6.17": "upstream-fixed", "0.7.2": "upstream-fixed"})
    out = propose_retirements(m, load_recipe(project / "recipes" / "kimi-k25-sm120.toml"), Project(project))
    assert [(r.variant, r.when, r.locked, r.first_fixed, r.lock) for r in out] == [
        ("cu128", "after-upgrade", ("0.6.3",), "0.6.17", "pylock.kimi-k25-sm120-cu128.toml"),
        ("cu130", "after-upgrade", (), "0.6.17", ""),
        ("cu130-aarch64", "now", ("0.7.2",), "0.7.2", "pylock.kimi-k25-sm120-cu130-aarch64.toml"),
        ("cu130-current", "now", ("0.7.2",), "0.7.2", "pylock.kimi-k25-sm120-cu130-current.toml"),
    ]
    now = out[3]
    assert now.describe() == (
        f"[variant.cu130-current] locks flashinfer-python 0.7.2, where {PID} is upstream-fixed: retire it now"
    )
    assert now.entry() == (
        f'{{ id = "{PID}", reason = "flashinfer-python 0.7.2 already does it: `envforge patches check {PID} '
        f'--against flashinfer-python==0.7.2` reports upstream-fixed ({EVIDENCE}); upstream-fixed on 0.6.17, 0.7.2" }}'
        " (add to its retire-patchsets)"
    )
    assert out[1].describe() == (
        f"[variant.cu130] is not locked yet: once its lock moves flashinfer-python to 0.6.17 or later, retire {PID}"
    )


def test_a_lock_newer_than_every_release_checked_is_named_not_guessed(project: Path) -> None:
    m = matrix(project, {"0.6.16.post4": "applied", "0.6.17": "upstream-fixed"})
    out = propose_retirements(m, load_recipe(project / "recipes" / "kimi-k25-sm120.toml"), Project(project))
    assert [(r.variant, r.when) for r in out] == [
        ("cu128", "after-upgrade"),
        ("cu130", "after-upgrade"),
        ("cu130-aarch64", "unchecked"),
        ("cu130-current", "unchecked"),
    ]
    assert out[3].describe() == (
        "[variant.cu130-current] locks flashinfer-python 0.7.2, newer than every release "
        f"checked: check it (`envforge patches check {PID} --against flashinfer-python==0.7.2`)"
    )
    assert out[3].to_dict()["entry"] is None


def test_nothing_upstream_fixed_proposes_nothing(project: Path) -> None:
    m = matrix(project, {"0.6.16.post4": "applied"})
    assert propose_retirements(m, load_recipe(project / "recipes" / "kimi-k25-sm120.toml"), Project(project)) == ()


@pytest.mark.slow
@pytest.mark.network
def test_patches_check_proposes_the_entries_on_the_real_wheels(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = LocalIndex(tmp_path / "index")
    for version in ("0.6.16.post4", "0.6.17", "0.7.2"):
        index.add(cached_wheel("flashinfer-python", version))
    with serve(index) as served:
        args = [
            "patches",
            "check",
            PID,
            "--against",
            "flashinfer-python>=0.6.16.post4",
            "--recipe",
            "kimi-k25-sm120",
            "--index-url",
            served.url,
            "--cache",
            str(tmp_path / "cache"),
            "--project",
            str(project),
        ]
        code = main(args)
        out, _ = capsys.readouterr()
        assert main([*args, "--json"]) == 0
        data = json.loads(capsys.readouterr()[0])["data"]
    assert code == 0
    reason = (
        f"flashinfer-python {{v}} already does it: `envforge patches check {PID} --against flashinfer-python=={{v}}`"
        f" reports upstream-fixed ({EVIDENCE}); upstream-fixed on 0.6.17, 0.7.2"
    )
    entry = f'    {{{{ id = "{PID}", reason = "{reason}" }}}} (add to its retire-patchsets)'
    assert out == textwrap.dedent(f"""\
        flashinfer-python  {PID}
        0.6.16.post4       applied
        0.6.17             upstream-fixed
        0.7.2              upstream-fixed

        kimi-k25-sm120.toml: patchsets to retire
          [variant.cu128] locks flashinfer-python 0.6.3: once its lock moves flashinfer-python to 0.6.17 or later, retire {PID}
        {{e1}}
          [variant.cu130] is not locked yet: once its lock moves flashinfer-python to 0.6.17 or later, retire {PID}
        {{e1}}
          [variant.cu130-aarch64] locks flashinfer-python 0.7.2, where {PID} is upstream-fixed: retire it now
        {{e2}}
          [variant.cu130-current] locks flashinfer-python 0.7.2, where {PID} is upstream-fixed: retire it now
        {{e2}}
        """).format(e1=entry.format(v="0.6.17"), e2=entry.format(v="0.7.2"))
    assert [(r["variant"], r["when"]) for r in data["retirements"]] == [
        ("cu128", "after-upgrade"),
        ("cu130", "after-upgrade"),
        ("cu130-aarch64", "now"),
        ("cu130-current", "now"),
    ]
