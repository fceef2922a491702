//! The one typed configuration, loaded once: defaults < `packyard.toml` (or `--config` /
//! `PACKYARD_CONFIG`) < `PACKYARD_<SECTION>__<KEY>` environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Default public listener.
pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
/// Default management listener.
pub const DEFAULT_MANAGEMENT_BIND: &str = "127.0.0.1:8081";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub blobs: BlobsConfig,
    pub cache: CacheConfig,
    pub events: EventsConfig,
    pub worker: WorkerConfig,
    pub proxy: ProxyConfig,
    pub go: GoConfig,
    pub conan: ConanConfig,
    pub log: LogConfig,
    pub security: SecurityConfig,
    pub webhooks: WebhooksConfig,
    #[serde(default)]
    pub vulnerabilities: VulnerabilitiesConfig,
    pub debug: DebugConfig,
}

/// OSV vulnerability data the workers keep fresh (`packyard-api vulnerabilities import` takes
/// the same sources by hand).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VulnerabilitiesConfig {
    /// OSV files (JSON or osv.dev's `all.zip`): URLs (through `proxy.*`; credentials in the URL)
    /// or paths. Empty: no refresh.
    pub sources: Vec<String>,
    /// How often they are imported again (one worker of the installation does it; what did not
    /// change is left as it is).
    pub refresh_secs: u64,
}

impl Default for VulnerabilitiesConfig {
    fn default() -> Self {
        Self { sources: Vec::new(), refresh_secs: 6 * 3600 }
    }
}

/// Webhook deliveries (the workers send them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// How often a worker looks for deliveries that are due.
    pub poll_ms: u64,
    /// The longest one delivery request may take.
    pub timeout_ms: u64,
    /// The wait before the first retry; it doubles with each attempt up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// How long a delivery is retried before it is given up (`failed`).
    pub retry_for_secs: u64,
    /// How long delivered and failed deliveries stay in the delivery log.
    pub log_retention_secs: u64,
    /// Networks (CIDR) webhook receivers may be in even though they are not public (loopback,
    /// private, link-local): deliveries go only to public addresses otherwise.
    pub allowed_networks: Vec<String>,
}

impl WebhooksConfig {
    /// Which receivers' addresses deliveries may connect to.
    pub fn address_policy(&self) -> Result<crate::net::AddressPolicy, String> {
        crate::net::AddressPolicy::new(false, &self.allowed_networks, "webhooks.allowed_networks")
    }
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            poll_ms: 1_000,
            timeout_ms: 10_000,
            retry_initial_ms: 5_000,
            retry_max_ms: 3_600_000,
            retry_for_secs: 86_400,
            log_retention_secs: 7 * 86_400,
            allowed_networks: Vec::new(),
        }
    }
}

/// Switches for tests and diagnosis; all off in production.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DebugConfig {
    /// Lets repositories of the test-only sample format be made (the fifth-format test; the
    /// pipeline tests' units under `/repository/<name>/_test/`).
    pub test_format: bool,
    /// Makes each build of a pipeline test unit whose key begins with `slow` take this long (to
    /// kill a worker mid-build, or to stand for a large build).
    pub build_delay_ms: u64,
    /// Kills the process with SIGKILL when a publication reaches this point (fault tests):
    /// one of `claimed`, `built`, `before_cas`, `after_cas`, `cleanup_batch`; empty never.
    /// Refused unless `fault_injection` is set too: one stray value must not kill a server.
    pub crash_at: String,
    /// The switch the fault tests set to use `crash_at`; never set in production.
    pub fault_injection: bool,
    /// Seconds added to the clock this instance dates hosted Go versions by and its policies
    /// age versions by (the release-age tests: two instances, one publishing "days ago").
    pub clock_offset_secs: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub management_bind: SocketAddr,
    /// Larger uploads get 413 before anything is stored.
    pub max_upload_bytes: u64,
    /// Where generated state (admin password, secret) lives.
    pub data_dir: PathBuf,
    /// HTTP worker threads; 0 means one per core.
    pub workers: usize,
    /// How long a graceful shutdown waits for in-flight requests.
    pub shutdown_timeout_secs: u64,
    /// A client gets this long to send a request's head (then 408 and the connection closes):
    /// a slowloris connection cannot stay open on a trickle of header bytes.
    pub header_timeout_ms: u64,
    /// Longest pause between two pieces of an upload's body (then 408, nothing stored).
    pub body_idle_timeout_ms: u64,
    /// The address people reach Packyard at (`https://repo.example.com/packyard` behind a
    /// reverse proxy that strips `/packyard`): the web UI's links and client set-up snippets,
    /// and Nexus's `downloadUrl`s. Unset: taken from each request's host.
    pub public_url: Option<String>,
    /// Addresses (CIDR) of the load balancers and reverse proxies in front: only a request from
    /// one of them has its `Forwarded` / `X-Forwarded-*` headers believed (the client's address,
    /// scheme and host). Empty: those headers are ignored.
    pub trusted_proxies: Vec<String>,
    /// Which headers those proxies write: the other kind is the client's own (a proxy passes on
    /// what it does not write) and is never read.
    pub forwarded_headers: ForwardedHeaders,
    /// HTTPS on the public listener (`server.tls.*`).
    pub tls: TlsConfig,
}

