//! Incremental APT publication (#22): a hosted index kept as chunks, only the changed ones
//! rendered again; the files as a whole (their parts joined) must be exactly what a build from
//! nothing makes, with the hashes `Release` lists, on every backend.

mod common;

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::Arc;

use packyard_core::publication::read_file;
use packyard_core::repositories::RepositoryService;
use packyard_core::security::keystore::KeyStore;
use packyard_formats::apt::publish::AptBuilder;
use packyard_formats::apt::rows::{AptPackage, Member};
use packyard_model::repos::{Repository, RepositorySpec};
use packyard_store::blobs::FileStore;
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db_test;
use packyard_store::testing::TestDb;
use sha2::{Digest, Sha256};

async fn add(t: &TestDb, repo: i64, i: usize) -> anyhow::Result<i64> {
    add_named(t, repo, &format!("pkg-{i:05}"), i).await
}

/// Adds package `name` 1.0 (architecture `all` when `i` is a multiple of 10) to `stable`.
async fn add_named(t: &TestDb, repo: i64, name: &str, i: usize) -> anyhow::Result<i64> {
    add_to(t, repo, name, i, Some("stable")).await
}

/// Adds package `name` 1.0 to the repository, and to `dist` when given.
async fn add_to(t: &TestDb, repo: i64, name: &str, i: usize, dist: Option<&str>) -> anyhow::Result<i64> {
    let arch = if i.is_multiple_of(10) { "all" } else { "amd64" };
    insert_row(t, &row(repo, name, i, arch), dist).await
}

/// Package `name` 1.0 for `arch` in `main`, its size and digests made up from `i`.
fn row(repo: i64, name: &str, i: usize, arch: &str) -> AptPackage {
    let hex64 = format!("{i:064x}");
    AptPackage {
        id: 0,
        repository_id: repo,
        component: "main".into(),
        pool_path: format!("pool/main/p/{name}/{name}_1.0_{arch}.deb"),
        control: format!("Package: {name}\nVersion: 1.0\nArchitecture: {arch}\nDescription: package {i}\n"),
        name: name.to_string(),
        version: "1.0".into(),
        architecture: arch.into(),
        size: 1_000 + i as i64,
        md5: hex64[..32].to_string(),
        sha256: hex64,
    }
}

/// Stores a package row, and its membership of `dist` (with the change recorded) when given.
async fn insert_row(t: &TestDb, p: &AptPackage, dist: Option<&str>) -> anyhow::Result<i64> {
    let mut tx = t.db.pool().begin().await?;
    let id = packyard_formats::apt::rows::insert(&t.db, &mut tx, p, "test").await?;
    if let Some(dist) = dist {
        packyard_formats::apt::rows::join(&t.db, &mut tx, Member::Package(id), p.repository_id, dist).await?;
        t.db.record_change(&mut tx, p.repository_id, "apt", dist).await?;
    }
    tx.commit().await?;
    Ok(id)
}

async fn publish(
    t: &TestDb,
    blobs: &FileStore,
    builder: &AptBuilder,
    repo: &Repository,
) -> anyhow::Result<HashMap<String, SnapshotFile>> {
    common::publish(t, blobs, builder, repo).await
}

/// The index's three files, checked against each other and against Release; returns the text.
async fn check(blobs: &FileStore, files: &HashMap<String, SnapshotFile>) -> anyhow::Result<String> {
    let base = "dists/stable/main/binary-amd64";
    let read = |p: String| async move {
        let f = files.get(&p).ok_or_else(|| anyhow::anyhow!("no {p}"))?;
        anyhow::Ok(read_file(blobs, f).await?)
    };
    let plain = read(format!("{base}/Packages")).await?;
    let gz = read(format!("{base}/Packages.gz")).await?;
    let xz = read(format!("{base}/Packages.xz")).await?;
    let mut from_gz = Vec::new();
    flate2::read::MultiGzDecoder::new(&gz[..]).read_to_end(&mut from_gz)?;
    let mut from_xz = Vec::new();
    // One xz stream: apt reads no further than the first (as this decoder).
    liblzma::read::XzDecoder::new(&xz[..]).read_to_end(&mut from_xz)?;
    assert!(from_gz == plain, "Packages.gz holds Packages");
    assert!(from_xz == plain, "Packages.xz holds Packages");
    // And apt's own reader of compressed files, which the client fetches Packages.xz with.
    let file = tempfile::Builder::new().suffix(".xz").tempfile()?;
    std::fs::write(file.path(), &xz)?;
    let cat = std::process::Command::new("/usr/lib/apt/apt-helper").arg("cat-file").arg(file.path()).output()?;
    assert!(cat.status.success(), "apt-helper cat-file: {}", String::from_utf8_lossy(&cat.stderr));
    assert!(cat.stdout == plain, "apt reads Packages.xz as Packages ({} of {} bytes)", cat.stdout.len(), plain.len());
    let release = String::from_utf8(read("dists/stable/Release".into()).await?.to_vec())?;
    let sha256 = release.split("SHA256:\n").nth(1).unwrap_or_default();
    for (bytes, name) in [(&plain, "Packages"), (&gz, "Packages.gz"), (&xz, "Packages.xz")] {
        let line = format!(" {} {:>16} main/binary-amd64/{name}\n", hex::encode(Sha256::digest(bytes)), bytes.len());
        assert!(sha256.contains(&line), "Release lists {name} as {line:?}:\n{release}");
        let by_hash = format!("{base}/by-hash/SHA256/{}", hex::encode(Sha256::digest(bytes)));
        assert!(read(by_hash).await? == *bytes, "{name} by hash");
    }
    Ok(String::from_utf8(plain.to_vec())?)
}

