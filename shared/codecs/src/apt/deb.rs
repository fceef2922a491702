//! Reading a whole `.deb`, streaming and with bounded memory: its control file is kept, and its
//! data member is read to its end, so that a package is acknowledged only when all of it is there.
//!
//! A `.deb` is an `ar` archive: `!<arch>\n`, then members with 60-byte headers, data padded to an
//! even length. Members: `debian-binary` (`2.x\n`), `control.tar[.gz|.xz|.zst]`,
//! `data.tar[.gz|.xz|.zst]`; members whose names start with `_` may sit between them, and what
//! follows `data.tar` is ignored (as dpkg does). The control member is unpacked (bounded); the data
//! member is decompressed as it streams by (its trailer checked) and its tar read to the
//! end-of-archive block, but nothing of it is kept.

use std::io::{self, Read};

use super::control::{Control, ControlError};
use crate::archive::{self, ArchiveError, Compression};

/// Limits against hostile input.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest compressed control member.
    pub control_member: u64,
    /// Largest decompressed control tar (a zip-bomb guard).
    pub control_tar: u64,
    /// Largest `control` file.
    pub control_file: u64,
    /// Largest decompressed data tar; it is also bounded by its compressed size
    /// ([`archive::expansion_limit`]).
    pub data_tar: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { control_member: 16 << 20, control_tar: 64 << 20, control_file: 1 << 20, data_tar: u64::MAX }
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

impl From<ArchiveError> for DebError {
    fn from(e: ArchiveError) -> Self {
        match e {
            ArchiveError::Truncated(m) => Self::Truncated(m),
            ArchiveError::Corrupt(m) => Self::Malformed(m),
            e @ ArchiveError::TooLarge { .. } => Self::TooLarge(e.to_string()),
        }
    }
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

/// Reads a whole `.deb` and returns its validated control file.
pub fn read_package(mut r: impl Read, limits: Limits) -> Result<Control, DebError> {
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
        archive::walk_tar(&mut &tar_bytes[..], &m.name)?;
        let text = control_from_tar(&tar_bytes, limits.control_file)?;
        let control = Control::parse(&text)?;
        if m.size % 2 == 1 {
            let mut pad = [0u8; 1];
            read_exact_or(&mut r, &mut pad, "the padding after the control member")?;
        }
        check_data(&mut r, limits)?;
        return Ok(control);
    }
}

/// The data member, after any `_` members: decompressed and read to its tar's end.
fn check_data(r: &mut impl Read, limits: Limits) -> Result<(), DebError> {
    loop {
        let m = next_member(r)?.ok_or_else(|| {
            DebError::Truncated("the package ends after its control member: there is no data.tar member".into())
        })?;
        if m.name.starts_with('_') {
            skip(r, &m)?;
            continue;
        }
        if !m.name.starts_with("data.tar") {
            return Err(DebError::Malformed(format!("expected data.tar after control.tar, found {:?}", m.name)));
        }
        let compression = match m.name.as_str() {
            "data.tar" => Compression::None,
            "data.tar.gz" => Compression::Gzip,
            "data.tar.xz" => Compression::Xz,
            "data.tar.zst" => Compression::Zstd,
            other => {
                return Err(DebError::Unsupported(format!(
                    "data member {other:?} (expected data.tar, .gz, .xz or .zst)"
                )))
            }
        };
        let limit = limits.data_tar.min(archive::expansion_limit(m.size));
        let mut member = Counted { inner: r.by_ref().take(m.size), read: 0 };
        archive::check_tar(&mut member, compression, &m.name, limit)?;
        // Whatever the decompressor left of the member must be there too.
        io::copy(&mut member, &mut io::sink())
            .map_err(|e| DebError::Malformed(format!("cannot read member {}: {e}", m.name)))?;
        if member.read < m.size {
            return Err(DebError::Truncated(format!(
                "member {} is cut short: {} of {} bytes",
                m.name, member.read, m.size
            )));
        }
        return Ok(());
    }
}

