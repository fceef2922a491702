//! Go modules (the GOPROXY protocol): module paths and their case-encoding, semantic versions as
//! the go command orders them, and the module zip checks.

#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod modfile;
pub mod sumdb;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod version;
pub mod zip;

pub use version::Version;

/// Why a module path, file path or version is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PathError(pub String);

fn err(s: impl Into<String>) -> PathError {
    PathError(s.into())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Module,
    File,
}

fn module_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')
}

fn file_char(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || "!#$%&()+,-.=@[]^_{}~ ".contains(c)
    } else {
        c.is_alphabetic()
    }
}

const WINDOWS_NAMES: [&str; 22] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2",
    "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

fn check_element(elem: &str, kind: Kind) -> Result<(), PathError> {
    if elem.is_empty() {
        return Err(err("empty path element"));
    }
    if elem.bytes().all(|b| b == b'.') {
        return Err(err(format!("invalid path element {elem:?}")));
    }
    if kind == Kind::Module && elem.starts_with('.') {
        return Err(err(format!("leading dot in path element {elem:?}")));
    }
    if elem.ends_with('.') {
        return Err(err(format!("trailing dot in path element {elem:?}")));
    }
    let ok = match kind {
        Kind::Module => module_char,
        Kind::File => file_char,
    };
    if let Some(c) = elem.chars().find(|c| !ok(*c)) {
        return Err(err(format!("invalid char {c:?} in path element {elem:?}")));
    }
    let short = elem.split('.').next().unwrap_or(elem);
    if WINDOWS_NAMES.iter().any(|w| w.eq_ignore_ascii_case(short)) {
        return Err(err(format!("{short:?} is not allowed as a path element (a reserved name on Windows)")));
    }
    if kind == Kind::Module {
        if let Some(t) = short.rfind('~') {
            let digits = &short[t + 1..];
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(format!("trailing tilde and digits in path element {elem:?}")));
            }
        }
    }
    Ok(())
}

fn check_path(path: &str, kind: Kind) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(err("empty path"));
    }
    if kind == Kind::Module && path.starts_with('-') {
        return Err(err("leading dash"));
    }
    if path.contains("//") {
        return Err(err("double slash"));
    }
    if path.ends_with('/') {
        return Err(err("trailing slash"));
    }
    path.split('/').try_for_each(|e| check_element(e, kind))
}

/// The major-version suffix of a module path (`/v2`, or `.v1` for gopkg.in), if any.
pub fn path_major(path: &str) -> Result<Option<&str>, PathError> {
    if let Some(rest) = path.strip_prefix("gopkg.in/") {
        let base = rest.strip_suffix("-unstable").unwrap_or(rest);
        let digits = base.len() - base.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let at = path.len() - (rest.len() - base.len()) - digits;
        let zero_suffix = path[at..].starts_with('0') && &path[at..] != "0";
        let ok = digits > 0 && path[..at].ends_with(".v") && !zero_suffix;
        return if ok { Ok(Some(&path[at - 2..])) } else { Err(err("invalid gopkg.in version suffix")) };
    }
    let Some((_, last)) = path.rsplit_once('/') else { return Ok(None) };
    let Some(n) = last.strip_prefix('v') else { return Ok(None) };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Ok(None);
    }
    if n.contains('.') || n.starts_with('0') || n == "1" {
        return Err(err(format!("invalid major version suffix /{last}")));
    }
    Ok(Some(&path[path.len() - last.len() - 1..]))
}

/// Checks a module path as the go command does (`module.CheckPath`).
pub fn check_module_path(path: &str) -> Result<(), PathError> {
    let wrap = |e: PathError| err(format!("malformed module path {path:?}: {}", e.0));
    check_path(path, Kind::Module).map_err(wrap)?;
    let first = path.split('/').next().unwrap_or_default();
    if !first.contains('.') {
        return Err(wrap(err("missing dot in first path element")));
    }
    if let Some(c) = first.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))) {
        return Err(wrap(err(format!("invalid char {c:?} in first path element"))));
    }
    path_major(path).map_err(wrap)?;
    Ok(())
}

/// Checks a file path inside a module (`module.CheckFilePath`).
pub fn check_file_path(path: &str) -> Result<(), PathError> {
    check_path(path, Kind::File).map_err(|e| err(format!("invalid file path {path:?}: {}", e.0)))
}

