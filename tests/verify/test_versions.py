"""Installed versions against the lock (verify/versions.py), on distributions the real installers
put in place: which of the lock's wheels the installed files came from is read from what pip and uv
write (pip: the archive hash and a percent-encoded file URL in ``direct_url.json``; uv: the URL only,
or no record and a hardlink into its cache), never from a model of them.

The wheels are B04's shape (field case: ``+cu130`` in the file name, not in METADATA), built here;
pip is the development environment's own (the oracle for what pip writes), uv is the product's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.pythons import python_for
from tests.support.verify_envs import make_wheel, sha256

from envforge.core.errors import InputError
from envforge.installed.distributions import Installed, installed_distributions
from envforge.lock.model import Lock, LockedPackage, LockedWheel
from envforge.uv.run import uv_binary
from envforge.verify.versions import check_cuda_major, check_families, check_versions, confirm_variant, uv_cache_wheel

CU130 = "pkg_x-1.0+cu130-py3-none-any.whl"  # the distribution pkg-x: a "-" in its name is "_" in the file name
CU128 = "pkg_x-1.0+cu128-py3-none-any.whl"


@dataclass(frozen=True)
class Installs:
    cu130: Path  # the wheel file
    cu128: Path
    pip: Installed  # pip install of the cu130 file: hash and %2B-encoded URL recorded
    pip_other: Installed  # pip install of the cu128 file (the other variant)
    uv_file: Installed  # uv pip install of the cu130 file: URL only, archive_info {}
    uv_index: Installed  # uv pip install from a find-links index: no direct_url.json
    uv_cache: Path


def _only(site: Path) -> Installed:
    (dist,) = installed_distributions(site).values()
    return dist


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> Installs:
    pytest.importorskip("pip", reason="pip's own direct_url.json is the oracle of what pip writes")
    root = tmp_path_factory.mktemp("versions")
    # a script too: installed outside site-packages (bin/), rewritten by the installer, never a hardlink
    files = {"pkg_x/__init__.py": b"VERSION = '1.0+cu130'\n", "pkg_x-1.0.data/scripts/pkg-x": b"#!python\nprint(1)\n"}
    cu130 = make_wheel(root / "w130", "pkg-x", "1.0+cu130", metadata_version="1.0", files=files)
    cu128 = make_wheel(root / "w128", "pkg-x", "1.0+cu128", metadata_version="1.0")
    sites = {}
    for key, wheel in (("pip", cu130), ("pip_other", cu128)):
        target = root / key
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", target, wheel],
            check=True,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
        sites[key] = _only(target)
    uv, py = uv_binary(), str(python_for("3.12"))
    cache = root / "uv-cache"
    for key, args in (("uv_file", [str(cu130)]), ("uv_index", ["--no-index", "--find-links", cu130.parent, "pkg-x"])):
        venv = root / key
        subprocess.run(
            [uv, "venv", "-q", "--python", py, venv], check=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
        )
        subprocess.run(
            [uv, "pip", "install", "-q", "--python", venv / "bin" / "python", "--no-deps", "--cache-dir", cache, *args],
            check=True,
        )
        sites[key] = _only(next(venv.glob("lib/python3*/site-packages")))
    return Installs(cu130, cu128, uv_cache=cache, **sites)


def locked(*wheels: Path, hashes: bool = True, version: str = "1.0+cu130") -> LockedPackage:
    return LockedPackage(
        "pkg-x", version, None, None, tuple(LockedWheel(w.name, None, sha256(w) if hashes else None) for w in wheels)
    )


def test_what_the_installers_record(installs: Installs) -> None:
    """The oracle's shapes, pinned: if pip or uv change what they write, this says so first."""
    pip = json.loads((installs.pip.dist_info / "direct_url.json").read_text())
    assert pip["url"].endswith("/pkg_x-1.0%2Bcu130-py3-none-any.whl")
    assert pip["archive_info"]["hashes"] == {"sha256": sha256(installs.cu130)}
    uv = json.loads((installs.uv_file.dist_info / "direct_url.json").read_text())
    assert uv["url"].endswith("/pkg_x-1.0+cu130-py3-none-any.whl")
    assert uv["archive_info"] == {}
    assert not (installs.uv_index.dist_info / "direct_url.json").exists()
    # uv's RECORD lists the script first, outside site-packages: no file to compare with uv's cache
    rows = (installs.uv_index.dist_info / "RECORD").read_text().splitlines()
    assert rows[0].startswith("../../../bin/pkg-x,sha256=")
    assert {d.version for d in (installs.pip, installs.uv_file, installs.uv_index)} == {"1.0"}


