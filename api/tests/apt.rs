//! APT hosted end to end: real Debian packages uploaded to the built binary, the published
//! index checked byte for byte, and the real `apt-get` (isolated from the system's own
//! configuration) updating from it and downloading them.

#[macro_use]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process::{basic, start, status_of, Server};
use sha2::{Digest, Sha256};

const PW: &str = "apt-admin";

fn real_debs() -> Option<Vec<std::path::PathBuf>> {
    let dir = std::env::var("TEST_DEBS_DIR").ok()?;
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    v.sort();
    Some(v)
}

fn upload(server: &Server, repo: &str, bytes: &[u8], query: &str) -> anyhow::Result<(u16, String)> {
    status_of(
        ureq::post(&format!("{}/repository/{repo}/{query}", server.public))
            .set("Authorization", &basic(PW))
            .set("Content-Type", "application/vnd.debian.binary-package")
            .send_bytes(bytes),
    )
}

/// A `multipart/form-data` POST with the given (name, bytes) fields.
fn multipart(server: &Server, repo: &str, fields: &[(&str, &[u8])], query: &str) -> anyhow::Result<(u16, String)> {
    let boundary = "packyard-test-boundary-7d1c";
    let mut body = Vec::new();
    for (name, bytes) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"x.deb\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    status_of(
        ureq::post(&format!("{}/repository/{repo}/{query}", server.public))
            .set("Authorization", &basic(PW))
            .set("Content-Type", &format!("multipart/form-data; boundary={boundary}"))
            .send_bytes(&body),
    )
}

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    match ureq::get(&format!("{}{path}", server.public)).call() {
        Ok(r) => {
            let status = r.status();
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
            Ok((status, body))
        }
        Err(ureq::Error::Status(code, r)) => Ok((code, r.into_string()?.into_bytes())),
        Err(e) => Err(e.into()),
    }
}

fn apt_get(root: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    let out = Command::new("apt-get")
        .current_dir(root.join("downloads"))
        .arg("-o")
        .arg(opt("Dir::Etc::SourceList", &root.join("sources.list")))
        .arg("-o")
        .arg("Dir::Etc::SourceParts=/dev/null")
        .arg("-o")
        .arg(opt("Dir::State", &root.join("state")))
        .arg("-o")
        .arg(opt("Dir::State::status", &root.join("state/status")))
        .arg("-o")
        .arg(opt("Dir::Cache", &root.join("cache")))
        .arg("-o")
        .arg("Debug::NoLocking=1")
        .arg("-o")
        .arg("APT::Sandbox::User=root")
        .arg("-o")
        .arg("Acquire::Retries=0")
        .args(args)
        .output()?;
    Ok(out)
}

