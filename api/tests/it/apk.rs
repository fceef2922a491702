//! APK hosted through the whole actix service, on every database backend, one behaviour per
//! test: the index key, uploads (good and bad), the worker's signed `APKINDEX.tar.gz` checked
//! the way apk checks it by an independent verifier (`apk_verify.py`: Python's tarfile and zlib,
//! `openssl dgst -sha1 -verify`), package downloads with HEAD/Range/304, the empty index of a unit
//! nothing was uploaded to, warmed index reads without queries, deletes and key rotation.

use crate::common;

use std::path::Path;

use actix_web::test::TestRequest;
use common::app::{As, Repo, TestApp};
use packyard_codecs::apk::testing::{build_apk, sized_apk, Built, Fixture};
use packyard_model::repos::Format;
use sha2::{Digest, Sha256};

/// Uploads above 2 MiB are refused in these tests (the 413 case).
fn small_uploads(c: &mut packyard_model::config::Config) {
    c.server.max_upload_bytes = 2 << 20;
}

/// Repository `alpine` (x86_64 and aarch64) with a generated 2048-bit index key (generation
/// without a size gives 4096 bits, slower); its key name.
async fn alpine(app: &TestApp) -> anyhow::Result<String> {
    let repo =
        Repo::hosted("alpine", Format::Apk).with(serde_json::json!({"apk": {"architectures": ["x86_64", "aarch64"]}}));
    app.create(repo).await?;
    let r = app.call(signing_key(serde_json::json!({"generate": true, "algorithm": "rsa2048"}))).await?;
    anyhow::ensure!(r.status == 200, "{}", r.text);
    Ok(r.json["key_name"].as_str().unwrap_or_default().to_string())
}

fn signing_key(body: serde_json::Value) -> TestRequest {
    TestRequest::put().uri("/api/v1/repositories/alpine/signing-key").set_json(body)
}

fn put(path: &str, bytes: Vec<u8>) -> TestRequest {
    TestRequest::put().uri(&format!("/repository/alpine/{path}")).set_payload(bytes)
}

/// The packages the read tests serve: a signed one, a noarch one under both architectures, a
/// 1 MiB one.
struct Packages {
    hello: Built,
    noarch: Built,
    big: Built,
}

async fn upload_packages(app: &TestApp) -> anyhow::Result<Packages> {
    let hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let noarch = build_apk(&Fixture::new("tool-doc", "1.0-r0", "noarch"))?;
    let big = sized_apk("bigpkg", "3.0-r2", "x86_64", 1 << 20, 7)?;
    let mut uploads = vec![("v3.20/main/x86_64/hello-2.12-r1.apk", &hello)];
    uploads.push(("v3.20/main/x86_64/tool-doc-1.0-r0.apk", &noarch));
    uploads.push(("v3.20/main/aarch64/tool-doc-1.0-r0.apk", &noarch));
    uploads.push(("v3.20/main/x86_64/bigpkg-3.0-r2.apk", &big));
    for (path, pkg) in uploads {
        let r = app.call(put(path, pkg.bytes.clone())).await?;
        anyhow::ensure!(r.status == 201, "{path}: {}", r.text);
    }
    Ok(Packages { hello, noarch, big })
}

/// Runs the independent verifier on `dir/APKINDEX.tar.gz` (and the packages beside it): its
/// summary.
fn verify(dir: &Path, key_pem: &Path, key_name: &str) -> anyhow::Result<serde_json::Value> {
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apk_verify.py"))
        .arg(dir.join("APKINDEX.tar.gz"))
        .arg(key_pem)
        .arg(key_name)
        .arg(dir)
        .output()?;
    anyhow::ensure!(out.status.success(), "{}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The key as apk wants it, written to `dir/key.pem`.
async fn save_key(app: &TestApp, key_name: &str, dir: &Path) -> anyhow::Result<std::path::PathBuf> {
    let r = app.get(&format!("/repository/alpine/keys/{key_name}")).await?;
    anyhow::ensure!(r.status == 200, "{}", r.text);
    let path = dir.join("key.pem");
    std::fs::write(&path, &r.text)?;
    Ok(path)
}

async fn signing_keys_are_rsa(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("alpine", Format::Apk)).await?;
    let r = app.call(signing_key(serde_json::json!({"generate": true, "algorithm": "rsa2048"}))).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["algorithm"], "rsa2048");
    let key_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    assert!(key_name.starts_with("alpine@") && key_name.ends_with(".rsa.pub"), "{key_name}");
    let r = app.call(signing_key(serde_json::json!({"generate": true, "algorithm": "ed25519"}))).await?;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("use rsa2048, rsa3072 or rsa4096"), "{}", r.text);
    Ok(())
}
app_test!(signing_keys_are_rsa);

