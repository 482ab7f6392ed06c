"""Patchset files: the four field patchsets load; format errors name file, line and key."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests.support.patching_trees import PATCHSETS

from envforge.patching import PatchsetError, load_patchset, load_patchsets
from envforge.patching.operations import AddGuardOperand

MINIMAL = """\
[patchset]
id = "demo"
distribution = "Demo_Pkg"
versions = ">=1.0,<2"
reason = "because"

[[operation]]
kind = "add-list-element"
file = "demo/m.py"
function = "f"
call = "c"
keyword = "k"
element = "1"
"""


def write(d: Path, name: str, text: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.toml"
    p.write_text(text)
    return p


def test_field_patchsets_load_in_dependency_order() -> None:
    patchsets = load_patchsets(PATCHSETS)
    assert [p.id for p in patchsets] == [
        "flashinfer-sm120-trtllm-comm",
        "kimik25-eagle3-delegation",
        "sm120-flashinfer-allreduce-fusion",
        "sm120-flashinfer-allreduce-fusion-layer-boundary",
        "sm120-torch-symm-mem",
        "vllm-cpu-version-name",
    ]
    fusion = patchsets[2]
    assert fusion.digest == "sha256:" + hashlib.sha256(fusion.path.read_bytes()).hexdigest()
    assert fusion.activation == "--enable-flashinfer-allreduce-fusion"
    assert fusion.versions == ">=0.5.8,<0.5.21" and fusion.specifier.contains("0.5.20")
    assert [r.text for r in fusion.requires] == ["patchset:flashinfer-sm120-trtllm-comm | flashinfer-python>=0.6.17"]
    assert fusion.files == ("sglang/srt/layers/communicator.py",)
    assert isinstance(fusion.operations[0], AddGuardOperand)
    assert fusion.operations[0].import_ == "from sglang.srt.utils import is_sm120_supported"


def test_named_patchsets_are_ordered_by_requirement() -> None:
    ids = [
        p.id for p in load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion", "flashinfer-sm120-trtllm-comm"])
    ]
    assert ids == ["flashinfer-sm120-trtllm-comm", "sm120-flashinfer-allreduce-fusion"]


def test_minimal_patchset(tmp_path: Path) -> None:
    p = load_patchset(write(tmp_path, "demo", MINIMAL))
    assert (p.id, p.distribution, p.reason, p.requires, p.activation, p.upstream_prefix) == (
        "demo",
        "demo-pkg",
        "because",
        (),
        None,
        "",
    )


def test_unknown_patchset_id(tmp_path: Path) -> None:
    write(tmp_path, "demo", MINIMAL)
    with pytest.raises(PatchsetError) as exc:
        load_patchsets(tmp_path, ["dmeo"])
    assert str(exc.value) == f"no patchset named 'dmeo' in {tmp_path}\n  hint: known patchsets: demo"


def test_problems_name_line_and_key(tmp_path: Path) -> None:
    text = (
        MINIMAL.replace('versions = ">=1.0,<2"', 'versions = "1.0"')
        .replace('reason = "because"', 'reason = "because"\nactivaton = "--x"')
        .replace('keyword = "k"\n', "")
    )
    path = write(tmp_path, "demo", text)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value) == (
        f"patchset {path} is invalid (2 problems):\n"
        f"  {path}:4: patchset.versions: '1.0' is not a PEP 440 version specifier (e.g. '>=0.5.8,<0.5.11')\n"
        f"  {path}:6: patchset.activaton: unknown key; did you mean 'activation'?\n"
        "  hint: see docs/patchsets.md for the patchset format"
    )
    path = write(tmp_path, "demo", MINIMAL.replace('keyword = "k"\n', ""))
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value).splitlines()[1] == f"  {path}:7: operation[0].keyword: missing required key"
    two = MINIMAL + '\n[[operation]]\nkind = "add-dict-entry"\nfile = "m.py"\ntarget = "X"\nkey = 1\nvalue = "[1,"\n'
    path = write(tmp_path, "demo", two)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert (
        str(exc.value).splitlines()[1]
        == f"  {path}:20: operation[1].value: not a Python expression: '[' was never closed"
    )


def test_bad_requirement_and_id_mismatch(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        'reason = "because"', 'reason = "because"\n\n[[patchset.requires]]\nany-of = ["patchset:", "not a req!"]'
    )
    path = write(tmp_path, "demo", text)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value).splitlines()[1:3] == [
        f"  {path}:8: patchset.requires[0].any-of[0]: empty patchset id after 'patchset:'",
        f"  {path}:8: patchset.requires[0].any-of[1]: 'not a req!' is neither 'patchset:<id>' nor a PEP 508 requirement",
    ]
    path = write(tmp_path, "other", MINIMAL)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value) == (
        f"{path}: patchset.id 'demo' differs from the file name\n  hint: name the file demo.toml or set id = \"other\""
    )


def test_requirement_cycle(tmp_path: Path) -> None:
    def with_req(pid: str, other: str) -> str:
        return MINIMAL.replace('"demo"', f'"{pid}"').replace(
            'reason = "because"', f'reason = "because"\n\n[[patchset.requires]]\nany-of = ["patchset:{other}"]'
        )

    write(tmp_path, "a", with_req("a", "b"))
    write(tmp_path, "b", with_req("b", "a"))
    with pytest.raises(PatchsetError) as exc:
        load_patchsets(tmp_path)
    assert (
        str(exc.value)
        == "patchset requirements form a cycle: a -> b -> a\n  hint: remove one of the 'patchset:' requirements"
    )


def test_not_toml(tmp_path: Path) -> None:
    path = write(tmp_path, "demo", "[patchset\n")
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value).startswith(f"{path}: not valid TOML: ")


@pytest.mark.parametrize("bad", ["../outside/victim.py", "/etc/passwd", "demo/../../x.py", "demo\\m.py", "C:/m.py", ""])
def test_file_paths_must_stay_inside_site_packages(tmp_path: Path, bad: str) -> None:
    text = MINIMAL.replace('file = "demo/m.py"', f"file = '{bad}'")
    path = write(tmp_path, "demo", text)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value).splitlines()[1] == (
        f"  {path}:9: operation[0].file: '{bad}' must be a relative POSIX path inside site-packages "
        "(no '..' parts, not absolute), e.g. 'sglang/srt/server_args.py'"
    )


def test_signatures_from_file_must_stay_inside_site_packages(tmp_path: Path) -> None:
    text = MINIMAL.split("[[operation]]")[0] + (
        '[[operation]]\nkind = "add-delegating-methods"\nfile = "demo/m.py"\nclass = "C"\nattribute = "a"\n'
        'methods = ["m"]\nsignatures-from = { file = "../x/d.py", class = "D" }\n'
    )
    path = write(tmp_path, "demo", text)
    with pytest.raises(PatchsetError) as exc:
        load_patchset(path)
    assert str(exc.value).splitlines()[1] == (
        f"  {path}:13: operation[0].signatures-from.file: '../x/d.py' must be a relative POSIX path "
        "inside site-packages (no '..' parts, not absolute), e.g. 'sglang/srt/server_args.py'"
    )
