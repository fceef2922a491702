//! The formats' route tables under `/repository/<name>/` (one module per format, chosen by the
//! repository's format in [`crate::repository`]), and what their routes share: serving a
//! published file or a blob with the HTTP caching rules, serving what a proxy fetched, and
//! answering an upload the engine stored.

use actix_web::http::header::HeaderValue;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use std::sync::Arc;

use futures_util::future::LocalBoxFuture;
use packyard_core::hosted::Uploaded;
use packyard_core::proxy::{CacheState, FetchRequest, Outcome};
pub use packyard_core::publication::cache::ArtifactRef;
use packyard_core::publication::cache::ServedFile;
use packyard_core::services::Services;
use packyard_model::repos::Repository;

use crate::error::{ApiError, ErrorCode, FormatError};

pub mod apk;
pub mod apt;
pub mod conan;
pub(crate) mod form;
pub(crate) mod gate;
pub mod go;
pub mod sample;
mod tables;
pub(crate) use tables::with_routes;

/// A file of a unit's current snapshot (`None`: not published, so not there), from the
/// replica's memory when warm: the one projection read every format's routes share.
pub async fn published_file(
    services: &Services,
    repo: &Repository,
    kind: &str,
    unit: &str,
    path: &str,
) -> Result<Option<ServedFile>, FormatError> {
    Ok(services.published.file(&services.db, services.blobs.as_ref(), repo.id, kind, unit, path).await?)
}

/// Answers with a published file: `ETag`/`If-None-Match` and `Last-Modified`/`If-Modified-Since`
/// (304), `Content-Length`, the bytes from memory. Every header value was made when the file
/// was cached.
pub fn serve_published(req: &HttpRequest, f: ServedFile) -> HttpResponse {
    use actix_web::http::header::{self, Header, IfModifiedSince};
    use std::time::{Duration, SystemTime};
    let headers = req.headers();
    // (The gate's own reads take the whole file whatever the client asked.)
    let plain = gate::is_plain();
    let if_none_match = headers.get(header::IF_NONE_MATCH).filter(|_| !plain);
    let etag_matches = f.etag.as_ref().is_some_and(|e| if_none_match.is_some_and(|v| v.as_bytes() == e.as_bytes()));
    // Whole seconds, each snapshot of a unit its own (`Manifest::published_at`): a burst of
    // publications takes seconds ahead of the clock. Such a second is never sent (an HTTP
    // cache may take a date in the future for its own clock's): the current second is, which is
    // before the snapshot's, so a copy of that date is answered with the file until the clock
    // reaches the snapshot's second. The 304 compares with the snapshot's own second. Near
    // a publication the `Date` is the clock's too (the server's own is a little behind), so that
    // `Last-Modified` is never after it.
    let now = SystemTime::now();
    let now_secs = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let secs = f.modified.map(|ms| u64::try_from(ms.div_euclid(1000)).unwrap_or(0));
    let ahead = secs.is_some_and(|s| s > now_secs);
    let recent = secs.is_some_and(|s| s + 1 >= now_secs);
    let not_modified_since = f.modified.is_some()
        && !plain
        && if_none_match.is_none()
        && headers.contains_key(header::IF_MODIFIED_SINCE)
        && f.settled.is_some_and(|ms| {
            let m = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(ms / 1000).unwrap_or(0));
            IfModifiedSince::parse(req).is_ok_and(|IfModifiedSince(since)| SystemTime::from(since) >= m)
        });
    let mut res = if etag_matches || not_modified_since { HttpResponse::NotModified() } else { HttpResponse::Ok() };
    // The values were made when the file was cached: neither formatted nor checked again.
    if let Some(v) = f.etag {
        res.insert_header((header::ETAG, v));
    }
    if recent {
        res.insert_header((header::DATE, header::HttpDate::from(now)));
    }
    if ahead {
        res.insert_header((header::LAST_MODIFIED, header::HttpDate::from(now)));
    } else if let Some(v) = f.last_modified {
        res.insert_header((header::LAST_MODIFIED, v));
    }
    if etag_matches || not_modified_since {
        return res.finish();
    }
    res.insert_header((header::CONTENT_TYPE, f.content_type));
    res.body(f.bytes)
}

