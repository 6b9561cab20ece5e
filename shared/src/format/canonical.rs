//! The canonical message model: what every structured format converts to and
//! from, so that any two runtimes can exchange a context.
//!
//! It holds what a model needs to continue a conversation: roles, text,
//! images, tool uses paired with their results (and whether a result is an
//! error), thinking blocks with their signatures, and system prompts. Tool
//! results sit in user messages, as in the Anthropic API; codecs of APIs
//! that use a `tool` role split and merge them.
//!
//! Also here: the token estimate, the normalization under which a
//! translation counts as faithful, and the narrative rendering used when it
//! is not.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Carries;

/// Tokens counted for one image, whatever its size (a 1092×1092 image in
/// Anthropic's `width × height / 750` rule).
pub const IMAGE_TOKENS: u64 = 1_600;

/// Put before a failed tool result's text by formats that cannot flag errors.
pub const ERROR_PREFIX: &str = "Error: ";

/// A conversation: messages in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The messages, oldest first.
    pub messages: Vec<Message>,
}

/// Who speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A system (or developer) prompt.
    System,
    /// The user, and tool results.
    User,
    /// The model.
    Assistant,
}

/// One message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Block>,
    /// When (RFC 3339), if the format records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The index of the element (array index or line) it was decoded from.
    #[serde(skip)]
    pub origin: usize,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.content == other.content
            && self.timestamp == other.timestamp
    }
}

impl Message {
    /// A message with no timestamp.
    pub fn new(role: Role, content: Vec<Block>) -> Self {
        Message {
            role,
            content,
            timestamp: None,
            origin: 0,
        }
    }
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageSource {
    /// Inline, base64-encoded.
    Base64 {
        /// `image/png`, ...
        media_type: String,
        /// The base64 text.
        data: String,
    },
    /// At a URL.
    Url {
        /// The URL.
        url: String,
    },
}

/// A piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where it is.
        source: ImageSource,
    },
    /// The model calls a tool.
    ToolUse {
        /// The call's id, which its result names.
        id: String,
        /// The tool.
        name: String,
        /// The arguments (a JSON object in every known API).
        input: Value,
    },
    /// A tool's answer.
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// What it returned (text and images).
        content: Vec<Block>,
        /// Whether the call failed.
        is_error: bool,
    },
    /// The model's visible reasoning.
    Thinking {
        /// The reasoning.
        thinking: String,
        /// The provider's signature over it, kept verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted.
    RedactedThinking {
        /// The opaque data.
        data: String,
    },
    /// A block of a type the canonical model does not know, kept as the
    /// JSON it came as; only formats of the same API family pass it on.
    Other {
        /// Whose JSON it is: `anthropic` (Messages API, Claude Code) or
        /// `openai` (Chat Completions).
        api: String,
        /// The block as it was.
        value: Value,
    },
}

impl Block {
    /// A text block.
    pub fn text(t: impl Into<String>) -> Self {
        Block::Text { text: t.into() }
    }

    fn chars(&self) -> u64 {
        match self {
            Block::Text { text } => text.chars().count() as u64,
            Block::Image { .. } => 0,
            Block::ToolUse { name, input, .. } => {
                (name.chars().count() + input.to_string().chars().count()) as u64
            }
            Block::ToolResult { content, .. } => content.iter().map(Block::chars).sum(),
            Block::Thinking { thinking, .. } => thinking.chars().count() as u64,
            Block::RedactedThinking { data } => data.len() as u64,
            Block::Other { value, .. } => value.to_string().chars().count() as u64,
        }
    }

    fn images(&self) -> u64 {
        match self {
            Block::Image { .. } => 1,
            Block::ToolResult { content, .. } => content.iter().map(Block::images).sum(),
            _ => 0,
        }
    }
}

impl Conversation {
    /// The token estimate: characters of text, thinking, tool names and
    /// arguments and tool results over four, rounded up, plus
    /// [`IMAGE_TOKENS`] per image. Entries a runtime never sends to the model
    /// (Claude Code's file snapshots, titles, ...) are not in the
    /// conversation and count nothing.
    pub fn estimate_tokens(&self) -> u64 {
        let blocks = self.messages.iter().flat_map(|m| &m.content);
        let chars: u64 = blocks.clone().map(Block::chars).sum();
        let images: u64 = blocks.map(Block::images).sum();
        chars.div_ceil(4) + images * IMAGE_TOKENS
    }

