//! Webhooks against a real local receiver that is down for a while: every event of every kind is
//! delivered, signed, in order per repository; nothing is lost, and nothing is delivered again
//! after a success. On SQLite (the embedded default) and PostgreSQL (and MariaDB).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::process::{basic, start, status_of, Server};
use common::Repo;
use packyard_model::repos::Format;
use packyard_store::db::Backend;

const PW: &str = "webhooks-admin";

/// One request the receiver got.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) delivery: i64,
    pub(crate) event: String,
    pub(crate) hook: String,
    pub(crate) signature: String,
    pub(crate) body: Vec<u8>,
    /// What the receiver answered.
    pub(crate) status: u16,
}

/// A webhook receiver on `port`: answers 500 to the first `fail_first` requests, then 204.
pub(crate) fn receiver(listener: TcpListener, fail_first: usize) -> Arc<Mutex<Vec<Received>>> {
    slow_receiver(listener, fail_first, Duration::ZERO)
}

/// [`receiver`], taking `delay` over each answer.
fn slow_receiver(listener: TcpListener, fail_first: usize, delay: Duration) -> Arc<Mutex<Vec<Received>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    let failures = Arc::new(AtomicUsize::new(fail_first));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (log, failures) = (log.clone(), failures.clone());
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut reader = BufReader::new(conn.try_clone()?);
                let mut headers = BTreeMap::new();
                let mut line = String::new();
                reader.read_line(&mut line)?;
                loop {
                    line.clear();
                    if reader.read_line(&mut line)? == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                let mut body = vec![0; len];
                reader.read_exact(&mut body)?;
                std::thread::sleep(delay);
                let failing = failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
                let status = if failing { 500 } else { 204 };
                let header = |k: &str| headers.get(k).cloned().unwrap_or_default();
                log.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push(Received {
                    delivery: header("x-packyard-delivery").parse().unwrap_or(-1),
                    event: header("x-packyard-event"),
                    hook: header("x-packyard-webhook"),
                    signature: header("x-packyard-signature-256"),
                    body,
                    status,
                });
                let mut conn = conn;
                write!(conn, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
                Ok(())
            });
        }
    });
    got
}

fn hmac_hex(secret: &str, body: &[u8]) -> anyhow::Result<String> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes())?;
    mac.update(body);
    Ok(format!("sha256={}", hex::encode(mac.finalize().into_bytes())))
}

fn admin(server: &Server, method: &str, path: &str, body: Option<serde_json::Value>) -> anyhow::Result<(u16, String)> {
    let req = ureq::request(method, &format!("{}{path}", server.public)).set("Authorization", &basic(PW));
    status_of(match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    })
}

fn put_module(server: &Server, repo: &str, v: &str) -> anyhow::Result<()> {
    let zip = packyard_codecs::go::testing::simple_module("example.com/hooked", v, v, 0)?;
    let (s, text) = status_of(
        ureq::put(&format!("{}/repository/{repo}/example.com/hooked/@v/{v}.zip", server.public))
            .set("Authorization", &basic(PW))
            .send_bytes(&zip),
    )?;
    anyhow::ensure!(s == 201, "{repo} {v}: {s} {text}");
    Ok(())
}