/// HTTPS (`server.tls`): with a certificate and its key the public listener speaks only HTTPS
/// (HTTP/1.1 and HTTP/2 by ALPN); the files are read again when they change, without a restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM file: the server's certificate first, then the intermediates.
    pub certificate: Option<PathBuf>,
    /// PEM file: its private key (PKCS#8, PKCS#1 or SEC1).
    pub private_key: Option<PathBuf>,
    /// A plain-HTTP listener that answers every request with a redirect (308) to the same path
    /// over HTTPS; unset, none.
    pub redirect_bind: Option<SocketAddr>,
    /// The management listener (`/metrics`, `/healthz`, `/readyz`) speaks HTTPS too, with the
    /// same certificate; by default it stays plain (probes and scrapers inside the cluster).
    pub management: bool,
    /// How often the two files are checked for a change.
    pub reload_check_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self { certificate: None, private_key: None, redirect_bind: None, management: false, reload_check_ms: 2_000 }
    }
}

impl TlsConfig {
    /// The certificate and key files when HTTPS is on.
    pub fn files(&self) -> Option<(&std::path::Path, &std::path::Path)> {
        Some((self.certificate.as_deref()?, self.private_key.as_deref()?))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        match (&self.certificate, &self.private_key) {
            (Some(_), None) => {
                return Err(ConfigError(
                    "bad value for key `server.tls.private_key`: missing; `server.tls.certificate` needs its key"
                        .into(),
                ))
            }
            (None, Some(_)) => return Err(ConfigError(
                "bad value for key `server.tls.certificate`: missing; `server.tls.private_key` needs its certificate"
                    .into(),
            )),
            (None, None) if self.redirect_bind.is_some() || self.management => {
                let key = if self.management { "server.tls.management" } else { "server.tls.redirect_bind" };
                return Err(ConfigError(format!(
                    "bad value for key `{key}`: HTTPS is off; set `server.tls.certificate` and `server.tls.private_key`"
                )));
            }
            _ => {}
        }
        if self.reload_check_ms < 100 {
            return Err(ConfigError("bad value for key `server.tls.reload_check_ms`: use 100 or more".into()));
        }
        Ok(())
    }
}

