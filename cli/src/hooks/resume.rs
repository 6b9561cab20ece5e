//! `ctx resume`: the transcript at any commit written as a new Claude
//! Code session that continues from there.

use std::collections::HashMap;
use std::path::PathBuf;

use ctx_core::clock::{Clock, IdSource, OsRandom, SystemClock};
use ctx_core::format::FormatId;
use ctx_core::wire::CheckpointRequest;
use ctx_core::wire::{CommitType, RefMove, Trigger};
use ctx_core::{CommitId, Error, Principal, Result};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::commands::{rev, wire_value};
use crate::print_json;

use super::install::write_atomically;
use super::sync::{HookState, log_request, state_dir, state_path, write_state};
use super::{ResumeArgs, Runtime, project_key, session_ref};

/// A random (version 4) UUID.
fn uuid_v4(ids: &dyn IdSource) -> String {
    let mut b = [0u8; 16];
    ids.fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// What `ctx resume --json` prints.
#[derive(Debug, Serialize)]
struct Resumed {
    /// The new Claude Code session.
    session_id: String,
    /// Its transcript file.
    path: PathBuf,
    /// The commit it continues from.
    from: CommitId,
    /// The snapshot commit of the new session (the parent is `from`).
    commit: CommitId,
    /// The new session's ref.
    #[serde(rename = "ref")]
    ref_name: String,
    /// Entries written.
    entries: usize,
}

/// Runs `ctx resume`.
///
/// # Errors
/// `Invalid` when the commit's context is not a Claude Code transcript;
/// `Unavailable` when the file cannot be written; the server's errors.
pub async fn run_resume(a: ResumeArgs) -> Result<()> {
    let c = a.conn.client()?;
    let from = rev(&c, &a.rev).await?;
    let (_, bytes) = c
        .materialize_and_download(&from, &log_request(Runtime::ClaudeCode.spec())?)
        .await?;
    let ids = OsRandom;
    let session = uuid_v4(&ids);
    let now = SystemClock
        .now()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let (text, entries) = fork_transcript(&bytes, &session, &now, &from, &ids)?;
    let project_key = project_key(&a.project);
    let claude_dir = match a.claude_dir {
        Some(d) => d,
        None => std::env::home_dir()
            .ok_or_else(|| {
                Error::invalid(
                    "claude_dir",
                    "no home directory: pass --claude-dir or set CLAUDE_CONFIG_DIR",
                )
            })?
            .join(".claude"),
    };
    let dir = claude_dir.join("projects").join(&project_key);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("{session}.jsonl"));
    let name = session_ref(Runtime::ClaudeCode.spec().ref_root, &project_key, &session);
    let principal: Principal = wire_value("principal", a.writes.principal(Runtime::ClaudeCode))?;
    let format: FormatId = "claude-code-v1"
        .parse()
        .expect("claude-code-v1 is a format id");
    let req = CheckpointRequest {
        parent: Some(from),
        commit_type: CommitType::Snapshot,
        checkpoint: Trigger::Explicit,
        session_id: session.parse().ok(),
        ref_move: Some(RefMove {
            name: name.parse()?,
            expected: None,
        }),
        ..CheckpointRequest::new(
            principal,
            a.writes.template(Runtime::ClaudeCode),
            format,
            text.clone(),
        )
    };
    let commit = c.checkpoint(&req).await?.commit.id;
    write_atomically(&path, text.as_bytes())?;
    // The hook continues the new session from here: its lines so far are
    // the snapshot.
    let state = HookState {
        ref_name: name.clone(),
        session_id: session.clone(),
        transcript_path: path.clone(),
        offset: text.len() as u64,
        tip: Some(commit),
        event: "Stop".to_owned(),
        pending: false,
        refused: false,
        error: None,
        stops: 0,
        principal: Some(a.writes.principal(Runtime::ClaudeCode).to_owned()),
        template: Some(a.writes.template(Runtime::ClaudeCode).to_owned()),
    };
    write_state(
        &state_path(
            &state_dir(&a.conn.remote.data, Runtime::ClaudeCode.spec()),
            &project_key,
            &session,
        ),
        &state,
    )?;
    if a.conn.json {
        print_json(&Resumed {
            session_id: session,
            path,
            from,
            commit,
            ref_name: name,
            entries,
        })
    } else {
        eprintln!(
            "wrote {entries} entries of {from} to {}; continue with: claude --resume {session}",
            path.display()
        );
        outln!("{session}");
        Ok(())
    }
}

