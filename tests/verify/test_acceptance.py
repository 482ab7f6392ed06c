"""Accepted findings (``[[verify.accept]]``) and levels with nothing to check.

The real case: flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5 both install a top-level
``build_backend.py``. The whole kimi cu128 stack (~4.5 GB of wheels) is too heavy for CI, so the
slow test here builds a reduced real stack holding just those two real wheels from PyPI, installed
by real uv; the full stack was built once by hand (docs/verify.md, "Accepted findings").
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest
import uv
from tests.conftest import CACHE, cached_wheel
from tests.support.verify_envs import make_env
from tests.support.pythons import python_for

from envforge.core.kinds import LEVELS, REGISTRY, level_of
from envforge.env.layout import Environment
from envforge.recipe.project import Project
from envforge.recipe.load import load_recipe
from envforge.recipe.model import RecipeError
from envforge.verify import Finding, VerifyOptions, verify
from envforge.verify.acceptance import Acceptance, acceptances_from, apply_acceptances
from envforge.verify.findings import AcceptedFinding
from envforge.verify.nccllibrary import nccl_library_findings
from envforge.verify.report import as_json, as_junit, as_text

PY312 = str(python_for("3.12"))
ROOT = Path(__file__).resolve().parents[2]
CONFLICT = Finding(
    "file-conflict",
    "build_backend.py",
    "one distribution owns each installed file",
    "claimed by flashinfer-python 0.6.3, torch-c-dlpack-ext 0.1.5; the installed bytes are torch-c-dlpack-ext's",
    "report it upstream",
)
ACCEPT = Acceptance("file-conflict", "build_backend.py", "upstream packaging bug", dt.date(2027, 5, 31), 0)


def test_an_accepted_finding_is_kept_apart_and_does_not_fail() -> None:
    failing, accepted = apply_acceptances([CONFLICT], [ACCEPT], today=dt.date(2027, 5, 31), levels=("static",))
    assert failing == []
    assert [a.as_dict() for a in accepted] == [
        {
            "kind": "file-conflict",
            "level": "static",
            "subject": "build_backend.py",
            "expected": "one distribution owns each installed file",
            "actual": "claimed by flashinfer-python 0.6.3, torch-c-dlpack-ext 0.1.5; the installed bytes are "
            "torch-c-dlpack-ext's",
            "fix": "report it upstream",
            "reason": "upstream packaging bug",
            "expires": "2027-05-31",
        }
    ]


def test_an_expired_acceptance_accepts_nothing_and_is_a_finding() -> None:
    failing, accepted = apply_acceptances([CONFLICT], [ACCEPT], today=dt.date(2027, 6, 1), levels=("static",))
    assert accepted == []
    assert failing == [
        CONFLICT,
        Finding(
            "acceptance-expired",
            "verify.accept[0]: file-conflict build_backend.py",
            "an acceptance in force (expires 2027-05-31)",
            "expired on 2027-05-31",
            "review the finding again: fix it, or renew the entry with a new expires date and reason",
        ),
    ]


def test_an_unmatched_acceptance_is_a_finding_only_when_its_level_ran() -> None:
    gpu = Acceptance("capability", "GPU 0", "an H200 box for now", dt.date(2027, 1, 1), 1)
    failing, accepted = apply_acceptances([], [ACCEPT, gpu], today=dt.date(2026, 12, 1), levels=("static",))
    assert (failing, accepted) == (
        [
            Finding(
                "acceptance-unmatched",
                "verify.accept[0]: file-conflict build_backend.py",
                "a file-conflict finding with subject 'build_backend.py'",
                "no such finding",
                "the accepted problem is gone (or the subject is misspelt): remove the entry from the recipe",
            )
        ],
        [],
    )


SYSTEM_NCCL = Acceptance(
    "nccl-library", "libnccl", "the cluster's tuned system NCCL, on purpose", dt.date(2027, 1, 1), 0
)


def test_an_acceptance_of_a_gpu_kind_is_not_held_to_a_static_run() -> None:
    """The bug: nccl-library is produced by the gpu level but was registered as static, so a recipe that
    accepts a deliberate system NCCL made every plain (static) `envforge verify` and `envforge up` exit 1."""
    assert apply_acceptances([], [SYSTEM_NCCL], today=dt.date(2026, 12, 1), levels=("static",)) == ([], [])


def test_an_acceptance_of_nccl_library_accepts_the_gpu_levels_finding() -> None:
    found = nccl_library_findings(
        {
            "loaded": ["/usr/lib/libnccl.so.2"],
            "candidates": ["/usr/lib/libnccl.so.2", "/sp/nvidia/nccl/lib/libnccl.so.2"],
        },
        Path("/sp"),
    )
    assert [(f.kind, f.level, f.subject) for f in found] == [("nccl-library", "gpu", "libnccl")]
    failing, accepted = apply_acceptances(found, [SYSTEM_NCCL], today=dt.date(2026, 12, 1), levels=("static", "gpu"))
    assert (failing, [a.finding for a in accepted]) == ([], found)
    failing, accepted = apply_acceptances([], [SYSTEM_NCCL], today=dt.date(2026, 12, 1), levels=("static", "gpu"))
    assert (failing, accepted) == (
        [
            Finding(
                "acceptance-unmatched",
                "verify.accept[0]: nccl-library libnccl",
                "a nccl-library finding with subject 'libnccl'",
                "no such finding",
                "the accepted problem is gone (or the subject is misspelt): remove the entry from the recipe",
                "gpu",
            )
        ],
        [],
    )


@pytest.mark.parametrize("kind", [*REGISTRY, "eagle3-d2t", "target-hidden-size"])
def test_an_acceptance_is_held_to_a_run_exactly_when_its_kinds_level_ran(kind: str) -> None:
    """Every registered kind (and drafter kinds): at its own level an entry accepts its finding, and is
    acceptance-unmatched without one; a run without that level does not consult it."""
    level = level_of(kind)
    entry = Acceptance(kind, "subject", "reviewed", dt.date(2027, 1, 1), 3)
    found = Finding(kind, "subject", "expected", "actual", "fix", level)
    today = dt.date(2026, 12, 1)
    failing, accepted = apply_acceptances([found], [entry], today=today, levels=(level,))
    assert (failing, accepted) == ([], [AcceptedFinding(found, "reviewed", "2027-01-01")])
    failing, _ = apply_acceptances([], [entry], today=today, levels=(level,))
    assert [(f.kind, f.level, f.subject) for f in failing] == [
        ("acceptance-unmatched", level, f"verify.accept[3]: {kind} subject")
    ]
    others = tuple(lv for lv in LEVELS if lv != level)
    assert apply_acceptances([], [entry], today=today, levels=others) == ([], [])


PINNED = Acceptance(
    "file-conflict",
    "build_backend.py",
    "upstream packaging bug",
    dt.date(2027, 5, 31),
    0,
    between=("torch-c-dlpack-ext 0.1.5", "flashinfer-python 0.6.3"),
)


def _conflict(names: str, winner: str = "torch-c-dlpack-ext") -> Finding:
    return Finding(
        "file-conflict",
        "build_backend.py",
        "one distribution owns each installed file",
        f"claimed by {names}; the installed bytes are {winner}'s",
        "report it upstream",
    )


@pytest.mark.parametrize("winner", ["torch-c-dlpack-ext", "flashinfer-python"])
def test_a_pinned_acceptance_accepts_its_claimants_whichever_copy_won(winner: str) -> None:
    f = _conflict("flashinfer-python 0.6.3, torch-c-dlpack-ext 0.1.5", winner)
    failing, accepted = apply_acceptances([f], [PINNED], today=dt.date(2026, 12, 1), levels=("static",))
    assert (failing, [a.finding for a in accepted]) == ([], [f])


@pytest.mark.parametrize(
    ("names", "now"),
    [
        ("flashinfer-python 0.6.4, torch-c-dlpack-ext 0.1.5", "flashinfer-python 0.6.4 and torch-c-dlpack-ext 0.1.5"),
        ("other-dist 1.0, torch-c-dlpack-ext 0.1.5", "other-dist 1.0 and torch-c-dlpack-ext 0.1.5"),
        (
            "flashinfer-python 0.6.3, other-dist 1.0, torch-c-dlpack-ext 0.1.5",
            "flashinfer-python 0.6.3, other-dist 1.0 and torch-c-dlpack-ext 0.1.5",
        ),
    ],
)
def test_a_pinned_acceptance_does_not_accept_a_new_conflict_on_the_same_path(names: str, now: str) -> None:
    f = _conflict(names)
    failing, accepted = apply_acceptances([f], [PINNED], today=dt.date(2026, 12, 1), levels=("static",))
    assert accepted == []
    assert failing == [
        f,
        Finding(
            "acceptance-unmatched",
            "verify.accept[0]: file-conflict build_backend.py",
            "the file-conflict finding with subject 'build_backend.py' this entry pins",
            f"accepted only between flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5; now between {now}",
            "this is not the finding that was reviewed: review it, then fix it or update the entry",
        ),
    ]


def test_an_acceptance_pinned_by_actual_accepts_only_that_text() -> None:
    pinned = Acceptance("capability", "GPU 0", "an H200 box for now", dt.date(2027, 1, 1), 3, actual="9.0")
    same = Finding("capability", "GPU 0", "12.0", "9.0", "use the target's GPU", level="gpu")
    other = Finding("capability", "GPU 0", "12.0", "8.0", "use the target's GPU", level="gpu")
    assert apply_acceptances([same], [pinned], today=dt.date(2026, 12, 1), levels=("gpu",))[0] == []
    failing, accepted = apply_acceptances([other], [pinned], today=dt.date(2026, 12, 1), levels=("gpu",))
    assert accepted == []
    assert [(f.kind, f.actual) for f in failing] == [
        ("capability", "8.0"),
        ("acceptance-unmatched", "accepted only with actual '9.0'; now '8.0'"),
    ]


def test_an_unpinned_acceptance_still_matches_by_kind_and_subject_only() -> None:
    f = _conflict("other-dist 1.0, torch-c-dlpack-ext 0.1.5")
    failing, accepted = apply_acceptances([f], [ACCEPT], today=dt.date(2026, 12, 1), levels=("static",))
    assert (failing, [a.finding for a in accepted]) == ([], [f])


def _recipe(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "r.toml"
    path.write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[verify]\nlevels = ["static"]\n\n[[verify.accept]]\n{entry}'
    )
    return path


@pytest.mark.parametrize(
    ("entry", "problems"),
    [
        (
            'kind = "file-conflit"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\n',
            [
                "r.toml:9: verify.accept[0].kind: 'file-conflit' is not a verify finding kind; did you mean "
                "'file-conflict'? (docs/verify.md lists them)"
            ],
        ),
        (
            'kind = "file-conflict"\nsubject = "x"\nreason = " "\nexpires = "2027-01-01"\n',
            [
                "r.toml:11: verify.accept[0].reason: give the reason reviewers read (a non-empty string)",
                "r.toml:12: verify.accept[0].expires: expected a date like 2027-03-31 (a TOML date, unquoted), got a "
                'string ("2027-01-01")',
            ],
        ),
        (
            'kind = "file-conflict"\nsubject = "x"\nexpires = 2027-01-01T10:00:00\n',
            [
                "r.toml:11: verify.accept[0].expires: expected a date like 2027-03-31 (no time part)",
                "r.toml:8: verify.accept[0].reason: missing required key",
            ],
        ),
        (
            'kind = "file-conflict"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\nbetween = ["a 1", "b"]\n',
            [
                "r.toml:13: verify.accept[0].between[1]: 'b' is not '<distribution> <version>' as verify prints it "
                '(e.g. "flashinfer-python 0.6.3")'
            ],
        ),
        (
            'kind = "file-conflict"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\nbetween = ["a 1", "a 1"]\n',
            [
                "r.toml:13: verify.accept[0].between: list the two (or more) different distributions the finding names, "
                'e.g. ["flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"]'
            ],
        ),
        (
            'kind = "tampered"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\nbetween = ["a 1", "b 2"]\n',
            [
                'r.toml:13: verify.accept[0].between: applies only to kind "file-conflict" (this entry is tampered); '
                "pin other kinds with actual"
            ],
        ),
        (
            'kind = "tampered"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\nactual = " "\n',
            [
                "r.toml:13: verify.accept[0].actual: give the finding's actual text exactly as verify prints it, or leave "
                "the key out"
            ],
        ),
    ],
)
def test_acceptances_are_validated_at_recipe_load(tmp_path: Path, entry: str, problems: list[str]) -> None:
    path = _recipe(tmp_path, entry)
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    lines = exc.value.message.splitlines()
    assert [line.strip().replace(str(path), "r.toml") for line in lines[1:]] == problems


def test_the_shipped_kimi_recipe_accepts_the_real_conflict() -> None:
    entries = load_recipe(ROOT / "recipes" / "kimi-k25-sm120.toml").data["verify"]["accept"]
    assert [(e["kind"], e["subject"], e["expires"], e["between"], e["variants"]) for e in entries] == [
        (
            "file-conflict",
            "build_backend.py",
            dt.date(2027, 5, 31),
            ["flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"],
            ["cu128", "cu130"],
        ),
        (
            "file-conflict",
            "build_backend.py",
            dt.date(2027, 5, 31),
            ["flashinfer-python 0.7.2", "torch-c-dlpack-ext 0.1.5"],
            ["cu130-current", "cu130-aarch64"],
        ),
    ]
    assert entries[0]["reason"].startswith(
        "upstream packaging bug, not ours: flashinfer-python 0.6.3 and "
        "torch-c-dlpack-ext 0.1.5 both install a top-level build_backend.py"
    )
    assert entries[1]["reason"].startswith(
        "upstream packaging bug, not ours: flashinfer-python 0.7.2 (read on the "
        "released wheel) and torch-c-dlpack-ext 0.1.5 both install"
    )


def test_an_entry_with_variants_holds_only_for_those_variants() -> None:
    """The sglang 0.5.23 variants lock flashinfer-python 0.7.2: one pinned entry per flashinfer version,
    each for its variants, so neither is an unmatched entry in the other's environments (B41 follow-up)."""
    recipe = load_recipe(ROOT / "recipes" / "kimi-k25-sm120.toml").data
    by_variant = {
        v: [(a.index, a.between) for a in acceptances_from(recipe, v)]
        for v in ("cu128", "cu130", "cu130-current", "cu130-aarch64")
    }
    assert by_variant == {
        "cu128": [(0, ("flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"))],
        "cu130": [(0, ("flashinfer-python 0.6.3", "torch-c-dlpack-ext 0.1.5"))],
        "cu130-current": [(1, ("flashinfer-python 0.7.2", "torch-c-dlpack-ext 0.1.5"))],
        "cu130-aarch64": [(1, ("flashinfer-python 0.7.2", "torch-c-dlpack-ext 0.1.5"))],
    }
    assert acceptances_from(recipe, None) == ()
    conflict = Finding(
        "file-conflict",
        "build_backend.py",
        "one owner",
        "claimed by flashinfer-python 0.7.2, torch-c-dlpack-ext 0.1.5; installed bytes: x",
        "fix",
    )
    failing, accepted = apply_acceptances(
        [conflict], acceptances_from(recipe, "cu130-current"), today=dt.date(2027, 1, 1), levels=("static",)
    )
    assert (failing, [a.finding for a in accepted]) == ([], [conflict])


