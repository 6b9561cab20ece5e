//! The runtimes' hooks end to end, against a real `ctx serve`: the
//! installed hook command (run through the shell, as Claude Code, Codex and
//! Gemini CLI run it) checkpoints a session log's complete new lines onto
//! the session's ref, skips what another writer already stored, survives a
//! server that is down, and `ctx resume` forks a session at any commit.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use ctx_tests::{Server, ctx_bin};
use serde_json::{Value, json};

const SESSION: &str = "5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10";

fn fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("data/claude-code-session.jsonl"))
        .expect("the fixture transcript")
}

/// The fixture's first `n` lines, newline-terminated.
fn first_lines(bytes: &[u8], n: usize) -> Vec<u8> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .take(n)
        .flatten()
        .copied()
        .collect()
}

/// Runs `command` through `sh -c` with the hook's JSON on stdin; its exit
/// code and stderr.
fn run_hook(command: &str, session: &str, transcript: &Path, event: &str) -> (i32, String) {
    let input = json!({
        "session_id": session,
        "transcript_path": transcript,
        "cwd": transcript.parent().unwrap(),
        "hook_event_name": event,
    });
    let (code, _, err) = run_hook_with(command, &input);
    (code, err)
}

/// The ctx hook command in a project's settings, for `event`.
fn installed_command(project: &Path, event: &str) -> String {
    let s: Value = serde_json::from_slice(
        &std::fs::read(project.join(".claude/settings.json")).expect("settings written"),
    )
    .unwrap();
    s["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap())
        .filter_map(|h| h["command"].as_str())
        .find(|c| c.contains(" hook claude-code"))
        .unwrap_or_else(|| panic!("no ctx hook for {event}: {s}"))
        .to_owned()
}

async fn tip(server: &Server, name: &str) -> Option<String> {
    let (status, v) = server
        .client()
        .call("GET", &format!("/v1/refs/{name}"), None)
        .await
        .unwrap();
    (status == 200).then(|| v["target"].as_str().unwrap().to_owned())
}

async fn history_len(server: &Server, id: &str) -> usize {
    let h = server
        .client()
        .ok("GET", &format!("/v1/commits/{id}/history?depth=1000"), None)
        .await;
    h["commits"].as_array().expect("commits").len()
}

#[tokio::test]
async fn the_hook_checkpoints_new_complete_lines_once_and_resume_forks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data);
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join(".claude")).unwrap();
    // The user's own hooks stay.
    std::fs::write(
        project.join(".claude/settings.json"),
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"true"}]}]},"model":"opus"}"#,
    )
    .unwrap();
    let first_url = server.url.clone();
    let install = |verb: &str| {
        Command::new(ctx_bin())
            .args(["hooks", verb, "claude-code", "--project"])
            .arg(&project)
            .args(["--server", &first_url, "--data"])
            .arg(&data)
            .output()
            .expect("ctx hooks runs")
    };
    assert!(install("install").status.success());
    let once = std::fs::read(project.join(".claude/settings.json")).unwrap();
    assert!(install("install").status.success());
    assert_eq!(
        std::fs::read(project.join(".claude/settings.json")).unwrap(),
        once,
        "installing twice changes nothing"
    );
    let settings: Value = serde_json::from_slice(&once).unwrap();
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["hooks"]["Stop"][0]["hooks"][0]["command"], "true");
    let stop = installed_command(&project, "Stop");
    assert_eq!(installed_command(&project, "PreCompact"), stop);
    assert_eq!(installed_command(&project, "SessionEnd"), stop);

    // A transcript where Claude Code keeps it, the last line still being written.
    let claude = dir.path().join("claude");
    let pdir = claude.join("projects").join("-tmp-proj");
    std::fs::create_dir_all(&pdir).unwrap();
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    let full = fixture();
    let mut partial = first_lines(&full, 10);
    partial.extend_from_slice(br#"{"type":"user","uuid":"half-writ"#);
    std::fs::write(&transcript, &partial).unwrap();
    let name = format!("claude/-tmp-proj/{SESSION}");

    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t1 = tip(&server, &name).await.expect("the hook made the ref");
    let c = server.client();
    assert_eq!(
        c.materialize(&t1, "root").await,
        first_lines(&full, 10),
        "the complete lines, not the half-written one"
    );

    // Nothing new: nothing written.
    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert_eq!(tip(&server, &name).await.as_deref(), Some(t1.as_str()));

    // The rest of the transcript arrives.
    std::fs::write(&transcript, &full).unwrap();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "PreCompact");
    assert_eq!(code, 0, "{err}");
    let t2 = tip(&server, &name).await.unwrap();
    assert_ne!(t2, t1);
    assert_eq!(c.materialize(&t2, "root").await, full);

    // Another writer (a SessionStore) appends an entry the transcript will
    // also hold: the hook stores only what the chain lacks.
    let x = r#"{"type":"user","uuid":"00000000-0000-4000-8000-0000000000aa","parentUuid":null,"sessionId":"5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10","timestamp":"2026-11-20T10:00:00.000Z","message":{"role":"user","content":"and one more thing"}}"#;
    let y = r#"{"type":"assistant","uuid":"00000000-0000-4000-8000-0000000000ab","parentUuid":"00000000-0000-4000-8000-0000000000aa","sessionId":"5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10","timestamp":"2026-11-20T10:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}"#;
    let other = c
        .ok(
            "POST",
            "/v1/commits",
            Some(&json!({
                "parent": t2, "commit_type": "delta", "format": "claude-code-v1",
                "delta": format!("{x}\n"), "template": "sdk", "principal": "sdk",
                "checkpoint": "turn_boundary",
                "ref": {"name": name, "expected": t2},
            })),
        )
        .await;
    let t3 = other["id"].as_str().unwrap().to_owned();
    let mut grown = full.clone();
    grown.extend_from_slice(format!("{x}\n{y}\n").as_bytes());
    std::fs::write(&transcript, &grown).unwrap();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t4 = tip(&server, &name).await.unwrap();
    assert_eq!(
        c.materialize(&t4, "root").await,
        grown,
        "x once, from the other writer, then y"
    );
    assert_eq!(
        history_len(&server, &t4).await,
        history_len(&server, &t3).await + 1
    );

    // The server is down: the hook warns, exits 0 and keeps the lines.
    let z = r#"{"type":"user","uuid":"00000000-0000-4000-8000-0000000000ac","parentUuid":"00000000-0000-4000-8000-0000000000ab","sessionId":"5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10","timestamp":"2026-11-20T10:01:00.000Z","message":{"role":"user","content":"thanks"}}"#;
    grown.extend_from_slice(format!("{z}\n").as_bytes());
    std::fs::write(&transcript, &grown).unwrap();
    let url = server.url.clone();
    server.kill();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "SessionEnd");
    assert_eq!(code, 0, "a hook never fails Claude Code: {err}");
    assert!(err.contains("warning"), "{err}");
    // Back up (on another port): the next hook, of another session,
    // retries the pending lines.
    let server = Server::start(&data);
    let retry = stop.replace(&url, &server.url);
    let other_session = "11111111-2222-4333-8444-555555555555";
    let other_transcript = pdir.join(format!("{other_session}.jsonl"));
    std::fs::write(&other_transcript, first_lines(&full, 3)).unwrap();
    let (code, err) = run_hook(&retry, other_session, &other_transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t5 = tip(&server, &name).await.unwrap();
    let c = server.client();
    assert_eq!(
        c.materialize(&t5, "root").await,
        grown,
        "z arrived late, once"
    );
    let t_other = tip(&server, &format!("claude/-tmp-proj/{other_session}"))
        .await
        .unwrap();
    assert_eq!(c.materialize(&t_other, "root").await, first_lines(&full, 3));

    // Resume from the first hook's commit: a new session file with the
    // lines up to there, a snapshot commit on top of it, and the next hook
    // of the new session chains onto that.
    let out = Command::new(ctx_bin())
        .args(["resume", &t1, "--json", "--project"])
        .arg(&project)
        .arg("--claude-dir")
        .arg(&claude)
        .args(["--server", &server.url, "--data"])
        .arg(&data)
        .env_remove("CTX_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let new_session = r["session_id"].as_str().unwrap().to_owned();
    let path = std::path::PathBuf::from(r["path"].as_str().unwrap());
    assert_eq!(
        path.file_name().unwrap().to_str().unwrap(),
        format!("{new_session}.jsonl")
    );
    assert!(path.starts_with(claude.join("projects")));
    let written = std::fs::read(&path).unwrap();
    let lines: Vec<Value> = written
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, r["entries"].as_u64().unwrap());
    assert_eq!(lines.last().unwrap()["type"], "custom-title");
    for l in &lines {
        if l.get("sessionId").is_some() {
            assert_eq!(l["sessionId"], new_session.as_str());
        }
    }
    let forked: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("forkedFrom").is_some())
        .collect();
    assert!(!forked.is_empty());
    assert!(
        forked
            .iter()
            .all(|l| l["forkedFrom"]["sessionId"] == SESSION)
    );
    let snapshot = r["commit"].as_str().unwrap();
    let show = c.ok("GET", &format!("/v1/commits/{snapshot}"), None).await;
    assert_eq!(
        show["parent"],
        t1.as_str(),
        "the fork descends from the commit"
    );
    assert_eq!(show["commit_type"], "snapshot");
    let new_ref = r["ref"].as_str().unwrap();
    assert_eq!(tip(&server, new_ref).await.as_deref(), Some(snapshot));
    let mut continued = written.clone();
    continued.extend_from_slice(format!("{z}\n").as_bytes());
    std::fs::write(&path, &continued).unwrap();
    let (code, err) = run_hook(&retry, &new_session, &path, "Stop");
    assert_eq!(code, 0, "{err}");
    let after = tip(&server, new_ref).await.unwrap();
    let show = c.ok("GET", &format!("/v1/commits/{after}"), None).await;
    assert_eq!(
        show["parent"], snapshot,
        "one commit of the new line on the fork"
    );
    assert_eq!(c.materialize(&after, "compaction").await, continued);

    // Uninstall leaves the user's settings as they were.
    assert!(install("uninstall").status.success());
    let s: Value =
        serde_json::from_slice(&std::fs::read(project.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        s,
        json!({"hooks":{"Stop":[{"hooks":[{"type":"command","command":"true"}]}]},"model":"opus"})
    );
}

