"""The lock reader against its oracle, the tool that wrote the lock: every uv.lock the real uv writes for
a grid of small real projects (:mod:`tests.support.lockgrid`: conflicting extras and groups, a base
package plus per-extra variants from local PEP 503 indexes, negative conflict markers, chains needed
under one extra only, forks per platform and per Python, overrides, sources per extra) is read, with
no ambiguity reported; which entries envforge's conflict analysis counts as needed under each choice
of extras and groups is exactly what ``uv export --frozen`` installs for that choice; and ``lock diff``
between two locks of neighbouring projects names every entry that changed, each once.

The grid has 384 projects. CI locks a fixed sample (every 7th, 55 projects); ``ENVFORGE_ORACLE=full`` locks all of
them (docs/testing.md; about two minutes here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment

from envforge.cli import main
from envforge.lock.markerspace import Alternative, compatible
from envforge.lock.read import read_lock_text
from envforge.lock.uvconflicts import activations, conflict_sets
from envforge.uv.run import uv_binary
from tests.support.localindex import LocalIndex, serve
from tests.support.lockgrid import AXES, Project, build_indexes, grid

pytestmark = pytest.mark.slow

FULL = os.environ.get("ENVFORGE_ORACLE") == "full"
STEP = 1 if FULL else 7  # coprime with every axis product: the sample covers every value
PROJECTS = grid()[::STEP]


def _env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env.update(UV_CACHE_DIR=str(cwd.parent / ".uv-cache"), UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")
    return env


def _uv(args: list[str], cwd: Path, pub: LocalIndex) -> str:
    res = subprocess.run(
        [uv_binary(), *args, "--no-progress", "--default-index", pub.url],
        cwd=cwd,
        env=_env(cwd),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[Project, Path], LocalIndex]]:
    """Each sampled project locked by the real uv: ``({project: its uv.lock}, the default index)``."""
    root = tmp_path_factory.mktemp("oracle")
    indexes = build_indexes(root / "indexes")
    with ExitStack() as stack:
        for index in indexes.values():
            stack.enter_context(serve(index))
        out = {}
        for project in PROJECTS:
            where = root / project.name
            where.mkdir()
            (where / "pyproject.toml").write_text(project.pyproject(indexes))
            _uv(["lock"], where, indexes["pub"])
            out[project] = where / "uv.lock"
        yield out, indexes["pub"]


def test_the_grid_is_large_enough_and_its_sample_covers_every_value() -> None:
    assert len(grid()) == 384
    for axis, values in AXES.items():
        assert {p.get(axis) for p in PROJECTS} == set(values), axis


def test_every_lock_uv_wrote_is_read_without_an_ambiguity(locked: tuple[dict[Project, Path], LocalIndex]) -> None:
    paths, _ = locked
    negative = 0
    for project, path in paths.items():
        text = path.read_text()
        doc = read_lock_text(text, label=project.name)
        assert (doc.kind, doc.ambiguities) == ("uv.lock", ()), project.name
        negative += "extra != 'extra-4-proj-" in text or "extra != 'group-4-proj-" in text
    assert negative >= len(paths) // 4  # uv wrote negative conflict markers into a good share of them


def _items(selection: tuple[str, ...]) -> frozenset[str]:
    return frozenset(f"group-4-proj-{s[1:]}" if s.startswith(":") else f"extra-4-proj-{s}" for s in selection)


def _exported(text: str) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for m in re.finditer(r"^([a-z0-9._-]+)==(\S+)", text, re.M)}


def test_what_envforge_counts_as_needed_is_what_uv_installs_for_each_choice(
    locked: tuple[dict[Project, Path], LocalIndex],
) -> None:
    """For every valid choice of extras and groups, the entries uv exports are exactly those whose
    activation allows that choice (every choice's items on, the other declared items off)."""
    paths, pub = locked
    for project, path in paths.items():
        doc = read_lock_text(path.read_text(), label=project.name)
        conflicts = conflict_sets(doc.data)
        declared = frozenset().union(*conflicts)
        act = activations(doc.data, conflicts)
        entries = [(p["name"], p["version"]) for p in doc.packages]
        for selection in project.selections():
            flags = [f for s in selection for f in (("--group", s[1:]) if s.startswith(":") else ("--extra", s))]
            uv_installs = _exported(
                _uv(
                    [
                        "export",
                        "--frozen",
                        "--no-hashes",
                        "--no-header",
                        "--no-annotate",
                        "--format",
                        "requirements.txt",
                        *flags,
                    ],
                    path.parent,
                    pub,
                )
            )
            on = _items(selection)
            chosen = frozenset({Alternative(on, declared - on)})
            ours = {e for e, a in zip(entries, act, strict=True) if e[0] != "proj" and compatible(a, chosen, conflicts)}
            assert ours == uv_installs, (project.name, selection)


def _neighbours() -> list[tuple[Project, Project]]:
    """Pairs of sampled projects that differ in exactly one axis, or else consecutive ones."""
    pairs = []
    for a, b in zip(PROJECTS, PROJECTS[1:], strict=False):
        pairs.append((a, b))
    return pairs


_TABLES = ("dependencies", "optional-dependencies", "dev-dependencies")


def _edge(dep: dict[str, object]) -> dict[str, object]:
    """A dependency edge as the oracle compares it: the entry it picks is named by its source (in
    the grid, same-name entries come from different indexes), not by its version: an edge follows
    its entry's upgrade (docs/lock-diff.md, "A change is said where it happens")."""
    return {k: v for k, v in dep.items() if k != "version"}


#: The environments the grid's markers tell apart (its forks: Python 3.10 to 3.13, three platforms).
_ENVIRONMENTS = [
    {
        **default_environment(),
        "python_full_version": f"3.{minor}.0",
        "python_version": f"3.{minor}",
        "sys_platform": platform,
    }
    for minor in (10, 11, 12, 13)
    for platform in ("linux", "win32", "darwin")
]


def _where(markers: list[str] | None) -> tuple[bool, ...]:
    """Where an entry's ``resolution-markers`` hold, as a truth table over :data:`_ENVIRONMENTS`
    (uv joins every fork an entry is in: markers true everywhere are no marker)."""
    if not markers:
        return tuple(True for _ in _ENVIRONMENTS)
    return tuple(any(Marker(m).evaluate(env) for m in markers) for env in _ENVIRONMENTS)


def _by_name(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for package in read_lock_text(path.read_text(), label=str(path)).packages:
        table = dict(package)
        table["resolution-markers"] = _where(table.get("resolution-markers"))
        for key in _TABLES:
            if key == "dependencies" and key in table:
                table[key] = sorted((_edge(d) for d in table[key]), key=repr)
            elif key in table:
                table[key] = {k: sorted((_edge(d) for d in v), key=repr) for k, v in table[key].items()}
        out.setdefault(package["name"], []).append(json.dumps(table, sort_keys=True, default=str))
    return {k: sorted(v) for k, v in out.items()}


def test_lock_diff_names_every_entry_change_once(
    locked: tuple[dict[Project, Path], LocalIndex], capsys: pytest.CaptureFixture[str]
) -> None:
    """Oracle: the names whose entries differ (the raw tables uv wrote, compared whole). ``lock diff
    --all --json`` must name exactly those (a change line, an index move or a shared fact), and no
    entry of a name in two change lines."""
    paths, _ = locked
    for a, b in _neighbours():
        old, new = _by_name(paths[a]), _by_name(paths[b])
        changed = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
        assert main(["lock", "diff", "--all", "--json", str(paths[a]), str(paths[b])]) == 0
        diff = json.loads(capsys.readouterr().out)["data"]["diffs"][0]
        named: dict[str, list[tuple[str | None, str | None]]] = {}
        for change in diff["changes"]:
            name = change["new_name"] or change["old_name"]
            named.setdefault(name, []).append((change["old_version"], change["new_version"]))
        moved = {n for move in diff["index_moves"] for n in move["packages"]}
        shared = {n for fact in diff["shared"] for n in fact["packages"]}
        assert set(named) | moved | shared == changed, (a.name, b.name)
        for name, pairs in named.items():
            olds = [o for o, _ in pairs if o is not None]
            news = [n for _, n in pairs if n is not None]
            assert len(olds) == len(set(olds)) and len(news) == len(set(news)), (a.name, b.name, name, pairs)


PUBLIC = Path(__file__).parents[1] / "data" / "lockdiff" / "public" / "transformer-lens-4.3.0"


def test_a_public_uv_lock_with_conflicts_is_read_and_never_narrower_than_uv() -> None:
    """transformer_lens 4.3.0's uv.lock (its sdist, MIT): ``lit`` and ``vllm`` declared in conflict,
    numpy 1.26.4 under ``lit`` and 2.2.6 / 2.3.5 (forked by Python) elsewhere, kept apart by negative
    conflict markers. Refused
    before (the pair "can be active together"); read now with no ambiguity, and every entry uv installs
    for a choice is one envforge counts as needed for it (extras outside the conflict count as always:
    wider, never narrower)."""
    doc = read_lock_text((PUBLIC / "uv.lock").read_text(), label="uv.lock")
    assert (len(doc.packages), doc.ambiguities) == (432, ())
    conflicts = conflict_sets(doc.data)
    assert conflicts == (frozenset({"extra-16-transformer-lens-lit", "extra-16-transformer-lens-vllm"}),)
    declared = frozenset().union(*conflicts)
    act = activations(doc.data, conflicts)
    entries = [(p["name"], p.get("version")) for p in doc.packages]
    numpy = {e: a for e, a in zip(entries, act, strict=True) if e[0] == "numpy"}
    lit, vllm = sorted(declared)
    assert numpy == {
        ("numpy", "1.26.4"): frozenset({Alternative(frozenset({lit}))}),
        ("numpy", "2.2.6"): frozenset({Alternative(frozenset(), frozenset({lit}))}),
        ("numpy", "2.3.5"): frozenset({Alternative(frozenset(), frozenset({lit}))}),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    for extra in (None, "lit", "vllm"):
        flags = ["--extra", extra] if extra else []
        res = subprocess.run(
            [
                uv_binary(),
                "export",
                "--frozen",
                "--no-hashes",
                "--no-header",
                "--no-annotate",
                "--all-groups",
                "--no-progress",
                *flags,
            ],
            cwd=PUBLIC,
            env={**env, "UV_NO_CONFIG": "1"},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        on = frozenset({f"extra-16-transformer-lens-{extra}"} if extra else ())
        chosen = frozenset({Alternative(on, declared - on)})
        ours = {e for e, a in zip(entries, act, strict=True) if compatible(a, chosen, conflicts)}
        assert _exported(res.stdout) <= ours, extra
