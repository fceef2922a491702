//! The gate between upstreams and builds (`policy.*` of a repository, DESIGN §5b): every
//! format's routes ask [`judge`] about each version they are about to list or hand out, and
//! leave out or refuse what it holds back — too young (the minimum release age, from the
//! format's own publish time or the first sighting), denied by a quarantine rule, or (in
//! `enforce`) affected by advisories at or above the policy's level. A break-glass exception
//! lets one version of one name through until it expires.
//!
//! The read path asks the database nothing once warm: exceptions are kept per repository
//! version, advisories per package until the `repositories` watermark moves (an import moves
//! it), publish times for good (they do not change).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use packyard_model::osv::{Affected, Level};
use packyard_model::policy::{Hold, PolicySettings, Subject, VulnMode};
use packyard_model::repos::Repository;
use packyard_store::db::advisories::AdvisoryRow;
use packyard_store::db::policy::PolicyException;
use packyard_store::db::{now_ms, DbResult};

use crate::formats::OsvSpec;
use crate::services::Services;
use crate::vulnerabilities::Match;

/// The response header an `audit` policy names a version's advisories in.
pub const ADVISORIES_HEADER: &str = "x-packyard-advisories";

/// Most publish times remembered per process (each is a few dozen bytes).
const TIMES: usize = 200_000;
/// Most packages' advisories remembered per process.
const PACKAGES: usize = 50_000;

/// An advisory as a package's row holds it, with that package's entry.
pub type Advised = Arc<Vec<(AdvisoryRow, Affected)>>;

/// An ecosystem release's advisories by OSV package name, as a build judges with them.
pub type ByPackage = Arc<HashMap<String, Vec<(AdvisoryRow, Affected)>>>;

/// How long a replica reuses a verdict, or a list's filtering, it made (ms): a version coming of
/// age or an exception expiring is seen that much later at most; a policy or exception change
/// (it moves the repository's version) or an advisory import (the watermark) at once.
const REUSE_MS: i64 = 1_000;

/// The longest key kept for reuse.
const MAX_REUSED_KEY: usize = 700;

/// Most reused entries per repository and map (each lives a second).
const REUSED: usize = 10_000;

/// What something judged for reuse was judged under ([`PolicyCache::stamp`]).
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    watermark: i64,
    at: i64,
}

/// Something judged, with what it was judged under.
#[derive(Clone)]
struct Judged<T> {
    version: i64,
    watermark: i64,
    until: i64,
    value: T,
}

/// What a replica judged, by repository and then by key.
type JudgedBy<T> = Mutex<HashMap<i64, HashMap<String, Judged<T>>>>;

/// A list as read, and what of it passed.
type Filtered = (Arc<Vec<String>>, Arc<Vec<String>>);

/// An ecosystem and one of its releases (`None`: all of them).
type Release = (String, Option<String>);

/// The licenses a version declares.
pub type Licenses = Arc<Vec<String>>;

/// A binary's architecture, when it says one.
pub type Architecture = Option<Arc<str>>;

/// A repository's exceptions, under the repository version they were read at.
type Exceptions = HashMap<i64, (i64, Arc<Vec<PolicyException>>)>;

/// What a replica remembers for its policies.
#[derive(Default)]
pub struct PolicyCache {
    exceptions: Mutex<Exceptions>,
    advisories: Mutex<HashMap<(String, String), Advised>>,
    times: Mutex<HashMap<(i64, String), i64>>,
    /// Each unit's versions' first sightings, as the database holds them.
    seen_units: Mutex<HashMap<(i64, String), HashMap<String, i64>>>,
    /// The licenses read for a version (Conan's recipe revisions: their `conanfile.py`), which
    /// never change.
    licenses: Mutex<HashMap<(i64, String), Licenses>>,
    /// The architecture read for a binary (Conan's package ids: their `conaninfo.txt`), which
    /// never changes; `None`: it says none.
    architectures: Mutex<HashMap<(i64, String), Architecture>>,
    /// The advisories builds judge with, by ecosystem and release, under the `repositories`
    /// watermark they were read at (an import moves it): parsed once, not per build.
    by_release: Mutex<HashMap<Release, (i64, ByPackage)>>,
    /// Verdicts on versions (`module@version`), reused for [`REUSE_MS`].
    verdicts: JudgedBy<Verdict>,
    /// Filtered lists (a module's `@v/list`), reused for [`REUSE_MS`] while the list read is the
    /// same.
    lists: JudgedBy<Filtered>,
    /// Answers made from a published file (a filtered `@v/list`), by what they were made from,
    /// reused for [`REUSE_MS`].
    answers: JudgedBy<bytes::Bytes>,
    /// Published policy reports, parsed, by their content hash (a snapshot's never changes).
    reports: Mutex<HashMap<String, Arc<Report>>>,
    /// The `repositories` watermark the advisories were read under.
    seen: AtomicI64,
    /// Added to the clock (`debug.clock_offset_secs`: the release-age tests).
    offset_ms: AtomicI64,
}

