"""Per-request distributions of one level: mean, median, p90, p95, p99, max and the percentiles
chosen with ``--percentiles``, as vLLM computes them.

``vllm bench serve`` (``vllm/benchmarks/serve.py``, ``calculate_metrics``) reports each of TTFT,
TPOT, ITL and E2EL as ``np.mean``, ``np.median`` and ``np.percentile(values, p)``, i.e. numpy's
default ``"linear"`` method (type 7 of Hyndman and Fan); :func:`distribution` uses the same calls,
so a distribution over the same per-request values is the same number in both tools. A chosen
percentile ``p`` is keyed ``p<p>`` with vLLM's spelling of the number (``--metric-percentiles``:
``str(int(p)) if int(p) == p else str(p)``, so ``p50``, ``p99.9``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from envforge.core.errors import InputError

__all__ = ["PERCENTILES", "Distribution", "distribution", "parse_percentiles", "percentile_key"]

#: The percentiles every distribution carries; ``--percentiles`` adds others (vLLM: ``--metric-percentiles``).
PERCENTILES = (90.0, 95.0, 99.0)
_FIXED = ("mean", "median", "p90", "p95", "p99", "max")
#: The most percentiles ``--percentiles`` takes (each is a column of the table and a key of every distribution).
MAX_CHOSEN = 20


def percentile_key(p: float) -> str:
    """``p50``, ``p99.9``: the key of percentile ``p`` (vLLM's spelling, ``vllm/benchmarks/serve.py``)."""
    return f"p{int(p)}" if int(p) == p else f"p{p}"


def parse_percentiles(text: str, *, source: str = "--percentiles") -> tuple[float, ...]:
    """``"50,90,99,99.9"`` -> ``(50.0, 90.0, 99.0, 99.9)``: comma-separated numbers in (0, 100],
    duplicates dropped, in the order given.

    :raises InputError: more than :data:`MAX_CHOSEN`, an empty item, a word, a number outside (0, 100]
        (exit 2, naming ``source``).
    """
    out: list[float] = []
    if text.count(",") >= MAX_CHOSEN:
        raise InputError(
            f"{source}: {text.count(',') + 1} percentiles; at most {MAX_CHOSEN} are reported",
            hint=f"choose the ones you compare, e.g. {source} 50,90,99,99.9",
        )
    for item in text.split(","):
        word = item.strip()
        try:
            p = float(word)
        except ValueError:
            p = math.nan
        if not 0.0 < p <= 100.0:
            raise InputError(
                f"{source} {text!r}: {word!r} is not a percentile (a number above 0, at most 100)",
                hint=f"give numbers separated by commas, e.g. {source} 50,90,99,99.9",
            )
        if p not in out:
            out.append(p)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Distribution:
    """``n`` values (ms) summarized: mean, median (p50), p90, p95, p99 (numpy's linear method), max,
    and ``chosen``: ``(key, value)`` of each ``--percentiles`` value (:func:`percentile_key`) other
    than p90, p95 and p99, in the order given (empty by default). :meth:`value` reads either kind."""

    n: int
    mean: float
    median: float
    p90: float
    p95: float
    p99: float
    max: float
    chosen: tuple[tuple[str, float], ...] = ()

    def value(self, key: str) -> float | None:
        """The value of ``key`` (``median``, ``p99``, a chosen ``p99.9``), or None when not computed."""
        if key in _FIXED:
            return float(getattr(self, key))  # mean, median and max too
        return next((v for k, v in self.chosen if k == key), None)

    def as_dict(self) -> dict[str, Any]:
        """``{"n", "mean", "median", "p90", "p95", "p99", "max", then each chosen key}``, floats
        rounded to 4 decimals."""
        fields = {k: v for k, v in asdict(self).items() if k != "chosen"}
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in [*fields.items(), *self.chosen]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Distribution:
        """Inverse of :meth:`as_dict`: keys beyond the fixed ones that read ``p<number>`` are the chosen.

        :raises KeyError: a field is missing; :raises TypeError/ValueError: a field is not a number.
        """
        chosen = tuple((k, float(v)) for k, v in d.items() if k not in ("n", *_FIXED) and _is_key(k))
        return cls(
            int(d["n"]),
            float(d["mean"]),
            float(d["median"]),
            float(d["p90"]),
            float(d["p95"]),
            float(d["p99"]),
            float(d["max"]),
            chosen,
        )


def _is_key(key: str) -> bool:
    try:
        return key.startswith("p") and 0.0 < float(key[1:]) <= 100.0
    except ValueError:
        return False


def distribution(
    values: Sequence[float], *, scale: float = 1000.0, percentiles: Sequence[float] = ()
) -> Distribution | None:
    """The distribution of ``values`` (seconds) in ms (``scale``), with the ``percentiles`` chosen
    (:func:`parse_percentiles`), or None when there are no values."""
    if not values:
        return None
    a = np.asarray(values, dtype=float) * scale
    p90, p95, p99 = (float(x) for x in np.percentile(a, PERCENTILES))
    chosen = tuple(
        (percentile_key(p), float(np.percentile(a, p))) for p in percentiles if percentile_key(p) not in _FIXED
    )  # p90, p95, p99 are there already
    return Distribution(len(a), float(np.mean(a)), float(np.median(a)), p90, p95, p99, float(np.max(a)), chosen)
