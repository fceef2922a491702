//! The instance's read-only mode as a replica knows it: loaded at start, reloaded whenever the
//! `security` watermark moves (a freeze or a release bumps it), set at once by the replica that
//! changes it. Asking costs one atomic load, so every write path can ask.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::RwLock;

use packyard_store::db::security::ReadOnly;
use packyard_store::db::{Db, DbResult};

#[derive(Default)]
pub struct ReadOnlyMode {
    frozen: AtomicBool,
    state: RwLock<ReadOnly>,
    /// The `security` watermark the state was read under.
    seen: AtomicI64,
}

impl ReadOnlyMode {
    pub fn frozen(&self) -> bool {
        self.frozen.load(Ordering::Acquire)
    }

    pub fn state(&self) -> ReadOnly {
        self.state.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Why a write is refused now (`None`: writable), for the 503's message.
    pub fn refusal(&self) -> Option<String> {
        if !self.frozen() {
            return None;
        }
        let s = self.state();
        let since = packyard_model::time::rfc3339_ms(s.frozen_at);
        let why = if s.reason.is_empty() { String::new() } else { format!(": {}", s.reason) };
        Some(format!(
            "Packyard is read-only (frozen by {} at {since}{why}); reads go on, writes are refused until an administrator releases it (POST /service/rest/v1/read-only/release)",
            if s.frozen_by.is_empty() { "an administrator" } else { &s.frozen_by }
        ))
    }

    pub fn apply(&self, state: ReadOnly) {
        self.frozen.store(state.frozen, Ordering::Release);
        if let Ok(mut s) = self.state.write() {
            *s = state;
        }
    }

    /// Reads the state again when the `security` watermark moved since it was last read.
    pub async fn follow(&self, db: &Db, security: i64) -> DbResult<()> {
        if self.seen.load(Ordering::Acquire) == security {
            return Ok(());
        }
        self.apply(db.read_only().await?);
        // Only now: had the query failed, the next poll would try again.
        self.seen.store(security, Ordering::Release);
        Ok(())
    }
}
