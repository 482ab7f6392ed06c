"""The recipe schema: every key of a ``recipes/*.toml`` file, its shape and its validator.

:data:`RECIPE_SPEC` is the :mod:`envforge.core.schema` table :func:`envforge.recipe.load.load_recipe`
validates a parsed recipe against; each ``*_problem`` function says why one value is refused (or
None). The keys are documented in docs/recipes.md; ``[verify.drafter]`` and ``[verify.smoke]``
take their meaning from envforge.drafter and envforge.bench, their shapes from here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envforge.core.kinds import KINDS, is_known_kind
from envforge.core.limits import MAX_CONCURRENCY, MAX_REPEATS, MAX_REQUEST_TOKENS, MAX_REQUESTS, MAX_SEED, MAX_TURNS
from envforge.core.schema import Bool, Date, Enum, Int, ListOf, MapOf, Number, OneOf, Problem, Str, Table
from envforge.recipe.envvars import problems as env_value_problems, startup_reader
from envforge.recipe.platforms import platform_problem
from envforge.recipe.model import INTERCONNECTS

__all__ = ["RECIPE_SPEC", "UV_LATEST_CUTOFF", "exclude_newer_cutoff", "lock_name_problem"]

# PEP 751: lock files are named ``pylock.toml`` or ``pylock.<name>.toml`` where <name> has no dots.
# envforge also keeps names to letters, digits, '-' and '_' so they work as directory names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_PKG = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def lock_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be part of a PEP 751 file name ``pylock.<name>.toml``, or None."""
    if "." in name:
        return (
            f"'{name}' cannot form a PEP 751 lock file name (pylock.<name>.toml allows no dots); "
            "use letters, digits, '-' and '_' only"
        )
    if not _NAME.match(name):
        return f"'{name}' is not a valid name; use letters, digits, '-' and '_', starting with a letter or digit"
    return None


def _specifier_problem(v: str) -> str | None:
    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        return f"'{v}' is not a version specifier (PEP 440), e.g. '==2.9.1' or '>=0.6,<0.7'"
    return None


def _pkg_problem(name: str) -> str | None:
    return None if _PKG.match(name) else f"'{name}' is not a valid distribution name (PEP 508)"


def _cc_problem(v: str) -> str | None:
    return None if re.fullmatch(r"\d+\.\d+", v) else f"'{v}' is not a compute capability like \"12.0\""


def _python_problem(v: str) -> str | None:
    return None if re.fullmatch(r"3\.\d+(\.\d+)?", v) else f"'{v}' is not a Python version like \"3.12\""


def _env_problem(k: str) -> str | None:
    return None if _ENV_VAR.match(k) else f"'{k}' is not a valid environment variable name"


def _nccl_name_problem(k: str) -> str | None:
    return None if k.startswith("NCCL_") and _ENV_VAR.match(k) else f"'{k}' is not an NCCL variable name (NCCL_...)"


def _env_value(value: Any, path: str) -> list[Problem]:
    """A variable's value for NCCL, CUDA and the process (recipe/envvars.py: names, NCCL's parsing, NUL)."""
    return [Problem(path, msg) for msg in env_value_problems(path.rsplit(".", 1)[-1], value)]


def _profile_value(value: Any, path: str) -> list[Problem]:
    """An env profile value: as :func:`_env_value`, and never a variable read at process start (B31)."""
    name = path.rsplit(".", 1)[-1]
    out = _env_value(value, path)
    if not out and (reader := startup_reader(name)) is not None:
        out.append(
            Problem(
                path,
                (
                    f"is read by {reader} when a process starts, before the env profile's .pth hook runs: the hook "
                    "would give it to child processes only, while the process itself (the server) runs without it; "
                    "set it where the process is started (its launcher or job script; for benchmark servers, "
                    "[verify.smoke.servers] env)"
                ),
            )
        )
    return out


