//! Storage of cleanup policies and the repositories each cleans. The criteria and schedule are
//! kept as the JSON the model serialises (`packyard_model::cleanup`).

use sqlx::{Any, Row, Transaction};

use super::{now_ms, text, Db, DbResult};
use crate::{insert_id, insert_or_ignore, sql, upsert};

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

/// A policy's runs on one of its repositories: the last (or current) run and a pending "run
/// now" request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    pub policy_id: i64,
    pub repository_id: i64,
    pub repository: String,
    pub requested_at: Option<i64>,
    pub requested_by: Option<String>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub components: i64,
    pub bytes: i64,
    pub error: Option<String>,
    /// A run of this policy holds the repository's lease until then.
    pub running_until: Option<i64>,
}

impl RunRecord {
    fn parse(r: &sqlx::any::AnyRow) -> DbResult<Self> {
        use super::Column;
        let lease_policy: Option<i64> = Column::read(r, "lease_policy")?;
        let policy_id: i64 = Column::read(r, "policy_id")?;
        let lease_expires: Option<i64> = Column::read(r, "lease_expires")?;
        Ok(Self {
            policy_id,
            repository_id: Column::read(r, "repository_id")?,
            repository: text(r, "repository")?,
            requested_at: Column::read(r, "requested_at")?,
            requested_by: Column::read(r, "requested_by")?,
            started_at: Column::read(r, "started_at")?,
            finished_at: Column::read(r, "finished_at")?,
            duration_ms: Column::read(r, "duration_ms")?,
            components: Option::<i64>::read(r, "components")?.unwrap_or(0),
            bytes: Option::<i64>::read(r, "bytes")?.unwrap_or(0),
            error: Column::read(r, "error")?,
            running_until: lease_expires.filter(|_| lease_policy == Some(policy_id)),
        })
    }
}

macro_rules! run_select {
    () => {
        "SELECT l.policy_id AS policy_id, l.repository_id AS repository_id, p.name AS repository, c.requested_at AS requested_at, c.requested_by AS requested_by, c.started_at AS started_at, c.finished_at AS finished_at, c.duration_ms AS duration_ms, c.components AS components, c.bytes AS bytes, c.error AS error, k.expires_at AS lease_expires, k.policy_id AS lease_policy FROM repository_cleanup_policies l JOIN repositories p ON p.id = l.repository_id LEFT JOIN cleanup_runs c ON c.policy_id = l.policy_id AND c.repository_id = l.repository_id LEFT JOIN cleanup_leases k ON k.repository_id = l.repository_id AND k.token IS NOT NULL AND k.expires_at > $1"
    };
}

impl Db {
    /// The runs of every policy on each of its repositories.
    pub async fn cleanup_runs(&self) -> DbResult<Vec<RunRecord>> {
        let all = sql!("cleanup_runs.all", concat!(run_select!(), " ORDER BY l.policy_id, p.name"));
        let rows = self.bound(all, (now_ms(),)).fetch_all(self.pool()).await?;
        rows.iter().map(RunRecord::parse).collect()
    }

    /// The runs of one policy, by repository name.
    pub async fn cleanup_runs_of(&self, policy_id: i64) -> DbResult<Vec<RunRecord>> {
        let one = sql!("cleanup_runs.of_policy", concat!(run_select!(), " WHERE l.policy_id = $2 ORDER BY p.name"));
        let rows = self.bound(one, (now_ms(), policy_id)).fetch_all(self.pool()).await?;
        rows.iter().map(RunRecord::parse).collect()
    }

    /// Asks for a run of `policy_id` on `repository_id` as soon as a worker can ("run now").
    pub async fn request_cleanup_run(&self, policy_id: i64, repository_id: i64, by: &str) -> DbResult<()> {
        let s = upsert!(
            "cleanup_runs.request",
            "INSERT INTO cleanup_runs (policy_id, repository_id, requested_at, requested_by) VALUES ($1, $2, $3, $4)",
            on "cleanup_runs" ("policy_id, repository_id"),
            set "requested_at = NEW.requested_at, requested_by = NEW.requested_by"
        );
        self.bound(s, (policy_id, repository_id, now_ms(), by)).execute(self.pool()).await?;
        Ok(())
    }

