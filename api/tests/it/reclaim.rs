//! Storage reclamation on every backend: an artifact blob that nothing references any more is
//! deleted after the grace period — unless another repository still uses it or its bytes were
//! stored again meanwhile —, a dry run changes nothing, and an upload that races the collector
//! (forced with pause points) either keeps its bytes or is refused, never acknowledged without
//! them.

use crate::common;

use actix_web::http::StatusCode;
use packyard_core::reclaim::{self, Verdict};
use packyard_model::repos::Format;
use sha2::Digest as _;

use common::app::TestApp;
use common::Repo;

fn deb(name: &str, version: &str) -> Vec<u8> {
    let control = format!(
        "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
    );
    packyard_codecs::apt::testing::deb(&control, ".gz")
}

fn pool(name: &str, version: &str) -> String {
    format!("pool/main/{}/{name}/{name}_{version}_amd64.deb", &name[..1])
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The blob's file in the file store.
fn on_disk(app: &TestApp, bytes: &[u8]) -> bool {
    let h = sha(bytes);
    app.services.config.blobs.path.join("sha256").join(&h[0..2]).join(&h[2..4]).join(&h).is_file()
}

/// One sweep: what it freed and what waits, by digest.
async fn sweep(app: &TestApp, dry_run: bool) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (mut freed, mut waiting) = (Vec::new(), Vec::new());
    reclaim::sweep(&app.services, packyard_formats::registry(), dry_run, |b, v| match v {
        Verdict::Freed => freed.push(b.sha256.clone()),
        Verdict::Waiting { .. } => waiting.push(b.sha256.clone()),
    })
    .await?;
    Ok((freed, waiting))
}

/// As if `ms` had passed since every blob was stored and found unreferenced.
async fn age(app: &TestApp, ms: i64) -> anyhow::Result<()> {
    let db = &app.services.db;
    sqlx::query(&format!(
        "UPDATE blobs SET created_at = created_at - {ms}, released_at = CASE WHEN released_at IS NULL THEN NULL ELSE released_at - {ms} END"
    ))
    .execute(db.pool())
    .await?;
    Ok(())
}

