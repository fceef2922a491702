//! The publication pipeline with the internal test format, on SQLite, PostgreSQL and MariaDB.

use std::sync::Arc;
use std::time::Duration;

use packyard_core::publication::Builders;
use packyard_core::repositories::RepositoryService;
use packyard_core::services::Services;
use packyard_formats::sample::entries::{self, Entries, KIND};
use packyard_model::config::Config;
use packyard_model::repos::RepositorySpec;
use packyard_store::blobs::{FileStore, Sha256Hex};
use packyard_store::db::publication::Due;
use packyard_store::db_test;
use packyard_store::testing::TestDb;
use packyard_worker::publisher::{Outcome, Publisher};
use sha2::{Digest, Sha256};

const NOW: Due = Due { debounce_ms: 0, max_delay_ms: 0 };

async fn setup(t: &TestDb) -> anyhow::Result<(Services, i64)> {
    let mut config = Config::default();
    config.database.url = t.url.clone();
    config.worker.lease_ms = 60_000;
    let blobs = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await?);
    let services =
        Services::assemble(config, t.metrics.clone(), t.db.clone(), blobs, "0123456789abcdef0123456789abcdef")?;
    let spec: RepositorySpec =
        serde_json::from_value(serde_json::json!({"name": "t", "format": "go", "type": "hosted"}))?;
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?;
    Ok((services, repo.id))
}

/// A publisher with a tiny page size, so that every build pages through its rows.
fn publisher(services: &Services) -> Publisher {
    let builders = Builders::default().with(KIND, Arc::new(Entries { page_size: 3, delay: Duration::ZERO }));
    Publisher::new(services.clone(), builders).with_due(NOW)
}

async fn served(services: &Services, repo: i64, unit: &str, path: &str) -> anyhow::Result<Option<String>> {
    let f = services.published.file(&services.db, services.blobs.as_ref(), repo, KIND, unit, path).await?;
    Ok(f.map(|f| String::from_utf8_lossy(&f.bytes).to_string()))
}

db_test!(a_burst_becomes_one_complete_snapshot, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let patient = publisher(&services).with_due(Due { debounce_ms: 60_000, max_delay_ms: 600_000 });
    // The leading edge: a change to a unit that has been idle for the window is due at once,
    // however long the debounce.
    let mut entries = vec![("first".to_string(), "body".to_string())];
    entries::put(&t.db, repo, "main", "first", "body").await?;
    let outcomes = patient.run_until_idle().await;
    assert!(matches!(outcomes[..], [Outcome::Published(_)]), "{outcomes:?}");
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert!(unit.build_ms.is_some_and(|b| b >= 0), "the build's time is recorded: {unit:?}");
    // What follows within the window (here the whole debounce: the unit's builds take longer)
    // waits until the burst is over.
    sqlx::query("UPDATE publication_units SET build_ms = 120000").execute(t.db.pool()).await?;
    let burst: Vec<(String, String)> = (0..40).map(|i| (format!("pkg-{i:03}"), format!("body {i}"))).collect();
    for (name, body) in &burst {
        entries::put(&t.db, repo, "main", name, body).await?;
    }
    entries.extend(burst);
    assert!(patient.run_until_idle().await.is_empty(), "inside the debounce window nothing is published");
    let outcomes = publisher(&services).run_until_idle().await;
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    assert!(matches!(outcomes[0], Outcome::Published(_)));
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!((unit.desired_revision, unit.published_revision), (41, 41));
    assert_eq!(unit.first_pending_at, None);
    assert_eq!(t.db.snapshot_ids(unit.id).await?.len(), 2, "forty writes after the first, one snapshot");
    assert_eq!(served(&services, repo, "main", "index.txt").await?.as_deref(), Some(entries::index(&entries).as_str()));
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("41\n"));
    assert_eq!(served(&services, repo, "main", "missing.txt").await?, None);
    assert_eq!(t.db.backlog().await?, (0, None), "every outbox event delivered");
    let metrics = String::from_utf8(t.metrics.render())?;
    assert!(metrics.contains("packyard_publication_duration_seconds_count 2\n"), "{metrics}");
    assert!(metrics.contains("packyard_publications_total{outcome=\"published\"} 2\n"), "{metrics}");
    // Nothing more to do.
    assert!(publisher(&services).run_until_idle().await.is_empty());
    Ok(())
});

