//! The web UI end to end: the real server binary on an ephemeral port, real uploads of each
//! format, and Debian's Chromium driven over WebDriver (`common::webdriver`). Set
//! `UI_SCREENSHOTS=<dir>` to write the main pages' screenshots there
//! (`scripts/ui-screenshots.sh` regenerates `docs/ui/`).

use crate::common;
use crate::common::md5_hex;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::process::{basic, create_repository, start, status_of, Server};
use common::webdriver::{driver, Browser};
use common::Repo;
use packyard_model::repos::Format;
use serde_json::{json, Value};

const PW: &str = "admin-password-1";
const CONAN: &str = "/repository/cc/v2/conans/zlib/1.3/acme/stable/revisions/r1";

fn server(dir: &std::path::Path, extra: &[(&str, &str)]) -> anyhow::Result<Server> {
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__USAGE_REFRESH_SECS", "1")];
    env.extend_from_slice(extra);
    let s = start(dir, &env)?;
    s.wait_ready()?;
    Ok(s)
}

fn put(public: &str, path: &str, body: &[u8]) -> anyhow::Result<()> {
    let (s, text) = status_of(ureq::put(&format!("{public}{path}")).set("Authorization", &basic(PW)).send_bytes(body))?;
    anyhow::ensure!(s == 201, "PUT {path}: {s} {text}");
    Ok(())
}

/// One repository of each format, each with one upload as its client sends it.
fn one_of_each(public: &str) -> anyhow::Result<()> {
    for repo in [
        Repo::hosted("debs", Format::Apt),
        Repo::hosted("alpine", Format::Apk).with(json!({"apk": {"architectures": ["x86_64"]}})),
        Repo::hosted("gomods", Format::Go),
        Repo::hosted("cc", Format::Conan),
    ] {
        create_repository(public, &basic(PW), repo)?;
    }
    let control = "Package: hello\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDepends: libc6 (>= 2.36), zlib1g\nDescription: x\n";
    let deb = packyard_codecs::apt::testing::deb(control, ".gz");
    let (s, text) = status_of(
        ureq::post(&format!("{public}/repository/debs/?wait=true")).set("Authorization", &basic(PW)).send_bytes(&deb),
    )?;
    anyhow::ensure!(s == 201, "deb: {s} {text}");
    let apk = packyard_codecs::apk::testing::build_apk(&packyard_codecs::apk::testing::Fixture::new(
        "hello", "1.0-r0", "x86_64",
    ))?
    .bytes;
    put(public, "/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk", &apk)?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/acme/hello", "v1.2.0", "one", 0)?;
    put(public, "/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip", &zip)?;
    let conanfile = b"from conan import ConanFile\n".to_vec();
    put(public, &format!("{CONAN}/files/conanfile.py"), &conanfile)?;
    put(
        public,
        &format!("{CONAN}/files/conanmanifest.txt"),
        format!("1\nconanfile.py: {}\n", md5_hex(&conanfile)).as_bytes(),
    )?;
    let pkg = format!("{CONAN}/packages/p1/revisions/pr1/files");
    let info = b"[settings]\nos=Linux\narch=x86_64\n[requires]\nbzip2/1.0.Z\n".to_vec();
    let package = packyard_codecs::apt::testing::compress(
        ".gz",
        &packyard_codecs::apt::testing::data_tar(&[("include/zlib.h", b"#pragma once\n")]),
    );
    put(public, &format!("{pkg}/conaninfo.txt"), &info)?;
    put(public, &format!("{pkg}/conan_package.tgz"), &package)?;
    let manifest = format!("1\nconaninfo.txt: {}\nconan_package.tgz: {}\n", md5_hex(&info), md5_hex(&package));
    put(public, &format!("{pkg}/conanmanifest.txt"), manifest.as_bytes())?;
    Ok(())
}

fn get_text(url: &str) -> anyhow::Result<(u16, String)> {
    status_of(ureq::get(url).call())
}

fn sign_in(b: &Browser, public: &str, user: &str, password: &str) -> anyhow::Result<()> {
    b.goto(&format!("{public}/signin"))?;
    b.fill("#username", user)?;
    b.fill("#password", password)?;
    let button = b.find_by_text("form.stack button", "Sign in")?;
    b.click_to_load(&button)?;
    b.wait_for(".who .user", Duration::from_secs(10))?;
    Ok(())
}

fn screenshot(b: &Browser, name: &str) -> anyhow::Result<()> {
    if let Ok(dir) = std::env::var("UI_SCREENSHOTS") {
        b.screenshot(&PathBuf::from(dir).join(format!("{name}.png")), 1366)?;
    }
    Ok(())
}

/// The text of every snippet on the page.
fn snippets(b: &Browser) -> anyhow::Result<Vec<String>> {
    b.find_all("figure.snippet pre")?.iter().map(|e| b.text(e)).collect()
}

