//! `Packages` stanzas: the control text verbatim, then the fields the repository adds —
//! `Filename`, `Size`, `MD5sum` and `SHA256`, as Debian's own archive lists them (apt verifies
//! with SHA-256; SHA-1 and SHA-512 per package cost a quarter of an upload's CPU and no client
//! needs them).

use std::fmt::Write;

/// What the repository knows about a stored `.deb`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolFile<'a> {
    pub filename: &'a str,
    pub size: u64,
    pub md5: &'a str,
    pub sha256: &'a str,
}

/// Appends one stanza (and the blank line that ends it) to `out`.
pub fn render_stanza(out: &mut String, control_text: &str, file: &PoolFile<'_>) {
    out.reserve(control_text.len() + 400);
    out.push_str(control_text.trim_end());
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "\nFilename: {}\nSize: {}\nMD5sum: {}\nSHA256: {}\n\n",
        file.filename, file.size, file.md5, file.sha256
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stanza_layout() {
        let mut out = String::new();
        let f = PoolFile { filename: "pool/main/h/hello/hello_1.0_all.deb", size: 42, md5: "m", sha256: "s2" };
        render_stanza(&mut out, "Package: hello\nVersion: 1.0\nArchitecture: all\nDescription: hi\n more\n", &f);
        render_stanza(&mut out, "Package: other\nVersion: 2\nArchitecture: all", &f);
        assert_eq!(
            out,
            "Package: hello\nVersion: 1.0\nArchitecture: all\nDescription: hi\n more\nFilename: pool/main/h/hello/hello_1.0_all.deb\nSize: 42\nMD5sum: m\nSHA256: s2\n\n\
             Package: other\nVersion: 2\nArchitecture: all\nFilename: pool/main/h/hello/hello_1.0_all.deb\nSize: 42\nMD5sum: m\nSHA256: s2\n\n"
        );
    }
}
