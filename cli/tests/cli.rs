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
