//! The fifth-format test: the test-only sample format (`packyard_formats::sample`), registered
//! like the real ones and touching no generic file, goes every generic way — upload (new,
//! identical retry, refused change), its index published, delete by its own route and by
//! Nexus's API, a group merging members, search, the web UI's pages, cleanup, blob reclamation
//! keeping what its registered columns name — on every backend; and a proxy of it, between two
//! real servers, with a group over the proxy.

use crate::common;

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use packyard_core::reclaim::{self, Verdict};
use packyard_model::repos::Format;
use serde_json::{json, Value};
use sha2::Digest as _;

use common::app::{As, TestApp};
use common::process::{basic, start, status_of};
use common::Repo;

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// An index line of `bytes` at `name/version`.
fn line(name: &str, version: &str, bytes: &[u8]) -> String {
    format!("{name} {version} {} {}\n", sha(bytes), bytes.len())
}

async fn search(app: &TestApp, query: &str) -> anyhow::Result<Vec<Value>> {
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/search?{query}")), As::Admin).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "search {query}: {}", r.text);
    Ok(r.json["items"].as_array().cloned().unwrap_or_default())
}

fn versions(items: &[Value]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().filter_map(|i| i["version"].as_str().map(str::to_string)).collect();
    v.sort();
    v
}

/// A repository of the test-only format is refused unless `debug.test_format` is on, and no
/// list for people names the format.
async fn the_sample_format_needs_the_test_switch(app: TestApp) -> anyhow::Result<()> {
    let body = json!({"name": "files", "format": "sample", "type": "hosted"});
    let r = app.call(TestRequest::post().uri("/api/v1/repositories").set_json(&body)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(
        r.text.contains(
            "format sample is the test-only format: a repository of it is made only with debug.test_format = true"
        ),
        "{}",
        r.text
    );
    let body = json!({"name": "files", "format": "npm", "type": "hosted"});
    let r = app.call(TestRequest::post().uri("/api/v1/repositories").set_json(&body)).await?;
    assert!(r.text.contains("unknown variant `npm`, expected one of `apt`, `apk`, `go`, `conan`"), "{}", r.text);
    // One made while the switch was on is not served once it is off.
    let spec = serde_json::from_value(json!({"name": "made-before", "format": "sample", "type": "hosted"}))?;
    packyard_core::repositories::RepositoryService::new(&app.services.db, packyard_formats::registry())
        .with_test_formats(true)
        .create(spec)
        .await?;
    app.services.changed(packyard_core::events::Changed::Repositories);
    let r = app.put("/repository/made-before/hello/1.0", b"x".to_vec()).await?;
    assert_eq!(
        (r.status, r.text.as_str()),
        (
            StatusCode::NOT_FOUND,
            "repository made-before is of the test-only sample format, served only with debug.test_format = true\n"
        )
    );
    let openapi = app.call(TestRequest::get().uri("/api/v1/openapi.json")).await?;
    assert_eq!(openapi.status, StatusCode::OK);
    assert!(!openapi.text.contains("sample"), "the OpenAPI document offers the test-only format");
    Ok(())
}
app_test!(the_sample_format_needs_the_test_switch);

/// Every generic path with a fifth format.
async fn the_sample_format_goes_every_generic_way(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("files", Format::Sample)).await?;
    app.create(Repo::hosted("more", Format::Sample)).await?;
    app.create(Repo::group("all", Format::Sample, &["files", "more"])).await?;

    // Upload: new (201), an identical retry (200), other bytes at a taken coordinate (409).
    let (one, one_b, two, half, other, tool) = (
        b"hello one".to_vec(),
        b"hello one, again".to_vec(),
        b"hello two".to_vec(),
        b"hello half".to_vec(),
        b"other one".to_vec(),
        b"tool".to_vec(),
    );
    let r = app.put("/repository/files/hello/1.0?wait=true", one.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json, json!({"name": "hello", "version": "1.0", "sha256": sha(&one), "size": one.len()}));
    assert_eq!(app.put("/repository/files/hello/1.0?wait=true", one.clone()).await?.status, StatusCode::OK);
    let r = app.put("/repository/files/hello/1.0?wait=true", one_b).await?;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    for (v, bytes) in [("1.9", &two), ("1.10", &two), ("0.5", &half)] {
        let r = app.put(&format!("/repository/files/hello/{v}?wait=true"), bytes.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let long = format!("{}/1.0", "n".repeat(101));
    for path in ["../1.0", "-x/1.0", "_x/1.0", long.as_str()] {
        let r = app.put(&format!("/repository/files/{path}"), one.clone()).await?;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text);
        assert!(r.text.contains("invalid name"), "{path}: {}", r.text);
    }
    let r = app.put("/repository/files/index.txt", one.clone()).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.text);
    let r = app.put("/repository/files/empty/1.0", Vec::new()).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("the upload is empty: send the file as the request body"), "{}", r.text);
    for (path, bytes) in [("hello/1.0", &other), ("tool/2.0", &tool)] {
        let r = app.put(&format!("/repository/more/{path}?wait=true"), bytes.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }

    // The published index, the files, and the group's merge (the first member's hello/1.0).
    let r = app.get("/repository/files/index.txt").await?;
    let files = [line("hello", "1.0", &one), line("hello", "1.9", &two), line("hello", "1.10", &two)].concat();
    assert_eq!(r.text, [files.as_str(), &line("hello", "0.5", &half)].concat());
    let r = app.get("/repository/files/hello/1.0").await?;
    assert_eq!((r.status, r.bytes), (StatusCode::OK, one.clone()));
    let r = app.get("/repository/files/hello/9.9").await?;
    assert_eq!((r.status, r.text.as_str()), (StatusCode::NOT_FOUND, "not found: hello/9.9 in repository files\n"));
    let merged = [files.clone(), line("hello", "0.5", &half), line("tool", "2.0", &tool)].concat();
    assert_eq!(app.get("/repository/all/index.txt").await?.text, merged);
    assert_eq!(app.get("/repository/all/hello/1.0").await?.bytes, one);
    assert_eq!(app.get("/repository/all/tool/2.0").await?.bytes, tool);

    // Search and the web UI.
    assert_eq!(versions(&search(&app, "repository=files&name=hello").await?), ["0.5", "1.0", "1.10", "1.9"]);
    let found = search(&app, "repository=more&name=tool").await?;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["format"], "sample");
    assert_eq!(found[0]["assets"][0]["path"], "tool/2.0");
    assert_eq!(found[0]["assets"][0]["checksum"]["sha256"], sha(&tool));
    let page = app.send(TestRequest::get().uri("/browse/files"), As::Admin).await?;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("<h1>files <span class=\"badge\">sample</span>"), "{}", page.text);
    assert!(page.text.contains(r#"<a href="/repository/files/index.txt">index.txt</a>"#), "{}", page.text);
    assert!(
        page.text.contains("curl -u USER:TOKEN -T FILE http://localhost:8080/repository/files/NAME/VERSION"),
        "{}",
        page.text
    );
    let id = found[0]["id"].as_str().unwrap_or_default().to_string();
    let page = app.send(TestRequest::get().uri(&format!("/component/{id}")), As::Admin).await?;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("curl -fO $PACKYARD_URL/repository/more/tool/2.0"), "{}", page.text);

    // Delete by the format's route and by Nexus's API: the indexes follow (the group's too).
    let r = app.delete("/repository/files/hello/0.5").await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert_eq!(app.get("/repository/files/hello/0.5").await?.status, StatusCode::NOT_FOUND);
    assert_eq!(app.delete("/repository/files/hello/0.5").await?.status, StatusCode::NOT_FOUND);
    let r = app.send(TestRequest::delete().uri(&format!("/service/rest/v1/components/{id}")), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    settled(&app).await?;
    assert_eq!(app.get("/repository/more/index.txt").await?.text, line("hello", "1.0", &other));
    assert_eq!(app.get("/repository/all/index.txt").await?.text, files);
    assert_eq!(app.get("/repository/all/tool/2.0").await?.status, StatusCode::NOT_FOUND);

    // Cleanup keeps the newest version of each name (in the format's order: 1.10 after 1.9),
    // through the format's delete.
    let policy =
        json!({"name": "keep-one", "format": "sample", "criteria": {"keep_latest": 1}, "repositories": ["files"]});
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies").set_json(&policy)).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/keep-one/run")).await?;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(packyard_core::cleanup::run_due(&app.services, packyard_formats::registry(), "test-worker").await?, 1);
    settled(&app).await?;
    assert_eq!(app.get("/repository/files/index.txt").await?.text, line("hello", "1.10", &two));
    assert_eq!(versions(&search(&app, "repository=files").await?), ["1.10"]);

    // Blob reclamation: what nothing references goes after the grace period; the bytes the
    // format's rows still name stay (its registered column: `FormatSpec::blob_columns`).
    app.stop_worker().await?;
    // Without the catalogue (as before its backfill), only the format's own rows name the
    // bytes it holds.
    for table in ["assets", "component_keywords", "components", "maintenance"] {
        sqlx::query(&format!("DELETE FROM {table}")).execute(app.services.db.pool()).await?;
    }
    let mut freed = Vec::new();
    for _ in 0..2 {
        age(&app, 2 * 86_400_000).await?;
        reclaim::sweep(&app.services, packyard_formats::registry(), false, |b, v| {
            if v == Verdict::Freed {
                freed.push(b.sha256.clone());
            }
        })
        .await?;
    }
    for gone in [sha(&one), sha(&tool), sha(&half)] {
        assert!(freed.contains(&gone), "{gone} not reclaimed: {freed:?}");
    }
    for kept in [sha(&two), sha(&other)] {
        assert!(!freed.contains(&kept), "{kept} is referenced: {freed:?}");
    }
    assert_eq!(app.get("/repository/files/hello/1.10").await?.bytes, two);
    assert_eq!(app.get("/repository/more/hello/1.0").await?.bytes, other);
    // The catalogue's backfill reads the format's rows.
    let registry = packyard_formats::registry();
    let written = packyard_core::catalogue::backfill(&app.services.db, |f| registry.get(f).catalogue()).await?;
    assert_eq!(written, 2);
    let found = search(&app, "repository=files").await?;
    assert_eq!(versions(&found), ["1.10"]);
    assert_eq!(found[0]["assets"][0]["checksum"]["sha256"], sha(&two));
    Ok(())
}
app_test!(the_sample_format_goes_every_generic_way, |c: &mut packyard_model::config::Config| c.debug.test_format =
    true);

