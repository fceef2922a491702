//! The public application: routes, extractor configuration, and the rewriting of framework
//! errors (bad JSON, bad path, unknown route, wrong method) into the one error shape.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::error::{JsonPayloadError, PathError, QueryPayloadError};
use actix_web::{web, App, HttpRequest};
use packyard_core::services::Services;

use crate::error::{ApiError, ErrorCode};

/// Largest JSON body the admin API accepts.
const JSON_LIMIT: usize = 1 << 20;

pub fn public_app(
    services: Services,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(web::Data::new(crate::frontage::Frontage::new(&services.config)))
        .app_data(web::Data::new(services))
        .app_data(web::JsonConfig::default().limit(JSON_LIMIT).error_handler(json_error))
        .app_data(web::PathConfig::default().error_handler(path_error))
        .app_data(web::QueryConfig::default().error_handler(query_error))
        // The format endpoints first: the busiest routes, matched by a static prefix.
        .configure(crate::repository::configure)
        .configure(crate::admin::configure)
        .configure(crate::nexus::configure)
        .configure(crate::ui::configure)
        .default_service(web::to(no_route))
        .wrap(crate::repository::Formats)
        .wrap(crate::observe::Observe)
}

async fn no_route(req: HttpRequest) -> Result<&'static str, ApiError> {
    Err(ApiError::not_found(format!("no such endpoint: {} {}", req.method(), req.path())))
}

fn json_error(err: JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    let api = match &err {
        JsonPayloadError::OverflowKnownLength { length, limit } => ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("JSON body of {length} bytes exceeds the limit of {limit} bytes"),
        ),
        JsonPayloadError::Overflow { limit } => {
            ApiError::new(ErrorCode::PayloadTooLarge, format!("JSON body exceeds the limit of {limit} bytes"))
        }
        JsonPayloadError::ContentType => {
            ApiError::new(ErrorCode::UnsupportedMediaType, "send the body as JSON with Content-Type: application/json")
        }
        JsonPayloadError::Deserialize(e) => ApiError::bad_request(format!("invalid JSON body: {e}")),
        JsonPayloadError::Serialize(e) => ApiError::internal(e),
        other => ApiError::bad_request(format!("cannot read the JSON body: {other}")),
    };
    api.into()
}

fn path_error(err: PathError, req: &HttpRequest) -> actix_web::Error {
    let PathError::Deserialize(e) = &err else {
        return ApiError::bad_request(format!("invalid path {}: {err}", req.path())).into();
    };
    ApiError::bad_request(format!("invalid path {}: {e}", req.path())).into()
}

fn query_error(err: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::bad_request(format!("invalid query string: {err}")).into()
}
