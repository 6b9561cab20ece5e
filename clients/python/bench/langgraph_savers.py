"""Side-by-side bench: the same N-turn LangGraph chat run with LangGraph's
SqliteSaver and with CtxSaver (over a `ctx serve` on embedded storage that
this script starts in a temporary directory; with --embedded also on ctx
in this process, `CtxSaver(Embedded(dir))`, the native module).

For each saver and each messages channel (`add_messages`, the whole list
per checkpoint; `DeltaChannel`, per-step writes and a snapshot every 100
updates) it prints: storage bytes after the run (SQLite: the database file
and its WAL; ctx: the whole data directory, CAS + SQLite), checkpoints
written per second (graph work included, the same for both), and the
latency of loading the latest state and an old state (turn 10) with
`graph.get_state`, warm (the same saver) and cold (a new saver each time).

Usage (from the repository root, in the venv tests/python/run makes):
    .venv-tests/python/bin/python clients/python/bench/langgraph_savers.py \
        --ctx target/debug/ctx [--turns 500] [--quick] [--in-memory] [--embedded] [--cpu]
The last column is each saver's checkpoints/s over SqliteSaver's in the
same run. With --cpu, a second table splits the CPU time of the turns
(not the loads): the saver's own calls on the threads that made them
(`time.thread_time`, so time spent waiting for the interpreter's lock or a
lock or the disk is not counted), ctx's own threads (those of
`CtxSaver(Embedded)`'s runtime; the `ctx serve` process for `CtxSaver`),
and the rest (the graph, LangGraph's threads). Linux only (`/proc`).
Quote numbers of a release build (`cargo build --release -p ctx-cli`
and, in clients/python/native, `maturin develop --release`).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from _serve import start_ctx
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from ctx_client import Client, Embedded
from ctx_client.langgraph import CtxSaver

TEXT = (
    "The quick brown fox jumps over the lazy dog while the agent weighs its next "
    "tool call, reads the file it was given and writes down what it found. "
)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _add_batches(state: list[AnyMessage], batches: list[Any]) -> list[AnyMessage]:
    return functools.reduce(add_messages, batches, state)


class DeltaChat(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_batches)]


def _bot(state: dict[str, Any]) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(content=f"answer {n}: " + TEXT * 6)]}  # ~900 bytes


def graph_of(schema: type, saver: Any) -> Any:
    g = StateGraph(schema)
    g.add_node("bot", _bot)
    g.add_edge(START, "bot")
    g.add_edge("bot", END)
    return g.compile(checkpointer=saver)


def _conf(thread: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _ms(samples: list[float]) -> str:
    samples = sorted(samples)
    p50 = statistics.median(samples) * 1000
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000
    return f"{p50:.2f} / {p99:.2f}"


def _stat(path: Path) -> tuple[str, float] | None:
    """A /proc .../stat file's name and CPU seconds (user and system); None
    if it is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return text[text.index("(") + 1 : text.rindex(")")], cpu


