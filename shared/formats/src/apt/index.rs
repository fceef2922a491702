//! What hosted builds and group merges share about one index: its identity, the hashes `Release`
//! lists for its files, and the blocking pool its compression runs on (`chunks.rs` writes the
//! files).

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use packyard_core::publication::BuildError;

/// The four digests and the size of one index file, as Release lists them.
pub(crate) struct Hashed {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) md5: String,
    pub(crate) sha1: String,
    pub(crate) sha256: String,
    pub(crate) sha512: String,
}

#[derive(Default, Clone)]
pub(crate) struct Hashers {
    md5: Md5,
    sha1: Sha1,
    sha256: Sha256,
    sha512: Sha512,
    size: u64,
}

impl Hashers {
    pub(crate) fn update(&mut self, b: &[u8]) {
        self.md5.update(b);
        self.sha1.update(b);
        self.sha256.update(b);
        self.sha512.update(b);
        self.size += b.len() as u64;
    }

    /// What identifies the bytes hashed so far: their SHA-256 (two files whose states have
    /// the same mark carry on alike).
    pub(crate) fn mark(&self) -> [u8; 32] {
        self.sha256.clone().finalize().into()
    }

    pub(crate) fn finish(self, path: String) -> Hashed {
        Hashed {
            path,
            size: self.size,
            md5: hex::encode(self.md5.finalize()),
            sha1: hex::encode(self.sha1.finalize()),
            sha256: hex::encode(self.sha256.finalize()),
            sha512: hex::encode(self.sha512.finalize()),
        }
    }
}

pub(crate) const TEXT: &str = "text/plain; charset=utf-8";

/// xz preset for the blocks of `Packages.xz` that later builds keep: a full chunk of a hosted
/// index, a group's chunk. Preset 6 (`xz`'s default, Debian's) takes about ten times the CPU of
/// preset 1 (docs/perf/apt-build.md), but its blocks of a MiB come within 8 % of one preset-6
/// stream of the whole text, where preset 1's are 28 % larger (bookworm main's `Packages`,
/// docs/perf/index-storage.md). A hosted index's full chunk is compressed once; a group's
/// chunks are taken again while their text is the same (`chunks::Reuse`).
pub(crate) const XZ_KEPT: u32 = 6;

/// xz preset for the open last chunk of a hosted index, which every append compresses again:
/// preset 1 is about four times quicker, and the open chunk is at most one chunk of the file.
pub(crate) const XZ_OPEN: u32 = 1;

/// One index of a distribution: `dists/<dist>/<component>/binary-<arch>/Packages`, or
/// `dists/<dist>/<component>/source/Sources` (`arch` is `source`).
#[derive(Clone, Copy)]
pub(crate) struct IndexId<'a> {
    pub component: &'a str,
    pub arch: &'a str,
    pub dist: &'a str,
    /// `<component>/binary-<arch>` or `<component>/source`
    pub base: &'a str,
    /// `Packages` or `Sources`
    pub stem: &'a str,
}

impl<'a> IndexId<'a> {
    /// The component's `Sources` index (`base` is `<component>/source`).
    pub(crate) fn sources(dist: &'a str, component: &'a str, base: &'a str) -> Self {
        Self { component, arch: "source", dist, base, stem: "Sources" }
    }
}

/// Runs CPU work (compression, hashing) on a blocking thread, so that the forms of one chunk
/// are produced in parallel and the executor keeps reading the next page.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, BuildError> {
    packyard_core::publication::work::spawn_blocking(f).await.map_err(other)?.map_err(other)
}

pub(crate) fn other(e: impl std::fmt::Display) -> BuildError {
    BuildError::Other(e.to_string())
}

/// The xz form of an index is one stream of independently compressed blocks, a block per
/// chunk: apt (2.6) reads only the first of several concatenated xz streams, so the chunks
/// cannot be streams of their own as their gzip members are. A chunk's block is cut out of the
/// single-block stream the encoder makes of its text; the file is the stream header, the blocks,
/// and an index of the blocks' sizes with the stream footer, written per build.
pub(crate) mod xz {
    use std::io;
    use std::sync::OnceLock;

    /// A block's record in the stream's index: its unpadded and uncompressed sizes.
    pub(crate) type Record = (u64, u64);

    const HEADER_LEN: usize = 12;
    const FOOTER_LEN: usize = 12;

    fn bad(what: &str) -> io::Error {
        io::Error::other(format!("the xz encoder's output has {what}"))
    }

