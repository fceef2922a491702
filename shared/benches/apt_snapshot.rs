//! The APT snapshot build at scale: a hosted repository of N packages (10 % `Architecture: all`),
//! the full build (Packages, Packages.gz, Packages.xz, by-hash, Release, InRelease, Release.gpg)
//! timed once per size, with the process's peak RSS during the build (the high-water mark is
//! reset after seeding, so it covers the build alone); then ten times one package more, each
//! built incrementally and published (claim, build, publish: what follows an upload's commit).
//!
//! Then a repository of three distributions, each with its own 10,000 binary packages and 1,000
//! source packages (three files each): the three distributions' builds timed one after the
//! other, and all three at once (as workers build due units).
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
use packyard_formats::apt::rows::{AptPackage, Member};
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
    seed_distribution(t, repo, n, "stable").await;
}

/// `n` binary packages of their own in distribution `dist`.
async fn seed_distribution(t: &TestDb, repo: i64, n: usize, dist: &str) {
    let db = &t.db;
    let mut i = 0;
    while i < n {
        let mut tx = db.pool().begin().await.expect("tx");
        for _ in 0..1000.min(n - i) {
            let name = format!("bench-{dist}-{i:06}");
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
            let id = packyard_formats::apt::rows::insert(db, &mut tx, &p, "bench").await.expect("insert");
            let p = AptPackage { id, ..p };
            packyard_formats::apt::rows::join(db, &mut tx, Member::Package(p.id), repo, dist).await.expect("member");
            i += 1;
        }
        tx.commit().await.expect("commit");
    }
}

/// `n` source packages of their own (a `.dsc`, an `.orig` and a `.debian` tarball each) in
/// distribution `dist`.
async fn seed_sources(t: &TestDb, repo: i64, n: usize, dist: &str) {
    use packyard_formats::apt::rows::{AptSource, AptSourceFile};
    let db = &t.db;
    let mut i = 0;
    while i < n {
        let mut tx = db.pool().begin().await.expect("tx");
        for _ in 0..500.min(n - i) {
            let name = format!("bench-src-{dist}-{i:05}");
            let directory = format!("pool/main/b/{name}");
            let names =
                [format!("{name}_1.0-1.dsc"), format!("{name}_1.0.orig.tar.xz"), format!("{name}_1.0-1.debian.tar.xz")];
            let files: Vec<AptSourceFile> = names
                .iter()
                .enumerate()
                .map(|(k, f)| AptSourceFile {
                    source_id: 0,
                    repository_id: repo,
                    position: k as i64,
                    pool_path: format!("{directory}/{f}"),
                    size: 1_000 + k as i64,
                    md5: format!("{:032x}", i * 3 + k),
                    sha1: format!("{:040x}", i * 3 + k),
                    sha256: format!("{:064x}", i * 3 + k),
                })
                .collect();
            let listed: String = files.iter().map(|f| format!("\n {} {} {}", f.sha256, f.size, f.name())).collect();
            let source = AptSource {
                id: 0,
                repository_id: repo,
                component: "main".into(),
                control: format!(
                    "Format: 3.0 (quilt)\nSource: {name}\nBinary: {name}\nArchitecture: any\nVersion: 1.0-1\nMaintainer: Bench <bench@example.org>\nBuild-Depends: debhelper-compat (= 13)\nChecksums-Sha256:{listed}\nFiles:{listed}"
                ),
                dsc_path: format!("{directory}/{}", names[0]),
                directory,
                name,
                version: "1.0-1".into(),
            };
            let id = packyard_formats::apt::rows::insert_source(db, &mut tx, &source, &files[1..], "bench")
                .await
                .expect("source");
            packyard_formats::apt::rows::join(db, &mut tx, Member::Source(id), repo, dist).await.expect("member");
            i += 1;
        }
        tx.commit().await.expect("commit");
    }
}

