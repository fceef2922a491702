//! What every format's hosted repositories share, in-process on every backend: a refused
//! upload leaves nothing behind (no blob, no row); deletes go through the write policy, the
//! audit log and republication; a format's rows and its publication change are one
//! transaction; an empty repository still serves signed, empty indexes.

use crate::common;
use crate::common::md5_hex;

use common::app::{As, Repo, TestApp};
use packyard_model::repos::Format;
use serde_json::json;

/// Refused for a conflict, a bad archive or a bad manifest: each format keeps neither the
/// refused bytes nor a row for them (before, the blob row was written ahead of the check and the
/// bytes stayed for a collector that never came).
async fn refused_uploads_leave_nothing(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    for repo in [
        Repo::hosted("debs", Format::Apt),
        Repo::hosted("alpine", Format::Apk).with(json!({"apk": {"architectures": ["x86_64"]}})),
        Repo::hosted("gomods", Format::Go),
        Repo::hosted("cc", Format::Conan),
    ] {
        app.create(repo).await?;
    }
    let control = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n";
    let deb = packyard_codecs::apt::testing::deb(control, ".gz");
    let apk = packyard_codecs::apk::testing::build_apk(&packyard_codecs::apk::testing::Fixture::new(
        "hello", "1.0-r0", "x86_64",
    ))?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/m", "v1.0.0", "one", 0)?;
    assert_eq!(app.post("/repository/debs/", deb.clone()).await?.status, 201);
    assert_eq!(app.put("/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk", apk.bytes.clone()).await?.status, 201);
    assert_eq!(app.put("/repository/gomods/example.com/m/@v/v1.0.0.zip", zip.clone()).await?.status, 201);
    let stored = app.blob_files();

    // The same coordinates with other bytes: 409, and those bytes are gone.
    let mut other_deb = deb.clone();
    other_deb.extend_from_slice(b"trailing bytes");
    let other_apk = packyard_codecs::apk::testing::build_apk(&packyard_codecs::apk::testing::Fixture {
        payload: b"other".to_vec(),
        ..packyard_codecs::apk::testing::Fixture::new("hello", "1.0-r0", "x86_64")
    })?;
    let other_zip = packyard_codecs::go::testing::simple_module("example.com/m", "v1.0.0", "two", 0)?;
    for (path, bytes, is_post) in [
        ("/repository/debs/", other_deb, true),
        ("/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk", other_apk.bytes, false),
        ("/repository/gomods/example.com/m/@v/v1.0.0.zip", other_zip, false),
    ] {
        let r = if is_post { app.post(path, bytes.clone()).await? } else { app.put(path, bytes.clone()).await? };
        assert_eq!(r.status, 409, "{path}: {}", r.text);
        assert!(!app.has_blob_row(&bytes).await?, "{path}: the refused bytes have a blob row");
        assert_eq!(app.blob_files(), stored, "{path}: the refused bytes were kept");
    }

    // Conan: a package archive that is not whole, and a manifest that does not match.
    let base = "/repository/cc/v2/conans/lib/1.0/_/_/revisions/r1";
    let conanfile = b"from conan import ConanFile\n";
    assert_eq!(app.put(&format!("{base}/files/conanfile.py"), &conanfile[..]).await?.status, 201);
    let tgz = {
        let t = packyard_codecs::apt::testing::data_tar(&[("include/lib.h", b"#pragma once\n")]);
        packyard_codecs::apt::testing::compress(".gz", &t)
    };
    let stored = app.blob_files();
    let cut = tgz[..tgz.len() - 20].to_vec();
    let r = app.put(&format!("{base}/files/conan_export.tgz"), cut.clone()).await?;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("conan_export.tgz is not a whole archive"), "{}", r.text);
    assert!(!app.has_blob_row(&cut).await?);
    let manifest = format!("123\nconanfile.py: {}\n", md5_hex(b"something else"));
    let r = app.put(&format!("{base}/files/conanmanifest.txt"), manifest.clone()).await?;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("conanfile.py does not match conanmanifest.txt"), "{}", r.text);
    assert!(!app.has_blob_row(manifest.as_bytes()).await?, "the refused manifest has a blob row");
    assert_eq!(app.blob_files(), stored, "refused Conan files were kept");
    // Nothing of the refused manifest was recorded: the right one completes the revision.
    assert_eq!(app.put(&format!("{base}/files/conan_export.tgz"), tgz.clone()).await?.status, 201);
    let manifest = format!("123\nconanfile.py: {}\nconan_export.tgz: {}\n", md5_hex(conanfile), md5_hex(&tgz));
    let r = app.put(&format!("{base}/files/conanmanifest.txt"), manifest).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.get("/repository/cc/v2/conans/lib/1.0/_/_/revisions/r1/files").await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        r.json["files"].as_object().map(|f| f.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["conan_export.tgz".into(), "conanfile.py".into(), "conanmanifest.txt".into()])
    );
    assert_eq!(app.blob_temporaries(), 0);
    Ok(())
}
app_test!(refused_uploads_leave_nothing);

