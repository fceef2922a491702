//! Index poisoning (#36): nothing a client cannot parse is ever published.
//! - Every control field apt, dpkg and apk read is checked by their grammar before the 201; a
//!   malformed one is refused with a message naming the field, and nothing is stored.
//! - A build reads back what it would publish with the format's own parser: a row stored before
//!   its upload was checked this way stops the publication, the unit keeps its last snapshot,
//!   `/status` and `packyard_publication_refused_total` name why.
//! - A stanza or record from a proxy's upstream that its clients could not parse is left out of a
//!   group's merge, logged and counted (`packyard_group_records_skipped_total`).
//! - A repository of 1,000 packages and one upload of each malformed kind: `apt-get update`
//!   works for the repository and for a group over it.

use crate::common;

use actix_web::test::TestRequest;
use common::app::TestApp;
use common::archive::{archive_files, Dist, Package, Upstream};
use common::process::{basic, start, status_of, Server};
use common::Repo;
use packyard_codecs::apk::testing::{build_apk, Fixture};
use packyard_codecs::apt::signing::Signer;
use packyard_model::repos::Format;

const PW: &str = "poisoning-admin";

const BASE: &str = "Package: evil\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: a package for tests\n";

/// Each kind of malformed control field: (what is added to or replaces the base control file,
/// the words the refusal must carry).
const MALFORMED_DEBS: &[(&str, &str)] = &[
    ("Depends: foo (>= )\n", "the field Depends is invalid"),
    ("Depends: foo (>= 1.0\n", "the field Depends is invalid"),
    ("Depends: foo [amd64]\n", "the field Depends is invalid"),
    ("Pre-Depends: , foo\n", "the field Pre-Depends is invalid"),
    ("Recommends: Foo\n", "the field Recommends is invalid"),
    ("Suggests: foo bar\n", "the field Suggests is invalid"),
    ("Enhances: foo (<<)\n", "the field Enhances is invalid"),
    ("Breaks: foo | bar\n", "the field Breaks is invalid"),
    ("Conflicts: foo (> 1)\n", "the field Conflicts is invalid"),
    ("Provides: foo (>= 1)\n", "the field Provides is invalid"),
    ("Replaces: foo (=> 1)\n", "the field Replaces is invalid"),
    ("Built-Using: gcc\n", "the field Built-Using is invalid"),
    ("Static-Built-Using: gcc (>= 1)\n", "the field Static-Built-Using is invalid"),
    ("Multi-Arch: sometimes\n", "the field Multi-Arch is invalid"),
    ("Priority: urgent\n", "the field Priority is invalid"),
    ("Section: two words\n", "the field Section is invalid"),
    ("Installed-Size: 12kB\n", "the field Installed-Size is invalid"),
    ("Essential: maybe\n", "the field Essential is invalid"),
    ("Description-md5: 1234\n", "the field Description-md5 is invalid"),
    ("Source: Upper\n", "the field Source is invalid"),
    ("Homepage: http://a b\n", "the field Homepage is invalid"),
    ("#Comment: x\n", "the field name \"#Comment\" is not allowed"),
    ("Bell: ring\x07\n", "control character"),
];

/// Replacing a line of the base control file.
const MALFORMED_REPLACED: &[(&str, &str, &str)] = &[
    ("Maintainer: T <t@example.org>\n", "Maintainer: nobody\n", "the field Maintainer is invalid"),
    ("Description: a package for tests\n", "Description: x\n .more\n", "the field Description is invalid"),
    ("Description: a package for tests\n", "Description:\n body\n", "the field Description is invalid"),
];

/// Each kind of malformed `.PKGINFO` key: (the line added, the words of the refusal).
const MALFORMED_APKS: &[(&str, &str)] = &[
    ("depend = foo>=", "depend"),
    ("depend = foo@edge", "depend"),
    ("provides = bar<2", "provides"),
    ("provides = !bar", "provides"),
    ("install_if = a=b", "install_if"),
    ("replaces = ba$d", "replaces"),
    ("builddate = yesterday", "builddate"),
    ("size = -1", "size"),
    ("commit = not-hex", "commit"),
    ("origin = ../x", "origin"),
    ("provider_priority = 99999", "provider_priority"),
    ("triggers = relative/dir", "triggers"),
    ("license=MIT", "not `key = value`"),
];

