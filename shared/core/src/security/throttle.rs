//! Login throttling: more than `max_failures` failed attempts for one user from one address in
//! a window → refused (429) until the window ends. Counted where every replica sees the same
//! count: in Redis when `cache.redis_url` is set (the database while Redis is down), otherwise
//! in the database — a guesser spreading attempts over the replicas gains nothing.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::events::Redis;
use packyard_store::db::{now_ms, Db};

pub struct LoginThrottle {
    max_failures: u32,
    window: Duration,
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
    pub fn new(max_failures: u32, window: Duration, db: Db, redis: Option<Arc<Redis>>) -> Self {
        Self { max_failures, window, db, redis }
    }

    fn window_ms(&self) -> i64 {
        i64::try_from(self.window.as_millis()).unwrap_or(i64::MAX / 4)
    }

    /// The user name and address as a key (hex SHA-256: any user name, a fixed length).
    fn key(username: &str, addr: IpAddr) -> String {
        let mut h = Sha256::new();
        h.update(username.as_bytes());
        h.update([0]);
        h.update(addr.to_string().as_bytes());
        hex::encode(h.finalize())
    }

    /// `Err(retry_after)` while this user and address are locked out. (Callers check and verify
    /// one attempt at a time per user and address on a replica, so concurrency buys no extra
    /// guesses there; replicas checking at the same moment may each let one through.) When
    /// neither Redis nor the database answers, the attempt goes on: it cannot succeed without
    /// the database anyway.
    pub async fn check(&self, username: &str, addr: IpAddr) -> Result<Attempt, Duration> {
        let key = Self::key(username, addr);
        let from_redis = match &self.redis {
            Some(r) => r.login_failures(&key).await,
            None => None,
        };
        let (failures, left_ms) = match from_redis {
            Some(found) => found,
            None => match self.db.login_failures(&key).await {
                Ok(Some((start, n))) => {
                    let left = start.saturating_add(self.window_ms()) - now_ms();
                    if left > 0 {
                        (n, left)
                    } else {
                        (0, 0)
                    }
                }
                Ok(None) => (0, 0),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the failed-login count");
                    (0, 0)
                }
            },
        };
        if failures >= i64::from(self.max_failures) {
            return Err(Duration::from_millis(u64::try_from(left_ms).unwrap_or(0)));
        }
        Ok(Attempt { key, counted: failures > 0 })
    }

    pub async fn record_failure(&self, attempt: &Attempt) {
        if let Some(r) = &self.redis {
            if r.record_login_failure(&attempt.key, self.window.as_millis().try_into().unwrap_or(u64::MAX)).await {
                return;
            }
        }
        if let Err(e) = self.db.record_login_failure(&attempt.key, now_ms(), self.window_ms()).await {
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
