"""``envforge fleet`` without a cluster: what the driver refuses before any fan-out (exit 2, the local
commands' wording), the reports rendered from literal ``FleetReport`` objects (one JSON document for
``fleet verify --level gpu``, node hints, build generations), the all-reduce task without torch, and
a well-formed address where no Ray GCS answers (exit 3 within seconds, one error line, no Ray log
lines). The real multi-node cluster is tests/fleet/test_driver.py's."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.cli import main
from envforge.cli.fleet import render_text, verify_data
from envforge.fleet.report import FleetNode, FleetReport, allreduce_node, node_answer
from envforge.fleet.tasks import allreduce_task, node_error
from envforge.core.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
RAY_FORM = (
    "must be HOST:PORT (the GCS address `ray start --head` prints, e.g. 10.0.0.1:6379) or auto, PORT from 1 to 65535"
)
ENV_HINT = (
    "  hint: give the name of the environment under envs/ on every node, e.g. quickstart-default "
    "(`envforge envs` lists them)"
)


def _last_lines(capsys: pytest.CaptureFixture[str], n: int) -> list[str]:
    return capsys.readouterr().err.splitlines()[-n:]


# ---- --ray -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "garbage",
        "",
        "http://127.0.0.1:8265",
        "127.0.0.1:99999",
        "127.0.0.1:0",
        "127.0.0.1:",
        ":6379",
        "ray://127.0.0.1:10001",
        "::1:6379",
        "host name:6379",
        "127.0.0.1:６３７９",
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["fleet", "verify", "quickstart-default"],
        ["fleet", "build", "quickstart"],
        ["fleet", "allreduce"],
        ["fleet", "agent", "start"],
        ["fleet", "agent", "stop"],
    ],
)
def test_a_malformed_ray_address_is_a_usage_error(
    command: list[str], address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--ray", address]) == 2
    assert _last_lines(capsys, 1) == [f"error: argument --ray: {RAY_FORM}, got {address!r}"]


@pytest.mark.parametrize(
    "address", ["auto", "127.0.0.1:6379", "head-0.cluster.local:6379", "[::1]:6379", "h:1", "h:65535"]
)
def test_well_formed_ray_addresses_parse(address: str) -> None:
    from envforge.cli import build_parser

    assert build_parser("fleet").parse_args(["fleet", "verify", "e", "--ray", address]).ray == address


# ---- what the driver refuses before any fan-out ------------------------------------------------


def _verify(*argv: str) -> list[str]:
    return ["fleet", "verify", *argv, "--ray", "127.0.0.1:1", "--project", str(ROOT)]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            _verify("quickstart-default", "--level", "bogus"),
            ["error: unknown verify level bogus", "  hint: levels: static, gpu, drafter"],
        ),
        (
            _verify("quickstart-default", "--level", "static,GPU,x"),
            ["error: unknown verify level GPU, x", "  hint: levels: static, gpu, drafter"],
        ),
        (_verify("", "--level", "static"), ["error: fleet verify needs an environment name, got ''", ENV_HINT]),
        (
            _verify("/etc"),
            [
                "error: '/etc' is a path: fleet verify takes the name of an environment under envs/ of "
                "each node's project, not a path",
                ENV_HINT,
            ],
        ),
        (
            _verify("envs/quickstart-default"),
            [
                "error: 'envs/quickstart-default' is a path: fleet verify takes the name "
                "of an environment under envs/ of each node's project, not a path",
                ENV_HINT,
            ],
        ),
        (
            _verify(".."),
            [
                "error: not an environment name: '..' cannot form a PEP 751 lock file name "
                "(pylock.<name>.toml allows no dots); use letters, digits, '-' and '_' only",
                ENV_HINT,
            ],
        ),
        (
            _verify("_x"),
            [
                "error: not an environment name: '_x' is not a valid name; use letters, digits, '-' and '_', "
                "starting with a letter or digit",
                ENV_HINT,
            ],
        ),
        (
            ["fleet", "build", "nosuch", "--ray", "127.0.0.1:1", "--project", str(ROOT)],
            [
                f"error: no recipe named 'nosuch' in {ROOT / 'recipes'}",
                "  hint: known recipes: kimi-k25-sm120, quickstart, vllm-cpu, vllm-h200",
            ],
        ),
        (
            ["fleet", "build", "quickstart", "--variant", "nope", "--ray", "127.0.0.1:1", "--project", str(ROOT)],
            [
                f"error: {ROOT / 'recipes' / 'quickstart.toml'}: recipe 'quickstart' has no variant 'nope' (it has: default)"
            ],
        ),
    ],
)
def test_bad_input_is_refused_on_the_driver_before_connecting(
    argv: list[str], expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # --ray 127.0.0.1:1 refuses connections: reaching the cluster would be exit 3, not 2.
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == expected


def test_a_driver_refusal_with_json_is_one_error_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*_verify("quickstart-default", "--level", "bogus"), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.error/1"
    assert doc["data"] == {
        "kind": "input-error",
        "message": "unknown verify level bogus",
        "hint": "levels: static, gpu, drafter",
        "exit_code": 2,
        "log": None,
    }


def test_without_the_project_on_the_driver_the_nodes_check_the_recipe(tmp_path: Path) -> None:
    from envforge.cli.fleet import _check_recipe

    _check_recipe(tmp_path, "nosuch", "nope")  # no recipes/ here: nothing to check against
    _check_recipe(tmp_path, "/elsewhere/recipe.toml", None)  # a path the driver cannot read: the nodes read it
    with pytest.raises(InputError, match="has no variant 'nope'"):
        _check_recipe(ROOT, str(ROOT / "recipes" / "quickstart.toml"), "nope")


# ---- node errors keep their hint ---------------------------------------------------------------

NODE = {"NodeID": "aaaaaaaabbbb", "NodeManagerAddress": "10.0.0.1"}


def test_a_node_error_carries_its_hint_into_the_report() -> None:
    err = InputError(
        "no environment 'nosuch' in /p/envs", hint="build it with `envforge build`; existing: quickstart-default"
    )
    answer = {**node_error("verify", err, None), "elapsed-s": 0.01}
    assert answer == {
        "error": "no environment 'nosuch' in /p/envs",
        "hint": "build it with `envforge build`; existing: quickstart-default",
        "elapsed-s": 0.01,
    }
    assert node_error("verify", InputError("no hint"), None) == {"error": "no hint"}
    node = node_answer(NODE, answer)
    report = FleetReport("verify", (node,), {}, {}, 0.5)
    assert node.as_dict() == {
        "node-id": "aaaaaaaabbbb",
        "host": "10.0.0.1",
        "status": "failed",
        "fingerprint": {},
        "findings": [],
        "elapsed-s": 0.01,
        "error": "no environment 'nosuch' in /p/envs",
        "hint": "build it with `envforge build`; existing: quickstart-default",
        "detail": {},
    }
    assert render_text(report) == [
        "10.0.0.1 aaaaaaaa failed: no environment 'nosuch' in /p/envs",
        "    hint: build it with `envforge build`; existing: quickstart-default",
        "fleet verify: 1 node, 1 not ok, 0 differ from the majority in 0.5 s",
    ]


def test_a_failed_build_node_shows_its_generations_then_the_error() -> None:
    ok = FleetNode(
        "n0000000aa", "10.0.0.1", "ok", elapsed_s=3.0, detail={"before": "g0001", "after": "g0002", "flipped": True}
    )
    failed = FleetNode(
        "n1111111bb",
        "10.0.0.2",
        "failed",
        elapsed_s=2.0,
        error="build failed at step 'sync': uv sync",
        hint="check the wheelhouse",
        detail={"before": "g0001", "after": "g0001", "flipped": False},
    )
    first = FleetNode(
        "n2222222cc",
        "10.0.0.3",
        "timeout",
        error="build did not finish within the 45 s limit: x",
        detail={"before": None, "after": None, "flipped": False},
    )
    dead = FleetNode("n3333333dd", "10.0.0.4", "failed", error="NodeDiedError: gone")  # no answer: no generations
    report = FleetReport("build", (ok, failed, first, dead), {}, {}, 4.0)
    assert render_text(report) == [
        "10.0.0.1 n0000000 ok: g0001 -> g0002 (flipped)",
        "10.0.0.2 n1111111 failed: g0001 -> g0001 (not flipped): build failed at step 'sync': uv sync",
        "    hint: check the wheelhouse",
        "10.0.0.3 n2222222 timeout: none -> none (not flipped): build did not finish within the 45 s limit: x",
        "10.0.0.4 n3333333 failed: NodeDiedError: gone",
        "fleet build: 4 nodes, 3 not ok, 0 differ from the majority in 4.0 s",
    ]


# ---- fleet verify --level gpu: one JSON document -----------------------------------------------

FP = {"lock_digest": "sha256:aa", "patch_manifest_digest": None, "env_profile": "pcie"}


def _verify_report() -> FleetReport:
    nodes = (
        FleetNode("n0", "10.0.0.1", "ok", fingerprint=FP, elapsed_s=0.4),
        FleetNode("n1", "10.0.0.2", "ok", fingerprint=FP, elapsed_s=0.5),
    )
    return FleetReport("verify", nodes, dict(FP), {}, 1.25)


def _allreduce_report(ok: bool) -> FleetReport:
    sizes = [{"bytes": 43008, "median-us": 41.6, "bus-gbps": 1.034, "sum-ok": True}]
    second = (
        FleetNode("n1", "10.0.0.2", "ok", detail={"rank": 1, "sizes": sizes})
        if ok
        else FleetNode(
            "n1", "10.0.0.2", "failed", error="torch is not installed", hint="install torch", detail={"rank": 1}
        )
    )
    return FleetReport(
        "allreduce", (FleetNode("n0", "10.0.0.1", "ok", detail={"rank": 0, "sizes": sizes}), second), {}, {}, 2.5
    )


def test_fleet_verify_json_nests_the_allreduce_report_and_exits_with_the_worse_code() -> None:
    verify, allreduce = _verify_report(), _allreduce_report(ok=False)
    data = verify_data(verify, allreduce)
    assert list(data) == [
        "action",
        "nodes",
        "majority",
        "differs",
        "exit-code",
        "elapsed-s",
        "selection",
        "skipped",
        "backend",
        "allreduce",
    ]
    assert (data["action"], data["exit-code"], data["elapsed-s"]) == ("verify", 1, 1.25)
    assert verify.exit_code == 0 and allreduce.exit_code == 1  # the worse of both
    assert data["allreduce"] == {
        "action": "allreduce",
        "nodes": [
            {
                "node-id": "n0",
                "host": "10.0.0.1",
                "status": "ok",
                "fingerprint": {},
                "findings": [],
                "elapsed-s": None,
                "error": None,
                "hint": None,
                "detail": {
                    "rank": 0,
                    "sizes": [{"bytes": 43008, "median-us": 41.6, "bus-gbps": 1.034, "sum-ok": True}],
                },
            },
            {
                "node-id": "n1",
                "host": "10.0.0.2",
                "status": "failed",
                "fingerprint": {},
                "findings": [],
                "elapsed-s": None,
                "error": "torch is not installed",
                "hint": "install torch",
                "detail": {"rank": 1},
            },
        ],
        "majority": {},
        "differs": {},
        "exit-code": 1,
        "elapsed-s": 2.5,
        "selection": "every alive node",
        "skipped": [],
        "backend": None,
    }
    assert verify_data(verify, _allreduce_report(ok=True))["exit-code"] == 0
    plain = verify_data(verify, None)  # no gpu level: the key is there, null
    assert plain["allreduce"] is None and plain["exit-code"] == 0
    assert json.loads(json.dumps(data)) == data


def test_the_json_shape_is_the_documented_one() -> None:
    """docs/fleet.md lists the keys of ``data`` and of each node, in order, and names ``allreduce``."""
    import re

    text = " ".join((ROOT / "docs" / "fleet.md").read_text().split())
    doc = re.search(r'where `data` is `\{"action", "nodes": \[\{(.*?)\}\], (.*?)\}`', text)
    assert doc is not None
    assert [k.strip('" ') for k in doc.group(1).split(",")] == list(FleetNode("n", "h", "ok").as_dict())
    top = [k.split(":")[0].strip('" ') for k in doc.group(2).split(", ")]
    assert ["action", "nodes", *top] == list(_verify_report().as_dict())
    assert list(verify_data(_verify_report(), None)) == [*_verify_report().as_dict(), "allreduce"]
    assert '`fleet verify` adds `"allreduce"`: `null`, or with `--level gpu` the all-reduce\'s own report' in text


# ---- the all-reduce task where the Ray workers' Python has no torch ----------------------------


def test_the_allreduce_task_without_torch_answers_an_error_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ModuleNotFoundError (name 'torch')
    monkeypatch.setitem(sys.modules, "torch.distributed", None)
    answer = allreduce_task(1, 2, "127.0.0.1", 29517, "gloo", (43008,), {}, 3)
    assert answer == {
        "rank": 1,
        "error": f"torch is not installed in the Python of this node's Ray workers ({sys.executable}): "
        "the all-reduce runs there",
        "hint": "install torch into the Python that runs `ray start` on every node (it is not part of "
        "envforge-stack[fleet]: pick the build for the node's CUDA), then run it again",
    }


def test_a_rank_without_torch_is_a_failed_node_with_the_hint() -> None:
    node = allreduce_node(NODE, {"rank": 1, "error": "torch is not installed", "hint": "install torch"})
    assert (node.status, node.error, node.hint, dict(node.detail)) == (
        "failed",
        "torch is not installed",
        "install torch",
        {"rank": 1},
    )
    report = FleetReport("allreduce", (node,), {}, {}, 0.25)
    assert render_text(report) == [
        "10.0.0.1 aaaaaaaa failed: torch is not installed",
        "    hint: install torch",
        "fleet allreduce: 1 node, 1 not ok, 0 differ from the majority in 0.2 s",
    ]
    sizes = [
        {"bytes": 43008, "median-us": 40.0, "bus-gbps": 1.0, "sum-ok": True},
        {"bytes": 1048576, "median-us": 90.0, "bus-gbps": 11.6, "sum-ok": False},
    ]
    wrong = allreduce_node(NODE, {"rank": 0, "sizes": sizes})
    assert (wrong.status, wrong.findings) == ("findings", ({"kind": "allreduce-failed", "subject": "1048576 bytes"},))


# ---- Ray's own output ------------------------------------------------------------------------


def test_the_clusters_error_messages_are_not_printed_by_the_driver(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = pytest.importorskip("ray._private.worker")
    from envforge.fleet.driver import quiet_ray_errors

    monkeypatch.setattr(worker, "_worker_logs_enabled", True)  # (restored after the test)
    worker.print_to_stdstream(
        {"lines": ["Raylet is terminated."], "pid": "raylet", "is_err": False}, ignore_prefix=False
    )
    assert "Raylet is terminated." in capsys.readouterr().out  # what Ray does: a dying raylet on stdout
    quiet_ray_errors()
    worker.print_to_stdstream(
        {"lines": ["Raylet is terminated."], "pid": "raylet", "is_err": False}, ignore_prefix=False
    )
    worker.print_to_stdstream({"lines": ["a worker's stderr"], "pid": 42, "is_err": True}, ignore_prefix=False)
    assert capsys.readouterr() == ("", "")


# ---- an address where no Ray GCS answers ---------------------------------------------------------


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never says anything."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def _fleet_cli(address: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "fleet",
            "verify",
            "quickstart-default",
            "--ray",
            address,
            "--timeout",
            "10",
            "--project",
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    return res, time.monotonic() - start


HINT = (
    "  hint: start one with `ray start --head` (and `ray start --address HEAD:6379` on each node), then pass "
    "--ray HEAD:6379, or --ray auto on a node"
)


def test_a_silent_port_fails_within_seconds_with_one_line(silent_listener: int) -> None:
    pytest.importorskip("ray")
    res, took = _fleet_cli(f"127.0.0.1:{silent_listener}")
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines() == [
        f"error: cannot connect to the Ray cluster at 127.0.0.1:{silent_listener}: something listens there, but "
        "gave no HTTP/2 answer (as a Ray GCS does) within 5 s",
        HINT,
    ]
    assert res.stdout == "" and took < 60  # Ray itself retries for ever


def test_an_unroutable_address_fails_within_seconds_without_ray_log_lines() -> None:
    """10.255.255.1 has no route from here (or, behind some proxies, answers as no GCS does): either way
    one error line, exit 3, in seconds, and none of Ray's C++ warnings (``gcs_client.cc``)."""
    pytest.importorskip("ray")
    res, took = _fleet_cli("10.255.255.1:6379")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == HINT, res.stderr
    assert lines[0].startswith("error: cannot connect to the Ray cluster at 10.255.255.1:6379: "), lines[0]
    assert res.stdout == "" and took < 60, took  # Ray itself retries for ever


