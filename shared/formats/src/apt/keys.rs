//! An APT repository's OpenPGP signing key (generated on first need), kept armored in the key
//! store under `apt/<repository id>/signing` (see
//! [`packyard_core::security::keystore::RepositoryKeys`]).

use super::settings::AptSettings;
use packyard_codecs::apt::signing::Signer;
use packyard_core::security::keystore::{KeyStore, RepositoryKeyError, RepositoryKeys};
use packyard_model::repos::FormatSettings;
use packyard_store::db::Db;

pub type KeyError = RepositoryKeyError;

/// The key store's view of the repository's keys, kept armored.
fn store<'a>(db: &'a Db, keystore: &'a KeyStore, repository_id: i64) -> RepositoryKeys<'a> {
    RepositoryKeys::new(db, keystore, "apt", repository_id)
}

fn from_armored(armored: &[u8]) -> Result<Signer, KeyError> {
    Signer::from_armored(&String::from_utf8_lossy(armored)).map_err(KeyError::key)
}

/// The repository's key, made for `user_id` on first need.
pub async fn signer(db: &Db, keystore: &KeyStore, repository_id: i64, user_id: &str) -> Result<Signer, KeyError> {
    let uid = user_id.to_string();
    let make = move || {
        let fresh = Signer::generate(&uid).map_err(KeyError::key)?;
        Ok::<_, KeyError>(fresh.to_armored_secret().map_err(KeyError::key)?.into_bytes())
    };
    from_armored(&store(db, keystore, repository_id).current(make).await?)
}

/// The previous key of a repository, if it was ever rotated.
pub async fn previous(db: &Db, keystore: &KeyStore, repository_id: i64) -> Result<Option<Signer>, KeyError> {
    store(db, keystore, repository_id).previous().await?.map(|k| from_armored(&k)).transpose()
}

/// The keys that sign the repository's indexes: the current one (made for `user_id` on first
/// need) and, during a rotation's overlap, the one it was added beside.
pub async fn signers(db: &Db, keystore: &KeyStore, repository_id: i64, user_id: &str) -> Result<Vec<Signer>, KeyError> {
    let mut out = vec![signer(db, keystore, repository_id, user_id).await?];
    if let Some(k) = store(db, keystore, repository_id).overlap().await? {
        out.push(from_armored(&k)?);
    }
    Ok(out)
}

/// Every key clients are offered in `gpg.key`: those that sign and the previous one.
pub async fn offered(db: &Db, keystore: &KeyStore, repository_id: i64, user_id: &str) -> Result<Vec<Signer>, KeyError> {
    let mut out = signers(db, keystore, repository_id, user_id).await?;
    out.extend(previous(db, keystore, repository_id).await?);
    Ok(out)
}

/// Makes `new` the repository's signing key; the current one becomes the previous one.
pub async fn rotate(db: &Db, keystore: &KeyStore, repository_id: i64, new: &Signer) -> Result<(), KeyError> {
    let armored = new.to_armored_secret().map_err(KeyError::key)?;
    if store(db, keystore, repository_id).rotate(armored.as_bytes()).await? {
        Ok(())
    } else {
        Err(KeyError::KeyStore(packyard_core::security::keystore::KeyStoreError::Missing(
            "the keys changed meanwhile (a rotation's overlap began): retry".into(),
        )))
    }
}

/// The OpenPGP user id of `repo`'s key: its label (or name), and its name as the address.
pub fn user_id(repo: &packyard_model::repos::Repository) -> String {
    let label = AptSettings::of(repo).label.unwrap_or_else(|| repo.name.to_string());
    format!("{label} (Packyard repository {}) <packyard@{}>", repo.name, repo.name)
}
