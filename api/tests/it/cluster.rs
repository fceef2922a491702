//! Two api replicas and two workers as separate processes sharing one database: writes spread
//! over both replicas all reach the snapshot both serve, in far fewer snapshots than writes; a
//! worker killed mid-flight loses nothing. Uses the internal test format over HTTP.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::process::{basic, start, start_worker, status_of, Server};
use packyard_store::db::Backend;

const ADMIN: &str = "cluster-admin";

struct Cluster {
    replicas: Vec<Server>,
    workers: Vec<Server>,
    _dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Cluster {
    fn env(&self) -> Vec<(&str, &str)> {
        self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }
}

/// Redis and RabbitMQ of the test machine (set by scripts/test.sh), as cluster settings.
fn fast_paths() -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Ok(u) = std::env::var("TEST_REDIS_URL") {
        v.push(("PACKYARD_CACHE__REDIS_URL".to_string(), u));
    }
    if let Ok(u) = std::env::var("TEST_AMQP_URL") {
        v.push(("PACKYARD_EVENTS__AMQP_URL".to_string(), u));
    }
    v
}

/// Settings that point Redis and RabbitMQ at a closed port: both "down".
const BOTH_DOWN: [(&str, &str); 2] = [
    ("PACKYARD_CACHE__REDIS_URL", "redis://127.0.0.1:1/"),
    ("PACKYARD_EVENTS__AMQP_URL", "amqp://guest:guest@127.0.0.1:1/%2f"),
];

fn cluster(backend: Backend, workers: usize, extra: &[(&str, &str)]) -> anyhow::Result<Option<Cluster>> {
    let fast = fast_paths();
    let mut all: Vec<(&str, &str)> = fast.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    all.extend_from_slice(extra);
    cluster_with(backend, workers, &all)
}

fn cluster_with(backend: Backend, workers: usize, extra: &[(&str, &str)]) -> anyhow::Result<Option<Cluster>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some((url, dir)) = rt.block_on(packyard_store::testing::create_database(backend))? else {
        eprintln!("skipped: no {} server configured", backend.as_str());
        return Ok(None);
    };
    let mut env: Vec<(String, String)> = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", ADMIN),
        ("PACKYARD_WORKER__EMBEDDED", "false"),
        ("PACKYARD_DEBUG__TEST_FORMAT", "true"),
        ("PACKYARD_BLOBS__PATH", "shared-blobs"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    // Later settings win.
    env.reverse();
    let mut seen = std::collections::HashSet::new();
    env.retain(|(k, _)| seen.insert(k.clone()));
    let mut c = Cluster { replicas: Vec::new(), workers: Vec::new(), _dir: dir, env };
    let dir = c._dir.path().to_path_buf();
    let first = start(&dir, &c.env())?;
    first.wait_ready()?;
    c.replicas.push(first);
    let second = start(&dir, &c.env())?;
    second.wait_ready()?;
    c.replicas.push(second);
    for _ in 0..workers {
        let w = start_worker(&dir, &c.env())?;
        w.wait_ready()?;
        c.workers.push(w);
    }
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", c.replicas[0].public))
            .set("Authorization", &basic(ADMIN))
            .send_json(Repo::hosted("t", Format::Sample)),
    )?;
    anyhow::ensure!(s == 201, "{body}");
    Ok(Some(c))
}

/// Writes `n` entries at `concurrency`, alternating replicas; returns the names.
fn burst(c: &Cluster, unit: &str, prefix: &str, n: usize, concurrency: usize) -> anyhow::Result<Vec<(String, String)>> {
    let next = Arc::new(AtomicUsize::new(0));
    let urls: Vec<String> = c.replicas.iter().map(|r| r.public.clone()).collect();
    let mut handles = Vec::new();
    for _ in 0..concurrency {
        let (next, urls, unit, prefix) = (next.clone(), urls.clone(), unit.to_string(), prefix.to_string());
        handles.push(std::thread::spawn(move || -> anyhow::Result<Vec<(String, String)>> {
            let agent = ureq::AgentBuilder::new().build();
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return Ok(done);
                }
                let (name, body) = (format!("{prefix}-{i:04}"), format!("body of {i}"));
                let url = format!("{}/repository/t/_test/{unit}/{name}", urls[i % urls.len()]);
                let (s, text) = status_of(agent.put(&url).set("Authorization", &basic(ADMIN)).send_string(&body))?;
                anyhow::ensure!(s == 201, "PUT {url}: {s} {text}");
                done.push((name, body));
            }
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().map_err(|_| anyhow::anyhow!("writer thread panicked"))??);
    }
    all.sort();
    Ok(all)
}

