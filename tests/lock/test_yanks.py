"""envforge.lock.yanks and ``envforge lock diff --yanked`` (field case B48): a version yanked on its
index after locking is named with the index's reason, on a real local PEP 503 index on 127.0.0.1
whose page marks a file ``data-yanked`` (PEP 592)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from envforge.cli import main
from envforge.lock.model import read_lock
from envforge.lock.yanks import WORKERS, YankCheck, YankedPin, check_lock, lock_pins, warning_lines, yanked_pins
from envforge.patching import releases
from tests.support.localindex import LocalIndex, make_wheel, serve

REASON = "miscompiles the SM120 guard; use 1.0"


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    idx = LocalIndex(tmp_path / "gk")
    for v in ("1.0", "1.1"):
        idx.add(make_wheel(tmp_path / "built", "guardkit", v))
    idx.add(make_wheel(tmp_path / "built", "six", "1.17.0"))
    page = idx.root / "simple" / "guardkit" / "index.html"
    page.write_text(
        page.read_text().replace(
            '<a href="../../files/guardkit-1.1', f'<a data-yanked="{REASON}" href="../../files/guardkit-1.1'
        )
    )
    with serve(idx):
        yield idx


def _pylock(path: Path, index: str, guardkit: str) -> Path:
    base = index.rsplit("/simple", 1)[0]
    rows = [
        f'[[packages]]\nname = "{name}"\nversion = "{version}"\nindex = "{index}"\n'
        f'wheels = [{{ url = "{base}/files/{name}-{version}-py3-none-any.whl", '
        f'hashes = {{ sha256 = "{"1" * 64}" }} }}]\n'
        for name, version in (("guardkit", guardkit), ("six", "1.17.0"))
    ]
    path.write_text('lock-version = "1.0"\ncreated-by = "uv"\n\n' + "\n".join(rows))
    return path


def test_a_yanked_pin_is_named_with_its_reason(index: LocalIndex, tmp_path: Path) -> None:
    pins = [
        ("guardkit", "1.1", index.url, ["guardkit-1.1-py3-none-any.whl"]),
        ("guardkit", "1.0", index.url, ["guardkit-1.0-py3-none-any.whl"]),
        ("six", "1.17.0", index.url, ["six-1.17.0-py3-none-any.whl"]),
    ]
    check = yanked_pins(pins, tmp_path / "cache")
    assert check == YankCheck(
        (YankedPin("guardkit", "1.1", index.url, "guardkit-1.1-py3-none-any.whl", REASON),), pages=2
    )
    assert check.yanked[0].describe() == f'guardkit 1.1 is yanked on its index (reason: "{REASON}")'


def test_lock_diff_yanked_warns_and_trips_exit_code(
    index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    _pylock(tmp_path / "old.toml", index.url, "1.0")
    _pylock(tmp_path / "new.toml", index.url, "1.1")
    assert main(["lock", "diff", "old.toml", "new.toml", "--yanked", "--exit-code"]) == 1
    out, err = capsys.readouterr()
    assert "upgraded  guardkit  1.0 -> 1.1" in out
    assert err.splitlines() == [f'warning: new.toml: guardkit 1.1 is yanked on its index (reason: "{REASON}")']
    # the same lock on both sides: no change, but the yanked pin still trips --exit-code
    assert main(["lock", "diff", "new.toml", "new.toml", "--yanked", "--exit-code", "--json"]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)["data"]
    assert (data["yanked"], data["unchecked"], data["stale"], err) == (
        [
            {
                "name": "guardkit",
                "version": "1.1",
                "index": index.url,
                "file": "guardkit-1.1-py3-none-any.whl",
                "reason": REASON,
            }
        ],
        [],
        [],
        "",
    )
    assert main(["lock", "diff", "old.toml", "old.toml", "--yanked", "--exit-code"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "old.toml: no pin it could check is yanked (2 of 2 index pages read)"
    ]


def test_entries_a_pip_lock_names_no_index_for_are_said_not_checked(
    index: LocalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip lock`` writes no ``index`` key: such an entry (files not on PyPI's file host) cannot be
    asked about, and lock diff --yanked says which, in one line; the entry naming its index is asked."""
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    lock = _pylock(tmp_path / "pip.toml", index.url, "1.1")
    lock.write_text(
        lock.read_text()
        .replace('created-by = "uv"', 'created-by = "pip"')
        .replace(f'name = "guardkit"\nversion = "1.1"\nindex = "{index.url}"\n', 'name = "guardkit"\nversion = "1.1"\n')
    )
    assert main(["lock", "diff", "pip.toml", "pip.toml", "--yanked", "--exit-code"]) == 0
    _, err = capsys.readouterr()
    assert err.splitlines() == [
        "warning: pip.toml: not checked for yanks: 1 entry names no index: guardkit 1.1",
        "pip.toml: no pin it could check is yanked (1 of 1 index page read)",
    ]
    assert main(["lock", "diff", "pip.toml", "pip.toml", "--yanked", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["yanked"], data["unchecked"], data["no_index"]) == ([], [], ["guardkit 1.1"])


def test_an_index_that_cannot_be_read_is_unchecked_then_answered_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = f"http://127.0.0.1:{port}/simple"
    _pylock(tmp_path / "new.toml", gone, "1.1")
    assert main(["lock", "diff", "new.toml", "new.toml", "--yanked", "--exit-code"]) == 0
    _, err = capsys.readouterr()
    assert err.splitlines() == [  # the index's pages in one line
        f"warning: new.toml: not checked for yanks: guardkit and 1 more name on {gone}: cannot read the package "
        f"index at {gone}/guardkit/: 127.0.0.1:{port} refused the connection (nothing listens there)"
    ]


class _Stall(socketserver.BaseRequestHandler):
    """Accepts a connection and never answers (a black-holed index), counting connections."""

    accepted: list[int] = []
    release = threading.Event()

    def handle(self) -> None:
        self.accepted.append(1)
        self.release.wait(10)


def test_an_index_that_never_answers_costs_one_timeout_per_worker_not_per_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """24 locked names on an index that accepts and never answers: at most WORKERS pages are asked
    (each times out), the others are taken from the cache only; one line names them all."""
    monkeypatch.setattr(releases, "TIMEOUT_S", 0.5)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Stall)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    pins = [(f"kern{i:02d}", "1.0", url, [f"kern{i:02d}-1.0-py3-none-any.whl"]) for i in range(24)]
    try:
        started = time.monotonic()
        check = yanked_pins(pins, tmp_path / "cache")
        took = time.monotonic() - started
    finally:
        _Stall.release.set()
        server.shutdown()
        server.server_close()
    assert len(_Stall.accepted) <= WORKERS
    assert (check.yanked, len(check.unchecked), check.checked) == ((), 1, False)
    assert check.unchecked[0].startswith(f"kern00 and 23 more names on {url}: cannot read the package index at ")
    assert took < 24 * 0.5  # bounded by what 24 pages one after another would take: 24 timeouts of 0.5 s


