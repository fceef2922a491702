//! What every format's routes share to apply a repository's policy
//! ([`packyard_core::policy`]): a verdict as an error the client reads, the audit header, and
//! the bytes of an answer the route is about to filter.

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use bytes::Bytes;
use packyard_core::policy::{Candidate, Verdict, ADVISORIES_HEADER};
use packyard_core::services::Services;
use packyard_model::policy::PolicySettings;
use packyard_model::repos::Repository;

use crate::error::{ApiError, ErrorCode, FormatError};

/// The gate's verdict on one version of `repo`.
pub async fn judge(
    services: &Services,
    repo: &Repository,
    policy: &PolicySettings,
    c: &Candidate<'_>,
) -> Result<Verdict, FormatError> {
    Ok(packyard_core::policy::judge(services, packyard_formats::registry(), repo, policy, c)
        .await
        .map_err(ApiError::from)?)
}

/// The refusal of a version the verdict holds back: 404 for one not offered yet (with when it
/// will be), 403 naming the rule or the advisories.
pub fn refusal(services: &Services, v: &Verdict, name: &str, version: &str, repo: &Repository) -> Option<FormatError> {
    let (status, message) = v.refusal(name, version, repo.name.as_str())?;
    services.metrics.policy_refusals_total.with_label_values(&[repo.name.as_str(), v.reason()]).inc();
    let code = if status == 404 { ErrorCode::NotFound } else { ErrorCode::Forbidden };
    Some(ApiError::new(code, message).into())
}

/// `res` with `X-Packyard-Advisories` when the verdict passed a version with advisories.
pub fn audited(res: HttpResponse, v: &Verdict) -> HttpResponse {
    with_advisories(res, v.audit_header())
}

tokio::task_local! {
    /// Set while the gate reads an answer for itself ([`plain`]).
    static PLAIN: ();
}

/// Runs `read` as a read of the gate's own: the client's validators (`If-None-Match`,
/// `If-Modified-Since`), `Range` and HEAD do not apply to it, so the answer is the whole file
/// (what [`crate::formats::serve_blob`] and [`crate::formats::serve_published`] ask [`is_plain`]).
pub async fn plain<F: std::future::Future>(read: F) -> F::Output {
    PLAIN.scope((), read).await
}

/// Whether the answer being made is for the gate itself.
pub fn is_plain() -> bool {
    PLAIN.try_with(|()| ()).is_ok()
}

/// The body of a 200 answer to a [`plain`] read (to filter it); anything else is an error (a
/// plain read is never partial nor a 304).
pub async fn body(res: HttpResponse) -> Result<Bytes, FormatError> {
    if res.status() != StatusCode::OK {
        return Err(ApiError::internal(format!("a read for the policy answered {} (not 200)", res.status())).into());
    }
    actix_web::body::to_bytes(res.into_body())
        .await
        .map_err(|e| ApiError::internal(format!("cannot read an answer to filter it: {e}")).into())
}

/// A filtered answer: made per request, so it carries no validators of the unfiltered one.
pub fn filtered(content_type: &'static str, body: impl Into<Bytes>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-cache"))
        .body(body.into())
}

/// Whether a member of group `repo` (nested groups followed) has a policy: what a group without
/// one of its own asks before it answers as they would (a walk of its members' settings, from
/// the replica's memory).
pub async fn gates_below(services: &Services, repo: &Repository, depth: usize) -> Result<bool, FormatError> {
    for m in packyard_core::groups::members(services, repo, depth).await? {
        if m.gate().is_some()
            || (m.repo_type == packyard_model::repos::RepoType::Group
                && Box::pin(gates_below(services, &m, depth + 1)).await?)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// How a gated repository answers a download of the file at `path`, from the policy reports
/// it published beside its units' indexes (`units`: each unit and its report's path; `path` as
/// the reports name it, `shown` as the client asked for it): a unit
/// that lets it through wins (suites share a pool; one may list what another holds back yet)
/// — `Ok` with the advisories' header of an audited one —, else the first refusal the
/// publication wrote (until the next publication says otherwise: one comes when a young version
/// comes of age); a file no published report lists is one the repository's indexes do not
/// list, which it does not serve (its policy judged only what they list).
pub async fn reported(
    services: &Services,
    repo: &Repository,
    kind: &str,
    units: &[(String, String)],
    (path, shown): (&str, &str),
) -> Result<Option<String>, FormatError> {
    let mut refused: Option<(std::sync::Arc<packyard_core::policy::Report>, usize)> = None;
    for (unit, report) in units {
        let Some(f) = super::published_file(services, repo, kind, unit, report).await? else { continue };
        let etag = f.etag.as_ref().and_then(|e| e.to_str().ok()).unwrap_or_default();
        let report = services.policy.report(etag, &f.bytes);
        let Some(at) = report.position(path) else { continue };
        match report.lines.get(at) {
            Some(line) if line.status == 200 => return Ok(Some(line.text.clone()).filter(|t| !t.is_empty())),
            _ if refused.is_none() => refused = Some((report, at)),
            _ => {}
        }
    }
    let Some(line) = refused.as_ref().and_then(|(r, at)| r.lines.get(*at)) else {
        return Err(ApiError::not_found(format!(
            "not found: /{shown} is not listed by {} repository {}'s index (its policy lets through only what the index it publishes lists)",
            repo.repo_type, repo.name
        ))
        .into());
    };
    services.metrics.policy_refusals_total.with_label_values(&[repo.name.as_str(), line.reason.as_str()]).inc();
    let code = if line.status == 404 { ErrorCode::NotFound } else { ErrorCode::Forbidden };
    Err(ApiError::new(code, line.text.clone()).into())
}

/// `res` with `X-Packyard-Advisories: value` when there is one.
pub fn with_advisories(mut res: HttpResponse, value: Option<String>) -> HttpResponse {
    if let Some(value) = value.and_then(|h| actix_web::http::header::HeaderValue::from_str(&h).ok()) {
        res.headers_mut().insert(actix_web::http::header::HeaderName::from_static(ADVISORIES_HEADER), value);
    }
    res
}
