//! A repository snapshot of a large hosted APT repository on PostgreSQL (#42's acceptance):
//! 100,000 packages in `stable`/`main`/`amd64` (seeded in bulk: the format's rows, the
//! catalogue, one blob), published by the real publisher; then three snapshots made through
//! core's service as the admin API makes them. Reported: the time to make each; the extra
//! storage (the rows' tables on disk and the blob store's files, before and after — no package
//! byte is copied); and the real `apt-get update` against a real server on an ephemeral port,
//! the snapshot's URL (first read of each file: from the blob store) beside the repository's
//! own (its indexes from the replica's memory after the first), alternating, three of each.
//!
//! `cargo bench -p packyard-api --bench snapshot [-- <packages>]` (needs `TEST_POSTGRES_URL`;
//! `scripts/test.sh` starts PostgreSQL and prints it)
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use packyard_core::repositories::RepositoryService;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::{BlobStore, FileStore};
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;

/// Bytes on disk of a table with its indexes.
async fn table_bytes(db: &packyard_store::db::Db, table: &str) -> i64 {
    let row = sqlx::query(&format!("SELECT CAST(pg_total_relation_size('{table}') AS BIGINT) AS n"))
        .fetch_one(db.pool())
        .await
        .expect("size");
    sqlx::Row::try_get(&row, "n").expect("n")
}

fn dir_bytes(dir: &std::path::Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            let (f, b) = dir_bytes(&p);
            files += f;
            bytes += b;
        } else {
            files += 1;
            bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    (files, bytes)
}

/// `apt-get update` in a scratch configuration of its own for `url`'s `stable main`; seconds.
fn apt_update(key: &[u8], url: &str) -> f64 {
    let root = tempfile::tempdir().expect("scratch");
    let r = root.path();
    for d in ["state/lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(r.join(d)).expect("dirs");
    }
    std::fs::write(r.join("state/status"), "").expect("status");
    std::fs::write(r.join("key.asc"), key).expect("key");
    let line = format!("deb [signed-by={} arch=amd64] {url} stable main\n", r.join("key.asc").display());
    std::fs::write(r.join("sources.list"), line).expect("sources");
    let o = |k: &str, v: std::path::PathBuf| format!("{k}={}", v.display());
    let started = Instant::now();
    let out = Command::new("apt-get")
        .args(["-o", &o("Dir::Etc::SourceList", r.join("sources.list")), "-o", "Dir::Etc::SourceParts=/dev/null"])
        .args(["-o", &o("Dir::State", r.join("state")), "-o", &o("Dir::State::status", r.join("state/status"))])
        .args(["-o", &o("Dir::Cache", r.join("cache")), "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"])
        .arg("update")
        .output()
        .expect("apt-get");
    let took = started.elapsed().as_secs_f64();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !log.contains("Err:"), "apt-get update {url}: {log}");
    took
}

