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
    // Step 6's compaction keeps the pending turn: `ctx materialize` after
    // it still ends with `user: fix it` (issue 46, item 2).
    let step6 = stdout
        .find(" compacts ")
        .map(|i| &stdout[i..])
        .expect("ctx compact reports what it compacted");
    let pending = "summary: off-by-one at parser.rs:42\nuser: fix it\n";
    assert!(
        step6.contains(&format!("{pending}{{\"artifact_ref\"")),
        "ctx materialize after step 6 still ends with `user: fix it`:\n{step6}"
    );
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

/// A newcomer's first screen: the README's first 40 lines give the two
/// set-up commands, one that runs ctx and one that runs every test.
#[test]
fn the_readme_opens_with_the_two_commands() {
    let head = include_str!("../README.md")
        .lines()
        .take(40)
        .collect::<Vec<_>>()
        .join("\n");
    for command in [
        "```sh\ncargo run --release -p ctx-cli -- serve --summarize-every 1m\n```",
        "```sh\ntests/run\n```",
    ] {
        assert!(head.contains(command), "{command:?} not in:\n{head}");
    }
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// made hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every relative link of the README and the guides in docs/ names a file
/// of the repository, and a `#fragment` one of its headings: the text that
/// moved out of the README is still reached from it.
#[test]
fn the_readme_and_the_guides_link_to_what_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "md") {
            docs.push(path);
        }
    }
    let mut checked = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let target = &rest[..rest.find(')').expect("a closed link")];
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            assert!(
                path.exists(),
                "{} links to {target}, which does not exist",
                doc.display()
            );
            if !fragment.is_empty() {
                let linked = std::fs::read_to_string(&path).unwrap();
                assert!(
                    linked
                        .lines()
                        .filter_map(|l| l
                            .trim_start_matches('#')
                            .strip_prefix(' ')
                            .filter(|_| l.starts_with('#')))
                        .any(|h| anchor(h) == fragment),
                    "{} links to {target}: no such heading",
                    doc.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 20,
        "the README's links onward were found ({checked})"
    );
}
