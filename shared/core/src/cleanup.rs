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
    let mut after: Option<(String, i64)> = None;
    // One name's components, held until the walk has passed that name.
    let mut group: Vec<Selected> = Vec::new();
    loop {
        let search = Search {
            repositories: vec![repository_id],
            sort: Sort::Name,
            after: after.clone(),
            limit: PAGE,
            ..Search::default()
        };
        let page = db.catalogue_search(&search).await?;
        let ids: Vec<i64> = page.iter().map(|c| c.id).collect();
        let mut usage: HashMap<i64, (i64, Option<i64>)> = HashMap::new();
        for a in db.catalogue_assets_of(&ids).await? {
            let u = usage.entry(a.component_id).or_insert((0, None));
            u.0 += a.size;
            u.1 = u.1.max(a.last_downloaded);
        }
        let full = page.len() as i64 == PAGE;
        after = page.last().map(|c| (c.name.clone(), c.id));
        for c in page {
            let next_name = group.first().is_some_and(|g| g.component.name != c.name);
            if next_name && !decide(format, criteria, std::mem::take(&mut group), &mut found) {
                return Ok(());
            }
            let (bytes, last_downloaded) = usage.get(&c.id).copied().unwrap_or((0, None));
            group.push(Selected { component: c, bytes, last_downloaded });
        }
        if !full {
            break;
        }
    }
    decide(format, criteria, group, &mut found);
    Ok(())
}

/// Applies the criteria to one name's components (of one or several packages); false when
/// `found` stopped the walk.
fn decide<F>(format: &dyn Catalogue, criteria: &Compiled, group: Vec<Selected>, found: &mut F) -> bool
where
    F: FnMut(Selected) -> bool,
{
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
            let selected = !keep[i] && (!c.prereleases_only || prerelease[i]) && criteria.matches(&m);
            if selected && !found(m) {
                return false;
            }
        }
    }
    true
}
