"""envforge.lock.markerspace: can two markers be true at once (literal expected witnesses)."""

from __future__ import annotations

import pytest

from envforge.lock.markerspace import (
    ALWAYS,
    Alternative,
    Overlap,
    combine,
    compatible,
    equivalent,
    first_overlap,
    literals,
    overlap_witness,
    overlaps,
    parse,
    satisfiable,
    selected_together,
    valid_selection,
)


def _on(*items: str) -> Alternative:
    return Alternative(frozenset(items))


def _off(*items: str) -> Alternative:
    return Alternative(frozenset(), frozenset(items))


EXCLUSIVE = [
    (["platform_machine == 's390x'"], ["platform_machine != 's390x'"]),
    (["python_version < '3.12'"], ["python_version >= '3.12'"]),
    (["python_full_version < '3.12.4'"], ["python_full_version >= '3.12.4'"]),
    (
        ["python_full_version == '3.12.*' and platform_machine == 's390x'"],
        ["python_full_version == '3.12.*' and platform_machine != 's390x'"],
    ),
    (["sys_platform == 'linux'"], ["platform_system == 'Windows'"]),
    (["sys_platform == 'darwin'"], ["os_name == 'nt'"]),
    (["implementation_name == 'cpython'"], ["platform_python_implementation == 'PyPy'"]),
    (["'cpu' in extras and 'cu128' not in extras"], ["'cu128' in extras and 'cpu' not in extras"]),
    (["extra == 'extra-3-foo-cpu' and extra != 'extra-3-foo-cu128'"], ["extra == 'extra-3-foo-cu128'"]),
    (["'hf' in extras and sys_platform == 'emscripten'"], ["sys_platform == 'linux' and 'hf' in extras"]),
    (
        ["platform_machine == 'x86_64' and sys_platform == 'linux'"],
        ["platform_machine == 'aarch64' and sys_platform == 'linux'", "sys_platform == 'darwin'"],
    ),
]

