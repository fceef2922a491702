//! `packyard-loadtest`: measures servers side by side on the same host with the same bytes.
//!
//! For each scenario: a correctness preflight on every target (expected status, identical
//! artifact bytes, equivalent metadata), a warm-up per target, then `rounds` rounds in which
//! the targets take turns (the order alternates between rounds). A round sends `requests`
//! requests from `concurrency` workers, each on its own keep-alive connection; a request's time
//! runs from just before it is written until the last byte of its body is read. Any status other
//! than the expected one during a round fails the run: an error page never counts as throughput.

pub mod apk;
pub mod apt;
pub mod bare;
pub mod go;
pub mod http;
pub mod soak;
pub mod visibility;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

use http::{Conn, Endpoint, Request, Response};

#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    pub url: String,
}

impl Target {
    /// `NAME=URL`.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let (name, url) = s.split_once('=').ok_or_else(|| anyhow::anyhow!("--target wants NAME=URL, got {s:?}"))?;
        anyhow::ensure!(!name.is_empty(), "--target {s:?} has no name");
        Endpoint::parse(url)?;
        Ok(Self { name: name.to_string(), url: url.to_string() })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Get,
    Head,
    /// Conditional GET: `If-None-Match` with the target's own ETag, expecting 304.
    Cond,
    /// `Range: bytes=0-65535`, expecting 206.
    Range,
    /// POST of distinct generated `.deb` files to the target's root, expecting 201.
    UploadApt,
    /// PUT of distinct generated module zips to `<module>/@v/<version>.zip`, expecting 201.
    UploadGo,
}

impl Kind {
    pub fn is_upload(self) -> bool {
        matches!(self, Self::UploadApt | Self::UploadGo)
    }
}

/// `get:PATH`, `head:PATH`, `cond:PATH`, `range:PATH` (PATH relative to each target's URL), or
/// `upload:apt`.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub name: String,
    pub kind: Kind,
    pub path: String,
}

impl Scenario {
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let (kind, path) = s.split_once(':').ok_or_else(|| anyhow::anyhow!("scenario {s:?}: want KIND:PATH"))?;
        let kind = match kind {
            "get" => Kind::Get,
            "head" => Kind::Head,
            "cond" => Kind::Cond,
            "range" => Kind::Range,
            "upload" if path == "apt" => Kind::UploadApt,
            "upload" if path == "go" => Kind::UploadGo,
            _ => anyhow::bail!(
                "scenario {s:?}: kinds are get, head, cond, range (with a path), upload:apt and upload:go"
            ),
        };
        let path = if kind.is_upload() { String::new() } else { path.trim_start_matches('/').to_string() };
        anyhow::ensure!(kind.is_upload() || !path.is_empty(), "scenario {s:?} has no path");
        Ok(Self { name: s.to_string(), kind, path })
    }

    pub fn expected_status(&self) -> u16 {
        match self.kind {
            Kind::Get | Kind::Head => 200,
            Kind::Cond => 304,
            Kind::Range => 206,
            Kind::UploadApt | Kind::UploadGo => 201,
        }
    }
}

pub const RANGE: &str = "bytes=0-65535";

#[derive(Debug, Clone)]
pub struct Options {
    pub requests: usize,
    pub concurrency: usize,
    pub warmup_requests: usize,
    pub warmup_seconds: f64,
    pub rounds: usize,
    /// `user:password` for uploads.
    pub auth: Option<String>,
    /// `user:password` for reads (otherwise anonymous).
    pub read_auth: Option<String>,
    pub upload_bytes: usize,
    /// Upload requests to warm up with (uploads are not repeatable, so fewer than reads).
    pub upload_warmup: usize,
    /// Where an uploaded package must appear, relative to the target (APT `Packages`).
    pub visible_in: String,
}

