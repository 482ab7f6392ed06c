"""Recipes: what a stack is (``recipes/*.toml``), as frozen values, with variants resolved.

A recipe names a Python, the packages and version specifiers, the indexes they come from, the
overrides of upstream pins (each with a reason), the target hardware, the patchsets to apply, env
profiles and verify settings. ``[variant.<name>]`` tables layer on top of the base to give one lock
each (``cu128``, ``cu130``); a recipe without variants has one implicit variant, ``default``.

:func:`envforge.recipe.load.load_recipe` reads and validates a file (schema:
:mod:`envforge.recipe.schema`, documented in docs/recipes.md) into a :class:`Recipe`;
:meth:`Recipe.resolve` merges a variant into a :class:`ResolvedVariant`, the input of ``lock``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.errors import InputError
from envforge.core.schema import line_of

__all__ = [
    "DEFAULT_ENV_PROFILE",
    "DEFAULT_PLATFORM",
    "DEFAULT_VARIANT",
    "Index",
    "Override",
    "PackagePin",
    "Provided",
    "Recipe",
    "RecipeError",
    "ResolvedVariant",
    "Target",
]

DEFAULT_VARIANT = "default"
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"
DEFAULT_ENV_PROFILE = "default"
#: ``[target] interconnect`` values (the recipe schema's); a profile of that name is chosen by it.
INTERCONNECTS = ("pcie", "nvlink")


class RecipeError(InputError):
    """A recipe cannot be read or is invalid (exit 2); the message lists every problem."""


@dataclass(frozen=True, slots=True)
class PackagePin:
    """A requested distribution: canonical ``name``, PEP 440 ``specifier``, optional ``index`` name."""

    name: str
    specifier: str
    index: str | None = None

    def requirement(self) -> str:
        """The PEP 508 requirement string, e.g. ``torch==2.9.1+cu130``."""
        return f"{self.name}{self.specifier}"


@dataclass(frozen=True, slots=True)
class Provided:
    """A distribution the base interpreter provides (``[provided]``): never locked nor installed.

    ``name`` canonical (PEP 503), ``version`` the exact version with its local label
    (``"2.11.0+cu130"``, no operator), ``module`` the import name whose ``__version__`` verify reads
    (default: the name with ``-`` as ``_``).
    """

    name: str
    version: str
    module: str

    def as_dict(self) -> dict[str, str]:
        """``{"name", "version", "import"}`` (the lock's ``[tool.envforge] provided`` rows)."""
        return {"name": self.name, "version": self.version, "import": self.module}


@dataclass(frozen=True, slots=True)
class Override:
    """An override of an upstream pin (uv ``--override``), with the ``reason`` reviewers read."""

    name: str
    specifier: str
    reason: str

    def requirement(self) -> str:
        """The PEP 508 requirement string uv receives as an override."""
        return f"{self.name}{self.specifier}"


@dataclass(frozen=True, slots=True)
class Index:
    """A named package index (PEP 503 simple API ``url``). Only packages routed to it may use it."""

    name: str
    url: str


@dataclass(frozen=True, slots=True)
class Target:
    """Target hardware: GPU model, compute capability (``"12.0"``), GPU count, interconnect."""

    gpu: str | None = None
    compute_capability: str | None = None
    gpus: int | None = None
    interconnect: str | None = None
    platform: str = DEFAULT_PLATFORM
    cuda_driver_min: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Keys in a fixed order, ``None`` values left out (for locks and reports)."""
        d = {
            "gpu": self.gpu,
            "compute-capability": self.compute_capability,
            "gpus": self.gpus,
            "interconnect": self.interconnect,
            "platform": self.platform,
            "cuda-driver-min": self.cuda_driver_min,
        }
        return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ResolvedVariant:
    """One variant merged over the recipe's base: everything ``lock`` and ``build`` need.

    ``lock_name`` is ``<recipe>-<variant>``: the lock is ``lockfiles/pylock.<lock_name>.toml`` and
    the environment ``envs/<lock_name>``. ``patchsets`` are the recipe's ``[recipe] patchsets`` this
    variant applies, in recipe order; ``retired_patchsets`` (id -> reason, recipe order) the listed
    ones it retires (``retire-patchsets`` of ``[recipe]`` with ``[variant.V]`` on top): never applied,
    recorded in the lock with their reasons.
    """

    recipe: str
    variant: str
    python: str
    resolution: str
    target: Target
    cuda: str | None
    packages: tuple[PackagePin, ...]
    indexes: tuple[Index, ...]
    overrides: tuple[Override, ...]
    patchsets: tuple[str, ...]
    env_profile: str | None
    env: Mapping[str, str]
    verify: Mapping[str, Any]
    cuda_exceptions: Mapping[str, str] = field(default_factory=dict)
    source_builds: Mapping[str, str] = field(default_factory=dict)
    build_constraints: tuple[str, ...] = ()
    exclude_newer: str | None = None
    retired_patchsets: Mapping[str, str] = field(default_factory=dict)
    exclude_newer_exempt: Mapping[str, str] = field(default_factory=dict)
    provided: tuple[Provided, ...] = ()
    nccl_unknown: Mapping[str, str] = field(default_factory=dict)  # reviewed NCCL names -> reason
    excludes: Mapping[str, str] = field(default_factory=dict)  # [excludes]: name -> reason (uv's --excludes)
    link_mode: str | None = None  # [recipe] link-mode: uv's --link-mode for builds (not a lock input)

    @property
    def lock_name(self) -> str:
        return f"{self.recipe}-{self.variant}"

    def inputs(self) -> dict[str, Any]:
        """The inputs that determine the lock, by recipe key, in a fixed order (JSON-able).

        ``lock --check`` compares these key by key to say which one changed.
        """
        return {
            "python": self.python,
            "resolution": self.resolution,
            "platform": self.target.platform,
            "packages": [p.requirement() + (f" @index={p.index}" if p.index else "") for p in self.packages],
            "indexes": [f"{i.name}={i.url}" for i in self.indexes],
            "overrides": [o.requirement() for o in self.overrides],
            # Present only when used, so locks of recipes without them keep their inputs.
            **(
                {"cuda-exceptions": [f"{k}: {v}" for k, v in self.cuda_exceptions.items()]}
                if self.cuda_exceptions
                else {}
            ),
            **(
                {"build-from-source": [f"{k}: {v}" for k, v in self.source_builds.items()]}
                if self.source_builds
                else {}
            ),
            **({"build-constraints": list(self.build_constraints)} if self.build_constraints else {}),
            **({"exclude-newer": self.exclude_newer} if self.exclude_newer else {}),
            **(
                {"exclude-newer-exempt": [f"{k}: {v}" for k, v in self.exclude_newer_exempt.items()]}
                if self.exclude_newer_exempt
                else {}
            ),
            **(
                {"provided": [f"{p.name}=={p.version} import={p.module}" for p in self.provided]}
                if self.provided
                else {}
            ),
            **({"nccl-unknown": [f"{k}: {v}" for k, v in self.nccl_unknown.items()]} if self.nccl_unknown else {}),
            **({"excludes": [f"{k}: {v}" for k, v in self.excludes.items()]} if self.excludes else {}),
        }

    def digest(self) -> str:
        """``sha256:<hex>`` of :meth:`inputs` (canonical JSON)."""
        blob = json.dumps(self.inputs(), sort_keys=True, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class Recipe:
    """A validated recipe file. ``data`` keeps the parsed TOML for sections owned elsewhere."""

    path: Path
    name: str
    python: str
    description: str | None
    resolution: str
    target: Target
    patchsets: tuple[str, ...]
    variants: tuple[str, ...]
    env_profiles: Mapping[str, Mapping[str, str]]
    data: Mapping[str, Any] = field(repr=False)
    text: str = field(repr=False, default="")

    def resolve(self, variant: str | None = None, *, env_profile: str | None = None) -> ResolvedVariant:
        """Merge ``variant`` (default: the only one, or ``default``) over the base.

        :raises RecipeError: unknown variant or env profile, or an index name that is not defined.
        """
        name = self._variant_name(variant)
        vdata: Mapping[str, Any] = self.data.get("variant", {}).get(name, {})
        indexes = {**self.data.get("indexes", {}), **vdata.get("indexes", {})}
        packages = {canonicalize_name(k): v for k, v in self.data.get("packages", {}).items()}
        packages.update({canonicalize_name(k): v for k, v in vdata.get("packages", {}).items()})
        overrides = {canonicalize_name(k): v for k, v in self.data.get("overrides", {}).items()}
        overrides.update({canonicalize_name(k): v for k, v in vdata.get("overrides", {}).items()})
        pins = tuple(self._pin(k, v, indexes, name) for k, v in sorted(packages.items()))
        profile = self._profile_name(env_profile or vdata.get("env-profile"))
        target = replace(self.target, platform=vdata.get("platform", self.target.platform))
        retired = self._retired(vdata)
        return ResolvedVariant(
            recipe=self.name,
            variant=name,
            python=self.python,
            resolution=self.resolution,
            target=target,
            cuda=vdata.get("cuda"),
            packages=pins,
            indexes=tuple(Index(k, v) for k, v in sorted(indexes.items())),
            overrides=tuple(Override(k, v["version"], v["reason"]) for k, v in sorted(overrides.items())),
            patchsets=tuple(p for p in self.patchsets if p not in retired),
            env_profile=profile,
            env=self._profile_env(profile),
            verify=self.data.get("verify", {}),
            cuda_exceptions=self._reasons("cuda-exceptions", vdata),
            source_builds=self._reasons("build-from-source", vdata),
            build_constraints=tuple(self.data["recipe"].get("build-constraints", ())),
            exclude_newer=self.data["recipe"].get("exclude-newer"),
            retired_patchsets=retired,
            exclude_newer_exempt=self._reasons("exclude-newer-exempt", vdata),
            provided=self._provided(),
            nccl_unknown=dict(sorted(self.data.get("nccl-unknown", {}).items())),
            link_mode=self.data["recipe"].get("link-mode"),
            excludes=self._reasons("excludes", vdata),
        )

    def _provided(self) -> tuple[Provided, ...]:
        """``[provided]`` as :class:`Provided` values, sorted by canonical name."""
        out = []
        for key, value in self.data.get("provided", {}).items():
            spec = value if isinstance(value, str) else value["version"]
            module = None if isinstance(value, str) else value.get("import")
            name = canonicalize_name(key)
            out.append(Provided(name, spec.strip().removeprefix("==").strip(), module or name.replace("-", "_")))
        return tuple(sorted(out, key=lambda p: p.name))

    def _retired(self, vdata: Mapping[str, Any]) -> dict[str, str]:
        """``retire-patchsets`` of ``[recipe]`` with the variant's on top: id -> reason, in the
        order of ``[recipe] patchsets`` (the loader checks each id is listed there)."""
        reasons = {str(e["id"]): str(e["reason"]) for e in self.data["recipe"].get("retire-patchsets", ())}
        reasons.update({str(e["id"]): str(e["reason"]) for e in vdata.get("retire-patchsets", ())})
        return {p: reasons[p] for p in self.patchsets if p in reasons}

    def _reasons(self, key: str, vdata: Mapping[str, Any]) -> dict[str, str]:
        """``[key]`` of the base with ``[variant.V.key]`` on top, names normalised, sorted."""
        merged = {canonicalize_name(k): v for k, v in self.data.get(key, {}).items()}
        merged.update({canonicalize_name(k): v for k, v in vdata.get(key, {}).items()})
        return dict(sorted(merged.items()))

    def _variant_name(self, variant: str | None) -> str:
        if variant is None:
            if len(self.variants) == 1:
                return self.variants[0]
            raise RecipeError(
                f"{self.path}: recipe '{self.name}' has variants {', '.join(self.variants)}; choose one",
                hint=f"pass --variant {self.variants[0]}",
            )
        if variant not in self.variants:
            raise RecipeError(
                f"{self.path}: recipe '{self.name}' has no variant '{variant}' (it has: {', '.join(self.variants)})"
            )
        return variant

    def _pin(self, name: str, value: Any, indexes: Mapping[str, str], variant: str) -> PackagePin:
        if isinstance(value, str):
            return PackagePin(name, value)
        index = value.get("index")
        if index is not None and index not in indexes:
            key = f"variant.{variant}.packages.{name}.index"
            raise RecipeError(
                f"{self.path}:{line_of(self.text, key) or line_of(self.text, f'packages.{name}') or '?'}: "
                f"packages.{name}.index: index '{index}' is not defined",
                hint=f"add it under [indexes] or [variant.{variant}.indexes] "
                f"(defined: {', '.join(sorted(indexes)) or 'none'})",
            )
        return PackagePin(name, value["version"], index)

    def _profile_name(self, requested: str | None) -> str | None:
        if requested is not None:
            if requested not in self.env_profiles:
                raise RecipeError(
                    f"{self.path}: env profile '{requested}' is not defined "
                    f"(defined: {', '.join(sorted(self.env_profiles)) or 'none'})",
                    hint=f"add a table [env.{requested}]",
                )
            return requested
        if self.target.interconnect in self.env_profiles:
            return self.target.interconnect
        by_link = sorted(p for p in self.env_profiles if p in INTERCONNECTS)
        if self.target.interconnect is None and by_link:  # issue 44: such a table was silently never applied
            name = by_link[0]
            raise RecipeError(
                f"{self.path}:{line_of(self.text, f'env.{name}') or '?'}: [env.{name}] is applied when "
                f'[target] interconnect = "{name}", and the recipe sets no interconnect: it would '
                "never be applied",
                hint=f'set interconnect = "{name}" under [target], or choose it when locking '
                f"(`envforge lock --env-profile {name}`)",
            )
        return DEFAULT_ENV_PROFILE if DEFAULT_ENV_PROFILE in self.env_profiles else None

    def _profile_env(self, profile: str | None) -> dict[str, str]:
        """``[env.default]`` first, then the chosen profile on top; keys sorted."""
        env = dict(self.env_profiles.get(DEFAULT_ENV_PROFILE, {}))
        if profile is not None:
            env.update(self.env_profiles[profile])
        return dict(sorted(env.items()))