OVERLAPPING = [
    (["sys_platform == 'linux'"], ["sys_platform == 'linux'"], {"sys_platform": "linux"}),
    (None, ["sys_platform == 'linux'"], {}),
    (None, None, {}),
    (["python_full_version < '3.12.4'"], ["python_full_version >= '3.12.3'"], {"python_full_version": "3.12.3"}),
    (["python_version >= '3.10'"], ["python_version < '3.13'"], {"python_version": "3.10"}),
    (["'cpu' in extras"], ["'cu128' in extras"], {"extras": "{cpu, cu128}"}),
    (["sys_platform == 'freebsd'"], ["sys_platform != 'linux'"], {"sys_platform": "freebsd"}),
    # uv's `extra` is a set (its conflict items, several enabled at once): extra == 'v' is 'v' in extras
    (
        ["extra == 'extra-3-foo-cpu'"],
        ["extra == 'extra-3-foo-cu128'"],
        {"extras": "{extra-3-foo-cpu, extra-3-foo-cu128}"},
    ),
    # uv's negative conflict markers: apart only where both items may not be enabled (uvconflicts' job)
    (
        [
            "(extra != 'extra-4-demo-cpu' and extra != 'extra-4-demo-gpu') or "
            "(extra == 'extra-4-demo-cpu' and extra == 'extra-4-demo-gpu')"
        ],
        ["extra == 'extra-4-demo-cpu'", "extra == 'extra-4-demo-gpu'"],
        {"extras": "{extra-4-demo-cpu, extra-4-demo-gpu}"},
    ),
    (
        ["'a' in dependency_groups and sys_platform == 'linux'"],
        ["'b' in dependency_groups"],
        {"dependency_groups": "{a, b}", "sys_platform": "linux"},
    ),
    (
        ["sys_platform == 'darwin'"],
        ["platform_machine == 'AMD64'"],
        {"platform_machine": "AMD64", "sys_platform": "darwin"},
    ),  # a documented limit: no cross-group implications
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
    entries = [
        ("a", "1", ["sys_platform == 'linux'"]),
        ("b", "1", None),
        ("a", "2", ["sys_platform == 'win32'"]),
        ("b", "2", ["sys_platform == 'win32'"]),
        ("a", "3", ["sys_platform != 'win32'"]),
    ]
    assert first_overlap(entries) == Overlap(1, 3, {})
    assert first_overlap(entries[:3]) is None


def test_overlaps_lists_every_names_first_pair_by_the_later_entry() -> None:
    entries = [("a", "1", None), ("b", "1", None), ("b", "2", None), ("a", "2", None), ("a", "3", None)]
    assert overlaps(entries) == (Overlap(1, 2, {}), Overlap(0, 3, {}))
    assert overlaps(entries[:2]) == ()


def test_entries_apart_by_a_declared_conflict_do_not_overlap() -> None:
    entries = [("torch", "2+cpu", ["sys_platform == 'linux'"]), ("torch", "2+cu1", ["sys_platform == 'linux'"])]
    cpu, gpu = frozenset({_on("cpu")}), frozenset({_on("gpu")})
    assert overlaps(entries, activations=[cpu, gpu], conflicts=[frozenset({"cpu", "gpu"})]) == ()
    assert overlaps(entries, activations=[cpu, gpu], conflicts=[frozenset({"cpu", "other"})]) == (
        Overlap(0, 1, {"sys_platform": "linux"}),
    )
    assert first_overlap(entries, activations=[cpu, ALWAYS], conflicts=[frozenset({"cpu", "gpu"})]) == Overlap(
        0, 1, {"sys_platform": "linux"}
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({_on("cpu")}, {_on("gpu")}, False),
        ({_on("cpu")}, {_on("cpu")}, True),
        ({_on("cpu")}, {_on("gpu"), _on("a")}, True),
        ({_on("cpu")}, {_on("b")}, True),  # two sets: cpu and b may be enabled together
        ({_on("cpu", "a")}, {_on("b")}, False),
        (set(), {_on("gpu")}, True),  # nothing installs it: counted as always
        # uv's negative items (U02): the base torch only while neither cpu nor gpu is enabled
        ({_off("cpu", "gpu")}, {_on("cpu")}, False),
        ({_off("cpu", "gpu")}, {_on("gpu")}, False),
        ({_off("cpu", "gpu")}, {_on("a")}, True),
        ({_off("cpu")}, {_on("gpu")}, True),
        ({_off("cpu")}, {_off("gpu")}, True),
        ({Alternative(frozenset({"a"}), frozenset({"cpu"}))}, {_on("b")}, False),
        ({_off("cpu"), _on("a")}, {_on("cpu")}, True),  # the second alternative meets cpu
    ],
)
def test_compatible_activations(a: set[Alternative], b: set[Alternative], expected: bool) -> None:
    conflicts = [frozenset({"cpu", "gpu"}), frozenset({"a", "b"})]
    assert compatible(frozenset(a), frozenset(b), conflicts) is expected
    assert compatible(frozenset(b), frozenset(a), conflicts) is expected


def test_combine_joins_conditions_or_says_none_can_meet_them() -> None:
    conflicts = [frozenset({"cpu", "gpu"})]
    assert combine(_on("cpu"), _off("gpu"), conflicts) == Alternative(frozenset({"cpu"}), frozenset({"gpu"}))
    assert combine(_on("cpu"), _off("cpu"), conflicts) is None
    assert combine(_on("cpu"), _on("gpu"), conflicts) is None
    assert combine(_on("cpu"), _on("x"), conflicts) == _on("cpu", "x")
    assert combine(_off("a"), _off("b"), conflicts) == _off("a", "b")


