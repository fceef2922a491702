//! Whole-archive checks shared by the package formats: a tar stream read to its end-of-archive
//! block (every header's checksum, every entry's data present), and a compressed stream read to
//! its end (the gzip trailer's CRC and size, the xz check, each zstd frame's checksum), with a
//! bound on how far it may expand. A package is acknowledged only once all of it reads back.

use std::io::{self, BufRead, BufReader, Read};

/// How a tar stream is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
}

impl Compression {
    /// From a file name's ending (`.tar`, `.tar.gz`/`.tgz`, `.tar.xz`, `.tar.zst`).
    pub fn from_name(name: &str) -> Option<Self> {
        if name.ends_with(".tar") {
            Some(Self::None)
        } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
            Some(Self::Gzip)
        } else if name.ends_with(".tar.xz") || name.ends_with(".txz") {
            Some(Self::Xz)
        } else if name.ends_with(".tar.zst") {
            Some(Self::Zstd)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// The stream ends before the archive does.
    #[error("{0}")]
    Truncated(String),
    /// The bytes are not what they claim to be (bad checksum, bad header, bad compression).
    #[error("{0}")]
    Corrupt(String),
    #[error("{what} expands beyond {limit} bytes (a decompression bomb?)")]
    TooLarge { what: String, limit: u64 },
}

/// What a tar stream held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TarSummary {
    pub entries: u64,
    /// The sum of the entries' sizes.
    pub bytes: u64,
}

/// How far a compressed member of `compressed` bytes may expand when it is checked: 1 GiB plus
/// 64 times its size. Real packages stay far below (their ratio is rarely above 10); a bomb is
/// cut off after about a second of work.
pub fn expansion_limit(compressed: u64) -> u64 {
    (1u64 << 30).saturating_add(compressed.saturating_mul(64))
}

const BLOCK: usize = 512;

/// Reads exactly one block; `Ok(false)` on a clean end of stream before its first byte.
fn read_block(r: &mut impl Read, block: &mut [u8; BLOCK], what: &str) -> Result<bool, ArchiveError> {
    let mut got = 0;
    while got < BLOCK {
        match r.read(&mut block[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(ArchiveError::Truncated(format!("{what} ends inside a tar header"))),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(stream_error(what, e)),
        }
    }
    Ok(true)
}

/// An octal number field (NUL or space terminated), or GNU's base-256 form for large sizes.
fn number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for b in &field[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(*b))?;
        }
        return Some(v);
    }
    let mut i = field.iter().take_while(|b| **b == b' ').count();
    let start = i;
    while i < field.len() && (b'0'..=b'7').contains(&field[i]) {
        i += 1;
    }
    if !field[i..].iter().all(|b| *b == 0 || *b == b' ') {
        return None;
    }
    if i == start {
        return Some(0);
    }
    u64::from_str_radix(std::str::from_utf8(&field[start..i]).ok()?, 8).ok()
}

fn entry_name(header: &[u8; BLOCK]) -> String {
    let end = header[..100].iter().position(|b| *b == 0).unwrap_or(100);
    String::from_utf8_lossy(&header[..end]).into_owned()
}

/// An entry of a tar stream as [`walk_tar_with`] shows it: its path (the ustar prefix joined,
/// or the pax `path` record or GNU long name before it), its type flag, its data's size, and a
/// link's target (the header's, or the pax `linkpath` record or GNU long link name before it).
#[derive(Debug)]
pub struct TarEntry<'a> {
    pub path: &'a str,
    pub kind: u8,
    pub size: u64,
    pub link: &'a str,
}

impl TarEntry<'_> {
    /// A regular file (the old `\0`, `0`, or the contiguous `7`).
    pub fn is_file(&self) -> bool {
        matches!(self.kind, 0 | b'0' | b'7')
    }
}

/// Longest pax header or GNU long name read (a path is far shorter).
const MAX_LONG_NAME: u64 = 1 << 20;