db_test!(the_quiet_window_follows_the_units_build_time, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let due = Due { debounce_ms: 60_000, max_delay_ms: 600_000 };
    let patient = publisher(&services).with_due(due);
    entries::put(&t.db, repo, "main", "a", "1").await?;
    assert!(matches!(patient.run_until_idle().await[..], [Outcome::Published(_)]));
    // Its builds take 3 s: a change that follows a publication at once waits 3 s of quiet, not
    // the minute of the debounce.
    sqlx::query("UPDATE publication_units SET build_ms = 3000").execute(t.db.pool()).await?;
    entries::put(&t.db, repo, "main", "b", "2").await?;
    assert!(patient.run_until_idle().await.is_empty(), "inside the unit's window nothing is published");
    let wait = t.db.next_due_in(due).await?.ok_or_else(|| anyhow::anyhow!("nothing pending"))?;
    assert!((1..=3_000).contains(&wait), "due within the unit's window: {wait} ms");
    assert_eq!(t.db.next_due_in_below(due, 3_000).await?, None, "a unit this slow is not for a light slot");
    tokio::time::sleep(Duration::from_millis(u64::try_from(wait)? + 20)).await;
    assert!(matches!(patient.run_until_idle().await[..], [Outcome::Published(_)]));
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(unit.published_revision, 2);
    // The recorded time is smoothed: the mean of this build and the 3 s before it.
    let took = unit.build_ms.ok_or_else(|| anyhow::anyhow!("no build time"))?;
    assert!((1_500..3_000).contains(&took), "{took}");
    assert_eq!(due.window(Some(17)), 17);
    assert_eq!(due.window(Some(90_000)), 60_000);
    assert_eq!(due.window(None), 60_000, "a unit never built waits the debounce");
    Ok(())
});

db_test!(a_light_slot_takes_the_oldest_quick_unit, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let worker = publisher(&services);
    entries::put(&t.db, repo, "heavy", "a", "1").await?;
    entries::put(&t.db, repo, "quick", "a", "1").await?;
    entries::put(&t.db, repo, "new", "a", "1").await?;
    sqlx::query("UPDATE publication_units SET build_ms = 5000 WHERE unit_key = 'heavy'").execute(t.db.pool()).await?;
    sqlx::query("UPDATE publication_units SET build_ms = 20 WHERE unit_key = 'quick'").execute(t.db.pool()).await?;
    // Oldest pending first among the quick ones (a unit never built counts as quick)...
    let first = t.db.claim_due_below("w", NOW, 60_000, 1_000).await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert_eq!(first.unit.unit_key, "quick");
    let second = t.db.claim_due_below("w", NOW, 60_000, 1_000).await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert_eq!(second.unit.unit_key, "new");
    assert!(t.db.claim_due_below("w", NOW, 60_000, 1_000).await?.is_none(), "the heavy unit waits for a free slot");
    // ...and any slot takes the heavy one.
    let third = worker.claim().await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert_eq!(third.unit.unit_key, "heavy");
    for claim in [first, second, third] {
        assert!(matches!(worker.process(claim).await, Outcome::Published(_)));
    }
    Ok(())
});

db_test!(an_administrators_rebuild_is_made_from_nothing, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let worker = publisher(&services);
    entries::put(&t.db, repo, "main", "a", "1").await?;
    let claim = worker.claim().await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert!(!claim.whole(), "an upload's build continues the last one");
    assert!(matches!(worker.process(claim).await, Outcome::Published(_)));
    // A rebuild asked for from nothing; another asked for while that build runs is kept.
    assert_eq!(t.db.request_rebuild(repo, true).await?, 1);
    let claim = worker.claim().await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert!(claim.whole(), "{:?}", claim.unit);
    assert_eq!(claim.unit.whole_at_revision, Some(2));
    assert_eq!(t.db.request_rebuild(repo, true).await?, 1);
    assert!(matches!(worker.process(claim).await, Outcome::Published(_)));
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!((unit.published_revision, unit.whole_at_revision), (2, Some(3)));
    let claim = worker.claim().await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert!(claim.whole());
    assert!(matches!(worker.process(claim).await, Outcome::Published(_)));
    // Done: the next change continues again; a rebuild for a new key does too.
    assert_eq!(t.db.request_rebuild(repo, false).await?, 1);
    let claim = worker.claim().await?.ok_or_else(|| anyhow::anyhow!("none"))?;
    assert_eq!((claim.whole(), claim.unit.whole_at_revision), (false, None));
    assert!(matches!(worker.process(claim).await, Outcome::Published(_)));
    Ok(())
});

