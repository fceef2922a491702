//! Storage of Conan revisions and their files. A recipe revision has `pkgid = prev = ''`.

use sqlx::{Any, Transaction};

use packyard_store::db::{now_ms, text, Db, DbError, DbResult};
use packyard_store::sql::{Binds, Sql};
use packyard_store::{insert_or_ignore, sql, upsert};

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConanRevision keyed by id, columns rev_columns, trimmed () {
        pub reference: String,
        pub rrev: String,
        pub pkgid: String,
        pub prev: String,
        pub complete: bool,
        pub time_ms: i64,
    }
}

packyard_store::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConanFile, columns file_columns, trimmed (sha256, md5, sha1) {
        pub path: String,
        pub sha256: String,
        pub size: i64,
        pub md5: String,
        pub sha1: String,
    }
}

/// One revision by its whole key.
const REVISION: &Sql = sql!(
    "conan_revisions.get",
    concat!(
        "SELECT ",
        rev_columns!(),
        " FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND rrev = $3 AND pkgid = $4 AND prev = $5"
    )
);

pub async fn revision(
    db: &Db,
    repo: i64,
    reference: &str,
    rrev: &str,
    pkgid: &str,
    prev: &str,
) -> DbResult<Option<ConanRevision>> {
    db.optional(db.pool(), REVISION, RevisionKey { repo, reference, rrev, pkgid, prev }, ConanRevision::parse).await
}

pub async fn files(db: &Db, revision_id: i64) -> DbResult<Vec<ConanFile>> {
    let rows = db.bound(FILES, (revision_id,)).fetch_all(db.pool()).await?;
    rows.iter().map(ConanFile::parse).collect()
}

/// Complete revisions, newest first: the recipe revisions of `reference` (`rrev = None`), or
/// the package revisions of `pkgid` under `rrev`, or every package revision under `rrev`
/// (`pkgid = None`).
pub async fn revisions(
    db: &Db,
    repo: i64,
    reference: &str,
    rrev: Option<&str>,
    pkgid: Option<&str>,
) -> DbResult<Vec<ConanRevision>> {
    let query = match (rrev, pkgid) {
        (None, _) => {
            let recipes = sql!("conan_revisions.list", concat!("SELECT ", rev_columns!(), " FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND complete = 1 AND pkgid = '' ORDER BY time_ms DESC, id DESC"));
            db.bound(recipes, (repo, reference))
        }
        (Some(r), Some(p)) => {
            let package = sql!("conan_revisions.list", concat!("SELECT ", rev_columns!(), " FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND complete = 1 AND rrev = $3 AND pkgid = $4 AND pkgid <> '' ORDER BY time_ms DESC, id DESC"));
            db.bound(package, (repo, reference, r, p))
        }
        (Some(r), None) => {
            let packages = sql!("conan_revisions.list", concat!("SELECT ", rev_columns!(), " FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND complete = 1 AND rrev = $3 AND pkgid <> '' ORDER BY time_ms DESC, id DESC"));
            db.bound(packages, (repo, reference, r))
        }
    };
    let rows = query.fetch_all(db.pool()).await?;
    rows.iter().map(ConanRevision::parse).collect()
}

/// The references with a complete recipe revision.
pub async fn references(db: &Db, repo: i64) -> DbResult<Vec<String>> {
    let references = sql!("conan_revisions.references", "SELECT DISTINCT reference FROM conan_revisions WHERE repository_id = $1 AND pkgid = '' AND complete = 1 ORDER BY reference");
    let rows = db.bound(references, (repo,)).fetch_all(db.pool()).await?;
    rows.iter().map(|r| text(r, "reference")).collect()
}

/// A keyset page of the repository's complete revisions, by id (the catalogue's backfill).
pub async fn complete_page(db: &Db, repo: i64, after_id: i64, limit: i64) -> DbResult<Vec<ConanRevision>> {
    let page = sql!(
        "conan_revisions.complete_page",
        concat!(
            "SELECT ",
            rev_columns!(),
            " FROM conan_revisions WHERE repository_id = $1 AND complete = 1 AND id > $2 ORDER BY id LIMIT $3"
        )
    );
    db.page(db.bound(page, (repo,)), after_id, limit, ConanRevision::parse).await
}

// --- inside a writer's transaction -------------------------------------------------------

/// One revision by its whole key, inside the writer's transaction.
pub async fn revision_in(
    db: &Db,
    tx: &mut Transaction<'_, Any>,
    key: RevisionKey<'_>,
) -> DbResult<Option<ConanRevision>> {
    db.optional(&mut **tx, REVISION, key, ConanRevision::parse).await
}

