"""Names: any text as one ref-name segment and back."""

from __future__ import annotations

import re

__all__ = ["decode_segment", "encode_segment"]

_SAFE = re.compile(r"[A-Za-z0-9-]")


def encode_segment(value: str) -> str:
    """``value`` as one ref-name segment: letters, digits and ``-`` as they
    are, every other UTF-8 byte as ``_`` and two hex digits (``.`` is
    ``_2E``); the empty string is ``_``. Reversible by
    :func:`decode_segment`."""
    if value == "":
        return "_"
    out = []
    for ch in value:
        if _SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"_{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def decode_segment(segment: str) -> str:
    """The value :func:`encode_segment` made ``segment`` from."""
    if segment == "_":
        return ""
    raw = bytearray()
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "_":
            raw.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(c.encode("ascii"))
            i += 1
    return raw.decode("utf-8")
