//! Workspace files and read_context over the stores.
//!
//! A file is a chain of `raw` commits under its ref
//! ([`crate::workspace::file_ref`]); the version a caller sees is the tip
//! commit's id. A write is a snapshot commit holding the whole content
//! (parent: the previous version, so history shows every version); an
//! append is a delta commit holding only the appended lines, its parent the
//! tip, the ref moved by compare-and-swap in the same store write and the
//! append retried on a lost race, so concurrent appenders never lose a
//! line. Reads start at the nearest snapshot; the log tail of read_context
//! walks back from the tip only until it has its entries.

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::{Delta, NewCommit, Service};
use crate::commit::{Commit, CommitType, Trigger};
use crate::error::{Error, ErrorKind, Result};
use crate::format::FormatId;
use crate::id::{CommitId, Principal, TenantId};
use crate::store::RefMove;
use crate::workspace::context::{self, Context, FileSource, Keep};
use crate::workspace::{FilePath, WorkspaceId, file_ref, refs_prefix};

/// How often a write or append retries after losing a race for the ref.
const MAX_WRITE_ATTEMPTS: usize = 64;
/// Artifact reads in flight at once when reading a file.
const FETCH_CONCURRENCY: usize = 16;
/// The template workspace commits carry.
const TEMPLATE: &str = "workspace";

/// A written version of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileVersion {
    /// The version: the file's tip commit (send it as `If-Match`).
    pub version: CommitId,
    /// The file's size in bytes after a write; the appended bytes after an
    /// append.
    pub size: u64,
}

/// A file of a workspace listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its path in the workspace.
    pub path: FilePath,
    /// Its version (tip commit).
    pub version: CommitId,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A file's content at its current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    /// The bytes.
    pub bytes: Bytes,
    /// The version they are.
    pub version: CommitId,
}

fn principal(ws: &WorkspaceId) -> Principal {
    format!("workspace:{ws}")
        .parse()
        .expect("a workspace id makes a valid principal")
}

/// The error of a stale `If-Match`.
fn stale(path: &FilePath, expected: &CommitId, current: Option<&CommitId>) -> Error {
    let now = current.map_or_else(|| "does not exist".to_owned(), |c| format!("is at {c}"));
    Error::conflict(
        format!("file {path} {now}, not at the version {expected} given in If-Match"),
        current.map(ToString::to_string),
    )
    .with_field("If-Match")
}

/// Checks that every line of an append is one JSON value and returns the
/// bytes to store (ending in a newline).
///
/// # Errors
/// `Invalid` (field `body`) naming the first bad line.
pub fn check_jsonl(body: &[u8]) -> Result<Bytes> {
    let text = std::str::from_utf8(body)
        .map_err(|e| Error::invalid("body", format!("the lines are not UTF-8: {e}")))?;
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Err(Error::invalid(
            "body",
            "nothing to append: send one JSON value per line",
        ));
    }
    for (i, line) in trimmed.split('\n').enumerate() {
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(line) {
            return Err(Error::invalid(
                "body",
                format!("line {} is not one JSON value: {e}", i + 1),
            ));
        }
    }
    let mut out = trimmed.as_bytes().to_vec();
    out.push(b'\n');
    Ok(out.into())
}

impl Service {
    /// The current tip of a file, if it exists.
    async fn file_tip(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
    ) -> Result<Option<CommitId>> {
        Ok(self
            .stores
            .meta
            .get_ref(tenant, &file_ref(ws, path))
            .await?
            .map(|r| r.target))
    }

    /// Records one commit of a file on `tip`, moving the ref from `tip`.
    /// Its `message_count` is the number of lines it adds, which is what
    /// lets a tail read pick the deltas it needs before fetching any.
    #[allow(clippy::too_many_arguments)]
    async fn record_file_commit(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
        tip: Option<CommitId>,
        commit_type: CommitType,
        bytes: Bytes,
        lines: u64,
    ) -> Result<(Commit, bool)> {
        let new = NewCommit {
            parent: tip,
            commit_type,
            checkpoint: Trigger::Explicit,
            message_count: Some(lines),
            ref_move: Some(RefMove {
                name: file_ref(ws, path),
                expected: tip,
            }),
            delta: Delta::Inline(bytes),
            ..NewCommit::new(principal(ws), TEMPLATE, FormatId::raw(), Bytes::new())
        };
        self.record(tenant, new).await
    }

