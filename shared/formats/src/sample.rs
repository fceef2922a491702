//! The sample format, test-only (`debug.test_format`): the smallest format over the engine, kept
//! to prove that every generic path serves a fifth format that touches no generic file. A
//! component is a file under a name and a version:
//! - `PUT <name>/<version>` stores it in a hosted repository, `DELETE <name>/<version>` removes
//!   it, `GET <name>/<version>` reads it (a proxy from its upstream, a group from its members);
//! - `index.txt` lists a repository's files, one `<name> <version> <sha256> <size>` line each,
//!   published per repository (a group's merged from its members', the first member's file of a
//!   name and version kept; a proxy's is its upstream's).
//!
//! It also carries the publication pipeline's own test units (`entries.rs`, under `_test/`).

pub mod catalogue;
pub mod entries;
pub mod hosted;
pub mod publish;
pub mod rows;
pub mod spec;

use packyard_core::proxy::{FetchRequest, Freshness, ProxyError};
use packyard_model::repos::Repository;

/// The unit kind of a repository's file index (one unit per repository, keyed [`UNIT`]).
pub const KIND: &str = "sample";
/// The key of a repository's one index unit.
pub const UNIT: &str = "index";
/// The index's path.
pub const INDEX: &str = "index.txt";

/// A read the format knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Index,
    File { name: String, version: String },
}

/// Checks a name or a version: 1 to 100 of `A-Z a-z 0-9 . _ + -`, the first a letter or digit
/// (so no `..`, and no name under the pipeline's `_test/`).
pub fn check_part(what: &str, v: &str) -> Result<(), String> {
    let ok = v.len() <= 100
        && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} {:?}: use 1 to 100 characters from A-Z, a-z, 0-9, '.', '_', '+' and '-', the first a letter or digit",
            truncated(v)
        ))
    }
}

fn truncated(v: &str) -> String {
    v.chars().take(80).collect()
}

impl Request {
    /// `index.txt` or `<name>/<version>`.
    pub fn parse(path: &str) -> Result<Self, String> {
        if path == INDEX {
            return Ok(Self::Index);
        }
        let Some((name, version)) = path.split_once('/') else {
            return Err(format!("{:?} is neither {INDEX} nor <name>/<version>", truncated(path)));
        };
        check_part("name", name)?;
        check_part("version", version)?;
        Ok(Self::File { name: name.to_string(), version: version.to_string() })
    }

    pub fn path(&self) -> String {
        match self {
            Self::Index => INDEX.to_string(),
            Self::File { name, version } => format!("{name}/{version}"),
        }
    }
}

/// How a proxy fetches a path: the index is metadata, a file never changes upstream (and is
/// catalogued).
pub fn proxy_request(repo: &Repository, request: &Request) -> Result<FetchRequest, ProxyError> {
    match request {
        Request::Index => FetchRequest::new(repo, INDEX, Freshness::Metadata),
        Request::File { name, version } => {
            let mut fetch = FetchRequest::new(repo, &request.path(), Freshness::Immutable)?;
            fetch.catalogue = Some(catalogue::component(name, version));
            Ok(fetch)
        }
    }
}

/// An index line.
pub fn index_line(name: &str, version: &str, sha256: &str, size: i64) -> String {
    format!("{name} {version} {sha256} {size}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_or_say_why() {
        assert_eq!(Request::parse("index.txt"), Ok(Request::Index));
        assert_eq!(Request::parse("hello/1.0"), Ok(Request::File { name: "hello".into(), version: "1.0".into() }));
        assert_eq!(
            Request::parse("../1.0").err().as_deref(),
            Some("invalid name \"..\": use 1 to 100 characters from A-Z, a-z, 0-9, '.', '_', '+' and '-', the first a letter or digit")
        );
        assert!(Request::parse("a/b/c").is_err());
        assert!(Request::parse("other.txt").is_err());
    }
}
