//! OpenPGP signing of APT `Release` files: `InRelease` (clear-signed) and `Release.gpg`
//! (detached, armored), with Ed25519 keys (RSA-3072/4096 on request), and the verification of an
//! upstream's clear-signed `InRelease`. Where a repository's key is kept is the format's (it is
//! sealed in the key store).

use pgp::composed::{
    ArmorOptions, CleartextSignedMessage, Deserializable, DetachedSignature, EncryptionCaps, KeyType, PublicOrSecret,
    SecretKeyParamsBuilder, SignedPublicKey, SignedSecretKey,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::types::{KeyDetails, Password, PublicParams};
use rsa::traits::PublicKeyParts;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("OpenPGP: {0}")]
    Pgp(String),
}

fn pgp_err(e: impl std::fmt::Display) -> SigningError {
    SigningError::Pgp(e.to_string())
}

/// A repository's signing key.
pub struct Signer {
    key: SignedSecretKey,
}

/// The public keys clients should trust: the current one and, after a rotation, the previous
/// one, in one armored block (one keyring file).
pub fn keyring_armored(current: &Signer, previous: Option<&Signer>) -> Result<String, SigningError> {
    let mut keys = vec![current];
    keys.extend(previous);
    keyring_of(&keys)
}

/// The public keys of `signers`, in order, in one armored block (one keyring file).
pub fn keyring_of(signers: &[&Signer]) -> Result<String, SigningError> {
    let keys: Vec<SignedPublicKey> = signers.iter().map(|s| SignedPublicKey::from(s.key.clone())).collect();
    let mut out = Vec::new();
    pgp::armor::write(&keys, pgp::armor::BlockType::PublicKey, &mut out, None, true).map_err(pgp_err)?;
    String::from_utf8(out).map_err(pgp_err)
}

/// `InRelease` signed by every one of `signers` (a rotation's overlap: a client that trusts any
/// one of the keys verifies it, as with Debian's archive, signed by several keys).
pub fn clearsign_all(signers: &[&Signer], text: &str) -> Result<String, SigningError> {
    let mut signatures = Vec::with_capacity(signers.len());
    for s in signers {
        let one =
            CleartextSignedMessage::sign(rand::rngs::OsRng, text, &*s.key, &Password::empty()).map_err(pgp_err)?;
        signatures.extend(one.signatures().iter().cloned());
    }
    if signatures.is_empty() {
        return Err(SigningError::Pgp("no key to sign with".into()));
    }
    let msg = CleartextSignedMessage::new_many(text, |_| Ok(signatures)).map_err(pgp_err)?;
    msg.to_armored_string(ArmorOptions::default()).map_err(pgp_err)
}

/// `Release.gpg` with a detached signature by every one of `signers`, in one armored block.
pub fn detached_all(signers: &[&Signer], bytes: &[u8]) -> Result<String, SigningError> {
    let mut signatures = Vec::with_capacity(signers.len());
    for s in signers {
        signatures.push(s.detached_signature(bytes)?);
    }
    if signatures.is_empty() {
        return Err(SigningError::Pgp("no key to sign with".into()));
    }
    let mut out = Vec::new();
    pgp::armor::write(&signatures, pgp::armor::BlockType::Signature, &mut out, None, true).map_err(pgp_err)?;
    String::from_utf8(out).map_err(pgp_err)
}

/// The public keys of an armored block (one key or a keyring), e.g. an upstream archive's.
pub fn parse_public_keys(armored: &str) -> Result<Vec<SignedPublicKey>, SigningError> {
    let (keys, _) = PublicOrSecret::from_armor_many(armored.as_bytes()).map_err(pgp_err)?;
    let keys: Vec<SignedPublicKey> = keys
        .map(|k| {
            k.map(|k| match k {
                PublicOrSecret::Public(p) => p,
                PublicOrSecret::Secret(s) => SignedPublicKey::from(s),
            })
        })
        .collect::<Result<_, _>>()
        .map_err(pgp_err)?;
    if keys.is_empty() {
        return Err(SigningError::Pgp("no public key in the armored block".into()));
    }
    Ok(keys)
}

