"""Every route of the API, once: a function per route that builds its
:class:`~ctx_client._core.Call`. The clients only send them."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from ._core import Call, parse_bytes, parse_json, parse_none, parse_text
from .models import (
    ArtifactInfo,
    Commit,
    HistoryResponse,
    MaterializeResponse,
    RefList,
    RefRecord,
)


class _Unset:
    """The marker of an argument left out (``None`` may mean ``null``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def seg(value: str) -> str:
    """One path segment, percent-encoded."""
    return quote(value, safe="")


def name_path(value: str) -> str:
    """A path parameter that may contain '/' (ref names, file paths)."""
    return quote(value, safe="/")


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


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# --- meta ------------------------------------------------------------------


def healthz() -> Call[str]:
    """``GET /healthz``."""
    return Call("GET", "/healthz", parse_text)


def openapi() -> Call[dict[str, Any]]:
    """``GET /v1/openapi.json``."""
    return Call("GET", "/v1/openapi.json", parse_json)


# --- artifacts -------------------------------------------------------------


def put_artifact(data: bytes) -> Call[ArtifactInfo]:
    """``POST /v1/artifacts``: raw bytes, idempotent."""
    return Call("POST", "/v1/artifacts", parse_json, content=bytes(data))


def get_artifact(artifact_ref: str) -> Call[bytes]:
    """``GET /v1/artifacts/{art}``."""
    return Call("GET", f"/v1/artifacts/{seg(artifact_ref)}", parse_bytes)


def upload_url(artifact_ref: str, size: int) -> Call[dict[str, Any]]:
    """``POST /v1/uploads``: where to PUT a large artifact (AWS mode)."""
    body = {"artifact_ref": artifact_ref, "size": size}
    return Call("POST", "/v1/uploads", parse_json, json_body=body, has_json=True)


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
    """``POST /v1/commits``.

    ``delta`` as ``str`` is sent as UTF-8 text, as ``bytes`` base64-encoded.
    ``created_at`` defaults to now, taken once, so a retried request is the
    same checkpoint (200, same commit). ``ref`` moves that ref to the new
    commit by compare-and-swap on ``expected`` (``None``: the ref must not
    exist yet).
    """
    body: dict[str, Any] = {
        "commit_type": commit_type,
        "format": format,
        "template": template,
        "principal": principal,
        "checkpoint": checkpoint,
        "created_at": rfc3339(created_at) if created_at is not None else now(),
    }
    if isinstance(delta, str):
        body["delta"] = delta
    elif isinstance(delta, (bytes, bytearray, memoryview)):
        body["delta_base64"] = base64.b64encode(bytes(delta)).decode("ascii")
    body.update(
        _drop_none(
            {
                "artifact_ref": artifact_ref,
                "parent": parent,
                "session_id": session_id,
                "machine": machine,
                "ticket_id": ticket_id,
                "thread_id": thread_id,
                "summary": summary,
                "message_count": message_count,
                "token_count": token_count,
                "tags": tags,
            }
        )
    )
    if ref is not None:
        body["ref"] = {"name": ref, "expected": expected}
    return Call("POST", "/v1/commits", parse_json, json_body=body, has_json=True)


def get_commit(ctx_id: str) -> Call[Commit]:
    """``GET /v1/commits/{ctx}``."""
    return Call("GET", f"/v1/commits/{seg(ctx_id)}", parse_json)


def update_metadata(ctx_id: str, *, summary: Any = UNSET, tags: Any = UNSET) -> Call[Commit]:
    """``PATCH /v1/commits/{ctx}``: ``summary=None`` clears it; ``tags`` replaces all."""
    body: dict[str, Any] = {}
    if summary is not UNSET:
        body["summary"] = summary
    if tags is not UNSET:
        body["tags"] = tags
    return Call("PATCH", f"/v1/commits/{seg(ctx_id)}", parse_json, json_body=body, has_json=True)


def history(ctx_id: str, depth: int | None = None) -> Call[HistoryResponse]:
    """``GET /v1/commits/{ctx}/history``: newest first."""
    params = {"depth": str(depth)} if depth is not None else None
    return Call("GET", f"/v1/commits/{seg(ctx_id)}/history", parse_json, params=params)


def missing_summaries(limit: int | None = None, cursor: str | None = None) -> Call[dict[str, Any]]:
    """``GET /v1/commits?missing_summary=true``: oldest first, paged."""
    params = {"missing_summary": "true"}
    if limit is not None:
        params["limit"] = str(limit)
    if cursor is not None:
        params["cursor"] = cursor
    return Call("GET", "/v1/commits", parse_json, params=params)


def gc(
    dry_run: bool = False, cursor: str | None = None, limit: int | None = None
) -> Call[dict[str, Any]]:
    """``POST /v1/gc``: one page of garbage collection (``next`` continues)."""
    return Call(
        "POST",
        "/v1/gc",
        parse_json,
        json_body=_drop_none({"dry_run": dry_run, "cursor": cursor, "limit": limit}),
        has_json=True,
    )


def summarize(ctx_id: str, force: bool = False) -> Call[Commit]:
    """``POST /v1/commits/{ctx}/summarize``."""
    return Call(
        "POST",
        f"/v1/commits/{seg(ctx_id)}/summarize",
        parse_json,
        json_body={"force": force},
        has_json=True,
    )


def compact(
    ctx_id: str,
    *,
    summarizer: str | None = None,
    ref: str | None = None,
    expected: str | None = None,
) -> Call[dict[str, Any]]:
    """``POST /v1/commits/{ctx}/compact``."""
    body: dict[str, Any] = _drop_none({"summarizer": summarizer})
    if ref is not None:
        body["ref"] = {"name": ref, "expected": expected}
    return Call(
        "POST", f"/v1/commits/{seg(ctx_id)}/compact", parse_json, json_body=body, has_json=True
    )


def materialize(
    ctx_id: str, *, stop: str | None = None, format: str | None = None
) -> Call[MaterializeResponse]:
    """``POST /v1/commits/{ctx}/materialize``: ``stop`` is ``compaction``
    (default), ``root`` or a ``ctx-…`` ancestor."""
    body = _drop_none({"stop": stop, "format": format})
    return Call(
        "POST",
        f"/v1/commits/{seg(ctx_id)}/materialize",
        parse_json,
        json_body=body,
        has_json=True,
    )


def resolve(principal: str, at: datetime | str | None = None) -> Call[str]:
    """``GET /v1/resolve``: the id of the newest commit at or before ``at``."""
    params = {"principal": principal}
    if at is not None:
        params["at"] = rfc3339(at)
    return Call("GET", "/v1/resolve", lambda r: parse_json(r)["id"], params=params)


# --- refs ------------------------------------------------------------------


def list_refs(prefix: str | None = None, limit: int | None = None) -> Call[list[RefRecord]]:
    """``GET /v1/refs``: refs whose names start with ``prefix``, by name."""
    params: dict[str, str] = {}
    if prefix is not None:
        params["prefix"] = prefix
    if limit is not None:
        params["limit"] = str(limit)

    def parse(r: Any) -> list[RefRecord]:
        body: RefList = parse_json(r)
        return body["refs"]

    return Call("GET", "/v1/refs", parse, params=params or None)


def get_ref(name: str) -> Call[RefRecord]:
    """``GET /v1/refs/{name}``."""
    return Call("GET", f"/v1/refs/{name_path(name)}", parse_json)


def put_ref(name: str, target: str, expected: str | None = None) -> Call[RefRecord]:
    """``PUT /v1/refs/{name}``: create (``expected=None``) or compare-and-swap."""
    body = _drop_none({"target": target, "expected": expected})
    return Call("PUT", f"/v1/refs/{name_path(name)}", parse_json, json_body=body, has_json=True)


def delete_ref(name: str, expected: str | None = None) -> Call[RefRecord]:
    """``DELETE /v1/refs/{name}``: the ref as it was; with ``expected``, only
    while it still points there (409 otherwise). Its commits stay."""
    params = {"expected": expected} if expected is not None else None
    return Call("DELETE", f"/v1/refs/{name_path(name)}", parse_json, params=params)


def evict_ref(name: str, before: str) -> Call[dict[str, Any]]:
    """``POST /v1/refs/{name}/evict``: drops the deltas of the commits older
    than ``before`` (a compaction or snapshot on the ref's path), keeping
    their metadata and summaries; materializing across them then raises
    :class:`~ctx_client.errors.GoneError` (410). Answers the counts."""
    return Call(
        "POST",
        f"/v1/refs/{name_path(name)}/evict",
        parse_json,
        json_body={"before": before},
        has_json=True,
    )


# --- branches (context folding) --------------------------------------------


def branch_create(
    session_id: str,
    description: str,
    *,
    prompt: str | None = None,
    budget: int | None = None,
    timeout_seconds: int | None = None,
    parent_branch: str | None = None,
) -> Call[dict[str, Any]]:
    """``POST /v1/branches``."""
    body = _drop_none(
        {
            "session_id": session_id,
            "description": description,
            "prompt": prompt,
            "budget": budget,
            "timeout_seconds": timeout_seconds,
            "parent_branch": parent_branch,
        }
    )
    return Call("POST", "/v1/branches", parse_json, json_body=body, has_json=True)


def branch_status(branch_id: str) -> Call[dict[str, Any]]:
    """``GET /v1/branches/{br}``."""
    return Call("GET", f"/v1/branches/{seg(branch_id)}", parse_json)


def branches_of_session(session_id: str) -> Call[dict[str, Any]]:
    """``GET /v1/branches?session_id=``."""
    return Call("GET", "/v1/branches", parse_json, params={"session_id": session_id})


def branch_return(branch_id: str, message: str) -> Call[dict[str, Any]]:
    """``POST /v1/branches/{br}/return``."""
    return Call(
        "POST",
        f"/v1/branches/{seg(branch_id)}/return",
        parse_json,
        json_body={"message": message},
        has_json=True,
    )


def session_end(session_id: str) -> Call[dict[str, Any]]:
    """``POST /v1/sessions/{id}/end``: force-returns the session's active branches."""
    return Call("POST", f"/v1/sessions/{seg(session_id)}/end", parse_json)


def erase_session(session_id: str, cascade: bool = False) -> Call[dict[str, Any]]:
    """``DELETE /v1/sessions/{id}``: erases the session for good (its
    commits, deltas, cached results and refs); forks in other sessions are a
    409 unless ``cascade``."""
    return Call(
        "DELETE",
        f"/v1/sessions/{seg(session_id)}",
        parse_json,
        params={"cascade": "true" if cascade else "false"},
    )


def erase_principal(principal: str, cascade: bool = False) -> Call[dict[str, Any]]:
    """``DELETE /v1/principals/{principal}``: erases a principal for good
    (every commit on its timeline with its deltas, cached results and refs,
    its agent saves, working-context snapshot and record); other principals'
    commits descending from its commits are a 409 unless ``cascade``."""
    return Call(
        "DELETE",
        f"/v1/principals/{seg(principal)}",
        parse_json,
        params={"cascade": "true" if cascade else "false"},
    )


def list_pins() -> Call[dict[str, Any]]:
    """``GET /v1/pins``: what retention never erases."""
    return Call("GET", "/v1/pins", parse_json)


def pin(kind: str, name: str) -> Call[dict[str, Any]]:
    """``PUT /v1/pins/{kind}/{name}``: ``kind`` is ``session`` or ``ref``."""
    return Call("PUT", f"/v1/pins/{seg(kind)}/{name_path(name)}", parse_json)


def unpin(kind: str, name: str) -> Call[dict[str, Any]]:
    """``DELETE /v1/pins/{kind}/{name}``."""
    return Call("DELETE", f"/v1/pins/{seg(kind)}/{name_path(name)}", parse_json)


# --- agents' live context --------------------------------------------------


def get_agent(agent: str) -> Call[dict[str, Any]]:
    """``GET /v1/agents/{agent}``: settings and clear marker."""
    return Call("GET", f"/v1/agents/{seg(agent)}", parse_json)


def set_agent(
    agent: str,
    window_seconds: int | None = None,
    persist_working_context: bool | None = None,
) -> Call[dict[str, Any]]:
    """``PATCH /v1/agents/{agent}``: sets the fields given."""
    body = _drop_none(
        {"window_seconds": window_seconds, "persist_working_context": persist_working_context}
    )
    return Call("PATCH", f"/v1/agents/{seg(agent)}", parse_json, json_body=body, has_json=True)


def clear_context(agent: str) -> Call[dict[str, Any]]:
    """``POST /v1/agents/{agent}/clear``: a marker; deletes nothing."""
    return Call("POST", f"/v1/agents/{seg(agent)}/clear", parse_json)


def context_window(
    agent: str, thread_id: str | None = None, format: str | None = None
) -> Call[dict[str, Any]]:
    """``GET /v1/agents/{agent}/window``: the messages since
    max(last clear, now - window)."""
    params = _drop_none({"thread_id": thread_id, "format": format})
    return Call("GET", f"/v1/agents/{seg(agent)}/window", parse_json, params=params or None)


def save_context(agent: str, description: str | None = None) -> Call[dict[str, Any]]:
    """``POST /v1/agents/{agent}/saves``: snapshots every thread's window."""
    return Call(
        "POST",
        f"/v1/agents/{seg(agent)}/saves",
        parse_json,
        json_body=_drop_none({"description": description}),
        has_json=True,
    )


def list_saves(agent: str) -> Call[dict[str, Any]]:
    """``GET /v1/agents/{agent}/saves``: newest first."""
    return Call("GET", f"/v1/agents/{seg(agent)}/saves", parse_json)


def get_save(agent: str, save_id: str) -> Call[dict[str, Any]]:
    """``GET /v1/agents/{agent}/saves/{save_id}``: the session file."""
    return Call("GET", f"/v1/agents/{seg(agent)}/saves/{seg(save_id)}", parse_json)


def restore_save(agent: str, save_id: str) -> Call[dict[str, Any]]:
    """``POST /v1/agents/{agent}/saves/{save_id}/restore``."""
    return Call("POST", f"/v1/agents/{seg(agent)}/saves/{seg(save_id)}/restore", parse_json)


def put_working_context(agent: str, snapshot: dict[str, Any]) -> Call[dict[str, Any]]:
    """``PUT /v1/agents/{agent}/working-context``: the cache, validated."""
    return Call(
        "PUT",
        f"/v1/agents/{seg(agent)}/working-context",
        parse_json,
        json_body=snapshot,
        has_json=True,
    )


def restore_working_context(
    agent: str,
    system_prompt: str | None = None,
    max_episodic: int | None = None,
    max_semantic: int | None = None,
    raw_tail_turns: int | None = None,
) -> Call[dict[str, Any]]:
    """``POST /v1/agents/{agent}/working-context/restore``: from the cache
    when it is good, rebuilt from the agent's memory when not."""
    body = _drop_none(
        {
            "system_prompt": system_prompt,
            "max_episodic": max_episodic,
            "max_semantic": max_semantic,
            "raw_tail_turns": raw_tail_turns,
        }
    )
    return Call(
        "POST",
        f"/v1/agents/{seg(agent)}/working-context/restore",
        parse_json,
        json_body=body,
        has_json=True,
    )


# --- workspaces ------------------------------------------------------------


def list_files(workspace: str, prefix: str | None = None) -> Call[dict[str, Any]]:
    """``GET /v1/workspaces/{ws}/files``."""
    params = {"prefix": prefix} if prefix is not None else None
    return Call("GET", f"/v1/workspaces/{seg(workspace)}/files", parse_json, params=params)


def get_file(workspace: str, path: str) -> Call[bytes]:
    """``GET /v1/workspaces/{ws}/files/{path}``."""
    return Call("GET", f"/v1/workspaces/{seg(workspace)}/files/{name_path(path)}", parse_bytes)


def put_file(
    workspace: str, path: str, data: bytes, if_match: str | None = None
) -> Call[dict[str, Any]]:
    """``PUT /v1/workspaces/{ws}/files/{path}`` (412 when ``if_match`` is stale)."""
    headers = {"if-match": if_match} if if_match is not None else {}
    return Call(
        "PUT",
        f"/v1/workspaces/{seg(workspace)}/files/{name_path(path)}",
        parse_json,
        content=bytes(data),
        headers=headers,
    )


def delete_file(workspace: str, path: str, if_match: str | None = None) -> Call[None]:
    """``DELETE /v1/workspaces/{ws}/files/{path}``."""
    headers = {"if-match": if_match} if if_match is not None else {}
    return Call(
        "DELETE",
        f"/v1/workspaces/{seg(workspace)}/files/{name_path(path)}",
        parse_none,
        headers=headers,
    )


def append_file(workspace: str, path: str, jsonl: str | bytes) -> Call[dict[str, Any]]:
    """``POST /v1/workspaces/{ws}/append/{path}``: JSONL, one JSON value per line."""
    data = jsonl.encode() if isinstance(jsonl, str) else bytes(jsonl)
    return Call(
        "POST",
        f"/v1/workspaces/{seg(workspace)}/append/{name_path(path)}",
        parse_json,
        content=data,
        headers={"content-type": "text/plain"},
    )


def read_context(workspace: str) -> Call[dict[str, Any]]:
    """``GET /v1/workspaces/{ws}/context``."""
    return Call("GET", f"/v1/workspaces/{seg(workspace)}/context", parse_json)