    /// Tool results whose tool use is not earlier in the conversation:
    /// (tool use id, origin of the message).
    pub fn open_results(&self) -> Vec<(String, usize)> {
        let mut used = BTreeSet::new();
        let mut open = Vec::new();
        for m in &self.messages {
            for b in &m.content {
                match b {
                    Block::ToolUse { id, .. } => {
                        used.insert(id.as_str());
                    }
                    Block::ToolResult { tool_use_id, .. }
                        if !used.contains(tool_use_id.as_str()) =>
                    {
                        open.push((tool_use_id.clone(), m.origin));
                    }
                    _ => {}
                }
            }
        }
        open
    }

    /// Tool uses that no later tool result answers.
    pub fn unanswered_tool_uses(&self) -> BTreeSet<String> {
        let mut pending = BTreeSet::new();
        for b in self.messages.iter().flat_map(|m| &m.content) {
            match b {
                Block::ToolUse { id, .. } => {
                    pending.insert(id.clone());
                }
                Block::ToolResult { tool_use_id, .. } => {
                    pending.remove(tool_use_id);
                }
                _ => {}
            }
        }
        pending
    }
}

/// A tool result no API would take where it stands: it answers no tool
/// use of the assistant turn just before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The message holding it (its index in the conversation).
    pub message: usize,
    /// The tool use it names.
    pub tool_use_id: String,
    /// Whether that tool use is earlier in the conversation (elsewhere
    /// than the turn just before, or answered already).
    pub call_earlier: bool,
}

impl Orphan {
    /// Why it could not stay a tool result.
    pub fn reason(&self) -> String {
        if self.call_earlier {
            format!(
                "the tool result for {} does not answer the turn just before it",
                self.tool_use_id
            )
        } else {
            format!(
                "the tool result for {} answers a call that is not in this context",
                self.tool_use_id
            )
        }
    }
}

/// The tool results of a conversation that answer no tool use of the
/// assistant turn just before them (consecutive messages of one role count
/// as one, as the APIs merge them): what an API refuses, after a
/// compaction, a rewind or an imported fragment. [`find_orphans`] finds
/// them; [`Orphans::carry_as_text`] rewrites them.
#[derive(Debug, Clone, Default)]
pub struct Orphans {
    /// The orphans, in order.
    pub found: Vec<Orphan>,
    /// Per run of user messages holding one: its end (exclusive), the
    /// orphans' (message, block) places, and the run's last paired result.
    runs: Vec<OrphanRun>,
}

#[derive(Debug, Clone)]
struct OrphanRun {
    start: usize,
    end: usize,
    marked: BTreeMap<(usize, usize), bool>,
    last_paired: Option<(usize, usize)>,
}

/// Finds the [`Orphans`] of `conv`.
pub fn find_orphans(conv: &Conversation) -> Orphans {
    let msgs = &conv.messages;
    let mut out = Orphans::default();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut answerable: BTreeSet<&str> = BTreeSet::new();
    let mut i = 0;
    while i < msgs.len() {
        let role = msgs[i].role;
        if role == Role::System {
            i += 1;
            continue;
        }
        let other = if role == Role::User {
            Role::Assistant
        } else {
            Role::User
        };
        let end = (i..msgs.len())
            .find(|&j| msgs[j].role == other)
            .unwrap_or(msgs.len());
        if role == Role::Assistant {
            answerable.clear();
            for b in msgs[i..end]
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .flat_map(|m| &m.content)
            {
                if let Block::ToolUse { id, .. } = b {
                    answerable.insert(id);
                    seen.insert(id);
                }
            }
            i = end;
            continue;
        }
        let mut open = std::mem::take(&mut answerable);
        let mut run = OrphanRun {
            start: i,
            end,
            marked: BTreeMap::new(),
            last_paired: None,
        };
        for (m, msg) in msgs.iter().enumerate().take(end).skip(i) {
            if msg.role != Role::User {
                continue;
            }
            for (k, b) in msg.content.iter().enumerate() {
                if let Block::ToolResult { tool_use_id, .. } = b {
                    if open.remove(tool_use_id.as_str()) {
                        run.last_paired = Some((m, k));
                    } else {
                        let call_earlier = seen.contains(tool_use_id.as_str());
                        run.marked.insert((m, k), call_earlier);
                        out.found.push(Orphan {
                            message: m,
                            tool_use_id: tool_use_id.clone(),
                            call_earlier,
                        });
                    }
                }
            }
        }
        if !run.marked.is_empty() {
            out.runs.push(run);
        }
        i = end;
    }
    out
}

