//! `/repository/<name>/…`: the format endpoints. The repository is resolved once per request
//! (from the replica's cache) and the request goes to the route table of its format — never to a
//! route chosen by how the URL happens to look. The route table says what each route needs
//! (read, write, delete, a signed-in user, or nothing); the decision is made here, before the
//! route runs, so a route never checks access in its body; and a request no route answers is
//! still decided by access first, so an unauthorised caller learns nothing about what is
//! stored. Every error of the scope renders as plain text ([`FormatError`]).

use std::sync::Arc;

use actix_web::body::EitherBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::future::{Either, LocalBoxFuture, TryFutureExt as _};
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_model::security::Reach;

use crate::auth::Caller;
use crate::error::{ApiError, ErrorCode, FormatError};
use crate::route::{Access, Cx, Routes, Tail};

/// `/repository` and everything below it, matched by its static prefix (no pattern to run per
/// request); the repository's name and the tail are split off the path in [`dispatch`]. A
/// request under `/repository/` gets there ahead of the router ([`Formats`]); the scope answers
/// what the router is still asked (`/repository` itself).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::scope("/repository").default_service(web::to(dispatch)));
}

/// The format endpoints ahead of the router (`App::wrap(Formats)`): a request under
/// `/repository/` goes to [`dispatch`] at once, the others to the router. The busiest routes so
/// skip the router's and the scope's layers — each a boxed service call and a boxed future per
/// request — which cost more than Packyard's own work on a small response
/// (docs/perf/ceiling.md).
pub struct Formats;

impl<S, B> Transform<S, ServiceRequest> for Formats
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Transform = FormatsFirst<S>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(FormatsFirst { service }))
    }
}

pub struct FormatsFirst<S> {
    service: S,
}

type Routed<B> = fn(ServiceResponse<B>) -> ServiceResponse<EitherBody<B>>;

impl<S, B> Service<ServiceRequest> for FormatsFirst<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error>,
{
    type Response = ServiceResponse<EitherBody<B>>;
    type Error = actix_web::Error;
    type Future = Either<
        futures_util::future::MapOk<S::Future, Routed<B>>,
        Either<Answered<B>, LocalBoxFuture<'static, Result<Self::Response, Self::Error>>>,
    >;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        if !req.path().starts_with("/repository/") {
            // While frozen, a write outside the format endpoints ends here (`crate::read_only`).
            if req.method() != actix_web::http::Method::GET && services_frozen(&req) {
                if let Some(res) = crate::read_only::refusal(&req) {
                    let res = ServiceResponse::new(req.into_parts().0, res).map_into_right_body();
                    return Either::Right(Either::Left(Answered { res: Some(res), repo: None }));
                }
            }
            let routed: Routed<B> = ServiceResponse::map_into_left_body;
            return Either::Left(self.service.call(req).map_ok(routed));
        }
        // A remembered answer (`crate::hot`) needs none of the dispatcher's work.
        let hot = req.app_data::<web::Data<Services>>().and_then(|s| crate::hot::answer(req.request(), s));
        let (req, mut payload) = req.into_parts();
        if let Some((res, repo)) = hot {
            let res = ServiceResponse::new(req, res).map_into_right_body();
            return Either::Right(Either::Left(Answered { res: Some(res), repo: Some(repo) }));
        }
        Either::Right(Either::Right(Box::pin(async move {
            let body = <web::Payload as actix_web::FromRequest>::from_request(&req, &mut payload).await?;
            // As the router's handler would: an error renders as its response, kept on it.
            let res = dispatch(req.clone(), body).await.unwrap_or_else(HttpResponse::from_error);
            Ok(ServiceResponse::new(req, res).map_into_right_body())
        })))
    }
}

fn services_frozen(req: &ServiceRequest) -> bool {
    req.app_data::<web::Data<Services>>().is_some_and(|s| s.read_only.frozen())
}

/// A hot answer, ready: on its first poll (inside the observe middleware's task-local context)
/// it names its repository for the metrics, as the dispatcher does.
pub struct Answered<B> {
    res: Option<ServiceResponse<EitherBody<B>>>,
    repo: Option<Arc<Repository>>,
}

// Nothing in it is pinned: it is moved out of, never polled in place.
impl<B> Unpin for Answered<B> {}

impl<B> std::future::Future for Answered<B> {
    type Output = Result<ServiceResponse<EitherBody<B>>, actix_web::Error>;

    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        if let Some(repo) = self.repo.take() {
            let _ = packyard_core::telemetry::REQUEST.try_with(|cx| cx.repository.set(repo));
        }
        std::task::Poll::Ready(
            self.res.take().ok_or_else(|| actix_web::error::ErrorInternalServerError("a hot answer polled twice")),
        )
    }
}

