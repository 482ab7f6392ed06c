"""A real local package index for tests: wheels built by the test, a PEP 503 directory, served on
127.0.0.1 by the standard library's HTTP server in a thread.

``make_wheel`` writes a real wheel (zip with METADATA, WHEEL, RECORD) the way pypa/installer's tests
do; ``LocalIndex`` lays out ``simple/<project>/index.html`` pages with ``#sha256=`` fragments (PEP 503)
and serves them. Files added with an ``upload_time`` also get a PEP 691 JSON page carrying PEP 700's
``upload-time`` (what uv's ``--exclude-newer`` reads), served to clients that ask for JSON; a file
marked with ``yank`` is ``data-yanked`` on the HTML page and ``"yanked"`` on the JSON page, which a
project with a yanked file always has (PEP 592, PEP 691). ``serve`` can require HTTP basic
authentication (a private index).
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.server
import json
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tests.support.httpserve import QuietServer
from packaging.utils import canonicalize_name


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    dest: Path,
    name: str,
    version: str,
    *,
    metadata_version: str | None = None,
    requires: Sequence[str] = (),
    files: dict[str, str] | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """Write ``<name>-<version>-<tag>.whl`` into ``dest`` and return its path.

    :param metadata_version: the ``Version:`` written into METADATA (default ``version``); a
        different value reproduces wheels whose file name and metadata disagree (field case B04).
    :param requires: ``Requires-Dist`` lines.
    :param files: extra files, path -> text (default: one module ``<name>/__init__.py``).
    """
    dist = name.replace("-", "_")
    info = f"{dist}-{metadata_version or version}.dist-info"
    content = dict(files or {f"{dist}/__init__.py": f"__version__ = {version!r}\n"})
    content[f"{info}/METADATA"] = "".join(
        [f"Metadata-Version: 2.1\nName: {name}\nVersion: {metadata_version or version}\n"]
        + [f"Requires-Dist: {r}\n" for r in requires]
    )
    content[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: envforge-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    record = "".join(f"{p},{_record_hash(t.encode())},{len(t.encode())}\n" for p, t in content.items())
    content[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, t in content.items():
            zf.writestr(zipfile.ZipInfo(p, date_time=(2026, 1, 1, 0, 0, 0)), t)
    return path


@dataclass
class LocalIndex:
    """A PEP 503 index rooted at ``root`` (``simple/`` pages, ``files/`` wheels)."""

    root: Path
    url: str = ""

    def add(self, wheel: Path, *, upload_time: str | None = None) -> None:
        """Copy ``wheel`` (or an sdist, ``NAME-VERSION.tar.gz``) into ``files/`` and regenerate the
        project's simple page.

        :param upload_time: RFC 3339 time (``2020-01-01T00:00:00Z``) published in the JSON page.
        """
        files = self.root / "files"
        files.mkdir(parents=True, exist_ok=True)
        (files / wheel.name).write_bytes(wheel.read_bytes())
        if upload_time is not None:
            times = self._times()
            times[wheel.name] = upload_time
            (self.root / "upload-times.json").write_text(json.dumps(times, sort_keys=True))
        project = canonicalize_name(wheel.name.split("-")[0])
        self._write_page(project)

    def yank(self, filename: str, reason: str = "") -> None:
        """Mark the file ``filename`` yanked with ``reason`` (PEP 592) and regenerate its page."""
        yanks = self._yanks()
        yanks[filename] = reason
        (self.root / "yanked.json").write_text(json.dumps(yanks, sort_keys=True))
        self._write_page(canonicalize_name(filename.split("-")[0]))

    def _times(self) -> dict[str, str]:
        path = self.root / "upload-times.json"
        return dict(json.loads(path.read_text())) if path.is_file() else {}

    def _yanks(self) -> dict[str, str]:
        path = self.root / "yanked.json"
        return dict(json.loads(path.read_text())) if path.is_file() else {}

    def _write_page(self, project: str) -> None:
        links = []
        yanks = self._yanks()
        for whl in sorted([*(self.root / "files").glob("*.whl"), *(self.root / "files").glob("*.tar.gz")]):
            if canonicalize_name(whl.name.split("-")[0]) != project:
                continue
            digest = hashlib.sha256(whl.read_bytes()).hexdigest()
            yanked = f' data-yanked="{html.escape(yanks[whl.name])}"' if whl.name in yanks else ""
            links.append(
                f'<a{yanked} href="../../files/{html.escape(whl.name)}#sha256={digest}">'
                f"{html.escape(whl.name)}</a><br/>"
            )
        page = self.root / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
        times = self._times()
        if times or yanks:  # PEP 691 JSON with PEP 700 upload-time and PEP 592 yanked
            files = [
                {
                    "filename": w.name,
                    "url": f"../../files/{w.name}",
                    "hashes": {"sha256": hashlib.sha256(w.read_bytes()).hexdigest()},
                    **({"upload-time": times[w.name]} if w.name in times else {}),
                    **({"yanked": yanks[w.name] or True} if w.name in yanks else {}),
                }
                for w in sorted((self.root / "files").glob("*.whl"))
                if canonicalize_name(w.name.split("-")[0]) == project
            ]
            (page.parent / "index.json").write_text(
                json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files, "versions": []})
            )
        projects = sorted(p.name for p in (self.root / "simple").iterdir() if p.is_dir())
        (self.root / "simple" / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n"
            + "\n".join(f'<a href="{p}/">{p}</a><br/>' for p in projects)
            + "\n</body></html>\n"
        )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    delay_s = 0.0
    prefix = ""  # "/<token>": each served index has URLs no other server in the run had
    auth: str | None = None  # "Basic <base64>" the client must send
    seen_auth: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        if self.prefix:
            if not self.path.startswith(self.prefix + "/"):
                self.send_error(404)
                return
            self.path = self.path[len(self.prefix) :]
        if self.auth is not None:
            given = self.headers.get("Authorization")
            self.seen_auth.append(given or "")
            if given != self.auth:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="envforge-test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        if self.delay_s and self.path.endswith(".whl"):
            time.sleep(self.delay_s)  # a slow mirror: lets a test kill a build in the middle of sync
        json_page = self.translate_path(self.path.split("?")[0]) + "/index.json"
        if "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "") and Path(json_page).is_file():
            body = Path(json_page).read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@contextmanager
def serve(index: LocalIndex, *, delay_s: float = 0.0, auth: tuple[str, str] | None = None) -> Iterator[LocalIndex]:
    """Serve ``index.root`` on 127.0.0.1 (a free port) while the block runs; sets ``index.url``.

    The URL carries a path segment of its own (``http://127.0.0.1:PORT/<token>/simple``): uv's
    cache is keyed by URL and the OS reuses ports, so without it a wheel another test fetched from
    the same port and file name is served from the cache and the test's server never sees a request
    (a slow mirror that is not slow: the CI failure of a SIGTERM-during-sync test).

    ``delay_s`` delays every wheel download (a slow mirror). ``auth`` (user, password) requires
    HTTP basic authentication on every request (401 otherwise), as a private index does.
    """
    header = None if auth is None else "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    prefix = "/" + uuid.uuid4().hex[:12]
    attrs = {"delay_s": delay_s, "auth": header, "seen_auth": [], "prefix": prefix}
    handler = partial(type("Handler", (_QuietHandler,), attrs), directory=str(index.root))
    server = QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    index.url = f"http://127.0.0.1:{server.server_address[1]}{prefix}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
