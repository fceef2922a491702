//! `APKINDEX.tar.gz`: two gzip members. The second holds a tar (ustar headers, with end blocks)
//! of `DESCRIPTION` and `APKINDEX`; the first a tar of `.SIGN.RSA.<keyname>` **without** end
//! blocks, the RSA PKCS#1 v1.5 signature over the SHA-1 of the second member's raw bytes.

use std::borrow::Borrow;
use std::io::Write as _;

use super::signing::{ApkKey, KeyError};

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("writing the index: {0}")]
    Io(#[from] std::io::Error),
}

fn ustar(path: &str, size: usize, mtime: u64) -> Result<tar::Header, std::io::Error> {
    let mut h = tar::Header::new_ustar();
    h.set_path(path)?;
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size as u64);
    h.set_mode(0o644);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h.set_cksum();
    Ok(h)
}

fn gzip(data: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 4 + 64), flate2::Compression::new(6));
    e.write_all(data)?;
    e.finish()
}

/// The index member: `DESCRIPTION` and `APKINDEX` (the records, each ending with a blank line).
pub fn index_member(description: &str, apkindex: &str, mtime: u64) -> Result<Vec<u8>, IndexError> {
    let mut b = tar::Builder::new(Vec::with_capacity(apkindex.len() + 4096));
    for (name, body) in [("DESCRIPTION", description.as_bytes()), ("APKINDEX", apkindex.as_bytes())] {
        let h = ustar(name, body.len(), mtime)?;
        b.append(&h, body)?;
    }
    Ok(gzip(&b.into_inner()?)?)
}

/// The signature member for an index member.
pub fn signature_member(index_gz: &[u8], key: &ApkKey, key_file: &str, mtime: u64) -> Result<Vec<u8>, IndexError> {
    signature_member_all(index_gz, &[(key, key_file)], mtime)
}

/// The signature member for an index member, with a signature by each of `keys` (a key and
/// the file name clients keep it under): apk uses the first whose key it trusts and skips the
/// others (a rotation's overlap).
pub fn signature_member_all<K: Borrow<ApkKey>, F: AsRef<str>>(
    index_gz: &[u8],
    keys: &[(K, F)],
    mtime: u64,
) -> Result<Vec<u8>, IndexError> {
    use sha1::{Digest, Sha1};
    signature_member_of_digest_all(&Sha1::digest(index_gz), keys, mtime)
}

