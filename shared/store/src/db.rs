//! The database layer: one storage API over SQLite, PostgreSQL and MySQL/MariaDB.
//!
//! Every statement goes through the dialect layer (`sql.rs`): written once in a portable
//! form, rendered for the connected backend on first use, and counted in
//! `packyard_db_queries_total` under its `op` when it runs.

use std::borrow::Cow;
use std::str::FromStr;

pub use crate::sql::Backend;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{Executor, Row};

use crate::metrics::Metrics;
use packyard_model::config::DatabaseConfig;

pub mod advisories;
pub mod blobs;
pub mod catalogue;
pub mod cleanup;
pub mod imports;
pub mod io;
pub mod migrate;
pub mod policy;
pub mod proxy;
pub mod publication;
pub mod repositories;
pub mod security;
pub mod snapshots;
pub mod users;
pub mod webhooks;

/// Storage failures, mapped once to HTTP statuses by the API.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("not found")]
    NotFound,
    #[error("{0}")]
    Conflict(String),
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Other(#[source] sqlx::Error),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// A deadlock or serialization failure: the whole transaction may simply be run again.
    #[error("transaction conflict: {0}")]
    Retry(String),
}

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict(db.message().to_string()),
            // SQLSTATE 40001 (serialization failure; MySQL's deadlock) and 40P01 (PostgreSQL deadlock).
            // SQLite's SQLITE_BUSY_SNAPSHOT (517): a transaction that read, then wrote after
            // another connection's commit; no wait helps, only running it again.
            sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40001" | "40P01" | "517")) => {
                Self::Retry(db.message().to_string())
            }
            sqlx::Error::Database(db) if waited_too_long(db.as_ref()) => Self::Unavailable(db.message().to_string()),
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(e.to_string()),
            _ => Self::Other(e),
        }
    }
}

/// Whether the database gave up waiting — for a lock, or for a statement to finish — rather
/// than refused the statement: the service is busy (a 503 with `Retry-After`), not broken.
/// SQLite: `SQLITE_BUSY` and `SQLITE_LOCKED` and their extended codes once `busy_timeout`
/// ran out (`SQLITE_BUSY_SNAPSHOT`, 517, is a conflict to run again instead). PostgreSQL:
/// `statement_timeout` (57014) and `lock_timeout` (55P03). MySQL and MariaDB: a lock wait time-out
/// (1205), MySQL's `max_execution_time` (3024) and MariaDB's `max_statement_time` (1969).
fn waited_too_long(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return matches!(my.number(), 1205 | 1969 | 3024);
    }
    matches!(db.code().as_deref(), Some("5" | "6" | "261" | "262" | "773" | "57014" | "55P03"))
}

pub type DbResult<T> = Result<T, DbError>;

/// A cheap-to-clone handle to the pool.
#[derive(Clone)]
pub struct Db {
    pool: io::DbPool,
    backend: Backend,
    metrics: Arc<Metrics>,
}

