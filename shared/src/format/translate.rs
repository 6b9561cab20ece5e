//! Translation of a chain's parts into the format a caller asked for, in the
//! order of preference of docs/adr/0003-formats-and-translation.md; the
//! first tier that applies wins:
//!
//! 1. **native**: every part is already in the target format; the codec
//!    concatenates them (byte-exact for `claude-code-v1` and `raw`).
//! 2. **field-level**: every other part is an older or newer version of the
//!    target's runtime with a field-by-field mapping (bureau-agent v1 ↔ v2).
//! 3. **cross-runtime**: every part decodes into the canonical model, the
//!    target encodes it losing nothing it could carry, and decoding the
//!    result gives back the same conversation (normalized: system prompts
//!    apart, adjacent same-role messages merged, what the target cannot
//!    carry at all, such as thinking in OpenAI chat, left out).
//! 4. **narrative**: no faithful mapping exists (an image inside a tool
//!    result for OpenAI, a block of another API, ...): the conversation is
//!    rendered as a readable account ([`super::canonical::narrative`]) in
//!    one user message of the target.
//! 5. **raw**: a part is in a format ctx has no codec for, or the target
//!    is one: the raw bytes are handed over with a description of their
//!    format, never guessed at.
//!
//! A tool result the target would refuse where it stands (its call is not
//! in the context, after a compaction, a rewind or an imported fragment)
//! does not degrade the conversation: it is carried as text saying what it
//! is ([`canonical::Orphans::carry_as_text`]) and every other message stays
//! as it was, in the cross-runtime tier. What a translation did not carry
//! as it was is its [`Fidelity`] report.

use base64::Engine as _;
use bytes::Bytes;

use std::collections::BTreeSet;

use super::canonical::{self, Block, Conversation, Message, Role};
use super::{Carries, FormatId, Formats};
use crate::error::{Error, Result};

/// How a materialization was produced; on the wire its kebab-case name
/// (`native`, `field-level`, `cross-runtime`, `narrative`, `raw`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Every part was in the target format.
    Native,
    /// Mapped field by field between versions of one runtime's format.
    FieldLevel,
    /// Translated faithfully through the canonical model.
    CrossRuntime,
    /// Rendered as a narrative of the conversation.
    Narrative,
    /// Raw bytes with a description of their format.
    Raw,
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Tier {
    /// The wire name, as in `MaterializeResponse::tier`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Native => "native",
            Tier::FieldLevel => "field-level",
            Tier::CrossRuntime => "cross-runtime",
            Tier::Narrative => "narrative",
            Tier::Raw => "raw",
        }
    }
}

/// At most this many changes are listed in a [`Fidelity`] report; the
/// counts cover them all.
pub const MAX_CHANGES: usize = 32;

/// Longest reason or note in a [`Fidelity`] report, in characters.
const MAX_REASON_CHARS: usize = 300;

/// What a translation did not carry as it was: messages kept, converted and
/// dropped, and each change with its reason. Messages are those ctx read
/// from the chain (the canonical conversation: a Claude Code transcript's
/// file snapshots and titles are none).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Fidelity {
    /// Messages carried as they were.
    pub kept: u64,
    /// Messages carried in another form: a tool result as text, a message
    /// without its thinking, every message of a narrative.
    pub converted: u64,
    /// Messages left out: the target holds nothing of what they are.
    pub dropped: u64,
    /// Why the tier is not a better one (empty when nothing forced it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The changes, in message order, at most 32 (`unlisted` counts the
    /// rest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FidelityChange>,
    /// Changes not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted: u64,
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether a message was carried in another form or left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FidelityChangeKind {
    /// Carried in another form.
    Converted,
    /// Left out.
    Dropped,
}

impl std::fmt::Display for FidelityChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FidelityChangeKind::Converted => "converted",
            FidelityChangeKind::Dropped => "dropped",
        })
    }
}

/// One message a translation did not carry as it was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FidelityChange {
    /// Converted or dropped.
    pub kind: FidelityChangeKind,
    /// The message's position in the chain's conversation, from 0.
    pub message: u64,
    /// Where it was stored: the commit and the line or index in its delta.
    pub at: String,
    /// The tool call a converted tool result names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Why, and what became of it.
    pub reason: String,
}

