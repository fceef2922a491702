//! The publication worker: claims due units with a fenced lease, builds their files with the
//! format's [`Builder`], and publishes the snapshot with a compare-and-swap. Several workers
//! (threads or processes) share the work; a worker whose lease is taken over publishes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use packyard_core::publication::{BuildContext, Builders};
use packyard_core::services::Services;
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::now_ms;
use packyard_store::db::publication::{Claim, Due};

/// What became of one claimed unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Published(i64),
    Failed,
    /// The lease was lost (taken over after expiry): nothing was published.
    Fenced,
}

pub struct Publisher {
    services: Services,
    builders: Builders,
    owner: String,
    due: Due,
    lease_ms: i64,
}

/// Retry delay after `attempts` failures: 1 s doubling to at most a minute.
pub fn backoff_ms(attempts: i64) -> i64 {
    1_000i64.saturating_mul(1i64 << attempts.clamp(0, 6)).min(60_000)
}

impl Publisher {
    pub fn new(services: Services, builders: Builders) -> Self {
        let w = &services.config.worker;
        let due = Due {
            debounce_ms: i64::try_from(w.debounce_ms).unwrap_or(i64::MAX),
            max_delay_ms: i64::try_from(w.max_delay_ms).unwrap_or(i64::MAX),
        };
        let lease_ms = i64::try_from(w.lease_ms).unwrap_or(30_000);
        let owner = format!("{}-{}", std::process::id(), hex::encode(rand::random::<[u8; 4]>()));
        Self { services, builders, owner, due, lease_ms }
    }