def _cp312_wheel(name: str, version: str) -> Path:
    """A real manylinux cp312 wheel from PyPI in the test cache (the test venv may be another Python)."""
    wheels = CACHE / "wheels-cp312"
    stem = name.replace("-", "_")
    found = list(wheels.glob(f"{stem}-{version}-*.whl"))
    if not found:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-version",
                "3.12",
                "--platform",
                "manylinux_2_28_x86_64",
                "-d",
                str(wheels),
                f"{name}=={version}",
            ],
            capture_output=True,
            text=True,
        )
        found = list(wheels.glob(f"{stem}-{version}-*.whl"))
        if proc.returncode or not found:
            pytest.skip(f"cannot download {name}=={version}: {proc.stderr[-300:]}")
    return found[0]


@pytest.mark.slow
@pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")
def test_the_real_build_backend_conflict_is_accepted_then_fails_when_expired(tmp_path: Path) -> None:
    wheels = [cached_wheel("flashinfer-python", "0.6.3"), _cp312_wheel("torch-c-dlpack-ext", "0.1.5")]
    env = make_env(tmp_path / "proj", wheels, uv=uv.find_uv_bin(), python=PY312, patchsets=(), profile=None)
    root = tmp_path / "proj"

    def run(today: dt.date, levels: tuple[str, ...] | None = ("static",)):  # type: ignore[no-untyped-def]
        return verify(
            Environment(env.path), Project(root), VerifyOptions(levels=levels, today=today, base_env=dict(os.environ))
        )

    report = run(dt.date(2026, 12, 1))
    assert [(f.kind, f.subject) for f in report.findings] == [("file-conflict", "build_backend.py")]
    assert report.findings[0].actual.startswith("claimed by flashinfer-python 0.6.3, torch-c-dlpack-ext 0.1.5;")
    recipe = root / "recipes" / "quickstart.toml"
    block = (
        (ROOT / "recipes" / "kimi-k25-sm120.toml")
        .read_text()
        .split('[verify]\nlevels = ["static", "gpu"]\n', 1)[1]
        .split("\n# The same packaging bug", 1)[0]
    )
    # the kimi entry of flashinfer 0.6.3, for every variant of this one-variant recipe
    recipe.write_text(
        recipe.read_text() + "".join(ln + "\n" for ln in block.splitlines() if not ln.startswith("variants = "))
    )
    report = run(dt.date(2026, 12, 1))
    assert (report.exit_code, report.findings) == (0, ())
    assert [(a.finding.kind, a.finding.subject, a.expires) for a in report.accepted] == [
        ("file-conflict", "build_backend.py", "2027-05-31")
    ]
    data = as_json(report)
    assert (data["clean"], data["findings"], [a["reason"][:30] for a in data["accepted"]]) == (
        True,
        [],
        ["upstream packaging bug, not ou"],
    )
    assert as_text(report)[0].startswith("accepted file-conflict: build_backend.py (until 2027-05-31: upstream ")
    assert as_text(report)[-1].startswith("verify static: clean, 1 accepted (")
    import xml.etree.ElementTree as ET

    case = ET.fromstring(as_junit(report)).find("testcase[@name='accepted file-conflict: build_backend.py']")
    assert case is not None and case.get("classname") == "verify.static"
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith(
        "accepted until 2027-05-31: upstream packaging bug, not ours"
    )
    recipe.write_text(recipe.read_text().replace('"flashinfer-python 0.6.3"', '"flashinfer-python 0.6.2"'))
    moved = run(dt.date(2026, 12, 1))
    assert (moved.exit_code, moved.accepted) == (1, ())
    assert [(f.kind, f.actual) for f in moved.findings] == [
        ("file-conflict", moved.findings[0].actual),
        (
            "acceptance-unmatched",
            "accepted only between flashinfer-python 0.6.2 and torch-c-dlpack-ext 0.1.5; now "
            "between flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5",
        ),
    ]
    assert (
        "    actual:   accepted only between flashinfer-python 0.6.2 and torch-c-dlpack-ext 0.1.5; now between "
        "flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5"
    ) in as_text(moved)
    recipe.write_text(recipe.read_text().replace('"flashinfer-python 0.6.2"', '"flashinfer-python 0.6.3"'))
    expired = run(dt.date(2027, 6, 1))
    assert [(f.kind, f.subject) for f in expired.findings] == [
        ("file-conflict", "build_backend.py"),
        ("acceptance-expired", "verify.accept[0]: file-conflict build_backend.py"),
    ]


@pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")
def test_a_level_asked_for_with_nothing_to_check_is_a_finding(tmp_path: Path) -> None:
    env = make_env(
        tmp_path / "proj",
        [cached_wheel("flashinfer-python", "0.6.4")],
        uv=uv.find_uv_bin(),
        python=PY312,
        patchsets=(),
        profile=None,
    )
    report = verify(Environment(env.path), Project(tmp_path / "proj"), VerifyOptions(levels=("drafter",)))
    assert report.exit_code == 1
    assert [f.as_dict() for f in report.findings] == [
        {
            "kind": "nothing-to-check",
            "level": "drafter",
            "subject": "--level drafter",
            "expected": "at least one drafter check that runs",
            "actual": "the recipe has no [verify.drafter] table",
            "fix": "give the drafter level something to check (for drafter: a [verify.drafter] table with repo and "
            "revision in the recipe), or do not ask for it",
        }
    ]
    assert as_text(report)[-1].startswith("verify drafter: 1 finding (0 checks ran, 1 skipped)")


def test_two_entries_accepting_one_finding_are_refused(tmp_path: Path) -> None:
    entry = 'kind = "file-conflict"\nsubject = "x"\nreason = "r"\nexpires = 2027-01-01\n'
    path = _recipe(tmp_path, entry + "\n[[verify.accept]]\n" + entry)
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    assert exc.value.message.splitlines()[1].strip() == (
        f"{path}:8: verify.accept[1]: accepts file-conflict 'x' again (already verify.accept[0]); keep one entry"
    )