fn signature_tar(signatures: &[(Vec<u8>, &str)], mtime: u64) -> Result<Vec<u8>, IndexError> {
    let mut tar = Vec::with_capacity(signatures.iter().map(|(s, _)| 1024 + s.len()).sum());
    for (sig, key_file) in signatures {
        let h = ustar(&format!(".SIGN.RSA.{key_file}"), sig.len(), mtime)?;
        tar.extend_from_slice(h.as_bytes());
        tar.extend_from_slice(sig);
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    // No end-of-archive blocks: apk reads the two members as one tar stream.
    Ok(gzip(&tar)?)
}

/// The whole signed `APKINDEX.tar.gz`.
pub fn signed_index(
    description: &str,
    apkindex: &str,
    key: &ApkKey,
    key_file: &str,
    mtime: u64,
) -> Result<Vec<u8>, IndexError> {
    signed_index_all(description, apkindex, &[(key, key_file)], mtime)
}

/// The whole signed `APKINDEX.tar.gz`, signed by each of `keys`.
pub fn signed_index_all<K: Borrow<ApkKey>, F: AsRef<str>>(
    description: &str,
    apkindex: &str,
    keys: &[(K, F)],
    mtime: u64,
) -> Result<Vec<u8>, IndexError> {
    let index = index_member(description, apkindex, mtime)?;
    let mut out = signature_member_all(&index, keys, mtime)?;
    out.extend_from_slice(&index);
    Ok(out)
}

/// An index member built from pieces (#22): one gzip member whose deflate stream is the pieces'
/// streams one after another, each compressed on its own and ending on a byte boundary (a sync
/// flush), the last one final. A publication that changes a few records compresses again only
/// their piece, the tar head (whose `APKINDEX` header holds the size) and the tail; apk reads one
/// ordinary gzip member. The tar stream is [`index_head`], the records, [`index_tail`].
#[derive(Debug, Clone)]
pub struct Piece {
    /// Raw deflate data.
    pub bytes: Vec<u8>,
    /// CRC-32 and length of the uncompressed data.
    pub crc: u32,
    pub len: u64,
}

/// `data` deflated on its own (level 6, as the whole member would be): ending with a sync flush,
/// or, when `last`, with the final block.
pub fn deflate_piece(data: &[u8], last: bool) -> Result<Piece, std::io::Error> {
    use flate2::{Compress, Compression, FlushCompress, Status};
    let mut c = Compress::new(Compression::new(6), false);
    let mut out = Vec::with_capacity(data.len() / 3 + 64);
    let flush = if last { FlushCompress::Finish } else { FlushCompress::Sync };
    loop {
        let consumed = usize::try_from(c.total_in()).unwrap_or(usize::MAX);
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(4096));
        }
        let status =
            c.compress_vec(&data[consumed.min(data.len())..], &mut out, flush).map_err(std::io::Error::other)?;
        let done_in = c.total_in() == data.len() as u64;
        match status {
            Status::StreamEnd => break,
            // A sync flush is complete once all input is in and the output was not filled up.
            Status::Ok | Status::BufError if !last && done_in && out.len() < out.capacity() => break,
            Status::Ok | Status::BufError => {}
        }
    }
    let mut h = crc32fast::Hasher::new();
    h.update(data);
    Ok(Piece { bytes: out, crc: h.finalize(), len: data.len() as u64 })
}

/// The gzip member header of an assembled index member (as [`gzip`] writes it).
pub const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// The gzip trailer after `pieces` (their `(crc, len)` in order): the CRC-32 and the length of
/// the whole uncompressed data.
pub fn gzip_trailer(pieces: impl IntoIterator<Item = (u32, u64)>) -> [u8; 8] {
    let mut all = crc32fast::Hasher::new();
    let mut total = 0u64;
    for (crc, len) in pieces {
        all.combine(&crc32fast::Hasher::new_with_initial_len(crc, len));
        total += len;
    }
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&all.finalize().to_le_bytes());
    out[4..].copy_from_slice(&(total as u32).to_le_bytes());
    out
}

/// The tar stream of an index member up to its records: `DESCRIPTION` and the `APKINDEX`
/// header for records of `apkindex_len` bytes.
pub fn index_head(description: &str, apkindex_len: u64, mtime: u64) -> Result<Vec<u8>, std::io::Error> {
    let d = ustar("DESCRIPTION", description.len(), mtime)?;
    let mut out = Vec::with_capacity(1536 + description.len());
    out.extend_from_slice(d.as_bytes());
    out.extend_from_slice(description.as_bytes());
    out.resize(out.len().div_ceil(512) * 512, 0);
    let a = ustar("APKINDEX", usize::try_from(apkindex_len).unwrap_or(usize::MAX), mtime)?;
    out.extend_from_slice(a.as_bytes());
    Ok(out)
}

/// The tar stream of an index member after `apkindex_len` bytes of records: their padding and
/// the end-of-archive blocks.
pub fn index_tail(apkindex_len: u64) -> Vec<u8> {
    let pad = (512 - apkindex_len % 512) % 512;
    vec![0u8; usize::try_from(pad).unwrap_or(0) + 1024]
}

/// The signature member for an index member whose SHA-1 is `sha1`.
pub fn signature_member_of_digest(
    sha1: &[u8],
    key: &ApkKey,
    key_file: &str,
    mtime: u64,
) -> Result<Vec<u8>, IndexError> {
    signature_member_of_digest_all(sha1, &[(key, key_file)], mtime)
}

