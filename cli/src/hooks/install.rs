//! `ctx hooks install|uninstall`: ctx's command hooks merged into (or
//! taken out of) a project's runtime settings (`.claude/settings.json`,
//! `.codex/hooks.json`, `.gemini/settings.json`: the same `hooks` shape in
//! all three), after checking that they can work (the project, the token,
//! a live server that accepts it).

use std::path::{Path, PathBuf};

use ctx_core::{Error, ErrorKind, Result};
use serde_json::{Map, Value, json};

use super::{HooksCommand, InstallArgs, Runtime, Spec};
use crate::client::Client;
use crate::print_json;

/// Runs `ctx hooks install|uninstall|doctor`.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings file is not a JSON
/// object; `Unavailable` when it cannot be read or written; for `install`,
/// what [`check_install`] finds; for `doctor`, the first problem found.
pub async fn run_hooks(cmd: HooksCommand) -> Result<()> {
    let (a, install) = match cmd {
        HooksCommand::Install(a) => (a, true),
        HooksCommand::Uninstall(a) => (a, false),
        HooksCommand::Doctor(d) => return super::doctor::run_doctor(d).await,
    };
    let spec = a.runtime.spec();
    let path = a.project.join(spec.settings);
    // Checked before anything is written: a hook that cannot work fails
    // only in warnings the runtime does not show.
    let checked = if install {
        Some(check_install(&a).await?)
    } else {
        None
    };
    let mut settings = read_settings(&path)?;
    let command = match &checked {
        Some(c) => {
            let exe = std::env::current_exe()
                .map_err(|e| Error::unavailable(format!("where is this ctx binary? {e}")))?;
            let server = if c.from_data {
                "--server-from-data".to_owned()
            } else {
                format!("--server {}", shell_quote(&a.server))
            };
            let mut cmd = format!(
                "{} hook {} {server} --data {}",
                shell_quote(&exe.to_string_lossy()),
                spec.name,
                shell_quote(&c.data.to_string_lossy())
            );
            if let Some(n) = a.every {
                cmd.push_str(&format!(" --every {n}"));
            }
            if a.significant_only {
                cmd.push_str(" --significant-only");
            }
            Some(cmd)
        }
        None => None,
    };
    let events = spec.installed(a.tool_calls);
    let mut changed = merge_hooks(&mut settings, spec, command.as_deref(), &events)?;
    if changed {
        let mut text =
            serde_json::to_string_pretty(&settings).map_err(|e| Error::internal(e.to_string()))?;
        text.push('\n');
        write_creating(&path, text.as_bytes())?;
    }
    // Codex runs hooks only with its `codex_hooks` feature on.
    let feature = (install && a.runtime == Runtime::Codex).then(|| a.project.join(CODEX_CONFIG));
    if let Some(config) = &feature {
        changed |= enable_codex_hooks(config)?;
    }
    if a.json {
        print_json(&json!({
            "settings": path,
            "config": feature,
            "changed": changed,
            "events": events,
            "command": command,
            "server": checked.as_ref().map(|c| &c.server),
            "server_from_data": checked.as_ref().map(|c| c.from_data),
        }))
    } else {
        let what = match (install, changed) {
            (true, true) => "installed the ctx hooks in",
            (true, false) => "the ctx hooks were already in",
            (false, true) => "removed the ctx hooks from",
            (false, false) => "there were no ctx hooks in",
        };
        eprintln!("{what} {} ({})", path.display(), events.join(", "));
        if let Some(config) = &feature {
            eprintln!(
                "[features] codex_hooks = true is set in {}; Codex runs a new hook only once you have reviewed and trusted it (/hooks in Codex)",
                config.display()
            );
        }
        if let Some(c) = checked.as_ref().filter(|c| c.from_data) {
            eprintln!(
                "the hook reads the server's address from {} at every run, so it follows `ctx serve --data {}` to another port",
                crate::datadir::server_file(&c.data).display(),
                c.data.display()
            );
        }
        Ok(())
    }
}

