"""Target platforms: the values uv accepts for ``--python-platform``, and whether a machine can run one.

A recipe (or one of its variants) names the platform its lock is resolved for, e.g.
``x86_64-manylinux_2_28`` (an x86_64 Linux machine with glibc 2.28 or newer) or
``aarch64-manylinux_2_34`` (Grace-Hopper/Grace-Blackwell nodes with glibc 2.34 or newer). Locking
for another platform works from any machine (uv resolves from index metadata); building does not:
the wheels must run on the machine that builds.

Source of :data:`UV_PLATFORMS`: ``uv pip compile --help`` of uv 0.13.9 (the "possible values" of
``--python-platform``); ``tests/recipe/test_platforms.py`` compares it with the installed uv so the list
stays in step. uv documents ``linux``/``*-unknown-linux-gnu`` as the manylinux_2_28 target of that
architecture (uv's ``TargetTriple`` docs), which :func:`parse_platform` follows.
"""

from __future__ import annotations

import difflib
import os
import platform as _host
import re
from dataclasses import dataclass

__all__ = ["UV_PLATFORMS", "Platform", "host_problem", "parse_platform", "platform_problem"]

UV_PLATFORMS: tuple[str, ...] = (
    "windows",
    "linux",
    "macos",
    "x86_64-pc-windows-msvc",
    "aarch64-pc-windows-msvc",
    "i686-pc-windows-msvc",
    "x86_64-unknown-linux-gnu",
    "aarch64-apple-darwin",
    "x86_64-apple-darwin",
    "aarch64-unknown-linux-gnu",
    "aarch64-unknown-linux-musl",
    "x86_64-unknown-linux-musl",
    "riscv64-unknown-linux",
    "x86_64-manylinux2014",
    "x86_64-manylinux_2_17",
    "x86_64-manylinux_2_28",
    "x86_64-manylinux_2_31",
    "x86_64-manylinux_2_32",
    "x86_64-manylinux_2_33",
    "x86_64-manylinux_2_34",
    "x86_64-manylinux_2_35",
    "x86_64-manylinux_2_36",
    "x86_64-manylinux_2_37",
    "x86_64-manylinux_2_38",
    "x86_64-manylinux_2_39",
    "x86_64-manylinux_2_40",
    "aarch64-manylinux2014",
    "aarch64-manylinux_2_17",
    "aarch64-manylinux_2_28",
    "aarch64-manylinux_2_31",
    "aarch64-manylinux_2_32",
    "aarch64-manylinux_2_33",
    "aarch64-manylinux_2_34",
    "aarch64-manylinux_2_35",
    "aarch64-manylinux_2_36",
    "aarch64-manylinux_2_37",
    "aarch64-manylinux_2_38",
    "aarch64-manylinux_2_39",
    "aarch64-manylinux_2_40",
    "aarch64-linux-android",
    "x86_64-linux-android",
    "wasm32-pyodide2024",
    "wasm32-pyodide2025",
    "arm64-apple-ios",
    "arm64-apple-ios-simulator",
    "x86_64-apple-ios-simulator",
)

