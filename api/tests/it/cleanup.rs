//! Cleanup policies through the admin API on every backend: created, listed, replaced and
//! deleted by administrators only, each rule a policy breaks named, the repositories it cleans
//! checked, and the audit log's entries.

use crate::common;
use crate::common::md5_hex;

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use common::app::{As, Repo, TestApp};

fn post(body: Value) -> TestRequest {
    TestRequest::post().uri("/api/v1/cleanup-policies").set_json(body)
}

fn message(r: &common::Reply) -> String {
    r.json["error"]["message"].as_str().unwrap_or_default().to_string()
}

async fn policies_are_kept_as_given(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("debs2", Format::Apt)).await?;
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    app.create(Repo::group("alldebs", Format::Apt, &["debs"])).await?;
    let policy = json!({
        "name": "old-debs", "format": "apt", "description": "90 days unused, keep 3",
        "criteria": {"last_downloaded_before_days": 90, "name_regex": "^lib", "keep_latest": 3},
        "schedule": {"cron": "0 3 * * 1-5"},
        "repositories": ["debs2", "debs"]
    });
    let r = app.call(post(policy.clone())).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["name"], "old-debs");
    assert_eq!(r.json["criteria"], policy["criteria"], "the criteria as given, nothing added");
    assert_eq!(r.json["schedule"], json!({"cron": "0 3 * * 1-5"}));
    assert_eq!(r.json["repositories"], json!(["debs", "debs2"]), "by name");
    assert!(r.json["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{}", r.text);

    let r = app.call(post(policy.clone())).await?;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(message(&r).contains("exists already"), "{}", r.text);

    // Each rule a policy breaks, named.
    for (body, says) in [
        (json!({"name": "x", "format": "apt", "criteria": {}}), "give at least one"),
        (json!({"name": "x", "format": "apt", "criteria": {"prereleases_only": true}}), "applies to go"),
        (json!({"name": "x", "format": "go", "criteria": {"keep_latest_revisions": 2}}), "applies to conan"),
        (
            json!({"name": "x", "format": "go", "criteria": {"version_regex": "v(1"}}),
            "version_regex is not a regular expression",
        ),
        (
            json!({"name": "x", "format": "go", "criteria": {"keep_latest": 1}, "schedule": {"every_secs": 10}}),
            "at least 60",
        ),
        (
            json!({"name": "x", "format": "go", "criteria": {"keep_latest": 1}, "schedule": {"cron": "* * *"}}),
            "has 3 fields",
        ),
        (
            json!({"name": "x", "format": "go", "criteria": {"keep_latest": 1}, "repositories": ["nope"]}),
            "nope does not exist",
        ),
        (
            json!({"name": "x", "format": "go", "criteria": {"keep_latest": 1}, "repositories": ["debs"]}),
            "debs is a apt repository; this policy is for go",
        ),
        (
            json!({"name": "x", "format": "apt", "criteria": {"keep_latest": 1}, "repositories": ["alldebs"]}),
            "alldebs is a group",
        ),
        (json!({"name": "bad name", "format": "apt", "criteria": {"keep_latest": 1}}), "invalid policy name"),
        (json!({"format": "apt", "criteria": {"keep_latest": 1}}), "missing field `name`"),
    ] {
        let r = app.call(post(body.clone())).await?;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
        assert!(message(&r).contains(says), "{body}: {} lacks {says:?}", r.text);
    }
    let r = app.call(post(json!({"name": "x", "format": "apt", "criteria": {"keep_newest": 1}}))).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "an unknown criterion: {}", r.text);
    assert!(r.text.contains("keep_newest"), "{}", r.text);

    // Replaced (no renaming), listed, deleted.
    let replaced = json!({"format": "apt", "criteria": {"published_before_days": 30}, "repositories": ["debs"]});
    let r = app.call(TestRequest::put().uri("/api/v1/cleanup-policies/old-debs").set_json(&replaced)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        (r.json["criteria"].clone(), r.json["schedule"].clone()),
        (json!({"published_before_days": 30}), Value::Null)
    );
    assert_eq!(r.json["repositories"], json!(["debs"]));
    let mut renamed = replaced.clone();
    renamed["name"] = json!("other");
    let r = app.call(TestRequest::put().uri("/api/v1/cleanup-policies/old-debs").set_json(&renamed)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = app.call(TestRequest::put().uri("/api/v1/cleanup-policies/nope").set_json(&replaced)).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let go = json!({"name": "go-pre", "format": "go", "criteria": {"prereleases_only": true, "published_before_days": 7},
        "schedule": {"every_secs": 86400}, "repositories": ["gomods"]});
    assert_eq!(app.call(post(go)).await?.status, StatusCode::CREATED);
    let r = app.call(TestRequest::get().uri("/api/v1/cleanup-policies")).await?;
    let names: Vec<&str> = r.json.as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["go-pre", "old-debs"]);

    // A repository deleted leaves the policies that named it.
    assert_eq!(app.delete("/api/v1/repositories/gomods").await?.status, StatusCode::NO_CONTENT);
    let r = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/go-pre")).await?;
    assert_eq!(r.json["repositories"], json!([]), "{}", r.text);

    assert_eq!(app.delete("/api/v1/cleanup-policies/old-debs").await?.status, StatusCode::NO_CONTENT);
    assert_eq!(app.delete("/api/v1/cleanup-policies/old-debs").await?.status, StatusCode::NOT_FOUND);
    let r = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/old-debs")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    let audit = app.audit().await?;
    for action in ["cleanup_policy.create", "cleanup_policy.update", "cleanup_policy.delete"] {
        assert!(audit.iter().any(|(a, t)| a == action && t == "old-debs"), "{action} in {audit:?}");
    }
    let doc = app.get("/api/v1/openapi.json").await?;
    assert!(doc.json["paths"]["/api/v1/cleanup-policies"]["post"].is_object());
    assert!(doc.json["paths"]["/api/v1/cleanup-policies/{name}"]["delete"].is_object());
    Ok(())
}
app_test!(policies_are_kept_as_given);

