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
    // Every repository made through Nexus's management API, in its shapes.
    let auth = basic(PW);
    for (path, body) in [
        (
            "apt/hosted",
            nexus_body(
                "debs",
                serde_json::json!({"apt": {"distribution": "stable"}, "aptSigning": {"keypair": null, "passphrase": null}}),
            ),
        ),
        ("apk/hosted", nexus_body("alpine", serde_json::json!({}))),
        ("go/hosted", nexus_body("gomods", serde_json::json!({}))),
        ("go/group", nexus_body("go", serde_json::json!({"group": {"memberNames": ["gomods"]}}))),
        ("conan/hosted", nexus_body("conans", serde_json::json!({}))),
    ] {
        let (s, body) = status_of(
            ureq::post(&format!("{}/service/rest/v1/repositories/{path}", server.public))
                .set("Authorization", &auth)
                .send_json(body),
        )?;
        assert_eq!((s, body.as_str()), (201, ""), "{path}");
    }

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

    // Nexus's HTML listing: folders, then files linking to where clients download them.
    let browse = |path: &str| get_bytes(&server, &format!("/service/rest/repository/browse/debs/{path}"));
    let (s, page) = browse("")?;
    let page = String::from_utf8_lossy(&page).into_owned();
    assert_eq!(s, 200, "{page}");
    assert!(
        page.contains("<title>Index of /</title>")
            && page.contains("<a href=\"./dists/\">dists</a>")
            && page.contains("<a href=\"./pool/\">pool</a>"),
        "{page}"
    );
    let (s, page) = browse("pool/main/n/nexus-form/")?;
    let page = String::from_utf8_lossy(&page).into_owned();
    assert_eq!(s, 200, "{page}");
    let link = format!("{}/repository/debs/pool/main/n/nexus-form/nexus-form_1.0-1_amd64.deb", server.public);
    assert!(page.contains(&format!("<a href=\"{link}\">nexus-form_1.0-1_amd64.deb</a>")), "{page}");
    assert!(page.contains(&format!("<td align=\"right\">{}</td>", form.len())), "{page}");
    assert!(page.contains("<a href=\"../\">Parent Directory</a>"), "{page}");
    let (s, linked) = common::process::get_url(&link)?;
    assert_eq!((s, sha256(&linked)), (200, sha256(&form)), "the listing's link downloads the package");
    assert_eq!(browse("pool/nothere/")?.0, 404);
    let (s, _) = curl(&["-o", "/dev/null"], &format!("{}/service/rest/repository/browse/debs", server.public))?;
    assert_eq!(s, 301, "without the trailing slash: to the folder's page");

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
        // Through the group made by Nexus's API.
        let proxy = format!("{}/repository/go", server.public);
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
        // The Nexus API's delete, and a form of the web UI (signing in goes on).
        let found = common::process::nexus(&server.public, &auth, "search?repository=debs&name=before")?;
        let id = found["items"][0]["id"].as_str().unwrap_or_default().to_string();
        assert_frozen("a Nexus delete", nexus(server, "DELETE", &format!("components/{id}"))?);
        let (cookies, csrf) = crate::ui::http_sign_in(&server.public, "admin", PW)?;
        let form = [("csrf", csrf.as_str()), ("name", "more"), ("format", "go"), ("type", "hosted")];
        let (s, body) = crate::ui::post_form(&server.public, "/admin/repositories", &cookies, &form)?;
        assert_eq!(s, 503, "a UI form: {body}");
        assert!(body.contains("Packyard is read-only"), "{body}");
        let (s, body) = get_bytes(server, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        assert_eq!(s, 200, "reads go on");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("Package: before\n") && !text.contains("Package: during\n"), "{text}");
        assert_eq!(nexus(server, "GET", "search?repository=debs")?.0, 200, "searches go on");
    }

    // Without credentials the refusal says only that writes are refused.
    let (s, body) =
        status_of(ureq::post(&format!("{}/api/v1/repositories", one.public)).send_json(serde_json::json!({})))?;
    assert_eq!(s, 503, "{body}");
    assert!(body.contains("Packyard is read-only") && !body.contains("backup window"), "{body}");
    // An import where the configuration is (one process's database: SQLite) is refused too.
    if url.is_none() {
        let (code, out, err) = common::process::run_to_end(
            dir.path(),
            &["import", "apt", "--from", dir.path().to_str().unwrap_or_default(), "--into", "debs"],
            &env,
        )?;
        assert_ne!(code, 0, "{out}{err}");
        assert!(err.contains("Packyard is read-only (frozen by admin"), "{out}{err}");
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

/// Nexus's shared request fields, as the Terraform provider sends them.
fn nexus_body(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut body = serde_json::json!({
        "name": name,
        "online": true,
        "storage": {"blobStoreName": "default", "strictContentTypeValidation": true, "writePolicy": "ALLOW_ONCE"},
        "cleanup": null,
    });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    body
}

fn proxy_fields(url: &str) -> serde_json::Value {
    serde_json::json!({
        "proxy": {"remoteUrl": url, "contentMaxAge": 1440, "metadataMaxAge": 60},
        "negativeCache": {"enabled": true, "timeToLive": 5},
        "httpClient": {"blocked": false, "autoBlock": true, "connection": {"retries": 2, "timeout": 60},
            "authentication": {"type": "username", "username": "mirror", "password": "s3cret"}},
        "routingRule": null,
    })
}

async fn repositories_in_nexus_shapes(app: common::app::TestApp) -> anyhow::Result<()> {
    use actix_web::test::TestRequest;
    use common::app::As;
    let nexus = |method: actix_web::http::Method, path: &str, body: Option<serde_json::Value>| {
        let req = TestRequest::default().method(method).uri(&format!("/service/rest/v1/{path}"));
        match body {
            Some(b) => req.set_json(b),
            None => req,
        }
    };
    let post = |path: &str, body: serde_json::Value| nexus(actix_web::http::Method::POST, path, Some(body));
    let get = |path: &str| nexus(actix_web::http::Method::GET, path, None);

    // Hosted repositories first (the APT proxy trusts the hosted one's key, as its upstream).
    let apt_hosted = nexus_body(
        "apt-hosted",
        serde_json::json!({"component": {"proprietaryComponents": false}, "apt": {"distribution": "bookworm"},
            "aptSigning": {"keypair": "", "passphrase": ""}}),
    );
    for (path, body) in [
        ("repositories/apt/hosted", apt_hosted.clone()),
        ("repositories/go/hosted", nexus_body("go-hosted", serde_json::json!({}))),
        ("repositories/conan/hosted", nexus_body("conan-hosted", serde_json::json!({}))),
        (
            "repositories/apk/hosted",
            nexus_body("apk-hosted", serde_json::json!({"apk": {"architectures": ["x86_64"]}})),
        ),
    ] {
        let r = app.call(post(path, body)).await?;
        assert_eq!((r.status.as_u16(), r.text.as_str()), (201, ""), "{path}");
    }
    let key = app.get("/repository/apt-hosted/gpg.key").await?;
    assert_eq!(key.status.as_u16(), 200);
    let key_text = key.text.clone();
    let mut apt_proxy = proxy_fields("https://deb.debian.org/debian");
    apt_proxy["apt"] = serde_json::json!({"distribution": "bookworm", "flat": false, "signed_by": key_text});
    let mut conan_proxy = proxy_fields("https://center2.conan.io");
    conan_proxy["conanProxy"] = serde_json::json!({"conanVersion": "V2"});
    for (path, body) in [
        ("repositories/apt/proxy", nexus_body("apt-proxy", apt_proxy)),
        ("repositories/go/proxy", nexus_body("go-proxy", proxy_fields("https://proxy.golang.org"))),
        ("repositories/conan/proxy", nexus_body("conan-proxy", conan_proxy)),
        (
            "repositories/apt/group",
            nexus_body(
                "apt-group",
                serde_json::json!({"group": {"memberNames": ["apt-hosted", "apt-proxy"]}, "apt": {"distribution": "bookworm"}}),
            ),
        ),
        (
            "repositories/go/group",
            nexus_body("go-group", serde_json::json!({"group": {"memberNames": ["go-hosted", "go-proxy"]}})),
        ),
        (
            "repositories/conan/group",
            nexus_body("conan-group", serde_json::json!({"group": {"memberNames": ["conan-hosted"]}})),
        ),
        (
            "repositories/apk/group",
            nexus_body("apk-group", serde_json::json!({"group": {"memberNames": ["apk-hosted"]}})),
        ),
    ] {
        let r = app.call(post(path, body)).await?;
        assert_eq!((r.status.as_u16(), r.text.as_str()), (201, ""), "{path}");
    }

    // Each as Nexus shows it.
    let r = app.call(get("repositories/apt/hosted/apt-hosted")).await?;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let url = r.json["url"].as_str().unwrap_or_default().to_string();
    assert!(url.ends_with("/repository/apt-hosted"), "{url}");
    assert_eq!(
        r.json,
        serde_json::json!({"name": "apt-hosted", "format": "apt", "type": "hosted", "url": url, "online": true,
            "storage": {"blobStoreName": "default", "strictContentTypeValidation": true, "writePolicy": "ALLOW_ONCE"},
            "cleanup": null, "component": {"proprietaryComponents": false},
            "apt": r.json["apt"].clone(), "aptSigning": {"keypair": null, "passphrase": null}})
    );
    assert_eq!(
        (r.json["apt"]["distribution"].as_str(), r.json["apt"]["flat"].as_bool()),
        (Some("bookworm"), Some(false))
    );
    let r = app.call(get("repositories/apt/proxy/apt-proxy")).await?;
    assert_eq!(
        r.json["proxy"],
        serde_json::json!({"remoteUrl": "https://deb.debian.org/debian", "contentMaxAge": -1, "metadataMaxAge": 60})
    );
    assert_eq!(r.json["negativeCache"], serde_json::json!({"enabled": true, "timeToLive": 5}));
    assert_eq!(
        r.json["httpClient"]["authentication"],
        serde_json::json!({"type": "username", "username": "mirror", "password": null, "ntlmHost": null, "ntlmDomain": null}),
        "the password is never shown"
    );
    assert!(!r.text.contains("s3cret"), "{}", r.text);
    assert_eq!(r.json["storage"], serde_json::json!({"blobStoreName": "default", "strictContentTypeValidation": true}));
    let r = app.call(get("repositories/go/group/go-group")).await?;
    assert_eq!(r.json["group"], serde_json::json!({"memberNames": ["go-hosted", "go-proxy"]}), "{}", r.text);
    let r = app.call(get("repositories/conan/proxy/conan-proxy")).await?;
    assert_eq!(r.json["conanProxy"], serde_json::json!({"conanVersion": "V2"}), "{}", r.text);
    // Nexus's "block outbound connections" is `proxy.offline`.
    let mut blocked = proxy_fields("https://proxy.golang.org");
    blocked["httpClient"]["blocked"] = serde_json::json!(true);
    let r = app.call(post("repositories/go/proxy", nexus_body("go-blocked", blocked))).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let r = app.call(get("repositories/go/proxy/go-blocked")).await?;
    assert_eq!(r.json["httpClient"]["blocked"], true, "{}", r.text);
    let own = app.call(TestRequest::get().uri("/api/v1/repositories/go-blocked")).await?;
    assert_eq!(own.json["proxy"]["offline"], true, "{}", own.text);
    let r = app.call(get("repositories/go/proxy/go-proxy")).await?;
    assert_eq!(r.json["httpClient"]["blocked"], false, "{}", r.text);
    let gone = app.call(TestRequest::delete().uri("/api/v1/repositories/go-blocked")).await?;
    assert_eq!(gone.status.as_u16(), 204, "{}", gone.text);
    let r = app.call(get("repositories/go/proxy/apt-proxy")).await?;
    assert_eq!(r.status.as_u16(), 404, "another format's repository is not found under go/proxy");
    assert_eq!(r.json, serde_json::json!({"id": "*", "message": "Repository not found"}));
    let r = app.call(get("repositories/apt-proxy")).await?;
    assert_eq!(
        (r.json["name"].as_str(), r.json["attributes"]["proxy"]["remoteUrl"].as_str()),
        (Some("apt-proxy"), Some("https://deb.debian.org/debian"))
    );
    let r = app.call(get("repositorySettings")).await?;
    let names: Vec<&str> = r.json.as_array().into_iter().flatten().filter_map(|i| i["name"].as_str()).collect();
    assert_eq!(names.len(), 11, "{names:?}");

    // An update: Nexus's whole definition; Packyard's fields Nexus does not know stay.
    let policy =
        serde_json::json!({"name": "old-debs", "format": "apt", "criteria": {"last_downloaded_before_days": 30}});
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies").set_json(policy)).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let mut changed = apt_hosted.clone();
    changed["storage"]["writePolicy"] = serde_json::json!("ALLOW");
    changed["cleanup"] = serde_json::json!({"policyNames": ["old-debs"]});
    let r = app
        .call(nexus(actix_web::http::Method::PUT, "repositories/apt/hosted/apt-hosted", Some(changed.clone())))
        .await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    let r = app.call(get("repositories/apt/hosted/apt-hosted")).await?;
    assert_eq!(r.json["storage"]["writePolicy"], "ALLOW");
    assert_eq!(r.json["cleanup"], serde_json::json!({"policyNames": ["old-debs"]}));
    let own = app.call(TestRequest::get().uri("/api/v1/repositories/apt-hosted")).await?;
    assert_eq!(own.json["write_policy"], "allow");
    assert_eq!(own.json["apt"]["components"], serde_json::json!(["main"]), "{}", own.text);
    let p = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/old-debs")).await?;
    assert_eq!(p.json["repositories"], serde_json::json!(["apt-hosted"]), "{}", p.text);
    changed["cleanup"] = serde_json::Value::Null;
    assert_eq!(
        app.call(nexus(actix_web::http::Method::PUT, "repositories/apt/hosted/apt-hosted", Some(changed)))
            .await?
            .status
            .as_u16(),
        204
    );
    let p = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/old-debs")).await?;
    assert_eq!(p.json["repositories"], serde_json::json!([]), "cleanup null takes the repository out of the policy");

    // A key to sign with, as Nexus takes it (the armored private key).
    let signer = packyard_codecs::apt::signing::Signer::generate("nexus <nexus@example.org>")?;
    let mut signed = nexus_body("apt-signed", serde_json::json!({"apt": {"distribution": "stable"}}));
    signed["aptSigning"] = serde_json::json!({"keypair": signer.to_armored_secret()?, "passphrase": null});
    let r = app.call(post("repositories/apt/hosted", signed)).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let key = app.call(TestRequest::get().uri("/api/v1/repositories/apt-signed/signing-key")).await?;
    assert_eq!(key.json["fingerprint"].as_str(), Some(signer.fingerprint().as_str()), "{}", key.text);

    // Refusals, each a 400 (404 for what is not there) in Nexus's shape; nothing is created.
    let before = app.call(get("repositorySettings")).await?.json.as_array().map(Vec::len);
    let mut flat = proxy_fields("https://deb.debian.org/debian");
    flat["apt"] = serde_json::json!({"distribution": "bookworm", "flat": true});
    let mut ntlm = proxy_fields("https://proxy.golang.org");
    ntlm["httpClient"]["authentication"]["type"] = serde_json::json!("ntlm");
    let mut v1 = proxy_fields("https://center.conan.io");
    v1["conanProxy"] = serde_json::json!({"conanVersion": "V1"});
    let mut keyed = nexus_body("x-key", serde_json::json!({"apt": {"distribution": "stable"}}));
    keyed["aptSigning"] = serde_json::json!({"keypair": "KEY", "passphrase": "secret"});
    let mut elsewhere = nexus_body("x-store", serde_json::json!({}));
    elsewhere["storage"]["blobStoreName"] = serde_json::json!("s3-store");
    for (path, body, status, needle) in [
        ("repositories/apt/proxy", nexus_body("x-flat", flat), 400, "apt.flat"),
        ("repositories/go/proxy", nexus_body("x-ntlm", ntlm), 400, "httpClient.authentication.type \"ntlm\""),
        ("repositories/conan/proxy", nexus_body("x-v1", v1), 400, "Conan 2 protocol only"),
        ("repositories/apt/hosted", keyed, 400, "aptSigning.passphrase"),
        ("repositories/go/hosted", elsewhere, 400, "Packyard has one blob store"),
        ("repositories/go/hosted", nexus_body("x-offline", serde_json::json!({"online": false})), 400, "online"),
        ("repositories/go/group", nexus_body("x-group", serde_json::json!({})), 400, "group.memberNames: required"),
        ("repositories/go/hosted", nexus_body("go-hosted", serde_json::json!({})), 409, "go-hosted"),
        ("repositories/maven2/hosted", nexus_body("x-maven", serde_json::json!({})), 404, "Repository not found"),
        (
            "repositories/apt/hosted",
            nexus_body("x-policy", serde_json::json!({"cleanup": {"policyNames": ["nope"]}})),
            400,
            "no cleanup policy nope",
        ),
    ] {
        let r = app.call(post(path, body)).await?;
        assert_eq!(r.status.as_u16(), status, "{path}: {}", r.text);
        assert_eq!(r.json["id"], "*", "{path}: {}", r.text);
        assert!(r.json["message"].as_str().is_some_and(|m| m.contains(needle)), "{path}: {} lacks {needle:?}", r.text);
    }
    let renamed = nexus_body("other-name", serde_json::json!({}));
    let r = app.call(nexus(actix_web::http::Method::PUT, "repositories/go/hosted/go-hosted", Some(renamed))).await?;
    assert_eq!(r.status.as_u16(), 400, "{}", r.text);
    assert_eq!(app.call(get("repositorySettings")).await?.json.as_array().map(Vec::len), before, "nothing was created");

    // Who may: an admin; anonymous callers and other users not.
    let anonymous =
        app.send(post("repositories/go/hosted", nexus_body("x-anon", serde_json::json!({}))), As::Anonymous).await?;
    assert_eq!(anonymous.status.as_u16(), 401, "{}", anonymous.text);
    let user = app.with_user("dev").can("*", &["read", "write"]).create().await?;
    let r = app.send(post("repositories/go/hosted", nexus_body("x-dev", serde_json::json!({}))), user).await?;
    assert_eq!(r.status.as_u16(), 403, "{}", r.text);

    // Delete.
    let r = app.call(nexus(actix_web::http::Method::DELETE, "repositories/go-group", None)).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    assert_eq!(app.call(get("repositories/go/group/go-group")).await?.status.as_u16(), 404);
    // The APT group over a proxy of an upstream this machine cannot reach stays unpublished.
    app.leaves_units_unpublished();
    Ok(())
}

app_test!(repositories_in_nexus_shapes);

async fn security_in_nexus_shapes(app: common::app::TestApp) -> anyhow::Result<()> {
    use actix_web::http::Method;
    use actix_web::test::TestRequest;
    use common::app::As;
    app.create(common::Repo::hosted("debs", packyard_model::repos::Format::Apt)).await?;
    let call = |method: Method, path: &str, body: Option<serde_json::Value>| {
        let req = TestRequest::default().method(method).uri(&format!("/service/rest/v1/security/{path}"));
        match body {
            Some(b) => req.set_json(b),
            None => req,
        }
    };

    // A role of Nexus privilege names, then a user with it.
    let role = serde_json::json!({"id": "dev-role", "name": "dev-role", "description": "Developers",
        "privileges": ["nx-repository-view-*-debs-read", "nx-repository-view-apt-debs-add"], "roles": []});
    let r = app.call(call(Method::POST, "roles", Some(role))).await?;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert_eq!(
        r.json,
        serde_json::json!({"id": "dev-role", "source": "default", "name": "dev-role", "description": "Developers", "readOnly": false,
            "privileges": ["nx-repository-view-*-debs-read", "nx-repository-view-*-debs-browse", "nx-repository-view-*-debs-add", "nx-repository-view-*-debs-edit"],
            "roles": []})
    );
    let own = app.call(TestRequest::get().uri("/api/v1/roles/dev-role")).await?;
    assert_eq!(
        own.json["privileges"],
        serde_json::json!([{"repositories": "debs", "actions": ["read", "write"]}]),
        "{}",
        own.text
    );
    let user = serde_json::json!({"userId": "jdoe", "firstName": "Jane", "lastName": "Doe", "emailAddress": "jane@example.org",
        "password": "first-password", "status": "active", "roles": ["dev-role"]});
    let r = app.call(call(Method::POST, "users", Some(user))).await?;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let expected = serde_json::json!({"userId": "jdoe", "firstName": "Jane", "lastName": "Doe", "emailAddress": "jane@example.org",
        "source": "default", "status": "active", "readOnly": false, "roles": ["dev-role"], "externalRoles": []});
    assert_eq!(r.json, expected);
    let r = app.call(call(Method::GET, "users?userId=jd", None)).await?;
    assert_eq!(r.json, serde_json::json!([expected]));
    // The privileges hold: the user reads and writes debs, may not delete from it.
    let jdoe = || As::Basic("jdoe".into(), "first-password".into());
    let read = app.send(TestRequest::get().uri("/service/rest/v1/components?repository=debs"), jdoe()).await?;
    assert_eq!(read.status.as_u16(), 200, "{}", read.text);
    let deb = deb("by-jdoe");
    let up = app.send(TestRequest::post().uri("/repository/debs/").set_payload(deb), jdoe()).await?;
    assert_eq!(up.status.as_u16(), 201, "{}", up.text);
    let del = app
        .send(TestRequest::delete().uri("/repository/debs/pool/main/b/by-jdoe/by-jdoe_1.0-1_amd64.deb"), jdoe())
        .await?;
    assert_eq!(del.status.as_u16(), 403, "{}", del.text);

    // Changes: the user's name and roles, the password (plain text), the role's privileges.
    let change = serde_json::json!({"userId": "jdoe", "firstName": "Jane", "lastName": "Roe", "emailAddress": "jane@example.org",
        "source": "default", "status": "active", "readOnly": false, "roles": [], "externalRoles": []});
    let r = app.call(call(Method::PUT, "users/jdoe", Some(change))).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    let r = app.call(call(Method::GET, "users?userId=jdoe", None)).await?;
    assert_eq!((r.json[0]["lastName"].as_str(), r.json[0]["roles"].clone()), (Some("Roe"), serde_json::json!([])));
    let r = app
        .call(
            TestRequest::put()
                .uri("/service/rest/v1/security/users/jdoe/change-password")
                .insert_header(("content-type", "text/plain"))
                .set_payload("second-password"),
        )
        .await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    assert_eq!(
        app.send(TestRequest::get().uri("/service/rest/v1/repositories"), jdoe()).await?.status.as_u16(),
        401,
        "the old password is refused"
    );
    let new = As::Basic("jdoe".into(), "second-password".into());
    assert_eq!(app.send(TestRequest::get().uri("/service/rest/v1/repositories"), new).await?.status.as_u16(), 200);
    let r = app
        .call(call(
            Method::PUT,
            "roles/dev-role",
            Some(serde_json::json!({"id": "dev-role", "name": "dev-role", "privileges": ["nx-repository-view-*-*-*"]})),
        ))
        .await?;
    assert_eq!(r.status.as_u16(), 204, "{}", r.text);
    let own = app.call(TestRequest::get().uri("/api/v1/roles/dev-role")).await?;
    assert_eq!(
        own.json["privileges"],
        serde_json::json!([{"repositories": "*", "actions": ["read", "write", "delete"]}]),
        "{}",
        own.text
    );

    // Privileges: what the roles hold, read-only.
    let r = app.call(call(Method::GET, "privileges", None)).await?;
    let names: Vec<&str> = r.json.as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"nx-all") && names.contains(&"nx-repository-view-*-*-delete"), "{names:?}");
    let r = app.call(call(Method::GET, "privileges/nx-repository-view-*-*-read", None)).await?;
    assert_eq!(
        r.json,
        serde_json::json!({"type": "repository-view", "name": "nx-repository-view-*-*-read", "description": "Access read of repositories *",
            "readOnly": true, "actions": ["READ"], "format": "*", "repository": "*"})
    );
    assert_eq!(app.call(call(Method::POST, "privileges", Some(serde_json::json!({})))).await?.status.as_u16(), 405);

    // What Packyard cannot honour, each a 400 saying why.
    for (path, body, needle) in [
        (
            "roles",
            serde_json::json!({"id": "r1", "privileges": [], "roles": ["dev-role"]}),
            "do not contain other roles",
        ),
        ("roles", serde_json::json!({"id": "r2", "privileges": ["nx-search-read"]}), "has no counterpart in Packyard"),
        (
            "users",
            serde_json::json!({"userId": "u1", "firstName": "U", "lastName": "One", "emailAddress": "u@example.org", "password": "password-1", "status": "disabled"}),
            "status \"disabled\"",
        ),
        ("users", serde_json::json!({"userId": "u2", "status": "active"}), "A non-empty password is required."),
    ] {
        let r = app.call(call(Method::POST, path, Some(body))).await?;
        assert_eq!(r.status.as_u16(), 400, "{path}: {}", r.text);
        assert!(r.json["message"].as_str().is_some_and(|m| m.contains(needle)), "{path}: {} lacks {needle:?}", r.text);
    }

    // Sources and realms, as configured (local only here).
    assert_eq!(
        app.call(call(Method::GET, "user-sources", None)).await?.json,
        serde_json::json!([{"id": "default", "name": "Local"}])
    );
    assert_eq!(
        app.call(call(Method::GET, "realms/active", None)).await?.json,
        serde_json::json!(["NexusAuthenticatingRealm"])
    );
    let same = app
        .call(call(
            Method::PUT,
            "realms/active",
            Some(serde_json::json!(["NexusAuthenticatingRealm", "NexusAuthorizingRealm"])),
        ))
        .await?;
    assert_eq!(same.status.as_u16(), 204, "{}", same.text);
    let ldap = app
        .call(call(Method::PUT, "realms/active", Some(serde_json::json!(["NexusAuthenticatingRealm", "LdapRealm"]))))
        .await?;
    assert_eq!(ldap.status.as_u16(), 400, "{}", ldap.text);

    // Only admins.
    let dev = app.send(call(Method::GET, "users", None), As::Basic("jdoe".into(), "second-password".into())).await?;
    assert_eq!(dev.status.as_u16(), 403, "{}", dev.text);
    assert_eq!((app.call(call(Method::DELETE, "users/jdoe", None)).await?.status.as_u16()), 204);
    assert_eq!((app.call(call(Method::DELETE, "roles/dev-role", None)).await?.status.as_u16()), 204);
    Ok(())
}