/// Under write policy `allow`, other bytes for a taken coordinate replace it: the old row goes
/// (as by a delete), the new one is served and listed once (Go: only bytes with the hashes its
/// checksum database logged).
async fn allow_replaces_an_artifact_in_place(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    let allow = json!({"write_policy": "allow"});
    app.create(Repo::hosted("debs", Format::Apt).with(allow.clone())).await?;
    let apk_settings = json!({"write_policy": "allow", "apk": {"architectures": ["x86_64"]}});
    app.create(Repo::hosted("alpine", Format::Apk).with(apk_settings)).await?;
    app.create(Repo::hosted("gomods", Format::Go).with(allow)).await?;

    let control = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n";
    let first = packyard_codecs::apt::testing::deb(control, ".gz");
    let second = packyard_codecs::apt::testing::deb(control, ".xz");
    assert_ne!(first, second);
    for deb in [&first, &second] {
        let r = app.post("/repository/debs/?wait=true", deb.clone()).await?;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let pool = "/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb";
    assert_eq!(app.get(pool).await?.bytes, second, "the replacement is served");
    let packages = app.get("/repository/debs/dists/stable/main/binary-amd64/Packages").await?.text;
    assert_eq!(packages.matches("Package: hello\n").count(), 1, "{packages}");

    let fixture = packyard_codecs::apk::testing::Fixture::new("hello", "1.0-r0", "x86_64");
    let one = packyard_codecs::apk::testing::build_apk(&fixture)?;
    let two = packyard_codecs::apk::testing::build_apk(&packyard_codecs::apk::testing::Fixture {
        payload: b"other".to_vec(),
        ..fixture.clone()
    })?;
    let path = "/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk";
    for apk in [&one, &two] {
        let r = app.put(&format!("{path}?wait=true"), apk.bytes.clone()).await?;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    assert_eq!(app.get(path).await?.bytes, two.bytes, "the replacement is served");

    // Go: a version's hashes are in its repository's checksum database for good, so only the
    // same content in other bytes (another compression) replaces it; other content is a 409.
    use packyard_codecs::go::testing::{module_zip, ZipFile};
    let module = |text: &str, deflate: bool| {
        let files = [
            ZipFile { deflate, ..ZipFile::new("go.mod", b"module example.com/m\n") },
            ZipFile { deflate, ..ZipFile::new("m.go", format!("package m\n\nconst T = {text:?}\n").as_bytes()) },
        ];
        module_zip("example.com/m", "v1.0.0", &files)
    };
    let (a, b) = (module("one", true)?, module("one", false)?);
    assert_ne!(a, b);
    for zip in [&a, &b] {
        let r = app.put("/repository/gomods/example.com/m/@v/v1.0.0.zip", zip.clone()).await?;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    assert_eq!(app.get("/repository/gomods/example.com/m/@v/v1.0.0.zip").await?.bytes, b);
    assert_eq!(app.get("/repository/gomods/example.com/m/@v/list").await?.text, "v1.0.0\n");
    let r = app.put("/repository/gomods/example.com/m/@v/v1.0.0.zip", module("two", true)?).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("a logged version's hashes never change"), "{}", r.text);
    assert_eq!(app.get("/repository/gomods/example.com/m/@v/v1.0.0.zip").await?.bytes, b);
    Ok(())
}
app_test!(allow_replaces_an_artifact_in_place);

/// Read-your-writes through groups: an upload that waits for its publication (Go's always does)
/// returns once the groups over the repository serve it too, nested ones included.
async fn a_waited_upload_is_in_its_groups_at_once(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    app.create(Repo::group("go", Format::Go, &["gomods"])).await?;
    app.create(Repo::group("go-all", Format::Go, &["go"])).await?;
    let apk = json!({"apk": {"architectures": ["x86_64"]}});
    app.create(Repo::hosted("alpine", Format::Apk).with(apk.clone())).await?;
    app.create(Repo::group("alpine-all", Format::Apk, &["alpine"]).with(apk)).await?;
    for (i, v) in ["v1.0.0", "v1.1.0", "v1.2.0"].iter().enumerate() {
        let zip = packyard_codecs::go::testing::simple_module("example.com/lib", v, v, 0)?;
        let r = app.put(&format!("/repository/gomods/example.com/lib/@v/{v}.zip"), zip).await?;
        assert_eq!(r.status, 201, "{v}: {}", r.text);
        for group in ["go", "go-all"] {
            let list = app.get(&format!("/repository/{group}/example.com/lib/@v/list")).await?;
            assert_eq!(list.status, 200, "{group}: {}", list.text);
            assert_eq!(list.text.lines().count(), i + 1, "{group} after {v}: {}", list.text);
            let latest = app.get(&format!("/repository/{group}/example.com/lib/@latest")).await?;
            assert!(latest.text.contains(v), "{group} after {v}: {}", latest.text);
        }
    }
    for (i, name) in ["one", "two"].iter().enumerate() {
        let fixture = packyard_codecs::apk::testing::Fixture::new(name, "1.0-r0", "x86_64");
        let pkg = packyard_codecs::apk::testing::build_apk(&fixture)?;
        let path = format!("/repository/alpine/v3.20/main/x86_64/{name}-1.0-r0.apk?wait=true");
        assert_eq!(app.put(&path, pkg.bytes).await?.status, 201);
        let index = app.get("/repository/alpine-all/v3.20/main/x86_64/APKINDEX.tar.gz").await?;
        assert_eq!(index.status, 200, "{}", index.text);
        let members = packyard_codecs::apk::index::split_members(&index.bytes)?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&members[1][..]), &mut text)?;
        assert_eq!(text.matches("\nP:").count() + usize::from(text.starts_with("P:")), i + 1, "{text}");
    }
    Ok(())
}
app_test!(a_waited_upload_is_in_its_groups_at_once);