/// A file store in the test's directory and a builder over it.
async fn builder(t: &TestDb) -> anyhow::Result<(Arc<FileStore>, AptBuilder)> {
    let store = Arc::new(FileStore::open(t.dir.path().join("blobs"), t.metrics.clone()).await?);
    let keystore = Arc::new(KeyStore::new("0123456789abcdef0123456789abcdef"));
    let reader = packyard_core::groups::Reader { blobs: store.clone(), proxy: None };
    Ok((store, AptBuilder { page_size: 1_000, keystore, reader, memory: Default::default(), services: None }))
}

/// A builder that remembers nothing: what a build from nothing makes of the same rows.
fn fresh(b: &AptBuilder) -> AptBuilder {
    AptBuilder {
        page_size: 1_000,
        keystore: b.keystore.clone(),
        reader: b.reader.clone(),
        memory: Default::default(),
        services: None,
    }
}

db_test!(an_upload_rerenders_one_chunk_and_the_files_are_whole, |t: TestDb| async move {
    let spec: RepositorySpec = serde_json::from_value(serde_json::json!({"name": "inc", "format": "apt",
        "type": "hosted", "apt": {"distributions": ["stable"], "architectures": ["amd64", "all"]}}))?;
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
    let text = check(blobs, &first).await?;
    assert_eq!(text.matches("Package: ").count(), 2_500);
    // amd64's index: three chunks of three forms (the index of `all` has its own).
    let first_parts = common::parts(&first);
    assert!(first_parts.len() >= 9, "{} parts", first_parts.len());

    // One upload: the last chunk is rendered again, nothing else.
    add(&t, repo.id, 2_500).await?;
    let at = written();
    let second = publish(&t, blobs, &builder, &repo).await?;
    let incremental = written() - at;
    assert!(incremental * 3 < full, "one upload wrote {incremental} bytes, the whole build {full}");
    let text = check(blobs, &second).await?;
    assert!(text.contains("Package: pkg-02500\n"));
    let new: Vec<_> = common::parts(&second).difference(&first_parts).cloned().collect();
    // The last chunk of binary-amd64 and of binary-all (the new package is `all`).
    assert!(new.len() <= 6, "{} new parts after one upload", new.len());
    let expected = publish_fresh(&t, blobs, &fresh(&builder), &repo).await?;
    assert_eq!(text, expected, "the same Packages as a build from nothing");

    // A package of the first chunk goes: that chunk and the last are rendered again.
    let before = common::parts(&publish_nothing_new(&t, blobs, &builder, &repo).await?);
    let mut tx = t.db.pool().begin().await?;
    packyard_formats::apt::rows::delete(&t.db, &mut tx, ids[3]).await?;
    t.db.record_change(&mut tx, repo.id, "apt", "stable").await?;
    tx.commit().await?;
    let third = publish(&t, blobs, &builder, &repo).await?;
    let text = check(blobs, &third).await?;
    assert!(!text.contains("Package: pkg-00003\n"));
    assert_eq!(text.matches("Package: ").count(), 2_500);
    let new: Vec<_> = common::parts(&third).difference(&before).cloned().collect();
    assert!(new.len() <= 12, "{} new parts after one delete", new.len());
    let expected = publish_fresh(&t, blobs, &fresh(&builder), &repo).await?;
    assert_eq!(text, expected, "the same Packages as a build from nothing");

    // The changes noted for the builds are forgotten once a build that consumed them is the
    // published one (the fresh builder's snapshot was published last: the next build is a
    // whole one, the one after it forgets).
    let notes = || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM apt_index_changes").fetch_one(t.db.pool()).await?;
        anyhow::Ok(n)
    };
    assert!(notes().await? > 0);
    publish_nothing_new(&t, blobs, &builder, &repo).await?;
    publish_nothing_new(&t, blobs, &builder, &repo).await?;
    assert_eq!(notes().await?, 0, "notes of published builds are forgotten");
    // A package leaving the distribution is a change too.
    let mut tx = t.db.pool().begin().await?;
    assert!(packyard_formats::apt::rows::leave(&t.db, &mut tx, Member::Package(ids[1500]), "stable").await?);
    t.db.record_change(&mut tx, repo.id, "apt", "stable").await?;
    tx.commit().await?;
    let text = check(blobs, &publish(&t, blobs, &builder, &repo).await?).await?;
    assert!(!text.contains("Package: pkg-01500\n"));
    assert_eq!(text.matches("Package: ").count(), 2_499);
    let expected = publish_fresh(&t, blobs, &fresh(&builder), &repo).await?;
    assert_eq!(text, expected, "the same Packages as a build from nothing");
    Ok(())
});

