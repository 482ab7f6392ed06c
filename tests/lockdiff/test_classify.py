"""envforge.lockdiff.classify on the locks real tools write for two small real projects: every lock
is read, and a diff between two of them lists every entry and every change exactly once.

The projects (a ``cpu`` and a ``gpu`` extra declared in ``[tool.uv] conflicts`` pulling ``torchy``
from two indexes, as uv's PyTorch guide lays them out; ``six`` forked per platform, ``grp`` per
Python; a ``helper`` both extras need, depending on ``torchy``) are locked by the installed uv
against local PEP 503 indexes on 127.0.0.1 (wheels built here). ``old`` pins ``torchy==2.0.*``,
``new`` takes 2.1. Each is then exported by ``uv export --format pylock.toml`` (per extra) and
locked by ``pip lock`` (pip 26.2.1, run from its wheel in the test cache: the ``pip lock`` command
needs pip >= 25.1) from ``uv export --format requirements.txt`` of the ``cpu`` extra: pip writes no
``index`` key and quotes ``+`` in file URLs as ``%2B``. ``uv pip compile --universal --format
pylock.toml`` resolves the same requirements (torchy from the cpu index) as a fourth writer.

pdm (2.29.4, installed once into the test cache) locks a third small project, pylock.toml as its
lock format (``lock.format = "pylock"``: entries selected by ``"default" in dependency_groups``,
the dependencies under ``[packages.tool.pdm]``), and exports its own pdm.lock as a pylock.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.model import Lock, parse_lock
from envforge.lockdiff.render import render_markdown, render_terminal
from envforge.uv.run import uv_binary
from tests.conftest import CACHE, cached_wheel
from tests.support.localindex import LocalIndex, make_wheel, serve
from tests.support.torchy import build_indexes, sources_toml

PIP = "26.2.1"
PDM = "2.29.4"
# hishel 2 removed SyncSqliteStorage, which pdm 2.29.4 imports at its first resolution
PDM_DEPS = (f"pdm=={PDM}", "hishel[httpx2]>=1.4,<2")


def _project(cpu: LocalIndex, gpu: LocalIndex, torchy: str) -> str:
    return f"""[project]
name = "proj"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six==1.16.0; sys_platform == 'linux'", "six==1.17.0; sys_platform != 'linux'",
                "grp==1.0; python_version < '3.12'", "grp==2.0; python_version >= '3.12'"]

[project.optional-dependencies]
cpu = ["torchy{torchy}", "helper"]
gpu = ["torchy{torchy}", "helper"]

[tool.uv]
package = false
conflicts = [[{{ extra = "cpu" }}, {{ extra = "gpu" }}]]

