"""Side-by-side bench of the two session adapters against their SDKs' own
stores, over a `ctx serve` on embedded storage that this script starts in
a temporary directory (a new one for each run, so bytes are one run's),
and with ``--embedded`` also over ctx in this process
(``AsyncEmbedded(dir)``, the native module; one per run, on a fresh
directory, shared by the run's sessions as an application shares it):

- OpenAI Agents SDK: ``ctx_client.openai_agents.CtxSession`` against the
  SDK's ``SQLiteSession`` on a database file in a temporary directory on
  the same disk (the SDK sets WAL; Python's sqlite3 leaves
  ``synchronous=FULL``).
- Claude Agent SDK: ``ctx_client.claude.CtxSessionStore`` against the
  SDK's ``InMemorySessionStore`` (not durable) and a JSONL file store
  written here to the SDK's ``SessionStore`` protocol (``append`` writes
  the lines and fsyncs the file; ``load`` reads it back): the durable
  baseline.

Each turn is two items, a user message (~300 bytes of text) and an
assistant message (~900 bytes), as the SDKs store them.

- OpenAI, sequential: one session; each turn calls ``get_items()`` and
  then ``add_items`` with the turn's two items, as ``Runner.run`` does
  without a session limit (each read comes right after a write); then
  ``--reads`` calls of ``get_items()`` and of ``get_items(limit=10)`` on
  the last state.
- Claude, sequential: one session; ``--turns`` calls of ``append`` one
  after the other (the SDK serialises a session's appends), then
  ``--reads`` calls of ``load`` (what a resume does).
- Concurrent: ``--sessions`` sessions at once (one store or one database
  file, as an application has), each running ``--turns / --sessions``
  turns in order and then its reads; the rate is all sessions' calls
  over the wall time, so a store that serialises its sessions shows no
  gain over the sequential run.

Bytes at rest are taken after the sequential run: the SQLite file and its
WAL after the session closes; the JSONL files; ctx's whole data
directory (CAS + SQLite + cache/) after the server stops or the
``AsyncEmbedded`` is flushed and dropped.

The requests each ctx operation sends are counted by an httpx transport
(tests/request_counting.py; tests/test_request_counts.py pins them), an
``AsyncEmbedded``'s calls by a wrapper of its native handle, and printed
per operation with the bytes answered. Both adapters are async only (the
SDKs' session protocols are async), so there is no blocking variant to
run. A second table gives each row's rates over the SDK's durable
store's (SQLiteSession, the JSONL file) and its concurrent rate over its
own sequential one.

Usage (from the repository root, in the venv tests/python/run makes):
    .venv-tests/python/bin/python clients/python/bench/session_stores.py \
        --ctx target/debug/ctx [--turns 500] [--quick] [--embedded]
Quote numbers of release builds (`cargo build --release -p ctx-cli` and,
in clients/python/native, `maturin develop --release`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.types import SessionKey, SessionStoreEntry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _serve import start_ctx  # noqa: E402
from request_counting import CountingEmbedded, CountingTransport  # noqa: E402

from ctx_client import AsyncClient, AsyncEmbedded  # noqa: E402
from ctx_client.claude import CtxSessionStore  # noqa: E402
from ctx_client.openai_agents import CtxSession  # noqa: E402

TEXT = (
    "The quick brown fox jumps over the lazy dog while the agent weighs its next "
    "tool call, reads the file it was given and writes down what it found. "
)
LIMIT = 10
TURN_READ = "get_items, each turn"


# --- what a turn stores -------------------------------------------------------


def openai_turn(i: int) -> list[Any]:
    """A user message and the assistant's answer, as Runner stores them
    (the output message is ``ResponseOutputMessage.to_input_item()``)."""
    return [
        {"role": "user", "content": f"question {i}: " + TEXT * 2},
        {
            "id": f"msg_{i:06d}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": f"answer {i}: " + TEXT * 6,
                    "annotations": [],
                    "logprobs": [],
                }
            ],
        },
    ]


def claude_turn(session_id: str, i: int) -> list[Any]:
    """A user and an assistant transcript entry, as Claude Code writes them."""
    u, a = f"{session_id[:8]}-u-{i:06d}", f"{session_id[:8]}-a-{i:06d}"
    prev = f"{session_id[:8]}-a-{i - 1:06d}" if i else None
    common = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/demo",
        "sessionId": session_id,
        "version": "2.1.0",
        "gitBranch": "main",
        "timestamp": f"2026-11-26T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
    }
    return [
        {
            **common,
            "parentUuid": prev,
            "type": "user",
            "message": {"role": "user", "content": f"question {i}: " + TEXT * 2},
            "uuid": u,
        },
        {
            **common,
            "parentUuid": u,
            "type": "assistant",
            "message": {
                "id": f"msg_{i:06d}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": f"answer {i}: " + TEXT * 6}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10 * i, "output_tokens": 200},
            },
            "requestId": f"req_{i:06d}",
            "uuid": a,
        },
    ]


def raw_bytes(items: list[Any]) -> int:
    """The items as compact JSON, one per line: what a transcript file holds."""
    return sum(len(json.dumps(x, separators=(",", ":")).encode()) + 1 for x in items)


# --- the durable baseline for the Claude SDK ------------------------------------


class JsonlFileStore:
    """A ``SessionStore`` (its two required methods; the SDK probes for the
    others) on JSONL files: ``{root}/{project_key}/{session_id}
    [/{subpath}].jsonl``. ``append`` writes the entries as lines and fsyncs
    before it returns; ``load`` parses the file (``None`` when there is
    none). File work runs in a worker thread, as SQLiteSession's does."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: SessionKey) -> Path:
        p = self.root / key["project_key"] / key["session_id"]
        subpath = key.get("subpath")
        if subpath:
            p = p / subpath
        return p.with_name(p.name + ".jsonl")

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode()

        def write() -> None:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())

        await asyncio.to_thread(write)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        def read() -> list[SessionStoreEntry] | None:
            try:
                text = self._path(key).read_text()
            except FileNotFoundError:
                return None
            return [json.loads(line) for line in text.split("\n") if line]

        return await asyncio.to_thread(read)