async fn uploads_and_an_identical_retry(app: TestApp) -> anyhow::Result<()> {
    alpine(&app).await?;
    let hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let r = app.call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["path"], "v3.20/main/x86_64/hello-2.12-r1.apk");
    assert_eq!(r.json["sha256"], hex::encode(Sha256::digest(&hello.bytes)));
    let noarch = build_apk(&Fixture::new("tool-doc", "1.0-r0", "noarch"))?;
    for arch in ["x86_64", "aarch64"] {
        let r = app.call(put(&format!("v3.20/main/{arch}/tool-doc-1.0-r0.apk"), noarch.bytes.clone())).await?;
        assert_eq!(r.status, 201, "{arch}: {}", r.text);
    }
    let big = sized_apk("bigpkg", "3.0-r2", "x86_64", 1 << 20, 7)?;
    let r = app.call(put("v3.20/main/x86_64/bigpkg-3.0-r2.apk", big.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // An identical retry succeeds without a change.
    let r = app.call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    Ok(())
}
app_test!(uploads_and_an_identical_retry);

/// Bad input: each a 4xx with a reason, nothing stored.
async fn bad_uploads_are_refused_and_leave_nothing(app: TestApp) -> anyhow::Result<()> {
    alpine(&app).await?;
    let hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let r = app.call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let stored = app.blob_files();
    let other = build_apk(&Fixture { payload: b"other".to_vec(), ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let mut wrong_hash = hello.bytes[..hello.control.end].to_vec();
    wrong_hash.extend_from_slice(&other.bytes[other.control.end..]);
    let no_pkginfo = build_apk(&Fixture { omit_pkginfo: true, ..Fixture::new("x", "1-r0", "x86_64") })?;
    let bomb = build_apk(&Fixture { control_padding: 64 << 20, ..Fixture::new("bomb", "1-r0", "x86_64") })?;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("v3.20/main/x86_64/a-1-r0.apk", b"just text".to_vec(), 400, "does not start with a gzip member"),
        (
            "v3.20/main/x86_64/a-1-r0.apk",
            b"ADBd\0\0\0\x01rest".to_vec(),
            400,
            "apk v3 (ADB) package; this repository serves apk v2 packages: build it with abuild",
        ),
        ("v3.20/main/x86_64/x-1-r0.apk", no_pkginfo.bytes, 400, "no .PKGINFO"),
        ("v3.20/main/x86_64/hello-2.12-r1.apk", wrong_hash, 400, "does not match .PKGINFO's datahash"),
        ("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes[..hello.control.start + 40].to_vec(), 400, "truncated"),
        (
            "v3.20/main/x86_64/hello-9.9-r0.apk",
            hello.bytes.clone(),
            400,
            "the package's .PKGINFO says \"hello-2.12-r1.apk\"",
        ),
        (
            "v3.20/main/aarch64/hello-2.12-r1.apk",
            hello.bytes.clone(),
            400,
            "built for \"x86_64\" but was uploaded under \"aarch64\"",
        ),
        (
            "v3.20/main/riscv64/hello-2.12-r1.apk",
            hello.bytes.clone(),
            400,
            "architecture \"riscv64\" is not configured",
        ),
        ("v3.20/main/x86_64/bomb-1-r0.apk", bomb.bytes, 400, "unpacks to more than"),
        ("v3.20/main/x86_64/huge-1-r0.apk", vec![0x1f; 3 << 20], 413, "upload exceeds the limit"),
        ("v3.20/main/x86_64/hello.txt", hello.bytes.clone(), 400, "<pkgname>-<pkgver>.apk"),
        ("v3.20/.hidden/x86_64/hello-2.12-r1.apk", hello.bytes.clone(), 400, "invalid channel"),
    ];
    for (path, bytes, status, needle) in cases {
        let r = app.call(put(path, bytes)).await?;
        assert_eq!(r.status, status, "{path}: {}", r.text);
        assert!(r.text.contains(needle), "{path}: {:?} lacks {needle:?}", r.text);
    }
    assert_eq!(app.blob_files(), stored, "a refused upload left a blob");
    assert_eq!(app.blob_temporaries(), 0, "a temporary was left");
    // Same path, other bytes: refused under allow_once, and the refused bytes are not kept.
    let r = app.call(put("v3.20/main/x86_64/hello-2.12-r1.apk", other.bytes.clone())).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("already in repository alpine with different content"), "{}", r.text);
    assert_eq!(app.blob_files(), stored, "a refused upload left a blob");
    assert!(!app.has_blob_row(&other.bytes).await?, "a refused upload left a blob row");
    let r = app.send(put("v3.20/main/x86_64/y-1-r0.apk", hello.bytes.clone()), As::Anonymous).await?;
    assert_eq!(r.status, 401, "anonymous upload: {}", r.text);
    Ok(())
}
app_test!(bad_uploads_are_refused_and_leave_nothing, small_uploads);

/// The key, as apk wants it, and the independent check of what apk checks.
async fn indexes_verify_as_apk_checks_them(app: TestApp) -> anyhow::Result<()> {
    let key_name = alpine(&app).await?;
    let Packages { hello, noarch, big } = upload_packages(&app).await?;
    assert_eq!(app.publish().await, 2, "one snapshot per unit");
    let r = app.get("/repository/alpine/keys/").await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (200, format!("{key_name}\n").as_str()));
    let r = app.get(&format!("/repository/alpine/keys/{key_name}")).await?;
    assert_eq!(r.status, 200);
    assert!(r.text.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{}", r.text);
    let r = app.get("/repository/alpine/keys/other@0.rsa.pub").await?;
    assert_eq!(r.status, 404);
    assert!(r.text.contains(&key_name), "{}", r.text);

    let scratch = tempfile::tempdir()?;
    let key_pem = save_key(&app, &key_name, scratch.path()).await?;
    let mut expected = std::collections::BTreeMap::new();
    expected.insert(
        "x86_64",
        vec![
            ("bigpkg-3.0-r2.apk", &big.bytes),
            ("hello-2.12-r1.apk", &hello.bytes),
            ("tool-doc-1.0-r0.apk", &noarch.bytes),
        ],
    );
    expected.insert("aarch64", vec![("tool-doc-1.0-r0.apk", &noarch.bytes)]);
    for (arch, pkgs) in &expected {
        let index = app.get(&format!("/repository/alpine/v3.20/main/{arch}/APKINDEX.tar.gz")).await?;
        assert_eq!(index.status, 200);
        assert_eq!(index.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/gzip"));
        let dir = scratch.path().join(arch);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("APKINDEX.tar.gz"), &index.bytes)?;
        for (file, want) in pkgs {
            let body = app.get(&format!("/repository/alpine/v3.20/main/{arch}/{file}")).await?.bytes;
            assert_eq!(&body[..], &want[..], "{arch}/{file} served byte for byte");
            std::fs::write(dir.join(file), &body)?;
        }
        let summary = verify(&dir, &key_pem, &key_name)?;
        assert_eq!(summary["description"], format!("alpine v3.20/main/{arch}"));
        let mut got: Vec<(String, String)> = summary["packages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| (p[0].as_str().unwrap_or("").to_string(), p[2].as_str().unwrap_or("").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        got.sort();
        let want: Vec<(String, String)> =
            pkgs.iter().map(|(f, _)| (f.rsplitn(3, '-').nth(2).unwrap_or(f).to_string(), arch.to_string())).collect();
        assert_eq!(got, want, "{arch}: every package listed, noarch rewritten to the index arch");
        assert_eq!(
            summary["fields"][0].as_array().map(|f| f
                .iter()
                .take(5)
                .map(|x| x.as_str().unwrap_or(""))
                .collect::<String>()),
            Some("CPVAS".into())
        );
    }
    Ok(())
}
app_test!(indexes_verify_as_apk_checks_them);

/// Package reads: HEAD, Range, 304, 404.
async fn package_reads_honour_head_range_and_etags(app: TestApp) -> anyhow::Result<()> {
    alpine(&app).await?;
    let Packages { big, .. } = upload_packages(&app).await?;
    let path = "/repository/alpine/v3.20/main/x86_64/bigpkg-3.0-r2.apk";
    let r = app.send(TestRequest::default().method(actix_web::http::Method::HEAD).uri(path), As::Anonymous).await?;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-length").and_then(|v| v.to_str().ok()),
        Some(big.bytes.len().to_string().as_str())
    );
    assert!(r.text.is_empty());
    let r = app.send(TestRequest::get().uri(path).insert_header(("Range", "bytes=0-65535")), As::Anonymous).await?;
    assert_eq!(&r.bytes[..], &big.bytes[..65536]);
    let etag = format!("\"{}\"", hex::encode(Sha256::digest(&big.bytes)));
    let r =
        app.send(TestRequest::get().uri(path).insert_header(("If-None-Match", etag.as_str())), As::Anonymous).await?;
    assert_eq!(r.status, 304);
    let r = app.get("/repository/alpine/v3.20/main/x86_64/nothere-1-r0.apk").await?;
    assert_eq!(r.status, 404);
    Ok(())
}
app_test!(package_reads_honour_head_range_and_etags);

/// A unit nothing was uploaded to has an empty signed index (so `apk update` works before the
/// first upload): signed with the repository's key, no records; an unconfigured architecture
/// has none.
async fn a_unit_without_uploads_has_an_empty_signed_index(app: TestApp) -> anyhow::Result<()> {
    let key_name = alpine(&app).await?;
    let empty = "/repository/alpine/v3.20/community/x86_64/APKINDEX.tar.gz";
    let r = app.get(empty).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/gzip"));
    let scratch = tempfile::tempdir()?;
    let key_pem = save_key(&app, &key_name, scratch.path()).await?;
    let dir = scratch.path().join("community");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("APKINDEX.tar.gz"), &r.bytes)?;
    let summary = verify(&dir, &key_pem, &key_name)?;
    assert_eq!(summary["description"], "alpine v3.20/community/x86_64");
    assert_eq!(summary["packages"], serde_json::json!([]));
    let r = app.get("/repository/alpine/v3.20/community/riscv64/APKINDEX.tar.gz").await?;
    assert_eq!(r.status, 404);
    assert!(r.text.contains("architecture \"riscv64\" is not configured"), "{}", r.text);
    Ok(())
}
app_test!(a_unit_without_uploads_has_an_empty_signed_index);

async fn warmed_index_reads_make_no_query(app: TestApp) -> anyhow::Result<()> {
    alpine(&app).await?;
    upload_packages(&app).await?;
    app.publish().await;
    let index = "/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz";
    let empty = "/repository/alpine/v3.20/community/x86_64/APKINDEX.tar.gz";
    for path in [index, empty] {
        assert_eq!(app.get(path).await?.status, 200, "{path}");
    }
    let before = app.t.metrics.db_queries();
    for _ in 0..3 {
        for path in [index, empty] {
            let r = app.get(path).await?;
            assert_eq!(r.status, 200, "{path}");
        }
    }
    assert_eq!(app.t.metrics.db_queries() - before, 0, "warmed index reads ran database queries");
    Ok(())
}
app_test!(warmed_index_reads_make_no_query);

/// The records of an index (its second gzip member's text).
pub(crate) fn index_text(bytes: &[u8]) -> anyhow::Result<String> {
    let members = packyard_codecs::apk::index::split_members(bytes)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&members[1][..]), &mut text)?;
    Ok(text)
}

