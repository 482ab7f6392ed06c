"""envforge.verify.records: RECORD integrity where a package file is not a regular file (a real FIFO)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.sigterm import sigterm_when

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("deep", [False, True])
def test_a_fifo_in_place_of_a_package_file_is_a_finding_not_a_hang(tmp_path: Path, deep: bool) -> None:
    """Field cases N45, N46: verify (and --deep, whose hashing threads then ignored SIGTERM) hung on
    the FIFO's open(). In a subprocess with a timeout, so a regression fails instead of hanging."""
    sp = tmp_path / "sp"
    di = sp / "tinypkg-1.0.dist-info"
    di.mkdir(parents=True)
    (sp / "tinypkg").mkdir()
    body = b"VALUE = 1\n"
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n\n")
    (di / "RECORD").write_text(
        f"tinypkg/__init__.py,sha256={digest},{len(body)}\ntinypkg/ok.py,sha256={digest},{len(body)}\n"
    )
    (sp / "tinypkg" / "ok.py").write_bytes(body)
    os.mkfifo(sp / "tinypkg" / "__init__.py")
    st = (sp / "tinypkg" / "ok.py").stat()
    os.utime(di / "RECORD", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # written after its files, as installers do
    code = (
        "from pathlib import Path\n"
        "from envforge.installed.distributions import installed_distributions\n"
        "from envforge.verify.records import check_records\n"
        f"sp = Path({str(sp)!r})\n"
        f"findings, hashed, _ = check_records(sp, installed_distributions(sp).values(), {{}}, deep={deep})\n"
        "for f in findings:\n"
        "    print(f.kind, f.subject, '|', f.expected, '|', f.actual)\n"
        "print(hashed)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "tampered tinypkg 1.0: tinypkg/__init__.py | a regular file (listed in RECORD) | a FIFO",
        "1" if deep else "0",
    ]


def test_sigterm_during_deep_hashing_with_a_fifo_in_the_env_stops_verify_at_once(tmp_path: Path) -> None:
    """Fault suite N46 through the real CLI: ``verify --deep`` of a built environment with a real FIFO
    in place of a package file ends (the FIFO is a finding); and a real SIGTERM that lands while a
    hashing thread reads a large file stops it at once (the interpreter joins pool threads at exit:
    it used to wait for the whole file, 105 s for 20 GiB). Every wait bounded."""
    from tests.support.verify_envs import build_tiny

    sp = build_tiny(tmp_path / "p", files={"tinypkg/__init__.py": b"VALUE = 1\n", "tinypkg/big.bin": b"x"})
    proj = tmp_path / "p"
    init = sp / "tinypkg" / "__init__.py"
    init.unlink()  # uv hardlinks from its cache: replace, never write through
    os.mkfifo(init)
    argv = [sys.executable, "-m", "envforge", "verify", "tiny-default", "--deep"]
    res = subprocess.run(argv, cwd=proj, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert (
        "tampered: tinypkg 1.0: tinypkg/__init__.py\n    expected: a regular file (listed in RECORD)\n"
        "    actual:   a FIFO\n" in res.stdout
    )
    big = sp / "tinypkg" / "big.bin"
    big.unlink()
    with open(big, "wb") as fh:
        fh.truncate(20 << 30)  # sparse: 20 GiB to hash, nothing on disk
    proc = subprocess.Popen(argv, cwd=proj, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    took, err = sigterm_when(proc, lambda: _has_open(proc.pid, big))  # once a hashing thread is reading it
    assert (proc.returncode, err.splitlines()[-1]) == (143, "error: stopped by signal SIGTERM")
    assert took < 30, took  # it used to wait for the whole file: 105 s for 20 GiB


def _has_open(pid: int, path: Path) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path.resolve()):
                return True
        except OSError:
            continue
    return False


# --- the verdicts, in-process, on an environment real uv installed (hardlinks of its cache) ---------

import shutil  # noqa: E402
import threading  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from tests.support.pythons import python_for  # noqa: E402
from tests.support.verify_envs import make_wheel  # noqa: E402

from envforge.installed.distributions import Installed, installed_distributions, read_record  # noqa: E402
from envforge.uv.run import uv_binary  # noqa: E402
from envforge.verify.records import (  # noqa: E402
    PatchedFile,
    cached_bytecode,
    check_patched_files,
    check_records,
    conflict_claimants,
    sha256_file,
    shared_files_note,
    stale_bytecode,
)

BODY = b"VALUE = 1\n"
SHARED = b"shared by two wheels\n"


def hexsha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Site:
    sp: Path
    dists: dict[str, Installed]


@pytest.fixture
def site(tmp_path: Path) -> Site:
    """``alpha 1.0`` (alpha/__init__.py, alpha/util.py), ``gamma 3.0`` (common.txt) and ``beta 2.0``
    (beta/__init__.py and common.txt too: its bytes win, installed last), installed in that order
    by uv from a cache of this test's own, so every file is a hardlink of it."""
    w = tmp_path / "w"
    alpha = make_wheel(w, "alpha", "1.0", files={"alpha/__init__.py": BODY, "alpha/util.py": b"X = 2\n"})
    gamma = make_wheel(w, "gamma", "3.0", files={"common.txt": b"gamma's\n"})
    beta = make_wheel(w, "beta", "2.0", files={"beta/__init__.py": BODY, "common.txt": SHARED})
    venv, uv = tmp_path / "venv", uv_binary()
    subprocess.run(
        [uv, "venv", "-q", "--python", python_for("3.12"), venv],
        check=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    for wheel in (alpha, gamma, beta):
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "-q",
                "--python",
                venv / "bin" / "python",
                "--no-deps",
                "--cache-dir",
                tmp_path / "c",
                wheel,
            ],
            check=True,
        )
    sp = next(venv.glob("lib/python3*/site-packages"))
    return Site(sp, installed_distributions(sp))


def replace(path: Path, data: bytes, *, keep_times: bool = False) -> None:
    """New bytes as a new file (not through uv's hardlink); ``keep_times``: the old mtime kept."""
    st = path.stat()
    path.unlink()
    path.write_bytes(data)
    if keep_times:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def findings_of(
    site: Site, patched: dict[str, PatchedFile] | None = None, **kw: object
) -> tuple[list[tuple[str, ...]], int, int]:
    found, hashed, size = check_records(site.sp, [site.dists["alpha"]], patched or {}, **kw)  # type: ignore[arg-type]
    return [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in found], hashed, size


REBUILD = (
    "undo the edit, or rebuild the environment: `envforge build` (a fresh generation, patched from its lock); "
    "to keep the change, write it as a patchset, relock and rebuild"
)


def test_an_untouched_environment_hashes_nothing_fast_and_everything_deep(site: Site) -> None:
    assert findings_of(site) == ([], 0, 0)
    # deep: every hashed row of alpha's RECORD as uv wrote it (RECORD itself is unhashed), and their bytes
    rows = [e for e in read_record(site.dists["alpha"]) if e.sha256]
    assert sorted(e.path for e in rows) == [
        "alpha-1.0.dist-info/INSTALLER",
        "alpha-1.0.dist-info/METADATA",
        "alpha-1.0.dist-info/REQUESTED",
        "alpha-1.0.dist-info/WHEEL",
        "alpha-1.0.dist-info/direct_url.json",
        "alpha-1.0.dist-info/uv_cache.json",
        "alpha/__init__.py",
        "alpha/util.py",
    ]
    assert findings_of(site, deep=True) == ([], 8, sum(e.size or 0 for e in rows))


def test_a_same_size_edit_with_the_old_mtime_is_found_only_deep(site: Site) -> None:
    util = site.sp / "alpha" / "util.py"
    replace(util, b"X = 3\n", keep_times=True)
    assert findings_of(site) == ([], 0, 0)
    assert findings_of(site, deep=True)[0] == [
        (
            "tampered",
            "alpha 1.0: alpha/util.py",
            f"sha256 {hexsha(b'X = 2' + bytes([10]))} (RECORD of alpha 1.0)",
            f"sha256 {hexsha(b'X = 3' + bytes([10]))}",
            REBUILD,
        )
    ]


def test_an_edit_is_found_by_its_size_or_its_mtime(site: Site) -> None:
    util = site.sp / "alpha" / "util.py"
    replace(util, b"X = 22\n", keep_times=True)  # another size, the old mtime
    (found,), hashed, size = findings_of(site)
    assert (found[0], found[3], hashed, size) == ("tampered", f"sha256 {hexsha(b'X = 22' + bytes([10]))}", 1, 7)
    replace(util, b"X = 4\n")  # the same size, a newer mtime
    assert [f[3] for f in findings_of(site)[0]] == [f"sha256 {hexsha(b'X = 4' + bytes([10]))}"]


def test_an_in_place_edit_of_a_hardlink_of_uvs_cache_says_to_clean_the_cache(site: Site) -> None:
    util = site.sp / "alpha" / "util.py"
    links = util.stat().st_nlink
    assert links == 2  # uv's cache and this environment
    with util.open("r+b") as fh:  # sed -i would replace the file; a write through the link is the B09 case
        fh.write(b"X = 5\n")
    ((kind, subject, expected, actual, fix),), _, _ = findings_of(site)
    assert (kind, subject, expected, actual) == (
        "tampered",
        "alpha 1.0: alpha/util.py",
        f"sha256 {hexsha(b'X = 2' + bytes([10]))} (RECORD of alpha 1.0)",
        f"sha256 {hexsha(b'X = 5' + bytes([10]))}",
    )
    assert fix == (
        "the file is a hardlink shared with uv's cache (2 links), so the edit changed uv's cached copy too and a "
        "rebuild installs the edited bytes again: run `uv cache clean alpha` first, then rebuild: `envforge build` "
        "(a fresh generation, patched from its lock); edit installed files by replacing them, never in place"
    )


def test_a_patched_file_is_judged_against_its_patch(site: Site) -> None:
    util = site.sp / "alpha" / "util.py"
    replace(util, b"X = 6\n")
    patch = PatchedFile("alpha/util.py", hexsha(b"X = 2\n"), hexsha(b"X = 6\n"), "alpha-fix")
    assert findings_of(site, {"alpha/util.py": patch}) == ([], 1, 6)
    # a patched file as patched does not end the check: a tampered file after it is still found
    replace(site.sp / "alpha" / "__init__.py", b"VALUE = 2\n")
    init = PatchedFile("alpha/__init__.py", hexsha(BODY), hexsha(b"VALUE = 2\n"), "alpha-init")
    assert [f[1] for f in findings_of(site, {"alpha/__init__.py": init})[0]] == ["alpha 1.0: alpha/util.py"]
    replace(util, b"X = 7\n")  # edited after envforge patched it
    assert findings_of(site, {"alpha/util.py": patch, "alpha/__init__.py": init})[0] == [
        (
            "tampered",
            "alpha 1.0: alpha/util.py",
            f"sha256 {hexsha(b'X = 6' + bytes([10]))} (patched by envforge, patchset alpha-fix)",
            f"sha256 {hexsha(b'X = 7' + bytes([10]))}",
            REBUILD,
        )
    ]


def test_missing_and_special_files(site: Site) -> None:
    """alpha/__init__.py (listed first in RECORD) is gone, alpha/util.py is a FIFO: both are named."""
    (site.sp / "alpha" / "__init__.py").unlink()
    util = site.sp / "alpha" / "util.py"
    util.unlink()
    os.mkfifo(util)
    assert findings_of(site)[0] == [
        (
            "missing-file",
            "alpha 1.0: alpha/__init__.py",
            "present (listed in RECORD)",
            "absent",
            "reinstall the distribution: `envforge build`",
        ),
        (
            "tampered",
            "alpha 1.0: alpha/util.py",
            "a regular file (listed in RECORD)",
            "a FIFO",
            "reinstall the distribution: `envforge build`",
        ),
    ]


def test_a_file_two_wheels_install_is_a_conflict_naming_whose_bytes_won(site: Site) -> None:
    dists = [site.dists["gamma"], site.dists["beta"]]
    assert check_records(site.sp, dists, {})[1] == 1  # fast: gamma's common.txt has another size
    found, hashed, _ = check_records(site.sp, dists, {}, deep=True)
    assert hashed == 15  # gamma's 7 hashed rows, beta's 8
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in found] == [
        (
            "file-conflict",
            "common.txt",
            "one distribution owns each installed file",
            "claimed by beta 2.0, gamma 3.0; the installed bytes are beta's",
            "both wheels install this file into site-packages and the last one installed wins: report it upstream; "
            "check that nothing imports it expecting the other copy",
        )
    ]
    assert conflict_claimants(found[0].actual) == ("beta 2.0", "gamma 3.0")
    assert conflict_claimants("claimed by b 1, a 2; x") == ("a 2", "b 1")
    assert conflict_claimants("claimed by a 1") == ()
    assert conflict_claimants("sha256 abc; claimed by a 1") == ()
    # bytes that are neither wheel's: tampered, not a conflict
    replace(site.sp / "common.txt", b"neither\n")
    found, _, _ = check_records(site.sp, dists, {}, deep=True)
    assert [(f.kind, f.subject) for f in found] == [
        ("tampered", "gamma 3.0: common.txt"),
        ("tampered", "beta 2.0: common.txt"),
    ]


