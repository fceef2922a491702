//! Conan 2 (REST v2): references and revisions as the URLs carry them, file paths inside a
//! revision, `conanmanifest.txt`, and the case-insensitive glob of `search?q=`.

use std::collections::BTreeMap;

#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod recipe;
pub mod version;

/// Why a reference, revision, path or manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConanError(pub String);

fn err(s: impl Into<String>) -> ConanError {
    ConanError(s.into())
}

/// `name/version[@user/channel]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reference {
    pub name: String,
    pub version: String,
    pub user: Option<String>,
    pub channel: Option<String>,
}

/// Letters, digits and `_`, then also `+ . -`: the characters Conan allows in names, versions,
/// users and channels (at most 101 characters).
fn valid_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 101
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'+' | b'.' | b'-'))
}

impl Reference {
    /// From the four URL segments; `_` stands for a missing user or channel.
    pub fn from_url(name: &str, version: &str, user: &str, channel: &str) -> Result<Self, ConanError> {
        for (what, v) in [("name", name), ("version", version)] {
            if !valid_part(v) {
                return Err(err(format!("invalid {what} {v:?} in the reference")));
            }
        }
        let opt = |what: &str, v: &str| -> Result<Option<String>, ConanError> {
            match v {
                "_" => Ok(None),
                v if valid_part(v) => Ok(Some(v.to_string())),
                v => Err(err(format!("invalid {what} {v:?} in the reference"))),
            }
        };
        let (user, channel) = (opt("user", user)?, opt("channel", channel)?);
        if user.is_none() != channel.is_none() {
            return Err(err("a reference has both a user and a channel, or neither"));
        }
        // Conan refuses a reference longer than 200 characters (`validate_ref`).
        let length = name.len()
            + version.len()
            + 1
            + user.as_ref().zip(channel.as_ref()).map_or(0, |(u, c)| u.len() + c.len() + 2);
        if length > 200 {
            return Err(err(format!("the reference is {length} characters long; Conan allows at most 200")));
        }
        Ok(Self { name: name.into(), version: version.into(), user, channel })
    }

    /// From `name/version` or `name/version@user/channel` (how [`Self::display`] writes it).
    pub fn parse(display: &str) -> Result<Self, ConanError> {
        let (nv, uc) = display.split_once('@').map_or((display, None), |(a, b)| (a, Some(b)));
        let (name, version) = nv.split_once('/').ok_or_else(|| err(format!("invalid reference {display:?}")))?;
        let (user, channel) = match uc {
            Some(uc) => uc.split_once('/').ok_or_else(|| err(format!("invalid reference {display:?}")))?,
            None => ("_", "_"),
        };
        Self::from_url(name, version, user, channel)
    }

    /// `name/version` or `name/version@user/channel`: how the client and search name it.
    pub fn display(&self) -> String {
        match (&self.user, &self.channel) {
            (Some(u), Some(c)) => format!("{}/{}@{u}/{c}", self.name, self.version),
            _ => format!("{}/{}", self.name, self.version),
        }
    }

    /// The four URL segments (`_` for a missing user or channel).
    pub fn url_path(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.name,
            self.version,
            self.user.as_deref().unwrap_or("_"),
            self.channel.as_deref().unwrap_or("_")
        )
    }
}

/// A recipe or package revision, or a package id: opaque to the server, but bounded (letters,
/// digits, `_ . -`, at most 128).
pub fn check_revision(what: &str, s: &str) -> Result<(), ConanError> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        && !s.bytes().all(|c| c == b'.');
    if ok {
        Ok(())
    } else {
        Err(err(format!("invalid {what} {s:?}")))
    }
}

/// A file path inside a revision (`conanfile.py`, `metadata/…`): relative, `/`-separated, no
/// empty, `.` or `..` segment, no backslash, colon, percent sign or control character, at most
/// 512 bytes. (A `%` would be an encoded separator the router left alone, as in `..%2F..`; a
/// U+FFFD an invalid encoding it replaced, as in the overlong `%c0%ae`.)
/// File names themselves are not restricted to a list.
pub fn check_file_path(path: &str) -> Result<(), ConanError> {
    let bad = path.is_empty()
        || path.len() > 512
        || path.starts_with('/')
        || path.contains('\\')
        || path.contains(':')
        || path.contains('%')
        || path.contains(char::REPLACEMENT_CHARACTER)
        || path.chars().any(char::is_control)
        || path.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    if bad {
        Err(err(format!("invalid file path {path:?}: use a relative path without '..', '\\\\', '%' or empty parts")))
    } else {
        Ok(())
    }
}

