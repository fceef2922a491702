//! The APT snapshot build at scale: a hosted repository of N packages (10 % `Architecture: all`),
//! the full build (Packages, Packages.gz, Packages.xz, by-hash, Release, InRelease, Release.gpg)
//! timed once per size, with the process's peak RSS during the build (the high-water mark is
//! reset after seeding, so it covers the build alone).
//!
//! `cargo bench -p packyard-shared --bench apt_snapshot [-- 10000 100000]`
//! (SQLite; set `TEST_POSTGRES_URL` / `TEST_MYSQL_URL` to measure PostgreSQL / MariaDB too).
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::Arc;
use std::time::Instant;

use packyard_core::publication::{BuildContext, Builder};
use packyard_core::repositories::RepositoryService;
use packyard_core::security::keystore::KeyStore;
use packyard_formats::apt::publish::AptBuilder;
use packyard_formats::apt::rows::AptPackage;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::FileStore;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;

/// A control text of the size real ones have (about 700 bytes with a long description).
fn control(name: &str, version: &str, arch: &str) -> String {
    let mut c = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: Bench Maintainers <bench@example.org>\n\
         Installed-Size: 1234\nDepends: libc6 (>= 2.34), libbench1 (= {version})\nSection: utils\nPriority: optional\n\
         Homepage: https://example.org/{name}\nDescription: benchmark package {name}\n"
    );
    for i in 0..6 {
        c.push_str(&format!(" Line {i} of a long description that real packages carry, wrapped at about 70 chars.\n"));
    }
    c
}

async fn seed(t: &TestDb, repo: i64, n: usize) {
    let db = &t.db;
    let mut i = 0;
    while i < n {
        let mut tx = db.pool().begin().await.expect("tx");
        for _ in 0..1000.min(n - i) {
            let name = format!("bench-pkg-{i:06}");
            let arch = if i % 10 == 0 { "all" } else { "amd64" };
            let version = format!("1.{}-1", i % 97);
            let hex64 = format!("{:064x}", i);
            let p = AptPackage {
                id: 0,
                repository_id: repo,
                component: "main".into(),
                pool_path: format!("pool/main/b/{name}/{name}_{version}_{arch}.deb"),
                control: control(&name, &version, arch),
                name,
                version,
                architecture: arch.into(),
                size: 10_000 + i as i64,
                md5: hex64[..32].to_string(),
                sha256: hex64.clone(),
            };
            packyard_formats::apt::rows::insert(db, &mut tx, &p, "bench").await.expect("insert");
            i += 1;
        }
        tx.commit().await.expect("commit");
    }
}

/// (VmHWM, VmRSS) in KiB.
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let get = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(0)
    };
    (get("VmHWM:"), get("VmRSS:"))
}

async fn run(backend: Backend, n: usize) {
    let Some(t) = TestDb::fresh(backend).await.expect("database") else { return };
    let spec: RepositorySpec =
        serde_json::from_value(serde_json::json!({"name": "bench", "format": "apt", "type": "hosted"})).expect("spec");
    let repo = RepositoryService::new(&t.db).create(spec).await.expect("repository");
    let seeded = Instant::now();
    seed(&t, repo.id, n).await;
    let seed_secs = seeded.elapsed().as_secs_f64();
    let mut tx = t.db.pool().begin().await.expect("tx");
    t.db.record_change(&mut tx, repo.id, "apt", "stable").await.expect("change");
    tx.commit().await.expect("commit");
    let unit = t.db.unit_by_key(repo.id, "apt", "stable").await.expect("unit").expect("unit exists");
    let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
    let keystore = Arc::new(KeyStore::new("0123456789abcdef0123456789abcdef"));
    let reader = packyard_core::groups::Reader { blobs: blobs.clone(), proxy: None };
    let builder = AptBuilder { page_size: 1_000, keystore, reader };
    // The signing key is made on first need; make it now so the build measures building.
    packyard_formats::apt::keys::signer(&t.db, &builder.keystore, repo.id, "bench <b@x>").await.expect("key");
    // Reset the peak RSS to the current RSS (Linux: write 5 to clear_refs).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (_, rss_before) = rss();
    let started = Instant::now();
    let mut ctx = BuildContext::new(&t.db, blobs.as_ref());
    builder.build(&mut ctx, &repo, &unit).await.expect("build");
    let secs = started.elapsed().as_secs_f64();
    let (peak, _) = rss();
    let files = ctx.into_files();
    let packages = files.iter().find(|f| f.path.ends_with("binary-amd64/Packages")).map_or(0, |f| f.size);
    let xz = files.iter().find(|f| f.path.ends_with("binary-amd64/Packages.xz")).map_or(0, |f| f.size);
    println!(
        "| {} | {n} | {seed_secs:.1} | **{secs:.2}** | {:.0} | **{:.0}** | {:.1} | {:.1} |",
        backend.as_str(),
        n as f64 / secs,
        peak as f64 / 1024.0,
        packages as f64 / 1_048_576.0,
        xz as f64 / 1_048_576.0,
    );
    let _ = rss_before;
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 100_000] } else { sizes };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!("| backend | packages | seed s | build s | packages/s | peak RSS MiB | Packages MiB | Packages.xz MiB |");
    println!("|---|---|---|---|---|---|---|---|");
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        for &n in &sizes {
            rt.block_on(run(backend, n));
        }
    }
}
