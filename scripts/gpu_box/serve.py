"""Start the recipe's [[verify.smoke.servers]] by hand (for a second client beside envforge bench), each
in its own session, exactly as envforge bench would (its args and env, {model} and {served_model_name}
substituted by envforge's own ServerConfig), then wait until each answers /health or dies.

Usage (envforge's interpreter): python serve.py PROJECT RECIPE ENV_PYTHON WORKDIR TIMEOUT_S NAME:PORT...
Writes WORKDIR/pids ("name pid port") and WORKDIR/logs/serve-NAME.log; prints READY/DIED/TIMEOUT lines.
"""
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from envforge.bench.config import smoke_config
from envforge.recipe.load import load_recipe

project, recipe_name, env_python, workdir, timeout_s = sys.argv[1:6]
wanted = [a.split(":") for a in sys.argv[6:]]
recipe = load_recipe(Path(project) / "recipes" / f"{recipe_name}.toml")
cfg = smoke_config(recipe.resolve(recipe.variants[0]).verify, recipe.path)
by_name = {s.name: s for s in cfg.servers}
work = Path(workdir)
(work / "logs").mkdir(parents=True, exist_ok=True)
started = {}
for name, port in wanted:
    s = by_name[name]
    argv = [env_python, *s.argv_tail(model=s.model or cfg.model, port=int(port),
                                     served_model_name=s.served_model_name or cfg.served_model_name)]
    log = open(work / "logs" / f"serve-{name}.log", "w")
    proc = subprocess.Popen(argv, env={**os.environ, **s.env}, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    started[name] = (proc, int(port), time.time())
    with open(work / "pids", "a") as fh:
        fh.write(f"{name} {proc.pid} {port}\n")
deadline = time.time() + float(timeout_s)
while started and time.time() < deadline:
    for name, (proc, port, t0) in list(started.items()):
        if proc.poll() is not None:
            tail = (work / "logs" / f"serve-{name}.log").read_text(errors="replace").splitlines()[-30:]
            print(f"DIED {name} rc={proc.returncode} after {time.time() - t0:.1f} s\n" + "\n".join(tail), flush=True)
            del started[name]
            continue
        try:
            ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200
        except OSError:
            ok = False
        if ok:
            print(f"READY {name} {time.time() - t0:.1f} s", flush=True)
            del started[name]
    time.sleep(0.5)
for name in started:
    print(f"TIMEOUT {name}", flush=True)
