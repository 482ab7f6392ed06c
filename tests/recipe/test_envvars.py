"""Env profile values the way their readers read them (field cases B19, B31; issue 18.5 NUL bytes).

NCCL's names and integer parsing (``strtoll(value, NULL, 0)``, NCCL src/misc/param.cc), CUDA's
names, variables read at process start. Checked at recipe load, so ``lock`` and ``build`` refuse
the recipe with file, key and line; ``env show`` and ``verify`` say it of an environment whose
profile was installed before (the real ``.pth`` hook in a real venv).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import uv

from envforge.env.profile import PTH_FILE, hook_source, pth_source, profile_problems
from envforge.recipe.envvars import NCCL_INT, NCCL_VERSION, nccl_integer, problems, startup_reader
from envforge.verify.variables import misread_findings as _misread
from tests.support.pythons import python_for

ENVFORGE = [sys.executable, "-m", "envforge"]
PYTHON312 = python_for("3.12")

# The field case (B19) and its whole kind, as a recipe.
BAD_PROFILE = """[recipe]
name = "r"
python = "3.12"

[env.pcie]
CCL_NET_GDR_LEVEL = "PHB"
NCCL_P2P_DISABLED = "1"
NCCL_BUFFSIZE = "128K"
NCCL_MAX_NCHANNELS = 2
NCCL_P2P_LEVEL = "phb"
NCCL_NTHREADS = "010"
NCCL_P2P_DISABLE = "true"
CUDA_VISIBLE_DEVICE = "0"
LD_PRELOAD = "/opt/lib/libnccl.so.2"
NCCL_SOCKET_IFNAME = "eth0\\u0000x"
NCCL_DEBUG = "info"
NCCL_IB_GDR_LEVEL = "PHB"
"""


def expected_lines(path: str) -> list[str]:
    return [
        f"  {path}:6: env.pcie.CCL_NET_GDR_LEVEL: no program reads CCL_NET_GDR_LEVEL; it looks like NCCL's "
        "NCCL_NET_GDR_LEVEL (NCCL ignores unknown names)",
        f"  {path}:7: env.pcie.NCCL_P2P_DISABLED: no NCCL release envforge knows (2.27.5, 2.30.7) reads "
        "NCCL_P2P_DISABLED (NCCL ignores unknown names without a word); did you mean NCCL_P2P_DISABLE?",
        f'  {path}:8: env.pcie.NCCL_BUFFSIZE: NCCL reads "128K" as 128 (it parses an integer with strtoll and '
        'stops at the first character that is not a digit); write the number of bytes: "131072"',
        f"  {path}:9: env.pcie.NCCL_MAX_NCHANNELS: must be a string (environment values are text): write "
        'NCCL_MAX_NCHANNELS = "2"',
        f'  {path}:10: env.pcie.NCCL_P2P_LEVEL: "phb" is not one NCCL accepts; accepted: LOC, NVL, PIX, PXB, PHB, '
        "SYS, 0, 1, 2, 3, 4, 5 (NCCL matches these exactly and reads anything else as an integer: 0, the lowest level)",
        f'  {path}:11: env.pcie.NCCL_NTHREADS: NCCL reads "010" as 8 (a leading 0 means octal); write "10" or "8"',
        f'  {path}:12: env.pcie.NCCL_P2P_DISABLE: NCCL reads "true" as 0 (it parses an integer with strtoll and '
        "stops at the first character that is not a digit); write a plain integer",
        f"  {path}:13: env.pcie.CUDA_VISIBLE_DEVICE: the CUDA driver and runtime read no variable CUDA_VISIBLE_DEVICE; "
        "did you mean CUDA_VISIBLE_DEVICES?",
        f"  {path}:14: env.pcie.LD_PRELOAD: is read by the dynamic loader (ld.so) when a process starts, before the "
        "env profile's .pth hook runs: the hook would give it to child processes only, while the process itself "
        "(the server) runs without it; set it where the process is started (its launcher or job script; for "
        "benchmark servers, [verify.smoke.servers] env)",
        f"  {path}:15: env.pcie.NCCL_SOCKET_IFNAME: contains a NUL character, which no process environment can hold "
        "(execve ends the value there); remove it",
        f"  {path}:17: env.pcie.NCCL_IB_GDR_LEVEL: NCCL 2.27.5 no longer reads NCCL_IB_GDR_LEVEL; use NCCL_NET_GDR_LEVEL",
    ]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVFORGE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [("lock", "r"), ("lock", "r", "--check"), ("build", "r")])
def test_b19_every_command_names_each_misread_variable_with_file_key_and_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(BAD_PROFILE)
    res = envforge(tmp_path, *command)
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    start = lines.index(f"error: recipe {tmp_path}/recipes/r.toml is invalid (11 problems):")
    assert lines[start + 1 : start + 12] == expected_lines(f"{tmp_path}/recipes/r.toml")
    assert "Traceback" not in res.stderr and not (tmp_path / "lockfiles").exists()


def test_the_shipped_recipes_are_valid() -> None:
    from envforge.recipe.load import load_recipe

    recipes = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.toml"))
    assert {p.name for p in recipes} >= {"kimi-k25-sm120.toml", "quickstart.toml"}
    for recipe in recipes:
        assert load_recipe(recipe).name == recipe.stem  # raises RecipeError when invalid


def test_nccl_integer_is_strtoll_base_0() -> None:
    # What C strtoll(s, NULL, 0) returns, value by value (glibc).
    libc = ctypes.CDLL(None)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    for text in (
        "128K",
        "4M",
        "131072",
        "0x20000",
        "010",
        "08",
        "true",
        "",
        " 12",
        "-3",
        "+7",
        "0x",
        "0xZ",
        "1e6",
        "12.5",
        "0b101",
        "  -0x10g",
    ):
        assert nccl_integer(text) == libc.strtoll(text.encode(), None, 0), text


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "NCCL_BUFFSIZE",
            "4M",
            'NCCL reads "4M" as 4 (it parses an integer with strtoll and stops at the first '
            'character that is not a digit); write the number of bytes: "4194304"',
        ),
        ("NCCL_BUFFSIZE", "", "is empty: NCCL ignores an empty value and keeps its default; remove the line"),
        (
            "NCCL_BUFFSIZE",
            "1e6",
            'NCCL reads "1e6" as 1 (it parses an integer with strtoll and stops at the first '
            "character that is not a digit); write a plain integer",
        ),
        ("NCCL_SHM_DISABLE", "2", 'NCCL disables only on "1"; "2" leaves it enabled: write "1" or "0"'),
        (
            "NCCL_PROTO",
            "^LL128,Simpel",
            "\"^LL128,Simpel\": NCCL knows no 'Simpel' here; accepted: ll, ll128, simple "
            "(comma-separated, '^' to exclude)",
        ),
        (
            "NCCL_ALGO",
            "allreduce:tree,ring;brodcast:ring",
            '"allreduce:tree,ring;brodcast:ring": NCCL knows no '
            "'brodcast' here; accepted: collnetchain, collnetdirect, nvls, nvlstree, pat, ring, tree (comma-separated, "
            "'^' to exclude)",
        ),
        ("NCCL_SOCKET_FAMILY", "AF_INET4", '"AF_INET4" is not one NCCL accepts; accepted: AF_INET, AF_INET6'),
        ("NCCL_BUFFSIZE", True, 'must be a string (environment values are text): write NCCL_BUFFSIZE = "true"'),
        (
            "NCCL_CUDA_MEMCPY",
            "1",
            "no NCCL release envforge knows (2.27.5, 2.30.7) reads NCCL_CUDA_MEMCPY (NCCL ignores "
            "unknown names without a word); did you mean NCCL_SHM_USE_CUDA_MEMCPY?",
        ),
        (
            "NCCL_ASYNC_ERROR_HANDLING",
            "1",
            "NCCL does not read NCCL_ASYNC_ERROR_HANDLING; PyTorch reads it under "
            "this deprecated name: write TORCH_NCCL_ASYNC_ERROR_HANDLING",
        ),
        (
            "NCL_BUFFSIZE",
            "1",
            "no program reads NCL_BUFFSIZE; it looks like NCCL's NCCL_BUFFSIZE (NCCL ignores unknown names)",
        ),
    ],
)
def test_problems_literal(name: str, value: object, message: str) -> None:
    assert problems(name, value) == [message]


@pytest.mark.parametrize(
    "value, bound",
    [
        ("99999999999999999999999", "9223372036854775807"),
        ("9223372036854775808", "9223372036854775807"),
        ("-9223372036854775809", "-9223372036854775808"),
        ("0x8000000000000000", "9223372036854775807"),
    ],
)
def test_a_value_strtoll_saturates_is_refused_with_the_reason(value: str, bound: str) -> None:
    """Field case N21: NCCL's strtoll saturates to LLONG_MAX (ERANGE): NCCL does not read the number written."""
    libc = ctypes.CDLL(None)
    libc.strtoll.restype = ctypes.c_longlong
    libc.strtoll.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    assert str(libc.strtoll(value.encode(), None, 0)) == bound  # what NCCL really reads
    assert problems("NCCL_BUFFSIZE", value) == [
        f'"{value}" is out of range of NCCL\'s strtoll (a C long long): NCCL reads {bound} (it saturates, ERANGE), '
        "not the number written; write a value between -9223372036854775808 and 9223372036854775807"
    ]
    assert problems("NCCL_BUFFSIZE", "9223372036854775807") == []