/// Delete: gone from the package route and, once published, from the index.
async fn deleted_packages_leave_the_index(app: TestApp) -> anyhow::Result<()> {
    alpine(&app).await?;
    upload_packages(&app).await?;
    app.publish().await;
    let index = "/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz";
    assert!(index_text(&app.get(index).await?.bytes)?.contains("P:hello\n"));
    let r = app.delete("/repository/alpine/v3.20/main/x86_64/hello-2.12-r1.apk").await?;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = app.delete("/repository/alpine/v3.20/main/x86_64/hello-2.12-r1.apk").await?;
    assert_eq!(r.status, 404);
    app.publish().await;
    app.services.published.invalidate();
    let text = index_text(&app.get(index).await?.bytes)?;
    assert!(!text.contains("P:hello\n") && text.contains("P:bigpkg\n"), "{text}");
    Ok(())
}
app_test!(deleted_packages_leave_the_index);

/// Rotation to an imported key (PKCS#1, as `openssl genrsa -traditional` and abuild-keygen
/// write it): the indexes are re-signed with it, and the old public key stays listed.
async fn rotation_to_an_imported_key_re_signs_the_indexes(app: TestApp) -> anyhow::Result<()> {
    let key_name = alpine(&app).await?;
    upload_packages(&app).await?;
    app.publish().await;
    let pem = std::process::Command::new("openssl").args(["genrsa", "-traditional", "2048"]).output()?;
    assert!(pem.status.success());
    let pem = String::from_utf8(pem.stdout)?;
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "{pem}");
    let r =
        app.call(signing_key(serde_json::json!({"private_key": "-----BEGIN RSA PRIVATE KEY-----\nnope\n"}))).await?;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("not a usable APK index key"), "{}", r.text);
    let r = app.call(signing_key(serde_json::json!({"private_key": pem}))).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    let new_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    assert_ne!(new_name, key_name);
    assert_eq!(r.json["previous_key_name"], key_name.as_str());
    app.publish().await;
    app.services.published.invalidate();
    let r = app.get("/repository/alpine/keys/").await?;
    assert_eq!(r.text, format!("{new_name}\n{key_name}\n"));
    let new_public = app.get(&format!("/repository/alpine/keys/{new_name}")).await?.text;
    let bytes = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?.bytes;
    let sig_member = packyard_codecs::apk::index::split_members(&bytes)?.remove(0);
    let mut sig_tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&sig_member[..]), &mut sig_tar)?;
    assert!(String::from_utf8_lossy(&sig_tar[..100]).starts_with(&format!(".SIGN.RSA.{new_name}")));
    let keys = packyard_codecs::apk::signing::parse_public_keys(&new_public)?;
    packyard_codecs::apk::index::verify_index(&bytes, &keys)?;
    Ok(())
}
app_test!(rotation_to_an_imported_key_re_signs_the_indexes);