def test_pip_install_is_confirmed_by_its_recorded_hash(installs: Installs) -> None:
    digest = sha256(installs.cu130)
    want = f"the file hash in direct_url.json (sha256:{digest[:12]}...)"
    assert confirm_variant(locked(installs.cu128, installs.cu130), installs.pip, None) == want
    # pip's older key alone ("hash": "sha256=<hex>") is read the same way
    record = installs.pip.dist_info / "direct_url.json"
    saved = record.read_text()
    try:
        record.write_text(json.dumps({"url": "file:///x/y.whl", "archive_info": {"hash": f"sha256={digest}"}}))
        assert confirm_variant(locked(installs.cu130), installs.pip, None) == want
        record.write_text(json.dumps({"url": "file:///x/y.whl", "archive_info": {"hash": f"md5={digest}"}}))
        assert confirm_variant(locked(installs.cu130), installs.pip, None) is None
        # PEP 610's current key alone, upper-case hex: the same hash
        record.write_text(
            json.dumps({"url": "file:///x/y.whl", "archive_info": {"hashes": {"sha256": digest.upper()}}})
        )
        assert confirm_variant(locked(installs.cu130), installs.pip, None) == want
        # both keys and they disagree: the current one ("hashes") is the record
        both = {"hashes": {"sha256": "cd" * 32}, "hash": f"sha256={digest}"}
        record.write_text(json.dumps({"url": "file:///x/y.whl", "archive_info": both}))
        assert confirm_variant(locked(installs.cu130), installs.pip, None) is None
    finally:
        record.write_text(saved)


def test_pip_install_of_the_other_variant_is_never_confirmed(installs: Installs) -> None:
    """The cu128 file installed, the lock has the cu130 one: neither the hash nor the name is the
    lock's, so the finding stands, naming the file that was installed."""
    pkg = locked(installs.cu130)
    assert confirm_variant(pkg, installs.pip_other, installs.uv_cache) is None
    findings, notes = check_versions(Lock(Path("pylock.toml"), (pkg,), {}), {"pkg-x": installs.pip_other}, None, None)
    assert notes == []
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in findings] == [
        (
            "variant-unconfirmed",
            "pkg-x",
            f"1.0+cu130 (wheel {CU130})",
            f"1.0 in METADATA, direct_url.json names {CU128}, which is none of the lock's wheels",
            "reinstall from the lock with uv (`envforge build`) so the wheel file can be confirmed",
        )
    ]


def test_a_recorded_hash_outranks_the_locked_file_name(installs: Installs) -> None:
    """A wheel rebuilt under the locked file name: pip recorded the hash of what it installed, and
    it is not the lock's. The name alone no longer confirms; without a hash on either side it does."""
    rebuilt = LockedPackage("pkg-x", "1.0+cu130", None, None, (LockedWheel(CU130, None, "ab" * 32),))
    assert confirm_variant(rebuilt, installs.pip, None) is None
    findings, _ = check_versions(Lock(Path("pylock.toml"), (rebuilt,), {}), {"pkg-x": installs.pip}, None, None)
    digest = sha256(installs.cu130)
    assert [f.actual for f in findings] == [
        f"1.0 in METADATA, and direct_url.json records {CU130} with sha256:{digest[:12]}..., the lock's has "
        "sha256:abababababab... (another file under the locked name)"
    ]
    name = f"the wheel file name in direct_url.json ({CU130})"
    assert confirm_variant(locked(installs.cu130, hashes=False), installs.pip, None) == name  # %2B decoded
    assert confirm_variant(rebuilt, installs.uv_file, None) == name  # uv records no hash
    assert confirm_variant(locked(installs.cu130), installs.uv_file, None) == name
    assert confirm_variant(locked(installs.cu128), installs.uv_file, None) is None


