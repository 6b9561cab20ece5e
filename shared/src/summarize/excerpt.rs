//! The text a model reads of one commit: the delta rendered as
//! role-prefixed lines (tool calls and results named), and for a long one
//! its head and tail within a token budget, the cut marked. Also the
//! UTF-8-safe truncation every summarizer uses.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::{Content, SummaryInput};
use crate::commit::CommitType;
use crate::format::canonical::{Block, Conversation, ImageSource, Role};
use crate::format::estimate_tokens;

/// The share of a cut excerpt's budget given to its head (the rest goes to
/// the tail): how the work started, then how it ended.
const HEAD_SHARE: f64 = 0.6;

/// At most `max` characters of `s`: `s` itself when it fits, else its
/// start cut at a character boundary (at a word boundary when one is near)
/// and ended with `…`, `max` characters in all.
pub fn truncate(s: &str, max: usize) -> String {
    if max == 0 {
        return String::new();
    }
    let mut ends = s.char_indices().map(|(i, _)| i);
    // The byte offset where character number `max - 1` starts: what we keep
    // before the ellipsis.
    let Some(cut) = ends.nth(max - 1) else {
        return s.to_owned();
    };
    if s[cut..].chars().nth(1).is_none() {
        // Exactly `max` characters: it fits.
        return s.to_owned();
    }
    let head = &s[..cut];
    // Prefer ending at a word boundary within the last fifth of what is
    // kept (the cut itself may be one).
    let at_boundary = s[cut..].starts_with(char::is_whitespace);
    let word = head
        .rfind(char::is_whitespace)
        .filter(|&i| !at_boundary && i > 0 && head[i..].chars().count() <= max / 5 + 1);
    let head = word.map_or(head, |i| &head[..i]).trim_end();
    format!("{head}…")
}

/// `s` with every run of whitespace (newlines too) made one space and
/// control characters dropped, trimmed.
pub(crate) fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
        } else if !c.is_control() {
            if space {
                out.push(' ');
                space = false;
            }
            out.push(c);
        }
    }
    out
}

