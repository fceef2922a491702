//! Vulnerability data: OSV advisories imported (`packyard-api vulnerabilities import FILE|URL`)
//! — every record read and checked before any is stored, so a malformed file changes nothing —
//! and matched against a component by its format's ecosystem, name and version order
//! ([`crate::formats::OsvSpec`]).

use std::collections::HashMap;

use packyard_model::osv::{self, Advisory, Affected, Level};
use packyard_store::db::advisories::{AdvisoryPackage, AdvisoryRow};
use serde_json::Value;

use crate::formats::Registry;
use crate::services::Services;

#[derive(Debug, thiserror::Error)]
pub enum VulnError {
    /// The data is not usable: the message names the record and what is wrong.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] packyard_store::db::DbError),
}

/// The records of an OSV file: one record (an object), a list of them, or a directory of
/// record files (`*.json`), in file-name order. `name` says where they came from in messages.
pub fn records(bytes: &[u8], name: &str) -> Result<Vec<Value>, VulnError> {
    let v: Value = serde_json::from_slice(bytes)
        .map_err(|e| VulnError::Invalid(format!("{name} is not OSV JSON: {e} (a record, or a list of records)")))?;
    match v {
        Value::Array(list) => Ok(list),
        record @ Value::Object(_) => Ok(vec![record]),
        _ => Err(VulnError::Invalid(format!("{name}: neither an OSV record nor a list of them"))),
    }
}

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Imported {
    pub records: usize,
    /// New or changed (another `modified` time), and stored.
    pub stored: usize,
    pub unchanged: usize,
    /// Packages the stored records name, of the ecosystems Packyard serves.
    pub packages: usize,
    /// Components the stored records affect, announced (`vulnerability.matched`).
    pub announced: usize,
}

impl std::fmt::Display for Imported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} advisories read: {} new or changed, stored ({} packages of Packyard's ecosystems), {} unchanged; \
             {} components affected by them",
            self.records, self.stored, self.packages, self.unchanged, self.announced
        )
    }
}

/// OSV's ecosystem without its release (`Debian:12` → `Debian`).
fn base(ecosystem: &str) -> &str {
    ecosystem.split(':').next().unwrap_or(ecosystem)
}

/// Checks every record of `records` (from `source`), then stores those that are new or changed,
/// keeping of each only the packages of the ecosystems the formats of `formats` serve. One bad
/// record: nothing is stored, and the message names it.
pub async fn import(
    services: &Services,
    formats: &Registry,
    records: &[Value],
    source: &str,
) -> Result<Imported, VulnError> {
    let ecosystems: Vec<&str> = formats.all().filter_map(|f| f.osv()).map(|o| o.ecosystem()).collect();
    let mut parsed = Vec::with_capacity(records.len());
    for (n, r) in records.iter().enumerate() {
        let a = osv::parse(r).map_err(|e| {
            VulnError::Invalid(format!("{source}: record {} of {}: {e}; nothing was imported", n + 1, records.len()))
        })?;
        parsed.push((a, r));
    }
    let held = services.db.advisory_times().await?;
    let mut out = Imported { records: parsed.len(), ..Imported::default() };
    let mut rows = Vec::new();
    for (a, record) in parsed {
        if held.get(&a.id) == Some(&a.modified) {
            out.unchanged += 1;
            continue;
        }
        let packages: Vec<AdvisoryPackage> = a
            .affected
            .iter()
            .filter(|p| ecosystems.contains(&base(&p.ecosystem)))
            .map(|p| AdvisoryPackage {
                ecosystem: base(&p.ecosystem).to_string(),
                name: p.name.clone(),
                detail: detail(p).to_string(),
            })
            .collect();
        out.stored += 1;
        out.packages += packages.len();
        rows.push((row(&a, record), packages));
    }
    // In bounded transactions: a large file is many, each all or nothing, all checked first;
    // each announced once stored (a later chunk that fails leaves the earlier ones announced).
    let mut stored_any = false;
    let stored = async {
        for chunk in rows.chunks(500) {
            services.db.put_advisories(chunk).await?;
            stored_any = true;
        }
        // One pass over the catalogue for everything stored, not a query per package.
        out.announced += announce(services, formats, &rows).await?;
        Ok::<_, VulnError>(())
    }
    .await;
    // The replicas are told of what was stored, also when a later chunk failed.
    if stored_any {
        services.db.advisories_changed().await?;
        services.changed(crate::events::Changed::Repositories);
        // Indexes a policy filters by advisories are published again.
        for repo in services.db.list_repositories().await? {
            if repo.gate().is_some_and(|p| p.vulnerabilities != packyard_model::policy::VulnMode::Off) {
                crate::policy::republish(services, &repo).await?;
            }
        }
    }
    stored?;
    let detail = serde_json::json!({"source": source, "records": out.records, "stored": out.stored});
    services.security.audit("vulnerabilities", None, "vulnerabilities.import", source, detail).await;
    Ok(out)
}

