"""The bench engines: one :class:`~envforge.bench.engines.base.Engine` per serving engine, by name.

``api`` in ``[verify.smoke]`` and ``--api`` name an engine of :data:`ENGINES`; :func:`engine`
returns it. Adding one (TensorRT-LLM, any OpenAI-compatible server) is one new module here with an
:class:`Engine` subclass plus its entry in ``_ALL`` below; docs/bench.md ("Adding an engine") walks
through it. The recipe schema lists the same names (a test keeps the two equal).
"""

from __future__ import annotations

from envforge.bench.engines.base import Engine
from envforge.bench.engines.openai import OpenAIEngine
from envforge.bench.engines.openai_chat import OpenAIChatEngine
from envforge.bench.engines.sglang import SGLangEngine
from envforge.bench.engines.vllm import VLLMEngine
from envforge.core.errors import InputError

__all__ = ["ENGINES", "Engine", "engine"]

_ALL: tuple[Engine, ...] = (SGLangEngine(), OpenAIEngine(), VLLMEngine(), OpenAIChatEngine())
_BY_NAME: dict[str, Engine] = {e.name: e for e in _ALL}

#: The registry's engine names, in registry order: ``("sglang", "openai", "vllm", "openai-chat")``.
ENGINES: tuple[str, ...] = tuple(_BY_NAME)


def engine(name: str) -> Engine:
    """The engine named ``name``.

    :raises InputError: no engine of that name (the message lists :data:`ENGINES`).
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise InputError(f"unknown bench engine '{name}'", hint=f"api is one of {', '.join(ENGINES)}") from None
