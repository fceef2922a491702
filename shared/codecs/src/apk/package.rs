//! Reading an APK v2 package, streaming: the gzip members are decompressed one at a time by a
//! reader that never reads past a member's end, while a tap hashes the raw bytes of each — SHA-1
//! of the control member (the index's `C:`), SHA-256 of the data member (`.PKGINFO`'s
//! `datahash`). The signature and control members are unpacked (bounded); the data member is
//! hashed and decompressed as it streams by, its gzip trailer checked and its tar read to the
//! end-of-archive block, so that a package is acknowledged only when all of it is there.

use std::io::{self, BufRead, Read};

use base64::Engine as _;
use sha1::Sha1;
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum ApkError {
    #[error("this is an apk v3 (ADB) package; this repository serves apk v2 packages: build it with abuild (its packages are v2 whatever the apk-tools version) or melange; `apk mkpkg` of apk-tools 3 writes v3 only, so unpack this one with `apk extract --allow-untrusted` and package the files with abuild")]
    V3,
    #[error("not an apk v2 package: it does not start with a gzip member")]
    NotGzip,
    #[error("the package is truncated or corrupt: {0}")]
    Corrupt(String),
    #[error("the package has no .PKGINFO in its control member")]
    NoPkgInfo,
    #[error("the package ends after its control member: there is no data member")]
    NoData,
    #[error("the {member} member unpacks to more than {limit} bytes")]
    TooLarge { member: &'static str, limit: u64 },
    #[error("the data member is damaged: {0}")]
    Data(String),
    #[error("invalid .PKGINFO: {0}")]
    PkgInfo(String),
    #[error("the data member does not match .PKGINFO's datahash (declared {declared}, actual {actual}): the package is truncated or was altered after it was built")]
    DataHash { declared: String, actual: String },
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for ApkError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput => {
                Self::Corrupt(e.to_string())
            }
            _ => Self::Io(e),
        }
    }
}

/// Bounds on what is decompressed.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The signature and control members, each, unpacked.
    pub max_control: u64,
    /// The data member, unpacked (a hosted upload also bounds it by the package's size:
    /// [`crate::archive::expansion_limit`]).
    pub max_data: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_control: 4 << 20, max_data: 16 << 30 }
    }
}

/// `.PKGINFO`, the fields the index lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PkgInfo {
    pub name: String,
    pub version: String,
    pub arch: String,
    pub installed_size: Option<u64>,
    pub description: String,
    pub url: String,
    pub license: String,
    pub origin: String,
    pub maintainer: String,
    pub build_date: Option<u64>,
    pub commit: String,
    pub provider_priority: Option<u64>,
    pub depends: Vec<String>,
    pub provides: Vec<String>,
    pub install_if: Vec<String>,
    pub replaces: Vec<String>,
    pub datahash: Option<String>,
}

/// What reading a package found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApkInfo {
    pub pkginfo: PkgInfo,
    /// `Q1` + base64 of the SHA-1 of the raw control member: the index's `C:`.
    pub checksum: String,
    /// Whether a signature member came first.
    pub signed: bool,
    /// Total bytes read.
    pub size: u64,
}

/// A [`BufRead`] over a reader that hashes and counts what its consumer consumes.
struct Tap<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    cap: usize,
    sha1: Option<Sha1>,
    sha256: Option<Sha256>,
    consumed: u64,
}

impl<R: Read> Tap<R> {
    fn new(inner: R) -> Self {
        Self { inner, buf: vec![0; 64 * 1024], pos: 0, cap: 0, sha1: None, sha256: None, consumed: 0 }
    }

    fn at_eof(&mut self) -> io::Result<bool> {
        Ok(self.fill_buf()?.is_empty())
    }
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Tap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.cap {
            self.cap = loop {
                match self.inner.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            self.pos = 0;
        }
        Ok(&self.buf[self.pos..self.cap])
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.cap - self.pos);
        let bytes = &self.buf[self.pos..self.pos + n];
        if let Some(h) = self.sha1.as_mut() {
            h.update(bytes);
        }
        if let Some(h) = self.sha256.as_mut() {
            h.update(bytes);
        }
        self.pos += n;
        self.consumed += n as u64;
    }
}

