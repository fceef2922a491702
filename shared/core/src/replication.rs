//! Pull replication (#42): a hosted repository with a `replication` block follows another
//! Packyard's repository (or one of its snapshots) and keeps a full copy of what its filters
//! keep — what `aptly mirror` and `debmirror` do for APT, for every format — where a proxy
//! caches only what clients asked for.
//!
//! The source serves its bundle manifest (`crate::bundle`) at
//! `/repository/<name>/-/export/manifest` (`…/-/export/snapshots/<snapshot>/manifest`), signed
//! with its instance key, and each blob its components list at `…/-/export/blobs/<sha256>`,
//! both with the repository's read permission. Every `every_secs` the worker asks for the
//! manifest, checks its signature (and the key the block names), keeps the components the
//! filters keep (names, architectures, the newest N versions of each name), fetches the blobs
//! the store lacks (each checked against its digest), and makes the repository hold exactly
//! those components ([`crate::bundle::apply`]: stored as copies are, the others deleted). A run
//! that fails leaves what the last one stored and is tried again at the next period; a restart
//! of either side only delays it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use futures_util::{StreamExt, TryStreamExt};
use packyard_model::repos::{Replication, Repository};
use packyard_store::blobs::Sha256Hex;
use serde::{Deserialize, Serialize};

use crate::bundle::{self, BundleBlob, BundleComponent, BundleError, ImportReport};
use crate::formats::Registry;
use crate::import::{Fetcher, Location};
use crate::services::Services;

/// Blobs fetched at once.
const FETCHES: usize = 8;

/// What the source answers at `…/-/export/manifest`: the manifest's exact text and its
/// signature file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignedManifest {
    pub manifest: String,
    pub signature: bundle::Signature,
}

/// When each following repository last ran and last caught up (ms), in this process.
pub struct Schedule {
    started: i64,
    ran: Mutex<HashMap<i64, i64>>,
    caught_up: Mutex<HashMap<i64, i64>>,
}

impl Default for Schedule {
    fn default() -> Self {
        Self { started: packyard_store::db::now_ms(), ran: Mutex::default(), caught_up: Mutex::default() }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Replicated {
    pub listed: usize,
    pub blobs_fetched: usize,
    pub bytes_fetched: u64,
    #[serde(flatten)]
    pub report: ImportReport,
}

/// Runs every following repository whose period has passed since its last run in this
/// process; returns how many ran.
pub async fn run_due(services: &Services, formats: &Registry, schedule: &Schedule, now: i64) -> usize {
    let repos = match services.db.list_repositories().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the repositories to replicate");
            return 0;
        }
    };
    let mut ran = 0;
    for repo in repos {
        let Some(settings) = repo.settings.replication.clone() else { continue };
        let period = i64::try_from(settings.every_secs).unwrap_or(60).saturating_mul(1000);
        let last = schedule.ran.lock().ok().and_then(|m| m.get(&repo.id).copied());
        if last.is_some_and(|l| now - l < period) {
            lag(services, schedule, &repo, now);
            continue;
        }
        if let Ok(mut m) = schedule.ran.lock() {
            m.insert(repo.id, now);
        }
        ran += 1;
        let m = &services.metrics;
        match replicate(services, formats, &repo, &settings).await {
            Ok(done) => {
                if let Ok(mut c) = schedule.caught_up.lock() {
                    c.insert(repo.id, packyard_store::db::now_ms());
                }
                m.replication_runs_total.with_label_values(&[repo.name.as_str(), "caught_up"]).inc();
                if done.report.copied + done.report.deleted > 0 {
                    tracing::info!(repository = %repo.name, listed = done.listed, stored = done.report.copied,
                        deleted = done.report.deleted, blobs = done.blobs_fetched, bytes = done.bytes_fetched,
                        "replicated");
                }
            }
            Err(e) => {
                m.replication_runs_total.with_label_values(&[repo.name.as_str(), "failed"]).inc();
                tracing::warn!(repository = %repo.name, source = %settings.url, error = %e,
                    "replication failed; trying again in {} s", settings.every_secs);
            }
        }
        lag(services, schedule, &repo, packyard_store::db::now_ms());
    }
    ran
}