/// Rotation with an overlap (#43): a key added beside the current one signs every index with
/// it — a client that trusts only the old key and one that trusts only the new key both verify
/// (the independent verifier, as apk picks the signature of a key it has), `keys/` offers both;
/// once the old key is retired only the new one verifies. Each step is one audited call.
async fn a_rotation_overlaps_then_retires_the_old_key(app: TestApp) -> anyhow::Result<()> {
    let old_name = alpine(&app).await?;
    let hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let r = app.call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    app.publish().await;
    let scratch = tempfile::tempdir()?;
    let old_dir = scratch.path().join("old");
    std::fs::create_dir_all(&old_dir)?;
    let old_pem = save_key(&app, &old_name, &old_dir).await?;

    let keys = |body: Option<serde_json::Value>| {
        let uri = "/api/v1/repositories/alpine/signing-keys";
        match body {
            Some(b) => TestRequest::post().uri(uri).set_json(b),
            None => TestRequest::get().uri(uri),
        }
    };
    let r = app.call(keys(Some(serde_json::json!({"generate": true, "algorithm": "rsa2048"})))).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let listed = r.json.as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 2, "{}", r.text);
    assert_eq!((listed[0]["slot"].as_str(), listed[0]["signs"].as_bool()), (Some("current"), Some(true)));
    assert_eq!((listed[1]["slot"].as_str(), listed[1]["signs"].as_bool()), (Some("overlap"), Some(true)));
    assert_eq!(listed[1]["key_name"], old_name.as_str());
    let new_name = listed[0]["key_name"].as_str().unwrap_or_default().to_string();
    let (old_fp, new_fp) =
        (listed[1]["fingerprint"].as_str().unwrap_or_default(), listed[0]["fingerprint"].as_str().unwrap_or_default());
    assert_ne!(new_name, old_name);
    // One rotation at a time, and no replacement during one.
    let r = app.call(keys(Some(serde_json::json!({"generate": true, "algorithm": "rsa2048"})))).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("is in a rotation already"), "{}", r.text);
    let r = app.call(signing_key(serde_json::json!({"generate": true, "algorithm": "rsa2048"}))).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("is in a rotation's overlap"), "{}", r.text);

    app.publish().await;
    app.services.published.invalidate();
    let r = app.get("/repository/alpine/keys/").await?;
    assert_eq!(r.text, format!("{new_name}\n{old_name}\n"));
    let new_dir = scratch.path().join("new");
    std::fs::create_dir_all(&new_dir)?;
    let new_pem = save_key(&app, &new_name, &new_dir).await?;
    // The worker's index of the unit with a package, and the empty index of one without: each
    // verifies with either key alone.
    let unit = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?.bytes;
    let empty = app.get("/repository/alpine/v3.20/community/x86_64/APKINDEX.tar.gz").await?.bytes;
    for (dir, pem, name) in [(&old_dir, &old_pem, old_name.as_str()), (&new_dir, &new_pem, new_name.as_str())] {
        std::fs::write(dir.join("hello-2.12-r1.apk"), &hello.bytes)?;
        std::fs::write(dir.join("APKINDEX.tar.gz"), &unit)?;
        let summary = verify(dir, pem, name)?;
        assert_eq!(summary["packages"], serde_json::json!([["hello", "2.12-r1", "x86_64"]]));
        let only = scratch.path().join(format!("empty-{name}"));
        std::fs::create_dir_all(&only)?;
        std::fs::write(only.join("APKINDEX.tar.gz"), &empty)?;
        verify(&only, pem, name)?;
    }

    // Retiring the old key: only the new one signs; a client trusting only the old one fails.
    let r = app.call(TestRequest::delete().uri(&format!("/api/v1/repositories/alpine/signing-keys/{old_fp}"))).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json.as_array().map(Vec::len), Some(1), "{}", r.text);
    app.publish().await;
    app.services.published.invalidate();
    assert_eq!(app.get("/repository/alpine/keys/").await?.text, format!("{new_name}\n"));
    let unit = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?.bytes;
    std::fs::write(new_dir.join("APKINDEX.tar.gz"), &unit)?;
    verify(&new_dir, &new_pem, &new_name)?;
    std::fs::write(old_dir.join("APKINDEX.tar.gz"), &unit)?;
    let refused = match verify(&old_dir, &old_pem, &old_name) {
        Ok(v) => anyhow::bail!("the old key alone still verifies the index: {v}"),
        Err(e) => e,
    };
    assert!(refused.to_string().contains(&format!("none by '.SIGN.RSA.{old_name}'")), "{refused}");
    // The last signing key is not retired; an unknown one is a 404.
    let r = app.call(TestRequest::delete().uri(&format!("/api/v1/repositories/alpine/signing-keys/{new_fp}"))).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("is the only key that signs repository alpine"), "{}", r.text);
    let r = app.call(TestRequest::delete().uri("/api/v1/repositories/alpine/signing-keys/ABCDEF")).await?;
    assert_eq!(r.status, 404, "{}", r.text);
    let audit = app.audit().await?;
    for action in ["repository.signing_key.add", "repository.signing_key.retire"] {
        assert!(audit.contains(&(action.to_string(), "alpine".to_string())), "{action}: {audit:?}");
    }
    Ok(())
}
app_test!(a_rotation_overlaps_then_retires_the_old_key);

