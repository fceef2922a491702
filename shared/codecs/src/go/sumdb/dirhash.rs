//! The `h1:` hashes of go.sum (`golang.org/x/mod/sumdb/dirhash`'s `Hash1`): SHA-256 over a
//! summary that has one line per file, sorted by name, `<hex SHA-256 of the file>  <name>\n`,
//! written as `h1:` and the digest in base64.
//!
//! A module zip is summarised by its entries' full names (`<module>@<version>/<path>`), every
//! entry counted, a directory entry as an empty file; a `go.mod` file by itself, named `go.mod`.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// A file's SHA-256.
pub type FileDigest = [u8; 32];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum H1Error {
    #[error("file name {0:?} contains a newline")]
    Newline(String),
    #[error("file name {0:?} appears twice")]
    Duplicate(String),
}

/// The `h1:` hash of a module zip, from each entry's name (as the zip has it, with the
/// `<module>@<version>/` prefix) and the SHA-256 of its uncompressed content, in any order.
pub fn h1_zip<N: AsRef<str>>(entries: impl IntoIterator<Item = (N, FileDigest)>) -> Result<String, H1Error> {
    let mut files: Vec<(N, FileDigest)> = entries.into_iter().collect();
    files.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    let mut summary = Sha256::new();
    let mut previous: Option<&str> = None;
    for (name, digest) in &files {
        let name = name.as_ref();
        if name.contains('\n') {
            return Err(H1Error::Newline(name.into()));
        }
        if previous == Some(name) {
            return Err(H1Error::Duplicate(name.into()));
        }
        previous = Some(name);
        summary.update(format!("{}  {name}\n", hex::encode(digest)));
    }
    Ok(format!("h1:{}", BASE64.encode(summary.finalize())))
}

/// The `h1:` hash of a `go.mod` file (the `<module> <version>/go.mod` line of go.sum).
pub fn h1_go_mod(content: &[u8]) -> String {
    let digest: FileDigest = Sha256::digest(content).into();
    format!("h1:{}", BASE64.encode(Sha256::digest(format!("{}  go.mod\n", hex::encode(digest)))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(data: &str) -> FileDigest {
        Sha256::digest(data).into()
    }

    #[test]
    fn summary_lines_sorted_by_name() -> Result<(), H1Error> {
        // x/mod dirhash's TestHash1: two files given out of order.
        let summary =
            format!("{}  abc\n{}  xyz\n", hex::encode(digest("data for abc")), hex::encode(digest("data for xyz")));
        let expected = format!("h1:{}", BASE64.encode(Sha256::digest(summary)));
        assert_eq!(h1_zip([("xyz", digest("data for xyz")), ("abc", digest("data for abc"))])?, expected);
        // Byte order, not locale order: uppercase sorts first.
        assert_eq!(
            h1_zip([("m@v1.0.0/b", digest("")), ("m@v1.0.0/C", digest("x"))])?,
            h1_zip([("m@v1.0.0/C", digest("x")), ("m@v1.0.0/b", digest(""))])?
        );
        assert_eq!(h1_zip([("a\nb", digest(""))]), Err(H1Error::Newline("a\nb".into())));
        assert_eq!(h1_zip([("a", digest("")), ("a", digest(""))]), Err(H1Error::Duplicate("a".into())));
        Ok(())
    }

    #[test]
    fn go_mod_is_hashed_under_its_bare_name() -> Result<(), H1Error> {
        let content = "module example.com/m\n";
        assert_eq!(h1_go_mod(content.as_bytes()), h1_zip([("go.mod", digest(content))])?);
        assert_ne!(h1_go_mod(content.as_bytes()), h1_zip([("example.com/m@v1.0.0/go.mod", digest(content))])?);
        Ok(())
    }
}
