//! Incremental APK publication (#22): a hosted unit's `APKINDEX.tar.gz` kept as deflated chunks
//! of records, only the changed ones compressed again; the index must be one signed gzip member
//! that verifies with the repository's key and lists exactly what a build from nothing lists, on
//! every backend.

mod common;

use std::collections::HashMap;

use rsa::pkcs8::DecodePublicKey as _;
use std::sync::Arc;

use packyard_codecs::apk::index::{apkindex_text, split_members, verify_index};
use packyard_core::publication::read_file;
use packyard_core::repositories::RepositoryService;
use packyard_core::security::keystore::KeyStore;
use packyard_formats::apk::publish::ApkBuilder;
use packyard_formats::apk::rows::ApkPackage;
use packyard_model::repos::Repository;
use packyard_store::blobs::FileStore;
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db_test;
use packyard_store::testing::TestDb;

const UNIT: &str = "v3.20/main/x86_64";

async fn add(t: &TestDb, repo: i64, i: usize) -> anyhow::Result<i64> {
    add_named(t, repo, &format!("pkg-{i:05}"), i).await
}

/// Adds package `name` 1.0-r0 to the unit.
async fn add_named(t: &TestDb, repo: i64, name: &str, i: usize) -> anyhow::Result<i64> {
    let name = name.to_string();
    let p = ApkPackage {
        id: 0,
        repository_id: repo,
        unit_key: UNIT.into(),
        path: format!("{UNIT}/{name}-1.0-r0.apk"),
        record: format!("C:Q1{i:027}=\nP:{name}\nV:1.0-r0\nA:x86_64\nS:{}\nI:{}\nT:package {i}\n", 1000 + i, 4096 + i),
        checksum: format!("Q1{i:027}="),
        name,
        version: "1.0-r0".into(),
        size: 1000 + i as i64,
        sha256: format!("{i:064x}"),
    };
    let mut tx = t.db.pool().begin().await?;
    packyard_formats::apk::rows::insert(&t.db, &mut tx, &p, "test").await?;
    t.db.record_change(&mut tx, repo, "apk", UNIT).await?;
    tx.commit().await?;
    let id: i64 = sqlx::query_scalar(&format!("SELECT id FROM apk_packages WHERE path = '{}'", p.path))
        .fetch_one(t.db.pool())
        .await?;
    Ok(id)
}

async fn publish(
    t: &TestDb,
    blobs: &FileStore,
    builder: &ApkBuilder,
    repo: &Repository,
) -> anyhow::Result<HashMap<String, SnapshotFile>> {
    common::publish(t, blobs, builder, repo).await
}

/// Requests a rebuild with no change of rows and publishes it.
async fn publish_again(
    t: &TestDb,
    blobs: &FileStore,
    builder: &ApkBuilder,
    repo: &Repository,
) -> anyhow::Result<HashMap<String, SnapshotFile>> {
    t.db.request_changes(repo.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    publish(t, blobs, builder, repo).await
}

/// The index checked the way apk checks it (two gzip members, the signature over the second
/// verifying with the repository's public key); returns its APKINDEX text.
async fn check(
    t: &TestDb,
    blobs: &FileStore,
    (builder, repo): (&ApkBuilder, &Repository),
    files: &HashMap<String, SnapshotFile>,
) -> anyhow::Result<String> {
    let f = files.get(&format!("{UNIT}/APKINDEX.tar.gz")).ok_or_else(|| anyhow::anyhow!("no index"))?;
    let bytes = read_file(blobs, f).await?;
    assert_eq!(split_members(&bytes)?.len(), 2, "a signature member and one index member");
    let key = packyard_formats::apk::keys::current(&t.db, &builder.keystore, repo.id).await?;
    let public = rsa::RsaPublicKey::from_public_key_pem(&key.public_pem()?)?;
    verify_index(&bytes, &[public])?;
    Ok(apkindex_text(&bytes)?)
}

async fn builder(t: &TestDb) -> anyhow::Result<(Arc<FileStore>, ApkBuilder)> {
    let store = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await?);
    let keystore = Arc::new(KeyStore::new("0123456789abcdef0123456789abcdef"));
    let reader = packyard_core::groups::Reader { blobs: store.clone(), proxy: None };
    Ok((store, ApkBuilder { keystore, reader, memory: Default::default(), services: None }))
}

fn fresh(b: &ApkBuilder) -> ApkBuilder {
    ApkBuilder { keystore: b.keystore.clone(), reader: b.reader.clone(), memory: Default::default(), services: None }
}