def test_markers_are_read_from_the_parse_tree_whatever_their_values_hold() -> None:
    # a regex over the text read `"emscripten" and "hf"` as one literal of `extras` (U03)
    assert literals([parse('sys_platform == "emscripten" and "hf" in extras')]) == {
        "sys_platform": {"emscripten"},
        "extras": {"hf"},
    }
    assert literals([parse("'3.12' <= python_version and 'default' in dependency_groups")]) == {
        "python_version": {"3.12"},
        "dependency_groups": {"default"},
    }
    assert literals([parse("extra == 'extra-4-demo-cpu' or extra != 'Extra-4-Demo-GPU'")]) == {
        "extras": {"extra-4-demo-cpu", "extra-4-demo-gpu"}
    }
    assert literals([parse("platform_release == 'a and b' and platform_version != \"it's\"")]) == {
        "platform_release": {"a and b"},
        "platform_version": {"it's"},
    }
    assert str(parse("extra == 'cpu'")) == '"cpu" in extras'


def test_set_variables_are_decided_up_to_ten_literals_and_undecided_beyond() -> None:
    ten = " or ".join(f"'x{k}' in extras" for k in range(10))
    assert overlap_witness([ten], ["'x9' in extras and 'x0' not in extras"]) == {"extras": "{x1, x9}"}
    assert equivalent(ten, ten + " or 'x0' in extras") is True
    eleven = ten + " or 'x10' in extras"
    # an or-list is searched one conjunction at a time: each names one literal
    assert overlap_witness([eleven], [eleven]) == {"extras": "{x0}"}
    all_eleven = " and ".join(f"'x{k}' in extras" for k in range(11))
    assert overlap_witness([all_eleven], [all_eleven]) is None  # undecided counts as exclusive (documented)
    assert equivalent(eleven, eleven) is False  # undecided: a caller reports the change
    assert satisfiable([eleven], {}) is True  # undecided counts as true


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "python_full_version >= '3.12' and platform_machine == 'x86_64' and sys_platform == 'linux'",
            "python_full_version < '3.12' and platform_machine == 'x86_64' and sys_platform == 'linux'",
        ),
        (
            "(sys_platform == 'linux' or sys_platform == 'darwin') and python_version < '3.11'",
            "sys_platform == 'win32' or python_version >= '3.11'",
        ),
        (
            "platform_machine == 'aarch64' and (python_version < '3.11' or python_version >= '3.13')",
            "platform_machine == 'aarch64' and python_version == '3.12'",
        ),
        ("'a' in extras and sys_platform == 'linux'", "'a' not in extras or sys_platform != 'linux'"),
    ],
)
def test_the_search_by_conjunctions_agrees_with_the_plain_enumeration(a: str, b: str) -> None:
    # the plain enumeration over every combination of both markers' literals (the model's definition)
    from envforge.lock.markerspace import _environments

    both = [parse(a), parse(b)]
    plain = next(
        (
            shown
            for env, shown in _environments(literals(both))
            if all(m.evaluate(env, context="lock_file") for m in both)
        ),
        None,
    )
    assert overlap_witness([a], [b]) == plain


def test_valid_selection_allows_one_item_per_set() -> None:
    conflicts = [frozenset({"cpu", "gpu", "rocm"})]
    assert [valid_selection(frozenset(s), conflicts) for s in ((), ("cpu",), ("cpu", "x"), ("cpu", "rocm"))] == [
        True,
        True,
        True,
        False,
    ]


def test_selected_together_evaluates_for_the_environment_given() -> None:
    entries = [
        ("a", "1", ["sys_platform == 'linux'"]),
        ("a", "2", ["python_version < '3.13'"]),
        ("b", "1", None),
        ("a", "3", None),
    ]
    assert selected_together(entries, {"sys_platform": "linux", "python_version": "3.12"}) == (
        Overlap(0, 1, {"python_version": "3.12", "sys_platform": "linux"}),
    )
    assert selected_together(entries, {"sys_platform": "win32", "python_version": "3.13"}) == ()
    assert selected_together(entries, {"sys_platform": "win32", "python_version": "3.12"}) == (
        Overlap(1, 3, {"python_version": "3.12"}),
    )
    assert selected_together([("x", "1", ["'cpu' in extras"]), ("x", "2", None)], {}) == ()
    assert selected_together([("x", "1", ["'cpu' in extras"]), ("x", "2", None)], {"extras": frozenset({"cpu"})}) == (
        Overlap(0, 1, {"extras": "{cpu}"}),
    )


