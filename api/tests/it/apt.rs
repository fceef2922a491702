//! APT hosted end to end: real Debian packages uploaded to the built binary, the published
//! index checked byte for byte, and the real `apt-get` (isolated from the system's own
//! configuration) updating from it and downloading them.

use crate::common;
use crate::common::process::server_on;

use common::Repo;
use packyard_model::repos::Format;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process::{basic, nexus, nexus_component, nexus_delete, start, status_of, Server};
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
    common::process::get_bytes(server, path)
}

fn apt_get(root: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    common::apt::tool("apt-get", root, args)
}

fn apt_tool(program: &str, root: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    common::apt::tool(program, root, args)
}

#[test]
fn hosted_apt_with_the_real_client() -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    anyhow::ensure!(Command::new("apt-get").arg("--version").output().is_ok(), "apt-get is not installed");
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_CACHE__DOWNLOAD_STATS_FLUSH_MS", "100")],
    )?;
    server.wait_ready()?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(serde_json::json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "stable", "components": ["main", "extra"], "architectures": ["amd64", "arm64", "all"]}
        })),
    )?;
    assert_eq!(s, 201, "{body}");

    // The empty repository's first (signed, empty) snapshot is published by the worker on its
    // own: wait for it, so that its files are not counted as left over by a refused upload.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while get(&server, "/repository/debs/dists/stable/InRelease")?.0 != 200 {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the empty repository was not published");
        std::thread::sleep(Duration::from_millis(20));
    }

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
    // Every real package cut after its control member (Debian's 13,172-byte sl cut at 3,000
    // bytes among them) is refused: the whole archive is read before it is acknowledged.
    for deb in &debs {
        let bytes = std::fs::read(deb)?;
        for cut in [3000.min(bytes.len() - 1), bytes.len() * 3 / 4, bytes.len() - 1] {
            let (s, body) = upload(&server, "debs", &bytes[..cut], "")?;
            assert_eq!(s, 400, "{} cut at {cut}: {body}", deb.display());
            assert!(body.contains("truncated package"), "{} cut at {cut}: {body}", deb.display());
        }
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
    assert_eq!(
        count_files(&dir.path().join("data/blobs/sha256")),
        blobs_before,
        "a refused upload leaves no blob; {}",
        server.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    );

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
        let bytes = packyard_codecs::apt::testing::deb(&control, kind);
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
    // A package dpkg can install (a real data member), for the install into a scratch root.
    let installable = packyard_codecs::apt::testing::installable_deb(
        "Package: packyard-installable\nVersion: 1.0\nArchitecture: all\nMaintainer: T <t@example.org>\nDescription: installs one file\n",
        &[("./usr/share/packyard-installable/greeting.txt", b"installed by apt-get\n")],
    );
    let (s, body) = upload(&server, "debs", &installable, "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body)?;
    expected.push(("packyard-installable".into(), v["filename"].as_str().unwrap_or_default().to_string(), installable));
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

    // (Dates settle two seconds after the last publication: see `dates_settle`.)
    dates_settle();
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
    // apt-get install into a scratch root: dpkg unpacks there, with its own status database.
    let target = root.path().join("target");
    std::fs::create_dir_all(target.join("var/lib/dpkg/info"))?;
    std::fs::create_dir_all(target.join("var/lib/dpkg/updates"))?;
    std::fs::write(target.join("var/lib/dpkg/status"), "")?;
    let opt = |k: &str, v: String| ["-o".to_string(), format!("{k}={v}")];
    let mut args: Vec<String> = vec!["install".into(), "-y".into(), "--no-install-recommends".into()];
    args.extend(opt("Dir::State::status", target.join("var/lib/dpkg/status").display().to_string()));
    for o in [
        format!("--root={}", target.display()),
        format!("--admindir={}", target.join("var/lib/dpkg").display()),
        "--force-script-chrootless".into(),
        "--force-not-root".into(),
        format!("--log={}", root.path().join("dpkg.log").display()),
    ] {
        args.extend(opt("DPkg::Options::", o));
    }
    args.push("packyard-installable".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = apt_get(root.path(), &refs)?;
    assert!(
        out.status.success(),
        "apt-get install into a scratch root:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(target.join("usr/share/packyard-installable/greeting.txt"))?,
        b"installed by apt-get\n",
        "the installed file"
    );
    let status = std::fs::read_to_string(target.join("var/lib/dpkg/status"))?;
    assert!(status.contains("Package: packyard-installable\nStatus: install ok installed\n"), "{status}");

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
    let imported = packyard_codecs::apt::signing::Signer::generate("imported <imported@example.org>")?;
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
    assert!(
        body.to_string().contains(
            "algorithm \\\"dsa1024\\\" is not available for APT signing keys: use ed25519, rsa3072 or rsa4096"
        ),
        "{body}"
    );

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

    // Nexus's REST API: what apt-get downloaded is counted; a package deleted through it is gone
    // for apt-get.
    let (public, auth) = (server.public.as_str(), basic(PW));
    let (name, filename, bytes) = &expected[1];
    let query = format!("repository=debs&name={}", name.replace('+', "%2B"));
    let component = nexus_component(public, &auth, &query)?;
    let deb = &component["assets"][0];
    assert_eq!(deb["path"].as_str(), Some(filename.as_str()), "{component}");
    assert_eq!(deb["fileSize"].as_u64(), Some(bytes.len() as u64));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while nexus_component(public, &auth, &query)?["assets"][0]["downloadCount"].as_i64().unwrap_or(0) < 1 {
        assert!(std::time::Instant::now() < deadline, "apt-get's download of {name} was not counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(nexus_delete(public, &auth, component["id"].as_str().unwrap_or_default())?, 204);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, packages) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        if !String::from_utf8_lossy(&packages).contains(&format!("Package: {name}\n")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{name} still listed after its delete through Nexus's API");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = apt_get(root.path(), &["update"])?;
    assert!(out.status.success(), "apt-get update: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(root.path().join("downloads"))?;
    std::fs::create_dir_all(root.path().join("downloads"))?;
    let out = apt_get(root.path(), &["download", name])?;
    assert!(!out.status.success(), "apt-get still downloads {name} after its delete");
    assert!(nexus(public, &auth, "search?repository=debs&name=nothing-else")?["items"] == serde_json::json!([]));
    assert!(server.terminate()?.success());
    Ok(())
}

pub(crate) fn count_files(dir: &Path) -> usize {
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
async fn warmed_index_reads(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use actix_web::test::{self as atest, TestRequest};
    let Some(debs) = real_debs() else { return Ok(()) };
    let Some(t) = packyard_store::testing::TestDb::fresh(backend).await? else { return Ok(()) };
    let services = common::services_with(&t, |c| c.server.max_upload_bytes = 256 * 1024).await?;
    let app = atest::init_service(packyard_api::app::public_app(services.clone())).await;
    let r = common::call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(common::admin())
            .set_json(Repo::hosted("debs", Format::Apt)),
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
    let apk = packyard_codecs::apt::testing::compress(".gz", b"signature, control, data");
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

    let due = packyard_store::db::publication::Due { debounce_ms: 0, max_delay_ms: 0 };
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
            .send_json(Repo::hosted("debs", Format::Apt)),
    )?;
    assert_eq!(s, 201, "{body}");
    let first =
        packyard_codecs::apt::testing::deb("Package: seed\nVersion: 1\nArchitecture: all\nDescription: seed\n", ".gz");
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
            let bytes = packyard_codecs::apt::testing::deb(&control, ".xz");
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
    let uploaded = uploader.join().map_err(|_| anyhow::anyhow!("uploader panicked"))?;
    let uploaded = uploaded.map_err(|e| {
        anyhow::anyhow!("{e}; server log:\n{}", server.stderr.lock().map(|s| s.clone()).unwrap_or_default())
    })?;
    assert_eq!(uploaded, 60);
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

/// GET with the response headers this test looks at.
fn get_with(url: &str) -> anyhow::Result<(u16, std::collections::HashMap<String, String>, Vec<u8>)> {
    let (status, r) = match ureq::get(url).call() {
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

/// The value of one sample of the management listener's metrics (0 when absent).
fn metric(server: &Server, sample: &str) -> anyhow::Result<f64> {
    let text = ureq::get(&format!("{}/metrics", server.management)).call()?.into_string()?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.trim().parse::<f64>().ok()))
        .unwrap_or(0.0))
}

fn create_repo(server: &Server, body: impl Into<serde_json::Value>) -> anyhow::Result<()> {
    common::process::create_repository(&server.public, &basic(PW), body)
}

/// Waits until `path` answers 200 with a body containing every needle.
fn wait_for(server: &Server, path: &str, needles: &[&str]) -> anyhow::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (s, body) = get(server, path)?;
        let text = String::from_utf8_lossy(&body);
        if s == 200 && needles.iter().all(|n| text.contains(n)) {
            return Ok(body);
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "{path} never held {needles:?}: {s} {text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scratch apt configuration trusting `key` for `deb <url> stable main`.
pub(crate) fn apt_root(key: &[u8], url: &str) -> anyhow::Result<tempfile::TempDir> {
    common::apt::scratch(key, |k| format!("deb [signed-by={} arch=amd64] {url} stable main", k.display()))
}

/// Waits until the dates of the snapshots just published settle. A burst of publications dates a
/// unit's snapshots ahead of the clock, and those dates are not sent until the clock gets there
/// (#44); for the two seconds after the last publication (its second, the watermark's staleness,
/// one more) the date sent cannot yet tell the snapshot from its predecessor, so a conditional
/// request is answered with the file. A test that expects apt's second update to be a `Hit`
/// lets the first one come after that.
pub(crate) fn dates_settle() {
    std::thread::sleep(Duration::from_millis(2_100));
}

pub(crate) fn update_ok(root: &Path) -> anyhow::Result<String> {
    let out = apt_get(root, &["update"])?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.success() && !log.contains("Err:") && !log.contains("W: "), "apt-get update:\n{log}");
    Ok(log)
}

pub(crate) fn download(root: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let out = apt_get(root, &["download", name])?;
    anyhow::ensure!(out.status.success(), "apt-get download {name}: {}", String::from_utf8_lossy(&out.stderr));
    let file = std::fs::read_dir(root.join("downloads"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with(&format!("{name}_"))))
        .ok_or_else(|| anyhow::anyhow!("apt-get download {name} left no file"))?;
    let bytes = std::fs::read(&file)?;
    std::fs::remove_file(file)?;
    Ok(bytes)
}

/// Item 2 of #38 for proxy members: a group serving `bookworm` over a hosted member (of another
/// distribution, `stable`) and a proxy of a signed upstream `bookworm` with 8,000 packages
/// (several chunks). An upload to the hosted member merges the group again without asking the
/// upstream for its index and stores a small part of what the whole merge stored; the upstream
/// moving on (one package more) is merged again from the proxy's new index with the proxy
/// member's unchanged chunks taken again. The merged index lists exactly the members' packages
/// each time. (A proxy member without `apt.signed_by` is refused when the group is made, with a
/// message naming the setting — the group re-signs what it merges —: the "unverified" group of
/// `proxy_and_group_with_the_real_client` tests that.)
#[test]
fn a_group_over_a_proxy_merges_again_in_proportion_to_the_change() -> anyhow::Result<()> {
    use common::archive::{archive_files, Dist, Package, Upstream};
    let signer = packyard_codecs::apt::signing::Signer::generate("Fake upstream <fake@example.org>")?;
    // ~900 bytes a stanza: about 7 MB of `Packages`, several chunks.
    let padding = format!("X-Padding: {}\n", "p".repeat(600));
    let mut packages: Vec<Package> =
        (0..8_000).map(|i| Package::new(&format!("up{i:05}"), "1.0", "amd64").listing(&padding)).collect();
    fn dist(packages: &[Package]) -> Dist<'_> {
        Dist {
            name: "bookworm",
            indexes: vec![("amd64", packages.iter().collect())],
            by_hash: true,
            forms: &["", ".xz"],
            valid_until: None,
        }
    }
    let upstream = Upstream::start()?;
    let first_files = archive_files(&dist(&packages), &signer, None)?;
    upstream.publish(first_files.clone());

    let (server, _dir) = common::process::start_in_scratch(&[
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
    ])?;
    create_repo(
        &server,
        Repo::proxy("px", Format::Apt, &upstream.url).with(serde_json::json!({
            "apt": {"distributions": ["bookworm"], "signed_by": signer.public_armored()?},
            "proxy": {"metadata_ttl_secs": 1}})),
    )?;
    create_repo(&server, Repo::hosted("local", Format::Apt))?;
    let local = |name: &str| {
        packyard_codecs::apt::testing::deb(
            &format!("Package: {name}\nVersion: 1\nArchitecture: amd64\nDescription: {name}\n"),
            ".gz",
        )
    };
    let (s, body) = upload(&server, "local", &local("local-one"), "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    // The proxy's own copies of the upstream's files first, so that what follows counts the
    // group's writes alone.
    for path in ["dists/bookworm/InRelease", "dists/bookworm/main/binary-amd64/Packages.xz"] {
        let (s, _) = get(&server, &format!("/repository/px/{path}"))?;
        assert_eq!(s, 200, "{path} through the proxy");
    }
    let written = || metric(&server, "packyard_blob_bytes_total{direction=\"in\"}");
    let packages_path = "/repository/all/dists/bookworm/main/binary-amd64/Packages";
    let listed = |text: &str| text.matches("Package: ").count();

    // The whole merge.
    let before = written()?;
    create_repo(
        &server,
        Repo::group("all", Format::Apt, &["local", "px"])
            .with(serde_json::json!({"apt": {"distributions": ["bookworm"]}})),
    )?;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let text = loop {
        // The first merge of 8,000 packages takes a while in a debug build.
        let (s, body) = get(&server, packages_path)?;
        let text = String::from_utf8_lossy(&body).into_owned();
        if s == 200 && text.contains("Package: local-one\n") && text.contains("Package: up07999\n") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "the group's first merge never listed both members: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(listed(&text), 8_001, "the group lists every member's package once");
    assert!(
        text.contains("Filename: pool/px/pool/main/u/up07999/up07999_1.0_amd64.deb\n"),
        "the proxy's files under pool/px/"
    );
    let whole = written()? - before;
    assert!(whole > 7e6, "the whole merge wrote {whole} bytes: the index is smaller than meant");

    // An upload to the hosted member: the proxy member's chunks are kept, its index unread.
    upstream.forget_requests();
    let deb = local("local-two");
    let before = written()?;
    let (s, body) = upload(&server, "local", &deb, "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let text = String::from_utf8(wait_for(&server, packages_path, &["Package: local-two\n"])?)?;
    assert_eq!(listed(&text), 8_002);
    let upload_merge = written()? - before - deb.len() as f64;
    assert!(
        upload_merge * 10.0 < whole,
        "an upload to the hosted member wrote {upload_merge} bytes besides the package; the whole merge {whole}"
    );
    let asked = upstream.requests();
    assert!(!asked.iter().any(|p| p.contains("/binary-amd64/")), "the upstream's index was read again: {asked:?}");

    // The upstream moves on: one package more. The proxy notices once its copy of `InRelease`
    // is older than `metadata_ttl_secs`, and the group merges the proxy's new index.
    packages.push(Package::new("up08000", "1.0", "amd64").listing(&padding));
    let second_files = archive_files(&dist(&packages), &signer, Some(&first_files))?;
    let fetched: f64 = ["dists/bookworm/InRelease", "dists/bookworm/main/binary-amd64/Packages.xz"]
        .iter()
        .map(|p| second_files.get(*p).map_or(0, Vec::len) as f64)
        .sum();
    let before = written()?;
    upstream.publish(second_files);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let text = loop {
        // Reading the proxy's `InRelease` is what a client's `apt-get update` does: it makes the
        // proxy look upstream once its copy is stale.
        let _ = get(&server, "/repository/px/dists/bookworm/InRelease")?;
        let (s, body) = get(&server, packages_path)?;
        let text = String::from_utf8_lossy(&body).into_owned();
        if s == 200 && text.contains("Package: up08000\n") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "the group never merged the upstream's new package");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(listed(&text), 8_003);
    // The proxy stored the new `InRelease` and index (and the by-hash copy it was read by: at
    // most the index once more); the rest is the group's.
    let upstream_merge = written()? - before - fetched;
    assert!(
        upstream_merge * 3.0 < whole,
        "one package more upstream made the group write {upstream_merge} bytes; the whole merge {whole}"
    );
    eprintln!("group writes: whole merge {whole} bytes, after an upload {upload_merge}, after the upstream moved {upstream_merge}");
    Ok(())
}

/// A proxy whose upstream is a second Packyard, and a group of a hosted repository and that
/// proxy, both read by the real apt-get; then the upstream goes away (stale-if-error), an
/// upstream that never answers (timeout), and the SSRF guard.
#[test]
fn proxy_and_group_with_the_real_client() -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    // The upstream: a hosted repository with the real packages.
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    create_repo(&upstream, Repo::hosted("debs", Format::Apt))?;
    let mut real = std::collections::BTreeMap::new();
    for deb in &debs {
        let bytes = std::fs::read(deb)?;
        let (s, body) = upload(&upstream, "debs", &bytes, "?wait=true")?;
        assert_eq!(s, 201, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        real.insert(v["package"].as_str().unwrap_or_default().to_string(), bytes);
    }
    let (_, upstream_key) = get(&upstream, "/repository/debs/gpg.key")?;

    // The SSRF guard of a server with the default configuration.
    let upstream_port = upstream.public.rsplit(':').next().unwrap_or_default().to_string();
    for (name, host) in [("ssrf-ip", "127.0.0.1"), ("ssrf-name", "localhost")] {
        create_repo(
            &upstream,
            Repo::proxy(name, Format::Apt, &format!("http://{host}:{upstream_port}/repository/debs/")),
        )?;
        let (s, body) = get(&upstream, &format!("/repository/{name}/dists/stable/InRelease"))?;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(s, 502, "{text}");
        assert!(text.contains("resolves only to loopback, private or link-local addresses"), "{text}");
        assert!(text.contains("proxy.allow_private_addresses"), "{text}");
    }

    // An upstream that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let silent_port = silent.local_addr()?.port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });

    // An upstream that answers every path with the same five bytes.
    let liar = std::net::TcpListener::bind("127.0.0.1:0")?;
    let liar_port = liar.local_addr()?.port();
    let lies = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let told = lies.clone();
    std::thread::spawn(move || {
        for mut c in liar.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && std::io::Read::read(&mut c, &mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            told.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = std::io::Write::write_all(
                &mut c,
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });

    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
            ("PACKYARD_PROXY__READ_TIMEOUT_MS", "700"),
        ],
    )?;
    server.wait_ready()?;
    create_repo(
        &server,
        Repo::proxy("up", Format::Apt, &format!("{}/repository/debs/", upstream.public)).with(serde_json::json!({
            "apt": {"distributions": ["stable"], "signed_by": String::from_utf8_lossy(&upstream_key)},
            "proxy": {"metadata_ttl_secs": 1, "negative_ttl_secs": 60}})),
    )?;
    // Proxy: the upstream's bytes unchanged, a miss and then a hit (read before any group over
    // it exists, whose build would fetch it first).
    let base = format!("{}/repository/up", server.public);
    let (s, h, inrelease) = get_with(&format!("{base}/dists/stable/InRelease"))?;
    assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("miss")));
    assert!(inrelease == get(&upstream, "/repository/debs/dists/stable/InRelease")?.1, "InRelease passes through");
    let (s, h, again) = get_with(&format!("{base}/dists/stable/InRelease"))?;
    assert_eq!((s, h.get("x-packyard-cache").map(String::as_str), again == inrelease), (200, Some("hit"), true));
    create_repo(&server, Repo::proxy("silent", Format::Apt, &format!("http://127.0.0.1:{silent_port}/")))?;
    create_repo(&server, Repo::hosted("local", Format::Apt))?;
    create_repo(
        &server,
        Repo::group("all", Format::Apt, &["local", "up"])
            .with(serde_json::json!({"apt": {"distributions": ["stable"]}})),
    )?;
    // A group over a proxy whose upstream key is unknown (or wrong) refuses to merge and re-sign.
    let (_, local_key) = get(&server, "/repository/local/gpg.key")?;
    for (name, extra) in [
        ("up-unsigned", serde_json::json!({})),
        ("up-wrong-key", serde_json::json!({"signed_by": String::from_utf8_lossy(&local_key)})),
    ] {
        let mut apt = serde_json::json!({"distributions": ["stable"]});
        if let (Some(a), Some(e)) = (apt.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        create_repo(
            &server,
            Repo::proxy(name, Format::Apt, &format!("{}/repository/debs/", upstream.public))
                .with(serde_json::json!({"apt": apt})),
        )?;
    }
    // Without the upstream's key a group could not verify what it merges: refused at once,
    // naming the setting (#39), when the group is made and when the member loses its key.
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(
            Repo::group("unverified", Format::Apt, &["up-unsigned"])
                .with(serde_json::json!({"apt": {"distributions": ["stable"]}}))
                .0,
        ),
    )?;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("group member up-unsigned is a proxy without apt.signed_by")
            && body.contains("set apt.signed_by on up-unsigned"),
        "{body}"
    );
    let (s, body) = status_of(
        ureq::request("PATCH", &format!("{}/api/v1/repositories/up", server.public))
            .set("Authorization", &basic(PW))
            .set("Content-Type", "application/merge-patch+json")
            .send_string(r#"{"apt": {"signed_by": null}}"#),
    )?;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("repository up is a member of group all: group member up is a proxy without apt.signed_by"),
        "{body}"
    );
    // A proxy member serving none of the group's distributions would be left out: refused too.
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(
            Repo::group("elsewhere", Format::Apt, &["local", "up"])
                .with(serde_json::json!({"apt": {"distributions": ["bookworm"]}}))
                .0,
        ),
    )?;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("group member up serves distribution stable, which group elsewhere does not publish (it publishes bookworm)"),
        "{body}"
    );
    create_repo(
        &server,
        Repo::group("misverified", Format::Apt, &["up-wrong-key"])
            .with(serde_json::json!({"apt": {"distributions": ["stable"]}})),
    )?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(
            serde_json::json!({"name": "badkey", "format": "apt", "type": "proxy", "apt": {"signed_by": "nope"},
                "proxy": {"remote_url": "http://example.org/"}}),
        ),
    )?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("apt.signed_by is not an armored OpenPGP public key"), "{body}");

    let (s, _, body) = get_with(&format!("{base}/dists/testing/InRelease"))?;
    assert_eq!(s, 404);
    assert!(String::from_utf8_lossy(&body).contains("distribution \"testing\" is not mirrored"), "{body:?}");
    // A proxy's gpg.key is the upstream's key it verifies with (what its clients trust); one
    // without apt.signed_by has none to offer.
    let (s, _, body) = get_with(&format!("{base}/gpg.key"))?;
    assert_eq!(s, 200);
    assert!(body == upstream_key, "the proxy's gpg.key is its apt.signed_by");
    let (s, _, body) = get_with(&format!("{}/repository/up-unsigned/gpg.key", server.public))?;
    assert_eq!(s, 404);
    assert!(
        String::from_utf8_lossy(&body).contains("trust the upstream archive's key (or set apt.signed_by"),
        "{body:?}"
    );
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/up/signing-key", server.public))
            .set("Authorization", &basic(PW))
            .call(),
    )?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("has no signing key"), "{body}");
    let (s, _) = upload(&server, "up", &real["hello"], "")?;
    assert_eq!(s, 405, "a proxy takes no uploads");

    // Negative cache: a 404 is remembered, the second miss does not reach the upstream.
    let not_found = "packyard_proxy_upstream_requests_total{repository=\"up\",result=\"not_found\"}";
    for _ in 0..2 {
        let (s, _, body) = get_with(&format!("{base}/pool/main/n/nope/nope_1_amd64.deb"))?;
        assert_eq!(s, 404);
        assert!(String::from_utf8_lossy(&body).contains("the upstream answered 404"));
    }
    assert_eq!(metric(&server, not_found)?, 1.0, "the second 404 came from the negative cache");

    // Single-flight: eight concurrent misses for one file make one upstream request.
    let (_, packages) = get(&upstream, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
    let packages = String::from_utf8(packages)?;
    let jq_path = packages
        .lines()
        .filter_map(|l| l.strip_prefix("Filename: "))
        .find(|f| f.contains("/jq_"))
        .ok_or_else(|| anyhow::anyhow!("jq not in the upstream index"))?
        .to_string();
    let ok = "packyard_proxy_upstream_requests_total{repository=\"up\",result=\"ok\"}";
    // The group over the proxy reads its upstream when it first publishes (at once: a change to
    // an idle unit is not debounced); count only the misses below.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&server, "/repository/all/dists/stable/InRelease")?.0 != 200 {
        assert!(std::time::Instant::now() < deadline, "the group all never published");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = metric(&server, ok)?;
    let url = format!("{base}/{}", jq_path.replace('+', "%2b"));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || get_with(&url).map(|(s, _, b)| (s, b)))
        })
        .collect();
    for t in threads {
        let (s, b) = t.join().map_err(|_| anyhow::anyhow!("thread panicked"))??;
        assert_eq!(s, 200);
        assert!(b == real["jq"], "the proxied jq has the upstream's bytes");
    }
    assert_eq!(metric(&server, ok)? - before, 1.0, "concurrent misses made one upstream request");
    let (s, h, part) = {
        let r = ureq::get(&url).set("Range", "bytes=0-99").call()?;
        let status = r.status();
        let cache = r.header("x-packyard-cache").unwrap_or_default().to_string();
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut b)?;
        (status, cache, b)
    };
    assert_eq!((s, h.as_str(), &part[..]), (206, "hit", &real["jq"][..100]));

    // The real apt client through the proxy, trusting the upstream's key.
    let root = apt_root(&upstream_key, &base)?;
    update_ok(root.path())?;
    for name in real.keys() {
        assert!(download(root.path(), name)? == real[name], "{name} through the proxy");
    }
    std::thread::sleep(Duration::from_millis(1100));
    let log = update_ok(root.path())?;
    assert!(log.contains("Hit:"), "a second update through the proxy finds nothing new:\n{log}");
    // The proxy's catalogue is what it cached: each package apt-get fetched, with the upstream's
    // bytes' digest; its indexes are no components.
    let auth = basic(PW);
    let cached = common::process::nexus(&server.public, &auth, "search?repository=up")?;
    let mut names: Vec<&str> =
        cached["items"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect();
    names.sort_unstable();
    let mut fetched: Vec<&str> = real.keys().map(String::as_str).collect();
    fetched.sort_unstable();
    assert_eq!(names, fetched, "{cached}");
    let jq = common::process::nexus_component(&server.public, &auth, "repository=up&name=jq")?;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&real["jq"]));
    assert_eq!(jq["assets"][0]["checksum"]["sha256"].as_str(), Some(digest.as_str()), "{jq}");
    assert_eq!(jq["group"], "main");

    // Group: a local package, and a local "hello" with the same name/version/arch as the
    // upstream's but other bytes: the first member (local) wins.
    let hello_version = packages
        .split("\n\n")
        .find(|s| s.starts_with("Package: hello\n"))
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Version: ")))
        .ok_or_else(|| anyhow::anyhow!("hello not in the upstream index"))?
        .to_string();
    let local_hello = packyard_codecs::apt::testing::deb(
        &format!("Package: hello\nVersion: {hello_version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: the local hello\n"),
        ".gz",
    );
    let local_only = packyard_codecs::apt::testing::deb(
        "Package: packyard-local\nVersion: 1.0\nArchitecture: all\nMaintainer: T <t@example.org>\nDescription: only here\n",
        ".xz",
    );
    for bytes in [&local_hello, &local_only] {
        let (s, body) = upload(&server, "local", bytes, "?wait=true")?;
        assert_eq!(s, 201, "{body}");
    }
    let group_packages = wait_for(
        &server,
        "/repository/all/dists/stable/main/binary-amd64/Packages",
        &["Package: packyard-local\n", "Package: jq\n", "Package: libjq1\n", "Filename: pool/local/pool/main/h/hello/"],
    )?;
    let group_packages = String::from_utf8(group_packages)?;
    assert_eq!(group_packages.matches("Package: hello\n").count(), 1, "first member wins:\n{group_packages}");
    assert!(group_packages.contains("Filename: pool/up/pool/main/j/jq/"), "{group_packages}");
    let (_, group_key) = get(&server, "/repository/all/gpg.key")?;
    let groot = apt_root(&group_key, &format!("{}/repository/all", server.public))?;
    dates_settle();
    update_ok(groot.path())?;
    assert!(download(groot.path(), "hello")? == local_hello, "hello comes from the first member");
    assert!(download(groot.path(), "jq")? == real["jq"], "jq comes from the proxy member");
    assert!(download(groot.path(), "packyard-local")? == local_only);
    let log = update_ok(groot.path())?;
    assert!(log.contains("Hit:"), "a second update of the group finds nothing new:\n{log}");
    let (s, _) = get(&server, "/repository/all/pool/elsewhere/pool/main/h/hello/x.deb")?;
    assert_eq!(s, 404, "a group serves only its members' files");
    for (group, needle) in [("misverified", "InRelease is refused")] {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, status) = status_of(
                ureq::get(&format!("{}/api/v1/repositories/{group}/status", server.public))
                    .set("Authorization", &basic(PW))
                    .call(),
            )?;
            if status.contains(needle) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{group}: no {needle:?} in {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            get(&server, &format!("/repository/{group}/dists/stable/InRelease"))?.0,
            404,
            "{group} published nothing"
        );
    }
    // An upstream change reaches the group once the proxy member's metadata TTL has passed.
    let later = packyard_codecs::apt::testing::deb(
        "Package: packyard-later\nVersion: 1.0\nArchitecture: all\nMaintainer: T <t@example.org>\nDescription: later\n",
        "",
    );
    let (s, body) = upload(&upstream, "debs", &later, "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    wait_for(&server, "/repository/all/dists/stable/main/binary-amd64/Packages", &["Package: packyard-later\n"])?;
    update_ok(groot.path())?;
    assert!(download(groot.path(), "packyard-later")? == later);

    // A by-hash file whose bytes do not have its name's hash is refused and not cached.
    create_repo(&server, Repo::proxy("liar", Format::Apt, &format!("http://127.0.0.1:{liar_port}/")))?;
    let zeros = "0".repeat(64);
    for _ in 0..2 {
        let (s, _, body) = get_with(&format!(
            "{}/repository/liar/dists/stable/main/binary-amd64/by-hash/SHA256/{zeros}",
            server.public
        ))?;
        assert_eq!(s, 502, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains(&format!("instead of {zeros}")), "{body:?}");
    }
    assert_eq!(lies.load(std::sync::atomic::Ordering::SeqCst), 2, "the refused bytes were not cached");

    // Timeouts: an upstream that never answers is a 504 with a message, not a hang.
    let started = std::time::Instant::now();
    let (s, _, body) = get_with(&format!("{}/repository/silent/pool/main/x/x/x_1_all.deb", server.public))?;
    assert_eq!(s, 504, "{}", String::from_utf8_lossy(&body));
    // The cause, and the setting that decided it.
    assert!(String::from_utf8_lossy(&body).contains("sent nothing for proxy.read_timeout_ms ("), "{body:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // Stale-if-error: the upstream goes away; cached metadata is still served, and says so.
    let (_, _, inrelease) = get_with(&format!("{base}/dists/stable/InRelease"))?;
    assert!(
        inrelease == get(&upstream, "/repository/debs/dists/stable/InRelease")?.1,
        "the proxy follows its upstream"
    );
    let upstream_base = upstream.public.clone();
    assert!(upstream.terminate()?.success());
    std::thread::sleep(Duration::from_millis(1100));
    let (s, h, stale) = get_with(&format!("{base}/dists/stable/InRelease"))?;
    assert_eq!((s, h.get("x-packyard-cache").map(String::as_str)), (200, Some("stale")));
    assert!(h.get("warning").is_some_and(|w| w.starts_with("110 ")), "{h:?}");
    assert!(stale == inrelease);
    assert!(metric(&server, "packyard_proxy_stale_served_total{repository=\"up\"}")? >= 1.0);
    let (s, _, body) = get_with(&format!("{base}/pool/main/o/other/other_1_all.deb"))?;
    assert_eq!(s, 502, "an uncached file with the upstream down");
    assert!(
        String::from_utf8_lossy(&body)
            .contains(&format!("connection: upstream {upstream_base} refused the connection")),
        "{body:?}"
    );
    update_ok(root.path())?;
    assert!(server.terminate()?.success());
    Ok(())
}

/// The versions of `name` apt knows after its last update (`apt-cache madison`).
fn madison(root: &Path, name: &str) -> anyhow::Result<Vec<String>> {
    let out = apt_tool("apt-cache", root, &["madison", name])?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text.lines().filter_map(|l| l.split('|').nth(1)).map(|v| v.trim().to_string()).collect())
}

