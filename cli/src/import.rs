//! `ctx import claude-code|codex|gemini` and `ctx export`: a runtime's
//! session log into a chain of commits, and a chain back out in any format.
//!
//! `ctx import codex` (a Codex CLI rollout, `codex-rollout-v1`) and `ctx
//! import gemini` (a Gemini CLI session file, `gemini-cli-v1`) cut the file
//! into one delta per turn ([`ctx_core::format::codex_segments`],
//! [`ctx_core::format::gemini_segments`]) the same way.
//!
//! Import cuts the transcript with [`ctx_core::format::segments`]: one
//! `claude-code-v1` delta per turn and, at each `compact_boundary`, a
//! compaction commit holding the boundary and its summary, checkpointed
//! after the turns before it. Each commit's `created_at` is the newest
//! entry time in it, so importing the same transcript again returns the
//! same commits and writes nothing twice. Export materializes with
//! `stop: root` by default: for a Claude Code chain, the original
//! transcript byte for byte.

use base64::Engine as _;
use std::path::PathBuf;

use chrono::{DateTime, Duration, Utc};
use clap::{Args, Subcommand};
use ctx_core::format::{
    FormatId, Formats, Segment, SegmentKind, codex_segments, gemini_segments, segments,
};
use ctx_core::wire::{CheckpointRequest, SetRefRequest};
use ctx_core::wire::{CommitType, Trigger};
use ctx_core::{CommitId, Error, ErrorKind, Principal, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::commands::{materialize, ref_name, rev, wire_value};
use crate::{Conn, print_json};

/// What to import.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// A Claude Code transcript (JSONL): one commit per turn, a compaction
    /// commit per compact_boundary; prints the tip's ctx id.
    ClaudeCode(SessionArgs),
    /// An OpenAI Codex CLI rollout (JSONL), e.g.
    /// ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl: one commit per turn, a
    /// compaction commit per `compacted` record; prints the tip's ctx id.
    Codex(SessionArgs),
    /// A Gemini CLI session file (JSONL), e.g.
    /// ~/.gemini/tmp/<project>/chats/session-*.jsonl: one commit per turn;
    /// prints the tip's ctx id.
    Gemini(SessionArgs),
}

/// `ctx import claude-code`, `ctx import codex` and `ctx import gemini`.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// The session file (a Claude Code transcript is e.g.
    /// ~/.claude/projects/<project>/<session>.jsonl).
    file: PathBuf,
    /// Who the session belongs to (default: the runtime: `claude-code`,
    /// `codex` or `gemini`).
    #[arg(long, env = "CTX_PRINCIPAL", value_parser = crate::parse_principal)]
    principal: Option<String>,
    /// Point this ref at the tip (created, or moved forward if it points at
    /// a commit of this import).
    #[arg(long = "ref")]
    ref_name: Option<String>,
    /// Continue this commit (or ref) instead of starting a new root.
    #[arg(long)]
    parent: Option<String>,
    /// The context template recorded on each commit (default: the runtime).
    #[arg(long, env = "CTX_TEMPLATE")]
    template: Option<String>,
    /// The machine the session ran on.
    #[arg(long)]
    machine: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