impl PolicyCache {
    pub fn new(clock_offset_secs: i64) -> Self {
        let cache = Self::default();
        cache.offset_ms.store(clock_offset_secs.saturating_mul(1000), Ordering::Relaxed);
        cache
    }

    /// The policies' clock (ms).
    pub fn now_ms(&self) -> i64 {
        now_ms().saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }

    /// The `repositories` watermark moved (or this replica changed it): advisories are read again.
    pub fn observe(&self, repositories: i64) {
        if self.seen.swap(repositories, Ordering::AcqRel) != repositories {
            self.forget();
        }
    }

    pub fn forget(&self) {
        if let Ok(mut m) = self.advisories.lock() {
            m.clear();
        }
    }

    /// The advisories that name `name` in `ecosystem`, from memory when read before.
    pub async fn advisories(&self, services: &Services, ecosystem: &str, name: &str) -> DbResult<Advised> {
        let key = (ecosystem.to_string(), name.to_string());
        if let Some(a) = self.advisories.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(a);
        }
        let seen = self.seen.load(Ordering::Acquire);
        let rows = services.db.advisories_of(ecosystem, name).await?;
        let advised: Advised = Arc::new(
            rows.into_iter()
                .filter_map(|(a, detail)| {
                    let p: Affected = serde_json::from_str(&detail).ok()?;
                    Some((a, Affected { name: name.to_string(), ..p }))
                })
                .collect(),
        );
        // Kept only when no change arrived meanwhile (else the next read asks again): checked
        // under the lock `forget` takes after it moves the watermark.
        if let Ok(mut m) = self.advisories.lock() {
            if self.seen.load(Ordering::Acquire) == seen {
                if m.len() >= PACKAGES {
                    m.clear();
                }
                m.insert(key, advised.clone());
            }
        }
        Ok(advised)
    }

    async fn exceptions(&self, services: &Services, repo: &Repository) -> DbResult<Arc<Vec<PolicyException>>> {
        if let Some((v, e)) = self.exceptions.lock().ok().and_then(|m| m.get(&repo.id).cloned()) {
            if v >= repo.version {
                return Ok(e);
            }
        }
        let e = Arc::new(services.db.policy_exceptions(repo.id).await?);
        if let Ok(mut m) = self.exceptions.lock() {
            m.insert(repo.id, (repo.version, e.clone()));
        }
        Ok(e)
    }

    /// When the repository first saw each of `versions` of `unit` (0: they predate its first
    /// sighting of the unit), recorded in the database the first time
    /// ([`packyard_store::db::Db::policy_seen`]) and
    /// kept here after: a version is aged from the later of its own time and this one.
    pub async fn first_seen(
        &self,
        services: &Services,
        repository_id: i64,
        unit: &str,
        versions: &[&str],
    ) -> DbResult<HashMap<String, i64>> {
        let key = (repository_id, unit.to_string());
        // Looked up under the lock, nothing copied but the answer.
        let warm = self.seen_units.lock().ok().and_then(|m| {
            let known = m.get(&key)?;
            versions.iter().map(|v| Some((v.to_string(), *known.get(*v)?))).collect::<Option<HashMap<_, _>>>()
        });
        if let Some(out) = warm {
            return Ok(out);
        }
        let all = services.db.policy_seen(repository_id, unit, versions, self.now_ms()).await?;
        let out = versions.iter().filter_map(|v| Some((v.to_string(), *all.get(*v)?))).collect();
        keep(&self.seen_units, PACKAGES, key, all);
        Ok(out)
    }

    /// Whether this replica holds first sightings of `unit`.
    pub fn knows_unit(&self, repository_id: i64, unit: &str) -> bool {
        self.seen_units.lock().is_ok_and(|m| m.contains_key(&(repository_id, unit.to_string())))
    }

    /// The licenses remembered for `key` (a version of one repository).
    pub fn licenses(&self, repository_id: i64, key: &str) -> Option<Licenses> {
        self.licenses.lock().ok()?.get(&(repository_id, key.to_string())).cloned()
    }

    pub fn remember_licenses(&self, repository_id: i64, key: &str, licenses: Licenses) {
        keep(&self.licenses, TIMES, (repository_id, key.to_string()), licenses);
    }

    /// The advisories of `ecosystem` that apply to `release` (every release's when `None`), by
    /// package name: read and parsed again only when the `repositories` watermark moved since
    /// (it is read first, so an import that commits meanwhile is read again next time).
    pub async fn by_release(&self, services: &Services, ecosystem: &str, release: Option<&str>) -> DbResult<ByPackage> {
        let key = (ecosystem.to_string(), release.map(str::to_string));
        let (_, repositories, _) = services.db.watermarks().await?;
        if let Some((at, map)) = self.by_release.lock().ok().and_then(|m| m.get(&key).cloned()) {
            if at == repositories {
                return Ok(map);
            }
        }
        let mut map: HashMap<String, Vec<(AdvisoryRow, Affected)>> = HashMap::new();
        for (a, name, detail) in services.db.advisory_entries_in(ecosystem).await? {
            let Ok(p) = serde_json::from_str::<Affected>(&detail) else { continue };
            if release.is_some_and(|ours| crate::vulnerabilities::of_another_release(ours, &p.ecosystem)) {
                continue;
            }
            let p = Affected { name: name.clone(), ..p };
            map.entry(name).or_default().push((a, p));
        }
        let map = Arc::new(map);
        keep(&self.by_release, 64, key, (repositories, map.clone()));
        Ok(map)
    }

    /// The verdict judged on `key` of `repo` less than [`REUSE_MS`] ago, under its current
    /// version and advisories.
    pub fn verdict(&self, repo: &Repository, key: &str) -> Option<Verdict> {
        self.reused(&self.verdicts, repo, key)
    }

    /// What the reuse of something about to be judged is stamped with: taken before judging
    /// (an advisory import that lands meanwhile makes it stale at once).
    pub fn stamp(&self) -> Stamp {
        Stamp { watermark: self.seen.load(Ordering::Acquire), at: now_ms() }
    }

    pub fn remember_verdict(&self, repo: &Repository, key: &str, stamp: Stamp, verdict: &Verdict) {
        self.reuse(&self.verdicts, (repo, key, stamp), verdict.clone());
    }

    /// What passed of `listed` (`key`'s list) in `repo` less than [`REUSE_MS`] ago.
    pub fn filtered(&self, repo: &Repository, key: &str, listed: &[String]) -> Option<Arc<Vec<String>>> {
        let (was, kept) = self.reused(&self.lists, repo, key)?;
        (was.as_slice() == listed).then_some(kept)
    }

    pub fn remember_filtered(
        &self,
        (repo, key, stamp): (&Repository, &str, Stamp),
        listed: Vec<String>,
        kept: Arc<Vec<String>>,
    ) {
        self.reuse(&self.lists, (repo, key, stamp), (Arc::new(listed), kept));
    }

    /// The answer made from `key` (a published file) of `repo` less than [`REUSE_MS`] ago.
    pub fn answer(&self, repo: &Repository, key: &str) -> Option<bytes::Bytes> {
        self.reused(&self.answers, repo, key)
    }

    pub fn remember_answer(&self, repo: &Repository, key: &str, stamp: Stamp, body: bytes::Bytes) {
        self.reuse(&self.answers, (repo, key, stamp), body);
    }

    fn reused<T: Clone>(&self, map: &JudgedBy<T>, repo: &Repository, key: &str) -> Option<T> {
        let now = now_ms();
        let watermark = self.seen.load(Ordering::Acquire);
        let m = map.lock().ok()?;
        let j = m.get(&repo.id)?.get(key)?;
        (j.version == repo.version && j.watermark == watermark && now < j.until).then(|| j.value.clone())
    }

    /// Keeps `value` for reuse; not a key longer than [`MAX_REUSED_KEY`] or with a control
    /// character (names no client resolves; they would only fill the map).
    fn reuse<T>(&self, map: &JudgedBy<T>, (repo, key, stamp): (&Repository, &str, Stamp), value: T) {
        if key.len() > MAX_REUSED_KEY || key.chars().any(|c| c.is_control() && c != '\u{1}') {
            return;
        }
        let judged = Judged {
            version: repo.version,
            watermark: stamp.watermark,
            until: stamp.at.saturating_add(REUSE_MS),
            value,
        };
        if let Ok(mut m) = map.lock() {
            let of_repo = m.entry(repo.id).or_default();
            if of_repo.len() >= REUSED {
                // Only what is still fresh is worth keeping.
                of_repo.retain(|_, j| j.until > stamp.at);
                if of_repo.len() >= REUSED {
                    of_repo.clear();
                }
            }
            of_repo.insert(key.to_string(), judged);
        }
    }

    /// The architecture remembered for `key` (a binary of one repository): `Some(None)` when
    /// it says none.
    pub fn architecture(&self, repository_id: i64, key: &str) -> Option<Architecture> {
        self.architectures.lock().ok()?.get(&(repository_id, key.to_string())).cloned()
    }

    pub fn remember_architecture(&self, repository_id: i64, key: &str, architecture: Architecture) {
        keep(&self.architectures, TIMES, (repository_id, key.to_string()), architecture);
    }

    /// The report a snapshot file with content hash `etag` holds, parsed once.
    pub fn report(&self, etag: &str, bytes: &[u8]) -> Arc<Report> {
        if let Some(r) = self.reports.lock().ok().and_then(|m| m.get(etag).cloned()) {
            return r;
        }
        let report = Arc::new(Report::parse(&String::from_utf8_lossy(bytes)));
        keep(&self.reports, 1_000, etag.to_string(), report.clone());
        report
    }

    /// A publish time remembered for `key` (a version of one repository).
    pub fn time(&self, repository_id: i64, key: &str) -> Option<i64> {
        self.times.lock().ok()?.get(&(repository_id, key.to_string())).copied()
    }

    pub fn remember_time(&self, repository_id: i64, key: &str, ms: i64) {
        keep(&self.times, TIMES, (repository_id, key.to_string()), ms);
    }
}

