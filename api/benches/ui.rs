//! The web UI's pages over a large catalogue on PostgreSQL: 1,000,000 APT packages with their
//! assets in 10 hosted repositories (100,000 names × 10 versions, each name in one repository,
//! its component one of main/contrib/non-free; seeded in bulk: the format's rows, the catalogue,
//! one blob), published by the real publisher, counted, and a group over the ten; 200 users,
//! 20 tokens, 100,000 audit entries and a cleanup policy. Each page is asked 200 times with
//! random values through the whole actix service in-process (the session cookie's lookup, the
//! caller's decision, the queries, the HTML), anonymous where anonymous may see it and signed
//! in as the admin; the table gives p50, p95 and p99 of the server time in milliseconds.
//!
//! `cargo bench -p packyard-api --bench ui [-- <components>]` (needs `TEST_POSTGRES_URL`;
//! `scripts/test.sh` starts PostgreSQL and prints it)
#![expect(clippy::expect_used, reason = "a benchmark whose setup fails should stop at once")]

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use actix_web::http::StatusCode;
use actix_web::test::{self, TestRequest};
use packyard_core::repositories::RepositoryService;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::{BlobStore, FileStore};
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use rand::Rng;

const REPOSITORIES: i64 = 10;
const VERSIONS: i64 = 10;
const SAMPLES: usize = 200;
const PASSWORD: &str = "bench-password";