/// Reads a tar stream from a header block to its end-of-archive block: each header's checksum
/// must hold and each entry's data must be there. `what` names the archive in messages. What
/// follows the end block (a record's zero padding) is left unread.
pub fn walk_tar(r: &mut impl Read, what: &str) -> Result<TarSummary, ArchiveError> {
    walk_tar_with(r, what, |_, _| Ok(()))
}

/// [`walk_tar`], showing `visit` each entry other than a pax or GNU long-name header, with a
/// reader of its data (what the visitor leaves unread is skipped).
pub fn walk_tar_with(
    r: &mut impl Read,
    what: &str,
    mut visit: impl FnMut(&TarEntry<'_>, &mut dyn Read) -> io::Result<()>,
) -> Result<TarSummary, ArchiveError> {
    let mut summary = TarSummary::default();
    let mut block = [0u8; BLOCK];
    // A path and a link target a pax extended header (`x`) or a GNU long name (`L`, `K`) gives
    // the next entry.
    let mut long_path: Option<String> = None;
    let mut long_link: Option<String> = None;
    loop {
        if !read_block(r, &mut block, what)? {
            return Err(ArchiveError::Truncated(format!(
                "{what} ends after {} entries without the tar end-of-archive block",
                summary.entries
            )));
        }
        if block.iter().all(|b| *b == 0) {
            return Ok(summary);
        }
        let stored = number(&block[148..156])
            .ok_or_else(|| ArchiveError::Corrupt(format!("{what}: a tar header has an unreadable checksum")))?;
        let sum: u64 =
            block.iter().enumerate().map(|(i, b)| if (148..156).contains(&i) { 32 } else { u64::from(*b) }).sum();
        if sum != stored {
            return Err(ArchiveError::Corrupt(format!(
                "{what}: the tar header of {:?} has a wrong checksum (the archive is damaged)",
                entry_name(&block)
            )));
        }
        let size = number(&block[124..136]).ok_or_else(|| {
            ArchiveError::Corrupt(format!("{what}: the tar header of {:?} has an unreadable size", entry_name(&block)))
        })?;
        let kind = block[156];
        // Links, devices, directories and FIFOs carry no data whatever their size field says.
        let data = if matches!(kind, b'1' | b'2' | b'3' | b'4' | b'5' | b'6') { 0 } else { size };
        let padded = data.div_ceil(BLOCK as u64) * BLOCK as u64;
        let mut body = r.by_ref().take(data);
        let visited = match kind {
            b'x' | b'L' | b'K' if data <= MAX_LONG_NAME => {
                let mut text = Vec::new();
                body.read_to_end(&mut text).map_err(|e| stream_error(what, e))?;
                let until_nul = |t: &[u8]| {
                    let end = t.iter().position(|b| *b == 0).unwrap_or(t.len());
                    String::from_utf8_lossy(&t[..end]).into_owned()
                };
                match kind {
                    b'L' => long_path = Some(until_nul(&text)),
                    b'K' => long_link = Some(until_nul(&text)),
                    _ => {
                        long_path = pax_record(&text, "path").or(long_path);
                        long_link = pax_record(&text, "linkpath").or(long_link);
                    }
                }
                Ok(())
            }
            b'x' | b'L' | b'K' | b'g' => Ok(()),
            _ => {
                let path = long_path.take().unwrap_or_else(|| ustar_path(&block));
                let link = long_link.take().unwrap_or_else(|| field(&block[157..257]));
                visit(&TarEntry { path: &path, kind, size: data, link: &link }, &mut body)
            }
        };
        visited.map_err(|e| stream_error(what, e))?;
        io::copy(&mut body, &mut io::sink()).map_err(|e| stream_error(what, e))?;
        let missing = body.limit();
        let tail = padded - data;
        let copied = io::copy(&mut r.by_ref().take(tail), &mut io::sink()).map_err(|e| stream_error(what, e))?;
        if copied < tail || missing > 0 {
            return Err(ArchiveError::Truncated(format!(
                "{what} ends inside the data of {:?} ({} of {padded} bytes)",
                entry_name(&block),
                data - missing + copied
            )));
        }
        summary.entries += 1;
        summary.bytes = summary.bytes.saturating_add(data);
    }
}

/// A NUL-terminated header field.
fn field(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A ustar header's path: its prefix field joined to its name (a GNU header, `ustar  `, keeps
/// times where ustar has the prefix).
fn ustar_path(header: &[u8; BLOCK]) -> String {
    let name = entry_name(header);
    if &header[257..263] != b"ustar\0" {
        return name;
    }
    let end = header[345..500].iter().position(|b| *b == 0).unwrap_or(155);
    if end == 0 {
        return name;
    }
    format!("{}/{name}", String::from_utf8_lossy(&header[345..345 + end]))
}

/// A record of a pax extended header (`<length> <key>=<value>\n` records).
fn pax_record(text: &[u8], key: &str) -> Option<String> {
    let mut rest = text;
    while !rest.is_empty() {
        let space = rest.iter().position(|b| *b == b' ')?;
        let len: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        let record = rest.get(space + 1..len)?;
        rest = &rest[len..];
        if let Some(value) = record.strip_prefix(format!("{key}=").as_bytes()) {
            return Some(String::from_utf8_lossy(value.strip_suffix(b"\n").unwrap_or(value)).into_owned());
        }
    }
    None
}

/// A reader that refuses to give more than `limit` bytes, remembering that it did.
struct Bounded<R> {
    inner: R,
    left: u64,
    over: bool,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.over = true;
            return Err(io::Error::other("expansion limit"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Decompresses `r` as `compression` (at most `limit` bytes), reads the tar inside to its end
/// and the stream to its end, so that every integrity check of the compression runs.
pub fn check_tar(r: impl Read, compression: Compression, what: &str, limit: u64) -> Result<TarSummary, ArchiveError> {
    check_tar_with(r, compression, what, limit, |_, _| Ok(()))
}

/// [`check_tar`], showing `visit` each entry with a reader of its data ([`walk_tar_with`]).
pub fn check_tar_with(
    r: impl Read,
    compression: Compression,
    what: &str,
    limit: u64,
    visit: impl FnMut(&TarEntry<'_>, &mut dyn Read) -> io::Result<()>,
) -> Result<TarSummary, ArchiveError> {
    let decoder: Box<dyn Read + '_> = match compression {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(r)),
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new(r)),
        Compression::Zstd => Box::new(ZstdFrames::new(r)),
    };
    let mut bounded = Bounded { inner: decoder, left: limit, over: false };
    let too_large = || ArchiveError::TooLarge { what: what.to_string(), limit };
    let summary = match walk_tar_with(&mut bounded, what, visit) {
        Err(_) if bounded.over => return Err(too_large()),
        other => other?,
    };
    // The rest (the end blocks' record padding) is read too: the trailer checks run at the end.
    match io::copy(&mut bounded, &mut io::sink()) {
        Ok(_) => Ok(summary),
        Err(_) if bounded.over => Err(too_large()),
        Err(e) => Err(stream_error(what, e)),
    }
}

fn stream_error(what: &str, e: io::Error) -> ArchiveError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => ArchiveError::Truncated(format!("{what} is cut short: {e}")),
        _ => ArchiveError::Corrupt(format!("{what} is not valid: {e}")),
    }
}

/// Every zstd frame of a stream in turn, each checked against its content checksum when it
/// has one.
struct ZstdFrames<R> {
    source: BufReader<R>,
    decoder: ruzstd::decoding::FrameDecoder,
    in_frame: bool,
}

impl<R: Read> ZstdFrames<R> {
    fn new(r: R) -> Self {
        Self {
            source: BufReader::with_capacity(64 * 1024, r),
            decoder: ruzstd::decoding::FrameDecoder::new(),
            in_frame: false,
        }
    }
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if !self.in_frame {
                if self.source.fill_buf()?.is_empty() {
                    return Ok(0);
                }
                self.decoder
                    .reset(&mut self.source)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                self.in_frame = true;
            }
            if self.decoder.can_collect() > 0 {
                return self.decoder.read(buf);
            }
            if self.decoder.is_finished() {
                let (want, got) = (self.decoder.get_checksum_from_data(), self.decoder.get_calculated_checksum());
                if let (Some(want), Some(got)) = (want, got) {
                    if want != got {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("zstd frame checksum {want:08x} does not match the content ({got:08x})"),
                        ));
                    }
                }
                self.in_frame = false;
                continue;
            }
            self.decoder
                .decode_blocks(&mut self.source, ruzstd::decoding::BlockDecodingStrategy::UptoBlocks(1))
                .map_err(|e| io::Error::new(io::ErrorKind::UnexpectedEof, e.to_string()))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, body) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            let _ = b.append_data(&mut h, name, *body);
        }
        b.into_inner().unwrap_or_default()
    }

    fn compress(kind: Compression, data: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        match kind {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                let _ = e.write_all(data);
                e.finish().unwrap_or_default()
            }
            Compression::Xz => {
                let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
                let _ = e.write_all(data);
                e.finish().unwrap_or_default()
            }
            Compression::Zstd => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
        }
    }

    const ALL: [Compression; 4] = [Compression::None, Compression::Gzip, Compression::Xz, Compression::Zstd];

    #[test]
    fn a_whole_tar_reads_in_every_compression() -> Result<(), ArchiveError> {
        let body = vec![7u8; 3000];
        let tar = tar_of(&[("./a", b"hello"), ("./b", &body)]);
        for kind in ALL {
            let s = check_tar(&compress(kind, &tar)[..], kind, "data.tar", 1 << 20)?;
            assert_eq!(s, TarSummary { entries: 2, bytes: 3005 }, "{kind:?}");
        }
        Ok(())
    }

    #[test]
    fn a_cut_tar_is_refused_in_every_compression() {
        let body = vec![7u8; 3000];
        let tar = tar_of(&[("./a", b"hello"), ("./b", &body)]);
        // Cut inside the second entry's data, and before the end-of-archive block.
        for cut in [1600, 4096] {
            for kind in ALL {
                let err = check_tar(&compress(kind, &tar[..cut])[..], kind, "data.tar", 1 << 20).err();
                assert!(matches!(&err, Some(ArchiveError::Truncated(_))), "{kind:?} cut at {cut}: {err:?}");
            }
        }
        // The compressed stream itself cut short.
        for kind in [Compression::Gzip, Compression::Xz, Compression::Zstd] {
            let c = compress(kind, &tar);
            let err = check_tar(&c[..c.len() - 6], kind, "data.tar", 1 << 20).err();
            assert!(err.is_some(), "{kind:?}: a cut stream was accepted");
        }
    }

    #[test]
    fn damaged_bytes_are_refused() {
        let tar = tar_of(&[("./a", b"hello")]);
        // A header byte changed: its checksum no longer holds.
        let mut bad = tar.clone();
        bad[10] ^= 1;
        let err = check_tar(&bad[..], Compression::None, "data.tar", 1 << 20).err();
        assert!(matches!(&err, Some(ArchiveError::Corrupt(m)) if m.contains("wrong checksum")), "{err:?}");
        // gzip's CRC: a changed byte of the content.
        let mut gz = compress(Compression::Gzip, &tar);
        let n = gz.len();
        gz[n - 8] ^= 0xff;
        let err = check_tar(&gz[..], Compression::Gzip, "data.tar.gz", 1 << 20).err();
        assert!(matches!(&err, Some(ArchiveError::Corrupt(_))), "{err:?}");
    }

    #[test]
    fn expansion_is_bounded() {
        let tar = tar_of(&[("./zeros", &vec![0u8; 4 << 20])]);
        for kind in ALL {
            let err = check_tar(&compress(kind, &tar)[..], kind, "data.tar", 1 << 20).err();
            assert!(
                matches!(&err, Some(ArchiveError::TooLarge { limit, .. }) if *limit == 1 << 20),
                "{kind:?}: {err:?}"
            );
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(number(b"0000644\0"), Some(0o644));
        assert_eq!(number(b"     12 "), Some(0o12));
        assert_eq!(number(b"\0\0\0\0"), Some(0));
        assert_eq!(number(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]), Some(256 * 256));
        assert_eq!(number(b"12x4"), None);
    }
}
