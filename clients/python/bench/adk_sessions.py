"""Google ADK session services side by side: ADK's ``InMemorySessionService``
(not durable), ADK's ``DatabaseSessionService`` on a SQLite file (aiosqlite)
in a temporary directory, and ``ctx_client.adk.CtxSessionService`` over a
``ctx serve --store local`` this script starts in another temporary
directory (a new one per run), and with ``--embedded`` also over ctx in
this process (``AsyncEmbedded(dir)``, the native module, on a fresh
directory).

For each service: one session; ``--events`` calls of ``append_event`` one
after the other on the session object (as a Runner appends an invocation's
events), alternating a user event (~300 bytes of text) and a model event
(~900 bytes), every fifth setting a session key and every tenth a
``user:`` key; then ``--reads`` calls of ``get_session`` of the whole
session and of ``get_session`` with ``num_recent_events=10``. Rates are
calls over wall time; latencies are medians; the last column is each
row's append_event/s over DatabaseSessionService's. Bytes at rest: the
SQLite file, ctx's whole data directory (with its ``cache/`` apart) after
the server stops or the ``AsyncEmbedded`` is flushed and dropped.

The requests each ctx operation sends are counted by an httpx transport
(tests/request_counting.py), an ``AsyncEmbedded``'s calls at its native
handle, and printed.

Usage (from the repository root, in the venv tests/python/run makes):
    PYTHONPATH=clients/python/src .venv-tests/python/bin/python \\
        clients/python/bench/adk_sessions.py --ctx target/release/ctx [--events 200] [--embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _serve import start_ctx  # noqa: E402
from request_counting import CountingEmbedded, CountingTransport  # noqa: E402

from ctx_client import AsyncClient, AsyncEmbedded  # noqa: E402
from ctx_client.adk import CtxSessionService  # noqa: E402

TEXT = (
    "The quick brown fox jumps over the lazy dog while the agent weighs its next "
    "tool call, reads the file it was given and writes down what it found. "
)


def _event(i: int) -> Event:
    user = i % 2 == 0
    state: dict[str, Any] = {}
    if i % 5 == 0:
        state["step"] = i
    if i % 10 == 0:
        state["user:seen"] = i
    return Event(
        invocation_id=f"inv-{i // 2}",
        author="user" if user else "assistant",
        content=types.Content(
            role="user" if user else "model",
            parts=[types.Part(text=f"{i}: " + TEXT * (2 if user else 6))],
        ),
        actions=EventActions(state_delta=state),
    )


async def _timed(n: int, op: Callable[[int], Awaitable[Any]]) -> tuple[float, float]:
    """(calls per second, median ms) of ``n`` calls of ``op`` in a row."""
    laps: list[float] = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await op(i)
        laps.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    return n / total, statistics.median(laps) * 1000


async def _run(service: BaseSessionService, events: int, reads: int) -> dict[str, float]:
    session = await service.create_session(app_name="bench", user_id="ada", session_id="s")
    appended = [_event(i) for i in range(events)]
    rate, p50 = await _timed(events, lambda i: service.append_event(session, appended[i]))

    async def get(_: int) -> None:
        got = await service.get_session(app_name="bench", user_id="ada", session_id="s")
        assert got is not None and len(got.events) == events

    async def recent(_: int) -> None:
        got = await service.get_session(
            app_name="bench",
            user_id="ada",
            session_id="s",
            config=GetSessionConfig(num_recent_events=10),
        )
        assert got is not None and len(got.events) == 10

    _, get_ms = await _timed(reads, get)
    _, recent_ms = await _timed(reads, recent)
    return {"append/s": rate, "append ms": p50, "get ms": get_ms, "recent ms": recent_ms}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _ctx_size(data: Path) -> str:
    """A ctx data directory's bytes, with its cache/ apart."""
    return f"{_size(data):,} (cache/ {_size(data / 'cache'):,})"


