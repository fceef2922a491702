//! Checking a module zip as the go command does before it trusts one (`x/mod/zip`'s rules), in
//! two steps that suit a blob store: the central directory (read from the end of the blob) is
//! checked for names, prefixes, collisions, file types and declared sizes; then one sequential
//! pass over the whole blob checks each entry's local header and inflates it, bounded by its
//! declared size, to prove the declared size and CRC true, keeping `go.mod`.

use std::collections::HashMap;
use std::io::{self, Read};

use sha2::{Digest, Sha256};

use super::sumdb::dirhash::{h1_zip, FileDigest};
use super::{check_file_path, check_module_path, check_module_version};

#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("not a zip file: {0}")]
    NotZip(String),
    #[error("invalid module zip: {0}")]
    Invalid(String),
    #[error("{what} is too large ({size} bytes; the limit is {limit})")]
    TooLarge { what: String, size: u64, limit: u64 },
    #[error("reading the zip: {0}")]
    Io(#[from] io::Error),
}

fn invalid(s: impl Into<String>) -> ZipError {
    ZipError::Invalid(s.into())
}

/// Size limits (the go command's, which a repository may lower).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_zip: u64,
    pub max_unzipped: u64,
    pub max_go_mod: u64,
    pub max_license: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_zip: 500 << 20, max_unzipped: 500 << 20, max_go_mod: 16 << 20, max_license: 16 << 20 }
    }
}

pub use crate::zip::{tail_len, Entry};

impl From<crate::zip::ZipError> for ZipError {
    fn from(e: crate::zip::ZipError) -> Self {
        match e {
            crate::zip::ZipError::NotZip(m) => Self::NotZip(m),
            crate::zip::ZipError::Invalid(m) => Self::Invalid(m),
            crate::zip::ZipError::Io(e) => Self::Io(e),
        }
    }
}

/// Finds the end-of-central-directory record in `tail` (the last bytes of a zip of `total`
/// bytes): the central directory's offset, size and entry count.
pub fn locate(tail: &[u8], total: u64) -> Result<(u64, u64, usize), ZipError> {
    Ok(crate::zip::locate(tail, total)?)
}

/// Parses the central directory and checks every entry's type (no symlinks or other irregular
/// files) and that its data lies inside the file.
pub fn parse_central(cd: &[u8], count: usize, cd_offset: u64) -> Result<Vec<Entry>, ZipError> {
    let entries = crate::zip::parse_central(cd, count, cd_offset)?;
    for entry in &entries {
        if let Some(mode) = entry.unix_mode {
            if mode & 0o170000 != 0 && !matches!(mode & 0o170000, 0o100000 | 0o040000) {
                let kind = if mode & 0o170000 == 0o120000 { "a symbolic link" } else { "not a regular file" };
                return Err(invalid(format!("{} is {kind}; a module zip holds only regular files", entry.name)));
            }
        }
    }
    Ok(entries)
}

/// Case-folds a path as Go's collision check does: each character to the lower case of its
/// upper case when both are single characters (`ſ` and `s`, `ς` and `σ` fold together).
fn fold(path: &str) -> String {
    path.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => {
                    let mut low = u.to_lowercase();
                    match (low.next(), low.next()) {
                        (Some(l), None) => l,
                        _ => c,
                    }
                }
                _ => c,
            }
        })
        .collect()
}

