//! `/v1/workspaces…`: workspace files and read_context.

use super::{Bytes, ErrorBody, operations};
use crate::workspace::{FilePath, WorkspaceId};
use std::collections::BTreeMap;

use crate::id::CommitId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/workspaces/{ws}/files`: a workspace's files, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileList {
    /// The files.
    pub files: Vec<FileEntry>,
}

/// A file of a workspace listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileEntry {
    /// Its path in the workspace.
    pub path: FilePath,
    /// Its version (tip commit).
    pub version: CommitId,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

impl From<crate::service::FileEntry> for FileEntry {
    fn from(v: crate::service::FileEntry) -> Self {
        FileEntry {
            path: v.path,
            version: v.version,
            updated_at: v.updated_at,
        }
    }
}

/// A written version of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileVersion {
    /// The version: the file's tip commit (send it as `If-Match`).
    pub version: CommitId,
    /// The file's size in bytes after a write; the appended bytes after an
    /// append.
    pub size: u64,
}

impl From<crate::service::FileVersion> for FileVersion {
    fn from(v: crate::service::FileVersion) -> Self {
        FileVersion {
            version: v.version,
            size: v.size,
        }
    }
}

/// The brief, parsed for its `Tastes:` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Brief {
    /// The whole file.
    pub raw: String,
    /// Everything but the `Tastes:` line (trimmed).
    pub intent: String,
    /// The genres the `Tastes:` line names, in order.
    pub tastes: Vec<String>,
}

impl From<crate::workspace::context::Brief> for Brief {
    fn from(v: crate::workspace::context::Brief) -> Self {
        Brief {
            raw: v.raw,
            intent: v.intent,
            tastes: v.tastes,
        }
    }
}

/// A line present in two or more genre files, for the agent to mediate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Conflict {
    /// The line (trimmed).
    pub point: String,
    /// The genres whose files hold it, in the brief's order.
    pub files: Vec<String>,
}

impl From<crate::workspace::context::Conflict> for Conflict {
    fn from(v: crate::workspace::context::Conflict) -> Self {
        Conflict {
            point: v.point,
            files: v.files,
        }
    }
}

/// The whole first-turn context, in loading order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Context {
    /// `_default.md` and the genres the brief names.
    pub tastes: Tastes,
    /// The workspace's brief.
    pub brief: Brief,
    /// The workspace's notes, truncated head + tail when long.
    pub notes: Notes,
    /// The last entries of `log.jsonl`, newest first.
    pub recent_log: Vec<LogEntry>,
    /// The last records of `vocabulary_gaps.jsonl`, newest first.
    pub recent_gaps: Vec<GapRecord>,
}

impl From<crate::workspace::context::Context> for Context {
    fn from(v: crate::workspace::context::Context) -> Self {
        Context {
            tastes: v.tastes.into(),
            brief: v.brief.into(),
            notes: v.notes.into(),
            recent_log: v.recent_log.into_iter().map(Into::into).collect(),
            recent_gaps: v.recent_gaps.into_iter().map(Into::into).collect(),
        }
    }
}

/// A record of `vocabulary_gaps.jsonl`: every field present, defaulted when
/// the line lacks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GapRecord {
    /// When (as written).
    #[serde(default)]
    pub timestamp: String,
    /// The image (workspace) it was recorded on.
    #[serde(default)]
    pub image_id: String,
    /// What was missing.
    #[serde(default)]
    pub description: String,
    /// The session it was recorded in.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The snapshot it was recorded at.
    #[serde(default)]
    pub snapshot_hash: Option<String>,
    /// What the photographer wanted.
    #[serde(default)]
    pub intent: Option<String>,
    /// Its category.
    #[serde(default = "crate::workspace::context::uncategorized")]
    pub intent_category: String,
    /// The capability that was missing.
    #[serde(default)]
    pub missing_capability: Option<String>,
    /// Operations involved.
    #[serde(default)]
    pub operations_involved: Vec<String>,
    /// Vocabulary used.
    #[serde(default)]
    pub vocabulary_used: Vec<String>,
    /// How satisfied (a number as written, or null).
    #[serde(default)]
    #[schema(value_type = Option<f64>)]
    pub satisfaction: Option<serde_json::Number>,
    /// Free notes.
    #[serde(default)]
    pub notes: String,
}

impl From<crate::workspace::context::GapRecord> for GapRecord {
    fn from(v: crate::workspace::context::GapRecord) -> Self {
        GapRecord {
            timestamp: v.timestamp,
            image_id: v.image_id,
            description: v.description,
            session_id: v.session_id,
            snapshot_hash: v.snapshot_hash,
            intent: v.intent,
            intent_category: v.intent_category,
            missing_capability: v.missing_capability,
            operations_involved: v.operations_involved,
            vocabulary_used: v.vocabulary_used,
            satisfaction: v.satisfaction,
            notes: v.notes,
        }
    }
}

/// An entry of `log.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LogEntry {
    /// When (as written).
    #[serde(default)]
    pub timestamp: String,
    /// The operation.
    #[serde(default)]
    pub op: String,
    /// Its details.
    #[serde(default = "crate::workspace::context::empty_object")]
    #[schema(value_type = Object)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl From<crate::workspace::context::LogEntry> for LogEntry {
    fn from(v: crate::workspace::context::LogEntry) -> Self {
        LogEntry {
            timestamp: v.timestamp,
            op: v.op,
            details: v.details,
        }
    }
}

