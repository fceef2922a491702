//! The cost of deciding who may read: a full in-process request (routing, extractors, the
//! authorization decision, the error response) for an anonymous caller versus warmed Basic and
//! Bearer callers, and a cold Basic login (argon2 and database) for scale.
//!
//! `cargo bench -p packyard-api --bench auth`
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use base64::Engine;
use criterion::{criterion_group, criterion_main, Criterion};
use packyard_core::auth::bootstrap_admin;
use packyard_core::repositories::RepositoryService;
use packyard_core::security::tokens;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::FileStore;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use std::sync::Arc;

mod common;

fn bench(c: &mut Criterion) {
    let system = actix_web::rt::System::new();
    let (t, services) = system.block_on(async {
        let t = TestDb::fresh(Backend::Sqlite).await.ok().flatten().expect("sqlite test database");
        let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
        let services = common::services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        bootstrap_admin(&t.db, Some("bench-password"), t.dir.path()).await.expect("admin");
        let spec: RepositorySpec =
            serde_json::from_value(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))
                .expect("spec");
        RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        (t, services)
    });
    let admin = t.db.user_by_name("admin");
    let admin_id = system.block_on(admin).ok().flatten().map(|u| u.id).expect("admin id");
    let token = tokens::generate();
    system
        .block_on(t.db.insert_token(&token.id, admin_id, "bench", &token.secret_hash, None, None, None))
        .expect("token");
    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("admin:bench-password"));
    let bearer = format!("Bearer {}", token.token);

    let run = |auth: Option<&str>| {
        let mut req = TestRequest::get().uri("/repository/debs/dists/stable/InRelease");
        if let Some(a) = auth {
            req = req.insert_header(("authorization", a));
        }
        let res = system.block_on(test::call_service(&app, req.to_request()));
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
    };
    run(None);
    run(Some(&basic));
    run(Some(&bearer));

    let mut g = c.benchmark_group("warmed GET /repository/debs/…");
    g.bench_function("anonymous", |b| b.iter(|| run(None)));
    g.bench_function("basic (cached)", |b| b.iter(|| run(Some(&basic))));
    g.bench_function("bearer token (cached)", |b| b.iter(|| run(Some(&bearer))));
    g.finish();
    let mut g = c.benchmark_group("cold GET /repository/debs/…");
    g.sample_size(10);
    g.bench_function("basic (argon2 + database)", |b| {
        b.iter(|| {
            services.security.changed_locally();
            run(Some(&basic))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