impl Db {
    /// Connects with the configured pool limits and timeouts. Creates the SQLite file (and its
    /// directory) when missing.
    pub async fn connect(cfg: &DatabaseConfig, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(&cfg.url)
            .ok_or_else(|| anyhow::anyhow!("database.url: unsupported scheme in {:?}", cfg.url))?;
        let url = match backend {
            Backend::Sqlite => prepare_sqlite_url(&cfg.url)?,
            _ => cfg.url.clone(),
        };
        let options = AnyConnectOptions::from_str(&url)?;
        let statement_timeout_ms = cfg.statement_timeout_ms;
        let busy_timeout_ms = cfg.busy_timeout_ms;
        // Created in the database runtime's context: its maintenance tasks run there (`io`).
        let pool = io::within(|| {
            AnyPoolOptions::new()
                .max_connections(match backend {
                    // One writer at a time anyway; a few readers beside it in WAL mode.
                    Backend::Sqlite => cfg.max_connections.min(8),
                    _ => cfg.max_connections,
                })
                .min_connections(cfg.min_connections)
                .acquire_timeout(Duration::from_millis(cfg.acquire_timeout_ms))
                .after_connect(move |conn, _meta| {
                    Box::pin(async move {
                        match backend {
                            Backend::Sqlite => {
                                conn.execute("PRAGMA journal_mode = WAL").await?;
                                conn.execute("PRAGMA synchronous = NORMAL").await?;
                                conn.execute("PRAGMA foreign_keys = ON").await?;
                                conn.execute(format!("PRAGMA busy_timeout = {busy_timeout_ms}").as_str()).await?;
                            }
                            Backend::Postgres => {
                                conn.execute(format!("SET statement_timeout = {statement_timeout_ms}").as_str())
                                    .await?;
                            }
                            Backend::MySql => {
                                conn.execute("SET SESSION sql_mode = 'ANSI_QUOTES,STRICT_ALL_TABLES,NO_ZERO_DATE'")
                                    .await?;
                                // MariaDB counts seconds, MySQL milliseconds (SELECT only).
                                let secs = statement_timeout_ms as f64 / 1000.0;
                                let maria = format!("SET SESSION max_statement_time = {secs}");
                                if conn.execute(maria.as_str()).await.is_err() {
                                    conn.execute(
                                        format!("SET SESSION max_execution_time = {statement_timeout_ms}").as_str(),
                                    )
                                    .await?;
                                }
                            }
                        }
                        Ok(())
                    })
                })
                .connect_lazy_with(options)
        });
        let pool = io::DbPool::new(pool);
        // At once, as before: a wrong URL or an unreachable server stops the start here.
        drop(
            pool.acquire()
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to the database ({}): {e}", backend.as_str()))?,
        );
        Ok(Self { pool, backend, metrics })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn pool(&self) -> &io::DbPool {
        &self.pool
    }

    /// Begins a writing transaction. On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`), waiting up to the busy timeout: a deferred transaction that read first
    /// would fail at its first write, without waiting, whenever another connection wrote since.
    pub async fn begin(&self) -> DbResult<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            _ => self.pool.begin().await?,
        })
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Counts one query under `op` (a short static name such as `repositories.get`).
    pub fn count(&self, op: &'static str) {
        self.metrics.db_queries_total.with_label_values(&[op]).inc();
    }

    /// `SELECT 1`: reachable and answering.
    pub async fn ping(&self) -> DbResult<()> {
        self.query(crate::sql!("ping", "SELECT 1")).execute(&self.pool).await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Runs a whole transaction again when the database reports a deadlock or serialization
/// failure ([`DbError::Retry`]), a few times with a short growing pause. Every writer that
/// touches a hot row (a publication unit) goes through this.
pub async fn retry_conflicts<T, F, Fut>(mut op: F) -> DbResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = DbResult<T>>,
{
    let mut attempt = 0u32;
    loop {
        match op().await {
            Err(DbError::Retry(m)) if attempt < 8 => {
                attempt += 1;
                tracing::debug!(attempt, error = %m, "retrying a transaction after a conflict");
                tokio::time::sleep(Duration::from_millis(2u64 << attempt)).await;
            }
            other => return other,
        }
    }
}

/// The file a `sqlite:` database URL names; `None` for an in-memory database or no path.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = rest.split_once('?').map_or(rest, |(p, _)| p);
    (!path.is_empty() && path != ":memory:").then(|| std::path::PathBuf::from(path))
}

/// Adds `mode=rwc` so the file is created, and creates the parent directory and, when missing,
/// the file itself readable by its owner only (0600, like the generated secret: it holds the
/// password hashes and the sealed keys); SQLite gives its `-wal` and `-shm` files the same mode.
fn prepare_sqlite_url(url: &str) -> anyhow::Result<String> {
    let rest = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut params: Vec<Cow<'_, str>> = query.split('&').filter(|p| !p.is_empty()).map(Cow::Borrowed).collect();
    let read_only = params.iter().any(|p| *p == "mode=ro");
    if path != ":memory:" && !path.is_empty() && !read_only {
        let file = std::path::Path::new(path);
        if let Some(parent) = file.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| anyhow::anyhow!("database.url: cannot create {}: {e}", parent.display()))?;
            }
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(file) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => anyhow::bail!("database.url: cannot create {}: {e}", file.display()),
        }
    }
    if !params.iter().any(|p| p.starts_with("mode=")) {
        params.push(Cow::Borrowed("mode=rwc"));
    }
    Ok(format!("sqlite://{path}?{}", params.join("&")))
}

/// Reads a text column that MySQL may report as a BLOB (TEXT types) through the Any driver.
pub fn text(row: &AnyRow, col: &str) -> DbResult<String> {
    match row.try_get::<String, _>(col) {
        Ok(s) => Ok(s),
        Err(_) => {
            let bytes: Vec<u8> = row.try_get(col)?;
            String::from_utf8(bytes).map_err(|_| DbError::Corrupt(format!("column {col} is not UTF-8")))
        }
    }
}