/// Whether a `Range` may be honoured under the request's `If-Range` (RFC 9110 §13.1.5): no
/// `If-Range`, or its entity tag equal to ours (a strong comparison: a weak tag never matches), or
/// its date exactly our `Last-Modified`. Otherwise the client's partial copy is of another
/// version: the answer is the whole file.
fn if_range_holds(req: &HttpRequest, etag: &str, last_modified: Option<std::time::SystemTime>) -> bool {
    let Some(v) = req.headers().get(actix_web::http::header::IF_RANGE) else { return true };
    let Ok(v) = v.to_str() else { return false };
    let v = v.trim();
    if v.starts_with('"') || v.starts_with("W/") {
        return v == etag;
    }
    let Ok(date) = v.parse::<actix_web::http::header::HttpDate>() else { return false };
    let since_epoch = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).ok();
    last_modified.is_some_and(|m| since_epoch(m).is_some() && since_epoch(m) == since_epoch(date.into()))
}

/// What the headers of a blob's answer say about it, each value made before the request when
/// it can be (an [`ArtifactRef`] carries its validators' text): `ETag` (the SHA-256, quoted),
/// `Last-Modified` (when known), `Content-Type`, and the size when known (HEAD opens nothing).
pub struct BlobHead<'a> {
    pub sha256: &'a str,
    pub etag: HeaderValue,
    pub last_modified: Option<(std::time::SystemTime, HeaderValue)>,
    pub content_type: HeaderValue,
    pub size: Option<u64>,
}

/// Answers with a stored blob: `ETag`, `If-None-Match` and, when its `Last-Modified` is known,
/// `If-Modified-Since` (304); a single `Range` (206/416) when `If-Range`, if any, still names
/// this file; the bytes streamed. HEAD opens nothing when the size is known.
pub async fn serve_blob(
    req: &HttpRequest,
    blobs: &dyn packyard_store::blobs::BlobStore,
    head: BlobHead<'_>,
    extra: &[(&'static str, String)],
) -> Result<HttpResponse, FormatError> {
    use actix_web::http::header;
    use packyard_store::blobs::{RangeSpec, Sha256Hex};
    let mut res = match start_blob(req, &head, extra) {
        Started::Done(res) => return Ok(res),
        Started::Open(res) => res,
    };
    let digest = Sha256Hex::parse(head.sha256)?;
    let plain = gate::is_plain();
    if req.method() == actix_web::http::Method::HEAD && !plain {
        // The store is asked only when the size is not known.
        let size = blobs.stat(&digest).await?.ok_or_else(|| ApiError::internal(format!("blob {digest} is missing")))?;
        return Ok(sized_head(res, size));
    }
    let modified_at = head.last_modified.as_ref().map(|(m, _)| *m);
    let range = req
        .headers()
        .get(header::RANGE)
        .filter(|_| !plain)
        .filter(|_| if_range_holds(req, head.etag.to_str().unwrap_or_default(), modified_at))
        .and_then(|v| v.to_str().ok())
        .and_then(RangeSpec::parse_header);
    let read = blobs.open_hot(&digest, range).await?;
    if let Some(r) = read.range {
        res.status(StatusCode::PARTIAL_CONTENT)
            .insert_header((header::CONTENT_RANGE, format!("bytes {}-{}/{}", r.start, r.end, read.total_size)));
    }
    res.no_chunking(read.content_length());
    Ok(res.streaming(read.body))
}

/// How far a blob's answer gets without the store.
enum Started {
    /// Answered: a 304, or a HEAD whose size is known.
    Done(HttpResponse),
    /// A 200 with its headers set; the body (or a HEAD's size) is still to be read.
    Open(actix_web::HttpResponseBuilder),
}

fn start_blob(req: &HttpRequest, head: &BlobHead<'_>, extra: &[(&'static str, String)]) -> Started {
    use actix_web::http::header::{self, Header, IfModifiedSince};
    let headers = req.headers();
    let plain = gate::is_plain();
    let if_none_match = headers.get(header::IF_NONE_MATCH).filter(|_| !plain);
    let etag_matches = if_none_match.is_some_and(|v| v.as_bytes() == head.etag.as_bytes());
    let not_modified_since = !plain
        && if_none_match.is_none()
        && headers.contains_key(header::IF_MODIFIED_SINCE)
        && head.last_modified.as_ref().is_some_and(|(m, _)| {
            IfModifiedSince::parse(req).is_ok_and(|IfModifiedSince(since)| std::time::SystemTime::from(since) >= *m)
        });
    let with_extra = |res: &mut actix_web::HttpResponseBuilder| {
        for (k, v) in extra {
            res.insert_header((*k, v.as_str()));
        }
    };
    if etag_matches || not_modified_since {
        let mut res = HttpResponse::NotModified();
        res.insert_header((header::ETAG, head.etag.clone()));
        with_extra(&mut res);
        return Started::Done(res.finish());
    }
    let mut res = HttpResponse::Ok();
    res.insert_header((header::CONTENT_TYPE, head.content_type.clone()))
        .insert_header((header::ETAG, head.etag.clone()))
        .insert_header((header::ACCEPT_RANGES, HeaderValue::from_static("bytes")));
    if let Some((_, v)) = &head.last_modified {
        res.insert_header((header::LAST_MODIFIED, v.clone()));
    }
    with_extra(&mut res);
    match head.size {
        Some(size) if req.method() == actix_web::http::Method::HEAD && !plain => Started::Done(sized_head(res, size)),
        _ => Started::Open(res),
    }
}