/// `<name>` and the tail below `/repository/<name>/` of a path (as the router sees it: escapes
/// decoded except those of reserved characters such as `%2F`).
fn split(path: &str) -> (&str, &str) {
    let rest = path.strip_prefix("/repository").unwrap_or_default().trim_start_matches('/');
    rest.split_once('/').unwrap_or((rest, ""))
}

/// What every response under `/repository/` carries, whatever the file (an upload, an
/// upstream's page, an error): served content shares the web UI's origin, so a browser must
/// neither guess its type (`nosniff`) nor run it — the policy sandboxes the document (a unique
/// origin: no cookies, no scripts, no forms), loads nothing and may not be framed. Replaces what
/// an upstream sent. Set by [`dispatch`] on what a route answers and by [`FormatError`]'s
/// rendering on every error (no middleware: one costs a boxed future per request).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; sandbox; frame-ancestors 'none'";

pub fn sandbox(headers: &mut actix_web::http::header::HeaderMap) {
    use actix_web::http::header::{HeaderValue, CONTENT_SECURITY_POLICY as CSP, X_CONTENT_TYPE_OPTIONS};
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(CSP, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
}

fn services(req: &HttpRequest) -> Result<web::Data<Services>, FormatError> {
    Ok(req
        .app_data::<web::Data<Services>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("Services missing from app data"))?)
}

async fn dispatch(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, FormatError> {
    let mut res = route(req, body).await?;
    sandbox(res.headers_mut());
    Ok(res)
}

async fn route(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, FormatError> {
    let services = services(&req)?;
    // Before anything is looked up: what the hot answers remember is made under these.
    let epochs = crate::hot::Epochs::now(&services);
    // A bad credential is a 401 before anything else, for a repository that does not exist too.
    let caller = crate::auth::resolve(&req).await?;
    let (name, matched) = split(req.match_info().as_str());
    if name.is_empty() {
        return Err(ApiError::not_found(format!("no such endpoint: {} {}", req.method(), req.path())).into());
    }
    let repo = services
        .security
        .repository(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("repository {name} not found")))?;
    // The metrics' labels (the observe middleware's task-local context of the request).
    let _ = packyard_core::telemetry::REQUEST.try_with(|cx| cx.repository.set(repo.clone()));
    // The raw path below `/repository/<name>/`, cut as `split` cuts the decoded one (extra
    // slashes before the name, a name sent escaped): both name the same file.
    let raw_rest = req.path().strip_prefix("/repository").unwrap_or_default().trim_start_matches('/');
    let tail = Tail { matched, raw: raw_rest.split_once('/').map_or("", |(_, rest)| rest) };
    if crate::snapshot::is_snapshot(tail.raw) {
        return Box::pin(snapshot(&req, &services, (repo, caller, epochs), tail, body)).await;
    }
    if tail.raw.starts_with(crate::export::PREFIX) {
        return Box::pin(export(&req, &services, (repo, caller), tail)).await;
    }
    crate::formats::with_routes!(repo.format, R => run::<R>(&req, &services, (repo, caller, epochs), tail, body).await)
}

/// `-/export/…` (`crate::export`): read access to the repository, then its manifest or a blob.
async fn export(
    req: &HttpRequest,
    services: &Services,
    (repo, caller): (Arc<Repository>, Caller),
    tail: Tail<'_>,
) -> Result<HttpResponse, FormatError> {
    authorize(services, &caller, &repo, Access::READ, None)?;
    let rest = tail.raw.strip_prefix(crate::export::PREFIX).unwrap_or_default();
    crate::export::serve(req, services, &repo, rest).await
}

/// A request under one of the repository's snapshots (`crate::snapshot`): read access to the
/// repository, then the snapshot's file, or the format's route for a path outside it.
async fn snapshot(
    req: &HttpRequest,
    services: &Services,
    (repo, caller, epochs): (Arc<Repository>, Caller, crate::hot::Epochs),
    tail: Tail<'_>,
    body: web::Payload,
) -> Result<HttpResponse, FormatError> {
    // `-/snapshots/<name>/<path>`: the same three segments off the decoded path.
    let matched = tail.matched.splitn(4, '/').nth(3).unwrap_or_default();
    let outside = crate::formats::with_routes!(repo.format, R => R::outside_snapshot(matched));
    if !outside {
        // Access first: a 401/403 before a 404. A content selector sees the path below the
        // snapshot, as below the repository.
        let inner = tail.raw.splitn(4, '/').nth(3).unwrap_or_default();
        authorize(services, &caller, &repo, Access::READ, Some(inner))?;
    }
    if outside {
        // Answered as under the repository's own URL, whatever the snapshot: nothing about
        // the repository's snapshots is looked up before the route decides access.
        let raw = tail.raw.splitn(4, '/').nth(3).unwrap_or_default();
        let inner = Tail { matched, raw };
        return crate::formats::with_routes!(repo.format, R => run::<R>(req, services, (repo, caller, epochs), inner, body).await);
    }
    let (snapshot, path) = crate::snapshot::resolve(services, &repo, tail.raw).await?;
    crate::snapshot::serve(req, services, &repo, (&snapshot, path)).await
}

/// Runs route table `R` for a request: the route parsed from the tail, the caller authorized
/// for what it needs, then served.
async fn run<R: Routes>(
    req: &HttpRequest,
    services: &Services,
    (repo, caller, epochs): (Arc<Repository>, Caller, crate::hot::Epochs),
    tail: Tail<'_>,
    body: web::Payload,
) -> Result<HttpResponse, FormatError> {
    let method_access = Access::of_method(req.method());
    match R::route(req.method(), tail) {
        Some(Ok((route, access))) => {
            authorize(services, &caller, &repo, access, Some(tail.raw))?;
            if access.writes() {
                crate::read_only::check(services)?;
            }
            let hot = crate::hot::Slot::default();
            let (anonymous, asked) = (caller.principal.is_anonymous(), repo.clone());
            // Boxed: a route's state is the large part of a request's (up to 3.5 KiB), and the
            // dispatcher's own future, built on the stack and moved into a box, stays small.
            let answer = Box::pin(R::serve(Cx { req, services, repo, caller, body, hot: &hot }, route)).await;
            if let Ok(res) = &answer {
                crate::hot::remember(req, services, (epochs, anonymous), &asked, &hot, res);
            }
            answer
        }
        Some(Err(e)) => match method_access {
            Some(access) => {
                authorize(services, &caller, &repo, access, Some(tail.raw))?;
                Err(e)
            }
            None => Err(not_allowed(req)),
        },
        None => {
            let Some(access) = method_access else { return Err(not_allowed(req)) };
            authorize(services, &caller, &repo, access, Some(tail.raw))?;
            Err(if access == Access::WRITE {
                ApiError::new(
                    ErrorCode::MethodNotAllowed,
                    format!(
                        "repository {} ({} {}) accepts no upload at /{}",
                        repo.name, repo.format, repo.repo_type, tail.matched
                    ),
                )
            } else {
                ApiError::not_found(format!("not found: /{} in repository {}", tail.matched, repo.name))
            }
            .into())
        }
    }
}

fn not_allowed(req: &HttpRequest) -> FormatError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("method {} is not allowed here", req.method())).into()
}

