"""The HTTP side of envforge's hub use: huggingface_hub's errors as envforge's, and every body bounded.

huggingface_hub (2.x) does every request through one ``httpx2.Client`` made by its client factory
(``huggingface_hub.set_client_factory``). :func:`install` sets a factory whose client is
huggingface_hub's default (its request hook, redirects followed, no timeout of its own) with a
transport that counts the bytes of every response body and stops one that passes the bound in force
(:func:`body_limit`): a file's bound is the size the hub lists for it, so a ``config.json`` listed as
452 bytes cannot write 786 MB (issue 41: a hub that streams an endless body); any other answer (a
``model_info`` listing, a redirect) is bounded by :data:`API_BODY_LIMIT`.

:func:`hub_errors` turns what huggingface_hub raises into :class:`envforge.core.errors.InputError` (a
missing repository or revision, offline mode) or :class:`~envforge.core.errors.ExternalToolError` (the
hub could not be reached, answered something that is not what it documents, or sent more than it listed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from envforge.core.errors import ExternalToolError, InputError

__all__ = ["API_BODY_LIMIT", "BodyTooLong", "body_limit", "endpoint_url", "hub_errors", "install", "malformed_answer"]

#: Most bytes of a hub answer that is not a selected file (a ``model_info`` listing with every
#: file's metadata is a few hundred KB for a large repository).
API_BODY_LIMIT = 64 << 20
_LIMIT: ContextVar[int] = ContextVar("envforge_hub_body_limit", default=API_BODY_LIMIT)
_installed: list[bool] = []


class BodyTooLong(Exception):
    """A response body passed the bound in force (:func:`body_limit`); the download was stopped."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(f"{url}: more than {limit:,} bytes")
        self.url = url
        self.limit = limit


@contextmanager
def body_limit(limit: int) -> Iterator[None]:
    """Bound every response body read in this block (this thread and context) to ``limit`` bytes."""
    token = _LIMIT.set(max(0, limit))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def install() -> None:
    """Make huggingface_hub use the bounded client (once per process; its shared client is rebuilt)."""
    if _installed:
        return
    import httpx2  # lazy: huggingface_hub's HTTP client, loaded only when the hub is used
    from huggingface_hub import set_client_factory  # lazy: huggingface_hub is heavy
    from huggingface_hub.utils._http import hf_request_event_hook  # lazy: as above

    class Limited(httpx2.SyncByteStream):
        def __init__(self, inner: Any, url: str, limit: int) -> None:
            self.inner, self.url, self.limit = inner, url, limit

        def __iter__(self) -> Iterator[bytes]:
            seen = 0
            for chunk in self.inner:
                seen += len(chunk)
                if seen > self.limit:
                    raise BodyTooLong(self.url, self.limit)
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class Transport(httpx2.HTTPTransport):
        def handle_request(self, request: Any) -> Any:
            response = super().handle_request(request)
            response.stream = Limited(response.stream, str(request.url), _LIMIT.get())
            return response

    def factory() -> Any:
        return httpx2.Client(
            event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None, transport=Transport()
        )

    set_client_factory(factory)
    _installed.append(True)


def _transport_errors() -> tuple[type[BaseException], ...]:
    import httpx2  # lazy: huggingface_hub's HTTP client, loaded only when the hub is used
    from huggingface_hub.errors import SafetensorsParsingError  # lazy: as above

    return (OSError, SafetensorsParsingError, httpx2.HTTPError)


def endpoint_url(endpoint: str | None) -> str:
    """The hub URL in use: ``endpoint``, else huggingface_hub's (``HF_ENDPOINT`` or huggingface.co)."""
    if endpoint:
        return endpoint.rstrip("/")
    from huggingface_hub import constants  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    return str(constants.ENDPOINT)


def malformed_answer(what: str, endpoint: str | None, exc: BaseException) -> ExternalToolError:
    """The error for a hub answer that is not what huggingface_hub documents (a listing without ``id``
    or ``sha``: huggingface_hub's parsing raises ``KeyError``/``TypeError``; rc 70 before, issue 41)."""
    url = endpoint_url(endpoint)
    return ExternalToolError(
        f"the hub at {urlsplit(url).netloc or url} answered {what} with something that is not a "
        f"valid answer ({type(exc).__name__}: {exc})",
        tool="huggingface_hub",
        argv=(what,),
        returncode=None,
        hint=f"check HF_ENDPOINT (the hub in use: {url})",
    )


@contextmanager
def hub_errors(what: str, repo: str, revision: str, endpoint: str | None = None) -> Iterator[None]:
    """Turn huggingface_hub errors into envforge errors (input error for a missing repo or revision);
    a transport error or an answer longer than its bound names the hub's host (``endpoint``, see
    :func:`endpoint_url`)."""
    from huggingface_hub.errors import (  # lazy: huggingface_hub is heavy; loaded only when the hub is used
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    install()
    try:
        yield
    except OfflineModeIsEnabled:
        raise InputError(
            f"huggingface_hub is in offline mode (HF_HUB_OFFLINE is set): {what} needs the hub",
            hint="check a drafter fetched earlier from its directory (`envforge drafter fetch REPO "
            "--revision SHA --dest DIR` re-hashes the recorded copy offline), or unset "
            "HF_HUB_OFFLINE",
        ) from None
    except RepositoryNotFoundError:
        raise InputError(
            f"repository {repo} not found on the hub",
            hint="check the id; a private or gated repository needs HF_TOKEN in the environment",
        ) from None
    except RevisionNotFoundError:
        raise InputError(
            f"revision '{revision}' not found in {repo}", hint="use a commit sha from the repository's history"
        ) from None
    except BodyTooLong as exc:
        url = endpoint_url(endpoint)
        bound = (
            "a file's bound is the size the hub lists for it"
            if exc.limit != API_BODY_LIMIT
            else "the bound of an answer that is not a file"
        )
        raise ExternalToolError(
            f"the hub at {urlsplit(url).netloc or url} sent more than {exc.limit:,} bytes for "
            f"{what} ({bound}): the download was stopped and nothing of it kept",
            tool="huggingface_hub",
            argv=(what,),
            returncode=None,
            hint=f"check HF_ENDPOINT (the hub in use: {url}); a hub that sends more than it lists is broken or hostile",
        ) from None
    except _transport_errors() as exc:
        url = endpoint_url(endpoint)
        raise ExternalToolError(
            f"huggingface_hub failed talking to {urlsplit(url).netloc or url}: {what}",
            tool="huggingface_hub",
            argv=(what,),
            returncode=None,
            stderr_tail=str(exc)[-800:],
            hint=f"check the network and HF_ENDPOINT (the hub in use: {url}), then run again",
        ) from None
