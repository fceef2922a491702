//! Moving in: `packyard-api import <format> --from DIR|URL --into REPOSITORY` copies what another
//! repository publishes into a Packyard repository through the engine's own uploads (the same
//! checks, rows, audit entries and publications as a client's upload). A format says what its
//! source holds ([`Importer::plan`]: its indexes read and verified) and stores each file as its
//! upload does ([`Importer::store`]); this module fetches, verifies every byte against the
//! checksum the source's index gives, copies with bounded concurrency, and keeps the ledger
//! (`import_ledger`): an item is recorded once stored, so a run after a crash goes on where the
//! last stopped, and a later run copies only what is new or changed. Nothing is half-stored: an
//! item whose bytes do not match is discarded with its blob, and an interrupted one was never
//! acknowledged (its blob is reclaimed as every abandoned upload's is).

use std::io::IsTerminal as _;
use std::path::{Component, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use packyard_model::repos::Repository;
use packyard_store::blobs::StoredBlob;

use crate::hosted::{Actor, UploadError};
use crate::outbound::Outbound;
use crate::services::Services;

/// Concurrent copies when `--concurrency` is not given (docs/perf/import.md measures 1 to 32).
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Largest index file read whole (a `Packages`, a `Release`, an `APKINDEX`).
pub const MAX_INDEX: u64 = 512 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source or the request is not usable as given: the message says what to change.
    #[error("{0}")]
    Source(String),
    #[error(transparent)]
    Db(#[from] packyard_store::db::DbError),
}

/// The environment variables a source's user name and password may come in (rather than in
/// its URL, where `ps` shows them).
pub const USERNAME_ENV: &str = "PACKYARD_IMPORT_USERNAME";
pub const PASSWORD_ENV: &str = "PACKYARD_IMPORT_PASSWORD";

/// Where a source is: a directory, or an `http(s)` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Dir(PathBuf),
    Url(url::Url),
}

impl Location {
    /// `DIR`, `file://DIR` or an `http(s)://` URL.
    pub fn parse(s: &str) -> Result<Self, ImportError> {
        if s.starts_with("http://") || s.starts_with("https://") {
            // A URL that does not parse is shown without what may be its credentials.
            let shown = || match s.split_once("://") {
                Some((scheme, rest)) if rest.split('/').next().is_some_and(|host| host.contains('@')) => {
                    let after = rest.rsplit_once('@').map_or(rest, |(_, a)| a);
                    format!("{scheme}://…@{after}")
                }
                _ => s.to_string(),
            };
            let mut url = url::Url::parse(s).map_err(|e| ImportError::Source(format!("{}: {e}", shown())))?;
            if !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            return Ok(Self::Url(url));
        }
        let path = PathBuf::from(s.strip_prefix("file://").unwrap_or(s));
        if !path.is_dir() {
            return Err(ImportError::Source(format!("{s}: not a directory (nor an http(s) URL)")));
        }
        Ok(Self::Dir(path))
    }

    /// Takes the user name and password out of a URL (`https://USER:PASSWORD@HOST/`), so that
    /// messages and the ledger never show them.
    pub fn take_credentials(&mut self) -> Option<(String, String)> {
        let Self::Url(url) = self else { return None };
        if url.username().is_empty() && url.password().is_none() {
            return None;
        }
        let decode = |s: &str| {
            let b = s.as_bytes();
            let (mut out, mut i) = (Vec::with_capacity(b.len()), 0);
            while i < b.len() {
                let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) if b[i] == b'%' => {
                        out.push(v);
                        i += 3;
                    }
                    _ => {
                        out.push(b[i]);
                        i += 1;
                    }
                }
            }
            String::from_utf8_lossy(&out).into_owned()
        };
        let found = (decode(url.username()), decode(url.password().unwrap_or_default()));
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Some(found)
    }

    /// The file at `rel` below it: a relative path of the source's own (no `..`, not absolute,
    /// no empty segment), as an index names it.
    pub fn join(&self, rel: &str) -> Result<Self, ImportError> {
        let bad = || ImportError::Source(format!("the source names an unsafe path {rel:?}"));
        let p = std::path::Path::new(rel);
        // No escape (`%2e%2e`), scheme (`https:`), query or fragment: a plain relative path.
        let plain = !rel.contains(['\\', '%', ':', '?', '#']);
        if rel.is_empty() || !plain || !p.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(bad());
        }
        Ok(match self {
            Self::Dir(d) => Self::Dir(d.join(p)),
            Self::Url(u) => {
                let joined = u.join(rel).map_err(|_| bad())?;
                // Still below the source's root (same origin, same path prefix).
                let base = u.as_str().rsplit_once('/').map_or(u.as_str(), |(dir, _)| dir);
                if !joined.as_str().starts_with(&format!("{base}/")) {
                    return Err(bad());
                }
                Self::Url(joined)
            }
        })
    }

    /// The same place, as a directory (a URL with a trailing `/`).
    pub fn as_dir(&self) -> Self {
        match self {
            Self::Url(u) if !u.path().ends_with('/') => {
                let mut u = u.clone();
                u.set_path(&format!("{}/", u.path()));
                Self::Url(u)
            }
            other => other.clone(),
        }
    }

    /// How the ledger and messages name it.
    pub fn name(&self) -> String {
        match self {
            Self::Dir(d) => std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()).display().to_string(),
            Self::Url(u) => u.to_string(),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(d) => write!(f, "{}", d.display()),
            Self::Url(u) => write!(f, "{u}"),
        }
    }
}