/// The headers of a GET without opening the file: actix would read a streamed body to its end
/// only to drop it. A sized body, so the encoder sends no bytes of a HEAD and writes its
/// `Content-Length` itself; the header is on the response too (for whatever reads it before
/// the wire), made from the number directly (`no_chunking` formats it and checks the text
/// again).
fn sized_head(mut res: actix_web::HttpResponseBuilder, size: u64) -> HttpResponse {
    res.insert_header((actix_web::http::header::CONTENT_LENGTH, HeaderValue::from(size)));
    let empty = futures_util::stream::empty::<Result<bytes::Bytes, std::io::Error>>();
    res.body(actix_web::body::SizedStream::new(size, empty))
}

/// A hosted repository's artifact at `path`: warmed, its blob from the replica's cache (no
/// query); otherwise `lookup` finds its blob, size and upload time in the format's rows and the
/// cache keeps them until the repository's watermark moves. A 404 when it is not there.
pub async fn serve_hosted<F, Fut>(
    cx: &crate::route::Cx<'_>,
    repo: &Repository,
    path: &str,
    content_type: &'static str,
    lookup: F,
) -> Result<HttpResponse, FormatError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Option<ArtifactRef>, FormatError>>,
{
    find_hosted(cx, repo, path, content_type, lookup)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)).into())
}

/// [`serve_hosted`], or `None` when the artifact is not there (a group then asks its next member).
pub async fn find_hosted<F, Fut>(
    cx: &crate::route::Cx<'_>,
    repo: &Repository,
    path: &str,
    content_type: &'static str,
    lookup: F,
) -> Result<Option<HttpResponse>, FormatError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<Option<ArtifactRef>, FormatError>>,
{
    let published = &cx.services.published;
    let artifact = match published.artifact(repo.id, path) {
        Some(found) => found,
        None => {
            let epoch = published.epoch();
            let found = match lookup().await? {
                Some(found) => found,
                None if repo.repo_type == packyard_model::repos::RepoType::Hosted
                    && packyard_formats::registry().get(repo.format).rollback().is_some() =>
                {
                    // A package that an index pointed at a snapshot lists (a rollback), deleted
                    // from the repository since: served from the snapshot.
                    match cx.services.db.pinned_file(repo.id, path).await? {
                        Some((f, at)) => ArtifactRef::new(&f.sha256, f.size, Some(at)),
                        None => return Ok(None),
                    }
                }
                None => return Ok(None),
            };
            published.put_artifact(epoch, repo.id, path, found.clone());
            found
        }
    };
    let res = serve_artifact(cx.req, cx.services, &artifact, content_type).await?;
    count_download(cx.services, cx.req, &res, repo.id, path);
    cx.hot.offer(crate::hot::Reusable::Artifact(artifact, content_type));
    Ok(Some(res))
}

