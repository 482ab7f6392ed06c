"""Faults for real (issue 18.2): an ``apply-patches`` process SIGKILLed between the first
``os.replace`` and the manifest write, two ``apply-patches`` processes at once, and a patch-manifest
digest that must not depend on the order patchsets were applied.

The kill window is reached from outside the production code: the process under test is
``python -c`` :data:`HOLD_AFTER_FIRST_REPLACE`, which wraps the journaled write's ``atomic_write``
(:mod:`envforge.patching.journal`) so that, once the first file of site-packages is replaced, the
process writes a marker and sleeps, then runs the real CLI; the test kills it with SIGKILL, as a
crash or an OOM kill would.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.patching_trees import PATCHSETS, slim_tree

from envforge.core.errors import CheckFailed, InputError
from envforge.core.mutex import environment_lock_path
from envforge.patching import apply, load_patchsets, plan, read_manifest
from envforge.patching.manifest import intent_path, manifest_path
from envforge.patching.planning import refuse_interrupted
from envforge.verify import static

SIZES = "sglang/srt/distributed/device_communicators/all_reduce_utils.py"
MULTIMEM = "sglang/srt/distributed/device_communicators/torch_symm_mem.py"
SYMM = "sm120-torch-symm-mem"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with one generation (sglang 0.5.9, flashinfer-python 0.6.4) under envs/."""
    root = tmp_path / "proj"
    (root / "recipes").mkdir(parents=True)
    shutil.copytree(PATCHSETS, root / "patchsets")
    gen = root / "envs" / ".generations" / "quickstart-default" / "g0001"
    slim_tree(gen / "lib" / "python3.12" / "site-packages", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    (root / "envs" / "quickstart-default").symlink_to(gen)
    return root


def sp_of(project: Path) -> Path:
    return project / "envs" / ".generations" / "quickstart-default" / "g0001" / "lib" / "python3.12" / "site-packages"


#: ``python -c`` program: ``HOLD_AFTER_FIRST_REPLACE MARKER ARGS...`` runs ``envforge ARGS...`` with
#: the journal's ``atomic_write`` wrapped: after the first file outside ``.envforge/`` (a file of
#: site-packages, not a saved original or the intent record) is replaced, the pid goes to MARKER and
#: the process sleeps (60 s at most), inside the window between the first ``os.replace`` and the
#: manifest write. A moved seam fails loudly: the process exits (AttributeError, or no hold) before
#: the marker exists, and :func:`wait_for` fails with its output.
HOLD_AFTER_FIRST_REPLACE = """
import os, sys, time
from pathlib import Path
from envforge.patching import journal
from envforge.cli import run

marker = Path(sys.argv[1])
real = journal.atomic_write
replaced = []

def holding(path, data, **kwargs):
    real(path, data, **kwargs)
    if ".envforge" not in Path(path).parts:
        replaced.append(path)
        if len(replaced) == 1:
            marker.write_text(str(os.getpid()))
            time.sleep(60)

journal.atomic_write = holding
sys.argv = ["envforge", *sys.argv[2:]]
run()
"""


def envforge(project: Path, *args: str, hold: Path | None = None) -> subprocess.Popen[str]:
    """``envforge ARGS --project PROJECT`` in a fresh process; with ``hold``, held in the kill window
    (:data:`HOLD_AFTER_FIRST_REPLACE`, marker ``hold``)."""
    program = ["-m", "envforge"] if hold is None else ["-c", HOLD_AFTER_FIRST_REPLACE, str(hold)]
    return subprocess.Popen(
        [sys.executable, *program, *args, "--project", str(project)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the process never reached the kill window"
        time.sleep(0.02)


def killed_in_the_window(project: Path, tmp_path: Path, *args: str) -> None:
    """Run ``envforge *args`` and SIGKILL it between its first os.replace and its manifest write."""
    marker = tmp_path / "in-window"
    proc = envforge(project, *args, hold=marker)
    wait_for(marker, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    marker.unlink()


def test_kill_after_the_first_replace_then_reapply_rolls_back_and_applies(project: Path, tmp_path: Path) -> None:
    sp = sp_of(project)
    pristine = {p: sha(sp / p) for p in (SIZES, MULTIMEM)}
    killed_in_the_window(project, tmp_path, "apply-patches", "--site-packages", str(sp), SYMM)
    # the half state the crash left: one file written, the other not, no manifest, a record
    assert sha(sp / SIZES) != pristine[SIZES] and sha(sp / MULTIMEM) == pristine[MULTIMEM]
    assert not manifest_path(sp).exists() and intent_path(sp).exists()
    record = json.loads(intent_path(sp).read_text())
    assert (record["schema"], record["action"], record["patchsets"], record["manifest_after"] != "absent") == (
        1,
        "apply",
        [SYMM],
        True,
    )
    assert [f["path"] for f in record["files"]] == [SIZES, MULTIMEM]
    # a plan (dry run, verify's patch-states) refuses to read states from half-written files
    with pytest.raises(
        CheckFailed,
        match=r"^an `apply-patches` of sm120-torch-symm-mem was interrupted while "
        rf"writing {SIZES}, {MULTIMEM} \(record ",
    ):
        plan(sp, load_patchsets(PATCHSETS, [SYMM]))
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert (
        "rolled back an interrupted `apply-patches` of sm120-torch-symm-mem: 1 file restored to their "
        "bytes before it; the patch manifest was not written, so none of its files stay changed"
    ) in err
    assert [line.split()[:3] for line in out.splitlines()] == [["applied", SYMM, SIZES], ["applied", SYMM, MULTIMEM]]
    assert not intent_path(sp).exists()
    manifest = read_manifest(sp)
    assert manifest is not None
    assert [(f.path, f.original_sha256) for f in manifest.files] == [
        (SIZES, pristine[SIZES]),
        (MULTIMEM, pristine[MULTIMEM]),
    ]
    assert all(sha(sp / f.path) == f.new_sha256 for f in manifest.files)
    assert sorted(p.name for p in (sp / ".envforge" / "originals").iterdir()) == sorted(pristine.values())


def test_kill_after_the_first_replace_then_revert_restores_the_originals(project: Path, tmp_path: Path) -> None:
    sp = sp_of(project)
    pristine = {p: sha(sp / p) for p in (SIZES, MULTIMEM)}
    killed_in_the_window(project, tmp_path, "apply-patches", "--site-packages", str(sp), SYMM)
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), "--revert")
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert "rolled back an interrupted `apply-patches` of sm120-torch-symm-mem: 1 file restored" in err
    assert {p: sha(sp / p) for p in pristine} == pristine
    assert not manifest_path(sp).exists() and not intent_path(sp).exists()
    assert not (sp / ".envforge" / "originals").exists()


def test_kill_inside_a_revert_then_revert_again(project: Path, tmp_path: Path) -> None:
    sp = sp_of(project)
    pristine = {p: sha(sp / p) for p in (SIZES, MULTIMEM)}
    assert envforge(project, "apply-patches", "--site-packages", str(sp), SYMM).wait() == 0
    patched = {p: sha(sp / p) for p in pristine}
    killed_in_the_window(project, tmp_path, "apply-patches", "--site-packages", str(sp), "--revert")
    assert sha(sp / SIZES) == pristine[SIZES] and sha(sp / MULTIMEM) == patched[MULTIMEM]  # half reverted
    # rolled back to the patched state the manifest describes, then reverted whole
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), "--revert")
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert (
        "rolled back an interrupted `apply-patches --revert` of sm120-torch-symm-mem: 1 file restored "
        "to their bytes before it"
    ) in err
    assert [line.split()[0] for line in out.splitlines()] == ["reverted", "reverted"]
    assert {p: sha(sp / p) for p in pristine} == pristine and not manifest_path(sp).exists()