app_test!(security_in_nexus_shapes);

async fn blob_stores_tasks_and_policies_in_nexus_shapes(app: common::app::TestApp) -> anyhow::Result<()> {
    use actix_web::http::Method;
    use actix_web::test::TestRequest;
    app.create(common::Repo::hosted("debs", packyard_model::repos::Format::Apt)).await?;
    let call = |method: Method, path: &str, body: Option<serde_json::Value>| {
        let req = TestRequest::default().method(method).uri(&format!("/service/rest/v1/{path}"));
        match body {
            Some(b) => req.set_json(b),
            None => req,
        }
    };

    // The one blob store, its counts following what is stored.
    let before = app.call(call(Method::GET, "blobstores", None)).await?;
    assert_eq!(before.status.as_u16(), 200, "{}", before.text);
    let store = &before.json[0];
    assert_eq!(
        (store["name"].as_str(), store["type"].as_str(), store["unavailable"].as_bool()),
        (Some("default"), Some("File"), Some(false)),
        "{store}"
    );
    assert!(store["availableSpaceInBytes"].as_u64().is_some_and(|b| b > 0), "{store}");
    let package = deb("counted");
    let up = app.call(TestRequest::post().uri("/repository/debs/").set_payload(package.clone())).await?;
    assert_eq!(up.status.as_u16(), 201, "{}", up.text);
    let after = app.call(call(Method::GET, "blobstores", None)).await?;
    let grew = |k: &str| after.json[0][k].as_i64().unwrap_or(0) - before.json[0][k].as_i64().unwrap_or(0);
    assert!(
        grew("blobCount") >= 1 && grew("totalSizeInBytes") >= i64::try_from(package.len())?,
        "{} → {}",
        before.text,
        after.text
    );
    let r = app.call(call(Method::GET, "blobstores/default/quota-status", None)).await?;
    assert_eq!(
        r.json,
        serde_json::json!({"isViolation": false, "message": "Blob store default has no quota", "blobStoreName": "default"})
    );
    let r = app.call(call(Method::GET, "blobstores/file/default", None)).await?;
    assert!(r.json["path"].as_str().is_some_and(|p| !p.is_empty()), "{}", r.text);
    assert_eq!(app.call(call(Method::GET, "blobstores/file/other", None)).await?.status.as_u16(), 404);

    // Cleanup policies in Nexus's shape.
    let policy = serde_json::json!({"name": "old-debs", "format": "apt", "notes": "old packages", "criteriaLastBlobUpdated": null,
        "criteriaLastDownloaded": 30, "criteriaReleaseType": null, "criteriaAssetRegex": null, "retain": 2});
    let r = app.call(call(Method::POST, "cleanup-policies", Some(policy.clone()))).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    assert_eq!(r.json, policy);
    let own = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/old-debs")).await?;
    assert_eq!(
        own.json["criteria"],
        serde_json::json!({"last_downloaded_before_days": 30, "keep_latest": 2}),
        "{}",
        own.text
    );
    for (field, value, needle) in [
        ("criteriaAssetRegex", serde_json::json!("pool/.*"), "not by asset path"),
        ("criteriaReleaseType", serde_json::json!("RELEASES"), "criteriaReleaseType \"RELEASES\""),
        ("format", serde_json::json!("maven2"), "format \"maven2\""),
    ] {
        let mut bad = policy.clone();
        bad["name"] = serde_json::json!("bad");
        bad[field] = value;
        let r = app.call(call(Method::POST, "cleanup-policies", Some(bad))).await?;
        assert_eq!(r.status.as_u16(), 400, "{field}: {}", r.text);
        assert!(r.json["message"].as_str().is_some_and(|m| m.contains(needle)), "{field}: {} lacks {needle:?}", r.text);
    }

    // Tasks: each policy and the reclamation; a policy runs on its repositories by the worker.
    let r = app.call(call(Method::GET, "tasks", None)).await?;
    let ids: Vec<&str> = r.json["items"].as_array().into_iter().flatten().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids, ["blobstore-reclaim", "cleanup-old-debs"], "{}", r.text);
    assert_eq!(r.json["continuationToken"], serde_json::Value::Null);
    let r = app.call(call(Method::POST, "tasks/cleanup-old-debs/run", None)).await?;
    assert_eq!(r.status.as_u16(), 400, "a policy that cleans no repository: {}", r.text);
    let mut cleaning = policy.clone();
    cleaning["notes"] = serde_json::json!("still old packages");
    assert_eq!(app.call(call(Method::PUT, "cleanup-policies/old-debs", Some(cleaning))).await?.status.as_u16(), 204);
    let patch = serde_json::json!({"name": "old-debs", "format": "apt", "description": "still old packages",
        "criteria": {"last_downloaded_before_days": 30, "keep_latest": 2}, "repositories": ["debs"]});
    assert_eq!(
        app.call(TestRequest::put().uri("/api/v1/cleanup-policies/old-debs").set_json(patch)).await?.status.as_u16(),
        200
    );
    let r = app.call(call(Method::POST, "tasks/cleanup-old-debs/run", None)).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    let runs = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/old-debs/runs")).await?;
    assert_eq!(runs.json["items"][0]["state"], "requested", "{}", runs.text);
    let r = app.call(call(Method::POST, "tasks/cleanup-old-debs/stop", None)).await?;
    assert_eq!(r.status.as_u16(), 409, "nothing runs yet: {}", r.text);
    assert_eq!(app.call(call(Method::POST, "tasks/nope/run", None)).await?.status.as_u16(), 404);
    let r = app.call(call(Method::POST, "tasks/blobstore-reclaim/run", None)).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (204, ""));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let t = app.call(call(Method::GET, "tasks/blobstore-reclaim", None)).await?;
        if t.json["currentState"] == "WAITING" && t.json["lastRunResult"] == "OK" {
            assert!(t.json["lastRun"].as_str().is_some_and(|s| s.ends_with('Z')), "{}", t.text);
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "the reclamation did not finish: {}", t.text);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(app.call(call(Method::DELETE, "cleanup-policies/old-debs", None)).await?.status.as_u16(), 204);

    // A Nexus PUT changes what Nexus's shape names and keeps what it cannot (a version pattern).
    let narrow = serde_json::json!({"name": "rc-only", "format": "apt",
        "criteria": {"published_before_days": 10, "version_regex": ".*-rc.*"}, "repositories": ["debs"]});
    let r = app.call(TestRequest::post().uri("/api/v1/cleanup-policies").set_json(narrow)).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let shown = app.call(call(Method::GET, "cleanup-policies/rc-only", None)).await?.json;
    let mut edited = shown.clone();
    edited["notes"] = serde_json::json!("release candidates");
    let r = app.call(call(Method::PUT, "cleanup-policies/rc-only", Some(edited))).await?;
    assert_eq!(r.status.as_u16(), 204, "{}", r.text);
    let own = app.call(TestRequest::get().uri("/api/v1/cleanup-policies/rc-only")).await?.json;
    assert_eq!(own["criteria"], serde_json::json!({"published_before_days": 10, "version_regex": ".*-rc.*"}), "{own}");
    assert_eq!(
        (own["description"].as_str(), own["repositories"].clone()),
        (Some("release candidates"), serde_json::json!(["debs"]))
    );
    Ok(())
}

