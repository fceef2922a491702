//! Wave 2's loose ends (#44): honest statuses when the database is busy, `Last-Modified` never
//! ahead of the clock, and what the API says of itself.

use std::time::{Duration, SystemTime};

use actix_web::test::TestRequest;
use packyard_model::repos::Format;
use packyard_store::db::Backend;

use crate::common::app::TestApp;
use crate::common::Repo;

/// Another writer holds the database past its time-outs — SQLite's one writer lock beyond
/// `busy_timeout_ms`, a row lock beyond `statement_timeout_ms` on PostgreSQL and MariaDB: an
/// upload and an administrator's change each get a 503 with `Retry-After` (a 500 before #44),
/// and nothing of the upload is kept; once the writer is done the same upload goes in.
async fn a_busy_database_answers_503_with_retry_after(mut app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("mods", Format::Go)).await?;
    let db = &app.services.db;
    let zip = packyard_codecs::go::testing::simple_module("example.com/busy", "v1.0.0", "busy", 0)?;
    let upload = "/repository/mods/example.com/busy/@v/v1.0.0.zip";
    let files = app.blob_files();
    let mut holder = db.begin().await?;
    if db.backend() != Backend::Sqlite {
        // The row an upload's foreign keys and a change of the repository both need.
        sqlx::query("SELECT id FROM repositories WHERE name = 'mods' FOR UPDATE").fetch_all(&mut *holder).await?;
    }
    let busy = [
        ("upload", app.put(upload, zip.clone()).await?),
        (
            "change",
            app.call(
                TestRequest::patch()
                    .uri("/api/v1/repositories/mods")
                    .insert_header(("content-type", "application/merge-patch+json"))
                    .set_payload(r#"{"anonymous_read": false}"#),
            )
            .await?,
        ),
    ];
    for (what, r) in &busy {
        assert_eq!(r.status, 503, "{what}: {}", r.text);
        assert_eq!(r.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"), "{what}");
        assert!(r.text.contains("temporarily unavailable; retry shortly"), "{what}: {}", r.text);
    }
    assert!(!app.has_blob_row(&zip).await?, "the refused upload left a blob row");
    holder.rollback().await?;
    // Bytes whose row could not be written (SQLite refused the row itself) are stray: the
    // store scan takes them, and the store holds what it held before.
    packyard_core::reclaim::sweep_strays(&app.services, false, |_, _| {}).await?;
    assert_eq!(app.blob_files(), files, "the refused upload left its bytes");
    app.start_worker();
    let r = app.put(upload, zip.clone()).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    assert!(app.has_blob_row(&zip).await?);
    Ok(())
}
app_test!(a_busy_database_answers_503_with_retry_after, |c: &mut packyard_model::config::Config| {
    c.worker.blob_grace_secs = 0;
    c.database.busy_timeout_ms = 300;
    c.database.statement_timeout_ms = 500;
});

/// A burst of 20 publications of one unit, faster than one a second: no answer carries a
/// `Last-Modified` ahead of the clock (nor of its own `Date`), every copy from before the last
/// publication is answered with the file when asked `If-Modified-Since` its date, and once the
/// clock reaches the last snapshot's second its own date is answered 304. Before #44 each
/// publication of the burst dated itself a second later than the one before, ahead of the clock.
async fn a_burst_of_publications_never_dates_the_future(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("burst", Format::Apt)).await?;
    let packages = "/repository/burst/dists/stable/main/binary-amd64/Packages";
    let date_of = |r: &crate::common::Reply, name: &str| -> anyhow::Result<SystemTime> {
        let text = r.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let date: actix_web::http::header::HttpDate =
            text.parse().map_err(|e| anyhow::anyhow!("{name} {text:?}: {e}"))?;
        Ok(SystemTime::from(date))
    };
    let started = std::time::Instant::now();
    let mut copies = Vec::new();
    for i in 0..20 {
        let control = format!("Package: burst{i}\nVersion: 1\nArchitecture: amd64\nDescription: burst {i}\n");
        let r = app.post("/repository/burst/", packyard_codecs::apt::testing::deb(&control, ".gz")).await?;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(app.publish().await, 1, "publication {i}");
        let r = app.get(packages).await?;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.text.contains(&format!("Package: burst{i}\n")), "{}", r.text);
        let modified = date_of(&r, "last-modified")?;
        assert!(modified <= SystemTime::now(), "publication {i}: Last-Modified {modified:?} is ahead of the clock");
        // (A test request has a `Date` only where the answer sets one itself.)
        if r.headers.contains_key("date") {
            assert!(modified <= date_of(&r, "date")?, "publication {i}: Last-Modified is after Date: {:?}", r.headers);
        }
        copies.push((r.headers.get("last-modified").cloned(), r.text));
    }
    // The burst took less than the seconds it published: its snapshots' own seconds ran ahead.
    assert!(started.elapsed() < Duration::from_secs(15), "the burst took {:?}", started.elapsed());
    let last = copies.last().map(|(_, text)| text.clone()).unwrap_or_default();
    let ask = |since: &actix_web::http::header::HeaderValue| {
        TestRequest::get().uri(packages).insert_header(("if-modified-since", since.clone()))
    };
    for (i, (since, text)) in copies.iter().enumerate().take(19) {
        let Some(since) = since else { anyhow::bail!("copy {i} had no Last-Modified") };
        assert_ne!(text, &last);
        let r = app.send(ask(since), crate::common::app::As::Anonymous).await?;
        assert_eq!(r.status, 200, "the copy of publication {i} ({since:?}) is not the last");
        assert_eq!(r.text, last);
    }
    // Once no replica may still serve the predecessor (the publication's second, plus the
    // watermark's staleness, plus one: 2 s), the current second sent tells the last snapshot
    // from every earlier copy: a copy of that date is answered 304, though the snapshot's own
    // second may still be ahead.
    let (stored, published): (i64, i64) = {
        let db = &app.services.db;
        let u = db.units_of(db.repository_by_name("burst").await?.map_or(0, |r| r.id)).await?;
        let Some(u) = u.into_iter().find(|u| u.kind == "apt") else { anyhow::bail!("no apt unit") };
        (u.modified_at.unwrap_or_default(), u.last_published_at.unwrap_or_default())
    };
    assert!(stored > published, "the burst dated its last snapshot ahead of its publication");
    let settled = published - published.rem_euclid(1000) + 2_000;
    let wait = settled - packyard_store::db::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
    }
    let r = app.get(packages).await?;
    let Some(since) = r.headers.get("last-modified").cloned() else { anyhow::bail!("no Last-Modified") };
    assert!(date_of(&r, "last-modified")? <= SystemTime::now());
    let r = app.send(ask(&since), crate::common::app::As::Anonymous).await?;
    assert_eq!(r.status, 304, "{since:?}: {:?}", r.headers);
    // Once the clock reaches the last snapshot's own second, that second is its date, and a
    // copy of that date is answered 304.
    let wait = stored + 1_000 - packyard_store::db::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
    }
    let r = app.get(packages).await?;
    let modified = date_of(&r, "last-modified")?;
    assert_eq!(modified, SystemTime::UNIX_EPOCH + Duration::from_millis(stored.unsigned_abs()), "{:?}", r.headers);
    let Some(since) = r.headers.get("last-modified").cloned() else { anyhow::bail!("no Last-Modified") };
    let r = app.send(ask(&since), crate::common::app::As::Anonymous).await?;
    assert_eq!(r.status, 304, "{:?}", r.headers);
    // The copies from the burst are still answered with the file.
    let Some(Some(first)) = copies.first().map(|(since, _)| since.clone()) else { anyhow::bail!("no first copy") };
    let r = app.send(ask(&first), crate::common::app::As::Anonymous).await?;
    assert_eq!(r.status, 200);
    Ok(())
}
app_test!(a_burst_of_publications_never_dates_the_future);

