"""The package's public names load on first use, and one module of it imports without the engine."""

from __future__ import annotations

import subprocess
import sys

import pytest

import envforge.patching as patching


def loaded_after(statement: str) -> list[str]:
    """The ``envforge.patching`` modules a fresh interpreter holds after ``statement``."""
    code = f"import sys\n{statement}\nprint(sorted(m for m in sys.modules if m.startswith('envforge.patching')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return eval(out)  # noqa: S307 - our own print of a list of str


def test_importing_syntax_does_not_load_the_engine() -> None:
    assert loaded_after("import envforge.patching.syntax") == ["envforge.patching", "envforge.patching.syntax"]


def test_importing_operations_loads_only_operations_and_syntax() -> None:
    assert loaded_after("import envforge.patching.operations") == [
        "envforge.patching",
        "envforge.patching.operations",
        "envforge.patching.operations.base",
        "envforge.patching.operations.edits",
        "envforge.patching.operations.moves",
        "envforge.patching.operations.placements",
        "envforge.patching.operations.replacements",
        "envforge.patching.syntax",
    ]


def test_importing_the_manifest_does_not_load_the_engine() -> None:
    assert loaded_after("import envforge.patching.manifest") == ["envforge.patching", "envforge.patching.manifest"]


def test_every_public_name_comes_from_its_module() -> None:
    homes = {
        name: getattr(patching, name).__module__
        for name in patching.__all__
        if callable(getattr(patching, name)) and not isinstance(getattr(patching, name), tuple)
    }
    assert homes == {
        "FileChange": "envforge.patching.states",
        "Manifest": "envforge.patching.manifest",
        "OperationResult": "envforge.patching.states",
        "PatchReport": "envforge.patching.states",
        "PatchedFile": "envforge.patching.manifest",
        "Patchset": "envforge.patching.patchset",
        "PatchsetError": "envforge.patching.patchset",
        "Unmet": "envforge.patching.states",
        "apply": "envforge.patching.applying",
        "export_diff": "envforge.patching.export",
        "installed_version": "envforge.patching.planning",
        "load_patchset": "envforge.patching.patchset",
        "load_patchsets": "envforge.patching.patchset",
        "plan": "envforge.patching.planning",
        "read_manifest": "envforge.patching.manifest",
        "recover": "envforge.patching.journal",
        "revert": "envforge.patching.reverting",
    }
    assert (patching.APPLIED, patching.REVERTED, patching.SHADOWED, patching.STATES) == (
        "applied",
        "reverted",
        "shadowed",
        ("applied", "already-applied", "upstream-fixed", "out-of-range", "drifted", "shadowed"),
    )
    assert set(patching.__all__) <= set(dir(patching))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"^module 'envforge.patching' has no attribute 'engine_tag'$"):
        patching.engine_tag  # noqa: B018