mod over_http {
    use std::path::Path;
    use std::time::Duration;

    use super::common::process::{basic, start, status_of, Server};
    use super::{Format, Repo};
    use packyard_codecs::apk::testing::{build_apk, Fixture};

    const PW: &str = "apk-admin";

    fn get(server: &Server, path: &str) -> anyhow::Result<(u16, std::collections::HashMap<String, String>, Vec<u8>)> {
        let (status, r) = match ureq::get(&format!("{}{path}", server.public)).call() {
            Ok(r) => (r.status(), r),
            Err(ureq::Error::Status(code, r)) => (code, r),
            Err(e) => return Err(e.into()),
        };
        let headers = r
            .headers_names()
            .into_iter()
            .filter_map(|n| r.header(&n).map(|v| (n.to_ascii_lowercase(), v.to_string())))
            .collect();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
        Ok((status, headers, body))
    }

    fn admin(server: &Server, method: &str, path: &str, body: serde_json::Value) -> anyhow::Result<(u16, String)> {
        status_of(
            ureq::request(method, &format!("{}{path}", server.public)).set("Authorization", &basic(PW)).send_json(body),
        )
    }

    /// Creates an APK repository; a hosted or group one gets a quick 2048-bit key.
    fn create(server: &Server, spec: impl Into<serde_json::Value>) -> anyhow::Result<()> {
        let spec: serde_json::Value = spec.into();
        let (s, text) = admin(server, "POST", "/api/v1/repositories", spec.clone())?;
        anyhow::ensure!(s == 201, "create: {s} {text}");
        if spec["type"] != "proxy" {
            let name = spec["name"].as_str().unwrap_or_default();
            let (s, text) = admin(
                server,
                "PUT",
                &format!("/api/v1/repositories/{name}/signing-key"),
                serde_json::json!({"generate": true, "algorithm": "rsa2048"}),
            )?;
            anyhow::ensure!(s == 200, "key: {s} {text}");
        }
        Ok(())
    }

    fn upload(server: &Server, repo: &str, path: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let (s, text) = status_of(
            ureq::put(&format!("{}/repository/{repo}/{path}?wait=true", server.public))
                .set("Authorization", &basic(PW))
                .send_bytes(bytes),
        )?;
        anyhow::ensure!(s == 201, "upload {path}: {s} {text}");
        Ok(())
    }

    /// The repository's current key: (file name, PEM).
    fn key(server: &Server, repo: &str) -> anyhow::Result<(String, String)> {
        let (_, _, names) = get(server, &format!("/repository/{repo}/keys/"))?;
        let name = String::from_utf8_lossy(&names).lines().next().unwrap_or_default().to_string();
        let (s, _, pem) = get(server, &format!("/repository/{repo}/keys/{name}"))?;
        anyhow::ensure!(s == 200, "key {name}: {s}");
        Ok((name, String::from_utf8(pem)?))
    }

    /// An index, the verifier's summary of it, and the packages it lists (by file name).
    type Verified = (Vec<u8>, serde_json::Value, std::collections::BTreeMap<String, Vec<u8>>);

