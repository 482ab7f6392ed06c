"""A lock is what ``envforge lock`` wrote, or an error (issue 18, item 3; envforge.lock.check).

Real inputs: the committed kimi lock and recipe, copied into a temp project; cut at real byte
offsets; a hand-added ``[[packages]]`` entry for a real wheel file with its correct sha256; one
wheel hash changed. ``lock --check`` (in-process CLI and the console script), and the reader under
build and verify, refuse each of them; none of them is ever "up to date" or a smaller environment.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.cli import main
from envforge.lock.check import check_integrity, integrity_problems
from envforge.lock.digest import packages_digest
from envforge.lock.model import LockIntegrityError, read_lock
from envforge.lock.write import restamp
from tests.support.localindex import make_wheel

REPO = Path(__file__).resolve().parents[2]
KIMI = "pylock.kimi-k25-sm120-cu128.toml"
CHECK = ["lock", "kimi-k25-sm120", "--variant", "cu128", "--check"]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for sub in ("recipes", "patchsets"):
        shutil.copytree(REPO / sub, root / sub)
    (root / "lockfiles").mkdir()
    shutil.copyfile(REPO / "lockfiles" / KIMI, root / "lockfiles" / KIMI)
    return root


def check(project: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([*CHECK, "--project", str(project)])
    out, err = capsys.readouterr()
    return code, out, err


def test_committed_locks_record_the_digest_of_their_packages() -> None:
    for path in sorted((REPO / "lockfiles").glob("pylock.*.toml")):
        lock = read_lock(path)
        assert lock.envforge["packages-digest"] == lock.digest, path
        assert integrity_problems(lock) == []
    assert (
        read_lock(REPO / "lockfiles" / KIMI).digest
        == "sha256:abba5b95c8440c66268d228cb42d03f8c2322e29421d71f7f2dc8cea0c539d53"
    )


def test_digest_is_of_the_canonical_form_not_the_layout() -> None:
    a = [{"name": "x", "version": "1", "wheels": [{"url": "u", "hashes": {"sha256": "00"}}]}]
    b = [{"wheels": [{"hashes": {"sha256": "00"}, "url": "u"}], "version": "1", "name": "x"}]
    assert (
        packages_digest(a)
        == packages_digest(b)
        == (
            "sha256:"
            + hashlib.sha256(
                b'[{"name":"x","version":"1","wheels":[{"hashes":{"sha256":"00"},"url":"u"}]}]'
            ).hexdigest()
        )
    )
    assert packages_digest(a) != packages_digest([{**a[0], "version": "2"}])


def test_restamp_keeps_every_package_byte(tmp_path: Path) -> None:
    text = (REPO / "lockfiles" / KIMI).read_text()
    without = re.sub(r'packages-digest = "[^"]*"\n', "", text)
    assert restamp(without) == text


def test_intact_lock_is_up_to_date(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(project, capsys)
    assert (code, out) == (0, f"{project / 'lockfiles' / KIMI}: up to date\n")


def test_hand_added_entry_with_a_correct_hash_is_an_error(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = make_wheel(tmp_path / "w", "extra-pkg", "1.0")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock = project / "lockfiles" / KIMI
    text = lock.read_text()
    entry = (
        f'[[packages]]\nname = "extra-pkg"\nversion = "1.0"\nwheels = [{{ path = "{wheel}", '
        f'hashes = {{ sha256 = "{digest}" }} }}]\n\n'
    )
    lock.write_text(text.replace("[tool.envforge]", entry + "[tool.envforge]", 1))
    code, out, err = check(project, capsys)
    recorded = read_lock(REPO / "lockfiles" / KIMI).digest
    assert (code, out) == (2, "")
    assert err.splitlines()[:2] == [
        f"error: {lock} is not the lock `envforge lock` wrote:",
        f"  its [[packages]] are not the ones `envforge lock` wrote: packages-digest {recorded}, the file's "
        f"packages hash to {read_lock(lock).digest} (an entry added, removed, cut off or edited by hand, e.g. a "
        "changed wheel hash)",
    ]
    assert err.splitlines()[2] == (
        "  hint: regenerate it with `envforge lock kimi-k25-sm120 --variant cu128` and "
        "review the diff; never edit a lock by hand"
    )


def test_changed_wheel_hash_is_an_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = project / "lockfiles" / KIMI
    text = lock.read_text()
    first = re.search(r'sha256 = "([0-9a-f]{64})"', text)
    assert first
    lock.write_text(text.replace(first.group(1), "0" * 64, 1))
    code, out, err = check(project, capsys)
    assert (code, out) == (2, "")
    assert "its [[packages]] are not the ones `envforge lock` wrote" in err.splitlines()[1]


def test_lock_without_its_envforge_table_is_an_error(project: Path) -> None:
    lock = project / "lockfiles" / KIMI
    text = lock.read_text()
    lock.write_text(text[: text.index("[tool.envforge]")])
    with pytest.raises(LockIntegrityError) as err:
        check_integrity(read_lock(lock))
    assert err.value.problems == (
        "it has no [tool.envforge] table: not written by `envforge lock`, or cut short before its end",
    )


def test_lock_missing_a_package_its_inputs_record_is_an_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file contradicts itself (inputs name sglang, [[packages]] lacks it), even with a
    restamped digest: not what `envforge lock` wrote (exit 2), whatever the recipe says."""
    lock = project / "lockfiles" / KIMI
    text = lock.read_text()
    start = text.index('[[packages]]\nname = "sglang"\n')
    end = text.index("[[packages]]", start + 1)
    lock.write_text(restamp(text[:start] + text[end:]))  # even with a matching digest
    assert integrity_problems(read_lock(lock)) == [
        "[tool.envforge] inputs.packages records sglang==0.5.9, which is not in its [[packages]]"
    ]
    code, out, err = check(project, capsys)
    assert (code, out) == (2, "")
    assert err.splitlines()[:2] == [
        f"error: {lock} is not the lock `envforge lock` wrote:",
        "  [tool.envforge] inputs.packages records sglang==0.5.9, which is not in its [[packages]]",
    ]


