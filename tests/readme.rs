//! The README's walkthrough, run as written against a real `ctx serve`:
//! only the server's address and the binary's directory are substituted.

use std::process::Command;

use ctx_tests::{Server, ctx_bin};

fn walkthrough() -> String {
    let readme = include_str!("../README.md");
    let start = readme
        .find("<!-- walkthrough -->")
        .expect("README marks its walkthrough");
    let end = readme
        .find("<!-- /walkthrough -->")
        .expect("README closes its walkthrough");
    let block = &readme[start..end];
    let body_start = block.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let body_end = block.rfind("```").expect("a closed block");
    block[body_start..body_end].to_owned()
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join(".ctx"));
    let script = walkthrough();
    assert!(script.contains("export PATH=\"$PWD/target/release:$PATH\""));
    let bin_dir = ctx_bin().parent().unwrap().to_owned();
    let script = script
        .replace(
            "export PATH=\"$PWD/target/release:$PATH\"",
            &format!("export PATH=\"{}:$PATH\"", bin_dir.display()),
        )
        .replace("http://127.0.0.1:7878", &server.url);
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(dir.path())
        .env("CTX_SERVER", &server.url)
        .env_remove("CTX_TOKEN")
        .env_remove("CTX_DATA")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{stdout}\n{stderr}"
    );
    for expected in [
        "summary: off-by-one at parser.rs:42\nuser: fix it\n",
        "user: find the bug in parser.rs\nassistant: reading parser.rs\ntool: parser.rs:42 indexes one past the end\nuser: fix it\n",
        "user: find the bug in parser.rs\nassistant: reading parser.rs\nassistant: let me try the lexer instead\n",
        "\"tier\":\"native\"",
        "\"commits\":[",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    let log: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("ctx-") && l.contains("T"))
        .collect();
    assert_eq!(log.len(), 10, "ctx log prints five lines, twice:\n{stdout}");
    let (before, after) = log.split_at(5);
    assert!(
        before[1].contains("compaction") && before[1].ends_with("compacted"),
        "{stdout}"
    );
    // After `ctx summarize`: every commit has a summary, the ones written
    // by hand kept.
    assert!(
        before.iter().any(|l| l.ends_with("(no summary)")),
        "{stdout}"
    );
    assert!(
        after.iter().all(|l| !l.ends_with("(no summary)")),
        "{stdout}"
    );
    assert!(after[1].ends_with("compacted"), "{stdout}");
    assert!(after[3].ends_with("read the parser"), "{stdout}");
    // `ctx compact` says what it did, and the session now starts there.
    assert!(
        stdout.lines().any(|l| l.starts_with("ctx-")
            && l.contains(" compacts ctx-")
            && l.ends_with(" by extractive:v1")),
        "{stdout}"
    );
}
