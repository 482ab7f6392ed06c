# mypy: ignore-errors
# (a probe script: run by the environment's own interpreter, importing optional GPU packages)
"""Probe run inside the environment's own interpreter by static verify (stdlib only).

argv[1] (optional) is JSON ``{"bytecode": [source paths]}``. Prints one JSON line: ``python``,
``markers`` (the PEP 508 marker environment, computed as packaging.markers does),
``sitecustomize`` (the file of the sitecustomize module this interpreter imported, or null; field
case B11), ``site`` (what the site module ran at this start: ``dirs``, the site directories whose
``.pth`` files it processed; ``stdlib``, the standard library's directories; ``sitecustomize`` and
``usercustomize``, the files of those modules it imported, or null; ``sys_path``; field case B36)
and ``bytecode``: per source path, null when this interpreter has no cached bytecode for
it, else ``{"pyc", "mode", "stale"}`` where ``stale`` says whether the code this interpreter would
load (``SourceFileLoader.get_code``: the cached ``.pyc`` when its own rules accept it) differs from
compiling the source now (field case B10; CPython issue 121376); ``metadata``: what
``importlib.metadata`` finds (:func:`metadata`). Nothing is written.
"""

import json
import os
import platform
import sys


def marker_environment():
    """PEP 508 marker variables (same definitions as packaging.markers.default_environment)."""
    impl = sys.implementation
    v = impl.version
    impl_version = f"{v.major}.{v.minor}.{v.micro}"
    if v.releaselevel != "final":
        impl_version += v.releaselevel[0] + str(v.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def _same_code(a, b):
    if a.co_code != b.co_code or a.co_names != b.co_names or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):  # noqa: B905 (lengths checked; runs on older Pythons)
        if hasattr(x, "co_code") or hasattr(y, "co_code"):
            if not (hasattr(x, "co_code") and hasattr(y, "co_code") and _same_code(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def bytecode(path):
    import importlib.machinery
    import importlib.util

    pyc = importlib.util.cache_from_source(path)
    if not os.path.exists(pyc):
        return None
    with open(pyc, "rb") as f:
        flags = int.from_bytes(f.read(16)[4:8], "little")
    mode = ("unchecked-hash" if not flags & 2 else "checked-hash") if flags & 1 else "timestamp"
    loaded = importlib.machinery.SourceFileLoader("envforge_verify_probe", path).get_code("envforge_verify_probe")
    with open(path, "rb") as f:
        fresh = compile(f.read(), path, "exec", dont_inherit=True)
    return {"pyc": pyc, "mode": mode, "stale": not _same_code(loaded, fresh)}


def site_info():
    """What the site module ran at this interpreter start (see the module docstring)."""
    import site
    import sysconfig

    dirs = list(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    seen, out = set(), []
    for d in dirs:
        real = os.path.realpath(d)
        if os.path.isdir(real) and real not in seen:
            seen.add(real)
            out.append(d)
    info = {
        "dirs": out,
        "stdlib": [sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")],
        "sys_path": list(sys.path),
    }
    for name in ("sitecustomize", "usercustomize"):
        info[name] = getattr(sys.modules.get(name), "__file__", None)
    return info


def metadata():
    """What ``importlib.metadata`` finds, in its own order (the first of a name is what
    ``version(name)`` reports): ``[name, version, dist-info path]`` per distribution."""
    import importlib.metadata

    out = []
    for dist in importlib.metadata.distributions():
        try:
            name, version = dist.metadata["Name"], dist.version
        except Exception:  # noqa: BLE001 - a broken METADATA is reported as such, never a crash of the probe
            name, version = None, None
        path = getattr(dist, "_path", None)
        out.append([name, version, str(path) if path is not None else None])
    return out


def main():
    sys.dont_write_bytecode = True
    cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    sc = sys.modules.get("sitecustomize")
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "markers": marker_environment(),
                "sitecustomize": getattr(sc, "__file__", None),
                "site": site_info(),
                "bytecode": {p: bytecode(p) for p in cfg.get("bytecode", [])},
                "metadata": metadata(),
            }
        )
    )


if __name__ == "__main__":
    main()