""" + sources_toml(cpu, gpu)


def _run(argv: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(UV_CACHE_DIR=str(cwd.parent / ".uv-cache"), UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1")
    res = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Lock], dict[str, str]]]:
    """``({"old/uv.lock": Lock, "old/pylock.cpu.toml": ..., "old/pip.toml": ..., "new/...": ...},
    {index URL: name})``: every lock the tools wrote, read by :func:`parse_lock`."""
    pip = cached_wheel("pip", PIP)
    root = tmp_path_factory.mktemp("writers")
    cpu, gpu, pub = build_indexes(root)
    locks: dict[str, Lock] = {}
    with serve(cpu), serve(gpu), serve(pub):
        for side, torchy in (("old", "==2.0.*"), ("new", ">=2")):
            project = root / side
            project.mkdir()
            (project / "pyproject.toml").write_text(_project(cpu, gpu, torchy))
            uv = [uv_binary(), "--no-progress"]
            index = ["--default-index", pub.url]
            _run([*uv, "lock", *index], project)
            for extra in ("cpu", "gpu"):
                _run(
                    [
                        *uv,
                        "export",
                        "--frozen",
                        "--extra",
                        extra,
                        "--format",
                        "pylock.toml",
                        "-o",
                        f"pylock.{extra}.toml",
                        *index,
                    ],
                    project,
                )
            _run(
                [
                    *uv,
                    "export",
                    "--frozen",
                    "--extra",
                    "cpu",
                    "--no-hashes",
                    "--format",
                    "requirements.txt",
                    "-o",
                    "requirements.txt",
                    *index,
                ],
                project,
            )
            _run(
                [
                    sys.executable,
                    f"{pip}/pip",
                    "lock",
                    "--isolated",
                    "--no-cache-dir",
                    "--index-url",
                    pub.url,
                    "--extra-index-url",
                    cpu.url,
                    "-r",
                    "requirements.txt",
                    "-o",
                    "pip.toml",
                ],
                project,
            )
            (project / "requirements.in").write_text(
                f"torchy{'==2.0.*' if side == 'old' else '>=2'}\nhelper\n"
                "six==1.16.0; sys_platform == 'linux'\n"
                "six==1.17.0; sys_platform != 'linux'\n"
            )
            _run(
                [
                    *uv,
                    "pip",
                    "compile",
                    "--universal",
                    "--format",
                    "pylock.toml",
                    "-o",
                    "pylock.compile.toml",
                    "--index-strategy",
                    "unsafe-best-match",
                    "--index-url",
                    pub.url,
                    "--extra-index-url",
                    cpu.url,
                    "requirements.in",
                ],
                project,
            )
            for name in ("uv.lock", "pylock.cpu.toml", "pylock.gpu.toml", "pip.toml", "pylock.compile.toml"):
                locks[f"{side}/{name}"] = parse_lock((project / name).read_text(), label=f"{side}/{name}")
        yield locks, {cpu.url: "cpu", gpu.url: "gpu", pub.url: "pub"}


def _shown(text: str, names: dict[str, str]) -> list[str]:
    for url, name in names.items():
        text = text.replace(url.rsplit("/simple", 1)[0], f"<{name}>")
    return text.splitlines()


def test_every_lock_the_tools_wrote_is_read(written: tuple[dict[str, Lock], dict[str, str]]) -> None:
    locks, _ = written
    assert {
        label: (lock.kind, lock.header.get("created-by"), sorted(lock.packages))
        for label, lock in locks.items()
        if label.startswith("new/")
    } == {
        "new/uv.lock": (
            "uv.lock",
            None,
            [
                "grp 1.0 ; python_full_version < '3.12' and sys_platform != 'linux' or python_full_version < '3.12' "
                "and sys_platform == 'linux'",
                "grp 2.0 ; python_full_version >= '3.12' and sys_platform != 'linux' or python_full_version >= '3.12' "
                "and sys_platform == 'linux'",
                "helper",
                "proj",
                "six 1.16.0 ; python_full_version < '3.12' and sys_platform == 'linux' or python_full_version >= "
                "'3.12' and sys_platform == 'linux'",
                "six 1.17.0 ; python_full_version < '3.12' and sys_platform != 'linux' or python_full_version >= "
                "'3.12' and sys_platform != 'linux'",
                "torchy 2.1.0+cpu ; python_full_version < '3.12' and sys_platform != 'linux' or python_full_version "
                "< '3.12' and sys_platform == 'linux' or python_full_version >= '3.12' and sys_platform != 'linux' "
                "or python_full_version >= '3.12' and sys_platform == 'linux'",
                "torchy 2.1.0+cu1 ; python_full_version < '3.12' and sys_platform != 'linux' or python_full_version "
                "< '3.12' and sys_platform == 'linux' or python_full_version >= '3.12' and sys_platform != 'linux' "
                "or python_full_version >= '3.12' and sys_platform == 'linux'",
            ],
        ),
        "new/pylock.cpu.toml": (
            "pylock",
            "uv",
            [
                "grp 1.0 ; python_full_version < '3.12'",
                "grp 2.0 ; python_full_version >= '3.12'",
                "helper",
                "six 1.16.0 ; sys_platform == 'linux'",
                "six 1.17.0 ; sys_platform != 'linux'",
                "torchy",
            ],
        ),
        "new/pylock.gpu.toml": (
            "pylock",
            "uv",
            [
                "grp 1.0 ; python_full_version < '3.12'",
                "grp 2.0 ; python_full_version >= '3.12'",
                "helper",
                "six 1.16.0 ; sys_platform == 'linux'",
                "six 1.17.0 ; sys_platform != 'linux'",
                "torchy",
            ],
        ),
        "new/pip.toml": ("pylock", "pip", ["grp", "helper", "six", "torchy"]),
        "new/pylock.compile.toml": (
            "pylock",
            "uv",
            ["helper", "six 1.16.0 ; sys_platform == 'linux'", "six 1.17.0 ; sys_platform != 'linux'", "torchy"],
        ),
    }


def test_relock_of_uv_lock_says_each_change_once(written: tuple[dict[str, Lock], dict[str, str]]) -> None:
    """The two torchy entries are upgraded; helper's and proj's edges that pin them follow them and
    are no change of their own; proj's requires-dist (``==2.0.*`` -> ``>=2``) is."""
    locks, names = written
    d = diff_locks(locks["old/uv.lock"], locks["new/uv.lock"])
    assert [(c.kind, c.name, c.old_version, c.new_version) for c in d.packages] == [
        ("fields", "proj", "0.1.0", "0.1.0"),
        ("upgraded", "torchy", "2.0.0+cpu", "2.1.0+cpu"),
        ("upgraded", "torchy", "2.0.0+cu1", "2.1.0+cu1"),
    ]
    assert d.packages[0].dependencies == ()
    assert [a.split(" {")[0] for a in d.packages[0].attributes] == [
        "+metadata.requires-dist torchy >=2",
        "+metadata.requires-dist torchy >=2",
        "-metadata.requires-dist torchy ==2.0.*",
        "-metadata.requires-dist torchy ==2.0.*",
    ]
    assert (d.index_moves, d.shared, d.fields) == ((), (), ())


