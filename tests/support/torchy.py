"""``torchy``: a stand-in for PyTorch laid out as in uv's PyTorch guide, for the lock tests.

Three local PEP 503 indexes (:class:`tests.support.localindex.LocalIndex`): ``cpu`` with ``torchy``
2.0.0+cpu and 2.1.0+cpu, ``gpu`` with the same versions as ``+cu1``, and ``pub`` with ``helper`` 1.0
(requires ``torchy``), ``six`` 1.16.0 and 1.17.0 and ``grp`` 1.0 and 2.0. A project's ``cpu`` and
``gpu`` extras take ``torchy`` from the index of their name (:func:`sources_toml`).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.localindex import LocalIndex, make_wheel


def build_indexes(root: Path) -> tuple[LocalIndex, LocalIndex, LocalIndex]:
    """(cpu, gpu, pub) indexes under ``root/cpu``, ``root/gpu``, ``root/pub``, their wheels built
    into ``root/wheels/<index>``; not served yet (:func:`tests.support.localindex.serve`)."""
    cpu, gpu, pub = LocalIndex(root / "cpu"), LocalIndex(root / "gpu"), LocalIndex(root / "pub")
    wheels = root / "wheels"
    for version in ("2.0.0", "2.1.0"):
        cpu.add(make_wheel(wheels / "cpu", "torchy", f"{version}+cpu"))
        gpu.add(make_wheel(wheels / "gpu", "torchy", f"{version}+cu1"))
    pub.add(make_wheel(wheels / "pub", "helper", "1.0", requires=["torchy"]))
    for name, version in (("six", "1.16.0"), ("six", "1.17.0"), ("grp", "1.0"), ("grp", "2.0")):
        pub.add(make_wheel(wheels / "pub", name, version))
    return cpu, gpu, pub


def sources_toml(cpu: LocalIndex, gpu: LocalIndex) -> str:
    """pyproject.toml text: ``[tool.uv.sources]`` sending ``torchy`` of extra ``cpu`` / ``gpu`` to the
    explicit index of that name, and the two ``[[tool.uv.index]]`` tables (the file's last lines)."""
    return f'''[tool.uv.sources]
torchy = [{{ index = "cpu", extra = "cpu" }}, {{ index = "gpu", extra = "gpu" }}]

[[tool.uv.index]]
name = "cpu"
url = "{cpu.url}"
explicit = true

[[tool.uv.index]]
name = "gpu"
url = "{gpu.url}"
explicit = true
'''
