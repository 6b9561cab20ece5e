"""ctx in this process: Embedded and AsyncEmbedded beside the live server,
on its own data directory. The whole suite also runs on them
(CTX_TEST_TRANSPORT=embedded); these are what only ctx in the process
has: the README block, the lock released, the event loop free, fork,
several processes at once, a missing native module."""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
import pytest
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from ctx_client import (
    AsyncClient,
    AsyncEmbedded,
    Client,
    ConflictError,
    Embedded,
    InvalidError,
    NotFoundError,
)
from ctx_client import _generated as api
from ctx_client._core import retry_after_seconds
from ctx_client.embedded import INSTALL, _Answer

README = Path(__file__).resolve().parents[3] / "README.md"
RAW = {"template": "t", "format": "raw"}


def _data() -> str:
    value = os.environ.get("CTX_TEST_DATA")
    if not value:
        pytest.fail("CTX_TEST_DATA is not set: run the tests with tests/python/run", pytrace=False)
    return value


class _State(TypedDict):
    messages: Annotated[list[Any], add_messages]


def test_the_readme_block_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text()
    m = re.search(
        r"<!-- embedded -->\n```sh\n(.*?)```\n```python\n(.*?)```\n<!-- /embedded -->", text, re.S
    )
    assert m, "README has no embedded block"
    install, code = m.group(1).strip(), m.group(2)
    # The one install command: the native module is the one the error names.
    assert install.startswith("pip install ") and INSTALL.split()[-1] in install.split()
    assert len(code.strip().splitlines()) == 5
    monkeypatch.chdir(tmp_path)
    builder = StateGraph(_State)
    builder.add_node("bot", lambda s: {"messages": [AIMessage("hello")]})
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    scope: dict[str, Any] = {"builder": builder}
    exec(code, scope)  # noqa: S102
    graph, saver = scope["graph"], scope["saver"]
    state = graph.get_state({"configurable": {"thread_id": "t1"}})
    assert [m.content for m in state.values["messages"]][-2:] == ["hi", "hello"]
    # The directory is ctx serve's layout: a ref of the thread, a database.
    assert saver.client.get_ref("lg/t/_t1/_/head")["target"].startswith("ctx-")
    assert (tmp_path / ".ctx" / "ctx.db").is_file()
    saver.client.close()


def test_the_same_methods_as_the_http_clients() -> None:
    assert issubclass(Embedded, Client) and issubclass(AsyncEmbedded, AsyncClient)
    for op in api.OPERATIONS:
        assert callable(getattr(Embedded, op)), op
        assert inspect.iscoroutinefunction(getattr(AsyncEmbedded, op)), op


def test_it_writes_what_the_server_reads_and_answers_its_errors(
    client: Client, unique: str
) -> None:
    db = Embedded(_data())
    ref = f"sessions/emb-{unique}"
    first = db.checkpoint(principal="alice", delta="user: hi\n", ref=ref, **RAW)
    # The server on the same directory sees it at once.
    assert client.get_ref(ref)["target"] == first["id"]
    second = client.checkpoint(
        principal="alice",
        delta="user: again\n",
        ref=ref,
        parent=first["id"],
        expected=first["id"],
        **RAW,
    )
    assert db.get_ref(ref)["target"] == second["id"]
    r, data = db.read_bytes(ref, stop="root")
    assert data == b"user: hi\nuser: again\n" and r["artifact_ref"].startswith("art-")
    with pytest.raises(ConflictError) as stale:
        db.checkpoint(
            principal="alice", delta="x\n", ref=ref, parent=first["id"], expected=first["id"], **RAW
        )
    assert stale.value.current == second["id"]
    with pytest.raises(InvalidError) as bad:
        db.checkpoint(principal="not a principal", delta="x\n", **RAW)
    assert bad.value.field == "principal"
    with pytest.raises(NotFoundError):
        db.get_commit("ctx-" + "0" * 32)
    db.close()


