//! What every format's hosted upload shares: the error a client hears about, the write-policy
//! check, streaming the body into the blob store, and removing what a refused upload created.

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::services::Services;
use packyard_model::repos::{Repository, WritePolicy};
use packyard_store::blobs::{BlobError, Sha256Hex, StoredBlob};
use packyard_store::db::DbError;

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The request or the package is not acceptable (400).
    #[error("{0}")]
    Invalid(String),
    /// The package is over a size limit (413).
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    ReadOnly(String),
    #[error("the upload was interrupted: {0}")]
    Interrupted(String),
    /// The client stopped sending the body (408).
    #[error("{0}")]
    Stalled(String),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A writer's transaction failed: a conflict is the client's (409), the rest the database's.
pub fn from_db(e: DbError) -> UploadError {
    match e {
        DbError::Conflict(m) => UploadError::Conflict(m),
        other => UploadError::Db(other),
    }
}

/// Refuses uploads to a repository whose write policy is `deny`.
pub fn check_writable(repo: &Repository) -> Result<(), UploadError> {
    if repo.write_policy == WritePolicy::Deny {
        return Err(UploadError::ReadOnly(format!("repository {} is read-only (write_policy deny)", repo.name)));
    }
    Ok(())
}

/// Streams a request body into the blob store (at most `limit` bytes); `what` names the
/// expected content for the message about an empty body (`None`: an empty body is fine).
pub async fn receive<S, E>(
    services: &Services,
    mut body: S,
    limit: u64,
    what: Option<&str>,
) -> Result<StoredBlob, UploadError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut writer = services.blobs.writer(limit).await?;
    // A client that stops sending holds a connection and an upload: it gets this long between
    // two pieces of the body, then 408 (and the partial upload is discarded with the writer).
    let idle = std::time::Duration::from_millis(services.config.server.body_idle_timeout_ms);
    loop {
        let next = match tokio::time::timeout(idle, body.next()).await {
            Ok(next) => next,
            Err(_) => {
                return Err(UploadError::Stalled(format!(
                    "the upload stalled: no data for {} ms after {} bytes (server.body_idle_timeout_ms)",
                    idle.as_millis(),
                    writer.written()
                )))
            }
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| UploadError::Interrupted(e.to_string()))?;
        writer.write(&chunk).await?;
    }
    if let (0, Some(what)) = (writer.written(), what) {
        return Err(UploadError::Invalid(format!("the upload is empty: send {what} as the request body")));
    }
    let stored = writer.finish().await?;
    // Pending until the upload's transaction claims it; a refused upload removes it, and one
    // whose replica died is collected after the grace period.
    services.db.note_upload(&stored.sha256, stored.size).await?;
    Ok(stored)
}

/// Reads a stored upload back on a blocking thread (a package is inspected off the async
/// executor): `inspect` gets a buffered reader of the whole blob.
pub async fn read_back<T, F>(services: &Services, digest: &Sha256Hex, inspect: F) -> Result<T, UploadError>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn std::io::BufRead) -> T + Send + 'static,
{
    let read = services.blobs.open(digest, None).await?;
    let reader = tokio_util::io::StreamReader::new(read.body);
    tokio::task::spawn_blocking(move || {
        let mut sync = std::io::BufReader::with_capacity(256 * 1024, tokio_util::io::SyncIoBridge::new(reader));
        inspect(&mut sync)
    })
    .await
    .map_err(|e| UploadError::Invalid(format!("cannot read the upload: {e}")))
}

/// Stores bytes the upload derived (Go's `.mod`), pending like a received body.
pub async fn store_derived(services: &Services, bytes: &[u8]) -> Result<StoredBlob, UploadError> {
    let stored = services.blobs.put_bytes(bytes).await?;
    services.db.note_upload(&stored.sha256, stored.size).await?;
    Ok(stored)
}

/// Removes a blob this upload created, when the upload is refused (nothing half-stored) —
/// unless another upload of the same bytes claimed it or a snapshot lists it meanwhile (the
/// pending row is the lock: it goes first, then the bytes).
pub async fn discard(services: &Services, digest: &Sha256Hex, created: bool) {
    if !created {
        return;
    }
    match services.db.discard_upload(digest).await {
        Ok(true) => {
            if let Err(e) = services.blobs.delete(digest).await {
                tracing::warn!(error = %e, blob = %digest, "cannot remove a refused upload");
            }
        }
        Ok(false) => {}
        // The pending row stays; the collector removes it and the bytes after the grace period.
        Err(e) => tracing::warn!(error = %e, blob = %digest, "cannot remove a refused upload now"),
    }
}
