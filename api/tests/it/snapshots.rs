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
async fn conan_revision(app: &TestApp, repo: &str, rrev: &str, comment: &str) -> anyhow::Result<String> {
    let conanfile = format!("from conan import ConanFile\n# {comment}\n");
    let recipe = format!("/repository/{repo}/v2/conans/kept/1.0/_/_/revisions/{rrev}");
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
    let conanfile1 = conan_revision(&app, "conans", "r1", "one").await?;
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
    conan_revision(&app, "conans", "r2", "two").await?;
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
    assert_eq!(r.json["added"], json!([{"group": "main", "name": "hello", "version": "1.1"}]), "{}", r.text);
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
    // Seconds optional, a minute after the snapshot (and before the next).
    let minute = packyard_model::time::rfc3339_ms(created + 60_000);
    let (date_time, _) = minute.split_at(16);
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/debs/snapshots?at={date_time}Z"))).await?;
    let after_made =
        packyard_model::time::parse_rfc3339(after["created_at"].as_str().unwrap_or_default()).unwrap_or_default();
    let expected = if after_made <= created - created % 60_000 + 60_000 { after_name.as_str() } else { "before" };
    assert_eq!(r.json["name"], expected, "{}", r.text);

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

/// Snapshots on a schedule (`snapshots.every_secs`), one per period whoever runs the schedule,
/// named by the period's start; the newest `keep` scheduled ones kept, a snapshot made on
/// request never deleted by it. A repository that serves through a policy is refused a
/// snapshot (it would hand out what the policy holds back).
async fn scheduled_snapshots_and_their_retention(mut app: TestApp) -> anyhow::Result<()> {
    use packyard_core::admin::snapshots::{run_schedules, time_name};
    app.start_worker();
    app.create(Repo::hosted("mods", Format::Go).with(json!({"snapshots": {"every_secs": 60, "keep": 2}}))).await?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/kept", "v1.0.0", "one", 100)?;
    put(&app, "/repository/mods/example.com/kept/@v/v1.0.0.zip", &zip).await?;
    made(&app, "mods", json!({"name": "release-1"})).await?;
    let (services, formats) = (&app.services, packyard_formats::registry());
    let t0 = packyard_store::db::now_ms();
    assert_eq!(run_schedules(services, formats, t0).await?, 1);
    assert_eq!(run_schedules(services, formats, t0).await?, 0, "one per period");
    for minutes in 1..=3 {
        assert_eq!(run_schedules(services, formats, t0 + minutes * 60_000).await?, 1);
    }
    let list = app.call(TestRequest::get().uri("/api/v1/repositories/mods/snapshots")).await?;
    let mut names: Vec<String> =
        list.json.as_array().into_iter().flatten().filter_map(|s| s["name"].as_str().map(str::to_string)).collect();
    names.sort();
    let slot = |minutes: i64| time_name(t0 + minutes * 60_000 - (t0 + minutes * 60_000).rem_euclid(60_000));
    assert_eq!(names, [slot(2), slot(3), "release-1".to_string()], "{}", list.text);
    let r = app.get(&format!("/repository/mods/-/snapshots/{}/example.com/kept/@v/list", slot(3))).await?;
    assert_eq!((r.status, r.text.as_str()), (StatusCode::OK, "v1.0.0\n"));
    // The setting is shown and checked.
    let repo = app.call(TestRequest::get().uri("/api/v1/repositories/mods")).await?;
    assert_eq!(repo.json["snapshots"], json!({"every_secs": 60, "keep": 2}), "{}", repo.text);
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/repositories")
                .set_json(Repo::hosted("often", Format::Go).with(json!({"snapshots": {"every_secs": 5}})).0),
        )
        .await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("`snapshots.every_secs` 5 is not between 60"), "{}", r.text);

    // Through a policy: refused, naming the repository.
    app.create(Repo::group("gated", Format::Go, &["mods"]).with(json!({"policy": {"min_release_age_secs": 86400}})))
        .await?;
    let r = snapshot(&app, "gated", json!({})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("serves through a policy (repository gated)"), "{}", r.text);
    Ok(())
}
app_test!(scheduled_snapshots_and_their_retention);

