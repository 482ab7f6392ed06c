"""verify proves what runs (check ``patch-effect``): a patched file the interpreter does not import
(B43, real charset-normalizer 3.4.2 wheel in a real uv environment) and a patchset applied by hand
that the lock does not list."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from envforge import patching
from envforge.core.kinds import REGISTRY
from envforge.env.layout import Environment
from envforge.recipe.project import Project
from envforge.verify import Finding, VerifyOptions, verify
from envforge.workflows.up import repairable
from tests.support.charset_env import MD, PATCHSET_ID, charset_env, extensions, moved_aside
from tests.support.verify_envs import BuiltEnv

FIX = (
    "patch the code the interpreter runs: install a build of charset-normalizer without that module (its "
    "pure-Python py3-none-any wheel, if it publishes one) and re-lock, or remove the patchset from the recipe; "
    "or narrow `versions` in patchsets/cn-threshold.toml to exclude this release"
)


def run(env: BuiltEnv):  # type: ignore[no-untyped-def]
    return verify(Environment(env.path), Project(env.path.parent.parent), VerifyOptions(base_env=dict(os.environ)))


def patched_by_hand(env: BuiltEnv, tmp_path: Path) -> None:
    """Apply the patchset while the compiled modules are moved aside (so it applies), then put them back."""
    sets = patching.load_patchsets(env.path.parent.parent / "patchsets", [PATCHSET_ID])
    with moved_aside(extensions(env), tmp_path / "aside"):
        assert patching.apply(env.site_packages, sets).written


def test_a_patched_file_shadowed_by_a_compiled_module_is_a_finding(tmp_path: Path) -> None:
    env = charset_env(tmp_path / "proj")
    patched_by_hand(env, tmp_path)
    ext = next(p for p in extensions(env) if p.name.startswith("md."))
    report = run(env)
    status = {c.name: c.status for c in report.checks}
    assert status["patch-effect"] == "findings" and status["patch-states"] == "ok"
    (finding,) = report.findings
    suffixes = subprocess.run(
        [str(env.python), "-c", ("import importlib.machinery as m; print(', '.join(m.EXTENSION_SUFFIXES))")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert finding == Finding(
        "shadowed-patch",
        f"{PATCHSET_ID}: {MD}",
        "`import charset_normalizer.md` loads charset_normalizer/md.py, the patched file",
        f"the interpreter imports charset_normalizer.md from charset_normalizer/{ext.name}, a "
        f"compiled extension module (the import system tries the extension suffixes {suffixes} before .py): the "
        f"patch is on disk but never runs",
        FIX,
    )
    assert report.exit_code == 1
    assert not repairable(finding)  # a rebuild from the same lock installs the same wheel: `up` does not loop


def test_without_the_compiled_module_the_patch_runs_and_verify_is_clean(tmp_path: Path) -> None:
    env = charset_env(tmp_path / "proj")
    so = extensions(env)
    patched_by_hand(env, tmp_path)
    for p in so:
        p.unlink()
    report = run(env)
    assert [f.kind for f in report.findings] == ["missing-file", "missing-file"]  # RECORD still lists them
    assert {c.name: c.status for c in report.checks}["patch-effect"] == "ok"


def test_a_patchset_applied_by_hand_that_the_lock_does_not_list(tmp_path: Path) -> None:
    env = charset_env(tmp_path / "proj", listed=False)
    clean = run(env)
    assert clean.findings == () and {c.name: c.status for c in clean.checks}["patch-effect"] == "ok"
    with moved_aside(extensions(env), tmp_path / "aside"):
        cli = subprocess.run(
            [sys.executable, "-m", "envforge", "apply-patches", "cn-default", PATCHSET_ID],
            cwd=tmp_path / "proj",
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert cli.returncode == 0, cli.stderr
    report = run(env)  # the compiled modules back: shadowed too (the other test pins that finding)
    ps = patching.load_patchsets(tmp_path / "proj" / "patchsets", [PATCHSET_ID])[0]
    assert [f.kind for f in report.findings] == ["shadowed-patch", "unlisted-patchset"]
    assert report.findings[1:] == (
        Finding(
            "unlisted-patchset",
            PATCHSET_ID,
            "only the patchsets the lock lists (none)",
            f"{PATCHSET_ID} (charset-normalizer 3.4.2, {ps.digest}) applied by hand: {MD} patched outside the lock",
            f"revert it (`envforge apply-patches --site-packages {env.site_packages} --revert {PATCHSET_ID}`), or add "
            f"it to the recipe's `patchsets`, re-lock (`envforge lock cn --variant default`) and rebuild "
            f"(`envforge build cn --variant default`)",
        ),
    )
    assert not repairable(report.findings[1])  # `up` reports it and leaves the choice to a person
    revert = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "apply-patches",
            "--site-packages",
            str(env.site_packages),
            "--revert",
            PATCHSET_ID,
        ],
        cwd=tmp_path / "proj",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert revert.returncode == 0, revert.stderr
    assert run(env).findings == ()


def test_the_kinds_are_registered_for_the_patch_effect_check() -> None:
    assert (REGISTRY["shadowed-patch"].checks, REGISTRY["shadowed-patch"].rebuild_repairs) == (("patch-effect",), False)
    assert (REGISTRY["unlisted-patchset"].checks, REGISTRY["unlisted-patchset"].rebuild_repairs) == (
        ("patch-effect",),
        False,
    )


def test_a_pythonpath_checkout_shadowing_the_patch_names_pythonpath_in_the_fix(tmp_path: Path) -> None:
    """B53: the caller's PYTHONPATH points at an unpatched copy of the package; the finding's fix is
    about that entry, not the lock or the patchset."""
    import shutil

    env = charset_env(tmp_path / "proj")
    so = extensions(env)
    patched_by_hand(env, tmp_path)
    for p in so:
        p.unlink()
    checkout = tmp_path / "checkout"
    shutil.copytree(env.site_packages / "charset_normalizer", checkout / "charset_normalizer")
    report = verify(
        Environment(env.path),
        Project(env.path.parent.parent),
        VerifyOptions(base_env={**os.environ, "PYTHONPATH": str(checkout)}),
    )
    shadowed = [f for f in report.findings if f.kind == "shadowed-patch"]
    assert [(f.subject, f.fix) for f in shadowed] == [
        (
            f"{PATCHSET_ID}: {MD}",
            f"the caller's PYTHONPATH entry {checkout} is ahead of the environment's site-packages: unset PYTHONPATH or "
            "remove that entry (`envforge run` and `envforge bench` drop it unless --keep-pythonpath); the lock and the "
            "patchset are fine",
        )
    ]
    assert shadowed[0].actual.startswith(f"the interpreter imports package charset_normalizer from {checkout}")