_SPEC = Str(_specifier_problem)
_PACKAGE = OneOf(
    [(str, _SPEC), (Mapping, Table({"version": _SPEC, "index": Str(), "reason": Str()}, frozenset({"version"})))],
    'a specifier string or a table { version = "...", index = "..." }',
)
_OVERRIDE = Table({"version": _SPEC, "reason": Str()}, frozenset({"version", "reason"}))
_PACKAGES = MapOf(_PACKAGE, _pkg_problem)


def _pin_problem(v: str) -> str | None:
    """A build constraint must pin one version (``setuptools==80.9.0``): a range is no record."""
    try:
        req = Requirement(v)
    except InvalidRequirement:
        return f"'{v}' is not a requirement (PEP 508), e.g. 'setuptools==80.9.0'"
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        return f"'{v}' does not pin one version; write e.g. '{req.name}==X.Y.Z'"
    return None


def _reason_problem(v: str) -> str | None:
    return None if v.strip() else "give the reason reviewers read (a non-empty string)"


def _url_problem(v: str) -> str | None:
    """An index URL: ``http(s)://host/path`` or ``file:///dir``, never with credentials in it.

    A user or password in the URL would be written into the lock, printed by ``lock --check`` and
    ``lock diff`` and copied into every environment (issue 18): refused without echoing the URL.
    """
    if re.match(r"^(https?|file)://[^\s/]+(/\S*)?$|^file:///\S+$", v):
        parts = urlsplit(v)
        if "@" in parts.netloc:
            shown = f"{parts.scheme}://<credentials>@{parts.netloc.rpartition('@')[2]}{parts.path}"
            return (
                f"'{shown}' carries credentials in the URL, which would be written into the lock and "
                "printed; remove them and give them the way uv takes them: UV_INDEX_<NAME>_USERNAME and "
                "UV_INDEX_<NAME>_PASSWORD (NAME: the index's recipe name upper-cased, '-' as '_'), "
                "a ~/.netrc entry for the host, or a keyring (UV_KEYRING_PROVIDER=subprocess)"
            )
        if parts.query or parts.fragment:
            return (
                "an index URL has no query string or fragment, and one may carry a token that would be "
                "written into the lock and printed; remove it and give credentials as "
                "UV_INDEX_<NAME>_USERNAME / UV_INDEX_<NAME>_PASSWORD, a ~/.netrc entry or a keyring"
            )
        return None
    if "@" in v:
        return "not an index URL (and it looks like it carries credentials; give them as UV_INDEX_<NAME>_PASSWORD)"
    return f"'{v}' is not an index URL; use http(s)://host/path/simple (a PEP 503 index) or file:///dir"


# uv reads ``--exclude-newer`` with jiff; the latest instant it takes is jiff's ``Timestamp::MAX``,
# 9999-12-30T22:00:00.999999999Z. Tried with uv 0.13.9: 9999-12-30T22:00:00Z and
# 9999-12-31T00:00:00+02:00 are taken, 9999-12-30T22:00:01Z and 9999-12-31T23:59:59Z are "could not
# be parsed as a valid date" (uv exit 2, which envforge would report as uv failing, exit 3). jiff
# also reads at most 9 digits of a second's fraction.
UV_LATEST_CUTOFF = datetime(9999, 12, 30, 22, 0, 0, 999999, tzinfo=timezone.utc)


def exclude_newer_cutoff(v: str) -> str:
    """The ``--exclude-newer`` value envforge passes uv for a valid recipe ``exclude-newer`` ``v``.

    A timestamp is passed as written. A date ``D`` is passed as the end of that day in UTC,
    ``(D+1)T00:00:00Z``: uv 0.13.9 itself reads a bare date as the end of the day in the machine's
    local time zone (tried: with ``TZ=Etc/GMT-12``, ``2024-01-01`` left out a file uploaded at
    2024-01-01T12:00:00Z that ``TZ=UTC`` kept), so the same recipe would lock differently on
    machines in different zones. On a machine set to UTC both readings are the same instant.
    """
    if "T" in v:
        return v
    return f"{date.fromisoformat(v) + timedelta(days=1)}T00:00:00Z"