def test_verify_rolls_back_an_interrupted_apply(project: Path, tmp_path: Path) -> None:
    """verify's static run recovers first (under the lock), so the record check sees whole states."""
    sp = sp_of(project)
    pristine = sha(sp / SIZES)
    killed_in_the_window(project, tmp_path, "apply-patches", "--site-packages", str(sp), SYMM)
    collector = static._Collector()
    static._recover_interrupted(sp, collector)
    assert collector.notes == [
        "rolled back an interrupted `apply-patches` of sm120-torch-symm-mem: 1 file "
        "restored to their bytes before it; the patch manifest was not written, so none "
        "of its files stay changed"
    ]
    assert sha(sp / SIZES) == pristine and not intent_path(sp).exists()


def test_patches_diff_of_a_half_applied_state_says_so_and_which_files_are_written(
    project: Path, tmp_path: Path
) -> None:
    """Fault suite N93: after a crash mid-apply, ``patches diff`` said "no patches applied" (and ``patches
    export`` took the half-written file for the original); both now refuse as the dry run does (exit 1),
    naming the written and the unwritten files, and change nothing."""
    sp = sp_of(project)
    killed_in_the_window(project, tmp_path, "apply-patches", "--site-packages", str(sp), SYMM)
    half = {p: sha(sp / p) for p in (SIZES, MULTIMEM)}
    expected = (
        f"error: an `apply-patches` of {SYMM} was interrupted while writing {SIZES}, {MULTIMEM} (record "
        f"{intent_path(sp)}): some of these files may be written and others not (written: {SIZES}; "
        f"not written: {MULTIMEM})\n"
        "  hint: run `envforge apply-patches` (or `envforge verify`) on the environment: it rolls the "
        "interrupted write back first\n"
    )
    for args in (
        ("patches", "diff", "--site-packages", str(sp)),
        ("patches", "export", SYMM, "--site-packages", str(sp)),
        ("apply-patches", "--dry-run", "--site-packages", str(sp), SYMM),
    ):
        proc = envforge(project, *args)
        out, err = proc.communicate(timeout=120)
        assert (proc.returncode, out, err) == (1, "", expected), args
    proc = envforge(project, "patches", "diff", "--site-packages", str(sp), "--json")
    out, _ = proc.communicate(timeout=120)
    envelope = json.loads(out)
    assert (proc.returncode, envelope["schema"], envelope["data"]["kind"], envelope["data"]["message"]) == (
        1,
        "envforge.error/1",
        "check-failed",
        expected.splitlines()[0][len("error: ") :],
    )
    assert {p: sha(sp / p) for p in (SIZES, MULTIMEM)} == half and intent_path(sp).exists()  # nothing touched
    # in-process too (mutation testing selects tests by the calls it sees in its own process); then a
    # file changed by hand since, and one gone, are "changed otherwise"
    with pytest.raises(CheckFailed) as exc:
        refuse_interrupted(sp)
    assert str(exc.value) == expected[len("error: ") : -1]
    (sp / SIZES).write_bytes(b"# edited by hand\n")
    (sp / MULTIMEM).unlink()
    with pytest.raises(CheckFailed) as exc:
        refuse_interrupted(sp)
    assert exc.value.message.endswith(f"(changed otherwise: {SIZES}, {MULTIMEM})")


