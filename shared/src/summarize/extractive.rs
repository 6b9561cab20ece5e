//! `extractive`: the default summarizer, with no model. A deterministic
//! line of at most [`MAX_CHARS`] characters built from the delta itself
//! through the canonical model: what the user asked, which tools ran, what
//! the assistant concluded (`ask → [Read ×2, Edit] → answer`). Opaque
//! (`raw` or undecodable) content gives its first meaningful line; a
//! compaction the start of its summary text.

use async_trait::async_trait;

use super::excerpt::{one_line, truncate};
use super::{Content, Failure, Summarizer, Summary, SummaryInput};
use crate::commit::CommitType;
use crate::format::canonical::{Block, Conversation, Role};

/// The longest extractive summary, in characters.
pub const MAX_CHARS: usize = 200;

/// The longest tool list, in characters (then `+N more`).
const MAX_TOOLS_CHARS: usize = 48;

/// What a delta with nothing to say gets.
const EMPTY: &str = "(empty)";

/// The preamble Claude Code puts before a compaction's summary.
const CONTINUED: &str = "This session is being continued from a previous conversation";

/// The extractive summarizer (`extractive:v1`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

#[async_trait]
impl Summarizer for Extractive {
    fn id(&self) -> String {
        "extractive:v1".into()
    }

    async fn summarize(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        Ok(Summary {
            text: line(input),
            input_tokens: 0,
            output_tokens: 0,
        })
    }

    async fn summarize_context(&self, input: &SummaryInput) -> Result<Summary, Failure> {
        Ok(Summary {
            text: digest(input),
            input_tokens: 0,
            output_tokens: 0,
        })
    }
}

/// The extractive summary of a whole context (what a compaction replaces):
/// one line per turn, so that it stands for every turn, each at most
/// [`MAX_CHARS`] characters. A turn of opaque text starts at a line
/// beginning `user:` ([`raw_turns`]), its line its meaningful lines joined
/// by ` / `; a turn of a conversation starts at each user message, its
/// line `ask → [tools] → answer`.
pub fn digest(input: &SummaryInput) -> String {
    let lines: Vec<String> = match &input.content {
        Content::Text(t) => raw_turns(t)
            .into_iter()
            .map(|turn| {
                let parts: Vec<String> = turn
                    .lines()
                    .map(|l| one_line(l.trim()))
                    .filter(|l| l.chars().any(char::is_alphanumeric))
                    .collect();
                truncate(&parts.join(" / "), MAX_CHARS)
            })
            .filter(|l| !l.is_empty())
            .collect(),
        Content::Conversation(c) => {
            let mut turns: Vec<Conversation> = Vec::new();
            for m in &c.messages {
                if m.role == Role::User || turns.is_empty() {
                    turns.push(Conversation {
                        messages: Vec::new(),
                    });
                }
                if let Some(last) = turns.last_mut() {
                    last.messages.push(m.clone());
                }
            }
            turns.iter().map(turn).filter(|l| !l.is_empty()).collect()
        }
    };
    if lines.is_empty() {
        EMPTY.to_owned()
    } else {
        lines.join("\n")
    }
}

/// Opaque text cut into turns, in order, covering every byte: a turn
/// starts at a line beginning `user:` (what comes before the first one
/// is a turn of its own).
pub fn raw_turns(text: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = vec![0];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if at > 0 && line.trim_start().starts_with("user:") {
            starts.push(at);
        }
        at += line.len();
    }
    starts.push(text.len());
    starts
        .windows(2)
        .map(|w| &text[w[0]..w[1]])
        .filter(|t| !t.is_empty())
        .collect()
}

/// The extractive summary of `input`, at most [`MAX_CHARS`] characters.
pub fn line(input: &SummaryInput) -> String {
    let s = match (&input.content, input.commit_type) {
        (Content::Text(t), CommitType::Compaction) => summary_start(t),
        (Content::Text(t), _) => first_meaningful_line(t),
        (Content::Conversation(c), CommitType::Compaction) => {
            summary_start(&texts(c, |_| true).join("\n"))
        }
        (Content::Conversation(c), _) => turn(c),
    };
    if s.is_empty() { EMPTY.to_owned() } else { s }
}