/// Checks the entries' names against the module rules; `expected` is the module and version the
/// URL names (none for an upload that takes them from the zip). Returns the module and version.
pub fn check_entries(
    entries: &[Entry],
    expected: Option<(&str, &str)>,
    limits: &Limits,
) -> Result<(String, String), ZipError> {
    let first = entries.first().ok_or_else(|| invalid("the zip is empty"))?;
    let (module, version) = match expected {
        Some((m, v)) => (m.to_string(), v.to_string()),
        None => {
            let (m, rest) = first
                .name
                .split_once('@')
                .ok_or_else(|| invalid(format!("{:?} does not start with <module>@<version>/", first.name)))?;
            let v = rest.split('/').next().unwrap_or_default();
            (m.to_string(), v.to_string())
        }
    };
    check_module_path(&module).map_err(|e| invalid(e.0))?;
    check_module_version(&module, &version).map_err(|e| invalid(e.0))?;
    let prefix = format!("{module}@{version}/");
    let mut folded: HashMap<String, (String, bool)> = HashMap::new();
    let mut claim = |path: &str, dir: bool| -> Result<(), ZipError> {
        let key = fold(path);
        match folded.get(&key) {
            Some((other, other_dir)) if other != path || *other_dir != dir || !dir => {
                Err(invalid(format!("case-insensitive file name collision: {other:?} and {path:?}")))
            }
            Some(_) => Ok(()),
            None => {
                folded.insert(key, (path.to_string(), dir));
                Ok(())
            }
        }
    };
    let mut total: u64 = 0;
    for e in entries {
        let Some(name) = e.name.strip_prefix(&prefix) else {
            return Err(invalid(format!("{:?} does not have the prefix {prefix:?}", e.name)));
        };
        if name.is_empty() {
            continue;
        }
        let (name, dir) = match name.strip_suffix('/') {
            Some(d) => (d, true),
            None => (name, false),
        };
        check_file_path(name).map_err(|err| invalid(err.0))?;
        // Parents are directories, and may not collide with files.
        let mut parent = name;
        while let Some((p, _)) = parent.rsplit_once('/') {
            claim(p, true)?;
            parent = p;
        }
        claim(name, dir)?;
        if dir {
            continue;
        }
        let base = name.rsplit('/').next().unwrap_or(name);
        if base.eq_ignore_ascii_case("go.mod") {
            if base != name {
                return Err(invalid(format!(
                    "{name}: a go.mod file outside the module root (a nested module belongs in its own zip)"
                )));
            }
            if name != "go.mod" {
                return Err(invalid(format!("{name}: go.mod files must have lowercase names")));
            }
            if e.size > limits.max_go_mod {
                return Err(ZipError::TooLarge { what: "go.mod".into(), size: e.size, limit: limits.max_go_mod });
            }
        }
        if name == "LICENSE" && e.size > limits.max_license {
            return Err(ZipError::TooLarge { what: "LICENSE".into(), size: e.size, limit: limits.max_license });
        }
        total = total.saturating_add(e.size);
        if total > limits.max_unzipped {
            return Err(ZipError::TooLarge {
                what: "the module's uncompressed content".into(),
                size: total,
                limit: limits.max_unzipped,
            });
        }
    }
    Ok((module, version))
}

/// What reading a zip's data found: the root `go.mod`, if any, and the zip's `h1:` hash (what
/// go.sum and the checksum database pin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub go_mod: Option<Vec<u8>>,
    pub h1: String,
}

/// Reads the whole zip once, in order: each entry's local header must match the central
/// directory, no two entries may share bytes, and every file must inflate to exactly its
/// declared size and CRC (inflation stops past the declared size). Returns the bytes of the
/// entry named `go_mod` (`<module>@<version>/go.mod`), if any, and the zip's `h1:` hash, from
/// the SHA-256 of every entry's inflated data taken on the same pass.
pub fn verify_data<R: Read>(r: R, entries: &[Entry], go_mod: &str) -> Result<Verified, ZipError> {
    let mut found: Option<Vec<u8>> = None;
    let mut sums: HashMap<&str, Sha256> = HashMap::new();
    crate::zip::read_entries(r, entries, |e, piece| {
        if e.name == go_mod {
            found.get_or_insert_with(Vec::new).extend_from_slice(piece);
        }
        sums.entry(e.name.as_str()).or_default().update(piece);
        Ok(())
    })?;
    if found.is_none() && entries.iter().any(|e| e.name == go_mod) {
        found = Some(Vec::new());
    }
    let mut order: Vec<&Entry> = entries.iter().collect();
    order.sort_by_key(|e| e.offset);
    let digests: Vec<(&str, FileDigest)> = order
        .iter()
        .map(|e| (e.name.as_str(), sums.remove(e.name.as_str()).unwrap_or_default().finalize().into()))
        .collect();
    let h1 = h1_zip(digests).map_err(|e| invalid(e.to_string()))?;
    Ok(Verified { go_mod: found, h1 })
}

