"""Run an engine's own code, read from its real wheel, on generated drafter configs: the oracle of
tests/drafter/test_engines.py.

Nothing here models an engine. The functions below find a function or a statement in the wheel's
source with ``ast``, compile exactly that code and run it on stand-in objects that carry only the
attributes the code reads (a config namespace, a model whose ``layers_to_capture`` the code sets).
What the engine's code computes is the answer envforge's data (``envforge.drafter.engines``) must
give.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, List, Optional


def parse(path: Path) -> ast.Module:
    """The module at ``path`` (a byte-order mark, as some sglang files have, is dropped)."""
    return ast.parse(path.read_bytes().decode("utf-8-sig"), filename=str(path))


@dataclass(frozen=True, eq=False)
class CaptureHook:
    """A class's ``set_eagle3_layers_to_capture``: where it is defined (``file``, ``line``,
    ``owner``: the class that defines it, maybe a base class) and its code."""

    file: str
    line: int
    owner: str
    function: ast.FunctionDef


def _classes(models: Path) -> tuple[dict[str, tuple[str, ast.ClassDef]], dict[str, str]]:
    classes: dict[str, tuple[str, ast.ClassDef]] = {}
    entries: dict[str, str] = {}
    for f in sorted(models.glob("*.py")):
        for node in parse(f).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (f.name, node))
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets
            ):
                value = node.value
                elts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                for e in elts:
                    if isinstance(e, ast.Name):
                        entries[e.id] = f.name
    return classes, entries


def _hook(classes: Mapping[str, tuple[str, ast.ClassDef]], name: str, seen: tuple[str, ...] = ()) -> CaptureHook | None:
    if name not in classes or name in seen:
        return None
    file, cls = classes[name]
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "set_eagle3_layers_to_capture":
            return CaptureHook(file, node.lineno, name, node)
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        found = _hook(classes, base_name, seen + (name,)) if base_name else None
        if found:
            return found
    return None


@functools.lru_cache(maxsize=8)
def sglang_capture_hooks(site: Path) -> dict[str, CaptureHook | None]:
    """Every architecture sglang's model registry serves (the names in each ``srt/models`` module's
    ``EntryClass``) -> the ``set_eagle3_layers_to_capture`` its class has (own or inherited from a
    base class named in the same package), or None when it has none."""
    classes, entries = _classes(site / "sglang" / "srt" / "models")
    return {name: _hook(classes, name) for name in sorted(entries)}


def language_model_class(site: Path, module: str, cls: str) -> str | None:
    """The class ``cls.__init__`` in ``srt/models/<module>`` assigns to ``self.language_model``
    (``self.language_model = DeepseekV3ForCausalLM(...)``), or None."""
    for node in ast.walk(parse(site / "sglang" / "srt" / "models" / module)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for a in ast.walk(node):
                if (
                    isinstance(a, ast.Assign)
                    and any(ast.unparse(t) == "self.language_model" for t in a.targets)
                    and isinstance(a.value, ast.Call)
                    and isinstance(a.value.func, ast.Name)
                ):
                    return a.value.func.id
    return None


@functools.lru_cache(maxsize=256)
def _compiled(hook: CaptureHook) -> Any:
    return compile(ast.Module(body=[hook.function], type_ignores=[]), hook.file, "exec")


class _Inner:
    """A model's inner decoder stack: ``layers`` and, where the outer hook calls it, its own hook."""

    def __init__(self, n: int) -> None:
        self.layers = [SimpleNamespace() for _ in range(n)]
        self.layers_to_capture: Any = None
        self.delegated: Any = "not called"

    def set_eagle3_layers_to_capture(self, ids: Any) -> None:
        self.delegated = ids
        self.layers_to_capture = ids


#: What :func:`run_capture_hook` returns for a hook that hands the ids on unchanged.
DELEGATED = "delegated"


