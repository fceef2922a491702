//! A repository's policy (`policy.*`) with the real go command: the minimum release age keeps a
//! version an upstream (a second Packyard) published "just now" out of `go list -m -versions`
//! and `@latest` until its age passes (the instances' clocks moved with
//! `debug.clock_offset_secs`), a break-glass exception lets it in at once (audited, announced);
//! `enforce` leaves out and refuses (403 naming the advisory) a version an imported advisory
//! affects, `audit` serves it with `X-Packyard-Advisories`. The proxy on SQLite, PostgreSQL and
//! MariaDB.

use crate::common;

use std::path::Path;

use common::process::{admin_json, basic, status_of};
use packyard_store::db::Backend;
use serde_json::{json, Value};

const PW: &str = "policy-admin";
const DAY: i64 = 86_400;
const MODULE: &str = "example.com/cool";

fn patch_policy(public: &str, policy: Value) -> anyhow::Result<()> {
    let r = ureq::request("PATCH", &format!("{public}/api/v1/repositories/goproxy"))
        .set("Authorization", &basic(PW))
        .set("Content-Type", "application/merge-patch+json")
        .send_json(json!({ "policy": policy }));
    let (s, text) = status_of(r)?;
    anyhow::ensure!(s == 200, "{s} {text}");
    Ok(())
}

fn put_module(public: &str, repo: &str, version: &str) -> anyhow::Result<()> {
    let zip = packyard_codecs::go::testing::simple_module(MODULE, version, version, 0)?;
    let url = format!("{public}/repository/{repo}/{MODULE}/@v/{version}.zip");
    let (s, text) = status_of(ureq::put(&url).set("Authorization", &basic(PW)).send_bytes(&zip))?;
    anyhow::ensure!(s == 201, "{version}: {s} {text}");
    Ok(())
}

/// `go list -m -versions` and `go list -m …@latest` through `proxy`, each from a new cache.
fn resolve(work: &Path, proxy: &str) -> anyhow::Result<(String, String)> {
    let home = tempfile::tempdir()?;
    let versions = crate::go::go(work, home.path(), proxy, &["list", "-m", "-versions", MODULE])?;
    let home = tempfile::tempdir()?;
    let latest = crate::go::go(work, home.path(), proxy, &["list", "-m", &format!("{MODULE}@latest")])?;
    Ok((versions.trim().to_string(), latest.trim().to_string()))
}

