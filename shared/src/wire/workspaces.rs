//! `/v1/workspaces…`: workspace files and read_context.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/workspaces/{ws}/files`: a workspace's files, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileList {
    /// The files.
    pub files: Vec<crate::service::FileEntry>,
}
