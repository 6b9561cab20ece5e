//! The read_context table: workspaces as sequences of writes and appends,
//! applied to a store (through any host) or to local directories, whose
//! assembled contexts the tests compare and pin. Test tooling (feature
//! `conformance`), shared by the unit, HTTP and CLI tests.

use std::path::Path;

/// One write of a case.
#[derive(Debug, Clone)]
pub enum Op {
    /// Writes a whole file (`tastes`: into the tastes workspace/directory).
    Put {
        /// Whether it is a tastes file.
        tastes: bool,
        /// Its path.
        path: &'static str,
        /// Its content.
        content: String,
    },
    /// Appends JSONL lines (each one JSON value) to a workspace file.
    Append {
        /// Its path.
        path: &'static str,
        /// The lines, newline-separated.
        lines: String,
    },
}

/// A named workspace.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name (the snapshot's).
    pub name: &'static str,
    /// What to write, in order.
    pub ops: Vec<Op>,
}

fn put(path: &'static str, content: impl Into<String>) -> Op {
    Op::Put {
        tastes: false,
        path,
        content: content.into(),
    }
}

fn taste(path: &'static str, content: impl Into<String>) -> Op {
    Op::Put {
        tastes: true,
        path,
        content: content.into(),
    }
}

fn append(path: &'static str, lines: impl Into<String>) -> Op {
    Op::Append {
        path,
        lines: lines.into(),
    }
}

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("note line {i}\n")).collect()
}

fn log_line(i: usize) -> String {
    format!(
        r#"{{"timestamp":"2026-04-29T10:{:02}:00Z","op":"apply","details":{{"step":{i}}}}}"#,
        i % 60
    )
}

fn gap_line(i: usize) -> String {
    format!(
        r#"{{"timestamp":"2026-04-29T11:{:02}:00Z","image_id":"img-1","description":"gap {i}"}}"#,
        i % 60
    )
}

/// Every case of the table.
pub fn cases() -> Vec<Case> {
    let mut many = Vec::new();
    for batch in 0..5 {
        let lines: Vec<String> = (0..5).map(|i| log_line(batch * 5 + i + 1)).collect();
        many.push(append("log.jsonl", lines.join("\n")));
        let gaps: Vec<String> = (0..3).map(|i| gap_line(batch * 3 + i + 1)).collect();
        many.push(append("vocabulary_gaps.jsonl", gaps.join("\n")));
    }
    vec![
        Case {
            name: "fresh_workspace",
            ops: vec![],
        },
        Case {
            name: "populated",
            ops: vec![
                taste("_default.md", "# Default\nPrefer natural colour.\n"),
                taste(
                    "underwater.md",
                    "# Underwater\nRecover reds lost at depth.\n",
                ),
                taste("wildlife.md", "# Wildlife\nEyes sharp.\n"),
                taste("portrait.md", "# Portrait\nSoft skin.\n"),
                put(
                    "brief.md",
                    "# Manta at Hanifaru\n\nTastes: underwater, wildlife\n\nMake the manta pop against the blue.\n",
                ),
                put(
                    "notes.md",
                    "Session 1: lifted shadows.\nSession 2: tried warmer WB.\n",
                ),
                append(
                    "log.jsonl",
                    format!(
                        "{}\n{}",
                        log_line(1),
                        r#"{"timestamp":"2026-04-29T10:05:00Z","op":"snapshot"}"#
                    ),
                ),
                append(
                    "vocabulary_gaps.jsonl",
                    r#"{"timestamp":"2026-04-29T11:00:00Z","image_id":"img-1","description":"no local dehaze","intent":"clear the water","intent_category":"local_adjustment","operations_involved":["dehaze"],"satisfaction":0}"#,
                ),
            ],
        },
        Case {
            name: "notes_exactly_40_lines",
            ops: vec![put("notes.md", numbered(40))],
        },
        Case {
            name: "notes_41_lines",
            ops: vec![put("notes.md", numbered(41))],
        },
        Case {
            name: "conflicts_in_two_genre_files",
            ops: vec![
                taste("_default.md", "Keep it natural.\n"),
                taste("a.md", "Boost saturation.\nCrop tight.\n"),
                taste("b.md", "Crop tight.\nLeave the grain.\n"),
                put("brief.md", "Tastes: a, b\nA portrait."),
            ],
        },
        Case {
            name: "conflicts_in_three_genre_files",
            ops: vec![
                taste("a.md", "Crop tight.\nWarm tones.\n"),
                taste("b.md", "  Crop tight.  \nCool tones.\n"),
                taste("c.md", "Warm tones.\nCrop tight.\nCool tones.\n"),
                put("brief.md", "Tastes: [c, a, b]\n"),
            ],
        },
        Case {
            name: "comment_and_blank_lines_ignored",
            ops: vec![
                taste("a.md", "# Tastes\n\n<!-- shared note -->\nWarm tones.\n\n"),
                taste(
                    "b.md",
                    "# Tastes\n\n<!-- shared note -->\nCool tones.\n   \n",
                ),
                put(
                    "brief.md",
                    "Intro.\nTastes: a, b, missing, ../escape\nOutro.\n",
                ),
            ],
        },
        Case {
            name: "missing_brief",
            ops: vec![
                taste("_default.md", "Default only.\n"),
                taste("a.md", "Never loaded without a brief.\n"),
                put("notes.md", "A note."),
            ],
        },
        Case {
            name: "malformed_log_lines",
            ops: vec![
                put(
                    "log.jsonl",
                    format!(
                        "{}\nnot json at all\n[1, 2]\n{{\"op\": 5}}\n{{\"truncated\": \n{}",
                        log_line(1),
                        log_line(2)
                    ),
                ),
                append("log.jsonl", log_line(3)),
                put(
                    "vocabulary_gaps.jsonl",
                    format!(
                        "{}\n{{\"operations_involved\": \"not a list\"}}\n42\n",
                        gap_line(1)
                    ),
                ),
            ],
        },
        Case {
            name: "more_than_ten_log_and_gap_entries",
            ops: many,
        },
    ]
}

/// Writes `case` into a workspace directory and a tastes directory, as the
/// store holds it: an append to content that does not end a line starts a
/// new line.
///
/// # Panics
/// When the directories cannot be written (test tooling).
pub fn write_dirs(case: &Case, workspace: &Path, tastes: &Path) {
    for op in &case.ops {
        let (file, bytes) = match op {
            Op::Put {
                tastes: t,
                path,
                content,
            } => (
                if *t { tastes } else { workspace }.join(path),
                content.clone(),
            ),
            Op::Append { path, lines } => {
                let file = workspace.join(path);
                let mut old = std::fs::read_to_string(&file).unwrap_or_default();
                if !old.is_empty() && !old.ends_with('\n') {
                    old.push('\n');
                }
                (file, format!("{old}{lines}\n"))
            }
        };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).expect("create the directory");
        }
        std::fs::write(&file, bytes).expect("write the file");
    }
}
