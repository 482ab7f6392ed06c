"""Registration of ``envforge drafter fetch|inspect|compare|check`` (handlers: :mod:`envforge.cli.drafter`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.parser import group

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``drafter`` and its sub-commands on the top-level subparsers."""
    dsub = group(
        sub,
        "drafter",
        help=SUMMARIES["drafter"],
        description="EAGLE-3 drafters through huggingface_hub: pinned to a commit, "
        "safetensors only, re-hashed after download.",
    )
    f = dsub.add_parser(
        "fetch",
        help="download a drafter pinned to a commit sha and re-hash every file",
        description="Download the drafter REPO at commit --revision from the Hugging Face hub "
        "(safetensors and JSON only; pickle weights need --allow-pickle), hash every "
        "file again against the hub's metadata, and record what was fetched.",
    )
    f.add_argument("repo", metavar="REPO", help="hub repository, owner/name")
    f.add_argument(
        "--revision", required=True, metavar="REV", help="40-hex commit sha (a branch or tag needs --allow-unpinned)"
    )
    f.add_argument(
        "--dest",
        type=Path,
        default=None,
        metavar="DIR",
        help="target directory (default: drafters/<owner>--<name>/<sha> in the enclosing project, else here)",
    )
    f.add_argument("--dry-run", action="store_true", help="resolve and list the files, download nothing")
    _common(f, pickle=True)
    f.set_defaults(handler="envforge.cli.drafter:run_fetch")
    i = dsub.add_parser(
        "inspect",
        help="architecture, key config values and every tensor, from headers",
        description="Read a drafter's config.json and its safetensors headers (no weights are "
        "loaded; REPO@SHA reads them remotely by range request) and print its "
        "architecture, key config values and every tensor's name, dtype and shape.",
    )
    i.add_argument("drafter", metavar="DRAFTER", help="PATH or REPO@SHA")
    _common(i, pickle=True)
    i.set_defaults(handler="envforge.cli.drafter:run_inspect")
    c = dsub.add_parser(
        "compare",
        help="tensors, config and draft-vocabulary mapping of two drafters",
        description="Compare drafters A and B: tensors added, removed or reshaped, config values "
        "that differ, and whether their draft-vocabulary mappings (d2t) agree.",
    )
    c.add_argument("a", metavar="A", help="PATH or REPO@SHA")
    c.add_argument("b", metavar="B", help="PATH or REPO@SHA")
    _common(c)
    c.set_defaults(handler="envforge.cli.drafter:run_compare")
    k = dsub.add_parser(
        "check",
        help="compatibility with a target model (hidden size, vocab size, layers)",
        description="Check DRAFTER against the target model's config: hidden size, vocabulary "
        "size and layer layout the serving engine expects. Exit 1 with each finding.",
    )
    k.add_argument("drafter", metavar="DRAFTER", help="PATH or REPO@SHA")
    k.add_argument(
        "--target",
        required=True,
        metavar="MODEL_CONFIG",
        help="the target's config.json, a directory holding it, or REPO@SHA",
    )
    k.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="ENGINE[==VERSION]",
        help="judge the auxiliary layers for this engine version (sglang==0.5.9, vllm: the newest "
        "envforge has facts for); repeatable; default: every version envforge has facts for",
    )
    k.add_argument(
        "--trained-aux-layers",
        default=None,
        metavar="L,L,L",
        type=_layers,
        help="the target layers (0-based, whose input is fused) the drafter was trained on; "
        "default: what the newest SGLang and vLLM make of the file",
    )
    _common(k)
    k.set_defaults(handler="envforge.cli.drafter:run_check")


def _layers(text: str) -> list[int]:
    """``"2,30,58"`` -> ``[2, 30, 58]``; anything else is a usage error (exit 2)."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}': give layer numbers, like 2,30,58")
    return values


def _common(p: argparse.ArgumentParser, *, pickle: bool = False) -> None:
    p.add_argument(
        "--allow-unpinned", action="store_true", help="accept a branch or tag; the sha it resolves to is recorded"
    )
    if pickle:
        p.add_argument(
            "--allow-pickle",
            action="store_true",
            help="accept .bin/.pt pickle weights when no safetensors exist (can run code)",
        )
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="cache for remote configs (default: huggingface_hub's)",
    )
    p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
