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

Checkpoints are read back by :class:`StrictSerializer` unless the saver
is given a ``serde``: plain data, LangChain's messages, LangGraph's own
types and the ``allowed_types`` given to the saver; any other type a blob
names is refused (:class:`DisallowedTypeError`) before its module is
imported, and a blob that cannot be decoded is :class:`CheckpointDecodeError`.

Every operation is written once, as a generator that yields the API calls
it needs (a list of calls is sent concurrently) and receives their
results; :class:`CtxSaver` and :class:`AsyncCtxSaver` only drive it.

Layout: ``_names`` (ref names), ``_document`` (the checkpoint document's
encodings), ``_cache``, ``_op`` (operations and their drivers), the
operations by concern (``_state``, ``_refs``, ``_values`` (documents and
channel values), ``_checkpoints`` (get, put, list), ``_writes``,
``_delta`` (DeltaChannel's history), ``_threads`` (delete, copy, prune)),
all in ``_operations``' ``_Core``; ``_saver`` (what both savers share),
``_sync`` (:class:`CtxSaver`) and ``_async`` (:class:`AsyncCtxSaver`);
``_serde`` (the default serializer).
"""

from ._async import AsyncCtxSaver
from ._names import MAX_SEGMENT as MAX_SEGMENT
from ._names import encode_segment as encode_segment
from ._serde import CheckpointDecodeError, DisallowedTypeError, StrictSerializer
from ._serde import default_allowed_types as default_allowed_types
from ._sync import CtxSaver

__all__ = [
    "AsyncCtxSaver",
    "CheckpointDecodeError",
    "CtxSaver",
    "DisallowedTypeError",
    "StrictSerializer",
]
