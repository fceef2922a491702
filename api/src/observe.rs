//! Per-request observability: a request id (taken from a sane `X-Request-Id` or generated) on
//! every log line of the request (`telemetry::REQUEST`, a task-local context) and on the
//! response, one access log line, and the HTTP metrics.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{web, HttpMessage};
use packyard_core::services::Services;
use packyard_core::telemetry::{RequestContext, REQUEST};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Set by format routes once they know which repository a request is for; read for metrics labels.
#[derive(Debug, Clone)]
pub struct RepoLabel {
    pub repository: std::sync::Arc<packyard_model::repos::Repository>,
    pub format: &'static str,
}

fn request_id(req: &ServiceRequest) -> String {
    req.headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
        .map_or_else(new_request_id, str::to_string)
}

/// 16 random hex digits.
fn new_request_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(16);
    for b in rand::random::<[u8; 8]>() {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 15)]));
    }
    id
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
    let cx = RequestContext { id: request_id(&req), method: method_label(req.method()), path: req.path().to_string() };
    let metrics = req.app_data::<web::Data<Services>>().map(|s| s.metrics.clone());
    let start = Instant::now();
    // Every log line of the request names it (the task-local context the log lines read).
    let mut call = std::pin::pin!(REQUEST.scope(cx, next.call(req)));
    let result = call.as_mut().await;
    let elapsed = start.elapsed();
    let Some(cx) = call.as_mut().take_value() else {
        return Err(actix_web::error::ErrorInternalServerError("the request's context is gone"));
    };
    let (status, label) = match &result {
        Ok(res) => (res.status(), res.request().extensions().get::<RepoLabel>().cloned()),
        Err(e) => (e.as_response_error().status_code(), None),
    };
    let repository = label.as_ref().map_or((0, "", ""), |l| (l.repository.id, l.repository.name.as_str(), l.format));
    if let Some(m) = metrics {
        m.observe_request(repository, cx.method, status.as_u16(), elapsed.as_secs_f64());
    }
    let id = HeaderValue::from_str(&cx.id);
    packyard_core::telemetry::access(&cx, status.as_u16(), elapsed);
    let mut res = result?;
    if let Ok(v) = id {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    Ok(res)
}