def test_satisfiable_with_some_variables_fixed() -> None:
    marker = ["'a' in extras and 'b' not in extras and sys_platform == 'linux'"]
    assert satisfiable(marker, {"extras": frozenset({"a"})}) is True
    assert satisfiable(marker, {"extras": frozenset({"a", "b"})}) is False
    assert satisfiable(marker, {"extras": frozenset({"a"}), "sys_platform": "win32"}) is False


# (a, b, equivalent): uv.lock joins every fork an entry is in; the export writes the marker it means.
EQUIVALENCE = [
    ("sys_platform != 'linux' or sys_platform == 'linux'", None, True),
    (
        "python_full_version < '3.12' and sys_platform == 'linux' or python_full_version >= '3.12' and "
        "sys_platform == 'linux'",
        "sys_platform == 'linux'",
        True,
    ),
    (
        "python_full_version < '3.12' and sys_platform != 'linux' or python_full_version < '3.12' and "
        "sys_platform == 'linux'",
        "python_full_version < '3.12'",
        True,
    ),
    ("python_version < '3.12'", "python_full_version < '3.12'", True),
    ("sys_platform == 'linux'", "platform_system == 'Linux'", True),  # one platform axis
    ("sys_platform == 'linux'", None, False),
    ("sys_platform == 'linux'", "sys_platform == 'linux' and platform_machine == 'x86_64'", False),
    ("python_full_version < '3.12'", "python_full_version < '3.12.1'", False),
    ("'cpu' in extras", "'cpu' in extras or 'gpu' in extras", False),
    # uv's `extra` is a set (conflict extras): compared as one
    (
        "extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu128'",
        False,
    ),
    (
        "extra == 'extra-4-demo-cpu' and extra != 'extra-4-demo-cu126'",
        "extra != 'extra-4-demo-cu126' and 'extra-4-demo-cpu' in extras",
        True,
    ),
    (
        "(extra != 'extra-4-demo-cpu' and extra != 'extra-4-demo-gpu') or "
        "(extra == 'extra-4-demo-cpu' and extra == 'extra-4-demo-gpu')",
        "extra != 'extra-4-demo-cpu' and extra != 'extra-4-demo-gpu'",
        False,
    ),
    # PEP 751 set markers (U03): a change of the platform part is a change
    ("sys_platform == 'emscripten' and 'hf' in extras", "sys_platform == 'linux' and 'hf' in extras", False),
    ("sys_platform != 'win32' and 'default' in dependency_groups", "sys_platform != 'win32'", False),
    (
        "'default' in dependency_groups and sys_platform != 'win32'",
        "sys_platform != 'win32' and 'default' in dependency_groups",
        True,
    ),
]


@pytest.mark.parametrize(("a", "b", "same"), EQUIVALENCE)
def test_equivalent_markers_are_true_in_the_same_environments(a: str, b: str | None, same: bool) -> None:
    assert (equivalent(a, b), equivalent(b, a)) == (same, same)


# Behaviours issue 47 found unpinned (each asserted on the verdict a user sees).


def test_satisfiable_searches_the_free_variables() -> None:
    marker = ["'a' in extras and sys_platform == 'win32'"]
    assert satisfiable(marker, {"extras": frozenset({"a"})}) is True  # needs sys_platform searched: win32
    assert satisfiable(marker, {"extras": frozenset({"a"}), "sys_platform": "linux"}) is False
    assert satisfiable(marker, {"extras": frozenset()}) is False
    assert satisfiable(["python_version < '3.11' and python_version >= '3.10'"], {}) is True
    assert satisfiable(["python_version < '3.10' and python_version >= '3.10'"], {}) is False


def test_python_versions_are_sampled_just_below_and_above_a_literal() -> None:
    assert overlap_witness(["python_full_version < '3.12.4'"], ["python_full_version >= '3.12.3'"]) == {
        "python_full_version": "3.12.3"
    }
    assert overlap_witness(["python_full_version < '3.12.4'"], ["python_full_version > '3.12.3'"]) is None
    assert overlap_witness(["python_version < '3.12'"], ["python_version > '3.11'"]) is None
    assert overlap_witness(["python_version <= '3.11'"], ["python_version >= '3.11'"]) == {"python_version": "3.11"}