impl SessionArgs {
    fn plan(self, (runtime, format): (&str, &'static str), cut: Cut) -> Plan {
        Plan {
            file: self.file,
            principal: self.principal.unwrap_or_else(|| runtime.to_owned()),
            ref_name: self.ref_name,
            parent: self.parent,
            template: self.template.unwrap_or_else(|| runtime.to_owned()),
            machine: self.machine,
            conn: self.conn,
            format,
            cut,
        }
    }
}

/// The runtimes `ctx import` reads: each subcommand and its format.
const RUNTIMES: [(&str, &str); 3] = [
    ("claude-code", "claude-code-v1"),
    ("codex", "codex-rollout-v1"),
    ("gemini", "gemini-cli-v1"),
];

/// How many messages `format`'s codec reads in `bytes` (0 when it refuses
/// them).
fn messages_in(formats: &Formats, format: &str, bytes: &[u8]) -> u64 {
    format
        .parse::<FormatId>()
        .ok()
        .and_then(|id| formats.codec(&id).validate(bytes).ok())
        .and_then(|checked| checked.counts.messages)
        .unwrap_or(0)
}

/// Refuses, before anything is written, a file that is not a session of
/// the plan's runtime: one in which its format reads no message (every
/// line kept as written), or fewer than another runtime's format reads
/// (Codex's reads an unknown log's lines as one message of opaque items).
/// The error names the import that reads the file, when one does.
///
/// # Errors
/// `Invalid` on `file`.
fn refuse_without_messages(a: &Plan, bytes: &[u8]) -> Result<()> {
    let formats = Formats::default();
    let own = messages_in(&formats, a.format, bytes);
    let better = RUNTIMES
        .iter()
        .filter(|(_, f)| *f != a.format)
        .map(|&(cmd, f)| (cmd, f, messages_in(&formats, f, bytes)))
        .filter(|&(_, _, n)| n > own)
        .max_by_key(|&(_, _, n)| n);
    let file = a.file.display();
    let format = a.format;
    match better {
        None if own > 0 => Ok(()),
        None => Err(Error::invalid(
            "file",
            format!("{file} holds no message of {format}, so nothing was imported"),
        )),
        Some((cmd, f, n)) => Err(Error::invalid(
            "file",
            format!(
                "{file} is not a {format} session: that format reads {own} message(s) in it, {f} reads {n}, so nothing was imported; import it with ctx import {cmd} {file}"
            ),
        )),
    }
}

/// How a format's file is cut into commits.
type Cut = fn(&[u8]) -> Result<Vec<Segment>>;

/// One import, whichever runtime the file comes from.
struct Plan {
    file: PathBuf,
    principal: String,
    ref_name: Option<String>,
    parent: Option<String>,
    template: String,
    machine: Option<String>,
    conn: Conn,
    format: &'static str,
    cut: Cut,
}

/// `ctx export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The commit or ref.
    rev: String,
    #[arg(long, value_parser = crate::parse_format,
          help = crate::known_formats("The format wanted (default: the commit's)."))]
    format: Option<String>,
    /// root (default: the whole history), compaction, or a ctx-… ancestor.
    #[arg(long, default_value = "root", value_parser = crate::parse_stop)]
    stop: String,
    /// Write here instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    conn: Conn,
}

/// What `ctx import --json` prints (fields in the order of their names).
#[derive(Serialize)]
struct Imported {
    /// The commits, oldest first.
    commits: Vec<CommitId>,
    /// How many of them are compactions.
    compactions: u64,
    /// How many are deltas.
    deltas: u64,
    /// The last one.
    tip: CommitId,
    /// What was stored as written although it looks wrong (tool results
    /// answering no tool use, after interrupted calls or rewinds).
    warnings: Vec<String>,
}

/// Runs `ctx import`.
///
/// # Errors
/// `Invalid` for an unreadable or invalid transcript; the server's errors.
pub async fn run_import(cmd: ImportCommand) -> Result<()> {
    let [claude, codex, gemini] = RUNTIMES;
    let a: Plan = match cmd {
        ImportCommand::ClaudeCode(a) => a.plan(claude, segments),
        ImportCommand::Codex(a) => a.plan(codex, codex_segments),
        ImportCommand::Gemini(a) => a.plan(gemini, gemini_segments),
    };
    let format: FormatId = a.format.parse()?;
    let bytes = std::fs::read(&a.file)
        .map_err(|e| Error::invalid("file", format!("cannot read {}: {e}", a.file.display())))?;
    let segs = (a.cut)(&bytes)
        .map_err(|e| Error::invalid("file", format!("{}: {}", a.file.display(), e.message)))?;
    if segs.is_empty() {
        return Err(Error::invalid(
            "file",
            format!("{} holds no {} records", a.file.display(), a.format),
        ));
    }
    refuse_without_messages(&a, &bytes)?;
    let c = a.conn.client()?;
    let mut parent = match &a.parent {
        Some(p) => Some(rev(&c, p).await?),
        None => None,
    };
    let principal: Principal = wire_value("principal", &a.principal)?;
    // Drawn on stderr only when it is a terminal.
    let bar = ProgressBar::new(bytes.len() as u64).with_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
            .map_err(|e| Error::internal(format!("progress template: {e}")))?,
    );
    let mut last: Option<DateTime<Utc>> = None;
    let mut ids: Vec<CommitId> = Vec::with_capacity(segs.len());
    let (mut deltas, mut compactions) = (0u64, 0u64);
    let mut warnings: Vec<String> = Vec::new();
    for seg in &segs {
        let at = segment_time(seg).or_else(|| last.map(|l| l + Duration::microseconds(1)));
        last = at;
        let req = CheckpointRequest {
            session_id: session_of(seg.session_id.as_deref()),
            machine: a.machine.clone(),
            // Without any entry time the server's clock is used (and a
            // second import makes new commits).
            created_at: at,
            ..segment_request(
                seg,
                &bytes[seg.range.clone()],
                format.clone(),
                parent,
                Trigger::TurnBoundary,
                &principal,
                &a.template,
            )
        };
        let compaction = req.commit_type == CommitType::Compaction;
        let commit = c.checkpoint(&req).await.map_err(|e| {
            let mut e = e;
            e.message = format!(
                "{} (the entries at bytes {}..{} of {})",
                e.message,
                seg.range.start,
                seg.range.end,
                a.file.display()
            );
            e
        })?;
        for w in &commit.warnings {
            bar.suspend(|| eprintln!("ctx: warning: {w}"));
            warnings.push(w.clone());
        }
        if compaction {
            compactions += 1;
        } else {
            deltas += 1;
        }
        ids.push(commit.commit.id);
        parent = Some(commit.commit.id);
        bar.set_message(format!("{deltas} turns, {compactions} compactions"));
        bar.inc(seg.range.len() as u64);
    }
    bar.finish_and_clear();
    let tip = parent.expect("at least one segment was imported");
    if let Some(name) = &a.ref_name {
        let name = ref_name(name)?;
        let req = match c.get_ref(&name).await {
            Ok(r) if r.target == tip => None,
            Ok(r) if ids.contains(&r.target) => Some(SetRefRequest {
                target: tip,
                expected: Some(r.target),
            }),
            Ok(r) => {
                return Err(Error::conflict(
                    format!(
                        "ref {name} points at {}, which is not part of this import; it was not moved (the tip is {tip})",
                        r.target
                    ),
                    Some(r.target.to_string()),
                ));
            }
            Err(e) if e.kind == ErrorKind::NotFound => Some(SetRefRequest {
                target: tip,
                expected: None,
            }),
            Err(e) => return Err(e),
        };
        if let Some(req) = req {
            c.set_ref(&name, &req).await?;
        }
    }
    if a.conn.json {
        print_json(&Imported {
            commits: ids,
            compactions,
            deltas,
            tip,
            warnings,
        })
    } else {
        eprintln!(
            "imported {} bytes as {deltas} deltas and {compactions} compactions",
            bytes.len()
        );
        outln!("{tip}");
        Ok(())
    }
}

