//! Fuzz targets (feature `testing`): each format's codec has a `fuzzing` module with one
//! function per target that feeds arbitrary bytes to its parsers of untrusted input and checks
//! what they promise. A parser may refuse anything, with a message; it may not panic, and what it
//! accepts must hold up (valid names, round trips, index lines that cannot be split). The
//! cargo-fuzz targets in `fuzz/` and the corpus replay test (`tests/fuzz_corpus.rs`) both call
//! them, so a finding is reproduced by `cargo test`. Here: what every target shares.
//!
//! Limits are lowered from the defaults so that a run spends its time on parsing, not on
//! unpacking megabytes; the limit checks themselves are exercised all the same.

use std::fmt::Display;

/// A refusal must say why.
pub(crate) fn refused(e: &impl Display) {
    assert!(!e.to_string().trim().is_empty(), "an error with an empty message");
}

/// The input as text, as a parser of text files gets it.
pub(crate) fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