fn malformed_debs() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> =
        MALFORMED_DEBS.iter().map(|(extra, why)| (format!("{BASE}{extra}"), *why)).collect();
    out.extend(MALFORMED_REPLACED.iter().map(|(from, to, why)| (BASE.replace(from, to), *why)));
    out
}

/// A `.apk` whose `.PKGINFO` carries `line` besides what the fixture writes.
fn apk_with(line: &str) -> anyhow::Result<Vec<u8>> {
    let mut f = Fixture::new("evil", "1.0-r0", "x86_64");
    f.depends = vec![format!("x\n{line}")];
    Ok(build_apk(&f)?.bytes)
}

/// Every kind of malformed field is refused with a 400 naming it, and nothing is stored: no
/// blob, no temporary, no catalogue entry, no audit entry, nothing to publish.
async fn every_malformed_field_is_refused(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("alpine", Format::Apk).with(serde_json::json!({"apk": {"architectures": ["x86_64"]}})))
        .await?;
    app.publish().await; // the new repositories' empty indexes
    let blobs = app.blob_files();
    for (control, why) in malformed_debs() {
        let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(&control, ".gz")).await?;
        assert_eq!(r.status.as_u16(), 400, "{control:?}: {}", r.text);
        assert!(r.text.contains(why), "{control:?}: {}", r.text);
    }
    for (line, why) in MALFORMED_APKS {
        let r = app.put("/repository/alpine/v3.20/main/x86_64/evil-1.0-r0.apk", apk_with(line)?).await?;
        assert_eq!(r.status.as_u16(), 400, "{line:?}: {}", r.text);
        assert!(r.text.contains("invalid .PKGINFO") && r.text.contains(why), "{line:?}: {}", r.text);
    }
    assert_eq!(app.blob_files(), blobs, "no blob kept");
    assert_eq!(app.blob_temporaries(), 0);
    assert!(app.audit().await?.iter().all(|(action, _)| !action.contains("upload")), "nothing audited as stored");
    let r = app.call(TestRequest::get().uri("/service/rest/v1/search?repository=debs")).await?;
    assert_eq!(r.json["items"], serde_json::json!([]), "{}", r.text);
    assert_eq!(app.publish().await, 0, "nothing to publish");
    // The same packages without the bad field go in.
    let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(BASE, ".gz")).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let r = app.put("/repository/alpine/v3.20/main/x86_64/evil-1.0-r0.apk", apk_with("depend = foo>=1.0")?).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    Ok(())
}
app_test!(every_malformed_field_is_refused);