/// The routes of the admin API (`/api/v1`) and of Nexus's (`/service/rest/v1`), as their
/// sources declare them: each `resource("…")` of `api/src/admin/`, `api/src/nexus/` and the
/// read-only switch, with its scope's prefix.
fn declared_routes() -> anyhow::Result<std::collections::BTreeSet<String>> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![(src.join("nexus.rs"), "/service/rest/v1"), (src.join("read_only.rs"), "/service/rest/v1")];
    for (dir, prefix) in [("admin", "/api/v1"), ("nexus", "/service/rest/v1")] {
        for entry in std::fs::read_dir(src.join(dir))? {
            files.push((entry?.path(), prefix));
        }
    }
    let mut routes = std::collections::BTreeSet::new();
    for (file, prefix) in files {
        let text = std::fs::read_to_string(&file)?;
        for (at, _) in text.match_indices("resource(\"") {
            let rest = &text[at + "resource(\"".len()..];
            let Some(end) = rest.find('"') else { anyhow::bail!("{}: an unterminated path", file.display()) };
            routes.insert(format!("{prefix}{}", &rest[..end]));
        }
    }
    Ok(routes)
}

/// Every route of the admin and Nexus APIs is in the OpenAPI document with exactly the methods
/// it takes, and the document lists nothing else under those prefixes. Which methods a route
/// takes is asked of the server itself (anonymously, with names that do not exist: nothing
/// changes): a method it does not take is answered 405. Before #44 the cleanup policies' `run`
/// and `runs` were missing.
/// (The routes are the same whatever the database: SQLite alone.)
#[actix_web::test]
async fn the_openapi_document_lists_every_route() -> anyhow::Result<()> {
    use crate::common::app::As;
    let Some(app) = TestApp::new(Backend::Sqlite).await? else { return Ok(()) };
    let r = app.get("/api/v1/openapi.json").await?;
    assert_eq!(r.status, 200, "{}", r.text);
    let Some(paths) = r.json["paths"].as_object() else { anyhow::bail!("no paths in {}", r.text) };
    let routes = declared_routes()?;
    assert!(routes.len() > 60, "{routes:?}");
    // A method no route takes is a 405 anonymously too (no sign-in is asked first).
    let r = app.send(TestRequest::patch().uri("/api/v1/audit"), As::Anonymous).await?;
    assert_eq!(r.status, 405, "{}", r.text);
    let mut wrong = Vec::new();
    for route in &routes {
        let uri: String = route
            .split('/')
            .map(|s| if s.starts_with('{') { format!("no-such-{}", s.trim_matches(['{', '}'])) } else { s.to_string() })
            .collect::<Vec<_>>()
            .join("/");
        let Some(documented) = paths.get(route.as_str()).and_then(|p| p.as_object()) else {
            wrong.push(format!("{route}: not in the document"));
            continue;
        };
        for method in ["get", "post", "put", "patch", "delete"] {
            let req = TestRequest::default().method(method.to_uppercase().parse()?).uri(&uri);
            let r = app.send(req, As::Anonymous).await?;
            let routed = r.status != 405;
            if routed != documented.contains_key(method) {
                let listed = documented.contains_key(method);
                wrong.push(format!("{method} {route}: routed {routed} ({}), documented {listed}", r.status));
            }
        }
    }
    for path in paths.keys() {
        if (path.starts_with("/api/v1/") || path.starts_with("/service/rest/v1/")) && !routes.contains(path) {
            wrong.push(format!("{path}: documented, not routed"));
        }
    }
    assert!(wrong.is_empty(), "the OpenAPI document and the routes differ:\n{}", wrong.join("\n"));
    app.finish().await
}

