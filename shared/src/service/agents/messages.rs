//! Message conversion: canonical messages as the text a window summary or
//! semantic memory reads, and as working-context messages.

use super::super::Service;
use crate::agent::WorkingMessage;
use crate::format::FormatId;
use crate::format::canonical::{Block, ImageSource, Message, Role};

impl Service {
    pub(super) fn text_of_delta(&self, format: &FormatId, bytes: &[u8]) -> String {
        let codec = self.formats.codec(format);
        match codec.structured().then(|| codec.to_canonical(bytes)) {
            Some(Ok(conv)) => conv
                .messages
                .iter()
                .map(|m| text_of(&m.content))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::from_utf8_lossy(bytes).trim_end().to_owned(),
        }
    }

    /// A delta's messages as working-context messages.
    pub(super) fn working_messages(&self, format: &FormatId, bytes: &[u8]) -> Vec<WorkingMessage> {
        let codec = self.formats.codec(format);
        match codec.structured().then(|| codec.to_canonical(bytes)) {
            Some(Ok(conv)) => conv.messages.iter().map(working_message).collect(),
            _ => vec![text_message(
                "user",
                String::from_utf8_lossy(bytes).into_owned(),
            )],
        }
    }
}

pub(super) fn role_name(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

pub(super) fn text_of(blocks: &[Block]) -> String {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Text { text } => out.push(text.clone()),
            Block::ToolResult { content, .. } => out.push(text_of(content)),
            _ => {}
        }
    }
    out.join("\n")
}

pub(super) fn text_message(role: &str, content: impl Into<String>) -> WorkingMessage {
    WorkingMessage {
        role: role.to_owned(),
        content: Some(content.into()),
        reasoning_content: None,
        tool_payload: None,
        media_urls: None,
    }
}

/// A canonical message as a working-context message: text as content,
/// thinking as reasoning, tool calls and results as the tool payload,
/// images by URL as media; a user message holding only tool results is a
/// `tool` message.
fn working_message(m: &Message) -> WorkingMessage {
    let mut reasoning = Vec::new();
    let mut uses = Vec::new();
    let mut results = Vec::new();
    let mut media = Vec::new();
    for b in &m.content {
        match b {
            Block::Thinking { thinking, .. } => reasoning.push(thinking.clone()),
            Block::ToolUse { id, name, input } => {
                uses.push(serde_json::json!({"id": id, "name": name, "input": input}));
            }
            Block::ToolResult { tool_use_id, content, is_error } => results.push(
                serde_json::json!({"tool_use_id": tool_use_id, "content": text_of(content), "is_error": is_error}),
            ),
            Block::Image { source: ImageSource::Url { url } } => media.push(url.clone()),
            _ => {}
        }
    }
    let text = text_of(
        &m.content
            .iter()
            .filter(|b| matches!(b, Block::Text { .. }))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let only_results = !results.is_empty() && text.is_empty() && uses.is_empty();
    let mut payload = serde_json::Map::new();
    if !uses.is_empty() {
        payload.insert("tool_calls".into(), uses.into());
    }
    if !results.is_empty() {
        payload.insert("tool_results".into(), results.into());
    }
    WorkingMessage {
        role: if only_results {
            "tool".to_owned()
        } else {
            role_name(m.role).to_owned()
        },
        content: (!text.is_empty()).then_some(text),
        reasoning_content: (!reasoning.is_empty()).then(|| reasoning.join("\n")),
        tool_payload: (!payload.is_empty()).then_some(serde_json::Value::Object(payload)),
        media_urls: (!media.is_empty()).then_some(media),
    }
}
