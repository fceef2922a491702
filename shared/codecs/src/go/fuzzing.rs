//! Fuzz targets of the Go codec (see [`crate::fuzzing`]).

use crate::fuzzing::{refused, text};
use crate::go::{self, zip, Version};

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
