//! `ctx hooks install|uninstall`: ctx's command hooks merged into (or
//! taken out of) a project's `.claude/settings.json`.

use std::path::Path;

use ctx_core::{Error, Result};
use serde_json::{Map, Value, json};

use super::{HOOK_EVENTS, HooksCommand, Runtime, TOOL_EVENT};
use crate::print_json;

/// Runs `ctx hooks install|uninstall`.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings file is not a JSON
/// object; `Unavailable` when it cannot be read or written.
pub fn run_hooks(cmd: HooksCommand) -> Result<()> {
    let (a, install) = match cmd {
        HooksCommand::Install(a) => (a, true),
        HooksCommand::Uninstall(a) => (a, false),
    };
    let Runtime::ClaudeCode = a.runtime;
    let path = a.project.join(".claude").join("settings.json");
    let mut settings = match std::fs::read(&path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Value::Object(Map::new()),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::invalid(
                "settings",
                format!("{} is not JSON: {e}; fix it first", path.display()),
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
        Err(e) => {
            return Err(Error::unavailable(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let command = if install {
        let exe = std::env::current_exe()
            .map_err(|e| Error::unavailable(format!("where is this ctx binary? {e}")))?;
        let data = std::path::absolute(&a.data)
            .map_err(|e| Error::invalid("data", format!("{}: {e}", a.data.display())))?;
        let mut cmd = format!(
            "{} hook claude-code --server {} --data {}",
            shell_quote(&exe.to_string_lossy()),
            shell_quote(&a.server),
            shell_quote(&data.to_string_lossy())
        );
        if let Some(n) = a.every {
            cmd.push_str(&format!(" --every {n}"));
        }
        if a.significant_only {
            cmd.push_str(" --significant-only");
        }
        Some(cmd)
    } else {
        None
    };
    let events: Vec<&str> = HOOK_EVENTS
        .iter()
        .copied()
        .chain(a.tool_calls.then_some(TOOL_EVENT))
        .collect();
    let changed = merge_hooks(&mut settings, command.as_deref(), &events)?;
    if changed {
        let dir = path.parent().expect("settings.json has a parent");
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
        let mut text =
            serde_json::to_string_pretty(&settings).map_err(|e| Error::internal(e.to_string()))?;
        text.push('\n');
        write_atomically(&path, text.as_bytes())?;
    }
    if a.json {
        print_json(&json!({
            "settings": path,
            "changed": changed,
            "events": events,
            "command": command,
        }))
    } else {
        let what = match (install, changed) {
            (true, true) => "installed the ctx hooks in",
            (true, false) => "the ctx hooks were already in",
            (false, true) => "removed the ctx hooks from",
            (false, false) => "there were no ctx hooks in",
        };
        eprintln!("{what} {} ({})", path.display(), events.join(", "));
        Ok(())
    }
}

/// Whether a hook command is one `install` wrote.
fn is_ours(command: &str) -> bool {
    command.contains(" hook claude-code")
}

/// Removes ctx's command hooks from `settings.hooks` for [`HOOK_EVENTS`]
/// and [`TOOL_EVENT`] (dropping matcher groups and events left empty by
/// that), then, with a `command`, adds one matcher group running it per
/// event of `events`. Whether the settings changed.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings or their `hooks` are not
/// JSON objects, or an event's hooks are not a list.
fn merge_hooks(settings: &mut Value, command: Option<&str>, events: &[&str]) -> Result<bool> {
    let before = settings.clone();
    let not_object = |what: &str| {
        Error::invalid(
            "settings",
            format!("{what} is not a JSON object; fix it first"),
        )
    };
    let root = settings
        .as_object_mut()
        .ok_or_else(|| not_object("the settings file"))?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| not_object("`hooks`"))?;
    for event in HOOK_EVENTS.into_iter().chain([TOOL_EVENT]) {
        if !(hooks.contains_key(event) || command.is_some() && events.contains(&event)) {
            continue;
        }
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| {
                Error::invalid(
                    "settings",
                    format!("`hooks.{event}` is not a list; fix it first"),
                )
            })?;
        for group in groups.iter_mut() {
            if let Some(list) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                list.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
            }
        }
        groups.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|l| !l.is_empty())
        });
        if let Some(cmd) = command.filter(|_| events.contains(&event)) {
            groups.push(json!({"hooks": [{"type": "command", "command": cmd}]}));
        }
        if groups.is_empty() {
            hooks.remove(event);
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    Ok(*settings != before)
}

/// `s` as one POSIX shell word.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:@+=,".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader sees the old file or the new one.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("ctx-tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::unavailable(format!("cannot write {}: {e}", path.display()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_keeps_other_hooks_and_is_idempotent() {
        let mut s = json!({
            "model": "opus",
            "hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]
            }
        });
        let cmd = "/bin/ctx hook claude-code --server http://127.0.0.1:7878 --data /d";
        assert!(merge_hooks(&mut s, Some(cmd), &HOOK_EVENTS).unwrap());
        let once = s.clone();
        assert!(
            !merge_hooks(&mut s, Some(cmd), &HOOK_EVENTS).unwrap(),
            "a second install changes nothing"
        );
        assert_eq!(s, once);
        assert_eq!(s["model"], "opus");
        assert_eq!(s["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(s["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["command"], cmd);
        for e in ["PreCompact", "SessionEnd"] {
            assert_eq!(s["hooks"][e][0]["hooks"][0]["command"], cmd, "{e}");
        }
        // A reinstall with another server replaces the command, not adds one.
        let other = "/bin/ctx hook claude-code --server http://127.0.0.1:9 --data /d";
        assert!(merge_hooks(&mut s, Some(other), &HOOK_EVENTS).unwrap());
        assert_eq!(s["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["command"], other);
        assert!(merge_hooks(&mut s, None, &HOOK_EVENTS).unwrap());
        assert_eq!(
            s,
            json!({
                "model": "opus",
                "hooks": {
                    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
                    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]
                }
            }),
            "uninstall leaves exactly the user's hooks"
        );
        let mut empty = json!({});
        merge_hooks(&mut empty, Some(cmd), &HOOK_EVENTS).unwrap();
        merge_hooks(&mut empty, None, &HOOK_EVENTS).unwrap();
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn settings_that_are_not_objects_are_refused() {
        for bad in [
            json!([]),
            json!({"hooks": 3}),
            json!({"hooks": {"Stop": {}}}),
        ] {
            let mut s = bad.clone();
            let e = merge_hooks(&mut s, Some("ctx hook claude-code"), &HOOK_EVENTS).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("settings"), "{bad}");
        }
    }
}
