"""Retries: 503 and 429 are sent again after Retry-After (or a backoff);
other errors are not. httpx's MockTransport stands in for the network so
the waits are recorded, not slept."""

from __future__ import annotations

import httpx
import pytest

from ctx_client import (
    AsyncClient,
    Client,
    InvalidError,
    RateLimitedError,
    RetryPolicy,
    UnavailableError,
)

BUSY = b'{"error":{"kind":"unavailable","message":"in-flight budget full"}}'
SLOW = b'{"error":{"kind":"rate_limited","message":"slow down"}}'
OK = b'{"id":"ctx-00000000000000000000000000000001"}'


def scripted(responses: list[httpx.Response], seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses.pop(0)

    return httpx.MockTransport(handle)


def test_retries_503_and_429_honouring_retry_after() -> None:
    seen: list[httpx.Request] = []
    waits: list[float] = []
    responses = [
        httpx.Response(503, content=BUSY, headers={"retry-after": "2"}),
        httpx.Response(429, content=SLOW, headers={"retry-after": "1"}),
        httpx.Response(503, content=BUSY),
        httpx.Response(200, content=OK),
    ]
    with Client(
        "http://ctx.test", token="t", transport=scripted(responses, seen), sleep=waits.append
    ) as c:
        assert c.resolve("p") == "ctx-00000000000000000000000000000001"
    assert waits == [2.0, 1.0, 0.8]  # the third has no Retry-After: 0.2 * 2**2
    assert len(seen) == 4
    assert all(r.headers["authorization"] == "Bearer t" for r in seen)


def test_a_retried_checkpoint_is_the_same_request() -> None:
    seen: list[httpx.Request] = []
    responses = [
        httpx.Response(503, content=BUSY, headers={"retry-after": "0"}),
        httpx.Response(201, content=b"{}"),
    ]
    with Client("http://ctx.test", transport=scripted(responses, seen), sleep=lambda s: None) as c:
        c.checkpoint(principal="p", template="t", format="raw", delta="x")
    # Same body, so the same created_at: the server makes it the same commit.
    assert seen[0].content == seen[1].content
    assert b'"created_at"' in seen[0].content


def test_gives_up_after_max_retries_with_the_kind() -> None:
    seen: list[httpx.Request] = []
    responses = [httpx.Response(429, content=SLOW, headers={"retry-after": "5"})] * 3
    waits: list[float] = []
    policy = RetryPolicy(max_retries=2)
    with Client(
        "http://ctx.test",
        transport=scripted(list(responses), seen),
        retry=policy,
        sleep=waits.append,
    ) as c:
        with pytest.raises(RateLimitedError) as e:
            c.get_ref("x")
    assert e.value.retry_after == 5.0 and e.value.status == 429
    assert waits == [5.0, 5.0] and len(seen) == 3


def test_other_errors_are_not_retried() -> None:
    seen: list[httpx.Request] = []
    body = b'{"error":{"kind":"invalid","message":"bad","field":"target"}}'
    with Client(
        "http://ctx.test",
        transport=scripted([httpx.Response(400, content=body)], seen),
        sleep=lambda s: pytest.fail("slept"),
    ) as c:
        with pytest.raises(InvalidError) as e:
            c.set_ref("x", "ctx-1")
    assert e.value.field == "target" and len(seen) == 1


def test_a_proxy_error_without_ctx_body_gets_the_status_kind() -> None:
    seen: list[httpx.Request] = []
    responses = [httpx.Response(502, content=b"<html>bad gateway</html>")]
    with Client("http://ctx.test", transport=scripted(responses, seen)) as c:
        with pytest.raises(UnavailableError) as e:
            c.healthz()
    assert e.value.kind == "unavailable" and "bad gateway" in e.value.message


def test_retry_after_as_http_date_is_capped() -> None:
    seen: list[httpx.Request] = []
    waits: list[float] = []
    responses = [
        httpx.Response(503, content=BUSY, headers={"retry-after": "Fri, 31 Dec 2100 23:59:59 GMT"}),
        httpx.Response(200, content=b"ok"),
    ]
    policy = RetryPolicy(max_delay=7.0)
    with Client(
        "http://ctx.test", transport=scripted(responses, seen), retry=policy, sleep=waits.append
    ) as c:
        assert c.healthz() == "ok"
    assert waits == [7.0]


async def test_async_retries() -> None:
    seen: list[httpx.Request] = []
    waits: list[float] = []

    async def record(s: float) -> None:
        waits.append(s)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            return httpx.Response(503, content=BUSY, headers={"retry-after": "3"})
        return httpx.Response(200, content=OK)

    async with AsyncClient(
        "http://ctx.test", transport=httpx.MockTransport(handle), sleep=record
    ) as c:
        assert await c.resolve("p") == "ctx-00000000000000000000000000000001"
    assert waits == [3.0] and len(seen) == 2