@pytest.mark.skipif(not Path(PY312).exists(), reason="needs the pyenv Python 3.12.1")
@pytest.mark.parametrize("expires", ['"2027-03-31"', "2027-03-31T00:00:00Z", "00:00:00"])
def test_an_invalid_recipe_is_an_error_not_a_clean_verify(tmp_path: Path, expires: str) -> None:
    """verify read the recipe for its levels and [[verify.accept]] and, when the recipe was invalid
    (here an expiry in a weird format), silently used none: `envforge verify` said "clean" without
    the drafter level the recipe asks for and without the entry's unmatched finding."""
    env = make_env(
        tmp_path / "proj",
        [cached_wheel("flashinfer-python", "0.6.4")],
        uv=uv.find_uv_bin(),
        python=PY312,
        patchsets=(),
        profile=None,
    )
    recipe = tmp_path / "proj" / "recipes" / "quickstart.toml"
    recipe.write_text(
        recipe.read_text() + '\n[verify]\nlevels = ["static", "drafter"]\n\n[[verify.accept]]\n'
        f'kind = "file-conflict"\nsubject = "build_backend.py"\nreason = "r"\nexpires = {expires}\n'
    )
    with pytest.raises(RecipeError) as exc:
        verify(Environment(env.path), Project(tmp_path / "proj"), VerifyOptions())
    assert ":44: verify.accept[0].expires: expected a date like 2027-03-31 (" in exc.value.message
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "verify", str(env.path)],
        cwd=tmp_path / "proj",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stderr.startswith(f"error: recipe {recipe} is invalid (1 problem):")
    assert "clean" not in res.stdout and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("levels", "problem"),
    [
        (
            '["static", "GPU"]',
            "verify.levels[1]: 'GPU' is not a verify level (one of static, gpu, drafter, smoke); did you mean 'gpu'?",
        ),
        (
            '["statc"]',
            "verify.levels[0]: 'statc' is not a verify level (one of static, gpu, drafter, smoke); "
            "did you mean 'static'?",
        ),
        ('["perf"]', "verify.levels[0]: 'perf' is not a verify level (one of static, gpu, drafter, smoke)"),
    ],
)
def test_a_verify_level_no_command_runs_is_refused_never_dropped(tmp_path: Path, levels: str, problem: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(f'[recipe]\nname = "r"\npython = "3.12"\n\n[verify]\nlevels = {levels}\n')
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    assert [line.strip().replace(str(path), "r.toml") for line in exc.value.message.splitlines()[1:]] == [
        f"r.toml:6: {problem}"
    ]
    path.write_text(
        '[recipe]\nname = "r"\npython = "3.12"\n\n[verify]\nlevels = ["static", "gpu", "drafter", "smoke"]\n'
    )
    load_recipe(path)
