"""``envforge patches check``: patchsets evaluated on released wheels, never installed.

Real sglang and flashinfer-python wheels from PyPI (the test cache, conftest.CACHE) and a real
local PEP 503 index on 127.0.0.1 (tests/support/localindex.py) serving wheels this test builds, for the
listing, range walking, download and cache mechanics on releases chosen to cover every state.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from tests.conftest import CACHE, cached_wheel
from tests.support.localindex import LocalIndex, make_wheel, serve
from tests.support.patching_trees import PATCHSETS, project_tree

from envforge.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["patches", "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return project_tree(tmp_path / "proj", PATCHSETS)


@pytest.mark.slow
@pytest.mark.network
def test_matrix_on_real_sglang_and_flashinfer_releases(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for dist, version in (
        ("sglang", "0.5.9"),
        ("sglang", "0.5.10"),
        ("sglang", "0.5.23"),
        ("flashinfer-python", "0.6.4"),
        ("flashinfer-python", "0.6.17"),
    ):
        cached_wheel(dist, version)  # skip, with the reason, when neither cached nor downloadable
    args = [
        "--against",
        "sglang==0.5.9",
        "--against",
        "sglang==0.5.10",
        "--against",
        "sglang==0.5.23",
        "--against",
        "flashinfer-python==0.6.4",
        "--against",
        "flashinfer-python==0.6.17",
        "--cache",
        str(CACHE),
        "--project",
        str(project),
    ]
    code, out, _ = run(capsys, *args, "--format", "markdown")
    assert code == 0
    assert out == textwrap.dedent("""\
        | sglang | kimik25-eagle3-delegation | sm120-flashinfer-allreduce-fusion | sm120-flashinfer-allreduce-fusion-layer-boundary | sm120-torch-symm-mem |
        |---|---|---|---|---|
        | 0.5.9 | applied | applied | out-of-range | applied |
        | 0.5.10 | upstream-fixed | applied | out-of-range | applied |
        | 0.5.23 | upstream-fixed | out-of-range | applied | applied |

        | flashinfer-python | flashinfer-sm120-trtllm-comm |
        |---|---|
        | 0.6.4 | applied |
        | 0.6.17 | upstream-fixed |
        """)
    code, out, _ = run(capsys, *args[:6], *args[-4:], "--json", "sm120-torch-symm-mem")
    data = json.loads(out)
    assert (code, data["schema"], data["data"]["ok"]) == (0, "envforge.patches-check/1", True)
    assert data["data"]["releases"] == {"sglang": ["0.5.9", "0.5.10", "0.5.23"]}
    cell = data["data"]["cells"][0]
    assert (cell["patchset"], cell["version"], cell["state"]) == ("sm120-torch-symm-mem", "0.5.9", "applied")
    assert [o["message"] for o in cell["operations"]] == [
        "added key 12 to TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",
        "added key 12 to TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM",
    ]


PATCHSET = """\
[patchset]
id = "demo-fast-path"
distribution = "demo-kernels"
versions = ">=1.0,<3"
reason = "test"