/// Three distributions of 10,000 binary and 1,000 source packages each: each built alone, one
/// after the other, then all three at once.
async fn three_distributions(backend: Backend) {
    let Some(t) = TestDb::fresh(backend).await.expect("database") else { return };
    let dists = ["bookworm", "trixie", "sid"];
    let spec: RepositorySpec = serde_json::from_value(serde_json::json!({"name": "bench", "format": "apt",
        "type": "hosted", "apt": {"distributions": dists, "architectures": ["amd64", "all"]}}))
    .expect("spec");
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
    let seeded = Instant::now();
    for d in dists {
        seed_distribution(&t, repo.id, 10_000, d).await;
        seed_sources(&t, repo.id, 1_000, d).await;
    }
    let seed_secs = seeded.elapsed().as_secs_f64();
    let mut units = Vec::new();
    for d in dists {
        let mut tx = t.db.pool().begin().await.expect("tx");
        t.db.record_change(&mut tx, repo.id, "apt", d).await.expect("change");
        tx.commit().await.expect("commit");
        units.push(t.db.unit_by_key(repo.id, "apt", d).await.expect("unit").expect("unit exists"));
    }
    let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
    let keystore = Arc::new(KeyStore::new("0123456789abcdef0123456789abcdef"));
    let reader = packyard_core::groups::Reader { blobs: blobs.clone(), proxy: None };
    let builder = AptBuilder { page_size: 1_000, keystore, reader, memory: Default::default(), services: None };
    packyard_formats::apt::keys::signer(&t.db, &builder.keystore, repo.id, "bench <b@x>").await.expect("key");
    // One after the other (the first build also fills in the binaries' MD5s: seeded above).
    let started = Instant::now();
    let mut sources_size = 0;
    for unit in &units {
        let mut ctx = BuildContext::new(&t.db, blobs.as_ref());
        builder.build(&mut ctx, &repo, unit).await.expect("build");
        let files = ctx.finish().await.expect("finish");
        sources_size = files.iter().find(|f| f.path.ends_with("source/Sources")).map_or(0, |f| f.size);
    }
    let sequential = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let builds = units.iter().map(|unit| {
        let (db, blobs, builder, repo) = (&t.db, blobs.as_ref(), &builder, &repo);
        async move {
            let mut ctx = BuildContext::new(db, blobs);
            builder.build(&mut ctx, repo, unit).await.expect("build");
        }
    });
    futures_util::future::join_all(builds).await;
    let parallel = started.elapsed().as_secs_f64();
    println!(
        "| {} | 3 × (10000 + 1000 sources) | {seed_secs:.1} | **{sequential:.2}** | **{parallel:.2}** | {:.1} |",
        backend.as_str(),
        sources_size as f64 / 1_048_576.0
    );
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
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
    let seeded = Instant::now();
    seed(&t, repo.id, n).await;
    let seed_secs = seeded.elapsed().as_secs_f64();
    let mut tx = t.db.pool().begin().await.expect("tx");
    t.db.record_change(&mut tx, repo.id, "apt", "stable").await.expect("change");
    tx.commit().await.expect("commit");
    let due = packyard_store::db::publication::Due { debounce_ms: 0, max_delay_ms: 0 };
    let claim = t.db.claim_due("bench", due, 600_000).await.expect("claim").expect("due");
    let unit = claim.unit.clone();
    let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
    let keystore = Arc::new(KeyStore::new("0123456789abcdef0123456789abcdef"));
    let reader = packyard_core::groups::Reader { blobs: blobs.clone(), proxy: None };
    let builder = AptBuilder { page_size: 1_000, keystore, reader, memory: Default::default(), services: None };
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
    let files = ctx.finish().await.expect("finish");
    let packages = files.iter().find(|f| f.path.ends_with("binary-amd64/Packages")).map_or(0, |f| f.size);
    let xz = files.iter().find(|f| f.path.ends_with("binary-amd64/Packages.xz")).map_or(0, |f| f.size);
    t.db.publish_snapshot(&claim, &files, &[], 0).await.expect("publish").expect("not fenced");
    // Then one package more, ten times: the incremental build and its publication.
    let mut incremental = Vec::new();
    for k in 0..10 {
        let mut tx = t.db.pool().begin().await.expect("tx");
        let name = format!("bench-more-{k}");
        let p = AptPackage {
            id: 0,
            repository_id: repo.id,
            component: "main".into(),
            pool_path: format!("pool/main/b/{name}/{name}_1.0_amd64.deb"),
            control: control(&name, "1.0", "amd64"),
            name,
            version: "1.0".into(),
            architecture: "amd64".into(),
            size: 10_000,
            md5: format!("{:032x}", n + k),
            sha256: format!("{:064x}", n + k),
        };
        let id = packyard_formats::apt::rows::insert(&t.db, &mut tx, &p, "bench").await.expect("insert");
        packyard_formats::apt::rows::join(&t.db, &mut tx, Member::Package(id), repo.id, "stable")
            .await
            .expect("member");
        t.db.record_change(&mut tx, repo.id, "apt", "stable").await.expect("change");
        tx.commit().await.expect("commit");
        let started = Instant::now();
        let claim = t.db.claim_due("bench", due, 600_000).await.expect("claim").expect("due");
        let mut ctx = BuildContext::new(&t.db, blobs.as_ref());
        builder.build(&mut ctx, &repo, &claim.unit).await.expect("build");
        let files = ctx.finish().await.expect("finish");
        t.db.publish_snapshot(&claim, &files, &[], 0).await.expect("publish").expect("not fenced");
        incremental.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    incremental.sort_by(f64::total_cmp);
    println!(
        "| {} | {n} | {seed_secs:.1} | **{secs:.2}** | {:.0} | **{:.0}** | {:.1} | {:.1} | **{:.0}** / {:.0} |",
        backend.as_str(),
        n as f64 / secs,
        peak as f64 / 1024.0,
        packages as f64 / 1_048_576.0,
        xz as f64 / 1_048_576.0,
        incremental[incremental.len() / 2],
        incremental[incremental.len() - 1],
    );
    let _ = rss_before;
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 100_000] } else { sizes };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!("| backend | packages | seed s | build s | packages/s | peak RSS MiB | Packages MiB | Packages.xz MiB | one more package: build + publish ms, p50 / max of 10 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        for &n in &sizes {
            rt.block_on(run(backend, n));
        }
    }
    println!();
    println!("| backend | distributions × packages | seed s | three builds one after the other s | three builds at once s | Sources MiB (one) |");
    println!("|---|---|---|---|---|---|");
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        rt.block_on(three_distributions(backend));
    }
}
