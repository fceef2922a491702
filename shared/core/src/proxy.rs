//! Proxy repositories, written once for every format: fetching a path from the upstream,
//! keeping the bytes in the blob store and a row in `proxy_cache`, and answering later requests
//! from there.
//!
//! - Immutable files (packages, by-hash indexes) are fetched once and kept; metadata is served
//!   for `metadata_ttl_secs`, then revalidated (`If-None-Match`/`If-Modified-Since`).
//! - Only the statuses a format names (404, and 410 for some) mean "not there"; they are
//!   remembered for `negative_ttl_secs` for immutable files, and never for metadata (which may
//!   appear upstream at any moment); any other upstream answer is an error, never cached.
//! - Concurrent misses for one path in one process make one upstream request (single-flight);
//!   the fetch runs on its own task, so a client that hangs up does not cancel it.
//! - When the upstream fails and a copy is cached, the copy is served (stale-if-error) and
//!   counted in `packyard_proxy_stale_served_total` — unless it is stale for longer than
//!   `proxy.max_stale_secs` or past its expiry (APT's `Valid-Until`). A proxy with
//!   `proxy.offline` asks its upstream nothing: its cache however old, else "not there".
//! - Outbound requests have connect and read timeouts and a per-process bound on fetches in
//!   flight; host names resolving to loopback, private or link-local addresses are refused
//!   unless `proxy.allow_private_addresses` or inside `proxy.allowed_networks` (checked at
//!   connect time, on every resolved address, also after redirects).

mod client;
mod failure;
mod guard;
mod request;
mod state;

pub use client::Proxy;
pub use failure::ProxyError;
use failure::{classify, error_label, internal, is_stale_connection, redact, unavailable, Attempt, Timeouts};
use guard::{InflightGuard, SharedFetch};
pub use request::{upstream_url, Elsewhere, ExpiryOf, FetchRequest, Freshness, ListedIn, Listing, ListingOf};
use state::{answer, is_fresh, recall, remember, MEMORY_ENTRIES, MEMORY_MAX_AGE_MS};
pub use state::{CacheState, Outcome};