/// A Go version is deleted as the other formats' packages are: 204, gone from `list` and its
/// files once republished, an audit entry; refused by a read-only repository.
async fn go_versions_are_deleted(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    for v in ["v1.0.0", "v1.1.0"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/lib", v, v, 0)?;
        let r = app.put(&format!("/repository/gomods/example.com/lib/@v/{v}.zip"), zip).await?;
        assert_eq!(r.status, 201, "{v}: {}", r.text);
    }
    // Two path shapes: four segments (also APK's shape) and five.
    let deep = packyard_codecs::go::testing::simple_module("example.com/a/deep", "v0.1.0", "x", 0)?;
    let r = app.put("/repository/gomods/example.com/a/deep/@v/v0.1.0.zip", deep).await?;
    assert_eq!(r.status, 201, "{}", r.text);

    let r = app.delete("/repository/gomods/example.com/lib/@v/v1.0.0.zip").await?;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(app.get("/repository/gomods/example.com/lib/@v/list").await?.text, "v1.1.0\n");
    for ext in ["zip", "mod", "info"] {
        let r = app.get(&format!("/repository/gomods/example.com/lib/@v/v1.0.0.{ext}")).await?;
        assert_eq!(r.status, 404, "{ext}: {}", r.text);
    }
    assert_eq!(app.get("/repository/gomods/example.com/lib/@v/v1.1.0.zip").await?.status, 200);
    assert!(app.audit().await?.contains(&("go.delete".into(), "gomods/example.com/lib@v1.0.0".into())));
    let r = app.delete("/repository/gomods/example.com/lib/@v/v1.0.0.zip").await?;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = app.delete("/repository/gomods/example.com/a/deep/@v/v0.1.0.info").await?;
    assert_eq!(r.status, 204, "{}", r.text);
    assert_eq!(app.get("/repository/gomods/example.com/a/deep/@v/list").await?.text, "");
    let r = app.delete("/repository/gomods/example.com/lib/@v/list").await?;
    assert_eq!(r.status, 405, "{}", r.text);
    // Anonymous callers never delete; a read-only repository keeps what it has.
    let r = app
        .send(
            actix_web::test::TestRequest::delete().uri("/repository/gomods/example.com/lib/@v/v1.1.0.zip"),
            As::Anonymous,
        )
        .await?;
    assert_eq!(r.status, 401, "{}", r.text);
    app.patch_repository("gomods", json!({"write_policy": "deny"})).await?;
    let r = app.delete("/repository/gomods/example.com/lib/@v/v1.1.0.zip").await?;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.text.contains("read-only"), "{}", r.text);
    assert_eq!(app.get("/repository/gomods/example.com/lib/@v/list").await?.text, "v1.1.0\n");
    Ok(())
}
app_test!(go_versions_are_deleted);