/// A cleanup run counts what it removed: a component another delete removed after the run
/// selected it is neither in its count nor in its bytes (#44: its bytes were counted).
async fn a_cleanup_run_counts_only_what_it_removed(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("mods", Format::Go)).await?;
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/lib", v, v, 200)?;
        let r = app.put(&format!("/repository/mods/example.com/lib/@v/{v}.zip"), zip).await?;
        assert_eq!(r.status, 201, "{v}: {}", r.text);
    }
    let r = app.get("/service/rest/v1/search/assets?repository=mods&version=v1.1.0").await?;
    let kept_bytes: i64 = r.json["items"].as_array().into_iter().flatten().filter_map(|a| a["fileSize"].as_i64()).sum();
    assert!(kept_bytes > 200, "{}", r.text);
    let policy = serde_json::json!({"name": "keep-one", "format": "go", "criteria": {"keep_latest": 1}, "repositories": ["mods"]});
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies").set_json(&policy)).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/keep-one/run")).await?;
    assert_eq!(r.status, 202, "{}", r.text);
    // The run selects v1.0.0 and v1.1.0; before it deletes them, v1.0.0 is deleted by hand.
    let gate = packyard_store::pause::arm("cleanup.selected");
    let registry = packyard_formats::registry();
    let (ran, by_hand) = tokio::join!(packyard_core::cleanup::run_due(&app.services, registry, "test-worker"), async {
        gate.reached().await;
        packyard_store::pause::disarm("cleanup.selected");
        let r = app.delete("/repository/mods/example.com/lib/@v/v1.0.0.zip").await;
        gate.release();
        r
    });
    assert_eq!(ran?, 1);
    assert_eq!(by_hand?.status, 204);
    let r = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/keep-one/runs")).await?;
    let run = &r.json["items"][0];
    assert_eq!((run["components"].as_i64(), run["bytes"].as_i64()), (Some(1), Some(kept_bytes)), "{}", r.text);
    // Once the run's change is published, one version is left.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = app.get("/repository/mods/example.com/lib/@v/list").await?;
        if r.text == "v1.2.0\n" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