impl Orphans {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// Carries each orphan of `conv` (the conversation they were found in)
    /// as text saying what it is, followed by what it held; every other
    /// block stays as it was. Within a run of user messages the text goes
    /// where the result was, unless a paired result comes later in the
    /// run: then right after the run's last paired result, since the APIs
    /// take text only after a turn's tool results. A message left with
    /// nothing is removed.
    pub fn carry_as_text(&self, conv: Conversation) -> Conversation {
        let mut msgs = conv.messages;
        let mut emptied = BTreeSet::new();
        for run in &self.runs {
            let mut moved = Vec::new();
            for (m, msg) in msgs.iter_mut().enumerate().take(run.end).skip(run.start) {
                if msg.role != Role::User {
                    continue;
                }
                let had = !msg.content.is_empty();
                let mut out = Vec::with_capacity(msg.content.len());
                for (k, b) in std::mem::take(&mut msg.content).into_iter().enumerate() {
                    if let Some(&call_earlier) = run.marked.get(&(m, k)) {
                        let text = orphan_text(b, call_earlier);
                        if run.last_paired.is_some_and(|p| (m, k) < p) {
                            moved.extend(text);
                        } else {
                            out.extend(text);
                        }
                    } else {
                        out.push(b);
                        if run.last_paired == Some((m, k)) {
                            out.append(&mut moved);
                        }
                    }
                }
                if had && out.is_empty() {
                    emptied.insert(m);
                }
                msg.content = out;
            }
        }
        let messages = msgs
            .into_iter()
            .enumerate()
            .filter(|(m, _)| !emptied.contains(m))
            .map(|(_, msg)| msg)
            .collect();
        Conversation { messages }
    }
}

/// A tool call no API would take where it stands: the user turn after it
/// holds no result for it (the call was interrupted, or its result cut
/// off). A call in the conversation's last turn is in progress, not
/// unanswered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    /// The message holding it (its index in the conversation).
    pub message: usize,
    /// Its block in that message.
    pub block: usize,
    /// Its id.
    pub tool_use_id: String,
}

impl Unanswered {
    /// Why it could not stay a tool call.
    pub fn reason(&self) -> String {
        format!(
            "the tool call {} has no result in the turn after it",
            self.tool_use_id
        )
    }
}

/// The [`Unanswered`] tool calls of `conv`, in order.
pub fn find_unanswered(conv: &Conversation) -> Vec<Unanswered> {
    let msgs = &conv.messages;
    let mut out = Vec::new();
    let mut i = 0;
    while i < msgs.len() {
        if msgs[i].role != Role::Assistant {
            i += 1;
            continue;
        }
        let end = (i..msgs.len())
            .find(|&j| msgs[j].role == Role::User)
            .unwrap_or(msgs.len());
        if end == msgs.len() {
            // The last turn: its calls are still running.
            break;
        }
        let next = (end..msgs.len())
            .find(|&j| msgs[j].role == Role::Assistant)
            .unwrap_or(msgs.len());
        let answered: BTreeSet<&str> = msgs[end..next]
            .iter()
            .filter(|m| m.role == Role::User)
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        for (m, msg) in msgs.iter().enumerate().take(end).skip(i) {
            if msg.role != Role::Assistant {
                continue;
            }
            for (k, b) in msg.content.iter().enumerate() {
                if let Block::ToolUse { id, .. } = b
                    && !answered.contains(id.as_str())
                {
                    out.push(Unanswered {
                        message: m,
                        block: k,
                        tool_use_id: id.clone(),
                    });
                }
            }
        }
        i = end;
    }
    out
}

/// Carries each of `calls` (found in `conv`) as text saying what it is:
/// the call, its input and that no result is in this context, where the
/// call stood. No message is removed.
pub fn carry_unanswered_as_text(mut conv: Conversation, calls: &[Unanswered]) -> Conversation {
    for c in calls {
        let Some(b) = conv
            .messages
            .get_mut(c.message)
            .and_then(|m| m.content.get_mut(c.block))
        else {
            continue;
        };
        if let Block::ToolUse { id, name, input } = b {
            let text = format!(
                "[ctx: tool call {id} to {name} with input {input}; no result is in this context: it was interrupted, or its result was cut off]"
            );
            *b = Block::text(text);
        }
    }
    conv
}