/// The one decision behind every repository route: whether the caller (a bad credential was a
/// 401 already, never anonymous) may `access` `repo` — at `path` (below the repository, as the
/// client sent it) where a content selector narrows the caller's privilege. A write through a
/// selector is decided once the upload is read (`hosted::check_content`: the body names the
/// package); a sign-in route (`SignedIn`) needs the privilege on some of the repository;
/// anything else without a path (an export) needs the whole repository.
pub(crate) fn authorize(
    services: &Services,
    caller: &Caller,
    repo: &Repository,
    access: Access,
    path: Option<&str>,
) -> Result<(), FormatError> {
    let (action, signing_in) = match access {
        Access::Anyone => return Ok(()),
        Access::SignedIn(action) => {
            if caller.principal.is_anonymous() {
                return Err(ApiError::unauthorized("authentication required").into());
            }
            match action {
                Some(a) => (a, true),
                None => return Ok(()),
            }
        }
        Access::Action(a) => (a, false),
    };
    match crate::content::reach(caller, services, repo, action) {
        Reach::All => return Ok(()),
        Reach::Part => match (action, path) {
            _ if signing_in => return Ok(()),
            (Action::Write, _) => return Ok(()),
            (_, Some(path)) if crate::content::allows_request(caller, services, repo, action, path) => return Ok(()),
            (_, Some(path)) => {
                return Err(crate::content::refusal(caller, services, repo, action, &format!("/{path}")).into())
            }
            (_, None) => {
                return Err(crate::content::refusal(caller, services, repo, action, "all of the content").into())
            }
        },
        Reach::Nothing => {}
    }
    Err(if caller.principal.is_anonymous() {
        ApiError::unauthorized(format!("authentication required to {action} repository {}", repo.name))
    } else {
        ApiError::forbidden(format!("user {} may not {action} repository {}", caller.username(), repo.name))
    }
    .into())
}

#[cfg(test)]
mod tests {
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(actix_web::HttpRequest, actix_web::web::Payload) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// actix moves every request's handler future into a box, built on the stack first: the
    /// routes' states (up to 3.5 KiB) and a credential's proof are boxed where they start, so
    /// the dispatcher's own future is small (7,312 bytes before the large states were boxed;
    /// 3,568 with the routes' inline; 800 now).
    #[test]
    fn the_request_future_stays_small() {
        let size = future_size(super::dispatch);
        assert!(size <= 1024, "dispatch's future is {size} bytes: box the new large state where it starts");
    }
}
