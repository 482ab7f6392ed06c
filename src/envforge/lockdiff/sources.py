"""Where the two sides of a lock diff come from: files, ``REV:PATH`` in git, ``--git REV``, variants.

Git is read through gitpython, imported only when a side names a revision (so diffing two files
never pays for it). ``REV:PATH`` follows git's own rule: the path is relative to the repository
root, or to ``base`` when it starts with ``./`` or ``../``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from envforge.core.errors import ExternalToolError, InputError
from envforge.core.textfile import decode_utf8, read_bytes
from envforge.lockdiff.model import Lock, parse_lock

__all__ = ["changed_lockfiles", "is_lockfile", "read_lock_file", "read_side", "recipe_index_names", "variant_locks"]

_SIDE_HINT = "a side is a lock path, REV:PATH (e.g. HEAD~1:lockfiles/pylock.NAME.toml), or use --git REV"


def is_lockfile(path: str) -> bool:
    """True for ``pylock.toml``, ``pylock.<name>.toml`` (PEP 751 names) and ``uv.lock``."""
    name = PurePosixPath(path).name
    return name == "uv.lock" or (name.startswith("pylock.") and name.endswith(".toml"))


def read_lock_file(path: Path, *, label: str | None = None) -> Lock:
    """Read and parse a lock from disk.

    :raises InputError: unreadable, not UTF-8, or not a lock (see :func:`model.parse_lock`).
    """
    shown = label or str(path)
    if not path.exists():
        raise InputError(f"{shown}: no such file", hint=_SIDE_HINT)

    return parse_lock(decode_utf8(read_bytes(path, what="lock"), label=shown), label=shown)


def read_side(spec: str, *, base: Path) -> Lock:
    """A lock from one side of ``envforge lock diff``: a path (relative to ``base``) or ``REV:PATH``.

    :raises InputError: no such file, unknown revision, path not in that revision, not a lock.
    :raises ExternalToolError: git is not installed.
    """
    path = base / spec
    if path.is_file() or ":" not in spec:
        return read_lock_file(path, label=spec)
    rev, _, rel = spec.partition(":")
    repo = _repo(base)
    commit = _commit(repo, rev)
    rel_path = _repo_relative(repo, base, rel)
    try:
        blob = commit.tree / rel_path
    except KeyError:
        raise InputError(
            f"{spec}: {rel_path} does not exist in revision {rev} ({commit.hexsha[:12]})",
            hint=f"the path after ':' is relative to the repository root {repo.working_tree_dir}; "
            f"list lockfiles with `git ls-tree -r --name-only {rev} lockfiles/`",
        ) from None
    return parse_lock(_decode(blob.data_stream.read(), spec), label=spec)


def changed_lockfiles(base: Path, rev: str) -> tuple[tuple[Lock | None, Lock | None], ...]:
    """Every lockfile that differs between ``rev`` and the working tree, as (old, new) pairs.

    ``None`` stands for the side where the file does not exist (added or deleted). Untracked
    lockfiles are not seen (as with ``git diff REV``).

    :raises InputError: not a git repository, unknown revision, a side that is not a lock.
    """
    repo = _repo(base)
    commit = _commit(repo, rev)
    out = repo.git.diff("--name-status", "--no-renames", commit.hexsha, "--")
    root = Path(str(repo.working_tree_dir))
    pairs = []
    for line in out.splitlines():
        status, _, rel = line.partition("\t")
        if not is_lockfile(rel):
            continue
        old = (
            None
            if status == "A"
            else parse_lock(_decode((commit.tree / rel).data_stream.read(), f"{rev}:{rel}"), label=f"{rev}:{rel}")
        )
        new = None if status == "D" else read_lock_file(root / rel, label=rel)
        pairs.append((old, new))
    return tuple(pairs)


def variant_locks(lockfiles_dir: Path, recipe: str) -> tuple[tuple[str, Lock], ...]:
    """The locks of every variant of ``recipe`` in ``lockfiles_dir``, ordered by variant name.

    Files are ``pylock.<recipe>-<variant>.toml``; a lock whose ``[tool.envforge] recipe`` names
    another recipe (``kimi`` vs ``kimi-large``) is skipped.

    :raises InputError: no lockfile of that recipe there.
    """
    found = []
    for path in sorted(lockfiles_dir.glob(f"pylock.{recipe}-*.toml")):
        lock = read_lock_file(path)
        owner = lock.envforge.get("recipe", recipe)
        if owner != recipe:
            continue
        variant = str(lock.envforge.get("variant") or path.name[len(f"pylock.{recipe}-") : -5])
        found.append((variant, lock))
    if not found:
        raise InputError(
            f"no lockfiles of recipe '{recipe}' in {lockfiles_dir}",
            hint=f"create them with `envforge lock {recipe}` (one per variant)",
        )
    return tuple(sorted(found, key=lambda item: item[0]))


def recipe_index_names(locks: Iterable[Lock | None], base: Path) -> dict[str, str]:
    """Index URL -> name from the recipes the locks name (``[tool.envforge] recipe``), read from
    ``recipes/<recipe>.toml`` of the project at or above ``base``: the recipe's ``indexes`` and
    every ``[variant.*] indexes``. A recipe that is missing or unreadable adds nothing (names are
    for display only)."""
    recipes = {lock.envforge.get("recipe") for lock in locks if lock is not None}
    names = [r for r in recipes if isinstance(r, str) and r]
    if not names:
        return {}
    import tomllib  # lazy: only with index names to look up (tomllib's patterns: about 3 ms)

    # lazy: it loads the recipe modules
    from envforge.recipe.project import find_project

    recipes_dir = find_project(base).recipes_dir
    out: dict[str, str] = {}
    for recipe in sorted(names):
        try:
            doc = tomllib.loads((recipes_dir / f"{recipe}.toml").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # TOMLDecodeError, UnicodeDecodeError, a number too long to convert
            continue
        variants = doc.get("variant")
        tables = (
            [doc.get("indexes"), *(v.get("indexes") for v in variants.values() if isinstance(v, Mapping))]
            if isinstance(variants, Mapping)
            else [doc.get("indexes")]
        )
        for table in tables:
            if isinstance(table, Mapping):
                out.update((str(url).rstrip("/"), str(name)) for name, url in table.items())
    return out


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text: {exc}") from None


def _repo(base: Path) -> Any:
    try:
        import git  # lazy: gitpython is heavy; loaded only for git revisions
    except ImportError as exc:  # gitpython raises ImportError when no git executable is found
        raise ExternalToolError(
            "git is needed to read lockfiles from revisions",
            tool="git",
            argv=["git"],
            returncode=None,
            stderr_tail=str(exc),
            hint="install git, or pass two lock paths",
        ) from None
    try:
        return git.Repo(base, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise InputError(
            f"{base} is not inside a git repository", hint="run from a git checkout, or pass two lock paths"
        ) from None


def _commit(repo: Any, rev: str) -> Any:
    import git  # lazy: gitpython is heavy; loaded only for git revisions

    try:
        return repo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError):
        raise InputError(
            f"unknown git revision '{rev}' in {repo.working_tree_dir}",
            hint="name a commit, branch or tag: see `git log --oneline`",
        ) from None


def _repo_relative(repo: Any, base: Path, rel: str) -> str:
    if not rel.startswith(("./", "../")):
        return rel
    root = Path(str(repo.working_tree_dir)).resolve()
    target = (base / rel).resolve()
    return target.relative_to(root).as_posix()