# --- measuring ------------------------------------------------------------------


class Ops:
    """Calls of each operation: their times and, on ctx, their requests."""

    def __init__(self, counter: CountingTransport | CountingEmbedded | None) -> None:
        self.counter = counter
        self.times: dict[str, list[float]] = {}
        self.requests: dict[str, list[int]] = {}
        self.received: dict[str, list[int]] = {}
        self.routes: dict[str, list[str]] = {}

    def rate(self, op: str) -> float:
        """Calls of ``op`` per second of its own time."""
        return len(self.times[op]) / sum(self.times[op])

    async def call(self, op: str, f: Callable[[], Awaitable[Any]]) -> Any:
        """Runs one call of ``op``, timed (and counted when sequential)."""
        mark = self.counter.mark() if self.counter else 0
        t0 = time.perf_counter()
        out = await f()
        self.times.setdefault(op, []).append(time.perf_counter() - t0)
        if self.counter:
            sent = self.counter.since(mark)
            self.requests.setdefault(op, []).append(len(sent))
            self.received.setdefault(op, []).append(self.counter.bytes_since(mark))
            self.routes[op] = sent  # the last call's: the steady state
        return out


async def timed_phase(f: Callable[[], Awaitable[Any]]) -> float:
    t0 = time.perf_counter()
    await f()
    return time.perf_counter() - t0


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


HTTP, EMBEDDED = "ctx serve, embedded", "AsyncEmbedded, in the process"
"""The two ways to ctx, as the rows name them: a `ctx serve --store local`
over HTTP, and the same storage opened in this process."""


class Ctx:
    """A fresh data directory in a temporary directory and a counted async
    client of it: a `ctx serve` on it (``HTTP``) or an ``AsyncEmbedded``
    (``EMBEDDED``)."""

    def __init__(self, ctx: str, way: str = HTTP) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.data = Path(self.tmp.name) / "data"
        self.proc = None
        self.counter: CountingTransport | CountingEmbedded
        if way == EMBEDDED:
            embedded = AsyncEmbedded(self.data)
            self.counter = CountingEmbedded(embedded)
            self.client: AsyncClient = embedded
        else:
            self.proc, url, token = start_ctx(ctx, self.data)
            self.counter = CountingTransport()
            self.client = AsyncClient(url, token=token, transport=self.counter)

    async def stop(self) -> dict[str, int]:
        """Stops the server (a clean stop truncates its WAL) or flushes
        and drops the ``AsyncEmbedded`` (closing its database): the data
        directory's bytes, in all and by area (``cas/``: artifacts too
        large to keep inline; ``cache/``: materializations and
        translations, evicted past ``CTX_CACHE_BYTES``; the rest: the
        SQLite database with its WAL, the token)."""
        await self.client.aclose()
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait()
        del self.client, self.counter
        gc.collect()
        sizes = {
            "total": _du(self.data),
            "cas": _du(self.data / "cas"),
            "cache": _du(self.data / "cache"),
            "wal": sum(f.stat().st_size for f in self.data.glob("*-wal")),
        }
        self.tmp.cleanup()
        return sizes


