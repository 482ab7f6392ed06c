"""The env profile hook's text, and what a profile may hold. Pure: nothing here reads or writes.

Deterministic: the same profile name and variables give the same bytes, so verify can compare
the files on disk with what :func:`hook_source`, :func:`block_source` and :func:`pth_source` return.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from envforge.recipe.envvars import problems, startup_reader

__all__ = [
    "BLOCK_BEGIN",
    "BLOCK_END",
    "CACHE_DIR",
    "CACHE_VARIABLES",
    "HOOK_HEADER",
    "HOOK_MODULE",
    "MODES",
    "PTH_FILE",
    "SITECUSTOMIZE",
    "block_source",
    "cache_variables",
    "hook_source",
    "profile_problems",
    "pth_source",
    "strip_block",
]

#: The two ways a profile is hooked into interpreter start-up (docs/env-profiles.md).
MODES = ("pth", "sitecustomize")
#: pth mode: the ``.pth`` file that imports the hook module.
PTH_FILE = "envforge-env.pth"
#: pth mode: the hook module (``_envforge_env.py``) with the values embedded.
HOOK_MODULE = "_envforge_env"
#: sitecustomize mode: the file the marked block is merged into.
SITECUSTOMIZE = "sitecustomize.py"
BLOCK_BEGIN = "# >>> envforge env profile >>> (written by envforge; `--revert` removes this block)"
BLOCK_END = "# <<< envforge env profile <<<"
#: The first bytes of every hook module envforge writes (how install tells its own file from a foreign one).
HOOK_HEADER = "# Written by envforge: env profile"

#: The directory of a generation that holds its kernel and compile caches (field case B49).
CACHE_DIR = ".cache"
#: Kernel and compile caches the stack keeps outside the environment by default, so that every
#: generation and CUDA variant would share them: variable -> (its value, relative to the
#: generation directory; the default it replaces, as the package's own code spells it). Read from
#: the packages' code: flashinfer 0.6.4 ``flashinfer/jit/env.py`` (``FLASHINFER_WORKSPACE_BASE``,
#: default the home directory, under which it writes ``.cache/flashinfer/<version>/<arch>``, cubins
#: included), triton ``triton/knobs.py`` (``TRITON_CACHE_DIR``, default ``$TRITON_HOME/.triton/cache``),
#: torch ``torch/_inductor/runtime/cache_dir_utils.py`` (``TORCHINDUCTOR_CACHE_DIR``, default
#: ``/tmp/torchinductor_<user>``), vLLM ``vllm/envs.py`` (``VLLM_CACHE_ROOT``, default
#: ``~/.cache/vllm``), sglang 0.5.9 ``sglang/srt/compilation/backend.py`` (``SGLANG_CACHE_DIR``,
#: default ``~/.cache/sglang/``, its torch.compile cache) and
#: ``sglang/srt/layers/deep_gemm_wrapper/compile_utils.py`` (``SGLANG_DG_CACHE_DIR``, default
#: ``~/.cache/deep_gemm``, copied into DeepGEMM's ``DG_JIT_CACHE_DIR``).
CACHE_VARIABLES: Mapping[str, tuple[str, str]] = {
    "FLASHINFER_WORKSPACE_BASE": (".", "~ (flashinfer writes ~/.cache/flashinfer/<version>/<arch>)"),
    "SGLANG_CACHE_DIR": (f"{CACHE_DIR}/sglang", "~/.cache/sglang"),
    "SGLANG_DG_CACHE_DIR": (f"{CACHE_DIR}/deep_gemm", "~/.cache/deep_gemm"),
    "TORCHINDUCTOR_CACHE_DIR": (f"{CACHE_DIR}/torchinductor", "/tmp/torchinductor_<user>"),
    "TRITON_CACHE_DIR": (f"{CACHE_DIR}/triton", "~/.triton/cache"),
    "VLLM_CACHE_ROOT": (f"{CACHE_DIR}/vllm", "~/.cache/vllm"),
}


def cache_variables(generation: str, env: Mapping[str, str]) -> dict[str, str]:
    """The cache variables the hook of ``generation`` (an absolute directory) sets: each of
    :data:`CACHE_VARIABLES` under ``<generation>/.cache`` (flashinfer's base is the generation
    itself: flashinfer appends ``.cache/flashinfer``), but those the profile ``env`` sets itself: a
    recipe's ``[env.*]`` value is the opt-out (a team sharing a warm cache on purpose)."""
    return {
        name: os.path.normpath(os.path.join(generation, rel))
        for name, (rel, _) in CACHE_VARIABLES.items()
        if name not in env
    }


