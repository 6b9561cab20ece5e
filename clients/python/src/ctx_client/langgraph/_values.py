"""Checkpoint documents and channel values, read through the caches; list
values stored as chains of list elements."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, cast

from .. import _routes as routes
from ..errors import InternalError
from ..models import ReadResponse
from ._document import (
    INLINE,
    LIST_KIND,
    TEMPLATE,
    _decode_records,
    _encode_records,
    _now,
    _state_of,
    _unb64,
)
from ._op import Op
from ._refs import _Refs
from ._serde import StrictSerializer


def read_state(*, commit: str | None = None, ref: str | None = None) -> Any:
    """The read of a checkpoint's state at a commit or a ref's tip: the
    deltas from its document's commit (the nearest snapshot) joined, and
    that commit's parent (which a document's ``PARENT_LINK`` names)."""
    return routes.read(ref, commit=commit, delta=True, stop="compaction")


class _Values(_Refs):
    """Documents and values: read, cached, stored."""

    def doc(self, commit_id: str) -> Op[dict[str, Any]]:
        """The checkpoint state at a commit: its document and the writes
        after it."""
        hit = self.docs.get(commit_id)
        if hit is not None:
            return cast(dict[str, Any], hit)
        read = yield read_state(commit=commit_id)
        return (yield from self.doc_of(read))

    def doc_of(self, read: ReadResponse) -> Op[dict[str, Any]]:
        """The checkpoint state a :func:`read_state` answered (the
        document's commit and the writes after it, joined), downloaded when
        it was too large to come inline; cached by its commit."""
        commit = read["commit"]
        if commit is None:  # a delta read always answers its commit
            raise InternalError("a read of the saver's answered no commit")
        data = routes.content_of(read)
        if data is None:
            data = yield routes.download_artifact(read["artifact_ref"])
        doc = _state_of(data, read.get("parent"))
        self.docs.put(commit, doc, len(data))
        return doc

    def docs_of(self, commit_ids: list[str]) -> Op[list[dict[str, Any]]]:
        """Several states, the missing ones read concurrently."""
        missing = [c for c in dict.fromkeys(commit_ids) if self.docs.get(c) is None]
        if missing:
            reads = yield [read_state(commit=c) for c in missing]
            for read in reads:
                yield from self.doc_of(read)
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
        read = yield routes.read(commit=commit_id)
        data = routes.content_of(read)
        if data is None:
            data = yield routes.download_artifact(read["artifact_ref"])
        elements = _decode_records(data)
        self.links.put(commit_id, elements, len(data))
        return elements

    def list_link(self, value: list[Any], old: list[Any] | None) -> Op[str | _NewLink]:
        """A list value as a chain link: the parent's link when the list is
        the same, else the link to commit: a delta of the new elements on
        the parent's link when the parent's list is a prefix of this one (an
        append, as add_messages does), a snapshot of every element
        otherwise. An element this saver stored or read back at the
        parent's link, and unchanged since (:func:`_unchanged`), is not
        serialized again."""
        parent = None
        before: list[tuple[str, bytes]] = []
        seen: list[_Seen] = []
        if old is not None and old[0] == LIST_KIND:
            parent = old[1]
            before = yield from self.link_elements(parent)
            # Taken, not copied: the new link's entry holds what is still
            # needed (the objects of a whole conversation's turns, each read
            # back anew, would otherwise stay alive, and the collector's
            # passes grow with them).
            seen = self.link_seen.pop(parent) or []
        elements, marks = _serialized(self.serde, value, before, seen)
        new = elements
        commit_type = "snapshot"
        if parent is not None:
            if len(before) <= len(elements) and elements[: len(before)] == before:
                if len(before) == len(elements):
                    return cast(str, parent)
                new = elements[len(before) :]
                commit_type = "delta"
        return _NewLink(parent, commit_type, _encode_records(new), len(new), elements, marks)

    def link_commit(self, thread_id: str, link: _NewLink) -> dict[str, Any]:
        """The commit of a new link (the fields of ``POST /v1/commits``)."""
        return {
            "principal": self.principal,
            "template": TEMPLATE,
            "format": "raw",
            "delta": link.records,
            "parent": link.parent,
            "commit_type": link.commit_type,
            "checkpoint": "explicit",
            "thread_id": thread_id if len(thread_id.encode()) <= 256 else None,
            "message_count": link.count,
            "created_at": _now(),
        }

    def linked(self, commit_id: str, link: _NewLink) -> None:
        """Keeps a committed link's elements, by its commit."""
        size = sum(len(t) + len(d) for t, d in link.elements)
        self.links.put(commit_id, link.elements, size)
        self.link_seen.set(commit_id, link.seen, size)

    def values(self, doc: dict[str, Any], *, seen: bool = False) -> Op[dict[str, Any]]:
        """The channel values of a document, the uncached ones fetched
        concurrently; with ``seen``, its list values' objects are kept for
        the next put of each (a ``get_tuple``, which a graph's run puts
        after)."""
        entries = doc["values"]
        missing = [
            e[1]
            for e in entries.values()
            if e[1]
            and e[0] != LIST_KIND
            and not e[1].startswith(INLINE)
            and self.blobs.get(e[1]) is None
        ]
        missing = list(dict.fromkeys(missing))
        if missing:
            datas = yield [routes.download_artifact(ref) for ref in missing]
            for ref, data in zip(missing, datas, strict=True):
                self.blobs.put(ref, data, len(data))
        out = {}
        for ch, (typ, ref, _version) in entries.items():
            if typ == LIST_KIND:
                elements = yield from self.link_elements(ref)
                out[ch] = items = _loads_list(self.serde, elements)
                if seen:
                    size = sum(len(d) for _, d in elements)
                    self.link_seen.set(ref, [_Seen(e) for e in items], size)
                continue
            if ref.startswith(INLINE):
                out[ch] = self.serde.loads_typed((typ, _unb64(ref[len(INLINE) :])))
                continue
            data = self.blobs.get(ref) if ref else b""
            if data is None:
                data = yield routes.download_artifact(ref)
            out[ch] = self.serde.loads_typed((typ, data))
        return out


def _loads_list(serde: Any, elements: list[tuple[str, bytes]]) -> list[Any]:
    """A list value's elements read back: in one pass by the saver's own
    serializer, one by one by another."""
    if isinstance(serde, StrictSerializer):
        return serde.loads_list(elements)
    return [serde.loads_typed(e) for e in elements]


# Values that cannot change: one is what it was while it is the same object.
_IMMUTABLE = (str, int, float, bool, bytes, type(None))


class _Seen:
    """A list element as this saver serialized or read it back: the object,
    and what tells it unchanged since (:func:`_unchanged`)."""

    __slots__ = ("obj", "immutable", "attrs")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.immutable = type(obj) in _IMMUTABLE
        # Its attributes' values, for an object with attributes (a message);
        # None for a container that may change inside without a trace.
        attrs = None if self.immutable else getattr(obj, "__dict__", None)
        self.attrs: tuple[Any, ...] | None = None if attrs is None else tuple(attrs.values())


def _unchanged(e: Any, seen: _Seen) -> bool:
    """Whether ``e`` is the element ``seen`` recorded, as it was: the same
    object, of an immutable type or with each attribute still the same
    object. A value changed in place inside an attribute (a message's
    ``content`` list appended to) is not seen, as LangGraph's own
    ``DeltaChannel``, which stores a node's writes only, does not see it:
    LangGraph's state is changed by the updates a node returns."""
    if e is not seen.obj:
        return False
    if seen.immutable:
        return True
    if seen.attrs is None:
        return False
    attrs = e.__dict__.values()
    return len(attrs) == len(seen.attrs) and all(map(operator.is_, attrs, seen.attrs))


def _serialized(
    serde: Any, value: list[Any], before: list[tuple[str, bytes]], seen: list[_Seen]
) -> tuple[list[tuple[str, bytes]], list[_Seen]]:
    """The elements of ``value`` serialized, and what was seen of each: an
    element unchanged since ``seen`` recorded it at the same place keeps
    its serialized form in ``before``; the others are serialized."""
    known = min(len(value), len(before), len(seen))
    elements: list[tuple[str, bytes]] = []
    marks: list[_Seen] = []
    for i, e in enumerate(value):
        if i < known and _unchanged(e, seen[i]):
            elements.append(before[i])
            marks.append(seen[i])
        else:
            elements.append(serde.dumps_typed(e))
            marks.append(_Seen(e))
    return elements, marks


@dataclass
class _NewLink:
    """A list value's link, to commit."""

    parent: str | None
    commit_type: str
    records: bytes
    count: int
    elements: list[tuple[str, bytes]]
    # The list's elements as serialized (the next put's shortcut).
    seen: list[_Seen]