    /// Overrides the timing rules (tests use a zero debounce to publish at once).
    pub fn with_due(mut self, due: Due) -> Self {
        self.due = due;
        self
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Claims the next due unit, if any (exposed for tests of fencing).
    pub async fn claim(&self) -> Result<Option<Claim>, packyard_store::db::DbError> {
        self.services.db.claim_due(&self.owner, self.due, self.lease_ms).await
    }

    /// Publishes every unit that is due now; returns the outcomes.
    pub async fn run_until_idle(&self) -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        loop {
            match self.claim().await {
                Ok(Some(claim)) => outcomes.push(self.process(claim).await),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim publication units");
                    break;
                }
            }
        }
        outcomes
    }

    /// Builds and publishes one claimed unit, renewing the lease while the build runs.
    pub async fn process(&self, claim: Claim) -> Outcome {
        let started = Instant::now();
        let db = &self.services.db;
        let unit = &claim.unit;
        let Some(builder) = self.builders.get(&unit.kind).cloned() else {
            return self.fail(&claim, &format!("no builder for unit kind {:?}", unit.kind)).await;
        };
        let repo = match packyard_core::publication::repository_of(db, unit).await {
            Ok(repo) => repo,
            Err(e) => return self.fail(&claim, &e.to_string()).await,
        };
        packyard_model::crash::point("claimed");
        let mut ctx = BuildContext::new(db, self.services.blobs.as_ref())
            .following(unit.current_snapshot_id)
            .from_nothing(claim.whole());
        let built = {
            // A group's units (and a gated proxy's) are merged from its members; a hosted
            // repository's built from its rows.
            let build = async {
                let run = async {
                    if repo.publishes_merge() {
                        builder.merge(&mut ctx, &repo, unit).await
                    } else if let Some(snapshot) = db.unit_pin(unit.id).await? {
                        // Pointed at a snapshot (a rollback): its files again, signed anew.
                        let files = db.repository_snapshot_unit_files(snapshot, unit.id).await?;
                        builder.republish(&mut ctx, &repo, unit, files).await
                    } else {
                        builder.build(&mut ctx, &repo, unit).await
                    }
                };
                // A defect on hostile input (a row, an upstream's record) fails this unit's build;
                // it never takes down the worker that every other unit waits for.
                match futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await {
                    Ok(result) => result,
                    Err(panic) => {
                        let what = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        tracing::error!(unit = unit.id, key = %unit.unit_key, panic = %what, "a build panicked");
                        Err(packyard_core::publication::BuildError::Other(format!(
                            "the build failed on a defect: {what}"
                        )))
                    }
                }
            };
            let renew = async {
                let every = Duration::from_millis(u64::try_from(self.lease_ms / 3).unwrap_or(10_000).max(10));
                loop {
                    tokio::time::sleep(every).await;
                    match db.renew_lease(&claim, self.lease_ms).await {
                        Ok(true) => {}
                        Ok(false) => return,
                        Err(e) => tracing::warn!(error = %e, "cannot renew a lease; retrying"),
                    }
                }
            };
            tokio::select! {
                r = build => Some(r),
                () = renew => None,
            }
        };
        let mut follows = false;
        let m = &self.services.metrics;
        for (member, (count, why)) in ctx.skipped() {
            m.group_records_skipped_total.with_label_values(&[repo.name.as_str(), member]).inc_by(*count);
            tracing::warn!(group = %repo.name, member = %member, count, first = %why, key = %unit.unit_key, "records of a member that its clients could not parse were left out of the group");
        }
        let outcome = match built {
            None => Outcome::Fenced,
            Some(Err(e)) => {
                if let packyard_core::publication::BuildError::Refused { reason, .. } = &e {
                    m.publication_refused_total.with_label_values(&[repo.name.as_str(), reason]).inc();
                }
                return self.fail_build(&claim, &e).await;
            }
            Some(Ok(())) => {
                let listed_again = ctx.take_listed_again();
                let files = match ctx.finish().await {
                    Ok(files) => files,
                    Err(e) => return self.fail_build(&claim, &e).await,
                };
                packyard_model::crash::point("built");
                // The rebuilds this publication implies (the groups over it), requested with it.
                let rebuilds = match builder.after_publish(db, unit).await {
                    Ok(r) => r,
                    Err(e) => return self.fail(&claim, &format!("finding the groups to rebuild: {e}")).await,
                };
                let quiet = u64::try_from(self.due.debounce_ms).unwrap_or(0);
                follows = !rebuilds.is_empty();
                match Self::publish(db, &claim, &files, &rebuilds, quiet).await {
                    Ok(Some(snapshot_id)) => {
                        packyard_model::crash::point("after_cas");
                        self.verify_files(&claim, files.iter().filter(|f| !listed_again.contains(&f.sha256))).await;
                        Outcome::Published(snapshot_id)
                    }
                    Ok(None) => Outcome::Fenced,
                    Err(e) => return self.fail(&claim, &e.to_string()).await,
                }
            }
        };
        match outcome {
            Outcome::Published(snapshot_id) => {
                // This process's replica sees it at once; others at their next watermark poll.
                self.services.changed(packyard_core::events::Changed::Publications);
                if follows {
                    self.services.wake();
                }
                m.publication_duration_seconds.observe(started.elapsed().as_secs_f64());
                m.publications_total.with_label_values(&["published"]).inc();
                tracing::info!(unit = unit.id, kind = %unit.kind, key = %unit.unit_key, revision = claim.revision, snapshot_id, elapsed_ms = started.elapsed().as_millis() as u64, "published");
            }
            Outcome::Fenced => {
                m.publications_total.with_label_values(&["fenced"]).inc();
                tracing::warn!(
                    unit = unit.id,
                    revision = claim.revision,
                    "lease lost to another worker; not publishing"
                );
            }
            Outcome::Failed => {}
        }
        outcome
    }

    async fn publish(
        db: &packyard_store::db::Db,
        claim: &Claim,
        files: &[packyard_store::db::publication::SnapshotFile],
        rebuilds: &packyard_core::publication::Rebuilds,
        quiet_ms: u64,
    ) -> Result<Option<i64>, packyard_store::db::DbError> {
        packyard_store::db::retry_conflicts(|| db.publish_snapshot(claim, files, rebuilds, quiet_ms)).await
    }

    /// A build may reuse a blob that the collector removed in the same instant; rewriting it
    /// puts it back, but if a published file is missing all the same, the unit is rebuilt.
    /// (Not the files listed again from the snapshot the build followed: it found them, and
    /// they were never collectable.)
    async fn verify_files(
        &self,
        claim: &Claim,
        files: impl Iterator<Item = &packyard_store::db::publication::SnapshotFile>,
    ) {
        for f in files {
            let Ok(d) = Sha256Hex::parse(&f.sha256) else { continue };
            if matches!(self.services.blobs.stat(&d).await, Ok(None)) {
                tracing::error!(path = %f.path, blob = %d, "a published file's blob is missing; rebuilding the unit");
                let u = &claim.unit;
                let _ =
                    self.services.db.request_changes(u.repository_id, &[(u.kind.clone(), u.unit_key.clone())]).await;
                self.services.wake();
                return;
            }
        }
    }

    /// A build that failed: a transaction that lost a conflict (a deadlock with a writer, a
    /// serialization failure) is tried again at once, twice, before the backoff applies.
    async fn fail_build(&self, claim: &Claim, e: &packyard_core::publication::BuildError) -> Outcome {
        use packyard_core::publication::BuildError;
        let conflict = matches!(e, BuildError::Db(packyard_store::db::DbError::Retry(_)));
        self.fail_after(claim, &e.to_string(), if conflict && claim.unit.attempts < 2 { Some(0) } else { None }).await
    }

    async fn fail(&self, claim: &Claim, error: &str) -> Outcome {
        self.fail_after(claim, error, None).await
    }

    /// Records the failure; the unit is tried again after `retry_ms`, or after its backoff.
    async fn fail_after(&self, claim: &Claim, error: &str, retry_ms: Option<i64>) -> Outcome {
        let retry = retry_ms.unwrap_or_else(|| backoff_ms(claim.unit.attempts));
        tracing::warn!(unit = claim.unit.id, key = %claim.unit.unit_key, error, retry_in_ms = retry, "publication failed");
        self.services.metrics.publications_total.with_label_values(&["failed"]).inc();
        if let Err(e) = self.services.db.fail_build(claim, error, retry).await {
            tracing::error!(error = %e, "cannot record a failed publication");
        }
        Outcome::Failed
    }

    /// Updates `packyard_outbox_backlog` and `packyard_publication_lag_seconds`.
    pub async fn update_metrics(&self) {
        if let Ok((backlog, oldest)) = self.services.db.backlog().await {
            let m = &self.services.metrics;
            m.outbox_backlog.set(backlog);
            let lag = oldest.map_or(0.0, |t| (now_ms() - t).max(0) as f64 / 1000.0);
            m.publication_lag_seconds.set(lag);
        }
    }

    /// Deletes snapshots past retention, then blobs nothing references (both older than the grace
    /// period). Returns (snapshots, blobs) removed.
    pub async fn collect(&self, keep: usize, grace: Duration) -> Result<(usize, usize), packyard_store::db::DbError> {
        let db = &self.services.db;
        let cutoff = now_ms() - i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        let snapshots = db.collect_snapshots(keep, cutoff).await?;
        let blobs = packyard_core::reclaim::collect_built(&self.services, grace.as_secs(), false).await?;
        // Outbox events published a day ago are history nothing reads: without this the table
        // grew by a row per change for ever (at most 5,000 a round, by primary key).
        db.prune_outbox(now_ms() - 86_400_000, 5_000).await?;
        Ok((snapshots, usize::try_from(blobs).unwrap_or(usize::MAX)))
    }

    /// Runs until `stop` resolves: keeps up to `worker.concurrency` units building at once on
    /// threads of their own, sleeps until the next unit is due (at most `worker.poll_ms`), a
    /// wake-up arrives or a build ends, and collects old snapshots now and then. Builds that are
    /// running when `stop` resolves are finished first.
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        let poll = Duration::from_millis(self.services.config.worker.poll_ms.max(1));
        let slots = self.services.config.worker.concurrency.max(1);
        // Builds get threads of their own: the thread that runs this loop (in the api process,
        // its main thread) also runs the cache keepers and the other background tasks, and a
        // build's parsing and merging between awaits would hold them up.
        let (runtime, builds) = BuildThreads::start(slots);
        let mut running = Running::new(slots);
        // Rebuilds of groups over proxies ask the upstreams, and collection may take a while:
        // neither holds up the claims.
        let (quit, quitting) = tokio::sync::watch::channel(false);
        let chores = builds.spawn(Arc::clone(&self).chores(quitting));
        tokio::pin!(stop);
        tracing::info!(owner = %self.owner, concurrency = slots, "publication worker running");
        loop {
            let filled = self.fill(&mut running, &builds).await;
            self.update_metrics().await;
            // With every slot busy only a finished build frees one; otherwise the next unit
            // that a free slot may take decides the sleep (at least a few milliseconds, so that
            // a unit that cannot be claimed yet never spins).
            let wait = match filled {
                Fill::Full => None,
                Fill::Open(below_ms) => Some(match self.services.db.next_due_in_below(self.due, below_ms).await {
                    Ok(Some(ms)) => Duration::from_millis(u64::try_from(ms).unwrap_or(0))
                        .clamp(Duration::from_millis(5).min(poll), poll),
                    _ => poll,
                }),
            };
            tokio::select! {
                () = &mut stop => break,
                () = self.services.wakeup.wait() => {}
                () = tokio::time::sleep(wait.unwrap_or(poll)), if wait.is_some() => {}
                () = running.next() => {}
            }
        }
        let _ = quit.send(true);
        running.finish().await;
        if let Err(e) = chores.await {
            tracing::error!(error = %e, "the publication worker's chores failed");
        }
        drop(runtime);
        tracing::info!(owner = %self.owner, "publication worker stopped");
    }

    /// Every 5 s: requests the rebuilds of groups whose proxies' upstreams moved on; every
    /// 30 s, collects old snapshots and the blobs only they held. Until `quit` turns true.
    async fn chores(self: Arc<Self>, mut quit: tokio::sync::watch::Receiver<bool>) {
        let w = &self.services.config.worker;
        let (keep, grace) =
            (usize::try_from(w.keep_snapshots).unwrap_or(2), Duration::from_secs(w.snapshot_grace_secs));
        let mut last_collect = Instant::now();
        loop {
            tokio::select! {
                _ = quit.changed() => return,
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            let reader = packyard_core::groups::Reader::of(&self.services);
            match packyard_core::groups::refresh(
                &self.services.db,
                &reader,
                &self.builders,
                self.services.policy.now_ms(),
            )
            .await
            {
                Ok(true) => self.services.wakeup.notify(),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "refresh of groups over proxies failed"),
            }
            if last_collect.elapsed() > Duration::from_secs(30) {
                last_collect = Instant::now();
                if let Err(e) = self.collect(keep, grace).await {
                    tracing::warn!(error = %e, "snapshot collection failed");
                }
            }
        }
    }

    /// Claims due units into the free slots, oldest pending first; the last free slot is kept
    /// from a heavy unit while every other slot builds one, so that a few large builds cannot
    /// hold up the small ones. Says what may be claimed next.
    async fn fill(self: &Arc<Self>, running: &mut Running, on: &tokio::runtime::Handle) -> Fill {
        loop {
            let Some(below_ms) = running.may_take() else { return Fill::Full };
            let claim = match self.services.db.claim_due_below(&self.owner, self.due, self.lease_ms, below_ms).await {
                Ok(Some(claim)) => claim,
                Ok(None) => return Fill::Open(below_ms),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim publication units");
                    return Fill::Open(below_ms);
                }
            };
            let me = Arc::clone(self);
            let last = claim.unit.build_ms;
            // A heavy unit's compression runs on threads of a lower priority, so that requests
            // and quick builds go first (`publication::work`).
            let heavy = last.unwrap_or(0) >= HEAVY_MS;
            running.start(
                last,
                on,
                packyard_core::publication::work::weighed(heavy, async move { me.process(claim).await }),
            );
        }
    }
}