/// Waits until the worker has counted the repositories (the list shows numbers).
fn wait_counted(public: &str, repo: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v: Value = ureq::get(&format!("{public}/api/v1/repositories/{repo}"))
            .set("Authorization", &basic(PW))
            .call()?
            .into_json()?;
        if v["usage"]["components"].as_i64().unwrap_or(0) > 0 {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{repo} was not counted in time: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn signing_in_browsing_each_format_searching_and_deleting_in_chromium() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[])?;
    let public = server.public.clone();
    one_of_each(&public)?;
    for r in ["debs", "alpine", "gomods", "cc"] {
        wait_counted(&public, r)?;
    }
    let b = Browser::start(&driver)?;

    // Anonymous: the repositories anonymous may read, and a way to sign in.
    b.goto(&format!("{public}/"))?;
    assert_eq!(b.title()?, "Repositories · Packyard");
    let text = b.text_of_page()?;
    for r in ["debs", "alpine", "gomods", "cc"] {
        assert!(text.contains(r), "{r} listed for anonymous: {text}");
    }
    assert!(!text.contains("Administration"), "{text}");
    assert!(text.contains(&format!("{public}/repository/debs/")), "the URL to paste: {text}");

    sign_in(&b, &public, "admin", PW)?;
    assert!(b.current_url()?.ends_with('/'), "{}", b.current_url()?);
    let text = b.text_of_page()?;
    assert!(text.contains("Signed in as admin"), "{text}");
    assert!(text.contains("Administration"), "{text}");
    assert!(text.contains("up to date"), "publication state: {text}");
    // The session cookie is the browser's, never a script's.
    let cookies = b.cookies()?;
    let session = cookies.iter().find(|c| c["name"] == "packyard_session").cloned().unwrap_or(Value::Null);
    assert_eq!(session["httpOnly"], json!(true), "{cookies:?}");
    assert_eq!(session["sameSite"], json!("Lax"), "{cookies:?}");
    assert_eq!(session["secure"], json!(false), "plain http: no Secure flag");
    let visible = b.exec("return document.cookie;", vec![])?;
    assert!(!visible.as_str().unwrap_or_default().contains("packyard_session"), "{visible}");
    // A session cookie is no API token.
    let token = session["value"].as_str().unwrap_or_default().to_string();
    let (s, _) = status_of(
        ureq::get(&format!("{public}/api/v1/users")).set("Authorization", &format!("Bearer {token}")).call(),
    )?;
    assert_eq!(s, 401, "a session is accepted by the UI only");
    screenshot(&b, "repositories")?;

    // APT: the component, its dependencies, the snippet and its URLs.
    b.goto(&format!("{public}/browse/debs"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("Distribution") && text.contains("stable"), "{text}");
    assert!(text.contains("Component"), "the format's groups: {text}");
    screenshot(&b, "repository-apt")?;
    let link = b.find_by_text("table a", "hello")?;
    b.click_to_load(&link)?;
    b.wait_for("#setup", Duration::from_secs(5))?;
    let text = b.text_of_page()?;
    assert!(text.contains("hello 1.0"), "{text}");
    assert!(text.contains("libc6 (>= 2.36)"), "Depends: {text}");
    assert!(text.contains("pool/main/h/hello/hello_1.0_amd64.deb"), "{text}");
    let snips = snippets(&b)?.join("\n");
    let sources = format!("deb [signed-by=/etc/apt/keyrings/packyard-debs.asc] {public}/repository/debs stable main");
    assert!(snips.contains(&sources), "{snips}");
    assert!(snips.contains(&format!("curl -fsSL {public}/repository/debs/gpg.key")), "{snips}");
    assert!(snips.contains("sudo apt-get install hello=1.0"), "{snips}");
    assert_eq!(get_text(&format!("{public}/repository/debs/gpg.key"))?.0, 200);
    let (s, release) = get_text(&format!("{public}/repository/debs/dists/stable/InRelease"))?;
    assert_eq!(s, 200);
    assert!(release.contains("main/binary-amd64/Packages"), "{release}");
    screenshot(&b, "component-apt")?;
    let apt_page = b.current_url()?;

    // The file browser: from the repository's page down the tree to the .deb, downloaded with
    // the hash the page shows.
    b.goto(&format!("{public}/browse/debs"))?;
    b.click_to_load(&b.find_by_text("a", "Browse its files")?)?;
    let top: Vec<String> =
        b.find_all("table tbody tr td:first-child")?.iter().map(|e| b.text(e)).collect::<anyhow::Result<_>>()?;
    assert_eq!(top, ["dists/", "pool/"], "{}", b.text_of_page()?);
    for folder in ["pool/", "main/", "h/", "hello/"] {
        b.click_to_load(&b.find_by_text("table a", folder)?)?;
    }
    assert!(b.current_url()?.ends_with("/browse/debs/files/pool/main/h/hello/"), "{}", b.current_url()?);
    let row = b.text(&b.find("table tbody tr")?)?;
    assert!(row.contains("hello_1.0_amd64.deb") && row.contains("stored"), "{row}");
    let link = b.find_by_text("table a", "hello_1.0_amd64.deb")?;
    let href = format!("{public}{}", b.attribute(&link, "href")?.unwrap_or_default());
    let shown_sha = b.text(&b.find("table tbody tr td.sha code")?)?;
    let mut deb = Vec::new();
    std::io::Read::read_to_end(&mut ureq::get(&href).call()?.into_reader(), &mut deb)?;
    assert_eq!(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&deb)), shown_sha, "{href}");
    screenshot(&b, "files-apt")?;
    b.goto(&format!("{public}/browse/debs/files/dists/stable/"))?;
    let listed = b.text(&b.find("table tbody")?)?;
    assert!(listed.contains("InRelease") && listed.contains("published index") && listed.contains("main/"), "{listed}");
    assert_eq!(status_of(ureq::get(&format!("{public}/browse/debs/files/nothing/")).call())?.0, 404);

    // APK: the branch/repository/arch group, the key file and the repositories line.
    b.goto(&format!("{public}/browse/alpine"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("v3.20/main/x86_64"), "{text}");
    b.click_to_load(&b.find_by_text("table a", "hello")?)?;
    b.wait_for("#setup", Duration::from_secs(5))?;
    let snips = snippets(&b)?.join("\n");
    assert!(snips.contains(&format!("echo {public}/repository/alpine/v3.20/main >> /etc/apk/repositories")), "{snips}");
    assert!(snips.contains("apk add hello=1.0-r0"), "{snips}");
    let key_line = snips.lines().find(|l| l.starts_with("wget -O /etc/apk/keys/")).unwrap_or_default().to_string();
    let key_url = key_line.rsplit(' ').next().unwrap_or_default().to_string();
    let (s, key) = get_text(&key_url)?;
    assert_eq!(s, 200, "{key_line}");
    assert!(key.starts_with("-----BEGIN PUBLIC KEY-----"), "{key}");
    assert_eq!(get_text(&format!("{public}/repository/alpine/v3.20/main/x86_64/APKINDEX.tar.gz"))?.0, 200);
    screenshot(&b, "component-apk")?;

    // Go: the module path and GOPROXY.
    b.goto(&format!("{public}/browse/gomods"))?;
    b.click_to_load(&b.find_by_text("table a", "example.com/acme/hello")?)?;
    b.wait_for("#setup", Duration::from_secs(5))?;
    let snips = snippets(&b)?.join("\n");
    assert!(snips.contains(&format!("go env -w GOPROXY={public}/repository/gomods/")), "{snips}");
    // Its own checksum database, with the key the signing-key endpoint gives.
    let sumdb =
        common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/gomods/signing-key", None)?;
    let gosumdb = sumdb["gosumdb"].as_str().unwrap_or_default();
    assert!(!gosumdb.is_empty() && snips.contains(&format!("go env -w GOSUMDB=\"{gosumdb}\"")), "{sumdb} {snips}");
    assert!(snips.contains("go get example.com/acme/hello@v1.2.0"), "{snips}");
    let (s, list) = get_text(&format!("{public}/repository/gomods/example.com/acme/hello/@v/list"))?;
    assert_eq!((s, list.trim()), (200, "v1.2.0"));

    // Conan: the reference with its revision, the remote, the package's settings.
    b.goto(&format!("{public}/browse/cc"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("acme/stable"), "{text}");
    b.click_to_load(&b.find_by_text("table a", "zlib")?)?;
    b.wait_for("#setup", Duration::from_secs(5))?;
    let text = b.text_of_page()?;
    assert!(text.contains("bzip2/1.0.Z"), "requires: {text}");
    assert!(text.contains("os=Linux"), "the package's settings: {text}");
    let snips = snippets(&b)?.join("\n");
    assert!(snips.contains(&format!("conan remote add cc {public}/repository/cc")), "{snips}");
    assert!(snips.contains("conan install --requires=\"zlib/1.3@acme/stable#r1\" -r cc"), "{snips}");
    assert_eq!(get_text(&format!("{public}/repository/cc/v1/ping"))?.0, 200);
    screenshot(&b, "component-conan")?;

    // Search: by keyword across formats, then narrowed by format.
    b.goto(&format!("{public}/search"))?;
    b.fill("#q", "hello")?;
    b.click_to_load(&b.find_by_text("form.search button", "Search")?)?;
    b.wait_for("table", Duration::from_secs(5))?;
    let rows = b.find_all("table tbody tr")?;
    assert_eq!(rows.len(), 3, "hello in debs, alpine and gomods: {}", b.text_of_page()?);
    screenshot(&b, "search")?;
    b.goto(&format!("{public}/search?q=hello&format=apk"))?;
    let rows = b.find_all("table tbody tr")?;
    assert_eq!(rows.len(), 1);
    assert!(b.text(&rows[0])?.contains("alpine"));
    b.goto(&format!("{public}/search?q=nothing-like-it"))?;
    assert!(b.text_of_page()?.contains("Nothing matches."));

    // Delete with confirmation: gone from the index, in the audit log.
    b.goto(&apt_page)?;
    b.click_to_load(&b.find_by_text("a.button", "Delete")?)?;
    b.wait_for("button.danger", Duration::from_secs(5))?;
    assert!(b.text_of_page()?.contains("This cannot be undone."));
    b.click_to_load(&b.find("button.danger")?)?;
    b.wait_for("p.notice", Duration::from_secs(30))?;
    assert!(b.text_of_page()?.contains("hello 1.0 is no longer in debs"), "{}", b.text_of_page()?);
    let (_, packages) = get_text(&format!("{public}/repository/debs/dists/stable/main/binary-amd64/Packages"))?;
    assert!(!packages.contains("Package: hello"), "{packages}");
    let audit: Value =
        ureq::get(&format!("{public}/api/v1/audit")).set("Authorization", &basic(PW)).call()?.into_json()?;
    let deleted = audit["entries"].as_array().cloned().unwrap_or_default().into_iter().find(|e| {
        e["actor"] == "admin"
            && e["action"].as_str().is_some_and(|a| a.contains("delete"))
            && e["target"].as_str().is_some_and(|t| t.contains("hello"))
    });
    assert!(deleted.is_some(), "the delete's audit entry: {audit}");

    // Signing out ends the session: the old cookie is refused from now on.
    b.click_to_load(&b.find_by_text(".who button", "Sign out")?)?;
    b.wait_for(".who a.button", Duration::from_secs(5))?;
    let r = ureq::get(&format!("{public}/admin")).set("Cookie", &format!("packyard_session={token}")).call();
    assert_eq!(status_of(r)?.0, 401, "a session that ended is anonymous");
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// Signs in over plain HTTP; returns the cookies (`name=value; …`) and the page's CSRF token.
pub(crate) fn http_sign_in(public: &str, user: &str, password: &str) -> anyhow::Result<(String, String)> {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let r = agent.get(&format!("{public}/signin")).call()?;
    let anchor = r.header("set-cookie").unwrap_or_default().split(';').next().unwrap_or_default().to_string();
    let page = r.into_string()?;
    let csrf = csrf_of(&page)?;
    let r = agent.post(&format!("{public}/signin")).set("Cookie", &anchor).send_form(&[
        ("csrf", &csrf),
        ("username", user),
        ("password", password),
    ]);
    let r = match r {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(e.into()),
    };
    anyhow::ensure!(r.status() == 303, "sign-in: {} {}", r.status(), r.into_string()?);
    let session = r.all("set-cookie").into_iter().find(|c| c.starts_with("packyard_session=")).unwrap_or_default();
    let cookies = format!("{anchor}; {}", session.split(';').next().unwrap_or_default());
    let page = agent.get(&format!("{public}/")).set("Cookie", &cookies).call()?.into_string()?;
    Ok((cookies, csrf_of(&page)?))
}

fn csrf_of(page: &str) -> anyhow::Result<String> {
    let at = page.find("name=\"csrf\" value=\"").ok_or_else(|| anyhow::anyhow!("no CSRF field in {page}"))?;
    let rest = &page[at + "name=\"csrf\" value=\"".len()..];
    Ok(rest[..rest.find('"').unwrap_or(0)].to_string())
}

pub(crate) fn post_form(
    public: &str,
    path: &str,
    cookies: &str,
    form: &[(&str, &str)],
) -> anyhow::Result<(u16, String)> {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    status_of(agent.post(&format!("{public}{path}")).set("Cookie", cookies).send_form(form))
}

#[test]
fn a_form_without_its_csrf_token_is_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_WEBHOOKS__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)])?;
    let public = server.public.clone();
    // Signing in needs the token of the sign-in page too (no login CSRF).
    let (s, text) = post_form(&public, "/signin", "", &[("username", "admin"), ("password", PW)])?;
    assert_eq!(s, 403, "{text}");
    assert!(text.contains("sent without its security token"), "{text}");
    let (cookies, csrf) = http_sign_in(&public, "admin", PW)?;
    for (form, why) in [
        (vec![], "without its security token"),
        (vec![("csrf", "0123456789abcdef0123456789abcdef01234567")], "stale or belongs to another session"),
    ] {
        let (s, text) = post_form(&public, "/signout", &cookies, &form)?;
        assert_eq!(s, 403, "{text}");
        assert!(text.contains(why), "{text}");
        // Still signed in: nothing happened.
        let page = ureq::get(&format!("{public}/")).set("Cookie", &cookies).call()?.into_string()?;
        assert!(page.contains("Signed in as <strong>admin</strong>"), "{page}");
    }
    // Every form of the administration pages added with #39 checks it before it acts, on
    // things that exist: nothing of them changes.
    let admin = |method: &str, path: &str, body: Option<Value>| {
        common::process::admin_json(&public, &basic(PW), method, path, body)
    };
    create_repository(&public, &basic(PW), Repo::hosted("debs", Format::Apt))?;
    admin(
        "POST",
        "/api/v1/webhooks",
        Some(json!({"name": "ci", "url": "http://127.0.0.1:9/", "events": ["component.published"]})),
    )?;
    admin(
        "POST",
        "/api/v1/cleanup-policies",
        Some(json!({"name": "keep", "format": "apt", "criteria": {"keep_latest": 3}, "repositories": ["debs"]})),
    )?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while admin("GET", "/api/v1/repositories/debs/status", None)?["units"]
        .as_array()
        .is_none_or(|u| u.is_empty() || u.iter().any(|u| u["pending"] == json!(true)))
    {
        assert!(Instant::now() < deadline, "debs was not published");
        std::thread::sleep(Duration::from_millis(50));
    }
    admin("GET", "/api/v1/repositories/debs/signing-key", None)?;
    let before = (
        admin("GET", "/api/v1/webhooks/ci", None)?,
        admin("GET", "/api/v1/cleanup-policies/keep", None)?,
        admin("GET", "/api/v1/cleanup-policies/keep/runs", None)?,
        admin("GET", "/api/v1/repositories/debs/signing-key", None)?,
        admin("GET", "/api/v1/repositories/debs/status", None)?["units"].clone(),
    );
    for path in [
        "/admin/webhooks",
        "/admin/webhooks/ci",
        "/admin/webhooks/ci/test",
        "/admin/webhooks/ci/delete",
        "/admin/cleanup",
        "/admin/cleanup/keep",
        "/admin/cleanup/keep/run",
        "/admin/cleanup/keep/delete",
        "/admin/repositories/debs/rebuild",
        "/admin/repositories/debs/signing-key",
        "/admin/repositories/debs/snapshots",
        "/admin/repositories/debs/snapshots/kept/delete",
    ] {
        let (s, text) = post_form(&public, path, &cookies, &[("name", "ci"), ("url", "http://127.0.0.1:9/")])?;
        assert_eq!(s, 403, "{path}: {text}");
        assert!(text.contains("sent without its security token"), "{path}: {text}");
    }
    let after = (
        admin("GET", "/api/v1/webhooks/ci", None)?,
        admin("GET", "/api/v1/cleanup-policies/keep", None)?,
        admin("GET", "/api/v1/cleanup-policies/keep/runs", None)?,
        admin("GET", "/api/v1/repositories/debs/signing-key", None)?,
        admin("GET", "/api/v1/repositories/debs/status", None)?["units"].clone(),
    );
    assert_eq!(after, before, "nothing changed");
    let log = admin("GET", "/api/v1/webhooks/ci/deliveries", None)?;
    assert_eq!(log["deliveries"], json!([]), "no test event was queued");
    // Another session's token is not this one's.
    let (other, other_csrf) = http_sign_in(&public, "admin", PW)?;
    assert_ne!(other_csrf, csrf);
    let (s, _) = post_form(&public, "/signout", &cookies, &[("csrf", &other_csrf)])?;
    assert_eq!(s, 403);
    let (s, _) = post_form(&public, "/signout", &other, &[("csrf", &other_csrf)])?;
    assert_eq!(s, 303);
    // UI pages carry their policy; a wrong password is the API's throttle.
    let r = ureq::get(&format!("{public}/")).call()?;
    assert_eq!(
        r.header("content-security-policy"),
        Some("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
    );
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let r = agent.get(&format!("{public}/signin")).call()?;
    let anchor = r.header("set-cookie").unwrap_or_default().split(';').next().unwrap_or_default().to_string();
    let csrf = csrf_of(&r.into_string()?)?;
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let (s, _) = post_form(
            &public,
            "/signin",
            &anchor,
            &[("csrf", &csrf), ("username", "admin"), ("password", "wrong-password")],
        )?;
        statuses.push(s);
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert_eq!(statuses[10], 429, "the login throttle of the API: {statuses:?}");
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn a_reader_without_privileges_sees_no_admin_pages() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[])?;
    let public = server.public.clone();
    create_repository(&public, &basic(PW), Repo::hosted("debs", Format::Apt))?;
    create_repository(&public, &basic(PW), Repo::hosted("secret", Format::Apt).with(json!({"anonymous_read": false})))?;
    let admin = |method: &str, path: &str, body: Value| {
        common::process::admin_json(&public, &basic(PW), method, path, Some(body))
    };
    admin(
        "POST",
        "/api/v1/roles",
        json!({"name": "debs-readers", "privileges": [{"repositories": "debs", "actions": ["read"]}]}),
    )?;
    admin(
        "POST",
        "/api/v1/users",
        json!({"username": "reader", "password": "reader-password", "roles": ["debs-readers"]}),
    )?;
    let b = Browser::start(&driver)?;
    b.goto(&format!("{public}/"))?;
    assert!(!b.text_of_page()?.contains("secret"), "anonymous may not read secret");
    sign_in(&b, &public, "reader", "reader-password")?;
    let text = b.text_of_page()?;
    assert!(text.contains("debs") && !text.contains("secret"), "{text}");
    assert!(!text.contains("Administration"), "no admin link for a reader: {text}");
    b.goto(&format!("{public}/admin"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("reader may not use the administration pages."), "{text}");
    b.goto(&format!("{public}/browse/secret"))?;
    assert!(b.text_of_page()?.contains("There is no repository secret you may read."));
    drop(b);
    // Posting to the admin pages with a valid session and token is still refused.
    let (cookies, csrf) = http_sign_in(&public, "reader", "reader-password")?;
    for path in ["/admin/users", "/admin/roles", "/admin/repositories"] {
        let (s, text) = post_form(&public, path, &cookies, &[("csrf", &csrf), ("username", "x"), ("name", "x")])?;
        assert_eq!(s, 403, "POST {path}: {text}");
    }
    let (s, _) = status_of(ureq::get(&format!("{public}/admin")).set("Cookie", &cookies).call())?;
    assert_eq!(s, 403);
    assert!(server.terminate()?.success());
    Ok(())
}

