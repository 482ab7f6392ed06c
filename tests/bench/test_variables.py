"""What a benchmarked server runs with, and where each value came from (B20, B38, B44)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from envforge.bench.config import Prompt, ServerConfig, SmokeConfig
from envforge.bench.run import BenchPlan, _prepare
from envforge.bench.variables import PER_RUN, effective_env, recorded_values, server_environment
from envforge.env.fingerprint import Fingerprint
from envforge.recipe.launchers import SGLANG_0_5_9
from tests.conftest import cached_wheel

B38_PROFILE = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "CUDA_MODULE_LOADING": "EAGER",
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_NVLS_ENABLE": "0",
}
SYMM_ARGS = ("-m", "sglang.launch_server", "--model-path", "{model}", "--port", "{port}", "--enable-symm-mem")


def test_the_caller_wins_over_the_profile_and_the_server_env_over_both() -> None:
    assert effective_env(
        {"NCCL_MAX_NCHANNELS": "2", "NCCL_ALGO": "Ring"},
        {"NCCL_MAX_NCHANNELS": "32"},
        {"NCCL_ALGO": "Tree"},
        conf_paths=[],
    ) == {"NCCL_ALGO": "Tree", "NCCL_MAX_NCHANNELS": "32"}


def test_symm_mem_server_records_the_launchers_value_with_its_source() -> None:
    eff = server_environment(B38_PROFILE, {}, None, SYMM_ARGS, launcher=SGLANG_0_5_9, conf_paths=[])
    values, sources = recorded_values(eff), eff.sources()
    assert (values["NCCL_CUMEM_ENABLE"], sources["NCCL_CUMEM_ENABLE"]) == (
        "1",
        "launcher sglang-0.5.9 (--enable-symm-mem)",
    )
    assert (values["CUDA_DEVICE_MAX_CONNECTIONS"], sources["CUDA_DEVICE_MAX_CONNECTIONS"]) == (
        "8",
        "launcher sglang-0.5.9",
    )
    assert (
        recorded_values(server_environment({"SGLANG_RUN_ID": "x"}, {}, None, (), launcher=SGLANG_0_5_9, conf_paths=[]))[
            "SGLANG_RUN_ID"
        ]
        == PER_RUN
        == "<per run>"
    )


def test_nccl_conf_values_are_recorded_with_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_SOCKET_IFNAME=^docker0\nNCCL_MAX_NCHANNELS=32\n")
    eff = server_environment({"NCCL_MAX_NCHANNELS": "2"}, {"NCCL_CONF_FILE": str(conf)})
    assert recorded_values(eff) == {
        "NCCL_CONF_FILE": str(conf),
        "NCCL_MAX_NCHANNELS": "2",
        "NCCL_SOCKET_IFNAME": "^docker0",
    }
    assert eff.sources()["NCCL_SOCKET_IFNAME"] == f"nccl.conf {conf}"


@pytest.fixture
def sglang_site(tmp_path: Path) -> Path:
    sp = tmp_path / "site-packages"
    (sp / "sglang-0.5.9.dist-info").mkdir(parents=True)
    with zipfile.ZipFile(cached_wheel("sglang", "0.5.9")) as zf:
        (sp / "sglang-0.5.9.dist-info" / "METADATA").write_bytes(zf.read("sglang-0.5.9.dist-info/METADATA"))
    return sp


def test_a_bench_server_with_enable_symm_mem_records_launcher_values_and_warns(
    sglang_site: Path, tmp_path: Path
) -> None:
    server = ServerConfig("symm-mem", SYMM_ARGS)
    cfg = SmokeConfig(
        model="m", api="sglang", servers=(server,), prompts=(Prompt(0, "hi"),), prompts_digest="sha256:00", port=38611
    )
    plan = BenchPlan(
        cfg,
        Path(sys.executable),
        {"NCCL_CONF_FILE": str(tmp_path / "absent.conf")},
        tmp_path,
        Fingerprint(None, None, None, None),
        profile_name="pcie",
        profile_env=B38_PROFILE,
        site_packages=sglang_site,
    )
    said: list[str] = []
    started, warnings = _prepare(plan, server, said.append)
    assert started.env["NCCL_CUMEM_ENABLE"] == "1"
    assert started.sources["NCCL_CUMEM_ENABLE"] == "launcher sglang-0.5.9 (--enable-symm-mem)"
    assert started.sources["NCCL_CONF_FILE"] == "environment"
    result = started.session.result(started.launch.argv, started.env, started.sources)
    assert result.as_dict()["env_sources"]["NCCL_NVLS_ENABLE"] == "launcher sglang-0.5.9 (--enable-symm-mem)"
    assert warnings == [
        "server 'symm-mem': CUDA_DEVICE_MAX_CONNECTIONS=8 from launcher sglang-0.5.9 overrides the env profile "
        "'pcie' (CUDA_DEVICE_MAX_CONNECTIONS=1)",
        "server 'symm-mem': CUDA_MODULE_LOADING=AUTO from launcher sglang-0.5.9 overrides the env profile 'pcie' "
        "(CUDA_MODULE_LOADING=EAGER)",
        "server 'symm-mem': NCCL_CUMEM_ENABLE=1 from launcher sglang-0.5.9 (--enable-symm-mem) overrides the env "
        "profile 'pcie' (NCCL_CUMEM_ENABLE=0)",
        "server 'symm-mem': NCCL_NVLS_ENABLE=1 from launcher sglang-0.5.9 (--enable-symm-mem) overrides the env "
        "profile 'pcie' (NCCL_NVLS_ENABLE=0)",
    ]
    assert said == [f"warning: {w}" for w in warnings]
