# mypy: ignore-errors
# (a probe script: run by the environment's own interpreter, stdlib only, never imported by envforge)
"""Probe run inside the environment's own interpreter: which file each module name resolves to.

argv[1] is JSON ``{"modules": {relative path: dotted module name}}``. Prints one JSON line:
``python``, ``extension_suffixes`` and ``source_suffixes`` (``importlib.machinery``), and
``modules``: per path, the resolution chain, one entry per level of the dotted name
(``{"module", "origin", "loader", "locations"}``, or ``{"module", "error"}``), ending where the
name stops resolving.

The import system's own finders decide, and no module is executed: the top-level name goes
through ``importlib.util.find_spec`` (every ``sys.meta_path`` finder, then ``sys.path``, as
``import`` does; nothing is imported for a top-level name). ``find_spec`` of a submodule would
import its parents and run their ``__init__`` code, so a submodule is looked up with
``importlib.machinery.PathFinder.find_spec`` on its parent's ``__path__``: the parent's
``submodule_search_locations`` as its spec computes them from the filesystem, or the parent's real
``__path__`` when start-up code already imported it (a parent not imported is stood in for by an
empty module object holding that ``__path__``, so a namespace package's path can be computed).
What this cannot see: a ``__path__`` that a package's ``__init__`` changes when it runs, and a
custom ``sys.meta_path`` finder that serves a submodule. The ``''`` entry ``python -c`` puts first on ``sys.path`` (the current directory) is removed.
"""

import importlib.machinery
import importlib.util
import json
import platform
import sys
import types


def _entry(name, spec):
    if spec is None:
        return {"module": name, "origin": None, "loader": None, "locations": None}
    locations = spec.submodule_search_locations
    # a namespace package's _NamespacePath recomputes itself from the parent module in sys.modules
    # when iterated (the parent is not imported here): read the list its finder found
    locations = getattr(locations, "_path", locations)
    return {
        "module": name,
        "origin": spec.origin if spec.has_location else None,
        "loader": type(spec.loader).__name__ if spec.loader is not None else None,
        "locations": None if locations is None else [str(p) for p in locations],
    }


def resolve(name):
    """The chain of specs for ``name``, top level first; it stops at the first level that does
    not resolve or is not a package."""
    parts = name.split(".")
    chain = []
    locations = parent = parent_spec = None
    for i in range(len(parts)):
        full = ".".join(parts[: i + 1])
        try:
            if i == 0:
                spec = importlib.util.find_spec(full)
            else:
                _stand_in(parent, parent_spec, locations)
                spec = importlib.machinery.PathFinder.find_spec(full, locations)
        except (ImportError, ValueError, AttributeError, KeyError) as exc:
            chain.append({"module": full, "error": f"{type(exc).__name__}: {exc}"})
            break
        entry = _entry(full, spec)
        chain.append(entry)
        if spec is None or entry["locations"] is None:
            break
        loaded = sys.modules.get(full)
        path = getattr(loaded, "__path__", None)
        locations = [str(p) for p in path] if path is not None else entry["locations"]
        parent, parent_spec = full, spec
    return chain


def _stand_in(name, spec, locations):
    """Put an empty module object for package ``name`` (never imported here) in ``sys.modules``,
    with the ``__path__`` its spec computed: a namespace package's path recomputes itself from
    its parent there. No code of the package runs; a module start-up code imported stays."""
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__spec__ = spec
        module.__path__ = list(locations)
        sys.modules[name] = module


def main():
    sys.dont_write_bytecode = True
    if sys.path and sys.path[0] == "":
        del sys.path[0]
    cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "extension_suffixes": list(importlib.machinery.EXTENSION_SUFFIXES),
                "source_suffixes": list(importlib.machinery.SOURCE_SUFFIXES),
                "modules": {path: resolve(name) for path, name in cfg.get("modules", {}).items()},
            }
        )
    )


if __name__ == "__main__":
    main()
