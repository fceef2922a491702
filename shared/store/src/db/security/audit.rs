//! The audit log: who did what to which target, from where.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::super::{now_ms, text, Db, DbResult};
use crate::sql;

/// What [`Db::list_audit_filtered`] narrows the log by.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
}

fn parse_audit(r: &AnyRow) -> DbResult<AuditRecord> {
    Ok(AuditRecord {
        id: r.try_get("id")?,
        at: r.try_get("at")?,
        actor: text(r, "actor")?,
        address: text(r, "address")?,
        action: text(r, "action")?,
        target: text(r, "target")?,
        detail: text(r, "detail")?,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub address: String,
    pub action: String,
    pub target: String,
    pub detail: String,
}

impl Db {
    // --- audit ---------------------------------------------------------------------------------

    pub async fn insert_audit(
        &self,
        actor: &str,
        address: &str,
        action: &str,
        target: &str,
        detail: &str,
    ) -> DbResult<()> {
        AUDIT.bind(self, actor, address, action, target, detail).execute(self.pool()).await?;
        Ok(())
    }

    /// The audit entry of a change, inside the change's transaction.
    pub async fn insert_audit_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        actor: &str,
        address: &str,
        action: &str,
        target: &str,
        detail: &str,
    ) -> DbResult<()> {
        AUDIT.bind(self, actor, address, action, target, detail).execute(&mut **tx).await?;
        Ok(())
    }

    /// Many audit entries of one actor and action (a batch of deletes), `(target, detail)` each,
    /// in the change's transaction: one statement per 500.
    pub async fn insert_audits_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        (actor, address, action): (&str, &str, &str),
        entries: &[(String, String)],
    ) -> DbResult<()> {
        let at = now_ms();
        for chunk in entries.chunks(500) {
            let mut b = super::super::catalogue::Built::default();
            b.push("INSERT INTO audit_log (at, actor, address, action, target, detail) VALUES ");
            for (i, (target, detail)) in chunk.iter().enumerate() {
                b.push(if i == 0 { "(" } else { ", (" }).int(at).push(", ").text(actor).push(", ").text(address);
                b.push(", ").text(action).push(", ").text(target).push(", ").text(detail).push(")");
            }
            self.count("audit.insert_many");
            let text = crate::sql::render(&b.text, crate::sql::Shape::Plain, self.backend());
            b.bind(sqlx::query(&text)).execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// Newest first; `before` is the keyset cursor (an id from the previous page).
    /// The audit log, newest first, narrowed by who (exactly), the action (its start) and the
    /// target (containing).
    pub async fn list_audit_filtered(
        &self,
        before: Option<i64>,
        limit: i64,
        filter: &AuditFilter,
    ) -> DbResult<Vec<AuditRecord>> {
        let mut b = super::super::catalogue::Built::default();
        b.push("SELECT id, at, actor, address, action, target, detail FROM audit_log WHERE id < ")
            .int(before.unwrap_or(i64::MAX));
        if let Some(actor) = &filter.actor {
            b.push(" AND actor = ").text(actor);
        }
        if let Some(action) = &filter.action {
            b.push(" AND action LIKE ").text(&super::super::like_prefix(action)).push(" ESCAPE '!'");
        }
        if let Some(target) = &filter.target {
            b.push(" AND target LIKE ").text(&format!("%{}", super::super::like_prefix(target))).push(" ESCAPE '!'");
        }
        b.push(" ORDER BY id DESC LIMIT ").int(limit);
        let rows = self.run_statement("audit.list_filtered", b).await?;
        rows.iter().map(parse_audit).collect()
    }

    pub async fn list_audit(&self, before: Option<i64>, limit: i64) -> DbResult<Vec<AuditRecord>> {
        let rows = self.query(sql!("audit.list", "SELECT id, at, actor, address, action, target, detail FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2"))
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse_audit).collect()
    }
}

/// One audit entry.
struct Audit;

const AUDIT: Audit = Audit;

impl Audit {
    fn bind<'q>(
        &self,
        db: &Db,
        actor: &'q str,
        address: &'q str,
        action: &'q str,
        target: &'q str,
        detail: &'q str,
    ) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
        db.query(sql!(
            "audit.insert",
            "INSERT INTO audit_log (at, actor, address, action, target, detail) VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(now_ms())
        .bind(actor)
        .bind(address)
        .bind(action)
        .bind(target)
        .bind(detail)
    }
}
