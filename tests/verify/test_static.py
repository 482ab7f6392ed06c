"""Static verify on real environments (uv venv + real sglang 0.5.9 / flashinfer-python 0.6.4 wheels,
the repo's patchsets applied, the pcie env profile installed), each broken in one way."""

from __future__ import annotations

import hashlib
import re
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import uv
from tests.conftest import cached_wheel
from tests.support.verify_envs import BuiltEnv, install_wheels, make_env, make_wheel
from tests.support.pythons import python_for

from envforge.env.layout import Environment
from envforge.recipe.project import Project
from envforge.verify import Finding, VerifyOptions, verify

PY312 = str(python_for("3.12"))
UV = uv.find_uv_bin()
pytestmark = pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")


def _wheels() -> list[Path]:
    return [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")]


def build(tmp_path: Path, **kw: object) -> BuiltEnv:
    return make_env(tmp_path / "proj", kw.pop("wheels", None) or _wheels(), uv=UV, python=PY312, **kw)  # type: ignore[arg-type]


def run(env: BuiltEnv, **kw: object):  # type: ignore[no-untyped-def]
    root = env.path.parent.parent
    return verify(Environment(env.path), Project(root), VerifyOptions(base_env=dict(os.environ), **kw))  # type: ignore[arg-type]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edit(path: Path, data: bytes) -> None:
    """Write ``data`` as a new file: uv hardlinks installed files to its cache, and an in-place
    write would change the cache and every environment sharing it (B09)."""
    path.unlink()
    path.write_bytes(data)


def patched_file(env: BuiltEnv) -> str:
    from envforge.patching import read_manifest

    manifest = read_manifest(env.site_packages)
    assert manifest is not None
    return manifest.files[0].path


def record_hash(env: BuiltEnv, rel: str) -> str:
    from envforge.verify.inventory import installed_distributions
    from envforge.verify.records import read_record

    for d in installed_distributions(env.site_packages).values():
        for e in read_record(d):
            if e.path == rel:
                return str(e.sha256)
    raise KeyError(rel)


def test_default_environment_verifies_clean(tmp_path: Path) -> None:
    env = build(tmp_path)
    report = run(env)
    assert report.findings == ()
    assert report.exit_code == 0
    status = {c.name: c.status for c in report.checks}
    assert status == {
        "platform": "skipped",
        "lock-integrity": "ok",
        "lock-current": "ok",
        "versions": "ok",
        "families": "ok",
        "metadata": "ok",
        "cuda-major": "skipped",
        "torch-abi": "skipped",
        "record": "ok",
        "patched-files": "ok",
        "patch-states": "ok",
        "patch-effect": "ok",
        "env-profile": "ok",
        "startup": "ok",
        "effective-env": "ok",
    }
    startup = next(c for c in report.checks if c.name == "startup")
    assert startup.detail == "1 start-up hooks (0 owned by nothing), 0 other unowned files"
    assert (
        "start-up code run at every interpreter start: envforge-env.pth (the envforge env profile 'pcie')"
        in report.notes
    )
    assert report.fingerprint.env_profile == "pcie"
    assert report.fingerprint.lock_digest == "sha256:" + sha(env.site_packages / ".envforge" / "pylock.toml")


def test_edited_file_is_tampered(tmp_path: Path) -> None:
    env = build(tmp_path)
    target = env.site_packages / "sglang" / "version.py"
    before = record_hash(env, "sglang/version.py")
    edit(target, target.read_bytes() + b"# local edit\n")
    report = run(env)
    assert report.findings == (
        Finding(
            "tampered",
            "sglang 0.5.9: sglang/version.py",
            f"sha256 {before} (RECORD of sglang 0.5.9)",
            f"sha256 {sha(target)}",
            "undo the edit, or rebuild the environment: `envforge build quickstart --variant "
            "default` (a fresh generation, patched from its lock); to keep the change, write it as a patchset, relock "
            "and rebuild",
        ),
    )
    assert report.exit_code == 1


def test_edited_patched_file_is_tampered_not_explained(tmp_path: Path) -> None:
    env = build(tmp_path)
    rel = patched_file(env)
    path = env.site_packages / rel
    edit(path, path.read_bytes() + b"# edited after the patch\n")
    report = run(env)
    tampered = [f for f in report.findings if f.kind == "tampered"]
    assert len(tampered) == 1 and tampered[0].subject.endswith(f": {rel}")
    assert "(patched by envforge, patchset " in tampered[0].expected
    assert tampered[0].actual == f"sha256 {sha(path)}"


def test_hardlinked_patched_file(tmp_path: Path) -> None:
    env = build(tmp_path)
    rel = patched_file(env)
    os.link(env.site_packages / rel, tmp_path / "other-env-copy.py")
    report = run(env)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        ("hardlinked", rel, "link count 1 (a private copy)", "link count 2")
    ]


