//! The projection of one module of a hosted Go repository: `@v/list` (no pseudo-versions,
//! lowest first), `@latest` and every version's `@v/<version>.info`, built from its rows in
//! keyset pages and published as a snapshot, so that warmed reads make no query. A group's
//! snapshot of a module merges its members' (see `group.rs`).

use async_trait::async_trait;

use super::info_json;
use packyard_codecs::go::version::{check_info, check_list, latest, list};
use packyard_core::groups::{self, Reader};
use packyard_core::publication::{BuildContext, BuildError, Builder, Rebuilds};
use packyard_model::repos::{Format, Repository};
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::Db;

pub struct GoBuilder {
    pub page_size: i64,
    /// Reads group members.
    pub reader: Reader,
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

#[async_trait]
impl Builder for GoBuilder {
    async fn build(&self, ctx: &mut BuildContext<'_>, repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        let module = unit.unit_key.as_str();
        let mut versions: Vec<(String, i64)> = Vec::new();
        let mut after = 0;
        loop {
            let page = crate::go::rows::versions_page(ctx.db, repo.id, module, after, self.page_size).await?;
            let Some(last) = page.last() else { break };
            after = last.id;
            versions.extend(page.into_iter().map(|v| (v.version, v.time_ms)));
        }
        // Each file read back as the go command reads it before it is published.
        let refused =
            |why: String| BuildError::Refused { reason: "go_projection", message: format!("{module}: {why}") };
        let listed = list(versions.iter().map(|(v, _)| v.as_str()));
        check_list(&listed).map_err(refused)?;
        ctx.put("@v/list", TEXT, listed.as_bytes()).await?;
        if let Some(l) = latest(versions.iter().map(|(v, _)| v.as_str())) {
            let time = versions.iter().find(|(v, _)| v == l).map_or(0, |(_, t)| *t);
            let info = info_json(l, time);
            check_info(&info).map_err(refused)?;
            ctx.put("@latest", JSON, info.as_bytes()).await?;
        }
        for (v, t) in &versions {
            let info = info_json(v, *t);
            check_info(&info).map_err(refused)?;
            ctx.put(&format!("@v/{v}.info"), JSON, info.as_bytes()).await?;
        }
        Ok(())
    }

    async fn merge(&self, ctx: &mut BuildContext<'_>, group: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        super::group::merge(ctx, &self.reader, group, &unit.unit_key).await
    }

    /// A member published a module: every Go group that lists it rebuilds the same module.
    async fn after_publish(&self, db: &Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        groups::same_unit_after_member_publish(db, unit, Format::Go).await
    }

    /// A proxy member's upstream `@v/list` of the module, by hash.
    async fn upstream_source(&self, member: &Repository, module: &str) -> Result<Option<String>, BuildError> {
        let list = super::Request::List(module.to_string());
        Ok(self.reader.fetch(member, super::proxy_request(member, &list)).await?.map(|(sha, _)| sha))
    }
}
