//! The projection of one module of a hosted Go repository: `@v/list` (no pseudo-versions,
//! lowest first), `@latest` and every version's `@v/<version>.info`, built from its rows in
//! keyset pages and published as a snapshot, so that warmed reads make no query. A group's
//! snapshot of a module merges its members' (see `group.rs`).

use async_trait::async_trait;

use super::hosted::info_json;
use super::KIND;
use packyard_codecs::go::version::{latest, list};
use packyard_core::publication::{BuildContext, BuildError, Builder};
use super::group::Upstream;
use packyard_model::repos::{Format, RepoType};
use packyard_store::db::publication::UnitRecord;

pub struct GoBuilder {
    pub page_size: i64,
    /// Where members' published and proxied files are read from (groups).
    pub blobs: std::sync::Arc<dyn packyard_store::blobs::BlobStore>,
    /// Fetches proxy members' upstream metadata (groups).
    pub proxy: Option<packyard_core::proxy::Proxy>,
}

impl GoBuilder {
    fn upstream(&self) -> Upstream<'_> {
        Upstream { proxy: self.proxy.as_ref(), blobs: &*self.blobs }
    }
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

#[async_trait]
impl Builder for GoBuilder {
    fn kind(&self) -> &'static str {
        KIND
    }

    async fn build(&self, ctx: &mut BuildContext<'_>, unit: &UnitRecord) -> Result<(), BuildError> {
        let db = ctx.db;
        let repo = db
            .repository_by_id(unit.repository_id)
            .await?
            .ok_or_else(|| BuildError::Other(format!("repository {} is gone", unit.repository_id)))?;
        let module = unit.unit_key.as_str();
        match repo.repo_type {
            RepoType::Hosted => {}
            RepoType::Group => return super::group::merge(ctx, &self.upstream(), &repo, module).await,
            RepoType::Proxy => {
                return Err(BuildError::Other(format!("proxy repository {} publishes nothing", repo.name)))
            }
        }
        let mut versions: Vec<(String, i64)> = Vec::new();
        let mut after = 0;
        loop {
            let page = crate::go::rows::rows(db).versions_page(repo.id, module, after, self.page_size).await?;
            let Some(last) = page.last() else { break };
            after = last.id;
            versions.extend(page.into_iter().map(|v| (v.version, v.time_ms)));
        }
        ctx.put("@v/list", TEXT, list(versions.iter().map(|(v, _)| v.as_str())).as_bytes()).await?;
        if let Some(l) = latest(versions.iter().map(|(v, _)| v.as_str())) {
            let time = versions.iter().find(|(v, _)| v == l).map_or(0, |(_, t)| *t);
            ctx.put("@latest", JSON, info_json(l, time).as_bytes()).await?;
        }
        for (v, t) in &versions {
            ctx.put(&format!("@v/{v}.info"), JSON, info_json(v, *t).as_bytes()).await?;
        }
        Ok(())
    }

    /// A member published a module: every Go group that lists it rebuilds the same module.
    async fn after_publish(&self, db: &packyard_store::db::Db, unit: &UnitRecord) -> Result<bool, BuildError> {
        packyard_core::groups::after_member_publish(db, unit, Format::Go, |_| vec![(KIND.to_string(), unit.unit_key.clone())])
            .await
    }

    async fn refresh(&self, db: &packyard_store::db::Db) -> Result<bool, BuildError> {
        match &self.proxy {
            Some(_) => packyard_core::groups::refresh(db, &*self.blobs, &self.upstream()).await,
            None => Ok(false),
        }
    }
}
