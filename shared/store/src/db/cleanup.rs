//! Storage of cleanup policies and the repositories each cleans. The criteria and schedule are
//! kept as the JSON the model serialises (`packyard_model::cleanup`).

use sqlx::{Any, Row, Transaction};

use super::{now_ms, text, Db, DbResult};
use crate::{insert_id, sql};

crate::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PolicyRow keyed by id, columns policy_columns, trimmed () {
        pub name: String,
        pub format: String,
        pub description: String,
        pub criteria: String,
        pub schedule: Option<String>,
        pub created_at: i64,
        pub updated_at: i64,
    }
}

/// A policy with the names of the repositories it cleans, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRecord {
    pub row: PolicyRow,
    pub repositories: Vec<String>,
}

/// What is written of a policy.
pub struct PolicyWrite<'a> {
    pub format: &'a str,
    pub description: &'a str,
    pub criteria: &'a str,
    pub schedule: Option<&'a str>,
    /// Ids of the repositories it cleans.
    pub repositories: &'a [i64],
}

impl Db {
    pub async fn insert_policy(&self, name: &str, p: &PolicyWrite<'_>) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        let insert = insert_id!("cleanup_policies.insert", "INSERT INTO cleanup_policies (name, format, description, criteria, schedule, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)");
        let query = self.bound(insert, (name, p.format, p.description, p.criteria, p.schedule, now, now));
        let id = self.insert_id(query, &mut *tx).await?;
        self.link_policy(&mut tx, id, p.repositories).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces a policy's settings and repositories; false when there is no such policy.
    pub async fn update_policy(&self, name: &str, p: &PolicyWrite<'_>) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let update = sql!("cleanup_policies.update", "UPDATE cleanup_policies SET format = $1, description = $2, criteria = $3, schedule = $4, updated_at = $5 WHERE name = $6");
        let done = self
            .bound(update, (p.format, p.description, p.criteria, p.schedule, now_ms(), name))
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        let id = sql!("cleanup_policies.id", "SELECT id FROM cleanup_policies WHERE name = $1");
        let id: i64 = self.bound(id, (name,)).fetch_one(&mut *tx).await?.try_get("id")?;
        let unlink =
            sql!("repository_cleanup_policies.clear", "DELETE FROM repository_cleanup_policies WHERE policy_id = $1");
        self.bound(unlink, (id,)).execute(&mut *tx).await?;
        self.link_policy(&mut tx, id, p.repositories).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn link_policy(&self, tx: &mut Transaction<'_, Any>, policy: i64, repositories: &[i64]) -> DbResult<()> {
        let link = sql!(
            "repository_cleanup_policies.insert",
            "INSERT INTO repository_cleanup_policies (policy_id, repository_id) VALUES ($1, $2)"
        );
        for r in repositories {
            self.bound(link, (policy, *r)).execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Deletes a policy; false when there was none.
    pub async fn delete_policy(&self, name: &str) -> DbResult<bool> {
        let delete = sql!("cleanup_policies.delete", "DELETE FROM cleanup_policies WHERE name = $1");
        Ok(self.bound(delete, (name,)).execute(self.pool()).await?.rows_affected() == 1)
    }

    pub async fn policy(&self, name: &str) -> DbResult<Option<PolicyRecord>> {
        let one = sql!(
            "cleanup_policies.get",
            concat!("SELECT ", policy_columns!(), " FROM cleanup_policies WHERE name = $1")
        );
        let Some(row) = self.optional(self.pool(), one, (name,), PolicyRow::parse).await? else { return Ok(None) };
        let mut with = self.with_repositories(vec![row]).await?;
        Ok(with.pop())
    }

    /// Every policy, by name.
    pub async fn list_policies(&self) -> DbResult<Vec<PolicyRecord>> {
        let all = sql!(
            "cleanup_policies.list",
            concat!("SELECT ", policy_columns!(), " FROM cleanup_policies ORDER BY name")
        );
        let rows = self.query(all).fetch_all(self.pool()).await?;
        let rows = rows.iter().map(PolicyRow::parse).collect::<DbResult<Vec<_>>>()?;
        self.with_repositories(rows).await
    }

    async fn with_repositories(&self, rows: Vec<PolicyRow>) -> DbResult<Vec<PolicyRecord>> {
        let links = sql!("repository_cleanup_policies.list", "SELECT l.policy_id AS policy_id, r.name AS name FROM repository_cleanup_policies l JOIN repositories r ON r.id = l.repository_id ORDER BY r.name");
        let links = self.query(links).fetch_all(self.pool()).await?;
        let mut out: Vec<PolicyRecord> =
            rows.into_iter().map(|row| PolicyRecord { row, repositories: Vec::new() }).collect();
        for l in &links {
            let policy: i64 = l.try_get("policy_id")?;
            if let Some(p) = out.iter_mut().find(|p| p.row.id == policy) {
                p.repositories.push(text(l, "name")?);
            }
        }
        Ok(out)
    }
}
