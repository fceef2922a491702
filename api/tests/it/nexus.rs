//! Nexus's REST API under `/service/rest/v1`: the response shapes against the field names and
//! types Nexus documents (`tests/fixtures/nexus/`), what each caller may see, and the status
//! checks.

use crate::common;
use crate::common::md5_hex;

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use common::app::{As, Repo, TestApp};

fn fixture(name: &str) -> anyhow::Result<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nexus").join(name);
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// The JSON type of a value, as the fixtures spell it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `got` has exactly the fixture's fields, each of the fixture's type (nested objects that the
/// fixture spells out are compared too).
fn same_shape(got: &Value, want: &Value, at: &str) {
    let (Some(got), Some(want)) = (got.as_object(), want.as_object()) else {
        panic!("{at}: expected an object, got {got}");
    };
    let mut names: Vec<&String> = got.keys().collect();
    let mut wanted: Vec<&String> = want.keys().collect();
    names.sort();
    wanted.sort();
    assert_eq!(names, wanted, "{at}: field names");
    for (k, w) in want {
        let g = &got[k];
        let expected = if w.is_string() { w.as_str().unwrap_or_default() } else { kind(w) };
        assert_eq!(kind(g), expected, "{at}.{k}: {g}");
        if w.as_object().is_some_and(|o| !o.is_empty()) {
            same_shape(g, w, &format!("{at}.{k}"));
        }
    }
}

async fn some_repositories(app: &TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("private", Format::Go).with(json!({"anonymous_read": false}))).await?;
    app.create(Repo::proxy("goproxy", Format::Go, "https://proxy.golang.org/")).await?;
    app.create(Repo::group("go", Format::Go, &["private", "goproxy"])).await?;
    Ok(())
}

fn names(listed: &Value) -> Vec<&str> {
    listed.as_array().map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect()).unwrap_or_default()
}

