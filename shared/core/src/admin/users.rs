//! Local users and their roles, and a user's own password.

use std::net::IpAddr;

use packyard_model::time::rfc3339_ms;
use packyard_store::db::users::UserRecord;
use packyard_store::db::DbError;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::hosted::Actor;
use crate::services::Services;

/// `[A-Za-z0-9._@-]{1,64}`.
pub fn check_username(name: &str) -> AdminResult<()> {
    let ok = packyard_model::is_plain_name(name, b"._@-");
    if ok {
        Ok(())
    } else {
        Err(AdminError::Invalid(format!(
            "invalid username {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_', '@' and '-'",
            name.chars().take(80).collect::<String>()
        )))
    }
}

pub fn check_password(pw: &str) -> AdminResult<()> {
    if pw.chars().count() < 8 || pw.len() > 1024 {
        return Err(AdminError::Invalid("passwords need 8 to 1024 characters".into()));
    }
    Ok(())
}

/// A user as the administration shows it.
#[derive(Debug, Clone, Serialize)]
pub struct UserView {
    pub username: String,
    pub roles: Vec<String>,
    pub created_at: String,
    /// `local`, `ldap:<directory>` or `oidc`: where the user signs in.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

impl UserView {
    fn of(user: UserRecord, roles: Vec<String>) -> Self {
        Self {
            username: user.username,
            roles,
            created_at: rfc3339_ms(user.created_at),
            source: user.source,
            email: user.email,
            display_name: user.display_name,
        }
    }

    /// Signs in with a password Packyard keeps (not through a directory or a provider).
    pub fn is_local(&self) -> bool {
        self.source == "local"
    }
}

/// Refuses to change what a directory or identity provider owns.
fn local_only(user: &UserRecord, what: &str) -> AdminResult<()> {
    if user.is_local() {
        return Ok(());
    }
    Err(AdminError::Invalid(format!(
        "{} signs in through {}: {what} come from there, not from Packyard",
        user.username, user.source
    )))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserUpdate {
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    /// A local user's email and display name (`""` clears one).
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub display_name: Option<String>,
}

/// An email or display name as kept: at most 255 characters, none a control character; empty:
/// none.
fn check_profile(what: &str, value: Option<&str>) -> AdminResult<Option<String>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else { return Ok(None) };
    if v.chars().count() > 255 || v.chars().any(char::is_control) {
        return Err(AdminError::Invalid(format!("{what}: at most 255 characters, no control characters")));
    }
    Ok(Some(v.to_string()))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    #[serde(default)]
    pub current_password: Option<String>,
    pub new_password: String,
}

/// Who changes a password: a user their own (with the current one, unless an admin), or an
/// admin anyone's.
#[derive(Debug, Clone, Copy)]
pub struct PasswordCaller<'a> {
    pub username: &'a str,
    pub is_admin: bool,
    /// The current password is checked also of an admin changing their own (the web UI's form).
    pub require_current: bool,
    /// The caller's web UI session, which stays signed in.
    pub session_id: Option<&'a str>,
    pub address: IpAddr,
}

fn conflict_is_bad_role(e: DbError) -> AdminError {
    match e {
        DbError::Conflict(m) if m.starts_with("role ") => AdminError::Invalid(m),
        other => other.into(),
    }
}

async fn find(services: &Services, username: &str) -> AdminResult<UserRecord> {
    services.db.user_by_name(username).await?.ok_or_else(|| AdminError::NotFound(format!("user {username} not found")))
}

async fn view(services: &Services, user: UserRecord) -> AdminResult<UserView> {
    let roles = services.db.role_names_of(user.id).await?;
    Ok(UserView::of(user, roles))
}

pub async fn list(services: &Services) -> AdminResult<Vec<UserView>> {
    let mut roles = services.db.role_names_of_all().await?;
    let users = services.db.list_users().await?;
    Ok(users
        .into_iter()
        .map(|u| {
            let r = roles.remove(&u.id).unwrap_or_default();
            UserView::of(u, r)
        })
        .collect())
}

