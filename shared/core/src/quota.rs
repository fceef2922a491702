//! Storage quotas, checked in the transaction of every write that adds files to a hosted
//! repository (an upload, a copy, a move, an import): a repository's (`quota.*` in its
//! definition: the bytes of its components' files) and the blob store's (`blobs.quota.*`: every
//! blob, index snapshots included).
//!
//! A write takes a [`Guard`] before its rows and finishes it before its commit. With a
//! repository quota the guard locks the repository's row (writers to it are counted one after
//! another) and sums its assets before and after; one that takes the use past the hard limit is
//! refused with 507 and stores nothing (its blobs are discarded as any refusal's). The blob
//! store's use counts pending uploads too (their rows are written as their bytes are), so two
//! concurrent uploads are refused rather than both admitted; a write that adds no new blob
//! (its bytes were stored already) is never refused by the blob store's quota. Deletes,
//! cleanup, reads and the worker's index snapshots are never refused: a delete frees room for
//! the next upload at once, as its transaction commits. Crossing a soft limit upwards enqueues
//! a `quota.exceeded` webhook event in the write's transaction; the gauges
//! (`packyard_quota_*`) follow every write this process makes and the worker's count.

use packyard_model::quota::{Quota, Standing};
use packyard_model::repos::Repository;
use packyard_store::db::{Db, DbResult};

use crate::hosted::{Tx, TxError, UploadError};
use crate::services::Services;

/// The one blob store's name (Nexus's, in its API and in the gauges).
pub const BLOB_STORE: &str = "default";

/// A quota's scope in the gauges and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Repository,
    BlobStore,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Repository => "repository",
            Self::BlobStore => "blob_store",
        }
    }

    /// `repository q`, `blob store default`: how messages name what has the quota.
    pub fn named(self, name: &str) -> String {
        match self {
            Self::Repository => format!("repository {name}"),
            Self::BlobStore => format!("blob store {name}"),
        }
    }
}

/// A write's check: taken in its transaction before its rows ([`Guard::begin`]), finished before
/// its commit ([`Guard::finish`]).
#[derive(Debug)]
pub struct Guard {
    /// The repository's quota and what it used before the write.
    repository: Option<(Quota, u64)>,
}

/// What a finished check counted: shown in the gauges once the write commits.
#[derive(Debug, Default)]
#[must_use]
pub struct Counted {
    repository: Option<(Quota, u64)>,
    blob_store: Option<u64>,
}

impl Guard {
    /// Locks `repo`'s row and reads its use, when it has a quota.
    pub async fn begin(db: &Db, tx: &mut Tx<'_>, repo: &Repository) -> DbResult<Self> {
        let repository = match repo.quota() {
            Some(q) => Some((*q, db.quota_use_in(tx, repo.id).await?)),
            None => None,
        };
        Ok(Self { repository })
    }

    /// After the write's rows, before its commit: refuses a write that takes a use past its hard
    /// limit, and tells of one that crosses a soft limit. `created`: the bytes of the blobs the
    /// write added to the store (none when they were there already).
    pub async fn finish(
        self,
        services: &Services,
        tx: &mut Tx<'_>,
        repo: &Repository,
        created: u64,
    ) -> Result<Counted, TxError> {
        let db = &services.db;
        let mut counted = Counted::default();
        if let Some((quota, before)) = self.repository {
            let after = db.repository_bytes_in(tx, repo.id).await?;
            let what = Scope::Repository.named(repo.name.as_str());
            if quota.refuses(before, after) {
                return Err(TxError::Refused(UploadError::InsufficientStorage(
                    quota.refusal(&what, "quota", before, after),
                )));
            }
            if quota.crosses_soft(before, after) {
                exceeded(db, tx, (Scope::Repository, repo.name.as_str()), &quota, after).await?;
            }
            counted.repository = Some((quota, after));
        }
        let store = services.config.blobs.quota;
        if store.is_set() {
            let after = db.blob_store_bytes_in(tx).await?;
            let before = after.saturating_sub(created);
            if store.refuses(before, after) {
                let what = Scope::BlobStore.named(BLOB_STORE);
                return Err(TxError::Refused(UploadError::InsufficientStorage(store.refusal(
                    &what,
                    "blobs.quota",
                    before,
                    after,
                ))));
            }
            if store.crosses_soft(before, after) {
                exceeded(db, tx, (Scope::BlobStore, BLOB_STORE), &store, after).await?;
            }
            counted.blob_store = Some(after);
        }
        Ok(counted)
    }
}