/// A project's settings: an empty object when the file is missing or
/// blank.
///
/// # Errors
/// `Invalid` (field `settings`) when it is not JSON; `Unavailable` when it
/// cannot be read.
pub(super) fn read_settings(path: &Path) -> Result<Value> {
    match std::fs::read(path) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(Value::Object(Map::new())),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::invalid(
                "settings",
                format!("{} is not JSON: {e}; fix it first", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(Error::unavailable(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// What `install` checked.
struct Checked {
    /// The data directory, absolute.
    data: PathBuf,
    /// The server's URL.
    server: String,
    /// Whether it is the data directory's own `ctx serve`, whose address
    /// the hook reads from `<data>/server` at every run.
    from_data: bool,
}

/// What an installed hook needs, checked: the project directory exists,
/// the data directory holds a token file (the hook reads its token there),
/// and a server answers at `--server` and accepts that token.
///
/// # Errors
/// `Invalid` naming `project` or `data`; as [`check_server`].
async fn check_install(a: &InstallArgs) -> Result<Checked> {
    if !a.project.is_dir() {
        return Err(Error::invalid(
            "project",
            format!(
                "there is no project directory {}: pass --project the directory Claude Code runs in (it must exist; its .claude/settings.json gets the hooks)",
                a.project.display()
            ),
        ));
    }
    let data = std::path::absolute(&a.data)
        .map_err(|e| Error::invalid("data", format!("{}: {e}", a.data.display())))?;
    let Some(token) = crate::read_token_file(&data) else {
        return Err(Error::invalid(
            "data",
            format!(
                "there is no token file {}: the hook reads its token there; pass --data the directory `ctx serve` was started with (it writes the token), or write one made by `ctx tokens add TENANT --data DIR` there",
                crate::serve::token_file(&data).display()
            ),
        ));
    };
    let server = a.server.trim_end_matches('/').to_owned();
    let recorded = crate::datadir::read_server(&data);
    check_server(&server, &token, &data, recorded.as_deref()).await?;
    Ok(Checked {
        from_data: recorded.as_deref() == Some(server.as_str()),
        data,
        server,
    })
}

/// How long a check of the server may take.
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Checks that a ctx server answers at `server` and accepts `token` (the
/// one in `data`'s token file); `recorded` is where the data directory's
/// own server last said it listens.
///
/// # Errors
/// `Unavailable` when nothing answers (with `--server` and where the data
/// directory's server listens); `Unauthenticated` when the token is
/// refused.
pub(super) async fn check_server(
    server: &str,
    token: &str,
    data: &Path,
    recorded: Option<&str>,
) -> Result<()> {
    let client = Client::new(server, Some(token.to_owned()))
        .with_timeout(CHECK_TIMEOUT)
        .map_err(|e| Error::internal(format!("HTTP client: {e}")))?;
    // Any call that needs the token: one ref of the hooks' prefix.
    match client.list_refs("claude/", Some(1)).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind == ErrorKind::Unauthenticated => Err(Error::new(
            ErrorKind::Unauthenticated,
            format!(
                "the server at {server} refused the token in {}: pass --data the directory of the `ctx serve` at that address, or --server the server that data directory belongs to",
                crate::serve::token_file(data).display()
            ),
        )),
        Err(e) => {
            let hint = match recorded {
                Some(r) if r != server => format!(
                    "; the data directory's `ctx serve` last listened on {r}: install the hooks with --server {r}"
                ),
                _ => format!(
                    "; start it first (`ctx serve --data {}`), or install the hooks with --server the address of a running one",
                    data.display()
                ),
            };
            Err(Error::unavailable(format!("{}{hint}", e.message)))
        }
    }
}

/// Whether a hook command is one `install` wrote for `spec`'s runtime.
pub(super) fn is_ours(spec: &Spec, command: &str) -> bool {
    let needle = format!(" hook {}", spec.name);
    command.match_indices(&needle).any(|(at, _)| {
        command[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '"' || c == '\'')
    })
}

/// The Codex configuration file, under the project, whose `[features]`
/// switch hooks on.
const CODEX_CONFIG: &str = ".codex/config.toml";

/// Sets `features.codex_hooks = true` in the Codex configuration file at
/// `path` (made when missing), keeping everything else in it as written.
/// Whether it changed.
///
/// # Errors
/// `Invalid` (field `config`) when the file is not TOML, or its
/// `features` not a table; `Unavailable` when it cannot be read or
/// written.
fn enable_codex_hooks(path: &Path) -> Result<bool> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Error::unavailable(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        Error::invalid(
            "config",
            format!("{} is not TOML: {e}; fix it first", path.display()),
        )
    })?;
    let features = doc
        .entry("features")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .ok_or_else(|| {
            Error::invalid(
                "config",
                format!(
                    "`features` in {} is not a table; fix it first",
                    path.display()
                ),
            )
        })?;
    if features
        .get("codex_hooks")
        .and_then(toml_edit::Item::as_bool)
        == Some(true)
    {
        return Ok(false);
    }
    features.insert("codex_hooks", toml_edit::value(true));
    write_creating(path, doc.to_string().as_bytes())?;
    Ok(true)
}

/// Writes `bytes` to `path` atomically, making its directory first.
fn write_creating(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().expect("a settings file has a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    write_atomically(path, bytes)
}

/// Removes ctx's command hooks from `settings.hooks` for every event
/// `spec`'s install may have written (dropping matcher groups and events
/// left empty by that), then, with a `command`, adds one matcher group
/// running it per event of `events`. Whether the settings changed.
///
/// # Errors
/// `Invalid` (field `settings`) when the settings or their `hooks` are not
/// JSON objects, or an event's hooks are not a list.
fn merge_hooks(
    settings: &mut Value,
    spec: &Spec,
    command: Option<&str>,
    events: &[&str],
) -> Result<bool> {
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
    for event in spec.installed(true) {
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
                        .is_some_and(|c| is_ours(spec, c))
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
pub(super) fn shell_quote(s: &str) -> String {
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

    const CLAUDE: &Spec = Runtime::ClaudeCode.spec();
    const EVENTS: [&str; 3] = ["Stop", "PreCompact", "SessionEnd"];

    #[test]
    fn a_hook_is_ours_only_under_the_runtimes_own_name() {
        let codex = Runtime::Codex.spec();
        assert!(is_ours(codex, "ctx hook codex"));
        assert!(is_ours(codex, "/bin/ctx hook codex --every 2"));
        assert!(is_ours(codex, "'/my dir/ctx' hook codex\t--data /d"));
        assert!(!is_ours(codex, "ctx hook codex-nightly --data /d"));
        assert!(!is_ours(codex, "ctx hook codexx"));
        assert!(!is_ours(CLAUDE, "ctx hook codex"));
    }

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
        assert!(merge_hooks(&mut s, CLAUDE, Some(cmd), &EVENTS).unwrap());
        let once = s.clone();
        assert!(
            !merge_hooks(&mut s, CLAUDE, Some(cmd), &EVENTS).unwrap(),
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
        assert!(merge_hooks(&mut s, CLAUDE, Some(other), &EVENTS).unwrap());
        assert_eq!(s["hooks"]["Stop"].as_array().unwrap().len(), 2);
        assert_eq!(s["hooks"]["Stop"][1]["hooks"][0]["command"], other);
        assert!(merge_hooks(&mut s, CLAUDE, None, &EVENTS).unwrap());
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
        merge_hooks(&mut empty, CLAUDE, Some(cmd), &EVENTS).unwrap();
        merge_hooks(&mut empty, CLAUDE, None, &EVENTS).unwrap();
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn codex_and_gemini_hooks_merge_into_their_own_events() {
        let gemini = Runtime::Gemini.spec();
        let mut s = json!({"hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "notify"}]}]}});
        let cmd = "/bin/ctx hook gemini --server http://127.0.0.1:7878 --data /d";
        let events = gemini.installed(true);
        assert_eq!(
            events,
            ["AfterAgent", "PreCompress", "SessionEnd", "AfterTool"]
        );
        assert!(merge_hooks(&mut s, gemini, Some(cmd), &events).unwrap());
        assert_eq!(s["hooks"]["AfterAgent"][1]["hooks"][0]["command"], cmd);
        assert_eq!(s["hooks"]["AfterTool"][0]["hooks"][0]["command"], cmd);
        // Another runtime's ctx hook in the same file is not ours to touch.
        let claude = "/bin/ctx hook claude-code --data /d";
        s["hooks"]["SessionEnd"][0]["hooks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "command", "command": claude}));
        assert!(merge_hooks(&mut s, gemini, None, &events).unwrap());
        assert_eq!(
            s,
            json!({"hooks": {
                "AfterAgent": [{"hooks": [{"type": "command", "command": "notify"}]}],
                "SessionEnd": [{"hooks": [{"type": "command", "command": claude}]}]
            }})
        );
        let codex = Runtime::Codex.spec();
        assert_eq!(codex.installed(false), ["Stop", "PreCompact"]);
    }

    #[test]
    fn the_codex_feature_is_switched_on_keeping_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".codex/config.toml");
        assert!(enable_codex_hooks(&path).unwrap(), "made when missing");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[features]\ncodex_hooks = true\n"
        );
        let mine =
            "# mine\nmodel = \"o4\"\n\n[features]\nweb_search = true # kept\ncodex_hooks = false\n";
        std::fs::write(&path, mine).unwrap();
        assert!(enable_codex_hooks(&path).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# mine\nmodel = \"o4\"\n"), "{text}");
        assert!(text.contains("web_search = true # kept"), "{text}");
        assert!(text.contains("codex_hooks = true"), "{text}");
        assert!(
            !enable_codex_hooks(&path).unwrap(),
            "a second run changes nothing"
        );
        std::fs::write(&path, "features = 3\n").unwrap();
        let e = enable_codex_hooks(&path).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("config"));
        std::fs::write(&path, "[features\n").unwrap();
        let e = enable_codex_hooks(&path).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("config"));
    }

    #[test]
    fn settings_that_are_not_objects_are_refused() {
        for bad in [
            json!([]),
            json!({"hooks": 3}),
            json!({"hooks": {"Stop": {}}}),
        ] {
            let mut s = bad.clone();
            let e = merge_hooks(&mut s, CLAUDE, Some("ctx hook claude-code"), &EVENTS).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("settings"), "{bad}");
        }
    }
}