app_test!(blob_stores_tasks_and_policies_in_nexus_shapes);

/// Every row of docs/nexus-api.md, sent: a supported endpoint answers (a read as an admin, a
/// change without credentials: 401, so nothing changes), a refused one with its 404 and the
/// reason — or with the status the row names.
#[actix_web::test]
async fn every_endpoint_answers_as_documented() -> anyhow::Result<()> {
    use actix_web::http::Method;
    use actix_web::test::TestRequest;
    use common::app::As;
    let Some(app) = common::app::TestApp::with_config(Backend::Sqlite, |_| {}).await? else { return Ok(()) };
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/nexus-api.md"))?;
    let mut rows = 0;
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, method, path, status, ..] = cells.as_slice() else { continue };
        if !["GET", "POST", "PUT", "DELETE"].contains(method) {
            continue;
        }
        let Ok(method) = method.parse::<Method>() else { continue };
        if !path.starts_with('`') {
            continue;
        }
        rows += 1;
        // Each `{placeholder}` as a name nothing has.
        let mut uri = String::from("/service/rest");
        let mut rest = path.trim_matches('`');
        while let Some(open) = rest.find('{') {
            uri.push_str(&rest[..open]);
            uri.push('x');
            rest = rest[open..].find('}').map_or("", |close| &rest[open + close + 1..]);
        }
        uri.push_str(rest);
        let req = || {
            TestRequest::default()
                .method(method.clone())
                .uri(&uri)
                .insert_header(("content-type", "application/json"))
                .set_payload("{}")
        };
        let what = format!("{method} {uri} ({status})");
        if status.starts_with("supported") {
            if method == Method::GET {
                let r = app.send(req(), As::Admin).await?;
                assert!(
                    r.status.as_u16() != 405 && !r.text.contains("does not implement"),
                    "{what}: {} {}",
                    r.status,
                    r.text
                );
            } else {
                // Refused before anything changes, for want of credentials: a 401 — but the
                // components upload asks for its repository first (422), and a delete by id
                // says nothing of an id it cannot find (404).
                let r = app.send(req(), As::Anonymous).await?;
                let expected = match (&method, uri.as_str()) {
                    (&Method::POST, "/service/rest/v1/components") => 422,
                    (&Method::DELETE, "/service/rest/v1/assets/x" | "/service/rest/v1/components/x") => 404,
                    _ => 401,
                };
                assert_eq!(r.status.as_u16(), expected, "{what}: {}", r.text);
            }
        } else if let Some(code) = status.strip_prefix("refused (") {
            let r = app.send(req(), As::Admin).await?;
            assert_eq!(r.status.as_str(), &code[..3], "{what}: {}", r.text);
        } else if status.starts_with("refused: ") {
            // 404, or 405 where the path is Packyard's but not the method.
            let r = app.send(req(), As::Admin).await?;
            assert!(matches!(r.status.as_u16(), 404 | 405), "{what}: {} {}", r.status, r.text);
            assert_eq!(r.json["id"], "*", "{what}: {}", r.text);
            assert!(
                r.json["message"].as_str().is_some_and(|m| m.contains("Packyard does not implement")),
                "{what}: {}",
                r.text
            );
        } else {
            anyhow::bail!("{what}: the row says neither supported nor refused");
        }
    }
    assert!(rows > 300, "{rows} rows read from docs/nexus-api.md");
    Ok(())
}
