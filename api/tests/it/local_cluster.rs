//! `deploy/local-cluster.sh` end to end: PostgreSQL, Redis, RabbitMQ, the S3 test server, two
//! api replicas, one worker and nginx in front. Real `.deb` files go up through the load
//! balancer; the published metadata comes back from each replica directly; with one replica
//! stopped, nginx keeps serving.

use crate::common;
use crate::common::process::basic;

use common::Repo;
use packyard_model::repos::Format;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use common::process::{status_of, BIN};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A base port with the 21 ports the cluster uses above it free, below the kernel's ephemeral
/// range: a port in that range can be handed to any outgoing connection between this check and
/// the server's bind (CI lost the S3 server's port that way).
fn free_base() -> anyhow::Result<u16> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next().and_then(|low| low.parse::<u16>().ok()))
        .unwrap_or(32_768);
    let (low, high) = (10_000u16, ephemeral_low.saturating_sub(21).max(10_100));
    for _ in 0..200 {
        let base = low + rand::random::<u16>() % (high - low);
        let all_free = (0..=20).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok());
        if all_free {
            return Ok(base);
        }
    }
    anyhow::bail!("no free port range")
}

struct Cluster {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    vars: HashMap<String, String>,
}

impl Cluster {
    fn script(&self, verb: &str) -> anyhow::Result<std::process::Output> {
        self.script_args(&[verb])
    }

    fn script_args(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("deploy/local-cluster.sh")).args(args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        Ok(cmd.output()?)
    }

    fn var(&self, name: &str) -> anyhow::Result<&str> {
        self.vars.get(name).map(String::as_str).ok_or_else(|| anyhow::anyhow!("cluster.env has no {name}"))
    }

    /// The warnings and errors the replicas and the worker logged, for a failure's message: a
    /// 503 says only "retry shortly" to the client, its cause is in the log.
    fn warnings(&self) -> String {
        let mut out = String::new();
        for name in ["api1", "api2", "worker"] {
            let log =
                std::fs::read_to_string(self.dir.path().join("logs").join(format!("{name}.log"))).unwrap_or_default();
            // The last ones: those near the failure, not the start-up's.
            let said: Vec<&str> = log.lines().filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\"")).collect();
            for line in &said[said.len().saturating_sub(20)..] {
                out.push_str(&format!("\n{name}: {line}"));
            }
        }
        out
    }

    fn pid(&self, name: &str) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.dir.path().join("pids").join(format!("{name}.pid")))?.trim().to_string())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script("down");
    }
}

fn real_debs() -> Option<HashMap<String, PathBuf>> {
    let dir = std::env::var("TEST_DEBS_DIR").ok()?;
    let mut out = HashMap::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(pkg) = name.split('_').next().filter(|_| name.ends_with(".deb")) {
            out.insert(pkg.to_string(), entry.path());
        }
    }
    Some(out)
}

/// POSTs a `.deb` to the repository `debs` behind `base` and waits until it is published.
fn upload_deb(base: &str, auth: &str, deb: &[u8]) -> anyhow::Result<()> {
    let (s, body) = status_of(
        ureq::post(&format!("{base}/repository/debs/?wait=true"))
            .set("Authorization", auth)
            .set("Content-Type", "application/vnd.debian.binary-package")
            .send_bytes(deb),
    )?;
    anyhow::ensure!(s == 201, "upload: {s} {body}");
    Ok(())
}