/// One round of one target: throughput and latency.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    pub requests: usize,
    pub req_per_sec: f64,
    pub mib_per_sec: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetResult {
    pub target: String,
    pub url: String,
    pub rounds: Vec<Figures>,
    /// The median of each figure over the rounds.
    pub summary: Figures,
    /// Uploads: milliseconds from the last acknowledgement of a round until every package of
    /// that round was in the published index (median over rounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visible_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub target: String,
    pub against: String,
    /// Throughput of `target` / throughput of `against` (higher is better for `target`): the
    /// medians' ratio.
    pub throughput: f64,
    /// The median over the rounds of each round's throughput ratio: the two measured one
    /// after the other, so a machine whose speed drifts between rounds moves both alike.
    pub paired: f64,
    /// p95 of `target` / p95 of `against` (lower is better for `target`).
    pub p95: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub scenario: Scenario,
    pub expected_status: u16,
    pub preflight: Vec<String>,
    pub targets: Vec<TargetResult>,
    pub ratios: Vec<Ratio>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn summarize(rounds: &[Figures]) -> Figures {
    let m = |f: fn(&Figures) -> f64| median(rounds.iter().map(f).collect());
    Figures {
        requests: rounds.iter().map(|r| r.requests).sum(),
        req_per_sec: m(|r| r.req_per_sec),
        mib_per_sec: m(|r| r.mib_per_sec),
        p50_ms: m(|r| r.p50_ms),
        p95_ms: m(|r| r.p95_ms),
        p99_ms: m(|r| r.p99_ms),
        max_ms: m(|r| r.max_ms),
    }
}

/// Distinguishes the package names of runs in one process and across processes.
fn run_nonce() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_007)
        .unwrap_or(0)
}

pub(crate) fn basic(auth: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(auth))
}

async fn one(endpoint: &Endpoint, req: &Request) -> anyhow::Result<Response> {
    Conn::new(endpoint.clone()).send(req, true).await
}

pub(crate) fn get(path: &str) -> Request {
    Request { method: "GET", path: path.to_string(), headers: Vec::new(), body: None }
}