    /// Writes a file's whole content as a new version. With `if_match` the
    /// write is a compare-and-swap on that version; without, it replaces
    /// whatever version is current.
    ///
    /// # Errors
    /// `Conflict` (field `If-Match`, `current` set) when `if_match` is not
    /// the current version; `TooLarge`; `Unavailable`.
    pub async fn put_file(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
        bytes: Bytes,
        if_match: Option<CommitId>,
    ) -> Result<FileVersion> {
        self.limits.check_artifact_size("body", bytes.len())?;
        let size = bytes.len() as u64;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let tip = self.file_tip(tenant, ws, path).await?;
            if let Some(expected) = &if_match
                && tip.as_ref() != Some(expected)
            {
                return Err(stale(path, expected, tip.as_ref()));
            }
            match self
                .record_file_commit(
                    tenant,
                    ws,
                    path,
                    tip,
                    CommitType::Snapshot,
                    bytes.clone(),
                    line_count(&bytes),
                )
                .await
            {
                Ok((c, _)) => {
                    return Ok(FileVersion {
                        version: c.id,
                        size,
                    });
                }
                Err(e) if e.kind == ErrorKind::Conflict => {
                    if let Some(expected) = &if_match {
                        let now = self.file_tip(tenant, ws, path).await?;
                        return Err(stale(path, expected, now.as_ref()));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(busy(path))
    }

    /// Appends JSONL lines to a file (creating it) as one delta commit.
    /// Concurrent appends all land, in some order, each line whole.
    ///
    /// # Errors
    /// `Invalid` (field `body`) for a line that is not one JSON value;
    /// `TooLarge`; `Unavailable`, also after losing the race for the file
    /// too many times.
    pub async fn append_file(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
        body: &[u8],
    ) -> Result<FileVersion> {
        self.limits.check_artifact_size("body", body.len())?;
        let lines = check_jsonl(body)?;
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let tip = match self.file_tip(tenant, ws, path).await? {
                Some(id) => Some(self.show(tenant, &id).await?),
                None => None,
            };
            // A snapshot whose content does not end a line (a file written
            // whole) gets a line break first, so the first line stays whole.
            let bytes = match &tip {
                Some(t) if t.commit_type == CommitType::Snapshot && t.artifact_size > 0 => {
                    let content = self.artifact_of(tenant, t).await?;
                    if content.last() == Some(&b'\n') {
                        lines.clone()
                    } else {
                        let mut v = Vec::with_capacity(lines.len() + 1);
                        v.push(b'\n');
                        v.extend_from_slice(&lines);
                        v.into()
                    }
                }
                _ => lines.clone(),
            };
            let size = bytes.len() as u64;
            match self
                .record_file_commit(
                    tenant,
                    ws,
                    path,
                    tip.map(|t| t.id),
                    CommitType::Delta,
                    bytes,
                    line_count(&lines),
                )
                .await
            {
                // An identical append on the same tip at the same instant
                // is another appender's commit: ours is still to be made.
                Ok((c, true)) => {
                    return Ok(FileVersion {
                        version: c.id,
                        size,
                    });
                }
                Ok((_, false)) => {}
                Err(e) if e.kind == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(busy(path))
    }

    /// A file's content at its current version.
    ///
    /// # Errors
    /// `NotFound`; `Unavailable`.
    pub async fn read_file(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
    ) -> Result<FileContent> {
        self.try_read_file(tenant, ws, path)
            .await?
            .ok_or_else(|| Error::not_found(format!("file {path} in workspace {ws}")))
    }

    /// [`Service::read_file`], `None` when the file does not exist.
    async fn try_read_file(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
    ) -> Result<Option<FileContent>> {
        let Some(tip_id) = self.file_tip(tenant, ws, path).await? else {
            return Ok(None);
        };
        let tip = self.show(tenant, &tip_id).await?;
        let mut chain = self
            .walk(tenant, tip, None, |c| c.commit_type == CommitType::Snapshot)
            .await?;
        chain.reverse();
        let wanted: Vec<_> = chain
            .iter()
            .map(|c| (c.id, c.artifact_ref, c.inline.clone()))
            .collect();
        let parts: Vec<Bytes> = stream::iter(wanted)
            .map(|(id, art, inline)| self.artifact_at(tenant, id, art, inline))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        let bytes = if parts.len() == 1 {
            parts.into_iter().next().unwrap_or_default()
        } else {
            Bytes::from(parts.concat())
        };
        Ok(Some(FileContent {
            bytes,
            version: tip_id,
        }))
    }

    /// Removes a file (its ref; its versions stay in the store until an
    /// erasure removes them). With `if_match`, only from that version.
    ///
    /// # Errors
    /// `NotFound`; `Conflict` (field `If-Match`) when `if_match` is stale.
    pub async fn delete_file(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
        if_match: Option<CommitId>,
    ) -> Result<()> {
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let Some(tip) = self.file_tip(tenant, ws, path).await? else {
                return Err(match &if_match {
                    Some(expected) => stale(path, expected, None),
                    None => Error::not_found(format!("file {path} in workspace {ws}")),
                });
            };
            if let Some(expected) = &if_match
                && &tip != expected
            {
                return Err(stale(path, expected, Some(&tip)));
            }
            match self
                .stores
                .meta
                .delete_ref(tenant, &file_ref(ws, path), &tip)
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if e.kind == ErrorKind::Conflict && if_match.is_none() => {}
                Err(e) if e.kind == ErrorKind::Conflict => {
                    let expected = if_match.as_ref().unwrap_or(&tip);
                    return Err(stale(
                        path,
                        expected,
                        e.current.and_then(|c| c.parse().ok()).as_ref(),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        Err(busy(path))
    }

    /// The files of a workspace whose paths start with `prefix`, by path.
    ///
    /// # Errors
    /// `Unavailable`.
    pub async fn list_files(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        prefix: &str,
    ) -> Result<Vec<FileEntry>> {
        let refs = self
            .stores
            .meta
            .list_refs(
                tenant,
                &format!("{}{prefix}", refs_prefix(ws)),
                None,
                self.limits.max_ref_list,
            )
            .await?;
        let strip = refs_prefix(ws).len();
        Ok(refs
            .into_iter()
            .filter_map(|r| {
                Some(FileEntry {
                    path: r.name.as_str().get(strip..)?.parse().ok()?,
                    version: r.target,
                    updated_at: r.updated_at,
                })
            })
            .collect())
    }

    /// The first-turn context of workspace `ws` (the shape of
    /// docs/workspaces.md).
    ///
    /// # Errors
    /// `Unavailable` when the store fails; missing files are not errors.
    pub async fn read_context(&self, tenant: &TenantId, ws: &WorkspaceId) -> Result<Context> {
        context::assemble(&StoreSource {
            service: self,
            tenant,
            ws,
        })
        .await
    }

    /// At most `n` of the last lines of a file `keep` accepts, newest
    /// first, reading only the deltas that hold them: each commit of a file
    /// records how many lines it adds (`message_count`), so the walk back
    /// from the tip (commit metadata only, a page per store query) stops at
    /// the commit that completes `n` lines (or at the snapshot the file
    /// starts at), and only those commits' artifacts are fetched,
    /// concurrently. Lines `keep` refuses are made up for by another round
    /// from where the last one stopped. Appends are whole lines, so a line
    /// never spans two commits.
    async fn file_tail(
        &self,
        tenant: &TenantId,
        ws: &WorkspaceId,
        path: &FilePath,
        n: usize,
        keep: &Keep,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let Some(tip_id) = self.file_tip(tenant, ws, path).await? else {
            return Ok(out);
        };
        let mut from = self.show(tenant, &tip_id).await?;
        let mut first = true;
        loop {
            let need = (n - out.len()) as u64;
            let mut seen = 0u64;
            let mut skip_from = !first;
            let mut commits = self
                .walk(tenant, from.clone(), None, |c| {
                    if std::mem::take(&mut skip_from) {
                        return false;
                    }
                    // A commit that says it adds nothing still costs a read.
                    seen += c.message_count.max(1);
                    seen >= need || c.commit_type == CommitType::Snapshot
                })
                .await?;
            if !first {
                commits.remove(0);
            }
            let Some(last) = commits.last().cloned() else {
                return Ok(out);
            };
            let wanted: Vec<_> = commits
                .iter()
                .map(|c| (c.id, c.artifact_ref, c.inline.clone()))
                .collect();
            let parts: Vec<Bytes> = stream::iter(wanted)
                .map(|(id, art, inline)| self.artifact_at(tenant, id, art, inline))
                .buffered(FETCH_CONCURRENCY)
                .try_collect()
                .await?;
            for part in &parts {
                let Ok(text) = std::str::from_utf8(part) else {
                    continue;
                };
                for line in text.lines().rev() {
                    if keep(line) {
                        out.push(line.to_owned());
                        if out.len() == n {
                            return Ok(out);
                        }
                    }
                }
            }
            if last.commit_type == CommitType::Snapshot || last.parent.is_none() {
                return Ok(out);
            }
            from = last;
            first = false;
        }
    }
}

/// Lines in `bytes`: line breaks, plus a last line without one.
fn line_count(bytes: &[u8]) -> u64 {
    let breaks = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    breaks + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

fn busy(path: &FilePath) -> Error {
    Error::unavailable(format!(
        "file {path} kept changing while this request wrote it; retry"
    ))
}

/// The store as read_context's [`FileSource`]: the workspace's files, and
/// the tenant's `tastes` workspace.
struct StoreSource<'a> {
    service: &'a Service,
    tenant: &'a TenantId,
    ws: &'a WorkspaceId,
}

impl StoreSource<'_> {
    async fn text(&self, ws: &WorkspaceId, path: &FilePath) -> Result<Option<String>> {
        Ok(self
            .service
            .try_read_file(self.tenant, ws, path)
            .await?
            .and_then(|f| String::from_utf8(f.bytes.into()).ok()))
    }
}

#[async_trait]
impl FileSource for StoreSource<'_> {
    async fn workspace_text(&self, path: &FilePath) -> Result<Option<String>> {
        self.text(self.ws, path).await
    }

    async fn taste_text(&self, path: &FilePath) -> Result<Option<String>> {
        self.text(&WorkspaceId::tastes(), path).await
    }

    async fn last_lines(&self, path: &FilePath, n: usize, keep: &Keep) -> Result<Vec<String>> {
        self.service
            .file_tail(self.tenant, self.ws, path, n, keep)
            .await
    }
}

#[cfg(test)]
mod tests;
