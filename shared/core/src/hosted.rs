//! The hosted engine: uploads and deletes of every format, written once.
//!
//! An upload streams the body into the blob store (a pending `upload` blob), lets the format
//! inspect the stored bytes off the executor ([`Hosted::inspect`]), then, in one transaction
//! retried on deadlocks, asks what the coordinate holds ([`Hosted::existing`]), applies the
//! write policy, claims the blobs, writes the format's rows ([`Hosted::write`]), records the
//! publication changes, the catalogue's entry and the audit entry — and wakes the worker after
//! the commit. A refused
//! upload removes what it stored. A delete is the same transaction around
//! [`Hosted::remove`]. A format supplies only what differs: its target, how it reads a package,
//! its rows and its units.

use std::net::IpAddr;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::services::Services;
use packyard_model::repos::{RepoType, Repository, WritePolicy};
use packyard_model::security::{Action, Principal, RepoFacts};
use packyard_model::selector::Content;
use packyard_store::blobs::{BlobError, Sha256Hex, StoredBlob};
use packyard_store::db::blobs::Collect;
pub use packyard_store::db::catalogue::{Component, Entry, Forget, NewAsset};
use packyard_store::db::{Db, DbError, DbResult};

/// A writer's transaction.
pub type Tx<'c> = sqlx::Transaction<'c, sqlx::Any>;

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The request or the package is not acceptable (400).
    #[error("{0}")]
    Invalid(String),
    /// The caller may not write this content (403).
    #[error("{0}")]
    Forbidden(String),
    /// The package is over a size limit (413).
    #[error("{0}")]
    TooLarge(String),
    /// Storing it would take a repository or the blob store past its hard quota (507).
    #[error("{0}")]
    InsufficientStorage(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    ReadOnly(String),
    /// A write to a proxy or group repository (405).
    #[error("{0}")]
    NotHosted(String),
    #[error("the upload was interrupted: {0}")]
    Interrupted(String),
    /// The client stopped sending the body (408).
    #[error("{0}")]
    Stalled(String),
    /// Refused for a moment's reason the message names; sending it again succeeds (503).
    #[error("{0}")]
    Again(String),
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

/// Refuses uploads, deletes, copies and imports to a repository whose write policy is `deny`,
/// or that follows another (`replication`: its replication run is its only writer, and writes
/// as the repository without that block).
pub fn check_writable(repo: &Repository) -> Result<(), UploadError> {
    if repo.write_policy == WritePolicy::Deny {
        return Err(UploadError::ReadOnly(format!("repository {} is read-only (write_policy deny)", repo.name)));
    }
    if let Some(r) = &repo.settings.replication {
        return Err(UploadError::ReadOnly(format!(
            "repository {} follows repository {} at {} (replication): it takes no writes of its own; write to the source, or remove its `replication` block",
            repo.name,
            r.repository.as_deref().unwrap_or(repo.name.as_str()),
            r.url
        )));
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
        writer.write_bytes(chunk).await?;
    }
    if let (0, Some(what)) = (writer.written(), what) {
        return Err(UploadError::Invalid(format!("the upload is empty: send {what} as the request body")));
    }
    let stored = writer.finish().await?;
    settle(services, stored).await
}

/// Records an upload's durable bytes as pending — until the upload's transaction claims them;
/// a refused upload removes them, one whose replica died is collected after the grace period —
/// then checks that they are still there. A collector that held the blob's row while these
/// bytes were written may have deleted them (`Db::collect_blob`: recording the row waits for
/// it); the upload is refused then (503, send it again), never acknowledged without its bytes.
async fn settle(services: &Services, mut stored: StoredBlob) -> Result<StoredBlob, UploadError> {
    packyard_store::pause::at("upload.stored").await;
    // Bytes a row names were there before this upload: not its own to discard, nor new to the
    // blob store's quota (the S3 store does not ask the bucket).
    if stored.created && services.db.blob(&stored.sha256).await?.is_some() {
        stored.created = false;
    }
    services.db.note_upload(&stored.sha256, stored.size).await?;
    if services.blobs.stat(&stored.sha256).await?.is_none() {
        return Err(UploadError::Again(format!(
            "the uploaded bytes {} were removed by the blob collector at the same instant; send the upload again",
            stored.sha256
        )));
    }
    Ok(stored)
}

/// Reads a stored upload back on a blocking thread (a package is inspected off the async
/// executor): `inspect` gets a buffered reader of the whole blob.
pub async fn read_back<T, F>(services: &Services, digest: &Sha256Hex, inspect: F) -> Result<T, UploadError>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn std::io::BufRead) -> T + Send + 'static,
{
    const BUFFER: usize = 256 * 1024;
    let gone = |e: tokio::task::JoinError| UploadError::Invalid(format!("cannot read the upload: {e}"));
    // A local file is read on the blocking thread itself; a remote blob through the runtime.
    if let Some(open) = services.blobs.blocking_open(digest) {
        return tokio::task::spawn_blocking(move || {
            let mut file = std::io::BufReader::with_capacity(BUFFER, open()?);
            Ok(inspect(&mut file))
        })
        .await
        .map_err(gone)?;
    }
    let read = services.blobs.open(digest, None).await?;
    let reader = tokio_util::io::StreamReader::new(read.body);
    tokio::task::spawn_blocking(move || {
        let mut sync = std::io::BufReader::with_capacity(BUFFER, tokio_util::io::SyncIoBridge::new(reader));
        inspect(&mut sync)
    })
    .await
    .map_err(gone)
}

/// Stores bytes the upload derived (Go's `.mod`), pending like a received body.
pub async fn store_derived(services: &Services, bytes: &[u8]) -> Result<StoredBlob, UploadError> {
    let stored = services.blobs.put_bytes(bytes).await?;
    settle(services, stored).await
}