/// The members of a group that failed while it looked for an immutable file (a version's files
/// are the same from any member that has them): each counted in
/// `packyard_group_member_failures_total`, named in `X-Packyard-Member-Failed` on the answer a later
/// member gave, and, when no member had the file, the answer itself (the first failure: 502/504).
#[derive(Default)]
pub struct MemberFailures {
    failed: packyard_core::groups::Failed,
    first: Option<ApiError>,
}

/// The response header naming the members that failed (`member: status`, comma-separated).
pub const MEMBER_FAILED_HEADER: &str = "x-packyard-member-failed";

/// Names the failed members of a `groups::Failed` text (`<member> <status>` lines) on `res`.
fn name_in_header(res: &mut HttpResponse, failed: &str) {
    let value = packyard_core::groups::Failed::header_of(failed);
    if let Some(v) = value.and_then(|v| actix_web::http::header::HeaderValue::from_str(&v).ok()) {
        res.headers_mut().insert(actix_web::http::header::HeaderName::from_static(MEMBER_FAILED_HEADER), v);
    }
}

impl MemberFailures {
    /// Whether `e` is a member's failure a group may go past: its upstream unreachable, timing
    /// out or answering 5xx. Anything else — an upstream's refusal (401/403), a bad request, the
    /// database — is the group's answer.
    fn tolerable(e: &FormatError) -> bool {
        e.0.upstream_failed
    }

    pub fn record(&mut self, services: &Services, group: &Repository, member: &Repository, e: FormatError) {
        services
            .metrics
            .group_member_failures_total
            .with_label_values(&[group.name.as_str(), member.name.as_str()])
            .inc();
        tracing::warn!(group = %group.name, member = %member.name, error = %e.0.message, "group member failed; asking the next");
        self.failed.record(member.name.to_string(), e.0.code.status().as_u16());
        self.first.get_or_insert(e.0);
    }

    /// A member's answer as a group takes it: `Some` to answer with, `None` to ask the next
    /// member — it does not have it, or it failed in a way a group may go past (recorded).
    pub fn take<T>(
        &mut self,
        services: &Services,
        group: &Repository,
        member: &Repository,
        answer: Result<Option<T>, FormatError>,
    ) -> Result<Option<T>, FormatError> {
        match answer {
            Err(e) if Self::tolerable(&e) => {
                self.record(services, group, member, e);
                Ok(None)
            }
            other => other,
        }
    }

    /// A later member's answer, with the failures named.
    pub fn answered(&self, mut res: HttpResponse) -> HttpResponse {
        name_in_header(&mut res, &self.failed.render());
        res
    }

    /// No member had the file: the first failure (naming every failed member), or `None` when
    /// none failed (a plain "not here").
    pub fn into_error(self) -> Option<FormatError> {
        let first = self.first?;
        let message = format!("no member answered ({} failed): {}", self.failed.names(), first.message);
        Some(ApiError::new(first.code, message).into())
    }
}

