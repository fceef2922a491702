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
}

/// One login attempt that [`LoginThrottle::check`] let through.
pub struct Attempt {
    key: String,
    /// Earlier failures were counted (a success has something to forget).
    counted: bool,
}

impl LoginThrottle {
    pub fn new(max_failures: u32, longest: Duration, db: Db, redis: Option<Arc<Redis>>) -> Self {
        Self { max_failures, longest, db, redis }
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
            return Err(Duration::from_millis(u64::try_from(left_ms).unwrap_or(0)));
        }
        Ok(Attempt { key, counted: failures > 0 })
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