/// The transcript `bytes` as a new session `session`: fresh entry uuids
/// (parent links remapped, progress entries dropped and skipped over),
/// `sessionId` replaced, `forkedFrom` naming each original, the last
/// entry's time `now`, and a `custom-title` entry naming the commit. The
/// text and the entries written.
fn fork_transcript(
    bytes: &[u8],
    session: &str,
    now: &str,
    from: &CommitId,
    ids: &dyn IdSource,
) -> Result<(String, usize)> {
    let mut entries: Vec<Map<String, Value>> = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => entries.push(m),
            _ => {
                return Err(Error::invalid(
                    "rev",
                    format!(
                        "{from} is not a Claude Code transcript: line {} is not a JSON object",
                        i + 1
                    ),
                ));
            }
        }
    }
    let uuid_of =
        |e: &Map<String, Value>, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut mapping: HashMap<String, String> = HashMap::new();
    let mut by_uuid: HashMap<String, &Map<String, Value>> = HashMap::new();
    for e in &entries {
        if let Some(u) = uuid_of(e, "uuid") {
            mapping.insert(u.clone(), uuid_v4(ids));
            by_uuid.insert(u, e);
        }
    }
    let is_progress =
        |e: &Map<String, Value>| e.get("type").and_then(Value::as_str) == Some("progress");
    let writable: Vec<&Map<String, Value>> = entries.iter().filter(|e| !is_progress(e)).collect();
    let mut out = String::new();
    for (i, original) in writable.iter().enumerate() {
        let mut e = (*original).clone();
        if let Some(old) = uuid_of(original, "uuid") {
            // The nearest ancestor that is written.
            let mut parent = uuid_of(original, "parentUuid");
            while let Some(p) = parent.clone() {
                match by_uuid.get(&p) {
                    Some(pe) if is_progress(pe) => parent = uuid_of(pe, "parentUuid"),
                    Some(_) => break,
                    None => {
                        parent = None;
                        break;
                    }
                }
            }
            e.insert("uuid".into(), Value::String(mapping[&old].clone()));
            if original.contains_key("parentUuid") {
                e.insert(
                    "parentUuid".into(),
                    parent.map_or(Value::Null, |p| Value::String(mapping[&p].clone())),
                );
            }
            if let Some(lp) = uuid_of(original, "logicalParentUuid") {
                e.insert(
                    "logicalParentUuid".into(),
                    mapping
                        .get(&lp)
                        .map_or(Value::Null, |m| Value::String(m.clone())),
                );
            }
            e.insert(
                "forkedFrom".into(),
                json!({"sessionId": original.get("sessionId"), "messageUuid": old}),
            );
        }
        // A summary names the leaf it summarizes up to.
        if let Some(leaf) = uuid_of(original, "leafUuid").and_then(|l| mapping.get(&l)) {
            e.insert("leafUuid".into(), Value::String(leaf.clone()));
        }
        if e.contains_key("sessionId") {
            e.insert("sessionId".into(), Value::String(session.to_owned()));
        }
        if i + 1 == writable.len() && e.contains_key("timestamp") {
            e.insert("timestamp".into(), Value::String(now.to_owned()));
        }
        out.push_str(&Value::Object(e).to_string());
        out.push('\n');
    }
    let title = json!({
        "type": "custom-title",
        "customTitle": format!("ctx resume of {from}"),
        "sessionId": session,
        "uuid": uuid_v4(ids),
        "timestamp": now,
    });
    out.push_str(&title.to_string());
    out.push('\n');
    Ok((out, writable.len() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_core::clock::SeededIds;
    #[test]
    fn forking_remaps_uuids_and_keeps_the_chain() {
        let t = concat!(
            r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"old","timestamp":"t1","message":{"role":"user","content":"hi"}}"#,
            "\n",
            r#"{"type":"progress","uuid":"p1","parentUuid":"u1","sessionId":"old"}"#,
            "\n",
            r#"{"type":"assistant","uuid":"a1","parentUuid":"p1","sessionId":"old","timestamp":"t2","message":{"role":"assistant","content":"yo"}}"#,
            "\n",
            r#"{"type":"summary","summary":"s","leafUuid":"a1"}"#,
            "\n"
        );
        let from: CommitId = format!("ctx-{}", "0".repeat(32)).parse().unwrap();
        let (text, n) =
            fork_transcript(t.as_bytes(), "new", "t9", &from, &SeededIds::new(1)).unwrap();
        assert_eq!(n, 4, "progress dropped, a title added");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["sessionId"], "new");
        assert_ne!(lines[0]["uuid"], "u1");
        assert_eq!(
            lines[0]["forkedFrom"],
            json!({"sessionId": "old", "messageUuid": "u1"})
        );
        assert_eq!(lines[1]["type"], "assistant");
        assert_eq!(
            lines[1]["parentUuid"], lines[0]["uuid"],
            "skips the progress entry"
        );
        assert_eq!(lines[1]["timestamp"], "t2");
        assert_eq!(lines[2]["type"], "summary");
        assert!(lines[2].get("sessionId").is_none(), "no field is invented");
        assert_eq!(
            lines[2]["leafUuid"], lines[1]["uuid"],
            "a summary points at its leaf in the new file"
        );
        assert_eq!(lines[3]["type"], "custom-title");
        assert_eq!(lines[3]["timestamp"], "t9");
        let e = fork_transcript(b"not json\n", "new", "t9", &from, &SeededIds::new(1)).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("rev"));
    }
}