/// How a package archive the client uploads is compressed (`conan_package.tgz`,
/// `conan_export.tgz`, `conan_sources.tgz`; `.txz` and `.tzst` with Conan's other
/// `core.upload:compression_format` settings), for the check that reads it to its end.
pub fn archive_compression(path: &str) -> Option<crate::archive::Compression> {
    use crate::archive::Compression;
    let name = path.rsplit('/').next().unwrap_or(path);
    if !["conan_package.", "conan_export.", "conan_sources."].iter().any(|p| name.starts_with(p)) {
        return None;
    }
    match name.rsplit('.').next() {
        Some("tgz") => Some(Compression::Gzip),
        Some("txz") => Some(Compression::Xz),
        Some("tzst") => Some(Compression::Zstd),
        _ => None,
    }
}

/// `conanmanifest.txt`: a timestamp line, then `path: md5` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub time: u64,
    pub files: BTreeMap<String, String>,
}

impl Manifest {
    pub fn parse(text: &str) -> Result<Self, ConanError> {
        let mut lines = text.lines().map(str::trim_end).filter(|l| !l.is_empty());
        if text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) {
            return Err(err("conanmanifest.txt holds a control character"));
        }
        let time = lines.next().and_then(|l| l.trim().parse::<u64>().ok()).ok_or_else(|| {
            err("conanmanifest.txt must start with a timestamp line (seconds since 1970, digits only)")
        })?;
        let mut files = BTreeMap::new();
        for line in lines {
            let (path, md5) =
                line.rsplit_once(": ").ok_or_else(|| err(format!("conanmanifest.txt: {line:?} is not `path: md5`")))?;
            let md5 = md5.trim().to_ascii_lowercase();
            if md5.len() != 32 || !md5.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err(format!("conanmanifest.txt: {path:?} has no MD5")));
            }
            check_file_path(path)?;
            files.insert(path.to_string(), md5);
        }
        Ok(Self { time, files })
    }
}

/// What a revision's archive holds at a path of its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// A file, with its MD5.
    File(String),
    /// A link (symbolic or hard) to another path of the revision.
    Link(String),
    Dir,
}