/// One gzip member, unpacked (at most `limit` bytes), and the SHA-1 of its raw bytes.
fn member<R: Read>(tap: &mut Tap<R>, name: &'static str, limit: u64) -> Result<(Vec<u8>, [u8; 20]), ApkError> {
    tap.sha1 = Some(Sha1::new());
    let mut out = Vec::new();
    let decoder = flate2::bufread::GzDecoder::new(&mut *tap);
    decoder.take(limit + 1).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(ApkError::TooLarge { member: name, limit });
    }
    let digest = tap.sha1.take().map(|h| h.finalize().into()).unwrap_or_default();
    Ok((out, digest))
}

/// The regular files of a tar member (cut or complete) as (name, bytes).
fn tar_files(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, ApkError> {
    let mut archive = tar::Archive::new(bytes);
    let mut files = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        if entry.header().entry_type().is_file() {
            let mut data = Vec::new();
            entry.read_to_end(&mut data)?;
            files.push((name, data));
        }
    }
    Ok(files)
}

/// Reads a whole v2 package from `r`.
pub fn read_package<R: Read>(r: R, limits: Limits) -> Result<ApkInfo, ApkError> {
    let mut tap = Tap::new(r);
    let head = tap.fill_buf()?;
    if head.starts_with(b"ADB") {
        return Err(ApkError::V3);
    }
    if !head.starts_with(&[0x1f, 0x8b]) {
        return Err(ApkError::NotGzip);
    }
    let (first, first_sha1) = member(&mut tap, "signature or control", limits.max_control)?;
    let first_files = tar_files(&first)?;
    let signed = first_files.iter().any(|(n, _)| n.starts_with(".SIGN."));
    let (control_files, control_sha1) = if signed {
        if tap.at_eof()? {
            return Err(ApkError::NoPkgInfo);
        }
        let (control, sha1) = member(&mut tap, "control", limits.max_control)?;
        (tar_files(&control)?, sha1)
    } else {
        (first_files, first_sha1)
    };
    let pkginfo =
        control_files.iter().find(|(n, _)| n == ".PKGINFO" || n == "./.PKGINFO").ok_or(ApkError::NoPkgInfo)?;
    let pkginfo = parse_pkginfo(&String::from_utf8_lossy(&pkginfo.1))?;
    if tap.at_eof()? {
        return Err(ApkError::NoData);
    }
    let declared = pkginfo.datahash.clone().ok_or_else(|| {
        ApkError::PkgInfo("no datahash: the data member cannot be checked (rebuild the package with abuild)".into())
    })?;
    // The data member is the rest of the file: hashed as it is unpacked and its tar read to the
    // end; whatever the gzip member leaves is hashed too.
    tap.sha256 = Some(Sha256::new());
    let unpacked = crate::archive::check_tar(
        flate2::bufread::GzDecoder::new(&mut tap),
        crate::archive::Compression::None,
        "the data member",
        limits.max_data,
    );
    while !tap.at_eof()? {
        let n = tap.cap - tap.pos;
        tap.consume(n);
    }
    let actual = hex::encode(tap.sha256.take().map(|h| h.finalize()).unwrap_or_default());
    // A hash that does not match says more (cut or altered) than the archive error it causes.
    if !declared.eq_ignore_ascii_case(&actual) {
        return Err(ApkError::DataHash { declared, actual });
    }
    match unpacked {
        Ok(_) => {}
        Err(crate::archive::ArchiveError::TooLarge { limit, .. }) => {
            return Err(ApkError::TooLarge { member: "data", limit })
        }
        Err(e) => return Err(ApkError::Data(e.to_string())),
    }
    Ok(ApkInfo {
        pkginfo,
        checksum: format!("Q1{}", base64::engine::general_purpose::STANDARD.encode(control_sha1)),
        signed,
        size: tap.consumed,
    })
}

