//! `docs/environment.md` against the code: every `FTCOLL_*` name in a string literal of the
//! sources has a row there, and every `FTCOLL_*` name there still occurs in the code.
//!
//! The sources are scanned byte by byte: comments are skipped and only string literals (plain,
//! byte and raw) count, so a name mentioned in a doc comment alone is not a variable.

// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace root")
        .to_path_buf()
}

fn is_ident(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

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

/// The bytes of a UTF-8 character that starts with `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// The contents of every string literal in Rust source `src`, escapes left as written.
fn string_literals(src: &[u8]) -> Vec<&[u8]> {
    let mut literals = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let rest = &src[i..];
        if rest.starts_with(b"//") {
            // Line comment (doc comments included).
            while i < src.len() && src[i] != b'\n' {
                i += 1;
            }
        } else if rest.starts_with(b"/*") {
            // Block comment; they nest.
            let mut depth = 0usize;
            while i < src.len() {
                if src[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if src[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if src[i] == b'"' {
            // Plain or byte string: up to the first unescaped quote.
            let start = i + 1;
            let mut j = start;
            while j < src.len() && src[j] != b'"' {
                j += if src[j] == b'\\' { 2 } else { 1 };
            }
            literals.push(&src[start..j.min(src.len())]);
            i = j + 1;
        } else if src[i] == b'\'' {
            // A character literal, or a lifetime / label (a quote and an identifier).
            if src.get(i + 1) == Some(&b'\\') {
                // Skip the escaped character itself: it may be a quote.
                let mut j = i + 3;
                while j < src.len() && src[j] != b'\'' {
                    j += 1;
                }
                i = j + 1;
            } else {
                let after = i + 1 + src.get(i + 1).map_or(1, |&b| utf8_len(b));
                i = if src.get(after) == Some(&b'\'') {
                    after + 1
                } else {
                    i + 1
                };
            }
        } else if is_ident(src[i]) && (i == 0 || !is_ident(src[i - 1])) {
            // A word; `r`, `br` (and `b`, `c`, `cr`) may open a raw or prefixed literal.
            let mut end = i;
            while end < src.len() && is_ident(src[end]) {
                end += 1;
            }
            let word = &src[i..end];
            let raw = matches!(word, b"r" | b"br" | b"cr");
            if raw && matches!(src.get(end), Some(b'#') | Some(b'"')) {
                let mut hashes = 0;
                let mut j = end;
                while src.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if src.get(j) == Some(&b'"') {
                    let start = j + 1;
                    let mut close = b"\"".to_vec();
                    close.extend(std::iter::repeat_n(b'#', hashes));
                    let mut k = start;
                    while k < src.len() && !src[k..].starts_with(&close) {
                        k += 1;
                    }
                    literals.push(&src[start..k.min(src.len())]);
                    i = k + close.len();
                } else {
                    // `r#ident`, a raw identifier.
                    i = j;
                }
            } else {
                // `b"..."`, `b'x'` and `c"..."` continue at the quote; other words end here.
                i = end;
            }
        } else {
            i += 1;
        }
    }
    literals
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
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