/// The builds' own threads. Let go without waiting for them (a runtime dropped the ordinary way
/// inside another would panic), however `run` ends.
struct BuildThreads(Option<tokio::runtime::Runtime>);

impl BuildThreads {
    /// `slots` threads of their own; the caller's when they cannot start.
    fn start(slots: usize) -> (Self, tokio::runtime::Handle) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(slots)
            .thread_name("packyard-build")
            .enable_all()
            .build();
        match runtime {
            Ok(rt) => {
                let handle = rt.handle().clone();
                (Self(Some(rt)), handle)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the build threads; building on the worker's own");
                (Self(None), tokio::runtime::Handle::current())
            }
        }
    }
}

impl Drop for BuildThreads {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A build that has run this long, or whose unit's builds took this long, is a heavy one.
const HEAVY_MS: i64 = 1_000;

/// What [`Publisher::fill`] left: every slot busy, or a slot open for units quicker than this.
enum Fill {
    Full,
    Open(i64),
}

/// The builds one worker runs at once.
struct Running {
    slots: usize,
    tasks: tokio::task::JoinSet<Outcome>,
    /// Per build: its task, when it started, and its unit's last build time.
    started: Vec<(tokio::task::Id, Instant, Option<i64>)>,
}

impl Running {
    fn new(slots: usize) -> Self {
        Self { slots, tasks: tokio::task::JoinSet::new(), started: Vec::new() }
    }