def test_inputs_of_another_shape_are_an_error_and_no_inputs_is_stale(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = project / "lockfiles" / KIMI
    text = lock.read_text()
    start = text.index("[tool.envforge.inputs]")
    end = text.index("\n[", start + 1)
    trimmed = text[:start] + text[end + 1 :]
    lock.write_text(trimmed.replace("[tool.envforge]\n", '[tool.envforge]\ninputs = "x"\n', 1))
    assert integrity_problems(read_lock(lock)) == [
        "[tool.envforge] inputs is not a table (the recipe keys the lock was made from)"
    ]
    lock.write_text(trimmed)
    assert integrity_problems(read_lock(lock)) == []
    code, out, err = check(project, capsys)
    assert (code, out.splitlines(), err) == (
        1,
        [
            f"{lock}: stale",
            "  packages.sgl-kernel: locked (absent), recipe now sgl-kernel==0.3.21",
            "  packages.sglang: locked (absent), recipe now sglang==0.5.9",
            "  packages.torch: locked (absent), recipe now torch==2.9.1",
            "  platform: locked (absent), recipe now 'x86_64-manylinux_2_28'",
            "  python: locked (absent), recipe now '3.12'",
            "  resolution: locked (absent), recipe now 'full'",
        ],
        "",
    )


def _cut_offsets(text: str) -> list[int]:
    """Byte offsets to cut the real lock at: before the sglang entry (a package boundary), inside
    it, mid-line inside a wheel table, just before and inside [tool.envforge], and near the end."""
    sglang = text.index('[[packages]]\nname = "sglang"\n')
    tool = text.index("[tool.envforge]")
    digest = text.index("packages-digest")
    return [
        sglang,
        sglang + 30,
        text.index("hashes", sglang) + 3,
        tool,
        tool + 5,
        digest + 20,
        len(text) - 40,
        len(text) // 3,
    ]


def test_truncated_lock_never_passes_and_never_tracebacks(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = project / "lockfiles" / KIMI
    data = (REPO / "lockfiles" / KIMI).read_bytes()
    for offset in _cut_offsets(data.decode()):
        lock.write_bytes(data[:offset])
        code, out, err = check(project, capsys)
        assert code in (1, 2) and "up to date" not in out and "Traceback" not in err, (offset, err)
        assert err.startswith("error: ") if code == 2 else out.splitlines()[0].endswith(": stale"), (offset, out)


def test_truncated_lock_through_the_console_script(project: Path) -> None:
    lock = project / "lockfiles" / KIMI
    data = (REPO / "lockfiles" / KIMI).read_bytes()
    sglang = data.index(b'[[packages]]\nname = "sglang"\n')
    lock.write_bytes(data[:sglang])
    proc = subprocess.run(
        [sys.executable, "-m", "envforge", *CHECK, "--project", str(project)], capture_output=True, text=True
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines()[:2] == [
        f"error: {lock} is not the lock `envforge lock` wrote:",
        "  it has no [tool.envforge] table: not written by `envforge lock`, or cut short before its end",
    ]


def test_the_packages_digest_is_of_the_utf_8_text_and_refuses_what_toml_cannot_hold() -> None:
    """sha256 of the compact, key-sorted JSON, non-ASCII text as UTF-8 (not \\u escapes): pinned."""
    from envforge.lock.digest import packages_digest

    assert packages_digest([{"name": "é"}]) == (
        "sha256:aae35caffbc95b2bbab78f2ec7f4665aa36f7f1abbdd9deb805b142cae2db4e2"  # of '[{"name":"é"}]'
    )
    with pytest.raises(TypeError) as exc:
        packages_digest([{"name": {1, 2}}])
    assert str(exc.value) == "set is not TOML data"
