//! Storage of APK packages.

use sqlx::{Any, Executor, Transaction};

use packyard_store::db::{Column, Db, DbResult};
use packyard_store::sql;

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ApkPackage keyed by id, columns columns, trimmed (checksum, sha256) {
        pub repository_id: i64,
        /// `<branch>/<channel>/<arch>`: the publication unit.
        pub unit_key: String,
        pub name: String,
        pub version: String,
        /// `<unit>/<name>-<version>.apk`.
        pub path: String,
        /// The APKINDEX record, ending in a newline.
        pub record: String,
        /// The record's `C:` (`Q1` + base64 SHA-1 of the control member).
        pub checksum: String,
        pub size: i64,
        pub sha256: String,
    }
}

pub async fn by_path<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    path: &str,
) -> DbResult<Option<ApkPackage>> {
    let by_path = sql!(
        "apk_packages.by_path",
        concat!("SELECT ", columns!(), " FROM apk_packages WHERE repository_id = $1 AND path = $2")
    );
    db.optional(ex, by_path, (repo, path), ApkPackage::parse).await
}

/// The blob, size and upload time of the package at `path` (what serving it needs).
pub async fn served(db: &Db, repo: i64, path: &str) -> DbResult<Option<(String, i64, i64)>> {
    let served = sql!(
        "apk_packages.served",
        "SELECT sha256, size, uploaded_at FROM apk_packages WHERE repository_id = $1 AND path = $2"
    );
    db.served_file(served, repo, path).await
}

/// The ids of one unit's packages, ascending (no records: what an incremental build compares).
pub async fn unit_ids(db: &Db, repo: i64, unit_key: &str) -> DbResult<Vec<i64>> {
    let ids = sql!(
        "apk_packages.unit_ids",
        "SELECT id FROM apk_packages WHERE repository_id = $1 AND unit_key = $2 ORDER BY id"
    );
    let rows = db.bound(ids, (repo, unit_key)).fetch_all(db.pool()).await?;
    rows.iter().map(|r| Column::read(r, "id")).collect()
}

/// One unit's packages with ids in `(after, upto]`, by id.
pub async fn unit_range(db: &Db, repo: i64, unit_key: &str, (after, upto): (i64, i64)) -> DbResult<Vec<ApkPackage>> {
    let range = sql!(
        "apk_packages.range",
        concat!(
            "SELECT ",
            columns!(),
            " FROM apk_packages WHERE repository_id = $1 AND unit_key = $2 AND id > $3 AND id <= $4 ORDER BY id"
        )
    );
    let rows = db.bound(range, (repo, unit_key, after, upto)).fetch_all(db.pool()).await?;
    rows.iter().map(ApkPackage::parse).collect()
}

/// A keyset page of the repository's packages with who uploaded each and when (the catalogue's
/// backfill).
pub async fn stamped_page(db: &Db, repo: i64, after_id: i64, limit: i64) -> DbResult<Vec<(ApkPackage, String, i64)>> {
    let page = sql!(
        "apk_packages.stamped",
        concat!(
            "SELECT ",
            columns!(),
            ", uploaded_by, uploaded_at FROM apk_packages WHERE repository_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )
    );
    let rows = db.bound(page, (repo, after_id, limit)).fetch_all(db.pool()).await?;
    rows.iter()
        .map(|r| Ok((ApkPackage::parse(r)?, Column::read(r, "uploaded_by")?, Column::read(r, "uploaded_at")?)))
        .collect()
}

/// Inserts a package row inside the writer's transaction (what its coordinate held is removed first).
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, p: &ApkPackage, uploaded_by: &str) -> DbResult<()> {
    let insert = sql!("apk_packages.insert", "INSERT INTO apk_packages (uploaded_at, uploaded_by, repository_id, unit_key, name, version, path, record, checksum, size, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)");
    db.insert_uploaded(tx, insert, uploaded_by, p).await
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("apk_packages.delete", "DELETE FROM apk_packages WHERE id = $1"), id).await
}