    /// `None` with every slot taken; else the bound on the build time of the unit the next
    /// slot may take (`i64::MAX`: any).
    fn may_take(&self) -> Option<i64> {
        let busy = self.tasks.len();
        if busy >= self.slots {
            return None;
        }
        let heavy = self
            .started
            .iter()
            .filter(|(_, at, last)| {
                last.unwrap_or(0) >= HEAVY_MS || at.elapsed() >= Duration::from_millis(HEAVY_MS as u64)
            })
            .count();
        Some(if self.slots > 1 && busy + 1 == self.slots && heavy == busy { HEAVY_MS } else { i64::MAX })
    }

    fn start(
        &mut self,
        last_build_ms: Option<i64>,
        on: &tokio::runtime::Handle,
        build: impl std::future::Future<Output = Outcome> + Send + 'static,
    ) {
        let task = self.tasks.spawn_on(build, on);
        self.started.push((task.id(), Instant::now(), last_build_ms));
    }

    /// Waits for a build to end (forever when none runs).
    async fn next(&mut self) {
        match self.tasks.join_next_with_id().await {
            Some(ended) => self.ended(ended),
            None => std::future::pending().await,
        }
    }

    fn ended(&mut self, ended: Result<(tokio::task::Id, Outcome), tokio::task::JoinError>) {
        let id = match ended {
            Ok((id, _)) => id,
            Err(e) => {
                // `process` catches a build's panic; one here is the publisher's own defect.
                tracing::error!(error = %e, "a publication task failed");
                e.id()
            }
        };
        self.started.retain(|(task, ..)| *task != id);
    }

    /// Waits for every running build.
    async fn finish(&mut self) {
        while let Some(ended) = self.tasks.join_next_with_id().await {
            self.ended(ended);
        }
    }
}