fn webhooks_through_an_outage(backend: Backend) -> anyhow::Result<()> {
    let mut env = vec![
        ("PACKYARD_SECURITY__ADMIN_PASSWORD".to_string(), PW.to_string()),
        ("PACKYARD_WEBHOOKS__POLL_MS".into(), "50".into()),
        ("PACKYARD_WEBHOOKS__RETRY_INITIAL_MS".into(), "200".into()),
        ("PACKYARD_WEBHOOKS__RETRY_MAX_MS".into(), "400".into()),
        // The receiver is on loopback, which deliveries may reach only when opened.
        ("PACKYARD_WEBHOOKS__ALLOWED_NETWORKS".into(), r#"["127.0.0.1/32"]"#.into()),
    ];
    let _db = if backend == Backend::Sqlite {
        None
    } else {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let Some((url, keep)) = rt.block_on(packyard_store::testing::create_database(backend))? else {
            eprintln!("skipped: no {} server configured", backend.as_str());
            return Ok(());
        };
        env.push(("PACKYARD_DATABASE__URL".into(), url));
        env.push(("PACKYARD_SECURITY__SECRET".into(), "a-secret-for-the-webhook-tests".into()));
        Some(keep)
    };
    let dir = tempfile::tempdir()?;
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let server = start(dir.path(), &pairs)?;
    server.wait_ready()?;

    // The receiver's port, with nothing listening on it yet: the receiver is down.
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let url = format!("http://127.0.0.1:{port}/hooks");
    let (s, text) = admin(
        &server,
        "POST",
        "/api/v1/webhooks",
        Some(serde_json::json!({"name": "everything", "url": url, "events": [
            "component.published", "component.deleted", "repository.created", "repository.updated",
            "repository.deleted", "cleanup.finished"]})),
    )?;
    assert_eq!(s, 201, "{text}");
    let created: serde_json::Value = serde_json::from_str(&text)?;
    let secret = created["secret"].as_str().unwrap_or_default().to_string();
    assert_eq!(secret.len(), 48, "a generated secret, shown once: {text}");
    let (s, text) = admin(&server, "GET", "/api/v1/webhooks/everything", None)?;
    assert_eq!(s, 200);
    assert!(!text.contains(&secret), "the secret is never shown again: {text}");
    // Bad subscriptions are refused with a reason.
    for (body, want) in [
        (serde_json::json!({"name": "x", "url": "ftp://h/", "events": ["component.published"]}), "url"),
        (serde_json::json!({"name": "x", "url": "http://h/", "events": ["component.eaten"]}), "unknown event"),
        (serde_json::json!({"name": "x", "url": "http://h/", "events": []}), "events"),
        (
            serde_json::json!({"name": "x", "url": "http://h/", "events": ["component.published"], "repository": "nope"}),
            "no repository",
        ),
    ] {
        let (s, text) = admin(&server, "POST", "/api/v1/webhooks", Some(body))?;
        assert_eq!(s, 400, "{text}");
        assert!(text.contains(want), "{text}");
    }

    // Changes while the receiver is down: two repositories, uploads, an update, a delete, a
    // cleanup run, another repository's deletion.
    for name in ["alpha", "beta"] {
        common::process::create_repository(&server.public, &basic(PW), Repo::hosted(name, Format::Go).0)?;
    }
    // A subscription to one repository's uploads, with a secret of its own.
    let (s, text) = admin(
        &server,
        "POST",
        "/api/v1/webhooks",
        Some(serde_json::json!({"name": "alpha-only", "url": url, "events": ["component.published"],
            "repository": "alpha", "secret": "alpha-secret-0123456789"})),
    )?;
    assert_eq!(s, 201, "{text}");
    for v in ["v1.0.0", "v1.1.0", "v1.2.0"] {
        put_module(&server, "alpha", v)?;
    }
    put_module(&server, "beta", "v0.1.0")?;
    let (s, text) = admin(&server, "DELETE", "/repository/alpha/example.com/hooked/@v/v1.0.0.zip", None)?;
    assert_eq!(s, 204, "{text}");
    let (s, text) = ureq::request("PATCH", &format!("{}/api/v1/repositories/alpha", server.public))
        .set("Authorization", &basic(PW))
        .set("Content-Type", "application/merge-patch+json")
        .send_string(r#"{"anonymous_read": false}"#)
        .map(|r| (r.status(), r.into_string().unwrap_or_default()))
        .unwrap_or_else(|e| (0, e.to_string()));
    assert_eq!(s, 200, "{text}");
    let policy =
        serde_json::json!({"name": "trim", "format": "go", "criteria": {"keep_latest": 1}, "repositories": ["alpha"]});
    common::process::cleanup_now(&server.public, &basic(PW), policy, "alpha")?;
    let (s, text) = admin(&server, "DELETE", "/api/v1/repositories/beta", None)?;
    assert_eq!(s, 204, "{text}");

    // The attempts so far failed (nothing listens) and are in the delivery log, with the cause.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, text) = admin(&server, "GET", "/api/v1/webhooks/everything/deliveries", None)?;
        let log: serde_json::Value = serde_json::from_str(&text)?;
        let first = log["deliveries"].as_array().and_then(|d| d.last()).cloned().unwrap_or_default();
        if first["attempts"].as_i64().unwrap_or(0) >= 2 {
            assert_eq!(first["state"], "pending", "{first}");
            assert!(first["lastError"].as_str().unwrap_or_default().contains("cannot connect"), "{first}");
            break;
        }
        assert!(Instant::now() < deadline, "no failed attempt recorded: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The receiver comes up, and fails its first two answers too.
    let got = receiver(TcpListener::bind(("127.0.0.1", port))?, 2);
    let deadline = Instant::now() + Duration::from_secs(30);
    let deliveries = loop {
        let (_, text) = admin(&server, "GET", "/api/v1/webhooks/everything/deliveries", None)?;
        let log: serde_json::Value = serde_json::from_str(&text)?;
        let all = log["deliveries"].as_array().cloned().unwrap_or_default();
        let (_, text2) = admin(&server, "GET", "/api/v1/webhooks/alpha-only/deliveries", None)?;
        let log2: serde_json::Value = serde_json::from_str(&text2)?;
        let all2 = log2["deliveries"].as_array().cloned().unwrap_or_default();
        if all.iter().chain(&all2).all(|d| d["state"] == "delivered") && !all.is_empty() {
            break (all, all2);
        }
        assert!(Instant::now() < deadline, "not all delivered:\n{text}\n{text2}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // Nothing more arrives for deliveries already answered with success.
    std::thread::sleep(Duration::from_millis(1500));
    let got = got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();

    let (everything, alpha_only) = deliveries;
    let events: Vec<String> =
        everything.iter().rev().map(|d| d["event"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(
        events,
        [
            "repository.created",
            "repository.created",
            "component.published",
            "component.published",
            "component.published",
            "component.published",
            "component.deleted",
            "repository.updated",
            // The cleanup keeps the newest of v1.1.0 and v1.2.0.
            "component.deleted",
            "cleanup.finished",
            "repository.deleted",
        ],
        "every event, once, in the order they happened"
    );
    assert_eq!(alpha_only.len(), 3, "alpha's uploads only: {alpha_only:?}");
    for d in everything.iter().chain(&alpha_only) {
        assert_eq!(d["lastStatus"], 204, "{d}");
    }

    // Each delivery was answered with success exactly once, and carried a valid signature.
    let mut successes: BTreeMap<i64, usize> = BTreeMap::new();
    for r in &got {
        let secret = if r.hook == "alpha-only" { "alpha-secret-0123456789" } else { secret.as_str() };
        assert_eq!(r.signature, hmac_hex(secret, &r.body)?, "delivery {} of {}", r.delivery, r.hook);
        let body: serde_json::Value = serde_json::from_slice(&r.body)?;
        assert_eq!(body["event"], r.event.as_str());
        if r.status == 204 {
            *successes.entry(r.delivery).or_default() += 1;
        }
    }
    assert_eq!(successes.len(), everything.len() + alpha_only.len());
    assert!(successes.values().all(|n| *n == 1), "a delivery answered with success came again: {successes:?}");
    assert!(got.iter().any(|r| r.status == 500), "the receiver's failures were retried");
    // Per repository, the receiver got the events in the order they happened.
    let mut last_seen: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in got.iter().filter(|r| r.status == 204) {
        let body: serde_json::Value = serde_json::from_slice(&r.body)?;
        let key = (r.hook.clone(), body["repository"].as_str().unwrap_or_default().to_string());
        let id = body["id"].as_i64().unwrap_or(-1);
        if let Some(prev) = last_seen.insert(key.clone(), id) {
            assert!(prev < id, "{key:?}: event {id} after {prev}");
        }
    }
    // The bodies say what happened.
    let published = got
        .iter()
        .filter(|r| r.status == 204 && r.hook == "everything" && r.event == "component.published")
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body))
        .collect::<Result<Vec<_>, _>>()?;
    // Order holds per repository (beta's queue does not wait for alpha's): alpha's first.
    let alpha: Vec<&serde_json::Value> = published.iter().filter(|p| p["repository"] == "alpha").collect();
    let components: Vec<&str> = alpha.iter().map(|p| p["data"]["component"].as_str().unwrap_or_default()).collect();
    assert_eq!(components, ["example.com/hooked@v1.0.0", "example.com/hooked@v1.1.0", "example.com/hooked@v1.2.0"]);
    assert_eq!(alpha[0]["data"]["repository"]["format"], "go");
    assert_eq!(alpha[0]["data"]["actor"], "admin");
    let beta: Vec<&serde_json::Value> = published.iter().filter(|p| p["repository"] == "beta").collect();
    assert_eq!(beta.len(), 1);
    assert_eq!(beta[0]["data"]["component"], "example.com/hooked@v0.1.0");
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn webhooks_on_sqlite() -> anyhow::Result<()> {
    webhooks_through_an_outage(Backend::Sqlite)
}

#[test]
fn webhooks_on_postgres() -> anyhow::Result<()> {
    webhooks_through_an_outage(Backend::Postgres)
}

#[test]
fn webhooks_on_mysql() -> anyhow::Result<()> {
    webhooks_through_an_outage(Backend::MySql)
}

/// Two workers (two replicas' dispatchers on one database) sending at the same time: each
/// delivery is answered with success once, and one repository's events arrive in order.
async fn two_workers_deliver_each_event_once(backend: Backend) -> anyhow::Result<()> {
    let Some(mut app) = common::app::TestApp::with_config(backend, |c| {
        c.webhooks.retry_initial_ms = 50;
        c.webhooks.timeout_ms = 2_000;
        c.webhooks.allowed_networks = vec!["127.0.0.1/32".into()];
    })
    .await?
    else {
        return Ok(());
    };
    app.start_worker();
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/hooks", listener.local_addr()?);
    // Slow answers, and a few failures, so that the two workers' rounds overlap.
    let got = slow_receiver(listener, 3, Duration::from_millis(30));
    let r = app
        .call(actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
            "name": "both", "url": url, "events": ["component.published"], "secret": "two-workers-secret-000"})))
        .await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    app.create(Repo::hosted("mods", Format::Go)).await?;
    let versions: Vec<String> = (0..12).map(|i| format!("v1.0.{i}")).collect();
    for v in &versions {
        let zip = packyard_codecs::go::testing::simple_module("example.com/two", v, v, 0)?;
        let r = app.put(&format!("/repository/mods/example.com/two/@v/{v}.zip"), zip).await?;
        assert_eq!(r.status.as_u16(), 201, "{v}: {}", r.text);
    }
    let replica = app.replica().await?;
    let (a, b) = (app.services.clone(), replica.services.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (x, y) = tokio::join!(packyard_core::webhooks::deliver_due(&a), packyard_core::webhooks::deliver_due(&b));
        x?;
        y?;
        let received = got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.iter().filter(|r| r.status == 204).count();
        if received >= versions.len() {
            break;
        }
        assert!(Instant::now() < deadline, "delivered {received} of {}", versions.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // More rounds find nothing left to send.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (x, y) = tokio::join!(packyard_core::webhooks::deliver_due(&a), packyard_core::webhooks::deliver_due(&b));
        assert_eq!((x?, y?), (0, 0), "nothing is due once all is delivered");
    }
    let got = got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    let ok: Vec<&Received> = got.iter().filter(|r| r.status == 204).collect();
    let mut ids: Vec<i64> = ok.iter().map(|r| r.delivery).collect();
    let received_order = ids.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), ok.len(), "a delivery was answered with success twice: {received_order:?}");
    assert_eq!(received_order, ids, "one repository's events arrive in order");
    let components: Vec<String> = ok
        .iter()
        .map(|r| {
            Ok(serde_json::from_slice::<serde_json::Value>(&r.body)?["data"]["component"]
                .as_str()
                .unwrap_or_default()
                .to_string())
        })
        .collect::<anyhow::Result<_>>()?;
    let want: Vec<String> = versions.iter().map(|v| format!("example.com/two@{v}")).collect();
    assert_eq!(components, want);
    app.finish().await
}
on_every_backend!(two_workers_deliver_each_event_once);

/// A bulk change reaches a subscription that takes batches in a few requests, each
/// `{"batch": [...]}` of one repository's events in order, signed over the whole body; beside it
/// a subscription of one event per request gets every event once, in order.
async fn a_bulk_change_goes_out_in_batches(backend: Backend) -> anyhow::Result<()> {
    let Some(app) = common::app::TestApp::with_config(backend, |c| {
        c.webhooks.allowed_networks = vec!["127.0.0.1/32".into()];
    })
    .await?
    else {
        return Ok(());
    };
    let (batched, single) = (TcpListener::bind("127.0.0.1:0")?, TcpListener::bind("127.0.0.1:0")?);
    let urls = [format!("http://{}/b", batched.local_addr()?), format!("http://{}/s", single.local_addr()?)];
    let (got_batched, got_single) = (receiver(batched, 0), receiver(single, 0));
    for (name, url, batch) in [("batched", &urls[0], true), ("single", &urls[1], false)] {
        let r = app
            .call(actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
                "name": name, "url": url, "events": ["component.published"], "secret": "batches-secret-0000",
                "batch": batch})))
            .await?;
        assert_eq!(r.status.as_u16(), 201, "{}", r.text);
        assert_eq!(r.json["batch"], batch, "{}", r.text);
    }
    // A bulk change's events (as a cleanup run or a promotion writes them).
    app.create(Repo::hosted("mods", Format::Go)).await?;
    let versions: Vec<String> = (0..150).map(|i| format!("v1.0.{i}")).collect();
    for v in &versions {
        let payload = serde_json::json!({"component": format!("example.com/bulk@{v}")}).to_string();
        assert_eq!(app.services.db.enqueue_webhook_event("component.published", Some("mods"), &payload).await?, 2);
    }
    let want: Vec<String> = versions.iter().map(|v| format!("example.com/bulk@{v}")).collect();
    // Two rounds: a run takes at most 100 of one pair's deliveries.
    let mut rounds = 0;
    while packyard_core::webhooks::deliver_due(&app.services).await? > 0 {
        rounds += 1;
        anyhow::ensure!(rounds < 10, "deliveries never ran out");
    }
    assert!(rounds >= 2, "150 deliveries per subscription: runs of at most 100");
    let batches = got_batched.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    assert_eq!(batches.len(), 2, "two requests carry the 150 events");
    let mut components = Vec::new();
    let mut ids = Vec::new();
    for b in &batches {
        assert_eq!((b.event.as_str(), b.status), ("batch", 204));
        assert_eq!(b.signature, hmac_hex("batches-secret-0000", &b.body)?);
        let v: serde_json::Value = serde_json::from_slice(&b.body)?;
        let items = v["batch"].as_array().cloned().unwrap_or_default();
        for item in &items {
            assert_eq!(item["event"], "component.published");
            assert_eq!(item["repository"], "mods");
            components.push(item["data"]["component"].as_str().unwrap_or_default().to_string());
            ids.push(item["delivery"].as_i64().unwrap_or(-1));
        }
    }
    assert_eq!(components, want, "every event once, in order");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let singles = got_single.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    let components: Vec<String> = singles
        .iter()
        .map(|r| {
            Ok(serde_json::from_slice::<serde_json::Value>(&r.body)?["data"]["component"]
                .as_str()
                .unwrap_or_default()
                .to_string())
        })
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(components, want, "one request per event, in order");
    assert!(singles.iter().all(|r| r.event == "component.published" && r.delivery > 0));
    app.finish().await
}
on_every_backend!(a_bulk_change_goes_out_in_batches);

