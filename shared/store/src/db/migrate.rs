//! Embedded per-backend migrations, applied in order, each recorded in `_packyard_migrations`.
//! Replicas starting together serialise on an advisory lock (PostgreSQL, MySQL); SQLite has one
//! writer anyway.

use sqlx::Row;

use super::{now_ms, Backend, Db, DbError, DbResult};
use crate::{session_lock, sql};

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

macro_rules! migrations {
    ($dir:literal: $($version:literal => $file:literal),* $(,)?) => {
        &[$(Migration {
            version: $version,
            name: $file,
            sql: include_str!(concat!("../../../../migrations/", $dir, "/", $file)),
        }),*]
    };
}

const SQLITE: &[Migration] = migrations!("sqlite": 1 => "0001_foundation.sql", 2 => "0002_security.sql", 3 => "0003_publication.sql", 4 => "0004_apt.sql", 5 => "0005_proxy.sql", 6 => "0006_apk.sql", 7 => "0007_go.sql", 8 => "0008_conan.sql", 9 => "0009_catalogue.sql", 10 => "0010_cleanup.sql", 11 => "0011_reclamation.sql", 12 => "0012_sessions.sql", 13 => "0013_apt_depth.sql", 14 => "0014_go_sumdb.sql", 15 => "0015_apt_index_changes.sql", 16 => "0016_login_failures.sql", 17 => "0017_proxy_negative.sql", 18 => "0018_webhooks.sql", 19 => "0019_external_users.sql", 20 => "0020_sample.sql", 21 => "0021_build_cost.sql", 22 => "0022_webhook_batches.sql", 23 => "0023_index_usage.sql", 24 => "0024_read_only.sql", 25 => "0025_asset_digests.sql", 26 => "0026_import_ledger.sql", 27 => "0027_advisories.sql", 28 => "0028_policy_exceptions.sql", 29 => "0029_policy_seen.sql", 30 => "0030_repository_snapshots.sql", 31 => "0031_unit_pins.sql", 32 => "0032_content_selectors.sql", 33 => "0033_quota_locks.sql", 34 => "0034_event_order.sql", 35 => "0035_outbox_relay.sql");
const POSTGRES: &[Migration] = migrations!("postgres": 1 => "0001_foundation.sql", 2 => "0002_security.sql", 3 => "0003_publication.sql", 4 => "0004_apt.sql", 5 => "0005_proxy.sql", 6 => "0006_apk.sql", 7 => "0007_go.sql", 8 => "0008_conan.sql", 9 => "0009_catalogue.sql", 10 => "0010_cleanup.sql", 11 => "0011_reclamation.sql", 12 => "0012_sessions.sql", 13 => "0013_apt_depth.sql", 14 => "0014_go_sumdb.sql", 15 => "0015_apt_index_changes.sql", 16 => "0016_login_failures.sql", 17 => "0017_proxy_negative.sql", 18 => "0018_webhooks.sql", 19 => "0019_external_users.sql", 20 => "0020_sample.sql", 21 => "0021_build_cost.sql", 22 => "0022_webhook_batches.sql", 23 => "0023_index_usage.sql", 24 => "0024_read_only.sql", 25 => "0025_asset_digests.sql", 26 => "0026_import_ledger.sql", 27 => "0027_advisories.sql", 28 => "0028_policy_exceptions.sql", 29 => "0029_policy_seen.sql", 30 => "0030_repository_snapshots.sql", 31 => "0031_unit_pins.sql", 32 => "0032_content_selectors.sql", 33 => "0033_quota_locks.sql", 34 => "0034_event_order.sql", 35 => "0035_outbox_relay.sql");
const MYSQL: &[Migration] = migrations!("mysql": 1 => "0001_foundation.sql", 2 => "0002_security.sql", 3 => "0003_publication.sql", 4 => "0004_apt.sql", 5 => "0005_proxy.sql", 6 => "0006_apk.sql", 7 => "0007_go.sql", 8 => "0008_conan.sql", 9 => "0009_catalogue.sql", 10 => "0010_cleanup.sql", 11 => "0011_reclamation.sql", 12 => "0012_sessions.sql", 13 => "0013_apt_depth.sql", 14 => "0014_go_sumdb.sql", 15 => "0015_apt_index_changes.sql", 16 => "0016_login_failures.sql", 17 => "0017_proxy_negative.sql", 18 => "0018_webhooks.sql", 19 => "0019_external_users.sql", 20 => "0020_sample.sql", 21 => "0021_build_cost.sql", 22 => "0022_webhook_batches.sql", 23 => "0023_index_usage.sql", 24 => "0024_read_only.sql", 25 => "0025_asset_digests.sql", 26 => "0026_import_ledger.sql", 27 => "0027_advisories.sql", 28 => "0028_policy_exceptions.sql", 29 => "0029_policy_seen.sql", 30 => "0030_repository_snapshots.sql", 31 => "0031_unit_pins.sql", 32 => "0032_content_selectors.sql", 33 => "0033_quota_locks.sql", 34 => "0034_event_order.sql", 35 => "0035_outbox_relay.sql");