/// Reads a source's files: from the disk, or over HTTP through the configured outbound proxy
/// and certificate authorities (`proxy.*`; an import reaches the addresses its operator names).
#[derive(Clone)]
pub struct Fetcher {
    client: Outbound,
    /// The `Authorization` every request to the source carries, and where the credentials
    /// are traded for a token (clones share them: a format trades once for all).
    authorization: Arc<std::sync::RwLock<Auth>>,
}

#[derive(Debug, Clone, Default)]
struct Auth {
    /// What is sent.
    header: Option<String>,
    /// The source's credentials as HTTP Basic, kept while a token is sent.
    basic: Option<String>,
    /// Where a token for `basic` is had again when the source says it expired (401).
    token_at: Option<Location>,
}

impl Fetcher {
    pub fn new(config: &packyard_model::config::Config) -> anyhow::Result<Self> {
        let policy =
            packyard_model::net::AddressPolicy::new(true, &[], "proxy.allowed_networks").map_err(anyhow::Error::msg)?;
        Self::with_policy(config, policy, ("import source", ""))
    }

    /// A fetcher for what the server fetches on its own (a replication's source): only the
    /// addresses proxies may reach (`proxy.allow_private_addresses`, `proxy.allowed_networks`).
    pub fn for_server(config: &packyard_model::config::Config) -> anyhow::Result<Self> {
        let policy = config.proxy.address_policy().map_err(anyhow::Error::msg)?;
        let remedy = "proxy.allowed_networks (e.g. [\"10.0.0.0/8\"]) or proxy.allow_private_addresses = true";
        Self::with_policy(config, policy, ("replication source", remedy))
    }

