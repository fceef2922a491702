//! Storage of roles, user roles, API tokens, watermarks, the audit log and encrypted secrets.
//! Every change that can alter an authorization decision bumps the `security` watermark in the
//! same transaction, so that every replica drops its cached decisions.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{now_ms, opt_text, text, Db, DbError, DbResult};
use crate::{insert_id, insert_or_ignore, sql};
use packyard_model::security::{Action, Privilege};

pub const SECURITY: &str = "security";
pub const REPOSITORIES: &str = "repositories";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRecord {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub builtin: bool,
    pub privileges: Vec<Privilege>,
    pub created_at: i64,
    pub updated_at: i64,
}

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

fn parse_role(r: &AnyRow) -> DbResult<RoleRecord> {
    let privileges = text(r, "privileges")?;
    Ok(RoleRecord {
        id: r.try_get("id")?,
        name: text(r, "name")?,
        description: text(r, "description")?,
        builtin: r.try_get::<i64, _>("builtin")? != 0,
        privileges: serde_json::from_str(&privileges)
            .map_err(|e| DbError::Corrupt(format!("role privileges {privileges:?}: {e}")))?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
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

fn privileges_json(p: &[Privilege]) -> DbResult<String> {
    serde_json::to_string(p).map_err(|e| DbError::Corrupt(e.to_string()))
}

macro_rules! role_columns {
    () => {
        "id, name, description, builtin, privileges, created_at, updated_at"
    };
}

macro_rules! token_select {
    () => {
        "SELECT t.id AS id, t.user_id AS user_id, u.username AS username, t.name AS name, t.secret_hash AS secret_hash, t.repositories AS repositories, t.actions AS actions, t.expires_at AS expires_at, t.created_at AS created_at, t.revoked_at AS revoked_at, t.session AS session, u.source AS user_source FROM api_tokens t JOIN users u ON u.id = t.user_id"
    };
}

impl Db {
    /// Bumps a watermark inside the caller's transaction.
    pub async fn bump_watermark(&self, tx: &mut Transaction<'_, Any>, name: &str) -> DbResult<()> {
        self.query(sql!("watermarks.bump", "UPDATE watermarks SET version = version + 1 WHERE name = $1"))
            .bind(name)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The watermark versions: (security, repositories, publications).
    pub async fn watermarks(&self) -> DbResult<(i64, i64, i64)> {
        let rows =
            self.query(sql!("watermarks.get", "SELECT name, version FROM watermarks")).fetch_all(self.pool()).await?;
        let (mut sec, mut repos, mut publications) = (0, 0, 0);
        for r in &rows {
            match text(r, "name")?.as_str() {
                SECURITY => sec = r.try_get("version")?,
                REPOSITORIES => repos = r.try_get("version")?,
                super::publication::PUBLICATIONS => publications = r.try_get("version")?,
                _ => {}
            }
        }
        Ok((sec, repos, publications))
    }

    // --- roles ---------------------------------------------------------------------------------

    pub async fn list_roles(&self) -> DbResult<Vec<RoleRecord>> {
        let rows = self
            .query(sql!("roles.list", concat!("SELECT ", role_columns!(), " FROM roles ORDER BY name")))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse_role).collect()
    }

    pub async fn role_by_name(&self, name: &str) -> DbResult<Option<RoleRecord>> {
        let row = self
            .query(sql!("roles.get", concat!("SELECT ", role_columns!(), " FROM roles WHERE name = $1")))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_role).transpose()
    }

    pub async fn insert_role(
        &self,
        name: &str,
        description: &str,
        builtin: bool,
        privileges: &[Privilege],
    ) -> DbResult<()> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        self.query(sql!("roles.insert", "INSERT INTO roles (name, description, builtin, privileges, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)"))
            .bind(name)
            .bind(description)
            .bind(i64::from(builtin))
            .bind(privileges_json(privileges)?)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| match DbError::from(e) {
                DbError::Conflict(_) => DbError::Conflict(format!("role {name} already exists")),
                other => other,
            })?;
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn update_role(&self, name: &str, description: &str, privileges: &[Privilege]) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let done = self
            .query(sql!(
                "roles.update",
                "UPDATE roles SET description = $1, privileges = $2, updated_at = $3 WHERE name = $4"
            ))
            .bind(description)
            .bind(privileges_json(privileges)?)
            .bind(now_ms())
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

    pub async fn delete_role(&self, name: &str) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.query(sql!(
            "user_roles.clear_role",
            "DELETE FROM user_roles WHERE role_id IN (SELECT id FROM roles WHERE name = $1)"
        ))
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let done =
            self.query(sql!("roles.delete", "DELETE FROM roles WHERE name = $1")).bind(name).execute(&mut *tx).await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

    // --- users ---------------------------------------------------------------------------------

    /// Role names per user id, for listing.
    pub async fn role_names_of(&self, user_id: i64) -> DbResult<Vec<String>> {
        self.role_names_with(self.pool(), user_id).await
    }

    /// The same, on a connection or in a transaction.
    pub(crate) async fn role_names_with<'e, E>(&self, executor: E, user_id: i64) -> DbResult<Vec<String>>
    where
        E: sqlx::Executor<'e, Database = Any>,
    {
        let rows = self.query(sql!("user_roles.get", "SELECT r.name AS name FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = $1 ORDER BY r.name"))
            .bind(user_id)
            .fetch_all(executor)
            .await?;
        rows.iter().map(|r| text(r, "name")).collect()
    }

    /// Every user's role names (user id → names in order), in one statement.
    pub async fn role_names_of_all(&self) -> DbResult<std::collections::HashMap<i64, Vec<String>>> {
        let rows = self.query(sql!("user_roles.all", "SELECT ur.user_id AS user_id, r.name AS name FROM user_roles ur JOIN roles r ON r.id = ur.role_id ORDER BY ur.user_id, r.name"))
            .fetch_all(self.pool())
            .await?;
        let mut out: std::collections::HashMap<i64, Vec<String>> = std::collections::HashMap::new();
        for r in &rows {
            out.entry(r.try_get("user_id")?).or_default().push(text(r, "name")?);
        }
        Ok(out)
    }

    /// Every privilege the user holds through their roles.
    pub async fn privileges_of(&self, user_id: i64) -> DbResult<Vec<Privilege>> {
        let rows = self.query(sql!("user_roles.privileges", "SELECT r.privileges AS privileges FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = $1"))
            .bind(user_id)
            .fetch_all(self.pool())
            .await?;
        let mut out = Vec::new();
        for r in &rows {
            let json = text(r, "privileges")?;
            let mut p: Vec<Privilege> =
                serde_json::from_str(&json).map_err(|e| DbError::Corrupt(format!("role privileges: {e}")))?;
            out.append(&mut p);
        }
        Ok(out)
    }

    /// Replaces a user's roles; an unknown role name is a conflict naming it.
    pub async fn set_user_roles(&self, user_id: i64, roles: &[String]) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.set_user_roles_in(&mut tx, user_id, roles).await?;
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn set_user_roles_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        user_id: i64,
        roles: &[String],
    ) -> DbResult<()> {
        self.query(sql!("user_roles.clear", "DELETE FROM user_roles WHERE user_id = $1"))
            .bind(user_id)
            .execute(&mut **tx)
            .await?;
        for role in roles {
            let done = self
                .query(sql!(
                    "user_roles.insert",
                    "INSERT INTO user_roles (user_id, role_id) SELECT $1, id FROM roles WHERE name = $2"
                ))
                .bind(user_id)
                .bind(role.as_str())
                .execute(&mut **tx)
                .await?;
            if done.rows_affected() != 1 {
                return Err(DbError::Conflict(format!("role {role} does not exist")));
            }
        }
        Ok(())
    }

    /// Creates a user with roles in one transaction.
    pub async fn create_user(&self, username: &str, password_hash: &str, roles: &[String]) -> DbResult<i64> {
        let now = now_ms();
        let mut tx = self.begin().await?;
        let insert = self
            .query(insert_id!(
                "users.insert",
                "INSERT INTO users (username, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $4)"
            ))
            .bind(username)
            .bind(password_hash)
            .bind(now)
            .bind(now);
        let id = self.insert_id(insert, &mut *tx).await.map_err(|e| match e {
            DbError::Conflict(_) => DbError::Conflict(format!("user {username} already exists")),
            other => other,
        })?;
        self.set_user_roles_in(&mut tx, id, roles).await?;
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// A password replaced (changed, set by an admin, or reset): the new hash, and the user's web
    /// UI sessions, which were started with the old one, ended in the same transaction — all but
    /// `keep`, the session the change was made from. Returns how many sessions ended.
    pub async fn replace_password(&self, user_id: i64, password_hash: &str, keep: Option<&str>) -> DbResult<u64> {
        let mut tx = self.begin().await?;
        let done = self
            .query(sql!("users.set_password", "UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3"))
            .bind(password_hash)
            .bind(now_ms())
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        let sessions = self
            .query(sql!(
                "api_tokens.delete_other_sessions",
                "DELETE FROM api_tokens WHERE user_id = $1 AND session = 1 AND id <> $2"
            ))
            .bind(user_id)
            // No session id is empty: with none to keep, every session ends.
            .bind(keep.unwrap_or(""))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(sessions)
    }

    pub async fn delete_user(&self, user_id: i64) -> DbResult<()> {
        let mut tx = self.begin().await?;
        for stmt in [
            sql!("api_tokens.delete_user", "DELETE FROM api_tokens WHERE user_id = $1"),
            sql!("user_roles.clear", "DELETE FROM user_roles WHERE user_id = $1"),
        ] {
            self.query(stmt).bind(user_id).execute(&mut *tx).await?;
        }
        let done =
            self.query(sql!("users.delete", "DELETE FROM users WHERE id = $1")).bind(user_id).execute(&mut *tx).await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(&mut tx, SECURITY).await?;
        tx.commit().await?;
        Ok(())
    }

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
            let mut b = super::catalogue::Built::default();
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
        let mut b = super::catalogue::Built::default();
        b.push("SELECT id, at, actor, address, action, target, detail FROM audit_log WHERE id < ")
            .int(before.unwrap_or(i64::MAX));
        if let Some(actor) = &filter.actor {
            b.push(" AND actor = ").text(actor);
        }
        if let Some(action) = &filter.action {
            b.push(" AND action LIKE ").text(&super::like_prefix(action)).push(" ESCAPE '!'");
        }
        if let Some(target) = &filter.target {
            b.push(" AND target LIKE ").text(&format!("%{}", super::like_prefix(target))).push(" ESCAPE '!'");
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

    // --- failed logins ------------------------------------------------------------------------

    /// The failed logins counted under `key` since `window_start` (ms), if any.
    pub async fn login_failures(&self, key: &str) -> DbResult<Option<(i64, i64)>> {
        let row = self
            .query(sql!(
                "login_failures.get",
                "SELECT window_start, failures FROM login_failures WHERE attempt_key = $1"
            ))
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok((r.try_get("window_start")?, r.try_get("failures")?))).transpose()
    }

    /// Counts one failed login under `key`: the count starts again at one when the window that
    /// held the earlier ones (`window_ms` long) has ended. Atomic on every backend, so replicas
    /// counting at once lose no failure. Also drops the rows of ended windows now and then.
    pub async fn record_login_failure(&self, key: &str, now: i64, window_ms: i64) -> DbResult<()> {
        self.query(insert_or_ignore!(
            "login_failures.insert",
            "INSERT INTO login_failures (attempt_key, window_start, failures) VALUES ($1, $2, 0)"
        ))
        .bind(key)
        .bind(now)
        .execute(self.pool())
        .await?;
        // `failures` first: MySQL assigns left to right, reading the new `window_start` after.
        self.query(sql!(
            "login_failures.count",
            "UPDATE login_failures SET \
               failures = CASE WHEN window_start <= $1 THEN 1 ELSE failures + 1 END, \
               window_start = CASE WHEN window_start <= $2 THEN $3 ELSE window_start END \
             WHERE attempt_key = $4"
        ))
        .bind(now - window_ms)
        .bind(now - window_ms)
        .bind(now)
        .bind(key)
        .execute(self.pool())
        .await?;
        if rand::random::<u8>() < 4 {
            self.query(sql!("login_failures.purge", "DELETE FROM login_failures WHERE window_start <= $1"))
                .bind(now - window_ms)
                .execute(self.pool())
                .await?;
        }
        Ok(())
    }

    /// Forgets the failed logins under `key` (a login succeeded).
    pub async fn clear_login_failures(&self, key: &str) -> DbResult<()> {
        self.query(sql!("login_failures.delete", "DELETE FROM login_failures WHERE attempt_key = $1"))
            .bind(key)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    // --- secrets -------------------------------------------------------------------------------

    /// Stores (or replaces) an encrypted secret.
    pub async fn put_secret(&self, name: &str, nonce: &str, ciphertext: &str) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.query(sql!("secrets.delete", "DELETE FROM secrets WHERE name = $1")).bind(name).execute(&mut *tx).await?;
        self.query(sql!(
            "secrets.insert",
            "INSERT INTO secrets (name, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4)"
        ))
        .bind(name)
        .bind(nonce)
        .bind(ciphertext)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn insert_secret_if_absent(&self, name: &str, nonce: &str, ciphertext: &str) -> DbResult<bool> {
        let done = self
            .query(insert_or_ignore!(
                "secrets.insert_if_absent",
                "INSERT INTO secrets (name, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4)"
            ))
            .bind(name)
            .bind(nonce)
            .bind(ciphertext)
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn get_secret(&self, name: &str) -> DbResult<Option<(String, String)>> {
        let row = self
            .query(sql!("secrets.get", "SELECT nonce, ciphertext FROM secrets WHERE name = $1"))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok((text(&r, "nonce")?, text(&r, "ciphertext")?))).transpose()
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