/// The real clients against snapshots of a running server, after newer uploads: `apt-get`
/// downloads the old version (hosted, and a proxy's snapshot after the upstream dropped the
/// package and went offline), `go mod download …@latest` resolves as it was, the independent
/// APK verifier accepts the old signed index with exactly its package, `conan install` takes
/// the revision that was latest. On SQLite, PostgreSQL and MariaDB.
fn real_clients_on(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use common::archive::{archive_files, Dist, Package, Upstream};
    use common::process::{admin_json, basic, status_of};
    const PW: &str = "snapshot-clients";
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)];
    let Some((server, _dir)) = common::process::server_on(backend, &env)? else { return Ok(()) };
    let auth = basic(PW);
    let create = |spec: Value| common::process::create_repository(&server.public, &auth, spec);
    let snapshot = |repo: &str, name: &str| -> anyhow::Result<String> {
        let url = format!("/api/v1/repositories/{repo}/snapshots");
        let s = admin_json(&server.public, &auth, "POST", &url, Some(json!({"name": name})))?;
        Ok(s["url"].as_str().unwrap_or_default().trim_end_matches('/').to_string())
    };
    let send = |method: &str, path: &str, body: &[u8]| -> anyhow::Result<()> {
        let r = ureq::request(method, &format!("{}{path}", server.public)).set("Authorization", &auth).send_bytes(body);
        let (s, text) = status_of(r)?;
        anyhow::ensure!((200..300).contains(&s), "{method} {path}: {s} {text}");
        Ok(())
    };
    let get = |url: &str| -> anyhow::Result<Vec<u8>> {
        let r = ureq::get(url).call()?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut out)?;
        Ok(out)
    };

    // APT, hosted: the snapshot keeps 1.0 after 1.1 arrives.
    create(Repo::hosted("debs", Format::Apt).0)?;
    let (hello_1, hello_2) = (Package::new("hello", "1.0", "amd64"), Package::new("hello", "1.1", "amd64"));
    send("POST", "/repository/debs/?wait=true", &hello_1.deb)?;
    let debs_v1 = snapshot("debs", "v1")?;
    assert_eq!(debs_v1, format!("{}/repository/debs/-/snapshots/v1", server.public));
    send("POST", "/repository/debs/?wait=true", &hello_2.deb)?;
    let key = get(&format!("{}/repository/debs/gpg.key", server.public))?;
    let frozen = crate::apt::apt_root(&key, &debs_v1)?;
    crate::apt::update_ok(frozen.path())?;
    assert_eq!(crate::apt::download(frozen.path(), "hello")?, hello_1.deb, "the snapshot's hello");
    let live = crate::apt::apt_root(&key, &format!("{}/repository/debs", server.public))?;
    crate::apt::update_ok(live.path())?;
    assert_eq!(crate::apt::download(live.path(), "hello")?, hello_2.deb, "the repository's");

    // Rollback: the distribution pointed at v1 serves 1.0 again, signed anew, to the client
    // that saw 1.1 — even after 1.0 was deleted; an upload meanwhile waits; then back.
    let packages = |base: &str| -> anyhow::Result<String> {
        Ok(String::from_utf8(get(&format!("{base}/dists/stable/main/binary-amd64/Packages"))?)?)
    };
    let filename = |text: &str, version: &str| -> Option<String> {
        text.split("\n\n")
            .find(|s| s.lines().any(|l| l == format!("Version: {version}")))
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Filename: ")).map(str::to_string))
    };
    let live_url = format!("{}/repository/debs", server.public);
    let pool_1 = filename(&packages(&debs_v1)?, "1.0").ok_or_else(|| anyhow::anyhow!("1.0 in v1"))?;
    send("DELETE", &format!("/repository/debs/{pool_1}"), b"")?;
    let pins = admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories/debs/pins?wait=true",
        Some(json!({"snapshot": "v1"})),
    )?;
    assert_eq!(pins[0]["unit"], "stable", "{pins}");
    assert_eq!(pins[0]["kind"], "distribution", "{pins}");
    assert_eq!(pins[0]["snapshot"], "v1", "{pins}");
    assert_eq!(packages(&live_url)?, packages(&debs_v1)?, "the distribution lists what v1 did");
    let (now_release, v1_release) = (
        String::from_utf8(get(&format!("{live_url}/dists/stable/InRelease"))?)?,
        String::from_utf8(get(&format!("{debs_v1}/dists/stable/InRelease"))?)?,
    );
    assert_ne!(now_release, v1_release, "signed anew");
    let date = |t: &str| t.lines().find(|l| l.starts_with("Date: ")).map(str::to_string);
    assert_ne!(date(&now_release), date(&v1_release), "dated anew");
    let strip = |t: &str| -> String {
        let body = t.split("-----BEGIN PGP SIGNATURE-----").next().unwrap_or_default();
        body.lines().filter(|l| !l.starts_with("Date: ")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(strip(&now_release), strip(&v1_release), "the same index but for its date");
    crate::apt::update_ok(live.path())?;
    let got = crate::apt::download(live.path(), "hello").map_err(|e| {
        let log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        let tail: String =
            log.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        anyhow::anyhow!("{e}\nserver log:\n{tail}")
    })?;
    assert_eq!(got, hello_1.deb, "rolled back, 1.0 again (deleted, from v1)");
    let hello_3 = Package::new("hello", "1.2", "amd64");
    send("POST", "/repository/debs/?wait=true", &hello_3.deb)?;
    assert!(filename(&packages(&live_url)?, "1.2").is_none(), "an upload waits while the distribution is pinned");
    let r = ureq::request("DELETE", &format!("{}/api/v1/repositories/debs/snapshots/v1", server.public))
        .set("Authorization", &auth)
        .call();
    let (s, text) = status_of(r)?;
    assert_eq!(s, 409, "{text}");
    assert!(text.contains("point them back first"), "{text}");
    let left = admin_json(&server.public, &auth, "DELETE", "/api/v1/repositories/debs/pins?wait=true", None)?;
    assert_eq!(left, json!([]));
    crate::apt::update_ok(live.path())?;
    assert_eq!(crate::apt::download(live.path(), "hello")?, hello_3.deb, "back: the newest upload");
    assert!(filename(&packages(&live_url)?, "1.0").is_none(), "1.0 stays deleted");

    // APT, proxy: what it had fetched, served after the upstream dropped it and went offline;
    // what its indexes list and no client had fetched, kept on its first use through the
    // snapshot (`extra`) — or, lost upstream before it, a 404 that says so (`gone`).
    let signer = packyard_codecs::apt::signing::Signer::generate("Fake upstream <fake@example.org>")?;
    let tool = Package::new("tool", "1.0", "amd64");
    let (extra, gone) = (Package::new("extra", "1.0", "amd64"), Package::new("gone", "1.0", "amd64"));
    let dist = |packages: Vec<&Package>| {
        let d = Dist {
            name: "stable",
            indexes: vec![("amd64", packages)],
            by_hash: true,
            forms: &["", ".xz"],
            valid_until: None,
        };
        archive_files(&d, &signer, None)
    };
    let upstream = Upstream::start()?;
    upstream.publish(dist(vec![&hello_1, &tool, &extra, &gone])?);
    create(Repo::proxy("mirror", Format::Apt, &upstream.url).with(json!({"apt": {"distributions": ["stable"]}})).0)?;
    let upstream_key = signer.public_armored()?;
    let through = crate::apt::apt_root(upstream_key.as_bytes(), &format!("{}/repository/mirror", server.public))?;
    crate::apt::update_ok(through.path())?;
    assert_eq!(crate::apt::download(through.path(), "tool")?, tool.deb);
    let mirror_v1 = snapshot("mirror", "v1")?;
    let files_of = |repo: &str, name: &str| -> anyhow::Result<i64> {
        let url = format!("/api/v1/repositories/{repo}/snapshots/{name}");
        Ok(admin_json(&server.public, &auth, "GET", &url, None)?["files"].as_i64().unwrap_or_default())
    };
    let listed_at_first = files_of("mirror", "v1")?;
    // The upstream's next release: its pool drops `tool` and `gone`, keeps `extra` for now.
    upstream.publish(dist(vec![&hello_2])?);
    upstream.put(&extra.pool_path(), extra.deb.clone());
    let frozen = crate::apt::apt_root(upstream_key.as_bytes(), &mirror_v1)?;
    crate::apt::update_ok(frozen.path())?;
    assert_eq!(crate::apt::download(frozen.path(), "extra")?, extra.deb, "fetched on first use");
    assert_eq!(files_of("mirror", "v1")?, listed_at_first + 1, "and listed in the snapshot");
    let r = ureq::get(&format!("{mirror_v1}/{}", gone.pool_path())).call();
    let (s, text) = status_of(r)?;
    assert_eq!(s, 404, "{text}");
    assert!(text.contains("is not in snapshot v1 of repository mirror, and no upstream has it now"), "{text}");
    // An index the snapshot does not hold is never fetched anew (the upstream's is newer).
    // Nor anything the proxy itself does not serve (only `pool/` and by-hash indexes of a
    // mirrored distribution are fetched on first use).
    upstream.put("README", b"mutable".to_vec());
    upstream.forget_requests();
    for path in [
        "dists/stable/main/binary-i386/Packages",
        "README",
        "dists/unstable/main/binary-amd64/by-hash/SHA256/0000000000000000000000000000000000000000000000000000000000000000",
        "pool/main/x/x%3Fq=1.deb",
    ] {
        let r = ureq::get(&format!("{mirror_v1}/{path}")).call();
        assert_eq!(status_of(r)?.0, 404, "{path}");
    }
    assert_eq!(upstream.requests(), Vec::<String>::new(), "nothing asked of the upstream");
    upstream.remove(&extra.pool_path());
    upstream.set_offline(true);
    let frozen = crate::apt::apt_root(upstream_key.as_bytes(), &mirror_v1)?;
    crate::apt::update_ok(frozen.path())?;
    assert_eq!(crate::apt::download(frozen.path(), "tool")?, tool.deb, "kept after the upstream lost it");
    assert_eq!(crate::apt::download(frozen.path(), "extra")?, extra.deb, "kept since its first use");
    upstream.set_offline(false);

    // Go: @latest as it was.
    create(Repo::hosted("mods", Format::Go).0)?;
    let zip = |v: &str| packyard_codecs::go::testing::simple_module("example.com/kept", v, v, 100);
    send("PUT", "/repository/mods/example.com/kept/@v/v1.0.0.zip", &zip("v1.0.0")?)?;
    let mods_v1 = snapshot("mods", "v1")?;
    send("PUT", "/repository/mods/example.com/kept/@v/v1.1.0.zip", &zip("v1.1.0")?)?;
    let go_latest = |proxy: &str| -> anyhow::Result<(Value, Vec<u8>)> {
        let work = tempfile::tempdir()?;
        let home = tempfile::tempdir()?;
        let out = common::golang::command(
            work.path(),
            home.path(),
            proxy,
            &["mod", "download", "-json", "example.com/kept@latest"],
        )
        .output()?;
        anyhow::ensure!(
            out.status.success(),
            "go mod download via {proxy}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout)?;
        // Read before the home goes.
        let zip = std::fs::read(v["Zip"].as_str().unwrap_or_default())?;
        Ok((v, zip))
    };
    let (frozen, got) = go_latest(&mods_v1)?;
    assert_eq!(frozen["Version"], "v1.0.0", "{frozen}");
    assert_eq!(sha(&got), sha(&zip("v1.0.0")?));
    assert_eq!(go_latest(&format!("{}/repository/mods", server.public))?.0["Version"], "v1.1.0");

    // Go, proxy (of the repository above): a version's files fetched on their first request
    // through the snapshot and listed in it; a list is what the snapshot holds.
    create(Repo::proxy("gomirror", Format::Go, &format!("{}/repository/mods/", server.public)).0)?;
    let list = get(&format!("{}/repository/gomirror/example.com/kept/@v/list", server.public))?;
    let gomirror_v1 = snapshot("gomirror", "v1")?;
    let listed_at_first = files_of("gomirror", "v1")?;
    send("PUT", "/repository/mods/example.com/kept/@v/v1.2.0.zip", &zip("v1.2.0")?)?;
    let zip_url = format!("{gomirror_v1}/example.com/kept/@v/v1.0.0.zip");
    assert_eq!(sha(&get(&zip_url)?), sha(&zip("v1.0.0")?), "fetched on first use");
    assert_eq!(files_of("gomirror", "v1")?, listed_at_first + 1, "and listed in the snapshot");
    assert_eq!(get(&format!("{gomirror_v1}/example.com/kept/@v/list"))?, list, "the list as it was");
    let r = ureq::get(&format!("{gomirror_v1}/example.com/kept/@latest")).call();
    assert_eq!(status_of(r)?.0, 404, "@latest was never fetched: not fetched now");

    // APK: the signed index as it was, through the independent verifier.
    create(Repo::hosted("apks", Format::Apk).0)?;
    let unit = "v3.20/main/x86_64";
    let apk_1 = packyard_codecs::apk::testing::sized_apk("kept", "1.0-r0", "x86_64", 4 << 10, 1)?;
    let apk_2 = packyard_codecs::apk::testing::sized_apk("kept", "1.1-r0", "x86_64", 4 << 10, 2)?;
    send("PUT", &format!("/repository/apks/{unit}/kept-1.0-r0.apk?wait=true"), &apk_1.bytes)?;
    let apks_v1 = snapshot("apks", "v1")?;
    send("PUT", &format!("/repository/apks/{unit}/kept-1.1-r0.apk?wait=true"), &apk_2.bytes)?;
    let dir = tempfile::tempdir()?;
    let names = String::from_utf8(get(&format!("{}/repository/apks/keys/", server.public))?)?;
    let key_name = names.lines().next().unwrap_or_default().to_string();
    std::fs::write(dir.path().join("key.pem"), get(&format!("{}/repository/apks/keys/{key_name}", server.public))?)?;
    std::fs::write(dir.path().join("APKINDEX.tar.gz"), get(&format!("{apks_v1}/{unit}/APKINDEX.tar.gz"))?)?;
    let package = get(&format!("{apks_v1}/{unit}/kept-1.0-r0.apk"))?;
    assert_eq!(package, apk_1.bytes);
    std::fs::write(dir.path().join("kept-1.0-r0.apk"), package)?;
    let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "key.pem", &key_name)?;
    anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout)?;
    let listed: Vec<String> = summary["packages"].as_array().into_iter().flatten().map(|p| p.to_string()).collect();
    assert_eq!(listed.len(), 1, "{summary}");
    assert!(listed[0].contains("1.0-r0"), "{summary}");
    // Rollback of the branch, signed with the key that is current then (a new one).
    let rotated = admin_json(
        &server.public,
        &auth,
        "PUT",
        "/api/v1/repositories/apks/signing-key",
        Some(json!({"generate": true})),
    )?;
    let new_name = rotated["key_name"].as_str().unwrap_or_default().to_string();
    assert_ne!(new_name, key_name, "{rotated}");
    let pins = admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories/apks/pins?wait=true",
        Some(json!({"snapshot": "v1", "units": ["v3.20"]})),
    )?;
    assert_eq!(
        pins,
        json!([{"unit": unit, "kind": "branch", "snapshot": "v1", "pinned_at": pins[0]["pinned_at"], "pinned_by": "admin"}])
    );
    let index = get(&format!("{}/repository/apks/{unit}/APKINDEX.tar.gz", server.public))?;
    assert_ne!(index, get(&format!("{apks_v1}/{unit}/APKINDEX.tar.gz"))?, "signed anew");
    std::fs::write(dir.path().join("APKINDEX.tar.gz"), &index)?;
    std::fs::write(dir.path().join("new.pem"), get(&format!("{}/repository/apks/keys/{new_name}", server.public))?)?;
    let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "new.pem", &new_name)?;
    anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout)?;
    let listed: Vec<String> = summary["packages"].as_array().into_iter().flatten().map(|p| p.to_string()).collect();
    assert_eq!(listed.len(), 1, "{summary}");
    assert!(listed[0].contains("1.0-r0"), "the branch serves v1's index: {summary}");
    let unknown = ureq::request("POST", &format!("{}/api/v1/repositories/apks/pins", server.public))
        .set("Authorization", &auth)
        .send_json(json!({"snapshot": "v1", "units": ["v3.21"]}));
    let (s, text) = status_of(unknown)?;
    let message = serde_json::from_str::<Value>(&text)?["error"]["message"].as_str().map(str::to_string);
    assert_eq!(
        (s, message.as_deref()),
        (400, Some("repository apks has no branch \"v3.21\" in the snapshot (there: v3.20/main/x86_64)")),
        "{text}"
    );
    admin_json(
        &server.public,
        &auth,
        "DELETE",
        "/api/v1/repositories/apks/pins?wait=true",
        Some(json!({"units": [unit]})),
    )?;
    std::fs::write(
        dir.path().join("APKINDEX.tar.gz"),
        get(&format!("{}/repository/apks/{unit}/APKINDEX.tar.gz", server.public))?,
    )?;
    std::fs::write(dir.path().join("kept-1.1-r0.apk"), &apk_2.bytes)?;
    let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "new.pem", &new_name)?;
    anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(summary["packages"].as_array().map(Vec::len), Some(2), "back: both versions {summary}");

    // Conan: the revision that was latest.
    {
        create(Repo::hosted("conans", Format::Conan).0)?;
        let home = tempfile::tempdir()?;
        let h = home.path();
        let conan = |args: &[&str], cwd: &std::path::Path| -> anyhow::Result<String> {
            let out = std::process::Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
            Ok(text)
        };
        conan(&["profile", "detect"], h)?;
        conan(&["remote", "remove", "conancenter"], h)?;
        conan(&["remote", "add", "local", &format!("{}/repository/conans", server.public)], h)?;
        conan(&["remote", "login", "local", "admin", "-p", PW], h)?;
        let proj = h.join("kept");
        std::fs::create_dir_all(&proj)?;
        conan(&["new", "header_lib", "-d", "name=kept", "-d", "version=1.0"], &proj)?;
        let revision = |text: &str| text.split("kept/1.0#").nth(1).map(|r| r.chars().take(32).collect::<String>());
        let first = revision(&conan(&["create", ".", "-tf="], &proj)?).unwrap_or_default();
        conan(&["upload", "kept/1.0", "-r", "local", "-c"], h)?;
        let conans_v1 = snapshot("conans", "v1")?;
        let recipe = proj.join("conanfile.py");
        std::fs::write(&recipe, format!("{}\n# a second revision\n", std::fs::read_to_string(&recipe)?))?;
        let second = revision(&conan(&["create", ".", "-tf="], &proj)?).unwrap_or_default();
        assert_ne!(first, second);
        conan(&["upload", "kept/1.0", "-r", "local", "-c"], h)?;
        conan(&["remote", "add", "frozen", &conans_v1], h)?;
        conan(&["remove", "*", "-c"], h)?;
        let out = conan(&["install", "--requires=kept/1.0", "-r", "frozen"], h)?;
        assert!(out.contains(&format!("kept/1.0#{first}")), "the snapshot's revision {first}: {out}");
        conan(&["remove", "*", "-c"], h)?;
        let out = conan(&["install", "--requires=kept/1.0", "-r", "local"], h)?;
        assert!(out.contains(&format!("kept/1.0#{second}")), "the repository's {second}: {out}");
        eprintln!("conan installed {first} from the snapshot, {second} from the repository");
    }
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn real_clients_install_from_snapshots_on_sqlite() -> anyhow::Result<()> {
    real_clients_on(packyard_store::db::Backend::Sqlite)
}

