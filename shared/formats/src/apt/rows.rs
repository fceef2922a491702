//! Storage of APT packages. (The `sha1` and `sha512` columns are left empty: `Packages` lists MD5
//! and SHA-256 per package, as Debian's archive does.)

use sqlx::{Any, Executor, Row as _, Transaction};

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

/// Every version and architecture of the package `name` in the repository.
pub async fn by_name(db: &Db, repo: i64, name: &str) -> DbResult<Vec<AptPackage>> {
    let s = sql!(
        "apt_packages.by_name",
        concat!("SELECT ", columns!(), " FROM apt_packages WHERE repository_id = $1 AND name = $2 ORDER BY id")
    );
    let rows = db.bound(s, (repo, name)).fetch_all(db.pool()).await?;
    rows.iter().map(AptPackage::parse).collect()
}

/// The blob, size and upload time of the package at `pool_path` (what serving it needs).
pub async fn served(db: &Db, repo: i64, pool_path: &str) -> DbResult<Option<(String, i64, i64)>> {
    let served = sql!(
        "apt_packages.served",
        "SELECT sha256, size, uploaded_at FROM apt_packages WHERE repository_id = $1 AND pool_path = $2"
    );
    db.served_file(served, repo, pool_path).await
}

/// The blob, size and upload time of the file at `pool_path`: a package, or a file of a source
/// package (what serving it needs).
pub async fn served_any(db: &Db, repo: i64, pool_path: &str) -> DbResult<Option<(String, i64, i64)>> {
    if let Some(found) = served(db, repo, pool_path).await? {
        return Ok(Some(found));
    }
    let source = sql!(
        "apt_source_files.served",
        "SELECT sha256, size, uploaded_at FROM apt_source_files WHERE repository_id = $1 AND pool_path = $2 ORDER BY source_id LIMIT 1"
    );
    db.served_file(source, repo, pool_path).await
}

/// A keyset page of one index of distribution `dist`: the component's packages of `arch` and
/// of `all` in it, by id.
pub async fn index_page(
    db: &Db,
    repo: i64,
    (dist, component, arch): (&str, &str, &str),
    after_id: i64,
    limit: i64,
) -> DbResult<Vec<AptPackage>> {
    let page = sql!("apt_packages.page", concat!("SELECT ", columns!(), " FROM apt_packages p WHERE repository_id = $1 AND component = $2 AND (architecture = $3 OR architecture = 'all') AND EXISTS (SELECT 1 FROM apt_distribution_packages d WHERE d.package_id = p.id AND d.distribution = $4) AND id > $5 ORDER BY id LIMIT $6"));
    db.page(db.bound(page, (repo, component, arch, dist)), after_id, limit, AptPackage::parse).await
}

/// One noted change of what a distribution lists (see [`note_change`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexChange {
    /// The note's own id (a build that was published forgets it by this).
    pub seq: i64,
    pub member: Member,
}

/// Notes, in the writer's transaction, that `m` joined distribution `dist`:
/// the next build of the distribution re-renders the chunks that hold it (`chunks.rs`).
async fn note_change(db: &Db, tx: &mut Transaction<'_, Any>, m: Member, repo: i64, dist: &str) -> DbResult<()> {
    let (source, id) = match m {
        Member::Package(id) => (0i64, id),
        Member::Source(id) => (1, id),
    };
    let note = sql!(
        "apt_index_changes.note",
        "INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) VALUES ($1, $2, $3, $4)"
    );
    db.bound(note, (repo, dist, source, id)).execute(&mut **tx).await?;
    Ok(())
}

/// Notes `m`'s membership of `dist` (every distribution it is in: `None`) before it goes — it
/// leaves, or its row is deleted. Nothing when it is not a member.
async fn note_memberships(db: &Db, tx: &mut Transaction<'_, Any>, m: Member, dist: Option<&str>) -> DbResult<()> {
    let (statement, id) = match (m, dist) {
        (Member::Package(id), None) => (
            sql!("apt_index_changes.note_package", "INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) SELECT repository_id, distribution, 0, package_id FROM apt_distribution_packages WHERE package_id = $1"),
            id,
        ),
        (Member::Source(id), None) => (
            sql!("apt_index_changes.note_source", "INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) SELECT repository_id, distribution, 1, source_id FROM apt_distribution_sources WHERE source_id = $1"),
            id,
        ),
        (Member::Package(id), Some(_)) => (
            sql!("apt_index_changes.note_package_leaving", "INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) SELECT repository_id, distribution, 0, package_id FROM apt_distribution_packages WHERE package_id = $1 AND distribution = $2"),
            id,
        ),
        (Member::Source(id), Some(_)) => (
            sql!("apt_index_changes.note_source_leaving", "INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) SELECT repository_id, distribution, 1, source_id FROM apt_distribution_sources WHERE source_id = $1 AND distribution = $2"),
            id,
        ),
    };
    let query = db.bound(statement, (id,));
    let query = match dist {
        Some(d) => query.bind(d),
        None => query,
    };
    query.execute(&mut **tx).await?;
    Ok(())
}