/// Most components of one name announced per advisory (a name in thousands of repositories is
/// announced for the first ones; the component API lists them all).
const ANNOUNCED_PER_PACKAGE: i64 = 10_000;

/// Announces each catalogued component the stored records affect (`vulnerability.matched`, to
/// the subscriptions of its repository and the global ones), in one pass over the components of
/// the formats they name: how many.
async fn announce(
    services: &Services,
    formats: &Registry,
    rows: &[(AdvisoryRow, Vec<AdvisoryPackage>)],
) -> Result<usize, VulnError> {
    // By ecosystem, then package: the stored entries.
    let mut advised: HashMap<String, HashMap<String, Vec<(AdvisoryRow, Affected)>>> = HashMap::new();
    for (a, packages) in rows.iter().filter(|(a, _)| !a.withdrawn) {
        for p in packages {
            if let Some(hit) = affected(&p.name, &p.detail) {
                advised
                    .entry(p.ecosystem.clone())
                    .or_default()
                    .entry(p.name.clone())
                    .or_default()
                    .push((a.clone(), hit));
            }
        }
    }
    // Nothing is written when no subscription wants them (they are still counted).
    let wanted = services.db.webhooks_want("vulnerability.matched").await?;
    let mut announced = 0;
    let mut per_package: HashMap<(String, String), i64> = HashMap::new();
    let repos = services.db.list_repositories().await?;
    let names: HashMap<i64, String> = repos.iter().map(|r| (r.id, r.name.as_str().to_string())).collect();
    let by_id: HashMap<i64, &packyard_model::repos::Repository> = repos.iter().map(|r| (r.id, r)).collect();
    for spec in formats.all() {
        let Some(osv) = spec.osv() else { continue };
        let Some(by_name) = advised.get(osv.ecosystem()) else { continue };
        let format = spec.format();
        let ids: Vec<i64> = repos.iter().filter(|r| r.format == format).map(|r| r.id).collect();
        if ids.is_empty() {
            continue;
        }
        let mut search = packyard_store::db::catalogue::Search {
            repositories: ids,
            format: Some(format.as_str().to_string()),
            limit: 5000,
            ..Default::default()
        };
        loop {
            let page = services.db.catalogue_search(&search).await?;
            for c in &page {
                let package = osv.package((&c.component_key, &c.namespace, &c.name));
                let Some(entries) = by_name.get(&package) else { continue };
                let version = osv.osv_version(&c.version);
                let release = by_id.get(&c.repository_id).and_then(|r| osv.component_release(r, &c.namespace));
                // (An advisory names a package once per release of its ecosystem: one announcement.)
                let mut seen = std::collections::HashSet::new();
                for (a, hit) in entries {
                    if release.as_deref().is_some_and(|ours| of_another_release(ours, &hit.ecosystem)) {
                        continue;
                    }
                    if !hit.affects(&version, &|x, y| osv.compare(x, y)) || !seen.insert(a.id.as_str()) {
                        continue;
                    }
                    let n = per_package.entry((a.id.clone(), package.clone())).or_insert(0);
                    if *n >= ANNOUNCED_PER_PACKAGE {
                        continue;
                    }
                    *n += 1;
                    announced += 1;
                    if !wanted {
                        continue;
                    }
                    let payload = serde_json::json!({
                        "component": {"format": format.as_str(), "group": c.namespace, "name": c.name,
                            "version": c.version},
                        "advisory": {"id": a.id, "severity": level(a, hit).as_str(),
                            "score": a.score_tenths.map(|t| t as f64 / 10.0), "summary": a.summary,
                            "aliases": serde_json::from_str::<Value>(&a.aliases).unwrap_or(Value::Null)},
                    });
                    let repository = names.get(&c.repository_id).map(String::as_str).unwrap_or_default();
                    // A subscription narrowed by a content selector hears of the components it
                    // selects (by the component's first file).
                    let first = services.db.catalogue_assets_of(&[c.id]).await?.into_iter().next();
                    let path = first.map_or_else(|| c.component_key.clone(), |a| a.path);
                    let content = Some(packyard_store::db::webhooks::EventContent {
                        format: format.as_str(),
                        path: &path,
                        name: &c.name,
                        version: &c.version,
                        group: &c.namespace,
                    });
                    services
                        .db
                        .enqueue_component_event("vulnerability.matched", (repository, content), &payload.to_string())
                        .await?;
                }
            }
            tokio::task::yield_now().await;
            match page.last() {
                Some(last) if page.len() as i64 == search.limit => search.after = Some((String::new(), last.id)),
                _ => break,
            }
        }
    }
    Ok(announced)
}

