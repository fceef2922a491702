//! `APKINDEX.tar.gz`: two gzip members. The second holds a tar (ustar headers, with end blocks)
//! of `DESCRIPTION` and `APKINDEX`; the first a tar of `.SIGN.RSA.<keyname>` **without** end
//! blocks, the RSA PKCS#1 v1.5 signature over the SHA-1 of the second member's raw bytes.

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
    let sig = key.sign_sha1(index_gz)?;
    let h = ustar(&format!(".SIGN.RSA.{key_file}"), sig.len(), mtime)?;
    let mut tar = Vec::with_capacity(512 + sig.len() + 512);
    tar.extend_from_slice(h.as_bytes());
    tar.extend_from_slice(&sig);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
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
    let index = index_member(description, apkindex, mtime)?;
    let mut out = signature_member(&index, key, key_file, mtime)?;
    out.extend_from_slice(&index);
    Ok(out)
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
        let ok =
            |scheme: Pkcs1v15Sign, digest: &[u8]| keys.iter().any(|k| k.verify(scheme.clone(), digest, &sig).is_ok());
        let verified = if name.starts_with(".SIGN.RSA256.") {
            ok(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(&index_member))
        } else if name.starts_with(".SIGN.RSA512.") {
            ok(Pkcs1v15Sign::new::<sha2::Sha512>(), &sha2::Sha512::digest(&index_member))
        } else if name.starts_with(".SIGN.RSA.") {
            ok(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(&index_member))
        } else {
            false
        };
        if verified {
            return Ok(index_member);
        }
    }
    Err(KeyError::Rsa("no signature in the index verifies with the configured key".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::pkcs8::DecodePublicKey;
    use sha1::{Digest, Sha1};
    use std::io::Read;

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
        Ok(())
    }
}
