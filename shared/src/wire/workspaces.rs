//! `/v1/workspaces…`: workspace files and read_context.

use super::{Bytes, ErrorBody, operations};
use crate::service::FileVersion;
use crate::workspace::context::Context;
use crate::workspace::{FilePath, WorkspaceId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/workspaces/{ws}/files`: a workspace's files, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileList {
    /// The files.
    pub files: Vec<crate::service::FileEntry>,
}

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
        text "text/plain" ("JSONL: one JSON value per line") => FileVersion {
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
