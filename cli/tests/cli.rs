//! The `ctx` binary's command line, without a server: usage errors, help,
//! and what it says when the server is unreachable.

use std::process::Command;

fn ctx(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(args)
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .output()
        .expect("ctx runs")
}

/// `ctx ARGS --server URL --data DATA`.
fn ctx_at(url: &str, data: &str, args: &[&str]) -> std::process::Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--server", url, "--data", data]);
    ctx(&all)
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    assert_eq!(ctx(&["no-such-command"]).status.code(), Some(2));
    assert_eq!(
        ctx(&["checkpoint"]).status.code(),
        Some(2),
        "--principal is required"
    );
    let help = ctx(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8(help.stdout).unwrap();
    for cmd in [
        "serve",
        "checkpoint",
        "show",
        "log",
        "materialize",
        "resolve",
        "ref",
        "tokens",
    ] {
        assert!(text.contains(cmd), "help lists {cmd}");
    }
}

#[test]
fn an_unreachable_server_exits_6_with_a_message() {
    // Port 9 (discard) on loopback: nothing listens there in the test sandbox.
    let out = ctx(&[
        "show",
        "ctx-00000000000000000000000000000000",
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "t",
    ]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the ctx server"));
}

#[test]
fn tokens_commands_work_on_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let add = ctx(&["tokens", "add", "acme", "--data", data]);
    assert!(add.status.success());
    assert!(String::from_utf8(add.stdout).unwrap().starts_with("ctx_"));
    let list = String::from_utf8(ctx(&["tokens", "list", "--data", data]).stdout).unwrap();
    assert!(list.contains(" acme "), "{list}");
    assert_eq!(
        ctx(&["tokens", "add", "Not A Tenant", "--data", data])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        ctx(&["tokens", "revoke", "tok-000000000000", "--data", data])
            .status
            .code(),
        Some(3)
    );
}

#[test]
fn tokens_commands_refuse_a_data_directory_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("dtaa");
    let out = ctx(&["tokens", "list", "--data", typo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no data directory"), "{err}");
    assert!(!typo.exists(), "nothing was created");
}

#[test]
fn a_second_serve_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    // It holds the lock once it says where it listens.
    let (mut first, _url, _stdout) = serve(data);
    let second = ctx(&["serve", "--data", data, "--addr", "127.0.0.1:0"]);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.status.code(), Some(4));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another ctx serve"), "{err}");
}

#[test]
fn flag_values_are_checked_before_anything_is_sent_listing_what_is_allowed() {
    for (args, allowed) in [
        (
            vec!["checkpoint", "--principal", "a", "--type", "detla"],
            "delta",
        ),
        (
            vec!["checkpoint", "--principal", "a", "--trigger", "turn"],
            "turn_boundary",
        ),
        (
            vec!["checkpoint", "--principal", "a", "--format", "Claude Code"],
            "format id",
        ),
        (vec!["materialize", "x", "--stop", "begin"], "root"),
        (vec!["export", "x", "--stop", "begin"], "root"),
        (vec!["log", "x", "-n", "0"], "max-count"),
        (
            vec!["checkpoint", "--principal", "alice smith"],
            "'@', ':' and '+'",
        ),
        (vec!["resolve", "--principal", "a b"], "'@', ':' and '+'"),
        (
            vec!["import", "claude-code", "x.jsonl", "--principal", "a b"],
            "'@', ':' and '+'",
        ),
    ] {
        let out = ctx(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(allowed), "{args:?}: {err}");
        assert!(!err.contains("cannot reach"), "{args:?}: {err}");
    }
}

#[test]
fn an_empty_delta_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    // Nothing listens on port 9: a request would fail with exit 6.
    let conn = ["--server", "http://127.0.0.1:9", "--token", "t"];
    let mut args = vec!["checkpoint", empty.to_str().unwrap(), "--principal", "a"];
    args.extend(conn);
    let out = ctx(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("empty"), "{err}");
    // stdin with no bytes (ctx() gives it /dev/null).
    let mut args = vec!["checkpoint", "--principal", "a"];
    args.extend(conn);
    let out = Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stdin is empty") || err.contains("from stdin is empty"),
        "{err}"
    );
}

