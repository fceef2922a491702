//! Nexus's search and browse API over a large catalogue on PostgreSQL: 1,000,000 components
//! with 1,000,000 assets in 10 repositories (100,000 names × 10 versions, each name in one
//! repository, seeded in bulk), then
//! through the whole actix service in-process, anonymous and with an API token: `search` by name,
//! by keyword, by repository + version, a `components` page of 100 (the first and one deep in,
//! through its `continuationToken`), and `search/assets` by SHA-256. Each query is asked 300 times
//! with random values; the table gives p50, p95 and p99 in milliseconds.
//!
//! `cargo bench -p packyard-api --bench catalogue [-- <components>]` (needs `TEST_POSTGRES_URL`;
//! `scripts/test.sh` starts PostgreSQL and prints it)
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::Arc;
use std::time::Instant;

mod common;

use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use packyard_core::repositories::RepositoryService;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::FileStore;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use rand::Rng;

const REPOSITORIES: i64 = 10;
const VERSIONS: i64 = 10;
const SAMPLES: usize = 300;

/// A query's URI, with random values drawn from the generator.
type Query = Box<dyn FnMut(&mut rand::rngs::ThreadRng) -> String>;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let components: i64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let names = components / VERSIONS;
    let system = actix_web::rt::System::new();
    let Some(t) = system.block_on(TestDb::fresh(Backend::Postgres)).expect("database") else {
        eprintln!("TEST_POSTGRES_URL is not set: this benchmark measures PostgreSQL");
        return;
    };
    let services = system.block_on(async {
        let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await.expect("blobs"));
        let services = common::services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        for r in 0..REPOSITORIES {
            let spec: RepositorySpec = serde_json::from_value(
                serde_json::json!({"name": format!("debs{r}"), "format": "apt", "type": "hosted"}),
            )
            .expect("spec");
            RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        }
        services
    });
    let seeding = Instant::now();
    system.block_on(async {
        let pool = t.db.pool();
        // Component n: name libbench<n / 10>, version 1.<n % 10>.0, in repository <name> % 10.
        let seed = [
            format!(
                "INSERT INTO components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) \
                 SELECT r.id, 'apt', 'pool/main/l/libbench' || n || '.deb', 'main', 'libbench' || (n / {VERSIONS}), \
                 '1.' || (n % {VERSIONS}) || '.0', 0, 'bench' \
                 FROM generate_series(0, {components} - 1) n \
                 JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM repositories) r ON r.k = (n / {VERSIONS}) % {REPOSITORIES} \
                 ORDER BY n"
            ),
            "INSERT INTO assets (repository_id, component_id, path, sha256, size, content_type, created_at, uploaded_by) \
             SELECT repository_id, id, component_key, md5(id::text) || md5(id::text), 10000 + id % 5000, \
             'application/vnd.debian.binary-package', 0, 'bench' FROM components"
                .to_string(),
            "INSERT INTO component_keywords (keyword, component_id) \
             SELECT DISTINCT w, id FROM components, LATERAL (VALUES (lower(name)), (lower(namespace)), (lower(version)), ('1'), ('0'), (split_part(version, '.', 2))) AS k(w)"
                .to_string(),
            "ANALYZE".to_string(),
        ];
        // Bulk statements run longer than database.statement_timeout_ms allows a request.
        let mut conn = pool.acquire().await.expect("connection");
        sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await.expect("no timeout");
        for s in &seed {
            sqlx::query(s).execute(&mut *conn).await.expect("seed");
        }
    });
    eprintln!("seeded {components} components and assets in {:.1} s", seeding.elapsed().as_secs_f64());
    system.block_on(async {
        packyard_core::auth::bootstrap_admin(&t.db, Some("bench-password"), &services.config.server.data_dir)
            .await
            .expect("admin");
    });
    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let token = {
        let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "admin:bench-password");
        let req = TestRequest::post()
            .uri("/api/v1/tokens")
            .insert_header(("authorization", format!("Basic {basic}")))
            .set_json(serde_json::json!({"name": "bench"}));
        let res = system.block_on(test::call_service(&app, req.to_request()));
        assert_eq!(res.status(), StatusCode::CREATED);
        let body: serde_json::Value = serde_json::from_slice(&system.block_on(test::read_body(res))).expect("json");
        body["token"].as_str().expect("token").to_string()
    };
    let get = |uri: &str, bearer: Option<&str>| {
        let mut req = TestRequest::get().uri(uri);
        if let Some(t) = bearer {
            req = req.insert_header(("authorization", format!("Bearer {t}")));
        }
        let res = system.block_on(test::call_service(&app, req.to_request()));
        let status = res.status();
        let body = system.block_on(test::read_body(res));
        assert_eq!(status, StatusCode::OK, "{uri}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice::<serde_json::Value>(&body).expect("json")
    };
    // A token deep in a repository's list, to measure a later page as a client reaches it.
    let deep = {
        let mut page = get("/service/rest/v1/components?repository=debs3", None);
        for _ in 0..50 {
            let token = page["continuationToken"].as_str().expect("token").to_string();
            page = get(&format!("/service/rest/v1/components?repository=debs3&continuationToken={token}"), None);
        }
        page["continuationToken"].as_str().expect("token").to_string()
    };
    let mut rng = rand::thread_rng();
    let mut queries: Vec<(&str, Query)> = vec![
        (
            "search by name",
            Box::new(move |r| format!("/service/rest/v1/search?name=libbench{}", r.gen_range(0..names))),
        ),
        (
            "search by keyword (q)",
            Box::new(move |r| format!("/service/rest/v1/search?q=libbench{}", r.gen_range(0..names))),
        ),
        (
            "search by repository + version",
            Box::new(|r| {
                format!(
                    "/service/rest/v1/search?repository=debs{}&version=1.{}.0",
                    r.gen_range(0..REPOSITORIES),
                    r.gen_range(0..VERSIONS)
                )
            }),
        ),
        (
            "components page of 100 (first)",
            Box::new(|r| format!("/service/rest/v1/components?repository=debs{}", r.gen_range(0..REPOSITORIES))),
        ),
        (
            "components page of 100 (51st)",
            Box::new(move |_| format!("/service/rest/v1/components?repository=debs3&continuationToken={deep}")),
        ),
        (
            "search/assets by sha256",
            Box::new(move |r| {
                let md5 = md5_hex(&r.gen_range(1..=components).to_string());
                format!("/service/rest/v1/search/assets?sha256={md5}{md5}")
            }),
        ),
    ];
    println!("| query ({components} components, PostgreSQL, in-process) | caller | p50 ms | p95 ms | p99 ms | items |");
    println!("|---|---|---|---|---|---|");
    for (label, make) in queries.iter_mut() {
        for (caller, bearer) in [("anonymous", None), ("API token", Some(token.as_str()))] {
            let mut times = Vec::with_capacity(SAMPLES);
            let mut items = 0;
            for _ in 0..10 {
                get(&make(&mut rng), bearer);
            }
            for _ in 0..SAMPLES {
                let uri = make(&mut rng);
                let started = Instant::now();
                let page = get(&uri, bearer);
                times.push(started.elapsed().as_secs_f64() * 1000.0);
                items += page["items"].as_array().map_or(0, Vec::len);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "| {label} | {caller} | {:.2} | {:.2} | {:.2} | {:.0} |",
                percentile(&times, 0.5),
                percentile(&times, 0.95),
                percentile(&times, 0.99),
                items as f64 / SAMPLES as f64
            );
        }
    }
}

fn md5_hex(s: &str) -> String {
    hex::encode(<md5::Md5 as md5::Digest>::digest(s.as_bytes()))
}