/// [`signature_member_all`] for an index member whose SHA-1 is `sha1`.
pub fn signature_member_of_digest_all<K: Borrow<ApkKey>, F: AsRef<str>>(
    sha1: &[u8],
    keys: &[(K, F)],
    mtime: u64,
) -> Result<Vec<u8>, IndexError> {
    let mut signatures = Vec::with_capacity(keys.len());
    for (key, key_file) in keys {
        signatures.push((key.borrow().sign_sha1_digest(sha1)?, key_file.as_ref()));
    }
    signature_tar(&signatures, mtime)
}

/// Splits an `APKINDEX.tar.gz` into its raw gzip members (for checks and group merges).
pub fn split_members(bytes: &[u8]) -> Result<Vec<Vec<u8>>, std::io::Error> {
    use std::io::Read;
    let mut rest = bytes;
    let mut members = Vec::new();
    while !rest.is_empty() {
        let before = rest.len();
        {
            let mut d = flate2::bufread::GzDecoder::new(&mut rest);
            std::io::copy(&mut (&mut d).take(64 << 20), &mut std::io::sink())?;
        }
        let used = before - rest.len();
        if used == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a gzip member"));
        }
        let start = bytes.len() - before;
        members.push(bytes[start..start + used].to_vec());
    }
    Ok(members)
}

/// Largest APKINDEX text read from an index (Alpine's biggest is a few MiB).
const MAX_APKINDEX: u64 = 256 << 20;

/// The `APKINDEX` text of a raw index member (a gzip'd tar).
pub fn index_member_text(member: &[u8]) -> Result<String, std::io::Error> {
    use std::io::Read;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(member).take(MAX_APKINDEX));
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entry.path_bytes().as_ref() == b"APKINDEX" {
            let mut text = String::new();
            entry.read_to_string(&mut text)?;
            return Ok(text);
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "the index holds no APKINDEX"))
}

/// The `APKINDEX` text of a whole `APKINDEX.tar.gz` (its last member).
pub fn apkindex_text(index: &[u8]) -> Result<String, std::io::Error> {
    let members = split_members(index)?;
    let last = members.last().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "empty index"))?;
    index_member_text(last)
}

/// Checks an `APKINDEX.tar.gz` the way apk does: a `.SIGN.RSA.*` (SHA-1), `.SIGN.RSA256.*` or
/// `.SIGN.RSA512.*` entry of the signature member must verify over the raw index member with
/// one of `keys`. Returns the raw index member.
pub fn verify_index(index: &[u8], keys: &[rsa::RsaPublicKey]) -> Result<Vec<u8>, KeyError> {
    verified_by(index, keys).map(|(member, _, _)| member)
}

/// [`verify_index`], saying which signature verified: the key file name it names (after
/// `.SIGN.RSA.`, `.SIGN.RSA256.` or `.SIGN.RSA512.`: what apk looks up in `/etc/apk/keys/`) and
/// the index of the key in `keys`.
pub fn index_signer(index: &[u8], keys: &[rsa::RsaPublicKey]) -> Result<(String, usize), KeyError> {
    let (_, name, key) = verified_by(index, keys)?;
    // The name is outside what the signature covers: it becomes a file name on clients and a
    // word in a shell line, so only a key file name's characters pass.
    let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || b"@._+-".contains(&b));
    if name.is_empty() || name.len() > 255 || name.starts_with('.') || !plain {
        return Err(KeyError::Rsa(format!("the signature names its key {name:?}, which is no key file name")));
    }
    Ok((name, key))
}

