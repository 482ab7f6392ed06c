"""Input files: size limits, strict UTF-8, deep nesting, and a bounded fuzz over recipe, lock and
patchset parsing that must end in a result or an :class:`EnvforgeError`, never anything else.

The fuzz is derandomized and bounded (``max_examples`` per test) so CI time is fixed: a few
seconds per test on a 2-core machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings, strategies as st

from envforge.core.errors import EnvforgeError, InputError
from envforge.core.textfile import (
    LARGE_LIMIT,
    SMALL_LIMIT,
    decode_utf8,
    load_json,
    load_toml,
    parse_json,
    parse_toml,
    read_bytes,
    read_state,
)

ROOT = Path(__file__).resolve().parents[2]
RECIPES = [ROOT / "recipes" / "quickstart.toml", ROOT / "recipes" / "kimi-k25-sm120.toml"]
LOCK = ROOT / "tests" / "data" / "locks" / "sglang-0.5.9" / "pylock.kimi-k25-sm120-cu128.toml"
PATCHSETS = sorted((ROOT / "patchsets").glob("*.toml"))
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# --- the helpers, with literal messages ---------------------------------------------------------


def test_read_bytes_limits(tmp_path: Path) -> None:
    f = tmp_path / "r.toml"
    f.write_bytes(b"x" * 11)
    assert read_bytes(f, what="recipe", limit=11) == b"x" * 11
    with pytest.raises(InputError) as exc:
        read_bytes(f, what="recipe", limit=10)
    assert exc.value.message == f"recipe {f} is larger than 10 bytes: not a recipe envforge reads"
    assert exc.value.hint == "check the path; envforge reads recipe files up to 10 bytes"
    with pytest.raises(InputError) as exc:
        read_bytes(Path("/dev/zero"), what="lock")
    assert (exc.value.message, exc.value.hint) == (
        "lock /dev/zero is not a regular file (a character device)",
        "pass the path of a lock file",
    )
    assert (SMALL_LIMIT, LARGE_LIMIT) == (1048576, 67108864)


def test_read_bytes_missing_directory_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=rf"^lock {tmp_path / 'no'} does not exist$"):
        read_bytes(tmp_path / "no", what="lock")
    with pytest.raises(InputError, match=rf"^recipe {tmp_path} is a directory, not a file$"):
        read_bytes(tmp_path, what="recipe")
    f = tmp_path / "secret.toml"
    f.write_text("a = 1")
    f.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(InputError, match=rf"^cannot read recipe {f}: Permission denied$"):
            read_bytes(f, what="recipe")


def test_read_bytes_of_a_fifo_is_bounded(tmp_path: Path) -> None:
    """A FIFO with a writer that never stops: read ``limit + 1`` bytes, then an error."""
    import subprocess

    fifo = tmp_path / "pylock.toml"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"yes > {fifo}"], stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(InputError, match="is larger than 1024 bytes"):
            read_bytes(fifo, what="lock", limit=1024)
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize(
    "data, message",
    [
        ("a".encode("utf-16"), "f.toml is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8"),
        (
            "a".encode("utf-16-be").join([b"\xfe\xff", b""]),
            "f.toml is UTF-16 (it starts with a UTF-16 byte-order mark), not UTF-8",
        ),
        ("a".encode("utf-32"), "f.toml is UTF-32 (it starts with a UTF-32 byte-order mark), not UTF-8"),
        (b"ok\nline2 \xc3(\n", "f.toml:2: byte 0xc3 at offset 9 is not UTF-8"),
        (b"\x80", "f.toml:1: byte 0x80 at offset 0 is not UTF-8"),
    ],
)
def test_decode_utf8_names_the_encoding_or_the_byte(data: bytes, message: str) -> None:
    with pytest.raises(InputError) as exc:
        decode_utf8(data, label="f.toml")
    assert exc.value.message == message
    assert exc.value.hint is not None and "UTF-8" in exc.value.hint


def test_decode_utf8_drops_a_utf8_bom() -> None:
    assert decode_utf8(b"\xef\xbb\xbfa = 1\n", label="f") == "a = 1\n"


@pytest.mark.parametrize(
    "text",
    [
        "a = " + "[" * 100_000 + "]" * 100_000,
        "a = " + "{b = " * 100_000 + "}" * 100_000,
        "a = " + "[" * 2000 + "]" * 2000,
    ],
)
def test_parse_toml_deep_nesting(text: str) -> None:
    with pytest.raises(InputError, match=r"^f: not valid TOML for envforge: arrays or tables nested too deeply$"):
        parse_toml(text, label="f")


def test_parse_toml_and_json_syntax_errors() -> None:
    with pytest.raises(
        InputError, match=r"^f: not valid TOML: Expected '=' after a key in a key/value pair \(at line 1, column 3\)$"
    ):
        parse_toml("a b", label="f")
    with pytest.raises(InputError, match=r"^f: not valid JSON: Expecting value: line 1 column 1 \(char 0\)$"):
        parse_json("", label="f")
    with pytest.raises(InputError, match=r"^f: not valid JSON for envforge: arrays or objects nested too deeply$"):
        parse_json("[" * 100_000 + "]" * 100_000, label="f")
    with pytest.raises(InputError, match=r"^f: not valid JSON: not UTF-8$"):
        parse_json(b'"\xff"', label="f")


def test_load_toml_and_json_round(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text("a = 1\n")
    assert load_toml(f, what="recipe") == ({"a": 1}, "a = 1\n")
    j = tmp_path / "a.json"
    j.write_text('{"a": [1]}')
    assert load_json(j, what="report") == {"a": [1]}


# --- read_state: envforge's own state files, regular files only -----------------------------------


class _Hung(Exception):
    pass


@pytest.fixture
def no_hang() -> Any:
    """Fail (not hang) a test whose read blocks: SIGALRM after 10 s interrupts a blocking open()."""
    import signal

    def hung(signum: int, frame: Any) -> None:
        raise _Hung("the read blocked for 10 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


HINT = "rebuild the environment: `envforge build quickstart --variant default`"


def test_read_state_reads_a_regular_file_up_to_its_limit(tmp_path: Path) -> None:
    f = tmp_path / "patches.json"
    f.write_bytes(b"x" * 11)
    assert read_state(f, what="patch manifest", limit=11) == b"x" * 11
    with pytest.raises(InputError) as exc:
        read_state(f, what="patch manifest", limit=10, hint=HINT)
    assert (exc.value.message, exc.value.hint) == (
        f"patch manifest {f} is larger than 10 bytes: envforge never writes one that large",
        HINT,
    )
    link = tmp_path / "link.json"
    link.symlink_to(f)  # a symlink is followed: the target is judged
    assert read_state(link, what="patch manifest") == b"x" * 11


def test_read_state_oversized_is_refused_by_its_size(tmp_path: Path, no_hang: None) -> None:
    f = tmp_path / "pylock.toml"
    with open(f, "wb") as fh:  # sparse: 64 MiB + 1 byte on no disk at all
        fh.truncate(LARGE_LIMIT + 1)
    with pytest.raises(InputError) as exc:
        read_state(f, what="lock", hint=HINT)
    assert str(exc.value) == f"lock {f} is larger than 64 MiB: envforge never writes one that large\n  hint: {HINT}"


def test_read_state_refuses_a_fifo_without_opening_it(tmp_path: Path, no_hang: None) -> None:
    """No writer ever comes: open() would block for ever; read_state never opens it."""
    fifo = tmp_path / "patches.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as exc:
        read_state(fifo, what="patch manifest", hint=HINT)
    assert (exc.value.message, exc.value.hint) == (f"patch manifest {fifo} is not a regular file (a FIFO)", HINT)
    link = tmp_path / "env-profile.json"
    link.symlink_to(fifo)
    with pytest.raises(InputError, match=rf"^env profile record {link} is not a regular file \(a FIFO\)$"):
        read_state(link, what="env profile record")


def test_read_state_refuses_a_fifo_swapped_in_after_the_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_hang: None
) -> None:
    """The stat saw a regular file, a FIFO is there by the open: opened non-blocking, refused by fstat."""
    regular = tmp_path / "regular"
    regular.write_bytes(b"{}")
    fifo = tmp_path / "generation.json"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(
        "envforge.core.textfile.os.stat",
        lambda p, *a, **k: real_stat(regular) if Path(p) == fifo else real_stat(p, *a, **k),
    )
    with pytest.raises(InputError, match=rf"^generation record {fifo} is not a regular file \(a FIFO\)$"):
        read_state(fifo, what="generation record")


def test_read_state_refuses_devices_directories_and_sockets(tmp_path: Path, no_hang: None) -> None:
    zero = tmp_path / "pylock.toml"
    zero.symlink_to("/dev/zero")  # would read until memory runs out
    with pytest.raises(InputError) as exc:
        read_state(zero, what="lock", hint=HINT)
    assert (exc.value.message, exc.value.hint) == (f"lock {zero} is not a regular file (a character device)", HINT)
    directory = tmp_path / "generation.json"
    directory.mkdir()
    with pytest.raises(InputError, match=rf"^generation record {directory} is not a regular file \(a directory\)$"):
        read_state(directory, what="generation record")
    import socket
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # AF_UNIX paths are limited to ~107 bytes
        sock_path = Path(short) / "s.json"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(sock_path))
            with pytest.raises(InputError, match=rf"^cache entry {sock_path} is not a regular file \(a socket\)$"):
                read_state(sock_path, what="cache entry")


def test_read_state_missing_is_file_not_found(tmp_path: Path) -> None:
    """Absent stays FileNotFoundError (the caller says what absent means); a dangling symlink is absent."""
    with pytest.raises(FileNotFoundError):
        read_state(tmp_path / "patches.json", what="patch manifest")
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError):
        read_state(dangling, what="patch manifest")
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        InputError, match=rf"^cannot read patch manifest {tmp_path}/file/patches.json: Not a directory$"
    ):
        read_state(tmp_path / "file" / "patches.json", what="patch manifest")


def test_read_state_hint_callable_and_error_class(tmp_path: Path, no_hang: None) -> None:
    from envforge.lock.model import LockError

    calls: list[int] = []

    def hint() -> str:
        calls.append(1)
        return HINT

    f = tmp_path / "generation.json"
    f.write_text("{}")
    assert read_state(f, what="generation record", hint=hint) == b"{}" and calls == []  # only for an error
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(LockError) as exc:
        read_state(tmp_path / "fifo", what="lock", hint=hint, error=LockError)
    assert exc.value.hint == HINT and calls == [1]


def test_read_state_unreadable_names_the_reason(tmp_path: Path) -> None:
    f = tmp_path / "patches.json"
    f.write_text("{}")
    f.chmod(0)
    if os.geteuid() != 0:  # root reads anything
        with pytest.raises(InputError, match=rf"^cannot read patch manifest {f}: Permission denied$"):
            read_state(f, what="patch manifest")


# --- fuzz: recipes, locks and patchsets end in a result or an EnvforgeError -----------------------


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Real files cut, spliced with random bytes, with a byte flipped, or a line repeated."""
    n = len(seed)
    cut = st.integers(0, n).map(lambda i: seed[:i])
    splice = st.tuples(st.integers(0, n), st.binary(max_size=40)).map(lambda t: seed[: t[0]] + t[1] + seed[t[0] :])
    flip = st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(
        lambda t: seed[: t[0]] + bytes([t[1]]) + seed[t[0] + 1 :]
    )
    lines = seed.splitlines(keepends=True)
    repeat = st.integers(0, max(len(lines) - 1, 0)).map(lambda i: b"".join(lines[: i + 1] + lines[i:]))
    drop = st.integers(0, max(len(lines) - 1, 0)).map(lambda i: b"".join(lines[:i] + lines[i + 1 :]))
    return st.one_of(cut, splice, flip, repeat, drop)


