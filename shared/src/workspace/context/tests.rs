//! The pure parts of the assembly: the brief's `Tastes:` line, notes
//! truncation at the threshold, conflicts, JSONL lines.

use super::*;

#[test]
fn brief_tastes_line_and_intent() {
    let b = parse_brief(
        "# Title\ntastes: [underwater, 'wildlife', , underwater]\nDo it.\nTastes: ignored\n",
    );
    assert_eq!(b.tastes, vec!["underwater", "wildlife"]);
    assert_eq!(b.intent, "# Title\nDo it.\nTastes: ignored");
    let b = parse_brief("No tastes here.");
    assert!(b.tastes.is_empty());
    assert_eq!(b.intent, "No tastes here.");
}

#[test]
fn notes_are_whole_up_to_the_threshold_then_head_and_tail() {
    let lines = |n: usize| (1..=n).map(|i| format!("l{i}")).collect::<Vec<_>>();
    let forty = lines(NOTES_TRUNCATION_THRESHOLD).join("\n");
    assert_eq!(
        summarize_notes(&forty),
        Notes {
            summary: forty.clone(),
            truncated: false
        }
    );
    let n = summarize_notes(&lines(100).join("\n"));
    assert!(n.truncated);
    let expected = format!(
        "{}\n\n... [60 lines elided] ...\n\n{}",
        lines(100)[..10].join("\n"),
        lines(100)[70..].join("\n")
    );
    assert_eq!(n.summary, expected);
}

#[test]
fn conflicts_are_lines_of_two_or_more_genre_files() {
    let g = |n: &str, t: &str| (n.to_owned(), t.to_owned());
    let c = find_conflicts(&[g("a", "x\ny\nx\n"), g("b", "y\n# y\n"), g("c", " y \nx")]);
    assert_eq!(
        c,
        vec![
            Conflict {
                point: "x".into(),
                files: vec!["a".into(), "c".into()]
            },
            Conflict {
                point: "y".into(),
                files: vec!["a".into(), "b".into(), "c".into()]
            },
        ]
    );
}

#[test]
fn jsonl_lines_that_are_not_records_are_skipped() {
    assert!(parse_line::<LogEntry>("{\"op\":\"x\"}").is_some());
    for bad in ["", "x", "[1]", "{\"op\":5}", "{\"op\":", "42", "null"] {
        assert!(parse_line::<LogEntry>(bad).is_none(), "{bad}");
    }
    let g: GapRecord = parse_line("{}").expect("all defaults");
    assert_eq!(g.intent_category, "uncategorized");
    assert!(parse_line::<GapRecord>("{\"satisfaction\":\"high\"}").is_none());
}
