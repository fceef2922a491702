//! Group resolution, written once: a group's members in order (of the group's format, those
//! that still exist), one bound on how deep nested groups are followed, cycles refused (they are
//! refused when a group is defined, and the bound stops one that slipped through).

use std::sync::Arc;

pub mod incremental;

use packyard_model::repos::Repository;
use packyard_store::db::DbError;

use crate::services::Services;

/// Deepest group nesting followed.
pub const MAX_DEPTH: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// A member the group lists is gone (deleted since).
    #[error("group member {0} is gone")]
    Gone(String),
    /// Nesting deeper than [`MAX_DEPTH`] (or a cycle).
    #[error("group {0} nests deeper than {MAX_DEPTH} levels")]
    TooDeep(String),
    /// The group's snapshot of a unit is still being built (its first request waited 30 s).
    #[error("{0}")]
    Building(String),
    /// A member's upstream could not be asked.
    #[error("{0}")]
    Upstream(String),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Refuses to go deeper than [`MAX_DEPTH`] below `group`.
pub fn check_depth(group: &Repository, depth: usize) -> Result<(), GroupError> {
    if depth > MAX_DEPTH {
        return Err(GroupError::TooDeep(group.name.to_string()));
    }
    Ok(())
}

/// The member `name` of `group`, `depth` levels below the group a request named.
pub async fn member(
    services: &Services,
    group: &Repository,
    name: &str,
    depth: usize,
) -> Result<Arc<Repository>, GroupError> {
    check_depth(group, depth)?;
    services.security.repository(name).await?.ok_or_else(|| GroupError::Gone(name.to_string()))
}

