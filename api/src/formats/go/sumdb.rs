//! The checksum database routes of a Go repository, `sumdb/<name>/…` (`supported`, `latest`,
//! `lookup/<module>@<version>`, `tile/…`), as the go command asks its GOPROXY before it would
//! reach a database itself (`go help module-auth`).
//!
//! - A proxy serves the databases its `go.checksum_databases` names, through the proxy cache.
//! - A hosted or group repository serves its own database ([`packyard_formats::go::sumdb`]):
//!   `latest` signed when asked and kept by the replica until the repository's watermark moves;
//!   records, tiles and the signed head of each size kept for good (they never change). A
//!   version not logged yet is logged on its first lookup, as sum.golang.org does: a hosted
//!   repository's (one published before the log existed) from its stored files, a group's from
//!   the member that serves its files — a hosted or group member's own record, a proxy member's
//!   hashes of the `.mod` and `.zip` its upstream served.
//! - A group answers for another name with its first member that serves it (a member whose
//!   upstream fails is passed over and named, as for a version's files).
//!
//! A name nobody serves is a 404: the go command then reaches the database directly.

use actix_web::HttpResponse;
use bytes::Bytes;
use packyard_codecs::go::sumdb::lookup_body;
use packyard_codecs::go::sumdb::tlog::{Tree, TILE_HEIGHT};
use packyard_core::groups;
use packyard_core::hosted::UploadError;
use packyard_core::proxy::Outcome;
use packyard_core::publication::cache::ServedFile;
use packyard_core::services::Services;
use packyard_formats::go::hosted::{check, check_coordinate, limits, record_text};
use packyard_formats::go::sumdb::{self, AppendError, Forward, SumdbError, SumdbPath, SumdbRequest};
use packyard_formats::go::{proxy_request, Request, KIND};
use packyard_model::repos::{RepoType, Repository};
use packyard_store::blobs::{Sha256Hex, StoredBlob};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode, FormatError};
use crate::formats::MemberFailures;
use crate::route::Cx;

const TEXT: &str = "text/plain; charset=utf-8";

/// The replica's current signed head and name of a repository's database (`made`: dropped
/// when the repository's watermark moves).
const LATEST: &str = "sumdb/latest";
const NAME: &str = "sumdb/name";

pub async fn serve(cx: &Cx<'_>, request: &SumdbRequest) -> Result<HttpResponse, FormatError> {
    let repo = cx.repo.clone();
    match answer(cx, &repo, request, 0).await? {
        Some(r) => Ok(r),
        None if request.path == SumdbPath::Supported => Err(ApiError::not_found(format!(
            "repository {} does not serve checksum database {}: the go command verifies against it directly",
            repo.name, request.name
        ))
        .into()),
        None => Err(ApiError::not_found(format!(
            "not found: sumdb/{}/{} in repository {}",
            request.name,
            request.database_path(),
            repo.name
        ))
        .into()),
    }
}

fn log_error(e: SumdbError) -> FormatError {
    match e {
        SumdbError::Db(d) => d.into(),
        other => ApiError::internal(other).into(),
    }
}

/// `repo`'s answer, or `None` when it does not serve the name or has nothing at the path.
async fn answer(
    cx: &Cx<'_>,
    repo: &Repository,
    request: &SumdbRequest,
    depth: usize,
) -> Result<Option<HttpResponse>, FormatError> {
    if repo.repo_type == RepoType::Proxy {
        return forwarded(cx, repo, request).await;
    }
    if latest(cx.services, repo, false).await?.name == request.name {
        return own(cx, repo, request, depth).await;
    }
    if repo.repo_type == RepoType::Hosted {
        return Ok(None);
    }
    let members = groups::members(cx.services, repo, depth + 1).await?;
    let mut failed = MemberFailures::default();
    for member in &members {
        let found = Box::pin(answer(cx, member, request, depth + 1)).await;
        if let Some(r) = failed.take(cx.services, repo, member, found)? {
            return Ok(Some(failed.answered(r)));
        }
    }
    failed.into_error().map_or(Ok(None), Err)
}

/// A proxy's answer for a database it serves, through the proxy cache.
async fn forwarded(
    cx: &Cx<'_>,
    repo: &Repository,
    request: &SumdbRequest,
) -> Result<Option<HttpResponse>, FormatError> {
    let fetch = match sumdb::forward(repo, request)? {
        Forward::NotServed => return Ok(None),
        Forward::Supported => return Ok(Some(HttpResponse::Ok().content_type(TEXT).finish())),
        Forward::Fetch(f) => f,
    };
    super::super::fetch_proxied(cx.services, repo, cx.req, *fetch, request.content_type()).await
}

/// A file of the repository's own database.
fn served(cx: &Cx<'_>, bytes: Bytes, content_type: &str) -> HttpResponse {
    let etag = format!("\"{}\"", hex::encode(Sha256::digest(&bytes)));
    super::super::serve_published(cx.req, ServedFile::new(bytes, None, content_type, &etag))
}

