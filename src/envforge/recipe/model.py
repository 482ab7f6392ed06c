"""Recipes: what a stack is (``recipes/*.toml``), validated, with variants resolved.

A recipe names a Python, the packages and version specifiers, the indexes they come from, the
overrides of upstream pins (each with a reason), the target hardware, the patchsets to apply, env
profiles and verify settings. ``[variant.<name>]`` tables layer on top of the base to give one lock
each (``cu128``, ``cu130``); a recipe without variants has one implicit variant, ``default``.

The schema is documented in docs/recipes.md. :func:`load_recipe` returns a frozen :class:`Recipe`;
:meth:`Recipe.resolve` merges a variant into a :class:`ResolvedVariant`, the input of ``lock``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envforge.recipe.envvars import problems as env_value_problems, startup_reader
from envforge.core.errors import InputError
from envforge.recipe.platforms import platform_problem
from envforge.core.textfile import SMALL_LIMIT, load_toml
from envforge.core.schema import (
    Bool,
    Date,
    Problem,
    Enum,
    Int,
    ListOf,
    MapOf,
    Number,
    OneOf,
    Str,
    Table,
    format_problems,
    line_of,
    validate,
)

__all__ = [
    "DEFAULT_PLATFORM",
    "DEFAULT_VARIANT",
    "Index",
    "Override",
    "PackagePin",
    "Recipe",
    "RecipeError",
    "ResolvedVariant",
    "Target",
    "load_recipe",
    "lock_name_problem",
]

DEFAULT_VARIANT = "default"
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"
DEFAULT_ENV_PROFILE = "default"

# PEP 751: lock files are named ``pylock.toml`` or ``pylock.<name>.toml`` where <name> has no dots.
# envforge also keeps names to letters, digits, '-' and '_' so they work as directory names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_PKG = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RecipeError(InputError):
    """A recipe cannot be read or is invalid (exit 2); the message lists every problem."""


def lock_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be part of a PEP 751 file name ``pylock.<name>.toml``, or None."""
    if "." in name:
        return (f"'{name}' cannot form a PEP 751 lock file name (pylock.<name>.toml allows no dots); "
                "use letters, digits, '-' and '_' only")
    if not _NAME.match(name):
        return f"'{name}' is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit"
    return None


def _specifier_problem(v: str) -> str | None:
    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        return f"'{v}' is not a version specifier (PEP 440), e.g. '==2.9.1' or '>=0.6,<0.7'"
    return None


def _pkg_problem(name: str) -> str | None:
    return None if _PKG.match(name) else f"'{name}' is not a valid distribution name (PEP 508)"


def _cc_problem(v: str) -> str | None:
    return None if re.fullmatch(r"\d+\.\d+", v) else f"'{v}' is not a compute capability like \"12.0\""


def _python_problem(v: str) -> str | None:
    return None if re.fullmatch(r"3\.\d+(\.\d+)?", v) else f"'{v}' is not a Python version like \"3.12\""


def _env_problem(k: str) -> str | None:
    return None if _ENV_VAR.match(k) else f"'{k}' is not a valid environment variable name"


def _env_value(value: Any, path: str) -> list[Problem]:
    """A variable's value for NCCL, CUDA and the process (envvars.py: names, NCCL's parsing, NUL)."""
    return [Problem(path, msg) for msg in env_value_problems(path.rsplit(".", 1)[-1], value)]


def _profile_value(value: Any, path: str) -> list[Problem]:
    """An env profile value: as :func:`_env_value`, and never a variable read at process start (B31)."""
    name = path.rsplit(".", 1)[-1]
    out = _env_value(value, path)
    if not out and (reader := startup_reader(name)) is not None:
        out.append(Problem(path, (
            f"is read by {reader} when a process starts, before the env profile's .pth hook runs: the hook "
            "would give it to child processes only, while the process itself (the server) runs without it; "
            "set it where the process is started (its launcher or job script; for benchmark servers, "
            "[verify.smoke.servers] env)")))
    return out


