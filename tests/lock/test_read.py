"""The one lock reader (envforge.lock.read) against the reference: pypa/packaging's own tests.

Where the cases come from: pypa/packaging's public test suite for ``packaging.pylock``,
``tests/test_pylock.py`` (and its ``tests/pylock/pylock.spec-example.toml``, PEP 751's example) and
``tests/test_pylock_select.py``, as of packaging 26.4 (the range pinned in pyproject.toml:
``packaging>=26.4,<27``). Each of those tests feeds a dict (or a dataclass) to ``Pylock.from_dict``; here
each becomes a whole lock file, so the cases run through every path envforge reads a lock with:
:func:`read_lock_text`, ``envforge lock diff F F`` and ``envforge lock textconv F``. Cases the
packaging suite tests on single dataclasses (file-name precedence, hash tables) are placed in a
package of a whole lock. Two entries of one name that can be active together (``test_duplicate_packages``:
packaging reads them, ``select`` raises "Multiple packages with the name ... are selected") are read
here too (``AMBIGUOUS``): the document lists them, ``lock diff`` shows them, and only installing
(:func:`refuse_ambiguous`) refuses them, where both are selected.

When the pinned packaging range moves, re-read those two files and bring these cases in step.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import packaging
import pytest
from packaging.pylock import Pylock, PylockSelectError

from envforge.cli import main
from envforge.core.errors import InputError
from envforge.lock.digest import packages_digest
from envforge.lock.read import InvalidLock, read_lock_file, read_lock_text, refuse_ambiguous
from envforge.lockdiff.model import parse_lock

HEAD = 'lock-version = "1.0"\ncreated-by = "pip"\n'


@pytest.fixture(autouse=True)
def own_lock_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test remembers validated locks in a cache of its own, never in the user's: a broken reader
    (a mutation test's mutant) that remembers an invalid lock there would make later runs accept it."""
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("lock-cache")))


F40 = "f" * 40
H = f'hashes = {{ sha256 = "{F40}" }}'


def pkg(body: str, name: str = "example") -> str:
    return f'[[packages]]\nname = "{name}"\n{body}\n'


def wheel(**keys: str) -> str:
    if set(keys) == {"name"}:  # a file needs a path or url (PEP 751); packaging's name-only cases get a url
        keys["url"] = f"https://example.com/files/{keys['name']}"
    inner = ", ".join(f'{k} = "{v}"' for k, v in keys.items())
    return f"wheels = [{{ {inner}, {H} }}]"


def sdist(**keys: str) -> str:
    if set(keys) == {"name"}:
        keys["url"] = f"https://example.com/files/{keys['name']}"
    inner = ", ".join(f'{k} = "{v}"' for k, v in keys.items())
    return f"sdist = {{ {inner}, {H} }}"


SPEC_EXAMPLE = (Path(__file__).parents[1] / "data" / "pylock-conformance" / "pylock.spec-example.toml").read_text()

