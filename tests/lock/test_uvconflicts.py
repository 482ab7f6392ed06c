"""uv.lock files the real uv writes (conflicting extras and groups, forks per platform and per Python),
read by envforge's reader; and the activations of :mod:`envforge.lock.uvconflicts` on literal graphs.

The projects are locked by the installed uv against local PEP 503 indexes on 127.0.0.1 (wheels built
here): a ``cpu`` and a ``gpu`` extra declared in ``[tool.uv] conflicts`` pulling ``torchy`` from two
indexes (uv's PyTorch guide), a ``helper`` both extras need that depends on ``torchy`` (uv then writes
conflict markers on its edges), two conflicting dependency groups pinning two versions of ``grp``.
uv writes the two ``torchy`` entries with the same ``resolution-markers``: only the conflicts keep
them apart.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.cli import main
from envforge.lock.markerspace import ALWAYS, Alternative
from envforge.lock.read import read_lock_text
from envforge.lock.uvconflicts import activations, conflict_sets, edge_condition, item_name
from envforge.uv.run import uv_binary
from tests.support.localindex import LocalIndex, serve
from tests.support.torchy import build_indexes, sources_toml

CPU, GPU, GA, GB = "extra-4-proj-cpu", "extra-4-proj-gpu", "group-4-proj-ga", "group-4-proj-gb"


def on(*items: str) -> frozenset[Alternative]:
    """The activation "needs every one of ``items`` enabled"."""
    return frozenset({Alternative(frozenset(items))})


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalIndex, LocalIndex, LocalIndex]]:
    root = tmp_path_factory.mktemp("indexes")
    cpu, gpu, pub = build_indexes(root)
    with serve(cpu), serve(gpu), serve(pub):
        yield cpu, gpu, pub


def _conflicting(cpu: LocalIndex, gpu: LocalIndex, torchy: str = ">=2") -> str:
    return f"""[project]
name = "proj"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six==1.16.0; sys_platform == 'linux'", "six==1.17.0; sys_platform != 'linux'"]

[project.optional-dependencies]
cpu = ["torchy{torchy}", "helper"]
gpu = ["torchy{torchy}", "helper"]

[dependency-groups]
ga = ["grp==1.0"]
gb = ["grp==2.0"]

[tool.uv]
package = false
conflicts = [[{{ extra = "cpu" }}, {{ extra = "gpu" }}], [{{ group = "ga" }}, {{ group = "gb" }}]]

""" + sources_toml(cpu, gpu)


FORKS = """[project]
name = "forks"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six==1.16.0; sys_platform == 'linux'", "six==1.17.0; sys_platform != 'linux'",
                "grp==1.0; python_version < '3.12'", "grp==2.0; python_version >= '3.12'"]