_SPEC = Str(_specifier_problem)
_PACKAGE = OneOf([(str, _SPEC), (Mapping, Table({"version": _SPEC, "index": Str(), "reason": Str()},
                                                  frozenset({"version"})))],
                 'a specifier string or a table { version = "...", index = "..." }')
_OVERRIDE = Table({"version": _SPEC, "reason": Str()}, frozenset({"version", "reason"}))
_PACKAGES = MapOf(_PACKAGE, _pkg_problem)
def _pin_problem(v: str) -> str | None:
    """A build constraint must pin one version (``setuptools==80.9.0``): a range is no record."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(v)
    except InvalidRequirement:
        return f"'{v}' is not a requirement (PEP 508), e.g. 'setuptools==80.9.0'"
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        return f"'{v}' does not pin one version; write e.g. '{req.name}==X.Y.Z'"
    return None


def _reason_problem(v: str) -> str | None:
    return None if v.strip() else "give the reason reviewers read (a non-empty string)"


def _url_problem(v: str) -> str | None:
    """An index URL: ``http(s)://host/path`` or ``file:///dir``, never with credentials in it.

    A user or password in the URL would be written into the lock, printed by ``lock --check`` and
    ``lock diff`` and copied into every environment (issue 18): refused without echoing the URL.
    """
    from urllib.parse import urlsplit

    if re.match(r"^(https?|file)://[^\s/]+(/\S*)?$|^file:///\S+$", v):
        parts = urlsplit(v)
        if "@" in parts.netloc:
            shown = f"{parts.scheme}://<credentials>@{parts.netloc.rpartition('@')[2]}{parts.path}"
            return (f"'{shown}' carries credentials in the URL, which would be written into the lock and "
                    "printed; remove them and give them the way uv takes them: UV_INDEX_<NAME>_USERNAME and "
                    "UV_INDEX_<NAME>_PASSWORD (NAME: the index's recipe name upper-cased, '-' as '_'), "
                    "a ~/.netrc entry for the host, or a keyring (UV_KEYRING_PROVIDER=subprocess)")
        if parts.query or parts.fragment:
            return ("an index URL has no query string or fragment, and one may carry a token that would be "
                    "written into the lock and printed; remove it and give credentials as "
                    "UV_INDEX_<NAME>_USERNAME / UV_INDEX_<NAME>_PASSWORD, a ~/.netrc entry or a keyring")
        return None
    if "@" in v:
        return "not an index URL (and it looks like it carries credentials; give them as UV_INDEX_<NAME>_PASSWORD)"
    return f"'{v}' is not an index URL; use http(s)://host/path/simple (a PEP 503 index) or file:///dir"


def _timestamp_problem(v: str) -> str | None:
    """``exclude-newer``: an RFC 3339 timestamp with its zone, or a date (uv reads a date as its
    midnight UTC). Relative spans ("1 week") are refused: a lock must mean the same later."""
    from datetime import date, datetime

    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        try:
            date.fromisoformat(v)
            return None
        except ValueError:
            pass
    elif re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", v):
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
            return None
        except ValueError:
            pass
    return (f"'{v}' is not a fixed point in time; write an RFC 3339 timestamp with its zone, e.g. "
            "\"2024-01-01T00:00:00Z\", or a date \"2024-01-01\" (a relative span would not give the same "
            "lock later)")


_INDEXES = MapOf(Str(_url_problem), lambda k: lock_name_problem(k))
_OVERRIDES = MapOf(_OVERRIDE, _pkg_problem)
_PLATFORM = Str(platform_problem)
_SPEC_REQ = Str(_pin_problem)
# Reviewed exceptions to the lock's guards, each with the reason reviewers read:
# a distribution built for another CUDA major (B03) kept on purpose, and a distribution built
# from its sdist at install time (B28).
_REASONS = MapOf(Str(_reason_problem), _pkg_problem)

_VARIANT = Table({
    "cuda": Str(),
    "description": Str(),
    "indexes": _INDEXES,
    "packages": _PACKAGES,
    "overrides": _OVERRIDES,
    "env-profile": Str(),
    "platform": _PLATFORM,
    "cuda-exceptions": _REASONS,
    "build-from-source": _REASONS,
})

# [verify.drafter] and [verify.smoke] are owned by envforge.drafter and envforge.bench.
_DRAFTER = Table({
    "repo": Str(),
    "revision": Str(),
    "target-config": Str(),
    "compare": ListOf(Str()),
    "allow-pickle": Bool(),
}, frozenset({"repo", "revision"}))

_SMOKE_SERVER = Table({
    "name": Str(),
    "model": Str(),
    "args": ListOf(Str()),
    "env": MapOf(_env_value, _env_problem),
    "speculative": Bool(),
}, frozenset({"name", "args"}))

_SMOKE = Table({
    "model": Str(),
    "api": Enum("sglang", "openai", "vllm"),
    "servers": ListOf(_SMOKE_SERVER),
    "prompts": Str(),
    "seed": Int(0),
    "max-new-tokens": Int(1),
    "temperature": Number(),
    "concurrency": ListOf(Int(1)),
    "repeats": Int(1),
    "warmup": Int(0),
    "load-timeout-s": Int(1),
    "port": Int(1),
    "requests": Int(1),
    "health": Str(),
    "request-timeout-s": Number(),
    "idle-timeout-s": Number(),
    "interleave": Bool(),
    "flush-cache": Str(),
})

def _kind_problem(v: str) -> str | None:
    from envforge.core.kinds import KINDS, is_known_kind

    if is_known_kind(v):
        return None
    import difflib

    close = difflib.get_close_matches(v, list(KINDS), n=1)
    return (f"'{v}' is not a verify finding kind" + (f"; did you mean '{close[0]}'?" if close else "")
            + " (docs/verify.md lists them)")


def _subject_problem(v: str) -> str | None:
    return None if v.strip() else "give the finding's subject exactly as verify prints it"


def _claimant_problem(v: str) -> str | None:
    from packaging.version import InvalidVersion, Version

    parts = v.split(" ")
    try:
        ok = len(parts) == 2 and bool(parts[0]) and bool(Version(parts[1]))
    except InvalidVersion:
        ok = False
    return None if ok else (f"'{v}' is not '<distribution> <version>' as verify prints it "
                            "(e.g. \"flashinfer-python 0.6.3\")")


def _actual_problem(v: str) -> str | None:
    return None if v.strip() else "give the finding's actual text exactly as verify prints it, or leave the key out"


# [[verify.accept]]: a known finding accepted after review (envforge.verify.acceptance). ``between``
# (file-conflict only) and ``actual`` pin the finding beyond kind and subject.
_ACCEPT = Table({"kind": Str(_kind_problem), "subject": Str(_subject_problem), "reason": Str(_reason_problem),
                 "expires": Date(), "between": ListOf(Str(_claimant_problem)), "actual": Str(_actual_problem)},
                frozenset({"kind", "subject", "reason", "expires"}))

_RECIPE_SPEC = Table({
    "recipe": Table({
        "name": Str(lock_name_problem),
        "description": Str(),
        "python": Str(_python_problem),
        "patchsets": ListOf(Str()),
        "resolution": Enum("full", "no-deps"),
        "build-constraints": ListOf(_SPEC_REQ),
        "exclude-newer": Str(_timestamp_problem),
    }, frozenset({"name", "python"})),
    "target": Table({
        "gpu": Str(),
        "compute-capability": Str(_cc_problem),
        "gpus": Int(1),
        "interconnect": Enum("pcie", "nvlink"),
        "platform": _PLATFORM,
        "cuda-driver-min": Str(),
    }),
    "packages": _PACKAGES,
    "indexes": _INDEXES,
    "overrides": _OVERRIDES,
    "cuda-exceptions": _REASONS,
    "build-from-source": _REASONS,
    "variant": MapOf(_VARIANT, lock_name_problem),
    "env": MapOf(MapOf(_profile_value, _env_problem), lock_name_problem),
    "verify": Table({"drafter": _DRAFTER, "smoke": _SMOKE, "levels": ListOf(Str()), "accept": ListOf(_ACCEPT)}),
}, frozenset({"recipe"}))


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
        d = {"gpu": self.gpu, "compute-capability": self.compute_capability, "gpus": self.gpus,
             "interconnect": self.interconnect, "platform": self.platform,
             "cuda-driver-min": self.cuda_driver_min}
        return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ResolvedVariant:
    """One variant merged over the recipe's base: everything ``lock`` and ``build`` need.

    ``lock_name`` is ``<recipe>-<variant>``: the lock is ``lockfiles/pylock.<lock_name>.toml`` and
    the environment ``envs/<lock_name>``.
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
            "packages": [p.requirement() + (f" @index={p.index}" if p.index else "")
                         for p in self.packages],
            "indexes": [f"{i.name}={i.url}" for i in self.indexes],
            "overrides": [o.requirement() for o in self.overrides],
            # Present only when used, so locks of recipes without them keep their inputs.
            **({"cuda-exceptions": [f"{k}: {v}" for k, v in self.cuda_exceptions.items()]}
               if self.cuda_exceptions else {}),
            **({"build-from-source": [f"{k}: {v}" for k, v in self.source_builds.items()]}
               if self.source_builds else {}),
            **({"build-constraints": list(self.build_constraints)} if self.build_constraints else {}),
            **({"exclude-newer": self.exclude_newer} if self.exclude_newer else {}),
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
        return ResolvedVariant(
            recipe=self.name, variant=name, python=self.python, resolution=self.resolution,
            target=target, cuda=vdata.get("cuda"), packages=pins,
            indexes=tuple(Index(k, v) for k, v in sorted(indexes.items())),
            overrides=tuple(Override(k, v["version"], v["reason"]) for k, v in sorted(overrides.items())),
            patchsets=self.patchsets, env_profile=profile, env=self._profile_env(profile),
            verify=self.data.get("verify", {}),
            cuda_exceptions=self._reasons("cuda-exceptions", vdata),
            source_builds=self._reasons("build-from-source", vdata),
            build_constraints=tuple(self.data["recipe"].get("build-constraints", ())),
            exclude_newer=self.data["recipe"].get("exclude-newer"),
        )

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
                hint=f"pass --variant {self.variants[0]}")
        if variant not in self.variants:
            raise RecipeError(f"{self.path}: recipe '{self.name}' has no variant '{variant}' "
                              f"(it has: {', '.join(self.variants)})")
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
                     f"(defined: {', '.join(sorted(indexes)) or 'none'})")
        return PackagePin(name, value["version"], index)

    def _profile_name(self, requested: str | None) -> str | None:
        if requested is not None:
            if requested not in self.env_profiles:
                raise RecipeError(f"{self.path}: env profile '{requested}' is not defined "
                                  f"(defined: {', '.join(sorted(self.env_profiles)) or 'none'})",
                                  hint=f"add a table [env.{requested}]")
            return requested
        if self.target.interconnect in self.env_profiles:
            return self.target.interconnect
        return DEFAULT_ENV_PROFILE if DEFAULT_ENV_PROFILE in self.env_profiles else None

    def _profile_env(self, profile: str | None) -> dict[str, str]:
        """``[env.default]`` first, then the chosen profile on top; keys sorted."""
        env = dict(self.env_profiles.get(DEFAULT_ENV_PROFILE, {}))
        if profile is not None:
            env.update(self.env_profiles[profile])
        return dict(sorted(env.items()))


