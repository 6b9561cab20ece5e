"""LangGraph checkpoint savers on ctx: :class:`CtxSaver` (over a blocking
:class:`~ctx_client.Client`) and :class:`AsyncCtxSaver` (over an
:class:`~ctx_client.AsyncClient`).

How checkpoints map onto commits, artifacts and refs is decided in
``docs/adr/0008-langgraph-checkpoints.md``; in short:

* a checkpoint is a ``snapshot`` commit whose artifact is a JSON document
  (the checkpoint without its values, the metadata, the parent checkpoint
  id, one ``[type, artifact ref, version]`` per channel value); its ctx
  parent is the parent checkpoint's tip, so a thread is the same tree in
  ctx as in LangGraph;
* each channel value is its own artifact, reused (not uploaded again) when
  its version did not change;
* ``put_writes`` commits the document with the merged writes as a child of
  the checkpoint's tip and moves the checkpoint's ref by compare-and-swap;
* refs ``{prefix}/t/{thread}/{ns}/c/{hh}/{id}`` (one per checkpoint),
  ``{prefix}/t/{thread}/{ns}/head`` (the newest) and
  ``{prefix}/r/{run}/{thread}/{ns}/{id}`` (by run id) make checkpoints
  visible; deleting, pruning and copying move refs only.

Every operation is written once, as a generator that yields the API calls
it needs (a list of calls is sent concurrently) and receives their
results; :class:`CtxSaver` and :class:`AsyncCtxSaver` only drive it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import json
import random
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from . import _routes as routes
from ._core import Call
from .client import AsyncClient, Client
from .errors import ConflictError, NotFoundError

__all__ = ["AsyncCtxSaver", "CtxSaver"]

R = TypeVar("R")
# An operation: yields a call (or a list of calls, sent concurrently) and
# receives its result (or the list of results); returns R.
Op = Generator[Any, Any, R]

DOC_VERSION = 1
TEMPLATE = "langgraph"
REF_PAGE = 1000
# The type slot of a value entry stored as a ctx chain of list elements.
LIST_KIND = "ctx-list"
HISTORY_PAGE = 1000
HISTORY_BATCH = 32
# How many of the nearest ancestors DeltaChannel's walk re-reads by ref.
VERIFY_NEAREST = 4
# Longest escaped thread id / namespace / run id kept readable in a ref name.
MAX_SEGMENT = 48
_PLAIN = re.compile(r"[A-Za-z0-9_-]")
_HEX = "0123456789abcdef"


# --- names -------------------------------------------------------------------


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if _PLAIN.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f".{b:02x}" for b in ch.encode())
    return "".join(out)


def _unescape(seg: str) -> str | None:
    """The text of an escaped segment; ``None`` for a hashed one."""
    if not seg.startswith("_"):
        return None
    raw = bytearray()
    i = 1
    while i < len(seg):
        if seg[i] == ".":
            raw.append(int(seg[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(seg[i].encode())
            i += 1
    return raw.decode()


def encode_segment(text: str) -> str:
    """A thread id, namespace or run id as one ref-name segment: ``_`` and
    the text with every byte outside ``A-Za-z0-9_-`` as ``.xx``; or ``h``
    and a hash when that is longer than :data:`MAX_SEGMENT`."""
    seg = "_" + _escape(text)
    if len(seg) <= MAX_SEGMENT:
        return seg
    return "h" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _bucket(checkpoint_id: str) -> str:
    return hashlib.blake2b(checkpoint_id.encode(), digest_size=1).hexdigest()


def _checkpoint_segment(checkpoint_id: str) -> str:
    seg = _escape(checkpoint_id)
    if not seg or len(seg) > MAX_SEGMENT:
        raise ValueError(
            f"checkpoint_id {checkpoint_id!r}: 1 to {MAX_SEGMENT} characters "
            "(after escaping) are supported"
        )
    return seg


class _Names:
    """The ref names of one saver (``prefix`` is their first segment(s))."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.strip("/")

    def thread(self, thread_id: str) -> str:
        return f"{self.prefix}/t/{encode_segment(thread_id)}/"

    def ns(self, thread_id: str, ns: str) -> str:
        return f"{self.thread(thread_id)}{encode_segment(ns)}/"

    def checkpoints(self, thread_id: str, ns: str) -> str:
        return f"{self.ns(thread_id, ns)}c/"

    def checkpoint(self, thread_id: str, ns: str, checkpoint_id: str) -> str:
        seg = _checkpoint_segment(checkpoint_id)
        return f"{self.checkpoints(thread_id, ns)}{_bucket(checkpoint_id)}/{seg}"

    def head(self, thread_id: str, ns: str) -> str:
        return f"{self.ns(thread_id, ns)}head"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}/r/{encode_segment(run_id)}/"

    def run_entry(self, run_id: str, thread_id: str, ns: str, checkpoint_id: str) -> str:
        return (
            f"{self.run(run_id)}{encode_segment(thread_id)}/{encode_segment(ns)}/"
            f"{_checkpoint_segment(checkpoint_id)}"
        )