/// The preflight of one scenario: every target answers as expected with the same content.
/// Returns the request each target is measured with, and what was checked.
async fn preflight(
    scenario: &Scenario,
    targets: &[Target],
    opts: &Options,
) -> anyhow::Result<(Vec<Request>, Vec<String>)> {
    let mut notes = Vec::new();
    let mut prepared = Vec::new();
    if scenario.kind.is_upload() {
        for (i, t) in targets.iter().enumerate() {
            let endpoint = Endpoint::parse(&t.url)?;
            let run = format!("pf{}x{}", std::process::id(), run_nonce());
            let mut req = upload_request(opts, scenario.kind, &run, i, &apt::filler(1, 1024))?;
            let resp = one(&endpoint, &req.0).await?;
            anyhow::ensure!(
                resp.status == 201,
                "preflight {}: {} answered {} to an upload: {}",
                scenario.name,
                t.name,
                resp.status,
                String::from_utf8_lossy(&resp.body)
            );
            wait_visible(&endpoint, &[req.1.clone()], Duration::from_secs(30)).await?;
            req.0.body = None;
            prepared.push(req.0);
        }
        notes.push("every target accepted an upload (201) and published it".to_string());
        return Ok((prepared, notes));
    }
    let mut full: Vec<Vec<u8>> = Vec::new();
    let get = |path: &str| {
        let mut r = get(path);
        if let Some(a) = &opts.read_auth {
            r.headers.push(("Authorization".into(), basic(a)));
        }
        r
    };
    for t in targets {
        let endpoint = Endpoint::parse(&t.url)?;
        let resp = one(&endpoint, &get(&scenario.path)).await?;
        anyhow::ensure!(
            resp.status == 200,
            "preflight {}: {} answered {} to GET {}",
            scenario.name,
            t.name,
            resp.status,
            scenario.path
        );
        let mut request = get(&scenario.path);
        match scenario.kind {
            Kind::Get | Kind::UploadApt | Kind::UploadGo => {}
            Kind::Head => {
                request.method = "HEAD";
                let head = one(&endpoint, &request).await?;
                anyhow::ensure!(
                    head.status == 200,
                    "preflight {}: {} answered {} to HEAD",
                    scenario.name,
                    t.name,
                    head.status
                );
                let len = head.header("content-length").and_then(|v| v.parse::<u64>().ok());
                anyhow::ensure!(
                    len == Some(resp.body_len),
                    "preflight {}: {}'s HEAD says Content-Length {len:?}, its GET sent {} bytes",
                    scenario.name,
                    t.name,
                    resp.body_len
                );
            }
            Kind::Cond => {
                let etag = resp.header("etag").ok_or_else(|| {
                    anyhow::anyhow!(
                        "preflight {}: {} sends no ETag, so If-None-Match cannot be measured",
                        scenario.name,
                        t.name
                    )
                })?;
                request.headers.push(("If-None-Match".into(), etag.to_string()));
                let c = one(&endpoint, &request).await?;
                anyhow::ensure!(
                    c.status == 304,
                    "preflight {}: {} answered {} to If-None-Match {etag}",
                    scenario.name,
                    t.name,
                    c.status
                );
            }
            Kind::Range => {
                request.headers.push(("Range".into(), RANGE.into()));
                let r = one(&endpoint, &request).await?;
                anyhow::ensure!(
                    r.status == 206,
                    "preflight {}: {} answered {} to a Range",
                    scenario.name,
                    t.name,
                    r.status
                );
                let want = &resp.body[..resp.body.len().min(65_536)];
                anyhow::ensure!(
                    r.body == want,
                    "preflight {}: {}'s 206 body is not the first 64 KiB",
                    scenario.name,
                    t.name
                );
            }
        }
        full.push(resp.body);
        prepared.push(request);
    }
    // Same content everywhere: bytes for artifacts, equivalence for metadata.
    let path = scenario.path.as_str();
    let file = path.rsplit('/').next().unwrap_or_default();
    if file == "InRelease" || file == "Release" {
        let ids: Vec<String> = full.iter().map(|b| apt::release_identity(b)).collect();
        for (t, id) in targets.iter().zip(&ids) {
            anyhow::ensure!(
                id == &ids[0],
                "preflight {}: {} differs from {}: {id} vs {}",
                scenario.name,
                t.name,
                targets[0].name,
                ids[0]
            );
        }
        notes.push(format!("APT release equivalent on every target ({})", ids[0]));
    } else if path.starts_with("v2/conans/") && (file == "files" || file.starts_with("search")) {
        // Conan file lists and searches: the same names (formatting differs between servers).
        let keys: Vec<Vec<String>> = full
            .iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_slice(b).unwrap_or_default();
                let mut k: Vec<String> = match (v.get("files"), v.get("results")) {
                    (Some(f), _) => f.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default(),
                    (_, Some(r)) => r
                        .as_array()
                        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                        .unwrap_or_default(),
                    _ => v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default(),
                };
                k.sort();
                k
            })
            .collect();
        for (t, k) in targets.iter().zip(&keys) {
            anyhow::ensure!(
                !k.is_empty() && k == &keys[0],
                "preflight {}: {} lists {k:?}, {} {:?}",
                scenario.name,
                t.name,
                targets[0].name,
                keys[0]
            );
        }
        notes.push(format!("the same Conan names on every target ({})", keys[0].join(", ")));
    } else if path.starts_with("v2/conans/") && (file == "latest" || file == "revisions") {
        // Conan: the same revisions (their times differ between servers).
        let ids: Vec<String> = full
            .iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_slice(b).unwrap_or_default();
                match v.get("revisions").and_then(|r| r.as_array()) {
                    Some(list) => list.iter().filter_map(|r| r["revision"].as_str()).collect::<Vec<_>>().join(","),
                    None => v["revision"].as_str().unwrap_or_default().to_string(),
                }
            })
            .collect();
        for (t, id) in targets.iter().zip(&ids) {
            anyhow::ensure!(
                !id.is_empty() && id == &ids[0],
                "preflight {}: {} lists revision(s) {id:?}, {} {:?}",
                scenario.name,
                t.name,
                targets[0].name,
                ids[0]
            );
        }
        notes.push(format!("the same Conan revision(s) on every target ({})", ids[0]));
    } else if file == "APKINDEX.tar.gz" {
        let sets: Vec<_> = full.iter().map(|b| apk::package_set(b)).collect::<anyhow::Result<_>>()?;
        for (t, set) in targets.iter().zip(&sets) {
            anyhow::ensure!(
                set == &sets[0],
                "preflight {}: {} lists other packages than {}",
                scenario.name,
                t.name,
                targets[0].name
            );
        }
        notes.push(format!("same APK records on every target ({} packages)", sets[0].len()));
    } else if file.starts_with("Packages") {
        let sets: Vec<_> = full.iter().map(|b| apt::package_set(b, path)).collect::<anyhow::Result<_>>()?;
        for (t, set) in targets.iter().zip(&sets) {
            anyhow::ensure!(
                set == &sets[0],
                "preflight {}: {} lists other packages than {}",
                scenario.name,
                t.name,
                targets[0].name
            );
        }
        notes.push(format!("same package set on every target ({} packages)", sets[0].len()));
    } else {
        let digests: Vec<String> = full.iter().map(|b| hex::encode(Sha256::digest(b))).collect();
        for (t, d) in targets.iter().zip(&digests) {
            anyhow::ensure!(
                d == &digests[0],
                "preflight {}: {} serves other bytes (sha256 {d} vs {})",
                scenario.name,
                t.name,
                digests[0]
            );
        }
        notes.push(format!("identical bytes on every target (sha256 {}, {} bytes)", digests[0], full[0].len()));
    }
    notes.push(format!("every target answered {} as expected", scenario.expected_status()));
    Ok((prepared, notes))
}