/// Removes a blob this upload created, when the upload is refused (nothing half-stored) —
/// unless another upload of the same bytes claimed it or a snapshot lists it meanwhile (the
/// row is held while the bytes go: `Db::collect_blob`).
pub async fn discard(services: &Services, digest: &Sha256Hex, created: bool) {
    if !created {
        return;
    }
    match services.db.collect_blob(services.blobs.as_ref(), digest, Collect::Refused).await {
        Ok(_) => {}
        // The pending row stays; the collector removes it and the bytes after the grace period.
        Err(e) => tracing::warn!(error = %e, blob = %digest, "cannot remove a refused upload now"),
    }
}

/// Who makes a change: for the audit log; and, for a client's upload, whose privileges decide
/// what content it may write (`None`: the instance's own work — an import, a replication run,
/// the scheduler — which no content selector narrows).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    pub username: &'a str,
    pub address: Option<IpAddr>,
    pub principal: Option<&'a Principal>,
}

impl<'a> Actor<'a> {
    /// The instance's own work, named `username` in the audit log.
    pub fn system(username: &'a str) -> Self {
        Self { username, address: None, principal: None }
    }
}

/// Refuses a write (or a delete) of content that the actor's privileges reach only through
/// content selectors none of which selects it (403 naming the selectors). Not for reads: a read
/// also depends on `security.anonymous_read`, which this does not know.
pub fn check_content(
    repo: &Repository,
    actor: Actor<'_>,
    action: Action,
    (path, component): (&str, &Component),
) -> Result<(), UploadError> {
    let Some(principal) = actor.principal else { return Ok(()) };
    let facts = RepoFacts { name: repo.name.as_str(), anonymous_read: repo.anonymous_read };
    // A write or a delete never depends on anonymous reading (anonymous callers never write).
    let global = false;
    let path = format!("/{path}");
    let content = Content {
        format: repo.format.as_str(),
        repository: repo.name.as_str(),
        path: &path,
        name: Some(component.name.as_str()),
        version: Some(component.version.as_str()),
        group: Some(component.group.as_str()),
    };
    if principal.allows_content(facts, action, global, &content) {
        return Ok(());
    }
    let selectors = principal.selectors_for(facts, action, global);
    Err(UploadError::Forbidden(format!(
        "user {} may not {action} {} {} ({path}) in repository {}: the {action} privilege on it is limited to content selector(s) {}, which do not select it",
        actor.username,
        component.name,
        component.version,
        repo.name,
        if selectors.is_empty() { "(none)".to_string() } else { selectors.join(", ") }
    )))
}

/// A publication unit a change republishes: `(kind, unit key)`.
pub type UnitRef = (&'static str, String);

/// What inspecting an upload found: the format's artifact, how people name it (messages, the
/// audit log), and the blobs the format derived from the upload (Go's `.mod`), pending like it.
pub struct Inspected<A> {
    pub artifact: A,
    pub coordinate: String,
    pub derived: Vec<StoredBlob>,
}

/// What the coordinate of an upload holds, as [`Hosted::existing`] sees it in the transaction.
pub enum Existing<R> {
    Absent,
    /// The same bytes: an identical retry, answered without a change.
    Same,
    /// Other bytes: refused under `allow_once`; under `allow`, what `R` names is removed (as by
    /// a delete, without its audit entry) and the upload written in its place.
    Different(R),
    /// Written over whatever the write policy (Conan: a file of a revision not yet complete).
    Overwrite,
    /// Refused by the format's own rule (Conan: a complete revision's file).
    Refuse(UploadError),
}

impl<R> Existing<R> {
    /// From a stored artifact at the coordinate, if any: whether it has the upload's bytes, and
    /// what removes it.
    pub fn of(stored: Option<(bool, R)>) -> Self {
        match stored {
            None => Self::Absent,
            Some((true, _)) => Self::Same,
            Some((false, removal)) => Self::Different(removal),
        }
    }
}

/// What [`Hosted::write`] did.
pub struct Written {
    /// The artifact's units are republished (Conan: only once a revision is complete).
    pub republish: bool,
    /// The upload goes to the audit log (Conan: the file that completes a revision).
    pub audit: bool,
    /// What the catalogue shows of it (Conan: nothing until a revision is complete).
    pub catalogue: Option<Entry>,
}

impl Written {
    /// Published, audited and catalogued as `entry`.
    pub fn all(entry: Entry) -> Self {
        Self { republish: true, audit: true, catalogue: Some(entry) }
    }
}

/// A refusal or a storage failure inside a writer's transaction.
#[derive(Debug)]
pub enum TxError {
    Db(DbError),
    Refused(UploadError),
}

impl From<DbError> for TxError {
    fn from(e: DbError) -> Self {
        Self::Db(e)
    }
}

impl From<sqlx::Error> for TxError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e.into())
    }
}

/// What a hosted format supplies to the engine.
#[async_trait]
pub trait Hosted: Send + Sync {
    /// Where an upload goes, as the format's route parsed it.
    type Target: Send + Sync;
    /// The rows an upload becomes.
    type Artifact: Send + Sync;
    /// What a delete names.
    type Removal: Send + Sync;

