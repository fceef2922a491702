//! Cleanup's selection: which components of a repository a policy's criteria select. The walk
//! reads the repository's catalogue by name in keyset pages, so that every version of a package
//! is seen together (the newest N are kept per package, in the format's version order); it
//! holds a page and one name's versions, whatever the repository's size. A preview and a run
//! select alike.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::catalogue::Catalogue;
use crate::formats::{FormatSpec, Registry};
use packyard_model::cleanup::{Criteria, Cron, Schedule};
use packyard_store::db::catalogue::{ComponentRow, Search, Sort};
use packyard_store::db::cleanup::{PolicyRow, RunRecord};
use packyard_store::db::{Db, DbResult};

/// A selected component: its bytes (all its assets) and its last download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub component: ComponentRow,
    pub bytes: i64,
    pub last_downloaded: Option<i64>,
}

/// A policy's criteria, ready to test components against at one instant.
pub struct Compiled {
    criteria: Criteria,
    name: Option<regex::Regex>,
    version: Option<regex::Regex>,
    published_before: Option<i64>,
    downloaded_before: Option<i64>,
}

const DAY_MS: i64 = 86_400_000;

impl Compiled {
    /// The criteria as of `now_ms` (ages count back from it).
    pub fn new(criteria: &Criteria, now_ms: i64) -> Result<Self, regex::Error> {
        let compile = |p: &Option<String>| p.as_deref().map(regex::Regex::new).transpose();
        let before = |days: Option<u32>| days.map(|d| now_ms - i64::from(d) * DAY_MS);
        Ok(Self {
            name: compile(&criteria.name_regex)?,
            version: compile(&criteria.version_regex)?,
            published_before: before(criteria.published_before_days),
            downloaded_before: before(criteria.last_downloaded_before_days),
            criteria: criteria.clone(),
        })
    }

    /// The criteria that look at a component alone.
    fn matches(&self, s: &Selected) -> bool {
        let c = &s.component;
        self.published_before.is_none_or(|t| c.created_at < t)
            // Never downloaded: counted from publication.
            && self.downloaded_before.is_none_or(|t| s.last_downloaded.unwrap_or(c.created_at) < t)
            && self.name.as_ref().is_none_or(|r| r.is_match(&c.name))
            && self.version.as_ref().is_none_or(|r| r.is_match(&c.version))
    }
}

const PAGE: i64 = 500;

/// A walk over a repository's catalogue by name that yields what the criteria select, whole
/// names at a time (every version of a package is decided together).
pub struct Walk<'a> {
    db: &'a Db,
    format: &'a dyn Catalogue,
    criteria: &'a Compiled,
    repository_id: i64,
    /// Components stored after this instant (ms) are left out, as if they were not there: a run
    /// removes what was selected when it started.
    until: i64,
    after: Option<(String, i64)>,
    /// The name being gathered, and the names gathered whole.
    pending: Vec<Selected>,
    ready: std::collections::VecDeque<Vec<Selected>>,
    done: bool,
    /// Rows read so far, and the last name decided whole.
    read: usize,
    decided: Option<String>,
}

impl<'a> Walk<'a> {
    pub fn new(db: &'a Db, format: &'a dyn Catalogue, criteria: &'a Compiled, repository_id: i64, until: i64) -> Self {
        Self {
            db,
            format,
            criteria,
            repository_id,
            until,
            after: None,
            pending: Vec::new(),
            ready: std::collections::VecDeque::new(),
            done: false,
            read: 0,
            decided: None,
        }
    }

    /// Starts the walk at `name` (all of its components), or just after it when `past` is set.
    pub fn starting_at(mut self, name: &str, past: bool) -> Self {
        self.after = Some((name.to_string(), if past { i64::MAX } else { i64::MIN }));
        self
    }

    /// Whether the walk has decided every name.
    pub fn finished(&self) -> bool {
        self.done && self.ready.is_empty()
    }

    /// The rows read so far.
    pub fn read(&self) -> usize {
        self.read
    }

    /// The last name decided whole, to start a later walk just after it.
    pub fn decided(&self) -> Option<&str> {
        self.decided.as_deref()
    }

    /// The next selected components: at least `at_least` (of whole names), fewer only at the
    /// end; empty when the walk is over.
    pub async fn next(&mut self, at_least: usize) -> DbResult<Vec<Selected>> {
        self.next_within(at_least, usize::MAX).await
    }