    fn with_policy(
        config: &packyard_model::config::Config,
        policy: packyard_model::net::AddressPolicy,
        (whom, remedy): (&'static str, &'static str),
    ) -> anyhow::Result<Self> {
        let p = &config.proxy;
        let client = Outbound::new(crate::outbound::Settings {
            policy,
            whom,
            remedy,
            show_addresses: true,
            outbound: p.outbound(|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?,
            ca_certificates: &p.ca_certificates,
            user_agent: concat!("Packyard-Import/", env!("CARGO_PKG_VERSION")),
            connect_timeout: Duration::from_millis(p.connect_timeout_ms.max(1)),
            read_timeout: Some(Duration::from_millis(p.read_timeout_ms.max(1))),
            timeout: Duration::from_secs(24 * 3600),
            max_idle_per_host: 64,
            follow_redirects: true,
        })?;
        Ok(Self { client, authorization: Arc::default() })
    }

    /// A fetcher with the same client and credentials, whose credentials change apart from
    /// this one's (each source of a run that reads several, such as Nexus's repositories).
    pub fn detached(&self) -> Self {
        let current = self.auth();
        Self { client: self.client.clone(), authorization: Arc::new(std::sync::RwLock::new(current)) }
    }

    fn auth(&self) -> Auth {
        self.authorization.read().map(|a| a.clone()).unwrap_or_default()
    }

    /// Sends HTTP Basic credentials (a source's user and password).
    pub fn basic(&self, username: &str, password: &str) {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        if let Ok(mut a) = self.authorization.write() {
            *a = Auth { header: Some(format!("Basic {token}")), basic: Some(format!("Basic {token}")), token_at: None };
        }
    }

    /// Whether requests carry credentials.
    pub fn authorized(&self) -> bool {
        self.auth().header.is_some()
    }

    /// Trades the credentials for a bearer token at `at` (a `GET` with them, answered with
    /// the token's text), sent from now on, and again whenever the source answers 401 to it
    /// (it expired). Without credentials: nothing.
    pub async fn trade_for_token(&self, at: &Location) -> Result<(), ImportError> {
        let Some(basic) = self.auth().basic else { return Ok(()) };
        let token = self.get_token(at, &basic).await?;
        if let Ok(mut a) = self.authorization.write() {
            a.header = Some(format!("Bearer {token}"));
            a.token_at = Some(at.clone());
        }
        Ok(())
    }

    async fn get_token(&self, at: &Location, basic: &str) -> Result<String, ImportError> {
        let Location::Url(url) = at else { return Err(ImportError::Source(format!("{at}: a token comes from a URL"))) };
        let res = self
            .client
            .client()
            .get(url.clone())
            .header(reqwest::header::AUTHORIZATION, basic)
            .send()
            .await
            .map_err(|e| ImportError::Source(format!("{url}: {}", crate::outbound::root_cause(&e))))?;
        if res.status().as_u16() != 200 {
            return Err(refused(url, res.status().as_u16(), true));
        }
        let body = res.bytes().await.map_err(|e| ImportError::Source(format!("{url}: {e}")))?;
        let token = String::from_utf8_lossy(&body).trim().to_string();
        if token.is_empty() || token.len() > 16 << 10 || token.contains(char::is_whitespace) {
            return Err(ImportError::Source(format!("{url}: the source's answer is not a token")));
        }
        Ok(token)
    }

    /// A file as a stream of its bytes; `None` when the source has no such file (404).
    pub async fn open(&self, at: &Location) -> Result<Option<BoxStream<'static, Result<Bytes, String>>>, ImportError> {
        Ok(match self.open_unless(at, None).await? {
            Opened::Body(body, _) => Some(body),
            Opened::Missing | Opened::Unchanged => None,
        })
    }

    /// [`Fetcher::open`], unless a URL's file still has the entity tag `etag` (`If-None-Match`,
    /// answered 304): the body with its `ETag`, if any.
    pub async fn open_unless(&self, at: &Location, etag: Option<&str>) -> Result<Opened, ImportError> {
        match at {
            Location::Dir(path) => match tokio::fs::File::open(path).await {
                Ok(f) => Ok(Opened::Body(
                    tokio_util::io::ReaderStream::with_capacity(f, 256 * 1024).map_err(|e| e.to_string()).boxed(),
                    None,
                )),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Opened::Missing),
                Err(e) => Err(ImportError::Source(format!("{}: {e}", path.display()))),
            },
            Location::Url(url) => {
                let send = |header: Option<String>| {
                    let mut request = self.client.client().get(url.clone());
                    if let Some(value) = header {
                        request = request.header(reqwest::header::AUTHORIZATION, value);
                    }
                    if let Some(tag) = etag {
                        request = request.header(reqwest::header::IF_NONE_MATCH, tag);
                    }
                    async move {
                        request
                            .send()
                            .await
                            .map_err(|e| ImportError::Source(format!("{url}: {}", crate::outbound::root_cause(&e))))
                    }
                };
                let auth = self.auth();
                let mut res = send(auth.header.clone()).await?;
                // A token that expired: another, once.
                if let (401, Some(basic), Some(token_at)) = (res.status().as_u16(), &auth.basic, &auth.token_at) {
                    let token = self.get_token(token_at, basic).await?;
                    let header = format!("Bearer {token}");
                    if let Ok(mut a) = self.authorization.write() {
                        a.header = Some(header.clone());
                    }
                    res = send(Some(header)).await?;
                }
                match res.status().as_u16() {
                    200 => {
                        let tag =
                            res.headers().get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_string);
                        Ok(Opened::Body(res.bytes_stream().map_err(|e| e.to_string()).boxed(), tag))
                    }
                    304 if etag.is_some() => Ok(Opened::Unchanged),
                    404 | 410 => Ok(Opened::Missing),
                    s => Err(refused(url, s, self.authorized())),
                }
            }
        }
    }

    /// A small file whole, with its `ETag`, unless it still has `etag` ([`Fetcher::open_unless`]):
    /// `Ok(None)` when the source has none, `Some(None)` when it is unchanged.
    pub async fn read_unless(
        &self,
        at: &Location,
        etag: Option<&str>,
    ) -> Result<Option<Option<(Bytes, Option<String>)>>, ImportError> {
        match self.open_unless(at, etag).await? {
            Opened::Missing => Ok(None),
            Opened::Unchanged => Ok(Some(None)),
            Opened::Body(body, tag) => Ok(Some(Some((read_whole(at, body).await?, tag)))),
        }
    }

    /// A small file whole (at most [`MAX_INDEX`] bytes); `None` when the source has none.
    pub async fn read(&self, at: &Location) -> Result<Option<Bytes>, ImportError> {
        let Some(body) = self.open(at).await? else { return Ok(None) };
        Ok(Some(read_whole(at, body).await?))
    }
}

