"""What a drafter is: its config, its tensors (from safetensors headers), and the EAGLE-3 checks.

No network here: :mod:`envforge.drafter.hub` fills :class:`Drafter` from the hub, this module
reads local files and judges the shapes.

EAGLE-3 layout, as SGLang and vLLM load it (:mod:`envforge.drafter.layout` follows their
``llama_eagle3.py`` loaders) and SpecForge trains it (``specforge/modeling/draft/llama3_eagle.py``):

===================  =================================  ==========================================
tensor               shape                              meaning
===================  =================================  ==========================================
``d2t``              int64 ``[draft_vocab_size]``       offsets: target id = ``i + d2t[i]``
``t2d``              bool ``[vocab_size]``              which target tokens are in the draft vocab
                                                        (both loaders skip it)
``fc.weight``        ``[hidden, 3 * target_hidden]``    fuses three target hidden states
``lm_head.weight``   ``[draft_vocab_size, hidden]``     draft-vocabulary logits
``midlayer.*``       one decoder layer                  attention input is ``2 * hidden``
``norm.weight``      ``[hidden]``                       final RMSNorm
===================  =================================  ==========================================

``target_hidden`` is ``config.target_hidden_size`` when present, else ``config.hidden_size``
(SGLang ``LlamaModel.__init__``). The auxiliary layer ids come from
``config.eagle_config.eagle_aux_hidden_state_layer_ids`` (SGLang ``model_runner.py``) or the
top-level ``eagle_aux_hidden_state_layer_ids`` (vLLM); which target layers each engine version
then captures is :mod:`envforge.drafter.engines`'s (read from the engines' code).
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_bytes
from envforge.drafter.architecture import architecture_problems
from envforge.drafter.layout import loader_problems
from envforge.drafter.weights import TensorInfo

__all__ = [
    "Drafter",
    "DrafterIssue",
    "TensorInfo",
    "aux_layer_ids",
    "eagle3_issues",
    "load_json",
    "target_issues",
    "target_text_config",
]

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


@dataclass(frozen=True, slots=True)
class DrafterIssue:
    """One finding about a drafter, in verify's shape (docs/design.md decision 6).

    ``kind`` is a stable id (``eagle3-d2t``, ``target-hidden-size``, ``vocab-mapping``, ...);
    ``subject`` names the drafter and tensor or key; ``expected`` / ``actual`` are short values;
    ``fix`` says what to do; ``engines`` the serving engines whose loaders the issue concerns
    (:data:`envforge.drafter.layout.ENGINES`; empty when it is not about loading).
    """

    kind: str
    subject: str
    expected: str
    actual: str
    fix: str
    engines: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Drafter:
    """A drafter as read from headers and configs: no weights are loaded.

    ``source`` is the path or ``repo@sha`` it came from; ``repo`` / ``revision`` are set for hub
    drafters and for fetched ones (from the fetch record); ``config`` is ``config.json``;
    ``files`` the weight files read; ``pickle_files`` weights that were not read (pickle);
    ``modified``: files of a fetched directory that differ from its fetch record (B59: then
    ``repo`` / ``revision`` are None, the content is not the pinned commit's).
    """

    source: str
    repo: str | None
    revision: str | None
    config: Mapping[str, Any]
    tensors: tuple[TensorInfo, ...]
    files: tuple[str, ...]
    pickle_files: tuple[str, ...] = ()
    local_dir: Path | None = None
    modified: tuple[str, ...] = ()

    @property
    def architecture(self) -> str:
        """First entry of ``config.architectures``, or ``"unknown"``."""
        archs = self.config.get("architectures")
        return str(archs[0]) if isinstance(archs, list) and archs else "unknown"

    @property
    def aux_layers(self) -> list[Any] | None:
        """The auxiliary target layer ids, as :func:`aux_layer_ids` reads them from the config."""
        return aux_layer_ids(self.config)

    def tensor(self, name: str) -> TensorInfo | None:
        """The tensor called ``name`` or ``<prefix>.name`` (``model.fc.weight``), or ``None``."""
        for t in self.tensors:
            if t.name == name or t.name.endswith("." + name):
                return t
        return None

    def key(self, name: str) -> Any:
        """A config value, or ``None``."""
        return self.config.get(name)


def load_json(path: Path) -> dict[str, Any]:
    """Read a JSON object from ``path``; :class:`InputError` naming the file when it is not one."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the read below for ever
        raise InputError(f"{path}: not a regular file", hint="point at the real config.json")
    data = parse_json(read_bytes(path, what="JSON file", limit=SMALL_LIMIT * 16), label=str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def aux_layer_ids(config: Mapping[str, Any]) -> list[Any] | None:
    """The auxiliary target layer ids the drafter reads, as written (any JSON value), or ``None``
    when the config names none; :func:`eagle3_issues` judges them."""
    eagle = config.get("eagle_config")
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    ids = ids if ids is not None else config.get("eagle_aux_hidden_state_layer_ids")
    return ids if ids is None or isinstance(ids, list) else [ids]


def _layer_ids_ok(ids: list[Any]) -> bool:
    return len(ids) == 3 and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)


def _int(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def target_text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language-model part of a target config (``text_config`` of multimodal models like K2.5)."""
    text = config.get("text_config")
    return text if isinstance(text, Mapping) and "hidden_size" in text else config


def _issue(d: Drafter, kind: str, subject: str, expected: object, actual: object, fix: str) -> DrafterIssue:
    return DrafterIssue(kind, f"{d.source}: {subject}", str(expected), str(actual), fix)


def eagle3_issues(d: Drafter) -> tuple[DrafterIssue, ...]:
    """Whether the drafter loads as trained in the serving engines: the model class each builds
    for ``config.architectures`` (:mod:`envforge.drafter.architecture`, first), then that class's
    loader (:mod:`envforge.drafter.layout`: SGLang 0.5.9's and vLLM's ``llama_eagle3.py``), plus
    ``d2t``'s dtype and the auxiliary layer ids.

    Empty when it loads in both. Each issue names the engines it concerns in ``engines``.
    """
    if d.pickle_files and not d.tensors:
        return (
            _issue(
                d,
                "eagle3-weights",
                "weights",
                "safetensors",
                ", ".join(d.pickle_files),
                "pickle weights cannot be inspected; use a safetensors revision",
            ),
        )
    hidden, vocab = _int(d.config, "hidden_size"), _int(d.config, "vocab_size")
    missing = [k for k, v in (("hidden_size", hidden), ("vocab_size", vocab)) if v is None]
    if hidden is None or vocab is None:
        return (
            _issue(
                d,
                "eagle3-config",
                "config.json",
                "hidden_size and vocab_size",
                f"missing {', '.join(missing)}",
                "use the drafter's own config.json",
            ),
        )
    problems = architecture_problems(d.config, d.tensors) + loader_problems(d.config, d.tensors)
    checks = [
        DrafterIssue(p.kind, f"{d.source}: {p.subject}", p.expected, p.actual, p.fix, p.engines) for p in problems
    ]
    d2t = d.tensor("d2t")
    if d2t is not None and d2t.dtype not in ("I64", "I32"):
        checks.append(
            _issue(
                d,
                "eagle3-d2t",
                "d2t dtype",
                "I64 or I32",
                d2t.dtype,
                "d2t holds integer offsets (target id = i + d2t[i])",
            )
        )
    ids = aux_layer_ids(d.config)
    if ids is not None and not _layer_ids_ok(ids):
        checks.append(
            _issue(
                d,
                "eagle3-aux-layers",
                "eagle_aux_hidden_state_layer_ids",
                "three non-negative layer ids",
                ids,
                "EAGLE-3 fuses exactly three target hidden states",
            )
        )
    return tuple(checks)


def target_issues(d: Drafter, target: Mapping[str, Any], target_name: str) -> tuple[DrafterIssue, ...]:
    """Compatibility of drafter ``d`` with the target model config ``target``.

    Checks: target ``hidden_size`` against the drafter's ``target_hidden_size`` (or
    ``hidden_size``) and ``fc.weight``'s input width; target ``vocab_size`` against the drafter's
    ``vocab_size`` and ``t2d``. The auxiliary layers, which depend on the engine version, are
    :mod:`envforge.drafter.auxlayers`'s.
    """
    t = target_text_config(target)
    out: list[DrafterIssue] = []
    t_hidden, t_vocab = _int(t, "hidden_size"), _int(t, "vocab_size")
    d_hidden = _int(d.config, "target_hidden_size") or _int(d.config, "hidden_size")
    fc = d.tensor("fc.weight")
    if t_hidden is not None and (d_hidden != t_hidden or (fc and fc.shape[-1:] != (3 * t_hidden,))):
        actual = f"drafter hidden {d_hidden}" + (f", fc.weight {fc.describe()}" if fc else "")
        out.append(
            _issue(
                d,
                "target-hidden-size",
                f"hidden_size vs {target_name}",
                t_hidden,
                actual,
                "this drafter was trained for a target with another hidden size",
            )
        )
    t2d = d.tensor("t2d")
    d_vocab = _int(d.config, "vocab_size")
    if t_vocab is not None and (d_vocab != t_vocab or (t2d and t2d.shape != (t_vocab,))):
        actual = f"drafter vocab_size {d_vocab}" + (f", t2d {t2d.describe()}" if t2d else "")
        out.append(
            _issue(
                d,
                "target-vocab-size",
                f"vocab_size vs {target_name}",
                t_vocab,
                actual,
                "drafter and target must share one tokenizer",
            )
        )
    return tuple(out)