    /// As [`Walk::next`], but reading no more pages once `max_read` rows have been read in all
    /// (so a request's work is bounded whatever the criteria select); fewer then, and the walk
    /// goes on from [`Walk::decided`].
    pub async fn next_within(&mut self, at_least: usize, max_read: usize) -> DbResult<Vec<Selected>> {
        let mut out = Vec::new();
        loop {
            while let Some(group) = self.ready.pop_front() {
                self.decided = group.first().map(|s| s.component.name.clone());
                out.extend(decide(self.format, self.criteria, group));
                if out.len() >= at_least {
                    return Ok(out);
                }
            }
            if self.done || self.read >= max_read {
                return Ok(out);
            }
            self.read_page().await?;
        }
    }

    async fn read_page(&mut self) -> DbResult<()> {
        let search = Search {
            repositories: vec![self.repository_id],
            sort: Sort::Name,
            after: self.after.clone(),
            limit: PAGE,
            ..Search::default()
        };
        let page = self.db.catalogue_search(&search).await?;
        self.read += page.len();
        let ids: Vec<i64> = page.iter().map(|c| c.id).collect();
        let mut usage: HashMap<i64, (i64, Option<i64>)> = HashMap::new();
        for a in self.db.catalogue_assets_of(&ids).await? {
            let u = usage.entry(a.component_id).or_insert((0, None));
            u.0 += a.size;
            u.1 = u.1.max(a.last_downloaded);
        }
        self.done = (page.len() as i64) < PAGE;
        self.after = page.last().map(|c| (c.name.clone(), c.id));
        for c in page.into_iter().filter(|c| c.created_at <= self.until) {
            if self.pending.first().is_some_and(|g| g.component.name != c.name) {
                self.ready.push_back(std::mem::take(&mut self.pending));
            }
            let (bytes, last_downloaded) = usage.get(&c.id).copied().unwrap_or((0, None));
            self.pending.push(Selected { component: c, bytes, last_downloaded });
        }
        if self.done && !self.pending.is_empty() {
            self.ready.push_back(std::mem::take(&mut self.pending));
        }
        Ok(())
    }
}

/// Walks `repository_id`'s components and calls `found` with each one the criteria select, in
/// name order (then id). `found` returns false to stop the walk.
pub async fn select<F>(
    db: &Db,
    format: &dyn Catalogue,
    criteria: &Compiled,
    repository_id: i64,
    mut found: F,
) -> DbResult<()>
where
    F: FnMut(Selected) -> bool,
{
    let mut walk = Walk::new(db, format, criteria, repository_id, i64::MAX);
    loop {
        let batch = walk.next(PAGE as usize).await?;
        if batch.is_empty() {
            return Ok(());
        }
        for s in batch {
            if !found(s) {
                return Ok(());
            }
        }
    }
}

/// Applies the criteria to one name's components (of one or several packages): the selected.
fn decide(format: &dyn Catalogue, criteria: &Compiled, group: Vec<Selected>) -> Vec<Selected> {
    let mut out = Vec::new();
    let mut packages: Vec<(String, Vec<Selected>)> = Vec::new();
    for s in group {
        let key = format.package(&s.component);
        match packages.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => packages.push((key, vec![s])),
        }
    }
    let c = &criteria.criteria;
    for (_, members) in packages {
        // Newest first: by version, then (revisions of one version) by time.
        let mut members = members;
        members.sort_by(|a, b| {
            format
                .compare_versions(&b.component.version, &a.component.version)
                .then_with(|| b.component.created_at.cmp(&a.component.created_at))
                .then_with(|| b.component.id.cmp(&a.component.id))
        });
        let mut versions_seen: Vec<&str> = Vec::new();
        let mut keep = vec![false; members.len()];
        let mut prerelease = vec![false; members.len()];
        let mut revision_of_version = 0u32;
        for (i, m) in members.iter().enumerate() {
            let v = m.component.version.as_str();
            let new_version =
                versions_seen.last().is_none_or(|last| format.compare_versions(last, v) != Ordering::Equal);
            if new_version {
                versions_seen.push(v);
                revision_of_version = 0;
            }
            revision_of_version += 1;
            if c.keep_latest.is_some_and(|n| versions_seen.len() <= n as usize) {
                keep[i] = true;
            }
            if c.keep_latest_revisions.is_some_and(|n| revision_of_version <= n) {
                keep[i] = true;
            }
            prerelease[i] = if format.revisions() { revision_of_version > 1 } else { format.prerelease(v) };
        }
        for (i, m) in members.into_iter().enumerate() {
            if !keep[i] && (!c.prereleases_only || prerelease[i]) && criteria.matches(&m) {
                out.push(m);
            }
        }
    }
    out
}