def test_records_given_by_the_caller_are_used(site: Site) -> None:
    from envforge.installed.distributions import RecordEntry

    alpha = site.dists["alpha"]
    rows = tuple(RecordEntry(e.path, "0" * 64, e.size) if e.path == "alpha/util.py" else e for e in read_record(alpha))
    found, hashed, _ = check_records(site.sp, [alpha], {}, deep=True, records={alpha: rows})
    assert ([f.subject for f in found], hashed) == (["alpha 1.0: alpha/util.py"], 8)
    # a caller's mapping without this distribution: its RECORD is read
    assert check_records(site.sp, [alpha], {}, deep=True, records={})[0] == []


def test_patched_files_must_be_private_copies(site: Site) -> None:
    patches = [
        PatchedFile("alpha/util.py", "a" * 64, "b" * 64, "p1"),  # still uv's hardlink
        PatchedFile("alpha/gone.py", "a" * 64, "b" * 64, "p2"),
        PatchedFile("beta/__init__.py", "a" * 64, "b" * 64, "p3"),
        PatchedFile("common.txt", "a" * 64, "b" * 64, "p4"),  # after the missing one: still checked
    ]
    replace(site.sp / "beta" / "__init__.py", b"patched\n")  # as apply-patches writes: a new file
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in check_patched_files(site.sp, patches)] == [
        (
            "hardlinked",
            "alpha/util.py",
            "link count 1 (a private copy)",
            "link count 2",
            "the patched file shares its bytes with uv's cache or another environment; rebuild with `envforge build` "
            "(patches are written to a temp file and os.replace'd)",
        ),
        (
            "missing-file",
            "alpha/gone.py",
            "present (patched by p2)",
            "absent",
            "reinstall it: `envforge build` (a fresh generation, patched from its lock)",
        ),
        (
            "hardlinked",
            "common.txt",
            "link count 1 (a private copy)",
            "link count 2",
            "the patched file shares its bytes with uv's cache or another environment; rebuild with `envforge build` "
            "(patches are written to a temp file and os.replace'd)",
        ),
    ]


