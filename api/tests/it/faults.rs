//! Faults in real dependencies, injected by a TCP chaos proxy (`common/chaos.rs`) in front of
//! them: what clients see while a dependency is gone, and that nothing acknowledged is lost.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use packyard_store::db::Backend;
use sha2::{Digest, Sha256};

use common::chaos::{host_port, Chaos};
use common::process::{basic, create_repository, metric, start, status_of, Server};

const PACKAGES: &str = "/repository/debs/dists/stable/main/binary-amd64/Packages";

fn deb(i: u64) -> anyhow::Result<Vec<u8>> {
    packyard_loadtest::apt::deb(&format!("fault{i}"), "1.0", "amd64", &packyard_loadtest::apt::filler(i, 4096))
}

fn upload(server: &Server, i: u64, wait: bool) -> anyhow::Result<(u16, String)> {
    let q = if wait { "?wait=true" } else { "" };
    status_of(
        ureq::post(&format!("{}/repository/debs/{q}", server.public))
            .set("Authorization", &basic("pw"))
            .timeout(Duration::from_secs(30))
            .send_bytes(&deb(i)?),
    )
}

/// A fresh database on `backend`'s test server, or `None` (skipped, with a note) without one.
fn fresh_database(backend: Backend) -> anyhow::Result<Option<(String, tempfile::TempDir)>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let db = rt.block_on(packyard_store::testing::create_database(backend))?;
    if db.is_none() {
        eprintln!("skipped: no {} server configured", backend.as_str());
    }
    Ok(db)
}

/// The hosted APT repository `debs`.
fn create_debs(server: &Server) -> anyhow::Result<()> {
    create_repository(&server.public, &basic("pw"), Repo::hosted("debs", Format::Apt))
}