/// What a run removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    pub components: u64,
    pub bytes: i64,
    pub batches: u64,
    /// `(unit id, desired revision)` of each republication the batches asked for.
    pub changes: Vec<(i64, i64)>,
}

/// Removes from `repo` what policy `policy`'s criteria select when the run starts (`started`,
/// ms), in batches of `batch` (of whole names): each batch one transaction of the format's
/// deletes — a proxy's cached copies one at a time —, its units republished once. Memory holds a
/// batch, whatever the repository's size. Counted in the cleanup metrics; one audit entry for
/// the run with its counts (besides one per removed component).
pub async fn run(
    services: &crate::services::Services,
    (format, policy, criteria): (&dyn FormatSpec, &str, &Compiled),
    repo: &packyard_model::repos::Repository,
    (started, batch): (i64, usize),
    actor: crate::hosted::Actor<'_>,
    lease: Option<&Lease>,
) -> Result<RunReport, crate::hosted::UploadError> {
    debug_assert_eq!(format.format(), repo.format, "cleanup::run takes the repository's own format");
    let clock = std::time::Instant::now();
    let m = &services.metrics;
    // A repository cleaned shows its counters, at 0 until something goes.
    m.cleanup_components_deleted_total.with_label_values(&[repo.name.as_str()]);
    m.cleanup_bytes_reclaimed_total.with_label_values(&[repo.name.as_str()]);
    let outcome = remove_selected(services, format, criteria, repo, (started, batch), actor, lease).await;
    let (report, error) = match &outcome {
        Ok(r) => (r.clone(), None),
        Err(e) => (RunReport::default(), Some(e.to_string())),
    };
    m.cleanup_last_run_timestamp_seconds.set(packyard_store::db::now_ms() as f64 / 1000.0);
    let detail = serde_json::json!({
        "policy": policy, "components": report.components, "bytes": report.bytes, "batches": report.batches,
        "duration_ms": clock.elapsed().as_millis() as u64, "error": error,
    });
    services.security.audit(actor.username, actor.address, "cleanup.run", repo.name.as_str(), detail.clone()).await;
    let payload = serde_json::json!({
        "repository": {"name": repo.name.as_str(), "format": repo.format.as_str(), "type": repo.repo_type.as_str()},
        "actor": actor.username,
        "cleanup": detail,
    });
    if let Err(e) =
        services.db.enqueue_webhook_event("cleanup.finished", Some(repo.name.as_str()), &payload.to_string()).await
    {
        tracing::error!(error = %e, repository = %repo.name, "cannot queue the cleanup.finished webhook event");
    }
    outcome
}

async fn remove_selected(
    services: &crate::services::Services,
    format: &dyn FormatSpec,
    criteria: &Compiled,
    repo: &packyard_model::repos::Repository,
    (started, batch): (i64, usize),
    actor: crate::hosted::Actor<'_>,
    lease: Option<&Lease>,
) -> Result<RunReport, crate::hosted::UploadError> {
    let mut report = RunReport::default();
    let mut walk = Walk::new(&services.db, format.catalogue(), criteria, repo.id, started);
    let m = &services.metrics;
    let mut size = batch.max(1);
    loop {
        let selected = walk.next(size).await?;
        if selected.is_empty() {
            return Ok(report);
        }
        packyard_store::pause::at("cleanup.selected").await;
        let clock = std::time::Instant::now();
        // What this run removed: a component another delete removed first is not counted.
        let mut bytes = 0;
        let removed = match repo.repo_type {
            packyard_model::repos::RepoType::Proxy => {
                let mut n = 0;
                for s in &selected {
                    if crate::catalogue::delete_cached(services, repo, &s.component, actor).await? {
                        n += 1;
                        bytes += s.bytes;
                    }
                }
                n
            }
            _ => {
                let keys: Vec<String> = selected.iter().map(|s| s.component.component_key.clone()).collect();
                let (gone, changes) = format.deletes().delete_components(services, repo, &keys, actor).await?;
                report.changes.extend(changes);
                let gone: std::collections::HashSet<&str> = gone.iter().map(String::as_str).collect();
                bytes = selected
                    .iter()
                    .filter(|s| gone.contains(s.component.component_key.as_str()))
                    .map(|s| s.bytes)
                    .sum();
                gone.len()
            }
        };
        size = next_batch(size, selected.len(), clock.elapsed(), batch);
        report.components += removed as u64;
        report.bytes += bytes;
        report.batches += 1;
        // Counted as each batch commits: a run that fails later has still removed these.
        m.cleanup_components_deleted_total.with_label_values(&[repo.name.as_str()]).inc_by(removed as u64);
        m.cleanup_bytes_reclaimed_total
            .with_label_values(&[repo.name.as_str()])
            .inc_by(u64::try_from(bytes).unwrap_or(0));
        if let Some(l) = lease {
            l.progress(&report).await?;
        }
        packyard_model::crash::point("cleanup_batch");
    }
}