pub async fn get(services: &Services, username: &str) -> AdminResult<UserView> {
    let user = find(services, username).await?;
    view(services, user).await
}

pub async fn create(services: &Services, actor: Actor<'_>, new: NewUser) -> AdminResult<UserView> {
    check_username(&new.username)?;
    check_password(&new.password)?;
    let email = check_profile("email", new.email.as_deref())?;
    let display_name = check_profile("display_name", new.display_name.as_deref())?;
    let hash = services.security.hash(&new.password).await?;
    let id = services.db.create_user(&new.username, &hash, &new.roles).await.map_err(conflict_is_bad_role)?;
    if email.is_some() || display_name.is_some() {
        services.db.set_user_profile(id, email.as_deref(), display_name.as_deref()).await?;
    }
    services.changed(Changed::Security);
    let detail = serde_json::json!({"roles": new.roles});
    services.security.audit(actor.username, actor.address, "user.create", &new.username, detail).await;
    get(services, &new.username).await
}

/// Roles first: an unknown role is refused before anything changes.
pub async fn update(
    services: &Services,
    actor: Actor<'_>,
    username: &str,
    change: UserUpdate,
) -> AdminResult<UserView> {
    let user = find(services, username).await?;
    if let Some(pw) = &change.password {
        local_only(&user, "passwords")?;
        check_password(pw)?;
    }
    if change.roles.is_some() {
        local_only(&user, "roles")?;
    }
    if change.email.is_some() || change.display_name.is_some() {
        local_only(&user, "email and display name")?;
        let email = match &change.email {
            Some(e) => check_profile("email", Some(e))?,
            None => user.email.clone(),
        };
        let display_name = match &change.display_name {
            Some(d) => check_profile("display_name", Some(d))?,
            None => user.display_name.clone(),
        };
        services.db.set_user_profile(user.id, email.as_deref(), display_name.as_deref()).await?;
    }
    if let Some(roles) = &change.roles {
        services.db.set_user_roles(user.id, roles).await.map_err(conflict_is_bad_role)?;
    }
    if let Some(pw) = &change.password {
        // The address is read only with a current password to check (the login throttle's).
        let address = actor.address.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        services.security.change_password(&user, None, pw, None, address).await?;
    }
    services.changed(Changed::Security);
    let detail = serde_json::json!({"password_changed": change.password.is_some(), "roles": change.roles});
    services.security.audit(actor.username, actor.address, "user.update", username, detail).await;
    get(services, username).await
}

pub async fn delete(services: &Services, actor: Actor<'_>, username: &str) -> AdminResult<()> {
    if username == actor.username {
        return Err(AdminError::Conflict("you cannot delete your own user".into()));
    }
    let user = find(services, username).await?;
    services.db.delete_user(user.id).await?;
    services.changed(Changed::Security);
    services.security.audit(actor.username, actor.address, "user.delete", username, serde_json::json!({})).await;
    Ok(())
}

/// A user changes their own password (with the current one, checked through the login
/// throttle); an admin may set anyone's. The user's other web UI sessions end: how many.
pub async fn change_password(
    services: &Services,
    caller: PasswordCaller<'_>,
    username: &str,
    change: &PasswordChange,
) -> AdminResult<u64> {
    let own = username == caller.username;
    if !own && !caller.is_admin {
        return Err(AdminError::Forbidden(format!("user {} may only change their own password", caller.username)));
    }
    check_password(&change.new_password)?;
    let record = find(services, username).await?;
    local_only(&record, "passwords")?;
    let asks_current = own && (!caller.is_admin || caller.require_current);
    let current = asks_current.then(|| change.current_password.as_deref().unwrap_or_default());
    let keep = if own { caller.session_id } else { None };
    let ended = services.security.change_password(&record, current, &change.new_password, keep, caller.address).await?;
    services.changed(Changed::Security);
    let detail = serde_json::json!({"sessions_ended": ended});
    services.security.audit(caller.username, Some(caller.address), "user.password", username, detail).await;
    Ok(ended)
}