@pytest.mark.parametrize("name", ["pylock.cpu.toml", "pylock.gpu.toml", "pip.toml", "pylock.compile.toml"])
def test_relock_of_an_export_or_a_pip_lock_is_one_upgrade(
    written: tuple[dict[str, Lock], dict[str, str]], name: str
) -> None:
    locks, names = written
    d = diff_locks(locks[f"old/{name}"], locks[f"new/{name}"])
    local = "cu1" if "gpu" in name else "cpu"
    assert [(c.kind, c.name, c.old_version, c.new_version) for c in d.packages] == [
        ("upgraded", "torchy", f"2.0.0+{local}", f"2.1.0+{local}")
    ]
    assert (d.index_moves, d.shared, d.fields) == ((), (), ())


def test_uv_export_against_pip_lock_lists_every_entry_once_and_no_move(
    written: tuple[dict[str, Lock], dict[str, str]],
) -> None:
    """pip locks for this interpreter (Linux, Python 3.11): the other forks' entries are removed and
    the kept ones lose their markers. pip names no index and quotes ``+``: the same files at the
    same URLs are no move (with ``--all``, one hidden line each)."""
    locks, names = written
    d = diff_locks(locks["new/pylock.cpu.toml"], locks["new/pip.toml"])
    assert _shown(render_terminal(d), names) == [
        "lock diff: new/pylock.cpu.toml -> new/pip.toml",
        "6 -> 4 packages: 2 removed, 2 marker, 1 lock setting (4 metadata-only hidden; --all shows them)",
        "other (2 removed, 2 marker)",
        "  marker   grp  1.0     marker \"python_full_version < '3.12'\" -> (none)",
        "  removed  grp  2.0     where python_full_version >= '3.12'; index <pub>/simple",
        "  marker   six  1.16.0  marker \"sys_platform == 'linux'\" -> (none)",
        "  removed  six  1.17.0  where sys_platform != 'linux'; index <pub>/simple",
        "lock settings ([tool.envforge] and header)",
        "  requires-python: removed >=3.10",
    ]
    hidden = [c for c in d.packages if c.hidden]
    assert [(c.name, c.detail) for c in hidden] == [
        ("helper", "index named on one side only, same files at the same URLs"),
        ("torchy", "index named on one side only, same files at the same URLs"),
    ]
    assert d.index_moves == ()