/// Cleanup seen through the real apt-get: each criterion — keep the newest N (dpkg's order),
/// name and version patterns, published and last downloaded more than N days ago — run by the
/// worker on request; each run removes exactly what its preview listed, and apt-get, after an
/// update, no longer finds what went and still downloads what stayed.
#[test]
fn cleanup_with_the_real_client() -> anyhow::Result<()> {
    use common::process::{catalogue, cleanup_now, sql};
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100"),
            ("PACKYARD_CACHE__DOWNLOAD_STATS_FLUSH_MS", "100"),
        ],
    )?;
    server.wait_ready()?;
    let db = format!("sqlite://{}/data/packyard.db", dir.path().display());
    create_repo(&server, Repo::hosted("debs", Format::Apt))?;
    let packages = [
        ("hello", "1.0"),
        ("hello", "1.9"),
        ("hello", "1.10"),
        ("libold-a", "1.0"),
        ("libold-b", "2.0"),
        ("libkeep", "1.0"),
        ("ancient", "1.0"),
        ("stale", "1.0"),
        ("fresh", "1.0"),
    ];
    let mut bytes = std::collections::HashMap::new();
    for (name, version) in packages {
        let control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: {name}\n"
        );
        let deb = packyard_codecs::apt::testing::deb(&control, ".xz");
        let (s, body) = upload(&server, "debs", &deb, "?wait=true")?;
        assert_eq!(s, 201, "{body}");
        bytes.insert(format!("{name} {version}"), deb);
    }
    let (_, key) = get(&server, "/repository/debs/gpg.key")?;
    let root = apt_root(&key, &format!("{}/repository/debs", server.public))?;
    update_ok(root.path())?;
    assert_eq!(madison(root.path(), "hello")?, ["1.10", "1.9", "1.0"]);
    let auth = basic(PW);

    // Each run: what the preview listed is what went, nothing else; apt sees the rest.
    let mut expect_left: std::collections::BTreeSet<String> = bytes.keys().cloned().collect();
    let mut check = |policy: serde_json::Value, removed: &[&str]| -> anyhow::Result<()> {
        let before = catalogue(&server.public, &auth, "debs")?;
        let (preview, run) = cleanup_now(&server.public, &auth, policy.clone(), "debs")?;
        let want: std::collections::BTreeSet<String> = removed.iter().map(|s| s.to_string()).collect();
        assert_eq!(preview, want, "{policy}: the preview");
        let after = catalogue(&server.public, &auth, "debs")?;
        let gone: std::collections::BTreeSet<String> = before.difference(&after).cloned().collect();
        assert_eq!(gone, preview, "{policy}: the run removed what the preview listed");
        assert_eq!(run["components"].as_u64(), Some(want.len() as u64), "{run}");
        let bytes_gone: usize = removed.iter().map(|r| bytes[*r].len()).sum();
        assert_eq!(run["bytes"].as_u64(), Some(bytes_gone as u64), "{run}");
        expect_left.retain(|c| !want.contains(c));
        assert_eq!(after, expect_left);
        // The index follows once published.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            update_ok(root.path())?;
            let listed: std::collections::BTreeSet<String> =
                ["hello", "libold-a", "libold-b", "libkeep", "ancient", "stale", "fresh"]
                    .iter()
                    .map(|n| Ok(madison(root.path(), n)?.into_iter().map(|v| format!("{n} {v}")).collect::<Vec<_>>()))
                    .collect::<anyhow::Result<Vec<_>>>()?
                    .into_iter()
                    .flatten()
                    .collect();
            if listed == expect_left {
                break;
            }
            if std::time::Instant::now() >= deadline {
                let (_, packages) = get(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
                let (_, status) = status_of(
                    ureq::get(&format!("{}/api/v1/repositories/debs/status", server.public))
                        .set("Authorization", &auth)
                        .call(),
                )?;
                anyhow::bail!(
                    "{policy}: apt lists {listed:?}, want {expect_left:?}; Packages {}; status {status}",
                    String::from_utf8_lossy(&packages)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for r in removed {
            let (name, version) = r.split_once(' ').unwrap_or_default();
            let out = apt_get(root.path(), &["download", &format!("{name}={version}")])?;
            assert!(!out.status.success(), "{r} is still downloadable");
        }
        Ok(())
    };
    check(
        serde_json::json!({"name": "keep-newest", "format": "apt", "criteria": {"keep_latest": 1, "name_regex": "^hello$"}, "repositories": ["debs"]}),
        &["hello 1.0", "hello 1.9"],
    )?;
    check(
        serde_json::json!({"name": "old-libs", "format": "apt", "criteria": {"name_regex": "^libold-", "version_regex": "^1\\."}, "repositories": ["debs"]}),
        &["libold-a 1.0"],
    )?;
    sql(
        &db,
        &format!("UPDATE components SET created_at = created_at - {} WHERE name = 'ancient'", 40 * 86_400_000i64),
    )?;
    check(
        serde_json::json!({"name": "published-30d", "format": "apt", "criteria": {"published_before_days": 30}, "repositories": ["debs"]}),
        &["ancient 1.0"],
    )?;
    sql(
        &db,
        &format!(
            "UPDATE components SET created_at = created_at - {} WHERE name IN ('stale', 'fresh')",
            40 * 86_400_000i64
        ),
    )?;
    assert_eq!(download(root.path(), "fresh")?, bytes["fresh 1.0"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while nexus(&server.public, &auth, "search/assets?repository=debs&name=fresh")?["items"][0]["lastDownloaded"]
        .is_null()
    {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the download was not counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    check(
        serde_json::json!({"name": "unused-10d", "format": "apt", "criteria": {"last_downloaded_before_days": 10}, "repositories": ["debs"]}),
        &["stale 1.0"],
    )?;
    for left in ["hello", "libold-b", "libkeep", "fresh"] {
        let (name, version) = expect_left
            .iter()
            .find(|c| c.starts_with(&format!("{left} ")))
            .and_then(|c| c.split_once(' '))
            .unwrap_or_default();
        assert_eq!(download(root.path(), name)?, bytes[&format!("{name} {version}")], "{left}");
    }
    assert!(server.terminate()?.success());
    Ok(())
}

/// `Last-Modified` has whole seconds, and apt asks with `If-Modified-Since` only: two
/// snapshots of a unit must never carry the same second, or a 304 would hide the newer one until
/// the next publication. A snapshot published within its predecessor's second takes the next
/// second; a date before a snapshot's second is answered with the file, its second or later 304.
/// A second ahead of the clock is not sent (loose_ends.rs has the burst).
async fn a_change_within_the_second_is_never_answered_304(mut app: common::app::TestApp) -> anyhow::Result<()> {
    use actix_web::test::TestRequest;
    use packyard_store::db::publication::modified_after;
    // Within the second of the previous snapshot, or behind one that took a later second.
    assert_eq!(modified_after(Some(7_000), 7_400), 8_000);
    assert_eq!(modified_after(Some(8_000), 7_900), 9_000);
    assert_eq!(modified_after(Some(7_000), 8_100), 8_000);
    assert_eq!(modified_after(None, 8_100), 8_000);

    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    for name in ["first", "second"] {
        let control = format!("Package: {name}\nVersion: 1\nArchitecture: amd64\nDescription: {name}\n");
        let r = app.post("/repository/debs/?wait=true", packyard_codecs::apt::testing::deb(&control, ".gz")).await?;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let db = &app.services.db;
    let now = packyard_store::db::now_ms();
    let second = now - now.rem_euclid(1000);
    let date =
        |ms: i64| actix_web::http::header::HttpDate::from(std::time::UNIX_EPOCH + Duration::from_millis(ms as u64));
    let packages = "/repository/debs/dists/stable/main/binary-amd64/Packages";
    let ask =
        |since: i64| TestRequest::get().uri(packages).insert_header(("if-modified-since", date(since).to_string()));
    // The two uploads' snapshots took distinct seconds, the second's after the first's.
    let at: i64 =
        sqlx::query_scalar("SELECT modified_at FROM publication_units WHERE kind = 'apt'").fetch_one(db.pool()).await?;
    assert_eq!(at.rem_euclid(1000), 0);
    // (A second ahead of the clock is not sent: once the clock is there.)
    let wait = at + 1_000 - packyard_store::db::now_ms();
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
    }
    let replica = app.replica().await?;
    let r = replica.send(ask(at)).await?;
    assert_eq!(r.status, 304, "{:?}", r.headers);
    assert_eq!(r.headers.get("last-modified").and_then(|v| v.to_str().ok()), Some(date(at).to_string().as_str()));
    let r = replica.send(ask(at - 1_000)).await?;
    assert_eq!(r.status, 200, "the previous snapshot's second: {:?}", r.headers);
    assert!(r.text.contains("Package: second"), "{}", r.text);
    // Published while its predecessor's second is ahead of the clock (as in a burst): the
    // second after it — ahead too, so not sent until the clock gets there (#44); the date sent
    // is the current second, and a copy of the predecessor's date is answered with the file.
    let before = at;
    sqlx::query(&format!("UPDATE publication_units SET modified_at = {}", second + 5_000)).execute(db.pool()).await?;
    let control = "Package: third\nVersion: 1\nArchitecture: amd64\nDescription: third\n";
    let r = app.post("/repository/debs/?wait=true", packyard_codecs::apt::testing::deb(control, ".gz")).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let at: i64 =
        sqlx::query_scalar("SELECT modified_at FROM publication_units WHERE kind = 'apt'").fetch_one(db.pool()).await?;
    assert_eq!(at, second + 6_000);
    let replica = app.replica().await?;
    let r = replica.send(ask(before)).await?;
    assert_eq!(r.status, 200, "the predecessor's date: {:?}", r.headers);
    assert!(r.text.contains("Package: third"), "{}", r.text);
    let sent = r.headers.get("last-modified").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let sent: actix_web::http::header::HttpDate = sent.parse()?;
    assert!(std::time::SystemTime::from(sent) <= std::time::SystemTime::now(), "{:?}", r.headers);
    Ok(())
}
app_test!(a_change_within_the_second_is_never_answered_304);

/// The hot answers (`packyard_api::hot`): a repeated anonymous read of `InRelease`, `Packages`
/// and a package's HEAD are answered without the snapshot or artifact caches' lookups, and never
/// outlive what they were made from — a publication and a change of access are each seen by the
/// very next request, as without them; a deletion as soon as it is published (the package's
/// HEAD at once, the index once the worker published it).
async fn hot_answers_follow_every_change(mut app: common::app::TestApp) -> anyhow::Result<()> {
    use actix_web::test::TestRequest;
    use common::app::As;
    app.start_worker();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let deb = |name: &str| {
        let control = format!("Package: {name}\nVersion: 1\nArchitecture: amd64\nDescription: {name}\n");
        packyard_codecs::apt::testing::deb(&control, ".gz")
    };
    let r = app.post("/repository/debs/?wait=true", deb("first")).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // Lookups of the node-local caches a warm read asks, by cache.
    let lookups = |cache: &str| -> f64 {
        let text = String::from_utf8(app.services.metrics.render()).unwrap_or_default();
        ["hit", "miss"]
            .iter()
            .filter_map(|result| {
                let sample = format!("packyard_cache_requests_total{{cache=\"{cache}\",result=\"{result}\"}} ");
                text.lines().find_map(|l| l.strip_prefix(sample.as_str())).and_then(|v| v.trim().parse::<f64>().ok())
            })
            .sum()
    };
    // Background work (a watermark poll, the worker's last round) may move an epoch between two
    // reads and so forget the answers once: a repeated read must be answered hot in one of a
    // few tries (without hot answers every one asks the cache).
    const TRIES: usize = 10;
    let in_release = "/repository/debs/dists/stable/InRelease";
    let mut tries = 0;
    let (first, again) = loop {
        let first = app.get(in_release).await?;
        assert_eq!(first.status, 200, "{}", first.text);
        let before = lookups("snapshot");
        let again = app.get(in_release).await?;
        if lookups("snapshot") == before {
            break (first, again);
        }
        tries += 1;
        assert!(tries < TRIES, "{TRIES} repeated reads each asked the snapshot cache: no hot answer");
    };
    assert_eq!(again.status, 200);
    assert_eq!(again.bytes, first.bytes);
    for name in ["etag", "last-modified", "content-type", "content-security-policy", "x-content-type-options"] {
        assert_eq!(again.headers.get(name), first.headers.get(name), "{name}");
    }
    assert!(again.headers.contains_key("content-security-policy"), "{:?}", again.headers);
    let etag = first.headers.get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let mut tries = 0;
    loop {
        let before = lookups("snapshot");
        let cond = app
            .send(TestRequest::get().uri(in_release).insert_header(("if-none-match", etag.as_str())), As::Anonymous)
            .await?;
        assert_eq!(cond.status, 304, "{:?}", cond.headers);
        assert_eq!(cond.headers.get("etag").and_then(|v| v.to_str().ok()), Some(etag.as_str()));
        if lookups("snapshot") == before {
            break;
        }
        tries += 1;
        assert!(tries < TRIES, "{TRIES} conditional reads each asked the snapshot cache: no hot answer");
    }

    // A publication: the very next read has the new index, and the old validator is a 200.
    let r = app.post("/repository/debs/?wait=true", deb("second")).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let after = app.get(in_release).await?;
    assert_eq!(after.status, 200);
    assert_ne!(after.bytes, first.bytes, "InRelease after a publication is the one before it");
    let cond = app
        .send(TestRequest::get().uri(in_release).insert_header(("if-none-match", etag.as_str())), As::Anonymous)
        .await?;
    assert_eq!(cond.status, 200, "the previous snapshot's ETag: {:?}", cond.headers);
    assert_eq!(cond.bytes, after.bytes);

    // A package's HEAD, answered again; gone with the package.
    let pool = "/repository/debs/pool/main/f/first/first_1_amd64.deb";
    let head = || app.send(TestRequest::default().method(actix_web::http::Method::HEAD).uri(pool), As::Anonymous);
    let mut tries = 0;
    let r = loop {
        let r = head().await?;
        assert_eq!(r.status, 200, "{:?}", r.headers);
        let before = lookups("artifact");
        let r = head().await?;
        assert_eq!(r.status, 200, "{:?}", r.headers);
        if lookups("artifact") == before {
            break r;
        }
        tries += 1;
        assert!(tries < TRIES, "{TRIES} repeated HEADs each asked the artifact cache: no hot answer");
    };
    assert_eq!(r.headers.get("accept-ranges").and_then(|v| v.to_str().ok()), Some("bytes"));
    let packages = "/repository/debs/dists/stable/main/binary-amd64/Packages";
    let mut tries = 0;
    loop {
        assert!(app.get(packages).await?.text.contains("Package: first"));
        let before = lookups("snapshot");
        assert!(app.get(packages).await?.text.contains("Package: first"));
        if lookups("snapshot") == before {
            break;
        }
        tries += 1;
        assert!(tries < TRIES, "{TRIES} repeated Packages reads each asked the snapshot cache: no hot answer");
    }
    let r = app.delete(pool).await?;
    assert!(r.status.is_success(), "{}: {}", r.status, r.text);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = head().await?;
        if r.status == 404 {
            break;
        }
        assert_eq!(r.status, 200, "{:?}", r.headers);
        assert!(std::time::Instant::now() < deadline, "the deleted package still answers HEAD after 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The index follows once the deletion is published (the worker's debounce): the Packages
    // file was read twice before, so a hot answer of the old one would keep listing it.
    loop {
        let listed = app.get(packages).await?;
        assert_eq!(listed.status, 200, "{}", listed.text);
        if !listed.text.contains("Package: first") {
            assert!(listed.text.contains("Package: second"), "{}", listed.text);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the deleted package is still listed after 20 s: {}",
            listed.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Access: closed to anonymous readers, the next read is refused.
    assert_eq!(app.get(in_release).await?.status, 200);
    app.patch_repository("debs", serde_json::json!({"anonymous_read": false})).await?;
    let r = app.get(in_release).await?;
    assert_eq!(r.status, 401, "{:?}", r.headers);
    Ok(())
}
app_test!(hot_answers_follow_every_change);

/// `apt-get update` in a loop while a cleanup run removes 360 of 400 packages in small batches
/// (each republishing the distribution): every update succeeds, with no hash-sum mismatch; at
/// the end apt sees exactly the newest version of each package.
#[test]
fn apt_get_update_during_a_cleanup_run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_WORKER__DEBOUNCE_MS", "10"),
            ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100"),
            ("PACKYARD_WORKER__CLEANUP_BATCH", "10"),
        ],
    )?;
    server.wait_ready()?;
    create_repo(&server, Repo::hosted("debs", Format::Apt))?;
    let (names, versions) = (40, 10);
    for n in 0..names {
        for v in 1..=versions {
            let control = format!("Package: pkg{n}\nVersion: 1.{v}\nArchitecture: amd64\nDescription: package {n}\n");
            let (s, body) = upload(&server, "debs", &packyard_codecs::apt::testing::deb(&control, ".gz"), "")?;
            assert_eq!(s, 201, "{body}");
        }
    }
    let packages_path = "/repository/debs/dists/stable/main/binary-amd64/Packages";
    wait_for(&server, packages_path, &["Package: pkg39\nVersion: 1.10\n"])?;
    let (_, key) = get(&server, "/repository/debs/gpg.key")?;
    let root = apt_root(&key, &format!("{}/repository/debs", server.public))?;
    update_ok(root.path())?;
    assert_eq!(madison(root.path(), "pkg7")?.len(), 10);

    let auth = basic(PW);
    let admin = |method: &str, path: &str, body: Option<serde_json::Value>| {
        common::process::admin_json(&server.public, &auth, method, path, body)
    };
    let policy = serde_json::json!({"name": "newest", "format": "apt", "criteria": {"keep_latest": 1}, "repositories": ["debs"]});
    admin("POST", "/api/v1/cleanup-policies", Some(policy))?;
    admin("POST", "/api/v1/cleanup-policies/newest/run", None)?;
    let mut updates = 0;
    let mut finished = false;
    while !finished || updates < 3 {
        let out = apt_get(root.path(), &["update"])?;
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success() && !log.contains("Hash Sum mismatch") && !log.contains("Err:"),
            "update {updates} during the cleanup run:\n{log}"
        );
        updates += 1;
        let runs = admin("GET", "/api/v1/cleanup-policies/newest/runs", None)?;
        finished = runs["items"][0]["state"] == "idle" && runs["items"][0]["lastFinished"].is_string();
        anyhow::ensure!(updates < 500, "the run did not finish: {runs}");
    }
    let runs = admin("GET", "/api/v1/cleanup-policies/newest/runs", None)?;
    assert_eq!(runs["items"][0]["components"], 360, "{runs}");
    let newest: String = (0..names).map(|n| format!("pkg{n} 1.{versions}\n")).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, packages) = get(&server, packages_path)?;
        let text = String::from_utf8_lossy(&packages);
        let mut listed: Vec<String> = text
            .split("\n\n")
            .filter_map(|s| {
                let f = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).map(str::to_string);
                Some(format!("{} {}\n", f("Package: ")?, f("Version: ")?))
            })
            .collect();
        listed.sort();
        let mut want: Vec<String> = newest.lines().map(|l| format!("{l}\n")).collect();
        want.sort();
        if listed == want {
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "still published: {} packages", listed.len());
        std::thread::sleep(Duration::from_millis(100));
    }
    update_ok(root.path())?;
    assert_eq!(madison(root.path(), "pkg7")?, ["1.10"]);
    eprintln!("{updates} apt-get updates during a cleanup run of 360 removals, none saw a mismatch");
    assert!(server.terminate()?.success());
    Ok(())
}

/// One GET with extra headers: status, `Content-Range` and the body.
fn get_with_headers(url: &str, headers: &[(&str, &str)]) -> anyhow::Result<(u16, Option<String>, Vec<u8>)> {
    let mut req = ureq::get(url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let r = req.call()?;
    let (status, range) = (r.status(), r.header("content-range").map(str::to_string));
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
    Ok((status, range, body))
}

/// A resumed download: `Range` is honoured only while `If-Range` (an entity tag, compared
/// strongly, or apt's date) still names the file; otherwise the whole file. The real apt-get
/// resumes a partial package whose date matches (206) and replaces one that is of another file
/// (200; before `If-Range` was honoured it glued the new bytes to the old and failed the hash).
#[test]
fn resumed_downloads_honour_if_range_on_sqlite() -> anyhow::Result<()> {
    resumed_downloads_honour_if_range(packyard_store::db::Backend::Sqlite)
}

#[test]
fn resumed_downloads_honour_if_range_on_postgres() -> anyhow::Result<()> {
    resumed_downloads_honour_if_range(packyard_store::db::Backend::Postgres)
}

fn resumed_downloads_honour_if_range(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let hello = debs
        .iter()
        .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("hello_")))
        .ok_or_else(|| anyhow::anyhow!("no hello package in TEST_DEBS_DIR"))?;
    let file_name = hello.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let bytes = std::fs::read(hello)?;
    let Some((server, _dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else { return Ok(()) };
    create_repo(&server, serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))?;
    let (s, body) = upload(&server, "debs", &bytes, "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let url = format!("{}/repository/debs/pool/main/h/hello/{file_name}", server.public);
    let head = ureq::head(&url).call()?;
    let etag = head.header("etag").unwrap_or_default().to_string();
    let modified = head.header("last-modified").unwrap_or_default().to_string();
    assert!(!modified.is_empty(), "a hosted package has a Last-Modified (its upload time)");

    // At the HTTP level, each kind of validator.
    let tail = format!("bytes={}-", bytes.len() - 100);
    let weak = format!("W/{etag}");
    for (if_range, status) in [
        (etag.as_str(), 206),
        (modified.as_str(), 206),
        (weak.as_str(), 200),
        ("\"another-file\"", 200),
        ("Thu, 01 Jan 2015 00:00:00 GMT", 200),
        ("not a validator", 200),
    ] {
        let (s, range, body) = get_with_headers(&url, &[("Range", &tail), ("If-Range", if_range)])?;
        assert_eq!(s, status, "If-Range: {if_range}");
        if status == 206 {
            assert_eq!(range, Some(format!("bytes {}-{}/{}", bytes.len() - 100, bytes.len() - 1, bytes.len())));
            assert_eq!(body, bytes[bytes.len() - 100..], "If-Range: {if_range}");
        } else {
            assert_eq!(range, None, "If-Range: {if_range}");
            assert_eq!(body, bytes, "the whole file for If-Range: {if_range}");
        }
    }
    let (s, _, body) = get_with_headers(&url, &[("Range", &tail)])?;
    assert_eq!((s, body.len()), (206, 100), "a Range without If-Range");

    // The real apt-get, downloading into its archive cache with a partial file in place; libc6
    // (hello's dependency) counts as installed.
    let key = get(&server, "/repository/debs/gpg.key")?.1;
    let root = apt_root(&key, &format!("{}/repository/debs", server.public))?;
    std::fs::write(
        root.path().join("state/status"),
        "Package: libc6\nStatus: install ok installed\nPriority: required\nVersion: 2.36-9\n\
         Architecture: amd64\nMaintainer: x\nDescription: x\n\n",
    )?;
    update_ok(root.path())?;
    let partial = root.path().join("cache/archives/partial").join(&file_name);
    let done = root.path().join("cache/archives").join(&file_name);
    let fetch = |partial_bytes: &[u8], date: &str| -> anyhow::Result<String> {
        let _ = std::fs::remove_file(&done);
        std::fs::write(&partial, partial_bytes)?;
        let touched = Command::new("touch").arg("-d").arg(date).arg(&partial).status()?;
        anyhow::ensure!(touched.success(), "touch -d {date}");
        let out = apt_tool(
            "apt-get",
            root.path(),
            &[
                "-o",
                "Debug::Acquire::http=true",
                "-o",
                &format!("Dir::Log={}", root.path().join("log").display()),
                "install",
                "-d",
                "-y",
                "hello",
            ],
        )?;
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "apt-get install -d hello:\n{log}");
        anyhow::ensure!(std::fs::read(&done)? == bytes, "the downloaded package differs:\n{log}");
        Ok(log)
    };
    // A partial copy of this file, dated as the server dated it: resumed.
    let log = fetch(&bytes[..20_000], &modified)?;
    assert!(log.contains("Range: bytes=20000-") && log.contains("If-Range: "), "apt asked to resume:\n{log}");
    assert!(log.contains("206 Partial Content"), "resumed:\n{log}");
    // A partial copy of another file (other bytes, another date): the whole file, not glued.
    let log = fetch(&vec![b'x'; 20_000], "2015-01-01 00:00:00 UTC")?;
    assert!(log.contains("Range: bytes=20000-"), "apt asked to resume:\n{log}");
    assert!(log.contains("HTTP/1.1 200 OK") && !log.contains("206 Partial Content"), "the whole file:\n{log}");
    assert!(server.terminate()?.success());
    Ok(())
}

/// Artifactory's upload: `PUT pool/…/<file>.deb;deb.distribution=…;deb.component=…;deb.architecture=…`
/// stores the package where its control file puts it (the receipt and `Location` say where),
/// each parameter checked before anything is kept; the real apt-get then installs it.
#[test]
fn artifactory_style_put_with_matrix_parameters_on_sqlite() -> anyhow::Result<()> {
    artifactory_style_put_with_matrix_parameters(packyard_store::db::Backend::Sqlite)
}

#[test]
fn artifactory_style_put_with_matrix_parameters_on_postgres() -> anyhow::Result<()> {
    artifactory_style_put_with_matrix_parameters(packyard_store::db::Backend::Postgres)
}

fn artifactory_style_put_with_matrix_parameters(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let find = |prefix: &str| {
        debs.iter()
            .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with(prefix)))
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("no {prefix} package in TEST_DEBS_DIR"))
    };
    let (hello, jq) = (std::fs::read(find("hello_")?)?, std::fs::read(find("jq_")?)?);
    let Some((server, _dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else { return Ok(()) };
    create_repo(
        &server,
        serde_json::json!({"name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "bookworm", "components": ["main", "contrib"], "architectures": ["amd64"]}}),
    )?;
    let put = |path: &str, bytes: &[u8], auth: bool| -> anyhow::Result<(u16, Option<String>, String)> {
        let mut req = ureq::put(&format!("{}/repository/debs/{path}", server.public));
        if auth {
            req = req.set("Authorization", &basic(PW));
        }
        match req.send_bytes(bytes) {
            Ok(r) => Ok((r.status(), r.header("location").map(str::to_string), r.into_string()?)),
            Err(ureq::Error::Status(code, r)) => Ok((code, None, r.into_string()?)),
            Err(e) => Err(e.into()),
        }
    };
    let catalogue = || common::process::catalogue(&server.public, &basic(PW), "debs");

    // Each parameter checked, nothing kept when one is wrong.
    for (path, bytes, status, needle) in [
        (
            "pool/x/hello.deb;deb.distribution=trixie",
            &hello,
            400,
            "deb.distribution=trixie is not a distribution of repository debs; it publishes bookworm",
        ),
        ("pool/x/hello.deb;deb.component=nope", &hello, 400, "component \"nope\" is not configured"),
        (
            "pool/x/hello.deb;deb.architecture=arm64",
            &hello,
            400,
            "deb.architecture=arm64 but the package's control file says Architecture: amd64",
        ),
        ("pool/x/hello.deb;deb.component=main,contrib", &hello, 400, "give exactly one value"),
        ("pool/x/hello.txt;deb.component=main", &hello, 400, "PUT a .deb file"),
        ("pool/.hidden/hello.deb;deb.component=main", &hello, 400, "invalid path"),
    ] {
        let (s, _, body) = put(path, bytes, true)?;
        assert_eq!(s, status, "{path}: {body}");
        assert!(body.contains(needle), "{path}: {body:?} lacks {needle:?}");
    }
    assert_eq!(put("pool/x/hello.deb;deb.component=main", &hello, false)?.0, 401, "a write needs credentials");
    assert!(catalogue()?.is_empty(), "nothing kept: {:?}", catalogue()?);

    // As Artifactory's users' scripts send it: stored at its canonical pool path.
    let (s, location, body) = put(
        "pool/h/hello/hello_2.10-3_amd64.deb;deb.distribution=bookworm;deb.component=main;deb.architecture=amd64?wait=true",
        &hello,
        true,
    )?;
    assert_eq!(s, 201, "{body}");
    let receipt: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(receipt["filename"], "pool/main/h/hello/hello_2.10-3_amd64.deb", "{receipt}");
    assert_eq!(location.as_deref(), Some("/repository/debs/pool/main/h/hello/hello_2.10-3_amd64.deb"));
    // Any directory, and other properties (ignored).
    let (s, location, body) =
        put("some/dir/jq.deb;deb.component=contrib;deb.architecture=amd64;build.number=42?wait=true", &jq, true)?;
    assert_eq!(s, 201, "{body}");
    assert!(location.is_some_and(|l| l.starts_with("/repository/debs/pool/contrib/j/jq/")), "{body}");
    let (s, bytes) = get(&server, "/repository/debs/pool/main/h/hello/hello_2.10-3_amd64.deb")?;
    assert_eq!((s, bytes == hello), (200, true));

    // The real apt-get sees both, each in its component.
    let key = get(&server, "/repository/debs/gpg.key")?.1;
    let root = common::apt::scratch(&key, |k| {
        format!("deb [signed-by={} arch=amd64] {}/repository/debs bookworm main contrib", k.display(), server.public)
    })?;
    update_ok(root.path())?;
    assert_eq!(download(root.path(), "hello")?, hello);
    assert_eq!(download(root.path(), "jq")?, jq);
    let (_, packages) = get(&server, "/repository/debs/dists/bookworm/contrib/binary-amd64/Packages")?;
    assert!(String::from_utf8_lossy(&packages).contains("Package: jq"), "jq in contrib");
    assert!(server.terminate()?.success());
    Ok(())
}

/// A `multipart/form-data` POST of `(field, file name, bytes)` parts (no file name: a plain
/// field).
fn form(
    server: &Server,
    repo: &str,
    parts: &[(&str, Option<&str>, &[u8])],
    query: &str,
) -> anyhow::Result<(u16, String)> {
    let boundary = "packyard-test-boundary-5e2a";
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        let file = file.map(|f| format!("; filename=\"{f}\"")).unwrap_or_default();
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n").as_bytes(),
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

fn delete_path(server: &Server, path: &str) -> anyhow::Result<(u16, String)> {
    status_of(ureq::delete(&format!("{}{path}", server.public)).set("Authorization", &basic(PW)).call())
}

/// `apt-get download` of `name` fails: the configured distribution does not list it.
fn not_listed(root: &Path, name: &str) -> anyhow::Result<()> {
    let out = apt_get(root, &["download", name])?;
    anyhow::ensure!(!out.status.success(), "{name} is still listed: {}", String::from_utf8_lossy(&out.stdout));
    Ok(())
}

/// Several distributions in one hosted repository (#21, item 1): each its own signed
/// `InRelease`; an upload names its distribution (`?distribution=`, the form field
/// `apt.distribution`, Artifactory's `deb.distribution`) or goes to the default; a package in
/// two distributions is stored once; a delete takes it out of one distribution or of all; the
/// real apt-get sees each distribution's own packages.
fn several_distributions(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let Some(debs) = real_debs() else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let find = |prefix: &str| -> anyhow::Result<Vec<u8>> {
        let p = debs
            .iter()
            .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with(prefix)))
            .ok_or_else(|| anyhow::anyhow!("no {prefix} package in TEST_DEBS_DIR"))?;
        Ok(std::fs::read(p)?)
    };
    let (hello, jq, sl) = (find("hello_")?, find("jq_")?, find("sl_")?);
    let Some((server, dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else { return Ok(()) };
    create_repo(
        &server,
        serde_json::json!({"name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distributions": ["bookworm", "trixie"], "components": ["main", "contrib"], "architectures": ["amd64"]}}),
    )?;
    let def = common::process::admin_json(&server.public, &basic(PW), "GET", "/api/v1/repositories/debs", None)?;
    assert_eq!(def["apt"]["distribution"], "bookworm", "the first is the default: {def}");
    for dist in ["bookworm", "trixie"] {
        wait_for(&server, &format!("/repository/debs/dists/{dist}/InRelease"), &[&format!("Suite: {dist}\n")])?;
    }
    let catalogue = || common::process::catalogue(&server.public, &basic(PW), "debs");

    // A distribution the repository does not publish: refused, nothing kept.
    let blobs = || count_files(&dir.path().join("data/blobs/sha256"));
    let before = blobs();
    let (s, body) = upload(&server, "debs", &hello, "?distribution=sid")?;
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("distribution \"sid\" is not a distribution of repository debs; it publishes bookworm, trixie"),
        "{body}"
    );
    let (s, body) =
        form(&server, "debs", &[("apt.distribution", None, b"sid"), ("apt.asset", Some("hello.deb"), &hello)], "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("distribution \"sid\""), "{body}");
    assert!(catalogue()?.is_empty());

    // The default, the form field, Artifactory's matrix parameter.
    let (s, body) = upload(&server, "debs", &hello, "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body)?["distribution"], "bookworm");
    let (s, body) = form(
        &server,
        "debs",
        &[("apt.asset", Some("jq.deb"), &jq), ("apt.distribution", None, b"trixie")],
        "?wait=true",
    )?;
    assert_eq!(s, 201, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body)?["distribution"], "trixie");
    let (s, body) = status_of(
        ureq::put(&format!(
            "{}/repository/debs/pool/s/sl.deb;deb.distribution=trixie;deb.component=contrib?wait=true",
            server.public
        ))
        .set("Authorization", &basic(PW))
        .send_bytes(&sl),
    )?;
    assert_eq!(s, 201, "{body}");

    // The same package into a second distribution: a membership, not a second copy.
    let stored = blobs();
    assert!(stored > before, "the uploads stored their bytes");
    let (s, body) = upload(&server, "debs", &hello, "?distribution=trixie&wait=true")?;
    assert_eq!(s, 201, "a new membership is a change: {body}");
    let (s, body) = upload(&server, "debs", &hello, "?distribution=trixie&wait=true")?;
    assert_eq!(s, 200, "an identical retry: {body}");
    assert_eq!(catalogue()?.len(), 3, "{:?}", catalogue()?);

    // Each distribution's own index and signature.
    let packages = |dist: &str, component: &str| -> anyhow::Result<String> {
        let (s, b) = get(&server, &format!("/repository/debs/dists/{dist}/{component}/binary-amd64/Packages"))?;
        anyhow::ensure!(s == 200, "{dist} {component}: {s}");
        Ok(String::from_utf8(b)?)
    };
    let names = |text: &str| -> Vec<String> {
        text.lines().filter_map(|l| l.strip_prefix("Package: ")).map(str::to_string).collect()
    };
    assert_eq!(names(&packages("bookworm", "main")?), ["hello"]);
    assert_eq!(names(&packages("trixie", "main")?), ["hello", "jq"]);
    assert_eq!(names(&packages("trixie", "contrib")?), ["sl"]);
    assert!(packages("bookworm", "main")?.contains("Filename: pool/main/h/hello/hello_2.10-3_amd64.deb\n"));
    assert!(blobs() >= stored, "no blob removed");

    let key = get(&server, "/repository/debs/gpg.key")?.1;
    let apt_for = |dist: &str| {
        common::apt::scratch(&key, |k| {
            format!("deb [signed-by={} arch=amd64] {}/repository/debs {dist} main contrib", k.display(), server.public)
        })
    };
    let (bookworm, trixie) = (apt_for("bookworm")?, apt_for("trixie")?);
    update_ok(bookworm.path())?;
    update_ok(trixie.path())?;
    assert_eq!(download(bookworm.path(), "hello")?, hello);
    not_listed(bookworm.path(), "jq")?;
    assert_eq!(download(trixie.path(), "hello")?, hello);
    assert_eq!(download(trixie.path(), "jq")?, jq);
    assert_eq!(download(trixie.path(), "sl")?, sl);

    // Out of one distribution: the other keeps it, and its file.
    let hello_path = "/repository/debs/pool/main/h/hello/hello_2.10-3_amd64.deb";
    let (s, body) = delete_path(&server, &format!("{hello_path}?distribution=sid"))?;
    assert_eq!(s, 400, "{body}");
    assert_eq!(delete_path(&server, &format!("{hello_path}?distribution=bookworm"))?.0, 204);
    assert_eq!(delete_path(&server, &format!("{hello_path}?distribution=bookworm"))?.0, 404, "not in it any more");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !names(&packages("bookworm", "main")?).is_empty() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "bookworm still lists hello");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(names(&packages("trixie", "main")?), ["hello", "jq"]);
    assert_eq!(get(&server, hello_path)?, (200, hello.clone()));
    update_ok(bookworm.path())?;
    not_listed(bookworm.path(), "hello")?;
    assert!(catalogue()?.contains("hello 2.10-3"), "still stored");
    // Out of every distribution: gone.
    assert_eq!(delete_path(&server, hello_path)?.0, 204);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while names(&packages("trixie", "main")?) != ["jq"] {
        anyhow::ensure!(std::time::Instant::now() < deadline, "trixie still lists hello");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(&server, hello_path)?.0, 404);
    assert!(!catalogue()?.contains("hello 2.10-3"));

    // A distribution taken out of the list is no longer served; renaming the only distribution
    // takes its packages along.
    let patch = |body: serde_json::Value| {
        status_of(
            ureq::request("PATCH", &format!("{}/api/v1/repositories/debs", server.public))
                .set("Authorization", &basic(PW))
                .set("Content-Type", "application/merge-patch+json")
                .send_json(body),
        )
    };
    let (s, body) = patch(serde_json::json!({"apt": {"distributions": ["trixie"]}}))?;
    assert_eq!(s, 400, "the default must be listed: {body}");
    assert!(body.contains("must be one of apt.distributions: trixie"), "{body}");
    let (s, body) = patch(serde_json::json!({"apt": {"distribution": "trixie", "distributions": ["trixie"]}}))?;
    assert_eq!(s, 200, "{body}");
    assert_eq!(get(&server, "/repository/debs/dists/bookworm/InRelease")?.0, 404);
    let (s, body) = patch(serde_json::json!({"apt": {"distribution": "stable", "distributions": null}}))?;
    assert_eq!(s, 200, "{body}");
    wait_for(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages", &["Package: jq\n"])?;
    wait_for(&server, "/repository/debs/dists/stable/contrib/binary-amd64/Packages", &["Package: sl\n"])?;
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn several_distributions_on_sqlite() -> anyhow::Result<()> {
    several_distributions(packyard_store::db::Backend::Sqlite)
}

#[test]
fn several_distributions_on_postgres() -> anyhow::Result<()> {
    several_distributions(packyard_store::db::Backend::Postgres)
}

/// Named files: `(file name, bytes)`.
type Files = Vec<(String, Vec<u8>)>;

/// The real source package in TEST_SRCS_DIR, its `.dsc` first.
fn real_source() -> anyhow::Result<Option<Files>> {
    let Ok(dir) = std::env::var("TEST_SRCS_DIR") else { return Ok(None) };
    let mut files: Files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        let name = p.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
        if name.starts_with("hello_") {
            files.push((name, std::fs::read(&p)?));
        }
    }
    files.sort_by_key(|(n, _)| !n.ends_with(".dsc"));
    anyhow::ensure!(files.first().is_some_and(|(n, _)| n.ends_with(".dsc")), "no hello_*.dsc in TEST_SRCS_DIR");
    Ok(Some(files))
}

/// The parts of a form that uploads a source package: each file an `apt.asset` field.
fn source_parts(files: &[(String, Vec<u8>)]) -> Vec<(&'static str, Option<&str>, &[u8])> {
    files.iter().map(|(n, b)| ("apt.asset", Some(n.as_str()), b.as_slice())).collect()
}

/// `apt-get source` of `what` in a scratch configuration: the files it downloaded and the
/// directory dpkg-source unpacked.
fn apt_get_source(root: &Path, what: &str) -> anyhow::Result<()> {
    let out = apt_get(root, &["source", what])?;
    anyhow::ensure!(
        out.status.success(),
        "apt-get source {what}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Source packages (#21, item 2): a `.dsc` uploaded with the files it lists, each checked
/// against the `.dsc` (a missing, different, unlisted or broken file is a 400 naming it, and
/// nothing is kept); published as `Sources` per component and listed in `Release`; the real
/// `apt-get source` downloads and unpacks it from the hosted repository and through a group; a
/// second Debian revision reuses the `.orig` tarball already in the pool.
fn source_packages(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use packyard_codecs::apt::testing::{dsc_for, quilt_source_package, source_package};
    let Some(hello) = real_source()? else {
        eprintln!("skipped: TEST_SRCS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    anyhow::ensure!(Command::new("dpkg-source").arg("--version").output().is_ok(), "dpkg-source is not installed");
    let Some((server, dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else { return Ok(()) };
    create_repo(
        &server,
        serde_json::json!({"name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "bookworm", "components": ["main"], "architectures": ["amd64"]}}),
    )?;
    create_repo(
        &server,
        serde_json::json!({"name": "debs-all", "format": "apt", "type": "group", "group": {"members": ["debs"]},
            "apt": {"distributions": ["bookworm"], "components": ["main"], "architectures": ["amd64"]}}),
    )?;
    // Both empty snapshots published first, and the group's merge of the member's (which may
    // follow its own first one): their files are not left over by a refusal.
    for repo in ["debs", "debs-all"] {
        wait_for(&server, &format!("/repository/{repo}/dists/bookworm/InRelease"), &["main/source/Sources.xz"])?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let (s, body) = status_of(
                ureq::get(&format!("{}/api/v1/repositories/{repo}/status", server.public))
                    .set("Authorization", &basic(PW))
                    .call(),
            )?;
            anyhow::ensure!(s == 200, "{repo} status: {s} {body}");
            let v: serde_json::Value = serde_json::from_str(&body)?;
            let units = v["units"].as_array().cloned().unwrap_or_default();
            if units.iter().all(|u| u["pending"] == false && u["leased_by"].is_null()) {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{repo} never settled: {body}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let catalogue = || common::process::catalogue(&server.public, &basic(PW), "debs");
    let blobs = || count_files(&dir.path().join("data/blobs/sha256"));
    let before = blobs();

    // Each refusal names what is wrong, and keeps nothing.
    let dsc = &hello[0];
    let (s, body) = upload(&server, "debs", &dsc.1, "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("hello_2.10.orig.tar.gz is listed in hello_2.10-3.dsc but was not sent"), "{body}");
    let mut tampered = hello.clone();
    let debian = tampered
        .iter_mut()
        .find(|(n, _)| n.ends_with(".debian.tar.xz"))
        .ok_or_else(|| anyhow::anyhow!("no debian tarball"))?;
    debian.1[100] ^= 0xff;
    let (s, body) = form(&server, "debs", &source_parts(&tampered), "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("hello_2.10-3.debian.tar.xz differs from hello_2.10-3.dsc"), "{body}");
    let mut extra = hello.clone();
    extra.push(("notes.txt".into(), b"not listed".to_vec()));
    let (s, body) = form(&server, "debs", &source_parts(&extra), "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("notes.txt was sent but hello_2.10-3.dsc does not list it"), "{body}");
    let mut two = hello.clone();
    two.push(("other.dsc".into(), dsc.1.clone()));
    let (s, body) = form(&server, "debs", &source_parts(&two), "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("2 of them a .dsc"), "{body}");
    // A tarball cut short, listed with the checksums of what is left: read whole, refused.
    let mut cut = source_package("cutshort", "1.0", &[("data", &[7u8; 40_000])]);
    let half = cut[1].1.len() / 2;
    cut[1].1.truncate(half);
    cut[0].1 = dsc_for("cutshort", "1.0", "3.0 (native)", &cut[1..]).into_bytes();
    let (s, body) = form(&server, "debs", &source_parts(&cut), "")?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("cutshort_1.0.tar.xz"), "{body}");
    assert!(catalogue()?.is_empty(), "{:?}", catalogue()?);
    assert_eq!(blobs(), before, "every refused upload's bytes were removed");

    // The real source package.
    let (s, body) = form(&server, "debs", &source_parts(&hello), "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let receipt: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(receipt["dsc"], "pool/main/h/hello/hello_2.10-3.dsc", "{receipt}");
    assert_eq!(receipt["files"].as_array().map(Vec::len), Some(4), "{receipt}");
    let (s, body) = form(&server, "debs", &source_parts(&hello), "")?;
    assert_eq!(s, 200, "an identical retry: {body}");
    assert!(catalogue()?.contains("hello 2.10-3"));
    let sources = String::from_utf8(get(&server, "/repository/debs/dists/bookworm/main/source/Sources")?.1)?;
    let dsc_sha = hex::encode(Sha256::digest(&dsc.1));
    for needle in [
        "Package: hello\n".to_string(),
        "Version: 2.10-3\n".into(),
        "Directory: pool/main/h/hello\n".into(),
        format!(" {dsc_sha} {} hello_2.10-3.dsc\n", dsc.1.len()),
        " 31e066137a962676e89f69d1b65382de95a7ef7d914b8cb956f41ea72e0f516b 725946 hello_2.10.orig.tar.gz\n".into(),
    ] {
        assert!(sources.contains(&needle), "Sources lacks {needle:?}:\n{sources}");
    }
    assert!(!sources.contains("Source: hello"), "Source is written Package:\n{sources}");
    for (name, bytes) in &hello {
        assert_eq!(
            get(&server, &format!("/repository/debs/pool/main/h/hello/{name}"))?,
            (200, bytes.clone()),
            "{name}"
        );
    }

    // apt-get source, from the repository and through the group.
    for repo in ["debs", "debs-all"] {
        wait_for(&server, &format!("/repository/{repo}/dists/bookworm/main/source/Sources"), &["Package: hello\n"])?;
        let key = get(&server, &format!("/repository/{repo}/gpg.key"))?.1;
        let root = common::apt::scratch(&key, |k| {
            format!("deb-src [signed-by={}] {}/repository/{repo} bookworm main", k.display(), server.public)
        })?;
        update_ok(root.path())?;
        apt_get_source(root.path(), "hello")?;
        let got = root.path().join("downloads");
        for (name, bytes) in &hello {
            assert_eq!(std::fs::read(got.join(name))?, *bytes, "{repo}: {name}");
        }
        assert!(got.join("hello-2.10/debian/changelog").is_file(), "{repo}: dpkg-source unpacked it");
    }

    // Debian revision 2 reuses revision 1's .orig from the pool.
    let first = quilt_source_package("quilted", "1.0", "1");
    let second = quilt_source_package("quilted", "1.0", "2");
    assert_eq!(first[1], second[1], "the same .orig");
    let (s, body) = form(&server, "debs", &source_parts(&first), "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let without_orig = [second[0].clone(), second[2].clone()];
    let (s, body) = form(&server, "debs", &source_parts(&without_orig), "?wait=true")?;
    assert_eq!(s, 201, "{body}");
    let key = get(&server, "/repository/debs/gpg.key")?.1;
    let root = common::apt::scratch(&key, |k| {
        format!("deb-src [signed-by={}] {}/repository/debs bookworm main", k.display(), server.public)
    })?;
    update_ok(root.path())?;
    apt_get_source(root.path(), "quilted=1.0-2")?;
    assert!(root.path().join("downloads/quilted-1.0/README").is_file(), "the .orig unpacked");
    assert!(root.path().join("downloads/quilted-1.0/debian/changelog").is_file());

    // Deleted by its .dsc: gone from Sources; the .orig stays while revision 1 lists it.
    assert_eq!(delete_path(&server, "/repository/debs/pool/main/q/quilted/quilted_1.0-2.dsc")?.0, 204);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = String::from_utf8(get(&server, "/repository/debs/dists/bookworm/main/source/Sources")?.1)?;
        if !text.contains("Version: 1.0-2\n") {
            assert!(text.contains("Version: 1.0-1\n"), "{text}");
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "1.0-2 still listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        get(&server, "/repository/debs/pool/main/q/quilted/quilted_1.0.orig.tar.xz")?,
        (200, first[1].1.clone())
    );
    assert_eq!(get(&server, "/repository/debs/pool/main/q/quilted/quilted_1.0-2.debian.tar.xz")?.0, 404);
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn source_packages_on_sqlite() -> anyhow::Result<()> {
    source_packages(packyard_store::db::Backend::Sqlite)
}

#[test]
fn source_packages_on_postgres() -> anyhow::Result<()> {
    source_packages(packyard_store::db::Backend::Postgres)
}