#[test]
fn a_hook_with_bad_input_warns_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    for input in [
        "not json",
        r#"{"session_id": "../x", "transcript_path": "/nonexistent"}"#,
    ] {
        let mut child = Command::new(ctx_bin())
            .args([
                "hook",
                "claude-code",
                "--server",
                "http://127.0.0.1:9",
                "--data",
            ])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{input}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("warning"), "{input}: {err}");
    }
    // Input naming no usable session leaves no session state, only the
    // run's warning, for `ctx hooks doctor` (Claude Code hides stderr).
    let hooks = dir.path().join("hooks/claude-code");
    let left: Vec<_> = std::fs::read_dir(&hooks)
        .expect("the warning is recorded")
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["last-warning.json"]);
    let w: Value =
        serde_json::from_slice(&std::fs::read(hooks.join("last-warning.json")).unwrap()).unwrap();
    assert!(
        w["warnings"][0].as_str().unwrap().contains("session_id"),
        "the last run's warning: {w}"
    );
}

/// A server on `dir`/data, the hooks installed in `dir`/proj, and the
/// folder Claude Code keeps that project's transcripts in: the server, the
/// installed hook command, the folder.
fn hooked(dir: &Path) -> (Server, String, std::path::PathBuf) {
    let server = Server::start(&dir.join("data"));
    install(dir, &server, &[]);
    let hook = installed_command(&dir.join("proj"), "Stop");
    let pdir = dir.join("claude/projects/-tmp-proj");
    std::fs::create_dir_all(&pdir).unwrap();
    (server, hook, pdir)
}