/// A keyset page of the changes noted for distribution `dist` of `repo` and not yet
/// forgotten, in order.
pub async fn index_changes_page(
    db: &Db,
    repo: i64,
    dist: &str,
    after_seq: i64,
    limit: i64,
) -> DbResult<Vec<IndexChange>> {
    let page = sql!(
        "apt_index_changes.page",
        "SELECT id, source, member_id FROM apt_index_changes WHERE repository_id = $1 AND distribution = $2 AND id > $3 ORDER BY id LIMIT $4"
    );
    db.page(db.bound(page, (repo, dist)), after_seq, limit, parse_change).await
}

fn parse_change(r: &sqlx::any::AnyRow) -> DbResult<IndexChange> {
    let (source, id): (i64, i64) = (r.try_get("source")?, r.try_get("member_id")?);
    let member = if source == 0 { Member::Package(id) } else { Member::Source(id) };
    Ok(IndexChange { seq: r.try_get("id")?, member })
}

/// Forgets noted changes of `repo`'s `dist` that a published snapshot reflects: `runs` of
/// consecutive note ids, each of which was read (so a note committed later is never in one),
/// one statement per run — a bulk import's notes are a few statements.
pub async fn forget_index_changes(db: &Db, repo: i64, dist: &str, runs: &[(i64, i64)]) -> DbResult<()> {
    let forget = sql!(
        "apt_index_changes.forget",
        "DELETE FROM apt_index_changes WHERE repository_id = $1 AND distribution = $2 AND id >= $3 AND id <= $4"
    );
    let mut tx = db.begin().await?;
    for (first, last) in runs {
        db.bound(forget, (repo, dist, *first, *last)).execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// What a distribution lists: a binary package or a source package (by row id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Package(i64),
    Source(i64),
}

/// The distributions `m` is in.
pub async fn distributions<'e, E: Executor<'e, Database = Any>>(db: &Db, ex: E, m: Member) -> DbResult<Vec<String>> {
    let (statement, id) = match m {
        Member::Package(id) => (
            sql!(
                "apt_distribution_packages.of",
                "SELECT distribution FROM apt_distribution_packages WHERE package_id = $1 ORDER BY distribution"
            ),
            id,
        ),
        Member::Source(id) => (
            sql!(
                "apt_distribution_sources.of",
                "SELECT distribution FROM apt_distribution_sources WHERE source_id = $1 ORDER BY distribution"
            ),
            id,
        ),
    };
    let rows = db.bound(statement, (id,)).fetch_all(ex).await?;
    rows.iter().map(|r| Column::read(r, "distribution")).collect()
}

/// Adds `m` of repository `repo` to distribution `dist` (nothing when it is there).
pub async fn join(db: &Db, tx: &mut Transaction<'_, Any>, m: Member, repo: i64, dist: &str) -> DbResult<()> {
    let (statement, id) = match m {
        Member::Package(id) => (
            packyard_store::insert_or_ignore!(
                "apt_distribution_packages.add",
                "INSERT INTO apt_distribution_packages (package_id, repository_id, distribution) VALUES ($1, $2, $3)"
            ),
            id,
        ),
        Member::Source(id) => (
            packyard_store::insert_or_ignore!(
                "apt_distribution_sources.add",
                "INSERT INTO apt_distribution_sources (source_id, repository_id, distribution) VALUES ($1, $2, $3)"
            ),
            id,
        ),
    };
    if db.bound(statement, (id, repo, dist)).execute(&mut **tx).await?.rows_affected() > 0 {
        note_change(db, tx, m, repo, dist).await?;
    }
    Ok(())
}

/// Takes `m` out of distribution `dist`: whether it was in it.
pub async fn leave(db: &Db, tx: &mut Transaction<'_, Any>, m: Member, dist: &str) -> DbResult<bool> {
    let (statement, id) = match m {
        Member::Package(id) => (
            sql!(
                "apt_distribution_packages.remove",
                "DELETE FROM apt_distribution_packages WHERE package_id = $1 AND distribution = $2"
            ),
            id,
        ),
        Member::Source(id) => (
            sql!(
                "apt_distribution_sources.remove",
                "DELETE FROM apt_distribution_sources WHERE source_id = $1 AND distribution = $2"
            ),
            id,
        ),
    };
    note_memberships(db, tx, m, Some(dist)).await?;
    Ok(db.bound(statement, (id, dist)).execute(&mut **tx).await?.rows_affected() > 0)
}

/// A hosted repository's only distribution was renamed: its packages and sources go with it.
pub async fn rename_distribution(db: &Db, repo: i64, from: &str, to: &str) -> DbResult<()> {
    let packages = sql!(
        "apt_distribution_packages.rename",
        "UPDATE apt_distribution_packages SET distribution = $1 WHERE repository_id = $2 AND distribution = $3 AND NOT EXISTS (SELECT 1 FROM apt_distribution_packages o WHERE o.package_id = apt_distribution_packages.package_id AND o.distribution = $4)"
    );
    let sources = sql!(
        "apt_distribution_sources.rename",
        "UPDATE apt_distribution_sources SET distribution = $1 WHERE repository_id = $2 AND distribution = $3 AND NOT EXISTS (SELECT 1 FROM apt_distribution_sources o WHERE o.source_id = apt_distribution_sources.source_id AND o.distribution = $4)"
    );
    let mut tx = db.begin().await?;
    db.bound(packages, (to, repo, from, to)).execute(&mut *tx).await?;
    db.bound(sources, (to, repo, from, to)).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
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
/// first); `sha1` and `sha512` stay empty. Returns its id.
pub async fn insert(db: &Db, tx: &mut Transaction<'_, Any>, p: &AptPackage, uploaded_by: &str) -> DbResult<i64> {
    use packyard_store::sql::Binds as _;
    let insert = packyard_store::insert_id!("apt_packages.insert", "INSERT INTO apt_packages (uploaded_at, uploaded_by, repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, '', $12, '')");
    let query = p.bind_to(db.query(insert).bind(packyard_store::db::now_ms()).bind(uploaded_by));
    db.insert_id(query, &mut **tx).await
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
    note_memberships(db, tx, Member::Package(id), None).await?;
    db.delete_by_id(tx, sql!("apt_packages.delete", "DELETE FROM apt_packages WHERE id = $1"), id).await
}

packyard_store::row! {
    /// A source package: its `.dsc` paragraph (unsigned) and where its files are.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AptSource keyed by id, columns source_columns, trimmed () {
        pub repository_id: i64,
        pub component: String,
        pub name: String,
        pub version: String,
        pub control: String,
        /// `pool/<component>/<prefix>/<source>`
        pub directory: String,
        pub dsc_path: String,
    }
}

packyard_store::row! {
    /// One file of a source package (the `.dsc` first), at `directory/<name>`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AptSourceFile, columns source_file_columns, trimmed (md5, sha1, sha256) {
        pub source_id: i64,
        pub repository_id: i64,
        pub position: i64,
        pub pool_path: String,
        pub size: i64,
        pub md5: String,
        pub sha1: String,
        pub sha256: String,
    }
}

