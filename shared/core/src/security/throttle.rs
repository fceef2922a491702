//! Login throttling: more than `max_failures` failed attempts for one user from one address in
//! a window → refused (429) until the window ends. Node-local.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct LoginThrottle {
    max_failures: u32,
    window: Duration,
    failures: Mutex<HashMap<(String, IpAddr), (Instant, u32)>>,
}

impl LoginThrottle {
    pub fn new(max_failures: u32, window: Duration) -> Self {
        Self { max_failures, window, failures: Mutex::new(HashMap::new()) }
    }

    /// `Err(retry_after)` while this user and address are locked out. (Callers check and verify
    /// one attempt at a time per user and address, so concurrency buys no extra guesses.)
    pub fn check(&self, username: &str, addr: IpAddr) -> Result<(), Duration> {
        let Ok(mut map) = self.failures.lock() else { return Ok(()) };
        let key = (username.to_string(), addr);
        match map.get(&key) {
            Some((start, _)) if start.elapsed() >= self.window => {
                map.remove(&key);
                Ok(())
            }
            Some((start, n)) if *n >= self.max_failures => Err(self.window.saturating_sub(start.elapsed())),
            _ => Ok(()),
        }
    }

    pub fn record_failure(&self, username: &str, addr: IpAddr) {
        let Ok(mut map) = self.failures.lock() else { return };
        if map.len() > 100_000 {
            let window = self.window;
            map.retain(|_, (start, _)| start.elapsed() < window);
        }
        let entry = map.entry((username.to_string(), addr)).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= self.window {
            *entry = (Instant::now(), 0);
        }
        entry.1 += 1;
    }

    pub fn record_success(&self, username: &str, addr: IpAddr) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&(username.to_string(), addr));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_limit_and_recovers() {
        let t = LoginThrottle::new(3, Duration::from_millis(200));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        for _ in 0..3 {
            assert!(t.check("u", a).is_ok());
            t.record_failure("u", a);
        }
        assert!(t.check("u", a).is_err());
        assert!(t.check("u", b).is_ok(), "another address is not affected");
        assert!(t.check("v", a).is_ok(), "another user is not affected");
        std::thread::sleep(Duration::from_millis(250));
        assert!(t.check("u", a).is_ok(), "recovers after the window");
    }
}