def test_a_cached_listing_answers_when_the_index_is_gone_and_says_so(tmp_path: Path) -> None:
    idx = LocalIndex(tmp_path / "gk")
    idx.add(make_wheel(tmp_path / "built", "guardkit", "1.1"))
    page = idx.root / "simple" / "guardkit" / "index.html"
    page.write_text(page.read_text().replace("<a href=", f'<a data-yanked="{REASON}" href='))
    pins = [("guardkit", "1.1", "", ["guardkit-1.1-py3-none-any.whl"])]
    with serve(idx):
        pins = [(n, v, idx.url, f) for n, v, _, f in pins]
        assert yanked_pins(pins, tmp_path / "cache").stale == ()
    check = yanked_pins(pins, tmp_path / "cache")  # the server is stopped: the listing read above answers
    assert [y.describe() for y in check.yanked] == [f'guardkit 1.1 is yanked on its index (reason: "{REASON}")']
    assert len(check.stale) == 1 and check.stale[0].startswith(f"guardkit on {idx.url}: listing of 20")


def test_yanked_needs_two_sides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", "diff", "--git", "HEAD", "--yanked"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "error: --yanked checks the NEW side of `envforge lock diff OLD NEW`"
    )


def test_lock_pins_of_an_envforge_lock_and_entries_naming_no_index(index: LocalIndex, tmp_path: Path) -> None:
    """An entry with ``index`` is asked of it; one without, whose wheels are on PyPI's file host,
    of PyPI; one without, whose wheels are elsewhere, is a no-index line (build and verify)."""
    base = index.url.rsplit("/simple", 1)[0]
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "envforge"\n\n'
        f'[[packages]]\nname = "guardkit"\nversion = "1.1"\nindex = "{index.url}/"\n'
        f'wheels = [{{ url = "{base}/files/guardkit-1.1-py3-none-any.whl", hashes = {{ sha256 = "{"1" * 64}" }} }}]\n\n'
        '[[packages]]\nname = "six"\nversion = "1.17.0"\n'
        'wheels = [{ url = "https://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl", '
        f'hashes = {{ sha256 = "{"2" * 64}" }} }}]\n\n'
        '[[packages]]\nname = "kern"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{base}/files/kern-1.0-py3-none-any.whl", hashes = {{ sha256 = "{"3" * 64}" }} }}]\n'
    )
    read = read_lock(lock)
    assert lock_pins(read) == (
        ("guardkit", "1.1", index.url, ("guardkit-1.1-py3-none-any.whl",)),
        ("six", "1.17.0", "https://pypi.org/simple", ("six-1.17.0-py2.py3-none-any.whl",)),
    )
    without_pypi = replace(read, packages=tuple(p for p in read.packages if p.name != "six"))
    check = check_lock(without_pypi, tmp_path / "cache")
    assert (check.yanked[0].name, check.no_index, check.pages) == ("guardkit", ("kern 1.0",), 1)
    assert warning_lines(check, "pylock.toml") == (
        f'pylock.toml: guardkit 1.1 is yanked on its index (reason: "{REASON}")',
        "pylock.toml: not checked for yanks: 1 entry names no index: kern 1.0",
    )