impl Counted {
    /// Shows what was counted in the gauges (after the commit).
    pub fn show(&self, services: &Services, repo: &Repository) {
        if let Some((quota, used)) = self.repository {
            gauges(services, (Scope::Repository, repo.name.as_str()), &quota, used);
        }
        if let Some(used) = self.blob_store {
            gauges(services, (Scope::BlobStore, BLOB_STORE), &services.config.blobs.quota, used);
        }
    }
}

/// The `quota.exceeded` event of a use that went past its soft limit, in the write's
/// transaction.
async fn exceeded(db: &Db, tx: &mut Tx<'_>, (scope, name): (Scope, &str), quota: &Quota, used: u64) -> DbResult<()> {
    let payload = serde_json::json!({
        "scope": scope.as_str(),
        "name": name,
        "used_bytes": used,
        "soft_bytes": quota.soft_bytes,
        "hard_bytes": quota.hard_bytes,
        "message": quota.describe(&scope.named(name), used),
    });
    let repository = (scope == Scope::Repository).then_some(name);
    db.enqueue_webhook_event_in(tx, "quota.exceeded", repository, &payload.to_string()).await?;
    Ok(())
}

/// Sets the gauges of one quota — in the process that runs the worker's usage count (every
/// `worker.usage_refresh_secs`, embedded or standalone); a replica without it exposes none, so
/// that its last write's count never outlives a delete another process made.
pub fn gauges(services: &Services, (scope, name): (Scope, &str), quota: &Quota, used: u64) {
    if !services.counts_usage() {
        return;
    }
    let m = &services.metrics;
    let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    m.quota_used_bytes.with_label_values(&[scope.as_str(), name]).set(as_i64(used));
    for (limit, v) in [("soft", quota.soft_bytes), ("hard", quota.hard_bytes)] {
        match v {
            Some(v) => m.quota_limit_bytes.with_label_values(&[scope.as_str(), name, limit]).set(as_i64(v)),
            None => {
                let _ = m.quota_limit_bytes.remove_label_values(&[scope.as_str(), name, limit]);
            }
        }
    }
    let standing = match quota.standing(used) {
        Standing::Within => 0,
        Standing::Soft => 1,
        Standing::Hard => 2,
    };
    m.quota_standing.with_label_values(&[scope.as_str(), name]).set(standing);
}

/// Where a repository or the blob store stands against its quota, as the API and the UI show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Status {
    pub scope: &'static str,
    pub name: String,
    pub used_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_bytes: Option<u64>,
    pub standing: Standing,
    pub message: String,
}

impl Status {
    fn of((scope, name): (Scope, &str), quota: &Quota, used: u64) -> Self {
        Self {
            scope: scope.as_str(),
            name: name.to_string(),
            used_bytes: used,
            soft_bytes: quota.soft_bytes,
            hard_bytes: quota.hard_bytes,
            standing: quota.standing(used),
            message: quota.describe(&scope.named(name), used),
        }
    }

    /// Past the soft limit or at the hard one.
    pub fn warns(&self) -> bool {
        self.standing != Standing::Within
    }
}

/// `repo`'s quota status now (`None`: it has no quota), and its gauges set.
pub async fn repository_status(services: &Services, repo: &Repository) -> DbResult<Option<Status>> {
    let Some(quota) = repo.quota() else { return Ok(None) };
    let used = services.db.repository_bytes(repo.id).await?;
    gauges(services, (Scope::Repository, repo.name.as_str()), quota, used);
    Ok(Some(Status::of((Scope::Repository, repo.name.as_str()), quota, used)))
}

/// The blob store's quota status now (`None`: it has no quota), and its gauges set.
pub async fn blob_store_status(services: &Services) -> DbResult<Option<Status>> {
    let quota = services.config.blobs.quota;
    if !quota.is_set() {
        return Ok(None);
    }
    let used = u64::try_from(services.db.blob_store_bytes().await?).unwrap_or(0);
    gauges(services, (Scope::BlobStore, BLOB_STORE), &quota, used);
    Ok(Some(Status::of((Scope::BlobStore, BLOB_STORE), &quota, used)))
}

/// The bytes of the blobs in `stored` that the write added to the store.
pub fn created<'a>(stored: impl IntoIterator<Item = &'a packyard_store::blobs::StoredBlob>) -> u64 {
    stored.into_iter().filter(|s| s.created).map(|s| s.size).sum()
}

/// After a delete from `repo`: its gauges follow at once (the next write's check reads the use
/// itself). The blob store's use falls when the collector removes the blobs nothing holds.
pub async fn after_delete(services: &Services, repo: &Repository) {
    if repo.quota().is_none() {
        return;
    }
    if let Err(e) = repository_status(services, repo).await {
        tracing::warn!(repository = %repo.name, error = %e, "cannot count the repository's use after a delete");
    }
}
