//! A cleanup run over a large repository on PostgreSQL: an APT repository of 1,000,000 packages
//! (100,000 names × 10 versions, seeded in bulk: the format's rows, the catalogue, one blob), a
//! policy keeping the newest 9 versions of each — so the run removes 100,000 — made by a worker
//! with its own database pool on its own thread (as `packyard-worker` is its own process), with
//! the default batch (`worker.cleanup_batch`) and the publisher republishing the distribution
//! meanwhile. Reported: the run's duration, the process's peak RSS during the run (VmHWM, reset
//! when it starts), and read latency through the whole actix service — a package file, a Nexus
//! search by name — before and during the run (p50/p95/p99, ms).
//!
//! `cargo bench -p packyard-api --bench cleanup [-- <components>]` (needs `TEST_POSTGRES_URL`;
//! `scripts/test.sh` starts PostgreSQL and prints it)
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::{BlobStore, FileStore};
use packyard_store::db::{Backend, Db};
use packyard_store::testing::TestDb;
use rand::Rng;

const VERSIONS: i64 = 10;

mod common;
use common::{percentile, services_on, status_kib, SECRET};

fn main() {
    let components: i64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let names = components / VERSIONS;
    let system = actix_web::rt::System::new();
    let Some(t) = system.block_on(TestDb::fresh(Backend::Postgres)).expect("database") else {
        eprintln!("TEST_POSTGRES_URL is not set: this benchmark measures PostgreSQL");
        return;
    };
    let (services, sha256) = system.block_on(async {
        let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
        let stored = blobs.put_bytes(&[7u8; 2048]).await.expect("blob");
        t.db.record_blob(&stored.sha256, stored.size).await.expect("blob row");
        let services = services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        let spec: RepositorySpec =
            serde_json::from_value(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))
                .expect("spec");
        RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        (services, stored.sha256.to_string())
    });
    let seeding = Instant::now();
    system.block_on(async {
        // Package n: pkg<n / 10> version 1.<n % 10>, amd64.
        let seed = [
            format!(
                "INSERT INTO apt_packages (repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512, uploaded_at, uploaded_by) \
                 SELECT r.id, 'main', 'pkg' || (n / {VERSIONS}), '1.' || (n % {VERSIONS}), 'amd64', \
                 'Package: pkg' || (n / {VERSIONS}) || E'\\nVersion: 1.' || (n % {VERSIONS}) || E'\\nArchitecture: amd64\\nDescription: bench\\n', \
                 'pool/main/p/pkg' || (n / {VERSIONS}) || '/pkg' || (n / {VERSIONS}) || '_1.' || (n % {VERSIONS}) || '_amd64.deb', \
                 2048, md5('x'), repeat('0', 40), '{sha256}', repeat('0', 128), 0, 'bench' \
                 FROM generate_series(0, {components} - 1) n, (SELECT id FROM repositories WHERE name = 'debs') r"
            ),
            // Every package in the repositories' one distribution (the default, `stable`).
            "INSERT INTO apt_distribution_packages (package_id, repository_id, distribution) \
             SELECT id, repository_id, 'stable' FROM apt_packages"
                .to_string(),
            "INSERT INTO components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) \
             SELECT repository_id, 'apt', pool_path, component, name, version, 0, 'bench' FROM apt_packages ORDER BY id"
                .to_string(),
            "INSERT INTO assets (repository_id, component_id, path, sha256, md5, size, content_type, created_at, uploaded_by) \
             SELECT repository_id, id, component_key, (SELECT sha256 FROM blobs LIMIT 1), md5('x'), 2048, \
             'application/vnd.debian.binary-package', 0, 'bench' FROM components"
                .to_string(),
            "INSERT INTO component_keywords (keyword, component_id) \
             SELECT DISTINCT w, id FROM components, LATERAL (VALUES (lower(name)), (lower(namespace)), (lower(version))) AS k(w)"
                .to_string(),
            "ANALYZE".to_string(),
        ];
        let mut conn = t.db.pool().acquire().await.expect("connection");
        sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await.expect("no timeout");
        for s in &seed {
            sqlx::query(s).execute(&mut *conn).await.expect("seed");
        }
    });
    eprintln!("seeded {components} packages in {:.1} s", seeding.elapsed().as_secs_f64());

    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let get = |uri: &str| {
        let res = system.block_on(test::call_service(&app, TestRequest::get().uri(uri).to_request()));
        let status = res.status();
        let body = system.block_on(test::read_body(res));
        assert_eq!(status, StatusCode::OK, "{uri}: {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
    };
    let mut rng = rand::thread_rng();
    // Version 1.9 is the newest of each name: the run keeps it.
    let mut read = |which: usize| -> (usize, f64) {
        let k = rng.gen_range(0..names);
        let uri = match which {
            0 => format!("/repository/debs/pool/main/p/pkg{k}/pkg{k}_1.9_amd64.deb"),
            _ => format!("/service/rest/v1/search?repository=debs&name=pkg{k}"),
        };
        let started = Instant::now();
        get(&uri);
        (which, started.elapsed().as_secs_f64() * 1000.0)
    };
    let table = |label: &str, samples: &mut [Vec<f64>; 2]| {
        for (i, what) in ["package file", "search by name"].iter().enumerate() {
            let s = &mut samples[i];
            s.sort_by(f64::total_cmp);
            println!(
                "| {label} | {what} | {} | {:.2} | {:.2} | {:.2} |",
                s.len(),
                percentile(s, 0.5),
                percentile(s, 0.95),
                percentile(s, 0.99)
            );
        }
    };
    let mut before: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for i in 0..600 {
        let (w, ms) = read(i % 2);
        if i >= 100 {
            before[w].push(ms);
        }
    }

    // The worker: its own pool and runtime, as the packyard-worker process has.
    let done = Arc::new(AtomicBool::new(false));
    let (url, blobs_dir, metrics) = (t.url.clone(), t.dir.path().join("blobs"), t.metrics.clone());
    let worker_done = done.clone();
    let rss_before = status_kib("VmRSS:");
    // Reset the peak (VmHWM) so that it covers the run alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let worker = {
        let t_url = url.clone();
        let dir = t.dir.path().to_path_buf();
        std::thread::spawn(move || -> (Duration, packyard_core::cleanup::RunReport, usize) {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            let out = rt.block_on(async move {
                let mut config = Config::default();
                config.database.url = t_url;
                let db = Db::connect(&config.database, metrics.clone()).await.expect("worker pool");
                let blobs = Arc::new(FileStore::open(blobs_dir, metrics.clone()).await.expect("blobs"));
                config.server.data_dir = dir.join("data");
                config.blobs.path = dir.join("blobs");
                let services = Services::assemble(config, metrics, db, blobs, SECRET).expect("services");
                let repo = services.db.repository_by_name("debs").await.expect("repo").expect("debs");
                let criteria = packyard_model::cleanup::Criteria { keep_latest: Some(9), ..Default::default() };
                let started = packyard_store::db::now_ms();
                let compiled = packyard_core::cleanup::Compiled::new(&criteria, started).expect("criteria");
                let format = packyard_formats::registry().get(repo.format);
                // `CLEANUP_BENCH_PUBLISHER=off`: the run alone (a figure beside the default one).
                let with_publisher = std::env::var("CLEANUP_BENCH_PUBLISHER").map_or(true, |v| v != "off");
                let publishing = Arc::new(AtomicBool::new(with_publisher));
                let publisher = {
                    let services = services.clone();
                    let publishing = publishing.clone();
                    tokio::spawn(async move {
                        let p = packyard_worker::publisher::Publisher::new(
                            services.clone(),
                            packyard_worker::builders(&services),
                        );
                        let mut published = 0;
                        while publishing.load(Ordering::Relaxed) {
                            published += p.run_until_idle().await.len();
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        published
                    })
                };
                let actor = packyard_core::hosted::Actor::system("bench");
                let batch = services.config.worker.cleanup_batch;
                let clock = Instant::now();
                let report = packyard_core::cleanup::run(
                    &services,
                    (format, "bench", &compiled),
                    &repo,
                    (started, batch),
                    actor,
                    None,
                )
                .await
                .expect("run");
                let took = clock.elapsed();
                publishing.store(false, Ordering::Relaxed);
                let published = publisher.await.expect("publisher");
                (took, report, published)
            });
            worker_done.store(true, Ordering::Relaxed);
            out
        })
    };
    let mut during: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut i = 0;
    while !done.load(Ordering::Relaxed) {
        let (w, ms) = read(i % 2);
        during[w].push(ms);
        i += 1;
    }
    let (took, report, published) = worker.join().expect("worker");
    let peak = status_kib("VmHWM:");
    println!(
        "removed {} of {components} components in {:.1} s ({} batches of {} components at least; {} publications meanwhile); \
         process RSS {:.0} MiB before, peak {:.0} MiB during the run",
        report.components,
        took.as_secs_f64(),
        report.batches,
        services.config.worker.cleanup_batch,
        published,
        rss_before as f64 / 1024.0,
        peak as f64 / 1024.0,
    );
    println!("| when | read | samples | p50 ms | p95 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    table("before the run", &mut before);
    table("during the run", &mut during);
    let left: i64 = system.block_on(async {
        sqlx::query_scalar("SELECT COUNT(*) FROM components").fetch_one(t.db.pool()).await.expect("count")
    });
    assert_eq!(left, components - components / VERSIONS, "the run removed one version of each name");
    drop(url);
}
