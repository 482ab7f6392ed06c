"""Real environments for verify tests and the verify benchmark (no pytest dependency).

:func:`make_env` builds a virtual environment with uv (or ``python -m venv`` + pip where uv is
absent, as on the GPU machine), installs real wheels without dependencies, applies the project's
patchsets with :mod:`envforge.patching`, installs the env profile with :mod:`envforge.env.profile`,
and writes ``.envforge/{generation.json,pylock.toml}`` as ``envforge build`` does
(docs/architecture.md). :func:`make_wheel` writes small real wheels (B04/B05/B03 cases).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tomllib
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.lock.digest import packages_digest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART_PATCHSETS = (
    "flashinfer-sm120-trtllm-comm",
    "sm120-flashinfer-allreduce-fusion",
    "sm120-torch-symm-mem",
    "kimik25-eagle3-delegation",
)
PCIE = {"ENVFORGE_PROFILE_PROBE": "1", "NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"}
TARGET = {"gpu": "RTX PRO 6000 Blackwell", "compute-capability": "12.0", "gpus": 8, "interconnect": "pcie"}


@dataclass(frozen=True)
class BuiltEnv:
    path: Path
    site_packages: Path
    python: Path
    lock: Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    metadata_version: str | None = None,
    files: Mapping[str, bytes] | None = None,
) -> Path:
    """A real pure-python wheel ``<name>-<version>-py3-none-any.whl``; METADATA says
    ``metadata_version`` (default ``version``; B04 wheels say the version without the label)."""
    dist = name.replace("-", "_")
    meta_v = metadata_version or version
    info = f"{dist}-{meta_v}.dist-info"
    content = dict(files or {f"{dist}/__init__.py": f"VERSION = {version!r}\n".encode()})
    content[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {meta_v}\n".encode()
    content[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: envforge-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = "".join(f"{k},{_record_hash(v)},{len(v)}\n" for k, v in content.items()) + f"{info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in content.items():
            zf.writestr(k, v)
        zf.writestr(f"{info}/RECORD", record)
    return path


def wheel_version(wheel: Path) -> tuple[str, str]:
    """(name, version) from a wheel file name (PEP 427)."""
    parts = wheel.name.split("-")
    return parts[0].replace("_", "-").lower(), parts[1]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def lock_text(packages: Sequence[tuple[str, str, Path | None]], envforge: Mapping[str, Any]) -> str:
    """A PEP 751 lock: ``packages`` are (name, version, wheel file or None), the name optionally
    followed by ``; <marker>``; then ``[tool.envforge]``."""
    lines = ['lock-version = "1.0"', 'created-by = "envforge-tests"', 'requires-python = ">=3.10"', ""]
    for name, version, wheel in sorted(packages):
        name, _, marker = name.partition(";")
        lines += ["[[packages]]", f"name = {json.dumps(name.strip())}", f"version = {json.dumps(version)}"]
        if marker:
            lines.append(f"marker = {json.dumps(marker.strip())}")
        if wheel is not None:
            lines += [
                "wheels = [",
                f"  {{ name = {json.dumps(wheel.name)}, path = {json.dumps(str(wheel))}, "
                f"hashes = {{ sha256 = {json.dumps(sha256(wheel))} }} }},",
                "]",
            ]
        else:  # a package needs a source (PEP 751): a wheel URL nobody fetches in these tests
            fname = f"{name.strip().replace('-', '_')}-{version}-py3-none-any.whl"
            lines += [
                "wheels = [",
                f'  {{ url = "https://files.example.invalid/{fname}", hashes = {{ sha256 = "{"0" * 64}" }} }},',
                "]",
            ]
        lines.append("")
    packages_text = "\n".join(lines) + "\n"
    digest = packages_digest(tomllib.loads(packages_text).get("packages", []))
    lines.append("[tool.envforge]")
    lines.append(f"packages-digest = {json.dumps(digest)}")  # as `envforge lock` records it
    lines += [f"{k} = {_toml_value(v)}" for k, v in envforge.items()]
    return "\n".join(lines) + "\n"


def _install(
    env: Path, wheels: Sequence[Path], uv: str | None, *, system_site: bool, python: str, extra_site: Path | None = None
) -> None:
    if uv:
        subprocess.run(
            [uv, "venv", "-q", "--python", python, *(["--system-site-packages"] if system_site else []), str(env)],
            check=True,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
        if wheels:
            subprocess.run(
                [
                    uv,
                    "pip",
                    "install",
                    "-q",
                    "--python",
                    str(env / "bin" / "python"),
                    "--no-deps",
                    *[str(w) for w in wheels],
                ],
                check=True,
            )
        return
    subprocess.run(
        [python, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system_site else []), str(env)],
        check=True,
    )
    if extra_site is not None:  # a venv made from a venv sees the base's site, not the image's: add it
        (site_packages_of(env) / "_image_site.pth").write_text(f"import site; site.addsitedir({str(extra_site)!r})\n")
    if wheels:
        subprocess.run(
            [
                str(env / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--no-compile",
                *[str(w) for w in wheels],
            ],
            check=True,
        )


def install_wheels(env: BuiltEnv, wheels: Sequence[Path], *, uv: str | None, extra: Sequence[str] = ()) -> None:
    """Install more wheels into a built env (with uv; ``extra`` arguments such as --find-links)."""
    assert uv is not None
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(env.python), "--no-deps", *extra, *[str(w) for w in wheels]],
        check=True,
    )


def site_packages_of(env: Path) -> Path:
    return next(env.glob("lib/python3*/site-packages"))


def make_env(
    root: Path,
    wheels: Sequence[Path],
    *,
    uv: str | None,
    python: str,
    name: str = "quickstart-default",
    locked: Sequence[tuple[str, str, Path | None]] | None = None,
    envforge: Mapping[str, Any] | None = None,
    patchsets: Sequence[str] = QUICKSTART_PATCHSETS,
    profile: tuple[str, Mapping[str, str]] | None = ("pcie", PCIE),
    system_site: bool = False,
    project_lock: bool = True,
    extra_site: Path | None = None,
) -> BuiltEnv:
    """Build ``root/envs/<name>`` (a project at ``root`` with the repo's recipes and patchsets)."""
    for sub in ("recipes", "patchsets"):
        if not (root / sub).exists():
            shutil.copytree(REPO / sub, root / sub)
    env = root / "envs" / name
    _install(env, wheels, uv, system_site=system_site, python=python, extra_site=extra_site)
    sp = site_packages_of(env)
    if patchsets:
        from envforge import patching

        report = patching.apply(sp, patching.load_patchsets(root / "patchsets", list(patchsets)))
        assert report.ok, report.errors
    tool: dict[str, Any] = {
        "schema": 1,
        "recipe": name.rsplit("-", 1)[0],
        "variant": name.rsplit("-", 1)[1],
        "target": TARGET,
        "patchsets": [_patchset_ref(root, p) for p in patchsets],
    }
    if profile is not None:
        from envforge.env import profile as envprofile

        envprofile.install(sp, profile[0], profile[1])
        tool.update({"env-profile": profile[0], "env": dict(profile[1])})
    tool.update(envforge or {})
    packages = locked if locked is not None else [(*wheel_version(w), w) for w in wheels]
    text = lock_text(packages, tool)
    state = sp / ".envforge"
    state.mkdir(exist_ok=True)
    (state / "pylock.toml").write_text(text)
    lock = root / "lockfiles" / f"pylock.{name}.toml"
    if project_lock:
        lock.parent.mkdir(exist_ok=True)
        lock.write_text(text)
    gen = {
        "schema": 1,
        "recipe": tool["recipe"],
        "variant": tool["variant"],
        "lock": str(lock),
        "lock-digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
        "generation": "g0001",
        "python": python,
    }
    (state / "generation.json").write_text(json.dumps(gen, indent=2) + "\n")
    return BuiltEnv(env, sp, env / "bin" / "python", lock)


def _patchset_ref(root: Path, pid: str) -> dict[str, str]:
    path = root / "patchsets" / f"{pid}.toml"
    return {"id": pid, "digest": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()}


# --- damaged state files (envforge's own, under <site-packages>/.envforge/) -------------------------

DAMAGE = ("fifo", "dev-zero", "directory", "oversized")
DAMAGE_KIND = {"fifo": "a FIFO", "dev-zero": "a character device", "directory": "a directory"}


def build_quickstart(dest: Path, timeout: float = 600) -> Path:
    """``envforge build quickstart`` in a copy of the repository's project at ``dest``; returns ``dest``.

    :raises RuntimeError: the build failed (its stderr).
    """
    import sys

    dest.mkdir(parents=True)
    for d in ("recipes", "patchsets", "lockfiles"):
        shutil.copytree(REPO / d, dest / d)
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "build", "quickstart"],
        cwd=dest,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    return dest