# ---- which nodes: --num-gpus, --label, --resource, --all-nodes --------------------------------


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            ["--label", "=gpu"],
            "error: argument --label: must be KEY=VALUE or KEY (a Ray node label, e.g. pool=gpu), got '=gpu'",
        ),
        (
            ["--label", "pool="],
            "error: argument --label: must be KEY=VALUE or KEY (a Ray node label, e.g. pool=gpu), got 'pool='",
        ),
        (
            ["--resource", "stack=0"],
            "error: argument --resource: must be NAME or NAME=AMOUNT (a Ray resource, AMOUNT a "
            "positive number, e.g. stack=1), got 'stack=0'",
        ),
        (
            ["--resource", "stack=x"],
            "error: argument --resource: must be NAME or NAME=AMOUNT (a Ray resource, AMOUNT a "
            "positive number, e.g. stack=1), got 'stack=x'",
        ),
        (["--num-gpus", "0"], "error: argument --num-gpus: must be a GPU count >= 1, got '0'"),
        (
            ["--all-nodes", "--num-gpus", "8"],
            "error: --all-nodes takes every alive node: it cannot be combined with --num-gpus, --label or --resource",
        ),
        (
            ["--all-nodes", "--label", "pool"],
            "error: --all-nodes takes every alive node: it cannot be combined with --num-gpus, --label or --resource",
        ),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["fleet", "verify", "quickstart-default"],
        ["fleet", "build", "quickstart"],
        ["fleet", "allreduce"],
        ["fleet", "agent", "start"],
    ],
)
def test_bad_node_selections_are_refused_on_the_driver(
    command: list[str], extra: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project = ["--project", str(ROOT)] if command[1] != "allreduce" else []
    assert main([*command, "--ray", "127.0.0.1:1", *project, *extra]) == 2
    assert _last_lines(capsys, 1) == [expected]


def _selection(*argv: str, gpus: tuple[int | None, str] | None) -> object:
    from envforge.cli import build_parser
    from envforge.cli.fleet import selection

    return selection(build_parser("fleet").parse_args(["fleet", "verify", "e", "--ray", "h:1", *argv]), gpus)


def test_the_options_and_the_recipe_make_the_node_selection() -> None:
    from envforge.fleet.selection import NodeSelection

    recipe = (8, "[target] gpus = 8 in lockfiles/pylock.e.toml")
    assert _selection(gpus=recipe) == NodeSelection(8, "[target] gpus = 8 in lockfiles/pylock.e.toml")
    assert _selection(gpus=(None, "lockfiles/pylock.e.toml names no [target] gpus")) == NodeSelection(
        every=True, source="lockfiles/pylock.e.toml names no [target] gpus"
    )
    assert _selection(gpus=None) == NodeSelection()
    assert _selection("--num-gpus", "2", gpus=recipe) == NodeSelection(2, "--num-gpus 2")
    assert _selection("--all-nodes", gpus=recipe) == NodeSelection(every=True, source="--all-nodes")
    assert _selection(
        "--label", "pool=gpu", "--label", "zone", "--resource", "stack", "--resource", "hbm=2.5", gpus=recipe
    ) == NodeSelection(labels=(("pool", "gpu"), ("zone", None)), resources=(("stack", 1.0), ("hbm", 2.5)))
    assert _selection("--resource", "stack", "--num-gpus", "8", gpus=None) == NodeSelection(
        8, "--num-gpus 8", resources=(("stack", 1.0),)
    )


def test_fleet_build_takes_the_gpu_count_from_the_recipe(tmp_path: Path) -> None:
    from envforge.cli.fleet import _check_recipe

    assert _check_recipe(ROOT, "quickstart", None) == (8, "[target] gpus = 8 in recipes/quickstart.toml")
    assert _check_recipe(tmp_path, "quickstart", None) is None  # not read here: not known
    own = tmp_path / "r.toml"
    own.write_text('[recipe]\nname = "r"\npython = "3.12"\n')
    assert _check_recipe(ROOT, str(own), None) == (None, f"{own} names no [target] gpus")


def test_a_report_that_skipped_nodes_lists_them_first_and_counts_them() -> None:
    from envforge.fleet.report import SkippedNode

    nodes = (FleetNode("n1aaaaaaaa", "10.0.0.2", "ok", fingerprint=FP, elapsed_s=0.4),)
    report = FleetReport(
        "build",
        (FleetNode("n1aaaaaaaa", "10.0.0.2", "ok", detail={"before": "g0001", "after": "g0002", "flipped": True}),),
        {},
        {},
        1.5,
        selection="nodes with at least 8 GPUs (--num-gpus 8)",
        skipped=(SkippedNode("n0bbbbbbbb", "10.0.0.1", "no GPU resources (needs 8)"),),
    )
    assert render_text(report) == [
        "selected 1 of 2 alive nodes: nodes with at least 8 GPUs (--num-gpus 8)",
        "skipped 10.0.0.1 n0bbbbbb: no GPU resources (needs 8)",
        "10.0.0.2 n1aaaaaa ok: g0001 -> g0002 (flipped)",
        "fleet build: 1 node (1 skipped), 0 not ok, 0 differ from the majority in 1.5 s",
    ]
    assert report.exit_code == 0  # a skipped node is no failed one
    assert FleetReport("verify", nodes, {}, {}, 0.1).as_dict()["skipped"] == []