#[test]
fn a_tag_with_an_empty_key_is_reported_as_such() {
    for cmd in [
        vec!["checkpoint", "--principal", "a"],
        vec!["update-metadata", "x"],
    ] {
        let mut args = cmd.clone();
        args.extend(["--tag", "=v"]);
        let out = ctx(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("empty key"), "{args:?}: {err}");
    }
}

#[test]
fn mcp_takes_no_json_flag() {
    let help = ctx(&["mcp", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(
        text.contains("--server") && !text.contains("--json"),
        "{text}"
    );
    assert_eq!(ctx(&["mcp", "--json"]).status.code(), Some(2));
}

/// Starts `ctx serve` on `data` on a free port; returns the child, the URL
/// it listens on and its stdout (kept open so later prints don't fail).
fn serve(
    data: &str,
) -> (
    std::process::Child,
    String,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(["serve", "--data", data, "--addr", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("ctx listening on ").map(str::to_owned))
        .expect("the server says where it listens");
    (child, url, lines)
}

/// Starts `ctx serve` on `data` with `extra` arguments, returns what it
/// printed before saying where it listens, and stops it.
/// `ctx checkpoint` of `delta` on stdin into alice's `sessions/s`, through
/// the server at `url` with the token of `data`; it must succeed.
fn checkpoint(url: &str, data: &str, delta: &str) {
    use std::io::Write as _;
    let mut run = Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(["checkpoint", "--principal", "alice", "--ref", "sessions/s"])
        .args(["--server", url, "--data", data])
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    run.stdin
        .take()
        .unwrap()
        .write_all(delta.as_bytes())
        .unwrap();
    assert!(run.wait_with_output().unwrap().status.success());
}

fn serve_banner(data: &str, extra: &[&str]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(["serve", "--data", data, "--addr", "127.0.0.1:0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("ctx listening on") {
            break;
        }
        banner.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    banner
}

#[test]
fn a_restarted_memory_server_says_it_reuses_the_token_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let first = serve_banner(data, &["--store", "memory"]);
    assert!(first[0].starts_with("created a token"), "{first:?}");
    let token = std::fs::read_to_string(dir.path().join("token")).unwrap();
    let second = serve_banner(data, &["--store", "memory"]);
    assert!(
        second[0].starts_with("reusing the token") && !second[0].contains("created"),
        "{second:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("token")).unwrap(),
        token,
        "the token on file stays"
    );
    // A durable store that has its token says nothing about tokens.
    let local = tempfile::tempdir().unwrap();
    let local = local.path().to_str().unwrap();
    assert!(serve_banner(local, &[])[0].starts_with("created a token"));
    assert!(serve_banner(local, &[]).is_empty());
}

/// `ctx checkpoint` reading the delta from a terminal says so on stderr
/// instead of waiting silently; from a pipe it says nothing. The terminal
/// is a pseudo-terminal made by python3's standard library (`os.openpty`):
/// the delta and an end-of-file (Ctrl-D) are typed into it, then the
/// command goes on to the (unreachable) server and exits 6.
#[test]
fn a_terminal_on_stdin_gets_a_hint_and_a_pipe_does_not() {
    const AT_A_TERMINAL: &str = r#"
import os, subprocess, sys
master, slave = os.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
os.close(slave)
os.write(master, b"user: hi\n\x04")
out, err = p.communicate()
sys.stdout.buffer.write(err)
sys.exit(p.returncode)
"#;
    let args = [
        "checkpoint",
        "--principal",
        "alice",
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "t",
    ];
    let out = Command::new("python3")
        .arg("-c")
        .arg(AT_A_TERMINAL)
        .arg(env!("CARGO_BIN_EXE_ctx"))
        .args(args)
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .output()
        .expect("python3 runs (tests/run needs it anyway)");
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(
        err.contains("ctx: reading the delta from stdin (end it with Ctrl-D"),
        "{err}"
    );
    assert_eq!(
        out.status.code(),
        Some(6),
        "read the delta, then the server: {err}"
    );

    let mut piped = Command::new(env!("CARGO_BIN_EXE_ctx"))
        .args(args)
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_SERVER")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ctx runs");
    {
        use std::io::Write as _;
        let mut stdin = piped.stdin.take().unwrap();
        stdin.write_all(b"user: hi\n").unwrap();
    }
    let out = piped.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(!err.contains("reading the delta"), "{err}");
}

#[test]
fn summarize_fills_in_a_summary_and_log_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert_eq!(
        ctx(&["summarize", "--force"]).status.code(),
        Some(2),
        "--force needs --commit"
    );
    assert_eq!(ctx(&["summarize", "--limit", "0"]).status.code(), Some(2));
    let (mut server, url, _stdout) = serve(data);
    let client = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ctx"))
            .args(args)
            .args(["--server", &url, "--data", data])
            .env_remove("CTX_TOKEN")
            .env_remove("CTX_SERVER")
            .output()
            .expect("ctx runs")
    };
    let empty = client(&["summarize"]);
    let out = String::from_utf8_lossy(&empty.stdout);
    assert_eq!(empty.status.code(), Some(0), "{out}");
    assert!(out.contains("summarized 0, skipped 0, failed 0"), "{out}");
    checkpoint(&url, data, "user: hello\n");
    let log = client(&["log", "sessions/s"]);
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("(no summary)"),
        "{}",
        String::from_utf8_lossy(&log.stdout)
    );
    // The embedded default (extractive) writes it; the log shows it.
    let one = client(&["summarize", "--commit", "sessions/s"]);
    assert_eq!(
        one.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let log = client(&["log", "sessions/s"]);
    let shown = String::from_utf8_lossy(&log.stdout);
    assert!(
        shown.contains("user: hello") && !shown.contains("(no summary)"),
        "{shown}"
    );
    let show = client(&["show", "sessions/s", "--json"]);
    let shown = String::from_utf8_lossy(&show.stdout);
    assert!(shown.contains("extractive:v1"), "summary_by: {shown}");
    // Nothing left to backfill; a commit that has one needs --force.
    let backfill = client(&["summarize"]);
    assert!(
        String::from_utf8_lossy(&backfill.stdout).contains("summarized 0"),
        "{}",
        String::from_utf8_lossy(&backfill.stdout)
    );
    let again = client(&["summarize", "--commit", "sessions/s"]);
    assert_ne!(again.status.code(), Some(0));
    let forced = client(&["summarize", "--commit", "sessions/s", "--force"]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        forced.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
}

#[test]
fn a_cleanly_stopped_server_leaves_no_write_ahead_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (mut server, url, _stdout) = serve(data);
    checkpoint(&url, data, "user: hello\n");
    let wal = dir.path().join("ctx.db-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the WAL is in use"
    );
    // SIGTERM: a clean stop.
    let term = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let left = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert_eq!(
        left, 0,
        "the WAL is checkpointed and truncated on a clean stop"
    );
}