/// An upstream answering every request with an HTML page whose scripts would report back to
/// the server they run on.
fn html_upstream(page: &'static str) -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let Ok(read) = conn.try_clone() else { continue };
            let mut reader = BufReader::new(read);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    Ok(url)
}

#[test]
fn an_uploaded_or_proxied_page_runs_nothing_and_reads_no_session() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")])?;
    let public = server.public.clone();
    const PAGE: &str = "<!doctype html><html><head><title>untouched</title></head><body><p id=p>static</p>\
        <script>document.title = 'ran ' + document.cookie; document.getElementById('p').textContent = 'script ran';\
        fetch('/pwned-fetch?c=' + encodeURIComponent(document.cookie), {method: 'POST', credentials: 'include'});\
        new Image().src = '/pwned-image';</script><img src=\"/pwned-img-tag\"></body></html>";
    create_repository(&public, &basic(PW), Repo::hosted("cc", Format::Conan))?;
    let base = "/repository/cc/v2/conans/x/1.0/_/_/revisions/r1/files";
    put(&public, &format!("{base}/conanfile.py"), PAGE.as_bytes())?;
    put(
        &public,
        &format!("{base}/conanmanifest.txt"),
        format!("1\nconanfile.py: {}\n", md5_hex(PAGE.as_bytes())).as_bytes(),
    )?;
    let upstream = html_upstream(PAGE)?;
    create_repository(&public, &basic(PW), Repo::proxy("goproxy", Format::Go, &upstream))?;

    let b = Browser::start(&driver)?;
    sign_in(&b, &public, "admin", PW)?;
    for (url, html) in [
        (format!("{public}{base}/conanfile.py"), false),
        (format!("{public}/repository/goproxy/example.com/m/@v/list"), true),
    ] {
        b.goto(&url)?;
        std::thread::sleep(Duration::from_millis(500));
        if !html && b.current_url()? != url {
            // Served as a file to save (not text/html): the browser downloads it and stays.
            let r = ureq::get(&url).call()?;
            assert!(!r.content_type().contains("html"), "{url}: {}", r.content_type());
            continue;
        }
        let source = b.source()?;
        if html {
            assert!(source.contains(">static<"), "the upstream's page rendered as HTML: {source}");
        } else {
            assert!(source.contains("document.title"), "the uploaded file shown as text: {source}");
        }
        let shown = b.exec(
            "return [document.title, document.getElementById('p') && document.getElementById('p').textContent];",
            vec![],
        );
        if let Ok(v) = &shown {
            assert_eq!(v[0], json!("untouched"), "{url}: its script ran: {v}");
            assert_eq!(v[1], json!("static"), "{url}: {v}");
        }
        // A sandboxed document has an origin of its own: no cookie of the UI is visible to it.
        let cookie =
            b.exec("try { return 'visible:' + document.cookie; } catch (e) { return 'denied:' + e.name; }", vec![])?;
        assert_eq!(cookie, json!("denied:SecurityError"), "{url}");
    }
    std::thread::sleep(Duration::from_millis(300));
    let log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(!log.contains("pwned"), "the page made requests of its own:\n{log}");
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// Picks `value` in the `<select>` `css` finds.
fn choose(b: &Browser, css: &str, value: &str) -> anyhow::Result<()> {
    b.click(&b.find(&format!("{css} option[value=\"{value}\"]"))?)
}