/// Inserts into a map a replica keeps, emptied first when it holds `limit` entries.
fn keep<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, limit: usize, key: K, value: V) {
    if let Ok(mut m) = map.lock() {
        if m.len() >= limit {
            m.clear();
        }
        m.insert(key, value);
    }
}

/// What the gate says of one version.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Served; in `audit`, with the advisories that affect it.
    Pass(Vec<Match>),
    /// Not offered yet (404) or denied by a rule (403).
    Held(Hold),
    /// Advisories at or above the enforced level (403).
    Blocked(Vec<Match>),
}

impl Verdict {
    pub fn passes(&self) -> bool {
        matches!(self, Self::Pass(_))
    }

    /// The refusal's status (404 for a version not offered yet, else 403) and message; `None`
    /// when it passes.
    pub fn refusal(&self, name: &str, version: &str, repository: &str) -> Option<(u16, String)> {
        match self {
            Self::Pass(_) => None,
            Self::Held(h @ (Hold::Young { .. } | Hold::Undated { .. })) => {
                Some((404, format!("not found: {}", h.message(name, version))))
            }
            Self::Held(h) => Some((403, format!("{} (repository {repository})", h.message(name, version)))),
            Self::Blocked(found) => {
                let ids: Vec<String> = found.iter().map(|m| format!("{} ({})", m.id, m.severity)).collect();
                Some((
                    403,
                    format!(
                        "{name} {version} is refused by repository {repository}'s vulnerability policy: {}; use a version without them, or an administrator can add a policy exception",
                        ids.join(", ")
                    ),
                ))
            }
        }
    }