/// Publishes again with a builder that remembers nothing; returns its Packages text.
async fn publish_fresh(
    t: &TestDb,
    blobs: &FileStore,
    builder: &AptBuilder,
    repo: &Repository,
) -> anyhow::Result<String> {
    let files = publish_nothing_new(t, blobs, builder, repo).await?;
    check(blobs, &files).await
}

/// Requests a rebuild with no change of rows and publishes it.
async fn publish_nothing_new(
    t: &TestDb,
    blobs: &FileStore,
    builder: &AptBuilder,
    repo: &Repository,
) -> anyhow::Result<HashMap<String, SnapshotFile>> {
    t.db.request_changes(repo.id, &[("apt".to_string(), "stable".to_string())]).await?;
    publish(t, blobs, builder, repo).await
}

/// The stanzas of a Packages text, sorted: a group lists each once, in an order of its own.
fn stanzas(text: &str) -> Vec<String> {
    let mut all: Vec<String> = text.split("\n\n").filter(|s| !s.trim().is_empty()).map(str::to_string).collect();
    all.sort();
    all
}

/// The `Filename`s a Packages text lists for package `name`.
fn filenames(text: &str, name: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|s| s.starts_with(&format!("Package: {name}\n")))
        .filter_map(|s| s.lines().find_map(|l| l.strip_prefix("Filename: ")).map(str::to_string))
        .collect()
}