# Spellings people use for the same machines (Docker, Go, Debian), mapped to uv's names.
_ALIASES = {"arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "x86_64": "x86_64"}


@dataclass(frozen=True, slots=True)
class Platform:
    """A uv target platform: ``os`` (``linux``, ``windows``, ``macos``, ...), ``machine``
    (``x86_64``, ``aarch64``, ...; None where uv's name gives none) and, for glibc Linux, the
    minimum ``glibc`` as ``(major, minor)``."""

    name: str
    os: str
    machine: str | None
    glibc: tuple[int, int] | None


def parse_platform(name: str) -> Platform:
    """Split a value of :data:`UV_PLATFORMS` into OS, machine and minimum glibc.

    >>> parse_platform("aarch64-manylinux_2_34")
    Platform(name='aarch64-manylinux_2_34', os='linux', machine='aarch64', glibc=(2, 34))

    :raises ValueError: ``name`` is not one of :data:`UV_PLATFORMS`.
    """
    if name not in UV_PLATFORMS:
        raise ValueError(platform_problem(name))
    if name in ("linux", "windows", "macos"):
        machine = "x86_64" if name != "macos" else None
        return Platform(name, name, machine, (2, 28) if name == "linux" else None)
    machine = name.split("-", 1)[0]
    if m := re.search(r"manylinux_(\d+)_(\d+)$", name):
        return Platform(name, "linux", machine, (int(m.group(1)), int(m.group(2))))
    if name.endswith("manylinux2014"):
        return Platform(name, "linux", machine, (2, 17))
    if name.endswith("unknown-linux-gnu"):
        return Platform(name, "linux", machine, (2, 28))
    if "linux" in name and "android" not in name:
        return Platform(name, "linux", machine, None)  # musl, riscv64
    os_name = "windows" if "windows" in name else "macos" if "darwin" in name else name.split("-", 1)[1]
    return Platform(name, os_name, machine, None)


def platform_problem(name: str) -> str | None:
    """Why ``name`` is not a platform uv accepts (with a did-you-mean), or None when it is."""
    if name in UV_PLATFORMS:
        return None
    guess = _guess(name)
    if guess is None:
        close = difflib.get_close_matches(name, UV_PLATFORMS, n=1, cutoff=0.6)
        guess = close[0] if close else None
    tail = f"; did you mean '{guess}'?" if guess else ""
    return (
        f"'{name}' is not a platform uv can resolve for (uv --python-platform){tail} "
        "e.g. 'x86_64-manylinux_2_28' or 'aarch64-manylinux_2_34' (arch-manylinux_2_<glibc minor>)"
    )


def _guess(name: str) -> str | None:
    """``linux/arm64`` (Docker) -> ``aarch64-manylinux_2_28``; ``amd64`` -> ``x86_64-manylinux_2_28``."""
    low = name.lower().replace("x86-64", "x86_64").replace("x86_64", "amd64")
    machines = [_ALIASES[w] for w in re.split(r"[/\-_ .]+", low) if w in _ALIASES]
    if not machines:
        return None
    m = re.search(r"manylinux[_-]?(\d+)[_.-](\d+)", low)
    guess = f"{machines[0]}-manylinux_{m.group(1)}_{m.group(2)}" if m else f"{machines[0]}-manylinux_2_28"
    return guess if guess in UV_PLATFORMS else None


def _host_glibc() -> tuple[int, int] | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    m = re.search(r"glibc (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def host_problem(
    name: str, *, machine: str | None = None, glibc: tuple[int, int] | None = None, os_name: str | None = None
) -> str | None:
    """Why this machine cannot run wheels for platform ``name``, or None when it can.

    ``machine``, ``glibc`` and ``os_name`` default to this machine's (``platform.machine()``,
    ``os.confstr("CS_GNU_LIBC_VERSION")``, ``sys.platform``); tests pass others.
    A manylinux_2_X platform needs glibc 2.X or newer (PEP 600).
    """
    target = parse_platform(name)
    machine = machine or _host.machine()
    os_name = os_name or ("linux" if _host.system() == "Linux" else _host.system().lower())
    here = f"this machine is {os_name} {machine}"
    if target.os != os_name:
        return f"the lock is for {name} ({target.os}), {here}"
    if target.machine is not None and _ALIASES.get(machine, machine) != target.machine:
        return f"the lock is for {name} ({target.machine}), {here}"
    if target.glibc is not None:
        have = glibc if glibc is not None else _host_glibc()
        if have is not None and have < target.glibc:
            return (
                f"the lock is for {name}, which needs glibc {target.glibc[0]}.{target.glibc[1]} or newer; "
                f"{here} with glibc {have[0]}.{have[1]}"
            )
    return None
