//! Fuzz targets (feature `testing`): one function per target that feeds arbitrary bytes to the
//! parsers of untrusted input and checks what they promise. A parser may refuse anything, with a
//! message; it may not panic, and what it accepts must hold up (valid names, round trips, index
//! lines that cannot be split). The cargo-fuzz targets in `fuzz/` and the corpus replay test
//! (`tests/fuzz_corpus.rs`) both call these, so a finding is reproduced by `cargo test`.
//!
//! Limits are lowered from the defaults so that a run spends its time on parsing, not on
//! unpacking megabytes; the limit checks themselves are exercised all the same.

use std::fmt::Display;

use crate::apk::index::check_record;
use crate::apk::package::{self as apk, ApkInfo, PkgInfo};
use crate::apt::control::{self, Control};
use crate::apt::deb;
use crate::apt::dsc::{render_sources_stanza, Dsc, SourceFile};
use crate::apt::fields::{self, Mode};
use crate::apt::packages::{render_stanza, PoolFile};
use crate::conan::{self, Manifest, Reference};
use crate::go::{self, zip, Version};

/// A refusal must say why.
fn refused(e: &impl Display) {
    assert!(!e.to_string().trim().is_empty(), "an error with an empty message");
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// `.deb`: [`deb::read_package`] on the bytes, and [`Control::parse`] on them as text.
pub fn deb(data: &[u8]) {
    let limits =
        deb::Limits { control_member: 1 << 20, control_tar: 4 << 20, control_file: 256 << 10, data_tar: 4 << 20 };
    match deb::read_package(data, limits) {
        Ok(c) => {
            assert!(c.text.len() as u64 <= limits.control_file, "a control file over the limit was read");
            check_control(&c);
        }
        Err(e) => refused(&e),
    }
    match Control::parse(&text(data)) {
        Ok(c) => check_control(&c),
        Err(e) => refused(&e),
    }
}

fn check_control(c: &Control) {
    assert!(control::valid_name(&c.package), "package {:?}", c.package);
    assert!(control::valid_name(&c.source), "source {:?}", c.source);
    assert!(control::valid_version(&c.version), "version {:?}", c.version);
    assert!(control::valid_architecture(&c.architecture), "architecture {:?}", c.architecture);
    // The text becomes a Packages stanza as it is: a blank line in it would end the stanza.
    for line in c.text.split('\n') {
        assert!(!line.trim().is_empty(), "a blank line in the accepted control text {:?}", c.text);
    }
    match Control::parse(&c.text) {
        Ok(again) => assert_eq!(
            (&again.package, &again.version, &again.architecture, &again.source),
            (&c.package, &c.version, &c.architecture, &c.source),
            "the accepted control text reads differently the second time"
        ),
        Err(e) => panic!("the accepted control text {:?} is refused when read again: {e}", c.text),
    }
    let pool = c.pool_path("main");
    assert!(pool.starts_with("pool/main/") && pool.ends_with(".deb"), "{pool}");
    assert!(pool.split('/').all(|s| !s.is_empty() && s != "." && s != ".."), "pool path {pool:?}");
}

/// `.apk`: [`apk::read_package`] on the bytes, and [`apk::parse_pkginfo`] on them as text.
pub fn apk(data: &[u8]) {
    match apk::read_package(data, apk::Limits { max_control: 1 << 20, max_data: 4 << 20 }) {
        Ok(info) => check_apk(&info, data.len()),
        Err(e) => refused(&e),
    }
    match apk::parse_pkginfo(&text(data)) {
        Ok(p) => check_pkginfo(&p),
        Err(e) => refused(&e),
    }
}

fn check_apk(info: &ApkInfo, len: usize) {
    check_pkginfo(&info.pkginfo);
    assert_eq!(info.size, len as u64, "the whole package is read and counted");
    assert!(info.pkginfo.datahash.is_some(), "a package without datahash was accepted");
    // `Q1` and the base64 of a SHA-1.
    assert!(info.checksum.starts_with("Q1") && info.checksum.len() == 30, "checksum {:?}", info.checksum);
    // Every line of an APKINDEX record is `<letter>:<value>`; a blank line would end the record.
    let record = apk::index_record(info, "x86_64", info.size);
    assert!(record.ends_with('\n'), "{record:?}");
    for line in record.trim_end_matches('\n').split('\n') {
        let b = line.as_bytes();
        assert!(b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':', "index line {line:?} in {record:?}");
    }
}

fn check_pkginfo(p: &PkgInfo) {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 128
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"._+-".contains(&c))
    };
    assert!(name_ok(&p.name), "pkgname {:?}", p.name);
    assert!(name_ok(&p.arch), "arch {:?}", p.arch);
    assert!(
        !p.version.is_empty()
            && p.version.len() <= 128
            && p.version.as_bytes()[0].is_ascii_digit()
            && p.version.bytes().all(|c| c.is_ascii_alphanumeric() || b"._+-~".contains(&c)),
        "pkgver {:?}",
        p.version
    );
    if let Some(h) = &p.datahash {
        assert!(h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()), "datahash {h:?}");
    }
    let lists = [&p.depends, &p.provides, &p.install_if, &p.replaces];
    let single = [&p.description, &p.url, &p.license, &p.origin, &p.maintainer, &p.commit];
    assert!(
        single.into_iter().chain(lists.into_iter().flatten()).all(|v| !v.contains('\n')),
        "a .PKGINFO value spans lines: {p:?}"
    );
}