#[test]
fn hosted_apt_with_the_real_client() -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    anyhow::ensure!(Command::new("apt-get").arg("--version").output().is_ok(), "apt-get is not installed");
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    server.wait_ready()?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(serde_json::json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "stable", "components": ["main", "extra"], "architectures": ["amd64", "arm64", "all"]}
        })),
    )?;
    assert_eq!(s, 201, "{body}");

    // Bad input: each a 4xx with a message, and nothing stored.
    let blobs_before = count_files(&dir.path().join("data/blobs/sha256"));
    for (bytes, query, status, needle) in [
        (b"this is not a package".to_vec(), "", 400, "not a valid .deb: not a Debian package"),
        (std::fs::read(&debs[0])?[..300].to_vec(), "", 400, "truncated"),
        (std::fs::read(&debs[0])?, "?component=nope", 400, "component \"nope\" is not configured"),
        (Vec::new(), "", 400, "the upload is empty"),
    ] {
        let (s, body) = upload(&server, "debs", &bytes, query)?;
        assert_eq!(s, status, "{body}");
        assert!(body.contains(needle), "{body:?} lacks {needle:?}");
    }
    let deb0 = std::fs::read(&debs[0])?;
    for (fields, needle) in [
        (vec![("file", &deb0[..])], "the multipart upload has no field named \"apt.asset\""),
        (vec![("apt.asset", &deb0[..200])], "truncated"),
    ] {
        let (s, body) = multipart(&server, "debs", &fields, "")?;
        assert_eq!(s, 400, "{body}");
        assert!(body.contains(needle), "{body:?} lacks {needle:?}");
    }
    assert_eq!(count_files(&dir.path().join("data/blobs/sha256")), blobs_before, "a refused upload leaves no blob");

    // Upload the real packages; the last one waits for its snapshot.
    let mut expected = Vec::new();
    for (i, deb) in debs.iter().enumerate() {
        let bytes = std::fs::read(deb)?;
        let query = if i + 1 == debs.len() { "?wait=true" } else { "" };
        let (s, body) = upload(&server, "debs", &bytes, query)?;
        assert_eq!(s, 201, "{}: {body}", deb.display());
        let v: serde_json::Value = serde_json::from_str(&body)?;
        assert!(v["filename"].as_str().unwrap_or_default().starts_with("pool/main/"), "{body}");
        expected.push((
            v["package"].as_str().unwrap_or_default().to_string(),
            v["filename"].as_str().unwrap_or_default().to_string(),
            bytes,
        ));
    }
    // Generated packages with every control.tar compression (Architecture: all, so they appear
    // in the amd64 index too).
    for kind in ["", ".gz", ".xz", ".zst"] {
        let name = format!("packyard-gen{}", kind.trim_start_matches('.'));
        let control = format!("Package: {name}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: T <t@example.org>\nDescription: generated ({kind:?} control)\n");
        let bytes = packyard_shared::formats::apt::testing::deb(&control, kind);
        // One of them as a multipart form (Nexus's `apt.asset` field, after another field).
        let (s, body) = if kind == ".zst" {
            multipart(&server, "debs", &[("note", b"ignored"), ("apt.asset", &bytes)], "?wait=true")?
        } else {
            upload(&server, "debs", &bytes, "?wait=true")?
        };
        assert_eq!(s, 201, "{kind:?}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        expected.push((name, v["filename"].as_str().unwrap_or_default().to_string(), bytes));
    }
    // An identical retry is fine; different bytes under the same name/version/arch are not.
    let (s, _) = upload(&server, "debs", &expected[0].2, "")?;
    assert_eq!(s, 200);

    // The published index: Release lists every index file with its real size and hashes.
    let (s, release) = get(&server, "/repository/debs/dists/stable/Release")?;
    assert_eq!(s, 200);
    let release = String::from_utf8(release)?;
    assert!(release.contains("Suite: stable\nCodename: stable\n"), "{release}");
    assert!(release.contains("Architectures: amd64 arm64\n"), "{release}");
    assert!(release.contains("Components: main extra\n"), "{release}");
    assert!(release.contains("Acquire-By-Hash: yes\n"), "{release}");
    let (s, packages) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
    assert_eq!(s, 200);
    let digest = hex::encode(Sha256::digest(&packages));
    assert!(release.contains(&format!(" {digest} {:>16} main/binary-amd64/Packages\n", packages.len())), "{release}");
    let (s, by_hash) =
        get(&server, &format!("/repository/debs/dists/stable/main/binary-amd64/by-hash/SHA256/{digest}"))?;
    assert_eq!((s, by_hash == packages), (200, true));
    let text = String::from_utf8(packages)?;
    for (name, filename, bytes) in &expected {
        assert!(text.contains(&format!("Package: {name}\n")), "{name} missing from Packages");
        assert!(text.contains(&format!("Filename: {filename}\nSize: {}\n", bytes.len())), "{filename}");
        assert!(text.contains(&format!("SHA256: {}\n", hex::encode(Sha256::digest(bytes)))));
        let (s, served) = get(&server, &format!("/repository/debs/{filename}"))?;
        assert_eq!((s, served.len()), (200, bytes.len()));
        assert!(served == *bytes, "{filename} is served byte for byte");
    }
    let (s, _) = get(&server, "/repository/debs/dists/stable/extra/binary-amd64/Packages.gz")?;
    assert_eq!(s, 200, "an empty component still has its index");
    // Packages.xz decompresses to Packages.
    let (s, xz) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages.xz")?;
    assert_eq!(s, 200);
    let mut unpacked = Vec::new();
    std::io::Read::read_to_end(&mut liblzma::read::XzDecoder::new(&xz[..]), &mut unpacked)?;
    assert!(unpacked == text.as_bytes(), "Packages.xz holds Packages");
    assert!(
        release.contains(&format!(
            " {} {:>16} main/binary-amd64/Packages.xz\n",
            hex::encode(Sha256::digest(&xz)),
            xz.len()
        )),
        "{release}"
    );

    // Signed: gpgv verifies InRelease and Release.gpg with the served key, independently of apt.
    let root = tempfile::tempdir()?;
    let (s, key) = get(&server, "/repository/debs/gpg.key")?;
    assert_eq!(s, 200);
    assert!(key.starts_with(b"-----BEGIN PGP PUBLIC KEY BLOCK-----"));
    std::fs::write(root.path().join("key.asc"), &key)?;
    let dearmor = Command::new("gpg")
        .args(["--batch", "--yes", "--dearmor", "-o"])
        .arg(root.path().join("key.gpg"))
        .arg(root.path().join("key.asc"))
        .output()?;
    assert!(dearmor.status.success(), "{}", String::from_utf8_lossy(&dearmor.stderr));
    let (s, inrelease) = get(&server, "/repository/debs/dists/stable/InRelease")?;
    assert_eq!(s, 200);
    let (s, detached) = get(&server, "/repository/debs/dists/stable/Release.gpg")?;
    assert_eq!(s, 200);
    std::fs::write(root.path().join("InRelease"), &inrelease)?;
    std::fs::write(root.path().join("Release"), release.as_bytes())?;
    std::fs::write(root.path().join("Release.gpg"), &detached)?;
    for args in [vec!["InRelease"], vec!["Release.gpg", "Release"]] {
        let out = Command::new("gpgv")
            .current_dir(root.path())
            .arg("--keyring")
            .arg(root.path().join("key.gpg"))
            .args(&args)
            .output()?;
        assert!(out.status.success(), "gpgv {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let inrelease = String::from_utf8(inrelease)?;
    assert!(inrelease.starts_with("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA"), "{inrelease}");
    assert!(inrelease.contains(&release), "InRelease signs the same text as Release");

    // The real apt client, trusting only that key: update, then download each package, which
    // must match the upload.
    for d in ["state/lists/partial", "cache/archives/partial", "downloads"] {
        std::fs::create_dir_all(root.path().join(d))?;
    }
    std::fs::write(root.path().join("state/status"), "")?;
    std::fs::write(
        root.path().join("sources.list"),
        format!(
            "deb [signed-by={} arch=amd64] {}/repository/debs stable main\n",
            root.path().join("key.asc").display(),
            server.public
        ),
    )?;
    let out = apt_get(root.path(), &["update"])?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "apt-get update failed:\n{log}");
    assert!(!log.contains("Err:") && !log.contains("W: "), "{log}");
    for (name, _, _) in &expected {
        let out = apt_get(root.path(), &["download", name])?;
        assert!(out.status.success(), "apt-get download {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for (_, filename, bytes) in &expected {
        let base = Path::new(filename).file_name().map(|f| f.to_string_lossy().replace("%3a", ":")).unwrap_or_default();
        let got = std::fs::read(root.path().join("downloads").join(&base))?;
        assert!(got == *bytes, "apt-get downloaded {base} with other bytes");
    }
    let out = apt_get(root.path(), &["update"])?;
    let log = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(log.contains("Hit:"), "a second update finds nothing new:\n{log}");

    // Rotation: a new key signs the next snapshot; gpg.key offers both, so clients move over.
    let admin_json = |method: &str, body: Option<serde_json::Value>| -> anyhow::Result<(u16, serde_json::Value)> {
        let req = ureq::request(method, &format!("{}/api/v1/repositories/debs/signing-key", server.public))
            .set("Authorization", &basic(PW));
        let (s, text) = match body {
            Some(b) => status_of(req.send_json(b))?,
            None => status_of(req.call())?,
        };
        Ok((s, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))))
    };
    let (s, before) = admin_json("GET", None)?;
    assert_eq!(s, 200, "{before}");
    let old_fingerprint = before["fingerprint"].as_str().unwrap_or_default().to_string();
    assert!(before["public_key"].as_str().unwrap_or_default().starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----"));
    assert!(before.get("private_key").is_none() && !before.to_string().contains("PRIVATE KEY"));
    let old_inrelease = get(&server, "/repository/debs/dists/stable/InRelease")?.1;
    assert_eq!(before["algorithm"], "ed25519", "{before}");
    // The rotation moves to RSA-3072 (apt's stricter future default accepts both).
    let (s, after) = admin_json("PUT", Some(serde_json::json!({"generate": true, "algorithm": "rsa3072"})))?;
    assert_eq!(s, 200, "{after}");
    assert_eq!(after["algorithm"], "rsa3072", "{after}");
    assert_ne!(after["fingerprint"], before["fingerprint"]);
    assert_eq!(after["previous_fingerprint"].as_str(), Some(old_fingerprint.as_str()));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let new_inrelease = loop {
        let (_, body) = get(&server, "/repository/debs/dists/stable/InRelease")?;
        if body != old_inrelease {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "not re-signed after the rotation");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::fs::write(root.path().join("InRelease"), &new_inrelease)?;
    let gpgv = |keyring: &str| -> anyhow::Result<bool> {
        Ok(Command::new("gpgv")
            .current_dir(root.path())
            .arg("--keyring")
            .arg(root.path().join(keyring))
            .arg("InRelease")
            .output()?
            .status
            .success())
    };
    assert!(!gpgv("key.gpg")?, "the old key alone must not verify the re-signed InRelease");
    let (_, keyring) = get(&server, "/repository/debs/gpg.key")?;
    std::fs::write(root.path().join("key.asc"), &keyring)?;
    let dearmor = Command::new("gpg")
        .args(["--batch", "--yes", "--dearmor", "-o"])
        .arg(root.path().join("both.gpg"))
        .arg(root.path().join("key.asc"))
        .output()?;
    assert!(dearmor.status.success());
    assert!(gpgv("both.gpg")?, "gpg.key (current and previous) verifies the re-signed InRelease");
    let out = apt_get(root.path(), &["update"])?;
    assert!(out.status.success(), "apt-get update after the rotation: {}", String::from_utf8_lossy(&out.stderr));
    // Import: an armored secret key; garbage is refused.
    let imported = packyard_shared::formats::apt::signing::Signer::generate("imported <imported@example.org>")?;
    let (s, body) = admin_json("PUT", Some(serde_json::json!({"private_key": imported.to_armored_secret()?})))?;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["fingerprint"].as_str(), Some(imported.fingerprint().as_str()));
    let (s, body) =
        admin_json("PUT", Some(serde_json::json!({"private_key": "-----BEGIN PGP PRIVATE KEY BLOCK-----\nnope\n"})))?;
    assert_eq!(s, 400, "{body}");
    let (s, _) = admin_json("PUT", Some(serde_json::json!({})))?;
    assert_eq!(s, 400);
    let (s, body) = admin_json("PUT", Some(serde_json::json!({"generate": true, "algorithm": "dsa1024"})))?;
    assert_eq!(s, 400, "{body}");
    assert!(body.to_string().contains("unknown variant `dsa1024`"), "{body}");

    // Delete one package: the next snapshot no longer lists it.
    let (name, filename, _) = &expected[0];
    let (s, body) = status_of(
        ureq::delete(&format!("{}/repository/debs/{filename}", server.public)).set("Authorization", &basic(PW)).call(),
    )?;
    assert_eq!(s, 204, "{body}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, packages) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        if !String::from_utf8_lossy(&packages).contains(&format!("Package: {name}\n")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{name} still listed after its delete");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(&server, &format!("/repository/debs/{filename}"))?.0, 404);
    assert!(server.terminate()?.success());
    Ok(())
}

fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    n += 1;
                }
            }
        }
    }
    n
}

/// Warmed reads of InRelease and Packages.gz make no database query (in-process, no background
/// tasks), and a conflicting upload is refused on every backend.
async fn warmed_index_reads(backend: packyard_shared::db::Backend) -> anyhow::Result<()> {
    use actix_web::test::{self as atest, TestRequest};
    let Some(debs) = real_debs() else { return Ok(()) };
    let Some(t) = packyard_shared::testing::TestDb::fresh(backend).await? else { return Ok(()) };
    let services = common::services_with(&t, |c| c.server.max_upload_bytes = 256 * 1024).await?;
    let app = atest::init_service(packyard_api::app::public_app(services.clone())).await;
    let r = common::call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(common::admin())
            .set_json(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"})),
    )
    .await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let bytes = std::fs::read(&debs[0])?;
    let r = common::call(
        &app,
        TestRequest::post().uri("/repository/debs/").insert_header(common::admin()).set_payload(bytes.clone()),
    )
    .await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // A v2 .apk (gzip members) posted by mistake, and an upload over server.max_upload_bytes.
    let apk = packyard_shared::formats::apt::testing::compress(".gz", b"signature, control, data");
    let r = common::call(
        &app,
        TestRequest::post().uri("/repository/debs/").insert_header(common::admin()).set_payload(apk),
    )
    .await?;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text,
        "not a valid .deb: not a Debian package: the file does not start with an ar archive header (!<arch>)\n"
    );
    let big = vec![b'!'; usize::try_from(services.config.server.max_upload_bytes)? + 1];
    let r = common::call(
        &app,
        TestRequest::post().uri("/repository/debs/").insert_header(common::admin()).set_payload(big),
    )
    .await?;
    assert_eq!(r.status, 413, "{}", r.text);
    assert!(r.text.contains("upload exceeds the limit of"), "{}", r.text);
    let leftovers = std::fs::read_dir(t.dir.path().join("blobs/tmp"))?.count();
    assert_eq!(leftovers, 0, "no temporary left behind");
    // Same coordinate, other bytes: refused, and the stored package is unchanged.
    let mut other = bytes.clone();
    other.extend_from_slice(b"trailing bytes");
    let r = common::call(
        &app,
        TestRequest::post().uri("/repository/debs/").insert_header(common::admin()).set_payload(other),
    )
    .await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("already in repository debs with different content"), "{}", r.text);

    let due = packyard_shared::db::publication::Due { debounce_ms: 0, max_delay_ms: 0 };
    let published = packyard_worker::publisher::Publisher::new(services.clone(), packyard_worker::builders(&services))
        .with_due(due)
        .run_until_idle()
        .await;
    assert_eq!(published.len(), 1, "{published:?}");
    let paths =
        ["/repository/debs/dists/stable/InRelease", "/repository/debs/dists/stable/main/binary-amd64/Packages.gz"];
    for p in paths {
        let r = common::call(&app, TestRequest::get().uri(p)).await?;
        assert_eq!(r.status, 200, "{p}");
    }
    let before = t.metrics.db_queries();
    for _ in 0..3 {
        for p in paths {
            let r = common::call(&app, TestRequest::get().uri(p).insert_header(common::admin())).await?;
            assert_eq!(r.status, 200, "{p}");
            let r = common::call(&app, TestRequest::get().uri(p)).await?;
            assert_eq!(r.status, 200, "{p}");
        }
    }
    assert_eq!(t.metrics.db_queries() - before, 0, "warmed index reads ran database queries");
    Ok(())
}
on_every_backend!(warmed_index_reads);

