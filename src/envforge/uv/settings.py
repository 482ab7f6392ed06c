"""uv's environment variables, sorted by what envforge does with each one (data, no I/O).

uv reads its settings from ``UV_*`` variables even under ``--no-config`` (uv issue 15012, field
case B18): ``UV_RESOLUTION=lowest UV_EXCLUDE_NEWER=...`` exported in a shell gives a lock of
years-old pins that records nothing. envforge therefore starts uv with an environment it builds
itself (:func:`envforge.uv.run.uv_environment`):

``refused``
    Changes what uv resolves. A resolving uv call (``uv pip compile``) with one of these set in
    the caller's environment is refused (exit 2), each variable named with the recipe key that
    says the same thing. Never passed to uv.
``dropped``
    Changes what uv installs or how, or belongs to uv commands envforge never runs. Never passed
    to uv; the lock alone says what is installed.
``passed``
    Transport, authentication, cache and output: where uv downloads from and how, never what it
    picks. Passed through unchanged.

``UV_LINK_MODE`` is dropped from uv's environment but not ignored: ``envforge build`` and ``up``
read it as the default of their ``--link-mode`` (passed to ``uv pip sync`` and recorded in the
generation), so the choice is envforge's and written down.

Every other ``UV_*`` variable (one this list does not know, for example from a newer uv) is
dropped. ``UV_INDEX_<NAME>_USERNAME`` / ``UV_INDEX_<NAME>_PASSWORD`` (the credentials of a named
index, the way uv takes them) are passed. Outside uv's namespace, ``PIP_*`` variables and
``PYTHONPATH`` are dropped (they steer pip and the build backends uv may start, never envforge's
lock).

Source: uv's ``crates/uv-static/src/env_vars.rs`` (the file uv generates its "Environment
variables" reference page from, docs.astral.sh/uv/reference/environment/), checked against uv
|UV_VERSION| as installed with envforge.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DROPPED", "PASSED", "REFUSED", "UV_VERSION", "classify"]

UV_VERSION: Final = "0.13.9"

# name -> how to say the same thing in the recipe (or on envforge's command line).
_INDEXES = 'name the index in the recipe: [indexes] pypi = "URL" replaces the default index'
_EXTRA = (
    'add the index to the recipe and route packages to it: [indexes] NAME = "URL" and '
    'PKG = { version = "...", index = "NAME" }'
)
_SOURCE = "envforge installs wheels only; a package built from source needs the recipe's [build-from-source] opt-in"
_PYTHON = "the recipe's [recipe] python (and `envforge build --python` for the interpreter)"
_TORCH = "route torch to its CUDA index in the recipe ([variant.NAME.indexes] and packages.torch.index)"
REFUSED: Final[dict[str, str]] = {
    "UV_RESOLUTION": 'pin the versions you want in [packages] (e.g. requests = "==2.20.0"); '
    "envforge resolves the highest versions the recipe allows",
    "UV_PRERELEASE": 'write a pre-release specifier in [packages] (e.g. "==2.0.0rc1"; PEP 440 allows '
    "pre-releases a specifier names)",
    "UV_FORK_STRATEGY": "envforge locks one platform per variant; there is nothing to fork",
    "UV_EXCLUDE_NEWER": '[recipe] exclude-newer = "2024-01-01T00:00:00Z" (recorded in the lock)',
    "UV_EXCLUDE_NEWER_PACKAGE": '[recipe] exclude-newer = "..." (recorded in the lock)',
    "UV_EXCLUDE": "remove the package from the recipe",
    "UV_INDEX_URL": _INDEXES,
    "UV_DEFAULT_INDEX": _INDEXES,
    "UV_EXTRA_INDEX_URL": _EXTRA,
    "UV_INDEX": _EXTRA,
    "UV_INDEX_STRATEGY": "envforge routes each package to one index (explicit indexes): route it in the recipe",
    "UV_FIND_LINKS": "`envforge lock --offline --find-links DIR`",
    "UV_NO_INDEX": "`envforge lock --offline --find-links DIR`",
    "UV_OFFLINE": "`envforge lock --offline --find-links DIR`",
    "UV_NO_SOURCES": "the recipe's packages.NAME.index routing",
    "UV_NO_SOURCES_PACKAGE": "the recipe's packages.NAME.index routing",
    "UV_CONSTRAINT": "pin the version in [packages]",
    "UV_OVERRIDE": '[overrides] NAME = { version = "==X", reason = "..." }',
    "UV_BUILD_CONSTRAINT": '[recipe] build-constraints = ["setuptools==X.Y.Z"]',
    "UV_NO_BINARY": _SOURCE,
    "UV_NO_BINARY_PACKAGE": _SOURCE,
    "UV_NO_BUILD": _SOURCE,
    "UV_NO_BUILD_PACKAGE": _SOURCE,
    "UV_NO_BUILD_ISOLATION": _SOURCE,
    "UV_TORCH_BACKEND": _TORCH,
    "UV_CUDA_DRIVER_VERSION": _TORCH,
    "UV_AMD_GPU_ARCHITECTURE": _TORCH,
    "UV_PYTHON": _PYTHON,
    "UV_SYSTEM_PYTHON": _PYTHON,
    "UV_PYTHON_PREFERENCE": _PYTHON,
    "UV_MANAGED_PYTHON": _PYTHON,
    "UV_NO_MANAGED_PYTHON": _PYTHON,
    "UV_LIBC": 'the variant\'s platform key (e.g. platform = "x86_64-manylinux_2_28")',
    "UV_CONFIG_FILE": "envforge reads no uv configuration; say it in the recipe",
    "UV_PREVIEW": "envforge chooses uv's preview features itself",
    "UV_PREVIEW_FEATURES": "envforge chooses uv's preview features itself",
    "UV_WORKING_DIR": "run envforge from the project (or pass --project)",
    "UV_WORKING_DIRECTORY": "run envforge from the project (or pass --project)",
    "UV_PROJECT": "run envforge from the project (or pass --project)",
}

# Install-time or other-command settings: never passed, never needed (the lock says everything).
DROPPED: Final[frozenset[str]] = frozenset(
    {
        "UV",
        "UV_RUN_RECURSION_DEPTH",
        "UV_RUN_MAX_RECURSION_DEPTH",
        "UV_COMPILE_BYTECODE",
        "UV_COMPILE_BYTECODE_TIMEOUT",
        "UV_LINK_MODE",
        "UV_NO_INSTALLER_METADATA",
        "UV_REQUIRE_HASHES",
        "UV_NO_VERIFY_HASHES",
        "UV_SKIP_WHEEL_FILENAME_CHECK",
        "UV_INSECURE_NO_ZIP_VALIDATION",
        "UV_BREAK_SYSTEM_PACKAGES",
        "UV_VENV_SEED",
        "UV_VENV_CLEAR",
        "UV_VENV_RELOCATABLE",
        "UV_GIT_LFS",
        "UV_NO_CONFIG",
        "UV_ISOLATED",
        "UV_CUSTOM_COMPILE_COMMAND",
        "UV_NO_EDITABLE",
        "UV_DEV",
        "UV_NO_DEV",
        "UV_NO_GROUP",
        "UV_NO_DEFAULT_GROUPS",
        "UV_NO_SYNC",
        "UV_LOCKED",
        "UV_FROZEN",
        "UV_ACTIVE",
        "UV_PROJECT_ENVIRONMENT",
        "UV_NO_PROJECT",
        "UV_ENV_FILE",
        "UV_NO_ENV_FILE",
        "UV_TOOL_DIR",
        "UV_TOOL_BIN_DIR",
        "UV_INIT_BARE",
        "UV_INIT_BUILD_BACKEND",
        "UV_PUBLISH_URL",
        "UV_PUBLISH_TOKEN",
        "UV_PUBLISH_INDEX",
        "UV_PUBLISH_USERNAME",
        "UV_PUBLISH_PASSWORD",
        "UV_PUBLISH_CHECK_URL",
        "UV_PUBLISH_NO_ATTESTATIONS",
        "UV_GITHUB_TOKEN",
        "UV_PYTHON_DOWNLOADS",
        "UV_PYTHON_DOWNLOADS_JSON_URL",
        "UV_PYTHON_INSTALL_MIRROR",
        "UV_PYPY_INSTALL_MIRROR",
        "UV_PYTHON_CPYTHON_BUILD",
        "UV_PYTHON_PYPY_BUILD",
        "UV_PYTHON_GRAALPY_BUILD",
        "UV_PYTHON_PYODIDE_BUILD",
        "UV_PYTHON_BIN_DIR",
        "UV_PYTHON_INSTALL_BIN",
        "UV_PYTHON_INSTALL_REGISTRY",
        "UV_PYTHON_NO_REGISTRY",
        "UV_PYTHON_CACHE_DIR",
        "UV_INSTALLER_GITHUB_BASE_URL",
        "UV_INSTALLER_GHE_BASE_URL",
        "UV_INSTALL_DIR",
        "UV_UNMANAGED_INSTALL",
        "UV_DOWNLOAD_URL",
        "UV_NO_MODIFY_PATH",
        "UV_SHOW_RESOLUTION",
        "UV_UPLOAD_HTTP_TIMEOUT",
    }
)

# Transport, authentication, cache, output: how uv fetches, never what it picks.
PASSED: Final[frozenset[str]] = frozenset(
    {
        "UV_CACHE_DIR",
        "UV_NO_CACHE",
        "UV_CREDENTIALS_DIR",
        "UV_KEYRING_PROVIDER",
        "UV_NATIVE_TLS",
        "UV_SYSTEM_CERTS",
        "UV_INSECURE_HOST",
        "UV_HTTP_TIMEOUT",
        "UV_HTTP_CONNECT_TIMEOUT",
        "UV_HTTP_RETRIES",
        "UV_REQUEST_TIMEOUT",
        "UV_CONCURRENT_DOWNLOADS",
        "UV_CONCURRENT_BUILDS",
        "UV_CONCURRENT_INSTALLS",
        "UV_NO_PROGRESS",
        "UV_NO_WRAP",
        "UV_LOG_CONTEXT",
        "UV_STACK_SIZE",
        "UV_LOCK_TIMEOUT",
        "UV_HIDE_BUILD_OUTPUT",
        "UV_NO_HF_TOKEN",
        "UV_S3_ENDPOINT_URL",
        "UV_GCS_ENDPOINT_URL",
        "UV_NO_GITHUB_FAST_PATH",
        "UV_PYTHON_INSTALL_DIR",
        "UV_PYTHON_SEARCH_PATH",
        "UV_API_KEY",
        "UV_AUTH_TOKEN",
    }
)

# uv's per-index credentials (env_vars.rs: ``UV_INDEX_{name}_USERNAME`` / ``_PASSWORD``).
_CREDENTIAL = re.compile(r"^UV_INDEX_[A-Z0-9_]+_(USERNAME|PASSWORD)$")
# Outside uv's namespace: read by pip and by build backends uv may start, never by envforge's lock.
_FOREIGN = re.compile(r"^(PIP_[A-Z0-9_]+|PYTHONPATH)$")


def classify(name: str) -> str:
    """What envforge does with the caller's variable ``name`` when it starts uv.

    Returns ``"refused"``, ``"dropped"`` or ``"passed"`` (see the module docstring); variables
    outside uv's namespace are ``"passed"`` except ``PIP_*`` and ``PYTHONPATH`` (``"dropped"``).
    """
    if name in REFUSED:
        return "refused"
    if name in PASSED or _CREDENTIAL.match(name):
        return "passed"
    if name.startswith("UV_") or name in DROPPED or _FOREIGN.match(name):
        return "dropped"
    return "passed"