/// Until every change is published.
async fn settled(app: &TestApp) -> anyhow::Result<()> {
    for _ in 0..500 {
        app.publish().await;
        if app.services.db.backlog().await?.0 == 0 {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    anyhow::bail!("changes still unpublished after 5 s")
}

const TWO_DAYS: i64 = 2 * 86_400_000;

/// A blob two repositories share survives the deletion from one; a blob nothing references is
/// kept for the grace period, then its file and row go; a dry run only tells; bytes stored
/// again (even by an upload that was refused) wait a whole grace period more.
async fn unreferenced_blobs_go_after_the_grace_period(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("debs2", Format::Apt)).await?;
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    let (shared, own) = (deb("shared", "1.0"), deb("own", "1.0"));
    for (repo, bytes) in [("debs", &shared), ("debs2", &shared), ("debs", &own)] {
        let r = app.post(&format!("/repository/{repo}/"), bytes.clone()).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    for (repo, name) in [("debs", "shared"), ("debs", "own")] {
        let r = app.delete(&format!("/repository/{repo}/{}", pool(name, "1.0"))).await?;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    }
    // Found unreferenced now: kept for the grace period (a day by default).
    let (freed, waiting) = sweep(&app, false).await?;
    assert_eq!((freed, waiting), (vec![], vec![sha(&own)]), "the shared blob is still debs2's");
    assert!(on_disk(&app, &own) && on_disk(&app, &shared));

    age(&app, TWO_DAYS).await?;
    let (freed, _) = sweep(&app, true).await?;
    assert_eq!(freed, [sha(&own)], "the dry run names it");
    assert!(on_disk(&app, &own) && app.has_blob_row(&own).await?, "and changes nothing");

    // Its bytes stored again by an upload that is refused: not referenced, but young again.
    let r = app.put("/repository/gomods/example.com/m/@v/v1.0.0.zip", own.clone()).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let (freed, waiting) = sweep(&app, false).await?;
    assert_eq!((freed, waiting), (vec![], vec![sha(&own)]), "uploaded again within the grace period");
    assert!(on_disk(&app, &own));

    age(&app, TWO_DAYS).await?;
    let (freed, waiting) = sweep(&app, false).await?;
    assert_eq!((freed, waiting), (vec![sha(&own)], vec![]));
    assert!(!on_disk(&app, &own), "the file is gone");
    assert!(!app.has_blob_row(&own).await?, "and its row");
    assert!(on_disk(&app, &shared), "debs2 still serves the shared blob");
    let r = app.get(&format!("/repository/debs2/{}", pool("shared", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&shared)));

    // Referenced again after it was found unreferenced: unmarked, and kept.
    let r = app.delete(&format!("/repository/debs2/{}", pool("shared", "1.0"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert_eq!(sweep(&app, false).await?.1, [sha(&shared)]);
    age(&app, TWO_DAYS).await?;
    let r = app.post("/repository/debs2/", shared.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    age(&app, TWO_DAYS).await?;
    assert_eq!(sweep(&app, false).await?, (vec![], vec![]), "uploaded again: referenced");
    let r = app.get(&format!("/repository/debs2/{}", pool("shared", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&shared)));
    Ok(())
}
app_test!(unreferenced_blobs_go_after_the_grace_period);

/// The window the first wave left open, forced: the collector holds an unreferenced blob's row
/// (pause point `blobs.collect.locked`) while an upload of the same bytes writes them (pause
/// point `upload.stored`); the collector deletes the bytes and commits; then the upload records
/// its row. The upload must not be acknowledged: it is refused (503, send it again), nothing of
/// it is listed, and sending it again stores it whole.
async fn an_upload_racing_the_collector_is_never_acknowledged_without_its_bytes(
    mut app: TestApp,
) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let bytes = deb("racy", "1.0");
    assert_eq!(app.post("/repository/debs/", bytes.clone()).await?.status, StatusCode::CREATED);
    let r = app.delete(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    sweep(&app, false).await?;
    age(&app, TWO_DAYS).await?;

    let collecting = packyard_store::pause::arm("blobs.collect.locked");
    let uploading = packyard_store::pause::arm("upload.stored");
    let collected = tokio::sync::Notify::new();
    let collector = async {
        let r = sweep(&app, false).await;
        collected.notify_one();
        r
    };
    let upload = app.post("/repository/debs/", bytes.clone());
    let conductor = async {
        // Each point once: the collector goes on to other blobs afterwards.
        collecting.reached().await;
        packyard_store::pause::disarm("blobs.collect.locked");
        uploading.reached().await;
        packyard_store::pause::disarm("upload.stored");
        // The upload's bytes are in place; the collector deletes them and commits.
        collecting.release();
        collected.notified().await;
        uploading.release();
    };
    let (swept, uploaded, ()) = tokio::join!(collector, upload, conductor);
    assert_eq!(swept?.0, [sha(&bytes)], "the collector took the blob");
    let uploaded = uploaded?;
    assert_eq!(uploaded.status, StatusCode::SERVICE_UNAVAILABLE, "{}", uploaded.text);
    assert!(uploaded.text.contains("removed by the blob collector") && uploaded.text.contains("send the upload again"));
    settled(&app).await?;
    let packages = app.get("/repository/debs/dists/stable/main/binary-amd64/Packages").await?;
    assert!(!packages.text.contains("Package: racy"), "{}", packages.text);
    let found = app.get("/service/rest/v1/search?repository=debs&name=racy").await?;
    assert_eq!(found.json["items"], serde_json::json!([]), "{}", found.text);
    assert_eq!(app.get(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?.status, StatusCode::NOT_FOUND);

    let r = app.post("/repository/debs/", bytes.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.get(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&bytes)));
    assert!(on_disk(&app, &bytes));
    Ok(())
}
app_test!(an_upload_racing_the_collector_is_never_acknowledged_without_its_bytes);

/// The other order: the upload records its row before the collector looks; the blob is young
/// again and the collector leaves it, so the upload is acknowledged with its bytes.
async fn an_upload_recorded_first_keeps_its_bytes(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let bytes = deb("racy", "1.0");
    assert_eq!(app.post("/repository/debs/", bytes.clone()).await?.status, StatusCode::CREATED);
    let r = app.delete(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    sweep(&app, false).await?;
    age(&app, TWO_DAYS).await?;
    let r = app.post("/repository/debs/", bytes.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(sweep(&app, false).await?, (vec![], vec![]));
    let r = app.get(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&bytes)));
    Ok(())
}
app_test!(an_upload_recorded_first_keeps_its_bytes);

/// `packyard-api blobs gc` on the S3 store, as an operator runs it: `--dry-run` names what it
/// would free and changes nothing; without it, the unreferenced blob's object is gone from the
/// bucket and the one still referenced is served whole.
#[test]
fn blobs_gc_frees_unreferenced_objects_from_s3() -> anyhow::Result<()> {
    use common::process::{basic, create_repository, run_to_end, start, status_of};
    let Ok(s3_url) = std::env::var("TEST_S3_URL") else {
        eprintln!("skipped: TEST_S3_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let bucket = format!("packyard-gc-{}", hex::encode(rand::random::<[u8; 4]>()));
    rt.block_on(packyard_store::blobs::s3::create_test_bucket(&s3_url, &bucket))?;
    let s3 = packyard_model::config::S3Config {
        bucket: Some(bucket.clone()),
        endpoint: Some(s3_url.trim_end_matches('/').to_string()),
        region: Some("us-east-1".into()),
        access_key_id: Some("testing".into()),
        secret_access_key: Some("testing".into()),
    };
    let store =
        packyard_store::blobs::s3::S3Store::open(&s3, std::sync::Arc::new(packyard_store::metrics::Metrics::new()?))?;
    let stored = |bytes: &[u8]| -> anyhow::Result<bool> {
        use packyard_store::blobs::BlobStore as _;
        let digest = packyard_store::blobs::Sha256Hex::parse(&sha(bytes))?;
        Ok(rt.block_on(store.stat(&digest))?.is_some())
    };
    let dir = tempfile::tempdir()?;
    let endpoint = s3_url.trim_end_matches('/').to_string();
    let env = [
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
        ("PACKYARD_BLOBS__KIND", "s3"),
        ("PACKYARD_BLOBS__S3__BUCKET", bucket.as_str()),
        ("PACKYARD_BLOBS__S3__ENDPOINT", endpoint.as_str()),
        ("PACKYARD_BLOBS__S3__ACCESS_KEY_ID", "testing"),
        ("PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY", "testing"),
        ("PACKYARD_WORKER__BLOB_GRACE_SECS", "0"),
    ];
    let (gone, kept) = (deb("gone", "1.0"), deb("kept", "1.0"));
    {
        let server = start(dir.path(), &env)?;
        server.wait_ready()?;
        create_repository(&server.public, &basic("pw"), Repo::hosted("debs", Format::Apt))?;
        for bytes in [&gone, &kept] {
            let r = ureq::post(&format!("{}/repository/debs/?wait=true", server.public))
                .set("Authorization", &basic("pw"))
                .send_bytes(bytes);
            assert_eq!(status_of(r)?.0, 201);
        }
        let r = ureq::delete(&format!("{}/repository/debs/{}", server.public, pool("gone", "1.0")))
            .set("Authorization", &basic("pw"))
            .call();
        assert_eq!(status_of(r)?.0, 204);
        assert!(server.terminate()?.success());
    }
    assert!(stored(&gone)? && stored(&kept)?);

    let (code, out, err) = run_to_end(dir.path(), &["blobs", "gc", "--dry-run"], &env)?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("would free {} {} bytes", sha(&gone), gone.len())), "{out}");
    assert!(!out.contains(&sha(&kept)), "{out}");
    assert!(out.contains("would free 1 blobs"), "{out}");
    assert!(stored(&gone)?, "a dry run deletes nothing");

    let (code, out, err) = run_to_end(dir.path(), &["blobs", "gc"], &env)?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("freed {} {} bytes", sha(&gone), gone.len())), "{out}");
    assert!(!stored(&gone)?, "the object is gone from the bucket");
    assert!(stored(&kept)?);
    let (code, out, _) = run_to_end(dir.path(), &["blobs", "gc", "--dry-run"], &env)?;
    assert_eq!(code, 0);
    assert!(out.contains("would free 0 blobs, 0 bytes"), "{out}");

    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    let resp = ureq::get(&format!("{}/repository/debs/{}", server.public, pool("kept", "1.0"))).call()?;
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut resp.into_reader(), &mut body)?;
    assert_eq!(sha(&body), sha(&kept));
    Ok(())
}

/// One scan of the store for bytes no row names: what it freed and what waits, by digest.
async fn strays(app: &TestApp, dry_run: bool) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (mut freed, mut waiting) = (Vec::new(), Vec::new());
    reclaim::sweep_strays(&app.services, dry_run, |b, v| match v {
        Verdict::Freed => freed.push(b.digest.to_string()),
        Verdict::Waiting { .. } => waiting.push(b.digest.to_string()),
    })
    .await?;
    freed.sort();
    Ok((freed, waiting))
}

/// Bytes in the store that no row names (#44) — a write interrupted between its bytes and its
/// row, a proxy fetch refused for a wrong checksum — are found by listing the store itself, on
/// the file store and on S3: a dry run names those older than the grace period and changes
/// nothing; a scan deletes them and keeps the young ones and every package's. The collection
/// is as safe against an upload of the same bytes as any (forced with the pause points): the
/// upload is refused (503, send it again), never acknowledged without its bytes, and sent again
/// it is stored whole. Before #44 nothing found such bytes.
async fn stray_bytes_are_found_and_collected(backend: packyard_store::db::Backend, s3: bool) -> anyhow::Result<()> {
    let s3_config = if s3 {
        let Ok(url) = std::env::var("TEST_S3_URL") else {
            eprintln!("skipped: TEST_S3_URL is not set (scripts/test.sh sets it)");
            return Ok(());
        };
        let bucket = format!("packyard-strays-{}", hex::encode(rand::random::<[u8; 4]>()));
        packyard_store::blobs::s3::create_test_bucket(&url, &bucket).await?;
        Some(packyard_model::config::S3Config {
            bucket: Some(bucket),
            endpoint: Some(url.trim_end_matches('/').to_string()),
            region: Some("us-east-1".into()),
            access_key_id: Some("testing".into()),
            secret_access_key: Some("testing".into()),
        })
    } else {
        None
    };
    let Some(mut app) = TestApp::with_config(backend, |c| {
        c.worker.blob_grace_secs = 2;
        if let Some(s3) = s3_config {
            c.blobs.kind = packyard_model::config::BlobsKind::S3;
            c.blobs.s3 = s3;
        }
    })
    .await?
    else {
        return Ok(());
    };
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let kept = deb("kept", "1.0");
    assert_eq!(app.post("/repository/debs/", kept.clone()).await?.status, StatusCode::CREATED);
    let store = app.services.blobs.clone();
    let stored = |bytes: &[u8]| {
        let (store, digest) = (store.clone(), packyard_store::blobs::Sha256Hex::parse(&sha(bytes)));
        async move { anyhow::Ok(store.stat(&digest?).await?.is_some()) }
    };
    // Bytes with no row: an interrupted write's, and a package's whose upload will race the scan.
    let lost = b"bytes whose write was interrupted before their row was recorded".to_vec();
    let racy = deb("racy", "1.0");
    for bytes in [&lost, &racy] {
        store.put_bytes(bytes).await?;
    }
    tokio::time::sleep(std::time::Duration::from_millis(2_300)).await;
    let young = b"bytes stored a moment ago: an upload may be about to record them".to_vec();
    store.put_bytes(&young).await?;

    let mut want = vec![sha(&lost), sha(&racy)];
    want.sort();
    let (freed, waiting) = strays(&app, true).await?;
    assert_eq!((&freed, &waiting), (&want, &vec![sha(&young)]), "a package's bytes have a row: never listed");
    for bytes in [&lost, &racy, &young, &kept] {
        assert!(stored(bytes).await?, "a dry run deletes nothing");
    }

    let collecting = packyard_store::pause::arm("blobs.collect.locked");
    let uploading = packyard_store::pause::arm("upload.stored");
    let collected = tokio::sync::Notify::new();
    let collector = async {
        let r = strays(&app, false).await;
        collected.notify_one();
        r
    };
    // The upload starts once the scan has listed the store and holds its first stray's row (an
    // upload writing first would make the bytes young again, and the scan would leave them).
    let listed = tokio::sync::Notify::new();
    let upload = async {
        listed.notified().await;
        app.post("/repository/debs/", racy.clone()).await
    };
    let conductor = async {
        collecting.reached().await;
        packyard_store::pause::disarm("blobs.collect.locked");
        listed.notify_one();
        uploading.reached().await;
        packyard_store::pause::disarm("upload.stored");
        // The upload's bytes are in place; the scan deletes them and commits.
        collecting.release();
        collected.notified().await;
        uploading.release();
    };
    let (swept, uploaded, ()) = tokio::join!(collector, upload, conductor);
    assert_eq!(swept?.0, want);
    let uploaded = uploaded?;
    assert_eq!(uploaded.status, StatusCode::SERVICE_UNAVAILABLE, "{}", uploaded.text);
    assert!(uploaded.text.contains("removed by the blob collector") && uploaded.text.contains("send the upload again"));
    assert!(!stored(&lost).await? && !stored(&racy).await?, "the stray bytes are gone");
    assert!(stored(&young).await? && stored(&kept).await?);

    let r = app.post("/repository/debs/", racy.clone()).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = app.get(&format!("/repository/debs/{}", pool("racy", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&racy)));
    let r = app.get(&format!("/repository/debs/{}", pool("kept", "1.0"))).await?;
    assert_eq!((r.status, sha(&r.bytes)), (StatusCode::OK, sha(&kept)));
    // (Once the worker's builds are recorded: a build's bytes are stored before their rows.)
    settled(&app).await?;
    assert_eq!(strays(&app, true).await?, (vec![], vec![sha(&young)]), "only the young bytes are left");
    app.finish().await
}

macro_rules! strays_on {
    ($($name:ident: $backend:ident, $s3:literal;)*) => {$(
        #[actix_web::test]
        async fn $name() -> anyhow::Result<()> {
            stray_bytes_are_found_and_collected(packyard_store::db::Backend::$backend, $s3).await
        }
    )*};
}
strays_on! {
    stray_bytes_on_files_sqlite: Sqlite, false;
    stray_bytes_on_files_postgres: Postgres, false;
    stray_bytes_on_files_mysql: MySql, false;
    stray_bytes_on_s3_sqlite: Sqlite, true;
    stray_bytes_on_s3_postgres: Postgres, true;
    stray_bytes_on_s3_mysql: MySql, true;
}