/// A package (or origin) name as abuild and apk 3 have it: a letter or digit, then letters,
/// digits and `+._-`.
pub fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && s.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'+' | b'-'))
}

/// A version both apk 2.14 and apk 3 read: `1.2.3[a][_suffix[N]]…[-rN]`, each run of digits
/// at most 17 long (apk 2.14 refuses 18), no `~hash` (apk 2.14 refuses it).
pub fn valid_version(s: &str) -> bool {
    const SUFFIXES: [&str; 9] = ["alpha", "beta", "pre", "rc", "cvs", "svn", "git", "hg", "p"];
    if s.is_empty() || s.len() > 128 {
        return false;
    }
    let digits = |t: &str| !t.is_empty() && t.len() <= 17 && t.bytes().all(|b| b.is_ascii_digit());
    let (main, release) = match s.rsplit_once("-r") {
        Some((m, r)) => (m, Some(r)),
        None => (s, None),
    };
    if release.is_some_and(|r| !digits(r)) {
        return false;
    }
    let (core, suffixes) = main.split_once('_').map_or((main, None), |(c, rest)| (c, Some(rest)));
    let core = match core.as_bytes().last() {
        Some(b) if b.is_ascii_lowercase() => &core[..core.len() - 1],
        _ => core,
    };
    if !core.split('.').all(digits) {
        return false;
    }
    suffixes.is_none_or(|all| {
        all.split('_').all(|sfx| {
            let name_len = sfx.bytes().take_while(u8::is_ascii_lowercase).count();
            let (name, n) = sfx.split_at(name_len);
            SUFFIXES.contains(&name) && (n.is_empty() || digits(n))
        })
    })
}

/// The longest dependency apk writes (`apk_deps_write`).
const MAX_DEPENDENCY: usize = 255;

/// One dependency token: `[!]name[op version]`, with a name of letters, digits and
/// `+._-:/,[]` (`so:libc.musl-x86_64.so.1`, `cmd:sh`, `/bin/sh`), and an operator both apk 2.14
/// and 3 write back the same (`<`, `<=`, `=`, `>=`, `>`, `~`, `=~`). `provides` takes only
/// `name` or `name=version`; a `!` (a conflict) only `depend` and `install_if`.
pub fn check_dependency(key: &str, token: &str) -> Result<(), String> {
    if token.len() > MAX_DEPENDENCY {
        return Err(format!(
            "{key}: {:?}… is longer than {MAX_DEPENDENCY} bytes",
            token.chars().take(40).collect::<String>()
        ));
    }
    let (negated, rest) = match token.strip_prefix('!') {
        Some(r) => (true, r),
        None => (false, token),
    };
    if negated && !matches!(key, "depend" | "install_if") {
        return Err(format!("{key}: {token:?}: a conflict (!) belongs in depend or install_if"));
    }
    let at = rest.find(['<', '>', '=', '~']).unwrap_or(rest.len());
    let (name, constraint) = rest.split_at(at);
    let name_ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+._-:/,[]".contains(&b))
        && (name.as_bytes()[0].is_ascii_alphanumeric() || name.starts_with('/'));
    if !name_ok {
        return Err(format!(
            "{key}: {token:?}: {name:?} is not a package name (letters, digits, '+._-', and ':/,[]' as in so:, cmd: or /bin/sh)"
        ));
    }
    if constraint.is_empty() {
        return Ok(());
    }
    let op_len = constraint.bytes().take_while(|b| b"<>=~".contains(b)).count();
    let (op, version) = constraint.split_at(op_len);
    let allowed: &[&str] = if key == "provides" { &["="] } else { &["<", "<=", "=", ">=", ">", "~", "=~"] };
    if !allowed.contains(&op) {
        return Err(format!("{key}: {token:?}: the operator {op:?} is not one of {}", allowed.join(" ")));
    }
    if !valid_version(version) {
        return Err(format!("{key}: {token:?}: {version:?} is not an apk version (e.g. 1.2.3-r0)"));
    }
    Ok(())
}

