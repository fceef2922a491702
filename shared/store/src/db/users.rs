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
    pub external_id: Option<String>,
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
    /// Who the source says it is beyond the name (an LDAP DN, an OIDC `iss` and `sub`).
    pub external_id: Option<&'a str>,
    pub email: Option<&'a str>,
    pub display_name: Option<&'a str>,
    /// The roles the user's groups map to (names that are not roles here are left out and
    /// returned by [`Db::sync_external_user`]).
    pub roles: &'a [String],
}

/// What [`Db::sync_external_user`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Synced {
    /// The user's row, and the mapped role names that are not roles here.
    User { id: i64, unknown_roles: Vec<String> },
    /// The name belongs to someone else here (a local user, another source, another account of
    /// the same source): why.
    NameTaken(String),
}

macro_rules! user_columns {
    () => {
        "id, username, password_hash, source, external_id, email, display_name, created_at"
    };
}

fn parse_user(r: &AnyRow) -> DbResult<UserRecord> {
    Ok(UserRecord {
        id: r.try_get("id")?,
        username: text(r, "username")?,
        password_hash: text(r, "password_hash")?,
        source: text(r, "source")?,
        external_id: opt_text(r, "external_id")?,
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
    /// changed. The security watermark moves when a user is created or their roles change, not
    /// on every sign-in, so sign-ins do not empty every replica's caches. A sign-in that changes
    /// nothing only reads; concurrent changes of one user (two replicas, a token's parallel
    /// requests) take turns on the user's row, and one that loses a race (two first sign-ins,
    /// a deadlock, a role deleted meanwhile) is tried again.
    pub async fn sync_external_user(&self, user: &ExternalUser<'_>) -> DbResult<Synced> {
        super::retry_conflicts(|| self.sync_external_once(user)).await
    }

    async fn sync_external_once(&self, user: &ExternalUser<'_>) -> DbResult<Synced> {
        let known: std::collections::BTreeSet<String> = self.list_roles().await?.into_iter().map(|r| r.name).collect();
        let (mut roles, unknown_roles): (Vec<String>, Vec<String>) =
            user.roles.iter().cloned().partition(|r| known.contains(r));
        roles.sort();
        roles.dedup();
        // Read first: an unchanged user takes no write lock (SQLite has only one).
        if let Some(existing) = self.user_by_name(user.username).await? {
            if let Some(why) = name_taken(&existing, user) {
                return Ok(Synced::NameTaken(why));
            }
            let mut current = self.role_names_of(existing.id).await?;
            current.sort();
            if !attributes_changed(&existing, user) && current == roles {
                return Ok(Synced::User { id: existing.id, unknown_roles });
            }
        }
        // Lost races come back as `Retry`, which `retry_conflicts` runs again from the top.
        let lost = |e: DbError| match e {
            DbError::Conflict(m) => DbError::Retry(m),
            other => other,
        };
        let mut tx = self.begin().await?;
        let row = self
            .query(crate::for_update!(
                "users.get_for_update",
                concat!("SELECT ", user_columns!(), " FROM users WHERE username = $1")
            ))
            .bind(user.username)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(existing) = row.as_ref().map(parse_user).transpose()? else {
            let now = now_ms();
            let insert = self
                .query(insert_id!(
                    "users.insert_external",
                    "INSERT INTO users (username, password_hash, source, external_id, email, display_name, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                ))
                .bind(user.username)
                .bind(NO_PASSWORD)
                .bind(user.source)
                .bind(user.external_id)
                .bind(user.email)
                .bind(user.display_name)
                .bind(now)
                .bind(now);
            let id = self.insert_id(insert, &mut *tx).await.map_err(lost)?;
            self.set_user_roles_in(&mut tx, id, &roles).await.map_err(lost)?;
            self.bump_watermark(&mut tx, SECURITY).await?;
            tx.commit().await?;
            return Ok(Synced::User { id, unknown_roles });
        };
        if let Some(why) = name_taken(&existing, user) {
            return Ok(Synced::NameTaken(why));
        }
        if attributes_changed(&existing, user) {
            self.query(sql!(
                "users.set_attributes",
                "UPDATE users SET email = $1, display_name = $2, external_id = $3, updated_at = $4 WHERE id = $5"
            ))
            .bind(user.email)
            .bind(user.display_name)
            .bind(user.external_id.or(existing.external_id.as_deref()))
            .bind(now_ms())
            .bind(existing.id)
            .execute(&mut *tx)
            .await?;
        }
        let mut current = self.role_names_with(&mut *tx, existing.id).await?;
        current.sort();
        if current != roles {
            self.set_user_roles_in(&mut tx, existing.id, &roles).await.map_err(lost)?;
            self.bump_watermark(&mut tx, SECURITY).await?;
        }
        tx.commit().await?;
        Ok(Synced::User { id: existing.id, unknown_roles })
    }

    /// Users whose name, spelled in any case, belongs to a directory: `ldap:<name>` sources.
    pub async fn directory_sources_of(&self, username: &str) -> DbResult<Vec<String>> {
        let rows = self
            .query(sql!(
                "users.sources_folded",
                "SELECT source FROM users WHERE LOWER(username) = LOWER($1) AND source LIKE 'ldap:%' ORDER BY id"
            ))
            .bind(username)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| text(r, "source")).collect()
    }
}

/// Why `user` cannot be the row `existing`: a local user, another source, another account.
fn name_taken(existing: &UserRecord, user: &ExternalUser<'_>) -> Option<String> {
    if existing.source != user.source {
        return Some(if existing.is_local() {
            format!(
                "{} is a local user here; a local user of that name signs in with the local password",
                user.username
            )
        } else {
            format!("the user {} here comes from {}, not {}", user.username, existing.source, user.source)
        });
    }
    match (existing.external_id.as_deref(), user.external_id) {
        (Some(had), Some(now)) if had != now => {
            Some(format!("the user {} here is another account of {} ({had}, not {now})", user.username, user.source))
        }
        _ => None,
    }
}

fn attributes_changed(existing: &UserRecord, user: &ExternalUser<'_>) -> bool {
    existing.email.as_deref() != user.email
        || existing.display_name.as_deref() != user.display_name
        || (existing.external_id.is_none() && user.external_id.is_some())
}
