"""A module with a PEP 263 coding cookie is patched in its declared encoding (field case B30).

A real wheel (built here) whose ``oldlib/legacy.py`` declares ``# -*- coding: latin-1 -*-`` and holds
latin-1 bytes, installed with the real uv; Python reads it in latin-1 (tokenize.detect_encoding is the
reference), so does the patcher, and it writes the file back in latin-1, byte-exact outside the edit."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tokenize
from pathlib import Path

import pytest
import uv

from envforge import patching
from envforge.patching.applied import applied_diff
from envforge.patching.source import UnencodableEdit, decode_source, readable_source, source_encoding
from tests.support.verify_envs import BuiltEnv, make_env, make_wheel
from tests.support.pythons import python_for

PY312 = str(python_for("3.12"))
pytestmark = pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")

OLD_DEF = 'def greet(name):\n    return GREETING + ", " + name\n'
NEW_DEF = 'def greet(name):\n    return GREETING + ", " + name + " ¡olé!"\n'
LEGACY = (
    "# -*- coding: latin-1 -*-\n"
    '"""Legacy module: café, naïve, © 2009."""\n'
    "\n"
    'GREETING = "Grüß Gott"\n'
    "\n"
    "\n"
    f"{OLD_DEF}"
    "\n"
    "\n"
    "def farewell():\n"
    '    return "Adiós"\n'
).encode("latin-1")
FILE = "oldlib/legacy.py"


def patchset(pid: str, code: str) -> str:
    digest = "sha256:" + hashlib.sha256(OLD_DEF.encode("utf-8")).hexdigest()
    return (
        f'[patchset]\nid = "{pid}"\ndistribution = "oldlib"\nversions = "==1.0"\nreason = "B30"\n\n'
        f'[[operation]]\nkind = "replace-definition"\nfile = "{FILE}"\ndefinition = "greet"\n'
        f"original-digest = \"{digest}\"\ncode = '''{code}'''\n"
    )


def latin1_env(tmp_path: Path) -> BuiltEnv:
    root = tmp_path / "proj"
    (root / "patchsets").mkdir(parents=True)
    (root / "recipes").mkdir()
    (root / "patchsets" / "greet-ole.toml").write_text(patchset("greet-ole", NEW_DEF), encoding="utf-8")
    euro = NEW_DEF.replace("¡olé!", "5 €")
    (root / "patchsets" / "greet-euro.toml").write_text(patchset("greet-euro", euro), encoding="utf-8")
    wheel = make_wheel(tmp_path / "wheels", "oldlib", "1.0", files={"oldlib/__init__.py": b"", FILE: LEGACY})
    return make_env(root, [wheel], uv=uv.find_uv_bin(), python=PY312, name="oldlib-default", patchsets=(), profile=None)


def run_greet(env: BuiltEnv) -> str:
    return (
        subprocess.run(
            [str(env.python), "-c", "import oldlib.legacy as m; print(m.greet('Ana'))"],
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        .stdout.decode("utf-8")
        .strip()
    )


def test_the_encoding_is_the_one_python_reads() -> None:
    assert source_encoding(LEGACY) == tokenize.detect_encoding(iter(LEGACY.splitlines(True)).__next__)[0]
    assert source_encoding(LEGACY) == "iso-8859-1"
    assert decode_source(LEGACY) == LEGACY.decode("latin-1")
    assert source_encoding(b"\xef\xbb\xbfx = 1\n") == "utf-8-sig" and decode_source(b"\xef\xbb\xbfx = 1\n") == "x = 1\n"
    assert source_encoding(b"x = 1\n") == "utf-8"
    with pytest.raises(SyntaxError, match="unknown encoding: klingon"):
        source_encoding(b"# coding: klingon\nx = 1\n")
    assert readable_source(b"# coding: klingon\nx = '\xff'\n") == "# coding: klingon\nx = '\ufffd'\n"
    assert str(UnencodableEdit("latin-1", "€")) == (
        "the edit holds '€' (U+20AC), which the file's declared encoding latin-1 (PEP 263 coding cookie) cannot hold"
    )


def test_a_latin1_module_is_patched_and_written_back_in_latin1(tmp_path: Path) -> None:
    env = latin1_env(tmp_path)
    sp = env.site_packages
    assert run_greet(env) == "Grüß Gott, Ana"
    sets = patching.load_patchsets(tmp_path / "proj" / "patchsets", ["greet-ole"])

    dry = patching.apply(sp, sets, dry_run=True)
    assert [(r.state, r.message) for r in dry.results] == [("applied", "replaced greet")]
    assert [line for line in dry.diff().splitlines() if line[:1] in "+-"] == [
        "--- a/oldlib/legacy.py",
        "+++ b/oldlib/legacy.py",
        '-    return GREETING + ", " + name',
        '+    return GREETING + ", " + name + " ¡olé!"',
    ]

    report = patching.apply(sp, sets)
    assert report.ok and report.written
    after = (sp / FILE).read_bytes()
    assert after == LEGACY.replace(OLD_DEF.encode("latin-1"), NEW_DEF.encode("latin-1"))
    assert b"\xa1ol\xe9!" in after and "¡".encode() not in after  # latin-1 bytes, not UTF-8
    assert run_greet(env) == "Grüß Gott, Ana ¡olé!"
    again = patching.apply(sp, sets)
    assert [r.state for r in again.results] == ["already-applied"]

    (shown,) = applied_diff(sp)
    assert '+    return GREETING + ", " + name + " ¡olé!"' in shown.diff.splitlines() and shown.as_recorded

    reverted = patching.revert(sp, ["greet-ole"])
    assert reverted.ok and (sp / FILE).read_bytes() == LEGACY


def test_a_replacement_the_declared_encoding_cannot_hold_is_refused_naming_the_character(tmp_path: Path) -> None:
    env = latin1_env(tmp_path)
    sets = patching.load_patchsets(tmp_path / "proj" / "patchsets", ["greet-euro"])
    report = patching.apply(env.site_packages, sets)
    assert not report.ok and not report.written
    assert report.errors == (
        (
            "greet-euro: oldlib/legacy.py: the patched file cannot be written back: the edit holds '€' (U+20AC), which "
            "the file's declared encoding latin-1 (PEP 263 coding cookie) cannot hold; nothing written; installed "
            "oldlib 1.0. Next step: in greet-euro.toml, write '€' as the escape \\u20ac (in a string literal) in the "
            "operation's code, so the file stays latin-1"
        ),
    )
    assert (env.site_packages / FILE).read_bytes() == LEGACY
