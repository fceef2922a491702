//! A repository's APK index key: RSA (at least 2048 bits, 4096 when generated), sealed in the key
//! store. Clients trust it as `/etc/apk/keys/<keyname>`, where `<keyname>` is
//! `<repository>@<fingerprint>.rsa.pub` and the file holds the SPKI PEM public key; the index's
//! signature member names the same file (`.SIGN.RSA.<keyname>`).

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Pkcs1v15Sign, RsaPrivateKey};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::db::Db;
use crate::security::keystore::{KeyStore, KeyStoreError};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("RSA: {0}")]
    Rsa(String),
    #[error("the key has {0} bits; an APK index key needs at least {MIN_BITS}")]
    TooWeak(usize),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

fn rsa_err(e: impl std::fmt::Display) -> KeyError {
    KeyError::Rsa(e.to_string())
}

/// The weakest modulus accepted (apk itself accepts less; 2048 is today's floor).
pub const MIN_BITS: usize = 2048;
/// What a generated key has.
pub const DEFAULT_BITS: usize = 4096;

pub fn key_name(repository_id: i64) -> String {
    format!("apk/{repository_id}/signing")
}

pub fn previous_key_name(repository_id: i64) -> String {
    format!("apk/{repository_id}/signing.previous")
}

/// An APK index key.
pub struct ApkKey {
    key: RsaPrivateKey,
}

impl ApkKey {
    /// A new key; takes seconds (call it off the async executor).
    pub fn generate(bits: usize) -> Result<Self, KeyError> {
        if bits < MIN_BITS {
            return Err(KeyError::TooWeak(bits));
        }
        Ok(Self { key: RsaPrivateKey::new(&mut rand::rngs::OsRng, bits).map_err(rsa_err)? })
    }

    /// A PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1 (`BEGIN RSA PRIVATE KEY`, what
    /// `abuild-keygen` and `openssl genrsa` write), unencrypted.
    pub fn import(pem: &str) -> Result<Self, KeyError> {
        let key = RsaPrivateKey::from_pkcs8_pem(pem.trim())
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem.trim()))
            .map_err(|e| KeyError::Rsa(format!("not an unencrypted RSA private key in PEM: {e}")))?;
        key.validate().map_err(rsa_err)?;
        let bits = key.size() * 8;
        if bits < MIN_BITS {
            return Err(KeyError::TooWeak(bits));
        }
        Ok(Self { key })
    }

    pub fn bits(&self) -> usize {
        self.key.size() * 8
    }

    fn spki_der(&self) -> Result<Vec<u8>, KeyError> {
        Ok(self.key.to_public_key().to_public_key_der().map_err(rsa_err)?.into_vec())
    }

    /// The first 8 bytes of the SHA-256 of the public key (SPKI DER), in hex.
    pub fn fingerprint(&self) -> Result<String, KeyError> {
        Ok(hex::encode(&Sha256::digest(self.spki_der()?)[..8]))
    }

    /// The key file's name: `<repository>@<fingerprint>.rsa.pub`.
    pub fn file_name(&self, repository: &str) -> Result<String, KeyError> {
        Ok(format!("{repository}@{}.rsa.pub", self.fingerprint()?))
    }

    /// The public key as SPKI PEM (`BEGIN PUBLIC KEY`), what `/etc/apk/keys/` holds.
    pub fn public_pem(&self) -> Result<String, KeyError> {
        self.key.to_public_key().to_public_key_pem(LineEnding::LF).map_err(rsa_err)
    }

    fn private_pem(&self) -> Result<String, KeyError> {
        Ok(self.key.to_pkcs8_pem(LineEnding::LF).map_err(rsa_err)?.to_string())
    }

    /// RSA PKCS#1 v1.5 over the SHA-1 of `data` (what `.SIGN.RSA.` carries).
    pub fn sign_sha1(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.key.sign(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(data)).map_err(rsa_err)
    }

    /// The repository's key, generated (RSA-4096) and stored on first need; replicas racing to
    /// create it all end up with the one stored first.
    pub async fn for_repository(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Self, KeyError> {
        let name = key_name(repository_id);
        if let Some(bytes) = keystore.get(db, &name).await? {
            return Self::import(&String::from_utf8_lossy(&bytes));
        }
        let fresh = tokio::task::spawn_blocking(|| Self::generate(DEFAULT_BITS)).await.map_err(rsa_err)??;
        keystore.put_if_absent(db, &name, fresh.private_pem()?.as_bytes()).await?;
        let stored = keystore.get(db, &name).await?.ok_or_else(|| KeyError::Rsa("the index key vanished".into()))?;
        Self::import(&String::from_utf8_lossy(&stored))
    }

    /// The key it replaced, if the repository's key was ever rotated.
    pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<Self>, KeyError> {
        match keystore.get(db, &previous_key_name(repository_id)).await? {
            Some(bytes) => Ok(Some(Self::import(&String::from_utf8_lossy(&bytes))?)),
            None => Ok(None),
        }
    }

    /// Makes this the repository's key; the current one becomes the previous one (its public
    /// key stays served, so clients can move over).
    pub async fn install(&self, db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<(), KeyError> {
        if let Some(current) = keystore.get(db, &key_name(repository_id)).await? {
            keystore.put(db, &previous_key_name(repository_id), &current).await?;
        }
        keystore.put(db, &key_name(repository_id), self.private_pem()?.as_bytes()).await?;
        Ok(())
    }
}

/// The RSA public keys of a PEM text (one or several `BEGIN PUBLIC KEY` blocks, as in
/// `/etc/apk/keys/*.rsa.pub`).
pub fn parse_public_keys(pem: &str) -> Result<Vec<rsa::RsaPublicKey>, KeyError> {
    use rsa::pkcs8::DecodePublicKey;
    const END: &str = "-----END PUBLIC KEY-----";
    let mut keys = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN PUBLIC KEY-----") {
        let Some(end) = rest[start..].find(END) else { break };
        let block = &rest[start..start + end + END.len()];
        keys.push(
            rsa::RsaPublicKey::from_public_key_pem(block)
                .map_err(|e| KeyError::Rsa(format!("not an RSA public key in SPKI PEM: {e}")))?,
        );
        rest = &rest[start + end + END.len()..];
    }
    if keys.is_empty() {
        return Err(KeyError::Rsa(
            "no `-----BEGIN PUBLIC KEY-----` block (the key files of /etc/apk/keys/ hold one)".into(),
        ));
    }
    Ok(keys)
}