/// The headers a trusted proxy writes (`server.forwarded_headers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ForwardedHeaders {
    /// `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` (nginx, ingress-nginx, most
    /// cloud load balancers).
    #[default]
    #[serde(rename = "x-forwarded")]
    XForwarded,
    /// RFC 7239 `Forwarded` (HAProxy's `option forwarded`, Envoy, Traefik).
    #[serde(rename = "forwarded")]
    Forwarded,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    pub url: String,
    pub max_connections: u32,
    pub min_connections: u32,
    pub acquire_timeout_ms: u64,
    /// Per-statement limit on PostgreSQL and MariaDB/MySQL; 0 disables it.
    pub statement_timeout_ms: u64,
    /// SQLite only: how long a writer waits for the write lock.
    pub busy_timeout_ms: u64,
    /// Apply pending migrations at start (under a database lock). When false, the process waits
    /// until `packyard-api migrate` has applied them (one Job per release in Kubernetes).
    pub migrate_on_start: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlobsKind {
    File,
    S3,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BlobsConfig {
    pub kind: BlobsKind,
    pub path: PathBuf,
    pub s3: S3Config,
    /// The blob store's limits (`blobs.quota.soft_bytes`, `blobs.quota.hard_bytes`): every blob
    /// counts, index snapshots included.
    pub quota: crate::quota::Quota,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S3Config {
    pub bucket: Option<String>,
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    pub redis_url: Option<String>,
    pub watermark_ttl_ms: u64,
    /// Memory for published snapshot files held by each replica.
    pub snapshot_cache_bytes: u64,
    /// Memory for recently served blobs (package files) held by each replica; 0 turns it off.
    pub blob_cache_bytes: u64,
    /// Blobs larger than this are always streamed from the blob store.
    pub blob_cache_max_object_bytes: u64,
    /// How often each replica writes the downloads it counted to the catalogue.
    pub download_stats_flush_ms: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EventsConfig {
    pub amqp_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    pub embedded: bool,
    /// The longest quiet wait before a unit is built: the wait follows the unit's own build
    /// time, up to this.
    pub debounce_ms: u64,
    pub max_delay_ms: u64,
    pub poll_ms: u64,
    /// Units one worker builds at once (on its own threads); default: the number of cores.
    pub concurrency: usize,
    /// How long a claimed unit stays leased without renewal; a dead worker's unit is taken over
    /// after this.
    pub lease_ms: u64,
    /// Older snapshots kept per unit beside the current one, and for how long at least.
    pub keep_snapshots: u64,
    pub snapshot_grace_secs: u64,
    /// How often the worker counts each repository's components and bytes.
    pub usage_refresh_secs: u64,
    /// How often the worker looks for cleanup runs that are due (a schedule, or "run now").
    pub cleanup_poll_ms: u64,
    /// The most components a cleanup run removes per transaction (whole packages: a batch may be
    /// larger); fewer while a transaction takes longer than 100 ms.
    pub cleanup_batch: usize,
    /// How long an artifact blob that nothing references is kept before it is deleted.
    pub blob_grace_secs: u64,
    /// How often the worker sweeps the blob store for blobs to reclaim.
    pub blob_gc_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Allow upstreams on loopback, private and link-local addresses (tests, internal mirrors).
    pub allow_private_addresses: bool,
    /// Networks (CIDR) proxies may reach even though they are not public, e.g. an internal
    /// mirror at `10.1.2.0/24`; narrower than `allow_private_addresses`.
    pub allowed_networks: Vec<String>,
    /// Time to establish a connection to an upstream.
    pub connect_timeout_ms: u64,
    /// Longest wait for the next bytes of an upstream response (head or body).
    pub read_timeout_ms: u64,
    /// Upstream fetches in flight at once, per process (the bound on outbound connections).
    pub max_concurrent_fetches: usize,
    /// Idle keep-alive connections kept per upstream host.
    pub max_idle_per_host: usize,
    /// Largest upstream file a proxy stores.
    pub max_object_bytes: u64,
    /// The longest one upstream fetch may take in all, connecting and every byte included.
    pub fetch_deadline_ms: u64,
    /// An outbound (corporate) HTTP proxy for every upstream fetch, `http://[user:password@]host:port`;
    /// unset: the `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` environment, else direct.
    pub http_proxy: Option<String>,
    /// Hosts, domains (and every host below them) and IP networks fetched directly, not through
    /// `http_proxy` (unset `http_proxy`: the `NO_PROXY` environment).
    pub no_proxy: Vec<String>,
    /// PEM files of certificate authorities trusted for upstreams (and an HTTPS proxy) besides
    /// the public ones: a private mirror's, or a TLS-inspecting proxy's.
    pub ca_certificates: Vec<PathBuf>,
    /// Remembered 404/410 answers kept per proxy repository; the oldest go first.
    pub max_negative_entries: u64,
}

/// Go module zip limits: the go command's, which a server may lower (never raise: the go
/// command would refuse a bigger zip anyway).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GoConfig {
    pub max_zip_bytes: u64,
    pub max_unzipped_bytes: u64,
    pub max_go_mod_bytes: u64,
    pub max_license_bytes: u64,
}

impl Default for GoConfig {
    fn default() -> Self {
        Self {
            max_zip_bytes: 500 << 20,
            max_unzipped_bytes: 500 << 20,
            max_go_mod_bytes: 16 << 20,
            max_license_bytes: 16 << 20,
        }
    }
}

/// Conan: how long a token from `v2/users/authenticate` lives.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConanConfig {
    pub token_ttl_secs: u64,
}

impl Default for ConanConfig {
    fn default() -> Self {
        Self { token_ttl_secs: 3600 }
    }
}

impl ProxyConfig {
    /// Which upstream addresses proxies may reach.
    pub fn address_policy(&self) -> Result<crate::net::AddressPolicy, String> {
        crate::net::AddressPolicy::new(self.allow_private_addresses, &self.allowed_networks, "proxy.allowed_networks")
    }

    /// Where upstream fetches go (`env` reads the environment's proxy variables).
    pub fn outbound(&self, env: impl Fn(&str) -> Option<String>) -> Result<crate::net::OutboundProxy, String> {
        crate::net::OutboundProxy::new(self.http_proxy.as_deref(), &self.no_proxy, env)
    }
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            allow_private_addresses: false,
            allowed_networks: Vec::new(),
            connect_timeout_ms: 5_000,
            read_timeout_ms: 30_000,
            max_concurrent_fetches: 32,
            max_idle_per_host: 8,
            max_object_bytes: 4 * 1024 * 1024 * 1024,
            fetch_deadline_ms: 1_800_000,
            http_proxy: None,
            no_proxy: Vec::new(),
            ca_certificates: Vec::new(),
            max_negative_entries: 100_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing `EnvFilter` directive; `RUST_LOG` overrides it.
    pub level: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    pub anonymous_read: bool,
    pub secret: Option<String>,
    pub admin_password: Option<String>,
    /// How long a cached authentication decision or repository record is used.
    pub auth_cache_ttl_secs: u64,
    /// How often the security and repository watermarks are read from the database: the bound
    /// on how long a revoked token keeps working on another replica.
    pub watermark_ttl_ms: u64,
    /// Failed logins for one user from one (real client) address that are free; after them
    /// each attempt waits a delay from the last failure (429 meanwhile): 1 s, doubling with
    /// each further failure, at most `login_window_secs`.
    pub login_max_failures: u32,
    pub login_window_secs: u64,
    /// How long a web UI sign-in lasts.
    pub session_ttl_secs: u64,
    /// LDAP directories, asked in order for names that are not local users.
    pub ldap: Vec<crate::directory::LdapDirectory>,
    /// Web UI sign-in through an OpenID Connect provider.
    pub oidc: crate::directory::OidcConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: parse_default_addr(DEFAULT_BIND),
            management_bind: parse_default_addr(DEFAULT_MANAGEMENT_BIND),
            max_upload_bytes: 1 << 30,
            data_dir: PathBuf::from("data"),
            workers: 0,
            shutdown_timeout_secs: 30,
            header_timeout_ms: 5_000,
            body_idle_timeout_ms: 30_000,
            public_url: None,
            trusted_proxies: Vec::new(),
            forwarded_headers: ForwardedHeaders::XForwarded,
            tls: TlsConfig::default(),
        }
    }
}

impl ServerConfig {
    /// `server.public_url` as (origin, path prefix): `https://host:8443` and `/packyard` (empty
    /// at the root), or why it is not one.
    pub fn parse_public_url(value: &str) -> Result<(String, String), String> {
        let bad = |why: &str| format!("bad value for key `server.public_url`: {value:?} {why}");
        let url = url::Url::parse(value).map_err(|e| bad(&format!("is not a URL ({e})")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad("must be an http:// or https:// URL with a host"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
            return Err(bad("must not carry a query, a fragment or credentials"));
        }
        let origin = url.origin().ascii_serialization();
        let prefix = url.path().trim_end_matches('/').to_string();
        Ok((origin, prefix))
    }
}

fn parse_default_addr(s: &str) -> SocketAddr {
    s.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://data/packyard.db".into(),
            max_connections: 16,
            min_connections: 0,
            acquire_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
            busy_timeout_ms: 5_000,
            migrate_on_start: true,
        }
    }
}