    /// Why it was held, as the refusals' metric labels it.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Pass(_) => "none",
            Self::Held(Hold::Young { .. }) => "young",
            Self::Held(Hold::Undated { .. }) => "undated",
            Self::Held(Hold::Rule { .. }) => "rule",
            Self::Blocked(_) => "vulnerabilities",
        }
    }

    /// The `X-Packyard-Advisories` value of an audited version: `ID (level), …`.
    pub fn audit_header(&self) -> Option<String> {
        match self {
            Self::Pass(found) if !found.is_empty() => {
                Some(found.iter().map(|m| format!("{} ({})", m.id, m.severity)).collect::<Vec<_>>().join(", "))
            }
            _ => None,
        }
    }
}

/// A version to judge: the policy's [`Subject`] (its `published_ms` filled by the caller when
/// the policy ages it), and the component's catalogue coordinates for the advisories.
pub struct Candidate<'a> {
    pub subject: Subject<'a>,
    /// `(component key, namespace, name)` as the catalogue keeps it.
    pub component: (&'a str, &'a str, &'a str),
}

/// Judges `c` under `policy` (the repository's [`Repository::gate`]).
pub async fn judge(
    services: &Services,
    formats: &crate::formats::Registry,
    repo: &Repository,
    policy: &PolicySettings,
    c: &Candidate<'_>,
) -> DbResult<Verdict> {
    let s = &c.subject;
    let now = services.policy.now_ms();
    let excepted = services
        .policy
        .exceptions(services, repo)
        .await?
        .iter()
        .any(|e| e.name == s.name && e.version == s.version && e.expires_at > now);
    if let Some(held) = held_before_advisories(policy, s, excepted, now) {
        return Ok(held);
    }
    if policy.vulnerabilities == VulnMode::Off {
        return Ok(Verdict::Pass(Vec::new()));
    }
    let (key, namespace, name) = c.component;
    let found = crate::vulnerabilities::matches(services, formats, repo, (key, namespace, name, s.version))
        .await
        .map_err(|e| match e {
            crate::vulnerabilities::VulnError::Db(d) => d,
            crate::vulnerabilities::VulnError::Invalid(m) => packyard_store::db::DbError::Corrupt(m),
        })?;
    Ok(by_advisories(policy, excepted, found))
}