db_test!(a_group_merges_again_only_the_member_that_changed, |t: TestDb| async move {
    let service = RepositoryService::new(&t.db, packyard_formats::registry());
    let hosted = |name: &str| {
        serde_json::json!({"name": name, "format": "apt", "type": "hosted",
            "apt": {"distributions": ["stable"], "architectures": ["amd64", "all"]}})
    };
    let small = service.create(serde_json::from_value(hosted("small"))?).await?;
    let big = service.create(serde_json::from_value(hosted("big"))?).await?;
    let group = service
        .create(serde_json::from_value(serde_json::json!({"name": "both", "format": "apt", "type": "group",
            "group": {"members": ["small", "big"]},
            "apt": {"distributions": ["stable"], "architectures": ["amd64", "all"]}}))?)
        .await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    for i in 0..2_500 {
        add(&t, big.id, i).await?;
    }
    for i in 0..20 {
        add_named(&t, small.id, &format!("loc-{i:02}"), 3_000 + i).await?;
    }
    // small's pkg-00005 1.0 amd64 shadows big's.
    let shadow = add_named(&t, small.id, "pkg-00005", 5).await?;
    publish(&t, blobs, &builder, &big).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let at = written();
    let first = publish(&t, blobs, &builder, &group).await?;
    let full = written() - at;
    let text = check(blobs, &first).await?;
    assert_eq!(text.matches("Package: ").count(), 2_520);
    assert_eq!(filenames(&text, "pkg-00005"), ["pool/small/pool/main/p/pkg-00005/pkg-00005_1.0_amd64.deb"]);
    assert_eq!(filenames(&text, "pkg-00006"), ["pool/big/pool/main/p/pkg-00006/pkg-00006_1.0_amd64.deb"]);

    // A package more in small: small's stanzas are merged again, big's chunks are kept.
    add_named(&t, small.id, "loc-new", 3_101).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let at = written();
    let second = publish(&t, blobs, &builder, &group).await?;
    let incremental = written() - at;
    assert!(incremental * 10 < full, "one more package in small wrote {incremental} bytes, the whole merge {full}");
    let new: Vec<_> = common::parts(&second).difference(&common::parts(&first)).cloned().collect();
    // small's contribution to Packages (three forms) and the xz file's new index of its
    // blocks; Sources is as it was.
    assert_eq!(new.len(), 4, "new parts: {new:?}");
    let text = check(blobs, &second).await?;
    assert_eq!(filenames(&text, "loc-new"), ["pool/small/pool/main/p/loc-new/loc-new_1.0_amd64.deb"]);
    assert_eq!(stanzas(&text), stanzas(&publish_fresh(&t, blobs, &fresh(&builder), &group).await?));

    // Twice more, the last after a build that listed big first: its hashes carry on.
    for (round, name) in ["loc-newer", "loc-newest"].into_iter().enumerate() {
        publish_nothing_new(&t, blobs, &builder, &group).await?;
        add_named(&t, small.id, name, 3_102 + round).await?;
        publish(&t, blobs, &builder, &small).await?;
        t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
        let text = check(blobs, &publish(&t, blobs, &builder, &group).await?).await?;
        assert_eq!(text.matches("Package: ").count(), 2_522 + round);
        assert_eq!(stanzas(&text), stanzas(&publish_fresh(&t, blobs, &fresh(&builder), &group).await?));
    }

    // small now also has a package big has: big's stanzas are merged again without it.
    publish_nothing_new(&t, blobs, &builder, &group).await?;
    add_named(&t, small.id, "pkg-00007", 7).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let text = check(blobs, &publish(&t, blobs, &builder, &group).await?).await?;
    assert_eq!(filenames(&text, "pkg-00007"), ["pool/small/pool/main/p/pkg-00007/pkg-00007_1.0_amd64.deb"]);
    assert_eq!(stanzas(&text), stanzas(&publish_fresh(&t, blobs, &fresh(&builder), &group).await?));

    // small's pkg-00005 goes: big's is listed again.
    publish_nothing_new(&t, blobs, &builder, &group).await?;
    let mut tx = t.db.pool().begin().await?;
    packyard_formats::apt::rows::delete(&t.db, &mut tx, shadow).await?;
    t.db.record_change(&mut tx, small.id, "apt", "stable").await?;
    tx.commit().await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let text = check(blobs, &publish(&t, blobs, &builder, &group).await?).await?;
    assert_eq!(filenames(&text, "pkg-00005"), ["pool/big/pool/main/p/pkg-00005/pkg-00005_1.0_amd64.deb"]);
    assert_eq!(text.matches("Package: ").count(), 2_523);
    assert_eq!(stanzas(&text), stanzas(&publish_fresh(&t, blobs, &fresh(&builder), &group).await?));
    Ok(())
});

db_test!(packages_of_older_ids_joining_a_chunk_are_all_listed, |t: TestDb| async move {
    let spec: RepositorySpec = serde_json::from_value(serde_json::json!({"name": "join", "format": "apt",
        "type": "hosted", "apt": {"distributions": ["stable"], "architectures": ["amd64"]}}))?;
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    // Every other package in `stable`: its first chunk spans the ids of 2,000 packages.
    let mut outside = Vec::new();
    for i in 0..3_000 {
        let name = format!("pkg-{i:05}");
        // (i * 10 + 1: never a multiple of 10, every one amd64.)
        if i % 2 == 0 {
            add_to(&t, repo.id, &name, i * 10 + 1, Some("stable")).await?;
        } else {
            outside.push(add_to(&t, repo.id, &name, i * 10 + 1, None).await?);
        }
    }
    let text = check(blobs, &publish(&t, blobs, &builder, &repo).await?).await?;
    assert_eq!(text.matches("Package: ").count(), 1_500);
    // The 1,500 others join it at once: the first chunk's range now holds 2,000 packages.
    let mut tx = t.db.pool().begin().await?;
    for id in &outside {
        packyard_formats::apt::rows::join(&t.db, &mut tx, Member::Package(*id), repo.id, "stable").await?;
    }
    t.db.record_change(&mut tx, repo.id, "apt", "stable").await?;
    tx.commit().await?;
    let text = check(blobs, &publish(&t, blobs, &builder, &repo).await?).await?;
    assert_eq!(text.matches("Package: ").count(), 3_000, "every package joined is listed");
    let expected = publish_fresh(&t, blobs, &fresh(&builder), &repo).await?;
    assert_eq!(text, expected, "the same Packages as a build from nothing");
    Ok(())
});

