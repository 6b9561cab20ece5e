"""The savers' default serializer: LangGraph's ``JsonPlusSerializer`` that
reads back only plain data and an allowlist of types, and refuses anything
else with an error (ADR 0008, "Serialization").

LangGraph's own default revives whatever class a blob names (it imports the
module and calls the name: CVE-2026-28277), and its strict mode
(``allowed_msgpack_modules``) answers a type it blocks, or one it cannot
rebuild, with the blob's raw payload or None and a log line. Here the
allowlist is LangGraph's (``allowed_msgpack_modules``, extended by its
``with_msgpack_allowlist``), writing is LangGraph's, and reading raises:
a type not allowed is :class:`DisallowedTypeError`, checked before its
module is imported; a blob that cannot be decoded or rebuilt is
:class:`CheckpointDecodeError`.
"""

from __future__ import annotations

import importlib
import secrets
import sys
from collections.abc import Callable, Iterable
from typing import Any

import ormsgpack
from langchain_core import messages as lc_messages
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_DELTA_SNAPSHOT,
    EXT_METHOD_SINGLE_ARG,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

AllowedType = type | tuple[str, ...]
"""A type to allow: the class, or its ``(module, name)`` as stored."""

# LangChain's message types, as LangGraph's own curated allowlist names them.
_MESSAGES = (
    "BaseMessage",
    "BaseMessageChunk",
    "HumanMessage",
    "HumanMessageChunk",
    "AIMessage",
    "AIMessageChunk",
    "SystemMessage",
    "SystemMessageChunk",
    "ChatMessage",
    "ChatMessageChunk",
    "ToolMessage",
    "ToolMessageChunk",
    "FunctionMessage",
    "FunctionMessageChunk",
    "RemoveMessage",
)

# The types LangGraph writes into its own checkpoints: sends (pending
# tasks) and their timeouts, interrupts, commands and overwrites (writes).
# DeltaChannel's snapshot has an extension code of its own and names no type.
_LANGGRAPH = (
    ("langgraph.types", "Send"),
    ("langgraph.types", "TimeoutPolicy"),
    ("langgraph.types", "Interrupt"),
    ("langgraph.types", "Command"),
    ("langgraph.types", "Overwrite"),
)

_OPT = ormsgpack.OPT_NON_STR_KEYS

# ormsgpack reads the first value of its input and ignores what follows it
# (b"\x02\x03" reads as 2). To find where a blob's value ends, the reader
# reads the blob between a two-element array's header and a bin of 16
# random bytes, drawn once per process: the second element is that bin
# only when the value ends where the blob does (a blob cannot name bytes
# it never saw).
_END = secrets.token_bytes(16)
_HEAD, _TAIL = b"\x92", b"\xc4\x10" + _END
_NAMED = (
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
)


def default_allowed_types() -> frozenset[tuple[str, str]]:
    """What the savers read back beside plain data: LangChain's message
    types and LangGraph's own."""
    allowed = set(_LANGGRAPH)
    for name in _MESSAGES:
        cls = getattr(lc_messages, name, None)
        if cls is not None:
            allowed.add((cls.__module__, cls.__name__))
    return frozenset(allowed)


class CheckpointDecodeError(ValueError):
    """A checkpoint blob the saver does not read back: it cannot be
    decoded, or a type it names cannot be rebuilt."""


class _TrailingBytesError(CheckpointDecodeError):
    def __init__(self) -> None:
        super().__init__("a checkpoint blob cannot be decoded: it holds bytes after its value")