class damaged:
    """Context manager: ``path`` replaced by a FIFO (no writer ever), a symlink to /dev/zero, a
    directory, or a sparse file one byte over ``limit``; the original put back on exit."""

    def __init__(self, path: Path, how: str, limit: int = 64 << 20) -> None:
        self.path, self.how, self.limit = path, how, limit
        self.saved = path.with_name(path.name + ".saved-by-test")

    def __enter__(self) -> Path:
        os.replace(self.path, self.saved)
        if self.how == "fifo":
            os.mkfifo(self.path)
        elif self.how == "dev-zero":
            self.path.symlink_to("/dev/zero")
        elif self.how == "directory":
            self.path.mkdir()
        else:
            with open(self.path, "wb") as fh:
                fh.truncate(self.limit + 1)
        return self.path

    def __exit__(self, *exc: object) -> None:
        if self.path.is_dir() and not self.path.is_symlink():
            self.path.rmdir()
        else:
            self.path.unlink()
        os.replace(self.saved, self.path)


def build_tiny(dest: Path, files: Mapping[str, bytes] | None = None, timeout: float = 300) -> Path:
    """A project at ``dest`` whose ``envs/tiny-default`` is built by the real ``envforge lock`` and
    ``envforge build`` (offline, from a one-wheel wheelhouse: ``tinypkg 1.0`` with ``files``); returns
    the environment's site-packages.

    :raises RuntimeError: the lock or the build failed (its stderr).
    """
    import sys

    house = dest / "wheelhouse"
    make_wheel(house, "tinypkg", "1.0", files=files or {"tinypkg/__init__.py": b"VALUE = 1\n"})
    (dest / "recipes").mkdir(parents=True)
    (dest / "recipes" / "tiny.toml").write_text(
        '[recipe]\nname = "tiny"\npython = "3.12"\nresolution = "no-deps"\n\n[packages]\ntinypkg = "==1.0"\n'
    )
    for command in ("lock", "build"):
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "envforge",
                command,
                "tiny",
                "--offline",
                "--find-links",
                str(house),
                *(("--local-paths",) if command == "lock" else ()),
            ],
            cwd=dest,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ),
        )
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
    return site_packages_of(dest / "envs" / "tiny-default")