def test_every_entry_and_change_is_listed_once_in_markdown(written: tuple[dict[str, Lock], dict[str, str]]) -> None:
    locks, names = written
    md = render_markdown(diff_locks(locks["old/uv.lock"], locks["new/uv.lock"]))
    rows = [line for line in md.splitlines() if line.startswith("|") and "`" in line.split("|")[3]]
    assert [line.split("|")[2:5] for line in rows] == [
        [" fields ", " `proj` ", " 0.1.0 "],
        [" upgraded ", " `torchy` ", " 2.0.0+cpu → 2.1.0+cpu "],
        [" upgraded ", " `torchy` ", " 2.0.0+cu1 → 2.1.0+cu1 "],
    ]


def test_uv_lock_against_its_own_export(written: tuple[dict[str, Lock], dict[str, str]]) -> None:
    """The export for the ``cpu`` extra drops the ``gpu`` torchy and the project; the markers uv.lock
    writes for the kept entries (every fork joined: true everywhere, or one platform over both
    Python forks) are the export's markers over the same environments: no marker change."""
    locks, names = written
    d = diff_locks(locks["new/uv.lock"], locks["new/pylock.cpu.toml"])
    assert [(c.kind, c.name, c.new_version or c.old_version, c.marker_changed) for c in d.packages if not c.hidden] == [
        ("dependencies", "helper", "1.0", False),
        ("removed", "proj", "0.1.0", False),
        ("removed", "torchy", "2.1.0+cu1", False),
    ]


def _pdm() -> Path:
    """``pdm`` of a virtual environment in the test cache, made once under a file lock (a marker
    file written last says it is complete); the test is skipped when pdm cannot be installed."""
    target = CACHE / f"pdm-{PDM}"
    marker = target / ".envforge-complete"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"pdm-{PDM}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            made = subprocess.run(
                [uv_binary(), "venv", "-q", "--clear", "--python", sys.executable, str(target)],
                capture_output=True,
                text=True,
            )
            got = (
                made.returncode == 0
                and subprocess.run(
                    [uv_binary(), "pip", "install", "-q", "--python", str(target / "bin" / "python"), *PDM_DEPS],
                    capture_output=True,
                    text=True,
                ).returncode
                == 0
            )
            if not got:
                pytest.skip(f"cannot install {' '.join(PDM_DEPS)} into the test cache")
            marker.write_text("ok\n")
    return target / "bin" / "pdm"


def _pdm_project(pub: LocalIndex, cpu: LocalIndex, torchy: str) -> str:
    return f'''[project]
name = "proj"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["six>=1.16; sys_platform == 'linux'", "grp", "helper", "torchy=={torchy}"]

[tool.pdm]
distribution = false

[[tool.pdm.source]]
name = "pypi"
url = "{pub.url}"

[[tool.pdm.source]]
name = "cpu"
url = "{cpu.url}"
include_packages = ["torchy"]
'''


