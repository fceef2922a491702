//! Where an APT repository's signing key is kept: sealed in the key store under
//! `apt/<repository id>/signing` (and the key it replaced under `…signing.previous`, still offered
//! to clients after a rotation), generated on first need.

use packyard_codecs::apt::signing::{Signer, SigningError};
use packyard_core::security::keystore::{KeyStore, KeyStoreError};
use packyard_store::db::Db;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Signing(#[from] SigningError),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

/// The key store name of a repository's current signing key.
pub fn key_name(repository_id: i64) -> String {
    format!("apt/{repository_id}/signing")
}

/// The key store name of the key it replaced (still offered to clients after a rotation).
pub fn previous_key_name(repository_id: i64) -> String {
    format!("apt/{repository_id}/signing.previous")
}

/// The previous key of a repository, if it was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<Signer>, KeyError> {
    match keystore.get(db, &previous_key_name(repository_id)).await? {
        Some(bytes) => Ok(Some(Signer::from_armored(&String::from_utf8_lossy(&bytes))?)),
        None => Ok(None),
    }
}

/// Makes `new` the repository's signing key; the current one becomes the previous one.
pub async fn rotate(db: &Db, keystore: &KeyStore, repository_id: i64, new: &Signer) -> Result<(), KeyError> {
    if let Some(current) = keystore.get(db, &key_name(repository_id)).await? {
        keystore.put(db, &previous_key_name(repository_id), &current).await?;
    }
    keystore.put(db, &key_name(repository_id), new.to_armored_secret()?.as_bytes()).await?;
    Ok(())
}

/// The repository's key, generated and stored on first need. Two workers racing to create
/// it agree on whichever was stored first.
pub async fn signer(db: &Db, keystore: &KeyStore, repository_id: i64, user_id: &str) -> Result<Signer, KeyError> {
    let name = key_name(repository_id);
    if let Some(bytes) = keystore.get(db, &name).await? {
        return Ok(Signer::from_armored(&String::from_utf8_lossy(&bytes))?);
    }
    let fresh = tokio::task::spawn_blocking({
        let uid = user_id.to_string();
        move || Signer::generate(&uid)
    })
    .await
    .map_err(|e| KeyError::Signing(SigningError::Pgp(e.to_string())))??;
    keystore.put_if_absent(db, &name, fresh.to_armored_secret()?.as_bytes()).await?;
    let stored = keystore
        .get(db, &name)
        .await?
        .ok_or_else(|| KeyError::Signing(SigningError::Pgp("the signing key vanished".into())))?;
    Ok(Signer::from_armored(&String::from_utf8_lossy(&stored))?)
}
