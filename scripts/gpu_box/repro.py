"""Two builds from the same lock, compared: the environment fingerprints envforge records (lock digest,
patch-manifest digest, env profile, platform, start-up files; envforge.env.fingerprint) and what was
installed (every distribution's RECORD, the entries inside site-packages: their paths and hashes).

Usage (the tool venv's python: envforge importable): python repro.py ENV_A ENV_B
ENV: an environment (envs/<name>, the generation link) or a generation directory. Prints one line per
field, "equal" or "differ", then the verdict on the two digests issue 30 asks about; exit 0 when those two
are equal, 1 when not.
"""

import hashlib
import json
import sys
from pathlib import Path

from envforge.core.state import StateDir
from envforge.env.fingerprint import fingerprint_of

FIELDS = ("lock_digest", "patch_manifest_digest", "env_profile", "env_profile_digest", "platform", "startup_digest")
REQUIRED = ("lock_digest", "patch_manifest_digest")


def site_packages(env: Path) -> Path:
    found = sorted(env.resolve().glob("lib/python3*/site-packages"))
    if not found:
        sys.exit(f"repro.py: no lib/python3*/site-packages under {env}")
    return found[0]


def installed(sp: Path) -> tuple[str, str, int]:
    """(digest of the sorted name==version list, digest of every RECORD line inside site-packages, lines)."""
    dists, lines = [], []
    for info in sorted(sp.glob("*.dist-info")):
        meta = {
            k.strip().lower(): v.strip()
            for k, _, v in (
                ln.partition(":") for ln in (info / "METADATA").read_text(errors="replace").splitlines()[:20]
            )
        }
        dists.append(f"{meta.get('name')}=={meta.get('version')}")
        record = info / "RECORD"
        if record.is_file():  # entries outside site-packages (bin/ scripts name their interpreter) are left out
            lines += [ln for ln in record.read_text().splitlines() if ln and not ln.startswith("..")]
    digest = lambda xs: "sha256:" + hashlib.sha256("\n".join(sorted(xs)).encode()).hexdigest()  # noqa: E731
    return digest(dists) + f" ({len(dists)} distributions)", digest(lines), len(lines)


def main(a: Path, b: Path) -> int:
    rows = []
    spa, spb = site_packages(a), site_packages(b)
    fa, fb = fingerprint_of(spa).as_dict(), fingerprint_of(spb).as_dict()
    for f in FIELDS:
        rows.append((f, fa.get(f), fb.get(f)))
    ga, gb = (json.loads(StateDir(sp).generation_record.read_text()) for sp in (spa, spb))
    rows.append(("generation.json lock-digest", ga.get("lock-digest"), gb.get("lock-digest")))
    ia, ib = installed(spa), installed(spb)
    rows.append(("installed distributions", ia[0], ib[0]))
    rows.append((f"RECORD entries in site-packages ({ia[2]} / {ib[2]})", ia[1], ib[1]))
    print(f"A {a} -> {spa}\nB {b} -> {spb}")
    width = max(len(r[0]) for r in rows)
    for name, x, y in rows:
        same = "equal" if x == y else "differ"
        print(f"{name.ljust(width)}  {same:6}  A {x or 'none'}\n{' ' * width}          B {y or 'none'}")
    bad = [f for f in REQUIRED if fa.get(f) != fb.get(f)]
    none = [f for f in REQUIRED if fa.get(f) is None and fb.get(f) is None]
    print(
        "verdict: lock digest and patch-manifest digest "
        + ("differ: " + ", ".join(bad) if bad else "equal")
        + (f" ({', '.join(none)}: none in either build, the lock names no patchsets)" if none else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