def run_capture_hook(hook: CaptureHook, ids: list[int] | None, layers: int) -> Any:
    """What the real hook sets as the layers whose input the target captures, for drafter ids
    ``ids`` (None: the config names none) and a target of ``layers`` decoder layers: a list, or
    :data:`DELEGATED` when the hook passes ``ids`` on unchanged to its language model."""
    last_rank = SimpleNamespace(is_last_rank=True)
    namespace: dict[str, Any] = {
        "Optional": Optional,
        "List": List,
        "get_pp_group": lambda: last_rank,
        "get_parallel": lambda: SimpleNamespace(pp_group=last_rank),
    }
    exec(_compiled(hook), namespace)  # noqa: S102 - the engine's own code is the oracle
    config = SimpleNamespace(num_hidden_layers=layers, text_config=SimpleNamespace(num_hidden_layers=layers))
    outer = SimpleNamespace(
        pp_group=last_rank,
        config=config,
        model=_Inner(layers),
        language_model=_Inner(layers),
        layers=_Inner(layers).layers,
        layers_to_capture=None,
    )
    namespace["set_eagle3_layers_to_capture"](outer, ids)
    if outer.layers_to_capture is not None:  # a hook on the decoder stack itself (qwen3_5.py)
        return list(outer.layers_to_capture)
    for inner in (outer.model, outer.language_model):
        if inner.delegated is ids:
            return DELEGATED
        if inner.layers_to_capture is not None:
            return list(inner.layers_to_capture)
    return None


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _config(drafter: Mapping[str, Any]) -> SimpleNamespace:
    """A drafter config.json as transformers' ``PretrainedConfig`` exposes it: each top-level key an
    attribute, nested objects plain dicts."""
    return SimpleNamespace(**dict(drafter))


def sglang_read_ids(path: Path, drafter: Mapping[str, Any]) -> tuple[Any, Any]:
    """Run the real ``try`` block of sglang's model runner that reads the drafter's aux layer ids
    (in ``path``: the statement whose code names ``eagle_aux_hidden_state_layer_ids``) ->
    ``(use_aux_hidden_state, layer ids)`` as the runner keeps them."""
    tree = parse(path)
    block = next(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Try)
        and "eagle_aux_hidden_state_layer_ids" in ast.unparse(n)
        and "draft_model_config.hf_config" in ast.unparse(n)
    )
    target = SimpleNamespace(eagle_use_aux_hidden_state=True, eagle_aux_hidden_state_layer_ids="unset")
    names = {
        ast.unparse(a.targets[0]).split(".")[0]
        for a in ast.walk(block)
        if isinstance(a, ast.Assign) and isinstance(a.targets[0], ast.Attribute)
    }
    holder = names.pop()  # "self" (0.5.9) or "config" (0.5.20+)
    fn = ast.Module(
        body=[
            ast.FunctionDef(
                name="read",
                args=ast.arguments(
                    posonlyargs=[],
                    args=[ast.arg(holder), ast.arg("draft_model_config")],
                    kwonlyargs=[],
                    kw_defaults=[],
                    defaults=[],
                ),
                body=[block],
                decorator_list=[],
                returns=None,
                type_params=[],
            )
        ],
        type_ignores=[],
    )
    ast.fix_missing_locations(fn)
    namespace: dict[str, Any] = {}
    exec(compile(fn, str(path), "exec"), namespace)  # noqa: S102
    namespace["read"](target, SimpleNamespace(hf_config=_config(drafter)))
    return target.eagle_use_aux_hidden_state, target.eagle_aux_hidden_state_layer_ids


def vllm_read_ids(path: Path, function: str, drafter: Mapping[str, Any]) -> Any:
    """Run vLLM's own ``function`` (``_get_eagle3_aux_layers_from_config`` of the V1 runner, a
    method, or ``get_eagle3_aux_layers_from_config`` of Model Runner V2) from ``path`` on a
    speculative config whose draft model config is ``drafter`` -> the tuple of ids or None."""
    fn = _function(parse(path), function)
    fn.decorator_list = []
    namespace: dict[str, Any] = {"SpeculativeConfig": object}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    spec = SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=_config(drafter)))
    if fn.args.args and fn.args.args[0].arg == "self":
        return namespace[function](SimpleNamespace(speculative_config=spec))
    return namespace[function](spec)


def generated_id_lists(layers: int) -> Iterator[list[int] | None]:
    """Aux layer ids an engine may be handed for a target of ``layers`` layers: none, the SpecForge
    and the capture-before conventions of the default, edges, short and unsorted lists."""
    n = layers
    yield None
    yield []
    for ids in (
        [1, n // 2 - 1, n - 4],
        [2, n // 2, n - 3],
        [0, 1, 2],
        [1],
        [True, 2, 3],
        [n - 3, 2, n // 2],
        [3, n // 3, n - 2],
        [1, 2, n - 1],
        [2, n - 1, n],
        [0, n // 2, n],
    ):
        yield ids