    /// The format's name in audit actions (`apt` → `apt.upload`, `apt.delete`).
    const NAME: &'static str;
    /// What the body must be, for the message about an empty one (`None`: it may be empty).
    const BODY: Option<&'static str>;
    /// Why a different upload to a taken coordinate is refused under `allow_once`.
    const IMMUTABILITY: &'static str = "its write policy allows each version once";
    /// The largest body this format takes.
    fn max_bytes(&self, services: &Services) -> u64 {
        services.config.server.max_upload_bytes
    }
    /// Checks that need no body (a configured component or architecture, a file name).
    fn check_target(&self, _repo: &Repository, _target: &Self::Target) -> Result<(), UploadError> {
        Ok(())
    }
    /// Reads the stored upload (with [`read_back`], off the executor) into the artifact.
    async fn inspect(
        &self,
        services: &Services,
        repo: &Repository,
        target: &Self::Target,
        stored: &StoredBlob,
    ) -> Result<Inspected<Self::Artifact>, UploadError>;
    /// The publication units the artifact belongs to.
    fn units(&self, repo: &Repository, artifact: &Self::Artifact) -> Vec<UnitRef>;
    /// What the answer to an upload says of the stored artifact (JSON).
    fn receipt(&self, artifact: &Self::Artifact) -> serde_json::Value;
    /// What a content selector sees of the artifact: the path clients read it at (below the
    /// repository, no leading `/`) and the component it belongs to.
    fn content(&self, artifact: &Self::Artifact) -> (String, Component);
    /// In the transaction: what the artifact's coordinate holds now.
    async fn existing(&self, t: &mut InTx<'_, '_>, artifact: &Self::Artifact) -> DbResult<Existing<Self::Removal>>;
    /// In the transaction: writes the artifact's rows, by `uploader`.
    async fn write(&self, t: &mut InTx<'_, '_>, artifact: &Self::Artifact, uploader: &str) -> Result<Written, TxError>;
    /// In the transaction: removes what `removal` names; `None` when there is nothing.
    async fn remove(&self, t: &mut InTx<'_, '_>, removal: &Self::Removal) -> DbResult<Option<Removed>>;
    /// The removal of the catalogued component keyed `key` (its `Entry`'s key); `None` for a
    /// key the format never makes.
    fn removal(&self, key: &str) -> Option<Self::Removal>;

    /// The uploads that copy the catalogued component `(key, created_at)` into hosted
    /// repository `to` (a copy keeps the time the component was made where the format orders
    /// by it), from
    /// its `assets` (each its path and its blob, stored already): each a target and the blob
    /// its upload is. An asset that follows from another (a Go module's `.mod` from its `.zip`)
    /// has none. `Err`: the component cannot be copied there, and why.
    /// In the order they are uploaded (what completes a revision last).
    async fn copy_targets(
        &self,
        _services: &Services,
        _to: &Repository,
        _component: (&str, i64),
        _assets: &[(String, StoredBlob)],
    ) -> Result<Vec<(Self::Target, StoredBlob)>, UploadError> {
        Err(UploadError::Invalid(format!("{} components cannot be copied", Self::NAME)))
    }
}

/// A hosted format's part of a transaction: the transaction, its database, the repository.
pub struct InTx<'a, 'c> {
    pub tx: &'a mut Tx<'c>,
    pub db: &'a Db,
    pub repo: &'a Repository,
}

/// What [`Hosted::remove`] removed.
pub struct Removed {
    pub coordinate: String,
    pub units: Vec<UnitRef>,
    pub detail: serde_json::Value,
    /// What goes out of the catalogue with it.
    pub forget: Forget,
    /// What a content selector sees of it ([`Hosted::content`]): for the webhook subscriptions
    /// narrowed by one (`None`: none of them is told).
    pub content: Option<(String, Component)>,
}

/// An upload the engine stored.
pub struct Uploaded<A> {
    pub artifact: A,
    pub coordinate: String,
    pub stored: StoredBlob,
    /// False for an identical retry.
    pub created: bool,
    /// `(unit id, desired revision)` of each unit to wait for (read-your-writes).
    pub changes: Vec<(i64, i64)>,
    /// What the answer says of the artifact ([`Hosted::receipt`]).
    pub receipt: serde_json::Value,
}

/// A delete the engine made.
pub struct Deleted {
    pub coordinate: String,
    pub changes: Vec<(i64, i64)>,
}

/// Refuses writes to a repository that is not hosted.
pub fn check_hosted(repo: &Repository, what: &str) -> Result<(), UploadError> {
    if repo.repo_type == RepoType::Hosted {
        return Ok(());
    }
    Err(UploadError::NotHosted(format!(
        "repository {} is a {} repository; {what} a hosted one",
        repo.name, repo.repo_type
    )))
}

/// How many times a transaction runs again after a deadlock or a concurrent insert of the same
/// key (the next run finds the row).
const ATTEMPTS: u32 = 8;

/// Stores one upload of `format` in `repo`.
pub async fn upload<H, S, E>(
    format: &H,
    services: &Services,
    repo: &Repository,
    target: H::Target,
    body: S,
    actor: Actor<'_>,
) -> Result<Uploaded<H::Artifact>, UploadError>
where
    H: Hosted,
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    check_upload(format, repo, &target)?;
    let stored = receive(services, body, format.max_bytes(services), H::BODY).await?;
    upload_stored(format, services, repo, target, stored, actor).await
}

/// What an upload to `repo` must pass before its body is read: a hosted, writable repository
/// and the format's check of the target.
pub fn check_upload<H: Hosted>(format: &H, repo: &Repository, target: &H::Target) -> Result<(), UploadError> {
    check_hosted(repo, "upload to")?;
    check_writable(repo)?;
    format.check_target(repo, target)
}

/// Stores one upload whose body was received already ([`receive`]: a route that reads a form
/// with several files); a refusal removes what the upload stored.
pub async fn upload_stored<H: Hosted>(
    format: &H,
    services: &Services,
    repo: &Repository,
    target: H::Target,
    stored: StoredBlob,
    actor: Actor<'_>,
) -> Result<Uploaded<H::Artifact>, UploadError> {
    let mut derived = Vec::new();
    let outcome = match check_upload(format, repo, &target) {
        Ok(()) => record(format, services, repo, &target, &stored, &mut derived, actor).await,
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        discard(services, &stored.sha256, stored.created).await;
        for d in &derived {
            discard(services, &d.sha256, d.created).await;
        }
    }
    outcome
}