#[test]
fn go_release_age_exceptions_and_vulnerabilities() -> anyhow::Result<()> {
    if std::process::Command::new("go").arg("version").output().is_err() {
        anyhow::bail!("no go command (scripts/test.sh installs golang-go)");
    }
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        go_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

fn go_on(backend: Backend) -> anyhow::Result<()> {
    let auth = basic(PW);
    // The upstream: v1.0.0 published two days ago (its clock moved back), v1.1.0 now.
    let up_dir = tempfile::tempdir()?;
    let two_days_ago = (-2 * DAY).to_string();
    let upstream = common::process::start(
        up_dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_DEBUG__CLOCK_OFFSET_SECS", &two_days_ago)],
    )?;
    admin_json(
        &upstream.public,
        &auth,
        "POST",
        "/api/v1/repositories",
        Some(json!({"name": "origin", "format": "go", "type": "hosted"})),
    )?;
    put_module(&upstream.public, "origin", "v1.0.0")?;
    drop(upstream);
    let upstream = common::process::start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    put_module(&upstream.public, "origin", "v1.1.0")?;

    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
    let proxy_env = [
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
        ("PACKYARD_WEBHOOKS__POLL_MS", "50"),
        ("PACKYARD_WEBHOOKS__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
    ];
    let server = common::process::start_on(dir.path(), url.as_deref(), &proxy_env)?;
    let remote = format!("{}/repository/origin/", upstream.public);
    let spec = json!({"name": "goproxy", "format": "go", "type": "proxy",
        "proxy": {"remote_url": remote, "metadata_ttl_secs": 1},
        "policy": {"min_release_age_secs": DAY}});
    let view = admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(spec))?;
    assert_eq!(view["policy"]["min_release_age_secs"], DAY, "{view}");
    assert_eq!(view["policy"]["vulnerabilities"], "off", "{view}");
    // A subscriber to the exceptions' events.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let hook = format!("http://127.0.0.1:{}/hooks", listener.local_addr()?.port());
    let received = crate::webhooks::receiver(listener, 0);
    admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/webhooks",
        Some(json!({"name": "gate", "url": hook,
        "events": ["policy.exception_added", "policy.exception_removed"]})),
    )?;

    let work = tempfile::tempdir()?;
    let proxy = format!("{}/repository/goproxy", server.public);
    // The upstream lists both; through the proxy only the version a day old is offered.
    let (versions, latest) = resolve(work.path(), &proxy)?;
    assert_eq!(versions, format!("{MODULE} v1.0.0"));
    assert_eq!(latest, format!("{MODULE} v1.0.0"));
    let at = |path: &str| status_of(ureq::get(&format!("{proxy}/{MODULE}/{path}")).call());
    let (s, body) = at("@latest")?;
    assert_eq!(s, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body)?["Version"], "v1.0.0");
    let (s, body) = at("@v/v1.1.0.zip")?;
    assert_eq!(s, 404, "{body}");
    assert!(
        body.contains("example.com/cool v1.1.0 was published less than 1 day ago")
            && body.contains("it is offered from 20"),
        "{body}"
    );
    // Neither a range, a validator nor HEAD gets past the gate.
    let (s, body) = status_of(ureq::get(&format!("{proxy}/{MODULE}/@v/list")).set("Range", "bytes=0-").call())?;
    assert_eq!((s, body.as_str()), (200, "v1.0.0\n"));
    let (s, _) = status_of(ureq::get(&format!("{proxy}/{MODULE}/@v/v1.1.0.zip")).set("Range", "bytes=0-").call())?;
    assert_eq!(s, 404);
    let (s, _) = status_of(ureq::head(&format!("{proxy}/{MODULE}/@v/v1.1.0.info")).call())?;
    assert_eq!(s, 404);
    let (s, body) = status_of(
        ureq::get(&format!("{proxy}/{MODULE}/@latest"))
            .set("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")
            .call(),
    )?;
    assert!(s == 200 && body.contains("\"v1.0.0\""), "{s} {body}");
    // `go get` of the young version names why.
    let home = tempfile::tempdir()?;
    let o =
        common::golang::command(work.path(), home.path(), &proxy, &["mod", "download", &format!("{MODULE}@v1.1.0")])
            .output()?;
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("less than 1 day ago"), "{err}");

    // A break-glass exception lets v1.1.0 in at once.
    let expires = packyard_model::time::rfc3339_ms(packyard_store::db::now_ms() + DAY * 1000);
    let exceptions = "/api/v1/repositories/goproxy/policy/exceptions";
    let e = admin_json(
        &server.public,
        &auth,
        "POST",
        exceptions,
        Some(json!({"name": MODULE, "version": "v1.1.0",
        "expires_at": expires, "reason": "CVE fix needed today"})),
    )?;
    assert_eq!((e["created_by"].as_str(), e["expired"].as_bool()), (Some("admin"), Some(false)), "{e}");
    let (versions, latest) = resolve(work.path(), &proxy)?;
    assert_eq!(versions, format!("{MODULE} v1.0.0 v1.1.0"));
    assert_eq!(latest, format!("{MODULE} v1.1.0"));
    assert_eq!(at("@v/v1.1.0.zip")?.0, 200);
    let listed = admin_json(&server.public, &auth, "GET", exceptions, None)?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let audit = admin_json(&server.public, &auth, "GET", "/api/v1/audit?action=policy.exception_add", None)?;
    assert!(audit.to_string().contains("CVE fix needed today"), "{audit}");
    // Bad input: a time in the past, no reason.
    let (s, body) =
        status_of(ureq::post(&format!("{}{exceptions}", server.public)).set("Authorization", &auth).send_json(
            json!({"name": MODULE, "version": "v1.1.0", "expires_at": "2001-01-01T00:00:00Z", "reason": "x"}),
        ))?;
    assert!(s == 400 && body.contains("an exception is temporary"), "{s} {body}");
    let (s, body) = status_of(
        ureq::post(&format!("{}{exceptions}", server.public))
            .set("Authorization", &auth)
            .send_json(json!({"name": MODULE, "version": "v1.1.0", "expires_at": expires, "reason": ""})),
    )?;
    assert!(s == 400 && body.contains("`reason`"), "{s} {body}");
    // Removed: held again.
    let delete = format!("{}{exceptions}?name={MODULE}&version=v1.1.0", server.public);
    assert_eq!(status_of(ureq::delete(&delete).set("Authorization", &auth).call())?.0, 204);
    assert_eq!(status_of(ureq::delete(&delete).set("Authorization", &auth).call())?.0, 404);
    assert_eq!(resolve(work.path(), &proxy)?.0, format!("{MODULE} v1.0.0"));
    // Through a group, the member's policy still holds for what the group hands out from it.
    admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories",
        Some(json!({"name": "gogroup", "format": "go", "type": "group", "group": {"members": ["goproxy"]}})),
    )?;
    let group = format!("{}/repository/gogroup", server.public);
    let (s, body) = status_of(ureq::get(&format!("{group}/{MODULE}/@v/v1.1.0.zip")).call())?;
    assert!(s == 404 && body.contains("less than 1 day ago"), "{s} {body}");
    assert_eq!(status_of(ureq::get(&format!("{group}/{MODULE}/@v/v1.0.0.zip")).call())?.0, 200);
    // …and for what it lists: the go command resolves the older version through the group.
    assert_eq!(resolve(work.path(), &group)?, (format!("{MODULE} v1.0.0"), format!("{MODULE} v1.0.0")));
    // A member that refuses a version is passed over for the next that has it (a hosted one).
    admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories",
        Some(json!({"name": "golocal", "format": "go", "type": "hosted"})),
    )?;
    put_module(&server.public, "golocal", "v1.1.0")?;
    admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories",
        Some(json!({"name": "gomixed", "format": "go", "type": "group", "group": {"members": ["goproxy", "golocal"]}})),
    )?;
    let mixed = format!("{}/repository/gomixed", server.public);
    assert_eq!(status_of(ureq::get(&format!("{mixed}/{MODULE}/@v/v1.1.0.zip")).call())?.0, 200);
    assert_eq!(resolve(work.path(), &mixed)?, (format!("{MODULE} v1.0.0 v1.1.0"), format!("{MODULE} v1.1.0")));
    // A version nobody has is a plain not-found (nothing is recorded for it).
    let (s, body) = at("@v/v9.9.9.info")?;
    assert!(s == 404 && !body.contains("publish time"), "{s} {body}");

    // A quarantine rule: refused with the rule's id, previewed against what the proxy holds.
    patch_policy(
        &server.public,
        json!({"min_release_age_secs": 0,
        "rules": [{"id": "no-cool-1.0", "action": "deny", "name": "example.com/*", "version": "v1.0.*"}]}),
    )?;
    assert_eq!(resolve(work.path(), &proxy)?, (format!("{MODULE} v1.1.0"), format!("{MODULE} v1.1.0")));
    let (s, body) = at("@v/v1.0.0.mod")?;
    assert!(s == 403 && body.contains("denied by this repository's quarantine rule \"no-cool-1.0\""), "{s} {body}");
    let preview = admin_json(&server.public, &auth, "POST", "/api/v1/repositories/goproxy/policy/preview", None)?;
    let held: Vec<(String, String, String)> = preview["held"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            (
                h["name"].as_str().unwrap_or("").into(),
                h["version"].as_str().unwrap_or("").into(),
                h["reason"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(held, [(MODULE.to_string(), "v1.0.0".to_string(), "rule".to_string())], "{preview}");
    assert!(preview["checked"].as_u64() >= Some(2), "{preview}");
    let other = json!({"rules": [{"id": "only-ours", "action": "allow", "name": "example.com/ours/*"}]});
    let preview =
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories/goproxy/policy/preview", Some(other))?;
    assert_eq!(preview["held"].as_array().map(Vec::len), Some(2), "allow-only holds both: {preview}");
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories/goproxy/policy/preview", server.public))
            .set("Authorization", &auth)
            .send_json(json!({"rules": [{"id": "all", "action": "deny"}]})),
    )?;
    assert!(s == 400 && body.contains("no criterion"), "{s} {body}");
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories/goproxy/policy/preview", server.public))
            .set("Authorization", &auth)
            .send_json(json!({"rules": [{"id": "gpl", "action": "deny", "licenses": ["GPL-*"]}]})),
    )?;
    assert!(s == 400 && body.contains("uses `licenses`"), "{s} {body}");
    patch_policy(&server.public, json!({"min_release_age_secs": DAY, "rules": null}))?;

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let events = loop {
        let got: Vec<(String, String)> = received
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .iter()
            .map(|r| (r.event.clone(), String::from_utf8_lossy(&r.body).into_owned()))
            .collect();
        if got.len() >= 2 || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let names: Vec<&str> = events.iter().map(|(event, _)| event.as_str()).collect();
    assert_eq!(names, ["policy.exception_added", "policy.exception_removed"]);
    assert!(events[0].1.contains("\"reason\":\"CVE fix needed today\""), "{}", events[0].1);

    // Enforce: an advisory of versions before 1.1.0 leaves v1.0.0 out and refuses it.
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    if let Some(url) = url.as_deref() {
        env.extend([
            ("PACKYARD_DATABASE__URL", url),
            ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ]);
    }
    let osv = work.path().join("osv.json");
    std::fs::write(
        &osv,
        json!([{"id": "GO-2026-0101", "modified": "2026-01-01T00:00:00Z", "summary": "Cool is not",
            "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
            "affected": [{"package": {"ecosystem": "Go", "name": MODULE},
                "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.1.0"}]}]}]},
          {"id": "GO-2026-0102", "modified": "2026-01-01T00:00:00Z", "summary": "Cool is a little slow",
            "database_specific": {"severity": "MODERATE"},
            "affected": [{"package": {"ecosystem": "Go", "name": MODULE},
                "ranges": [{"type": "SEMVER", "events": [{"introduced": "1.1.0"}, {"fixed": "1.2.0"}]}]}]}])
        .to_string(),
    )?;
    let (code, out, err) =
        common::process::run_to_end(dir.path(), &["vulnerabilities", "import", &osv.display().to_string()], &env)?;
    assert_eq!(code, 0, "{out}{err}");
    patch_policy(&server.public, json!({"min_release_age_secs": 0, "vulnerabilities": "enforce"}))?;
    // (The import reaches the replica within 2 s: the watermark it moved.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = resolve(work.path(), &proxy)?;
    while seen.0 != format!("{MODULE} v1.1.0") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        seen = resolve(work.path(), &proxy)?;
    }
    assert_eq!(seen, (format!("{MODULE} v1.1.0"), format!("{MODULE} v1.1.0")));
    let (s, body) = at("@v/v1.0.0.zip")?;
    assert_eq!(s, 403, "{body}");
    assert!(body.contains("GO-2026-0101 (critical)") && body.contains("vulnerability policy"), "{body}");
    // Only at or above the enforced level: v1.1.0's medium advisory passes `high`, named…
    let r = ureq::get(&format!("{proxy}/{MODULE}/@v/v1.1.0.zip")).call()?;
    assert_eq!(r.header("x-packyard-advisories"), Some("GO-2026-0102 (medium)"));
    // …and is refused at `medium`.
    patch_policy(&server.public, json!({"vulnerability_severity": "medium"}))?;
    let (s, body) = at("@v/v1.1.0.zip")?;
    assert!(s == 403 && body.contains("GO-2026-0102 (medium)"), "{s} {body}");
    // Audit serves everything, named.
    patch_policy(&server.public, json!({"vulnerabilities": "audit"}))?;
    let r = ureq::get(&format!("{proxy}/{MODULE}/@v/v1.0.0.zip")).call()?;
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("x-packyard-advisories"), Some("GO-2026-0101 (critical)"));
    assert_eq!(resolve(work.path(), &proxy)?.0, format!("{MODULE} v1.0.0 v1.1.0"));
    let r = ureq::get(&format!("{proxy}/{MODULE}/@v/v1.1.0.zip")).call()?;
    assert_eq!(r.header("x-packyard-advisories"), Some("GO-2026-0102 (medium)"));
    // Not on an APT proxy (it would have to re-sign what it filters: a group does).
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &auth).send_json(json!({
            "name": "debs", "format": "apt", "type": "proxy", "proxy": {"remote_url": "http://deb.example.org/debian/"},
            "apt": {"distribution": "bookworm"}, "policy": {"vulnerabilities": "enforce"}})),
    )?;
    assert!(s == 400 && body.contains("`policy` does not apply to proxy repositories of format apt"), "{s} {body}");
    let (s, body) = status_of(
        ureq::request("PATCH", &format!("{}/api/v1/repositories/goproxy", server.public))
            .set("Authorization", &auth)
            .set("Content-Type", "application/merge-patch+json")
            .send_json(json!({"policy": {"rules": [{"id": "gpl", "action": "deny", "licenses": ["GPL-*"]}]}})),
    )?;
    assert!(s == 400 && body.contains("uses `licenses`"), "{s} {body}");
    drop(server);

    // The age passes: the proxy's clock two days on, a day's minimum again.
    let later = (2 * DAY).to_string();
    let mut env: Vec<(&str, &str)> = proxy_env.to_vec();
    env.push(("PACKYARD_DEBUG__CLOCK_OFFSET_SECS", &later));
    let server = common::process::start_on(dir.path(), url.as_deref(), &env)?;
    patch_policy(&server.public, json!({"min_release_age_secs": DAY, "vulnerabilities": "off"}))?;
    let proxy = format!("{}/repository/goproxy", server.public);
    assert_eq!(resolve(work.path(), &proxy)?, (format!("{MODULE} v1.0.0 v1.1.0"), format!("{MODULE} v1.1.0")));

    // An upstream that dates a new version back (its clock four days behind the proxy's) does
    // not get it past the age: the proxy ages it from when it saw it appear.
    drop(upstream);
    let upstream = common::process::start(
        up_dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_DEBUG__CLOCK_OFFSET_SECS", &two_days_ago)],
    )?;
    put_module(&upstream.public, "origin", "v1.2.0")?;
    let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/goproxy", server.public))
        .set("Authorization", &auth)
        .set("Content-Type", "application/merge-patch+json")
        .send_json(json!({"proxy": {"remote_url": format!("{}/repository/origin/", upstream.public)}}));
    assert_eq!(status_of(r)?.0, 200);
    let info: Value =
        ureq::get(&format!("{}/repository/origin/{MODULE}/@v/v1.2.0.info", upstream.public)).call()?.into_json()?;
    assert!(
        info["Time"]
            .as_str()
            .is_some_and(|t| t < packyard_model::time::rfc3339_ms(packyard_store::db::now_ms()).as_str()),
        "{info}"
    );
    assert_eq!(resolve(work.path(), &proxy)?, (format!("{MODULE} v1.0.0 v1.1.0"), format!("{MODULE} v1.1.0")));
    let (s, body) = status_of(ureq::get(&format!("{proxy}/{MODULE}/@v/v1.2.0.info")).call())?;
    assert!(s == 404 && body.contains("less than 1 day ago"), "{s} {body}");
    Ok(())
}