/// The repository's own database's answer.
async fn own(
    cx: &Cx<'_>,
    repo: &Repository,
    request: &SumdbRequest,
    depth: usize,
) -> Result<Option<HttpResponse>, FormatError> {
    let services = cx.services;
    match &request.path {
        SumdbPath::Supported => Ok(Some(HttpResponse::Ok().content_type(TEXT).finish())),
        SumdbPath::Latest => Ok(Some(served(cx, latest(services, repo, false).await?.note, TEXT))),
        SumdbPath::Lookup { module, version } => {
            let Some((id, text)) = find_record(cx, repo, (module, version), depth).await? else { return Ok(None) };
            // The signed head must hold the record: a newer one than the replica kept, maybe.
            let mut head = latest(services, repo, false).await?;
            if head.size <= id {
                head = latest(services, repo, true).await?;
            }
            if head.size <= id {
                return Err(ApiError::internal(format!("record {id} of {} is beyond its tree", repo.name)).into());
            }
            let note = std::str::from_utf8(&head.note).map_err(ApiError::internal)?;
            let body = lookup_body(id, &text, note).map_err(ApiError::internal)?;
            Ok(Some(served(cx, Bytes::from(body), TEXT)))
        }
        SumdbPath::Tile(tile) => {
            if tile.height != TILE_HEIGHT {
                return Err(ApiError::not_found(format!(
                    "not found: {} (this database serves tiles of height {TILE_HEIGHT})",
                    tile.path()
                ))
                .into());
            }
            let key = format!("sumdb/{}", tile.path());
            if let Some(bytes) = services.published.kept(repo.id, &key) {
                return Ok(Some(served(cx, bytes, request.content_type())));
            }
            let mut head = latest(services, repo, false).await?;
            if !tile.is_within(head.size) {
                head = latest(services, repo, true).await?;
            }
            if !tile.is_within(head.size) {
                return Err(ApiError::not_found(format!(
                    "not found: {} is beyond the tree of {} records that {} signed",
                    tile.path(),
                    head.size,
                    head.name
                ))
                .into());
            }
            let bytes = Bytes::from(sumdb::tile(&services.db, repo.id, tile).await.map_err(log_error)?);
            services.published.keep(repo.id, &key, bytes.clone());
            Ok(Some(served(cx, bytes, request.content_type())))
        }
    }
}

/// A repository's signed tree head, its size and its database's name.
struct SignedHead {
    name: String,
    size: u64,
    note: Bytes,
}

/// The signed head: the replica's (no query) unless `fresh`, else the stored head's, signed
/// once per size (the log made on first need).
async fn latest(services: &Services, repo: &Repository, fresh: bool) -> Result<SignedHead, FormatError> {
    let published = &services.published;
    if !fresh {
        if let (Some(note), Some(name)) = (published.made(repo.id, LATEST), published.made(repo.id, NAME)) {
            let size = std::str::from_utf8(&note.bytes).ok().and_then(|t| Tree::parse(t).ok()).map(|t| t.size);
            if let (Some(size), Ok(name)) = (size, String::from_utf8(name.bytes.to_vec())) {
                return Ok(SignedHead { name, size, note: note.bytes });
            }
        }
    }
    let epoch = published.epoch();
    let head = sumdb::ensure(services, repo).await.map_err(log_error)?;
    let size = u64::try_from(head.size).unwrap_or(0);
    // An empty log's key may still be replaced: only a non-empty log's head is kept for good.
    let key = format!("sumdb/latest/{size}");
    let note = match published.kept(repo.id, &key).filter(|_| size > 0) {
        Some(note) => note,
        None => {
            let note = Bytes::from(sumdb::signed_head(services, repo, &head).await.map_err(log_error)?);
            if size > 0 {
                published.keep(repo.id, &key, note.clone());
            }
            note
        }
    };
    let file = |bytes: Bytes| ServedFile::new(bytes, None, TEXT, "");
    published.put_made(epoch, repo.id, LATEST, file(note.clone()));
    published.put_made(epoch, repo.id, NAME, file(Bytes::from(head.name.clone())));
    Ok(SignedHead { name: head.name, size, note })
}