/// Parses `.PKGINFO` — `key = value` lines (abuild's spelling: a space on each side of the
/// first `=`), `#` comments; `depend`, `provides`, `install_if`, `replaces` repeat — and checks
/// every key apk reads by apk's own syntax: names, versions, dependency tokens, numbers, the
/// commit, single-line text. Unknown keys are left alone, as apk leaves them.
pub fn parse_pkginfo(text: &str) -> Result<PkgInfo, ApkError> {
    let bad = |s: String| ApkError::PkgInfo(s);
    let mut p = PkgInfo::default();
    let mut seen: Vec<&str> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.chars().any(|c| (c.is_control() && c != '\t') || c == '\u{7f}') {
            return Err(bad(format!("line {} holds a control character", i + 1)));
        }
        let Some((k, v)) = line.split_once(" = ") else {
            return Err(bad(format!(
                "line {} ({:?}) is not `key = value`",
                i + 1,
                line.chars().take(80).collect::<String>()
            )));
        };
        let v = v.trim();
        let list = matches!(k, "depend" | "provides" | "install_if" | "replaces" | "triggers");
        if !list && !k.starts_with(' ') {
            if seen.contains(&k) && !matches!(k, "packager") {
                return Err(bad(format!("{k} appears twice")));
            }
            seen.push(k);
        }
        let number = |max: u64| -> Result<u64, ApkError> {
            let n = (!v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()))
                .then(|| v.parse::<u64>().ok())
                .flatten()
                .filter(|n| *n <= max);
            n.ok_or_else(|| ApkError::PkgInfo(format!("{k} = {v:?} is not a number (0 to {max})")))
        };
        match k {
            "pkgname" => p.name = v.to_string(),
            "pkgver" => p.version = v.to_string(),
            "arch" => p.arch = v.to_string(),
            "size" => p.installed_size = Some(number(u64::MAX / 2)?),
            "builddate" => p.build_date = Some(number(u64::MAX / 2)?),
            "provider_priority" => p.provider_priority = Some(number(65_535)?),
            "replaces_priority" => {
                number(65_535)?;
            }
            "pkgdesc" => p.description = v.to_string(),
            "url" => p.url = v.to_string(),
            "license" => p.license = v.to_string(),
            "maintainer" => p.maintainer = v.to_string(),
            "origin" => p.origin = v.to_string(),
            "commit" => {
                if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad(format!("commit {v:?} is not a commit id (hex digits)")));
                }
                p.commit = v.to_string();
            }
            "depend" | "provides" | "install_if" | "replaces" => {
                if v.is_empty() {
                    return Err(bad(format!("{k} is empty (leave the line out instead)")));
                }
                for token in v.split_whitespace() {
                    check_dependency(k, token).map_err(bad)?;
                }
                let joined = v.split_whitespace().collect::<Vec<_>>().join(" ");
                match k {
                    "depend" => p.depends.push(joined),
                    "provides" => p.provides.push(joined),
                    "install_if" => p.install_if.push(joined),
                    _ => p.replaces.push(joined),
                }
            }
            "triggers" => {
                if let Some(t) = v.split_whitespace().find(|t| !t.starts_with('/')) {
                    return Err(bad(format!("triggers: {t:?} is not a directory (a path starting with '/')")));
                }
            }
            "datahash" => p.datahash = Some(v.to_string()),
            _ => {}
        }
    }
    if !valid_name(&p.name) {
        return Err(bad(format!("pkgname {:?} is missing or invalid (letters, digits, '.', '_', '+', '-')", p.name)));
    }
    if !valid_version(&p.version) {
        return Err(bad(format!(
            "pkgver {:?} is missing or not an apk version (digits and dots, an optional letter, _alpha/_beta/_pre/_rc/_cvs/_svn/_git/_hg/_p suffixes, -rN; e.g. 1.2.3-r0)",
            p.version
        )));
    }
    if !valid_name(&p.arch) {
        return Err(bad(format!("arch {:?} is missing or invalid", p.arch)));
    }
    if !p.origin.is_empty() && !valid_name(&p.origin) {
        return Err(bad(format!("origin {:?} is not a package name", p.origin)));
    }
    if let Some(h) = &p.datahash {
        if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad(format!("datahash {h:?} is not a SHA-256 in hex")));
        }
    }
    // apk writes an index record's header (C P V A S I T U L o m t c k) into 2048 bytes.
    let header = p.name.len()
        + p.version.len()
        + p.arch.len()
        + p.description.len()
        + p.url.len()
        + p.license.len()
        + p.origin.len()
        + p.maintainer.len()
        + p.commit.len()
        + 200;
    if header > 2048 {
        return Err(bad(format!(
            "pkgdesc, url, license and maintainer take {} bytes; apk's index keeps at most about 1,800",
            header - 200
        )));
    }
    Ok(p)
}

