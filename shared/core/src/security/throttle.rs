//! Login throttling with a progressive delay, per user and client address (the real client's:
//! `server.trusted_proxies` decides whose forwarding headers count). The first `max_failures`
//! failed attempts are free; after them each attempt waits a delay from the last failure —
//! one second, then twice as long after each further failure, up to `longest`
//! (`security.login_window_secs`) — and is refused meanwhile (429 with `Retry-After`), even
//! with the right password: checking it would tell a guesser. So a person who mistyped ten
//! times waits a second, not a window, and a guesser gets about one try per `longest` however
//! long it keeps at it. The failures are forgotten at a success, or [`MEMORY`] after the last
//! one. Counted where every replica sees the same count: in Redis when `cache.redis_url` is set
//! (the database while Redis is down), otherwise in the database — a guesser spreading attempts
//! over the replicas gains nothing.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::events::Redis;
use packyard_store::db::{now_ms, Db};

/// How long failed logins are remembered after the last one.
pub const MEMORY: Duration = Duration::from_secs(3600);

pub struct LoginThrottle {
    max_failures: u32,
    longest: Duration,
    db: Db,
    redis: Option<Arc<Redis>>,
    /// The user and address pairs this process refused for their delay, until when: a sign-in
    /// answered from the cache of proven passwords (which asks neither Redis nor the database)
    /// is refused too meanwhile, or a guesser could test its guesses there for free.
    delayed: std::sync::Mutex<std::collections::HashMap<(String, IpAddr), std::time::Instant>>,
    /// How many pairs `delayed` holds (read without the lock on every cached sign-in).
    delaying: std::sync::atomic::AtomicUsize,
}

/// One login attempt that [`LoginThrottle::check`] let through.
pub struct Attempt {
    key: String,
    /// Earlier failures were counted (a success has something to forget).
    counted: bool,
    username: String,
    addr: IpAddr,
}

impl LoginThrottle {
    pub fn new(max_failures: u32, longest: Duration, db: Db, redis: Option<Arc<Redis>>) -> Self {
        Self {
            max_failures,
            longest,
            db,
            redis,
            delayed: std::sync::Mutex::new(std::collections::HashMap::new()),
            delaying: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// While this process holds `username` at `addr` to a delay: how long it has left. (The
    /// check of a sign-in from the cache of proven passwords: see [`Self::delayed`].)
    pub fn delayed_here(&self, username: &str, addr: IpAddr) -> Option<Duration> {
        if self.delaying.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return None;
        }
        let mut held = self.delayed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (username.to_lowercase(), addr);
        let left = held.get(&key).and_then(|until| until.checked_duration_since(std::time::Instant::now()));
        if left.is_none() && held.remove(&key).is_some() {
            self.delaying.store(held.len(), std::sync::atomic::Ordering::Relaxed);
        }
        left
    }

    fn hold(&self, username: &str, addr: IpAddr, wait: Duration) {
        let mut held = self.delayed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = std::time::Instant::now();
        if held.len() > 10_000 {
            held.retain(|_, until| *until > now);
        }
        held.insert((username.to_lowercase(), addr), now + wait);
        self.delaying.store(held.len(), std::sync::atomic::Ordering::Relaxed);
    }

    fn release(&self, username: &str, addr: IpAddr) {
        if self.delaying.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            return;
        }
        let mut held = self.delayed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.remove(&(username.to_lowercase(), addr));
        self.delaying.store(held.len(), std::sync::atomic::Ordering::Relaxed);
    }

    fn memory_ms() -> i64 {
        i64::try_from(MEMORY.as_millis()).unwrap_or(i64::MAX / 4)
    }

    /// The user name and address as a key (hex SHA-256: any user name, a fixed length).
    fn key(username: &str, addr: IpAddr) -> String {
        let mut h = Sha256::new();
        h.update(username.as_bytes());
        h.update([0]);
        h.update(addr.to_string().as_bytes());
        hex::encode(h.finalize())
    }

    /// The delay after the last of `failures` failed logins: none for the first
    /// `max_failures`, then 1 s, doubling with each one more, at most `longest`.
    pub fn delay(&self, failures: i64) -> Duration {
        let over = failures - i64::from(self.max_failures);
        if over < 0 {
            return Duration::ZERO;
        }
        let doubled = Duration::from_secs(1u64 << over.min(30));
        doubled.min(self.longest.max(Duration::from_secs(1)))
    }

    /// `Err(retry_after)` while this user and address wait out the delay of their failures.
    /// (Callers check and verify one attempt at a time per user and address on a replica, so
    /// concurrency buys no extra guesses there; replicas checking at the same moment may each
    /// let one through.) When neither Redis nor the database answers, the attempt goes on: it
    /// cannot succeed without the database anyway.
    pub async fn check(&self, username: &str, addr: IpAddr) -> Result<Attempt, Duration> {
        let key = Self::key(username, addr);
        let from_redis = match &self.redis {
            // The count's time to live restarts at each failure: what is gone of it is the
            // time since the last.
            Some(r) => r.login_failures(&key).await.map(|(n, ttl)| (n, Self::memory_ms() - ttl)),
            None => None,
        };
        let (failures, since_last_ms) = match from_redis {
            Some(found) => found,
            None => match self.db.login_failures(&key).await {
                Ok(Some((last, n))) => {
                    let since = now_ms() - last;
                    if since < Self::memory_ms() {
                        (n, since)
                    } else {
                        (0, since)
                    }
                }
                Ok(None) => (0, 0),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the failed-login count");
                    (0, 0)
                }
            },
        };
        let delay_ms = i64::try_from(self.delay(failures).as_millis()).unwrap_or(i64::MAX / 4);
        let left_ms = delay_ms - since_last_ms.max(0);
        if failures >= i64::from(self.max_failures) && left_ms > 0 {
            let wait = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
            self.hold(username, addr, wait);
            return Err(wait);
        }
        Ok(Attempt { key, counted: failures > 0, username: username.to_string(), addr })
    }

    pub async fn record_failure(&self, attempt: &Attempt) {
        if let Some(r) = &self.redis {
            if r.record_login_failure(&attempt.key, MEMORY.as_millis().try_into().unwrap_or(u64::MAX)).await {
                return;
            }
        }
        if let Err(e) = self.db.record_login_failure(&attempt.key, now_ms(), Self::memory_ms()).await {
            tracing::warn!(error = %e, "cannot count a failed login");
        }
    }

    pub async fn record_success(&self, attempt: &Attempt) {
        if !attempt.counted {
            return;
        }
        self.release(&attempt.username, attempt.addr);
        if let Some(r) = &self.redis {
            if r.clear_login_failures(&attempt.key).await {
                return;
            }
        }
        if let Err(e) = self.db.clear_login_failures(&attempt.key).await {
            tracing::warn!(error = %e, "cannot forget the failed logins");
        }
    }
}
