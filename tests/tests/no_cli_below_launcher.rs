//! Text is parsed at the edge: no string literal in the libraries below the launcher (algos,
//! transport, runtime) names a command-line flag or the launcher's command. The launcher words
//! their typed errors in its flags.

use ftcoll_tests::source::{rust_files, string_literals, workspace_root};

/// The libraries below the launcher.
const LIBRARY_DIRS: &[&str] = &["algos/src", "transport/src", "runtime/src"];

/// Whether `literal` names a flag (`--word`, at the start or after a space, quote, backtick or
/// parenthesis) or the launcher's command.
fn names_cli(literal: &[u8]) -> bool {
    let flag = literal.windows(3).enumerate().any(|(i, w)| {
        let opens = i == 0 || matches!(literal[i - 1], b' ' | b'`' | b'\'' | b'(');
        opens && w[0] == b'-' && w[1] == b'-' && w[2].is_ascii_lowercase()
    });
    flag || literal.windows(13).any(|w| w == b"ftcoll-launch")
}

#[test]
fn the_libraries_name_no_flag_and_no_launcher_command() {
    let root = workspace_root();
    let mut offenders = Vec::new();
    for dir in LIBRARY_DIRS {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        assert!(!files.is_empty(), "no sources under {dir}");
        for file in files {
            let path = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            // Test harnesses pass flags to test binaries they start themselves.
            if path.contains("/tests/") || path.ends_with("tests.rs") {
                continue;
            }
            let Ok(src) = std::fs::read(&file) else {
                continue;
            };
            for literal in string_literals(&src) {
                if names_cli(literal) {
                    offenders.push(format!("{path}: \"{}\"", String::from_utf8_lossy(literal)));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "flags or the launcher's command below the launcher:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_sees_flags_and_the_command() {
    assert!(names_cli(b"use --topology full"));
    assert!(names_cli(b"--eps must lie in (0, 1)"));
    assert!(names_cli(b"start it with ftcoll-launch -n 4"));
    assert!(!names_cli(b"a-b--c"));
    assert!(!names_cli(b"kill:rank=3"));
}
