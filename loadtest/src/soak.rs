//! `packyard-loadtest soak`: mixed reads and uploads (APT, APK, Go, Conan) through a load balancer for a
//! while, with a fault injected at a fixed interval (commands run by `sh -c`, cycled), then the
//! checks: every acknowledged upload is in its format's published metadata; the resident memory
//! and open file descriptors of every process, sampled throughout; read latency in the first
//! and the last minute; and the failed requests, by kind.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{apk, apt, go};

pub struct SoakOptions {
    /// The load balancer's base URL.
    pub target: String,
    /// `NAME=URL` of each process's management listener (for `/metrics`).
    pub processes: Vec<(String, String)>,
    /// user:password.
    pub auth: String,
    pub duration: Duration,
    pub fault_every: Duration,
    /// Shell commands, one per fault, cycled.
    pub faults: Vec<String>,
    pub readers: usize,
    pub uploaders: usize,
}

#[derive(Default)]
struct Shared {
    /// (format, name) of every acknowledged upload.
    acknowledged: Vec<(&'static str, String)>,
    /// Read latencies in ms, with the second they were taken in.
    reads: Vec<(u64, f64)>,
    failures: Vec<String>,
    faults: Vec<(u64, String, bool)>,
    /// (second, process, rss bytes, open fds)
    samples: Vec<(u64, String, f64, f64)>,
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build()
}

fn basic(auth: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(auth))
}

fn create_repositories(opts: &SoakOptions) -> anyhow::Result<()> {
    for (name, format) in [("soak-apt", "apt"), ("soak-apk", "apk"), ("soak-go", "go"), ("soak-conan", "conan")] {
        let r = agent()
            .post(&format!("{}/api/v1/repositories", opts.target))
            .set("Authorization", &basic(&opts.auth))
            .send_json(serde_json::json!({"name": name, "format": format, "type": "hosted"}));
        match r {
            Ok(_) | Err(ureq::Error::Status(409, _)) => {}
            Err(e) => anyhow::bail!("creating {name}: {e}"),
        }
    }
    Ok(())
}

/// A Conan recipe revision of `soakpkg/1.0` as its client uploads it: `conanfile.py`, then the
/// `conanmanifest.txt` that completes it. Returns the revision and the last status.
fn conan_upload(opts: &SoakOptions, agent: &ureq::Agent, payload: &[u8]) -> anyhow::Result<(String, u16)> {
    use md5::Digest as _;
    let conanfile = format!(
        "from conan import ConanFile\n\nclass Soak(ConanFile):\n    name = 'soakpkg'\n    # {}\n",
        hex::encode(&payload[..16])
    );
    let manifest = format!("1700000000\nconanfile.py: {}\n", hex::encode(md5::Md5::digest(conanfile.as_bytes())));
    let rrev = hex::encode(md5::Md5::digest(manifest.as_bytes()));
    let base = format!("{}/repository/soak-conan/v2/conans/soakpkg/1.0/_/_/revisions/{rrev}/files", opts.target);
    let mut status = 0;
    for (file, body) in [("conanfile.py", conanfile.as_bytes()), ("conanmanifest.txt", manifest.as_bytes())] {
        status = match agent.put(&format!("{base}/{file}")).set("Authorization", &basic(&opts.auth)).send_bytes(body) {
            Ok(r) => r.status(),
            Err(ureq::Error::Status(code, _)) => code,
            Err(e) => return Err(e.into()),
        };
        if status != 201 && status != 200 {
            break;
        }
    }
    Ok((rrev, status))
}

/// One upload of the `n`th package of uploader `u`, cycling the formats.
fn upload(opts: &SoakOptions, agent: &ureq::Agent, u: usize, n: usize) -> anyhow::Result<(&'static str, String, u16)> {
    let payload = apt::filler((u * 1_000_000 + n) as u64, 8 * 1024);
    let auth = basic(&opts.auth);
    if n % 4 == 3 {
        let (rrev, status) = conan_upload(opts, agent, &payload)?;
        return Ok(("conan", rrev, status));
    }
    let (format, name, req, body) = match n % 4 {
        0 => {
            let name = format!("soak{u}x{n}");
            let body = apt::deb(&name, "1.0", "amd64", &payload)?;
            ("apt", name, agent.post(&format!("{}/repository/soak-apt/", opts.target)), body)
        }
        1 => {
            let name = format!("soak{u}x{n}");
            let body = apk::apk(&name, "1.0-r0", "x86_64", &payload)?;
            let url = format!("{}/repository/soak-apk/v3.20/main/x86_64/{name}-1.0-r0.apk", opts.target);
            ("apk", name, agent.put(&url), body)
        }
        _ => {
            let version = format!("v1.{u}.{n}");
            let body = go::module_zip("example.com/soak", &version, &payload)?;
            let url = format!("{}/repository/soak-go/example.com/soak/@v/{version}.zip", opts.target);
            ("go", version, agent.put(&url), body)
        }
    };
    let status = match req.set("Authorization", &auth).send_bytes(&body) {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(code, _)) => code,
        Err(e) => return Err(e.into()),
    };
    Ok((format, name, status))
}