# --- OpenAI Agents SDK ----------------------------------------------------------


async def openai_sequential(session: Any, turns: int, reads: int, ops: Ops) -> dict[str, Any]:
    """Each turn reads the session and adds the turn's two items, as
    ``Runner.run`` does without a session limit; then reads of the last
    state, all items and the newest ``LIMIT``."""
    added: list[Any] = []
    for i in range(turns):
        got = await ops.call(TURN_READ, session.get_items)
        if got != added:
            raise AssertionError(f"{type(session).__name__}: turn {i} read other items")
        items = openai_turn(i)
        await ops.call("add_items", functools.partial(session.add_items, items))
        added += items
    for _ in range(reads):
        got = await ops.call("get_items", session.get_items)
        assert len(got) == 2 * turns
    for _ in range(reads):
        got = await ops.call(f"get_items(limit={LIMIT})", lambda: session.get_items(limit=LIMIT))
        assert got == added[-LIMIT:]
    return {
        "add_items/s": ops.rate("add_items"),
        "add p50": _p50_ms(ops.times["add_items"]),
        "turn read/s": ops.rate(TURN_READ),
        "turns/s": turns / (sum(ops.times["add_items"]) + sum(ops.times[TURN_READ])),
        "get_items/s": ops.rate("get_items"),
        "limit/s": ops.rate(f"get_items(limit={LIMIT})"),
        "raw": raw_bytes(added),
    }


async def openai_concurrent(sessions: list[Any], turns: int, reads: int) -> dict[str, Any]:
    async def write(s: Any) -> None:
        for i in range(turns):
            await s.get_items()
            await s.add_items(openai_turn(i))

    async def read(s: Any) -> None:
        for _ in range(reads):
            got = await s.get_items()
            assert len(got) == 2 * turns

    w = await timed_phase(lambda: asyncio.gather(*(write(s) for s in sessions)))
    r = await timed_phase(lambda: asyncio.gather(*(read(s) for s in sessions)))
    return {"turns/s": len(sessions) * turns / w, "get_items/s": len(sessions) * reads / r}


