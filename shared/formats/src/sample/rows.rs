//! Storage of the sample format's files.

use sqlx::{Any, Executor, Transaction};

use packyard_store::db::{Column, Db, DbResult};
use packyard_store::sql;

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct SampleFile keyed by id, columns columns, trimmed (sha256) {
        pub repository_id: i64,
        pub name: String,
        pub version: String,
        /// When it was uploaded, ms since the epoch.
        pub time_ms: i64,
        pub sha256: String,
        pub size: i64,
    }
}

pub async fn file<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    name: &str,
    version: &str,
) -> DbResult<Option<SampleFile>> {
    let one = sql!(
        "sample_files.get",
        concat!("SELECT ", columns!(), " FROM sample_files WHERE repository_id = $1 AND name = $2 AND version = $3")
    );
    db.optional(ex, one, (repo, name, version), SampleFile::parse).await
}

/// A keyset page of the repository's files, by id, with who uploaded each.
pub async fn stamped_page(db: &Db, repo: i64, after_id: i64, limit: i64) -> DbResult<Vec<(SampleFile, String)>> {
    let page = sql!(
        "sample_files.stamped",
        concat!(
            "SELECT ",
            columns!(),
            ", uploaded_by FROM sample_files WHERE repository_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )
    );
    let rows = db.bound(page, (repo, after_id, limit)).fetch_all(db.pool()).await?;
    rows.iter().map(|r| Ok((SampleFile::parse(r)?, Column::read(r, "uploaded_by")?))).collect()
}

pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, f: &SampleFile, uploaded_by: &str) -> DbResult<()> {
    let insert = sql!(
        "sample_files.insert",
        "INSERT INTO sample_files (repository_id, name, version, time_ms, sha256, size, uploaded_by) VALUES ($1, $2, $3, $4, $5, $6, $7)"
    );
    db.bound(insert, f).bind(uploaded_by).execute(&mut **tx).await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("sample_files.delete", "DELETE FROM sample_files WHERE id = $1"), id).await
}