class DisallowedTypeError(CheckpointDecodeError):
    """A checkpoint blob names a type (or method) that is not allowed;
    nothing of it was imported or called."""

    def __init__(self, module: str, name: str, method: str | None = None) -> None:
        self.module, self.name, self.method = module, name, method
        what = f"{module}.{name}" + (f".{method}" if method else "")
        super().__init__(
            f"refused to load {what} from a checkpoint: not an allowed type (plain data, "
            "LangChain messages and LangGraph's own types are; allow your own with "
            f"CtxSaver(..., allowed_types=[...]))"
        )


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's ``JsonPlusSerializer`` that reads back plain data, the
    types of :func:`default_allowed_types` and ``allowed_types``, and
    raises on anything else.

    It writes as LangGraph's does (msgpack). It reads ``msgpack``, ``null``,
    ``bytes`` and ``bytearray`` blobs; ``json`` and ``pickle`` ones (which it
    never writes, and which name classes to construct) are refused.
    """

    def __init__(self, allowed_types: Iterable[AllowedType] = ()) -> None:
        super().__init__(
            allowed_msgpack_modules=(*default_allowed_types(), *allowed_types),
            allowed_json_modules=None,
        )

    def _allowed(self) -> set[tuple[str, ...]]:
        # LangGraph's own allowlist, as its constructor and
        # with_msgpack_allowlist (a copy with more) normalize it.
        allowed = self._allowed_msgpack_modules
        return allowed if isinstance(allowed, set) else set()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_ in ("null", "bytes", "bytearray"):
            return super().loads_typed(data)
        if type_ != "msgpack":
            raise CheckpointDecodeError(
                f"refused a {type_!r} blob: the saver reads back msgpack, null and bytes only"
            )
        return self._unpack(blob)

    def loads_list(self, elements: list[tuple[str, bytes]]) -> list[Any]:
        """The list whose elements ``elements`` are, each read as
        :meth:`loads_typed` reads it (each blob one value, with the same
        checks and errors), the msgpack ones with one extension hook."""
        unpack = self._unpacker()
        return [unpack(d) if t == "msgpack" else self.loads_typed((t, d)) for t, d in elements]

    def _unpack(self, blob: bytes) -> Any:
        return self._unpacker()(blob)

    def _unpacker(self) -> Callable[[bytes], Any]:
        """Reads msgpack blobs, one at a time, until the first failure
        (which ends the read it belongs to): extensions checked by
        :func:`_extension`, every failure a :class:`CheckpointDecodeError`."""
        allowed = self._allowed()
        failed: list[Exception] = []

        def hook(code: int, payload: bytes) -> Any:
            try:
                return _extension(code, payload, allowed, hook)
            except Exception as e:
                failed.append(e)
                raise

        def unpack(blob: bytes) -> Any:
            try:
                return _one(blob, hook)
            except Exception as e:
                # ormsgpack reports a failed hook as ValueError("ext_hook
                # failed"): the first failure recorded is the innermost,
                # the cause.
                cause = failed[0] if failed else e
                if isinstance(cause, CheckpointDecodeError):
                    raise cause from None
                raise CheckpointDecodeError(
                    f"a checkpoint blob cannot be decoded: {cause}"
                ) from cause

        return unpack


def _skip(code: int, payload: bytes) -> None:
    return None


def _one(blob: bytes, hook: Callable[[int, bytes], Any] | None) -> Any:
    """The one msgpack value ``blob`` is (see ``_END``): bytes after it are
    :class:`_TrailingBytesError`, and any other failure is the blob's own."""
    try:
        value, end = ormsgpack.unpackb(b"".join((_HEAD, blob, _TAIL)), ext_hook=hook, option=_OPT)
    except Exception:
        # Read alone it fails as it is, or it is a value with more after
        # it. Its structure tells which: extensions are skipped, so no type
        # is rebuilt a second time (a failure of one was recorded by the
        # hook, and is the error the reader reports).
        ormsgpack.unpackb(blob, ext_hook=_skip, option=_OPT)
        raise _TrailingBytesError() from None
    if type(end) is not bytes or end != _END:
        raise _TrailingBytesError()
    return value


def _extension(
    code: int,
    payload: bytes,
    allowed: set[tuple[str, ...]],
    hook: Callable[[int, bytes], Any],
) -> Any:
    """One msgpack extension as LangGraph's serializer writes them, read
    back only if the type it names is allowed."""
    if code == EXT_DELTA_SNAPSHOT:
        return _DeltaSnapshot(_one(payload, hook))
    if code == EXT_NUMPY_ARRAY:
        return _numpy(payload, allowed)
    if code not in _NAMED:
        raise CheckpointDecodeError(f"a checkpoint blob holds msgpack extension {code}, unknown")
    # Decoding the tuple rebuilds what it holds first (each checked the same).
    tup = _one(payload, hook)
    if not (
        isinstance(tup, list | tuple)
        and len(tup) >= (4 if code == EXT_METHOD_SINGLE_ARG else 3)
        and isinstance(tup[0], str)
        and isinstance(tup[1], str)
    ):
        raise CheckpointDecodeError(
            f"a checkpoint blob cannot be decoded: extension {code} holds {tup!r}"
        )
    module, name, arg = tup[0], tup[1], tup[2]
    if (module, name) not in allowed:
        raise DisallowedTypeError(module, name)
    if code == EXT_METHOD_SINGLE_ARG and (module, name, tup[3]) not in SAFE_MSGPACK_METHODS:
        raise DisallowedTypeError(module, name, str(tup[3]))
    try:
        mod = sys.modules.get(module) or importlib.import_module(module)
        cls = getattr(mod, name)
        return _rebuild(code, cls, arg, tup)
    except Exception as e:
        raise CheckpointDecodeError(
            f"cannot rebuild {module}.{name} from a checkpoint: {type(e).__name__}: {e}"
        ) from e


def _rebuild(code: int, cls: Any, arg: Any, tup: Any) -> Any:
    """What LangGraph's serializer rebuilds for ``code``, failures raised."""
    if code == EXT_CONSTRUCTOR_SINGLE_ARG:
        return cls(arg)
    if code == EXT_CONSTRUCTOR_POS_ARGS:
        if cls.__module__ == "langgraph.types" and cls.__name__ == "Send" and len(arg) == 3:
            return cls(arg[0], arg[1], timeout=arg[2])
        return cls(*arg)
    if code == EXT_CONSTRUCTOR_KW_ARGS:
        return cls(**arg)
    if code == EXT_METHOD_SINGLE_ARG:
        return getattr(cls, tup[3])(arg)
    # Pydantic: validated, else constructed as stored (as LangGraph does).
    try:
        return cls(**arg)
    except Exception:
        if code == EXT_PYDANTIC_V2:
            return cls.model_construct(**arg)
        return cls.construct(**arg)


def _numpy(payload: bytes, allowed: set[tuple[str, ...]]) -> Any:
    if ("numpy", "ndarray") not in allowed:
        raise DisallowedTypeError("numpy", "ndarray")
    try:
        np = importlib.import_module("numpy")
        dtype, shape, order, buf = _one(payload, None)
        return np.frombuffer(buf, dtype=np.dtype(dtype)).reshape(shape, order=order)
    except Exception as e:
        raise CheckpointDecodeError(
            f"cannot rebuild numpy.ndarray from a checkpoint: {type(e).__name__}: {e}"
        ) from e
