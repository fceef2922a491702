//! Storage of APT packages. (The `sha1` and `sha512` columns are left empty: `Packages` lists MD5
//! and SHA-256 per package, as Debian's archive does.)

use sqlx::{Any, Executor, Transaction};

use packyard_store::db::{Column, Db, DbResult};
use packyard_store::sql;

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AptPackage keyed by id, columns columns, trimmed (md5, sha256) {
        pub repository_id: i64,
        pub component: String,
        pub name: String,
        pub version: String,
        pub architecture: String,
        pub control: String,
        pub pool_path: String,
        pub size: i64,
        /// Empty until the worker fills it in (`set_md5s`).
        pub md5: String,
        pub sha256: String,
    }
}

pub async fn by_coordinate<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    name: &str,
    version: &str,
    arch: &str,
) -> DbResult<Option<AptPackage>> {
    let coordinate = sql!(
        "apt_packages.by_coordinate",
        concat!(
            "SELECT ",
            columns!(),
            " FROM apt_packages WHERE repository_id = $1 AND name = $2 AND version = $3 AND architecture = $4"
        )
    );
    db.optional(ex, coordinate, (repo, name, version, arch), AptPackage::parse).await
}

pub async fn by_pool_path<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    pool_path: &str,
) -> DbResult<Option<AptPackage>> {
    let path = sql!(
        "apt_packages.by_path",
        concat!("SELECT ", columns!(), " FROM apt_packages WHERE repository_id = $1 AND pool_path = $2")
    );
    db.optional(ex, path, (repo, pool_path), AptPackage::parse).await
}

/// The blob, size and upload time of the package at `pool_path` (what serving it needs).
pub async fn served(db: &Db, repo: i64, pool_path: &str) -> DbResult<Option<(String, i64, i64)>> {
    let served = sql!(
        "apt_packages.served",
        "SELECT sha256, size, uploaded_at FROM apt_packages WHERE repository_id = $1 AND pool_path = $2"
    );
    db.served_file(served, repo, pool_path).await
}

/// A keyset page of one index: the component's packages of `arch` and of `all`, by id.
pub async fn index_page(
    db: &Db,
    repo: i64,
    component: &str,
    arch: &str,
    after_id: i64,
    limit: i64,
) -> DbResult<Vec<AptPackage>> {
    let page = sql!("apt_packages.page", concat!("SELECT ", columns!(), " FROM apt_packages WHERE repository_id = $1 AND component = $2 AND (architecture = $3 OR architecture = 'all') AND id > $4 ORDER BY id LIMIT $5"));
    db.page(db.bound(page, (repo, component, arch)), after_id, limit, AptPackage::parse).await
}

/// A keyset page of the repository's packages with who uploaded each and when (the catalogue's
/// backfill).
pub async fn stamped_page(db: &Db, repo: i64, after_id: i64, limit: i64) -> DbResult<Vec<(AptPackage, String, i64)>> {
    let page = sql!(
        "apt_packages.stamped",
        concat!(
            "SELECT ",
            columns!(),
            ", uploaded_by, uploaded_at FROM apt_packages WHERE repository_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )
    );
    let rows = db.bound(page, (repo, after_id, limit)).fetch_all(db.pool()).await?;
    rows.iter()
        .map(|r| Ok((AptPackage::parse(r)?, Column::read(r, "uploaded_by")?, Column::read(r, "uploaded_at")?)))
        .collect()
}

/// Inserts a package row inside the writer's transaction (what its coordinate held is removed
/// first); `sha1` and `sha512` stay empty.
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, p: &AptPackage, uploaded_by: &str) -> DbResult<()> {
    let insert = sql!("apt_packages.insert", "INSERT INTO apt_packages (uploaded_at, uploaded_by, repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, '')");
    db.insert_uploaded(tx, insert, uploaded_by, p).await
}

/// Records the MD5s the uploads left for the worker (each package's `md5` filled in), in the
/// rows and the catalogue's assets, in one transaction.
pub async fn set_md5s(db: &Db, packages: &[&AptPackage]) -> DbResult<()> {
    if packages.is_empty() {
        return Ok(());
    }
    let digests = sql!("apt_packages.digests", "UPDATE apt_packages SET md5 = $1 WHERE id = $2");
    let mut tx = db.begin().await?;
    for p in packages {
        db.bound(digests, (p.md5.as_str(), p.id)).execute(&mut *tx).await?;
        db.catalogue_set_md5(&mut tx, p.repository_id, &p.pool_path, &p.md5).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("apt_packages.delete", "DELETE FROM apt_packages WHERE id = $1"), id).await
}