fn main() {
    let packages: i64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(100_000);
    let system = actix_web::rt::System::new();
    let Some(t) = system.block_on(TestDb::fresh(Backend::Postgres)).expect("database") else {
        eprintln!("TEST_POSTGRES_URL is not set: this benchmark measures PostgreSQL");
        return;
    };
    let blob_dir = t.dir.path().join("blobs");
    let services = system.block_on(async {
        let blobs = Arc::new(FileStore::open(&blob_dir, t.metrics.clone()).await.expect("blobs"));
        let stored = blobs.put_bytes(&[7u8; 2048]).await.expect("blob");
        t.db.record_blob(&stored.sha256, stored.size).await.expect("blob row");
        let services = common::services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        let spec: RepositorySpec = serde_json::from_value(serde_json::json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64"]}
        }))
        .expect("spec");
        RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        services
    });
    let seeding = Instant::now();
    system.block_on(async {
        let seed = [
            format!(
                "INSERT INTO apt_packages (repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512, uploaded_at, uploaded_by) \
                 SELECT (SELECT id FROM repositories WHERE name = 'debs'), 'main', 'pkg' || n, '1.0', 'amd64', \
                 'Package: pkg' || n || E'\\nVersion: 1.0\\nArchitecture: amd64\\nDepends: libc6 (>= 2.36)\\nDescription: bench\\n', \
                 'pool/main/p/pkg' || n || '/pkg' || n || '_1.0_amd64.deb', \
                 2048, md5('x'), repeat('0', 40), (SELECT sha256 FROM blobs LIMIT 1), repeat('0', 128), n, 'bench' \
                 FROM generate_series(0, {packages} - 1) n ORDER BY n"
            ),
            "INSERT INTO apt_distribution_packages (package_id, repository_id, distribution) \
             SELECT id, repository_id, 'stable' FROM apt_packages"
                .to_string(),
            "INSERT INTO components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) \
             SELECT repository_id, 'apt', pool_path, component, name, version, uploaded_at, 'bench' FROM apt_packages ORDER BY id"
                .to_string(),
            "INSERT INTO assets (repository_id, component_id, path, sha256, md5, size, content_type, created_at, uploaded_by) \
             SELECT repository_id, id, component_key, (SELECT sha256 FROM blobs LIMIT 1), md5('x'), 2048, \
             'application/vnd.debian.binary-package', created_at, 'bench' FROM components"
                .to_string(),
            "ANALYZE".to_string(),
        ];
        let mut conn = t.db.pool().acquire().await.expect("connection");
        sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await.expect("no timeout");
        for s in &seed {
            sqlx::query(s).execute(&mut *conn).await.expect("seed");
        }
        let repo = services.db.repository_by_name("debs").await.expect("read").expect("debs");
        packyard_formats::apt::request_publication(&services.db, &repo).await.expect("request");
        let publisher =
            packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services));
        tokio::time::sleep(Duration::from_millis(services.config.worker.debounce_ms + 100)).await;
        publisher.run_until_idle().await;
    });
    eprintln!("seeded and published {packages} packages in {:.1} s", seeding.elapsed().as_secs_f64());

    let (files_before, bytes_before) = dir_bytes(&blob_dir);
    let rows_before = system.block_on(async {
        table_bytes(&t.db, "repository_snapshot_files").await + table_bytes(&t.db, "repository_snapshots").await
    });
    let admin = packyard_core::hosted::Actor::system("admin");
    let mut made = Vec::new();
    for name in ["s1", "s2", "s3"] {
        let started = Instant::now();
        let view = system
            .block_on(packyard_core::admin::snapshots::create(
                &services,
                packyard_formats::registry(),
                admin,
                "debs",
                packyard_core::admin::snapshots::NewSnapshot { name: Some(name.to_string()) },
            ))
            .expect("snapshot");
        made.push((started.elapsed().as_secs_f64(), view.files, view.bytes));
    }
    let rows_after = system.block_on(async {
        sqlx::query("ANALYZE").execute(t.db.pool()).await.expect("analyze");
        table_bytes(&t.db, "repository_snapshot_files").await + table_bytes(&t.db, "repository_snapshots").await
    });
    let (files_after, bytes_after) = dir_bytes(&blob_dir);

    // A real server on an ephemeral port, on its own thread with its own pool (a pool's
    // connections belong to the runtime that opened them).
    let (tx, rx) = std::sync::mpsc::channel();
    let config = (*services.config).clone();
    let metrics = t.metrics.clone();
    std::thread::spawn(move || {
        let sys = actix_web::rt::System::new();
        sys.block_on(async move {
            let db = packyard_store::db::Db::connect(&config.database, metrics.clone()).await.expect("pool");
            let blobs = Arc::new(FileStore::open(&config.blobs.path, metrics.clone()).await.expect("blobs"));
            let served = packyard_core::services::Services::assemble(config, metrics, db, blobs, common::SECRET)
                .expect("services");
            let server = actix_web::HttpServer::new(move || packyard_api::app::public_app(served.clone()))
                .workers(2)
                .disable_signals()
                .bind(("127.0.0.1", 0))
                .expect("bind");
            let port = server.addrs()[0].port();
            tx.send(port).expect("port");
            server.run().await.expect("server");
        });
    });
    let port = rx.recv().expect("port");
    let base = format!("http://127.0.0.1:{port}/repository/debs");
    let key = ureq::get(&format!("{base}/gpg.key")).call().expect("key").into_string().expect("key text");
    let mut snapshot_runs = Vec::new();
    let mut live_runs = Vec::new();
    for (i, name) in ["s1", "s2", "s3"].iter().enumerate() {
        // The first run of each snapshot reads its files from the blob store.
        snapshot_runs.push(apt_update(key.as_bytes(), &format!("{base}/-/snapshots/{name}")));
        live_runs.push(apt_update(key.as_bytes(), &base));
        eprintln!("round {}: snapshot {:.2} s, repository {:.2} s", i + 1, snapshot_runs[i], live_runs[i]);
    }

    println!("snapshot of a hosted APT repository of {packages} packages (PostgreSQL, release build)");
    for (i, (secs, files, bytes)) in made.iter().enumerate() {
        println!("  make snapshot s{}: {:.2} s ({files} files listed, {bytes} bytes of them)", i + 1, secs);
    }
    println!(
        "  extra storage for 3 snapshots: {:.1} MiB of rows ({:.1} MiB each); blob store {} files / {} bytes before, {} / {} after",
        (rows_after - rows_before) as f64 / 1048576.0,
        (rows_after - rows_before) as f64 / 3.0 / 1048576.0,
        files_before,
        bytes_before,
        files_after,
        bytes_after
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (s, l) = (median(&mut snapshot_runs), median(&mut live_runs));
    println!(
        "  apt-get update (real client, real server): snapshot first reads {:?} s (median {s:.2}), repository {:?} s (median {l:.2}); ratio {:.2}",
        snapshot_runs.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>(),
        live_runs.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>(),
        s / l
    );
}