/// `ctx hooks install claude-code` (with `extra` flags) into `dir`/proj,
/// the hook talking to `server` over `dir`/data.
fn install(dir: &Path, server: &Server, extra: &[&str]) {
    let project = dir.join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let out = Command::new(ctx_bin())
        .args(["hooks", "install", "claude-code", "--project"])
        .arg(&project)
        .args(["--server", &server.url, "--data"])
        .arg(dir.join("data"))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A line Claude Code's format cannot read (a misspelt entry, text that is
/// not JSON) in the middle of a live session is stored as written: it
/// blocks neither the lines after it nor other sessions' hooks, and at
/// SessionEnd the last line is stored even without its newline. What is
/// recorded is the file, byte for byte.
#[tokio::test]
async fn a_poison_line_never_stops_a_session_and_session_end_keeps_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    let name = format!("claude/-tmp-proj/{SESSION}");

    let full = fixture();
    let lines: Vec<&[u8]> = full.split_inclusive(|&b| b == b'\n').collect();
    let mut file: Vec<u8> = lines[..4].concat();
    file.extend_from_slice(
        b"{\"type\":\"user\",\"uuid\":\"p1\",\"message\":{\"role\":\"user\",\"contnet\":\"misspelt\"}}\n",
    );
    file.extend_from_slice(b"not json at all\n");
    let half = lines.len() / 2;
    file.extend_from_slice(&lines[4..half].concat());
    std::fs::write(&transcript, &file).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "nothing is pending: {err}");
    let c = server.client();
    let t1 = tip(&server, &name).await.expect("the hook made the ref");
    assert!(
        c.materialize(&t1, "root").await == file,
        "the poison lines as written"
    );

    // The rest arrives, the last line without its newline, and the session
    // ends: every byte is recorded.
    file.extend_from_slice(&lines[half..].concat());
    let last = br#"{"type":"user","uuid":"00000000-0000-4000-8000-0000000000ff","sessionId":"5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e10","timestamp":"2026-11-20T11:00:00.000Z","message":{"role":"user","content":"bye"}}"#;
    file.extend_from_slice(last);
    std::fs::write(&transcript, &file).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t2 = tip(&server, &name).await.unwrap();
    assert!(
        c.materialize(&t2, "root").await == file[..file.len() - last.len()],
        "a Stop stores the complete lines"
    );
    let (code, err) = run_hook(&hook, SESSION, &transcript, "SessionEnd");
    assert_eq!(code, 0, "{err}");
    let t3 = tip(&server, &name).await.unwrap();
    assert!(c.materialize(&t3, "root").await == file, "byte for byte");
    let exported = server.cli(&["export", &name]);
    assert_eq!(exported.0, 0);
    assert!(exported.1 == file, "the export is the file");

    // Another session's hook has nothing of this one to retry.
    let other = "11111111-2222-4333-8444-555555555555";
    let other_transcript = pdir.join(format!("{other}.jsonl"));
    std::fs::write(&other_transcript, lines[..3].concat()).unwrap();
    let (code, err) = run_hook(&hook, other, &other_transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("pending"), "{err}");
    assert_eq!(tip(&server, &name).await.unwrap(), t3);
}

/// A runtime that dies mid-turn (no `Stop`, no `SessionEnd`) leaves lines
/// its hooks never stored. While its transcript is fresh (a live session
/// mid-turn) other sessions' hooks leave it to its own; once it has been
/// quiet for a minute, the next hook of any session stores its tail, byte
/// for byte, and the session's own hook, should it come back, has nothing
/// left to add.
#[tokio::test]
async fn the_next_hook_of_any_session_stores_the_tail_a_dead_runtime_left() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let full = fixture();
    let lines: Vec<&[u8]> = full.split_inclusive(|&b| b == b'\n').collect();
    let dead = pdir.join(format!("{SESSION}.jsonl"));
    let name = format!("claude/-tmp-proj/{SESSION}");
    std::fs::write(&dead, lines[..3].concat()).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &dead, "Stop");
    assert_eq!(code, 0, "{err}");
    let stored = tip(&server, &name).await.expect("the first turn is stored");
    // The runtime writes the next turn's lines, then dies.
    std::fs::write(&dead, &full).unwrap();

    let other = "11111111-2222-4333-8444-555555555555";
    let other_transcript = pdir.join(format!("{other}.jsonl"));
    std::fs::write(&other_transcript, lines[..2].concat()).unwrap();
    let (code, err) = run_hook(&hook, other, &other_transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        tip(&server, &name).await.unwrap(),
        stored,
        "a transcript written just now is its own hooks' to store"
    );

    // Two minutes before it was last written: quiet ever since.
    let written = std::fs::metadata(&dead).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(&dead)
        .unwrap()
        .set_modified(written - std::time::Duration::from_secs(120))
        .unwrap();
    std::fs::write(&other_transcript, lines[..4].concat()).unwrap();
    let (code, err) = run_hook(&hook, other, &other_transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let recovered = tip(&server, &name).await.unwrap();
    assert_ne!(
        recovered, stored,
        "the other session's hook stored the tail"
    );
    let c = server.client();
    assert!(
        c.materialize(&recovered, "root").await == full,
        "the dead session's transcript, byte for byte"
    );
    let commit = c.ok("GET", &format!("/v1/commits/{recovered}"), None).await;
    assert_eq!(commit["checkpoint"], "explicit", "{commit}");
    assert!(
        c.materialize(
            &tip(&server, &format!("claude/-tmp-proj/{other}"))
                .await
                .unwrap(),
            "root"
        )
        .await
            == lines[..4].concat(),
        "and its own lines"
    );
    let (code, err) = run_hook(&hook, SESSION, &dead, "SessionEnd");
    assert_eq!(code, 0, "{err}");
    assert_eq!(tip(&server, &name).await.unwrap(), recovered);
}

/// Hooks of one session running at once (Claude Code can fire Stop,
/// PreCompact and SessionEnd together) record the transcript once, byte for
/// byte: entries without a `uuid` (summaries, file-history snapshots)
/// another hook already stored are not appended again.
#[tokio::test]
async fn concurrent_hooks_of_one_session_record_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let full = fixture();
    let count = full.split_inclusive(|&b| b == b'\n').count();
    assert!(
        full.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .any(|l| !l.windows(6).any(|w| w == b"\"uuid\"")),
        "the fixture has entries without a uuid"
    );
    let c = server.client();
    for trial in 0..5 {
        let session = format!("5f0c9d2e-7b1a-4c3e-9f21-0a8b6c4d2e{trial:02}");
        let transcript = pdir.join(format!("{session}.jsonl"));
        for upto in [count / 2, count] {
            std::fs::write(&transcript, first_lines(&full, upto)).unwrap();
            let runs: Vec<_> = [
                "Stop",
                "PreCompact",
                "SessionEnd",
                "Stop",
                "PreCompact",
                "Stop",
            ]
            .into_iter()
            .map(|event| {
                let (hook, session, transcript) =
                    (hook.clone(), session.clone(), transcript.clone());
                std::thread::spawn(move || run_hook(&hook, &session, &transcript, event))
            })
            .collect();
            for r in runs {
                let (code, err) = r.join().unwrap();
                assert_eq!(code, 0, "{err}");
            }
        }
        // Whatever raced, one more hook settles what is pending.
        let (code, err) = run_hook(&hook, &session, &transcript, "Stop");
        assert_eq!(code, 0, "{err}");
        let t = tip(&server, &format!("claude/-tmp-proj/{session}"))
            .await
            .unwrap();
        let got = c.materialize(&t, "root").await;
        assert!(
            got == full,
            "trial {trial}: {} bytes recorded for a {}-byte file",
            got.len(),
            full.len()
        );
    }
}

