"""A verify report's JSON (envforge verify --json) as a few lines of text: findings, accepted findings, skipped
checks, fingerprint and a summary (so verify runs once, for its JSON, and the log still reads).

Usage: python vtext.py VERIFY_JSON   (stdlib only)
"""

import json
import sys

d = json.load(open(sys.argv[1]))["data"]
for f in d.get("findings", []):
    print(
        f"{f['kind']}: {f['subject']} [{f.get('level', '')}]\n    expected: {f['expected']}\n    actual:   {f['actual']}"
        f"\n    fix:      {f['fix']}"
    )
for f in d.get("accepted", []):
    print(f"accepted {f.get('kind')}: {f.get('subject')} (until {f.get('expires')}: {f.get('reason', '')})")
checks = d.get("checks", [])
for c in checks:
    if c["status"] != "ok":
        print(f"{c['status']}: {c['level']}/{c['name']}: {c['detail']}")
for note in d.get("notes", []):
    print(f"note: {note}")
fp = d.get("fingerprint") or {}
print(
    f"fingerprint: lock {fp.get('lock_digest')}, patches {fp.get('patch_manifest_digest') or 'none'}, "
    f"gpu {fp.get('gpu_count')}x {fp.get('gpu')}, driver {fp.get('driver')}"
)
ran = sum(1 for c in checks if c["status"] != "skipped")
print(
    f"verify {','.join(d.get('levels', []))}: {len(d.get('findings', []))} finding(s), "
    f"{len(d.get('accepted', []))} accepted ({ran} checks ran, {len(checks) - ran} skipped) in {d.get('elapsed-s')} s, "
    f"exit {d.get('exit-code')}"
)
for c in checks:
    if c["level"] == "drafter":
        print(f"drafter check: {c['status']}: {c['detail']}")
