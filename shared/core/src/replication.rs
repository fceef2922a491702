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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

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

/// When each following repository was last tried in this process, which of them run here now,
/// and when each last caught up (in any process: the database's marks).
pub struct Schedule {
    started: i64,
    tried: Mutex<HashMap<i64, i64>>,
    running: Mutex<HashSet<i64>>,
    /// The source manifest's entity tag each follower last took in full, with the version of
    /// the follower's definition then (other filters take the same manifest otherwise).
    etags: Mutex<HashMap<i64, (i64, String)>>,
    /// When the marks were last read (ms), and each follower's last catch-up.
    caught_up: Mutex<(i64, HashMap<i64, i64>)>,
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            started: packyard_store::db::now_ms(),
            tried: Mutex::default(),
            running: Mutex::default(),
            etags: Mutex::default(),
            caught_up: Mutex::default(),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Replicated {
    /// The manifest's entity tag, when the source sent one.
    #[serde(skip)]
    pub etag: Option<String>,
    pub listed: usize,
    pub blobs_fetched: usize,
    pub bytes_fetched: u64,
    #[serde(flatten)]
    pub report: ImportReport,
}

/// The mark of a follower's last catch-up (`maintenance`), and of its runs' claims.
const CAUGHT_UP: &str = "replication-caught-up:";
const CLAIMED: &str = "replication-run:";
/// A run is given up after this long (a source that trickles its answer keeps no follower
/// busy for ever; each read has `proxy.read_timeout_ms` besides).
const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);
/// A run holds its follower's lease this long, renewed every [`RENEW`] while it runs: a worker
/// that died mid-run delays the next run by at most this.
const LEASE_MS: i64 = 120_000;
const RENEW: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts a run of every following repository whose period has passed since its last run
/// ended: one at a time across the installation (whichever process takes its lease first; the
/// lease is renewed while the run goes on), each in a task of its own so that a slow source
/// holds up no other follower. Returns how many started here.
pub async fn run_due(services: &Services, formats: &'static Registry, schedule: &Arc<Schedule>, now: i64) -> usize {
    let repos = match services.db.list_repositories().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the repositories to replicate");
            return 0;
        }
    };
    refresh_marks(services, schedule, now).await;
    let mut started = 0;
    for repo in repos {
        let Some(settings) = repo.settings.replication.clone() else { continue };
        lag(services, schedule, &repo, now);
        let period = i64::try_from(settings.every_secs).unwrap_or(60).saturating_mul(1000);
        let last = schedule.tried.lock().ok().and_then(|m| m.get(&repo.id).copied());
        let busy = schedule.running.lock().map(|r| r.contains(&repo.id)).unwrap_or(true);
        // (A tick's worth of slack: the ticks come a second apart, give or take.)
        if busy || last.is_some_and(|l| now - l + 250 < period) {
            continue;
        }
        if let Ok(mut m) = schedule.tried.lock() {
            m.insert(repo.id, now);
        }
        // Another process runs it, or ran it this period (a little slack for the ticks).
        let lease = format!("{CLAIMED}{}", repo.id);
        let at = packyard_store::db::now_ms();
        match services.db.claim_lease(&lease, at + LEASE_MS, at - (period - 500).max(500)).await {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(repository = %repo.name, error = %e, "cannot claim the replication run");
                continue;
            }
        }
        if let Ok(mut r) = schedule.running.lock() {
            r.insert(repo.id);
        }
        started += 1;
        let (services, schedule) = (services.clone(), schedule.clone());
        tokio::spawn(async move {
            // Let go of however the task ends (a panic too): the follower runs again.
            let _running = Running { schedule: schedule.clone(), repository: repo.id };
            let renew = async {
                loop {
                    tokio::time::sleep(RENEW).await;
                    let until = packyard_store::db::now_ms() + LEASE_MS;
                    if let Err(e) = services.db.set_mark(&lease, until).await {
                        tracing::warn!(repository = %repo.name, error = %e, "cannot renew the replication lease");
                    }
                }
            };
            let ran = tokio::select! {
                ran = run_one(&services, formats, &schedule, &repo, &settings) => ran,
                () = renew => None,
            };
            if let Some(at) = ran {
                if let Ok(mut c) = schedule.caught_up.lock() {
                    c.1.insert(repo.id, at);
                }
            }
            // Released: the next run is a period after this one ended.
            if let Err(e) = services.db.set_mark(&lease, packyard_store::db::now_ms()).await {
                tracing::warn!(repository = %repo.name, error = %e, "cannot release the replication lease");
            }
        });
    }
    started
}

/// Marks a follower as running in this process until dropped.
struct Running {
    schedule: Arc<Schedule>,
    repository: i64,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(mut r) = self.schedule.running.lock() {
            r.remove(&self.repository);
        }
    }
}

