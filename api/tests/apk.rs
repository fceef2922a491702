//! APK hosted through the whole actix service, on every database backend: uploads (good and
//! bad), the worker's signed `APKINDEX.tar.gz` checked the way apk checks it by an independent
//! verifier (`apk_verify.py`: Python's tarfile and zlib, `openssl dgst -sha1 -verify`), package
//! downloads with HEAD/Range/304, warmed index reads without queries, and deletes.

#[macro_use]
mod common;

use std::path::Path;

use actix_web::test::{self as atest, TestRequest};
use packyard_codecs::apk::testing::{build_apk, sized_apk, Fixture};
use sha2::{Digest, Sha256};

fn blob_files(root: &Path) -> usize {
    walk(&root.join("sha256"))
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

async fn hosted_apk(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let Some(t) = packyard_store::testing::TestDb::fresh(backend).await? else { return Ok(()) };
    let services = common::services_with(&t, |c| c.server.max_upload_bytes = 2 << 20).await?;
    let app = atest::init_service(packyard_api::app::public_app(services.clone())).await;
    let call = |req: TestRequest| common::call(&app, req);
    let r = call(TestRequest::post().uri("/api/v1/repositories").insert_header(common::admin()).set_json(
        serde_json::json!({
            "name": "alpine", "format": "apk", "type": "hosted", "anonymous_read": true,
            "apk": {"architectures": ["x86_64", "aarch64"]}
        }),
    ))
    .await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // A 2048-bit key keeps the test quick (generation without a size gives 4096 bits).
    let r = call(
        TestRequest::put()
            .uri("/api/v1/repositories/alpine/signing-key")
            .insert_header(common::admin())
            .set_json(serde_json::json!({"generate": true, "algorithm": "rsa2048"})),
    )
    .await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["algorithm"], "rsa2048");
    let key_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    assert!(key_name.starts_with("alpine@") && key_name.ends_with(".rsa.pub"), "{key_name}");
    let r = call(
        TestRequest::put()
            .uri("/api/v1/repositories/alpine/signing-key")
            .insert_header(common::admin())
            .set_json(serde_json::json!({"generate": true, "algorithm": "ed25519"})),
    )
    .await?;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("use rsa2048, rsa3072 or rsa4096"), "{}", r.text);

    let put = |path: &str, bytes: Vec<u8>| {
        TestRequest::put().uri(&format!("/repository/alpine/{path}")).insert_header(common::admin()).set_payload(bytes)
    };
    // Good uploads: a signed package, a noarch one under both architectures, a 1 MiB one.
    let hello = build_apk(&Fixture { signed: true, ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let r = call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["path"], "v3.20/main/x86_64/hello-2.12-r1.apk");
    assert_eq!(r.json["sha256"], hex::encode(Sha256::digest(&hello.bytes)));
    let noarch = build_apk(&Fixture::new("tool-doc", "1.0-r0", "noarch"))?;
    for arch in ["x86_64", "aarch64"] {
        let r = call(put(&format!("v3.20/main/{arch}/tool-doc-1.0-r0.apk"), noarch.bytes.clone())).await?;
        assert_eq!(r.status, 201, "{arch}: {}", r.text);
    }
    let big = sized_apk("bigpkg", "3.0-r2", "x86_64", 1 << 20, 7)?;
    let r = call(put("v3.20/main/x86_64/bigpkg-3.0-r2.apk", big.bytes.clone())).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // An identical retry succeeds without a change.
    let r = call(put("v3.20/main/x86_64/hello-2.12-r1.apk", hello.bytes.clone())).await?;
    assert_eq!(r.status, 200, "{}", r.text);

    // Bad input: each a 4xx with a reason, nothing stored.
    let stored = blob_files(&t.dir.path().join("blobs"));
    let other = build_apk(&Fixture { payload: b"other".to_vec(), ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
    let mut wrong_hash = hello.bytes[..hello.control.end].to_vec();
    wrong_hash.extend_from_slice(&other.bytes[other.control.end..]);
    let no_pkginfo = build_apk(&Fixture { omit_pkginfo: true, ..Fixture::new("x", "1-r0", "x86_64") })?;
    let bomb = build_apk(&Fixture { control_padding: 64 << 20, ..Fixture::new("bomb", "1-r0", "x86_64") })?;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("v3.20/main/x86_64/a-1-r0.apk", b"just text".to_vec(), 400, "does not start with a gzip member"),
        ("v3.20/main/x86_64/a-1-r0.apk", b"ADBd\0\0\0\x01rest".to_vec(), 400, "apk v3 (ADB) package"),
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
        let r = call(put(path, bytes)).await?;
        assert_eq!(r.status, status, "{path}: {}", r.text);
        assert!(r.text.contains(needle), "{path}: {:?} lacks {needle:?}", r.text);
    }
    assert_eq!(blob_files(&t.dir.path().join("blobs")), stored, "a refused upload left a blob");
    assert_eq!(std::fs::read_dir(t.dir.path().join("blobs/tmp"))?.count(), 0, "a temporary was left");
    // Same path, other bytes: refused under allow_once, and the refused bytes are not kept.
    let r = call(put("v3.20/main/x86_64/hello-2.12-r1.apk", other.bytes.clone())).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("already in repository alpine with different content"), "{}", r.text);
    assert_eq!(blob_files(&t.dir.path().join("blobs")), stored, "a refused upload left a blob");
    let other_digest = packyard_store::blobs::Sha256Hex::parse(&hex::encode(Sha256::digest(&other.bytes)))?;
    assert!(services.db.blob(&other_digest).await?.is_none(), "a refused upload left a blob row");
    let r = call(
        TestRequest::put().uri("/repository/alpine/v3.20/main/x86_64/y-1-r0.apk").set_payload(hello.bytes.clone()),
    )
    .await?;
    assert_eq!(r.status, 401, "anonymous upload: {}", r.text);

    let due = packyard_store::db::publication::Due { debounce_ms: 0, max_delay_ms: 0 };
    let published = packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services))
        .with_due(due)
        .run_until_idle()
        .await;
    assert_eq!(published.len(), 2, "one snapshot per unit: {published:?}");

    // The key, as apk wants it, and the independent check of what apk checks.
    let r = call(TestRequest::get().uri("/repository/alpine/keys/")).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (200, format!("{key_name}\n").as_str()));
    let r = call(TestRequest::get().uri(&format!("/repository/alpine/keys/{key_name}"))).await?;
    assert_eq!(r.status, 200);
    assert!(r.text.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{}", r.text);
    let public_pem = r.text.clone();
    let r = call(TestRequest::get().uri("/repository/alpine/keys/other@0.rsa.pub")).await?;
    assert_eq!(r.status, 404);
    assert!(r.text.contains(&key_name), "{}", r.text);

    let scratch = tempfile::tempdir()?;
    std::fs::write(scratch.path().join("key.pem"), &public_pem)?;
    let mut expected = std::collections::BTreeMap::new();
    expected.insert("x86_64", vec![("bigpkg", &big.bytes), ("hello", &hello.bytes), ("tool-doc", &noarch.bytes)]);
    expected.insert("aarch64", vec![("tool-doc", &noarch.bytes)]);
    for (arch, pkgs) in &expected {
        let index =
            call(TestRequest::get().uri(&format!("/repository/alpine/v3.20/main/{arch}/APKINDEX.tar.gz"))).await?;
        assert_eq!(index.status, 200);
        assert_eq!(index.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/gzip"));
        let dir = scratch.path().join(arch);
        std::fs::create_dir_all(&dir)?;
        let bytes = atest::call_and_read_body(
            &app,
            TestRequest::get().uri(&format!("/repository/alpine/v3.20/main/{arch}/APKINDEX.tar.gz")).to_request(),
        )
        .await;
        std::fs::write(dir.join("APKINDEX.tar.gz"), &bytes)?;
        for (name, want) in pkgs {
            let file = if *name == "hello" {
                "hello-2.12-r1.apk"
            } else if *name == "bigpkg" {
                "bigpkg-3.0-r2.apk"
            } else {
                "tool-doc-1.0-r0.apk"
            };
            let body = atest::call_and_read_body(
                &app,
                TestRequest::get().uri(&format!("/repository/alpine/v3.20/main/{arch}/{file}")).to_request(),
            )
            .await;
            assert_eq!(&body[..], &want[..], "{arch}/{file} served byte for byte");
            std::fs::write(dir.join(file), &body)?;
        }
        let out = std::process::Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apk_verify.py"))
            .arg(dir.join("APKINDEX.tar.gz"))
            .arg(scratch.path().join("key.pem"))
            .arg(&key_name)
            .arg(&dir)
            .output()?;
        assert!(out.status.success(), "{arch}: {}", String::from_utf8_lossy(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
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
        let want: Vec<(String, String)> = pkgs.iter().map(|(n, _)| (n.to_string(), arch.to_string())).collect();
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

    // Package reads: HEAD, Range, 304.
    let path = "/repository/alpine/v3.20/main/x86_64/bigpkg-3.0-r2.apk";
    let r = call(TestRequest::default().method(actix_web::http::Method::HEAD).uri(path)).await?;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-length").and_then(|v| v.to_str().ok()),
        Some(big.bytes.len().to_string().as_str())
    );
    assert!(r.text.is_empty());
    let body = atest::call_and_read_body(
        &app,
        TestRequest::get().uri(path).insert_header(("Range", "bytes=0-65535")).to_request(),
    )
    .await;
    assert_eq!(&body[..], &big.bytes[..65536]);
    let etag = format!("\"{}\"", hex::encode(Sha256::digest(&big.bytes)));
    let r = call(TestRequest::get().uri(path).insert_header(("If-None-Match", etag.as_str()))).await?;
    assert_eq!(r.status, 304);
    let r = call(TestRequest::get().uri("/repository/alpine/v3.20/main/x86_64/nothere-1-r0.apk")).await?;
    assert_eq!(r.status, 404);
    // A unit nothing was uploaded to has an empty signed index (so `apk update` works before the
    // first upload): signed with the repository's key, no records; an unconfigured architecture
    // has none.
    let empty = "/repository/alpine/v3.20/community/x86_64/APKINDEX.tar.gz";
    let r = call(TestRequest::get().uri(empty)).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/gzip"));
    let bytes = atest::call_and_read_body(&app, TestRequest::get().uri(empty).to_request()).await;
    let dir = scratch.path().join("community");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("APKINDEX.tar.gz"), &bytes)?;
    let out = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apk_verify.py"))
        .arg(dir.join("APKINDEX.tar.gz"))
        .arg(scratch.path().join("key.pem"))
        .arg(&key_name)
        .arg(&dir)
        .output()?;
    assert!(out.status.success(), "empty index: {}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(summary["description"], "alpine v3.20/community/x86_64");
    assert_eq!(summary["packages"], serde_json::json!([]));
    let r = call(TestRequest::get().uri("/repository/alpine/v3.20/community/riscv64/APKINDEX.tar.gz")).await?;
    assert_eq!(r.status, 404);
    assert!(r.text.contains("architecture \"riscv64\" is not configured"), "{}", r.text);

    // Warmed index reads make no query.
    let index = "/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz";
    let before = t.metrics.db_queries();
    for _ in 0..3 {
        for path in [index, empty] {
            let r = call(TestRequest::get().uri(path)).await?;
            assert_eq!(r.status, 200, "{path}");
        }
    }
    assert_eq!(t.metrics.db_queries() - before, 0, "warmed index reads ran database queries");

    // Delete: gone from the package route and, once published, from the index.
    let r = call(
        TestRequest::delete()
            .uri("/repository/alpine/v3.20/main/x86_64/hello-2.12-r1.apk")
            .insert_header(common::admin()),
    )
    .await?;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = call(
        TestRequest::delete()
            .uri("/repository/alpine/v3.20/main/x86_64/hello-2.12-r1.apk")
            .insert_header(common::admin()),
    )
    .await?;
    assert_eq!(r.status, 404);
    packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services))
        .with_due(due)
        .run_until_idle()
        .await;
    services.published.invalidate();
    let bytes = atest::call_and_read_body(&app, TestRequest::get().uri(index).to_request()).await;
    let members = packyard_codecs::apk::index::split_members(&bytes)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&members[1][..]), &mut text)?;
    assert!(!text.contains("P:hello\n") && text.contains("P:bigpkg\n"), "{text}");

    // Rotation to an imported key (PKCS#1, as `openssl genrsa -traditional` and abuild-keygen
    // write it): the indexes are re-signed with it, and the old public key stays listed.
    let pem = std::process::Command::new("openssl").args(["genrsa", "-traditional", "2048"]).output()?;
    assert!(pem.status.success());
    let pem = String::from_utf8(pem.stdout)?;
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "{pem}");
    let signing_key = |body: serde_json::Value| {
        TestRequest::put().uri("/api/v1/repositories/alpine/signing-key").insert_header(common::admin()).set_json(body)
    };
    let r = call(signing_key(serde_json::json!({"private_key": "-----BEGIN RSA PRIVATE KEY-----\nnope\n"}))).await?;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("not a usable APK index key"), "{}", r.text);
    let r = call(signing_key(serde_json::json!({"private_key": pem}))).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    let new_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    assert_ne!(new_name, key_name);
    assert_eq!(r.json["previous_key_name"], key_name.as_str());
    packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services))
        .with_due(due)
        .run_until_idle()
        .await;
    services.published.invalidate();
    let r = call(TestRequest::get().uri("/repository/alpine/keys/")).await?;
    assert_eq!(r.text, format!("{new_name}\n{key_name}\n"));
    let r = call(TestRequest::get().uri(&format!("/repository/alpine/keys/{new_name}"))).await?;
    let new_public = r.text;
    let bytes = atest::call_and_read_body(&app, TestRequest::get().uri(index).to_request()).await;
    let sig_member = packyard_codecs::apk::index::split_members(&bytes)?.remove(0);
    let mut sig_tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&sig_member[..]), &mut sig_tar)?;
    assert!(String::from_utf8_lossy(&sig_tar[..100]).starts_with(&format!(".SIGN.RSA.{new_name}")));
    let keys = packyard_codecs::apk::signing::parse_public_keys(&new_public)?;
    packyard_codecs::apk::index::verify_index(&bytes, &keys)?;
    Ok(())
}
on_every_backend!(hosted_apk);

