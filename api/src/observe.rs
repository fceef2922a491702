//! Per-request observability: a request id (taken from a sane `X-Request-Id` or generated) on
//! every log line of the request and on the response, one access log line, and the HTTP metrics.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use packyard_core::services::Services;
use tracing::Instrument;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Set by format routes once they know which repository a request is for; read for metrics labels.
#[derive(Debug, Clone)]
pub struct RepoLabel {
    pub repository: String,
    pub format: &'static str,
}

fn request_id(req: &ServiceRequest) -> String {
    req.headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map_or_else(|| hex::encode(rand::random::<[u8; 8]>()), str::to_string)
}

fn method_label(m: &actix_web::http::Method) -> &'static str {
    match m.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let id = request_id(&req);
    let method = method_label(req.method());
    let path = req.path().to_string();
    let metrics = req.app_data::<web::Data<Services>>().map(|s| s.metrics.clone());
    let span = tracing::info_span!("request", request_id = %id, method, path = %path);
    let start = Instant::now();
    let result = next.call(req).instrument(span.clone()).await;
    let elapsed = start.elapsed();
    let _entered = span.enter();
    let (status, label) = match &result {
        Ok(res) => (res.status(), res.request().extensions().get::<RepoLabel>().cloned()),
        Err(e) => (e.as_response_error().status_code(), None),
    };
    let (repository, format) = label.as_ref().map_or(("", ""), |l| (l.repository.as_str(), l.format));
    if let Some(m) = metrics {
        m.http_requests_total.with_label_values(&[repository, format, method, status.as_str()]).inc();
        m.http_request_duration_seconds.with_label_values(&[repository, format, method]).observe(elapsed.as_secs_f64());
    }
    tracing::info!(status = status.as_u16(), elapsed_ms = elapsed.as_secs_f64() * 1000.0, "request");
    drop(_entered);
    let mut res = result?;
    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    if path == "/repository" || path.starts_with("/repository/") {
        crate::repository::sandbox(res.headers_mut());
    }
    Ok(res)
}
