//! The projection of one module of a hosted Go repository: `@v/list` (no pseudo-versions,
//! lowest first), `@latest` and every version's `@v/<version>.info`, built from its rows in
//! keyset pages and published as a snapshot, so that warmed reads make no query.

use async_trait::async_trait;

use super::hosted::info_json;
use super::KIND;
use packyard_codecs::go::version::{latest, list};
use packyard_core::publication::{BuildContext, BuildError, Builder};
use packyard_model::repos::RepoType;
use packyard_store::db::publication::UnitRecord;

pub struct GoBuilder {
    pub page_size: i64,
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
        if repo.repo_type != RepoType::Hosted {
            return Err(BuildError::Other(format!(
                "{} repository {} has no Go projections yet",
                repo.repo_type, repo.name
            )));
        }
        let module = unit.unit_key.as_str();
        let mut versions: Vec<(String, i64)> = Vec::new();
        let mut after = 0;
        loop {
            let page = crate::go::rows::rows(db).go_versions_page(repo.id, module, after, self.page_size).await?;
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
}