def _timestamp_problem(v: str) -> str | None:
    """``exclude-newer``: an RFC 3339 timestamp with its zone (at most 9 fraction digits), or a date
    (read as the end of that day in UTC, :func:`exclude_newer_cutoff`), no later than uv takes
    (:data:`UV_LATEST_CUTOFF`; for a date, 9999-12-29). Relative spans ("1 week") are refused: a
    lock must mean the same later."""
    late: bool | None = None  # None: not a point in time
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            late = date.fromisoformat(v) > date(9999, 12, 29)
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})", v):
            late = datetime.fromisoformat(v.replace("Z", "+00:00")) > UV_LATEST_CUTOFF
    except ValueError:
        pass
    if late:
        return (
            f"'{v}' is later than uv can read (its latest point in time is 9999-12-30T22:00:00Z, for a "
            "date 9999-12-29); write the cutoff you mean, e.g. today's date, or remove the key"
        )
    if late is False:
        return None
    return (
        f"'{v}' is not a fixed point in time; write an RFC 3339 timestamp with its zone, e.g. "
        '"2024-01-01T00:00:00Z", or a date "2024-01-01" (a relative span would not give the same '
        "lock later)"
    )


def _provided_problem(v: str) -> str | None:
    """A ``[provided]`` version pins one exact version, local label included (``==2.11.0+cu130``):
    verify compares it to what the base interpreter reports, so a range would prove nothing."""
    try:
        specs = list(SpecifierSet(v))
    except InvalidSpecifier:
        specs = []
    if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        return (
            f"'{v}' does not pin one exact version; write the version the base interpreter reports, local "
            "label included, e.g. '==2.11.0+cu130'"
        )
    return None


def _module_problem(v: str) -> str | None:
    return (
        None
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", v)
        else (f"'{v}' is not an importable module name like 'torch'")
    )


_INDEXES = MapOf(Str(_url_problem), lambda k: lock_name_problem(k))
_OVERRIDES = MapOf(_OVERRIDE, _pkg_problem)
# [provided]: distributions the base interpreter provides (a container's preinstalled torch): never
# locked, never installed, made visible to the environment and proved by verify (check `provided`).
_PROVIDED_VERSION = Str(_provided_problem)
_PROVIDED = MapOf(
    OneOf(
        [
            (str, _PROVIDED_VERSION),
            (
                Mapping,
                Table(
                    {"version": _PROVIDED_VERSION, "import": Str(_module_problem), "reason": Str(_reason_problem)},
                    frozenset({"version"}),
                ),
            ),
        ],
        'an exact version string "==X+label" or a table { version = "==X+label", import = "module" }',
    ),
    _pkg_problem,
)
_PLATFORM = Str(platform_problem)
_SPEC_REQ = Str(_pin_problem)
# Reviewed exceptions to the lock's guards, each with the reason reviewers read:
# a distribution built for another CUDA major (B03) kept on purpose, and a distribution built
# from its sdist at install time (B28).
_REASONS = MapOf(Str(_reason_problem), _pkg_problem)
# A listed patchset this variant does not apply (B41), with the reason reviewers read: without it, a
# listed patchset that does not apply to the locked version is an error at lock and build. Like pnpm's
# allowUnusedPatches, but one patchset at a time and never without a reason.
_RETIRED = ListOf(Table({"id": Str(), "reason": Str(_reason_problem)}, frozenset({"id", "reason"})))