/// One run, counted and logged; when it caught up, the time it did.
async fn run_one(
    services: &Services,
    formats: &Registry,
    schedule: &Schedule,
    repo: &Repository,
    settings: &Replication,
) -> Option<i64> {
    let m = &services.metrics;
    let taken = schedule.etags.lock().ok().and_then(|e| e.get(&repo.id).cloned());
    let etag = taken.and_then(|(version, tag)| (version == repo.version).then_some(tag));
    let run = tokio::time::timeout(RUN_LIMIT, replicate(services, formats, repo, settings, etag.as_deref())).await;
    let outcome =
        run.unwrap_or_else(|_| Err(BundleError::Io(format!("the run took longer than {} s", RUN_LIMIT.as_secs()))));
    if let Ok(mut e) = schedule.etags.lock() {
        match outcome.as_ref().ok().and_then(|d| d.etag.clone()) {
            Some(tag) => e.insert(repo.id, (repo.version, tag)),
            None => e.remove(&repo.id),
        };
    }
    match outcome {
        Ok(done) => {
            let at = packyard_store::db::now_ms();
            if let Err(e) = services.db.set_mark(&format!("{CAUGHT_UP}{}", repo.id), at).await {
                tracing::warn!(repository = %repo.name, error = %e, "cannot record the catch-up");
            }
            m.replication_runs_total.with_label_values(&[repo.name.as_str(), "caught_up"]).inc();
            m.replication_lag_seconds.with_label_values(&[repo.name.as_str()]).set(0.0);
            if done.report.copied + done.report.deleted > 0 {
                tracing::info!(repository = %repo.name, listed = done.listed, stored = done.report.copied,
                    deleted = done.report.deleted, blobs = done.blobs_fetched, bytes = done.bytes_fetched,
                    "replicated");
            }
            Some(at)
        }
        Err(e) => {
            tracing::warn!(repository = %repo.name, source = %settings.url, error = %e,
                "replication failed; trying again in {} s", settings.every_secs);
            m.replication_runs_total.with_label_values(&[repo.name.as_str(), "failed"]).inc();
            None
        }
    }
}

/// Reads every follower's last catch-up (any process's) at most every 2 s.
async fn refresh_marks(services: &Services, schedule: &Schedule, now: i64) {
    let read_at = schedule.caught_up.lock().map(|c| c.0).unwrap_or(0);
    if now - read_at < 2000 {
        return;
    }
    match services.db.marks_under(CAUGHT_UP).await {
        Ok(marks) => {
            let by_repo = marks
                .into_iter()
                .filter_map(|(name, at)| Some((name.strip_prefix(CAUGHT_UP)?.parse::<i64>().ok()?, at)))
                .collect();
            if let Ok(mut c) = schedule.caught_up.lock() {
                *c = (now, by_repo);
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the followers' last catch-ups"),
    }
}

/// `packyard_replication_lag_seconds`: since the repository last caught up (since this process
/// started when it never did).
fn lag(services: &Services, schedule: &Schedule, repo: &Repository, now: i64) {
    let since = schedule.caught_up.lock().ok().and_then(|c| c.1.get(&repo.id).copied());
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
    etag: Option<&str>,
) -> Result<Replicated, BundleError> {
    let source = settings.repository.clone().unwrap_or_else(|| repo.name.to_string());
    let root = Location::parse(&settings.url).map_err(|e| BundleError::Invalid(e.to_string()))?;
    let fetcher = Fetcher::for_server(&services.config).map_err(|e| BundleError::Io(e.to_string()))?;
    if let Some(user) = &settings.username {
        let password = match &settings.password_sealed {
            Some((nonce, sealed)) => {
                let key = Replication::password_key(repo.name.as_str());
                let bytes = services
                    .security
                    .keystore
                    .open(&key, nonce, sealed)
                    .map_err(|e| BundleError::Io(format!("the source password of {}: {e}", repo.name)))?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
            None => String::new(),
        };
        fetcher.basic(user, &password);
    }
    let manifest_at = match &settings.snapshot {
        Some(s) => format!("repository/{source}/-/export/snapshots/{s}/manifest"),
        None => format!("repository/{source}/-/export/manifest"),
    };
    let at = root.join(&manifest_at).map_err(|e| BundleError::Invalid(e.to_string()))?;
    let fetched = fetcher
        .read_unless(&at, etag)
        .await
        .map_err(|e| BundleError::Io(e.to_string()))?
        .ok_or_else(|| BundleError::Invalid(format!("{at}: the source has no repository {source} to follow")))?;
    // The manifest taken last, unchanged: so is what it lists.
    let Some((body, tag)) = fetched else {
        return Ok(Replicated { etag: etag.map(str::to_string), ..Replicated::default() });
    };
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
    // A manifest older than the last one taken from this source is a replay (an attacker, or
    // a stale cache between the two, answering with what was once signed): refused. Older by
    // its generation, which only grows and is the same on every replica of the source (its
    // time is when a replica built it).
    let seen_mark = {
        let who = format!("{}\n{}\n{source}\n{}", settings.url, instance, settings.snapshot.as_deref().unwrap_or(""));
        let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(who.as_bytes()));
        format!("replication-seen:{}:{}", repo.id, &digest[..16])
    };
    if let (Some(generation), Some(seen)) = (manifest.generation, services.db.mark_at(&seen_mark).await?) {
        if generation < seen {
            return Err(BundleError::Invalid(format!(
                "{at} answered with a manifest of generation {generation} (made at {}), older than the one taken last (generation {seen}): a replay or a stale cache; refused",
                manifest.created_at
            )));
        }
    }
    let generation = manifest.generation;
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
    let mut done = Replicated { listed: kept.len(), etag: tag, ..Replicated::default() };
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
    // The follower refuses every other writer (`hosted::check_writable`); its own run writes as
    // the repository without its `replication` block.
    let mut writer = repo.clone();
    writer.settings.replication = None;
    bundle::apply(services, formats, &writer, &label, &kept, &mut done.report).await?;
    if let Some(generation) = generation {
        services.db.raise_mark(&seen_mark, generation).await?;
    }
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