async fn repositories_are_listed_as_nexus_lists_them(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let r = app.send(TestRequest::get().uri("/service/rest/v1/repositories"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["debs", "go", "goproxy", "private"], "every repository, in name order");
    let want = fixture("repositories.json")?;
    for item in r.json.as_array().into_iter().flatten() {
        same_shape(item, &want["item"], &format!("repository {}", item["name"]));
    }
    let by_name = |n: &str| r.json.as_array().and_then(|a| a.iter().find(|i| i["name"] == n)).cloned();
    let debs = by_name("debs").unwrap_or_default();
    assert_eq!((debs["format"].as_str(), debs["type"].as_str()), (Some("apt"), Some("hosted")));
    let url = debs["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("http://") && url.ends_with("/repository/debs"), "{url}");
    assert_eq!(debs["attributes"], json!({}));
    let proxy = by_name("goproxy").unwrap_or_default();
    assert_eq!(proxy["type"], "proxy");
    same_shape(&proxy["attributes"], &want["proxy_attributes"], "goproxy.attributes");
    assert_eq!(proxy["attributes"]["proxy"]["remoteUrl"], "https://proxy.golang.org/");
    assert_eq!(by_name("go").unwrap_or_default()["type"], "group");
    Ok(())
}
app_test!(repositories_are_listed_as_nexus_lists_them);

/// Anonymous callers see the anonymous-readable repositories; a user sees what their roles let
/// them read, as the repositories' routes decide it; a bad credential is a 401.
async fn each_caller_sees_what_it_may_read(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let list = |who: As| app.send(TestRequest::get().uri("/service/rest/v1/repositories"), who);
    let r = list(As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["debs", "go", "goproxy"], "anonymous: not the private repository");

    let carol = app.with_user("carol").can("private", &["read"]).create().await?;
    let carol = || carol.clone();
    let r = list(carol()).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["private"], "a signed-in user reads what their roles name");
    // The list agrees with the repositories' own routes.
    let r = app.send(TestRequest::get().uri("/repository/debs/dists/stable/InRelease"), carol()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    // A repository closed to anonymous readers leaves the anonymous list.
    app.patch_repository("debs", json!({"anonymous_read": false})).await?;
    let r = list(As::Anonymous).await?;
    assert_eq!(names(&r.json), ["go", "goproxy"]);

    let r = list(As::Basic("carol".into(), "wrong".into())).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    Ok(())
}
app_test!(each_caller_sees_what_it_may_read);

async fn status_answers_while_reads_and_writes_work(app: TestApp) -> anyhow::Result<()> {
    for path in ["/service/rest/v1/status", "/service/rest/v1/status/writable"] {
        let r = app.get(path).await?;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert!(r.bytes.is_empty(), "{path}: no body, as Nexus answers");
    }
    // A blob store that cannot be written to: still readable, no longer writable.
    let tmp = app.services.config.blobs.path.join("tmp");
    std::fs::remove_dir_all(&tmp)?;
    std::fs::write(&tmp, b"not a directory")?;
    let r = app.get("/service/rest/v1/status").await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = app.get("/service/rest/v1/status/writable").await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(r.text.starts_with("blob store: "), "{}", r.text);
    std::fs::remove_file(&tmp)?;
    std::fs::create_dir(&tmp)?;
    assert_eq!(app.get("/service/rest/v1/status/writable").await?.status, StatusCode::OK);

    let r = app.send(TestRequest::post().uri("/service/rest/v1/status"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.text);
    let doc = app.get("/api/v1/openapi.json").await?;
    for path in [
        "/service/rest/v1/repositories",
        "/service/rest/v1/status",
        "/service/rest/v1/status/writable",
        "/service/rest/v1/search",
        "/service/rest/v1/search/assets",
        "/service/rest/v1/search/assets/download",
        "/service/rest/v1/components",
        "/service/rest/v1/components/{id}",
        "/service/rest/v1/assets",
        "/service/rest/v1/assets/{id}",
    ] {
        assert!(doc.json["paths"][path]["get"].is_object(), "{path} is in the OpenAPI document");
    }
    for path in ["/service/rest/v1/components/{id}", "/service/rest/v1/assets/{id}"] {
        assert!(doc.json["paths"][path]["delete"].is_object(), "DELETE {path} is in the OpenAPI document");
    }
    Ok(())
}
app_test!(status_answers_while_reads_and_writes_work);

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// What one artifact of each format uploads: the `.deb`, the `.apk`, the module zip, and the
/// Conan recipe revision's and package revision's files.
struct Uploaded {
    deb: Vec<u8>,
    apk: Vec<u8>,
    zip: Vec<u8>,
    conanfile: Vec<u8>,
    package: Vec<u8>,
}

const CONAN: &str = "/repository/cc/v2/conans/zlib/1.3/acme/stable/revisions/r1";

async fn one_of_each(app: &TestApp) -> anyhow::Result<Uploaded> {
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
    ))?
    .bytes;
    let zip = packyard_codecs::go::testing::simple_module("example.com/acme/hello", "v1.2.0", "one", 0)?;
    let r = app.post("/repository/debs/", deb.clone()).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.put("/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk", apk.clone()).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.put("/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip", zip.clone()).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    let conanfile = b"from conan import ConanFile\n".to_vec();
    let package = {
        let t = packyard_codecs::apt::testing::data_tar(&[("include/zlib.h", b"#pragma once\n")]);
        packyard_codecs::apt::testing::compress(".gz", &t)
    };
    let put = |path: String, body: Vec<u8>| async move {
        let r = app.put(&path, body).await?;
        anyhow::ensure!(r.status == 201, "{path}: {} {}", r.status, r.text);
        Ok::<_, anyhow::Error>(())
    };
    put(format!("{CONAN}/files/conanfile.py"), conanfile.clone()).await?;
    put(format!("{CONAN}/files/conanmanifest.txt"), format!("1\nconanfile.py: {}\n", md5_hex(&conanfile)).into())
        .await?;
    let pkg = format!("{CONAN}/packages/p1/revisions/pr1/files");
    let info = b"[settings]\nos=Linux\n".to_vec();
    put(format!("{pkg}/conaninfo.txt"), info.clone()).await?;
    put(format!("{pkg}/conan_package.tgz"), package.clone()).await?;
    let manifest = format!("1\nconaninfo.txt: {}\nconan_package.tgz: {}\n", md5_hex(&info), md5_hex(&package));
    put(format!("{pkg}/conanmanifest.txt"), manifest.into()).await?;
    Ok(Uploaded { deb, apk, zip, conanfile, package })
}

fn items(r: &common::Reply) -> Vec<Value> {
    r.json["items"].as_array().cloned().unwrap_or_default()
}

fn asset_paths(component: &Value) -> Vec<String> {
    let mut paths: Vec<String> = component["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["path"].as_str().map(str::to_string))
        .collect();
    paths.sort();
    paths
}

/// Every format's upload is a component with its assets, in Nexus's shapes, found by the name
/// people know; each format's group is as documented.
async fn uploads_are_components_in_nexus_shapes(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    let up = one_of_each(&app).await?;
    let want = fixture("component.json")?;
    let search = |query: &str| app.send(TestRequest::get().uri(&format!("/service/rest/v1/search?{query}")), As::Admin);

    let r = search("name=hello").await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    same_shape(&r.json, &want["last_page"], "a last page");
    let found = items(&r);
    let mut formats: Vec<&str> = found.iter().filter_map(|c| c["format"].as_str()).collect();
    formats.sort();
    assert_eq!(formats, ["apk", "apt", "go"], "name=hello: {}", r.text);
    for c in &found {
        same_shape(c, &want["component"], "component");
        for a in c["assets"].as_array().into_iter().flatten() {
            same_shape(a, &want["asset"], "asset");
            assert_eq!(a["repository"], c["repository"]);
            assert_eq!(a["uploader"], "admin");
        }
    }
    let by = |format: &str| found.iter().find(|c| c["format"] == format).cloned().unwrap_or_default();

    let apt = by("apt");
    assert_eq!(
        (apt["repository"].as_str(), apt["group"].as_str(), apt["version"].as_str()),
        (Some("debs"), Some("main"), Some("1.0"))
    );
    assert_eq!(asset_paths(&apt), ["pool/main/h/hello/hello_1.0_amd64.deb"]);
    let deb = &apt["assets"][0];
    assert_eq!(deb["checksum"]["sha256"], sha256_hex(&up.deb));
    assert_eq!(deb["fileSize"], up.deb.len());
    assert_eq!(deb["contentType"], "application/vnd.debian.binary-package");
    let url = deb["downloadUrl"].as_str().unwrap_or_default();
    assert!(url.ends_with("/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb"), "{url}");

    let apk = by("apk");
    assert_eq!((apk["group"].as_str(), apk["version"].as_str()), (Some("v3.20/main/x86_64"), Some("1.0-r0")));
    assert_eq!(asset_paths(&apk), ["v3.20/main/x86_64/hello-1.0-r0.apk"]);
    assert_eq!(apk["assets"][0]["checksum"]["sha256"], sha256_hex(&up.apk));

    let go = by("go");
    assert_eq!(
        (go["group"].as_str(), go["name"].as_str(), go["version"].as_str()),
        (Some("example.com/acme"), Some("hello"), Some("v1.2.0"))
    );
    assert_eq!(
        asset_paths(&go),
        [
            "example.com/acme/hello/@v/v1.2.0.info",
            "example.com/acme/hello/@v/v1.2.0.mod",
            "example.com/acme/hello/@v/v1.2.0.zip"
        ]
    );
    // Every asset's checksum is the bytes the client downloads.
    for a in go["assets"].as_array().into_iter().flatten() {
        let path = format!("/repository/gomods/{}", a["path"].as_str().unwrap_or_default());
        let served = app.get(&path).await?;
        assert_eq!(served.status, StatusCode::OK, "{path}");
        assert_eq!(a["checksum"]["sha256"], sha256_hex(&served.bytes), "{path}");
        assert_eq!(a["fileSize"], served.bytes.len(), "{path}");
    }
    assert!(go["assets"].as_array().into_iter().flatten().any(|a| a["checksum"]["sha256"] == sha256_hex(&up.zip)));

    // Conan: the recipe revision with its package revision's files; MD5 and SHA-1 as Conan has them.
    let r = search("repository=cc").await?;
    let conan = items(&r);
    assert_eq!(conan.len(), 1, "{}", r.text);
    let c = &conan[0];
    same_shape(c, &want["component"], "conan component");
    assert_eq!(
        (c["group"].as_str(), c["name"].as_str(), c["version"].as_str()),
        (Some("acme/stable"), Some("zlib"), Some("1.3"))
    );
    let base = "v2/conans/zlib/1.3/acme/stable/revisions/r1";
    assert_eq!(
        asset_paths(c),
        [
            format!("{base}/files/conanfile.py"),
            format!("{base}/files/conanmanifest.txt"),
            format!("{base}/packages/p1/revisions/pr1/files/conan_package.tgz"),
            format!("{base}/packages/p1/revisions/pr1/files/conaninfo.txt"),
            format!("{base}/packages/p1/revisions/pr1/files/conanmanifest.txt"),
        ]
    );
    let conanfile = c["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["path"].as_str().is_some_and(|p| p.ends_with("conanfile.py")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(conanfile["checksum"]["md5"], md5_hex(&up.conanfile));
    assert_eq!(conanfile["checksum"]["sha1"], hex::encode(<sha1::Sha1 as sha1::Digest>::digest(&up.conanfile)));

    // GET by id answers the same component and asset.
    let id = apt["id"].as_str().unwrap_or_default();
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/components/{id}")), As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json, apt);
    let asset_id = deb["id"].as_str().unwrap_or_default();
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/assets/{asset_id}")), As::Admin).await?;
    assert_eq!(r.json, *deb);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/components/bm90LWFuLWlk"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    assert_ne!(id, asset_id, "a component's id and its asset's differ");
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/assets/{id}")), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "a component's id names no asset: {}", r.text);

    // Keyword, wildcard, version and checksum searches.
    let names_of = |r: &common::Reply| {
        let mut v: Vec<String> = items(r)
            .iter()
            .map(|c| format!("{}:{}", c["repository"].as_str().unwrap_or(""), c["name"].as_str().unwrap_or("")))
            .collect();
        v.sort();
        v
    };
    assert_eq!(names_of(&search("q=zlib").await?), ["cc:zlib"]);
    assert_eq!(
        names_of(&search("q=ACME").await?),
        ["cc:zlib", "gomods:hello"],
        "a keyword matches group words, any case"
    );
    assert_eq!(names_of(&search("q=hel*&format=go").await?), ["gomods:hello"]);
    assert_eq!(names_of(&search("name=hel*&version=1.0").await?), ["debs:hello"]);
    assert_eq!(names_of(&search(&format!("sha256={}", sha256_hex(&up.package))).await?), ["cc:zlib"]);
    assert!(items(&search("name=nothing").await?).is_empty());

    let r = app
        .send(
            TestRequest::get().uri(&format!("/service/rest/v1/search/assets?sha256={}", sha256_hex(&up.apk))),
            As::Admin,
        )
        .await?;
    let found = items(&r);
    assert_eq!(found.len(), 1, "{}", r.text);
    same_shape(&found[0], &want["asset"], "search/assets");
    assert_eq!(found[0]["path"], "v3.20/main/x86_64/hello-1.0-r0.apk");

    // download: a redirect to the one match; several are a 400, none a 404.
    let r = app
        .send(TestRequest::get().uri("/service/rest/v1/search/assets/download?repository=gomods&name=hello"), As::Admin)
        .await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "three assets match: {}", r.text);
    assert!(r.text.contains("several assets"), "{}", r.text);
    let r = app
        .send(
            TestRequest::get().uri(&format!("/service/rest/v1/search/assets/download?sha256={}", sha256_hex(&up.zip))),
            As::Admin,
        )
        .await?;
    assert_eq!(r.status, StatusCode::FOUND, "{}", r.text);
    let location = r.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(location.ends_with("/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip"), "{location}");
    let r = app.send(TestRequest::get().uri("/service/rest/v1/search/assets/download?name=nothing"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    // Parameters a person gets wrong are named.
    let r = search("sort=size").await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text.contains("sort \\\"size\\\" is not one of") || r.text.contains("sort \"size\""), "{}", r.text);
    let r = search("continuationToken=xyz").await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/components"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("repository parameter is required"), "{}", r.text);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/components?repository=nope"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    Ok(())
}
app_test!(uploads_are_components_in_nexus_shapes);

async fn first_id(app: &TestApp, repository: &str) -> anyhow::Result<String> {
    let uri = format!("/service/rest/v1/components?repository={repository}");
    let r = app.send(TestRequest::get().uri(&uri), As::Admin).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "{uri}: {}", r.text);
    Ok(r.json["items"][0]["id"].as_str().unwrap_or_default().to_string())
}

/// `DELETE /components/{id}` deletes as each format's own delete does — the files are gone, the
/// indexes republished without them, the audit log has the entry — and needs the delete
/// privilege; `DELETE /assets/{id}` of a Conan package file deletes that package revision.
async fn deletes_go_through_each_format(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    one_of_each(&app).await?;
    let dave = app.with_user("dave").can("*", &["read"]).create().await?;
    let delete = |uri: String, who: As| app.send(TestRequest::delete().uri(&uri), who);

    let id = first_id(&app, "debs").await?;
    let uri = format!("/service/rest/v1/components/{id}");
    let r = delete(uri.clone(), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let r = delete(uri.clone(), dave.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(r.text.contains("may not delete from repository debs"), "{}", r.text);
    assert_eq!(app.get("/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb").await?.status, StatusCode::OK);

    // APT: the package leaves the pool and, once republished, Packages.
    let r = delete(uri.clone(), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = delete(uri.clone(), As::Admin).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "deleted once: {}", r.text);
    app.publish().await;
    assert_eq!(app.get("/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb").await?.status, StatusCode::NOT_FOUND);
    let packages = app.get("/repository/debs/dists/stable/main/binary-amd64/Packages").await?;
    assert_eq!(packages.status, StatusCode::OK, "{}", packages.text);
    assert!(!packages.text.contains("Package: hello"), "{}", packages.text);

    // APK: the package and its index record.
    let index = || async {
        let r = app.get("/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz").await?;
        anyhow::ensure!(r.status == StatusCode::OK, "APKINDEX: {}", r.status);
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&r.bytes[..]), &mut text)?;
        Ok::<_, anyhow::Error>(String::from_utf8_lossy(&text).into_owned())
    };
    app.publish().await;
    assert!(index().await?.contains("\nP:hello\n"), "listed before");
    let id = first_id(&app, "alpine").await?;
    assert_eq!(delete(format!("/service/rest/v1/components/{id}"), As::Admin).await?.status, StatusCode::NO_CONTENT);
    app.publish().await;
    assert_eq!(app.get("/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk").await?.status, StatusCode::NOT_FOUND);
    assert!(!index().await?.contains("P:hello"), "the index no longer lists it");

    // Go: the version leaves the module's list.
    let id = first_id(&app, "gomods").await?;
    assert_eq!(delete(format!("/service/rest/v1/components/{id}"), As::Admin).await?.status, StatusCode::NO_CONTENT);
    app.publish().await;
    let list = app.get("/repository/gomods/example.com/acme/hello/@v/list").await?;
    assert!(!list.text.contains("v1.2.0"), "{}: {}", list.status, list.text);
    assert_eq!(app.get("/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip").await?.status, StatusCode::NOT_FOUND);

    // Conan: a package file's asset takes its package revision; the recipe revision stays.
    let r = app.send(TestRequest::get().uri("/service/rest/v1/search/assets?repository=cc&q=zlib"), As::Admin).await?;
    let package_file = items(&r)
        .into_iter()
        .find(|a| a["path"].as_str().is_some_and(|p| p.ends_with("conan_package.tgz")))
        .unwrap_or_default();
    let id = package_file["id"].as_str().unwrap_or_default();
    assert_eq!(delete(format!("/service/rest/v1/assets/{id}"), As::Admin).await?.status, StatusCode::NO_CONTENT);
    app.publish().await;
    let r = app.get(&format!("{CONAN}/packages/p1/revisions/pr1/files")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/components?repository=cc"), As::Admin).await?;
    let left = items(&r);
    assert_eq!(left.len(), 1, "{}", r.text);
    assert_eq!(left[0]["assets"].as_array().map(Vec::len), Some(2), "the recipe revision's files stay: {}", r.text);
    let id = left[0]["id"].as_str().unwrap_or_default();
    assert_eq!(delete(format!("/service/rest/v1/components/{id}"), As::Admin).await?.status, StatusCode::NO_CONTENT);
    app.publish().await;
    assert_eq!(app.get("/repository/cc/v2/conans/zlib/1.3/acme/stable/latest").await?.status, StatusCode::NOT_FOUND);

    for repository in ["debs", "alpine", "gomods", "cc"] {
        let r = app
            .send(TestRequest::get().uri(&format!("/service/rest/v1/components?repository={repository}")), As::Admin)
            .await?;
        assert!(items(&r).is_empty(), "{repository}: {}", r.text);
    }
    let audit = app.audit().await?;
    for entry in [
        ("apt.delete", "debs/hello_1.0_amd64"),
        ("apk.delete", "alpine/v3.20/main/x86_64/hello-1.0-r0.apk"),
        ("go.delete", "gomods/example.com/acme/hello@v1.2.0"),
        ("conan.delete", "cc/zlib/1.3@acme/stable#r1:p1#pr1"),
        ("conan.delete", "cc/zlib/1.3@acme/stable#r1"),
    ] {
        assert!(audit.contains(&(entry.0.to_string(), entry.1.to_string())), "{entry:?} in {audit:?}");
    }
    Ok(())
}
app_test!(deletes_go_through_each_format);

/// A user with read on one repository finds nothing in another; anonymous finds only what
/// anonymous may read; a group shows its members' components as its own, with its URLs.
async fn each_caller_finds_what_it_may_read(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    one_of_each(&app).await?;
    app.create(Repo::hosted("private", Format::Go).with(json!({"anonymous_read": false}))).await?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/acme/secret", "v0.1.0", "s", 0)?;
    let r = app.put("/repository/private/example.com/acme/secret/@v/v0.1.0.zip", zip).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    app.create(Repo::group("allgo", Format::Go, &["gomods"])).await?;
    let erin = app.with_user("erin").can("debs", &["read"]).create().await?;
    let erin = || erin.clone();
    let app = &app;
    let found = |uri: &'static str, who: As| async move {
        let r = app.send(TestRequest::get().uri(uri), who).await?;
        anyhow::ensure!(r.status == StatusCode::OK, "{uri}: {} {}", r.status, r.text);
        let mut v: Vec<String> = items(&r)
            .iter()
            .map(|c| format!("{}:{}", c["repository"].as_str().unwrap_or(""), c["name"].as_str().unwrap_or("")))
            .collect();
        v.sort();
        Ok::<_, anyhow::Error>(v)
    };
    assert_eq!(found("/service/rest/v1/search?q=hello", erin()).await?, ["debs:hello"]);
    assert!(found("/service/rest/v1/search?repository=gomods", erin()).await?.is_empty());
    assert!(found("/service/rest/v1/search/assets?repository=alpine", erin()).await?.is_empty());
    let r = app.send(TestRequest::get().uri("/service/rest/v1/components?repository=gomods"), erin()).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let gomods = first_id(app, "gomods").await?;
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/components/{gomods}")), erin()).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    // Anonymous: every anonymous-readable repository, not the private one.
    assert_eq!(found("/service/rest/v1/search?q=acme", As::Anonymous).await?, ["cc:zlib", "gomods:hello"]);
    assert_eq!(
        found("/service/rest/v1/search?q=acme", As::Admin).await?,
        ["cc:zlib", "gomods:hello", "private:secret"]
    );
    let private = first_id(app, "private").await?;
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/components/{private}")), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);

    // Through a group: the member's component, as the group serves it.
    let r = app.send(TestRequest::get().uri("/service/rest/v1/search?repository=allgo"), As::Anonymous).await?;
    let through = items(&r);
    assert_eq!(through.len(), 1, "{}", r.text);
    assert_eq!((through[0]["repository"].as_str(), through[0]["name"].as_str()), (Some("allgo"), Some("hello")));
    let zip = through[0]["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["path"].as_str().is_some_and(|p| p.ends_with(".zip")))
        .cloned()
        .unwrap_or_default();
    let url = zip["downloadUrl"].as_str().unwrap_or_default();
    let path = &url[url.find("/repository/").unwrap_or(0)..];
    assert_eq!(path, "/repository/allgo/example.com/acme/hello/@v/v1.2.0.zip");
    let served = app.send(TestRequest::get().uri(path), As::Anonymous).await?;
    assert_eq!(served.status, StatusCode::OK, "{}", served.text);
    assert_eq!(zip["checksum"]["sha256"], sha256_hex(&served.bytes));
    let id = through[0]["id"].as_str().unwrap_or_default();
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/components/{id}")), As::Anonymous).await?;
    assert_eq!((r.status, r.json["repository"].as_str()), (StatusCode::OK, Some("allgo")), "{}", r.text);
    assert_ne!(id, gomods, "the same component has an id per repository it is seen through");
    Ok(())
}
app_test!(each_caller_finds_what_it_may_read);

/// What was stored before the catalogue appears once the backfill ran, as the uploads wrote it.
async fn existing_data_is_catalogued_after_the_migration(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    one_of_each(&app).await?;
    let everything = || async {
        let r = app.send(TestRequest::get().uri("/service/rest/v1/search"), As::Admin).await?;
        let mut seen: Vec<Value> = items(&r)
            .iter()
            .map(|c| {
                let mut assets: Vec<Value> = c["assets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| json!([a["path"], a["checksum"]["sha256"], a["fileSize"], a["contentType"]]))
                    .collect();
                assets.sort_by_key(|a| a.to_string());
                json!([c["repository"], c["format"], c["group"], c["name"], c["version"], assets])
            })
            .collect();
        seen.sort_by_key(|c| c.to_string());
        Ok::<_, anyhow::Error>(seen)
    };
    let before = everything().await?;
    assert_eq!(before.len(), 4, "{before:?}");
    let db = &app.services.db;
    sqlx::query("DELETE FROM components").execute(db.pool()).await?;
    sqlx::query("DELETE FROM maintenance").execute(db.pool()).await?;
    assert!(everything().await?.is_empty());
    let written = packyard_core::catalogue::backfill(db, packyard_formats::catalogue).await?;
    assert_eq!(written, 5, "a .deb, an .apk, a module version, a recipe and a package revision");
    assert_eq!(everything().await?, before);
    assert_eq!(packyard_core::catalogue::backfill(db, packyard_formats::catalogue).await?, 0, "once");
    Ok(())
}
app_test!(existing_data_is_catalogued_after_the_migration);

/// `continuationToken` pages over 10,000 components, in catalogue order and sorted both ways,
/// while components keep arriving: none twice, none of those there at the start skipped.
async fn pages_follow_the_token_while_uploads_continue(app: TestApp) -> anyhow::Result<()> {
    use packyard_store::db::catalogue::{Component, Entry};
    app.create(Repo::hosted("big", Format::Go)).await?;
    let db = &app.services.db;
    let repo = db.repository_by_name("big").await?.map_or(0, |r| r.id);
    let digits = "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let n = "(a.x * 1000 + b.x * 100 + c.x * 10 + d.x)";
    let name = match db.backend() {
        packyard_store::db::Backend::MySql => format!("CONCAT('pkg', {n})"),
        _ => format!("'pkg' || {n}"),
    };
    let seed = format!(
        "INSERT INTO components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) \
         SELECT {repo}, 'go', {name}, 'example.com', {name}, 'v1.0.0', 0, 'seed' FROM {digits} a, {digits} b, {digits} c, {digits} d"
    );
    sqlx::query(&seed).execute(db.pool()).await?;
    let mut added = 0;
    for (query, label) in [
        ("/service/rest/v1/components?repository=big", "catalogue order"),
        ("/service/rest/v1/search?repository=big&sort=name", "by name"),
        ("/service/rest/v1/search?repository=big&sort=name&direction=desc", "by name, descending"),
    ] {
        let mut seen = std::collections::HashSet::new();
        let (mut token, mut pages) = (None::<String>, 0);
        loop {
            let uri = match &token {
                None => query.to_string(),
                Some(t) => format!("{query}&continuationToken={t}"),
            };
            let r = app.send(TestRequest::get().uri(&uri), As::Admin).await?;
            assert_eq!(r.status, StatusCode::OK, "{label}: {}", r.text);
            for c in items(&r) {
                let name = c["name"].as_str().unwrap_or_default().to_string();
                assert!(seen.insert(name.clone()), "{label}: {name} came twice");
            }
            // Uploads go on between pages.
            let mut tx = db.begin().await?;
            for _ in 0..3 {
                added += 1;
                let component = Component {
                    key: format!("new{added}"),
                    group: "example.com".into(),
                    name: format!("new{added}"),
                    version: "v1.0.0".into(),
                };
                db.catalogue_put(&mut tx, repo, "go", &Entry { component, assets: Vec::new() }, ("seed", 0)).await?;
            }
            tx.commit().await?;
            pages += 1;
            assert!(pages < 400, "{label}: the pages do not end");
            match r.json["continuationToken"].as_str() {
                Some(t) => token = Some(t.to_string()),
                None => break,
            }
        }
        let seeded = (0..10_000).filter(|i| seen.contains(&format!("pkg{i}"))).count();
        assert_eq!(seeded, 10_000, "{label}: every component there at the start is listed once ({pages} pages)");
        assert!(pages >= 100, "{label}: pages of 100");
    }
    Ok(())
}
app_test!(pages_follow_the_token_while_uploads_continue);

/// After downloads through two replicas an asset's `downloadCount` is their number and
/// `lastDownloaded` is set; the warmed downloads ran no query; each flush updates each
/// downloaded asset once, however often it was downloaded. HEAD and 304 are no downloads.
async fn downloads_are_counted_through_two_replicas(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    one_of_each(&app).await?;
    let other = app.replica().await?;
    let started = packyard_store::db::now_ms();
    let deb = "/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb";
    let zip = "/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip";
    let db = &app.services.db.clone();
    // Warm both replicas (one download each of each file), and write those.
    for path in [deb, zip] {
        assert_eq!(app.get(path).await?.status, StatusCode::OK, "{path}");
        assert_eq!(other.get(path).await?.status, StatusCode::OK, "{path}");
    }
    assert_eq!(app.services.downloads.flush(db).await?, 2);
    assert_eq!(other.services.downloads.flush(db).await?, 2);
    app.stop_worker().await?;

    let before = app.t.metrics.db_queries();
    for _ in 0..10 {
        assert_eq!(app.get(deb).await?.status, StatusCode::OK);
        assert_eq!(other.get(deb).await?.status, StatusCode::OK);
        assert_eq!(app.get(zip).await?.status, StatusCode::OK);
    }
    let head = app.send(TestRequest::default().method(actix_web::http::Method::HEAD).uri(deb), As::Anonymous).await?;
    assert_eq!(head.status, StatusCode::OK);
    let etag = head.headers.get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let cached = app.send(TestRequest::get().uri(deb).insert_header(("if-none-match", etag)), As::Anonymous).await?;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
    assert_eq!(app.t.metrics.db_queries() - before, 0, "warmed downloads ran database queries");

    assert_eq!(app.services.downloads.flush(db).await?, 2, "one update per downloaded asset: the .deb and the zip");
    assert_eq!(other.services.downloads.flush(db).await?, 1, "one update: the .deb");
    assert_eq!(app.services.downloads.flush(db).await?, 0, "nothing twice");

    let r = app.send(TestRequest::get().uri("/service/rest/v1/search/assets?name=hello"), As::Admin).await?;
    let count = |path: &str| {
        items(&r)
            .into_iter()
            .find(|a| a["path"] == path)
            .map(|a| (a["downloadCount"].clone(), a["lastDownloaded"].clone()))
    };
    let (n, last) = count("pool/main/h/hello/hello_1.0_amd64.deb").unwrap_or_default();
    assert_eq!(n, 22, "2 warming + 20 downloads through two replicas");
    let last = packyard_model::time::parse_rfc3339(last.as_str().unwrap_or_default()).unwrap_or(0);
    assert!(last >= started - 1, "lastDownloaded {last} is set (after {started})");
    let (n, _) = count("example.com/acme/hello/@v/v1.2.0.zip").unwrap_or_default();
    assert_eq!(n, 12, "2 warming + 10 downloads");
    let (n, last) = count("example.com/acme/hello/@v/v1.2.0.mod").unwrap_or_default();
    assert_eq!((n, last), (json!(0), Value::Null), "never downloaded");
    Ok(())
}
app_test!(downloads_are_counted_through_two_replicas);

/// The worker's count of what each repository holds: in `GET /api/v1/repositories/{name}` and
/// as gauges; a delete is counted at the next refresh.
async fn usage_is_counted_per_repository(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    let up = one_of_each(&app).await?;
    let r = app.call(TestRequest::get().uri("/api/v1/repositories/debs")).await?;
    assert!(r.json.get("usage").is_none(), "not counted yet: {}", r.text);
    packyard_core::catalogue::refresh_usage(&app.services).await?;
    let app = &app;
    let usage = |name: &'static str| async move {
        let r = app.call(TestRequest::get().uri(&format!("/api/v1/repositories/{name}"))).await?;
        anyhow::ensure!(r.status == StatusCode::OK, "{}", r.text);
        Ok::<_, anyhow::Error>((r.json["usage"]["components"].as_i64(), r.json["usage"]["bytes"].as_i64()))
    };
    let len = |b: &[u8]| i64::try_from(b.len()).unwrap_or(0);
    assert_eq!(usage("debs").await?, (Some(1), Some(len(&up.deb))));
    assert_eq!(usage("alpine").await?, (Some(1), Some(len(&up.apk))));
    let (n, bytes) = usage("gomods").await?;
    assert_eq!(n, Some(1));
    assert!(bytes.unwrap_or(0) > len(&up.zip), "the zip, its .mod and .info: {bytes:?}");
    let (n, bytes) = usage("cc").await?;
    assert_eq!(n, Some(1), "one recipe revision");
    assert!(bytes.unwrap_or(0) > len(&up.conanfile) + len(&up.package), "{bytes:?}");
    let m = &app.services.metrics;
    // The blob store's size is what its files hold.
    fn bytes_under(dir: &std::path::Path) -> u64 {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(
                        |e| {
                            if e.path().is_dir() {
                                bytes_under(&e.path())
                            } else {
                                e.metadata().map_or(0, |m| m.len())
                            }
                        },
                    )
                    .sum()
            })
            .unwrap_or(0)
    }
    let on_disk = bytes_under(&app.services.config.blobs.path.join("sha256"));
    assert!(on_disk > 0);
    assert_eq!(u64::try_from(m.blob_store_bytes.get()).unwrap_or(0), on_disk);
    assert_eq!(m.repository_components.with_label_values(&["debs"]).get(), 1);
    assert_eq!(m.repository_bytes.with_label_values(&["debs"]).get(), len(&up.deb));
    // The index snapshots it keeps: every blob their files name, once, at its size on disk.
    let db = &app.services.db;
    let debs = db.repository_by_name("debs").await?.ok_or_else(|| anyhow::anyhow!("no debs"))?;
    let mut named = std::collections::BTreeSet::new();
    for unit in db.units_of(debs.id).await? {
        for (snapshot, ..) in db.snapshot_ids(unit.id).await? {
            named.extend(db.snapshot_files(snapshot).await?.into_iter().map(|f| f.sha256));
        }
    }
    let root = app.services.config.blobs.path.join("sha256");
    let index_on_disk: u64 =
        named.iter().map(|h| std::fs::metadata(root.join(&h[..2]).join(&h[2..4]).join(h)).map_or(0, |m| m.len())).sum();
    assert!(index_on_disk > 0 && named.len() > 3, "{named:?}");
    let r = app.call(TestRequest::get().uri("/api/v1/repositories/debs")).await?;
    assert_eq!(r.json["usage"]["index_bytes"].as_u64(), Some(index_on_disk), "{}", r.text);
    assert_eq!(u64::try_from(m.repository_index_bytes.with_label_values(&["debs"]).get()).ok(), Some(index_on_disk));

    let id = first_id(app, "debs").await?;
    let r = app.call(TestRequest::delete().uri(&format!("/service/rest/v1/components/{id}"))).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    packyard_core::catalogue::refresh_usage(&app.services).await?;
    assert_eq!(usage("debs").await?, (Some(0), Some(0)));
    assert_eq!(m.repository_components.with_label_values(&["debs"]).get(), 0);
    Ok(())
}
app_test!(usage_is_counted_per_repository);

/// The absolute URLs a request gets — `repositories`' `url`, a search's `downloadUrl`, the
/// `Location` of `search/assets/download` — as (url, downloadUrl, Location).
async fn generated_urls(app: &TestApp, with: impl Fn(TestRequest) -> TestRequest) -> anyhow::Result<[String; 3]> {
    let r = app.send(with(TestRequest::get().uri("/service/rest/v1/repositories")), As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let url = r.json[0]["url"].as_str().unwrap_or_default().to_string();
    let r = app.send(with(TestRequest::get().uri("/service/rest/v1/search?repository=debs")), As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let download = r.json["items"][0]["assets"][0]["downloadUrl"].as_str().unwrap_or_default().to_string();
    let r = app
        .send(
            with(TestRequest::get().uri("/service/rest/v1/search/assets/download?repository=debs&name=hello")),
            As::Admin,
        )
        .await?;
    assert_eq!(r.status, StatusCode::FOUND, "{}", r.text);
    let location = r.headers.get("location").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    Ok([url, download, location])
}

async fn a_package_in_debs(app: &TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let control = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n";
    let r = app.post("/repository/debs/", packyard_codecs::apt::testing::deb(control, ".gz")).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    Ok(())
}

/// A client that sends `Forwarded` or `X-Forwarded-*` itself, with no trusted proxy in between.
fn spoofing(req: TestRequest) -> TestRequest {
    req.peer_addr("203.0.113.9:40000".parse().unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0))))
        .insert_header(("Host", "packyard.internal:8080"))
        .insert_header(("X-Forwarded-Host", "evil.example"))
        .insert_header(("X-Forwarded-Proto", "https"))
        .insert_header(("Forwarded", "host=evil2.example;proto=https"))
}

