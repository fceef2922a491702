//! Reading the control file out of a `.deb`, streaming and with bounded memory.
//!
//! A `.deb` is an `ar` archive: `!<arch>\n`, then members with 60-byte headers, data padded to an
//! even length. Members: `debian-binary` (`2.x\n`), `control.tar[.gz|.xz|.zst]`, `data.tar.*`;
//! members whose names start with `_` may sit between them. Only the first two are read: the
//! data member is never touched, so the cost does not depend on the package's size.

use std::io::{self, Read};

use super::control::{Control, ControlError};

/// Limits against hostile input.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest compressed control member.
    pub control_member: u64,
    /// Largest decompressed control tar (a zip-bomb guard).
    pub control_tar: u64,
    /// Largest `control` file.
    pub control_file: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { control_member: 16 << 20, control_tar: 64 << 20, control_file: 1 << 20 }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DebError {
    #[error("not a Debian package: the file does not start with an ar archive header (!<arch>)")]
    NotAr,
    #[error("truncated package: {0}")]
    Truncated(String),
    #[error("malformed package: {0}")]
    Malformed(String),
    #[error("unsupported package format: {0}")]
    Unsupported(String),
    #[error("control.tar has no control file")]
    NoControl,
    #[error("package rejected: {0}")]
    TooLarge(String),
    #[error("invalid control file: {0}")]
    Control(#[from] ControlError),
}

struct Member {
    name: String,
    size: u64,
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), DebError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => DebError::Truncated(format!("the file ends inside {what}")),
        _ => DebError::Malformed(format!("cannot read {what}: {e}")),
    })
}