/// What [`Fetcher::open_unless`] found.
pub enum Opened {
    Missing,
    /// 304: the entity tag asked about is still the file's.
    Unchanged,
    /// The body, and its `ETag` when the source sent one.
    Body(BoxStream<'static, Result<Bytes, String>>, Option<String>),
}

/// A body whole, at most [`MAX_INDEX`] bytes.
async fn read_whole(at: &Location, mut body: BoxStream<'static, Result<Bytes, String>>) -> Result<Bytes, ImportError> {
    let mut out = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ImportError::Source(format!("{at}: {e}")))?;
        if (out.len() + chunk.len()) as u64 > MAX_INDEX {
            return Err(ImportError::Source(format!("{at}: larger than {MAX_INDEX} bytes")));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(out))
}

/// A source's answer other than a file, as a message that says what to do.
fn refused(url: &url::Url, status: u16, with_credentials: bool) -> ImportError {
    ImportError::Source(match (status, with_credentials) {
        (401 | 403, false) => format!(
            "{url}: the source answered {status}: give its credentials in the URL (https://USER:PASSWORD@HOST/…) \
             or in {USERNAME_ENV} and {PASSWORD_ENV}"
        ),
        (401 | 403, true) => format!(
            "{url}: the source answered {status} to the credentials given: a wrong password, or a user that may \
             not read this"
        ),
        _ => format!("{url}: the source answered {status}"),
    })
}

/// What `packyard-api import <format>` was given, for the format to read.
#[derive(Debug, Clone)]
pub struct ImportArgs {
    pub from: Location,
    /// The text of `--key FILE`: what the source's signatures must be made by.
    pub key: Option<String>,
    /// `--only NAME=VALUE` (repeatable): the format's own choices of what to copy.
    pub only: Vec<(String, String)>,
}

/// An import ready to run, whatever its format (a format's [`Importer`] as a [`Job`]).
#[async_trait]
pub trait ImportJob: Send + Sync {
    async fn run(
        &self,
        services: &Services,
        source: (&Fetcher, &str),
        repo: &Repository,
        options: &Options,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<Summary, ImportError>;
}

/// A format's importer as an [`ImportJob`].
pub struct Job<I>(pub I);

#[async_trait]
impl<I: Importer> ImportJob for Job<I> {
    async fn run(
        &self,
        services: &Services,
        source: (&Fetcher, &str),
        repo: &Repository,
        options: &Options,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<Summary, ImportError> {
        run(services, &self.0, source, repo, options, out).await
    }
}

/// One file of the source to copy.
#[derive(Debug, Clone)]
pub struct Item<T> {
    /// Its name in the ledger, unique within the source (`stable/main/pool/main/h/hello/…`).
    pub key: String,
    pub location: Location,
    /// The SHA-256 the source's index gives (every byte is verified against it); `None` where
    /// the source says another checksum, which the format's `store` verifies before it stores
    /// (a Go module cache's `h1:`).
    pub sha256: Option<String>,
    pub size: Option<u64>,
    /// Where it goes, in the format's terms.
    pub target: T,
}

/// What [`Importer::store`] works with.
pub struct StoreCx<'a> {
    pub services: &'a Services,
    pub repo: &'a Repository,
    pub fetcher: &'a Fetcher,
    pub actor: Actor<'a>,
}

impl StoreCx<'_> {
    /// A file that goes with an item (a source package's, a revision's) into the blob store,
    /// unchecked (the caller checks it, and discards it when it refuses it: [`discard_all`]).
    pub async fn fetch(&self, at: &Location, listed_by: &str) -> Result<StoredBlob, UploadError> {
        let body = self.fetcher.open(at).await.map_err(|e| UploadError::Invalid(e.to_string()))?;
        let body = body.ok_or_else(|| UploadError::Invalid(format!("{at} is listed by {listed_by} but missing")))?;
        crate::hosted::receive(self.services, body, self.services.config.server.max_upload_bytes, None).await
    }
}

