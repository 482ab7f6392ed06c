"""patching/planning.py's verdicts on small trees made here, pinned word for word: requirements met
or not (pre-releases included, every alternative named), the installed version read from the
dist-info name. Real wheels: tests/patching/test_engine.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.patching import load_patchsets, plan
from envforge.patching.planning import installed_version

PATCHSET = """\
[patchset]
id = "demo"
distribution = "Demo_Pkg"
versions = ">=1.0,<2"
reason = "because"
{requires}
[[operation]]
kind = "add-list-element"
file = "demo/m.py"
function = "f"
call = "c"
keyword = "k"
element = "1"
"""


def _tree(tmp_path: Path, requires: str, *dists: str) -> tuple[Path, Path]:
    sp = tmp_path / "sp"
    (sp / "demo").mkdir(parents=True)
    (sp / "demo" / "m.py").write_text("def f():\n    return c(k=[0])\n")
    for d in ("demo_pkg-1.0", *dists):
        (sp / f"{d}.dist-info").mkdir()
    sets = tmp_path / "patchsets"
    sets.mkdir()
    (sets / "demo.toml").write_text(PATCHSET.format(requires=requires))
    return sp, sets


def test_installed_version_is_read_from_the_dist_info_name(tmp_path: Path) -> None:
    for d in ("flashinfer_python-0.6.4", "sgl_kernel-0.3.21+cu130", "not-a-dist-info"):
        (tmp_path / f"{d}.dist-info").mkdir()
    (tmp_path / "torch-2.9.1.dist-info").write_text("")  # a file of that name still names the version
    assert installed_version(tmp_path, "flashinfer-python") == "0.6.4"
    assert installed_version(tmp_path, "SGL_Kernel") == "0.3.21+cu130"  # the version keeps its label
    assert installed_version(tmp_path, "torch") == "2.9.1"
    assert installed_version(tmp_path, "not") == "a-dist-info"  # the first '-' splits name and version
    assert installed_version(tmp_path, "absent") is None


@pytest.mark.parametrize(("requires", "dists", "unmet"), [
    # a pre-release inside the specifier meets it (planning asks with prereleases=True)
    ('[[patchset.requires]]\nany-of = ["other-dist>=2.0"]\n', ("other_dist-2.1rc1",), None),
    ('[[patchset.requires]]\nany-of = ["other-dist>=2.0"]\n', ("other_dist-1.9",),
     "demo refused: requirement `other-dist>=2.0` is unmet (other-dist is 1.9)"),
    ('[[patchset.requires]]\nany-of = ["other-dist>=2.0", "patchset:base"]\nreason = "needs the new API"\n', (),
     "demo refused: requirement `other-dist>=2.0 | patchset:base` is unmet (other-dist is not installed; "
     "patchset base is not applied); needs the new API"),
])
def test_requirements_met_or_refused_naming_every_alternative(tmp_path: Path, requires: str,
                                                             dists: tuple[str, ...], unmet: str | None) -> None:
    sp, sets = _tree(tmp_path, requires, *dists)
    report = plan(sp, load_patchsets(sets, ["demo"]))
    if unmet is None:
        assert report.ok and [(r.patchset, r.state) for r in report.results] == [("demo", "applied")]
        return
    assert report.results == () and [(u.patchset, u.requirement, u.message) for u in report.unmet] == [
        ("demo", unmet.split("`")[1], unmet)]