/// `packyard_replication_lag_seconds`: since the repository last caught up (since the process
/// started when it never did here).
fn lag(services: &Services, schedule: &Schedule, repo: &Repository, now: i64) {
    let since = schedule.caught_up.lock().ok().and_then(|m| m.get(&repo.id).copied());
    let secs = (now - since.unwrap_or(schedule.started)).max(0) as f64 / 1000.0;
    services.metrics.replication_lag_seconds.with_label_values(&[repo.name.as_str()]).set(secs);
}

/// One run: the source's manifest, filtered; the missing blobs fetched; the repository made to
/// hold exactly those components.
pub async fn replicate(
    services: &Services,
    formats: &Registry,
    repo: &Repository,
    settings: &Replication,
) -> Result<Replicated, BundleError> {
    let source = settings.repository.clone().unwrap_or_else(|| repo.name.to_string());
    let root = Location::parse(&settings.url).map_err(|e| BundleError::Invalid(e.to_string()))?;
    let fetcher = Fetcher::for_server(&services.config).map_err(|e| BundleError::Io(e.to_string()))?;
    let manifest_at = match &settings.snapshot {
        Some(s) => format!("repository/{source}/-/export/snapshots/{s}/manifest"),
        None => format!("repository/{source}/-/export/manifest"),
    };
    let at = root.join(&manifest_at).map_err(|e| BundleError::Invalid(e.to_string()))?;
    let body = fetcher
        .read(&at)
        .await
        .map_err(|e| BundleError::Io(e.to_string()))?
        .ok_or_else(|| BundleError::Invalid(format!("{at}: the source has no repository {source} to follow")))?;
    let signed: SignedManifest = serde_json::from_slice(&body)
        .map_err(|e| BundleError::Invalid(format!("{at}: not a Packyard export manifest: {e}")))?;
    let sig = serde_json::to_vec(&signed.signature).map_err(|e| BundleError::Io(e.to_string()))?;
    let (manifest, instance) = bundle::verify(signed.manifest.as_bytes(), &sig, settings.key.as_deref())?;
    bundle::check_manifest(&manifest)?;
    if manifest.repository.name != source || manifest.snapshot != settings.snapshot {
        return Err(BundleError::Invalid(format!(
            "{at} answered with the manifest of repository {}{}, not of {source}",
            manifest.repository.name,
            manifest.snapshot.as_deref().map(|s| format!(" snapshot {s}")).unwrap_or_default()
        )));
    }
    if manifest.repository.format != repo.format {
        return Err(BundleError::Invalid(format!(
            "{source} at {} is a {} repository; {} is {}",
            settings.url, manifest.repository.format, repo.name, repo.format
        )));
    }
    let kept = filter(formats, repo, settings, manifest.components);
    let name = repo.name.as_str();
    let m = &services.metrics;
    m.replication_components.with_label_values(&[name, "listed"]).set(i64::try_from(kept.len()).unwrap_or(0));
    // The blobs the store lacks, each fetched once, checked against its digest.
    let mut wanted: BTreeMap<String, i64> = BTreeMap::new();
    for c in &kept {
        for f in &c.files {
            wanted.insert(f.sha256.clone(), f.size);
        }
    }
    let mut missing = Vec::new();
    for (sha, size) in wanted {
        let digest = Sha256Hex::parse(&sha).map_err(|e| BundleError::Invalid(e.to_string()))?;
        if services.blobs.stat(&digest).await?.is_none() {
            missing.push(BundleBlob { sha256: sha, size });
        }
    }
    let mut done = Replicated { listed: kept.len(), ..Replicated::default() };
    let fetched: Vec<u64> = futures_util::stream::iter(missing)
        .map(|b| fetch_blob(services, (&fetcher, &root, &source), name, b))
        .buffer_unordered(FETCHES)
        .try_collect()
        .await?;
    done.blobs_fetched = fetched.len();
    done.bytes_fetched = fetched.iter().sum();
    done.report.instance = instance;
    done.report.repository = repo.name.to_string();
    let label = format!("replication of {source} from {} (instance {})", settings.url, done.report.instance);
    bundle::apply(services, formats, repo, &label, &kept, &mut done.report).await?;
    m.replication_components.with_label_values(&[name, "held"]).set(i64::try_from(kept.len()).unwrap_or(0));
    if !done.report.changes.is_empty() {
        services.wake();
    }
    Ok(done)
}