/// A Go module zip, checked as a hosted upload checks it: the end record from the tail, the
/// central directory, the names, then one pass over the data; then the go.mod's module line.
pub fn go_zip(data: &[u8]) {
    let limits = zip::Limits { max_zip: 1 << 20, max_unzipped: 8 << 20, max_go_mod: 64 << 10, max_license: 64 << 10 };
    match check_go_zip(data, &limits) {
        Ok((module, version, entries, go_mod)) => {
            assert!(go::check_module_path(&module).is_ok(), "module {module:?}");
            assert!(go::check_module_version(&module, &version).is_ok(), "{module}@{version}");
            let prefix = format!("{module}@{version}/");
            assert!(entries.iter().all(|e| e.name.starts_with(&prefix)), "an entry outside {prefix}");
            let total: u64 = entries.iter().filter(|e| !e.name.ends_with('/')).map(|e| e.size).sum();
            assert!(total <= limits.max_unzipped, "{total} bytes unzipped");
            let go_mod_name = format!("{prefix}go.mod");
            match (entries.iter().find(|e| e.name == go_mod_name), go_mod) {
                (Some(e), Some(bytes)) => {
                    assert_eq!(bytes.len() as u64, e.size, "go.mod is not its declared size");
                    assert!(e.size <= limits.max_go_mod, "go.mod over the limit");
                    if let Some(m) = zip::module_of_go_mod(&text(&bytes)) {
                        assert!(!m.is_empty() && m.trim() == m, "module line {m:?}");
                    }
                }
                (None, None) => {}
                (e, kept) => panic!("go.mod entry {:?} but kept {:?}", e.map(|e| &e.name), kept.map(|k| k.len())),
            }
        }
        Err(e) => refused(&e),
    }
}

type CheckedZip = (String, String, Vec<zip::Entry>, Option<Vec<u8>>);

fn check_go_zip(data: &[u8], limits: &zip::Limits) -> Result<CheckedZip, zip::ZipError> {
    let total = data.len() as u64;
    let tail_from = usize::try_from(total - zip::tail_len(total)).unwrap_or(usize::MAX);
    let tail = &data[tail_from..];
    let (cd_offset, cd_size, count) = zip::locate(tail, total)?;
    assert!(cd_offset + cd_size <= total, "the central directory lies outside the file");
    let cd = usize::try_from(cd_offset)
        .ok()
        .zip(usize::try_from(cd_offset + cd_size).ok())
        .and_then(|(from, to)| data.get(from..to))
        .unwrap_or_default();
    let entries = zip::parse_central(cd, count, cd_offset)?;
    assert_eq!(entries.len(), count, "the central directory count");
    let (module, version) = zip::check_entries(&entries, None, limits)?;
    // Naming the module and version the zip holds (as a GOPROXY-style PUT does) changes nothing.
    match zip::check_entries(&entries, Some((&module, &version)), limits) {
        Ok(again) => assert_eq!(again, (module.clone(), version.clone())),
        Err(e) => panic!("{module}@{version} refused when expected: {e}"),
    }
    let verified = zip::verify_data(data, &entries, &format!("{module}@{version}/go.mod"))?;
    assert!(verified.h1.starts_with("h1:"), "{}", verified.h1);
    Ok((module, version, entries, verified.go_mod))
}

