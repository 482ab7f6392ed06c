"""The NCCL name tables against their oracle: the ``libnccl.so.2`` the locks install.

NCCL reads a variable through ``NCCL_PARAM(name, "ENV", default)`` / ``ncclGetEnv("NCCL_...")``,
which leave each name as one NUL-terminated literal in the shared library. The test reads the real
``nvidia-nccl-cu13`` wheel from the package index (cached outside the checkout) and asserts that
the table of its release holds exactly the names the library holds, less the enum constants and
``NCCL_DEBUG_SUBSYS`` subsystem names the module's docstring lists. A new NCCL release whose
names change fails here until its table is added.
"""

from __future__ import annotations

import re
import zipfile

import pytest

from envforge.recipe.envvars import NCCL_ANY
from envforge.recipe.ncclnames import RELEASES
from tests.conftest import cached_wheel

# What `strings -n 6 libnccl.so.2 | grep -oE '^NCCL_[A-Z0-9_]+$'` prints: a whole printable run.
_NAME = re.compile(rb"(?<![\x20-\x7e\t])(NCCL_[A-Z0-9_]+)(?![\x20-\x7e\t])")
# Enum constants and log subsystems that share the prefix (the ncclnames docstring's list).
_ENUM_PREFIXES = (
    "NCCL_PARAM_TYPE_",
    "NCCL_PARAM_FLAG_",
    "NCCL_LOG_",
    "NCCL_GIN_TYPE_",
    "NCCL_GIN_CONNECTION_",
    "NCCL_NET_DEVICE_GIN_",
)
_NOT_VARIABLES = frozenset(
    {
        "NCCL_NET_MERGE_POLICY_ALL",
        "NCCL_NET_MERGE_POLICY_RAIL",
        "NCCL_SIGNAL_NONE",
        # NCCL_DEBUG_SUBSYS subsystems (NCCL_NET is also a variable, and stays).
        "NCCL_INIT",
        "NCCL_COLL",
        "NCCL_P2P",
        "NCCL_SHM",
        "NCCL_GRAPH",
        "NCCL_TUNING",
        "NCCL_ENV",
        "NCCL_ALLOC",
        "NCCL_CALL",
        "NCCL_PROXY",
        "NCCL_NVLS",
        "NCCL_BOOTSTRAP",
        "NCCL_REG",
        "NCCL_PROFILE",
        "NCCL_RAS",
        "NCCL_ALL",
    }
)


def _library_names(distribution: str, version: str) -> frozenset[str]:
    with zipfile.ZipFile(cached_wheel(distribution, version)) as zf:
        data = zf.read("nvidia/nccl/lib/libnccl.so.2")
    return frozenset(m.group(1).decode() for m in _NAME.finditer(data))


@pytest.mark.slow
def test_the_2_30_7_table_is_what_the_cu13_wheels_libnccl_reads() -> None:
    found = _library_names("nvidia-nccl-cu13", "2.30.7")
    variables = {n for n in found if not n.startswith(_ENUM_PREFIXES)} - _NOT_VARIABLES
    assert sorted(variables - RELEASES["2.30.7"]) == []
    assert sorted(RELEASES["2.30.7"] - variables) == []
    # The filter removes only what the library holds: no entry of it is made up.
    assert _NOT_VARIABLES <= found
    assert len(RELEASES["2.30.7"]) == 258


def test_the_tables_pin_their_releases_and_the_names_that_came_and_went() -> None:
    assert list(RELEASES) == ["2.27.5", "2.30.7"]
    assert "NCCL_GIN_ENABLE" in RELEASES["2.30.7"] and "NCCL_GIN_ENABLE" not in RELEASES["2.27.5"]
    gone = {"NCCL_CREATE_THREAD_CONTEXT", "NCCL_SHM_MEMCPY_MODE", "NCCL_SHM_USE_CUDA_MEMCPY"}
    assert gone <= RELEASES["2.27.5"] and not gone & RELEASES["2.30.7"]
    assert RELEASES["2.27.5"] | RELEASES["2.30.7"] <= NCCL_ANY