    /// A stream of `text` at `preset`. A block is compressed on its own, so its dictionary
    /// need not be larger than its text: a smaller one finds the same matches, and the encoder
    /// (about eleven times its dictionary at preset 6) takes less memory than preset 6's own
    /// 8 MiB would.
    fn encode(text: &[u8], preset: u32) -> io::Result<Vec<u8>> {
        use std::io::Write as _;
        let mut options = liblzma::stream::LzmaOptions::new_preset(preset)?;
        let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
        options.dict_size(len.clamp(4 << 10, 8 << 20));
        let mut filters = liblzma::stream::Filters::new();
        filters.lzma2(&options);
        let stream = liblzma::stream::Stream::new_stream_encoder(&filters, liblzma::stream::Check::Crc64)?;
        let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
        e.write_all(text)?;
        e.finish()
    }

    /// The stream header every stream of the encoder starts with (its flags name the check,
    /// whatever the preset).
    pub(crate) fn header() -> &'static [u8] {
        static HEADER: OnceLock<Vec<u8>> = OnceLock::new();
        HEADER.get_or_init(|| encode(b"", super::XZ_OPEN).map(|s| s[..HEADER_LEN].to_vec()).unwrap_or_default())
    }

    /// `text` compressed as one block at `preset`: its bytes and its record (`None` for empty
    /// text, which has no block).
    pub(crate) fn block(text: &[u8], preset: u32) -> io::Result<(Vec<u8>, Option<Record>)> {
        let stream = encode(text, preset)?;
        if stream.len() < HEADER_LEN + FOOTER_LEN || stream[..HEADER_LEN] != *header() {
            return Err(bad("an unexpected stream header"));
        }
        let footer = &stream[stream.len() - FOOTER_LEN..];
        let backward = u32::from_le_bytes([footer[4], footer[5], footer[6], footer[7]]);
        let index_len = (usize::try_from(backward).map_err(|_| bad("a huge index"))? + 1) * 4;
        let index_at = stream
            .len()
            .checked_sub(FOOTER_LEN + index_len)
            .filter(|a| *a >= HEADER_LEN)
            .ok_or_else(|| bad("no index"))?;
        let index = &stream[index_at..stream.len() - FOOTER_LEN];
        let mut at = 1;
        let mut next = || varint(index, &mut at).ok_or_else(|| bad("an unreadable index"));
        let record = match next()? {
            0 => None,
            1 => Some((next()?, next()?)),
            _ => return Err(bad("several blocks")),
        };
        Ok((stream[HEADER_LEN..index_at].to_vec(), record))
    }

    /// The stream's end after its blocks: the index of `records` and the stream footer.
    pub(crate) fn tail(records: &[Record]) -> Vec<u8> {
        let mut index = vec![0u8];
        push_varint(&mut index, records.len() as u64);
        for (unpadded, uncompressed) in records {
            push_varint(&mut index, *unpadded);
            push_varint(&mut index, *uncompressed);
        }
        while index.len() % 4 != 0 {
            index.push(0);
        }
        let crc = crc32(&index);
        index.extend_from_slice(&crc.to_le_bytes());
        let flags = &header()[6..8];
        let backward = u32::try_from(index.len() / 4 - 1).unwrap_or(u32::MAX);
        let mut covered = backward.to_le_bytes().to_vec();
        covered.extend_from_slice(flags);
        index.extend_from_slice(&crc32(&covered).to_le_bytes());
        index.extend_from_slice(&covered);
        index.extend_from_slice(b"YZ");
        index
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = flate2::Crc::new();
        c.update(bytes);
        c.sum()
    }

    fn push_varint(out: &mut Vec<u8>, mut n: u64) {
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..63).step_by(7) {
            let b = *bytes.get(*at)?;
            *at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::io::Read as _;

        #[test]
        fn blocks_make_one_stream_a_single_stream_reader_reads_whole() -> io::Result<()> {
            let texts: [&[u8]; 4] = [b"Package: a\n\n", b"", &[b'x'; 300_000], b"Package: b\n\n"];
            let mut file = header().to_vec();
            let mut records = Vec::new();
            // Blocks of either preset make one stream.
            for (t, preset) in texts.into_iter().zip([super::super::XZ_KEPT, super::super::XZ_OPEN].iter().cycle()) {
                let (block, record) = block(t, *preset)?;
                assert_eq!(block.is_empty(), record.is_none());
                file.extend_from_slice(&block);
                records.extend(record);
            }
            file.extend_from_slice(&tail(&records));
            let mut out = Vec::new();
            // One stream: the plain decoder (which stops after the first stream) reads it all.
            liblzma::read::XzDecoder::new(&file[..]).read_to_end(&mut out)?;
            assert_eq!(out, texts.concat());
            let mut empty = header().to_vec();
            empty.extend_from_slice(&tail(&[]));
            assert_eq!(empty, encode(b"", super::super::XZ_KEPT)?, "no blocks: the encoder's own empty stream");
            Ok(())
        }
    }
}