/// The text of a clear-signed message (an `InRelease`), with `\n` line ends, if one of its
/// signatures was made by one of `keys` or their subkeys.
pub fn verify_clearsigned(message: &str, keys: &[SignedPublicKey]) -> Result<String, SigningError> {
    let (msg, _) = CleartextSignedMessage::from_string(message).map_err(pgp_err)?;
    let signed = keys.iter().any(|k| msg.verify(k).is_ok() || k.public_subkeys.iter().any(|sk| msg.verify(sk).is_ok()));
    if !signed {
        return Err(SigningError::Pgp("it carries no valid signature by the configured key".into()));
    }
    Ok(msg.signed_text().replace("\r\n", "\n"))
}

/// The key types a repository can sign with: what apt's default `APT::Key::Assert-Pubkey-Algo`
/// accepts now and in its announced stricter future (`>=rsa3072,ed25519`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    #[default]
    Ed25519,
    Rsa3072,
    Rsa4096,
}

/// The weakest RSA modulus accepted on import.
const MIN_RSA_BITS: usize = 3072;

impl Signer {
    /// A new Ed25519 key that can certify and sign, without expiry.
    pub fn generate(user_id: &str) -> Result<Self, SigningError> {
        Self::generate_with(user_id, Algorithm::Ed25519)
    }

    /// A new key of the given type that can certify and sign, without expiry. RSA generation
    /// takes seconds: call it off the async executor.
    pub fn generate_with(user_id: &str, algorithm: Algorithm) -> Result<Self, SigningError> {
        let key_type = match algorithm {
            Algorithm::Ed25519 => KeyType::Ed25519Legacy,
            Algorithm::Rsa3072 => KeyType::Rsa(3072),
            Algorithm::Rsa4096 => KeyType::Rsa(4096),
        };
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(key_type)
            .can_certify(true)
            .can_sign(true)
            .can_encrypt(EncryptionCaps::None)
            .primary_user_id(user_id.into());
        let params = params.build().map_err(pgp_err)?;
        let key = params.generate(rand::rngs::OsRng).map_err(pgp_err)?;
        Ok(Self { key })
    }

    pub fn from_armored(armored: &str) -> Result<Self, SigningError> {
        let (key, _) = SignedSecretKey::from_string(armored).map_err(pgp_err)?;
        Ok(Self { key })
    }

    /// An imported key: it must parse as an unprotected secret key, be Ed25519 or RSA of at
    /// least 3072 bits (apt refuses weaker keys), and be able to sign.
    pub fn import(armored: &str) -> Result<Self, SigningError> {
        let signer = Self::from_armored(armored)?;
        match signer.key.public_params() {
            PublicParams::EdDSALegacy(_) | PublicParams::Ed25519(_) => {}
            PublicParams::RSA(rsa) if rsa.key.size() * 8 >= MIN_RSA_BITS => {}
            PublicParams::RSA(rsa) => {
                return Err(SigningError::Pgp(format!(
                    "an RSA key of {} bits is too weak; apt expects at least {MIN_RSA_BITS}",
                    rsa.key.size() * 8
                )))
            }
            _ => {
                return Err(SigningError::Pgp(format!(
                    "a {:?} key is not accepted; use Ed25519 or RSA with at least {MIN_RSA_BITS} bits",
                    signer.key.algorithm()
                )))
            }
        }
        signer.detached(b"probe")?;
        Ok(signer)
    }

    /// The key type and size as people name it: `ed25519`, `rsa3072`, `rsa4096`.
    pub fn algorithm_name(&self) -> String {
        match self.key.public_params() {
            PublicParams::RSA(rsa) => format!("rsa{}", rsa.key.size() * 8),
            PublicParams::EdDSALegacy(_) | PublicParams::Ed25519(_) => "ed25519".into(),
            _ => format!("{:?}", self.key.algorithm()).to_lowercase(),
        }
    }

    pub fn to_armored_secret(&self) -> Result<String, SigningError> {
        self.key.to_armored_string(ArmorOptions::default()).map_err(pgp_err)
    }

    /// The armored public key, as clients put it in `/etc/apt/keyrings/`.
    pub fn public_armored(&self) -> Result<String, SigningError> {
        SignedPublicKey::from(self.key.clone()).to_armored_string(ArmorOptions::default()).map_err(pgp_err)
    }

    pub fn fingerprint(&self) -> String {
        hex::encode_upper(self.key.fingerprint().as_bytes())
    }

    /// `InRelease`: the text clear-signed with SHA-512.
    pub fn clearsign(&self, text: &str) -> Result<String, SigningError> {
        let msg =
            CleartextSignedMessage::sign(rand::rngs::OsRng, text, &*self.key, &Password::empty()).map_err(pgp_err)?;
        msg.to_armored_string(ArmorOptions::default()).map_err(pgp_err)
    }

