//! The security model in-process: the authorization matrix, the decision cache, throttling,
//! and the users/roles/tokens/audit API — on SQLite, PostgreSQL and MariaDB.

use crate::common;

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::test::{self, TestRequest};
use common::app::{As, TestApp};
use common::{admin, basic, bearer, call, error_of, services, services_with};
use packyard_core::security::tokens;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use serde_json::json;

/// Who calls, in the matrix's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Anonymous,
    Reader,
    Writer,
    WriterOfOther,
    Admin,
    RevokedToken,
    ExpiredToken,
    WrongPassword,
}

const WHO: [Who; 8] = [
    Who::Anonymous,
    Who::Reader,
    Who::Writer,
    Who::WriterOfOther,
    Who::Admin,
    Who::RevokedToken,
    Who::ExpiredToken,
    Who::WrongPassword,
];

/// One route family on one repository, and the status each caller must get, in `WHO` order.
/// A permitted read or delete of a path that holds nothing is a 404; a permitted upload to a
/// path no format route takes is a 405. Each format issue adds its routes here.
struct Row {
    family: &'static str,
    method: &'static str,
    path: &'static str,
    expect: [u16; 8],
}

#[rustfmt::skip]
const MATRIX: &[Row] = &[
    //                                                                                   anon  reader writer w-other admin revoked expired wrong-pw
    Row { family: "admin API",  method: "GET",    path: "/api/v1/repositories/debs",        expect: [401, 403, 403, 403, 200, 401, 401, 401] },
    Row { family: "admin API",  method: "POST",   path: "/api/v1/roles",                    expect: [401, 403, 403, 403, 201, 401, 401, 401] },
    Row { family: "read",       method: "GET",    path: "/repository/debs/dists/stable/Release",   expect: [404, 404, 404, 403, 404, 401, 401, 401] },
    Row { family: "read",       method: "HEAD",   path: "/repository/debs/dists/stable/Release",   expect: [404, 404, 404, 403, 404, 401, 401, 401] },
    Row { family: "read",       method: "GET",    path: "/repository/closed/dists/stable/Release", expect: [401, 403, 403, 403, 404, 401, 401, 401] },
    // A PUT of a .deb is Artifactory's upload: a permitted one of these bytes is refused as not a .deb.
    Row { family: "upload",     method: "PUT",    path: "/repository/debs/pool/main/h/hello_1_amd64.deb", expect: [401, 403, 400, 403, 400, 401, 401, 401] },
    // debs is an APT repository: a permitted POST of these bytes is refused as not a .deb.
    Row { family: "upload",     method: "POST",   path: "/repository/debs/",                expect: [401, 403, 400, 403, 400, 401, 401, 401] },
    Row { family: "delete",     method: "DELETE", path: "/repository/debs/pool/main/h/hello_1_amd64.deb", expect: [401, 403, 403, 403, 404, 401, 401, 401] },
    Row { family: "unknown repository", method: "GET", path: "/repository/nope/x",          expect: [404, 404, 404, 404, 404, 401, 401, 401] },
];

struct Credentials {
    reader: (header::HeaderName, String),
    writer: (header::HeaderName, String),
    writer_of_other: (header::HeaderName, String),
    revoked: (header::HeaderName, String),
    expired: (header::HeaderName, String),
}

impl Credentials {
    fn header(&self, who: Who) -> Option<(header::HeaderName, String)> {
        match who {
            Who::Anonymous => None,
            Who::Reader => Some(self.reader.clone()),
            Who::Writer => Some(self.writer.clone()),
            Who::WriterOfOther => Some(self.writer_of_other.clone()),
            Who::Admin => Some(admin()),
            Who::RevokedToken => Some(self.revoked.clone()),
            Who::ExpiredToken => Some(self.expired.clone()),
            Who::WrongPassword => Some(basic("reader", "not-the-password")),
        }
    }
}

