"""Every finding kind verify's producers emit is registered (envforge.core.kinds) at the level that emits it.

The producers are read from the sources with :mod:`ast`: each ``Finding(...)`` call with a literal
kind, and each call of a helper that wraps one (``_f`` of verify/gpu.py: ``Finding(kind, ...,
level="gpu")``), with its literal ``level`` (none: ``static``; a variable: a level-less kind).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envforge.core.kinds import DRAFTER, DRAFTER_KIND_PREFIXES, REGISTRY, kind_of
from envforge.verify.findings import Finding

VERIFY = Path(__file__).resolve().parents[2] / "src" / "envforge" / "verify"
ANY = "<any level>"


def _level(call: ast.Call) -> str:
    """The literal level of a ``Finding(...)`` call (keyword or sixth argument), ``static`` when not given."""
    given = next((k.value for k in call.keywords if k.arg == "level"), call.args[5] if len(call.args) > 5 else None)
    if given is None:
        return "static"
    return given.value if isinstance(given, ast.Constant) else ANY


def _wrappers(tree: ast.Module) -> dict[str, str]:
    """Functions whose body returns ``Finding(<their first parameter>, ...)``: name -> the level they give."""
    out = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.args.args:
            continue
        first = fn.args.args[0].arg
        for ret in ast.walk(fn):
            if (
                isinstance(ret, ast.Return)
                and isinstance(ret.value, ast.Call)
                and isinstance(ret.value.func, ast.Name)
                and ret.value.func.id == "Finding"
                and ret.value.args
                and isinstance(ret.value.args[0], ast.Name)
                and ret.value.args[0].id == first
            ):
                out[fn.name] = _level(ret.value)
    return out


def produced() -> dict[str, set[tuple[str, str]]]:
    """``{kind: {(module, level), ...}}`` for every Finding a verify module builds with a literal kind."""
    out: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(VERIFY.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        wrappers = {"Finding": "", **_wrappers(tree)}
        for call in ast.walk(tree):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id in wrappers
                and call.args
                and isinstance(call.args[0], ast.Constant)
            ):
                continue
            level = wrappers[call.func.id] or _level(call)
            out.setdefault(str(call.args[0].value), set()).add((path.name, level))
    return out


PRODUCED = produced()
#: Kinds a verify module builds itself at the drafter level (the others come from envforge.drafter).
PRODUCED_DRAFTER = {k: v for k, v in PRODUCED.items() if k.startswith(DRAFTER_KIND_PREFIXES)}
for _k in PRODUCED_DRAFTER:
    del PRODUCED[_k]


def test_the_scan_finds_the_producers() -> None:
    assert PRODUCED["nccl-library"] == {("nccllibrary.py", "gpu")}
    assert PRODUCED["interconnect"] == {("topology.py", "gpu")}
    assert PRODUCED["engine-variable"] == {("variables.py", "static")}
    assert PRODUCED["tampered"] == {("records.py", "static")}
    assert PRODUCED["missing-file"] == {("records.py", "static")}
    assert PRODUCED["env-profile"] == {("static.py", "static"), ("variables.py", "static")}
    assert PRODUCED["launcher-override"] == {("effective.py", "static")}
    assert PRODUCED["nothing-to-check"] == {("runner.py", ANY)}
    assert PRODUCED["acceptance-unmatched"] == {("acceptance.py", ANY)}
    assert PRODUCED["acceptance-expired"] == {("acceptance.py", "static")}
    assert PRODUCED["startup-code"] == {("startup.py", "static")}
    assert PRODUCED["startup-code-outside"] == {("startup.py", "static")}


def test_every_registered_kind_has_a_producer_and_every_produced_kind_is_registered() -> None:
    assert sorted(PRODUCED) == sorted(REGISTRY)


def test_drafter_kinds_verify_builds_itself_are_drafter_level() -> None:
    assert PRODUCED_DRAFTER == {"drafter-engine-unproven": {("runner.py", "drafter")}}
    assert all(kind_of(k) is DRAFTER for k in PRODUCED_DRAFTER)


@pytest.mark.parametrize("kind", sorted(PRODUCED))
def test_a_produced_kind_is_registered_at_the_level_that_produces_it(kind: str) -> None:
    entry = REGISTRY[kind]
    for module, level in PRODUCED[kind]:
        if level == ANY:
            assert entry.any_level, f"{module} builds {kind} at a computed level: register it any_level"
        else:
            assert entry.level == level, f"{module} builds {kind} at level {level}; registered {entry.level}"


def test_every_check_a_kind_names_is_a_check_verify_runs() -> None:
    """The names in the registry's ``checks`` are names of checks the producers record (``Check(...)``,
    ``c.add(...)``/``c.skip(...)``), so the JUnit grouping has no dead names."""
    names = set()
    for path in VERIFY.glob("*.py"):
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(call, ast.Call)
                and call.args
                and isinstance(call.args[0], ast.Constant)
                and (
                    isinstance(call.func, ast.Name)
                    and call.func.id == "Check"
                    or isinstance(call.func, ast.Attribute)
                    and call.func.attr in ("add", "skip")
                )
            ):
                names.add(call.args[0].value)
    registered = {c for k in REGISTRY.values() for c in k.checks}
    assert registered - names == set()
    assert {"nccl", "record", "patched-files", "accept", "drafter"} <= names


def test_the_json_shape_of_a_finding_is_unchanged() -> None:
    """``from_recipe`` (why ``up`` does not rebuild for it) is not part of ``envforge.verify/1``."""
    f = Finding("env-profile", "NCCL_BUFFSIZE", "e", "a", "fix", from_recipe=True)
    assert f.as_dict() == {
        "kind": "env-profile",
        "level": "static",
        "subject": "NCCL_BUFFSIZE",
        "expected": "e",
        "actual": "a",
        "fix": "fix",
    }