db_test!(the_write_and_its_change_record_commit_together, |t: TestDb| async move {
    let (_services, repo) = setup(&t).await?;
    let mut tx = t.db.pool().begin().await?;
    t.db.record_change(&mut tx, repo, KIND, "main").await?;
    // The artifact row fails (no such table): the whole transaction goes.
    let failed = sqlx::query("INSERT INTO no_such_table VALUES (1)").execute(&mut *tx).await;
    assert!(failed.is_err());
    tx.rollback().await?;
    assert_eq!(t.db.unit_by_key(repo, KIND, "main").await?, None, "no unit, no desired revision");
    assert_eq!(t.db.backlog().await?.0, 0, "no outbox event");
    Ok(())
});

db_test!(a_worker_that_lost_its_lease_publishes_nothing, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    entries::put(&t.db, repo, "main", "a", "1").await?;
    let a = publisher(&services);
    let b = publisher(&services);
    let claim_a = a.claim().await?.ok_or_else(|| anyhow::anyhow!("a claims"))?;
    assert!(b.claim().await?.is_none(), "a held lease is not claimable");
    // A's lease expires (A stalled); B takes over.
    sqlx::query("UPDATE publication_units SET lease_expires_at = 1").execute(t.db.pool()).await?;
    let claim_b = b.claim().await?.ok_or_else(|| anyhow::anyhow!("b claims after expiry"))?;
    assert_ne!(claim_a.token, claim_b.token);
    assert_eq!(a.process(claim_a).await, Outcome::Fenced);
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(unit.published_revision, 0, "the fenced worker changed nothing");
    assert!(matches!(b.process(claim_b).await, Outcome::Published(_)));
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(unit.published_revision, 1);
    assert_eq!(t.db.snapshot_ids(unit.id).await?.len(), 1, "only B's snapshot exists");
    Ok(())
});

db_test!(several_workers_share_the_work, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    for u in 0..8 {
        for e in 0..3 {
            entries::put(&t.db, repo, &format!("unit-{u}"), &format!("e{e}"), "x").await?;
        }
    }
    let (a, b) = (Arc::new(publisher(&services)), Arc::new(publisher(&services)));
    let (ra, rb) = tokio::join!(a.run_until_idle(), b.run_until_idle());
    let published = ra.iter().chain(&rb).filter(|o| matches!(o, Outcome::Published(_))).count();
    assert_eq!(published, 8, "each unit published exactly once: {ra:?} {rb:?}");
    for u in t.db.units_of(repo).await? {
        assert_eq!((u.desired_revision, u.published_revision), (3, 3), "{}", u.unit_key);
        assert_eq!(t.db.snapshot_ids(u.id).await?.len(), 1);
    }
    Ok(())
});

db_test!(failures_are_recorded_and_retried_with_backoff, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    entries::put(&t.db, repo, "will-fail", "a", "1").await?;
    let p = publisher(&services);
    assert_eq!(p.run_until_idle().await, vec![Outcome::Failed]);
    let unit = t.db.unit_by_key(repo, KIND, "will-fail").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(unit.last_error.as_deref(), Some("test unit will-fail is built to fail"));
    assert_eq!(unit.attempts, 1);
    assert!(unit.next_attempt_at > packyard_store::db::now_ms() + 500, "backs off");
    assert_eq!(unit.lease_owner, None, "the lease is released");
    assert!(p.run_until_idle().await.is_empty(), "not retried before the backoff");
    sqlx::query("UPDATE publication_units SET next_attempt_at = 0").execute(t.db.pool()).await?;
    assert_eq!(p.run_until_idle().await, vec![Outcome::Failed]);
    let unit = t.db.unit_by_key(repo, KIND, "will-fail").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(unit.attempts, 2);
    assert_eq!(packyard_worker::publisher::backoff_ms(0), 1_000);
    assert_eq!(packyard_worker::publisher::backoff_ms(1), 2_000);
    assert_eq!(packyard_worker::publisher::backoff_ms(20), 60_000);
    Ok(())
});

