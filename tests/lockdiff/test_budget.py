"""Real lock shapes that were misread, changes many entries share said once, and a reviewer's budget
(markdown within one GitHub comment, no line over 200 characters) on a 5,000-entry diff."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.lockdiff.budget import MAX_COMMENT, MAX_LINE, fit_line
from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.model import Lock, parse_lock
from envforge.lockdiff.render import diff_data, render_markdown, render_terminal, render_textconv

DATA = Path(__file__).parents[1] / "data" / "lockdiff"
UV_HEAD = 'version = 1\nrevision = 3\nrequires-python = ">=3.12"\n'
SIX = (
    '[[package]]\nname = "six"\nversion = "1.17.0"\nsource = { registry = "https://pypi.org/simple" }\n'
    'wheels = [{ url = "https://files.pythonhosted.org/packages/b7/six-1.17.0-py2.py3-none-any.whl", '
    'hash = "sha256:' + "1" * 64 + '" }]\n'
)


def uv(text: str, label: str) -> Lock:
    return parse_lock(UV_HEAD + text, label=label)


def override(cu: str) -> str:
    return (
        f'[manifest]\noverrides = [{{ name = "torch", specifier = ">=2.9.0", '
        f'index = "https://download.pytorch.org/whl/{cu}" }}]\n\n' + SIX
    )


def test_a_manifest_override_moving_index_is_a_change() -> None:
    a, b = uv(override("cu128"), "old.lock"), uv(override("cu130"), "new.lock")
    diff = diff_locks(a, b)
    assert diff.has_changes()
    assert render_terminal(diff, width=None).split("\n")[1:] == [
        "1 -> 1 package: 1 lock setting",
        "lock settings ([tool.envforge] and header)",
        "  manifest.overrides torch: torch >=2.9.0 {index=https://download.pytorch.org/whl/cu128} -> "
        "torch >=2.9.0 {index=https://download.pytorch.org/whl/cu130}",
    ]
    assert render_textconv(a) != render_textconv(b)


def test_a_switch_to_an_editable_source_is_no_downgrade() -> None:
    url = (
        "https://github.com/vllm-project/vllm/releases/download/v0.25.1/vllm-0.25.1-cp38-abi3-manylinux_2_28_x86_64.whl"
    )
    a = uv(
        f'[[package]]\nname = "vllm"\nversion = "0.25.1"\nsource = {{ url = "{url}" }}\n'
        f'wheels = [{{ url = "{url}", hash = "sha256:{"1" * 64}" }}]\n',
        "old.lock",
    )
    b = uv('[[package]]\nname = "vllm"\nsource = { editable = "../vllm" }\n', "new.lock")
    r = uv(
        '[[package]]\nname = "vllm"\nversion = "0.25.1"\nsource = { registry = "https://pypi.org/simple" }\n',
        "registry.lock",
    )
    assert render_terminal(diff_locks(a, b), width=None).split("\n")[1:] == [
        "1 -> 1 package: 1 source",
        "other (1 source)",
        f"  source  vllm  0.25.1 -> (no version)  source url {url} -> editable ../vllm; "
        "wheels -linux x86_64, -cp38-abi3",
    ]
    assert render_terminal(diff_locks(r, b), width=None).split("\n")[2:] == [
        "other (1 source)",
        "  source  vllm  0.25.1 -> (no version)  source registry pypi -> editable ../vllm",
    ]
    assert render_terminal(diff_locks(b, r), width=None).split("\n")[3] == (
        "  source  vllm  (no version) -> 0.25.1  source editable ../vllm -> registry pypi"
    )


def networkx(first: str, second: str) -> str:
    return (
        "resolution-markers = [\"python_full_version >= '3.11'\", \"python_full_version < '3.11'\"]\n"
        '[[package]]\nname = "networkx"\nversion = "3.4.2"\nsource = { registry = "https://pypi.org/simple" }\n'
        f'resolution-markers = ["{first}", "{second}"]\n'
    )


def test_reordered_resolution_markers_are_no_change() -> None:
    linux, darwin = "sys_platform == 'linux'", "sys_platform == 'darwin'"
    diff = diff_locks(uv(networkx(darwin, linux), "a"), uv(networkx(linux, darwin), "b"))
    assert not diff.has_changes(show_all=True)
    moved = diff_locks(uv(networkx(darwin, linux), "a"), uv(networkx(linux, "sys_platform == 'win32'"), "b"))
    assert [(c.kind, c.marker_changed) for c in moved.packages] == [("marker", True)]


def test_empty_hashes_hint_names_the_real_fix() -> None:
    text = (
        'lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "six"\nversion = "1.17.0"\n'
        'wheels = [{ url = "https://download.pytorch.org/whl/six-1.17.0-py2.py3-none-any.whl", hashes = {} }]\n'
    )
    with pytest.raises(InputError) as err:
        parse_lock(text, label="pylock.toml")
    assert err.value.message == (
        "pylock.toml is not a valid PEP 751 lock at `packages[0].wheels[0].hashes`: At least one hash must be provided"
    )
    assert err.value.hint == (
        "the index served this file without a hash and the exporter wrote `hashes = {}`: re-export with a uv "
        "that hashes such files (`uv export --format pylock.toml`, astral-sh/uv#20146), or serve hashes from "
        "the index (`#sha256=` URL fragments, PEP 691)"
    )


def with_markers(text: str, marker: str) -> str:
    """The notebook lock with ``marker`` on every entry (after its version line)."""
    return re.sub(r'^(version = "[^"]*")$', rf'\1\nmarker = "{marker}"', text, flags=re.MULTILINE)


def test_a_marker_rewrite_of_235_entries_is_one_line() -> None:
    text = (DATA / "notebook-235-old.toml").read_text()
    a = parse_lock(with_markers(text, "sys_platform == 'linux'"), label="old")
    b = parse_lock(with_markers(text, "sys_platform == 'linux' and platform_machine == 'x86_64'"), label="new")
    diff = diff_locks(a, b)
    out = render_terminal(diff).split("\n")
    assert out[:3] == [
        "lock diff: old -> new",
        "235 -> 235 packages: 1 shared change (235 packages at most)",
        "235 packages: marker \"sys_platform == 'linux'\" -> \"sys_platform == 'linux' and platform_machine == "
        "'x86_64'\" (absl-py,",
    ]
    assert len(out) == 5 and diff.packages == ()
    assert out[4] == "      more (--all or --json lists them))"
    shared = diff_data(diff)["shared"]
    assert [(g["what"], len(g["packages"])) for g in shared] == [("marker", 235)]


def big_uv(n: int, marker: str, *, bump: bool) -> str:
    parts = [UV_HEAD]
    for i in range(n):
        v = f"1.{i % 7}.{1 if bump and i % 2 == 0 else 0}"
        parts.append(
            f'[[package]]\nname = "pkg-{i:05d}"\nversion = "{v}"\n'
            f'source = {{ registry = "https://pypi.org/simple" }}\n'
            f'dependencies = [{{ name = "pkg-{(i + 1) % n:05d}", marker = "{marker}" }}]\n'
            f'wheels = [{{ url = "https://files.pythonhosted.org/p/pkg_{i:05d}-{v}-py3-none-any.whl", '
            f'hash = "sha256:{i:064x}" }}]\n'
        )
    return "\n".join(parts)


def test_budgets_on_a_5000_entry_diff() -> None:
    long_marker = " and ".join(f"platform_release != 'r{j}'" for j in range(12))
    a = parse_lock(big_uv(5000, "sys_platform == 'linux'", bump=False), label="old.lock")
    b = parse_lock(big_uv(5000, long_marker, bump=True), label="new.lock")
    diff = diff_locks(a, b)
    md = render_markdown(diff)
    assert len(md) <= MAX_COMMENT
    for text in (md, render_terminal(diff), render_terminal(diff, show_all=True), render_textconv(b)):
        assert max(len(line) for line in text.split("\n")) <= MAX_LINE
    term = render_terminal(diff).split("\n")
    assert term[1] == "5000 -> 5000 packages: 1 shared change (5000 packages at most), 2500 upgraded"
    assert sum("5000 packages: dependency edges' marker" in line for line in term) == 1
    assert sum(line.startswith("  upgraded  pkg-") for line in term) == 2500
    data = diff_data(diff)
    assert [(g["what"], len(g["packages"])) for g in data["shared"]] == [("dependency-marker", 5000)]
    assert len(data["changes"]) == 2500 and all(c["dependencies"] == [] for c in data["changes"])
    assert len(json.dumps(data)) > MAX_COMMENT  # the JSON has it all
    lines = md.split("\n")
    assert "- **5000 packages**: dependency edges' marker" in md
    assert any("pkg-04999" in line for line in lines)  # every name of the shared change
    cut = [line for line in lines if "not shown" in line]
    assert len(cut) == 1 and re.fullmatch(
        r"_\d+ more package changes are not shown: one GitHub comment holds 65,536 characters; "
        r"`envforge lock diff --json` has them all\._",
        cut[0],
    )
    shown = sum(line.startswith("| ") and "| upgraded |" in line for line in lines)
    assert shown + int(cut[0][1:].split()[0]) == 2500


def test_fit_line_keeps_two_long_lines_apart() -> None:
    a, b = "x" * 300 + "a" + "y" * 100, "x" * 300 + "b" + "y" * 100
    assert len(fit_line(a)) == 200 and fit_line(a) != fit_line(b)
    assert fit_line("short") == "short"


def test_thousands_of_shared_changes_stay_within_one_comment() -> None:
    def lock(new: bool) -> str:
        parts = []
        for i in range(6000):  # every third entry gains the same edge: 2,000 shared changes of 3
            deps = ", ".join(f'{{ name = "dep-{i // 3}-{k}" }}' for k in range(2 if new else 1))
            parts.append(
                f'[[package]]\nname = "p{i:05d}"\nversion = "1.0"\n'
                f'source = {{ registry = "https://pypi.org/simple" }}\ndependencies = [{deps}]\n'
            )
        return "\n".join(parts)

    diff = diff_locks(uv(lock(False), "a"), uv(lock(True), "b"))
    assert len(diff.shared) == 2000 and diff.packages == ()
    md = render_markdown(diff)
    assert len(md) <= MAX_COMMENT and max(len(line) for line in md.split("\n")) <= MAX_LINE
    cut = [line for line in md.split("\n") if "not shown" in line]
    shown = md.count("- **3 packages**: dependencies +dep-")
    assert (
        cut
        == [
            f"_{2000 - shown} more shared changes are not shown: one GitHub comment holds 65,536 "
            "characters; `envforge lock diff --json` has them all._"
        ]
        and shown > 100
    )


# Field cases U02-U04 (inputs in tests/data/lockdiff/u02..u04, from the field cases handed over).
U = DATA


def _md_of(old: str, new: str) -> str:
    return render_markdown(
        diff_locks(parse_lock((U / old).read_text(), label=old), parse_lock((U / new).read_text(), label=new))
    )


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        (
            "u03/old-groups.toml",
            "u03/new-groups.toml",
            '  marker  uvloop  0.23.0  marker \'sys_platform != "win32" and "default" in dependency_groups\' -> '
            '\'sys_platform != "win32" and platform_python_implementation == "CPython" and "default" in dependency_groups '
            'or (sys_platform != "cygwin" and sys_platform != "win32") and platform_python_implementation != "PyPy" and '
            '"default" in dependency_groups\'',
        ),
        (
            "u03/old-extra.toml",
            "u03/new-linux.toml",
            '  marker  uvloop  0.23.0  marker \'sys_platform == "emscripten" and "hf" in extras\' -> '
            '\'sys_platform == "linux" and "hf" in extras\'',
        ),
        (
            "u03/old-plain.toml",
            "u03/old-groups.toml",
            "  marker  uvloop  0.23.0  marker 'sys_platform != \"win32\"' -> "
            '\'sys_platform != "win32" and "default" in dependency_groups\'',
        ),
    ],
)
def test_u03_a_change_of_a_marker_with_extras_or_groups_is_named(old: str, new: str, line: str) -> None:
    d = diff_locks(parse_lock((U / old).read_text(), label=old), parse_lock((U / new).read_text(), label=new))
    assert d.has_changes()
    assert render_terminal(d, width=None).splitlines()[1:] == ["1 -> 1 package: 1 marker", "other (1 marker)", line]


def test_u04_a_hash_lost_is_no_rebuild_and_says_which_side_lost_it() -> None:
    old, new = (parse_lock((U / "u04" / n).read_text(), label=n) for n in ("old.lock", "new.lock"))
    lost, gained = diff_locks(old, new), diff_locks(new, old)
    assert render_terminal(lost, width=None).splitlines()[1:] == [
        "1 -> 1 package: 1 HASHES REMOVED",
        "torch family (1 HASHES REMOVED)",
        "  ! HASHES REMOVED  torch  2.6.0+cu126  same files, no hash: the lock no longer verifies "
        "torch-2.6.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl",
    ]
    assert render_terminal(gained, width=None).splitlines()[1:] == [
        "1 -> 1 package: 1 hashes added",
        "torch family (1 hashes added)",
        "  hashes added  torch  2.6.0+cu126  same files, now verified by hash: "
        "torch-2.6.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl",
    ]
    [change] = diff_data(lost)["changes"]
    assert (change["kind"], change["flagged"]) == ("hashes-removed", True)
    assert diff_data(gained)["changes"][0]["kind"] == "hashes-added"


def _pylock_with(marker: str) -> str:
    return (
        'lock-version = "1.0"\ncreated-by = "pdm"\n\n[[packages]]\nname = "six"\nversion = "1.17.0"\n'
        f"marker = '{marker}'\n"
        'wheels = [{ name = "six-1.17.0-py2.py3-none-any.whl", url = "https://files.pythonhosted.org/'
        'packages/b7/six-1.17.0-py2.py3-none-any.whl", hashes = { sha256 = "' + "1" * 64 + '" } }]\n'
    )


def test_a_long_marker_change_keeps_the_arrow_and_where_it_differs_and_the_whole_in_details() -> None:
    common = " and ".join(f'platform_release != "r{k}"' for k in range(20))
    tail = " and ".join(f'platform_version != "v{k}"' for k in range(20))
    old_marker = f'{common} and sys_platform == "linux" and {tail}'
    new_marker = f'{common} and sys_platform == "win32" and {tail}'
    d = diff_locks(parse_lock(_pylock_with(old_marker), label="a"), parse_lock(_pylock_with(new_marker), label="b"))
    md = render_markdown(d)
    assert max(len(line) for line in md.splitlines()) <= MAX_LINE
    [row] = [line for line in md.splitlines() if line.startswith("| **other** |")]
    assert row == (
        '| **other** | marker | `six` | 1.17.0 | marker …9" and sys_platform == "linux" and '
        'platform_version !… → …9" and sys_platform == "win32" and platform_version !… |'
    )
    details = md.split("<details><summary>whole values of the shortened markers</summary>")[1]
    whole = " ".join(line.strip() for line in details.splitlines())
    assert f"marker '{old_marker}' → '{new_marker}'" in whole


def test_the_summary_line_is_wrapped_never_cut() -> None:
    kinds = {"a": ("1.0", "2.0"), "b": ("2.0", "1.0"), "c": ("1.0", "1.0+x")}

    def pylock(side: int) -> str:
        out = 'lock-version = "1.0"\ncreated-by = "x"\nrequires-python = ">=3.%d"\n' % (10 + side)
        for name, versions in kinds.items():
            v = versions[side]
            out += (
                f'\n[[packages]]\nname = "{name}"\nversion = "{v}"\nwheels = [{{ name = "{name}-{v}-py3-none-any.whl", '
                f'url = "https://x/{name}-{v}-py3-none-any.whl", hashes = {{ sha256 = "{"1" * 64}" }} }}]\n'
            )
        return out

    d = diff_locks(parse_lock(pylock(0), label="a" * 150), parse_lock(pylock(1), label="b"))
    summary = "3 -> 3 packages: 1 upgraded, 1 downgraded, 1 local label, 1 lock setting"
    assert render_terminal(d, width=40).splitlines()[1:4] == [
        "3 -> 3 packages: 1 upgraded, 1",
        "  downgraded, 1 local label, 1 lock",
        "  setting",
    ]
    assert render_markdown(d).split("\n\n")[1] == summary.replace(" -> ", " → ")


def test_shorten_pair_keeps_both_sides_apart() -> None:
    from envforge.lockdiff.budget import shorten_pair

    assert shorten_pair("a", "b") == ("a", "b")
    x, y = shorten_pair("p" * 100 + "X" + "s" * 100, "p" * 100 + "Y" + "s" * 100, limit=40)
    assert (x, y) == ("…" + "p" * 19 + "X" + "s" * 19 + "…", "…" + "p" * 19 + "Y" + "s" * 19 + "…")
    x, y = shorten_pair("p" * 100 + "X" + "s" * 100, "p" * 100 + "Y" + "s" * 100, limit=200)
    assert (x, y) == ("…" + "p" * 24 + "X" + "s" * 24 + "…", "…" + "p" * 24 + "Y" + "s" * 24 + "…")
    x, y = shorten_pair("q" * 300, "r" * 300, limit=41)
    assert (x, y) == ("q" * 19 + " … " + "q" * 19, "r" * 19 + " … " + "r" * 19)