/// Where an upload must show up: `needle` in the body of `index`.
#[derive(Debug, Clone)]
pub struct Visible {
    pub index: String,
    pub needle: String,
}

/// One distinct upload (named from `run` and `i`): a POSTed `.deb`, or a module zip PUT to
/// `example.com/loadtest/<run>/@v/v1.0.<i>.zip`; and where it must become visible.
fn upload_request(
    opts: &Options,
    kind: Kind,
    run: &str,
    i: usize,
    payload: &[u8],
) -> anyhow::Result<(Request, Visible)> {
    let mut headers = Vec::new();
    if let Some(a) = &opts.auth {
        headers.push(("Authorization".into(), basic(a)));
    }
    if kind == Kind::UploadGo {
        let module = format!("example.com/loadtest/{run}");
        let version = format!("v1.0.{i}");
        let mut body = go::module_zip(&module, &version, payload)?;
        body.shrink_to_fit();
        headers.push(("Content-Type".to_string(), "application/zip".to_string()));
        let path = format!("{module}/@v/{version}.zip");
        let visible = Visible { index: format!("{module}/@v/list"), needle: format!("{version}\n") };
        return Ok((Request { method: "PUT", path, headers, body: Some(Arc::new(body)) }, visible));
    }
    let name = format!("loadtest-{run}-{i}");
    let mut body = apt::deb(&name, "1.0", "amd64", payload)?;
    body.shrink_to_fit();
    headers.push(("Content-Type".to_string(), "application/vnd.debian.binary-package".to_string()));
    let visible = Visible { index: opts.visible_in.clone(), needle: format!("Package: {name}\n") };
    Ok((Request { method: "POST", path: String::new(), headers, body: Some(Arc::new(body)) }, visible))
}

async fn wait_visible(endpoint: &Endpoint, wanted: &[Visible], limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut conn = Conn::new(endpoint.clone());
    let mut indexes: Vec<&str> = wanted.iter().map(|w| w.index.as_str()).collect();
    indexes.sort_unstable();
    indexes.dedup();
    for index in indexes {
        loop {
            let r = conn.send(&get(index), true).await?;
            if r.status == 200 {
                let text = String::from_utf8_lossy(&r.body);
                if wanted.iter().filter(|w| w.index == index).all(|w| text.contains(&w.needle)) {
                    break;
                }
            }
            anyhow::ensure!(started.elapsed() < limit, "uploads not in {index} after {limit:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(started.elapsed())
}

/// Sends `n` requests (or until `min_time` too) from `concurrency` workers.
async fn drive(
    endpoint: &Endpoint,
    template: &Request,
    expected: u16,
    n: usize,
    concurrency: usize,
    min_time: Duration,
    upload: Option<(&Options, Kind, String)>,
) -> anyhow::Result<(Figures, Vec<Visible>)> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..concurrency.max(1) {
        let endpoint = endpoint.clone();
        let endpoint_addr = format!("{}{}", endpoint.addr, endpoint.prefix);
        let template = template.clone();
        let next = next.clone();
        let upload = upload.as_ref().map(|(o, k, run)| ((*o).clone(), *k, run.clone()));
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(endpoint);
            let mut lat = Vec::new();
            let mut bytes = 0u64;
            let mut names = Vec::new();
            let payload = upload.as_ref().map(|(o, _, _)| apt::filler(w as u64 + 11, o.upload_bytes));
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n && started.elapsed() >= min_time {
                    break;
                }
                let req = match (&upload, &payload) {
                    (Some((o, kind, run)), Some(p)) => {
                        let (r, name) = upload_request(o, *kind, run, i, p)?;
                        names.push(name);
                        r
                    }
                    _ => template.clone(),
                };
                let resp = conn.send(&req, false).await.map_err(|e| {
                    // Which server: the run stops here, and the message is all that is left of it.
                    e.context(format!("{} http://{}{}", req.method, endpoint_addr, req.path))
                })?;
                anyhow::ensure!(
                    resp.status == expected,
                    "{} /{} answered {} (expected {expected}) during a timed round",
                    req.method,
                    req.path,
                    resp.status
                );
                lat.push(resp.elapsed.as_secs_f64() * 1000.0);
                bytes += resp.body_len + req.body.as_ref().map_or(0, |b| b.len() as u64);
            }
            Ok::<_, anyhow::Error>((lat, bytes, names))
        }));
    }
    let mut lat = Vec::new();
    let mut bytes = 0u64;
    let mut names = Vec::new();
    let mut failure = None;
    for t in &mut tasks {
        match t.await {
            Ok(Ok((l, b, nm))) => {
                lat.extend(l);
                bytes += b;
                names.extend(nm);
            }
            Ok(Err(e)) => {
                failure = Some(e);
                break;
            }
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        }
    }
    if let Some(e) = failure {
        // The other workers stop at once rather than finish the round.
        for t in &tasks {
            t.abort();
        }
        return Err(e);
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    lat.sort_by(f64::total_cmp);
    Ok((
        Figures {
            requests: lat.len(),
            req_per_sec: lat.len() as f64 / secs,
            mib_per_sec: bytes as f64 / 1_048_576.0 / secs,
            p50_ms: percentile(&lat, 50.0),
            p95_ms: percentile(&lat, 95.0),
            p99_ms: percentile(&lat, 99.0),
            max_ms: lat.last().copied().unwrap_or(0.0),
        },
        names,
    ))
}