@pytest.fixture(scope="module")
def pdm_written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Lock]]:
    """``{"old/pylock.toml": Lock, "old/export.toml": ..., "new/...": ...}``: pdm's own pylock
    and its export of pdm.lock, for torchy 2.0.0+cpu (old) and 2.1.0+cpu (new)."""
    pdm = _pdm()
    root = tmp_path_factory.mktemp("pdm")
    cpu, pub = LocalIndex(root / "cpu"), LocalIndex(root / "pub")
    for version in ("2.0.0", "2.1.0"):
        cpu.add(make_wheel(root / "wheels" / "cpu", "torchy", f"{version}+cpu"))
    pub.add(make_wheel(root / "wheels" / "pub", "helper", "1.0", requires=["torchy"]))
    for name, version in (("six", "1.17.0"), ("grp", "2.0")):
        pub.add(make_wheel(root / "wheels" / "pub", name, version))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "PDM_"))}
    env.update(
        PDM_HOME=str(root / "home"),
        PDM_CACHE_DIR=str(root / "cache"),
        PDM_CHECK_UPDATE="false",
        PDM_PYTHON=sys.executable,
        PDM_USE_VENV="false",
    )
    locks: dict[str, Lock] = {}
    with serve(cpu), serve(pub):
        for side, torchy in (("old", "2.0.0+cpu"), ("new", "2.1.0+cpu")):
            project = root / side
            project.mkdir()
            (project / "pyproject.toml").write_text(_pdm_project(pub, cpu, torchy))
            for args in (
                ["lock"],
                ["export", "-f", "pylock", "-o", "export.toml"],
                ["config", "--local", "lock.format", "pylock"],
                ["lock"],
            ):
                res = subprocess.run(
                    [str(pdm), *args], cwd=project, env=env, capture_output=True, text=True, timeout=180
                )
                assert res.returncode == 0, res.stderr
                if args[0] == "export":  # pdm keeps using a pdm.lock it finds, whatever lock.format says
                    (project / "pdm.lock").unlink()
            for name in ("pylock.toml", "export.toml"):
                locks[f"{side}/{name}"] = parse_lock((project / name).read_text(), label=f"{side}/{name}")
    yield locks


@pytest.mark.slow  # about 30 s: eight pdm runs (and its first install into the test cache)
@pytest.mark.network
def test_every_lock_pdm_wrote_is_read_and_a_relock_is_one_upgrade(pdm_written: dict[str, Lock]) -> None:
    lock = pdm_written["new/pylock.toml"]
    assert (lock.header.get("created-by"), lock.lists["dependency-groups"]) == ("pdm", ("default",))
    assert lock.lists["tool.pdm.targets"] == ("{requires_python=>=3.10}",)  # a table item without a name
    assert {p.name: (p.version, p.marker) for p in lock.packages.values()} == {
        "grp": ("2.0", '"default" in dependency_groups'),
        "helper": ("1.0", '"default" in dependency_groups'),
        "six": ("1.17.0", 'sys_platform == "linux" and "default" in dependency_groups'),
        "torchy": ("2.1.0+cpu", '"default" in dependency_groups'),
    }
    assert dict(lock.packages["helper"].attrs)["tool.pdm.dependencies"] == "torchy"
    for name in ("pylock.toml", "export.toml"):
        d = diff_locks(pdm_written[f"old/{name}"], pdm_written[f"new/{name}"])
        assert [(c.kind, c.name, c.old_version, c.new_version) for c in d.packages] == [
            ("upgraded", "torchy", "2.0.0+cpu", "2.1.0+cpu")
        ]
        assert d.index_moves == d.shared == ()


def test_the_issues_conflicting_extras_relock_is_two_upgrades_and_nothing_else() -> None:
    """tests/data/uvlock-conflicts (the issue's pair, field case U01): the root's two edges that pin
    the cpu and the cu128 torch follow them, and their every-fork markers say nothing."""
    data = Path(__file__).parents[1] / "data" / "uvlock-conflicts"
    old, new = (parse_lock((data / f"uv-{side}.lock").read_text(), label=f"uv-{side}.lock") for side in ("old", "new"))
    assert render_terminal(diff_locks(old, new)).splitlines() == [
        "lock diff: uv-old.lock -> uv-new.lock",
        "3 -> 3 packages: 2 upgraded",
        "torch family (2 upgraded)",
        "  upgraded  torch  2.8.0+cpu -> 2.9.1+cpu      minor",
        "  upgraded  torch  2.8.0+cu128 -> 2.9.1+cu128  minor",
    ]


