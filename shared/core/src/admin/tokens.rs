//! A user's API tokens. The secret is shown once, at creation; only its hash is stored.

use std::net::IpAddr;

use packyard_model::time::{parse_rfc3339, rfc3339_ms};
use packyard_store::db::security::TokenRecord;
use packyard_store::db::DbError;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::security::{tokens, Action, Privilege};
use crate::services::Services;

/// Whose tokens: the signed-in user.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub user_id: i64,
    pub username: &'a str,
    pub is_admin: bool,
    pub address: IpAddr,
    /// Signed in with an API token (not a password or a web UI session): it may not make tokens.
    pub by_token: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    pub name: String,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub repositories: Option<String>,
    #[serde(default)]
    pub actions: Option<Vec<Action>>,
}

/// A token as its owner (or an admin) sees it: never its secret.
#[derive(Debug, Clone, Serialize)]
pub struct TokenView {
    pub id: String,
    pub name: String,
    pub username: String,
    pub repositories: Option<String>,
    pub actions: Option<Vec<Action>>,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

impl From<TokenRecord> for TokenView {
    fn from(t: TokenRecord) -> Self {
        Self {
            id: t.id,
            name: t.name,
            username: t.username,
            repositories: t.repositories,
            actions: t.actions,
            expires_at: t.expires_at.map(rfc3339_ms),
            created_at: rfc3339_ms(t.created_at),
            revoked_at: t.revoked_at.map(rfc3339_ms),
        }
    }
}

/// A token just made: its secret, shown this once.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedToken {
    pub token: String,
    #[serde(flatten)]
    pub view: TokenView,
}

pub async fn create(services: &Services, owner: Owner<'_>, mut body: NewToken) -> AdminResult<CreatedToken> {
    if owner.by_token {
        return Err(AdminError::Forbidden("a token cannot create tokens; log in with your password".into()));
    }
    if body.name.trim().is_empty() || body.name.len() > 200 {
        return Err(AdminError::Invalid("name: 1 to 200 characters".into()));
    }
    let expires_at = match body.expires_at.as_deref() {
        None => None,
        Some(s) => {
            let ms = parse_rfc3339(s).ok_or_else(|| {
                AdminError::Invalid(format!("expires_at {s:?} is not an RFC 3339 time, e.g. 2027-01-31T00:00:00Z"))
            })?;
            if ms <= packyard_store::db::now_ms() {
                return Err(AdminError::Invalid("expires_at is in the past".into()));
            }
            Some(ms)
        }
    };
    if let Some(pattern) = &body.repositories {
        Privilege { repositories: pattern.clone(), actions: vec![Action::Read], ..Default::default() }
            .validate()
            .map_err(AdminError::Invalid)?;
    }
    if let Some(a) = body.actions.as_mut() {
        a.sort();
        a.dedup();
    }
    if body.actions.as_ref().is_some_and(Vec::is_empty) {
        return Err(AdminError::Invalid("actions: list at least one, or leave it out for all of the user's".into()));
    }
    let new = tokens::generate();
    let (repositories, actions) = (body.repositories.as_deref(), body.actions.as_deref());
    services
        .db
        .insert_token(&new.id, owner.user_id, &body.name, &new.secret_hash, repositories, actions, expires_at)
        .await?;
    let detail = serde_json::json!({"name": body.name});
    services.security.audit(owner.username, Some(owner.address), "token.create", &new.id, detail).await;
    let record =
        services.db.token_by_id(&new.id).await?.ok_or_else(|| AdminError::Internal("token vanished".into()))?;
    Ok(CreatedToken { token: new.token, view: TokenView::from(record) })
}

/// The owner's tokens; `all`: everyone's, for an admin.
pub async fn list(services: &Services, owner: Owner<'_>, all: bool) -> AdminResult<Vec<TokenView>> {
    let scope = if all && owner.is_admin { None } else { Some(owner.user_id) };
    Ok(services.db.list_tokens(scope).await?.into_iter().map(TokenView::from).collect())
}

/// Revokes one of the owner's tokens (an admin: anyone's); another's is "not found".
pub async fn revoke(services: &Services, owner: Owner<'_>, id: &str) -> AdminResult<()> {
    let not_found = || AdminError::NotFound(format!("token {id} not found"));
    let record = services.db.token_by_id(id).await?.ok_or_else(not_found)?;
    if record.user_id != owner.user_id && !owner.is_admin {
        return Err(not_found());
    }
    match services.db.revoke_token(id).await {
        Ok(()) => {}
        Err(DbError::NotFound) => return Err(AdminError::NotFound(format!("token {id} is already revoked"))),
        Err(e) => return Err(e.into()),
    }
    services.changed(Changed::Security);
    let detail = serde_json::json!({"owner": record.username});
    services.security.audit(owner.username, Some(owner.address), "token.revoke", id, detail).await;
    Ok(())
}
