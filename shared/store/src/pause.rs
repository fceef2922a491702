//! Pause points for tests that force an interleaving: code calls [`at`] with a point's name;
//! nothing happens unless a test armed that point, in which case the caller waits there until
//! the test lets it go. Nextest runs each test in its own process, so one process-wide table is
//! a test's own. A check of one atomic when nothing is armed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

/// The points the code passes, each named where it is:
/// - `blobs.collect.locked`: a collector holds a blob's row (deleted, not yet committed) and
///   has not deleted the bytes yet;
/// - `upload.stored`: an upload's bytes are in the blob store, not yet recorded;
/// - `cleanup.selected`: a cleanup run has selected a batch and not deleted it yet.
pub const POINTS: [&str; 3] = ["blobs.collect.locked", "upload.stored", "cleanup.selected"];

static ARMED: AtomicBool = AtomicBool::new(false);
static TABLE: OnceLock<Mutex<HashMap<&'static str, Arc<Gate>>>> = OnceLock::new();

/// An armed point: the code tells it has arrived, the test tells it may go on.
#[derive(Default)]
pub struct Gate {
    arrived: Notify,
    release: Notify,
}

impl Gate {
    /// Waits until the code reaches the point.
    pub async fn reached(&self) {
        self.arrived.notified().await;
    }

    /// Lets the code that waits at the point (or the next to reach it) go on.
    pub fn release(&self) {
        self.release.notify_one();
    }
}

fn table() -> &'static Mutex<HashMap<&'static str, Arc<Gate>>> {
    TABLE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Arms a point: the next caller to reach it waits there until [`Gate::release`]. The point
/// stays armed until [`disarm`].
pub fn arm(point: &'static str) -> Arc<Gate> {
    let gate = Arc::new(Gate::default());
    if let Ok(mut t) = table().lock() {
        t.insert(point, gate.clone());
    }
    ARMED.store(true, Ordering::SeqCst);
    gate
}

pub fn disarm(point: &str) {
    if let Ok(mut t) = table().lock() {
        t.remove(point);
    }
}

/// Waits here while a test holds this point.
pub async fn at(point: &str) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let gate = table().lock().ok().and_then(|t| t.get(point).cloned());
    if let Some(gate) = gate {
        gate.arrived.notify_one();
        gate.release.notified().await;
    }
}
