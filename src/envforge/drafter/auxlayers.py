"""Verdicts on a drafter's auxiliary layers: what each engine version captures for it, and which
engine feeds it other hidden states than the file asks for.

A ``config.json`` does not say in which convention its ids were written: SpecForge writes
``[1, 29, 57]`` for a 61-layer target and means the inputs of layers 2, 30, 58 (SGLang adds 1);
a drafter trained in the capture-before convention writes ``[2, 30, 58]`` for the same layers
(sglang#25454). The engines decide it in code (:mod:`envforge.drafter.engines`), and so does this
module, in this order:

1. **The layers it was trained on**, when the recipe states them (``[verify.drafter]
   trained-aux-layers``, ``envforge drafter check --trained-aux-layers``): every engine whose
   default code path captures other layers is named.
2. Else **what the newest SGLang and vLLM make of this file** (:func:`reference`): the captures of
   the newest version of each engine whose default code path reads ids from the file (both
   upstreams have moved to read the file this way; an engine that reads no ids from it is no
   evidence). When they agree, an engine version that captures other layers is named, with both
   captures; when they disagree, the file is ambiguous and the finding asks for the trained layers.

Only the default code path of each engine version (:attr:`EngineFacts.reads` ``[0]``) is judged;
the others are shown by ``drafter check``. Without a target config nothing is judged: the layers
depend on the target's class and layer count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.drafter.engines import ENGINE_FACTS, Capture, EngineFacts, captures

__all__ = ["AuxProblem", "AuxVerdict", "Reference", "aux_verdict", "reference"]


@dataclass(frozen=True, slots=True)
class AuxProblem:
    """One engine version (``engine``: :attr:`EngineFacts.label`) that does not feed the drafter
    the layers it asks for: ``expected`` / ``actual`` in words, ``fix`` what to do."""

    kind: str
    engine: str
    expected: str
    actual: str
    fix: str


@dataclass(frozen=True, slots=True)
class AuxVerdict:
    """Every engine version's captures (default path first per engine) and the problems of the
    engines judged. ``basis``: what the captures were judged against, in words ("" when not judged)."""

    captures: tuple[Capture, ...]
    basis: str
    problems: tuple[AuxProblem, ...]


def _layers(layers: Sequence[int]) -> str:
    return ", ".join(map(str, layers)) if layers else "none"


@dataclass(frozen=True, slots=True)
class Reference:
    """What the verdict judges against: ``layers`` (None: nothing to judge by), ``basis`` in words,
    ``ambiguous``: the newest engines read the file's ids as different layers."""

    layers: tuple[int, ...] | None
    basis: str
    ambiguous: bool = False


def reference(
    config: Mapping[str, Any], architecture: str | None, layers: int, patched: Mapping[str, str] | None = None
) -> Reference:
    """What the newest version of each engine makes of ``config`` on this target (module
    docstring, 2.): the layers the engines that read ids from the file agree on; not ambiguous and
    no layers when none reads ids; ambiguous when they disagree."""
    newest: dict[str, EngineFacts] = {}
    for f in ENGINE_FACTS:
        newest[f.engine] = f
    readers = [
        c
        for f in newest.values()
        for c in captures(f, config, architecture, layers, patched)[:1]
        if c.key is not None and c.layers is not None
    ]
    if not readers:
        return Reference(None, "no engine reads ids from this file")
    if len({c.layers for c in readers}) > 1:
        return Reference(None, "; ".join(c.describe() for c in readers), ambiguous=True)
    names = " and ".join(c.engine for c in readers)
    return Reference(
        readers[0].layers,
        f"{names} read{'s' if len(readers) == 1 else ''} this file's ids as "
        f"the inputs of layers {_layers(readers[0].layers or ())}",
    )


def _with_ids(config: Mapping[str, Any], key: str, ids: list[int]) -> dict[str, Any]:
    out = dict(config)
    outer, _, inner = key.rpartition(".")
    if outer:
        nested = out.get(outer)
        out[outer] = {**(nested if isinstance(nested, Mapping) else {}), inner: ids}
    else:
        out[inner] = ids
    return out