def test_the_combination_cap_is_undecided_counted_exclusive_for_overlaps() -> None:
    import envforge.lock.markerspace as ms

    # one conjunction with six free string variables of many literals: 11**6 combinations > 20,000
    many = " and ".join(f"platform_release != 'r{k}'" for k in range(10))
    a = many + " and " + " and ".join(f"{v} != 'x'" for v in ("platform_version", "platform_machine"))
    assert ms._count(ms._axes(literals([parse(a)]))) <= ms.MAX_COMBINATIONS  # per group: decided
    assert overlap_witness([a], [a]) is not None
    big = [
        parse(
            " or ".join(
                f"platform_release == 'r{k}' and platform_version == 'v{k}' and "
                f"platform_machine == 'm{k}' and os_name == 'o{k}'"
                for k in range(12)
            )
        )
    ]
    assert ms._count(ms._axes(literals(big))) > ms.MAX_COMBINATIONS
    assert equivalent(str(big[0]), str(big[0]) + " or platform_release == 'zz'") is False  # undecided: a change


def test_selected_together_with_two_names_selected_at_once() -> None:
    entries = [("a", "1", None), ("b", "1", None), ("a", "2", None), ("b", "2", ["sys_platform == 'linux'"])]
    assert selected_together(entries, {"sys_platform": "linux"}) == (
        Overlap(0, 2, {}),
        Overlap(1, 3, {"sys_platform": "linux"}),
    )
    assert selected_together(entries, {"sys_platform": "win32"}) == (Overlap(0, 2, {}),)


def test_a_later_pair_of_three_overlaps_after_the_first_was_kept_apart() -> None:
    entries = [("t", "1+cpu", None), ("t", "1+gpu", None), ("t", "1", None)]
    cpu, gpu = frozenset({_on("cpu")}), frozenset({_on("gpu")})
    both = [frozenset({"cpu", "gpu"})]
    assert overlaps(entries, activations=[cpu, gpu, ALWAYS], conflicts=both) == (Overlap(0, 2, {}),)
    base = frozenset({_off("cpu", "gpu")})  # uv's negative layout: the base only with neither enabled
    assert overlaps(entries, activations=[cpu, gpu, base], conflicts=both) == ()


def test_extra_on_either_side_of_the_comparison_is_a_set() -> None:
    # 'v' == extra is uv's extra as much as extra == 'v' (packaging accepts both orders)
    assert literals([parse("'extra-4-demo-cpu' == extra and 'extra-4-demo-gpu' != extra")]) == {
        "extras": {"extra-4-demo-cpu", "extra-4-demo-gpu"}
    }
    assert str(parse("'cpu' == extra")) == '"cpu" in extras'
    assert str(parse("'cpu' != extra")) == '"cpu" not in extras'
    assert overlap_witness(["'a' == extra"], ["'b' == extra"]) == {"extras": "{a, b}"}
    assert str(parse("extra > 'a'")) == 'extra > "a"'  # other comparisons of extra are kept


def test_first_overlap_takes_activations_and_conflicts_into_account() -> None:
    entries = [("t", "1+cpu", None), ("t", "1+gpu", None)]
    acts = [frozenset({_on("cpu")}), frozenset({_on("gpu")})]
    assert first_overlap(entries, activations=acts, conflicts=[frozenset({"cpu", "gpu"})]) is None
    assert first_overlap(entries, activations=acts, conflicts=[]) == Overlap(0, 1, {})
    assert first_overlap(entries) == Overlap(0, 1, {})


