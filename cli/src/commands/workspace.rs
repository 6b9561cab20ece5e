//! `ctx workspace push|cat|ls|log` and `ctx read-context`: workspace files
//! and the first-turn context, from the server or (`--dir`) from local
//! files with the same assembly code.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use ctx_core::wire::Context;
use ctx_core::workspace::context::assemble;
use ctx_core::workspace::dir::{DirSource, list_files};
use ctx_core::workspace::{FilePath, WorkspaceId};
use ctx_core::{Error, ErrorKind, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::{Conn, print_json};

/// `ctx workspace …`.
#[derive(Debug, Subcommand)]
pub(crate) enum WorkspaceCommand {
    /// Upload a local workspace directory (and a tastes directory): only
    /// files that differ from the server's are written.
    Push {
        /// The workspace directory.
        dir: PathBuf,
        /// The workspace to push into.
        #[arg(long = "workspace", short = 'w')]
        workspace: String,
        /// A tastes directory (`_default.md`, `<genre>.md`), pushed into the
        /// tenant's `tastes` workspace.
        #[arg(long)]
        tastes: Option<PathBuf>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Write a file's bytes to stdout.
    Cat {
        /// The workspace.
        workspace: String,
        /// The file's path in it.
        path: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The files of a workspace.
    Ls {
        /// The workspace.
        workspace: String,
        /// Only paths that start with this.
        #[arg(long, default_value = "")]
        prefix: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// The versions of a file, newest first.
    Log {
        /// The workspace.
        workspace: String,
        /// The file's path in it.
        path: String,
        /// How many versions.
        #[arg(short = 'n', long, default_value_t = 50)]
        max_count: usize,
        #[command(flatten)]
        conn: Conn,
    },
}

fn ws_id(s: &str) -> Result<WorkspaceId> {
    s.parse().map_err(|e: Error| e.with_field("ws"))
}

fn file_path(s: &str) -> Result<FilePath> {
    s.parse().map_err(|e: Error| e.with_field("path"))
}

/// Runs `ctx workspace …`.
///
/// # Errors
/// `Invalid` for bad names or directories; the server's errors.
pub(crate) async fn run(command: WorkspaceCommand) -> Result<()> {
    match command {
        WorkspaceCommand::Push {
            dir,
            workspace,
            tastes,
            conn,
        } => push(&dir, &workspace, tastes.as_deref(), &conn).await,
        WorkspaceCommand::Cat {
            workspace,
            path,
            conn,
        } => {
            let (bytes, _) = conn
                .client()?
                .get_file(&ws_id(&workspace)?, &file_path(&path)?)
                .await?;
            crate::out::write(&bytes)
        }
        WorkspaceCommand::Ls {
            workspace,
            prefix,
            conn,
        } => {
            let list = conn
                .client()?
                .list_files(&ws_id(&workspace)?, &prefix)
                .await?;
            if conn.json {
                return print_json(&list);
            }
            for f in list.files {
                outln!("{}  {}  {}", f.version, f.updated_at.to_rfc3339(), f.path);
            }
            Ok(())
        }
        WorkspaceCommand::Log {
            workspace,
            path,
            max_count,
            conn,
        } => {
            let c = conn.client()?;
            let (_, version) = c.get_file(&ws_id(&workspace)?, &file_path(&path)?).await?;
            let h = c.history(&version, Some(max_count)).await?;
            if conn.json {
                return print_json(&h);
            }
            for commit in h.commits {
                let what = match commit.commit_type {
                    ctx_core::wire::CommitType::Snapshot => "write",
                    _ => "append",
                };
                outln!(
                    "{}  {}  {what:<6}  {} bytes",
                    commit.id,
                    commit.created_at.to_rfc3339(),
                    commit.artifact_size
                );
            }
            Ok(())
        }
    }
}

/// What a push did, per file.
#[derive(Default)]
struct Pushed {
    written: Vec<String>,
    unchanged: Vec<String>,
}

/// Uploads `dir` into `workspace` and `tastes` into `tastes`: each file
/// the server lacks or holds differently is written over the version read
/// (so a concurrent change is a conflict, not lost).
async fn push(dir: &Path, workspace: &str, tastes: Option<&Path>, conn: &Conn) -> Result<()> {
    let ws = ws_id(workspace)?;
    let mut plan: Vec<(WorkspaceId, FilePath, PathBuf)> = Vec::new();
    let mut sources = vec![(ws.clone(), dir)];
    if let Some(t) = tastes {
        sources.push((WorkspaceId::tastes(), t));
    }
    for (target, d) in sources {
        if !d.is_dir() {
            return Err(Error::invalid(
                "dir",
                format!("{} is not a directory", d.display()),
            ));
        }
        let (good, bad) = list_files(d)?;
        if let Some((file, e)) = bad.first() {
            return Err(Error::invalid(
                "dir",
                format!(
                    "{} cannot be a workspace file ({}); nothing was pushed",
                    file.display(),
                    e.message
                ),
            ));
        }
        plan.extend(good.into_iter().map(|(p, f)| (target.clone(), p, f)));
    }
    let c = conn.client()?;
    // Drawn on stderr only when it is a terminal.
    let bar = ProgressBar::new(plan.len() as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .map_err(|e| Error::internal(format!("progress template: {e}")))?,
    );
    let mut done = Pushed::default();
    for (target, path, file) in &plan {
        bar.set_message(path.to_string());
        let local = std::fs::read(file)
            .map_err(|e| Error::invalid("dir", format!("cannot read {}: {e}", file.display())))?;
        let remote = match c.get_file(target, path).await {
            Ok(r) => Some(r),
            Err(e) if e.kind == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let name = format!("{target}/{path}");
        match remote {
            Some((bytes, _)) if bytes == local => done.unchanged.push(name),
            Some((_, version)) => {
                c.put_file(target, path, local, Some(&version)).await?;
                done.written.push(name);
            }
            None => {
                c.put_file(target, path, local, None).await?;
                done.written.push(name);
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if conn.json {
        return print_json(&json!({"written": done.written, "unchanged": done.unchanged}));
    }
    for w in &done.written {
        outln!("wrote {w}");
    }
    eprintln!(
        "pushed {} file(s); {} unchanged",
        done.written.len(),
        done.unchanged.len()
    );
    Ok(())
}

/// Runs `ctx read-context`: from the server (`workspace`) or from local
/// directories (`dir`, `tastes`), as JSON or as text.
///
/// # Errors
/// `Invalid` when neither or both sources are given; the server's errors.
pub(crate) async fn read_context(
    workspace: Option<&str>,
    dir: Option<&Path>,
    tastes: Option<&Path>,
    conn: &Conn,
) -> Result<()> {
    let ctx = match (workspace, dir) {
        (Some(ws), None) => {
            let (c, ws) = (conn.client()?, ws_id(ws)?);
            let ctx = c.read_context(&ws).await?;
            // A workspace exists by its files; one without any reads as a
            // fresh workspace (seed 002: the first turn must work there),
            // so a mistyped name is only told, not refused.
            if c.list_files(&ws, "").await?.files.is_empty() {
                eprintln!(
                    "ctx: workspace {ws} has no file, so its context is empty: a fresh \
                     workspace, or a mistyped name? (`ctx workspace ls WS` lists a \
                     workspace's files, `ctx workspace push DIR --workspace WS` adds them)"
                );
            }
            ctx
        }
        (None, Some(d)) => {
            if !d.is_dir() {
                return Err(Error::invalid(
                    "dir",
                    format!("{} is not a directory", d.display()),
                ));
            }
            assemble(&DirSource::new(d, tastes.map(Path::to_path_buf)))
                .await?
                .into()
        }
        _ => {
            return Err(Error::invalid(
                "workspace",
                "give a workspace (from the server) or --dir PATH (local files), not both",
            ));
        }
    };
    if conn.json {
        return print_json(&ctx);
    }
    out!("{}", pretty(&ctx));
    Ok(())
}

/// The context as text for a person, in read_context's order.
pub(crate) fn pretty(ctx: &Context) -> String {
    let mut out = String::new();
    let mut section = |title: &str, body: &str| {
        out.push_str(&format!("== {title} ==\n"));
        let body = body.trim_end();
        if body.is_empty() {
            out.push_str("(none)\n\n");
        } else {
            out.push_str(body);
            out.push_str("\n\n");
        }
    };
    section("tastes: default", &ctx.tastes.default);
    for (genre, text) in &ctx.tastes.genres {
        section(&format!("tastes: {genre}"), text);
    }
    let conflicts: Vec<String> = ctx
        .tastes
        .conflicts
        .iter()
        .map(|c| format!("- {:?} in {}", c.point, c.files.join(", ")))
        .collect();
    section("taste conflicts", &conflicts.join("\n"));
    section(
        &format!("brief (tastes: {})", ctx.brief.tastes.join(", ")),
        &ctx.brief.intent,
    );
    section(
        if ctx.notes.truncated {
            "notes (truncated)"
        } else {
            "notes"
        },
        &ctx.notes.summary,
    );
    let log: Vec<String> = ctx
        .recent_log
        .iter()
        .map(|e| {
            format!(
                "{}  {}  {}",
                e.timestamp,
                e.op,
                serde_json::Value::Object(e.details.clone())
            )
        })
        .collect();
    section("recent log (newest first)", &log.join("\n"));
    let gaps: Vec<String> = ctx
        .recent_gaps
        .iter()
        .map(|g| {
            format!(
                "{}  [{}]  {}",
                g.timestamp, g.intent_category, g.description
            )
        })
        .collect();
    section("recent gaps (newest first)", &gaps.join("\n"));
    out
}
