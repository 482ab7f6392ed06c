"""Small real projects for the lock oracle tests: a grid of pyproject.toml files uv locks for real.

The layouts are the ones public GPU projects use with uv (uv's PyTorch guide and the locks it writes):
a base ``torchy`` on the default index plus per-extra (or per-group) variants from explicit indexes,
declared in ``[tool.uv] conflicts``; packages needed only under one extra; forks per platform and per
Python; ``override-dependencies``; sources per extra or group. Every combination of :data:`AXES` is one
:class:`Project`; :func:`grid` lists them in a fixed order, so a sample (every k-th) is the same on
every machine.

Indexes (:func:`build_indexes`), all real PEP 503 directories served on 127.0.0.1
(:mod:`tests.support.localindex`): ``cpu`` (``torchy`` ``+cpu``), ``gpu`` (``+cu1``), ``rocm``
(``+rocm1``), and ``pub``, the default index, with the base ``torchy``, ``lib`` (needs ``torchy``: the
base entry outside every extra, which makes uv write negative conflict markers), ``helper`` (needs
``torchy``), ``onlycpu`` (needs ``torchy`` and ``tail``: a chain only the ``cpu`` extra pulls),
``six`` (two versions forked per platform), ``pyf`` (two versions forked per Python) and ``grp``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from tests.support.localindex import LocalIndex, make_wheel

VERSIONS = ("2.0.0", "2.1.0")
LOCALS = {"cpu": "cpu", "gpu": "cu1", "rocm": "rocm1"}


def build_indexes(root: Path) -> dict[str, LocalIndex]:
    """``{"cpu", "gpu", "rocm", "pub"}`` -> index under ``root/<name>``, wheels built into
    ``root/wheels/<name>``; not served yet (:func:`tests.support.localindex.serve`)."""
    indexes = {name: LocalIndex(root / name) for name in (*LOCALS, "pub")}
    wheels = root / "wheels"
    for name, label in LOCALS.items():
        for version in VERSIONS:
            indexes[name].add(make_wheel(wheels / name, "torchy", f"{version}+{label}"))
    pub = indexes["pub"]
    for version in VERSIONS:
        pub.add(make_wheel(wheels / "pub", "torchy", version))
    pub.add(make_wheel(wheels / "pub", "lib", "1.0", requires=["torchy"]))
    pub.add(make_wheel(wheels / "pub", "helper", "1.0", requires=["torchy"]))
    pub.add(make_wheel(wheels / "pub", "onlycpu", "1.0", requires=["torchy", "tail"]))
    pub.add(make_wheel(wheels / "pub", "tail", "1.0"))
    for name, version in (
        ("six", "1.16.0"),
        ("six", "1.17.0"),
        ("pyf", "1.0"),
        ("pyf", "2.0"),
        ("grp", "1.0"),
        ("grp", "2.0"),
    ):
        pub.add(make_wheel(wheels / "pub", name, version))
    return indexes


#: The grid's axes, each with its values in order.
AXES: dict[str, tuple[str, ...]] = {
    "conflicts": ("extras2", "extras3", "groups", "extras+groups"),
    "base": ("none", "lib"),  # lib (outside every extra) needs the base torchy
    "chain": ("none", "onlycpu"),  # a chain only the cpu extra (or group ga) pulls
    "fork": ("none", "platform", "python"),
    "pins": ("same", "per-extra"),  # torchy >=2 everywhere, or ==2.0.* under cpu and >=2.1 elsewhere
    "override": ("none", "six"),  # [tool.uv] override-dependencies
    "python": (">=3.10", ">=3.11"),  # requires-python
}


@dataclass(frozen=True)
class Project:
    """One grid point: ``values`` maps each axis of :data:`AXES` to its value."""

    values: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        """A directory name: the values joined (``extras2-lib-none-platform-same-none``)."""
        return "-".join(v.replace("+", "_").replace(">=", "py") for _, v in self.values)

    def get(self, axis: str) -> str:
        """The value of ``axis``."""
        return dict(self.values)[axis]

    @property
    def selectors(self) -> tuple[str, ...]:
        """The extras (``cpu``) and groups (``:ga``) the conflicts are declared between."""
        kind = self.get("conflicts")
        extras = ("cpu", "gpu", "rocm") if kind == "extras3" else ("cpu", "gpu") if "extras" in kind else ()
        groups = (":ga", ":gb") if "groups" in kind else ()
        return (*extras, *groups)

    def selections(self) -> list[tuple[str, ...]]:
        """Every valid choice of selectors uv accepts: none, one, or one extra with one group."""
        extras = [s for s in self.selectors if not s.startswith(":")]
        groups = [s for s in self.selectors if s.startswith(":")]
        out: list[tuple[str, ...]] = [()]
        out += [(s,) for s in self.selectors]
        out += [(e, g) for e in extras for g in groups]
        return out

    def pyproject(self, indexes: dict[str, LocalIndex]) -> str:
        """The ``pyproject.toml`` text of this project against the served ``indexes``."""
        kind = self.get("conflicts")
        deps = []
        if self.get("base") == "lib":
            deps.append("lib")
        if self.get("fork") == "platform":
            deps += ["six==1.16.0; sys_platform == 'linux'", "six==1.17.0; sys_platform != 'linux'"]
        elif self.get("fork") == "python":
            deps += ["pyf==1.0; python_version < '3.12'", "pyf==2.0; python_version >= '3.12'"]
        if self.get("override") == "six":
            deps.append("six")

        def pin(selector: str) -> str:
            if self.get("pins") == "same":
                return "torchy>=2"
            return "torchy==2.0.*" if selector in ("cpu", ":ga") else "torchy>=2.1"

        extras = [s for s in self.selectors if not s.startswith(":")]
        groups = [s[1:] for s in self.selectors if s.startswith(":")]
        chain = ["onlycpu"] if self.get("chain") == "onlycpu" else []
        lines = [
            "[project]",
            'name = "proj"',
            'version = "0.1.0"',
            f'requires-python = "{self.get("python")}"',
            f"dependencies = {deps!r}",
            "",
        ]
        if extras:
            lines.append("[project.optional-dependencies]")
            for e in extras:
                lines.append(f"{e} = {[pin(e), 'helper', *(chain if e == 'cpu' else [])]!r}")
            lines.append("")
        if groups:
            lines.append("[dependency-groups]")
            for g in groups:
                body = ([pin(":" + g)] if kind == "groups" else []) + [f"grp=={'1.0' if g == 'ga' else '2.0'}"]
                body += chain if (g == "ga" and kind == "groups") else []
                lines.append(f"{g} = {body!r}")
            lines.append("")
        conflicts = []
        if extras:
            conflicts.append("[" + ", ".join(f'{{ extra = "{e}" }}' for e in extras) + "]")
        if groups:
            conflicts.append("[" + ", ".join(f'{{ group = "{g}" }}' for g in groups) + "]")
        lines += ["[tool.uv]", "package = false", "conflicts = [" + ", ".join(conflicts) + "]"]
        if self.get("override") == "six":
            lines.append('override-dependencies = ["six==1.17.0"]')
        lines.append("")
        routed = [f'{{ index = "{e}", extra = "{e}" }}' for e in extras]
        if kind == "groups":
            routed += [f'{{ index = "{"cpu" if g == "ga" else "gpu"}", group = "{g}" }}' for g in groups]
        lines += ["[tool.uv.sources]", "torchy = [" + ", ".join(routed) + "]", ""]
        used = sorted({e for e in extras} | ({"cpu", "gpu"} if kind == "groups" else set()))
        for name in used:
            lines += ["[[tool.uv.index]]", f'name = "{name}"', f'url = "{indexes[name].url}"', "explicit = true", ""]
        return "\n".join(lines)


def grid() -> list[Project]:
    """Every combination of :data:`AXES`, in a fixed order (the last axis fastest)."""
    return [Project(tuple(zip(AXES, combo, strict=True))) for combo in itertools.product(*AXES.values())]
