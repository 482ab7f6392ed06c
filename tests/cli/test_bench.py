"""``envforge bench``'s outputs on a real full filesystem (issue 41): a whole run's report was lost when
the disk was full at the end (the pre-check's empty trial file fit), and a 0-byte plot was left.

The filesystem is a real tmpfs of 256 KiB, filled to the last byte; mounting one needs root
(CAP_SYS_ADMIN), so the tests skip elsewhere, saying so.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.bench_reports import report

from envforge.cli.bench import _write
from envforge.cli.output import Ui
from envforge.core.errors import ExternalToolError


def _fill(directory: Path) -> None:
    with open(directory / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass  # the filesystem is full


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "full"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        _fill(where)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def _ui() -> tuple[Ui, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Ui(out=out, err=err), out, err


def _args(plot: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(no_plot=plot is None, plot=plot, csv=None)


def test_a_report_the_full_disk_refuses_is_kept_in_the_state_directory(
    full: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ui, out, err = _ui()
    rep = report()
    with pytest.raises(ExternalToolError) as stopped:
        _write(rep, full / "r.json", _args(), ui)
    (kept,) = (tmp_path / "state" / "envforge" / "bench-reports").iterdir()
    assert (
        stopped.value.message == f"--output {full / 'r.json'}: No space left on device; the report was kept at {kept}"
    )
    assert err.getvalue() == (
        f"warning: the report could not be written to {full / 'r.json'} (No space left on "
        f"device): it was written to {kept}\n"
    )
    assert json.loads(kept.read_text())["data"] == rep.as_dict()
    assert sorted(p.name for p in full.iterdir()) == ["filler"]  # no temp file, no half report
    assert out.getvalue() == ""


def test_with_nowhere_to_write_the_report_is_printed_whole(full: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(full / "state"))
    ui, out, err = _ui()
    rep = report()
    with pytest.raises(ExternalToolError) as stopped:
        _write(rep, full / "r.json", _args(), ui)
    assert stopped.value.message.endswith("; the report was kept at standard output")
    assert json.loads(out.getvalue())["data"] == rep.as_dict()
    assert err.getvalue().endswith(
        f"nor to {full / 'state' / 'envforge' / 'bench-reports'}: it is on standard output above, whole\n"
    )


def test_a_plot_the_full_disk_refuses_leaves_no_file(full: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the plot extra is not installed")
    ui, _, err = _ui()
    output = tmp_path / "r.json"
    _write(report(), output, _args(full / "r.png"), ui)
    assert json.loads(output.read_text())["data"] == report().as_dict()
    assert err.getvalue().splitlines()[-1] == (
        f"warning: no plot: {full / 'r.png'}: No space left on device (the report is whole)"
    )
    assert sorted(p.name for p in full.iterdir()) == ["filler"]
    assert os.statvfs(full).f_bavail == 0


def test_bench_env_reads_the_recipe_env_was_built_from(tmp_path: Path) -> None:
    """Issue 44: `bench ENV` read the project's default recipe, not the one ENV was built from. Two
    recipes; b's environment is built by the real uv from a local index; `bench b-default --url` (nothing
    listens there) says which recipe it reads and uses b's [verify.smoke] model."""
    from tests.support.localindex import LocalIndex, make_wheel, serve  # noqa: PLC0415

    idx = LocalIndex(tmp_path / "index")
    idx.add(make_wheel(tmp_path / "w", "model-kernels", "1.0"))
    proj = tmp_path / "p"
    (proj / "recipes").mkdir(parents=True)
    (proj / "envforge.toml").write_text('[project]\ndefault = "a"\n')

    def envforge(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "envforge", *args], cwd=proj, capture_output=True, text=True, timeout=300
        )

    with serve(idx):
        for name in ("a", "b"):
            (proj / "recipes" / f"{name}.toml").write_text(
                f'[recipe]\nname = "{name}"\npython = "3.12"\n\n[indexes]\npypi = "{idx.url}"\n\n'
                f'[packages]\nmodel-kernels = "==1.0"\n\n[verify.smoke]\nmodel = "model-of-{name}"\n'
            )
        assert envforge("lock", "b").returncode == 0
        assert envforge("build", "b").returncode == 0
    res = envforge(
        "bench", "b-default", "--url", "http://127.0.0.1:9", "--no-plot", "--output", str(tmp_path / "r.json")
    )
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines()[0] == "b-default: recipe b, variant default (what its generation was built from)"


def _sharegpt_config(tmp_path: Path, model: str, output_lengths: str = "natural") -> object:
    from envforge.bench.config import load_prompts, url_config

    path = tmp_path / "sharegpt.json"
    path.write_text(
        json.dumps(
            [
                {"conversations": [{"value": "one two three four"}, {"value": "five six seven eight"}]},
                {"conversations": [{"value": "nine ten eleven twelve"}, {"value": "x"}]},
            ]
        )
    )
    prompts, digest = load_prompts(path)
    return url_config(api="openai", model=model).with_overrides(
        prompts=prompts, prompts_digest=digest, output_lengths=output_lengths
    )


def test_natural_sharegpt_lengths_need_the_tokenizer_and_say_what_they_use(tmp_path: Path) -> None:
    from tests.support.bench_support import make_tiny_model

    from envforge.cli.bench import _replies

    args = argparse.Namespace(max_new_tokens=None, tokenizer=None)
    ui, _, err = _ui()
    cfg = _sharegpt_config(tmp_path, "some/hub-model")
    assert _replies(cfg, args, {}, None, ui) is cfg  # type: ignore[arg-type]
    assert err.getvalue() == (
        "warning: natural lengths from a ShareGPT file: model 'some/hub-model' is not a "
        "directory with a tokenizer.json and no --tokenizer is given, so every request asks for "
        "128 tokens instead of its reply's length\n"
    )
    model = make_tiny_model(tmp_path / "m")
    ui, _, err = _ui()
    got = _replies(_sharegpt_config(tmp_path, str(model)), args, {}, None, ui)  # type: ignore[arg-type]
    assert [(p.text, p.input_len, p.output_len) for p in got.prompts] == [("one two three four", 4, 4)]
    assert got.per_request and [p.output_len for p in got.draw_requests(0, 3)] == [4, 4, 4]
    assert "1 of 2 prompts left out" in err.getvalue()
    ui, _, err = _ui()
    fixed = argparse.Namespace(max_new_tokens=16, tokenizer=None)  # vLLM's --sharegpt-output-len: fixed lengths
    cfg = _sharegpt_config(tmp_path, str(model))
    assert _replies(cfg, fixed, {}, None, ui) is cfg and err.getvalue() == ""  # type: ignore[arg-type]
    cfg = _sharegpt_config(tmp_path, str(model), "exact")
    assert _replies(cfg, args, {}, None, ui) is cfg and not cfg.per_request  # type: ignore[arg-type]