def _uv(torch_index: str) -> str:
    cu = f"https://download.pytorch.org/whl/{torch_index}"
    return f'''version = 1
revision = 3
requires-python = ">=3.12"

[[package]]
name = "proj"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [{{ name = "torch", version = "2.9.1", source = {{ registry = "{cu}" }} }}]

[[package]]
name = "torch"
version = "2.9.1"
source = {{ registry = "{cu}" }}
wheels = [{{ url = "{cu}/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", hash = "sha256:{"1" * 64}" }}]
'''


def test_an_edge_pinning_a_moved_entry_follows_the_move() -> None:
    """The torch entry moves from the cu128 to the cu130 index (a new file URL, same hash); the
    root's edge that names its source follows it: one moved line, no dependencies line."""
    d = diff_locks(parse_lock(_uv("cu128"), label="old.lock"), parse_lock(_uv("cu130"), label="new.lock"))
    assert render_terminal(d).splitlines() == [
        "lock diff: old.lock -> new.lock",
        "2 -> 2 packages: 1 moved",
        "torch family (1 moved)",
        "  moved  torch  2.9.1  index https://download.pytorch.org/whl/{cu128 -> cu130}",
    ]


def test_uv_pip_compile_against_the_uv_export_names_each_difference_once(
    written: tuple[dict[str, Lock], dict[str, str]],
) -> None:
    """Two uv writers of one resolution: the export of the project's cpu extra has grp (the project's
    own dependency), the compile of the requirements file does not; the rest is the same files."""
    locks, names = written
    d = diff_locks(locks["new/pylock.cpu.toml"], locks["new/pylock.compile.toml"])
    assert [(c.kind, c.name, c.old_version or c.new_version) for c in d.packages if not c.hidden] == [
        ("removed", "grp", "1.0"),
        ("removed", "grp", "2.0"),
    ]
    assert (d.index_moves, d.shared) == ((), ())


def _verdict_file(a: str | None, b: str | None) -> Path:
    import hashlib
    import os

    import packaging

    key = hashlib.sha256(f"envforge.lockreader/4\0{packaging.__version__}\0{a!r}\0{b!r}".encode()).hexdigest()
    return Path(os.environ["ENVFORGE_CACHE_DIR"]) / "marker-verdicts" / key


def test_a_marker_verdict_is_kept_on_disk_and_answers_the_next_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    from envforge.lockdiff import classify

    joined = "sys_platform == 'linux' or sys_platform != 'linux'"
    assert classify._same_space(joined, None) is True
    assert classify._same_space("sys_platform == 'linux'", "sys_platform == 'win32'") is False
    assert _verdict_file(joined, None).read_bytes() == b"1"
    assert _verdict_file("sys_platform == 'linux'", "sys_platform == 'win32'").read_bytes() == b"0"
    assert classify._same_space("os_name=='nt'", 'os_name == "nt"') is True  # one text once parsed
    assert _verdict_file("os_name=='nt'", 'os_name == "nt"').read_bytes() == b"1"
    classify._same_space.cache_clear()

    def never(*_args: object) -> bool:
        raise AssertionError("a kept verdict must answer without the marker search")

    monkeypatch.setattr(classify, "equivalent", never)
    assert classify._same_space(joined, None) is True
    assert classify._same_space("sys_platform == 'linux'", "sys_platform == 'win32'") is False
    _verdict_file(joined, None).write_bytes(b"yes")  # not a verdict: decided again, and kept
    classify._same_space.cache_clear()
    monkeypatch.setattr(classify, "equivalent", lambda a, b: False)
    assert classify._same_space(joined, None) is False
    assert _verdict_file(joined, None).read_bytes() == b"0"


def test_no_lock_cache_keeps_no_verdict_and_an_unwritable_cache_costs_only_the_search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from envforge.lockdiff import classify

    monkeypatch.setenv("ENVFORGE_NO_LOCK_CACHE", "1")
    assert classify._same_space("python_version < '3.11'", "python_version <= '3.10'") is True
    assert not _verdict_file("python_version < '3.11'", "python_version <= '3.10'").parent.exists()
    monkeypatch.delenv("ENVFORGE_NO_LOCK_CACHE")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "file"))  # a file where the directory should be
    assert classify._same_space("python_version < '3.11'", "python_version < '3.10'") is False
    assert classify._same_space("not a marker", "sys_platform == 'linux'") is False