/// A row stored before its upload was checked this way (written here straight into the table):
/// the build refuses to publish, the unit keeps its last snapshot (the same bytes served),
/// `/status` names the package and the field, and `packyard_publication_refused_total` counts it.
/// Once the package is gone, the repository publishes again.
async fn an_index_that_would_not_parse_is_not_published(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("alpine", Format::Apk).with(serde_json::json!({"apk": {"architectures": ["x86_64"]}})))
        .await?;
    let good = BASE.replace("evil", "good");
    let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(&good, ".gz")).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let apk = build_apk(&Fixture::new("good", "1.0-r0", "x86_64"))?.bytes;
    let r = app.put("/repository/alpine/v3.20/main/x86_64/good-1.0-r0.apk", apk).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    app.publish().await;
    let revision = |r: &common::Reply| r.json["units"][0]["published_revision"].clone();
    let mut published = Vec::new();
    for repo in ["debs", "alpine"] {
        published
            .push(revision(&app.call(TestRequest::get().uri(&format!("/api/v1/repositories/{repo}/status"))).await?));
    }
    let before = app.get("/repository/debs/dists/stable/InRelease").await?;
    assert_eq!(before.status.as_u16(), 200);
    let apk_before = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?;
    assert_eq!(apk_before.status.as_u16(), 200);

    // Poisoned rows, as an older version could have stored them; then a change to publish.
    let poisoned = format!("{}\nDepends: foo (>= )", good.trim_end());
    let pool = app.services.db.pool();
    sqlx::query(&format!("UPDATE apt_packages SET control = '{poisoned}' WHERE name = 'good'")).execute(pool).await?;
    sqlx::query("UPDATE apk_packages SET record = 'C:Q1abcdefghijklmnopqrstuvwxyz0=\nP:good\nV:1.0-r0\nA:x86_64\nS:1\nD:foo>=\n' WHERE name = 'good'")
        .execute(pool)
        .await?;
    let r = app
        .post("/repository/debs/", packyard_codecs::apt::testing::deb(&BASE.replace("evil", "other"), ".gz"))
        .await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    let other = build_apk(&Fixture::new("other", "1.0-r0", "x86_64"))?.bytes;
    let r = app.put("/repository/alpine/v3.20/main/x86_64/other-1.0-r0.apk", other).await?;
    assert_eq!(r.status.as_u16(), 201, "{}", r.text);
    app.publish().await;

    let after = app.get("/repository/debs/dists/stable/InRelease").await?;
    assert!(after.bytes == before.bytes, "the last good snapshot is still served: {}", after.text);
    let apk_after = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?;
    assert!(apk_after.bytes == apk_before.bytes, "the last good index is still served");
    for ((repo, why), published) in
        [("debs", "the field Depends is invalid"), ("alpine", "depend: \"foo>=\"")].into_iter().zip(published)
    {
        let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/{repo}/status"))).await?;
        let error = r.json["units"][0]["last_error"].as_str().unwrap_or_default().to_string();
        assert!(
            error.starts_with("refused to publish: ") && error.contains("good") && error.contains(why),
            "{repo}: {}",
            r.text
        );
        assert_eq!(revision(&r), published, "{repo}: {}", r.text);
    }
    let metrics = String::from_utf8(app.services.metrics.render())?;
    for line in [
        "packyard_publication_refused_total{reason=\"apt_index\",repository=\"debs\"}",
        "packyard_publication_refused_total{reason=\"apk_index\",repository=\"alpine\"}",
    ] {
        assert!(metrics.lines().any(|l| l.starts_with(line)), "{line} in\n{metrics}");
    }
    // Deleting the poisoned package lets the repository publish again.
    let r = app.delete("/repository/debs/pool/main/g/good/good_1.0_amd64.deb").await?;
    assert_eq!(r.status.as_u16(), 204, "{}", r.text);
    let r = app.delete("/repository/alpine/v3.20/main/x86_64/good-1.0-r0.apk").await?;
    assert_eq!(r.status.as_u16(), 204, "{}", r.text);
    // Due within a second of the change (not after the failure's backoff).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        app.publish().await;
        let packages = app.get("/repository/debs/dists/stable/main/binary-amd64/Packages").await?;
        if packages.text.contains("Package: other\n") && !packages.text.contains("Package: good\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never published again: {}", packages.text);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}
app_test!(an_index_that_would_not_parse_is_not_published);

fn server(env: &[(&str, &str)]) -> anyhow::Result<(tempfile::TempDir, Server)> {
    let dir = tempfile::tempdir()?;
    let mut all =
        vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)];
    all.extend_from_slice(env);
    let server = start(dir.path(), &all)?;
    server.wait_ready()?;
    Ok((dir, server))
}

fn post(server: &Server, path: &str, content_type: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    status_of(
        ureq::post(&format!("{}{path}", server.public))
            .set("Authorization", &basic(PW))
            .set("Content-Type", content_type)
            .send_bytes(body),
    )
}

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    common::process::get_bytes(server, path)
}

/// A `multipart/form-data` body of `apt.asset` fields.
fn assets(files: &[(String, Vec<u8>)]) -> (String, Vec<u8>) {
    let boundary = "packyard-poisoning-boundary";
    let mut body = Vec::new();
    for (name, bytes) in files {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"apt.asset\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
                .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

fn apt_get(root: &std::path::Path, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = common::apt::tool("apt-get", root, args)?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success() && !text.contains("E: ") && !text.contains("W: "), text))
}