impl Default for BlobsConfig {
    fn default() -> Self {
        Self {
            kind: BlobsKind::File,
            path: PathBuf::from("data/blobs"),
            s3: S3Config::default(),
            quota: crate::quota::Quota::default(),
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            redis_url: None,
            watermark_ttl_ms: 1_000,
            snapshot_cache_bytes: 256 << 20,
            blob_cache_bytes: 256 << 20,
            blob_cache_max_object_bytes: 8 << 20,
            download_stats_flush_ms: 5_000,
        }
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            embedded: true,
            debounce_ms: 100,
            max_delay_ms: 5_000,
            poll_ms: 500,
            concurrency: std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            lease_ms: 30_000,
            keep_snapshots: 2,
            snapshot_grace_secs: 600,
            usage_refresh_secs: 60,
            cleanup_poll_ms: 10_000,
            cleanup_batch: 500,
            blob_grace_secs: 86_400,
            blob_gc_secs: 3_600,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { format: LogFormat::Text, level: "info".into() }
    }
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            anonymous_read: true,
            secret: None,
            admin_password: None,
            auth_cache_ttl_secs: 30,
            watermark_ttl_ms: 1_000,
            login_max_failures: 10,
            login_window_secs: 60,
            session_ttl_secs: 12 * 3600,
            ldap: Vec::new(),
            oidc: crate::directory::OidcConfig::default(),
        }
    }
}

mod load;

pub use load::Loaded;

/// A configuration that could not be loaded; the message names the offending key.
#[derive(Debug, thiserror::Error)]
#[error("configuration error: {0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Checks the rules serde cannot express, section by section; each error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.conan.validate()?;
        self.go.validate()?;
        self.database.validate()?;
        self.server.validate()?;
        self.webhooks.address_policy().map_err(ConfigError)?;
        self.proxy.validate()?;
        self.worker.validate()?;
        self.debug.validate()?;
        self.blobs.validate()?;
        self.security.validate(self.is_sqlite())?;
        for (key, value) in [("cache.redis_url", &self.cache.redis_url), ("events.amqp_url", &self.events.amqp_url)] {
            if let Some(v) = value {
                if url::Url::parse(v).is_err() {
                    return Err(ConfigError(format!("bad value for key `{key}`: {v:?} is not a URL")));
                }
            }
        }
        Ok(())
    }

    pub fn is_sqlite(&self) -> bool {
        self.database.url.starts_with("sqlite:")
    }
}

fn positive(key: &str, v: u64) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(ConfigError(format!("bad value for key `{key}`: must be positive")));
    }
    Ok(())
}

impl ConanConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.token_ttl_secs == 0 {
            return Err(ConfigError("bad value for key `conan.token_ttl_secs`: must be at least 1".into()));
        }
        Ok(())
    }
}

impl GoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let go = Self::default();
        for (key, value, max) in [
            ("go.max_zip_bytes", self.max_zip_bytes, go.max_zip_bytes),
            ("go.max_unzipped_bytes", self.max_unzipped_bytes, go.max_unzipped_bytes),
            ("go.max_go_mod_bytes", self.max_go_mod_bytes, go.max_go_mod_bytes),
            ("go.max_license_bytes", self.max_license_bytes, go.max_license_bytes),
        ] {
            if value == 0 || value > max {
                return Err(ConfigError(format!(
                    "bad value for key `{key}`: {value} must be between 1 and {max} (the go command's own limit)"
                )));
            }
        }
        Ok(())
    }
}

impl DatabaseConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let url = &self.url;
        let scheme = url.split("://").next().unwrap_or_default();
        if !url.contains("://") || !matches!(scheme, "sqlite" | "postgres" | "postgresql" | "mysql" | "mariadb") {
            return Err(ConfigError(format!(
                "bad value for key `database.url`: {url:?} must start with sqlite://, postgres:// or mysql://"
            )));
        }
        if self.max_connections == 0 {
            return Err(ConfigError("bad value for key `database.max_connections`: must be at least 1".into()));
        }
        if self.min_connections > self.max_connections {
            return Err(ConfigError(
                "bad value for key `database.min_connections`: must not exceed database.max_connections".into(),
            ));
        }
        Ok(())
    }
}

impl ServerConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        for (key, v) in [
            ("server.header_timeout_ms", self.header_timeout_ms),
            ("server.body_idle_timeout_ms", self.body_idle_timeout_ms),
        ] {
            if v == 0 || v > 3_600_000 {
                return Err(ConfigError(format!("bad value for key `{key}`: use 1 to 3600000 (one hour)")));
            }
        }
        if let Some(u) = &self.public_url {
            Self::parse_public_url(u).map_err(ConfigError)?;
        }
        crate::net::networks("server.trusted_proxies", &self.trusted_proxies).map_err(ConfigError)?;
        self.tls.validate()?;
        let plain_public = self
            .public_url
            .as_deref()
            .and_then(|u| Self::parse_public_url(u).ok())
            .is_some_and(|(origin, _)| !origin.starts_with("https:"));
        if self.tls.redirect_bind.is_some() && plain_public {
            return Err(ConfigError(
                "bad value for key `server.tls.redirect_bind`: it redirects to server.public_url, which is not https:// (a redirect to itself)".into(),
            ));
        }
        positive("server.max_upload_bytes", self.max_upload_bytes)
    }
}