def test_an_index_install_is_confirmed_by_uvs_cache(installs: Installs) -> None:
    assert uv_cache_wheel(installs.uv_index, installs.uv_cache) == CU130
    via = f"uv's cache: the installed files are hardlinks of the cached wheel {CU130}"
    lock = Lock(Path("pylock.toml"), (locked(installs.cu130),), {})
    findings, notes = check_versions(lock, {"pkg-x": installs.uv_index}, None, installs.uv_cache)
    assert (findings, notes) == (
        [],
        [f"pkg-x: METADATA says 1.0, the lock 1.0+cu130 (B04); variant confirmed by {via}"],
    )
    # the lock's file name spelled another way (case, "-" for "_", either way round) is the same wheel
    for spelling in ("PKG_X-1.0+cu130-py3-none-any.whl", "pkg-x-1.0+cu130-py3-none-any.whl"):
        spelled = LockedPackage("pkg-x", "1.0+cu130", None, None, (LockedWheel(spelling, None, None),))
        assert confirm_variant(spelled, installs.uv_index, installs.uv_cache) == via
    assert confirm_variant(locked(installs.cu128), installs.uv_index, installs.uv_cache) is None
    assert confirm_variant(locked(installs.cu130), installs.uv_index, None) is None
    findings, _ = check_versions(lock, {"pkg-x": installs.uv_index}, None, None)
    assert [f.actual for f in findings] == [
        "1.0 in METADATA, and neither direct_url.json nor uv's cache names the wheel"
    ]


def _linked_cache(installs: Installs, dest: Path, drop: str) -> Path:
    """A copy of the real uv cache whose files are hardlinks of the original's (the installed
    files stay hardlinks of its archives), less the wheel entries of one kind: ``"link"`` (the
    symlink to the archive) or ``"rev"`` (the ``.rev`` record naming the archive's id)."""
    subprocess.run(["cp", "-al", installs.uv_cache, dest], check=True)
    for entry in dest.glob("wheels-v*/*/*/pkg-x/*"):
        if (drop == "link" and entry.is_symlink()) or (drop == "rev" and entry.suffix == ".rev"):
            entry.unlink()
    return dest


def test_each_kind_of_uv_cache_entry_names_the_wheel(installs: Installs, tmp_path: Path) -> None:
    """uv writes, per cached wheel, a symlink ``<version>-<tags>`` to its unpacked archive and a
    ``<version>-<tags>.rev`` record holding the archive's id (and a ``.lock``, which names none);
    either one alone is enough."""
    kinds = {e.suffix if not e.is_symlink() else "link" for e in installs.uv_cache.glob("wheels-v*/*/*/pkg-x/*")}
    assert kinds == {"link", ".rev", ".lock"}
    for drop in ("link", "rev"):
        assert uv_cache_wheel(installs.uv_index, _linked_cache(installs, tmp_path / drop, drop)) == CU130
    # uv's older caches kept the same id in ``.http`` (an index's wheel) or ``.msgpack`` (a path's)
    for suffix in (".http", ".msgpack"):
        cache = _linked_cache(installs, tmp_path / suffix, "link")
        for rev in cache.glob("wheels-v*/*/*/pkg-x/*.rev"):
            rev.rename(rev.with_suffix(suffix))
        assert uv_cache_wheel(installs.uv_index, cache) == CU130
        for record in cache.glob(f"wheels-v*/*/*/pkg-x/*{suffix}"):
            record.rename(record.with_suffix(".json"))  # a kind uv never wrote: not read
        assert uv_cache_wheel(installs.uv_index, cache) is None


def test_uvs_cache_does_not_name_a_copy(installs: Installs, tmp_path: Path) -> None:
    """Files that are copies (another inode) of the cached archive are not its hardlinks."""
    site = tmp_path / "site"
    shutil.copytree(installs.uv_index.dist_info.parent, site)
    assert uv_cache_wheel(_only(site), installs.uv_cache) is None
    assert uv_cache_wheel(installs.uv_index, tmp_path / "empty-cache") is None
    # no installed file to compare (the RECORD lists none, or the file is gone): no wheel named
    dist = _only(site)
    (next(site.glob("pkg_x/__init__.py"))).unlink()
    assert uv_cache_wheel(dist, installs.uv_cache) is None
    (dist.dist_info / "RECORD").write_text(f"{dist.dist_info.name}/METADATA,,\n")
    assert uv_cache_wheel(dist, installs.uv_cache) is None