impl AptSourceFile {
    /// The file's name (its pool path's last segment).
    pub fn name(&self) -> &str {
        self.pool_path.rsplit('/').next().unwrap_or_default()
    }
}

pub async fn source_by_coordinate<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    name: &str,
    version: &str,
) -> DbResult<Option<AptSource>> {
    let coordinate = sql!(
        "apt_sources.by_coordinate",
        concat!(
            "SELECT ",
            source_columns!(),
            " FROM apt_sources WHERE repository_id = $1 AND name = $2 AND version = $3"
        )
    );
    db.optional(ex, coordinate, (repo, name, version), AptSource::parse).await
}

pub async fn source_by_dsc_path<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    dsc_path: &str,
) -> DbResult<Option<AptSource>> {
    let path = sql!(
        "apt_sources.by_dsc",
        concat!("SELECT ", source_columns!(), " FROM apt_sources WHERE repository_id = $1 AND dsc_path = $2")
    );
    db.optional(ex, path, (repo, dsc_path), AptSource::parse).await
}

/// The files of a source package, the `.dsc` first.
pub async fn source_files<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    source_id: i64,
) -> DbResult<Vec<AptSourceFile>> {
    let files = sql!(
        "apt_source_files.of",
        concat!("SELECT ", source_file_columns!(), " FROM apt_source_files WHERE source_id = $1 ORDER BY position")
    );
    let rows = db.bound(files, (source_id,)).fetch_all(ex).await?;
    rows.iter().map(AptSourceFile::parse).collect()
}

