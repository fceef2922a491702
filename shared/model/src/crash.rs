//! Crash points for fault tests (`debug.crash_at`): the process kills itself with SIGKILL —
//! exactly what `kill -9` does, no destructor, no flush — when it reaches the named point of
//! a publication. Off (empty) in production.

use std::sync::OnceLock;

/// The points a publication passes, in order:
/// - `claimed`: a unit is claimed; nothing is built yet;
/// - `built`: every file of the snapshot is in the blob store; no snapshot row exists;
/// - `before_cas`: inside the publishing transaction, snapshot rows inserted, the
///   compare-and-swap not run;
/// - `after_cas`: the transaction has committed; the worker has told no one yet.
///
/// And one of a cleanup run: `cleanup_batch`, each time a batch of removals has committed
/// (with `worker.cleanup_batch = 1` the run dies after its first component).
pub const POINTS: [&str; 5] = ["claimed", "built", "before_cas", "after_cas", "cleanup_batch"];

static CRASH_AT: OnceLock<String> = OnceLock::new();

/// Arms the crash point named by the configuration (once per process).
pub fn arm(point: &str) {
    if !point.is_empty() {
        let _ = CRASH_AT.set(point.to_string());
    }
}

/// Dies here if this is the armed point.
pub fn point(name: &str) {
    if CRASH_AT.get().is_some_and(|p| p == name) {
        tracing::warn!(point = name, "debug.crash_at: killing this process");
        // kill(1) rather than an unsafe kill(2): this thread blocks until the signal lands.
        let _ = std::process::Command::new("kill").args(["-KILL", &std::process::id().to_string()]).status();
        std::process::abort();
    }
}