@pytest.mark.parametrize(
    "name, value",
    [
        ("NCCL_BUFFSIZE", "131072"),
        ("NCCL_BUFFSIZE", "0x20000"),
        ("NCCL_MAX_NCHANNELS", "2"),
        ("NCCL_P2P_LEVEL", "NVL"),
        ("NCCL_NET_GDR_LEVEL", "PHB"),
        ("NCCL_DEBUG", "warn"),
        ("NCCL_PROTO", "^LL128"),
        ("NCCL_ALGO", "Ring,Tree"),
        ("NCCL_SOCKET_IFNAME", "=eth0"),
        ("NCCL_P2P_DISABLE", "1"),
        ("NCCL_CUMEM_ENABLE", "-2"),
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
        ("CUDA_HOME", "/usr/local/cuda"),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("OMP_NUM_THREADS", "8"),
        ("SGLANG_ENABLE_JIT", "1"),
        ("LD_PRELOAD", "/x.so"),  # a fine value for a launcher; recipe/schema.py refuses it in a profile
    ],
)
def test_values_their_readers_take_as_written(name: str, value: str) -> None:
    assert problems(name, value) == []


def test_start_up_readers() -> None:
    assert [
        startup_reader(n)
        for n in (
            "LD_LIBRARY_PATH",
            "LD_PRELOAD",
            "LD_AUDIT",
            "GLIBC_TUNABLES",
            "MALLOC_ARENA_MAX",
            "PYTHONPATH",
            "PYTHONHASHSEED",
            "PYTHONBREAKPOINT",
            "NCCL_DEBUG",
            "CUDA_VISIBLE_DEVICES",
            "OMP_NUM_THREADS",
            "LC_ALL",
        )
    ] == [
        "the dynamic loader (ld.so)",
        "the dynamic loader (ld.so)",
        "the dynamic loader (ld.so)",
        "glibc (at process start)",
        "glibc (at process start)",
        "the Python interpreter (at start-up)",
        "the Python interpreter (at start-up)",
        None,
        None,
        None,
        None,
        "the Python interpreter (its locale and text encodings, at start-up)",
    ]


