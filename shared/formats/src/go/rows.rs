//! Storage of Go module versions.

use sqlx::{Any, Executor, Transaction};

use packyard_store::db::{Column, Db, DbResult};
use packyard_store::sql;

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct GoVersion keyed by id, columns columns, trimmed (mod_sha256, zip_sha256) {
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
}

pub async fn version<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    module: &str,
    version: &str,
) -> DbResult<Option<GoVersion>> {
    let one = sql!(
        "go_versions.get",
        concat!("SELECT ", columns!(), " FROM go_versions WHERE repository_id = $1 AND module = $2 AND version = $3")
    );
    db.optional(ex, one, (repo, module, version), GoVersion::parse).await
}

/// A keyset page of one module's versions, by id.
pub async fn versions_page(db: &Db, repo: i64, module: &str, after_id: i64, limit: i64) -> DbResult<Vec<GoVersion>> {
    let page = sql!(
        "go_versions.page",
        concat!(
            "SELECT ",
            columns!(),
            " FROM go_versions WHERE repository_id = $1 AND module = $2 AND id > $3 ORDER BY id LIMIT $4"
        )
    );
    db.page(db.bound(page, (repo, module)), after_id, limit, GoVersion::parse).await
}

/// A keyset page of the repository's versions with who uploaded each (the catalogue's backfill).
pub async fn stamped_page(db: &Db, repo: i64, after_id: i64, limit: i64) -> DbResult<Vec<(GoVersion, String)>> {
    let page = sql!(
        "go_versions.stamped",
        concat!(
            "SELECT ",
            columns!(),
            ", uploaded_by FROM go_versions WHERE repository_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )
    );
    let rows = db.bound(page, (repo, after_id, limit)).fetch_all(db.pool()).await?;
    rows.iter().map(|r| Ok((GoVersion::parse(r)?, Column::read(r, "uploaded_by")?))).collect()
}

/// Inserts a version inside the writer's transaction (what its coordinate held is removed first).
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, v: &GoVersion, uploaded_by: &str) -> DbResult<()> {
    let insert = sql!("go_versions.insert", "INSERT INTO go_versions (repository_id, module, version, time_ms, mod_sha256, mod_size, zip_sha256, zip_size, uploaded_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
    db.bound(insert, v).bind(uploaded_by).execute(&mut **tx).await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("go_versions.delete", "DELETE FROM go_versions WHERE id = $1"), id).await
}
