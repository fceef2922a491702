//! Test support (feature `testing`): a fresh, migrated database per test on SQLite, PostgreSQL
//! and MySQL/MariaDB.
//!
//! The server URLs come from `TEST_POSTGRES_URL` and `TEST_MYSQL_URL` (set by
//! `scripts/test.sh`). When a variable is set, its server must work: a test fails rather than
//! skips. When it is unset, the test says so and passes without running that backend.

use std::sync::Arc;

use anyhow::Context;
use sqlx::{AnyConnection, Connection, Executor};

use crate::db::{Backend, Db};
use crate::metrics::Metrics;
use packyard_model::config::DatabaseConfig;

pub const POSTGRES_ENV: &str = "TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "TEST_MYSQL_URL";

/// A database made for one test. Dropped databases of earlier runs are removed by the test script.
pub struct TestDb {
    pub db: Db,
    pub url: String,
    pub metrics: Arc<Metrics>,
    pub dir: tempfile::TempDir,
}

/// The server URL for a backend, or `None` when the environment does not provide one.
pub fn server_url(backend: Backend) -> Option<String> {
    match backend {
        Backend::Sqlite => Some(String::new()),
        Backend::Postgres => std::env::var(POSTGRES_ENV).ok().filter(|s| !s.is_empty()),
        Backend::MySql => std::env::var(MYSQL_ENV).ok().filter(|s| !s.is_empty()),
    }
}

/// Creates an empty database on the backend's server and returns its URL (`None`: not configured).
pub async fn create_database(backend: Backend) -> anyhow::Result<Option<(String, tempfile::TempDir)>> {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir()?;
    let Some(server) = server_url(backend) else {
        return Ok(None);
    };
    let name = format!("packyard_t_{}", hex::encode(rand::random::<[u8; 6]>()));
    let url = match backend {
        Backend::Sqlite => format!("sqlite://{}", dir.path().join("test.db").display()),
        Backend::Postgres | Backend::MySql => {
            let mut conn = AnyConnection::connect(&server)
                .await
                .with_context(|| format!("{} is set but the server at {server} does not answer", env_name(backend)))?;
            conn.execute(format!("CREATE DATABASE {name}").as_str()).await?;
            conn.close().await?;
            let mut u = url::Url::parse(&server)?;
            u.set_path(&format!("/{name}"));
            u.to_string()
        }
    };
    Ok(Some((url, dir)))
}

fn env_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => POSTGRES_ENV,
        Backend::MySql => MYSQL_ENV,
        Backend::Sqlite => "",
    }
}

/// Having `Drop` makes a closure capture the whole value: a test that only names `t.db` still
/// keeps the temporary directory (and its SQLite file) alive until it ends.
impl Drop for TestDb {
    fn drop(&mut self) {}
}

impl TestDb {
    /// A fresh migrated database, or `None` (with a note on stderr) when the backend is not configured.
    pub async fn fresh(backend: Backend) -> anyhow::Result<Option<Self>> {
        let Some((url, dir)) = create_database(backend).await? else {
            eprintln!("skipped on {}: {} is not set (scripts/test.sh sets it)", backend.as_str(), env_name(backend));
            return Ok(None);
        };
        let metrics = Arc::new(Metrics::new()?);
        let cfg = DatabaseConfig { url: url.clone(), max_connections: 4, ..DatabaseConfig::default() };
        let db = Db::connect(&cfg, metrics.clone()).await?;
        db.migrate().await?;
        Ok(Some(Self { db, url, metrics, dir }))
    }
}

/// Runs `body` on a fresh database of `backend` (no-op with a note when not configured).
pub async fn on_backend<F, Fut>(backend: Backend, body: F) -> anyhow::Result<()>
where
    F: FnOnce(TestDb) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    match TestDb::fresh(backend).await? {
        Some(t) => body(t).await,
        None => Ok(()),
    }
}

/// Declares one test per backend: `db_test!(name, |t: TestDb| async move { … })` expands to
/// `name::sqlite`, `name::postgres` and `name::mysql`.
#[macro_export]
macro_rules! db_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[tokio::test]
            async fn sqlite() -> anyhow::Result<()> {
                $crate::testing::on_backend($crate::db::Backend::Sqlite, $body).await
            }
            #[tokio::test]
            async fn postgres() -> anyhow::Result<()> {
                $crate::testing::on_backend($crate::db::Backend::Postgres, $body).await
            }
            #[tokio::test]
            async fn mysql() -> anyhow::Result<()> {
                $crate::testing::on_backend($crate::db::Backend::MySql, $body).await
            }
        }
    };
}