async def bench_openai(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    per = max(args.turns // args.sessions, 1)
    with tempfile.TemporaryDirectory() as tmp:
        s = SQLiteSession("bench-0", Path(tmp) / "sessions.db")
        row = await openai_sequential(s, args.turns, args.reads, Ops(None))
        s.close()  # the last connection folds the WAL into the database
        row["bytes"] = _du(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        ss = [SQLiteSession(f"bench-{k}", Path(tmp) / "sessions.db") for k in range(args.sessions)]
        row["concurrent"] = await openai_concurrent(ss, per, args.reads)
        for s in ss:
            s.close()
    rows.append({"name": "SQLiteSession (file, WAL, synchronous=FULL)", **row})

    for way in args.ways:
        ctx = Ctx(args.ctx, way)
        ops = Ops(ctx.counter)
        try:
            row = await openai_sequential(
                CtxSession("bench-0", ctx.client), args.turns, args.reads, ops
            )
        finally:
            sizes = await ctx.stop()
        row["bytes"], row["areas"], row["ops"] = sizes["total"], sizes, ops
        ctx = Ctx(args.ctx, way)
        try:
            mark = ctx.counter.mark()
            sessions = [CtxSession(f"bench-{k}", ctx.client) for k in range(args.sessions)]
            row["concurrent"] = await openai_concurrent(sessions, per, args.reads)
            row["concurrent requests"] = len(ctx.counter.since(mark))
        finally:
            await ctx.stop()
        rows.append({"name": f"CtxSession ({way})", **row})
    return rows


# --- Claude Agent SDK -----------------------------------------------------------


def _key(session_id: str) -> SessionKey:
    return {"project_key": "-home-dev-demo", "session_id": session_id}


async def claude_sequential(store: Any, turns: int, reads: int, ops: Ops) -> dict[str, Any]:
    sid = str(uuid.uuid4())
    key = _key(sid)
    added: list[Any] = []
    for i in range(turns):
        entries = claude_turn(sid, i)
        await ops.call("append", functools.partial(store.append, key, entries))
        added += entries
    for _ in range(reads):
        got = await ops.call("load", lambda: store.load(key))
        if got != added:
            raise AssertionError(f"{type(store).__name__}: load differs from what was appended")
    return {
        "append/s": ops.rate("append"),
        "load/s": ops.rate("load"),
        "append p50": _p50_ms(ops.times["append"]),
        "raw": raw_bytes(added),
    }


async def claude_concurrent(store: Any, sessions: int, turns: int, reads: int) -> dict[str, Any]:
    sids = [str(uuid.uuid4()) for _ in range(sessions)]

    async def write(sid: str) -> None:
        for i in range(turns):
            await store.append(_key(sid), claude_turn(sid, i))

    async def read(sid: str) -> None:
        for _ in range(reads):
            got = await store.load(_key(sid))
            assert got is not None and len(got) == 2 * turns

    w = await timed_phase(lambda: asyncio.gather(*(write(s) for s in sids)))
    r = await timed_phase(lambda: asyncio.gather(*(read(s) for s in sids)))
    return {"append/s": sessions * turns / w, "load/s": sessions * reads / r}


async def bench_claude(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    per = max(args.turns // args.sessions, 1)
    mem = await claude_sequential(InMemorySessionStore(), args.turns, args.reads, Ops(None))
    mem["bytes"] = None
    mem["concurrent"] = await claude_concurrent(
        InMemorySessionStore(), args.sessions, per, args.reads
    )
    rows.append({"name": "InMemorySessionStore (SDK; not durable)", **mem})

    with tempfile.TemporaryDirectory() as tmp:
        row = await claude_sequential(JsonlFileStore(Path(tmp)), args.turns, args.reads, Ops(None))
        row["bytes"] = _du(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        row["concurrent"] = await claude_concurrent(
            JsonlFileStore(Path(tmp)), args.sessions, per, args.reads
        )
    rows.append({"name": "JSONL file, fsync per append", **row})

    for way in args.ways:
        ctx = Ctx(args.ctx, way)
        ops = Ops(ctx.counter)
        try:
            row = await claude_sequential(CtxSessionStore(ctx.client), args.turns, args.reads, ops)
        finally:
            sizes = await ctx.stop()
        row["bytes"], row["areas"], row["ops"] = sizes["total"], sizes, ops
        ctx = Ctx(args.ctx, way)
        try:
            mark = ctx.counter.mark()
            row["concurrent"] = await claude_concurrent(
                CtxSessionStore(ctx.client), args.sessions, per, args.reads
            )
            row["concurrent requests"] = len(ctx.counter.since(mark))
        finally:
            await ctx.stop()
        rows.append({"name": f"CtxSessionStore ({way})", **row})
    return rows


# --- output -----------------------------------------------------------------------


def _bytes(row: dict[str, Any]) -> str:
    if row["bytes"] is None:
        return "— (in memory)"
    return f"{row['bytes']:,} ({row['bytes'] / row['raw']:.2f}× raw)"


def _areas(row: dict[str, Any]) -> str:
    """Where a ctx data directory's bytes are."""
    a, raw = row["areas"], row["raw"]
    rest = a["total"] - a["cas"] - a["cache"]
    return (
        f"{row['name']}: raw {raw:,} bytes; SQLite and token {rest:,} (of which WAL "
        f"{a['wal']:,}), cas/ {a['cas']:,}, cache/ {a['cache']:,}; "
        f"without cache/ {(rest + a['cas']) / raw:.2f}× raw"
    )


def _requests(adapter: str, ops: Ops) -> list[str]:
    lines = []
    for op, counts in ops.requests.items():
        lo, hi = min(counts), max(counts)
        spread = f"{lo}" if lo == hi else f"{lo}–{hi}"
        got = ops.received[op]
        lines.append(
            f"| {adapter} | {op} | {spread} | {sum(counts) / len(counts):.2f} "
            f"| {got[-1]:,} | {len(counts)} | {', '.join(ops.routes[op])} |"
        )
    return lines


def _ratios(rows: list[dict[str, Any]], base: dict[str, Any], cols: list[str]) -> list[str]:
    """Each row's rates over ``base``'s (its SDK's durable store), and its
    concurrent rate over its own sequential one."""
    lines = []
    for r in rows:
        c, b = r["concurrent"], base["concurrent"]
        cells = [f"{r[k] / base[k]:.2f}×" for k in cols]
        cells += [f"{c[k] / b[k]:.2f}×" for k in c]
        first = next(iter(c))
        own = r["turns/s"] if first == "turns/s" else r[first]
        lines.append(f"| {r['name']} | {' | '.join(cells)} | {c[first] / own:.2f}× |")
    return lines


async def amain(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    openai = await bench_openai(args)
    claude = await bench_claude(args)
    per = max(args.turns // args.sessions, 1)
    n = args.sessions
    print(
        f"{args.turns} turns of 2 items (~1.2 KB of text a turn), {args.reads} reads; "
        f"concurrent: {n} sessions × {per} turns, {args.reads} reads each"
    )
    print()
    print("OpenAI Agents SDK sessions")
    print()
    print(
        "| session | turns/s | add_items/s | add_items p50 ms | get_items/s, each turn "
        f"| get_items/s, last state | get_items(limit={LIMIT})/s | bytes at rest "
        f"| {n} sessions: turns/s | get_items/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in openai:
        c = r["concurrent"]
        print(
            f"| {r['name']} | {r['turns/s']:,.0f} | {r['add_items/s']:,.0f} | {r['add p50']:.2f} "
            f"| {r['turn read/s']:,.0f} | {r['get_items/s']:,.0f} | {r['limit/s']:,.0f} "
            f"| {_bytes(r)} | {c['turns/s']:,.0f} | {c['get_items/s']:,.0f} |"
        )
    print()
    print(
        "| ÷ SQLiteSession's | turns/s | add_items/s | get_items/s, each turn "
        f"| get_items/s, last state | get_items(limit={LIMIT})/s | {n} sessions: turns/s "
        f"| get_items/s | {n} sessions' turns/s ÷ one's |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cols = ["turns/s", "add_items/s", "turn read/s", "get_items/s", "limit/s"]
    for line in _ratios(openai, openai[0], cols):
        print(line)
    print()
    for r in openai:
        if "areas" in r:
            print(_areas(r))
    print()
    print("Claude Agent SDK session stores")
    print()
    print(
        f"| store | append/s | append p50 ms | load/s | bytes at rest "
        f"| {n} sessions: append/s | load/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in claude:
        c = r["concurrent"]
        print(
            f"| {r['name']} | {r['append/s']:,.0f} | {r['append p50']:.2f} | {r['load/s']:,.0f} "
            f"| {_bytes(r)} | {c['append/s']:,.0f} | {c['load/s']:,.0f} |"
        )
    print()
    print(
        f"| ÷ the JSONL file's | append/s | load/s | {n} sessions: append/s | load/s "
        f"| {n} sessions' append/s ÷ one's |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for line in _ratios(claude, claude[1], ["append/s", "load/s"]):
        print(line)
    print()
    for r in claude:
        if "areas" in r:
            print(_areas(r))
    print()
    print(
        "Requests per operation (sequential run; HTTP counted at the client's transport, "
        "AsyncEmbedded at its native handle)"
    )
    print()
    print(
        "| adapter | operation | requests per call | mean | bytes answered, the last call "
        "| calls | the last call's requests |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for r in openai + claude:
        if "ops" in r:
            for line in _requests(r["name"], r["ops"]):
                print(line)
    print()
    for r in openai + claude:
        if "concurrent requests" in r:
            print(
                f"{r['name']}, concurrent run: {r['concurrent requests']:,} requests in all "
                f"({n} sessions)"
            )
    print(f"(bench wall time {time.perf_counter() - t0:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ctx", default=os.environ.get("CTX_BIN", "target/debug/ctx"))
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--reads", type=int, default=50, help="calls of each read per session")
    ap.add_argument("--sessions", type=int, default=8, help="sessions of the concurrent run")
    ap.add_argument("--quick", action="store_true", help="20 turns, 5 reads, 4 sessions")
    ap.add_argument(
        "--embedded",
        action="store_true",
        help="also the adapters over AsyncEmbedded(dir): ctx in this process, no server",
    )
    args = ap.parse_args()
    args.ways = [HTTP, EMBEDDED] if args.embedded else [HTTP]
    if args.quick:
        args.turns, args.reads, args.sessions = 20, 5, 4
    asyncio.run(amain(args))


if __name__ == "__main__":
    main()
