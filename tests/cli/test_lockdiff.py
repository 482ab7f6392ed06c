"""``envforge lock diff`` / ``envforge lock textconv`` end to end: files, git revisions in a real
temporary repository, variants, output formats, exit codes, and git's textconv hook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.cli import main

DATA = Path(__file__).parents[1] / "data" / "locks"
CU128 = DATA / "sglang-0.5.9" / "pylock.kimi-k25-sm120-cu128.toml"
CU130 = DATA / "sglang-0.5.9" / "pylock.kimi-k25-sm120-cu130.toml"
NEXT = DATA / "sglang-0.5.10" / "pylock.kimi-k25-sm120-cu128.toml"
LOCK = "lockfiles/pylock.kimi-k25-sm120-cu128.toml"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repo whose HEAD has the sglang 0.5.9 lock and whose working tree has 0.5.10."""
    root = tmp_path / "proj"
    (root / "lockfiles").mkdir(parents=True)
    (root / "recipes").mkdir()
    git(root, "init", "-q", "-b", "main")
    shutil.copy(CU128, root / LOCK)
    shutil.copy(CU130, root / "lockfiles")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "locks")
    shutil.copy(NEXT, root / LOCK)
    monkeypatch.chdir(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_paths_terminal_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lock", "diff", str(CU128), str(NEXT), "--exit-code")
    assert code == 1
    assert out.splitlines()[1].startswith("169 -> 183 packages: 16 added, 2 removed, 13 upgraded")
    code, _, _ = run(capsys, "lock", "diff", str(CU128), str(CU128), "--exit-code")
    assert code == 0
    code, _, _ = run(capsys, "lock", "diff", str(CU128), str(NEXT))
    assert code == 0


def test_json_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lock", "diff", str(CU128), str(CU130), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "envforge.lockdiff/3"
    (diff,) = doc["data"]["diffs"]
    assert diff["summary"] == {"local": 4, "replaced": 15, "upgraded": 2, "added": 1}


def test_rev_path_side_against_working_tree(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lock", "diff", f"HEAD:{LOCK}", LOCK, "--format", "markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"### Lock diff: `HEAD:{LOCK}` → `{LOCK}`"
    assert "| **sglang** | upgraded | `sglang` | 0.5.9 → 0.5.10 | patch |" in lines


def test_git_rev_lists_every_changed_lockfile(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "lockfiles" / "pylock.kimi-k25-sm120-cu130.toml").unlink()
    (repo / "notes.txt").write_text("not a lock")
    git(repo, "add", "notes.txt")
    code, out, _ = run(capsys, "lock", "diff", "--git", "HEAD", "--exit-code")
    assert code == 1
    assert f"lock diff: HEAD:{LOCK} -> {LOCK}" in out
    assert (
        "lock diff: HEAD:lockfiles/pylock.kimi-k25-sm120-cu130.toml -> (none)\nlockfile removed (170 packages)"
    ) in out


def test_git_errors(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lock", "diff", "nosuchrev:x.toml", LOCK)
    assert code == 2
    assert err.splitlines()[0] == f"error: unknown git revision 'nosuchrev' in {repo}"
    code, _, err = run(capsys, "lock", "diff", "HEAD:lockfiles/pylock.other.toml", LOCK)
    head = git(repo, "rev-parse", "HEAD")[:12]
    assert err.splitlines()[0] == (
        f"error: HEAD:lockfiles/pylock.other.toml: lockfiles/pylock.other.toml does not exist in revision HEAD ({head})"
    )


def test_conflicted_lock_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "pylock.x.toml"
    bad.write_text('<<<<<<< ours\nlock-version = "1.0"\n=======\n>>>>>>> theirs\n')
    code, _, err = run(capsys, "lock", "diff", str(CU128), str(bad))
    assert code == 2
    assert err.splitlines()[0] == (
        f"error: {bad}:1: merge-conflict marker '<<<<<<<': the lockfile was merged with unresolved conflicts"
    )


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lock", "diff", str(CU128))
    assert code == 2 and err.splitlines()[0] == "error: lock diff needs two sides, got 1"


def test_variants_matrix(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(CU128, repo / LOCK)
    code, out, _ = run(capsys, "lock", "diff", "kimi-k25-sm120", "--variants")
    rows = [" ".join(line.split()) for line in out.splitlines()]
    assert code == 0
    assert rows[0] == "kimi-k25-sm120: 2 variants (cu128, cu130); 148 packages identical, 22 differ"
    assert "torch 2.9.1 2.9.1+cu130 [pytorch-cu130]" in rows
    assert "nvidia-cublas 12.8.4.1 (-cu12) 13.0.0.19" in rows
    assert "cuda 12.8 13.0.1" in rows
    code, out, _ = run(capsys, "lock", "diff", "kimi-k25-sm120", "--variants", "--format", "json")
    assert json.loads(out)["schema"] == "envforge.lockdiff.matrix/1"


def test_textconv_in_a_real_git_repository(repo: Path) -> None:
    """`git diff` on a lockfile shows the readable form once .gitattributes and the config are set."""
    (repo / ".gitattributes").write_text("pylock.*.toml diff=pylock\nuv.lock diff=pylock\n")
    git(repo, "config", "diff.pylock.textconv", f"{sys.executable} -m envforge lock textconv")
    shutil.copy(CU130, repo / LOCK)
    out = git(repo, "diff", "--", LOCK)
    assert "-torch  2.9.1  files=1:" in out
    assert "+torch  2.9.1+cu130  index=pytorch-cu130  files=1:" in out
    assert "+cuda = 13.0.1" in out
    assert "upload-time" not in out and "hashes" not in out
    assert len(out.splitlines()) < 150


def test_textconv_falls_back_to_raw_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "pylock.x.toml"
    bad.write_text("<<<<<<< ours\n")
    code, out, err = run(capsys, "lock", "textconv", str(bad))
    assert (code, out) == (0, "<<<<<<< ours\n")
    assert err.startswith(f"warning: {bad}:1: merge-conflict marker")


def test_file_diff_never_imports_gitpython_and_validates_through_packaging_pylock_once(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom envforge.cli import main\n"
        f"main(['lock', 'diff', {str(CU128)!r}, {str(NEXT)!r}])\n"
        "print(sorted(m for m in ('git', 'packaging.pylock') if m in sys.modules))"
    )
    env = {**os.environ, "ENVFORGE_CACHE_DIR": str(tmp_path)}
    env.pop("ENVFORGE_NO_LOCK_CACHE", None)
    seen = [
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
        ).stdout.splitlines()[-1]
        for _ in range(2)
    ]
    assert seen == ["['packaging.pylock']", "[]"]  # validated the first time; the same bytes are not re-validated


def test_json_all_includes_metadata_churn(capsys: pytest.CaptureFixture[str]) -> None:
    uv = Path(__file__).parents[1] / "data" / "uv-locks"
    old, new = str(uv / "test-pkg-82fd4d6.uv.lock"), str(uv / "test-pkg-relock.uv.lock")
    _, out, _ = run(capsys, "lock", "diff", old, new, "--json")
    diff = json.loads(out)["data"]["diffs"][0]
    assert (diff["hidden"], diff["summary"]) == (6, {"upgraded": 2, "added": 1})
    _, out, _ = run(capsys, "lock", "diff", old, new, "--json", "--all")
    diff = json.loads(out)["data"]["diffs"][0]
    assert (diff["hidden"], diff["summary"]["metadata"]) == (0, 5)
    assert [s["subject"] for s in diff["settings"]] == ["options.exclude-newer", "revision"]


def envforge(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_git_diff_with_nothing_changed_prints_nothing_on_stdout(repo: Path) -> None:
    git(repo, "checkout", "-q", "--", LOCK)  # the working tree is main again
    for args in ((), ("--format", "markdown")):
        res = envforge(repo, "lock", "diff", "--git", "main", *args)
        assert (res.returncode, res.stdout, res.stderr) == (0, "", "no lockfile changed since main\n")
    res = envforge(repo, "lock", "diff", "--git", "main", "--exit-code")
    assert (res.returncode, res.stdout) == (0, "")


def test_variants_matrix_wraps_long_settings_cells_on_a_terminal_only(tmp_path: Path) -> None:
    """The repository's kimi-k25-sm120 locks: a 71-character digest and the cuda-exceptions list used
    to set 270-423 character columns; the terminal matrix wraps cells at 48 characters (continuation
    lines), markdown and JSON keep every value whole."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "lockfiles").mkdir()
    for lock in sorted((Path(__file__).parents[2] / "lockfiles").glob("pylock.kimi-k25-sm120-*.toml")):
        shutil.copy(lock, tmp_path / "lockfiles")
    res = envforge(tmp_path, "lock", "diff", "kimi-k25-sm120", "--variants")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    data = json.loads(envforge(tmp_path, "lock", "diff", "kimi-k25-sm120", "--variants", "--json").stdout)["data"]
    variants = len(data["variants"])
    subject = max(len(r["subject"]) for r in data["rows"]) + 2  # the subject column is never wrapped
    assert variants >= 2 and max(map(len, lines)) <= subject + variants * (48 + 2)
    (row,) = [r for r in data["rows"] if r["subject"] == "packages-digest"]
    cell = row["cells"][0]
    assert len(cell) == 71 and cell.startswith("sha256:")
    at = next(i for i, line in enumerate(lines) if line.startswith("  packages-digest "))
    assert [line[subject + 2 :].split("  ")[0] for line in lines[at : at + 2]] == [cell[:48], cell[48:]]
    assert lines[at + 1][: subject + 2].strip() == "" and lines[at + 2].startswith(
        "  "
    )  # continuation, then the next row
    exceptions = [r for r in data["rows"] if r["subject"] == "cuda-exceptions"]
    assert exceptions and max(len(c) for c in exceptions[0]["cells"]) > 100  # wrapped on the terminal
    markdown = envforge(tmp_path, "lock", "diff", "kimi-k25-sm120", "--variants", "--format", "markdown").stdout
    assert f"| `packages-digest` | {cell} | " in markdown


def test_a_locks_control_characters_are_shown_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An escape sequence or a newline in a lock's value never reaches the terminal or git diff raw:
    a newline would make textconv print a package line that is not in the lock."""
    base = (
        'lock-version = "1.0"\ncreated-by = "t"\n\n[[packages]]\nname = "six"\nversion = "1.16.0"\n'
        'wheels = [{ url = "https://h.example/six-1.16.0-py2.py3-none-any.whl", hashes = { sha256 = "'
        + "a" * 64
        + '" } }]\n\n[tool.envforge]\n'
    )
    old, new = tmp_path / "pylock.old.toml", tmp_path / "pylock.new.toml"
    old.write_text(base + 'recipe = "t"\n')
    new.write_text(base + 'recipe = "t\\u001b[31mRED\\nsix  9.9.9  files=1:000000000000\\r"\n')
    for argv in (
        ["lock", "diff", str(old), str(new)],
        ["lock", "diff", str(old), str(new), "--format", "markdown"],
        ["lock", "textconv", str(new)],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0 and "\x1b" not in out + err and "\r" not in out
        assert "\\x1b[31mRED\\nsix  9.9.9  files=1:000000000000" in out  # a trailing \\r may be trimmed
        assert not any(line.startswith("six  9.9.9") for line in out.splitlines())


@pytest.mark.parametrize("what", ["/dev/zero", "dir"])
def test_textconv_without_a_raw_text_to_show_is_exit_2(
    what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(what) if what.startswith("/") else tmp_path
    code, out, err = run(capsys, "lock", "textconv", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: lock {path} is ") and "Traceback" not in err