/// Where a group looks for an immutable file (a version's files are the same from any member
/// that has them): its members in order, `depth` levels below the group a request named, first
/// the one its snapshot of `(kind, unit_key)` took `item` from (`groups::MEMBERS_FILE`).
pub async fn members_first(
    services: &Services,
    group: &Repository,
    depth: usize,
    (kind, unit_key, item): (&str, &str, &str),
) -> Result<Vec<Arc<Repository>>, FormatError> {
    let map = published_file(services, group, kind, unit_key, packyard_core::groups::MEMBERS_FILE).await?;
    let text = map.as_ref().and_then(|f| std::str::from_utf8(&f.bytes).ok()).unwrap_or_default();
    let listed = packyard_core::groups::member_of(text, item);
    let mut members = packyard_core::groups::members(services, group, depth).await?;
    if let Some(i) = listed.and_then(|name| members.iter().position(|m| m.name.as_str() == name)) {
        let first = members.remove(i);
        members.insert(0, first);
    }
    Ok(members)
}

/// A group's immutable file as `read` answers it for one member, asked of the members in the
/// order of [`members_first`]: the first that has it answers (the members that failed before
/// it named); a member whose upstream fails is passed over, never an authorization denial (that
/// is the group's answer). `None` when no member has it.
///
/// An answer after another member was asked is not offered to the hot answers: the members
/// before it (a proxy's upstream) may answer otherwise next time, with no epoch moving.
pub async fn from_members<'a, F>(
    (services, hot): (&Services, &crate::hot::Slot),
    group: &Repository,
    depth: usize,
    item: (&str, &str, &str),
    mut read: F,
) -> Result<Option<HttpResponse>, FormatError>
where
    F: FnMut(Arc<Repository>) -> LocalBoxFuture<'a, Result<Option<HttpResponse>, FormatError>>,
{
    let mut failed = MemberFailures::default();
    for (asked, member) in members_first(services, group, depth, item).await?.into_iter().enumerate() {
        let answer = read(member.clone()).await;
        if let Some(r) = failed.take(services, group, &member, answer)? {
            if asked > 0 {
                hot.spoil();
            }
            return Ok(Some(failed.answered(r)));
        }
    }
    failed.into_error().map_or(Ok(None), Err)
}

/// A group's answer from its snapshot of `(kind, unit_key)`, with the members its merge went on
/// without (its hidden `.failed` file) named in `X-Packyard-Member-Failed` and counted.
pub async fn name_failed_members(
    services: &Services,
    group: &Repository,
    (kind, unit_key): (&str, &str),
    mut res: HttpResponse,
) -> Result<HttpResponse, FormatError> {
    let failed = published_file(services, group, kind, unit_key, packyard_core::groups::FAILED_FILE).await?;
    let text = failed.as_ref().and_then(|f| std::str::from_utf8(&f.bytes).ok()).unwrap_or_default();
    for member in text.lines().filter_map(|l| l.split(' ').next()) {
        services.metrics.group_member_failures_total.with_label_values(&[group.name.as_str(), member]).inc();
    }
    name_in_header(&mut res, text);
    Ok(res)
}

/// Counts a whole download (a GET answered 200) of an artifact for the catalogue's statistics,
/// in memory (`Services::downloads`, flushed in the background).
pub fn count_download(services: &Services, req: &HttpRequest, res: &HttpResponse, repository_id: i64, path: &str) {
    if req.method() == actix_web::http::Method::GET && res.status() == StatusCode::OK {
        services.downloads.record(repository_id, path);
    }
}

/// Answers with an artifact's blob (`Last-Modified` its upload time, when known), its
/// validators' text as cached with it.
pub async fn serve_artifact(
    req: &HttpRequest,
    services: &Services,
    artifact: &ArtifactRef,
    content_type: &'static str,
) -> Result<HttpResponse, FormatError> {
    serve_stored(req, services, artifact, HeaderValue::from_static(content_type)).await
}

/// [`serve_artifact`] for a content type known only at run time (a snapshot's file).
pub async fn serve_stored(
    req: &HttpRequest,
    services: &Services,
    artifact: &ArtifactRef,
    content_type: HeaderValue,
) -> Result<HttpResponse, FormatError> {
    serve_blob(req, services.blobs.as_ref(), artifact_head(artifact, content_type)?, &[]).await
}