/// The rules' and the release age's verdict, which an exception skips.
fn held_before_advisories(policy: &PolicySettings, s: &Subject<'_>, excepted: bool, now: i64) -> Option<Verdict> {
    if excepted {
        return None;
    }
    policy.rule_hold(s).or_else(|| policy.age_hold(s, now)).map(Verdict::Held)
}

/// The verdict on a version the rules and the age let through, with the advisories `found`.
fn by_advisories(policy: &PolicySettings, excepted: bool, found: Vec<Match>) -> Verdict {
    let level = |m: &Match| Level::parse(&m.severity).unwrap_or(Level::High);
    if policy.vulnerabilities == VulnMode::Enforce && !excepted {
        let over: Vec<Match> = found.iter().filter(|m| level(m) >= policy.vulnerability_severity).cloned().collect();
        if !over.is_empty() {
            return Verdict::Blocked(over);
        }
    }
    Verdict::Pass(found)
}

/// A repository's policy as a publication applies it (an APT or APK group's merged index):
/// everything a verdict needs, read once per build, so that each entry of an index is judged on
/// the build's reading thread without a query. What it held or audited is written beside the
/// index ([`Report`], the snapshot's hidden [`POLICY_FILE`]), for the downloads and for the
/// rebuild when the first held version comes of age.
pub struct BuildGate {
    policy: PolicySettings,
    repository: String,
    now: i64,
    /// The live exceptions: `(name, version)` → when each expires.
    exceptions: HashMap<(String, String), i64>,
    /// The advisories of the unit's release by OSV package name (none while `vulnerabilities`
    /// is off).
    advisories: ByPackage,
    osv: Option<&'static dyn OsvSpec>,
    /// The ecosystem release of the unit's packages (`OsvSpec::release_of`): an advisory entry
    /// of another release does not apply.
    release: Option<String>,
    /// When the repository first saw each version of the unit (`name version`); `None`: it sees
    /// the unit for the first time (what it lists now predates the policy's watch).
    seen: Option<HashMap<String, i64>>,
    /// The versions judged, recorded as seen when the build is done ([`BuildGate::record`]).
    judged: Mutex<HashSet<String>>,
    /// When the first exception that let a held version through expires.
    excepted_until: AtomicI64,
    /// What was held back or audited ([`BuildGate::note`]).
    lines: Mutex<Vec<ReportLine>>,
    /// The packages (`name architecture`, [`BuildGate::slot`]) of which a version was held back
    /// or let through only by an exception: what the index listed of them before may be carried
    /// forward ([`BuildGate::unsettled`]).
    unsettled: Mutex<HashSet<String>>,
}