def load_recipe(path: Path) -> Recipe:
    """Read and validate a recipe file.

    :raises RecipeError: unreadable file, larger than 1 MiB, not UTF-8, TOML syntax error (with
        line), nesting too deep (:mod:`envforge.core.textfile`), or schema problems, each
        rendered as ``file:line: key.path: message`` with a did-you-mean for unknown keys.
    """
    data, text = load_toml(path, what="recipe", limit=SMALL_LIMIT, error=RecipeError)
    problems = validate(data, _RECIPE_SPEC, text) or _duplicates(data, text)
    if problems:
        raise RecipeError(format_problems("recipe", str(path), problems),
                          hint="see docs/recipes.md for the recipe schema")
    return _build(path, data, text)


def _duplicates(data: Mapping[str, Any], text: str) -> list[Problem]:
    """Keys of one table that name the same distribution (PEP 503 normalisation: ``SGLang`` = ``sglang``)."""
    tables: list[tuple[str, Mapping[str, Any]]] = [(k, data.get(k, {})) for k in ("packages", "overrides")]
    for vname, v in data.get("variant", {}).items():
        tables += [(f"variant.{vname}.{k}", v.get(k, {})) for k in ("packages", "overrides")]
    out = []
    for prefix, table in tables:
        seen: dict[str, str] = {}
        for key in table:
            canon = canonicalize_name(key)
            if canon in seen:
                out.append(Problem(f"{prefix}.{key}", f"names the same distribution as '{seen[canon]}' "
                                   f"(both normalise to '{canon}'); keep one",
                                   line_of(text, f"{prefix}.{key}")))
            seen.setdefault(canon, key)
    accepted: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(data.get("verify", {}).get("accept", [])):
        pair = (str(entry["kind"]), str(entry["subject"]))
        if pair in accepted:
            out.append(Problem(f"verify.accept[{i}]", f"accepts {pair[0]} '{pair[1]}' again (already "
                               f"verify.accept[{accepted[pair]}]); keep one entry", line_of(text, "verify.accept")))
        accepted.setdefault(pair, i)
        between = entry.get("between")
        if between is None:
            continue
        where = line_of(text, "verify.accept.between")
        if pair[0] != "file-conflict":
            out.append(Problem(f"verify.accept[{i}].between", f"applies only to kind \"file-conflict\" (this entry "
                               f"is {pair[0]}); pin other kinds with actual", where))
        elif len(between) < 2 or len(set(between)) != len(between):
            out.append(Problem(f"verify.accept[{i}].between", "list the two (or more) different distributions the "
                               "finding names, e.g. [\"flashinfer-python 0.6.3\", \"torch-c-dlpack-ext 0.1.5\"]",
                               where))
    return out