/// A new hosted APK repository answers `APKINDEX.tar.gz` for its configured architectures with
/// an empty index signed by its key (so `apk update` works before the first upload), and 404
/// for others.
async fn an_empty_apk_repository_has_signed_indexes(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("alpine", Format::Apk).with(json!({"apk": {"architectures": ["x86_64"]}}))).await?;
    let r = app
        .call(
            actix_web::test::TestRequest::put()
                .uri("/api/v1/repositories/alpine/signing-key")
                .set_json(json!({"generate": true, "algorithm": "rsa2048"})),
        )
        .await?;
    assert_eq!(r.status, 200, "{}", r.text);
    let key_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    let index = app.get("/repository/alpine/v3.21/main/x86_64/APKINDEX.tar.gz").await?;
    assert_eq!(index.status, 200, "{}", index.text);
    let pem = app.get(&format!("/repository/alpine/keys/{key_name}")).await?.text;
    let key = packyard_codecs::apk::signing::parse_public_keys(&pem)?;
    let verified = packyard_codecs::apk::index::verify_index(&index.bytes, &key)?;
    let text = packyard_codecs::apk::index::index_member_text(&verified)?;
    assert_eq!(text, "", "an empty index lists nothing");
    let r = app.get("/repository/alpine/v3.21/main/aarch64/APKINDEX.tar.gz").await?;
    assert_eq!(r.status, 404);
    // A new key: replicas drop the index the old key signed.
    let r = app
        .call(
            actix_web::test::TestRequest::put()
                .uri("/api/v1/repositories/alpine/signing-key")
                .set_json(json!({"generate": true, "algorithm": "rsa2048"})),
        )
        .await?;
    assert_eq!(r.status, 200, "{}", r.text);
    let new_name = r.json["key_name"].as_str().unwrap_or_default().to_string();
    let pem = app.get(&format!("/repository/alpine/keys/{new_name}")).await?.text;
    let key = packyard_codecs::apk::signing::parse_public_keys(&pem)?;
    app.services.poll_watermarks().await?;
    let index = app.get("/repository/alpine/v3.21/main/x86_64/APKINDEX.tar.gz").await?;
    assert!(packyard_codecs::apk::index::verify_index(&index.bytes, &key).is_ok(), "signed with the new key");
    Ok(())
}
app_test!(an_empty_apk_repository_has_signed_indexes);