/// Discards the blobs received for an item that is not stored.
pub async fn discard_all(services: &Services, blobs: &[StoredBlob]) {
    for b in blobs {
        crate::hosted::discard(services, &b.sha256, b.created).await;
    }
}

impl ImportError {
    /// The source or request is not usable as given.
    pub fn source(message: impl Into<String>) -> Self {
        Self::Source(message.into())
    }
}

/// What a format's importer does.
#[async_trait]
pub trait Importer: Send + Sync {
    type Target: Send + Sync + Clone;

    /// The files of the source that go into `repo` (its indexes read, checked against their
    /// own checksums and signatures), or why they cannot be copied as asked.
    async fn plan(&self, fetcher: &Fetcher, repo: &Repository) -> Result<Vec<Item<Self::Target>>, ImportError>;

    /// Stores one fetched and verified file as the format's upload does (fetching what goes
    /// with it, such as a source package's files, through `cx.fetcher`).
    async fn store(
        &self,
        cx: &StoreCx<'_>,
        item: &Item<Self::Target>,
        stored: StoredBlob,
    ) -> Result<Stored, UploadError>;

    /// Items of one chain are copied one after another, in the plan's order (a reference's
    /// revisions, oldest first, where the target stamps each with the time it arrives); after
    /// one fails, the rest of its chain waits for the next run. `None`: copied independently.
    fn chain<'a>(&self, _item: &'a Item<Self::Target>) -> Option<&'a str> {
        None
    }

    /// Whether the rest of its chain waits after `item` failed (the default); `false` for an
    /// item whose absence does not change what the later ones mean (a Conan package revision).
    fn breaks_chain(&self, _item: &Item<Self::Target>) -> bool {
        true
    }
}

/// What [`Importer::store`] did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stored {
    /// False: it was there already, unchanged.
    pub created: bool,
    /// The bytes of what went with the item's own file (a source package's files, a Conan
    /// revision's), fetched by the format.
    pub with: u64,
}

impl Stored {
    /// The item's own file alone.
    pub fn alone(created: bool) -> Self {
        Self { created, with: 0 }
    }
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only say what would be copied.
    pub dry_run: bool,
    pub concurrency: usize,
    /// A progress line on standard error (when it is a terminal).
    pub progress: bool,
}

/// What a run did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub planned: usize,
    /// In the ledger already, unchanged.
    pub skipped: usize,
    pub copied: usize,
    pub bytes: u64,
    /// Stored before (the ledger did not know it): recorded now.
    pub present: usize,
    pub failed: Vec<(String, String)>,
    pub elapsed: Duration,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(0.001);
        write!(
            f,
            "{} planned, {} already copied, {} copied ({} bytes, {:.1} MB/s, {:.0} files/s), {} stored before, {} failed, in {:.2} s",
            self.planned,
            self.skipped,
            self.copied,
            self.bytes,
            self.bytes as f64 / secs / 1e6,
            self.copied as f64 / secs,
            self.present,
            self.failed.len(),
            secs
        )
    }
}

