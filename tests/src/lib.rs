//! Cross-crate integration tests live in `tests/tests/`.