/// [`serve_artifact`]'s answer when it needs no read of the store (a 304, a HEAD): what the
/// hot answers replay (`crate::hot`).
pub fn artifact_now(req: &HttpRequest, artifact: &ArtifactRef, content_type: &'static str) -> Option<HttpResponse> {
    match start_blob(req, &artifact_head(artifact, HeaderValue::from_static(content_type)).ok()?, &[]) {
        Started::Done(res) => Some(res),
        Started::Open(_) => None,
    }
}

fn artifact_head(artifact: &ArtifactRef, content_type: HeaderValue) -> Result<BlobHead<'_>, FormatError> {
    let modified = artifact
        .modified_ms
        .and_then(|ms| u64::try_from(ms / 1000).ok())
        .map(|secs| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
    Ok(BlobHead {
        sha256: &artifact.sha256,
        etag: artifact.etag.clone().ok_or_else(|| ApiError::internal(format!("bad digest {}", artifact.sha256)))?,
        last_modified: modified.zip(artifact.last_modified.clone()),
        content_type,
        size: u64::try_from(artifact.size).ok(),
    })
}

/// A proxy's answer to `fetch` through its cache: the upstream's bytes unchanged (see
/// [`answer_proxied`]), or a 404 that says what the upstream answered. Boxed where it starts
/// (a fetch's state is large; the hot reads should not carry it).
pub fn serve_proxied<'a>(
    services: &'a Services,
    repo: &'a Repository,
    req: &'a HttpRequest,
    fetch: FetchRequest,
    fallback_type: &'static str,
) -> LocalBoxFuture<'a, Result<HttpResponse, FormatError>> {
    Box::pin(async move {
        let (path, artifact) = (fetch.path.clone(), fetch.catalogue.is_some());
        let outcome = services.proxy.fetch(fetch).await?;
        answer_proxied(services, repo, req, (&path, artifact), outcome, fallback_type).await
    })
}

/// [`serve_proxied`], or `None` when the upstream says the file is not there (a group then asks
/// its next member).
pub fn fetch_proxied<'a>(
    services: &'a Services,
    repo: &'a Repository,
    req: &'a HttpRequest,
    fetch: FetchRequest,
    fallback_type: &'static str,
) -> LocalBoxFuture<'a, Result<Option<HttpResponse>, FormatError>> {
    Box::pin(async move {
        let (path, artifact) = (fetch.path.clone(), fetch.catalogue.is_some());
        let outcome = services.proxy.fetch(fetch).await?;
        if matches!(outcome, Outcome::Missing(..)) {
            return Ok(None);
        }
        Ok(Some(answer_proxied(services, repo, req, (&path, artifact), outcome, fallback_type).await?))
    })
}

/// Answers with what the proxy fetched: the upstream's bytes unchanged, with `X-Packyard-Cache`
/// (hit, miss, revalidated, stale) and, for a stale copy, a `Warning`. A download of an
/// `artifact` (a file the catalogue lists: the fetch named its component) is counted.
async fn answer_proxied(
    services: &Services,
    repo: &Repository,
    req: &HttpRequest,
    (path, artifact): (&str, bool),
    outcome: Outcome,
    fallback_type: &'static str,
) -> Result<HttpResponse, FormatError> {
    let (entry, state) = match outcome {
        Outcome::Found(e, s) => (e, s),
        Outcome::Missing(status, _) => {
            return Err(ApiError::not_found(format!(
                "not found: /{path} in repository {} (the upstream answered {status})",
                repo.name
            ))
            .into())
        }
    };
    let mut extra = vec![(CACHE_HEADER, state.as_str().to_string())];
    if state == CacheState::Stale {
        extra.push(("warning", "110 packyard \"Response is Stale\"".to_string()));
    }
    // The upstream's type when it is a valid header value, else the format's.
    let content_type = HeaderValue::from_str(&entry.content_type)
        .ok()
        .filter(|_| !entry.content_type.is_empty())
        .unwrap_or_else(|| HeaderValue::from_static(fallback_type));
    let last_modified = entry
        .upstream_last_modified
        .as_deref()
        .and_then(|v| v.parse::<actix_web::http::header::HttpDate>().ok())
        .and_then(|d| Some((std::time::SystemTime::from(d), HeaderValue::from_str(&d.to_string()).ok()?)));
    let sha = entry.sha256.as_deref().unwrap_or_default();
    let head = BlobHead {
        sha256: sha,
        etag: HeaderValue::from_str(&format!("\"{sha}\""))
            .map_err(|_| ApiError::internal(format!("bad digest {sha}")))?,
        last_modified,
        content_type,
        size: u64::try_from(entry.size).ok(),
    };
    let res = serve_blob(req, services.blobs.as_ref(), head, &extra).await?;
    if artifact {
        count_download(services, req, &res, repo.id, path);
    }
    Ok(res)
}

