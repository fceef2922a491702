//! A repository's snapshots as clients read them (`packyard_core::admin::snapshots`):
//! `/repository/<name>/-/snapshots/<snapshot>/<path>` and `/repository/<name>/-/at/<time>/<path>`
//! (the newest snapshot made at or before an RFC 3339 time, seconds optional). Read-only, for
//! the format's own clients: a path is looked up in the snapshot's file list and answered from
//! its blob, whatever the format — but for the few routes a format answers the same way
//! whatever a repository holds (Conan's ping and sign-in: `Routes::outside_snapshot`). Reading
//! a snapshot needs read access to its repository.

use actix_web::http::header::HeaderValue;
use actix_web::http::Method;
use actix_web::{HttpRequest, HttpResponse};
use packyard_core::proxy::{Freshness, Outcome};
use packyard_core::publication::cache::ServedFile;
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db::snapshots::RepositorySnapshot;

use crate::error::{ApiError, ErrorCode, FormatError};

/// The prefixes of a snapshot's URL below the repository's.
pub const BY_NAME: &str = "-/snapshots/";
pub const BY_TIME: &str = "-/at/";

/// Files up to this size are answered from memory (an index, a composite file); larger ones
/// are streamed.
const IN_MEMORY: i64 = 1 << 20;

/// Whether a repository path names a snapshot.
pub fn is_snapshot(tail: &str) -> bool {
    tail.starts_with(BY_NAME) || tail.starts_with(BY_TIME)
}

/// The snapshot a tail names and the path below it: `(snapshot, path)`.
pub async fn resolve<'t>(
    services: &Services,
    repo: &Repository,
    raw: &'t str,
) -> Result<(RepositorySnapshot, &'t str), FormatError> {
    let (by_time, rest) = match (raw.strip_prefix(BY_NAME), raw.strip_prefix(BY_TIME)) {
        (Some(rest), _) => (false, rest),
        (None, Some(rest)) => (true, rest),
        (None, None) => return Err(ApiError::not_found("not a snapshot").into()),
    };
    let (which, path) = rest.split_once('/').unwrap_or((rest, ""));
    let which = crate::route::percent_decode(which).unwrap_or_default();
    let found = if by_time {
        let Some(at) = packyard_model::time::parse_point_in_time(&which) else {
            return Err(ApiError::bad_request(format!(
                "{which:?} is not an RFC 3339 time (2026-12-01T12:00Z or 2026-12-01T12:00:00Z)"
            ))
            .into());
        };
        services.db.repository_snapshot_at(repo.id, at).await?.ok_or_else(|| {
            ApiError::not_found(format!("repository {} has no snapshot made at or before {which}", repo.name))
        })?
    } else {
        services
            .db
            .repository_snapshot(repo.id, &which)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("repository {} has no snapshot {which:?}", repo.name)))?
    };
    Ok((found, path))
}

/// Answers a GET or HEAD of `path` in `snapshot`.
pub async fn serve(
    req: &HttpRequest,
    services: &Services,
    repo: &Repository,
    (snapshot, path): (&RepositorySnapshot, &str),
) -> Result<HttpResponse, FormatError> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("snapshot {} of repository {} is read-only", snapshot.name, repo.name),
        )
        .into());
    }
    let missing =
        || ApiError::not_found(format!("{path:?} is not in snapshot {} of repository {}", snapshot.name, repo.name));
    let Some(decoded) = crate::route::percent_decode(path) else { return Err(missing().into()) };
    // A hidden name (a segment beginning with '.') is kept for its blob, never served.
    if !packyard_core::formats::visible(&decoded) {
        return Err(missing().into());
    }
    let file = match services.db.repository_snapshot_file(snapshot.id, &decoded).await? {
        Some(file) => file,
        None => match Box::pin(fill(services, repo, snapshot, &decoded)).await? {
            Some(file) => file,
            None if repo.repo_type != RepoType::Proxy => return Err(missing().into()),
            None => {
                return Err(ApiError::not_found(format!(
                    "{decoded:?} is not in snapshot {} of repository {}, and no upstream has it now",
                    snapshot.name, repo.name
                ))
                .into())
            }
        },
    };
    let etag = format!("\"{}\"", file.sha256);
    if file.is_composite() || file.size <= IN_MEMORY {
        let bytes = packyard_core::publication::read_file(services.blobs.as_ref(), &file).await?;
        let served = ServedFile::new(bytes, Some(snapshot.created_at), file.served_type(), &etag);
        return Ok(crate::formats::serve_published(req, served));
    }
    let artifact = crate::formats::ArtifactRef::new(&file.sha256, file.size, Some(snapshot.created_at));
    let content_type = HeaderValue::from_str(file.served_type())
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    crate::formats::serve_stored(req, services, &artifact, content_type).await
}

/// A file a proxy's snapshot lacks: fetched on its first request through the snapshot.
///
/// A snapshot lists what the proxy had fetched when it was made. A file its indexes list that
/// no client had fetched yet is fetched on its first request, through the proxy (and into its
/// cache), and listed in the snapshot from then on: pinned there before the upstream can lose
/// it, and only what clients install is copied (a proxy of a public archive lists far more
/// than a site ever fetches). Only a file whose name fixes its bytes qualifies (the format's
/// [`crate::route::Routes::snapshot_fill`], an immutable request): an index is what the
/// snapshot holds. Only a proxy's own snapshot: a group's holds what its members had fetched
/// (its files are the group's, not an upstream's), and a repository that serves through a
/// policy has no snapshot.
async fn fill(
    services: &Services,
    repo: &Repository,
    snapshot: &RepositorySnapshot,
    path: &str,
) -> Result<Option<SnapshotFile>, FormatError> {
    if repo.repo_type != RepoType::Proxy || repo.gate().is_some() || path.contains(['?', '#']) {
        return Ok(None);
    }
    let Some(Ok(request)) =
        crate::formats::with_routes!(repo.format, R => <R as crate::route::Routes>::snapshot_fill(repo, path))
    else {
        return Ok(None);
    };
    if request.freshness != Freshness::Immutable {
        return Ok(None);
    }
    let Outcome::Found(entry, _) = services.proxy.fetch(request).await? else { return Ok(None) };
    let Some(sha256) = entry.sha256 else { return Ok(None) };
    let file = SnapshotFile { path: path.to_string(), sha256, size: entry.size, content_type: entry.content_type };
    let kept = services.db.add_repository_snapshot_file(snapshot.id, &file).await?;
    if kept.is_some() {
        tracing::info!(repository = %repo.name, snapshot = %snapshot.name, path, "kept in the snapshot on first use");
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use packyard_model::time::parse_point_in_time as point_in_time;

    #[test]
    fn points_in_time() {
        let full = point_in_time("2026-12-01T12:00:00Z");
        assert_eq!(full, Some(1_796_126_400_000));
        assert_eq!(point_in_time("2026-12-01T12:00Z"), full);
        assert_eq!(point_in_time("2026-12-01T13:00+01:00"), full);
        assert_eq!(point_in_time("2026-12-01"), None);
        assert_eq!(point_in_time("yesterday"), None);
    }
}