/// The address guard of every outbound request holds for webhooks: a receiver on loopback, a
/// private or a link-local address — however it is spelled — is refused when the subscription is
/// made, and again at connect time (a subscription stored before, or a name that resolves there
/// now: nothing is sent); the delivery log names the class of failure, never the system's
/// error, so it tells no port's state. `webhooks.allowed_networks` opens a network. (Before the
/// guard, all of these were accepted and delivered to.)
async fn webhooks_reach_only_allowed_addresses(backend: Backend) -> anyhow::Result<()> {
    let Some(app) = common::app::TestApp::with_config(backend, |c| {
        c.webhooks.timeout_ms = 2_000;
        c.webhooks.retry_initial_ms = 1;
    })
    .await?
    else {
        return Ok(());
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let got = receiver(listener, 0);
    let subscribe = |name: &str, url: &str| {
        actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
            "name": name, "url": url, "events": ["repository.created"]}))
    };
    for (i, url) in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://0x7f000001:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://10.0.0.1/".to_string(),
        "http://192.168.1.1/".to_string(),
        "http://[fd00::1]/".to_string(),
        "http://[fe80::1]/".to_string(),
    ]
    .iter()
    .enumerate()
    {
        let r = app.call(subscribe(&format!("h{i}"), url)).await?;
        assert_eq!(r.status.as_u16(), 400, "{url}: {}", r.text);
        let message = r.json["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("url: webhook receiver ")
                && message.contains("allow them with webhooks.allowed_networks"),
            "{url}: {message}"
        );
    }
    assert_eq!(app.services.db.list_webhooks().await?.len(), 0, "nothing was stored");

    // Subscriptions stored without the API's check (made before the guard existed): their
    // deliveries are refused at connect time.
    let events = vec!["repository.created".to_string()];
    for (name, url) in
        [("literal", format!("http://127.0.0.1:{port}/")), ("named", format!("http://localhost:{port}/"))]
    {
        let (nonce, ct) =
            app.services.security.keystore.seal(&packyard_core::webhooks::secret_key(name), b"0123456789abcdef")?;
        let write = packyard_store::db::webhooks::WebhookWrite {
            url: &url,
            events: &events,
            repository: None,
            secret: (&nonce, &ct),
            enabled: true,
            batch: false,
            content_selector: None,
        };
        app.services.db.insert_webhook(name, &write).await?;
    }
    app.create(Repo::hosted("mods", Format::Go)).await?;
    assert_eq!(packyard_core::webhooks::deliver_due(&app.services).await?, 2);
    for name in ["literal", "named"] {
        let r =
            app.call(actix_web::test::TestRequest::get().uri(&format!("/api/v1/webhooks/{name}/deliveries"))).await?;
        let d = &r.json["deliveries"][0];
        let error = d["lastError"].as_str().unwrap_or_default();
        assert!(error.starts_with("refused by the address guard: webhook receiver "), "{name}: {d}");
        assert!(
            error.contains(if name == "literal" { "127.0.0.1" } else { "localhost resolves only to" }),
            "{name}: {d}"
        );
        assert!(name == "literal" || !error.contains("127.0.0.1"), "a name's addresses are not told: {d}");
        assert_eq!(d["state"], "pending", "retried later: {d}");
    }
    assert!(got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.is_empty(), "nothing reached the receiver");
    app.finish().await
}
on_every_backend!(webhooks_reach_only_allowed_addresses);

