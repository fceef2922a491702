//! The publication pipeline's shared half (DESIGN §6): what a format supplies (a [`Builder`]),
//! how a build writes its files ([`BuildContext`]), and how replicas read published snapshots
//! ([`cache::PublishedCache`]). The worker crate runs builds; writers call
//! [`packyard_store::db::Db::record_change`] inside their transaction and [`Wakeup::notify`] after commit.

use std::sync::Arc;

use async_trait::async_trait;

use packyard_model::repos::Repository;
use packyard_store::blobs::{BlobError, BlobStore, BlobWrite, Sha256Hex};
use packyard_store::db::publication::{SnapshotFile, UnitRecord, PARTS};
use packyard_store::db::{Db, DbError};

pub mod cache;
pub mod work;

/// Why a build failed; recorded as the unit's `last_error` and retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error("{0}")]
    Other(String),
    /// A group member's upstream failed — unreachable, timing out (504), answering 5xx (502) —
    /// rather than refusing: a merge may go on with the members that answered.
    #[error("member {member}: {message}")]
    MemberFailed { member: String, status: u16, message: String },
    /// What the build would publish does not read back with the format's own parser (a row
    /// stored before its upload was checked this way): nothing is published, the unit keeps its
    /// last good snapshot. `reason` names the kind of file for the metric.
    #[error("refused to publish: {message}")]
    Refused { reason: &'static str, message: String },
}

impl BuildError {
    pub fn other(e: impl std::fmt::Display) -> Self {
        Self::Other(e.to_string())
    }
}

/// The repository `unit` belongs to, which a build is for: a hosted repository, a group, or a
/// proxy with a policy (it publishes what the policy lets through; one without publishes
/// nothing).
pub async fn repository_of(db: &Db, unit: &UnitRecord) -> Result<Repository, BuildError> {
    let repo = db
        .repository_by_id(unit.repository_id)
        .await?
        .ok_or_else(|| BuildError::Other(format!("repository {} is gone", unit.repository_id)))?;
    if repo.repo_type == packyard_model::repos::RepoType::Proxy && !repo.publishes_merge() {
        return Err(BuildError::Other(format!("proxy repository {} publishes nothing", repo.name)));
    }
    Ok(repo)
}

/// Units to rebuild: per repository id, its `(kind, unit key)`s.
pub type Rebuilds = Vec<(i64, Vec<(String, String)>)>;

