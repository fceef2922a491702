//! Conan projections, published through the pipeline so that warmed reads make no query: per
//! reference (kind `conan`) the recipe `revisions` and `latest`, each complete recipe
//! revision's `files` list and package `search`, each package's `revisions` and `latest`, each
//! package revision's `files` list, and every file itself (listed by its blob, not copied); per
//! repository (kind `conan-search`, unit `all`) the references for `search?q=`.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::group::{merge_reference, merge_search};
use crate::conan::rows::ConanRevision;
use packyard_core::groups::{self, Reader};
use packyard_core::publication::{BuildContext, BuildError, Builder, Rebuilds};
use packyard_model::repos::{Format, Repository};
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::Db;

use super::SEARCH_FILE;

const JSON: &str = "application/json";

/// Conan's JSON time: ISO 8601 with a zone.
pub fn iso(ms: i64) -> String {
    packyard_model::time::rfc3339_ms(ms).replace('Z', "+00:00")
}

fn revision_json(revision: &str, time_ms: i64) -> serde_json::Value {
    serde_json::json!({"revision": revision, "time": iso(time_ms)})
}

/// Builds a reference's projection (hosted) or merges it from the members (group).
pub struct ConanBuilder {
    /// Reads group members.
    pub reader: Reader,
}

#[async_trait]
impl Builder for ConanBuilder {
    async fn build(&self, ctx: &mut BuildContext<'_>, owner: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        let db = ctx.db;
        let reference = unit.unit_key.as_str();
        let repo = owner.id;
        let recipes = crate::conan::rows::revisions(db, repo, reference, None, None).await?;
        if recipes.is_empty() {
            return Ok(());
        }
        let list: Vec<_> = recipes.iter().map(|r| revision_json(&r.rrev, r.time_ms)).collect();
        ctx.put("revisions", JSON, serde_json::json!({ "revisions": list }).to_string().as_bytes()).await?;
        ctx.put("latest", JSON, revision_json(&recipes[0].rrev, recipes[0].time_ms).to_string().as_bytes()).await?;
        for recipe in &recipes {
            let base = format!("revisions/{}", recipe.rrev);
            files(ctx, recipe, &base).await?;
            let packages = crate::conan::rows::revisions(db, repo, reference, Some(&recipe.rrev), None).await?;
            let mut by_id: BTreeMap<&str, Vec<&ConanRevision>> = BTreeMap::new();
            for p in &packages {
                by_id.entry(p.pkgid.as_str()).or_default().push(p);
            }
            let mut search = serde_json::Map::new();
            for (pkgid, revs) in &by_id {
                // Newest first, as listed.
                let pbase = format!("{base}/packages/{pkgid}");
                let list: Vec<_> = revs.iter().map(|r| revision_json(&r.prev, r.time_ms)).collect();
                ctx.put(
                    &format!("{pbase}/revisions"),
                    JSON,
                    serde_json::json!({ "revisions": list }).to_string().as_bytes(),
                )
                .await?;
                ctx.put(
                    &format!("{pbase}/latest"),
                    JSON,
                    revision_json(&revs[0].prev, revs[0].time_ms).to_string().as_bytes(),
                )
                .await?;
                let mut conaninfo = String::new();
                for r in revs {
                    let found = files(ctx, r, &format!("{pbase}/revisions/{}", r.prev)).await?;
                    if r.id == revs[0].id {
                        conaninfo = found;
                    }
                }
                search.insert((*pkgid).to_string(), serde_json::json!({ "content": conaninfo }));
            }
            ctx.put(&format!("{base}/search"), JSON, serde_json::Value::Object(search).to_string().as_bytes()).await?;
        }
        Ok(())
    }

    async fn merge(&self, ctx: &mut BuildContext<'_>, group: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        merge_reference(ctx, &self.reader, group, &unit.unit_key).await
    }

    async fn after_publish(&self, db: &Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        groups::same_unit_after_member_publish(db, unit, Format::Conan).await
    }

    /// A proxy member's upstream `latest` of the reference.
    async fn upstream_source(&self, member: &Repository, reference: &str) -> Result<Option<String>, BuildError> {
        super::group::upstream_latest(&self.reader, member, reference).await
    }
}

/// Lists a revision's files (`<base>/files`) and each file (`<base>/files/<path>`, by its
/// blob); returns the text of its `conaninfo.txt`, if any.
async fn files(ctx: &mut BuildContext<'_>, rev: &ConanRevision, base: &str) -> Result<String, BuildError> {
    let files = crate::conan::rows::files(ctx.db, rev.id).await?;
    let map: serde_json::Map<String, serde_json::Value> =
        files.iter().map(|f| (f.path.clone(), serde_json::json!({}))).collect();
    ctx.put(&format!("{base}/files"), JSON, serde_json::json!({ "files": map }).to_string().as_bytes()).await?;
    let mut conaninfo = String::new();
    for f in &files {
        ctx.reference(&format!("{base}/files/{}", f.path), &f.sha256, f.size, "application/octet-stream");
        if f.path == "conaninfo.txt" {
            let bytes = ctx.blobs().read_all(&Sha256Hex::parse(&f.sha256)?).await?;
            conaninfo = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    Ok(conaninfo)
}

/// The repository's references with a complete recipe revision, for `search?q=`.
pub struct ConanSearchBuilder {
    pub reader: Reader,
}

#[async_trait]
impl Builder for ConanSearchBuilder {
    async fn build(
        &self,
        ctx: &mut BuildContext<'_>,
        owner: &Repository,
        _unit: &UnitRecord,
    ) -> Result<(), BuildError> {
        let refs = crate::conan::rows::references(ctx.db, owner.id).await?;
        ctx.put(SEARCH_FILE, JSON, serde_json::json!({ "results": refs }).to_string().as_bytes()).await
    }

    async fn merge(
        &self,
        ctx: &mut BuildContext<'_>,
        group: &Repository,
        _unit: &UnitRecord,
    ) -> Result<(), BuildError> {
        merge_search(ctx, &self.reader, group).await
    }

    async fn after_publish(&self, db: &Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        groups::same_unit_after_member_publish(db, unit, Format::Conan).await
    }

    /// A proxy member's upstream search, by hash.
    async fn upstream_source(&self, member: &Repository, _unit: &str) -> Result<Option<String>, BuildError> {
        super::group::upstream_search(&self.reader, member).await
    }
}
