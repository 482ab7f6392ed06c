"""Platforms, CUDA-less CUDA variants, reviewed CUDA exceptions and source builds (issue 20).

The tests marked ``network`` run the real uv against the real package index's metadata (PyPI), as a
user locking for another machine would: locking for aarch64 works from this x86_64 machine; building
it does not, and says so before anything is written. They skip (with the reason) where the index
cannot be reached or ``ENVFORGE_OFFLINE=1``.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envforge.recipe.platforms import UV_PLATFORMS, host_problem, parse_platform, platform_problem
from envforge.uv.run import uv_binary
from tests.support.localindex import LocalIndex, make_wheel, serve

ENVFORGE = [sys.executable, "-m", "envforge"]


def _index_reachable() -> bool:
    if os.environ.get("ENVFORGE_OFFLINE") == "1":
        return False
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


needs_index = pytest.mark.skipif(not _index_reachable(), reason="needs the package index (PyPI) for real metadata")


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "recipes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "recipes" / "r.toml").write_text(f'[recipe]\nname = "r"\npython = "3.12"\n\n{body}')
    return tmp_path


# ---- the platform list and its checks -------------------------------------------------------------


def test_platform_list_is_the_installed_uvs() -> None:
    help_text = subprocess.run([uv_binary(), "pip", "compile", "--help"], capture_output=True, text=True).stdout
    block = help_text.split("The platform for which requirements should be resolved", 1)[1]
    m = re.search(r"possible\s+values:([^\]]*)\]", re.sub(r"\s+", " ", block))
    assert m is not None, block[:500]
    values = re.sub(r"\s+", " ", m.group(1)).strip()
    assert tuple(v.strip() for v in values.split(",")) == UV_PLATFORMS


def test_platform_problems_suggest_uv_names() -> None:
    assert platform_problem("aarch64-manylinux_2_28") is None
    assert platform_problem("linux/arm64") == (
        "'linux/arm64' is not a platform uv can resolve for (uv --python-platform); did you mean "
        "'aarch64-manylinux_2_28'? e.g. 'x86_64-manylinux_2_28' or 'aarch64-manylinux_2_34' "
        "(arch-manylinux_2_<glibc minor>)"
    )
    assert "did you mean 'x86_64-manylinux_2_28'?" in (platform_problem("linux/amd64") or "")
    assert "did you mean 'x86_64-manylinux_2_34'?" in (platform_problem("x86_64-manylinux-2.34") or "")
    assert "did you mean 'aarch64-manylinux_2_28'?" in (platform_problem("arm64") or "")
    assert "did you mean 'x86_64-manylinux_2_39'?" in (platform_problem("x86_64-manylinux_2_3") or "")


def test_parse_platform() -> None:
    assert parse_platform("aarch64-manylinux_2_34").glibc == (2, 34)
    assert parse_platform("x86_64-manylinux2014").glibc == (2, 17)
    assert parse_platform("linux").machine == "x86_64"
    assert parse_platform("aarch64-unknown-linux-gnu").glibc == (2, 28)
    assert parse_platform("x86_64-pc-windows-msvc").os == "windows"
    with pytest.raises(ValueError):
        parse_platform("linux/arm64")


def test_host_problem_names_both_sides() -> None:
    assert host_problem("aarch64-manylinux_2_28", machine="x86_64", glibc=(2, 36), os_name="linux") == (
        "the lock is for aarch64-manylinux_2_28 (aarch64), this machine is linux x86_64"
    )
    assert host_problem("x86_64-manylinux_2_40", machine="x86_64", glibc=(2, 36), os_name="linux") == (
        "the lock is for x86_64-manylinux_2_40, which needs glibc 2.40 or newer; "
        "this machine is linux x86_64 with glibc 2.36"
    )
    assert host_problem("x86_64-manylinux_2_28", machine="x86_64", glibc=(2, 36), os_name="linux") is None
    assert host_problem("aarch64-manylinux_2_34", machine="arm64", glibc=(2, 39), os_name="linux") is None
    assert host_problem("x86_64-pc-windows-msvc", machine="x86_64", glibc=(2, 36), os_name="linux") == (
        "the lock is for x86_64-pc-windows-msvc (windows), this machine is linux x86_64"
    )


def test_recipe_refuses_a_platform_uv_does_not_know(tmp_path: Path) -> None:
    proj = project(tmp_path, '[packages]\nsix = "==1.17.0"\n\n[variant.gh200]\nplatform = "linux/arm64"\n')
    res = envforge(proj, "lock", "r", "--variant", "gh200")
    assert res.returncode == 2, res.stderr
    assert "recipes/r.toml:9: variant.gh200.platform: 'linux/arm64' is not a platform uv can resolve for" in res.stderr
    assert "did you mean 'aarch64-manylinux_2_28'?" in res.stderr
    assert not (proj / "lockfiles").exists()


def test_reasons_must_not_be_empty_and_constraints_must_pin(tmp_path: Path) -> None:
    proj = project(tmp_path, '[packages]\nsix = "==1.17.0"\n\n[build-from-source]\ndocopt = " "\n')
    (proj / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\nbuild-constraints = ["setuptools>=70"]\n\n'
        '[packages]\nsix = "==1.17.0"\n\n[build-from-source]\ndocopt = " "\n'
    )
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2
    assert (
        "recipe.build-constraints[0]: 'setuptools>=70' does not pin one version; write e.g. 'setuptools==X.Y.Z'"
    ) in res.stderr
    assert "build-from-source.docopt: give the reason reviewers read (a non-empty string)" in res.stderr


# ---- build refuses a lock for another machine, before touching anything -----------------------------


@pytest.fixture(scope="module")
def pure_index(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("pure-index")
    index = LocalIndex(root / "index")
    index.add(make_wheel(root / "built", "app", "1.0"))
    with serve(index):
        yield index


def test_a_lock_for_aarch64_is_made_here_and_refused_by_build(tmp_path: Path, pure_index: LocalIndex) -> None:
    proj = project(
        tmp_path,
        f'[indexes]\npypi = "{pure_index.url}"\n\n[packages]\napp = "==1.0"\n\n'
        '[variant.x86]\n\n[variant.gh200]\nplatform = "aarch64-manylinux_2_28"\n',
    )
    res = envforge(proj, "lock", "r", "--variant", "gh200")
    assert res.returncode == 0, res.stderr
    lock = proj / "lockfiles" / "pylock.r-gh200.toml"
    data = tomllib.loads(lock.read_text())
    assert data["environments"] == ["sys_platform == 'linux' and platform_machine == 'aarch64'"]
    assert data["tool"]["envforge"]["inputs"]["platform"] == "aarch64-manylinux_2_28"
    assert data["tool"]["envforge"]["target"]["platform"] == "aarch64-manylinux_2_28"
    build = envforge(proj, "build", "r", "--variant", "gh200")
    assert build.returncode == 2, build.stderr
    assert (
        f"error: {lock}: cannot build here: the lock is for aarch64-manylinux_2_28 (aarch64), "
        "this machine is linux x86_64"
    ) in build.stderr
    assert not (proj / "envs").exists()  # nothing written


def test_build_refuses_a_lock_for_another_python(tmp_path: Path, pure_index: LocalIndex) -> None:
    from envforge.env.build import _check_machine
    from envforge.core.errors import InputError
    from envforge.uv.interpreter import Interpreter

    proj = project(tmp_path, f'[indexes]\npypi = "{pure_index.url}"\n\n[packages]\napp = "==1.0"\n')
    assert envforge(proj, "lock", "r").returncode == 0
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    _check_machine(lock, Interpreter(Path("/usr/bin/python3.12"), "3.12.1", "test"))
    with pytest.raises(InputError) as err:
        _check_machine(lock, Interpreter(Path("/usr/bin/python3.13"), "3.13.0", "test"))
    assert err.value.message == (
        f"{lock}: the lock is for Python 3.12, the interpreter found is 3.13.0 (/usr/bin/python3.13)"
    )
    with pytest.raises(InputError):
        _check_machine(lock, Interpreter(Path("/x"), "3.120.0", "test"))
    # The recipe's python changed since the lock: the lock is stale, not the interpreter missing.
    recipe = proj / "recipes" / "r.toml"
    recipe.write_text(recipe.read_text().replace('python = "3.12"', 'python = "3.11"'))
    build = envforge(proj, "build", "r")
    assert build.returncode == 2, build.stderr
    assert build.stderr == (
        f"error: {lock}: the lock is for Python 3.12, the recipe now asks for 3.11: the lock is "
        "stale\n  hint: relock: `envforge lock r --variant default` (with `--check` it shows "
        "what changed)\n"
    )
    assert not (proj / "envs").exists()


# ---- real metadata: CUDA variants that resolve no CUDA, platforms, exceptions, sdists ----------------


@needs_index
@pytest.mark.network
@pytest.mark.slow
def test_a_cuda_variant_for_aarch64_with_cpu_only_torch_is_refused(tmp_path: Path) -> None:
    proj = project(
        tmp_path,
        '[packages]\ntorch = "==2.9.1"\n\n[variant.gh200]\ncuda = "12.8"\n'
        'platform = "aarch64-manylinux_2_28"\n\n[variant.x86]\ncuda = "12.8"\n',
    )
    res = envforge(proj, "lock", "r", "--variant", "gh200")
    assert res.returncode == 1, res.stderr
    assert (
        "r-gh200: the variant declares CUDA 12.8 but the lock for aarch64-manylinux_2_28 contains no "
        "CUDA build: torch 2.9.1 has no +cuXXX local label and no CUDA runtime wheel (nvidia-*, cuda-*) "
        "was resolved ("
    ) in res.stderr
    assert 'pytorch-cu128 = "https://download.pytorch.org/whl/cu128"' in res.stderr
    assert not (proj / "lockfiles" / "pylock.r-gh200.toml").exists()
    x86 = envforge(proj, "lock", "r", "--variant", "x86")  # the same pin on x86_64 is a CUDA 12 stack
    assert x86.returncode == 0, x86.stderr
    names = {p["name"] for p in tomllib.loads((proj / "lockfiles" / "pylock.r-x86.toml").read_text())["packages"]}
    assert "nvidia-cuda-runtime-cu12" in names


@needs_index
@pytest.mark.network
def test_a_pin_without_a_wheel_for_the_platform_says_the_fix_is_the_platform(tmp_path: Path) -> None:
    proj = project(tmp_path, '[packages]\nsglang = "==0.5.23"\n')
    res = envforge(proj, "lock", "r")
    assert res.returncode == 2, res.stderr
    assert (
        "error: r-default: sglang 0.5.23 has no wheel for the target platform x86_64-manylinux_2_28; "
        "its wheels are for: manylinux_2_34_aarch64, manylinux_2_34_x86_64"
    ) in res.stderr
    assert (
        'hint: the fix is the platform, not an override: set platform = "x86_64-manylinux_2_34" in '
        "[variant.default] (or [target]); machines that build this lock then need glibc 2.34 or newer"
    ) in res.stderr
    assert "override" not in res.stderr.split("hint:", 1)[1].split("not an override", 1)[1]


@needs_index
@pytest.mark.network
@pytest.mark.slow
def test_cuda13_sglang_stack_names_the_cu12_chain_and_accepts_a_reviewed_exception(tmp_path: Path) -> None:
    body = '[packages]\nsglang = "==0.5.23"\n\n[variant.cu130]\ncuda = "13.0"\nplatform = "x86_64-manylinux_2_34"\n'
    proj = project(tmp_path, body)
    res = envforge(proj, "lock", "r", "--variant", "cu130")
    assert res.returncode == 1, res.stderr
    assert (
        "  nvidia-cutlass-dsl-libs-cu12 4.8.0 is built for CUDA 12 (name suffix -cu12), the variant is CUDA 13\n"
        "    pulled in by: the recipe -> sglang -> nvidia-cutlass-dsl -> nvidia-cutlass-dsl-libs-cu12"
    ) in res.stderr
    assert '[variant.cu130.cuda-exceptions] nvidia-cutlass-dsl-libs-cu12 = "<reason>"' in res.stderr
    reason = "nvidia-cutlass-dsl 4.8.0 requires its cu12 libs unconditionally"
    project(tmp_path, body + f'\n[variant.cu130.cuda-exceptions]\nnvidia-cutlass-dsl-libs-cu12 = "{reason}"\n')
    ok = envforge(proj, "lock", "r", "--variant", "cu130")
    assert ok.returncode == 0, ok.stderr
    tool = tomllib.loads((proj / "lockfiles" / "pylock.r-cu130.toml").read_text())["tool"]["envforge"]
    assert tool["cuda-exceptions"] == [{"name": "nvidia-cutlass-dsl-libs-cu12", "reason": reason}]
    assert tool["inputs"]["cuda-exceptions"] == [f"nvidia-cutlass-dsl-libs-cu12: {reason}"]
    # an exception that no longer matches anything is an error, not a silent pass
    project(
        tmp_path,
        body + '\n[variant.cu130.cuda-exceptions]\nnvidia-nccl-cu12 = "old"\n'
        f'nvidia-cutlass-dsl-libs-cu12 = "{reason}"\n',
    )
    stale = envforge(proj, "lock", "r", "--variant", "cu130")
    assert stale.returncode == 2
    assert (
        "cuda-exceptions name packages that are not built for another CUDA major in this lock: nvidia-nccl-cu12"
    ) in stale.stderr


def _download(dest: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), *args],
        check=True,
        capture_output=True,
        text=True,
    )


@needs_index
@pytest.mark.network
@pytest.mark.slow
def test_an_sdist_only_pin_needs_an_opt_in_and_builds_offline_from_a_wheelhouse(tmp_path: Path) -> None:
    proj = project(tmp_path, '[packages]\ndocopt = "==0.6.2"\n')
    res = envforge(proj, "lock", "r")
    assert res.returncode == 1, res.stderr
    assert (
        "r-default: docopt 0.6.2 has no wheel for x86_64-manylinux_2_28 and would be built from source at install time"
    ) in res.stderr
    assert 'hint: opt in with the reason reviewers read: [build-from-source] docopt = "<reason>"' in res.stderr
    (proj / "recipes" / "r.toml").write_text(
        '[recipe]\nname = "r"\npython = "3.12"\nbuild-constraints = ["setuptools==80.9.0"]\n\n'
        '[packages]\ndocopt = "==0.6.2"\n\n[build-from-source]\ndocopt = "upstream ships no wheel"\n'
    )
    ok = envforge(proj, "lock", "r")
    assert ok.returncode == 0, ok.stderr
    tool = tomllib.loads((proj / "lockfiles" / "pylock.r-default.toml").read_text())["tool"]["envforge"]
    assert tool["build-from-source"] == [{"name": "docopt", "reason": "upstream ships no wheel"}]
    assert tool["build-constraints"] == ["setuptools==80.9.0"]
    house = tmp_path / "wheelhouse"
    _download(house, "--no-binary", ":all:", "docopt==0.6.2")
    _download(house, "--only-binary", ":all:", "setuptools==80.9.0")
    assert sorted(p.name for p in house.iterdir()) == ["docopt-0.6.2.tar.gz", "setuptools-80.9.0-py3-none-any.whl"]
    cache = tmp_path / "uv-cache"  # an empty uv cache: nothing can come from an earlier download
    env = {**os.environ, "UV_CACHE_DIR": str(cache)}
    build = subprocess.run(
        [*ENVFORGE, "build", "r", "--offline", "--find-links", str(house)],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert build.returncode == 0, build.stderr
    py = proj / "envs" / "r-default" / "bin" / "python"
    out = subprocess.run([str(py), "-c", "import docopt; print(docopt.__version__)"], capture_output=True, text=True)
    assert out.stdout.strip() == "0.6.2"


def test_verify_on_a_machine_of_another_platform_is_one_finding(tmp_path: Path) -> None:
    from envforge.lock.model import Lock
    from envforge.verify.static import StaticInputs, run_static

    lock = Lock(path=tmp_path / "pylock.toml", packages=(), envforge={"inputs": {"platform": "aarch64-manylinux_2_34"}})
    # the interpreter does not exist: nothing may try to run it
    result = run_static(StaticInputs(site_packages=tmp_path, python=tmp_path / "no-python", lock=lock))
    assert [f.as_dict() for f in result.findings] == [
        {
            "kind": "platform",
            "level": "static",
            "subject": "aarch64-manylinux_2_34",
            "expected": "a machine that runs aarch64-manylinux_2_34 wheels",
            "actual": "the lock is for aarch64-manylinux_2_34 (aarch64), this machine is linux x86_64",
            "fix": "verify on a machine of the lock's platform, or build the variant locked for this machine's "
            "platform (a variant's `platform` key)",
        }
    ]
    assert [c.name for c in result.checks] == ["platform"]


def test_fingerprint_carries_the_lock_platform(tmp_path: Path) -> None:
    from envforge.env.fingerprint import Fingerprint, fingerprint_of

    root = Path(__file__).resolve().parents[2]
    (tmp_path / ".envforge").mkdir()
    (tmp_path / ".envforge" / "pylock.toml").write_bytes(
        (root / "lockfiles" / "pylock.kimi-k25-sm120-cu130-aarch64.toml").read_bytes()
    )
    assert fingerprint_of(tmp_path).platform == "aarch64-manylinux_2_34"
    assert "platform" in Fingerprint(None, None, None, None).as_dict()