fn next_member(r: &mut impl Read) -> Result<Option<Member>, DebError> {
    let mut header = [0u8; 60];
    // A clean end of archive is only allowed between members.
    let mut got = 0;
    while got < 60 {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(DebError::Truncated("the file ends inside an ar member header".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(DebError::Malformed(format!("cannot read an ar member header: {e}"))),
        }
    }
    if &header[58..60] != b"`\n" {
        return Err(DebError::Malformed("bad ar member header (missing `\\n terminator)".into()));
    }
    let name = String::from_utf8_lossy(&header[0..16]).trim_end().trim_end_matches('/').to_string();
    let size_field = String::from_utf8_lossy(&header[48..58]).trim().to_string();
    let size: u64 = size_field
        .parse()
        .map_err(|_| DebError::Malformed(format!("bad size {size_field:?} in ar member {name:?}")))?;
    Ok(Some(Member { name, size }))
}

/// Skips a member's data and its padding byte.
fn skip(r: &mut impl Read, m: &Member) -> Result<(), DebError> {
    let padded = m.size + (m.size % 2);
    let copied = io::copy(&mut r.by_ref().take(padded), &mut io::sink())
        .map_err(|e| DebError::Malformed(format!("cannot read member {}: {e}", m.name)))?;
    // The last member's padding may be missing.
    if copied < m.size {
        return Err(DebError::Truncated(format!("member {} is cut short", m.name)));
    }
    Ok(())
}

/// A writer that fails once more than `limit` bytes arrive.
struct Capped {
    buf: Vec<u8>,
    limit: u64,
    /// Set when a write was refused for the limit (whatever the chunk sizes were).
    over: bool,
}

impl io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.buf.len() as u64 + b.len() as u64 > self.limit {
            self.over = true;
            return Err(io::Error::other("decompressed size limit"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn decompress(name: &str, compressed: &[u8], limit: u64) -> Result<Vec<u8>, DebError> {
    let too_big = || DebError::TooLarge(format!("{name} expands beyond {limit} bytes (a decompression bomb?)"));
    let corrupt = |e: String| DebError::Malformed(format!("{name} is not valid: {e}"));
    let mut out = Capped { buf: Vec::with_capacity(compressed.len().min(1 << 20) * 2), limit, over: false };
    match name {
        "control.tar" => {
            if compressed.len() as u64 > limit {
                return Err(too_big());
            }
            out.buf.extend_from_slice(compressed);
        }
        "control.tar.gz" => {
            let mut d = flate2::read::GzDecoder::new(compressed).take(limit + 1);
            io::copy(&mut d, &mut out).map_err(|e| if out.over { too_big() } else { corrupt(e.to_string()) })?;
        }
        "control.tar.xz" => {
            let mut d = liblzma::read::XzDecoder::new(compressed).take(limit + 1);
            io::copy(&mut d, &mut out).map_err(|e| if out.over { too_big() } else { corrupt(e.to_string()) })?;
        }
        "control.tar.zst" => {
            let mut d = ruzstd::decoding::StreamingDecoder::new(compressed).map_err(|e| corrupt(e.to_string()))?;
            let mut limited = (&mut d).take(limit + 1);
            io::copy(&mut limited, &mut out).map_err(|e| if out.over { too_big() } else { corrupt(e.to_string()) })?;
        }
        other => {
            return Err(DebError::Unsupported(format!(
                "control member {other:?} (expected control.tar, .gz, .xz or .zst)"
            )))
        }
    }
    Ok(out.buf)
}

/// Finds the regular file named `control` (usually `./control`) in the control tar.
fn control_from_tar(tar_bytes: &[u8], limit: u64) -> Result<String, DebError> {
    let mut archive = tar::Archive::new(tar_bytes);
    let entries = archive.entries().map_err(|e| DebError::Malformed(format!("control.tar: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| DebError::Malformed(format!("control.tar: {e}")))?;
        let path = entry.path().map_err(|e| DebError::Malformed(format!("control.tar entry name: {e}")))?;
        let is_control = path.file_name().is_some_and(|n| n == "control") && path.components().count() <= 2;
        if !is_control || !entry.header().entry_type().is_file() {
            continue;
        }
        if entry.size() > limit {
            return Err(DebError::TooLarge(format!(
                "the control file is {} bytes; the limit is {limit}",
                entry.size()
            )));
        }
        let mut text = String::new();
        entry
            .read_to_string(&mut text)
            .map_err(|e| DebError::Malformed(format!("the control file is not UTF-8 text: {e}")))?;
        return Ok(text);
    }
    Err(DebError::NoControl)
}

/// Reads and validates the control file of a `.deb` from its first bytes.
pub fn read_control(mut r: impl Read, limits: Limits) -> Result<Control, DebError> {
    let mut magic = [0u8; 8];
    match r.read_exact(&mut magic) {
        Ok(()) if &magic == b"!<arch>\n" => {}
        Ok(()) => return Err(DebError::NotAr),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(DebError::NotAr),
        Err(e) => return Err(DebError::Malformed(e.to_string())),
    }
    let first = next_member(&mut r)?.ok_or_else(|| DebError::Truncated("the ar archive is empty".into()))?;
    if first.name != "debian-binary" {
        return Err(DebError::Malformed(format!("the first member is {:?}, not debian-binary", first.name)));
    }
    if first.size > 64 {
        return Err(DebError::Malformed("debian-binary is too large".into()));
    }
    let mut version = vec![0u8; usize::try_from(first.size).unwrap_or(0)];
    read_exact_or(&mut r, &mut version, "debian-binary")?;
    if first.size % 2 == 1 {
        let mut pad = [0u8; 1];
        read_exact_or(&mut r, &mut pad, "debian-binary padding")?;
    }
    if !version.starts_with(b"2.") {
        return Err(DebError::Unsupported(format!(
            "package format {:?}; only 2.x is supported",
            String::from_utf8_lossy(&version).trim()
        )));
    }
    loop {
        let m = next_member(&mut r)?.ok_or_else(|| DebError::Truncated("no control.tar member".into()))?;
        if m.name.starts_with('_') {
            skip(&mut r, &m)?;
            continue;
        }
        if !m.name.starts_with("control.tar") {
            return Err(DebError::Malformed(format!("expected control.tar after debian-binary, found {:?}", m.name)));
        }
        if m.size > limits.control_member {
            return Err(DebError::TooLarge(format!(
                "{} is {} bytes; the limit is {}",
                m.name, m.size, limits.control_member
            )));
        }
        let mut compressed = vec![0u8; usize::try_from(m.size).unwrap_or(0)];
        read_exact_or(&mut r, &mut compressed, &m.name)?;
        let tar_bytes = decompress(&m.name, &compressed, limits.control_tar)?;
        let text = control_from_tar(&tar_bytes, limits.control_file)?;
        return Ok(Control::parse(&text)?);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::formats::apt::testing::{ar_member, compress, deb};

    const HELLO: &str = "Package: hello\nVersion: 1:2.10-3\nArchitecture: amd64\nMaintainer: A <a@example.org>\nDescription: says hello\n multi-line\n .\n continued\n";

    #[test]
    fn reads_control_from_every_compression() {
        for kind in ["", ".gz", ".xz", ".zst"] {
            let c = read_control(&deb(HELLO, kind)[..], Limits::default());
            let c = match c {
                Ok(c) => c,
                Err(e) => panic!("{kind}: {e}"),
            };
            assert_eq!(
                (c.package.as_str(), c.version.as_str(), c.architecture.as_str()),
                ("hello", "1:2.10-3", "amd64"),
                "{kind}"
            );
            assert_eq!(c.text, HELLO.trim_end(), "{kind}");
        }
    }

    #[test]
    fn bad_input_gets_a_clear_error() {
        assert_eq!(read_control(&b"PK\x03\x04 a zip file"[..], Limits::default()).err(), Some(DebError::NotAr));
        assert_eq!(read_control(&b"!<ar"[..], Limits::default()).err(), Some(DebError::NotAr));
        let full = deb(HELLO, ".gz");
        for cut in [10, 70, 80, 140] {
            let err = read_control(&full[..cut], Limits::default()).err();
            assert!(matches!(err, Some(DebError::Truncated(_))), "cut at {cut}: {err:?}");
        }
        let mut no_control = b"!<arch>\n".to_vec();
        no_control.extend(ar_member("debian-binary", b"2.0\n"));
        no_control.extend(ar_member("control.tar", &{
            let mut b = tar::Builder::new(Vec::new());
            let mut h = tar::Header::new_gnu();
            h.set_size(3);
            h.set_cksum();
            let _ = b.append_data(&mut h, "./md5sums", &b"abc"[..]);
            b.into_inner().unwrap_or_default()
        }));
        assert_eq!(read_control(&no_control[..], Limits::default()).err(), Some(DebError::NoControl));
        let mut v3 = b"!<arch>\n".to_vec();
        v3.extend(ar_member("debian-binary", b"3.0\n"));
        assert!(matches!(read_control(&v3[..], Limits::default()).err(), Some(DebError::Unsupported(_))));
        let bad = deb("Package: Hello_World\nVersion: 1.0\nArchitecture: amd64\n", "");
        assert!(matches!(
            read_control(&bad[..], Limits::default()).err(),
            Some(DebError::Control(ControlError::Name(_)))
        ));
    }

    #[test]
    fn decompression_bombs_stop_at_the_limit() {
        // A control.tar.gz that expands far beyond its size.
        let bomb_tar = {
            let mut b = tar::Builder::new(Vec::new());
            let zeros = vec![0u8; 8 << 20];
            let mut h = tar::Header::new_gnu();
            h.set_size(zeros.len() as u64);
            h.set_cksum();
            let _ = b.append_data(&mut h, "./padding", &zeros[..]);
            b.into_inner().unwrap_or_default()
        };
        for kind in [".gz", ".zst", ".xz"] {
            let compressed = compress(kind, &bomb_tar);
            assert!(compressed.len() < 1 << 20, "{kind}: {} bytes", compressed.len());
            let mut pkg = b"!<arch>\n".to_vec();
            pkg.extend(ar_member("debian-binary", b"2.0\n"));
            pkg.extend(ar_member(&format!("control.tar{kind}"), &compressed));
            // Limits on and off the decoders' chunk boundaries: the refusal is always the bomb's.
            for control_tar in [1 << 20, (1 << 20) + 1_000] {
                let limits = Limits { control_tar, ..Limits::default() };
                let err = read_control(&pkg[..], limits).err();
                assert!(
                    matches!(&err, Some(DebError::TooLarge(m)) if m.contains("decompression bomb")),
                    "{kind} {control_tar}: {err:?}"
                );
            }
        }
    }
}