// The MD5 an upload leaves to the worker is that of the package's bytes, whether the package
// is hashed alone or in step with others (more new packages than lanes, so lanes are reused;
// packages of different sizes, ending mid-block).
db_test!(md5sums_are_the_packages_own_in_step_or_alone, |t: TestDb| async move {
    use packyard_store::blobs::BlobStore as _;
    let spec: RepositorySpec = serde_json::from_value(serde_json::json!({"name": "md5", "format": "apt",
        "type": "hosted", "apt": {"distributions": ["stable"], "architectures": ["amd64"]}}))?;
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    let n = 2 * packyard_codecs::md5lanes::WIDTH + 3;
    let mut expected = HashMap::new();
    // The first publication hashes one package alone, the second the n others together.
    for round in [0..1, 1..n + 1] {
        for i in round {
            let bytes: Vec<u8> = (0..((i + 1) * 70_001 + 13 * i) % 1_500_000).map(|k| (k * 31 + i * 7) as u8).collect();
            let stored = blobs.put_bytes(&bytes).await?;
            let name = format!("pkg-{i:02}");
            // The real bytes' size and SHA-256; the MD5 left to the worker, as an upload leaves it.
            let p = AptPackage {
                size: bytes.len() as i64,
                md5: String::new(),
                sha256: stored.sha256.to_string(),
                ..row(repo.id, &name, i, "amd64")
            };
            insert_row(&t, &p, Some("stable")).await?;
            expected.insert(name, hex::encode(md5::Md5::digest(&bytes)));
        }
        let text = check(blobs, &publish(&t, blobs, &builder, &repo).await?).await?;
        let listed: HashMap<String, String> = text
            .split("\n\n")
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let field = |f: &str| s.lines().find_map(|l| l.strip_prefix(f)).unwrap_or_default().to_string();
                (field("Package: "), field("MD5sum: "))
            })
            .collect();
        assert_eq!(listed, expected, "every stanza's MD5sum is its package's");
    }
    // And the rows keep them (the next build hashes nothing).
    let rows: Vec<(String, String)> =
        sqlx::query_as(&format!("SELECT name, md5 FROM apt_packages WHERE repository_id = {}", repo.id))
            .fetch_all(t.db.pool())
            .await?;
    assert_eq!(rows.into_iter().collect::<HashMap<_, _>>(), expected, "the rows hold each package's MD5");
    Ok(())
});

/// Package `name` 1.0 for amd64 as Debian's stanzas are (about 700 bytes: digests that do not
/// compress, a description of a few lines of words), stored in `stable`.
async fn add_described(t: &TestDb, repo: i64, name: &str, i: usize) -> anyhow::Result<i64> {
    const WORDS: [&str; 32] = [
        "library",
        "files",
        "for",
        "the",
        "tool",
        "development",
        "package",
        "support",
        "data",
        "this",
        "contains",
        "runtime",
        "shared",
        "headers",
        "with",
        "and",
        "plugin",
        "module",
        "documentation",
        "server",
        "client",
        "interface",
        "bindings",
        "python",
        "utilities",
        "format",
        "network",
        "image",
        "command",
        "line",
        "common",
        "extension",
    ];
    let digest = |what: &str| hex::encode(Sha256::digest(format!("{what} {name} {i}").as_bytes()));
    let noise = Sha256::digest(format!("words {i}").as_bytes());
    let words: Vec<&str> =
        noise.iter().chain(Sha256::digest(noise).iter()).map(|b| WORDS[usize::from(*b) % 32]).collect();
    let lines: Vec<String> = words.chunks(9).map(|c| format!(" {}", c.join(" "))).collect();
    let p = AptPackage {
        control: format!(
            "Package: {name}\nVersion: 1.0-{}\nArchitecture: amd64\nMaintainer: Team {} <team{}@example.org>\nInstalled-Size: {}\nDepends: libc6 (>= 2.36), lib{name}1 (= 1.0)\nSection: {}\nDescription: {} {} {}\n{}\n",
            i % 7,
            i % 97,
            i % 97,
            (i * 37) % 9_000,
            WORDS[i % 32],
            words[0],
            words[1],
            words[2],
            lines.join("\n")
        ),
        md5: digest("md5")[..32].to_string(),
        sha256: digest("sha256"),
        ..row(repo, name, i, "amd64")
    };
    insert_row(t, &p, Some("stable")).await
}

/// The size of `text` as one xz stream at xz's default preset (Debian's).
fn one_xz_stream(text: &str) -> anyhow::Result<usize> {
    use std::io::Write as _;
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(text.as_bytes())?;
    Ok(e.finish()?.len())
}

