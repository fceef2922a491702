//! The APK snapshot of one unit (`<branch>/<channel>/<arch>`): `APKINDEX.tar.gz`, signed with
//! the repository's RSA index key — for a hosted repository its records read from the rows in
//! keyset pages, for a group the members' records merged (see `group.rs`).

use std::sync::Arc;

use async_trait::async_trait;

use packyard_codecs::apk::index::signed_index;

use super::{group, Unit, INDEX_FILE, KIND};
use packyard_core::publication::{BuildContext, BuildError, Builder};
use packyard_core::security::keystore::KeyStore;
use packyard_model::repos::RepoType;
use packyard_store::db::publication::UnitRecord;

pub struct ApkBuilder {
    pub page_size: i64,
    /// Where each repository's index key is sealed.
    pub keystore: Arc<KeyStore>,
    /// Where members' published and proxied indexes are read from (groups).
    pub blobs: Arc<dyn packyard_store::blobs::BlobStore>,
    /// Fetches proxy members' upstream indexes (groups).
    pub proxy: Option<packyard_core::proxy::Proxy>,
}

#[async_trait]
impl Builder for ApkBuilder {
    fn kind(&self) -> &'static str {
        KIND
    }

    async fn build(&self, ctx: &mut BuildContext<'_>, unit: &UnitRecord) -> Result<(), BuildError> {
        let db = ctx.db;
        let repo = db
            .repository_by_id(unit.repository_id)
            .await?
            .ok_or_else(|| BuildError::Other(format!("repository {} is gone", unit.repository_id)))?;
        let mut records = String::new();
        let mut hidden = Vec::new();
        match repo.repo_type {
            RepoType::Hosted => {
                let mut after = 0;
                loop {
                    let page = crate::apk::rows::rows(db)
                        .unit_page(repo.id, &unit.unit_key, after, self.page_size)
                        .await?;
                    let Some(last) = page.last() else { break };
                    after = last.id;
                    for p in &page {
                        records.push_str(&p.record);
                        records.push('\n');
                    }
                }
            }
            RepoType::Group => {
                let u: Unit = unit.unit_key.parse().map_err(BuildError::Other)?;
                let merged = group::merge(db, &*self.blobs, self.proxy.as_ref(), &repo, &u).await?;
                records = merged.records;
                hidden.push((group::members_path(&unit.unit_key), packyard_core::groups::members_map(&merged.members)));
                hidden.push((group::sources_path(&unit.unit_key), packyard_core::groups::render_sources(&merged.sources)));
            }
            RepoType::Proxy => {
                return Err(BuildError::Other(format!("proxy repository {} publishes nothing", repo.name)))
            }
        }
        let key = crate::apk::keys::current(db, &self.keystore, repo.id)
            .await
            .map_err(|e| BuildError::Other(format!("index key: {e}")))?;
        let key_file = key.file_name(repo.name.as_str()).map_err(|e| BuildError::Other(e.to_string()))?;
        let description = format!("{} {}", repo.name, unit.unit_key);
        let mtime = u64::try_from(packyard_store::db::now_ms() / 1000).unwrap_or(0);
        // Compressing and signing are CPU work: off the async executor.
        let bytes = tokio::task::spawn_blocking(move || signed_index(&description, &records, &key, &key_file, mtime))
            .await
            .map_err(|e| BuildError::Other(e.to_string()))?
            .map_err(|e| BuildError::Other(e.to_string()))?;
        ctx.put(&format!("{}/{INDEX_FILE}", unit.unit_key), "application/gzip", &bytes).await?;
        for (path, text) in hidden {
            ctx.put(&path, "text/plain; charset=utf-8", text.as_bytes()).await?;
        }
        Ok(())
    }

    async fn after_publish(&self, db: &packyard_store::db::Db, unit: &UnitRecord) -> Result<bool, BuildError> {
        group::after_member_publish(db, unit).await
    }

    async fn refresh(&self, db: &packyard_store::db::Db) -> Result<bool, BuildError> {
        match &self.proxy {
            Some(proxy) => {
                let upstreams = group::Upstreams { proxy, blobs: &*self.blobs };
                packyard_core::groups::refresh(db, &*self.blobs, &upstreams).await
            }
            None => Ok(false),
        }
    }
}