_COMPILE = """
import importlib.util, py_compile, sys
src, data, mode, fake_header = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
cfile = importlib.util.cache_from_source(src)
py_compile.compile(data, cfile=cfile, dfile=src, invalidation_mode=py_compile.PycInvalidationMode[mode])
if fake_header:  # CPython issue 121376: same whole-second mtime and size as the patched source
    import os
    st = os.stat(src)
    with open(cfile, "r+b") as f:
        f.seek(8)
        f.write((int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
print(cfile)
"""


def compile_in_env(env: BuiltEnv, src: Path, data: bytes, mode: str, fake_header: bool = False) -> Path:
    """Bytecode of ``data`` cached for ``src``, written by the environment's own interpreter."""
    import subprocess

    tmp = src.with_name(src.stem + "_before_patch.py.txt")
    tmp.write_bytes(data)
    out = subprocess.run(
        [str(env.python), "-c", _COMPILE, str(src), str(tmp), mode, "1" if fake_header else "0"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tmp.unlink()
    return Path(out)


def original_bytes(env: BuiltEnv, rel: str) -> bytes:
    from envforge.patching import read_manifest

    manifest = read_manifest(env.site_packages)
    assert manifest is not None
    entry = next(f for f in manifest.files if f.path == rel)
    return (env.site_packages / ".envforge" / "originals" / entry.original_sha256).read_bytes()


def test_unchecked_hash_bytecode_of_the_original_hides_the_patch(tmp_path: Path) -> None:
    env = build(tmp_path)
    rel = patched_file(env)
    pyc = compile_in_env(env, env.site_packages / rel, original_bytes(env, rel), "UNCHECKED_HASH")
    report = run(env)
    pyc_rel = str(pyc.relative_to(env.site_packages))
    assert [(f.kind, f.subject, f.actual) for f in report.findings] == [
        (
            "stale-bytecode",
            pyc_rel,
            "the interpreter would load unchecked-hash bytecode of other source (written before the patch)",
        )
    ]
    assert report.findings[0].fix == f"delete {pyc_rel} (Python then compiles the patched source again)"


def test_timestamp_bytecode_with_a_matching_header_hides_the_patch(tmp_path: Path) -> None:
    env = build(tmp_path)
    rel = patched_file(env)
    compile_in_env(env, env.site_packages / rel, original_bytes(env, rel), "TIMESTAMP", fake_header=True)
    assert [(f.kind, f.actual) for f in run(env).findings] == [
        ("stale-bytecode", "the interpreter would load timestamp bytecode of other source (written before the patch)")
    ]


def test_bytecode_python_would_recheck_or_that_matches_is_no_finding(tmp_path: Path) -> None:
    env = build(tmp_path)
    rel = patched_file(env)
    src = env.site_packages / rel
    compile_in_env(env, src, original_bytes(env, rel), "CHECKED_HASH")  # re-checked: Python recompiles
    other = env.site_packages / patched_file_n(env, 1)
    compile_in_env(env, other, other.read_bytes(), "UNCHECKED_HASH")  # compiled after the patch: same code
    report = run(env)
    assert report.findings == ()
    detail = next(c for c in report.checks if c.name == "patched-files").detail
    assert detail == "5 patched files, 2 with cached bytecode"


def patched_file_n(env: BuiltEnv, n: int) -> str:
    from envforge.patching import read_manifest

    manifest = read_manifest(env.site_packages)
    assert manifest is not None
    return [f.path for f in manifest.files][n]


def test_extra_flashinfer_package_is_unexpected_and_splits_the_family(tmp_path: Path) -> None:
    env = build(tmp_path)
    install_wheels(env, [make_wheel(tmp_path / "w", "flashinfer-jit-cache", "0.6.9+cu130")], uv=UV)
    report = run(env)
    by_kind = {f.kind: f for f in report.findings}
    assert sorted(by_kind) == ["family-mismatch", "unexpected"]
    assert by_kind["unexpected"].subject == "flashinfer-jit-cache 0.6.9+cu130"
    assert by_kind["unexpected"].actual == "installed but not in lock: flashinfer-jit-cache 0.6.9+cu130"
    assert by_kind["unexpected"].fix == (
        f"remove it (`uv pip uninstall --python {env.path}/bin/python flashinfer-jit-cache`) or add it to the "
        "recipe and relock; `envforge build quickstart --variant default` installs exactly the lock"
    )
    fam = by_kind["family-mismatch"]
    assert (fam.subject, fam.expected, fam.actual) == (
        "flashinfer family",
        "one public version (flashinfer-python 0.6.4)",
        "flashinfer-python 0.6.4, flashinfer-jit-cache 0.6.9+cu130",
    )
    # The fix works as written (uv's own binary for `uv`): the environment verifies clean after it.
    command = by_kind["unexpected"].fix.split("`")[1].split()
    subprocess.run([UV, *command[1:]], check=True, capture_output=True)
    assert run(env).findings == ()


def test_version_mismatch_and_missing(tmp_path: Path) -> None:
    sg, fi = _wheels()
    env = build(
        tmp_path, locked=[("sglang", "0.5.9", sg), ("flashinfer-python", "0.6.3", None), ("sgl-kernel", "0.3.21", None)]
    )
    report = run(env)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        ("version-mismatch", "flashinfer-python", "0.6.3", "0.6.4"),
        ("missing", "sgl-kernel", "sgl-kernel 0.3.21 (in the lock)", "not installed"),
    ]


def test_local_label_mismatch(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "sgl-kernel", "0.3.21+cu128")
    env = build(
        tmp_path,
        wheels=[*_wheels(), wheel],
        locked=[("sglang", "0.5.9", None), ("flashinfer-python", "0.6.4", None), ("sgl-kernel", "0.3.21+cu130", None)],
    )
    report = run(env)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        ("local-label-mismatch", "sgl-kernel", "0.3.21+cu130", "0.3.21+cu128")
    ]