/// What a model reads of `input`, at most about `max_tokens` tokens (the
/// chars/4 estimate of [`estimate_tokens`]): [`render`]ed, then, when
/// longer, its head and tail with a line saying how much was cut.
pub fn excerpt(input: &SummaryInput, max_tokens: u64) -> String {
    let text = render(input);
    if estimate_tokens(text.len()) <= max_tokens {
        return text;
    }
    let budget = usize::try_from(max_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    let marker_room = 64;
    let room = budget.saturating_sub(marker_room);
    let head_len = (room as f64 * HEAD_SHARE) as usize;
    let tail_len = room - head_len;
    let head_end = floor_boundary(&text, head_len);
    let tail_start = ceil_boundary(&text, text.len() - tail_len);
    let cut = text[head_end..tail_start].chars().count();
    format!(
        "{}\n[… {cut} characters cut …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

/// The largest character boundary of `s` at or before byte `i` (at most
/// `s.len()`).
pub(crate) fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// `input` as text: for a conversation one line (or paragraph) per block,
/// prefixed by its role, tool calls with their arguments and results with
/// the tool's name; a compaction says it is one; opaque content as it is.
pub fn render(input: &SummaryInput) -> String {
    let mut s = String::new();
    if input.commit_type == CommitType::Compaction {
        s.push_str("[A compaction: the summary of the conversation before it.]\n");
    }
    match &input.content {
        Content::Text(t) => s.push_str(t.trim_end()),
        Content::Conversation(c) => render_conversation(&mut s, c),
    }
    s
}

fn render_conversation(s: &mut String, conv: &Conversation) {
    let mut tools: HashMap<&str, &str> = HashMap::new();
    for m in &conv.messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        for b in &m.content {
            render_block(s, role, b, &mut tools);
        }
    }
    while s.ends_with('\n') {
        s.pop();
    }
}

fn render_block<'a>(
    s: &mut String,
    role: &str,
    b: &'a Block,
    tools: &mut HashMap<&'a str, &'a str>,
) {
    match b {
        Block::Text { text } => {
            let text = text.trim();
            if !text.is_empty() {
                let _ = writeln!(s, "{role}: {text}");
            }
        }
        Block::Image { source } => {
            let _ = match source {
                ImageSource::Base64 { media_type, .. } => {
                    writeln!(s, "{role}: [image {media_type}]")
                }
                ImageSource::Url { url } => writeln!(s, "{role}: [image {url}]"),
            };
        }
        Block::ToolUse { id, name, input } => {
            tools.insert(id, name);
            let _ = writeln!(s, "{role}: [calls {name}] {}", compact(input));
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let name = tools.get(tool_use_id.as_str()).copied().unwrap_or("a tool");
            let verb = if *is_error { "failed" } else { "returned" };
            let mut text = String::new();
            for c in content {
                match c {
                    Block::Text { text: t } => {
                        text.push_str(t.trim_end());
                        text.push('\n');
                    }
                    Block::Image { .. } => text.push_str("[image]\n"),
                    _ => {}
                }
            }
            let _ = writeln!(s, "tool: [{name} {verb}] {}", text.trim_end());
        }
        Block::Thinking { thinking, .. } => {
            let thinking = thinking.trim();
            if !thinking.is_empty() {
                let _ = writeln!(s, "{role} (thinking): {thinking}");
            }
        }
        Block::RedactedThinking { .. } => {}
        Block::Other { value, .. } => {
            let kind = value.get("type").and_then(Value::as_str).unwrap_or("block");
            let _ = writeln!(s, "{role}: [{kind}]");
        }
    }
}

/// Tool arguments as compact JSON.
fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::FormatId;
    use crate::format::canonical::Message;

    #[test]
    fn truncation_counts_characters_and_never_splits_one() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("exactly10!", 10), "exactly10!");
        assert_eq!(truncate("", 3), "");
        let cut = truncate("ééééééééééééé", 5);
        assert_eq!(cut, "éééé…");
        assert_eq!(cut.chars().count(), 5);
        // Emoji and combining text: every result is valid and within bounds.
        let s = "🦀 crabs 🦀🦀 and 日本語のテキスト with spaces here and there";
        for max in 1..s.chars().count() + 2 {
            let t = truncate(s, max);
            assert!(t.chars().count() <= max, "{max}: {t}");
            assert!(s.starts_with(t.trim_end_matches('…')), "{max}: {t}");
        }
        // A word boundary near the end is preferred.
        assert_eq!(
            truncate("the quick brown fox jumps", 20),
            "the quick brown fox…"
        );
    }

    #[test]
    fn one_line_collapses_whitespace_and_drops_controls() {
        assert_eq!(one_line("  a\n\n b\t\u{7}c  "), "a b c");
    }

    fn input(conv: Conversation) -> SummaryInput {
        SummaryInput {
            commit_type: CommitType::Delta,
            format: "openai-chat-v1".parse::<FormatId>().unwrap(),
            content: Content::Conversation(conv),
        }
    }

    #[test]
    fn a_conversation_renders_as_role_prefixed_lines_with_tools_named() {
        let conv = Conversation {
            messages: vec![
                Message::new(Role::System, vec![Block::text("Be brief.")]),
                Message::new(Role::User, vec![Block::text("Why does it fail?")]),
                Message::new(
                    Role::Assistant,
                    vec![
                        Block::Thinking {
                            thinking: "Read it.".into(),
                            signature: None,
                        },
                        Block::ToolUse {
                            id: "t1".into(),
                            name: "Read".into(),
                            input: serde_json::json!({"path": "a.rs"}),
                        },
                    ],
                ),
                Message::new(
                    Role::User,
                    vec![Block::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![Block::text("fn main() {}\n")],
                        is_error: true,
                    }],
                ),
                Message::new(Role::Assistant, vec![Block::text("It is empty.")]),
            ],
        };
        assert_eq!(
            render(&input(conv)),
            "system: Be brief.\n\
             user: Why does it fail?\n\
             assistant (thinking): Read it.\n\
             assistant: [calls Read] {\"path\":\"a.rs\"}\n\
             tool: [Read failed] fn main() {}\n\
             assistant: It is empty."
        );
    }

    #[test]
    fn a_long_input_keeps_head_and_tail_within_the_budget() {
        let messages = (0..400)
            .map(|i| Message::new(Role::User, vec![Block::text(format!("line {i} — ünïcödé"))]))
            .collect();
        let input = input(Conversation { messages });
        let full = render(&input);
        assert!(estimate_tokens(full.len()) > 500);
        for budget in [100, 250, 500] {
            let e = excerpt(&input, budget);
            assert!(
                estimate_tokens(e.len()) <= budget,
                "{budget}: {} tokens",
                estimate_tokens(e.len())
            );
            assert!(e.starts_with("user: line 0 — ünïcödé\n"), "{e}");
            assert!(e.ends_with("user: line 399 — ünïcödé"), "{e}");
            assert!(e.contains(" characters cut …]\n"), "{e}");
        }
        // A short one is whole.
        assert_eq!(excerpt(&input, 100_000), full);
    }

    #[test]
    fn a_compaction_says_so_and_text_is_kept_as_it_is() {
        let input = SummaryInput {
            commit_type: CommitType::Compaction,
            format: FormatId::raw(),
            content: Content::Text("Summary: done.\n\n".into()),
        };
        assert_eq!(
            render(&input),
            "[A compaction: the summary of the conversation before it.]\nSummary: done."
        );
    }
}
