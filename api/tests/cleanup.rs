//! Cleanup policies through the admin API on every backend: created, listed, replaced and
//! deleted by administrators only, each rule a policy breaks named, the repositories it cleans
//! checked, and the audit log's entries.

mod common;

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
    let user = json!({"username": "dave", "password": "dave-password", "roles": []});
    assert_eq!(app.call(TestRequest::post().uri("/api/v1/users").set_json(&user)).await?.status, StatusCode::CREATED);
    let body = json!({"name": "p", "format": "go", "criteria": {"keep_latest": 1}});
    let dave = || As::basic("dave", "dave-password");
    let r = app.send(post(body.clone()), dave()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let r = app.send(post(body), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let r = app.send(TestRequest::get().uri("/api/v1/cleanup-policies"), dave()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    Ok(())
}
app_test!(policies_are_for_administrators);
