"""Ref names: thread ids, namespaces, run ids and checkpoint ids as segments."""

from __future__ import annotations

import hashlib
import re

# Longest escaped thread id / namespace / run id kept readable in a ref name.
MAX_SEGMENT = 48
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9_-]")


def _hex_escape(m: re.Match[str]) -> str:
    return "".join(f".{b:02x}" for b in m.group().encode())


def _escape(text: str) -> str:
    """``text`` with every character but ``[A-Za-z0-9_-]`` as ``.xx`` per
    UTF-8 byte (one regex pass: a saver operation escapes ~10 names)."""
    return _NOT_PLAIN.sub(_hex_escape, text)


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
