"""``envforge sbom``: the CycloneDX 1.6 SBOM of a built environment (issue 31), validated with
cyclonedx-python-lib's own JSON validator against the CycloneDX 1.6 schema.

The quickstart environment is built by the real ``envforge build quickstart``
(tests/support/verify_envs.build_quickstart: real sglang 0.5.9 and flashinfer-python 0.6.4 wheels,
the four SM120 patchsets applied).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from tests.support.verify_envs import build_quickstart, lock_text, make_wheel

from envforge.cli import main
from envforge.env.sbom import environment_sbom
from envforge.lock.model import read_lock

ENV = "quickstart-default"


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with ``envs/quickstart-default`` built by the real ``envforge build quickstart``."""
    return build_quickstart(tmp_path_factory.mktemp("sbom").resolve() / "proj")


def sbom_of(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["sbom", ENV, "--project", str(project), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def site_packages(project: Path) -> Path:
    return next((project / "envs" / ENV).resolve().glob("lib/python3*/site-packages"))


def props(component: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component.get("properties", [])}


@pytest.mark.slow
def test_the_quickstart_sbom_validates_and_lists_every_distribution_and_patch(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "sbom.cdx.json"
    code, out, err = sbom_of(quickstart, capsys, "-o", str(out_file))
    assert (code, out) == (0, "")
    assert err == (
        f"wrote {out_file}: CycloneDX 1.6 (JSON), 2 components of {ENV} g0001\n"
        "  patched flashinfer-python 0.6.4: flashinfer-sm120-trtllm-comm\n"
        "  patched sglang 0.5.9: kimik25-eagle3-delegation, sm120-flashinfer-allreduce-fusion, "
        "sm120-torch-symm-mem\n"
    )
    text = out_file.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None  # cyclonedx's own validator
    bom = json.loads(text)
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.6")
    assert (bom["metadata"]["component"]["name"], bom["metadata"]["component"]["version"]) == (ENV, "g0001")

    lock = read_lock(site_packages(quickstart) / ".envforge" / "pylock.toml")
    locked = {p.name: p for p in lock.packages}
    by_name = {c["name"]: c for c in bom["components"]}
    assert sorted(by_name) == ["flashinfer-python", "sglang"]  # every installed distribution
    for name, c in by_name.items():
        assert c["version"] == locked[name].version
        assert c["purl"] == f"pkg:pypi/{name}@{locked[name].version}"
        assert [h["content"] for h in c["hashes"]] == [w.sha256 for w in locked[name].wheels]
        assert props(c)["envforge:index"] == locked[name].index == "https://pypi.org/simple"
        assert "envforge:local-version-label" not in props(c)  # PyPI's builds carry none

    patches = {name: sorted(p["resolves"][0]["id"] for p in c["pedigree"]["patches"]) for name, c in by_name.items()}
    assert patches == {
        "flashinfer-python": ["flashinfer-sm120-trtllm-comm"],
        "sglang": ["kimik25-eagle3-delegation", "sm120-flashinfer-allreduce-fusion", "sm120-torch-symm-mem"],
    }
    (fi,) = by_name["flashinfer-python"]["pedigree"]["patches"]
    assert fi["type"] == "unofficial"
    assert fi["resolves"][0]["description"] == (
        "flashinfer's all-reduce fusion kernels are not built for SM120 before 0.6.17"
    )
    digest = props(by_name["flashinfer-python"])["envforge:patchset:flashinfer-sm120-trtllm-comm"]
    assert digest == next(p["digest"] for p in lock.envforge["patchsets"] if p["id"] == "flashinfer-sm120-trtllm-comm")
    assert main(["patches", "export", "flashinfer-sm120-trtllm-comm", ENV, "--project", str(quickstart)]) == 0
    exported = capsys.readouterr()[0]
    assert fi["diff"]["text"]["content"] == exported  # the diff `patches export` writes
    assert fi["diff"]["text"]["content"].splitlines()[6:8] == [
        "-        supported_major_versions=[9, 10]",
        "+        supported_major_versions=[9, 10, 12]",
    ]

    # the same generation gives the same bytes (stdout form included)
    code, out, _ = sbom_of(quickstart, capsys)
    assert (code, out) == (0, text)


@pytest.mark.slow
def test_a_patchset_changed_since_the_build_is_refused(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(quickstart / "patchsets", project / "patchsets")
    (project / "recipes").mkdir()
    path = project / "patchsets" / "sm120-torch-symm-mem.toml"
    path.write_text(path.read_text() + "\n# edited after the build\n")
    code = main(["sbom", str(quickstart / "envs" / ENV), "--project", str(project)])
    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith(f"error: {path} is not the patchset the environment was patched with (applied sha256:")
    assert "hint: restore the patchset file, or rebuild the environment with it (`envforge build`)" in err


def test_a_local_version_label_and_another_index_are_recorded(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "wheels", "demo-kernels", "2.0+cu130")
    sp = tmp_path / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(sp)
    text = lock_text([("demo-kernels", "2.0+cu130", wheel)], {"schema": 1})
    text = text.replace(
        'version = "2.0+cu130"\n', 'version = "2.0+cu130"\nindex = "https://download.example/whl/cu130"\n'
    )
    (sp / ".envforge").mkdir()
    (sp / ".envforge" / "pylock.toml").write_text(text)
    sbom = environment_sbom(sp, tmp_path / "patchsets", name="demo-default")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom.text) is None
    (c,) = json.loads(sbom.text)["components"]
    assert (c["name"], c["version"]) == ("demo-kernels", "2.0+cu130")
    assert c["purl"] == ("pkg:pypi/demo-kernels@2.0%2Bcu130?repository_url=https://download.example/whl/cu130")
    assert props(c) == {
        "envforge:index": "https://download.example/whl/cu130",
        "envforge:local-version-label": "cu130",
        "envforge:locked": "true",
    }
    assert "pedigree" not in c
    assert (sbom.generation, sbom.patched) == ("unknown", ())


def test_an_environment_envforge_did_not_build_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "venv"
    (env / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    code = main(["sbom", str(env)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "hint: build the environment with `envforge build RECIPE` (it keeps the lock it was built from)" in err


@pytest.mark.slow
def test_a_distribution_whose_metadata_cannot_be_read_fails_the_sbom(
    quickstart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: a METADATA missing, a FIFO or renamed gave "0 components" (rc 0); now exit 2 naming it."""
    sp = site_packages(quickstart)
    meta = next(sp.glob("sglang-*.dist-info")) / "METADATA"
    meta.rename(meta.with_name("METADATA.moved"))
    try:
        code, out, err = sbom_of(quickstart, capsys)
    finally:
        meta.with_name("METADATA.moved").rename(meta)
    assert (code, out) == (2, "")
    shown = quickstart / "envs" / ENV / sp.relative_to((quickstart / "envs" / ENV).resolve())
    assert err.splitlines()[0] == (
        f"error: the SBOM would leave out 1 distribution of {shown} whose METADATA cannot be "
        f"read: {meta.parent.name} (no METADATA)"
    )
    assert err.splitlines()[1].startswith("  hint: rebuild the environment: `envforge build quickstart")


@pytest.mark.slow
def test_a_damaged_generation_record_is_said_not_silently_unknown(
    quickstart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: the SBOM of a generation whose generation.json is damaged said "unknown", exit 0, no word."""
    record = site_packages(quickstart) / ".envforge" / "generation.json"
    kept = record.read_bytes()
    out_file = tmp_path / "s.json"
    try:
        record.write_text('{"recipe": "quickstart"')  # cut short
        code, out, err = sbom_of(quickstart, capsys, "-o", str(out_file))
    finally:
        record.write_bytes(kept)
    assert (code, out) == (0, "")
    shown = quickstart / "envs" / ENV / record.relative_to((quickstart / "envs" / ENV).resolve())
    assert err.splitlines()[0].startswith(f"warning: generation record {shown} is not JSON (")
    assert err.splitlines()[0].endswith('): the SBOM names the generation "unknown"')
    assert err.splitlines()[1].startswith(f"wrote {out_file}: CycloneDX 1.6 (JSON), 2 components of {ENV} unknown")
