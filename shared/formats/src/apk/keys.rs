//! Where an APK repository's index key is kept: sealed in the key store under
//! `apk/<repository id>/signing` (and the key it replaced under `…signing.previous`, whose public
//! key stays served after a rotation), generated on first need.

use packyard_codecs::apk::signing::{ApkKey, KeyError as ApkKeyError, DEFAULT_BITS};
use packyard_core::security::keystore::{KeyStore, KeyStoreError};
use packyard_store::db::Db;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Key(#[from] ApkKeyError),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

pub fn key_name(repository_id: i64) -> String {
    format!("apk/{repository_id}/signing")
}

pub fn previous_key_name(repository_id: i64) -> String {
    format!("apk/{repository_id}/signing.previous")
}

/// The repository's key, generated (RSA-4096) and stored on first need; replicas racing to
/// create it all end up with the one stored first.
pub async fn current(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<ApkKey, KeyError> {
    let name = key_name(repository_id);
    if let Some(bytes) = keystore.get(db, &name).await? {
        return Ok(ApkKey::import(&String::from_utf8_lossy(&bytes))?);
    }
    let fresh = tokio::task::spawn_blocking(|| ApkKey::generate(DEFAULT_BITS))
        .await
        .map_err(|e| KeyError::Key(ApkKeyError::Rsa(e.to_string())))??;
    keystore.put_if_absent(db, &name, fresh.private_pem()?.as_bytes()).await?;
    let stored = keystore
        .get(db, &name)
        .await?
        .ok_or_else(|| KeyError::Key(ApkKeyError::Rsa("the index key vanished".into())))?;
    Ok(ApkKey::import(&String::from_utf8_lossy(&stored))?)
}

/// The key it replaced, if the repository's key was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<ApkKey>, KeyError> {
    match keystore.get(db, &previous_key_name(repository_id)).await? {
        Some(bytes) => Ok(Some(ApkKey::import(&String::from_utf8_lossy(&bytes))?)),
        None => Ok(None),
    }
}

/// Makes this the repository's key; the current one becomes the previous one (its public
/// key stays served, so clients can move over).
pub async fn install(key: &ApkKey, db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<(), KeyError> {
    if let Some(current) = keystore.get(db, &key_name(repository_id)).await? {
        keystore.put(db, &previous_key_name(repository_id), &current).await?;
    }
    keystore.put(db, &key_name(repository_id), key.private_pem()?.as_bytes()).await?;
    Ok(())
}