/// One entry of an index to judge.
pub struct Entry<'a> {
    pub subject: Subject<'a>,
    /// The name the ecosystem's advisories give it (a Debian binary package's source package).
    pub advisory_name: &'a str,
}

impl BuildGate {
    /// The gate of a merge's build of `unit` (a group's, a gated proxy's) when the repository
    /// has a policy (`None` without one); `services` is the worker's (a builder made without
    /// them cannot apply a policy).
    pub async fn for_merge(
        services: Option<&Services>,
        repo: &Repository,
        osv: Option<&'static dyn OsvSpec>,
        unit: &str,
    ) -> Result<Option<Arc<Self>>, crate::publication::BuildError> {
        let Some(policy) = repo.gate().filter(|_| repo.publishes_merge()) else {
            return Ok(None);
        };
        let Some(services) = services else {
            return Err(crate::publication::BuildError::other(format!(
                "repository {} has a policy, and this builder was made without the services that apply one",
                repo.name
            )));
        };
        Ok(Some(Arc::new(Self::prepare(services, repo, policy, osv, unit).await?)))
    }

    /// The gate of `repo` (one whose [`Repository::gate`] is some) for a build of `unit`, at
    /// the policies' clock.
    pub async fn prepare(
        services: &Services,
        repo: &Repository,
        policy: &PolicySettings,
        osv: Option<&'static dyn OsvSpec>,
        unit: &str,
    ) -> DbResult<Self> {
        let now = services.policy.now_ms();
        let exceptions = services
            .db
            .policy_exceptions(repo.id)
            .await?
            .into_iter()
            .filter(|e| e.expires_at > now)
            .map(|e| ((e.name, e.version), e.expires_at))
            .collect();
        let release = osv.and_then(|o| o.release_of(unit));
        let advisories = match osv.filter(|_| policy.vulnerabilities != VulnMode::Off) {
            Some(osv) => services.policy.by_release(services, osv.ecosystem(), release.as_deref()).await?,
            None => ByPackage::default(),
        };
        let seen = services.db.policy_seen_of(repo.id, unit).await?;
        Ok(Self {
            policy: policy.clone(),
            repository: repo.name.to_string(),
            now,
            exceptions,
            advisories,
            osv,
            release,
            seen,
            judged: Mutex::new(HashSet::new()),
            excepted_until: AtomicI64::new(0),
            lines: Mutex::new(Vec::new()),
            unsettled: Mutex::new(HashSet::new()),
        })
    }

    /// The verdict on `e`, whose format gives it `own_ms` as its publish time (APK's build
    /// time) or none (APT): aged from the later of that and the repository's first sighting.
    pub fn judge(&self, e: &Entry<'_>, own_ms: Option<i64>) -> Verdict {
        let (verdict, excepted) = self.verdict(e, own_ms, true);
        // (An exception unsettles a package only where it let a held version through.)
        if !verdict.passes() || (excepted && !self.verdict(e, own_ms, false).0.passes()) {
            if let Ok(mut unsettled) = self.unsettled.lock() {
                unsettled.insert(Self::slot(e.subject.name, e.subject.architecture));
            }
        }
        verdict
    }

    /// How the carrying forward names a package of an index that lists one version of each
    /// (Debian's and Alpine's): its name and architecture.
    pub fn slot(name: &str, architecture: Option<&str>) -> String {
        format!("{name} {}", architecture.unwrap_or_default())
    }