/// Go coordinates: the case-encoding decoder and encoder, module paths, file paths, versions.
/// The input is one string; `path@version` (each case-encoded, as a URL carries them) for the
/// version check.
pub fn go_path(data: &[u8]) {
    let s = text(data);
    match go::unescape(&s) {
        Ok(plain) => {
            assert_eq!(go::escape(&plain), s, "escape(unescape(s)) != s");
            assert!(plain.is_ascii(), "{plain:?}");
        }
        Err(e) => refused(&e),
    }
    // Anything without '!' and non-ASCII survives the round trip; so does every valid path.
    if s.is_ascii() && !s.contains('!') {
        assert_eq!(go::unescape(&go::escape(&s)).as_deref(), Ok(s.as_str()), "unescape(escape(s)) != s");
        assert!(!go::escape(&s).bytes().any(|b| b.is_ascii_uppercase()), "{s:?} escaped keeps an uppercase letter");
    }
    match go::check_module_path(&s) {
        Ok(()) => {
            assert_eq!(go::unescape(&go::escape(&s)).as_deref(), Ok(s.as_str()), "module path {s:?}");
            assert!(go::check_file_path(&s).is_ok(), "module path {s:?} is not a file path");
            assert!(s.split('/').all(|e| !e.is_empty() && e != "." && e != ".."), "{s:?}");
        }
        Err(e) => refused(&e),
    }
    match go::check_file_path(&s) {
        Ok(()) => {
            assert!(!s.starts_with('/') && !s.contains('\\') && !s.contains(':'), "file path {s:?}");
            assert!(s.split('/').all(|e| !e.is_empty() && e != "." && e != ".."), "file path {s:?}");
        }
        Err(e) => refused(&e),
    }
    match go::path_major(&s) {
        Ok(Some(suffix)) => assert!(s.ends_with(suffix), "{s:?} does not end in its suffix {suffix:?}"),
        Ok(None) => {}
        Err(e) => refused(&e),
    }
    match Version::parse(&s) {
        Ok(v) => {
            let canonical = v.canonical();
            match Version::parse(&canonical) {
                Ok(c) => {
                    assert_eq!(c.canonical(), canonical, "canonical form is not stable");
                    assert_eq!(c.cmp(&v), std::cmp::Ordering::Equal, "{s:?} and its canonical form order apart");
                }
                Err(e) => panic!("the canonical form {canonical:?} of {s:?} does not parse: {e}"),
            }
        }
        Err(e) => refused(&e),
    }
    let (path, version) = s.split_once('@').unwrap_or((&s, ""));
    if let (Ok(path), Ok(version)) = (go::unescape(path), go::unescape(version)) {
        match go::check_module_version(&path, &version) {
            Ok(v) => assert_eq!(v.canonical(), version, "an accepted version is canonical"),
            Err(e) => refused(&e),
        }
    }
}