_KEYS = st.sampled_from(
    [
        "recipe",
        "name",
        "python",
        "packages",
        "variant",
        "target",
        "indexes",
        "index",
        "overrides",
        "env",
        "patchsets",
        "version",
        "url",
        "lock-version",
        "wheels",
        "hashes",
        "sha256",
        "tool",
        "envforge",
        "marker",
        "requires-python",
        "default",
        "pcie",
        "x",
    ]
)
_SCALARS = st.one_of(st.text(max_size=12), st.integers(-2, 2**70), st.booleans(), st.floats(allow_nan=True), st.dates())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=20,
)
_DOCS = st.dictionaries(_KEYS, _VALUES, max_size=6)


def _toml_of(doc: dict[str, Any]) -> bytes | None:
    try:
        return tomlkit.dumps(doc).encode("utf-8", "surrogatepass")
    except Exception:  # tomlkit cannot write every value hypothesis makes (e.g. mixed arrays): skip
        return None


def _only_envforge_errors(fn: Any, *args: Any, names: str | None = None) -> Any:
    """``fn(*args)`` either reads the input (its result is returned) or refuses it as bad input:
    exit 2 with a message (naming ``names``, the file, when given), never another exception (a
    traceback, exit 70) and never another exit class; a refusal returns None."""
    try:
        return fn(*args)
    except EnvforgeError as err:
        assert err.exit_code == 2 and err.message.strip(), (err.exit_code, err.message)
        if names is not None:
            assert names in err.message + (err.hint or ""), (names, err.message)
        return None