#[test]
fn real_clients_install_from_snapshots_on_postgres() -> anyhow::Result<()> {
    real_clients_on(packyard_store::db::Backend::Postgres)
}

#[test]
fn real_clients_install_from_snapshots_on_mariadb() -> anyhow::Result<()> {
    real_clients_on(packyard_store::db::Backend::MySql)
}

/// Component ids of a repository (Nexus's components API, every page): `name version` → id.
async fn component_ids(app: &TestApp, repo: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut uri = format!("/service/rest/v1/components?repository={repo}");
        if let Some(t) = &token {
            uri.push_str(&format!("&continuationToken={t}"));
        }
        let r = app.call(TestRequest::get().uri(&uri)).await?;
        anyhow::ensure!(r.status == StatusCode::OK, "{}", r.text);
        for c in r.json["items"].as_array().into_iter().flatten() {
            let key =
                format!("{} {}", c["name"].as_str().unwrap_or_default(), c["version"].as_str().unwrap_or_default());
            out.insert(key, c["id"].as_str().unwrap_or_default().to_string());
        }
        match r.json["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(out),
        }
    }
}

async fn promote(app: &TestApp, how: &str, from: &str, body: Value) -> anyhow::Result<common::Reply> {
    app.call(TestRequest::post().uri(&format!("/api/v1/repositories/{from}/{how}?wait=true")).set_json(body)).await
}