db_test!(retention_keeps_current_and_two_older, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let p = publisher(&services);
    let mut indexes = Vec::new();
    for i in 0..5 {
        entries::put(&t.db, repo, "main", &format!("e{i}"), "x").await?;
        assert_eq!(p.run_until_idle().await.len(), 1);
        let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
        let files = t.db.snapshot_files(unit.current_snapshot_id.unwrap_or_default()).await?;
        indexes.push(files.iter().find(|f| f.path == "index.txt").map(|f| f.sha256.clone()).unwrap_or_default());
    }
    let unit = t.db.unit_by_key(repo, KIND, "main").await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
    assert_eq!(t.db.snapshot_ids(unit.id).await?.len(), 5);
    // Within the grace period nothing goes.
    assert_eq!(p.collect(2, Duration::from_secs(3600)).await?, (0, 0));
    // An artifact upload of the same bytes as revision 2's index makes that blob an artifact.
    t.db.record_blob(&Sha256Hex::parse(&indexes[1])?, 1).await?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let (snapshots, blobs) = p.collect(2, Duration::ZERO).await?;
    assert_eq!(snapshots, 2);
    let kept: Vec<i64> = t.db.snapshot_ids(unit.id).await?.iter().map(|s| s.1).collect();
    assert_eq!(kept, vec![5, 4, 3], "the current snapshot and the two before it");
    assert_eq!(blobs, 3, "the index and count files of the two collected snapshots, less the artifact");
    for (i, digest) in indexes.iter().enumerate() {
        let d = Sha256Hex::parse(digest)?;
        let present = services.blobs.stat(&d).await?.is_some();
        assert_eq!(present, i >= 1, "index of revision {}", i + 1);
    }
    Ok(())
});

db_test!(warmed_reads_of_published_files_run_no_query, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    entries::put(&t.db, repo, "main", "a", "1").await?;
    publisher(&services).run_until_idle().await;
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("1\n"));
    let before = t.metrics.db_queries();
    for _ in 0..3 {
        assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("1\n"));
        assert_eq!(
            served(&services, repo, "main", "index.txt").await?.map(|s| s.len()),
            Some(67),
            "a, a tab, 64 hex digits, a newline"
        );
    }
    assert_eq!(t.metrics.db_queries() - before, 0, "warmed reads ran queries");
    // A publication elsewhere reaches this replica through the watermark.
    entries::put(&t.db, repo, "main", "b", "2").await?;
    let other = Services::assemble(
        (*services.config).clone(),
        t.metrics.clone(),
        t.db.clone(),
        services.blobs.clone(),
        "0123456789abcdef0123456789abcdef",
    )?;
    publisher(&other).run_until_idle().await;
    assert_eq!(
        served(&services, repo, "main", "count.txt").await?.as_deref(),
        Some("1\n"),
        "until the watermark is read"
    );
    services.poll_watermarks().await?;
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("2\n"));

    // Each repository has its own watermark: a publication in one leaves another's cache warm.
    let spec: RepositorySpec =
        serde_json::from_value(serde_json::json!({"name": "t2", "format": "go", "type": "hosted"}))?;
    let repo2 = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?.id;
    entries::put(&t.db, repo2, "main", "x", "1").await?;
    publisher(&services).run_until_idle().await;
    services.poll_watermarks().await?;
    assert_eq!(served(&services, repo2, "main", "count.txt").await?.as_deref(), Some("1\n"));
    entries::put(&t.db, repo, "main", "c", "3").await?;
    publisher(&other).run_until_idle().await;
    services.poll_watermarks().await?;
    let before = t.metrics.db_queries();
    assert_eq!(served(&services, repo2, "main", "count.txt").await?.as_deref(), Some("1\n"));
    assert_eq!(t.metrics.db_queries() - before, 0, "t2's snapshot stayed cached");
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("3\n"));
    assert!(t.metrics.db_queries() - before > 0, "t's pointer was dropped and re-read");
    Ok(())
});