impl ProxyConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        positive("proxy.connect_timeout_ms", self.connect_timeout_ms)?;
        positive("proxy.read_timeout_ms", self.read_timeout_ms)?;
        positive("proxy.max_concurrent_fetches", self.max_concurrent_fetches as u64)?;
        positive("proxy.max_object_bytes", self.max_object_bytes)?;
        self.address_policy().map_err(ConfigError)?;
        // The configuration's own proxy settings (the environment's are read at startup).
        self.outbound(|_| None).map_err(ConfigError)?;
        if self.fetch_deadline_ms < 1_000 {
            return Err(ConfigError("bad value for key `proxy.fetch_deadline_ms`: use at least 1000".into()));
        }
        for path in &self.ca_certificates {
            if !path.is_file() {
                return Err(ConfigError(format!(
                    "bad value for key `proxy.ca_certificates`: {} is not a file",
                    path.display()
                )));
            }
        }
        Ok(())
    }
}

impl WorkerConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.debounce_ms > self.max_delay_ms {
            return Err(ConfigError(
                "bad value for key `worker.debounce_ms`: must not exceed worker.max_delay_ms".into(),
            ));
        }
        for (key, v) in [("worker.lease_ms", self.lease_ms), ("worker.max_delay_ms", self.max_delay_ms)] {
            if v == 0 || v > 86_400_000 {
                return Err(ConfigError(format!("bad value for key `{key}`: use 1 to 86400000 (one day)")));
            }
        }
        if !(1..=256).contains(&self.concurrency) {
            return Err(ConfigError("bad value for key `worker.concurrency`: use 1 to 256 units at once".into()));
        }
        Ok(())
    }
}

impl DebugConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if !self.crash_at.is_empty() && !crate::crash::POINTS.contains(&self.crash_at.as_str()) {
            return Err(ConfigError(format!(
                "bad value for key `debug.crash_at`: use one of {}",
                crate::crash::POINTS.join(", ")
            )));
        }
        if !self.crash_at.is_empty() && !self.fault_injection {
            return Err(ConfigError(format!(
                "bad value for key `debug.crash_at`: {:?} kills this process on purpose when it gets there, for fault \
                 tests only; remove the key, or set `debug.fault_injection = true` as well in a test (never in production)",
                self.crash_at
            )));
        }
        Ok(())
    }
}

impl BlobsConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.kind == BlobsKind::S3 && self.s3.bucket.is_none() {
            return Err(ConfigError(
                "missing value for key `blobs.s3.bucket` (required when blobs.kind = \"s3\")".into(),
            ));
        }
        self.quota.validate("blobs.quota").map_err(|e| ConfigError(format!("bad value for key {e}")))?;
        Ok(())
    }
}