@pytest.mark.parametrize("status", [200, 204, 304, 404, 429, 503])
def test_an_answer_reads_as_an_httpx_response_does(status: int) -> None:
    # The parsers read ctx's answer in the process as they read HTTP's.
    headers = [("Content-Type", "application/json"), ("retry-after", "2"), ("Retry-After", "3")]
    body = '{"ünï": [1, "cödé"]}'.encode()
    mine, theirs = (
        _Answer(status, headers, body),
        httpx.Response(status, headers=headers, content=body),
    )
    assert (mine.status_code, mine.content, mine.text, mine.json()) == (
        theirs.status_code,
        theirs.content,
        theirs.text,
        theirs.json(),
    )
    assert (mine.is_success, mine.is_error) == (theirs.is_success, theirs.is_error)
    for name in ("retry-after", "Retry-After", "content-type", "etag"):
        assert mine.headers.get(name.lower()) == theirs.headers.get(name)
    assert retry_after_seconds(mine) == retry_after_seconds(theirs)


class _WriteLock:
    """Another process holding ctx.db's write lock until released. (In
    this process it would not hold: SQLite's locks are per process, and
    Python's sqlite3 is another copy of SQLite than ctx's.)"""

    def __init__(self, data: str) -> None:
        script = (
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n"
            "c.execute('COMMIT')\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, os.path.join(data, "ctx.db")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "locked\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.wait(timeout=30) == 0


def test_the_interpreter_lock_is_released_while_ctx_works(unique: str) -> None:
    db = Embedded(_data())
    ref = f"sessions/gil-{unique}"
    db.checkpoint(principal="alice", delta="warm\n", ref=ref, **RAW)
    lock = _WriteLock(_data())
    started, done = threading.Event(), threading.Event()
    out: dict[str, Any] = {}

    def write() -> None:
        started.set()
        out["commit"] = db.checkpoint(principal="alice", delta="late\n", **RAW)
        done.set()

    t = threading.Thread(target=write)
    t.start()
    started.wait()
    # The writer waits for SQLite's lock inside ctx. Were the interpreter's
    # lock held meanwhile, this thread could not run Python until SQLite
    # gave up, and the write would fail instead of going through.
    ran_python = sum(range(1000))
    assert not done.wait(0.2)
    lock.release()
    t.join(timeout=30)
    assert ran_python == 499500 and done.is_set() and out["commit"]["id"].startswith("ctx-")


async def test_async_calls_never_block_the_event_loop(unique: str) -> None:
    db = AsyncEmbedded(_data())
    lock = _WriteLock(_data())
    write = asyncio.create_task(db.checkpoint(principal="alice", delta="async\n", **RAW))
    # The checkpoint waits for SQLite's lock on ctx's runtime; the loop goes
    # on, and only this coroutine can let it through.
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert not write.done()
    await asyncio.to_thread(lock.release)
    commit = await asyncio.wait_for(write, 30)
    assert commit["id"].startswith("ctx-")
    # Many at once, all answered.
    ids = await asyncio.gather(*[db.get_commit(commit["id"]) for _ in range(50)])
    assert {c["id"] for c in ids} == {commit["id"]}
    await db.aclose()


def test_a_process_that_forks_keeps_working_in_the_child(unique: str) -> None:
    db = Embedded(_data())
    ref = f"sessions/fork-{unique}"
    first = db.checkpoint(principal="alice", delta="parent\n", ref=ref, **RAW)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: ctx opens the directory again on first use
        try:
            c = db.checkpoint(
                principal="alice",
                delta="child\n",
                ref=ref,
                parent=first["id"],
                expected=first["id"],
                **RAW,
            )
            os.write(write, c["id"].encode())
        finally:
            os._exit(0)
    os.close(write)
    child_commit = os.read(read, 100).decode()
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert status == 0 and child_commit.startswith("ctx-")
    # The parent's ctx still works, and sees the child's write.
    assert db.get_ref(ref)["target"] == child_commit
    _, data = db.read_bytes(ref, stop="root")
    assert data == b"parent\nchild\n"


# Run in a process of its own: the interpreter that drops a directory
# while an answer waits for its lock, as the garbage collector does at any
# allocation. The switch interval keeps the lock with this thread.
DROP_WITH_AN_ANSWER_WAITING = """
import asyncio, gc, sys, time
import ctx_native
sys.setswitchinterval(30.0)
loop = asyncio.new_event_loop()
for _ in range(5):
    native = ctx_native.Native(sys.argv[1], None)
    native.call_async("GET", "/healthz", [], b"", loop, lambda *a: None, loop.create_future())
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # the answer is ready, and waits for the lock
        pass
    del native
    gc.collect()
print("dropped")
"""


def test_dropping_a_directory_while_an_answer_waits_for_the_lock_does_not_hang(
    tmp_path: Path,
) -> None:
    # CI hung here (tests/test_langgraph_conformance.py dropping one
    # AsyncEmbedded per capability): the runtime's drop, with the lock
    # held, waited for a blocking-pool thread that waited for the lock.
    done = subprocess.run(
        [sys.executable, "-c", DROP_WITH_AN_ANSWER_WAITING, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "dropped"


def test_without_the_native_module_the_error_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ctx_native", None)
    with pytest.raises(ImportError, match=re.escape(INSTALL)):
        Embedded(_data())
    # The HTTP client needs none of it.
    assert Client("http://127.0.0.1:9").base_url == "http://127.0.0.1:9"


# Several processes on one directory: PROCESSES processes of THREADS
# threads, each writing TURNS checkpoints, half on a ref of its own (a
# chain: every compare-and-swap must succeed), half on one ref they all
# share (read the tip, write on it, try again on a conflict).
PROCESSES, THREADS, TURNS = 4, 4, 200


def _worker(data: str, tag: str, p: int, out: Any) -> None:
    db = Embedded(data)
    mine_done = shared_done = conflicts = 0

    def run(t: int) -> None:
        nonlocal mine_done, shared_done, conflicts
        own = f"sessions/{tag}-p{p}-t{t}"
        tip = None
        for i in range(TURNS // 2):
            c = db.checkpoint(
                principal=f"w{p}", delta=f"{p}.{t}.{i}\n", ref=own, parent=tip, expected=tip, **RAW
            )
            tip = c["id"]
            mine_done += 1
        shared = f"sessions/{tag}-shared"
        for i in range(TURNS // 2):
            while True:
                try:
                    head = db.get_ref(shared)["target"]
                except NotFoundError:
                    head = None
                try:
                    db.checkpoint(
                        principal=f"w{p}",
                        delta=f"s{p}.{t}.{i}\n",
                        ref=shared,
                        parent=head,
                        expected=head,
                        **RAW,
                    )
                    shared_done += 1
                    break
                except ConflictError:
                    conflicts += 1

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out.put((mine_done, shared_done, conflicts))


def test_processes_and_threads_on_one_directory_lose_nothing(client: Client, unique: str) -> None:
    data = _data()
    tag = f"mp-{unique}"
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(data, tag, p, out)) for p in range(PROCESSES)]
    for pr in procs:
        pr.start()
    results = [out.get(timeout=600) for _ in procs]
    for pr in procs:
        pr.join(timeout=60)
        assert pr.exitcode == 0
    mine = sum(r[0] for r in results)
    shared = sum(r[1] for r in results)
    conflicts = sum(r[2] for r in results)
    assert mine == shared == PROCESSES * THREADS * TURNS // 2
    # Nothing lost: each own chain holds its turns, in order; the shared
    # ref's chain holds every shared write exactly once (a compare-and-swap
    # that was not exact would have dropped one). Read by the server, a
    # third opener of the directory.
    for p in range(PROCESSES):
        for t in range(THREADS):
            _, own = client.read_bytes(f"sessions/{tag}-p{p}-t{t}", stop="root")
            assert own.decode().splitlines() == [f"{p}.{t}.{i}" for i in range(TURNS // 2)]
    _, all_shared = client.read_bytes(f"sessions/{tag}-shared", stop="root")
    lines = all_shared.decode().splitlines()
    assert len(lines) == len(set(lines)) == shared
    from conftest import SUMMARY_LINES

    SUMMARY_LINES.append(
        f"ctx in the process: {PROCESSES} processes x {THREADS} threads x {TURNS} checkpoints "
        f"on one directory: {mine} on own refs, {shared} on one shared ref "
        f"({conflicts} compare-and-swap conflicts retried), 0 lost"
    )
