"""verify static names the env profile's engine variables the installed sglang does not read as
written (field case B60), in a real environment built with the real sglang 0.5.9 wheel; a reviewed
name is accepted with [[verify.accept]]."""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
import os
from pathlib import Path

import pytest
import uv

from envforge.env.layout import Environment
from envforge.recipe.project import Project
from envforge.verify import VerifyOptions, verify
from envforge.verify.report import as_junit
from tests.conftest import cached_wheel
from tests.support.verify_envs import PCIE, make_env
from tests.support.pythons import python_for

PY312 = str(python_for("3.12"))
pytestmark = pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")

B60 = {"SGLANG_ENABLE_JIT_DEEPGEM": "0", "SGLANG_USE_JIT_ALL_REDUCE": "1", "SGLANG_ENABLE_SPEC_V2": "ture"}


def test_b60_profile_variables_are_findings_and_a_reviewed_one_is_accepted(tmp_path: Path) -> None:
    wheels = [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")]
    env = make_env(tmp_path / "proj", wheels, uv=uv.find_uv_bin(), python=PY312, profile=("pcie", {**PCIE, **B60}))
    root = env.path.parent.parent
    options = VerifyOptions(levels=("static",), base_env=dict(os.environ))  # type: ignore[call-arg]
    report = verify(Environment(env.path), Project(root), options)
    found = [(f.kind, f.subject, f.actual.split(";")[0]) for f in report.findings if f.kind == "engine-variable"]
    assert found == [
        (
            "engine-variable",
            "SGLANG_ENABLE_JIT_DEEPGEM",
            "sglang 0.5.9 reads no variable SGLANG_ENABLE_JIT_DEEPGEM "
            "(neither its registry srt/environ.py, 209 names, nor its "
            "code), so it is ignored without a word",
        ),
        (
            "engine-variable",
            "SGLANG_ENABLE_SPEC_V2",
            '"ture" is not a boolean to it (true/1/yes/y, false/0/no/n, any case)',
        ),
        (
            "engine-variable",
            "SGLANG_USE_JIT_ALL_REDUCE",
            "sglang 0.5.9 reads no variable SGLANG_USE_JIT_ALL_REDUCE "
            "(neither its registry srt/environ.py, 209 names, nor its "
            "code), so it is ignored without a word",
        ),
    ]
    assert all(
        f.level == "static" and '[[verify.accept]] kind = "engine-variable"' in f.fix
        for f in report.findings
        if f.kind == "engine-variable"
    )
    recipe = root / "recipes" / "quickstart.toml"
    expires = (datetime.date.today() + datetime.timedelta(days=30)).isoformat()
    recipe.write_text(
        recipe.read_text() + f'\n[[verify.accept]]\nkind = "engine-variable"\n'
        f'subject = "SGLANG_USE_JIT_ALL_REDUCE"\nreason = "read by our launcher wrapper"\n'
        f"expires = {expires}\n"
    )
    report = verify(Environment(env.path), Project(root), options)
    assert [f.subject for f in report.findings if f.kind == "engine-variable"] == [
        "SGLANG_ENABLE_JIT_DEEPGEM",
        "SGLANG_ENABLE_SPEC_V2",
    ]
    assert [(a.finding.subject, a.reason) for a in report.accepted] == [
        ("SGLANG_USE_JIT_ALL_REDUCE", "read by our launcher wrapper")
    ]
    # every finding of the check accepted: the check is ok, and the JUnit report agrees with the exit code
    for name in ("SGLANG_ENABLE_JIT_DEEPGEM", "SGLANG_ENABLE_SPEC_V2"):
        recipe.write_text(
            recipe.read_text() + f'\n[[verify.accept]]\nkind = "engine-variable"\nsubject = "{name}"\n'
            f'reason = "reviewed"\nexpires = {expires}\n'
        )
    report = verify(Environment(env.path), Project(root), options)
    profile = next(c for c in report.checks if c.name == "env-profile")
    assert (report.findings, profile.status, profile.detail) == ((), "ok", "6 variables; every finding accepted")
    suite = ET.fromstring(as_junit(report))
    assert suite.get("failures") == "0"
    assert [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None] == []


def test_importlib_metadata_is_asked_in_the_environments_interpreter(tmp_path: Path) -> None:
    """A dist-info of the same name earlier on sys.path (a PYTHONPATH directory) is what
    importlib.metadata.version reports: a real probe in the environment's interpreter."""
    wheels = [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")]
    env = make_env(tmp_path / "proj", wheels, uv=uv.find_uv_bin(), python=PY312)
    root = env.path.parent.parent
    options = VerifyOptions(levels=("static",), base_env=dict(os.environ))  # type: ignore[call-arg]
    clean = verify(Environment(env.path), Project(root), options)
    check = next(c for c in clean.checks if c.name == "metadata")
    assert (check.status, [f for f in clean.findings if f.kind == "metadata-mismatch"]) == ("ok", [])
    other = tmp_path / "other"
    (other / "sglang-0.5.8.dist-info").mkdir(parents=True)
    (other / "sglang-0.5.8.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.8\n")
    shadowed = verify(
        Environment(env.path),
        Project(root),
        VerifyOptions(levels=("static",), base_env={**os.environ, "PYTHONPATH": str(other)}),
    )  # type: ignore[call-arg]
    found = [(f.subject, f.actual, f.fix) for f in shadowed.findings if f.kind == "metadata-mismatch"]
    assert found == [
        (
            "sglang 0.5.9",
            f"it reads sglang 0.5.8 from {other / 'sglang-0.5.8.dist-info'}",
            "remove the other copy's directory from PYTHONPATH or the .pth that adds it (the first dist-info "
            "on sys.path wins), or rebuild (`envforge build quickstart --variant default`)",
        )
    ]
