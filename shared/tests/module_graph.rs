//! The top-level modules of ctx-core form no import cycle: each names
//! (`crate::m`) only modules below it in one order, so a layer can be read,
//! tested and replaced without the ones above it. Test code (unit test
//! files, the conformance suite, test tooling) may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("shared/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file holds only test code.
fn is_test_code(rel: &str) -> bool {
    rel.contains("/tests/")
        || rel.ends_with("tests.rs")
        || rel.contains("/conformance/")
        || rel.ends_with("testing.rs")
        || rel.ends_with("report.rs")
}

/// Which top-level modules each top-level module names, outside comments
/// and test code.
fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let top = |rel: &str| {
        rel.split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_owned()
    };
    let mut modules: BTreeSet<String> = files
        .iter()
        .map(|f| top(&f.strip_prefix(root).unwrap().to_string_lossy()))
        .collect();
    modules.remove("lib");
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let from = top(&rel);
        if from == "lib" || is_test_code(&rel) {
            continue;
        }
        let src = std::fs::read_to_string(file).unwrap();
        let src = src
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or_default();
        for line in src.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name != from && modules.contains(&name) {
                    deps.entry(from.clone()).or_default().insert(name);
                }
            }
        }
    }
    deps
}

#[test]
fn shared_src_has_no_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let deps = graph(&root);
    // Depth-first search for a path from a module back to itself.
    for start in deps.keys() {
        let mut stack: Vec<Vec<&String>> = vec![vec![start]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = *path.last().unwrap();
            for next in deps.get(last).into_iter().flatten() {
                let mut longer = path.clone();
                longer.push(next);
                assert!(
                    next != start,
                    "import cycle: {}",
                    longer
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" -> ")
                );
                if seen.insert(next) {
                    stack.push(longer);
                }
            }
        }
    }
    // The graph is not trivially empty: the service names the stores.
    assert!(deps["service"].contains("store"), "{deps:?}");
}