[[operation]]
kind = "add-list-element"
file = "demo_kernels/build.py"
function = "flags"
call = "nvcc"
keyword = "majors"
anchor = "[9, 10]"
element = "12"
"""

RELEASES = {  # what each release of the local index ships in demo_kernels/build.py
    "1.0": "def flags():\n    return nvcc(majors=[9, 10])\n",
    "1.1": "def flags():\n    return nvcc(majors=[9, 10])\n",
    "2.0": "def flags():\n    return nvcc(majors=[9, 10, 12])\n",
    "2.1": "def flags():\n    return nvcc(majors=[10, 11])\n",
    "3.0": "def flags():\n    return nvcc(majors=[9, 10])\n",
    "3.1rc1": "def flags():\n    return nvcc(majors=[9, 10])\n",
}


@pytest.fixture
def index(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    for version, text in RELEASES.items():
        idx.add(make_wheel(tmp_path / "built", "demo-kernels", version, files={"demo_kernels/build.py": text}))
    with serve(idx) as served:
        yield served


def test_a_range_walks_every_release_of_a_local_index(
    project: Path, index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "patchsets" / "demo-fast-path.toml").write_text(PATCHSET)
    cache = tmp_path / "cache"
    args = [
        "--against",
        "demo-kernels>=1.0",
        "--index-url",
        index.url,
        "--cache",
        str(cache),
        "--project",
        str(project),
    ]
    code, out, err = run(capsys, *args)
    assert code == 1  # 2.1 drifted
    assert out == textwrap.dedent("""\
        demo-kernels  demo-fast-path
        1.0           applied
        1.1           applied
        2.0           upstream-fixed
        2.1           drifted
        3.0           out-of-range
        """)
    assert err.splitlines()[-1].startswith(
        "error: demo-fast-path on demo-kernels 2.1: demo-fast-path: demo_kernels/build.py: majors is [10, 11], "
        "expected [9, 10]; "
    )
    assert sorted(p.name for p in (cache / "wheels").iterdir()) == [
        f"demo_kernels-{v}-py3-none-any.whl" for v in ("1.0", "1.1", "2.0", "2.1", "3.0")
    ]
    assert len(list((cache / "check").glob("*.json"))) == 5
    # warm: the same matrix from the cache, nothing downloaded again
    (cache / "wheels" / "demo_kernels-1.0-py3-none-any.whl").unlink()
    assert run(capsys, *args)[:2] == (1, out)
    assert not (cache / "wheels" / "demo_kernels-1.0-py3-none-any.whl").exists()
    # a pre-release only when named; --format markdown lists the drift under the table
    code, out, _ = run(
        capsys,
        "--against",
        "demo-kernels==3.1rc1",
        "--against",
        "demo-kernels==2.1",
        "--index-url",
        index.url,
        "--cache",
        str(cache),
        "--project",
        str(project),
        "--format",
        "markdown",
    )
    assert out.startswith(
        "| demo-kernels | demo-fast-path |\n|---|---|\n| 2.1 | drifted |\n| 3.1rc1 | out-of-range |\n\n"
        "- demo-fast-path on demo-kernels 2.1: demo-fast-path: demo_kernels/build.py: majors is"
    )


def test_a_changed_patchset_is_evaluated_again(
    project: Path, index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / "patchsets" / "demo-fast-path.toml"
    path.write_text(PATCHSET)
    args = [
        "--against",
        "demo-kernels==2.1",
        "--index-url",
        index.url,
        "--cache",
        str(tmp_path / "c"),
        "--project",
        str(project),
    ]
    assert run(capsys, *args)[0] == 1
    path.write_text(PATCHSET.replace('anchor = "[9, 10]"', 'anchor = "[10, 11]"'))
    code, out, _ = run(capsys, *args)
    assert (code, out.splitlines()[1].split()) == (0, ["2.1", "applied"])
    # a cached cell whose states are not states (a hand edit, an older envforge): evaluated again
    entries = [e for e in (tmp_path / "c").rglob("check/*.json") if '"applied"' in e.read_text()]
    assert entries
    for entry in entries:
        entry.write_text(entry.read_text().replace('"applied"', '"Applied"'))
    code, out, _ = run(capsys, *args)
    assert (code, out.splitlines()[1].split()) == (0, ["2.1", "applied"])


@pytest.mark.parametrize(
    ("against", "message"),
    [
        ("demo-kernels", "error: --against 'demo-kernels': no version given"),
        ("demo kernels ==1", "error: --against 'demo kernels ==1': not a requirement: "),
        ("other==1.0", "error: --against other==1.0: no patchset given targets other"),
        ("demo-kernels>=9", "error: --against demo-kernels>=9: no release with a wheel on http://127.0.0.1:"),
    ],
)
def test_bad_against_exits_2(
    project: Path, index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str], against: str, message: str
) -> None:
    (project / "patchsets" / "demo-fast-path.toml").write_text(PATCHSET)
    code, _, err = run(
        capsys,
        "demo-fast-path",
        "--against",
        against,
        "--index-url",
        index.url,
        "--cache",
        str(tmp_path / "c"),
        "--project",
        str(project),
    )
    assert code == 2 and err.startswith(message), err


def test_a_named_patchset_out_of_range_on_an_exact_release_fails(
    project: Path, index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B41: naming a patchset asks whether it applies there; out-of-range on a release given exactly is a
    problem (exit 1, the way out); on a range walk, or for a patchset not named, it stays a state."""
    (project / "patchsets" / "demo-fast-path.toml").write_text(PATCHSET)
    common = ["--index-url", index.url, "--cache", str(tmp_path / "c"), "--project", str(project)]
    code, out, err = run(capsys, "demo-fast-path", "--against", "demo-kernels==3.0", *common)
    assert (code, out) == (1, "demo-kernels  demo-fast-path\n3.0           out-of-range\n")
    assert err.splitlines()[-1] == (
        "error: demo-fast-path on demo-kernels 3.0: out-of-range: its versions >=1.0,<3 exclude 3.0, so it "
        "would not be applied; check the code of 3.0 and widen `versions`, or retire it in the recipe with a "
        "reason (retire-patchsets)"
    )
    assert run(capsys, "--against", "demo-kernels==3.0", *common)[0] == 0  # not named: a state only
    assert run(capsys, "demo-fast-path", "--against", "demo-kernels>=2.0,<2.1", *common)[0] == 0
    code, out, _ = run(capsys, "demo-fast-path", "--against", "demo-kernels==3.0", "--json", *common)
    data = json.loads(out)["data"]
    assert (code, data["ok"], data["must_apply"]) == (1, False, [{"patchset": "demo-fast-path", "version": "3.0"}])
