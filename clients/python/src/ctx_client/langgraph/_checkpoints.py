"""Checkpoints as commits and refs: read, put and listed."""

from __future__ import annotations

import json
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
from ..errors import ConflictError
from ._document import DOC_VERSION, LIST_KIND, TEMPLATE, _b64, _created_at, _unb64
from ._names import _parse_thread_ref, _unescape
from ._op import Op
from ._values import _Values


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
