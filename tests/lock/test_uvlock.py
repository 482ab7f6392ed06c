"""uv.lock shape checks (envforge.lock.uvlock) on a real uv.lock written by uv, and one edit per rule.

tests/data/uv-locks/test-pkg-relock.uv.lock was written by uv (README there); each case below
changes one thing in it and expects the key path and reason, through the one lock reader.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.lock.read import InvalidLock, read_lock_text

UVLOCK = (Path(__file__).parents[1] / "data" / "uv-locks" / "test-pkg-relock.uv.lock").read_text()
COLORAMA = 'name = "colorama"\nversion = "0.4.6"\nsource = { registry = "https://pypi.org/simple" }\n'


def test_real_uv_lock_is_read() -> None:
    doc = read_lock_text(UVLOCK, label="uv.lock")
    assert (doc.kind, doc.pylock, [p["name"] for p in doc.packages][:2]) == ("uv.lock", None, ["colorama", "iniconfig"])


CASES = {
    "version-2": (
        ("version = 1\n", "version = 2\n"),
        "version",
        "uv.lock version 2 is not supported (envforge reads version 1)",
    ),
    "version-string": (("version = 1\n", 'version = "1"\n'), "version", "should be an integer, got a string"),
    "revision-string": (("revision = 5\n", 'revision = "5"\n'), "revision", "should be an integer, got a string"),
    "requires-python-invalid": (
        ('requires-python = ">=3.11"', 'requires-python = "3.11"'),
        "requires-python",
        "not a version specifier: Invalid specifier: '3.11'",
    ),
    "name-not-normalized": (
        (COLORAMA, COLORAMA.replace('"colorama"', '"Colorama"')),
        "package[0].name",
        "'Colorama' is not a normalised name (uv writes them normalised)",
    ),
    "version-invalid": (
        (COLORAMA, COLORAMA.replace('"0.4.6"', '"0.4.x"')),
        "package[0].version",
        "'0.4.x' is not a PEP 440 version",
    ),
    "source-missing": (
        (COLORAMA, COLORAMA.replace('source = { registry = "https://pypi.org/simple" }\n', "")),
        "package[0].source",
        "missing",
    ),
    "source-two-kinds": (
        (
            COLORAMA,
            COLORAMA.replace(
                '{ registry = "https://pypi.org/simple" }', '{ registry = "https://pypi.org/simple", git = "x" }'
            ),
        ),
        "package[0].source",
        "should have exactly one of registry, git, url, path, directory, editable, virtual; has git, registry",
    ),
    "hash-malformed": (('hash = "sha256:08695f5c', 'hash = "08695f5c'), "package[0].sdist.hash", None),
    "wheel-not-a-table": (
        (
            'wheels = [\n    { url = "https://files.pythonhosted.org/packages/d1/',
            'wheels = [\n    "x",\n    { url = "https://files.pythonhosted.org/packages/d1/',
        ),
        "package[0].wheels[0]",
        "should be a table, got a string",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_violation_names_the_key(name: str) -> None:
    (old, new), key, reason = CASES[name]
    assert old in UVLOCK
    with pytest.raises(InvalidLock) as err:
        read_lock_text(UVLOCK.replace(old, new, 1), label="uv.lock")
    assert err.value.key == key
    if reason is not None:
        assert err.value.message == f"uv.lock is not a valid uv.lock at `{key}`: {reason}"


def test_same_name_twice_without_markers_is_read_as_an_ambiguity() -> None:
    twice = UVLOCK.replace(
        COLORAMA,
        COLORAMA
        + 'sdist = { url = "https://x/colorama-0.4.5.tar.gz" }\n\n[[package]]\n'
        + COLORAMA.replace("0.4.6", "0.4.5"),
        1,
    )
    doc = read_lock_text(twice, label="uv.lock")
    assert [a.describe() for a in doc.ambiguities] == [
        "package[0] (colorama 0.4.6; no marker) and package[1] (colorama 0.4.5; no marker) can be active together"
    ]


def test_same_name_with_exclusive_resolution_markers_is_read() -> None:
    forked = UVLOCK.replace(
        COLORAMA,
        COLORAMA + "resolution-markers = [\"sys_platform == 'win32'\"]\n"
        'sdist = { url = "https://x/colorama-0.4.5.tar.gz" }\n\n[[package]]\n'
        + COLORAMA.replace("0.4.6", "0.4.5")
        + "resolution-markers = [\"sys_platform != 'win32'\"]\n",
        1,
    )
    assert [p["version"] for p in read_lock_text(forked, label="uv.lock").packages][:2] == ["0.4.6", "0.4.5"]
