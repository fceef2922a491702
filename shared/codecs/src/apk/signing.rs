//! An APK index key: RSA (at least 2048 bits, 4096 when generated). Clients trust it as `/etc/apk/keys/<keyname>`, where `<keyname>` is
//! `<repository>@<fingerprint>.rsa.pub` and the file holds the SPKI PEM public key; the index's
//! signature member names the same file (`.SIGN.RSA.<keyname>`).

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Pkcs1v15Sign, RsaPrivateKey};
use sha1::Sha1;
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("RSA: {0}")]
    Rsa(String),
    #[error("the key has {0} bits; an APK index key needs at least {MIN_BITS}")]
    TooWeak(usize),
}

fn rsa_err(e: impl std::fmt::Display) -> KeyError {
    KeyError::Rsa(e.to_string())
}

/// The weakest modulus accepted (apk itself accepts less; 2048 is today's floor).
pub const MIN_BITS: usize = 2048;
/// What a generated key has.
pub const DEFAULT_BITS: usize = 4096;

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

    /// The private key as PKCS#8 PEM: what the key store seals.
    pub fn private_pem(&self) -> Result<String, KeyError> {
        Ok(self.key.to_pkcs8_pem(LineEnding::LF).map_err(rsa_err)?.to_string())
    }

    /// RSA PKCS#1 v1.5 over the SHA-1 of `data` (what `.SIGN.RSA.` carries).
    pub fn sign_sha1(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.sign_sha1_digest(&Sha1::digest(data))
    }

    /// Signs a SHA-1 digest already computed (of data hashed as it was assembled).
    pub fn sign_sha1_digest(&self, digest: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.key.sign(Pkcs1v15Sign::new::<Sha1>(), digest).map_err(rsa_err)
    }
}

/// The `-----BEGIN PUBLIC KEY-----` blocks of `pem`, in order (what [`parse_public_keys`]
/// parses, one key each).
pub fn public_key_blocks(pem: &str) -> Vec<&str> {
    const END: &str = "-----END PUBLIC KEY-----";
    let mut blocks = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN PUBLIC KEY-----") {
        let Some(end) = rest[start..].find(END) else { break };
        blocks.push(&rest[start..start + end + END.len()]);
        rest = &rest[start + end + END.len()..];
    }
    blocks
}

/// The RSA public keys of a PEM text (one or several `BEGIN PUBLIC KEY` blocks, as in
/// `/etc/apk/keys/*.rsa.pub`).
pub fn parse_public_keys(pem: &str) -> Result<Vec<rsa::RsaPublicKey>, KeyError> {
    use rsa::pkcs8::DecodePublicKey;
    let mut keys = Vec::new();
    for block in public_key_blocks(pem) {
        keys.push(
            rsa::RsaPublicKey::from_public_key_pem(block)
                .map_err(|e| KeyError::Rsa(format!("not an RSA public key in SPKI PEM: {e}")))?,
        );
    }
    if keys.is_empty() {
        return Err(KeyError::Rsa(
            "no `-----BEGIN PUBLIC KEY-----` block (the key files of /etc/apk/keys/ hold one)".into(),
        ));
    }
    Ok(keys)
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