/// Runs one scenario over every target: preflight, warm-up, alternating rounds.
pub async fn run_scenario(scenario: &Scenario, targets: &[Target], opts: &Options) -> anyhow::Result<ScenarioResult> {
    let (prepared, notes) = preflight(scenario, targets, opts).await?;
    let expected = scenario.expected_status();
    let endpoints: Vec<Endpoint> = targets.iter().map(|t| Endpoint::parse(&t.url)).collect::<anyhow::Result<_>>()?;
    let run_id = format!("{}x{}", std::process::id(), run_nonce());
    let upload = scenario.kind.is_upload();
    for (i, e) in endpoints.iter().enumerate() {
        let (n, time) = if upload {
            (opts.upload_warmup, Duration::ZERO)
        } else {
            (opts.warmup_requests, Duration::from_secs_f64(opts.warmup_seconds))
        };
        let up = upload.then(|| (opts, scenario.kind, format!("w{run_id}t{i}")));
        drive(e, &prepared[i], expected, n, opts.concurrency, time, up).await?;
    }
    let mut rounds: Vec<Vec<Figures>> = vec![Vec::new(); targets.len()];
    let mut visible: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for r in 0..opts.rounds.max(1) {
        let order: Vec<usize> =
            if r % 2 == 0 { (0..targets.len()).collect() } else { (0..targets.len()).rev().collect() };
        for i in order {
            let up = upload.then(|| (opts, scenario.kind, format!("r{run_id}t{i}r{r}")));
            let (fig, names) =
                drive(&endpoints[i], &prepared[i], expected, opts.requests, opts.concurrency, Duration::ZERO, up)
                    .await?;
            if upload {
                let v = wait_visible(&endpoints[i], &names, Duration::from_secs(60)).await?;
                visible[i].push(v.as_secs_f64() * 1000.0);
            }
            rounds[i].push(fig);
        }
    }
    let results: Vec<TargetResult> = targets
        .iter()
        .zip(rounds)
        .zip(visible)
        .map(|((t, rounds), vis)| TargetResult {
            target: t.name.clone(),
            url: t.url.clone(),
            summary: summarize(&rounds),
            rounds,
            visible_ms: upload.then(|| median(vis)),
        })
        .collect();
    let mut ratios = Vec::new();
    if let Some(first) = results.first() {
        for other in &results[1..] {
            ratios.push(Ratio {
                target: first.target.clone(),
                against: other.target.clone(),
                throughput: first.summary.req_per_sec / other.summary.req_per_sec.max(1e-9),
                paired: median(
                    first
                        .rounds
                        .iter()
                        .zip(&other.rounds)
                        .map(|(a, b)| a.req_per_sec / b.req_per_sec.max(1e-9))
                        .collect(),
                ),
                p95: first.summary.p95_ms / other.summary.p95_ms.max(1e-9),
            });
        }
    }
    Ok(ScenarioResult {
        scenario: scenario.clone(),
        expected_status: expected,
        preflight: notes,
        targets: results,
        ratios,
    })
}

