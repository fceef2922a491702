//! Secrets at rest: private keys are sealed with ChaCha20-Poly1305 under a key derived (HKDF-SHA256)
//! from `security.secret`, with the secret's name as associated data so a ciphertext cannot be
//! moved to another name. Nothing here is ever returned by an API.

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use sha2::Sha256;

use packyard_store::db::{Db, DbError};

#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("secret {0} cannot be decrypted: security.secret differs from the one it was sealed with, or the row is corrupt")]
    Undecryptable(String),
    #[error("encryption failed")]
    Seal,
    /// A key that should be there is not (or could not be made).
    #[error("{0}")]
    Missing(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

pub struct KeyStore {
    cipher: ChaCha20Poly1305,
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl KeyStore {
    pub fn new(secret: &str) -> Self {
        let hk = hkdf::Hkdf::<Sha256>::new(Some(b"packyard keystore"), secret.as_bytes());
        let mut key = [0u8; 32];
        let _ = hk.expand(b"chacha20poly1305 v1", &mut key);
        Self { cipher: ChaCha20Poly1305::new(Key::from_slice(&key)) }
    }

    /// (nonce, ciphertext), both base64.
    pub fn seal(&self, name: &str, plaintext: &[u8]) -> Result<(String, String), KeyStoreError> {
        let nonce_bytes: [u8; 12] = rand::random();
        let ct = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce_bytes), Payload { msg: plaintext, aad: name.as_bytes() })
            .map_err(|_| KeyStoreError::Seal)?;
        Ok((b64().encode(nonce_bytes), b64().encode(ct)))
    }

    pub fn open(&self, name: &str, nonce: &str, ciphertext: &str) -> Result<Vec<u8>, KeyStoreError> {
        let bad = || KeyStoreError::Undecryptable(name.to_string());
        let nonce = b64().decode(nonce).map_err(|_| bad())?;
        let ct = b64().decode(ciphertext).map_err(|_| bad())?;
        if nonce.len() != 12 {
            return Err(bad());
        }
        self.cipher.decrypt(Nonce::from_slice(&nonce), Payload { msg: &ct, aad: name.as_bytes() }).map_err(|_| bad())
    }

    pub async fn put(&self, db: &Db, name: &str, plaintext: &[u8]) -> Result<(), KeyStoreError> {
        let (nonce, ct) = self.seal(name, plaintext)?;
        db.put_secret(name, &nonce, &ct).await?;
        Ok(())
    }

    /// Stores a secret unless one of that name exists; true when this one was stored.
    pub async fn put_if_absent(&self, db: &Db, name: &str, plaintext: &[u8]) -> Result<bool, KeyStoreError> {
        let (nonce, ct) = self.seal(name, plaintext)?;
        Ok(db.insert_secret_if_absent(name, &nonce, &ct).await?)
    }

    /// Removes a secret; whether there was one.
    pub async fn delete(&self, db: &Db, name: &str) -> Result<bool, KeyStoreError> {
        Ok(db.delete_secret(name).await?)
    }

    pub async fn get(&self, db: &Db, name: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        match db.get_secret(name).await? {
            Some((nonce, ct)) => Ok(Some(self.open(name, &nonce, &ct)?)),
            None => Ok(None),
        }
    }
}

/// A repository's signing key in the key store, whatever the format: the current one under
/// `<format>/<repository id>/signing` (made on first need; replicas racing to make it all end up
/// with the one stored first) and, after a rotation, the one it replaced under
/// `…/signing.previous`, whose public half stays offered to clients. Keys are kept as the bytes
/// the format's codec writes and reads.
pub struct RepositoryKeys<'a> {
    pub db: &'a Db,
    pub keystore: &'a KeyStore,
    pub format: &'static str,
    pub repository_id: i64,
}