def test_nccl_list_is_pinned_to_its_version() -> None:
    assert NCCL_VERSION == "2.27.5"
    assert {"NCCL_BUFFSIZE", "NCCL_MAX_NCHANNELS", "NCCL_P2P_DISABLE", "NCCL_NVLS_ENABLE"} <= NCCL_INT
    assert "NCCL_P2P_LEVEL" not in NCCL_INT and "NCCL_ALL" not in NCCL_INT


@pytest.mark.slow
def test_every_integer_name_is_in_the_shipped_libnccl() -> None:
    """The names NCCL_INT and NCCL_STR hold are in the real libnccl.so.2 of ``nvidia-nccl-cu12``
    NCCL_VERSION (the wheel from the package index, cached outside the checkout)."""
    import re
    import zipfile

    from tests.conftest import cached_wheel

    with zipfile.ZipFile(cached_wheel("nvidia-nccl-cu12", NCCL_VERSION)) as zf:
        data = zf.read("nvidia/nccl/lib/libnccl.so.2")
    # what `strings -n 6` prints, split into words
    words = {w for run in re.findall(rb"[\x20-\x7e\t]{6,}", data) for w in run.decode().split()}
    from envforge.recipe.envvars import NCCL_STR

    assert sorted(n for n in NCCL_INT | set(NCCL_STR) if n not in words) == []