/// Issue 46: a reader that goes away (`ctx log X | head -1`) ends the
/// command quietly, as it ends git: by SIGPIPE, the shell's status 141,
/// with nothing on stderr (no panic, no "unavailable"). Each command runs
/// with stdout a pipe whose reading end is closed before it starts.
#[test]
fn a_closed_stdout_ends_each_command_quietly_by_sigpipe() {
    use std::os::unix::process::ExitStatusExt as _;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (mut server, url, _stdout) = serve(data);
    for line in ["user: hello\n", "assistant: hi\n"] {
        checkpoint(&url, data, line);
    }
    let mut failures = Vec::new();
    for args in [
        &["log", "sessions/s"][..],
        &["show", "sessions/s"],
        &["ref", "list"],
        &["gc", "--json"],
        &["materialize", "sessions/s"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_ctx"))
            .args(args)
            .args(["--server", &url, "--data", data])
            .env_remove("CTX_TOKEN")
            .env_remove("CTX_SERVER")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("ctx runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.signal() != Some(libc::SIGPIPE) || !stderr.is_empty() {
            failures.push(format!(
                "ctx {}: {:?}: {stderr}",
                args.join(" "),
                out.status
            ));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// With `--json`, an error is one JSON object on stderr, shaped as the
/// HTTP error body (`{"error": {"kind", "message", "field"?}}`), with the
/// same exit code as the text form.
#[test]
fn a_json_error_is_one_json_object_on_stderr() {
    let out = ctx(&[
        "show",
        "ctx-00000000000000000000000000000000",
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "t",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(6));
    let err = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(err.trim())
        .unwrap_or_else(|e| panic!("stderr is not one JSON object ({e}): {err}"));
    assert_eq!(v["error"]["kind"], "unavailable", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot reach the ctx server")),
        "{v}"
    );
    // An invalid value names its field there; without --json it stays text.
    let out = ctx(&["ref", "get", "bad name", "--json", "--token", "t"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stderr).expect("JSON");
    assert_eq!(v["error"]["kind"], "invalid", "{v}");
    let out = ctx(&["ref", "get", "bad name", "--token", "t"]);
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("ctx: invalid"));
}

/// A time flag that is not RFC 3339 is refused before anything is sent,
/// naming the flag and the form it takes.
#[test]
fn a_time_flag_names_itself_and_the_form_it_takes() {
    for args in [
        vec!["resolve", "--principal", "a", "--at", "yesterday"],
        vec![
            "checkpoint",
            "--principal",
            "a",
            "--created-at",
            "yesterday",
        ],
    ] {
        let out = ctx(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let flag = args[3];
        assert!(err.contains(flag), "{args:?} names {flag}: {err}");
        assert!(err.contains("RFC 3339"), "{args:?}: {err}");
        assert!(
            err.contains("2026-01-02T03:04:05Z"),
            "{args:?}: an example: {err}"
        );
        assert!(!err.contains("premature end of input"), "{args:?}: {err}");
        assert!(!err.contains("cannot reach"), "{args:?}: {err}");
    }
    // --at also takes a time ago (`30m`, `2h`, `1d`, `1w`): accepted, so
    // the command goes on to the (unreachable) server.
    for ago in ["90s", "30m", "2h", "1d", "1w"] {
        let out = ctx(&[
            "resolve",
            "--principal",
            "a",
            "--at",
            ago,
            "--server",
            "http://127.0.0.1:9",
            "--token",
            "t",
        ]);
        assert_eq!(out.status.code(), Some(6), "--at {ago}");
    }
    let out = ctx(&["resolve", "--principal", "a", "--at", "2y"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("2h"), "names the relative forms: {err}");
}

/// `ctx ref set` and `ctx ref delete` follow one rule: without
/// `--expected` neither changes an existing ref (set creates, delete
/// refuses), each naming the current tip and `--expected`/`--force`;
/// `--expected TIP` is compare-and-swap; `--force` is unconditional.
#[test]
fn ref_set_and_delete_follow_one_compare_and_swap_rule() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (mut child, url, _stdout) = serve(data);
    checkpoint(&url, data, "user: one\n");
    let at = |args: &[&str]| ctx_at(&url, data, args);
    let tip = String::from_utf8(at(&["ref", "get", "sessions/s"]).stdout).unwrap();
    let tip = tip.split_whitespace().next().unwrap().to_owned();
    checkpoint(&url, data, "user: two\n");
    let new = String::from_utf8(at(&["ref", "get", "sessions/s"]).stdout).unwrap();
    let new = new.split_whitespace().next().unwrap().to_owned();

    // set: creates without --expected; on an existing ref it is exit 4
    // naming the tip and both ways to move it.
    assert_eq!(at(&["ref", "set", "keep", &tip]).status.code(), Some(0));
    let out = at(&["ref", "set", "keep", &new]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&tip) && err.contains(&format!("--expected {tip}")) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        at(&["ref", "set", "keep", &new, "--expected", &tip])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        at(&["ref", "set", "keep", &tip, "--force"]).status.code(),
        Some(0)
    );
    let now = String::from_utf8(at(&["ref", "get", "keep"]).stdout).unwrap();
    assert!(now.starts_with(&tip), "{now}");

    // delete: the same rule.
    let out = at(&["ref", "delete", "keep"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("--expected {tip}")) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        at(&["ref", "get", "keep"]).status.code(),
        Some(0),
        "still there"
    );
    assert_eq!(
        at(&["ref", "delete", "keep", "--expected", &new])
            .status
            .code(),
        Some(4),
        "a stale --expected"
    );
    assert_eq!(
        at(&["ref", "delete", "keep", "--expected", &tip])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(at(&["ref", "set", "keep", &tip]).status.code(), Some(0));
    assert_eq!(
        at(&["ref", "delete", "keep", "--force"]).status.code(),
        Some(0)
    );
    assert_eq!(at(&["ref", "get", "keep"]).status.code(), Some(3));
    assert_eq!(
        at(&["ref", "delete", "keep"]).status.code(),
        Some(3),
        "no such ref"
    );
    assert_eq!(
        ctx(&["ref", "set", "k", &tip, "--expected", &tip, "--force"])
            .status
            .code(),
        Some(2),
        "--force and --expected exclude each other"
    );
    let help = String::from_utf8(ctx(&["ref", "set", "--help"]).stdout).unwrap();
    assert!(help.contains("--force"), "{help}");
    let _ = child.kill();
    let _ = child.wait();
}

/// `ctx read-context WS` on a workspace with no file (a mistyped name, or
/// a fresh workspace, which seed 002 requires to work) prints the empty
/// context, as the server answers it, and says on stderr that WS has no
/// file; a workspace with files gets no such note.
#[test]
fn read_context_of_a_workspace_without_files_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (mut child, url, _stdout) = serve(data);
    let at = |args: &[&str]| ctx_at(&url, data, args);
    let out = at(&["read-context", "no-such-ws"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("no-such-ws") && err.contains("no file") && err.contains("ctx workspace ls"),
        "{err}"
    );
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("brief.md"), "# B\n\nTastes: x\n\nDo it.\n").unwrap();
    let push = at(&[
        "workspace",
        "push",
        ws.to_str().unwrap(),
        "--workspace",
        "real",
    ]);
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    let out = at(&["read-context", "real"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Issue 45: `ctx materialize` of a session ref with no commit yet prints
/// the empty context in the format asked and exits 0, saying so on
/// stderr; once checkpointed it prints the context; a wrong commit id is
/// still exit 3 (not found).
#[test]
fn materialize_of_a_ref_with_no_commit_is_the_empty_context() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (mut child, url, _stdout) = serve(data);
    let at = |args: &[&str]| ctx_at(&url, data, args);
    let out = at(&[
        "materialize",
        "sessions/s",
        "--format",
        "anthropic-messages-v1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[]");
    assert!(err.contains("sessions/s has no commit yet"), "{err}");
    let json = at(&["materialize", "sessions/s", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (&v["content"], &v["message_count"]),
        (&serde_json::json!(""), &serde_json::json!(0))
    );
    checkpoint(&url, data, "user: hello\n");
    let out = at(&["materialize", "sessions/s"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "user: hello\n");
    let out = at(&["materialize", "ctx-00000000000000000000000000000000"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `ctx materialize --help` (and `export`, `checkpoint`) list every format
/// the server's codecs know, from the same registry.
#[test]
fn format_help_lists_every_known_format() {
    let formats = ctx_core::format::Formats::default();
    for cmd in ["materialize", "export", "checkpoint"] {
        let help = String::from_utf8(ctx(&[cmd, "--help"]).stdout).unwrap();
        for id in formats.ids() {
            assert!(
                help.contains(id.as_str()),
                "{cmd} --help lists {id}: {help}"
            );
        }
    }
}