fn fetch(replica: &Server, unit: &str, file: &str) -> anyhow::Result<(u16, String)> {
    status_of(ureq::get(&format!("{}/repository/t/_test/{unit}/{file}", replica.public)).call())
}

/// Waits until every replica serves `count.txt` = n; returns the time it took.
fn until_served(c: &Cluster, unit: &str, n: usize, limit: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let want = format!("{n}\n");
    loop {
        let mut all = true;
        for r in &c.replicas {
            let (s, body) = fetch(r, unit, "count.txt")?;
            if s != 200 || body != want {
                all = false;
            }
        }
        if all {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(start.elapsed() < limit, "not served by every replica within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The unit's published revision once it has caught up with the desired one. (A build that
/// claimed an earlier revision may already hold every row: the content is served before the
/// last revision is marked published.)
fn snapshots(c: &Cluster, unit: &str) -> anyhow::Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match snapshots_now(c, unit) {
            Err(e) if Instant::now() < deadline && e.to_string().contains("not fully published") => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn snapshots_now(c: &Cluster, unit: &str) -> anyhow::Result<i64> {
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/t/status", c.replicas[1].public))
            .set("Authorization", &basic(ADMIN))
            .call(),
    )?;
    anyhow::ensure!(s == 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let u = v["units"].as_array().and_then(|a| a.iter().find(|u| u["unit"] == unit)).cloned().unwrap_or_default();
    anyhow::ensure!(u["desired_revision"] == u["published_revision"], "unit not fully published: {u}");
    Ok(u["published_revision"].as_i64().unwrap_or(0))
}

/// Snapshot rows of a unit: how many snapshots the workers built for it.
fn snapshot_count(c: &Cluster, unit: &str) -> anyhow::Result<i64> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let url = c.env.iter().find(|(k, _)| k == "PACKYARD_DATABASE__URL").map(|(_, v)| v.clone()).unwrap_or_default();
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&url).await?;
        let q = if url.starts_with("mysql") {
            "SELECT COUNT(*) FROM snapshots s JOIN publication_units u ON u.id = s.unit_id WHERE u.unit_key = ?"
        } else {
            "SELECT COUNT(*) FROM snapshots s JOIN publication_units u ON u.id = s.unit_id WHERE u.unit_key = $1"
        };
        let row: (i64,) = sqlx::query_as(q).bind(unit).fetch_one(&pool).await?;
        pool.close().await;
        Ok(row.0)
    })
}

fn two_replicas_two_workers(backend: Backend) -> anyhow::Result<()> {
    let Some(c) = cluster(backend, 2, &[])? else { return Ok(()) };
    let entries = burst(&c, "main", "e", 200, 16)?;
    let took = until_served(&c, "main", 200, Duration::from_secs(30))?;
    for r in &c.replicas {
        let (s, index) = fetch(r, "main", "index.txt")?;
        assert_eq!(s, 200);
        assert_eq!(
            index,
            packyard_formats::sample::entries::index(&entries),
            "every acknowledged write is in the snapshot {} serves",
            r.public
        );
    }
    assert_eq!(snapshots(&c, "main")?, 200, "published revision = 200 writes");
    let built = snapshot_count(&c, "main")?;
    eprintln!(
        "{}: 200 writes over 2 replicas → {built} snapshots; served by both {} ms after the last ack",
        backend.as_str(),
        took.as_millis()
    );
    assert!(built < 50, "{built} snapshots for 200 writes: the debounce is not coalescing");
    Ok(())
}

#[test]
fn two_replicas_two_workers_postgres() -> anyhow::Result<()> {
    two_replicas_two_workers(Backend::Postgres)
}

#[test]
fn two_replicas_two_workers_mysql() -> anyhow::Result<()> {
    two_replicas_two_workers(Backend::MySql)
}

/// A worker killed with SIGKILL while it builds: the other takes over after the lease expires;
/// nothing acknowledged is lost, and no replica serves an incomplete snapshot meanwhile.
fn killed_worker(backend: Backend) -> anyhow::Result<()> {
    let slow = [("PACKYARD_WORKER__LEASE_MS", "1500"), ("PACKYARD_DEBUG__BUILD_DELAY_MS", "600")];
    let Some(mut c) = cluster(backend, 2, &slow)? else { return Ok(()) };
    let mut all = burst(&c, "slow", "a", 40, 8)?;
    until_served(&c, "slow", 40, Duration::from_secs(30))?;
    all.extend(burst(&c, "slow", "b", 40, 8)?);
    // Find the worker holding the lease (its owner id starts with its pid) and kill it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let holder = loop {
        let (s, body) = status_of(
            ureq::get(&format!("{}/api/v1/repositories/t/status", c.replicas[0].public))
                .set("Authorization", &basic(ADMIN))
                .call(),
        )?;
        anyhow::ensure!(s == 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let owner = v["units"][0]["leased_by"].as_str().unwrap_or_default().to_string();
        if let Some(i) = c.workers.iter().position(|w| owner.starts_with(&format!("{}-", w.child.id()))) {
            break i;
        }
        anyhow::ensure!(Instant::now() < deadline, "no worker took the lease: {body}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let victim = c.workers.remove(holder);
    let killed_at = Instant::now();
    anyhow::ensure!(std::process::Command::new("kill")
        .args(["-KILL", &victim.child.id().to_string()])
        .status()?
        .success());
    // Until the survivor publishes, replicas keep serving the complete earlier snapshot.
    let old = packyard_formats::sample::entries::index(
        &all.iter().filter(|(n, _)| n.starts_with("a-")).cloned().collect::<Vec<_>>(),
    );
    let mut checks = 0;
    loop {
        let mut done = true;
        for r in &c.replicas {
            let (s, index) = fetch(r, "slow", "index.txt")?;
            assert_eq!(s, 200);
            let mut sorted = all.clone();
            sorted.sort();
            let new = packyard_formats::sample::entries::index(&sorted);
            assert!(index == old || index == new, "a replica served an index that is neither snapshot");
            done &= index == new;
            checks += 1;
        }
        if done {
            break;
        }
        anyhow::ensure!(killed_at.elapsed() < Duration::from_secs(30), "the surviving worker never published");
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = killed_at.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "published after {} ms: before the dead worker's lease expired?",
        took.as_millis()
    );
    all.sort();
    until_served(&c, "slow", 80, Duration::from_secs(5))?;
    eprintln!("{}: lease holder killed mid-build; survivor published all 80 writes {} ms later ({checks} reads, all complete)", backend.as_str(), took.as_millis());
    drop(victim);
    Ok(())
}

#[test]
fn killed_worker_postgres() -> anyhow::Result<()> {
    killed_worker(Backend::Postgres)
}

#[test]
fn killed_worker_mysql() -> anyhow::Result<()> {
    killed_worker(Backend::MySql)
}

/// Redis and RabbitMQ both unreachable: writes still succeed and become visible, by polling.
fn without_redis_and_rabbitmq(backend: Backend) -> anyhow::Result<()> {
    let Some(c) = cluster_with(backend, 1, &BOTH_DOWN)? else { return Ok(()) };
    let entries = burst(&c, "main", "d", 50, 8)?;
    let took = until_served(&c, "main", 50, Duration::from_secs(10))?;
    for r in &c.replicas {
        assert_eq!(fetch(r, "main", "index.txt")?.1, packyard_formats::sample::entries::index(&entries));
    }
    eprintln!(
        "{}: Redis and RabbitMQ down: served by both replicas {} ms after the last ack",
        backend.as_str(),
        took.as_millis()
    );
    Ok(())
}

#[test]
fn without_redis_and_rabbitmq_postgres() -> anyhow::Result<()> {
    without_redis_and_rabbitmq(Backend::Postgres)
}

#[test]
fn without_redis_and_rabbitmq_mysql() -> anyhow::Result<()> {
    without_redis_and_rabbitmq(Backend::MySql)
}

/// The acceptance measurement (run on purpose, alone):
/// `cargo nextest run -p packyard-api --test it --run-ignored only --no-capture cluster::measure`
/// Bursts of 100 writes at concurrency 16 to one replica; the time from the last
/// acknowledgement until the other replica serves the new snapshot; p50 over the rounds, with
/// Redis and RabbitMQ, and by polling alone.
#[test]
#[ignore = "a measurement, not a test: run it alone"]
fn measure_publication_latency() -> anyhow::Result<()> {
    for (label, fast) in [("redis+rabbitmq", true), ("polling only", false)] {
        let extra: Vec<(String, String)> =
            if fast { fast_paths() } else { BOTH_DOWN.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
        let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let Some(c) = cluster_with(Backend::Postgres, 2, &extra)? else { return Ok(()) };
        let mut latencies = Vec::new();
        let mut snapshots_built = Vec::new();
        for round in 0..10 {
            let unit = format!("round-{round}");
            burst_to(&c.replicas[0], &unit, 100, 16)?;
            let took = until_served_by(&c.replicas[1], &unit, 100, Duration::from_secs(30))?;
            latencies.push(took.as_millis());
            anyhow::ensure!(snapshots(&c, &unit)? == 100);
            snapshots_built.push(snapshot_count(&c, &unit)?);
        }
        latencies.sort();
        eprintln!(
            "{label}: last ack → served by the other replica, ms: p50 {} min {} max {} (rounds {:?}); snapshots built per burst {:?}",
            latencies[latencies.len() / 2],
            latencies[0],
            latencies[latencies.len() - 1],
            latencies,
            snapshots_built
        );
    }
    Ok(())
}

fn burst_to(replica: &Server, unit: &str, n: usize, concurrency: usize) -> anyhow::Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..concurrency {
        let (next, url, unit) = (next.clone(), replica.public.clone(), unit.to_string());
        handles.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let agent = ureq::AgentBuilder::new().build();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return Ok(());
                }
                let u = format!("{url}/repository/t/_test/{unit}/e-{i:04}");
                let (s, text) = status_of(agent.put(&u).set("Authorization", &basic(ADMIN)).send_string("x"))?;
                anyhow::ensure!(s == 201, "{s} {text}");
            }
        }));
    }
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
    }
    Ok(())
}