fn verified_by(index: &[u8], keys: &[rsa::RsaPublicKey]) -> Result<(Vec<u8>, String, usize), KeyError> {
    use rsa::Pkcs1v15Sign;
    use sha1::Sha1;
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let members = split_members(index).map_err(|e| KeyError::Rsa(format!("not an APKINDEX.tar.gz: {e}")))?;
    let [sig_member, index_member] = <[Vec<u8>; 2]>::try_from(members)
        .map_err(|m| KeyError::Rsa(format!("an APKINDEX.tar.gz has 2 gzip members, this one {}", m.len())))?;
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(&sig_member[..])
        .take(1 << 20)
        .read_to_end(&mut tar)
        .map_err(|e| KeyError::Rsa(format!("the signature member: {e}")))?;
    let mut archive = tar::Archive::new(&tar[..]);
    let entries = archive.entries().map_err(|e| KeyError::Rsa(e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| KeyError::Rsa(e.to_string()))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let mut sig = Vec::new();
        entry.read_to_end(&mut sig).map_err(|e| KeyError::Rsa(e.to_string()))?;
        let ok = |scheme: Pkcs1v15Sign, digest: &[u8]| {
            keys.iter().position(|k| k.verify(scheme.clone(), digest, &sig).is_ok())
        };
        let (verified, file) = if let Some(file) = name.strip_prefix(".SIGN.RSA256.") {
            (ok(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(&index_member)), file)
        } else if let Some(file) = name.strip_prefix(".SIGN.RSA512.") {
            (ok(Pkcs1v15Sign::new::<sha2::Sha512>(), &sha2::Sha512::digest(&index_member)), file)
        } else if let Some(file) = name.strip_prefix(".SIGN.RSA.") {
            (ok(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(&index_member)), file)
        } else {
            (None, "")
        };
        if let Some(key) = verified {
            return Ok((index_member, file.to_string(), key));
        }
    }
    Err(KeyError::Rsa("no signature in the index verifies with the configured key".into()))
}

/// One `APKINDEX` record as apk (2.14 and 3) reads it: every line `X:value`; `P` and `V` present
/// and valid, `C` a checksum; only the fields apk knows among upper-case letters (an unknown one
/// makes the package uninstallable); numbers where apk reads numbers; `D`, `p`, `i`, `r` lists
/// of dependency tokens apk parses.
pub fn check_record(record: &str) -> Result<(), String> {
    use super::package::{check_dependency, valid_name, valid_version};
    let (mut name, mut version, mut checksum) = (None, None, None);
    for line in record.split('\n').filter(|l| !l.is_empty()) {
        let b = line.as_bytes();
        if b.len() < 2 || b[1] != b':' || !b[0].is_ascii_alphabetic() {
            return Err(format!("the line {:?} is not `X:value`", line.chars().take(60).collect::<String>()));
        }
        if line.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!("the {} line holds a control character", line.chars().next().unwrap_or('?')));
        }
        let value = &line[2..];
        let number = |what: &str| {
            if value.is_empty() || value.len() > 20 || !value.bytes().all(|b| b.is_ascii_digit()) {
                Err(format!("{what} {value:?} is not a number"))
            } else {
                Ok(())
            }
        };
        match b[0] {
            b'P' => name = Some(value),
            b'V' => version = Some(value),
            b'C' => checksum = Some(value),
            b'S' => number("S (size)")?,
            b'I' => number("I (installed size)")?,
            b't' => number("t (build date)")?,
            b'k' => number("k (provider priority)")?,
            b'D' | b'p' | b'i' | b'r' => {
                let key = match b[0] {
                    b'D' => "depend",
                    b'p' => "provides",
                    b'i' => "install_if",
                    _ => "replaces",
                };
                for token in value.split(' ') {
                    if token.is_empty() {
                        return Err(format!("{key}: an empty token (two spaces, or one at an end)"));
                    }
                    check_dependency(key, token)?;
                }
            }
            b'A' | b'T' | b'U' | b'L' | b'o' | b'm' | b'c' => {}
            c if c.is_ascii_uppercase() => {
                return Err(format!("the field {} is not one apk knows; apk would not install the package", c as char))
            }
            _ => {}
        }
    }
    let name = name.ok_or("no P: line")?;
    if !valid_name(name) {
        return Err(format!("P {name:?} is not a package name"));
    }
    let version = version.ok_or("no V: line")?;
    if !valid_version(version) {
        return Err(format!("V {version:?} is not an apk version"));
    }
    if checksum.is_none_or(|c| c.len() < 20) {
        return Err("no C: checksum (Q1…)".into());
    }
    Ok(())
}

