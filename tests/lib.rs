//! Cross-crate integration tests of ftcoll; the tests themselves are in `tests/`. The library
//! holds what several of them share.

#![forbid(unsafe_code)]

/// Reading the workspace's Rust sources as text: their files and their string literals.
pub mod source {
    use std::path::{Path, PathBuf};

    /// The workspace root.
    pub fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    /// Whether `byte` may be part of an identifier.
    pub fn is_ident(byte: u8) -> bool {
        byte.is_ascii_alphanumeric() || byte == b'_'
    }

    /// The bytes of a UTF-8 character that starts with `lead`.
    pub(crate) fn utf8_len(lead: u8) -> usize {
        match lead {
            0xF0..=0xFF => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        }
    }

    /// The contents of every string literal in Rust source `src`, escapes left as written.
    pub fn string_literals(src: &[u8]) -> Vec<&[u8]> {
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

    /// Every `.rs` file under `dir`, recursively, appended to `files`.
    pub fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                continue;
            };
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
}
