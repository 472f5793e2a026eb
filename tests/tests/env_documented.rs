//! `docs/environment.md` against the code: every `FTCOLL_*` name in a string literal of the
//! sources has a row there, and every `FTCOLL_*` name there still occurs in the code.
//!
//! The sources are scanned byte by byte: comments are skipped and only string literals (plain,
//! byte and raw) count, so a name mentioned in a doc comment alone is not a variable.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ftcoll_tests::source::{is_ident, rust_files, string_literals, workspace_root};

/// Source folders scanned, relative to the workspace root: the crates' sources, and the tests
/// and examples that read variables of their own.
const SOURCE_DIRS: &[&str] = &[
    "algos/src",
    "transport/src",
    "runtime/src",
    "launcher/src",
    "tui/src",
    "launcher/tests",
    "launcher/examples",
    "tui/tests",
    "tui/examples",
    "tests/tests",
];

/// The page that documents the variables, relative to the workspace root.
const DOC: &str = "docs/environment.md";

/// Names that look like variables but are not read from the environment.
const NOT_VARIABLES: &[&str] = &[
    // A line the libfabric transport's peer test process prints on stdout (its address).
    "FTCOLL_ADDR",
];

const PREFIX: &[u8] = b"FTCOLL_";

/// This test, whose literals are examples, not variables.
const THIS_FILE: &str = "tests/tests/env_documented.rs";

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_'
}

/// Every `FTCOLL_[A-Z0-9_]+` in `text` that does not continue an identifier.
fn names_in(text: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut i = 0;
    while i + PREFIX.len() <= text.len() {
        let starts_word = i == 0 || !is_ident(text[i - 1]);
        if starts_word && text[i..].starts_with(PREFIX) {
            let mut end = i + PREFIX.len();
            while end < text.len() && is_name_byte(text[end]) {
                end += 1;
            }
            let continues = end < text.len() && is_ident(text[end]);
            if end > i + PREFIX.len() && !continues {
                names.push(String::from_utf8_lossy(&text[i..end]).into_owned());
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    names
}

/// Every `FTCOLL_*` name in the sources' string literals, with the files it occurs in.
fn names_in_code(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "found only {} Rust files under {root:?}; is the workspace layout as expected?",
        files.len()
    );
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let src = std::fs::read(&file).unwrap();
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        if shown == THIS_FILE {
            continue;
        }
        for literal in string_literals(&src) {
            for name in names_in(literal) {
                names.entry(name).or_default().insert(shown.clone());
            }
        }
    }
    names
}

#[test]
fn every_variable_in_the_code_is_documented_and_every_documented_one_exists() {
    let root = workspace_root();
    let code = names_in_code(&root);
    let doc_text =
        std::fs::read(root.join(DOC)).unwrap_or_else(|e| panic!("cannot read {DOC}: {e}"));
    let documented: BTreeSet<String> = names_in(&doc_text).into_iter().collect();
    assert!(
        code.contains_key("FTCOLL_RANK") && documented.contains("FTCOLL_RANK"),
        "the scan found no FTCOLL_RANK; the scanner is broken"
    );

    let undocumented: Vec<String> = code
        .iter()
        .filter(|(name, _)| !documented.contains(*name) && !NOT_VARIABLES.contains(&name.as_str()))
        .map(|(name, files)| {
            format!(
                "{name} (in {})",
                files.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    let stale: Vec<&String> = documented
        .iter()
        .filter(|name| !code.contains_key(*name))
        .collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "variables read in the code but missing from {DOC}: {undocumented:?}; \
         variables in {DOC} that no source file names any more: {stale:?}"
    );
}

#[test]
fn the_scanner_reads_literals_and_skips_comments() {
    let src = br####"
        // "FTCOLL_IN_A_COMMENT"
        /* "FTCOLL_IN_A_BLOCK" /* nested */ "FTCOLL_STILL_IN_IT" */
        let lifetime: &'static str = "FTCOLL_PLAIN";
        let c = '"'; let d = '\''; let e = b'"';
        let raw = r#"a "quoted" FTCOLL_RAW"#;
        let bytes = b"FTCOLL_BYTES\"FTCOLL_AFTER_ESCAPE";
        let not_a_name = "XFTCOLL_GLUED FTCOLL_lower";
    "####;
    let found: Vec<String> = string_literals(src)
        .into_iter()
        .flat_map(names_in)
        .collect();
    assert_eq!(
        found,
        [
            "FTCOLL_PLAIN",
            "FTCOLL_RAW",
            "FTCOLL_BYTES",
            "FTCOLL_AFTER_ESCAPE"
        ]
    );
}