/// How long one batch's transaction may hold the database (on SQLite, every other writer
/// waits behind it: an upload, a publication).
const BATCH_TARGET: std::time::Duration = std::time::Duration::from_millis(100);

/// The next batch's size: what `took` for `done` components suggests fits [`BATCH_TARGET`],
/// between 16 and `most` (`worker.cleanup_batch`), growing by at most half at a time.
pub fn next_batch(size: usize, done: usize, took: std::time::Duration, most: usize) -> usize {
    let most = most.max(1);
    if done == 0 {
        return size.clamp(1, most);
    }
    let per = took.as_secs_f64() / done as f64;
    let fits = if per > 0.0 { (BATCH_TARGET.as_secs_f64() / per) as usize } else { most };
    fits.min(size + size / 2 + 1).clamp(16.min(most), most)
}

/// The repository's cleanup lease a scheduled run holds: renewed after each batch, with what
/// the run has removed so far (its status shows it; a run killed midway leaves it there).
pub struct Lease {
    pub policy_id: i64,
    pub repository_id: i64,
    pub token: String,
    pub lease_ms: i64,
    db: Db,
}

impl Lease {
    async fn progress(&self, report: &RunReport) -> Result<(), crate::hosted::UploadError> {
        let counts = (i64::try_from(report.components).unwrap_or(i64::MAX), report.bytes);
        self.db.record_cleanup_run((self.policy_id, self.repository_id), counts, None).await?;
        if self.db.read_only().await?.frozen {
            return Err(crate::hosted::UploadError::ReadOnly(
                "stopped: the instance was made read-only (a later run finishes the work)".into(),
            ));
        }
        if !self.db.renew_cleanup(self.repository_id, &self.token, self.lease_ms).await? {
            return Err(crate::hosted::UploadError::Db(packyard_store::db::DbError::Unavailable(
                "stopped: the repository's cleanup lease was taken back (a stop was asked for, or this run stalled longer than worker.lease_ms)"
                    .into(),
            )));
        }
        Ok(())
    }
}

/// Whether `policy`'s run on a repository is due at `now`: asked for ("run now"), interrupted
/// (started, never finished, no longer leased: the next run finishes the work), or due by the
/// schedule — an interval since the last start, or the cron expression's next instant after
/// it (after the policy's creation, before a first run).
pub fn due(policy: &PolicyRow, run: &RunRecord, now: i64) -> bool {
    if run.running_until.is_some() {
        return false;
    }
    if run.requested_at.is_some() || (run.started_at.is_some() && run.finished_at.is_none()) {
        return true;
    }
    let Some(schedule) = policy.schedule.as_deref().and_then(|s| serde_json::from_str::<Schedule>(s).ok()) else {
        return false;
    };
    let base = run.started_at.unwrap_or(policy.created_at);
    match (schedule.every_secs, schedule.cron.as_deref().map(Cron::parse)) {
        (Some(secs), _) => now >= base.saturating_add(i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)),
        (None, Some(Ok(cron))) => cron.next_after(base).is_some_and(|t| t <= now),
        _ => false,
    }
}

