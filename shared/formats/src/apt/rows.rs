//! Storage of APT packages. (The `sha1` and `sha512` columns are left empty: `Packages` lists MD5
//! and SHA-256 per package, as Debian's archive does.)

use sqlx::any::AnyRow;
use sqlx::{Any, Executor, Row, Transaction};

use packyard_store::db::{text, Db, DbResult};
use packyard_store::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptPackage {
    pub id: i64,
    pub repository_id: i64,
    pub component: String,
    pub name: String,
    pub version: String,
    pub architecture: String,
    pub control: String,
    pub pool_path: String,
    pub size: i64,
    pub md5: String,
    pub sha256: String,
}

macro_rules! columns {
    () => {
        "id, repository_id, component, name, version, architecture, control, pool_path, size, md5, sha256"
    };
}

fn parse(r: &AnyRow) -> DbResult<AptPackage> {
    Ok(AptPackage {
        id: r.try_get("id")?,
        repository_id: r.try_get("repository_id")?,
        component: text(r, "component")?,
        name: text(r, "name")?,
        version: text(r, "version")?,
        architecture: text(r, "architecture")?,
        control: text(r, "control")?,
        pool_path: text(r, "pool_path")?,
        size: r.try_get("size")?,
        md5: text(r, "md5")?.trim().to_string(),
        sha256: text(r, "sha256")?.trim().to_string(),
    })
}

pub async fn by_coordinate<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    name: &str,
    version: &str,
    arch: &str,
) -> DbResult<Option<AptPackage>> {
    let row = db
        .query(sql!(
            "apt_packages.by_coordinate",
            concat!(
                "SELECT ",
                columns!(),
                " FROM apt_packages WHERE repository_id = $1 AND name = $2 AND version = $3 AND architecture = $4"
            )
        ))
        .bind(repo)
        .bind(name)
        .bind(version)
        .bind(arch)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(parse).transpose()
}

pub async fn by_pool_path<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    pool_path: &str,
) -> DbResult<Option<AptPackage>> {
    let row = db
        .query(sql!(
            "apt_packages.by_path",
            concat!("SELECT ", columns!(), " FROM apt_packages WHERE repository_id = $1 AND pool_path = $2")
        ))
        .bind(repo)
        .bind(pool_path)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(parse).transpose()
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
    let query = db.query(sql!("apt_packages.page", concat!("SELECT ", columns!(), " FROM apt_packages WHERE repository_id = $1 AND component = $2 AND (architecture = $3 OR architecture = 'all') AND id > $4 ORDER BY id LIMIT $5"))).bind(repo).bind(component).bind(arch);
    db.page(query, after_id, limit, parse).await
}

/// Inserts a package row inside the writer's transaction (what its coordinate held is removed first).
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, p: &AptPackage, uploaded_by: &str) -> DbResult<()> {
    db.insert_uploaded(sql!("apt_packages.insert", "INSERT INTO apt_packages (uploaded_at, uploaded_by, repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, '')"), uploaded_by)
        .bind(p.repository_id)
        .bind(p.component.as_str())
        .bind(p.name.as_str())
        .bind(p.version.as_str())
        .bind(p.architecture.as_str())
        .bind(p.control.as_str())
        .bind(p.pool_path.as_str())
        .bind(p.size)
        .bind(p.md5.as_str())
        .bind(p.sha256.as_str())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Records the MD5 the upload left for the worker.
pub async fn set_md5(db: &Db, id: i64, md5: &str) -> DbResult<()> {
    db.query(sql!("apt_packages.digests", "UPDATE apt_packages SET md5 = $1 WHERE id = $2"))
        .bind(md5)
        .bind(id)
        .execute(db.pool())
        .await?;
    Ok(())
}

pub async fn delete(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    db.delete_by_id(tx, sql!("apt_packages.delete", "DELETE FROM apt_packages WHERE id = $1"), id).await
}
