//! Storage quotas (#43): a repository's hard limit refuses the upload that would pass it with
//! 507 and stores nothing, a delete frees room at once, a soft limit is told (webhook, gauges,
//! the UI's banner, the admin API); the blob store's limits likewise, with Nexus's
//! quota-status; the definitions' errors.

use actix_web::http::{header, StatusCode};
use actix_web::test::TestRequest;
use packyard_codecs::apt::testing::deb;
use packyard_model::config::Config;
use packyard_model::quota::Quota;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use crate::common::app::{As, Repo, TestApp};

fn tool(name: &str) -> Vec<u8> {
    deb(&format!("Package: {name}\nVersion: 1.0\nArchitecture: amd64\nDescription: {name}\n"), ".gz")
}

fn pool(repo: &str, name: &str) -> String {
    format!("/repository/{repo}/pool/main/t/{name}/{name}_1.0_amd64.deb")
}

/// Uploads without waiting for the publication (no worker runs: the blob store holds only the
/// uploads, so its use is known to the byte).
async fn upload(app: &TestApp, repo: &str, bytes: &[u8]) -> anyhow::Result<crate::common::Reply> {
    app.send(TestRequest::post().uri(&format!("/repository/{repo}/")).set_payload(bytes.to_vec()), As::Admin).await
}

fn len(b: &[u8]) -> u64 {
    b.len() as u64
}

async fn quota_status(app: &TestApp, repo: &str) -> anyhow::Result<Value> {
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/{repo}"))).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    Ok(r.json["quota_status"].clone())
}