def test_removed_hook_does_not_reach_a_spawned_child(tmp_path: Path) -> None:
    env = build(tmp_path)
    (env.site_packages / "envforge-env.pth").unlink()
    report = run(env)
    assert [(f.kind, f.subject, f.actual) for f in report.findings] == [
        ("env-profile", "envforge-env.pth", "missing (the env profile 'pcie' is recorded as installed)"),
        ("env-profile", "ENVFORGE_PROFILE_PROBE", "unset"),
        ("env-profile", "NCCL_BUFFSIZE", "unset"),
        ("env-profile", "NCCL_MAX_NCHANNELS", "unset"),
    ]
    assert report.findings[2].expected == "131072 in a spawned child"


def test_lock_and_project_disagree_is_a_stale_environment(tmp_path: Path) -> None:
    env = build(tmp_path)
    env.lock.write_text(env.lock.read_text().replace('created-by = "envforge-tests"', 'created-by = "relocked"'))
    report = run(env)
    assert [(f.kind, f.subject) for f in report.findings] == [("stale-environment", str(env.lock))]


def test_missing_installed_file(tmp_path: Path) -> None:
    env = build(tmp_path)
    (env.site_packages / "sglang" / "version.py").unlink()
    report = run(env)
    assert [(f.kind, f.subject, f.actual) for f in report.findings] == [
        ("missing-file", "sglang 0.5.9: sglang/version.py", "absent")
    ]


