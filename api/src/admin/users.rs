//! `/api/v1/users`: local users and their roles (admin), and a user's own password.

use actix_web::{web, HttpResponse};
use packyard_core::services::Services;
use packyard_model::time::rfc3339_ms;
use packyard_store::db::users::UserRecord;
use packyard_store::db::DbError;
use serde::{Deserialize, Serialize};

use crate::auth::{Admin, Authenticated};
use crate::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/users").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            crate::admin::resource::resource("/users/{username}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        )
        .service(crate::admin::resource::resource("/users/{username}/password").route(web::put().to(change_password)));
}

/// `[A-Za-z0-9._@-]{1,64}`.
pub fn check_username(name: &str) -> Result<(), ApiError> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "invalid username {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_', '@' and '-'",
            name.chars().take(80).collect::<String>()
        )))
    }
}

pub fn check_password(pw: &str) -> Result<(), ApiError> {
    if pw.chars().count() < 8 || pw.len() > 1024 {
        return Err(ApiError::bad_request("passwords need 8 to 1024 characters"));
    }
    Ok(())
}

#[derive(Serialize)]
struct UserView {
    username: String,
    roles: Vec<String>,
    created_at: String,
    /// `local`, `ldap:<directory>` or `oidc`: where the user signs in.
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    display_name: Option<String>,
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
}

/// Refuses to change what a directory or identity provider owns.
fn local_only(user: &UserRecord, what: &str) -> Result<(), ApiError> {
    if user.is_local() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "{} signs in through {}: {what} come from there, not from Packyard",
        user.username, user.source
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    username: String,
    password: String,
    #[serde(default)]
    roles: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserUpdate {
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    roles: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    #[serde(default)]
    current_password: Option<String>,
    new_password: String,
}

fn conflict_is_bad_role(e: DbError) -> ApiError {
    match e {
        DbError::Conflict(m) if m.starts_with("role ") => ApiError::bad_request(m),
        other => other.into(),
    }
}

async fn view(services: &Services, user: UserRecord) -> Result<UserView, ApiError> {
    let roles = services.db.role_names_of(user.id).await?;
    Ok(UserView::of(user, roles))
}

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let mut roles = services.db.role_names_of_all().await?;
    let out: Vec<UserView> = services
        .db
        .list_users()
        .await?
        .into_iter()
        .map(|u| {
            let r = roles.remove(&u.id).unwrap_or_default();
            UserView::of(u, r)
        })
        .collect();
    Ok(HttpResponse::Ok().json(out))
}

async fn find(services: &Services, username: &str) -> Result<UserRecord, ApiError> {
    services.db.user_by_name(username).await?.ok_or_else(|| ApiError::not_found(format!("user {username} not found")))
}

pub(crate) async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<NewUser>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    check_username(&body.username)?;
    check_password(&body.password)?;
    let hash = services.security.hash(&body.password).await?;
    services.db.create_user(&body.username, &hash, &body.roles).await.map_err(conflict_is_bad_role)?;
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "user.create",
            &body.username,
            serde_json::json!({"roles": body.roles}),
        )
        .await;
    let user = find(&services, &body.username).await?;
    Ok(HttpResponse::Created().json(view(&services, user).await?))
}

pub(crate) async fn get(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let user = find(&services, &path).await?;
    Ok(HttpResponse::Ok().json(view(&services, user).await?))
}

pub(crate) async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<UserUpdate>,
) -> Result<HttpResponse, ApiError> {
    let user = find(&services, &path).await?;
    let id = user.id;
    let body = body.into_inner();
    if let Some(pw) = &body.password {
        local_only(&user, "passwords")?;
        check_password(pw)?;
    }
    if body.roles.is_some() {
        local_only(&user, "roles")?;
    }
    // Roles first: an unknown role is refused before anything changes.
    if let Some(roles) = &body.roles {
        services.db.set_user_roles(id, roles).await.map_err(conflict_is_bad_role)?;
    }
    if let Some(pw) = &body.password {
        services.security.change_password(&user, None, pw, None, admin.addr()).await?;
    }
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "user.update",
            &path,
            serde_json::json!({"password_changed": body.password.is_some(), "roles": body.roles}),
        )
        .await;
    let user = find(&services, &path).await?;
    Ok(HttpResponse::Ok().json(view(&services, user).await?))
}

pub(crate) async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if path.as_str() == admin.username() {
        return Err(ApiError::new(crate::error::ErrorCode::Conflict, "you cannot delete your own user"));
    }
    let user = find(&services, &path).await?;
    services.db.delete_user(user.id).await?;
    services.changed(packyard_core::events::Changed::Security);
    services.security.audit(admin.username(), Some(admin.addr()), "user.delete", &path, serde_json::json!({})).await;
    Ok(HttpResponse::NoContent().finish())
}

/// A user changes their own password (with the current one, checked through the login
/// throttle); an admin may set anyone's. The user's other web UI sessions end.
pub(crate) async fn change_password(
    user: Authenticated,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<PasswordChange>,
) -> Result<HttpResponse, ApiError> {
    let own = path.as_str() == user.username();
    if !own && !user.is_admin() {
        return Err(ApiError::forbidden(format!("user {} may only change their own password", user.username())));
    }
    check_password(&body.new_password)?;
    let record = services
        .db
        .user_by_name(&path)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("user {} not found", path.as_str())))?;
    local_only(&record, "passwords")?;
    let current = (own && !user.is_admin()).then(|| body.current_password.as_deref().unwrap_or_default());
    let keep = if own { user.0.session_id() } else { None };
    let ended = services.security.change_password(&record, current, &body.new_password, keep, user.0.addr).await?;
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(user.username(), Some(user.0.addr), "user.password", &path, serde_json::json!({"sessions_ended": ended}))
        .await;
    Ok(HttpResponse::NoContent().finish())
}