/// Conan: the input's lines are the four segments of a reference URL, the glob pattern and the
/// text, the revision and file path candidates; the whole input is a `conanmanifest.txt`.
pub fn conan(data: &[u8]) {
    let s = text(data);
    let lines: Vec<&str> = s.split('\n').collect();
    let line = |i: usize| lines.get(i).copied().unwrap_or_default();
    match Reference::from_url(line(0), line(1), line(2), line(3)) {
        Ok(r) => {
            let path = r.url_path();
            let parts: Vec<&str> = path.split('/').collect();
            assert_eq!(parts.len(), 4, "{path:?}");
            assert_eq!(Reference::from_url(parts[0], parts[1], parts[2], parts[3]).as_ref(), Ok(&r), "{path:?}");
            assert_eq!(r.display().contains('@'), r.user.is_some(), "{}", r.display());
        }
        Err(e) => refused(&e),
    }
    for l in &lines {
        match conan::check_revision("revision", l) {
            Ok(()) => assert!(!l.contains('/') && *l != "." && *l != "..", "revision {l:?}"),
            Err(e) => refused(&e),
        }
        match conan::check_file_path(l) {
            Ok(()) => {
                assert!(!l.starts_with('/') && !l.contains('\\') && !l.contains(':'), "file path {l:?}");
                assert!(l.split('/').all(|e| !e.is_empty() && e != "." && e != ".."), "file path {l:?}");
            }
            Err(e) => refused(&e),
        }
    }
    let (pattern, subject) = (line(0), line(1));
    if pattern.len() <= 256 && subject.len() <= 256 {
        assert_eq!(
            conan::glob_matches(pattern, subject),
            glob_reference(pattern, subject),
            "glob {pattern:?} against {subject:?}"
        );
    }
    match Manifest::parse(&s) {
        Ok(m) => {
            let mut again = format!("{}\n", m.time);
            for (path, md5) in &m.files {
                assert!(conan::check_file_path(path).is_ok(), "manifest path {path:?}");
                assert!(md5.len() == 32 && md5.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{md5:?}");
                again.push_str(&format!("{path}: {md5}\n"));
            }
            assert_eq!(Manifest::parse(&again).as_ref(), Ok(&m), "the manifest does not round-trip");
        }
        Err(e) => refused(&e),
    }
}

/// A binary package's control file as text, read by policy (an upload's check), then the
/// `Packages` stanza rendered from what was accepted, read as apt reads an index: whatever an
/// upload may carry, apt can parse. Also the text read directly as a stanza by apt's grammar
/// (the check a group applies to an upstream's stanza), which must never panic.
pub fn deb_control(data: &[u8]) {
    let s = text(data);
    match Control::parse(&s) {
        Ok(c) => {
            check_control(&c);
            let mut stanza = String::new();
            let pool = c.pool_path("main");
            let file = PoolFile {
                filename: &pool,
                size: 1,
                md5: "00000000000000000000000000000000",
                sha256: "0000000000000000000000000000000000000000000000000000000000000000",
            };
            render_stanza(&mut stanza, &c.text, &file);
            if let Err((who, e)) = fields::check_index(&stanza) {
                panic!("an accepted control file makes a stanza apt cannot read ({who}: {e}):\n{stanza}");
            }
        }
        Err(e) => refused(&e),
    }
    match fields::check_stanza(&s) {
        Ok(()) => assert!(!s.trim_matches('\n').contains("\n\n"), "a stanza with a blank line inside"),
        Err(e) => refused(&e),
    }
}

/// A `.dsc` read by policy, and the `Sources` stanza rendered from an accepted one, read as
/// `apt-get source` reads an index.
pub fn dsc(data: &[u8]) {
    match Dsc::parse(data) {
        Ok(d) => {
            assert!(control::valid_name(&d.source) && control::valid_version(&d.version), "{d:?}");
            let files: Vec<SourceFile<'_>> = d
                .files
                .iter()
                .map(|f| SourceFile { name: &f.name, size: f.size, md5: &f.md5, sha1: "", sha256: &f.sha256 })
                .collect();
            let mut stanza = String::new();
            render_sources_stanza(&mut stanza, &d.text, "pool/main/x/x", &files);
            if let Err((who, e)) = fields::check_index(&stanza) {
                panic!("an accepted .dsc makes a Sources stanza apt cannot read ({who}: {e}):\n{stanza}");
            }
        }
        Err(e) => refused(&e),
    }
    if let Ok(f) = fields::paragraph(&text(data)) {
        match fields::check_source(&f, Mode::Policy) {
            Ok(()) => {
                if let Err(e) = fields::check_source(&f, Mode::Apt) {
                    panic!("policy accepts what apt's grammar refuses: {e}");
                }
            }
            Err(e) => refused(&e),
        }
    }
}

/// `.PKGINFO` as text, read by apk's syntax; the `APKINDEX` record made from an accepted one is
/// read back as apk reads an index record. Also the text as an index record, which must never
/// panic.
pub fn pkginfo(data: &[u8]) {
    let s = text(data);
    match apk::parse_pkginfo(&s) {
        Ok(p) => {
            check_pkginfo(&p);
            let info = ApkInfo { pkginfo: p, checksum: format!("Q1{}", "A".repeat(27)) + "=", signed: true, size: 1 };
            let record = apk::index_record(&info, "x86_64", 1);
            if let Err(e) = check_record(&record) {
                panic!("an accepted .PKGINFO makes an index record apk cannot read ({e}):\n{record}");
            }
        }
        Err(e) => refused(&e),
    }
    if let Err(e) = check_record(&s) {
        refused(&e);
    }
}

/// `go.mod` as the go command reads it: never a panic; an accepted file's module path is valid
/// and reads the same from the file with its comments and blank lines removed.
pub fn go_mod(data: &[u8]) {
    let s = text(data);
    match go::modfile::parse(&s) {
        Ok(m) => {
            if let Some(path) = &m.module {
                assert!(go::check_module_path(path).is_ok(), "module {path:?}");
            }
            let stripped: String = s
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("{l}\n"))
                .collect();
            // A `//` inside a quoted string would be cut by the line-wise strip: only compare
            // files without quotes.
            if !s.contains(['"', '`']) {
                match go::modfile::parse(&stripped) {
                    Ok(again) => assert_eq!(again, m, "comments change what a go.mod declares"),
                    Err(e) => panic!("a go.mod reads differently without its comments: {e}\n{stripped}"),
                }
            }
        }
        Err(e) => refused(&e),
    }
}

