"""The API's response bodies as typed dictionaries (JSON as returned)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = [
    "ArtifactInfo",
    "Commit",
    "HistoryResponse",
    "MaterializeResponse",
    "RefRecord",
    "RefList",
    "ResolveResponse",
]


class ArtifactInfo(TypedDict):
    """An artifact reference (``art-`` + BLAKE3 hex) and its size."""

    ref: str
    size: int


class Commit(TypedDict):
    """A commit as the API returns it."""

    id: str
    parent: str | None
    commit_type: str
    artifact_ref: str
    artifact_size: int
    format: str
    template: str
    principal: str
    machine: NotRequired[str | None]
    session_id: NotRequired[str | None]
    checkpoint: str
    ticket_id: NotRequired[str | None]
    thread_id: NotRequired[str | None]
    summary: NotRequired[str | None]
    message_count: int
    token_count: int
    created_at: str
    tags: dict[str, str]
    depth: int
    lineage: str
    parent_lineage: NotRequired[str | None]


class HistoryResponse(TypedDict):
    """Commits, newest first."""

    commits: list[Commit]


class MaterializeResponse(TypedDict):
    """A materialized context: the artifact holding it and its counts."""

    artifact_ref: str
    size: int
    message_count: int
    token_count: int
    tier: str
    cached: bool


class RefRecord(TypedDict):
    """A named, mutable pointer to a commit."""

    name: str
    target: str
    updated_at: str


class RefList(TypedDict):
    """Refs, by name."""

    refs: list[RefRecord]


class ResolveResponse(TypedDict):
    """The newest commit at or before a time."""

    id: str


JSON = Any