/// Why a repository's key is not to be had: its format's codec refused to make, read or write
/// it, or the key store failed.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryKeyError {
    #[error(transparent)]
    Key(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

impl RepositoryKeyError {
    /// The codec's error.
    pub fn key(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Key(Box::new(e))
    }
}

impl<'a> RepositoryKeys<'a> {
    pub fn new(db: &'a Db, keystore: &'a KeyStore, format: &'static str, repository_id: i64) -> Self {
        Self { db, keystore, format, repository_id }
    }
    fn name(&self) -> String {
        format!("{}/{}/signing", self.format, self.repository_id)
    }

    fn previous_name(&self) -> String {
        format!("{}/{}/signing.previous", self.format, self.repository_id)
    }

    /// The current key; `make` (run off the executor: key generation is slow) creates it when
    /// there is none.
    pub async fn current<E, F>(&self, make: F) -> Result<Vec<u8>, E>
    where
        F: FnOnce() -> Result<Vec<u8>, E> + Send + 'static,
        E: From<KeyStoreError> + Send + 'static,
    {
        let name = self.name();
        if let Some(bytes) = self.keystore.get(self.db, &name).await? {
            return Ok(bytes);
        }
        let fresh = tokio::task::spawn_blocking(make)
            .await
            .map_err(|e| KeyStoreError::Missing(format!("making a key: {e}")))??;
        self.keystore.put_if_absent(self.db, &name, &fresh).await?;
        Ok(self
            .keystore
            .get(self.db, &name)
            .await?
            .ok_or_else(|| KeyStoreError::Missing(format!("{name} vanished")))?)
    }

    /// The key the current one replaced, if it was ever rotated.
    pub async fn previous(&self) -> Result<Option<Vec<u8>>, KeyStoreError> {
        self.keystore.get(self.db, &self.previous_name()).await
    }

    /// Makes `key` the current key; the current one becomes the previous one — in one
    /// transaction. False, and nothing changed, while a rotation's overlap runs (or when another
    /// change moved the keys meanwhile).
    pub async fn rotate(&self, key: &[u8]) -> Result<bool, KeyStoreError> {
        let (name, overlap, previous) = (self.name(), self.overlap_name(), self.previous_name());
        if self.db.get_secret(&overlap).await?.is_some() {
            return Ok(false);
        }
        let current = self.db.get_secret(&name).await?;
        let mut set = vec![(name.as_str(), Some(self.keystore.seal(&name, key)?))];
        if let Some((nonce, ct)) = &current {
            let plain = self.keystore.open(&name, nonce, ct)?;
            set.push((previous.as_str(), Some(self.keystore.seal(&previous, &plain)?)));
        }
        let expect = [(name.as_str(), current.as_ref().map(|(_, ct)| ct.as_str())), (overlap.as_str(), None)];
        Ok(self.db.move_secrets(&expect, &set).await?)
    }

    fn overlap_name(&self) -> String {
        format!("{}/{}/signing.overlap", self.format, self.repository_id)
    }

    fn slot_name(&self, slot: KeySlot) -> String {
        match slot {
            KeySlot::Current => self.name(),
            KeySlot::Overlap => self.overlap_name(),
            KeySlot::Previous => self.previous_name(),
        }
    }

    /// The key that signed before the current one was added beside it, while both sign (a
    /// rotation's overlap, until one of them is retired).
    pub async fn overlap(&self) -> Result<Option<Vec<u8>>, KeyStoreError> {
        self.keystore.get(self.db, &self.overlap_name()).await
    }

    /// Adds `key` beside the current one (which must exist): `key` becomes the current key and
    /// the current one signs beside it as the overlap — in one transaction.
    /// [`Moved::Refused`] while an overlap runs already (one rotation at a time).
    pub async fn add(&self, key: &[u8]) -> Result<Moved, KeyStoreError> {
        let (name, overlap) = (self.name(), self.overlap_name());
        if self.db.get_secret(&overlap).await?.is_some() {
            return Ok(Moved::Refused);
        }
        let (nonce, ct) = self
            .db
            .get_secret(&name)
            .await?
            .ok_or_else(|| KeyStoreError::Missing(format!("{name} has no key to keep beside the new one")))?;
        let current = self.keystore.open(&name, &nonce, &ct)?;
        let set = [
            (overlap.as_str(), Some(self.keystore.seal(&overlap, &current)?)),
            (name.as_str(), Some(self.keystore.seal(&name, key)?)),
        ];
        let expect = [(name.as_str(), Some(ct.as_str())), (overlap.as_str(), None)];
        Ok(if self.db.move_secrets(&expect, &set).await? { Moved::Done } else { Moved::Changed })
    }

    /// Retires the key in `slot`, which must still be `seen` (its bytes as the caller read
    /// them): the overlap or the previous key is removed; the current key is replaced by the
    /// overlap ([`Moved::Refused`] without one: the only signing key is never retired) — in one
    /// transaction.
    pub async fn retire(&self, slot: KeySlot, seen: &[u8]) -> Result<Moved, KeyStoreError> {
        let name = self.slot_name(slot);
        let Some((nonce, ct)) = self.db.get_secret(&name).await? else { return Ok(Moved::Changed) };
        if self.keystore.open(&name, &nonce, &ct)? != seen {
            return Ok(Moved::Changed);
        }
        let done = match slot {
            KeySlot::Overlap | KeySlot::Previous => {
                self.db.move_secrets(&[(name.as_str(), Some(ct.as_str()))], &[(name.as_str(), None)]).await?
            }
            KeySlot::Current => {
                let overlap = self.overlap_name();
                let Some((o_nonce, o_ct)) = self.db.get_secret(&overlap).await? else { return Ok(Moved::Refused) };
                let plain = self.keystore.open(&overlap, &o_nonce, &o_ct)?;
                let expect = [(name.as_str(), Some(ct.as_str())), (overlap.as_str(), Some(o_ct.as_str()))];
                let set = [(name.as_str(), Some(self.keystore.seal(&name, &plain)?)), (overlap.as_str(), None)];
                self.db.move_secrets(&expect, &set).await?
            }
        };
        Ok(if done { Moved::Done } else { Moved::Changed })
    }
}

/// What a move of a repository's keys did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    Done,
    /// Not done: the keys are not in a state that allows it (nothing changed).
    Refused,
    /// Not done: another change moved the keys meanwhile (nothing changed).
    Changed,
}

/// Where a repository's key is kept: the current one (signs), the overlap (signs beside it
/// during a rotation) and the previous one (offered to clients, no longer signing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySlot {
    Current,
    Overlap,
    Previous,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_only_with_the_same_secret_and_name() -> Result<(), KeyStoreError> {
        let ks = KeyStore::new("first secret of enough length");
        let (n, c) = ks.seal("apt/debs", b"-----BEGIN PRIVATE KEY-----")?;
        assert!(!c.contains("PRIVATE"), "ciphertext does not show the plaintext");
        assert_eq!(ks.open("apt/debs", &n, &c)?, b"-----BEGIN PRIVATE KEY-----");
        assert!(ks.open("apk/other", &n, &c).is_err(), "bound to its name");
        assert!(KeyStore::new("another secret entirely").open("apt/debs", &n, &c).is_err());
        Ok(())
    }
}