/// With `webhooks.allowed_networks` opening loopback, deliveries go there; a port where nothing
/// listens reads as a failed connection, with no system error text that would tell a closed port
/// from a filtered one.
async fn allowed_networks_open_a_network(backend: Backend) -> anyhow::Result<()> {
    let Some(app) = common::app::TestApp::with_config(backend, |c| {
        c.webhooks.timeout_ms = 2_000;
        c.webhooks.allowed_networks = vec!["127.0.0.0/8".into()];
    })
    .await?
    else {
        return Ok(());
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://127.1:{}/hooks", listener.local_addr()?.port());
    let got = receiver(listener, 0);
    let closed = format!("http://127.0.0.1:{}/", TcpListener::bind("127.0.0.1:0")?.local_addr()?.port());
    // A receiver that redirects to the cloud metadata address: the redirect is not followed.
    let redirector = TcpListener::bind("127.0.0.1:0")?;
    let redirecting = format!("http://{}/", redirector.local_addr()?);
    let followed = Arc::new(AtomicUsize::new(0));
    let asked = followed.clone();
    std::thread::spawn(move || {
        for mut conn in redirector.incoming().flatten() {
            asked.fetch_add(1, Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = conn.write_all(b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    for (name, url) in [("open", url.as_str()), ("closed", closed.as_str()), ("redirecting", redirecting.as_str())] {
        let r = app
            .call(actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
                "name": name, "url": url, "events": ["repository.created"]})))
            .await?;
        assert_eq!(r.status.as_u16(), 201, "{name}: {}", r.text);
    }
    let r = app
        .call(actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
            "name": "v6", "url": "http://[::1]/", "events": ["repository.created"]})))
        .await?;
    assert_eq!(r.status.as_u16(), 400, "::1 is not in 127.0.0.0/8: {}", r.text);
    app.create(Repo::hosted("mods", Format::Go)).await?;
    assert_eq!(packyard_core::webhooks::deliver_due(&app.services).await?, 3);
    assert_eq!(got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.len(), 1, "delivered to the open network");
    let r = app.call(actix_web::test::TestRequest::get().uri("/api/v1/webhooks/redirecting/deliveries")).await?;
    let d = &r.json["deliveries"][0];
    assert_eq!(d["lastStatus"], 302, "{d}");
    assert!(d["lastError"].as_str().unwrap_or_default().contains("a redirect, which is not followed"), "{d}");
    assert_eq!(followed.load(Ordering::SeqCst), 1, "asked once, the redirect not followed");
    let r = app.call(actix_web::test::TestRequest::get().uri("/api/v1/webhooks/closed/deliveries")).await?;
    let d = &r.json["deliveries"][0];
    assert_eq!(
        d["lastError"],
        "cannot connect to the receiver, or no answer: the connection or its TLS handshake failed, or nothing came within webhooks.timeout_ms (2000 ms); the server's log has the cause",
        "{d}"
    );
    assert!(!r.text.to_ascii_lowercase().contains("refused (os error"), "{}", r.text);
    app.finish().await
}
on_every_backend!(allowed_networks_open_a_network);