db_test!(a_full_last_chunk_stays_when_packages_follow_it, |t: TestDb| async move {
    let spec: RepositorySpec = serde_json::from_value(serde_json::json!({"name": "full", "format": "apt",
        "type": "hosted", "apt": {"distributions": ["stable"], "architectures": ["amd64"]}}))?;
    let repo = RepositoryService::new(&t.db, packyard_formats::registry()).create(spec).await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    // Exactly two full chunks.
    for i in 0..2_000 {
        add_described(&t, repo.id, &format!("pkg-{i:05}"), i).await?;
    }
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let at = written();
    let first = publish(&t, blobs, &builder, &repo).await?;
    let full = written() - at;
    check(blobs, &first).await?;
    // One package after them: a third chunk, the two full ones kept as they are (not rendered
    // and compressed again: their bytes are not written again either).
    add_described(&t, repo.id, "pkg-02000", 2_000).await?;
    let at = written();
    let second = publish(&t, blobs, &builder, &repo).await?;
    let appended = written() - at;
    assert!(appended * 20 < full, "one package after two full chunks wrote {appended} bytes, the whole build {full}");
    let text = check(blobs, &second).await?;
    assert_eq!(text.matches("Package: ").count(), 2_001);
    let new: Vec<_> = common::parts(&second).difference(&common::parts(&first)).cloned().collect();
    // The new chunk's three forms and the xz file's index of its blocks.
    assert_eq!(new.len(), 4, "new parts after one upload past two full chunks: {new:?}");
    let expected = publish_fresh(&t, blobs, &fresh(&builder), &repo).await?;
    assert_eq!(text, expected, "the same Packages as a build from nothing");
    Ok(())
});

db_test!(a_group_stores_only_the_chunks_a_members_change_touches, |t: TestDb| async move {
    let service = RepositoryService::new(&t.db, packyard_formats::registry());
    let hosted = |name: &str| {
        serde_json::json!({"name": name, "format": "apt", "type": "hosted",
            "apt": {"distributions": ["stable"], "architectures": ["amd64"]}})
    };
    let small = service.create(serde_json::from_value(hosted("small"))?).await?;
    let big = service.create(serde_json::from_value(hosted("big"))?).await?;
    let group = service
        .create(serde_json::from_value(serde_json::json!({"name": "both", "format": "apt", "type": "group",
            "group": {"members": ["small", "big"]},
            "apt": {"distributions": ["stable"], "architectures": ["amd64"]}}))?)
        .await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    // About 4 MiB of stanzas in big: several chunks of the group's index.
    let mut ids = Vec::new();
    for i in 0..5_000 {
        ids.push(add_described(&t, big.id, &format!("pkg-{i:05}"), i).await?);
    }
    add_described(&t, small.id, "loc-00", 10_000).await?;
    publish(&t, blobs, &builder, &big).await?;
    publish(&t, blobs, &builder, &small).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let at = written();
    let first = publish(&t, blobs, &builder, &group).await?;
    let full = written() - at;
    let text = check(blobs, &first).await?;
    assert_eq!(text.matches("Package: ").count(), 5_001);
    let xz = first.get("dists/stable/main/binary-amd64/Packages.xz").map(|f| f.size).unwrap_or_default();
    let single = one_xz_stream(&text)?;
    println!("the group's Packages.xz: {xz} bytes; one xz stream of its {} bytes of text: {single}", text.len());
    assert!(
        xz as f64 <= 1.1 * single as f64,
        "the group's Packages.xz is {xz} bytes, one xz stream of its text {single}"
    );

    // A package in the middle of big goes, and one more comes at its end: big's stanzas are
    // merged again, and only the chunks around the two changes are new.
    let mut tx = t.db.pool().begin().await?;
    packyard_formats::apt::rows::delete(&t.db, &mut tx, ids[2_500]).await?;
    t.db.record_change(&mut tx, big.id, "apt", "stable").await?;
    tx.commit().await?;
    add_described(&t, big.id, "pkg-05000", 5_000).await?;
    publish(&t, blobs, &builder, &big).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let at = written();
    let second = publish(&t, blobs, &builder, &group).await?;
    let changed = written() - at;
    let text = check(blobs, &second).await?;
    assert_eq!(text.matches("Package: ").count(), 5_001);
    assert!(!text.contains("Package: pkg-02500\n") && text.contains("Package: pkg-05000\n"));
    let new: Vec<_> = common::parts(&second).difference(&common::parts(&first)).cloned().collect();
    // Two chunks' three forms, the xz file's index of its blocks (a change may end a chunk
    // at another stanza, and the next one with it: one chunk more at most).
    assert!(new.len() <= 10, "{} new parts after two changes in big: {new:?}", new.len());
    assert!(changed * 4 < full * 3, "the change wrote {changed} bytes, the whole merge {full}");
    let kept = common::parts(&second).intersection(&common::parts(&first)).count();
    assert!(kept >= 3, "big's unchanged chunks are the same parts: {kept} kept");

    // A package of big's first chunk goes: the chunks after it are taken again but follow other
    // bytes now, so their hash states are carried on from their stored forms; Release must
    // still list each file's own hashes (`check`).
    publish_nothing_new(&t, blobs, &builder, &group).await?;
    let mut tx = t.db.pool().begin().await?;
    packyard_formats::apt::rows::delete(&t.db, &mut tx, ids[10]).await?;
    t.db.record_change(&mut tx, big.id, "apt", "stable").await?;
    tx.commit().await?;
    publish(&t, blobs, &builder, &big).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let at = written();
    let third = publish(&t, blobs, &builder, &group).await?;
    let changed = written() - at;
    let text = check(blobs, &third).await?;
    assert!(!text.contains("Package: pkg-00010\n"));
    assert_eq!(text.matches("Package: ").count(), 5_000);
    let kept = common::parts(&third).intersection(&common::parts(&second)).count();
    assert!(kept >= 3, "big's later chunks are the same parts: {kept} kept");
    assert!(changed * 4 < full * 3, "the change wrote {changed} bytes, the whole merge {full}");
    assert_eq!(stanzas(&text), stanzas(&publish_fresh(&t, blobs, &fresh(&builder), &group).await?));

    // One more package at big's end, as uploads come: only the last piece of big's open chunk
    // (at most 512 KiB of text) is stored again, not the chunk of a MiB or more it is part of.
    add_described(&t, big.id, "pkg-05001", 5_001).await?;
    publish(&t, blobs, &builder, &big).await?;
    t.db.request_changes(group.id, &[("apt".to_string(), "stable".to_string())]).await?;
    let at = written();
    let fourth = publish(&t, blobs, &builder, &group).await?;
    let appended = written() - at;
    let text = check(blobs, &fourth).await?;
    assert_eq!(text.matches("Package: ").count(), 5_001);
    assert!(text.contains("Package: pkg-05001\n"));
    let new = common::parts(&fourth).difference(&common::parts(&third)).count();
    assert!(new <= 5, "{new} new parts after an append: one piece's three forms and the xz file's index");
    println!("an append wrote {appended} bytes, the whole merge {full}");
    // A piece is at most 512 KiB of text; with its gzip and xz forms and the release files an
    // append writes under 800 KiB (the whole open chunk, ~0.8 MiB of text here, wrote 1.1 MB).
    assert!(appended < 800 * 1024, "an append wrote {appended} bytes");
    assert!(appended * 6 < full, "an append wrote {appended} bytes, the whole merge {full}");
    Ok(())
});

