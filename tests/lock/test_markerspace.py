"""envforge.lock.markerspace: can two markers be true at once (literal expected witnesses)."""

from __future__ import annotations

import pytest

from envforge.lock.markerspace import (ALWAYS, Overlap, compatible, equivalent, first_overlap, overlap_witness, overlaps,
                                     satisfiable, selected_together, valid_selection)

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


def test_overlaps_lists_every_names_first_pair_by_the_later_entry() -> None:
    entries = [("a", "1", None), ("b", "1", None), ("b", "2", None), ("a", "2", None), ("a", "3", None)]
    assert overlaps(entries) == (Overlap(1, 2, {}), Overlap(0, 3, {}))
    assert overlaps(entries[:2]) == ()


def test_entries_apart_by_a_declared_conflict_do_not_overlap() -> None:
    entries = [("torch", "2+cpu", ["sys_platform == 'linux'"]), ("torch", "2+cu1", ["sys_platform == 'linux'"])]
    cpu, gpu = frozenset({frozenset({"cpu"})}), frozenset({frozenset({"gpu"})})
    assert overlaps(entries, activations=[cpu, gpu], conflicts=[frozenset({"cpu", "gpu"})]) == ()
    assert overlaps(entries, activations=[cpu, gpu], conflicts=[frozenset({"cpu", "other"})]) == (
        Overlap(0, 1, {"sys_platform": "linux"}),)
    assert first_overlap(entries, activations=[cpu, ALWAYS], conflicts=[frozenset({"cpu", "gpu"})]) == \
        Overlap(0, 1, {"sys_platform": "linux"})


@pytest.mark.parametrize(("a", "b", "expected"), [
    ({frozenset({"cpu"})}, {frozenset({"gpu"})}, False),
    ({frozenset({"cpu"})}, {frozenset({"cpu"})}, True),
    ({frozenset({"cpu"})}, {frozenset({"gpu"}), frozenset({"a"})}, True),
    ({frozenset({"cpu"})}, {frozenset({"b"})}, True),  # two sets: cpu and b may be enabled together
    ({frozenset({"cpu", "a"})}, {frozenset({"b"})}, False),
    (set(), {frozenset({"gpu"})}, True),  # nothing installs it: counted as always
])
def test_compatible_activations(a: set[frozenset[str]], b: set[frozenset[str]], expected: bool) -> None:
    conflicts = [frozenset({"cpu", "gpu"}), frozenset({"a", "b"})]
    assert compatible(frozenset(a), frozenset(b), conflicts) is expected
    assert compatible(frozenset(b), frozenset(a), conflicts) is expected


def test_valid_selection_allows_one_item_per_set() -> None:
    conflicts = [frozenset({"cpu", "gpu", "rocm"})]
    assert [valid_selection(frozenset(s), conflicts) for s in ((), ("cpu",), ("cpu", "x"), ("cpu", "rocm"))] == [
        True, True, True, False]


def test_selected_together_evaluates_for_the_environment_given() -> None:
    entries = [("a", "1", ["sys_platform == 'linux'"]), ("a", "2", ["python_version < '3.13'"]),
               ("b", "1", None), ("a", "3", None)]
    assert selected_together(entries, {"sys_platform": "linux", "python_version": "3.12"}) == (
        Overlap(0, 1, {"python_version": "3.12", "sys_platform": "linux"}),)
    assert selected_together(entries, {"sys_platform": "win32", "python_version": "3.13"}) == ()
    assert selected_together(entries, {"sys_platform": "win32", "python_version": "3.12"}) == (
        Overlap(1, 3, {"python_version": "3.12"}),)
    assert selected_together([("x", "1", ["'cpu' in extras"]), ("x", "2", None)], {}) == ()
    assert selected_together([("x", "1", ["'cpu' in extras"]), ("x", "2", None)],
                             {"extras": frozenset({"cpu"})}) == (Overlap(0, 1, {"extras": "{cpu}"}),)


def test_satisfiable_with_some_variables_fixed() -> None:
    marker = ["'a' in extras and 'b' not in extras and sys_platform == 'linux'"]
    assert satisfiable(marker, {"extras": frozenset({"a"})}) is True
    assert satisfiable(marker, {"extras": frozenset({"a", "b"})}) is False
    assert satisfiable(marker, {"extras": frozenset({"a"}), "sys_platform": "win32"}) is False


# (a, b, equivalent): uv.lock joins every fork an entry is in; the export writes the marker it means.
EQUIVALENCE = [
    ("sys_platform != 'linux' or sys_platform == 'linux'", None, True),
    ("python_full_version < '3.12' and sys_platform == 'linux' or python_full_version >= '3.12' and "
     "sys_platform == 'linux'", "sys_platform == 'linux'", True),
    ("python_full_version < '3.12' and sys_platform != 'linux' or python_full_version < '3.12' and "
     "sys_platform == 'linux'", "python_full_version < '3.12'", True),
    ("python_version < '3.12'", "python_full_version < '3.12'", True),
    ("sys_platform == 'linux'", "platform_system == 'Linux'", True),  # one platform axis
    ("sys_platform == 'linux'", None, False),
    ("sys_platform == 'linux'", "sys_platform == 'linux' and platform_machine == 'x86_64'", False),
    ("python_full_version < '3.12'", "python_full_version < '3.12.1'", False),
    ("'cpu' in extras", "'cpu' in extras or 'gpu' in extras", False),
    # uv's `extra` is a set (conflict extras): never decided by packaging's one-valued `extra`
    ("extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
     "extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu128'", False),
]


@pytest.mark.parametrize(("a", "b", "same"), EQUIVALENCE)
def test_equivalent_markers_are_true_in_the_same_environments(a: str, b: str | None, same: bool) -> None:
    assert (equivalent(a, b), equivalent(b, a)) == (same, same)