/// A repository's quota: the third upload would pass the hard limit (507 naming it and the use,
/// no blob kept, the repository unchanged); a delete frees room at once for it; crossing the soft
/// limit is told once to a webhook, in the gauges, the admin API and the UI's banner.
async fn a_hard_quota_refuses_what_would_pass_it(app: TestApp) -> anyhow::Result<()> {
    // This process counts usage (as the worker's does): its gauges are the instance's.
    app.services.count_usage();
    let m = &app.services.metrics;
    let (a, b, c) = (tool("tool-a"), tool("tool-b"), tool("tool-c"));
    let (soft, hard) = (len(&a), len(&a) + len(&b) + len(&c) - 1);
    app.create(Repo::hosted("q", Format::Apt).with(json!({"quota": {"soft_bytes": soft, "hard_bytes": hard}}))).await?;
    let body = json!({"name": "quota-hook", "url": "http://127.0.0.1:9/hook", "events": ["quota.exceeded"]});
    let r = app.call(TestRequest::post().uri("/api/v1/webhooks").set_json(&body)).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);

    let r = upload(&app, "q", &a).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let s = quota_status(&app, "q").await?;
    assert_eq!((s["used_bytes"].as_u64(), s["standing"].as_str()), (Some(len(&a)), Some("within")), "{s}");
    let r = upload(&app, "q", &b).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let used = len(&a) + len(&b);
    // The gauges follow the write itself (nothing else has counted since).
    assert_eq!(m.quota_standing.with_label_values(&["repository", "q"]).get(), 1);
    assert_eq!(m.quota_used_bytes.with_label_values(&["repository", "q"]).get(), used as i64);
    let s = quota_status(&app, "q").await?;
    assert_eq!((s["used_bytes"].as_u64(), s["standing"].as_str()), (Some(used), Some("soft")), "{s}");
    assert_eq!((s["soft_bytes"].as_u64(), s["hard_bytes"].as_u64()), (Some(soft), Some(hard)), "{s}");

    // Past the hard limit: 507, the message names the quota and the use; nothing is kept.
    let r = upload(&app, "q", &c).await?;
    assert_eq!(r.status, StatusCode::INSUFFICIENT_STORAGE, "{}", r.text);
    let expected = format!(
        "repository q would go over its hard quota: quota.hard_bytes is {hard} bytes ({}), it uses {used} bytes ({}), and this upload would take it to {} ({})",
        packyard_model::quota::human(hard),
        packyard_model::quota::human(used),
        used + len(&c),
        packyard_model::quota::human(used + len(&c)),
    );
    assert!(r.text.contains(&expected), "{}\nexpected: {expected}", r.text);
    assert!(!app.has_blob_row(&c).await?, "the refused upload leaves no blob");
    assert_eq!(app.get(&pool("q", "tool-c")).await?.status, StatusCode::NOT_FOUND);
    assert_eq!(quota_status(&app, "q").await?["used_bytes"].as_u64(), Some(used));
    // Reads go on.
    assert_eq!(app.get(&pool("q", "tool-a")).await?.bytes, a);

    // A delete frees room at once: the same upload is taken.
    let r = app.call(TestRequest::delete().uri(&pool("q", "tool-b"))).await?;
    assert!(r.status.is_success(), "{}", r.text);
    assert_eq!(quota_status(&app, "q").await?["used_bytes"].as_u64(), Some(len(&a)));
    let r = upload(&app, "q", &c).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.get(&pool("q", "tool-c")).await?.bytes, c);
    let now = len(&a) + len(&c);
    let s = quota_status(&app, "q").await?;
    assert_eq!(s["used_bytes"].as_u64(), Some(now));

    // The soft limit was crossed twice (the second upload, and the last one after the delete
    // brought the use back to it), told each time.
    let hook = app.services.db.webhook("quota-hook").await?.ok_or_else(|| anyhow::anyhow!("no webhook"))?;
    let mut told = Vec::new();
    for d in app.services.db.list_deliveries(hook.id, None, 100).await? {
        let payload: Value = serde_json::from_str(&d.payload)?;
        assert_eq!(
            (d.event.as_str(), &payload["scope"], &payload["name"]),
            ("quota.exceeded", &json!("repository"), &json!("q"))
        );
        assert_eq!(payload["soft_bytes"].as_u64(), Some(soft));
        told.push(payload["used_bytes"].as_u64().unwrap_or_default());
    }
    told.sort_unstable();
    assert_eq!(told, [used, now]);

    // The gauges, and the UI's banner.
    assert_eq!(m.quota_standing.with_label_values(&["repository", "q"]).get(), 1);
    assert_eq!(m.quota_used_bytes.with_label_values(&["repository", "q"]).get(), now as i64);
    assert_eq!(m.quota_limit_bytes.with_label_values(&["repository", "q", "hard"]).get(), hard as i64);
    for page in ["/", "/browse/q"] {
        let r = app.call(TestRequest::get().uri(page)).await?;
        assert_eq!(r.status, StatusCode::OK, "{page}");
        let banner = format!(
            "<p class=\"warning quota\" role=\"alert\" data-scope=\"repository\" data-name=\"q\">repository q uses {now} bytes"
        );
        assert!(r.text.contains(&banner), "{page} has no banner: {}", r.text);
        assert!(r.text.contains("over its soft quota"), "{page}");
    }
    // Raised: the banner goes.
    let patch = json!({"quota": {"soft_bytes": hard, "hard_bytes": hard}});
    let r = app
        .call(
            TestRequest::patch()
                .uri("/api/v1/repositories/q")
                .insert_header(("content-type", "application/merge-patch+json"))
                .set_payload(patch.to_string()),
        )
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["quota"], json!({"soft_bytes": hard, "hard_bytes": hard}));
    let r = app.call(TestRequest::get().uri("/browse/q")).await?;
    assert!(!r.text.contains("class=\"warning quota\""), "{}", r.text);
    Ok(())
}
app_test!(a_hard_quota_refuses_what_would_pass_it, |c: &mut Config| c.webhooks.allowed_networks =
    vec!["127.0.0.1/32".into()]);