class _Parsed:
    """A ref name under ``{prefix}/t/``, taken apart."""

    def __init__(self, thread_seg: str, ns_seg: str, kind: str, checkpoint_id: str | None):
        self.thread_seg = thread_seg
        self.ns_seg = ns_seg
        self.kind = kind  # "c" or "head"
        self.checkpoint_id = checkpoint_id


def _parse_thread_ref(names: _Names, name: str) -> _Parsed | None:
    base = f"{names.prefix}/t/"
    if not name.startswith(base):
        return None
    parts = name[len(base) :].split("/")
    if len(parts) == 3 and parts[2] == "head":
        return _Parsed(parts[0], parts[1], "head", None)
    if len(parts) == 5 and parts[2] == "c":
        return _Parsed(parts[0], parts[1], "c", _unescape("_" + parts[4]))
    return None


def _maybe(call: Call[Any], *also: int) -> Call[Any]:
    """The same call, answering ``None`` for a 404 (and the ``also`` statuses)."""

    def parse(resp: Any) -> Any:
        return None if resp.status_code in (404, *also) else call.parse(resp)

    return dataclasses.replace(call, parse=parse)


# --- the checkpoint document -----------------------------------------------


def _encode_records(elements: list[tuple[str, bytes]]) -> bytes:
    """Serialized list elements as length-prefixed records, so that the
    byte append of ``raw`` chains concatenates lists."""
    out = bytearray()
    for typ, data in elements:
        t = typ.encode()
        out += struct.pack(">I", len(t)) + t + struct.pack(">I", len(data)) + data
    return bytes(out)


def _decode_records(data: bytes) -> list[tuple[str, bytes]]:
    out = []
    i = 0
    while i < len(data):
        (n,) = struct.unpack_from(">I", data, i)
        typ = data[i + 4 : i + 4 + n].decode()
        i += 4 + n
        (m,) = struct.unpack_from(">I", data, i)
        out.append((typ, bytes(data[i + 4 : i + 4 + m])))
        i += 4 + m
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _created_at(ts: str | None) -> str:
    """The checkpoint's own time as the commit's time, when it parses."""
    if ts:
        try:
            t = datetime.fromisoformat(ts.replace("Z", "+00:00"))
            if t.tzinfo is not None:
                return t.astimezone(UTC).isoformat().replace("+00:00", "Z")
        except ValueError:
            pass
    return _now()