    /// `Release.gpg`: a detached SHA-512 signature over the exact bytes.
    pub fn detached(&self, bytes: &[u8]) -> Result<String, SigningError> {
        self.detached_signature(bytes)?.to_armored_string(ArmorOptions::default()).map_err(pgp_err)
    }

    fn detached_signature(&self, bytes: &[u8]) -> Result<DetachedSignature, SigningError> {
        DetachedSignature::sign_binary_data(
            rand::rngs::OsRng,
            &*self.key,
            &Password::empty(),
            HashAlgorithm::Sha512,
            bytes,
        )
        .map_err(pgp_err)
    }

    /// When the key expires (seconds since the epoch), as its newest self-signature says (a
    /// later one may extend or remove the expiry); `None`: never.
    pub fn expires_at(&self) -> Option<i64> {
        let created = i64::from(self.key.created_at().as_secs());
        let newest = self
            .key
            .details
            .direct_signatures
            .iter()
            .chain(self.key.details.users.iter().flat_map(|u| u.signatures.iter()))
            .max_by_key(|s| s.created().map(|t| t.as_secs()))?;
        let lifetime = newest.key_expiration_time().map(|d| i64::from(d.as_secs())).filter(|secs| *secs > 0)?;
        Some(created.saturating_add(lifetime))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_in_both_forms() -> Result<(), SigningError> {
        let s = Signer::generate("test <test@example.org>")?;
        let inrelease = s.clearsign("Origin: x\nSuite: stable\n")?;
        assert!(inrelease.starts_with("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA"), "{inrelease}");
        assert!(!inrelease.contains("Hash: SHA1\n"));
        assert!(inrelease.contains("Origin: x\nSuite: stable\n"));
        let detached = s.detached(b"Origin: x\n")?;
        assert!(detached.starts_with("-----BEGIN PGP SIGNATURE-----"), "{detached}");
        let public = s.public_armored()?;
        assert!(public.starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----"));
        let again = Signer::from_armored(&s.to_armored_secret()?)?;
        assert_eq!(again.fingerprint(), s.fingerprint());
        assert_eq!(s.algorithm_name(), "ed25519");
        Ok(())
    }

    #[test]
    fn clearsigned_text_verifies_only_with_its_key() -> Result<(), SigningError> {
        let s = Signer::generate("a <a@example.org>")?;
        let other = Signer::generate("b <b@example.org>")?;
        let text = "Origin: x\nSuite: stable\n-dash line\n";
        let signed = s.clearsign(text)?;
        let keyring = keyring_armored(&other, Some(&s))?;
        assert_eq!(verify_clearsigned(&signed, &parse_public_keys(&keyring)?)?.trim_end(), text.trim_end());
        let wrong = parse_public_keys(&other.public_armored()?)?;
        assert!(verify_clearsigned(&signed, &wrong).is_err());
        let tampered = signed.replace("Suite: stable", "Suite: stab1e");
        assert!(verify_clearsigned(&tampered, &parse_public_keys(&keyring)?).is_err());
        assert!(parse_public_keys("not a key").is_err());
        Ok(())
    }

    #[test]
    fn rsa_3072_signs_and_weak_rsa_is_refused_on_import() -> Result<(), SigningError> {
        let s = Signer::generate_with("rsa <rsa@example.org>", Algorithm::Rsa3072)?;
        assert_eq!(s.algorithm_name(), "rsa3072");
        assert!(s.clearsign("Origin: x\n")?.contains("-----BEGIN PGP SIGNATURE-----"));
        let imported = Signer::import(&s.to_armored_secret()?)?;
        assert_eq!(imported.fingerprint(), s.fingerprint());
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Rsa(2048))
            .can_certify(true)
            .can_sign(true)
            .can_encrypt(EncryptionCaps::None)
            .primary_user_id("weak <weak@example.org>".into());
        let weak = params.build().map_err(pgp_err)?.generate(rand::rngs::OsRng).map_err(pgp_err)?;
        let weak = weak.to_armored_string(ArmorOptions::default()).map_err(pgp_err)?;
        match Signer::import(&weak) {
            Err(SigningError::Pgp(m)) => assert!(m.contains("RSA key of 2048 bits is too weak"), "{m}"),
            other => panic!("a 2048-bit key was accepted: {:?}", other.map(|s| s.fingerprint())),
        }
        Ok(())
    }
}