fn bounded(mut s: String) -> String {
    if let Some((cut, _)) = s.char_indices().nth(MAX_REASON_CHARS) {
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Builds a [`Fidelity`] report over `total` messages from its changes.
struct Report {
    total: usize,
    changes: Vec<FidelityChange>,
}

impl Report {
    fn finish(mut self, note: String) -> Fidelity {
        self.changes.sort_by_key(|c| c.message);
        let dropped: BTreeSet<u64> = self
            .changes
            .iter()
            .filter(|c| c.kind == FidelityChangeKind::Dropped)
            .map(|c| c.message)
            .collect();
        let converted: BTreeSet<u64> = self
            .changes
            .iter()
            .filter(|c| c.kind == FidelityChangeKind::Converted && !dropped.contains(&c.message))
            .map(|c| c.message)
            .collect();
        let unlisted = self.changes.len().saturating_sub(MAX_CHANGES) as u64;
        self.changes.truncate(MAX_CHANGES);
        for c in &mut self.changes {
            c.reason = bounded(std::mem::take(&mut c.reason));
            c.at = bounded(std::mem::take(&mut c.at));
            c.tool_use_id = c.tool_use_id.take().map(bounded);
        }
        Fidelity {
            kept: (self.total - dropped.len() - converted.len()) as u64,
            converted: converted.len() as u64,
            dropped: dropped.len() as u64,
            note: bounded(note),
            changes: self.changes,
            unlisted,
        }
    }
}

/// Where each message of a decoded chain came from.
struct Places {
    /// (first message, the part's origin, its format), per part.
    parts: Vec<(usize, String, FormatId)>,
    /// Each message's element in its part.
    origins: Vec<usize>,
}

impl Places {
    fn at(&self, formats: &Formats, message: usize) -> String {
        let i = self.parts.partition_point(|(start, ..)| *start <= message);
        let Some((_, origin, format)) = i.checked_sub(1).and_then(|i| self.parts.get(i)) else {
            return format!("message {message}");
        };
        let place = formats.codec(format).place(self.origins[message]);
        format!("{origin}, {place}")
    }
}

/// One artifact of a chain, oldest first.
#[derive(Debug, Clone)]
pub struct Part {
    /// Where it came from (a commit id), for descriptions and errors.
    pub origin: String,
    /// Its format.
    pub format: FormatId,
    /// Its bytes.
    pub bytes: Bytes,
}

/// A translated context.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// The bytes, in the target format.
    pub bytes: Bytes,
    /// The tier that produced them.
    pub tier: Tier,
    /// Why a lower tier was used (empty for native).
    pub note: String,
    /// What was not carried as it was: for a translation through the
    /// canonical model (`None` for native and field-level, which carry
    /// every message, and for a target ctx cannot write).
    pub fidelity: Option<Fidelity>,
}

fn undecodable(p: &Part, e: &Error) -> Error {
    Error::internal(format!(
        "{} holds bytes that are not valid {}: {}",
        p.origin, p.format, e.message
    ))
}

/// Turns `parts` into one context in `target`.
///
/// Takes the parts: a cross-runtime translation drops each part's bytes
/// once it is decoded, and checks the round trip on normalized copies
/// built by consuming what they are made of, so a large context is not
/// held in more forms at once than the check needs.
///
/// # Errors
/// `Invalid` naming `format` for a target no codec claims and no part is
/// in ([`Formats::unknown`]: a context in a format ctx has no codec for
/// still reads in its own format, as stored); `Internal` when a stored
/// part does not decode as its own format (it was validated when it was
/// checkpointed).
pub fn translate(formats: &Formats, parts: Vec<Part>, target: &FormatId) -> Result<Translated> {
    let tcodec = formats.codec(target);
    if !formats.is_known(target) && !parts.iter().any(|p| &p.format == target) {
        return Err(formats.unknown(target));
    }
    if parts.iter().all(|p| &p.format == target) {
        let bytes: Vec<Bytes> = parts.into_iter().map(|p| p.bytes).collect();
        return Ok(Translated {
            bytes: tcodec.concat(&bytes)?,
            tier: Tier::Native,
            note: String::new(),
            fidelity: None,
        });
    }
    if !tcodec.structured() {
        return Ok(raw_frame(formats, &parts, target));
    }
    if let Some(t) = field_level(formats, &parts, target)? {
        return Ok(t);
    }
    // The parts' formats, for a narrative's account of where it came from
    // (the parts themselves are dropped as they are decoded).
    let mut sources: Vec<FormatId> = Vec::new();
    for p in &parts {
        if !sources.contains(&p.format) {
            sources.push(p.format.clone());
        }
    }
    let mut conv = Conversation::default();
    let mut opaque = Vec::new();
    let mut places = Places {
        parts: Vec::new(),
        origins: Vec::new(),
    };
    let mut report = Report {
        total: 0,
        changes: Vec::new(),
    };
    for p in parts {
        let codec = formats.codec(&p.format);
        places
            .parts
            .push((conv.messages.len(), p.origin.clone(), p.format.clone()));
        if codec.structured() {
            let c = codec
                .to_canonical(&p.bytes)
                .map_err(|e| undecodable(&p, &e))?;
            conv.messages.extend(c.messages);
        } else {
            opaque.push(p.format.to_string());
            report.changes.push(FidelityChange {
                kind: FidelityChangeKind::Converted,
                message: conv.messages.len() as u64,
                at: p.origin.clone(),
                tool_use_id: None,
                reason: format!(
                    "ctx has no codec for {}: its bytes are carried as text with a description",
                    p.format
                ),
            });
            conv.messages.push(Message::new(
                Role::User,
                vec![Block::text(describe_raw(formats, &p))],
            ));
        }
    }
    places.origins = conv.messages.iter().map(|m| m.origin).collect();
    report.total = conv.messages.len();
    if !opaque.is_empty() {
        let enc = tcodec.encode_canonical(&conv)?;
        let note = format!("ctx has no codec for {}", opaque.join(", "));
        return Ok(Translated {
            bytes: enc.bytes,
            tier: Tier::Raw,
            fidelity: Some(report.finish(note.clone())),
            note,
        });
    }
    let mut enc = tcodec.encode_canonical(&conv)?;
    // What the target holds in another form or not at all, by the
    // messages as decoded.
    report
        .changes
        .extend(uncarried(&conv, tcodec.carries(), target, |m| {
            places.at(formats, m)
        }));
    // Tool calls without their result, which an API refuses, are carried
    // as text where they stood (no message goes, so the indices the
    // report names stay those of the conversation as decoded).
    // Orphaned results are found first, so that a result whose call is
    // carried as text below still says where its call was.
    let orphans = canonical::find_orphans(&conv);
    if tcodec.pairs_tool_results() {
        let unanswered = canonical::find_unanswered(&conv);
        if !unanswered.is_empty() {
            conv = canonical::carry_unanswered_as_text(conv, &unanswered);
            enc = tcodec.encode_canonical(&conv)?;
            report
                .changes
                .extend(unanswered.into_iter().map(|u| FidelityChange {
                    kind: FidelityChangeKind::Converted,
                    message: u.message as u64,
                    at: places.at(formats, u.message),
                    reason: format!("{}: carried as text saying so", u.reason()),
                    tool_use_id: Some(u.tool_use_id),
                }));
        }
    }
    // Tool results the target refuses where they stand are carried as
    // text, the rest as it was.
    if !enc.lost.is_empty() && !orphans.is_empty() {
        conv = orphans.carry_as_text(conv);
        enc = tcodec.encode_canonical(&conv)?;
        report
            .changes
            .extend(orphans.found.into_iter().map(|o| FidelityChange {
                kind: FidelityChangeKind::Converted,
                message: o.message as u64,
                at: places.at(formats, o.message),
                reason: format!("{}: carried as text saying so", o.reason()),
                tool_use_id: Some(o.tool_use_id),
            }));
    }
    let why = if let Some(first) = enc.lost.first() {
        Some(format!(
            "{target} cannot hold it faithfully ({first}{})",
            if enc.lost.len() > 1 {
                format!(", and {} more", enc.lost.len() - 1)
            } else {
                String::new()
            }
        ))
    } else {
        let back = tcodec.to_canonical(&enc.bytes).map_err(|e| {
            Error::internal(format!(
                "the {target} translation does not decode: {}",
                e.message
            ))
        })?;
        let carries = tcodec.carries();
        let back = canonical::normalize_owned(back, carries);
        (back != canonical::normalize(&conv, carries)).then(|| {
            format!("its {target} translation does not read back as the same conversation")
        })
    };
    match why {
        None => {
            let note = if report.changes.is_empty() {
                String::new()
            } else {
                format!("{target} cannot hold every message as it was")
            };
            Ok(Translated {
                bytes: enc.bytes,
                tier: Tier::CrossRuntime,
                fidelity: Some(report.finish(note.clone())),
                note,
            })
        }
        Some(why) => {
            let sources: Vec<String> = sources
                .iter()
                .map(|f| format!("{f} ({})", formats.codec(f).describe()))
                .collect();
            let text = canonical::narrative(&conv, &sources.join(" and "), &why);
            drop(conv);
            let story = Conversation {
                messages: vec![Message::new(Role::User, vec![Block::text(text)])],
            };
            let fidelity = Fidelity {
                kept: 0,
                converted: report.total as u64,
                dropped: 0,
                note: bounded(why.clone()),
                changes: Vec::new(),
                unlisted: 0,
            };
            Ok(Translated {
                bytes: tcodec.encode_canonical(&story)?.bytes,
                tier: Tier::Narrative,
                note: why,
                fidelity: Some(fidelity),
            })
        }
    }
}

/// The messages of `conv` that a target carrying `carries` holds in
/// another form or not at all: system prompts, thinking, a tool result's
/// error flag.
fn uncarried(
    conv: &Conversation,
    carries: Carries,
    target: &FormatId,
    at: impl Fn(usize) -> String,
) -> Vec<FidelityChange> {
    let mut out = Vec::new();
    let mut change = |kind, i: usize, tool_use_id: Option<&String>, reason: String| {
        out.push(FidelityChange {
            kind,
            message: i as u64,
            at: at(i),
            tool_use_id: tool_use_id.cloned(),
            reason,
        });
    };
    for (i, m) in conv.messages.iter().enumerate() {
        if m.role == Role::System {
            if !carries.system {
                change(
                    FidelityChangeKind::Dropped,
                    i,
                    None,
                    format!("a system prompt: {target} holds none"),
                );
            }
            continue;
        }
        let thinking =
            |b: &Block| matches!(b, Block::Thinking { .. } | Block::RedactedThinking { .. });
        if !carries.thinking && m.content.iter().any(thinking) {
            let rest = m
                .content
                .iter()
                .any(|b| !thinking(b) && !matches!(b, Block::Text { text } if text.is_empty()));
            if rest {
                change(
                    FidelityChangeKind::Converted,
                    i,
                    None,
                    format!("its thinking is left out: {target} does not carry thinking"),
                );
            } else {
                change(
                    FidelityChangeKind::Dropped,
                    i,
                    None,
                    format!("only thinking: {target} does not carry thinking"),
                );
            }
        }
        if !carries.tool_errors {
            for b in &m.content {
                if let Block::ToolResult {
                    tool_use_id,
                    is_error: true,
                    ..
                } = b
                {
                    change(
                        FidelityChangeKind::Converted,
                        i,
                        Some(tool_use_id),
                        format!(
                            "{target} has no error flag: the failed result is written after {:?}",
                            canonical::ERROR_PREFIX
                        ),
                    );
                }
            }
        }
    }
    out
}

fn field_level(formats: &Formats, parts: &[Part], target: &FormatId) -> Result<Option<Translated>> {
    let tcodec = formats.codec(target);
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        if &p.format == target {
            out.push(p.bytes.clone());
            continue;
        }
        let codec = formats.codec(&p.format);
        if !formats.is_known(&p.format) || codec.runtime() != tcodec.runtime() {
            return Ok(None);
        }
        match codec.field_level(target, &p.bytes) {
            Some(mapped) => out.push(mapped.map_err(|e| undecodable(p, &e))?),
            None => return Ok(None),
        }
    }
    Ok(Some(Translated {
        bytes: tcodec.concat(&out)?,
        tier: Tier::FieldLevel,
        note: String::new(),
        fidelity: None,
    }))
}