/// What a format supplies: the files of one publication unit, built from its rows.
#[async_trait]
pub trait Builder: Send + Sync {
    /// Writes every file of a hosted repository's unit through `ctx`. Must stream rows in
    /// bounded pages.
    async fn build(&self, ctx: &mut BuildContext<'_>, repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError>;
    /// Writes a group's unit, merged from its members' records at publication time (the
    /// worker calls this instead of `build` for a group).
    async fn merge(
        &self,
        _ctx: &mut BuildContext<'_>,
        group: &Repository,
        unit: &UnitRecord,
    ) -> Result<(), BuildError> {
        Err(BuildError::Other(format!("group {} cannot merge units of kind {:?}", group.name, unit.kind)))
    }
    /// Publishes again `files` — what the hosted unit had published when a repository snapshot
    /// was made, which it is pointed at ([`crate::admin::rollback`]) — as its current index,
    /// signed anew (a new date, the repository's current key), so that clients that saw a later
    /// index take it. A kind that cannot says so.
    async fn republish(
        &self,
        _ctx: &mut BuildContext<'_>,
        repo: &Repository,
        unit: &UnitRecord,
        _files: Vec<SnapshotFile>,
    ) -> Result<(), BuildError> {
        Err(BuildError::Other(format!(
            "{} {} of repository {} cannot be pointed at a snapshot",
            unit.kind, unit.unit_key, repo.name
        )))
    }
    /// The rebuilds that depend on `unit` (e.g. the groups that merge it), which the worker
    /// requests in the transaction that publishes it, due at once (the member's writes were
    /// debounced already).
    async fn after_publish(&self, _db: &Db, _unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        Ok(Vec::new())
    }
    /// For a group with proxy members: a hash of what proxy `member`'s upstream has for
    /// `unit_key` now (`None`: nothing), as the group's snapshot records it in its sources file;
    /// once the members' metadata TTL has passed, the worker rebuilds a unit whose upstreams
    /// moved on ([`crate::groups::refresh`]). A kind whose groups merge no upstream has none.
    async fn upstream_source(&self, _member: &Repository, _unit_key: &str) -> Result<Option<String>, BuildError> {
        Ok(None)
    }
    /// Where a group's snapshot of `unit_key` records its sources.
    fn sources_path(&self, _unit_key: &str) -> String {
        SOURCES_FILE.to_string()
    }
    /// Where a gated snapshot of `unit_key` records what its repository's policy held back
    /// ([`crate::policy::Report`]); `None` for a kind that applies no policy when it publishes.
    fn policy_path(&self, _unit_key: &str) -> Option<String> {
        None
    }
}

/// Where a group's snapshot records what it merged from upstreams unless its builder says
/// otherwise.
pub const SOURCES_FILE: &str = ".sources";

/// Where a build writes its files: each goes to the blob store as it is produced.
pub struct BuildContext<'a> {
    pub db: &'a Db,
    blobs: &'a dyn BlobStore,
    files: Vec<SnapshotFile>,
    /// The parts listed so far (each once).
    parts: std::collections::HashSet<String>,
    /// The blobs this build wrote, recorded together when it finishes ([`BuildContext::finish`]).
    written: Vec<(Sha256Hex, u64)>,
    /// Records a group merge left out because they do not parse: by member, how many and the
    /// first reason.
    skipped: std::collections::BTreeMap<String, (u64, String)>,
    /// Made from nothing: nothing of the last build is carried over.
    whole: bool,
    /// The snapshot this build follows (its unit's current one, [`BuildContext::following`]).
    follows: Option<i64>,
    /// That snapshot's blobs (digest → size), read on the first [`BuildContext::put`].
    previous: Option<std::collections::HashMap<String, i64>>,
    /// The blobs of that snapshot listed again, found in the store as they were.
    listed_again: std::collections::HashSet<String>,
}

impl<'a> BuildContext<'a> {
    pub fn new(db: &'a Db, blobs: &'a dyn BlobStore) -> Self {
        Self {
            db,
            blobs,
            files: Vec::new(),
            parts: std::collections::HashSet::new(),
            written: Vec::new(),
            skipped: std::collections::BTreeMap::new(),
            whole: false,
            follows: None,
            previous: None,
            listed_again: std::collections::HashSet::new(),
        }
    }

    /// The snapshot this build follows, its unit's current one: a small file
    /// ([`BuildContext::put`]) whose bytes one of its files holds is listed again rather than
    /// written again — a Go module's `.info` files, of which a new version changes none, cost
    /// a write and two `fsync`s each otherwise. Not in a build made from nothing.
    pub fn following(mut self, snapshot: Option<i64>) -> Self {
        self.follows = snapshot;
        self
    }

    /// A build made from nothing (an administrator's rebuild, [`Claim::whole`]): an
    /// incremental builder continues no earlier snapshot ([`BuildContext::continues`]).
    ///
    /// [`Claim::whole`]: packyard_store::db::publication::Claim::whole
    pub fn from_nothing(mut self, whole: bool) -> Self {
        self.whole = whole;
        self
    }

    /// The snapshot an incremental build of `unit` may continue: its current one, unless this
    /// build is made from nothing.
    pub fn continues(&self, unit: &UnitRecord) -> Option<i64> {
        if self.whole {
            None
        } else {
            unit.current_snapshot_id
        }
    }

