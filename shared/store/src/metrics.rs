//! Prometheus metrics of one process. Not a global: each process (and each test) owns one
//! registry, passed down as `Arc<Metrics>`.

/// A counter whose labels are resolved: what a hot path keeps to count without hashing label
/// values.
pub use prometheus::IntCounter;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

mod http;

pub struct Metrics {
    pub registry: Registry,
    /// `packyard_http_requests_total` and `packyard_http_request_duration_seconds`.
    http: std::sync::Arc<http::Series>,
    pub db_queries_total: IntCounterVec,
    pub blob_bytes_total: IntCounterVec,
    pub cache_requests_total: IntCounterVec,
    pub outbox_backlog: IntGauge,
    pub publication_lag_seconds: Gauge,
    pub publication_duration_seconds: Histogram,
    pub publications_total: IntCounterVec,
    pub proxy_upstream_requests_total: IntCounterVec,
    pub proxy_offline_misses_total: IntCounterVec,
    pub proxy_stale_served_total: IntCounterVec,
    pub group_member_failures_total: IntCounterVec,
    pub publication_refused_total: IntCounterVec,
    /// Pull replication (#42): how far behind its source a follower is, what it holds of what
    /// the source lists, what it fetched, and how its runs ended.
    pub replication_lag_seconds: prometheus::GaugeVec,
    pub replication_components: IntGaugeVec,
    pub replication_fetched_bytes_total: IntCounterVec,
    pub replication_runs_total: IntCounterVec,
    pub group_records_skipped_total: IntCounterVec,
    pub proxy_upstream_duration_seconds: HistogramVec,
    pub blob_errors_total: IntCounterVec,
    /// Requests the S3 blob store made, by kind (`packyard_blob_s3_requests_total{op}`).
    pub blob_s3_requests_total: IntCounterVec,
    pub dependency_errors_total: IntCounterVec,
    /// Outbox events whose wake-up the broker confirmed (`packyard_wakeups_relayed_total`, #44).
    pub wakeups_relayed_total: prometheus::IntCounter,
    pub repository_components: IntGaugeVec,
    pub repository_bytes: IntGaugeVec,
    pub repository_index_bytes: IntGaugeVec,
    pub cleanup_components_deleted_total: IntCounterVec,
    pub cleanup_bytes_reclaimed_total: IntCounterVec,
    pub cleanup_last_run_timestamp_seconds: Gauge,
    pub blob_store_bytes: IntGauge,
    /// `packyard_quota_used_bytes{scope, name}`: what a repository or the blob store with a
    /// quota uses (`scope`: `repository` or `blob_store`), after the last write this process
    /// made or the worker's last count.
    pub quota_used_bytes: IntGaugeVec,
    /// `packyard_quota_limit_bytes{scope, name, limit}`: its soft and hard limits.
    pub quota_limit_bytes: IntGaugeVec,
    /// `packyard_quota_standing{scope, name}`: 0 within its quota, 1 past the soft limit, 2 at the
    /// hard limit.
    pub quota_standing: IntGaugeVec,
    /// `packyard_signing_key_expiry_timestamp_seconds{repository, fingerprint}`: when a
    /// repository's signing key that expires does (Unix time).
    pub signing_key_expiry_timestamp_seconds: IntGaugeVec,
    /// `packyard_components_with_advisories{level}`: catalogued components by the highest level
    /// of the advisories that affect them, as the worker last matched them.
    pub components_with_advisories: IntGaugeVec,
    /// `packyard_policy_refusals_total{repository, reason}`: versions a policy refused on request.
    pub policy_refusals_total: IntCounterVec,
    process_resident_memory_bytes: IntGauge,
    process_cpu_seconds_total: Gauge,
    process_open_fds: IntGauge,
}

impl Metrics {
    /// Counts and times one HTTP request: `repository` (id and name; 0 and "" for none),
    /// `format`, `method`, `status`. Per thread, without a lock or an atomic that another
    /// thread writes ([`http`]).
    pub fn observe_request(
        &self,
        repository: (i64, &str, &str),
        method: &'static str,
        status: u16,
        elapsed: std::time::Duration,
    ) {
        self.http.observe(repository, method, status, elapsed);
    }

