//! Workspaces: versioned context documents (tastes, a brief, notes, an
//! operation log, recorded gaps) and the first-turn assembly over them,
//! `read_context` (docs/workspaces.md,
//! docs/adr/0006-workspaces-and-read-context.md).
//!
//! A workspace file is a chain of `raw` commits under the ref
//! `workspaces/{ws}/{path}` (see [`file_ref`]): a write is a snapshot
//! commit, an append a delta holding only the appended lines. The service
//! side is `service::workspaces`; this module holds what does not need a
//! store.
//!
//! # Layout
//! - this file: [`WorkspaceId`] and [`FilePath`], the validated names, and
//!   the ref a file lives under.
//! - [`context`]: the assembly ([`context::assemble`]) over a
//!   [`context::FileSource`], its constants and response shape.
//! - [`dir`]: a [`context::FileSource`] over local directories, for
//!   `ctx read-context --dir`.
//! - `cases`: the read_context table the tests share (feature
//!   `conformance`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::id::{RefName, name_rule, name_type};

#[cfg(any(test, feature = "conformance"))]
pub mod cases;
pub mod context;
pub mod dir;

/// The workspace that holds a tenant's global tastes (`_default.md` and
/// `<genre>.md`).
pub const TASTES_WORKSPACE: &str = "tastes";

/// The longest workspace id, in bytes.
pub const MAX_WORKSPACE_ID: usize = 64;
/// The longest file path, in bytes.
pub const MAX_PATH: usize = 120;
/// The most `/`-separated segments a file path has.
pub const MAX_DEPTH: usize = 8;

/// A segment of a workspace id or path: `A-Z a-z 0-9 . _ -`, not `.` or
/// `..` (so it can name a ref and never climbs out of a directory).
fn check_segment(field: &str, whole: &str, seg: &str) -> Result<()> {
    if seg.is_empty() {
        return Err(Error::invalid(
            field,
            format!("{field} {whole:?} has an empty segment (a leading, trailing or doubled '/')"),
        ));
    }
    if seg == "." || seg == ".." {
        return Err(Error::invalid(
            field,
            format!(
                "{field} {whole:?} has a {seg:?} segment; paths cannot climb or repeat a directory"
            ),
        ));
    }
    if seg.contains("..") {
        return Err(Error::invalid(
            field,
            format!("{field} {whole:?} contains '..'"),
        ));
    }
    if let Some(c) = seg
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::invalid(
            field,
            format!(
                "{field} {whole:?} has {c:?}; use A-Z, a-z, 0-9, '.', '_' and '-' (and '/' between segments of a path)"
            ),
        ));
    }
    Ok(())
}

fn check_len(field: &str, s: &str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, format!("{field} must not be empty")));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            format!(
                "{field} is {} bytes long; at most {max} are allowed",
                s.len()
            ),
        ));
    }
    Ok(())
}

/// What a path segment matches, as a pattern (no `.`/`..` segment, no `..`).
const SEGMENT: &str = r"(?:\.?[A-Za-z0-9_-]+)+\.?";

name_type!(
    /// A workspace: one segment of 1 to 64 of `A-Z a-z 0-9 . _ -`, not `.`
    /// or `..` (an image id, say). `tastes` is the tenant's global tastes.
    WorkspaceId,
    "ws",
    |s| {
        check_len("ws", s, MAX_WORKSPACE_ID)?;
        check_segment("ws", s, s)
    },
    rule: name_rule(
        &format!("^{SEGMENT}$"),
        MAX_WORKSPACE_ID,
        "A workspace: 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'; not '.', no '..'.",
    )
);

name_type!(
    /// A file's path in a workspace: 1 to 120 bytes, at most 8
    /// `/`-separated segments of `A-Z a-z 0-9 . _ -`, none empty, `.` or
    /// `..`; relative (no leading `/`).
    FilePath,
    "path",
    |s| {
        check_len("path", s, MAX_PATH)?;
        let segments: Vec<&str> = s.split('/').collect();
        if segments.len() > MAX_DEPTH {
            return Err(Error::invalid(
                "path",
                format!(
                    "path {s:?} is {} segments deep; at most {MAX_DEPTH} are allowed",
                    segments.len()
                ),
            ));
        }
        segments
            .iter()
            .try_for_each(|seg| check_segment("path", s, seg))
    },
    rule: name_rule(
        &format!("^{SEGMENT}(?:/{SEGMENT}){{0,7}}$"),
        MAX_PATH,
        "A file path: 1 to 120 bytes, at most 8 '/'-separated segments of A-Z, a-z, 0-9, '.', '_' and '-'; no empty, '.' or '..' segment, no leading '/'.",
    )
);

impl WorkspaceId {
    /// The reserved workspace of the tenant's global tastes.
    pub fn tastes() -> Self {
        WorkspaceId(TASTES_WORKSPACE.to_owned())
    }
}

/// The ref a workspace file lives under: `workspaces/{ws}/{path}`.
pub fn file_ref(ws: &WorkspaceId, path: &FilePath) -> RefName {
    format!("workspaces/{ws}/{path}")
        .parse()
        .expect("a valid workspace id and path always make a valid ref name")
}

/// The prefix of every ref of workspace `ws`.
pub fn refs_prefix(ws: &WorkspaceId) -> String {
    format!("workspaces/{ws}/")
}

#[cfg(test)]
mod tests;