/// The acceptance: a repository of 1,000 valid packages plus one upload of each malformed kind
/// (binary control fields, a source package's build relations): every malformed one refused with
/// a message naming the field, and the real `apt-get update` and `download` work for the
/// repository and for a group over it.
#[test]
fn a_thousand_packages_and_one_of_each_malformed_kind() -> anyhow::Result<()> {
    let (_dir, server) = server(&[])?;
    let auth = basic(PW);
    common::process::create_repository(&server.public, &auth, Repo::hosted("debs", Format::Apt))?;
    common::process::create_repository(&server.public, &auth, Repo::group("apt-all", Format::Apt, &["debs"]))?;
    for i in 0..1000 {
        let control = format!(
            "Package: pkg-{i:04}\nVersion: 1.{i}-1\nArchitecture: {}\nMaintainer: T <t@example.org>\nDepends: libc6 (>= 2.34), pkg-{:04} | base-files\nDescription: package {i}\n for the acceptance test\n",
            if i % 10 == 0 { "all" } else { "amd64" },
            (i + 1) % 1000,
        );
        let (s, text) = post(
            &server,
            "/repository/debs/",
            "application/vnd.debian.binary-package",
            &packyard_codecs::apt::testing::deb(&control, ".xz"),
        )?;
        anyhow::ensure!(s == 201, "pkg-{i}: {s} {text}");
    }
    for (control, why) in malformed_debs() {
        let (s, text) = post(
            &server,
            "/repository/debs/",
            "application/vnd.debian.binary-package",
            &packyard_codecs::apt::testing::deb(&control, ".gz"),
        )?;
        assert_eq!(s, 400, "{control:?}: {text}");
        assert!(text.contains(why), "{control:?}: {text}");
    }
    // A source package whose Build-Depends apt-get source would not read.
    let mut source = packyard_codecs::apt::testing::source_package("srcbad", "1.0", &[]);
    let dsc = String::from_utf8(source[0].1.clone())?.replace("debhelper-compat (= 13)", "debhelper-compat (= )");
    source[0].1 = dsc.into_bytes();
    let (content_type, body) = assets(&source);
    let (s, text) = post(&server, "/repository/debs/", &content_type, &body)?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("the field Build-Depends is invalid"), "{text}");

    // apt-get on the repository and on the group.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for repo in ["debs", "apt-all"] {
        loop {
            let (_, packages) = get(&server, &format!("/repository/{repo}/dists/stable/main/binary-amd64/Packages"))?;
            if String::from_utf8_lossy(&packages).matches("Package: pkg-").count() == 1000 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{repo} never listed the 1,000 packages");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let (s, key) = get(&server, &format!("/repository/{repo}/gpg.key"))?;
        assert_eq!(s, 200);
        let url = format!("{}/repository/{repo}/", server.public);
        let root =
            common::apt::scratch(&key, |k| format!("deb [signed-by={} arch=amd64] {url} stable main", k.display()))?;
        let (ok, text) = apt_get(root.path(), &["update"])?;
        assert!(ok, "{repo}: {text}");
        let (ok, text) = apt_get(root.path(), &["download", "pkg-0999", "pkg-0010"])?;
        assert!(ok, "{repo}: {text}");
        let (s, packages) = get(&server, &format!("/repository/{repo}/dists/stable/main/binary-amd64/Packages"))?;
        assert_eq!(s, 200);
        assert!(!String::from_utf8_lossy(&packages).contains("Package: evil"), "{repo}: no malformed package listed");
    }
    Ok(())
}

