"""What a bench engine is: how one serving engine is asked for a streamed completion and read back.

An :class:`Engine` is the only place that knows an engine's wire format and routes: the request
body, the parser of one streamed chunk, the readiness and cache-flush routes, whether the
``ignore_eos`` probe applies, and optionally a counters window read from the engine's metrics
endpoint around each measured repeat. Everything else in :mod:`envforge.bench` takes an
:class:`Engine` from the registry (:func:`envforge.bench.engines.engine`) and never compares names.

A chunk is whatever the server sent: a parser reads its fields with :func:`mapping_field`,
:func:`list_field` and :func:`count_field`, which raise :class:`MalformedChunk` (the request fails
with the reason) for a field of the wrong type, never ``TypeError``, ``AttributeError`` or
``OverflowError`` (issue 27: a malformed reply is a failed request, not a crash).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # annotations only: the registry stays light, the CLI reads it at start-up
    from envforge.bench.client import Endpoint, RequestOptions, Stream
    from envforge.bench.metrics import EngineWindow

__all__ = ["Engine", "MalformedChunk", "count_field", "json_type", "list_field", "mapping_field"]


class MalformedChunk(ValueError):
    """A streamed chunk the engine cannot read (the message says which field and what it is); the
    client fails the request with it."""


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type: ``"object"``, ``"array"``, ``"string"``,
    ``"number"``, ``"boolean"``, ``"null"``."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else "string" if isinstance(value, str) else type(value).__name__


def mapping_field(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` when it is an object; ``{}`` when absent or null.

    :raises MalformedChunk: it is another JSON type.
    """
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedChunk(f"'{key}' is a JSON {json_type(value)}, not an object")
    return value


def list_field(obj: Mapping[str, Any], key: str) -> list[Any]:
    """``obj[key]`` when it is an array; ``[]`` when absent or null.

    :raises MalformedChunk: it is another JSON type.
    """
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedChunk(f"'{key}' is a JSON {json_type(value)}, not an array")
    return value


def count_field(value: object, where: str) -> int:
    """``value`` (of the field ``where``) as a count: an integer, or what ``int()`` reads of a
    number or a numeric string (``8.5`` is 8, ``"8"`` is 8, as before issue 27).

    :raises MalformedChunk: null, an array, an object, infinite, NaN or a non-numeric string.
    """
    if isinstance(value, (Mapping, list, tuple)) or value is None:
        raise MalformedChunk(f"'{where}' is a JSON {json_type(value)}, not a count")
    try:
        return int(value)  # type: ignore[call-overload,no-any-return]
    except (TypeError, ValueError, OverflowError):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise MalformedChunk(f"'{where}' is {shown}, not a count") from None


class Engine(ABC):
    """One serving engine's protocol (stateless: one instance serves every request).

    Class attributes a subclass sets:

    ``name``: the registry name, ``api`` in ``[verify.smoke]`` and ``--api`` (e.g. ``"sglang"``).
    ``health``: the default readiness route (GET answers 200 when the server can generate).
    ``flush``: the default route POSTed before each repeat to empty the prefix cache (``""``: none).
    ``needs_model``: requests name the served model (``bench --url`` then needs ``--model``).
    ``probes_ignore_eos``: the first request asks for ``ignore_eos`` and, when the server rejects the
    field (HTTP 400/422 naming it), later requests ask without it (servers that may reject it).
    ``has_counters``: :meth:`read_counters` and :meth:`window` measure each repeat engine-side.
    ``metrics``: the engine's Prometheus route (``""``: none), read during each measured repeat for
    its ``gauges``: key (``running``, ``waiting``, ``kv_cache_use``, ``drafts``, ``accepted``) ->
    the names that may hold it, the first one present wins (:mod:`envforge.bench.gauges`);
    ``metrics_hint``: what to do when the route does not answer.
    ``conversations``: :meth:`request` sends ``opts.history`` before the prompt (multi-turn runs).
    """

    name: ClassVar[str]
    health: ClassVar[str] = "/health"
    flush: ClassVar[str] = ""
    needs_model: ClassVar[bool] = True
    probes_ignore_eos: ClassVar[bool] = False
    has_counters: ClassVar[bool] = False
    metrics: ClassVar[str] = ""
    gauges: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    metrics_hint: ClassVar[str] = ""
    conversations: ClassVar[bool] = False

    @abstractmethod
    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one streamed request for ``prompt``: exactly
        ``opts.max_new_tokens`` output tokens (``ignore_eos`` where ``opts.ignore_eos``) at
        ``opts.temperature``."""

    @abstractmethod
    def parse(self, stream: Stream, obj: Mapping[str, Any]) -> int:
        """Read one parsed SSE chunk (a JSON object, not an ``error`` chunk: the client handles
        those) into ``stream`` (its ``finish``, ``abort``, ``usage`` and ``verify``) and return the
        cumulative output token count after it (``stream.tokens`` when the chunk adds none).

        :raises MalformedChunk: a field the engine reads has the wrong type (read them with
            :func:`mapping_field`, :func:`list_field`, :func:`count_field`).
        """

    def read_counters(self, endpoint: Endpoint, *, server: str) -> Any:
        """One snapshot of the engine's cumulative counters (``has_counters`` engines only).

        :raises envforge.core.errors.ExternalToolError: the counters could not be read.
        """
        raise NotImplementedError(f"engine '{self.name}' has no counters")

    def window(
        self,
        server: str,
        speculative: bool,
        before: Any,
        after: Any,
        *,
        output_tokens: int,
        requests: int,
        source: str,
        where: str,
    ) -> tuple[EngineWindow, list[str]]:
        """The counters' deltas between two snapshots of one measured repeat, judged against the
        configuration (``speculative``) and what bench received (``output_tokens`` of ``requests``);
        returns the window (its ``engine`` is :attr:`name`) and warnings.

        :raises envforge.core.errors.ExternalToolError: the counters contradict the configuration
            or each other.
        """
        raise NotImplementedError(f"engine '{self.name}' has no counters")

    def counters_url(self, endpoint: Endpoint) -> str:
        """Where :meth:`read_counters` reads, for messages (default ``<endpoint>/metrics``)."""
        return endpoint.url + "/metrics"

    def __repr__(self) -> str:
        return f"<engine {self.name}>"
