//! An APK repository's index key (RSA, generated at 4096 bits on first need), kept as PKCS#8
//! PEM in the key store under `apk/<repository id>/signing` (see
//! [`packyard_core::security::keystore::RepositoryKeys`]).

use packyard_codecs::apk::signing::{ApkKey, KeyError as ApkKeyError, DEFAULT_BITS};
use packyard_core::security::keystore::{KeyStore, KeyStoreError, RepositoryKeys};
use packyard_store::db::Db;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Key(#[from] ApkKeyError),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

fn keys<'a>(db: &'a Db, keystore: &'a KeyStore, repository_id: i64) -> RepositoryKeys<'a> {
    RepositoryKeys { db, keystore, format: "apk", repository_id }
}

fn import(pem: &[u8]) -> Result<ApkKey, KeyError> {
    Ok(ApkKey::import(&String::from_utf8_lossy(pem))?)
}

/// The repository's key.
pub async fn current(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<ApkKey, KeyError> {
    let make = || Ok::<_, KeyError>(ApkKey::generate(DEFAULT_BITS)?.private_pem()?.into_bytes());
    import(&keys(db, keystore, repository_id).current(make).await?)
}

/// The key it replaced, if the repository's key was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<ApkKey>, KeyError> {
    keys(db, keystore, repository_id).previous().await?.map(|pem| import(&pem)).transpose()
}

/// Makes this the repository's key; the current one becomes the previous one (its public key
/// stays served, so clients can move over).
pub async fn install(key: &ApkKey, db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<(), KeyError> {
    Ok(keys(db, keystore, repository_id).rotate(key.private_pem()?.as_bytes()).await?)
}
