//! `ctx hooks doctor`: what keeps a project's installed hooks from
//! working, found the way the hook itself would find it (its command's
//! `--server`/`--server-from-data` and `--data`), and what the hooks
//! recorded of their own failures.

use std::path::{Path, PathBuf};

use ctx_core::{Error, ErrorKind, Result};
use serde::Serialize;
use serde_json::Value;

use super::install::{check_server, is_ours, read_settings};
use super::sync::{HookState, LAST_WARNING, LastWarning, state_dir};
use super::{DoctorArgs, Spec};
use crate::print_json;

/// One thing checked.
#[derive(Debug, Serialize)]
struct Check {
    /// What was checked.
    check: &'static str,
    /// Whether it is fine.
    ok: bool,
    /// What was found, and what to do when it is wrong.
    detail: String,
    /// The exit kind of a problem.
    #[serde(skip)]
    kind: ErrorKind,
}

impl Check {
    fn ok(check: &'static str, detail: impl Into<String>) -> Self {
        Check {
            check,
            ok: true,
            detail: detail.into(),
            kind: ErrorKind::Internal,
        }
    }

    fn problem(check: &'static str, kind: ErrorKind, detail: impl Into<String>) -> Self {
        Check {
            check,
            ok: false,
            detail: detail.into(),
            kind,
        }
    }
}

/// Runs `ctx hooks doctor`: prints each check, then fails with the first
/// problem's kind (its exit code) when there is one.
///
/// # Errors
/// The first problem found, as a summary naming how many there are.
pub async fn run_doctor(a: DoctorArgs) -> Result<()> {
    let spec = a.runtime.spec();
    let checks = checks(spec, &a.project).await;
    if a.json {
        print_json(&serde_json::json!({ "checks": checks }))?;
    } else {
        for c in &checks {
            outln!(
                "{} {}: {}",
                if c.ok { "ok     " } else { "PROBLEM" },
                c.check,
                c.detail
            );
        }
    }
    let problems: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
    match problems.first() {
        None => Ok(()),
        Some(first) => Err(Error::new(
            first.kind,
            format!(
                "{} problem(s) with the {} hooks of {}, the first: {}",
                problems.len(),
                spec.label,
                a.project.display(),
                first.detail
            ),
        )),
    }
}

/// Everything checked, in order; later checks are skipped when what they
/// need is missing.
async fn checks(spec: &Spec, project: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let path = project.join(spec.settings);
    let events = spec.installed(false);
    let settings = match read_settings(&path) {
        Ok(s) => s,
        Err(e) => {
            out.push(Check::problem("settings", e.kind, e.message));
            return out;
        }
    };
    let commands: Vec<(&str, Option<&str>)> = events
        .iter()
        .map(|&event| (event, ours(spec, &settings, event)))
        .collect();
    let missing: Vec<&str> = commands
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(e, _)| *e)
        .collect();
    let Some(command) = commands.iter().find_map(|(_, c)| *c) else {
        out.push(Check::problem(
            "hooks",
            ErrorKind::Invalid,
            format!(
                "no ctx hook in {}: run `ctx hooks install {} --project {}`",
                path.display(),
                spec.name,
                project.display()
            ),
        ));
        return out;
    };
    if missing.is_empty() {
        out.push(Check::ok(
            "hooks",
            format!("{} in {}", events.join(", "), path.display()),
        ));
    } else {
        out.push(Check::problem(
            "hooks",
            ErrorKind::Invalid,
            format!(
                "no ctx hook for {} in {}: run `ctx hooks install {}` again",
                missing.join(", "),
                path.display(),
                spec.name
            ),
        ));
    }
    let words = shell_words(command);
    let flag = |name: &str| {
        words
            .iter()
            .position(|w| w == name)
            .and_then(|i| words.get(i + 1))
            .cloned()
    };
    let Some(data) = flag("--data").map(PathBuf::from) else {
        out.push(Check::problem(
            "data",
            ErrorKind::Invalid,
            format!("the hook command names no --data: {command}; run `ctx hooks install` again"),
        ));
        return out;
    };
    let Some(token) = crate::read_token_file(&data) else {
        out.push(Check::problem(
            "token",
            ErrorKind::Invalid,
            format!(
                "there is no token file {} (the hook reads its token there): is {} the data directory of your `ctx serve`?",
                crate::serve::token_file(&data).display(),
                data.display()
            ),
        ));
        return out;
    };
    out.push(Check::ok(
        "token",
        crate::serve::token_file(&data).display().to_string(),
    ));
    let recorded = crate::datadir::read_server(&data);
    let server = if words.iter().any(|w| w == "--server-from-data") {
        match &recorded {
            Some(r) => Some(r.clone()),
            None => {
                out.push(Check::problem(
                    "server",
                    ErrorKind::Unavailable,
                    format!(
                        "there is no server address in {}: start `ctx serve --data {}`",
                        crate::datadir::server_file(&data).display(),
                        data.display()
                    ),
                ));
                None
            }
        }
    } else {
        Some(flag("--server").unwrap_or_else(|| "http://127.0.0.1:7878".to_owned()))
    };
    if let Some(server) = server {
        match check_server(&server, &token, &data, recorded.as_deref()).await {
            Ok(()) => out.push(Check::ok(
                "server",
                format!("{server} answers and accepts the token"),
            )),
            Err(e) => out.push(Check::problem("server", e.kind, e.message)),
        }
    }
    let dir = state_dir(&data, spec);
    match std::fs::read(dir.join(LAST_WARNING))
        .ok()
        .and_then(|b| serde_json::from_slice::<LastWarning>(&b).ok())
    {
        Some(w) => out.push(Check::problem(
            "last run",
            ErrorKind::Unavailable,
            format!(
                "the newest hook run ({}) warned: {}",
                w.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                w.warnings.join("; ")
            ),
        )),
        None => out.push(Check::ok("last run", "no warning recorded")),
    }
    let pending = pending_sessions(&dir);
    if pending.is_empty() {
        out.push(Check::ok("pending", "no session has lines waiting"));
    } else {
        out.push(Check::problem(
            "pending",
            ErrorKind::Unavailable,
            pending.join("; "),
        ));
    }
    out
}

/// The command of ctx's hook for `event` in `settings`, if there is one.
fn ours<'a>(spec: &Spec, settings: &'a Value, event: &str) -> Option<&'a str> {
    settings
        .get("hooks")?
        .get(event)?
        .as_array()?
        .iter()
        .filter_map(|g| g.get("hooks").and_then(Value::as_array))
        .flatten()
        .filter_map(|h| h.get("command").and_then(Value::as_str))
        .find(|c| is_ours(spec, c))
}

/// The sessions whose lines wait, each with why.
fn pending_sessions(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for project in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(project.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let state = std::fs::read(file.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<HookState>(&b).ok());
            if let Some(s) = state.filter(|s| s.pending) {
                out.push(format!(
                    "session {} has lines waiting: {}",
                    s.session_id,
                    s.error.as_deref().unwrap_or("the last attempt failed")
                ));
            }
        }
    }
    out.sort();
    out
}

/// The words of a POSIX shell command as `install` quotes them (plain
/// words and single quotes, `'\''` for a quote inside).
fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::install::shell_quote;

    #[test]
    fn shell_words_read_back_what_install_quotes() {
        let parts = [
            "/opt/ctx bin/ctx",
            "it's",
            "",
            "http://127.0.0.1:7878",
            "a b'c",
        ];
        let line = parts
            .iter()
            .map(|p| shell_quote(p))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(shell_words(&line), parts);
    }
}