def test_the_shared_files_note_counts_the_other_files_of_patched_distributions(site: Site) -> None:
    dists = list(site.dists.values())
    assert shared_files_note(site.sp, dists, []) is None
    replace(site.sp / "alpha" / "util.py", b"patched\n")
    patch = PatchedFile("alpha/util.py", "a" * 64, "b" * 64, "p")
    assert shared_files_note(site.sp, dists, [patch]) == (
        "hardlinked (shared with uv's cache): 3 of alpha other files of the patched distributions; "
        "envforge replaced only the files it patched, so edit none of the others in place"
    )
    # a patched file in each of two distributions, the unpatched one (gamma) first, a RECORD row whose
    # file is gone, and the patched row before the others: every other file of both is counted
    gamma, alpha, beta = site.dists["gamma"], site.dists["alpha"], site.dists["beta"]
    replace(site.sp / "beta" / "__init__.py", b"patched\n")
    (site.sp / "beta-2.0.dist-info" / "WHEEL").unlink()
    record = beta.dist_info / "RECORD"
    rows = record.read_text().splitlines(keepends=True)
    record.write_text("".join(sorted(rows, key=lambda r: not r.startswith("beta/__init__.py"))))
    both = [patch, PatchedFile("beta/__init__.py", "a" * 64, "b" * 64, "p")]
    assert shared_files_note(site.sp, [gamma, alpha, beta], both) == (
        "hardlinked (shared with uv's cache): 3 of alpha, 2 of beta other files of the patched distributions; "
        "envforge replaced only the files it patched, so edit none of the others in place"
    )
    for rel in ("alpha/__init__.py", "alpha-1.0.dist-info/METADATA", "alpha-1.0.dist-info/WHEEL"):
        replace(site.sp / rel, (site.sp / rel).read_bytes())
    (site.sp / "alpha" / "__init__.py").unlink()
    assert shared_files_note(site.sp, [gamma, alpha], [patch]) is None