def test_deep_catches_a_same_size_edit_that_fast_mode_trusts(tmp_path: Path) -> None:
    env = build(tmp_path)
    path = env.site_packages / "sglang" / "version.py"
    st = path.stat()
    data = path.read_bytes()
    edit(path, data.replace(b"0.0.0.dev0", b"9.9.9.dev9"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run(env).findings == ()
    deep = run(env, deep=True)
    assert [(f.kind, f.subject) for f in deep.findings] == [("tampered", "sglang 0.5.9: sglang/version.py")]
    assert next(c for c in deep.checks if c.name == "record").detail.startswith("deep: ")


def test_reverted_patches_are_not_in_their_expected_state(tmp_path: Path) -> None:
    from envforge import patching

    env = build(tmp_path)
    patching.revert(env.site_packages)
    report = run(env)
    assert {f.kind for f in report.findings} == {"patch-state"}
    assert all(
        f.expected == "already-applied" and f.actual == "not applied (apply would change the file)"
        for f in report.findings
    )
    assert report.findings[0].fix == "run `envforge apply-patches quickstart-default`"


def test_changed_patchset_file(tmp_path: Path) -> None:
    env = build(tmp_path)
    ps = env.path.parent.parent / "patchsets" / "sm120-torch-symm-mem.toml"
    ps.write_text(ps.read_text() + "\n# reviewed\n")
    report = run(env)
    found = [f for f in report.findings if f.kind == "patchset-changed"]
    assert [(f.subject, f.actual) for f in found] == [("sm120-torch-symm-mem", "digest sha256:" + sha(ps))]


def _b04_env(tmp_path: Path, extra: list[str]) -> BuiltEnv:
    wheel = make_wheel(tmp_path / "w", "pkgx", "1.0+cu130", metadata_version="1.0")
    env = build(
        tmp_path, locked=[("sglang", "0.5.9", None), ("flashinfer-python", "0.6.4", None), ("pkgx", "1.0+cu130", wheel)]
    )
    install_wheels(env, [] if extra else [wheel], uv=UV, extra=[*extra, "pkgx==1.0+cu130"] if extra else [])
    return env


def test_b04_label_in_file_name_only_is_confirmed_by_direct_url(tmp_path: Path) -> None:
    env = _b04_env(tmp_path, [])
    assert (env.site_packages / "pkgx-1.0.dist-info").is_dir()
    report = run(env)
    assert report.findings == ()
    assert report.notes[0] == (
        "pkgx: METADATA says 1.0, the lock 1.0+cu130 (B04); variant confirmed by the wheel "
        "file name in direct_url.json (pkgx-1.0+cu130-py3-none-any.whl)"
    )
    # the patched sglang and flashinfer keep their other files as uv's hardlinks (issue 16.4)
    assert report.notes[1:] == () or report.notes[1].startswith("hardlinked (shared with uv's cache): ")


def test_b04_from_an_index_is_confirmed_by_uv_cache(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = _b04_env(tmp_path, ["--no-index", "--find-links", str(tmp_path / "w"), "--cache-dir", str(cache)])
    assert not (env.site_packages / "pkgx-1.0.dist-info" / "direct_url.json").exists()
    report = run(env, uv_cache=cache)
    assert report.findings == ()
    assert report.notes[0].endswith(
        "variant confirmed by uv's cache: the installed files are hardlinks of the "
        "cached wheel pkgx-1.0+cu130-py3-none-any.whl"
    )
    unconfirmed = run(env, uv_cache=tmp_path / "no-cache")
    assert [(f.kind, f.subject, f.expected) for f in unconfirmed.findings] == [
        ("variant-unconfirmed", "pkgx", "1.0+cu130 (wheel pkgx-1.0+cu130-py3-none-any.whl)")
    ]


def test_b03_cuda13_wheels_in_a_cu12_variant(tmp_path: Path) -> None:
    w = tmp_path / "w"
    extra = [
        make_wheel(w, "nvidia-nccl-cu13", "2.28.3"),
        make_wheel(w, "cuda-bindings", "13.0.1"),
        make_wheel(w, "nvidia-nccl-cu12", "2.27.3"),
        make_wheel(w, "nvidia-cufft", "12.0.0.15"),
    ]
    env = build(tmp_path, wheels=[*_wheels(), *extra], envforge={"cuda": "12.8"})
    report = run(env)
    assert [(f.kind, f.subject, f.actual) for f in report.findings] == [
        (
            "cuda-major-mismatch",
            "cuda-bindings 13.0.1",
            "built for CUDA 13 (cuda-bindings is versioned by CUDA release)",
        ),
        ("cuda-major-mismatch", "nvidia-nccl-cu13 2.28.3", "built for CUDA 13 (name suffix -cu13)"),
    ]
    assert report.findings[0].expected == "CUDA 12 wheels (variant cuda 12.8)"


def test_uv_hardlinked_install_counts_once_a_patch_breaks_the_link(tmp_path: Path) -> None:
    """uv installs by hardlinking its cache (link count 2); the patched files must not be (B09)."""
    env = build(tmp_path)
    assert (env.site_packages / "sglang" / "version.py").stat().st_nlink >= 2
    assert (env.site_packages / patched_file(env)).stat().st_nlink == 1
    shutil.rmtree(tmp_path / "proj" / "patchsets")
    report = run(env)
    assert [(c.name, c.status) for c in report.checks if c.name == "patch-states"] == [("patch-states", "skipped")]


def test_markers_are_evaluated_in_the_environments_interpreter(tmp_path: Path) -> None:
    env = build(
        tmp_path,
        locked=[
            ("sglang", "0.5.9", None),
            ("flashinfer-python", "0.6.4", None),
            ("pywin32; sys_platform == 'win32'", "311", None),
            ("sgl-kernel; python_version >= '3.12'", "0.3.21", None),
        ],
    )
    report = run(env)
    assert [(f.kind, f.subject) for f in report.findings] == [("missing", "sgl-kernel")]
    assert report.fingerprint.python == "3.12.1"


def test_two_wheels_installing_one_file_is_a_conflict_not_a_tamper(tmp_path: Path) -> None:
    """Seen on the real kimi cu128 stack: flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5 both
    install a top-level build_backend.py; whichever uv installs last wins."""
    w = tmp_path / "w"
    extra = [
        make_wheel(w, "pkga", "1.0", files={"shared_helper.py": b"A = 1\n", "pkga/__init__.py": b""}),
        make_wheel(w, "pkgb", "1.0", files={"shared_helper.py": b"B = 22\n", "pkgb/__init__.py": b""}),
    ]
    env = build(tmp_path, wheels=[*_wheels(), *extra])
    winner = "pkga" if (env.site_packages / "shared_helper.py").read_bytes() == b"A = 1\n" else "pkgb"
    report = run(env)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        (
            "file-conflict",
            "shared_helper.py",
            "one distribution owns each installed file",
            f"claimed by pkga 1.0, pkgb 1.0; the installed bytes are {winner}'s",
        )
    ]


def test_missing_project_lock_is_a_finding_not_a_skipped_check(tmp_path: Path) -> None:
    env = build(tmp_path)
    project_lock = env.path.parent.parent / "lockfiles" / f"pylock.{env.path.name}.toml"
    assert project_lock.is_file()
    project_lock.unlink()
    report = run(env)
    assert [(f.kind, f.subject, f.actual) for f in report.findings] == [
        ("missing-lock", str(project_lock), "no such file")
    ]
    assert {c.name: c.status for c in report.checks}["lock-current"] == "findings"


def test_hand_edited_lock_copy_is_a_lock_integrity_finding(tmp_path: Path) -> None:
    env = build(tmp_path)
    copy = env.site_packages / ".envforge" / "pylock.toml"
    text = copy.read_text()
    first = re.search(r'sha256 = "([0-9a-f]{64})"', text)
    assert first
    copy.write_text(text.replace(first.group(1), "0" * 64))
    report = run(env)
    kinds = [(f.kind, f.subject) for f in report.findings]
    assert kinds[:2] == [
        ("lock-integrity", str(copy)),
        ("stale-environment", str(env.path.parent.parent / "lockfiles" / f"pylock.{env.path.name}.toml")),
    ]
    assert report.findings[0].actual.startswith("its [[packages]] are not the ones `envforge lock` wrote: ")


def test_an_in_place_edit_through_uv_cache_names_the_cache_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`envforge up` on an environment edited in place (`echo >> file`): the file is a hardlink of uv's
    cache, so the edit changed the cache; up rebuilt, the rebuild installed the edited bytes again,
    and the finding's fix (`envforge build`) did the same forever. The fix now names `uv cache clean`,
    and after it a fresh install verifies clean. A private uv cache: the shared one is never edited."""
    cache = tmp_path / "uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    env = build(tmp_path, wheels=[cached_wheel("sglang", "0.5.9")], patchsets=(), profile=None)
    target = env.site_packages / "sglang" / "version.py"
    before = record_hash(env, "sglang/version.py")
    assert target.stat().st_nlink > 1  # uv linked it from the private cache
    with target.open("ab") as fh:  # in place, through the hardlink
        fh.write(b"# local edit\n")
    report = run(env)
    assert report.findings == (
        Finding(
            "tampered",
            "sglang 0.5.9: sglang/version.py",
            f"sha256 {before} (RECORD of sglang 0.5.9)",
            f"sha256 {sha(target)}",
            f"the file is a hardlink shared with uv's cache ({target.stat().st_nlink} links), so "
            "the edit changed uv's cached copy too and a rebuild installs the edited bytes again: run `uv cache clean "
            "sglang` first, then rebuild: `envforge build quickstart --variant default` (a fresh generation, patched "
            "from its lock); edit installed files by replacing them, never in place",
        ),
    )
    again = build(tmp_path / "again", wheels=[cached_wheel("sglang", "0.5.9")], patchsets=(), profile=None)
    assert [f.kind for f in run(again).findings] == ["tampered"]  # what a rebuild gives: the edit again
    subprocess.run([UV, "cache", "clean", "sglang"], check=True, capture_output=True)
    fresh = build(tmp_path / "fresh", wheels=[cached_wheel("sglang", "0.5.9")], patchsets=(), profile=None)
    assert run(fresh).findings == ()


def test_a_deadline_holds_for_both_probe_threads(tmp_path: Path) -> None:
    """Both probes run in threads; a caller's deadline (a fleet node's) ends them, so an interpreter
    that never answers costs the deadline, not each probe's own 60 s limit."""
    import time

    from envforge.core.probe import ProbeTimeout, deadline

    env = build(tmp_path)
    python = env.path / "bin" / "python"
    python.unlink()  # (a symlink to the base interpreter)
    python.write_text("#!/bin/sh\nsleep 300\n")
    python.chmod(0o755)
    start = time.monotonic()
    with deadline(2.0), pytest.raises(ProbeTimeout) as late:
        run(env)
    assert time.monotonic() - start < 150  # the stand-in interpreter sleeps 300 s: it was not waited for
    assert late.value.deadline_s == 2.0


# --- envforge's own state files damaged: exit 2 at once, the file named, a hint; never a hang -----

REBUILD = (
    "rebuild the environment: `envforge build quickstart --variant default` (or `envforge up --rebuild`) "
    "(a fresh generation, patched from its lock)"
)
STATE_FILES = {  # file: (how messages name it, its size limit, the hint)
    "patches.json": ("patch manifest", "64 MiB", f"restore it from a backup, or {REBUILD}"),
    "env-profile.json": ("env profile record", "1 MiB", REBUILD),
    "generation.json": (
        "generation record",
        "1 MiB",
        "rebuild the environment: `envforge build RECIPE --variant VARIANT` with the recipe and "
        "variant it was built from (its .envforge/generation.json is damaged, so it cannot say which)",
    ),
    "pylock.toml": (
        "lock",
        "64 MiB",
        "rebuild it with `envforge build` (it copies the lock into .envforge/); for an environment "
        "envforge did not build: `envforge init --from-env ENV`, then `envforge verify ENV --lock LOCK`",
    ),
}


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with ``envs/quickstart-default`` built by the real ``envforge build quickstart``."""
    from tests.support.verify_envs import build_quickstart

    return build_quickstart(tmp_path_factory.mktemp("state").resolve() / "proj")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["fifo", "dev-zero", "directory", "oversized"])
@pytest.mark.parametrize("name", list(STATE_FILES))
def test_damaged_state_file_is_exit_2_naming_it(quickstart: Path, name: str, how: str) -> None:
    """A FIFO made `verify --level static` hang for ever, /dev/zero read until memory ran out, and a
    FIFO lock copy was reported as not existing: each is now one error line and a hint, at once."""
    import sys

    from tests.support.verify_envs import DAMAGE_KIND, damaged

    what, size, hint = STATE_FILES[name]
    sp = next((quickstart / "envs" / "quickstart-default").glob("lib/python3*/site-packages"))
    path = sp / ".envforge" / name
    with damaged(path, how, limit=(1 << 20) if size == "1 MiB" else (64 << 20)):
        res = subprocess.run(
            [sys.executable, "-m", "envforge", "verify", "quickstart-default", "--level", "static"],
            cwd=quickstart,
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
    reason = (
        f"is larger than {size}: envforge never writes one that large"
        if how == "oversized"
        else f"is not a regular file ({DAMAGE_KIND[how]})"
    )
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-2:] == [f"error: {what} {path} {reason}", f"  hint: {hint}"]
    assert "Traceback" not in res.stderr


def test_sigterm_while_a_probe_waits_on_a_slow_start_up_hook_stops_verify_at_once(tmp_path: Path) -> None:
    """A start-up hook that never returns (here a ``sitecustomize`` that sleeps) keeps verify's probes
    of the interpreter waiting; a real SIGTERM then stops verify at once and kills the probes (it used
    to wait 58 s: the probe threads were joined until the probes' 60 s timeout)."""
    import sys
    import time

    from tests.support.sigterm import sigterm_when
    from tests.support.verify_envs import build_tiny

    sp = build_tiny(tmp_path / "p")
    marker = tmp_path / "probe-started"
    (sp / "sitecustomize.py").write_text(
        f"import os, time\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "envforge", "verify", "tiny-default"],
        cwd=tmp_path / "p",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    took, err = sigterm_when(proc, marker.exists)
    assert (proc.returncode, err.splitlines()[-1]) == (143, "error: stopped by signal SIGTERM")
    assert took < 30, took  # it used to wait for the probes' 60 s timeout (58 s)
    deadline = time.monotonic() + 10
    pids = [int(p) for p in marker.read_text().split()]
    while any(os.path.exists(f"/proc/{p}") and "zombie" not in _state(p) for p in pids):
        assert time.monotonic() < deadline, "a probe outlived verify"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0]
    except (OSError, IndexError):
        return "zombie"
