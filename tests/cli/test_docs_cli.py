"""docs/cli.md lists every command with its options, as the parser has them (issue 29).

The section "Every command and its options" of docs/cli.md is :func:`reference` of the parser, byte
for byte: a command, group, option or metavar added, renamed or removed without the docs fails here.
Regenerate the section after changing the parser: ``python -m tests.cli.test_docs_cli --write``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.cli.test_parser_tree import commands

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEAD = "## Every command and its options"
INTRO = (
    "Generated from the parser (`python -m tests.cli.test_docs_cli --write`; tests/cli/test_docs_cli.py "
    "fails when this section and the parser differ). `envforge COMMAND --help` shows the same."
)
_SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def _cell(text: str) -> str:
    """One line of a markdown table cell: ``|`` escaped, ``<recipe>`` kept visible (not an HTML tag)."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _shown(action: argparse.Action) -> str:
    """How ``--help`` names the argument: ``--project DIR``, ``-o PATH, --output PATH``, ``RECIPE``."""
    formatter = argparse.HelpFormatter("envforge")
    return formatter._format_action_invocation(action)


def _help(action: argparse.Action) -> str:
    return argparse.HelpFormatter("envforge")._expand_help(action) if action.help else ""


def reference() -> str:
    """The section: one heading per command and group, its one-line summary, then its arguments."""
    lines = [HEAD, "", INTRO, ""]
    for name, parser in commands():
        if name == "envforge":
            continue
        lines += [f"### `{name}`", "", _cell(parser.description or ""), ""]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            lines += ["Subcommands: " + ", ".join(f"`{s}`" for s in subs[0].choices) + ".", ""]
        bare = getattr(subs[0], "bare", None) if subs else None  # `envforge lock RECIPE`: the bare form's RECIPE
        positionals = [a for a in bare._actions if not a.option_strings] if bare is not None else []
        rows = [(_shown(a), _help(a)) for a in [*positionals, *parser._actions] if not isinstance(a, _SKIP)]
        if rows:
            lines += ["| argument | meaning |", "| --- | --- |"]
            lines += [f"| `{_cell(shown)}` | {_cell(text)} |" for shown, text in rows]
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _split(text: str) -> tuple[str, str, str]:
    start = text.index(HEAD)
    end = text.find("\n## ", start + len(HEAD))
    end = len(text) if end < 0 else end + 1
    return text[:start], text[start:end], text[end:]


def test_docs_cli_lists_every_command_with_its_options() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert HEAD in text, f"docs/cli.md has no '{HEAD}' section: python -m tests.cli.test_docs_cli --write"
    section = _split(text)[1]
    assert section.rstrip("\n") == reference().rstrip("\n"), (
        "docs/cli.md differs from the parser: python -m tests.cli.test_docs_cli --write"
    )


def test_the_reference_names_every_command_and_option() -> None:
    ref = reference()
    for name, parser in commands():
        if name != "envforge":
            assert f"### `{name}`" in ref
        for action in parser._actions:
            if not isinstance(action, _SKIP):
                assert f"| `{_cell(_shown(action))}` |" in ref
    assert "| `--project DIR` |" in ref and "| `-o PATH, --output PATH` |" in ref


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:  # regenerate the section in place
    head, _, tail = _split(DOC.read_text(encoding="utf-8"))
    DOC.write_text(head + reference() + ("\n" + tail if tail else ""), encoding="utf-8")
