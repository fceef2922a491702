//! Storage of users: local ones, and those a directory (LDAP) or an identity provider (OIDC)
//! vouches for, which get a row of their own so roles, tokens and sessions work alike.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::security::SECURITY;
use super::{now_ms, opt_text, text, Db, DbError, DbResult};
use crate::{insert_id, sql};

/// `users.source` of a user with a password stored here.
pub const LOCAL: &str = "local";
/// The password hash of a user who signs in elsewhere: no password verifies against it.
pub const NO_PASSWORD: &str = "!";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
    /// `local`, `ldap:<directory>` or `oidc`.
    pub source: String,
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub created_at: i64,
}

impl UserRecord {
    pub fn is_local(&self) -> bool {
        self.source == LOCAL
    }
}

/// What a directory or identity provider says about a user who just proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalUser<'a> {
    pub username: &'a str,
    pub source: &'a str,
    pub email: Option<&'a str>,
    pub display_name: Option<&'a str>,
    /// The roles the user's groups map to (names that are not roles here are left out and
    /// returned by [`Db::sync_external_user`]).
    pub roles: &'a [String],
}

macro_rules! user_columns {
    () => {
        "id, username, password_hash, source, email, display_name, created_at"
    };
}

fn parse_user(r: &AnyRow) -> DbResult<UserRecord> {
    Ok(UserRecord {
        id: r.try_get("id")?,
        username: text(r, "username")?,
        password_hash: text(r, "password_hash")?,
        source: text(r, "source")?,
        email: opt_text(r, "email")?,
        display_name: opt_text(r, "display_name")?,
        created_at: r.try_get("created_at")?,
    })
}

impl Db {
    pub async fn user_by_name(&self, username: &str) -> DbResult<Option<UserRecord>> {
        let row = self
            .query(sql!("users.get", concat!("SELECT ", user_columns!(), " FROM users WHERE username = $1")))
            .bind(username)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_user).transpose()
    }

    pub async fn list_users(&self) -> DbResult<Vec<UserRecord>> {
        let rows = self
            .query(sql!("users.list", concat!("SELECT ", user_columns!(), " FROM users ORDER BY username")))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse_user).collect()
    }

    /// Records a directory or identity provider user after a successful sign-in: creates the
    /// row on first sight, refreshes email and display name, and replaces the roles when they
    /// changed (only then is the security watermark bumped, so a sign-in does not empty every
    /// replica's caches). A name that belongs to a local user or to another source is a
    /// conflict: the two are different people. Returns the user's id and the mapped role names
    /// that are not roles here.
    pub async fn sync_external_user(&self, user: &ExternalUser<'_>) -> DbResult<(i64, Vec<String>)> {
        let known: std::collections::BTreeSet<String> = self.list_roles().await?.into_iter().map(|r| r.name).collect();
        let (mut roles, unknown): (Vec<String>, Vec<String>) =
            user.roles.iter().cloned().partition(|r| known.contains(r));
        roles.sort();
        roles.dedup();
        let existing = match self.user_by_name(user.username).await? {
            Some(u) => Some(u),
            None => {
                let now = now_ms();
                let insert = self
                    .query(insert_id!(
                        "users.insert_external",
                        "INSERT INTO users (username, password_hash, source, email, display_name, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                    ))
                    .bind(user.username)
                    .bind(NO_PASSWORD)
                    .bind(user.source)
                    .bind(user.email)
                    .bind(user.display_name)
                    .bind(now)
                    .bind(now);
                let mut tx = self.begin().await?;
                match self.insert_id(insert, &mut *tx).await {
                    Ok(id) => {
                        self.set_user_roles_in(&mut tx, id, &roles).await?;
                        self.bump_watermark(&mut tx, SECURITY).await?;
                        tx.commit().await?;
                        return Ok((id, unknown));
                    }
                    // Another replica's first sign-in of the same user won the race.
                    Err(DbError::Conflict(_)) => {
                        drop(tx);
                        self.user_by_name(user.username).await?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let Some(existing) = existing else { return Err(DbError::NotFound) };
        if existing.source != user.source {
            return Err(DbError::Conflict(if existing.is_local() {
                format!(
                    "{} is a local user here; a local user of that name signs in with the local password",
                    user.username
                )
            } else {
                format!("the user {} here comes from {}, not {}", user.username, existing.source, user.source)
            }));
        }
        if existing.email.as_deref() != user.email || existing.display_name.as_deref() != user.display_name {
            self.query(sql!(
                "users.set_attributes",
                "UPDATE users SET email = $1, display_name = $2, updated_at = $3 WHERE id = $4"
            ))
            .bind(user.email)
            .bind(user.display_name)
            .bind(now_ms())
            .bind(existing.id)
            .execute(self.pool())
            .await?;
        }
        let mut current = self.role_names_of(existing.id).await?;
        current.sort();
        if current != roles {
            let mut tx = self.begin().await?;
            self.set_user_roles_in(&mut tx, existing.id, &roles).await?;
            self.bump_watermark(&mut tx, SECURITY).await?;
            tx.commit().await?;
        }
        Ok((existing.id, unknown))
    }
}
