//! Zip archives as both a Go module zip and an OSV data zip are: the end record and central
//! directory read from the end, then one sequential pass that checks each entry's local header
//! against the central directory, inflates it (stored or deflate) bounded by its declared size,
//! and proves the declared size and CRC-32 true. What a format requires beyond that (a module
//! zip's names and file types) is the format's.

use std::io::{self, Read};

#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    #[error("not a zip file: {0}")]
    NotZip(String),
    #[error("{0}")]
    Invalid(String),
    #[error("reading the zip: {0}")]
    Io(#[from] io::Error),
}

fn invalid(s: impl Into<String>) -> ZipError {
    ZipError::Invalid(s.into())
}

/// One central directory entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub method: u16,
    pub crc: u32,
    pub compressed: u64,
    pub size: u64,
    pub offset: u64,
    /// The Unix mode bits, when a Unix system made the entry.
    pub unix_mode: Option<u32>,
}

/// Bytes to read from the end of a zip to find its central directory.
pub fn tail_len(total: u64) -> u64 {
    total.min(22 + 65_535)
}

pub(crate) fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

pub(crate) fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Finds the end-of-central-directory record in `tail` (the last bytes of a zip of `total`
/// bytes): the central directory's offset, size and entry count.
pub fn locate(tail: &[u8], total: u64) -> Result<(u64, u64, usize), ZipError> {
    let at = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| tail[i..].starts_with(&[0x50, 0x4b, 0x05, 0x06]))
        .ok_or_else(|| ZipError::NotZip("no end-of-central-directory record".into()))?;
    let e = &tail[at..];
    let (entries, size, offset) = (u16_at(e, 10), u32_at(e, 12), u32_at(e, 16));
    if usize::from(u16_at(e, 20)) != e.len() - 22 {
        return Err(ZipError::NotZip("the end-of-central-directory record does not end the file".into()));
    }
    if entries == 0xffff || size == 0xffff_ffff || offset == 0xffff_ffff {
        return Err(invalid("zip64 archives are not supported (at most 65,534 files and 4 GiB)"));
    }
    let eocd_at = total - (tail.len() - at) as u64;
    // The central directory ends where the end record starts: no gap, no hidden second archive.
    if u64::from(offset) + u64::from(size) != eocd_at {
        return Err(ZipError::NotZip("the central directory does not end where the end record starts".into()));
    }
    Ok((u64::from(offset), u64::from(size), usize::from(entries)))
}

/// Parses the central directory: every entry's name (UTF-8), not encrypted, its data inside
/// the file.
pub fn parse_central(cd: &[u8], count: usize, cd_offset: u64) -> Result<Vec<Entry>, ZipError> {
    let mut out = Vec::with_capacity(count);
    let mut i = 0;
    for _ in 0..count {
        if cd.len() < i + 46 || u32_at(cd, i) != 0x0201_4b50 {
            return Err(ZipError::NotZip("a central directory entry is malformed".into()));
        }
        let e = &cd[i..];
        let made_by_unix = e[5] == 3;
        let flags = u16_at(e, 8);
        let (n, x, c) = (usize::from(u16_at(e, 28)), usize::from(u16_at(e, 30)), usize::from(u16_at(e, 32)));
        if cd.len() < i + 46 + n + x + c {
            return Err(ZipError::NotZip("a central directory entry is truncated".into()));
        }
        let name = std::str::from_utf8(&e[46..46 + n]).map_err(|_| invalid("a file name is not UTF-8"))?.to_string();
        let entry = Entry {
            method: u16_at(e, 10),
            crc: u32_at(e, 16),
            compressed: u64::from(u32_at(e, 20)),
            size: u64::from(u32_at(e, 24)),
            offset: u64::from(u32_at(e, 42)),
            unix_mode: made_by_unix.then(|| u32_at(e, 38) >> 16),
            name,
        };
        if entry.compressed == 0xffff_ffff || entry.size == 0xffff_ffff || entry.offset == 0xffff_ffff {
            return Err(invalid("zip64 entries are not supported"));
        }
        if flags & 1 != 0 {
            return Err(invalid(format!("{} is encrypted", entry.name)));
        }
        if entry.offset + 30 + entry.compressed > cd_offset {
            return Err(invalid(format!("the data of {} lies outside the file", entry.name)));
        }
        out.push(entry);
        i += 46 + n + x + c;
    }
    if i != cd.len() {
        return Err(ZipError::NotZip("the central directory holds more than its declared entries".into()));
    }
    Ok(out)
}

