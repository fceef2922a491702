//! Every asset's SHA-1 and MD5, as Nexus gives them beside the SHA-256, computed from the blob
//! when the format does not say them: by the worker, off the upload's path (MD5 runs at about
//! 500 MB/s on one core, a third of an upload's server CPU — `packyard_codecs::md5lanes`), a
//! moment after the upload or the proxy's fetch. An asset's row has them once this has run.

use std::io::BufRead;

use packyard_store::blobs::Sha256Hex;
use sha1::Digest as _;

use crate::services::Services;

/// Blobs digested per round.
const ROUND: i64 = 32;

/// Digests the blobs of assets without a SHA-1 after `after` in digest order (at most one
/// round's), moving `after` on; returns how many were digested. Past the last, `after` starts
/// again from the first: a blob that could not be read (logged) is tried again then.
pub async fn fill(services: &Services, after: &mut String) -> Result<usize, packyard_store::db::DbError> {
    let blobs = services.db.assets_without_sha1(ROUND, after).await?;
    if blobs.is_empty() {
        after.clear();
        return Ok(0);
    }
    let mut done = 0;
    for sha256 in blobs {
        after.clone_from(&sha256);
        let digested = match Sha256Hex::parse(&sha256) {
            Ok(digest) => crate::hosted::read_back(services, &digest, hash).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match digested.and_then(|r| r.map_err(|e| e.to_string())) {
            Ok((sha1, md5)) => {
                services.db.set_asset_digests(&sha256, &sha1, &md5).await?;
                done += 1;
            }
            Err(e) => {
                tracing::warn!(blob = %sha256, error = %e, "cannot read a blob for its SHA-1 and MD5; it is tried again on the next pass");
            }
        }
    }
    Ok(done)
}

/// SHA-1 and MD5 of everything `r` reads, in hex.
fn hash(r: &mut dyn BufRead) -> std::io::Result<(String, String)> {
    let (mut sha1, mut md5) = (sha1::Sha1::new(), md5::Md5::new());
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        sha1.update(buf);
        md5.update(buf);
        let n = buf.len();
        r.consume(n);
    }
    Ok((hex::encode(sha1.finalize()), hex::encode(md5.finalize())))
}

#[cfg(test)]
mod tests {
    #[test]
    fn digests_of_known_bytes() -> std::io::Result<()> {
        let mut r: &[u8] = b"abc";
        let (sha1, md5) = super::hash(&mut r)?;
        assert_eq!(sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(md5, "900150983cd24fb0d6963f7d28e17f72");
        Ok(())
    }
}
