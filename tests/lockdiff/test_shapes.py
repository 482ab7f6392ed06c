"""Lock diff on the shapes of real-world locks (tests/data/lockdiff, see make_cases.py there).

Same-name entries (field cases B16, B16b), an index move said once, rebuilt vs moved files, wheel
coverage lost per platform and Python, uv.lock with CPU and CUDA torch side by side (conflicts,
resolution-markers, dependency edges). Expected outputs are literal: terminal text line by line
(wrapped at 120 columns), markdown and JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.lockdiff import diff_sides, diff_variants
from envforge.lockdiff.changes import FieldChange, index_names
from envforge.lockdiff.classify import _markers_differ, _version_change
from envforge.lockdiff.matrix import render_matrix_terminal
from envforge.lockdiff.model import _keyed
from envforge.lockdiff.pairing import _greedy, _pair_cost, _permutations
from envforge.lockdiff.wheels import _meta_what
from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.pairing import pair_entries
from envforge.lockdiff.wheels import wheel_coverage
from envforge.lockdiff.model import Artifact, Lock, LockedPackage, parse_lock
from envforge.lockdiff.render import WIDTH, diff_data, render_markdown, render_terminal, render_textconv, source_text

DATA = Path(__file__).parents[1] / "data" / "lockdiff"


def load(name: str, text: str | None = None) -> Lock:
    return parse_lock((DATA / name).read_text() if text is None else text, label=name)


def diff(case: str):  # type: ignore[no-untyped-def]
    ext = ".lock" if case.startswith("uv-") else ".toml"
    return diff_locks(load(f"{case}-old{ext}"), load(f"{case}-new{ext}"))


# --- same-name entries (B16, B16b) ------------------------------------------------------------


def test_b16_marker_removed_from_kept_entry_other_entry_removed() -> None:
    d = diff("b16-idna")
    assert (d.old_count, d.new_count) == (2, 1)
    assert render_terminal(d).split("\n") == [
        "lock diff: b16-idna-old.toml -> b16-idna-new.toml",
        "2 -> 1 packages: 1 removed, 1 marker",
        "other (1 removed, 1 marker)",
        "  marker   idna  3.10  marker \"sys_platform == 'linux'\" -> (none)",
        "  removed  idna  3.7   where sys_platform == 'win32'",
    ]


def test_b16b_markers_change_on_both_entries_paired_by_version() -> None:
    assert render_terminal(diff("b16b-xxhash")).split("\n") == [
        "lock diff: b16b-xxhash-old.toml -> b16b-xxhash-new.toml",
        "2 -> 2 packages: 2 marker",
        "other (2 marker)",
        "  marker  xxhash  4.0.0  marker \"platform_machine == 's390x'\" -> \"python_full_version == '3.12.*' and platform_machine",
        "                           == 's390x'\"",
        "  marker  xxhash  4.0.1  marker \"platform_machine != 's390x'\" -> \"python_full_version == '3.12.*' and platform_machine",
        "                           != 's390x'\"",
    ]


def test_b16b_version_and_marker_change_shows_both() -> None:
    assert render_terminal(diff("b16b-foo")).split("\n") == [
        "lock diff: b16b-foo-old.toml -> b16b-foo-new.toml",
        "1 -> 1 package: 1 upgraded",
        "other (1 upgraded)",
        "  upgraded  foo  1.0 -> 1.1  minor; marker \"sys_platform == 'linux'\" -> \"sys_platform == 'win32'\"",
    ]


def test_one_of_several_torch_entries_keeps_its_local_label_change() -> None:
    d = diff("torch-variants")
    assert render_terminal(d).split("\n") == [
        "lock diff: torch-variants-old.toml -> torch-variants-new.toml",
        "3 -> 3 packages: 1 local label, 1 marker",
        "torch family (1 local label, 1 marker)",
        "  marker       torch  2.9.1+cpu                   marker \"sys_platform == 'win32'\" -> \"sys_platform == 'win32' and",
        "                                                    platform_machine == 'AMD64'\"",
        "  local label  torch  2.9.1+cu128 -> 2.9.1+cu130  +cu128 -> +cu130; where sys_platform == 'linux'",
        "                                                  index https://download.pytorch.org/whl/{cu128 -> cu130}",
        "                                                  wheels -linux aarch64",
    ]
    assert render_markdown(d).split("\n")[6:] == [
        "| **torch family** | marker | `torch` | 2.9.1+cpu | marker \"sys_platform == 'win32'\" → "
        "\"sys_platform == 'win32' and platform_machine == 'AMD64'\" |",
        "|  | local label | `torch` | 2.9.1+cu128 → 2.9.1+cu130 | +cu128 → +cu130; where sys_platform == "
        "'linux'<br>index https://download.pytorch.org/whl/{cu128 → cu130}<br>wheels -linux aarch64 |",
    ]
    (marker, local) = diff_data(d)["changes"]
    assert local == {
        "kind": "local",
        "family": "torch",
        "old_name": "torch",
        "new_name": "torch",
        "old_version": "2.9.1+cu128",
        "new_version": "2.9.1+cu130",
        "level": None,
        "old_source": "https://download.pytorch.org/whl/cu128",
        "new_source": "https://download.pytorch.org/whl/cu130",
        "old_marker": "sys_platform == 'linux'",
        "new_marker": "sys_platform == 'linux'",
        "marker_changed": False,
        "coverage": ["-linux aarch64"],
        "files": [],
        "dependencies": [],
        "attributes": [],
        "detail": "+cu128 -> +cu130; where sys_platform == 'linux'",
        "flagged": False,
        "hidden": False,
    }
    assert (marker["kind"], marker["marker_changed"], marker["old_marker"], marker["new_marker"]) == (
        "marker",
        True,
        "sys_platform == 'win32'",
        "sys_platform == 'win32' and platform_machine == 'AMD64'",
    )


def test_every_entry_is_kept_and_keyed_uniquely() -> None:
    lock = load("torch-variants-old.toml")
    assert list(lock.packages) == [
        "torch 2.9.1 ; sys_platform == 'darwin'",
        "torch 2.9.1+cpu ; sys_platform == 'win32'",
        "torch 2.9.1+cu128 ; sys_platform == 'linux'",
    ]
    # the same version from two indexes (one per platform): both kept, keyed by their markers
    text = (
        (DATA / "b16-idna-old.toml")
        .read_text()
        .replace('version = "3.7"', 'version = "3.10"')
        .replace("packages/e5/idna-3.7", "mirror/idna-3.10")
    )
    assert list(load("x.toml", text).packages) == [
        "idna 3.10 ; sys_platform == 'linux'",
        "idna 3.10 ; sys_platform == 'win32'",
    ]


def test_keys_stay_unique_for_entries_the_reader_would_refuse() -> None:
    a = entry("3.10", source="https://pypi.org/simple", name="idna")
    b = entry("3.10", source="https://mirror.example/simple", name="idna")
    assert list(_keyed([a, b, a, entry("1.0")])) == [
        "demo",
        "idna 3.10",
        "idna 3.10 @ https://mirror.example/simple",
        "idna 3.10 @ https://pypi.org/simple",
    ]
    assert list(_keyed([a, a, a])) == [
        "idna 3.10",
        "idna 3.10 @ https://pypi.org/simple",
        "idna 3.10 @ https://pypi.org/simple #2",
    ]


def entry(
    version: str, marker: str | None = None, source: str = "https://pypi.org/simple", name: str = "demo"
) -> LockedPackage:
    f = Artifact(f"{name}-{version}-py3-none-any.whl", None, (("sha256", version),), None, None)
    return LockedPackage(name, version, marker, source, (f,))


def test_pairing_prefers_markers_then_versions_and_sources() -> None:
    a, b = entry("1.0", "sys_platform == 'linux'"), entry("2.0", "sys_platform == 'win32'")
    c, d = entry("2.0", "sys_platform == 'linux'"), entry("3.0", "sys_platform == 'win32'")
    assert pair_entries([a, b], [d, c]) == ([(a, c), (b, d)], [], [])
    cpu, cu = entry("1.0+cpu", source="https://x/cpu"), entry("1.0+cu126", source="https://x/cu126")
    cpu2, cu2 = entry("2.0+cpu", source="https://x/cpu"), entry("2.0+cu128", source="https://x/cu128")
    assert pair_entries([cpu, cu], [cu2, cpu2]) == ([(cpu, cpu2), (cu, cu2)], [], [])
    # more on one side: the best match is paired, the rest is left over
    assert pair_entries([a], [d, c]) == ([(a, c)], [], [d])
    assert pair_entries([a, b, c], [b]) == ([(b, b)], [a, c], [])
    assert pair_entries([], [a]) == ([], [], [a])


def test_pairing_many_entries_falls_back_to_greedy() -> None:
    olds = [entry(f"{i}.0", f"python_version == '3.{i}'") for i in range(9)]
    news = [entry(f"{i}.1", f"python_version == '3.{i}'") for i in reversed(range(9))]
    pairs, gone, came = pair_entries(olds, news)
    assert [(x.version, y.version) for x, y in pairs] == [(f"{i}.0", f"{i}.1") for i in range(9)]
    assert (gone, came) == ([], [])


# --- index moves, rebuilt vs moved, wheel coverage ---------------------------------------------


def test_index_move_said_once_then_what_else_changed() -> None:
    d = diff("index-move")
    assert render_terminal(d).split("\n") == [
        "lock diff: index-move-old.toml -> index-move-new.toml",
        "5 -> 5 packages: 1 index move (5 packages), 1 upgraded, 1 rebuilt, 1 files",
        "5 packages moved index https://packages.example.com/rhai/{3.5 -> 3.6}/cuda13.0/simple (certifi, idna, numpy, pyyaml,",
        "      six)",
        "other (1 upgraded, 1 rebuilt, 1 files)",
        "  files     numpy   2.2.6           wheels -linux ppc64le, -linux s390x, -cp311",
        "  upgraded  pyyaml  6.0.2 -> 6.0.3  patch",
        "  rebuilt   six     1.17.0          1 file rebuilt, build tag 8 -> 1",
    ]
    md = render_markdown(d).split("\n")
    assert md[4:10] == [
        "- **5 packages** moved index `https://packages.example.com/rhai/{3.5 → 3.6}/cuda13.0/simple`",
        "  <details><summary>packages</summary>",
        "",
        "  certifi, idna, numpy, pyyaml, six",
        "",
        "  </details>",
    ]
    assert md[13:] == [
        "| **other** | files | `numpy` | 2.2.6 | wheels -linux ppc64le, -linux s390x, -cp311 |",
        "|  | upgraded | `pyyaml` | 6.0.2 → 6.0.3 | patch |",
        "|  | rebuilt | `six` | 1.17.0 | 1 file rebuilt, build tag 8 → 1 |",
    ]
    data = diff_data(d)
    assert data["index_moves"] == [
        {
            "old": "https://packages.example.com/rhai/3.5/cuda13.0/simple",
            "new": "https://packages.example.com/rhai/3.6/cuda13.0/simple",
            "old_name": None,
            "new_name": None,
            "packages": ["certifi", "idna", "numpy", "pyyaml", "six"],
        }
    ]
    assert data["summary"] == {"files": 1, "upgraded": 1, "rebuilt": 1}
    numpy = data["changes"][0]
    assert (numpy["coverage"], numpy["files"]) == (
        ["-linux ppc64le", "-linux s390x", "-cp311"],
        [
            "-numpy-2.2.6-cp311-cp311-manylinux_2_28_aarch64.whl",
            "-numpy-2.2.6-cp311-cp311-manylinux_2_28_ppc64le.whl",
            "-numpy-2.2.6-cp311-cp311-manylinux_2_28_s390x.whl",
            "-numpy-2.2.6-cp311-cp311-manylinux_2_28_x86_64.whl",
            "-numpy-2.2.6-cp312-cp312-manylinux_2_28_ppc64le.whl",
            "-numpy-2.2.6-cp312-cp312-manylinux_2_28_s390x.whl",
        ],
    )


def test_index_names_shorten_a_move() -> None:
    old, new = load("index-move-old.toml"), load("index-move-new.toml")
    d = diff_locks(
        old,
        new,
        names={
            "https://packages.example.com/rhai/3.5/cuda13.0/simple/": "rhai-3.5",
            "https://packages.example.com/rhai/3.6/cuda13.0/simple": "rhai-3.6",
        },
    )
    assert render_terminal(d).split("\n")[2] == (
        "5 packages moved index rhai-3.5 -> rhai-3.6 (certifi, idna, numpy, pyyaml, six)"
    )
    assert diff_data(d)["index_moves"][0]["old_name"] == "rhai-3.5"


def test_only_moves_is_a_change() -> None:
    old = (DATA / "index-move-old.toml").read_text()
    new = old.replace("/rhai/3.5/", "/rhai/3.6/")
    d = diff_locks(load("a.toml", old), load("b.toml", new))
    assert d.packages == () and d.fields == () and d.has_changes() and d.has_changes(show_all=True)
    assert render_terminal(d).split("\n")[1:] == [
        "5 -> 5 packages: 1 index move (5 packages)",
        "5 packages moved index https://packages.example.com/rhai/{3.5 -> 3.6}/cuda13.0/simple (certifi, idna, numpy, pyyaml,",
        "      six)",
    ]


def test_only_moves_trips_exit_code(tmp_path: Path) -> None:
    old = (DATA / "index-move-old.toml").read_text()
    new = old.replace("/rhai/3.5/", "/rhai/3.6/")
    (tmp_path / "a.toml").write_text(old)
    (tmp_path / "b.toml").write_text(new)
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "lock", "diff", "a.toml", "b.toml", "--exit-code", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["schema"] == "envforge.lockdiff/3"
    assert doc["data"]["diffs"][0]["index_moves"][0]["packages"] == ["certifi", "idna", "numpy", "pyyaml", "six"]
    assert doc["data"]["diffs"][0]["changes"] == []


def test_one_package_moved_alone_is_a_moved_line() -> None:
    old = (DATA / "index-move-old.toml").read_text()
    new = old.replace(
        '/rhai/3.5/cuda13.0/simple"\nwheels = [\n  { url = "https://packages.example.com/rhai/3.5/cuda13.0/files/six',
        '/rhai/3.6/cuda13.0/simple"\nwheels = [\n  { url = "https://packages.example.com/rhai/3.6/cuda13.0/files/six',
    )
    assert new != old
    assert render_terminal(diff_locks(load("a.toml", old), load("b.toml", new))).split("\n")[1:] == [
        "5 -> 5 packages: 1 moved",
        "other (1 moved)",
        "  moved  six  1.17.0  index https://packages.example.com/rhai/{3.5 -> 3.6}/cuda13.0/simple",
    ]


def test_same_file_name_new_hashes_is_rehashed_not_rebuilt() -> None:
    old = (DATA / "index-move-old.toml").read_text()
    marker = 'six-1.17.0-8-py2.py3-none-any.whl", hashes = { sha256 = "'
    start = old.index(marker) + len(marker)
    new = old[:start] + "0" * 64 + old[start + 64 :]
    rows = render_terminal(diff_locks(load("a.toml", old), load("b.toml", new))).split("\n")
    assert rows[1:] == [
        "5 -> 5 packages: 1 REHASHED",
        "other (1 REHASHED)",
        "  ! REHASHED  six  1.17.0  same version, new hashes: six-1.17.0-8-py2.py3-none-any.whl",
    ]


def test_url_moved_within_one_index_same_hashes_is_moved() -> None:
    old = (DATA / "index-move-old.toml").read_text()
    new = old.replace("cuda13.0/files/six", "cuda13.0/files/mirror/six")
    rows = render_terminal(diff_locks(load("a.toml", old), load("b.toml", new))).split("\n")
    assert rows[1:] == [
        "5 -> 5 packages: 1 moved",
        "other (1 moved)",
        "  moved  six  1.17.0  index https://packages.example.com/rhai/3.5/cuda13.0/files/{(none) -> mirror}",
    ]


@pytest.mark.parametrize(
    ("filename", "covers"),
    [
        ("torch-2.9.1-cp312-none-macosx_11_0_arm64.whl", {"macos arm64", "cp312"}),
        ("numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", {"linux x86_64", "cp311"}),
        ("x-1.0-cp38-abi3-musllinux_1_2_aarch64.whl", {"musllinux aarch64", "cp38-abi3"}),
        ("x-1.0-cp313-cp313t-win_arm64.whl", {"win arm64", "cp313"}),
        ("x-1.0-cp312-cp312-win32.whl", {"win32", "cp312"}),
        ("x-1.0-cp312-cp312-linux_s390x.whl", {"linux s390x", "cp312"}),
        ("six-1.17.0-8-py2.py3-none-any.whl", {"any", "py2", "py3"}),
        ("x-1.0-cp312-cp312-macosx_10_13_universal2.whl", {"macos universal2", "cp312"}),
        ("x-1.0-pp310-pypy310_pp73-manylinux2014_ppc64le.whl", {"linux ppc64le", "pp310"}),
        ("x-1.0.tar.gz", {"sdist"}),
        ("not-a-wheel.whl", set()),
    ],
)
def test_wheel_coverage_from_wheel_tags(filename: str, covers: set[str]) -> None:
    p = LockedPackage("x", "1.0", None, "s", (Artifact(filename, None, (), None, None),))
    assert wheel_coverage(p) == covers


@pytest.mark.parametrize(
    ("old", "new", "text"),
    [
        (
            "https://a.example/r/3.5/cu/simple",
            "https://a.example/r/3.6/cu/simple",
            "https://a.example/r/{3.5 -> 3.6}/cu/simple",
        ),
        ("https://a.example/simple", "https://a.example/x/simple", "https://a.example/{(none) -> x}/simple"),
        (
            "https://a.example/simple",
            "https://b.example/simple",
            "https://a.example/simple -> https://b.example/simple",
        ),
        ("https://pypi.org/simple", "https://a.example/x", "pypi -> https://a.example/x"),
        ("git https://g/x@1", "git https://g/x@2", "git https://g/x@1 -> git https://g/x@2"),
    ],
)
def test_source_text(old: str, new: str, text: str) -> None:
    assert source_text(old, new, {"https://pypi.org/simple": "pypi"}) == text


def test_a_real_world_sized_lock() -> None:
    d = diff("notebook-235")
    rows = render_terminal(d).split("\n")
    assert (d.old_count, d.new_count, len(d.index_moves[0].packages)) == (235, 235, 234)
    assert rows[1:] == [
        "235 -> 235 packages: 1 index move (234 packages), 1 added, 1 removed, 2 upgraded, 1 rebuilt, 1 files, 1 marker",
        "234 packages moved index https://packages.example.com/rhai/{3.5 -> 3.6}/cuda13.0/simple (--format markdown or json lists",
        "      them)",
        "other (1 added, 1 removed, 2 upgraded, 1 rebuilt, 1 files, 1 marker)",
        "  removed   bitsandbytes  5.3.2           index https://packages.example.com/rhai/3.5/cuda13.0/simple",
        "  marker    debugpy       3.10.3          marker (none) -> \"sys_platform != 'win32'\"",
        "  added     hf-transfer   0.1.9           index https://packages.example.com/rhai/3.6/cuda13.0/simple",
        "  files     scikit-learn  3.5.0           wheels -linux ppc64le, -cp311",
        "  rebuilt   six           1.10.0          1 file rebuilt, build tag 8 -> 1",
        "  upgraded  tokenizers    3.6.4 -> 4.0.0  major",
        "  upgraded  transformers  3.0.1 -> 4.0.0  major",
    ]
    assert all(len(line) <= WIDTH for line in render_terminal(d).split("\n"))
    md = render_markdown(d)
    assert max(len(line) for line in md.split("\n")) <= 200
    data = diff_data(d)
    assert len(data["index_moves"][0]["packages"]) == 234 and len(data["changes"]) == 7


# --- uv.lock: CPU and CUDA torch side by side ---------------------------------------------------


def test_uv_lock_torch_cpu_and_cuda_relocked() -> None:
    d = diff("uv-torch")
    assert render_terminal(d).split("\n") == [
        "lock diff: uv-torch-old.lock -> uv-torch-new.lock",
        "5 -> 5 packages: 3 upgraded, 1 dependencies, 11 lock settings",
        "torch family (2 upgraded)",
        "  upgraded      torch               2.7.1+cpu -> 2.8.0+cpu      minor",
        "      marker \"extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'\" -> \"extra == 'extra-4-demo-cpu' and extra",
        "        != 'extra-4-demo-cu128'\"",
        "      wheels +cp312, -linux aarch64, -cp311",
        "  upgraded      torch               2.7.1+cu126 -> 2.8.0+cu128  minor",
        "      local label +cu126 -> +cu128",
        "      marker +sys_platform != 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu128'",
        "        +sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu128'",
        "        -sys_platform != 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu126'",
        "        -sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu126'",
        "      index https://download.pytorch.org/whl/{cu126 -> cu128}",
        "      wheels +cp312, -cp311",
        "      dependencies +filelock ; extra == 'extra-4-demo-cu128'",
        "        +nvidia-cublas-cu12 ; platform_machine == 'x86_64' and sys_platform == 'linux' and extra == 'extra-4-demo-cu128'",
        "        -filelock ; extra == 'extra-4-demo-cu126'",
        "        -nvidia-cublas-cu12 ; platform_machine == 'x86_64' and sys_platform == 'linux' and extra == 'extra-4-demo-cu126'",
        "nvidia-* / cuda-* (1 upgraded)",
        "  upgraded      nvidia-cublas-cu12  12.6.4.1 -> 12.8.4.1        minor",
        "other (1 dependencies)",
        "  dependencies  demo                0.1.0",
        # the [cpu] edge follows its torch entry's upgrade (said above): only the renamed extra's edge changed
        "      dependencies +[cu128] torch ==2.8.0+cu128 @ https://download.pytorch.org/whl/cu128 ; extra == 'extra-4-demo-cu128'",
        "        -[cu126] torch ==2.7.1+cu126 @ https://download.pytorch.org/whl/cu126 ; extra == 'extra-4-demo-cu126'",
        "lock settings ([tool.envforge] and header)",
        "  requires-python: >=3.11 -> >=3.12",
        "  conflicts: removed demo[cpu] / demo[cu126]",
        "  conflicts: added demo[cpu] / demo[cu128]",
        "  resolution-markers: removed extra != 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "  resolution-markers: removed extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "  resolution-markers: removed sys_platform != 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu126'",
        "  resolution-markers: removed sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu126'",
        "  resolution-markers: added extra != 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu128'",
        "  resolution-markers: added extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu128'",
        "  resolution-markers: added sys_platform != 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu128'",
        "  resolution-markers: added sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu128'",
    ]
    assert all(len(line) <= WIDTH for line in render_terminal(d).split("\n"))
    cuda = next(c for c in diff_data(d)["changes"] if c["old_version"] == "2.7.1+cu126")
    assert cuda["dependencies"] == [
        "+filelock ; extra == 'extra-4-demo-cu128'",
        "+nvidia-cublas-cu12 ; platform_machine == 'x86_64' and sys_platform == 'linux' and extra == 'extra-4-demo-cu128'",
        "-filelock ; extra == 'extra-4-demo-cu126'",
        "-nvidia-cublas-cu12 ; platform_machine == 'x86_64' and sys_platform == 'linux' and extra == 'extra-4-demo-cu126'",
    ]
    settings = diff_data(d)["settings"]
    assert settings[:3] == [
        {
            "section": "header",
            "subject": "requires-python",
            "kind": "changed",
            "old": ">=3.11",
            "new": ">=3.12",
            "note": None,
            "hidden": False,
        },
        {
            "section": "header",
            "subject": "conflicts",
            "kind": "removed",
            "old": "demo[cpu] / demo[cu126]",
            "new": None,
            "note": None,
            "hidden": False,
        },
        {
            "section": "header",
            "subject": "conflicts",
            "kind": "added",
            "old": None,
            "new": "demo[cpu] / demo[cu128]",
            "note": None,
            "hidden": False,
        },
    ]
    md = render_markdown(d).split("\n")
    assert ("| **nvidia-\\* / cuda-\\*** | upgraded | `nvidia-cublas-cu12` | 12.6.4.1 → 12.8.4.1 | minor |") in md
    assert (
        "| | | | | -filelock ; extra == 'extra-4-demo-cu126'<br>-nvidia-cublas-cu12 ; platform_machine == 'x86_64' "
        "and sys_platform == 'linux' and extra == 'extra-4-demo-cu126' |" in md
    )
    assert "| `conflicts` | added demo[cpu] / demo[cu128] |" in md


def test_uv_lock_model_keys_markers_and_edges() -> None:
    lock = load("uv-torch-old.lock")
    assert list(lock.packages) == [
        "demo",
        "filelock",
        "nvidia-cublas-cu12",
        "torch 2.7.1+cpu ; extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "torch 2.7.1+cu126 ; sys_platform != 'linux' and extra != 'extra-4-demo-cpu' and extra == "
        "'extra-4-demo-cu126' or sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == "
        "'extra-4-demo-cu126'",
    ]
    assert lock.lists["conflicts"] == ("demo[cpu] / demo[cu126]",)
    assert lock.packages["demo"].dependencies == (
        "[cpu] torch ==2.7.1+cpu @ https://download.pytorch.org/whl/cpu ; extra == 'extra-4-demo-cpu'",
        "[cu126] torch ==2.7.1+cu126 @ https://download.pytorch.org/whl/cu126 ; extra == 'extra-4-demo-cu126'",
    )
    text = render_textconv(lock).split("\n")
    assert text[:4] == [
        "# envforge lock textconv: uv.lock, 5 packages",
        "requires-python = >=3.11",
        "resolution-markers =",
        "  sys_platform == 'linux' and extra != 'extra-4-demo-cpu' and extra == 'extra-4-demo-cu126'",
    ]
    assert "conflicts =" in text and "  demo[cpu] / demo[cu126]" in text


def test_dependency_edges_only_and_marker_spelling() -> None:
    old = (DATA / "uv-torch-old.lock").read_text()
    new = old.replace(
        '{ name = "filelock", marker = "extra == \'extra-4-demo-cpu\'" }',
        '{ name = "filelock", marker = "extra == \'extra-4-demo-cpu\'" },\n    { name = "typing-extensions" }',
    )
    rows = render_terminal(diff_locks(load("a.lock", old), load("b.lock", new))).split("\n")
    assert rows[1:] == [
        "5 -> 5 packages: 1 dependencies",
        "torch family (1 dependencies)",
        "  dependencies  torch  2.7.1+cpu  where extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "                                  dependencies +typing-extensions",
    ]
    pylock = (DATA / "b16b-foo-old.toml").read_text()
    respelt = pylock.replace("sys_platform == 'linux'", "sys_platform=='linux'")
    assert not diff_locks(load("a.toml", pylock), load("b.toml", respelt)).has_changes(show_all=True)


def test_pylock_top_level_arrays_item_by_item() -> None:
    old = (
        (DATA / "b16b-foo-old.toml")
        .read_text()
        .replace('created-by = "uv"\n', 'created-by = "uv"\nenvironments = ["sys_platform == \'linux\'"]\n')
    )
    new = old.replace(
        "environments = [\"sys_platform == 'linux'\"]",
        "environments = [\"sys_platform == 'linux'\", \"sys_platform == 'darwin'\"]",
    )
    rows = render_terminal(diff_locks(load("a.toml", old), load("b.toml", new))).split("\n")
    assert rows[1:] == [
        "1 -> 1 package: 1 lock setting",
        "lock settings ([tool.envforge] and header)",
        "  environments: added sys_platform == 'darwin'",
    ]


def test_recipe_names_the_indexes(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "nb.toml").write_text(
        'indexes = { rhai-35 = "https://packages.example.com/rhai/3.5/cuda13.0/simple/" }\n'
        '[recipe]\nname = "nb"\n'
        '[variant.next]\nindexes = { rhai-36 = "https://packages.example.com/rhai/3.6/cuda13.0/simple" }\n'
    )
    for side in ("old", "new"):
        lock = (DATA / f"index-move-{side}.toml").read_text() + '\n[tool.envforge]\nrecipe = "nb"\n'
        (tmp_path / f"{side}.toml").write_text(lock)
    d = diff_sides("old.toml", "new.toml", base=tmp_path)
    assert render_terminal(d).split("\n")[2] == (
        "5 packages moved index rhai-35 -> rhai-36 (certifi, idna, numpy, pyyaml, six)"
    )
    # no recipe of that name: URLs stay as they are
    (tmp_path / "recipes" / "nb.toml").unlink()
    assert "{3.5 -> 3.6}" in render_terminal(diff_sides("old.toml", "new.toml", base=tmp_path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "a"\n'
            'wheels = [{url = 5, hashes = {sha256 = "0"}}]\n',
            "x.toml is not a valid PEP 751 lock at `packages[0].wheels[0].url`: Unexpected type int (expected str)",
        ),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[tool]\nenvforge = 3\n[[packages]]\nname = "a"\n'
            'wheels = [{url = "https://x/a-1-py3-none-any.whl", hashes = {sha256 = "0"}}]\n',
            "x.toml is not a valid envforge lock at `tool.envforge`: should be a table",
        ),
    ],
)
def test_malformed_values_are_input_errors(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_lock(text, label="x.toml")
    assert err.value.message.startswith(message)


# --- a cpu/cuda/rocm variant matrix -------------------------------------------------------------


def test_variant_matrix_cpu_cuda_rocm() -> None:
    m = diff_variants("demo", lockfiles_dir=DATA / "matrix")
    assert render_matrix_terminal(m).split("\n") == [
        "demo: 3 variants (cpu, cu128, rocm); 1 package identical, 4 differ",
        "package                  cpu                                       cu128                                       rocm",
        "torch family",
        "  torch                  2.9.1+cpu [pytorch-cpu]                   2.9.1+cu128 [pytorch-cu128]                 2.9.1+rocm6.4 [pytorch-rocm6.4]",
        "nvidia-* / cuda-*",
        "  nvidia-nccl-cu12       -                                         2.27.5                                      -",
        "other",
        "  numpy                  2.2.6                                     2.2.6                                       2.2.6 lacks linux aarch64",
        "  pytorch-triton-rocm    -                                         -                                           3.5.1 [pytorch-rocm6.4]",
        "lock settings",
        "  index pytorch-cpu      url=https://download.pytorch.org/whl/cpu  -                                           -",
        "  index pytorch-cu128    -                                         url=https://download.pytorch.org/whl/cu128  -",
        "  index pytorch-rocm6.4  -                                         -                                           url=https://download.pytorch.org/whl/rocm6.4",
    ]


def test_variant_matrix_same_coverage_other_files_shows_digests(tmp_path: Path) -> None:
    for variant in ("cpu", "cu128"):
        text = (DATA / "matrix" / f"pylock.demo-{variant}.toml").read_text()
        if variant == "cu128":  # numpy rebuilt: same wheel tags, other hashes
            start = text.index('numpy-2.2.6-cp312-cp312-manylinux_2_28_aarch64.whl", hashes = { sha256 = "')
            start = text.index('sha256 = "', start) + len('sha256 = "')
            text = text[:start] + "0" * 64 + text[start + 64 :]
        (tmp_path / f"pylock.demo-{variant}.toml").write_text(text)
    rows = render_matrix_terminal(diff_variants("demo", lockfiles_dir=tmp_path)).split("\n")
    assert "  numpy                2.2.6 files:ca07d6                        2.2.6 files:23adec" in rows


# --- pairing costs and helpers, pinned (their documented values) -------------------------------


def test_pair_cost_weights() -> None:
    base = entry("1.0+cu128", "sys_platform == 'linux'", "https://x/a")
    assert _pair_cost(base, base) == 0
    assert _pair_cost(base, entry("1.0+cu128", "sys_platform == 'win32'", "https://x/a")) == 16
    assert _pair_cost(base, entry("2.0+cu128", "sys_platform == 'linux'", "https://x/a")) == 8 + 1
    assert _pair_cost(base, entry("1.0+cu130", "sys_platform == 'linux'", "https://x/a")) == 2 + 1
    assert _pair_cost(base, entry("1.0+cu128", "sys_platform == 'linux'", "https://x/b")) == 4
    other_files = LockedPackage("demo", "1.0+cu128", "sys_platform == 'linux'", "https://x/a", ())
    assert _pair_cost(base, other_files) == 1
    assert _pair_cost(entry("1.0+a+b"), entry("1.0+a+c")) == 2 + 1  # public part: before the first +
    assert _pair_cost(entry("1.0"), LockedPackage("demo", None, None, "https://pypi.org/simple", ())) == 8 + 1


def test_permutation_count_and_greedy() -> None:
    assert [_permutations(7, 7), _permutations(9, 2), _permutations(5, 0), _permutations(8, 8)] == [5040, 72, 1, 40320]
    assert _greedy([[5, 1, 9], [2, 0, 7]]) == (0, 1)
    assert _greedy([[3, 3], [3, 3]]) == (0, 1)


def test_pairing_keeps_markers_over_a_local_label() -> None:
    olds = [entry("1.0", "a == '1'"), entry("1.0", "a == '2'")]
    news = [entry("1.0", "a == '2'"), entry("1.0+x", "a == '1'")]
    pairs, _, _ = pair_entries(olds, news)
    assert [(x.marker, y.marker) for x, y in pairs] == [("a == '1'", "a == '1'"), ("a == '2'", "a == '2'")]


def test_lockfile_added_or_removed_is_a_change() -> None:
    lock = load("b16-idna-old.toml")
    added, removed = diff_locks(None, lock), diff_locks(lock, None)
    assert (added.status, added.old_label, added.new_label, added.old_count, added.new_count) == (
        "added",
        "(none)",
        "b16-idna-old.toml",
        0,
        2,
    )
    assert (removed.status, removed.old_label, removed.new_label, removed.old_count, removed.new_count) == (
        "removed",
        "b16-idna-old.toml",
        "(none)",
        2,
        0,
    )
    assert added.has_changes() and removed.has_changes() and added.packages == ()


def test_hidden_settings_count_only_with_all() -> None:
    text = (DATA / "b16b-foo-old.toml").read_text()
    d = diff_locks(load("a.toml", "# one\n" + text), load("b.toml", "# two\n" + text))
    assert (d.has_changes(), d.has_changes(show_all=True), d.hidden_count()) == (False, True, 1)


def test_metadata_what_changed() -> None:
    a = Artifact("x.whl", None, (), 10, "2025-01-01")
    assert _meta_what(a, Artifact("x.whl", None, (), 11, "2025-01-01")) == "size of identical files"
    assert _meta_what(a, Artifact("x.whl", None, (), 11, "2025-01-02")) == ("upload-time and size of identical files")


def test_replaced_keeps_source_marker_and_coverage() -> None:
    old = LockedPackage(
        "nvidia-nccl-cu12",
        "2.27.5",
        "sys_platform == 'linux'",
        "https://pypi.org/simple",
        (
            Artifact(
                "nvidia_nccl_cu12-2.27.5-py3-none-manylinux_2_18_aarch64.whl", None, (("sha256", "a"),), None, None
            ),
            Artifact(
                "nvidia_nccl_cu12-2.27.5-py3-none-manylinux_2_18_x86_64.whl", None, (("sha256", "b"),), None, None
            ),
        ),
    )
    new = LockedPackage(
        "nvidia-nccl-cu13",
        "2.28.3",
        None,
        "https://mirror.example/simple",
        (Artifact("nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_18_x86_64.whl", None, (("sha256", "c"),), None, None),),
    )
    a = Lock("a", "pylock", {}, (), {"nvidia-nccl-cu12": old}, {})
    b = Lock("b", "pylock", {}, (), {"nvidia-nccl-cu13": new}, {})
    (change,) = diff_locks(a, b).packages
    assert (
        change.kind,
        change.old_source,
        change.new_source,
        change.old_marker,
        change.new_marker,
        change.marker_changed,
        change.coverage,
        change.detail,
    ) == (
        "replaced",
        "https://pypi.org/simple",
        "https://mirror.example/simple",
        "sys_platform == 'linux'",
        None,
        True,
        ("-linux aarch64",),
        "-cu12 -> -cu13",
    )
    same = diff_locks(
        a,
        Lock(
            "b",
            "pylock",
            {},
            (),
            {
                "nvidia-nccl-cu13": LockedPackage(
                    "nvidia-nccl-cu13", "2.28.3", "sys_platform == 'linux'", "https://pypi.org/simple", old.artifacts
                )
            },
            {},
        ),
    )
    (change,) = same.packages
    assert (change.old_source, change.new_source, change.marker_changed, change.coverage) == (None, None, False, ())


def test_version_change_values() -> None:
    assert _version_change("1.0", "1.0") == (None, None, "")
    assert _version_change("1.0", "1.0.0") == (None, None, "")  # equal as PEP 440 versions
    assert _version_change("1.0", None) == ("downgraded", "major", "")
    assert _version_change(None, "1.0") == ("upgraded", "major", "")
    assert _version_change("abc", "def") == ("upgraded", None, "not PEP 440 versions")
    assert _version_change("1.0.dev1", "1.0.dev2") == ("upgraded", "dev", "")
    assert _version_change("1.0+cpu", "1.0") == ("local", None, "+cpu -> no label")


def test_markers_differ_spelling_and_invalid() -> None:
    def m(marker: str | None) -> LockedPackage:
        return entry("1.0", marker)

    assert not _markers_differ(m("os_name=='nt'"), m("os_name == 'nt'"))
    assert _markers_differ(m("os_name == 'nt'"), m("os_name == 'posix'"))
    assert _markers_differ(m(None), m("os_name == 'nt'")) and _markers_differ(m("os_name == 'nt'"), m(None))
    assert _markers_differ(m("not a marker"), m("not  a marker"))
    assert not _markers_differ(m(None), m(None))


def wheels_entry(
    *files: tuple[str, str], version: str = "1.17.0", size: int | None = None, when: str | None = None
) -> LockedPackage:
    return LockedPackage(
        "six",
        version,
        None,
        "https://pypi.org/simple",
        tuple(Artifact(n, f"https://x/{n}", (("sha256", h),), size, when) for n, h in files),
    )


def one(a: LockedPackage, b: LockedPackage) -> str:
    lock_a = Lock("a", "pylock", {}, (), {"six": a}, {})
    lock_b = Lock("b", "pylock", {}, (), {"six": b}, {})
    return "\n".join(render_terminal(diff_locks(lock_a, lock_b), show_all=True).split("\n")[2:])


def test_rebuilt_and_rehashed_details() -> None:
    w1, w2 = "six-1.17.0-py2-none-any.whl", "six-1.17.0-py3-none-any.whl"
    assert one(wheels_entry((w1, "a"), (w2, "b")), wheels_entry((w1, "c"), (w2, "d"))) == (
        "other (1 REHASHED)\n  ! REHASHED  six  1.17.0  same version, new hashes: six-1.17.0-py2-none-any.whl (+1 more)"
    )
    assert one(wheels_entry((w1, "a")), wheels_entry(("six-1.17.0-1-py2-none-any.whl", "c"))) == (
        "other (1 rebuilt)\n  rebuilt  six  1.17.0  1 file rebuilt, build tag none -> 1"
    )
    assert one(
        wheels_entry(("six-1.17.0-8-py2-none-any.whl", "a"), ("six-1.17.0-2-py3-none-any.whl", "b")),
        wheels_entry(("six-1.17.0-9-py2-none-any.whl", "c"), ("six-1.17.0-3-py3-none-any.whl", "d")),
    ) == ("other (1 rebuilt)\n  rebuilt  six  1.17.0  2 files rebuilt, build tag 2 -> 3, 8 -> 9")
    # a rebuild beside a new platform wheel: both said
    assert one(
        wheels_entry(("six-1.17.0-8-py2-none-any.whl", "a")),
        wheels_entry(("six-1.17.0-9-py2-none-any.whl", "c"), ("six-1.17.0-cp312-cp312-win_amd64.whl", "e")),
    ) == ("other (1 rebuilt)\n  rebuilt  six  1.17.0  1 file rebuilt, build tag 8 -> 9; wheels +win amd64, +cp312")


def test_same_files_in_another_order() -> None:
    w1, w2 = ("six-1.17.0-py2-none-any.whl", "a"), ("six-1.17.0-py3-none-any.whl", "b")
    assert one(wheels_entry(w1, w2), wheels_entry(w2, w1)) == ""
    assert one(wheels_entry(w1, w2), wheels_entry(w2, w1, when="2025-01-01")) == (
        "other (1 metadata)\n  metadata  six  1.17.0  upload-time of identical files"
    )
    assert one(wheels_entry(w1, w2), wheels_entry(w1, w2, size=3)) == (
        "other (1 metadata)\n  metadata  six  1.17.0  size of identical files"
    )


def test_coverage_order_and_file_order() -> None:
    sdist = ("six-1.17.0.tar.gz", "s")
    old = wheels_entry(("six-1.17.0-py3-none-any.whl", "a"), version="1.0")
    new = wheels_entry(sdist, ("x.whl", "z"), ("six-1.17.0-cp312-cp312-manylinux_2_28_x86_64.whl", "b"), version="2.0")
    assert one(old, new) == (
        "other (1 upgraded)\n  upgraded  six  1.0 -> 2.0  major; wheels +linux x86_64, +cp312, -any, -py3; sdist added"
    )


@pytest.mark.parametrize("scheme", ["http://", "https://", "file://"])
def test_moves_between_url_indexes_of_every_scheme(scheme: str) -> None:
    a = LockedPackage("six", "1.0", None, f"{scheme}a.example/simple", wheels_entry(("s.whl", "a")).artifacts)
    b = LockedPackage("six", "1.0", None, f"{scheme}b.example/simple", a.artifacts)
    assert one(a, b) == (
        f"other (1 moved)\n  moved  six  1.0  index {scheme}a.example/simple -> {scheme}b.example/simple"
    )
    c = LockedPackage("six", "1.0", None, "directory ../six", a.artifacts)
    assert (
        one(a, c)
        == f"other (1 source)\n  source  six  1.0  source registry {scheme}a.example/simple -> directory ../six"
    )


def test_top_level_array_reordered_or_on_one_side() -> None:
    def lock(lists: dict[str, tuple[str, ...]]) -> Lock:
        return Lock("x", "uv.lock", {}, (), {}, {}, lists)

    d = diff_locks(lock({"conflicts": ("a / b", "c / d")}), lock({"conflicts": ("c / d", "a / b")}))
    assert d.fields == (FieldChange("header", "conflicts", "changed", "order", "order", hidden=True),)
    d = diff_locks(lock({}), lock({"supported-markers": ("sys_platform == 'linux'",)}))
    assert d.fields == (FieldChange("header", "supported-markers", "added", None, "sys_platform == 'linux'"),)
    d = diff_locks(lock({"required-markers": ("os_name == 'nt'",), "z": ("1",)}), lock({"z": ("1",)}))
    assert d.fields == (FieldChange("header", "required-markers", "removed", "os_name == 'nt'", None),)


def test_index_names_from_lock_and_extra() -> None:
    a = Lock(
        "a",
        "pylock",
        {},
        (),
        {},
        {
            "indexes": [
                {"name": "cu130", "url": "https://x/cu130/"},
                {"url": "https://x/nameless"},
                {"name": "no-url"},
                "junk",
            ]
        },
    )
    b = Lock("b", "pylock", {}, (), {}, {})
    assert index_names(a, b, extra={"https://x/cpu/": "cpu"}) == {
        "https://pypi.org/simple": "pypi",
        "https://x/cpu": "cpu",
        "https://x/cu130": "cu130",
    }
    assert index_names(b) == {"https://pypi.org/simple": "pypi"}


def test_two_index_moves_ordered_by_size_then_url() -> None:
    def pkgs(index: str, names: list[str]) -> dict[str, LockedPackage]:
        return {
            n: LockedPackage(
                n, "1.0", None, index, (Artifact(f"{n}-1.0-py3-none-any.whl", None, (("sha256", n),), None, None),)
            )
            for n in names
        }

    old = {
        **pkgs("https://a/one", ["p1", "p2"]),
        **pkgs("https://a/two", ["q1", "q2", "q3"]),
        **pkgs("https://a/zero", ["r1", "r2"]),
    }
    new = {
        **pkgs("https://b/one", ["p1", "p2"]),
        **pkgs("https://b/two", ["q1", "q2", "q3"]),
        **pkgs("https://b/zero", ["r1", "r2"]),
    }
    d = diff_locks(Lock("a", "pylock", {}, (), old, {}), Lock("b", "pylock", {}, (), new, {}))
    assert [(m.old, m.new, m.packages) for m in d.index_moves] == [
        ("https://a/two", "https://b/two", ("q1", "q2", "q3")),
        ("https://a/one", "https://b/one", ("p1", "p2")),
        ("https://a/zero", "https://b/zero", ("r1", "r2")),
    ]
    assert d.packages == ()


def test_unsuffixed_to_suffixed_is_a_replacement() -> None:
    a = Lock("a", "pylock", {}, (), {"nvidia-nvtx": entry("13.0", name="nvidia-nvtx")}, {})
    b = Lock("b", "pylock", {}, (), {"nvidia-nvtx-cu12": entry("12.8", name="nvidia-nvtx-cu12")}, {})
    (change,) = diff_locks(a, b).packages
    assert (change.kind, change.old_name, change.new_name, change.detail) == (
        "replaced",
        "nvidia-nvtx",
        "nvidia-nvtx-cu12",
        "unsuffixed -> -cu12",
    )


def test_rehashed_file_beside_a_lost_wheel_reports_both() -> None:
    w1, w2 = "six-1.17.0-py3-none-any.whl", "six-1.17.0-cp312-cp312-win_amd64.whl"
    assert one(wheels_entry((w1, "a"), (w2, "b")), wheels_entry((w1, "c"))) == (
        "other (1 REHASHED)\n  ! REHASHED  six  1.17.0  same version, new hashes: six-1.17.0-py3-none-any.whl; "
        "wheels -win amd64, -cp312"
    )