    /// Takes the repository's cleanup lease for `lease_ms` if no live run holds it: the token
    /// the run's later writes name, or `None`.
    pub async fn claim_cleanup(
        &self,
        repository_id: i64,
        policy_id: i64,
        owner: &str,
        lease_ms: i64,
    ) -> DbResult<Option<String>> {
        let row = insert_or_ignore!(
            "cleanup_leases.insert",
            "INSERT INTO cleanup_leases (repository_id, expires_at) VALUES ($1, 0)"
        );
        self.bound(row, (repository_id,)).execute(self.pool()).await?;
        let token = hex::encode(rand::random::<[u8; 16]>());
        let now = now_ms();
        let take = sql!("cleanup_leases.claim", "UPDATE cleanup_leases SET policy_id = $1, owner = $2, token = $3, expires_at = $4 WHERE repository_id = $5 AND (token IS NULL OR expires_at < $6)");
        let done = self
            .bound(take, (policy_id, owner, token.as_str(), now + lease_ms, repository_id, now))
            .execute(self.pool())
            .await?;
        Ok((done.rows_affected() == 1).then_some(token))
    }

    /// Extends a lease still held; false when it was lost (expired and taken).
    pub async fn renew_cleanup(&self, repository_id: i64, token: &str, lease_ms: i64) -> DbResult<bool> {
        let s = sql!(
            "cleanup_leases.renew",
            "UPDATE cleanup_leases SET expires_at = $1 WHERE repository_id = $2 AND token = $3"
        );
        let done = self.bound(s, (now_ms() + lease_ms, repository_id, token)).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Takes back the leases `policy_id`'s runs hold now: each run stops after its batch in
    /// progress (its next renewal fails). Returns how many runs were told.
    pub async fn stop_cleanup(&self, policy_id: i64) -> DbResult<u64> {
        let s = sql!(
            "cleanup_leases.stop",
            "UPDATE cleanup_leases SET token = NULL, owner = NULL, policy_id = NULL, expires_at = 0 WHERE policy_id = $1 AND expires_at > $2"
        );
        Ok(self.bound(s, (policy_id, now_ms())).execute(self.pool()).await?.rows_affected())
    }

    pub async fn release_cleanup(&self, repository_id: i64, token: &str) -> DbResult<()> {
        let s = sql!("cleanup_leases.release", "UPDATE cleanup_leases SET token = NULL, owner = NULL, policy_id = NULL, expires_at = 0 WHERE repository_id = $1 AND token = $2");
        self.bound(s, (repository_id, token)).execute(self.pool()).await?;
        Ok(())
    }

    /// A run began at `started`: the status starts over, a request made before it is served.
    pub async fn start_cleanup_run(&self, policy_id: i64, repository_id: i64, started: i64) -> DbResult<()> {
        let s = upsert!(
            "cleanup_runs.start",
            "INSERT INTO cleanup_runs (policy_id, repository_id, started_at, components, bytes) VALUES ($1, $2, $3, 0, 0)",
            on "cleanup_runs" ("policy_id, repository_id"),
            set "started_at = NEW.started_at, finished_at = NULL, duration_ms = NULL, components = 0, bytes = 0, error = NULL, requested_at = CASE WHEN OLD.requested_at <= NEW.started_at THEN NULL ELSE OLD.requested_at END"
        );
        self.bound(s, (policy_id, repository_id, started)).execute(self.pool()).await?;
        Ok(())
    }

    /// What a run has removed so far, or (`finished` given) in all, with its error.
    pub async fn record_cleanup_run(
        &self,
        (policy_id, repository_id): (i64, i64),
        (components, bytes): (i64, i64),
        finished: Option<(i64, i64, Option<&str>)>,
    ) -> DbResult<()> {
        match finished {
            None => {
                let s = sql!(
                    "cleanup_runs.progress",
                    "UPDATE cleanup_runs SET components = $1, bytes = $2 WHERE policy_id = $3 AND repository_id = $4"
                );
                self.bound(s, (components, bytes, policy_id, repository_id)).execute(self.pool()).await?;
            }
            Some((at, duration_ms, error)) => {
                let s = sql!("cleanup_runs.finish", "UPDATE cleanup_runs SET components = $1, bytes = $2, finished_at = $3, duration_ms = $4, error = $5 WHERE policy_id = $6 AND repository_id = $7");
                self.bound(s, (components, bytes, at, duration_ms, error, policy_id, repository_id))
                    .execute(self.pool())
                    .await?;
            }
        }
        Ok(())
    }
}