@pytest.mark.parametrize(
    "marker",
    [
        "python_version < '3.11'",  # the only literal: the version below it must be tried
        "python_version < '3'",  # one part: the step is in the major version
        "python_version < '3.1'",  # 3.0 is below
        "python_version < '3.0'",  # below a zero part the step borrows: 2.99
        "python_full_version < '3.11.0'",  # 3.10.99
        "python_full_version < '3.0.0'",  # 2.99.99
        "python_full_version == '3.11'",  # zero-padded: 3.11.0
        "python_full_version == '3'",  # 3.0.0
        "implementation_version < '3.9'",  # implementation_version moves with the Python version
    ],
)
def test_every_side_of_a_python_version_literal_is_reachable(marker: str) -> None:
    assert satisfiable([marker], {}) is True


def test_each_set_variable_and_each_unknown_platform_value_is_searched_on_its_own() -> None:
    assert overlap_witness(["'a' in extras and 'g' in dependency_groups"], ["'g' in dependency_groups"]) == {
        "dependency_groups": "{g}",
        "extras": "{a}",
    }
    # an unknown sys_platform moves alone: the other platform variables are "none of these" then
    assert overlap_witness(["sys_platform == 'freebsd'"], ["platform_system != 'freebsd'"]) == {
        "platform_system": "envforge-none-of-these",
        "sys_platform": "freebsd",
    }


def test_nothing_is_below_python_zero() -> None:
    assert satisfiable(["python_full_version < '0'"], {}) is False
    assert satisfiable(["python_full_version <= '0'"], {}) is True


def test_no_marker_on_either_side_overlaps_a_satisfiable_marker() -> None:
    assert overlap_witness(["sys_platform == 'linux'"], None) == {}
    assert overlap_witness(None, ["sys_platform == 'linux'"]) == {}
    assert overlap_witness(["python_version < '3' and python_version > '3'"], None) is None


def _at_the_cap(extra: str = "") -> str:
    """Literals giving exactly MAX_COMBINATIONS (20,000) environments: 5 extras (2**5 subsets), 4
    literals each of platform_machine, platform_release, platform_version (5 values each with the
    "none of these" value), 2 unknown sys_platform values (5 platform profiles): 32 * 5**4."""
    atoms = [f"'e{k}' in extras" for k in range(5)]
    atoms += [
        f"{var} != '{var[9]}{k}'"
        for var in ("platform_machine", "platform_release", "platform_version")
        for k in range(4)
    ]
    atoms += ["sys_platform != 's0'", "sys_platform != 's1'"]
    return " and ".join(atoms) + extra


def test_the_cap_is_inclusive_for_satisfiable_and_equivalent() -> None:
    import envforge.lock.markerspace as ms

    never = _at_the_cap(" and platform_machine == 'm0'")  # every literal already counted: still 20,000
    assert ms._count(ms._axes(literals([parse(never)]))) == ms.MAX_COMBINATIONS
    assert satisfiable([never], {}) is False  # decided at the cap
    assert satisfiable([never + " and platform_machine != 'm4'"], {}) is True  # 24,000: undecided counts as true
    reordered = " and ".join(reversed(_at_the_cap().split(" and ")))
    assert equivalent(_at_the_cap(), reordered) is True
    assert (
        equivalent(_at_the_cap(" and platform_machine != 'm4'"), reordered + " and platform_machine != 'm4'") is False
    )  # undecided: reported as a change


def test_a_marker_past_the_expansion_limit_is_enumerated_up_to_the_cap() -> None:
    import envforge.lock.markerspace as ms

    # ten ORs of two comparisons joined by AND: 2**10 = 1,024 conjunctions > _MAX_TERMS (256)
    pairs = [
        ("platform_machine", "m0", "m1"),
        ("platform_machine", "m2", "m3"),
        ("platform_release", "r0", "r1"),
        ("platform_release", "r2", "r3"),
        ("platform_version", "v0", "v1"),
        ("platform_version", "v2", "v3"),
        ("sys_platform", "s0", "s1"),
    ]
    ors = [f"({var} != '{x}' or {var} != '{y}')" for var, x, y in pairs]
    ors += [
        "('e0' in extras or 'e1' in extras)",
        "('e2' in extras or 'e3' in extras)",
        "('e4' in extras or 'e0' not in extras)",
    ]
    wide = " and ".join(ors)
    assert ms._dnf(parse(wide)._markers) is None
    assert ms._count(ms._axes(literals([parse(wide)]))) == ms.MAX_COMBINATIONS
    # the first environment of the enumeration, showing only the variables the marker names
    assert overlap_witness([wide], ["sys_platform == 'linux'"]) == {
        "extras": "{e1, e2}",
        "platform_machine": "envforge-none-of-these",
        "platform_release": "envforge-none-of-these",
        "platform_version": "envforge-none-of-these",
        "sys_platform": "linux",
    }
    assert overlap_witness([wide + " and ('e5' in extras or 'e5' not in extras)"], None) is None  # 40,000: undecided