def test_bytecode_of_patched_sources(site: Site) -> None:
    patches = [PatchedFile(p, "a" * 64, "b" * 64, "p") for p in ("alpha/util.py", "alpha/__init__.py", "beta/data.txt")]
    assert cached_bytecode(site.sp, patches) == []
    cache = site.sp / "alpha" / "__pycache__"
    cache.mkdir()
    (cache / "util.cpython-312.pyc").write_bytes(b"")
    (cache / "other.cpython-312.pyc").write_bytes(b"")
    assert cached_bytecode(site.sp, patches) == [site.sp / "alpha" / "util.py"]
    util, pyc = site.sp / "alpha" / "util.py", cache / "util.cpython-312.pyc"
    verdicts = {
        str(util): {"pyc": str(pyc), "mode": "timestamp-checked", "stale": True},
        str(site.sp / "alpha" / "__init__.py"): {"pyc": str(pyc), "mode": "unchecked-hash", "stale": False},
        str(site.sp / "beta" / "data.txt"): None,
    }
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in stale_bytecode(site.sp, verdicts)] == [
        (
            "stale-bytecode",
            "alpha/__pycache__/util.cpython-312.pyc",
            "bytecode of the patched source alpha/util.py (or none)",
            "the interpreter would load timestamp-checked bytecode of other source (written before the patch)",
            "delete alpha/__pycache__/util.cpython-312.pyc (Python then compiles the patched source again)",
        )
    ]


def test_sha256_file(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"ab" * (1 << 20) + b"c")  # over two 1 MiB blocks, the last one short
    assert sha256_file(big) == hexsha(big.read_bytes())
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert sha256_file(empty) == hexsha(b"")
    stop = threading.Event()
    assert sha256_file(big, stop) == hexsha(big.read_bytes())
    stop.set()
    assert sha256_file(big, stop) == "(cancelled)"
    os.mkfifo(tmp_path / "fifo")
    assert sha256_file(tmp_path / "fifo") == "(a FIFO)"
    assert shutil.which("true")  # the thread's reused buffer serves a second file of another size
    assert sha256_file(empty) == hexsha(b"")
