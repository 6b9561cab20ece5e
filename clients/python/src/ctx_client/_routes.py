"""The routes of the API the clients shape: a function per operation,
named by its operationId, that builds its :class:`~ctx_client._core.Call`.
The clients only send them.

The routes themselves (method, path, parameters, bodies and answers) are
generated from the OpenAPI document into :mod:`ctx_client._generated`;
what is written here is what the document cannot say: the clients'
arguments, their defaults, and how they become a request body. An
operation with no function here is sent as generated
(:func:`ctx_client.client.every_operation`). A function named by no
operation (``branch_fail``) is a convenience over the one it sends.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from . import _generated as api
from ._core import Call, artifact_ref_of, verified
from .models import (
    AgentSettings,
    ArtifactInfo,
    AssembledContextResponse,
    BatchArtifact,
    BatchCommitRequest,
    BatchRefRequest,
    BatchRequest,
    BatchResponse,
    BranchCreated,
    BranchCreateRequest,
    BranchReturned,
    BranchStatusResponse,
    CheckpointRequest,
    Cleared,
    Commit,
    CommitType,
    CompactRequest,
    CompactResponse,
    Context,
    Erased,
    Evicted,
    EvictRequest,
    FileList,
    FileVersion,
    GcReport,
    GcRequest,
    HistoryResponse,
    MaterializeRequest,
    MaterializeResponse,
    MemoryKind,
    MemorySearchResponse,
    MissingSummaryList,
    PatchAgentRequest,
    PinChanged,
    PinList,
    PresignedUpload,
    ProcessList,
    PutProcessRequest,
    ReadRequest,
    ReadResponse,
    RefRecord,
    Restored,
    RestoreRequest,
    RestoreResponse,
    RunningProcess,
    SaveList,
    SaveRecord,
    SaveRequest,
    SessionEnded,
    SessionFile,
    SetRefRequest,
    Trigger,
    UpdateMetadataRequest,
    Window,
    WorkingContextSnapshot,
    WorkingContextStored,
)

B = TypeVar("B", bound=Mapping[str, object])


class _Unset:
    """The marker of an argument left out (``None`` may mean ``null``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def rfc3339(t: datetime | str) -> str:
    """A time as RFC 3339 UTC (naive times are taken as UTC)."""
    if isinstance(t, str):
        return t
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def now() -> str:
    """The current time, RFC 3339 UTC."""
    return rfc3339(datetime.now(UTC))


def _drop_none(body: B) -> B:
    """The body without its ``None`` fields (left out rather than ``null``)."""
    return cast(B, {k: v for k, v in body.items() if v is not None})


# --- meta ------------------------------------------------------------------


def healthz() -> Call[str]:
    """:func:`~ctx_client._generated.healthz`."""
    return api.healthz()


def openapi_json(*, all: bool | None = None) -> Call[dict[str, Any]]:
    """This server's document; with ``all``, the whole contract (what the
    clients are generated from)."""
    return api.openapi_json(all=all)


# --- artifacts -------------------------------------------------------------


def upload_artifact(data: bytes) -> Call[ArtifactInfo]:
    """Raw bytes, idempotent."""
    return api.upload_artifact(data)


def download_artifact(artifact_ref: str) -> Call[bytes]:
    """:func:`~ctx_client._generated.download_artifact`, the bytes checked against the ref (a
    large artifact comes straight from storage, by a 303 followed)."""
    return api.download_artifact(artifact_ref).then(lambda data: verified(artifact_ref, data))


def upload_url(artifact_ref: str, size: int) -> Call[PresignedUpload]:
    """Where to PUT a large artifact (AWS mode)."""
    return api.upload_url({"artifact_ref": artifact_ref, "size": size})


# --- commits ---------------------------------------------------------------


def checkpoint(
    *,
    principal: str,
    template: str,
    format: str,
    delta: str | bytes | None = None,
    artifact_ref: str | None = None,
    parent: str | None = None,
    commit_type: str = "delta",
    checkpoint: str = "turn_boundary",
    session_id: str | None = None,
    machine: str | None = None,
    ticket_id: str | None = None,
    thread_id: str | None = None,
    summary: str | None = None,
    message_count: int | None = None,
    token_count: int | None = None,
    created_at: datetime | str | None = None,
    tags: dict[str, str] | None = None,
    ref: str | None = None,
    expected: str | None = None,
) -> Call[Commit]:
    """:func:`~ctx_client._generated.checkpoint`.

    ``delta`` as ``str`` is sent as UTF-8 text, as ``bytes`` base64-encoded.
    ``created_at`` defaults to now, taken once, so a retried request is the
    same checkpoint (200, same commit). ``ref`` moves that ref to the new
    commit by compare-and-swap on ``expected`` (``None``: the ref must not
    exist yet).
    """
    data = bytes(delta) if isinstance(delta, (bytes, bytearray, memoryview)) else None
    body = _drop_none(
        CheckpointRequest(
            commit_type=cast(CommitType, commit_type),
            format=format,
            template=template,
            principal=principal,
            checkpoint=cast(Trigger, checkpoint),
            created_at=rfc3339(created_at) if created_at is not None else now(),
            delta=delta if isinstance(delta, str) else None,
            delta_base64=base64.b64encode(data).decode("ascii") if data is not None else None,
            artifact_ref=artifact_ref,
            parent=parent,
            session_id=session_id,
            machine=machine,
            ticket_id=ticket_id,
            thread_id=thread_id,
            summary=summary,
            message_count=message_count,
            token_count=token_count,
        )
    )
    if tags is not None:
        body["tags"] = tags
    if ref is not None:
        body["ref"] = {"name": ref, "expected": expected}
    return api.checkpoint(body)


def batch(
    commits: Sequence[Mapping[str, Any]] = (),
    refs: Sequence[BatchRefRequest] = (),
    artifacts: Sequence[bytes | str] = (),
) -> Call[BatchResponse]:
    """Commits, artifacts and ref moves as one atomic
    write (a 4xx or 409 writes nothing).

    Each commit takes the fields of :func:`checkpoint`'s body (not ``ref``)
    and ``parent_in_batch`` (the index of an earlier commit of the batch);
    ``commit_type`` defaults to ``delta``, ``checkpoint`` to
    ``turn_boundary``, ``created_at`` to now (taken once, plus one
    microsecond per commit so that the timeline keeps the batch's order; a
    retried batch is the same batch), and a ``delta`` given as ``bytes`` is sent
    base64-encoded. Each ref move is ``{"name", "expected", "target"}`` or
    ``{"name", "expected", "target_in_batch"}``, and ``"on_stale"`` says what
    a stale ``expected`` does: ``"conflict"`` (the default: a 409, nothing
    written), ``"skip"`` (that ref stays, the rest is written) or
    ``"overwrite"`` (it moves anyway). Each artifact is sent with
    its hash, as text when it is ``str`` and base64 when ``bytes``; a
    commit's ``artifact_ref`` may name it. At most 14 commits, and
    7 × commits + refs at most 100.
    """
    at = datetime.now(UTC)
    body: BatchRequest = {}
    if artifacts:
        body["artifacts"] = [_batch_artifact(a) for a in artifacts]
    if commits:
        body["commits"] = [
            _batch_commit(c, rfc3339(at + timedelta(microseconds=i))) for i, c in enumerate(commits)
        ]
    if refs:
        body["refs"] = list(refs)
    return api.batch(body)


def _batch_artifact(data: bytes | str) -> BatchArtifact:
    if isinstance(data, str):
        return {"ref": artifact_ref_of(data.encode()), "text": data}
    raw = bytes(data)
    return {"ref": artifact_ref_of(raw), "base64": base64.b64encode(raw).decode("ascii")}


def _batch_commit(c: Mapping[str, Any], at: str) -> BatchCommitRequest:
    body: dict[str, Any] = {"commit_type": "delta", "checkpoint": "turn_boundary"}
    body.update({k: v for k, v in c.items() if v is not None})
    delta = body.get("delta")
    if isinstance(delta, (bytes, bytearray, memoryview)):
        del body["delta"]
        body["delta_base64"] = base64.b64encode(bytes(delta)).decode("ascii")
    created = body.get("created_at")
    body["created_at"] = rfc3339(created) if created is not None else at
    return cast(BatchCommitRequest, body)


def get_commit(ctx_id: str) -> Call[Commit]:
    """:func:`~ctx_client._generated.get_commit`."""
    return api.get_commit(ctx_id)


def update_metadata(ctx_id: str, *, summary: Any = UNSET, tags: Any = UNSET) -> Call[Commit]:
    """:func:`~ctx_client._generated.update_metadata`: ``summary=None`` clears it;
    ``tags`` replaces all."""
    body: UpdateMetadataRequest = {}
    if summary is not UNSET:
        body["summary"] = summary
    if tags is not UNSET:
        body["tags"] = tags
    return api.update_metadata(ctx_id, body)


def history(
    ctx_id: str, depth: int | None = None, cursor: str | None = None
) -> Call[HistoryResponse]:
    """Newest first, a page at a time: a page that stops before the root
    names in ``next`` the commit the next page starts at; pass it as
    ``cursor``."""
    return api.history(ctx_id, depth=depth, cursor=cursor)


def missing_summaries(
    limit: int | None = None, cursor: str | None = None
) -> Call[MissingSummaryList]:
    """Oldest first, paged."""
    return api.missing_summaries(missing_summary="true", limit=limit, cursor=cursor)


def gc(
    dry_run: bool = False, cursor: str | None = None, limit: int | None = None
) -> Call[GcReport]:
    """One page of garbage collection (``next`` continues)."""
    return api.gc(_drop_none(GcRequest(dry_run=dry_run, cursor=cursor, limit=limit)))


def summarize(ctx_id: str, force: bool = False) -> Call[Commit]:
    """:func:`~ctx_client._generated.summarize`."""
    return api.summarize(ctx_id, {"force": force})


def compact(
    ctx_id: str,
    *,
    summarizer: str | None = None,
    ref: str | None = None,
    expected: str | None = None,
) -> Call[CompactResponse]:
    """:func:`~ctx_client._generated.compact`."""
    body = _drop_none(CompactRequest(summarizer=summarizer))
    if ref is not None:
        body["ref"] = {"name": ref, "expected": expected}
    return api.compact(ctx_id, body)


def materialize(
    ctx_id: str | None, *, stop: str | None = None, format: str | None = None
) -> Call[MaterializeResponse]:
    """:func:`~ctx_client._generated.materialize`: ``stop`` is ``compaction``
    (default), ``root`` or a ``ctx-…`` ancestor. ``ctx_id`` ``None`` is a
    fresh start (seed 000's ``materialize(null)``): the empty context in
    ``format`` (``raw`` when absent), from :func:`read`, nothing stored."""
    if ctx_id is None:
        keys = MaterializeResponse.__required_keys__ | MaterializeResponse.__optional_keys__
        return read(stop=stop, format=format).then(
            lambda r: cast(MaterializeResponse, {k: v for k, v in r.items() if k in keys})
        )
    return api.materialize(ctx_id, _drop_none(MaterializeRequest(stop=stop, format=format)))


def read(
    ref: str | None = None,
    *,
    commit: str | None = None,
    stop: str | None = None,
    format: str | None = None,
    delta: bool = False,
    depth: int | None = None,
) -> Call[ReadResponse]:
    """The context at ``ref``'s tip (or at ``commit``) in
    one request: the commit, its materialization (with ``delta``, the
    commit's own artifact instead, or with a ``stop`` too the deltas from
    the stop joined, at most ``depth`` commits of them, and ``parent``, the
    parent of the first) and, up to 1 MiB, its bytes (:func:`content_of`;
    larger ones are downloaded from ``artifact_ref``).

    Neither ``ref`` nor ``commit`` is a fresh start (``commit: null``,
    seed 000's ``materialize(null)``): the empty context in ``format``, as
    for a ``ref`` that has no commit yet; ``commit`` is then ``None`` in
    the answer. A wrong commit id still raises :class:`NotFoundError`."""
    body = _drop_none(ReadRequest(stop=stop, format=format, depth=depth))
    if delta:
        body["delta"] = True
    if ref is not None:
        body["ref"] = ref
    if commit is not None or ref is None:
        body["commit"] = commit
    return api.read(body)


def content_of(read: ReadResponse) -> bytes | None:
    """The bytes a :func:`read` answered inline, ``None`` when it did not."""
    if (text := read.get("content")) is not None:
        return text.encode()
    if (b64 := read.get("content_base64")) is not None:
        return base64.b64decode(b64)
    return None


def resolve(principal: str, at: datetime | str | None = None) -> Call[str]:
    """The id of the newest commit at or before ``at``."""
    call = api.resolve(principal=principal, at=rfc3339(at) if at is not None else None)
    return call.then(lambda body: body["id"])


# --- refs ------------------------------------------------------------------


def list_refs(
    prefix: str | None = None, limit: int | None = None, after: str | None = None
) -> Call[list[RefRecord]]:
    """Refs whose names start with ``prefix``, by name, at
    most ``limit``; with ``after`` (the last name of a full page), the next
    page."""
    return api.list_refs(prefix=prefix, limit=limit, after=after).then(lambda body: body["refs"])


def get_ref(name: str) -> Call[RefRecord]:
    """:func:`~ctx_client._generated.get_ref`."""
    return api.get_ref(name)


def set_ref(name: str, target: str, expected: str | None = None) -> Call[RefRecord]:
    """Create (``expected=None``) or compare-and-swap."""
    return api.set_ref(name, _drop_none(SetRefRequest(target=target, expected=expected)))


def delete_ref(name: str, expected: str | None = None) -> Call[RefRecord]:
    """The ref as it was; with ``expected``, only
    while it still points there (409 otherwise). Its commits stay."""
    return api.delete_ref(name, expected=expected)


def evict_ref(name: str, before: str, force: bool = False) -> Call[Evicted]:
    """Drops the deltas of the commits older
    than ``before`` (a compaction or snapshot on the ref's path), keeping
    their metadata and summaries; materializing across them then raises
    :class:`~ctx_client.errors.GoneError` (410). Answers the counts.
    Behind a compaction that does not cover them (one not made by
    ``compact``) it raises :class:`~ctx_client.errors.ConflictError` naming
    ``force`` and what would be lost, unless ``force``."""
    body = EvictRequest(before=before)
    if force:
        body["force"] = True
    return api.evict_ref(name, body)


# --- branches (context folding) --------------------------------------------


def branch_create(
    session_id: str,
    description: str,
    *,
    prompt: str | None = None,
    budget: int | None = None,
    timeout_seconds: int | None = None,
    parent_branch: str | None = None,
    inject_memories: bool = False,
) -> Call[BranchCreated]:
    """:func:`~ctx_client._generated.branch_create`. With ``inject_memories`` the memories relevant
    to ``description`` (strategies and anti-patterns of earlier branches,
    marked as data with their provenance) are prepended to its root; the
    answer's ``memories`` lists them."""
    body = _drop_none(
        BranchCreateRequest(
            session_id=session_id,
            description=description,
            prompt=prompt,
            budget=budget,
            timeout_seconds=timeout_seconds,
            parent_branch=parent_branch,
            inject_memories=inject_memories,
        )
    )
    return api.branch_create(body)


def branch_status(branch_id: str) -> Call[BranchStatusResponse]:
    """:func:`~ctx_client._generated.branch_status`."""
    return api.branch_status(branch_id)


def branch_status_of_session(session_id: str) -> Call[BranchStatusResponse]:
    """:func:`~ctx_client._generated.branch_status_of_session`."""
    return api.branch_status_of_session(session_id=session_id)


def branch_return(branch_id: str, message: str) -> Call[BranchReturned]:
    """:func:`~ctx_client._generated.branch_return`."""
    return api.branch_return(branch_id, {"message": message})


def branch_fail(branch_id: str, error: str, message: str = "") -> Call[BranchReturned]:
    """:func:`~ctx_client._generated.branch_return` with ``status: failed``: the branch
    ends as failed and its parent gets ``error`` (scrubbed) with
    ``message``."""
    return api.branch_return(branch_id, {"status": "failed", "error": error, "message": message})


def memory_search(
    q: str,
    *,
    limit: int | None = None,
    min_confidence: float | None = None,
    kind: MemoryKind | None = None,
) -> Call[MemorySearchResponse]:
    """Memories of ended branches matching ``q`` (any
    of its words), best first, each with its provenance and score."""
    return api.memory_search(q=q, limit=limit, min_confidence=min_confidence, kind=kind)


def session_end(session_id: str) -> Call[SessionEnded]:
    """Force-returns the session's active branches."""
    return api.session_end(session_id)


def erase_session(session_id: str, cascade: bool = False) -> Call[Erased]:
    """Erases the session for good (its
    commits, deltas, cached results and refs); forks in other sessions are a
    409 unless ``cascade``."""
    return api.erase_session(session_id, cascade=cascade)


def erase_principal(principal: str, cascade: bool = False) -> Call[Erased]:
    """Erases a principal for good
    (every commit on its timeline with its deltas, cached results and refs,
    its agent saves, working-context snapshot and record); other principals'
    commits descending from its commits are a 409 unless ``cascade``."""
    return api.erase_principal(principal, cascade=cascade)


def list_pins() -> Call[PinList]:
    """What retention never erases."""
    return api.list_pins()


def set_pin(kind: str, name: str) -> Call[PinChanged]:
    """:func:`~ctx_client._generated.set_pin`: ``kind`` is ``session`` or ``ref``."""
    return api.set_pin(cast(Any, kind), name)


def delete_pin(kind: str, name: str) -> Call[PinChanged]:
    """:func:`~ctx_client._generated.delete_pin`."""
    return api.delete_pin(cast(Any, kind), name)


# --- agents' live context --------------------------------------------------


def get_agent(agent: str) -> Call[AgentSettings]:
    """Settings and clear marker."""
    return api.get_agent(agent)


def patch_agent(
    agent: str,
    window_seconds: int | None = None,
    persist_working_context: bool | None = None,
    system_prompt: str | None = None,
    docs_workspace: str | None = None,
) -> Call[AgentSettings]:
    """Sets the fields given (an empty
    ``system_prompt`` or ``docs_workspace`` clears it)."""
    body = _drop_none(
        PatchAgentRequest(
            window_seconds=window_seconds,
            persist_working_context=persist_working_context,
            system_prompt=system_prompt,
            docs_workspace=docs_workspace,
        )
    )
    return api.patch_agent(agent, body)


def assemble_context(
    agent: str, thread_id: str, format: api.KnownFormat | None = None
) -> Call[AssembledContextResponse]:
    """The context of an LLM call for
    the agent and a thread, in seed 001's order (system prompt, docs,
    thread and process status, the thread's window), as sections and as
    one conversation in ``format``."""
    return api.assemble_context(agent, thread_id=thread_id, format=format)


def list_processes(agent: str) -> Call[ProcessList]:
    """Those still running, by id."""
    return api.list_processes(agent)


def put_process(
    agent: str,
    process_id: str,
    description: str,
    started_at: datetime | str | None = None,
    thread_id: str | None = None,
    expires_at: datetime | str | None = None,
) -> Call[RunningProcess]:
    """Registers (or
    replaces) a running process, listed in the agent's assembled context
    until removed or expired."""
    body = _drop_none(
        PutProcessRequest(
            description=description,
            started_at=None if started_at is None else rfc3339(started_at),
            thread_id=thread_id,
            expires_at=None if expires_at is None else rfc3339(expires_at),
        )
    )
    return api.put_process(agent, process_id, body)


def delete_process(agent: str, process_id: str) -> Call[None]:
    """:func:`~ctx_client._generated.delete_process`."""
    return api.delete_process(agent, process_id)


def clear_context(agent: str) -> Call[Cleared]:
    """A marker; deletes nothing."""
    return api.clear_context(agent)


def context_window(
    agent: str, thread_id: str | None = None, format: str | None = None
) -> Call[Window]:
    """The messages since
    max(last clear, now - window)."""
    return api.context_window(agent, thread_id=thread_id, format=format)


def save_context(agent: str, description: str | None = None) -> Call[SaveRecord]:
    """Snapshots every thread's window."""
    return api.save_context(agent, _drop_none(SaveRequest(description=description)))


def list_saves(agent: str) -> Call[SaveList]:
    """Newest first."""
    return api.list_saves(agent)


def get_save(agent: str, save_id: str) -> Call[SessionFile]:
    """The session file."""
    return api.get_save(agent, save_id)


def restore_save(agent: str, save_id: str) -> Call[Restored]:
    """:func:`~ctx_client._generated.restore_save`."""
    return api.restore_save(agent, save_id)


def put_working_context(agent: str, snapshot: dict[str, Any]) -> Call[WorkingContextStored]:
    """The cache, validated."""
    return api.put_working_context(agent, cast(WorkingContextSnapshot, snapshot))


def restore_working_context(
    agent: str,
    system_prompt: str | None = None,
    max_episodic: int | None = None,
    max_semantic: int | None = None,
    raw_tail_turns: int | None = None,
) -> Call[RestoreResponse]:
    """From the cache
    when it is good, rebuilt from the agent's memory when not."""
    body = _drop_none(
        RestoreRequest(
            system_prompt=system_prompt,
            max_episodic=max_episodic,
            max_semantic=max_semantic,
            raw_tail_turns=raw_tail_turns,
        )
    )
    return api.restore_working_context(agent, body)


# --- workspaces ------------------------------------------------------------


def list_files(workspace: str, prefix: str | None = None) -> Call[FileList]:
    """:func:`~ctx_client._generated.list_files`."""
    return api.list_files(workspace, prefix=prefix)


def get_file(workspace: str, path: str) -> Call[bytes]:
    """:func:`~ctx_client._generated.get_file`."""
    return api.get_file(workspace, path)


def put_file(
    workspace: str, path: str, data: bytes, if_match: str | None = None
) -> Call[FileVersion]:
    """:func:`~ctx_client._generated.put_file` (412 when ``if_match`` is stale)."""
    return api.put_file(workspace, path, data, if_match=if_match)


def delete_file(workspace: str, path: str, if_match: str | None = None) -> Call[None]:
    """:func:`~ctx_client._generated.delete_file`."""
    return api.delete_file(workspace, path, if_match=if_match)


def append_file(workspace: str, path: str, jsonl: str | bytes) -> Call[FileVersion]:
    """JSONL, one JSON value per line."""
    return api.append_file(workspace, path, jsonl)


def read_context(workspace: str) -> Call[Context]:
    """:func:`~ctx_client._generated.read_context`."""
    return api.read_context(workspace)
