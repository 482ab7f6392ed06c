"""What a variable in an env profile means to the programs that read it (data, no I/O).

A recipe's ``[env.<name>]`` profile (and a benchmark server's ``env``) sets variables that NCCL, the
CUDA driver, the dynamic loader or the Python interpreter read. Each of them fails quietly on a
wrong value: NCCL ignores a name it does not know (NCCL_P2P_DISABLED, CCL_NET_GDR_LEVEL; field case
B19) and reads integers with ``strtoll(value, NULL, 0)`` (NCCL ``src/misc/param.cc``,
``ncclLoadParam``), which stops at the first character that is not a digit: ``"128K"`` is 128
bytes, ``"010"`` is 8 (octal), ``"true"`` is 0. Measured with NCCL 2.28.9 on two H200s, a
``NCCL_BUFFSIZE`` of ``"128K"`` was logged as "set by environment to 128" and the next
all-reduce hung. :func:`problems` says all of this at recipe load, so ``lock``, ``build``,
``env show`` and ``verify`` refuse the recipe alike.

Variables read when a process starts (the dynamic loader's ``LD_*``, glibc's tunables, the
interpreter's ``PYTHON*``) cannot be set by the profile's ``.pth`` hook for the process it runs in:
the hook runs after they were read, so only child processes would see them (field case B31).
:func:`startup_reader` names the reader; recipe/schema.py refuses them in a profile.

Sources, kept with the data:

- NCCL names: one table per NCCL release, as data (:mod:`envforge.recipe.ncclnames`). At recipe
  load a name is refused when no release there reads it (the lock, and so the release, is not known
  yet); :func:`release_problems` then holds the profile to the release the lock installs. A name
  a release newer than the tables reads goes in the recipe's ``[nccl-unknown]`` table, with the
  reason (reviewed: ``reviewed`` below). The kinds and accepted values are NCCL |NCCL_VERSION|'s,
  from NCCL's environment-variable
  documentation (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html); kinds and accepted
  values from that page (``NCCL_P2P_LEVEL``/``NCCL_NET_GDR_LEVEL`` path types, ``NCCL_DEBUG``
  levels, ``NCCL_PROTO``/``NCCL_ALGO`` names). A name only NCCL's documentation of older releases
  lists is in :data:`NCCL_REMOVED`.
- CUDA names: the CUDA C++ Programming Guide, "CUDA Environment Variables", plus the toolkit
  locations build tools read (``CUDA_HOME``, ``CUDA_PATH``).
- Start-up readers: ld.so(8) ("LD_*" environment), glibc tunables (``GLIBC_TUNABLES``, the
  ``MALLOC_*`` aliases) and the Python command-line documentation ("Environment variables").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable
from typing import Final

from envforge.core.urls import SCHEME, secret_arg_name
from envforge.recipe.ncclnames import RELEASES

__all__ = [
    "NCCL_ANY",
    "NCCL_INT",
    "NCCL_REMOVED",
    "NCCL_STR",
    "NCCL_VERSION",
    "CUDA_NAMES",
    "TORCH_OLD_NAMES",
    "nccl_integer",
    "problems",
    "release_problems",
    "secret_problem",
    "startup_reader",
]

NCCL_VERSION: Final = "2.27.5"

# Read as integers (NCCL_PARAM / ncclLoadParam, or getenv + strtol): base 0, the first non-digit ends it.
NCCL_INT: Final[frozenset[str]] = frozenset(
    "NCCL_" + n
    for n in """
