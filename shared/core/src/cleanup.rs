//! Cleanup's selection: which components of a repository a policy's criteria select. The walk
//! reads the repository's catalogue by name in keyset pages, so that every version of a package
//! is seen together (the newest N are kept per package, in the format's version order); it
//! holds a page and one name's versions, whatever the repository's size. A preview and a run
//! select alike.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::catalogue::Catalogue;
use packyard_model::cleanup::Criteria;
use packyard_store::db::catalogue::{ComponentRow, Search, Sort};
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
        }
    }

    /// The next selected components: at least `at_least` (of whole names), fewer only at the
    /// end; empty when the walk is over.
    pub async fn next(&mut self, at_least: usize) -> DbResult<Vec<Selected>> {
        let mut out = Vec::new();
        loop {
            while let Some(group) = self.ready.pop_front() {
                out.extend(decide(self.format, self.criteria, group));
                if out.len() >= at_least {
                    return Ok(out);
                }
            }
            if self.done {
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
    (format, policy, criteria): (&dyn Catalogue, &str, &Compiled),
    repo: &packyard_model::repos::Repository,
    (started, batch): (i64, usize),
    actor: crate::hosted::Actor<'_>,
) -> Result<RunReport, crate::hosted::UploadError> {
    let clock = std::time::Instant::now();
    let outcome = remove_selected(services, format, criteria, repo, (started, batch), actor).await;
    let m = &services.metrics;
    let (report, error) = match &outcome {
        Ok(r) => (r.clone(), None),
        Err(e) => (RunReport::default(), Some(e.to_string())),
    };
    m.cleanup_last_run_timestamp_seconds.set(packyard_store::db::now_ms() as f64 / 1000.0);
    let detail = serde_json::json!({
        "policy": policy, "components": report.components, "bytes": report.bytes, "batches": report.batches,
        "duration_ms": clock.elapsed().as_millis() as u64, "error": error,
    });
    services.security.audit(actor.username, actor.address, "cleanup.run", repo.name.as_str(), detail).await;
    outcome
}

async fn remove_selected(
    services: &crate::services::Services,
    format: &dyn Catalogue,
    criteria: &Compiled,
    repo: &packyard_model::repos::Repository,
    (started, batch): (i64, usize),
    actor: crate::hosted::Actor<'_>,
) -> Result<RunReport, crate::hosted::UploadError> {
    let mut report = RunReport::default();
    let mut walk = Walk::new(&services.db, format, criteria, repo.id, started);
    let m = &services.metrics;
    loop {
        let selected = walk.next(batch.max(1)).await?;
        if selected.is_empty() {
            return Ok(report);
        }
        let removed = match repo.repo_type {
            packyard_model::repos::RepoType::Proxy => {
                let mut n = 0;
                for s in &selected {
                    if crate::catalogue::delete_cached(services, repo, &s.component, actor).await? {
                        n += 1;
                    }
                }
                n
            }
            _ => {
                let keys: Vec<String> = selected.iter().map(|s| s.component.component_key.clone()).collect();
                let (n, changes) = format.delete_batch(services, repo, &keys, actor).await?;
                report.changes.extend(changes);
                n
            }
        };
        let bytes = selected.iter().map(|s| s.bytes).sum::<i64>();
        report.components += removed as u64;
        report.bytes += bytes;
        report.batches += 1;
        // Counted as each batch commits: a run that fails later has still removed these.
        m.cleanup_components_deleted_total.with_label_values(&[repo.name.as_str()]).inc_by(removed as u64);
        m.cleanup_bytes_reclaimed_total
            .with_label_values(&[repo.name.as_str()])
            .inc_by(u64::try_from(bytes).unwrap_or(0));
    }
}
