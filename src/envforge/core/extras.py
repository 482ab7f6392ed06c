"""The optional extras of the ``envforge-stack`` distribution: which command needs which, and the
error that names the one to install when it is missing.

The base install holds what every command needs (uv, packaging, libcst, the TOML libraries, httpx2,
gitpython, pyflakes, argcomplete). What only some commands need is an extra, named in
``[project.optional-dependencies]`` of pyproject.toml (tests/core/test_extras.py keeps both in step):

=========  ================================  ===================================================
extra      distributions (import names)      commands
=========  ================================  ===================================================
``bench``  aiohttp, scipy,                   ``bench``, ``bench compare`` (HTTP; t intervals;
           prometheus_client, numpy,         vLLM's ``/metrics``; per-request percentiles; input
           tokenizers                        tokens of the generated datasets)
``drafter`` huggingface_hub                  ``drafter ...``, ``verify --level drafter``
``plot``   matplotlib                        ``bench``'s PNG plot (``--no-plot`` without it)
``fleet``  ray                               ``fleet ...``
``sbom``   cyclonedx, packageurl             ``sbom`` (CycloneDX 1.6 model and validation)
=========  ================================  ===================================================

A missing one is exit 2 naming the install line (``pip install 'envforge-stack[bench]'``), either
before the command starts work (:func:`require`) or, for an import deep in a command, from the
``ModuleNotFoundError`` itself (:func:`missing_extra`, which ``envforge.cli`` calls).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from envforge.core.errors import InputError

__all__ = ["DISTRIBUTION", "EXTRAS", "MissingExtra", "extra_of", "missing_extra", "require"]

#: The distribution envforge is installed as (the import name and the command are ``envforge``).
DISTRIBUTION = "envforge-stack"

#: Extra -> the top-level modules it provides (import names; pyproject.toml lists the distributions).
EXTRAS: Mapping[str, tuple[str, ...]] = {
    "bench": ("aiohttp", "scipy", "prometheus_client", "numpy", "tokenizers"),
    "drafter": ("huggingface_hub",),
    "plot": ("matplotlib",),
    "fleet": ("ray",),
    "sbom": ("cyclonedx", "packageurl"),
}


class MissingExtra(InputError):
    """A command needs an extra that is not installed (exit 2); the hint is the install line.

    :param what: the command or feature, e.g. ``"envforge bench"``.
    :param extra: a key of :data:`EXTRAS`.
    :param missing: the import names that are not installed.
    """

    def __init__(self, what: str, extra: str, missing: tuple[str, ...]) -> None:
        super().__init__(
            f"{what} needs {', '.join(missing)}, which the base install of {DISTRIBUTION} leaves out",
            hint=f"pip install '{DISTRIBUTION}[{extra}]' (uv: uv tool install "
            f"'{DISTRIBUTION}[{extra}]'), then run it again",
        )
        self.extra = extra
        self.missing = missing


def extra_of(module: str) -> str | None:
    """The extra that provides the top-level module of ``module`` (``"scipy.stats"`` -> ``"bench"``), or None."""
    top = module.partition(".")[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def require(extra: str, what: str) -> None:
    """Stop before any work when ``extra`` is not installed: every module of it must be findable
    (``importlib.util.find_spec``: nothing is imported, so this costs microseconds).

    :raises MissingExtra: a module of ``extra`` is not installed (exit 2).
    """
    missing = tuple(m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None)
    if missing:
        raise MissingExtra(what, extra, missing)


def missing_extra(exc: ModuleNotFoundError, what: str) -> MissingExtra | None:
    """The :class:`MissingExtra` a ``ModuleNotFoundError`` means when the module belongs to an extra
    (``No module named 'scipy'`` -> ``bench``), or None (a missing module of the base install: a bug)."""
    extra = extra_of(exc.name or "")
    return MissingExtra(what, extra, ((exc.name or "").partition(".")[0],)) if extra else None