    /// A group merge leaves out a record of `member` that its clients could not read (`why`):
    /// the worker counts it (`packyard_group_records_skipped_total`) and logs the first reason.
    pub fn skip(&mut self, member: &str, why: impl FnOnce() -> String) {
        match self.skipped.get_mut(member) {
            Some((n, _)) => *n += 1,
            None => {
                self.skipped.insert(member.to_string(), (1, why()));
            }
        }
    }

    /// What [`BuildContext::skip`] left out: member → (count, first reason).
    pub fn skipped(&self) -> &std::collections::BTreeMap<String, (u64, String)> {
        &self.skipped
    }

    /// Starts a file; write to the sink and `finish` it to add it to the snapshot.
    pub async fn file(&self, path: &str, content_type: &'static str) -> Result<FileSink, BuildError> {
        check_path(path)?;
        Ok(FileSink { path: path.to_string(), content_type, writer: self.blobs.writer(u64::MAX).await? })
    }

    /// Adds a finished file; returns its SHA-256 (hex).
    pub async fn add(&mut self, sink: FileSink) -> Result<String, BuildError> {
        let stored = sink.writer.finish().await?;
        let digest = stored.sha256.to_string();
        self.written.push((stored.sha256, stored.size));
        self.files.push(SnapshotFile {
            path: sink.path,
            sha256: digest.clone(),
            size: i64::try_from(stored.size).unwrap_or(i64::MAX),
            content_type: sink.content_type.to_string(),
        });
        Ok(digest)
    }

    /// The blob store the files go to (and artifacts are read from).
    pub fn blobs(&self) -> &dyn BlobStore {
        self.blobs
    }

    /// Lists an already stored blob (an artifact the snapshot points at) under `path`.
    pub fn reference(&mut self, path: &str, sha256: &str, size: i64, content_type: &str) {
        self.files.push(SnapshotFile {
            path: path.to_string(),
            sha256: sha256.to_string(),
            size,
            content_type: content_type.to_string(),
        });
    }

    /// Lists a file of an earlier snapshot as it was there (its blob; a composite file's part
    /// list, its parts listed once each).
    pub fn keep(&mut self, file: SnapshotFile) {
        if let Some(sha) = file.path.strip_prefix(".parts/") {
            if !self.parts.insert(sha.to_string()) {
                return;
            }
        }
        self.files.push(file);
    }

    /// Stores a finished part of a composite file ([`BuildContext::composite`]) without naming
    /// it; returns its SHA-256 (hex) and size.
    pub async fn part(&mut self, sink: FileSink) -> Result<(String, i64), BuildError> {
        let stored = sink.writer.finish().await?;
        let done = (stored.sha256.to_string(), i64::try_from(stored.size).unwrap_or(i64::MAX));
        self.written.push((stored.sha256, stored.size));
        Ok(done)
    }

    /// Adds `path` as the concatenation of `parts` (blobs stored by [`BuildContext::part`], in
    /// this build or an earlier one): a small part list is stored, named by the file, and each
    /// part is listed in the snapshot under a hidden name (`.parts/<sha256>`), so that retention
    /// and the collector see it referenced. The file's `sha256` is its part list's (its entity
    /// tag: a different content is a different list). Readers join the parts ([`read_file`]).
    pub async fn composite(
        &mut self,
        path: &str,
        content_type: &str,
        parts: &[(String, i64)],
    ) -> Result<String, BuildError> {
        let mut list = String::with_capacity(parts.len() * 72);
        for (sha, size) in parts {
            list.push_str(sha);
            list.push(' ');
            list.push_str(&size.to_string());
            list.push('\n');
        }
        let mut sink = self.file(path, "application/octet-stream").await?;
        sink.write(list.as_bytes()).await?;
        let stored = sink.writer.finish().await?;
        let digest = stored.sha256.to_string();
        self.written.push((stored.sha256, stored.size));
        self.reuse_composite(path, content_type, &digest, parts);
        Ok(digest)
    }