    /// The packages ([`BuildGate::slot`]) of which the build so far held a version back, or let
    /// one through only by an exception. An index that lists one version of each package (an
    /// APT or APK upstream drops the previous version when it publishes the next) would lose
    /// such a package while its new version waits: the merge carries forward what its last
    /// published index listed of them, where the policy lets that through (so resolvers take
    /// the previous version, as with an index that lists several).
    pub fn unsettled(&self) -> HashSet<String> {
        self.unsettled.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// The verdict on `e` (with the live exceptions, or as if there were none), and whether an
    /// exception applied.
    fn verdict(&self, e: &Entry<'_>, own_ms: Option<i64>, exceptions: bool) -> (Verdict, bool) {
        let s = &e.subject;
        let key = seen_key(s.name, s.version);
        let first = match &self.seen {
            None => 0,
            Some(seen) => seen.get(&key).copied().unwrap_or(self.now),
        };
        if let Ok(mut judged) = self.judged.lock() {
            judged.insert(key);
        }
        let subject = Subject { published_ms: Some(own_ms.map_or(first, |t| t.max(first))), ..s.clone() };
        let exception =
            self.exceptions.get(&(s.name.to_string(), s.version.to_string())).copied().filter(|_| exceptions);
        let excepted = exception.is_some();
        if let Some(until) = exception {
            // Let through until the exception expires: the index is published again then.
            let _ = self
                .excepted_until
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |was| (was == 0 || until < was).then_some(until));
        }
        if let Some(held) = held_before_advisories(&self.policy, &subject, excepted, self.now) {
            return (held, excepted);
        }
        let Some(osv) = self.osv.filter(|_| self.policy.vulnerabilities != VulnMode::Off) else {
            return (Verdict::Pass(Vec::new()), excepted);
        };
        let version = osv.osv_version(s.version);
        let mut found: Vec<Match> = Vec::new();
        for (a, p) in self.advisories.get(e.advisory_name).map(Vec::as_slice).unwrap_or_default() {
            // `Debian:11`'s entry says nothing of bookworm's packages.
            if self
                .release
                .as_deref()
                .is_some_and(|ours| crate::vulnerabilities::of_another_release(ours, &p.ecosystem))
            {
                continue;
            }
            if p.affects(&version, &|x, y| osv.compare(x, y)) && !found.iter().any(|m| m.id == a.id) {
                found.push(crate::vulnerabilities::matched(a, p));
            }
        }
        found.sort_by(|a, b| {
            let level = |m: &Match| Level::parse(&m.severity).unwrap_or(Level::High);
            level(b).cmp(&level(a)).then_with(|| a.id.cmp(&b.id))
        });
        (by_advisories(&self.policy, excepted, found), excepted)
    }

    /// What the report says of `v` for the file at `path`: a refusal, or 200 (with the
    /// advisories of an audited version).
    fn line(&self, path: &str, (name, version): (&str, &str), v: &Verdict) -> ReportLine {
        let (status, text) = match v.refusal(name, version, &self.repository) {
            Some(r) => r,
            None => (200, v.audit_header().unwrap_or_default()),
        };
        let due = match v {
            Verdict::Held(Hold::Young { until_ms, .. }) => *until_ms,
            _ => 0,
        };
        ReportLine { path: path.to_string(), status, due, reason: v.reason().to_string(), text }
    }

    /// Notes what the report says of `v` for the file at `path` (every file the index lists
    /// has a line: the downloads serve only those); true when `v` passes.
    pub fn note(&self, path: &str, (name, version): (&str, &str), v: &Verdict) -> bool {
        let line = self.line(path, (name, version), v);
        if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
        v.passes()
    }

    /// What the build held back or audited, with a line (no path) saying when the first
    /// exception that let a version through expires: the index is published again then.
    pub fn report(&self) -> Report {
        let mut lines = self.lines.lock().map(|l| l.clone()).unwrap_or_default();
        let until = self.excepted_until.load(Ordering::Acquire);
        if until > 0 {
            lines.push(ReportLine {
                path: String::new(),
                status: 200,
                due: until,
                reason: "exception".into(),
                text: String::new(),
            });
        }
        Report::of(lines)
    }

    /// Records the first sightings of the versions judged (`unit` as [`BuildGate::prepare`]
    /// had it): once the build is done, so that a failed build sees nothing.
    pub async fn record(&self, services: &Services, repository_id: i64, unit: &str) -> DbResult<()> {
        let judged: Vec<String> = self.judged.lock().map(|j| j.iter().cloned().collect()).unwrap_or_default();
        let refs: Vec<&str> = judged.iter().map(String::as_str).collect();
        services.db.policy_seen(repository_id, unit, &refs, self.now).await?;
        Ok(())
    }
}

/// How first sightings name a version (`name version`; a longer one than the column holds by
/// its digest).
fn seen_key(name: &str, version: &str) -> String {
    let key = format!("{name} {version}");
    if key.len() <= 190 {
        return key;
    }
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(key.as_bytes())))
}

