"""No patch is "applied" unless the patched module can run (field case B29), on real sglang code:
the patched source must compile and pyflakes must find no undefined name the release lacks."""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from pathlib import Path

from tests.support.patching_trees import PATCHSETS, slim_tree

from envforge.patching import apply, load_patchset, load_patchsets, plan
from envforge.patching.manifest import manifest_path
from envforge.patching.soundness import introduced_problems

KIMI = "sglang/srt/models/kimi_k25.py"
GUARD = "sglang/srt/layers/communicator.py"
SIZES = "sglang/srt/distributed/device_communicators/all_reduce_utils.py"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_patchset(directory: Path, pid: str, operation: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{pid}.toml"
    path.write_text(
        textwrap.dedent(f"""\
        [patchset]
        id = "{pid}"
        distribution = "sglang"
        versions = ">=0.5.9,<0.5.10"
        reason = "test"

        [[operation]]
        """)
        + textwrap.dedent(operation)
    )
    return path


def delegation(directory: Path, pid: str, delegate_class: str) -> Path:
    return write_patchset(
        directory,
        pid,
        f"""\
        kind = "add-delegating-methods"
        file = "{KIMI}"
        class = "KimiK25ForConditionalGeneration"
        attribute = "language_model"
        methods = ["get_embed_and_head", "get_model_config_for_expert_location"]
        signatures-from = {{ file = "sglang/srt/models/deepseek_v2.py", class = "{delegate_class}" }}
        """,
    )


def test_a_classmethod_delegate_stays_a_classmethod_on_sglang_059(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    ps = load_patchset(delegation(tmp_path / "ps", "kimi-expert-location", "DeepseekV3ForCausalLM"))
    report = apply(sp, [ps])
    assert [(r.state, r.message) for r in report.results] == [
        (
            "applied",
            "added get_embed_and_head, get_model_config_for_expert_location (classmethod) to "
            "KimiK25ForConditionalGeneration",
        )
    ]
    text = (sp / KIMI).read_text()
    assert (
        "    @classmethod\n"
        "    def get_model_config_for_expert_location(cls, config):\n"
        "        return DeepseekV3ForCausalLM.get_model_config_for_expert_location(config)\n"
    ) in text
    cls = next(
        n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "KimiK25ForConditionalGeneration"
    )
    method = next(
        n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "get_model_config_for_expert_location"
    )
    assert [ast.unparse(d) for d in method.decorator_list] == ["classmethod"]
    assert [r.state for r in apply(sp, [ps]).results] == ["already-applied"]


def test_a_delegate_class_the_module_does_not_define_drifts_with_the_checkers_finding(tmp_path: Path) -> None:
    """kimi_k25.py imports DeepseekV3ForCausalLM, not DeepseekV2ForCausalLM: the classmethod written
    to call it would raise NameError, so nothing is written."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    before = sha(sp / KIMI)
    ps = load_patchset(delegation(tmp_path / "ps", "kimi-v2", "DeepseekV2ForCausalLM"))
    report = apply(sp, [ps])
    (result,) = report.results
    assert result.state == "drifted" and not report.ok
    assert re.fullmatch(
        r"kimi-v2: sglang/srt/models/kimi_k25\.py: the patched file would not run: pyflakes: line \d+: "
        r"undefined name 'DeepseekV2ForCausalLM'; nothing written; installed sglang 0\.5\.9\. Next step: in "
        r"kimi-v2\.toml, change the operation so the patched module compiles and defines every name it uses "
        r"\(or narrow `versions` to exclude this release\)",
        result.message,
    )
    assert sha(sp / KIMI) == before and not manifest_path(sp).exists()


def test_a_guard_operand_whose_name_is_never_defined_drifts(tmp_path: Path) -> None:
    """The field guard patchset without its `define` and `import`: `_is_sm120_supported` undefined."""
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    before = sha(sp / GUARD)
    ps = load_patchset(
        write_patchset(
            tmp_path / "ps",
            "guard-only",
            f"""\
        kind = "add-guard-operand"
        file = "{GUARD}"
        function = "apply_flashinfer_allreduce_fusion"
        anchor = "_is_sm90_supported or _is_sm100_supported"
        operand = "_is_sm120_supported"
        """,
        )
    )
    (result,) = plan(sp, [ps]).results
    assert result.state == "drifted"
    assert re.search(
        r": the patched file would not run: pyflakes: line \d+: undefined name '_is_sm120_supported'; "
        r"nothing written;",
        result.message,
    )
    apply(sp, [ps])
    assert sha(sp / GUARD) == before
    # the field patchset, with its define and import, passes the same check
    full = load_patchsets(PATCHSETS, ["sm120-flashinfer-allreduce-fusion"])
    assert [r.state for r in plan(sp, full).results if r.file == GUARD] == []  # refused: requirement unmet
    assert [
        r.state
        for r in plan(slim_tree(tmp_path / "sp2", ("sglang", "0.5.9"), ("flashinfer-python", "0.6.17")), full).results
    ] == ["applied"]


def test_a_value_that_parses_but_does_not_compile_drifts(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    ps = load_patchset(
        write_patchset(
            tmp_path / "ps",
            "await-value",
            f"""\
        kind = "add-dict-entry"
        file = "{SIZES}"
        target = "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"
        key = 12
        value = "await sizes()"
        """,
        )
    )
    (result,) = plan(sp, [ps]).results
    assert result.state == "drifted"
    assert re.search(
        r": the patched file would not run: does not compile: 'await' outside function \(line \d+\); "
        r"nothing written;",
        result.message,
    )


def test_only_findings_the_edit_introduces_count() -> None:
    before = b"def f():\n    return missing\n"
    assert introduced_problems("m.py", before, before + b"\ndef g():\n    return missing\n") == []
    assert introduced_problems("m.py", before, before + b"\ndef g(cls):\n    return self.x\n") == [
        "pyflakes: line 5: undefined name 'self'"
    ]
    assert introduced_problems("m.py", before, b"def f(:\n") == ["does not compile: invalid syntax (line 1)"]