impl SecurityConfig {
    /// `sqlite`: whether the database is SQLite (the only one on which the secret may be
    /// generated: every replica of a shared database must share it).
    fn validate(&self, sqlite: bool) -> Result<(), ConfigError> {
        if self.session_ttl_secs == 0 || self.session_ttl_secs > 90 * 86_400 {
            return Err(ConfigError(
                "bad value for key `security.session_ttl_secs`: use 1 to 7776000 (90 days)".into(),
            ));
        }
        if !sqlite && self.secret.is_none() {
            return Err(ConfigError(
                "missing value for key `security.secret`: it must be set explicitly (e.g. PACKYARD_SECURITY__SECRET) when the database is not SQLite, so that every replica shares it".into(),
            ));
        }
        if self.watermark_ttl_ms == 0 || self.watermark_ttl_ms > 2_000 {
            return Err(ConfigError(
                "bad value for key `security.watermark_ttl_ms`: use 1 to 2000 (revocations must reach every replica within 2 s)".into(),
            ));
        }
        if self.login_max_failures == 0 {
            return Err(ConfigError("bad value for key `security.login_max_failures`: must be at least 1".into()));
        }
        for (i, d) in self.ldap.iter().enumerate() {
            d.validate(i, &self.ldap).map_err(ConfigError)?;
        }
        self.oidc.validate().map_err(ConfigError)?;
        if let Some(secret) = &self.secret {
            if secret.len() < 16 {
                return Err(ConfigError("bad value for key `security.secret`: use at least 16 characters".into()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::providers::{Format, Toml};
    use figment::Figment;
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn load(file: Option<&Path>, pairs: &[(&str, &str)]) -> Result<Loaded, ConfigError> {
        Loaded::load_from(file, &env(pairs))
    }

    /// `debug.crash_at` kills the process on purpose: alone it is refused with a message that
    /// says so (#44: one typo in production crashed a server), with the fault tests' switch it
    /// is taken, and `config show` marks every `debug.*` key as test-only.
    #[test]
    fn a_crash_point_needs_the_fault_tests_switch() -> Result<(), ConfigError> {
        let Err(e) = load(None, &[("PACKYARD_DEBUG__CRASH_AT", "built")]) else {
            panic!("a crash point without debug.fault_injection was taken");
        };
        assert_eq!(
            e.0,
            "bad value for key `debug.crash_at`: \"built\" kills this process on purpose when it gets there, for fault \
             tests only; remove the key, or set `debug.fault_injection = true` as well in a test (never in production)"
        );
        let on = [("PACKYARD_DEBUG__CRASH_AT", "built"), ("PACKYARD_DEBUG__FAULT_INJECTION", "true")];
        let loaded = load(None, &on)?;
        assert_eq!(loaded.config.debug.crash_at, "built");
        let shown = loaded.show();
        assert!(
            shown.contains(
                "debug.crash_at = \"built\"  # environment PACKYARD_DEBUG__CRASH_AT; test-only, never set in production\n"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("debug.fault_injection = true  # environment PACKYARD_DEBUG__FAULT_INJECTION; test-only")
        );
        let shown = load(None, &[])?.show();
        assert!(shown.contains("debug.crash_at = \"\"  # default; test-only, never set in production\n"), "{shown}");
        assert!(shown.contains("\nworker.poll_ms = "), "{shown}");
        assert!(!shown.lines().any(|l| l.starts_with("worker.") && l.contains("test-only")), "{shown}");
        Ok(())
    }

    #[test]
    fn defaults_match_the_contract() -> Result<(), ConfigError> {
        let dir = tempfile::tempdir().map_err(|e| ConfigError(e.to_string()))?;
        let file = dir.path().join("empty.toml");
        std::fs::write(&file, "").map_err(|e| ConfigError(e.to_string()))?;
        let c = load(Some(&file), &[])?.config;
        assert_eq!(c.server.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(c.server.management_bind.to_string(), "127.0.0.1:8081");
        assert_eq!(c.server.max_upload_bytes, 1 << 30);
        assert_eq!(c.database.url, "sqlite://data/packyard.db");
        assert_eq!(c.blobs.kind, BlobsKind::File);
        assert_eq!(c.blobs.path, PathBuf::from("data/blobs"));
        assert_eq!(c.cache.watermark_ttl_ms, 1000);
        assert!(c.worker.embedded);
        assert_eq!((c.worker.debounce_ms, c.worker.max_delay_ms, c.worker.poll_ms), (100, 5000, 500));
        assert!(!c.proxy.allow_private_addresses);
        assert_eq!(c.log.format, LogFormat::Text);
        assert!(c.security.anonymous_read);
        Ok(())
    }

    #[test]
    fn env_overrides_file_overrides_defaults() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "[server]\nbind = \"127.0.0.1:9000\"\nmax_upload_bytes = 2048\n")?;
        let loaded = load(Some(&file), &[("PACKYARD_SERVER__BIND", "0.0.0.0:9100"), ("PACKYARD_LOG__FORMAT", "json")])?;
        assert_eq!(loaded.config.server.bind.to_string(), "0.0.0.0:9100");
        assert_eq!(loaded.config.server.max_upload_bytes, 2048);
        assert_eq!(loaded.config.log.format, LogFormat::Json);
        let shown = loaded.show();
        assert!(shown.contains("server.bind = \"0.0.0.0:9100\"  # environment PACKYARD_SERVER__BIND"), "{shown}");
        assert!(shown.contains("server.max_upload_bytes = 2048  # TOML file"), "{shown}");
        assert!(shown.contains("worker.poll_ms = 500  # default"), "{shown}");
        Ok(())
    }

    #[test]
    fn config_file_from_env_variable() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("other.toml");
        std::fs::write(&file, "[worker]\npoll_ms = 42\n")?;
        let path = file.to_string_lossy().to_string();
        let loaded = load(None, &[("PACKYARD_CONFIG", path.as_str())])?;
        assert_eq!(loaded.config.worker.poll_ms, 42);
        Ok(())
    }

    #[test]
    fn unknown_key_in_file_is_named() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("p.toml");
        std::fs::write(&file, "[server]\nbindd = \"127.0.0.1:9000\"\n")?;
        let err = load(Some(&file), &[]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("unknown key `server.bindd`"), "{err}");
        Ok(())
    }

    #[test]
    fn unknown_key_in_env_is_named() -> Result<(), Box<dyn std::error::Error>> {
        let err = load(None, &[("PACKYARD_WORKER__POLLMS", "5")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("unknown key `worker.pollms`"), "{err}");
        let err = load(None, &[("PACKYARD_NOSUCH__KEY", "5")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("unknown key `nosuch`"), "{err}");
        Ok(())
    }

    #[test]
    fn malformed_values_are_named() -> Result<(), Box<dyn std::error::Error>> {
        let err = load(None, &[("PACKYARD_SERVER__BIND", "not-an-address")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`server.bind`"), "{err}");
        let err = load(None, &[("PACKYARD_SERVER__MAX_UPLOAD_BYTES", "lots")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`server.max_upload_bytes`"), "{err}");
        let err = load(None, &[("PACKYARD_LOG__FORMAT", "xml")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`log.format`"), "{err}");
        let err =
            load(None, &[("PACKYARD_SERVER__FORWARDED_HEADERS", "x-real-ip")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`server.forwarded_headers`"), "{err}");
        let rfc7239 = load(None, &[("PACKYARD_SERVER__FORWARDED_HEADERS", "forwarded")])?;
        assert_eq!(rfc7239.config.server.forwarded_headers, ForwardedHeaders::Forwarded);
        assert_eq!(load(None, &[])?.config.server.forwarded_headers, ForwardedHeaders::XForwarded);
        let err = load(None, &[("PACKYARD_DATABASE__URL", "oracle://x")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`database.url`"), "{err}");
        // Go limits go down, never up.
        let err = load(None, &[("PACKYARD_GO__MAX_GO_MOD_BYTES", "999999999")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`go.max_go_mod_bytes`") && err.to_string().contains("16777216"), "{err}");
        let lowered = load(None, &[("PACKYARD_GO__MAX_ZIP_BYTES", "1048576")])?;
        assert_eq!(lowered.config.go.max_zip_bytes, 1 << 20);
        // HTTPS: a certificate needs its key; the redirect listener and an HTTPS management
        // port need HTTPS; the redirect cannot point at a plain-HTTP public URL.
        for (env, key) in [
            (vec![("PACKYARD_SERVER__TLS__CERTIFICATE", "c.pem")], "`server.tls.private_key`"),
            (vec![("PACKYARD_SERVER__TLS__PRIVATE_KEY", "k.pem")], "`server.tls.certificate`"),
            (vec![("PACKYARD_SERVER__TLS__REDIRECT_BIND", "127.0.0.1:80")], "`server.tls.redirect_bind`"),
            (vec![("PACKYARD_SERVER__TLS__MANAGEMENT", "true")], "`server.tls.management`"),
            (
                vec![
                    ("PACKYARD_SERVER__TLS__CERTIFICATE", "c.pem"),
                    ("PACKYARD_SERVER__TLS__PRIVATE_KEY", "k.pem"),
                    ("PACKYARD_SERVER__TLS__REDIRECT_BIND", "127.0.0.1:80"),
                    ("PACKYARD_SERVER__PUBLIC_URL", "http://repo.example.com"),
                ],
                "`server.tls.redirect_bind`",
            ),
        ] {
            let err = load(None, &env).err().ok_or("expected an error")?;
            assert!(err.to_string().contains(key), "{env:?}: {err}");
        }
        let tls = load(
            None,
            &[("PACKYARD_SERVER__TLS__CERTIFICATE", "c.pem"), ("PACKYARD_SERVER__TLS__PRIVATE_KEY", "k.pem")],
        )?;
        assert_eq!(tls.config.server.tls.files().map(|(c, _)| c.to_path_buf()), Some(PathBuf::from("c.pem")));
        Ok(())
    }

    /// `[[security.ldap]]` directories from a file: parsed in order, the service account's
    /// password never shown, and each mistake refused naming its key.
    #[test]
    fn ldap_directories_from_a_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("packyard.toml");
        let write = |extra: &str| {
            std::fs::write(
                &file,
                format!(
                    r#"[[security.ldap]]
name = "corp"
url = "ldaps://ldap.example.com"
bind_dn = "cn=svc,dc=example,dc=com"
bind_password = "hunter22"
user_base = "ou=people,dc=example,dc=com"
group_roles = {{ "repo-admins" = ["admin"] }}

[[security.ldap]]
name = "partners"
url = "ldap://ldap.partner.example:389"
starttls = true
user_dn_template = "uid={{username}},ou=people,o=partner"
{extra}
"#
                ),
            )
        };
        write("")?;
        let loaded = load(Some(&file), &[])?;
        let names: Vec<&str> = loaded.config.security.ldap.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["corp", "partners"]);
        assert_eq!(loaded.config.security.ldap[0].group_roles["repo-admins"], ["admin"]);
        assert_eq!(loaded.config.security.ldap[1].user_filter, "(&(objectClass=inetOrgPerson)(uid={username}))");
        let shown = loaded.show();
        assert!(!shown.contains("hunter22"), "{shown}");
        assert!(shown.contains(r#"bind_password = "********""#), "{shown}");
        for (extra, key) in [
            ("bind_dn = \"\"\nbind_password = \"x\"\nuser_base = \"o=p\"", "security.ldap[1].bind_dn"),
            ("bind_dn = \"cn=svc\"\nuser_base = \"o=p\"", "security.ldap[1].bind_password"),
            ("bind_dn = \"cn=svc\"\nbind_password = \"\"\nuser_base = \"o=p\"", "security.ldap[1].bind_password"),
            ("ca_file = \"/nonexistent/ca.pem\"", "security.ldap[1].ca_file"),
            ("group_base = \"ou=groups,o=partner\"\ngroup_filter = \"(member=x)\"", "security.ldap[1].group_filter"),
        ] {
            write(extra)?;
            let err = load(Some(&file), &[]).err().ok_or("expected an error")?.to_string();
            assert!(err.contains(&format!("`{key}`")), "{extra}: {err}");
        }
        std::fs::write(
            &file,
            "[[security.ldap]]\nname = \"a\"\nurl = \"ldaps://h\"\nstarttls = true\nuser_dn_template = \"uid={username}\"\n",
        )?;
        let err = load(Some(&file), &[]).err().ok_or("expected an error")?.to_string();
        assert!(err.contains("`security.ldap[0].starttls`"), "{err}");
        std::fs::write(
            &file,
            "[[security.ldap]]\nname = \"a\"\nurl = \"https://h\"\nuser_dn_template = \"uid={username}\"\n",
        )?;
        let err = load(Some(&file), &[]).err().ok_or("expected an error")?.to_string();
        assert!(err.contains("`security.ldap[0].url`") && err.contains("ldaps://"), "{err}");
        Ok(())
    }

    /// `[security.oidc]`: off until an issuer is set, the client secret never shown, https
    /// required but on loopback, each mistake refused naming its key.
    #[test]
    fn oidc_from_a_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("packyard.toml");
        assert!(!load(None, &[])?.config.security.oidc.enabled());
        let body = |issuer: &str, extra: &str| {
            format!("[security.oidc]\nissuer = \"{issuer}\"\nclient_id = \"packyard\"\n{extra}\n")
        };
        std::fs::write(&file, body("https://login.example.com/realms/corp", "client_secret = \"s3cr3t-value\""))?;
        let loaded = load(Some(&file), &[])?;
        assert!(loaded.config.security.oidc.enabled());
        assert_eq!(loaded.config.security.oidc.username_claim, "preferred_username");
        let shown = loaded.show();
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
        assert!(shown.contains("security.oidc.client_secret = \"********\""), "{shown}");
        for (issuer, extra, key) in [
            ("http://login.example.com", "client_secret = \"x\"", "security.oidc.issuer"),
            ("not a url", "client_secret = \"x\"", "security.oidc.issuer"),
            ("https://login.example.com", "", "security.oidc.client_secret"),
            ("https://login.example.com", "client_secret_file = \"/nonexistent\"", "security.oidc.client_secret_file"),
            (
                "https://login.example.com",
                "client_secret = \"x\"\nusername_claim = \"\"",
                "security.oidc.username_claim",
            ),
        ] {
            std::fs::write(&file, body(issuer, extra))?;
            let err = load(Some(&file), &[]).err().ok_or("expected an error")?.to_string();
            assert!(err.contains(&format!("`{key}`")), "{issuer} {extra}: {err}");
        }
        std::fs::write(&file, body("http://127.0.0.1:9400", "client_secret = \"x\""))?;
        assert!(load(Some(&file), &[])?.config.security.oidc.enabled(), "http:// on loopback");
        Ok(())
    }

    /// A list in an environment variable is written as TOML writes one; `config show` prints
    /// lists (and the empty one) as TOML too, so what it prints can be pasted into a file.
    #[test]
    fn lists_from_the_environment_and_shown_as_toml() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let data = dir.path().join("data");
        let data_env = data.display().to_string();
        let base = [("PACKYARD_SERVER__DATA_DIR", data_env.as_str())];
        let shown = load(None, &base)?.show();
        assert!(shown.contains("proxy.allowed_networks = []  # default\n"), "{shown}");
        let quoted = [base[0], ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["10.0.0.0/8", "fd00::/8"]"#)];
        let loaded = load(None, &quoted)?;
        assert_eq!(loaded.config.proxy.allowed_networks, ["10.0.0.0/8", "fd00::/8"]);
        let shown = loaded.show();
        assert!(
            shown.contains(
                "proxy.allowed_networks = [\"10.0.0.0/8\", \"fd00::/8\"]  # environment PACKYARD_PROXY__ALLOWED_NETWORKS\n"
            ),
            "{shown}"
        );
        let one = [base[0], ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["192.168.1.0/24"]"#)];
        assert_eq!(load(None, &one)?.config.proxy.allowed_networks, ["192.168.1.0/24"]);
        // Every line of `config show` is TOML a file takes back (after the `#` comment), once
        // the dotted key is split into its table.
        for line in shown.lines().filter(|l| !l.contains("(unset)")) {
            let (key, rest) = line.split_once(" = ").ok_or("no ` = `")?;
            let value = rest.rsplit_once("  # ").map_or(rest, |(v, _)| v);
            let (table, leaf) = key.rsplit_once('.').ok_or("no section")?;
            let doc = format!("[{table}]\n{leaf} = {value}\n");
            let parsed = Figment::from(Toml::string(&doc)).extract::<figment::value::Dict>();
            assert!(parsed.is_ok(), "{line:?} is not TOML: {parsed:?}");
        }
        // A generated secret is reported as generated, and where it lives; never printed.
        assert!(
            shown.contains(&format!(
                "security.secret = (unset)  # generated into {} on first start\n",
                data.join("secret").display()
            )),
            "{shown}"
        );
        std::fs::create_dir_all(&data)?;
        std::fs::write(data.join("secret"), "s3cr3t-generated-value")?;
        let shown = load(None, &base)?.show();
        assert!(
            shown.contains(&format!(
                "security.secret = \"********\"  # generated, in {}\n",
                data.join("secret").display()
            )),
            "{shown}"
        );
        assert!(!shown.contains("s3cr3t"), "{shown}");
        Ok(())
    }

    #[test]
    fn non_sqlite_needs_explicit_secret() -> Result<(), Box<dyn std::error::Error>> {
        let err = load(None, &[("PACKYARD_DATABASE__URL", "postgres://u@h/db")]).err().ok_or("expected an error")?;
        assert!(err.to_string().contains("`security.secret`"), "{err}");
        let ok = load(
            None,
            &[
                ("PACKYARD_DATABASE__URL", "postgres://u:pw@h/db"),
                ("PACKYARD_SECURITY__SECRET", "0123456789abcdef0123"),
            ],
        )?;
        let shown = ok.show();
        assert!(shown.contains("database.url = \"postgres://u:****@h/db\""), "{shown}");
        assert!(shown.contains("security.secret = \"********\""), "{shown}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert!(!shown.contains(":pw@"), "{shown}");
        // A proxy written without a scheme keeps its password hidden too.
        let proxied = load(None, &[("PACKYARD_PROXY__HTTP_PROXY", "corp:hunter2@proxy.corp.example:3128")])?.show();
        assert!(proxied.contains("proxy.http_proxy = \"corp:****@proxy.corp.example:3128/\""), "{proxied}");
        assert!(!proxied.contains("hunter2"), "{proxied}");
        Ok(())
    }
}
