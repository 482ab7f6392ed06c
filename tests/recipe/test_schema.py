"""Values of recipe keys (envforge.recipe.schema) measured against the tool that reads them.

``exclude-newer`` (issue 27, fault suite N30): envforge's bound is uv's. Each value below is given to
the installed uv exactly as envforge would pass it (:func:`exclude_newer_cutoff`) and uv's verdict must
be envforge's: a value envforge accepts never ends as "uv pip compile failed" (exit 3).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.recipe.schema import RECIPE_SPEC, UV_LATEST_CUTOFF, exclude_newer_cutoff
from envforge.core.schema import validate
from envforge.uv.run import uv_binary
from envforge.uv.settings import UV_VERSION

BOUNDARY = [
    "9999-12-30T22:00:00Z",
    "9999-12-30T22:00:00.999999999Z",
    "9999-12-31T00:00:00+02:00",
    "9999-12-30T20:00:00-02:00",
    "9999-12-29",
    "0001-01-01",
    "0001-01-01T00:00:00+05:00",
    "9999-12-30T22:00:01Z",
    "9999-12-31T23:59:59Z",
    "9999-12-30T23:00:01+01:00",
    "9999-12-30",
    "9999-12-31",
    "2024-01-01T00:00:00.1234567891Z",
]


def accepted(value: str) -> bool:
    return not validate({"recipe": {"name": "r", "python": "3.12", "exclude-newer": value}}, RECIPE_SPEC, "")


def uv_takes(value: str, tmp_path: Path) -> bool:
    req = tmp_path / "empty.in"
    req.write_text("")
    res = subprocess.run(
        [
            uv_binary(),
            "pip",
            "compile",
            "--no-config",
            "--offline",
            "--no-index",
            "--quiet",
            "--exclude-newer",
            value,
            str(req),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TZ": "Etc/GMT+12"},
    )
    assert res.returncode in (0, 2), res.stderr
    return res.returncode == 0


@pytest.mark.parametrize("value", BOUNDARY)
def test_exclude_newer_is_accepted_exactly_when_uv_reads_it(value: str, tmp_path: Path) -> None:
    assert UV_VERSION == "0.13.9"  # the version the bound was measured on
    assert accepted(value) == (value in BOUNDARY[:7])
    if accepted(value):
        assert uv_takes(exclude_newer_cutoff(value), tmp_path)
    elif value != "9999-12-31":  # envforge cannot even form the end of that day
        assert not uv_takes(value if "T" in value else f"{value}T23:59:59Z", tmp_path)


def test_the_bound_is_jiffs_latest_timestamp() -> None:
    assert UV_LATEST_CUTOFF.isoformat() == "9999-12-30T22:00:00.999999+00:00"
    assert exclude_newer_cutoff("2024-01-01") == "2024-01-02T00:00:00Z"
    assert exclude_newer_cutoff("9999-12-29") == "9999-12-30T00:00:00Z"
    assert exclude_newer_cutoff("2024-01-01T00:00:00+05:00") == "2024-01-01T00:00:00+05:00"


def test_a_cutoff_later_than_uv_reads_is_exit_2_at_recipe_load(tmp_path: Path) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\nexclude-newer = "9999-12-31T23:59:59Z"\n'
    )
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "lock", "r"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2, res.stderr
    assert (
        f"{tmp_path}/recipes/r.toml:4: recipe.exclude-newer: '9999-12-31T23:59:59Z' is later than uv can read "
        "(its latest point in time is 9999-12-30T22:00:00Z, for a date 9999-12-29); write the cutoff you mean, "
        "e.g. today's date, or remove the key"
    ) in res.stderr
    assert not (tmp_path / "lockfiles").exists()