/// A last line cut inside a character (the runtime killed mid-write) is
/// left out at SessionEnd: the complete lines before it are stored.
#[tokio::test]
async fn a_last_line_cut_inside_a_character_does_not_hold_back_the_lines_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let full = fixture();
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    let lines = first_lines(&full, 5);
    std::fs::write(&transcript, first_lines(&full, 3)).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let mut file = lines.clone();
    file.extend_from_slice("{\"type\":\"user\",\"note\":\"é".as_bytes());
    file.pop(); // half of "é"
    std::fs::write(&transcript, &file).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "SessionEnd");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let t = tip(&server, &format!("claude/-tmp-proj/{SESSION}"))
        .await
        .unwrap();
    assert!(server.client().materialize(&t, "root").await == lines);
}

/// A line that is not UTF-8 (a runtime's bad write) is stored as written,
/// like any line the format cannot read, and never stops the lines after
/// it: the session's chain equals its file byte for byte, and the hooks of
/// other sessions go on as before.
#[tokio::test]
async fn a_line_that_is_not_utf8_is_stored_as_written_with_the_lines_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let full = fixture();
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    let mut bytes = first_lines(&full, 3);
    bytes.extend_from_slice(b"{\"type\":\"user\",\"note\":\"\xff\"}\n");
    std::fs::write(&transcript, &bytes).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("not UTF-8"), "{err}");
    // The lines after it, in the next turn.
    let rest = &first_lines(&full, 8)[first_lines(&full, 3).len()..];
    bytes.extend_from_slice(rest);
    std::fs::write(&transcript, &bytes).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let name = format!("claude/-tmp-proj/{SESSION}");
    let t = tip(&server, &name).await.expect("the session's ref");
    assert!(
        server.client().materialize(&t, "root").await == bytes,
        "the chain is the file, byte for byte"
    );
    let other = "11111111-2222-4333-8444-555555555555";
    let other_transcript = pdir.join(format!("{other}.jsonl"));
    std::fs::write(&other_transcript, first_lines(&full, 3)).unwrap();
    let (code, err) = run_hook(&hook, other, &other_transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(SESSION), "another session's lines: {err}");
    assert!(
        tip(&server, &format!("claude/-tmp-proj/{other}"))
            .await
            .is_some()
    );
}