async def _ctx(
    client: AsyncClient,
    counter: CountingTransport | CountingEmbedded,
    events: int,
    reads: int,
) -> tuple[dict[str, float], dict[str, Counter[str]]]:
    """The run on ``CtxSessionService(client)``, then the requests of one
    call of each operation, as ``counter`` counts them."""
    service = CtxSessionService(client)
    result = await _run(service, events, reads)
    session = await service.get_session(app_name="bench", user_id="ada", session_id="s")
    assert session is not None
    counts: dict[str, Counter[str]] = {}
    for name, op in [
        ("append_event", lambda: service.append_event(session, _event(events))),
        (
            "append_event with user: key",
            lambda: service.append_event(session, _event(events + 9)),
        ),
        (
            "get_session",
            lambda: service.get_session(app_name="bench", user_id="ada", session_id="s"),
        ),
        ("create_session", lambda: service.create_session(app_name="bench", user_id="ada")),
        (
            "list_sessions (2 sessions)",
            lambda: service.list_sessions(app_name="bench", user_id="ada"),
        ),
    ]:
        mark = counter.mark()
        await op()
        counts[name] = counter.tally(mark)
    return result, counts


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ctx", required=True, help="the ctx binary")
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--reads", type=int, default=30)
    ap.add_argument(
        "--embedded",
        action="store_true",
        help="also CtxSessionService(AsyncEmbedded(dir)): ctx in this process, no server",
    )
    args = ap.parse_args()
    rows: list[tuple[str, dict[str, float], str]] = []

    rows.append(
        (
            "InMemorySessionService",
            await _run(InMemorySessionService(), args.events, args.reads),
            "(memory)",
        )
    )

    with tempfile.TemporaryDirectory() as d:
        db_file = Path(d) / "adk.db"
        db = DatabaseSessionService(f"sqlite+aiosqlite:///{db_file}")
        result = await _run(db, args.events, args.reads)
        await db.close()
        rows.append(("DatabaseSessionService (SQLite file)", result, f"{_size(Path(d)):,}"))

    counts: dict[str, dict[str, Counter[str]]] = {}
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "data"
        proc, url, token = start_ctx(args.ctx, data)
        try:
            transport = CountingTransport()
            async with AsyncClient(url, token=token, transport=transport) as client:
                name = "CtxSessionService (ctx serve)"
                result, counts[name] = await _ctx(client, transport, args.events, args.reads)
        finally:
            proc.terminate()
            proc.wait()
        rows.append((name, result, _ctx_size(data)))
    if args.embedded:
        with tempfile.TemporaryDirectory() as d:
            data = Path(d) / "data"
            embedded = AsyncEmbedded(data)
            counted = CountingEmbedded(embedded)
            name = "CtxSessionService (AsyncEmbedded, in the process)"
            result, counts[name] = await _ctx(embedded, counted, args.events, args.reads)
            await embedded.aclose()
            del embedded, counted
            gc.collect()
            rows.append((name, result, _ctx_size(data)))

    print(f"{args.events} events, {args.reads} reads; Python {sys.version.split()[0]}")
    print()
    print(
        "| service | append_event/s | append_event p50 ms | get_session ms (all events)"
        " | get_session ms (num_recent_events=10) | bytes at rest"
        " | append_event/s ÷ DatabaseSessionService's |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = rows[1][1]["append/s"]
    for name, r, size in rows:
        print(
            f"| {name} | {r['append/s']:,.0f} | {r['append ms']:.2f} | {r['get ms']:.2f} "
            f"| {r['recent ms']:.2f} | {size} | {r['append/s'] / base:.2f}× |"
        )
    for service, ops in counts.items():
        print()
        print(f"| {service}: operation | requests | which |")
        print("|---|---:|---|")
        for name, c in ops.items():
            which = ", ".join(f"{op} × {n}" if n > 1 else op for op, n in sorted(c.items()))
            print(f"| {name} | {sum(c.values())} | {which} |")


if __name__ == "__main__":
    asyncio.run(main())