/// The record of `module@version` in `repo`'s database (a hosted or group repository), logged
/// now when the repository serves the version and its database does not hold it yet.
async fn find_record(
    cx: &Cx<'_>,
    repo: &Repository,
    (module, version): (&str, &str),
    depth: usize,
) -> Result<Option<(u64, String)>, FormatError> {
    let services = cx.services;
    let key = format!("sumdb/record/{module}@{version}");
    if let Some(kept) = services.published.kept(repo.id, &key) {
        let text = std::str::from_utf8(&kept).map_err(ApiError::internal)?;
        if let Some((id, record)) = text.split_once('\n').and_then(|(id, r)| Some((id.parse().ok()?, r))) {
            return Ok(Some((id, record.to_string())));
        }
    }
    let db = &services.db;
    let found = match sumdb::record(db, db.pool(), repo.id, module, version).await? {
        Some(r) => Some(r),
        None => match Box::pin(served_record(cx, repo, (module, version), depth)).await? {
            None => None,
            Some(text) => {
                sumdb::ensure(services, repo).await.map_err(log_error)?;
                match sumdb::append_now(db, repo.id, (module, version), &text).await {
                    Ok(done) => Some((done.id(), text)),
                    // Logged meanwhile (by another replica): what is logged is the answer.
                    Err(AppendError::Different { id, logged }) => Some((id, logged)),
                    Err(AppendError::Db(e) | AppendError::Sumdb(SumdbError::Db(e))) => return Err(e.into()),
                    Err(e) => return Err(ApiError::internal(e).into()),
                }
            }
        },
    };
    let Some((id, text)) = found else { return Ok(None) };
    services.published.keep(repo.id, &key, Bytes::from(format!("{id}\n{text}")));
    Ok(Some((u64::try_from(id).unwrap_or(0), text)))
}

/// The record a repository would log for a version it serves and its database lacks: a hosted
/// repository's from its stored files; a group's from its member that serves the version's
/// files (the one its snapshot names first, then the others in order).
async fn served_record(
    cx: &Cx<'_>,
    repo: &Repository,
    (module, version): (&str, &str),
    depth: usize,
) -> Result<Option<String>, FormatError> {
    let services = cx.services;
    if check_coordinate(module, version).is_err() {
        return Ok(None);
    }
    match repo.repo_type {
        RepoType::Proxy => Ok(None),
        RepoType::Hosted => {
            let db = &services.db;
            let Some(v) = packyard_formats::go::rows::version(db, db.pool(), repo.id, module, version).await? else {
                return Ok(None);
            };
            let go_mod = services.blobs.read_all(&Sha256Hex::parse(&v.mod_sha256)?).await?;
            let zip = StoredBlob {
                sha256: Sha256Hex::parse(&v.zip_sha256)?,
                size: u64::try_from(v.zip_size).unwrap_or(0),
                created: false,
            };
            // It passed these checks when it was published (limits lowered since are not the
            // reader's fault).
            let (_, _, verified) =
                check(services, &zip, Some((module, version)), &limits(services)).await.map_err(|e| match e {
                    UploadError::Invalid(m) | UploadError::TooLarge(m) => {
                        ApiError::internal(format!("hashing the stored {module}@{version}: {m}"))
                    }
                    other => other.into(),
                })?;
            Ok(Some(record_text(module, version, &verified.h1, &go_mod)))
        }
        RepoType::Group => {
            let mut failed = MemberFailures::default();
            for member in &super::super::members_first(services, repo, depth + 1, (KIND, module, version)).await? {
                let found = match member.repo_type {
                    RepoType::Proxy => proxied_record(cx, member, (module, version)).await,
                    _ => find_record(cx, member, (module, version), depth + 1).await.map(|r| r.map(|(_, t)| t)),
                };
                if let Some(text) = failed.take(services, repo, member, found)? {
                    return Ok(Some(text));
                }
            }
            failed.into_error().map_or(Ok(None), Err)
        }
    }
}

/// The record of a version a proxy member serves: the hashes of the `.mod` and `.zip` its
/// upstream served (what a client of the group downloads), the zip checked as an upload is.
async fn proxied_record(
    cx: &Cx<'_>,
    proxy: &Repository,
    (module, version): (&str, &str),
) -> Result<Option<String>, FormatError> {
    let services = cx.services;
    let file = |ext| Request::File { module: module.to_string(), version: version.to_string(), ext };
    let Outcome::Found(go_mod, _) = services.proxy.fetch(proxy_request(proxy, &file("mod"))?).await? else {
        return Ok(None);
    };
    let Outcome::Found(zip, _) = services.proxy.fetch(proxy_request(proxy, &file("zip"))?).await? else {
        return Ok(None);
    };
    let digest = |e: &packyard_store::db::proxy::ProxyEntry| Sha256Hex::parse(e.sha256.as_deref().unwrap_or_default());
    let go_mod = services.blobs.read_all(&digest(&go_mod)?).await?;
    let zip = StoredBlob { sha256: digest(&zip)?, size: u64::try_from(zip.size).unwrap_or(0), created: false };
    let (_, _, verified) = check(services, &zip, Some((module, version)), &limits(services)).await.map_err(|e| {
        ApiError::new(
            ErrorCode::BadGateway,
            format!("the upstream of {} served {module}@{version} as no valid module zip: {e}", proxy.name),
        )
    })?;
    Ok(Some(record_text(module, version, &verified.h1, &go_mod)))
}