/// Two writers commit out of order — the first to insert its event commits last — and a worker
/// sends between the two commits: the receiver gets both events, and the ids it sees only grow
/// (one that remembers the last id it saw skips nothing), in the order the writers committed.
/// PostgreSQL and MariaDB: SQLite has one writer at a time, so its commits follow its inserts.
async fn events_go_out_in_commit_order(backend: Backend) -> anyhow::Result<()> {
    let Some(app) = common::app::TestApp::with_config(backend, |c| {
        c.webhooks.allowed_networks = vec!["127.0.0.1/32".into()];
    })
    .await?
    else {
        return Ok(());
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/hooks", listener.local_addr()?);
    let got = receiver(listener, 0);
    let r = app
        .call(actix_web::test::TestRequest::post().uri("/api/v1/webhooks").set_json(serde_json::json!({
            "name": "ordered", "url": url, "events": ["repository.updated"], "secret": "commit-order-secret-00"})))
        .await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let db = &app.services.db;
    for round in 0..3 {
        // The first writer takes its event's row and holds its transaction open.
        let mut first = db.begin().await?;
        let queued = db
            .enqueue_webhook_event_in(
                &mut first,
                "repository.updated",
                Some("r"),
                &format!(r#"{{"writer":"first-{round}"}}"#),
            )
            .await?;
        assert_eq!(queued, 1);
        // The second commits at once, and a worker sends what it sees.
        let second = format!(r#"{{"writer":"second-{round}"}}"#);
        assert_eq!(db.enqueue_webhook_event("repository.updated", Some("r"), &second).await?, 1);
        assert_eq!(packyard_core::webhooks::deliver_due(&app.services).await?, 1, "round {round}: the committed event");
        first.commit().await?;
        assert_eq!(
            packyard_core::webhooks::deliver_due(&app.services).await?,
            1,
            "round {round}: the late commit's event"
        );
        assert_eq!(packyard_core::webhooks::deliver_due(&app.services).await?, 0, "round {round}: nothing else");
    }
    let got = got.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    let mut seen = Vec::new();
    for r in &got {
        assert_eq!(r.status, 204);
        let body: serde_json::Value = serde_json::from_slice(&r.body)?;
        let Some(id) = body["id"].as_i64() else { anyhow::bail!("no id in {body}") };
        seen.push((id, body["data"]["writer"].as_str().unwrap_or_default().to_string()));
    }
    let writers: Vec<&str> = seen.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(writers, ["second-0", "first-0", "second-1", "first-1", "second-2", "first-2"], "commit order");
    let ids: Vec<i64> = seen.iter().map(|(id, _)| *id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "the ids a receiver sees only grow: {seen:?}");
    // The delivery log names each event by the same number.
    let r = app.call(actix_web::test::TestRequest::get().uri("/api/v1/webhooks/ordered/deliveries")).await?;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let log: serde_json::Value = serde_json::from_str(&r.text)?;
    let mut logged: Vec<i64> = log["deliveries"]
        .as_array()
        .map(|ds| ds.iter().filter_map(|d| d["eventId"].as_i64()).collect())
        .unwrap_or_default();
    logged.sort_unstable();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(logged, sorted, "{}", r.text);
    app.finish().await
}

#[actix_web::test]
async fn events_in_commit_order_on_postgres() -> anyhow::Result<()> {
    events_go_out_in_commit_order(Backend::Postgres).await
}

#[actix_web::test]
async fn events_in_commit_order_on_mysql() -> anyhow::Result<()> {
    events_go_out_in_commit_order(Backend::MySql).await
}
