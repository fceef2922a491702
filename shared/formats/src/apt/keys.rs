//! An APT repository's OpenPGP signing key (generated on first need), kept armored in the key
//! store under `apt/<repository id>/signing` (see
//! [`packyard_core::security::keystore::RepositoryKeys`]).

use packyard_codecs::apt::signing::{Signer, SigningError};
use packyard_core::security::keystore::{KeyStore, KeyStoreError, RepositoryKeys};
use packyard_store::db::Db;

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Signing(#[from] SigningError),
    #[error(transparent)]
    KeyStore(#[from] KeyStoreError),
}

fn keys<'a>(db: &'a Db, keystore: &'a KeyStore, repository_id: i64) -> RepositoryKeys<'a> {
    RepositoryKeys { db, keystore, format: "apt", repository_id }
}

fn import(armored: &[u8]) -> Result<Signer, KeyError> {
    Ok(Signer::from_armored(&String::from_utf8_lossy(armored))?)
}

/// The repository's key, made for `user_id` on first need.
pub async fn signer(db: &Db, keystore: &KeyStore, repository_id: i64, user_id: &str) -> Result<Signer, KeyError> {
    let uid = user_id.to_string();
    let make = move || Ok::<_, KeyError>(Signer::generate(&uid)?.to_armored_secret()?.into_bytes());
    import(&keys(db, keystore, repository_id).current(make).await?)
}

/// The previous key of a repository, if it was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<Signer>, KeyError> {
    keys(db, keystore, repository_id).previous().await?.map(|k| import(&k)).transpose()
}

/// Makes `new` the repository's signing key; the current one becomes the previous one.
pub async fn rotate(db: &Db, keystore: &KeyStore, repository_id: i64, new: &Signer) -> Result<(), KeyError> {
    Ok(keys(db, keystore, repository_id).rotate(new.to_armored_secret()?.as_bytes()).await?)
}
