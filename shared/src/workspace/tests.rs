//! Workspace ids and file paths: what names a file, and what is refused
//! (traversal, absolute paths, depth, length, characters).

use super::{FilePath, MAX_DEPTH, WorkspaceId, file_ref};
use crate::id::RefName;

#[test]
fn paths_that_name_files() {
    for ok in [
        "brief.md",
        "_default.md",
        "a/b/c.jsonl",
        ".hidden",
        "x-1_2.3",
        "a.b/c",
    ] {
        let p: FilePath = ok.parse().unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        let w: WorkspaceId = "img-1".parse().expect("valid");
        let r = file_ref(&w, &p);
        assert_eq!(r.as_str(), format!("workspaces/img-1/{ok}"));
        assert!(r.as_str().parse::<RefName>().is_ok());
    }
    let deep = ["d"; MAX_DEPTH].join("/");
    assert!(deep.parse::<FilePath>().is_ok());
    let longest = format!("{}.md", "a".repeat(117));
    assert!(longest.parse::<FilePath>().is_ok());
    let w = WorkspaceId::tastes();
    assert!(
        file_ref(&w, &longest.parse().expect("valid"))
            .as_str()
            .parse::<RefName>()
            .is_ok()
    );
    let ws_longest = "w".repeat(64);
    let r = file_ref(
        &ws_longest.parse().expect("valid"),
        &longest.parse().expect("valid"),
    );
    assert!(r.as_str().len() <= 200);
}

#[test]
fn paths_that_are_refused_name_the_field() {
    let deeper = ["d"; MAX_DEPTH + 1].join("/");
    let longer = "a".repeat(121);
    for bad in [
        "",
        "..",
        "../x",
        "a/../b",
        "a/..",
        ".",
        "./a",
        "/etc/passwd",
        "a//b",
        "a/",
        "a\\b",
        "a..b",
        "é.md",
        "a b",
        "a\0b",
        "C:x",
        deeper.as_str(),
        longer.as_str(),
    ] {
        let e = bad.parse::<FilePath>().expect_err(bad);
        assert_eq!(e.field.as_deref(), Some("path"), "{bad:?}");
    }
    for bad in ["", "a/b", "..", ".", "tastes/x", &"w".repeat(65)] {
        let e = bad.parse::<WorkspaceId>().expect_err(bad);
        assert_eq!(e.field.as_deref(), Some("ws"), "{bad:?}");
    }
}
