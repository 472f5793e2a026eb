//! Cross-crate integration tests of ftcoll; the tests themselves are in `tests/`.

#![forbid(unsafe_code)]
