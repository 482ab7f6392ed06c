"""envforge.verify.records: RECORD integrity where a package file is not a regular file (a real FIFO)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    (di / "RECORD").write_text(f"tinypkg/__init__.py,sha256={digest},{len(body)}\ntinypkg/ok.py,sha256={digest},"
                               f"{len(body)}\n")
    (sp / "tinypkg" / "ok.py").write_bytes(body)
    os.mkfifo(sp / "tinypkg" / "__init__.py")
    st = (sp / "tinypkg" / "ok.py").stat()
    os.utime(di / "RECORD", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # written after its files, as installers do
    code = ("from pathlib import Path\n"
            "from envforge.installed.distributions import installed_distributions\n"
            "from envforge.verify.records import check_records\n"
            f"sp = Path({str(sp)!r})\n"
            f"findings, hashed, _ = check_records(sp, installed_distributions(sp).values(), {{}}, deep={deep})\n"
            "for f in findings:\n"
            "    print(f.kind, f.subject, '|', f.expected, '|', f.actual)\n"
            "print(hashed)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "tampered tinypkg 1.0: tinypkg/__init__.py | a regular file (listed in RECORD) | a FIFO",
        "1" if deep else "0"]
