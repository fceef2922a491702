//! `/api/v1/users`: local users and their roles (admin), and a user's own password.

use actix_web::{web, HttpResponse};
use packyard_core::admin::users::{self, NewUser, PasswordChange, UserUpdate};
use packyard_core::services::Services;

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

pub(crate) async fn list(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(users::list(&services).await?))
}

pub(crate) async fn create(
    admin: Admin,
    services: web::Data<Services>,
    body: web::Json<NewUser>,
) -> Result<HttpResponse, ApiError> {
    let user = users::create(&services, admin.actor(), body.into_inner()).await?;
    Ok(HttpResponse::Created().json(user))
}

pub(crate) async fn get(
    _admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(users::get(&services, &path).await?))
}

pub(crate) async fn update(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<UserUpdate>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(users::update(&services, admin.actor(), &path, body.into_inner()).await?))
}

pub(crate) async fn delete(
    admin: Admin,
    services: web::Data<Services>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    users::delete(&services, admin.actor(), &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A user changes their own password (with the current one); an admin may set anyone's.
pub(crate) async fn change_password(
    user: Authenticated,
    services: web::Data<Services>,
    path: web::Path<String>,
    body: web::Json<PasswordChange>,
) -> Result<HttpResponse, ApiError> {
    users::change_password(&services, user.password_caller(false), &path, &body).await?;
    Ok(HttpResponse::NoContent().finish())
}
