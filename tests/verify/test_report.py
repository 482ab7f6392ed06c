"""``envforge verify`` end to end: text, the JSON envelope (schema envforge.verify/1), JUnit XML, exit codes."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import uv
from tests.conftest import cached_wheel
from tests.support.verify_envs import BuiltEnv, make_env
from tests.support.pythons import python_for

from envforge.cli import main
from envforge.cli.output import Ui
from envforge.core.kinds import REGISTRY
from envforge.env.fingerprint import Fingerprint
from envforge.verify.findings import Check, Finding, VerifyReport
from envforge.verify.report import as_junit, as_text, summary_line

PY312 = str(python_for("3.12"))
pytestmark = pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")


@pytest.fixture
def env(tmp_path: Path) -> BuiltEnv:
    wheels = [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")]
    return make_env(tmp_path / "proj", wheels, uv=uv.find_uv_bin(), python=PY312)


def cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("envforge.cli.Ui", lambda json_mode=False: Ui(json_mode=json_mode, out=out, err=err))
    code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_json_envelope_and_junit_of_a_clean_environment(
    env: BuiltEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    junit = tmp_path / "verify.xml"
    code, out, _ = cli(
        ["verify", "--project", str(env.path.parent.parent), "--json", "--junit", str(junit)], monkeypatch
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "envforge.verify/1"
    data = doc["data"]
    assert list(data) == [
        "report-schema",
        "environment",
        "levels",
        "clean",
        "exit-code",
        "fingerprint",
        "target",
        "findings",
        "accepted",
        "checks",
        "notes",
        "measurements",
        "elapsed-s",
    ]
    assert (data["report-schema"], data["clean"], data["levels"], data["findings"]) == (1, True, ["static"], [])
    assert data["fingerprint"]["env_profile"] == "pcie"
    suite = ET.parse(junit).getroot()
    assert (suite.tag, suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("testsuite", "15", "0", "3")


def test_findings_exit_1_with_text_and_junit_failures(
    env: BuiltEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env.site_packages / "envforge-env.pth").unlink()
    junit = tmp_path / "verify.xml"
    code, out, _ = cli(
        ["verify", str(env.path), "--project", str(env.path.parent.parent), "--junit", str(junit)], monkeypatch
    )
    assert code == 1
    lines = out.splitlines()
    assert lines[:4] == [
        "env-profile: envforge-env.pth",
        "    expected: the startup hook envforge wrote",
        "    actual:   missing (the env profile 'pcie' is recorded as installed)",
        "    fix:      reinstall the locked profile: `envforge apply-patches quickstart-default` "
        "(or `envforge build quickstart --variant default`)",
    ]
    assert lines[-1].startswith("verify static: 4 findings (12 checks ran, 3 skipped) in ")
    case = next(c for c in ET.parse(junit).getroot() if c.get("name") == "env-profile")
    assert [f.get("message") for f in case.findall("failure")] == [
        "env-profile: envforge-env.pth",
        "env-profile: ENVFORGE_PROFILE_PROBE",
        "env-profile: NCCL_BUFFSIZE",
        "env-profile: NCCL_MAX_NCHANNELS",
    ]
    # The fix works as written: apply-patches reinstalls the profile the environment's lock records.
    assert cli(["apply-patches", "quickstart-default", "--project", str(env.path.parent.parent)], monkeypatch)[0] == 0
    assert cli(["verify", str(env.path), "--project", str(env.path.parent.parent)], monkeypatch)[0] == 0


def test_input_errors_exit_2(env: BuiltEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    project = str(env.path.parent.parent)
    code, _, err = cli(["verify", "nope", "--project", project], monkeypatch)
    assert code == 2
    assert err.splitlines()[0] == f"error: no environment 'nope' in {env.path.parent}"
    code, _, err = cli(["verify", "--project", project, "--level", "static,smoke"], monkeypatch)
    assert (code, err.splitlines()[0]) == (2, "error: unknown verify level smoke")
    (env.site_packages / ".envforge" / "pylock.toml").unlink()
    code, _, err = cli(["verify", "--project", project], monkeypatch)
    assert code == 2
    assert err.splitlines()[0] == (
        f"error: {env.site_packages / '.envforge' / 'pylock.toml'} does not exist: the environment records no lock"
    )


def test_broken_interpreter_exits_3(env: BuiltEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env.python.unlink()
    env.python.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    env.python.chmod(0o755)
    code, _, err = cli(["verify", "--project", str(env.path.parent.parent)], monkeypatch)
    assert code == 3
    assert err.splitlines()[0] == "error: probe exited with status 1"
    assert "Fatal Python error: init_fs_encoding" in err


def test_every_kind_is_grouped_under_a_check() -> None:
    """Every kind has a check whose JUnit case lists it, but the one of a level none of whose checks ran."""
    assert [k for k, v in REGISTRY.items() if not v.checks] == ["nothing-to-check"]


def test_junit_lists_each_finding_under_the_checks_of_its_kind_and_level() -> None:
    """The registry's checks group the failures: nccl-library under the gpu level's nccl case (not a static one),
    missing-file under both record and patched-files, every drafter-level finding under the drafter case."""
    fp = Fingerprint(lock_digest=None, patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    report = VerifyReport(
        environment="env",
        levels=("static", "gpu", "drafter"),
        fingerprint=fp,
        elapsed_s=0.5,
        findings=(
            Finding("nccl-library", "libnccl", "one libnccl in the process", "loaded: /a, /b", "fix", "gpu"),
            Finding("missing-file", "sglang 0.5.9: sglang/version.py", "present", "absent", "rebuild"),
            Finding("eagle3-d2t", "d: d2t", "x", "y", "z", "drafter"),
            Finding("nothing-to-check", "--level drafter", "a check", "none ran", "give it one", "drafter"),
        ),
        checks=(
            Check("record", "static", "findings"),
            Check("patched-files", "static", "findings"),
            Check("env-profile", "static", "ok"),
            Check("nccl", "gpu", "findings"),
            Check("drafter", "drafter", "findings"),
        ),
    )
    suite = ET.fromstring(as_junit(report))
    failures = {
        f"{c.get('classname')}/{c.get('name')}": [f.get("message") for f in c.findall("failure")]
        for c in suite.findall("testcase")
    }
    assert failures == {
        "verify.static/record": ["missing-file: sglang 0.5.9: sglang/version.py"],
        "verify.static/patched-files": ["missing-file: sglang 0.5.9: sglang/version.py"],
        "verify.static/env-profile": [],
        "verify.gpu/nccl": ["nccl-library: libnccl"],
        "verify.drafter/drafter": ["eagle3-d2t: d: d2t", "nothing-to-check: --level drafter"],
    }


def test_drafter_level_runs_the_recipes_drafter_table(env: BuiltEnv, tmp_path: Path) -> None:
    import os

    from tests.support.hub_server import eagle3_config, eagle3_files, running_hub

    from envforge.env.layout import Environment
    from envforge.recipe.project import Project
    from envforge.verify import VerifyOptions, verify

    root = env.path.parent.parent
    options = dict(levels=("drafter",), base_env=dict(os.environ), hub_cache=tmp_path / "hub-cache")
    skipped = verify(Environment(env.path), Project(root), VerifyOptions(**options))  # type: ignore[arg-type]
    assert [(c.name, c.status, c.detail) for c in skipped.checks] == [
        ("drafter", "skipped", "the recipe has no [verify.drafter] table")
    ]
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"hidden_size": 128, "vocab_size": 4096, "num_hidden_layers": 61}))
    with running_hub() as hub:
        sha = hub.add_commit("test-org/drafter-a", eagle3_files(eagle3_config()))
        recipe = root / "recipes" / "quickstart.toml"
        recipe.write_text(
            recipe.read_text() + f'\n[verify.drafter]\nrepo = "test-org/drafter-a"\n'
            f'revision = "{sha}"\ntarget-config = "{target}"\n'
        )
        report = verify(Environment(env.path), Project(root), VerifyOptions(**options, hub_endpoint=hub.url))  # type: ignore[arg-type]
        assert [c.status for c in report.checks] == ["findings"]
        assert {f.level for f in report.findings} == {"drafter"}
        assert "target-hidden-size" in [f.kind for f in report.findings]
        # B52: capture-before ids on a DeepSeek-V3 target; the lock installs sglang 0.5.9 only, so only it is judged
        capture_before = eagle3_config(aux=(2, 30, 58))
        sha = hub.add_commit("test-org/drafter-cb", eagle3_files(capture_before))
        deepseek = tmp_path / "deepseek.json"
        deepseek.write_text(
            json.dumps(
                {
                    "architectures": ["DeepseekV3ForCausalLM"],
                    "hidden_size": 64,
                    "vocab_size": 4096,
                    "num_hidden_layers": 61,
                }
            )
        )
        recipe.write_text(
            recipe.read_text().split("[verify.drafter]")[0] + f"[verify.drafter]\nrepo = "
            f'"test-org/drafter-cb"\nrevision = "{sha}"\ntarget-config = "{deepseek}"\n'
        )
        report = verify(Environment(env.path), Project(root), VerifyOptions(**options, hub_endpoint=hub.url))  # type: ignore[arg-type]
    assert [(f.kind, f.subject, f.expected, f.actual) for f in report.findings] == [
        (
            "eagle3-aux-layers",
            f"test-org/drafter-cb@{sha}: auxiliary layers (sglang-0.5.9)",
            "the inputs of layers 2, 30, 58 (sglang 0.5.23 reads this file's ids as the inputs of layers 2, 30, 58)",
            "sglang 0.5.9 captures the inputs of layers 3, 31, 59 (ids [2, 30, 58] from "
            "eagle_config.eagle_aux_hidden_state_layer_ids, + 1: sglang/srt/models/deepseek_v2.py:2963)",
        )
    ]


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA GPU")
def test_levels_default_to_the_recipes_verify_levels(env: BuiltEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    root = env.path.parent.parent
    recipe = root / "recipes" / "quickstart.toml"
    recipe.write_text(recipe.read_text() + '\n[verify]\nlevels = ["static", "gpu", "smoke"]\n')
    code, out, _ = cli(["verify", "--project", str(root), "--json"], monkeypatch)
    data = json.loads(out)["data"]
    assert (code, data["levels"]) == (0, ["static", "gpu"])
    assert data["checks"][-1] == {
        "name": "gpu",
        "level": "gpu",
        "status": "skipped",
        "detail": "no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)",
    }
    # The summary names only the level that ran checks, and the skipped one with why (B39 turn 3).
    code, out, _ = cli(["verify", "--project", str(root)], monkeypatch)
    last = out.splitlines()[-1]
    assert (code, last.split(" (")[0]) == (0, "verify static: clean")
    assert last.endswith(" s; skipped level gpu: no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)")
    # Asked for explicitly, a missing GPU is a finding: exit 1.
    code, out, _ = cli(["verify", "--project", str(root), "--level", "gpu", "--json"], monkeypatch)
    data = json.loads(out)["data"]
    assert (code, data["levels"], data["checks"][-1]["status"]) == (1, ["gpu"], "findings")
    assert data["findings"] == [
        {
            "kind": "no-gpu",
            "level": "gpu",
            "subject": "gpu level",
            "expected": "an NVIDIA GPU (the gpu level was asked for explicitly)",
            "actual": "no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)",
            "fix": "run `envforge verify --level gpu` on the GPU machine the recipe targets; here, leave out "
            "--level gpu (the recipe's default levels skip the gpu level without a GPU)",
        }
    ]


def test_static_report_names_driver_and_gpus_from_proc(env: BuiltEnv, tmp_path: Path) -> None:
    import os

    from envforge.env.layout import Environment
    from envforge.recipe.project import Project
    from envforge.verify import VerifyOptions, verify

    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia" / "gpus" / "0000:00:06.0").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue Oct  7 2025\nGCC version:  gcc 13.3.0\n"
    )
    (proc / "driver" / "nvidia" / "gpus" / "0000:00:06.0" / "information").write_text(
        "Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\n"
    )
    report = verify(
        Environment(env.path),
        Project(env.path.parent.parent),
        VerifyOptions(levels=("static",), base_env=dict(os.environ), proc=proc),
    )
    fp = report.fingerprint
    assert (fp.driver, fp.gpu, fp.gpu_count, fp.compute_capability) == ("580.159.04", "NVIDIA H200", 1, None)
    bare = verify(
        Environment(env.path),
        Project(env.path.parent.parent),
        VerifyOptions(levels=("static",), base_env=dict(os.environ), proc=tmp_path / "none"),
    )
    assert (bare.fingerprint.driver, bare.fingerprint.gpu) == (None, None)


def _summary_report(
    checks: tuple[Check, ...], findings: tuple[Finding, ...] = (), levels: tuple[str, ...] = ("static", "gpu")
) -> VerifyReport:
    fp = Fingerprint(lock_digest=None, patch_manifest_digest=None, env_profile=None, env_profile_digest=None)
    return VerifyReport(
        environment="env", levels=levels, fingerprint=fp, findings=findings, checks=checks, elapsed_s=0.5
    )


def test_summary_names_only_the_levels_that_ran_and_why_the_others_did_not() -> None:
    no_gpu = "no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)"
    report = _summary_report(
        (
            Check("record", "static", "ok"),
            Check("env-profile", "static", "skipped", "no env"),
            Check("gpu", "gpu", "skipped", no_gpu),
        )
    )
    assert as_text(report)[-1] == (
        f"verify static: clean (1 check ran, 2 skipped) in 0.5 s; skipped level gpu: {no_gpu}"
    )
    both = _summary_report((Check("record", "static", "ok"), Check("nccl", "gpu", "ok")))
    assert summary_line(both) == "verify static,gpu: clean (2 checks ran, 0 skipped) in 0.5 s"
    # A level with a finding ran, even when its checks were all skipped (a no-gpu finding).
    found = _summary_report(
        (Check("gpu", "gpu", "findings", no_gpu),),
        (Finding("no-gpu", "gpu level", "a GPU", no_gpu, "fix", "gpu"),),
        levels=("gpu",),
    )
    assert summary_line(found) == "verify gpu: 1 finding (1 check ran, 0 skipped) in 0.5 s"
    nothing = _summary_report(
        (
            Check("a", "static", "skipped", "x"),
            Check("b", "static", "skipped", "x"),
            Check("gpu", "gpu", "skipped", no_gpu),
        )
    )
    assert summary_line(nothing) == (
        "verify (no level ran): clean (0 checks ran, 3 skipped) in 0.5 s; "
        f"skipped level static: x; skipped level gpu: {no_gpu}"
    )
    empty = _summary_report((), levels=("drafter",))
    assert summary_line(empty) == (
        "verify (no level ran): clean (0 checks ran, 0 skipped) in 0.5 s; "
        "skipped level drafter: no check of this level applies"
    )