/// Fetches one blob the source's components list into the store, checked against its digest.
async fn fetch_blob(
    services: &Services,
    (fetcher, root, source): (&Fetcher, &Location, &str),
    name: &str,
    b: BundleBlob,
) -> Result<u64, BundleError> {
    let at = root
        .join(&format!("repository/{source}/-/export/blobs/{}", b.sha256))
        .map_err(|e| BundleError::Invalid(e.to_string()))?;
    let body = fetcher
        .open(&at)
        .await
        .map_err(|e| BundleError::Io(e.to_string()))?
        .ok_or_else(|| BundleError::Io(format!("{at}: gone from the source since its manifest")))?;
    let reader = tokio_util::io::StreamReader::new(body.map_err(std::io::Error::other));
    bundle::store_blob(services, &b, reader, false).await?;
    let size = u64::try_from(b.size).unwrap_or(0);
    services.metrics.replication_fetched_bytes_total.with_label_values(&[name]).inc_by(size);
    Ok(size)
}

/// The components the filters keep: names, architectures, then the newest N versions of each
/// name (by the format's version order where it has one, else by time).
pub fn filter(
    formats: &Registry,
    repo: &Repository,
    settings: &Replication,
    components: Vec<BundleComponent>,
) -> Vec<BundleComponent> {
    let spec = formats.get(repo.format);
    let mut kept: Vec<BundleComponent> = components
        .into_iter()
        .filter(|c| settings.names.is_empty() || settings.names.iter().any(|p| glob(p, &c.name)))
        .filter(|c| {
            if settings.architectures.is_empty() {
                return true;
            }
            let paths: Vec<&str> = c.files.iter().map(|f| f.path.as_str()).collect();
            // None: the component installs on any (the format says).
            spec.architecture(&c.group, &paths).is_none_or(|a| settings.architectures.contains(&a))
        })
        .collect();
    if let Some(n) = settings.newest {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let order = |a: &BundleComponent, b: &BundleComponent| match spec.osv() {
            Some(o) => o.compare(&b.version, &a.version),
            None => b.created_at.cmp(&a.created_at),
        };
        let mut by_name: BTreeMap<(String, String), Vec<BundleComponent>> = BTreeMap::new();
        for c in kept {
            by_name.entry((c.group.clone(), c.name.clone())).or_default().push(c);
        }
        // Each version once, whatever its architectures: the newest `n` versions.
        kept = Vec::new();
        for (_, mut versions) in by_name {
            versions.sort_by(order);
            let mut seen: Vec<String> = Vec::new();
            for c in versions {
                if !seen.contains(&c.version) {
                    if seen.len() == n {
                        continue;
                    }
                    seen.push(c.version.clone());
                }
                kept.push(c);
            }
        }
    }
    kept
}

/// `*` matches any run of characters; the rest matches itself.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("hello", "hello"));
        assert!(!glob("hello", "hello2"));
        assert!(glob("lib*", "libssl3"));
        assert!(glob("*-dev", "libssl-dev"));
        assert!(glob("lib*-dev", "libssl-dev"));
        assert!(!glob("lib*-dev", "libssl"));
        assert!(glob("*", "anything"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxcyyb"));
        assert!(!glob("ab*ba", "aba"));
    }
}