ALLOC_P2P_NET_LL_BUFFERS BUFFSIZE CGA_CLUSTER_SIZE CHECK_POINTERS CHUNK_SIZE COLLNET_ENABLE
COLLNET_NODE_THRESHOLD COMM_BLOCKING COMM_SHRINK_SHARE_RESOURCES COMM_SPLIT_SHARE_RESOURCES
CONNECT_ROUND_MAX_PEERS CREATE_THREAD_CONTEXT CROSS_NIC CUMEM_ENABLE CUMEM_HOST_ENABLE DMABUF_ENABLE
GDRCOPY_ENABLE GDRCOPY_FIFO_ENABLE GDRCOPY_FLUSH_ENABLE GDRCOPY_SYNC_ENABLE GDR_FLUSH_DISABLE
GRAPH_DUMP_FILE_RANK GRAPH_HELPER_DISABLE GRAPH_MIXING_SUPPORT GRAPH_REGISTER GROUP_CUDA_STREAM
IB_ADAPTIVE_ROUTING IB_AR_THRESHOLD IB_DATA_DIRECT IB_DISABLE IB_ECE_ENABLE IB_FIFO_TC IB_GID_INDEX
IB_MERGE_NICS IB_MERGE_VFS IB_MQP_RETRY_ALL IB_MQP_RETRY_CNT IB_MQP_RETRY_SLEEP_MSEC
IB_PCI_RELAXED_ORDERING IB_PKEY IB_QPS_PER_CONNECTION IB_RETRY_CNT IB_RETURN_ASYNC_EVENTS
IB_ROCE_VERSION_NUM IB_ROUTABLE_FLID_GID_INDEX IB_SL IB_SPLIT_DATA_ON_QPS IB_TC IB_TIMEOUT
IB_USE_INLINE IB_WARN_RAIL_LOCAL IGNORE_CPU_AFFINITY IGNORE_DISABLED_P2P L1_SHARED_MEMORY_CARVEOUT
LAUNCH_ORDER_IMPLICIT LAUNCH_RACE_FATAL LEGACY_CUDA_REGISTER LL128_BUFFSIZE LL128_C2C LL128_NTHREADS
LL_BUFFSIZE LOCAL_REGISTER MAX_CTAS MAX_NCHANNELS MAX_NRINGS MAX_P2P_NCHANNELS MEM_SYNC_DOMAIN
MIN_CTAS MIN_NCHANNELS MIN_NRINGS MIN_P2P_NCHANNELS MNNVL_CLIQUE_ID MNNVL_ENABLE
MNNVL_SCATTER_NETS_ENABLE NCHANNELS_PER_NET_PEER NET_DISABLE_INTRA NET_FORCE_FLUSH NET_GDR_C2C
NET_GDR_READ NET_OPTIONAL_RECV_COMPLETION NET_OVERHEAD NET_SHARED_BUFFERS NET_SHARED_COMMS
NSOCKS_PERTHREAD NTHREADS NVB_DISABLE NVB_PRECONNECT NVLINK_UTIL_CENTRIC_SCHED_ENABLE
NVLSTREE_MAX_CHUNKSIZE NVLS_CHUNKSIZE NVLS_ENABLE NVLS_NCHANNELS OOB_NET_ENABLE P2P_DIRECT_DISABLE
P2P_DISABLE P2P_LL_THRESHOLD P2P_NET_CHUNKSIZE P2P_NVL_CHUNKSIZE P2P_PCI_CHUNKSIZE P2P_PXN_LEVEL
P2P_READ_ENABLE P2P_USE_CUDA_MEMCPY PAT_ENABLE PROGRESS_APPENDOP_FREQ PROXY_APPEND_BATCH_SIZE
PROXY_DUMP_SIGNAL PXN_C2C PXN_DISABLE RAS_ENABLE RAS_TIMEOUT_FACTOR REPORT_CONNECT_PROGRESS
RUNTIME_CONNECT SET_STACK_SIZE SET_THREAD_NAME SHM_DISABLE SHM_LOCALITY SHM_MEMCPY_MODE
SHM_USE_CUDA_MEMCPY SOCKET_INLINE SOCKET_MIN_TASKSIZE SOCKET_NTHREADS SOCKET_RCVBUF
SOCKET_RETRY_CNT SOCKET_RETRY_SLEEP_MSEC SOCKET_SNDBUF SYM_CTAS TOPO_DUMP_FILE_RANK
UID_STAGGER_RATE UID_STAGGER_THRESHOLD UNPACK_DOUBLE_NCHANNELS WARN_ENABLE_DEBUG_INFO WIN_ENABLE
WIN_STRIDE WORK_ARGS_BYTES WORK_FIFO_BYTES
""".split()
)

# Read as text. An entry with choices lists what NCCL matches (exactly, unless noted).
_PATH_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5")
NCCL_STR: Final[dict[str, tuple[str, ...] | None]] = {
    "NCCL_P2P_LEVEL": _PATH_LEVELS,
    "NCCL_NET_GDR_LEVEL": _PATH_LEVELS,
    "NCCL_NET_MERGE_LEVEL": _PATH_LEVELS,
    "NCCL_DEBUG": ("VERSION", "WARN", "INFO", "ABORT", "TRACE"),
    "NCCL_LAUNCH_MODE": ("PARALLEL", "GROUP"),
    "NCCL_SOCKET_FAMILY": ("AF_INET", "AF_INET6"),
    "NCCL_IB_ADDR_FAMILY": ("AF_INET", "AF_INET6"),
    **{
        f"NCCL_{n}": None
        for n in """ALGO PROTO COMM_ID CONF_FILE CTA_POLICY DEBUG_FILE DEBUG_SUBSYS
        DEBUG_TIMESTAMP_FORMAT DEBUG_TIMESTAMP_LEVELS GRAPH_DUMP_FILE GRAPH_FILE HOSTID IB_ADDR_RANGE
        IB_HCA IPC_COLLECTIVE IPC_SENDRECV MNNVL_UUID NET NET_DEVICE_HOST NET_DEVICE_UNPACK
        NET_FORCE_MERGE NET_PLUGIN NET_PLUGIN_REF_COUNT OOB_NET_IFNAME PROFILER_PLUGIN RAS_ADDR
        SOCKET_IFNAME SYM_KERNEL THREAD_THRESHOLDS TOPO_DUMP_FILE TOPO_FILE TUNER_PLUGIN""".split()
    },
}
_CASE_INSENSITIVE = frozenset({"NCCL_DEBUG", "NCCL_LAUNCH_MODE"})
# Lists of names (comma-separated, '^' excludes; NCCL_ALGO/PROTO also take "coll:names;coll:names").
_LISTS: Final[dict[str, frozenset[str]]] = {
    "NCCL_PROTO": frozenset({"ll", "ll128", "simple"}),
    "NCCL_ALGO": frozenset({"tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"}),
    "NCCL_DEBUG_SUBSYS": frozenset(
        {
            "init",
            "coll",
            "p2p",
            "shm",
            "net",
            "graph",
            "tuning",
            "env",
            "alloc",
            "call",
            "proxy",
            "nvls",
            "bootstrap",
            "reg",
            "profile",
            "ras",
            "all",
        }
    ),
}
_COLLECTIVES = frozenset(
    {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "sendrecv", "send", "recv", "alltoall"}
)
# Only 1 disables these (ncclGetLevel: `if (disable == 1)`), any other integer leaves them enabled.
_ONLY_ONE_DISABLES = frozenset({"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"})
# Names older NCCL documentation lists that NCCL |NCCL_VERSION| no longer reads -> the replacement.
NCCL_REMOVED: Final[dict[str, str | None]] = {
    "NCCL_IB_GDR_LEVEL": "NCCL_NET_GDR_LEVEL",
    "NCCL_IB_CUDA_SUPPORT": "NCCL_NET_GDR_LEVEL",
    "NCCL_RINGS": None,
    "NCCL_LL_THRESHOLD": "NCCL_PROTO",
    "NCCL_TREE_THRESHOLD": "NCCL_ALGO",
    "NCCL_SINGLE_RING_THRESHOLD": None,
    "NCCL_CHECKS_DISABLE": None,
    "NCCL_LL128_THRESHOLD": "NCCL_PROTO",
}
NCCL_NAMES: Final[frozenset[str]] = NCCL_INT | frozenset(NCCL_STR)
#: Every name some NCCL release of :data:`envforge.recipe.ncclnames.RELEASES` reads.
NCCL_ANY: Final[frozenset[str]] = NCCL_NAMES.union(*RELEASES.values())
_KNOWN_RELEASES = ", ".join(RELEASES)
# PyTorch's ProcessGroupNCCL still reads these under their old names (with a deprecation warning);
# NCCL itself does not (torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp: TORCH_NCCL_* first).
TORCH_OLD_NAMES: Final[dict[str, str]] = {
    f"NCCL_{n}": f"TORCH_NCCL_{n}"
    for n in (
        "ASYNC_ERROR_HANDLING",
        "BLOCKING_WAIT",
        "DESYNC_DEBUG",
        "ENABLE_TIMING",
        "ENABLE_MONITORING",
        "HEARTBEAT_TIMEOUT_SEC",
        "DUMP_ON_TIMEOUT",
        "TRACE_BUFFER_SIZE",
        "AVOID_RECORD_STREAMS",
    )
}

CUDA_NAMES: Final[frozenset[str]] = frozenset(
    "CUDA_" + n
    for n in """