    /// Creates and registers every metric; fails only on a programming error (duplicate name).
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let http = std::sync::Arc::new(http::Series::new()?);
        let db_queries_total = IntCounterVec::new(
            Opts::new("packyard_db_queries_total", "Database statements issued by the storage layer, by operation"),
            &["op"],
        )?;
        let blob_bytes_total = IntCounterVec::new(
            Opts::new("packyard_blob_bytes_total", "Bytes written to (in) and read from (out) the blob store"),
            &["direction"],
        )?;
        let cache_requests_total = IntCounterVec::new(
            Opts::new("packyard_cache_requests_total", "Node-local cache lookups, by cache and result (hit or miss)"),
            &["cache", "result"],
        )?;
        registry.register(Box::new(cache_requests_total.clone()))?;
        let outbox_backlog =
            IntGauge::new("packyard_outbox_backlog", "Change events not yet covered by a published snapshot")?;
        let publication_lag_seconds = Gauge::new(
            "packyard_publication_lag_seconds",
            "Age of the oldest change not yet published (0 when everything is published)",
        )?;
        let publication_duration_seconds = Histogram::with_opts(
            HistogramOpts::new("packyard_publication_duration_seconds", "Time to build and publish one snapshot")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
        )?;
        let publications_total = IntCounterVec::new(
            Opts::new("packyard_publications_total", "Publication attempts by outcome (published, failed, fenced)"),
            &["outcome"],
        )?;
        let proxy_upstream_requests_total = IntCounterVec::new(
            Opts::new(
                "packyard_proxy_upstream_requests_total",
                "Requests proxies made to their upstreams, by repository and result (ok, not_modified, not_found, error, timeout, blocked, too_large)",
            ),
            &["repository", "result"],
        )?;
        let proxy_stale_served_total = IntCounterVec::new(
            Opts::new(
                "packyard_proxy_stale_served_total",
                "Cached copies served without asking the upstream: because it failed (stale-if-error) or because the proxy is offline (proxy.offline), by repository",
            ),
            &["repository"],
        )?;
        let proxy_offline_misses_total = IntCounterVec::new(
            Opts::new(
                "packyard_proxy_offline_misses_total",
                "Requests an offline proxy (proxy.offline) answered 404 because it had no copy, by repository",
            ),
            &["repository"],
        )?;
        let group_member_failures_total = IntCounterVec::new(
            Opts::new(
                "packyard_group_member_failures_total",
                "Group reads a member failed (its upstream down or timing out) while another member answered or was asked next, by group and member",
            ),
            &["group", "member"],
        )?;
        let publication_refused_total = IntCounterVec::new(
            Opts::new(
                "packyard_publication_refused_total",
                "Builds whose files did not read back with the format's parser, so nothing was published (the unit keeps its last snapshot; /status says why), by repository and reason",
            ),
            &["repository", "reason"],
        )?;
        let replication_lag_seconds = prometheus::GaugeVec::new(
            Opts::new(
                "packyard_replication_lag_seconds",
                "Seconds since a following repository last held all that its source listed (0 just after a run that caught up), by repository",
            ),
            &["repository"],
        )?;
        let replication_components = IntGaugeVec::new(
            Opts::new(
                "packyard_replication_components",
                "Components a following repository's source lists after its filters (state=listed) and of those it holds as listed (state=held), by repository",
            ),
            &["repository", "state"],
        )?;
        let replication_fetched_bytes_total = IntCounterVec::new(
            Opts::new(
                "packyard_replication_fetched_bytes_total",
                "Bytes of blobs a following repository fetched from its source, by repository",
            ),
            &["repository"],
        )?;
        let replication_runs_total = IntCounterVec::new(
            Opts::new(
                "packyard_replication_runs_total",
                "Replication runs, by repository and outcome (caught_up, failed)",
            ),
            &["repository", "outcome"],
        )?;
        let group_records_skipped_total = IntCounterVec::new(
            Opts::new(
                "packyard_group_records_skipped_total",
                "Records of a group member's index (an upstream's stanza) left out of the group's merge because its clients could not parse them, by group and member",
            ),
            &["group", "member"],
        )?;
        let proxy_upstream_duration_seconds = HistogramVec::new(
            HistogramOpts::new(
                "packyard_proxy_upstream_duration_seconds",
                "Time until an upstream answered a proxy's request (headers), by repository",
            )
            .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["repository"],
        )?;
        let blob_errors_total = IntCounterVec::new(
            Opts::new(
                "packyard_blob_errors_total",
                "Blob store operations that failed, by operation (write, read, delete)",
            ),
            &["op"],
        )?;
        for op in ["write", "read", "delete"] {
            blob_errors_total.with_label_values(&[op]);
        }
        let blob_s3_requests_total = IntCounterVec::new(
            Opts::new(
                "packyard_blob_s3_requests_total",
                "Requests the S3 blob store made, by kind (put, get, head, delete, list, copy, multipart)",
            ),
            &["op"],
        )?;
        let dependency_errors_total = IntCounterVec::new(
            Opts::new(
                "packyard_dependency_errors_total",
                "Failed calls to an optional dependency (redis, rabbitmq); each fell back to the database",
            ),
            &["dependency"],
        )?;
        for d in ["redis", "rabbitmq"] {
            dependency_errors_total.with_label_values(&[d]);
        }
        let wakeups_relayed_total = prometheus::IntCounter::new(
            "packyard_wakeups_relayed_total",
            "Outbox events whose wake-up RabbitMQ confirmed (relayed from the outbox table)",
        )?;
        let repository_components = IntGaugeVec::new(
            Opts::new(
                "packyard_repository_components",
                "Components each repository holds (hosted: uploaded; proxy: cached), as the worker last counted them",
            ),
            &["repository"],
        )?;
        let repository_bytes = IntGaugeVec::new(
            Opts::new(
                "packyard_repository_bytes",
                "Bytes of each repository's assets, as the worker last counted them",
            ),
            &["repository"],
        )?;
        let repository_index_bytes = IntGaugeVec::new(
            Opts::new(
                "packyard_repository_index_bytes",
                "Bytes of the blobs each repository's retained index snapshots hold (each blob once), as the worker last counted them",
            ),
            &["repository"],
        )?;
        registry.register(Box::new(repository_components.clone()))?;
        registry.register(Box::new(repository_bytes.clone()))?;
        registry.register(Box::new(repository_index_bytes.clone()))?;
        let cleanup_components_deleted_total = IntCounterVec::new(
            Opts::new("packyard_cleanup_components_deleted_total", "Components cleanup runs removed, by repository"),
            &["repository"],
        )?;
        let cleanup_bytes_reclaimed_total = IntCounterVec::new(
            Opts::new(
                "packyard_cleanup_bytes_reclaimed_total",
                "Bytes of the assets cleanup runs removed from the catalogue, by repository",
            ),
            &["repository"],
        )?;
        let cleanup_last_run_timestamp_seconds = Gauge::new(
            "packyard_cleanup_last_run_timestamp_seconds",
            "When the last cleanup run finished (Unix time)",
        )?;
        registry.register(Box::new(cleanup_components_deleted_total.clone()))?;
        registry.register(Box::new(cleanup_bytes_reclaimed_total.clone()))?;
        registry.register(Box::new(cleanup_last_run_timestamp_seconds.clone()))?;
        let blob_store_bytes = IntGauge::new(
            "packyard_blob_store_bytes",
            "Bytes of every blob the database records (artifacts, snapshot files, pending uploads), as the worker last counted",
        )?;
        registry.register(Box::new(blob_store_bytes.clone()))?;
        let quota_used_bytes = IntGaugeVec::new(
            Opts::new(
                "packyard_quota_used_bytes",
                "Bytes a repository (its components' files) or the blob store (every blob) with a quota uses, after the last write or count",
            ),
            &["scope", "name"],
        )?;
        let quota_limit_bytes = IntGaugeVec::new(
            Opts::new("packyard_quota_limit_bytes", "A quota's soft and hard limits in bytes"),
            &["scope", "name", "limit"],
        )?;
        let quota_standing = IntGaugeVec::new(
            Opts::new(
                "packyard_quota_standing",
                "Where a use stands against its quota: 0 within, 1 past the soft limit, 2 at the hard limit (uploads that add bytes are refused)",
            ),
            &["scope", "name"],
        )?;
        registry.register(Box::new(quota_used_bytes.clone()))?;
        registry.register(Box::new(quota_limit_bytes.clone()))?;
        registry.register(Box::new(quota_standing.clone()))?;
        let signing_key_expiry_timestamp_seconds = IntGaugeVec::new(
            Opts::new(
                "packyard_signing_key_expiry_timestamp_seconds",
                "When a repository's signing key expires (Unix time), for the keys that expire",
            ),
            &["repository", "fingerprint"],
        )?;
        registry.register(Box::new(signing_key_expiry_timestamp_seconds.clone()))?;
        let components_with_advisories = IntGaugeVec::new(
            Opts::new(
                "packyard_components_with_advisories",
                "Catalogued components by the highest severity level of the advisories that affect them, as the worker last matched them",
            ),
            &["level"],
        )?;
        let policy_refusals_total = IntCounterVec::new(
            Opts::new(
                "packyard_policy_refusals_total",
                "Requests for a version a repository's policy holds back, by repository and reason (young, undated, rule, vulnerabilities)",
            ),
            &["repository", "reason"],
        )?;
        registry.register(Box::new(components_with_advisories.clone()))?;
        registry.register(Box::new(policy_refusals_total.clone()))?;
        // The process's own figures (Linux /proc), refreshed at each scrape: what a replica costs.
        let process_resident_memory_bytes =
            IntGauge::new("process_resident_memory_bytes", "Resident memory of this process in bytes")?;
        let process_cpu_seconds_total =
            Gauge::new("process_cpu_seconds_total", "CPU time this process used, user and system, in seconds")?;
        let process_open_fds = IntGauge::new("process_open_fds", "File descriptors this process holds open")?;
        registry.register(Box::new(proxy_upstream_duration_seconds.clone()))?;
        registry.register(Box::new(blob_errors_total.clone()))?;
        registry.register(Box::new(blob_s3_requests_total.clone()))?;
        registry.register(Box::new(dependency_errors_total.clone()))?;
        registry.register(Box::new(wakeups_relayed_total.clone()))?;
        registry.register(Box::new(process_resident_memory_bytes.clone()))?;
        registry.register(Box::new(process_cpu_seconds_total.clone()))?;
        registry.register(Box::new(process_open_fds.clone()))?;
        registry.register(Box::new(proxy_upstream_requests_total.clone()))?;
        registry.register(Box::new(proxy_stale_served_total.clone()))?;
        registry.register(Box::new(proxy_offline_misses_total.clone()))?;
        registry.register(Box::new(group_member_failures_total.clone()))?;
        registry.register(Box::new(publication_refused_total.clone()))?;
        registry.register(Box::new(replication_lag_seconds.clone()))?;
        registry.register(Box::new(replication_components.clone()))?;
        registry.register(Box::new(replication_fetched_bytes_total.clone()))?;
        registry.register(Box::new(replication_runs_total.clone()))?;
        registry.register(Box::new(group_records_skipped_total.clone()))?;
        registry.register(Box::new(outbox_backlog.clone()))?;
        registry.register(Box::new(publication_lag_seconds.clone()))?;
        registry.register(Box::new(publication_duration_seconds.clone()))?;
        registry.register(Box::new(publications_total.clone()))?;
        registry.register(Box::new(SharedCollector(http.clone())))?;
        registry.register(Box::new(db_queries_total.clone()))?;
        registry.register(Box::new(blob_bytes_total.clone()))?;
        Ok(Self {
            registry,
            http,
            db_queries_total,
            blob_bytes_total,
            cache_requests_total,
            outbox_backlog,
            publication_lag_seconds,
            publication_duration_seconds,
            publications_total,
            proxy_upstream_requests_total,
            proxy_stale_served_total,
            proxy_offline_misses_total,
            group_member_failures_total,
            publication_refused_total,
            replication_lag_seconds,
            replication_components,
            replication_fetched_bytes_total,
            replication_runs_total,
            group_records_skipped_total,
            proxy_upstream_duration_seconds,
            blob_errors_total,
            blob_s3_requests_total,
            dependency_errors_total,
            wakeups_relayed_total,
            repository_components,
            repository_bytes,
            repository_index_bytes,
            cleanup_components_deleted_total,
            cleanup_bytes_reclaimed_total,
            cleanup_last_run_timestamp_seconds,
            blob_store_bytes,
            quota_used_bytes,
            quota_limit_bytes,
            quota_standing,
            signing_key_expiry_timestamp_seconds,
            components_with_advisories,
            policy_refusals_total,
            process_resident_memory_bytes,
            process_cpu_seconds_total,
            process_open_fds,
        })
    }

    /// Reads this process's memory, CPU time and open files from `/proc/self` (Linux).
    fn refresh_process(&self) {
        // statm: sizes in pages; field 2 is the resident set.
        if let Some(pages) = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<i64>().ok()))
        {
            self.process_resident_memory_bytes.set(pages * 4096);
        }
        // stat: utime and stime (fields 14 and 15) in clock ticks (100 per second on Linux),
        // counted after the command name, which may hold spaces but ends with ')'.
        if let Some(rest) =
            std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| s.rsplit_once(')').map(|(_, r)| r.to_string()))
        {
            let f: Vec<&str> = rest.split_whitespace().collect();
            if let (Some(u), Some(s)) =
                (f.get(11).and_then(|v| v.parse::<f64>().ok()), f.get(12).and_then(|v| v.parse::<f64>().ok()))
            {
                self.process_cpu_seconds_total.set((u + s) / 100.0);
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            self.process_open_fds.set(i64::try_from(dir.count()).unwrap_or(i64::MAX));
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        self.refresh_process();
        let mut buf = Vec::with_capacity(8 * 1024);
        // Encoding into a Vec cannot fail for the text format.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        buf
    }

    /// Sum of `packyard_db_queries_total` over every operation.
    pub fn db_queries(&self) -> u64 {
        self.registry
            .gather()
            .iter()
            .filter(|f| f.get_name() == "packyard_db_queries_total")
            .flat_map(|f| f.get_metric().iter().map(|m| m.get_counter().get_value() as u64))
            .sum()
    }
}

/// A collector the registry owns while [`Metrics`] keeps using it.
struct SharedCollector<C>(std::sync::Arc<C>);

impl<C: prometheus::core::Collector> prometheus::core::Collector for SharedCollector<C> {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.0.collect()
    }
}
