"""Serve a directory as one repository of a Hugging Face hub-compatible server on 127.0.0.1 (no network
on the GPU box: `envforge drafter fetch` reaches this server through HF_ENDPOINT).

Usage (from the project root): python scripts/gpu_box/hub.py DIR REPO PORT [SHA_FILE]
Prints `REPO@SHA` (the commit sha tests/support/hub_server.py derives from the files' sha256) and writes
it to SHA_FILE, then serves until killed. The server is the project's test hub (the subset of the hub API
huggingface_hub's model_info and hf_hub_download use), not a copy of the hub.
"""

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.hub_server import HubServer, running_hub  # noqa: E402


def main(directory: Path, repo: str, port: int, sha_file: Path | None) -> None:
    hub = HubServer()
    sha = hub.add_commit(repo, {p.name: p for p in sorted(directory.iterdir()) if p.is_file()})
    with running_hub(hub, port=port) as served:
        print(f"{repo}@{sha} at {served.url}", flush=True)
        if sha_file is not None:
            sha_file.write_text(sha + "\n")
        threading.Event().wait()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]) if len(sys.argv) > 4 else None)
