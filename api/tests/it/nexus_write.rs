//! Nexus's write API as the scripts that call it: Sonatype's documented raw APT upload with a
//! multipart content type, `POST /service/rest/v1/components` forms for APT, APK and Go (sent by
//! the real curl, read back by the real apt-get and go), and the read-only freeze: writes 503
//! with a message on every replica, reads going on, until released.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::process::{admin_json, basic, get_bytes, status_of, Server};
use packyard_store::db::Backend;
use sha2::{Digest, Sha256};

const PW: &str = "nexus-writer";

fn create(server: &Server, body: serde_json::Value) -> anyhow::Result<()> {
    admin_json(&server.public, &basic(PW), "POST", "/api/v1/repositories", Some(body)).map(|_| ())
}

/// The real curl with `args` and `url`: (status, body).
fn curl(args: &[&str], url: &str) -> anyhow::Result<(u16, String)> {
    let out = Command::new("curl").args(["-sS", "-o", "-", "-w", "\n%{http_code}"]).args(args).arg(url).output()?;
    anyhow::ensure!(out.status.success(), "curl {args:?} {url}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Ok((code.trim().parse()?, body.to_string()))
}

/// A `curl -F` upload to Nexus's components API.
fn components(server: &Server, repository: &str, fields: &[String]) -> anyhow::Result<(u16, String)> {
    let mut args = vec!["-u".to_string(), format!("admin:{PW}")];
    for f in fields {
        args.extend(["-F".to_string(), f.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    curl(&args, &format!("{}/service/rest/v1/components?repository={repository}", server.public))
}

fn blob_files(dir: &Path) -> usize {
    crate::apt::count_files(&dir.join("data/blobs/sha256"))
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn deb(name: &str) -> Vec<u8> {
    let control = format!(
        "Package: {name}\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: uploaded as Nexus scripts do\n"
    );
    packyard_codecs::apt::testing::deb(&control, ".xz")
}

#[test]
fn nexus_uploads_with_the_real_clients() -> anyhow::Result<()> {
    for tool in ["curl", "apt-get", "go"] {
        anyhow::ensure!(
            Command::new(tool).arg("--version").output().is_ok() || tool == "go",
            "{tool} is not installed"
        );
    }
    let have_go = Command::new("go").arg("version").output().is_ok();
    let Some((server, dir)) =
        common::process::server_on(Backend::Sqlite, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?
    else {
        return Ok(());
    };
    let files = tempfile::tempdir()?;
    create(
        &server,
        serde_json::json!({"name": "debs", "format": "apt", "type": "hosted",
        "apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64"]}}),
    )?;
    create(&server, serde_json::json!({"name": "alpine", "format": "apk", "type": "hosted"}))?;
    create(&server, serde_json::json!({"name": "gomods", "format": "go", "type": "hosted"}))?;
    create(&server, serde_json::json!({"name": "conans", "format": "conan", "type": "hosted"}))?;

    // Sonatype's documented APT upload: the raw package under a multipart type, no boundary.
    let raw = deb("sonatype-raw");
    std::fs::write(files.path().join("raw.deb"), &raw)?;
    let raw_file = format!("@{}", files.path().join("raw.deb").display());
    let (s, body) = curl(
        &["-u", &format!("admin:{PW}"), "-H", "Content-Type: multipart/form-data", "--data-binary", &raw_file],
        &format!("{}/repository/debs/", server.public),
    )?;
    assert_eq!(s, 201, "{body}");
    assert!(body.contains("\"package\":\"sonatype-raw\""), "{body}");

    // The components API: Nexus's `apt.asset` field, as `curl -F` sends it.
    let form = deb("nexus-form");
    std::fs::write(files.path().join("form.deb"), &form)?;
    let (s, body) = components(&server, "debs", &[format!("apt.asset=@{}", files.path().join("form.deb").display())])?;
    assert_eq!((s, body.as_str()), (204, ""), "Nexus answers an upload with 204 and no body");

    // Published (so that what the publication stores is not counted below).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, packages) = get_bytes(&server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        let text = String::from_utf8_lossy(&packages);
        if text.contains("Package: sonatype-raw\n") && text.contains("Package: nexus-form\n") {
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "not published: {text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // Refusals, each with a message, nothing kept.
    let blobs = blob_files(dir.path());
    std::fs::write(files.path().join("cut.deb"), &form[..form.len() / 2])?;
    let cut = format!("apt.asset=@{}", files.path().join("cut.deb").display());
    for (repository, fields, status, needle) in [
        ("debs", vec![cut.clone()], 400, "truncated"),
        ("debs", vec!["note=hello".to_string()], 400, "no field named \"apt.asset\""),
        ("", vec![cut.clone()], 422, "Parameter 'repository' is required"),
        ("nothere", vec![cut.clone()], 404, "repository nothere not found"),
        (
            "conans",
            vec![cut.clone()],
            400,
            "takes no components upload: a Conan recipe or package is uploaded with `conan upload`",
        ),
    ] {
        let (s, body) = components(&server, repository, &fields)?;
        assert_eq!(s, status, "{repository} {fields:?}: {body}");
        assert!(body.contains(needle), "{repository} {fields:?}: {body:?} lacks {needle:?}");
    }
    let (s, body) = curl(
        &["-F", &format!("apt.asset=@{}", files.path().join("form.deb").display())],
        &format!("{}/service/rest/v1/components?repository=debs", server.public),
    )?;
    assert_eq!(s, 401, "anonymous: {body}");
    assert_eq!(blob_files(dir.path()), blobs, "a refused upload leaves no blob");

    // The real apt-get installs both as uploaded.
    let (s, key) = get_bytes(&server, "/repository/debs/gpg.key")?;
    assert_eq!(s, 200);
    let root = crate::apt::apt_root(&key, &format!("{}/repository/debs", server.public))?;
    crate::apt::update_ok(root.path())?;
    assert_eq!(sha256(&crate::apt::download(root.path(), "sonatype-raw")?), sha256(&raw));
    assert_eq!(sha256(&crate::apt::download(root.path(), "nexus-form")?), sha256(&form));

    // APK: `apk.asset` with the branch and repository it goes to; the architecture is the
    // package's, or `apk.architecture` for a noarch one.
    use packyard_codecs::apk::testing::{build_apk, Fixture};
    let hello = build_apk(&Fixture::new("hello", "2.12-r1", "x86_64"))?.bytes;
    let doc = build_apk(&Fixture::new("hello-doc", "2.12-r1", "noarch"))?.bytes;
    std::fs::write(files.path().join("hello.apk"), &hello)?;
    std::fs::write(files.path().join("doc.apk"), &doc)?;
    let hello_field = format!("apk.asset=@{}", files.path().join("hello.apk").display());
    let doc_field = format!("apk.asset=@{}", files.path().join("doc.apk").display());
    let blobs = blob_files(dir.path());
    for (fields, needle) in [
        (vec![hello_field.clone()], "the form names no apk.branch"),
        (
            vec!["apk.branch=v3.20".into(), "apk.repository=main".into(), doc_field.clone()],
            "hello-doc-2.12-r1.apk is a noarch package",
        ),
        (
            vec![
                "apk.branch=v3.20".into(),
                "apk.repository=main".into(),
                "apk.architecture=s390x".into(),
                hello_field.clone(),
            ],
            "architecture \"s390x\" is not configured",
        ),
    ] {
        let (s, body) = components(&server, "alpine", &fields)?;
        assert_eq!(s, 400, "{fields:?}: {body}");
        assert!(body.contains(needle), "{fields:?}: {body:?} lacks {needle:?}");
    }
    assert_eq!(blob_files(dir.path()), blobs, "a refused APK upload leaves no blob");
    let (s, body) = components(
        &server,
        "alpine",
        &[
            "apk.branch=v3.20".into(),
            "apk.repository=main".into(),
            hello_field,
            "apk.architecture=aarch64".into(),
            doc_field,
        ],
    )?;
    assert_eq!(s, 204, "{body}");
    for (path, bytes) in [("x86_64/hello-2.12-r1.apk", &hello), ("aarch64/hello-doc-2.12-r1.apk", &doc)] {
        let (s, got) = get_bytes(&server, &format!("/repository/alpine/v3.20/main/{path}"))?;
        assert_eq!((s, sha256(&got)), (200, sha256(bytes)), "{path}");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for (arch, name) in [("x86_64", "hello"), ("aarch64", "hello-doc")] {
        loop {
            let (s, index) = get_bytes(&server, &format!("/repository/alpine/v3.20/main/{arch}/APKINDEX.tar.gz"))?;
            if s == 200 && crate::apk::index_text(&index)?.contains(&format!("P:{name}\nV:2.12-r1\n")) {
                break;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{name} is not in the {arch} index");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    // Go: `go.asset`, the module and version read from the zip (or checked against the fields).
    let m = "example.com/formmod";
    let zip = packyard_codecs::go::testing::simple_module(m, "v1.0.0", "from a form", 0)?;
    std::fs::write(files.path().join("mod.zip"), &zip)?;
    let zip_field = format!("go.asset=@{}", files.path().join("mod.zip").display());
    let (s, body) = components(&server, "gomods", &["go.version=v1.0.1".into(), zip_field.clone()])?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("the URL names version v1.0.1 but the zip holds example.com/formmod@v1.0.0"), "{body}");
    let (s, body) = components(&server, "gomods", &[zip_field])?;
    assert_eq!(s, 204, "{body}");
    let (s, list) = get_bytes(&server, &format!("/repository/gomods/{m}/@v/list"))?;
    assert_eq!((s, String::from_utf8_lossy(&list).as_ref()), (200, "v1.0.0\n"), "listed when the upload is answered");
    // Every asset gets its SHA-1 and MD5 beside the SHA-256 (the worker computes those the
    // format does not give), and is found by them.
    let auth = basic(PW);
    for (repository, bytes) in [("gomods", &zip), ("alpine", &hello), ("debs", &form)] {
        let (sha1, md5) = (hex::encode(sha1::Sha1::digest(bytes)), common::md5_hex(bytes));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let found = loop {
            let found = common::process::nexus(&server.public, &auth, &format!("search/assets?sha1={sha1}"))?;
            if found["items"].as_array().is_some_and(|a| a.len() == 1) {
                break found;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "no asset of {repository} by its SHA-1: {found}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let asset = &found["items"][0];
        assert_eq!(asset["repository"], repository, "{asset}");
        assert_eq!(
            asset["checksum"],
            serde_json::json!({"sha1": sha1, "sha256": sha256(bytes), "md5": md5}),
            "{asset}"
        );
        let by_md5 = common::process::nexus(&server.public, &auth, &format!("search/assets?md5={md5}"))?;
        assert_eq!(by_md5["items"][0]["checksum"]["sha1"], sha1.as_str(), "{by_md5}");
    }
    if have_go {
        let (work, home) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let proxy = format!("{}/repository/gomods", server.public);
        let out = common::golang::command(
            work.path(),
            home.path(),
            &proxy,
            &["mod", "download", "-json", &format!("{m}@v1.0.0")],
        )
        .output()?;
        assert!(out.status.success(), "go mod download: {}", String::from_utf8_lossy(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let cached = std::fs::read(info["Zip"].as_str().unwrap_or_default())?;
        assert_eq!(sha256(&cached), sha256(&zip), "go downloads the uploaded zip");
    }
    Ok(())
}

/// A write's answer while frozen: 503 with the message naming who froze it and why.
fn assert_frozen(what: &str, (s, body): (u16, String)) {
    assert_eq!(s, 503, "{what}: {body}");
    assert!(body.contains("Packyard is read-only (frozen by admin at "), "{what}: {body}");
    assert!(body.contains(": backup window)"), "{what}: {body}");
}

fn read_only_freeze(backend: Backend) -> anyhow::Result<()> {
    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
    // The replicas share the blob store (as they share S3 in a cluster).
    let blobs = dir.path().join("shared-blobs").display().to_string();
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_BLOBS__PATH", blobs.as_str())];
    let one = common::process::start_on(dir.path(), url.as_deref(), &env)?;
    // A second replica on the same database (SQLite: one process).
    let other_dir = tempfile::tempdir()?;
    let two = match &url {
        Some(u) => Some(common::process::start_on(other_dir.path(), Some(u), &env)?),
        None => None,
    };
    create(&one, serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))?;
    let auth = basic(PW);
    let upload = |server: &Server, name: &str| {
        status_of(
            ureq::post(&format!("{}/repository/debs/?wait=true", server.public))
                .set("Authorization", &auth)
                .send_bytes(&deb(name)),
        )
    };
    assert_eq!(upload(&one, "before")?.0, 201);
    let nexus = |server: &Server, method: &str, path: &str| {
        status_of(
            ureq::request(method, &format!("{}/service/rest/v1/{path}", server.public))
                .set("Authorization", &auth)
                .call(),
        )
    };
    let state = |server: &Server| -> anyhow::Result<serde_json::Value> {
        let (s, body) = nexus(server, "GET", "read-only")?;
        anyhow::ensure!(s == 200, "{s} {body}");
        Ok(serde_json::from_str(&body)?)
    };
    assert_eq!(state(&one)?, serde_json::json!({"systemInitiated": false, "summaryReason": "", "frozen": false}));
    assert_eq!(nexus(&one, "POST", "read-only/release")?.0, 404, "releasing what is not frozen changes nothing");
    let (s, body) = status_of(ureq::post(&format!("{}/service/rest/v1/read-only/freeze", one.public)).call())?;
    assert_eq!(s, 401, "anonymous may not freeze: {body}");

    let (s, body) = nexus(&one, "POST", "read-only/freeze?reason=backup%20window")?;
    assert_eq!((s, body.as_str()), (204, ""));
    let (s, body) = nexus(&one, "POST", "read-only/freeze")?;
    assert_eq!(s, 404, "already frozen: {body}");
    assert!(body.contains("No change to read-only state"), "{body}");
    let frozen = state(&one)?;
    assert_eq!(frozen["frozen"], true);
    let summary = frozen["summaryReason"].as_str().unwrap_or_default();
    assert!(summary.starts_with("Activated by admin at ") && summary.ends_with(": backup window"), "{summary}");

    // Every replica refuses writes — within its watermark check — and serves reads.
    let replicas: Vec<&Server> = std::iter::once(&one).chain(two.as_ref()).collect();
    // (A probe that stores nothing either way: deleting a repository that does not exist.)
    let probe = |server: &Server| {
        status_of(
            ureq::delete(&format!("{}/api/v1/repositories/nothere", server.public)).set("Authorization", &auth).call(),
        )
    };
    assert_eq!(probe(&one)?.0, 503, "the replica that froze refuses at once");
    for server in &replicas {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while probe(server)?.0 != 503 {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "{} still writable 5 s after the freeze",
                server.public
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_frozen("an upload", upload(server, "during")?);
        assert_frozen(
            "creating a repository",
            status_of(
                ureq::post(&format!("{}/api/v1/repositories", server.public))
                    .set("Authorization", &auth)
                    .send_json(serde_json::json!({"name": "more", "format": "go", "type": "hosted"})),
            )?,
        );
        assert_frozen(
            "a delete",
            status_of(
                ureq::delete(&format!("{}/repository/debs/pool/main/b/before/before_1.0-1_amd64.deb", server.public))
                    .set("Authorization", &auth)
                    .call(),
            )?,
        );
        let (s, body) = get_bytes(server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        assert_eq!(s, 200, "reads go on");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("Package: before\n") && !text.contains("Package: during\n"), "{text}");
        assert_eq!(nexus(server, "GET", "search?repository=debs")?.0, 200, "searches go on");
    }

    let (s, body) = nexus(&one, "POST", "read-only/release")?;
    assert_eq!((s, body.as_str()), (204, ""));
    assert_eq!(probe(&one)?.0, 404, "the replica that released writes at once");
    for server in &replicas {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while probe(server)?.0 == 503 {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "{} still frozen 5 s after the release",
                server.public
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let (s, body) = upload(server, "after")?;
        assert!(matches!(s, 200 | 201), "released: {s} {body}");
    }
    assert_eq!(state(&one)?["frozen"], false);
    let audit = admin_json(&one.public, &auth, "GET", "/api/v1/audit?action=read_only.freeze", None)?;
    assert!(audit.to_string().contains("backup window"), "the freeze is audited: {audit}");
    Ok(())
}

#[test]
fn read_only_freeze_on_sqlite() -> anyhow::Result<()> {
    read_only_freeze(Backend::Sqlite)
}

#[test]
fn read_only_freeze_on_postgres() -> anyhow::Result<()> {
    read_only_freeze(Backend::Postgres)
}

#[test]
fn read_only_freeze_on_mysql() -> anyhow::Result<()> {
    read_only_freeze(Backend::MySql)
}
