//! `ctx serve` as a process: what it writes to stderr and what it leaves
//! on disk when it cannot start.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use ctx_tests::{Server, ctx_bin};

/// Logs to a stderr that is not a terminal (a pipe, a file, a journal)
/// carry no ANSI colour codes.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(ctx_bin())
        .args(["serve", "--data"])
        .arg(dir.path().join("data"))
        .args(["--addr", "127.0.0.1:0"])
        // A filter that does not parse is logged as a warning at start.
        .env("CTX_LOG", "ctx=loudest")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ctx serve starts");
    let stdout = child.stdout.take().unwrap();
    let listening = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("ctx listening on "));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut err = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    let text = String::from_utf8_lossy(&err);
    assert!(listening, "ctx serve did not start: {text}");
    assert!(text.contains("CTX_LOG"), "the warning is logged: {text}");
    assert!(!err.contains(&0x1b), "no escape codes on a pipe: {text:?}");
}

/// A second server on an address in use exits non-zero naming the address,
/// before it makes a data directory or a token.
#[test]
fn a_busy_address_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(&dir.path().join("first"));
    let addr = first.url.trim_start_matches("http://").to_owned();
    let fresh = dir.path().join("fresh");
    let out = Command::new(ctx_bin())
        .args(["serve", "--data"])
        .arg(&fresh)
        .args(["--addr", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("ctx serve runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&addr), "the error names {addr}: {err}");
    assert!(
        !fresh.exists(),
        "nothing was created: {:?}",
        std::fs::read_dir(&fresh).map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
    );
}