/// Adds package `name` 1.0 for `arch` in `component` of `stable`.
async fn add_in(t: &TestDb, repo: i64, name: &str, i: usize, (component, arch): (&str, &str)) -> anyhow::Result<i64> {
    let p = AptPackage {
        component: component.into(),
        pool_path: format!("pool/{component}/p/{name}/{name}_1.0_{arch}.deb"),
        ..row(repo, name, i, arch)
    };
    insert_row(t, &p, Some("stable")).await
}

/// The stanzas of one index of a snapshot (`dists/<dist>/<component>/binary-<arch>/Packages`).
async fn index_of(
    blobs: &FileStore,
    files: &HashMap<String, SnapshotFile>,
    (dist, component, arch): (&str, &str, &str),
) -> anyhow::Result<Vec<String>> {
    let path = format!("dists/{dist}/{component}/binary-{arch}/Packages");
    let f = files.get(&path).ok_or_else(|| anyhow::anyhow!("no {path}"))?;
    Ok(stanzas(std::str::from_utf8(&read_file(blobs, f).await?)?))
}

// A group serving `bookworm` over a hosted member of distribution `stable` and a nested group
// (itself over a hosted `stable`), two components and two architectures: a change in one index
// of one member, however deep, costs the outer group that index's chunk, nothing else.
db_test!(every_group_shape_merges_only_what_changed, |t: TestDb| async move {
    let service = RepositoryService::new(&t.db, packyard_formats::registry());
    let shape = serde_json::json!({"components": ["main", "contrib"], "architectures": ["amd64", "arm64"]});
    let hosted = |name: &str| {
        let mut apt = shape.clone();
        apt["distributions"] = serde_json::json!(["stable"]);
        serde_json::json!({"name": name, "format": "apt", "type": "hosted", "apt": apt})
    };
    let group = |name: &str, members: &[&str]| {
        let mut apt = shape.clone();
        apt["distributions"] = serde_json::json!(["bookworm"]);
        serde_json::json!({"name": name, "format": "apt", "type": "group", "group": {"members": members}, "apt": apt})
    };
    let small = service.create(serde_json::from_value(hosted("small"))?).await?;
    let big = service.create(serde_json::from_value(hosted("big"))?).await?;
    let inner = service.create(serde_json::from_value(group("inner", &["big"]))?).await?;
    let outer = service.create(serde_json::from_value(group("outer", &["small", "inner"]))?).await?;
    let (store, builder) = builder(&t).await?;
    let blobs = store.as_ref();
    let places = [("main", "amd64"), ("main", "arm64"), ("contrib", "amd64"), ("contrib", "arm64")];
    for i in 0..1_200 {
        add_in(&t, big.id, &format!("big-{i:05}"), i * 10 + 1, places[i % 4]).await?;
    }
    for i in 0..40 {
        add_in(&t, small.id, &format!("small-{i:03}"), 20_000 + i * 10 + 1, places[i % 4]).await?;
    }
    let request = |repo: i64, dist: &'static str| {
        let db = t.db.clone();
        async move { db.request_changes(repo, &[("apt".to_string(), dist.to_string())]).await }
    };
    publish(&t, blobs, &builder, &big).await?;
    publish(&t, blobs, &builder, &small).await?;
    request(inner.id, "bookworm").await?;
    publish(&t, blobs, &builder, &inner).await?;
    request(outer.id, "bookworm").await?;
    let written = || t.metrics.blob_bytes_total.with_label_values(&["in"]).get();
    let at = written();
    let first = publish(&t, blobs, &builder, &outer).await?;
    let whole_bytes = written() - at;
    for (n, place) in places.iter().enumerate() {
        let listed = index_of(blobs, &first, ("bookworm", place.0, place.1)).await?;
        assert_eq!(listed.len(), 300 + 10, "{place:?}: big's 300 and small's 10");
        assert!(listed.iter().any(|s| s.starts_with(&format!("Package: small-{n:03}\n"))), "{place:?}");
    }

    // Changes in a hosted member of the outer group, then in the member of the nested group.
    let steps: [(&Repository, &str, (&str, &str)); 2] =
        [(&small, "small-new", ("main", "amd64")), (&big, "big-new", ("contrib", "arm64"))];
    let mut before = first;
    for (k, (member, name, place)) in steps.into_iter().enumerate() {
        add_in(&t, member.id, name, 50_000 + k * 10 + 1, place).await?;
        publish(&t, blobs, &builder, member).await?;
        if member.id == big.id {
            request(inner.id, "bookworm").await?;
            publish(&t, blobs, &builder, &inner).await?;
        }
        request(outer.id, "bookworm").await?;
        let at = written();
        let after = publish(&t, blobs, &builder, &outer).await?;
        // One of four indexes merged again, the others not even compressed again.
        let merged_bytes = written() - at;
        assert!(
            merged_bytes * 3 < whole_bytes,
            "{name}: {merged_bytes} bytes written, {whole_bytes} by the whole merge"
        );
        let new: Vec<_> = common::parts(&after).difference(&common::parts(&before)).cloned().collect();
        // The changed index's member chunk in three forms, and its xz file's index of blocks.
        assert_eq!(new.len(), 4, "{name} in {place:?}: new parts {new:?}");
        let listed = index_of(blobs, &after, ("bookworm", place.0, place.1)).await?;
        assert!(listed.iter().any(|s| s.starts_with(&format!("Package: {name}\n"))), "{name} listed");
        for other in places.iter().filter(|p| **p != place) {
            assert_eq!(
                after.get(&format!("dists/bookworm/{}/binary-{}/Packages.xz", other.0, other.1)).map(|f| &f.sha256),
                before.get(&format!("dists/bookworm/{}/binary-{}/Packages.xz", other.0, other.1)).map(|f| &f.sha256),
                "{other:?} is as it was"
            );
        }
        before = after;
    }
    // The same stanzas as merges from nothing, of both groups.
    let fresh_builder = fresh(&builder);
    request(inner.id, "bookworm").await?;
    publish(&t, blobs, &fresh_builder, &inner).await?;
    request(outer.id, "bookworm").await?;
    let whole = publish(&t, blobs, &fresh_builder, &outer).await?;
    for place in places {
        assert_eq!(
            index_of(blobs, &before, ("bookworm", place.0, place.1)).await?,
            index_of(blobs, &whole, ("bookworm", place.0, place.1)).await?,
            "{place:?} as a merge from nothing lists it"
        );
    }
    Ok(())
});
