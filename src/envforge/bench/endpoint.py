"""Where a benchmarked server answers: host, port, path prefix, scheme, and what every request carries.

``--url http(s)://HOST:PORT[/prefix]`` or a server envforge started (plain HTTP on 127.0.0.1). An
https server is verified with the system's CAs, or with the CA certificates of ``--ca-cert``
(:func:`envforge.bench.transport.tls`); the headers (``--header``, ``OPENAI_API_KEY``:
:mod:`envforge.bench.headers`) go with every request to it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from envforge.bench.transport import tls
from envforge.core.errors import InputError

__all__ = ["Endpoint", "ca_file"]


def ca_file(path: Path) -> str:
    """``path`` as the CA file https servers are verified with (``--ca-cert``), read once now.

    :raises InputError: it cannot be read or holds no PEM certificate (exit 2, naming it).
    """
    try:
        tls(str(path))
    except (OSError, ssl.SSLError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(
            f"--ca-cert {path}: {why}",
            hint="give a PEM file of the CA certificate(s) that signed the server's certificate",
        ) from None
    return str(path)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server answers: ``host``, ``port``, a path ``prefix`` (``""`` for the root) and the
    ``scheme`` (``https``: verified with the system's CAs, or those in the PEM file ``ca``), and
    the ``headers`` every request to it carries (``--header``, ``OPENAI_API_KEY``: credentials,
    so neither shown by ``repr`` nor compared)."""

    host: str
    port: int
    prefix: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    scheme: str = "http"
    ca: str | None = field(default=None, compare=False)

    @classmethod
    def from_url(cls, url: str, headers: tuple[tuple[str, str], ...] = (), ca: str | None = None) -> Endpoint:
        """Parse ``http(s)://host:port[/prefix]``.

        :raises ValueError: another scheme or no host.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"'{url}' is not an http(s)://HOST:PORT URL")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.hostname, port, parts.path.rstrip("/"), headers, parts.scheme, ca)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}{self.prefix}"
