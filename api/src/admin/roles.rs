//! `/api/v1/roles`: roles holding privileges on repository-name patterns.

use actix_web::{web, HttpResponse};
use packyard_core::security::service::{ADMIN_ROLE, ANONYMOUS_ROLE};
use packyard_core::security::{Action, Privilege};
use packyard_core::services::Services;
use packyard_model::time::rfc3339_ms;
use packyard_store::db::security::RoleRecord;
use serde::{Deserialize, Serialize};

use crate::auth::Admin;
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/roles").route(web::get().to(list)).route(web::post().to(create)))
        .service(
            crate::admin::resource::resource("/roles/{name}")
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        );
}

#[derive(Serialize)]
struct RoleView {
    name: String,
    description: String,
    builtin: bool,
    privileges: Vec<Privilege>,
    created_at: String,
    updated_at: String,
}

impl From<RoleRecord> for RoleView {
    fn from(r: RoleRecord) -> Self {
        Self {
            name: r.name,
            description: r.description,
            builtin: r.builtin,
            privileges: r.privileges,
            created_at: rfc3339_ms(r.created_at),
            updated_at: rfc3339_ms(r.updated_at),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: String,
    privileges: Vec<Privilege>,
}

fn check(name: &str, body: &RoleBody) -> Result<(), ApiError> {
    let ok =
        !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        return Err(ApiError::bad_request(format!(
            "invalid role name {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
            name.chars().take(80).collect::<String>()
        )));
    }
    if body.description.len() > 1000 {
        return Err(ApiError::bad_request("description: at most 1000 characters"));
    }
    for p in &body.privileges {
        p.validate().map_err(ApiError::bad_request)?;
    }
    if name == ANONYMOUS_ROLE && body.privileges.iter().any(|p| p.actions.iter().any(|a| *a != Action::Read)) {
        return Err(ApiError::bad_request(
            "the anonymous role can only hold read privileges: anonymous writes are never allowed",
        ));
    }
    Ok(())
}

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    let roles: Vec<RoleView> = services.db.list_roles().await?.into_iter().map(RoleView::from).collect();
    Ok(HttpResponse::Ok().json(roles))
}

async fn find(services: &Services, name: &str) -> Result<RoleRecord, ApiError> {
    services.db.role_by_name(name).await?.ok_or_else(|| ApiError::not_found(format!("role {name} not found")))
}

pub(crate) async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<RoleBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let name = body.name.clone().ok_or_else(|| ApiError::bad_request("missing field `name`"))?;
    check(&name, &body)?;
    services.db.insert_role(&name, &body.description, false, &body.privileges).await?;
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "role.create",
            &name,
            serde_json::json!({"privileges": body.privileges}),
        )
        .await;
    Ok(HttpResponse::Created().json(RoleView::from(find(&services, &name).await?)))
}

pub(crate) async fn get(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(RoleView::from(find(&services, &path).await?)))
}

pub(crate) async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<RoleBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if body.name.as_deref().is_some_and(|n| n != path.as_str()) {
        return Err(ApiError::bad_request("a role cannot be renamed"));
    }
    check(&path, &body)?;
    if path.as_str() == ADMIN_ROLE {
        return Err(ApiError::bad_request("the built-in admin role cannot be changed"));
    }
    find(&services, &path).await?;
    services.db.update_role(&path, &body.description, &body.privileges).await?;
    services.changed(packyard_core::events::Changed::Security);
    services
        .security
        .audit(
            admin.username(),
            Some(admin.addr()),
            "role.update",
            &path,
            serde_json::json!({"privileges": body.privileges}),
        )
        .await;
    Ok(HttpResponse::Ok().json(RoleView::from(find(&services, &path).await?)))
}

pub(crate) async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let role = find(&services, &path).await?;
    if role.builtin {
        return Err(ApiError::new(ErrorCode::Conflict, format!("the built-in role {} cannot be deleted", role.name)));
    }
    services.db.delete_role(&path).await?;
    services.changed(packyard_core::events::Changed::Security);
    services.security.audit(admin.username(), Some(admin.addr()), "role.delete", &path, serde_json::json!({})).await;
    Ok(HttpResponse::NoContent().finish())
}