/// The checkpoint of one transcript segment after `parent`, as import and
/// the Claude Code hook cut them: a compaction commit for a compaction
/// segment (unless it would be a root), else a delta with `trigger`; its
/// time is the segment's newest entry's.
///
/// `bytes` go as text, or as `delta_base64` when they are not UTF-8 (a
/// log's bad write, which its format keeps as written or refuses).
pub(crate) fn segment_request(
    seg: &Segment,
    bytes: &[u8],
    format: FormatId,
    parent: Option<CommitId>,
    trigger: Trigger,
    principal: &Principal,
    template: &str,
) -> CheckpointRequest {
    let compaction = seg.kind == SegmentKind::Compaction && parent.is_some();
    let (text, b64) = match std::str::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(_) => (
            "",
            Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        ),
    };
    let mut req = CheckpointRequest {
        parent,
        commit_type: if compaction {
            CommitType::Compaction
        } else {
            CommitType::Delta
        },
        checkpoint: if compaction {
            Trigger::Compaction
        } else {
            trigger
        },
        created_at: segment_time(seg),
        ..CheckpointRequest::new(principal.clone(), template, format, text)
    };
    if let Some(b64) = b64 {
        req.delta = None;
        req.delta_base64 = Some(b64.into());
    }
    req
}

/// The time of a segment's newest entry, if it has one.
fn segment_time(seg: &Segment) -> Option<DateTime<Utc>> {
    seg.timestamp
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Runs `ctx export`.
///
/// # Errors
/// The server's errors; `Unavailable` when the output cannot be written.
pub async fn run_export(a: ExportArgs) -> Result<()> {
    let c = a.conn.client()?;
    let id = rev(&c, &a.rev).await?;
    let req = materialize::request(Some(&a.stop), a.format.as_deref())?;
    let (m, bytes) = c.materialize_and_download(&id, &req).await?;
    materialize::emit(&m, &bytes, a.output.as_ref(), a.conn.json)
}

/// The transcript's session id as a checkpoint takes it; one that cannot
/// name a session (`sessions/<id>`) is left out, with a warning.
fn session_of(id: Option<&str>) -> Option<ctx_core::SessionId> {
    let id = id?;
    match id.parse() {
        Ok(s) => Some(s),
        Err(e) => {
            let e: ctx_core::Error = e;
            eprintln!(
                "warning: the transcript's sessionId is not recorded: {}",
                e.message
            );
            None
        }
    }
}