def test_a_fifo_planted_as_a_verdict_is_never_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    from envforge.lockdiff import classify

    where = _verdict_file("sys_platform == 'linux'", None)
    where.parent.mkdir(parents=True)
    os.mkfifo(where)

    def hung(*_args: object) -> None:
        raise AssertionError("the verdict was opened: a FIFO blocks")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)  # a guard that turns a hang into a failure, not a timing bound
    try:
        assert classify._same_space("sys_platform == 'linux'", None) is False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert where.read_bytes() == b"0"


def test_a_verdict_makes_the_cache_directories_it_needs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from envforge.lockdiff import classify

    monkeypatch.setenv("ENVFORGE_CACHE_DIR", str(tmp_path / "not" / "yet"))
    assert classify._same_space("os_name == 'nt'", "os_name != 'nt'") is False
    assert _verdict_file("os_name == 'nt'", "os_name != 'nt'").read_bytes() == b"0"


def _pylock(*entries: tuple[str, str, str]) -> str:
    """A pylock.toml of ``(name, version, wheel URL)`` entries, each wheel's hash fixed by its name."""
    import hashlib

    out = 'lock-version = "1.0"\ncreated-by = "tests"\n'
    for name, version, url in entries:
        digest = hashlib.sha256(name.encode()).hexdigest()
        out += (
            f'\n[[packages]]\nname = "{name}"\nversion = "{version}"\nindex = "{url.rsplit("/", 1)[0]}"\n'
            f'wheels = [{{ url = "{url}", hashes = {{ sha256 = "{digest}" }} }}]\n'
        )
    return out


def test_a_file_url_quoting_plus_as_percent_2b_is_the_same_file() -> None:
    """pip quotes ``+`` in a file URL as ``%2B``; uv writes it as it is: same index, same file name
    and hash, so nothing moved and nothing changed."""
    cu = "https://download.pytorch.org/whl/cu130"
    plain = _pylock(("torch", "2.9.1+cu130", f"{cu}/torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"))
    quoted = _pylock(("torch", "2.9.1+cu130", f"{cu}/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"))
    d = diff_locks(parse_lock(plain, label="uv.toml"), parse_lock(quoted, label="pip.toml"))
    assert render_terminal(d).splitlines() == ["lock diff: uv.toml -> pip.toml", "1 -> 1 package: no changes"]


def test_a_cuda_rename_is_paired_only_when_one_candidate_stands_on_each_side() -> None:
    """nvidia-nccl-cu12 removed and nvidia-nccl-cu13 added: replaced. With nvidia-nccl (the unsuffixed
    name, CUDA 13's) added as well, which one replaces it is not known: removed and two added."""
    pypi = "https://files.pythonhosted.org/packages"
    old = _pylock(("nvidia-nccl-cu12", "2.27.3", f"{pypi}/nvidia_nccl_cu12-2.27.3-py3-none-manylinux_2_18_x86_64.whl"))
    cu13 = ("nvidia-nccl-cu13", "2.28.3", f"{pypi}/nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_18_x86_64.whl")
    bare = ("nvidia-nccl", "2.28.3", f"{pypi}/nvidia_nccl-2.28.3-py3-none-manylinux_2_18_x86_64.whl")
    one = diff_locks(parse_lock(old, label="a"), parse_lock(_pylock(cu13), label="b"))
    assert [(c.kind, c.old_name, c.new_name, c.detail) for c in one.packages] == [
        ("replaced", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "-cu12 -> -cu13")
    ]
    two = diff_locks(parse_lock(old, label="a"), parse_lock(_pylock(cu13, bare), label="b"))
    assert sorted((c.kind, c.old_name, c.new_name) for c in two.packages) == [
        ("added", None, "nvidia-nccl"),
        ("added", None, "nvidia-nccl-cu13"),
        ("removed", "nvidia-nccl-cu12", None),
    ]