def test_a_damaged_record_is_an_input_error_not_evidence(installs: Installs, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(installs.pip.dist_info.parent, site)
    dist = _only(site)
    (dist.dist_info / "direct_url.json").write_text('{"url": "file:///x.whl", "archive_info": []}')
    with pytest.raises(InputError, match="archive_info is not an object"):
        confirm_variant(locked(installs.cu130), dist, None)
    # wrong-typed hash fields are no evidence (and no crash): the name is what is left
    (dist.dist_info / "direct_url.json").write_text(
        json.dumps({"url": f"file:///w/{CU130}", "archive_info": {"hashes": ["x"], "hash": 7}})
    )
    assert confirm_variant(locked(installs.cu130), dist, None) == f"the wheel file name in direct_url.json ({CU130})"
    (dist.dist_info / "direct_url.json").write_text(
        json.dumps({"url": f"file:///w/{CU130}", "archive_info": {"hashes": {"sha256": 7}}})
    )
    assert confirm_variant(locked(installs.cu130), dist, None) == f"the wheel file name in direct_url.json ({CU130})"
    # no archive_info at all (a record pip or uv would not write, but PEP 610 allows): the name
    (dist.dist_info / "direct_url.json").write_text(json.dumps({"url": f"file:///w/{CU130}"}))
    assert confirm_variant(locked(installs.cu130), dist, None) == f"the wheel file name in direct_url.json ({CU130})"


def _dist(tmp_path: Path, name: str, version: str) -> Installed:
    return Installed(name, version, tmp_path / f"{name}-{version}.dist-info")


def test_check_versions_verdicts(tmp_path: Path) -> None:
    lock = Lock(
        Path("pylock.toml"),
        (
            LockedPackage("a", "1.0", None, None, ()),  # equal
            LockedPackage("b", "1.0", None, None, ()),  # other public version
            LockedPackage("c", "2.0+cu130", None, None, ()),  # other local label
            LockedPackage("d", "2.0", None, None, ()),  # a label installed where the lock has none
            LockedPackage("e", "3.0", None, None, ()),  # not installed
            LockedPackage("f", "1.0", "sys_platform == 'win32'", None, ()),  # not for this platform
            LockedPackage("g", "not-a-version", None, None, ()),  # invalid on both sides, unequal
            LockedPackage("h", "also bad", None, None, ()),  # invalid, equal
            LockedPackage("i", None, None, None, ()),  # no version locked
            LockedPackage("j", "1.0", None, None, ()),  # 1.0 == 1.0.0 (PEP 440)
            LockedPackage("k", "1.0", None, None, ()),  # a pre-release of it installed
            LockedPackage("l", "2.0+cu130", None, None, ()),  # a post-release installed
        ),
        {},
    )
    installed = {
        n: _dist(tmp_path, n, v)
        for n, v in (
            ("a", "1.0"),
            ("b", "1.1"),
            ("c", "2.0+cu128"),
            ("d", "2.0+cu130"),
            ("g", "other-bad"),
            ("h", "also bad"),
            ("i", "9"),
            ("j", "1.0.0"),
            ("k", "1.0rc1"),
            ("l", "2.0.post1"),
            ("zz", "0.1"),
        )
    }
    relock = "rebuild the environment from its lock: `envforge build`"
    findings, notes = check_versions(lock, installed, {"sys_platform": "linux"}, None, python=Path("/e/bin/python"))
    assert notes == []
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in findings] == [
        ("version-mismatch", "b", "1.0", "1.1", relock),
        ("local-label-mismatch", "c", "2.0+cu130", "2.0+cu128", relock),
        ("local-label-mismatch", "d", "2.0", "2.0+cu130", relock),
        ("missing", "e", "e 3.0 (in the lock)", "not installed", relock),
        ("version-mismatch", "g", "not-a-version", "other-bad", relock),
        ("version-mismatch", "k", "1.0", "1.0rc1", relock),
        ("version-mismatch", "l", "2.0+cu130", "2.0.post1", relock),
        (
            "unexpected",
            "zz 0.1",
            "not installed (absent from the lock)",
            "installed but not in lock: zz 0.1",
            "remove it (`uv pip uninstall --python /e/bin/python zz`) or add it to the recipe and relock; "
            "`envforge build` installs exactly the lock",
        ),
    ]
    # the environment's markers decide, not this interpreter's: a win32 environment needs f
    findings, _ = check_versions(lock, installed, {"sys_platform": "win32"}, None)
    assert ("missing", "f") in [(f.kind, f.subject) for f in findings]
    # without the environment's markers every entry applies (f is missing), and without its
    # interpreter the uninstall command names none
    findings, _ = check_versions(lock, installed, None, None)
    assert [(f.kind, f.subject) for f in findings if f.kind in ("missing", "unexpected")] == [
        ("missing", "e"),
        ("missing", "f"),
        ("unexpected", "zz 0.1"),
    ]
    assert findings[-1].fix.startswith("remove it (`uv pip uninstall zz`) or add it")