/// A proxy's upstream lists a stanza apt cannot read: the group over the proxy leaves it out
/// (logged, counted in `packyard_group_records_skipped_total{group,member}`) and merges the rest;
/// `apt-get update` through the group works. (The proxy itself passes the upstream's bytes on
/// unchanged, as it must; through it apt fails as it fails on the upstream.)
#[test]
fn a_poisoned_upstream_stanza_is_left_out_of_a_group() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let good = Package::new("alpha", "1.0", "amd64");
    let evil = Package::new("evil", "1.0", "amd64").listing("Depends: foo (>= )\n");
    let upstream = Upstream::start()?;
    upstream.publish(archive_files(
        &Dist {
            name: "stable",
            indexes: vec![("amd64", vec![&good, &evil])],
            by_hash: true,
            forms: &["", ".xz"],
            valid_until: None,
        },
        &signer,
        None,
    )?);
    let (_dir, server) = server(&[])?;
    let auth = basic(PW);
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("up", Format::Apt, &upstream.url)
            .with(serde_json::json!({"apt": {"distributions": ["stable"], "signed_by": signer.public_armored()?}})),
    )?;
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::group("all", Format::Apt, &["up"]).with(serde_json::json!({"apt": {"distributions": ["stable"]}})),
    )?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let packages = loop {
        let (s, body) = get(&server, "/repository/all/dists/stable/main/binary-amd64/Packages")?;
        if s == 200 && String::from_utf8_lossy(&body).contains("Package: alpha") {
            break String::from_utf8_lossy(&body).into_owned();
        }
        assert!(std::time::Instant::now() < deadline, "the group never merged alpha: {s}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(!packages.contains("Package: evil"), "{packages}");
    let (_, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert!(
        metrics.lines().any(|l| l == "packyard_group_records_skipped_total{group=\"all\",member=\"up\"} 1"),
        "{}",
        metrics.lines().filter(|l| l.contains("skipped")).collect::<Vec<_>>().join("\n")
    );
    let (_, key) = get(&server, "/repository/all/gpg.key")?;
    let url = format!("{}/repository/all/", server.public);
    let root = common::apt::scratch(&key, |k| format!("deb [signed-by={} arch=amd64] {url} stable main", k.display()))?;
    let (ok, text) = apt_get(root.path(), &["update"])?;
    assert!(ok, "{text}");
    let (ok, text) = apt_get(root.path(), &["download", "alpha"])?;
    assert!(ok, "{text}");
    let log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(log.contains("records of a member that its clients could not parse were left out"), "{log}");
    Ok(())
}

/// The same for APK: an upstream index with a record apk cannot read (`D:foo>=`); the group
/// over the proxy leaves it out, counts it, and its index passes the independent verifier.
#[test]
fn a_poisoned_upstream_record_is_left_out_of_an_apk_group() -> anyhow::Result<()> {
    use packyard_codecs::apk::{index, package, signing::ApkKey};
    let unit = "v3.20/main/x86_64";
    let key = ApkKey::generate(2048)?;
    let key_file = key.file_name("upstream")?;
    let good = build_apk(&Fixture::new("hello", "2.12-r1", "x86_64"))?;
    let info = package::read_package(&good.bytes[..], package::Limits::default())?;
    let record = package::index_record(&info, "x86_64", good.bytes.len() as u64);
    let evil = record.replace("P:hello\n", "P:evil\n").replace("\nD:", "\nD:foo>= ");
    let evil = if evil.contains("\nD:") { evil } else { format!("{evil}D:foo>=\n") };
    let text = format!("{record}\n{evil}\n");
    let upstream = Upstream::start()?;
    upstream.put(
        &format!("{unit}/APKINDEX.tar.gz"),
        index::signed_index("upstream", &text, &key, &key_file, 1_700_000_000)?,
    );
    upstream.put(&format!("{unit}/hello-2.12-r1.apk"), good.bytes.clone());
    let (_dir, server) = server(&[])?;
    let auth = basic(PW);
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("up", Format::Apk, &upstream.url)
            .with(serde_json::json!({"apk": {"architectures": ["x86_64"], "signed_by": key.public_pem()?}})),
    )?;
    common::process::create_repository(&server.public, &auth, Repo::group("all", Format::Apk, &["up"]))?;
    let (s, index) = get(&server, &format!("/repository/all/{unit}/APKINDEX.tar.gz"))?;
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&index));
    let merged = packyard_codecs::apk::index::apkindex_text(&index)?;
    assert!(merged.contains("P:hello\n") && !merged.contains("P:evil"), "{merged}");
    let (_, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert!(
        metrics.lines().any(|l| l == "packyard_group_records_skipped_total{group=\"all\",member=\"up\"} 1"),
        "{metrics}"
    );
    // The independent verifier, with the group's own key and every package it lists.
    let dir = tempfile::tempdir()?;
    let (_, names) = get(&server, "/repository/all/keys/")?;
    let name = String::from_utf8_lossy(&names).lines().next().unwrap_or_default().to_string();
    let (_, pem) = get(&server, &format!("/repository/all/keys/{name}"))?;
    std::fs::write(dir.path().join("APKINDEX.tar.gz"), &index)?;
    std::fs::write(dir.path().join("key.pem"), &pem)?;
    let (s, apk) = get(&server, &format!("/repository/all/{unit}/hello-2.12-r1.apk"))?;
    assert_eq!((s, apk == good.bytes), (200, true));
    std::fs::write(dir.path().join("hello-2.12-r1.apk"), &apk)?;
    let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "key.pem", &name)?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The verifier refuses the upstream's own index (the record it would not read).
    std::fs::write(
        dir.path().join("upstream.tar.gz"),
        upstream.file(&format!("{unit}/APKINDEX.tar.gz")).unwrap_or_default(),
    )?;
    std::fs::write(dir.path().join("upstream.pem"), key.public_pem()?)?;
    let out = common::process::apk_verifier(dir.path(), "upstream.tar.gz", "upstream.pem", &key_file)?;
    assert!(!out.status.success(), "the verifier reads records as apk does");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a record apk would not read"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The acceptance for APK: a repository of 1,000 valid packages plus one upload of each
