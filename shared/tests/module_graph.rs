//! The modules of ctx-core are layered: the top-level modules form no
//! import cycle (each names, as `crate::m`, only modules below it in one
//! order), and no module of `store` names `service`, so a layer can be
//! read, tested and replaced without the ones above it.
//!
//! Which code is test code is read from the source, never from a file's
//! name: a module declared under `#[cfg(test)]` or behind the
//! `conformance` feature (the test tooling a default build leaves out),
//! with everything below it, and an inline `#[cfg(test)] mod … { … }`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One production source file: its module path (`["store", "aws", "s3"]`)
/// and its text with inline test modules and comments taken out.
struct Module {
    path: Vec<String>,
    file: PathBuf,
    code: String,
}

/// Whether the attributes just above a `mod` declaration gate it to tests
/// or to the test tooling.
fn gated_to_tests(attrs: &[&str]) -> bool {
    attrs.iter().any(|a| {
        let a: String = a.chars().filter(|c| !c.is_whitespace()).collect();
        a.starts_with("#[cfg(") && (a.contains("(test") || a.contains("\"conformance\""))
    })
}

/// `src` without line comments and without the bodies of inline modules
/// gated to tests.
fn production_code(src: &str) -> String {
    let mut out = String::new();
    let mut attrs: Vec<&str> = Vec::new();
    let mut skip_depth: Option<i32> = None;
    for line in src.lines() {
        let t = line.trim_start();
        if let Some(depth) = skip_depth.as_mut() {
            *depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
            if *depth <= 0 {
                skip_depth = None;
            }
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        if t.starts_with("#[") {
            attrs.push(t);
            continue;
        }
        let is_inline_mod = (t.starts_with("mod ") || t.contains(" mod ")) && t.ends_with('{');
        if is_inline_mod && gated_to_tests(&attrs) {
            skip_depth = Some(1);
            attrs.clear();
            continue;
        }
        for a in attrs.drain(..) {
            out.push_str(a);
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The file of module `name` declared in `parent_file`.
fn child_file(parent_file: &Path, name: &str) -> PathBuf {
    let dir = parent_file.parent().expect("a source file has a directory");
    let stem = parent_file.file_stem().and_then(|s| s.to_str());
    let base = match stem {
        Some("lib" | "mod") => dir.to_owned(),
        Some(stem) => dir.join(stem),
        None => unreachable!("a source file has a name"),
    };
    let flat = base.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        base.join(name).join("mod.rs")
    }
}

/// Every production module reachable from `lib.rs` through `mod x;`
/// declarations that are not gated to tests.
fn modules(root: &Path) -> Vec<Module> {
    let mut out = Vec::new();
    let mut todo = vec![(Vec::<String>::new(), root.join("lib.rs"))];
    while let Some((path, file)) = todo.pop() {
        let src = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{} is readable: {e}", file.display()));
        let mut attrs: Vec<&str> = Vec::new();
        for line in src.lines() {
            let t = line.trim_start();
            if t.starts_with("#[") {
                attrs.push(t);
                continue;
            }
            if let Some(decl) = t.strip_suffix(';') {
                let words: Vec<&str> = decl.split_whitespace().collect();
                if let Some(pos) = words.iter().position(|w| *w == "mod")
                    && pos + 1 == words.len() - 1
                    && !gated_to_tests(&attrs)
                {
                    let name = words[pos + 1].to_owned();
                    let mut child = path.clone();
                    child.push(name.clone());
                    todo.push((child, child_file(&file, &name)));
                }
            }
            if !t.is_empty() && !t.starts_with("//") {
                attrs.clear();
            }
        }
        out.push(Module {
            path,
            code: production_code(&src),
            file,
        });
    }
    out
}

/// The top-level modules a piece of code names: `crate::m` and the first
/// segment of each item of `crate::{a::X, b}`.
fn named(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items at depth 0 of the brace group.
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.remove("");
    out
}

fn src_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Which top-level modules each top-level module names in production code.
fn graph(mods: &[Module]) -> BTreeMap<String, BTreeSet<String>> {
    let tops: BTreeSet<String> = mods
        .iter()
        .filter_map(|m| m.path.first().cloned())
        .collect();
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in mods {
        let Some(from) = m.path.first() else { continue };
        for name in named(&m.code) {
            if &name != from && tops.contains(&name) {
                deps.entry(from.clone()).or_default().insert(name);
            }
        }
    }
    deps
}

#[test]
fn shared_src_has_no_import_cycle() {
    let mods = modules(&src_root());
    let deps = graph(&mods);
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

#[test]
fn no_store_module_names_the_service() {
    let mods = modules(&src_root());
    let stores: Vec<&Module> = mods
        .iter()
        .filter(|m| m.path.first().is_some_and(|p| p == "store"))
        .collect();
    // The walk reached the backends, not just store/mod.rs.
    assert!(
        stores.len() > 10,
        "only {} store modules found",
        stores.len()
    );
    for m in stores {
        assert!(
            !named(&m.code).contains("service"),
            "{} ({}) names crate::service",
            m.path.join("::"),
            m.file.display()
        );
    }
}

#[test]
fn the_reader_sees_what_it_must() {
    // A `crate::{…}` group, a gated inline module and a comment.
    let code = production_code(
        "use crate::{service::{A, B}, id::C};\n\
         // crate::api\n\
         #[cfg(test)]\n\
         mod tests {\n    use crate::bootstrap;\n    fn f() {}\n}\n\
         use crate::format;\n",
    );
    assert_eq!(
        named(&code),
        ["format", "id", "service"].map(String::from).into()
    );
    assert!(gated_to_tests(&[
        "#[cfg(any(test, feature = \"conformance\"))]"
    ]));
    assert!(!gated_to_tests(&["#[cfg(feature = \"aws\")]"]));
}

#[test]
fn only_the_edge_names_the_wire_contract_and_the_router() {
    // The layers, lowest first: the domain (ids, commits, formats, ...),
    // the stores, the service; above them the edge: `wire` (the contract),
    // `api` (the router), and what assembles a process (`bootstrap`, `ui`).
    // Nothing below the edge names `wire` or `api`, and `wire` does not name
    // `api`: the service takes and returns domain values, and only the edge
    // knows the wire types.
    let edge = ["wire", "api", "bootstrap", "ui"];
    let deps = graph(&modules(&src_root()));
    for (from, to) in &deps {
        if edge.contains(&from.as_str()) {
            continue;
        }
        for above in ["wire", "api"] {
            assert!(!to.contains(above), "{from} names crate::{above}");
        }
    }
    assert!(
        !deps.get("wire").is_some_and(|to| to.contains("api")),
        "wire names crate::api"
    );
    // Not trivially true: the router names the contract, and the contract
    // the domain values it converts.
    assert!(deps["api"].contains("wire"), "{deps:?}");
    assert!(deps["wire"].contains("commit"), "{deps:?}");
}