/// Repositories `debs` (anonymous read on), `closed` (off) and `other`; roles and users for each
/// column; a token of each kind.
async fn setup<S, B>(app: &S, t: &TestDb) -> anyhow::Result<Credentials>
where
    S: actix_web::dev::Service<
        actix_http::Request,
        Response = actix_web::dev::ServiceResponse<B>,
        Error = actix_web::Error,
    >,
    B: actix_web::body::MessageBody,
{
    for (name, anon) in [("debs", true), ("closed", false), ("other", true)] {
        let r = call(
            app,
            TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(json!({
                "name": name, "format": "apt", "type": "hosted", "anonymous_read": anon
            })),
        )
        .await?;
        anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    }
    for (role, repos, actions) in [
        ("debs-readers", "debs*", json!(["read"])),
        ("debs-writers", "debs", json!(["read", "write"])),
        ("other-writers", "oth?r", json!(["read", "write", "delete"])),
    ] {
        let r = call(
            app,
            TestRequest::post().uri("/api/v1/roles").insert_header(admin()).set_json(json!({
                "name": role, "privileges": [{"repositories": repos, "actions": actions}]
            })),
        )
        .await?;
        anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    }
    for (user, role) in [("reader", "debs-readers"), ("writer", "debs-writers"), ("wother", "other-writers")] {
        let r = call(
            app,
            TestRequest::post().uri("/api/v1/users").insert_header(admin()).set_json(json!({
                "username": user, "password": format!("{user}-password"), "roles": [role]
            })),
        )
        .await?;
        anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    }
    let token = |who: &'static str, body: serde_json::Value| {
        let req = TestRequest::post()
            .uri("/api/v1/tokens")
            .insert_header(basic(who, &format!("{who}-password")))
            .set_json(body);
        async move {
            let r = call(app, req).await?;
            anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
            Ok::<_, anyhow::Error>((
                r.json["id"].as_str().unwrap_or_default().to_string(),
                r.json["token"].as_str().unwrap_or_default().to_string(),
            ))
        }
    };
    let (_, writer_token) = token("writer", json!({"name": "ci"})).await?;
    let (_, wother_token) = token("wother", json!({"name": "ci"})).await?;
    let (revoked_id, revoked_token) = token("writer", json!({"name": "old"})).await?;
    let r = call(
        app,
        TestRequest::delete()
            .uri(&format!("/api/v1/tokens/{revoked_id}"))
            .insert_header(basic("writer", "writer-password")),
    )
    .await?;
    anyhow::ensure!(r.status == StatusCode::NO_CONTENT, "{}", r.text);
    // The API refuses an expiry in the past, so the expired token is written directly.
    let expired = tokens::generate();
    let writer_id = t.db.user_by_name("writer").await?.map(|u| u.id).unwrap_or_default();
    t.db.insert_token(&expired.id, writer_id, "expired", &expired.secret_hash, None, None, Some(1_000)).await?;
    Ok(Credentials {
        reader: basic("reader", "reader-password"),
        writer: bearer(&writer_token),
        // A token as the password of Basic auth (apt's auth.conf, .netrc, conan login).
        writer_of_other: basic("wother", &wother_token),
        revoked: bearer(&revoked_token),
        expired: basic("writer", &expired.token),
    })
}

fn request(method: &str, path: &str) -> TestRequest {
    let req = match method {
        "GET" => TestRequest::get(),
        "HEAD" => TestRequest::default().method(actix_web::http::Method::HEAD),
        "PUT" => TestRequest::put().set_payload("bytes"),
        "POST" if path.starts_with("/api/") => TestRequest::post(),
        "POST" => TestRequest::post().set_payload("bytes"),
        "DELETE" => TestRequest::delete(),
        other => {
            TestRequest::default().method(actix_web::http::Method::from_bytes(other.as_bytes()).unwrap_or_default())
        }
    };
    req.uri(path)
}

