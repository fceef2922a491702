//! Single flight: the fetch of one path that concurrent misses share, and the guard that
//! forgets it when the fetch ends.

use futures_util::future::{BoxFuture, Shared};

use super::*;

pub(super) type SharedFetch = Shared<BoxFuture<'static, Result<Outcome, ProxyError>>>;

pub(super) struct InflightGuard {
    pub(super) proxy: Proxy,
    pub(super) key: (i64, String),
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if let Ok(mut m) = self.proxy.inner.inflight.lock() {
            m.remove(&self.key);
        }
    }
}