pub fn for_backend(backend: Backend) -> &'static [Migration] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
        Backend::MySql => MYSQL,
    }
}

/// Statements of a migration file: split at lines ending in `;` (no migration puts one inside a
/// statement).
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if trimmed.ends_with(';') {
            let stmt = current.trim().trim_end_matches(';').to_string();
            out.push(stmt);
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

impl Db {
    /// Applies every pending migration; returns how many ran.
    pub async fn migrate(&self) -> DbResult<usize> {
        let mut conn = self.pool().acquire().await?;
        // Replicas starting together apply migrations one at a time.
        self.query(session_lock!("migrate.lock", "packyard_migrate", 7_261_736, false)).execute(&mut *conn).await?;
        let result = self.migrate_locked(&mut conn).await;
        let unlock = session_lock!("migrate.unlock", "packyard_migrate", 7_261_736, true);
        let _ = self.query(unlock).execute(&mut *conn).await;
        result
    }

    async fn migrate_locked(&self, conn: &mut sqlx::AnyConnection) -> DbResult<usize> {
        self.query(sql!("migrate.ledger", "CREATE TABLE IF NOT EXISTS _packyard_migrations (version BIGINT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at BIGINT NOT NULL)"))
            .execute(&mut *conn)
            .await?;
        let applied = self.applied_versions(conn).await?;
        let mut ran = 0;
        for m in for_backend(self.backend()) {
            if applied.contains(&m.version) {
                continue;
            }
            tracing::info!(version = m.version, name = m.name, "applying migration");
            // DDL is transactional on SQLite and PostgreSQL; on MySQL each statement commits.
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            // The migration files are the one place written per dialect (migrations/<backend>/).
            for stmt in statements(m.sql) {
                self.count("migrate.apply");
                sqlx::query(&stmt)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| DbError::Corrupt(format!("migration {} failed: {e}", m.name)))?;
            }
            self.query(sql!(
                "migrate.record",
                "INSERT INTO _packyard_migrations (version, name, applied_at) VALUES ($1, $2, $3)"
            ))
            .bind(m.version)
            .bind(m.name)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            ran += 1;
        }
        Ok(ran)
    }

    async fn applied_versions(&self, conn: &mut sqlx::AnyConnection) -> DbResult<Vec<i64>> {
        let rows =
            self.query(sql!("migrate.list", "SELECT version FROM _packyard_migrations")).fetch_all(&mut *conn).await?;
        rows.iter().map(|r| r.try_get::<i64, _>("version").map_err(DbError::from)).collect()
    }

    /// True when every embedded migration is recorded as applied (readiness).
    pub async fn migrations_applied(&self) -> DbResult<bool> {
        let mut conn = self.pool().acquire().await?;
        let applied = match self.applied_versions(&mut conn).await {
            Ok(v) => v,
            // No ledger yet: nothing applied.
            Err(DbError::Other(sqlx::Error::Database(_))) => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(for_backend(self.backend()).iter().all(|m| applied.contains(&m.version)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements() {
        let s = statements("-- c\nCREATE TABLE a (x INT);\n\nCREATE INDEX i ON a (x);\n");
        assert_eq!(s, vec!["CREATE TABLE a (x INT)".to_string(), "CREATE INDEX i ON a (x)".to_string()]);
    }

    #[test]
    fn every_backend_has_the_same_versions() {
        let v = |b| for_backend(b).iter().map(|m| (m.version, m.name)).collect::<Vec<_>>();
        assert_eq!(v(Backend::Sqlite), v(Backend::Postgres));
        assert_eq!(v(Backend::Sqlite), v(Backend::MySql));
    }
}
