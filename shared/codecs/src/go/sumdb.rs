//! The Go checksum database (`GOSUMDB`, `golang.org/x/mod/sumdb`), pure: what a server signs,
//! stores and serves, and what a client checks.
//!
//! A database is a transparency log whose record `id` is one module version's go.sum lines
//! ([`record_text`]). It answers three paths:
//! - `/lookup/<module>@<version>` (case-encoded, [`parse_lookup_target`]): [`lookup_body`], the
//!   record id, the record text and a blank line, then the signed tree head;
//! - `/latest`: the signed tree head, a [`note`] whose text is [`tlog::Tree::text`];
//! - `/tile/8/<L>/<N>[.p/<W>]`: [`tlog::Tile`]s — hashes from the stored hashes, or, for
//!   `tile/8/data/…`, the records as the lookup formats them, one after another.
//!
//! The go command checks a lookup by reading tiles until it has recomputed the signed tree hash
//! and found the record's leaf hash among them.

pub mod dirhash;
pub mod note;
pub mod tlog;

pub use dirhash::{h1_go_mod, h1_zip};
pub use note::{Signer, Verifier};
pub use tlog::{Hash, Tile, Tree};

use base64::alphabet;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};

use super::{unescape, PathError};

/// Base64 as Go's `StdEncoding` decodes it, ignoring the unused bits of the last character.
const BASE64_LENIENT: GeneralPurpose =
    GeneralPurpose::new(&alphabet::STANDARD, GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true));

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SumdbError {
    #[error(transparent)]
    Note(#[from] note::NoteError),
    #[error(transparent)]
    Tlog(#[from] tlog::TlogError),
}

/// A module version's record: its two go.sum lines.
pub fn record_text(module: &str, version: &str, h1_zip: &str, h1_go_mod: &str) -> String {
    format!("{module} {version} {h1_zip}\n{module} {version}/go.mod {h1_go_mod}\n")
}

/// The module and version of a lookup path's `<module>@<version>`, case-decoded. The syntax is
/// the go command's server's: `@v<major>.<minor>.<patch>`, then `-<anything but @>` or
/// `+incompatible`.
pub fn parse_lookup_target(target: &str) -> Result<(String, String), PathError> {
    let bad = || PathError(format!("invalid module@version {target:?}"));
    let (module, version) = target.split_once('@').ok_or_else(bad)?;
    if module.is_empty() || version.contains('@') {
        return Err(bad());
    }
    let mut rest = version.strip_prefix('v').ok_or_else(bad)?;
    for i in 0..3 {
        if i > 0 {
            rest = rest.strip_prefix('.').ok_or_else(bad)?;
        }
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(bad());
        }
        rest = &rest[digits..];
    }
    if !(rest.is_empty() || rest.starts_with('-') || rest == "+incompatible") {
        return Err(bad());
    }
    Ok((unescape(module)?, unescape(version)?))
}

/// The answer to `/lookup/…`: `<id>\n<record text>\n` and the signed tree head, whose tree must
/// hold record `id`.
pub fn lookup_body(id: u64, record: &str, signed_tree: &str) -> Result<String, tlog::TlogError> {
    Ok(tlog::format_record(id, record)? + signed_tree)
}

/// Splits a lookup answer into the record id, the record text and the signed tree head.
pub fn parse_lookup_body(body: &str) -> Result<(u64, &str, &str), tlog::TlogError> {
    tlog::parse_record(body)
}

/// The signed tree head a server serves.
pub fn sign_tree(signer: &Signer, tree: &Tree) -> Result<String, SumdbError> {
    Ok(signer.sign(&tree.text())?)
}

/// Checks a signed tree head against the database's key and reads it.
pub fn open_tree(verifier: &Verifier, signed: &str) -> Result<Tree, SumdbError> {
    Ok(Tree::parse(verifier.open(signed)?)?)
}

#[cfg(test)]
mod tests;