/// The hidden snapshot file beside a gated index listing its policy's verdict on every file its
/// entries name ([`Report`]).
pub const POLICY_FILE: &str = ".policy";

/// One line of a [`Report`]: a file of the index's entries, the status a download of it gets
/// (200 with the advisories' header for an audited one), when a young one comes of age (0: not
/// by age), why, and the message (or the header's value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLine {
    pub path: String,
    pub status: u16,
    pub due: i64,
    pub reason: String,
    pub text: String,
}

/// What a gated build decided of each file its index's entries list (held back, audited or let
/// through), by file path: written as tab-separated lines.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub lines: Vec<ReportLine>,
    /// `lines` by path.
    by_path: HashMap<String, usize>,
}

impl Report {
    pub fn render(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        self.lines
            .iter()
            .map(|l| format!("{}\t{}\t{}\t{}\t{}\n", clean(&l.path), l.status, l.due, l.reason, clean(&l.text)))
            .collect()
    }

    pub fn parse(text: &str) -> Self {
        let lines = text
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(5, '\t');
                let (path, status, due, reason, text) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
                Some(ReportLine {
                    path: path.to_string(),
                    status: status.parse().ok()?,
                    due: due.parse().ok()?,
                    reason: reason.to_string(),
                    text: text.to_string(),
                })
            })
            .collect();
        Self::of(lines)
    }

    pub fn of(lines: Vec<ReportLine>) -> Self {
        let by_path = lines.iter().enumerate().map(|(i, l)| (l.path.clone(), i)).collect();
        Self { lines, by_path }
    }

    /// When the first version held for its age comes of age.
    pub fn due(&self) -> Option<i64> {
        self.lines.iter().filter(|l| l.due > 0).map(|l| l.due).min()
    }

    pub fn find(&self, path: &str) -> Option<&ReportLine> {
        self.position(path).and_then(|i| self.lines.get(i))
    }

    /// Where `path`'s line is in `lines`.
    pub fn position(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied().filter(|i| self.lines.get(*i).is_some_and(|l| !l.path.is_empty()))
    }
}

/// Requests a new publication of every unit `repo` published (its policy, an exception or the
/// advisories changed what its indexes leave out), and of the groups that contain it (they
/// merge what it lets through); true when any was requested. A proxy that publishes nothing
/// (no policy, or no longer one) requests only its groups'.
pub async fn republish(services: &Services, repo: &Repository) -> DbResult<bool> {
    let mut targets = Vec::new();
    if repo.repo_type != packyard_model::repos::RepoType::Proxy || repo.publishes_merge() {
        targets.push(repo.id);
    }
    for name in services.db.groups_containing(repo.id).await? {
        if let Some(group) = services.db.repository_by_name(&name).await? {
            targets.push(group.id);
        }
    }
    let mut any = false;
    for id in targets {
        let units: Vec<(String, String)> =
            services.db.units_of(id).await?.into_iter().map(|u| (u.kind, u.unit_key)).collect();
        if !units.is_empty() {
            services.db.request_changes(id, &units).await?;
            any = true;
        }
    }
    if any {
        services.wake();
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_what_was_written() {
        let line = |path: &str, status, due, text: &str| ReportLine {
            path: path.into(),
            status,
            due,
            reason: "young".into(),
            text: text.into(),
        };
        let report = Report::of(vec![
            line("pool/up/pool/main/h/hello/hello_1.1_amd64.deb", 404, 2_000, "not found:\thello 1.1\nis young"),
            line("hello-2.12-r1.apk", 200, 0, "ALPINE-1 (high)"),
            line("", 200, 1_500, ""),
        ]);
        let back = Report::parse(&report.render());
        assert_eq!(back.lines.len(), 3);
        let held = back.find("pool/up/pool/main/h/hello/hello_1.1_amd64.deb");
        assert_eq!(
            held.map(|l| (l.status, l.due, l.text.as_str())),
            Some((404, 2_000, "not found: hello 1.1 is young"))
        );
        assert_eq!(back.find("hello-2.12-r1.apk").map(|l| l.text.as_str()), Some("ALPINE-1 (high)"));
        assert_eq!(back.find(""), None, "the exception line names no file");
        assert_eq!(back.due(), Some(1_500), "the first that comes: an exception's expiry");
        assert_eq!(Report::parse("garbage\nx\ty\n").lines.len(), 0);
    }
}