/// `rel` joined to `dir` inside the revision: `None` when it leaves it (absolute, or `..`
/// above its top).
fn inside(dir: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in rel.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The members of a revision's archive (`path`: `conan_export.tgz`, `conan_sources.tgz`,
/// `conan_package.tgz`, or their `.txz`/`.tzst` forms), under the path `conanmanifest.txt`
/// lists them by: the sources unpack into `export_source/`, the rest into the revision's folder.
/// The whole archive is read, within `limit` bytes expanded; a link out of the revision, or a
/// path given twice with other content, is refused.
pub fn archive_members(
    r: impl std::io::Read,
    path: &str,
    limit: u64,
) -> Result<BTreeMap<String, Member>, crate::archive::ArchiveError> {
    use crate::archive::ArchiveError;
    use sha2::Digest as _;
    let Some(compression) = archive_compression(path) else { return Ok(BTreeMap::new()) };
    let prefix = if path.starts_with("conan_sources.") { "export_source/" } else { "" };
    let mut out: BTreeMap<String, Member> = BTreeMap::new();
    let mut refused: Option<ArchiveError> = None;
    crate::archive::check_tar_with(r, compression, path, limit, |entry, data| {
        let name = entry.path.trim_start_matches("./").trim_end_matches('/');
        if name.is_empty() || refused.is_some() {
            return Ok(());
        }
        let at = format!("{prefix}{name}");
        let member = match entry.kind {
            b'5' => Member::Dir,
            b'1' | b'2' => {
                // A hard link names a path of the archive; a symbolic one, a path from its
                // own directory.
                let from = if entry.kind == b'1' { "" } else { name.rsplit_once('/').map_or("", |(d, _)| d) };
                match inside(from, entry.link) {
                    Some(target) => Member::Link(format!("{prefix}{target}")),
                    None => {
                        refused = Some(ArchiveError::Corrupt(format!(
                            "{path}: {at} links to {:?}, outside the revision",
                            entry.link
                        )));
                        return Ok(());
                    }
                }
            }
            _ if entry.is_file() => {
                let mut md5 = md5::Md5::new();
                std::io::copy(data, &mut md5)?;
                Member::File(hex::encode(md5.finalize()))
            }
            _ => return Ok(()),
        };
        match out.get(&at) {
            Some(before) if *before != member && !(member == Member::Dir && *before == Member::Dir) => {
                refused = Some(ArchiveError::Corrupt(format!("{path}: {at} is in the archive twice, differently")));
            }
            _ => {
                out.insert(at, member);
            }
        }
        Ok(())
    })?;
    match refused {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

impl Manifest {
    /// `files` (a revision's plain files and its archives' members, by [`archive_members`])
    /// are what the manifest lists: each file it lists, or link to one, with the MD5 listed,
    /// and no file it does not list (a link to a directory needs no line).
    pub fn check_files(&self, files: &BTreeMap<String, Member>) -> Result<(), ConanError> {
        // A link's end: the file or directory it leads to, at most 32 links on.
        let resolve = |path: &str| -> Result<&Member, String> {
            let mut at = path.to_string();
            for _ in 0..32 {
                match files.get(&at) {
                    Some(Member::Link(next)) => at.clone_from(next),
                    Some(end) => return Ok(end),
                    None if files.keys().any(|k| k.starts_with(&format!("{at}/"))) => return Ok(&Member::Dir),
                    None if at == path => return Err(format!("{path}, which is in none of the revision's files")),
                    None => return Err(format!("{path}, a link to {at}, which is not in the revision")),
                }
            }
            Err(format!("{path}, a link in a loop"))
        };
        for (path, want) in &self.files {
            match resolve(path) {
                Ok(Member::File(got)) if got == want => {}
                Ok(Member::File(got)) => {
                    return Err(err(format!("{path}: conanmanifest.txt lists MD5 {want}, the revision's is {got}")))
                }
                Ok(_) => return Err(err(format!("conanmanifest.txt lists {path}, a directory in the revision"))),
                Err(e) => return Err(err(format!("conanmanifest.txt lists {e}"))),
            }
        }
        for (path, member) in files {
            if self.files.contains_key(path) {
                continue;
            }
            match (member, resolve(path)) {
                (Member::Dir, _) | (Member::Link(_), Ok(Member::Dir)) => {}
                (_, Err(e)) => return Err(err(format!("the revision holds {e}"))),
                _ => return Err(err(format!("{path} is in the revision but not in conanmanifest.txt"))),
            }
        }
        Ok(())
    }
}

/// The lines of a section of a `conaninfo.txt` (`[requires]`), trimmed, blank ones left out.
pub fn conaninfo_section<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = section.trim() == name;
        } else if inside && !line.is_empty() {
            out.push(line);
        }
    }
    out
}

/// The value of setting `key` in a `conaninfo.txt`'s `[settings]` (`arch`: `x86_64`).
pub fn conaninfo_setting<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    conaninfo_section(text, "settings")
        .into_iter()
        .find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim()))
}

/// `conaninfo.txt` as the client reads it (`TextINIParse`): `[section]` headers of 2 to 50
/// lowercase letters or `_`, each once; every other line (stripped; blank and `#` lines
/// skipped) inside a section — `key=value` in `[settings]`, `[options]`, `[conf]` and the like,
/// a reference (`name/version…`) in the requirement sections. No control characters.
pub fn check_conaninfo(text: &str) -> Result<(), ConanError> {
    let mut sections: Vec<&str> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return Err(err(format!("conaninfo.txt line {n} holds a control character")));
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some((name, after)) = rest.split_once(']') else {
                return Err(err(format!("conaninfo.txt line {n}: {line:?} is not a [section] header")));
            };
            let ok = (2..=50).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            if !ok || !after.trim().is_empty() {
                return Err(err(format!(
                    "conaninfo.txt line {n}: {line:?} is not a [section] header (2 to 50 lowercase letters or '_')"
                )));
            }
            if sections.contains(&name) {
                return Err(err(format!("conaninfo.txt: the section [{name}] appears twice")));
            }
            sections.push(name);
            continue;
        }
        let Some(section) = sections.last() else {
            return Err(err(format!("conaninfo.txt line {n}: {line:?} comes before any [section]")));
        };
        if section.ends_with("requires") {
            let reference = line.split(['#', ':', '%']).next().unwrap_or_default();
            let (name, version) = reference.split_once('/').unwrap_or(("", ""));
            if name.is_empty() || version.is_empty() || line.contains(char::is_whitespace) {
                return Err(err(format!(
                    "conaninfo.txt [{section}] line {n}: {line:?} is not a reference (name/version…)"
                )));
            }
        } else if line.starts_with('=') {
            // A line without `=` makes its section a plain list for the client (Conan 1's
            // `[recipe_hash]`); one with an empty key is no setting at all.
            return Err(err(format!("conaninfo.txt [{section}] line {n}: {line:?} is not `key=value`")));
        }
    }
    Ok(())
}

