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
