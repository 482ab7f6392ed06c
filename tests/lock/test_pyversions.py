"""envforge.lock.pyversions: the Python versions the marker search tries (literal expected lists)."""

from __future__ import annotations

from envforge.lock.pyversions import representative_versions


def test_python_versions_are_each_breakpoint_the_release_after_it_and_the_release_below() -> None:
    assert representative_versions({"3.11.0"}) == ["3.10.99", "3.11.0", "3.11.1", "3.12.0", "3.12.1"]
    assert representative_versions({"3.0"}) == ["2.99.99", "3.0.0", "3.0.1", "3.1.0", "3.1.1"]
    assert representative_versions({"3.12.*"}) == ["3.11.99", "3.12.0", "3.12.1", "3.13.0", "3.13.1"]
    assert representative_versions({"3"}) == ["2.99.99", "3.0.0", "3.0.1", "3.1.0", "3.1.1", "4.0.0", "4.0.1"]
    assert representative_versions({"3.1.0"}) == ["3.0.99", "3.1.0", "3.1.1", "3.2.0", "3.2.1"]
    assert representative_versions({"1"}) == ["0.99.99", "1.0.0", "1.0.1", "1.1.0", "1.1.1", "2.0.0", "2.0.1"]
    assert representative_versions({"0"}) == ["0.0.0", "0.0.1", "0.1.0", "0.1.1", "1.0.0", "1.0.1"]
    # parts past the third are ignored
    assert representative_versions({"3.10.4.1"}) == ["3.10.3", "3.10.4", "3.10.5", "3.11.0", "3.11.1"]
    assert representative_versions({"x"}) == representative_versions({"3"})  # no digits: read as 3
    assert representative_versions({"3.9", "3.10"}) == [
        "3.10.0",
        "3.10.1",
        "3.11.0",
        "3.11.1",
        "3.8.99",
        "3.9.0",
        "3.9.1",
        "3.9.99",
    ]
