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

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use packyard_model::osv::{Affected, Level};
use packyard_model::policy::{Hold, PolicySettings, Subject, VulnMode};
use packyard_model::repos::Repository;
use packyard_store::db::advisories::AdvisoryRow;
use packyard_store::db::policy::PolicyException;
use packyard_store::db::{now_ms, DbResult};

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
        // Kept only when no change arrived meanwhile (else the next read asks again).
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
        if let Ok(mut m) = self.seen_units.lock() {
            if m.len() >= PACKAGES {
                m.clear();
            }
            m.insert(key, all);
        }
        Ok(out)
    }

    /// Whether this replica holds first sightings of `unit`.
    pub fn knows_unit(&self, repository_id: i64, unit: &str) -> bool {
        self.seen_units.lock().is_ok_and(|m| m.contains_key(&(repository_id, unit.to_string())))
    }

    /// A publish time remembered for `key` (a version of one repository).
    pub fn time(&self, repository_id: i64, key: &str) -> Option<i64> {
        self.times.lock().ok()?.get(&(repository_id, key.to_string())).copied()
    }

    pub fn remember_time(&self, repository_id: i64, key: &str, ms: i64) {
        if let Ok(mut m) = self.times.lock() {
            if m.len() >= TIMES {
                m.clear();
            }
            m.insert((repository_id, key.to_string()), ms);
        }
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
    if !excepted {
        if let Some(h) = policy.rule_hold(s) {
            return Ok(Verdict::Held(h));
        }
        if let Some(h) = policy.age_hold(s, now) {
            return Ok(Verdict::Held(h));
        }
    }
    if policy.vulnerabilities == VulnMode::Off {
        return Ok(Verdict::Pass(Vec::new()));
    }
    let (key, namespace, name) = c.component;
    let found = crate::vulnerabilities::matches(services, formats, repo.format, (key, namespace, name, s.version))
        .await
        .map_err(|e| match e {
            crate::vulnerabilities::VulnError::Db(d) => d,
            crate::vulnerabilities::VulnError::Invalid(m) => packyard_store::db::DbError::Corrupt(m),
        })?;
    let level = |m: &Match| Level::parse(&m.severity).unwrap_or(Level::High);
    if policy.vulnerabilities == VulnMode::Enforce && !excepted {
        let over: Vec<Match> = found.iter().filter(|m| level(m) >= policy.vulnerability_severity).cloned().collect();
        if !over.is_empty() {
            return Ok(Verdict::Blocked(over));
        }
    }
    Ok(Verdict::Pass(found))
}