/// The first line with a letter or digit in it, without markdown heading
/// and quote marks.
fn first_meaningful_line(t: &str) -> String {
    t.lines()
        .map(|l| one_line(l.trim().trim_start_matches(['#', '>']).trim()))
        .find(|l| l.chars().any(char::is_alphanumeric))
        .map_or_else(String::new, |l| truncate(&l, MAX_CHARS))
}

/// The start of a summary's text, without Claude Code's preamble.
fn summary_start(t: &str) -> String {
    let t = t.trim_start();
    let t = match t.strip_prefix(CONTINUED) {
        // "… summarized below:" / "… Summary:": what follows the colon.
        Some(rest) => match rest.find(": ").or_else(|| rest.find(":\n")) {
            Some(i) => &rest[i + 1..],
            None => rest.split_once(". ").map_or(rest, |(_, r)| r),
        },
        None => t,
    };
    let skip_blank = t.trim_start_matches(|c: char| !c.is_alphanumeric() && c != '`');
    truncate(&one_line(skip_blank), MAX_CHARS)
}

/// The text blocks of the messages `keep` accepts, each made one line.
fn texts(c: &Conversation, keep: impl Fn(Role) -> bool) -> Vec<String> {
    c.messages
        .iter()
        .filter(|m| keep(m.role))
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::Text { text } => Some(one_line(text)),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// `ask → [tools] → answer`, each part present when the delta has it.
fn turn(c: &Conversation) -> String {
    let of = |role: Role| {
        c.messages
            .iter()
            .filter(move |m| m.role == role)
            .filter_map(|m| {
                let t = one_line(
                    &m.content
                        .iter()
                        .filter_map(|b| match b {
                            Block::Text { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                (!t.is_empty()).then_some(t)
            })
    };
    let ask = of(Role::User).next();
    let answer = of(Role::Assistant).next_back();
    let tools = tools(c);
    if ask.is_none() && answer.is_none() && tools.is_empty() {
        // Only a system prompt, or nothing: its first words.
        return truncate(&texts(c, |_| true).join(" "), MAX_CHARS);
    }
    const ARROW: &str = " → ";
    let tools_part = (!tools.is_empty()).then(|| format!("[{tools}]"));
    let fixed: usize = tools_part.as_ref().map_or(0, |t| t.chars().count())
        + ARROW.chars().count()
            * ([ask.is_some(), tools_part.is_some(), answer.is_some()]
                .iter()
                .filter(|b| **b)
                .count()
                .saturating_sub(1));
    let room = MAX_CHARS.saturating_sub(fixed);
    let (ask_len, answer_len) = (
        ask.as_ref().map_or(0, |a| a.chars().count()),
        answer.as_ref().map_or(0, |a| a.chars().count()),
    );
    // The ask gets two fifths of the room, the answer the rest; what one
    // does not use the other may.
    let ask_room = if answer.is_none() {
        room
    } else {
        (room * 2 / 5).max(room.saturating_sub(answer_len))
    };
    let ask_room = ask_room.min(ask_len);
    let answer_room = room - ask_room;
    let parts: Vec<String> = [
        ask.map(|a| truncate(&a, ask_room)),
        tools_part,
        answer.map(|a| truncate(&a, answer_room)),
    ]
    .into_iter()
    .flatten()
    .collect();
    parts.join(ARROW)
}

/// The tools called, in the order first called, with a count when more
/// than once: `Read ×2, Grep, Edit`; `+N more` past [`MAX_TOOLS_CHARS`].
fn tools(c: &Conversation) -> String {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for b in c.messages.iter().flat_map(|m| &m.content) {
        if let Block::ToolUse { name, .. } = b {
            match seen.iter_mut().find(|(n, _)| n == name) {
                Some((_, k)) => *k += 1,
                None => seen.push((name, 1)),
            }
        }
    }
    let mut out = String::new();
    for (i, (name, k)) in seen.iter().enumerate() {
        let item = if *k > 1 {
            format!("{name} ×{k}")
        } else {
            (*name).to_owned()
        };
        let sep = if out.is_empty() { "" } else { ", " };
        if out.chars().count() + sep.len() + item.chars().count() > MAX_TOOLS_CHARS && i > 0 {
            out.push_str(&format!(" +{} more", seen.len() - i));
            break;
        }
        out.push_str(sep);
        out.push_str(&truncate(&item, MAX_TOOLS_CHARS));
    }
    out
}