def _body(prefix: str, profile: str | None, env: Mapping[str, str], caches: Mapping[str, str]) -> list[str]:
    """The hook code; ``prefix`` namespaces its names (``""`` in the module, ``_ENVFORGE_`` in a block).
    Without ``caches`` the bytes are those of a hook written before caches were isolated."""
    p = prefix
    lines = [f"{p}PROFILE = {profile!r}", f"{p}ENV = {{"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(env.items())]
    lines += ["}"]
    if caches:
        lines += [f"{p}CACHES = {{", *[f"    {k!r}: {v!r}," for k, v in sorted(caches.items())], "}", f"{p}CACHED = ()"]
    lines += [
        f"{p}APPLIED = ()",
        f"{p}KEPT = ()",
        "try:",
        "    import os as _envforge_os",
        f"    {p}APPLIED = tuple(k for k in {p}ENV if k not in _envforge_os.environ)",
        f"    {p}KEPT = tuple(k for k in {p}ENV if k not in {p}APPLIED)",
        f"    for _envforge_k in {p}APPLIED:",
        f"        _envforge_os.environ[_envforge_k] = {p}ENV[_envforge_k]",
    ]
    if caches:
        lines += [
            f"    {p}CACHED = tuple(k for k in {p}CACHES if k not in _envforge_os.environ)",
            f"    for _envforge_k in {p}CACHED:",
            f"        _envforge_os.environ[_envforge_k] = {p}CACHES[_envforge_k]",
        ]
    lines += [
        "except Exception as _envforge_exc:",
        "    import sys as _envforge_sys",
        "    if _envforge_sys.stderr is not None:",
        "        _envforge_sys.stderr.write('envforge: env profile %r not applied: %s: %s\\n' % (",
        f"            {p}PROFILE, type(_envforge_exc).__name__, str(_envforge_exc).partition('\\n')[0]))",
    ]
    return lines


def hook_source(profile: str | None, env: Mapping[str, str], caches: Mapping[str, str] | None = None) -> str:
    """Source of ``_envforge_env.py`` (pth mode): ``PROFILE``, ``ENV``, ``APPLIED``, ``KEPT``, and
    with ``caches`` (:func:`cache_variables`) ``CACHES`` and ``CACHED`` (those it set: the caller's
    own value of a cache variable wins, as for profile variables)."""
    head = [
        f"{HOOK_HEADER} {profile!r}. Do not edit: `envforge build` and `envforge apply-patches`",
        f"# rewrite it, `--revert` removes it. Imported at interpreter start by {PTH_FILE}; sets each",
        "# variable only when the caller has not (setdefault semantics). See docs/env-profiles.md.",
    ]
    return "\n".join([*head, *_body("", profile, env, caches or {})]) + "\n"


def block_source(profile: str | None, env: Mapping[str, str], caches: Mapping[str, str] | None = None) -> str:
    """The marked block merged into ``sitecustomize.py`` (sitecustomize mode), ending in a newline;
    ``caches`` as for :func:`hook_source` (names prefixed ``_ENVFORGE_``)."""
    return "\n".join([BLOCK_BEGIN, *_body("_ENVFORGE_", profile, env, caches or {}), BLOCK_END]) + "\n"


def pth_source() -> str:
    """The one line of ``envforge-env.pth``: import the hook; on failure, one warning line, no traceback.

    CPython 3.12 processes a venv's site-packages twice at start-up (``site.venv()`` and
    ``site.main()`` both call ``addsitepackages``), so the line is idempotent: a failed import is
    remembered as ``sys.modules['_envforge_env'] = None`` and warned about once.
    """
    code = (
        f"if '{HOOK_MODULE}' not in sys.modules:\n try:\n  import {HOOK_MODULE}\n except Exception as e:\n"
        f"  sys.modules['{HOOK_MODULE}'] = None\n"
        "  sys.stderr is None or sys.stderr.write('envforge: env profile hook not loaded (%s: %s); "
        "its variables are not set: run `envforge apply-patches` to repair or `--revert` to remove "
        f"{PTH_FILE}\\n' % (type(e).__name__, str(e).partition('\\n')[0]))"
    )
    return f"import sys; exec({code!r})\n"


def strip_block(text: str) -> tuple[str, bool]:
    """``text`` without envforge's marked block (and the block's own line ends); found or not."""
    start = text.find(BLOCK_BEGIN + "\n")
    end = text.find(BLOCK_END + "\n", start)
    if start < 0 or end < 0:
        return text, False
    return text[:start] + text[end + len(BLOCK_END) + 1 :], True


def profile_problems(env: Mapping[str, object], reviewed: Collection[str] = ()) -> tuple[str, ...]:
    """``"NAME: what is wrong"`` for each variable of a profile NCCL, CUDA or the process would
    misread (:func:`envforge.recipe.envvars.problems`), and for each variable read at process start
    (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``PYTHON*``: field case B31), which a start-up hook sets
    for child processes only. Empty: nothing to say."""
    out = []
    for name, value in sorted(env.items()):
        out += [f"{name}: {msg}" for msg in problems(name, value, reviewed)]
        if (reader := startup_reader(name)) is not None:
            out.append(
                f"{name}: read by {reader} when a process starts, before this hook runs: "
                "child processes get it, the process itself runs without it"
            )
    return tuple(out)