def test_a_replaced_entry_keeps_both_markers_and_a_level_per_part_of_the_version() -> None:
    """A ``-cu12`` entry replaced by its ``-cu13`` twin under another marker: both markers kept
    (the JSON's ``old_marker`` / ``new_marker``); upgrades name the part of the version that moved."""
    pypi = "https://files.pythonhosted.org/packages"
    old = _pylock(("nvidia-nccl-cu12", "2.27.3", f"{pypi}/nvidia_nccl_cu12-2.27.3-py3-none-manylinux_2_18_x86_64.whl"))
    new = _pylock(("nvidia-nccl-cu13", "2.28.3", f"{pypi}/nvidia_nccl_cu13-2.28.3-py3-none-manylinux_2_18_x86_64.whl"))
    old = old.replace('version = "2.27.3"\n', 'version = "2.27.3"\nmarker = "sys_platform == \'linux\'"\n')
    new = new.replace('version = "2.28.3"\n', 'version = "2.28.3"\nmarker = "platform_machine == \'x86_64\'"\n')
    (c,) = diff_locks(parse_lock(old, label="a"), parse_lock(new, label="b")).packages
    assert (c.kind, c.old_marker, c.new_marker) == (
        "replaced",
        "sys_platform == 'linux'",
        "platform_machine == 'x86_64'",
    )
    levels = []
    for a, b in (
        ("1.0", "2.0"),
        ("1.0", "1.1"),
        ("1.0", "1.0.1"),
        ("1.0rc1", "1.0rc2"),
        ("1.0", "1.0.post1"),
        ("1.0.dev1", "1.0.dev2"),
        ("2.0", "1.9"),
    ):
        d = diff_locks(
            parse_lock(_pylock(("demo", a, f"{pypi}/demo-{a}-py3-none-any.whl")), label="a"),
            parse_lock(_pylock(("demo", b, f"{pypi}/demo-{b}-py3-none-any.whl")), label="b"),
        )
        levels.append((d.packages[0].kind, d.packages[0].level))
    assert levels == [
        ("upgraded", "major"),
        ("upgraded", "minor"),
        ("upgraded", "patch"),
        ("upgraded", "pre"),
        ("upgraded", "post"),
        ("upgraded", "dev"),
        ("downgraded", "major"),
    ]


def _two_torches(version: str) -> str:
    """A uv.lock with two torch entries (``version`` and 2.8.0, one index) and a root edge that pins
    the first by version only (uv writes ``source`` only where the version does not tell them apart)."""
    cu = "https://download.pytorch.org/whl/cu128"
    entries = "".join(
        f'''
[[package]]
name = "torch"
version = "{v}"
source = {{ registry = "{cu}" }}
resolution-markers = ["{m}"]
wheels = [{{ url = "{cu}/torch-{v}-cp312-cp312-manylinux_2_28_x86_64.whl", hash = "sha256:{h * 64}" }}]
'''
        for v, m, h in ((version, "sys_platform == 'linux'", "1"), ("2.8.0", "sys_platform != 'linux'", "2"))
    )
    return (
        f'''version = 1
revision = 3
requires-python = ">=3.12"

[[package]]
name = "proj"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [{{ name = "torch", version = "{version}", marker = "sys_platform == 'linux'" }}, {{ name = "torch", version = "2.8.0", marker = "sys_platform != 'linux'" }}]
'''
        + entries
    )


def test_an_edge_pinned_by_version_only_follows_its_entry() -> None:
    d = diff_locks(
        parse_lock(_two_torches("2.9.1"), label="old.lock"), parse_lock(_two_torches("2.9.2"), label="new.lock")
    )
    assert render_terminal(d).splitlines() == [
        "lock diff: old.lock -> new.lock",
        "3 -> 3 packages: 1 upgraded",
        "torch family (1 upgraded)",
        "  upgraded  torch  2.9.1 -> 2.9.2  patch; where sys_platform == 'linux'",
    ]  # and no dependencies line for the root: its edge followed the entry