async fn authorization_matrix(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let app = test::init_service(packyard_api::app::public_app(services(&t).await?)).await;
    let creds = setup(&app, &t).await?;
    let mut failures = Vec::new();
    let mut role_counter = 0;
    for row in MATRIX {
        for (who, expected) in WHO.iter().zip(row.expect) {
            let mut req = request(row.method, row.path);
            if row.path == "/api/v1/roles" {
                role_counter += 1;
                req = req.set_json(json!({"name": format!("r{role_counter}"), "privileges": []}));
            }
            if let Some(h) = creds.header(*who) {
                req = req.insert_header(h);
            }
            let r = call(&app, req).await?;
            if r.status.as_u16() != expected {
                failures.push(format!(
                    "{} {} {} as {who:?}: got {}, want {expected}: {}",
                    row.family, row.method, row.path, r.status, r.text
                ));
            }
            if r.status == StatusCode::UNAUTHORIZED
                && r.headers.get(header::WWW_AUTHENTICATE).map(|v| v.as_bytes())
                    != Some(&b"Basic realm=\"packyard\""[..])
            {
                failures.push(format!("{} {} as {who:?}: 401 without WWW-Authenticate", row.method, row.path));
            }
            if row.path.starts_with("/repository/") && row.method != "HEAD" && r.status.is_client_error() {
                let ct = r.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if !ct.starts_with("text/plain") || r.text.trim().is_empty() {
                    failures.push(format!(
                        "{} {} as {who:?}: error body must be plain text with a message, got {ct:?} {:?}",
                        row.method, row.path, r.text
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "authorization matrix mismatches:\n{}", failures.join("\n"));

    // The messages say what to do.
    let r = call(&app, request("PUT", "/repository/debs/pool/x.deb").insert_header(creds.reader.clone())).await?;
    assert_eq!(r.text, "user reader may not write repository debs\n");
    let r = call(&app, request("GET", "/repository/closed/x")).await?;
    assert_eq!(r.text, "authentication required to read repository closed\n");
    let r = call(&app, request("GET", "/repository/debs/x").insert_header(creds.revoked.clone())).await?;
    assert_eq!(r.text, "invalid, expired or revoked token\n");
    let r = call(&app, request("GET", "/api/v1/repositories").insert_header(basic("reader", "nope"))).await?;
    assert_eq!(error_of(&r.json), ("unauthorized", "invalid username or password"));
    // A token narrowed to reading cannot write, even for its writer.
    let r = call(
        &app,
        TestRequest::post().uri("/api/v1/tokens").insert_header(basic("writer", "writer-password")).set_json(json!({
            "name": "read-only", "actions": ["read"], "repositories": "debs", "expires_at": "2999-01-01T00:00:00Z"
        })),
    )
    .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let narrow = r.json["token"].as_str().unwrap_or_default().to_string();
    assert_eq!(r.json["expires_at"], "2999-01-01T00:00:00.000Z");
    let r = call(&app, request("PUT", "/repository/debs/pool/x.deb").insert_header(bearer(&narrow))).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = call(&app, request("GET", "/repository/debs/pool/x.deb").insert_header(bearer(&narrow))).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    // A token cannot be used under another user's name.
    let r = call(&app, request("GET", "/repository/debs/x").insert_header(basic("reader", &narrow))).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.text, "the token belongs to another user\n");
    Ok(())
}
on_every_backend!(authorization_matrix);

async fn global_anonymous_switch(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let services = services_with(&t, |c| c.security.anonymous_read = false).await?;
    let app = test::init_service(packyard_api::app::public_app(services)).await;
    let r = call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(admin())
            .set_json(json!({"name": "debs", "format": "apt", "type": "hosted"})),
    )
    .await?;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = call(&app, request("GET", "/repository/debs/x")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "security.anonymous_read = false closes every repository");
    let r = call(&app, request("GET", "/repository/debs/x").insert_header(admin())).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    Ok(())
}
on_every_backend!(global_anonymous_switch);

async fn warmed_reads_run_no_query(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let app = test::init_service(packyard_api::app::public_app(services(&t).await?)).await;
    let creds = setup(&app, &t).await?;
    for who in [Who::Anonymous, Who::Reader, Who::Writer, Who::WriterOfOther] {
        let get = || {
            let mut req = request("GET", "/repository/debs/dists/stable/InRelease");
            if let Some(h) = creds.header(who) {
                req = req.insert_header(h);
            }
            req
        };
        let first = call(&app, get()).await?;
        let before = t.metrics.db_queries();
        let warmed = call(&app, get()).await?;
        let after = t.metrics.db_queries();
        assert_eq!(warmed.status, first.status, "{who:?}");
        assert_eq!(after - before, 0, "a warmed request as {who:?} ran {} database queries", after - before);
    }
    let text = String::from_utf8(t.metrics.render())?;
    assert!(text.contains(r#"packyard_cache_requests_total{cache="auth",result="hit"}"#), "{text}");
    Ok(())
}
on_every_backend!(warmed_reads_run_no_query);

/// The progressive delay (#44): `login_max_failures` wrong passwords are free; then each attempt
/// waits a delay after the last failure — 1 s, doubling with each further failure, at most
/// `login_window_secs` — refused with 429 meanwhile, the right password too; once the delay is
/// over the right password signs in (before #44: refused until a whole window had passed, the
/// Retry-After the window's rest). Counted per user and real client address: behind a trusted
/// proxy one client's failures cost another nothing, and an untrusted peer cannot choose the
/// address its failures are counted under.
async fn throttling(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let services = services_with(&t, |c| {
        c.security.login_window_secs = 4;
        c.server.trusted_proxies = vec!["10.0.0.0/8".into()];
    })
    .await?;
    let app = test::init_service(packyard_api::app::public_app(services)).await;
    let balancer: std::net::SocketAddr = "10.0.0.2:40000".parse()?;
    let from = |client: &str, pw: &str| {
        TestRequest::get()
            .uri("/api/v1/repositories")
            .peer_addr(balancer)
            .insert_header(("X-Forwarded-For", client.to_string()))
            .insert_header(basic("admin", pw))
    };
    let attacker = |pw: &str| from("198.51.100.66", pw);
    let retry_after = |r: &common::Reply| -> anyhow::Result<u64> {
        Ok(r.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).unwrap_or("").parse()?)
    };
    // A client behind the same balancer signs in: its proven password is now cached.
    let r = call(&app, from("198.51.100.7", common::ADMIN_PW)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    for i in 0..10 {
        let r = call(&app, attacker("wrong")).await?;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    // The first delay: one second, the right password included — though a sign-in cached it
    // (answering it from the cache would tell the guesser which guess is right).
    let r = call(&app, attacker("wrong")).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert_eq!(retry_after(&r)?, 1);
    assert_eq!(error_of(&r.json), ("too_many_requests", "too many failed logins; retry in 1 s"));
    let r = call(&app, attacker(common::ADMIN_PW)).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same balancer is not affected.
    let r = call(&app, from("198.51.100.7", common::ADMIN_PW)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // Each failure after the free ones doubles the delay, up to login_window_secs (4 s).
    for want in [2, 4, 4] {
        actix_web::rt::time::sleep(Duration::from_millis(1_100)).await;
        let mut r = call(&app, attacker("wrong")).await?;
        while r.status == StatusCode::TOO_MANY_REQUESTS {
            actix_web::rt::time::sleep(Duration::from_millis(retry_after(&r)? * 1000)).await;
            r = call(&app, attacker("wrong")).await?;
        }
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
        let r = call(&app, attacker("wrong")).await?;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
        assert_eq!(retry_after(&r)?, want, "after one more failure");
    }
    // Once the delay is over, the right password signs in. (A success forgets the failures:
    // `throttling_is_shared_by_replicas`.)
    actix_web::rt::time::sleep(Duration::from_millis(4_100)).await;
    let r = call(&app, attacker(common::ADMIN_PW)).await?;
    assert_eq!(r.status, StatusCode::OK, "after the delay: {}", r.text);
    // A peer that is not a trusted proxy is counted under its own address, whatever it says.
    let liar: std::net::SocketAddr = "192.0.2.50:40000".parse()?;
    let lie = |pw: &str| {
        TestRequest::get()
            .uri("/api/v1/repositories")
            .peer_addr(liar)
            .insert_header(("X-Forwarded-For", "198.51.100.99"))
            .insert_header(basic("admin", pw))
    };
    for i in 0..10 {
        let r = call(&app, lie("wrong")).await?;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    let r = call(&app, lie("wrong")).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "counted under the peer's own address: {}", r.text);
    let r = call(&app, from("198.51.100.99", "wrong")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "the address it named owes nothing: {}", r.text);
    Ok(())
}
on_every_backend!(throttling);

/// Failed logins are counted where every replica sees them: in the database, or in Redis when
/// one is configured. Five wrong passwords on one replica and five on another lock the user out
/// of both; a success on one forgets them for both.
async fn throttling_is_shared_by_replicas(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let mut stores = vec![None];
    match std::env::var("TEST_REDIS_URL") {
        Ok(u) => stores.push(Some(u)),
        Err(_) => eprintln!("Redis part skipped: TEST_REDIS_URL is not set (scripts/test.sh sets it)"),
    }
    for redis in stores {
        let replica = || {
            let redis = redis.clone();
            services_with(&t, move |c| {
                c.security.login_window_secs = 30;
                c.cache.redis_url = redis;
            })
        };
        let a = test::init_service(packyard_api::app::public_app(replica().await?)).await;
        let b = test::init_service(packyard_api::app::public_app(replica().await?)).await;
        // An address of this run alone: Redis outlives the test database.
        let peer: std::net::SocketAddr = format!("[2001:db8::{:x}]:40000", rand::random::<u16>()).parse()?;
        let attempt =
            |pw: &str| TestRequest::get().uri("/api/v1/repositories").peer_addr(peer).insert_header(basic("admin", pw));
        let store = if redis.is_some() { "Redis" } else { "the database" };
        for i in 0..4 {
            let r = call(if i % 2 == 0 { &a } else { &b }, attempt("wrong")).await?;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "attempt {i} ({store})");
        }
        // A success forgets the failures, on the other replica too.
        let r = call(&a, attempt(common::ADMIN_PW)).await?;
        assert_eq!(r.status, StatusCode::OK, "{} ({store})", r.text);
        for i in 0..10 {
            let r = call(if i < 5 { &a } else { &b }, attempt("still wrong")).await?;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "attempt {i} after the success ({store}): {}", r.text);
        }
        for app in [&a, &b] {
            let r = call(app, attempt("wrong again")).await?;
            assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{} ({store})", r.text);
            let retry_after: u64 =
                r.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).unwrap_or("").parse()?;
            assert!((1..=30).contains(&retry_after), "Retry-After {retry_after} ({store})");
        }
        // The right password waits out the delay too: on both replicas.
        let r = call(&b, attempt(common::ADMIN_PW)).await?;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{} ({store})", r.text);
        if redis.is_none() {
            let (_, failures) =
                t.db.login_failures(&hex_sha256(&format!("admin\0{}", peer.ip()))).await?.unwrap_or_default();
            assert_eq!(failures, 10, "the database counted every failure of both replicas");
        }
    }
    Ok(())
}
on_every_backend!(throttling_is_shared_by_replicas);

fn hex_sha256(s: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

fn post(uri: &str, body: serde_json::Value) -> TestRequest {
    TestRequest::post().uri(uri).set_json(body)
}

fn put(uri: &str, body: serde_json::Value) -> TestRequest {
    TestRequest::put().uri(uri).set_json(body)
}

/// The built-in roles are listed and kept; a role's privileges are checked.
async fn roles_are_checked(app: TestApp) -> anyhow::Result<()> {
    let r = app.call(TestRequest::get().uri("/api/v1/roles")).await?;
    let names: Vec<&str> =
        r.json.as_array().map(|a| a.iter().filter_map(|x| x["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, vec!["admin", "anonymous"]);
    assert_eq!(r.json[0]["builtin"], true);

    let r = app.call(TestRequest::delete().uri("/api/v1/roles/admin")).await?;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let anonymous_writes = json!({"privileges": [{"repositories": "*", "actions": ["read", "write"]}]});
    let r = app.call(put("/api/v1/roles/anonymous", anonymous_writes)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(error_of(&r.json).1.contains("anonymous writes are never allowed"), "{}", r.text);
    let bad_glob = json!({"name": "bad", "privileges": [{"repositories": "a/b", "actions": ["read"]}]});
    let r = app.call(post("/api/v1/roles", bad_glob)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let bad_action = json!({"name": "x", "privileges": [{"repositories": "*", "actions": ["fly"]}]});
    let r = app.call(post("/api/v1/roles", bad_action)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(error_of(&r.json).1.contains("unknown variant `fly`"), "{}", r.text);
    Ok(())
}
app_test!(roles_are_checked);

/// `bob` with password `bob-password` and no roles.
async fn bob(app: &TestApp) -> anyhow::Result<()> {
    let r = app.call(post("/api/v1/users", json!({"username": "bob", "password": "bob-password"}))).await?;
    anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    Ok(())
}

async fn users_are_created_once(app: TestApp) -> anyhow::Result<()> {
    let body = json!({"username": "bob", "password": "bob-password", "roles": ["ghost"]});
    let r = app.call(post("/api/v1/users", body)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&r.json).1, "role ghost does not exist");
    assert_eq!(app.t.db.user_by_name("bob").await?, None, "a failed create stores nothing");
    let r = app.call(post("/api/v1/users", json!({"username": "bob", "password": "bob-password"}))).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["roles"], json!([]));
    let r = app.call(post("/api/v1/users", json!({"username": "bob", "password": "bob-password"}))).await?;
    assert_eq!(r.status, StatusCode::CONFLICT);
    Ok(())
}
app_test!(users_are_created_once);

/// Bob changes his own password; the old one stops working at once; nobody changes another's.
async fn a_user_changes_their_own_password(app: TestApp) -> anyhow::Result<()> {
    bob(&app).await?;
    let change = |current: &str| {
        put("/api/v1/users/bob/password", json!({"current_password": current, "new_password": "bob-new-password"}))
    };
    let r = app.send(change("wrong"), As::basic("bob", "bob-password")).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = app.send(change("bob-password"), As::basic("bob", "bob-password")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = app.send(TestRequest::get().uri("/api/v1/tokens"), As::basic("bob", "bob-password")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let takeover = put("/api/v1/users/admin/password", json!({"new_password": "takeover!!"}));
    let r = app.send(takeover, As::basic("bob", "bob-new-password")).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    Ok(())
}
app_test!(a_user_changes_their_own_password);

/// Tokens: shown once, listed without secrets, unable to mint more, revoked at once.
async fn tokens_are_shown_once_and_revoked(app: TestApp) -> anyhow::Result<()> {
    bob(&app).await?;
    let bob_pw = As::basic("bob", "bob-password");
    let r = app.send(post("/api/v1/tokens", json!({"name": "laptop"})), bob_pw.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let token = r.json["token"].as_str().unwrap_or_default().to_string();
    let id = r.json["id"].as_str().unwrap_or_default().to_string();
    assert!(token.starts_with("pky_") && token.contains(&id));
    let with_token = As::Bearer(token.clone());
    let r = app.send(TestRequest::get().uri("/api/v1/tokens"), with_token.clone()).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json.as_array().map(Vec::len), Some(1));
    assert!(!r.text.contains(&token[10..]), "the secret is never listed");
    let r = app.send(post("/api/v1/tokens", json!({"name": "more"})), with_token.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let expired = json!({"name": "x", "expires_at": "2001-01-01T00:00:00Z"});
    let r = app.send(post("/api/v1/tokens", expired), bob_pw).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&r.json).1, "expires_at is in the past");
    let revoke = || TestRequest::delete().uri(&format!("/api/v1/tokens/{id}"));
    let r = app.send(revoke(), with_token.clone()).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = app.send(TestRequest::get().uri("/api/v1/tokens"), with_token).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "revoked on this replica at once");
    let r = app.call(revoke()).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    Ok(())
}
app_test!(tokens_are_shown_once_and_revoked);

/// Roles granted later take effect without a new login; a user cannot delete themselves; a
/// deleted user's credentials stop working.
async fn role_changes_and_deletes_take_effect_at_once(app: TestApp) -> anyhow::Result<()> {
    bob(&app).await?;
    let bob_pw = As::basic("bob", "bob-password");
    let r = app.send(TestRequest::get().uri("/api/v1/users"), bob_pw.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = app.call(put("/api/v1/users/bob", json!({"roles": ["admin"]}))).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["roles"], json!(["admin"]));
    let r = app.send(TestRequest::get().uri("/api/v1/users"), bob_pw.clone()).await?;
    assert_eq!(r.status, StatusCode::OK);
    let r = app.send(TestRequest::delete().uri("/api/v1/users/bob"), bob_pw.clone()).await?;
    assert_eq!(r.status, StatusCode::CONFLICT, "no deleting yourself");
    let r = app.call(TestRequest::delete().uri("/api/v1/users/bob")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = app.send(TestRequest::get().uri("/api/v1/users"), bob_pw).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    Ok(())
}
app_test!(role_changes_and_deletes_take_effect_at_once);

/// The audit log, newest first, in pages; administrators only.
async fn the_audit_log_pages_newest_first(app: TestApp) -> anyhow::Result<()> {
    bob(&app).await?;
    let change = json!({"current_password": "bob-password", "new_password": "bob-new-password"});
    let r = app.send(put("/api/v1/users/bob/password", change), As::basic("bob", "bob-password")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = app.send(post("/api/v1/tokens", json!({"name": "laptop"})), As::basic("bob", "bob-new-password")).await?;
    let id = r.json["id"].as_str().unwrap_or_default().to_string();
    let r = app.call(TestRequest::delete().uri(&format!("/api/v1/tokens/{id}"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(app.call(put("/api/v1/users/bob", json!({"roles": ["admin"]}))).await?.status, StatusCode::OK);
    assert_eq!(app.call(TestRequest::delete().uri("/api/v1/users/bob")).await?.status, StatusCode::NO_CONTENT);

    let r = app.call(TestRequest::get().uri("/api/v1/audit?limit=3")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let actions: Vec<&str> = r.json["entries"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(actions, vec!["user.delete", "user.update", "token.revoke"]);
    assert_eq!(r.json["entries"][0]["actor"], "admin");
    assert_eq!(r.json["entries"][0]["target"], "bob");
    let next = r.json["next"].as_i64().ok_or_else(|| anyhow::anyhow!("no next cursor: {}", r.text))?;
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/audit?limit=10&before={next}"))).await?;
    let actions: Vec<&str> = r.json["entries"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(actions, vec!["token.create", "user.password", "user.create"]);
    assert_eq!(r.json["next"], serde_json::Value::Null);
    let r = app.send(TestRequest::get().uri("/api/v1/audit"), As::basic("nobody", "x")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    Ok(())
}
app_test!(the_audit_log_pages_newest_first);

/// `packyard-api admin reset-password`'s work: a new password that works at once, the old one
/// refused, the user's web UI sessions ended, an audit entry; no such user is `None`.
async fn reset_password_ends_the_old_one_and_its_sessions(backend: Backend) -> anyhow::Result<()> {
    use packyard_core::security::service::Credentials;
    let Some(t) = TestDb::fresh(backend).await? else { return Ok(()) };
    let services = services(&t).await?;
    let security = &services.security;
    let addr: std::net::IpAddr = "192.0.2.40".parse()?;
    let basic_of = |pw: &str| Credentials::Basic { username: "admin".into(), password: pw.into() };
    let (cookie, _) = security.start_session("admin", common::ADMIN_PW, addr, Duration::from_secs(3600)).await?;
    assert!(security.principal(Some(&Credentials::Session(cookie.clone())), addr).await.is_ok());
    assert!(security.principal(Some(&basic_of(common::ADMIN_PW)), addr).await.is_ok(), "cached now");

    let new =
        security.reset_password("admin", "ops (command line)").await?.ok_or_else(|| anyhow::anyhow!("no admin"))?;
    assert_eq!(new.len(), 24);
    assert_ne!(new, common::ADMIN_PW);
    assert!(security.principal(Some(&basic_of(&new)), addr).await.is_ok());
    assert!(security.principal(Some(&basic_of(common::ADMIN_PW)), addr).await.is_err(), "the old password is refused");
    assert!(security.principal(Some(&Credentials::Session(cookie)), addr).await.is_err(), "the session ended");

    let audit = t.db.list_audit(None, 10).await?;
    let entry =
        audit.iter().find(|e| e.action == "user.password_reset").ok_or_else(|| anyhow::anyhow!("not audited"))?;
    assert_eq!((entry.actor.as_str(), entry.target.as_str()), ("ops (command line)", "admin"));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&entry.detail)?, json!({"sessions_ended": 1}));
    assert!(!entry.detail.contains(&new), "the audit log holds no password");

    assert_eq!(security.reset_password("nobody", "ops").await?, None);
    Ok(())
}
on_every_backend!(reset_password_ends_the_old_one_and_its_sessions);

// --- web UI sessions and password changes -------------------------------------------------------

/// The value of the cookie `name` that a response sets.
fn set_cookie(r: &common::Reply, name: &str) -> Option<String> {
    r.headers.get_all(header::SET_COOKIE).filter_map(|v| v.to_str().ok()).find_map(|v| {
        let (pair, _) = v.split_once(';').unwrap_or((v, ""));
        let (n, value) = pair.split_once('=')?;
        (n == name && !value.is_empty()).then(|| value.to_string())
    })
}

/// The CSRF field of a page.
fn csrf_field(page: &str) -> anyhow::Result<String> {
    let at = page.find("name=\"csrf\" value=\"").ok_or_else(|| anyhow::anyhow!("no CSRF field in {page}"))?;
    let rest = &page[at + "name=\"csrf\" value=\"".len()..];
    Ok(rest[..rest.find('"').unwrap_or(rest.len())].to_string())
}

/// A web UI sign-in through the form: the session cookie.
async fn ui_sign_in(app: &TestApp, user: &str, password: &str) -> anyhow::Result<String> {
    let form = app.call(TestRequest::get().uri("/signin")).await?;
    let anchor = set_cookie(&form, "packyard_csrf").ok_or_else(|| anyhow::anyhow!("no CSRF cookie"))?;
    let csrf = csrf_field(&form.text)?;
    let r = app
        .call(
            TestRequest::post()
                .uri("/signin")
                .insert_header((header::COOKIE, format!("packyard_csrf={anchor}")))
                .set_form([("csrf", csrf.as_str()), ("username", user), ("password", password), ("next", "/")]),
        )
        .await?;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    set_cookie(&r, "packyard_session").ok_or_else(|| anyhow::anyhow!("no session cookie"))
}

/// The tokens page as the holder of `session` sees it: `Some(csrf)` while the session is alive.
async fn session_page(app: &TestApp, session: &str) -> anyhow::Result<Option<String>> {
    let r = app
        .call(
            TestRequest::get()
                .uri("/admin/tokens")
                .insert_header((header::COOKIE, format!("packyard_session={session}"))),
        )
        .await?;
    match r.status {
        StatusCode::OK => Ok(Some(csrf_field(&r.text)?)),
        StatusCode::UNAUTHORIZED => Ok(None),
        other => anyhow::bail!("/admin/tokens answered {other}: {}", r.text),
    }
}

/// Sign-out checks the cookie's secret: a cookie naming another user's session id with a made-up
/// secret ends nothing (before the fix it ended that session).
async fn signing_out_with_a_forged_cookie_ends_nothing(app: TestApp) -> anyhow::Result<()> {
    let victim = ui_sign_in(&app, "admin", common::ADMIN_PW).await?;
    assert!(session_page(&app, &victim).await?.is_some());
    let (id, _) = tokens::parse(&victim).ok_or_else(|| anyhow::anyhow!("not a session token: {victim}"))?;
    let forged = format!("{}{id}_{}", tokens::PREFIX, "0".repeat(48));
    assert!(tokens::parse(&forged).is_some(), "the forged cookie has the token's shape");
    // The forger's own page: an anonymous viewer's CSRF anchor and token.
    let page = app
        .call(TestRequest::get().uri("/signin").insert_header((header::COOKIE, format!("packyard_session={forged}"))))
        .await?;
    let anchor = set_cookie(&page, "packyard_csrf").ok_or_else(|| anyhow::anyhow!("no CSRF cookie"))?;
    let csrf = csrf_field(&page.text)?;
    let r = app
        .call(
            TestRequest::post()
                .uri("/signout")
                .insert_header((header::COOKIE, format!("packyard_session={forged}; packyard_csrf={anchor}")))
                .set_form([("csrf", csrf.as_str())]),
        )
        .await?;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(session_page(&app, &victim).await?.is_some(), "the victim's session survives a forged sign-out");
    // The real cookie signs out.
    let csrf = session_page(&app, &victim).await?.unwrap_or_default();
    let r = app
        .call(
            TestRequest::post()
                .uri("/signout")
                .insert_header((header::COOKIE, format!("packyard_session={victim}")))
                .set_form([("csrf", csrf.as_str())]),
        )
        .await?;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text);
    assert!(session_page(&app, &victim).await?.is_none(), "signed out");
    Ok(())
}
app_test!(signing_out_with_a_forged_cookie_ends_nothing);

/// A password change ends the user's other sessions: from the web UI all but the session it is
/// made from, through the API all of them, and an admin's PUT of the password too.
async fn a_password_change_ends_the_other_sessions(app: TestApp) -> anyhow::Result<()> {
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/users")
                .set_json(json!({"username": "bob", "password": "bob-password-1", "roles": []})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let first = ui_sign_in(&app, "bob", "bob-password-1").await?;
    let second = ui_sign_in(&app, "bob", "bob-password-1").await?;
    let csrf = session_page(&app, &first).await?.ok_or_else(|| anyhow::anyhow!("first session not alive"))?;
    assert!(session_page(&app, &second).await?.is_some());

    // From the first session's page.
    let r = app
        .call(
            TestRequest::post()
                .uri("/admin/password")
                .insert_header((header::COOKIE, format!("packyard_session={first}")))
                .set_form([
                    ("csrf", csrf.as_str()),
                    ("current_password", "bob-password-1"),
                    ("new_password", "bob-password-2"),
                ]),
        )
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(r.text.contains("Your password is changed, and your 1 other session ended."), "{}", r.text);
    assert!(session_page(&app, &first).await?.is_some(), "the session the change came from goes on");
    assert!(session_page(&app, &second).await?.is_none(), "the other session ended with the old password");

    // Through the API with Basic: every session ends.
    let third = ui_sign_in(&app, "bob", "bob-password-2").await?;
    let r = app
        .send(
            TestRequest::put()
                .uri("/api/v1/users/bob/password")
                .set_json(json!({"current_password": "bob-password-2", "new_password": "bob-password-3"})),
            As::basic("bob", "bob-password-2"),
        )
        .await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert!(session_page(&app, &first).await?.is_none());
    assert!(session_page(&app, &third).await?.is_none());

    // An admin setting it (PUT /users/bob): the same.
    let fourth = ui_sign_in(&app, "bob", "bob-password-3").await?;
    let r =
        app.call(TestRequest::put().uri("/api/v1/users/bob").set_json(json!({"password": "bob-password-4"}))).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert!(session_page(&app, &fourth).await?.is_none());
    let audit = app.t.db.list_audit(None, 20).await?;
    let changes: Vec<&str> = audit.iter().filter(|e| e.action == "user.password").map(|e| e.detail.as_str()).collect();
    // Newest first: the API change ended two sessions (the first and the third), the page's one.
    assert_eq!(changes, vec![r#"{"sessions_ended":2}"#, r#"{"sessions_ended":1}"#]);
    Ok(())
}
app_test!(a_password_change_ends_the_other_sessions);

/// The current password of a change is checked through the login throttle: with a stolen token,
/// `login_max_failures` wrong guesses and then 429 — even for the right one — for the delay
/// after the last failure (before the fix: 400 for ever, at argon2 speed).
async fn the_current_password_is_throttled(app: TestApp) -> anyhow::Result<()> {
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/users")
                .set_json(json!({"username": "carol", "password": "carol-password", "roles": []})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app
        .send(
            TestRequest::post().uri("/api/v1/tokens").set_json(json!({"name": "stolen"})),
            As::basic("carol", "carol-password"),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let token = r.json["token"].as_str().unwrap_or_default().to_string();
    let change = |current: &str| {
        TestRequest::put()
            .uri("/api/v1/users/carol/password")
            .set_json(json!({"current_password": current, "new_password": "guessed-it-1"}))
    };
    for i in 0..3 {
        let r = app.send(change(&format!("guess-{i}")), As::Bearer(token.clone())).await?;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert_eq!(error_of(&r.json).1, "current_password is wrong");
    }
    let r = app.send(change("guess-3"), As::Bearer(token.clone())).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert!(r.headers.get(header::RETRY_AFTER).is_some());
    let r = app.send(change("carol-password"), As::Bearer(token.clone())).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "locked out, even with the right password: {}", r.text);
    // The same count as sign-ins: a password guessed with Basic from this address is refused
    // unchecked too (a 429, not a 401).
    let r = app.send(TestRequest::get().uri("/api/v1/tokens"), As::basic("carol", "guess-4")).await?;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    Ok(())
}
app_test!(the_current_password_is_throttled, |c: &mut packyard_model::config::Config| {
    c.security.login_max_failures = 3;
});