db_test!(an_apk_upload_compresses_one_chunk_and_the_index_verifies, |t: TestDb| async move {
    let spec = serde_json::from_value(serde_json::json!({"name": "alp", "format": "apk", "type": "hosted"}))?;
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    let mut ids = Vec::new();
    for i in 0..2_500 {
        ids.push(add(&t, repo.id, i).await?);
    }
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let at = written();
    let first = publish(&t, blobs, &builder, &repo).await?;
    let full = written() - at;
    let text = check(&t, blobs, (&builder, &repo), &first).await?;
    assert_eq!(text.matches("\nP:").count() + usize::from(text.starts_with("P:")), 2_500);
    assert!(text.contains("P:pkg-00000\n") && text.contains("P:pkg-02499\n"));
    let first_parts = common::parts(&first);

    // One upload: the last chunk is compressed again, and the index's two ends.
    add(&t, repo.id, 2_500).await?;
    let at = written();
    let second = publish(&t, blobs, &builder, &repo).await?;
    let incremental = written() - at;
    assert!(incremental * 3 < full, "one upload wrote {incremental} bytes, the whole build {full}");
    let new: Vec<_> = common::parts(&second).difference(&first_parts).cloned().collect();
    assert_eq!(new.len(), 3, "the last chunk, the head and the tail: {new:?}");
    let text = check(&t, blobs, (&builder, &repo), &second).await?;
    assert!(text.contains("P:pkg-02500\n"));
    let expected =
        check(&t, blobs, (&builder, &repo), &publish_again(&t, blobs, &fresh(&builder), &repo).await?).await?;
    assert_eq!(text, expected, "the same APKINDEX as a build from nothing");

    // A package of the first chunk goes.
    publish_again(&t, blobs, &builder, &repo).await?;
    let mut tx = t.db.pool().begin().await?;
    assert!(packyard_formats::apk::rows::delete(&t.db, &mut tx, ids[3]).await?);
    t.db.record_change(&mut tx, repo.id, "apk", UNIT).await?;
    tx.commit().await?;
    let text = check(&t, blobs, (&builder, &repo), &publish(&t, blobs, &builder, &repo).await?).await?;
    assert!(!text.contains("P:pkg-00003\n"));
    assert!(text.contains("P:pkg-00004\n") && text.contains("P:pkg-02500\n"));
    let expected =
        check(&t, blobs, (&builder, &repo), &publish_again(&t, blobs, &fresh(&builder), &repo).await?).await?;
    assert_eq!(text, expected, "the same APKINDEX as a build from nothing");

    // Nothing changed: the same chunks, a new signature.
    let before = common::parts(&publish_again(&t, blobs, &builder, &repo).await?);
    let same = publish_again(&t, blobs, &builder, &repo).await?;
    assert!(common::parts(&same).difference(&before).count() <= 2, "only the head and tail may differ");
    Ok(())
});

/// The member each package of a group's `.members` file came from, for `name`.
fn provider(members: &str, name: &str) -> Option<String> {
    members.lines().find_map(|l| l.strip_prefix(&format!("{name}-1.0-r0.apk ")).map(str::to_string))
}

