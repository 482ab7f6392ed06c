"""Released wheels read without pip (``envforge patches check`` from a ``uv venv``, issue 26): a real
local PEP 503 index on 127.0.0.1 serving real sglang wheels from the test cache, the listing and
the wheels cached so a second run needs no index, and each transport failure named.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from tests.conftest import cached_wheel
from tests.support.localindex import LocalIndex, make_wheel, serve
from tests.support.patching_trees import PATCHSETS

from envforge.core.errors import EXIT_TOOL_FAILED, InputError
from envforge.patching import releases
from envforge.patching.releases import IndexFile, IndexUnreachable, fetch_release, list_releases
from envforge.uv.run import uv_binary

SRC = Path(__file__).resolve().parents[2] / "src"


def _pipless_python(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A real ``uv venv`` (no pip in it) and the environment that puts envforge's source and its
    dependencies, every distribution of this interpreter's site-packages but pip, on its path."""
    venv = tmp_path / "venv"
    subprocess.run(
        [uv_binary(), "venv", "--quiet", "--python", sys.executable, str(venv)],
        check=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_OFFLINE": "1"},
    )
    deps = tmp_path / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(("pip", "_distutils_hack", "distutils-precedence", "envforge")):
            (deps / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{deps}", "PYTHONNOUSERSITE": "1"}
    return venv / "bin" / "python", env


def test_patches_check_runs_from_a_uv_venv_without_pip_then_offline(tmp_path: Path) -> None:
    wheels = [cached_wheel("sglang", "0.5.9"), cached_wheel("sglang", "0.5.23")]
    python, env = _pipless_python(tmp_path)
    probe = subprocess.run([str(python), "-c", "import pip"], capture_output=True, text=True, env=env)
    assert probe.returncode == 1 and "No module named 'pip'" in probe.stderr
    project = tmp_path / "proj"
    (project / "recipes").mkdir(parents=True)
    shutil.copytree(PATCHSETS, project / "patchsets")
    idx = LocalIndex(tmp_path / "index")
    for wheel in wheels:
        idx.add(wheel)
    cache = tmp_path / "cache"

    def check(url: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(python),
                "-m",
                "envforge",
                "patches",
                "check",
                "sm120-torch-symm-mem",
                "--against",
                "sglang==0.5.9",
                "--against",
                "sglang==0.5.23",
                "--index-url",
                url,
                "--cache",
                str(cache_dir),
                "--project",
                str(project),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    with serve(idx) as served:
        url = served.url
        first = check(url, cache)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "sglang  sm120-torch-symm-mem\n0.5.9   applied\n0.5.23  applied\n"
    assert sorted(p.name for p in (cache / "wheels").iterdir()) == sorted(w.name for w in wheels)
    # the index is gone: the same matrix from the cache
    second = check(url, cache)
    assert (second.returncode, second.stdout) == (0, first.stdout), second.stderr
    # the index is gone and nothing is cached: exit 3, the cause named
    third = check(url, tmp_path / "empty-cache")
    host = url.split("/")[2]
    assert third.returncode == EXIT_TOOL_FAILED
    assert third.stderr.splitlines()[0] == (
        f"error: cannot read the package index at {url}/sglang/: {host} refused the connection (nothing listens there)"
    )


@pytest.fixture
def demo_index(tmp_path: Path):  # type: ignore[no-untyped-def]
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "built", "demo-kernels", "1.0"))
    idx.add(make_wheel(tmp_path / "built", "demo-kernels", "1.1"), upload_time="2026-01-01T00:00:00Z")
    with serve(idx) as served:
        yield served


def test_a_listing_records_each_wheels_url_and_hash(demo_index: LocalIndex, tmp_path: Path) -> None:
    listing = list_releases("Demo_Kernels", demo_index.url)  # PEP 691 JSON: the page has an upload time
    name = "demo_kernels-1.0-py3-none-any.whl"
    digest = hashlib.sha256((demo_index.root / "files" / name).read_bytes()).hexdigest()
    base = demo_index.url.rsplit("/simple", 1)[0]
    assert listing.files[name] == IndexFile(f"{base}/files/{name}", digest, None)
    assert (listing.versions, listing.cached) == (("1.0", "1.1"), None)
    tree = fetch_release(listing, "1.0", tmp_path / "c")
    assert (tree / "demo_kernels" / "__init__.py").read_text() == "__version__ = '1.0'\n"