/// Copy and move between hosted repositories (#42 part 3): by component id and by snapshot diff,
/// for APT, APK and Go; the target publishes the batch, a move takes it out of the source's
/// index in the same transaction; each component audited; what cannot be done is refused with
/// a message to act on.
async fn copy_and_move_components(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    for (name, format) in [
        ("staging", Format::Apt),
        ("release", Format::Apt),
        ("apk-staging", Format::Apk),
        ("apk-release", Format::Apk),
        ("go-staging", Format::Go),
        ("go-release", Format::Go),
        ("conan-staging", Format::Conan),
        ("conan-release", Format::Conan),
    ] {
        app.create(Repo::hosted(name, format)).await?;
    }
    app.create(Repo::group("everything", Format::Apt, &["release"])).await?;
    let package = |name: &str, version: &str| {
        let control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        packyard_codecs::apt::testing::deb(&control, ".gz")
    };
    let (hello, tool) = (package("hello", "1.0"), package("tool", "1.0"));
    for deb in [&hello, &tool] {
        let r = app.post("/repository/staging/?wait=true", deb.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let ids = component_ids(&app, "staging").await?;
    let packages = "dists/stable/main/binary-amd64/Packages";

    // Copy: in both.
    let r = promote(&app, "copy", "staging", json!({"to": "release", "components": [ids["hello 1.0"]]})).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json, json!({"copied": 1, "unchanged": 0, "removed": 0}));
    let release = String::from_utf8(ok(&app, &format!("/repository/release/{packages}")).await?)?;
    assert!(release.contains("Package: hello\n") && !release.contains("Package: tool\n"), "{release}");
    assert_eq!(sha(&ok(&app, "/repository/release/pool/main/h/hello/hello_1.0_amd64.deb").await?), sha(&hello));
    let staging = String::from_utf8(ok(&app, &format!("/repository/staging/{packages}")).await?)?;
    assert!(staging.contains("Package: hello\n"), "{staging}");
    // Again: nothing to do.
    let r = promote(&app, "copy", "staging", json!({"to": "release", "components": [ids["hello 1.0"]]})).await?;
    assert_eq!(r.json, json!({"copied": 0, "unchanged": 1, "removed": 0}), "{}", r.text);
    // Move: out of the source's index, into the target's.
    let r = promote(&app, "move", "staging", json!({"to": "release", "components": [ids["tool 1.0"]]})).await?;
    assert_eq!(r.json, json!({"copied": 1, "unchanged": 0, "removed": 1}), "{}", r.text);
    let staging = String::from_utf8(ok(&app, &format!("/repository/staging/{packages}")).await?)?;
    assert!(!staging.contains("Package: tool\n"), "{staging}");
    let release = String::from_utf8(ok(&app, &format!("/repository/release/{packages}")).await?)?;
    assert!(release.contains("Package: tool\n"), "{release}");
    let group = String::from_utf8(ok(&app, &format!("/repository/everything/{packages}")).await?)?;
    assert!(group.contains("Package: tool\n"), "the group over the target follows: {group}");
    let audit = app.call(TestRequest::get().uri("/api/v1/audit?action=apt.move")).await?;
    assert!(audit.text.contains("release/tool") && audit.text.contains("staging/tool"), "{}", audit.text);
    let audit = app.call(TestRequest::get().uri("/api/v1/audit?action=apt.copy")).await?;
    assert!(audit.text.contains("release/hello"), "{}", audit.text);

    // By snapshot diff: what the later snapshot added.
    made(&app, "staging", json!({"name": "rc1"})).await?;
    let (hello_2, extra) = (package("hello", "2.0"), package("extra", "1.0"));
    for deb in [&hello_2, &extra] {
        let r = app.post("/repository/staging/?wait=true", deb.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    made(&app, "staging", json!({"name": "rc2"})).await?;
    let r = promote(&app, "copy", "staging", json!({"to": "release", "snapshot_diff": {"from": "rc1", "to": "rc2"}}))
        .await?;
    assert_eq!(r.json, json!({"copied": 2, "unchanged": 0, "removed": 0}), "{}", r.text);
    let release = String::from_utf8(ok(&app, &format!("/repository/release/{packages}")).await?)?;
    assert!(release.contains("Version: 2.0\n") && release.contains("Package: extra\n"), "{release}");

    // By search, with the dependencies the target lacks (resolved within the source): app
    // needs libfoo >= 1.2 (1.3, not 1.1), libbar or libbaz (the source has only libbaz, which
    // needs libqux) and libc6 (the target has it already).
    let with = |name: &str, version: &str, depends: &str| {
        let control = format!("Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\n{depends}Description: x\n");
        packyard_codecs::apt::testing::deb(&control, ".gz")
    };
    for deb in [
        with("app", "1.0", "Depends: libfoo (>= 1.2), libbar | libbaz, libc6 (>= 2.36)\n"),
        with("libfoo", "1.1", ""),
        with("libfoo", "1.3", ""),
        with("libbaz", "1.0", "Pre-Depends: libqux\n"),
        with("libqux", "1.0", ""),
        with("libc6", "2.36", ""),
        with("unrelated", "1.0", ""),
    ] {
        let r = app.post("/repository/staging/?wait=true", deb).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let r = app.post("/repository/release/?wait=true", with("libc6", "2.37", "")).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // A move: app leaves staging, what it needs is copied and stays (others may need it).
    let body = json!({"to": "release", "search": {"name": "app"}, "with_dependencies": true});
    let r = promote(&app, "move", "staging", body).await?;
    assert_eq!(r.json, json!({"copied": 4, "unchanged": 0, "removed": 1}), "{}", r.text);
    let staging = String::from_utf8(ok(&app, &format!("/repository/staging/{packages}")).await?)?;
    assert!(!staging.contains("Package: app\n"), "{staging}");
    assert!(staging.contains("Package: libbaz\n") && staging.contains("Package: libqux\n"), "{staging}");
    let release = String::from_utf8(ok(&app, &format!("/repository/release/{packages}")).await?)?;
    let listed = |name: &str, version: &str| release.contains(&format!("Package: {name}\nVersion: {version}\n"));
    assert!(
        listed("app", "1.0") && listed("libfoo", "1.3") && listed("libbaz", "1.0") && listed("libqux", "1.0"),
        "{release}"
    );
    assert!(!listed("libfoo", "1.1") && !listed("libc6", "2.36") && !listed("unrelated", "1.0"), "{release}");
    let r = promote(&app, "copy", "staging", json!({"to": "release", "search": {}})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("names at least one of"), "{}", r.text);

    // APK and Go.
    let apk = packyard_codecs::apk::testing::sized_apk("kept", "1.0-r0", "x86_64", 4 << 10, 1)?;
    put(&app, "/repository/apk-staging/v3.20/main/x86_64/kept-1.0-r0.apk?wait=true", &apk.bytes).await?;
    let id = component_ids(&app, "apk-staging").await?["kept 1.0-r0"].clone();
    let r = promote(&app, "move", "apk-staging", json!({"to": "apk-release", "components": [id]})).await?;
    assert_eq!(r.json, json!({"copied": 1, "unchanged": 0, "removed": 1}), "{}", r.text);
    assert_eq!(ok(&app, "/repository/apk-release/v3.20/main/x86_64/kept-1.0-r0.apk").await?, apk.bytes);
    assert_eq!(
        app.get("/repository/apk-staging/v3.20/main/x86_64/kept-1.0-r0.apk").await?.status,
        StatusCode::NOT_FOUND
    );
    let zip = packyard_codecs::go::testing::simple_module("example.com/kept", "v1.0.0", "one", 100)?;
    put(&app, "/repository/go-staging/example.com/kept/@v/v1.0.0.zip", &zip).await?;
    let id = component_ids(&app, "go-staging").await?["kept v1.0.0"].clone();
    let body = json!({"to": "go-release", "components": [id], "with_dependencies": true});
    let r = promote(&app, "copy", "go-staging", body).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("go components are copied without their dependencies"), "{}", r.text);
    let r = promote(&app, "copy", "go-staging", json!({"to": "go-release", "components": [id]})).await?;
    assert_eq!(r.json, json!({"copied": 1, "unchanged": 0, "removed": 0}), "{}", r.text);
    assert_eq!(ok(&app, "/repository/go-release/example.com/kept/@v/list").await?, b"v1.0.0\n");
    assert_eq!(ok(&app, "/repository/go-release/example.com/kept/@v/v1.0.0.zip").await?, zip);

    // Conan: the recipe revision with its package revision, the revision's files as they were.
    let conanfile = conan_revision(&app, "conan-staging", "r1", "one").await?;
    // The target has a newer revision already: the copy keeps r1's time, so r2 stays latest.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    conan_revision(&app, "conan-release", "r2", "two").await?;
    let id = component_ids(&app, "conan-staging").await?["kept 1.0"].clone();
    let r = promote(&app, "move", "conan-staging", json!({"to": "conan-release", "components": [id]})).await?;
    assert_eq!(r.json, json!({"copied": 1, "unchanged": 0, "removed": 1}), "{}", r.text);
    let conan = "v2/conans/kept/1.0/_/_";
    let latest: Value = serde_json::from_slice(&ok(&app, &format!("/repository/conan-release/{conan}/latest")).await?)?;
    assert_eq!(latest["revision"], "r2", "the newer revision stays latest");
    let revisions = String::from_utf8(ok(&app, &format!("/repository/conan-release/{conan}/revisions")).await?)?;
    assert!(revisions.contains("\"r1\""), "{revisions}");
    let file = ok(&app, &format!("/repository/conan-release/{conan}/revisions/r1/files/conanfile.py")).await?;
    assert_eq!(file, conanfile.as_bytes());
    let packages = format!("/repository/conan-release/{conan}/revisions/r1/packages/p1/latest");
    let latest: Value = serde_json::from_slice(&ok(&app, &packages).await?)?;
    assert_eq!(latest["revision"], "p1r", "its package too");
    let r = app.get(&format!("/repository/conan-staging/{conan}/latest")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "moved: {}", r.text);

    // Refused, with what to do.
    let r = promote(&app, "copy", "staging", json!({"to": "apk-release", "components": [ids["hello 1.0"]]})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("components are copied between repositories of one format"), "{}", r.text);
    let r = promote(&app, "copy", "staging", json!({"to": "everything", "components": [ids["hello 1.0"]]})).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.text);
    let r = promote(&app, "copy", "release", json!({"to": "staging", "components": [ids["hello 1.0"]]})).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "an id of another repository: {}", r.text);
    let r = promote(&app, "copy", "staging", json!({"to": "release", "components": ["nonsense"]})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("is not a component id this server issued"), "{}", r.text);
    let r = promote(&app, "copy", "staging", json!({"to": "release"})).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    Ok(())
}
app_test!(copy_and_move_components);

/// A promotion of 1,000 components (#42's test): a move from staging to release is one
/// transaction — the release index gets all of them in one publication, the staging index
/// loses them —, and the audit log and the webhook subscription record each component.
async fn a_thousand_components_promoted_at_once(mut app: TestApp) -> anyhow::Result<()> {
    const N: usize = 1000;
    app.start_worker();
    app.create(Repo::hosted("staging", Format::Apt)).await?;
    app.create(Repo::hosted("release", Format::Apt)).await?;
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/webhooks")
                .set_json(json!({"name": "ci", "url": "http://127.0.0.1:9/hooks",
            "events": ["component.published", "component.deleted"], "secret": "promotion-webhook-secret"})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    for i in 0..N {
        let control = format!(
            "Package: pkg{i}\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        let r = app.post("/repository/staging/", packyard_codecs::apt::testing::deb(&control, ".gz")).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let packages = "dists/stable/main/binary-amd64/Packages";
    let count = |text: &str| text.matches("Package: pkg").count();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count(&String::from_utf8(ok(&app, &format!("/repository/staging/{packages}")).await?)?) < N {
        anyhow::ensure!(std::time::Instant::now() < deadline, "staging never listed them all");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ids: Vec<String> = component_ids(&app, "staging").await?.into_values().collect();
    assert_eq!(ids.len(), N);
    let release = app.services.db.repository_by_name("release").await?.ok_or_else(|| anyhow::anyhow!("release"))?;
    let revision = |units: Vec<packyard_store::db::publication::UnitRecord>| -> i64 {
        units.iter().find(|u| u.unit_key == "stable").map_or(0, |u| u.published_revision)
    };
    let before = revision(app.services.db.units_of(release.id).await?);

    let r = promote(&app, "move", "staging", json!({"to": "release", "components": ids})).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json, json!({"copied": N, "unchanged": 0, "removed": N}));
    let listed = String::from_utf8(ok(&app, &format!("/repository/release/{packages}")).await?)?;
    assert_eq!(count(&listed), N, "all of them");
    assert_eq!(revision(app.services.db.units_of(release.id).await?), before + 1, "in one publication");
    let staging = String::from_utf8(ok(&app, &format!("/repository/staging/{packages}")).await?)?;
    assert_eq!(count(&staging), 0, "{staging}");

    let pool = app.services.db.pool().clone();
    let rows = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            let row = sqlx::query(sql).fetch_one(&pool).await?;
            Ok::<i64, anyhow::Error>(sqlx::Row::try_get(&row, "n")?)
        }
    };
    let moved = rows("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'apt.move'").await?;
    assert_eq!(moved, 2 * N as i64, "one entry in each repository per component");
    let published = rows("SELECT COUNT(*) AS n FROM webhook_events WHERE event = 'component.published' AND payload LIKE '%\"from\":\"staging\"%'").await?;
    let deleted = rows("SELECT COUNT(*) AS n FROM webhook_events WHERE event = 'component.deleted' AND payload LIKE '%\"to\":\"release\"%'").await?;
    assert_eq!((published, deleted), (N as i64, N as i64));
    Ok(())
}
app_test!(a_thousand_components_promoted_at_once, |c: &mut packyard_model::config::Config| {
    c.webhooks.allowed_networks = vec!["127.0.0.1/32".into()];
});