def _process_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` (the ctx server)."""
    stat = _stat(Path(f"/proc/{pid}/stat"))
    return stat[1] if stat else 0.0


def _threads_cpu(prefix: str) -> float:
    """CPU seconds of this process's threads whose name starts with
    ``prefix`` (ctx's runtime names its threads)."""
    stats = (_stat(p) for p in Path(f"/proc/{os.getpid()}/task").glob("*/stat"))
    return sum(s[1] for s in stats if s and s[0].startswith(prefix))


@dataclasses.dataclass
class CpuSplit:
    """What --cpu measures beside the saver's calls: ctx's own threads or
    server (none for the other savers), and whether they are this process."""

    ctx: Any = None
    ctx_in_process: bool = False


SAVER_CALLS = ("get_tuple", "put", "put_writes", "get_delta_channel_history", "list")


def run(
    name: str,
    schema: type,
    make_saver: Any,
    turns: int,
    loads: int,
    split: CpuSplit | None = None,
) -> dict:
    """One saver's run; with ``split``, the turns' CPU split too."""
    saver = make_saver()
    puts = [0]
    put = saver.put

    def counted_put(*args: Any, **kwargs: Any) -> Any:
        puts[0] += 1
        return put(*args, **kwargs)

    saver.put = counted_put  # count checkpoints without listing them
    on_cpu = dict.fromkeys(SAVER_CALLS, 0.0)
    if split is not None:
        for call in SAVER_CALLS:
            setattr(saver, call, _on_cpu(getattr(saver, call), call, on_cpu))
    graph = graph_of(schema, saver)
    thread = str(uuid.uuid4())
    old_id = None
    ctx_cpu = (split.ctx if split else None) or (lambda: 0.0)
    cpu_start, ctx_start = time.process_time(), ctx_cpu()
    start = time.perf_counter()
    for i in range(turns):
        question = HumanMessage(content=f"question {i}: " + TEXT * 2)
        out = graph.invoke({"messages": [question]}, _conf(thread))
        if len(out["messages"]) != 2 * (i + 1):
            raise AssertionError(f"{name}: turn {i} has {len(out['messages'])} messages")
        if i == 9:
            old_id = graph.get_state(_conf(thread)).config["configurable"]["checkpoint_id"]
    elapsed = time.perf_counter() - start
    cpu = None
    if split is not None:
        cpu = {call: on_cpu[call] / turns for call in SAVER_CALLS}
        process = (time.process_time() - cpu_start) / turns
        cpu["ctx"] = (ctx_cpu() - ctx_start) / turns
        # ctx's threads in this process are inside process_time; a server's are not.
        inside = cpu["ctx"] if split.ctx_in_process else 0.0
        cpu["rest"] = process - sum(on_cpu.values()) / turns - inside
        cpu["all"] = process + cpu["ctx"] - inside
    checkpoints = puts[0]
    final = graph.get_state(_conf(thread))
    assert len(final.values["messages"]) == 2 * turns, len(final.values["messages"])

    def timed(g: Any, cfg: dict[str, Any], expect: int) -> float:
        t0 = time.perf_counter()
        state = g.get_state(cfg)
        dt = time.perf_counter() - t0
        assert len(state.values["messages"]) == expect
        return dt

    latest, old = _conf(thread), _conf(thread, old_id)
    n = 2 * turns
    return {
        "name": name,
        "cpu": cpu,
        "checkpoints": checkpoints,
        "cps": checkpoints / elapsed,
        "turns_s": turns / elapsed,
        "latest_warm": _ms([timed(graph, latest, n) for _ in range(loads)]),
        "old_warm": _ms([timed(graph, old, 20) for _ in range(loads)]),
        "latest_cold": _ms(
            [timed(graph_of(schema, make_saver()), latest, n) for _ in range(loads)]
        ),
        "old_cold": _ms([timed(graph_of(schema, make_saver()), old, 20) for _ in range(loads)]),
    }


_inside = threading.local()


def _on_cpu(f: Any, call: str, on_cpu: dict[str, float]) -> Any:
    """``f``, adding the CPU time of its calling thread to ``on_cpu[call]``
    (a saver call made inside another, as LangGraph's default history
    calls ``list``, counts for the outer one)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "call", False):
            return f(*args, **kwargs)
        _inside.call = True
        t0 = time.thread_time()
        try:
            return f(*args, **kwargs)
        finally:
            on_cpu[call] += time.thread_time() - t0
            _inside.call = False

    return timed


def _print_cpu(rows: list[dict]) -> None:
    print()
    print(
        "CPU ms a turn: the saver's calls on their calling threads, ctx's own "
        "threads or server, the rest of this process (the graph, LangGraph's "
        "threads, the garbage collector)"
    )
    print()
    print(
        "| saver | get_tuple | put | put_writes | history and list "
        "| ctx's threads | the rest | all |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        c = r["cpu"]
        other = c["get_delta_channel_history"] + c["list"]
        ms = [c["get_tuple"], c["put"], c["put_writes"], other, c["ctx"], c["rest"], c["all"]]
        print(f"| {r['name']} | " + " | ".join(f"{v * 1000:.2f}" for v in ms) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ctx", default=os.environ.get("CTX_BIN", "target/debug/ctx"))
    ap.add_argument("--turns", type=int, default=500)
    ap.add_argument("--loads", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="20 turns, 5 loads (a smoke run)")
    ap.add_argument("--channels", default="add_messages,DeltaChannel", help="which graphs")
    ap.add_argument(
        "--in-memory",
        action="store_true",
        help="also LangGraph's InMemorySaver (not durable: the ceiling of a saver that\n"
        "stores by value; its cold loads use the same saver, it holds nothing else)",
    )
    ap.add_argument(
        "--embedded",
        action="store_true",
        help="also CtxSaver(Embedded(dir)): ctx in this process, no server",
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="also the turns' CPU time, split by where it is spent (Linux)",
    )
    args = ap.parse_args()
    if args.quick:
        args.turns, args.loads = 20, 5
    rows = []
    plain = CpuSplit() if args.cpu else None
    schemas = {"add_messages": Chat, "DeltaChannel": DeltaChat}
    for label in args.channels.split(","):
        schema = schemas[label]
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "lg.sqlite"
            conn = sqlite3.connect(db, check_same_thread=False)
            row = run(
                f"SqliteSaver, {label}",
                schema,
                functools.partial(SqliteSaver, conn),
                args.turns,
                args.loads,
                plain,
            )
            conn.close()  # the WAL is folded into the database on close
            row["bytes"] = _du(Path(tmp))
            rows.append(row)
        if args.in_memory:
            mem = InMemorySaver()
            row = run(
                f"InMemorySaver, {label}", schema, lambda m=mem: m, args.turns, args.loads, plain
            )
            row["bytes"] = 0  # nothing at rest
            rows.append(row)
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "data"
            proc, url, token = start_ctx(args.ctx, data)
            clients: list[Client] = []

            def make(url: str = url, token: str = token, clients: list = clients) -> CtxSaver:
                c = Client(url, token=token)
                clients.append(c)
                return CtxSaver(c, prefix="bench")

            try:
                server = CpuSplit(functools.partial(_process_cpu, proc.pid))
                row = run(
                    f"CtxSaver, {label}",
                    schema,
                    make,
                    args.turns,
                    args.loads,
                    server if args.cpu else None,
                )
            finally:
                for c in clients:
                    c.close()
                proc.terminate()  # a clean stop truncates the SQLite WAL
                proc.wait()
            (Path(tmp) / "serve.out").unlink()
            row["bytes"] = _du(Path(tmp))
            rows.append(row)
        if args.embedded:
            with tempfile.TemporaryDirectory() as tmp:
                # One open directory, as an application holds; a cold load
                # is a new saver over it (as SqliteSaver's is over its
                # connection).
                db = Embedded(Path(tmp) / "data")
                row = run(
                    f"CtxSaver(Embedded), {label}",
                    schema,
                    functools.partial(CtxSaver, db, prefix="bench"),
                    args.turns,
                    args.loads,
                    CpuSplit(functools.partial(_threads_cpu, "ctx-embedded"), True)
                    if args.cpu
                    else None,
                )
                db.close()
                del db
                row["bytes"] = _du(Path(tmp))
                rows.append(row)
    print(f"{args.turns} turns (2 messages each, ~1.1 KB per turn), {args.loads} loads per latency")
    print()
    print(
        "| saver | storage bytes | checkpoints | checkpoints/s | turns/s "
        "| latest warm ms p50 / p99 | latest cold | old (turn 10) warm | old cold "
        "| checkpoints/s ÷ SqliteSaver's |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = {r["name"].split(", ")[1]: r["cps"] for r in rows if r["name"].startswith("SqliteSaver")}
    for r in rows:
        ratio = r["cps"] / base[r["name"].split(", ")[1]]
        print(
            f"| {r['name']} | {r['bytes']:,} | {r['checkpoints']} | {r['cps']:.0f} "
            f"| {r['turns_s']:.1f} | {r['latest_warm']} | {r['latest_cold']} "
            f"| {r['old_warm']} | {r['old_cold']} | {ratio:.2f}x |"
        )
    if args.cpu:
        _print_cpu(rows)


if __name__ == "__main__":
    main()
