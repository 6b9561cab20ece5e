"""Operations as generators of API calls, and what drives them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

from .._core import Call
from ..client import AsyncClient, Client

R = TypeVar("R")
# An operation: yields a call (or a list of calls, sent concurrently) and
# receives its result (or the list of results), or a _Wait and receives
# None; returns R.
Op = Generator[Any, Any, R]

# How long an operation waits for the ones of this saver it follows; past
# it, it goes on as if they had not started (its compare-and-swap stays
# correct, only a 409 dearer).
WAIT_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class _Wait:
    """Operations of this saver in flight that the yielding one follows
    (the put of a checkpoint its writes attach to, a parent's put): the
    driver waits until they end."""

    futures: list[Future[None]]


def _maybe(call: Call[Any], *also: int) -> Call[Any]:
    """The same call, answering ``None`` for a 404 (and the ``also`` statuses)."""

    def parse(resp: Any) -> Any:
        return None if resp.status_code in (404, *also) else call.parse(resp)

    return dataclasses.replace(call, parse=parse)


def _drive_sync(client: Client, pool: ThreadPoolExecutor, op: Op[R]) -> R:
    try:
        request = next(op)
        while True:
            try:
                if isinstance(request, _Wait):
                    concurrent.futures.wait(request.futures, timeout=WAIT_SECONDS)
                    result: Any = None
                elif isinstance(request, list):
                    # One call needs no other thread (a hand-off costs more
                    # than the request on a small machine).
                    if len(request) > 1:
                        result = list(pool.map(client.send, request))
                    else:
                        result = [client.send(c) for c in request]
                else:
                    result = client.send(request)
            except Exception as e:  # noqa: BLE001 - handed to the operation
                request = op.throw(e)
                continue
            request = op.send(result)
    except StopIteration as stop:
        return cast(R, stop.value)


async def _drive_async(client: AsyncClient, op: Op[R]) -> R:
    try:
        request = next(op)
        while True:
            try:
                if isinstance(request, _Wait):
                    await asyncio.wait(
                        [asyncio.wrap_future(f) for f in request.futures], timeout=WAIT_SECONDS
                    )
                    result: Any = None
                elif isinstance(request, list):
                    result = await asyncio.gather(*(client.send(c) for c in request))
                else:
                    result = await client.send(request)
            except Exception as e:  # noqa: BLE001 - handed to the operation
                request = op.throw(e)
                continue
            request = op.send(result)
    except StopIteration as stop:
        return cast(R, stop.value)
