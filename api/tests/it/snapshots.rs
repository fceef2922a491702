//! A repository's snapshots (#42): made by API for every format, served read-only under
//! `/repository/<name>/-/snapshots/<snapshot>/` with the index set and the files as they were,
//! found by time under `-/at/<time>/`, compared by component, and deleted; the blobs a
//! snapshot lists outlive the components' deletion until the snapshot goes. Each on SQLite,
//! PostgreSQL and MariaDB.

use crate::common;

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use packyard_core::reclaim::{self, Verdict};
use packyard_model::repos::Format;
use serde_json::{json, Value};
use sha2::Digest as _;

use common::app::TestApp;
use common::Repo;

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn deb(version: &str) -> Vec<u8> {
    let control = format!(
        "Package: hello\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
    );
    packyard_codecs::apt::testing::deb(&control, ".gz")
}

fn md5(b: &[u8]) -> String {
    hex::encode(<md5::Md5 as md5::Digest>::digest(b))
}

async fn ok(app: &TestApp, path: &str) -> anyhow::Result<Vec<u8>> {
    let r = app.get(path).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "GET {path}: {} {}", r.status, r.text);
    Ok(r.bytes)
}

async fn put(app: &TestApp, path: &str, body: &[u8]) -> anyhow::Result<()> {
    let r = app.put(path, body.to_vec()).await?;
    anyhow::ensure!(r.status.is_success(), "PUT {path}: {} {}", r.status, r.text);
    Ok(())
}

/// A Conan recipe revision `rrev` of `kept/1.0` with one binary package.
async fn conan_revision(app: &TestApp, rrev: &str, comment: &str) -> anyhow::Result<String> {
    let conanfile = format!("from conan import ConanFile\n# {comment}\n");
    let recipe = format!("/repository/conans/v2/conans/kept/1.0/_/_/revisions/{rrev}");
    let conaninfo = "[settings]\nos=Linux\n";
    let package = format!("{recipe}/packages/p1/revisions/p1r");
    put(app, &format!("{recipe}/files/conanfile.py"), conanfile.as_bytes()).await?;
    let manifest = format!("1\nconanfile.py: {}\n", md5(conanfile.as_bytes()));
    put(app, &format!("{recipe}/files/conanmanifest.txt"), manifest.as_bytes()).await?;
    put(app, &format!("{package}/files/conaninfo.txt"), conaninfo.as_bytes()).await?;
    let manifest = format!("1\nconaninfo.txt: {}\n", md5(conaninfo.as_bytes()));
    put(app, &format!("{package}/files/conanmanifest.txt"), manifest.as_bytes()).await?;
    Ok(conanfile)
}

async fn snapshot(app: &TestApp, repo: &str, body: Value) -> anyhow::Result<common::Reply> {
    app.call(TestRequest::post().uri(&format!("/api/v1/repositories/{repo}/snapshots")).set_json(body)).await
}

async fn made(app: &TestApp, repo: &str, body: Value) -> anyhow::Result<Value> {
    let r = snapshot(app, repo, body).await?;
    anyhow::ensure!(r.status == StatusCode::CREATED, "snapshot of {repo}: {} {}", r.status, r.text);
    Ok(r.json)
}

async fn sweep(app: &TestApp) -> anyhow::Result<Vec<String>> {
    let mut freed = Vec::new();
    reclaim::sweep(&app.services, packyard_formats::registry(), false, |b, v| {
        if v == Verdict::Freed {
            freed.push(b.sha256.clone());
        }
    })
    .await?;
    Ok(freed)
}

/// As if two days had passed since every blob was stored and found unreferenced.
async fn age(app: &TestApp) -> anyhow::Result<()> {
    let ms = 2 * 86_400_000;
    sqlx::query(&format!(
        "UPDATE blobs SET created_at = created_at - {ms}, released_at = CASE WHEN released_at IS NULL THEN NULL ELSE released_at - {ms} END"
    ))
    .execute(app.services.db.pool())
    .await?;
    Ok(())
}