async fn record<H: Hosted>(
    format: &H,
    services: &Services,
    repo: &Repository,
    target: &H::Target,
    stored: &StoredBlob,
    derived: &mut Vec<StoredBlob>,
    actor: Actor<'_>,
) -> Result<Uploaded<H::Artifact>, UploadError> {
    let inspected = format.inspect(services, repo, target, stored).await?;
    derived.extend(inspected.derived.iter().cloned());
    let (path, component) = format.content(&inspected.artifact);
    check_content(repo, actor, Action::Write, (&path, &component))?;
    let (artifact, coordinate) = (inspected.artifact, inspected.coordinate);
    let db = &services.db;
    let units = format.units(repo, &artifact);
    let mut attempt = 0;
    let outcome = loop {
        attempt += 1;
        let run = async {
            let mut tx = db.begin().await?;
            let guard = crate::quota::Guard::begin(db, &mut tx, repo).await?;
            let detail = serde_json::json!({"sha256": stored.sha256.as_str()});
            let how = (format!("{}.upload", H::NAME), detail);
            let upload = (&artifact, coordinate.as_str(), units.clone());
            let stored_once =
                store_one(format, (&mut tx, db, repo), upload, (stored, derived.as_slice()), actor, &how).await?;
            let Some(units) = stored_once else { return Ok(None) };
            let created = crate::quota::created(std::iter::once(stored).chain(derived.iter()));
            let counted = guard.finish(services, &mut tx, repo, created).await?;
            let mut changes = Vec::new();
            for (kind, key) in &units {
                changes.push(db.record_change(&mut tx, repo.id, kind, key).await?);
            }
            tx.commit().await?;
            counted.show(services, repo);
            Ok::<_, TxError>(Some(changes))
        };
        match run.await {
            Err(TxError::Db(DbError::Retry(m) | DbError::Conflict(m))) if attempt < ATTEMPTS => {
                // A deadlock, or an identical upload that committed first: run again.
                tracing::debug!(attempt, error = %m, "running an upload's transaction again");
                tokio::time::sleep(std::time::Duration::from_millis(2u64 << attempt)).await;
            }
            other => break other,
        }
    };
    match outcome {
        Ok(Some(changes)) => {
            services.wake();
            let receipt = format.receipt(&artifact);
            Ok(Uploaded { artifact, coordinate, stored: stored.clone(), created: true, changes, receipt })
        }
        Ok(None) => {
            // An identical retry: wait (when asked) for what the first upload changed.
            let mut changes = Vec::new();
            for (kind, key) in &units {
                if let Some(u) = db.unit_by_key(repo.id, kind, key).await? {
                    changes.push((u.id, u.desired_revision));
                }
            }
            let receipt = format.receipt(&artifact);
            Ok(Uploaded { artifact, coordinate, stored: stored.clone(), created: false, changes, receipt })
        }
        Err(TxError::Refused(e)) => Err(e),
        Err(TxError::Db(e)) => Err(from_db(e)),
    }
}

/// Deletes what `removal` names from `repo`: the rows, their publication changes and the audit
/// entry in one transaction. `None` when there is nothing to delete.
pub async fn delete<H: Hosted>(
    format: &H,
    services: &Services,
    repo: &Repository,
    removal: &H::Removal,
    actor: Actor<'_>,
) -> Result<Option<Deleted>, UploadError> {
    check_hosted(repo, "delete from")?;
    check_writable(repo)?;
    let db = &services.db;
    let done = packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.begin().await?;
        let Some(removed) = format.remove(&mut InTx { tx: &mut tx, db, repo }, removal).await? else { return Ok(None) };
        db.catalogue_forget(&mut tx, repo.id, &removed.forget).await?;
        let mut changes = Vec::new();
        for (kind, key) in &removed.units {
            changes.push(db.record_change(&mut tx, repo.id, kind, key).await?);
        }
        let action = format!("{}.delete", H::NAME);
        audit_in(&mut tx, db, actor, &action, repo, &removed.coordinate, &removed.detail).await?;
        component_event_in(
            &mut tx,
            db,
            "component.deleted",
            repo,
            (&removed.coordinate, &removed.detail, removed.content.as_ref()),
            actor,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(Deleted { coordinate: removed.coordinate, changes }))
    })
    .await
    .map_err(from_db)?;
    if done.is_some() {
        services.wake();
        crate::quota::after_delete(services, repo).await;
    }
    Ok(done)
}