fn until_served_by(replica: &Server, unit: &str, n: usize, limit: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let want = format!("{n}\n");
    let agent = ureq::AgentBuilder::new().build();
    loop {
        let (s, body) =
            status_of(agent.get(&format!("{}/repository/t/_test/{unit}/count.txt", replica.public)).call())?;
        if s == 200 && body == want {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(start.elapsed() < limit, "not served within {limit:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Go's read-your-writes across replicas: when a module PUT to one replica returns, the other
/// replica's `list` and `@latest` already have the version (without Redis: the worst case).
fn go_read_your_writes(backend: Backend) -> anyhow::Result<()> {
    let Some(c) = cluster_with(backend, 1, &BOTH_DOWN)? else { return Ok(()) };
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", c.replicas[0].public))
            .set("Authorization", &basic(ADMIN))
            .send_json(Repo::hosted("gomods", Format::Go)),
    )?;
    anyhow::ensure!(s == 201, "{body}");
    let m = "example.com/ryw";
    for i in 0..4 {
        let (writer, reader) = (&c.replicas[i % 2], &c.replicas[(i + 1) % 2]);
        // The reader has seen the module before the write, so a stale view would show.
        let _ = ureq::get(&format!("{}/repository/gomods/{m}/@v/list", reader.public)).call();
        let v = format!("v1.0.{i}");
        let zip = packyard_codecs::go::testing::simple_module(m, &v, &v, 0)?;
        let (s, body) = status_of(
            ureq::put(&format!("{}/repository/gomods/{m}/@v/{v}.zip", writer.public))
                .set("Authorization", &basic(ADMIN))
                .send_bytes(&zip),
        )?;
        anyhow::ensure!(s == 201, "{body}");
        let list = ureq::get(&format!("{}/repository/gomods/{m}/@v/list", reader.public)).call()?.into_string()?;
        assert!(list.lines().any(|l| l == v), "{v} missing from the other replica's list: {list:?}");
        let latest: serde_json::Value = serde_json::from_str(
            &ureq::get(&format!("{}/repository/gomods/{m}/@latest", reader.public)).call()?.into_string()?,
        )?;
        assert_eq!(latest["Version"], v.as_str());
    }
    Ok(())
}

#[test]
fn go_read_your_writes_postgres() -> anyhow::Result<()> {
    go_read_your_writes(Backend::Postgres)
}

#[test]
fn go_read_your_writes_mysql() -> anyhow::Result<()> {
    go_read_your_writes(Backend::MySql)
}
