//! `/api/v1/tokens`: the caller's API tokens. The secret is shown once, at creation; only its
//! hash is stored.

use actix_web::{web, HttpResponse};
use packyard_core::security::{tokens, Action, Principal, Privilege};
use packyard_core::services::Services;
use packyard_model::time::{parse_rfc3339, rfc3339_ms};
use packyard_store::db::security::TokenRecord;
use packyard_store::db::DbError;
use serde::{Deserialize, Serialize};

use crate::auth::Authenticated;
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/tokens").route(web::get().to(list)).route(web::post().to(create)))
        .service(crate::admin::resource::resource("/tokens/{id}").route(web::delete().to(revoke)));
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    name: String,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    repositories: Option<String>,
    #[serde(default)]
    actions: Option<Vec<Action>>,
}

#[derive(Serialize)]
struct TokenView {
    id: String,
    name: String,
    username: String,
    repositories: Option<String>,
    actions: Option<Vec<Action>>,
    expires_at: Option<String>,
    created_at: String,
    revoked_at: Option<String>,
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

#[derive(Serialize)]
struct CreatedToken {
    token: String,
    #[serde(flatten)]
    view: TokenView,
}

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    all: bool,
}

pub(crate) async fn create(
    user: Authenticated,
    services: web::Data<Services>,
    body: web::Json<NewToken>,
) -> Result<HttpResponse, ApiError> {
    // A web UI session is a password login; an API token is not.
    if let Principal::User { token: Some(t), .. } = user.0.principal.as_ref() {
        if !t.session {
            return Err(ApiError::forbidden("a token cannot create tokens; log in with your password"));
        }
    }
    let body = body.into_inner();
    if body.name.trim().is_empty() || body.name.len() > 200 {
        return Err(ApiError::bad_request("name: 1 to 200 characters"));
    }
    let expires_at = match body.expires_at.as_deref() {
        None => None,
        Some(s) => {
            let ms = parse_rfc3339(s).ok_or_else(|| {
                ApiError::bad_request(format!("expires_at {s:?} is not an RFC 3339 time, e.g. 2027-01-31T00:00:00Z"))
            })?;
            if ms <= packyard_store::db::now_ms() {
                return Err(ApiError::bad_request("expires_at is in the past"));
            }
            Some(ms)
        }
    };
    if let Some(pattern) = &body.repositories {
        Privilege { repositories: pattern.clone(), actions: vec![Action::Read] }
            .validate()
            .map_err(ApiError::bad_request)?;
    }
    let mut body = body;
    if let Some(a) = body.actions.as_mut() {
        a.sort();
        a.dedup();
    }
    if body.actions.as_ref().is_some_and(Vec::is_empty) {
        return Err(ApiError::bad_request("actions: list at least one, or leave it out for all of the user's"));
    }
    let new = tokens::generate();
    services
        .db
        .insert_token(
            &new.id,
            user.user_id(),
            &body.name,
            &new.secret_hash,
            body.repositories.as_deref(),
            body.actions.as_deref(),
            expires_at,
        )
        .await?;
    services
        .security
        .audit(user.username(), Some(user.0.addr), "token.create", &new.id, serde_json::json!({"name": body.name}))
        .await;
    let record = services.db.token_by_id(&new.id).await?.ok_or_else(|| ApiError::internal("token vanished"))?;
    Ok(HttpResponse::Created().json(CreatedToken { token: new.token, view: TokenView::from(record) }))
}

pub(crate) async fn list(
    user: Authenticated,
    services: web::Data<Services>,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let scope = if q.all && user.is_admin() { None } else { Some(user.user_id()) };
    let tokens: Vec<TokenView> = services.db.list_tokens(scope).await?.into_iter().map(TokenView::from).collect();
    Ok(HttpResponse::Ok().json(tokens))
}

pub(crate) async fn revoke(
    user: Authenticated,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    let not_found = || ApiError::not_found(format!("token {id} not found"));
    let record = services.db.token_by_id(&id).await?.ok_or_else(not_found)?;
    if record.user_id != user.user_id() && !user.is_admin() {
        return Err(not_found());
    }
    match services.db.revoke_token(&id).await {
        Ok(()) => {}
        Err(DbError::NotFound) => return Err(ApiError::not_found(format!("token {id} is already revoked"))),
        Err(e) => return Err(e.into()),
    }
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(user.username(), Some(user.0.addr), "token.revoke", &id, serde_json::json!({"owner": record.username}))
        .await;
    Ok(HttpResponse::NoContent().finish())
}
