//! Break-glass exceptions to a repository's policy (the migration `0028_policy_exceptions`).
//! Each change moves the repository's version and the `repositories` watermark, so every replica
//! sees it as it sees a changed definition.

use sqlx::Row;

use super::{now_ms, text, Db, DbError, DbResult};
use crate::sql;

/// One version of one name let through early, until `expires_at` (ms).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PolicyException {
    pub name: String,
    pub version: String,
    pub expires_at: i64,
    pub reason: String,
    pub created_by: String,
    pub created_at: i64,
}

impl Db {
    /// The repository's exceptions (expired ones included), by name and version.
    pub async fn policy_exceptions(&self, repository_id: i64) -> DbResult<Vec<PolicyException>> {
        let s = sql!(
            "policy_exceptions.list",
            "SELECT name, version, expires_at, reason, created_by, created_at FROM policy_exceptions WHERE repository_id = $1 ORDER BY name, version"
        );
        let rows = self.bound(s, (repository_id,)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| {
                Ok(PolicyException {
                    name: text(r, "name")?,
                    version: text(r, "version")?,
                    expires_at: r.try_get("expires_at")?,
                    reason: text(r, "reason")?,
                    created_by: text(r, "created_by")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Adds or replaces the exception for (`name`, `version`); true when it is new.
    /// `event` is the webhook event `(name, repository, payload)` queued with it.
    pub async fn put_policy_exception(
        &self,
        repository_id: i64,
        e: &PolicyException,
        event: (&str, &str, &str),
    ) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let held = sql!(
            "policy_exceptions.held",
            "SELECT COUNT(*) AS n FROM policy_exceptions WHERE repository_id = $1 AND name = $2 AND version = $3"
        );
        let before: i64 = self
            .bound(held, (repository_id, e.name.as_str(), e.version.as_str()))
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
        // An upsert: two additions of one version at once both land, the later one kept.
        let add = crate::upsert!(
            "policy_exceptions.put",
            "INSERT INTO policy_exceptions (repository_id, name, version, expires_at, reason, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            on "policy_exceptions" ("repository_id, name, version"),
            set "expires_at = NEW.expires_at, reason = NEW.reason, created_by = NEW.created_by, created_at = NEW.created_at"
        );
        self.query(add)
            .bind(repository_id)
            .bind(e.name.as_str())
            .bind(e.version.as_str())
            .bind(e.expires_at)
            .bind(e.reason.as_str())
            .bind(e.created_by.as_str())
            .bind(e.created_at)
            .execute(&mut *tx)
            .await?;
        self.repository_moved(&mut tx, repository_id).await?;
        self.enqueue_webhook_event_in(&mut tx, event.0, Some(event.1), event.2).await?;
        tx.commit().await?;
        Ok(before == 0)
    }

    /// Removes the exception; false when there was none.
    pub async fn delete_policy_exception(
        &self,
        repository_id: i64,
        name: &str,
        version: &str,
        event: (&str, &str, &str),
    ) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let s = sql!(
            "policy_exceptions.delete",
            "DELETE FROM policy_exceptions WHERE repository_id = $1 AND name = $2 AND version = $3"
        );
        let done = self.bound(s, (repository_id, name, version)).execute(&mut *tx).await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.repository_moved(&mut tx, repository_id).await?;
        self.enqueue_webhook_event_in(&mut tx, event.0, Some(event.1), event.2).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The repository's version and the `repositories` watermark moved (replicas reload it).
    async fn repository_moved(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, repository_id: i64) -> DbResult<()> {
        let s =
            sql!("repositories.touch", "UPDATE repositories SET version = version + 1, updated_at = $1 WHERE id = $2");
        let done = self.bound(s, (now_ms(), repository_id)).execute(&mut **tx).await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(tx, super::security::REPOSITORIES).await
    }
}

impl Db {
    /// When the repository first saw each of `versions` of `unit` (ms; 0: present when it first
    /// saw the unit). Versions it has not seen are recorded now: at 0 when it has not seen the
    /// unit yet (a marker row, version `""`, records that it now has — an empty list too), else
    /// at `now`. Concurrent callers agree: the first row written stays. The marker is not
    /// returned.
    pub async fn policy_seen(
        &self,
        repository_id: i64,
        unit: &str,
        versions: &[&str],
        now: i64,
    ) -> DbResult<std::collections::HashMap<String, i64>> {
        let known = self.policy_seen_rows(repository_id, unit).await?;
        let missing: Vec<&str> =
            versions.iter().copied().filter(|v| !v.is_empty() && !known.contains_key(*v)).collect();
        if !known.is_empty() && missing.is_empty() {
            return Ok(without_marker(known));
        }
        let mut tx = self.begin().await?;
        const ADD: &str = "INSERT INTO policy_seen (repository_id, unit, version, first_seen) VALUES ($1, $2, $3, $4)";
        let add = crate::insert_or_ignore!("policy_seen.add", ADD);
        // A repository's first sighting of a large index adds its whole list: 200 rows a statement.
        static ADD_MANY: crate::sql::Sql =
            crate::sql::Sql::with_rows("policy_seen.add_many", ADD, crate::sql::Shape::InsertOrIgnore, 200);
        // Whether the unit was seen, asked inside the transaction that records it.
        let marker = sql!(
            "policy_seen.marker",
            "SELECT COUNT(*) AS n FROM policy_seen WHERE repository_id = $1 AND unit = $2 AND version = ''"
        );
        let seen: i64 = self.bound(marker, (repository_id, unit)).fetch_one(&mut *tx).await?.try_get("n")?;
        let stamp = if seen == 0 { 0 } else { now };
        if seen == 0 {
            self.bound(add, (repository_id, unit, "", now)).execute(&mut *tx).await?;
        }
        self.insert_rows(&mut tx, &ADD_MANY, add, &missing, |q, v| {
            q.bind(repository_id).bind(unit).bind(*v).bind(stamp)
        })
        .await?;
        tx.commit().await?;
        Ok(without_marker(self.policy_seen_rows(repository_id, unit).await?))
    }

    /// The first sightings recorded for `unit`, without recording any; `None` when the unit was
    /// never seen.
    pub async fn policy_seen_of(
        &self,
        repository_id: i64,
        unit: &str,
    ) -> DbResult<Option<std::collections::HashMap<String, i64>>> {
        let rows = self.policy_seen_rows(repository_id, unit).await?;
        Ok(rows.contains_key("").then(|| without_marker(rows)))
    }

    async fn policy_seen_rows(
        &self,
        repository_id: i64,
        unit: &str,
    ) -> DbResult<std::collections::HashMap<String, i64>> {
        let s = sql!(
            "policy_seen.of_unit",
            "SELECT version, first_seen FROM policy_seen WHERE repository_id = $1 AND unit = $2"
        );
        let rows = self.bound(s, (repository_id, unit)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((text(r, "version")?, r.try_get("first_seen")?))).collect()
    }
}

fn without_marker(mut rows: std::collections::HashMap<String, i64>) -> std::collections::HashMap<String, i64> {
    rows.remove("");
    rows
}