/// Reads the whole zip once, in order: each entry's local header must match the central
/// directory, no two entries may share bytes, and every file must inflate to exactly its
/// declared size and CRC (inflation stops past the declared size). `visit` sees each entry's
/// inflated bytes, piece by piece.
pub fn read_entries<'e, R: Read>(
    mut r: R,
    entries: &'e [Entry],
    mut visit: impl FnMut(&'e Entry, &[u8]) -> Result<(), ZipError>,
) -> Result<(), ZipError> {
    let mut order: Vec<&Entry> = entries.iter().collect();
    order.sort_by_key(|e| e.offset);
    let mut pos: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    for e in order {
        if e.offset < pos {
            return Err(invalid(format!("{} overlaps another entry", e.name)));
        }
        io::copy(&mut (&mut r).take(e.offset - pos), &mut io::sink())?;
        let mut head = [0u8; 30];
        r.read_exact(&mut head)
            .map_err(|_| ZipError::NotZip(format!("the local header of {} is truncated", e.name)))?;
        if u32_at(&head, 0) != 0x0403_4b50 {
            return Err(ZipError::NotZip(format!("no local header for {}", e.name)));
        }
        let (n, x) = (u64::from(u16_at(&head, 26)), u64::from(u16_at(&head, 28)));
        let mut name = vec![0u8; usize::from(u16_at(&head, 26))];
        r.read_exact(&mut name)?;
        if name != e.name.as_bytes() || u16_at(&head, 8) != e.method {
            return Err(invalid(format!("the local header of {} does not match the central directory", e.name)));
        }
        io::copy(&mut (&mut r).take(x), &mut io::sink())?;
        let mut data = (&mut r).take(e.compressed);
        let mut crc = flate2::Crc::new();
        let mut produced: u64 = 0;
        {
            let mut inflated: Box<dyn Read + '_> = match e.method {
                0 => Box::new(&mut data),
                8 => Box::new(flate2::read::DeflateDecoder::new(&mut data)),
                m => {
                    return Err(invalid(format!(
                        "{} uses compression method {m}; only stored and deflate are allowed",
                        e.name
                    )))
                }
            };
            loop {
                let got =
                    inflated.read(&mut buf).map_err(|err| invalid(format!("{} does not inflate: {err}", e.name)))?;
                if got == 0 {
                    break;
                }
                produced += got as u64;
                if produced > e.size {
                    return Err(invalid(format!("{} holds more than its declared {} bytes", e.name, e.size)));
                }
                crc.update(&buf[..got]);
                visit(e, &buf[..got])?;
            }
        }
        if produced != e.size {
            return Err(invalid(format!("{} holds {produced} bytes, not its declared {}", e.name, e.size)));
        }
        if crc.sum() != e.crc {
            return Err(invalid(format!("{} fails its CRC-32 check", e.name)));
        }
        // What inflation left of the compressed bytes (none, for a well-formed entry).
        io::copy(&mut data, &mut io::sink())?;
        pos = e.offset + 30 + n + x + e.compressed;
    }
    Ok(())
}

/// Every file of a zip held in memory, by name, checked whole ([`read_entries`]); at most
/// `limit` bytes inflated in all. Directories (names ending in `/`) are left out.
pub fn files(bytes: &[u8], limit: u64) -> Result<Vec<(String, Vec<u8>)>, ZipError> {
    let total = bytes.len() as u64;
    let tail = &bytes[bytes.len() - tail_len(total) as usize..];
    let (cd_offset, cd_size, count) = locate(tail, total)?;
    let cd = bytes
        .get(cd_offset as usize..(cd_offset + cd_size) as usize)
        .ok_or_else(|| ZipError::NotZip("the central directory lies outside the file".into()))?;
    let entries = parse_central(cd, count, cd_offset)?;
    let declared: u64 = entries.iter().map(|e| e.size).sum();
    if declared > limit {
        return Err(invalid(format!("the zip expands to {declared} bytes, more than {limit}")));
    }
    let mut out: Vec<(String, Vec<u8>)> = Vec::with_capacity(entries.len());
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    read_entries(bytes, &entries, |e, piece| {
        if e.name.ends_with('/') {
            return Ok(());
        }
        let i = *at.entry(e.name.clone()).or_insert_with(|| {
            out.push((e.name.clone(), Vec::new()));
            out.len() - 1
        });
        out[i].1.extend_from_slice(piece);
        Ok(())
    })?;
    // An empty file has no piece: it is there too.
    for e in &entries {
        if !e.name.ends_with('/') && !at.contains_key(&e.name) {
            at.insert(e.name.clone(), out.len());
            out.push((e.name.clone(), Vec::new()));
        }
    }
    Ok(out)
}
