"""A hostile hub (issue 41): the local hub-compatible server (tests/support/hub_server.py, 127.0.0.1) made
to stream without end, list 20,000 files, send a listing without ``id`` or one of 80 MB. huggingface_hub
runs for real; every answer is bounded by what the hub lists, every refusal names the cause.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from tests.support.hub_server import HubServer, eagle3_config, eagle3_files, running_hub

from envforge.core.errors import ExternalToolError, InputError
from envforge.drafter import fetch_drafter
from envforge.drafter.hub import MAX_FILES, find_partials, resolve_revision
from envforge.drafter import hubclient
from envforge.drafter.hubclient import API_BODY_LIMIT, BodyTooLong, endpoint_url

REPO = "test-org/drafter-a"


class HostileHub(HubServer):
    """``mode``: ``endless`` (config.json's GET streams for ever, no length), ``endless_lfs`` (the weights
    stream past their listed size), ``manyfiles`` (20,000 JSON siblings), ``noid`` (a listing without
    ``id``), ``nosha`` (without ``sha``), ``hugeinfo`` (a listing larger than the API bound)."""

    mode = ""
    streamed = 0

    def _endless(self, h: Any, sha: str, headers: dict[str, str], fill: bytes) -> None:
        h.send_response(200)
        for key, value in {"X-Repo-Commit": sha, **headers}.items():
            h.send_header(key, value)
        h.end_headers()
        end = time.monotonic() + 120  # the test's own bound: a client that never stops fails below
        try:
            while time.monotonic() < end:
                h.wfile.write(fill * (1 << 16))
                self.streamed += 1 << 16
        except OSError:
            pass  # the client stopped reading: what is asserted

    def _resolve_file(self, h: Any, repo: str, rev: str, name: str) -> None:
        found = self._resolve(repo, rev)
        if h.command == "GET" and not isinstance(found, str):
            sha, files = found
            if self.mode == "endless" and name == "config.json":
                return self._endless(h, sha, {"ETag": f'"{files[name].blob}"'}, b" ")
            if self.mode == "endless_lfs" and name == "model.safetensors":
                f = files[name]
                return self._endless(h, sha, {"X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(f.size)}, b"\0")
        return super()._resolve_file(h, repo, rev, name)

    def _model_info(self, h: Any, repo: str, rev: str) -> None:
        if self.mode in ("", "endless", "endless_lfs"):
            return super()._model_info(h, repo, rev)
        found = self._resolve(repo, rev)
        assert not isinstance(found, str)
        sha, files = found
        siblings: list[dict[str, object]] = [
            {"rfilename": n, "size": f.size, "blobId": f.blob} for n, f in files.items()
        ]
        data: dict[str, object] = {"_id": sha[:24], "id": repo, "modelId": repo, "sha": sha, "siblings": siblings}
        if self.mode == "manyfiles":
            siblings += [{"rfilename": f"extra/{i}.json", "size": 2, "blobId": "0" * 40} for i in range(20_000)]
        elif self.mode == "noid":
            del data["id"]
        elif self.mode == "nosha":
            del data["sha"]
        elif self.mode == "hugeinfo":
            data["cardData"] = {"pad": "x" * (API_BODY_LIMIT + (1 << 20))}
        h.send_response(200)
        self._send_body(h, json.dumps(data).encode(), "application/json")


@pytest.fixture(autouse=True)
def fresh_client() -> Any:
    """Each test installs the bounded client itself (huggingface_hub's shared client rebuilt), so what
    :func:`install` sets up is exercised in every test, not only in the first of a process."""
    from huggingface_hub import set_client_factory  # noqa: PLC0415
    from huggingface_hub.utils._http import default_client_factory  # noqa: PLC0415

    hubclient._installed.clear()
    set_client_factory(default_client_factory)
    yield
    hubclient._installed.clear()
    set_client_factory(default_client_factory)


@pytest.fixture
def hub() -> Any:
    server = HostileHub()
    server.sha = server.add_commit(REPO, eagle3_files(eagle3_config()))  # type: ignore[attr-defined]
    with running_hub(server) as running:
        yield running


@pytest.mark.parametrize("mode", ["endless", "endless_lfs"])
def test_a_body_longer_than_listed_is_stopped_and_nothing_of_it_kept(hub: Any, tmp_path: Path, mode: str) -> None:
    """A 786 MB config.json was written before; the download now stops at the listed size."""
    hub.mode = mode
    dest = tmp_path / "d"
    name = "config.json" if mode == "endless" else "model.safetensors"
    listed = hub.repos[REPO][hub.sha][name].size
    with pytest.raises(ExternalToolError) as stopped:
        fetch_drafter(REPO, hub.sha, dest, root=tmp_path, endpoint=hub.url)
    assert stopped.value.message == (
        f"the hub at {hub.url.removeprefix('http://')} sent more than {listed:,} bytes for hf_hub_download "
        f"{REPO}@{hub.sha} {name} (a file's bound is the size the hub lists for it): the download was stopped and "
        "nothing of it kept"
    )
    assert find_partials(dest) == [] and not (dest / name).exists()
    written = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) if dest.exists() else 0
    assert written < 16 << 20  # the other, honest files only


def test_a_repository_of_20000_json_files_is_refused_before_any_download(hub: Any, tmp_path: Path) -> None:
    hub.mode = "manyfiles"
    hub.reset_counters()
    with pytest.raises(InputError) as refused:
        fetch_drafter(REPO, hub.sha, tmp_path / "d", root=tmp_path, endpoint=hub.url)
    assert refused.value.message == (
        f"{REPO}@{hub.sha} is not a drafter repository envforge fetches: 20,002 files to fetch (a drafter has a "
        f"config, an index and its weights; at most {MAX_FILES}); nothing was downloaded"
    )
    assert [r.method for r in hub.requests] == ["GET"]  # the listing only


@pytest.mark.parametrize(("mode", "cause"), [("noid", "KeyError: 'id'"), ("nosha", "ValueError: sha None")])
def test_a_listing_without_id_or_sha_is_named_not_an_internal_error(hub: Any, mode: str, cause: str) -> None:
    hub.mode = mode
    with pytest.raises(ExternalToolError) as bad:
        resolve_revision(REPO, hub.sha, endpoint=hub.url)
    assert bad.value.message == (
        f"the hub at {hub.url.removeprefix('http://')} answered model_info {REPO}@{hub.sha} "
        f"with something that is not a valid answer ({cause})"
    )
    assert bad.value.hint == f"check HF_ENDPOINT (the hub in use: {hub.url})"
    assert (bad.value.tool, bad.value.argv, bad.value.exit_code) == (
        "huggingface_hub",
        (f"model_info {REPO}@{hub.sha}",),
        3,
    )


def test_a_listing_longer_than_the_api_bound_is_stopped(hub: Any) -> None:
    hub.mode = "hugeinfo"
    with pytest.raises(ExternalToolError) as stopped:
        resolve_revision(REPO, hub.sha, endpoint=hub.url)
    assert stopped.value.message == (
        f"the hub at {hub.url.removeprefix('http://')} sent more than "
        f"{API_BODY_LIMIT:,} bytes for model_info {REPO}@{hub.sha} (the bound of an answer "
        "that is not a file): the download was stopped and nothing of it kept"
    )


def test_the_endpoint_and_the_error_texts() -> None:
    assert endpoint_url("http://127.0.0.1:9/") == "http://127.0.0.1:9"
    assert endpoint_url(None).startswith("http")  # huggingface_hub's own (HF_ENDPOINT or huggingface.co)
    too_long = BodyTooLong("http://h/x", 1024)
    assert (str(too_long), too_long.url, too_long.limit) == ("http://h/x: more than 1,024 bytes", "http://h/x", 1024)


def test_installing_twice_keeps_one_client(hub: Any) -> None:
    from huggingface_hub import get_session  # noqa: PLC0415

    hubclient.install()
    first = get_session()
    hubclient.install()
    assert get_session() is first  # the second call changes nothing
    assert resolve_revision(REPO, hub.sha, endpoint=hub.url).sha == hub.sha
