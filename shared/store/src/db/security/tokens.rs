//! API tokens and web UI sessions: a token row each, hashed secrets only.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::super::{now_ms, opt_text, text, Db, DbError, DbResult};
use super::*;
use crate::sql;
use packyard_model::security::Action;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub user_id: i64,
    pub username: String,
    pub name: String,
    pub secret_hash: String,
    pub repositories: Option<String>,
    pub actions: Option<Vec<Action>>,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
    /// A web UI session (accepted by the UI only), not an API token.
    pub session: bool,
    /// The owner's `users.source`: `local`, `ldap:<directory>` or `oidc`.
    pub user_source: String,
}

fn parse_actions(s: Option<String>) -> DbResult<Option<Vec<Action>>> {
    s.map(|s| {
        s.split(',').filter(|a| !a.is_empty()).map(|a| a.parse().map_err(|e: String| DbError::Corrupt(e))).collect()
    })
    .transpose()
}

fn parse_token(r: &AnyRow) -> DbResult<TokenRecord> {
    Ok(TokenRecord {
        id: text(r, "id")?,
        user_id: r.try_get("user_id")?,
        username: text(r, "username")?,
        name: text(r, "name")?,
        secret_hash: text(r, "secret_hash")?,
        repositories: opt_text(r, "repositories")?,
        actions: parse_actions(opt_text(r, "actions")?)?,
        expires_at: r.try_get("expires_at")?,
        created_at: r.try_get("created_at")?,
        revoked_at: r.try_get("revoked_at")?,
        session: r.try_get::<i64, _>("session")? != 0,
        user_source: text(r, "user_source")?,
    })
}

macro_rules! token_select {
    () => {
        "SELECT t.id AS id, t.user_id AS user_id, u.username AS username, t.name AS name, t.secret_hash AS secret_hash, t.repositories AS repositories, t.actions AS actions, t.expires_at AS expires_at, t.created_at AS created_at, t.revoked_at AS revoked_at, t.session AS session, u.source AS user_source FROM api_tokens t JOIN users u ON u.id = t.user_id"
    };
}

impl Db {
    // --- tokens --------------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    pub async fn insert_token(
        &self,
        id: &str,
        user_id: i64,
        name: &str,
        secret_hash: &str,
        repositories: Option<&str>,
        actions: Option<&[Action]>,
        expires_at: Option<i64>,
    ) -> DbResult<()> {
        let actions = actions.map(|a| a.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(","));
        self.query(sql!("api_tokens.insert", "INSERT INTO api_tokens (id, user_id, name, secret_hash, repositories, actions, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(id)
            .bind(user_id)
            .bind(name)
            .bind(secret_hash)
            .bind(repositories)
            .bind(actions)
            .bind(expires_at)
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    pub async fn token_by_id(&self, id: &str) -> DbResult<Option<TokenRecord>> {
        let row = self
            .query(sql!("api_tokens.get", concat!(token_select!(), " WHERE t.id = $1")))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_token).transpose()
    }

    /// Tokens of one user (or of everyone), newest first, revoked ones included.
    pub async fn list_tokens(&self, user_id: Option<i64>) -> DbResult<Vec<TokenRecord>> {
        let rows = match user_id {
            Some(uid) => {
                self.query(sql!(
                    "api_tokens.list",
                    concat!(
                        token_select!(),
                        " WHERE t.user_id = $1 AND t.session = 0 ORDER BY t.created_at DESC, t.id"
                    )
                ))
                .bind(uid)
                .fetch_all(self.pool())
                .await?
            }
            None => {
                self.query(sql!(
                    "api_tokens.list",
                    concat!(token_select!(), " WHERE t.session = 0 ORDER BY t.created_at DESC, t.id")
                ))
                .fetch_all(self.pool())
                .await?
            }
        };
        rows.iter().map(parse_token).collect()
    }

    /// A web UI session of `user_id` until `expires_at`; sessions that ended are dropped.
    pub async fn insert_session(&self, id: &str, user_id: i64, secret_hash: &str, expires_at: i64) -> DbResult<()> {
        let now = now_ms();
        self.query(sql!("api_tokens.prune_sessions", "DELETE FROM api_tokens WHERE session = 1 AND expires_at < $1"))
            .bind(now)
            .execute(self.pool())
            .await?;
        self.query(sql!("api_tokens.insert_session", "INSERT INTO api_tokens (id, user_id, name, secret_hash, expires_at, created_at, session) VALUES ($1, $2, 'web session', $3, $4, $5, 1)"))
            .bind(id)
            .bind(user_id)
            .bind(secret_hash)
            .bind(expires_at)
            .bind(now)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Ends a web UI session (signing out) — only when `secret_hash` is the session's, so a
    /// cookie that names a session without its secret ends nothing; bumps the security watermark
    /// so that every replica forgets it. Whether a session ended.
    pub async fn delete_session(&self, id: &str, secret_hash: &str) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let ended = self
            .query(sql!(
                "api_tokens.delete_session",
                "DELETE FROM api_tokens WHERE id = $1 AND session = 1 AND secret_hash = $2"
            ))
            .bind(id)
            .bind(secret_hash)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        if ended {
            self.bump_watermark(&mut tx, SECURITY).await?;
        }
        tx.commit().await?;
        Ok(ended)
    }

    /// Marks a token revoked; bumps the security watermark so every replica forgets it.
    pub async fn revoke_token(&self, id: &str) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let done = self
            .query(sql!(
                "api_tokens.revoke",
                "UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL"
            ))
            .bind(now_ms())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }
}
