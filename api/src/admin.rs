//! The admin API under `/api/v1`: JSON, admin credentials, the one error shape.

use actix_web::web;

pub mod audit;
pub mod cleanup;
pub mod openapi;
pub mod repositories;
pub mod resource;
pub mod roles;
pub mod selectors;
pub mod tokens;
pub mod users;
pub mod webhooks;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/v1")
            .configure(repositories::configure)
            .configure(users::configure)
            .configure(roles::configure)
            .configure(selectors::configure)
            .configure(tokens::configure)
            .configure(audit::configure)
            .configure(cleanup::configure)
            .configure(webhooks::configure)
            .configure(openapi::configure),
    );
}