/// `ctx current` before a ticket update: the lines Claude Code wrote since
/// the last hook (the turn in progress) are stored first, and the answer is
/// the commit that holds them; without `--session`, the principal's newest
/// commit after every recorded session is stored. Then a real MCP client
/// reaches the same answer and the core (show, log, materialize, resolve,
/// refs) through `ctx mcp`'s tools, a large context as an excerpt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_context_stores_the_turn_in_progress_and_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, hook, pdir) = hooked(dir.path());
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    let name = format!("claude/-tmp-proj/{SESSION}");
    let full = fixture();
    std::fs::write(&transcript, first_lines(&full, 8)).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t1 = tip(&server, &name).await.expect("the hook made the ref");

    // The turn in progress: Claude Code wrote lines, no hook ran yet.
    std::fs::write(&transcript, first_lines(&full, 14)).unwrap();
    let json_of = |out: std::process::Output| -> Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    let c = json_of(server.cli_output(&[
        "current",
        "--session",
        SESSION,
        "--data",
        data_arg,
        "--json",
    ]));
    assert_eq!(c["by"], "session", "{c}");
    assert_eq!(c["ref"], name.as_str());
    assert!(c["flushed"][0]["commits"].as_u64().unwrap() >= 1, "{c}");
    let t2 = tip(&server, &name).await.unwrap();
    assert_ne!(t2, t1, "the turn in progress was stored");
    assert_eq!(c["context_id"], t2.as_str());
    assert!(
        server.client().materialize(&t2, "root").await == first_lines(&full, 14),
        "the answer holds every line written"
    );
    // Its commits are explicit checkpoints (a compaction's stays one).
    let h = server
        .client()
        .ok("GET", &format!("/v1/commits/{t2}/history?depth=1000"), None)
        .await;
    let made: Vec<&Value> = h["commits"]
        .as_array()
        .unwrap()
        .iter()
        .take_while(|c| c["id"] != t1.as_str())
        .collect();
    assert!(
        made.iter().any(|c| c["checkpoint"] == "explicit"),
        "{made:?}"
    );
    // Nothing pending: the same answer, no new commit; plain output is the id.
    let (code, out) = server.cli(&["current", "--session", SESSION, "--data", data_arg]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap().trim(), t2);
    assert_eq!(tip(&server, &name).await.unwrap(), t2);

    // Another writer (the SDK's session store) moved the ref since: the
    // answer is its commit, not the tip the hook remembers. (Its time is
    // the transcript's, as the store writes it.)
    let at = server
        .client()
        .ok("GET", &format!("/v1/commits/{t2}"), None)
        .await["created_at"]
        .clone();
    let theirs = server
        .client()
        .ok(
            "POST",
            "/v1/commits",
            Some(&json!({"commit_type": "delta", "format": "claude-code-v1",
                          "parent": t2, "delta": "",
                          "template": "claude-code", "principal": "claude-code",
                          "checkpoint": "explicit", "created_at": at,
                          "ref": {"name": name, "expected": t2}})),
        )
        .await;
    let t_theirs = theirs["id"].as_str().unwrap().to_owned();
    let (code, out) = server.cli(&["current", "--session", SESSION, "--data", data_arg]);
    assert_eq!(code, 0);
    assert_eq!(String::from_utf8(out).unwrap().trim(), t_theirs);
    // A session the hooks never recorded is not found (exit 3), not
    // silently another session's commit.
    let out = server.cli_output(&["current", "--session", "nope", "--data", data_arg]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("never recorded"), "{stderr}");
    // One sentence (issue 46: "… never recorded it not found").
    assert!(!stderr.contains("recorded it not found"), "{stderr}");

    // Without a session: every recorded session's pending lines, then the
    // principal's newest commit.
    std::fs::write(&transcript, first_lines(&full, 18)).unwrap();
    let c = json_of(server.cli_output(&["current", "--data", data_arg, "--json"]));
    let t3 = tip(&server, &name).await.unwrap();
    assert_ne!(t3, t2);
    assert_eq!(c["by"], "principal", "{c}");
    assert_eq!(c["context_id"], t3.as_str(), "{c}");
    assert_eq!(c["flushed"][0]["session_id"], SESSION);

    // A large context, for the materialize tool's bound.
    let big = "x".repeat(100_000);
    let large = server
        .client()
        .ok(
            "POST",
            "/v1/commits",
            Some(
                &json!({"commit_type": "delta", "format": "raw", "delta": big,
                          "template": "tpl", "principal": "someone-else",
                          "checkpoint": "explicit", "ticket_id": "tkt-9",
                          "machine": "m-1"}),
            ),
        )
        .await;
    assert_eq!(large["ticket_id"], "tkt-9");
    assert_eq!(large["machine"], "m-1");

    // The MCP tools, through the `mcp` package's stdio client.
    std::fs::write(&transcript, &full).unwrap();
    let Some(v) = server.mcp_client(
        "core_tools.py",
        &[],
        &[
            ("CTX_DATA", data_arg),
            ("SESSION", SESSION),
            ("REF", &name),
            ("LARGE", large["id"].as_str().unwrap()),
        ],
    ) else {
        return;
    };
    for tool in [
        "show",
        "log",
        "materialize",
        "resolve",
        "ref_get",
        "ref_list",
        "current_context",
        "checkpoint",
    ] {
        assert!(
            v["tools"].as_array().unwrap().contains(&json!(tool)),
            "{tool} listed: {v}"
        );
    }
    let t4 = tip(&server, &name).await.unwrap();
    assert_ne!(t4, t3, "current_context stored the rest");
    assert_eq!(v["current"]["context_id"], t4.as_str(), "{v}");
    assert!(
        server.client().materialize(&t4, "root").await == full,
        "byte for byte"
    );
    assert_eq!(v["show"]["id"], t4.as_str());
    assert_eq!(v["show"]["session_id"], SESSION);
    assert_eq!(v["log"]["commits"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["log"]["commits"][0]["id"], t4.as_str());
    // The chain is longer than 2: the page names where the next starts,
    // and the next page (asked by the ref's name) starts there.
    let next = v["log"]["next"].as_str().expect("a next page");
    assert_eq!(Some(next), v["log"]["commits"][1]["parent"].as_str(), "{v}");
    assert_eq!(v["log_next"]["commits"][0]["id"], next, "{v}");
    assert_eq!(v["show_ref"]["id"], t4.as_str(), "{v}");
    assert_eq!(v["materialize_ref"]["commit"], t4.as_str(), "{v}");
    let m = &v["materialize"];
    assert_eq!(m["commit"], t4.as_str(), "{m}");
    assert_eq!(m["truncated"], false, "{m}");
    let messages: Value = serde_json::from_str(m["excerpt"].as_str().unwrap()).unwrap();
    assert_eq!(messages[0]["role"], "user", "translated: {m}");
    assert!(m["message_count"].as_u64().unwrap() > 0);
    assert_eq!(v["empty"]["excerpt"], "[]", "no context: the empty context");
    assert_eq!(v["empty"]["message_count"], 0);
    assert_eq!(v["empty_log"]["excerpt"], "");
    assert_eq!(v["empty"]["commit"], Value::Null);
    let e = &v["empty_ref"];
    assert_eq!(
        (&e["commit"], &e["excerpt"], &e["message_count"]),
        (&Value::Null, &json!("[]"), &json!(0)),
        "a ref with no commit yet: the empty context, {e}"
    );
    let l = &v["large"];
    assert_eq!(l["size"], 100_000, "{l}");
    assert_eq!(l["truncated"], true);
    assert_eq!(
        l["excerpt"].as_str().unwrap().len(),
        16 * 1024,
        "a bounded excerpt"
    );
    assert!(v["large_bytes"].as_u64().unwrap() < 20_000, "{v}");
    assert_eq!(v["resolve"]["id"], t4.as_str(), "{v}");
    assert_eq!(v["ref_get"]["target"], t4.as_str());
    assert_eq!(v["ref_list"]["refs"][0]["name"], name.as_str());
    assert_eq!(v["bad_is_error"], true);
    assert!(
        v["bad_text"].as_str().unwrap().contains("ctx"),
        "names the field: {v}"
    );
    // The MCP session closed: the branch it left open was returned.
    let br = v["open_branch"]["branch_id"].as_str().unwrap();
    let s = server
        .client()
        .ok("GET", &format!("/v1/branches/{br}"), None)
        .await;
    assert_eq!(s["status"], "completed", "{s}");
    assert!(
        s["reason"].as_str().unwrap_or("").contains("session ended"),
        "{s}"
    );
}