app_test!(a_cleanup_run_counts_only_what_it_removed);

/// An upload to the S3 store asks the bucket once whether its bytes are there (the check that a
/// collector did not take them meanwhile), not twice: the write itself makes no HEAD (#44: one
/// before every write, to tell whether the key was new); the same bytes uploaded into a second
/// repository are known from their row instead.
async fn uploads_to_s3_ask_the_bucket_once(backend: Backend) -> anyhow::Result<()> {
    let Ok(url) = std::env::var("TEST_S3_URL") else {
        eprintln!("skipped: TEST_S3_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let bucket = format!("packyard-heads-{}", hex::encode(rand::random::<[u8; 4]>()));
    packyard_store::blobs::s3::create_test_bucket(&url, &bucket).await?;
    let Some(app) = TestApp::with_config(backend, |c| {
        c.blobs.kind = packyard_model::config::BlobsKind::S3;
        c.blobs.s3 = packyard_model::config::S3Config {
            bucket: Some(bucket),
            endpoint: Some(url.trim_end_matches('/').to_string()),
            region: Some("us-east-1".into()),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
        };
    })
    .await?
    else {
        return Ok(());
    };
    let control = "Package: twice\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n";
    let deb = packyard_codecs::apt::testing::deb(control, ".gz");
    let heads = || app.services.metrics.blob_s3_requests_total.with_label_values(&["head"]).get();
    for name in ["first", "second"] {
        app.create(Repo::hosted(name, Format::Apt)).await?;
    }
    let before = heads();
    for name in ["first", "second"] {
        let r = app.post(&format!("/repository/{name}/"), deb.clone()).await?;
        assert_eq!(r.status, 201, "{name}: {}", r.text);
    }
    assert_eq!(heads() - before, 2, "one HEAD per upload: the check after its row is written");
    app.publish().await;
    let r = app.get("/repository/first/pool/main/t/twice/twice_1.0_amd64.deb").await?;
    assert_eq!((r.status.as_u16(), r.bytes.len()), (200, deb.len()));
    app.finish().await
}

#[actix_web::test]
async fn uploads_to_s3_ask_the_bucket_once_on_sqlite() -> anyhow::Result<()> {
    uploads_to_s3_ask_the_bucket_once(Backend::Sqlite).await
}

#[actix_web::test]
async fn uploads_to_s3_ask_the_bucket_once_on_postgres() -> anyhow::Result<()> {
    uploads_to_s3_ask_the_bucket_once(Backend::Postgres).await
}

#[actix_web::test]
async fn uploads_to_s3_ask_the_bucket_once_on_mysql() -> anyhow::Result<()> {
    uploads_to_s3_ask_the_bucket_once(Backend::MySql).await
}