/// The file a repository holds at a pool path of a source package (any source's), if any.
pub async fn source_file_at<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repo: i64,
    pool_path: &str,
) -> DbResult<Option<AptSourceFile>> {
    let at = sql!(
        "apt_source_files.at",
        concat!(
            "SELECT ",
            source_file_columns!(),
            " FROM apt_source_files WHERE repository_id = $1 AND pool_path = $2 ORDER BY source_id LIMIT 1"
        )
    );
    db.optional(ex, at, (repo, pool_path), AptSourceFile::parse).await
}

/// Inserts a source package with its files in the writer's transaction. Returns its id.
pub async fn insert_source(
    db: &Db,
    tx: &mut Transaction<'_, Any>,
    s: &AptSource,
    files: &[AptSourceFile],
    uploaded_by: &str,
) -> DbResult<i64> {
    use packyard_store::sql::Binds as _;
    let insert = packyard_store::insert_id!("apt_sources.insert", "INSERT INTO apt_sources (uploaded_at, uploaded_by, repository_id, component, name, version, control, directory, dsc_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
    let now = packyard_store::db::now_ms();
    let id = db.insert_id(s.bind_to(db.query(insert).bind(now).bind(uploaded_by)), &mut **tx).await?;
    let file = sql!("apt_source_files.insert", "INSERT INTO apt_source_files (uploaded_at, source_id, repository_id, position, pool_path, size, md5, sha1, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)");
    for f in files {
        let f = AptSourceFile { source_id: id, ..f.clone() };
        f.bind_to(db.query(file).bind(now)).execute(&mut **tx).await?;
    }
    Ok(id)
}

pub async fn delete_source(db: &Db, tx: &mut Transaction<'_, Any>, id: i64) -> DbResult<bool> {
    note_memberships(db, tx, Member::Source(id), None).await?;
    db.delete_by_id(tx, sql!("apt_sources.delete", "DELETE FROM apt_sources WHERE id = $1"), id).await
}

/// A keyset page of one `Sources` index: the component's source packages in `dist`, by id,
/// each with its files.
pub async fn sources_page(
    db: &Db,
    repo: i64,
    (dist, component): (&str, &str),
    after_id: i64,
    limit: i64,
) -> DbResult<Vec<(AptSource, Vec<AptSourceFile>)>> {
    let page = sql!("apt_sources.page", concat!("SELECT ", source_columns!(), " FROM apt_sources s WHERE repository_id = $1 AND component = $2 AND EXISTS (SELECT 1 FROM apt_distribution_sources d WHERE d.source_id = s.id AND d.distribution = $3) AND id > $4 ORDER BY id LIMIT $5"));
    let sources = db.page(db.bound(page, (repo, component, dist)), after_id, limit, AptSource::parse).await?;
    let (Some(first), Some(last)) = (sources.first(), sources.last()) else { return Ok(Vec::new()) };
    // The page's files in one statement.
    let files = sql!(
        "apt_source_files.page",
        concat!("SELECT ", source_file_columns!(), " FROM apt_source_files WHERE repository_id = $1 AND source_id >= $2 AND source_id <= $3 ORDER BY source_id, position")
    );
    let rows = db.bound(files, (repo, first.id, last.id)).fetch_all(db.pool()).await?;
    let mut files: Vec<AptSourceFile> = rows.iter().map(AptSourceFile::parse).collect::<DbResult<_>>()?;
    let mut out = Vec::with_capacity(sources.len());
    for s in sources {
        let mine: Vec<AptSourceFile> = files.iter().filter(|f| f.source_id == s.id).cloned().collect();
        files.retain(|f| f.source_id != s.id);
        out.push((s, mine));
    }
    Ok(out)
}