# ---------------------------------------------------------------------------------------------
# An environment whose profile was installed before: env show and verify say it


def _install_unchecked(sp: Path, env: dict[str, str]) -> None:
    """What an envforge without the checks wrote: hook module, .pth line, record."""
    (sp / "_envforge_env.py").write_text(hook_source("pcie", env))
    (sp / PTH_FILE).write_text(pth_source())
    (sp / ".envforge").mkdir(exist_ok=True)
    (sp / ".envforge/env-profile.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "profile": "pcie",
                "mode": "pth",
                "env": env,
                "files": [PTH_FILE, "_envforge_env.py"],
                "absent-before": [],
                "sitecustomize": None,
            }
        )
    )


def test_env_show_flags_a_misread_and_a_start_up_variable(tmp_path: Path) -> None:
    if not PYTHON312.exists():
        pytest.skip(f"{PYTHON312} is not installed")
    venv = tmp_path / "venv"
    subprocess.run(
        [uv.find_uv_bin(), "venv", "-q", "--python", str(PYTHON312), str(venv)],
        check=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        capture_output=True,
    )
    sp = next(venv.glob("lib/python3*/site-packages"))
    _install_unchecked(sp, {"NCCL_BUFFSIZE": "128K", "LD_LIBRARY_PATH": "/opt/nccl/lib"})
    clean = {k: v for k, v in os.environ.items() if k not in ("NCCL_BUFFSIZE", "LD_LIBRARY_PATH")}
    res = subprocess.run(
        [*ENVFORGE, "env", "show", str(venv)], cwd=tmp_path, capture_output=True, text=True, env=clean, timeout=120
    )
    assert res.returncode == 1
    assert [ln for ln in res.stderr.splitlines() if "env profile:" in ln] == [
        "warning: envforge: env profile: LD_LIBRARY_PATH: read by the dynamic loader (ld.so) when a process "
        "starts, before this hook runs: child processes get it, the process itself runs without it",
        'warning: envforge: env profile: NCCL_BUFFSIZE: NCCL reads "128K" as 128 (it parses an integer with '
        'strtoll and stops at the first character that is not a digit); write the number of bytes: "131072"',
    ]
    # The consequence itself: the process's own loader path is the caller's, its child's is the hook's.
    probe = (
        "import os, subprocess, sys; print(os.environ.get('LD_LIBRARY_PATH')); "
        "print(open('/proc/self/environ','rb').read().count(b'LD_LIBRARY_PATH=/opt/nccl/lib'))"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=clean)
    assert out.stdout.split() == ["/opt/nccl/lib", "0"]  # os.environ says so; the loader never saw it


