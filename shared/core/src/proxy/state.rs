//! Where an answer came from, when a cached copy is fresh, and the facts a process keeps in
//! memory about immutable bytes.

use std::collections::HashMap;
use std::sync::Mutex;

use packyard_store::db::proxy::ProxyEntry;

use super::*;

/// Where an answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheState {
    /// Served from the cache without asking the upstream.
    Hit,
    /// Fetched from the upstream now.
    Miss,
    /// The upstream confirmed the cached copy (304).
    Revalidated,
    /// The upstream failed; the cached copy is served anyway.
    Stale,
}

impl CacheState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Revalidated => "revalidated",
            Self::Stale => "stale",
        }
    }
}

#[derive(Debug, Clone)]
pub enum Outcome {
    /// The bytes are in the blob store under `entry.sha256`.
    Found(ProxyEntry, CacheState),
    /// The upstream said 404 (or another remembered status).
    Missing(u16, CacheState),
}

/// What a map of facts read out of immutable bytes (keyed by their digest) remembers for `key`.
pub(super) fn recall<K, Q, V>(map: &Mutex<HashMap<K, V>>, key: &Q) -> Option<V>
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
    V: Clone,
{
    map.lock().ok().and_then(|m| m.get(key).cloned())
}

/// Remembers `value` for `key`; a map at [`MEMORY_ENTRIES`] starts again (what it held is read
/// again when asked for).
pub(super) fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    if let Ok(mut m) = map.lock() {
        if m.len() >= MEMORY_ENTRIES {
            m.clear();
        }
        m.insert(key, value);
    }
}

/// The most metadata copies a process keeps in memory (see `FetchRequest::from_memory`).
pub(super) const MEMORY_ENTRIES: usize = 10_000;
/// The longest a copy is answered from memory, whatever the TTL: the blob of a copy another
/// replica replaced is kept for `worker.blob_grace_secs` (a day by default), far longer.
pub(super) const MEMORY_MAX_AGE_MS: i64 = 3_600_000;

pub(super) fn is_fresh(e: &ProxyEntry, req: &FetchRequest, now: i64) -> bool {
    let age = now.saturating_sub(e.fetched_at);
    let secs = |s: u64| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
    if e.is_negative() {
        age < secs(req.settings.negative_ttl_secs)
    } else {
        match req.freshness {
            Freshness::Immutable => true,
            Freshness::Metadata => age < secs(req.settings.metadata_ttl_secs),
        }
    }
}

pub(super) fn answer(e: ProxyEntry, state: CacheState) -> Outcome {
    if e.is_negative() {
        Outcome::Missing(u16::try_from(e.status).unwrap_or(404), state)
    } else {
        Outcome::Found(e, state)
    }
}