def _fix(
    f: EngineFacts,
    config: Mapping[str, Any],
    architecture: str | None,
    layers: int,
    want: tuple[int, ...],
    patched: Mapping[str, str] | None,
) -> str:
    """Which ids, under the key ``f`` reads first, make it capture ``want`` (tried: ``want`` and
    ``want - 1``, the two conventions), checked with the same rules."""
    key = f.reads[0].keys[0]
    for ids in (list(want), [w - 1 for w in want]):
        if any(i < 0 for i in ids):
            continue
        if captures(f, _with_ids(config, key, ids), architecture, layers, patched)[0].layers == want:
            return (
                f"for {f.name}, set {key} to {ids} in the drafter's config.json (it captures "
                f"{_layers(want)} then); check other engines again after the change"
            )
    return f"serve it with an engine version that captures {_layers(want)}"


def aux_verdict(
    config: Mapping[str, Any],
    target: Mapping[str, Any] | None,
    *,
    engines: Sequence[EngineFacts] = ENGINE_FACTS,
    trained: Sequence[int] | None = None,
    patched: Mapping[str, str] | None = None,
) -> AuxVerdict:
    """What each engine version does with ``config``'s aux layers on ``target`` (a target
    ``config.json``; its ``text_config`` is read for multimodal models) and the problems of
    ``engines`` (module docstring). ``trained``: the layers (inputs of, 0-based) the drafter was
    trained on. ``patched``: as for :meth:`EngineFacts.hook`."""
    architecture, layers = _target(target)
    shown = tuple(c for f in ENGINE_FACTS for c in captures(f, config, architecture, layers, patched))
    if layers is None:
        return AuxVerdict(shown, "", ())
    ref = (
        Reference(tuple(sorted(set(trained))), f"trained on the inputs of layers {_layers(trained)}")
        if trained
        else reference(config, architecture, layers, patched)
    )
    if ref.layers and max(ref.layers) > layers:  # layers the target lacks: the range check names them
        ref = Reference(None, f"{ref.basis}, which the target ({layers} layers) does not have")
    want, basis = ref.layers, ref.basis
    problems = []
    for f in engines:
        c = captures(f, config, architecture, layers, patched)[0]
        top = layers if f.engine == "vllm" else layers - 1  # vLLM also captures the last layer's output
        outside = [L for L in c.layers or () if not 0 <= L <= top]
        if outside:
            problems.append(
                AuxProblem(
                    "target-layer-count",
                    f.label,
                    f"layers 0..{top} (the target has {layers})",
                    c.describe(),
                    f"{f.name} captures nothing for {_layers(outside)}: the drafter "
                    "gets fewer hidden states than it fuses; pick ids the target has",
                )
            )
        elif c.layers is None and c.reason.startswith("the target class"):
            problems.append(
                AuxProblem(
                    "eagle3-aux-layers",
                    f.label,
                    "EAGLE-3 starts",
                    c.describe(),
                    "apply a patchset that gives the target class the hook (add-delegating-"
                    "methods to its language model) or use an engine version that has it",
                )
            )
        elif c.layers is None and c.reason.startswith("start-up fails"):
            problems.append(
                AuxProblem(
                    "eagle3-aux-layers",
                    f.label,
                    "EAGLE-3 starts",
                    c.describe(),
                    _fix(f, config, architecture, layers, want, patched)
                    if want
                    else f"write a list of integer layer ids under {c.key}, or remove it (the engine "
                    "then uses its default)"
                    if c.key
                    else f"write the layer ids under {f.reads[0].keys[0]}: this target class's hook has no default",
                )
            )
        elif c.layers is None:
            continue  # the target's class is needed (a config without architectures): not judged
        elif want is None and ref.ambiguous:
            problems.append(
                AuxProblem(
                    "eagle3-aux-layers",
                    f.label,
                    "one reading of the ids",
                    f"{c.describe()}; the newest engines disagree: {basis}",
                    "state the layers the drafter was trained on ([verify.drafter] "
                    "trained-aux-layers, or --trained-aux-layers)",
                )
            )
        elif want is not None and c.layers != want:
            problems.append(
                AuxProblem(
                    "eagle3-aux-layers",
                    f.label,
                    f"the inputs of layers {_layers(want)} ({basis})",
                    c.describe(),
                    _fix(f, config, architecture, layers, want, patched),
                )
            )
    return AuxVerdict(shown, basis, tuple(problems))


def _target(target: Mapping[str, Any] | None) -> tuple[str | None, int | None]:
    """The target's architecture (first of ``architectures``) and decoder layer count
    (``num_hidden_layers``, of ``text_config`` when it has one)."""
    if target is None:
        return None, None
    archs = target.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    text = target.get("text_config")
    source = text if isinstance(text, Mapping) and "num_hidden_layers" in text else target
    n = source.get("num_hidden_layers")
    return arch, n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None