fn row(a: &Advisory, record: &Value) -> AdvisoryRow {
    AdvisoryRow {
        id: a.id.clone(),
        modified: a.modified.clone(),
        level: a.level.as_str().to_string(),
        score_tenths: a.score.map(|s| (s * 10.0).round() as i64),
        summary: a.summary.clone(),
        aliases: serde_json::to_string(&a.aliases).unwrap_or_else(|_| "[]".into()),
        record: record.to_string(),
        withdrawn: a.withdrawn,
    }
}

/// An affected package as the database keeps it (its name beside it).
fn detail(p: &Affected) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

/// An affected package read back.
fn affected(name: &str, detail: &str) -> Option<Affected> {
    let p: Affected = serde_json::from_str(detail).ok()?;
    Some(Affected { name: name.to_string(), ..p })
}

/// An advisory's level for one of its packages (DESIGN §5b): its CVSS score's, else the
/// package's own database level, else the record's.
fn level(a: &AdvisoryRow, p: &Affected) -> Level {
    let record = Level::parse(&a.level).unwrap_or(Level::High);
    if a.score_tenths.is_some() {
        record
    } else {
        p.level_or(record)
    }
}

/// The match of advisory `a` through its package entry `p`.
pub fn matched(a: &AdvisoryRow, p: &Affected) -> Match {
    Match {
        severity: level(a, p).as_str().to_string(),
        score: a.score_tenths.map(|t| t as f64 / 10.0),
        summary: a.summary.clone(),
        aliases: serde_json::from_str(&a.aliases).unwrap_or_default(),
        id: a.id.clone(),
    }
}

/// An advisory that affects a component.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Match {
    pub id: String,
    /// Its level for this package (the package's own, else the record's).
    pub severity: String,
    /// The CVSS base score, when the level came from one.
    pub score: Option<f64>,
    pub summary: String,
    pub aliases: Vec<String>,
}

/// The advisories that affect a catalogued component of `format` (`(namespace, name,
/// version)`), most severe first.
pub async fn matches(
    services: &Services,
    formats: &Registry,
    repo: &packyard_model::repos::Repository,
    (key, namespace, name, version): (&str, &str, &str, &str),
) -> Result<Vec<Match>, VulnError> {
    let Some(spec) = formats.get(repo.format).osv() else { return Ok(Vec::new()) };
    let release = spec.component_release(repo, namespace);
    let version = spec.osv_version(version);
    let package = spec.package((key, namespace, name));
    let name = package.as_str();
    let mut out = Vec::new();
    let mut seen: HashMap<String, ()> = HashMap::new();
    // From the replica's memory once read (an import moves the watermark that forgets it).
    let advised = services.policy.advisories(services, spec.ecosystem(), name).await?;
    for (a, p) in advised.iter() {
        if release.as_deref().is_some_and(|ours| of_another_release(ours, &p.ecosystem)) {
            continue;
        }
        if !p.affects(&version, &|x, y| spec.compare(x, y)) || seen.insert(a.id.clone(), ()).is_some() {
            continue;
        }
        out.push(matched(a, p));
    }
    out.sort_by(|a, b| {
        let level = |m: &Match| Level::parse(&m.severity).unwrap_or(Level::High);
        level(b).cmp(&level(a)).then_with(|| a.id.cmp(&b.id))
    });
    Ok(out)
}

