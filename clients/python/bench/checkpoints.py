"""Durable checkpoints over HTTP, one client, one after the other: the rate
a framework adapter can reach at most, beside what its operations cost.

Over a `ctx serve --store local` this script starts in a temporary
directory, one chain of ``--commits`` commits, each a ~1.1 KB JSON turn
(a user and an assistant message, lognormal-ish lengths as in the
embedded bench's transcript corpus), each moving a ref by
compare-and-swap, written four ways:

- ``checkpoint``: ``POST /v1/commits`` with the ref move (what a session
  adapter's append is);
- ``batch of 1``: ``POST /v1/batch`` holding the commit and its ref move;
- ``batch + head``: the same with a second ref moved (a LangGraph put:
  the checkpoint's ref and the thread's head);
- ``read``: ``POST /v1/read`` of the ref with ``delta`` (a checkpoint
  read back: its tip and its bytes, one request).

It prints each one's rate and p50/p99 latency, and the data directory's
bytes after a clean stop against the turns' raw bytes.

Usage (from the repository root, in the venv tests/python/run makes):
    PYTHONPATH=clients/python/src .venv-tests/python/bin/python \\
        clients/python/bench/checkpoints.py --ctx target/release/ctx [--commits 500]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _serve import start_ctx

from ctx_client import Client
from ctx_client import _routes as routes

WORDS = (
    "the agent reads a file and weighs its next tool call then writes down what it "
    "found in the repository before it answers the user with a plan"
).split()


def turn(rng: random.Random, i: int) -> str:
    """One turn as JSON text: a question and an answer of lognormal length."""

    def text(mean: float) -> str:
        n = max(3, int(rng.lognormvariate(mean, 0.6)))
        return " ".join(rng.choice(WORDS) for _ in range(n))

    msgs = [
        {"role": "user", "content": f"{i}: " + text(3.5)},
        {"role": "assistant", "content": text(4.8)},
    ]
    return json.dumps(msgs)


def timed(n: int, step: Callable[[int], None]) -> tuple[float, list[float]]:
    lat = []
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        step(i)
        lat.append(time.perf_counter() - t0)
    return n / (time.perf_counter() - start), lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ctx", default=os.environ.get("CTX_BIN", "target/debug/ctx"))
    ap.add_argument("--commits", type=int, default=500)
    args = ap.parse_args()
    n = args.commits
    rng = random.Random(25)
    turns = [turn(rng, i) for i in range(n)]
    raw = sum(len(t.encode()) for t in turns)
    rows: list[tuple[str, float, list[float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        proc, url, token = start_ctx(args.ctx, data)
        try:
            with Client(url, token=token) as c:
                tips: dict[str, str | None] = {}

                def commit(kind: str, refs: list[str]) -> Callable[[int], None]:
                    def step(i: int) -> None:
                        name = refs[0]
                        body: dict[str, Any] = {
                            "principal": "bench",
                            "template": "bench",
                            "format": "raw",
                            "delta": turns[i],
                            "parent": tips.get(name),
                            "commit_type": "delta",
                            "checkpoint": "turn_boundary",
                        }
                        if kind == "checkpoint":
                            done = c.send(
                                routes.checkpoint(**body, ref=name, expected=tips.get(name))
                            )
                            tips[name] = done["id"]
                            return
                        out = c.send(
                            routes.batch(
                                commits=[body],
                                refs=[
                                    {"name": r, "expected": tips.get(r), "target_in_batch": 0}
                                    for r in refs
                                ],
                            )
                        )
                        for r in refs:
                            tips[r] = out["commits"][0]["id"]

                    return step

                for label, kind, refs in [
                    ("checkpoint", "checkpoint", ["bench/a"]),
                    ("batch of 1", "batch", ["bench/b"]),
                    ("batch + head", "batch", ["bench/c", "bench/c-head"]),
                ]:
                    rate, lat = timed(n, commit(kind, refs))
                    rows.append((label, rate, lat))

                def read(i: int) -> None:
                    routes.content_of(c.send(routes.read("bench/a", delta=True)))

                rate, lat = timed(n, read)
                rows.append(("read (delta)", rate, lat))
        finally:
            proc.terminate()  # a clean stop truncates the SQLite WAL
            proc.wait()
        (Path(tmp) / "serve.out").unlink()
        at_rest = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    print(f"{n} commits a way, one chain each; raw turns {raw:,} bytes")
    print()
    print("| way | per second | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for label, rate, lat in rows:
        s = sorted(lat)
        p50 = statistics.median(s) * 1000
        p99 = s[min(len(s) - 1, int(len(s) * 0.99))] * 1000
        print(f"| {label} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |")
    print()
    print(
        f"data directory after a clean stop: {at_rest:,} bytes for 3 × {n} commits "
        f"({at_rest / (3 * raw):.2f}× their raw bytes)"
    )


if __name__ == "__main__":
    main()