/// Conan records a revision's rows and its publication changes in one transaction. A failure
/// of the change record (injected with a trigger on the outbox) used to leave the revision
/// complete but never projected, and a deleted one still listed; now the whole write is undone
/// and its retry succeeds.
#[actix_web::test]
async fn conan_rows_and_publication_changes_are_one_transaction() -> anyhow::Result<()> {
    let Some(mut app) = TestApp::new(packyard_store::db::Backend::Sqlite).await? else { return Ok(()) };
    app.start_worker();
    app.create(Repo::hosted("cc", Format::Conan)).await?;
    let base = "/repository/cc/v2/conans/lib/1.0/_/_";
    let conanfile = b"from conan import ConanFile\n";
    assert_eq!(app.put(&format!("{base}/revisions/r1/files/conanfile.py"), &conanfile[..]).await?.status, 201);
    let pool = app.services.db.pool().clone();
    let break_outbox = || async {
        sqlx::query(
            "CREATE TRIGGER no_outbox BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
        )
        .execute(&pool)
        .await
    };
    break_outbox().await?;
    let manifest = format!("123\nconanfile.py: {}\n", md5_hex(conanfile));
    let r = app.put(&format!("{base}/revisions/r1/files/conanmanifest.txt"), manifest.clone()).await?;
    assert!(r.status.is_server_error(), "{}: {}", r.status, r.text);
    let repo = app.services.db.repository_by_name("cc").await?.map_or(0, |r| r.id);
    let rev = packyard_formats::conan::rows::revision(&app.services.db, repo, "lib/1.0", "r1", "", "").await?;
    assert_eq!(rev.map(|r| r.complete), Some(false), "the revision was completed without its publication change");
    sqlx::query("DROP TRIGGER no_outbox").execute(&pool).await?;
    let r = app.put(&format!("{base}/revisions/r1/files/conanmanifest.txt"), manifest).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.get(&format!("{base}/latest")).await?;
    assert_eq!((r.status.as_u16(), r.json["revision"].as_str()), (200, Some("r1")), "{}", r.text);

    // A delete whose change cannot be recorded leaves the revision where it was.
    break_outbox().await?;
    let r = app.delete(&format!("{base}/revisions/r1")).await?;
    assert!(r.status.is_server_error(), "{}: {}", r.status, r.text);
    sqlx::query("DROP TRIGGER no_outbox").execute(&pool).await?;
    assert_eq!(app.get(&format!("{base}/revisions/r1/files/conanfile.py")).await?.status, 200);
    let r = app.delete(&format!("{base}/revisions/r1")).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(app.get(&format!("{base}/latest")).await?.status, 404);
    app.finish().await
}

/// The harness's after-test check can fail: a unit whose build fails (here: no builder for its
/// kind) is reported with its repository, counts and error; a repository published is not.
async fn the_after_test_check_reports_units_left_unpublished(app: TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let control = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n";
    let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(control, ".gz")).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    app.after_test().check().await?;
    let id = app.t.db.repository_by_name("debs").await?.map(|r| r.id).ok_or_else(|| anyhow::anyhow!("no debs"))?;
    app.t.db.request_changes(id, &[("no-such-kind".into(), "x".into())]).await?;
    let Err(e) = app.after_test().check().await else { anyhow::bail!("a unit whose build fails passed the check") };
    assert_eq!(
        e.to_string(),
        "the test left publication units unpublished (a test that means to calls app.leaves_units_unpublished()):\n\
         debs: 1 pending, 1 failing; last error: no builder for unit kind \"no-such-kind\""
    );
    app.leaves_units_unpublished();
    app.after_test().check().await
}
app_test!(the_after_test_check_reports_units_left_unpublished);