/// The module path a go.mod declares.
pub fn module_of_go_mod(text: &str) -> Option<String> {
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        if let Some(rest) = line.strip_prefix("module") {
            if !rest.starts_with([' ', '\t', '"']) {
                continue;
            }
            let path = rest.trim().trim_matches('"').trim();
            return (!path.is_empty()).then(|| path.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::testing::{module_zip, ZipFile};

    fn check(
        zip: &[u8],
        expected: Option<(&str, &str)>,
        limits: Limits,
    ) -> Result<(String, String, Option<Vec<u8>>), ZipError> {
        let tail = &zip[zip.len() - tail_len(zip.len() as u64) as usize..];
        let (off, size, count) = locate(tail, zip.len() as u64)?;
        let cd = &zip[off as usize..(off + size) as usize];
        let entries = parse_central(cd, count, off)?;
        let (m, v) = check_entries(&entries, expected, &limits)?;
        let verified = verify_data(zip, &entries, &format!("{m}@{v}/go.mod"))?;
        Ok((m, v, verified.go_mod))
    }

    fn files(list: &[(&str, &str)]) -> Vec<ZipFile> {
        list.iter().map(|(n, c)| ZipFile::new(n, c.as_bytes())).collect()
    }

    #[test]
    fn a_good_module_zip_and_its_go_mod() -> anyhow::Result<()> {
        let zip = module_zip(
            "example.com/hello",
            "v1.2.3",
            &files(&[
                ("go.mod", "module example.com/hello\n\ngo 1.21\n"),
                ("hello.go", "package hello\n"),
                ("sub/dir/x.go", "package dir\n"),
            ]),
        )?;
        let (m, v, go_mod) = check(&zip, None, Limits::default())?;
        assert_eq!((m.as_str(), v.as_str()), ("example.com/hello", "v1.2.3"));
        assert_eq!(go_mod.as_deref(), Some(&b"module example.com/hello\n\ngo 1.21\n"[..]));
        assert_eq!(module_of_go_mod("// c\nmodule \"example.com/q\" // x\n"), Some("example.com/q".into()));
        Ok(())
    }

    #[test]
    fn bad_zips_are_refused_with_the_reason() -> anyhow::Result<()> {
        let e = |zip: &[u8], exp: Option<(&str, &str)>, limits: Limits| {
            check(zip, exp, limits).err().map(|e| e.to_string()).unwrap_or_default()
        };
        let m = "example.com/m";
        let d = Limits::default();
        let good = files(&[("go.mod", "module example.com/m\n"), ("a.go", "package m\n")]);
        type Case<'a> = (Vec<u8>, Option<(&'a str, &'a str)>, Limits, &'a str);
        let cases: Vec<Case> = vec![
            (b"not a zip at all".to_vec(), None, d, "not a zip file"),
            (module_zip(m, "v1.0.0", &files(&[("../x.go", "x")]))?, None, d, "invalid path element \"..\""),
            (
                module_zip(m, "v1.0.0", &files(&[("a.go", "x"), ("A.go", "y")]))?,
                None,
                d,
                "case-insensitive file name collision",
            ),
            (
                module_zip(m, "v1.0.0", &files(&[("sub/go.mod", "module example.com/m/sub\n")]))?,
                None,
                d,
                "outside the module root",
            ),
            (
                module_zip(m, "v1.0.0", &good)?,
                Some(("example.com/other", "v1.0.0")),
                d,
                "does not have the prefix \"example.com/other@v1.0.0/\"",
            ),
            (module_zip(m, "v1.0", &good)?, None, d, "not canonical"),
            (module_zip(m, "v2.0.0", &good)?, None, d, "publish it as example.com/m/v2"),
            (
                module_zip(m, "v1.0.0", &[ZipFile { symlink: true, ..ZipFile::new("link", b"a.go") }])?,
                None,
                d,
                "is a symbolic link",
            ),
            (
                module_zip(m, "v1.0.0", &[ZipFile { declared_size: Some(3), ..ZipFile::new("a.go", b"package m\n") }])?,
                None,
                d,
                "holds more than its declared 3 bytes",
            ),
            (
                module_zip(
                    m,
                    "v1.0.0",
                    &[ZipFile { declared_size: Some(300), ..ZipFile::new("a.go", b"package m\n") }],
                )?,
                None,
                d,
                "not its declared 300",
            ),
            (
                module_zip(m, "v1.0.0", &good)?,
                None,
                Limits { max_unzipped: 10, ..d },
                "uncompressed content is too large",
            ),
            (module_zip(m, "v1.0.0", &good)?, None, Limits { max_go_mod: 5, ..d }, "go.mod is too large"),
        ];
        for (i, (zip, exp, limits, needle)) in cases.into_iter().enumerate() {
            let got = e(&zip, exp, limits);
            assert!(got.contains(needle), "case {i}: {got:?} lacks {needle:?}");
        }
        // Bytes after the end record (a second archive hidden in the comment, say).
        let mut trailing = module_zip(m, "v1.0.0", &good)?;
        trailing.extend_from_slice(b"junk");
        assert!(e(&trailing, None, d).contains("does not end the file"));
        // Truncated: the central directory is gone.
        let zip = module_zip(m, "v1.0.0", &good)?;
        assert!(e(&zip[..zip.len() - 30], None, d).contains("not a zip file"));
        // A corrupted byte in the data fails the CRC or the inflation.
        let mut bad = zip.clone();
        let at = bad.windows(9).position(|w| w == b"package m").unwrap_or(60);
        bad[at] ^= 0x20;
        assert!(!e(&bad, None, d).is_empty());
        Ok(())
    }

    #[test]
    fn a_bomb_stops_at_its_declared_size() -> anyhow::Result<()> {
        // 64 MiB of zeros declared as 1 KiB: inflation stops after the first buffer.
        let zeros = vec![0u8; 64 << 20];
        let zip = module_zip(
            "example.com/m",
            "v1.0.0",
            &[ZipFile { declared_size: Some(1024), deflate: true, ..ZipFile::new("big.txt", &zeros) }],
        )?;
        assert!(zip.len() < 1 << 20);
        let got = check(&zip, None, Limits::default()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(got.contains("holds more than its declared 1024 bytes"), "{got}");
        Ok(())
    }
}