db_test!(by_hash_files_outlive_their_snapshot_for_the_grace_period, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let p = publisher(&services);
    entries::put(&t.db, repo, "main", "a", "1").await?;
    p.run_until_idle().await;
    let first_index = served(&services, repo, "main", "index.txt").await?.unwrap_or_default();
    let first = hex::encode(Sha256::digest(first_index.as_bytes()));
    let by_hash = format!("by-hash/{first}");
    assert_eq!(served(&services, repo, "main", &by_hash).await?.as_deref(), Some(first_index.as_str()));
    entries::put(&t.db, repo, "main", "b", "2").await?;
    p.run_until_idle().await;
    services.poll_watermarks().await?;
    assert_eq!(served(&services, repo, "main", &by_hash).await?, None, "not in the current snapshot");
    let retained = |path: String| {
        let services = services.clone();
        async move {
            let f = services
                .published
                .file_or_retained(&services.db, services.blobs.as_ref(), repo, KIND, "main", &path)
                .await?;
            Ok::<_, anyhow::Error>(f.map(|f| String::from_utf8_lossy(&f.bytes).to_string()))
        }
    };
    assert_eq!(retained(by_hash.clone()).await?.as_deref(), Some(first_index.as_str()), "a slow reader still gets it");
    assert_eq!(p.collect(0, Duration::from_secs(3600)).await?.0, 0, "kept during the grace period");
    assert_eq!(retained(by_hash.clone()).await?.as_deref(), Some(first_index.as_str()));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(p.collect(0, Duration::ZERO).await?.0, 1);
    assert_eq!(retained(by_hash).await?, None, "gone once collected");
    Ok(())
});

db_test!(a_small_file_whose_bytes_the_last_snapshot_holds_is_not_written_again, |t: TestDb| async move {
    let (services, repo) = setup(&t).await?;
    let p = publisher(&services);
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let current = |key: &'static str| {
        let db = t.db.clone();
        async move {
            let unit = db.unit_by_key(repo, KIND, key).await?.ok_or_else(|| anyhow::anyhow!("no unit"))?;
            let files = db.snapshot_files(unit.current_snapshot_id.unwrap_or(0)).await?;
            anyhow::Ok(files.into_iter().map(|f| (f.path, f.sha256)).collect::<std::collections::HashMap<_, _>>())
        }
    };
    entries::put(&t.db, repo, "main", "a", "1").await?;
    p.run_until_idle().await;
    let first = current("main").await?;
    let count_blob = first.get("count.txt").cloned().ok_or_else(|| anyhow::anyhow!("no count.txt"))?;

    // Another body for `a`: index.txt changes, count.txt ("1\n") does not and is listed again.
    entries::put(&t.db, repo, "main", "a", "2").await?;
    let before = written();
    p.run_until_idle().await;
    let index = served(&services, repo, "main", "index.txt").await?.unwrap_or_default();
    assert_eq!(index, entries::index(&[("a".to_string(), "2".to_string())]));
    assert_eq!(written() - before, index.len() as u64, "only index.txt was written");
    assert_eq!(current("main").await?.get("count.txt"), Some(&count_blob));
    services.poll_watermarks().await?;
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("1\n"));

    // A blob lost all the same is written again, not listed again.
    let digest = Sha256Hex::parse(&count_blob)?;
    let path = t.dir.path().join("blobs/sha256").join(&count_blob[0..2]).join(&count_blob[2..4]).join(&count_blob);
    std::fs::remove_file(&path)?;
    assert_eq!(services.blobs.stat(&digest).await?, None);
    entries::put(&t.db, repo, "main", "a", "3").await?;
    let before = written();
    p.run_until_idle().await;
    let index = served(&services, repo, "main", "index.txt").await?.unwrap_or_default();
    assert_eq!(written() - before, (index.len() + 2) as u64, "index.txt and count.txt were written");
    assert_eq!(services.blobs.stat(&digest).await?, Some(2), "count.txt's blob is back");

    // A rebuild from nothing carries nothing over: both files are written.
    t.db.request_rebuild(repo, true).await?;
    let before = written();
    p.run_until_idle().await;
    assert_eq!(written() - before, (index.len() + 2) as u64, "a whole rebuild writes every file");
    services.poll_watermarks().await?;
    assert_eq!(served(&services, repo, "main", "count.txt").await?.as_deref(), Some("1\n"));
    Ok(())
});

