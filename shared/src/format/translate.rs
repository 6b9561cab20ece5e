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
//! 4. **narrative**: no faithful mapping exists (a tool result whose call
//!    is outside the context, an image inside a tool result for OpenAI,
//!    ...): the conversation is rendered as a readable account
//!    ([`super::canonical::narrative`]) in one user message of the target.
//! 5. **raw**: a part is in a format ctx has no codec for, or the target
//!    is one: the raw bytes are handed over with a description of their
//!    format, never guessed at.

use base64::Engine as _;
use bytes::Bytes;

use super::canonical::{self, Block, Conversation, Message, Role};
use super::{FormatId, Formats};
use crate::error::{Error, Result};

/// How a materialization was produced; on the wire its kebab-case name
/// (`native`, `field-level`, `cross-runtime`, `narrative`, `raw`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
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
/// `Internal` when a stored part does not decode as its own format (it was
/// validated when it was checkpointed).
pub fn translate(formats: &Formats, parts: Vec<Part>, target: &FormatId) -> Result<Translated> {
    let tcodec = formats.codec(target);
    if parts.iter().all(|p| &p.format == target) {
        let bytes: Vec<Bytes> = parts.into_iter().map(|p| p.bytes).collect();
        return Ok(Translated {
            bytes: tcodec.concat(&bytes)?,
            tier: Tier::Native,
            note: String::new(),
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
    for p in parts {
        let codec = formats.codec(&p.format);
        if codec.structured() {
            let c = codec
                .to_canonical(&p.bytes)
                .map_err(|e| undecodable(&p, &e))?;
            conv.messages.extend(c.messages);
        } else {
            opaque.push(p.format.to_string());
            conv.messages.push(Message::new(
                Role::User,
                vec![Block::text(describe_raw(formats, &p))],
            ));
        }
    }
    if !opaque.is_empty() {
        let enc = tcodec.encode_canonical(&conv)?;
        return Ok(Translated {
            bytes: enc.bytes,
            tier: Tier::Raw,
            note: format!("ctx has no codec for {}", opaque.join(", ")),
        });
    }
    let enc = tcodec.encode_canonical(&conv)?;
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
        None => Ok(Translated {
            bytes: enc.bytes,
            tier: Tier::CrossRuntime,
            note: String::new(),
        }),
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
            Ok(Translated {
                bytes: tcodec.encode_canonical(&story)?.bytes,
                tier: Tier::Narrative,
                note: why,
            })
        }
    }
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
    }
}
