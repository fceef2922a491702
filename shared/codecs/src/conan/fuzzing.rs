//! Fuzz targets of the Conan codec (see [`crate::fuzzing`]).

use crate::conan::{self, Manifest, Reference};
use crate::fuzzing::{refused, text};

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
