"""Reading a recipe file: TOML, the schema, the checks across keys, into a :class:`Recipe`.

:func:`load_recipe` is the one way a ``recipes/*.toml`` file becomes a
:class:`envforge.recipe.model.Recipe`; every problem is named ``file:line: key.path: message``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.schema import Problem, format_problems, line_of, validate
from envforge.core.textfile import SMALL_LIMIT, load_toml
from envforge.recipe.model import DEFAULT_PLATFORM, DEFAULT_VARIANT, Recipe, RecipeError, Target
from envforge.recipe.schema import RECIPE_SPEC, lock_name_problem

__all__ = ["load_recipe"]


def load_recipe(path: Path) -> Recipe:
    """Read and validate a recipe file.

    :raises RecipeError: unreadable file, larger than 1 MiB, not UTF-8, TOML syntax error (with
        line), nesting too deep (:mod:`envforge.core.textfile`), or schema problems, each
        rendered as ``file:line: key.path: message`` with a did-you-mean for unknown keys; a
        ``[build-from-source]`` opt-in without ``[recipe] build-constraints`` (B28).
    """
    data, text = load_toml(path, what="recipe", limit=SMALL_LIMIT, error=RecipeError)
    problems = _unreviewed(validate(data, RECIPE_SPEC, text), data) or (
        _duplicates(data, text) + _retirements(data, text) + _provided_clashes(data, text)
    )
    if problems:
        raise RecipeError(
            format_problems("recipe", str(path), problems), hint="see docs/recipes.md for the recipe schema"
        )
    return _build(path, data, text)


def _unreviewed(problems: list[Problem], data: Mapping[str, Any]) -> list[Problem]:
    """``problems`` without the unknown-name ones of the names ``[nccl-unknown]`` lists (reviewed,
    each with its reason; :func:`envforge.recipe.envvars.problems` with ``reviewed``)."""
    given = data.get("nccl-unknown")
    reviewed: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    return [
        p
        for p in problems
        if not (p.path.rsplit(".", 1)[-1] in reviewed and p.message.startswith("no NCCL release envforge knows"))
    ]


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
                out.append(
                    Problem(
                        f"{prefix}.{key}",
                        f"names the same distribution as '{seen[canon]}' (both normalise to '{canon}'); keep one",
                        line_of(text, f"{prefix}.{key}"),
                    )
                )
            seen.setdefault(canon, key)
    accepted: dict[tuple[str, str], list[tuple[int, frozenset[str] | None]]] = {}
    for i, entry in enumerate(data.get("verify", {}).get("accept", [])):
        pair = (str(entry["kind"]), str(entry["subject"]))
        scope = frozenset(entry["variants"]) if "variants" in entry else None  # None: every variant
        clash = next(
            (j for j, other in accepted.get(pair, []) if scope is None or other is None or scope & other), None
        )
        if clash is not None:
            out.append(
                Problem(
                    f"verify.accept[{i}]",
                    f"accepts {pair[0]} '{pair[1]}' again (already verify.accept[{clash}]); keep one entry",
                    line_of(text, "verify.accept"),
                )
            )
        accepted.setdefault(pair, []).append((i, scope))
        between = entry.get("between")
        if between is None:
            continue
        where = line_of(text, "verify.accept.between")
        if pair[0] != "file-conflict":
            out.append(
                Problem(
                    f"verify.accept[{i}].between",
                    f'applies only to kind "file-conflict" (this entry is {pair[0]}); pin other kinds with actual',
                    where,
                )
            )
        elif len(between) < 2 or len(set(between)) != len(between):
            out.append(
                Problem(
                    f"verify.accept[{i}].between",
                    "list the two (or more) different distributions the "
                    'finding names, e.g. ["flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"]',
                    where,
                )
            )
    return out


def _retirements(data: Mapping[str, Any], text: str) -> list[Problem]:
    """Each ``retire-patchsets`` entry ([recipe] or [variant.V]) names a patchset ``[recipe] patchsets``
    lists, once per table; each ``[[verify.accept]] variants`` item names a variant of the recipe."""
    listed = list(data["recipe"].get("patchsets", ()))
    tables = [("recipe", data["recipe"])] + [(f"variant.{v}", t) for v, t in data.get("variant", {}).items()]
    out = []
    for prefix, table in tables:
        seen: set[str] = set()
        for i, entry in enumerate(table.get("retire-patchsets", ())):
            key, pid = f"{prefix}.retire-patchsets[{i}].id", str(entry["id"])
            where = line_of(text, f"{prefix}.retire-patchsets")
            if pid not in listed:
                out.append(
                    Problem(
                        key,
                        f"retires '{pid}', which [recipe] patchsets does not list "
                        f"(it lists: {', '.join(listed) or 'none'})",
                        where,
                    )
                )
            elif pid in seen:
                out.append(Problem(key, f"retires '{pid}' again; keep one entry", where))
            seen.add(pid)
    variants = set(data.get("variant", {})) or {DEFAULT_VARIANT}
    for i, entry in enumerate(data.get("verify", {}).get("accept", [])):
        for name in entry.get("variants", ()):
            if name not in variants:
                out.append(
                    Problem(
                        f"verify.accept[{i}].variants",
                        f"'{name}' is not a variant of this recipe (it has: {', '.join(sorted(variants))})",
                        line_of(text, "verify.accept"),
                    )
                )
    return out


def _unpinned_source_builds(data: Mapping[str, Any], text: str) -> list[Problem]:
    """B28: a ``[build-from-source]`` opt-in (base or ``[variant.V]``) needs a pinned build backend.

    Without ``[recipe] build-constraints`` uv would build the sdist with whatever backend version it
    resolves on the day of the install (README: "packages without a wheel build only with an opt-in
    and pinned build backends"; fault suite N83). One problem per opted-in distribution.
    """
    if data["recipe"].get("build-constraints"):
        return []
    tables = [("build-from-source", data.get("build-from-source", {}))]
    tables += [
        (f"variant.{v}.build-from-source", t.get("build-from-source", {})) for v, t in data.get("variant", {}).items()
    ]
    return [
        Problem(
            f"{prefix}.{name}",
            "is built from source at install time, but [recipe] build-constraints "
            "pins no build backend, so the build would use whatever version uv finds that day; pin the "
            "backend its pyproject.toml [build-system] requires, e.g. build-constraints = "
            '["setuptools==80.9.0"]',
            line_of(text, f"{prefix}.{name}"),
        )
        for prefix, table in tables
        for name in table
    ]


def _provided_clashes(data: Mapping[str, Any], text: str) -> list[Problem]:
    """A ``[provided]`` or ``[excludes]`` distribution is never locked: naming it in ``packages`` or
    ``overrides`` too (base or variant) would ask for both, so it is refused; an excluded name in a
    variant's ``packages`` or ``overrides`` is refused only against that variant's (or the base's) list."""
    provided: set[str] = {canonicalize_name(k) for k in data.get("provided", {})}
    excluded: set[str] = {canonicalize_name(k) for k in data.get("excludes", {})}
    tables: list[tuple[str, Mapping[str, Any], set[str]]] = [
        (k, data.get(k, {}), excluded) for k in ("packages", "overrides")
    ]
    for vname, v in data.get("variant", {}).items():
        mine: set[str] = excluded | {canonicalize_name(k) for k in v.get("excludes", {})}
        tables += [(f"variant.{vname}.{k}", v.get(k, {}), mine) for k in ("packages", "overrides")]
    return [
        Problem(
            f"{prefix}.{key}",
            f"'{key}' is declared in [provided] (the base interpreter provides it, "
            "envforge never installs it); remove one of the two"
            if canonicalize_name(key) in provided
            else f"'{key}' is declared in [excludes] (left out of the resolution); remove one of the two",
            line_of(text, f"{prefix}.{key}"),
        )
        for prefix, table, gone in tables
        for key in table
        if canonicalize_name(key) in provided | gone
    ]


def _build(path: Path, data: Mapping[str, Any], text: str) -> Recipe:
    meta = data["recipe"]
    if problems := _unpinned_source_builds(data, text):
        raise RecipeError(
            format_problems("recipe", str(path), problems), hint='see docs/recipes.md, "Source builds (B28)"'
        )
    if path.parent.name == "recipes" and path.stem != meta["name"]:
        raise RecipeError(
            f"{path}: recipe.name '{meta['name']}' does not match the file name '{path.name}'",
            hint=f'rename the file to recipes/{meta["name"]}.toml or set name = "{path.stem}"',
        )
    t = data.get("target", {})
    target = Target(
        gpu=t.get("gpu"),
        compute_capability=t.get("compute-capability"),
        gpus=t.get("gpus"),
        interconnect=t.get("interconnect"),
        platform=t.get("platform", DEFAULT_PLATFORM),
        cuda_driver_min=t.get("cuda-driver-min"),
    )
    variants = tuple(sorted(data.get("variant", {}))) or (DEFAULT_VARIANT,)
    for v in variants:
        if (msg := lock_name_problem(f"{meta['name']}-{v}")) is not None:
            raise RecipeError(f"{path}: variant.{v}: {msg}")
    return Recipe(
        path=path,
        name=meta["name"],
        python=meta["python"],
        description=meta.get("description"),
        resolution=meta.get("resolution", "full"),
        target=target,
        patchsets=tuple(meta.get("patchsets", ())),
        variants=variants,
        env_profiles={k: dict(v) for k, v in data.get("env", {}).items()},
        data=data,
        text=text,
    )