/// One APKINDEX record, fields in apk's order, ending in a newline (records are separated by a
/// blank line). `arch` is the index's architecture (a `noarch` package is listed under it).
pub fn index_record(info: &ApkInfo, arch: &str, size: u64) -> String {
    use std::fmt::Write as _;
    let p = &info.pkginfo;
    let mut r = String::new();
    let mut field = |key: char, value: &str| {
        if !value.is_empty() {
            // A value cannot span lines: a newline would start a field of the package's choosing.
            let _ = writeln!(r, "{key}:{}", value.replace(['\n', '\r'], " "));
        }
    };
    field('C', &info.checksum);
    field('P', &p.name);
    field('V', &p.version);
    field('A', arch);
    field('S', &size.to_string());
    field('I', &p.installed_size.map(|s| s.to_string()).unwrap_or_default());
    field('T', &p.description);
    field('U', &p.url);
    field('L', &p.license);
    field('o', &p.origin);
    field('m', &p.maintainer);
    field('t', &p.build_date.map(|s| s.to_string()).unwrap_or_default());
    field('c', &p.commit);
    field('k', &p.provider_priority.map(|s| s.to_string()).unwrap_or_default());
    field('D', &p.depends.join(" "));
    field('p', &p.provides.join(" "));
    field('i', &p.install_if.join(" "));
    field('r', &p.replaces.join(" "));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apk::testing::{build_apk, Fixture};

    #[test]
    fn reads_a_signed_and_an_unsigned_package() -> anyhow::Result<()> {
        for signed in [false, true] {
            let f = Fixture { signed, ..Fixture::new("hello", "2.12-r1", "x86_64") };
            let built = build_apk(&f)?;
            let info = read_package(&built.bytes[..], Limits::default())?;
            assert_eq!(info.signed, signed);
            assert_eq!(info.size, built.bytes.len() as u64);
            assert_eq!((info.pkginfo.name.as_str(), info.pkginfo.version.as_str()), ("hello", "2.12-r1"));
            assert_eq!(info.pkginfo.arch, "x86_64");
            assert_eq!(info.pkginfo.depends, vec!["so:libc.musl-x86_64.so.1".to_string(), "busybox".to_string()]);
            // C: is the SHA-1 of exactly the control member's raw bytes.
            let control = &built.bytes[built.control.clone()];
            let want = format!("Q1{}", base64::engine::general_purpose::STANDARD.encode(Sha1::digest(control)));
            assert_eq!(info.checksum, want);
            let rec = index_record(&info, "x86_64", info.size);
            assert!(
                rec.starts_with(&format!("C:{want}\nP:hello\nV:2.12-r1\nA:x86_64\nS:{}\n", built.bytes.len())),
                "{rec}"
            );
            assert!(rec.contains("\nD:so:libc.musl-x86_64.so.1 busybox\n"), "{rec}");
        }
        Ok(())
    }

    #[test]
    fn refuses_bad_packages_with_a_reason() -> anyhow::Result<()> {
        let good = build_apk(&Fixture::new("hello", "1.0-r0", "x86_64"))?;
        let err =
            |bytes: &[u8]| read_package(bytes, Limits::default()).err().map(|e| e.to_string()).unwrap_or_default();

        let v3 = err(b"ADBd\x00\x00\x00\x00");
        assert!(v3.contains("apk v3 (ADB)") && v3.contains("apk extract") && !v3.contains("--format v2"), "{v3}");
        assert!(err(b"PK\x03\x04 not a package").contains("does not start with a gzip member"));
        // Truncated anywhere: in the control member, or in the data member.
        assert!(
            err(&good.bytes[..good.control.start + 40]).contains("truncated or corrupt"),
            "{}",
            err(&good.bytes[..good.control.start + 40])
        );
        assert!(err(&good.bytes[..good.bytes.len() - 100]).contains("datahash"));
        // Only a control member.
        assert!(err(&good.bytes[..good.control.end]).contains("no data member"));
        // A different data member.
        let other = build_apk(&Fixture { payload: b"changed".to_vec(), ..Fixture::new("hello", "1.0-r0", "x86_64") })?;
        let mut swapped = good.bytes[..good.control.end].to_vec();
        swapped.extend_from_slice(&other.bytes[other.control.end..]);
        assert!(err(&swapped).contains("does not match .PKGINFO's datahash"));
        // No .PKGINFO, no datahash, a bad name.
        let f = Fixture { omit_pkginfo: true, ..Fixture::new("hello", "1.0-r0", "x86_64") };
        assert!(err(&build_apk(&f)?.bytes).contains("no .PKGINFO"));
        let f = Fixture { omit_datahash: true, ..Fixture::new("hello", "1.0-r0", "x86_64") };
        assert!(err(&build_apk(&f)?.bytes).contains("no datahash"));
        assert!(err(&build_apk(&Fixture::new("../evil", "1.0-r0", "x86_64"))?.bytes).contains("pkgname"));
        assert!(err(&build_apk(&Fixture::new("hello", "x y", "x86_64"))?.bytes).contains("pkgver"));
        Ok(())
    }

    /// A data member whose hash matches `.PKGINFO` (as its packager built it) but that does not
    /// unpack to a whole tar is refused all the same.
    #[test]
    fn a_damaged_data_member_is_refused_even_when_its_hash_matches() -> anyhow::Result<()> {
        use std::io::Write as _;
        let good = build_apk(&Fixture::new("hello", "1.0-r0", "x86_64"))?;
        let data = &good.bytes[good.control.end..];
        let mut tar = Vec::new();
        flate2::read::GzDecoder::new(data).read_to_end(&mut tar)?;
        for bad_tar in [&tar[..tar.len() - 1024], &tar[..700]] {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(bad_tar)?;
            let bad_data = e.finish()?;
            let digest = hex::encode(Sha256::digest(&bad_data));
            let f = Fixture { datahash_override: Some(digest), ..Fixture::new("hello", "1.0-r0", "x86_64") };
            let rebuilt = build_apk(&f)?;
            let mut pkg = rebuilt.bytes[..rebuilt.control.end].to_vec();
            pkg.extend_from_slice(&bad_data);
            let e = read_package(&pkg[..], Limits::default()).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("the data member is damaged") && e.contains("the data member"), "{e}");
        }
        Ok(())
    }

    #[test]
    fn a_data_bomb_stops_at_the_limit() -> anyhow::Result<()> {
        let f = Fixture { payload: vec![0u8; 8 << 20], ..Fixture::new("zeros", "1.0-r0", "x86_64") };
        let built = build_apk(&f)?;
        let limits = Limits { max_data: 1 << 20, ..Limits::default() };
        let e = read_package(&built.bytes[..], limits).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("the data member unpacks to more than 1048576 bytes"), "{e}");
        Ok(())
    }

    #[test]
    fn a_control_bomb_is_refused_before_it_is_unpacked() -> anyhow::Result<()> {
        // 64 MiB of zeros in a control member: about 64 KiB compressed.
        let f = Fixture { control_padding: 64 << 20, ..Fixture::new("hello", "1.0-r0", "x86_64") };
        let bomb = build_apk(&f)?;
        assert!(bomb.bytes.len() < 1 << 20);
        let e = read_package(&bomb.bytes[..], Limits::default()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("unpacks to more than 4194304 bytes"), "{e}");
        Ok(())
    }

    #[test]
    fn pkginfo_lists_repeat_and_comments_are_skipped() -> anyhow::Result<()> {
        let p = parse_pkginfo(
            "# Generated by abuild\npkgname = a\npkgver = 1-r0\narch = noarch\nsize = 12\ndepend = b\ndepend = c>=2\nprovides = cmd:a=1-r0\nunknown = x\n",
        )?;
        assert_eq!(p.depends, vec!["b", "c>=2"]);
        assert_eq!((p.installed_size, p.arch.as_str()), (Some(12), "noarch"));
        assert!(parse_pkginfo("pkgname = a\npkgver = 1\narch = x86_64\nsize = big\n").is_err());
        assert!(parse_pkginfo("pkgname a\n").is_err());
        Ok(())
    }
    #[test]
    fn versions_both_apks_read() {
        for ok in ["1", "1.2.3", "1.2.3a", "1.0_rc1", "1.0_alpha_p2", "2.12-r1", "0.1_git20240101-r0", "1.2_p", "1-r0"]
        {
            assert!(valid_version(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "v1.0",
            "1..2",
            ".1",
            "1.",
            "1a2",
            "1.0-r",
            "1.0-r1-r2",
            "1.0~ab12",
            "1.0_foo",
            "1.0-1",
            "123456789012345678",
            "1.0 beta",
        ] {
            assert!(!valid_version(bad), "{bad}");
        }
    }

    #[test]
    fn each_key_apk_reads_is_checked() {
        let base = "pkgname = hello\npkgver = 1.0-r0\narch = x86_64\n";
        assert!(parse_pkginfo(&format!("{base}depend = so:libc.musl-x86_64.so.1 cmd:sh /bin/sh !conflict b>=1.2-r0 c<2 d~1.0 e=~1\nprovides = cmd:hello=1.0-r0 virt\ninstall_if = hello-base docs\nreplaces = old\norigin = hello\ncommit = 0123abcd\nprovider_priority = 100\nreplaces_priority = 1\ntriggers = /usr/share/x/*\n")).is_ok());
        for (extra, why) in [
            ("depend = foo>=\n", "not an apk version"),
            ("depend = foo>=1.0.a\n", "not an apk version"),
            ("depend = foo><Q1abc\n", "operator"),
            ("depend = foo<~1\n", "operator"),
            ("depend = foo@edge\n", "not a package name"),
            ("depend = .hidden\n", "not a package name"),
            ("depend = \n", "empty"),
            ("provides = foo>=1\n", "operator"),
            ("provides = !foo\n", "conflict"),
            ("install_if = a=b\n", "not an apk version"),
            ("replaces = ba$d\n", "not a package name"),
            ("origin = ../x\n", "origin"),
            ("commit = not-hex\n", "commit"),
            ("builddate = yesterday\n", "builddate"),
            ("size = -1\n", "size"),
            ("provider_priority = 70000\n", "provider_priority"),
            ("triggers = relative/dir\n", "triggers"),
            ("license=MIT\n", "not `key = value`"),
            ("pkgdesc = a\u{1b}[31m\n", "control character"),
            ("pkgname = again\n", "appears twice"),
        ] {
            let e = parse_pkginfo(&format!("{base}{extra}")).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(why), "{extra:?}: {e}");
        }
        let long = format!("{base}pkgdesc = {}\n", "x".repeat(2000));
        assert!(parse_pkginfo(&long).is_err());
        // Found by the pkginfo fuzz target: a long token of multi-byte characters (the message
        // cut it at a byte offset inside a character, and panicked).
        let wide = format!("{base}depend = so:lib{}\n", "\u{fffd}".repeat(100));
        assert!(parse_pkginfo(&wide)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("longer than 255 bytes"));
    }
}