def test_a_confirmed_variant_is_a_note(installs: Installs) -> None:
    lock = Lock(Path("pylock.toml"), (locked(installs.cu130),), {})
    findings, notes = check_versions(lock, {"pkg-x": installs.pip}, None, None)
    assert findings == []
    assert notes == [
        "pkg-x: METADATA says 1.0, the lock 1.0+cu130 (B04); variant confirmed by the file hash in "
        f"direct_url.json (sha256:{sha256(installs.cu130)[:12]}...)"
    ]


def test_families_and_cuda_majors(tmp_path: Path) -> None:
    installed = {
        n: _dist(tmp_path, n, v)
        for n, v in (
            ("flashinfer-python", "0.6.4"),
            ("flashinfer-cubin", "0.6.4+cu130"),
            ("flashinfer-jit-cache", "0.6.3+cu130"),
        )
    }
    (found,) = check_families(installed)
    assert (found.kind, found.subject, found.expected, found.actual, found.fix) == (
        "family-mismatch",
        "flashinfer family",
        "one public version (flashinfer-python 0.6.4)",
        "flashinfer-python 0.6.4, flashinfer-cubin 0.6.4+cu130, flashinfer-jit-cache 0.6.3+cu130",
        "lock every flashinfer distribution at one version (recipe [packages]) and rebuild",
    )
    del installed["flashinfer-jit-cache"]
    assert check_families(installed) == []  # a local label is not another public version
    assert check_families({"flashinfer-python": _dist(tmp_path, "flashinfer-python", "weird")}) == []
    cuda = [_dist(tmp_path, "nvidia-nccl-cu13", "2.28.3"), _dist(tmp_path, "nvidia-nccl-cu12", "2.27.3")]
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in check_cuda_major(cuda, "12.8")] == [
        (
            "cuda-major-mismatch",
            "nvidia-nccl-cu13 2.28.3",
            "CUDA 12 wheels (variant cuda 12.8)",
            "built for CUDA 13 (name suffix -cu13)",
            "pin a CUDA 12 build in the recipe (an override with a reason if an upstream pin pulls it in), relock "
            "and rebuild",
        )
    ]
    assert check_cuda_major(cuda[:1], "13.0") == []


def test_an_unconfirmed_variant_names_the_lock_s_wheels(tmp_path: Path) -> None:
    dist = _dist(tmp_path, "pkg-x", "1.0")
    two = LockedPackage(
        "pkg-x", "1.0+cu130", None, None, (LockedWheel("a.whl", None, None), LockedWheel("b.whl", None, None))
    )
    nameless = LockedPackage("pkg-x", "1.0+cu130", None, None, (LockedWheel(None, "https://x/y", None),))
    expected = [
        check_versions(Lock(Path("l"), (p,), {}), {"pkg-x": dist}, None, None)[0][0].expected for p in (two, nameless)
    ]
    assert expected == ["1.0+cu130 (wheel a.whl, b.whl)", "1.0+cu130 (wheel ?)"]
