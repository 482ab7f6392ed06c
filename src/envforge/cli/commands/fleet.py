"""Registration of the ``envforge fleet`` group (handlers: :mod:`envforge.cli.fleet`).

What the driver can check before anything reaches a node and argparse can read is checked here:
``--ray`` (:func:`ray_address`), ``--timeout`` and ``--port`` (the shared
:func:`envforge.cli.parser.seconds` / :data:`~envforge.cli.parser.PORT`), as usage errors (exit 2).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import find_links_dir
from envforge.cli.parser import PORT, group, integer, seconds

__all__ = ["MIN_TIMEOUT_S", "ray_address", "register", "node_label", "node_resource"]

#: The shortest ``--timeout`` of a fleet command, in seconds: each node keeps at least 2 s of it for
#: its answer's way back (:func:`envforge.fleet.tasks.node_budget`), so less leaves a node next to nothing.
MIN_TIMEOUT_S = 5.0

_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")

_RAY_FORM = (
    "must be HOST:PORT (the GCS address `ray start --head` prints, e.g. 10.0.0.1:6379) or auto, PORT from 1 to 65535"
)


def ray_address(text: str) -> str:
    """An argparse ``type=`` for ``--ray``: ``auto``, or ``HOST:PORT`` with a host name, an IPv4
    address or a bracketed IPv6 address, and a port from 1 to 65535. Returned unchanged.

    :raises argparse.ArgumentTypeError: anything else (``garbage``, ``''``, a URL such as
        ``http://127.0.0.1:8265``, ``127.0.0.1:99999``): a usage error naming ``--ray`` (exit 2).
    """
    if text == "auto":
        return text
    host, sep, port = text.rpartition(":")
    if sep and _HOST.fullmatch(host) and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535:
        return text
    raise argparse.ArgumentTypeError(f"{_RAY_FORM}, got {text!r}")


_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?")


def node_label(text: str) -> tuple[str, str | None]:
    """An argparse ``type=`` for ``--label``: ``KEY=VALUE`` (a Ray node label, ``ray start --labels
    KEY=VALUE``, with that value) or ``KEY`` (any value) as ``(key, value or None)``.

    :raises argparse.ArgumentTypeError: an empty or malformed key (exit 2).
    """
    key, sep, value = text.partition("=")
    if _LABEL.fullmatch(key) and (not sep or value):
        return key, value if sep else None
    raise argparse.ArgumentTypeError(f"must be KEY=VALUE or KEY (a Ray node label, e.g. pool=gpu), got {text!r}")


def node_resource(text: str) -> tuple[str, float]:
    """An argparse ``type=`` for ``--resource``: ``NAME`` or ``NAME=AMOUNT`` (a Ray resource,
    ``ray start --resources '{"NAME": N}'``, at least AMOUNT of it; default 1) as ``(name, amount)``.

    :raises argparse.ArgumentTypeError: an empty name, or an amount that is no positive finite number.
    """
    name, sep, amount = text.partition("=")
    try:
        value = float(amount) if sep else 1.0
    except ValueError:
        value = 0.0
    if name.strip() and name == name.strip() and 0 < value < float("inf"):
        return name, value
    raise argparse.ArgumentTypeError(
        f"must be NAME or NAME=AMOUNT (a Ray resource, AMOUNT a positive number, e.g. stack=1), got {text!r}"
    )


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``envforge fleet`` group: ``verify``, ``build``, ``allreduce``, ``agent start|stop``."""
    fleet = group(
        sub,
        "fleet",
        help=SUMMARIES["fleet"],
        description="One Ray task per alive node (node affinity); exit 1 when a node differs "
        "from the majority, has findings, failed or did not answer.",
    )

    v = fleet.add_parser(
        "verify",
        help="verify ENV on every node and compare the fingerprints",
        description="Verify ENV on every selected node of the Ray cluster (through each node's "
        "envforge agent, or a fresh task with --no-agent) and compare the environment "
        "fingerprints: exit 1 when a node differs from the majority, has findings, "
        "failed or did not answer within --timeout.",
    )
    v.add_argument("env", metavar="ENV", help="environment name under envs/ on every node, e.g. kimi-k25-sm120-cu128")
    v.add_argument(
        "--level",
        default=None,
        metavar="LEVELS",
        help="comma-separated verify levels on each node: static, gpu, drafter (default: the recipe's); "
        "with gpu, an all-reduce across all nodes follows within what is left of --timeout",
    )
    v.add_argument(
        "--no-agent",
        action="store_true",
        help="verify in a fresh Ray task per node instead of each node's long-lived envforge agent",
    )
    _common(v)
    v.set_defaults(handler="envforge.cli.fleet:_verify")

    b = fleet.add_parser(
        "build",
        help="build the committed lock on every node",
        description="Build RECIPE's committed lock on every selected node (`envforge build` in "
        "a Ray task per node, the project at the same path on each) and compare the "
        "resulting fingerprints.",
    )
    b.add_argument("recipe", metavar="RECIPE", help="recipe name under recipes/ or a path, the same on every node")
    b.add_argument(
        "--variant", default=None, metavar="VARIANT", help="variant to build (default: the recipe's only variant)"
    )
    b.add_argument("--offline", action="store_true", help="install from --find-links only (a path every node reads)")
    b.add_argument(
        "--find-links",
        action="append",
        type=find_links_dir,
        default=[],
        metavar="DIR",
        help="a wheelhouse directory every node reads (with --offline)",
    )
    _common(b, timeout=3600.0)
    b.set_defaults(handler="envforge.cli.fleet:_build")

    a = fleet.add_parser(
        "allreduce",
        help="one all-reduce group across all nodes (torch.distributed)",
        description="One torch.distributed rank per selected node, in the Python of Ray's workers: "
        "all-reduces of 43 KB, 1 MiB and 16 MiB timed (median of 20) and their sum "
        "checked. Backend nccl when every node has GPU resources, else gloo (the "
        "report says which and why); --backend wins.",
    )
    a.add_argument(
        "--backend",
        choices=("nccl", "gloo"),
        default=None,
        help="torch.distributed backend (default: nccl when every selected node has GPU resources, else gloo)",
    )
    a.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="variables set in every rank, e.g. an env profile's NCCL_* values",
    )
    a.add_argument(
        "--port",
        type=PORT,
        default=29517,
        metavar="PORT",
        help="rendezvous port on the first node (1-65535; default: 29517)",
    )
    _common(a, timeout=300.0)
    a.set_defaults(handler="envforge.cli.fleet:_allreduce")

    agent = group(
        fleet,
        "agent",
        help="the long-lived envforge agent on each node (fleet verify's)",
        description="fleet verify starts one agent per node (a detached Ray actor) and reuses it.",
    )
    up = agent.add_parser(
        "start",
        help="start (or keep) the agent on every node, verifying nothing: run it once after the cluster starts",
        description="Start the envforge agent (a detached Ray actor) on every selected node, "
        "or keep the one running; later `fleet verify` runs reuse them.",
    )
    up.add_argument(
        "--ray", required=True, type=ray_address, metavar="ADDRESS", help="Ray cluster address (HOST:PORT) or auto"
    )
    up.add_argument(
        "--timeout",
        type=seconds(MIN_TIMEOUT_S),
        default=120.0,
        metavar="SECONDS",
        help=f"seconds to wait for every node ({MIN_TIMEOUT_S:g} or more; default: 120); later nodes are findings",
    )
    up.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="project directory (the same path on every node): a node where it holds no recipes/ "
        "is a finding (default: not checked, but where ENVFORGE_FLEET_ROOT is set)",
    )
    up.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.fleet/1)")
    _nodes(up)
    up.set_defaults(handler="envforge.cli.fleet:_agent_start")
    st = agent.add_parser(
        "stop",
        help="stop every envforge agent in the cluster (the next fleet verify starts new ones)",
        description="Stop every envforge agent in the cluster; the next `fleet verify` starts new ones.",
    )
    st.add_argument(
        "--ray", required=True, type=ray_address, metavar="ADDRESS", help="Ray cluster address (HOST:PORT) or auto"
    )
    st.add_argument("--json", action="store_true", help="print the names stopped as JSON")
    st.set_defaults(handler="envforge.cli.fleet:_agent_stop")