/// `search?q=`: `*` any run, `?` one character, case-insensitive; an empty pattern matches all.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    if p.is_empty() {
        return true;
    }
    // Iterative matching with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0usize, 0usize, None::<usize>, 0usize);
    while j < t.len() {
        // A `*` is a wildcard even where the text has a `*` too: tried first, it stays a
        // backtrack point instead of being matched as a literal.
        if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// The MD5 (what `conanmanifest.txt` lists) and SHA-1 (what `X-Checksum-Sha1` says) of an
/// uploaded file, computed as it streams by.
#[derive(Default, Clone)]
pub struct FileHashes {
    md5: md5::Md5,
    sha1: sha1::Sha1,
}

impl FileHashes {
    pub fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        self.md5.update(bytes);
        self.sha1.update(bytes);
    }

    /// (MD5, SHA-1), hex.
    pub fn finish(self) -> (String, String) {
        use sha2::Digest as _;
        (hex::encode(self.md5.finalize()), hex::encode(self.sha1.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md5_of(b: &[u8]) -> String {
        use sha2::Digest as _;
        hex::encode(md5::Md5::digest(b))
    }

    /// The tar `b` built, gzipped.
    fn gzipped(b: tar::Builder<Vec<u8>>) -> Vec<u8> {
        let tar = b.into_inner().unwrap_or_default();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let _ = std::io::Write::write_all(&mut gz, &tar);
        gz.finish().unwrap_or_default()
    }

    /// A gzipped tar of `files`: long paths as GNU long names (the `tar` crate), or in pax
    /// `path` records, or split into the ustar prefix, as Python's tarfile (the client's) does.
    fn tgz(files: &[(&str, &[u8])], long: &str) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, data) in files {
            let mut h = tar::Header::new_ustar();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            match long {
                "pax" if path.len() > 100 => {
                    let record = format!("path={path}\n");
                    let line = format!("{} {record}", record.len() + 3 + usize::from(record.len() + 3 > 99));
                    let mut x = tar::Header::new_ustar();
                    x.set_size(line.len() as u64);
                    x.set_entry_type(tar::EntryType::XHeader);
                    let _ = x.set_path("PaxHeader");
                    x.set_cksum();
                    let _ = b.append(&x, line.as_bytes());
                    let _ = h.set_path("short-name");
                    h.set_cksum();
                    let _ = b.append(&h, *data);
                }
                "ustar" => {
                    let _ = h.set_path(path);
                    h.set_cksum();
                    let _ = b.append(&h, *data);
                }
                _ => {
                    let _ = b.append_data(&mut h, path, *data);
                }
            }
        }
        gzipped(b)
    }

    #[test]
    fn archive_members_are_checked_against_the_manifest() {
        let deep = format!("include/{}/deep.h", "d".repeat(120));
        let files: [(&str, &[u8]); 3] =
            [("include/hello.h", b"int hello();\n"), ("lib/libhello.a", b"!<arch>\n"), (deep.as_str(), b"deep\n")];
        let mut manifest = Manifest { time: 1, files: BTreeMap::new() };
        for (path, data) in &files {
            manifest.files.insert(format!("export_source/{path}"), md5_of(data));
        }
        for long in ["gnu", "pax", "ustar"] {
            let bytes = tgz(&files, long);
            let got = archive_members(&bytes[..], "conan_sources.tgz", 1 << 20);
            let got = got.unwrap_or_default();
            assert_eq!(got.len(), 3, "{long}: {got:?}");
            assert_eq!(manifest.check_files(&got), Ok(()), "{long}");
        }
        // The same members at the top: not the sources' paths.
        let bytes = tgz(&files, "gnu");
        let top = archive_members(&bytes[..], "conan_package.tgz", 1 << 20).unwrap_or_default();
        let e = manifest.check_files(&top).err().map(|e| e.0).unwrap_or_default();
        assert!(e.starts_with("conanmanifest.txt lists export_source/"), "{e}");
        // A member whose bytes changed.
        let changed: [(&str, &[u8]); 3] = [files[0], ("lib/libhello.a", b"!<arch>\nX"), files[2]];
        let bytes = tgz(&changed, "gnu");
        let got = archive_members(&bytes[..], "conan_sources.tgz", 1 << 20).unwrap_or_default();
        let e = manifest.check_files(&got).err().map(|e| e.0).unwrap_or_default();
        assert!(e.starts_with("export_source/lib/libhello.a: conanmanifest.txt lists MD5 "), "{e}");
        // A member the manifest does not list.
        let extra: [(&str, &[u8]); 4] = [files[0], files[1], files[2], ("bin/extra", b"x")];
        let got = archive_members(&tgz(&extra, "gnu")[..], "conan_sources.tgz", 1 << 20).unwrap_or_default();
        let e = manifest.check_files(&got).err().map(|e| e.0).unwrap_or_default();
        assert_eq!(e, "export_source/bin/extra is in the revision but not in conanmanifest.txt");
        // A cut archive is refused, not read as fewer members.
        let whole = tgz(&files, "gnu");
        let cut = archive_members(&whole[..whole.len() / 2], "conan_sources.tgz", 1 << 20);
        assert!(matches!(cut, Err(crate::archive::ArchiveError::Truncated(_))), "{cut:?}");
    }

    /// A tar of headers the `tar` crate writes: GNU ones (times where ustar keeps its prefix)
    /// and links.
    fn linked(entries: &[(&str, tar::EntryType, &str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, target, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(1_700_000_000);
            if let Some(gnu) = h.as_gnu_mut() {
                gnu.set_atime(1_700_000_000);
                gnu.set_ctime(1_700_000_000);
            }
            if kind.is_symlink() || kind.is_hard_link() {
                let _ = b.append_link(&mut h, path, target);
            } else {
                let _ = b.append_data(&mut h, path, *data);
            }
        }
        gzipped(b)
    }

    #[test]
    fn links_are_followed_inside_the_revision_only() {
        use tar::EntryType::{Directory, Regular, Symlink};
        let lib = b"library bytes";
        let manifest = Manifest {
            time: 1,
            files: [("lib/libx.so.1", md5_of(lib)), ("lib/libx.so", md5_of(lib))]
                .map(|(p, m)| (p.to_string(), m))
                .into(),
        };
        let good = linked(&[
            ("lib", Directory, "", b""),
            ("lib/libx.so.1", Regular, "", lib),
            ("lib/libx.so", Symlink, "libx.so.1", b""),
            ("lib64", Symlink, "lib", b""),
        ]);
        let got = archive_members(&good[..], "conan_package.tgz", 1 << 20).unwrap_or_default();
        assert_eq!(got.get("lib/libx.so"), Some(&Member::Link("lib/libx.so.1".into())), "{got:?}");
        assert_eq!(manifest.check_files(&got), Ok(()), "a link to a listed file, a link to a directory");
        // The listed file replaced by a link out of the revision.
        let escaping =
            linked(&[("lib/libx.so.1", Regular, "", lib), ("lib/libx.so", Symlink, "../../etc/passwd", b"")]);
        let e = archive_members(&escaping[..], "conan_package.tgz", 1 << 20).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("conan_package.tgz: lib/libx.so links to \"../../etc/passwd\", outside the revision")
        );
        let absolute = linked(&[("lib/libx.so.1", Regular, "", lib), ("lib/libx.so", Symlink, "/etc/passwd", b"")]);
        assert!(archive_members(&absolute[..], "conan_package.tgz", 1 << 20).is_err());
        // A link to a file the revision does not have.
        let dangling = linked(&[("lib/libx.so.1", Regular, "", lib), ("lib/libx.so", Symlink, "libx.so.2", b"")]);
        let got = archive_members(&dangling[..], "conan_package.tgz", 1 << 20).unwrap_or_default();
        let e = manifest.check_files(&got).err().map(|e| e.0).unwrap_or_default();
        assert_eq!(e, "conanmanifest.txt lists lib/libx.so, a link to lib/libx.so.2, which is not in the revision");
    }

    #[test]
    fn references_parse_as_displayed() {
        for shown in ["zlib/1.3", "lib/2.1@team/stable"] {
            assert_eq!(Reference::parse(shown).map(|r| r.display()).as_deref(), Ok(shown));
        }
        assert!(Reference::parse("zlib").is_err());
        assert!(Reference::parse("a/b@c").is_err());
    }

    #[test]
    fn references_from_urls() -> Result<(), ConanError> {
        let r = Reference::from_url("zlib", "1.3", "_", "_")?;
        assert_eq!((r.display(), r.url_path()), ("zlib/1.3".to_string(), "zlib/1.3/_/_".to_string()));
        let r = Reference::from_url("pkg", "1.0+build.2", "me", "stable")?;
        assert_eq!(r.display(), "pkg/1.0+build.2@me/stable");
        assert!(Reference::from_url("..", "1", "_", "_").is_err());
        assert!(Reference::from_url("a", "1", "me", "_").is_err());
        assert!(Reference::from_url("a/b", "1", "_", "_").is_err());
        assert!(Reference::from_url("-a", "1", "_", "_").is_err());
        Ok(())
    }

    #[test]
    fn paths_and_revisions() {
        for ok in ["conanfile.py", "conan_package.tzst", "metadata/.conan/x.json", "a b/c"] {
            assert_eq!(check_file_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "../x",
            "a/../b",
            "/abs",
            "a\\b",
            "a//b",
            "./a",
            "c:x",
            "a\nb",
            "..%2F..%2Fetc",
            "x%00",
            "\u{fffd}\u{fffd}/etc",
        ] {
            assert!(check_file_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_revision("revision", "2b8bd1e2c5a1a3d1e2f0a9b8c7d6e5f4").is_ok());
        assert!(check_revision("revision", "..").is_err() && check_revision("revision", "a/b").is_err());
    }

    #[test]
    fn manifests() -> Result<(), ConanError> {
        let m = Manifest::parse("1700000000\nconanfile.py: 0123456789ABCDEF0123456789abcdef\ninclude/x.h: 00000000000000000000000000000000\n")?;
        assert_eq!(m.time, 1_700_000_000);
        assert_eq!(m.files.get("conanfile.py").map(String::as_str), Some("0123456789abcdef0123456789abcdef"));
        assert!(Manifest::parse("not a time\n").is_err());
        assert!(Manifest::parse("1\nconanfile.py: nope\n").is_err());
        assert!(Manifest::parse("1\n../x: 00000000000000000000000000000000\n").is_err());
        Ok(())
    }

    #[test]
    fn globs() {
        assert!(glob_matches("zlib/*", "zlib/1.3"));
        assert!(glob_matches("ZLIB*", "zlib/1.3"));
        assert!(glob_matches("*/1.?", "zlib/1.3"));
        assert!(glob_matches("", "anything"));
        assert!(glob_matches("*a*b*", "xaxxbx"));
        assert!(!glob_matches("zlib/2*", "zlib/1.3"));
        assert!(!glob_matches("z?", "zlib"));
        // Found by the conan fuzz target: a `*` in the text was matched as a literal by a `*` in
        // the pattern, which then could not stretch.
        assert!(glob_matches("***", "****"));
        assert!(glob_matches("a*", "a*b"));
        assert!(glob_matches("*b", "*ab"));
        assert!(!glob_matches("*c", "*ab"));
    }

    #[test]
    fn conaninfo_as_the_client_reads_it() {
        let good = "[settings]\narch=x86_64\nbuild_type=Release\nos=Linux\n\n[options]\nshared=False\n\n[requires]\nzlib/1.3.Z\nopenssl/3.2.1#abc:def\n\n[conf]\n# a comment\n";
        assert_eq!(check_conaninfo(good), Ok(()));
        assert_eq!(check_conaninfo(""), Ok(()));
        for (bad, why) in [
            ("arch=x86_64\n", "before any [section]"),
            ("[settings]\n[settings]\n", "appears twice"),
            ("[Settings]\n", "not a [section] header"),
            ("[s]\n", "not a [section] header"),
            ("[settings\n", "not a [section] header"),
            ("[settings]\n=x86_64\n", "not `key=value`"),
            ("[requires]\nzlib\n", "not a reference"),
            ("[requires]\nzlib/1.3 x\n", "not a reference"),
            ("[settings]\nos=Li\u{1b}nux\n", "control character"),
        ] {
            let e = check_conaninfo(bad).err().map(|e| e.0).unwrap_or_default();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(Manifest::parse("1\nconan\u{0}file.py: 0123456789abcdef0123456789abcdef\n").is_err());
        let long = "x".repeat(101);
        assert!(Reference::from_url(&long, &long, "_", "_").is_err(), "over 200 characters");
    }
}