[tool.uv]
package = false
"""


def _uv(args: list[str], cwd: Path, pub: LocalIndex) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env.update(UV_CACHE_DIR=str(cwd / ".uv-cache"), UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")
    res = subprocess.run(
        [uv_binary(), *args, "--no-progress", "--default-index", pub.url],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def _lock(tmp_path: Path, name: str, pyproject: str, pub: LocalIndex) -> Path:
    project = tmp_path / name
    project.mkdir()
    (project / "pyproject.toml").write_text(pyproject)
    _uv(["lock"], project, pub)
    return project / "uv.lock"


def _entries(text: str) -> list[tuple[str, str, str]]:
    """(name, version, resolution-markers as written) of every [[package]] uv wrote."""
    doc = read_lock_text(text, label="uv.lock")
    return [(p["name"], p["version"], " | ".join(p.get("resolution-markers", []))) for p in doc.packages]


def test_uv_writes_conflicting_extras_with_overlapping_markers_and_envforge_reads_it(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    cpu, gpu, pub = indexes
    lock = _lock(tmp_path, "proj", _conflicting(cpu, gpu), pub)
    text = lock.read_text()
    assert _entries(text) == [  # what uv 0.13 writes: the two torchy (and grp) entries' markers are the same
        ("grp", "1.0", "sys_platform == 'linux' | sys_platform != 'linux'"),
        ("grp", "2.0", "sys_platform == 'linux' | sys_platform != 'linux'"),
        ("helper", "1.0", ""),
        ("proj", "0.1.0", ""),
        ("six", "1.16.0", "sys_platform == 'linux'"),
        ("six", "1.17.0", "sys_platform != 'linux'"),
        ("torchy", "2.1.0+cpu", "sys_platform == 'linux' | sys_platform != 'linux'"),
        ("torchy", "2.1.0+cu1", "sys_platform == 'linux' | sys_platform != 'linux'"),
    ]
    assert "marker = \"extra == 'extra-4-proj-cpu' or" in text  # helper's edges carry uv's conflict markers
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data)) == (
        on(GA),
        on(GB),
        on(CPU) | on(GPU),
        ALWAYS,
        ALWAYS,
        ALWAYS,
        on(CPU),
        on(GPU),
    )
    # uv itself reads it and picks one torchy per extra
    exported = _uv(["export", "--frozen", "--no-hashes", "--extra", "cpu"], lock.parent, pub)
    assert re.findall(r"^torchy==\S+", exported, re.M) == ["torchy==2.1.0+cpu"]
    assert main(["lock", "textconv", str(lock)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [line.split("  files=")[0] for line in out.splitlines() if line.startswith("torchy")] == [
        f"torchy  2.1.0+cpu  index={cpu.url}  marker=\"sys_platform != 'linux' or sys_platform == 'linux'\"",
        f"torchy  2.1.0+cu1  index={gpu.url}  marker=\"sys_platform != 'linux' or sys_platform == 'linux'\"",
    ]
    assert "conflicts =\n  proj[cpu] / proj[gpu]\n  proj:ga / proj:gb\n" in out


def test_lock_diff_of_two_conflicting_locks_uv_wrote(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    cpu, gpu, pub = indexes
    old = _lock(tmp_path, "old", _conflicting(cpu, gpu, "==2.0.*"), pub)
    new = _lock(tmp_path, "new", _conflicting(cpu, gpu), pub)
    assert main(["lock", "diff", "--exit-code", str(old), str(new)]) == 1
    out, err = capsys.readouterr()
    assert err == ""
    assert [line.split()[:4] for line in out.splitlines() if "torchy  " in line and "upgraded" in line] == [
        ["upgraded", "torchy", "2.0.0+cpu", "->"],
        ["upgraded", "torchy", "2.0.0+cu1", "->"],
    ]
    assert "! ambiguous" not in out


def test_uv_forks_per_platform_and_per_python_are_read(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    _, _, pub = indexes
    text = _lock(tmp_path, "forks", FORKS, pub).read_text()
    assert [e for e in _entries(text) if e[0] in ("grp", "six")] == [  # one fork per platform and Python
        (
            "grp",
            "1.0",
            "python_full_version < '3.12' and sys_platform == 'linux' | "
            "python_full_version < '3.12' and sys_platform != 'linux'",
        ),
        (
            "grp",
            "2.0",
            "python_full_version >= '3.12' and sys_platform == 'linux' | "
            "python_full_version >= '3.12' and sys_platform != 'linux'",
        ),
        (
            "six",
            "1.16.0",
            "python_full_version >= '3.12' and sys_platform == 'linux' | "
            "python_full_version < '3.12' and sys_platform == 'linux'",
        ),
        (
            "six",
            "1.17.0",
            "python_full_version >= '3.12' and sys_platform != 'linux' | "
            "python_full_version < '3.12' and sys_platform != 'linux'",
        ),
    ]


def test_without_its_conflicts_the_lock_uv_wrote_is_read_and_its_ambiguities_named(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    cpu, gpu, pub = indexes
    text = _lock(tmp_path, "proj", _conflicting(cpu, gpu), pub).read_text()
    cut = re.sub(r"^conflicts = \[\[.*?\]\]\n", "", text, count=1, flags=re.M | re.S)
    assert cut != text
    path = tmp_path / "uv.lock"
    path.write_text(cut)
    assert main(["lock", "diff", str(path), str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert sum(line.startswith("! ambiguous in ") for line in out.splitlines()) == 2  # grp and torchy
    doc = read_lock_text(cut, label="uv.lock")
    assert [a.describe() for a in doc.ambiguities] == [
        "package[0] (grp 1.0; marker sys_platform == 'linux' | sys_platform != 'linux') and package[1] (grp 2.0; "
        "marker sys_platform == 'linux' | sys_platform != 'linux') can be active together (e.g. sys_platform = "
        "'linux')",
        "package[6] (torchy 2.1.0+cpu; marker sys_platform == 'linux' | sys_platform != 'linux') and package[7] "
        "(torchy 2.1.0+cu1; marker sys_platform == 'linux' | sys_platform != 'linux') can be active together "
        "(e.g. sys_platform = 'linux')",
    ]


def _pkg(name: str, version: str, body: str = "") -> str:
    return (
        f'[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {{ registry = "https://x/simple" }}\n{body}\n'
    )


ROOT = '[[package]]\nname = "proj"\nversion = "0.1.0"\nsource = { virtual = "." }\n'
CONFLICTS = (
    'version = 1\nrevision = 3\nconflicts = [[{ package = "proj", extra = "cpu" }, '
    '{ package = "proj", extra = "gpu" }]]\n\n'
)


def test_an_entry_needed_without_the_extras_overlaps() -> None:
    # proj needs torchy 2 outside any extra too: enabling [cpu] installs both, whatever the conflicts say
    text = (
        CONFLICTS + ROOT + 'dependencies = [{ name = "torchy", version = "2" }]\n'
        '[package.optional-dependencies]\ncpu = [{ name = "torchy", version = "1" }]\n'
        'gpu = [{ name = "torchy", version = "2" }]\n\n' + _pkg("torchy", "1") + _pkg("torchy", "2")
    )
    assert [a.describe() for a in read_lock_text(text, label="uv.lock").ambiguities] == [
        "package[1] (torchy 1; no marker) and package[2] (torchy 2; no marker) can be active together"
    ]


def test_extras_of_two_conflict_sets_can_be_enabled_together() -> None:
    # cpu/gpu conflict, and a/b conflict: torchy 1 needs cpu, torchy 2 needs a: cpu and a may be enabled together
    text = (
        'version = 1\nconflicts = [[{ package = "proj", extra = "cpu" }, { package = "proj", extra = "gpu" }], '
        '[{ package = "proj", extra = "a" }, { package = "proj", extra = "b" }]]\n\n'
        + ROOT
        + '[package.optional-dependencies]\ncpu = [{ name = "torchy", version = "1" }]\n'
        'a = [{ name = "torchy", version = "2" }]\n\n' + _pkg("torchy", "1") + _pkg("torchy", "2")
    )
    assert [(a.first, a.second) for a in read_lock_text(text, label="uv.lock").ambiguities] == [(1, 2)]


def test_activations_follow_extras_of_dependencies_and_conflict_markers() -> None:
    # proj[cpu] -> mid[fast] -> torchy 1; proj[gpu] -> mid (no extra); mid -> torchy 2 where gpu's marker holds
    text = (
        CONFLICTS + ROOT + '[package.optional-dependencies]\ncpu = [{ name = "mid", extra = ["fast"] }]\n'
        'gpu = [{ name = "mid" }]\n\n'
        + _pkg(
            "mid",
            "1",
            'dependencies = [{ name = "torchy", version = "2", marker = '
            "\"extra == 'extra-4-proj-gpu'\" }]\n[package.optional-dependencies]\n"
            'fast = [{ name = "torchy", version = "1" }]\n',
        )
        + _pkg("torchy", "1")
        + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")  # read: torchy 1 needs cpu, torchy 2 needs gpu
    assert activations(doc.data, conflict_sets(doc.data)) == (ALWAYS, on(CPU) | on(GPU), on(CPU), on(GPU))
    assert doc.ambiguities == ()
    assert conflict_sets(doc.data) == (frozenset({CPU, GPU}),)


def test_item_names_are_uvs_encoding() -> None:
    assert [
        item_name(i)
        for i in (
            {"package": "proj", "extra": "cpu"},
            {"package": "my-proj", "group": "dev"},
            {"package": "a"},
            {"extra": "cpu"},
        )
    ] == ["extra-4-proj-cpu", "group-7-my-proj-dev", "project-1-a", None]


def test_the_shared_cases_of_the_issue_are_read() -> None:
    base = Path(__file__).parents[1] / "data" / "uvlock-conflicts"
    for name in ("uv-old.lock", "uv-new.lock", "conflict-forks.lock"):
        doc = read_lock_text((base / name).read_text(), label=name)
        assert doc.kind == "uv.lock"


U02 = Path(__file__).parents[1] / "data" / "lockdiff" / "u02"


def test_u02_negative_conflict_markers_keep_the_base_entry_apart(capsys: pytest.CaptureFixture[str]) -> None:
    """Field case U02 (uv's PyTorch layout with a base torch): the base entry is installed only while
    neither conflicting extra is enabled (``extra != ...`` on lib's edge), which uv export confirms."""
    text = (U02 / "uv.lock").read_text()
    doc = read_lock_text(text, label="uv.lock")
    assert doc.ambiguities == ()
    cpu, gpu = "extra-4-demo-cpu", "extra-4-demo-gpu"
    assert activations(doc.data, conflict_sets(doc.data)) == (
        ALWAYS,
        ALWAYS,
        frozenset({Alternative(frozenset(), frozenset({cpu, gpu}))}),
        on(cpu),
        on(gpu),
    )
    assert main(["lock", "textconv", str(U02 / "uv.lock")]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "torch  2.8.0  source=base" in out
    for flags, torch in (
        ([], "torch==2.8.0"),
        (["--extra", "cpu"], "torch==2.8.0+cpu"),
        (["--extra", "gpu"], "torch==2.8.0+gpu"),
    ):  # the oracle: what uv installs
        env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
        res = subprocess.run(
            [uv_binary(), "export", "--frozen", "--no-hashes", "--no-header", "--no-annotate", "--no-progress", *flags],
            cwd=U02,
            env={**env, "UV_NO_CONFIG": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert re.findall(r"^torch==\S+", res.stdout, re.M) == [torch]


def test_edge_conditions_positive_negative_and_merged() -> None:
    a, b, c = "extra-1-p-a", "extra-1-p-b", "extra-1-p-c"
    declared = frozenset({a, b, c})
    one_set = [frozenset({a, b})]
    alt = Alternative
    assert edge_condition(None, declared, one_set) == ALWAYS
    assert edge_condition("sys_platform == 'linux'", declared, one_set) == ALWAYS
    assert edge_condition(f"extra == '{a}'", declared, one_set) == frozenset({alt(frozenset({a}))})
    assert edge_condition(f"extra != '{a}'", declared, one_set) == frozenset({alt(frozenset(), frozenset({a}))})
    # uv's negative layout: both off (both on is not a valid selection)
    assert edge_condition(
        f"(extra != '{a}' and extra != '{b}') or (extra == '{a}' and extra == '{b}')", declared, one_set
    ) == frozenset({alt(frozenset(), frozenset({a, b}))})
    # without the conflict both-on is a selection too
    assert edge_condition(
        f"(extra != '{a}' and extra != '{b}') or (extra == '{a}' and extra == '{b}')", declared, []
    ) == frozenset({alt(frozenset(), frozenset({a, b})), alt(frozenset({a, b}))})
    # a or b, in one set: each alone (the other cannot be on with it)
    assert edge_condition(f"extra == '{a}' or extra == '{b}'", declared, one_set) == frozenset(
        {alt(frozenset({a}), frozenset({b})), alt(frozenset({b}), frozenset({a}))}
    )
    # a or b, free: merged into a on | b on
    assert edge_condition(f"extra == '{a}' or extra == '{b}'", declared, []) == frozenset(
        {alt(frozenset({a})), alt(frozenset({b}))}
    )
    assert edge_condition(
        f"extra == '{a}' and extra == '{c}' and sys_platform == 'win32'", declared, one_set
    ) == frozenset({alt(frozenset({a, c}))})
    assert edge_condition(f"extra == '{a}' and extra != '{a}'", declared, one_set) == frozenset()
    nine = " and ".join(f"extra == 'extra-1-p-x{k}'" for k in range(9))  # more than 8 items: not decided
    assert edge_condition(nine, frozenset(f"extra-1-p-x{k}" for k in range(9)), []) == ALWAYS


def test_a_graph_that_needs_several_passes_and_a_pruned_path() -> None:
    """proj[cpu] -> a -> b -> c -> torchy 1 (edges listed from the leaf up: one pass is not enough);
    proj[gpu] -> c too, and c -> torchy 2 only under gpu; a path needing cpu and gpu at once is pruned."""
    text = (
        CONFLICTS
        + ROOT
        + '[package.optional-dependencies]\ncpu = [{ name = "a" }]\ngpu = [{ name = "c" }]\n\n'
        + _pkg(
            "c",
            "1",
            'dependencies = [{ name = "torchy", version = "1", marker = "extra == \'extra-4-proj-cpu\'" },'
            ' { name = "torchy", version = "2", marker = "extra == \'extra-4-proj-gpu\'" }]\n',
        )
        + _pkg("b", "1", 'dependencies = [{ name = "c" }]\n')
        + _pkg(
            "a",
            "1",
            'dependencies = [{ name = "b" }, { name = "torchy", version = "2", '
            "marker = \"extra == 'extra-4-proj-gpu'\" }]\n",
        )
        + _pkg("torchy", "1")
        + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")
    act = activations(doc.data, conflict_sets(doc.data))
    assert act == (ALWAYS, on(CPU) | on(GPU), on(CPU), on(CPU), on(CPU), on(GPU))
    assert doc.ambiguities == ()


def test_project_level_items_and_a_member_another_package_depends_on() -> None:
    """Conflicts between two workspace members (``{ package = "a" }`` / ``{ package = "b" }``): each
    member is active with its own project item; ``b`` is also depended on by ``tool`` (a member),
    which then needs b's item too."""
    text = (
        'version = 1\nconflicts = [[{ package = "a" }, { package = "b" }]]\n\n[manifest]\nmembers = ["a", "b"]\n\n'
        '[[package]]\nname = "a"\nversion = "0.1.0"\nsource = { editable = "a" }\n'
        'dependencies = [{ name = "torchy", version = "1" }]\n\n'
        '[[package]]\nname = "b"\nversion = "0.1.0"\nsource = { editable = "b" }\n'
        'dependencies = [{ name = "torchy", version = "2" }]\n\n' + _pkg("torchy", "1") + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data)) == (
        on("project-1-a"),
        on("project-1-b"),
        on("project-1-a"),
        on("project-1-b"),
    )
    assert doc.ambiguities == ()


def test_an_edge_naming_more_items_than_are_decided_counts_as_always() -> None:
    items = [f"extra-4-proj-x{k}" for k in range(9)]
    conflicts = "[[" + ", ".join(f'{{ package = "proj", extra = "x{k}" }}' for k in range(9)) + "]]"
    marker = " or ".join(f"extra == '{i}'" for i in items)
    text = (
        f"version = 1\nconflicts = {conflicts}\n\n" + ROOT + f'dependencies = [{{ name = "torchy", version = "1", '
        f'marker = "{marker}" }}, {{ name = "torchy", version = "2" }}]\n\n' + _pkg("torchy", "1") + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data))[1] == ALWAYS  # 9 items: wider, never narrower
    assert [(a.first, a.second) for a in doc.ambiguities] == [(1, 2)]


def test_a_conflict_set_of_one_item_is_no_conflict() -> None:
    doc = {
        "conflicts": [
            [{"package": "proj", "extra": "cpu"}],
            [{"package": "proj", "extra": "a"}, {"package": "proj", "group": "b"}],
        ]
    }
    assert conflict_sets(doc) == (frozenset({"extra-4-proj-a", "group-4-proj-b"}),)


def test_a_workspace_member_another_member_depends_on_is_a_root() -> None:
    """``lib`` is a member of the workspace and ``proj[cpu]`` depends on it: installing the workspace
    installs ``lib`` whatever extra is chosen, so its torchy 2 is always needed, and overlaps
    ``proj[cpu]``'s torchy 1 unless a marker keeps them apart."""
    text = (
        CONFLICTS
        + '[manifest]\nmembers = ["lib", "proj"]\n\n'
        + ROOT
        + '[package.optional-dependencies]\ncpu = [{ name = "lib" }, { name = "torchy", version = "1" }]\n'
        'gpu = [{ name = "torchy", version = "2" }]\n\n'
        '[[package]]\nname = "lib"\nversion = "0.1.0"\nsource = { editable = "lib" }\n'
        'dependencies = [{ name = "torchy", version = "2" }]\n\n' + _pkg("torchy", "1") + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data)) == (ALWAYS, ALWAYS, on(CPU), ALWAYS)
    assert [(a.first, a.second) for a in doc.ambiguities] == [(2, 3)]


def test_an_edge_picks_its_entry_by_source_as_well_as_version() -> None:
    """Two entries of one version from two indexes (uv writes ``source`` on the edge): each extra's
    edge reaches only its own."""
    text = (
        CONFLICTS + ROOT + "[package.optional-dependencies]\n"
        'cpu = [{ name = "torchy", version = "2", source = { registry = "https://cpu/simple" } }]\n'
        'gpu = [{ name = "torchy", version = "2", source = { registry = "https://gpu/simple" } }]\n\n'
        '[[package]]\nname = "torchy"\nversion = "2"\nsource = { registry = "https://cpu/simple" }\n\n'
        '[[package]]\nname = "torchy"\nversion = "2"\nsource = { registry = "https://gpu/simple" }\n'
    )
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data)) == (ALWAYS, on(CPU), on(GPU))
    assert doc.ambiguities == ()


def test_past_the_alternatives_cap_an_entry_counts_as_always_needed() -> None:
    """70 extras, none in conflict with another, each with a chain that needs one declared item of
    its own set: more than 64 minimal alternatives reach ``torchy 1``, which then counts as always
    needed (wider, never narrower) and overlaps ``torchy 2``."""
    from envforge.lock.uvconflicts import MAX_ALTERNATIVES

    n = MAX_ALTERNATIVES + 6
    sets = ", ".join(
        f'[{{ package = "proj", extra = "e{k}" }}, {{ package = "proj", extra = "f{k}" }}]' for k in range(n)
    )
    extras = "".join(f'e{k} = [{{ name = "torchy", version = "1" }}]\n' for k in range(n))
    text = (
        f"version = 1\nconflicts = [{sets}]\n\n" + ROOT + 'dependencies = [{ name = "torchy", version = "2", '
        "marker = \"extra == 'extra-4-proj-f0'\" }]\n[package.optional-dependencies]\n"
        + extras
        + "\n"
        + _pkg("torchy", "1")
        + _pkg("torchy", "2")
    )
    doc = read_lock_text(text, label="uv.lock")
    act = activations(doc.data, conflict_sets(doc.data))
    assert act[1] == ALWAYS and act[2] == on("extra-4-proj-f0")
    fewer = text.replace(extras, "".join(f'e{k} = [{{ name = "torchy", version = "1" }}]\n' for k in range(3)))
    assert activations(
        read_lock_text(fewer, label="uv.lock").data, conflict_sets(read_lock_text(fewer, label="uv.lock").data)
    )[1] == (on("extra-4-proj-e0") | on("extra-4-proj-e1") | on("extra-4-proj-e2"))


def test_at_the_alternatives_cap_every_alternative_is_kept() -> None:
    from envforge.lock.uvconflicts import MAX_ALTERNATIVES, _minimal

    alternatives = [Alternative(frozenset({f"extra-4-proj-e{k}"})) for k in range(MAX_ALTERNATIVES)]
    assert _minimal(alternatives) == frozenset(alternatives)  # 64 incomparable ones: decided
    assert _minimal([*alternatives, Alternative(frozenset({"extra-4-proj-x"}))]) == ALWAYS  # 65: always
    assert _minimal([Alternative(frozenset({CPU})), Alternative(frozenset({CPU, GPU}))]) == on(CPU)


def test_an_edge_naming_exactly_the_decided_number_of_items_is_decided() -> None:
    items = [f"extra-4-proj-x{k}" for k in range(8)]
    conflicts = [frozenset(items)]
    marker = " or ".join(f"extra == '{i}'" for i in items)
    assert edge_condition(marker, frozenset(items), conflicts) == frozenset(
        Alternative(frozenset({i}), frozenset(items) - {i}) for i in items
    )


def test_an_edge_condition_names_every_encoded_item_and_no_plain_extra() -> None:
    declared = frozenset({CPU, GPU})
    # an encoded item of another project, not declared: enumerated too (the marker needs it on)
    assert edge_condition(f"extra == '{CPU}' and extra == 'extra-3-foo-x'", declared, [declared]) == frozenset(
        {Alternative(frozenset({CPU, "extra-3-foo-x"}))}
    )
    # a plain extra name is no conflict item: the marker needs it, and no selection of items enables it
    assert edge_condition(f"extra == '{CPU}' and extra == 'plain'", declared, [declared]) == frozenset()


def test_merging_keeps_the_other_conditions_and_the_terms_nothing_covers() -> None:
    from envforge.lock.uvconflicts import _merged

    a, b, c = "extra-1-p-a", "extra-1-p-b", "extra-1-p-c"
    x = Alternative(frozenset({a}), frozenset({b}))
    y = Alternative(frozenset(), frozenset({a, b}))
    assert _merged({x, y}) == frozenset({Alternative(frozenset(), frozenset({b}))})
    t1 = Alternative(frozenset({a}), frozenset({b, c}))
    t2 = Alternative(frozenset(), frozenset({a, b, c}))
    t3 = Alternative(frozenset({a, b, c}))
    assert _merged({t1, t2, t3}) == frozenset({t3, Alternative(frozenset(), frozenset({b, c}))})


def test_a_group_edge_that_needs_an_extra_in_conflict_with_the_group_is_never_taken() -> None:
    """uv's conflicts between the ``dev`` group and the ``cpu`` extra: a dev dependency whose marker
    needs ``cpu`` can never be installed; ``torchy 1`` is reached only through ``cpu``."""
    text = (
        'version = 1\nconflicts = [[{ package = "proj", group = "dev" }, { package = "proj", extra = "cpu" }]]\n\n'
        + ROOT
        + '[package.optional-dependencies]\ncpu = [{ name = "torchy", version = "1" }]\n'
        '[package.dev-dependencies]\ndev = [{ name = "torchy", version = "1", marker = "extra == \'extra-4-proj-cpu\'" }, '
        '{ name = "ghost" }]\n\n' + _pkg("torchy", "1")
    )
    doc = read_lock_text(text, label="uv.lock")
    assert activations(doc.data, conflict_sets(doc.data)) == (ALWAYS, on(CPU))