class _Cache:
    """A bounded map of immutable things (commit → document, artifact → bytes)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> Any | None:
        with self.lock:
            hit = self.items.get(key)
            if hit is None:
                return None
            self.items.move_to_end(key)
            return hit[0]

    def put(self, key: str, value: Any, size: int) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes and self.items:
                _, (_, s) = self.items.popitem(last=False)
                self.bytes -= s


class _Core:
    """What both savers share: the operations as call generators."""

    def __init__(
        self,
        serde: SerializerProtocol,
        *,
        prefix: str,
        principal: str,
        cache_bytes: int,
        list_deltas: bool,
    ) -> None:
        self.serde = serde
        self.names = _Names(prefix)
        self.principal = principal
        self.docs = _Cache(cache_bytes // 4)
        self.blobs = _Cache(cache_bytes)
        self.links = _Cache(cache_bytes)
        self.list_deltas = list_deltas
        # Where this saver last saw each ref point: the first guess of a
        # compare-and-swap (a wrong guess costs a 409 that says the truth).
        self.tips: dict[str, str | None] = {}

    def saw(self, name: str, target: str | None) -> None:
        if len(self.tips) > 100_000:
            self.tips.clear()
        self.tips[name] = target

    # -- small steps ----------------------------------------------------------

    def get_ref(self, name: str) -> Op[str | None]:
        """The ref's target, or ``None`` when it does not exist."""
        try:
            rec = yield routes.get_ref(name)
        except NotFoundError:
            self.saw(name, None)
            return None
        target = cast(str, rec["target"])
        self.saw(name, target)
        return target

    def known_ref(self, name: str) -> Op[str | None]:
        """Where the ref pointed when this saver last saw it (read if never)."""
        if name in self.tips:
            return self.tips[name]
        return (yield from self.get_ref(name))

    def set_ref(self, name: str, target: str, expected: str | None = None) -> Op[None]:
        """Points ``name`` at ``target`` whatever it pointed at."""
        if expected is None:
            expected = self.tips.get(name)
        for _ in range(20):
            try:
                yield routes.put_ref(name, target, expected)
                self.saw(name, target)
                return
            except ConflictError as e:
                self.saw(name, e.current)
                if e.current == target:
                    return
                expected = e.current
        raise RuntimeError(f"ref {name} kept moving while being set")

    def delete_ref(self, name: str, expected: str) -> Op[None]:
        self.tips.pop(name, None)
        try:
            yield routes.delete_ref(name, expected)
        except (NotFoundError, ConflictError):
            pass

    def list_refs(self, prefix: str) -> Op[list[dict[str, Any]]]:
        """Every ref under ``prefix``: a full page is split by the next
        character (checkpoint refs start with two hex characters of a hash,
        so the split is even)."""
        page = yield routes.list_refs(prefix, REF_PAGE)
        if len(page) < REF_PAGE:
            return cast(list[dict[str, Any]], page)
        alphabet = (
            _HEX
            if prefix.endswith("/c/") or re.search(r"/c/[0-9a-f]$", prefix)
            else ("-._/0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        )
        out: list[dict[str, Any]] = []
        for ch in alphabet:
            out.extend((yield from self.list_refs(prefix + ch)))
        return out

    def doc(self, commit_id: str) -> Op[dict[str, Any]]:
        """The checkpoint document a commit holds."""
        hit = self.docs.get(commit_id)
        if hit is not None:
            return cast(dict[str, Any], hit)
        commit = yield routes.get_commit(commit_id)
        data = yield routes.get_artifact(commit["artifact_ref"])
        doc = cast(dict[str, Any], json.loads(data))
        self.docs.put(commit_id, doc, len(data))
        return doc

    def docs_of(self, commit_ids: list[str]) -> Op[list[dict[str, Any]]]:
        """Several documents, the missing ones fetched concurrently."""
        missing = [c for c in dict.fromkeys(commit_ids) if self.docs.get(c) is None]
        if missing:
            commits = yield [routes.get_commit(c) for c in missing]
            datas = yield [routes.get_artifact(c["artifact_ref"]) for c in commits]
            for cid, data in zip(missing, datas, strict=True):
                self.docs.put(cid, json.loads(data), len(data))
        out = []
        for c in commit_ids:
            d = self.docs.get(c)
            if d is None:  # evicted between the two steps: fetch it alone
                d = yield from self.doc(c)
            out.append(d)
        return out

    def link_elements(self, commit_id: str) -> Op[list[tuple[str, bytes]]]:
        """The serialized elements of a list value stored as a chain: the
        server materializes the chain (from its nearest snapshot)."""
        hit = self.links.get(commit_id)
        if hit is not None:
            return cast(list[tuple[str, bytes]], hit)
        m = yield routes.materialize(commit_id)
        data = yield routes.get_artifact(m["artifact_ref"])
        elements = _decode_records(data)
        self.links.put(commit_id, elements, len(data))
        return elements

    def store_list(self, thread_id: str, value: list[Any], old: list[Any] | None) -> Op[str]:
        """A list value as a chain link: a delta of the new elements on the
        parent's link when the parent's list is a prefix of this one (an
        append, as add_messages does), a snapshot of every element otherwise.
        The link's commit id."""
        elements = [self.serde.dumps_typed(e) for e in value]
        parent = None
        new = elements
        commit_type = "snapshot"
        if old is not None and old[0] == LIST_KIND:
            parent = old[1]
            before = yield from self.link_elements(parent)
            if len(before) <= len(elements) and elements[: len(before)] == before:
                if len(before) == len(elements):
                    return cast(str, parent)
                new = elements[len(before) :]
                commit_type = "delta"
        commit = yield routes.checkpoint(
            principal=self.principal,
            template=TEMPLATE,
            format="raw",
            delta=_encode_records(new),
            parent=parent,
            commit_type=commit_type,
            checkpoint="explicit",
            thread_id=thread_id if len(thread_id.encode()) <= 256 else None,
            message_count=len(new),
            created_at=_now(),
        )
        self.links.put(commit["id"], elements, sum(len(t) + len(d) for t, d in elements))
        return cast(str, commit["id"])

    def values(self, doc: dict[str, Any]) -> Op[dict[str, Any]]:
        """The channel values of a document, the uncached ones fetched
        concurrently."""
        entries = doc["values"]
        missing = [
            e[1]
            for e in entries.values()
            if e[1] and e[0] != LIST_KIND and self.blobs.get(e[1]) is None
        ]
        missing = list(dict.fromkeys(missing))
        if missing:
            datas = yield [routes.get_artifact(ref) for ref in missing]
            for ref, data in zip(missing, datas, strict=True):
                self.blobs.put(ref, data, len(data))
        out = {}
        for ch, (typ, ref, _version) in entries.items():
            if typ == LIST_KIND:
                elements = yield from self.link_elements(ref)
                out[ch] = [self.serde.loads_typed(e) for e in elements]
                continue
            data = self.blobs.get(ref) if ref else b""
            if data is None:
                data = yield routes.get_artifact(ref)
            out[ch] = self.serde.loads_typed((typ, data))
        return out

    def tuple_of(
        self, thread_id: str, ns: str, doc: dict[str, Any], values: dict[str, Any]
    ) -> CheckpointTuple:
        checkpoint = self.serde.loads_typed((doc["checkpoint"][0], _unb64(doc["checkpoint"][1])))
        metadata = self.serde.loads_typed((doc["metadata"][0], _unb64(doc["metadata"][1])))
        writes = sorted(doc["writes"], key=lambda w: (w[5], w[0], w[1]))
        parent = doc.get("parent")
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": doc["id"],
                }
            },
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=metadata,
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[
                (w[0], w[2], self.serde.loads_typed((w[3], _unb64(w[4])))) for w in writes
            ],
        )

    def commit_doc(
        self,
        doc: dict[str, Any],
        *,
        thread_id: str,
        parent: str | None,
        ref: str,
        expected: str | None,
        trigger: str,
        created_at: str,
    ) -> Op[str]:
        """Commits a document as a child of ``parent``, moving ``ref`` from
        ``expected`` in the same request; the new commit's id."""
        data = json.dumps(doc, separators=(",", ":"), sort_keys=True)
        commit = yield routes.checkpoint(
            principal=self.principal,
            template=TEMPLATE,
            format="raw",
            delta=data,
            parent=parent,
            commit_type="snapshot",
            checkpoint=trigger,
            thread_id=thread_id if len(thread_id.encode()) <= 256 else None,
            created_at=created_at,
            ref=ref,
            expected=expected,
        )
        self.docs.put(commit["id"], doc, len(data))
        self.saw(ref, commit["id"])
        return cast(str, commit["id"])

    # -- operations -----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            tip = yield from self.get_ref(self.names.checkpoint(thread_id, ns, checkpoint_id))
        else:
            tip = yield from self.get_ref(self.names.head(thread_id, ns))
        if tip is None:
            return None
        doc = yield from self.doc(tip)
        if doc.get("placeholder"):
            return None
        values = yield from self.values(doc)
        return self.tuple_of(thread_id, ns, doc, values)

    def delta_history(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Op[dict[str, DeltaChannelHistory]]:
        """LangGraph's ancestor walk for ``DeltaChannel`` (the contract of
        ``BaseCheckpointSaver.get_delta_channel_history``) over the commit
        chain: one history request per 1,000 commits gives the ancestors'
        tips (the commit after each checkpoint commit) and their documents
        come concurrently. The nearest ancestors' refs are read again, so
        writes that landed after the child was put (LangGraph sends writes
        and the next checkpoint from background threads) still count, and
        a deleted one ends the walk as in LangGraph's own; deeper ancestors
        are taken as their child saw them."""
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        name = (
            self.names.checkpoint(thread_id, ns, checkpoint_id)
            if checkpoint_id
            else self.names.head(thread_id, ns)
        )
        collected: list[list[Any]] = []  # per ancestor, newest first: its sorted writes
        seeds: dict[str, Any] = {}
        remaining = set(channels)
        cursor = yield from self.get_ref(name)
        after_checkpoint = False
        stopped = cursor is None
        while cursor is not None and remaining and not stopped:
            page = yield routes.history(cursor, depth=HISTORY_PAGE)
            cursor = page["commits"][-1]["parent"] if len(page["commits"]) == HISTORY_PAGE else None
            tips = []
            for c in page["commits"]:
                if after_checkpoint:
                    tips.append(c)
                after_checkpoint = c["checkpoint"] == "turn_boundary"
            for i in range(0, len(tips), HISTORY_BATCH):
                batch = tips[i : i + HISTORY_BATCH]
                missing = [c for c in batch if self.docs.get(c["id"]) is None]
                if missing:
                    datas = yield [routes.get_artifact(c["artifact_ref"]) for c in missing]
                    for c, data in zip(missing, datas, strict=True):
                        self.docs.put(c["id"], json.loads(data), len(data))
                docs = []
                for c in batch:
                    d = self.docs.get(c["id"])
                    docs.append(d if d is not None else (yield from self.doc(c["id"])))
                # The nearest ancestors' refs as they are now: writes can land
                # after the child's put only while its parent's tasks finish.
                near = max(0, VERIFY_NEAREST - len(collected))
                names = [self.names.checkpoint(thread_id, ns, d["id"]) for d in docs[:near]]
                current = (yield [_maybe(routes.get_ref(n)) for n in names]) if names else []
                for k, (c, doc) in enumerate(zip(batch, docs, strict=True)):
                    now = (current[k]["target"] if current[k] else None) if k < near else c["id"]
                    if now is None:
                        stopped = True  # deleted: the walk ends here
                        break
                    if now != c["id"]:
                        doc = yield from self.doc(now)
                    writes = sorted(doc.get("writes", []), key=lambda w: (w[5], w[0], w[1]))
                    collected.append([w for w in writes if w[2] in remaining])
                    for ch in list(remaining):
                        if ch in doc.get("values", {}):
                            seeds[ch] = doc["values"][ch]
                            remaining.discard(ch)
                    if not remaining:
                        break
                if stopped or not remaining:
                    break
        seed_values = {}
        if seeds:
            values = yield from self.values({"values": seeds})
            seed_values = values
        result: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            writes = [
                (w[0], w[2], self.serde.loads_typed((w[3], _unb64(w[4]))))
                for ancestor in reversed(collected)
                for w in ancestor
                if w[2] == ch
            ]
            entry: DeltaChannelHistory = {"writes": writes}
            if ch in seed_values:
                entry["seed"] = seed_values[ch]
            result[ch] = entry
        return result

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        parent_id = conf.get("checkpoint_id")
        checkpoint_id = checkpoint["id"]
        name = self.names.checkpoint(thread_id, ns, checkpoint_id)

        parent_tip = None
        parent_values: dict[str, Any] = {}
        if parent_id:
            parent_name = self.names.checkpoint(thread_id, ns, parent_id)
            parent_tip = yield from self.known_ref(parent_name)
            parent_doc = (yield from self.doc(parent_tip)) if parent_tip is not None else None
            if parent_doc is not None and parent_doc.get("placeholder"):
                # A guess older than the parent's put (threads record what
                # they saw in any order): read where the parent is now.
                parent_tip = yield from self.get_ref(parent_name)
                parent_doc = (yield from self.doc(parent_tip)) if parent_tip is not None else None
            if parent_doc is not None:
                parent_values = parent_doc.get("values", {})

        c = dict(checkpoint)
        values = cast(dict[str, Any], c.pop("channel_values", {}) or {})
        versions = checkpoint.get("channel_versions", {})
        entries: dict[str, list[Any]] = {}
        uploads: list[tuple[str, str, bytes]] = []
        for ch, value in values.items():
            version = versions.get(ch)
            old = parent_values.get(ch)
            if ch not in new_versions and old is not None and old[2] == version:
                entries[ch] = old
                continue
            if self.list_deltas and type(value) is list and value:
                link = yield from self.store_list(thread_id, value, old)
                entries[ch] = [LIST_KIND, link, version]
                continue
            typ, data = self.serde.dumps_typed(value)
            if data:
                uploads.append((ch, typ, data))
            else:  # nothing to store (e.g. None): no artifact
                entries[ch] = [typ, "", versions.get(ch)]
        if uploads:
            infos = yield [routes.put_artifact(data) for _, _, data in uploads]
            for (ch, typ, data), info in zip(uploads, infos, strict=True):
                entries[ch] = [typ, info["ref"], versions.get(ch)]
                self.blobs.put(info["ref"], data, len(data))

        md = get_checkpoint_metadata(config, metadata)
        ck_t, ck_b = self.serde.dumps_typed(c)
        md_t, md_b = self.serde.dumps_typed(md)
        doc = {
            "v": DOC_VERSION,
            "id": checkpoint_id,
            "parent": parent_id,
            "checkpoint": [ck_t, _b64(ck_b)],
            "metadata": [md_t, _b64(md_b)],
            "values": entries,
            "writes": [],
        }
        created_at = _created_at(checkpoint.get("ts"))
        expected: str | None = None
        for _ in range(20):
            try:
                tip = yield from self.commit_doc(
                    doc,
                    thread_id=thread_id,
                    parent=parent_tip,
                    ref=name,
                    expected=expected,
                    trigger="turn_boundary",
                    created_at=created_at,
                )
                break
            except ConflictError as e:
                # The ref exists: writes that arrived before the checkpoint
                # (LangGraph sends both from background threads), or the same
                # checkpoint put again. Keep its writes, replace the rest.
                expected = e.current
                self.saw(name, expected)
                if expected is not None:
                    current = yield from self.doc(expected)
                    doc = {**doc, "writes": current["writes"]}
        else:
            raise RuntimeError(f"ref {name} kept moving while putting {checkpoint_id}")

        run_id = md.get("run_id")
        side = [self.set_ref(self.names.head(thread_id, ns), tip)]
        if isinstance(run_id, str) and run_id:
            side.append(
                self.set_ref(self.names.run_entry(run_id, thread_id, ns, checkpoint_id), tip)
            )
        for op in side:
            yield from op
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Op[None]:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = conf["checkpoint_id"]
        name = self.names.checkpoint(thread_id, ns, checkpoint_id)
        encoded: list[tuple[str, int, str, str, str]] = []
        for idx, (channel, value) in enumerate(writes):
            typ, data = self.serde.dumps_typed(value)
            encoded.append((task_id, WRITES_IDX_MAP.get(channel, idx), channel, typ, _b64(data)))
        tip = yield from self.known_ref(name)
        for _ in range(50):
            if tip is None:
                # The checkpoint's put has not landed yet: keep the writes in a
                # placeholder document that the put will take them from.
                doc = {"v": DOC_VERSION, "id": checkpoint_id, "placeholder": True, "writes": []}
            else:
                doc = yield from self.doc(tip)
            merged = {(w[0], w[1]): w for w in doc["writes"]}
            changed = False
            for task, idx, channel, typ, b64 in encoded:
                key = (task, idx)
                if idx >= 0 and key in merged:
                    continue
                entry = [task, idx, channel, typ, b64, task_path]
                if merged.get(key) != entry:
                    merged[key] = entry
                    changed = True
            if not changed:
                return None
            new_doc = {**doc, "writes": list(merged.values())}
            try:
                new_tip = yield from self.commit_doc(
                    new_doc,
                    thread_id=thread_id,
                    parent=tip,
                    ref=name,
                    expected=tip,
                    trigger="tool_call",
                    created_at=_now(),
                )
            except ConflictError as e:
                # Another task's writes (or the put) landed first: merge again.
                self.saw(name, e.current)
                tip = e.current
                continue
            if tip is None:
                return None
            head = self.names.head(thread_id, ns)
            try:  # the head follows this checkpoint if it pointed at it
                yield routes.put_ref(head, new_tip, tip)
                self.saw(head, new_tip)
            except (ConflictError, NotFoundError):
                pass
            return None
        raise RuntimeError(f"writes to {checkpoint_id} kept conflicting")

    def found(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Op[list[tuple[str, str, str, str]]]:
        """The (thread, ns, checkpoint id, tip) of the listed checkpoints,
        newest first, before the metadata filter."""
        conf = (config or {}).get("configurable", {})
        thread_id = conf.get("thread_id")
        if thread_id is not None:
            if "checkpoint_ns" in conf:
                prefix = self.names.checkpoints(thread_id, conf["checkpoint_ns"])
            else:
                prefix = self.names.thread(thread_id)
        else:
            prefix = f"{self.names.prefix}/t/"
        refs = yield from self.list_refs(prefix)
        found = []
        for r in refs:
            p = _parse_thread_ref(self.names, r["name"])
            if p is None or p.kind != "c" or p.checkpoint_id is None:
                continue
            tid = thread_id if thread_id is not None else _unescape(p.thread_seg)
            ns = conf["checkpoint_ns"] if "checkpoint_ns" in conf else _unescape(p.ns_seg)
            if tid is None or ns is None:
                continue  # stored under a hash: cannot be named
            found.append((tid, ns, p.checkpoint_id, r["target"]))
        if conf.get("checkpoint_id"):
            found = [f for f in found if f[2] == conf["checkpoint_id"]]
        if before is not None and (b := get_checkpoint_id(before)):
            found = [f for f in found if f[2] < b]
        found.sort(key=lambda f: f[2], reverse=True)
        return found

    def list_page(
        self,
        found: list[tuple[str, str, str, str]],
        filter: dict[str, Any] | None,
    ) -> Op[list[CheckpointTuple]]:
        """The tuples of ``found`` that match ``filter``."""
        docs = yield from self.docs_of([f[3] for f in found])
        out = []
        for (tid, ns, _cid, _tip), doc in zip(found, docs, strict=True):
            if doc.get("placeholder"):
                continue
            if filter:
                md = self.serde.loads_typed((doc["metadata"][0], _unb64(doc["metadata"][1])))
                if any(md.get(k) != v for k, v in filter.items()):
                    continue
            values = yield from self.values(doc)
            out.append(self.tuple_of(tid, ns, doc, values))
        return out

    def delete_thread(self, thread_id: str) -> Op[None]:
        refs = yield from self.list_refs(self.names.thread(thread_id))
        for r in refs:
            self.tips.pop(r["name"], None)
        if refs:
            yield [_maybe(routes.delete_ref(r["name"], r["target"]), 409) for r in refs]
        return None

    def reset_head(self, thread_seg_prefix: str) -> Op[None]:
        """Points ``{ns}/head`` at the newest remaining checkpoint of the
        namespace whose prefix is given (``.../{thread}/{ns}/``)."""
        refs = yield from self.list_refs(thread_seg_prefix + "c/")
        head = thread_seg_prefix + "head"
        best = None
        for r in refs:
            p = _parse_thread_ref(self.names, r["name"])
            if p and p.checkpoint_id and (best is None or p.checkpoint_id > best[0]):
                best = (p.checkpoint_id, r["target"])
        current = yield from self.get_ref(head)
        if best is None:
            if current is not None:
                yield from self.delete_ref(head, current)
        elif current != best[1]:
            yield from self.set_ref(head, best[1], current)
        return None

    def delete_for_runs(self, run_ids: Sequence[str]) -> Op[None]:
        touched: set[str] = set()
        for run_id in run_ids:
            refs = yield from self.list_refs(self.names.run(run_id))
            for r in refs:
                t_seg, n_seg, c_seg = r["name"][len(self.names.run(run_id)) :].split("/")
                cid = _unescape("_" + c_seg) or ""
                ns_prefix = f"{self.names.prefix}/t/{t_seg}/{n_seg}/"
                cname = f"{ns_prefix}c/{_bucket(cid)}/{c_seg}"
                target = yield from self.get_ref(cname)
                if target is not None:
                    yield from self.delete_ref(cname, target)
                yield from self.delete_ref(r["name"], r["target"])
                touched.add(ns_prefix)
        for ns_prefix in sorted(touched):
            yield from self.reset_head(ns_prefix)
        return None

    def copy_thread(self, source: str, target: str) -> Op[None]:
        src = self.names.thread(source)
        dst = self.names.thread(target)
        refs = yield from self.list_refs(src)
        checkpoints = []
        for r in refs:
            yield from self.set_ref(dst + r["name"][len(src) :], r["target"])
            p = _parse_thread_ref(self.names, r["name"])
            if p and p.kind == "c" and p.checkpoint_id:
                checkpoints.append((p, r["target"]))
        docs = yield from self.docs_of([t for _, t in checkpoints])
        for (p, tip), doc in zip(checkpoints, docs, strict=True):
            if doc.get("placeholder"):
                continue
            md = self.serde.loads_typed((doc["metadata"][0], _unb64(doc["metadata"][1])))
            run_id = md.get("run_id")
            if isinstance(run_id, str) and run_id:
                name = (
                    f"{self.names.run(run_id)}{encode_segment(target)}/{p.ns_seg}/"
                    f"{_checkpoint_segment(p.checkpoint_id or '')}"
                )
                yield from self.set_ref(name, tip)
        return None

    def prune(self, thread_ids: Sequence[str], strategy: str) -> Op[None]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from self.delete_thread(thread_id)
                continue
            refs = yield from self.list_refs(self.names.thread(thread_id))
            by_ns: dict[str, list[tuple[str, dict[str, Any]]]] = {}
            for r in refs:
                p = _parse_thread_ref(self.names, r["name"])
                if p and p.kind == "c" and p.checkpoint_id:
                    by_ns.setdefault(p.ns_seg, []).append((p.checkpoint_id, r))
            doomed: list[dict[str, Any]] = []
            for entries in by_ns.values():
                entries.sort(key=lambda e: e[0])
                doomed.extend(r for _, r in entries[:-1])
            for r in doomed:
                self.tips.pop(r["name"], None)
            if doomed:
                yield [_maybe(routes.delete_ref(r["name"], r["target"]), 409) for r in doomed]
        return None


# --- drivers -----------------------------------------------------------------


def _drive_sync(client: Client, pool: ThreadPoolExecutor, op: Op[R]) -> R:
    try:
        request = next(op)
        while True:
            try:
                if isinstance(request, list):
                    result: Any = list(pool.map(client.send, request)) if request else []
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
                if isinstance(request, list):
                    result: Any = await asyncio.gather(*(client.send(c) for c in request))
                else:
                    result = await client.send(request)
            except Exception as e:  # noqa: BLE001 - handed to the operation
                request = op.throw(e)
                continue
            request = op.send(result)
    except StopIteration as stop:
        return cast(R, stop.value)


LIST_BATCH = 16


class CtxSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing checkpoints in ctx, over a blocking
    :class:`~ctx_client.Client`.

    ``prefix`` is the first segment of every ref the saver writes (one
    saver per prefix sees only its own threads); ``principal`` names the
    commits' author. The async methods run the blocking ones in a thread.

    Example::

        from ctx_client import Client
        from ctx_client.langgraph import CtxSaver

        graph = builder.compile(checkpointer=CtxSaver(Client("http://127.0.0.1:7878")))
    """

    def __init__(
        self,
        client: Client,
        *,
        serde: SerializerProtocol | None = None,
        prefix: str = "lg",
        principal: str = "langgraph",
        cache_bytes: int = 64 * 1024 * 1024,
        concurrency: int = 8,
        list_deltas: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        self.client = client
        self._core = _Core(
            self.serde,
            prefix=prefix,
            principal=principal,
            cache_bytes=cache_bytes,
            list_deltas=list_deltas,
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ctx-saver")

    def _run(self, op: Op[R]) -> R:
        return _drive_sync(self.client, self._pool, op)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as LangGraph's own savers make them: a zero-padded
        counter and a random suffix, so they sort as strings."""
        return _next_version(current)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's newest."""
        return self._run(self._core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints, newest first, matching ``filter`` (metadata equality)."""
        found = self._run(self._core.found(config, filter, before, limit))
        left = limit
        for i in range(0, len(found), LIST_BATCH):
            for tup in self._run(self._core.list_page(found[i : i + LIST_BATCH], filter)):
                if left is not None and left <= 0:
                    return
                yield tup
                if left is not None:
                    left -= 1
            if left is not None and left <= 0:
                return

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``DeltaChannel``'s ancestor walk over the commit chain."""
        return self._run(self._core.delta_history(config, channels))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`get_delta_channel_history` in a worker thread."""
        return await asyncio.to_thread(self._run, self._core.delta_history(config, channels))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint as a commit whose parent is its parent's tip."""
        return self._run(self._core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Attaches writes to a checkpoint (a child commit, the ref moved by CAS)."""
        self._run(self._core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Removes the thread's refs (its commits stay reachable by id)."""
        self._run(self._core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints whose metadata ``run_id`` is one of these."""
        self._run(self._core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Points the target thread's refs at the source's commits."""
        self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keeps each namespace's newest checkpoint (``keep_latest``) or none."""
        self._run(self._core.prune(thread_ids, strategy))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` in a worker thread."""
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncCtxSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing checkpoints in ctx, over an
    :class:`~ctx_client.AsyncClient` (the same layout as :class:`CtxSaver`).

    The blocking methods work from threads other than the event loop's
    (as LangGraph's own async savers do) and refuse to run on it.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        serde: SerializerProtocol | None = None,
        prefix: str = "lg",
        principal: str = "langgraph",
        cache_bytes: int = 64 * 1024 * 1024,
        list_deltas: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        self.client = client
        self._core = _Core(
            self.serde,
            prefix=prefix,
            principal=principal,
            cache_bytes=cache_bytes,
            list_deltas=list_deltas,
        )
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    async def _run(self, op: Op[R]) -> R:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return await _drive_async(self.client, op)

    def _blocking(self, op: Op[R]) -> R:
        try:
            if asyncio.get_running_loop() is self._loop:
                raise asyncio.InvalidStateError(
                    "AsyncCtxSaver's blocking methods cannot run on its event loop; "
                    "use the async ones (aget_tuple, aput, ...) or CtxSaver"
                )
        except RuntimeError:
            pass
        if self._loop is None:
            raise asyncio.InvalidStateError("AsyncCtxSaver has not been used on a loop yet")
        return asyncio.run_coroutine_threadsafe(self._run(op), self._loop).result()

    def get_next_version(self, current: str | None, channel: None) -> str:
        """As :meth:`CtxSaver.get_next_version`."""
        return _next_version(current)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's newest."""
        return await self._run(self._core.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints, newest first, matching ``filter`` (metadata equality)."""
        found = await self._run(self._core.found(config, filter, before, limit))
        left = limit
        for i in range(0, len(found), LIST_BATCH):
            page = await self._run(self._core.list_page(found[i : i + LIST_BATCH], filter))
            for tup in page:
                if left is not None and left <= 0:
                    return
                yield tup
                if left is not None:
                    left -= 1
            if left is not None and left <= 0:
                return

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """``DeltaChannel``'s ancestor walk over the commit chain."""
        return await self._run(self._core.delta_history(config, channels))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`aget_delta_channel_history` from another thread."""
        return self._blocking(self._core.delta_history(config, channels))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint as a commit whose parent is its parent's tip."""
        return await self._run(self._core.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Attaches writes to a checkpoint (a child commit, the ref moved by CAS)."""
        await self._run(self._core.put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Removes the thread's refs (its commits stay reachable by id)."""
        await self._run(self._core.delete_thread(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Removes the checkpoints whose metadata ``run_id`` is one of these."""
        await self._run(self._core.delete_for_runs(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Points the target thread's refs at the source's commits."""
        await self._run(self._core.copy_thread(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keeps each namespace's newest checkpoint (``keep_latest``) or none."""
        await self._run(self._core.prune(thread_ids, strategy))

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`aget_tuple` from another thread."""
        return self._blocking(self._core.get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """:meth:`alist` from another thread."""
        found = self._blocking(self._core.found(config, filter, before, limit))
        left = limit
        for i in range(0, len(found), LIST_BATCH):
            for tup in self._blocking(self._core.list_page(found[i : i + LIST_BATCH], filter)):
                if left is not None and left <= 0:
                    return
                yield tup
                if left is not None:
                    left -= 1

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`aput` from another thread."""
        return self._blocking(self._core.put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`aput_writes` from another thread."""
        self._blocking(self._core.put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """:meth:`adelete_thread` from another thread."""
        self._blocking(self._core.delete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`adelete_for_runs` from another thread."""
        self._blocking(self._core.delete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`acopy_thread` from another thread."""
        self._blocking(self._core.copy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`aprune` from another thread."""
        self._blocking(self._core.prune(thread_ids, strategy))


def _next_version(current: str | int | float | None) -> str:
    if current is None:
        n = 0
    elif isinstance(current, str):
        n = int(current.split(".")[0])
    else:
        n = int(current)
    return f"{n + 1:032}.{random.random():016}"