/// Checks an `APKINDEX.tar.gz` the way apk does: a `.SIGN.RSA.*` (SHA-1), `.SIGN.RSA256.*` or
/// `.SIGN.RSA512.*` entry of the signature member must verify over the raw index member with
/// one of `keys`. Returns the raw index member.
pub fn verify_index(index: &[u8], keys: &[rsa::RsaPublicKey]) -> Result<Vec<u8>, KeyError> {
    use std::io::Read;
    let members =
        super::index::split_members(index).map_err(|e| KeyError::Rsa(format!("not an APKINDEX.tar.gz: {e}")))?;
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

    #[test]
    fn signs_what_the_public_key_verifies_and_names_itself() -> anyhow::Result<()> {
        let k = ApkKey::generate(MIN_BITS)?;
        let sig = k.sign_sha1(b"index bytes")?;
        let public = rsa::RsaPublicKey::from_public_key_pem(&k.public_pem()?)?;
        public.verify(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(b"index bytes"), &sig)?;
        assert!(public.verify(Pkcs1v15Sign::new::<Sha1>(), &Sha1::digest(b"other bytes"), &sig).is_err());
        assert!(k.public_pem()?.starts_with("-----BEGIN PUBLIC KEY-----\n"));
        let name = k.file_name("alpine-local")?;
        assert!(
            name.starts_with("alpine-local@")
                && name.ends_with(".rsa.pub")
                && name.len() == "alpine-local@".len() + 16 + 8,
            "{name}"
        );
        // Round trip through the stored form, and PKCS#1 import.
        let again = ApkKey::import(&k.private_pem()?)?;
        assert_eq!(again.fingerprint()?, k.fingerprint()?);
        use rsa::pkcs1::EncodeRsaPrivateKey;
        let pkcs1 = k.key.to_pkcs1_pem(LineEnding::LF)?;
        assert_eq!(ApkKey::import(&pkcs1)?.fingerprint()?, k.fingerprint()?);
        Ok(())
    }

    #[test]
    fn weak_and_malformed_keys_are_refused() -> anyhow::Result<()> {
        assert!(matches!(ApkKey::generate(1024), Err(KeyError::TooWeak(1024))));
        let small = RsaPrivateKey::new(&mut rand::rngs::OsRng, 1024)?;
        let pem = small.to_pkcs8_pem(LineEnding::LF)?;
        let e = ApkKey::import(&pem).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("1024 bits"), "{e}");
        assert!(ApkKey::import("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n").is_err());
        Ok(())
    }
}