_VARIANT = Table(
    {
        "cuda": Str(),
        "description": Str(),
        "indexes": _INDEXES,
        "packages": _PACKAGES,
        "overrides": _OVERRIDES,
        "env-profile": Str(),
        "platform": _PLATFORM,
        "cuda-exceptions": _REASONS,
        "build-from-source": _REASONS,
        "retire-patchsets": _RETIRED,
        "exclude-newer-exempt": _REASONS,
        "excludes": _REASONS,
    }
)

# [verify.drafter] and [verify.smoke] are owned by envforge.drafter and envforge.bench.
_DRAFTER = Table(
    {
        "repo": Str(),
        "revision": Str(),
        "target-config": Str(),
        "compare": ListOf(Str()),
        "allow-pickle": Bool(),
        "trained-aux-layers": ListOf(Int(0)),
    },
    frozenset({"repo", "revision"}),
)

_SMOKE_SERVER = Table(
    {
        "name": Str(),
        "model": Str(),
        "served-model-name": Str(),
        "args": ListOf(Str()),
        "env": MapOf(_env_value, _env_problem),
        "speculative": Bool(),
    },
    frozenset({"name", "args"}),
)

_SMOKE = Table(
    {
        "model": Str(),
        "served-model-name": Str(),
        "api": Enum("sglang", "openai", "vllm", "openai-chat"),
        "servers": ListOf(_SMOKE_SERVER),
        "prompts": Str(),
        "seed": Int(0, MAX_SEED),
        "max-new-tokens": Int(1, MAX_REQUEST_TOKENS),
        "temperature": Number(),
        "concurrency": ListOf(Int(1, MAX_CONCURRENCY)),
        "repeats": Int(1, MAX_REPEATS),
        "warmup": Int(0, MAX_REQUESTS),
        "load-timeout-s": Int(1),
        "port": Int(1),
        "requests": Int(1, MAX_REQUESTS),
        "health": Str(),
        "request-timeout-s": Number(),
        "idle-timeout-s": Number(),
        "interleave": Bool(),
        "flush-cache": Str(),
        "output-lengths": Enum("exact", "natural"),  # bench --output-lengths
        "turns": Int(1, MAX_TURNS),  # bench --turns: user turns of each ShareGPT conversation sent
        "percentiles": ListOf(Number()),  # bench --percentiles (each in (0, 100], checked by bench)
        # the datasets of envforge.bench.workload (DATASETS, KEYS): listed here, the recipe layer sits below bench
        "dataset": Enum("prompts", "random", "shared-prefix", "trace"),
        "tokenizer": Str(),
        "random-input-len": Int(1, MAX_REQUEST_TOKENS),
        "random-output-len": Int(1, MAX_REQUEST_TOKENS),
        "random-range-ratio": Number(),
        "gsp-num-groups": Int(1, MAX_REQUESTS),
        "gsp-prompts-per-group": Int(1, MAX_REQUESTS),
        "gsp-system-prompt-len": Int(1, MAX_REQUEST_TOKENS),
        "gsp-question-len": Int(1, MAX_REQUEST_TOKENS),
        "gsp-output-len": Int(1, MAX_REQUEST_TOKENS),
        "trace": Str(),
        "trace-time-scale": Number(),
    }
)


#: ``[verify] levels``: verify's levels (envforge.core.kinds.LEVELS) and bench's ``smoke``.
_VERIFY_LEVELS = ("static", "gpu", "drafter", "smoke")


def _level_problem(v: str) -> str | None:
    """A level no command runs would be dropped without a word (``"GPU"`` left the gpu level out)."""
    if v in _VERIFY_LEVELS:
        return None
    close = [lv for lv in _VERIFY_LEVELS if lv == v.strip().lower()] or difflib.get_close_matches(
        v, _VERIFY_LEVELS, n=1
    )
    return f"'{v}' is not a verify level (one of {', '.join(_VERIFY_LEVELS)})" + (
        f"; did you mean '{close[0]}'?" if close else ""
    )


