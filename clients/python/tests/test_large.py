"""Contexts larger than API Gateway and Lambda carry (10 MB in, 6 MB
out): with aws storage the client PUTs a large delta to a presigned URL
and follows the 303 of a large download to storage, without its bearer
token; embedded, both pass through the server. Either way the bytes come
back whole and checked."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import httpx

from ctx_client import AsyncClient, Client


class Recorder(httpx.HTTPTransport):
    """Sends as usual, noting each request: method, origin, path and
    whether it carried an Authorization header."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, str, bool]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(
            (
                request.method,
                f"{request.url.host}:{request.url.port}",
                request.url.path,
                "authorization" in request.headers,
            )
        )
        return super().handle_request(request)


class AsyncRecorder(httpx.AsyncHTTPTransport):
    """:class:`Recorder` for the async client."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, str, bool]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(
            (
                request.method,
                f"{request.url.host}:{request.url.port}",
                request.url.path,
                "authorization" in request.headers,
            )
        )
        return await super().handle_async_request(request)


def origin(url: str) -> str:
    u = urlsplit(url)
    return f"{u.hostname}:{u.port}"


def check_route(seen: list[tuple[str, str, str, bool]], server: str) -> None:
    """On aws storage, the delta went to storage by PUT and the bytes came
    back from it by GET, neither with the bearer token; embedded, nothing
    went anywhere but the server."""
    elsewhere = [s for s in seen if s[1] != server]
    if os.environ.get("CTX_TEST_STORE") == "aws":
        assert [m for m, *_ in elsewhere] == ["PUT", "GET"], seen
        assert not any(auth for *_, auth in elsewhere), seen
        commits = [s for s in seen if s[0] == "POST" and s[2] == "/v1/commits"]
        assert len(commits) == 1, seen
    else:
        assert elsewhere == [], seen


def test_a_50_mb_context_round_trips(server_url: str, token: str, unique: str) -> None:
    data = os.urandom(50 * 1000 * 1000)
    rec = Recorder()
    with Client(server_url, token=token, transport=rec, timeout=300) as c:
        commit = c.checkpoint(principal=f"large-{unique}", template="t", format="raw", delta=data)
        m, got = c.materialize_bytes(commit["id"], stop="root")
    assert m["size"] == len(data)
    assert got == data
    check_route(rec.seen, origin(server_url))


async def test_the_async_client_takes_the_same_route(
    server_url: str, token: str, unique: str
) -> None:
    data = os.urandom(5 * 1000 * 1000)
    rec = AsyncRecorder()
    async with AsyncClient(server_url, token=token, transport=rec, timeout=300) as c:
        commit = await c.checkpoint(
            principal=f"large-{unique}", template="t", format="raw", delta=data
        )
        got = await c.download_artifact(commit["artifact_ref"])
    assert got == data
    check_route(rec.seen, origin(server_url))
