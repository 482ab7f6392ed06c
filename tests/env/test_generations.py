"""env.generations: naming, listing, the build lock, rollback and the reuse check, on fake trees.

A fake generation is ``envs/.generations/<env>/gNNNN/lib/python3.12/site-packages`` with (complete)
or without (a killed build's leftover) ``.envforge/generation.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envforge.core.errors import InputError
from envforge.env.generations import (
    current_generation,
    describe_generation,
    discard_generation,
    exclusive_generations,
    generation_record,
    generation_root,
    generations,
    next_generation,
    remove_incomplete,
    rollback,
)
from envforge.recipe.project import Project

ENV = "demo-cpu"


def _gen(project: Project, name: str, record: dict[str, Any] | None = None) -> Path:
    gen = project.root / "envs" / ".generations" / ENV / name
    sp = gen / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    if record is not None:
        (sp / ".envforge").mkdir()
        (sp / ".envforge" / "generation.json").write_text(json.dumps(record))
    return gen


def _link(project: Project, gen: Path) -> Path:
    link = project.root / "envs" / ENV
    link.symlink_to(os.path.relpath(gen, link.parent))
    return link


def test_the_root_and_the_next_generation(tmp_path: Path) -> None:
    project = Project(tmp_path)
    root = generation_root(project, ENV)
    assert root == tmp_path / "envs" / ".generations" / "demo-cpu"
    assert next_generation(root) == root / "g0001"  # no directory yet
    _gen(project, "g0001", {})
    _gen(project, "g0003")  # incomplete: its number is taken all the same
    (root / "g0007.log").write_text("")
    (root / ".lock").write_text("")
    assert next_generation(root) == root / "g0004"


def test_only_complete_generations_are_listed_in_number_order(tmp_path: Path) -> None:
    project = Project(tmp_path)
    g10 = _gen(project, "g0010", {"recipe": "demo"})
    g2 = _gen(project, "g0002", {"recipe": "demo"})
    g3 = _gen(project, "g0003")
    (generation_root(project, ENV) / "notes").mkdir()
    assert generations(project, ENV) == [g2, g10]
    assert generations(project, "other") == []
    assert generation_record(g2) == g2 / "lib/python3.12/site-packages/.envforge/generation.json"
    assert generation_record(g3) is None
    assert describe_generation(g10) == {"recipe": "demo"}
    assert describe_generation(g3) == {}


def test_remove_incomplete_keeps_the_complete_ones_and_the_one_being_built(tmp_path: Path) -> None:
    project = Project(tmp_path)
    _gen(project, "g0001", {})
    _gen(project, "g0002")
    _gen(project, "g0003")
    root = generation_root(project, ENV)
    remove_incomplete(root, keep=root / "g0003")
    assert sorted(p.name for p in root.iterdir()) == [".trash", "g0001", "g0003"]
    assert list((root / ".trash").iterdir()) == []


def test_a_second_holder_of_the_build_lock_is_refused(tmp_path: Path) -> None:
    root = generation_root(Project(tmp_path), ENV)
    with exclusive_generations(root):
        with pytest.raises(InputError) as exc:
            with exclusive_generations(root):
                pass
    assert exc.value.message == f"another envforge build of demo-cpu is running (lock {root / '.lock'})"
    with exclusive_generations(root):  # released
        pass


def test_rollback_goes_to_the_previous_complete_generation_or_the_named_one(tmp_path: Path) -> None:
    project = Project(tmp_path)
    g1, _, g3 = _gen(project, "g0001", {}), _gen(project, "g0002"), _gen(project, "g0003", {})
    link = _link(project, g3)
    res = rollback(project, ENV)
    assert (res.previous.name, res.current.name, os.readlink(link)) == ("g0003", "g0001", ".generations/demo-cpu/g0001")
    assert rollback(project, ENV, to="3").current == g3
    assert rollback(project, ENV, to="g1").current == g1
    with pytest.raises(InputError) as exc:
        rollback(project, ENV)
    assert exc.value.message == "demo-cpu has no generation before g0001 to roll back to"
    with pytest.raises(InputError) as exc:
        rollback(project, ENV, to="g0002")
    assert exc.value.message == "demo-cpu has no complete generation 'g0002' (generations: g0001, g0003)"
    with pytest.raises(InputError) as exc:
        rollback(project, "nope")
    assert exc.value.message == f"{tmp_path / 'envs' / 'nope'} is not an envforge environment link"


def test_the_live_generation_is_reused_only_when_built_from_the_same_lock_bytes(tmp_path: Path) -> None:
    project = Project(tmp_path)
    lock = tmp_path / "pylock.demo-cpu.toml"
    lock.write_bytes(b'lock-version = "1.0"\n')
    digest = "sha256:" + hashlib.sha256(lock.read_bytes()).hexdigest()
    variant: Any = SimpleNamespace(recipe="demo", variant="cpu")
    link = tmp_path / "envs" / ENV
    assert current_generation(link, lock, variant) is None  # no link yet
    g1 = _gen(project, "g0001", {"lock-digest": digest})
    _link(project, g1)
    assert current_generation(link, lock, variant) == g1.resolve()
    lock.write_bytes(b'lock-version = "1.0"\n# edited\n')
    assert current_generation(link, lock, variant) is None
    record = generation_record(g1) or Path()
    record.unlink()
    record.mkdir()  # damaged: not a regular file
    with pytest.raises(InputError) as exc:
        current_generation(link, lock, variant)
    assert (
        exc.value.hint
        == "build a new generation: `envforge up demo --variant cpu --rebuild` (g0001 stays for rollback)"
    )


_KILLED_MID_REMOVAL = """
import os, shutil, sys, time
from pathlib import Path
real = shutil.rmtree
def slow(path, *a, **k):  # removes part of the tree, then waits to be killed
    for sub in sorted(Path(path).glob("f*"))[:10]:
        sub.unlink()
    Path(sys.argv[2]).write_text("removing")
    time.sleep(300)
shutil.rmtree = slow
from envforge.env.generations import discard_generation
discard_generation(Path(sys.argv[1]))
"""


def test_a_removal_killed_part_way_leaves_nothing_that_lists_as_complete(tmp_path: Path) -> None:
    """Issue 41: a second Ctrl-C while a generation was removed left it half-deleted with its record,
    so `envs` listed it complete and `rollback --to` made it live. A real process is SIGKILLed inside
    the removal: the generation is already out of every listing; gc's trash holds the rest."""
    project = Project(tmp_path)
    gen = _gen(project, "g0001", {"recipe": "demo"})
    for i in range(20):
        (gen / f"f{i}").write_text("x")
    marker = tmp_path / "removing"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_MID_REMOVAL, str(gen), str(marker)], env=env, start_new_session=True
    )
    try:
        while not marker.exists():
            assert proc.poll() is None, "the removal ended before it was killed"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    root = generation_root(project, ENV)
    assert generations(project, ENV) == [] and not gen.exists()
    (left,) = (root / ".trash").iterdir()
    assert left.name.startswith("g0001.") and generation_record(left) is not None  # its record went with it
    assert next_generation(root) == root / "g0001"


def test_discarding_what_is_not_there_is_nothing(tmp_path: Path) -> None:
    discard_generation(tmp_path / "g0001")
    assert list(tmp_path.iterdir()) == [tmp_path / ".trash"]
