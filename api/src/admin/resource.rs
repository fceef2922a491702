//! The admin API's resources: a path whose unsupported methods get a JSON 405.

use actix_web::{web, HttpRequest, Resource};

use crate::error::{ApiError, ErrorCode};

/// A resource whose unsupported methods get a JSON 405.
pub fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

async fn method_not_allowed(req: HttpRequest) -> Result<&'static str, ApiError> {
    Err(ApiError::new(ErrorCode::MethodNotAllowed, format!("method {} is not allowed on {}", req.method(), req.path())))
}