/// The records of an `APKINDEX` text as apk reads them: how many, or the first it could not
/// read — named `name-version` where it has them — and why.
pub fn check_records(text: &str) -> Result<usize, (String, String)> {
    let mut count = 0;
    for record in text.split("\n\n").map(|r| r.trim_matches('\n')).filter(|r| !r.is_empty()) {
        count += 1;
        if let Err(why) = check_record(record) {
            let field = |k: &str| record.lines().find_map(|l| l.strip_prefix(k));
            let who = match (field("P:"), field("V:")) {
                (Some(p), Some(v)) => format!("{p}-{v}"),
                _ => format!("record {count}"),
            };
            return Err((who, why));
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::pkcs8::DecodePublicKey;
    use sha1::{Digest, Sha1};
    use std::io::Read;

    #[test]
    fn an_index_member_of_pieces_is_the_index_member_apk_reads() -> anyhow::Result<()> {
        let key = ApkKey::generate(super::super::signing::MIN_BITS)?;
        let file = key.file_name("repo")?;
        let chunks: Vec<String> = (0..3)
            .map(|c| (0..700).map(|i| format!("C:Q1x{c}{i}=\nP:p{c}-{i}\nV:1-r0\nA:x86_64\nS:{i}\n\n")).collect())
            .collect();
        let records: String = chunks.concat();
        let len = records.len() as u64;
        let mut pieces = vec![deflate_piece(&index_head("repo v3.20/main", len, 1_700_000_000)?, false)?];
        for c in &chunks {
            pieces.push(deflate_piece(c.as_bytes(), false)?);
        }
        pieces.push(deflate_piece(&index_tail(len), true)?);
        let mut member = GZIP_HEADER.to_vec();
        for p in &pieces {
            member.extend_from_slice(&p.bytes);
        }
        member.extend_from_slice(&gzip_trailer(pieces.iter().map(|p| (p.crc, p.len))));
        // Byte for byte the tar the whole-text writer makes, in one gzip member.
        let whole = index_member("repo v3.20/main", &records, 1_700_000_000)?;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        flate2::read::GzDecoder::new(&member[..]).read_to_end(&mut a)?;
        flate2::read::GzDecoder::new(&whole[..]).read_to_end(&mut b)?;
        assert!(a == b, "the same tar");
        let sig = signature_member_of_digest(&Sha1::digest(&member), &key, &file, 1_700_000_000)?;
        let mut signed = sig;
        signed.extend_from_slice(&member);
        assert_eq!(split_members(&signed)?.len(), 2, "one signature member, one index member");
        let public = rsa::RsaPublicKey::from_public_key_pem(&key.public_pem()?)?;
        assert_eq!(verify_index(&signed, &[public])?, member);
        assert_eq!(apkindex_text(&signed)?, records);
        Ok(())
    }

    #[test]
    fn the_signature_covers_the_raw_index_member_and_has_no_end_blocks() -> anyhow::Result<()> {
        let key = ApkKey::generate(super::super::signing::MIN_BITS)?;
        let file = key.file_name("repo")?;
        let records = "C:Q1abc=\nP:hello\nV:1-r0\nA:x86_64\nS:10\n\n";
        let out = signed_index("repo v3.20/main", records, &key, &file, 1_700_000_000)?;
        let members = split_members(&out)?;
        assert_eq!(members.len(), 2);
        assert_eq!(members[0].len() + members[1].len(), out.len());

        let mut sig_tar = Vec::new();
        flate2::read::GzDecoder::new(&members[0][..]).read_to_end(&mut sig_tar)?;
        assert_eq!(sig_tar.len(), 1024, "one header block and one data block: no end blocks");
        assert_eq!(&sig_tar[257..263], b"ustar\0");
        let name = String::from_utf8_lossy(&sig_tar[..100]).trim_end_matches('\0').to_string();
        assert_eq!(name, format!(".SIGN.RSA.{file}"));
        let sig = &sig_tar[512..512 + key.bits() / 8];
        let public = rsa::RsaPublicKey::from_public_key_pem(&key.public_pem()?)?;
        public.verify(rsa::Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(&members[1]), sig)?;

        let mut index_tar = Vec::new();
        flate2::read::GzDecoder::new(&members[1][..]).read_to_end(&mut index_tar)?;
        let mut a = tar::Archive::new(&index_tar[..]);
        let mut found = Vec::new();
        for e in a.entries()? {
            let mut e = e?;
            let mut body = String::new();
            e.read_to_string(&mut body)?;
            found.push((e.path()?.display().to_string(), body));
        }
        assert_eq!(found, vec![("DESCRIPTION".into(), "repo v3.20/main".into()), ("APKINDEX".into(), records.into())]);
        assert!(index_tar.ends_with(&[0u8; 1024]), "the index tar keeps its end blocks");
        assert_eq!(apkindex_text(&out)?, records);
        // Verified as apk verifies it; another key is refused.
        let keys = super::super::signing::parse_public_keys(&key.public_pem()?)?;
        assert_eq!(verify_index(&out, &keys)?, members[1]);
        let stranger = ApkKey::generate(super::super::signing::MIN_BITS)?;
        let other = super::super::signing::parse_public_keys(&stranger.public_pem()?)?;
        assert!(verify_index(&out, &other).is_err());
        let mut tampered = out.clone();
        let n = tampered.len();
        tampered[n - 30] ^= 1;
        assert!(verify_index(&tampered, &keys).is_err());
        // Which key signed, by which name: the second of two keys, under its file name.
        let both =
            super::super::signing::parse_public_keys(&format!("{}{}", stranger.public_pem()?, key.public_pem()?))?;
        assert_eq!(index_signer(&out, &both)?, (file.clone(), 1));
        // A name the signature does not cover, that is no key file name, is refused (it would
        // become a path on clients and a word in a pasted shell line).
        for bad in ["x;sh", "dir/key.rsa.pub", ".hidden"] {
            let renamed = signed_index("repo v3.20/main", records, &key, bad, 1_700_000_000)?;
            assert!(verify_index(&renamed, &keys).is_ok(), "{bad}: the signature still verifies");
            let refused = index_signer(&renamed, &keys).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(refused.contains("which is no key file name"), "{bad}: {refused}");
        }
        Ok(())
    }

    #[test]
    fn records_as_apk_reads_them() {
        let good = "C:Q1abcdefghijklmnopqrstuvwxyz0=\nP:hello\nV:2.12-r1\nA:x86_64\nS:1234\nI:4096\nT:a thing\nt:1700000000\nD:so:libc.musl-x86_64.so.1 busybox>=1.36\np:cmd:hello=2.12-r1\n";
        assert_eq!(check_records(&format!("{good}\n{good}")), Ok(2));
        for (bad, why) in [
            ("D:foo>=\n", "not an apk version"),
            ("D:a  b\n", "empty token"),
            ("p:foo<2\n", "operator"),
            ("S:big\n", "not a number"),
            ("Z:new\n", "not one apk knows"),
            ("garbage\n", "not `X:value`"),
        ] {
            let (who, e) = check_records(&format!("{good}{bad}")).err().unwrap_or_default();
            assert_eq!(who, "hello-2.12-r1", "{bad:?}");
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(check_records("P:x1\nV:1\n").is_err(), "no checksum");
        assert!(check_records("C:Q1abcdefghijklmnopqrstuvwxyz0=\nV:1\n").is_err(), "no name");
    }
}
