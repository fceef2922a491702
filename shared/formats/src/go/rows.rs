//! Storage of Go module versions.

use sqlx::any::AnyRow;
use sqlx::{Any, Executor, Row, Transaction};

use packyard_store::db::{text, Db, DbResult};
use packyard_store::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoVersion {
    pub id: i64,
    pub repository_id: i64,
    pub module: String,
    pub version: String,
    /// The `.info` time, ms since the epoch (whole seconds).
    pub time_ms: i64,
    pub mod_sha256: String,
    pub mod_size: i64,
    pub zip_sha256: String,
    pub zip_size: i64,
}

macro_rules! columns {
    () => {
        "id, repository_id, module, version, time_ms, mod_sha256, mod_size, zip_sha256, zip_size"
    };
}

fn parse(r: &AnyRow) -> DbResult<GoVersion> {
    Ok(GoVersion {
        id: r.try_get("id")?,
        repository_id: r.try_get("repository_id")?,
        module: text(r, "module")?,
        version: text(r, "version")?,
        time_ms: r.try_get("time_ms")?,
        mod_sha256: text(r, "mod_sha256")?.trim().to_string(),
        mod_size: r.try_get("mod_size")?,
        zip_sha256: text(r, "zip_sha256")?.trim().to_string(),
        zip_size: r.try_get("zip_size")?,
    })
}

pub async fn version<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    module: &str,
    version: &str,
) -> DbResult<Option<GoVersion>> {
    let row = db
        .query(sql!(
            "go_versions.get",
            concat!(
                "SELECT ",
                columns!(),
                " FROM go_versions WHERE repository_id = $1 AND module = $2 AND version = $3"
            )
        ))
        .bind(repo)
        .bind(module)
        .bind(version)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(parse).transpose()
}

/// A keyset page of one module's versions, by id.
pub async fn versions_page(db: &Db, repo: i64, module: &str, after_id: i64, limit: i64) -> DbResult<Vec<GoVersion>> {
    let query = db
        .query(sql!(
            "go_versions.page",
            concat!(
                "SELECT ",
                columns!(),
                " FROM go_versions WHERE repository_id = $1 AND module = $2 AND id > $3 ORDER BY id LIMIT $4"
            )
        ))
        .bind(repo)
        .bind(module);
    db.page(query, after_id, limit, parse).await
}

/// Inserts a version inside the writer's transaction (what its coordinate held is removed first).
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, v: &GoVersion, uploaded_by: &str) -> DbResult<()> {
    db.query(sql!("go_versions.insert", "INSERT INTO go_versions (repository_id, module, version, time_ms, mod_sha256, mod_size, zip_sha256, zip_size, uploaded_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"))
        .bind(v.repository_id)
        .bind(v.module.as_str())
        .bind(v.version.as_str())
        .bind(v.time_ms)
        .bind(v.mod_sha256.as_str())
        .bind(v.mod_size)
        .bind(v.zip_sha256.as_str())
        .bind(v.zip_size)
        .bind(uploaded_by)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("go_versions.delete", "DELETE FROM go_versions WHERE id = $1"), id).await
}