def _build(path: Path, data: Mapping[str, Any], text: str) -> Recipe:
    meta = data["recipe"]
    if path.parent.name == "recipes" and path.stem != meta["name"]:
        raise RecipeError(f"{path}: recipe.name '{meta['name']}' does not match the file name '{path.name}'",
                          hint=f"rename the file to recipes/{meta['name']}.toml or set name = \"{path.stem}\"")
    t = data.get("target", {})
    target = Target(gpu=t.get("gpu"), compute_capability=t.get("compute-capability"),
                    gpus=t.get("gpus"), interconnect=t.get("interconnect"),
                    platform=t.get("platform", DEFAULT_PLATFORM), cuda_driver_min=t.get("cuda-driver-min"))
    variants = tuple(sorted(data.get("variant", {}))) or (DEFAULT_VARIANT,)
    for v in variants:
        if (msg := lock_name_problem(f"{meta['name']}-{v}")) is not None:
            raise RecipeError(f"{path}: variant.{v}: {msg}")
    return Recipe(
        path=path, name=meta["name"], python=meta["python"], description=meta.get("description"),
        resolution=meta.get("resolution", "full"), target=target,
        patchsets=tuple(meta.get("patchsets", ())), variants=variants,
        env_profiles={k: dict(v) for k, v in data.get("env", {}).items()}, data=data, text=text,
    )