/// Runs an import of `importer`'s source (`source`: its name in the ledger) into `repo`,
/// printing the plan (`--dry-run`) or the failures and the summary to `out`.
pub async fn run<I: Importer>(
    services: &Services,
    importer: &I,
    (fetcher, source): (&Fetcher, &str),
    repo: &Repository,
    options: &Options,
    out: &mut (dyn std::io::Write + Send),
) -> Result<Summary, ImportError> {
    crate::hosted::check_hosted(repo, "import into").map_err(|e| ImportError::Source(e.to_string()))?;
    check_writable_instance(services).await?;
    crate::hosted::check_writable(repo).map_err(|e| ImportError::Source(e.to_string()))?;
    let started = Instant::now();
    let plan = importer.plan(fetcher, repo).await?;
    let done = services.db.imported(repo.id, source).await?;
    let mut summary = Summary { planned: plan.len(), ..Summary::default() };
    let todo: Vec<Item<I::Target>> = plan
        .into_iter()
        .filter(|i| {
            let copied =
                done.get(&i.key).is_some_and(|s| i.sha256.as_ref().is_none_or(|want| s.eq_ignore_ascii_case(want)));
            summary.skipped += usize::from(copied);
            !copied
        })
        .collect();
    let write = |out: &mut (dyn std::io::Write + Send), line: String| {
        let _ = writeln!(out, "{line}");
    };
    if options.dry_run {
        let bytes: u64 = todo.iter().filter_map(|i| i.size).sum();
        let unknown = todo.iter().filter(|i| i.size.is_none()).count();
        let size = match unknown {
            0 => format!("{bytes} bytes"),
            n if n == todo.len() => "sizes the source does not say".to_string(),
            n => format!("{bytes} bytes and {n} of sizes the source does not say"),
        };
        write(
            out,
            format!("would copy {} items ({size}) into {}; {} copied before", todo.len(), repo.name, summary.skipped),
        );
        for i in &todo {
            let size = i.size.map_or("?".into(), |s| s.to_string());
            let sha = i.sha256.as_deref().map(|s| format!(", sha256 {s}")).unwrap_or_default();
            write(out, format!("  {} ({size} bytes{sha})", i.key));
        }
        summary.elapsed = started.elapsed();
        return Ok(summary);
    }
    let total = todo.len() as u64;
    let counters = Arc::new(Counters::default());
    let ticker = options.progress.then(|| spawn_progress(counters.clone(), total));
    let actor = Actor::system("import");
    let cx = StoreCx { services, repo, fetcher, actor };
    // Chains in the order of their first item; an item of no chain is a chain of its own.
    let mut chains: Vec<Vec<Item<I::Target>>> = Vec::new();
    let mut by_name: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for item in todo {
        match importer.chain(&item).map(str::to_string) {
            Some(name) => match by_name.get(&name) {
                Some(&at) => chains[at].push(item),
                None => {
                    by_name.insert(name, chains.len());
                    chains.push(vec![item]);
                }
            },
            None => chains.push(vec![item]),
        }
    }
    let results: Vec<(String, Result<Copied, String>)> = futures_util::stream::iter(chains)
        .map(|chain| {
            let cx = &cx;
            let counters = counters.clone();
            async move {
                let mut out = Vec::with_capacity(chain.len());
                let mut broken: Option<String> = None;
                for item in chain {
                    let outcome = match &broken {
                        Some(first) => Err(format!("not copied: {first}, before it in its chain, failed")),
                        None => copy_one(cx, importer, &item, source).await,
                    };
                    counters.done.fetch_add(1, Ordering::Relaxed);
                    match &outcome {
                        Ok(c) => {
                            counters.bytes.fetch_add(c.bytes, Ordering::Relaxed);
                        }
                        Err(_)
                            if importer.chain(&item).is_some() && broken.is_none() && importer.breaks_chain(&item) =>
                        {
                            broken = Some(item.key.clone());
                        }
                        Err(_) => {}
                    }
                    out.push((item.key, outcome));
                }
                out
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .flat_map(futures_util::stream::iter)
        .collect()
        .await;
    if let Some(t) = ticker {
        t.abort();
        if std::io::stderr().is_terminal() {
            eprintln!();
        }
    }
    for (key, r) in results {
        match r {
            Ok(c) if c.created => {
                summary.copied += 1;
                summary.bytes += c.bytes;
            }
            Ok(_) => summary.present += 1,
            Err(e) => {
                write(out, format!("failed: {key}: {e}"));
                summary.failed.push((key, e));
            }
        }
    }
    summary.elapsed = started.elapsed();
    let detail = serde_json::json!({"source": source, "copied": summary.copied, "bytes": summary.bytes,
        "skipped": summary.skipped, "failed": summary.failed.len()});
    services.security.audit("import", None, "repository.import", repo.name.as_str(), detail).await;
    Ok(summary)
}

/// Refuses while the instance is read-only (Nexus's freeze): an import writes as uploads do.
async fn check_writable_instance(services: &Services) -> Result<(), ImportError> {
    let state = services.db.read_only().await?;
    if state.frozen {
        services.read_only.apply(state);
        return Err(ImportError::Source(services.read_only.refusal().unwrap_or_default()));
    }
    Ok(())
}

struct Copied {
    created: bool,
    bytes: u64,
}

/// Fetches one file into the blob store, checks it against the source's checksum, stores it
/// and records it in the ledger.
async fn copy_one<I: Importer>(
    cx: &StoreCx<'_>,
    importer: &I,
    item: &Item<I::Target>,
    source: &str,
) -> Result<Copied, String> {
    let services = cx.services;
    // A freeze stops the import between files (each file is stored whole or not at all).
    check_writable_instance(services).await.map_err(|e| e.to_string())?;
    let body = cx.fetcher.open(&item.location).await.map_err(|e| e.to_string())?;
    let Some(body) = body else { return Err(format!("{} is listed by the source's index but missing", item.location)) };
    let limit = services.config.server.max_upload_bytes;
    let stored = crate::hosted::receive(services, body, limit, Some("the file")).await.map_err(|e| e.to_string())?;
    let size_ok = item.size.is_none_or(|s| s == stored.size);
    let sha_ok = item.sha256.as_ref().is_none_or(|want| stored.sha256.as_str().eq_ignore_ascii_case(want));
    if !sha_ok || !size_ok {
        crate::hosted::discard(services, &stored.sha256, stored.created).await;
        return Err(format!(
            "the bytes fetched ({} bytes, sha256 {}) are not those the source's index lists ({} bytes, sha256 {}): not copied",
            stored.size,
            stored.sha256,
            item.size.map_or("?".into(), |s| s.to_string()),
            item.sha256.as_deref().unwrap_or("?")
        ));
    }
    let (sha256, size) = (stored.sha256.to_string(), stored.size);
    let done = importer.store(cx, item, stored).await.map_err(|e| e.to_string())?;
    services.db.record_import(cx.repo.id, (source, &item.key), &sha256, size).await.map_err(|e| e.to_string())?;
    Ok(Copied { created: done.created, bytes: size + done.with })
}

#[derive(Default)]
struct Counters {
    done: AtomicU64,
    bytes: AtomicU64,
}

/// A progress line on standard error, redrawn five times a second while it is a terminal.
fn spawn_progress(c: Arc<Counters>, total: u64) -> tokio::task::JoinHandle<()> {
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    tokio::spawn(async move {
        let period = Duration::from_millis(if tty { 200 } else { 10_000 });
        // The first line after one period: a quick import prints none.
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            tick.tick().await;
            let (done, bytes) = (c.done.load(Ordering::Relaxed), c.bytes.load(Ordering::Relaxed));
            let width = 30usize;
            let filled = (done * width as u64).checked_div(total).map_or(width, |f| f as usize);
            let rate = bytes as f64 / started.elapsed().as_secs_f64().max(0.001) / 1e6;
            let bar = format!(
                "[{}{}] {done}/{total} files, {:.1} MB, {rate:.1} MB/s",
                "#".repeat(filled),
                " ".repeat(width - filled.min(width)),
                bytes as f64 / 1e6
            );
            if tty {
                eprint!("\r{bar}");
            } else {
                eprintln!("{bar}");
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::Location;

    #[test]
    fn credentials_are_taken_out_of_a_url() -> Result<(), super::ImportError> {
        let mut at = Location::parse("https://ci%40corp:p%3Ass%2Fw@nexus.example/base")?;
        assert_eq!(at.take_credentials(), Some(("ci@corp".to_string(), "p:ss/w".to_string())));
        assert_eq!(at.to_string(), "https://nexus.example/base/");
        assert_eq!(at.take_credentials(), None);
        let mut dir = Location::parse(".")?;
        assert_eq!(dir.take_credentials(), None);
        Ok(())
    }

    #[test]
    fn a_source_names_only_paths_below_its_root() -> Result<(), super::ImportError> {
        let root = Location::parse("http://mirror.example/debian/")?;
        let Location::Url(deb) = root.join("pool/main/h/hello/hello_2.10_amd64.deb")? else { panic!("a URL") };
        assert_eq!(deb.as_str(), "http://mirror.example/debian/pool/main/h/hello/hello_2.10_amd64.deb");
        for bad in [
            "../etc/passwd",
            "%2e%2e/%2e%2e/x",
            "https:evil.example/x",
            "//evil.example/x",
            "/etc/passwd",
            "a?b",
            "",
            "a\\b",
        ] {
            assert!(root.join(bad).is_err(), "{bad:?} is refused");
        }
        Ok(())
    }
}