/// Waits until `url` answers 200 with a body for which `ok` holds; returns that body.
fn until(url: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    let deadline = Instant::now() + limit;
    loop {
        let (s, body) = status_of(ureq::get(url).call())?;
        if s == 200 && ok(&body) {
            return Ok(body);
        }
        anyhow::ensure!(Instant::now() < deadline, "{url}: {s} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Brings a cluster up on free ports in a temporary directory; `None` (skipped) without the
/// test services.
fn cluster_up() -> anyhow::Result<Option<(Cluster, HashMap<String, PathBuf>)>> {
    let Ok(pg) = std::env::var("TEST_POSTGRES_URL") else {
        eprintln!("skipped: TEST_POSTGRES_URL is not set (scripts/test.sh sets it)");
        return Ok(None);
    };
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(None);
    };

    let dir = tempfile::tempdir()?;
    let bin_dir = Path::new(BIN).parent().ok_or_else(|| anyhow::anyhow!("no bin dir"))?.to_string_lossy().to_string();
    let mut env = vec![
        ("CLUSTER_DIR".to_string(), dir.path().to_string_lossy().to_string()),
        ("CLUSTER_PORT".to_string(), free_base()?.to_string()),
        // packyard_t_ databases left by a failed run are dropped by scripts/test.sh.
        ("CLUSTER_DB".to_string(), format!("packyard_t_cluster_{}", hex::encode(rand::random::<[u8; 4]>()))),
        ("PG_URL".to_string(), pg),
        ("CLUSTER_BIN_DIR".to_string(), bin_dir),
    ];
    for (var, name) in [("TEST_REDIS_URL", "REDIS_URL"), ("TEST_AMQP_URL", "AMQP_URL")] {
        if let Ok(v) = std::env::var(var) {
            env.push((name.to_string(), v));
        }
    }
    let mut cluster = Cluster { dir, env, vars: HashMap::new() };
    let mut up = cluster.script("up")?;
    // Another program can still take a port between the check and the bind: a new range then.
    for _ in 0..2 {
        let said = String::from_utf8_lossy(&up.stderr).to_string() + &String::from_utf8_lossy(&up.stdout);
        if up.status.success() || !(said.contains("already in use") || said.contains("is taken")) {
            break;
        }
        let base = free_base()?.to_string();
        for (k, v) in cluster.env.iter_mut() {
            if k == "CLUSTER_PORT" {
                *v = base.clone();
            }
        }
        up = cluster.script("up")?;
    }
    assert!(
        up.status.success(),
        "local-cluster.sh up failed:\n{}\n{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let env_file = std::fs::read_to_string(cluster.dir.path().join("cluster.env"))?;
    cluster.vars =
        env_file.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Ok(Some((cluster, debs)))
}

#[test]
fn upload_through_nginx_read_from_each_replica_and_survive_a_stopped_replica() -> anyhow::Result<()> {
    let Some((cluster, debs)) = cluster_up()? else { return Ok(()) };
    let (hello, jq) = (debs.get("hello").cloned(), debs.get("jq").cloned());
    let (Some(hello), Some(jq)) = (hello, jq) else { anyhow::bail!("TEST_DEBS_DIR lacks hello and jq") };
    let (lb, api1, api2) = (cluster.var("LB_URL")?, cluster.var("API1_URL")?, cluster.var("API2_URL")?);
    let auth = basic(cluster.var("ADMIN_PASSWORD")?);
    let status = String::from_utf8_lossy(&cluster.script("status")?.stdout).to_string();
    for name in ["api1", "api2", "worker", "s3", "nginx"] {
        assert!(status.contains(&format!("{name}: running")), "{status}");
    }

    // A hosted APT repository, made and filled through the load balancer.
    common::process::create_repository(lb, &auth, Repo::hosted("debs", Format::Apt))?;
    let hello_bytes = std::fs::read(&hello)?;
    upload_deb(lb, &auth, &hello_bytes)?;
    let hello_sha = hex::encode(Sha256::digest(&hello_bytes));

    // Both replicas serve the same signed metadata, listing the package with its hash.
    let packages = "/repository/debs/dists/stable/main/binary-amd64/Packages";
    let mut served = Vec::new();
    for replica in [api1, api2] {
        let body = until(&format!("{replica}{packages}"), Duration::from_secs(10), |b| b.contains(&hello_sha))?;
        assert!(body.contains("Package: hello\n"), "{body}");
        let (s, in_release) =
            status_of(ureq::get(&format!("{replica}/repository/debs/dists/stable/InRelease")).call())?;
        assert_eq!(s, 200);
        assert!(in_release.starts_with("-----BEGIN PGP SIGNED MESSAGE-----"), "{in_release}");
        served.push((body, in_release));
    }
    assert_eq!(served[0], served[1], "the replicas serve different snapshots");

    // The package itself, from the S3 store, through nginx.
    let filename = served[0]
        .0
        .lines()
        .find_map(|l| l.strip_prefix("Filename: "))
        .ok_or_else(|| anyhow::anyhow!("no Filename"))?
        .to_string();
    let resp = ureq::get(&format!("{lb}/repository/debs/{filename}")).call()?;
    let mut fetched = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut fetched)?;
    assert_eq!(hex::encode(Sha256::digest(&fetched)), hello_sha);

    // One replica stops (SIGTERM: a rolling restart's first half); nginx keeps answering.
    let pid = cluster.pid("api1")?;
    assert!(Command::new("kill").args(["-TERM", &pid]).status()?.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while Command::new("kill").args(["-0", &pid]).status()?.success() {
        anyhow::ensure!(Instant::now() < deadline, "api1 did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..40 {
        let (s, body) = status_of(ureq::get(&format!("{lb}{packages}")).call())?;
        assert_eq!((s, body.as_str()), (200, served[0].0.as_str()), "read {i} through nginx");
    }
    // Writes go on too, and the surviving replica publishes them.
    let jq_bytes = std::fs::read(&jq)?;
    upload_deb(lb, &auth, &jq_bytes)?;
    let jq_sha = hex::encode(Sha256::digest(&jq_bytes));
    let body = until(&format!("{api2}{packages}"), Duration::from_secs(10), |b| b.contains(&jq_sha))?;
    assert!(body.contains("Package: jq\n") && body.contains(&hello_sha), "{body}");

    let down = cluster.script("down")?;
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    assert!(status_of(ureq::get(&format!("{lb}{packages}")).timeout(Duration::from_secs(2)).call()).is_err());
    Ok(())
}

/// Counts of answers by class, from the load threads.
#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    server_errors: Vec<String>,
    other: Vec<String>,
    acknowledged: Vec<String>,
}

#[test]
fn replica_restarts_under_load_cost_no_more_than_their_in_flight_requests() -> anyhow::Result<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let Some((cluster, _)) = cluster_up()? else { return Ok(()) };
    let lb = cluster.var("LB_URL")?.to_string();
    let auth = basic(cluster.var("ADMIN_PASSWORD")?);
    common::process::create_repository(&lb, &auth, Repo::hosted("debs", Format::Apt))?;
    let seed = packyard_loadtest::apt::deb("seed", "1.0", "amd64", b"seed")?;
    upload_deb(&lb, &auth, &seed)?;
    let packages = "/repository/debs/dists/stable/main/binary-amd64/Packages";

    // Readers (metadata and the package) and uploaders, all through nginx, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut threads = Vec::new();
    for t in 0..6 {
        let (stop, tally, lb) = (stop.clone(), tally.clone(), lb.clone());
        threads.push(std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
            let paths = [
                packages,
                "/repository/debs/dists/stable/InRelease",
                "/repository/debs/pool/main/s/seed/seed_1.0_amd64.deb",
            ];
            let mut i = t;
            while !stop.load(Ordering::SeqCst) {
                let path = paths[i % paths.len()];
                i += 1;
                let r = status_of(agent.get(&format!("{lb}{path}")).call());
                let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                match r {
                    Ok((200, _)) => t.ok += 1,
                    Ok((s, body)) if s >= 500 => t.server_errors.push(format!("GET {path}: {s} {body}")),
                    Ok((s, body)) => t.other.push(format!("GET {path}: {s} {body}")),
                    Err(e) => t.other.push(format!("GET {path}: {e}")),
                }
            }
        }));
    }
    for u in 0..2 {
        let (stop, tally, lb, auth) = (stop.clone(), tally.clone(), lb.clone(), auth.clone());
        threads.push(std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("load{u}x{n}");
                n += 1;
                let Ok(deb) = packyard_loadtest::apt::deb(&name, "1.0", "amd64", name.as_bytes()) else { return };
                let r = status_of(
                    agent.post(&format!("{lb}/repository/debs/")).set("Authorization", &auth).send_bytes(&deb),
                );
                let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
                match r {
                    Ok((201, _)) => t.acknowledged.push(name),
                    Ok((s, body)) if s >= 500 => t.server_errors.push(format!("POST {name}: {s} {body}")),
                    Ok((s, body)) => t.other.push(format!("POST {name}: {s} {body}")),
                    Err(e) => t.other.push(format!("POST {name}: {e}")),
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(2));
    // A crash (SIGKILL) of one replica, then a graceful restart (SIGTERM) of the other.
    for (replica, signal) in [("api1", "KILL"), ("api2", "TERM")] {
        let out = cluster.script_args(&["restart", replica, signal])?;
        assert!(out.status.success(), "restart {replica}: {}", String::from_utf8_lossy(&out.stderr));
        // Longer than nginx's fail_timeout (1 s), so that it tries the restarted replica again
        // before the next one goes down: a rolling restart waits for the previous pod as well.
        std::thread::sleep(Duration::from_secs(3));
    }
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
    }
    let mut tally = std::mem::take(&mut *tally.lock().unwrap_or_else(|e| e.into_inner()));
    let brief = |v: &[String]| format!("{} of them, first {:?}", v.len(), v.iter().take(3).collect::<Vec<_>>());
    assert!(tally.ok > 200, "{} ok", tally.ok);
    assert!(tally.other.is_empty(), "{}", brief(&tally.other));
    for e in &mut tally.server_errors {
        e.truncate(120);
    }
    // nginx retries idempotent reads on the other replica; only an upload in flight on the
    // crashed replica (one per uploader at most) may fail, and never during the graceful restart.
    let logged = cluster.warnings();
    eprintln!(
        "{} reads ok, {} uploads acknowledged, server errors: {:?}{logged}",
        tally.ok,
        tally.acknowledged.len(),
        tally.server_errors
    );
    assert!(tally.server_errors.iter().all(|e| e.starts_with("POST")), "{}{logged}", brief(&tally.server_errors));
    assert!(tally.server_errors.len() <= 2, "{}{logged}", brief(&tally.server_errors));
    // Every acknowledged upload is published.
    let want: std::collections::BTreeSet<String> =
        tally.acknowledged.iter().cloned().chain(["seed".to_string()]).collect();
    assert!(want.len() > 5, "{want:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body) = status_of(ureq::get(&format!("{lb}{packages}")).call())?;
        let listed: std::collections::BTreeSet<String> =
            body.lines().filter_map(|l| l.strip_prefix("Package: ")).map(str::to_string).collect();
        if s == 200 && want.is_subset(&listed) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "not published: {:?}", want.difference(&listed).collect::<Vec<_>>());
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
