"""Env profiles: environment variables (NCCL and friends) that reach every process of an environment.

A profile is a recipe table ``[env.<name>]`` (``recipe/model.py`` picks it: ``--env-profile``, the
variant's ``env-profile``, or the target interconnect, over ``[env.default]``). :func:`install`
puts it into an environment's site-packages so that *every* interpreter start applies it: the
server, its ``multiprocessing`` spawn children, ``subprocess`` children, ``python -I`` and
``PYTHONNOUSERSITE=1`` runs alike.

Two modes (field case B11, docs/design.md decision 5):

``pth`` (default)
    ``envforge-env.pth`` holds one ``import`` line (``site`` executes such lines, see the
    :mod:`site` documentation) that imports ``_envforge_env.py``, a module envforge writes with the
    values embedded. Every site-packages directory processes its ``.pth`` files, whichever
    ``sitecustomize`` the interpreter imports.
``sitecustomize``
    A marked block in ``<site-packages>/sitecustomize.py``, merged into an existing file without
    clobbering it. Only the first ``sitecustomize`` on ``sys.path`` is imported and Debian/Ubuntu
    Pythons ship one in ``/usr/lib/python3.X``, so install asks the target interpreter which one it
    imports and refuses with :class:`SitecustomizeShadowed` when another file wins.

In both modes the hook sets each variable only when it is absent (``os.environ.setdefault``
semantics: a value the caller exports wins), prints nothing, and never fails the interpreter start:
a broken or missing hook module gives one warning line on stderr. ``python -S`` skips the ``site``
module and with it every ``.pth`` file and ``sitecustomize``: the one documented limitation.

With a venv's site-packages, the hook also points the kernel and compile caches the stack keeps
outside the environment (flashinfer's JIT cache, triton, torch inductor, vLLM, sglang, DeepGEMM:
:data:`CACHE_VARIABLES`) under the generation, ``<generation>/.cache/<name>`` (field case B49), so
a rollback never runs kernels compiled for another generation; a variable the profile sets itself,
or the caller exports, wins.

What was written is recorded in ``<site-packages>/.envforge/env-profile.json``
(docs/architecture.md) so :func:`revert` removes exactly that, leaving the rest byte-identical.

The package, by concept: :mod:`.source` is the hook's text (pure: same profile, same bytes) and what
a profile may hold; :mod:`.installation` writes, records, reverts and checks it in a site-packages;
:mod:`.view` asks the environment's interpreter what its processes see; :mod:`.effective` computes
what a served process runs with once the engine's launcher and NCCL's configuration files had
their say (field cases B38, B44).
"""

from __future__ import annotations

from envforge.env.profile.installation import (
    InstalledProfile,
    ProfileInstall,
    ProfileRevert,
    SitecustomizeShadowed,
    generation_of,
    install,
    installed_problems,
    read_installed,
    recorded_profile,
    revert,
)
from envforge.env.profile.source import (
    BLOCK_BEGIN,
    BLOCK_END,
    CACHE_VARIABLES,
    HOOK_MODULE,
    MODES,
    PTH_FILE,
    block_source,
    cache_variables,
    hook_source,
    profile_problems,
    pth_source,
)
from envforge.env.profile.effective import (
    EffectiveEnvironment,
    EffectiveVariable,
    ServedCommand,
    effective_environment,
    recipe_servers,
    served_launcher,
)
from envforge.env.profile.view import ProfileView, ReachReport, Served, ShownVariable, check_reach, served, show

__all__ = [
    "BLOCK_BEGIN",
    "BLOCK_END",
    "EffectiveEnvironment",
    "EffectiveVariable",
    "CACHE_VARIABLES",
    "HOOK_MODULE",
    "MODES",
    "PTH_FILE",
    "InstalledProfile",
    "ProfileInstall",
    "ProfileRevert",
    "ProfileView",
    "ReachReport",
    "Served",
    "ServedCommand",
    "ShownVariable",
    "SitecustomizeShadowed",
    "block_source",
    "cache_variables",
    "check_reach",
    "effective_environment",
    "generation_of",
    "hook_source",
    "install",
    "installed_problems",
    "profile_problems",
    "pth_source",
    "read_installed",
    "recipe_servers",
    "recorded_profile",
    "revert",
    "served",
    "served_launcher",
    "show",
]
