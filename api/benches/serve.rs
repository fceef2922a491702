//! The small-response path: a warmed GET of published metadata (`InRelease`, `Packages.gz`)
//! through the whole actix service in-process — routing, the anonymous authorization decision,
//! the published-snapshot cache, conditional headers — and a warmed 304.
//!
//! `cargo bench -p packyard-api --bench serve` (without logs; `PACKYARD_BENCH_LOG=info` writes them
//! to stderr as the binary does at its default level, `=warn` as at `log.level = warn`).
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::Arc;

mod common;

use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use criterion::{criterion_group, criterion_main, Criterion};
use packyard_core::hosted::{upload, Actor};
use packyard_core::repositories::RepositoryService;
use packyard_formats::apt::hosted::AptHosted;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::FileStore;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;

fn bench(c: &mut Criterion) {
    // `PACKYARD_BENCH_LOG=info` (or `warn`): the logs as the binary writes them, to stderr.
    if let Ok(level) = std::env::var("PACKYARD_BENCH_LOG") {
        let log = packyard_model::config::LogConfig { level, ..Default::default() };
        packyard_core::telemetry::init(&log);
    }
    let system = actix_web::rt::System::new();
    let (_t, services) = system.block_on(async {
        let t = TestDb::fresh(Backend::Sqlite).await.ok().flatten().expect("sqlite test database");
        let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
        let services = common::services_with(t.db.clone(), &t, blobs, |config| {
            config.worker.debounce_ms = 0;
        });
        services.security.ensure_builtin_roles().await.expect("roles");
        let spec: RepositorySpec =
            serde_json::from_value(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))
                .expect("spec");
        let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        for i in 0..50 {
            let control = format!(
                "Package: bench-{i}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: B <b@example.org>\nDescription: bench\n"
            );
            let deb = packyard_codecs::apt::testing::deb(&control, ".gz");
            let body = futures_util::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(deb))]);
            let actor = Actor::system("bench");
            upload(&AptHosted, &services, &repo, Default::default(), body, actor).await.expect("upload");
        }
        let publisher = packyard_worker::publisher::Publisher::new(
            services.clone(),
            packyard_worker::builders(&services),
        );
        publisher.run_until_idle().await;
        (t, services)
    });
    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let get = |path: &str, etag: Option<&str>| {
        let mut req = TestRequest::get().uri(path);
        if let Some(e) = etag {
            req = req.insert_header(("if-none-match", e));
        }
        system.block_on(test::call_service(&app, req.to_request()))
    };
    let first = get("/repository/debs/dists/stable/InRelease", None);
    assert_eq!(first.status(), StatusCode::OK);
    let etag = first.headers().get("etag").and_then(|v| v.to_str().ok()).expect("etag").to_string();
    let mut g = c.benchmark_group("warmed metadata GET (in-process)");
    for path in
        ["/repository/debs/dists/stable/InRelease", "/repository/debs/dists/stable/main/binary-amd64/Packages.gz"]
    {
        assert_eq!(get(path, None).status(), StatusCode::OK);
        let name = path.rsplit('/').next().unwrap_or_default().to_string();
        g.bench_function(name, |b| b.iter(|| assert_eq!(get(path, None).status(), StatusCode::OK)));
    }
    g.bench_function("InRelease 304 (If-None-Match)", |b| {
        b.iter(|| {
            assert_eq!(get("/repository/debs/dists/stable/InRelease", Some(&etag)).status(), StatusCode::NOT_MODIFIED)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
