//! The docs, checked against what ctx does (issue 46): every command of
//! docs/cli.md's table exists with the flags it shows, every command ctx
//! has is in that table, and every HTTP request the docs name (`POST
//! /v1/read {delta: true}`, `GET /v1/refs?prefix=`) is a route of the
//! server's OpenAPI document with those query parameters and body fields.
//! The shell examples that run as written are run by `docs_examples`
//! (below) and the README's walkthrough by `readme`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use ctx_tests::{Server, ctx_bin};
use regex_lite::Regex;
use serde_json::Value;

/// The commands of `ctx`, by path (`["ref", "evict"]`): each one's
/// subcommands and flags, as `--help` prints them.
#[derive(Default)]
struct Tree {
    subcommands: BTreeMap<Vec<String>, BTreeSet<String>>,
    flags: BTreeMap<Vec<String>, BTreeSet<String>>,
}

impl Tree {
    /// Walks `ctx --help` and every subcommand's.
    fn read() -> Tree {
        let mut tree = Tree::default();
        let mut todo = vec![Vec::<String>::new()];
        let command = Regex::new(r"^  ([a-z][a-z0-9-]*)(\s|$)").unwrap();
        let flag = Regex::new(r"^\s+(?:(-[A-Za-z0-9]), )?(--[a-z][a-z0-9-]*)?").unwrap();
        while let Some(path) = todo.pop() {
            let out = Command::new(ctx_bin())
                .args(&path)
                .arg("--help")
                .output()
                .expect("ctx runs");
            assert!(out.status.success(), "ctx {path:?} --help failed");
            let help = String::from_utf8(out.stdout).unwrap();
            let (mut subs, mut flags) = (BTreeSet::new(), BTreeSet::new());
            let mut section = "";
            for line in help.lines() {
                if !line.starts_with(' ') && line.ends_with(':') {
                    section = line;
                    continue;
                }
                match section {
                    "Commands:" => {
                        if let Some(c) = command.captures(line)
                            && &c[1] != "help"
                        {
                            subs.insert(c[1].to_owned());
                        }
                    }
                    "Options:" => {
                        if let Some(c) = flag.captures(line) {
                            flags.extend(c.iter().skip(1).flatten().map(|m| m.as_str().to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            for s in &subs {
                let mut p = path.clone();
                p.push(s.clone());
                todo.push(p);
            }
            tree.subcommands.insert(path.clone(), subs);
            tree.flags.insert(path, flags);
        }
        tree
    }

    fn subcommands(&self, path: &[String]) -> &BTreeSet<String> {
        &self.subcommands[path]
    }

    /// The commands without subcommands: what a user runs.
    fn leaves(&self) -> impl Iterator<Item = &Vec<String>> {
        self.subcommands
            .iter()
            .filter(|(p, s)| s.is_empty() && !p.is_empty())
            .map(|(p, _)| p)
    }
}

/// The first cell of each row of docs/cli.md's command table.
fn command_cells(doc: &str) -> Vec<String> {
    doc.lines()
        .filter(|l| l.starts_with("| `ctx "))
        .map(|l| {
            // Cells are split at `|` that is not escaped as `\|`.
            let mut cell = String::new();
            let mut prev = ' ';
            for c in l[1..].chars() {
                if c == '|' && prev != '\\' {
                    break;
                }
                cell.push(c);
                prev = c;
            }
            cell
        })
        .collect()
}

/// The commands a span of the table names (`ctx hooks install\|uninstall
/// claude-code [--project DIR]` names two), walking its words while they
/// are subcommands; `Err` when a word where a subcommand must be is not
/// one.
fn paths_of(tree: &Tree, words: &[&str], from: Vec<String>) -> Result<Vec<Vec<String>>, String> {
    let mut paths = vec![from];
    for word in words {
        let alternatives: Vec<&str> = word.split("\\|").collect();
        let subs = tree.subcommands(&paths[0]);
        if subs.is_empty() {
            break;
        }
        if !alternatives.iter().all(|a| subs.contains(*a)) {
            return Err(format!(
                "`ctx {}` has no subcommand {word} (it has {subs:?})",
                paths[0].join(" ")
            ));
        }
        paths = paths
            .iter()
            .flat_map(|p| {
                alternatives.iter().map(move |a| {
                    let mut p = p.clone();
                    p.push((*a).to_owned());
                    p
                })
            })
            .collect();
    }
    Ok(paths)
}

/// The flags a span shows (`--stop`, `-n`, `-o`).
fn flags_of(span: &str) -> Vec<String> {
    let flag = Regex::new(r"(?:^|[\s\[(])(--?[A-Za-z][A-Za-z0-9-]*)").unwrap();
    flag.captures_iter(span).map(|c| c[1].to_owned()).collect()
}

#[test]
fn docs_cli_md_names_every_command_with_the_flags_it_has() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md"))
        .unwrap();
    let tree = Tree::read();
    let span = Regex::new(r"`([^`]+)`").unwrap();
    // The help was read: `ctx materialize` has `--stop` and `-o`.
    let materialize = &tree.flags[&vec!["materialize".to_owned()]];
    assert!(
        materialize.contains("--stop") && materialize.contains("-o"),
        "{materialize:?}"
    );
    let mut documented: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut checked = 0;
    let mut wrong: Vec<String> = Vec::new();
    for cell in command_cells(&doc) {
        let mut row: Vec<Vec<String>> = Vec::new();
        let mut last: Vec<Vec<String>> = Vec::new();
        for s in span.captures_iter(&cell) {
            let s = &s[1];
            let words: Vec<&str> = s.split_whitespace().collect();
            let paths = if words[0] == "ctx" {
                paths_of(&tree, &words[1..], Vec::new())
            } else if words[0].starts_with('-') {
                // Flags that apply to the row's commands: `(--data DIR)`.
                let flags = flags_of(s);
                for f in &flags {
                    if !row.iter().any(|p| tree.flags[p].contains(f)) {
                        wrong.push(format!("{cell}: no command of the row has {f}"));
                    }
                }
                continue;
            } else if let Some(parent) = last
                .first()
                .and_then(|p| p.split_last().map(|(_, p)| p.to_vec()))
            {
                // A sibling, as in `ctx tokens add TENANT` / `list`.
                paths_of(&tree, &words[..1], parent)
            } else {
                continue;
            };
            let paths = match paths {
                Ok(p) => p,
                Err(e) => {
                    wrong.push(format!("{s}: {e}"));
                    continue;
                }
            };
            for f in flags_of(s) {
                checked += 1;
                if !paths.iter().any(|p| tree.flags[p].contains(&f)) {
                    wrong.push(format!("{s}: `ctx {}` has no flag {f}", paths[0].join(" ")));
                }
            }
            documented.extend(paths.iter().cloned());
            row.extend(paths.iter().cloned());
            last = paths;
        }
    }
    assert!(
        documented.len() > 50 && checked > 60,
        "the table names {} commands and {checked} flags",
        documented.len()
    );
    for leaf in tree.leaves() {
        if !documented.contains(leaf) {
            wrong.push(format!(
                "`ctx {}` is not in docs/cli.md's table",
                leaf.join(" ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/cli.md and ctx disagree:\n{}",
        wrong.join("\n")
    );
}

/// A request the docs name: `POST /v1/read {ref, delta: true}`.
struct Request {
    doc: String,
    verb: String,
    path: String,
    query: Vec<String>,
    body: Vec<String>,
}

/// docs/*.md and the README, in order.
fn doc_files() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(root.join("README.md"));
    files.sort();
    files
}

/// Every request named in a code span of the docs and the README.
fn requests() -> Vec<Request> {
    let files = doc_files();
    let request = Regex::new(r"`(GET|POST|PUT|DELETE|PATCH) (/[^` ]*)(?: (\{[^`]*\}))?`").unwrap();
    let key = Regex::new(r"[{,]\s*([a-z_]+)\??\s*(?::|,|\})").unwrap();
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // A span may wrap across a line in prose.
        let text = text
            .replace("`POST\n/", "`POST /")
            .replace("`GET\n/", "`GET /");
        for c in request.captures_iter(&text) {
            let (path, query) = match c[2].split_once('?') {
                Some((p, q)) => (p, q),
                None => (&c[2], ""),
            };
            found.push(Request {
                doc: format!("{}: {}", file.file_name().unwrap().to_string_lossy(), &c[0]),
                verb: c[1].to_lowercase(),
                path: path.to_owned(),
                query: query
                    .split('&')
                    .filter(|q| !q.is_empty())
                    .map(|q| q.split('=').next().unwrap().to_owned())
                    .collect(),
                body: c.get(3).map_or_else(Vec::new, |b| {
                    key.captures_iter(b.as_str())
                        .map(|k| k[1].to_owned())
                        .collect()
                }),
            });
        }
    }
    found
}

/// Whether `route` (`/v1/refs/{name}/evict`) matches the docs' `path`
/// (`/v1/refs/sessions/s-7/evict`, `/v1/refs/{name}/evict`): a parameter
/// takes one segment, or several for the ones that hold a slash (a ref's
/// `name`, a workspace file's `path`).
fn route_matches(route: &str, path: &str) -> bool {
    let pattern: String = route
        .split('/')
        .map(|seg| match seg {
            "{name}" | "{path}" => ".+".to_owned(),
            s if s.starts_with('{') => "[^/]+".to_owned(),
            s => regex_lite::escape(s),
        })
        .collect::<Vec<_>>()
        .join("/");
    Regex::new(&format!("^{pattern}$")).unwrap().is_match(path)
}

/// The property names of a request body's schema (following `$ref`,
/// `allOf`, `oneOf` and `anyOf`).
fn properties(doc: &Value, schema: &Value, out: &mut BTreeSet<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap();
        properties(doc, &doc["components"]["schemas"][name], out);
    }
    if let Some(p) = schema["properties"].as_object() {
        out.extend(p.keys().cloned());
    }
    for k in ["allOf", "oneOf", "anyOf"] {
        for s in schema[k].as_array().into_iter().flatten() {
            properties(doc, s, out);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_the_docs_name_is_a_route_with_those_parameters_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let doc = server
        .client()
        .ok("GET", "/v1/openapi.json?all=true", None)
        .await;
    let requests = requests();
    assert!(
        requests.len() > 40,
        "found only {} requests",
        requests.len()
    );
    let mut wrong = Vec::new();
    for r in &requests {
        let ops: Vec<&Value> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(route, _)| route_matches(route, &r.path))
            .filter_map(|(_, ops)| ops.get(&r.verb))
            .collect();
        let Some(op) = ops.first() else {
            wrong.push(format!("{}: no such route", r.doc));
            continue;
        };
        let params: BTreeSet<&str> = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        for q in &r.query {
            if !params.contains(q.as_str()) {
                wrong.push(format!(
                    "{}: no query parameter {q} (it has {params:?})",
                    r.doc
                ));
            }
        }
        let mut fields = BTreeSet::new();
        for (_, media) in op["requestBody"]["content"]
            .as_object()
            .into_iter()
            .flatten()
        {
            properties(&doc, &media["schema"], &mut fields);
        }
        for b in &r.body {
            if !fields.contains(b) {
                wrong.push(format!(
                    "{}: the body has no field {b} (it has {fields:?})",
                    r.doc
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the docs name requests the server does not take:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_route_matcher_takes_slashes_only_where_a_name_holds_them() {
    assert!(route_matches(
        "/v1/refs/{name}/evict",
        "/v1/refs/sessions/s-7/evict"
    ));
    assert!(route_matches(
        "/v1/commits/{ctx}/history",
        "/v1/commits/{ctx}/history"
    ));
    assert!(!route_matches(
        "/v1/commits/{ctx}",
        "/v1/commits/{ctx}/history"
    ));
    assert!(!route_matches("/v1/sessions/{id}", "/v1/sessions/a/b"));
}

/// How a shell example of the docs is checked.
enum Example {
    /// Run as written in a fresh directory beside a fresh `ctx serve`
    /// (`./.ctx`, `$HOME` there too), after `setup` made the state its
    /// prose assumes, with only `subs` replaced (the server's address
    /// always).
    Run {
        setup: &'static str,
        subs: &'static [(&'static str, &'static str)],
        serve: &'static [&'static str],
    },
    /// Not run here, and why (what runs it instead).
    Elsewhere(&'static str),
}

/// Every ` ```sh ` block of docs/*.md and the README, by file and first
/// line; a block missing here fails the test until it is added.
fn examples() -> Vec<(&'static str, &'static str, Example)> {
    use Example::{Elsewhere, Run};
    let none: &'static [(&str, &str)] = &[];
    vec![
        (
            "README.md",
            "cargo run --release -p ctx-cli -- serve",
            Elsewhere("starts the server, which every test does"),
        ),
        (
            "README.md",
            "tests/run",
            Elsewhere("the test command itself: CI runs it"),
        ),
        (
            "README.md",
            "export PATH=\"$PWD/target/release:$PATH\"",
            Elsewhere("the walkthrough: tests/readme.rs runs it as written"),
        ),
        (
            "README.md",
            "pip install './clients/python[langgraph]'",
            Elsewhere("tests/python/run installs the client and the native module this way"),
        ),
        (
            "README.md",
            "ctx current --session <session_id>",
            Run {
                setup: "mkdir -p ~/.claude/projects/p && cp \"$FIXTURES/claude-code-session.jsonl\" ~/.claude/projects/p/s-1.jsonl\n\
                    printf '{\"session_id\":\"s-1\",\"transcript_path\":\"%s\",\"cwd\":\".\",\"hook_event_name\":\"Stop\"}' ~/.claude/projects/p/s-1.jsonl | ctx hook claude-code",
                subs: &[("<session_id>", "s-1")],
                serve: &[],
            },
        ),
        (
            "aws.md",
            "",
            Elsewhere(
                "deploys to AWS: the template's lint, IAM and invoke tests in tests/run check what it deploys",
            ),
        ),
        (
            "bench.md",
            "",
            Elsewhere("a benchmark: tests/run smoke-runs the benches"),
        ),
        (
            "cli.md",
            "ctx hooks install claude-code --project .   #",
            Run {
                setup: "mkdir -p ~/.claude/projects/p && cp \"$FIXTURES/claude-code-session.jsonl\" ~/.claude/projects/p/s-1.jsonl\n\
                    printf '{\"session_id\":\"s-1\",\"transcript_path\":\"%s\",\"cwd\":\".\",\"hook_event_name\":\"Stop\"}' ~/.claude/projects/p/s-1.jsonl | ctx hook claude-code\n\
                    TIP=$(ctx ref get claude/p/s-1 | awk '{print $1}')",
                subs: &[
                    ("<project_key>/<session_id>", "p/s-1"),
                    ("ctx resume ctx-…", "ctx resume \"$TIP\""),
                ],
                serve: &[],
            },
        ),
        (
            "cli.md",
            "C1=$(echo 'user: find the bug in parser.rs'",
            Run {
                setup: "",
                subs: none,
                serve: &[],
            },
        ),
        (
            "cli.md",
            "ctx hooks install claude-code --project . --every 5",
            Run {
                setup: "",
                subs: none,
                serve: &[],
            },
        ),
        (
            "folding.md",
            "",
            Run {
                setup: "echo 'user: find the bug in parser.rs' | ctx checkpoint --principal alice --ref sessions/demo --session demo",
                subs: none,
                serve: &[],
            },
        ),
        (
            "formats.md",
            "ctx import claude-code",
            Run {
                setup: "mkdir -p ~/.claude/projects/my-project && cp \"$FIXTURES/claude-code-session.jsonl\" ~/.claude/projects/my-project/session.jsonl",
                subs: none,
                serve: &[],
            },
        ),
        (
            "formats.md",
            "ctx import codex",
            Run {
                setup: "mkdir -p ~/.codex/sessions/2026/11/21 ~/.gemini/tmp/my-project-hash/chats\n\
                    cp \"$FIXTURES/codex-rollout.jsonl\" ~/.codex/sessions/2026/11/21/rollout-….jsonl\n\
                    cp \"$FIXTURES/gemini-cli-session.jsonl\" ~/.gemini/tmp/my-project-hash/chats/session-….jsonl",
                subs: none,
                serve: &[],
            },
        ),
        (
            "lifecycle.md",
            "ctx gc --dry-run",
            Run {
                setup: "",
                subs: none,
                serve: &[],
            },
        ),
        (
            "lifecycle.md",
            "ctx pin add session s-42",
            Run {
                setup: "echo 'user: hi' | ctx checkpoint --principal team/bot --session s-42 --ref sessions/s-42\n\
                    echo 'user: hi' | ctx checkpoint --principal team/bot\n\
                    echo 'user: hi' | ctx checkpoint --principal alice --ref sessions/s-7",
                subs: none,
                serve: &[],
            },
        ),
        (
            "lifecycle.md",
            "# embedded: stop `ctx serve` first",
            Elsewhere(
                "erases a tenant with the server stopped, and on AWS: tests/tenants.rs runs both forms",
            ),
        ),
        (
            "lifecycle.md",
            "# the table the Lambdas use",
            Elsewhere("AWS only: tests/tenants.rs runs it on the emulator"),
        ),
        (
            "lifecycle.md",
            "ctx compact sessions/s-7",
            Run {
                setup: "for i in 1 2 3; do echo \"user: turn $i\" | ctx checkpoint --principal f --ref sessions/s-7; done\n\
                    echo 'user: turn 1' | ctx checkpoint --principal f --ref sessions/s-8\n\
                    echo 'summary: by hand' | ctx checkpoint --principal f --ref sessions/s-8 --type compaction",
                subs: none,
                serve: &[],
            },
        ),
        (
            "summaries.md",
            "ctx serve --summarize-every 1m &",
            Run {
                setup: "echo 'user: find the bug in parser.rs' | ctx checkpoint --principal alice --ref sessions/demo\n\
                    C=$(echo 'assistant: reading parser.rs' | ctx checkpoint --principal alice --ref sessions/demo)",
                subs: &[
                    ("ctx serve --summarize-every 1m &", ":"),
                    ("ctx-…", "\"$C\""),
                ],
                serve: &["--summarize-every", "1m"],
            },
        ),
        (
            "summaries.md",
            "ollama pull",
            Elsewhere(
                "a model server from the internet: the openai backend is tested against a fake server in shared/src/summarize",
            ),
        ),
        (
            "workspaces.md",
            "",
            Run {
                setup: "",
                subs: none,
                serve: &[],
            },
        ),
    ]
}

/// Every ` ```sh ` block of the docs and the README: (file, body).
fn sh_blocks() -> Vec<(String, String)> {
    let files = doc_files();
    let mut blocks = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```sh\n") {
            let body = &rest[start + 6..];
            let end = body.find("```").expect("a closed block");
            blocks.push((name.clone(), body[..end].to_owned()));
            rest = &body[end + 3..];
        }
    }
    blocks
}

#[test]
fn every_shell_example_of_the_docs_runs_as_written() {
    let examples = examples();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let bin_dir = ctx_bin().parent().unwrap().to_owned();
    let mut unlisted = Vec::new();
    let mut failed = Vec::new();
    let mut ran = 0;
    let tree = Tree::read();
    let invocation = Regex::new(r"(?m)(?:^|[\s|;&(])ctx((?:[ \t]+[a-z][a-z-]*)+)").unwrap();
    let mut run_commands: BTreeSet<Vec<String>> = BTreeSet::new();
    for (file, body) in sh_blocks() {
        let Some((_, _, example)) = examples
            .iter()
            .find(|(f, first, _)| *f == file && body.starts_with(first))
        else {
            unlisted.push(format!("{file}: {}", body.lines().next().unwrap_or("")));
            continue;
        };
        let walkthrough = file == "README.md" && body.starts_with("export PATH=");
        if matches!(example, Example::Run { .. }) || walkthrough {
            for c in invocation.captures_iter(&body) {
                let mut path = Vec::new();
                for word in c[1].split_whitespace() {
                    if !tree.subcommands(&path).contains(word) {
                        break;
                    }
                    path.push(word.to_owned());
                }
                run_commands.insert(path);
            }
        }
        let (setup, subs, serve) = match example {
            Example::Run { setup, subs, serve } => (setup, subs, serve),
            Example::Elsewhere(why) => {
                assert!(!why.is_empty(), "{file}: say what runs it");
                continue;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start_with(&dir.path().join(".ctx"), serve);
        let mut script = body.replace("http://127.0.0.1:7878", &server.url);
        for (from, to) in *subs {
            assert!(
                script.contains(from),
                "{file}: the example no longer holds {from:?}"
            );
            script = script.replace(from, to);
        }
        let out = Command::new("bash")
            .args([
                "-euo",
                "pipefail",
                "-c",
                &format!(
                    "export PATH=\"{}:$PATH\"\n{setup}\n{script}",
                    bin_dir.display()
                ),
            ])
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .env("FIXTURES", &fixtures)
            .env("CTX_SERVER", &server.url)
            .env_remove("CTX_TOKEN")
            .env_remove("CTX_DATA")
            .env_remove("CTX_PRINCIPAL")
            .output()
            .expect("bash runs");
        ran += 1;
        if !out.status.success() {
            failed.push(format!(
                "{file} (`{}`) exited {:?}:\n{}{}",
                body.lines().next().unwrap_or(""),
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        unlisted.is_empty(),
        "shell examples this test does not know (add each to `examples`):\n{}",
        unlisted.join("\n")
    );
    assert!(
        failed.is_empty(),
        "shell examples that fail as written:\n{}",
        failed.join("\n\n")
    );
    assert!(ran >= 12, "ran only {ran} examples");
    // What the examples do not run needs what a test cannot give a shell
    // example: a server of its own, an MCP client, Claude Code's hook
    // input, a stopped server or an AWS table.
    let elsewhere = ["serve", "mcp", "hook", "tenants"];
    let not_run: Vec<String> = tree
        .leaves()
        .filter(|p| !run_commands.contains(*p) && !elsewhere.contains(&p[0].as_str()))
        .map(|p| format!("ctx {}", p.join(" ")))
        .collect();
    assert!(
        not_run.is_empty(),
        "commands no example of the docs runs (docs/cli.md's \"Every command, once\" is the place):\n{}",
        not_run.join("\n")
    );
}
