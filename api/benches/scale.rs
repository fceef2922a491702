//! Publication at scale on PostgreSQL (issue #22, item 7): a hosted repository of each format at
//! the sizes a large team reaches — 1,000,000 APT packages over three architectures and `all`,
//! 100,000 APK packages over two architectures, 100,000 Go versions (10,000 modules × 10),
//! 100,000 Conan revisions (10,000 references × 5 recipe revisions, each with one package
//! revision) — seeded in bulk, then published by a worker with its own database pool on its own
//! thread (as `packyard-worker` is its own process), one unit after the other as one worker does.
//!
//! Reported per format: the seeding, the full publication (every unit built and published), the
//! process's peak RSS during it (VmHWM, reset when it starts; the process also holds the
//! in-process server and its pool), the database's size (the format's tables, the publication
//! tables, the whole database), then ten times one more artifact in one unit, each built and
//! published (p50 and max), and read latency through the whole actix service — the unit's
//! index files, served from the snapshot published before — while the full and the incremental
//! publications run (p50/p95/p99/max).
//!
//! `cargo bench -p packyard-api --bench scale [-- <fraction>]` (needs `TEST_POSTGRES_URL`;
//! `scripts/test.sh` starts PostgreSQL and prints it). A fraction below 1 scales every size down
//! (`-- 0.01` for a quick check); `SCALE_FORMATS=go,conan` measures only those formats.
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::test::{self, TestRequest};
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::{BlobStore, FileStore};
use packyard_store::db::publication::Due;
use packyard_store::db::{Backend, Db};
use packyard_store::testing::TestDb;

mod common;
use common::{percentile, services_on, status_kib, SECRET};

/// The worker: publishes every due unit when asked, and says how long it took and how many
/// units it published.
struct Worker {
    ask: mpsc::Sender<()>,
    done: mpsc::Receiver<(Duration, usize)>,
}

impl Worker {
    fn start(t: &TestDb) -> Self {
        let (ask, asked) = mpsc::channel::<()>();
        let (tell, done) = mpsc::channel();
        let (url, dir, metrics) = (t.url.clone(), t.dir.path().to_path_buf(), t.metrics.clone());
        std::thread::spawn(move || {
            let rt =
                tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
            rt.block_on(async move {
                let mut config = Config::default();
                config.database.url = url;
                config.server.data_dir = dir.join("data");
                config.blobs.path = dir.join("blobs");
                let db = Db::connect(&config.database, metrics.clone()).await.expect("worker pool");
                let blobs = Arc::new(FileStore::open(dir.join("blobs"), metrics.clone()).await.expect("blobs"));
                let services = Services::assemble(config, metrics, db, blobs, SECRET).expect("services");
                // No debounce: the time measured is the work, not the wait for quiet.
                let publisher =
                    packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services))
                        .with_due(Due { debounce_ms: 0, max_delay_ms: 0 });
                while asked.recv().is_ok() {
                    let started = Instant::now();
                    let outcomes = publisher.run_until_idle().await;
                    let failed = outcomes
                        .iter()
                        .filter(|o| !matches!(o, packyard_worker::publisher::Outcome::Published(_)))
                        .count();
                    assert_eq!(failed, 0, "publications failed or were fenced (see the log)");
                    if tell.send((started.elapsed(), outcomes.len())).is_err() {
                        break;
                    }
                }
            });
        });
        Self { ask, done }
    }
}

/// Read latencies in ms, while something runs.
#[derive(Default)]
struct Reads(Vec<f64>);

impl Reads {
    fn row(&mut self) -> String {
        self.0.sort_by(f64::total_cmp);
        let s = &self.0;
        format!(
            "{} | {:.3} | {:.3} | {:.3} | {:.3}",
            s.len(),
            percentile(s, 0.5),
            percentile(s, 0.95),
            percentile(s, 0.99),
            s.last().copied().unwrap_or(0.0)
        )
    }
}