/// Runs every cleanup that is due (see [`due`]), one after another, each under its
/// repository's lease (one run per repository at a time across the cluster; a repository
/// another worker is cleaning is left to it). Returns the runs made.
pub async fn run_due(services: &crate::services::Services, formats: &Registry, owner: &str) -> DbResult<usize> {
    let db = &services.db;
    let policies: HashMap<i64, PolicyRow> = db.list_policies().await?.into_iter().map(|p| (p.row.id, p.row)).collect();
    let mut made = 0;
    for run in db.cleanup_runs().await? {
        let Some(policy) = policies.get(&run.policy_id) else { continue };
        if !due(policy, &run, packyard_store::db::now_ms()) {
            continue;
        }
        let lease_ms = i64::try_from(services.config.worker.lease_ms).unwrap_or(30_000);
        let Some(token) = db.claim_cleanup(run.repository_id, policy.id, owner, lease_ms).await? else { continue };
        let lease = Lease { policy_id: policy.id, repository_id: run.repository_id, token, lease_ms, db: db.clone() };
        // Another worker may have made this run between the read and the claim.
        // (Our own lease aside: it is held now.)
        let fresh = db.cleanup_runs_of(policy.id).await?.into_iter().find(|r| r.repository_id == run.repository_id);
        let fresh = fresh.map(|r| RunRecord { running_until: None, ..r });
        let outcome = match fresh {
            Some(r) if due(policy, &r, packyard_store::db::now_ms()) => {
                made += 1;
                run_one(services, formats, policy, &r, &lease).await
            }
            _ => Ok(()),
        };
        db.release_cleanup(lease.repository_id, &lease.token).await?;
        outcome?;
    }
    Ok(made)
}

/// One run of `policy` on `record`'s repository, its status recorded as it goes.
async fn run_one(
    services: &crate::services::Services,
    formats: &Registry,
    policy: &PolicyRow,
    record: &RunRecord,
    lease: &Lease,
) -> DbResult<()> {
    let db = &services.db;
    let started = packyard_store::db::now_ms();
    db.start_cleanup_run(policy.id, record.repository_id, started).await?;
    let clock = std::time::Instant::now();
    let outcome: Result<RunReport, String> = async {
        let repo = db
            .repository_by_id(record.repository_id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("repository {} no longer exists", record.repository))?;
        let criteria: Criteria = serde_json::from_str(&policy.criteria).map_err(|e| format!("criteria: {e}"))?;
        let compiled = Compiled::new(&criteria, started).map_err(|e| e.to_string())?;
        let username =
            record.requested_by.clone().filter(|_| record.requested_at.is_some()).unwrap_or_else(|| "system".into());
        let actor = crate::hosted::Actor::system(&username);
        let batch = services.config.worker.cleanup_batch.max(1);
        let format = formats.get(repo.format);
        run(services, (format, &policy.name, &compiled), &repo, (started, batch), actor, Some(lease))
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    let duration = i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX);
    let finished = packyard_store::db::now_ms();
    let (counts, error) = match &outcome {
        Ok(r) => ((i64::try_from(r.components).unwrap_or(i64::MAX), r.bytes), None),
        Err(e) => {
            tracing::warn!(policy = %policy.name, repository = %record.repository, error = %e, "cleanup run failed");
            // What the batches that committed removed.
            let so_far =
                db.cleanup_runs_of(policy.id).await?.into_iter().find(|r| r.repository_id == record.repository_id);
            (so_far.map_or((0, 0), |r| (r.components, r.bytes)), Some(e.as_str()))
        }
    };
    db.record_cleanup_run((policy.id, record.repository_id), counts, Some((finished, duration, error))).await?;
    if let Ok(r) = &outcome {
        tracing::info!(policy = %policy.name, repository = %record.repository, components = r.components, bytes = r.bytes, duration_ms = duration, "cleanup run finished");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn batches_follow_the_time_they_take() {
        // 500 in 1 s: 2 ms each, 50 fit in 100 ms.
        assert_eq!(super::next_batch(500, 500, Duration::from_secs(1), 500), 50);
        // Quick ones grow back by half at a time, up to the configured size.
        assert_eq!(super::next_batch(50, 50, Duration::from_millis(5), 500), 76);
        assert_eq!(super::next_batch(400, 400, Duration::from_millis(5), 500), 500);
        // Never below 16 (nor above a smaller configured size), whatever the time.
        assert_eq!(super::next_batch(50, 50, Duration::from_secs(10), 500), 16);
        assert_eq!(super::next_batch(8, 8, Duration::from_secs(10), 8), 8);
        assert_eq!(super::next_batch(30, 0, Duration::ZERO, 500), 30);
    }
}