db_test!(an_apk_group_merges_again_only_the_member_that_changed, |t: TestDb| async move {
    let service = RepositoryService::new(&t.db, packyard_formats::registry());
    let hosted = |name: &str| serde_json::json!({"name": name, "format": "apk", "type": "hosted"});
    let small = service.create(serde_json::from_value(hosted("small"))?).await?;
    let big = service.create(serde_json::from_value(hosted("big"))?).await?;
    let group = service
        .create(serde_json::from_value(
            serde_json::json!({"name": "both", "format": "apk", "type": "group", "group": {"members": ["small", "big"]}}),
        )?)
        .await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    for i in 0..2_500 {
        add(&t, big.id, i).await?;
    }
    for i in 0..20 {
        add_named(&t, small.id, &format!("loc-{i:02}"), 3_000 + i).await?;
    }
    // small's pkg-00005 1.0-r0 shadows big's.
    add_named(&t, small.id, "pkg-00005", 9_005).await?;
    publish(&t, blobs, &builder, &big).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    let members = |files: &HashMap<String, SnapshotFile>| {
        let f = files.get(&format!("{UNIT}/.members")).cloned();
        async move {
            let f = f.ok_or_else(|| anyhow::anyhow!("no .members"))?;
            anyhow::Ok(String::from_utf8(read_file(blobs, &f).await?.to_vec())?)
        }
    };
    let first = publish(&t, blobs, &builder, &group).await?;
    let text = check(&t, blobs, (&builder, &group), &first).await?;
    assert_eq!(text.matches("\nP:").count(), 2_520);
    let map = members(&first).await?;
    assert_eq!(provider(&map, "pkg-00005").as_deref(), Some("small"));
    assert_eq!(provider(&map, "pkg-00006").as_deref(), Some("big"));
    assert!(text.contains("C:Q1000000000000000000000009005="), "small's record of pkg-00005");

    // One more in small: big's chunks are kept.
    add_named(&t, small.id, "loc-new", 3_100).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    let second = publish(&t, blobs, &builder, &group).await?;
    let new: Vec<_> = common::parts(&second).difference(&common::parts(&first)).cloned().collect();
    assert_eq!(new.len(), 3, "small's chunk, the head and the tail: {new:?}");
    let text = check(&t, blobs, (&builder, &group), &second).await?;
    assert_eq!(provider(&members(&second).await?, "loc-new").as_deref(), Some("small"));
    let sorted = |text: &str| {
        let mut r: Vec<String> = text.split("\n\n").filter(|r| !r.is_empty()).map(str::to_string).collect();
        r.sort();
        r
    };
    let expected =
        check(&t, blobs, (&builder, &group), &publish_again(&t, blobs, &fresh(&builder), &group).await?).await?;
    assert_eq!(sorted(&text), sorted(&expected), "the same records as a merge from nothing");

    // small now also has pkg-00007: big's records are merged again without it, and of big's
    // chunks (about 750 records each) only the one that held it is stored anew.
    let before = publish_again(&t, blobs, &builder, &group).await?;
    add_named(&t, small.id, "pkg-00007", 9_007).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    let third = publish(&t, blobs, &builder, &group).await?;
    let new: Vec<_> = common::parts(&third).difference(&common::parts(&before)).cloned().collect();
    // small's chunk, big's first, the head and the tail (a change may end a chunk at another
    // record, and the next one with it: one more at most); big has three chunks or more.
    assert!(new.len() <= 5, "{} new parts after big lost one record: {new:?}", new.len());
    assert!(common::parts(&third).len() >= 6, "{} parts", common::parts(&third).len());
    let text = check(&t, blobs, (&builder, &group), &third).await?;
    assert_eq!(text.matches("P:pkg-00007\n").count(), 1);
    assert!(text.contains("C:Q1000000000000000000000009007="), "small's record of pkg-00007");
    assert_eq!(provider(&members(&third).await?, "pkg-00007").as_deref(), Some("small"));
    let expected =
        check(&t, blobs, (&builder, &group), &publish_again(&t, blobs, &fresh(&builder), &group).await?).await?;
    assert_eq!(sorted(&text), sorted(&expected), "the same records as a merge from nothing");

    // Records come at big's end, as uploads do, until its open chunk holds more than a piece;
    // then one more: the chunk stored anew is the last piece of big's open chunk (at most 400
    // records), not the open chunk it is part of (684 records here).
    for i in 2_500..2_800 {
        add(&t, big.id, i).await?;
    }
    publish(&t, blobs, &builder, &big).await?;
    t.db.request_changes(group.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    let before = publish(&t, blobs, &builder, &group).await?;
    add(&t, big.id, 2_800).await?;
    publish(&t, blobs, &builder, &big).await?;
    t.db.request_changes(group.id, &[("apk".to_string(), UNIT.to_string())]).await?;
    let fourth = publish(&t, blobs, &builder, &group).await?;
    let text = check(&t, blobs, (&builder, &group), &fourth).await?;
    assert_eq!(text.matches("P:pkg-02800\n").count(), 1);
    let new = common::parts(&fourth).difference(&common::parts(&before)).cloned().collect::<Vec<_>>();
    let mut records = Vec::new();
    for f in fourth.values().filter(|f| f.path.starts_with(".parts/") && new.contains(&f.sha256)) {
        // A chunk is raw deflate ending in a sync flush (the index's one gzip member is made of
        // them); the head and the tail are not, and hold no records.
        let bytes = read_file(blobs, f).await?;
        let mut out = Vec::with_capacity(bytes.len() * 32 + 4096);
        let mut z = flate2::Decompress::new(false);
        if z.decompress_vec(&bytes, &mut out, flate2::FlushDecompress::Sync).is_err() {
            continue;
        }
        let chunk = String::from_utf8_lossy(&out);
        records.push(chunk.matches("\nP:").count() + usize::from(chunk.starts_with("P:")));
    }
    println!("records of the new parts after an append: {records:?}");
    assert!(records.iter().any(|n| *n > 0), "the appended record's chunk is new: {records:?}");
    assert!(records.iter().all(|n| *n <= 400), "an append stored a chunk of {records:?} records");
    Ok(())
});