def test_a_wheel_whose_hash_is_not_the_pages_is_refused(demo_index: LocalIndex, tmp_path: Path) -> None:
    listing = list_releases("demo-kernels", demo_index.url)
    name = "demo_kernels-1.0-py3-none-any.whl"
    info = listing.files[name]
    bad = releases.IndexListing(
        listing.distribution, listing.index_url, listing.wheels, {**listing.files, name: IndexFile(info.url, "0" * 64)}
    )
    with pytest.raises(IndexUnreachable) as exc:
        fetch_release(bad, "1.0", tmp_path / "c")
    assert exc.value.message == (
        f"{name} from {info.url}: sha256 {info.sha256} is not the {'0' * 64} its index "
        "page gives (hash mismatch); not used"
    )
    assert exc.value.exit_code == 3
    assert not (tmp_path / "c" / "wheels" / name).exists()
    assert not (tmp_path / "c" / "wheels" / f"{name}.part").exists()


def test_a_missing_wheel_names_the_http_status(demo_index: LocalIndex, tmp_path: Path) -> None:
    listing = list_releases("demo-kernels", demo_index.url)
    name = "demo_kernels-1.1-py3-none-any.whl"
    (demo_index.root / "files" / name).unlink()
    with pytest.raises(IndexUnreachable) as exc:
        fetch_release(listing, "1.1", tmp_path / "c")
    assert exc.value.message == f"cannot download {name} from {listing.files[name].url}: HTTP 404"


def test_yanked_files_carry_their_reason_and_do_not_count(tmp_path: Path) -> None:
    page = (
        '<a data-yanked="miscompiles the SM120 guard; use 1.0" href="g-1.1-py3-none-any.whl#sha256=ab">'
        'g-1.1-py3-none-any.whl</a><a data-yanked href="g-1.2-py3-none-any.whl">g-1.2-py3-none-any.whl</a>'
        '<a href="../../f/g-1.0-py3-none-any.whl#sha256=cd">g-1.0-py3-none-any.whl</a>'
    )
    files = releases._page_files("http://h/simple/g/", "text/html", page)
    assert files == [
        (
            "g-1.1-py3-none-any.whl",
            IndexFile("http://h/simple/g/g-1.1-py3-none-any.whl", "ab", "miscompiles the SM120 guard; use 1.0"),
        ),
        ("g-1.2-py3-none-any.whl", IndexFile("http://h/simple/g/g-1.2-py3-none-any.whl", None, "")),
        ("g-1.0-py3-none-any.whl", IndexFile("http://h/f/g-1.0-py3-none-any.whl", "cd", None)),
    ]
    data = '{"files": [{"filename": "g-1.1-py3-none-any.whl", "url": "g.whl", "yanked": "bad"}]}'
    assert releases._page_files("http://h/simple/g/", "application/vnd.pypi.simple.v1+json", data) == [
        ("g-1.1-py3-none-any.whl", IndexFile("http://h/simple/g/g.whl", None, "bad"))
    ]


def test_a_wheel_for_this_interpreter_is_preferred() -> None:
    other = "sglang-0.5.23-cp399-cp399-manylinux_2_34_aarch64.whl"
    assert releases._preferred((other,)) == other
    assert releases._preferred((other, "sglang-0.5.23-py3-none-any.whl")) == "sglang-0.5.23-py3-none-any.whl"


def test_an_index_that_never_answers_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(releases, "TIMEOUT_S", 0.3)
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        with pytest.raises(IndexUnreachable) as exc:
            list_releases("demo", url)
    assert exc.value.message == (
        f"cannot read the package index at {url}/demo/: no answer from {url.split('/')[2]} within 0.3 s (timeout)"
    )


def test_a_name_that_does_not_resolve_says_dns() -> None:
    with pytest.raises(IndexUnreachable) as exc:
        list_releases("demo", "http://no-such-host.invalid/simple")
    assert exc.value.message == (
        "cannot read the package index at http://no-such-host.invalid/simple/demo/: "
        "the name no-such-host.invalid does not resolve (DNS)"
    )