/// A page's URI, with random values drawn from the generator.
type Page = Box<dyn FnMut(&mut rand::rngs::ThreadRng) -> String>;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The value of the first `after=` link on a page (its "Next page").
fn next_token(html: &str) -> Option<String> {
    let at = html.match_indices("after=").find(|(i, _)| !html[..*i].ends_with("groups_"))?.0 + "after=".len();
    let rest = &html[at..];
    let end = rest.find(['"', '&']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
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
        let stored = blobs.put_bytes(&[7u8; 2048]).await.expect("blob");
        t.db.record_blob(&stored.sha256, stored.size).await.expect("blob row");
        let services = common::services_on(t.db.clone(), &t, blobs);
        services.security.ensure_builtin_roles().await.expect("roles");
        for r in 0..REPOSITORIES {
            let spec: RepositorySpec = serde_json::from_value(serde_json::json!({
                "name": format!("debs{r}"), "format": "apt", "type": "hosted",
                "apt": {"distribution": "stable", "components": ["main", "contrib", "non-free"], "architectures": ["amd64"]}
            }))
            .expect("spec");
            RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("repository");
        }
        let members: Vec<String> = (0..REPOSITORIES).map(|r| format!("debs{r}")).collect();
        let spec: RepositorySpec = serde_json::from_value(
            serde_json::json!({"name": "all-debs", "format": "apt", "type": "group", "group": {"members": members}}),
        )
        .expect("spec");
        RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await.expect("group");
        packyard_core::auth::bootstrap_admin(&t.db, Some(PASSWORD), &services.config.server.data_dir)
            .await
            .expect("admin");
        services
    });

    let seeding = Instant::now();
    system.block_on(async {
        // Package n: pkg<n / 10> version 1.<n % 10>, amd64, in repository debs<(n / 10) % 10>,
        // its component by (n / 100) % 3.
        let seed = [
            format!(
                "INSERT INTO apt_packages (repository_id, component, name, version, architecture, control, pool_path, size, md5, sha1, sha256, sha512, uploaded_at, uploaded_by) \
                 SELECT r.id, c.component, 'pkg' || (n / {VERSIONS}), '1.' || (n % {VERSIONS}), 'amd64', \
                 'Package: pkg' || (n / {VERSIONS}) || E'\\nVersion: 1.' || (n % {VERSIONS}) || E'\\nArchitecture: amd64\\nDepends: libc6 (>= 2.36), pkg' || (n / {VERSIONS} + 1) || E'\\nDescription: bench\\n', \
                 'pool/' || c.component || '/p/pkg' || (n / {VERSIONS}) || '/pkg' || (n / {VERSIONS}) || '_1.' || (n % {VERSIONS}) || '_amd64.deb', \
                 2048, md5('x'), repeat('0', 40), (SELECT sha256 FROM blobs LIMIT 1), repeat('0', 128), n, 'bench' \
                 FROM generate_series(0, {components} - 1) n \
                 JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM repositories WHERE name LIKE 'debs%') r ON r.k = (n / {VERSIONS}) % {REPOSITORIES} \
                 JOIN (VALUES (0, 'main'), (1, 'contrib'), (2, 'non-free')) c(k, component) ON c.k = (n / 100) % 3 \
                 ORDER BY n"
            ),
            // Every package in the repositories' one distribution (the default, `stable`).
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
            "INSERT INTO component_keywords (keyword, component_id) \
             SELECT DISTINCT w, id FROM components, LATERAL (VALUES (lower(name)), (lower(namespace)), (lower(version))) AS k(w)"
                .to_string(),
            "INSERT INTO users (username, password_hash, created_at, updated_at) \
             SELECT 'user' || n, (SELECT password_hash FROM users WHERE username = 'admin'), n, n FROM generate_series(1, 200) n"
                .to_string(),
            "INSERT INTO audit_log (at, actor, address, action, target, detail) \
             SELECT n, 'user' || (n % 200), '127.0.0.1', CASE WHEN n % 7 = 0 THEN 'repository.update' ELSE 'component.delete' END, \
             'debs' || (n % 10) || '/pkg' || n, '{}' FROM generate_series(1, 100000) n"
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
    let publishing = Instant::now();
    system.block_on(async {
        for repo in services.db.list_repositories().await.expect("repositories") {
            packyard_formats::apt::request_publication(&services.db, &repo).await.expect("request");
        }
        let publisher =
            packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services));
        // The debounce window passes, then everything due is published.
        tokio::time::sleep(Duration::from_millis(services.config.worker.debounce_ms + 100)).await;
        let published = publisher.run_until_idle().await.len();
        packyard_core::catalogue::refresh_usage(&services).await.expect("usage");
        eprintln!("published {published} units in {:.1} s", publishing.elapsed().as_secs_f64());
    });

    let app = system.block_on(test::init_service(packyard_api::app::public_app(services.clone())));
    let basic = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("admin:{PASSWORD}"))
    );
    let call = |req: TestRequest| {
        let res = system.block_on(test::call_service(&app, req.to_request()));
        let status = res.status();
        let body = system.block_on(test::read_body(res));
        (status, body)
    };
    for i in 0..20 {
        let (s, body) = call(
            TestRequest::post()
                .uri("/api/v1/tokens")
                .insert_header(("authorization", basic.clone()))
                .set_json(serde_json::json!({"name": format!("ci-{i}")})),
        );
        assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
    }
    let (s, body) = call(
        TestRequest::post()
            .uri("/api/v1/cleanup-policies")
            .insert_header(("authorization", basic.clone()))
            .set_json(serde_json::json!({"name": "keep-five", "format": "apt", "criteria": {"keep_latest": 5},
                "repositories": (0..REPOSITORIES).map(|r| format!("debs{r}")).collect::<Vec<_>>()})),
    );
    assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&body));
    let cookie = {
        let (token, _) = system
            .block_on(services.security.start_session(
                "admin",
                PASSWORD,
                "127.0.0.1".parse().expect("address"),
                Duration::from_secs(3600),
            ))
            .map_err(|e| format!("{e:?}"))
            .expect("session");
        format!("packyard_session={token}")
    };
    let page = |uri: &str, signed_in: bool| -> String {
        let mut req = TestRequest::get().uri(uri);
        if signed_in {
            req = req.insert_header(("cookie", cookie.clone()));
        }
        let (status, body) = call(req);
        let html = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, StatusCode::OK, "{uri}: {}", &html[..html.len().min(600)]);
        html
    };
    // Component ids as a client finds them (Nexus's search; the UI's URLs use the same ids).
    let mut rng = rand::thread_rng();
    let ids: Vec<String> = (0..100)
        .map(|_| {
            let uri = format!("/service/rest/v1/search?name=pkg{}", rng.gen_range(0..names));
            let (_, body) = call(TestRequest::get().uri(&uri));
            let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
            v["items"][0]["id"].as_str().expect("an id").to_string()
        })
        .collect();
    // A page deep in a repository's list and deep in the audit log, as a user reaches them.
    let deep = |first: &str, pages: usize| -> String {
        let mut uri = first.to_string();
        for _ in 0..pages {
            let html = page(&uri, true);
            let token = next_token(&html).expect("a next page");
            let sep = if first.contains('?') { '&' } else { '?' };
            uri = format!("{first}{sep}after={token}");
        }
        uri
    };
    let deep_browse = deep("/browse/debs3?group=contrib", 50);
    let deep_audit = {
        // The audit log pages by `before=<id>`.
        let html = page("/admin/audit", true);
        let at = html.find("before=").expect("an older page") + "before=".len();
        let id: i64 = html[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().expect("id");
        format!("/admin/audit?before={}", id - 50_000)
    };
    let mut pages: Vec<(&str, bool, Page)> = vec![
        ("repositories (/)", false, Box::new(|_| "/".to_string())),
        ("repositories (/)", true, Box::new(|_| "/".to_string())),
        ("a repository, first page", false, Box::new(|r| format!("/browse/debs{}", r.gen_range(0..REPOSITORIES)))),
        (
            "a repository's group, first page",
            true,
            Box::new(|r| format!("/browse/debs{}?group=non-free", r.gen_range(0..REPOSITORIES))),
        ),
        ("a repository's group, 51st page", true, Box::new(move |_| deep_browse.clone())),
        ("a group of the ten", true, Box::new(|_| "/browse/all-debs".to_string())),
        ("search by keyword", false, Box::new(move |r| format!("/search?q=pkg{}", r.gen_range(0..names)))),
        ("search by keyword", true, Box::new(move |r| format!("/search?q=pkg{}", r.gen_range(0..names)))),
        (
            "search by repository + version",
            true,
            Box::new(|r| {
                format!(
                    "/search?repository=debs{}&version=1.{}",
                    r.gen_range(0..REPOSITORIES),
                    r.gen_range(0..VERSIONS)
                )
            }),
        ),
        (
            "a component",
            false,
            Box::new({
                let ids = ids.clone();
                move |r| format!("/component/{}", ids[r.gen_range(0..ids.len())])
            }),
        ),
        (
            "a component",
            true,
            Box::new({
                let ids = ids.clone();
                move |r| format!("/component/{}", ids[r.gen_range(0..ids.len())])
            }),
        ),
        ("admin: status", true, Box::new(|_| "/admin".to_string())),
        ("admin: repositories", true, Box::new(|_| "/admin/repositories".to_string())),
        (
            "admin: a repository",
            true,
            Box::new(|r| format!("/admin/repositories/debs{}", r.gen_range(0..REPOSITORIES))),
        ),
        ("admin: users (201)", true, Box::new(|_| "/admin/users".to_string())),
        ("admin: a user", true, Box::new(|r| format!("/admin/users/user{}", r.gen_range(1..=200)))),
        ("admin: roles", true, Box::new(|_| "/admin/roles".to_string())),
        ("admin: my tokens (20)", true, Box::new(|_| "/admin/tokens".to_string())),
        ("admin: cleanup", true, Box::new(|_| "/admin/cleanup".to_string())),
        (
            "admin: cleanup preview (100,000 components)",
            true,
            Box::new(|r| format!("/admin/cleanup?policy=keep-five&repository=debs{}", r.gen_range(0..REPOSITORIES))),
        ),
        ("admin: audit log, first page", true, Box::new(|_| "/admin/audit".to_string())),
        ("admin: audit log, 50,000 entries back", true, Box::new(move |_| deep_audit.clone())),
        ("admin: audit log by actor", true, Box::new(|r| format!("/admin/audit?actor=user{}", r.gen_range(1..200)))),
    ];
    println!("| page ({components} packages, PostgreSQL, in-process) | viewer | p50 ms | p95 ms | p99 ms | KiB |");
    println!("|---|---|---|---|---|---|");
    for (label, signed_in, make) in pages.iter_mut() {
        let mut times = Vec::with_capacity(SAMPLES);
        let mut bytes = 0;
        for _ in 0..10 {
            page(&make(&mut rng), *signed_in);
        }
        for _ in 0..SAMPLES {
            let uri = make(&mut rng);
            let started = Instant::now();
            let html = page(&uri, *signed_in);
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            bytes += html.len();
        }
        times.sort_by(f64::total_cmp);
        println!(
            "| {label} | {} | {:.2} | {:.2} | {:.2} | {:.0} |",
            if *signed_in { "admin" } else { "anonymous" },
            percentile(&times, 0.5),
            percentile(&times, 0.95),
            percentile(&times, 0.99),
            bytes as f64 / SAMPLES as f64 / 1024.0
        );
    }
}