_PY_LITERALS = ("0", "3", "3.0", "3.1", "3.9", "3.11", "3.11.0", "3.12.4", "3.0.0", "3.10.*")
_PY_MARKERS = [
    f"{var} {op} '{lit}'"
    for var in ("python_version", "python_full_version")
    for op in ("<", "<=", ">", ">=", "==", "!=")
    for lit in _PY_LITERALS
    if not lit.endswith("*") or op in ("==", "!=")
]


def test_python_version_overlaps_agree_with_packaging_on_a_dense_grid_of_versions() -> None:
    """The oracle: packaging's own evaluation of both markers at every version X.Y.Z of a grid
    (majors 0-4, minors 0-13 and 99, micros 0-13 and 99). Two markers overlap for envforge exactly
    when they are both true at a version of the grid."""
    from packaging.markers import Marker, default_environment

    grid = [f"{x}.{y}.{z}" for x in range(5) for y in [*range(14), 99] for z in [*range(14), 99]]
    base = default_environment()
    truth = {}
    for text in _PY_MARKERS:
        marker = Marker(text)
        truth[text] = {
            v
            for v in grid
            if marker.evaluate({**base, "python_full_version": v, "python_version": ".".join(v.split(".")[:2])})
        }
    wrong = [
        (a, b)
        for i, a in enumerate(_PY_MARKERS)
        for b in _PY_MARKERS[i:]
        if (overlap_witness([a], [b]) is not None) != bool(truth[a] & truth[b])
    ]
    assert wrong == []


def test_the_evaluation_cap_bounds_a_long_or_of_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker past the expansion limit is enumerated; environments x comparisons past
    MAX_EVALUATIONS (1,000,000) is undecided: a 3,000-way ``or`` over Python versions against
    ``python_version == '3.5'`` took 105 s in `lock diff` before the cap. At the cap: decided."""
    import envforge.lock.markerspace as ms
    from envforge.lock.pyversions import representative_versions

    def versions(n: int) -> str:
        return " or ".join(f"python_version == '3.{i}'" for i in range(n))

    assert ms.MAX_EVALUATIONS == 1_000_000
    assert ms._dnf(parse(versions(300))._markers) is None  # 300 conjunctions > 256: enumerated
    assert overlap_witness([versions(300)], ["python_version == '3.5'"]) == {"python_version": "3.5"}
    assert overlap_witness([versions(3000)], ["python_version == '3.5'"]) is None  # undecided: exclusive
    assert satisfiable([versions(3000)], {}) is True  # undecided counts as true
    assert equivalent(versions(3000), versions(3000)) is False  # undecided: reported as a change
    # the boundary: environments x comparisons of both markers, exactly at the cap and one past it
    both = [versions(300), "python_version == '3.5'"]
    envs = len(representative_versions({f"3.{i}" for i in range(300)}))
    monkeypatch.setattr(ms, "MAX_EVALUATIONS", envs * 301)
    ms._pair_witness.cache_clear()
    assert overlap_witness([both[0]], [both[1]]) == {"python_version": "3.5"}
    monkeypatch.setattr(ms, "MAX_EVALUATIONS", envs * 301 - 1)
    ms._pair_witness.cache_clear()
    assert overlap_witness([both[0]], [both[1]]) is None
    # comparisons are counted through parentheses
    assert ms._comparisons(parse("python_version == '3.5' and (os_name == 'nt' or os_name == 'posix')")._markers) == 3
