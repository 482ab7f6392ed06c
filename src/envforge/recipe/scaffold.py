"""Projects from the embedded files: ``envforge init`` and ``envforge up`` outside a project.

The wheel ships the quickstart project under ``envforge/data/``: ``recipes/quickstart.toml``, the
patchsets it names and its committed lock (pyproject.toml, ``force-include``), so a plain ``pip
install envforge-stack`` can run the main job anywhere. An editable install reads the same files from
the source checkout. :func:`scaffold` copies them into a directory; it never overwrites a file.

``envforge up`` outside a project uses :func:`default_project_dir` (``$ENVFORGE_HOME``, else
``$XDG_DATA_HOME/envforge/default``, else ``~/.local/share/envforge/default``, as the XDG Base
Directory specification places user data); ``envforge init`` scaffolds the working directory and
adds ``.gitattributes`` (the lock textconv) and ``.gitignore`` (``envs/``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from envforge.core.errors import InputError
from envforge.recipe.load import load_recipe

__all__ = [
    "GITATTRIBUTES",
    "GITIGNORE",
    "TEXTCONV_COMMAND",
    "ScaffoldResult",
    "default_project_dir",
    "embedded_recipes",
    "embedded_root",
    "git_state",
    "scaffold",
]

TEXTCONV_COMMAND = "git config diff.pylock.textconv 'envforge lock textconv'"

GITATTRIBUTES = (
    "# envforge: `git diff` shows lock changes as a reviewer reads them; once per clone run\n"
    "#   git config diff.pylock.textconv 'envforge lock textconv'\n"
    "pylock.*.toml diff=pylock\n"
)
GITIGNORE = "# envforge: built environments (rebuild them with `envforge build`)\n/envs/\n"


@dataclass(frozen=True, slots=True)
class ScaffoldResult:
    """What :func:`scaffold` wrote (``created``) and what was already there (``kept``), as paths
    under ``root``, in the order written."""

    root: Path
    created: tuple[Path, ...]
    kept: tuple[Path, ...]


def embedded_root() -> Path:
    """The directory holding the embedded ``recipes/``, ``patchsets/`` and ``lockfiles/``: the
    package's ``data/`` in a wheel, the source checkout in an editable install.

    :raises InputError: neither has ``recipes/quickstart.toml`` (a broken installation).
    """
    packaged = Path(str(resources.files("envforge") / "data"))
    checkout = Path(__file__).resolve().parents[3]
    for root in (packaged, checkout):
        if (root / "recipes" / "quickstart.toml").is_file():
            return root
    raise InputError(
        f"this envforge installation has no embedded recipes (looked in {packaged})",
        hint="reinstall envforge: `pip install --force-reinstall envforge-stack`",
    )


def embedded_recipes() -> tuple[str, ...]:
    """Names of the embedded recipes, sorted."""
    return tuple(sorted(p.stem for p in (embedded_root() / "recipes").glob("*.toml")))


def default_project_dir(environ: Mapping[str, str]) -> Path:
    """Where ``envforge up`` outside a project keeps the quickstart project."""
    if environ.get("ENVFORGE_HOME"):
        return Path(environ["ENVFORGE_HOME"])
    data = environ.get("XDG_DATA_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".local" / "share")
    return Path(data) / "envforge" / "default"


def scaffold(root: Path, recipe: str | None = "quickstart", *, git_files: bool = True) -> ScaffoldResult:
    """Write an envforge project into ``root``: the embedded ``recipe``, the patchsets it names,
    its committed locks, empty ``recipes/``, ``patchsets/``, ``lockfiles/`` directories and, with
    ``git_files``, ``.gitattributes`` and ``.gitignore`` (appended to when they exist and lack
    the envforge lines). Existing files are kept, never overwritten. ``recipe=None``: the
    directories and git files only (``init --from-env`` writes its own recipe).

    :raises InputError: ``recipe`` is not embedded (the message lists the embedded ones).
    """
    source = embedded_root()
    files: list[Path] = []
    if recipe is not None:
        recipe_file = source / "recipes" / f"{recipe}.toml"
        if not recipe_file.is_file():
            raise InputError(
                f"no embedded recipe named '{recipe}'", hint=f"embedded recipes: {', '.join(embedded_recipes())}"
            )
        names = load_recipe(recipe_file).patchsets
        files = [
            recipe_file,
            *(source / "patchsets" / f"{n}.toml" for n in names),
            *sorted((source / "lockfiles").glob(f"pylock.{recipe}-*.toml")),
        ]
    created: list[Path] = []
    kept: list[Path] = []
    for sub in ("recipes", "patchsets", "lockfiles"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for src in files:
        dest = root / src.relative_to(source)
        if dest.exists():
            kept.append(dest)
            continue
        dest.write_bytes(src.read_bytes())
        created.append(dest)
    if git_files:
        for name, text in ((".gitattributes", GITATTRIBUTES), (".gitignore", GITIGNORE)):
            dest = root / name
            old = dest.read_text(encoding="utf-8") if dest.is_file() else ""
            if text.splitlines()[-1] in old.splitlines():
                kept.append(dest)
                continue
            dest.write_text(old + ("\n" if old and not old.endswith("\n") else "") + text, encoding="utf-8")
            created.append(dest)
    return ScaffoldResult(root, tuple(created), tuple(kept))


def git_state(root: Path) -> str:
    """Where ``root`` stands for the lock textconv, which ``git config`` can only set inside a
    repository: ``"no-repo"`` (not inside a git work tree, or no git executable), ``"unset"`` (in
    a repository without ``diff.pylock.textconv``) or ``"set"``. Reads only (gitpython)."""
    try:
        import git  # lazy: gitpython is heavy; only a project made in a git checkout needs it
    except ImportError:  # gitpython raises ImportError when no git executable is found
        return "no-repo"
    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return "no-repo"
    try:
        value = repo.config_reader().get_value('diff "pylock"', "textconv", default="")
    except Exception:  # an unreadable config: say the step is still to do
        value = ""
    return "set" if value else "unset"