/// Publication while a client reads: `apt-get update` in a loop during a stream of uploads never
/// sees a hash-sum mismatch (by-hash names and retained snapshots keep every promised index
/// fetchable).
#[test]
fn apt_get_update_during_uploads() -> anyhow::Result<()> {
    if real_debs().is_none() {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    // A short debounce so that snapshots change often while apt reads.
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__DEBOUNCE_MS", "10")])?;
    server.wait_ready()?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"})),
    )?;
    assert_eq!(s, 201, "{body}");
    let first = packyard_shared::formats::apt::testing::deb(
        "Package: seed\nVersion: 1\nArchitecture: all\nDescription: seed\n",
        ".gz",
    );
    assert_eq!(upload(&server, "debs", &first, "?wait=true")?.0, 201);
    let (_, key) = get(&server, "/repository/debs/gpg.key")?;
    let root = tempfile::tempdir()?;
    for d in ["state/lists/partial", "cache/archives/partial", "downloads"] {
        std::fs::create_dir_all(root.path().join(d))?;
    }
    std::fs::write(root.path().join("state/status"), "")?;
    std::fs::write(root.path().join("key.asc"), &key)?;
    std::fs::write(
        root.path().join("sources.list"),
        format!(
            "deb [signed-by={} arch=amd64] {}/repository/debs stable main\n",
            root.path().join("key.asc").display(),
            server.public
        ),
    )?;
    let url = server.public.clone();
    let uploader = std::thread::spawn(move || -> anyhow::Result<usize> {
        for i in 0..60 {
            let control = format!(
                "Package: stream{i}\nVersion: 1.{i}\nArchitecture: all\nDescription: upload {i} of the stream\n"
            );
            let bytes = packyard_shared::formats::apt::testing::deb(&control, ".xz");
            let (s, body) = status_of(
                ureq::post(&format!("{url}/repository/debs/")).set("Authorization", &basic(PW)).send_bytes(&bytes),
            )?;
            anyhow::ensure!(s == 201, "{body}");
            std::thread::sleep(Duration::from_millis(15));
        }
        Ok(60)
    });
    let mut updates = 0;
    while !uploader.is_finished() || updates < 3 {
        let out = apt_get(root.path(), &["update"])?;
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success() && !log.contains("Hash Sum mismatch") && !log.contains("Err:"),
            "update {updates} during uploads:\n{log}"
        );
        updates += 1;
    }
    assert_eq!(uploader.join().map_err(|_| anyhow::anyhow!("uploader panicked"))??, 60);
    // And every upload reaches the index.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, packages) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        if String::from_utf8_lossy(&packages).matches("Package: ").count() == 61 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not every upload was published");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, status) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/debs/status", server.public))
            .set("Authorization", &basic(PW))
            .call(),
    )?;
    eprintln!("{updates} apt-get updates during 60 uploads, none saw a mismatch; status {status}");
    assert!(server.terminate()?.success());
    Ok(())
}