def _common(p: argparse.ArgumentParser, timeout: float = 600.0) -> None:
    p.add_argument(
        "--ray", required=True, type=ray_address, metavar="ADDRESS", help="Ray cluster address (HOST:PORT) or auto"
    )
    p.add_argument(
        "--timeout",
        type=seconds(MIN_TIMEOUT_S),
        default=timeout,
        metavar="SECONDS",
        help=f"seconds to wait for every node ({MIN_TIMEOUT_S:g} or more; default: {timeout:g}); later "
        "nodes are findings",
    )
    p.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="project directory, the same path on every node (default: nearest with recipes/)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.fleet/1)")
    _nodes(p)


def _nodes(p: argparse.ArgumentParser) -> None:
    """The options that pick the nodes (:func:`selection`)."""
    g = p.add_argument_group(
        "nodes",
        "which alive nodes to run on (default: those with the GPU count of the "
        "recipe's [target] gpus; the others are skipped, with the reason)",
    )
    g.add_argument(
        "--num-gpus",
        type=integer(1, noun="a GPU count"),
        default=None,
        metavar="N",
        help="nodes with at least N GPU resources (Ray's GPU resource, as `ray start --num-gpus`)",
    )
    g.add_argument(
        "--label",
        action="append",
        type=node_label,
        default=[],
        metavar="KEY[=VALUE]",
        help="nodes with this Ray node label (`ray start --labels KEY=VALUE`); repeatable",
    )
    g.add_argument(
        "--resource",
        action="append",
        type=node_resource,
        default=[],
        metavar="NAME[=AMOUNT]",
        help="nodes with at least AMOUNT (default 1) of this Ray resource "
        "(`ray start --resources '{\"NAME\": 1}'`); repeatable",
    )
    g.add_argument("--all-nodes", action="store_true", help="every alive node, whatever it has")