/// Counts what passes through.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::apt::testing::{ar_member, compress, control_tar, data_tar, deb, small_data_member};

    const HELLO: &str = "Package: hello\nVersion: 1:2.10-3\nArchitecture: amd64\nMaintainer: A <a@example.org>\nDescription: says hello\n multi-line\n .\n continued\n";

    #[test]
    fn reads_control_from_every_compression() {
        for kind in ["", ".gz", ".xz", ".zst"] {
            let c = read_package(&deb(HELLO, kind)[..], Limits::default());
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
        assert_eq!(read_package(&b"PK\x03\x04 a zip file"[..], Limits::default()).err(), Some(DebError::NotAr));
        assert_eq!(read_package(&b"!<ar"[..], Limits::default()).err(), Some(DebError::NotAr));
        let full = deb(HELLO, ".gz");
        for cut in [10, 70, 80, 140] {
            let err = read_package(&full[..cut], Limits::default()).err();
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
        assert_eq!(read_package(&no_control[..], Limits::default()).err(), Some(DebError::NoControl));
        let mut v3 = b"!<arch>\n".to_vec();
        v3.extend(ar_member("debian-binary", b"3.0\n"));
        assert!(matches!(read_package(&v3[..], Limits::default()).err(), Some(DebError::Unsupported(_))));
        let bad = deb("Package: Hello_World\nVersion: 1.0\nArchitecture: amd64\n", "");
        assert!(matches!(
            read_package(&bad[..], Limits::default()).err(),
            Some(DebError::Control(ControlError::Name(_)))
        ));
    }

    /// The whole package is read: a cut, a damaged or a missing data member is refused.
    #[test]
    fn the_data_member_is_read_to_its_end() {
        for kind in [".gz", ".xz", ".zst", ""] {
            let head = |data: Vec<u8>| {
                let mut pkg = b"!<arch>\n".to_vec();
                pkg.extend(ar_member("debian-binary", b"2.0\n"));
                pkg.extend(ar_member("control.tar.gz", &compress(".gz", &control_tar(HELLO))));
                pkg.extend(data);
                pkg
            };
            let tar = data_tar(&[("./usr/bin/hello", &[1u8; 5000][..]), ("./usr/share/doc/hello", b"doc")]);
            let name = format!("data.tar{kind}");
            let full = head(ar_member(&name, &compress(kind, &tar)));
            assert!(read_package(&full[..], Limits::default()).is_ok(), "{kind}");
            // Cut anywhere inside the data member (its header included).
            let data_at = head(Vec::new()).len();
            for cut in [data_at + 30, data_at + 70, full.len() - 200, full.len() - 3] {
                let err = read_package(&full[..cut], Limits::default()).err();
                assert!(matches!(&err, Some(DebError::Truncated(_))), "{kind} cut at {cut} of {}: {err:?}", full.len());
            }
            // A tar without its end-of-archive block, inside an intact compressed stream.
            let cut_tar = head(ar_member(&name, &compress(kind, &tar[..tar.len() - 1024])));
            let err = read_package(&cut_tar[..], Limits::default()).err();
            assert!(matches!(&err, Some(DebError::Truncated(m)) if m.contains("end-of-archive")), "{kind}: {err:?}");
        }
        // No data member at all.
        let mut pkg = b"!<arch>\n".to_vec();
        pkg.extend(ar_member("debian-binary", b"2.0\n"));
        pkg.extend(ar_member("control.tar.gz", &compress(".gz", &control_tar(HELLO))));
        let err = read_package(&pkg[..], Limits::default()).err();
        assert!(matches!(&err, Some(DebError::Truncated(m)) if m.contains("no data.tar member")), "{err:?}");
        // A damaged gzip data member: its CRC no longer matches.
        let mut gz = compress(".gz", &data_tar(&[("./a", b"some content")]));
        let n = gz.len();
        gz[n - 8] ^= 0x55;
        pkg.extend(ar_member("data.tar.gz", &gz));
        let err = read_package(&pkg[..], Limits::default()).err();
        assert!(matches!(&err, Some(DebError::Malformed(_))), "{err:?}");
        // Trailing members after data.tar are ignored, as dpkg does.
        let mut ok = deb(HELLO, ".gz");
        ok.extend(ar_member("_future", b"x"));
        assert!(read_package(&ok[..], Limits::default()).is_ok());
        assert!(!small_data_member().is_empty());
    }

    #[test]
    fn a_data_bomb_stops_at_the_limit() {
        let zeros = data_tar(&[("./zeros", &vec![0u8; 8 << 20][..])]);
        let mut pkg = b"!<arch>\n".to_vec();
        pkg.extend(ar_member("debian-binary", b"2.0\n"));
        pkg.extend(ar_member("control.tar.gz", &compress(".gz", &control_tar(HELLO))));
        pkg.extend(ar_member("data.tar.xz", &compress(".xz", &zeros)));
        let limits = Limits { data_tar: 1 << 20, ..Limits::default() };
        let err = read_package(&pkg[..], limits).err();
        assert!(matches!(&err, Some(DebError::TooLarge(m)) if m.contains("decompression bomb")), "{err:?}");
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
                let err = read_package(&pkg[..], limits).err();
                assert!(
                    matches!(&err, Some(DebError::TooLarge(m)) if m.contains("decompression bomb")),
                    "{kind} {control_tar}: {err:?}"
                );
            }
        }
    }
}