/// One format at scale: what to create, seed in bulk, read, and add one at a time.
struct Case {
    format: &'static str,
    repository: &'static str,
    settings: serde_json::Value,
    /// What is stored, for the table (e.g. "1000000 packages").
    size: String,
    /// Bulk statements seeding the first unit (published before the measurements, so that
    /// reads have a snapshot to read), then the rest; `{repo}` is the repository's id.
    probe: Vec<String>,
    rest: Vec<String>,
    /// The format's tables, for their size.
    tables: &'static [&'static str],
    /// The units every artifact's change records: (kind, SELECT of the unit keys).
    units: Vec<(&'static str, String)>,
    /// Paths read (under `/repository/<name>/`) during publication.
    reads: Vec<String>,
}

fn apt(n: i64) -> Case {
    // Package k: pkg<k> 1.0-1, `all` for one in ten, else amd64, arm64 or i386 in turn; a
    // control text of about 550 bytes.
    let insert = |from: i64, to: i64| {
        format!(
            "INSERT INTO apt_packages (repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512, uploaded_at, uploaded_by) \
             SELECT {{repo}}, 'main', 'pkg' || k, '1.0-1', a, \
             'Package: pkg' || k || E'\\nVersion: 1.0-1\\nArchitecture: ' || a || E'\\nMaintainer: Scale Maintainers <scale@example.org>\\n' || \
             E'Installed-Size: 1234\\nDepends: libc6 (>= 2.34), libscale1 (= 1.0-1)\\nSection: utils\\nPriority: optional\\n' || \
             'Homepage: https://example.org/pkg' || k || E'\\nDescription: scale package ' || k || E'\\n' || \
             repeat(E' A line of the long description that real packages carry, wrapped at 70.\\n', 4), \
             'pool/main/p/pkg' || k || '/pkg' || k || '_1.0-1_' || a || '.deb', 10000 + k, md5(k::text), \
             substr(encode(sha256(k::text::bytea), 'hex'), 1, 40), encode(sha256(k::text::bytea), 'hex'), repeat('0', 128), 0, 'scale' \
             FROM (SELECT k, CASE WHEN k % 10 = 0 THEN 'all' ELSE (ARRAY['amd64', 'arm64', 'i386'])[k % 3 + 1] END AS a \
                   FROM generate_series({from}, {to}) k) s"
        )
    };
    // Each package joins the distribution, noted for the next build as an upload's join is.
    let join = "WITH joined AS (INSERT INTO apt_distribution_packages (package_id, repository_id, distribution) \
                SELECT id, repository_id, 'stable' FROM apt_packages WHERE repository_id = {repo} \
                ON CONFLICT DO NOTHING RETURNING package_id, repository_id, distribution) \
                INSERT INTO apt_index_changes (repository_id, distribution, source, member_id) \
                SELECT repository_id, distribution, 0, package_id FROM joined ORDER BY package_id"
        .to_string();
    Case {
        format: "apt",
        repository: "debs",
        settings: serde_json::json!({"apt": {"architectures": ["amd64", "arm64", "i386", "all"]}}),
        size: format!("{n} packages (amd64, arm64, i386 and 10 % all)"),
        probe: vec![insert(0, 99), join.clone()],
        rest: vec![insert(100, n - 1), join],
        tables: &["apt_packages", "apt_distribution_packages"],
        units: vec![("apt", "SELECT 'stable'".into())],
        reads: vec!["dists/stable/InRelease".into(), "dists/stable/main/binary-amd64/Packages.gz".into()],
    }
}

