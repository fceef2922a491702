//! Storage of APK packages.

use sqlx::any::AnyRow;
use sqlx::{Any, Executor, Row, Transaction};

use packyard_store::db::{text, Db, DbResult};
use packyard_store::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApkPackage {
    pub id: i64,
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

macro_rules! columns {
    () => {
        "id, repository_id, unit_key, name, version, path, record, checksum, size, sha256"
    };
}

fn parse(r: &AnyRow) -> DbResult<ApkPackage> {
    Ok(ApkPackage {
        id: r.try_get("id")?,
        repository_id: r.try_get("repository_id")?,
        unit_key: text(r, "unit_key")?,
        name: text(r, "name")?,
        version: text(r, "version")?,
        path: text(r, "path")?,
        record: text(r, "record")?,
        checksum: text(r, "checksum")?.trim().to_string(),
        size: r.try_get("size")?,
        sha256: text(r, "sha256")?.trim().to_string(),
    })
}

pub async fn by_path<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    path: &str,
) -> DbResult<Option<ApkPackage>> {
    let row = db
        .query(sql!(
            "apk_packages.by_path",
            concat!("SELECT ", columns!(), " FROM apk_packages WHERE repository_id = $1 AND path = $2")
        ))
        .bind(repo)
        .bind(path)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(parse).transpose()
}

/// A keyset page of one unit's packages, by id.
pub async fn unit_page(db: &Db, repo: i64, unit_key: &str, after_id: i64, limit: i64) -> DbResult<Vec<ApkPackage>> {
    let query = db
        .query(sql!(
            "apk_packages.page",
            concat!(
                "SELECT ",
                columns!(),
                " FROM apk_packages WHERE repository_id = $1 AND unit_key = $2 AND id > $3 ORDER BY id LIMIT $4"
            )
        ))
        .bind(repo)
        .bind(unit_key);
    db.page(query, after_id, limit, parse).await
}

/// Inserts a package row inside the writer's transaction (what its coordinate held is removed first).
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, p: &ApkPackage, uploaded_by: &str) -> DbResult<()> {
    db.insert_uploaded(sql!("apk_packages.insert", "INSERT INTO apk_packages (uploaded_at, uploaded_by, repository_id, unit_key, name, version, path, record, checksum, size, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"), uploaded_by)
        .bind(p.repository_id)
        .bind(p.unit_key.as_str())
        .bind(p.name.as_str())
        .bind(p.version.as_str())
        .bind(p.path.as_str())
        .bind(p.record.as_str())
        .bind(p.checksum.as_str())
        .bind(p.size)
        .bind(p.sha256.as_str())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("apk_packages.delete", "DELETE FROM apk_packages WHERE id = $1"), id).await
}
