"""The effective environment of the served process: profile, launcher, NCCL's files (B38, B44)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from envforge.env.profile.effective import (
    ETC_NCCL_CONF,
    EffectiveVariable,
    effective_environment,
    engine_of,
    nccl_conf_paths,
    parse_nccl_conf,
    read_nccl_confs,
    recipe_servers,
    served_launcher,
)
from envforge.recipe.launchers import SGLANG_0_5_9

# B38's [env.pcie] and B44's, and the nccl.conf as container images write it (B44).
B38_PROFILE = {
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "CUDA_MODULE_LOADING": "EAGER",
    "NCCL_CUMEM_ENABLE": "0",
    "NCCL_NVLS_ENABLE": "0",
}
B44_PROFILE = {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"}
B44_CONF = (
    "# as container images write it (aws/deep-learning-containers Dockerfile: echo ... >> /etc/nccl.conf)\n"
    "NCCL_SOCKET_IFNAME=^docker0\nNCCL_P2P_DISABLE=1\nNCCL_BUFFSIZE=128K\nNCCL_MAX_NCHANNELS=32\n"
)
SYMM = ("-m", "sglang.launch_server", "--model-path", "m", "--enable-symm-mem")


def test_parse_as_nccl_reads_lines() -> None:
    assert parse_nccl_conf(B44_CONF) == {
        "NCCL_SOCKET_IFNAME": "^docker0",
        "NCCL_P2P_DISABLE": "1",
        "NCCL_BUFFSIZE": "128K",
        "NCCL_MAX_NCHANNELS": "32",
    }
    # the first line wins; the value is verbatim (spaces, '=' and '\r' kept); no '=': skipped; '#' only at column 0
    assert parse_nccl_conf("A=1\nA=2\nB= x \r\nC==eth0\nnoequals\n #D=1\n#E=1\n=F\n") == {
        "A": "1",
        "B": " x \r",
        "C": "=eth0",
        " #D": "1",
    }
    assert parse_nccl_conf("N=" + "v" * 2000) == {"N": "v" * 1023}


def test_conf_paths_follow_nccl_conf_file_else_home_then_etc(tmp_path: Path) -> None:
    assert nccl_conf_paths({"NCCL_CONF_FILE": str(tmp_path / "x.conf")}, home=tmp_path) == (
        tmp_path / "x.conf",
        ETC_NCCL_CONF,
    )
    assert nccl_conf_paths({"NCCL_CONF_FILE": ""}, home=tmp_path) == (tmp_path / ".nccl.conf", ETC_NCCL_CONF)
    assert nccl_conf_paths({}, home=tmp_path) == (tmp_path / ".nccl.conf", ETC_NCCL_CONF)


def test_home_is_the_password_databases_not_dollar_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # NCCL does not read $HOME (getpwuid(getuid())->pw_dir)
    assert nccl_conf_paths({})[0] == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".nccl.conf"


def test_a_fifo_or_directory_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    assert read_nccl_confs([tmp_path / "fifo", tmp_path / "dir", tmp_path / "absent"]) == ()


def test_b44_conf_values_appear_with_their_file_and_the_environment_wins(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text(B44_CONF)
    eff = effective_environment(B44_PROFILE, (), {"NCCL_CONF_FILE": str(conf)})
    src = f"nccl.conf {conf}"
    assert eff.variables == (
        EffectiveVariable("NCCL_BUFFSIZE", "131072", "profile", "131072"),
        EffectiveVariable("NCCL_CONF_FILE", str(conf), "environment"),
        EffectiveVariable("NCCL_MAX_NCHANNELS", "2", "profile", "2"),
        EffectiveVariable("NCCL_P2P_DISABLE", "1", src),
        EffectiveVariable("NCCL_SOCKET_IFNAME", "^docker0", src),
    )
    assert [v.name for v in eff.conf_only()] == ["NCCL_P2P_DISABLE", "NCCL_SOCKET_IFNAME"]
    assert eff.overrides("pcie") == []  # NCCL's setenv(.., 0): a file never beats the profile's value
    assert [c.path for c in eff.conf_files] == [conf]
    assert eff.conf_digest() is not None and eff.conf_digest().startswith("sha256:")


def test_home_file_first_then_etc(tmp_path: Path) -> None:
    (tmp_path / ".nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    etc = tmp_path / "etc-nccl.conf"
    etc.write_text("NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\n")
    eff = effective_environment({}, (), {}, conf_paths=[tmp_path / ".nccl.conf", etc])
    assert eff.sources() == {
        "NCCL_DEBUG": f"nccl.conf {tmp_path / '.nccl.conf'}",
        "NCCL_IB_DISABLE": f"nccl.conf {etc}",
    }
    assert eff.values() == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "1"}


def test_a_profile_naming_nccl_conf_file_points_nccl_at_it(tmp_path: Path) -> None:
    conf = tmp_path / "p.conf"
    conf.write_text("NCCL_ALGO=Ring\n")
    eff = effective_environment({"NCCL_CONF_FILE": str(conf)}, (), {}, home=tmp_path)
    assert eff.sources()["NCCL_ALGO"] == f"nccl.conf {conf}"


def test_b38_the_launcher_overwrites_the_profile_with_its_flag_as_source(tmp_path: Path) -> None:
    eff = effective_environment(B38_PROFILE, SYMM, {}, launcher=SGLANG_0_5_9, conf_paths=[])
    assert eff.values() == {
        "CUDA_DEVICE_MAX_CONNECTIONS": "8",
        "CUDA_MODULE_LOADING": "AUTO",
        "CUTE_DSL_LOG_LEVEL": "30",
        "CUTE_DSL_LOG_TO_CONSOLE": "1",
        "NCCL_CUMEM_ENABLE": "1",
        "NCCL_NVLS_ENABLE": "1",
        "TRTLLM_ENABLE_PDL": "1",
    }
    assert eff.sources()["NCCL_CUMEM_ENABLE"] == "launcher sglang-0.5.9 (--enable-symm-mem)"
    assert eff.sources()["CUDA_DEVICE_MAX_CONNECTIONS"] == "launcher sglang-0.5.9"
    assert eff.overrides("pcie") == [
        "CUDA_DEVICE_MAX_CONNECTIONS=8 from launcher sglang-0.5.9 overrides the env profile 'pcie' "
        "(CUDA_DEVICE_MAX_CONNECTIONS=1)",
        "CUDA_MODULE_LOADING=AUTO from launcher sglang-0.5.9 overrides the env profile 'pcie' (CUDA_MODULE_LOADING=EAGER)",
        "NCCL_CUMEM_ENABLE=1 from launcher sglang-0.5.9 (--enable-symm-mem) overrides the env profile 'pcie' "
        "(NCCL_CUMEM_ENABLE=0)",
        "NCCL_NVLS_ENABLE=1 from launcher sglang-0.5.9 (--enable-symm-mem) overrides the env profile 'pcie' "
        "(NCCL_NVLS_ENABLE=0)",
    ]
    base = effective_environment(B38_PROFILE, SYMM[:-1], {}, launcher=SGLANG_0_5_9, conf_paths=[])
    assert base.sources()["NCCL_CUMEM_ENABLE"] == "profile"  # set: the if-unset write does not fire
    assert [line.split("=")[0] for line in base.overrides("pcie")] == [
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_MODULE_LOADING",
    ]


def test_a_per_run_value_is_none_and_only_shown_when_the_profile_sets_it() -> None:
    eff = effective_environment({"SGLANG_RUN_ID": "mine"}, (), {}, launcher=SGLANG_0_5_9, conf_paths=[])
    (rid,) = [v for v in eff.variables if v.name == "SGLANG_RUN_ID"]
    assert (rid.value, rid.source, rid.overrides_profile) == (None, "launcher sglang-0.5.9", True)
    assert eff.overrides(None)[-1] == (
        "SGLANG_RUN_ID=<per run> from launcher sglang-0.5.9 overrides the env profile 'default' (SGLANG_RUN_ID=mine)"
    )
    assert "SGLANG_RUN_ID" not in effective_environment({}, (), {}, launcher=SGLANG_0_5_9, conf_paths=[]).values()


def test_server_env_over_caller_over_profile_and_tracked_caller_names() -> None:
    eff = effective_environment(
        {"NCCL_ALGO": "Ring", "X": "p"},
        (),
        {"NCCL_ALGO": "Tree", "HOME": "/h", "HF_TOKEN": "s", "CUDA_VISIBLE_DEVICES": "0"},
        server_env={"X": "s", "MY_TOKEN": "t"},
        conf_paths=[],
    )
    assert eff.values() == {"CUDA_VISIBLE_DEVICES": "0", "MY_TOKEN": "<redacted>", "NCCL_ALGO": "Tree", "X": "s"}
    assert eff.sources() == {
        "CUDA_VISIBLE_DEVICES": "environment",
        "MY_TOKEN": "server env",
        "NCCL_ALGO": "environment",
        "X": "server env",
    }


def test_engine_and_launcher_from_argv_and_the_installed_version(tmp_path: Path) -> None:
    assert engine_of(["-m", "sglang.launch_server"]) == "sglang"
    assert engine_of(["stub.py"], api="sglang") == "sglang"
    assert engine_of(["-m", "vllm.entrypoints.openai.api_server"], api="vllm") is None
    assert served_launcher(tmp_path, ["-m", "sglang.launch_server"]) == (None, None)  # not installed
    dist = tmp_path / "sglang-0.5.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n")
    assert served_launcher(tmp_path, ["-m", "sglang.launch_server"]) == (SGLANG_0_5_9, None)
    dist.rename(tmp_path / "sglang-0.5.10.dist-info")
    (tmp_path / "sglang-0.5.10.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.10\n"
    )
    assert served_launcher(tmp_path, ["-m", "sglang.launch_server"]) == (None, "sglang 0.5.10")


def test_recipe_servers_from_the_verify_table() -> None:
    verify = {
        "smoke": {
            "api": "sglang",
            "servers": [
                {"name": "symm-mem", "args": ["-m", "sglang.launch_server", "--enable-symm-mem"], "env": {"A": "1"}},
                {"name": "bad", "args": "not a list"},
            ],
        }
    }
    (s,) = recipe_servers(verify)
    assert (s.name, s.args, dict(s.env), s.api) == (
        "symm-mem",
        ("-m", "sglang.launch_server", "--enable-symm-mem"),
        {"A": "1"},
        "sglang",
    )
    assert recipe_servers({}) == ()
