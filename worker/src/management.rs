//! The management listener on `server.management_bind`.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{web, App, HttpResponse};
use packyard_core::services::Services;

pub fn app(
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
        .app_data(web::Data::new(services))
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .route("/metrics", web::get().to(metrics))
        .default_service(web::to(|| async {
            HttpResponse::NotFound()
                .content_type("text/plain; charset=utf-8")
                .body("not found: the management listener serves /healthz, /readyz and /metrics\n")
        }))
}

/// The process is alive and serving.
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("ok\n")
}

/// Database reachable with migrations applied, blob store writable.
async fn readyz(services: web::Data<Services>) -> HttpResponse {
    match services.readiness().await {
        Ok(()) => HttpResponse::Ok().content_type("text/plain; charset=utf-8").body("ready\n"),
        Err(problems) => {
            tracing::warn!(?problems, "not ready");
            HttpResponse::ServiceUnavailable()
                .content_type("text/plain; charset=utf-8")
                .body(format!("not ready:\n{}\n", problems.join("\n")))
        }
    }
}

async fn metrics(services: web::Data<Services>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(services.metrics.render())
}
