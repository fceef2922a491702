//! Per-request observability: a request id (taken from a sane `X-Request-Id` or generated) on
//! every log line of the request (`telemetry::REQUEST`, a task-local context) and on the
//! response, one access log line, and the HTTP metrics.
//!
//! Written as a middleware of its own rather than with `from_fn`: `from_fn` boxes the inner
//! service and each request's future, and this runs on every request (the small responses'
//! CPU is what it is measured by, docs/perf/ceiling.md).

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::web;
use packyard_core::services::Services;
use packyard_core::telemetry::{RequestContext, RequestId, REQUEST};
use packyard_store::metrics::Metrics;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

fn request_id(req: &ServiceRequest) -> RequestId {
    req.headers().get(&REQUEST_ID).and_then(|v| RequestId::parse(v.as_bytes())).unwrap_or_else(RequestId::random)
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

/// The middleware (`App::wrap(Observe)`).
pub struct Observe;

impl<S, B> Transform<S, ServiceRequest> for Observe
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Transform = Observed<S>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(Observed { service, metrics: std::cell::OnceCell::new() }))
    }
}

/// The app's metrics as one worker holds them: the `Rc` is the point (a count of this
/// thread's own, where the `Arc`'s is every worker's).
#[allow(clippy::redundant_allocation)]
type WorkerMetrics = Rc<Arc<Metrics>>;

pub struct Observed<S> {
    service: S,
    /// The app's metrics, taken from its data on the first request. An `Rc` of this worker's
    /// own: a request takes it without touching the `Arc`'s count, which every worker shares.
    metrics: std::cell::OnceCell<Option<WorkerMetrics>>,
}

impl<S, B> Service<ServiceRequest> for Observed<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = Observing<S::Future>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let cx = RequestContext::new(request_id(&req), method_label(req.method()), req.path().to_string());
        let metrics = self
            .metrics
            .get_or_init(|| req.app_data::<web::Data<Services>>().map(|s| Rc::new(s.metrics.clone())))
            .clone();
        let start = Instant::now();
        // Every log line of the request names it (the task-local context the log lines read).
        Observing { call: REQUEST.scope(cx, self.service.call(req)), metrics, start }
    }
}

pin_project_lite::pin_project! {
    /// A request's future, observed.
    pub struct Observing<F> {
        #[pin]
        call: tokio::task::futures::TaskLocalFuture<RequestContext, F>,
        metrics: Option<WorkerMetrics>,
        start: Instant,
    }
}

impl<F, B> Future for Observing<F>
where
    F: Future<Output = Result<ServiceResponse<B>, actix_web::Error>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let result = std::task::ready!(this.call.as_mut().poll(task));
        let elapsed = this.start.elapsed();
        let Some(cx) = this.call.take_value() else {
            return Poll::Ready(Err(actix_web::error::ErrorInternalServerError("the request's context is gone")));
        };
        let status = match &result {
            Ok(res) => res.status(),
            Err(e) => e.as_response_error().status_code(),
        };
        let repository = cx.repository.get().map_or((0, "", ""), |r| (r.id, r.name.as_str(), r.format.as_str()));
        if let Some(m) = this.metrics.as_ref() {
            m.observe_request(repository, cx.method, status.as_u16(), elapsed);
        }
        packyard_core::telemetry::access(&cx, status.as_u16(), elapsed);
        let mut res = result?;
        if let Ok(v) = HeaderValue::from_str(cx.id.as_str()) {
            res.headers_mut().insert(REQUEST_ID, v);
        }
        Poll::Ready(Ok(res))
    }
}