@pytest.mark.parametrize("damage", ["[" * 100_000 + "]" * 100_000, '{"text": "x"}', "not json", '["a"]'])
def test_a_damaged_kept_listing_is_as_if_none_were_kept(tmp_path: Path, damage: str) -> None:
    """The listing kept for an unreachable index, damaged (nested too deeply, a key missing, not JSON,
    not an object): the index's own error, never an internal one."""
    from envforge.patching.releases import IndexUnreachable, _listing_cache, list_releases

    index = "http://127.0.0.1:9/simple"  # the discard port: refused at once
    kept = _listing_cache(tmp_path, index, "sglang")
    kept.parent.mkdir(parents=True)
    kept.write_text(damage)
    with pytest.raises(IndexUnreachable, match="127.0.0.1:9"):
        list_releases("sglang", index, tmp_path)


@pytest.mark.slow
def test_patches_check_reads_a_file_index_as_pip_and_uv_do(tmp_path: Path) -> None:
    """``--index-url file:///…/simple`` (a local PEP 503 directory, as an air-gapped GPU box keeps
    its wheels, and as pip and uv accept it): the same matrix as over HTTP, the wheels copied into
    the cache and checked against the page's sha256; a project the directory lacks is exit 2, a
    page that is a FIFO is exit 3 naming it (never opened)."""
    from envforge.cli import main

    idx = LocalIndex(tmp_path / "index")
    for version in ("0.5.9", "0.5.23"):
        idx.add(cached_wheel("sglang", version))
    url = (tmp_path / "index" / "simple").as_uri()
    project = tmp_path / "proj"
    (project / "patchsets").mkdir(parents=True)
    shutil.copy(PATCHSETS / "sm120-torch-symm-mem.toml", project / "patchsets")
    argv = ["patches", "check", "sm120-torch-symm-mem", "--against", "sglang==0.5.9", "--against", "sglang==0.5.23"]
    argv += ["--index-url", url, "--cache", str(tmp_path / "cache"), "--project", str(project)]
    assert main(argv) == 0
    assert sorted(p.name for p in (tmp_path / "cache" / "wheels").iterdir()) == [
        cached_wheel("sglang", v).name for v in ("0.5.23", "0.5.9")
    ]
    listing = list_releases("sglang", url)
    assert listing.versions == ("0.5.9", "0.5.23") and listing.cached is None
    with pytest.raises(InputError, match=r"/simple/flashinfer-python/: the index has no such project"):
        list_releases("flashinfer-python", url)
    page = tmp_path / "index" / "simple" / "sglang" / "index.html"
    page.unlink()
    os.mkfifo(page)
    with pytest.raises(IndexUnreachable, match="index.html is a FIFO, not a file"):
        list_releases("sglang", url)


def test_a_file_index_s_errors_name_the_file(tmp_path: Path) -> None:
    """A ``file:`` index whose wheel is gone, whose page is larger than 64 MiB (a sparse file), or
    not UTF-8 (read with replacement characters, as a browser would): exact words, nothing kept."""
    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "built", "demo-kernels", "1.0"))
    url = (tmp_path / "index" / "simple").as_uri()
    listing = list_releases("demo-kernels", url)
    wheel = tmp_path / "index" / "files" / "demo_kernels-1.0-py3-none-any.whl"
    wheel.unlink()
    with pytest.raises(IndexUnreachable) as gone:
        fetch_release(listing, "1.0", tmp_path / "cache")
    assert gone.value.message == f"cannot download demo_kernels-1.0-py3-none-any.whl: {wheel}: no such file"
    assert list((tmp_path / "cache" / "wheels").iterdir()) == []
    page = tmp_path / "index" / "simple" / "demo-kernels" / "index.html"
    text = page.read_text()
    page.write_bytes(b"\xff" + text.encode())
    assert list_releases("demo-kernels", url).versions == ("1.0",)
    with page.open("r+b") as fh:
        fh.truncate((64 << 20) + 1)
    with pytest.raises(IndexUnreachable) as big:
        list_releases("demo-kernels", url)
    assert big.value.message == (
        f"cannot read the package index at {url}/demo-kernels/: {page} is larger than {64 << 20} bytes"
    )