/// An orphaned tool result as text saying what it is, then what it held
/// (its text joined to that line, its images after it).
fn orphan_text(b: Block, call_earlier: bool) -> Vec<Block> {
    let Block::ToolResult {
        tool_use_id,
        content,
        is_error,
    } = b
    else {
        return vec![b];
    };
    let whose = if call_earlier {
        "which does not answer the turn just before it"
    } else {
        "whose call is not in this context"
    };
    let verb = if is_error { "failed" } else { "returned" };
    let mut out = vec![Block::text(format!(
        "[ctx: the result of tool call {tool_use_id}, {whose}; it {verb}:]"
    ))];
    for c in content {
        match (out.last_mut(), c) {
            (Some(Block::Text { text: prev }), Block::Text { text }) => {
                prev.push('\n');
                prev.push_str(&text);
            }
            (_, c) => out.push(c),
        }
    }
    out
}

/// A conversation reduced to what a translation must keep: system prompts
/// apart (each API places them its own way), timestamps gone, adjacent
/// messages of one role merged and adjacent text joined (APIs treat both as
/// one), empty text gone, and what the target cannot carry removed or
/// rewritten the way its codec writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The system prompts' content, in order.
    pub system: Vec<Block>,
    /// The other messages.
    pub messages: Vec<(Role, Vec<Block>)>,
}

/// Normalizes `conv` for a target that carries `carries`.
pub fn normalize(conv: &Conversation, carries: Carries) -> Normalized {
    normalize_owned(conv.clone(), carries)
}

/// [`normalize`], consuming `conv`: each message is moved into the result
/// (or dropped) as it is reached, so the two are never whole at once.
pub fn normalize_owned(conv: Conversation, carries: Carries) -> Normalized {
    let mut out = Normalized {
        system: Vec::new(),
        messages: Vec::new(),
    };
    for m in conv.messages {
        let blocks = normalize_blocks(m.content, carries);
        if m.role == Role::System {
            if carries.system {
                out.system.extend(blocks);
                out.system = join_text(std::mem::take(&mut out.system));
            }
            continue;
        }
        if blocks.is_empty() {
            continue;
        }
        match out.messages.last_mut() {
            Some((role, prev)) if *role == m.role => {
                prev.extend(blocks);
                *prev = join_text(std::mem::take(prev));
            }
            _ => out.messages.push((m.role, blocks)),
        }
    }
    out
}

fn normalize_blocks(blocks: Vec<Block>, carries: Carries) -> Vec<Block> {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Thinking { .. } | Block::RedactedThinking { .. } if !carries.thinking => {}
            Block::Text { text } if text.is_empty() => {}
            Block::ToolResult {
                tool_use_id,
                mut content,
                mut is_error,
            } => {
                if is_error && !carries.tool_errors {
                    content.insert(0, Block::text(ERROR_PREFIX));
                    is_error = false;
                }
                out.push(Block::ToolResult {
                    tool_use_id,
                    content: normalize_blocks(content, carries),
                    is_error,
                });
            }
            other => out.push(other),
        }
    }
    join_text(out)
}

fn join_text(blocks: Vec<Block>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::with_capacity(blocks.len());
    for b in blocks {
        if let (Some(Block::Text { text: prev }), Block::Text { text }) = (out.last_mut(), &b) {
            prev.push_str(text);
            continue;
        }
        out.push(b);
    }
    out
}

/// Renders `conv` as a readable account for a model that cannot load it
/// structurally: every message in order, the tools called with their
/// arguments, what they returned or how they failed, thinking, images by
/// type and size. `why` says why there is no faithful translation.
pub fn narrative(conv: &Conversation, source: &str, why: &str) -> String {
    use std::fmt::Write as _;
    let mut tools: BTreeMap<&str, &str> = BTreeMap::new();
    let mut s = String::new();
    let _ = writeln!(s, "# What the previous session knew\n");
    let _ = writeln!(
        s,
        "ctx rendered this context as a narrative because {why}. It was recorded as {source}. \
         Below is every message in order, with the tools that were called, their arguments, \
         and what they returned.\n"
    );
    for m in &conv.messages {
        let who = match m.role {
            Role::System => "System prompt",
            Role::User => "User",
            Role::Assistant => "Assistant",
        };
        match &m.timestamp {
            Some(t) => {
                let _ = writeln!(s, "## {who} ({t})\n");
            }
            None => {
                let _ = writeln!(s, "## {who}\n");
            }
        }
        for b in &m.content {
            render_block(&mut s, b, &mut tools);
        }
    }
    s
}