/// Until every change is published.
async fn settled(app: &TestApp) -> anyhow::Result<()> {
    for _ in 0..500 {
        if app.services.db.backlog().await?.0 == 0 {
            app.services.published.invalidate();
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    anyhow::bail!("changes still unpublished after 5 s")
}

/// As if `ms` had passed since every blob was stored and found unreferenced.
async fn age(app: &TestApp, ms: i64) -> anyhow::Result<()> {
    sqlx::query(&format!(
        "UPDATE blobs SET created_at = created_at - {ms}, released_at = CASE WHEN released_at IS NULL THEN NULL ELSE released_at - {ms} END"
    ))
    .execute(app.services.db.pool())
    .await?;
    Ok(())
}

/// A proxy of the sample format between two real servers, and a group over it and a hosted
/// repository: the upstream's index and files unchanged (cached after the first read, and
/// catalogued), the group's index merged from both.
#[test]
fn a_sample_proxy_and_a_group_over_it() -> anyhow::Result<()> {
    const PW: &str = "pw";
    let on = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_DEBUG__TEST_FORMAT", "true")];
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &on)?;
    upstream.wait_ready()?;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[on[0], on[1], ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")])?;
    server.wait_ready()?;
    let create = |base: &str, repo: Repo| -> anyhow::Result<()> {
        let r = ureq::post(&format!("{base}/api/v1/repositories")).set("Authorization", &basic(PW)).send_json(repo.0);
        let (s, body) = status_of(r)?;
        anyhow::ensure!(s == 201, "{s} {body}");
        Ok(())
    };
    let put = |base: &str, path: &str, bytes: &[u8]| -> anyhow::Result<()> {
        let r = ureq::put(&format!("{base}/repository/{path}?wait=true"))
            .set("Authorization", &basic(PW))
            .send_bytes(bytes);
        let (s, body) = status_of(r)?;
        anyhow::ensure!(s == 201, "{s} {body}");
        Ok(())
    };
    let get = |base: &str, path: &str| -> anyhow::Result<(u16, Option<String>, Vec<u8>)> {
        match ureq::get(&format!("{base}/repository/{path}")).call() {
            Ok(r) | Err(ureq::Error::Status(_, r)) => {
                let (status, cache) = (r.status(), r.header("x-packyard-cache").map(str::to_string));
                let mut body = Vec::new();
                std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
                Ok((status, cache, body))
            }
            Err(e) => Err(e.into()),
        }
    };
    create(&upstream.public, Repo::hosted("up", Format::Sample))?;
    put(&upstream.public, "up/lib/1.0", b"upstream lib")?;
    put(&upstream.public, "up/shared/1.0", b"upstream shared")?;
    create(&server.public, Repo::proxy("mirror", Format::Sample, &format!("{}/repository/up/", upstream.public)))?;
    create(&server.public, Repo::hosted("local", Format::Sample))?;
    put(&server.public, "local/shared/1.0", b"local shared")?;
    create(&server.public, Repo::group("all", Format::Sample, &["local", "mirror"]))?;

    let (_, _, up_index) = get(&upstream.public, "up/index.txt")?;
    assert_eq!(
        up_index,
        [line("lib", "1.0", b"upstream lib"), line("shared", "1.0", b"upstream shared")].concat().into_bytes()
    );
    let (s, _, index) = get(&server.public, "mirror/index.txt")?;
    assert_eq!((s, index), (200, up_index));
    assert_eq!(get(&server.public, "mirror/lib/1.0")?, (200, Some("miss".into()), b"upstream lib".to_vec()));
    assert_eq!(get(&server.public, "mirror/lib/1.0")?, (200, Some("hit".into()), b"upstream lib".to_vec()));
    let (s, _, body) = get(&server.public, "mirror/lib/9.9")?;
    assert_eq!(s, 404, "{}", String::from_utf8_lossy(&body));

    // The group: the local shared/1.0 first, the upstream's lib/1.0 from the proxy.
    let want = [line("shared", "1.0", b"local shared"), line("lib", "1.0", b"upstream lib")].concat();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (s, _, body) = get(&server.public, "all/index.txt")?;
        if (s, body.as_slice()) == (200, want.as_bytes()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the group's index: {s} {}", String::from_utf8_lossy(&body));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(get(&server.public, "all/shared/1.0")?.2, b"local shared");
    assert_eq!(get(&server.public, "all/lib/1.0")?.2, b"upstream lib");

    // The proxied file is catalogued.
    let r = ureq::get(&format!("{}/service/rest/v1/search?repository=mirror", server.public))
        .set("Authorization", &basic(PW))
        .call()?;
    let found: Value = r.into_json()?;
    assert_eq!(found["items"][0]["name"], "lib", "{found}");
    assert_eq!(found["items"][0]["assets"][0]["checksum"]["sha256"], sha(b"upstream lib"), "{found}");
    assert!(server.terminate()?.success());
    assert!(upstream.terminate()?.success());
    Ok(())
}