/// The notes, or their head and tail with an elision marker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Notes {
    /// The notes when at most `NOTES_TRUNCATION_THRESHOLD` lines; else
    /// the first `NOTES_HEAD_LINES`, `\n\n... [N lines elided] ...\n\n`
    /// and the last `NOTES_TAIL_LINES`.
    pub summary: String,
    /// Whether lines were elided.
    pub truncated: bool,
}

impl From<crate::workspace::context::Notes> for Notes {
    fn from(v: crate::workspace::context::Notes) -> Self {
        Notes {
            summary: v.summary,
            truncated: v.truncated,
        }
    }
}

/// Tastes: the default file, the genre files the brief declares, and lines
/// two or more genre files share.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Tastes {
    /// `_default.md` (empty when missing).
    pub default: String,
    /// Each declared genre whose `<genre>.md` exists, by name.
    pub genres: BTreeMap<String, String>,
    /// Lines present in two or more genre files.
    pub conflicts: Vec<Conflict>,
}

impl From<crate::workspace::context::Tastes> for Tastes {
    fn from(v: crate::workspace::context::Tastes) -> Self {
        Tastes {
            default: v.default,
            genres: v.genres,
            conflicts: v.conflicts.into_iter().map(Into::into).collect(),
        }
    }
}

/// The body of an append (a schema only: the handler takes the bytes):
/// JSONL, one JSON value per line, so not empty and not only whitespace.
/// That each line is one JSON value is more than a text schema can say;
/// the server refuses a line that is not with 400 naming `body`.
pub struct JsonLines;

impl utoipa::PartialSchema for JsonLines {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            // A JSON value has a character that is not JSON's whitespace.
            .pattern(Some(r"[^\t\n\r ]"))
            .description(Some("JSONL: one JSON value per line"))
            .into()
    }
}

impl ToSchema for JsonLines {}

operations! { WORKSPACE_OPERATIONS;
    /// Writes a file's whole content (raw body) as its new version; with
    /// `If-Match` only over that version.
    PutFile = put_file: put "/v1/workspaces/{ws}/files/{*path}" in Workspaces,
        bytes => FileVersion {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'"),
                ("If-Match" = Option<String>, Header, nullable = false, pattern = r#"^(W/)?"?ctx-[0-9a-f]{32}"?$"#, description = "The version the writer read (a ctx-… id, quoted or not)")),
            responses((status = 200, description = "Written", body = FileVersion),
                (status = 400, description = "A bad workspace, path or If-Match", body = ErrorBody),
                (status = 412, description = "`If-Match` is not the current version (`current` says which is)", body = ErrorBody),
                (status = 413, description = "Larger than the artifact limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// A file's bytes at its current version (`ETag`).
    GetFile = get_file: get "/v1/workspaces/{ws}/files/{*path}" in Workspaces,
        none => Bytes {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'")),
            responses((status = 200, description = "The bytes", content_type = "application/octet-stream", body = Vec<u8>,
                    headers(("etag" = String, description = "The version, quoted"))),
                (status = 400, description = "A bad workspace or path", body = ErrorBody),
                (status = 404, description = "No such file", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Removes a file (its versions stay in history); with `If-Match` only
    /// from that version.
    DeleteFile = delete_file: delete "/v1/workspaces/{ws}/files/{*path}" in Workspaces,
        none => () {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'"),
                ("If-Match" = Option<String>, Header, nullable = false, pattern = r#"^(W/)?"?ctx-[0-9a-f]{32}"?$"#, description = "The version the caller read (a ctx-… id, quoted or not)")),
            responses((status = 204, description = "Removed"),
                (status = 400, description = "A bad workspace, path or If-Match", body = ErrorBody),
                (status = 404, description = "No such file", body = ErrorBody),
                (status = 412, description = "`If-Match` is not the current version", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The files of a workspace whose paths start with `prefix`, by path.
    ListFiles = list_files: get "/v1/workspaces/{ws}/files" in Workspaces,
        none => FileList {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path),
                ("prefix" = Option<String>, Query, description = "Only paths that start with it")),
            responses((status = 200, description = "The files, by path", body = FileList),
                (status = 400, description = "A bad workspace or query", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Appends JSONL lines (each one JSON value) to a file as one version;
    /// concurrent appends all land, each line whole.
    AppendFile = append_file: post "/v1/workspaces/{ws}/append/{*path}" in Workspaces,
        text "text/plain" as JsonLines => FileVersion {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path), ("path" = FilePath, Path, description = "may contain '/'")),
            responses((status = 200, description = "Appended (`size`: the bytes appended)", body = FileVersion),
                (status = 400, description = "A bad workspace or path, or a line that is not one JSON value", body = ErrorBody),
                (status = 413, description = "Larger than the artifact limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The first-turn context of a workspace (docs/workspaces.md): tastes, brief, notes,
    /// recent log, recent gaps, in that order. Missing files give empty parts.
    ReadContext = read_context: get "/v1/workspaces/{ws}/context" in Workspaces,
        none => Context {
        tag = "workspaces",
            params(("ws" = WorkspaceId, Path)),
            responses((status = 200, description = "The context", body = Context),
                (status = 400, description = "A bad workspace", body = ErrorBody)),
            security(("bearer" = []))
    }
}
