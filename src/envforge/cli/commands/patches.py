"""Registration of ``envforge apply-patches`` and the ``patches`` group (handlers: :mod:`envforge.cli.patches`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import add_project_option
from envforge.cli.parser import group, output_file

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``apply-patches`` and the ``patches`` group (``export``, ``list``)."""
    p = sub.add_parser(
        "apply-patches",
        help=SUMMARIES["apply-patches"],
        description="Apply patchsets to ENV (default: the project's) or to "
        "--site-packages DIR. Without PATCHSET names: the patchsets the "
        "environment's lock lists, else every patchset whose distribution "
        "is installed.",
    )
    p.add_argument("names", nargs="*", metavar="[ENV] PATCHSET", help="environment, then patchset ids")
    p.add_argument("--site-packages", type=Path, metavar="DIR", help="patch this directory instead of ENV")
    p.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    p.add_argument(
        "--revert",
        action="store_true",
        help="restore the original files byte-exact; without PATCHSET names this also "
        "removes the environment's env profile hook (.pth or sitecustomize block)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--env-mode",
        choices=("pth", "sitecustomize"),
        default="pth",
        help="how the env profile recorded in the environment's lock is installed (default: pth)",
    )
    add_project_option(p)
    p.set_defaults(handler="envforge.cli.patches:_apply")

    commands = group(
        sub,
        "patches",
        help=SUMMARIES["patches"],
        description="The project's patchsets. Apply or revert them with `envforge apply-patches`.",
    )
    e = commands.add_parser(
        "export",
        help="write a patchset as a unified diff for upstream",
        description="Write PATCHSET as a plain unified diff against the released code of ENV "
        "(default: the project's) or --site-packages DIR, for an upstream pull "
        "request; `git apply --check` takes it.",
    )
    e.add_argument("patchset", metavar="PATCHSET", help="patchset id")
    e.add_argument(
        "env", nargs="?", metavar="ENV", help="environment name under envs/ or a path (default: the project's)"
    )
    e.add_argument(
        "--site-packages", type=Path, metavar="DIR", help="site-packages with the released code instead of ENV"
    )
    e.add_argument(
        "-o", "--output", type=output_file, metavar="PATH", help="write the diff to this file instead of stdout"
    )
    e.add_argument("--json", action="store_true", help="print the diff in a versioned JSON report on stdout")
    add_project_option(e)
    e.set_defaults(handler="envforge.cli.patches:_export")

    c = commands.add_parser(
        "check",
        help="evaluate patchsets on released wheels (before an upgrade)",
        description="Evaluate PATCHSETs (default: every patchset of the project whose "
        "distribution --against names) on the releases --against selects, read "
        "from their wheels (downloaded into a cache; nothing is installed), and "
        "print a patchset x release state matrix. Exit 1 when a cell is drifted "
        "or unavailable.",
    )
    c.add_argument("patchsets", nargs="*", metavar="PATCHSET", help="patchset ids (default: all that apply)")
    c.add_argument(
        "--against",
        action="append",
        required=True,
        metavar="REQ",
        help="a release (sglang==0.5.23) or a range walking every release on the index ('sglang>=0.5.8'); repeatable",
    )
    c.add_argument(
        "--index-url",
        default=None,
        metavar="URL",
        help="simple index to list and download from, or a local PEP 503 directory as file:///DIR (default: https://pypi.org/simple)",
    )
    c.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help="wheel and result cache (default: $ENVFORGE_CACHE_DIR or ~/.cache/envforge)",
    )
    c.add_argument("--format", choices=("text", "markdown"), default="text", help="table format (default: text)")
    c.add_argument(
        "--recipe",
        action="append",
        metavar="RECIPE",
        help="also say which patchsets this recipe's variants can retire (upstream-fixed on the "
        "release their lock holds, or will move to), with the retire-patchsets entry; repeatable",
    )
    c.add_argument("--json", action="store_true", help="print the matrix as JSON")
    add_project_option(c)
    c.set_defaults(handler="envforge.cli.patches:_check")

    d = commands.add_parser(
        "diff",
        help="the applied diff of an environment against the saved originals",
        description="Show what envforge changed in ENV (default: the project's) or "
        "--site-packages DIR: each patched file against the original bytes "
        "saved when it was patched. Exit 1 when a patched file changed since "
        "envforge wrote it.",
    )
    d.add_argument("env", nargs="?", metavar="ENV", help="environment name under envs/ or a path")
    d.add_argument("--site-packages", type=Path, metavar="DIR", help="this directory instead of ENV")
    d.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    add_project_option(d)
    d.set_defaults(handler="envforge.cli.patches:_diff")

    n = commands.add_parser(
        "new",
        help="copy an installed distribution's Python files into an edit directory",
        description="Copy the released Python files of DIST (as installed in ENV, before "
        "envforge's patches) into an edit directory; edit them, then turn the "
        "edit into a patchset with `envforge patches commit DIR`.",
    )
    n.add_argument("distribution", metavar="DIST", help="the installed distribution to edit, e.g. sglang")
    n.add_argument(
        "env", nargs="?", metavar="ENV", help="environment name under envs/ or a path (default: the project's)"
    )
    n.add_argument("--site-packages", type=Path, metavar="DIR", help="site-packages instead of ENV")
    n.add_argument("-o", "--output", type=Path, metavar="PATH", help="edit directory (default: ./DIST-VERSION-edit)")
    n.add_argument("--json", action="store_true", help="print the edit directory in a versioned JSON report on stdout")
    add_project_option(n)
    n.set_defaults(handler="envforge.cli.patches:_new")

    cm = commands.add_parser(
        "commit",
        help="write patchsets/NAME.toml from an edit directory",
        description="Turn the edits in DIR (made by `envforge patches new`) into "
        "patchsets/NAME.toml: each changed function, method or class becomes a "
        "replace-definition operation keyed by its qualified name and the digest "
        "of the original; a module-level edit becomes a replace-text operation "
        "anchored by its neighbours.",
    )
    cm.add_argument("directory", type=Path, metavar="DIR", help="the edit directory `envforge patches new` made")
    cm.add_argument("--id", required=True, metavar="NAME", help="patchset id (the file name)")
    cm.add_argument(
        "--reason", required=True, metavar="TEXT", help="why the patch is needed (recorded in the patchset)"
    )
    cm.add_argument("--versions", metavar="SPEC", help="version specifier (default: ==the edited release)")
    cm.add_argument("--force", action="store_true", help="overwrite an existing patchset file")
    cm.add_argument(
        "--json", action="store_true", help="print the patchset written in a versioned JSON report on stdout"
    )
    add_project_option(cm)
    cm.set_defaults(handler="envforge.cli.patches:_commit")

    im = commands.add_parser(
        "import",
        help="write patchsets/NAME.toml from a unified diff (an upstream change)",
        description="Apply the unified diff DIFF exactly (no fuzz) to the released files of "
        "ENV (default: the project's) or --site-packages DIR, and write the result "
        "as patchsets/NAME.toml of per-definition operations, as `patches commit` "
        "does, recording the diff's sha256 and origin. A hunk that does not match, "
        "or that the operations cannot express, is refused by name (exit 2).",
    )
    im.add_argument("diff", type=Path, metavar="DIFF", help="the unified diff (e.g. a pull request's .diff)")
    im.add_argument("--id", required=True, metavar="NAME", help="patchset id (the file name)")
    im.add_argument(
        "--reason", required=True, metavar="TEXT", help="why the patch is needed (recorded in the patchset)"
    )
    im.add_argument("--versions", metavar="SPEC", help="version specifier (default: ==the release it applies to)")
    im.add_argument("--origin", metavar="URL", help="where the diff comes from (default: its file name)")
    im.add_argument(
        "--upstream-prefix",
        default="",
        metavar="DIR",
        help="the import root's directory in the upstream repository, stripped from the diff's "
        "paths (python/ for sglang)",
    )
    im.add_argument(
        "env",
        nargs="?",
        metavar="ENV",
        help="environment whose released files the diff applies to (default: the project's)",
    )
    im.add_argument("--site-packages", type=Path, metavar="DIR", help="site-packages instead of ENV")
    im.add_argument("--force", action="store_true", help="overwrite an existing patchset file")
    im.add_argument(
        "--json", action="store_true", help="print the patchset written in a versioned JSON report on stdout"
    )
    add_project_option(im)
    im.set_defaults(handler="envforge.cli.patches:_import")

    ls = commands.add_parser(
        "list",
        help="list the project's patchsets",
        description="Every patchset under patchsets/: its id, the distribution and version "
        "specifier it patches, its digest, why it is needed and what it requires.",
    )
    ls.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    add_project_option(ls)
    ls.set_defaults(handler="envforge.cli.patches:_list")
