//! Content selectors: named CSEL expressions (`packyard_model::selector`) that a role's
//! privilege carries by name. A change bumps the `security` watermark, so every replica drops
//! the principals it resolved with the old expression.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::any::AnyRow;
use sqlx::Row;

use super::super::{now_ms, text, Db, DbError, DbResult};
use super::SECURITY;
use crate::sql;
use packyard_model::security::Privilege;
use packyard_model::selector::Selector;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorRecord {
    pub name: String,
    pub description: String,
    pub expression: String,
    pub created_at: i64,
    pub updated_at: i64,
}

fn parse(r: &AnyRow) -> DbResult<SelectorRecord> {
    Ok(SelectorRecord {
        name: text(r, "name")?,
        description: text(r, "description")?,
        expression: text(r, "expression")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

impl Db {
    pub async fn list_content_selectors(&self) -> DbResult<Vec<SelectorRecord>> {
        let rows = self
            .query(sql!(
                "content_selectors.list",
                "SELECT name, description, expression, created_at, updated_at FROM content_selectors ORDER BY name"
            ))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse).collect()
    }

    pub async fn content_selector(&self, name: &str) -> DbResult<Option<SelectorRecord>> {
        let row = self
            .query(sql!(
                "content_selectors.get",
                "SELECT name, description, expression, created_at, updated_at FROM content_selectors WHERE name = $1"
            ))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse).transpose()
    }

    /// Stores a new selector (`Conflict` when the name is taken) or, with `replace`, changes an
    /// existing one (`NotFound` when there is none).
    pub async fn put_content_selector(
        &self,
        name: &str,
        description: &str,
        expression: &str,
        replace: bool,
    ) -> DbResult<()> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        if replace {
            let done = self
                .query(sql!(
                    "content_selectors.update",
                    "UPDATE content_selectors SET description = $1, expression = $2, updated_at = $3 WHERE name = $4"
                ))
                .bind(description)
                .bind(expression)
                .bind(now)
                .bind(name)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != 1 {
                return Err(DbError::NotFound);
            }
        } else {
            self.query(sql!("content_selectors.insert", "INSERT INTO content_selectors (name, description, expression, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)"))
                .bind(name)
                .bind(description)
                .bind(expression)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| match DbError::from(e) {
                    DbError::Conflict(_) => DbError::Conflict(format!("content selector {name} already exists")),
                    other => other,
                })?;
        }
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Deletes a selector no role's privilege names (`Conflict` naming the roles that do).
    pub async fn delete_content_selector(&self, name: &str) -> DbResult<()> {
        let users: Vec<String> = self
            .list_roles()
            .await?
            .into_iter()
            .filter(|r| r.privileges.iter().any(|p| p.content_selector.as_deref() == Some(name)))
            .map(|r| r.name)
            .collect();
        if !users.is_empty() {
            return Err(DbError::Conflict(format!(
                "content selector {name} is used by role(s) {}: change their privileges first",
                users.join(", ")
            )));
        }
        let hooks: Vec<String> = self
            .list_webhooks()
            .await?
            .into_iter()
            .filter(|w| w.content_selector.as_deref() == Some(name))
            .map(|w| w.name)
            .collect();
        if !hooks.is_empty() {
            return Err(DbError::Conflict(format!(
                "content selector {name} is used by webhook(s) {}: change them first",
                hooks.join(", ")
            )));
        }
        let mut tx = self.begin().await?;
        let done = self
            .query(sql!("content_selectors.delete", "DELETE FROM content_selectors WHERE name = $1"))
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Attaches to each privilege that names a content selector the selector's parsed
    /// expression (one query, only when one names a selector). A name with no selector, or an
    /// expression that no longer parses, stays unresolved: that privilege selects nothing.
    pub async fn resolve_selectors(&self, privileges: &mut [Privilege]) -> DbResult<()> {
        if privileges.iter().all(|p| p.content_selector.is_none()) {
            return Ok(());
        }
        let mut parsed: HashMap<String, Option<Arc<Selector>>> = HashMap::new();
        for r in self.list_content_selectors().await? {
            let selector = match Selector::parse(&r.expression) {
                Ok(s) => Some(Arc::new(s)),
                Err(e) => {
                    tracing::warn!(selector = %r.name, error = %e, "a stored content selector does not parse; it selects nothing");
                    None
                }
            };
            parsed.insert(r.name, selector);
        }
        for p in privileges.iter_mut() {
            if let Some(name) = &p.content_selector {
                p.selector = parsed.get(name).cloned().flatten();
            }
        }
        Ok(())
    }
}
