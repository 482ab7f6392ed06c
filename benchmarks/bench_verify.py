"""Benchmark ``envforge verify``: static verify of a quickstart-like environment, and --deep hashing.

1. Whole process ``python -m envforge verify ENV`` (static, default fast mode): median of N runs,
   target <= 2 s; reference in the same run: ``uv pip list --python ENV`` (another tool that reads
   the same environment).
2. ``--deep`` throughput: verify's RECORD hashing (hashlib, 1 MiB reads, 4 threads) over every
   installed file, against ``sha256sum`` over the same files; ratio of bytes per second, target
   >= 0.5x. Median of N runs each.

The environment is real: sglang 0.5.9 and flashinfer-python 0.6.4 wheels from the test cache
(tests/conftest.py), installed with uv without dependencies, patched with the repo's patchsets and
given the pcie env profile (tests/support/verify_envs.py, the same builder the tests use).

``--make-env ROOT --wheels W...`` only builds such an environment (used on the GPU machine, where
uv is absent: ``--installer pip --extra-site <the image's site-packages>``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.support.verify_envs import make_env  # noqa: E402


def _median_time(argv: list[str], runs: int, **kw: object) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _deep(env_root: Path, sp: Path, runs: int) -> None:
    from envforge.verify.inventory import installed_distributions
    from envforge.verify.records import check_records, read_record

    dists = list(installed_distributions(sp).values())
    files = [str(sp / e.path) for d in dists for e in read_record(d) if e.sha256]
    listing = env_root / "files.txt"
    listing.write_text("\0".join(files))
    ours, ref, nbytes = [], [], 0
    for _ in range(runs):
        start = time.perf_counter()
        _, _, nbytes = check_records(sp, dists, {}, deep=True)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(f"xargs -0 sha256sum < {listing} > /dev/null", shell=True, check=True)
        ref.append(time.perf_counter() - start)
    o, r = statistics.median(ours), statistics.median(ref)
    print(f"deep hashing: {len(files)} files, {nbytes / 1e6:.1f} MB")
    print(f"  envforge verify --deep hashing: {o * 1000:.0f} ms ({nbytes / o / 1e6:.0f} MB/s)")
    print(f"  sha256sum (xargs, same files):  {r * 1000:.0f} ms ({nbytes / r / 1e6:.0f} MB/s)")
    print(f"  ratio (ours / sha256sum bytes per second): {r / o:.2f}x (target >= 0.5x)")


def _wheels() -> list[Path]:
    from tests.conftest import cached_wheel

    return [cached_wheel("sglang", "0.5.9"), cached_wheel("flashinfer-python", "0.6.4")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--make-env", metavar="ROOT", help="only build a quickstart-like environment under ROOT")
    ap.add_argument("--wheels", nargs="*", default=None)
    ap.add_argument("--installer", choices=("uv", "pip"), default="uv")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--system-site-packages", action="store_true")
    ap.add_argument("--extra-site", help="a site-packages directory the environment also sees (.pth)")
    a = ap.parse_args()
    uv = None
    if a.installer == "uv":
        import uv as uv_mod

        uv = uv_mod.find_uv_bin()
    wheels = [Path(w) for w in a.wheels] if a.wheels else _wheels()
    if a.make_env:
        env = make_env(
            Path(a.make_env),
            wheels,
            uv=uv,
            python=a.python,
            system_site=a.system_site_packages,
            extra_site=Path(a.extra_site) if a.extra_site else None,
        )
        print(env.path)
        return
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        root = Path(tmp)
        from envforge.uv.interpreter import PythonNotFound, find_python  # as the product finds a Python 3.12

        try:
            py = str(find_python("3.12").path)
        except PythonNotFound:
            py = a.python
        env = make_env(root, wheels, uv=uv, python=py)
        argv = [sys.executable, "-m", "envforge", "verify", "quickstart-default", "--project", str(root)]
        rc = subprocess.run(argv, capture_output=True).returncode
        t = _median_time(argv, a.runs)
        ref = _median_time([str(uv), "pip", "list", "--python", str(env.python)], a.runs) if uv else float("nan")
        print(
            f"static verify, whole process (exit {rc}): median {t * 1000:.0f} ms of {a.runs} runs (target <= 2000 ms)"
        )
        print(f"  reference `uv pip list` on the same env: {ref * 1000:.0f} ms; ratio {t / ref:.1f}x")
        _deep(root, env.site_packages, a.runs)


if __name__ == "__main__":
    main()