/// `SCENARIO:min_ratio:max_p95_ratio`: the first target against every other one.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    pub scenario: String,
    pub min_ratio: f64,
    pub max_p95_ratio: f64,
}

impl Gate {
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let mut parts = s.rsplitn(3, ':');
        let (Some(p95), Some(min), Some(scenario)) = (parts.next(), parts.next(), parts.next()) else {
            anyhow::bail!("--gate wants SCENARIO:min_ratio:max_p95_ratio, got {s:?}");
        };
        Ok(Self { scenario: scenario.to_string(), min_ratio: min.parse()?, max_p95_ratio: p95.parse()? })
    }

    /// Failures, one line each.
    pub fn check(&self, results: &[ScenarioResult]) -> Vec<String> {
        let Some(r) = results.iter().find(|r| r.scenario.name == self.scenario) else {
            return vec![format!("gate {}: no such scenario was run", self.scenario)];
        };
        let mut out = Vec::new();
        for ratio in &r.ratios {
            if ratio.throughput < self.min_ratio {
                out.push(format!(
                    "gate {}: {} has {:.2}× the throughput of {} (minimum {:.2}×)",
                    self.scenario, ratio.target, ratio.throughput, ratio.against, self.min_ratio
                ));
            }
            if ratio.p95 > self.max_p95_ratio {
                out.push(format!(
                    "gate {}: {}'s p95 is {:.2}× that of {} (maximum {:.2}×)",
                    self.scenario, ratio.target, ratio.p95, ratio.against, self.max_p95_ratio
                ));
            }
        }
        out
    }
}

/// The Markdown table of a run.
pub fn markdown(results: &[ScenarioResult], opts: &Options) -> String {
    let mut s = format!(
        "Requests per round {}, concurrency {} (one keep-alive connection each), {} rounds (target order alternating), warm-up {} requests and {} s per target; figures are medians over the rounds; ratios compare the first target with each other one (throughput: higher is better; p95: lower is better); the paired ratio is the median of the rounds' own throughput ratios (each round measures the targets one after the other).\n\n",
        opts.requests, opts.concurrency, opts.rounds, opts.warmup_requests, opts.warmup_seconds
    );
    s.push_str("| scenario | target | req/s | MiB/s | p50 ms | p95 ms | p99 ms | max ms | ratio | paired ratio | p95 ratio |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        for t in &r.targets {
            let ratio = r.ratios.iter().find(|x| x.against == t.target);
            let (a, p, b) = ratio.map_or(("—".to_string(), "—".to_string(), "—".to_string()), |x| {
                (format!("{:.2}×", x.throughput), format!("{:.2}×", x.paired), format!("{:.2}×", x.p95))
            });
            let f = &t.summary;
            let vis = t.visible_ms.map(|v| format!(" (visible in {v:.0} ms)")).unwrap_or_default();
            s.push_str(&format!(
                "| `{}` | {}{vis} | {:.0} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {a} | {p} | {b} |\n",
                r.scenario.name, t.target, f.req_per_sec, f.mib_per_sec, f.p50_ms, f.p95_ms, f.p99_ms, f.max_ms
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets_scenarios_gates() -> anyhow::Result<()> {
        let t = Target::parse("packyard=http://127.0.0.1:8080/repository/debs/")?;
        assert_eq!(t.name, "packyard");
        assert!(Target::parse("nourl").is_err());
        let s = Scenario::parse("cond:/dists/stable/InRelease")?;
        assert_eq!((s.kind, s.path.as_str(), s.expected_status()), (Kind::Cond, "dists/stable/InRelease", 304));
        assert_eq!(Scenario::parse("upload:apt")?.expected_status(), 201);
        assert!(Scenario::parse("post:x").is_err());
        let g = Gate::parse("get:dists/stable/InRelease:1.0:1.2")?;
        assert_eq!((g.scenario.as_str(), g.min_ratio, g.max_p95_ratio), ("get:dists/stable/InRelease", 1.0, 1.2));
        Ok(())
    }

    #[test]
    fn percentiles_and_medians() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 95.0), 95.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