fn apk(n: i64) -> Case {
    let insert = |from: i64, to: i64| {
        format!(
            "INSERT INTO apk_packages (repository_id, unit_key, name, version, path, record, checksum, size, sha256, uploaded_at, uploaded_by) \
             SELECT {{repo}}, u, 'pkg' || k, '1.0-r0', u || '/pkg' || k || '-1.0-r0.apk', \
             'C:' || c || E'\\nP:pkg' || k || E'\\nV:1.0-r0\\nA:' || split_part(u, '/', 3) || E'\\nS:' || (10000 + k) || \
             E'\\nI:40960\\nT:scale package ' || k || E'\\nU:https://example.org/pkg' || k || E'\\nL:MIT\\no:pkg' || k || \
             E'\\nm:Scale <scale@example.org>\\nt:1700000000\\nD:so:libc.musl-x86_64.so.1\\n', \
             c, 10000 + k, encode(sha256(k::text::bytea), 'hex'), 0, 'scale' \
             FROM (SELECT k, CASE WHEN k % 2 = 0 THEN 'v3.20/main/x86_64' ELSE 'v3.20/main/aarch64' END AS u, \
                   'Q1' || encode(substr(sha256(k::text::bytea), 1, 20), 'base64') || '=' AS c \
                   FROM generate_series({from}, {to}) k) s"
        )
    };
    Case {
        format: "apk",
        repository: "apks",
        settings: serde_json::json!({"apk": {"architectures": ["x86_64", "aarch64"]}}),
        size: format!("{n} packages (x86_64 and aarch64)"),
        probe: vec![insert(0, 99)],
        rest: vec![insert(100, n - 1)],
        tables: &["apk_packages"],
        units: vec![("apk", "SELECT DISTINCT unit_key FROM apk_packages WHERE repository_id = {repo}".into())],
        reads: vec!["v3.20/main/x86_64/APKINDEX.tar.gz".into()],
    }
}

fn go(n: i64) -> Case {
    // Version k: module example.com/m<k / 10>, v1.0.<k % 10>.
    let insert = |from: i64, to: i64| {
        format!(
            "INSERT INTO go_versions (repository_id, module, version, time_ms, mod_sha256, mod_size, zip_sha256, zip_size, uploaded_by) \
             SELECT {{repo}}, 'example.com/m' || (k / 10), 'v1.0.' || (k % 10), 1700000000000 + k * 1000, \
             encode(sha256(('mod' || k)::bytea), 'hex'), 40, encode(sha256(k::text::bytea), 'hex'), 10000 + k, 'scale' \
             FROM generate_series({from}, {to}) k"
        )
    };
    Case {
        format: "go",
        repository: "gomods",
        settings: serde_json::json!({}),
        size: format!("{n} versions ({} modules × 10)", n / 10),
        probe: vec![insert(0, 9)],
        rest: vec![insert(10, n - 1)],
        tables: &["go_versions"],
        units: vec![("go", "SELECT DISTINCT module FROM go_versions WHERE repository_id = {repo}".into())],
        reads: vec!["example.com/m0/@v/list".into(), "example.com/m0/@latest".into()],
    }
}

fn conan(n: i64, blob: &(String, i64)) -> Case {
    // Revision pair k (a recipe revision and its one package revision): reference pkg<k / 5>/1.0,
    // recipe revision r<k % 5>; every file is the one stored conaninfo.txt blob.
    let (sha, size) = blob;
    let pairs = n / 2;
    let insert = |from: i64, to: i64| {
        vec![
            format!(
                "INSERT INTO conan_revisions (repository_id, reference, rrev, pkgid, prev, complete, time_ms) \
                 SELECT {{repo}}, 'pkg' || (k / 5) || '/1.0', md5('r' || k), p.pkgid, p.prev, 1, 1700000000000 + k * 1000 \
                 FROM generate_series({from}, {to}) k, \
                 LATERAL (VALUES ('', ''), (md5('p' || (k / 5)), md5('v' || k))) AS p(pkgid, prev)"
            ),
            format!(
                "INSERT INTO conan_files (revision_id, path, sha256, size, md5, sha1) \
                 SELECT r.id, f, '{sha}', {size}, md5(f), repeat('0', 40) FROM conan_revisions r, \
                 LATERAL unnest(CASE WHEN r.pkgid = '' THEN ARRAY['conanfile.py', 'conanmanifest.txt'] \
                                ELSE ARRAY['conaninfo.txt', 'conanmanifest.txt', 'conan_package.tgz'] END) AS f \
                 WHERE r.repository_id = {{repo}} ON CONFLICT DO NOTHING"
            ),
        ]
    };
    Case {
        format: "conan",
        repository: "conans",
        settings: serde_json::json!({}),
        size: format!(
            "{} revisions ({} references × 5 recipe revisions, one package revision each)",
            pairs * 2,
            pairs / 5
        ),
        probe: insert(0, 4),
        rest: insert(5, pairs - 1),
        tables: &["conan_revisions", "conan_files"],
        units: vec![
            ("conan", "SELECT DISTINCT reference FROM conan_revisions WHERE repository_id = {repo}".into()),
            ("conan-search", "SELECT 'all'".into()),
        ],
        reads: vec!["v2/conans/pkg0/1.0/_/_/latest".into(), "v2/conans/search?q=pkg1*".into()],
    }
}