VISIBLE_DEVICES DEVICE_ORDER MANAGED_FORCE_DEVICE_ALLOC CACHE_DISABLE CACHE_PATH CACHE_MAXSIZE
FORCE_PTX_JIT DISABLE_PTX_JIT FORCE_JIT DISABLE_JIT LAUNCH_BLOCKING DEVICE_MAX_CONNECTIONS
DEVICE_MAX_COPY_CONNECTIONS AUTO_BOOST SCALE_LAUNCH_QUEUES GRAPHS_USE_NODE_PRIORITY
DEVICE_WAITS_ON_EXCEPTION ENABLE_COREDUMP_ON_EXCEPTION ENABLE_CPU_COREDUMP_ON_EXCEPTION
ENABLE_USER_TRIGGERED_COREDUMP ENABLE_LIGHTWEIGHT_COREDUMP COREDUMP_FILE COREDUMP_PIPE
COREDUMP_GENERATION_FLAGS COREDUMP_SHOW_PROGRESS MODULE_LOADING MODULE_DATA_LOADING
MPS_PIPE_DIRECTORY MPS_LOG_DIRECTORY MPS_ACTIVE_THREAD_PERCENTAGE MPS_PINNED_DEVICE_MEM_LIMIT
MPS_ENABLE_PER_CTX_DEVICE_MULTIPROCESSOR_PARTITIONING MPS_CLIENT_PRIORITY LOG_FILE INJECTION64_PATH
HOME PATH ROOT TOOLKIT_ROOT_DIR
""".split()
)

# Read once when a process starts, before any .pth hook runs (B31).
_LOADER = "the dynamic loader (ld.so)"
_PYTHON_LAZY = frozenset({"PYTHONBREAKPOINT", "PYTHONASYNCIODEBUG"})
_GLIBC = frozenset(
    {
        "GLIBC_TUNABLES",
        "MALLOC_ARENA_MAX",
        "MALLOC_ARENA_TEST",
        "MALLOC_CHECK_",
        "MALLOC_MMAP_MAX_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_PERTURB_",
        "MALLOC_TOP_PAD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_TCACHE_MAX_",
    }
)

_STRICT_INT = re.compile(r"-?(0|[1-9][0-9]*|0[xX][0-9a-fA-F]+)")
_SIZED = re.compile(r"\s*(\d+)\s*([kKmMgG])[iI]?[bB]?\s*")


def startup_reader(name: str) -> str | None:
    """Who reads ``name`` when a process starts (so a ``.pth`` hook sets it too late), or None."""
    if name.startswith("LD_"):
        return _LOADER
    if name in _GLIBC:
        return "glibc (at process start)"
    if name.startswith("PYTHON") and name not in _PYTHON_LAZY:
        return "the Python interpreter (at start-up)"
    if name in ("LANG", "LC_ALL", "LC_CTYPE"):
        return "the Python interpreter (its locale and text encodings, at start-up)"
    return None


def nccl_integer(value: str) -> int:
    """The integer NCCL reads from ``value``: C ``strtoll(value, NULL, 0)`` (leading blanks and a
    sign allowed, ``0x`` hexadecimal, a leading ``0`` octal, digits up to the first other
    character; no digits gives 0)."""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)(.*)", value, re.DOTALL)
    assert m is not None
    sign, rest = m.groups()
    if rest[:2].lower() == "0x" and rest[2:3].lower() in set("0123456789abcdef") and rest[2:3]:
        base, rest = 16, rest[2:]
    else:
        base = 8 if rest.startswith("0") else 10
    digits = "0123456789abcdef"[:base]
    run = ""
    for ch in rest.lower():
        if ch not in digits:
            break
        run += ch
    number = int(run, base) if run else 0
    return -number if sign == "-" else number


#: C ``long long`` bounds: ``strtoll`` saturates past them (``LLONG_MAX`` / ``LLONG_MIN``, errno ERANGE).
_LLONG_MAX = 2**63 - 1
_LLONG_MIN = -(2**63)


def _integer_problem(name: str, value: str) -> str | None:
    if value == "":
        return "is empty: NCCL ignores an empty value and keeps its default; remove the line"
    if not _LLONG_MIN <= (read := nccl_integer(value)) <= _LLONG_MAX:  # field case N21
        bound = _LLONG_MAX if read > 0 else _LLONG_MIN
        return (
            f'"{value}" is out of range of NCCL\'s strtoll (a C long long): NCCL reads {bound} (it saturates, '
            "ERANGE), not the number written; write a value between "
            f"{_LLONG_MIN} and {_LLONG_MAX}"
        )
    if not _STRICT_INT.fullmatch(value):
        read = nccl_integer(value)
        msg = (
            f'NCCL reads "{value}" as {read} (it parses an integer with strtoll and stops at the first '
            "character that is not a digit)"
        )
        if m := _SIZED.fullmatch(value):
            want = int(m.group(1)) * 1024 ** "kmg".index(m.group(2).lower()) * 1024
            msg += f'; write the number of bytes: "{want}"'
        elif re.fullmatch(r"-?0[0-7]+", value):
            msg = f'NCCL reads "{value}" as {read} (a leading 0 means octal); write "{int(value, 10)}" or "{read}"'
        else:
            msg += "; write a plain integer"
        return msg
    if name in _ONLY_ONE_DISABLES and value not in ("0", "1"):
        return f'NCCL disables only on "1"; "{value}" leaves it enabled: write "1" or "0"'
    return None


def _list_problem(name: str, value: str) -> str | None:
    known = _LISTS[name]
    tokens = [t.strip().lstrip("^").strip() for t in re.split(r"[,;]", value)]
    bad = []
    for t in tokens:
        coll, _, names = t.rpartition(":")
        if coll and coll.strip().lower() not in _COLLECTIVES:
            bad.append(coll.strip())
        bad += [n for n in [names.strip().lstrip("^")] if n and n.lower() not in known]
    if bad:
        return (
            f'"{value}": NCCL knows no {", ".join(repr(b) for b in bad)} here; accepted: '
            f"{', '.join(sorted(known))} (comma-separated, '^' to exclude)"
        )
    return None


def _did_you_mean(name: str, known: frozenset[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else ""


def _name_problem(name: str, reviewed: Collection[str] = ()) -> str | None:
    if name.startswith("NCCL_") and name in reviewed:
        return None
    if name.startswith("NCCL_"):
        if name in TORCH_OLD_NAMES:
            return (
                f"NCCL does not read {name}; PyTorch reads it under this deprecated name: write {TORCH_OLD_NAMES[name]}"
            )
        if name in NCCL_REMOVED:
            new = NCCL_REMOVED[name]
            return f"NCCL {NCCL_VERSION} no longer reads {name}" + (f"; use {new}" if new else "; remove it")
        if name not in NCCL_ANY:
            return (
                f"no NCCL release envforge knows ({_KNOWN_RELEASES}) reads {name} (NCCL ignores unknown names "
                f"without a word)"
                + (
                    _did_you_mean(name, NCCL_ANY)
                    or "; a newer NCCL's variable, reviewed: list it in the recipe's [nccl-unknown] with the reason"
                )
            )
        return None
    if name.startswith("CUDA_"):
        if name not in CUDA_NAMES:
            return f"the CUDA driver and runtime read no variable {name}{_did_you_mean(name, CUDA_NAMES)}"
        return None
    if not name.startswith(("TORCH_", "NCCL")):
        close = difflib.get_close_matches(name, sorted(NCCL_ANY), n=1, cutoff=0.9)
        if close:
            return f"no program reads {name}; it looks like NCCL's {close[0]} (NCCL ignores unknown names)"
    return None


# Values that are switches, not secrets (a credential-looking name is judged by
# :func:`envforge.core.urls.secret_arg_name`, the one rule bench's command lines use too).
_SWITCH = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off"})
_URL_USERINFO = re.compile(SCHEME + r"[^/@\s]+@")  # linear in the value (envforge.core.urls)


def secret_problem(name: str, value: str) -> str | None:
    """Why ``name = value`` must not be in a recipe, or ``None``: the value is a credential.

    A recipe is committed, and its env profiles are copied into the lock (``[tool.envforge.env]``),
    into every environment (the ``.pth`` hook) and printed by ``env show`` and ``lock --check``
    (issue 18: no secret in any written file or output). Refused: a name that says it holds a
    credential (:func:`envforge.core.urls.secret_arg_name`: not a path; unless the value is an on/off switch) and
    any value with a URL carrying userinfo (``https://TOKEN@host``, ``https://user:pw@host``).
    The message never repeats the value.
    """
    secret_name = secret_arg_name(name) and value.strip().lower() not in _SWITCH
    if not secret_name and not _URL_USERINFO.search(value):
        return None
    what = "its name says it holds a credential" if secret_name else "its value has a URL with credentials in it"
    return (
        f"{what}; a recipe is committed and its variables are written into the lock and every environment "
        f"and printed, so a credential never belongs here: export {name} in the shell or job that starts "
        "the server (the env profile never overrides a variable the caller set) and remove it from the recipe"
    )


def problems(name: str, value: object, reviewed: Collection[str] = ()) -> list[str]:
    """What is wrong with setting ``name`` to ``value`` for NCCL, CUDA and the process; empty: fine.

    Checks the name (NCCL and CUDA names against the lists above, with a did-you-mean; near
    misses of NCCL names without the prefix), the value's type (a string), NUL characters (no
    process environment can hold one), and for NCCL variables the value as NCCL parses it.
    Start-up readers (:func:`startup_reader`) are not judged here: that depends on who sets them.
    ``reviewed``: the recipe's ``[nccl-unknown]`` names, whose name is not judged (their value is
    then not judged either: envforge does not know how NCCL reads it).
    """
    if not isinstance(value, str):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        return [f'must be a string (environment values are text): write {name} = "{shown}"']
    if "\0" in value:
        return [
            "contains a NUL character, which no process environment can hold (execve ends the value there); remove it"
        ]
    if (secret := secret_problem(name, value)) is not None:
        return [secret]
    found = [p for p in [_name_problem(name, reviewed)] if p]
    if found or not name.startswith("NCCL_") or name in reviewed:
        return found
    if name in NCCL_INT:
        return [p for p in [_integer_problem(name, value)] if p]
    if name in _LISTS:
        return [p for p in [_list_problem(name, value)] if p]
    choices = NCCL_STR.get(name)
    if choices is not None:
        v = value.upper() if name in _CASE_INSENSITIVE else value
        if v not in choices:
            return [
                f'"{value}" is not one NCCL accepts; accepted: {", ".join(choices)}'
                + (
                    " (NCCL matches these exactly and reads anything else as an integer: 0, the lowest level)"
                    if choices is _PATH_LEVELS
                    else ""
                )
            ]
    return []


def release_problems(names: Iterable[str], version: str, reviewed: Collection[str] = ()) -> list[str]:
    """``"NAME: why"`` for each ``NCCL_*`` name of ``names`` that NCCL ``version`` (the release a
    lock installs, e.g. ``"2.27.5"`` of ``nvidia-nccl-cu12``) does not read, by its table in
    :data:`envforge.recipe.ncclnames.RELEASES`. A release without a table is not judged (a name
    may be new in it); ``reviewed`` names (the recipe's ``[nccl-unknown]``) and names
    :func:`problems` judges already (unknown to every release) are skipped. No did-you-mean: the
    name is real, in another release."""
    table = RELEASES.get(version.split("+", 1)[0])
    if table is None:
        return []
    out = []
    for name in sorted(set(names)):
        if not name.startswith("NCCL_") or name in reviewed or name not in NCCL_ANY or name in table:
            continue
        others = [r for r in RELEASES if name in RELEASES[r]]
        out.append(
            f"{name}: NCCL {version} reads no variable {name} (NCCL {', '.join(others)} "
            f"{'reads' if len(others) == 1 else 'read'} it)"
        )
    return out
