"""The recipe's [[verify.smoke.servers]] started by hand (for a second client beside envforge bench), each in
its own session, exactly as envforge bench would start them: its argv (envforge's own ServerConfig, with
{model}, {host}, {port} and {served_model_name} substituted) after the environment's interpreter, its env
over this process's environment.

Usage (the tool venv's interpreter: envforge importable):
  serve.py argv  PROJECT RECIPE ENV_PYTHON NAME:PORT...          print each server's argv (JSON), start nothing
  serve.py start PROJECT RECIPE ENV_PYTHON WORKDIR NAME:PORT...  start them, return at once: WORKDIR/pids
                                                                 ("name pid port") and WORKDIR/logs/serve-NAME.log
  serve.py wait  WORKDIR TIMEOUT_S [NAME...]                     until each (default: all in pids) answers /health:
                                                                 READY/DIED/TIMEOUT lines (also added to
                                                                 WORKDIR/status); exit 1 unless all ready
  serve.py stop  WORKDIR                                         SIGTERM each server's process group, SIGKILL after 30 s
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def argvs(project: str, recipe_name: str, env_python: str, wanted: list[str]) -> list[tuple[str, int, list[str], dict]]:
    """(name, port, argv, env additions) of each NAME:PORT, from the recipe's first variant."""
    from envforge.bench.config import smoke_config
    from envforge.recipe.load import load_recipe

    recipe = load_recipe(Path(project) / "recipes" / f"{recipe_name}.toml")
    cfg = smoke_config(recipe.resolve(recipe.variants[0]).verify, recipe.path)
    by_name = {s.name: s for s in cfg.servers}
    out = []
    for item in wanted:
        name, _, port = item.partition(":")
        if name not in by_name:
            sys.exit(f"serve.py: no server '{name}' in {recipe.path} (known: {', '.join(by_name)})")
        s = by_name[name]
        tail = s.argv_tail(
            model=s.model or cfg.model, port=int(port), served_model_name=s.served_model_name or cfg.served_model_name
        )
        out.append((name, int(port), [env_python, *tail], dict(s.env)))
    return out


def start(project: str, recipe_name: str, env_python: str, workdir: str, wanted: list[str]) -> None:
    work = Path(workdir)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    for name, port, argv, env in argvs(project, recipe_name, env_python, wanted):
        log = open(work / "logs" / f"serve-{name}.log", "w")
        proc = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with open(work / "pids", "a") as fh:
            fh.write(f"{name} {proc.pid} {port} {time.time():.3f}\n")
        print(f"STARTED {name} pid {proc.pid} port {port}", flush=True)


def _servers(workdir: str) -> dict[str, tuple[int, int, float]]:
    """name -> (pid, port, start time) from WORKDIR/pids (the last line of a name wins)."""
    out = {}
    for line in (Path(workdir) / "pids").read_text().splitlines():
        name, pid, port, *t0 = line.split()
        out[name] = (int(pid), int(port), float(t0[0]) if t0 else time.time())
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (its parent, serve.py start, has exited: init reaps it) is dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def _status(workdir: str, name: str, what: str) -> None:
    with open(Path(workdir) / "status", "a") as fh:
        fh.write(f"{name} {what}\n")


def wait(workdir: str, timeout_s: float, names: list[str]) -> int:
    servers = _servers(workdir)
    waiting = {n: servers[n] for n in (names or servers)}
    deadline = time.time() + timeout_s
    bad = 0
    while waiting and time.time() < deadline:
        for name, (pid, port, t0) in list(waiting.items()):
            if not _alive(pid):
                log = Path(workdir) / "logs" / f"serve-{name}.log"
                tail = log.read_text(errors="replace").splitlines()[-30:] if log.is_file() else []
                print(f"DIED {name} pid {pid} after {time.time() - t0:.1f} s\n" + "\n".join(tail), flush=True)
                _status(workdir, name, "DIED")
                del waiting[name]
                bad += 1
                continue
            try:
                ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
            except OSError:
                ok = False
            if ok:
                print(f"READY {name} {time.time() - t0:.1f} s after its start", flush=True)
                _status(workdir, name, "READY")
                del waiting[name]
        time.sleep(0.5)
    for name in waiting:
        print(f"TIMEOUT {name}", flush=True)
        _status(workdir, name, "TIMEOUT")
    return 1 if bad or waiting else 0


def stop(workdir: str) -> None:
    servers = _servers(workdir)
    for name, (pid, _, _) in servers.items():
        try:
            os.killpg(pid, signal.SIGTERM)
            print(f"SIGTERM {name} (process group {pid})", flush=True)
        except ProcessLookupError:
            pass
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(pid) for pid, _, _ in servers.values()):
        time.sleep(0.5)
    for name, (pid, _, _) in servers.items():
        alive = _alive(pid)
        try:  # the whole group: an engine process left behind would keep its GPU memory
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        if alive:
            print(f"SIGKILL {name} (process group {pid}): still running 30 s after SIGTERM", flush=True)
    (Path(workdir) / "stopped").write_text("".join(f"{n}\n" for n in servers))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "argv":
        for name, port, argv, env in argvs(args[0], args[1], args[2], args[3:]):
            print(json.dumps({"name": name, "port": port, "argv": argv, "env": env}))
    elif cmd == "start":
        start(args[0], args[1], args[2], args[3], args[4:])
    elif cmd == "wait":
        sys.exit(wait(args[0], float(args[1]), args[2:]))
    elif cmd == "stop":
        stop(args[0])
    else:
        sys.exit(__doc__)