/// One more artifact in the first unit, written with the format's own rows in one transaction
/// with its change records (what an upload commits).
async fn one_more(db: &Db, format: &str, repo: i64, k: i64, blob: &(String, i64)) {
    let mut tx = db.pool().begin().await.expect("tx");
    match format {
        "apt" => {
            use packyard_formats::apt::rows::{AptPackage, Member};
            let name = format!("more{k}");
            let p = AptPackage {
                id: 0,
                repository_id: repo,
                component: "main".into(),
                pool_path: format!("pool/main/m/{name}/{name}_1.0_amd64.deb"),
                control: format!("Package: {name}\nVersion: 1.0\nArchitecture: amd64\nDescription: one more\n"),
                name,
                version: "1.0".into(),
                architecture: "amd64".into(),
                size: 10_000,
                md5: format!("{:032x}", k),
                sha256: format!("{:064x}", k),
            };
            let id = packyard_formats::apt::rows::insert(db, &mut tx, &p, "scale").await.expect("insert");
            packyard_formats::apt::rows::join(db, &mut tx, Member::Package(id), repo, "stable").await.expect("join");
            db.record_change(&mut tx, repo, "apt", "stable").await.expect("change");
        }
        "apk" => {
            let unit = "v3.20/main/x86_64";
            let p = packyard_formats::apk::rows::ApkPackage {
                id: 0,
                repository_id: repo,
                unit_key: unit.into(),
                name: format!("more{k}"),
                version: "1.0-r0".into(),
                path: format!("{unit}/more{k}-1.0-r0.apk"),
                record: format!("C:Q1{k:027}=\nP:more{k}\nV:1.0-r0\nA:x86_64\nS:10000\nI:40960\nT:one more\n"),
                checksum: format!("Q1{k:027}="),
                size: 10_000,
                sha256: format!("{:064x}", k),
            };
            packyard_formats::apk::rows::insert(db, &mut tx, &p, "scale").await.expect("insert");
            db.record_change(&mut tx, repo, "apk", unit).await.expect("change");
        }
        "go" => {
            let v = packyard_formats::go::rows::GoVersion {
                id: 0,
                repository_id: repo,
                module: "example.com/m0".into(),
                version: format!("v2.0.{k}"),
                time_ms: 1_800_000_000_000 + k,
                mod_sha256: format!("{:064x}", k),
                mod_size: 40,
                zip_sha256: format!("{:064x}", k + 1),
                zip_size: 10_000,
            };
            packyard_formats::go::rows::insert(db, &mut tx, &v, "scale").await.expect("insert");
            db.record_change(&mut tx, repo, "go", "example.com/m0").await.expect("change");
        }
        "conan" => {
            use packyard_formats::conan::rows::{complete_in, ensure_revision_in, put_file_in, ConanFile, RevisionKey};
            let reference = "pkg0/1.0";
            let rrev = format!("{:032x}", k + 1);
            let prev = format!("{:032x}", k + 100);
            let pkgid = format!("{:040x}", 1);
            let file = |path: &str| ConanFile {
                path: path.into(),
                sha256: blob.0.clone(),
                size: blob.1,
                md5: format!("{:032x}", 0),
                sha1: format!("{:040x}", 0),
            };
            let recipe =
                ensure_revision_in(db, &mut tx, RevisionKey { repo, reference, rrev: &rrev, pkgid: "", prev: "" })
                    .await
                    .expect("recipe");
            for f in ["conanfile.py", "conanmanifest.txt"] {
                put_file_in(db, &mut tx, recipe.id, &file(f)).await.expect("file");
            }
            complete_in(db, &mut tx, recipe.id, packyard_store::db::now_ms()).await.expect("complete");
            let package = ensure_revision_in(
                db,
                &mut tx,
                RevisionKey { repo, reference, rrev: &rrev, pkgid: &pkgid, prev: &prev },
            )
            .await
            .expect("package");
            for f in ["conaninfo.txt", "conanmanifest.txt", "conan_package.tgz"] {
                put_file_in(db, &mut tx, package.id, &file(f)).await.expect("file");
            }
            complete_in(db, &mut tx, package.id, packyard_store::db::now_ms()).await.expect("complete");
            db.record_change(&mut tx, repo, "conan", reference).await.expect("change");
            db.record_change(&mut tx, repo, "conan-search", "all").await.expect("change");
        }
        other => panic!("no format {other}"),
    }
    tx.commit().await.expect("commit");
}