#[test]
fn administering_repositories_users_roles_tokens_and_cleanup_in_chromium() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_WEBHOOKS__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)])?;
    let public = server.public.clone();
    let b = Browser::start(&driver)?;
    sign_in(&b, &public, "admin", PW)?;
    b.goto(&format!("{public}/admin"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("reachable, migrations applied"), "{text}");
    assert!(text.contains("Worker backlog"), "{text}");
    screenshot(&b, "admin-status")?;

    // A repository: the API's own validation message on the form, then one that is valid.
    b.goto(&format!("{public}/admin/repositories"))?;
    b.fill("#name", "bad name")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    let error = b.wait_for("p.error", Duration::from_secs(5))?;
    assert!(b.text(&error)?.contains("bad name"), "{}", b.text(&error)?);
    b.fill("#name", "newdebs")?;
    choose(&b, "#format", "apt")?;
    choose(&b, "#type", "hosted")?;
    let shown = |id: &str| -> anyhow::Result<bool> {
        Ok(b.exec(&format!("return document.getElementById('{id}').getClientRects().length > 0;"), vec![])?
            == json!(true))
    };
    assert!(shown("apt_distribution")? && !shown("remote_url")? && !shown("members")?, "only APT hosted's blocks");
    choose(&b, "#type", "proxy")?;
    assert!(shown("remote_url")? && !shown("write_policy")?, "a proxy's blocks");
    choose(&b, "#type", "hosted")?;
    b.fill("#apt_distribution", "bookworm")?;
    b.fill("#apt_components", "main, contrib")?;
    b.fill("#apt_architectures", "amd64, all")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    b.wait_for("h1 .badge", Duration::from_secs(10))?;
    assert!(b.current_url()?.ends_with("/admin/repositories/newdebs"), "{}", b.current_url()?);
    let repo = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs", None)?;
    assert_eq!(repo["apt"]["distribution"], json!("bookworm"));
    assert_eq!(repo["apt"]["components"], json!(["main", "contrib"]));
    screenshot(&b, "admin-repository")?;
    // Edit: closed to anonymous readers.
    b.click(&b.find("input[name=anonymous_read]")?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    b.wait_for("p.notice", Duration::from_secs(10))?;
    let repo = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs", None)?;
    assert_eq!(repo["anonymous_read"], json!(false), "{repo}");
    // Rotate the signing key: a new fingerprint.
    let before =
        common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs/signing-key", None)?;
    b.click_to_load(&b.find_by_text("button", "Rotate the signing key")?)?;
    let notice = b.wait_for("p.notice", Duration::from_secs(30))?;
    assert!(b.text(&notice)?.contains("A new signing key"), "{}", b.text(&notice)?);
    let after =
        common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs/signing-key", None)?;
    assert_ne!(before["fingerprint"], after["fingerprint"], "{before} {after}");
    // A snapshot made, listed with the URL clients use, and deleted.
    b.fill("#snapshot_name", "ui-snap")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Make a snapshot")?)?;
    let notice = b.wait_for("p.notice", Duration::from_secs(30))?;
    let url = format!("{public}/repository/newdebs/-/snapshots/ui-snap/");
    assert!(b.text(&notice)?.contains(&format!("Snapshot ui-snap made: {url}")), "{}", b.text(&notice)?);
    let listed =
        common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs/snapshots", None)?;
    assert_eq!(listed[0]["name"], json!("ui-snap"), "{listed}");
    // (Closed to anonymous readers above: read with the admin's credentials.)
    let (s, text) =
        status_of(ureq::get(&format!("{url}dists/bookworm/Release")).set("Authorization", &basic(PW)).call())?;
    assert!(s == 200 && text.contains("Suite: bookworm"), "{s} {text}");
    assert_eq!(get_text(&format!("{url}dists/bookworm/Release"))?.0, 401, "as closed as the repository");
    assert!(b.text_of_page()?.contains(&url), "listed with its URL");
    b.click_to_load(&b.find("button[aria-label='Delete snapshot ui-snap']")?)?;
    let notice = b.wait_for("p.notice", Duration::from_secs(10))?;
    assert!(b.text(&notice)?.contains("Snapshot ui-snap deleted."), "{}", b.text(&notice)?);
    let listed =
        common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/newdebs/snapshots", None)?;
    assert_eq!(listed, json!([]));

    // A role and a user holding it.
    b.goto(&format!("{public}/admin/roles"))?;
    b.fill("#name", "newdebs-writers")?;
    b.fill("#privileges", "newdebs* read, write")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create role")?)?;
    b.wait_for("table", Duration::from_secs(5))?;
    assert!(b.text_of_page()?.contains("newdebs-writers"));
    let role = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/roles/newdebs-writers", None)?;
    assert_eq!(role["privileges"], json!([{"repositories": "newdebs*", "actions": ["read", "write"]}]));
    b.goto(&format!("{public}/admin/users"))?;
    b.fill("#username", "carol")?;
    b.fill("#new-password", "carol-password")?;
    b.fill("#roles", "newdebs-writers")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create user")?)?;
    b.wait_for("table", Duration::from_secs(10))?;
    let user = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/users/carol", None)?;
    assert_eq!(user["roles"], json!(["newdebs-writers"]));
    screenshot(&b, "admin-users")?;

    // A token, shown once, that works with a client.
    b.goto(&format!("{public}/admin/tokens"))?;
    b.fill("#name", "ci")?;
    b.click(&b.find("input[name=read]")?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create token")?)?;
    let shown = b.wait_for(".notice figure.snippet pre", Duration::from_secs(5))?;
    let token = b.text(&shown)?;
    assert!(token.starts_with("pky_"), "{token}");
    let (s, _) = status_of(
        ureq::get(&format!("{public}/repository/newdebs/dists/bookworm/InRelease"))
            .set("Authorization", &format!("Bearer {token}"))
            .call(),
    )?;
    assert_eq!(s, 200, "the new token reads the closed repository");
    b.goto(&format!("{public}/admin/tokens"))?;
    assert!(!b.source()?.contains(&token), "shown only once");
    b.click_to_load(&b.find_by_text("button", "Revoke")?)?;
    b.wait_for(".badge", Duration::from_secs(5))?;
    let (s, _) = status_of(
        ureq::get(&format!("{public}/repository/newdebs/dists/bookworm/InRelease"))
            .set("Authorization", &format!("Bearer {token}"))
            .call(),
    )?;
    assert_eq!(s, 401, "revoked");

    // Cleanup: a policy's preview names what a run would remove.
    create_repository(&public, &basic(PW), Repo::hosted("debs", Format::Apt))?;
    for v in ["1.0", "2.0"] {
        let control = format!(
            "Package: libold\nVersion: {v}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: x\n"
        );
        let deb = packyard_codecs::apt::testing::deb(&control, ".gz");
        let (s, text) = status_of(
            ureq::post(&format!("{public}/repository/debs/")).set("Authorization", &basic(PW)).send_bytes(&deb),
        )?;
        assert_eq!(s, 201, "{text}");
    }
    // Created with the form: a field per criterion, the repositories of its format to tick.
    b.goto(&format!("{public}/admin/cleanup"))?;
    b.fill("#name", "keep-one")?;
    choose(&b, "#format", "apt")?;
    b.fill("#keep_latest", "1")?;
    b.click(&b.find("input[name=repository][value=debs]")?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create policy")?)?;
    assert_eq!(b.current_url()?, format!("{public}/admin/cleanup/keep-one"));
    let facts = b.text(&b.find("dl.facts")?)?;
    assert!(facts.contains("keeping the newest 1 version") && facts.contains("only when run by hand"), "{facts}");
    let policy = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/cleanup-policies/keep-one", None)?;
    assert_eq!(
        (&policy["criteria"], &policy["repositories"]),
        (&json!({"keep_latest": 1}), &json!(["debs"])),
        "{policy}"
    );
    let runs = b.text(&b.find("table tbody")?)?;
    assert!(runs.contains("debs") && runs.contains("idle"), "its runs listed: {runs}");
    // The preview offers the policy's own repositories only.
    let offered: Vec<String> =
        b.find_all("#repository option")?.iter().map(|o| b.text(o)).collect::<anyhow::Result<_>>()?;
    assert_eq!(offered, ["debs"]);
    b.click_to_load(&b.find_by_text("form.search button", "Preview")?)?;
    let said = b.wait_for("p[role=status]", Duration::from_secs(10))?;
    assert!(b.text(&said)?.contains("would remove 1 component ("), "{}", b.text(&said)?);
    let rows = b.find_all("table tbody tr")?;
    assert!(b.text(rows.last().ok_or_else(|| anyhow::anyhow!("no preview rows"))?)?.contains("1.0"));
    screenshot(&b, "admin-cleanup-policy")?;
    // Run it now; its run shows in the history once a worker has made it.
    b.click_to_load(&b.find_by_text("form button.danger", "Run now on debs")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Run requested on debs"), "{}", b.text_of_page()?);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.goto(&format!("{public}/admin/cleanup/keep-one"))?;
        let runs = b.text(&b.find("table tbody")?)?;
        if runs.contains("1 component") && runs.contains("idle") {
            break;
        }
        assert!(Instant::now() < deadline, "the run did not finish: {runs}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/cleanup-policies/keep-one/runs", None)?;
    assert_eq!(run["items"][0]["components"], 1, "{run}");
    b.goto(&format!("{public}/admin/cleanup"))?;
    let listed = b.text(&b.find("table tbody")?)?;
    assert!(listed.contains("keep-one") && listed.contains("debs: 1 component removed"), "{listed}");
    screenshot(&b, "admin-cleanup")?;

    // A webhook made with the form; "Send a test event" reaches the receiver, and the delivery
    // log says so.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let hook_url = format!("http://{}/hook", listener.local_addr()?);
    let received = crate::webhooks::receiver(listener, 0);
    b.goto(&format!("{public}/admin/webhooks"))?;
    b.fill("#name", "ci")?;
    b.fill("#url", &hook_url)?;
    b.click(&b.find("input[name=event][value='component.published']")?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create webhook")?)?;
    let notice = b.text(&b.find("p.notice")?)?;
    assert!(notice.contains("Its generated secret, shown only now: "), "{notice}");
    let hook = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/webhooks/ci", None)?;
    assert_eq!((&hook["url"], &hook["events"]), (&json!(hook_url), &json!(["component.published"])), "{hook}");
    b.click_to_load(&b.find_by_text("form button.secondary", "Send a test event")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Test event queued as delivery"), "{}", b.text_of_page()?);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.goto(&format!("{public}/admin/webhooks/ci"))?;
        let log = b.find_all("#deliveries + .table-wrap tbody tr").unwrap_or_default();
        let first = match log.first() {
            Some(row) => b.text(row)?,
            None => String::new(),
        };
        if first.contains("webhook.test") && first.contains("delivered") && first.contains("HTTP 204") {
            break;
        }
        assert!(Instant::now() < deadline, "the test delivery was not delivered: {first:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let got = received.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].event.as_str(), got[0].hook.as_str(), got[0].status), ("webhook.test", "ci", 204));
    let body: Value = serde_json::from_slice(&got[0].body)?;
    assert_eq!(body["data"]["webhook"], "ci", "{body}");
    screenshot(&b, "admin-webhook")?;
    b.goto(&format!("{public}/admin/directories"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("None configured") && text.contains("Not configured"), "{text}");
    screenshot(&b, "admin-directories")?;

    // Edit a user: another role and a new password, which then signs in to a client's API.
    b.goto(&format!("{public}/admin/users"))?;
    b.click_to_load(&b.find_by_text("table a", "carol")?)?;
    assert_eq!(b.attribute(&b.find("#roles")?, "value")?.as_deref(), Some("newdebs-writers"));
    b.fill("#roles", "newdebs-writers, nobody-such")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    let error = b.find("p.error")?;
    assert!(b.text(&error)?.contains("nobody-such"), "the API's message: {}", b.text(&error)?);
    b.fill("#roles", "newdebs-writers, admin")?;
    b.fill("#new-password", "carol-second-password")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Saved."));
    let user = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/users/carol", None)?;
    assert_eq!(user["roles"], json!(["admin", "newdebs-writers"]), "{user}");
    let carol = |pw: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("carol:{pw}")));
    let (s, _) =
        status_of(ureq::get(&format!("{public}/api/v1/tokens")).set("Authorization", &carol("carol-password")).call())?;
    assert_eq!(s, 401, "the old password no longer works");
    let (s, _) = status_of(
        ureq::get(&format!("{public}/api/v1/tokens")).set("Authorization", &carol("carol-second-password")).call(),
    )?;
    assert_eq!(s, 200, "the new one does");

    // Edit a role: its privileges, one per line.
    b.goto(&format!("{public}/admin/roles/newdebs-writers"))?;
    let typed = b.text(&b.find("#privileges")?)?;
    assert_eq!(typed.trim(), "newdebs* read, write");
    b.fill("#privileges", "newdebs* read, write, delete\ndebs read")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Saved."));
    let role = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/roles/newdebs-writers", None)?;
    assert_eq!(
        role["privileges"],
        json!([
            {"repositories": "newdebs*", "actions": ["read", "write", "delete"]},
            {"repositories": "debs", "actions": ["read"]}
        ]),
        "{role}"
    );
    b.fill("#privileges", "newdebs*")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    assert!(b.text(&b.find("p.error")?)?.contains("then its actions"), "a line without actions is explained");

    // A proxy with upstream credentials: the username shown, the password never.
    b.goto(&format!("{public}/admin/repositories"))?;
    b.fill("#name", "upstream-debs")?;
    choose(&b, "#format", "apt")?;
    choose(&b, "#type", "proxy")?;
    b.fill("#remote_url", "https://deb.debian.org/debian")?;
    b.fill("#proxy_username", "mirror-user")?;
    b.fill("#proxy_password", "mirror-secret")?;
    b.fill("#negative_ttl_secs", "60")?;
    b.fill("#max_stale_secs", "120")?;
    b.click(&b.find("input[name=offline]")?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    assert!(b.current_url()?.ends_with("/admin/repositories/upstream-debs"), "{}", b.current_url()?);
    let repo = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/upstream-debs", None)?;
    assert_eq!(repo["proxy"]["username"], json!("mirror-user"), "{repo}");
    assert_eq!(repo["proxy"]["negative_ttl_secs"], json!(60), "{repo}");
    assert_eq!((&repo["proxy"]["max_stale_secs"], &repo["proxy"]["offline"]), (&json!(120), &json!(true)), "{repo}");
    assert_eq!(b.attribute(&b.find("#proxy_username")?, "value")?.as_deref(), Some("mirror-user"));
    assert_eq!(b.attribute(&b.find("#max_stale_secs")?, "value")?.as_deref(), Some("120"));
    assert!(!b.source()?.contains("mirror-secret"), "the password is never shown");
    // Back online, without a stale limit.
    b.click(&b.find("input[name=offline]")?)?;
    b.fill("#max_stale_secs", "")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    let repo = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/upstream-debs", None)?;
    assert!(repo["proxy"].get("offline").is_none_or(|o| o == &json!(false)), "online (shown when on): {repo}");
    assert!(repo["proxy"].get("max_stale_secs").is_none_or(serde_json::Value::is_null), "{repo}");

    // A role's privilege narrowed by a content selector: written and shown with `@name`.
    let selector = json!({"name": "team-x", "expression": "name =^ \"team-x-\""});
    common::process::admin_json(&public, &basic(PW), "POST", "/api/v1/content-selectors", Some(selector))?;
    b.goto(&format!("{public}/admin/roles/newdebs-writers"))?;
    b.fill("#privileges", "newdebs* read, write @team-x\ndebs read")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Save changes")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Saved."));
    let role = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/roles/newdebs-writers", None)?;
    assert_eq!(
        role["privileges"],
        json!([
            {"repositories": "newdebs*", "actions": ["read", "write"], "content_selector": "team-x"},
            {"repositories": "debs", "actions": ["read"]}
        ]),
        "{role}"
    );
    assert!(b.source()?.contains("newdebs* read, write @team-x"), "the form shows the selector again");

    // My password: the current one is asked; the new one signs in.
    b.goto(&format!("{public}/admin/tokens"))?;
    b.fill("#current-password", "not-my-password")?;
    b.fill("#changed-password", "admin-second-password")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Change password")?)?;
    assert!(b.text(&b.find("p.error")?)?.contains("current password is wrong"));
    b.fill("#current-password", PW)?;
    b.fill("#changed-password", "admin-second-password")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Change password")?)?;
    assert!(b.text(&b.find("p.notice")?)?.contains("Your password is changed."));
    let (s, _) = status_of(ureq::get(&format!("{public}/api/v1/users")).set("Authorization", &basic(PW)).call())?;
    assert_eq!(s, 401, "the old admin password no longer works");
    let new_basic =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("admin:admin-second-password"));

    // The audit log, filtered.
    b.goto(&format!("{public}/admin/audit?action=user."))?;
    let text = b.text_of_page()?;
    assert!(text.contains("user.create") && text.contains("carol"), "{text}");
    assert!(text.contains("user.update") && text.contains("user.password"), "{text}");
    assert!(!text.contains("role.create"), "filtered by action: {text}");
    let (s, _) = status_of(ureq::get(&format!("{public}/api/v1/users")).set("Authorization", &new_basic).call())?;
    assert_eq!(s, 200);
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// nginx in front, serving Packyard under `/packyard/` (the prefix stripped), on a port of its own.
struct Nginx {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx_in_front(port: u16, upstream: &str) -> anyhow::Result<Option<Nginx>> {
    let Some(nginx) = ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().find(|p| std::path::Path::new(p).is_file())
    else {
        anyhow::ensure!(std::env::var_os("CI").is_none(), "nginx is not installed (scripts/test.sh installs it)");
        return Ok(None);
    };
    let dir = tempfile::tempdir()?;
    let d = dir.path().display();
    let upstream = upstream.trim_start_matches("http://");
    let conf = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         client_max_body_size 0;\n  server {{\n    listen 127.0.0.1:{port};\n\
         location /packyard/ {{\n      proxy_pass http://{upstream}/;\n      proxy_set_header Host $host:$server_port;\n\
         proxy_set_header X-Forwarded-For $remote_addr;\n    }}\n  }}\n}}\n"
    );
    std::fs::write(dir.path().join("nginx.conf"), conf)?;
    let child = std::process::Command::new(nginx)
        .args(["-e", &format!("{d}/error.log"), "-c", &format!("{d}/nginx.conf")])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let front = Nginx { child, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "nginx did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Some(front))
}

/// Every URL the page links to, loads or posts to.
fn urls_on_page(b: &Browser) -> anyhow::Result<Vec<String>> {
    let v = b.exec(
        "return [...document.querySelectorAll('a[href], link[href], script[src], img[src], form[action]')]\
         .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'));",
        vec![],
    )?;
    Ok(v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default())
}

/// Behind nginx under `/packyard/` with `server.public_url` saying so: every link, form, asset,
/// redirect and snippet carries the prefix, the cookie's path is the prefix, the Nexus API's
/// download URLs work, and the real apt-get installs from the sources line the page shows.
#[test]
fn behind_a_reverse_proxy_under_a_path_prefix() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let front = format!("http://127.0.0.1:{port}/packyard");
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_SERVER__PUBLIC_URL", &front)])?;
    one_of_each(&server.public)?;
    wait_counted(&server.public, "debs")?;
    let Some(_nginx) = nginx_in_front(port, &server.public)? else { return Ok(()) };

    let b = Browser::start(&driver)?;
    sign_in(&b, &front, "admin", PW)?;
    assert_eq!(b.current_url()?, format!("{front}/"), "the sign-in's redirect keeps the prefix");
    let cookies = b.cookies()?;
    let session = cookies.iter().find(|c| c["name"] == "packyard_session").cloned().unwrap_or(Value::Null);
    assert_eq!(session["path"], json!("/packyard/"), "only under the prefix: {cookies:?}");

    let ours = |u: &str| u.starts_with("/packyard/") || u.starts_with(&format!("{front}/")) || u.starts_with('#');
    let mut seen = std::collections::BTreeSet::new();
    for page in
        ["/", "/browse/debs", "/browse/gomods", "/search?q=hello", "/admin", "/admin/repositories", "/admin/tokens"]
    {
        b.goto(&format!("{front}{page}"))?;
        assert!(b.find(".who .user").is_ok(), "{page}: signed in through the prefix");
        for u in urls_on_page(&b)? {
            assert!(ours(&u), "{page} links outside the prefix: {u}");
            seen.insert(u);
        }
    }
    // The stylesheet and script load through nginx.
    for asset in seen.iter().filter(|u| u.starts_with("/packyard/static/")) {
        let (s, _) = get_text(&format!("http://127.0.0.1:{port}{asset}"))?;
        assert_eq!(s, 200, "{asset}");
    }
    assert!(seen.iter().any(|u| u.starts_with("/packyard/static/packyard.") && u.contains(".css")), "{seen:?}");

    // A component's snippets name the public URL, and each of their URLs answers through nginx.
    b.goto(&format!("{front}/browse/debs"))?;
    b.click_to_load(&b.find_by_text("table a", "hello")?)?;
    assert!(b.current_url()?.starts_with(&format!("{front}/component/")), "{}", b.current_url()?);
    let snips = snippets(&b)?.join("\n");
    let sources = format!("deb [signed-by=/etc/apt/keyrings/packyard-debs.asc] {front}/repository/debs stable main");
    assert!(snips.contains(&sources), "{snips}");
    let key_url = format!("{front}/repository/debs/gpg.key");
    assert!(snips.contains(&format!("curl -fsSL {key_url}")), "{snips}");
    for word in snips.split_whitespace().filter(|w| w.starts_with("http")) {
        let word = word.trim_matches(|c: char| c == '"' || c == '\'' || c == ']');
        assert!(word.starts_with(&format!("{front}/")), "a snippet URL outside the public URL: {word}");
    }
    let key = ureq::get(&key_url).call()?;
    let mut key_bytes = Vec::new();
    std::io::Read::read_to_end(&mut key.into_reader(), &mut key_bytes)?;

    // The real apt-get, with the page's sources line (its keyring in a scratch directory).
    if std::process::Command::new("apt-get").arg("--version").output().is_ok() {
        let root = common::apt::scratch(&key_bytes, |keyring| {
            sources.replace("/etc/apt/keyrings/packyard-debs.asc", &keyring.display().to_string())
        })?;
        let out = common::apt::tool("apt-get", root.path(), &["update"])?;
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && !log.contains("Err:") && !log.contains("W: "), "apt-get update:\n{log}");
        let out = common::apt::tool("apt-get", root.path(), &["download", "hello"])?;
        assert!(out.status.success(), "apt-get download: {}", String::from_utf8_lossy(&out.stderr));
        assert!(root.path().join("downloads/hello_1.0_amd64.deb").is_file());
    }

    // Nexus's API through the prefix: its downloadUrl is the public one, and it serves the bytes.
    let assets: Value = ureq::get(&format!("{front}/service/rest/v1/search/assets?repository=debs&name=hello"))
        .set("Authorization", &basic(PW))
        .call()?
        .into_json()?;
    let asset = &assets["items"][0];
    let url = asset["downloadUrl"].as_str().unwrap_or_default().to_string();
    assert!(url.starts_with(&format!("{front}/repository/debs/pool/")), "{assets}");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut ureq::get(&url).call()?.into_reader(), &mut bytes)?;
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
        asset["checksum"]["sha256"].as_str().unwrap_or_default()
    );

    // A form's redirect and signing out stay under the prefix.
    b.goto(&format!("{front}/admin/roles"))?;
    b.fill("#name", "behind-nginx")?;
    b.fill("#privileges", "debs read")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create role")?)?;
    assert_eq!(b.current_url()?, format!("{front}/admin/roles"));
    b.click_to_load(&b.find_by_text(".who button", "Sign out")?)?;
    assert!(b.current_url()?.starts_with(&format!("{front}/")), "{}", b.current_url()?);
    assert!(b.find(".who a.button").is_ok(), "signed out");
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

/// Puts the keyboard's starting point at the top of the page (focusing the body once, as a
/// page without autofocus starts), so that Tab goes to the first element.
fn from_the_top(b: &Browser) -> anyhow::Result<()> {
    b.exec(
        "document.body.tabIndex = -1; document.body.focus(); document.body.removeAttribute('tabindex');\
         window.scrollTo(0, 0);",
        vec![],
    )?;
    Ok(())
}

/// Tabs through the page from its top: each element the focus reaches, in order, until it
/// leaves the page or comes back around.
fn tab_through(b: &Browser) -> anyhow::Result<Vec<Value>> {
    from_the_top(b)?;
    let mut seen: Vec<Value> = Vec::new();
    for _ in 0..300 {
        b.keys(TAB)?;
        let f = b.focused()?;
        if f["tag"] == "body" || seen.first() == Some(&f) {
            break;
        }
        // A date field's day, month and year are tab stops of one element.
        if seen.last() != Some(&f) {
            seen.push(f);
        }
    }
    Ok(seen)
}

/// What sticks out of the window: the page's scroll width against the window's, and the first
/// elements (outside a table's own scrolling frame) whose right edge passes the window's.
const OVERFLOW: &str = "const vw = document.documentElement.clientWidth;\
    const bad = [...document.querySelectorAll('body *')].filter(e => {\
        if (e.closest('.table-wrap')) return false;\
        const r = e.getBoundingClientRect();\
        return r.width > 0 && r.right > vw + 1;\
    }).map(e => e.tagName + '.' + e.className + ': ' + (e.textContent || '').trim().slice(0, 60));\
    return {scroll: document.documentElement.scrollWidth, vw: vw, bad: bad.slice(0, 5)};";

/// How many elements on the page a keyboard user should reach (a group of radio buttons is one
/// stop: Tab reaches its checked one, the arrows the others).
fn focusable_count(b: &Browser) -> anyhow::Result<usize> {
    let v = b.exec(
        "const radio = e => e.type !== 'radio' || e.checked\
             || (![...document.getElementsByName(e.name)].some(r => r.checked) && document.getElementsByName(e.name)[0] === e);\
         return [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, details > summary')]\
         .filter(e => !e.disabled && !e.hidden && getComputedStyle(e).visibility !== 'hidden' && radio(e)\
                      && (e.getClientRects().length > 0 || e.classList.contains('skip'))).length;",
        vec![],
    )?;
    Ok(v.as_u64().unwrap_or(0) as usize)
}

/// Tabs until the focused element matches `want`.
fn tab_to(b: &Browser, want: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    for _ in 0..300 {
        b.keys(TAB)?;
        let f = b.focused()?;
        if want(&f) {
            return Ok(f);
        }
    }
    anyhow::bail!("the keyboard never reached the element on {}", b.current_url()?)
}

/// Everything reachable and usable with the keyboard alone: the skip link first, every link,
/// field and button of each page in the tab order with a visible focus ring, signing in, a
/// link followed and a form sent with Enter.
#[test]
fn every_page_works_from_the_keyboard_alone() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[])?;
    let public = server.public.clone();
    one_of_each(&public)?;
    let b = Browser::start(&driver)?;

    // The skip link comes first and moves the focus to the page's content.
    b.goto(&format!("{public}/signin"))?;
    let first = tab_through(&b)?;
    assert_eq!(first.first().map(|f| f["text"].clone()), Some(json!("Skip to content")), "{first:?}");
    from_the_top(&b)?;
    b.keys(TAB)?;
    b.keys(ENTER)?;
    assert_eq!(b.focused()?["id"], json!("main"), "Enter on the skip link focuses the content");

    // Signing in: tab to the fields, type, Enter.
    tab_to(&b, |f| f["id"] == "username")?;
    b.keys("admin")?;
    b.keys(TAB)?;
    assert_eq!(b.focused()?["id"], json!("password"));
    b.keys(PW)?;
    b.keys_to_load(ENTER)?;
    assert!(b.find(".who .user").is_ok(), "signed in from the keyboard: {}", b.current_url()?);

    // A component's page, as the browse page links it.
    b.goto(&format!("{public}/browse/debs"))?;
    let component = b.attribute(&b.find_by_text("table a", "hello")?, "href")?.unwrap_or_default();
    common::process::admin_json(
        &public,
        &basic(PW),
        "POST",
        "/api/v1/cleanup-policies",
        Some(json!({"name": "keep-two", "format": "apt", "criteria": {"keep_latest": 2}, "repositories": ["debs"]})),
    )?;
    for page in [
        "/".to_string(),
        "/browse/debs".to_string(),
        "/browse/gomods".to_string(),
        component,
        "/search?q=hello".to_string(),
        "/admin".to_string(),
        "/admin/repositories".to_string(),
        "/admin/repositories/debs".to_string(),
        "/admin/users".to_string(),
        "/admin/roles".to_string(),
        "/admin/tokens".to_string(),
        "/admin/audit".to_string(),
        "/browse/debs/files/".to_string(),
        "/browse/debs/files/dists/stable/".to_string(),
        "/admin/cleanup".to_string(),
        "/admin/cleanup/keep-two".to_string(),
        "/admin/webhooks".to_string(),
        "/admin/directories".to_string(),
    ] {
        let url = if page.starts_with("http") { page.clone() } else { format!("{public}{page}") };
        b.goto(&url)?;
        let reached = tab_through(&b)?;
        assert_eq!(reached.first().map(|f| f["text"].clone()), Some(json!("Skip to content")), "{page}");
        for f in &reached {
            assert_eq!(f["ring"], json!(true), "{page}: no visible focus ring on {f}");
        }
        let unique: std::collections::HashSet<String> = reached.iter().map(Value::to_string).collect();
        let want = focusable_count(&b)?;
        assert_eq!(
            reached.len(),
            want,
            "{page}: the keyboard reached {} of {want} elements: {reached:?}",
            reached.len()
        );
        assert_eq!(unique.len(), want, "{page}: each element once: {reached:?}");
        // Nothing overflows the window at a laptop's width or a narrow one (a wide table
        // scrolls inside its own frame).
        for width in [1366, 800] {
            b.set_window(width, 900)?;
            let seen = b.exec(OVERFLOW, vec![])?;
            let (scroll, vw) = (seen["scroll"].as_u64(), seen["vw"].as_u64());
            assert!(scroll.is_some() && vw.is_some(), "{page} at {width} px: {seen}");
            assert!(scroll <= vw && seen["bad"].as_array().is_some_and(Vec::is_empty), "{page} at {width} px: {seen}");
        }
        b.set_window(1280, 900)?;
    }

    // A link followed with Enter.
    b.goto(&format!("{public}/"))?;
    tab_to(&b, |f| f["href"].as_str().is_some_and(|h| h.ends_with("/browse/alpine")))?;
    b.keys_to_load(ENTER)?;
    assert!(b.current_url()?.ends_with("/browse/alpine"), "{}", b.current_url()?);

    // A form sent with Enter: a repository created from the keyboard.
    b.goto(&format!("{public}/admin/repositories"))?;
    tab_to(&b, |f| f["id"] == "name")?;
    b.keys("typed-debs")?;
    b.keys_to_load(ENTER)?;
    assert!(b.current_url()?.ends_with("/admin/repositories/typed-debs"), "{}", b.current_url()?);
    let repo = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/typed-debs", None)?;
    assert_eq!(repo["format"], json!("apt"), "{repo}");
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// The relative luminance of a CSS `rgb(…)` colour (0 black, 1 white).
fn luminance(css: &str) -> f64 {
    let parts: Vec<f64> = css
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let lin = |c: f64| {
        let c = c / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    match parts.as_slice() {
        [r, g, bl, ..] => 0.2126 * lin(*r) + 0.7152 * lin(*g) + 0.0722 * lin(*bl),
        _ => f64::NAN,
    }
}

/// Light and dark follow the system's setting, each with readable contrast (WCAG AA, 4.5:1, for
/// body text and links); screenshots of both.
#[test]
fn light_and_dark_follow_the_system_setting() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[])?;
    let public = server.public.clone();
    one_of_each(&public)?;
    wait_counted(&public, "debs")?;
    let b = Browser::start(&driver)?;
    sign_in(&b, &public, "admin", PW)?;
    let colours = |b: &Browser| -> anyhow::Result<(f64, f64, f64)> {
        let v = b.exec(
            "const body = getComputedStyle(document.body); const a = document.querySelector('main a');\
             return [body.backgroundColor, body.color, a ? getComputedStyle(a).color : body.color];",
            vec![],
        )?;
        let c = |i: usize| luminance(v[i].as_str().unwrap_or_default());
        Ok((c(0), c(1), c(2)))
    };
    let contrast = |a: f64, b: f64| (a.max(b) + 0.05) / (a.min(b) + 0.05);
    for scheme in ["light", "dark"] {
        b.prefer_color_scheme(scheme)?;
        b.goto(&format!("{public}/"))?;
        let (bg, text, link) = colours(&b)?;
        if scheme == "light" {
            assert!(bg > 0.8, "a light background: {bg}");
        } else {
            assert!(bg < 0.05, "a dark background: {bg}");
        }
        assert!(contrast(bg, text) >= 4.5, "{scheme}: text contrast {:.1}", contrast(bg, text));
        assert!(contrast(bg, link) >= 4.5, "{scheme}: link contrast {:.1}", contrast(bg, link));
        if scheme == "dark" {
            screenshot(&b, "repositories-dark")?;
            b.goto(&format!("{public}/browse/debs"))?;
            b.click_to_load(&b.find_by_text("table a", "hello")?)?;
            screenshot(&b, "component-apt-dark")?;
            b.goto(&format!("{public}/admin/repositories"))?;
            screenshot(&b, "admin-repositories-dark")?;
        }
    }
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// Runs set-up snippets as a person pastes them — `sudo`, `curl`, `tee`, `apt-get` as written —
/// with the system's apt paths moved into `root` (`APT_CONFIG` points apt there), then `then`.
fn run_pasted(root: &std::path::Path, snippets: &[String], then: &str) -> anyhow::Result<String> {
    for d in ["keyrings", "sources.list.d", "state/lists/partial", "cache/archives/partial", "downloads"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    std::fs::write(root.join("state/status"), "")?;
    let r = root.display();
    std::fs::write(
        root.join("apt.conf"),
        format!(
            "Dir::Etc::SourceList \"/dev/null\";\nDir::Etc::SourceParts \"{r}/sources.list.d\";\nDir::State \"{r}/state\";\n\
             Dir::State::status \"{r}/state/status\";\nDir::Cache \"{r}/cache\";\nDebug::NoLocking \"1\";\n\
             APT::Sandbox::User \"root\";\nAcquire::Retries \"0\";\n"
        ),
    )?;
    let script = snippets
        .iter()
        .map(|s| {
            s.replace("sudo ", "")
                .replace("/etc/apt/keyrings", &format!("{r}/keyrings"))
                .replace("/etc/apt/sources.list.d", &format!("{r}/sources.list.d"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let out = std::process::Command::new("sh")
        .arg("-ec")
        .arg(format!("{script}\n{then}"))
        .current_dir(root.join("downloads"))
        .env("APT_CONFIG", root.join("apt.conf"))
        .output()?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.success() && !log.contains("Err:") && !log.contains("W: "), "{script}\n{then}:\n{log}");
    Ok(log)
}

/// An APT proxy of a signed upstream serving `bookworm` and a group over it, both made with the
/// web UI's forms (the upstream key pasted into the proxy's form): the group made the old way
/// (members only) is refused with what to set; the repository pages' set-up lines, pasted as
/// they are, make the real apt-get install from each.
#[test]
fn an_apt_group_over_a_proxy_made_in_the_ui_installs_with_its_own_setup_lines() -> anyhow::Result<()> {
    use common::archive::{archive_files, Dist, Package, Upstream};
    let Some(driver) = driver() else { return Ok(()) };
    let signer = packyard_codecs::apt::signing::Signer::generate("Fake upstream <fake@example.org>")?;
    let package = Package::new("upthing", "1.0", "amd64");
    let dist = Dist {
        name: "bookworm",
        indexes: vec![("amd64", vec![&package])],
        by_hash: true,
        forms: &["", ".xz"],
        valid_until: None,
    };
    let upstream = Upstream::start()?;
    upstream.publish(archive_files(&dist, &signer, None)?);
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)])?;
    let public = server.public.clone();
    let b = Browser::start(&driver)?;
    sign_in(&b, &public, "admin", PW)?;

    b.goto(&format!("{public}/admin/repositories"))?;
    b.fill("#name", "debian")?;
    choose(&b, "#format", "apt")?;
    choose(&b, "#type", "proxy")?;
    // The proxy form has the upstream key (a field the old form lacked).
    b.find("textarea#apt_signed_by")?;
    b.fill("#remote_url", &upstream.url)?;
    b.fill("#apt_distributions", "bookworm")?;
    b.fill("#apt_signed_by", &signer.public_armored()?)?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    assert_eq!(b.current_url()?, format!("{public}/admin/repositories/debian"), "{}", b.text_of_page()?);
    let stored = common::process::admin_json(&public, &basic(PW), "GET", "/api/v1/repositories/debian", None)?;
    assert_eq!(stored["apt"]["distributions"], json!(["bookworm"]), "{stored}");
    assert_eq!(stored["apt"]["distribution"], json!("bookworm"), "never a default it does not serve: {stored}");
    assert!(stored["apt"]["signed_by"].as_str().unwrap_or_default().contains("BEGIN PGP PUBLIC KEY BLOCK"), "{stored}");

    // The group the old way: members only. Refused, saying what to set.
    b.goto(&format!("{public}/admin/repositories"))?;
    b.fill("#name", "all")?;
    choose(&b, "#format", "apt")?;
    choose(&b, "#type", "group")?;
    b.fill("#members", "debian")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    let error = b.text(&b.find("p.error")?)?;
    assert!(
        error.contains(
            "group member debian serves distribution bookworm, which group all does not publish (it publishes stable)"
        ),
        "{error}"
    );
    b.fill("#apt_distributions", "bookworm")?;
    b.click_to_load(&b.find_by_text("form.stack button", "Create repository")?)?;
    assert_eq!(b.current_url()?, format!("{public}/admin/repositories/all"), "{}", b.text_of_page()?);
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_text(&format!("{public}/repository/all/dists/bookworm/InRelease"))?.0 != 200 {
        assert!(Instant::now() < deadline, "the group did not publish bookworm");
        std::thread::sleep(Duration::from_millis(100));
    }

    for repo in ["all", "debian"] {
        b.goto(&format!("{public}/browse/{repo}"))?;
        let facts = b.text(&b.find("dl.facts")?)?;
        assert!(facts.contains("Distribution\nbookworm") || facts.contains("Distribution bookworm"), "{repo}: {facts}");
        let links = b.text(&b.find("section[aria-labelledby=facts] ul")?)?;
        assert!(links.contains("dists/bookworm/InRelease") && !links.contains("stable"), "{repo}: {links}");
        let snips = snippets(&b)?;
        let joined = snips.join("\n");
        assert!(joined.contains(&format!("{public}/repository/{repo} bookworm main\"")), "{repo}: {joined}");
        assert!(!joined.contains(" stable "), "{repo}: {joined}");
        let root = tempfile::tempdir()?;
        let log = run_pasted(root.path(), &snips, "apt-get download upthing")?;
        let got = std::fs::read(root.path().join("downloads/upthing_1.0_amd64.deb"))
            .map_err(|e| anyhow::anyhow!("{repo}: no download ({e}):\n{log}"))?;
        assert!(got == package.deb, "{repo}: the upstream's bytes");
        screenshot(&b, &format!("browse-apt-{repo}"))?;
    }
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}

/// The set-up a component's page shows, for Go and Conan repositories of each type (hosted, a
/// proxy of it, a group of both) and APK's hosted, proxy and group: pasted into a shell as it is — `go env -w GOPROXY/GOSUMDB`,
/// `go get`; `conan remote add`, `conan install` — the real clients fetch the version. Go's
/// hosted and group lines verify against the repository's own checksum database. (A proxy's
/// line names sum.golang.org, which this machine cannot reach: its run leaves `example.com`
/// out of verification, as a company would its private modules.)
#[test]
fn the_set_up_each_go_conan_and_apk_page_shows_works_in_the_real_clients() -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let go = common::process::available("go", "version");
    let conan = common::process::available("conan", "--version");
    let dir = tempfile::tempdir()?;
    let server = server(dir.path(), &[("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)])?;
    let public = server.public.clone();
    let auth = basic(PW);
    let b = Browser::start(&driver)?;
    sign_in(&b, &public, "admin", PW)?;
    let shell = |script: &str, cwd: &std::path::Path, env: &[(&str, String)]| -> anyhow::Result<String> {
        let out = std::process::Command::new("sh")
            .arg("-ec")
            .arg(script)
            .current_dir(cwd)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .output()?;
        let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "{script}\n{log}");
        Ok(log)
    };
    // The component page's snippets of `repo`, reached from its browse page by `link` (a
    // proxy's catalogue lists what it has fetched: it may take a moment).
    let snippets_of = |repo: &str, link: &str| -> anyhow::Result<Vec<String>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let found = loop {
            b.goto(&format!("{public}/browse/{repo}"))?;
            match b.find_by_text("table a", link) {
                Ok(found) => break found,
                Err(e) => anyhow::ensure!(Instant::now() < deadline, "{repo}: {e}"),
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        b.click_to_load(&found)?;
        b.wait_for("#setup", Duration::from_secs(5))?;
        snippets(&b)
    };

    if go {
        create_repository(&public, &auth, Repo::hosted("gomods", Format::Go))?;
        let zip = packyard_codecs::go::testing::simple_module("example.com/acme/hello", "v1.2.0", "one", 0)?;
        put(&public, "/repository/gomods/example.com/acme/hello/@v/v1.2.0.zip", &zip)?;
        create_repository(
            &public,
            &auth,
            Repo::proxy("goproxy", Format::Go, &format!("{public}/repository/gomods/"))
                .with(json!({"go": {"checksum_databases": []}})),
        )?;
        create_repository(&public, &auth, Repo::group("goall", Format::Go, &["gomods", "goproxy"]))?;
        // The proxy's catalogue fills as it serves: fetch the version through it once.
        for ext in ["info", "mod", "zip"] {
            let (s, _) = get_text(&format!("{public}/repository/goproxy/example.com/acme/hello/@v/v1.2.0.{ext}"))?;
            assert_eq!(s, 200, "{ext} through the proxy");
        }
        for repo in ["gomods", "goproxy", "goall"] {
            let snips = snippets_of(repo, "example.com/acme/hello")?;
            let joined = snips.join("\n");
            assert!(joined.contains("go get example.com/acme/hello@v1.2.0"), "{repo}: {joined}");
            if repo != "goproxy" {
                assert!(
                    joined.contains(&format!("{public}/repository/{repo}/sumdb/")),
                    "{repo}'s own database: {joined}"
                );
            }
            let home = tempfile::tempdir()?;
            let work = home.path().join("work");
            std::fs::create_dir_all(&work)?;
            let h = |p: &str| home.path().join(p).display().to_string();
            let mut env = vec![
                ("HOME", h("")),
                ("GOPATH", h("gopath")),
                ("GOMODCACHE", h("modcache")),
                ("GOCACHE", h("gocache")),
                ("GOTOOLCHAIN", "local".into()),
                ("CGO_ENABLED", "0".into()),
                ("GOFLAGS", "-mod=mod".into()),
            ];
            if repo == "goproxy" {
                env.push(("GONOSUMDB", "example.com".into()));
            }
            let script = format!("go mod init example.com/try\n{joined}\ngo list -m all");
            let log = shell(&script, &work, &env)?;
            assert!(log.contains("example.com/acme/hello v1.2.0"), "{repo}: {log}");
            let sum = std::fs::read_to_string(work.join("go.sum"))?;
            assert!(sum.contains("example.com/acme/hello v1.2.0 h1:"), "{repo}: {sum}");
        }
    } else {
        eprintln!("go part skipped: no go command");
    }

    if conan {
        create_repository(&public, &auth, Repo::hosted("cc", Format::Conan))?;
        let producer = tempfile::tempdir()?;
        let p = producer.path().display().to_string();
        let env = [("CONAN_HOME", p.clone())];
        shell(
            &format!(
                "conan profile detect\nconan remote add cc {public}/repository/cc\nconan remote login cc admin -p {PW}\n\
                 mkdir hello && cd hello && conan new header_lib -d name=hello -d version=1.0 && conan create . -tf=\n\
                 conan upload hello/1.0 -r cc -c"
            ),
            producer.path(),
            &env,
        )?;
        create_repository(&public, &auth, Repo::proxy("ccproxy", Format::Conan, &format!("{public}/repository/cc")))?;
        create_repository(&public, &auth, Repo::group("ccall", Format::Conan, &["cc", "ccproxy"]))?;
        // The proxy's catalogue fills as it serves: ask it once, as a client would.
        let home = tempfile::tempdir()?;
        let c = home.path().display().to_string();
        shell(
            &format!("conan profile detect\nconan remote add warm {public}/repository/ccproxy\nconan install --requires=hello/1.0 -r warm"),
            home.path(),
            &[("CONAN_HOME", c)],
        )?;
        for repo in ["cc", "ccproxy", "ccall"] {
            let snips = snippets_of(repo, "hello")?;
            let joined = snips.join("\n");
            assert!(
                joined.contains(&format!("conan remote add {repo} {public}/repository/{repo}")),
                "{repo}: {joined}"
            );
            let home = tempfile::tempdir()?;
            let c = home.path().display().to_string();
            let log = shell(&format!("conan profile detect\n{joined}"), home.path(), &[("CONAN_HOME", c)])?;
            assert!(log.contains("hello/1.0"), "{repo}: {log}");
            let listed = shell(
                "conan list 'hello/1.0#*' --format=json",
                home.path(),
                &[("CONAN_HOME", home.path().display().to_string())],
            )?;
            assert!(listed.contains("hello/1.0"), "{repo}: installed into the cache: {listed}");
        }
    } else {
        eprintln!("conan part skipped: no conan in PATH");
    }

    // APK (hosted, a group over it, a proxy of it): no apk client runs on Debian, so the snippet runs as
    // pasted with `apk` itself a no-op, and the independent verifier (api/tests/apk_verify.py)
    // plays apk on every line it added to the repositories file: the index signed by the key
    // the snippet saved, the package listed with the bytes uploaded.
    create_repository(
        &public,
        &auth,
        Repo::hosted("alpine", Format::Apk).with(json!({"apk": {"architectures": ["x86_64"]}})),
    )?;
    let apk = packyard_codecs::apk::testing::build_apk(&packyard_codecs::apk::testing::Fixture::new(
        "hello", "1.0-r0", "x86_64",
    ))?
    .bytes;
    put(&public, "/repository/alpine/v3.20/main/x86_64/hello-1.0-r0.apk", &apk)?;
    // Each index lists the package before its set-up is tried (publication follows the upload).
    let listed = |repo: &str| -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let url = format!("{public}/repository/{repo}/v3.20/main/x86_64/APKINDEX.tar.gz");
            let mut index = Vec::new();
            if let Ok(r) = ureq::get(&url).call() {
                std::io::Read::read_to_end(&mut r.into_reader(), &mut index)?;
            }
            if packyard_codecs::apk::index::apkindex_text(&index).is_ok_and(|t| t.contains("P:hello\n")) {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "{repo}'s index does not list hello");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    listed("alpine")?;
    create_repository(
        &public,
        &auth,
        Repo::group("alpall", Format::Apk, &["alpine"]).with(json!({"apk": {"architectures": ["x86_64"]}})),
    )?;
    listed("alpall")?;
    // A proxy of it: clients trust the upstream's key, which the proxy serves under the name
    // the upstream's index gives it (once it has served an index and a package).
    let (_, names) = get_text(&format!("{public}/repository/alpine/keys/"))?;
    let (_, alpine_key) = get_text(&format!("{public}/repository/alpine/keys/{}", names.trim()))?;
    create_repository(
        &public,
        &auth,
        Repo::proxy("alpproxy", Format::Apk, &format!("{public}/repository/alpine/"))
            .with(json!({"apk": {"architectures": ["x86_64"], "signed_by": alpine_key}})),
    )?;
    for file in ["APKINDEX.tar.gz", "hello-1.0-r0.apk"] {
        assert_eq!(get_text(&format!("{public}/repository/alpproxy/v3.20/main/x86_64/{file}"))?.0, 200, "{file}");
    }
    for repo in ["alpine", "alpall", "alpproxy"] {
        let snips = snippets_of(repo, "hello")?;
        let root = tempfile::tempdir()?;
        let r = root.path().display().to_string();
        std::fs::create_dir_all(root.path().join("keys"))?;
        let script = snips.join("\n").replace("/etc/apk/", &format!("{r}/"));
        assert!(script.contains("apk add hello=1.0-r0"), "{repo}: {script}");
        shell(&format!("apk() {{ :; }}\n{script}"), root.path(), &[])?;
        let keys: Vec<_> = std::fs::read_dir(root.path().join("keys"))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(keys.len(), 1, "{repo}: the snippet saved the key: {keys:?}");
        let lines = std::fs::read_to_string(root.path().join("repositories"))?;
        assert_eq!(lines.lines().collect::<Vec<_>>(), [format!("{public}/repository/{repo}/v3.20/main")], "{repo}");
        for line in lines.lines() {
            let check = tempfile::tempdir()?;
            let fetch = |url: String| -> anyhow::Result<Vec<u8>> {
                let mut body = Vec::new();
                std::io::Read::read_to_end(&mut ureq::get(&url).call()?.into_reader(), &mut body)?;
                Ok(body)
            };
            std::fs::write(check.path().join("APKINDEX.tar.gz"), fetch(format!("{line}/x86_64/APKINDEX.tar.gz"))?)?;
            let got = fetch(format!("{line}/x86_64/hello-1.0-r0.apk"))?;
            assert!(got == apk, "{repo}: the package as uploaded");
            std::fs::write(check.path().join("hello-1.0-r0.apk"), &got)?;
            std::fs::copy(root.path().join("keys").join(&keys[0]), check.path().join("key.pem"))?;
            let out = common::process::apk_verifier(check.path(), "APKINDEX.tar.gz", "key.pem", &keys[0])?;
            assert!(
                out.status.success(),
                "{repo}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}
