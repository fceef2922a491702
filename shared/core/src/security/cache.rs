//! Node-local caches of authentication decisions and repository records, checked against the
//! database's watermarks. A background poll (every `security.watermark_ttl_ms`) reads the
//! watermarks; when one moved, the matching cache is dropped. Requests themselves never query
//! the watermark, so a warmed request runs no database query.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::model::Principal;
use packyard_model::repos::Repository;
use packyard_store::metrics::Metrics;

/// Upper bound on cached entries; past it the cache starts over (a flood of distinct
/// credentials or names cannot grow memory without bound).
const MAX_ENTRIES: usize = 10_000;

struct Entry<T> {
    value: T,
    at: Instant,
}

pub struct SecurityCache {
    key: [u8; 32],
    /// Bumped by every clear: a lookup that started before a clear must not store its (possibly
    /// stale) result after it.
    security_epoch: std::sync::atomic::AtomicU64,
    repositories_epoch: std::sync::atomic::AtomicU64,
    ttl: Duration,
    security_version: AtomicI64,
    repositories_version: AtomicI64,
    decisions: RwLock<HashMap<[u8; 32], Entry<Arc<Principal>>>>,
    /// Credentials refused for a reason that costs a round trip to find again (a directory
    /// user's token whose user is gone there), remembered as long as a decision is.
    refusals: RwLock<HashMap<[u8; 32], Instant>>,
    anonymous: RwLock<Option<Arc<Principal>>>,
    repositories: RwLock<hashbrown::HashMap<String, Entry<Arc<Repository>>>>,
    counters: Counters,
}

/// The caches' hit and miss counters, their labels resolved once (a lookup by label values
/// hashes them on every request): `[auth, anonymous, repository]`.
struct Counters {
    hit: [packyard_store::metrics::IntCounter; 3],
    miss: [packyard_store::metrics::IntCounter; 3],
}

#[derive(Clone, Copy)]
enum Which {
    Auth = 0,
    Anonymous = 1,
    Repository = 2,
}

impl Counters {
    fn new(metrics: &Metrics) -> Self {
        let of = |result: &str| {
            ["auth", "anonymous", "repository"].map(|n| metrics.cache_requests_total.with_label_values(&[n, result]))
        };
        Self { hit: of("hit"), miss: of("miss") }
    }
}

impl SecurityCache {
    /// `secret` keys the HMAC of credentials, so the map never holds a usable credential.
    pub fn new(secret: &str, ttl: Duration, metrics: Arc<Metrics>) -> Self {
        let hk = hkdf::Hkdf::<Sha256>::new(Some(b"packyard auth cache"), secret.as_bytes());
        let mut key = [0u8; 32];
        // 32 bytes is always a valid HKDF-SHA256 output length.
        let _ = hk.expand(b"credential hmac v1", &mut key);
        Self {
            key,
            security_epoch: std::sync::atomic::AtomicU64::new(0),
            repositories_epoch: std::sync::atomic::AtomicU64::new(0),
            ttl,
            security_version: AtomicI64::new(0),
            repositories_version: AtomicI64::new(0),
            decisions: RwLock::new(HashMap::new()),
            refusals: RwLock::new(HashMap::new()),
            anonymous: RwLock::new(None),
            repositories: RwLock::new(hashbrown::HashMap::new()),
            counters: Counters::new(&metrics),
        }
    }