/// Deletes a hosted repository's catalogued components by key, as the format's own delete does:
/// what cleanup and Nexus's `DELETE` run (`FormatSpec::deletes`).
#[async_trait]
pub trait Deletes: Send + Sync {
    /// Deletes the components keyed `keys` in one transaction (one audit entry each, each unit
    /// republished once). Returns the keys of those that were there (another delete may have
    /// removed one first) and the units' changes.
    async fn delete_components(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(Vec<String>, Vec<(i64, i64)>), UploadError>;
}

/// A format's [`Hosted`] rules deleting by catalogue key: [`delete_batch`] of each key's
/// [`Hosted::removal`].
pub struct ByKey<H>(pub H);

#[async_trait]
impl<H: Hosted> Deletes for ByKey<H> {
    async fn delete_components(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(Vec<String>, Vec<(i64, i64)>), UploadError> {
        let (named, removals): (Vec<&String>, Vec<H::Removal>) =
            keys.iter().filter_map(|k| self.0.removal(k).map(|r| (k, r))).unzip();
        let (removed, changes) = delete_batch(&self.0, services, repo, &removals, actor).await?;
        Ok((removed.into_iter().filter_map(|i| named.get(i).map(|k| (*k).clone())).collect(), changes))
    }
}

/// In `tx`, stores one inspected upload into `repo` as every upload is stored: what its
/// coordinate holds decides (an identical artifact: `None`; another under `allow_once`: refused;
/// under `allow`, removed first), its blobs are claimed, its rows written, its catalogue entry,
/// audit entry (`how`: the action and its detail) and event added. Returns the units to
/// republish (`units`, and those of what it replaced; none when the format does not republish
/// it yet).
async fn store_one<H: Hosted>(
    format: &H,
    (tx, db, repo): (&mut Tx<'_>, &Db, &Repository),
    (artifact, coordinate, mut units): (&H::Artifact, &str, Vec<UnitRef>),
    (stored, derived): (&StoredBlob, &[StoredBlob]),
    actor: Actor<'_>,
    (action, detail): &(String, serde_json::Value),
) -> Result<Option<Vec<UnitRef>>, TxError> {
    let mut t = InTx { tx: &mut *tx, db, repo };
    match format.existing(&mut t, artifact).await? {
        Existing::Absent | Existing::Overwrite => {}
        Existing::Same => return Ok(None),
        Existing::Different(_) if repo.write_policy == WritePolicy::AllowOnce => {
            return Err(TxError::Refused(UploadError::Conflict(format!(
                "{coordinate} is already in repository {} with different content; {}",
                repo.name,
                H::IMMUTABILITY
            ))))
        }
        Existing::Different(old) => {
            // A redeploy republishes what the removed artifact was in, too. What it replaces
            // must be the uploader's to write as well (a content selector decides both).
            if let Some(removed) = format.remove(&mut t, &old).await? {
                if let Some((path, component)) = &removed.content {
                    check_content(repo, actor, Action::Write, (path, component)).map_err(TxError::Refused)?;
                }
                db.catalogue_forget(t.tx, repo.id, &removed.forget).await?;
                units.extend(removed.units.into_iter().filter(|u| !units.contains(u)).collect::<Vec<_>>());
            }
        }
        Existing::Refuse(e) => return Err(TxError::Refused(e)),
    }
    db.claim_blob(tx, &stored.sha256).await?;
    for d in derived {
        db.claim_blob(tx, &d.sha256).await?;
    }
    let written = format.write(&mut InTx { tx: &mut *tx, db, repo }, artifact, actor.username).await?;
    if let Some(entry) = &written.catalogue {
        let stamp = (actor.username, packyard_store::db::now_ms());
        db.catalogue_put(tx, repo.id, repo.format.as_str(), entry, stamp).await?;
    }
    if written.audit {
        audit_in(tx, db, actor, action, repo, coordinate, detail).await?;
        let content = format.content(artifact);
        component_event_in(tx, db, "component.published", repo, (coordinate, detail, Some(&content)), actor).await?;
    }
    Ok(Some(if written.republish { units } else { Vec::new() }))
}

/// What a copy or a move did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    /// Components written into the target.
    pub copied: usize,
    /// Components the target held already with the same content.
    pub unchanged: usize,
    /// Components removed from the source (a move).
    pub removed: usize,
    /// The publication changes to wait for (the target's, and a move's source's).
    #[serde(skip)]
    pub changes: Vec<(i64, i64)>,
}

/// Copies (or moves) catalogued components between two hosted repositories of a format.
#[async_trait]
pub trait Copies: Send + Sync {
    /// Copies the components of `batch` from `from` into `to` — each as the format's upload of
    /// its files, every file checked as an upload is — in one transaction with their audit
    /// entries and events; a move removes its `keys` (not its `dependencies`) from `from` in the
    /// same transaction, refused if one changed since its files were read. Each unit is
    /// republished once.
    async fn copy_components(
        &self,
        services: &Services,
        repos: (&Repository, &Repository),
        batch: &Batch,
        actor: Actor<'_>,
    ) -> Result<Copied, UploadError>;

    /// Stores `components` — listed by a bundle another instance exported (`bundle`: what the
    /// audit entries say they came from), their blobs in this instance's store already — into
    /// hosted repository `to`, as [`Copies::copy_components`] stores a copy's.
    async fn import_components(
        &self,
        services: &Services,
        to: &Repository,
        bundle: &str,
        components: &[Listed],
        actor: Actor<'_>,
    ) -> Result<Copied, UploadError>;
}

/// A component to copy, as its source lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listed {
    /// Its catalogue key.
    pub key: String,
    /// When it was made (ms): a copy keeps it where the format orders by it.
    pub created_at: i64,
    /// Its files, by path.
    pub files: Vec<ListedFile>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListedFile {
    pub path: String,
    pub sha256: String,
    pub size: i64,
}

/// Where copied components come from.
#[derive(Debug, Clone, Copy)]
pub enum CopySource<'a> {
    /// A repository of this instance (a move removes them there).
    Repository(&'a Repository),
    /// A bundle another instance exported (`crate::bundle`).
    Bundle(&'a str),
}

impl CopySource<'_> {
    fn label(&self) -> &str {
        match self {
            Self::Repository(r) => r.name.as_str(),
            Self::Bundle(b) => b,
        }
    }
}

/// What a copy or move takes.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// The components named (catalogue keys): moved by a move.
    pub keys: Vec<String>,
    /// What they need that the target lacks: copied, never removed from the source (others
    /// there may need them too).
    pub dependencies: Vec<String>,
    pub moving: bool,
}

/// A format whose components are not copied.
pub struct NoCopies;

#[async_trait]
impl Copies for NoCopies {
    async fn copy_components(
        &self,
        _services: &Services,
        (from, _): (&Repository, &Repository),
        _batch: &Batch,
        _actor: Actor<'_>,
    ) -> Result<Copied, UploadError> {
        Err(UploadError::Invalid(format!("{} components cannot be copied", from.format)))
    }

