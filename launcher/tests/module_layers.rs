//! The launcher's modules form layers, not a circle.
//!
//! Reads every file under `launcher/src`, finds which top-level module it belongs to (`cli`,
//! `run`, `live`, `console`, `bench`, ...) and which other top-level modules it names through
//! `crate::X`, `use crate::{X, ..}` or enough `super::` to climb to the crate root, and fails on
//! a cycle among them, printing it. It also holds the edge of the layering: the flag types
//! (`cli`) are read by `run` alone, and nothing imports `run`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the top-level modules it references.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Modules that may name `cli` (the flag types): only the one that turns flags into specs.
const MAY_IMPORT_CLI: &[&str] = &["run"];

#[test]
fn launcher_modules_form_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    for (module, uses) in &graph {
        println!("{module} -> {uses:?}");
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "the launcher's modules import each other in a circle: {}",
            cycle.join(" -> ")
        );
    }
    for (module, uses) in &graph {
        assert!(
            !uses.contains("run"),
            "{module} imports run; run is the top layer (it dispatches to the others)"
        );
        assert!(
            !uses.contains("cli") || MAY_IMPORT_CLI.contains(&module.as_str()),
            "{module} imports cli; below run, modules take typed options, not flags"
        );
    }
}

#[test]
fn a_planted_back_edge_is_found() {
    let mut graph = Graph::new();
    graph.entry("run".into()).or_default().insert("live".into());
    graph
        .entry("live".into())
        .or_default()
        .insert("cluster".into());
    assert_eq!(find_cycle(&graph), None);
    graph
        .entry("cluster".into())
        .or_default()
        .insert("run".into());
    assert_eq!(
        find_cycle(&graph),
        Some(vec![
            "cluster".to_string(),
            "run".into(),
            "live".into(),
            "cluster".into()
        ])
    );
}

#[test]
fn references_are_read_from_paths_use_groups_and_super() {
    let refs = |path: &[&str], text: &str| -> Vec<String> {
        let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        references(&path, text).into_iter().collect()
    };
    assert_eq!(
        refs(
            &["live", "job"],
            "use crate::{cluster::Cluster, console};\n"
        ),
        ["cluster", "console"]
    );
    assert_eq!(
        refs(&["live", "job"], "let x = crate::run::y(); // crate::cli\n"),
        ["run"]
    );
    assert_eq!(
        refs(&["live", "job"], "use super::spawn;\n"),
        [] as [&str; 0]
    );
    assert_eq!(refs(&["bench"], "use super::console::X;\n"), ["console"]);
    assert_eq!(
        refs(&["bench", "era"], "super::super::cli::BenchArgs"),
        ["cli"]
    );
    assert_eq!(
        refs(&["run"], "use crate::{\n    live::{A, B},\n    report,\n};"),
        ["live", "report"]
    );
}

/// The top-level module graph of the crate rooted at `src`.
fn module_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).expect("under src");
        let path = module_path(relative);
        let Some(top) = path.first() else {
            continue; // main.rs or lib.rs: the roots, which name every module
        };
        let text = std::fs::read_to_string(&file).expect("readable source");
        let uses = graph.entry(top.clone()).or_default();
        for module in references(&path, &text) {
            if &module != top {
                uses.insert(module);
            }
        }
    }
    graph
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `live/job/remote.rs` → `[live, job, remote]`; `bench/mod.rs` → `[bench]`; roots → `[]`.
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "main" || parts[0] == "lib") {
        parts.clear();
    }
    parts
}

/// The top-level modules that code of module `path` names (comments ignored).
fn references(path: &[String], text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = find_path_start(rest) {
        let (climb, after) = at;
        // `crate::` is the root; each `super::` climbs one module from `path`.
        let from_root = match climb {
            None => true,
            Some(supers) => supers >= path.len(),
        };
        rest = after;
        if !from_root {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = matching_brace(group);
            for item in split_top_level(&group[..end]) {
                if let Some(name) = leading_ident(item.trim()) {
                    found.insert(name);
                }
            }
        } else if let Some(name) = leading_ident(rest) {
            found.insert(name);
        }
    }
    found
}

/// The next `crate::` (climb `None`) or run of `super::` (climb `Some(count)`), and the text
/// after it.
fn find_path_start(text: &str) -> Option<(Option<usize>, &str)> {
    let is_start = |i: usize| {
        i == 0
            || !text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let mut from = 0;
    loop {
        let crate_at = text[from..].find("crate::").map(|i| i + from);
        let super_at = text[from..].find("super::").map(|i| i + from);
        let (at, is_crate) = match (crate_at, super_at) {
            (Some(c), Some(s)) if c < s => (c, true),
            (_, Some(s)) => (s, false),
            (Some(c), None) => (c, true),
            (None, None) => return None,
        };
        if !is_start(at) {
            from = at + 1;
            continue;
        }
        if is_crate {
            return Some((None, &text[at + "crate::".len()..]));
        }
        let mut rest = &text[at..];
        let mut supers = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            supers += 1;
            rest = after;
        }
        return Some((Some(supers), rest));
    }
}

/// Index of the `}` closing a group whose `{` was just consumed.
fn matching_brace(text: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return i,
            '}' => depth -= 1,
            _ => {}
        }
    }
    text.len()
}

/// The items of a `use` group, split at commas outside nested groups.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items
}

/// The identifier `text` starts with, unless it is `self` or empty.
fn leading_ident(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// A cycle of `graph` as the modules along it (first repeated last), if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|m| m == node).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}
