//! Storage of what authorizes: roles, users' roles and the watermarks. Every change that can
//! alter an authorization decision bumps the `security` watermark in the same transaction, so
//! that every replica drops its cached decisions. Tokens and sessions, the audit log, failed
//! logins and encrypted secrets each have a room of their own below.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{now_ms, text, Db, DbError, DbResult};
use crate::{insert_id, sql};
use packyard_model::security::Privilege;

mod audit;
mod logins;
mod read_only;
mod secrets;
mod selectors;
mod tokens;

pub use audit::{AuditFilter, AuditRecord};
pub use read_only::ReadOnly;
pub use selectors::SelectorRecord;
pub use tokens::TokenRecord;

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

fn privileges_json(p: &[Privilege]) -> DbResult<String> {
    serde_json::to_string(p).map_err(|e| DbError::Corrupt(e.to_string()))
}

macro_rules! role_columns {
    () => {
        "id, name, description, builtin, privileges, created_at, updated_at"
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
        self.resolve_selectors(&mut out).await?;
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

    /// A local user's email and display name (a directory's users get theirs from it).
    pub async fn set_user_profile(
        &self,
        user_id: i64,
        email: Option<&str>,
        display_name: Option<&str>,
    ) -> DbResult<()> {
        let set = sql!(
            "users.set_profile",
            "UPDATE users SET email = $1, display_name = $2, updated_at = $3 WHERE id = $4 AND source = 'local'"
        );
        self.bound(set, (email, display_name, now_ms(), user_id)).execute(self.pool()).await?;
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
}