def test_a_second_apply_waits_for_the_first_and_ends_in_a_whole_state(project: Path, tmp_path: Path) -> None:
    sp = sp_of(project)
    marker = tmp_path / "in-window"
    first = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM, hold=marker)
    wait_for(marker, first)
    second = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM)
    time.sleep(1.5)
    assert second.poll() is None  # blocked on the environment lock while the first is inside its write
    first.send_signal(signal.SIGKILL)
    first.communicate()
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    lock = project / "envs" / ".generations" / "quickstart-default" / ".lock"
    assert f"waiting for another envforge process on this environment (lock {lock})" in err
    assert [line.split()[0] for line in out.splitlines()] == ["applied", "applied"]
    manifest = read_manifest(sp)
    assert manifest is not None and all(sha(sp / f.path) == f.new_sha256 for f in manifest.files)


def test_two_concurrent_applies_serialise(project: Path) -> None:
    sp = sp_of(project)
    procs = [
        envforge(project, "apply-patches", "--site-packages", str(sp), "flashinfer-sm120-trtllm-comm", SYMM)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    states = sorted(tuple(line.split()[0] for line in out.splitlines()) for out, _ in outs)
    assert states == [("already-applied",) * 3, ("applied",) * 3]
    manifest = read_manifest(sp)
    assert manifest is not None
    assert [f.path for f in manifest.files] == ["flashinfer/jit/comm.py", SIZES, MULTIMEM]
    assert all(sha(sp / f.path) == f.new_sha256 for f in manifest.files)


def test_build_refuses_while_apply_patches_holds_the_environment_lock(project: Path, tmp_path: Path) -> None:
    """apply-patches takes the very file ``envforge build`` locks (envs/.generations/<name>/.lock)."""
    sp = sp_of(project)
    lock = environment_lock_path(sp)
    assert lock == project / "envs" / ".generations" / "quickstart-default" / ".lock"
    marker = tmp_path / "in-window"
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM, hold=marker)
    wait_for(marker, proc)
    with open(lock, "a") as fh:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    with open(lock, "a") as fh:  # the kernel released the dead holder's lock
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_manifest_digest_does_not_depend_on_the_order_patchsets_were_applied(tmp_path: Path) -> None:
    one = slim_tree(tmp_path / "one", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    two = slim_tree(tmp_path / "two", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.4"))
    for sp, order in (
        (one, ["flashinfer-sm120-trtllm-comm", SYMM, "kimik25-eagle3-delegation"]),
        (two, ["kimik25-eagle3-delegation", SYMM, "flashinfer-sm120-trtllm-comm"]),
    ):
        for pid in order:
            assert apply(sp, load_patchsets(PATCHSETS, [pid])).ok
    assert manifest_path(one).read_bytes() == manifest_path(two).read_bytes()
    data = json.loads(manifest_path(one).read_text())
    assert [p["id"] for p in data["patchsets"]] == ["flashinfer-sm120-trtllm-comm", "kimik25-eagle3-delegation", SYMM]
    assert [f["path"] for f in data["files"]] == [
        "flashinfer/jit/comm.py",
        SIZES,
        MULTIMEM,
        "sglang/srt/models/kimi_k25.py",
    ]


def test_kill_inside_an_apply_of_two_patchsets_rolls_both_back(project: Path, tmp_path: Path) -> None:
    """One journaled write per run: the files of both patchsets, or none of them."""
    sp = sp_of(project)
    comm = "flashinfer/jit/comm.py"
    pristine = {p: sha(sp / p) for p in (comm, SIZES, MULTIMEM)}
    killed_in_the_window(
        project, tmp_path, "apply-patches", "--site-packages", str(sp), "flashinfer-sm120-trtllm-comm", SYMM
    )
    assert [p for p in pristine if sha(sp / p) != pristine[p]] == [comm]
    record = json.loads(intent_path(sp).read_text())
    assert (record["patchsets"], [f["path"] for f in record["files"]]) == (
        ["flashinfer-sm120-trtllm-comm", SYMM],
        [comm, SIZES, MULTIMEM],
    )
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), "--revert")
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert (
        "rolled back an interrupted `apply-patches` of flashinfer-sm120-trtllm-comm, sm120-torch-symm-mem: "
        "1 file restored to their bytes before it"
    ) in err
    assert {p: sha(sp / p) for p in pristine} == pristine and not manifest_path(sp).exists()


