"""``envforge drafter fetch|inspect|compare|check`` end to end, against the local hub server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.drafter.test_drafter import TOKEN, Hub, hub  # noqa: F401  (module-scoped fixture: the local hub)

from envforge.cli import main
from envforge.cli.drafter import drafters_root


@pytest.fixture(autouse=True)
def _endpoint(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("NO_COLOR", "1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["drafter", *argv])
    out, err = capsys.readouterr()
    assert TOKEN not in out + err
    return code, out, err


def test_fetch_refuses_a_branch(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    code, out, err = run(capsys, "fetch", "test-org/drafter-a", "--revision", "main", "--dest", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (
        "error: revision 'main' of test-org/drafter-a is not a commit sha (40 hex digits); the hub "
        "was not contacted\n  hint: find the sha with `envforge drafter fetch test-org/drafter-a --revision "
        "main --allow-unpinned --dry-run` (or the repository's commit history on the hub) and pass it, "
        "or pass --allow-unpinned to take what 'main' points at and record the sha\n"
    )
    # The hint's command works: it prints the sha 'main' resolves to, downloading nothing.
    code, out, _ = run(capsys, "fetch", "test-org/drafter-a", "--revision", "main", "--allow-unpinned", "--dry-run")
    assert (code, out.splitlines()[0]) == (0, f"test-org/drafter-a@{hub.a} (unpinned: 'main' resolved to it)")


def test_fetch_unpinned_json_records_the_sha(
    hub: Hub,
    tmp_path: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys,
        "fetch",
        "test-org/drafter-a",
        "--revision",
        "dev",
        "--allow-unpinned",
        "--dest",
        str(tmp_path / "d"),
        "--json",
    )
    assert code == 0
    report = json.loads(out)
    assert report["schema"] == "envforge.drafter-fetch/1"
    assert (report["data"]["revision"], report["data"]["pinned"]) == (hub.dev, False)
    assert "[2/2] model.safetensors" in err
    assert TOKEN not in (tmp_path / "d" / "envforge-drafter.json").read_text()


def test_fetch_dry_run_lists_the_plan(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    code, out, _ = run(capsys, "fetch", "test-org/mixed", "--revision", hub.mixed, "--dry-run")
    assert code == 0
    assert out.splitlines()[0] == f"test-org/mixed@{hub.mixed} (pinned)"
    assert "  skip  pytorch_model.bin" in out.splitlines()
    assert not Path("drafters").exists()


def test_fetch_pickle_and_corrupt(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    code, _, err = run(capsys, "fetch", "test-org/pickle-only", "--revision", hub.pickle, "--dest", str(tmp_path))
    assert code == 2 and err.startswith(f"error: test-org/pickle-only@{hub.pickle} has only pickle weights")
    code, _, err = run(capsys, "fetch", "test-org/drafter-corrupt", "--revision", hub.corrupt, "--dest", str(tmp_path))
    assert code == 1 and "does not match the hub's metadata: sha256" in err


def test_inspect_remote(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    code, out, _ = run(capsys, "inspect", f"test-org/drafter-a@{hub.a}", "--cache-dir", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"test-org/drafter-a@{hub.a}  LlamaForCausalLMEagle3"
    assert "draft_vocab_size 32000" in lines[1]
    assert "EAGLE-3 checks: ok" in lines
    assert any(line.split() == ["d2t", "I64", "[32000]"] for line in lines)


def test_compare_exits_1_on_different_mappings(
    hub: Hub,
    tmp_path: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "compare", f"test-org/drafter-a@{hub.a}", f"test-org/drafter-b@{hub.b}", "--cache-dir", str(tmp_path)
    )
    assert code == 1
    assert "  draft positions mapping to different target tokens: 31,748 of 32,000" in out.splitlines()
    assert "  draft vocabularies as sets: A 32,000 tokens, B 32,000, overlap 252" in out.splitlines()
    code, out, _ = run(
        capsys,
        "compare",
        f"test-org/drafter-a@{hub.a}",
        f"test-org/drafter-a@{hub.a}",
        "--cache-dir",
        str(tmp_path),
        "--json",
    )
    assert code == 0 and json.loads(out)["data"]["vocab"]["different"] == 0


def test_check_against_target(hub: Hub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"hidden_size": 7168, "vocab_size": 163_840, "num_hidden_layers": 61}))
    code, out, _ = run(
        capsys, "check", f"test-org/drafter-a@{hub.a}", "--target", str(target), "--cache-dir", str(tmp_path)
    )
    assert code == 1
    assert "compatibility: 1 finding" in out
    assert "[target-hidden-size]" in out


def test_drafter_without_subcommand_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drafter"]) == 2
    assert "usage: envforge drafter" in capsys.readouterr().err


def test_fetch_default_dest_is_the_enclosing_projects_drafters(
    hub: Hub,
    tmp_path: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --dest the fetch goes where `verify --level drafter` looks offline: drafters/ of the project,
    also when run from a sub-directory of it; outside any project, drafters/ of the working directory."""
    project, outside = tmp_path / "proj", tmp_path / "elsewhere"
    (project / "recipes").mkdir(parents=True)
    (project / "docs" / "notes").mkdir(parents=True)
    outside.mkdir()
    assert drafters_root(project) == Path("drafters")
    assert drafters_root(project / "docs" / "notes") == project.resolve() / "drafters"
    assert drafters_root(outside) == Path("drafters")
    monkeypatch.chdir(project / "docs" / "notes")
    code, out, _ = run(capsys, "fetch", "test-org/drafter-a", "--revision", hub.a, "--json")
    assert code == 0
    dest = project.resolve() / "drafters" / "test-org--drafter-a" / hub.a
    assert json.loads(out)["data"]["dest"] == str(dest)
    assert (dest / "envforge-drafter.json").is_file() and not Path("drafters").exists()
    monkeypatch.chdir(outside)
    code, out, _ = run(capsys, "fetch", "test-org/drafter-a", "--revision", hub.a, "--json")
    assert (code, json.loads(out)["data"]["dest"]) == (0, f"drafters/test-org--drafter-a/{hub.a}")
    assert (outside / "drafters" / "test-org--drafter-a" / hub.a / "envforge-drafter.json").is_file()
