"""``envforge verify --yanked`` (envforge.verify.yanks, field case B48): a version yanked on its index
after the lock was made is a ``yanked`` finding with the index's reason.

Real throughout: a local PEP 691 index on 127.0.0.1 (tests/support/localindex.py) serves guardkit
1.0 and 1.1; the real uv locks guardkit 1.1 and ``envforge build`` installs it; then the index marks
the 1.1 wheel yanked (``"yanked": "<reason>"`` on its JSON page, PEP 592) and verify asks it. An index
that cannot be reached is a note, and the check ``skipped``, never a pass; the listing read before
answers from the cache, and a note says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from envforge.cli import main
from tests.support.localindex import LocalIndex, make_wheel, serve

REASON = "miscompiles the SM120 guard; use 1.0"
WHEEL = "guardkit-1.1-py3-none-any.whl"


def envforge(cwd: Path, *args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ENVFORGE_CACHE_DIR": str(cache)},
    )


@pytest.fixture()
def built(tmp_path: Path) -> Iterator[tuple[Path, LocalIndex, ExitStack]]:
    """A project whose envs/r-default holds guardkit 1.1, locked and built from the local index,
    which then marks the 1.1 wheel yanked; served while the test runs, stopped by closing the stack."""
    idx = LocalIndex(tmp_path / "index")
    for v in ("1.0", "1.1"):
        idx.add(make_wheel(tmp_path / "w", "guardkit", v), upload_time="2026-01-01T00:00:00Z")
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    with ExitStack() as server:
        server.enter_context(serve(idx))
        (proj / "recipes" / "r.toml").write_text(
            f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\nguardkit = "==1.1"\n'
        )
        for step in (("lock", "r"), ("build", "r")):
            res = envforge(proj, *step, cache=tmp_path / "cache")
            assert res.returncode == 0, res.stderr
        idx.yank(WHEEL, REASON)
        yield proj, idx, server


def verify(capsys: pytest.CaptureFixture[str], proj: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["verify", "r-default", "--project", str(proj), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)["data"]


def yank_check(data: dict) -> dict:  # type: ignore[type-arg]
    return next(c for c in data["checks"] if c["name"] == "yanked")


def test_a_yanked_pin_is_a_finding_with_the_index_reason(
    built: tuple[Path, LocalIndex, ExitStack],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proj, idx, _ = built
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    code, data = verify(capsys, proj)  # offline by default: no index asked, no check listed
    assert (code, [c["name"] for c in data["checks"] if c["name"] == "yanked"]) == (0, [])
    code, data = verify(capsys, proj, "--yanked")
    assert code == 1
    assert data["findings"] == [
        {
            "kind": "yanked",
            "level": "static",
            "subject": "guardkit 1.1",
            "expected": "a version its index does not mark yanked (PEP 592)",
            "actual": f'{WHEEL} is yanked on {idx.url}: "{REASON}"',
            "fix": "relock to a version that is not yanked (`envforge lock r --variant default`); while none is "
            "fixed, accept it in [[verify.accept]] with the reason and an expiry date",
        }
    ]
    assert yank_check(data) == {
        "name": "yanked",
        "level": "static",
        "status": "findings",
        "detail": "1 pin asked of 1 index",
    }
    assert main(["verify", "r-default", "--project", str(proj), "--yanked"]) == 1
    assert "guardkit 1.1" in capsys.readouterr().out


def test_an_unreachable_index_is_a_note_and_the_cached_listing_answers(
    built: tuple[Path, LocalIndex, ExitStack],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proj, idx, server = built
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    assert verify(capsys, proj, "--yanked")[0] == 1  # read once: the listing is kept
    idx_url = idx.url
    server.close()  # the index is gone: connection refused
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "fresh-cache"))
    code, data = verify(capsys, proj, "--yanked")
    assert (code, data["findings"]) == (0, [])
    assert yank_check(data) == {
        "name": "yanked",
        "level": "static",
        "status": "skipped",
        "detail": "1 pin asked of 1 index; 1 page not checked (notes say why)",
    }
    notes = [n for n in data["notes"] if "yanks" in n]
    assert len(notes) == 1 and notes[0].startswith(
        f"the environment's lock: not checked for yanks: guardkit on {idx_url}: "
    )
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    code, data = verify(capsys, proj, "--yanked")
    assert (code, [f["subject"] for f in data["findings"]]) == (1, ["guardkit 1.1"])
    notes = [n for n in data["notes"] if "yanks" in n]
    assert len(notes) == 1 and notes[0].startswith(
        f"the environment's lock: checked for yanks from a cached listing: guardkit on {idx_url}: listing of 20"
    )


def test_an_accepted_yank_holds_only_when_asked(
    built: tuple[Path, LocalIndex, ExitStack],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``[[verify.accept]]`` entry for a yanked pin accepts it under ``--yanked`` and is not
    ``acceptance-unmatched`` in a run that did not look (without ``--yanked``)."""
    proj, _, _ = built
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "cache"))
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(
        recipe.read_text() + '\n[[verify.accept]]\nkind = "yanked"\nsubject = "guardkit 1.1"\n'
        'reason = "no fixed release yet"\nexpires = 2099-12-31\n'
    )
    code, data = verify(capsys, proj)
    assert (code, data["findings"]) == (0, [])
    code, data = verify(capsys, proj, "--yanked")
    assert (code, data["findings"], [a["subject"] for a in data["accepted"]]) == (0, [], ["guardkit 1.1"])


def test_yanked_is_a_static_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    assert main(["verify", str(tmp_path / "env"), "--level", "gpu", "--yanked", "--project", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == [
        "error: --yanked adds the check `yanked` to the static level, which was not asked for",
        "  hint: add static: --level static,gpu",
    ]
