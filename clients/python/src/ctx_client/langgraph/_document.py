"""The checkpoint document: its constants, encodings and times."""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Any

# 2: a value entry may hold its bytes (INLINE).
# 3: a list entry may name its link as the document's commit's parent
# (PARENT_LINK), and the document then names its LangGraph parent's tip
# ("pt"); the document is one line, and writes after it are `delta`
# commits of write lines (`_write_lines`), not copies of the document.
DOC_VERSION = 3
TEMPLATE = "langgraph"
# The type slot of a value entry stored as a ctx chain of list elements.
LIST_KIND = "ctx-list"
# The ref slot of a value entry that holds its bytes (base64) instead of an
# artifact's ref: values of at most INLINE_VALUE_BYTES (a few small
# channels change every step; an artifact each would cost a file).
INLINE = "="
INLINE_VALUE_BYTES = 1024
# The ref slot of a list entry whose link is the parent of the commit that
# holds the document: a put then commits the link and the document in one
# batch (the document cannot name a commit whose id the server has not
# derived yet). A document read back is resolved (`_resolved`) before it is
# used or copied into another commit.
PARENT_LINK = "^"


def _resolved(doc: dict[str, Any], parent: str | None) -> dict[str, Any]:
    """``doc`` as read from a commit whose parent is ``parent``: a
    :data:`PARENT_LINK` entry names that parent."""
    values = doc.get("values")
    if not values or not any(e[1] == PARENT_LINK for e in values.values()):
        return doc
    if parent is None:
        raise ValueError(f"checkpoint {doc.get('id')} names its parent as a link, and has none")
    return {
        **doc,
        "values": {
            ch: ([e[0], parent, *e[2:]] if e[1] == PARENT_LINK else e) for ch, e in values.items()
        },
    }


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


def _doc_line(doc: dict[str, Any]) -> str:
    """A document as its commit holds it: one JSON line."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n"


def _write_lines(entries: list[list[Any]]) -> str:
    """Writes as a delta commit holds them: one JSON array a line, so the
    document's commit and the writes after it join into its state."""
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)


def _merged(writes: list[list[Any]], new: list[list[Any]]) -> list[list[Any]]:
    """``writes`` with ``new`` added by ``(task_id, idx)``: a repeat of a
    regular write is dropped, a special channel's (negative idx) replaces
    the earlier one, as in LangGraph's own savers."""
    merged = {(w[0], w[1]): w for w in writes}
    for w in new:
        key = (w[0], w[1])
        if w[1] >= 0 and key in merged:
            continue
        merged[key] = w
    return list(merged.values())


def _fresh(writes: list[list[Any]], new: list[list[Any]]) -> list[list[Any]]:
    """The writes of ``new`` that :func:`_merged` would not drop as repeats
    of ``writes``."""
    known = {(w[0], w[1]): w for w in writes}
    return [
        w for w in new if not (w[1] >= 0 and (w[0], w[1]) in known) and known.get((w[0], w[1])) != w
    ]


def _state_of(data: bytes, parent: str | None) -> dict[str, Any]:
    """The checkpoint state that ``data`` holds: a document's line (from a
    commit whose parent is ``parent``) and the write lines after it (a
    delta read from the document's commit joins them). A document of
    version 2 or earlier is the whole of its commit's bytes."""
    lines = data.splitlines()
    doc = _resolved(json.loads(lines[0]), parent)
    more = [json.loads(line) for line in lines[1:] if line]
    return {**doc, "writes": _merged(doc.get("writes", []), more)} if more else doc