@pytest.mark.parametrize("applied_first", [False, True])
def test_a_fifo_in_place_of_a_file_to_patch_is_named_never_opened(project: Path, applied_first: bool) -> None:
    """Issue 41: ``open()`` of a FIFO blocks until a writer comes: apply-patches and verify hung on one in
    place of a file a patchset edits. Real processes, a real FIFO: apply-patches exits 2 naming it and
    how to rebuild; the planner verify's patch-state check runs refuses it (a finding there)."""
    import os  # noqa: PLC0415 (only this test makes FIFOs)

    sp = sp_of(project)
    if applied_first:
        done = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM)
        assert done.wait(timeout=300) == 0, done.communicate()
    (sp / SIZES).unlink()
    os.mkfifo(sp / SIZES)
    proc = envforge(project, "apply-patches", "--site-packages", str(sp), SYMM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err
    assert err.splitlines()[0] == f"error: installed file {sp / SIZES} is not a regular file (a FIFO)"
    assert err.splitlines()[1].startswith("  hint: ")
    with pytest.raises(InputError) as refused:  # the planner verify's patch-state check runs
        plan(sp, load_patchsets(PATCHSETS, [SYMM]))
    assert refused.value.message == f"installed file {sp / SIZES} is not a regular file (a FIFO)"