/// A hook installed with `--every 2` checkpoints at every second turn end,
/// and one with `--significant-only --tool-calls` never at a turn end but
/// after each tool call (`PostToolUse`, trigger `tool_call`) and at the
/// session's end, which also force-returns the session's context-folding
/// branches (FR-010). Uninstall takes every event's hook out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_checkpoint_as_often_as_told_and_session_end_returns_branches() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let project = dir.path().join("proj");
    let install = |extra: &[&str]| install(dir.path(), &server, extra);
    let pdir = dir.path().join("claude/projects/-tmp-proj");
    std::fs::create_dir_all(&pdir).unwrap();
    let full = fixture();
    let name = format!("claude/-tmp-proj/{SESSION}");
    let transcript = pdir.join(format!("{SESSION}.jsonl"));

    // Every second turn.
    install(&["--every", "2"]);
    let stop = installed_command(&project, "Stop");
    assert!(stop.contains("--every 2"), "{stop}");
    std::fs::write(&transcript, first_lines(&full, 6)).unwrap();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert_eq!(tip(&server, &name).await, None, "the first turn waits");
    std::fs::write(&transcript, first_lines(&full, 10)).unwrap();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let t = tip(&server, &name)
        .await
        .expect("the second turn stores both");
    assert!(server.client().materialize(&t, "root").await == first_lines(&full, 10));

    // Significant events only, tool calls included; installing again
    // replaces the hooks.
    install(&["--significant-only", "--tool-calls"]);
    let settings: Value =
        serde_json::from_slice(&std::fs::read(project.join(".claude/settings.json")).unwrap())
            .unwrap();
    for event in ["Stop", "PreCompact", "SessionEnd", "PostToolUse"] {
        assert_eq!(
            settings["hooks"][event].as_array().unwrap().len(),
            1,
            "one ctx hook on {event}: {settings}"
        );
    }
    let stop = installed_command(&project, "Stop");
    assert!(
        stop.contains("--significant-only") && !stop.contains("--every"),
        "{stop}"
    );
    std::fs::write(&transcript, first_lines(&full, 12)).unwrap();
    let (code, err) = run_hook(&stop, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        tip(&server, &name).await.unwrap(),
        t,
        "a turn end is not significant"
    );
    let tool = installed_command(&project, "PostToolUse");
    let (code, err) = run_hook(&tool, SESSION, &transcript, "PostToolUse");
    assert_eq!(code, 0, "{err}");
    let t2 = tip(&server, &name).await.unwrap();
    assert_ne!(t2, t);
    let c = server.client();
    let shown = c.ok("GET", &format!("/v1/commits/{t2}"), None).await;
    assert_eq!(shown["checkpoint"], "tool_call", "{shown}");

    // The session's branches, force-returned at its end.
    let b = c
        .ok(
            "POST",
            "/v1/branches",
            Some(&json!({"session_id": SESSION, "description": "a subtask"})),
        )
        .await;
    let br = b["branch_id"].as_str().unwrap();
    std::fs::write(&transcript, &full).unwrap();
    let end = installed_command(&project, "SessionEnd");
    let (code, err) = run_hook(&end, SESSION, &transcript, "SessionEnd");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let s = c.ok("GET", &format!("/v1/branches/{br}"), None).await;
    assert_eq!(s["status"], "completed", "{s}");
    assert!(
        s["reason"].as_str().unwrap_or("").contains("session ended"),
        "{s}"
    );
    let t3 = tip(&server, &name).await.unwrap();
    assert!(
        c.materialize(&t3, "root").await == full,
        "every line at the end"
    );
    // A second SessionEnd has nothing left to end, and says nothing.
    let (code, err) = run_hook(&end, SESSION, &transcript, "SessionEnd");
    assert_eq!(code, 0);
    assert!(!err.contains("warning"), "{err}");

    let out = Command::new(ctx_bin())
        .args(["hooks", "uninstall", "claude-code", "--project"])
        .arg(&project)
        .output()
        .unwrap();
    assert!(out.status.success());
    let settings: Value =
        serde_json::from_slice(&std::fs::read(project.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert!(settings.get("hooks").is_none(), "{settings}");
}

/// `ctx hooks install` with (`extra` flags and) `--project PROJECT --data
/// DATA --server SERVER`: its exit code and stderr.
fn try_install(project: &Path, data: &Path, server: &str) -> (i32, String) {
    let out = Command::new(ctx_bin())
        .args(["hooks", "install", "claude-code", "--project"])
        .arg(project)
        .args(["--server", server, "--data"])
        .arg(data)
        .env_remove("CTX_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `ctx hooks doctor --project PROJECT`: its exit code and stdout.
fn doctor(project: &Path) -> (i32, String) {
    let out = Command::new(ctx_bin())
        .args(["hooks", "doctor", "claude-code", "--project"])
        .arg(project)
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `ctx hooks install` refuses what would leave a hook that cannot work
/// (issue 46, item 8), writing nothing: a project directory that does not
/// exist, a data directory without a token, no server at `--server`, a
/// server that refuses the token. A hook installed against the data
/// directory's own `ctx serve` follows it to another port after a restart,
/// and `ctx hooks doctor` says what is wrong later, with the warning the
/// hook recorded.
#[tokio::test]
async fn install_checks_what_the_hook_needs_and_doctor_says_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let project = dir.path().join("proj");
    let settings = project.join(".claude/settings.json");

    // No such project: exit 2 naming --project, nothing made.
    let (code, err) = try_install(&project, &data, "http://127.0.0.1:9");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--project"), "{err}");
    assert!(!project.exists(), "the project was not created");
    std::fs::create_dir_all(&project).unwrap();

    // A data directory with no token: exit 2 naming the token file.
    let (code, err) = try_install(&project, &data, "http://127.0.0.1:9");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("token"), "{err}");
    assert!(!settings.exists(), "nothing written: {err}");

    // No server at --server: exit 6, naming where the data directory's
    // server listens.
    let server = Server::start(&data);
    let (code, err) = try_install(&project, &data, "http://127.0.0.1:9");
    assert_eq!(code, 6, "{err}");
    assert!(err.contains(&server.url), "{err}");
    assert!(!settings.exists(), "nothing written: {err}");

    // A token the server does not accept: exit 5.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("token"), "ctx_not-a-token\n").unwrap();
    let (code, err) = try_install(&project, &other, &server.url);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("refused the token"), "{err}");
    assert!(!settings.exists(), "nothing written: {err}");

    // The data directory's own server: the hook reads its address there.
    let (code, err) = try_install(&project, &data, &server.url);
    assert_eq!(code, 0, "{err}");
    let hook = installed_command(&project, "Stop");
    assert!(hook.contains("--server-from-data"), "{hook}");
    assert!(!hook.contains(&server.url), "no port pinned: {hook}");
    let (code, out) = doctor(&project);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("PROBLEM"), "{out}");

    // Restarted on another port: the installed hook still checkpoints.
    let old_url = server.url.clone();
    server.kill();
    let server = Server::start(&data);
    assert_ne!(server.url, old_url, "port 0 gives another port");
    let pdir = dir.path().join("claude/projects/-tmp-proj");
    std::fs::create_dir_all(&pdir).unwrap();
    let transcript = pdir.join(format!("{SESSION}.jsonl"));
    std::fs::write(&transcript, first_lines(&fixture(), 2)).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let name = format!("claude/-tmp-proj/{SESSION}");
    assert!(tip(&server, &name).await.is_some(), "checkpointed: {err}");

    // The server is down: the hook warns where nobody sees it; doctor
    // says so, with the warning the hook recorded, and exits non-zero.
    server.kill();
    std::fs::write(&transcript, first_lines(&fixture(), 3)).unwrap();
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning"), "{err}");
    let (code, out) = doctor(&project);
    assert_ne!(code, 0, "{out}");
    for needle in [
        "PROBLEM server",
        "PROBLEM last run",
        "PROBLEM pending",
        SESSION,
    ] {
        assert!(out.contains(needle), "{needle}: {out}");
    }

    // Back up: the next hook run stores the lines and clears the warning.
    let server = Server::start(&data);
    let (code, err) = run_hook(&hook, SESSION, &transcript, "Stop");
    assert_eq!(code, 0, "{err}");
    let (code, out) = doctor(&project);
    assert_eq!(code, 0, "{out}");
    drop(server);

    // A project without the hooks: doctor says to install them.
    let bare = dir.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let (code, out) = doctor(&bare);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("ctx hooks install"), "{out}");
}

