//! Where a build's CPU work runs. A heavy unit's build (one whose builds take a second or more,
//! say a large group's merge) runs inside [`weighed`]`(true, …)`, and the compression and
//! hashing it hands to [`spawn_blocking`] then run on threads of a lower priority (a nice
//! [`LOW_PRIORITY`] above the process's), at most as many at once as there are cores: requests
//! and quick builds go first, and the encoders' memory is bounded per process. Only that CPU
//! work is lowered — the build's own task, and the database connections it may open (SQLite's
//! are threads that inherit their creator's priority and serve everyone afterwards), keep the
//! normal priority, so that a low-priority thread never holds a lock the others wait for.

/// How much lower than the process the heavy builds' compression threads run (nice).
pub const LOW_PRIORITY: i32 = 10;

tokio::task_local! {
    static HEAVY: bool;
}

/// Runs `build` as a heavy or a light unit's build.
pub async fn weighed<F: std::future::Future>(heavy: bool, build: F) -> F::Output {
    HEAVY.scope(heavy, build).await
}

/// Runs `f` on a blocking thread: of the low-priority pool inside a heavy build, else tokio's.
pub fn spawn_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> tokio::task::JoinHandle<T> {
    if HEAVY.try_with(|heavy| *heavy).unwrap_or(false) {
        if let Some(pool) = low_priority() {
            return pool.spawn_blocking(f);
        }
    }
    tokio::task::spawn_blocking(f)
}

/// The low-priority pool: a runtime of its own used only for its blocking threads (one per
/// core), started on first use and kept for the process's life.
fn low_priority() -> Option<&'static tokio::runtime::Handle> {
    static POOL: std::sync::OnceLock<Option<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        let built = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(cores)
            .thread_name("packyard-compress")
            .on_thread_start(|| {
                // Linux: the calling thread's priority, not the whole process's; lowered from
                // whatever the process runs at.
                let now = rustix::process::getpriority_process(None).unwrap_or(0);
                if let Err(e) = rustix::process::setpriority_process(None, (now + LOW_PRIORITY).min(19)) {
                    tracing::debug!(error = %e, "cannot lower a compression thread's priority");
                }
            })
            .build();
        match built {
            Ok(rt) => Some(rt),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the low-priority compression threads");
                None
            }
        }
    });
    pool.as_ref().map(tokio::runtime::Runtime::handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_heavy_builds_work_runs_at_a_lower_priority() -> anyhow::Result<()> {
        let nice = || rustix::process::getpriority_process(None).unwrap_or(-100);
        let light = weighed(false, async { spawn_blocking(nice).await }).await?;
        let heavy = weighed(true, async { spawn_blocking(nice).await }).await?;
        let outside = spawn_blocking(nice).await?;
        assert_eq!(light, outside, "a light build's work keeps the process's priority");
        assert_eq!(heavy, (outside + LOW_PRIORITY).min(19), "a heavy build's work is lowered");
        Ok(())
    }
}
