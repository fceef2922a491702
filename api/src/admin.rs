//! The admin API under `/api/v1`: JSON, admin credentials, the one error shape.

use actix_web::web;

pub mod openapi;
pub mod repositories;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/v1")
            .configure(repositories::configure)
            .configure(openapi::configure),
    );
}
