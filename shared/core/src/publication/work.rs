//! Where a build's CPU work runs. A heavy unit's build (one whose builds take a second or more,
//! say a large group's merge) runs inside [`weighed`]`(true, …)`, and the compression and
//! hashing it hands to [`spawn_blocking`] then run on threads of a lower priority (a nice
//! [`LOW_PRIORITY`] above the process's), at most as many at once as there are cores; so does
//! the reading of its input that it hands to a [`produce`]r or to [`read`] (decompressing,
//! verifying and parsing a member's index), on a pool of its own (one thread per reading
//! build). Requests and quick builds go first, and the encoders' memory is bounded per process. Only that CPU work is lowered — the build's own
//! task, and the database connections it may open (SQLite's are threads that inherit their
//! creator's priority and serve everyone afterwards), keep the normal priority, so that a
//! low-priority thread never holds a lock the others wait for.

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
    blocking_on(&COMPRESSION, f)
}

/// Runs `f` on a thread of `pool` inside a heavy build (when the pool could start), else on one
/// of tokio's blocking threads.
fn blocking_on<T: Send + 'static>(
    pool: &'static Pool,
    f: impl FnOnce() -> T + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    match HEAVY.try_with(|heavy| *heavy).unwrap_or(false).then(|| low_priority(pool)).flatten() {
        Some(lowered) => lowered.spawn_blocking(f),
        None => tokio::task::spawn_blocking(f),
    }
}

/// What a [`produce`]r sends its items through.
pub struct Feed<T>(tokio::sync::mpsc::Sender<T>);

impl<T> Feed<T> {
    /// Hands `item` over, waiting while `depth` items wait already. `false`: the caller gave up
    /// (its build failed); the producer should stop. Blocks the thread: only for the producer's
    /// own (never from async code, where it would panic).
    pub fn send(&self, item: T) -> bool {
        self.0.blocking_send(item).is_ok()
    }

    /// Whether the caller gave up: a producer that sends seldom checks it as it goes.
    pub fn abandoned(&self) -> bool {
        self.0.is_closed()
    }
}

/// Runs `producer` on a blocking thread (a heavy build's on a low-priority pool of its own,
/// [`READERS`]), and hands what it sends to the caller's task through a channel at most
/// `depth` items deep. For the CPU work of reading a build's input — decompressing, parsing,
/// checking — which would otherwise run on the build's own thread at the normal priority: the
/// task awaits the items, and memory holds at most `depth` of them.
pub fn produce<T: Send + 'static, R: Send + 'static>(
    depth: usize,
    producer: impl FnOnce(&Feed<T>) -> R + Send + 'static,
) -> (tokio::sync::mpsc::Receiver<T>, tokio::task::JoinHandle<R>) {
    let (tx, rx) = tokio::sync::mpsc::channel(depth.max(1));
    let feed = Feed(tx);
    // Not the compression pool: a producer holds its thread for the whole input, waiting on
    // the caller, who waits on compression; with as many producers as that pool's threads,
    // nothing would move.
    (rx, blocking_on(&READERS, move || producer(&feed)))
}

/// Runs `reader` — a build's reading of one input whole (decompressing, verifying, parsing) —
/// where a [`produce`]r runs, with nothing handed over on the way, and awaits what it returns:
/// a heavy build's reading runs at the lower priority, never on the build's own task.
pub async fn read<R: Send + 'static>(reader: impl FnOnce() -> R + Send + 'static) -> Result<R, tokio::task::JoinError> {
    blocking_on(&READERS, reader).await
}

/// A pool of low-priority threads: its name, and how many threads it runs at most.
struct Pool {
    name: &'static str,
    threads: fn() -> usize,
    runtime: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
}

/// Heavy builds' compression and hashing: one thread per core at most, which also bounds the
/// encoders' memory.
static COMPRESSION: Pool = Pool { name: "packyard-compress", threads: cores, runtime: std::sync::OnceLock::new() };
/// Heavy builds' [`produce`]rs: one per build reading its input at a time, so as many as there
/// are builds (tokio's own limit for blocking threads).
static READERS: Pool = Pool { name: "packyard-read", threads: || 512, runtime: std::sync::OnceLock::new() };

/// A pool's runtime, used only for its blocking threads: started on first use and kept for the
/// process's life.
fn low_priority(pool: &'static Pool) -> Option<&'static tokio::runtime::Handle> {
    let runtime = pool.runtime.get_or_init(|| {
        let built = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads((pool.threads)())
            .thread_name(pool.name)
            .on_thread_start(|| {
                // Linux: the calling thread's priority, not the whole process's; lowered from
                // whatever the process runs at.
                let now = rustix::process::getpriority_process(None).unwrap_or(0);
                if let Err(e) = rustix::process::setpriority_process(None, (now + LOW_PRIORITY).min(19)) {
                    tracing::debug!(error = %e, "cannot lower a build thread's priority");
                }
            })
            .build();
        match built {
            Ok(rt) => Some(rt),
            Err(e) => {
                tracing::warn!(error = %e, pool = pool.name, "cannot start a pool of low-priority build threads");
                None
            }
        }
    });
    runtime.as_ref().map(tokio::runtime::Runtime::handle)
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
        // Reading an input whole, likewise.
        let light = weighed(false, read(nice)).await?;
        let heavy = weighed(true, read(nice)).await?;
        assert_eq!(light, outside, "a light build's reading keeps the process's priority");
        assert_eq!(heavy, (outside + LOW_PRIORITY).min(19), "a heavy build's reading is lowered");
        Ok(())
    }

    #[tokio::test]
    async fn a_producer_runs_lowered_in_a_heavy_build_and_stops_when_its_caller_does() -> anyhow::Result<()> {
        let nice = || rustix::process::getpriority_process(None).unwrap_or(-100);
        let outside = spawn_blocking(nice).await?;
        let (items, niceness) = weighed(true, async {
            let (mut rx, done) = produce(2, move |feed| {
                for i in 0..10 {
                    if !feed.send(i) {
                        break;
                    }
                }
                nice()
            });
            let mut items = Vec::new();
            while let Some(i) = rx.recv().await {
                items.push(i);
            }
            (items, done.await)
        })
        .await;
        assert_eq!(items, (0..10).collect::<Vec<_>>());
        assert_eq!(niceness?, (outside + LOW_PRIORITY).min(19), "a heavy build's producer is lowered");

        // The caller gives up after two items: the producer's next send says so, and it stops.
        let (mut rx, done) = produce(1, |feed| (0..1000).take_while(|i| feed.send(*i)).count());
        assert_eq!(rx.recv().await, Some(0));
        assert_eq!(rx.recv().await, Some(1));
        drop(rx);
        let sent = done.await?;
        assert!((2..=3).contains(&sent), "the producer went on after its caller stopped: {sent} items");
        Ok(())
    }
}
