//! Conan 2, first part: `v1/ping` (the capabilities header, to anonymous callers too),
//! `v2/users/authenticate` (a short-lived, repository-scoped bearer token) and
//! `v2/users/check_credentials` (401 once the token is missing, wrong or expired), checked with
//! plain HTTP and with the real `conan` client (`conan remote add`, `conan remote login`).

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::process::Command;

use common::process::{basic, nexus, nexus_component, nexus_delete, start, status_of};

const PW: &str = "conan-admin";

fn conan_available() -> bool {
    common::process::available("conan", "--version")
}

#[test]
fn ping_login_and_token_expiry() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_CONAN__TOKEN_TTL_SECS", "2")])?;
    server.wait_ready()?;
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(Repo::hosted("conan-local", Format::Conan).with(serde_json::json!({"anonymous_read": false}))),
    )?;
    assert_eq!(s, 201, "{text}");
    let url = format!("{}/repository/conan-local", server.public);

    // Ping: to anyone, even where anonymous callers may not read.
    let r = ureq::get(&format!("{url}/v1/ping")).call()?;
    assert_eq!(r.header("x-conan-server-capabilities"), Some("revisions"));
    let (s, _) = status_of(ureq::get(&format!("{}/repository/nothere/v1/ping", server.public)).call())?;
    assert_eq!(s, 404);

    // Authenticate: Basic only; a wrong password is a 401.
    let wrong = format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "admin:wrong"));
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &wrong).call())?;
    assert_eq!(s, 401);
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).call())?;
    assert_eq!(s, 401);
    let token =
        ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &basic(PW)).call()?.into_string()?;
    assert!(token.starts_with("pky_"), "{token}");
    let bearer = format!("Bearer {token}");
    // A bearer token cannot log in again; an API token given as the password is the login.
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &bearer).call())?;
    assert_eq!(s, 401);
    let api_token: serde_json::Value = ureq::post(&format!("{}/api/v1/tokens", server.public))
        .set("Authorization", &basic(PW))
        .send_json(serde_json::json!({"name": "ci"}))?
        .into_json()?;
    let api_token = api_token["token"].as_str().unwrap_or_default().to_string();
    let with_token = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("admin:{api_token}"))
    );
    let (s, text) =
        status_of(ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &with_token).call())?;
    assert_eq!((s, text.as_str()), (200, api_token.as_str()));

    // check_credentials: 200 with the token, 401 without, and 401 once it expired.
    let (s, text) =
        status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).set("Authorization", &bearer).call())?;
    assert_eq!((s, text.as_str()), (200, "admin"));
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).call())?;
    assert_eq!(s, 401);
    // The token is scoped to this repository: it reads no other, though its user may.
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(Repo::hosted("debs", Format::Apt).with(serde_json::json!({"anonymous_read": false}))),
    )?;
    assert_eq!(s, 201, "{text}");
    let other = format!("{}/repository/debs/dists/stable/Release", server.public);
    let (s, _) = status_of(ureq::get(&other).set("Authorization", &basic(PW)).call())?;
    assert_ne!(s, 403, "the admin reads it with a password");
    let (s, text) = status_of(ureq::get(&other).set("Authorization", &bearer).call())?;
    assert_eq!(s, 403, "{text}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let (s, text) =
        status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).set("Authorization", &bearer).call())?;
    assert_eq!(s, 401, "an expired token is a 401 (the client logs in again), not a 403: {text}");

    // The real client logs in.
    if !conan_available() {
        eprintln!("skipped the conan client part: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    let conan = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).env("CONAN_HOME", home.path()).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    conan(&["remote", "add", "packyard", &url])?;
    let out = conan(&["remote", "login", "packyard", "admin", "-p", PW])?;
    assert!(out.contains("to 'admin' (authenticated)"), "{out}");
    let out = conan(&["remote", "list-users"])?;
    assert!(out.contains("Username: admin") && out.contains("authenticated: True"), "{out}");
    let out = conan(&["remote", "login", "packyard", "admin", "-p", &api_token])?;
    assert!(out.contains("with user 'admin'"), "login with an API token: {out}");
    let out = Command::new("conan")
        .args(["remote", "login", "packyard", "admin", "-p", "wrong"])
        .env("CONAN_HOME", home.path())
        .output()?;
    assert!(!out.status.success());

    // Once the token expired (2 s here), the client hears 401 and logs in again by itself with
    // the credentials it is given, and the upload goes through.
    conan(&["remote", "login", "packyard", "admin", "-p", PW])?;
    conan(&["profile", "detect"])?;
    let proj = home.path().join("proj");
    std::fs::create_dir_all(&proj)?;
    let run = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("conan")
            .args(args)
            .current_dir(&proj)
            .env("CONAN_HOME", home.path())
            .env("CONAN_LOGIN_USERNAME_PACKYARD", "admin")
            .env("CONAN_PASSWORD_PACKYARD", PW)
            .output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    run(&["new", "header_lib", "-d", "name=relog", "-d", "version=1.0"])?;
    run(&["create", ".", "-tf="])?;
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let out = run(&["upload", "relog/1.0", "-r", "packyard", "-c"])?;
    assert!(out.contains("Uploading recipe 'relog/1.0"), "{out}");
    Ok(())
}

/// The REST v2 upload rules over plain HTTP: a revision is invisible until its manifest arrives
/// and matches; checksums are checked; a completed revision never changes; packages need their
/// recipe revision; paths are checked. Then the real client uploads, installs (also through a
/// version range), lists, searches and removes.
#[test]
fn hosted_recipes_and_packages() -> anyhow::Result<()> {
    use sha1::Digest as _;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    server.wait_ready()?;
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(Repo::hosted("conan-local", Format::Conan)),
    )?;
    assert_eq!(s, 201, "{text}");
    let url = format!("{}/repository/conan-local", server.public);
    let rec = format!("{url}/v2/conans/demo/1.0/_/_");
    let put = |path: &str, body: &[u8], sha1: Option<&str>| -> anyhow::Result<(u16, String)> {
        let mut r = ureq::put(&format!("{rec}/{path}")).set("Authorization", &basic(PW));
        if let Some(h) = sha1 {
            r = r.set("X-Checksum-Sha1", h);
        }
        status_of(r.send_bytes(body))
    };
    let get = |path: &str| -> anyhow::Result<(u16, String)> { status_of(ureq::get(&format!("{rec}/{path}")).call()) };
    let conanfile = b"from conan import ConanFile\nclass Demo(ConanFile):\n    name = 'demo'\n";
    let md5 = |b: &[u8]| hex::encode(<md5::Md5 as md5::Digest>::digest(b));
    let sha1 = |b: &[u8]| hex::encode(sha1::Sha1::digest(b));
    let manifest = format!("1700000000\nconanfile.py: {}\n", md5(conanfile));

    // A wrong checksum, a bad path: refused.
    let (s, text) = put("revisions/r1/files/conanfile.py", conanfile, Some(&"0".repeat(40)))?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("X-Checksum-Sha1"), "{text}");
    let (s, _) = put("revisions/r1/files/c:conanfile.py", conanfile, None)?;
    assert_eq!(s, 400);
    // `..` as sent on the wire (an HTTP library would resolve it first).
    let raw = |path: &str| -> anyhow::Result<String> {
        use std::io::{Read, Write};
        let addr = server.public.trim_start_matches("http://");
        let mut c = std::net::TcpStream::connect(addr)?;
        write!(c, "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx", basic(PW))?;
        let mut out = String::new();
        c.read_to_string(&mut out)?;
        Ok(out)
    };
    for bad in ["a/../../x", "../x", "%2e%2e/x"] {
        let answer = raw(&format!("/repository/conan-local/v2/conans/demo/1.0/_/_/revisions/r1/files/{bad}"))?;
        assert!(answer.starts_with("HTTP/1.1 400"), "{bad}: {answer}");
    }
    // Uploaded but invisible until the manifest.
    assert_eq!(put("revisions/r1/files/conanfile.py", conanfile, Some(&sha1(conanfile)))?.0, 201);
    assert_eq!(get("revisions")?.0, 404);
    assert_eq!(get("revisions/r1/files")?.0, 404);
    // A manifest that does not match what was uploaded.
    let (s, text) =
        put("revisions/r1/files/conanmanifest.txt", format!("1\nconanfile.py: {}\n", "0".repeat(32)).as_bytes(), None)?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("does not match conanmanifest.txt"), "{text}");
    let (s, text) = put("revisions/r9/files/conanmanifest.txt", manifest.as_bytes(), None)?;
    assert_eq!(s, 400, "a manifest listing a file that is not there: {text}");
    assert!(text.contains("arrived before conanfile.py"), "{text}");
    let (s, text) = status_of(ureq::get(&format!("{url}/v2/conans/bad$name/1.0/_/_/latest")).call())?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("invalid name"), "{text}");
    assert_eq!(put("revisions/r1/files/conanmanifest.txt", manifest.as_bytes(), None)?.0, 201);
    let (s, latest) = get("latest")?;
    assert_eq!(s, 200);
    let latest: serde_json::Value = serde_json::from_str(&latest)?;
    assert_eq!(latest["revision"], "r1");
    assert!(latest["time"].as_str().is_some_and(|t| t.ends_with("+00:00")), "{latest}");
    let r = ureq::get(&format!("{rec}/revisions/r1/files")).call()?;
    assert_eq!(r.content_type(), "application/json");
    let files: serde_json::Value = serde_json::from_str(&r.into_string()?)?;
    assert_eq!(
        files["files"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["conanfile.py".to_string(), "conanmanifest.txt".to_string()])
    );
    let head = ureq::head(&format!("{rec}/revisions/r1/files/conanfile.py")).call()?;
    assert_eq!(head.header("content-length"), Some(conanfile.len().to_string().as_str()));
    assert_eq!(head.header("accept-ranges"), Some("bytes"));
    assert_eq!(get("revisions/r1/files/conanfile.py")?.1.as_bytes(), conanfile);
    // A completed revision never changes; retrying identical bytes is fine; metadata may change.
    assert_eq!(put("revisions/r1/files/conanfile.py", b"other", None)?.0, 409);
    assert_eq!(put("revisions/r1/files/conanfile.py", conanfile, None)?.0, 201);
    assert_eq!(put("revisions/r1/files/metadata/logs/build.log", b"log", None)?.0, 201);
    // Packages: not for an unknown recipe revision.
    assert_eq!(put("revisions/nope/packages/p1/revisions/q1/files/conaninfo.txt", b"", None)?.0, 404);
    assert_eq!(put("revisions/r1/packages/p1/revisions/q1/files/conaninfo.txt", b"[settings]\n", None)?.0, 201);
    assert_eq!(
        put(
            "revisions/r1/packages/p1/revisions/q1/files/conanmanifest.txt",
            format!("1\nconaninfo.txt: {}\n", md5(b"[settings]\n")).as_bytes(),
            None
        )?
        .0,
        201
    );
    let (s, search) = get("search")?;
    assert_eq!(s, 200);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&search)?["p1"]["content"], "[settings]\n");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&get("revisions/r1/packages/p1/latest")?.1)?["revision"],
        "q1"
    );
    assert_eq!(get("revisions/r1/packages/p2/latest")?.0, 404, "a missing binary is a 404");
    let (s, found) = status_of(ureq::get(&format!("{url}/v2/conans/search?q=DEM*")).call())?;
    assert_eq!(
        (s, serde_json::from_str::<serde_json::Value>(&found)?["results"].clone()),
        (200, serde_json::json!(["demo/1.0"]))
    );
    // Deletes answer 200.
    let del = |path: &str| status_of(ureq::delete(&format!("{rec}/{path}")).set("Authorization", &basic(PW)).call());
    assert_eq!(del("revisions/r1/packages/p1/revisions/q1")?.0, 200);
    assert_eq!(del("revisions/r1")?.0, 200);
    assert_eq!(get("latest")?.0, 404);

    if !conan_available() {
        eprintln!("skipped the conan client part: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    let conan = |cwd: &std::path::Path, args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", home.path()).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    let h = home.path();
    conan(h, &["profile", "detect"])?;
    conan(h, &["remote", "add", "packyard", &url])?;
    conan(h, &["remote", "login", "packyard", "admin", "-p", PW])?;
    for v in ["1.0", "1.1", "2.0"] {
        let proj = h.join(format!("hello-{v}"));
        std::fs::create_dir_all(&proj)?;
        conan(&proj, &["new", "header_lib", "-d", "name=hello", "-d", &format!("version={v}")])?;
        conan(&proj, &["create", ".", "-tf="])?;
    }
    conan(h, &["upload", "*", "-r", "packyard", "-c"])?;
    conan(h, &["remove", "*", "-c"])?;
    let out = conan(h, &["install", "--requires=hello/1.0", "-r", "packyard"])?;
    assert!(out.contains("hello/1.0: Package installed"), "{out}");
    conan(h, &["remove", "*", "-c"])?;
    let out = conan(h, &["install", "--requires=hello/[>=1.0 <2]", "-r", "packyard"])?;
    assert!(out.contains("hello/1.1#"), "the range resolves to the newest 1.x: {out}");
    let out = conan(h, &["list", "hello/*#*:*", "-r", "packyard"])?;
    assert!(out.contains("hello/1.0") && out.contains("hello/1.1") && out.contains("hello/2.0"), "{out}");
    assert!(out.contains("da39a3ee5e6b4b0d3255bfef95601890afd80709"), "the header-only package id: {out}");
    let out = conan(h, &["search", "hel*", "-r", "packyard"])?;
    assert!(out.contains("hello/2.0"), "{out}");
    conan(h, &["remove", "hello/2.0#*", "-r", "packyard", "-c"])?;
    let out = conan(h, &["list", "hello/*", "-r", "packyard"])?;
    assert!(!out.contains("hello/2.0") && out.contains("hello/1.1"), "{out}");

    // Nexus's REST API: the recipe revisions the client uploaded are components; deleting one
    // through it takes it from the client's view.
    let (public, auth) = (server.public.as_str(), basic(PW));
    let listed = nexus(public, &auth, "search?repository=conan-local&name=hello&sort=version")?;
    let versions: Vec<&str> =
        listed["items"].as_array().into_iter().flatten().filter_map(|c| c["version"].as_str()).collect();
    assert_eq!(versions, ["1.1", "1.0"], "{listed}");
    let v11 = nexus_component(public, &auth, "repository=conan-local&name=hello&version=1.1")?;
    let paths: Vec<&str> = v11["assets"].as_array().into_iter().flatten().filter_map(|a| a["path"].as_str()).collect();
    assert!(paths.iter().any(|p| p.ends_with("/files/conanfile.py")), "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("/packages/da39a3ee5e6b4b0d3255bfef95601890afd80709/")), "{paths:?}");
    assert_eq!(nexus_delete(public, &auth, v11["id"].as_str().unwrap_or_default())?, 204);
    let out = conan(h, &["list", "hello/*", "-r", "packyard"])?;
    assert!(!out.contains("hello/1.1") && out.contains("hello/1.0"), "{out}");
    conan(h, &["remove", "*", "-c"])?;
    let out = conan(h, &["install", "--requires=hello/[>=1.0 <2]", "-r", "packyard"])?;
    assert!(out.contains("hello/1.0#"), "the range resolves to what is left: {out}");
    Ok(())
}

/// The revision lifecycle through the actix service on every backend: invisible until the
/// manifest, visible after, immutable, deleted.
async fn conan_revisions(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use actix_web::test::{self as atest, TestRequest};
    let Some(t) = packyard_store::testing::TestDb::fresh(backend).await? else { return Ok(()) };
    let services = common::services(&t).await?;
    let app = atest::init_service(packyard_api::app::public_app(services.clone())).await;
    let r = common::call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(common::admin())
            .set_json(Repo::hosted("c", Format::Conan)),
    )
    .await?;
    assert_eq!(r.status, 201, "{}", r.text);
    // The embedded worker publishes the projections writes wait for.
    let worker = {
        let s = services.clone();
        let due = packyard_store::db::publication::Due { debounce_ms: 0, max_delay_ms: 0 };
        tokio::spawn(async move {
            loop {
                packyard_worker::publisher::Publisher::new(s.clone(), packyard_worker::builders(&s))
                    .with_due(due)
                    .run_until_idle()
                    .await;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    let base = "/repository/c/v2/conans/lib/2.1/team/stable";
    let put = |path: &str, body: &[u8]| {
        TestRequest::put().uri(&format!("{base}/{path}")).insert_header(common::admin()).set_payload(body.to_vec())
    };
    let conanfile = b"from conan import ConanFile\n";
    let md5 = hex::encode(<md5::Md5 as md5::Digest>::digest(conanfile));
    assert_eq!(common::call(&app, put("revisions/abc/files/conanfile.py", conanfile)).await?.status, 201);
    assert_eq!(common::call(&app, TestRequest::get().uri(&format!("{base}/latest"))).await?.status, 404);
    let manifest = format!("123\nconanfile.py: {md5}\n");
    assert_eq!(
        common::call(&app, put("revisions/abc/files/conanmanifest.txt", manifest.as_bytes())).await?.status,
        201
    );
    let r = common::call(&app, TestRequest::get().uri(&format!("{base}/latest"))).await?;
    assert_eq!((r.status.as_u16(), r.json["revision"].as_str()), (200, Some("abc")));
    let r = common::call(&app, TestRequest::get().uri("/repository/c/v2/conans/search?q=lib*")).await?;
    assert_eq!(r.json["results"], serde_json::json!(["lib/2.1@team/stable"]));
    // Warmed reads of the projections and of a file make no query.
    let warm = [
        format!("{base}/latest"),
        format!("{base}/revisions"),
        format!("{base}/revisions/abc/files"),
        format!("{base}/revisions/abc/files/conanfile.py"),
        "/repository/c/v2/conans/search?q=lib*".to_string(),
    ];
    for p in &warm {
        assert_eq!(common::call(&app, TestRequest::get().uri(p)).await?.status, 200, "{p}");
    }
    let before = t.metrics.db_queries();
    for p in &warm {
        assert_eq!(common::call(&app, TestRequest::get().uri(p)).await?.status, 200, "{p}");
    }
    assert_eq!(t.metrics.db_queries() - before, 0, "warmed Conan reads ran database queries");
    assert_eq!(common::call(&app, put("revisions/abc/files/conanfile.py", b"changed")).await?.status, 409);
    let body = atest::call_and_read_body(
        &app,
        TestRequest::get().uri(&format!("{base}/revisions/abc/files/conanfile.py")).to_request(),
    )
    .await;
    assert_eq!(&body[..], conanfile);
    let r =
        common::call(&app, TestRequest::delete().uri(&format!("{base}/revisions/abc")).insert_header(common::admin()))
            .await?;
    assert_eq!(r.status, 200);
    assert_eq!(common::call(&app, TestRequest::get().uri(&format!("{base}/revisions"))).await?.status, 404);
    worker.abort();
    Ok(())
}
on_every_backend!(conan_revisions);

/// A proxy whose upstream is a second Packyard, and a group of a hosted repository and that
/// proxy, used by the real client.
#[test]
fn proxy_and_group_with_the_real_client() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    fn create(server: &common::process::Server, spec: impl Into<serde_json::Value>) -> anyhow::Result<()> {
        common::process::create_repository(&server.public, &basic(PW), spec)
    }
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    create(&upstream, Repo::hosted("conan-up", Format::Conan))?;
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
    )?;
    server.wait_ready()?;
    create(&server, Repo::proxy("conan-proxy", Format::Conan, &format!("{}/repository/conan-up/", upstream.public)))?;
    create(&server, Repo::hosted("conan-local", Format::Conan))?;
    create(&server, Repo::group("conan-all", Format::Conan, &["conan-local", "conan-proxy"]))?;

    let home = tempfile::tempdir()?;
    let h = home.path();
    let conan = |args: &[&str], cwd: &std::path::Path| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    conan(&["profile", "detect"], h)?;
    for (name, url) in [
        ("up", format!("{}/repository/conan-up", upstream.public)),
        ("local", format!("{}/repository/conan-local", server.public)),
        ("proxy", format!("{}/repository/conan-proxy", server.public)),
        ("all", format!("{}/repository/conan-all", server.public)),
    ] {
        conan(&["remote", "add", name, &url], h)?;
    }
    conan(&["remote", "login", "up", "admin", "-p", PW], h)?;
    conan(&["remote", "login", "local", "admin", "-p", PW], h)?;
    for (v, remote) in [("1.0", "up"), ("2.0", "local")] {
        let proj = h.join(format!("hello-{v}"));
        std::fs::create_dir_all(&proj)?;
        conan(&["new", "header_lib", "-d", "name=hello", "-d", &format!("version={v}")], &proj)?;
        conan(&["create", ".", "-tf="], &proj)?;
        conan(&["upload", &format!("hello/{v}"), "-r", remote, "-c"], h)?;
    }
    // Through the proxy: the upstream's package.
    conan(&["remove", "*", "-c"], h)?;
    let out = conan(&["install", "--requires=hello/1.0", "-r", "proxy"], h)?;
    assert!(out.contains("hello/1.0: Package installed"), "{out}");
    // Through the group: 1.0 from the proxy member, 2.0 from the hosted one, search merged, a
    // range over both.
    conan(&["remove", "*", "-c"], h)?;
    let out = conan(&["install", "--requires=hello/1.0", "-r", "all"], h)?;
    assert!(out.contains("hello/1.0: Package installed"), "{out}");
    let out = conan(&["search", "hello", "-r", "all"], h)?;
    assert!(out.contains("hello/1.0") && out.contains("hello/2.0"), "{out}");
    conan(&["remove", "*", "-c"], h)?;
    let out = conan(&["install", "--requires=hello/[>=1.0 <3]", "-r", "all"], h)?;
    assert!(out.contains("hello/2.0#"), "{out}");
    // A group is read-only.
    let (s, _) = status_of(
        ureq::put(&format!("{}/repository/conan-all/v2/conans/x/1/_/_/revisions/r/files/conanfile.py", server.public))
            .set("Authorization", &basic(PW))
            .send_bytes(b"x"),
    )?;
    assert_eq!(s, 405);
    Ok(())
}

/// A proxy of an upstream that wants credentials: with `proxy.username`/`password` it reads, the
/// password is sealed and never returned; without them the upstream's 401 is a 502.
#[test]
fn proxy_with_upstream_credentials() -> anyhow::Result<()> {
    let create = |server: &common::process::Server, spec: serde_json::Value| -> anyhow::Result<serde_json::Value> {
        let (s, text) = status_of(
            ureq::post(&format!("{}/api/v1/repositories", server.public))
                .set("Authorization", &basic(PW))
                .send_json(spec),
        )?;
        anyhow::ensure!(s == 201, "{text}");
        Ok(serde_json::from_str(&text)?)
    };
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    create(
        &upstream,
        Repo::hosted("private", Format::Conan).with(serde_json::json!({"anonymous_read": false})).into(),
    )?;
    let rec = format!("{}/repository/private/v2/conans/secret/1.0/_/_/revisions/r1/files", upstream.public);
    let conanfile = b"from conan import ConanFile\n";
    let md5 = hex::encode(<md5::Md5 as md5::Digest>::digest(conanfile));
    for (path, body) in
        [("conanfile.py", conanfile.to_vec()), ("conanmanifest.txt", format!("1\nconanfile.py: {md5}\n").into_bytes())]
    {
        let (s, text) =
            status_of(ureq::put(&format!("{rec}/{path}")).set("Authorization", &basic(PW)).send_bytes(&body))?;
        anyhow::ensure!(s == 201, "{path}: {text}");
    }
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
    )?;
    server.wait_ready()?;
    let remote = format!("{}/repository/private/", upstream.public);
    let view = create(
        &server,
        Repo::proxy("with-creds", Format::Conan, &remote)
            .with(serde_json::json!({"proxy": {"username": "admin", "password": PW}}))
            .into(),
    )?;
    assert_eq!(view["proxy"]["username"], "admin");
    assert!(view["proxy"].get("password").is_none() && view["proxy"].get("password_sealed").is_none(), "{view}");
    assert!(!view.to_string().contains(PW), "the password is never returned: {view}");
    create(&server, Repo::proxy("without", Format::Conan, &remote).into())?;
    let (s, text) = status_of(ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(
        serde_json::json!({"name": "half", "format": "conan", "type": "proxy", "proxy": {"remote_url": remote, "password": "x"}}),
    ))?;
    assert_eq!(s, 400, "{text}");
    let latest = |repo: &str| {
        status_of(ureq::get(&format!("{}/repository/{repo}/v2/conans/secret/1.0/_/_/latest", server.public)).call())
    };
    let (s, text) = latest("with-creds")?;
    assert_eq!(s, 200, "{text}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&text)?["revision"], "r1");
    let (s, text) = latest("without")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("401"), "{text}");
    // An update without a new password keeps the sealed one.
    let (s, text) = status_of(
        ureq::put(&format!("{}/api/v1/repositories/with-creds", server.public))
            .set("Authorization", &basic(PW))
            .send_json(serde_json::json!({"format": "conan", "type": "proxy", "anonymous_read": true,
                "proxy": {"remote_url": remote, "username": "admin", "metadata_ttl_secs": 1}})),
    )?;
    assert_eq!(s, 200, "{text}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let (s, text) = status_of(
        ureq::get(&format!("{}/repository/with-creds/v2/conans/secret/1.0/_/_/revisions", server.public)).call(),
    )?;
    assert_eq!(s, 200, "{text}");
    Ok(())
}

/// A proxy of a hosted repository on the same server, as a new user sets it up: the client asks
/// the proxy for a package before its binary is uploaded (a miss), then the binary is uploaded
/// to the hosted repository and the next `conan install` through the proxy finds it. (The
/// proxy used to remember the package's `latest` 404 for `negative_ttl_secs` while serving its
/// `revisions`: "Missing prebuilt package".)
#[test]
fn a_proxy_sees_a_package_uploaded_after_a_miss() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
    )?;
    server.wait_ready()?;
    for spec in [
        Repo::hosted("conan-local", Format::Conan),
        Repo::proxy("conan-proxy", Format::Conan, &format!("{}/repository/conan-local/", server.public)),
    ] {
        common::process::create_repository(&server.public, &basic(PW), spec)?;
    }
    let home = tempfile::tempdir()?;
    let h = home.path();
    let conan = |args: &[&str], cwd: &std::path::Path| -> anyhow::Result<(bool, String)> {
        let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok((out.status.success(), text))
    };
    let ok = |args: &[&str], cwd: &std::path::Path| -> anyhow::Result<String> {
        let (success, text) = conan(args, cwd)?;
        anyhow::ensure!(success, "conan {args:?}: {text}");
        Ok(text)
    };
    ok(&["profile", "detect"], h)?;
    // Only this server: no default remote to ask on a machine without the Internet.
    ok(&["remote", "remove", "conancenter"], h)?;
    ok(&["remote", "add", "local", &format!("{}/repository/conan-local", server.public)], h)?;
    ok(&["remote", "add", "proxy", &format!("{}/repository/conan-proxy", server.public)], h)?;
    ok(&["remote", "login", "local", "admin", "-p", PW], h)?;
    let proj = h.join("pkg");
    std::fs::create_dir_all(&proj)?;
    ok(&["new", "header_lib", "-d", "name=pkg", "-d", "version=1.2"], &proj)?;
    // The recipe only: an install through the proxy misses the binary.
    ok(&["export", "."], &proj)?;
    ok(&["upload", "pkg/1.2", "-r", "local", "-c", "--only-recipe"], h)?;
    ok(&["remove", "*", "-c"], h)?;
    let (success, text) = conan(&["install", "--requires=pkg/[>=1.0 <2]", "-r", "proxy"], h)?;
    assert!(!success && text.contains("Missing prebuilt package for 'pkg/1.2'"), "{text}");
    // The binary arrives upstream; the proxy now serves it.
    ok(&["create", ".", "-tf="], &proj)?;
    ok(&["upload", "pkg/1.2", "-r", "local", "-c"], h)?;
    ok(&["remove", "*", "-c"], h)?;
    let out = ok(&["install", "--requires=pkg/[>=1.0 <2]", "-r", "proxy"], h)?;
    assert!(out.contains("pkg/1.2: Package installed") || out.contains("pkg/1.2: Downloaded package"), "{out}");
    Ok(())
}