    async fn import_components(
        &self,
        _services: &Services,
        to: &Repository,
        _bundle: &str,
        _components: &[Listed],
        _actor: Actor<'_>,
    ) -> Result<Copied, UploadError> {
        Err(UploadError::Invalid(format!("{} components cannot be imported", to.format)))
    }
}

#[async_trait]
impl<H: Hosted> Copies for ByKey<H> {
    async fn copy_components(
        &self,
        services: &Services,
        (from, to): (&Repository, &Repository),
        batch: &Batch,
        actor: Actor<'_>,
    ) -> Result<Copied, UploadError> {
        copy_batch(&self.0, services, (from, to), batch, actor).await
    }

    async fn import_components(
        &self,
        services: &Services,
        to: &Repository,
        bundle: &str,
        components: &[Listed],
        actor: Actor<'_>,
    ) -> Result<Copied, UploadError> {
        check_hosted(to, "import into")?;
        check_writable(to)?;
        copy_listed(&self.0, services, (CopySource::Bundle(bundle), to), components, &Batch::default(), actor).await
    }
}

/// One component's uploads into the target, inspected.
struct CopyItem<A> {
    key: String,
    /// Removed from the source (a move's named component).
    remove: bool,
    /// Its files as they were read: `(path, sha256)`, sorted.
    files: Vec<(String, String)>,
    uploads: Vec<(Inspected<A>, StoredBlob)>,
}

/// Checks that a copy or move can be: a hosted, writable target (and source, for a move),
/// another repository of the same format.
pub fn check_copy(from: &Repository, to: &Repository, moving: bool) -> Result<(), UploadError> {
    check_hosted(to, "copy into")?;
    check_writable(to)?;
    if moving {
        check_hosted(from, "move from")?;
        check_writable(from)?;
    }
    if from.format != to.format {
        return Err(UploadError::Invalid(format!(
            "repository {} is {} and repository {} is {}: components are copied between repositories of one format",
            from.name, from.format, to.name, to.format
        )));
    }
    if from.id == to.id {
        return Err(UploadError::Invalid(format!("repository {} is both the source and the target", from.name)));
    }
    Ok(())
}

/// [`Copies::copy_components`] for a format's [`Hosted`] rules.
pub async fn copy_batch<H: Hosted>(
    format: &H,
    services: &Services,
    (from, to): (&Repository, &Repository),
    batch: &Batch,
    actor: Actor<'_>,
) -> Result<Copied, UploadError> {
    check_copy(from, to, batch.moving)?;
    let keys: Vec<String> = batch.keys.iter().chain(&batch.dependencies).cloned().collect();
    let db = &services.db;
    let components = db.catalogue_components_by_keys(from.id, &keys).await?;
    if let Some(missing) = keys.iter().find(|k| !components.iter().any(|c| &c.component_key == *k)) {
        return Err(UploadError::Invalid(format!("repository {} has no component {missing}", from.name)));
    }
    let listed = listed_components(db, &components).await?;
    copy_listed(format, services, (CopySource::Repository(from), to), &listed, batch, actor).await
}

/// Each catalogued component of `rows` as a copy lists it — its key, its time, its files in the
/// catalogue's order — in the order of `rows`.
pub async fn listed_components(db: &Db, rows: &[packyard_store::db::catalogue::ComponentRow]) -> DbResult<Vec<Listed>> {
    let ids: Vec<i64> = rows.iter().map(|c| c.id).collect();
    let mut files: std::collections::HashMap<i64, Vec<ListedFile>> = std::collections::HashMap::new();
    for a in db.catalogue_assets_of(&ids).await? {
        let file = ListedFile { path: a.path, sha256: a.sha256.trim().to_string(), size: a.size };
        files.entry(a.component_id).or_default().push(file);
    }
    Ok(rows
        .iter()
        .map(|c| Listed {
            key: c.component_key.clone(),
            created_at: c.created_at,
            files: files.remove(&c.id).unwrap_or_default(),
        })
        .collect())
}

/// One component read back for a copy: what its inspection derived, and the item or why not.
type Inspection<A> = (Vec<StoredBlob>, Result<CopyItem<A>, UploadError>);

/// Components a copy reads back and checks at once.
const INSPECTIONS: usize = 4;

/// Stores the `components` of `source` into `to` as the format's uploads: every file read back
/// and checked as its upload would be, then one transaction; a move's `batch.keys` are removed
/// from the source repository in it.
pub async fn copy_listed<H: Hosted>(
    format: &H,
    services: &Services,
    (source, to): (CopySource<'_>, &Repository),
    components: &[Listed],
    batch: &Batch,
    actor: Actor<'_>,
) -> Result<Copied, UploadError> {
    // What the target holds already with the same files is unchanged: not read back again.
    let keys: Vec<String> = components.iter().map(|c| c.key.clone()).collect();
    let held = services.db.catalogue_components_by_keys(to.id, &keys).await?;
    let held: std::collections::HashMap<String, Vec<(String, String)>> = listed_components(&services.db, &held)
        .await?
        .into_iter()
        .map(|c| {
            let mut files: Vec<(String, String)> = c.files.into_iter().map(|f| (f.path, f.sha256)).collect();
            files.sort();
            (c.key, files)
        })
        .collect();
    // Every file read back and checked as its upload would be, before the transaction; a few
    // components at once (each inspection runs on a blocking thread). Every one runs to its
    // end, so that what an inspection derived is known and discarded when another failed.
    let mut unchanged = 0;
    let mut pending = Vec::with_capacity(components.len());
    for (n, c) in components.iter().enumerate() {
        let mut own = Vec::new();
        let mut files = Vec::new();
        for a in &c.files {
            let sha256 = Sha256Hex::parse(&a.sha256).map_err(|e| UploadError::Invalid(e.to_string()))?;
            let size = u64::try_from(a.size).unwrap_or_default();
            // A bundle's blobs (an import's, a replication's) were stored for it: counted as
            // new bytes by the blob store's quota (a copy's are the store's already).
            let created = matches!(source, CopySource::Bundle(_));
            own.push((a.path.clone(), StoredBlob { sha256, size, created }));
            files.push((a.path.clone(), a.sha256.trim().to_string()));
        }
        files.sort();
        let remove = batch.moving && batch.keys.contains(&c.key);
        if !remove && held.get(c.key.as_str()) == Some(&files) {
            unchanged += 1;
            continue;
        }
        pending.push((n, own, files, remove));
    }
    let inspections: Vec<Inspection<H::Artifact>> = futures_util::stream::iter(pending)
        .map(|(n, own, files, remove)| async move {
            // (By index: a borrowed item would not be general enough for the future to be `Send`.)
            let c = &components[n];
            let mut derived = Vec::new();
            let mut uploads = Vec::new();
            let component = (c.key.as_str(), c.created_at);
            let run = async {
                for (target, stored) in format.copy_targets(services, to, component, &own).await? {
                    format.check_target(to, &target)?;
                    let i = format.inspect(services, to, &target, &stored).await?;
                    derived.extend(i.derived.iter().cloned());
                    uploads.push((i, stored));
                }
                Ok::<_, UploadError>(())
            };
            let done = run.await;
            (derived, done.map(|()| CopyItem { key: c.key.clone(), remove, files, uploads }))
        })
        .buffered(INSPECTIONS)
        .collect()
        .await;
    let mut items: Vec<CopyItem<H::Artifact>> = Vec::with_capacity(inspections.len());
    let mut derived: Vec<StoredBlob> = Vec::new();
    let mut failed = None;
    for (made, item) in inspections {
        derived.extend(made);
        match item {
            Ok(item) => items.push(item),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let inspected = async { failed.map_or(Ok(()), Err) };
    let outcome = match inspected.await {
        Ok(()) => copy_transaction(format, services, (source, to), &items, batch.moving, actor).await,
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        for d in &derived {
            discard(services, &d.sha256, d.created).await;
        }
    }
    let mut copied = outcome?;
    copied.unchanged += unchanged;
    if !copied.changes.is_empty() {
        services.wake();
    }
    Ok(copied)
}

async fn copy_transaction<H: Hosted>(
    format: &H,
    services: &Services,
    (source, to): (CopySource<'_>, &Repository),
    items: &[CopyItem<H::Artifact>],
    moving: bool,
    actor: Actor<'_>,
) -> Result<Copied, UploadError> {
    let db = &services.db;
    let verb = match source {
        CopySource::Bundle(_) => "import",
        CopySource::Repository(_) if moving => "move",
        CopySource::Repository(_) => "copy",
    };
    let action = format!("{}.{verb}", H::NAME);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let run = async {
            let mut tx = db.begin().await?;
            let guard = crate::quota::Guard::begin(db, &mut tx, to).await?;
            let mut report = Copied::default();
            let (mut units_to, mut units_from): (Vec<UnitRef>, Vec<UnitRef>) = (Vec::new(), Vec::new());
            let add = |units: &mut Vec<UnitRef>, more: Vec<UnitRef>| {
                for u in more {
                    if !units.contains(&u) {
                        units.push(u);
                    }
                }
            };
            for item in items {
                let mut wrote = false;
                for (i, stored) in &item.uploads {
                    let detail = serde_json::json!({"from": source.label(), "sha256": stored.sha256.as_str()});
                    let how = (action.clone(), detail);
                    let units = format.units(to, &i.artifact);
                    let upload = (&i.artifact, i.coordinate.as_str(), units);
                    let blobs = (stored, i.derived.as_slice());
                    let Some(units) = store_one(format, (&mut tx, db, to), upload, blobs, actor, &how).await? else {
                        continue;
                    };
                    add(&mut units_to, units);
                    wrote = true;
                }
                // A bundle's component stored under another key than the bundle's (the target's
                // format settings place it elsewhere: another APT component, say) would be
                // deleted as one the bundle does not list, and stored again by every import:
                // refused before anything is.
                if let (true, CopySource::Bundle(bundle)) = (wrote, source) {
                    if db.catalogue_files_of_key_in(&mut tx, to.id, &item.key).await?.is_empty() {
                        return Err(TxError::Refused(UploadError::Invalid(format!(
                            "{bundle}: {} would not be held in repository {} under the key the source gives it: its format settings place it elsewhere; give it the source's settings",
                            item.key, to.name
                        ))));
                    }
                }
                if wrote {
                    report.copied += 1;
                } else {
                    report.unchanged += 1;
                }
                if let (true, CopySource::Repository(from)) = (item.remove, source) {
                    // What is removed is what was copied: the component as its files were read.
                    let now = db.catalogue_files_of_key_in(&mut tx, from.id, &item.key).await?;
                    if now != item.files {
                        return Err(TxError::Refused(UploadError::Conflict(format!(
                            "{} changed in repository {} while it was copied; send the move again",
                            item.key, from.name
                        ))));
                    }
                    let Some(removal) = format.removal(&item.key) else { continue };
                    let Some(removed) = format.remove(&mut InTx { tx: &mut tx, db, repo: from }, &removal).await?
                    else {
                        continue;
                    };
                    db.catalogue_forget(&mut tx, from.id, &removed.forget).await?;
                    let detail = serde_json::json!({"to": to.name.as_str(), "detail": removed.detail});
                    audit_in(&mut tx, db, actor, &action, from, &removed.coordinate, &detail).await?;
                    component_event_in(
                        &mut tx,
                        db,
                        "component.deleted",
                        from,
                        (&removed.coordinate, &detail, removed.content.as_ref()),
                        actor,
                    )
                    .await?;
                    add(&mut units_from, removed.units);
                    report.removed += 1;
                }
            }
            let created = crate::quota::created(
                items
                    .iter()
                    .flat_map(|i| i.uploads.iter().flat_map(|(i, s)| std::iter::once(s).chain(i.derived.iter()))),
            );
            let counted = guard.finish(services, &mut tx, to, created).await?;
            for (kind, key) in &units_to {
                report.changes.push(db.record_change(&mut tx, to.id, kind, key).await?);
            }
            if let CopySource::Repository(from) = source {
                for (kind, key) in &units_from {
                    report.changes.push(db.record_change(&mut tx, from.id, kind, key).await?);
                }
            }
            tx.commit().await?;
            counted.show(services, to);
            Ok::<_, TxError>(report)
        };
        match run.await {
            Err(TxError::Db(DbError::Retry(m) | DbError::Conflict(m))) if attempt < ATTEMPTS => {
                tracing::debug!(attempt, error = %m, "running a copy's transaction again");
                tokio::time::sleep(std::time::Duration::from_millis(2u64 << attempt)).await;
            }
            Err(TxError::Db(e)) => return Err(from_db(e)),
            Err(TxError::Refused(e)) => return Err(e),
            Ok(report) => return Ok(report),
        }
    }
}

/// Deletes what each of `removals` names from `repo` in one transaction, each with its audit
/// entry, and records each publication unit they touch once: a batch is republished once, not
/// once per removal. Returns the positions in `removals` of those that were there, and the units' changes.
pub async fn delete_batch<H: Hosted>(
    format: &H,
    services: &Services,
    repo: &Repository,
    removals: &[H::Removal],
    actor: Actor<'_>,
) -> Result<(Vec<usize>, Vec<(i64, i64)>), UploadError> {
    check_hosted(repo, "delete from")?;
    check_writable(repo)?;
    let db = &services.db;
    let done = packyard_store::db::retry_conflicts(|| async {
        let mut tx = db.begin().await?;
        let (mut removed_at, mut units): (Vec<usize>, Vec<UnitRef>) = (Vec::new(), Vec::new());
        let action = format!("{}.delete", H::NAME);
        // The catalogue's components and the audit entries go in statements of many.
        let (mut forget, mut audits) = (Vec::new(), Vec::new());
        for (at, removal) in removals.iter().enumerate() {
            let Some(removed) = format.remove(&mut InTx { tx: &mut tx, db, repo }, removal).await? else { continue };
            match removed.forget {
                Forget::Component(key) => forget.push(key),
                other => {
                    db.catalogue_forget(&mut tx, repo.id, &other).await?;
                }
            }
            component_event_in(
                &mut tx,
                db,
                "component.deleted",
                repo,
                (&removed.coordinate, &removed.detail, removed.content.as_ref()),
                actor,
            )
            .await?;
            audits.push((format!("{}/{}", repo.name, removed.coordinate), removed.detail.to_string()));
            for u in removed.units {
                if !units.contains(&u) {
                    units.push(u);
                }
            }
            removed_at.push(at);
        }
        db.catalogue_forget_keys(&mut tx, repo.id, &forget).await?;
        let address = actor.address.map(|a| a.to_string()).unwrap_or_default();
        db.insert_audits_in(&mut tx, (actor.username, &address, &action), &audits).await?;
        let mut changes = Vec::with_capacity(units.len());
        for (kind, key) in &units {
            changes.push(db.record_change(&mut tx, repo.id, kind, key).await?);
        }
        tx.commit().await?;
        Ok((removed_at, changes))
    })
    .await
    .map_err(from_db)?;
    if !done.0.is_empty() {
        services.wake();
        crate::quota::after_delete(services, repo).await;
    }
    Ok(done)
}

/// The webhook event of a component stored or deleted, in the change's transaction.
async fn component_event_in(
    tx: &mut Tx<'_>,
    db: &Db,
    event: &str,
    repo: &Repository,
    (coordinate, detail, content): (&str, &serde_json::Value, Option<&(String, Component)>),
    actor: Actor<'_>,
) -> DbResult<()> {
    let payload = serde_json::json!({
        "repository": {"name": repo.name.as_str(), "format": repo.format.as_str(), "type": repo.repo_type.as_str()},
        "component": coordinate,
        "actor": actor.username,
        "detail": detail,
    });
    let content = content.map(|(path, c)| packyard_store::db::webhooks::EventContent {
        format: repo.format.as_str(),
        path,
        name: &c.name,
        version: &c.version,
        group: &c.group,
    });
    db.enqueue_component_event_in(tx, event, (repo.name.as_str(), content), &payload.to_string()).await?;
    Ok(())
}

/// The audit entry of a change, in the change's transaction: `<repository>/<coordinate>`.
pub(crate) async fn audit_in(
    tx: &mut Tx<'_>,
    db: &Db,
    actor: Actor<'_>,
    action: &str,
    repo: &Repository,
    coordinate: &str,
    detail: &serde_json::Value,
) -> DbResult<()> {
    let address = actor.address.map(|a| a.to_string()).unwrap_or_default();
    let target = format!("{}/{coordinate}", repo.name);
    db.insert_audit_in(tx, actor.username, &address, action, &target, &detail.to_string()).await
}
