//! `deploy/local-cluster.sh` end to end: PostgreSQL, Redis, RabbitMQ, the S3 test server, two
//! api replicas, one worker and nginx in front. Real `.deb` files go up through the load
//! balancer; the published metadata comes back from each replica directly; with one replica
//! stopped, nginx keeps serving.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use common::process::{status_of, BIN};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A base port with the 21 ports the cluster uses above it free.
fn free_base() -> anyhow::Result<u16> {
    for _ in 0..200 {
        let base = 20_000 + rand::random::<u16>() % 30_000;
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
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("deploy/local-cluster.sh")).arg(verb);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        Ok(cmd.output()?)
    }

    fn var(&self, name: &str) -> anyhow::Result<&str> {
        self.vars.get(name).map(String::as_str).ok_or_else(|| anyhow::anyhow!("cluster.env has no {name}"))
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

fn basic(pw: &str) -> String {
    common::process::basic(pw)
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

#[test]
fn upload_through_nginx_read_from_each_replica_and_survive_a_stopped_replica() -> anyhow::Result<()> {
    let Ok(pg) = std::env::var("TEST_POSTGRES_URL") else {
        eprintln!("skipped: TEST_POSTGRES_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let (hello, jq) = (debs.get("hello").cloned(), debs.get("jq").cloned());
    let (Some(hello), Some(jq)) = (hello, jq) else { anyhow::bail!("TEST_DEBS_DIR lacks hello and jq") };

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
    let up = cluster.script("up")?;
    assert!(
        up.status.success(),
        "local-cluster.sh up failed:\n{}\n{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    let env_file = std::fs::read_to_string(cluster.dir.path().join("cluster.env"))?;
    cluster.vars =
        env_file.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let (lb, api1, api2) = (cluster.var("LB_URL")?, cluster.var("API1_URL")?, cluster.var("API2_URL")?);
    let auth = basic(cluster.var("ADMIN_PASSWORD")?);
    let status = String::from_utf8_lossy(&cluster.script("status")?.stdout).to_string();
    for name in ["api1", "api2", "worker", "s3", "nginx"] {
        assert!(status.contains(&format!("{name}: running")), "{status}");
    }

    // A hosted APT repository, made and filled through the load balancer.
    let (s, body) = status_of(
        ureq::post(&format!("{lb}/api/v1/repositories"))
            .set("Authorization", &auth)
            .send_json(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"})),
    )?;
    assert_eq!(s, 201, "{body}");
    let hello_bytes = std::fs::read(&hello)?;
    let (s, body) = status_of(
        ureq::post(&format!("{lb}/repository/debs/?wait=true"))
            .set("Authorization", &auth)
            .set("Content-Type", "application/vnd.debian.binary-package")
            .send_bytes(&hello_bytes),
    )?;
    assert_eq!(s, 201, "{body}");
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
    let (s, body) = status_of(
        ureq::post(&format!("{lb}/repository/debs/?wait=true"))
            .set("Authorization", &auth)
            .set("Content-Type", "application/vnd.debian.binary-package")
            .send_bytes(&jq_bytes),
    )?;
    assert_eq!(s, 201, "{body}");
    let jq_sha = hex::encode(Sha256::digest(&jq_bytes));
    let body = until(&format!("{api2}{packages}"), Duration::from_secs(10), |b| b.contains(&jq_sha))?;
    assert!(body.contains("Package: jq\n") && body.contains(&hello_sha), "{body}");

    let down = cluster.script("down")?;
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    assert!(status_of(ureq::get(&format!("{lb}{packages}")).timeout(Duration::from_secs(2)).call()).is_err());
    Ok(())
}
