"""Checkpoints as commits and refs: read, put and listed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from .. import _routes as routes
from .._core import artifact_ref_of
from .._generated import BatchRefRequest, OnStale
from ..errors import ConflictError, NotFoundError
from ._document import (
    DOC_VERSION,
    INLINE,
    INLINE_VALUE_BYTES,
    LIST_KIND,
    PARENT_LINK,
    TEMPLATE,
    _b64,
    _created_at,
    _doc_line,
    _merged,
    _resolved,
    _unb64,
    _write_lines,
)
from ._names import _parse_thread_ref, _unescape
from ._op import Op, _Wait
from ._values import _NewLink, _Values, read_state

# A ref move of a batch: the ref, where it is expected, and what to do when
# it is elsewhere (``conflict``: refuse the batch; ``skip``: leave it;
# ``overwrite``: move it anyway).
Move = tuple[str, str | None, OnStale]


def _move(name: str, expected: str | None, on_stale: OnStale, at: int) -> BatchRefRequest:
    move: BatchRefRequest = {"name": name, "expected": expected, "target_in_batch": at}
    if on_stale != "conflict":
        move["on_stale"] = on_stale
    return move


# The most bytes of channel values a put sends inside its batch; more are
# uploaded first, each on its own (a batch is one JSON body, and values
# travel base64-encoded in it).
BATCH_VALUE_BYTES = 1024 * 1024


class _Checkpoints(_Values):
    """A checkpoint's document committed, read back and listed."""

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

    def commit_batch(
        self,
        doc: dict[str, Any] | None,
        *,
        thread_id: str,
        parent: str | None,
        moves: list[Move],
        trigger: str,
        created_at: str,
        artifacts: Sequence[bytes] = (),
        link: _NewLink | None = None,
        writes: list[list[Any]] | None = None,
    ) -> Op[str]:
        """Commits a document (a ``snapshot``) as a child of ``parent`` and
        moves each ref of ``moves`` (name, expected, and what to do when it
        is not there: ``conflict``, ``skip`` or ``overwrite``) to it, with
        ``artifacts`` (the values the document names), in one request and
        one atomic write; the new commit's id. With ``writes``, only those
        are committed (a ``delta`` of write lines), and ``doc`` is the state
        they extend, ``None`` when unknown. With ``link`` (a list value's new
        link, which the document names as :data:`PARENT_LINK`), the link is
        committed first in the batch and is the document's parent instead
        of ``parent``. A stale expectation raises the batch's
        :class:`ConflictError`, whose ``field`` is ``refs[i].expected``
        (:meth:`ConflictError.stale_move`) and which writes nothing."""
        if writes is None:
            assert doc is not None
            data = _doc_line(doc)
        else:
            data = _write_lines(writes)
        commit: dict[str, Any] = {
            "principal": self.principal,
            "template": TEMPLATE,
            "format": "raw",
            "delta": data,
            "commit_type": "snapshot" if writes is None else "delta",
            "checkpoint": trigger,
            "thread_id": thread_id if len(thread_id.encode()) <= 256 else None,
            "created_at": created_at,
        }
        commits = [commit]
        if link is None:
            commit["parent"] = parent
        else:
            commit["parent_in_batch"] = 0
            commits.insert(0, self.link_commit(thread_id, link))
        at = len(commits) - 1
        done = yield routes.batch(
            commits=commits,
            refs=[_move(name, expected, on_stale, at) for name, expected, on_stale in moves],
            artifacts=list(artifacts),
        )
        tip = cast(str, done["commits"][at]["id"])
        size = len(data)
        if link is not None and doc is not None:
            link_id = cast(str, done["commits"][0]["id"])
            self.linked(link_id, link)
            doc = _resolved(doc, link_id)
        if writes is not None and doc is not None:
            doc = {**doc, "writes": _merged(doc["writes"], writes)}
            size = 2048 + sum(len(w[4]) for w in doc["writes"])
        if doc is not None:
            self.docs.put(tip, doc, size)
        # Where each ref is now: at the tip, or where a skipped move left it.
        for (name, _, _), ref in zip(moves, done["refs"], strict=True):
            self.saw(name, ref["target"] if ref is not None else None)
        return tip

    # -- operations -----------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            name = self.names.checkpoint(thread_id, ns, checkpoint_id)
        else:
            name = self.names.head(thread_id, ns)
        # The ref's tip and its state (document and writes) in one request.
        try:
            read = yield read_state(ref=name)
        except NotFoundError as e:
            if e.field != "ref":
                raise
            self.saw(name, None)
            return None
        tip = read["commit"]
        self.saw(name, tip)
        doc = self.docs.get(tip)
        if doc is None:
            doc = yield from self.doc_of(read)
        if doc.get("placeholder"):
            return None
        values = yield from self.values(doc, seen=True)
        return self.tuple_of(thread_id, ns, doc, values)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        name = self.names.checkpoint(thread_id, ns, checkpoint["id"])
        after = [(self.writing, name)]
        if parent_id := conf.get("checkpoint_id"):
            after.append((self.putting, self.names.checkpoint(thread_id, ns, parent_id)))
        # Writes of this checkpoint that came first (their placeholder is
        # then known, and taken over in the batch, not after a 409), and
        # the parent's put (whose tip this one goes on). Not the parent's
        # writes (ADR 0008, v4): the head goes to this checkpoint wherever
        # they left it (`overwrite`), and writes still on their way land on
        # the parent's ref beside it. LangGraph itself puts a checkpoint
        # only after the DeltaChannel writes of its parent, which so stay
        # on its chain.
        mine, before = self.begin(self.putting, name, *after)
        try:
            if before:
                yield _Wait(before)
            return (yield from self._put(config, checkpoint, metadata, new_versions))
        finally:
            self.end(self.putting, name, mine)

    def _put(
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
        grown: list[tuple[str, _NewLink]] = []
        for ch, value in values.items():
            version = versions.get(ch)
            old = parent_values.get(ch)
            if ch not in new_versions and old is not None and old[2] == version:
                entries[ch] = old
                continue
            if self.list_deltas and type(value) is list and value:
                link = yield from self.list_link(value, old)
                entries[ch] = [LIST_KIND, link if isinstance(link, str) else "", version]
                if isinstance(link, _NewLink):
                    grown.append((ch, link))
                continue
            typ, data = self.serde.dumps_typed(value)
            if data and len(data) <= INLINE_VALUE_BYTES:
                entries[ch] = [typ, INLINE + _b64(data), version]
            elif data:
                uploads.append((ch, typ, data))
            else:  # nothing to store (e.g. None): no artifact
                entries[ch] = [typ, "", versions.get(ch)]
        # One list that grew (add_messages) goes in the batch: its link is
        # the document's commit's parent. Others are committed first.
        budget = BATCH_VALUE_BYTES - sum(len(d) for _, _, d in uploads)
        in_batch = None
        if grown and len(grown[0][1].records) <= budget:
            ch, in_batch = grown.pop(0)
            entries[ch][1] = PARENT_LINK
            budget -= len(in_batch.records)
        if grown:
            made = yield [
                routes.checkpoint(**self.link_commit(thread_id, link)) for _, link in grown
            ]
            for (ch, link), done in zip(grown, made, strict=True):
                self.linked(done["id"], link)
                entries[ch][1] = done["id"]
        inline: list[bytes] = []
        if budget >= 0:
            # The values go in the batch, named by their hashes.
            for ch, typ, data in uploads:
                ref = artifact_ref_of(data)
                entries[ch] = [typ, ref, versions.get(ch)]
                inline.append(data)
                self.blobs.put(ref, data, len(data))
        elif uploads:
            infos = yield [routes.upload_artifact(data) for _, _, data in uploads]
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
        if in_batch is not None:
            # The document's commit sits on the link, not on the parent's
            # tip: DeltaChannel's walk goes on from here.
            doc["pt"] = parent_tip
        created_at = _created_at(checkpoint.get("ts"))
        # One batch: the document's commit, the checkpoint's ref (which
        # must not exist yet), the head and the run's index entry (each
        # from where this saver last saw it), and the values.
        # The checkpoint's ref must not exist, unless this saver saw it: a
        # placeholder of writes that came first, or the same checkpoint put
        # before, whose writes the new document keeps.
        expected = self.tips.get(name)
        if expected is not None:
            current = yield from self.doc(expected)
            doc["writes"] = current["writes"]
        head = self.names.head(thread_id, ns)
        moves: list[Move] = [
            (name, expected, "conflict"),
            (head, self.tips.get(head), "overwrite"),
        ]
        run_id = md.get("run_id")
        if isinstance(run_id, str) and run_id:
            entry = self.names.run_entry(run_id, thread_id, ns, checkpoint_id)
            moves.append((entry, self.tips.get(entry), "conflict"))
        for _ in range(20):
            try:
                yield from self.commit_batch(
                    doc,
                    thread_id=thread_id,
                    parent=parent_tip,
                    moves=moves,
                    trigger="turn_boundary",
                    created_at=created_at,
                    artifacts=inline,
                    link=in_batch,
                )
                break
            except ConflictError as e:
                k = e.stale_move()
                if k is None:
                    raise
                moves[k] = (moves[k][0], e.current, moves[k][2])
                self.saw(moves[k][0], e.current)
                if k == 0 and e.current is not None:
                    # The checkpoint's ref exists: writes that arrived
                    # before the checkpoint (LangGraph sends both from
                    # background threads), or the same checkpoint put
                    # again. Keep its writes, replace the rest.
                    current = yield from self.doc(e.current)
                    doc = {**doc, "writes": current["writes"]}
        else:
            raise RuntimeError(f"refs of {checkpoint_id} kept moving while putting it")
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

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