def test_verify_findings_for_a_misread_profile() -> None:
    found = _misread({"NCCL_BUFFSIZE": "128K", "NCCL_MAX_NCHANNELS": "2", "LD_PRELOAD": "/x.so"})
    assert [(f.kind, f.subject, f.expected, f.actual, f.fix) for f in found] == [
        (
            "env-profile",
            "LD_PRELOAD",
            "LD_PRELOAD as the profile means it",
            "read by the dynamic loader (ld.so) when a process starts, before this hook runs: child processes get "
            "it, the process itself runs without it",
            "fix the recipe's [env.*] table (see docs/env-profiles.md), re-lock and rebuild",
        ),
        (
            "env-profile",
            "NCCL_BUFFSIZE",
            "NCCL_BUFFSIZE as the profile means it",
            'NCCL reads "128K" as 128 (it parses an integer with strtoll and stops at the first character that is '
            'not a digit); write the number of bytes: "131072"',
            "fix the recipe's [env.*] table (see docs/env-profiles.md), re-lock and rebuild",
        ),
    ]
    assert profile_problems({"NCCL_MAX_NCHANNELS": "2"}) == ()


SECRET_RECIPE = """[recipe]
name = "r"
python = "3.12"

[env.default]
HF_TOKEN = "hf_S3CRETvalue"
MIRROR = "https://S3CRETtok@hub.example.invalid/models"
WANDB_API_KEY = "S3CRETkey"
TOKENIZERS_PARALLELISM = "false"
HF_HUB_DISABLE_IMPLICIT_TOKEN = "1"
HF_TOKEN_PATH = "/run/secrets/hf"

[verify.smoke]
model = "m"

[[verify.smoke.servers]]
name = "a"
args = []
env = { AWS_SECRET_ACCESS_KEY = "S3CRETaws" }
"""


def _refusal(path: str, line: int, key: str, name: str, what: str) -> str:
    return (
        f"  {path}:{line}: {key}: {what}; a recipe is committed and its variables are written into the lock "
        f"and every environment and printed, so a credential never belongs here: export {name} in the shell or "
        "job that starts the server (the env profile never overrides a variable the caller set) and remove it "
        "from the recipe"
    )