/// What matching every catalogued component against the advisories held found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Components of the formats OSV data applies to.
    pub components: u64,
    /// Of them, affected, by their highest level (low, medium, high, critical).
    pub by_level: [u64; 4],
    pub elapsed_ms: u64,
}

impl std::fmt::Display for Census {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [low, medium, high, critical] = self.by_level;
        write!(
            f,
            "{} components matched in {} ms: {critical} critical, {high} high, {medium} medium, {low} low",
            self.components, self.elapsed_ms
        )
    }
}

/// Matches every catalogued component of every format OSV data applies to against the
/// advisories held — each ecosystem's entries read once, components a page at a time — and sets
/// `packyard_components_with_advisories{level}`.
/// Whether an advisory entry of `ecosystem` (`Debian:11`) is of another release than `ours`
/// (`12`); one that names no release applies to every release.
pub fn of_another_release(ours: &str, ecosystem: &str) -> bool {
    ecosystem.split_once(':').is_some_and(|(_, theirs)| theirs != ours)
}

pub async fn census(services: &Services, formats: &Registry) -> Result<Census, VulnError> {
    let started = std::time::Instant::now();
    let mut out = Census::default();
    let repos = services.db.list_repositories().await?;
    let by_id: HashMap<i64, &packyard_model::repos::Repository> = repos.iter().map(|r| (r.id, r)).collect();
    for spec in formats.all() {
        let Some(osv) = spec.osv() else { continue };
        let ids: Vec<i64> = repos.iter().filter(|r| r.format == spec.format()).map(|r| r.id).collect();
        if ids.is_empty() {
            continue;
        }
        let mut by_name: HashMap<String, Vec<(AdvisoryRow, Affected)>> = HashMap::new();
        for (a, name, detail) in services.db.advisory_entries_in(osv.ecosystem()).await? {
            if let Some(p) = affected(&name, &detail) {
                by_name.entry(name).or_default().push((a, p));
            }
        }
        let mut search = packyard_store::db::catalogue::Search {
            repositories: ids,
            format: Some(spec.format().as_str().to_string()),
            limit: 5000,
            ..Default::default()
        };
        loop {
            let page = services.db.catalogue_search(&search).await?;
            // (A page at a time, letting the tasks that share the thread run between pages.)
            tokio::task::yield_now().await;
            for c in &page {
                out.components += 1;
                let package = osv.package((&c.component_key, &c.namespace, &c.name));
                let Some(entries) = by_name.get(&package) else { continue };
                let version = osv.osv_version(&c.version);
                let release = by_id.get(&c.repository_id).and_then(|r| osv.component_release(r, &c.namespace));
                let highest = entries
                    .iter()
                    .filter(|(_, p)| release.as_deref().is_none_or(|ours| !of_another_release(ours, &p.ecosystem)))
                    .filter(|(_, p)| p.affects(&version, &|x, y| osv.compare(x, y)))
                    .map(|(a, p)| level(a, p))
                    .max();
                if let Some(l) = highest {
                    out.by_level[l as usize] += 1;
                }
            }
            match page.last() {
                Some(last) if page.len() as i64 == search.limit => search.after = Some((String::new(), last.id)),
                _ => break,
            }
        }
    }
    for l in Level::ALL {
        let n = i64::try_from(out.by_level[l as usize]).unwrap_or(i64::MAX);
        services.metrics.components_with_advisories.with_label_values(&[l.as_str()]).set(n);
    }
    out.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(out)
}