    /// Adds `path` as a composite file whose part list (`list`, of `parts`) an earlier build
    /// stored ([`BuildContext::composite`]).
    pub fn reuse_composite(&mut self, path: &str, content_type: &str, list: &str, parts: &[(String, i64)]) {
        for (sha, size) in parts {
            if self.parts.insert(sha.clone()) {
                self.files.push(SnapshotFile {
                    path: format!(".parts/{sha}"),
                    sha256: sha.clone(),
                    size: *size,
                    content_type: "application/octet-stream".to_string(),
                });
            }
        }
        self.files.push(SnapshotFile {
            path: path.to_string(),
            sha256: list.to_string(),
            size: parts.iter().map(|(_, s)| s).sum(),
            content_type: format!("{PARTS}{content_type}"),
        });
    }

    /// Adds `path` as a second name of an already added file (same bytes, no second write).
    pub fn alias(&mut self, path: &str, of: &str) -> Result<(), BuildError> {
        let original = self
            .files
            .iter()
            .find(|f| f.path == of)
            .cloned()
            .ok_or_else(|| BuildError::Other(format!("alias of {of:?}, which was not added")))?;
        self.files.push(SnapshotFile { path: path.to_string(), ..original });
        Ok(())
    }

    /// Convenience for a small file already in memory. Bytes this build wrote already (a Go
    /// module's `@latest` is its newest version's `.info`), or that the snapshot it follows
    /// holds ([`BuildContext::following`]), are listed again rather than written again.
    pub async fn put(&mut self, path: &str, content_type: &'static str, bytes: &[u8]) -> Result<(), BuildError> {
        check_path(path)?;
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let digest = Sha256Hex::of(bytes);
        if self.written.iter().any(|(d, s)| d == &digest && usize::try_from(*s).ok() == Some(bytes.len())) {
            self.reference(path, digest.as_str(), size, content_type);
            return Ok(());
        }
        if self.unchanged(&digest, size).await {
            self.reference(path, digest.as_str(), size, content_type);
            self.listed_again.insert(digest.to_string());
            return Ok(());
        }
        let mut sink = self.file(path, content_type).await?;
        sink.write(bytes).await?;
        self.add(sink).await.map(|_| ())
    }

    /// Whether the followed snapshot lists the blob `digest` of `size` bytes and it is in the
    /// store. That snapshot is its unit's current one, which the collector never takes, and
    /// this build holds the unit's lease, so no other build replaces it meanwhile; the store is
    /// asked all the same (through the process's cache of small blobs, as `verify_files` asks
    /// it): a blob found lost is written again here, where listing it again would publish the
    /// loss once more. Reading the snapshot's list is an optimisation: should it fail, the
    /// build writes its files, as it would without one.
    async fn unchanged(&mut self, digest: &Sha256Hex, size: i64) -> bool {
        let Some(snapshot) = self.follows.filter(|_| !self.whole) else { return false };
        let previous = match &mut self.previous {
            Some(p) => p,
            none => {
                let listed = match self.db.snapshot_files(snapshot).await {
                    Ok(files) => files.into_iter().map(|f| (f.sha256, f.size)).collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, snapshot, "cannot read the files of the snapshot a build follows; writing every file");
                        std::collections::HashMap::new()
                    }
                };
                none.insert(listed)
            }
        };
        previous.get(digest.as_str()) == Some(&size) && matches!(self.blobs.stat(digest).await, Ok(Some(_)))
    }

    /// The blobs listed again from the followed snapshot ([`BuildContext::put`]): held by that
    /// snapshot, which the collector never takes while it is current, and found in the store
    /// by this build — the worker need not look for them again after publishing.
    pub fn take_listed_again(&mut self) -> std::collections::HashSet<String> {
        std::mem::take(&mut self.listed_again)
    }

    /// The build's files, once the blobs it wrote are recorded — all in one transaction, not
    /// a commit per file (a module's projection is a dozen small files). Until then a blob
    /// the build rewrote over an identical collectable one is not young again, so the collector
    /// may take it meanwhile; the worker checks every published file but those listed again
    /// ([`BuildContext::take_listed_again`]) and rebuilds the unit when one is missing
    /// (`verify_files`).
    pub async fn finish(self) -> Result<Vec<SnapshotFile>, BuildError> {
        self.db.record_snapshot_blobs(&self.written).await?;
        Ok(self.files)
    }
}