/// Conan's text files: `conaninfo.txt` (the whole input) and a recipe reference by display
/// name (each line); an accepted reference displays as it was given.
pub fn conan_files(data: &[u8]) {
    let s = text(data);
    match conan::check_conaninfo(&s) {
        Ok(()) => {
            for line in s.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                assert!(!line.chars().any(|c| c.is_control() && c != '\t'), "a control character in {line:?}");
            }
        }
        Err(e) => refused(&e),
    }
    for line in s.lines() {
        match Reference::parse(line) {
            Ok(r) => {
                // `@_/_` is how a reply spells "no user and channel": displayed without it.
                let expected = line.strip_suffix("@_/_").unwrap_or(line);
                assert_eq!(r.display(), expected, "a reference displays otherwise than given");
                assert!(line.len() <= 200, "a reference over 200 characters: {line:?}");
            }
            Err(e) => refused(&e),
        }
    }
}

/// Glob matching by dynamic programming, as the oracle for [`conan::glob_matches`].
fn glob_reference(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    if p.is_empty() {
        return true;
    }
    // m[j]: the pattern so far matches t[..j].
    let mut m = vec![false; t.len() + 1];
    m[0] = true;
    for &c in &p {
        let mut next = vec![false; t.len() + 1];
        if c == '*' {
            let mut any = false;
            for j in 0..=t.len() {
                any |= m[j];
                next[j] = any;
            }
        } else {
            for j in 1..=t.len() {
                next[j] = m[j - 1] && (c == '?' || c == t[j - 1]);
            }
        }
        m = next;
    }
    m[t.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_glob_oracle_agrees_on_the_examples() {
        for (p, t, want) in [
            ("zlib/*", "zlib/1.3", true),
            ("*/1.?", "zlib/1.3", true),
            ("z?", "zlib", false),
            ("*a*b*", "xaxxbx", true),
        ] {
            assert_eq!(glob_reference(p, t), want, "{p} {t}");
        }
    }
}