/// Reads an optional text column (see [`text`]).
pub fn opt_text(row: &AnyRow, col: &str) -> DbResult<Option<String>> {
    match row.try_get::<Option<String>, _>(col) {
        Ok(s) => Ok(s),
        Err(_) => {
            let bytes: Option<Vec<u8>> = row.try_get(col)?;
            bytes
                .map(|b| String::from_utf8(b).map_err(|_| DbError::Corrupt(format!("column {col} is not UTF-8"))))
                .transpose()
        }
    }
}

/// A column's value as a field of a [`crate::row!`] type.
pub trait Column: Sized {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self>;
}

impl Column for i64 {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self> {
        Ok(row.try_get(col)?)
    }
}

/// A boolean is kept as an integer, 0 or 1.
impl Column for bool {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self> {
        Ok(row.try_get::<i64, _>(col)? != 0)
    }
}

impl Column for Option<i64> {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self> {
        Ok(row.try_get(col)?)
    }
}

impl Column for Option<String> {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self> {
        opt_text(row, col)
    }
}

impl Column for String {
    fn read(row: &AnyRow, col: &str) -> DbResult<Self> {
        text(row, col)
    }
}

/// `LIKE` pattern for "starts with `prefix`", escaping with `!`.
pub fn like_prefix(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '!') {
            p.push('!');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// Milliseconds since the Unix epoch: the one timestamp representation of every table.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Running statements of the dialect layer (`sql.rs`).
impl Db {
    /// The statement, rendered for this backend and counted, ready to bind and run.
    pub fn query<'q>(
        &self,
        statement: &'static crate::sql::Sql,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        self.count(statement.op());
        sqlx::query(statement.text(self.backend()))
    }

    /// Inserts `items` in `tx`, `many.rows()` rows per statement ([`crate::sql_rows!`]) and the
    /// rest with `one` (the same insert of one row): a publication's thousands of rows are a
    /// hundred or so round trips, not thousands. `bind` binds one item's values in order.
    pub async fn insert_rows<'q, T>(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        many: &'static crate::sql::Sql,
        one: &'static crate::sql::Sql,
        items: &'q [T],
        bind: impl Fn(crate::sql::Query<'q>, &'q T) -> crate::sql::Query<'q>,
    ) -> DbResult<()> {
        let per = many.rows().max(1);
        let mut batches = items.chunks_exact(per);
        for batch in batches.by_ref() {
            let mut query = self.query(many);
            for item in batch {
                query = bind(query, item);
            }
            query.execute(&mut **tx).await?;
        }
        for item in batches.remainder() {
            bind(self.query(one), item).execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// The statement with its placeholders bound to `binds`, in order.
    pub fn bound<'q>(
        &self,
        statement: &'static crate::sql::Sql,
        binds: impl crate::sql::Binds<'q>,
    ) -> crate::sql::Query<'q> {
        binds.bind_to(self.query(statement))
    }

    /// The rows of a statement that reads a set of integers: its text holds `$LIST` where the
    /// integers go (`… WHERE k = $1 AND n IN ($LIST)`), and `$1` is `key`. The integers are
    /// written into the rendered text as literals — only integers, so the text says what the
    /// statement says, with no room for anything else; an empty list reads nothing.
    pub async fn fetch_listed<'c, E>(
        &self,
        executor: E,
        statement: &'static crate::sql::Sql,
        key: i64,
        list: &[i64],
    ) -> DbResult<Vec<sqlx::any::AnyRow>>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        if list.is_empty() {
            return Ok(Vec::new());
        }
        self.count(statement.op());
        let literals: Vec<String> = list.iter().map(i64::to_string).collect();
        let text = statement.text(self.backend()).replacen("$LIST", &literals.join(", "), 1);
        Ok(sqlx::query(&text).bind(key).fetch_all(executor).await?)
    }

    /// The one row the statement finds, parsed, or `None`.
    pub async fn optional<'q, 'c, E, T>(
        &self,
        executor: E,
        statement: &'static crate::sql::Sql,
        binds: impl crate::sql::Binds<'q>,
        parse: fn(&sqlx::any::AnyRow) -> DbResult<T>,
    ) -> DbResult<Option<T>>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let row = self.bound(statement, binds).fetch_optional(executor).await?;
        row.as_ref().map(parse).transpose()
    }

    /// What serving a stored file needs of its row — `(sha256, size, uploaded_at)` — and nothing
    /// more (a format's statement selecting those three columns by repository and path).
    pub async fn served_file(
        &self,
        statement: &'static crate::sql::Sql,
        repository_id: i64,
        path: &str,
    ) -> DbResult<Option<(String, i64, i64)>> {
        fn parse(r: &sqlx::any::AnyRow) -> DbResult<(String, i64, i64)> {
            use sqlx::Row as _;
            let sha256: String = r.try_get("sha256")?;
            Ok((sha256.trim().to_string(), r.try_get("size")?, r.try_get("uploaded_at")?))
        }
        self.optional(self.pool(), statement, (repository_id, path), parse).await
    }

    /// One keyset page of a query whose last two placeholders are the id the page starts after
    /// and its size (`… AND id > $n ORDER BY id LIMIT $m`), its other placeholders bound.
    pub async fn page<'q, T>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        after_id: i64,
        limit: i64,
        parse: fn(&sqlx::any::AnyRow) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        let rows = query.bind(after_id).bind(limit).fetch_all(self.pool()).await?;
        rows.iter().map(parse).collect()
    }

    /// An insert of an uploaded artifact's row, whose first two placeholders are when and by
    /// whom it was uploaded (`uploaded_at`, `uploaded_by`) and the rest `binds`, run in `tx`.
    pub async fn insert_uploaded<'q>(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        statement: &'static crate::sql::Sql,
        uploaded_by: &'q str,
        binds: impl crate::sql::Binds<'q>,
    ) -> DbResult<()> {
        binds.bind_to(self.query(statement).bind(now_ms()).bind(uploaded_by)).execute(&mut **tx).await?;
        Ok(())
    }

    /// Runs a `DELETE … WHERE id = $1` in a transaction: whether the row was there.
    pub async fn delete_by_id(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        statement: &'static crate::sql::Sql,
        id: i64,
    ) -> DbResult<bool> {
        Ok(self.query(statement).bind(id).execute(&mut **tx).await?.rows_affected() == 1)
    }

    /// Runs an [`insert_or_ignore_id!`] statement: the new row's id, or `None` when a row with
    /// its key was there.
    pub async fn insert_or_ignore_id<'q, 'e, E>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        executor: E,
    ) -> DbResult<Option<i64>>
    where
        E: Executor<'e, Database = sqlx::Any>,
    {
        match self.backend() {
            Backend::MySql => {
                let done = query.execute(executor).await?;
                Ok(if done.rows_affected() == 1 { done.last_insert_id() } else { None })
            }
            Backend::Sqlite | Backend::Postgres => {
                query.fetch_optional(executor).await?.map(|r| r.try_get("id")).transpose().map_err(Into::into)
            }
        }
    }

    /// Runs an [`insert_id!`] statement and returns the new row's id.
    pub async fn insert_id<'q, 'e, E>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        executor: E,
    ) -> DbResult<i64>
    where
        E: Executor<'e, Database = sqlx::Any>,
    {
        match self.backend() {
            Backend::MySql => {
                let done = query.execute(executor).await?;
                done.last_insert_id().ok_or_else(|| DbError::Corrupt("the driver reported no insert id".into()))
            }
            Backend::Sqlite | Backend::Postgres => Ok(query.fetch_one(executor).await?.try_get("id")?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_url_gets_create_mode() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("sub/p.db");
        let url = prepare_sqlite_url(&format!("sqlite://{}", db.display()))?;
        assert!(url.ends_with("p.db?mode=rwc"), "{url}");
        assert!(dir.path().join("sub").is_dir());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&db)?.permissions().mode() & 0o777, 0o600, "a new database is private");
            // An existing file keeps its mode (and its contents).
            std::fs::write(&db, b"x")?;
            std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640))?;
            prepare_sqlite_url(&format!("sqlite://{}", db.display()))?;
            assert_eq!(std::fs::metadata(&db)?.permissions().mode() & 0o777, 0o640);
            assert_eq!(std::fs::read(&db)?, b"x");
        }
        assert_eq!(prepare_sqlite_url("sqlite://x.db?mode=ro")?, "sqlite://x.db?mode=ro");
        Ok(())
    }
}