/// Only administrators see or change policies.
async fn policies_are_for_administrators(app: TestApp) -> anyhow::Result<()> {
    let dave = app.with_user("dave").create().await?;
    let body = json!({"name": "p", "format": "go", "criteria": {"keep_latest": 1}});
    let dave = || dave.clone();
    let r = app.send(post(body.clone()), dave()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = app.send(post(body), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let r = app.send(TestRequest::get().uri("/api/v1/cleanup-policies"), dave()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    Ok(())
}
app_test!(policies_are_for_administrators);

async fn preview(app: &TestApp, policy: &str, repository: &str) -> anyhow::Result<Value> {
    let uri = format!("/api/v1/cleanup-policies/{policy}/preview?repository={repository}");
    let r = app.call(TestRequest::post().uri(&uri)).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "{uri}: {} {}", r.status, r.text);
    Ok(r.json)
}

fn versions(preview: &Value) -> Vec<String> {
    let mut v: Vec<String> = preview["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| format!("{} {}", i["name"].as_str().unwrap_or(""), i["version"].as_str().unwrap_or("")))
        .collect();
    v.sort();
    v
}

async fn policy(app: &TestApp, name: &str, format: &str, criteria: Value) -> anyhow::Result<()> {
    let r = app.call(post(json!({"name": name, "format": format, "criteria": criteria}))).await?;
    anyhow::ensure!(r.status == StatusCode::CREATED, "{name}: {}", r.text);
    Ok(())
}

/// The preview selects by each criterion, in each format's version order, keeping the newest N
/// per package; count and bytes cover everything it would remove.
async fn previews_select_by_each_criterion(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    app.create(Repo::hosted("cc", Format::Conan)).await?;
    let mut debs = std::collections::BTreeMap::new();
    for (name, version) in [("hello", "1.0"), ("hello", "1.10"), ("hello", "1.9"), ("other", "1:0.1")] {
        let control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        let deb = packyard_codecs::apt::testing::deb(&control, ".gz");
        let r = app.post("/repository/debs/", deb.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
        debs.insert(format!("{name} {version}"), deb.len());
    }
    policy(&app, "keep-one", "apt", json!({"keep_latest": 1})).await?;
    let p = preview(&app, "keep-one", "debs").await?;
    assert_eq!(versions(&p), ["hello 1.0", "hello 1.9"], "1.10 is hello's newest, as dpkg orders: {p}");
    assert_eq!(p["count"], 2);
    assert_eq!(p["bytes"].as_u64(), Some((debs["hello 1.0"] + debs["hello 1.9"]) as u64));
    assert_eq!(p["continuationToken"], Value::Null);

    // Ages: nothing is 30 days old, until it is; never downloaded counts from publication.
    policy(&app, "old", "apt", json!({"published_before_days": 30})).await?;
    policy(&app, "unused", "apt", json!({"last_downloaded_before_days": 10, "name_regex": "^hel"})).await?;
    assert_eq!(preview(&app, "old", "debs").await?["count"], 0);
    let db = &app.services.db;
    let long_ago = packyard_store::db::now_ms() - 40 * 86_400_000;
    sqlx::query(&format!("UPDATE components SET created_at = {long_ago}")).execute(db.pool()).await?;
    assert_eq!(versions(&preview(&app, "old", "debs").await?), ["hello 1.0", "hello 1.10", "hello 1.9", "other 1:0.1"]);
    assert_eq!(app.get("/repository/debs/pool/main/h/hello/hello_1.10_amd64.deb").await?.status, StatusCode::OK);
    app.services.downloads.flush(db).await?;
    assert_eq!(
        versions(&preview(&app, "unused", "debs").await?),
        ["hello 1.0", "hello 1.9"],
        "1.10 was downloaded now"
    );

    // Go: pre-release and pseudo-versions.
    for v in ["v1.0.0", "v1.1.0-rc.1", "v1.1.0", "v0.0.0-20240101000000-abcdefabcdef"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/m", v, v, 0)?;
        let r = app.put(&format!("/repository/gomods/example.com/m/@v/{v}.zip"), zip).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{v}: {}", r.text);
    }
    policy(&app, "go-pre", "go", json!({"prereleases_only": true})).await?;
    assert_eq!(
        versions(&preview(&app, "go-pre", "gomods").await?),
        ["m v0.0.0-20240101000000-abcdefabcdef", "m v1.1.0-rc.1"]
    );
    policy(&app, "go-keep-2", "go", json!({"keep_latest": 2})).await?;
    assert_eq!(
        versions(&preview(&app, "go-keep-2", "gomods").await?),
        ["m v0.0.0-20240101000000-abcdefabcdef", "m v1.0.0"]
    );

    // Conan: revisions that are not the latest.
    let conanfile = b"from conan import ConanFile\n".to_vec();
    for (rrev, extra) in [("r1", ""), ("r2", "# two\n")] {
        let file = [conanfile.clone(), extra.as_bytes().to_vec()].concat();
        let base = format!("/repository/cc/v2/conans/zlib/1.3/_/_/revisions/{rrev}/files");
        assert_eq!(app.put(&format!("{base}/conanfile.py"), file.clone()).await?.status, StatusCode::CREATED);
        let manifest = format!("1\nconanfile.py: {}\n", md5_hex(&file));
        assert_eq!(app.put(&format!("{base}/conanmanifest.txt"), manifest).await?.status, StatusCode::CREATED);
        // The second revision is the newer one.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    policy(&app, "conan-old-revisions", "conan", json!({"prereleases_only": true})).await?;
    let p = preview(&app, "conan-old-revisions", "cc").await?;
    assert_eq!(p["items"].as_array().map(Vec::len), Some(1), "{p}");
    assert_eq!(p["items"][0]["component"], "zlib/1.3#r1");
    policy(&app, "conan-keep-1", "conan", json!({"keep_latest_revisions": 1})).await?;
    assert_eq!(preview(&app, "conan-keep-1", "cc").await?["items"][0]["component"], "zlib/1.3#r1");

    // A preview is of a repository of the policy's format.
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/keep-one/preview?repository=gomods")).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/keep-one/preview")).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/nope/preview?repository=debs")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    Ok(())
}
app_test!(previews_select_by_each_criterion);

/// A preview of 250 components comes in pages of 100, each with the whole count.
async fn previews_are_paginated(app: TestApp) -> anyhow::Result<()> {
    use packyard_store::db::catalogue::{Component, Entry};
    app.create(Repo::hosted("big", Format::Go)).await?;
    let db = &app.services.db;
    let repo = db.repository_by_name("big").await?.map_or(0, |r| r.id);
    let mut tx = db.begin().await?;
    for i in 0..250 {
        let component = Component {
            key: format!("example.com/m{i}@v1.0.0"),
            group: "example.com".into(),
            name: format!("m{i}"),
            version: "v1.0.0".into(),
        };
        db.catalogue_put(&mut tx, repo, "go", &Entry { component, assets: Vec::new() }, ("seed", 0)).await?;
    }
    tx.commit().await?;
    policy(&app, "all-old", "go", json!({"published_before_days": 1})).await?;
    let mut seen = std::collections::HashSet::new();
    let mut uri = "/api/v1/cleanup-policies/all-old/preview?repository=big".to_string();
    let mut pages = Vec::new();
    loop {
        let r = app.call(TestRequest::post().uri(&uri)).await?;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(r.json["count"], 250);
        let items = r.json["items"].as_array().cloned().unwrap_or_default();
        pages.push(items.len());
        for i in &items {
            assert!(seen.insert(i["component"].as_str().unwrap_or_default().to_string()), "{i} twice");
        }
        match r.json["continuationToken"].as_str() {
            Some(t) => uri = format!("/api/v1/cleanup-policies/all-old/preview?repository=big&continuationToken={t}"),
            None => break,
        }
    }
    assert_eq!(pages, [100, 100, 50]);
    assert_eq!(seen.len(), 250);
    Ok(())
}
app_test!(previews_are_paginated);

/// Every page of a preview with `count=false`, followed to the end: (items of each page, the
/// components seen).
async fn pages_without_totals(
    app: &TestApp,
    policy: &str,
    repository: &str,
) -> anyhow::Result<(Vec<usize>, Vec<String>)> {
    let first = format!("/api/v1/cleanup-policies/{policy}/preview?repository={repository}&count=false");
    let (mut uri, mut pages, mut seen) = (first.clone(), Vec::new(), Vec::new());
    loop {
        let r = app.call(TestRequest::post().uri(&uri)).await?;
        anyhow::ensure!(r.status == StatusCode::OK, "{uri}: {}", r.text);
        anyhow::ensure!(r.json["count"].is_null() && r.json["bytes"].is_null(), "no totals: {}", r.json);
        let items = r.json["items"].as_array().cloned().unwrap_or_default();
        pages.push(items.len());
        seen.extend(items.iter().map(|i| i["component"].as_str().unwrap_or_default().to_string()));
        match r.json["continuationToken"].as_str() {
            Some(t) => uri = format!("{first}&continuationToken={t}"),
            None => return Ok((pages, seen)),
        }
        anyhow::ensure!(pages.len() < 100, "the pages never end");
    }
}

/// Without totals, a page reads a bounded stretch of the repository: when the criteria select
/// little, pages come back short or empty with a token to go on, and together they list
/// exactly what the counted preview lists, each once.
async fn previews_without_totals_read_a_bounded_stretch(app: TestApp) -> anyhow::Result<()> {
    use packyard_store::db::catalogue::{Component, Entry};
    app.create(Repo::hosted("big", Format::Go)).await?;
    let db = &app.services.db;
    let repo = db.repository_by_name("big").await?.map_or(0, |r| r.id);
    let mut tx = db.begin().await?;
    // 4,100 names (more than two pages' worth of reading), m7 and m4021 with two versions.
    for i in 0..4100 {
        for version in ["v1.0.0", "v1.1.0"].iter().take(if i == 7 || i == 4021 { 2 } else { 1 }) {
            let component = Component {
                key: format!("example.com/m{i}@{version}"),
                group: "example.com".into(),
                name: format!("m{i}"),
                version: version.to_string(),
            };
            db.catalogue_put(&mut tx, repo, "go", &Entry { component, assets: Vec::new() }, ("seed", 0)).await?;
        }
    }
    tx.commit().await?;
    policy(&app, "keep-one", "go", json!({"keep_latest": 1})).await?;
    let counted = preview(&app, "keep-one", "big").await?;
    assert_eq!(counted["count"], 2, "{counted}");
    let (pages, seen) = pages_without_totals(&app, "keep-one", "big").await?;
    assert_eq!(seen, ["example.com/m4021@v1.0.0", "example.com/m7@v1.0.0"], "pages {pages:?}");
    assert!(pages.len() >= 3, "4,100 rows in stretches of at most 2,000: {pages:?}");
    assert!(pages.contains(&0), "a stretch that selects nothing still gives a token: {pages:?}");

    // When much is selected: pages of 100, the same components as the counted preview's.
    policy(&app, "all-old", "go", json!({"published_before_days": 1})).await?;
    let (pages, seen) = pages_without_totals(&app, "all-old", "big").await?;
    assert_eq!(seen.len(), 4102, "{pages:?}");
    assert_eq!(seen.iter().collect::<std::collections::HashSet<_>>().len(), 4102, "each once");
    assert!(pages.iter().all(|n| *n <= 100) && pages.iter().filter(|n| **n == 100).count() == 41, "{pages:?}");
    Ok(())
}
app_test!(previews_without_totals_read_a_bounded_stretch);

async fn desired_revision(app: &TestApp, repository: &str) -> anyhow::Result<i64> {
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/{repository}/status"))).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "{}", r.text);
    Ok(r.json["units"][0]["desired_revision"].as_i64().unwrap_or(-1))
}

/// Waits until what a run changed is published, and drops this replica's view of before.
async fn published(app: &TestApp, report: &packyard_core::cleanup::RunReport) -> anyhow::Result<()> {
    for (unit, revision) in &report.changes {
        let wait = std::time::Duration::from_secs(10);
        let done =
            packyard_core::publication::wait_until_published(&app.services.db, None, *unit, *revision, wait).await?;
        anyhow::ensure!(done, "unit {unit} not published");
    }
    app.services.published.invalidate();
    Ok(())
}

async fn run(
    app: &TestApp,
    policy: Value,
    repository: &str,
    started: i64,
) -> anyhow::Result<packyard_core::cleanup::RunReport> {
    let spec: packyard_model::cleanup::PolicySpec = serde_json::from_value(policy)?;
    let criteria = packyard_core::cleanup::Compiled::new(&spec.criteria, packyard_store::db::now_ms())?;
    let repo =
        app.services.db.repository_by_name(repository).await?.ok_or_else(|| anyhow::anyhow!("no {repository}"))?;
    let actor = packyard_core::hosted::Actor::system("cleanup");
    let format = packyard_formats::registry().get(repo.format);
    let name = spec.name.clone().unwrap_or_default();
    Ok(packyard_core::cleanup::run(&app.services, (format, &name, &criteria), &repo, (started, 1), actor, None).await?)
}

/// A run removes what the preview selected when it started, through each format's delete (one
/// audit entry per component, each unit republished once per batch), and nothing stored after
/// it started; a second run finds nothing.
async fn runs_remove_what_the_preview_selected(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let deb = |name: &str, version: &str| {
        let control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        packyard_codecs::apt::testing::deb(&control, ".gz")
    };
    let mut debs_bytes = 0;
    for (name, version) in [("hello", "1.0"), ("hello", "1.10"), ("hello", "1.9"), ("other", "1:0.1")] {
        let bytes = deb(name, version);
        if version == "1.0" || version == "1.9" {
            debs_bytes += bytes.len();
        }
        assert_eq!(app.post("/repository/debs/", bytes).await?.status, StatusCode::CREATED);
    }
    let keep_one = json!({"name": "keep-one", "format": "apt", "criteria": {"keep_latest": 1}});
    assert_eq!(app.call(post(keep_one.clone())).await?.status, StatusCode::CREATED);
    assert_eq!(versions(&preview(&app, "keep-one", "debs").await?), ["hello 1.0", "hello 1.9"]);
    let started = packyard_store::db::now_ms();
    std::thread::sleep(std::time::Duration::from_millis(5));
    // Uploaded after the run started: neither removed nor counted as the newest.
    assert_eq!(app.post("/repository/debs/", deb("hello", "2.0")).await?.status, StatusCode::CREATED);
    app.publish().await;
    let before = desired_revision(&app, "debs").await?;
    let report = run(&app, keep_one.clone(), "debs", started).await?;
    assert_eq!((report.components, report.batches), (2, 1), "{report:?}");
    assert_eq!(desired_revision(&app, "debs").await? - before, 1, "the batch republished its distribution once");
    published(&app, &report).await?;
    let packages = app.get("/repository/debs/dists/stable/main/binary-amd64/Packages").await?.text;
    for (version, listed) in [("1.0", false), ("1.9", false), ("1.10", true), ("2.0", true)] {
        assert_eq!(
            packages.contains(&format!("Filename: pool/main/h/hello/hello_{version}_amd64.deb\n")),
            listed,
            "hello {version}: {packages}"
        );
        let status = app.get(&format!("/repository/debs/pool/main/h/hello/hello_{version}_amd64.deb")).await?.status;
        assert_eq!(status == StatusCode::OK, listed, "hello {version}'s file");
    }
    assert!(packages.contains("Package: other\n"));
    let audit = app.audit().await?;
    for gone in ["debs/hello_1.0_amd64", "debs/hello_1.9_amd64"] {
        assert!(audit.contains(&("apt.delete".to_string(), gone.to_string())), "{gone} in {audit:?}");
    }
    let run_entry = audit.iter().any(|(a, t)| a == "cleanup.run" && t == "debs");
    assert!(run_entry, "one audit entry for the run: {audit:?}");
    let m = &app.services.metrics;
    assert_eq!(m.cleanup_components_deleted_total.with_label_values(&["debs"]).get(), 2);
    let gone = i64::try_from(debs_bytes).unwrap_or(0);
    assert_eq!(i64::try_from(m.cleanup_bytes_reclaimed_total.with_label_values(&["debs"]).get()).unwrap_or(-1), gone);
    assert!(m.cleanup_last_run_timestamp_seconds.get() * 1000.0 >= started as f64);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/search?repository=debs"), As::Admin).await?;
    assert_eq!(r.json["items"].as_array().map(Vec::len), Some(3), "{}", r.text);
    // Now 2.0 is the newest: 1.10 goes too.
    let report = run(&app, keep_one, "debs", packyard_store::db::now_ms()).await?;
    assert_eq!(report.components, 1);

    // Go and Conan through their own deletes.
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    for v in ["v1.0.0", "v1.1.0-rc.1", "v1.1.0"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/m", v, v, 0)?;
        assert_eq!(
            app.put(&format!("/repository/gomods/example.com/m/@v/{v}.zip"), zip).await?.status,
            StatusCode::CREATED
        );
    }
    let go_pre = json!({"name": "go-pre", "format": "go", "criteria": {"prereleases_only": true}});
    let report = run(&app, go_pre, "gomods", packyard_store::db::now_ms()).await?;
    assert_eq!(report.components, 1);
    published(&app, &report).await?;
    assert_eq!(app.get("/repository/gomods/example.com/m/@v/list").await?.text, "v1.0.0\nv1.1.0\n");
    assert_eq!(app.get("/repository/gomods/example.com/m/@v/v1.1.0-rc.1.zip").await?.status, StatusCode::NOT_FOUND);
    app.create(Repo::hosted("cc", Format::Conan)).await?;
    for (rrev, extra) in [("r1", ""), ("r2", "# two\n")] {
        let file = [b"from conan import ConanFile\n".to_vec(), extra.as_bytes().to_vec()].concat();
        let base = format!("/repository/cc/v2/conans/zlib/1.3/_/_/revisions/{rrev}/files");
        assert_eq!(app.put(&format!("{base}/conanfile.py"), file.clone()).await?.status, StatusCode::CREATED);
        let manifest = format!("1\nconanfile.py: {}\n", md5_hex(&file));
        assert_eq!(app.put(&format!("{base}/conanmanifest.txt"), manifest).await?.status, StatusCode::CREATED);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let old_revisions = json!({"name": "c", "format": "conan", "criteria": {"prereleases_only": true}});
    let report = run(&app, old_revisions, "cc", packyard_store::db::now_ms()).await?;
    assert_eq!(report.components, 1);
    published(&app, &report).await?;
    let r = app.get("/repository/cc/v2/conans/zlib/1.3/_/_/revisions").await?;
    let revisions: Vec<&str> =
        r.json["revisions"].as_array().into_iter().flatten().filter_map(|x| x["revision"].as_str()).collect();
    assert_eq!(revisions, ["r2"], "{}", r.text);
    Ok(())
}
app_test!(runs_remove_what_the_preview_selected);

async fn runs_of(app: &TestApp, policy: &str) -> anyhow::Result<Value> {
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/cleanup-policies/{policy}/runs"))).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "runs of {policy}: {}", r.text);
    Ok(r.json["items"][0].clone())
}

async fn run_due(app: &TestApp) -> anyhow::Result<usize> {
    Ok(packyard_core::cleanup::run_due(&app.services, packyard_formats::registry(), "test-worker").await?)
}

/// Runs as the worker makes them: asked for ("run now") or due by the schedule (an interval or
/// a cron expression since the last start), an interrupted one again, never while another run
/// holds the repository's lease; each run's status in the API.
async fn the_worker_runs_what_is_due(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    for version in ["1.0", "1.9", "1.10"] {
        let control = format!(
            "Package: hello\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(&control, ".gz")).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let keep_one =
        json!({"name": "keep-one", "format": "apt", "criteria": {"keep_latest": 1}, "repositories": ["debs"]});
    assert_eq!(app.call(post(keep_one.clone())).await?.status, StatusCode::CREATED);
    let idle = runs_of(&app, "keep-one").await?;
    assert_eq!((idle["repository"].as_str(), idle["state"].as_str()), (Some("debs"), Some("idle")), "{idle}");
    assert_eq!(idle["lastStarted"], Value::Null);
    assert_eq!(run_due(&app).await?, 0, "no schedule, nothing asked");

    let uri = "/api/v1/cleanup-policies/keep-one/run";
    let r = app.call(TestRequest::post().uri(&format!("{uri}?repository=other"))).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(message(&r).contains("does not clean other"), "{}", r.text);
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies/nope/run")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = app.send(TestRequest::post().uri(uri), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let r = app.call(TestRequest::post().uri(uri)).await?;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(r.json["items"][0]["state"], "requested", "{}", r.text);
    assert_eq!(r.json["items"][0]["requestedBy"], "admin", "{}", r.text);

    // Another run holds the repository: this one waits for it.
    let db = &app.services.db;
    let (policy_id, repo_id) = {
        let runs = db.cleanup_runs().await?;
        (runs[0].policy_id, runs[0].repository_id)
    };
    let other = db.claim_cleanup(repo_id, policy_id, "another-worker", 60_000).await?;
    let Some(other) = other else { anyhow::bail!("the lease was free") };
    assert_eq!(db.claim_cleanup(repo_id, policy_id, "a-third", 60_000).await?, None, "one run per repository");
    assert_eq!(runs_of(&app, "keep-one").await?["state"], "running");
    assert_eq!(run_due(&app).await?, 0);
    db.release_cleanup(repo_id, &other).await?;
    assert_eq!(runs_of(&app, "keep-one").await?["state"], "requested");
    assert_eq!(run_due(&app).await?, 1);
    let done = runs_of(&app, "keep-one").await?;
    assert_eq!((done["state"].as_str(), done["components"].as_i64()), (Some("idle"), Some(2)), "{done}");
    assert!(done["bytes"].as_i64().is_some_and(|b| b > 0) && done["durationMs"].as_i64().is_some(), "{done}");
    assert!(done["lastFinished"].as_str().is_some_and(|t| t.ends_with('Z')), "{done}");
    assert_eq!((done["error"].clone(), done["requestedBy"].clone()), (Value::Null, Value::Null), "{done}");
    let audit = app.audit().await?;
    for (action, target) in
        [("cleanup.run", "debs"), ("cleanup_policy.run", "keep-one"), ("apt.delete", "debs/hello_1.0_amd64")]
    {
        assert!(audit.contains(&(action.to_string(), target.to_string())), "{action} {target} in {audit:?}");
    }
    let r = app.get("/service/rest/v1/search?repository=debs").await?;
    let left: Vec<&str> =
        r.json["items"].as_array().into_iter().flatten().filter_map(|c| c["version"].as_str()).collect();
    assert_eq!(left, ["1.10"], "{}", r.text);
    assert_eq!(run_due(&app).await?, 0, "served");

    // By the schedule: an interval since the last start, or a cron expression's next instant.
    let back = |hours: i64| format!("UPDATE cleanup_runs SET started_at = started_at - {}", hours * 3_600_000);
    for schedule in [json!({"every_secs": 3600}), json!({"cron": "0 3 * * *"})] {
        let body =
            json!({"format": "apt", "criteria": {"keep_latest": 1}, "repositories": ["debs"], "schedule": schedule});
        let r = app.call(TestRequest::put().uri("/api/v1/cleanup-policies/keep-one").set_json(body)).await?;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        assert_eq!(run_due(&app).await?, 0, "{schedule}: not yet");
        sqlx::query(&back(25)).execute(db.pool()).await?;
        assert_eq!(run_due(&app).await?, 1, "{schedule}: due");
        assert_eq!(run_due(&app).await?, 0, "{schedule}: made");
        assert_eq!(runs_of(&app, "keep-one").await?["components"], 0);
    }

    // A run that never finished (its worker died) is made again; a lease left by a dead worker
    // is taken over once it expires.
    sqlx::query("UPDATE cleanup_runs SET finished_at = NULL").execute(db.pool()).await?;
    assert_eq!(runs_of(&app, "keep-one").await?["state"], "interrupted");
    let stale = db.claim_cleanup(repo_id, policy_id, "dead-worker", -1).await?;
    assert!(stale.is_some());
    assert_eq!(run_due(&app).await?, 1);
    assert_eq!(runs_of(&app, "keep-one").await?["state"], "idle");
    Ok(())
}
app_test!(the_worker_runs_what_is_due);