/// Cleanup seen through the real conan client: recipe revisions that are not the newest of
/// their reference go (`keep_latest_revisions`), then every version but the newest
/// (`keep_latest`); the preview counts what each run removes, and `conan list` on the remote
/// shows the rest — and `conan install` still installs it.
#[test]
fn cleanup_with_the_real_client() -> anyhow::Result<()> {
    use common::process::cleanup_now;
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100")])?;
    server.wait_ready()?;
    common::process::create_repository(&server.public, &basic(PW), Repo::hosted("conan-local", Format::Conan))?;
    let home = tempfile::tempdir()?;
    let h = home.path();
    let conan = |args: &[&str], cwd: &std::path::Path| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    // JSON output: stdout alone.
    let conan_json = |args: &[&str]| -> anyhow::Result<serde_json::Value> {
        let out = Command::new("conan").args(args).current_dir(h).env("CONAN_HOME", h).output()?;
        anyhow::ensure!(out.status.success(), "conan {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(serde_json::from_slice(&out.stdout)?)
    };
    conan(&["profile", "detect"], h)?;
    conan(&["remote", "add", "local", &format!("{}/repository/conan-local", server.public)], h)?;
    conan(&["remote", "login", "local", "admin", "-p", PW], h)?;
    // hello/1.0 in two recipe revisions (the second edits the recipe), then hello/2.0.
    for (v, edit) in [("0.5", None), ("1.0", None), ("1.0", Some("# the second revision\n")), ("2.0", None)] {
        let proj = h.join(format!("hello-{v}-{}", edit.is_some()));
        std::fs::create_dir_all(&proj)?;
        conan(&["new", "header_lib", "-d", "name=hello", "-d", &format!("version={v}")], &proj)?;
        if let Some(extra) = edit {
            let recipe = proj.join("conanfile.py");
            let text = std::fs::read_to_string(&recipe)?;
            std::fs::write(&recipe, format!("{text}{extra}"))?;
        }
        conan(&["create", ".", "-tf="], &proj)?;
        conan(&["upload", &format!("hello/{v}"), "-r", "local", "-c"], h)?;
        // Revisions are ordered by time.
        std::thread::sleep(std::time::Duration::from_millis(1100));
    }
    let revisions = |reference: &str| -> anyhow::Result<Vec<String>> {
        let v = conan_json(&["list", &format!("{reference}#*"), "-r", "local", "--format=json"])?;
        let mut found = Vec::new();
        for (r, info) in v["local"].as_object().into_iter().flatten() {
            for rev in info["revisions"].as_object().into_iter().flatten().map(|(k, _)| k.clone()) {
                found.push(format!("{r}#{rev}"));
            }
        }
        found.sort();
        Ok(found)
    };
    let before = revisions("hello/1.0")?;
    assert_eq!(before.len(), 2, "{before:?}");
    let newest_1_0 = {
        let v = conan_json(&["list", "hello/1.0#latest", "-r", "local", "--format=json"])?;
        v["local"]["hello/1.0"]["revisions"].as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default()
    };
    let auth = basic(PW);
    let policy = serde_json::json!({"name": "revisions", "format": "conan", "criteria": {"keep_latest_revisions": 1}, "repositories": ["conan-local"]});
    let (preview, run) = cleanup_now(&server.public, &auth, policy, "conan-local")?;
    assert_eq!(preview, std::collections::BTreeSet::from(["hello 1.0".to_string()]), "one revision of hello/1.0");
    assert_eq!(run["components"], 1, "{run}");
    // Once republished (a run does not wait for it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while revisions("hello/1.0")?.len() != 1 {
        anyhow::ensure!(std::time::Instant::now() < deadline, "hello/1.0's revisions were not republished");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(revisions("hello/1.0")?, [format!("hello/1.0#{newest_1_0}")], "the newest revision stays");
    assert_eq!(revisions("hello/2.0")?.len(), 1);

    // Ages and patterns: hello/1.0 and hello/2.0 published 40 days ago, only 1.x matches.
    let db = format!("sqlite://{}/data/packyard.db", dir.path().display());
    let days_40 = 40 * 86_400_000i64;
    common::process::sql(
        &db,
        &format!("UPDATE components SET created_at = created_at - {days_40} WHERE version <> '0.5'"),
    )?;
    let policy = serde_json::json!({"name": "old-ones", "format": "conan", "criteria": {"published_before_days": 30, "name_regex": "^hello$", "version_regex": "^1\\."}, "repositories": ["conan-local"]});
    let (preview, run) = cleanup_now(&server.public, &auth, policy, "conan-local")?;
    assert_eq!(preview, std::collections::BTreeSet::from(["hello 1.0".to_string()]), "0.5 is new, 2.0 is not 1.x");
    assert_eq!(run["components"], 1, "{run}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while revisions("hello/1.0").is_ok_and(|r| !r.is_empty()) {
        anyhow::ensure!(std::time::Instant::now() < deadline, "hello/1.0 was not republished");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Keep the newest version: 0.5 goes, 2.0 stays.
    let policy = serde_json::json!({"name": "newest", "format": "conan", "criteria": {"keep_latest": 1}, "repositories": ["conan-local"]});
    let (preview, run) = cleanup_now(&server.public, &auth, policy, "conan-local")?;
    assert_eq!(preview, std::collections::BTreeSet::from(["hello 0.5".to_string()]));
    assert_eq!(run["components"], 1, "{run}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let out = loop {
        let out = conan(&["list", "hello/*", "-r", "local"], h)?;
        if !out.contains("hello/0.5") && !out.contains("hello/1.0") {
            break out;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "hello/1.0 is still listed: {out}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(out.contains("hello/2.0") && !out.contains("hello/1.0") && !out.contains("hello/0.5"), "{out}");
    conan(&["remove", "*", "-c"], h)?;
    let out = conan(&["install", "--requires=hello/2.0", "-r", "local"], h)?;
    assert!(out.contains("hello/2.0: Package installed") || out.contains("hello/2.0: Downloaded"), "{out}");
    let failed = conan(&["install", "--requires=hello/1.0", "-r", "local"], h);
    assert!(failed.is_err(), "hello/1.0 was removed");
    assert!(server.terminate()?.success());
    Ok(())
}

/// Uploads a recipe revision `rrev` of `reference` (URL form, `name/version/_/_`) with one
/// package `pkgid#prev` whose conaninfo.txt is `conaninfo`, through plain HTTP as `auth`.
pub(crate) fn upload_by_http(
    base: &str,
    auth: &str,
    reference: &str,
    (rrev, pkgid, prev): (&str, &str, &str),
    conaninfo: &str,
) -> anyhow::Result<()> {
    let md5 = |b: &[u8]| hex::encode(<md5::Md5 as md5::Digest>::digest(b));
    let conanfile = format!("from conan import ConanFile\n# {reference}\n");
    let recipe = format!("{base}/v2/conans/{reference}/revisions/{rrev}");
    let package = format!("{recipe}/packages/{pkgid}/revisions/{prev}");
    for (url, body) in [
        (format!("{recipe}/files/conanfile.py"), conanfile.clone()),
        (format!("{recipe}/files/conanmanifest.txt"), format!("1\nconanfile.py: {}\n", md5(conanfile.as_bytes()))),
        (format!("{package}/files/conaninfo.txt"), conaninfo.to_string()),
        (format!("{package}/files/conanmanifest.txt"), format!("1\nconaninfo.txt: {}\n", md5(conaninfo.as_bytes()))),
    ] {
        let (s, text) = status_of(ureq::put(&url).set("Authorization", auth).send_bytes(body.as_bytes()))?;
        anyhow::ensure!(s == 201, "PUT {url}: {s} {text}");
    }
    Ok(())
}

/// Warmed reads of a proxy's metadata (its upstream a second server) and of a group's (a
/// reference of its hosted member, one of its proxy member, its search) make no database
/// query: the group answers from its published snapshots, the proxy from the copies it keeps
/// in memory while they are fresh.
async fn warmed_proxy_and_group_reads_make_no_query(mut app: common::app::TestApp) -> anyhow::Result<()> {
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    common::process::create_repository(&upstream.public, &basic(PW), Repo::hosted("up", Format::Conan))?;
    let info = "[settings]\narch=x86_64\nos=Linux\n";
    upload_by_http(&format!("{}/repository/up", upstream.public), &basic(PW), "lib/1.0/_/_", ("r1", "p1", "q1"), info)?;
    app.start_worker();
    app.create(Repo::hosted("local", Format::Conan)).await?;
    app.create(Repo::proxy("px", Format::Conan, &format!("{}/repository/up/", upstream.public))).await?;
    app.create(Repo::group("grp", Format::Conan, &["local", "px"])).await?;
    let md5 = |b: &[u8]| hex::encode(<md5::Md5 as md5::Digest>::digest(b));
    let own = "/repository/local/v2/conans/own/1.0/_/_/revisions/o1/files";
    assert_eq!(app.put(&format!("{own}/conanfile.py"), &b"from conan import ConanFile\n"[..]).await?.status, 201);
    let manifest = format!("1\nconanfile.py: {}\n", md5(b"from conan import ConanFile\n"));
    assert_eq!(app.put(&format!("{own}/conanmanifest.txt"), manifest).await?.status, 201);

    let lib = "v2/conans/lib/1.0/_/_";
    let reads = [
        format!("/repository/px/{lib}/latest"),
        format!("/repository/px/{lib}/revisions"),
        format!("/repository/px/{lib}/revisions/r1/files"),
        format!("/repository/px/{lib}/revisions/r1/search"),
        format!("/repository/px/{lib}/revisions/r1/packages/p1/latest"),
        "/repository/px/v2/conans/search?q=lib*".to_string(),
        format!("/repository/grp/{lib}/latest"),
        format!("/repository/grp/{lib}/revisions/r1/search?list_only=False"),
        format!("/repository/grp/{lib}/revisions/r1/packages/p1/revisions"),
        "/repository/grp/v2/conans/own/1.0/_/_/latest".to_string(),
        "/repository/grp/v2/conans/own/1.0/_/_/revisions/o1/files".to_string(),
        "/repository/grp/v2/conans/search?q=*".to_string(),
    ];
    for path in &reads {
        let r = app.get(path).await?;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
    let r = app.get(&format!("/repository/grp/{lib}/revisions/r1/search")).await?;
    assert_eq!(r.json["p1"]["content"], info, "{}", r.text);
    let r = app.get("/repository/grp/v2/conans/search?q=*").await?;
    assert_eq!(r.json["results"], serde_json::json!(["lib/1.0", "own/1.0"]), "{}", r.text);
    app.stop_worker().await?;
    for path in &reads {
        assert_eq!(app.get(path).await?.status, 200, "{path}");
    }
    let before = app.t.metrics.db_queries();
    for _ in 0..3 {
        for path in &reads {
            let r = app.get(path).await?;
            assert_eq!(r.status, 200, "{path}");
            // What comes from the proxy (also a group's reference of its proxy member) says so.
            let proxied = path.contains("/px/") || path.contains("/grp/v2/conans/lib/");
            let hit = r.headers.get("x-packyard-cache").is_some_and(|v| v == "hit");
            assert!(!proxied || hit, "{path}: {:?}", r.headers);
        }
    }
    assert_eq!(
        app.t.metrics.db_queries() - before,
        0,
        "warmed Conan reads through a proxy and a group ran database queries"
    );
    Ok(())
}
app_test!(warmed_proxy_and_group_reads_make_no_query, |c: &mut packyard_model::config::Config| c
    .proxy
    .allow_private_addresses =
    true);

// --- proxies and groups in depth, freshness, removing packages (#21, items 8-10) -----------

use packyard_store::db::Backend;

/// The backends the real-client tests below run on (PostgreSQL when `TEST_POSTGRES_URL` is set).
const CLIENT_BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// A server on `backend`: SQLite in its own directory, or a fresh database on the configured
/// PostgreSQL server (`None`, with a note, when there is none). Proxies may reach this machine.
fn server_on(backend: Backend) -> anyhow::Result<Option<(common::process::Server, tempfile::TempDir)>> {
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")];
    if backend != Backend::Sqlite {
        // An upload on a shared database answers once every replica could have seen it (one
        // watermark period): short periods keep hundreds of uploads quick.
        env.extend([("PACKYARD_CACHE__WATERMARK_TTL_MS", "100"), ("PACKYARD_SECURITY__WATERMARK_TTL_MS", "100")]);
    }
    common::process::server_on(backend, &env)
}

/// A `conan` client with a home of its own (a producer's cache, or a consumer's), asking only
/// the remotes it is given.
struct Client {
    home: tempfile::TempDir,
}

impl Client {
    fn new() -> anyhow::Result<Self> {
        let client = Self { home: tempfile::tempdir()? };
        client.ok(&["profile", "detect"])?;
        client.ok(&["remote", "remove", "conancenter"])?;
        Ok(client)
    }

    /// Runs `conan args` in `cwd` (the home when `None`): success, and stdout and stderr.
    fn run_in(
        &self,
        cwd: Option<&std::path::Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<(bool, String, String)> {
        let out = Command::new("conan")
            .args(args)
            .current_dir(cwd.unwrap_or(self.home.path()))
            .env("CONAN_HOME", self.home.path())
            .envs(env.iter().copied())
            .output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        self.ok_in(None, args, &[])
    }

    fn ok_in(&self, cwd: Option<&std::path::Path>, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
        let (success, out, err) = self.run_in(cwd, args, env)?;
        anyhow::ensure!(success, "conan {args:?}: {out}{err}");
        Ok(format!("{out}{err}"))
    }

    /// `conan args --format=json`: stdout as JSON.
    fn json(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let mut all = args.to_vec();
        all.push("--format=json");
        let (success, out, err) = self.run_in(None, &all, &[])?;
        anyhow::ensure!(success, "conan {all:?}: {out}{err}");
        Ok(serde_json::from_str(&out)?)
    }

    /// Replaces the remotes with `remotes` (name, URL), logging in where a password is given.
    fn remotes(&self, remotes: &[(&str, String, bool)]) -> anyhow::Result<()> {
        let have = self.json(&["remote", "list"])?;
        for r in have.as_array().into_iter().flatten().filter_map(|r| r["name"].as_str()) {
            self.ok(&["remote", "remove", r])?;
        }
        for (name, url, login) in remotes {
            self.ok(&["remote", "add", name, url])?;
            if *login {
                self.ok(&["remote", "login", name, "admin", "-p", PW])?;
            }
        }
        Ok(())
    }

    /// Writes the test recipe into `<home>/<dir>` (settings `os`, `arch`; option `shared`; its
    /// package holds `lib/info.txt` naming them and `$PKG_STAMP`), with `extra` appended.
    fn recipe(&self, dir: &str, extra: &str) -> anyhow::Result<std::path::PathBuf> {
        let proj = self.home.path().join(dir);
        std::fs::create_dir_all(&proj)?;
        std::fs::write(proj.join("conanfile.py"), format!("{RECIPE}{extra}"))?;
        Ok(proj)
    }
}

const RECIPE: &str = r#"import os
from conan import ConanFile
from conan.tools.files import save


class Pkg(ConanFile):
    settings = "os", "arch"
    options = {"shared": [True, False]}
    default_options = {"shared": False}

    def package(self):
        stamp = os.environ.get("PKG_STAMP", "")
        text = f"{self.settings.os} {self.settings.arch} {self.options.shared} {stamp}"
        save(self, os.path.join(self.package_folder, "lib", "info.txt"), text)
"#;

/// The three binaries each version gets: settings and options as `conan create` takes them.
const CONFIGS: [[&str; 6]; 3] = [
    ["-s", "os=Linux", "-s", "arch=x86_64", "-o", "&:shared=False"],
    ["-s", "os=Linux", "-s", "arch=armv8", "-o", "&:shared=False"],
    ["-s", "os=Windows", "-s", "arch=x86_64", "-o", "&:shared=True"],
];

/// `(reference, package id) -> (settings, options)` of a `conan list …:* --format=json` answer
/// for `remote` (`Local Cache` for the client's own).
fn listed_packages(
    v: &serde_json::Value,
    remote: &str,
) -> std::collections::BTreeMap<(String, String), (serde_json::Value, serde_json::Value)> {
    let mut out = std::collections::BTreeMap::new();
    for (reference, info) in v[remote].as_object().into_iter().flatten() {
        for (_, rev) in info["revisions"].as_object().into_iter().flatten() {
            for (pkgid, p) in rev["packages"].as_object().into_iter().flatten() {
                let (settings, options) = (p["info"]["settings"].clone(), p["info"]["options"].clone());
                out.insert((reference.clone(), pkgid.clone()), (settings, options));
            }
        }
    }
    out
}

/// GET `url`: status, the `X-Packyard-Cache` header and the body's bytes.
fn fetch(url: &str) -> anyhow::Result<(u16, Option<String>, Vec<u8>)> {
    use std::io::Read;
    let r = match ureq::get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::Status(s, r)) => return Ok((s, None, r.into_string()?.into_bytes())),
        Err(e) => return Err(e.into()),
    };
    let (status, cache) = (r.status(), r.header("x-packyard-cache").map(str::to_string));
    let mut body = Vec::new();
    r.into_reader().read_to_end(&mut body)?;
    Ok((status, cache, body))
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// `conan list -p` and `conan graph info --build=missing` through a proxy (of a second server's
/// hosted repository) and a group (a hosted and that proxy), over 20 versions with three
/// binaries each: the client filters the packages by their `conaninfo.txt`, which every
/// package search (`…/revisions/<rrev>/search`) serves, through the proxy byte for byte; a
/// binary that exists is downloaded, one that does not is to be built. On SQLite and PostgreSQL.
#[test]
fn package_queries_through_proxies_and_groups() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    // The binaries, made once: 1.x go upstream, 2.x to the group's hosted member, and pkg/1.0's
    // armv8 binary to the hosted member too (where the group finds pkg/1.0 first).
    let producer = Client::new()?;
    let proj = producer.recipe("pkg", "")?;
    let versions: Vec<String> = (0..10).map(|i| format!("1.{i}")).chain((0..10).map(|i| format!("2.{i}"))).collect();
    for v in &versions {
        for config in CONFIGS {
            let mut args = vec!["create", ".", "--name=pkg", "--version", v.as_str()];
            args.extend_from_slice(&config);
            producer.ok_in(Some(&proj), &args, &[])?;
        }
    }
    let local = listed_packages(&producer.json(&["list", "pkg/1.0:*"])?, "Local Cache");
    let id_of = |os: &str, arch: &str| -> anyhow::Result<String> {
        local
            .iter()
            .find(|(_, (s, _))| s["os"] == os && s["arch"] == arch)
            .map(|((_, id), _)| id.clone())
            .ok_or_else(|| anyhow::anyhow!("no {os}/{arch} binary in {local:?}"))
    };
    let (linux, arm, windows) = (id_of("Linux", "x86_64")?, id_of("Linux", "armv8")?, id_of("Windows", "x86_64")?);
    assert_eq!(local.len(), 3, "{local:?}");
    assert_eq!(local[&("pkg/1.0".to_string(), windows.clone())].1["shared"], "True");

    for backend in CLIENT_BACKENDS {
        package_queries_on(backend, &producer, [&linux, &arm, &windows])
            .map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

fn package_queries_on(backend: Backend, producer: &Client, [linux, arm, windows]: [&String; 3]) -> anyhow::Result<()> {
    let Some((upstream, _up_dir)) = server_on(backend)? else { return Ok(()) };
    let Some((server, _dir)) = server_on(backend)? else { return Ok(()) };
    let auth = basic(PW);
    common::process::create_repository(&upstream.public, &auth, Repo::hosted("conan-up", Format::Conan))?;
    let up_url = format!("{}/repository/conan-up", upstream.public);
    for spec in [
        Repo::proxy("conan-proxy", Format::Conan, &format!("{up_url}/")),
        Repo::hosted("conan-local", Format::Conan),
        Repo::group("conan-all", Format::Conan, &["conan-local", "conan-proxy"]),
    ] {
        common::process::create_repository(&server.public, &auth, spec)?;
    }
    let url = |repo: &str| format!("{}/repository/{repo}", server.public);
    producer.remotes(&[("up", up_url.clone(), true), ("local", url("conan-local"), true)])?;
    producer.ok(&["upload", "pkg/1.*", "-r", "up", "-c"])?;
    producer.ok(&["upload", "pkg/2.*", "-r", "local", "-c"])?;
    producer.ok(&["upload", &format!("pkg/1.0:{arm}"), "-r", "local", "-c"])?;

    let consumer = Client::new()?;
    consumer.remotes(&[
        ("up", up_url.clone(), false),
        ("proxy", url("conan-proxy"), false),
        ("all", url("conan-all"), false),
    ])?;
    let ids = |refs: &mut dyn Iterator<Item = String>, id: &String| -> Vec<(String, String)> {
        refs.map(|r| (r, id.clone())).collect()
    };
    let ones = || (0..10).map(|i| format!("pkg/1.{i}"));
    let twos = || (0..10).map(|i| format!("pkg/2.{i}"));

    // `-p` over every version: the upstream, its proxy (the same), the group (both members; its
    // pkg/1.0 is the hosted member's, which has no Linux x86_64 binary).
    let query = ["list", "pkg/*:*", "-p", "os=Linux AND arch=x86_64"];
    for (remote, want) in [
        ("up", ids(&mut ones(), linux)),
        ("proxy", ids(&mut ones(), linux)),
        ("all", ids(&mut ones().skip(1).chain(twos()), linux)),
    ] {
        let mut args = query.to_vec();
        args.extend(["-r", remote]);
        let found = listed_packages(&consumer.json(&args)?, remote);
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), want, "{remote}: {found:?}");
        for (settings, options) in found.values() {
            assert_eq!(settings, &serde_json::json!({"os": "Linux", "arch": "x86_64"}), "{remote}");
            assert_eq!(options, &serde_json::json!({"shared": "False"}), "{remote}");
        }
    }
    // One version, one setting; an option.
    for (remote, want) in [("proxy", vec![arm, linux]), ("all", vec![arm])] {
        let found = listed_packages(&consumer.json(&["list", "pkg/1.0:*", "-p", "os=Linux", "-r", remote])?, remote);
        let mut want: Vec<_> = want.into_iter().map(|id| ("pkg/1.0".to_string(), id.clone())).collect();
        want.sort();
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), want, "{remote}");
    }
    for remote in ["proxy", "all"] {
        let found =
            listed_packages(&consumer.json(&["list", "pkg/*:*", "-p", "options.shared=True", "-r", remote])?, remote);
        let expected = if remote == "proxy" { 10 } else { 19 };
        assert_eq!(found.len(), expected, "{remote}: {found:?}");
        assert!(found.iter().all(|((_, id), (s, _))| id == windows && s["os"] == "Windows"), "{remote}: {found:?}");
    }

    // What the client reads for `-p`: each package's conaninfo.txt in the package search — the
    // proxy's answer is the upstream's, byte for byte (also with `list_only`).
    let latest: serde_json::Value =
        serde_json::from_str(&status_of(ureq::get(&format!("{up_url}/v2/conans/pkg/1.3/_/_/latest")).call())?.1)?;
    let rrev = latest["revision"].as_str().unwrap_or_default().to_string();
    for query in ["", "?list_only=False", "?list_only=True"] {
        let path = format!("v2/conans/pkg/1.3/_/_/revisions/{rrev}/search{query}");
        let (s, _, upstream_bytes) = fetch(&format!("{up_url}/{path}"))?;
        assert_eq!(s, 200, "{path}");
        for repo in ["conan-proxy", "conan-all"] {
            let (s, _, bytes) = fetch(&format!("{}/{path}", url(repo)))?;
            assert_eq!((s, sha256_hex(&bytes)), (200, sha256_hex(&upstream_bytes)), "{repo}/{path}");
        }
        let search: serde_json::Value = serde_json::from_slice(&upstream_bytes)?;
        let info = search[windows.as_str()]["content"].as_str().unwrap_or_default();
        assert!(
            info.contains("[settings]\narch=x86_64\nos=Windows") && info.contains("[options]\nshared=True"),
            "{info}"
        );
        assert_eq!(search.as_object().map(serde_json::Map::len), Some(3), "{search}");
    }

    // graph info --build=missing: a binary that exists is a download from the remote, one that
    // does not is to be built (and without --build it is missing).
    let graph =
        |reference: &str, remote: &str, settings: &[&str], build: bool| -> anyhow::Result<(String, String, String)> {
            let requires = format!("--requires={reference}");
            let mut args = vec!["graph", "info", requires.as_str(), "-r", remote];
            args.extend_from_slice(settings);
            if build {
                args.push("--build=missing");
            }
            let v = consumer.json(&args)?;
            let node = v["graph"]["nodes"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, n)| n)
                .find(|n| n["ref"].as_str().is_some_and(|r| r.starts_with(&format!("{reference}#"))))
                .ok_or_else(|| anyhow::anyhow!("{reference} is not in the graph: {v}"))?;
            let text = |k: &str| node[k].as_str().unwrap_or_default().to_string();
            Ok((text("package_id"), text("binary"), text("binary_remote")))
        };
    let win = ["-s", "os=Windows", "-s", "arch=x86_64", "-o", "pkg/*:shared=True"];
    let mac = ["-s", "os=Macos", "-s", "arch=armv8"];
    for (reference, remote) in [("pkg/1.4", "proxy"), ("pkg/1.4", "all"), ("pkg/2.4", "all")] {
        let (id, binary, from) = graph(reference, remote, &win, true)?;
        assert_eq!(
            (id.as_str(), binary.as_str(), from.as_str()),
            (windows.as_str(), "Download", remote),
            "{reference} from {remote}"
        );
        let (id, binary, _) = graph(reference, remote, &mac, true)?;
        assert_eq!(binary, "Build", "{reference} from {remote}: {id}");
        let (_, binary, _) = graph(reference, remote, &mac, false)?;
        assert_eq!(binary, "Missing", "{reference} from {remote}");
    }
    // The group's pkg/1.0 is its hosted member's: only the armv8 binary is there.
    let (_, binary, _) = graph("pkg/1.0", "all", &["-s", "os=Linux", "-s", "arch=armv8"], true)?;
    assert_eq!(binary, "Download");
    let (_, binary, _) = graph("pkg/1.0", "all", &["-s", "os=Linux", "-s", "arch=x86_64"], true)?;
    assert_eq!(binary, "Build", "pkg/1.0's x86_64 binary is the proxy member's, which the group does not use");

    // And the binary installed through each is the one uploaded.
    for (reference, remote) in [("pkg/1.6", "proxy"), ("pkg/1.7", "all"), ("pkg/2.7", "all")] {
        let requires = format!("--requires={reference}");
        let mut args = vec!["install", requires.as_str(), "-r", remote];
        args.extend_from_slice(&win);
        consumer.ok(&args)?;
        let (_, folder, _) = consumer.run_in(None, &["cache", "path", &format!("{reference}:{windows}")], &[])?;
        let info = std::fs::read_to_string(std::path::Path::new(folder.trim()).join("lib/info.txt"))?;
        assert_eq!(info, "Windows x86_64 True ", "{reference} from {remote}");
    }
    Ok(())
}

/// The recipe revisions a `conan list` answer shows for `remote`, by reference.
fn listed_revisions(v: &serde_json::Value, remote: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    for (reference, info) in v[remote].as_object().into_iter().flatten() {
        let revs: Vec<String> = info["revisions"].as_object().into_iter().flatten().map(|(r, _)| r.clone()).collect();
        out.insert(reference.clone(), revs);
    }
    out
}

/// The recipe and package revisions of `reference` in a client's cache: `(rrev, pkgid, prev)`
/// of the latest package revision of its one binary.
fn cached_revision(client: &Client, reference: &str) -> anyhow::Result<(String, String, String)> {
    let v = client.json(&["list", &format!("{reference}#latest:*#latest")])?;
    let info = &v["Local Cache"][reference]["revisions"];
    let (rrev, rev) = info.as_object().and_then(|m| m.iter().next()).ok_or_else(|| anyhow::anyhow!("{v}"))?;
    let (pkgid, pkg) =
        rev["packages"].as_object().and_then(|m| m.iter().next()).ok_or_else(|| anyhow::anyhow!("{v}"))?;
    let prev =
        pkg["revisions"].as_object().and_then(|m| m.keys().next().cloned()).ok_or_else(|| anyhow::anyhow!("{v}"))?;
    Ok((rrev.clone(), pkgid.clone(), prev))
}

/// What a client installed of `pkg` (its latest package revision's `lib/info.txt`).
fn installed_info(client: &Client, pref: &str) -> anyhow::Result<String> {
    let (ok, folder, err) = client.run_in(None, &["cache", "path", pref], &[])?;
    anyhow::ensure!(ok, "conan cache path {pref}: {err}");
    Ok(std::fs::read_to_string(std::path::Path::new(folder.trim()).join("lib/info.txt"))?)
}

/// Proxy freshness: a recipe revision and a package revision uploaded upstream after the proxy
/// cached the first are seen through the proxy, and a group over it, once the proxy's
/// `metadata_ttl_secs` passed (`conan list`, `conan install --update`) — before, the proxy may
/// still answer with what it cached —, while the first revision's files are still served from
/// the cache unchanged, even after they are removed upstream. On SQLite and PostgreSQL.
#[test]
fn proxy_freshness_after_the_metadata_ttl() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    for backend in CLIENT_BACKENDS {
        freshness_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

fn freshness_on(backend: Backend) -> anyhow::Result<()> {
    const TTL: std::time::Duration = std::time::Duration::from_secs(5);
    let Some((upstream, _up_dir)) = server_on(backend)? else { return Ok(()) };
    let Some((server, _dir)) = server_on(backend)? else { return Ok(()) };
    let auth = basic(PW);
    common::process::create_repository(&upstream.public, &auth, Repo::hosted("conan-up", Format::Conan))?;
    let up_url = format!("{}/repository/conan-up", upstream.public);
    for spec in [
        Repo::proxy("conan-proxy", Format::Conan, &format!("{up_url}/"))
            .with(serde_json::json!({"proxy": {"metadata_ttl_secs": TTL.as_secs()}})),
        Repo::hosted("conan-local", Format::Conan),
        Repo::group("conan-all", Format::Conan, &["conan-local", "conan-proxy"]),
    ] {
        common::process::create_repository(&server.public, &auth, spec)?;
    }
    let url = |repo: &str| format!("{}/repository/{repo}", server.public);

    // Revision A with its package revision A1, upstream.
    let producer = Client::new()?;
    producer.remotes(&[("up", up_url.clone(), true)])?;
    let proj_a = producer.recipe("fresh-a", "")?;
    producer.ok_in(Some(&proj_a), &["create", ".", "--name=fresh", "--version=1.0"], &[("PKG_STAMP", "1")])?;
    let (rev_a, pkgid, prev_a1) = cached_revision(&producer, "fresh/1.0")?;
    producer.ok(&["upload", "fresh/1.0", "-r", "up", "-c"])?;

    // Read through the proxy and the group: installed, and A's files fetched (so cached).
    let (via_proxy, via_group) = (Client::new()?, Client::new()?);
    via_proxy.remotes(&[("proxy", url("conan-proxy"), false)])?;
    via_group.remotes(&[("all", url("conan-all"), false)])?;
    for (client, remote) in [(&via_proxy, "proxy"), (&via_group, "all")] {
        client.ok(&["install", "--requires=fresh/1.0", "-r", remote])?;
        assert_eq!(installed_info(client, &format!("fresh/1.0:{pkgid}"))?, "Linux x86_64 False 1", "{remote}");
    }
    let recipe = format!("v2/conans/fresh/1.0/_/_/revisions/{rev_a}");
    let a_files: Vec<String> = ["conanfile.py", "conanmanifest.txt"]
        .iter()
        .map(|f| format!("{recipe}/files/{f}"))
        .chain(
            ["conaninfo.txt", "conanmanifest.txt", "conan_package.tgz"]
                .iter()
                .map(|f| format!("{recipe}/packages/{pkgid}/revisions/{prev_a1}/files/{f}")),
        )
        .collect();
    let mut a_hashes = Vec::new();
    for path in &a_files {
        let (s, _, upstream_bytes) = fetch(&format!("{up_url}/{path}"))?;
        assert_eq!(s, 200, "{path}");
        for repo in ["conan-proxy", "conan-all"] {
            let (s, _, bytes) = fetch(&format!("{}/{path}", url(repo)))?;
            assert_eq!((s, sha256_hex(&bytes)), (200, sha256_hex(&upstream_bytes)), "{repo}: {path}");
        }
        a_hashes.push(sha256_hex(&upstream_bytes));
    }

    // The next revisions, in the producer's cache for now: package revision A2 of revision A,
    // and revision B with its package.
    producer.ok_in(Some(&proj_a), &["create", ".", "--name=fresh", "--version=1.0"], &[("PKG_STAMP", "2")])?;
    let (_, _, prev_a2) = cached_revision(&producer, "fresh/1.0")?;
    let proj_b = producer.recipe("fresh-b", "# the second recipe revision\n")?;
    producer.ok_in(Some(&proj_b), &["create", ".", "--name=fresh", "--version=1.0"], &[("PKG_STAMP", "3")])?;
    let (rev_b, _, prev_b1) = cached_revision(&producer, "fresh/1.0")?;

    // The proxy's list of revisions, fetched now (nothing else asks for it): fresh for the TTL
    // from here. (Its `latest` the group's refresh revalidates in the background.)
    let revisions = |repo: &str| -> anyhow::Result<(Vec<String>, Option<String>)> {
        let (s, cache, body) = fetch(&format!("{}/v2/conans/fresh/1.0/_/_/revisions", url(repo)))?;
        anyhow::ensure!(s == 200, "{repo}: {s} {}", String::from_utf8_lossy(&body));
        let v: serde_json::Value = serde_json::from_slice(&body)?;
        let list = v["revisions"].as_array().into_iter().flatten();
        Ok((list.filter_map(|r| r["revision"].as_str().map(str::to_string)).collect(), cache))
    };
    let fetched = std::time::Instant::now();
    let (revs, cache) = revisions("conan-proxy")?;
    assert_eq!((revs, cache.as_deref()), (vec![rev_a.clone()], Some("miss")));

    // Upstream, in one upload: package revision A2 of revision A and revision B with its
    // package (made beforehand, so that the upload alone falls within the TTL).
    producer.ok(&["upload", "fresh/1.0#*", "-r", "up", "-c"])?;
    assert!(rev_a != rev_b && prev_a1 != prev_a2, "{rev_a} {rev_b} {prev_a1} {prev_a2}");
    let (s, _, body) = fetch(&format!("{up_url}/v2/conans/fresh/1.0/_/_/latest"))?;
    assert_eq!(s, 200);
    assert!(String::from_utf8_lossy(&body).contains(&rev_b), "upstream has B");

    // Before the TTL the proxy (and the group, which reads the reference from it) may still
    // answer A alone: it does here, from its cache.
    if fetched.elapsed() + std::time::Duration::from_millis(500) < TTL {
        for repo in ["conan-proxy", "conan-all"] {
            let (revs, cache) = revisions(repo)?;
            assert_eq!((revs, cache.as_deref()), (vec![rev_a.clone()], Some("hit")), "{repo} within the TTL");
        }
    } else {
        eprintln!("{}: the uploads took longer than the TTL; not checking what the proxy cached", backend.as_str());
    }
    // Whatever the proxy fetched before the uploads ended is stale after this.
    std::thread::sleep(TTL + std::time::Duration::from_millis(200));

    // After it: B through both, and A's new package revision.
    for (client, remote) in [(&via_proxy, "proxy"), (&via_group, "all")] {
        let revisions = listed_revisions(&client.json(&["list", "fresh/1.0#*", "-r", remote])?, remote);
        let mut want = vec![rev_a.clone(), rev_b.clone()];
        want.sort();
        let mut have = revisions.get("fresh/1.0").cloned().unwrap_or_default();
        have.sort();
        assert_eq!(have, want, "{remote}");
        let newest = listed_revisions(&client.json(&["list", "fresh/1.0#latest", "-r", remote])?, remote);
        assert_eq!(newest.get("fresh/1.0"), Some(&vec![rev_b.clone()]), "{remote}");
        let v = client.json(&["list", &format!("fresh/1.0#{rev_a}:{pkgid}#*"), "-r", remote])?;
        let prevs: std::collections::BTreeSet<String> = v[remote]["fresh/1.0"]["revisions"][rev_a.as_str()]["packages"]
            [pkgid.as_str()]["revisions"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(p, _)| p.clone())
            .collect();
        assert_eq!(prevs, [prev_a1.clone(), prev_a2.clone()].into(), "{remote}: {v}");
        // `install --update` moves the client on to B, and to A's new package revision.
        let out = client.ok(&["install", "--requires=fresh/1.0", "--update", "-r", remote])?;
        assert!(out.contains(&format!("fresh/1.0#{rev_b}")), "{remote}: {out}");
        assert_eq!(installed_info(client, &format!("fresh/1.0#{rev_b}:{pkgid}#{prev_b1}"))?, "Linux x86_64 False 3");
        client.ok(&["install", &format!("--requires=fresh/1.0#{rev_a}"), "--update", "-r", remote])?;
        assert_eq!(installed_info(client, &format!("fresh/1.0#{rev_a}:{pkgid}#{prev_a2}"))?, "Linux x86_64 False 2");
    }

    // A's files never change: served from the cache, the same bytes — also once A is gone
    // upstream.
    producer.ok(&["remove", &format!("fresh/1.0#{rev_a}"), "-r", "up", "-c"])?;
    assert_eq!(fetch(&format!("{up_url}/{}", a_files[0]))?.0, 404, "A is gone upstream");
    for (path, hash) in a_files.iter().zip(&a_hashes) {
        for repo in ["conan-proxy", "conan-all"] {
            let (s, cache, bytes) = fetch(&format!("{}/{path}", url(repo)))?;
            assert_eq!((s, cache.as_deref(), sha256_hex(&bytes)), (200, Some("hit"), hash.clone()), "{repo}: {path}");
        }
    }
    Ok(())
}

/// `conan upload --check` (the client checks its cache against the manifests first: a
/// corrupted package is never sent) and `conan remove "<ref>#<rrev>:*" -r` — the packages go, the
/// recipe revision stays (listed, installable with --build=missing), each removal audited and
/// republished, also in a group; `DELETE …/revisions/<rrev>/packages` likewise. On SQLite and
/// PostgreSQL.
#[test]
fn upload_check_and_removing_only_packages() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    for backend in CLIENT_BACKENDS {
        remove_packages_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

fn remove_packages_on(backend: Backend) -> anyhow::Result<()> {
    let Some((server, _dir)) = server_on(backend)? else { return Ok(()) };
    let (public, auth) = (server.public.as_str(), basic(PW));
    common::process::create_repository(public, &auth, Repo::hosted("conan-local", Format::Conan))?;
    common::process::create_repository(public, &auth, Repo::group("conan-all", Format::Conan, &["conan-local"]))?;
    let url = |repo: &str| format!("{public}/repository/{repo}");
    let producer = Client::new()?;
    producer.remotes(&[("local", url("conan-local"), true), ("all", url("conan-all"), false)])?;
    let proj = producer.recipe("rm", "")?;
    for config in [CONFIGS[0], CONFIGS[2]] {
        let mut args = vec!["create", ".", "--name=rm", "--version=1.0"];
        args.extend_from_slice(&config);
        producer.ok_in(Some(&proj), &args, &[])?;
    }

    // upload --check: checked, then uploaded; again with --force: the same bytes, nothing new.
    let out = producer.ok(&["upload", "rm/1.0", "-r", "local", "-c", "--check"])?;
    assert!(out.contains("Integrity check: ok") && out.contains("Uploading package"), "{out}");
    let packages = listed_packages(&producer.json(&["list", "rm/1.0#*:*", "-r", "local"])?, "local");
    assert_eq!(packages.len(), 2, "{packages:?}");
    let rrev = listed_revisions(&producer.json(&["list", "rm/1.0#*", "-r", "local"])?, "local")
        .get("rm/1.0")
        .and_then(|r| r.first().cloned())
        .unwrap_or_default();
    let recipe = format!("{}/v2/conans/rm/1.0/_/_/revisions/{rrev}", url("conan-local"));
    let (s, _, conanfile) = fetch(&format!("{recipe}/files/conanfile.py"))?;
    assert_eq!(s, 200);
    let prefs: Vec<(String, String)> = packages
        .keys()
        .map(|(_, id)| {
            let v = producer.json(&["list", &format!("rm/1.0#{rrev}:{id}#latest"), "-r", "local"])?;
            let prev = v["local"]["rm/1.0"]["revisions"][rrev.as_str()]["packages"][id.as_str()]["revisions"]
                .as_object()
                .and_then(|m| m.keys().next().cloned())
                .unwrap_or_default();
            Ok((id.clone(), prev))
        })
        .collect::<anyhow::Result<_>>()?;
    let package_file =
        |(id, prev): &(String, String)| format!("{recipe}/packages/{id}/revisions/{prev}/files/conan_package.tgz");
    let (s, _, tgz) = fetch(&package_file(&prefs[0]))?;
    assert_eq!(s, 200);
    let out = producer.ok(&["upload", "rm/1.0", "-r", "local", "-c", "--check", "--force"])?;
    assert!(out.contains("Integrity check: ok") && out.contains("forcing upload"), "{out}");
    assert_eq!(sha256_hex(&fetch(&format!("{recipe}/files/conanfile.py"))?.2), sha256_hex(&conanfile));
    assert_eq!(sha256_hex(&fetch(&package_file(&prefs[0]))?.2), sha256_hex(&tgz));
    assert_eq!(listed_packages(&producer.json(&["list", "rm/1.0#*:*", "-r", "local"])?, "local"), packages);

    // A package corrupted in the cache: --check stops before anything is sent.
    let chk = producer.recipe("chk", "")?;
    producer.ok_in(Some(&chk), &["create", ".", "--name=chk", "--version=1.0"], &[])?;
    let (_, chk_id, _) = cached_revision(&producer, "chk/1.0")?;
    let (_, folder, _) = producer.run_in(None, &["cache", "path", &format!("chk/1.0:{chk_id}")], &[])?;
    std::fs::write(std::path::Path::new(folder.trim()).join("lib/info.txt"), "tampered")?;
    let (ok, out, err) = producer.run_in(None, &["upload", "chk/1.0", "-r", "local", "-c", "--check"], &[])?;
    assert!(!ok && format!("{out}{err}").contains("There are corrupted artifacts"), "{out}{err}");
    assert_eq!(fetch(&format!("{}/v2/conans/chk/1.0/_/_/revisions", url("conan-local")))?.0, 404, "nothing was sent");

    // remove <ref>#<rrev>:* — one DELETE per package revision; the recipe revision stays.
    let out = producer.ok(&["remove", &format!("rm/1.0#{rrev}:*"), "-r", "local", "-c"])?;
    assert!(out.contains("Removed binaries"), "{out}");
    for remote in ["local", "all"] {
        let v = producer.json(&["list", &format!("rm/1.0#{rrev}:*"), "-r", remote])?;
        assert_eq!(v[remote]["rm/1.0"]["revisions"][rrev.as_str()]["packages"], serde_json::json!({}), "{remote}: {v}");
        assert_eq!(
            listed_revisions(&producer.json(&["list", "rm/1.0#*", "-r", remote])?, remote).get("rm/1.0"),
            Some(&vec![rrev.clone()])
        );
    }
    for repo in ["conan-local", "conan-all"] {
        let base = format!("{}/v2/conans/rm/1.0/_/_/revisions/{rrev}", url(repo));
        let (s, _, search) = fetch(&format!("{base}/search"))?;
        assert_eq!((s, search.as_slice()), (200, &b"{}"[..]), "{repo}");
        for (id, prev) in &prefs {
            assert_eq!(fetch(&format!("{base}/packages/{id}/latest"))?.0, 404, "{repo}: {id}");
            assert_eq!(
                fetch(&format!("{base}/packages/{id}/revisions/{prev}/files/conaninfo.txt"))?.0,
                404,
                "{repo}: {id}"
            );
        }
        let (s, _, bytes) = fetch(&format!("{base}/files/conanfile.py"))?;
        assert_eq!((s, sha256_hex(&bytes)), (200, sha256_hex(&conanfile)), "{repo}: the recipe stays");
    }
    // Audited: one entry per package revision.
    let audit = common::process::admin_json(public, &auth, "GET", "/api/v1/audit?action=conan.delete", None)?;
    let mut targets: Vec<String> = audit["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["target"].as_str().map(str::to_string))
        .collect();
    targets.sort();
    let mut want: Vec<String> =
        prefs.iter().map(|(id, prev)| format!("conan-local/rm/1.0#{rrev}:{id}#{prev}")).collect();
    want.sort();
    assert_eq!(targets, want, "{audit}");
    assert!(audit["entries"].as_array().into_iter().flatten().all(|e| e["actor"] == "admin"), "{audit}");
    // The catalogue's component is the recipe revision's, without package files now.
    let component = nexus_component(public, &auth, "repository=conan-local&name=rm&version=1.0")?;
    let paths: Vec<&str> =
        component["assets"].as_array().into_iter().flatten().filter_map(|a| a["path"].as_str()).collect();
    assert!(!paths.is_empty() && paths.iter().all(|p| !p.contains("/packages/")), "{paths:?}");
    // The recipe is still installable: its binary is missing, and built with --build=missing.
    let consumer = Client::new()?;
    consumer.remotes(&[("local", url("conan-local"), false)])?;
    let (ok, out, err) = consumer.run_in(None, &["install", "--requires=rm/1.0", "-r", "local"], &[])?;
    assert!(!ok && format!("{out}{err}").contains("Missing prebuilt package for 'rm/1.0'"), "{out}{err}");
    consumer.ok(&["install", "--requires=rm/1.0", "-r", "local", "--build=missing"])?;
    let linux = packages.iter().find(|(_, (settings, _))| settings["os"] == "Linux").map(|((_, id), _)| id.clone());
    assert_eq!(
        installed_info(&consumer, &format!("rm/1.0#{rrev}:{}", linux.unwrap_or_default()))?,
        "Linux x86_64 False "
    );

    // DELETE …/revisions/<rrev>/packages: every package of the revision in one request.
    producer.ok(&["upload", "rm/1.0", "-r", "local", "-c"])?;
    assert_eq!(listed_packages(&producer.json(&["list", "rm/1.0#*:*", "-r", "local"])?, "local").len(), 2);
    let delete = |path: &str, who: Option<&str>| {
        let mut req = ureq::delete(&format!("{}/v2/conans/rm/1.0/_/_/{path}", url("conan-local")));
        if let Some(a) = who {
            req = req.set("Authorization", a);
        }
        status_of(req.call())
    };
    assert_eq!(delete(&format!("revisions/{rrev}/packages"), None)?.0, 401, "anonymous callers never delete");
    assert_eq!(delete(&format!("revisions/{rrev}/packages"), Some(&auth))?.0, 200);
    let v = producer.json(&["list", &format!("rm/1.0#{rrev}:*"), "-r", "local"])?;
    assert_eq!(v["local"]["rm/1.0"]["revisions"][rrev.as_str()]["packages"], serde_json::json!({}), "{v}");
    assert_eq!(delete(&format!("revisions/{rrev}/packages"), Some(&auth))?.0, 200, "none left: still fine");
    let (s, text) = delete("revisions/0123456789abcdef0123456789abcdef/packages", Some(&auth))?;
    assert_eq!(s, 404, "{text}");
    assert!(text.contains("rm/1.0#0123456789abcdef0123456789abcdef not found"), "{text}");
    let (s, text) = status_of(
        ureq::delete(&format!("{}/v2/conans/rm/1.0/_/_/revisions/{rrev}/packages", url("conan-all")))
            .set("Authorization", &auth)
            .call(),
    )?;
    assert_eq!(s, 405, "a group is read-only: {text}");
    let audit = common::process::admin_json(
        public,
        &auth,
        "GET",
        &format!("/api/v1/audit?action=conan.delete&target=conan-local/rm/1.0%23{rrev}"),
        None,
    )?;
    assert!(
        audit["entries"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["target"] == format!("conan-local/rm/1.0#{rrev}") && e["detail"]["rows"] == 2)),
        "{audit}"
    );
    assert_eq!(
        listed_revisions(&producer.json(&["list", "rm/1.0#*", "-r", "local"])?, "local").get("rm/1.0"),
        Some(&vec![rrev.clone()])
    );
    Ok(())
}