/// The members of `group` in order: those that exist and share its format.
pub async fn members(
    services: &Services,
    group: &Repository,
    depth: usize,
) -> Result<Vec<Arc<Repository>>, GroupError> {
    check_depth(group, depth)?;
    let mut out = Vec::with_capacity(group.members.len());
    for name in &group.members {
        if let Some(m) = services.security.repository(name).await? {
            if m.format == group.format {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// A group's unit asked for the first time (a branch, a module, a reference no snapshot of the
/// group covers yet): when `member_has` says a member has it, its publication is requested and
/// waited for (up to 30 s), so that a client needs no set-up per unit. True when the unit is
/// published now.
pub async fn publish_on_first_request<F, Fut>(
    services: &Services,
    group: &Repository,
    kind: &str,
    key: &str,
    member_has: F,
) -> Result<bool, GroupError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<bool, GroupError>>,
{
    // Boxed: a whole merge's state is large, and the warm reads beside it should not carry it.
    Box::pin(first_request(services, group, kind, key, member_has)).await
}

async fn first_request<F, Fut>(
    services: &Services,
    group: &Repository,
    kind: &str,
    key: &str,
    member_has: F,
) -> Result<bool, GroupError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<bool, GroupError>>,
{
    let db = &services.db;
    if db.unit_by_key(group.id, kind, key).await?.is_none() {
        if !member_has().await? {
            return Ok(false);
        }
        // Due at once: the request waits for it.
        let units = [(kind.to_string(), key.to_string())];
        db.request_rebuilds(group.id, &units, services.config.worker.debounce_ms).await?;
        services.wake();
    }
    let Some(u) = db.unit_by_key(group.id, kind, key).await? else { return Ok(false) };
    if u.current_snapshot_id.is_none() {
        let timeout = std::time::Duration::from_secs(30);
        if !crate::publication::wait_until_published(
            db,
            Some(services.published.publications()),
            u.id,
            u.desired_revision,
            timeout,
        )
        .await?
        {
            return Err(GroupError::Building(format!(
                "group {} is building its {key} snapshot; retry shortly",
                group.name
            )));
        }
    }
    services.published.invalidate();
    Ok(true)
}

// --- at publication time ---------------------------------------------------------------------

use std::collections::BTreeMap;

use bytes::Bytes;
use packyard_model::repos::{Format, RepoType};
use packyard_store::blobs::{BlobStore, Sha256Hex};
use packyard_store::db::publication::{SnapshotFile, UnitRecord};
use packyard_store::db::Db;

use crate::proxy::{FetchRequest, Outcome, Proxy, ProxyError};
use crate::publication::{BuildError, Builders};

/// What a group's build reads its members with: the blob store (members' published files, and
/// what the proxy cached) and the proxy client (proxy members' upstreams).
#[derive(Clone)]
pub struct Reader {
    pub blobs: Arc<dyn BlobStore>,
    /// `None` in a worker without one: a group with proxy members then fails to build.
    pub proxy: Option<Proxy>,
}

impl Reader {
    /// The reader of a process's services (a replica's first requests, an embedded worker).
    pub fn of(services: &Services) -> Self {
        Self { blobs: services.blobs.clone(), proxy: Some(services.proxy.clone()) }
    }

    /// Proxy `member`'s answer to `request` through the proxy cache: the blob's `(SHA-256,
    /// size)`, or `None` when the upstream says it is not there.
    pub async fn fetch(
        &self,
        member: &Repository,
        request: Result<FetchRequest, ProxyError>,
    ) -> Result<Option<(String, i64)>, BuildError> {
        let proxy = self.proxy.as_ref().ok_or_else(|| BuildError::other("no proxy client in this worker"))?;
        let request = request.map_err(|e| BuildError::other(format!("member {}: {e}", member.name)))?;
        let failed = |e: ProxyError| {
            let status = match &e {
                ProxyError::Timeout(_) => 504,
                ProxyError::Unreachable(_) | ProxyError::Failing(_) => 502,
                _ => return BuildError::other(format!("member {}: {e}", member.name)),
            };
            BuildError::MemberFailed { member: member.name.to_string(), status, message: e.to_string() }
        };
        match proxy.fetch(request).await.map_err(failed)? {
            Outcome::Found(entry, _) => Ok(entry.sha256.map(|s| (s, entry.size))),
            Outcome::Missing(..) => Ok(None),
        }
    }

    /// Whether proxy `member` still has a file a merge carries forward (`BuildGate::unsettled`),
    /// fetched into its cache now (where it outlives the upstream's copy): its `(SHA-256,
    /// size)`, or `None` when the upstream no longer has it — a 404, or any refusal (logged).
    /// An upstream that cannot be asked now fails the build (retried, the last snapshot kept).
    pub async fn still_there(
        &self,
        member: &Repository,
        request: Result<FetchRequest, ProxyError>,
    ) -> Result<Option<(String, i64)>, BuildError> {
        match self.fetch(member, request).await {
            Err(e @ BuildError::MemberFailed { .. }) => Err(e),
            Err(e) => {
                tracing::info!(member = %member.name, error = %e, "not carried forward");
                Ok(None)
            }
            got => got,
        }
    }

    /// Why a merge did not carry forward a file of proxy `member` that [`Reader::still_there`]
    /// did not find: an offline proxy asks no upstream, so only a cached copy counts.
    pub fn not_carried_because(member: &Repository) -> &'static str {
        if member.settings.proxy.as_ref().is_some_and(|p| p.offline) {
            "not carried forward: the proxy is offline (proxy.offline) and holds no cached copy as listed"
        } else {
            "not carried forward: the upstream no longer has it as listed"
        }
    }

    /// A member's file: a hosted or group member's published `path` of `(kind, unit_key)`, a
    /// proxy member's answer to `upstream` (the same file as its upstream names it).
    pub async fn file(
        &self,
        db: &Db,
        member: &Repository,
        (kind, unit_key, path): (&str, &str, &str),
        upstream: impl FnOnce() -> Result<FetchRequest, ProxyError>,
    ) -> Result<Option<(String, i64)>, BuildError> {
        match member.repo_type {
            RepoType::Proxy => self.fetch(member, upstream()).await,
            RepoType::Hosted | RepoType::Group => {
                Ok(published_entry(db, member, kind, unit_key, path).await?.map(|f| (f.sha256, f.size)))
            }
        }
    }

    pub async fn bytes(&self, sha256: &str) -> Result<Bytes, BuildError> {
        Ok(self.blobs.read_all(&Sha256Hex::parse(sha256)?).await?)
    }

    /// A published snapshot file's bytes (a composite one's parts joined).
    pub async fn snapshot_bytes(&self, file: &SnapshotFile) -> Result<Bytes, BuildError> {
        Ok(crate::publication::read_file(self.blobs.as_ref(), file).await?)
    }

    pub async fn text(&self, sha256: &str) -> Result<String, BuildError> {
        Ok(String::from_utf8_lossy(&self.bytes(sha256).await?).into_owned())
    }
}

/// The hosted and proxy repositories a group serves, nested groups followed (each once).
pub fn leaf_members(
    group: &Repository,
    by_name: &std::collections::HashMap<String, std::sync::Arc<Repository>>,
) -> Vec<std::sync::Arc<Repository>> {
    let mut out: Vec<std::sync::Arc<Repository>> = Vec::new();
    let mut seen = vec![group.name.to_string()];
    let mut queue: Vec<String> = group.members.iter().map(|m| m.to_string()).collect();
    while let Some(name) = queue.pop() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let Some(m) = by_name.get(&name) else { continue };
        if m.format != group.format {
            continue;
        }
        match m.repo_type {
            RepoType::Group => queue.extend(m.members.iter().map(|n| n.to_string())),
            _ => out.push(m.clone()),
        }
    }
    out
}

/// A group's members in order, as a build reads them: those that exist and share its format.
pub async fn members_of(db: &Db, group: &Repository) -> Result<Vec<Repository>, BuildError> {
    // A proxy that merges (its policy filters its upstream's index) is its own one member.
    if group.repo_type == RepoType::Proxy {
        return Ok(vec![group.clone()]);
    }
    let mut out = Vec::with_capacity(group.members.len());
    for name in &group.members {
        if let Some(m) = db.repository_by_name(name).await? {
            if m.format == group.format {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// Whether a member of `group` (nested groups followed) has the unit `(kind, key)`: a hosted
/// member published it, or `proxy_has` says a proxy member's upstream has it. A group publishes
/// a unit on its first request only when one does.
pub async fn any_member_has<F, Fut>(
    db: &Db,
    group: &Repository,
    kind: &str,
    key: &str,
    proxy_has: F,
) -> Result<bool, BuildError>
where
    F: Fn(Repository) -> Fut,
    Fut: std::future::Future<Output = Result<bool, BuildError>>,
{
    let mut groups = vec![(group.clone(), 0)];
    // A member whose upstream fails does not stop the others from being asked; when none has
    // the unit, its failure is the answer.
    let mut failure = None;
    while let Some((g, depth)) = groups.pop() {
        check_depth(&g, depth).map_err(BuildError::other)?;
        for member in members_of(db, &g).await? {
            let found = match member.repo_type {
                RepoType::Hosted => db.unit_by_key(member.id, kind, key).await?.is_some(),
                RepoType::Proxy => match proxy_has(member).await {
                    Err(e @ BuildError::MemberFailed { .. }) => {
                        failure.get_or_insert(e);
                        false
                    }
                    other => other?,
                },
                RepoType::Group => {
                    groups.push((member, depth + 1));
                    false
                }
            };
            if found {
                return Ok(true);
            }
        }
    }
    failure.map_or(Ok(false), Err)
}

/// After a member's `unit` was published: for every group of `format` that lists the member,
/// the units `units(group)` names (the same unit, or — APT — each distribution the group
/// publishes), to rebuild. Their own publications then reach the groups above them.
pub async fn after_member_publish(
    db: &Db,
    unit: &UnitRecord,
    format: Format,
    units: impl Fn(&Repository) -> Vec<(String, String)>,
) -> Result<crate::publication::Rebuilds, BuildError> {
    let mut out = Vec::new();
    for name in db.groups_containing(unit.repository_id).await? {
        let Some(group) = db.repository_by_name(&name).await? else { continue };
        if group.format != format {
            continue;
        }
        let wanted = units(&group);
        if !wanted.is_empty() {
            out.push((group.id, wanted));
        }
    }
    Ok(out)
}

/// [`after_member_publish`] for formats whose groups publish the same unit as their members.
pub async fn same_unit_after_member_publish(
    db: &Db,
    unit: &UnitRecord,
    format: Format,
) -> Result<crate::publication::Rebuilds, BuildError> {
    after_member_publish(db, unit, format, |_| vec![(unit.kind.clone(), unit.unit_key.clone())]).await
}

/// What a group's snapshot merged from its proxy members: for each, a hash of the upstream
/// metadata it read (`<member> <sha256>` per line, in a hidden snapshot file).
pub type Sources = BTreeMap<String, String>;

pub fn render_sources(sources: &Sources) -> String {
    sources.iter().map(|(m, h)| format!("{m} {h}\n")).collect()
}

pub use crate::publication::SOURCES_FILE;

/// Groups with proxy members: once the shortest `metadata_ttl_secs` among them has passed since
/// a unit's snapshot, the unit is rebuilt if an upstream moved on from what its snapshot merged
/// (as its sources file records; its builder asks the upstreams). An unreachable upstream keeps
/// the snapshot. True when something was requested. Nothing to do for a reader without a proxy
/// client. Gated repositories whose held versions come of age by `policy_now` (the policies'
/// clock) are published again too.
pub async fn refresh(db: &Db, reader: &Reader, builders: &Builders, policy_now: i64) -> Result<bool, BuildError> {
    let all = db.list_repositories().await?;
    let mut any = come_of_age(db, reader, builders, &all, policy_now).await?;
    if reader.proxy.is_none() {
        return Ok(any);
    }
    let now = packyard_store::db::now_ms();
    for group in all.iter().filter(|r| r.publishes_merge()) {
        // A gated proxy publishes its own merge (a group reads that, and follows its
        // publications): it is refreshed as its own one member.
        let proxies: Vec<&Repository> = if group.repo_type == RepoType::Proxy {
            vec![group]
        } else {
            group
                .members
                .iter()
                .filter_map(|m| all.iter().find(|r| r.name.as_str() == m))
                .filter(|m| m.repo_type == RepoType::Proxy)
                .collect()
        };
        let Some(ttl) = proxies.iter().filter_map(|m| m.settings.proxy.as_ref().map(|p| p.metadata_ttl_secs)).min()
        else {
            continue;
        };
        let ttl_ms = i64::try_from(ttl.saturating_mul(1000)).unwrap_or(i64::MAX);
        for unit in db.units_of(group.id).await? {
            let Some(builder) = builders.get(&unit.kind) else { continue };
            let (Some(snapshot), Some(at)) = (unit.current_snapshot_id, unit.last_published_at) else { continue };
            if unit.published_revision < unit.desired_revision || now.saturating_sub(at) < ttl_ms {
                continue;
            }
            let path = builder.sources_path(&unit.unit_key);
            let recorded = match db.snapshot_files(snapshot).await?.into_iter().find(|f| f.path == path) {
                Some(f) => reader.text(&f.sha256).await?,
                None => String::new(),
            };
            let mut current = Sources::new();
            let mut unreachable = false;
            // A gated proxy of a kind that publishes its policy's verdicts publishes its own
            // filtered index, which the group merges (and follows its publications).
            let merges_itself = |m: &Repository| {
                m.id != group.id && m.gate().is_some() && builder.policy_path(&unit.unit_key).is_some()
            };
            for m in proxies.iter().filter(|m| !merges_itself(m)) {
                match builder.upstream_source(m, &unit.unit_key).await {
                    Ok(Some(sha)) => {
                        current.insert(m.name.to_string(), sha);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // Keep the current snapshot; the other groups are still checked.
                        tracing::warn!(group = %group.name, member = %m.name, error = %e, "cannot check a proxy member's upstream");
                        unreachable = true;
                    }
                }
            }
            if !unreachable && render_sources(&current) != recorded {
                db.request_changes(group.id, &[(unit.kind.clone(), unit.unit_key.clone())]).await?;
                any = true;
            }
        }
    }
    Ok(any)
}

/// A gated proxy member publishes what its policy lets through before a group merges it: when
/// it has not published `(kind, unit)` yet, its publication is requested and the group's build
/// fails with this error (it is retried, and the proxy's publication brings the group's again) —
/// a group never merges such a member's upstream unfiltered nor leaves it out.
pub async fn gated_member_unpublished(db: &Db, member: &Repository, kind: &str, unit: &str) -> BuildError {
    if let Err(e) = db.request_changes(member.id, &[(kind.to_string(), unit.to_string())]).await {
        return e.into();
    }
    BuildError::other(format!(
        "member {} (a proxy with a policy) has not published {unit} yet: its publication was requested, and this one is retried",
        member.name
    ))
}

/// When each gated snapshot's policy report first comes due ([`come_of_age`]), by snapshot id.
static DUE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<i64, Option<i64>>>> =
    std::sync::LazyLock::new(Default::default);

/// Gated repositories whose published snapshot held a version back for its age until a time
/// that has come (`now`, the policies' clock): their unit is published again, with it. True
/// when something was requested.
async fn come_of_age(
    db: &Db,
    reader: &Reader,
    builders: &Builders,
    all: &[Repository],
    now: i64,
) -> Result<bool, BuildError> {
    let mut any = false;
    for repo in all.iter().filter(|r| r.gate().is_some()) {
        for unit in db.units_of(repo.id).await? {
            let Some(path) = builders.get(&unit.kind).and_then(|b| b.policy_path(&unit.unit_key)) else { continue };
            let Some(snapshot) = unit.current_snapshot_id else { continue };
            if unit.published_revision < unit.desired_revision {
                continue;
            }
            // A snapshot never changes: its report is read and parsed once per process.
            let due = match DUE.lock().ok().and_then(|m| m.get(&snapshot).copied()) {
                Some(due) => due,
                None => {
                    let due = match db.snapshot_files(snapshot).await?.into_iter().find(|f| f.path == path) {
                        Some(file) => crate::policy::Report::parse(&reader.text(&file.sha256).await?).due(),
                        None => None,
                    };
                    if let Ok(mut m) = DUE.lock() {
                        if m.len() >= 10_000 {
                            m.clear();
                        }
                        m.insert(snapshot, due);
                    }
                    due
                }
            };
            if due.is_some_and(|due| due <= now) {
                db.request_changes(repo.id, &[(unit.kind.clone(), unit.unit_key.clone())]).await?;
                any = true;
            }
        }
    }
    Ok(any)
}

/// A hidden snapshot file of a group naming the members that failed while it was merged (their
/// upstream unreachable, timing out or answering 5xx): `<member> <status>` per line; empty when
/// every member answered. Served as `X-Packyard-Member-Failed` with the group's lists.
pub const FAILED_FILE: &str = ".failed";

/// The members a merge went on without, as [`FAILED_FILE`] holds them.
#[derive(Debug, Default)]
pub struct Failed(Vec<(String, u16)>);

impl Failed {
    /// Passes `result` through, except a member's failure, which is recorded as `None` (the
    /// merge goes on without the member).
    pub fn tolerate<T>(&mut self, result: Result<Option<T>, BuildError>) -> Result<Option<T>, BuildError> {
        match result {
            Err(BuildError::MemberFailed { member, status, message }) => {
                tracing::warn!(member = %member, error = %message, "a group member failed; merged without it");
                self.record(member, status);
                Ok(None)
            }
            other => other,
        }
    }

    /// Records that `member` failed with `status` (once per member).
    pub fn record(&mut self, member: String, status: u16) {
        if !self.0.iter().any(|(m, _)| *m == member) {
            self.0.push((member, status));
        }
    }

    /// The failed members' names, comma-separated.
    pub fn names(&self) -> String {
        self.0.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>().join(", ")
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn render(&self) -> String {
        self.0.iter().map(|(m, s)| format!("{m} {s}\n")).collect()
    }

    /// The header value of a [`FAILED_FILE`] text (`member: status, …`), `None` when empty.
    pub fn header_of(text: &str) -> Option<String> {
        let named: Vec<String> =
            text.lines().filter_map(|l| l.split_once(' ')).map(|(m, s)| format!("{m}: {}", s.trim())).collect();
        (!named.is_empty()).then(|| named.join(", "))
    }

    /// Every member failed and none answered: the merge fails (the snapshot before it stays).
    pub fn none_answered(&self, answered: usize) -> Result<(), BuildError> {
        match self.0.first() {
            Some((member, status)) if answered == 0 => Err(BuildError::MemberFailed {
                member: member.clone(),
                status: *status,
                message: format!("no member answered ({} failed)", self.names()),
            }),
            _ => Ok(()),
        }
    }
}

/// Where a group's snapshot keeps its [`members_map`] (hidden: a client never asks for it).
pub const MEMBERS_FILE: &str = ".members";

/// A hidden snapshot file mapping each item a group lists (a package file, a version) to the
/// member that provided it: `<item> <member>` per line.
pub fn members_map(entries: &[(String, String)]) -> String {
    entries.iter().map(|(item, member)| format!("{item} {member}\n")).collect()
}

/// The member that provided `item` according to a [`members_map`] text.
pub fn member_of<'a>(map: &'a str, item: &str) -> Option<&'a str> {
    map.lines().find_map(|l| l.split_once(' ').filter(|(i, _)| *i == item).map(|(_, m)| m))
}

/// A file of a member's current snapshot of `(kind, unit_key)`, as a build reads it (its blob,
/// size and type), or `None` when the member has not published it.
pub async fn published_entry(
    db: &Db,
    member: &Repository,
    kind: &str,
    unit_key: &str,
    path: &str,
) -> Result<Option<SnapshotFile>, BuildError> {
    let Some(UnitRecord { current_snapshot_id: Some(snapshot), .. }) =
        db.unit_by_key(member.id, kind, unit_key).await?
    else {
        return Ok(None);
    };
    Ok(db.snapshot_files(snapshot).await?.into_iter().find(|f| f.path == path))
}

/// Read-your-writes through groups. A member's publication requests the rebuilds of the groups
/// over it in its own transaction (`Db::publish_snapshot`), so once the member's unit is seen
/// published, each of those group units has a desired revision that only a build started after
/// it reaches. This waits (until `deadline`) for every such unit to be published at the revision
/// it has then — level by level, so that a nested group is read after the group below it has
/// published. The units waited for in a group: the member unit's key, or, where the group has
/// none (APT, whose groups publish their own distributions), each of its units of the kind. A
/// unit whose build is failing is not waited for. False when the deadline passed first.
pub async fn wait_for_groups(db: &Db, published: &UnitRecord, deadline: tokio::time::Instant) -> Result<bool, DbError> {
    let mut level = vec![published.repository_id];
    let mut seen = std::collections::HashSet::new();
    for _ in 0..=MAX_DEPTH {
        let mut next = Vec::new();
        for member in level {
            for name in db.groups_containing(member).await? {
                let Some(group) = db.repository_by_name(&name).await? else { continue };
                if !seen.insert(group.id) {
                    continue;
                }
                let units: Vec<UnitRecord> =
                    db.units_of(group.id).await?.into_iter().filter(|u| u.kind == published.kind).collect();
                let same: Vec<&UnitRecord> = units.iter().filter(|u| u.unit_key == published.unit_key).collect();
                let targets = if same.is_empty() { units.iter().collect() } else { same };
                for u in targets {
                    if !published_or_failing(db, u.id, u.desired_revision, deadline).await? {
                        return Ok(false);
                    }
                }
                next.push(group.id);
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(true)
}

/// Waits until unit `id` is published at `revision` (true), its build fails (true: not waited
/// for), or the deadline passes (false).
async fn published_or_failing(
    db: &Db,
    id: i64,
    revision: i64,
    deadline: tokio::time::Instant,
) -> Result<bool, DbError> {
    let mut delay = std::time::Duration::from_millis(5);
    loop {
        match db.unit(id).await? {
            None => return Ok(true),
            Some(u) if u.published_revision >= revision || (u.attempts > 0 && u.last_error.is_some()) => {
                return Ok(true)
            }
            Some(_) => {}
        }
        if tokio::time::Instant::now() + delay > deadline {
            return Ok(false);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(std::time::Duration::from_millis(50));
    }
}