# name -> whole lock text that packaging accepts; the expected (name, version, file names) read back.
VALID: dict[str, tuple[str, list[tuple[str, str | None, tuple[str, ...]]]]] = {
    "version-1.0": (HEAD + "packages = []\n", []),
    "version-1.1": ('lock-version = "1.1"\ncreated-by = "pip"\npackages = []\n', []),
    "basic-directory-package": (
        HEAD
        + 'requires-python = ">=3.10"\nenvironments = [\'os_name == "posix"\']\n'
        + pkg(
            'version = "1.0"\nmarker = \'os_name == "posix"\'\nrequires-python = "!=3.10.1,>=3.10"\n'
            'directory = { path = ".", editable = false }'
        ),
        [("example", "1.0", ())],
    ),
    "vcs-package": (
        HEAD + pkg('vcs = { type = "git", url = "https://githhub/pypa/packaging", commit-id = "..." }', "packaging"),
        [("packaging", None, ())],
    ),
    "sdist-name": (HEAD + pkg(sdist(name="example-1.0.tar.gz")), [("example", None, ("example-1.0.tar.gz",))]),
    "sdist-path-posix": (HEAD + pkg(sdist(path="./example-1.0.tar.gz")), [("example", None, ("example-1.0.tar.gz",))]),
    "sdist-path-windows": (
        HEAD + pkg("sdist = { path = '.\\example-1.0.tar.gz', " + H + " }"),
        [("example", None, ("example-1.0.tar.gz",))],
    ),
    "sdist-url": (
        HEAD + pkg(sdist(url="https://example.com/example-1.0.tar.gz")),
        [("example", None, ("example-1.0.tar.gz",))],
    ),
    "sdist-name-over-path": (
        HEAD + pkg("sdist = { name = 'example-2.0.tar.gz', path = '.\\example-1.0.tar.gz', " + H + " }"),
        [("example", None, ("example-2.0.tar.gz",))],
    ),
    "sdist-name-over-url": (
        HEAD + pkg(sdist(name="example-2.0.tar.gz", url="https://example.com/example-1.0.tar.gz")),
        [("example", None, ("example-2.0.tar.gz",))],
    ),
    "sdist-path-over-url": (
        HEAD + pkg(sdist(url="https://example.com/example-2.0.tar.gz", path="./example-1.0.tar.gz")),
        [("example", None, ("example-1.0.tar.gz",))],
    ),
    "wheel-name": (
        HEAD + pkg(wheel(name="example-1.0-py3-none-any.whl")),
        [("example", None, ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-path-posix": (
        HEAD + pkg(wheel(path="./example-1.0-py3-none-any.whl")),
        [("example", None, ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-path-windows": (
        HEAD + pkg("wheels = [{ path = '.\\example-1.0-py3-none-any.whl', " + H + " }]"),
        [("example", None, ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-url": (
        HEAD + pkg(wheel(url="https://example.com/example-1.0-py3-none-any.whl")),
        [("example", None, ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-name-over-path": (
        HEAD
        + pkg(
            "wheels = [{ name = 'example-2.0-py3-none-any.whl', path = '.\\example-1.0-py3-none-any.whl', " + H + " }]"
        ),
        [("example", None, ("example-2.0-py3-none-any.whl",))],
    ),
    "wheel-name-over-url": (
        HEAD + pkg(wheel(name="example-2.0-py3-none-any.whl", url="https://example.com/example-1.0-py3-none-any.whl")),
        [("example", None, ("example-2.0-py3-none-any.whl",))],
    ),
    "wheel-path-over-url": (
        HEAD
        + pkg(wheel(url="https://example.com/example-2.0-py3-none-any.whl", path="./example-1.0-py3-none-any.whl")),
        [("example", None, ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-url-percent-encoded": (
        HEAD
        + pkg(
            'version = "2.9.1+cu128"\n'
            + wheel(
                url="https://download.pytorch.org/whl/cu128/torch-2.9.1%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl"
            ),
            "torch",
        ),
        [("torch", "2.9.1+cu128", ("torch-2.9.1+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",))],
    ),
    "extras-and-groups": (
        HEAD + 'extras = ["feat1", "feat2"]\ndependency-groups = ["dev", "docs"]\n'
        'default-groups = ["dev"]\npackages = []\n',
        [],
    ),
    "tool-tables-and-upload-time": (
        HEAD
        + pkg(
            "sdist = { name = 'example-1.0.tar.gz', path = './example-1.0.tar.gz', "
            "upload-time = 2023-10-01T00:00:00Z, " + H + ' }\n[packages.tool.pip]\nfoo = "bar"'
        )
        + '[tool.pip]\nversion = "25.2"\n',
        [("example", None, ("example-1.0.tar.gz",))],
    ),
    "validate-normalized-name": (
        HEAD
        + pkg(
            'version = "1.0.0"\n' + wheel(url="https://example.com/example_package-1.0.0-py3-none-any.whl"),
            "example-package",
        ),
        [("example-package", "1.0.0", ("example_package-1.0.0-py3-none-any.whl",))],
    ),
    "pep751-spec-example": (
        SPEC_EXAMPLE,
        [
            ("attrs", "25.1.0", ("attrs-25.1.0-py3-none-any.whl",)),
            ("cattrs", "24.1.2", ("cattrs-24.1.2-py3-none-any.whl",)),
            (
                "numpy",
                "2.2.3",
                (
                    "numpy-2.2.3-cp312-cp312-win_amd64.whl",
                    "numpy-2.2.3-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                ),
            ),
        ],
    ),
    "archive-url": (
        HEAD + pkg('version = "1.0"\narchive = { url = "https://example.com/example-1.0.tar.gz", ' + H + " }"),
        [("example", "1.0", ("example-1.0.tar.gz",))],
    ),
    "archive-path": (
        HEAD + pkg('archive = { path = "./dist/example-1.0.tar.gz", ' + H + " }"),
        [("example", None, ("example-1.0.tar.gz",))],
    ),
    "attestation-identities": (
        HEAD
        + pkg(
            'version = "1.0"\ndirectory = { path = "." }\nattestation-identities = [{ kind = "GitHub", value = "x" }]'
        ),
        [("example", "1.0", ())],
    ),
    "size-and-index": (
        HEAD
        + pkg(
            'version = "1.0"\nindex = "https://pypi.org/simple"\nwheels = [{ url = '
            '"https://files.pythonhosted.org/example-1.0-py3-none-any.whl", size = 10, ' + H + " }]"
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",))],
    ),
    "wheel-and-sdist": (
        HEAD
        + pkg(
            'version = "1.0"\n' + wheel(name="example-1.0-py3-none-any.whl") + "\n" + sdist(name="example-1.0.tar.gz")
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl", "example-1.0.tar.gz"))],
    ),
    "wheel-build-tag": (
        HEAD + pkg('version = "1.17.0"\n' + wheel(name="six-1.17.0-1-py2.py3-none-any.whl"), "six"),
        [("six", "1.17.0", ("six-1.17.0-1-py2.py3-none-any.whl",))],
    ),
    # From test_pylock_select.py: several entries of one name whose markers exclude each other.
    "select-platform-split": (
        HEAD
        + pkg('version = "1.0"\nmarker = \'sys_platform == "linux"\'\n' + wheel(name="example-1.0-py3-none-any.whl"))
        + pkg('version = "1.1"\nmarker = \'sys_platform == "win32"\'\n' + wheel(name="example-1.1-py3-none-any.whl")),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
    ),
    "select-python-split": (
        HEAD
        + pkg('version = "1.0"\nmarker = \'python_version < "3.12"\'\n' + wheel(name="example-1.0-py3-none-any.whl"))
        + pkg('version = "1.1"\nmarker = \'python_version >= "3.12"\'\n' + wheel(name="example-1.1-py3-none-any.whl")),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
    ),
    "select-machine-split-b16b": (
        HEAD
        + pkg(
            'version = "4.0.0"\nmarker = "platform_machine == \'s390x\'"\n'
            + wheel(name="xxhash-4.0.0-py3-none-any.whl"),
            "xxhash",
        )
        + pkg(
            'version = "4.0.1"\nmarker = "platform_machine != \'s390x\'"\n'
            + wheel(name="xxhash-4.0.1-py3-none-any.whl"),
            "xxhash",
        ),
        [
            ("xxhash", "4.0.0", ("xxhash-4.0.0-py3-none-any.whl",)),
            ("xxhash", "4.0.1", ("xxhash-4.0.1-py3-none-any.whl",)),
        ],
    ),
    "select-extras-split": (
        HEAD
        + 'extras = ["cpu", "cu128"]\n'
        + pkg(
            'version = "2.9.1"\nmarker = \'"cpu" in extras and "cu128" not in extras\'\n'
            + wheel(name="torch-2.9.1-py3-none-any.whl"),
            "torch",
        )
        + pkg(
            'version = "2.9.1+cu128"\nmarker = \'"cu128" in extras and "cpu" not in extras\'\n'
            + wheel(name="torch-2.9.1+cu128-py3-none-any.whl"),
            "torch",
        ),
        [
            ("torch", "2.9.1", ("torch-2.9.1-py3-none-any.whl",)),
            ("torch", "2.9.1+cu128", ("torch-2.9.1+cu128-py3-none-any.whl",)),
        ],
    ),
    "select-dependency-groups-split": (
        HEAD
        + 'dependency-groups = ["dev", "docs"]\n'
        + pkg(
            'version = "1.0"\nmarker = \'"dev" in dependency_groups and "docs" not in dependency_groups\'\n'
            + wheel(name="example-1.0-py3-none-any.whl")
        )
        + pkg(
            'version = "1.1"\nmarker = \'"dev" not in dependency_groups\'\n'
            + wheel(name="example-1.1-py3-none-any.whl")
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
    ),
    "select-full-version-split": (
        HEAD
        + pkg(
            'version = "1.0"\nmarker = \'python_full_version < "3.12.4"\'\n'
            + wheel(name="example-1.0-py3-none-any.whl")
        )
        + pkg(
            'version = "1.1"\nmarker = \'python_full_version >= "3.12.4"\'\n'
            + wheel(name="example-1.1-py3-none-any.whl")
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
    ),
    "select-implementation-split": (
        HEAD
        + pkg(
            'version = "1.0"\nmarker = \'implementation_name == "cpython"\'\n'
            + wheel(name="example-1.0-py3-none-any.whl")
        )
        + pkg(
            'version = "1.1"\nmarker = \'platform_python_implementation == "PyPy"\'\n'
            + wheel(name="example-1.1-py3-none-any.whl")
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
    ),
    "select-same-version-two-indexes": (
        HEAD
        + pkg(
            'version = "1.0"\nmarker = \'sys_platform == "darwin"\'\nindex = "https://a.example/simple"\n'
            + wheel(name="example-1.0-py3-none-any.whl")
        )
        + pkg(
            'version = "1.0"\nmarker = \'sys_platform != "darwin"\'\nindex = "https://b.example/simple"\n'
            + wheel(name="example-1.0-py3-none-any.whl")
        ),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.0", ("example-1.0-py3-none-any.whl",))],
    ),
    "select-requires-python-package": (
        HEAD
        + 'requires-python = ">=3.10"\n'
        + pkg('version = "1.0"\nrequires-python = ">=3.8"\n' + wheel(name="example-1.0-py3-none-any.whl")),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",))],
    ),
}

# name -> (whole lock text packaging rejects, the key path, packaging's reason).
INVALID: dict[str, tuple[str, str | None, str]] = {
    "version-0.9": (
        'lock-version = "0.9"\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "pylock version 0.9 is not supported (envforge reads lock-version 1.x)",
    ),
    "version-2": (
        'lock-version = "2"\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "pylock version 2 is not supported (envforge reads lock-version 1.x)",
    ),
    "version-2.0": (
        'lock-version = "2.0"\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "pylock version 2.0 is not supported (envforge reads lock-version 1.x)",
    ),
    "version-2.1": (
        'lock-version = "2.1"\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "pylock version 2.1 is not supported (envforge reads lock-version 1.x)",
    ),
    "version-2.x": (
        'lock-version = "2.x"\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "Invalid version: '2.x'",
    ),
    "version-float": (
        'lock-version = 1.0\ncreated-by = "pip"\npackages = []\n',
        "lock-version",
        "Unexpected type float (expected str)",
    ),
    "version-missing": ('created-by = "pip"\npackages = []\n', "lock-version", "Missing required value"),
    "created-by-missing": ('lock-version = "1.0"\npackages = []\n', "created-by", "Missing required value"),
    "created-by-int": (
        'lock-version = "1.0"\ncreated-by = 1\npackages = []\n',
        "created-by",
        "Unexpected type int (expected str)",
    ),
    "packages-missing": ('lock-version = "1.0"\ncreated-by = "uv"\n', "packages", "Missing required value"),
    "package-without-source": (
        HEAD + pkg('version = "1.0"'),
        "packages[0]",
        "Exactly one of vcs, directory, archive must be set if sdist and wheels are not set",
    ),
    "package-dist-and-archive": (
        HEAD
        + pkg('version = "1.0"\narchive = { path = "example.tar.gz", ' + H + " }\n" + sdist(path="example-1.0.tar.gz")),
        "packages[0]",
        "None of vcs, directory, archive must be set if sdist or wheels are set",
    ),
    "package-archive-directory-vcs": (
        HEAD
        + pkg(
            'version = "1.0"\narchive = { path = "example.tar.gz", ' + H + " }\n"
            'vcs = { type = "git", url = "https://githhub/pypa/packaging", commit-id = "..." }\n'
            'directory = { path = ".", editable = false }'
        ),
        "packages[0]",
        "Exactly one of vcs, directory, archive must be set if sdist and wheels are not set",
    ),
    "archive-without-path-or-url": (
        HEAD + pkg("archive = { " + H + " }"),
        "packages[0].archive",
        "path or url must be provided",
    ),
    "vcs-without-path-or-url": (
        HEAD + pkg('vcs = { type = "git", commit-id = "' + F40 + '" }'),
        "packages[0].vcs",
        "path or url must be provided",
    ),
    "wheel-without-path-or-url": (
        HEAD + pkg("wheels = [{ " + H + " }]"),
        "packages[0].wheels[0]",
        "path or url must be provided",
    ),
    "sdist-without-path-or-url": (
        HEAD + pkg("sdist = { name = 'example-1.0.tar.gz', " + H + " }"),
        "packages[0].sdist",
        "path or url must be provided",
    ),
    "wheel-filename-invalid": (
        HEAD + pkg(wheel(url="http://example.com/example-1.0.whl")),
        "packages[0].wheels[0]",
        "Invalid wheel filename 'example-1.0.whl'",
    ),
    "sdist-filename-invalid": (
        HEAD + pkg(sdist(path="./example.tar.gz")),
        "packages[0].sdist",
        "Invalid sdist filename 'example.tar.gz'",
    ),
    "sdist-windows-path-prefix-name": (
        HEAD + pkg("sdist = { path = '.\\bar-1.0.tar.gz', " + H + " }"),
        "packages[0].sdist",
        "Name in 'bar-1.0.tar.gz' is not consistent with package name 'example'",
    ),
    "wheel-without-hashes": (
        HEAD + pkg('wheels = [{ name = "example-1.0-py3-none-any.whl", path = "./example-1.0-py3-none-any.whl" }]'),
        "packages[0].wheels[0].hashes",
        "Missing required value",
    ),
    "environments-invalid-marker": (
        HEAD + "environments = ['os_name == \"posix\"', 'invalid_marker == \"...\"']\npackages = []\n",
        "environments[1]",
        'Expected a marker variable or quoted string\n    invalid_marker == "..."\n    ^',
    ),
    "environments-int": (
        HEAD + "environments = ['os_name == \"posix\"', 1]\npackages = []\n",
        "environments[1]",
        "Unexpected type int (expected str)",
    ),
    "package-not-a-table": (HEAD + 'packages = ["example"]\n', "packages[0]", "Unexpected type str (expected Mapping)"),
    "hash-value-not-string": (
        HEAD
        + pkg(
            'wheels = [{ url = "https://example.com/example-1.0-py3-none-any.whl", '
            f'hashes = {{ sha256 = "{F40}", md5 = 1 }} }}]'
        ),
        "packages[0].wheels[0].hashes",
        "Hash values must be strings",
    ),
    "hashes-empty": (
        HEAD + pkg('wheels = [{ url = "https://example.com/example-1.0-py3-none-any.whl", hashes = {} }]'),
        "packages[0].wheels[0].hashes",
        "At least one hash must be provided",
    ),
    "hashes-a-string": (
        HEAD + pkg('wheels = [{ url = "https://example.com/example-1.0-py3-none-any.whl", hashes = "sha256:..." }]'),
        "packages[0].wheels[0].hashes",
        "Unexpected type str (expected Mapping)",
    ),
    "name-not-normalized": (
        HEAD + pkg(wheel(name="example-1.0-py3-none-any.whl"), "Example"),
        "packages[0].name",
        "Name 'Example' is not normalized",
    ),
    "name-underscore": (
        HEAD
        + pkg(
            'version = "1.0.0"\n' + wheel(url="https://example.com/example_package-1.0.0-py3-none-any.whl"),
            "example_package",
        ),
        "packages[0].name",
        "Name 'example_package' is not normalized",
    ),
    "extras-not-normalized": (
        HEAD + 'extras = ["extra", "Feature"]\npackages = []\n',
        "extras[1]",
        "Name 'Feature' is not normalized",
    ),
    "dependency-groups-a-string": (
        HEAD + 'dependency-groups = "abc"\npackages = []\n',
        "dependency-groups",
        "Unexpected type str (expected Sequence)",
    ),
    "attestation-kind-missing": (
        HEAD + pkg('version = "1.0"\ndirectory = { path = "." }\nattestation-identities = [{ value = "some-value" }]'),
        "packages[0].attestation-identities[0].kind",
        "Missing required value",
    ),
    "attestation-kind-int": (
        HEAD
        + pkg(
            'version = "1.0"\ndirectory = { path = "." }\n'
            'attestation-identities = [{ kind = 123, value = "some-value" }]'
        ),
        "packages[0].attestation-identities[0].kind",
        "Unexpected type int (expected str)",
    ),
    "wheel-of-another-package": (
        HEAD + pkg(wheel(name="bar-1.0-py3-none-any.whl"), "foo"),
        "packages[0].wheels[0]",
        "Name in 'bar-1.0-py3-none-any.whl' is not consistent with package name 'foo'",
    ),
    "wheel-version-mismatch": (
        HEAD + pkg('version = "1.1"\n' + wheel(name="example-1.0-py3-none-any.whl")),
        "packages[0].wheels[0]",
        "Version in 'example-1.0-py3-none-any.whl' is not consistent with package version '1.1'",
    ),
    "size-a-boolean": (
        HEAD + pkg('wheels = [{ url = "https://example.com/example-1.0-py3-none-any.whl", size = true, ' + H + " }]"),
        "packages[0].wheels[0].size",
        "Unexpected type bool (expected int)",
    ),
    "marker-invalid": (
        HEAD + pkg('marker = "os_name ==="\n' + wheel(name="example-1.0-py3-none-any.whl")),
        "packages[0].marker",
        "Expected a marker variable or quoted string\n    os_name ===\n               ^",
    ),
    "requires-python-invalid": (
        HEAD + 'requires-python = "3.12"\npackages = []\n',
        "requires-python",
        "Invalid specifier: '3.12'",
    ),
}


# name -> (a lock packaging reads whose two entries of one name can be active together; what is read
# back, as VALID; the ambiguity, as Ambiguity.describe says it). Field case B16; packaging's
# test_duplicate_packages is the first.
AMBIGUOUS: dict[str, tuple[str, list[tuple[str, str | None, tuple[str, ...]]], str]] = {
    "same-name-unmarked": (
        HEAD
        + pkg('version = "3.7"\n' + wheel(name="idna-3.7-py3-none-any.whl"), "idna")
        + pkg('version = "3.10"\n' + wheel(name="idna-3.10-py3-none-any.whl"), "idna"),
        [("idna", "3.7", ("idna-3.7-py3-none-any.whl",)), ("idna", "3.10", ("idna-3.10-py3-none-any.whl",))],
        "packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be active together",
    ),
    "same-name-identical-markers": (
        HEAD
        + pkg(
            'version = "3.7"\nmarker = "sys_platform == \'linux\'"\n' + wheel(name="idna-3.7-py3-none-any.whl"), "idna"
        )
        + pkg(
            'version = "3.10"\nmarker = "sys_platform == \'linux\'"\n' + wheel(name="idna-3.10-py3-none-any.whl"),
            "idna",
        ),
        [("idna", "3.7", ("idna-3.7-py3-none-any.whl",)), ("idna", "3.10", ("idna-3.10-py3-none-any.whl",))],
        "packages[0] (idna 3.7; marker sys_platform == 'linux') and packages[1] (idna 3.10; marker "
        "sys_platform == 'linux') can be active together (e.g. sys_platform = 'linux')",
    ),
    "same-name-overlapping-markers": (
        HEAD
        + pkg('version = "1.0"\nmarker = \'python_version >= "3.10"\'\n' + wheel(name="example-1.0-py3-none-any.whl"))
        + pkg('version = "1.1"\nmarker = \'python_version < "3.13"\'\n' + wheel(name="example-1.1-py3-none-any.whl")),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
        'packages[0] (example 1.0; marker python_version >= "3.10") and packages[1] (example 1.1; marker '
        "python_version < \"3.13\") can be active together (e.g. python_version = '3.10')",
    ),
    "same-name-one-unmarked": (
        HEAD
        + pkg('version = "1.0"\nmarker = \'sys_platform == "win32"\'\n' + wheel(name="example-1.0-py3-none-any.whl"))
        + pkg('version = "1.1"\n' + wheel(name="example-1.1-py3-none-any.whl")),
        [("example", "1.0", ("example-1.0-py3-none-any.whl",)), ("example", "1.1", ("example-1.1-py3-none-any.whl",))],
        'packages[0] (example 1.0; marker sys_platform == "win32") and packages[1] (example 1.1; no marker) can be '
        "active together",
    ),
    "duplicate-packages": (  # packaging's test_duplicate_packages
        HEAD + pkg('version = "1.0"\ndirectory = { path = "." }') + pkg('version = "1.1"\ndirectory = { path = "." }'),
        [("example", "1.0", ()), ("example", "1.1", ())],
        "packages[0] (example 1.0; no marker) and packages[1] (example 1.1; no marker) can be active together",
    ),
    "no-versions": (
        HEAD + pkg('directory = { path = "." }') + pkg('directory = { path = "." }'),
        [("example", None, ()), ("example", None, ())],
        "packages[0] (example (no version); no marker) and packages[1] (example (no version); no marker) can be "
        "active together",
    ),
}
VALID.update({name: (text, read) for name, (text, read, _) in AMBIGUOUS.items()})


def test_case_counts() -> None:
    assert (len(VALID), len(INVALID), len(AMBIGUOUS)) == (44, 38, 6)


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_same_name_entries_that_can_be_active_together_are_read_and_listed(name: str) -> None:
    text, _, described = AMBIGUOUS[name]
    doc = read_lock_text(text, label="pylock.x.toml")
    assert [a.describe() for a in doc.ambiguities] == [described]
    again = read_lock_text(text, label="pylock.x.toml")  # from the validation cache: the same ambiguity
    assert (again.pylock, again.ambiguities) == (None, doc.ambiguities)
    assert parse_lock(text, label="x").ambiguities == (described,)


def test_packaging_reads_the_duplicate_and_refuses_only_to_select_from_it() -> None:
    text = AMBIGUOUS["duplicate-packages"][0]
    lock = Pylock.from_dict(tomllib.loads(text))
    with pytest.raises(
        PylockSelectError,
        match=r"Multiple packages with the name 'example' are selected at "
        r"packages\[1\] and packages\[0\]",
    ):
        list(lock.select())
    with pytest.raises(InvalidLock) as err:
        refuse_ambiguous("pylock.x.toml", read_lock_text(text, label="pylock.x.toml").entries)
    reason = (
        "packages[0] (example 1.0; no marker) and packages[1] (example 1.1; no marker) are both selected "
        "for this environment; an installer cannot choose between them"
    )
    assert (err.value.message, err.value.key, err.value.reason, err.value.hint, err.value.exit_code) == (
        f"pylock.x.toml: cannot install example: {reason}",
        "packages[1]",
        reason,
        "give the two entries markers that cannot both be true, or remove one; then regenerate it with "
        "`envforge lock` (or the tool named in its created-by)",
        2,
    )


def test_installing_refuses_only_where_both_are_selected() -> None:
    entries = read_lock_text(AMBIGUOUS["same-name-identical-markers"][0], label="p").entries
    refuse_ambiguous("p", entries, environment={"sys_platform": "win32"})  # neither selected on Windows
    with pytest.raises(InvalidLock) as err:
        refuse_ambiguous("p", entries, environment={"sys_platform": "linux"})
    assert err.value.message == (
        "p: cannot install idna: packages[0] (idna 3.7; marker sys_platform == 'linux') and packages[1] (idna "
        "3.10; marker sys_platform == 'linux') are both selected for this environment (e.g. sys_platform = "
        "'linux'); an installer cannot choose between them"
    )
    overlapping = read_lock_text(AMBIGUOUS["same-name-overlapping-markers"][0], label="p").entries
    refuse_ambiguous("p", overlapping, environment={"python_version": "3.14", "python_full_version": "3.14.0"})
    with pytest.raises(InvalidLock) as err:
        refuse_ambiguous("p", overlapping, environment={"python_version": "3.12", "python_full_version": "3.12.1"})
    assert err.value.reason == (
        'packages[0] (example 1.0; marker python_version >= "3.10") and packages[1] (example 1.1; marker '
        "python_version < \"3.13\") are both selected for this environment (e.g. python_version = '3.12'); an "
        "installer cannot choose between them"
    )


def test_lock_diff_shows_the_ambiguity_and_textconv_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a relative path: the header shortens long paths, and TMPDIR may be any length (issue 47)
    monkeypatch.chdir(tmp_path)
    path = Path("pylock.case.toml")
    path.write_text(AMBIGUOUS["same-name-unmarked"][0])
    assert main(["lock", "diff", "--exit-code", str(path), str(path)]) == 0
    out, err = capsys.readouterr()
    assert (out.splitlines()[:2], err) == ([f"lock diff: {path} -> {path}", "2 -> 2 packages: no changes"], "")
    assert " ".join(x.strip() for x in out.splitlines()[2:]) == (
        f"! ambiguous in {path}: packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be "
        "active together; an install is refused where both are selected"
    )
    assert main(["lock", "textconv", str(path)]) == 0
    out, err = capsys.readouterr()
    assert (out.splitlines()[:2], err) == (
        [
            "# envforge lock textconv: pylock, 2 packages",
            "! ambiguous: packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be active "
            "together; an install is refused where both are selected",
        ],
        "",
    )


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_lock_is_read_as_packaging_reads_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVFORGE_NO_LOCK_CACHE", "1")
    text, expected = VALID[name]
    doc = read_lock_text(text, label=f"pylock.{name}.toml")
    assert doc.pylock is not None
    got = [
        (
            str(p.name),
            str(p.version) if p.version else None,
            tuple(f.filename for f in [*(p.wheels or ()), *([p.sdist] if p.sdist else [])])
            + (((p.archive.url or p.archive.path or "").rsplit("/", 1)[-1],) if p.archive else ()),
        )
        for p in doc.pylock.packages
    ]
    assert got == expected
    model = parse_lock(text, label="x")
    assert sorted(
        (p.name, p.version, tuple(a.filename for a in p.artifacts)) for p in model.packages.values()
    ) == sorted(expected)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_lock_names_packagings_key_path_and_reason(name: str) -> None:
    text, key, reason = INVALID[name]
    with pytest.raises(InvalidLock) as err:
        read_lock_text(text, label="pylock.x.toml")
    assert (err.value.key, err.value.reason) == (key, reason)
    assert err.value.message == f"pylock.x.toml is not a valid PEP 751 lock at `{key}`: {reason}"


@pytest.mark.parametrize("name", sorted(INVALID))
def test_lock_diff_and_textconv_refuse_invalid_locks(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, key, reason = INVALID[name]
    path = tmp_path / "pylock.case.toml"
    path.write_text(text)
    assert main(["lock", "diff", str(path), str(path)]) == 2
    out, err = capsys.readouterr()
    first = f"error: {path} is not a valid PEP 751 lock at `{key}`: {reason}".splitlines()[0]
    assert (out, err.splitlines()[0]) == ("", first)
    assert main(["lock", "textconv", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == text and err.startswith(f"warning: {path} is not a valid PEP 751 lock at `{key}`: ")


@pytest.mark.parametrize("name", sorted(VALID))
def test_lock_diff_of_a_valid_lock_with_itself_is_clean(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pylock.case.toml"
    path.write_text(VALID[name][0])
    assert main(["lock", "diff", "--exit-code", str(path), str(path)]) == 0
    capsys.readouterr()


def test_lock_version_change_alone_is_refused_not_hidden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "pylock.a.toml", tmp_path / "pylock.b.toml"
    old.write_text(VALID["pep751-spec-example"][0])
    new.write_text(VALID["pep751-spec-example"][0].replace("lock-version = '1.0'", "lock-version = '2.0'"))
    assert main(["lock", "diff", "--exit-code", str(old), str(new)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: {new} is not a valid PEP 751 lock at `lock-version`: pylock version 2.0 is not supported "
        "(envforge reads lock-version 1.x)"
    )


def test_no_traceback_on_any_case(tmp_path: Path) -> None:
    """Every case through the real console entry point in one process: exit 0 or 2, never a traceback."""
    files = []
    for i, (text, _, _) in enumerate(INVALID.values()):
        files.append(tmp_path / f"pylock.i{i}.toml")
        files[-1].write_text(text)
    code = (
        "import sys\nfrom envforge.cli import main\ncodes = [main(['lock', 'diff', p, p]) for p in sys.argv[1:]]\n"
        "print(sorted(set(codes)))"
    )
    out = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[2]" and "Traceback" not in out.stderr


@pytest.mark.parametrize("name", sorted(VALID))
def test_validated_once_then_read_the_same_way(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second read of the same bytes skips packaging's validation (a cache entry) and reads
    every entry exactly as the first, packaging-validated read did."""
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path))
    text = VALID[name][0]
    cold = read_lock_text(text, label="x")
    warm = read_lock_text(text, label="x")
    assert (cold.pylock is not None, warm.pylock) == (True, None)
    assert warm.entries == cold.entries
    assert len(list((tmp_path / "valid-locks").iterdir())) == 1


def test_a_changed_byte_is_validated_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path))
    text = VALID["pep751-spec-example"][0]
    read_lock_text(text, label="x")
    with pytest.raises(InvalidLock) as err:
        read_lock_text(text.replace("name = 'cattrs'", "name = 'Cattrs'"), label="x")
    assert (err.value.key, err.value.reason) == ("packages[1].name", "Name 'Cattrs' is not normalized")
    for bad, _, _ in INVALID.values():
        with pytest.raises(InvalidLock):
            read_lock_text(bad, label="x")
    assert len(list((tmp_path / "valid-locks").iterdir())) == 1  # invalid texts are never remembered


# --- file names read without a second urlparse (lockreader.file_name), equal to packaging's property ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from packaging.pylock import PackageWheel  # noqa: E402

from envforge.lock.read import file_name  # noqa: E402


def _wheel(name: str | None, path: str | None, url: str | None) -> PackageWheel:
    return PackageWheel(name=name, upload_time=None, url=url, path=path, size=None, hashes={"sha256": F40})


@pytest.mark.parametrize(
    ("name", "path", "url", "expected"),
    [
        (
            None,
            None,
            "https://download.pytorch.org/whl/cu130/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
            "torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        ),  # %2B decoded
        (
            None,
            None,
            "https://files.pythonhosted.org/packages/ab/cd/six-1.17.0-py2.py3-none-any.whl",
            "six-1.17.0-py2.py3-none-any.whl",
        ),
        (
            None,
            None,
            "https://h.example/simple/six-1.17.0-py2.py3-none-any.whl#sha256=00",
            "six-1.17.0-py2.py3-none-any.whl",
        ),
        (None, None, "https://h.example/six-1.17.0-py2.py3-none-any.whl?x=/y", "six-1.17.0-py2.py3-none-any.whl"),
        (None, None, "https://h.example/a;b/six-1.17.0-py2.py3-none-any.whl;v=1", "six-1.17.0-py2.py3-none-any.whl"),
        (None, None, "https://h.example", ""),
        (None, None, "https://h.example/", ""),
        (
            "given-1.0-py3-none-any.whl",
            "./p-1.0-py3-none-any.whl",
            "https://h.example/x.whl",
            "given-1.0-py3-none-any.whl",
        ),
        (None, ".\\dist\\p-1.0-py3-none-any.whl", "https://h.example/x.whl", "p-1.0-py3-none-any.whl"),
        (None, "dist/", "https://h.example/x-1.0-py3-none-any.whl", "x-1.0-py3-none-any.whl"),  # empty path name: url's
    ],
)
def test_file_name_is_packagings(name: str | None, path: str | None, url: str | None, expected: str) -> None:
    assert file_name(name, path, url) == expected
    try:
        assert _wheel(name, path, url).filename == expected
    except Exception:
        assert expected == ""  # packaging raises "Cannot determine wheel filename" where file_name gives ""


_PARTS = st.sampled_from(
    [
        "https://",
        "http://",
        "file://",
        "HTTPS://",
        "h+x.y-z://",
        "https:",
        "//",
        "",
        "h.example",
        "[::1]",
        "u:p@h",
        "/",
        "a",
        "b.whl",
        "%2B",
        "%",
        "?",
        "#",
        ";",
        "=",
        " ",
        "\t",
        "\\",
        "é",
        ".",
        "..",
        ":",
        "@",
        "~",
        "+",
    ]
)
_TEXT = st.lists(_PARTS, max_size=10).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.none() | _TEXT, st.none() | _TEXT, st.none() | _TEXT)
def test_file_name_agrees_with_packaging_on_any_file(name: str | None, path: str | None, url: str | None) -> None:
    try:
        expected = _wheel(name, path, url).filename
    except Exception:  # packaging finds no name (or cannot parse the url): file_name gives "" or raises too
        try:
            assert file_name(name, path, url) == ""
        except ValueError:
            pass
        return
    assert file_name(name, path, url) == expected


# --- TOML parsing (lockreader.parse_toml): rtoml, tomllib deciding what rtoml refuses ---

import datetime as _dt  # noqa: E402
import pickle  # noqa: E402

import rtoml  # noqa: E402
import tomli  # noqa: E402
import tomlkit  # noqa: E402

from envforge.lock.read import parse_toml  # noqa: E402

_REPO = Path(__file__).parents[2]
_TOML_FILES = sorted(
    {
        *Path(__file__).parents[1].rglob("*.toml"),
        *Path(__file__).parents[1].rglob("*.lock"),
        *(_REPO / "lockfiles").glob("*.toml"),
        *(_REPO / "recipes").glob("*.toml"),
        *(_REPO / "patchsets").rglob("*.toml"),
        _REPO / "pyproject.toml",
    }
)


def _typed(value: object) -> object:
    """``value`` with every leaf's exact type (and a date-time's tzinfo type and offset) made visible,
    so two documents compare equal only when they hold the same types, not just equal values."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if isinstance(value, (_dt.datetime, _dt.time)):
        return (type(value), value.isoformat(), type(value.tzinfo))
    if isinstance(value, float) and value != value:
        return (float, "nan")
    return (type(value), value)


def _values(value: object) -> object:
    """``value`` with date-times as their ISO text (rtoml's and tomllib's time zone objects differ)."""
    if isinstance(value, dict):
        return {k: _values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_values(v) for v in value]
    if isinstance(value, (_dt.datetime, _dt.time)):
        return value.isoformat()
    return _typed(value)


_CORPUS = {
    **{str(p.relative_to(_REPO)): p.read_text(encoding="utf-8") for p in _TOML_FILES},
    **{f"valid:{k}": v[0] for k, v in VALID.items()},
    **{f"invalid:{k}": v[0] for k, v in INVALID.items()},
}


def test_parse_toml_corpus_is_not_empty() -> None:
    assert sum(1 for k in _CORPUS if not k.startswith(("valid:", "invalid:"))) >= 40
    assert {
        "tests/data/lockdiff/notebook-235-old.toml",
        "tests/data/lockdiff/notebook-235-new.toml",
        "lockfiles/pylock.kimi-k25-sm120-cu128.toml",
    } <= set(_CORPUS)


@pytest.mark.parametrize("name", sorted(_CORPUS))
def test_parse_toml_reads_every_test_document_as_tomllib_does(name: str) -> None:
    text = _CORPUS[name]
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        with pytest.raises(InvalidLock, match=r"^x is not valid TOML: ") as err:
            parse_toml(text, "x")
        assert err.value.reason == str(exc)
        return
    assert _typed(parse_toml(text, "x")) == _typed(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1979-05-27T07:32:00Z", _dt.datetime(1979, 5, 27, 7, 32, tzinfo=_dt.timezone.utc)),
        (
            "a = 1979-05-27T07:32:00-07:00",
            _dt.datetime(1979, 5, 27, 7, 32, tzinfo=_dt.timezone(_dt.timedelta(hours=-7))),
        ),
        (
            "a = 1979-05-27T07:32:00+05:30",
            _dt.datetime(1979, 5, 27, 7, 32, tzinfo=_dt.timezone(_dt.timedelta(hours=5, minutes=30))),
        ),
        ("a = 1979-05-27T07:32:00.999999+00:00", _dt.datetime(1979, 5, 27, 7, 32, 0, 999999, tzinfo=_dt.timezone.utc)),
        ("a = 1979-05-27T07:32:00", _dt.datetime(1979, 5, 27, 7, 32)),
    ],
)
def test_offset_datetimes_get_tomllibs_timezone(text: str, expected: _dt.datetime) -> None:
    value = parse_toml(text, "x")["a"]
    assert value == expected and type(value.tzinfo) is type(expected.tzinfo)  # noqa: E721
    assert value.utcoffset() == expected.utcoffset() and value.tzname() == expected.tzname()
    assert pickle.loads(pickle.dumps(value)) == expected  # rtoml's own TzInfo cannot be pickled
    assert "TzInfo" in repr(rtoml.loads(text)["a"]) or expected.tzinfo is None  # so the conversion is needed


def test_nesting_rtoml_refuses_is_refused_after_tomllib_read_it() -> None:
    deep = "a = " + "[" * 120 + "1" + "]" * 120 + "\n"
    with pytest.raises(ValueError, match="recursion"):
        rtoml.loads(deep)
    assert tomllib.loads(deep)  # tomllib reads it; envforge does not read a lock nested that deep
    with pytest.raises(InvalidLock, match="nested too deeply"):
        parse_toml(deep, "x")


def test_nesting_too_deep_for_tomllib_is_an_invalid_lock() -> None:
    with pytest.raises(InvalidLock) as err:
        parse_toml("a = " + "[" * 100_000 + "]" * 100_000, "x")
    assert (err.value.message, err.value.reason) == (
        "x is not a lock: arrays or tables nested too deeply (more than 64 levels)",
        "nested too deeply",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = 1\nb = [1,\n", "x is not valid TOML: Invalid value (at end of document)"),
        (
            "a = 0x_1\n",
            "x is not valid TOML: Expected newline or end of document after a statement (at line 1, column 6)",
        ),
        ("a = 1\na = 2\n", "x is not valid TOML: Cannot overwrite a value (at line 2, column 6)"),
    ],
)
def test_invalid_toml_is_named_with_tomllibs_line_and_column(text: str, message: str) -> None:
    with pytest.raises(ValueError):
        rtoml.loads(text)
    with pytest.raises(InvalidLock) as err:
        parse_toml(text, "x")
    assert (err.value.message, err.value.reason, err.value.key) == (
        message,
        message.removeprefix("x is not valid TOML: "),
        None,
    )


def test_without_rtoml_tomllib_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rtoml", None)  # `import rtoml` raises ImportError
    text = 'a = 1979-05-27T07:32:00-07:00\nb = [1, "x"]\n'
    assert _typed(parse_toml(text, "x")) == _typed(tomllib.loads(text))


_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6)
_OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: _dt.timezone(_dt.timedelta(minutes=m)))
_LEAVES = (
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
    | st.integers(-(2**63), 2**63 - 1)
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.datetimes(timezones=st.none() | _OFFSETS)
    | st.dates()
    | st.times()
)
_VALUES = st.recursive(
    _LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=20
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_parse_toml_agrees_with_tomllib_on_generated_documents(doc: dict) -> None:
    text = tomlkit.dumps(doc)
    assert _typed(parse_toml(text, "x")) == _typed(tomllib.loads(text))


_EDITS = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.sampled_from(
            [
                "",
                "[",
                "]",
                "{",
                "}",
                "=",
                ",",
                '"',
                "'",
                "\n",
                "#",
                ".",
                " ",
                "-",
                ":",
                "T",
                "Z",
                "\\",
                "0",
                ", }",
                "\\e",
                "\\x4",
                ":00",
            ]
        ),
    ),
    min_size=1,
    max_size=3,
)
_SEED = (Path(__file__).parents[1] / "data" / "pylock-conformance" / "pylock.spec-example.toml").read_text()


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(_EDITS)
def test_parse_toml_accepts_exactly_toml_1_1_on_damaged_locks(edits: list[tuple[int, str]]) -> None:
    """Whatever tomllib (TOML 1.0) reads is read the same; beyond it, what tomli >= 2.3 (the TOML 1.1
    reference, tomllib's upstream) reads, with the same document, and where tomli refuses a text
    that uv's own parser (the Rust toml crate, rtoml here) reads, what uv reads: a lock uv accepts is
    read (a newline between a key and its ``=`` inside an inline table: TOML 1.1's grammar forbids
    it, uv reads it; ``test_a_lock_uv_reads_and_tomli_refuses_is_read_as_uv_reads_it``). Nothing else."""
    text = _SEED
    for at, insert in edits:  # insert a character, or delete one where the insert is ""
        at %= len(text) + 1
        text = text[:at] + insert + text[at + (0 if insert else 1) :]
    try:
        expected = tomli.loads(text)
    except tomli.TOMLDecodeError:
        try:
            as_uv = rtoml.loads(text)
        except ValueError:
            with pytest.raises(InvalidLock):
                parse_toml(text, "x")
            return
        assert _values(parse_toml(text, "x")) == _values(as_uv)
        return
    assert _typed(parse_toml(text, "x")) == _typed(expected)
    try:
        assert _typed(tomllib.loads(text)) == _typed(expected)
    except tomllib.TOMLDecodeError:
        pass  # TOML 1.1 only: read as uv and tomli read it (see test_toml_1_1_is_read)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = {b = 1,\n c = 2}\n", {"a": {"b": 1, "c": 2}}),  # an inline table over several lines
        ("a = {b = 1, }\n", {"a": {"b": 1}}),  # a trailing comma in an inline table
        ('a = "\\e\\x41"\n', {"a": "\x1bA"}),  # \e and \xHH escapes
        ("a = 07:32\n", {"a": _dt.time(7, 32)}),  # a time without seconds
        ("a = 1979-05-27T07:32Z\n", {"a": _dt.datetime(1979, 5, 27, 7, 32, tzinfo=_dt.timezone.utc)}),
    ],
)
def test_toml_1_1_is_read(text: str, expected: dict) -> None:
    """TOML 1.1 syntax (toml.io changelog) is read as uv (the Rust toml crate) and tomli >= 2.3 read it;
    Python 3.11-3.14's tomllib reads TOML 1.0 only and refuses these."""
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    assert _typed(tomli.loads(text)) == _typed(expected)
    assert _typed(parse_toml(text, "x")) == _typed(expected)


@pytest.mark.parametrize(
    "text",
    [
        "[tool.envforge" + ".a" * 1000 + "]\nx = 1\n",  # rtoml refuses (its limit), tomllib reads it: still refused
        "[tool.envforge" + ".a" * 70 + "]\nx = 1\n",  # rtoml reads it: refused by the depth check
        "a = " + "[" * 64 + "]" * 64 + "\n",  # the document and 64 arrays: 65 levels
    ],
)
def test_nesting_deeper_than_64_levels_is_refused(text: str) -> None:
    with pytest.raises(InvalidLock) as err:
        parse_toml(text, "x")
    assert (err.value.message, err.value.reason) == (
        "x is not a lock: arrays or tables nested too deeply (more than 64 levels)",
        "nested too deeply",
    )


def test_a_lock_uv_reads_and_tomli_refuses_is_read_as_uv_reads_it(tmp_path: Path) -> None:
    """The property test's find: a newline between a key and its ``=`` in an inline table. TOML 1.1's
    grammar (``keyval-sep = ws "=" ws``) and tomli refuse it; the real uv reads the lock (its error
    is about the lock's content, not its TOML), and so does envforge, with uv's document."""
    at = 1226  # inside `dependencies = [{name = 'attrs'}]`: `{name` / ` = 'attrs'}`
    text = _SEED[:at] + "\n" + _SEED[at:]
    assert "    {name\n = 'attrs'}," in text
    with pytest.raises(tomli.TOMLDecodeError, match="Expected '=' after a key"):
        tomli.loads(text)
    lock = tmp_path / "pylock.toml"
    lock.write_text(text)
    assert "Not a valid `pylock.toml`" not in _uv_reads(lock)  # uv read it (and refused it for its content)
    deps = [p["dependencies"] for p in parse_toml(text, "x")["packages"] if "dependencies" in p]
    assert (
        deps
        == [[{"name": "attrs"}]]
        == [p["dependencies"] for p in rtoml.loads(text)["packages"] if "dependencies" in p]
    )
    lock.write_text(_SEED[:at] + "}" + _SEED[at:])  # what uv refuses is refused
    assert "Not a valid `pylock.toml`" in _uv_reads(lock)
    with pytest.raises(InvalidLock):
        parse_toml(lock.read_text(), "x")


def _uv_reads(lock: Path) -> str:
    """uv's stderr for ``uv pip install --dry-run -r lock`` (offline: nothing is fetched)."""
    from envforge.uv.run import uv_binary  # noqa: PLC0415 (the product's own way to find uv)

    argv = [uv_binary(), "pip", "install", "--dry-run", "--offline", "--python", sys.executable, "-r", str(lock)]
    run = subprocess.run(argv, capture_output=True, text=True)
    assert run.returncode != 0  # the example's Python requirement (==3.12) or its TOML: never installed
    return run.stderr


def test_nesting_of_64_levels_is_read() -> None:
    assert parse_toml("a = " + "[" * 63 + "]" * 63 + "\n", "x") == tomllib.loads("a = " + "[" * 63 + "]" * 63)


def test_deep_dotted_keys_are_exit_2_in_lock_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "pylock.deep.toml"
    lock.write_text(HEAD + "packages = []\n[tool.envforge" + ".a" * 1000 + "]\nx = 1\n")
    for argv in (["lock", "diff", str(lock), str(lock)], ["lock", "textconv", str(lock)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (0, 2) and "Traceback" not in err and "internal error" not in err
        assert "nested too deeply (more than 64 levels)" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # TOML 1.1 syntax on line 1 (tomllib stops there) and a real error further on: rtoml names the real one
        ("a = {b = 1,\n c = 2}\nx = 1\n\n\nbroken = [1, 2\n", "unclosed array, expected `]` at line 6 column 15"),
        ('a = "\\e"\nb = 1\nb = 2\n', "duplicate key at line 3 column 1"),
        # the error first: tomllib's message, as for every other TOML file envforge reads
        ("broken = [1, 2\na = {b = 1,\n c = 2}\n", "Unclosed array (at line 2, column 1)"),
    ],
)
def test_the_first_real_error_is_named(text: str, message: str) -> None:
    with pytest.raises(InvalidLock) as err:
        parse_toml(text, "x")
    assert (err.value.message, err.value.reason) == (f"x is not valid TOML: {message}", message)


# --- read_lock_file, uv.lock, not-a-lock, packages_digest, the validation cache's place -----------------------


def test_read_lock_file_names_the_path_or_the_label(tmp_path: Path) -> None:
    path = tmp_path / "pylock.x.toml"
    path.write_text("# made by hand\n" + HEAD + "packages = []\n")
    doc = read_lock_file(path)
    assert (doc.label, doc.kind, doc.comments, doc.entries, dict(doc.envforge)) == (
        str(path),
        "pylock",
        ("# made by hand",),
        (),
        {},
    )
    assert read_lock_file(path, label="HEAD:pylock.x.toml").label == "HEAD:pylock.x.toml"
    (tmp_path / "bad.toml").write_text("<<<<<<< ours\n")
    with pytest.raises(InvalidLock) as bad:
        read_lock_file(tmp_path / "bad.toml", label="REV:bad.toml")
    assert bad.value.message.startswith("REV:bad.toml:1: merge-conflict marker '<<<<<<<'")
    with pytest.raises(InputError) as missing:
        read_lock_file(tmp_path / "none.toml", label="ignored")
    assert (str(missing.value.message), missing.value.hint) == (
        f"lock {tmp_path / 'none.toml'} does not exist",
        "create it with `envforge lock RECIPE`",
    )
    (tmp_path / "latin1.toml").write_bytes(b"# caf\xe9\n")
    with pytest.raises(InputError) as latin1:
        read_lock_file(tmp_path / "latin1.toml")
    assert latin1.value.message == f"{tmp_path / 'latin1.toml'}:1: byte 0xe9 at offset 5 is not UTF-8"
    with pytest.raises(InputError) as labelled:
        read_lock_file(tmp_path / "latin1.toml", label="REV:latin1.toml")
    assert labelled.value.message == "REV:latin1.toml:1: byte 0xe9 at offset 5 is not UTF-8"


UV_LOCK = (Path(__file__).parents[1] / "data" / "uv-locks" / "test-pkg-relock.uv.lock").read_text()
UV_TWO_A = (
    'version = 1\n[[package]]\nname = "a"\nversion = "1"\nsource = { registry = "https://x/simple" }\n'
    "resolution-markers = [\"sys_platform == 'linux'\", \"sys_platform == 'win32'\"]\n"
    '[[package]]\nname = "a"\nversion = "2"\nsource = { registry = "https://x/simple" }\n'
)


def test_a_uv_lock_is_read_with_its_comments_and_no_envforge_table() -> None:
    doc = read_lock_text("# one\n# two\n" + UV_LOCK + "\n[tool.envforge]\nx = 1\n", label="u")
    assert (doc.label, doc.kind, doc.pylock, dict(doc.envforge), doc.comments, doc.entries, len(doc.packages)) == (
        "u",
        "uv.lock",
        None,
        {},
        ("# one", "# two"),
        (),
        9,
    )
    assert doc.packages[0]["name"] == "colorama"


def test_a_uv_lock_of_the_wrong_shape_is_refused_and_overlapping_entries_are_a_finding() -> None:
    with pytest.raises(InvalidLock) as shape:
        read_lock_text(UV_LOCK.replace("version = 1\n", 'version = "one"\n', 1), label="u")
    assert (shape.value.message, shape.value.key, shape.value.reason, shape.value.hint) == (
        "u is not a valid uv.lock at `version`: should be an integer, got a string",
        "version",
        "should be an integer, got a string",
        "regenerate it with `uv lock`",
    )
    # uv reads it (its installer decides per environment); envforge reads it too and names the pair
    doc = read_lock_text(UV_TWO_A, label="u")
    assert [a.describe() for a in doc.ambiguities] == [
        "package[0] (a 1; marker sys_platform == 'linux' | sys_platform == 'win32') and package[1] (a 2; "
        "no marker) can be active together"
    ]
    assert (doc.ambiguities[0].key, doc.ambiguities[0].first, doc.ambiguities[0].second) == ("package", 0, 1)


_NOT_A_LOCK = (
    "it has neither `lock-version` and `[[packages]]` (PEP 751 pylock.toml) nor `version` and `[[package]]` (uv.lock)"
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[recipe]\nname = "r"\n', f"r.toml is TOML but not a lock (it looks like an envforge recipe): {_NOT_A_LOCK}"),
        ('[project]\nname = "p"\n', f"r.toml is TOML but not a lock (it looks like a pyproject.toml): {_NOT_A_LOCK}"),
        (
            "recipe = 1\nproject = 2\n",
            f"r.toml is TOML but not a lock (it looks like an envforge recipe): {_NOT_A_LOCK}",
        ),
        ("version = 1\n", f"r.toml is TOML but not a lock: {_NOT_A_LOCK}"),
        ("package = []\n", f"r.toml is TOML but not a lock: {_NOT_A_LOCK}"),
        ("packages = {}\n", f"r.toml is TOML but not a lock: {_NOT_A_LOCK}"),
        ("", f"r.toml is TOML but not a lock: {_NOT_A_LOCK}"),
    ],
)
def test_toml_that_is_not_a_lock_says_what_it_looks_like(text: str, message: str) -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text(text, label="r.toml")
    assert (err.value.message, err.value.reason, err.value.key, err.value.hint) == (
        message,
        "not a lock",
        None,
        "pass a lockfile: lockfiles/pylock.<recipe>-<variant>.toml (made by `envforge lock`) or a uv.lock",
    )


def test_packages_digest_is_the_sha256_of_the_canonical_json() -> None:
    packages = [
        {"name": "b", "version": "1", "extra": {"z": 1, "a": [True, None, 1.5]}},
        {
            "name": "é",
            "upload-time": _dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=_dt.timezone.utc),
            "day": _dt.date(2025, 1, 2),
            "at": _dt.time(3, 4),
        },
    ]
    canonical = (
        '[{"extra":{"a":[true,null,1.5],"z":1},"name":"b","version":"1"},'
        '{"at":"03:04:00","day":"2025-01-02","name":"é","upload-time":"2025-01-02T03:04:05+00:00"}]'
    )
    assert packages_digest(packages) == "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert packages_digest([]) == "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
    assert packages_digest(()) == packages_digest([])
    with pytest.raises(TypeError) as err:
        packages_digest([{"x": {1, 2}}])
    assert str(err.value) == "set is not TOML data"


def test_nesting_too_deep_says_how_to_fix_it() -> None:
    with pytest.raises(InvalidLock) as err:
        parse_toml("a = " + "[" * 70 + "]" * 70, "x")
    assert err.value.hint == "fix the file or regenerate it with `envforge lock`"
    assert err.value.key is None


def test_an_archive_is_named_by_the_last_component_of_its_url_or_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path))
    for where, expected in [
        ('url = "https://h/a/b/c/example-1.0.tar.gz"', "example-1.0.tar.gz"),
        ('path = "dist/sub/example-1.0.zip"', "example-1.0.zip"),
    ]:
        text = HEAD + pkg(f'version = "1.0"\narchive = {{ {where}, {H} }}')
        cold, warm = read_lock_text(text, label="x"), read_lock_text(text, label="x")
        assert (cold.pylock is not None, warm.pylock) == (True, None)
        assert cold.entries[0].archive.filename == expected  # type: ignore[union-attr]
        assert warm.entries[0].archive.filename == expected  # type: ignore[union-attr]


def test_the_validation_cache_lives_under_the_users_cache_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENVFORGE_CACHE_DIR", raising=False)
    monkeypatch.delenv("ENVFORGE_NO_LOCK_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = HEAD + "packages = []\n"
    key = hashlib.sha256(f"envforge.lockreader/4\0{packaging.__version__}\0{text}".encode()).hexdigest()
    read_lock_text(text, label="x")  # the directories are made as needed
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()] == [
        Path("home/.cache/envforge/valid-locks") / key
    ]
    assert (tmp_path / "home/.cache/envforge/valid-locks" / key).read_text() == "[]"  # no ambiguity
    assert read_lock_text(text, label="x").pylock is None
    read_lock_text(text.replace("pip", "uv"), label="x")  # the directory exists already
    assert len(list((tmp_path / "home/.cache/envforge/valid-locks").iterdir())) == 2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    read_lock_text(text, label="x")
    assert [p.relative_to(tmp_path / "xdg") for p in (tmp_path / "xdg").rglob("*") if p.is_file()] == [
        Path("envforge/valid-locks") / key
    ]


def test_ambiguities_are_kept_with_the_validation_and_read_back_on_a_warm_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ENVFORGE_NO_LOCK_CACHE", raising=False)
    cold = read_lock_text(UV_TWO_A, label="u")
    [kept] = (tmp_path / "valid-locks").iterdir()
    assert json.loads(kept.read_text()) == [  # the documented cache entry: [key, first, second, entries, witness]
        ["package", 0, 1, "a 1; marker sys_platform == 'linux' | sys_platform == 'win32'", "a 2; no marker", {}]
    ]
    warm = read_lock_text(UV_TWO_A, label="u")
    assert warm.ambiguities == cold.ambiguities
    kept.write_text("[[1, 2]]")  # a damaged entry is validated again, never trusted
    assert read_lock_text(UV_TWO_A, label="u").ambiguities == cold.ambiguities
    assert json.loads(kept.read_text())[0][0] == "package"


def test_the_envforge_table_is_read_and_must_be_a_table() -> None:
    for _ in range(2):  # validated, then from the cache
        assert read_lock_text(HEAD + 'packages = []\n[tool.envforge]\nrecipe = "r"\n', label="x").envforge == {
            "recipe": "r"
        }
    assert read_lock_text(HEAD + "packages = []\n[tool]\nother = 1\n", label="x").envforge == {}
    for _ in range(2):
        with pytest.raises(InvalidLock) as err:
            read_lock_text(HEAD + "packages = []\n[tool]\nenvforge = 1\n", label="x")
        assert (err.value.message, err.value.key, err.value.reason, err.value.hint) == (
            "x is not a valid envforge lock at `tool.envforge`: should be a table",
            "tool.envforge",
            "should be a table",
            "regenerate it with `envforge lock` (or the tool named in its created-by)",
        )


def test_an_unsupported_lock_version_says_which_tools_write_1x() -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text('lock-version = "2.0"\ncreated-by = "pip"\npackages = []\n', label="x")
    assert (err.value.message, err.value.key, err.value.hint) == (
        "x is not a valid PEP 751 lock at `lock-version`: pylock version 2.0 is not supported (envforge reads "
        "lock-version 1.x)",
        "lock-version",
        "use a tool that writes lock-version 1.x, e.g. `envforge lock` or `uv export --format pylock.toml`",
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('lock-version = "1.0"\n', "created-by"),
        ('created-by = "pip"\n', "lock-version"),
        ("packages = []\n", "lock-version"),
    ],
)
def test_any_one_pylock_key_makes_it_a_pylock(text: str, key: str) -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text(text, label="x")
    assert (err.value.message, err.value.hint) == (
        f"x is not a valid PEP 751 lock at `{key}`: Missing required value",
        "regenerate it with `envforge lock` (or the tool named in its created-by)",
    )


def test_a_conflict_marker_says_how_to_resolve_it() -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text("a = 1\n=======\n", label="x")
    assert (err.value.message, err.value.key, err.value.reason, err.value.hint) == (
        "x:2: merge-conflict marker '=======': the lockfile was merged with unresolved conflicts",
        None,
        "merge-conflict marker on line 2",
        "resolve the conflict in git (take one side, e.g. `git checkout "
        "--theirs -- FILE`), then re-run `envforge lock` to regenerate the lock",
    )


def test_an_archive_path_without_a_directory_is_its_own_name() -> None:
    text = HEAD + pkg(f'version = "1.0"\narchive = {{ path = "example-1.0.zip", {H} }}')
    assert [
        read_lock_text(text, label="x").entries[0].archive.filename  # type: ignore[union-attr]
        for _ in range(2)
    ] == ["example-1.0.zip", "example-1.0.zip"]


def test_no_lock_cache_turns_the_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ENVFORGE_NO_LOCK_CACHE", "1")
    text = HEAD + "packages = []\n"
    assert [read_lock_text(text, label="x").pylock is not None for _ in range(2)] == [True, True]
    assert list(tmp_path.iterdir()) == []


def test_invalid_toml_in_a_lock_names_the_lock_and_the_fix() -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text("a = 1\na = 2\n", label="pylock.x.toml")
    assert (err.value.message, err.value.hint) == (
        "pylock.x.toml is not valid TOML: Cannot overwrite a value (at line 2, column 6)",
        "fix the file or regenerate it with `envforge lock`",
    )


def test_a_tool_value_that_is_not_a_table_is_packagings_error() -> None:
    with pytest.raises(InvalidLock) as err:
        read_lock_text(HEAD + "packages = []\ntool = 1\n", label="x")
    assert (err.value.key, err.value.reason) == ("tool", "Unexpected type int (expected Mapping)")


def test_a_number_of_more_digits_than_python_converts_is_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: rc 70 (``ValueError: Exceeds the limit (4300 digits)``) before."""
    path = tmp_path / "pylock.toml"
    path.write_text('lock-version = "1.0"\ncreated-by = "x"\nx = ' + "9" * 5000 + "\npackages = []\n")
    assert main(["lock", "diff", str(path), str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines()[0] == f"error: {path}:3: a number of more than 4,300 digits: no lock has one"
    with pytest.raises(InvalidLock) as exc:
        read_lock_text("version = 1\n[[package]]\nname = 'a'\nversion = '1'\nx = " + "1" * 4301 + "\n", label="uv.lock")
    assert exc.value.message == "uv.lock:5: a number of more than 4,300 digits: no lock has one"
    assert exc.value.hint == "fix the file or regenerate it with `envforge lock`"
    assert exc.value.reason.startswith("Exceeds the limit (4300 digits) for integer string conversion")


def test_an_overlap_below_a_zero_version_part_is_found_as_packaging_selects_both() -> None:
    """python_full_version < '3.11.0' and python_version < '3.12' are both true on 3.10: the
    oracle is packaging's own Pylock.select, which refuses the pair there (reader 3 missed it)."""
    from packaging.markers import default_environment  # lazy: only this test needs it

    entry = (
        '[[packages]]\nname = "idna"\nversion = "{v}"\nmarker = "{m}"\n'
        'wheels = [{{ url = "https://e.example/idna-{v}-py3-none-any.whl", hashes = {{ sha256 = "ffff" }} }}]\n'
    )
    text = (
        'lock-version = "1.0"\ncreated-by = "envforge"\n'
        + entry.format(v="3.7", m="python_full_version < '3.11.0'")
        + entry.format(v="3.10", m="python_version < '3.12'")
    )
    found = read_lock_text(text, label="p").ambiguities
    assert [(a.first, a.second, dict(a.witness)) for a in found] == [
        (0, 1, {"python_full_version": "3.10.99", "python_version": "3.10"})
    ]
    with pytest.raises(PylockSelectError):
        list(
            Pylock.from_dict(tomllib.loads(text)).select(
                environment={**default_environment(), "python_full_version": "3.10.99", "python_version": "3.10"}
            )
        )


def test_a_version_of_more_digits_than_python_converts_in_a_marker_is_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TOML reads it as a string and packaging's Pylock.from_dict accepts it, but no marker
    evaluation can compare it (packaging raises ValueError too): the overlap search was rc 70."""
    big = "1" * 5000
    wheel = 'wheels = [{{ url = "https://e.example/idna-{v}-py3-none-any.whl", hashes = {{ sha256 = "ffff" }} }}]\n'
    path = tmp_path / "pylock.toml"
    path.write_text(
        HEAD
        + f'[[packages]]\nname = "idna"\nversion = "3.7"\nmarker = "python_version < \'{big}\'"\n'
        + wheel.format(v="3.7")
        + '[[packages]]\nname = "idna"\nversion = "3.8"\n'
        "marker = \"python_version >= '3'\"\n" + wheel.format(v="3.8")
    )
    assert main(["lock", "diff", str(path), str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"error: {path}:6: a version of more than 4,300 digits in a marker: no installer can compare it",
        "  hint: regenerate it with `envforge lock` (or the tool named in its created-by)",
    ]
    uv = (
        'version = 1\nrevision = 3\n\n[[package]]\nname = "b"\nversion = "1"\n'
        f'resolution-markers = ["python_full_version < \'{big}\'"]\nsource = {{ registry = "https://x/simple" }}\n\n'
        '[[package]]\nname = "b"\nversion = "2"\nresolution-markers = ["python_full_version >= \'3\'"]\n'
        'source = { registry = "https://x/simple" }\n'
    )
    with pytest.raises(InvalidLock) as exc:
        read_lock_text(uv, label="uv.lock")
    assert (exc.value.message, exc.value.hint) == (
        "uv.lock:7: a version of more than 4,300 digits in a marker: no installer can compare it",
        "regenerate it with `uv lock`",
    )


def test_a_fifo_planted_as_a_validation_cache_entry_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    text = HEAD + "packages = []\n"
    key = hashlib.sha256(f"envforge.lockreader/4\0{packaging.__version__}\0{text}".encode()).hexdigest()
    entry = tmp_path / "cache" / "valid-locks" / key
    entry.parent.mkdir(parents=True)
    os.mkfifo(entry)

    def hung(*_args: object) -> None:
        raise AssertionError("the cache entry was opened: a FIFO blocks")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)  # a guard that turns a hang into a failure, not a timing bound
    try:
        assert read_lock_text(text, label="x").pylock is not None  # validated again, as with no entry
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert entry.read_text() == "[]"  # the FIFO was replaced by the real entry


def test_another_error_of_the_overlap_search_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    from envforge.lock import read

    def fails(_entries: object) -> None:
        raise ValueError("something packaging could not compare")

    monkeypatch.setattr(read, "pylock_ambiguities", fails)
    monkeypatch.setenv("ENVFORGE_NO_LOCK_CACHE", "1")
    with pytest.raises(InvalidLock) as exc:
        read_lock_text(HEAD + "packages = []\n", label="x")
    assert (exc.value.message, exc.value.reason) == (
        "x: a marker cannot be evaluated: something packaging could not compare",
        "a marker cannot be evaluated: something packaging could not compare",
    )
    big = "1" * 5000
    with pytest.raises(InvalidLock) as exc:
        read_lock_text(HEAD + f'x = "{big}"\npackages = []\n', label="y")
    assert exc.value.reason == "a version of more than 4,300 digits in a marker: no installer can compare it"