@pytest.mark.parametrize("command", [("lock", "r"), ("lock", "r", "--check"), ("build", "r"), ("up", "r")])
def test_a_credential_in_a_recipe_variable_is_refused_and_never_shown(tmp_path: Path, command: tuple[str, ...]) -> None:
    """Issue 18.1's whole kind: a secret in an env-profile or server value was written into the lock
    ([tool.envforge.env]), the .pth hook and env-profile.json, and printed by `env show` and
    `lock --check` ("recipe now 'hf_...'"). Refused at recipe load, without echoing the value."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(SECRET_RECIPE)
    res = envforge(tmp_path, *command)
    assert res.returncode == 2, res.stderr
    path = f"{tmp_path}/recipes/r.toml"
    name_says = "its name says it holds a credential"
    lines = res.stderr.splitlines()
    start = lines.index(f"error: recipe {path} is invalid (4 problems):")
    assert lines[start + 1 : start + 5] == [
        _refusal(path, 6, "env.default.HF_TOKEN", "HF_TOKEN", name_says),
        _refusal(path, 7, "env.default.MIRROR", "MIRROR", "its value has a URL with credentials in it"),
        _refusal(path, 8, "env.default.WANDB_API_KEY", "WANDB_API_KEY", name_says),
        _refusal(path, 19, "verify.smoke.servers[0].env.AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", name_says),
    ]
    assert "S3CRET" not in res.stdout + res.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "r.toml"]
    assert not any(b"S3CRET" in p.read_bytes() for p in written)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TOKENIZERS_PARALLELISM", "false"),
        ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
        ("HF_TOKEN_PATH", "/run/x"),
        ("NCCL_IB_PKEY", "0"),
        ("KEYBOARD", "us"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("GIT_URL", "ssh://host/x"),
    ],
)
def test_names_that_only_look_like_credentials_pass(name: str, value: str) -> None:
    assert problems(name, value) == []


# ---------------------------------------------------------------------------------------------
# NCCL names by the release the lock installs (issue 29), and the reviewed [nccl-unknown]


def _nccl_project(root: Path, url: str, nccl: str, env: str, extra: str = "") -> Path:
    (root / "recipes").mkdir(parents=True, exist_ok=True)
    (root / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{url}"\n\n[packages]\n{nccl}\n\n'
        f"[env.default]\n{env}\n{extra}"
    )
    return root


def test_nccl_names_follow_the_nccl_release_the_lock_installs(tmp_path: Path) -> None:
    """NCCL_GIN_ENABLE is real in NCCL 2.30.x (the CUDA 13 locks' nvidia-nccl-cu13) and was refused
    against 2.27.5's list with a wrong did-you-mean; now the locked release decides, and a name no
    known release reads passes only when the recipe lists it, reviewed, in [nccl-unknown]."""
    from tests.support.localindex import LocalIndex, make_wheel, serve

    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "nvidia-nccl-cu12", "2.27.5", files={"nvidia/nccl/__init__.py": ""}))
    idx.add(make_wheel(tmp_path / "w", "nvidia-nccl-cu13", "2.30.7", files={"nvidia/nccl13/__init__.py": ""}))
    with serve(idx):
        old = _nccl_project(tmp_path / "old", idx.url, 'nvidia-nccl-cu12 = "==2.27.5"', 'NCCL_GIN_ENABLE = "1"')
        res = envforge(old, "lock", "r")
        assert res.returncode == 2, res.stderr
        assert res.stderr.splitlines()[-3:] == [
            "error: pylock.r-default.toml (recipe r, variant default) installs nvidia-nccl-cu12 2.27.5, which does "
            "not read what the env profile sets:",
            "  env.default.NCCL_GIN_ENABLE: NCCL 2.27.5 reads no variable NCCL_GIN_ENABLE (NCCL 2.30.7 reads it)",
            "  hint: remove the variable, or lock a variant whose NCCL reads it; reviewed, list it in the recipe's "
            '[nccl-unknown] with the reason (NCCL_X = "read by NCCL 2.31, release notes")',
        ]
        assert not (old / "lockfiles").exists() or not list((old / "lockfiles").iterdir())

        new = _nccl_project(tmp_path / "new", idx.url, 'nvidia-nccl-cu13 = "==2.30.7"', 'NCCL_GIN_ENABLE = "1"')
        up = envforge(new, "up", "r")
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1].startswith("verify static: clean")

        future = 'NCCL_GIN_ENABLE = "1"\nNCCL_FUTURE_KNOB = "4"'
        unknown = _nccl_project(tmp_path / "future", idx.url, 'nvidia-nccl-cu13 = "==2.30.7"', future)
        refused = envforge(unknown, "lock", "r")
        assert refused.returncode == 2
        assert refused.stderr.splitlines()[1] == (
            f"  {unknown}/recipes/r.toml:13: env.default.NCCL_FUTURE_KNOB: no NCCL release envforge knows "
            "(2.27.5, 2.30.7) reads NCCL_FUTURE_KNOB (NCCL ignores unknown names without a word); a newer NCCL's "
            "variable, reviewed: list it in the recipe's [nccl-unknown] with the reason"
        )
        reviewed = (
            '\n[nccl-unknown]\nNCCL_FUTURE_KNOB = "read by NCCL 2.31 (its release notes); checked on our H200s"\n'
        )
        _nccl_project(tmp_path / "future", idx.url, 'nvidia-nccl-cu13 = "==2.30.7"', future, reviewed)
        up = envforge(unknown, "up", "r")
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1].startswith("verify static: clean")
        lock = (unknown / "lockfiles" / "pylock.r-default.toml").read_text()
        assert (
            'nccl-unknown = ["NCCL_FUTURE_KNOB: read by NCCL 2.31 (its release notes); checked on our H200s"]' in lock
        )  # recorded: a changed reason or list makes the lock stale