/// A snapshot path: relative, no empty, `.` or `..` segment.
fn check_path(path: &str) -> Result<(), BuildError> {
    if path.is_empty() || path.starts_with('/') || path.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err(BuildError::Other(format!("invalid snapshot path {path:?}")));
    }
    Ok(())
}

/// One file being written.
pub struct FileSink {
    path: String,
    content_type: &'static str,
    writer: Box<dyn BlobWrite>,
}

impl FileSink {
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), BuildError> {
        Ok(self.writer.write(bytes).await?)
    }
}

/// The bytes of a snapshot file: its blob, or the parts a composite file lists, joined.
pub async fn read_file(blobs: &dyn BlobStore, file: &SnapshotFile) -> Result<bytes::Bytes, BlobError> {
    let list = blobs.read_all(&Sha256Hex::parse(&file.sha256)?).await?;
    if !file.is_composite() {
        return Ok(list);
    }
    let parts = SnapshotFile::parts_of(&list)
        .ok_or_else(|| BlobError::Io(std::io::Error::other(format!("{}: a malformed part list", file.path))))?;
    let mut out = bytes::BytesMut::with_capacity(usize::try_from(file.size).unwrap_or(0));
    for (sha, _) in parts {
        out.extend_from_slice(&blobs.read_all(&Sha256Hex::parse(&sha)?).await?);
    }
    Ok(out.freeze())
}

/// The set of builders a worker knows, each under the unit kind it builds (the `kind` given to
/// `record_change`).
#[derive(Clone, Default)]
pub struct Builders(Vec<(&'static str, Arc<dyn Builder>)>);

impl Builders {
    pub fn with(mut self, kind: &'static str, b: Arc<dyn Builder>) -> Self {
        self.0.push((kind, b));
        self
    }

    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Builder>> {
        self.0.iter().find(|(k, _)| *k == kind).map(|(_, b)| b)
    }
}

/// Read-your-writes (DESIGN §6): waits until the unit's published revision reaches `revision`,
/// at most `timeout`. True when it did. It looks again whenever `published` tells of a
/// publication (this process's worker, or one another replica announced), and otherwise after
/// 5 ms, doubling up to 50 ms.
pub async fn wait_until_published(
    db: &Db,
    published: Option<&tokio::sync::Notify>,
    unit_id: i64,
    revision: i64,
    timeout: std::time::Duration,
) -> Result<bool, DbError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut delay = std::time::Duration::from_millis(5);
    loop {
        // Listening before looking: a publication between the two is not missed.
        let mut told = std::pin::pin!(published.map(tokio::sync::Notify::notified));
        if let Some(n) = told.as_mut().as_pin_mut() {
            n.enable();
        }
        if let Some(u) = db.unit(unit_id).await? {
            if u.published_revision >= revision {
                return Ok(true);
            }
        }
        if tokio::time::Instant::now() + delay > deadline {
            return Ok(false);
        }
        let told = async {
            match told.as_mut().as_pin_mut() {
                Some(n) => n.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = told => {}
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(std::time::Duration::from_millis(50));
    }
}

/// The in-process wake-up: writers notify after commit; the embedded worker waits on it. (With
/// RabbitMQ configured, the relay also publishes it to other processes.)
#[derive(Default)]
pub struct Wakeup(tokio::sync::Notify);

impl Wakeup {
    pub fn notify(&self) {
        self.0.notify_one();
    }

    pub async fn wait(&self) {
        self.0.notified().await;
    }
}