fn format_description(formats: &Formats, format: &FormatId) -> String {
    if formats.is_known(format) {
        formats.codec(format).describe().to_owned()
    } else {
        "a format ctx has no codec for; its bytes are kept exactly as they were checkpointed"
            .to_owned()
    }
}

/// A raw part as text for a structured target: what it is, then its bytes
/// (as text when they are UTF-8, base64 otherwise).
fn describe_raw(formats: &Formats, p: &Part) -> String {
    let (encoding, body) = match std::str::from_utf8(&p.bytes) {
        Ok(s) => ("as UTF-8 text", s.to_owned()),
        Err(_) => (
            "base64-encoded",
            base64::engine::general_purpose::STANDARD.encode(&p.bytes),
        ),
    };
    format!(
        "[ctx raw fallback] {} holds {} bytes in the format {} ({}). ctx cannot translate it; \
         here are the bytes, {encoding}:\n\n{body}",
        p.origin,
        p.bytes.len(),
        p.format,
        format_description(formats, &p.format)
    )
}

/// For a target ctx cannot write: every part's bytes as stored, each after a
/// header line describing it.
fn raw_frame(formats: &Formats, parts: &[Part], target: &FormatId) -> Translated {
    let mut out = format!(
        "ctx raw fallback: ctx cannot write {target}; here are the {} artifacts of this context as \
         they were stored, each after a line describing it.\n",
        parts.len()
    )
    .into_bytes();
    for (i, p) in parts.iter().enumerate() {
        out.extend_from_slice(
            format!(
                "--- ctx part {} of {}: {}, {} bytes of {} ({}) ---\n",
                i + 1,
                parts.len(),
                p.origin,
                p.bytes.len(),
                p.format,
                format_description(formats, &p.format)
            )
            .as_bytes(),
        );
        out.extend_from_slice(&p.bytes);
        if !p.bytes.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    Translated {
        bytes: out.into(),
        tier: Tier::Raw,
        note: format!("ctx cannot write {target}"),
        fidelity: None,
    }
}
