//! An APK repository's index key (RSA, generated at 4096 bits on first need), kept as PKCS#8
//! PEM in the key store under `apk/<repository id>/signing` (see
//! [`packyard_core::security::keystore::RepositoryKeys`]).

use packyard_codecs::apk::signing::{ApkKey, DEFAULT_BITS};
use packyard_core::security::keystore::{KeyStore, RepositoryKeyError, RepositoryKeys};
use packyard_store::db::Db;

pub type KeyError = RepositoryKeyError;

fn keys<'a>(db: &'a Db, keystore: &'a KeyStore, repository_id: i64) -> RepositoryKeys<'a> {
    RepositoryKeys::new(db, keystore, "apk", repository_id)
}

fn import(pem: &[u8]) -> Result<ApkKey, KeyError> {
    ApkKey::import(&String::from_utf8_lossy(pem)).map_err(KeyError::key)
}

fn export(key: &ApkKey) -> Result<Vec<u8>, KeyError> {
    Ok(key.private_pem().map_err(KeyError::key)?.into_bytes())
}

/// The repository's key.
pub async fn current(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<ApkKey, KeyError> {
    let make = || export(&ApkKey::generate(DEFAULT_BITS).map_err(KeyError::key)?);
    import(&keys(db, keystore, repository_id).current(make).await?)
}

/// The key it replaced, if the repository's key was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<ApkKey>, KeyError> {
    keys(db, keystore, repository_id).previous().await?.map(|pem| import(&pem)).transpose()
}

/// The keys that sign the repository's indexes: the current one and, during a rotation's
/// overlap, the one it was added beside.
pub async fn signing(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Vec<ApkKey>, KeyError> {
    let mut out = vec![current(db, keystore, repository_id).await?];
    if let Some(pem) = keys(db, keystore, repository_id).overlap().await? {
        out.push(import(&pem)?);
    }
    Ok(out)
}

/// [`signing`], each with the file name clients keep it under (what its `.SIGN.RSA.` entry
/// names).
pub async fn signing_named(
    db: &Db,
    keystore: &KeyStore,
    repository: &packyard_model::repos::Repository,
) -> Result<Vec<(ApkKey, String)>, KeyError> {
    let mut out = Vec::new();
    for key in signing(db, keystore, repository.id).await? {
        let name = key.file_name(repository.name.as_str()).map_err(KeyError::key)?;
        out.push((key, name));
    }
    Ok(out)
}

/// Every key clients are offered under `keys/`: those that sign and the previous one.
pub async fn offered(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Vec<ApkKey>, KeyError> {
    let mut out = signing(db, keystore, repository_id).await?;
    out.extend(previous(db, keystore, repository_id).await?);
    Ok(out)
}

/// Makes this the repository's key; the current one becomes the previous one (its public key
/// stays served, so clients can move over).
pub async fn install(key: &ApkKey, db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<(), KeyError> {
    if keys(db, keystore, repository_id).rotate(&export(key)?).await? {
        Ok(())
    } else {
        Err(KeyError::KeyStore(packyard_core::security::keystore::KeyStoreError::Missing(
            "the keys changed meanwhile (a rotation's overlap began): retry".into(),
        )))
    }
}