/// A recipe whose binaries differ only by their settings (it compiles nothing).
const TOOL_RECIPE: &str = r#"import os
from conan import ConanFile
from conan.tools.files import save

class Tool(ConanFile):
    name = "tool"
    version = "1.0"
    settings = "os", "arch"

    def package(self):
        save(self, os.path.join(self.package_folder, "arch.txt"), str(self.settings.arch))
"#;

/// `conan install` through a proxy with a day's minimum release age installs the recipe
/// revision the upstream published two days ago, not the one it published now — until an
/// exception lets the new one in; a direct request for the young revision is a 404 that says
/// when it is offered; rules by license (the recipe's) and by architecture (a binary's). The
/// proxy on SQLite, PostgreSQL and MariaDB.
#[test]
fn conan_release_age() -> anyhow::Result<()> {
    if std::process::Command::new("conan").arg("--version").output().is_err() {
        anyhow::bail!("no conan in PATH (scripts/test.sh installs it)");
    }
    let auth = basic(PW);
    let home = tempfile::tempdir()?;
    let h = home.path();
    let conan = |args: &[&str], cwd: &Path| -> anyhow::Result<String> {
        let out = std::process::Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    conan(&["profile", "detect"], h)?;
    let proj = h.join("hello");
    std::fs::create_dir_all(&proj)?;
    conan(&["new", "header_lib", "-d", "name=hello", "-d", "version=1.0"], &proj)?;
    // Revision one, two days ago; revision two (another recipe) now.
    let up_dir = tempfile::tempdir()?;
    let two_days_ago = (-2 * DAY).to_string();
    let mut revisions = Vec::new();
    let mut upstream = None;
    for (n, offset) in [(1, two_days_ago.as_str()), (2, "0")] {
        drop(upstream.take());
        let server = common::process::start(
            up_dir.path(),
            &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_DEBUG__CLOCK_OFFSET_SECS", offset)],
        )?;
        if n == 1 {
            admin_json(
                &server.public,
                &auth,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": "up", "format": "conan", "type": "hosted"})),
            )?;
            conan(&["remote", "add", "up", &format!("{}/repository/up", server.public)], h)?;
        } else {
            // The new revision under another license: a quarantine rule by license.
            let recipe = std::fs::read_to_string(proj.join("conanfile.py"))?;
            anyhow::ensure!(recipe.contains("license = \"<Put the package license here>\""), "{recipe}");
            let recipe = recipe.replace("<Put the package license here>", "GPL-3.0-only OR MIT");
            std::fs::write(proj.join("conanfile.py"), format!("{recipe}\n# revision {n}\n"))?;
            conan(&["remote", "update", "up", "--url", &format!("{}/repository/up", server.public)], h)?;
        }
        conan(&["remote", "login", "up", "admin", "-p", PW], h)?;
        conan(&["create", ".", "-tf="], &proj)?;
        conan(&["upload", "hello/1.0", "-r", "up", "-c"], h)?;
        let latest: Value = ureq::get(&format!("{}/repository/up/v2/conans/hello/1.0/_/_/latest", server.public))
            .call()?
            .into_json()?;
        revisions.push(latest["revision"].as_str().unwrap_or_default().to_string());
        upstream = Some(server);
    }
    let upstream = upstream.ok_or_else(|| anyhow::anyhow!("no upstream"))?;
    anyhow::ensure!(revisions[0] != revisions[1], "two revisions: {revisions:?}");
    // A recipe with a binary for x86_64 and one for armv8 (nothing to compile: any host builds
    // both), for a rule on architectures.
    let tool = h.join("tool");
    std::fs::create_dir_all(&tool)?;
    std::fs::write(tool.join("conanfile.py"), TOOL_RECIPE)?;
    for arch in ["x86_64", "armv8"] {
        conan(&["create", ".", "-s", &format!("arch={arch}")], &tool)?;
    }
    conan(&["upload", "tool/1.0", "-r", "up", "-c"], h)?;
    let search = |base: &str| -> anyhow::Result<Vec<(String, String)>> {
        let latest: Value = ureq::get(&format!("{base}/v2/conans/tool/1.0/_/_/latest")).call()?.into_json()?;
        let rrev = latest["revision"].as_str().unwrap_or_default();
        let url = format!("{base}/v2/conans/tool/1.0/_/_/revisions/{rrev}/search");
        let found: serde_json::Map<String, Value> = ureq::get(&url).call()?.into_json()?;
        let mut out: Vec<(String, String)> = found
            .iter()
            .map(|(id, info)| {
                let arch = info["content"].as_str().and_then(|c| c.lines().find(|l| l.trim().starts_with("arch=")));
                (arch.unwrap_or_default().trim().to_string(), id.clone())
            })
            .collect();
        out.sort();
        Ok(out)
    };
    let binaries = search(&format!("{}/repository/up", upstream.public))?;
    let archs: Vec<&str> = binaries.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(archs, ["arch=armv8", "arch=x86_64"], "{binaries:?}");

    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        let on = || -> anyhow::Result<()> {
            let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
            let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")];
            let server = common::process::start_on(dir.path(), url.as_deref(), &env)?;
            let spec = json!({"name": "cproxy", "format": "conan", "type": "proxy",
                "proxy": {"remote_url": format!("{}/repository/up/", upstream.public)},
                "policy": {"min_release_age_secs": DAY}});
            admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(spec))?;
            let remote = format!("proxy-{}", backend.as_str());
            conan(&["remote", "add", "--force", &remote, &format!("{}/repository/cproxy", server.public)], h)?;
            let install = || -> anyhow::Result<String> {
                conan(&["remove", "*", "-c"], h)?;
                conan(&["install", "--requires=hello/1.0", "-r", &remote], h)
            };
            let out = install()?;
            assert!(out.contains(&format!("hello/1.0#{}", revisions[0])), "the older revision: {out}");
            // Through a group, the member's policy holds.
            admin_json(
                &server.public,
                &auth,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": "cgroup", "format": "conan", "type": "group", "group": {"members": ["cproxy"]}})),
            )?;
            let grouped = format!("group-{}", backend.as_str());
            conan(&["remote", "add", "--force", &grouped, &format!("{}/repository/cgroup", server.public)], h)?;
            conan(&["remove", "*", "-c"], h)?;
            let out = conan(&["install", "--requires=hello/1.0", "-r", &grouped], h)?;
            assert!(out.contains(&format!("hello/1.0#{}", revisions[0])), "the older revision: {out}");
            let base = format!("{}/repository/cproxy/v2/conans/hello/1.0/_/_", server.public);
            let listed: Value = ureq::get(&format!("{base}/revisions")).call()?.into_json()?;
            let ids: Vec<&str> =
                listed["revisions"].as_array().into_iter().flatten().filter_map(|r| r["revision"].as_str()).collect();
            assert_eq!(ids, [revisions[0].as_str()], "{listed}");
            let (s, body) =
                status_of(ureq::get(&format!("{base}/revisions/{}/files/conanfile.py", revisions[1])).call())?;
            assert_eq!(s, 404, "{body}");
            assert!(body.contains("hello 1.0 (revision") && body.contains("less than 1 day ago"), "{body}");
            // A hosted member with a quarantine rule: the group over it answers as it would.
            let rule = json!({"rules": [{"id": "no-hello", "action": "deny", "name": "hello"}]});
            admin_json(
                &server.public,
                &auth,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": "chosted", "format": "conan", "type": "hosted"})),
            )?;
            admin_json(
                &server.public,
                &auth,
                "POST",
                "/api/v1/repositories",
                Some(json!({"name": "cmix", "format": "conan", "type": "group", "group": {"members": ["chosted"]}})),
            )?;
            let info = "[settings]\nos=Linux\n";
            let hosted = format!("{}/repository/chosted", server.public);
            crate::conan::upload_by_http(&hosted, &auth, "hello/1.0/_/_", ("r1", "p1", "q1"), info)?;
            // (Under the rule `conan upload` could not even upload: it reads the revisions first.)
            let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/chosted", server.public))
                .set("Authorization", &auth)
                .set("Content-Type", "application/merge-patch+json")
                .send_json(json!({ "policy": rule }));
            assert_eq!(status_of(r)?.0, 200);
            for repo in ["chosted", "cmix"] {
                let url = format!("{}/repository/{repo}/v2/conans/hello/1.0/_/_/latest", server.public);
                let (s, body) = status_of(ureq::get(&url).call())?;
                assert!(s == 403 && body.contains("quarantine rule \"no-hello\""), "{repo}: {s} {body}");
            }
            // An exception for the version lets the new revision in at once.
            let expires = packyard_model::time::rfc3339_ms(packyard_store::db::now_ms() + DAY * 1000);
            admin_json(
                &server.public,
                &auth,
                "POST",
                "/api/v1/repositories/cproxy/policy/exceptions",
                Some(json!({"name": "hello", "version": "1.0", "expires_at": expires, "reason": "tested"})),
            )?;
            let out = install()?;
            assert!(out.contains(&format!("hello/1.0#{}", revisions[1])), "the newer revision: {out}");
            // A rule by license (the recipe's `license`): without the exception and the age, the
            // GPL revision is denied, and `conan install` takes the one before it.
            let delete =
                format!("{}/api/v1/repositories/cproxy/policy/exceptions?name=hello&version=1.0", server.public);
            assert_eq!(status_of(ureq::delete(&delete).set("Authorization", &auth).call())?.0, 204);
            let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/cproxy", server.public))
                .set("Authorization", &auth)
                .set("Content-Type", "application/merge-patch+json")
                .send_json(json!({"policy": {"min_release_age_secs": 0,
                    "rules": [{"id": "no-gpl", "action": "deny", "licenses": ["GPL-*"]}]}}));
            assert_eq!(status_of(r)?.0, 200);
            let out = install()?;
            assert!(out.contains(&format!("hello/1.0#{}", revisions[0])), "the older revision: {out}");
            let (s, body) =
                status_of(ureq::get(&format!("{base}/revisions/{}/files/conanfile.py", revisions[1])).call())?;
            assert!(s == 403 && body.contains("quarantine rule \"no-gpl\""), "{s} {body}");
            // A rule on architectures holds a binary back by its `conaninfo.txt`, not its
            // recipe: the x86_64 binary installs, the armv8 one is left out of the package
            // search and refused.
            let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/cproxy", server.public))
                .set("Authorization", &auth)
                .set("Content-Type", "application/merge-patch+json")
                .send_json(
                    json!({"policy": {"rules": [{"id": "no-arm", "action": "deny", "architectures": ["armv8"]}]}}),
                );
            assert_eq!(status_of(r)?.0, 200);
            conan(&["remove", "*", "-c"], h)?;
            let out = conan(&["install", "--requires=tool/1.0", "-r", &remote, "-s", "arch=x86_64"], h)?;
            assert!(out.contains("tool/1.0") && out.contains("Downloaded"), "{out}");
            let proxied = format!("{}/repository/cproxy", server.public);
            assert_eq!(search(&proxied)?, binaries[1..], "only the x86_64 binary is listed");
            let listed = conan(&["list", "tool/1.0#*:*", "-r", &remote], h)?;
            assert!(listed.contains("x86_64") && !listed.contains("armv8"), "{listed}");
            let arm = &binaries[0].1;
            let rrev: Value = ureq::get(&format!("{proxied}/v2/conans/tool/1.0/_/_/latest")).call()?.into_json()?;
            let rrev = rrev["revision"].as_str().unwrap_or_default();
            let url = format!("{proxied}/v2/conans/tool/1.0/_/_/revisions/{rrev}/packages/{arm}/latest");
            let (s, body) = status_of(ureq::get(&url).call())?;
            assert!(s == 403 && body.contains("quarantine rule \"no-arm\""), "{s} {body}");
            conan(&["remove", "*", "-c"], h)?;
            let refused = conan(&["install", "--requires=tool/1.0", "-r", &remote, "-s", "arch=armv8"], h);
            assert!(refused.is_err(), "the armv8 binary is not handed out: {refused:?}");
            // The preview reads the same facts from what the proxy cached: the armv8 binary's
            // `conaninfo.txt` (the rule read it), the GPL revision's `conanfile.py`.
            let preview = |policy: Option<Value>| -> anyhow::Result<Vec<(String, String)>> {
                let url = "/api/v1/repositories/cproxy/policy/preview";
                let v = admin_json(&server.public, &auth, "POST", url, policy)?;
                let mut held: Vec<(String, String)> = v["held"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|h| (h["name"].as_str().unwrap_or("").into(), h["message"].as_str().unwrap_or("").into()))
                    .collect();
                held.sort();
                Ok(held)
            };
            let held = preview(None)?;
            assert!(
                held.len() == 1
                    && held[0].0 == "tool"
                    && held[0].1.contains(&format!("package {arm}"))
                    && held[0].1.contains("\"no-arm\""),
                "{held:?}"
            );
            let gpl = json!({"rules": [{"id": "no-gpl", "action": "deny", "licenses": ["GPL-*"]}]});
            let held = preview(Some(gpl))?;
            assert!(held.len() == 1 && held[0].0 == "hello" && held[0].1.contains("\"no-gpl\""), "{held:?}");
            Ok(())
        };
        on().map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}
