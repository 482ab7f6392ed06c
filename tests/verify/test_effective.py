"""Static verify of the served process's environment: the launcher (B38) and NCCL's files (B44)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from envforge.env.fingerprint import Fingerprint
from envforge.env.profile import ServedCommand
from envforge.verify.effective import effective_findings
from envforge.verify.findings import Check, Finding, VerifyReport
from envforge.verify.report import as_text
from tests.conftest import cached_wheel

B38_RECORD = {
    "profile": "pcie",
    "env": {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "CUDA_MODULE_LOADING": "EAGER",
        "NCCL_CUMEM_ENABLE": "0",
        "NCCL_NVLS_ENABLE": "0",
    },
}
SERVERS = (
    ServedCommand("baseline", ("-m", "sglang.launch_server", "--model-path", "{model}"), {}, "sglang"),
    ServedCommand("symm-mem", ("-m", "sglang.launch_server", "--enable-symm-mem"), {}, "sglang"),
)


@pytest.fixture
def sglang_site(tmp_path: Path) -> Path:
    """A site-packages with the real sglang 0.5.9 wheel's METADATA (the version is what matters)."""
    sp = tmp_path / "site-packages"
    (sp / "sglang-0.5.9.dist-info").mkdir(parents=True)
    with zipfile.ZipFile(cached_wheel("sglang", "0.5.9")) as zf:
        (sp / "sglang-0.5.9.dist-info" / "METADATA").write_bytes(zf.read("sglang-0.5.9.dist-info/METADATA"))
    return sp


def _text(found: list[Finding], notes: list[str]) -> list[str]:
    report = VerifyReport(
        "env",
        ("static",),
        Fingerprint(None, None, None, None),
        tuple(found),
        (Check("effective-env", "static", "findings" if found else "ok"),),
        tuple(notes),
        elapsed_s=0.1,
    )
    return as_text(report)[:-2]  # without the fingerprint and summary lines


def test_b38_each_launcher_override_is_a_finding_per_server(sglang_site: Path, tmp_path: Path) -> None:
    found, notes, detail = effective_findings(sglang_site, B38_RECORD, SERVERS, {}, home=tmp_path)
    assert notes == [] and detail.startswith("2 servers, launcher sglang-0.5.9, ")
    assert [f.subject for f in found] == [
        "server 'baseline': CUDA_DEVICE_MAX_CONNECTIONS",
        "server 'baseline': CUDA_MODULE_LOADING",
        "server 'symm-mem': CUDA_DEVICE_MAX_CONNECTIONS",
        "server 'symm-mem': CUDA_MODULE_LOADING",
        "server 'symm-mem': NCCL_CUMEM_ENABLE",
        "server 'symm-mem': NCCL_NVLS_ENABLE",
    ]
    assert all(f.from_recipe for f in found)
    assert _text(found[4:5], notes) == [
        "launcher-override: server 'symm-mem': NCCL_CUMEM_ENABLE",
        "    expected: 0 (env profile 'pcie')",
        "    actual:   1 (launcher sglang-0.5.9 (--enable-symm-mem) sets it after the profile's hook ran)",
        "    fix:      the engine's launch code wins over the profile: drop NCCL_CUMEM_ENABLE from the recipe's "
        "[env.*] table, or change the server's flags; accept it with [[verify.accept]] if intended",
    ]


def test_another_sglang_version_has_no_data_and_no_finding(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "sglang-0.5.8.dist-info").mkdir(parents=True)
    (sp / "sglang-0.5.8.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.8\n")
    found, notes, detail = effective_findings(sp, B38_RECORD, SERVERS, {}, home=tmp_path)
    assert (found, notes) == ([], [])
    assert detail.startswith("2 servers, launcher none, ")


def test_b44_variables_only_an_nccl_conf_file_sets_are_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_SOCKET_IFNAME=^docker0\nNCCL_P2P_DISABLE=1\nNCCL_BUFFSIZE=128K\nNCCL_MAX_NCHANNELS=32\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    record = {"profile": "pcie", "env": {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"}}
    found, notes, detail = effective_findings(tmp_path, record, (), {"NCCL_CONF_FILE": str(conf)})
    assert found == []
    assert detail == f"0 servers, launcher none, {conf}"
    assert _text(found, notes) == [
        f"note: NCCL_P2P_DISABLE=1 from nccl.conf {conf} is in effect for NCCL and in no recipe: set it in the "
        "recipe's [env.*] table to pin it (the profile wins over the file)",
        f"note: NCCL_SOCKET_IFNAME=^docker0 from nccl.conf {conf} is in effect for NCCL and in no recipe: set it in "
        "the recipe's [env.*] table to pin it (the profile wins over the file)",
    ]
    # ~/.nccl.conf of the home directory NCCL uses
    conf.rename(tmp_path / ".nccl.conf")
    _, notes, detail = effective_findings(tmp_path, record, (), {}, home=tmp_path)
    assert detail == f"0 servers, launcher none, {tmp_path / '.nccl.conf'}" and len(notes) == 2