/// Runs statements on one connection without the request timeout.
async fn execute(db: &Db, statements: &[String], repo: i64) {
    let mut conn = db.pool().acquire().await.expect("connection");
    sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await.expect("no timeout");
    for s in statements {
        sqlx::query(&s.replace("{repo}", &repo.to_string())).execute(&mut *conn).await.expect("seed");
    }
}

/// Records a change of every unit the query lists, 1,000 to a transaction.
async fn record_units(db: &Db, repo: i64, kind: &str, query: &str) -> usize {
    let keys: Vec<String> =
        sqlx::query_scalar(&query.replace("{repo}", &repo.to_string())).fetch_all(db.pool()).await.expect("units");
    for chunk in keys.chunks(1000) {
        let mut tx = db.pool().begin().await.expect("tx");
        for key in chunk {
            db.record_change(&mut tx, repo, kind, key).await.expect("change");
        }
        tx.commit().await.expect("commit");
    }
    keys.len()
}

async fn mib(db: &Db, query: &str) -> f64 {
    let bytes: i64 = sqlx::query_scalar(query).fetch_one(db.pool()).await.expect("size");
    bytes as f64 / 1_048_576.0
}

fn main() {
    let fraction: f64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1.0);
    let scaled = |n: f64| ((n * fraction).round() as i64).max(100);
    let system = actix_web::rt::System::new();
    let Some(t) = system.block_on(TestDb::fresh(Backend::Postgres)).expect("database") else {
        eprintln!("TEST_POSTGRES_URL is not set: this benchmark measures PostgreSQL");
        return;
    };
    let (services, blob) = system.block_on(async {
        let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
        let info = b"[settings]\narch=x86_64\nbuild_type=Release\nos=Linux\n[options]\nshared=False\n";
        let stored = blobs.put_bytes(info).await.expect("blob");
        t.db.record_blob(&stored.sha256, stored.size).await.expect("blob row");
        let services = services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        (services, (stored.sha256.to_string(), i64::try_from(stored.size).expect("size")))
    });
    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let worker = Worker::start(&t);
    // Reads the paths in turn until the worker answers; returns its answer.
    let publish_reading = |paths: &[String], reads: &mut Reads| -> (Duration, usize) {
        worker.ask.send(()).expect("worker");
        let mut i = 0;
        loop {
            if let Ok(answer) = worker.done.try_recv() {
                return answer;
            }
            let uri = &paths[i % paths.len()];
            i += 1;
            let started = Instant::now();
            let res = system.block_on(test::call_service(&app, TestRequest::get().uri(uri).to_request()));
            let status = res.status();
            let body = system.block_on(test::read_body(res));
            assert!(status.is_success(), "{uri}: {status} {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
            reads.0.push(started.elapsed().as_secs_f64() * 1000.0);
            // About a thousand reads a second: a steady load beside the worker, not a
            // benchmark of its own competing with it for the two cores.
            std::thread::sleep(Duration::from_millis(1));
        }
    };

    let cases =
        [apt(scaled(1_000_000.0)), apk(scaled(100_000.0)), go(scaled(100_000.0)), conan(scaled(100_000.0), &blob)];
    let mut rows = Vec::new();
    let mut latency = Vec::new();
    // `SCALE_FORMATS=go,conan`: only those.
    let only: Option<Vec<String>> =
        std::env::var("SCALE_FORMATS").ok().map(|v| v.split(',').map(|f| f.trim().to_string()).collect());
    for case in cases.into_iter().filter(|c| only.as_ref().is_none_or(|o| o.iter().any(|f| f == c.format))) {
        let spec = serde_json::json!({"name": case.repository, "format": case.format, "type": "hosted"});
        let mut spec = spec.as_object().cloned().expect("object");
        spec.extend(case.settings.as_object().cloned().unwrap_or_default());
        let spec: RepositorySpec = serde_json::from_value(serde_json::Value::Object(spec)).expect("spec");
        let repo = system
            .block_on(RepositoryService::new(&t.db, packyard_formats::registry()).create(spec))
            .expect("repository");
        // The first unit, published: what reads read meanwhile.
        system.block_on(async {
            execute(&t.db, &case.probe, repo.id).await;
            for (kind, query) in &case.units {
                record_units(&t.db, repo.id, kind, query).await;
            }
        });
        let paths: Vec<String> = case.reads.iter().map(|p| format!("/repository/{}/{p}", case.repository)).collect();
        worker.ask.send(()).expect("worker");
        worker.done.recv().expect("worker");
        let mut quiet = Reads::default();
        for i in 0..500 {
            let uri = &paths[i % paths.len()];
            let started = Instant::now();
            let res = system.block_on(test::call_service(&app, TestRequest::get().uri(uri).to_request()));
            assert!(res.status().is_success(), "{uri}: {}", res.status());
            system.block_on(test::read_body(res));
            quiet.0.push(started.elapsed().as_secs_f64() * 1000.0);
        }

        let seeding = Instant::now();
        let units = system.block_on(async {
            execute(&t.db, &case.rest, repo.id).await;
            execute(&t.db, &["ANALYZE".to_string()], repo.id).await;
            let mut units = 0;
            for (kind, query) in &case.units {
                units += record_units(&t.db, repo.id, kind, query).await;
            }
            units
        });
        let seed_secs = seeding.elapsed().as_secs_f64();

        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let rss_before = status_kib("VmRSS:");
        let mut during_full = Reads::default();
        let (full, published) = publish_reading(&paths, &mut during_full);
        let peak = status_kib("VmHWM:");
        let (tables, publication, database) = system.block_on(async {
            let list = case.tables.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
            (
                mib(&t.db, &format!("SELECT COALESCE(SUM(pg_total_relation_size(c)), 0)::BIGINT FROM unnest(ARRAY[{list}]) c"))
                    .await,
                mib(&t.db, "SELECT COALESCE(SUM(pg_total_relation_size(c)), 0)::BIGINT FROM unnest(ARRAY['publication_units', 'snapshots', 'snapshot_files']) c").await,
                mib(&t.db, "SELECT pg_database_size(current_database())").await,
            )
        });

        let mut during_one = Reads::default();
        let mut incremental = Vec::new();
        for k in 0..10 {
            system.block_on(one_more(&t.db, case.format, repo.id, k, &blob));
            let (took, _) = publish_reading(&paths, &mut during_one);
            incremental.push(took.as_secs_f64() * 1000.0);
        }
        incremental.sort_by(f64::total_cmp);
        rows.push(format!(
            "| {} | {} | {seed_secs:.0} | {units} | **{:.1}** | {rss_before_mib:.0} → **{:.0}** | {tables:.0} | {publication:.0} | {database:.0} | **{:.0}** / {:.0} |",
            case.format,
            case.size,
            full.as_secs_f64(),
            peak as f64 / 1024.0,
            percentile(&incremental, 0.5),
            incremental.last().copied().unwrap_or(0.0),
            rss_before_mib = rss_before as f64 / 1024.0,
        ));
        let _ = published;
        latency.push(format!("| {} | quiet | {} |", case.format, quiet.row()));
        latency.push(format!("| {} | during the full publication | {} |", case.format, during_full.row()));
        latency.push(format!("| {} | during the one-more publications | {} |", case.format, during_one.row()));
        eprintln!("{} done", case.format);
    }
    println!("| format | stored | seed s | units | full publication s | process RSS MiB: before → peak | format tables MiB | publication tables MiB | database MiB | one more: build + publish ms, p50 / max of 10 |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!("{r}");
    }
    println!();
    println!("| format | reads (the unit's index files, in-process) | samples | p50 ms | p95 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    for l in latency {
        println!("{l}");
    }
}