/// Definitions: a soft limit above the hard one, a zero, a quota on a group are refused with a
/// message naming the key.
async fn quota_definitions_are_checked(app: TestApp) -> anyhow::Result<()> {
    for (body, message) in [
        (
            json!({"quota": {"soft_bytes": 10, "hard_bytes": 5}}),
            "`quota.soft_bytes` (10) is above `quota.hard_bytes` (5)",
        ),
        (json!({"quota": {"hard_bytes": 0}}), "`quota.hard_bytes` must be at least 1 byte"),
        (json!({"quota": {"hard_bytes": 10, "limit": 3}}), "unknown field `limit`"),
    ] {
        let r = app
            .call(
                TestRequest::post()
                    .uri("/api/v1/repositories")
                    .set_json(&Repo::hosted("bad", Format::Apt).with(body).0),
            )
            .await?;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert!(r.text.contains(message), "{}", r.text);
    }
    app.create(Repo::hosted("member", Format::Apt)).await?;
    let group = json!({"name": "g", "format": "apt", "type": "group", "group": {"members": ["member"]}, "quota": {"hard_bytes": 10}});
    let r = app.call(TestRequest::post().uri("/api/v1/repositories").set_json(&group)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("`quota` does not apply to a group repository"), "{}", r.text);
    Ok(())
}
app_test!(quota_definitions_are_checked);

/// The blob store's limit: `blobs.quota.hard_bytes` is exactly the first package's size.
fn store_quota(c: &mut Config) {
    let first = len(&tool("tool-a"));
    c.blobs.quota = Quota { soft_bytes: Some(first - 1), hard_bytes: Some(first) };
}

/// The blob store's quota: an upload of new bytes past it is refused (507 naming
/// `blobs.quota.hard_bytes`, nothing kept) whichever repository it goes to; the same bytes
/// again add nothing and are taken; Nexus's quota-status and blob store show it.
async fn the_blob_store_quota_counts_every_repository(app: TestApp) -> anyhow::Result<()> {
    app.services.count_usage();
    let (a, b) = (tool("tool-a"), tool("tool-b"));
    app.create(Repo::hosted("one", Format::Apt)).await?;
    app.create(Repo::hosted("two", Format::Apt)).await?;
    let r = app.call(TestRequest::get().uri("/service/rest/v1/blobstores/default/quota-status")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["isViolation"], false, "{}", r.text);
    assert_eq!(r.json["blobStoreName"], "default");

    assert_eq!(upload(&app, "one", &a).await?.status, StatusCode::CREATED);
    let r = upload(&app, "two", &b).await?;
    assert_eq!(r.status, StatusCode::INSUFFICIENT_STORAGE, "{}", r.text);
    assert!(
        r.text.contains(&format!(
            "blob store default would go over its hard quota: blobs.quota.hard_bytes is {} bytes",
            len(&a)
        )) && r.text.contains(&format!("it uses {} bytes", len(&a))),
        "{}",
        r.text
    );
    assert!(!app.has_blob_row(&b).await?, "the refused upload leaves no blob");
    // The same bytes in another repository add nothing to the store: taken.
    let r = upload(&app, "two", &a).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(app.get(&pool("two", "tool-a")).await?.bytes, a);

    let r = app.call(TestRequest::get().uri("/service/rest/v1/blobstores/default/quota-status")).await?;
    assert_eq!(r.json["isViolation"], true, "{}", r.text);
    let message = r.json["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("blob store default uses {} bytes", len(&a)))
            && message.contains("at its hard quota"),
        "{message}"
    );
    let r = app.call(TestRequest::get().uri("/service/rest/v1/blobstores")).await?;
    assert_eq!(r.json[0]["softQuota"], json!({"type": "spaceUsedQuota", "limit": len(&a) - 1}), "{}", r.text);
    let m = &app.services.metrics;
    assert_eq!(m.quota_standing.with_label_values(&["blob_store", "default"]).get(), 2);
    // An administrator sees the blob store's banner; anyone else does not.
    let r = app.get("/").await?;
    assert!(r.status == StatusCode::OK && !r.text.contains("data-scope=\"blob_store\""), "{}", r.text);
    let session = crate::selectors::sign_in(&app, "admin", crate::common::ADMIN_PW).await?;
    let page = TestRequest::get().uri("/").insert_header((header::COOKIE, format!("packyard_session={session}")));
    let r = app.send(page, As::Anonymous).await?;
    assert!(r.text.contains("data-scope=\"blob_store\" data-name=\"default\">blob store default uses"), "{}", r.text);
    Ok(())
}
app_test!(the_blob_store_quota_counts_every_repository, store_quota);

