"""envforge.lock.markerspace: can two markers be true at once (literal expected witnesses)."""

from __future__ import annotations

import pytest

from envforge.lock.markerspace import Overlap, first_overlap, overlap_witness

EXCLUSIVE = [
    (["platform_machine == 's390x'"], ["platform_machine != 's390x'"]),
    (["python_version < '3.12'"], ["python_version >= '3.12'"]),
    (["python_full_version < '3.12.4'"], ["python_full_version >= '3.12.4'"]),
    (["python_full_version == '3.12.*' and platform_machine == 's390x'"],
     ["python_full_version == '3.12.*' and platform_machine != 's390x'"]),
    (["sys_platform == 'linux'"], ["platform_system == 'Windows'"]),
    (["sys_platform == 'darwin'"], ["os_name == 'nt'"]),
    (["implementation_name == 'cpython'"], ["platform_python_implementation == 'PyPy'"]),
    (["'cpu' in extras and 'cu128' not in extras"], ["'cu128' in extras and 'cpu' not in extras"]),
    (["extra == 'extra-3-foo-cpu'"], ["extra == 'extra-3-foo-cu128'"]),
    (["platform_machine == 'x86_64' and sys_platform == 'linux'"],
     ["platform_machine == 'aarch64' and sys_platform == 'linux'", "sys_platform == 'darwin'"]),
]

OVERLAPPING = [
    (["sys_platform == 'linux'"], ["sys_platform == 'linux'"], {"sys_platform": "linux"}),
    (None, ["sys_platform == 'linux'"], {}),
    (None, None, {}),
    (["python_full_version < '3.12.4'"], ["python_full_version >= '3.12.3'"], {"python_full_version": "3.12.3"}),
    (["python_version >= '3.10'"], ["python_version < '3.13'"], {"python_version": "3.10"}),
    (["'cpu' in extras"], ["'cu128' in extras"], {"extras": "{cpu, cu128}"}),
    (["sys_platform == 'freebsd'"], ["sys_platform != 'linux'"], {"sys_platform": "freebsd"}),
    (["sys_platform == 'darwin'"], ["platform_machine == 'AMD64'"],
     {"platform_machine": "AMD64", "sys_platform": "darwin"}),  # a documented limit: no cross-group implications
]


@pytest.mark.parametrize(("a", "b"), EXCLUSIVE)
def test_exclusive_markers(a: list[str], b: list[str]) -> None:
    assert overlap_witness(a, b) is None
    assert overlap_witness(b, a) is None


@pytest.mark.parametrize(("a", "b", "witness"), OVERLAPPING)
def test_overlapping_markers_have_a_witness(a: list[str] | None, b: list[str] | None, witness: dict[str, str]) -> None:
    assert overlap_witness(a, b) == witness


def test_a_marker_that_is_never_true_overlaps_nothing() -> None:
    assert overlap_witness(None, ["sys_platform == 'linux' and sys_platform == 'win32'"]) is None


def test_first_overlap_in_file_order() -> None:
    entries = [("a", "1", ["sys_platform == 'linux'"]), ("b", "1", None), ("a", "2", ["sys_platform == 'win32'"]),
               ("b", "2", ["sys_platform == 'win32'"]), ("a", "3", ["sys_platform != 'win32'"])]
    assert first_overlap(entries) == Overlap(1, 3, {})
    assert first_overlap(entries[:3]) is None