fn render_block<'a>(s: &mut String, b: &'a Block, tools: &mut BTreeMap<&'a str, &'a str>) {
    use std::fmt::Write as _;
    match b {
        Block::Text { text } => {
            let _ = writeln!(s, "{text}\n");
        }
        Block::Image { source } => {
            let _ = match source {
                ImageSource::Base64 { media_type, data } => writeln!(
                    s,
                    "[image: {media_type}, {} bytes, not reproduced]\n",
                    data.len() / 4 * 3
                ),
                ImageSource::Url { url } => writeln!(s, "[image at {url}]\n"),
            };
        }
        Block::ToolUse { id, name, input } => {
            tools.insert(id, name);
            let _ = writeln!(
                s,
                "Called tool `{name}` (call {id}) with arguments: {input}\n"
            );
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let name = tools
                .get(tool_use_id.as_str())
                .copied()
                .unwrap_or("unknown tool");
            let verb = if *is_error { "failed" } else { "returned" };
            let _ = writeln!(s, "Tool `{name}` (call {tool_use_id}) {verb}:\n");
            for c in content {
                render_block(s, c, tools);
            }
        }
        Block::Thinking { thinking, .. } => {
            let _ = writeln!(s, "(The assistant thought:) {thinking}\n");
        }
        Block::RedactedThinking { .. } => {
            let _ = writeln!(s, "(The assistant thought; the provider redacted it.)\n");
        }
        Block::Other { value, .. } => {
            let kind = value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let _ = writeln!(s, "[{kind} block: {value}]\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_merges_roles_and_text_and_hoists_system() {
        let conv = Conversation {
            messages: vec![
                Message::new(Role::User, vec![Block::text("a")]),
                Message::new(Role::System, vec![Block::text("be brief")]),
                Message::new(Role::User, vec![Block::text(""), Block::text("b")]),
                Message::new(
                    Role::Assistant,
                    vec![Block::Thinking {
                        thinking: "hm".into(),
                        signature: Some("sig".into()),
                    }],
                ),
            ],
        };
        let all = normalize(&conv, Carries::ALL);
        assert_eq!(all.system, vec![Block::text("be brief")]);
        assert_eq!(all.messages.len(), 2);
        assert_eq!(all.messages[0].1, vec![Block::text("ab")]);
        let bare = normalize(
            &conv,
            Carries {
                system: false,
                thinking: false,
                tool_errors: false,
            },
        );
        assert!(bare.system.is_empty());
        assert_eq!(bare.messages.len(), 1);
    }

    #[test]
    fn tokens_count_text_and_images() {
        let conv = Conversation {
            messages: vec![Message::new(
                Role::User,
                vec![
                    Block::text("12345678"),
                    Block::Image {
                        source: ImageSource::Url { url: "u".into() },
                    },
                ],
            )],
        };
        assert_eq!(conv.estimate_tokens(), 2 + IMAGE_TOKENS);
    }

    #[test]
    fn open_results_and_unanswered_uses() {
        let conv = Conversation {
            messages: vec![
                Message::new(
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: "early".into(),
                        content: vec![],
                        is_error: false,
                    }],
                ),
                Message::new(
                    Role::Assistant,
                    vec![
                        Block::ToolUse {
                            id: "a".into(),
                            name: "t".into(),
                            input: serde_json::json!({}),
                        },
                        Block::ToolUse {
                            id: "b".into(),
                            name: "t".into(),
                            input: serde_json::json!({}),
                        },
                    ],
                ),
                Message::new(
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: "a".into(),
                        content: vec![],
                        is_error: true,
                    }],
                ),
            ],
        };
        assert_eq!(conv.open_results(), vec![("early".to_owned(), 0)]);
        assert_eq!(
            conv.unanswered_tool_uses().into_iter().collect::<Vec<_>>(),
            vec!["b".to_owned()]
        );
    }
}