/// Says where a proxied answer came from.
pub const CACHE_HEADER: &str = "x-packyard-cache";

/// The answer to an upload the engine stored: 201 for a new artifact or 200 for an identical
/// retry, with the format's receipt — once it is published when `wait` (`?wait=true`, always
/// for Go; at most 30 s: then 503, the upload stays stored).
pub async fn uploaded<A>(services: &Services, up: &Uploaded<A>, wait: bool) -> Result<HttpResponse, FormatError> {
    if wait {
        wait_published(services, &up.changes).await?;
    }
    let status = if up.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok(HttpResponse::build(status).json(&up.receipt))
}

/// Read-your-writes: waits (at most 30 s: then 503, the change stays recorded) until each
/// unit's published revision reaches the one recorded, the groups over the repository have
/// rebuilt it (see `groups::wait_for_groups`) and, on a shared database, for every replica to
/// have seen it.
pub async fn wait_published(services: &Services, changes: &[(i64, i64)]) -> Result<(), FormatError> {
    if changes.is_empty() {
        return Ok(());
    }
    let timeout = std::time::Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + timeout;
    for (unit_id, revision) in changes {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let told = Some(services.published.publications());
        let done =
            packyard_core::publication::wait_until_published(&services.db, told, *unit_id, *revision, left).await?;
        if !done {
            return Err(ApiError::new(ErrorCode::ServiceUnavailable, "stored, but not yet published after 30 s").into());
        }
        // The groups over the repository serve it too before the answer (read-your-writes
        // through a group).
        let Some(unit) = services.db.unit(*unit_id).await? else { continue };
        if !packyard_core::groups::wait_for_groups(&services.db, &unit, deadline).await? {
            return Err(ApiError::new(
                ErrorCode::ServiceUnavailable,
                "stored and published, but a group over this repository has not caught up after 30 s",
            )
            .into());
        }
    }
    services.published.invalidate();
    // Other replicas drop their view within one watermark period (sooner with Redis); on a
    // shared database, answer only after it, so that every replica serves the new version.
    // The embedded default (SQLite) is one process: nothing to wait for.
    if services.db.backend() != packyard_store::db::Backend::Sqlite {
        let c = &services.config;
        let ms = c.cache.watermark_ttl_ms.min(c.security.watermark_ttl_ms);
        tokio::time::sleep(std::time::Duration::from_millis(ms + 50)).await;
    }
    Ok(())
}

/// `?wait=true` on an upload.
#[derive(Debug, Default, serde::Deserialize)]
pub struct WaitQuery {
    #[serde(default)]
    pub wait: bool,
}

/// A route's query parameters (a malformed query is a 400, as everywhere).
pub fn query<T: serde::de::DeserializeOwned>(req: &HttpRequest) -> Result<T, FormatError> {
    actix_web::web::Query::<T>::from_query(req.query_string())
        .map(actix_web::web::Query::into_inner)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")).into())
}

/// Refuses a write to a repository that is not hosted (405), for routes that write outside the
/// engine.
pub fn hosted_only(repo: &Repository, what: &str) -> Result<(), FormatError> {
    packyard_core::hosted::check_hosted(repo, what).map_err(|e| FormatError(e.into()))
}