/// Waits (up to 30 s) until the server reports ready again; `what` says what it waited for.
fn until_ready(server: &Server, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(ureq::get(&format!("{}/readyz", server.management)).call())?.0 != 200 {
        anyhow::ensure!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Uploads the packages `range`, each acknowledged once published.
fn upload_all(server: &Server, range: std::ops::Range<u64>) -> anyhow::Result<()> {
    for i in range {
        let (s, body) = upload(server, i, true)?;
        anyhow::ensure!(s == 201, "upload {i}: {s} {body}");
    }
    Ok(())
}

/// The package names a Packages file lists.
fn listed(body: &str) -> BTreeSet<String> {
    body.lines().filter_map(|l| l.strip_prefix("Package: ")).map(str::to_string).collect()
}

fn names(range: std::ops::Range<u64>) -> BTreeSet<String> {
    range.map(|i| format!("fault{i}")).collect()
}

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, String)> {
    status_of(ureq::get(&format!("{}{path}", server.public)).timeout(Duration::from_secs(30)).call())
}

/// The published Packages once it lists exactly `want`.
fn until_listed(server: &Server, want: &BTreeSet<String>, limit: Duration) -> anyhow::Result<String> {
    let deadline = Instant::now() + limit;
    loop {
        let (s, body) = get(server, PACKAGES)?;
        if s == 200 && listed(&body) == *want {
            return Ok(body);
        }
        anyhow::ensure!(Instant::now() < deadline, "published {:?}, want {want:?} ({s})", listed(&body));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The snapshot is complete and signed: InRelease names this Packages by its SHA-256.
fn assert_signed(server: &Server, packages: &str) -> anyhow::Result<()> {
    let (s, in_release) = get(server, "/repository/debs/dists/stable/InRelease")?;
    assert_eq!(s, 200);
    assert!(
        in_release.starts_with("-----BEGIN PGP SIGNED MESSAGE-----")
            && in_release.contains("-----BEGIN PGP SIGNATURE-----")
    );
    let line = format!("{} {:>16} main/binary-amd64/Packages", hex::encode(Sha256::digest(packages)), packages.len());
    assert!(in_release.lines().any(|l| l.trim_start() == line.trim_start()), "InRelease lacks {line:?}:\n{in_release}");
    Ok(())
}

fn database_cut(backend: Backend) -> anyhow::Result<()> {
    let Some((url, _dbdir)) = fresh_database(backend)? else { return Ok(()) };
    let chaos = Chaos::start(&host_port(&url))?;
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_DATABASE__URL", &chaos.rewrite(&url)),
            ("PACKYARD_DATABASE__ACQUIRE_TIMEOUT_MS", "1000"),
            ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ],
    )?;
    server.wait_ready()?;
    create_debs(&server)?;
    upload_all(&server, 0..4)?;
    let before = until_listed(&server, &names(0..4), Duration::from_secs(10))?;

    // The database goes away.
    chaos.cut();
    for i in 4..8 {
        let (s, body) = upload(&server, i, false)?;
        assert_eq!(s, 503, "upload {i} while the database is down: {body}");
        assert!(body.contains("temporarily unavailable; retry shortly"), "{body}");
    }
    // Published metadata is still served, from the replica's cache, unchanged.
    for _ in 0..10 {
        assert_eq!(get(&server, PACKAGES)?, (200, before.clone()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (s, _) = status_of(ureq::get(&format!("{}/readyz", server.management)).call())?;
    assert_eq!(s, 503, "not ready without a database");

    // It comes back: nothing refused became visible, and uploads work again.
    chaos.restore();
    until_ready(&server, "not ready again after the database returned")?;
    assert_eq!(listed(&get(&server, PACKAGES)?.1), names(0..4), "a refused upload became visible");
    upload_all(&server, 4..8)?;
    let all = until_listed(&server, &names(0..8), Duration::from_secs(10))?;
    assert_signed(&server, &all)?;

    // Cut during publication: acknowledged uploads, then the database goes away before the
    // worker has published them; once it is back they are published, signed and complete.
    for i in 8..12 {
        let (s, body) = upload(&server, i, false)?;
        assert_eq!(s, 201, "{body}");
    }
    chaos.cut();
    std::thread::sleep(Duration::from_secs(2));
    chaos.restore();
    let all = until_listed(&server, &names(0..12), Duration::from_secs(30))?;
    assert_signed(&server, &all)?;
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn database_cut_postgres() -> anyhow::Result<()> {
    database_cut(Backend::Postgres)
}

#[test]
fn database_cut_mysql() -> anyhow::Result<()> {
    database_cut(Backend::MySql)
}

#[test]
fn redis_and_rabbitmq_down_during_uploads_lose_nothing() -> anyhow::Result<()> {
    let (Ok(redis_url), Ok(amqp_url)) = (std::env::var("TEST_REDIS_URL"), std::env::var("TEST_AMQP_URL")) else {
        eprintln!("skipped: TEST_REDIS_URL and TEST_AMQP_URL are not set (scripts/test.sh sets them)");
        return Ok(());
    };
    let Some((url, _dbdir)) = fresh_database(Backend::Postgres)? else { return Ok(()) };
    let (redis, amqp) = (Chaos::start(&host_port(&redis_url))?, Chaos::start(&host_port(&amqp_url))?);
    let dir = tempfile::tempdir()?;
    let (redis_via, amqp_via) = (redis.rewrite(&redis_url), amqp.rewrite(&amqp_url));
    let env = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_CACHE__REDIS_URL", redis_via.as_str()),
        ("PACKYARD_EVENTS__AMQP_URL", amqp_via.as_str()),
        ("PACKYARD_WORKER__EMBEDDED", "false"),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ("PACKYARD_BLOBS__PATH", "shared-blobs"),
    ];
    let replicas = [start(dir.path(), &env)?, start(dir.path(), &env)?];
    let worker = common::process::start_worker(dir.path(), &env)?;
    for p in replicas.iter().chain([&worker]) {
        p.wait_ready()?;
    }
    create_debs(&replicas[0])?;

    // Three stretches of uploads, spread over both replicas: Redis down, RabbitMQ down, both
    // down. Every upload is acknowledged, and both replicas publish all of them while the
    // dependencies are still down (the worker polls, the replicas read watermarks from the
    // database).
    for (stretch, cut) in [(0..10u64, [true, false]), (10..20, [false, true]), (20..30, [true, true])] {
        if cut[0] {
            redis.cut();
        }
        if cut[1] {
            amqp.cut();
        }
        for i in stretch.clone() {
            let (s, body) = upload(&replicas[(i % 2) as usize], i, false)?;
            assert_eq!(s, 201, "upload {i} (redis down: {}, rabbitmq down: {}): {body}", cut[0], cut[1]);
        }
        for r in &replicas {
            until_listed(r, &names(0..stretch.end), Duration::from_secs(20))?;
        }
        redis.restore();
        amqp.restore();
    }
    // The degradation shows in the metrics of the replicas and of the worker.
    let metrics = |p: &Server| status_of(ureq::get(&format!("{}/metrics", p.management)).call()).map(|(_, m)| m);
    let (api_metrics, worker_metrics) = (metrics(&replicas[0])?, metrics(&worker)?);
    assert!(metric(&api_metrics, r#"packyard_dependency_errors_total{dependency="redis"}"#) > 0.0, "{api_metrics}");
    assert!(metric(&api_metrics, r#"packyard_dependency_errors_total{dependency="rabbitmq"}"#) > 0.0, "{api_metrics}");
    assert!(
        metric(&worker_metrics, r#"packyard_dependency_errors_total{dependency="rabbitmq"}"#) > 0.0,
        "{worker_metrics}"
    );
    // And everything resumes: a last upload, published everywhere with both back.
    let (s, body) = upload(&replicas[0], 30, true)?;
    assert_eq!(s, 201, "{body}");
    for r in &replicas {
        let all = until_listed(r, &names(0..31), Duration::from_secs(10))?;
        assert_signed(r, &all)?;
    }
    Ok(())
}

/// A replica's wake-up that missed RabbitMQ is relayed from the outbox (#44). The replica's
/// broker is cut while it takes an upload; the worker, which polls only every ten minutes, is
/// woken by the next relay pass of a process that reaches the broker (here: the worker's own),
/// and publishes within seconds. Before the relay the wake-up was lost and the upload waited for
/// the poll.
fn a_wake_up_that_missed_the_broker_is_relayed(backend: Backend) -> anyhow::Result<()> {
    let Ok(amqp_url) = std::env::var("TEST_AMQP_URL") else {
        eprintln!("skipped: TEST_AMQP_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let Some((url, _dbdir)) = fresh_database(backend)? else { return Ok(()) };
    // A vhost of its own: no other test's wake-up reaches this worker.
    let vhost = common::broker::Vhost::create(&amqp_url, &format!("packyard-relay-{}", backend.as_str()))?;
    let amqp_url = vhost.url.clone();
    let amqp = Chaos::start(&host_port(&amqp_url))?;
    let dir = tempfile::tempdir()?;
    let amqp_via = amqp.rewrite(&amqp_url);
    let settings = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_WORKER__EMBEDDED", "false"),
        ("PACKYARD_WORKER__POLL_MS", "600000"),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ("PACKYARD_BLOBS__PATH", "shared-blobs"),
    ];
    fn with<'a>(common: &[(&'a str, &'a str)], amqp: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut env = common.to_vec();
        env.push(("PACKYARD_EVENTS__AMQP_URL", amqp));
        env
    }
    let replica = start(dir.path(), &with(&settings, &amqp_via))?;
    let worker = common::process::start_worker(dir.path(), &with(&settings, &amqp_url))?;
    for p in [&replica, &worker] {
        p.wait_ready()?;
    }
    create_debs(&replica)?;
    let relayed = |p: &Server| -> anyhow::Result<f64> {
        let (_, m) = status_of(ureq::get(&format!("{}/metrics", p.management)).call())?;
        Ok(metric(&m, "packyard_wakeups_relayed_total"))
    };
    // With the broker: the replica's own relay wakes the worker at once.
    let (s, body) = upload(&replica, 0, false)?;
    assert_eq!(s, 201, "{body}");
    until_listed(&replica, &names(0..1), Duration::from_secs(5))?;
    assert!(relayed(&replica)? >= 1.0, "the replica relayed its change");
    // Without it: the change is committed, its wake-up cannot go out, and still the worker
    // wakes within seconds (the sweep leaves the last second's events to their writers).
    amqp.cut();
    let (s, body) = upload(&replica, 1, false)?;
    assert_eq!(s, 201, "{body}");
    let cut_at = Instant::now();
    until_listed(&replica, &names(0..2), Duration::from_secs(10))?;
    eprintln!("published {:?} after the upload whose wake-up missed the broker", cut_at.elapsed());
    assert!(relayed(&worker)? >= 1.0, "the worker relayed the replica's change");
    amqp.restore();
    // And with the broker back, the replica relays its own again.
    let before = relayed(&replica)?;
    let (s, body) = upload(&replica, 2, false)?;
    assert_eq!(s, 201, "{body}");
    let all = until_listed(&replica, &names(0..3), Duration::from_secs(10))?;
    assert_signed(&replica, &all)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while relayed(&replica)? <= before {
        anyhow::ensure!(Instant::now() < deadline, "the replica relayed nothing after the broker came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

#[test]
fn a_wake_up_that_missed_the_broker_is_relayed_postgres() -> anyhow::Result<()> {
    a_wake_up_that_missed_the_broker_is_relayed(Backend::Postgres)
}

#[test]
fn a_wake_up_that_missed_the_broker_is_relayed_mysql() -> anyhow::Result<()> {
    a_wake_up_that_missed_the_broker_is_relayed(Backend::MySql)
}

/// A tmpfs of `size` mounted at `path` for the test's lifetime (needs root; `None` otherwise).
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(path: &std::path::Path, size: &str) -> anyhow::Result<Option<Self>> {
        std::fs::create_dir_all(path)?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        Ok(ok.then(|| Self(path.to_path_buf())))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_blob_store_refuses_uploads_and_keeps_nothing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some(_disk) = SmallDisk::mount(&dir.path().join("data/blobs"), "1m")? else {
        anyhow::ensure!(std::env::var_os("CI").is_none(), "CI must be able to mount a tmpfs (it runs as root)");
        eprintln!("skipped: cannot mount a tmpfs here (not root)");
        return Ok(());
    };
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw")])?;
    server.wait_ready()?;
    create_debs(&server)?;
    let small = deb(1)?;
    let (s, body) = upload(&server, 1, true)?;
    assert_eq!(s, 201, "{body}");
    // A package larger than the whole disk.
    let big = packyard_loadtest::apt::deb("fault-big", "1.0", "amd64", &packyard_loadtest::apt::filler(99, 3 << 20))?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/repository/debs/", server.public)).set("Authorization", &basic("pw")).send_bytes(&big),
    )?;
    assert_eq!(s, 507, "{body}");
    assert!(body.contains("the blob store is full; nothing was stored"), "{body}");
    // Nothing of it stayed: no temporary, the disk has room again, and no row names it.
    assert_eq!(std::fs::read_dir(dir.path().join("data/blobs/tmp"))?.count(), 0);
    let (s, body) = upload(&server, 2, true)?;
    assert_eq!(s, 201, "after the refusal there is room again: {body}");
    let packages = until_listed(&server, &names(1..3), Duration::from_secs(10))?;
    assert!(!packages.contains("fault-big"));
    assert_signed(&server, &packages)?;
    // Every listed package is there to download (no row without its blob).
    for line in packages.lines().filter_map(|l| l.strip_prefix("Filename: ")) {
        let resp = ureq::get(&format!("{}/repository/debs/{line}", server.public)).call()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut resp.into_reader(), &mut bytes)?;
        assert!(bytes == small || bytes == deb(2)?, "{line}");
    }
    let (_, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert!(metric(&metrics, r#"packyard_blob_errors_total{op="write"}"#) >= 1.0, "{metrics}");
    Ok(())
}

#[test]
fn s3_outage_refuses_uploads_and_keeps_serving() -> anyhow::Result<()> {
    let Ok(s3_url) = std::env::var("TEST_S3_URL") else {
        eprintln!("skipped: TEST_S3_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let bucket = format!("packyard-fault-{}", hex::encode(rand::random::<[u8; 4]>()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(packyard_store::blobs::s3::create_test_bucket(&s3_url, &bucket))?;
    let s3 = Chaos::start(&host_port(&s3_url))?;
    let dir = tempfile::tempdir()?;
    let endpoint = s3.rewrite(&s3_url);
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
            ("PACKYARD_BLOBS__KIND", "s3"),
            ("PACKYARD_BLOBS__S3__BUCKET", &bucket),
            ("PACKYARD_BLOBS__S3__ENDPOINT", endpoint.trim_end_matches('/')),
            ("PACKYARD_BLOBS__S3__ACCESS_KEY_ID", "testing"),
            ("PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY", "testing"),
        ],
    )?;
    server.wait_ready()?;
    create_debs(&server)?;
    upload_all(&server, 0..3)?;
    let before = until_listed(&server, &names(0..3), Duration::from_secs(10))?;

    s3.cut();
    let (s, body) = upload(&server, 3, false)?;
    assert_eq!(s, 503, "{body}");
    assert!(body.contains("temporarily unavailable") || body.contains("blob store"), "{body}");
    for _ in 0..5 {
        assert_eq!(get(&server, PACKAGES)?, (200, before.clone()), "published metadata from the cache");
    }
    let (s, _) = status_of(ureq::get(&format!("{}/readyz", server.management)).call())?;
    assert_eq!(s, 503, "not ready without the blob store");
    s3.restore();
    until_ready(&server, "not ready again after S3 returned")?;
    assert_eq!(listed(&get(&server, PACKAGES)?.1), names(0..3), "the refused upload became visible");
    let (s, body) = upload(&server, 3, true)?;
    assert_eq!(s, 201, "{body}");
    let all = until_listed(&server, &names(0..4), Duration::from_secs(10))?;
    assert_signed(&server, &all)?;
    for (i, line) in all.lines().filter_map(|l| l.strip_prefix("Filename: ")).enumerate() {
        let resp = ureq::get(&format!("{}/repository/debs/{line}", server.public)).call()?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut resp.into_reader(), &mut bytes)?;
        assert!((0..4).any(|j| deb(j).is_ok_and(|d| d == bytes)), "package {i} ({line}) has other bytes");
    }
    Ok(())
}

/// A worker killed with SIGKILL at `point` of a publication: what was published stays complete
/// and signed, and another worker publishes the acknowledged upload after the lease expires.
fn worker_killed_at(point: &str) -> anyhow::Result<()> {
    use std::os::unix::process::ExitStatusExt;
    let Some((url, _dbdir)) = fresh_database(Backend::Postgres)? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let env = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_WORKER__EMBEDDED", "false"),
        ("PACKYARD_WORKER__LEASE_MS", "1000"),
        ("PACKYARD_WORKER__POLL_MS", "100"),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ("PACKYARD_BLOBS__PATH", "shared-blobs"),
    ];
    let replica = start(dir.path(), &env)?;
    replica.wait_ready()?;
    let first = common::process::start_worker(dir.path(), &env)?;
    first.wait_ready()?;
    create_debs(&replica)?;
    let (s, body) = upload(&replica, 0, true)?;
    assert_eq!(s, 201, "{body}");
    let published = until_listed(&replica, &names(0..1), Duration::from_secs(10))?;
    assert!(first.terminate()?.success());

    // The worker that dies at `point` of the next publication.
    let crash_env: Vec<(&str, &str)> = env
        .iter()
        .copied()
        .chain([("PACKYARD_DEBUG__CRASH_AT", point), ("PACKYARD_DEBUG__FAULT_INJECTION", "true")])
        .collect();
    let mut doomed = common::process::start_worker(dir.path(), &crash_env)?;
    let (s, body) = upload(&replica, 1, false)?;
    assert_eq!(s, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = doomed.child.try_wait()? {
            break status;
        }
        anyhow::ensure!(Instant::now() < deadline, "the worker did not reach {point}");
        // Whatever the replica serves meanwhile is a complete, signed snapshot.
        let (s, packages) = get(&replica, PACKAGES)?;
        assert_eq!(s, 200);
        assert_signed(&replica, &packages)?;
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(9), "{point}: {status:?}");
    let (_, packages) = get(&replica, PACKAGES)?;
    assert_signed(&replica, &packages)?;
    if point == "after_cas" {
        // Committed before the kill: published without any other worker.
        until_listed(&replica, &names(0..2), Duration::from_secs(10))?;
    } else {
        assert_eq!(packages, published, "{point}: nothing new is published without a worker");
    }

    // Another worker takes over once the dead one's lease has expired.
    let heir = common::process::start_worker(dir.path(), &env)?;
    heir.wait_ready()?;
    let all = until_listed(&replica, &names(0..2), Duration::from_secs(20))?;
    assert_signed(&replica, &all)?;
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/debs/status", replica.public))
            .set("Authorization", &basic("pw"))
            .call(),
    )?;
    assert_eq!(s, 200);
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let unit = &v["units"][0];
    assert_eq!(unit["published_revision"], unit["desired_revision"], "{body}");
    Ok(())
}

#[test]
fn worker_killed_after_claiming() -> anyhow::Result<()> {
    worker_killed_at("claimed")
}

#[test]
fn worker_killed_after_writing_files() -> anyhow::Result<()> {
    worker_killed_at("built")
}

#[test]
fn worker_killed_before_the_compare_and_swap() -> anyhow::Result<()> {
    worker_killed_at("before_cas")
}

#[test]
fn worker_killed_after_the_compare_and_swap() -> anyhow::Result<()> {
    worker_killed_at("after_cas")
}

/// The `Filename:` lines of a Packages index.
fn filenames(packages: &str) -> BTreeSet<String> {
    packages.lines().filter_map(|l| l.strip_prefix("Filename: ")).map(str::to_string).collect()
}

fn admin_json(
    server: &Server,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    common::process::admin_json(&server.public, &basic("pw"), method, path, body)
}

/// The worker killed with SIGKILL in the middle of a cleanup run (after its first batch): the
/// repository's rows, catalogue and index stay consistent — what is listed is what is stored —
/// and the next worker finishes the run.
#[test]
fn worker_killed_in_the_middle_of_a_cleanup_run() -> anyhow::Result<()> {
    use std::os::unix::process::ExitStatusExt;
    let Some((url, _dbdir)) = fresh_database(Backend::Postgres)? else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let env = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_WORKER__EMBEDDED", "false"),
        ("PACKYARD_WORKER__LEASE_MS", "1000"),
        ("PACKYARD_WORKER__POLL_MS", "100"),
        ("PACKYARD_WORKER__CLEANUP_POLL_MS", "200"),
        ("PACKYARD_WORKER__CLEANUP_BATCH", "1"),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ("PACKYARD_BLOBS__PATH", "shared-blobs"),
    ];
    let replica = start(dir.path(), &env)?;
    replica.wait_ready()?;
    let first = common::process::start_worker(dir.path(), &env)?;
    first.wait_ready()?;
    create_debs(&replica)?;
    // Five packages of two versions: a batch is whole packages, so five batches of one.
    let packages: Vec<(String, &str)> = (0..5).flat_map(|i| ["1.0", "2.0"].map(|v| (format!("p{i}"), v))).collect();
    for (i, (name, v)) in packages.iter().enumerate() {
        let bytes = packyard_loadtest::apt::deb(name, v, "amd64", &packyard_loadtest::apt::filler(i as u64, 2048))?;
        let (s, body) = status_of(
            ureq::post(&format!("{}/repository/debs/?wait=true", replica.public))
                .set("Authorization", &basic("pw"))
                .send_bytes(&bytes),
        )?;
        assert_eq!(s, 201, "{body}");
    }
    let pool = |name: &str, v: &str| format!("pool/main/p/{name}/{name}_{v}_amd64.deb");
    let all: BTreeSet<String> = packages.iter().map(|(n, v)| pool(n, v)).collect();
    let newest: BTreeSet<String> = (0..5).map(|i| pool(&format!("p{i}"), "2.0")).collect();
    assert_eq!(filenames(&get(&replica, PACKAGES)?.1), all);
    assert!(first.terminate()?.success());

    let policy = serde_json::json!({"name": "keep-one", "format": "apt", "criteria": {"keep_latest": 1}, "repositories": ["debs"]});
    admin_json(&replica, "POST", "/api/v1/cleanup-policies", Some(policy))?;
    admin_json(&replica, "POST", "/api/v1/cleanup-policies/keep-one/run", None)?;
    let crash_env: Vec<(&str, &str)> = env
        .iter()
        .copied()
        .chain([("PACKYARD_DEBUG__CRASH_AT", "cleanup_batch"), ("PACKYARD_DEBUG__FAULT_INJECTION", "true")])
        .collect();
    let mut doomed = common::process::start_worker(dir.path(), &crash_env)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = doomed.child.try_wait()? {
            break status;
        }
        anyhow::ensure!(Instant::now() < deadline, "the worker did not reach cleanup_batch");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), Some(9), "{status:?}");

    // Killed after one batch: one component gone from the rows and the catalogue, in one
    // transaction; the rest stored and listed.
    let search = |server: &Server| -> anyhow::Result<BTreeSet<String>> {
        let v = admin_json(server, "GET", "/service/rest/v1/search?repository=debs", None)?;
        Ok(v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some(pool(c["name"].as_str()?, c["version"].as_str()?)))
            .collect())
    };
    let left = search(&replica)?;
    assert_eq!(left.len(), 9, "one batch of one package: {left:?}");
    assert!(left.is_superset(&newest), "the newest are kept: {left:?}");
    for file in &all {
        let (s, _) = get(&replica, &format!("/repository/debs/{file}"))?;
        assert_eq!(s == 200, left.contains(file), "{file}: {s}");
    }
    // Its lease expires: the run shows as interrupted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let runs = admin_json(&replica, "GET", "/api/v1/cleanup-policies/keep-one/runs", None)?;
        if runs["items"][0]["state"] == "interrupted" {
            assert_eq!(runs["items"][0]["components"], 1, "{runs}");
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "not interrupted: {runs}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The next worker finishes the run and publishes what is left.
    let heir = common::process::start_worker(dir.path(), &env)?;
    heir.wait_ready()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs = loop {
        let runs = admin_json(&replica, "GET", "/api/v1/cleanup-policies/keep-one/runs", None)?;
        if runs["items"][0]["state"] == "idle" {
            break runs;
        }
        anyhow::ensure!(Instant::now() < deadline, "the run was not finished: {runs}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(runs["items"][0]["components"], 4, "the rest: {runs}");
    assert_eq!(runs["items"][0]["error"], serde_json::Value::Null, "{runs}");
    assert_eq!(search(&replica)?, newest);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, packages) = get(&replica, PACKAGES)?;
        if s == 200 && filenames(&packages) == newest {
            assert_signed(&replica, &packages)?;
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "still published: {:?}", filenames(&packages));
        std::thread::sleep(Duration::from_millis(50));
    }
    for file in &all {
        let (s, _) = get(&replica, &format!("/repository/debs/{file}"))?;
        assert_eq!(s == 200, newest.contains(file), "{file}: {s}");
    }
    Ok(())
}