db_test!(the_same_bytes_twice_in_one_build_are_written_once, |t: TestDb| async move {
    let (services, _) = setup(&t).await?;
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    // A Go module's `@latest` is its newest version's `.info`.
    let info = br#"{"Version":"v1.0.0","Time":"2026-12-05T00:00:00Z"}"#;
    let before = written();
    let mut ctx = packyard_core::publication::BuildContext::new(&t.db, services.blobs.as_ref());
    ctx.put("@latest", "application/json", info).await?;
    ctx.put("@v/v1.0.0.info", "application/json", info).await?;
    ctx.put("@v/list", "text/plain; charset=utf-8", b"v1.0.0\n").await?;
    assert!(ctx.put("../escape", "text/plain", info).await.is_err(), "a path is checked before any reuse");
    let files = ctx.finish().await?;
    assert_eq!(written() - before, (info.len() + 7) as u64, "the .info's bytes were written once");
    let of = |path: &str| files.iter().find(|f| f.path == path).map(|f| (f.sha256.clone(), f.size));
    let latest = of("@latest").ok_or_else(|| anyhow::anyhow!("no @latest"))?;
    assert_eq!(of("@v/v1.0.0.info"), Some(latest.clone()));
    assert_eq!(latest, (hex::encode(Sha256::digest(info)), info.len() as i64));
    assert_eq!(files.len(), 3);
    let stored = services.blobs.read_all(&Sha256Hex::parse(&latest.0)?).await?;
    assert_eq!(&stored[..], &info[..]);
    Ok(())
});

// Wake-ups relayed from the outbox (#44): a change whose wake-up could not reach RabbitMQ at
// its commit waits in the outbox and goes with the next pass that reaches the broker; every
// committed change is relayed once, whatever order the writers commit in (PostgreSQL and
// MariaDB: the first to insert its event commits last); a published change needs none; and
// history a day old is pruned.
db_test!(wake_ups_are_relayed_from_the_outbox_whatever_the_commit_order, |t: TestDb| async move {
    let Ok(url) = std::env::var("TEST_AMQP_URL") else {
        eprintln!("skipped: TEST_AMQP_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let (services, repo) = setup(&t).await?;
    let away = packyard_core::events::Amqp::new("amqp://guest:guest@127.0.0.1:1/%2f", t.metrics.clone());
    let broker = packyard_core::events::Amqp::new(&url, t.metrics.clone());
    let now = packyard_store::db::now_ms;
    let waiting = || async { t.db.unrelayed_events(now(), 100).await };

    entries::put(&t.db, repo, "a", "one", "body").await?;
    assert_eq!(away.relay_once(&t.db, now()).await, 0, "the broker is away");
    assert_eq!(waiting().await?.len(), 1, "the change waits in the outbox");
    assert_eq!(broker.relay_once(&t.db, now() - 60_000).await, 0, "a sweep leaves what is younger than its lag");
    assert_eq!(broker.relay_once(&t.db, now()).await, 1, "relayed once the broker confirmed it");
    assert_eq!(broker.relay_once(&t.db, now()).await, 0, "relayed once");
    assert_eq!(t.metrics.wakeups_relayed_total.get(), 1);

    entries::put(&t.db, repo, "b", "two", "body").await?;
    assert_eq!(broker.relay_once(&t.db, now()).await, 1);
    if t.db.backend() != packyard_store::db::Backend::Sqlite {
        for round in 0..3 {
            // The first writer inserts its event and holds its transaction open; the second
            // commits at once, and a relay pass runs between the two commits.
            let mut first = t.db.begin().await?;
            t.db.record_change(&mut first, repo, KIND, "a").await?;
            entries::put(&t.db, repo, "b", &format!("late-{round}"), "body").await?;
            assert_eq!(broker.relay_once(&t.db, now()).await, 1, "round {round}: the committed change");
            first.commit().await?;
            assert_eq!(broker.relay_once(&t.db, now()).await, 1, "round {round}: the late commit's change");
            assert_eq!(broker.relay_once(&t.db, now()).await, 0, "round {round}: nothing else");
        }
    }

    // What a worker published before any relay needs no wake-up.
    entries::put(&t.db, repo, "a", "three", "body").await?;
    let outcomes = publisher(&services).run_until_idle().await;
    assert!(outcomes.iter().all(|o| matches!(o, Outcome::Published(_))), "{outcomes:?}");
    assert_eq!(waiting().await?, Vec::<i64>::new());
    assert_eq!(broker.relay_once(&t.db, now()).await, 0);

    // Published events are history: pruned once older than the cut-off, never a waiting one.
    entries::put(&t.db, repo, "b", "four", "body").await?;
    let waits = waiting().await?;
    assert_eq!(waits.len(), 1);
    assert!(t.db.prune_outbox(now() + 1, 1_000).await? >= 3, "the published events");
    assert_eq!(t.db.backlog().await?.0, 1, "the waiting event stays");
    assert_eq!(waiting().await?, waits);
    Ok(())
});