def _seeded(paths: list[Path]) -> st.SearchStrategy[bytes]:
    return st.one_of(*[_mutations(p.read_bytes()) for p in paths])


@FUZZ
@given(data=st.one_of(_seeded(RECIPES), _DOCS.map(_toml_of).filter(lambda b: b is not None), st.binary(max_size=200)))
def test_fuzz_recipe_parsing_never_crashes(tmp_path: Path, data: bytes) -> None:
    from envforge.recipe.load import load_recipe

    f = tmp_path / "fuzz.toml"
    f.write_bytes(data)
    try:
        recipe = load_recipe(f)
    except EnvforgeError as err:
        assert err.exit_code == 2 and str(f) in err.message, (err.exit_code, err.message)
        return
    for name in recipe.variants:  # resolving a variant is part of reading a recipe
        _only_envforge_errors(recipe.resolve, name)


@FUZZ
@given(
    data=st.one_of(
        _mutations(LOCK.read_bytes()[:6000]),
        _DOCS.map(_toml_of).filter(lambda b: b is not None),
        st.binary(max_size=200),
    )
)
def test_fuzz_lock_parsing_never_crashes(tmp_path: Path, data: bytes) -> None:
    """Both lock readers: ``lock.read_lock`` (build, verify) and ``lockdiff`` (review)."""
    from envforge.lock.model import read_lock
    from envforge.lockdiff.sources import read_lock_file

    f = tmp_path / "pylock.fuzz.toml"
    f.write_bytes(data)
    lock = _only_envforge_errors(read_lock, f, names=f.name)
    if lock is not None:  # read: the packages it holds are named and versioned as strings, the path is the file
        assert lock.path == f and all(isinstance(p.name, str) and p.name for p in lock.packages)
    _only_envforge_errors(read_lock_file, f, names=f.name)


@FUZZ
@given(data=st.one_of(_seeded(PATCHSETS), _DOCS.map(_toml_of).filter(lambda b: b is not None)))
def test_fuzz_patchset_parsing_never_crashes(tmp_path: Path, data: bytes) -> None:
    from envforge.patching.patchset import load_patchset

    f = tmp_path / "fuzz.toml"
    f.write_bytes(data)
    patchset = _only_envforge_errors(load_patchset, f, names=f.name)
    if patchset is not None:  # read: an id, a distribution and its operations, each one with a file
        assert patchset.id and patchset.distribution and all(op.file for op in patchset.operations)