/// A hook payload fixture (`tests/data/hooks/NAME.json`, the fields the
/// runtime sends) pointed at `log` and `cwd`.
fn payload(name: &str, log: &Path, cwd: &Path) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("data/hooks/{name}.json"));
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).expect("the payload")).unwrap();
    v["transcript_path"] = json!(log);
    v["cwd"] = json!(cwd);
    v
}

/// Runs `command` through `sh -c` with `input` on stdin, as the runtimes
/// run a command hook: its exit code, stdout and stderr.
fn run_hook_with(command: &str, input: &Value) -> (i32, String, String) {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .spawn()
        .expect("sh runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("the hook finishes");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The ctx hook command for `event` in a hooks settings file.
fn command_in(settings: &Path, runtime: &str, event: &str) -> String {
    let s: Value = serde_json::from_slice(&std::fs::read(settings).expect("settings written"))
        .expect("settings are JSON");
    s["hooks"][event]
        .as_array()
        .unwrap_or_else(|| panic!("no {event} hooks: {s}"))
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap())
        .filter_map(|h| h["command"].as_str())
        .find(|c| c.contains(&format!(" hook {runtime} ")))
        .unwrap_or_else(|| panic!("no ctx hook for {event}: {s}"))
        .to_owned()
}

/// Claude Code's project key of a directory, as the hooks name refs.
fn key_of(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap()
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// A Codex CLI session and a Gemini CLI session, recorded live by the
/// hooks `ctx hooks install codex|gemini` writes, driven by the payloads
/// those runtimes send: one commit per turn as each turn ends, the turn in
/// progress stored by `ctx current` (a ticket's `current_context`), the
/// tail of a runtime that died stored by the next hook of another
/// runtime's session, and each session exported byte for byte.
#[tokio::test]
async fn codex_and_gemini_sessions_are_recorded_live_turn_by_turn() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data);
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join(".codex")).unwrap();
    std::fs::write(
        project.join(".codex/config.toml"),
        "model = \"gpt-5-codex\"\n",
    )
    .unwrap();
    let install = |runtime: &str| {
        let out = Command::new(ctx_bin())
            .args(["hooks", "install", runtime, "--project"])
            .arg(&project)
            .args(["--server", &server.url, "--data"])
            .arg(&data)
            .output()
            .expect("ctx hooks runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    install("codex");
    install("gemini");
    let config = std::fs::read_to_string(project.join(".codex/config.toml")).unwrap();
    assert!(config.starts_with("model = \"gpt-5-codex\"\n"), "{config}");
    assert!(
        config.contains("[features]\ncodex_hooks = true"),
        "{config}"
    );
    let codex_settings = project.join(".codex/hooks.json");
    let gemini_settings = project.join(".gemini/settings.json");
    let once = (
        std::fs::read(&codex_settings).unwrap(),
        std::fs::read(&gemini_settings).unwrap(),
    );
    install("codex");
    install("gemini");
    assert_eq!(
        (
            std::fs::read(&codex_settings).unwrap(),
            std::fs::read(&gemini_settings).unwrap()
        ),
        once,
        "installing twice changes nothing"
    );
    let codex_stop = command_in(&codex_settings, "codex", "Stop");
    assert_eq!(
        command_in(&codex_settings, "codex", "PreCompact"),
        codex_stop
    );
    let after_agent = command_in(&gemini_settings, "gemini", "AfterAgent");
    for e in ["PreCompress", "SessionEnd"] {
        assert_eq!(command_in(&gemini_settings, "gemini", e), after_agent);
    }

    let key = key_of(&project);
    let c = server.client();
    let runs = [
        (
            "codex",
            "codex-rollout.jsonl",
            "codex-stop",
            &codex_stop,
            "0199a3f2-6c1e-7d40-9b1a-3f5e2c8d4a10",
            ctx_core::format::codex_segments as fn(&[u8]) -> _,
        ),
        (
            "gemini",
            "gemini-cli-session.jsonl",
            "gemini-after-agent",
            &after_agent,
            "8c1f4e2a-3b7d-4e9a-a1c2-5d6e7f8091ab",
            ctx_core::format::gemini_segments,
        ),
    ];
    for (runtime, file, turn_end, hook, session, cut) in runs {
        let full = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("data")
                .join(file),
        )
        .unwrap();
        let turns = cut(&full).unwrap();
        assert!(turns.len() >= 2, "{runtime}: the fixture has turns");
        let log = dir.path().join(format!("{runtime}-{file}"));
        let name = format!("{runtime}/{key}/{session}");
        let input = payload(turn_end, &log, &project);
        assert_eq!(input["session_id"], session, "{runtime}");
        // Turn by turn, as the runtime appends them; its hook at each end.
        for (i, turn) in turns.iter().enumerate() {
            std::fs::write(&log, &full[..turn.range.end]).unwrap();
            let (code, out, err) = run_hook_with(hook, &input);
            assert_eq!(code, 0, "{runtime}: {err}");
            assert!(out.is_empty(), "{runtime}: nothing on stdout: {out}");
            assert!(!err.contains("warning"), "{runtime}: {err}");
            let t = tip(&server, &name).await.expect("the hook made the ref");
            assert_eq!(
                history_len(&server, &t).await,
                i + 1,
                "{runtime}: a commit per turn"
            );
            assert!(
                c.materialize(&t, "root").await == full[..turn.range.end],
                "{runtime}: turn {i}, byte for byte"
            );
            let commit = c.ok("GET", &format!("/v1/commits/{t}"), None).await;
            assert_eq!(commit["principal"], runtime, "{commit}");
            assert_eq!(commit["format"], turns_format(runtime), "{commit}");
            assert_eq!(commit["session_id"], session, "{commit}");
        }
        let (code, exported) = server.cli(&["export", &name]);
        assert_eq!(code, 0);
        assert!(exported == full, "{runtime}: the export is the file");
    }

    // An older Gemini CLI's session, one JSON document rewritten whole:
    // the hook says it cannot follow it, and stores nothing.
    let doc = dir.path().join("session-old.json");
    std::fs::write(
        &doc,
        "{\n  \"sessionId\": \"old-one\",\n  \"messages\": []\n}\n",
    )
    .unwrap();
    let mut old = payload("gemini-after-agent", &doc, &project);
    old["session_id"] = json!("old-one");
    let (code, out, err) = run_hook_with(&after_agent, &old);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("ctx import gemini"), "{err}");
    assert_eq!(tip(&server, &format!("gemini/{key}/old-one")).await, None);
    std::fs::remove_file(&doc).unwrap();

    // A turn in progress (its lines written, its turn not ended): `ctx
    // current` stores it and answers it.
    let codex_log = dir.path().join("codex-codex-rollout.jsonl");
    let codex_ref = format!("codex/{key}/0199a3f2-6c1e-7d40-9b1a-3f5e2c8d4a10");
    let before = tip(&server, &codex_ref).await.unwrap();
    let mut grown = std::fs::read(&codex_log).unwrap();
    grown.extend_from_slice(br#"{"timestamp":"2026-11-21T14:04:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Open a ticket for the overflow case."}]}}"#);
    grown.push(b'\n');
    std::fs::write(&codex_log, &grown).unwrap();
    let (code, out) = server.cli(&[
        "current",
        "--session",
        "0199a3f2-6c1e-7d40-9b1a-3f5e2c8d4a10",
        "--json",
        "--data",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let current: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(current["by"], "session", "{current}");
    assert_eq!(current["ref"], codex_ref.as_str(), "{current}");
    assert_eq!(current["flushed"][0]["runtime"], "codex", "{current}");
    let now = current["context_id"].as_str().unwrap();
    assert_ne!(now, before);
    assert!(
        c.materialize(now, "root").await == grown,
        "the turn in progress"
    );

    // The same over `/mcp` (a runtime's MCP client over HTTP): the turn in
    // progress is stored for the caller holding the data directory's token,
    // the one the hooks write with; another tenant's caller gets nothing of
    // this machine's sessions stored in its name.
    grown.extend_from_slice(br#"{"timestamp":"2026-11-21T14:04:01.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"call_T1"}}"#);
    grown.push(b'\n');
    std::fs::write(&codex_log, &grown).unwrap();
    let out = Command::new(ctx_bin())
        .args(["tokens", "add", "someone-else", "--data"])
        .arg(&data)
        .output()
        .expect("ctx tokens add");
    assert!(out.status.success());
    let stranger = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let call = json!({"name": "current_context",
                      "arguments": {"session_id": "0199a3f2-6c1e-7d40-9b1a-3f5e2c8d4a10",
                                    "principal": "codex"}});
    let theirs = mcp_over_http(&server.url, &stranger, &call).await;
    assert_eq!(theirs["isError"], true, "{theirs}");
    assert!(
        theirs["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("not_found"),
        "{theirs}"
    );
    assert_eq!(
        tip(&server, &codex_ref).await.unwrap(),
        now,
        "nothing stored"
    );
    let ours = mcp_over_http(&server.url, &server.token, &call).await;
    let answer = &ours["structuredContent"];
    assert_eq!(answer["by"], "session", "{ours}");
    let via_mcp = answer["context_id"].as_str().unwrap().to_owned();
    assert_ne!(via_mcp, now);
    assert!(
        c.materialize(&via_mcp, "root").await == grown,
        "/mcp's answer holds the turn that called it"
    );

    // The Codex runtime dies mid-turn: quiet for two minutes, its tail is
    // stored by the next hook of any session, here the Gemini one's end.
    grown.extend_from_slice(br#"{"timestamp":"2026-11-21T14:04:05.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Opened."}]}}"#);
    grown.push(b'\n');
    std::fs::write(&codex_log, &grown).unwrap();
    let written = std::fs::metadata(&codex_log).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(&codex_log)
        .unwrap()
        .set_modified(written - std::time::Duration::from_secs(120))
        .unwrap();
    let gemini_log = dir.path().join("gemini-gemini-cli-session.jsonl");
    let end = payload("gemini-session-end", &gemini_log, &project);
    let (code, _, err) = run_hook_with(&after_agent, &end);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let recovered = tip(&server, &codex_ref).await.unwrap();
    assert!(
        c.materialize(&recovered, "root").await == grown,
        "the dead Codex session's rollout, byte for byte"
    );
    let doctor = |runtime: &str| {
        let out = Command::new(ctx_bin())
            .args(["hooks", "doctor", runtime, "--project"])
            .arg(&project)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, said) = doctor("codex");
    assert!(ok, "{said}");
    assert!(said.contains("no session has lines waiting"), "{said}");
    // The document session the hook could not follow is what is wrong.
    let (ok, said) = doctor("gemini");
    assert!(!ok, "{said}");
    assert!(
        said.contains("session old-one has lines waiting") && said.contains("ctx import gemini"),
        "{said}"
    );
}

/// One `tools/call` of `/mcp` over streamable HTTP as `token`: its result.
async fn mcp_over_http(url: &str, token: &str, params: &Value) -> Value {
    let post = |body: Value| {
        reqwest::Client::new()
            .post(format!("{url}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}});
    assert_eq!(post(init).await.unwrap().status().as_u16(), 200);
    let resp = post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    v["result"].clone()
}

/// The format a runtime's hook records.
fn turns_format(runtime: &str) -> &'static str {
    match runtime {
        "codex" => "codex-rollout-v1",
        _ => "gemini-cli-v1",
    }
}