/// Without `server.public_url` or `server.trusted_proxies`, forwarded headers choose nothing:
/// every URL is built from the request's own `Host` (before the fix, `X-Forwarded-Host` won).
async fn forwarded_headers_are_ignored_unless_trusted(app: TestApp) -> anyhow::Result<()> {
    a_package_in_debs(&app).await?;
    let [url, download, location] = generated_urls(&app, spoofing).await?;
    assert_eq!(url, "http://packyard.internal:8080/repository/debs");
    assert_eq!(download, "http://packyard.internal:8080/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb");
    assert_eq!(location, download);
    Ok(())
}
app_test!(forwarded_headers_are_ignored_unless_trusted);

/// `server.public_url` makes every URL, whatever the headers (before the fix,
/// `/service/rest/v1/repositories` ignored it).
async fn the_public_url_makes_every_url(app: TestApp) -> anyhow::Result<()> {
    a_package_in_debs(&app).await?;
    for with in [spoofing as fn(TestRequest) -> TestRequest, |r| r] {
        let [url, download, location] = generated_urls(&app, with).await?;
        assert_eq!(url, "https://repo.example.com/packyard/repository/debs");
        assert_eq!(download, "https://repo.example.com/packyard/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb");
        assert_eq!(location, download);
    }
    Ok(())
}
app_test!(the_public_url_makes_every_url, |c: &mut packyard_model::config::Config| {
    c.server.public_url = Some("https://repo.example.com/packyard/".into());
});