mod over_http {
    use std::path::Path;
    use std::time::Duration;

    use super::common::process::{basic, start, status_of, Server};
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
    fn create(server: &Server, spec: serde_json::Value) -> anyhow::Result<()> {
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
        create(
            &upstream,
            serde_json::json!({"name": "alpine", "format": "apk", "type": "hosted", "anonymous_read": true}),
        )?;
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
            serde_json::json!({"name": "mirror", "format": "apk", "type": "proxy", "anonymous_read": true,
                "apk": {"architectures": ["x86_64"], "signed_by": up_key.1},
                "proxy": {"remote_url": format!("{}/repository/alpine/", upstream.public), "metadata_ttl_secs": 1, "negative_ttl_secs": 60}}),
        )?;
        create(
            &server,
            serde_json::json!({"name": "local", "format": "apk", "type": "hosted", "anonymous_read": true}),
        )?;
        // The local hello differs from the upstream's: the group lists the first member's.
        let local_hello =
            build_apk(&Fixture { payload: b"local build".to_vec(), ..Fixture::new("hello", "2.12-r1", "x86_64") })?;
        let mine = build_apk(&Fixture::new("mytool", "0.3-r0", "x86_64"))?;
        upload(&server, "local", &format!("{unit}/hello-2.12-r1.apk"), &local_hello.bytes)?;
        upload(&server, "local", &format!("{unit}/mytool-0.3-r0.apk"), &mine.bytes)?;
        create(
            &server,
            serde_json::json!({"name": "all", "format": "apk", "type": "group", "anonymous_read": true,
                "apk": {"architectures": ["x86_64"]}, "group": {"members": ["local", "mirror"]}}),
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
        let (s, _, body) = get(&server, "/repository/mirror/v3.20/main/riscv64/APKINDEX.tar.gz")?;
        assert_eq!(s, 404);
        assert!(String::from_utf8_lossy(&body).contains("architecture \"riscv64\" is not served"));
        let (s, _, _) = get(&server, &format!("/repository/mirror/{unit}/nothere-1-r0.apk"))?;
        assert_eq!(s, 404);
        let (s, _, body) = get(&server, "/repository/mirror/keys/")?;
        assert_eq!(s, 404);
        assert!(String::from_utf8_lossy(&body).contains("serves its upstream's signatures unchanged"));

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
        Ok(())
    }
}