    /// Downloads a unit's index and every package it lists from `repo`, and runs the independent
    /// verifier against `key`; returns (index bytes, the verifier's summary, the packages).
    fn verify(server: &Server, repo: &str, unit: &str, key: &(String, String), dir: &Path) -> anyhow::Result<Verified> {
        let (s, _, index) = get(server, &format!("/repository/{repo}/{unit}/APKINDEX.tar.gz"))?;
        anyhow::ensure!(s == 200, "{repo} index: {s} {}", String::from_utf8_lossy(&index));
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("APKINDEX.tar.gz"), &index)?;
        std::fs::write(dir.join("key.pem"), &key.1)?;
        let text = packyard_codecs::apk::index::apkindex_text(&index)?;
        let mut packages = std::collections::BTreeMap::new();
        for rec in text.split("\n\n").filter(|r| !r.trim().is_empty()) {
            let field = |k: &str| rec.lines().find_map(|l| l.strip_prefix(k)).unwrap_or_default().to_string();
            let file = format!("{}-{}.apk", field("P:"), field("V:"));
            let (s, _, bytes) = get(server, &format!("/repository/{repo}/{unit}/{file}"))?;
            anyhow::ensure!(s == 200, "{repo} {file}: {s}");
            std::fs::write(dir.join(&file), &bytes)?;
            packages.insert(file, bytes);
        }
        let out = std::process::Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apk_verify.py"))
            .arg(dir.join("APKINDEX.tar.gz"))
            .arg(dir.join("key.pem"))
            .arg(&key.0)
            .arg(dir)
            .output()?;
        anyhow::ensure!(out.status.success(), "{repo}: {}", String::from_utf8_lossy(&out.stderr));
        Ok((index, serde_json::from_slice(&out.stdout)?, packages))
    }

    /// A proxy whose upstream is a second Packyard, and a group of a hosted repository and that
    /// proxy, checked the way apk checks them; then the upstream moves on (the group follows)
    /// and goes away (stale-if-error).
    #[test]
    fn proxy_and_group() -> anyhow::Result<()> {
        let unit = "v3.20/main/x86_64";
        let up_dir = tempfile::tempdir()?;
        let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
        upstream.wait_ready()?;
        create(&upstream, Repo::hosted("alpine", Format::Apk))?;
        let up_hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
        let up_doc = build_apk(&Fixture::new("tool-doc", "1.0-r0", "noarch"))?;
        upload(&upstream, "alpine", &format!("{unit}/hello-2.12-r1.apk"), &up_hello.bytes)?;
        upload(&upstream, "alpine", &format!("{unit}/tool-doc-1.0-r0.apk"), &up_doc.bytes)?;
        let up_key = key(&upstream, "alpine")?;

        let dir = tempfile::tempdir()?;
        let server = start(
            dir.path(),
            &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
        )?;
        server.wait_ready()?;
        create(
            &server,
            Repo::proxy("mirror", Format::Apk, &format!("{}/repository/alpine/", upstream.public))
                .with(serde_json::json!({"apk": {"architectures": ["x86_64"], "signed_by": up_key.1},
                    "proxy": {"metadata_ttl_secs": 1, "negative_ttl_secs": 60}})),
        )?;
        create(&server, Repo::hosted("local", Format::Apk))?;
        // The local hello differs from the upstream's: the group lists the first member's.
        let local_hello =
            build_apk(&Fixture { payload: b"local build".to_vec(), ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
        let mine = build_apk(&Fixture::new("mytool", "0.3-r0", "x86_64"))?;
        upload(&server, "local", &format!("{unit}/hello-2.12-r1.apk"), &local_hello.bytes)?;
        upload(&server, "local", &format!("{unit}/mytool-0.3-r0.apk"), &mine.bytes)?;
        create(
            &server,
            Repo::group("all", Format::Apk, &["local", "mirror"])
                .with(serde_json::json!({"apk": {"architectures": ["x86_64"]}})),
        )?;
        let scratch = tempfile::tempdir()?;

        // The proxy: the upstream's bytes unchanged, verified with the upstream's key.
        let (_, upstream_index) = {
            let (s, _, b) = get(&upstream, &format!("/repository/alpine/{unit}/APKINDEX.tar.gz"))?;
            (s, b)
        };
        let (s, h, _) = get(&server, &format!("/repository/mirror/{unit}/APKINDEX.tar.gz"))?;
        assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("miss")));
        let (index, summary, packages) = verify(&server, "mirror", unit, &up_key, &scratch.path().join("mirror"))?;
        assert_eq!(index, upstream_index, "the proxy serves the upstream's index unchanged");
        assert_eq!(summary["packages"].as_array().map(Vec::len), Some(2));
        assert_eq!(packages.get("hello-2.12-r1.apk"), Some(&up_hello.bytes));
        let (_, h, _) = get(&server, &format!("/repository/mirror/{unit}/hello-2.12-r1.apk"))?;
        assert_eq!(h.get("x-packyard-cache").map(String::as_str), Some("hit"));
        // A group over a proxy without the upstream's key could not verify what it merges:
        // refused at once, naming the setting (#39).
        let nokey = Repo::proxy("nokey", Format::Apk, &format!("{}/repository/alpine/", upstream.public));
        create(&server, nokey)?;
        let (s, text) =
            admin(&server, "POST", "/api/v1/repositories", Repo::group("blind", Format::Apk, &["nokey"]).into())?;
        assert_eq!(s, 400, "{text}");
        assert!(text.contains("group member nokey is a proxy without apk.signed_by"), "{text}");
        let (s, _, body) = get(&server, "/repository/mirror/v3.20/main/riscv64/APKINDEX.tar.gz")?;
        assert_eq!(s, 404);
        assert!(String::from_utf8_lossy(&body).contains("architecture \"riscv64\" is not served"));
        let (s, _, _) = get(&server, &format!("/repository/mirror/{unit}/nothere-1-r0.apk"))?;
        assert_eq!(s, 404);
        // A proxy's keys are its upstream's: the apk.signed_by key that signs the upstream's
        // index, under the name the index's signature gives it (what apk looks up).
        assert_eq!(key(&server, "mirror")?, up_key, "the upstream's key, by the upstream's name");
        let (s, _, body) = get(&server, "/repository/nokey/keys/")?;
        assert_eq!(s, 404);
        assert!(String::from_utf8_lossy(&body).contains("serves its upstream's signatures unchanged"), "{body:?}");

        // The group: published on first request, signed with its own key, first member wins,
        // each package served from the member whose record is listed.
        let group_key = key(&server, "all")?;
        assert_ne!(group_key.0, up_key.0);
        let (_, summary, packages) = verify(&server, "all", unit, &group_key, &scratch.path().join("all"))?;
        let mut names: Vec<&str> =
            summary["packages"].as_array().into_iter().flatten().filter_map(|p| p[0].as_str()).collect();
        names.sort();
        assert_eq!(names, vec!["hello", "mytool", "tool-doc"]);
        assert_eq!(packages.get("hello-2.12-r1.apk"), Some(&local_hello.bytes), "the first member's hello");
        assert_eq!(packages.get("tool-doc-1.0-r0.apk"), Some(&up_doc.bytes), "the proxy's tool-doc");
        assert_eq!(packages.get("mytool-0.3-r0.apk"), Some(&mine.bytes));
        // A branch no member has packages in: the upstream (a Packyard hosted repository) serves
        // an empty signed index for it, so the group publishes its own, empty and signed.
        let (s, _, _) = get(&server, "/repository/all/v3.21/main/x86_64/APKINDEX.tar.gz")?;
        assert_eq!(s, 200);
        let (_, summary, _) = verify(&server, "all", "v3.21/main/x86_64", &group_key, &scratch.path().join("v3.21"))?;
        assert_eq!(summary["packages"], serde_json::json!([]));

        // The upstream moves on: after the proxy's metadata TTL the group follows.
        let newer = build_apk(&Fixture::new("newer", "5.0-r0", "x86_64"))?;
        upload(&upstream, "alpine", &format!("{unit}/newer-5.0-r0.apk"), &newer.bytes)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (s, _, index) = get(&server, &format!("/repository/all/{unit}/APKINDEX.tar.gz"))?;
            let text = if s == 200 { packyard_codecs::apk::index::apkindex_text(&index)? } else { String::new() };
            if text.contains("P:newer\n") {
                break;
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the group never listed the upstream's new package: {text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let (s, _, body) = get(&server, &format!("/repository/all/{unit}/newer-5.0-r0.apk"))?;
        assert_eq!((s, &body), (200, &newer.bytes));

        // The upstream goes away: the proxy serves its copy, marked stale.
        drop(upstream);
        std::thread::sleep(Duration::from_millis(1100));
        let (s, h, body) = get(&server, &format!("/repository/mirror/{unit}/APKINDEX.tar.gz"))?;
        assert_eq!(
            (s, h.get("x-packyard-cache").map(String::as_str)),
            (200, Some("stale")),
            "{}",
            String::from_utf8_lossy(&body)
        );
        assert!(h.get("warning").is_some_and(|w| w.starts_with("110")));
        // ... and it is the index apk takes, with every package it lists (from the cache).
        let offline = tempfile::tempdir()?;
        let (index, summary, _) = verify(&server, "mirror", unit, &up_key, offline.path())?;
        assert_eq!(index, body, "the same bytes");
        assert!(summary["packages"].as_array().is_some_and(|p| !p.is_empty()), "{summary}");
        Ok(())
    }

    /// Cleanup of APK repositories: a hosted one keeps the newest version of each package in
    /// apk's order (the index, checked the way apk checks it, lists only it); a proxy's cached
    /// files go by last download — the cached copy nobody fetched goes, the next request
    /// fetches it again from the upstream, unchanged.
    #[test]
    fn cleanup_of_hosted_and_proxy() -> anyhow::Result<()> {
        use super::common::process::{catalogue, cleanup_now, sql};
        let unit = "v3.20/main/x86_64";
        let up_dir = tempfile::tempdir()?;
        let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
        upstream.wait_ready()?;
        create(&upstream, Repo::hosted("alpine", Format::Apk))?;
        let tool = build_apk(&Fixture::new("tool", "1.0-r0", "x86_64"))?;
        let up_hello = build_apk(&Fixture::new("hello", "2.12-r1", "x86_64"))?;
        upload(&upstream, "alpine", &format!("{unit}/tool-1.0-r0.apk"), &tool.bytes)?;
        upload(&upstream, "alpine", &format!("{unit}/hello-2.12-r1.apk"), &up_hello.bytes)?;
        let up_key = key(&upstream, "alpine")?;

        let dir = tempfile::tempdir()?;
        let server = start(
            dir.path(),
            &[
                ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
                ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
                ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100"),
                ("PACKYARD_CACHE__DOWNLOAD_STATS_FLUSH_MS", "100"),
            ],
        )?;
        server.wait_ready()?;
        let db = format!("sqlite://{}/data/packyard.db", dir.path().display());
        let auth = basic(PW);
        create(&server, Repo::hosted("local", Format::Apk))?;
        for v in ["2.9-r0", "2.12-r1", "2.12-r10"] {
            let apk = build_apk(&Fixture::new("hello", v, "x86_64"))?;
            upload(&server, "local", &format!("{unit}/hello-{v}.apk"), &apk.bytes)?;
        }
        let policy = serde_json::json!({"name": "newest", "format": "apk", "criteria": {"keep_latest": 1}, "repositories": ["local"]});
        let (preview, run) = cleanup_now(&server.public, &auth, policy, "local")?;
        let want: std::collections::BTreeSet<String> = ["hello 2.9-r0", "hello 2.12-r1"].map(String::from).into();
        assert_eq!(preview, want, "apk's order: 2.12-r10 is the newest");
        assert_eq!(run["components"], 2, "{run}");
        assert_eq!(catalogue(&server.public, &auth, "local")?, ["hello 2.12-r10".to_string()].into());
        let local_key = key(&server, "local")?;
        let scratch = tempfile::tempdir()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            // Until republished, the index lists packages that are gone (and their files 404).
            let seen = verify(&server, "local", unit, &local_key, &scratch.path().join("local"));
            if let Ok((_, summary, packages)) = &seen {
                if packages.keys().cloned().collect::<Vec<_>>() == ["hello-2.12-r10.apk"] {
                    assert_eq!(summary["packages"].as_array().map(Vec::len), Some(1), "{summary}");
                    break;
                }
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the index is not republished: {:?}",
                seen.map(|s| s.2.into_keys().collect::<Vec<_>>())
            );
            std::thread::sleep(Duration::from_millis(100));
        }

        // Patterns and ages on the hosted one: what is old and matches goes.
        for (name, v) in [("libfoo", "1.0-r0"), ("libbar", "1.0-r0")] {
            let apk = build_apk(&Fixture::new(name, v, "x86_64"))?;
            upload(&server, "local", &format!("{unit}/{name}-{v}.apk"), &apk.bytes)?;
        }
        sql(
            &db,
            &format!("UPDATE components SET created_at = created_at - {} WHERE name <> 'libbar'", 40 * 86_400_000i64),
        )?;
        let policy = serde_json::json!({"name": "old-libs", "format": "apk", "criteria": {"published_before_days": 30, "name_regex": "^lib", "version_regex": "^1\\."}, "repositories": ["local"]});
        let (preview, _) = cleanup_now(&server.public, &auth, policy, "local")?;
        assert_eq!(preview, ["libfoo 1.0-r0".to_string()].into(), "libbar is new, hello does not match");
        assert_eq!(
            catalogue(&server.public, &auth, "local")?,
            ["hello 2.12-r10".to_string(), "libbar 1.0-r0".to_string()].into()
        );

        // The proxy: two cached packages, both cached long ago; one fetched again now.
        create(
            &server,
            Repo::proxy("mirror", Format::Apk, &format!("{}/repository/alpine/", upstream.public))
                .with(serde_json::json!({"apk": {"architectures": ["x86_64"], "signed_by": up_key.1}})),
        )?;
        for file in ["tool-1.0-r0.apk", "hello-2.12-r1.apk"] {
            let (s, h, _) = get(&server, &format!("/repository/mirror/{unit}/{file}"))?;
            assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("miss")), "{file}");
        }
        // Their downloads counted (flushed every 100 ms here) before they are aged.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found = super::common::process::nexus(&server.public, &auth, "search/assets?repository=mirror")?;
            let counted =
                found["items"].as_array().into_iter().flatten().filter(|a| a["lastDownloaded"].is_string()).count();
            if counted == 2 {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "the downloads were not counted: {found}");
            std::thread::sleep(Duration::from_millis(50));
        }
        sql(&db, &format!("UPDATE components SET created_at = created_at - {}", 40 * 86_400_000i64))?;
        sql(&db, &format!("UPDATE assets SET last_downloaded = last_downloaded - {}", 40 * 86_400_000i64))?;
        let (s, h, _) = get(&server, &format!("/repository/mirror/{unit}/hello-2.12-r1.apk"))?;
        assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("hit")));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found =
                super::common::process::nexus(&server.public, &auth, "search/assets?repository=mirror&name=hello")?;
            let at = found["items"][0]["lastDownloaded"].as_str().and_then(packyard_model::time::parse_rfc3339);
            if at.is_some_and(|t| t > packyard_store::db::now_ms() - 86_400_000) {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "the download was not counted: {found}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let policy = serde_json::json!({"name": "unused", "format": "apk", "criteria": {"last_downloaded_before_days": 10}, "repositories": ["mirror"]});
        let (preview, run) = cleanup_now(&server.public, &auth, policy, "mirror")?;
        assert_eq!(preview, ["tool 1.0-r0".to_string()].into(), "only the copy nobody fetched");
        assert_eq!(run["components"], 1, "{run}");
        assert_eq!(catalogue(&server.public, &auth, "mirror")?, ["hello 2.12-r1".to_string()].into());
        let (s, h, body) = get(&server, &format!("/repository/mirror/{unit}/tool-1.0-r0.apk"))?;
        assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("miss")), "fetched again");
        assert_eq!(body, tool.bytes);
        let (_, h, _) = get(&server, &format!("/repository/mirror/{unit}/hello-2.12-r1.apk"))?;
        assert_eq!(h.get("x-packyard-cache").map(String::as_str), Some("hit"), "the one fetched lately stays cached");
        Ok(())
    }
}