/// Behind a load balancer listed in `server.trusted_proxies`, its forwarded scheme and host make
/// the URLs; the same headers from an address not listed are ignored.
async fn a_trusted_proxy_is_believed(app: TestApp) -> anyhow::Result<()> {
    a_package_in_debs(&app).await?;
    let via_lb = |req: TestRequest| {
        req.peer_addr("10.20.30.40:40000".parse().unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0))))
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("X-Forwarded-Host", "repo.example.com"))
            .insert_header(("X-Forwarded-Proto", "https"))
            .insert_header(("X-Forwarded-For", "198.51.100.7"))
    };
    let [url, download, location] = generated_urls(&app, via_lb).await?;
    assert_eq!(url, "https://repo.example.com/repository/debs");
    assert_eq!(download, "https://repo.example.com/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb");
    assert_eq!(location, download);
    let [url, ..] = generated_urls(&app, spoofing).await?;
    assert_eq!(url, "http://packyard.internal:8080/repository/debs");
    Ok(())
}
app_test!(a_trusted_proxy_is_believed, |c: &mut packyard_model::config::Config| {
    c.server.trusted_proxies = vec!["10.0.0.0/8".into()];
});

/// A load balancer that writes RFC 7239 `Forwarded` (`server.forwarded_headers = "forwarded"`):
/// its own (last) element makes the URLs; the `X-Forwarded-*` a client sends through it, which
/// such a balancer passes on untouched, choose nothing.
async fn a_trusted_rfc7239_proxy_is_believed(app: TestApp) -> anyhow::Result<()> {
    a_package_in_debs(&app).await?;
    let rfc7239 = |req: TestRequest| {
        req.peer_addr("10.20.30.40:40000".parse().unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0))))
            .insert_header(("Host", "packyard.internal:8080"))
            .insert_header(("X-Forwarded-Host", "evil.example"))
            .insert_header(("X-Forwarded-Proto", "http"))
            .insert_header((
                "Forwarded",
                "for=192.0.2.1;host=evil2.example, for=198.51.100.7;proto=https;host=repo.example.com",
            ))
    };
    let [url, download, location] = generated_urls(&app, rfc7239).await?;
    assert_eq!(url, "https://repo.example.com/repository/debs");
    assert_eq!(download, "https://repo.example.com/repository/debs/pool/main/h/hello/hello_1.0_amd64.deb");
    assert_eq!(location, download);
    let [url, ..] = generated_urls(&app, spoofing).await?;
    assert_eq!(url, "http://packyard.internal:8080/repository/debs");
    Ok(())
}
app_test!(a_trusted_rfc7239_proxy_is_believed, |c: &mut packyard_model::config::Config| {
    c.server.trusted_proxies = vec!["10.0.0.0/8".into()];
    c.server.forwarded_headers = packyard_model::config::ForwardedHeaders::Forwarded;
});