/// A proxy at its hard quota caches no more package files: the one that would not fit is a 507
/// naming the quota (nothing kept); what it cached is still served.
async fn a_proxy_stops_caching_at_its_hard_quota(app: TestApp) -> anyhow::Result<()> {
    use crate::common::process::{basic, create_repository, start, status_of};
    const PW: &str = "quota-upstream-pw";
    let (a, b) = (tool("tool-a"), tool("tool-b"));
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    create_repository(&upstream.public, &basic(PW), Repo::hosted("up", Format::Apt))?;
    for deb in [&a, &b] {
        let url = format!("{}/repository/up/?wait=true", upstream.public);
        let (s, text) = status_of(ureq::post(&url).set("Authorization", &basic(PW)).send_bytes(deb))?;
        anyhow::ensure!(s == 201, "upload upstream: {s} {text}");
    }
    let remote = format!("{}/repository/up/", upstream.public);
    let hard = len(&a) + 1;
    app.create(Repo::proxy("px", Format::Apt, &remote).with(json!({"quota": {"hard_bytes": hard}}))).await?;
    let r = app.get(&pool("px", "tool-a")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.bytes, a);
    let r = app.get(&pool("px", "tool-b")).await?;
    assert_eq!(r.status, StatusCode::INSUFFICIENT_STORAGE, "{}", r.text);
    let expected = format!(
        "/pool/main/t/tool-b/tool-b_1.0_amd64.deb is not fetched: repository px would go over its hard quota: quota.hard_bytes is {hard} bytes"
    );
    assert!(r.text.contains(&expected), "{}\nexpected: {expected}", r.text);
    assert!(!app.has_blob_row(&b).await?, "nothing of the refused file is kept");
    // The cached file is still served, and the repository's use is the one file.
    assert_eq!(app.get(&pool("px", "tool-a")).await?.bytes, a);
    assert_eq!(quota_status(&app, "px").await?["used_bytes"].as_u64(), Some(len(&a)));
    Ok(())
}
app_test!(a_proxy_stops_caching_at_its_hard_quota, |c: &mut Config| c.proxy.allow_private_addresses = true);

/// Two uploads at once, each of which fits alone but not both: one is taken, the other gets 507
/// (the writers to a repository with a quota count one after another).
async fn concurrent_uploads_do_not_both_pass_a_hard_quota(app: TestApp) -> anyhow::Result<()> {
    let (a, b) = (tool("tool-a"), tool("tool-b"));
    let hard = len(&a) + len(&b) - 1;
    app.create(Repo::hosted("q", Format::Apt).with(json!({"quota": {"hard_bytes": hard}}))).await?;
    for round in 0..3 {
        let (ra, rb) = tokio::join!(upload(&app, "q", &a), upload(&app, "q", &b));
        let (ra, rb) = (ra?, rb?);
        let mut statuses = [ra.status.as_u16(), rb.status.as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [201, 507], "round {round}: {} / {}", ra.text, rb.text);
        let taken = if ra.status == StatusCode::CREATED { (&a, "tool-a") } else { (&b, "tool-b") };
        assert_eq!(quota_status(&app, "q").await?["used_bytes"].as_u64(), Some(len(taken.0)));
        let r = app.call(TestRequest::delete().uri(&pool("q", taken.1))).await?;
        assert!(r.status.is_success(), "{}", r.text);
    }
    Ok(())
}
app_test!(concurrent_uploads_do_not_both_pass_a_hard_quota);