/// The revision's row, created (incomplete) if absent, inside the writer's transaction.
pub async fn ensure_revision_in(
    db: &Db,
    tx: &mut Transaction<'_, Any>,
    key: RevisionKey<'_>,
) -> DbResult<ConanRevision> {
    if let Some(r) = revision_in(db, tx, key).await? {
        return Ok(r);
    }
    let insert = insert_or_ignore!(
        "conan_revisions.insert",
        "INSERT INTO conan_revisions (repository_id, reference, rrev, pkgid, prev, complete, time_ms) VALUES ($1, $2, $3, $4, $5, 0, $6)"
    );
    let RevisionKey { repo, reference, rrev, pkgid, prev } = key;
    db.bound(insert, (repo, reference, rrev, pkgid, prev, now_ms())).execute(&mut **tx).await?;
    revision_in(db, tx, key).await?.ok_or_else(|| DbError::Retry("the revision vanished while it was created".into()))
}

pub async fn files_in(db: &Db, tx: &mut Transaction<'_, Any>, revision_id: i64) -> DbResult<Vec<ConanFile>> {
    let rows = db.bound(FILES, (revision_id,)).fetch_all(&mut **tx).await?;
    rows.iter().map(ConanFile::parse).collect()
}

/// Records (or replaces) one file of a revision, inside the writer's transaction.
pub async fn put_file_in(db: &Db, tx: &mut Transaction<'_, Any>, revision_id: i64, f: &ConanFile) -> DbResult<()> {
    let put = upsert!(
        "conan_files.put",
        "INSERT INTO conan_files (revision_id, path, sha256, size, md5, sha1) VALUES ($1, $2, $3, $4, $5, $6)",
        on "conan_files" ("revision_id, path"),
        set "sha256 = NEW.sha256, size = NEW.size, md5 = NEW.md5, sha1 = NEW.sha1"
    );
    f.bind_to(db.bound(put, (revision_id,))).execute(&mut **tx).await?;
    Ok(())
}

/// Makes a revision visible (its manifest arrived and matched), timed `at_ms` (the upload's).
pub async fn complete_in(db: &Db, tx: &mut Transaction<'_, Any>, revision_id: i64, at_ms: i64) -> DbResult<()> {
    let complete =
        sql!("conan_revisions.complete", "UPDATE conan_revisions SET complete = 1, time_ms = $1 WHERE id = $2");
    db.bound(complete, (at_ms, revision_id)).execute(&mut **tx).await?;
    Ok(())
}

/// Deletes revisions (their files go with them) inside the writer's transaction: a recipe
/// revision and its packages (`package = None`, `packages_only = false`), only its packages
/// (`packages_only`), or one package revision. Returns how many rows went.
pub async fn delete_in(
    db: &Db,
    tx: &mut Transaction<'_, Any>,
    repo: i64,
    reference: &str,
    rrev: &str,
    package: Option<(&str, &str)>,
    packages_only: bool,
) -> DbResult<u64> {
    let done = match package {
        Some((pkgid, prev)) => {
            let one = sql!("conan_revisions.delete", "DELETE FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND rrev = $3 AND pkgid = $4 AND prev = $5");
            db.bound(one, RevisionKey { repo, reference, rrev, pkgid, prev }).execute(&mut **tx).await?
        }
        None => {
            let statement = if packages_only {
                sql!("conan_revisions.delete", "DELETE FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND rrev = $3 AND pkgid <> ''")
            } else {
                sql!(
                    "conan_revisions.delete",
                    "DELETE FROM conan_revisions WHERE repository_id = $1 AND reference = $2 AND rrev = $3"
                )
            };
            db.bound(statement, (repo, reference, rrev)).execute(&mut **tx).await?
        }
    };
    Ok(done.rows_affected())
}

/// A revision's files, by path.
const FILES: &Sql = sql!(
    "conan_files.list",
    concat!("SELECT ", file_columns!(), " FROM conan_files WHERE revision_id = $1 ORDER BY path")
);

/// Which revision: a recipe revision has `pkgid = prev = ""`.
#[derive(Debug, Clone, Copy)]
pub struct RevisionKey<'a> {
    pub repo: i64,
    pub reference: &'a str,
    pub rrev: &'a str,
    pub pkgid: &'a str,
    pub prev: &'a str,
}

impl<'a> Binds<'a> for RevisionKey<'a> {
    /// The key as `$1 … $5` (repository, reference, rrev, pkgid, prev).
    fn bind_to(self, query: packyard_store::sql::Query<'a>) -> packyard_store::sql::Query<'a> {
        (self.repo, self.reference, self.rrev, self.pkgid, self.prev).bind_to(query)
    }
}
