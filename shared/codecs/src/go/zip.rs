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

/// One central directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    method: u16,
    crc: u32,
    pub compressed: u64,
    pub size: u64,
    offset: u64,
}

/// Bytes to read from the end of a zip to find its central directory.
pub fn tail_len(total: u64) -> u64 {
    total.min(22 + 65_535)
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Finds the end-of-central-directory record in `tail` (the last bytes of a zip of `total`
/// bytes): the central directory's offset, size and entry count.
pub fn locate(tail: &[u8], total: u64) -> Result<(u64, u64, usize), ZipError> {
    let at = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(&[0x50, 0x4b, 0x05, 0x06]))
        .ok_or_else(|| ZipError::NotZip("no end-of-central-directory record".into()))?;
    let e = &tail[at..];
    let (entries, size, offset) = (u16_at(e, 10), u32_at(e, 12), u32_at(e, 16));
    if usize::from(u16_at(e, 20)) != e.len() - 22 {
        return Err(ZipError::NotZip("the end-of-central-directory record does not end the file".into()));
    }
    if entries == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        return Err(invalid("zip64 archives are not supported (a module zip has fewer than 65,535 files and 500 MiB)"));
    }
    let eocd_at = total - (tail.len() - at) as u64;
    // The central directory ends where the end record starts: no gap, no hidden second archive.
    if u64::from(offset) + u64::from(size) != eocd_at {
        return Err(ZipError::NotZip("the central directory does not end where the end record starts".into()));
    }
    Ok((u64::from(offset), u64::from(size), usize::from(entries)))
}

/// Parses the central directory and checks every entry's type (no symlinks or other irregular
/// files) and that its data lies inside the file.
pub fn parse_central(cd: &[u8], count: usize, cd_offset: u64) -> Result<Vec<Entry>, ZipError> {
    let mut out = Vec::with_capacity(count);
    let mut i = 0;
    for _ in 0..count {
        if cd.len() < i + 46 || u32_at(cd, i) != 0x0201_4b50 {
            return Err(ZipError::NotZip("a central directory entry is malformed".into()));
        }
        let e = &cd[i..];
        let made_by_unix = e[5] == 3;
        let flags = u16_at(e, 8);
        let (n, x, c) = (usize::from(u16_at(e, 28)), usize::from(u16_at(e, 30)), usize::from(u16_at(e, 32)));
        if cd.len() < i + 46 + n + x + c {
            return Err(ZipError::NotZip("a central directory entry is truncated".into()));
        }
        let name = std::str::from_utf8(&e[46..46 + n]).map_err(|_| invalid("a file name is not UTF-8"))?.to_string();
        let entry = Entry {
            method: u16_at(e, 10),
            crc: u32_at(e, 16),
            compressed: u64::from(u32_at(e, 20)),
            size: u64::from(u32_at(e, 24)),
            offset: u64::from(u32_at(e, 42)),
            name,
        };
        if entry.compressed == 0xffff_ffff || entry.size == 0xffff_ffff || entry.offset == 0xffff_ffff {
            return Err(invalid("zip64 entries are not supported"));
        }
        if flags & 1 != 0 {
            return Err(invalid(format!("{} is encrypted", entry.name)));
        }
        let mode = u32_at(e, 38) >> 16;
        if made_by_unix && mode & 0o170000 != 0 && !matches!(mode & 0o170000, 0o100000 | 0o040000) {
            let kind = if mode & 0o170000 == 0o120000 { "a symbolic link" } else { "not a regular file" };
            return Err(invalid(format!("{} is {kind}; a module zip holds only regular files", entry.name)));
        }
        if entry.offset + 30 + entry.compressed > cd_offset {
            return Err(invalid(format!("the data of {} lies outside the file", entry.name)));
        }
        out.push(entry);
        i += 46 + n + x + c;
    }
    if i != cd.len() {
        return Err(ZipError::NotZip("the central directory holds more than its declared entries".into()));
    }
    Ok(out)
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
pub fn verify_data<R: Read>(mut r: R, entries: &[Entry], go_mod: &str) -> Result<Verified, ZipError> {
    let mut order: Vec<&Entry> = entries.iter().collect();
    order.sort_by_key(|e| e.offset);
    let mut pos: u64 = 0;
    let mut found = None;
    let mut digests: Vec<(&str, FileDigest)> = Vec::with_capacity(entries.len());
    for e in order {
        if e.offset < pos {
            return Err(invalid(format!("{} overlaps another entry", e.name)));
        }
        io::copy(&mut (&mut r).take(e.offset - pos), &mut io::sink())?;
        let mut head = [0u8; 30];
        r.read_exact(&mut head)
            .map_err(|_| ZipError::NotZip(format!("the local header of {} is truncated", e.name)))?;
        if u32_at(&head, 0) != 0x0403_4b50 {
            return Err(ZipError::NotZip(format!("no local header for {}", e.name)));
        }
        let (n, x) = (u64::from(u16_at(&head, 26)), u64::from(u16_at(&head, 28)));
        let mut name = vec![0u8; usize::from(u16_at(&head, 26))];
        r.read_exact(&mut name)?;
        if name != e.name.as_bytes() || u16_at(&head, 8) != e.method {
            return Err(invalid(format!("the local header of {} does not match the central directory", e.name)));
        }
        io::copy(&mut (&mut r).take(x), &mut io::sink())?;
        let mut data = (&mut r).take(e.compressed);
        let keep = e.name == go_mod;
        let mut kept = Vec::new();
        let mut crc = flate2::Crc::new();
        let mut sha = Sha256::new();
        let mut produced: u64 = 0;
        let mut buf = vec![0u8; 64 * 1024];
        {
            let mut inflated: Box<dyn Read + '_> = match e.method {
                0 => Box::new(&mut data),
                8 => Box::new(flate2::read::DeflateDecoder::new(&mut data)),
                m => {
                    return Err(invalid(format!(
                        "{} uses compression method {m}; only stored and deflate are allowed",
                        e.name
                    )))
                }
            };
            loop {
                let got =
                    inflated.read(&mut buf).map_err(|err| invalid(format!("{} does not inflate: {err}", e.name)))?;
                if got == 0 {
                    break;
                }
                produced += got as u64;
                if produced > e.size {
                    return Err(invalid(format!("{} holds more than its declared {} bytes", e.name, e.size)));
                }
                crc.update(&buf[..got]);
                sha.update(&buf[..got]);
                if keep {
                    kept.extend_from_slice(&buf[..got]);
                }
            }
        }
        if produced != e.size {
            return Err(invalid(format!("{} holds {produced} bytes, not its declared {}", e.name, e.size)));
        }
        if crc.sum() != e.crc {
            return Err(invalid(format!("{} fails its CRC-32 check", e.name)));
        }
        // What inflation left of the compressed bytes (none, for a well-formed entry).
        io::copy(&mut data, &mut io::sink())?;
        if keep {
            found = Some(kept);
        }
        digests.push((e.name.as_str(), sha.finalize().into()));
        pos = e.offset + 30 + n + x + e.compressed;
    }
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