    /// HMAC-SHA256 of a credential under the cache key.
    pub fn credential_key(&self, credential: &[u8]) -> [u8; 32] {
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(m) => m,
            Err(_) => return [0u8; 32],
        };
        mac.update(credential);
        mac.finalize().into_bytes().into()
    }

    fn count(&self, which: Which, hit: bool) {
        let counters = if hit { &self.counters.hit } else { &self.counters.miss };
        counters[which as usize].inc();
    }

    pub fn decision(&self, key: &[u8; 32]) -> Option<Arc<Principal>> {
        let found = self
            .decisions
            .read()
            .ok()
            .and_then(|m| m.get(key).filter(|e| e.at.elapsed() < self.ttl).map(|e| e.value.clone()));
        self.count(Which::Auth, found.is_some());
        found
    }

    /// The epoch to pass to `store_*` after a database lookup.
    pub fn security_epoch(&self) -> u64 {
        self.security_epoch.load(Ordering::Acquire)
    }

    /// How long a cached decision or repository is used before it is looked up again.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn repositories_epoch(&self) -> u64 {
        self.repositories_epoch.load(Ordering::Acquire)
    }

    pub fn store_decision(&self, key: [u8; 32], principal: Arc<Principal>, epoch: u64) {
        if let Ok(mut m) = self.decisions.write() {
            if self.security_epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            if m.len() >= MAX_ENTRIES {
                m.clear();
            }
            m.insert(key, Entry { value: principal, at: Instant::now() });
        }
    }

    /// Whether `key` was refused within the TTL.
    pub fn refused(&self, key: &[u8; 32]) -> bool {
        self.refusals.read().ok().is_some_and(|m| m.get(key).is_some_and(|at| at.elapsed() < self.ttl))
    }

    pub fn store_refusal(&self, key: [u8; 32], epoch: u64) {
        if let Ok(mut m) = self.refusals.write() {
            if self.security_epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            if m.len() >= MAX_ENTRIES {
                m.clear();
            }
            m.insert(key, Instant::now());
        }
    }

    pub fn forget_decision(&self, key: &[u8; 32]) {
        if let Ok(mut m) = self.decisions.write() {
            m.remove(key);
        }
    }

    pub fn anonymous(&self) -> Option<Arc<Principal>> {
        let found = self.anonymous.read().ok().and_then(|a| a.clone());
        self.count(Which::Anonymous, found.is_some());
        found
    }

    pub fn store_anonymous(&self, p: Arc<Principal>, epoch: u64) {
        if let Ok(mut a) = self.anonymous.write() {
            if self.security_epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            *a = Some(p);
        }
    }

    pub fn repository(&self, name: &str) -> Option<Arc<Repository>> {
        let found = self
            .repositories
            .read()
            .ok()
            .and_then(|m| m.get(name).filter(|e| e.at.elapsed() < self.ttl).map(|e| e.value.clone()));
        self.count(Which::Repository, found.is_some());
        found
    }

    pub fn store_repository(&self, repo: Arc<Repository>, epoch: u64) {
        if let Ok(mut m) = self.repositories.write() {
            if self.repositories_epoch.load(Ordering::Acquire) != epoch {
                return;
            }
            if m.len() >= MAX_ENTRIES {
                m.clear();
            }
            m.insert(repo.name.to_string(), Entry { value: repo, at: Instant::now() });
        }
    }

    /// Applies freshly read watermarks; drops what they invalidate. Returns true if anything moved.
    pub fn observe(&self, security: i64, repositories: i64) -> bool {
        let mut moved = false;
        if self.security_version.swap(security, Ordering::AcqRel) != security {
            self.clear_security();
            moved = true;
        }
        if self.repositories_version.swap(repositories, Ordering::AcqRel) != repositories {
            self.clear_repositories();
            moved = true;
        }
        moved
    }

    /// Drops every cached decision (after a local change, before the poll notices it).
    pub fn clear_security(&self) {
        if let Ok(mut m) = self.decisions.write() {
            // Bumped under the map's lock, so a store holding the lock sees either the old
            // epoch before the clear or the new one after it.
            self.security_epoch.fetch_add(1, Ordering::AcqRel);
            m.clear();
        }
        if let Ok(mut r) = self.refusals.write() {
            r.clear();
        }
        if let Ok(mut a) = self.anonymous.write() {
            *a = None;
        }
        // Again once everything is cleared: what was read between the first bump and a clear
        // (the anonymous principal, a refusal) is not taken for current under the new epoch
        // (the API's hot answers compare epochs only).
        self.security_epoch.fetch_add(1, Ordering::AcqRel);
    }

    pub fn clear_repositories(&self) {
        if let Ok(mut m) = self.repositories.write() {
            self.repositories_epoch.fetch_add(1, Ordering::AcqRel);
            m.clear();
        }
    }
}
