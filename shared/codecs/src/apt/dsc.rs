//! Source packages: the `.dsc` (a control paragraph, often inside an OpenPGP clear-signature)
//! naming the files that make the source — each with its size and its MD5 (`Files`) and SHA-256
//! (`Checksums-Sha256`) — and the `Sources` stanza an archive publishes for it: the paragraph
//! with `Source` renamed `Package`, the `.dsc` itself added to each checksum list, and the pool
//! `Directory` where all of them are.

use std::fmt::Write as _;

use super::control::{valid_name, valid_version};

/// A `.dsc` larger than this is refused (Debian's are a few KiB).
pub const MAX_DSC_BYTES: usize = 1 << 20;
/// A source package lists at most this many files.
pub const MAX_FILES: usize = 64;

/// One file a `.dsc` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub size: u64,
    pub md5: String,
    /// From `Checksums-Sha1`, when the `.dsc` has it.
    pub sha1: Option<String>,
    pub sha256: String,
}

/// A parsed `.dsc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dsc {
    pub source: String,
    pub version: String,
    /// The control paragraph without its signature, trimmed; fields in their order.
    pub text: String,
    pub files: Vec<Listed>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DscError {
    #[error("the .dsc is larger than {MAX_DSC_BYTES} bytes")]
    TooLarge,
    #[error("the .dsc is not UTF-8 text")]
    NotText,
    #[error("the .dsc's OpenPGP signature block is malformed: {0}")]
    Armor(&'static str),
    #[error("malformed line {0} of the .dsc: expected `Field: value` or an indented continuation")]
    Syntax(usize),
    #[error("the .dsc has no field {0}")]
    Missing(&'static str),
    #[error("the field {0} appears twice in the .dsc")]
    Duplicate(String),
    #[error("invalid source package name {0:?}: use lowercase letters, digits, '+', '-' and '.'")]
    Name(String),
    #[error("invalid version {0:?}: expected [epoch:]upstream[-revision] with upstream starting with a digit")]
    Version(String),
    #[error("{field} line {line:?} is not `<checksum> <size> <file name>`")]
    FileLine { field: &'static str, line: String },
    #[error("invalid file name {0:?} in the .dsc: a plain name, without '/', leading '.' or control characters")]
    FileName(String),
    #[error("{0} lists {1:?} twice")]
    Twice(&'static str, String),
    #[error("{name} is in Files but not in Checksums-Sha256 (or with another size): every file needs its SHA-256")]
    Unmatched { name: String },
    #[error("the .dsc lists more than {MAX_FILES} files")]
    TooMany,
    #[error("the .dsc lists no files")]
    NoFiles,
    /// A field that `dpkg-source`, apt or policy reads otherwise (`fields::check_source`).
    #[error("{0}")]
    Field(super::fields::FieldError),
}

/// The signed text of an OpenPGP clear-signed message (dash-escaping undone), or the input when
/// it is not one. The signature is not verified: apt and dpkg-source decide what they trust.
fn unsigned(text: &str) -> Result<String, DscError> {
    let text = text.replace("\r\n", "\n");
    let Some(rest) = text.trim_start().strip_prefix("-----BEGIN PGP SIGNED MESSAGE-----\n") else {
        return Ok(text);
    };
    // Armor headers (`Hash: SHA256`) up to the first blank line.
    let (_, body) = rest.split_once("\n\n").ok_or(DscError::Armor("no blank line after the armor headers"))?;
    let (body, _) = body
        .split_once("\n-----BEGIN PGP SIGNATURE-----")
        .ok_or(DscError::Armor("no -----BEGIN PGP SIGNATURE----- line"))?;
    let mut out = String::with_capacity(body.len());
    for line in body.lines() {
        out.push_str(line.strip_prefix("- ").unwrap_or(line));
        out.push('\n');
    }
    Ok(out)
}

/// Parses a checksum list: `<checksum> <size> <name>` per continuation line.
fn listed(field: &'static str, value: &str, hex_len: usize) -> Result<Vec<(String, u64, String)>, DscError> {
    let mut out: Vec<(String, u64, String)> = Vec::new();
    for line in value.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let bad = || DscError::FileLine { field, line: line.chars().take(120).collect() };
        let mut parts = line.split_whitespace();
        let (Some(sum), Some(size), Some(name), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        if sum.len() != hex_len || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let size: u64 = size.parse().map_err(|_| bad())?;
        if name.starts_with('.')
            || name.contains('/')
            || name.len() > 200
            || name.chars().any(|c| c.is_control() || c == '\\')
        {
            return Err(DscError::FileName(name.to_string()));
        }
        if out.iter().any(|(_, _, n)| n == name) {
            return Err(DscError::Twice(field, name.to_string()));
        }
        out.push((sum.to_ascii_lowercase(), size, name.to_string()));
        if out.len() > MAX_FILES {
            return Err(DscError::TooMany);
        }
    }
    Ok(out)
}

impl Dsc {
    pub fn parse(bytes: &[u8]) -> Result<Self, DscError> {
        if bytes.len() > MAX_DSC_BYTES {
            return Err(DscError::TooLarge);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| DscError::NotText)?;
        let text = unsigned(text)?;
        // The first paragraph is the source's control paragraph.
        let paragraph = text.trim_start_matches('\n').split("\n\n").next().unwrap_or_default().trim_end();
        let parsed = super::fields::paragraph(paragraph).map_err(|e| match e {
            super::fields::FieldError::Syntax(n) => DscError::Syntax(n),
            super::fields::FieldError::Duplicate(name) => DscError::Duplicate(name),
            other => DscError::Field(other),
        })?;
        super::fields::check_source(&parsed, super::fields::Mode::Policy).map_err(DscError::Field)?;
        let fields: Vec<(&str, String)> = parsed.iter().map(|f| (f.name, f.value.clone())).collect();
        let get = |f: &str| fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(f)).map(|(_, v)| v.as_str());
        let source = get("Source").filter(|v| !v.is_empty()).ok_or(DscError::Missing("Source"))?.to_string();
        let version = get("Version").filter(|v| !v.is_empty()).ok_or(DscError::Missing("Version"))?.to_string();
        if !valid_name(&source) {
            return Err(DscError::Name(source));
        }
        if !valid_version(&version) {
            return Err(DscError::Version(version));
        }
        get("Format").filter(|v| !v.is_empty()).ok_or(DscError::Missing("Format"))?;
        let md5s = listed("Files", get("Files").ok_or(DscError::Missing("Files"))?, 32)?;
        let sha256s =
            listed("Checksums-Sha256", get("Checksums-Sha256").ok_or(DscError::Missing("Checksums-Sha256"))?, 64)?;
        let sha1s = match get("Checksums-Sha1") {
            Some(v) => listed("Checksums-Sha1", v, 40)?,
            None => Vec::new(),
        };
        if md5s.is_empty() {
            return Err(DscError::NoFiles);
        }
        let mut files = Vec::with_capacity(md5s.len());
        for (md5, size, name) in md5s {
            let Some((sha256, _, _)) = sha256s.iter().find(|(_, s, n)| *n == name && *s == size) else {
                return Err(DscError::Unmatched { name });
            };
            let sha1 = sha1s.iter().find(|(_, s, n)| *n == name && *s == size).map(|(h, _, _)| h.clone());
            files.push(Listed { sha256: sha256.clone(), sha1, md5, size, name });
        }
        if let Some((_, _, name)) = sha256s.iter().find(|(_, _, n)| !files.iter().any(|f| f.name == *n)) {
            return Err(DscError::Unmatched { name: name.clone() });
        }
        Ok(Self { source, version, text: paragraph.to_string(), files })
    }

    /// `<source>_<version without epoch>.dsc`, the name the archive gives the `.dsc`.
    pub fn file_name(&self) -> String {
        let version = self.version.split_once(':').map_or(self.version.as_str(), |(_, v)| v);
        format!("{}_{version}.dsc", self.source)
    }
}

/// The pool directory of a source package: `pool/<component>/<prefix>/<source>`, the prefix
/// being the source's first letter, or its first four for `lib*` (as for its binaries).
pub fn pool_directory(component: &str, source: &str) -> String {
    let prefix = if source.starts_with("lib") && source.len() > 3 { &source[..4] } else { &source[..1] };
    format!("pool/{component}/{prefix}/{source}")
}

/// A file of a source package as the repository stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile<'a> {
    pub name: &'a str,
    pub size: u64,
    pub md5: &'a str,
    pub sha1: &'a str,
    pub sha256: &'a str,
}

/// Appends the `Sources` stanza of a source package (and the blank line that ends it) to
/// `out`: its `.dsc` paragraph with `Source` written as `Package`, the checksum lists replaced
/// by `files` (the `.dsc` first), and `Directory`.
pub fn render_sources_stanza(out: &mut String, dsc_text: &str, directory: &str, files: &[SourceFile<'_>]) {
    let list = |out: &mut String, field: &str, pick: for<'a> fn(&SourceFile<'a>) -> &'a str| {
        let _ = write!(out, "{field}:");
        for f in files {
            let _ = write!(out, "\n {} {} {}", pick(f), f.size, f.name);
        }
        out.push('\n');
    };
    let mut skipping = false;
    for line in dsc_text.lines() {
        if line.starts_with([' ', '\t']) {
            if !skipping {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        let name = line.split_once(':').map_or(line, |(n, _)| n);
        skipping = true;
        match name.to_ascii_lowercase().as_str() {
            "source" => {
                let _ = writeln!(out, "Package:{}", &line[name.len() + 1..]);
            }
            "files" => list(out, "Files", |f| f.md5),
            "checksums-sha1" => list(out, "Checksums-Sha1", |f| f.sha1),
            "checksums-sha256" => list(out, "Checksums-Sha256", |f| f.sha256),
            // The archive's own fields are ours to write.
            "directory" | "checksums-sha512" | "checksums-md5" => {}
            _ => {
                skipping = false;
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let _ = write!(out, "Directory: {directory}\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    const DSC: &str = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nFormat: 3.0 (quilt)\nSource: hello\nBinary: hello\nVersion: 2.10-3\nPackage-List:\n hello deb devel optional arch=any\nChecksums-Sha1:\n f7bebf6f9c62a2295e889f66e05ce9bfaed9ace3 725946 hello_2.10.orig.tar.gz\n a2d122fd090dbab3d40b219a237fbb7d74f8023a 12684 hello_2.10-3.debian.tar.xz\nChecksums-Sha256:\n 31e066137a962676e89f69d1b65382de95a7ef7d914b8cb956f41ea72e0f516b 725946 hello_2.10.orig.tar.gz\n 60ee7a466808301fbaa7fea2490b5e7a6d86f598956fb3e79c71b3295dc1f249 12684 hello_2.10-3.debian.tar.xz\nFiles:\n 6cd0ffea3884a4e79330338dcc2987d6 725946 hello_2.10.orig.tar.gz\n 27ab798c1d8d9048ffc8127e9b8dbfca 12684 hello_2.10-3.debian.tar.xz\n\n-----BEGIN PGP SIGNATURE-----\n\niQEzBAEBCAAdFiEE\n=kNoz\n-----END PGP SIGNATURE-----\n";

    #[test]
    fn a_signed_dsc_parses() -> Result<(), DscError> {
        let dsc = Dsc::parse(DSC.as_bytes())?;
        assert_eq!((dsc.source.as_str(), dsc.version.as_str()), ("hello", "2.10-3"));
        assert_eq!(dsc.file_name(), "hello_2.10-3.dsc");
        assert!(dsc.text.starts_with("Format: 3.0 (quilt)\n") && dsc.text.ends_with("hello_2.10-3.debian.tar.xz"));
        assert_eq!(dsc.files.len(), 2);
        assert_eq!(
            dsc.files[1],
            Listed {
                name: "hello_2.10-3.debian.tar.xz".into(),
                size: 12684,
                md5: "27ab798c1d8d9048ffc8127e9b8dbfca".into(),
                sha1: Some("a2d122fd090dbab3d40b219a237fbb7d74f8023a".into()),
                sha256: "60ee7a466808301fbaa7fea2490b5e7a6d86f598956fb3e79c71b3295dc1f249".into(),
            }
        );
        // Unsigned works the same.
        let plain = DSC.split_once("\n\n").map(|(_, b)| b).unwrap_or_default();
        let plain = plain.split_once("\n-----BEGIN PGP SIGNATURE").map(|(a, _)| a).unwrap_or_default();
        assert_eq!(Dsc::parse(plain.as_bytes())?, dsc);
        Ok(())
    }

    #[test]
    fn what_a_dsc_may_not_be() {
        let bad = |text: &str| Dsc::parse(text.as_bytes()).err().map(|e| e.to_string()).unwrap_or_default();
        let base = "Format: 1.0\nSource: x1\nVersion: 1.0-1\n";
        let files = "Files:\n 0123456789abcdef0123456789abcdef 3 x1_1.0.tar.gz\nChecksums-Sha256:\n 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef 3 x1_1.0.tar.gz\n";
        assert!(bad(&format!("{base}{files}")).is_empty(), "{}", bad(&format!("{base}{files}")));
        assert!(bad(&format!("{base}Files:\n 0123456789abcdef0123456789abcdef 3 x1_1.0.tar.gz\n"))
            .contains("no field Checksums-Sha256"));
        assert!(
            bad(&format!("{base}{}", files.replace("x1_1.0.tar.gz", "../x"))).contains("invalid file name \"../x\"")
        );
        assert!(bad(&format!("{base}{}", files.replace(" 3 x1_1.0.tar.gz\nCh", " 4 x1_1.0.tar.gz\nCh")))
            .contains("x1_1.0.tar.gz is in Files but not in Checksums-Sha256"));
        assert!(bad(&format!("Format: 1.0\nSource: X\nVersion: 1\n{files}")).contains("invalid source package name"));
        assert!(bad(&format!("Format: 1.0\nSource: x1\nVersion: a\n{files}")).contains("invalid version"));
        assert!(bad(&format!("{base}Source: y\n{files}")).contains("appears twice"));
        assert!(bad("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nSource: x\n").contains("signature block"));
        assert!(bad(&format!("{base}Files:\n 0123 3 x\nChecksums-Sha256:\n"))
            .contains("is not `<checksum> <size> <file name>`"));
        assert!(Dsc::parse(&vec![b'a'; MAX_DSC_BYTES + 1]).is_err());
        assert!(Dsc::parse(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn the_sources_stanza() -> Result<(), DscError> {
        let dsc = Dsc::parse(DSC.as_bytes())?;
        let f = |name, size, md5, sha1, sha256| SourceFile { name, size, md5, sha1, sha256 };
        let files = [
            f("hello_2.10-3.dsc", 1721, "m0", "s0", "h0"),
            f("hello_2.10.orig.tar.gz", 725946, "m1", "s1", "h1"),
            f("hello_2.10-3.debian.tar.xz", 12684, "m2", "s2", "h2"),
        ];
        let mut out = String::new();
        render_sources_stanza(&mut out, &dsc.text, "pool/main/h/hello", &files);
        assert_eq!(
            out,
            "Format: 3.0 (quilt)\nPackage: hello\nBinary: hello\nVersion: 2.10-3\nPackage-List:\n hello deb devel optional arch=any\n\
             Checksums-Sha1:\n s0 1721 hello_2.10-3.dsc\n s1 725946 hello_2.10.orig.tar.gz\n s2 12684 hello_2.10-3.debian.tar.xz\n\
             Checksums-Sha256:\n h0 1721 hello_2.10-3.dsc\n h1 725946 hello_2.10.orig.tar.gz\n h2 12684 hello_2.10-3.debian.tar.xz\n\
             Files:\n m0 1721 hello_2.10-3.dsc\n m1 725946 hello_2.10.orig.tar.gz\n m2 12684 hello_2.10-3.debian.tar.xz\n\
             Directory: pool/main/h/hello\n\n"
        );
        assert_eq!(pool_directory("main", "libjq"), "pool/main/libj/libjq");
        Ok(())
    }
}