/// malformed `.PKGINFO` kind — every malformed one refused naming the key —, and the index of the
/// repository and of a group over it passes the independent verifier (apk's reading of the
/// signature, every record and every package it lists).
#[test]
fn apk_a_thousand_packages_and_one_of_each_malformed_kind() -> anyhow::Result<()> {
    let unit = "v3.20/main/x86_64";
    let (_dir, server) = server(&[])?;
    let auth = basic(PW);
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::hosted("alpine", Format::Apk).with(serde_json::json!({"apk": {"architectures": ["x86_64"]}})),
    )?;
    common::process::create_repository(&server.public, &auth, Repo::group("apk-all", Format::Apk, &["alpine"]))?;
    let put = |path: &str, body: &[u8]| {
        status_of(
            ureq::put(&format!("{}/repository/alpine/{path}", server.public))
                .set("Authorization", &auth)
                .send_bytes(body),
        )
    };
    for i in 0..1000 {
        let mut f = Fixture::new(&format!("pkg{i:04}"), &format!("1.{i}-r0"), "x86_64");
        f.depends = vec![format!("so:libc.musl-x86_64.so.1 pkg{:04}>=1.0 cmd:sh", (i + 1) % 1000)];
        let apk = build_apk(&f)?.bytes;
        let (s, text) = put(&format!("{unit}/pkg{i:04}-1.{i}-r0.apk"), &apk)?;
        anyhow::ensure!(s == 201, "pkg{i}: {s} {text}");
    }
    for (line, why) in MALFORMED_APKS {
        let (s, text) = put(&format!("{unit}/evil-1.0-r0.apk"), &apk_with(line)?)?;
        assert_eq!(s, 400, "{line:?}: {text}");
        assert!(text.contains("invalid .PKGINFO") && text.contains(why), "{line:?}: {text}");
    }
    for repo in ["alpine", "apk-all"] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let index = loop {
            let (s, index) = get(&server, &format!("/repository/{repo}/{unit}/APKINDEX.tar.gz"))?;
            if s == 200 && packyard_codecs::apk::index::apkindex_text(&index)?.matches("\nP:pkg").count() == 1000 {
                break index;
            }
            assert!(std::time::Instant::now() < deadline, "{repo} never listed the 1,000 packages");
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let dir = tempfile::tempdir()?;
        let (_, names) = get(&server, &format!("/repository/{repo}/keys/"))?;
        let name = String::from_utf8_lossy(&names).lines().next().unwrap_or_default().to_string();
        let (_, pem) = get(&server, &format!("/repository/{repo}/keys/{name}"))?;
        std::fs::write(dir.path().join("APKINDEX.tar.gz"), &index)?;
        std::fs::write(dir.path().join("key.pem"), &pem)?;
        for i in 0..1000 {
            let file = format!("pkg{i:04}-1.{i}-r0.apk");
            let (s, bytes) = get(&server, &format!("/repository/{repo}/{unit}/{file}"))?;
            anyhow::ensure!(s == 200, "{repo} {file}: {s}");
            std::fs::write(dir.path().join(&file), bytes)?;
        }
        let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "key.pem", &name)?;
        assert!(out.status.success(), "{repo}: {}", String::from_utf8_lossy(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        assert_eq!(summary["packages"].as_array().map(Vec::len), Some(1000), "{repo}");
    }
    Ok(())
}