def _kind_problem(v: str) -> str | None:
    if is_known_kind(v):
        return None
    close = difflib.get_close_matches(v, list(KINDS), n=1)
    return (
        f"'{v}' is not a verify finding kind"
        + (f"; did you mean '{close[0]}'?" if close else "")
        + " (docs/verify.md lists them)"
    )


def _subject_problem(v: str) -> str | None:
    return None if v.strip() else "give the finding's subject exactly as verify prints it"


def _claimant_problem(v: str) -> str | None:
    parts = v.split(" ")
    try:
        ok = len(parts) == 2 and bool(parts[0]) and bool(Version(parts[1]))
    except InvalidVersion:
        ok = False
    return (
        None
        if ok
        else (f"'{v}' is not '<distribution> <version>' as verify prints it (e.g. \"flashinfer-python 0.6.3\")")
    )


def _actual_problem(v: str) -> str | None:
    return None if v.strip() else "give the finding's actual text exactly as verify prints it, or leave the key out"


# [[verify.accept]]: a known finding accepted after review (envforge.verify.acceptance). ``between``
# (file-conflict only) and ``actual`` pin the finding beyond kind and subject; ``variants`` limits
# the entry to environments of those variants (a pinned finding that differs between variants).
_ACCEPT = Table(
    {
        "kind": Str(_kind_problem),
        "subject": Str(_subject_problem),
        "reason": Str(_reason_problem),
        "expires": Date(),
        "between": ListOf(Str(_claimant_problem)),
        "actual": Str(_actual_problem),
        "variants": ListOf(Str(lock_name_problem)),
    },
    frozenset({"kind", "subject", "reason", "expires"}),
)

RECIPE_SPEC = Table(
    {
        "recipe": Table(
            {
                "name": Str(lock_name_problem),
                "description": Str(),
                "python": Str(_python_problem),
                "patchsets": ListOf(Str()),
                "retire-patchsets": _RETIRED,
                "resolution": Enum("full", "no-deps"),
                "build-constraints": ListOf(_SPEC_REQ),
                "exclude-newer": Str(_timestamp_problem),
                # how builds put files from uv's cache into a generation (uv's --link-mode; recorded per generation)
                "link-mode": Enum("clone", "copy", "hardlink", "symlink"),
            },
            frozenset({"name", "python"}),
        ),
        "target": Table(
            {
                "gpu": Str(),
                "compute-capability": Str(_cc_problem),
                "gpus": Int(1),
                "interconnect": Enum(*INTERCONNECTS),
                "platform": _PLATFORM,
                "cuda-driver-min": Str(),
            }
        ),
        "packages": _PACKAGES,
        "provided": _PROVIDED,
        "indexes": _INDEXES,
        "overrides": _OVERRIDES,
        "cuda-exceptions": _REASONS,
        "build-from-source": _REASONS,
        # Packages exempt from [recipe] exclude-newer (uv's exclude-newer-package NAME=false), each with
        # its reason: indexes that publish no upload times (download.pytorch.org; field case B40).
        "exclude-newer-exempt": _REASONS,
        # Dependencies left out of the resolution, each with its reason (uv's --excludes: neither the
        # distribution nor what only it requires is locked or installed): a CUDA build the CPU stack
        # must not load (PyPI's torchvision beside torch +cpu).
        "excludes": _REASONS,
        # NCCL variables no release envforge knows reads (a newer NCCL's), each with its reason: reviewed,
        # so neither the name check at load nor the locked release's table refuses them (recipe/envvars.py).
        "nccl-unknown": MapOf(Str(_reason_problem), _nccl_name_problem),
        "variant": MapOf(_VARIANT, lock_name_problem),
        "env": MapOf(MapOf(_profile_value, _env_problem), lock_name_problem),
        "verify": Table(
            {"drafter": _DRAFTER, "smoke": _SMOKE, "levels": ListOf(Str(_level_problem)), "accept": ListOf(_ACCEPT)}
        ),
    },
    frozenset({"recipe"}),
)