const READS: [&str; 4] = [
    "/repository/soak-apt/dists/stable/InRelease",
    "/repository/soak-apk/v3.20/main/x86_64/APKINDEX.tar.gz",
    "/repository/soak-go/example.com/soak/@v/list",
    "/repository/soak-conan/v2/conans/soakpkg/1.0/_/_/revisions",
];

/// The value of the first sample in a `/metrics` page whose line starts with `name` (with its
/// labels, if any); NaN when there is none.
pub fn metric(page: &str, name: &str) -> f64 {
    page.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok()).unwrap_or(f64::NAN)
}

fn p95(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.95) as usize).min(v.len() - 1)]
}

/// What the published metadata lists, per format.
fn published(opts: &SoakOptions) -> anyhow::Result<[BTreeSet<String>; 4]> {
    let a = agent();
    let get = |path: &str| -> anyhow::Result<Vec<u8>> {
        let r = a.get(&format!("{}{path}", opts.target)).call()?;
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
        Ok(body)
    };
    let packages = String::from_utf8(get("/repository/soak-apt/dists/stable/main/binary-amd64/Packages")?)?;
    let debs = packages.lines().filter_map(|l| l.strip_prefix("Package: ")).map(str::to_string).collect();
    let apks = apk::package_set(&get(READS[1])?)?
        .iter()
        .filter_map(|r| r.split(' ').find_map(|f| f.strip_prefix("P:")).map(str::to_string))
        .collect();
    let versions = String::from_utf8(get(READS[2])?)?.lines().map(str::to_string).collect();
    let revisions: serde_json::Value = serde_json::from_slice(&get(READS[3])?)?;
    let revisions = revisions["revisions"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["revision"].as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    Ok([debs, apks, versions, revisions])
}

/// Runs the soak; returns the Markdown report and whether every check passed.
pub fn run(opts: &SoakOptions) -> anyhow::Result<(String, bool)> {
    create_repositories(opts)?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(Shared::default()));
    std::thread::scope(|scope| {
        for r in 0..opts.readers {
            let (stop, shared) = (stop.clone(), shared.clone());
            scope.spawn(move || {
                let agent = agent();
                let mut i = r;
                while !stop.load(Ordering::SeqCst) {
                    let path = READS[i % READS.len()];
                    i += 1;
                    let t = Instant::now();
                    let r = agent.get(&format!("{}{path}", opts.target)).call();
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(resp) => {
                            let _ = std::io::copy(&mut resp.into_reader(), &mut std::io::sink());
                            s.reads.push((started.elapsed().as_secs(), ms));
                        }
                        // Before the first upload of a format its metadata may not exist yet.
                        Err(ureq::Error::Status(404, _)) => {}
                        Err(e) => s.failures.push(format!("{:>4}s GET {path}: {e}", started.elapsed().as_secs())),
                    }
                }
            });
        }
        for u in 0..opts.uploaders {
            let (stop, shared) = (stop.clone(), shared.clone());
            scope.spawn(move || {
                let agent = agent();
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    let r = upload(opts, &agent, u, n);
                    n += 1;
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok((format, name, 200 | 201)) => s.acknowledged.push((format, name)),
                        Ok((format, name, status)) => s
                            .failures
                            .push(format!("{:>4}s upload {format} {name}: {status}", started.elapsed().as_secs())),
                        Err(e) => s.failures.push(format!("{:>4}s upload: {e}", started.elapsed().as_secs())),
                    }
                }
            });
        }
        {
            let (stop, shared) = (stop.clone(), shared.clone());
            scope.spawn(move || {
                let agent = agent();
                while !stop.load(Ordering::SeqCst) {
                    for (name, url) in &opts.processes {
                        if let Ok(r) = agent.get(&format!("{url}/metrics")).call() {
                            let page = r.into_string().unwrap_or_default();
                            let (rss, fds) =
                                (metric(&page, "process_resident_memory_bytes"), metric(&page, "process_open_fds"));
                            shared.lock().unwrap_or_else(|e| e.into_inner()).samples.push((
                                started.elapsed().as_secs(),
                                name.clone(),
                                rss,
                                fds,
                            ));
                        }
                    }
                    std::thread::sleep(Duration::from_secs(10));
                }
            });
        }
        let mut next_fault = opts.fault_every;
        let mut f = 0;
        while started.elapsed() < opts.duration {
            std::thread::sleep(Duration::from_millis(200));
            if !opts.faults.is_empty() && started.elapsed() >= next_fault {
                let cmd = &opts.faults[f % opts.faults.len()];
                f += 1;
                next_fault += opts.fault_every;
                let ok = std::process::Command::new("sh").args(["-c", cmd]).status().is_ok_and(|s| s.success());
                shared.lock().unwrap_or_else(|e| e.into_inner()).faults.push((
                    started.elapsed().as_secs(),
                    cmd.clone(),
                    ok,
                ));
            }
        }
        stop.store(true, Ordering::SeqCst);
    });

    let shared = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    // Everything acknowledged must be published (the worker may still be catching up).
    let want: [BTreeSet<String>; 4] = ["apt", "apk", "go", "conan"]
        .map(|f| shared.acknowledged.iter().filter(|(format, _)| *format == f).map(|(_, n)| n.clone()).collect());
    let deadline = Instant::now() + Duration::from_secs(120);
    let missing = loop {
        let missing: Vec<String> = match published(opts) {
            Ok(got) => (0..4).flat_map(|i| want[i].difference(&got[i]).cloned().collect::<Vec<_>>()).collect(),
            Err(e) => vec![format!("cannot read the published metadata: {e}")],
        };
        if missing.is_empty() || Instant::now() > deadline {
            break missing;
        }
        std::thread::sleep(Duration::from_secs(1));
    };

    let secs = opts.duration.as_secs();
    let first: Vec<f64> = shared.reads.iter().filter(|(t, _)| *t < 60).map(|(_, ms)| *ms).collect();
    let last: Vec<f64> = shared.reads.iter().filter(|(t, _)| *t + 60 >= secs).map(|(_, ms)| *ms).collect();
    let upload_failures = shared.failures.iter().filter(|f| f.contains("upload")).count();
    let read_failures = shared.failures.len() - upload_failures;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Duration {secs} s, {} readers, {} uploaders (APT, APK, Go and Conan in turn), a fault every {} s.\n",
        opts.readers,
        opts.uploaders,
        opts.fault_every.as_secs()
    );
    let _ = writeln!(md, "| check | result |\n|---|---|");
    let _ = writeln!(
        md,
        "| acknowledged uploads | {} (APT {}, APK {}, Go {}, Conan {}) |",
        shared.acknowledged.len(),
        want[0].len(),
        want[1].len(),
        want[2].len(),
        want[3].len()
    );
    let _ = writeln!(md, "| acknowledged but not published | {} |", missing.len());
    let _ = writeln!(md, "| reads | {} ok, {read_failures} failed |", shared.reads.len());
    let _ = writeln!(md, "| uploads refused or failed | {upload_failures} |");
    let _ = writeln!(
        md,
        "| read p95, first minute → last minute | {:.2} ms → {:.2} ms |",
        p95(first.clone()),
        p95(last.clone())
    );
    let _ = writeln!(md, "\nFaults:\n");
    for (t, cmd, ok) in &shared.faults {
        let _ = writeln!(md, "- {t:>4} s: `{cmd}`{}", if *ok { "" } else { " (the command failed)" });
    }
    let _ = writeln!(
        md,
        "\nResident memory (MiB) and open file descriptors per process, sampled every 10 s (one row a minute):\n"
    );
    let names: Vec<&String> = opts.processes.iter().map(|(n, _)| n).collect();
    let _ = writeln!(md, "| s | {} |", names.iter().map(|n| format!("{n} RSS / fds")).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(names.len()));
    let mut minute = 0;
    while minute * 60 <= secs {
        let cells: Vec<String> = names
            .iter()
            .map(|n| {
                shared
                    .samples
                    .iter()
                    .filter(|(t, p, _, _)| p == *n && *t >= minute * 60)
                    .min_by_key(|(t, ..)| *t)
                    .map_or("—".to_string(), |(_, _, rss, fds)| format!("{:.0} / {fds:.0}", rss / 1048576.0))
            })
            .collect();
        let _ = writeln!(md, "| {} | {} |", minute * 60, cells.join(" | "));
        minute += 1;
    }
    if !shared.failures.is_empty() {
        let _ = writeln!(md, "\nFailed requests (first 20):\n");
        for f in shared.failures.iter().take(20) {
            let _ = writeln!(md, "- {f}");
        }
    }
    if !missing.is_empty() {
        let _ = writeln!(
            md,
            "\nAcknowledged but not published (first 20): {:?}",
            missing.iter().take(20).collect::<Vec<_>>()
        );
    }
    Ok((md, missing.is_empty() && !shared.acknowledged.is_empty()))
}