/// Checks that `version` is canonical and consistent with the path's major version suffix.
pub fn check_module_version(path: &str, version: &str) -> Result<Version, PathError> {
    let v = Version::parse(version).map_err(|e| err(format!("version {version:?} is not a semantic version: {e}")))?;
    let canonical = v.canonical();
    if canonical != version {
        return Err(err(format!("version {version:?} is not canonical (should be {canonical:?})")));
    }
    if v.build.as_deref().is_some_and(|b| b != "incompatible") {
        return Err(err(format!("version {version:?} has build metadata other than +incompatible")));
    }
    let major = v.major_str();
    match path_major(path)? {
        None => {
            if v.major > 1 && v.build.is_none() {
                return Err(err(format!(
                    "module {path} at {version}: a module path without a /v{} suffix holds only v0 and v1 (or +incompatible): publish it as {path}/v{}",
                    v.major, v.major
                )));
            }
        }
        Some(suffix) if suffix.starts_with('/') => {
            if suffix[1..] != major || v.build.is_some() {
                return Err(err(format!(
                    "module {path} at {version}: version should be {}, not {major}",
                    &suffix[1..]
                )));
            }
        }
        Some(suffix) => {
            let want = suffix.trim_start_matches('.').trim_end_matches("-unstable");
            let pseudo_v1 = want == "v1" && version.starts_with("v0.0.0-");
            if want != major && !pseudo_v1 {
                return Err(err(format!("module {path} at {version}: version should be {want}, not {major}")));
            }
        }
    }
    Ok(v)
}

/// Decodes a case-encoded path element of a URL (`!a` → `A`); refuses raw uppercase, a `!` not
/// followed by a lowercase letter, and non-ASCII.
pub fn unescape(s: &str) -> Result<String, PathError> {
    let mut out = String::with_capacity(s.len());
    let mut bang = false;
    for c in s.chars() {
        if !c.is_ascii() {
            return Err(err(format!("non-ASCII character in {s:?}")));
        }
        if bang {
            if !c.is_ascii_lowercase() {
                return Err(err(format!("'!' must be followed by a lowercase letter in {s:?}")));
            }
            out.push(c.to_ascii_uppercase());
            bang = false;
        } else if c == '!' {
            bang = true;
        } else if c.is_ascii_uppercase() {
            return Err(err(format!(
                "uppercase letter in {s:?}: the go command sends it as '!' and the lowercase letter"
            )));
        } else {
            out.push(c);
        }
    }
    if bang {
        return Err(err(format!("{s:?} ends in '!'")));
    }
    Ok(out)
}

/// Case-encodes a module path or version for a URL (`A` → `!a`).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_paths() {
        for ok in
            ["example.com/m", "example.com/My_Mod/v2", "gopkg.in/yaml.v3", "go.example/a-b/c~d", "example.com/x/v10"]
        {
            assert_eq!(check_module_path(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("example/m", "missing dot in first path element"),
            ("Example.com/m", "invalid char 'E' in first path element"),
            ("example.com/../m", "invalid path element \"..\""),
            ("example.com//m", "double slash"),
            ("example.com/m/", "trailing slash"),
            ("example.com/.m", "leading dot"),
            ("example.com/m/v1", "invalid major version suffix /v1"),
            ("example.com/m/v02", "invalid major version suffix /v02"),
            ("example.com/con", "reserved name on Windows"),
            ("example.com/GIT~1", "trailing tilde and digits"),
            ("example.com/a b", "invalid char ' '"),
            ("-x.com/m", "leading dash"),
        ] {
            let e = check_module_path(bad).err().map(|e| e.0).unwrap_or_default();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn file_paths() {
        for ok in ["go.mod", ".gitignore", "a b/c(1).go", "pkg/ü.go"] {
            assert_eq!(check_file_path(ok), Ok(()), "{ok}");
        }
        for bad in ["../x.go", "a//b", "/abs.go", "a\\b.go", "a:b", "x.", "aux.go", "nul/x"] {
            assert!(check_file_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_against_paths() {
        assert!(check_module_version("example.com/m", "v1.2.3").is_ok());
        assert!(check_module_version("example.com/m", "v0.0.0-20191109021931-daa7c04131f5").is_ok());
        assert!(check_module_version("example.com/m", "v2.0.0+incompatible").is_ok());
        assert!(check_module_version("example.com/m/v2", "v2.1.0-rc.1").is_ok());
        assert!(check_module_version("gopkg.in/yaml.v3", "v3.0.1").is_ok());
        let e = |p: &str, v: &str| check_module_version(p, v).err().map(|e| e.0).unwrap_or_default();
        assert!(e("example.com/m", "v1.2").contains("not canonical (should be \"v1.2.0\")"));
        assert!(e("example.com/m", "1.2.3").contains("not a semantic version"));
        assert!(e("example.com/m", "v2.0.0").contains("publish it as example.com/m/v2"));
        assert!(e("example.com/m/v2", "v1.0.0").contains("should be v2, not v1"));
        assert!(e("example.com/m/v2", "v2.0.0+incompatible").contains("should be v2"));
        assert!(e("example.com/m", "v1.0.0+build.5").contains("not canonical"));
    }

    #[test]
    fn case_encoding_round_trips() {
        assert_eq!(escape("example.com/MyMod"), "example.com/!my!mod");
        assert_eq!(unescape("example.com/!my!mod").as_deref(), Ok("example.com/MyMod"));
        assert!(unescape("example.com/MyMod").is_err());
        assert!(unescape("example.com/!1").is_err());
        assert!(unescape("example.com/x!").is_err());
        assert!(unescape("example.com/é").is_err());
        assert_eq!(unescape(&escape("v1.0.0-RC.1")).as_deref(), Ok("v1.0.0-RC.1"));
    }
}
