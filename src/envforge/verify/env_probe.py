# mypy: ignore-errors
# (a probe script: run by the environment's own interpreter, importing optional GPU packages)
"""Probe run inside the environment's own interpreter by static verify (stdlib only).

Prints one JSON line: ``python``, ``markers`` (the PEP 508 marker environment, computed as
packaging.markers does) and ``sitecustomize`` (the file of the sitecustomize module this
interpreter imported, or null; field case B11).
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


def main():
    sc = sys.modules.get("sitecustomize")
    print(json.dumps({"python": platform.python_version(), "markers": marker_environment(),
                      "sitecustomize": getattr(sc, "__file__", None)}))


if __name__ == "__main__":
    main()
