"""envforge.installed.distributions: METADATA, RECORD and PEP 610 ``direct_url.json`` read as
regular files only (real FIFOs never block a reader), damaged records refused, never guessed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from envforge.core.errors import EnvforgeError, InputError
from envforge.installed.distributions import (
    Installed,
    direct_url,
    find_distribution,
    installed_distributions,
    read_record,
    refuse_unreadable,
    unreadable_distributions,
)
from envforge.installed.editable import editable_install

ROOT = Path(__file__).resolve().parents[2]


def dist(tmp: Path, direct: str | None = None) -> tuple[Path, Installed]:
    sp = tmp / "sp"
    di = sp / "tinypkg-1.0.dist-info"
    di.mkdir(parents=True, exist_ok=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n\n")
    (di / "RECORD").write_text("tinypkg/__init__.py,,\n")
    if direct is not None:
        (di / "direct_url.json").write_text(direct)
    return sp, Installed("tinypkg", "1.0", di)


@pytest.mark.parametrize("name", ["METADATA", "RECORD", "direct_url.json"])
def test_a_fifo_in_a_dist_info_is_refused_not_read(tmp_path: Path, name: str) -> None:
    """Field case N44: open() of a FIFO blocks until a writer comes. In a subprocess with a timeout,
    so a regression fails instead of hanging the run."""
    sp, d = dist(tmp_path)
    (d.dist_info / name).unlink(missing_ok=True)
    os.mkfifo(d.dist_info / name)
    code = (
        "import sys; from pathlib import Path\n"
        "from envforge.installed.distributions import Installed, installed_distributions, direct_url, read_record\n"
        "from envforge.core.errors import InputError\n"
        f"d = Installed('tinypkg', '1.0', Path({str(d.dist_info)!r}))\n"
        "try:\n"
        f"    print(sorted(installed_distributions(Path({str(sp)!r}))))\n"
        "    read_record(d); direct_url(d)\n"
        "except InputError as e:\n"
        "    print(e.message)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    if name == "METADATA":  # a dist-info without a regular METADATA is no distribution
        assert res.stdout == "[]\n", res.stderr
        return
    what = {"RECORD": "RECORD", "direct_url.json": "PEP 610 record"}[name]
    assert res.stdout == f"['tinypkg']\n{what} {d.dist_info / name} is not a regular file (a FIFO)\n", res.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100000, "not valid JSON for envforge: arrays or objects nested too deeply"),
        ("not json", "not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        ("[1, 2]", 'not a PEP 610 record (a JSON object with a string "url")'),
        ('{"url": 5}', 'not a PEP 610 record (a JSON object with a string "url")'),
        ('{"dir_info": {"editable": true}}', 'not a PEP 610 record (a JSON object with a string "url")'),
        ('{"url": "file:///x", "dir_info": true}', "not a PEP 610 record (dir_info is not an object)"),
        # Issue 41: a wrong-typed flag was read as "not editable"; PEP 610 makes it a boolean.
        (
            '{"url": "file:///x", "dir_info": {"editable": "yes"}}',
            'not a PEP 610 record (dir_info.editable is "yes", not true or false)',
        ),
        (
            '{"url": "file:///x", "dir_info": {"editable": 1}}',
            "not a PEP 610 record (dir_info.editable is 1, not true or false)",
        ),
        (
            '{"url": "file:///x", "dir_info": {"editable": null}}',
            "not a PEP 610 record (dir_info.editable is null, not true or false)",
        ),
    ],
)
def test_a_damaged_direct_url_json_is_an_error_never_an_index_install(tmp_path: Path, text: str, message: str) -> None:
    """Field cases N71 (exit 70 on deep nesting), N72 (a corrupt record silently an index install)."""
    sp, d = dist(tmp_path, text)
    with pytest.raises(InputError) as err:
        direct_url(d)
    assert err.value.message == f"{d.dist_info / 'direct_url.json'}: {message}"
    assert err.value.hint == "reinstall the distribution (its PEP 610 record is damaged)"
    with pytest.raises(InputError):
        editable_install(sp, "tinypkg")


def test_a_sound_direct_url_json_reads_as_before(tmp_path: Path) -> None:
    sp, d = dist(tmp_path, json.dumps({"url": "file:///src/tiny", "dir_info": {"editable": True}}))
    assert direct_url(d) == {"url": "file:///src/tiny", "dir_info": {"editable": True}}
    assert editable_install(sp, "tinypkg") is not None
    assert direct_url(dist(tmp_path / "b")[1]) is None
    sp, d = dist(tmp_path / "c", json.dumps({"url": "file:///src/tiny", "dir_info": {"editable": False}}))
    assert editable_install(sp, "tinypkg") is None
    sp, d = dist(tmp_path / "d", json.dumps({"url": "file:///src/tiny", "dir_info": {}}))  # absent: false (PEP 610)
    assert editable_install(sp, "tinypkg") is None
    assert list(installed_distributions(sp)) == ["tinypkg"] and read_record(d)[0].path == "tinypkg/__init__.py"


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["url", "dir_info", "archive_info", "vcs_info", "editable", "hash", "x"]), inner, max_size=4
        ),
    ),
    max_leaves=12,
)


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(_JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=120)))
def test_fuzz_direct_url_json_never_crashes(tmp_path: Path, data: bytes) -> None:
    """Random JSON values and bytes as direct_url.json: a record, None, or an envforge error."""
    sp, d = dist(tmp_path)
    (d.dist_info / "direct_url.json").write_bytes(data)
    for fn in (lambda: direct_url(d), lambda: editable_install(sp, "tinypkg")):
        try:
            got: Any = fn()
        except EnvforgeError:
            continue
        assert got is None or isinstance(got, object)
    try:
        rec = direct_url(d)
    except EnvforgeError:
        return
    assert rec is not None and isinstance(rec["url"], str)


def test_every_dist_info_left_out_is_named_with_why(tmp_path: Path) -> None:
    """Issue 41: outputs that list distributions dropped these without a word."""
    sp = tmp_path / "sp"
    for name, meta in (
        ("ok-1.0", "Name: ok\nVersion: 1.0\n\n"),
        ("empty-1.0", ""),
        ("noversion-1.0", "Name: x\n\n"),
        ("nameonly-1.0", "Version: 1\n"),
    ):
        (sp / f"{name}.dist-info").mkdir(parents=True)
        (sp / f"{name}.dist-info" / "METADATA").write_text(meta)
    (sp / "missing-1.0.dist-info").mkdir()
    (sp / "fifo-1.0.dist-info").mkdir()
    os.mkfifo(sp / "fifo-1.0.dist-info" / "METADATA")
    (sp / "file-1.0.dist-info").write_text("")  # a file, not a directory
    (sp / "big-1.0.dist-info").mkdir()
    with open(sp / "big-1.0.dist-info" / "METADATA", "wb") as fh:
        fh.truncate((64 << 20) + 1)  # sparse: over the limit a METADATA may have
    assert [(d.name, why) for d, why in unreadable_distributions(sp)] == [
        (
            "big-1.0.dist-info",
            f"METADATA cannot be read: METADATA {sp / 'big-1.0.dist-info' / 'METADATA'} is larger "
            "than 64 MiB: envforge never writes one that large",
        ),
        ("empty-1.0.dist-info", "METADATA names no Name or Version"),
        ("fifo-1.0.dist-info", "METADATA is not a regular file (a FIFO)"),
        ("file-1.0.dist-info", "not a directory"),
        ("missing-1.0.dist-info", "no METADATA"),
        ("nameonly-1.0.dist-info", "METADATA names no Name or Version"),
        ("noversion-1.0.dist-info", "METADATA names no Name or Version"),
    ]
    assert find_distribution(sp, "OK") == Installed("ok", "1.0", sp / "ok-1.0.dist-info")
    assert find_distribution(sp, "missing") is None and find_distribution(sp, "nothere") is None
    with pytest.raises(InputError) as refused:
        refuse_unreadable(sp, what="the SBOM", fix="rebuild")
    assert refused.value.message.startswith(
        f"the SBOM would leave out 7 distributions of {sp} whose METADATA cannot "
        "be read: big-1.0.dist-info (METADATA cannot be read: "
    )
    assert refused.value.message.endswith("noversion-1.0.dist-info (METADATA names no Name or Version)")
    assert (
        "), empty-1.0.dist-info (METADATA names no Name or Version), fifo-1.0.dist-info (METADATA is not a "
        "regular file (a FIFO)), file-1.0.dist-info (not a directory), missing-1.0.dist-info (no METADATA), "
        "nameonly-1.0.dist-info (" in refused.value.message
    )
    assert refused.value.hint == "rebuild"
    good = tmp_path / "good"
    (good / "ok-1.0.dist-info").mkdir(parents=True)
    (good / "ok-1.0.dist-info" / "METADATA").write_text("Name: ok\nVersion: 1.0\n")
    refuse_unreadable(good, what="x", fix="y")  # nothing to refuse
    assert unreadable_distributions(good) == () and unreadable_distributions(tmp_path / "none") == ()
    one = tmp_path / "one"
    (one / "a-1.dist-info").mkdir(parents=True)
    with pytest.raises(InputError) as single:
        refuse_unreadable(one, what="the lock", fix="f")
    assert (
        single.value.message == f"the lock would leave out 1 distribution of {one} whose METADATA cannot be read: "
        "a-1.dist-info (no METADATA)"
    )
