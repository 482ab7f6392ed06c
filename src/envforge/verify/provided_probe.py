# mypy: ignore-errors
# (a probe script: run by the environment's own interpreter)
"""Probe run inside the environment's own interpreter by verify's ``provided`` check (stdlib only).

argv[1] is JSON ``[{"name", "import"}]``. Prints one JSON line: per name, ``metadata`` (the version
``importlib.metadata`` reports, or null), ``location`` (the directory holding its dist-info),
``import_version`` (the module's ``__version__`` after importing it, or null), ``file`` (its
``__file__``) and ``error`` (why the import failed, or null).
"""

import importlib
import importlib.metadata
import json
import sys


def one(name, module):
    out = {"metadata": None, "location": None, "import_version": None, "file": None, "error": None}
    try:
        dist = importlib.metadata.distribution(name)
        out["metadata"] = dist.version
        out["location"] = str(dist.locate_file(""))
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        mod = importlib.import_module(module)
        version = getattr(mod, "__version__", None)
        out["import_version"] = None if version is None else str(version)
        out["file"] = getattr(mod, "__file__", None)
    except Exception as exc:  # noqa: BLE001 (any import failure is the finding)
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return out


def main():
    rows = json.loads(sys.argv[1])
    print(json.dumps({r["name"]: one(r["name"], r["import"]) for r in rows}))


if __name__ == "__main__":
    main()