async fn snapshots_of_every_format(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    for (name, format) in
        [("debs", Format::Apt), ("apks", Format::Apk), ("mods", Format::Go), ("conans", Format::Conan)]
    {
        app.create(Repo::hosted(name, format)).await?;
    }
    app.create(Repo::group("all-debs", Format::Apt, &["debs"])).await?;

    // Version one of each.
    let (deb1, deb2) = (deb("1.0"), deb("1.1"));
    let r = app.post("/repository/debs/?wait=true", deb1.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let apk1 = packyard_codecs::apk::testing::sized_apk("kept", "1.0-r0", "x86_64", 4 << 10, 1)?;
    put(&app, "/repository/apks/v3.20/main/x86_64/kept-1.0-r0.apk?wait=true", &apk1.bytes).await?;
    let zip1 = packyard_codecs::go::testing::simple_module("example.com/kept", "v1.0.0", "one", 100)?;
    put(&app, "/repository/mods/example.com/kept/@v/v1.0.0.zip", &zip1).await?;
    let conanfile1 = conan_revision(&app, "r1", "one").await?;
    app.publish().await;

    // What clients see now, to compare with the snapshot later.
    let packages = "dists/stable/main/binary-amd64/Packages";
    let apkindex = "v3.20/main/x86_64/APKINDEX.tar.gz";
    let in_release = ok(&app, "/repository/debs/dists/stable/InRelease").await?;
    let group_in_release = ok(&app, "/repository/all-debs/dists/stable/InRelease").await?;
    let index1 = ok(&app, &format!("/repository/apks/{apkindex}")).await?;
    let mut before = std::collections::BTreeMap::new();
    for repo in ["debs", "apks", "mods", "conans", "all-debs"] {
        let s = made(&app, repo, json!({"name": "before"})).await?;
        assert_eq!(s["name"], "before");
        let url = s["url"].as_str().unwrap_or_default();
        assert!(url.ends_with(&format!("/repository/{repo}/-/snapshots/before/")), "{s}");
        assert!(s["files"].as_i64().unwrap_or(0) >= 2, "{s}");
        before.insert(repo, s);
    }

    // Version two of each.
    let r = app.post("/repository/debs/?wait=true", deb2.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let apk2 = packyard_codecs::apk::testing::sized_apk("kept", "1.1-r0", "x86_64", 4 << 10, 2)?;
    put(&app, "/repository/apks/v3.20/main/x86_64/kept-1.1-r0.apk?wait=true", &apk2.bytes).await?;
    let zip2 = packyard_codecs::go::testing::simple_module("example.com/kept", "v1.1.0", "two", 100)?;
    put(&app, "/repository/mods/example.com/kept/@v/v1.1.0.zip", &zip2).await?;
    conan_revision(&app, "r2", "two").await?;
    app.publish().await;
    // Named by time when no name is given.
    let after = made(&app, "debs", json!({})).await?;
    let after_name = after["name"].as_str().unwrap_or_default().to_string();
    assert!(
        after_name.len() == 16 && after_name.starts_with("20") && after_name.ends_with('Z'),
        "a name of the time: {after}"
    );

    // The current indexes moved on; the snapshots did not.
    let current = String::from_utf8(ok(&app, &format!("/repository/debs/{packages}")).await?)?;
    assert!(current.contains("Version: 1.1\n"), "{current}");
    let snap = |repo: &str, path: &str| format!("/repository/{repo}/-/snapshots/before/{path}");
    let listed = String::from_utf8(ok(&app, &snap("debs", packages)).await?)?;
    assert!(listed.contains("Version: 1.0\n") && !listed.contains("Version: 1.1\n"), "{listed}");
    assert_eq!(ok(&app, &snap("debs", "dists/stable/InRelease")).await?, in_release, "the signed index as it was");
    assert_eq!(ok(&app, &snap("all-debs", "dists/stable/InRelease")).await?, group_in_release);
    let pool1 = "pool/main/h/hello/hello_1.0_amd64.deb";
    assert_eq!(sha(&ok(&app, &snap("debs", pool1)).await?), sha(&deb1));
    assert_eq!(sha(&ok(&app, &snap("all-debs", pool1)).await?), sha(&deb1), "a group's members' files");
    let r = app.get(&snap("debs", "pool/main/h/hello/hello_1.1_amd64.deb")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "not there then: {}", r.text);
    assert!(r.text.contains("is not in snapshot before of repository debs"), "{}", r.text);
    // Every form and by-hash file the snapshot's Release lists is there, with its hash.
    let release = String::from_utf8(ok(&app, &snap("debs", "dists/stable/Release")).await?)?;
    let sha256_section = release.split("SHA256:\n").nth(1).unwrap_or_default();
    let mut checked = 0;
    for line in sha256_section.lines().take_while(|l| l.starts_with(' ')) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let (hash, path) = (parts[0], parts[2]);
        let bytes = ok(&app, &snap("debs", &format!("dists/stable/{path}"))).await?;
        assert_eq!(sha(&bytes), hash, "{path}");
        checked += 1;
    }
    assert!(checked >= 3, "{release}");

    // APK: the signed index as it was, and its package.
    assert_eq!(ok(&app, &snap("apks", apkindex)).await?, index1);
    assert_ne!(ok(&app, &format!("/repository/apks/{apkindex}")).await?, index1);
    assert_eq!(ok(&app, &snap("apks", "v3.20/main/x86_64/kept-1.0-r0.apk")).await?, apk1.bytes);
    assert_eq!(app.get(&snap("apks", "v3.20/main/x86_64/kept-1.1-r0.apk")).await?.status, StatusCode::NOT_FOUND);

    // Go: the version list and @latest as they were, the module's files.
    assert_eq!(ok(&app, &snap("mods", "example.com/kept/@v/list")).await?, b"v1.0.0\n");
    let latest: Value = serde_json::from_slice(&ok(&app, &snap("mods", "example.com/kept/@latest")).await?)?;
    assert_eq!(latest["Version"], "v1.0.0");
    assert_eq!(ok(&app, &snap("mods", "example.com/kept/@v/v1.0.0.zip")).await?, zip1);
    assert!(!ok(&app, &snap("mods", "example.com/kept/@v/v1.0.0.mod")).await?.is_empty());
    assert_eq!(ok(&app, "/repository/mods/example.com/kept/@v/list").await?, b"v1.0.0\nv1.1.0\n");

    // Conan: the revision that was latest, and its files.
    let conan = "v2/conans/kept/1.0/_/_";
    let latest: Value = serde_json::from_slice(&ok(&app, &snap("conans", &format!("{conan}/latest"))).await?)?;
    assert_eq!(latest["revision"], "r1");
    let now: Value = serde_json::from_slice(&ok(&app, &format!("/repository/conans/{conan}/latest")).await?)?;
    assert_eq!(now["revision"], "r2");
    let file = ok(&app, &snap("conans", &format!("{conan}/revisions/r1/files/conanfile.py"))).await?;
    assert_eq!(file, conanfile1.as_bytes());
    let r = app.get(&snap("conans", "v1/ping")).await?;
    assert_eq!(r.status, StatusCode::OK, "the ping answers under a snapshot: {}", r.text);

    // The diff, by component.
    let r = app
        .call(TestRequest::get().uri(&format!("/api/v1/repositories/debs/snapshots/before/diff?to={after_name}")))
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["added"], json!([{"name": "hello", "version": "1.1"}]), "{}", r.text);
    assert_eq!((r.json["removed"].clone(), r.json["changed"].clone()), (json!([]), json!([])), "{}", r.text);

    // By time: the newest snapshot made then; none before the first.
    let list = app.call(TestRequest::get().uri("/api/v1/repositories/debs/snapshots")).await?;
    let names: Vec<&str> =
        list.json.as_array().map(|a| a.iter().filter_map(|s| s["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, [after_name.as_str(), "before"], "newest first: {}", list.text);
    let then = before["debs"]["created_at"].as_str().unwrap_or_default().to_string();
    let at = |t: &str, path: &str| format!("/repository/debs/-/at/{t}/{path}");
    assert_eq!(ok(&app, &at(&then, "dists/stable/InRelease")).await?, in_release);
    let created = packyard_model::time::parse_rfc3339(&then).unwrap_or_default();
    let earlier = packyard_model::time::rfc3339_ms(created - 60_000);
    let r = app.get(&at(&earlier, "dists/stable/InRelease")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert!(r.text.contains("no snapshot made at or before"), "{}", r.text);
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/debs/snapshots?at={then}"))).await?;
    assert_eq!(r.json["name"], "before", "{}", r.text);

    // What is refused, with a message to act on.
    let r = snapshot(&app, "debs", json!({"name": "before"})).await?;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(r.text.contains("has a snapshot \\\"before\\\" already"), "{}", r.text);
    let r = snapshot(&app, "debs", json!({"name": "../x"})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("segment of the snapshot's URL"), "{}", r.text);
    let r = app.put(&snap("debs", pool1), deb1.clone()).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "read-only: {}", r.text);
    assert_eq!(app.get(&snap("debs", ".units/apt/stable/.members")).await?.status, StatusCode::NOT_FOUND);
    let r = app.get("/repository/debs/-/snapshots/nope/dists/stable/InRelease").await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.text.contains("repository debs has no snapshot \"nope\""), "{}", r.text);

    // Deleted from the repository, collected: the snapshot still has its bytes.
    let r = app.delete(&format!("/repository/debs/{pool1}")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = app.delete("/repository/mods/example.com/kept/@v/v1.0.0.zip").await?;
    assert!(r.status.is_success(), "{} {}", r.status, r.text);
    app.publish().await;
    // (The group's snapshot lists it too: delete that one first.)
    let r = app.call(TestRequest::delete().uri("/api/v1/repositories/all-debs/snapshots/before")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    sweep(&app).await?;
    age(&app).await?;
    let freed = sweep(&app).await?;
    assert!(!freed.contains(&sha(&deb1)) && !freed.contains(&sha(&zip1)), "kept for the snapshot: {freed:?}");
    assert_eq!(sha(&ok(&app, &snap("debs", pool1)).await?), sha(&deb1));
    assert_eq!(ok(&app, &snap("mods", "example.com/kept/@v/v1.0.0.zip")).await?, zip1);
    assert_eq!(app.get(&format!("/repository/debs/{pool1}")).await?.status, StatusCode::NOT_FOUND);

    // The snapshot deleted: its URL is a 404 at once, and the collector frees what it kept.
    let r = app.call(TestRequest::delete().uri("/api/v1/repositories/debs/snapshots/before")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert_eq!(app.get(&snap("debs", pool1)).await?.status, StatusCode::NOT_FOUND);
    let r = app.call(TestRequest::delete().uri("/api/v1/repositories/mods/snapshots/before")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    sweep(&app).await?;
    age(&app).await?;
    let freed = sweep(&app).await?;
    assert!(freed.contains(&sha(&zip1)), "{freed:?}");
    assert!(!freed.contains(&sha(&deb1)), "the later snapshot lists hello 1.0 too: {freed:?}");
    let r = app.call(TestRequest::delete().uri(&format!("/api/v1/repositories/debs/snapshots/{after_name}"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    sweep(&app).await?;
    age(&app).await?;
    assert_eq!(sweep(&app).await?, [sha(&deb1)]);

    // Audited.
    let r = app.call(TestRequest::get().uri("/api/v1/audit?action=snapshot.create")).await?;
    assert!(r.text.contains("\"before\""), "{}", r.text);
    Ok(())
}
app_test!(snapshots_of_every_format);
