//! A policy on the signed indexes (APT, APK): a group over a proxy applies it when it merges and
//! re-signs — a version the upstream published "just now" is left out of `Packages` and
//! `APKINDEX` (`apt-get` installs the previous one, the independent APK verifier accepts the
//! index) until an exception lets it in or its age passes (the instance's clock moved with
//! `debug.clock_offset_secs`, the worker publishes again when the first held version comes of
//! age); a quarantine rule (by name, by APK license) and `enforce`d advisories leave versions
//! out and refuse their downloads with the reason; `audit` names the advisories in
//! `X-Packyard-Advisories`. Each on SQLite, PostgreSQL and MariaDB.

use crate::common;

use std::time::{Duration, Instant};

use common::archive::{archive_files, Dist, Package, Upstream};
use common::process::{admin_json, basic, status_of, Server};
use common::Repo;
use packyard_codecs::apt::signing::Signer;
use packyard_model::repos::Format;
use packyard_store::db::Backend;
use serde_json::{json, Value};

const PW: &str = "policy-index-admin";
const DAY: i64 = 86_400;

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    common::process::get_bytes(server, path)
}

fn text(server: &Server, path: &str) -> anyhow::Result<(u16, String)> {
    let (s, b) = get(server, path)?;
    Ok((s, String::from_utf8_lossy(&b).into_owned()))
}

/// Waits (up to a minute) until `check` of `path`'s answer holds; the last answer.
fn until(server: &Server, path: &str, what: &str, check: impl Fn(u16, &str) -> bool) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, body) = text(server, path)?;
        if check(s, &body) {
            return Ok(body);
        }
        if Instant::now() > deadline {
            let log = server.stderr.lock().map(|l| l.clone()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().filter(|l| !l.contains(" INFO ")).rev().take(30).collect();
            anyhow::bail!("{what}: never so; last {s} {body}\n{}", tail.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn patch(server: &Server, repo: &str, fields: Value) -> anyhow::Result<()> {
    let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/{repo}", server.public))
        .set("Authorization", &basic(PW))
        .set("Content-Type", "application/merge-patch+json")
        .send_json(fields);
    let (s, body) = status_of(r)?;
    anyhow::ensure!(s == 200, "{s} {body}");
    Ok(())
}

fn except(server: &Server, repo: &str, name: &str, version: &str) -> anyhow::Result<()> {
    let expires = packyard_model::time::rfc3339_ms(packyard_store::db::now_ms() + DAY * 1000);
    admin_json(
        &server.public,
        &basic(PW),
        "POST",
        &format!("/api/v1/repositories/{repo}/policy/exceptions"),
        Some(json!({"name": name, "version": version, "expires_at": expires, "reason": "needed today"})),
    )?;
    Ok(())
}

fn unexcept(server: &Server, repo: &str, name: &str, version: &str) -> anyhow::Result<()> {
    let url = format!("{}/api/v1/repositories/{repo}/policy/exceptions?name={name}&version={version}", server.public);
    let (s, body) = status_of(ureq::delete(&url).set("Authorization", &basic(PW)).call())?;
    anyhow::ensure!(s == 204, "{s} {body}");
    Ok(())
}

/// `packyard-api vulnerabilities import` of `records` (OSV JSON) into the instance's database.
fn import(dir: &std::path::Path, url: Option<&str>, records: Value) -> anyhow::Result<()> {
    let file = dir.join("osv-fixture.json");
    std::fs::write(&file, records.to_string())?;
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    if let Some(url) = url {
        env.extend([
            ("PACKYARD_DATABASE__URL", url),
            ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ]);
    }
    let (code, out, err) =
        common::process::run_to_end(dir, &["vulnerabilities", "import", &file.display().to_string()], &env)?;
    anyhow::ensure!(code == 0, "{out}{err}");
    Ok(())
}

fn env_for(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW.to_string()),
        ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#.to_string()),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length".to_string()),
    ];
    env.extend(extra.iter().cloned());
    env
}

fn start(dir: &std::path::Path, url: Option<&str>, extra: &[(&'static str, String)]) -> anyhow::Result<Server> {
    let env = env_for(extra);
    let refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = common::process::start_on(dir, url, &refs)?;
    server.wait_ready()?;
    Ok(server)
}

fn apt_get(root: &std::path::Path, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = common::apt::tool("apt-get", root, args)?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success() && !text.contains("E: ") && !text.contains("W: "), text))
}

/// `apt-get update` and `apt-get download hello` through `repo`: the `.deb` it chose.
fn apt_download_hello(server: &Server, repo: &str) -> anyhow::Result<Vec<String>> {
    Ok(apt_download(server, repo, "hello")?.into_iter().map(|(name, _)| name).collect())
}

/// `apt-get update` and `apt-get download <package>` through `repo`: the `.deb` it chose, with
/// its bytes.
fn apt_download(server: &Server, repo: &str, package: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let (_, key) = get(server, &format!("/repository/{repo}/gpg.key"))?;
    let url = format!("{}/repository/{repo}/", server.public);
    let root = common::apt::scratch(&key, |k| format!("deb [signed-by={} arch=amd64] {url} stable main", k.display()))?;
    let (ok, out) = apt_get(root.path(), &["update"])?;
    anyhow::ensure!(ok, "{repo}: apt-get update: {out}");
    let (ok, out) = apt_get(root.path(), &["download", package])?;
    anyhow::ensure!(ok, "{repo}: apt-get download: {out}");
    let mut debs = Vec::new();
    for entry in std::fs::read_dir(root.path().join("downloads"))? {
        let entry = entry?;
        debs.push((entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path())?));
    }
    debs.sort();
    Ok(debs)
}

#[test]
fn apt_release_age_rules_and_vulnerabilities() -> anyhow::Result<()> {
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        apt_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

/// The gated repositories of a test: a group over a plain proxy, and a proxy with the policy
/// itself; and where each serves a file of the upstream's pool.
const GATED: [(&str, &str); 2] = [("gated", "pool/up/"), ("upgated", "")];

fn packages(repo: &str) -> String {
    format!("/repository/{repo}/dists/stable/main/binary-amd64/Packages")
}

fn apt_on(backend: Backend) -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let hello_1 = Package::new("hello", "1.0", "amd64");
    let hello_2 = Package::new("hello", "1.1", "amd64");
    let blocked = Package::new("blocked", "1.0", "amd64");
    // Replaced upstream by 1.1 (its index lists one version, as Debian's does), whose file the
    // upstream's pool drops a while later.
    let tool_1 = Package::new("tool", "1.0", "amd64");
    let tool_2 = Package::new("tool", "1.1", "amd64");
    let dist = |packages: Vec<&Package>| -> anyhow::Result<_> {
        archive_files(
            &Dist {
                name: "stable",
                indexes: vec![("amd64", packages)],
                by_hash: true,
                forms: &["", ".xz"],
                valid_until: None,
            },
            &signer,
            None,
        )
    };
    let upstream = Upstream::start()?;
    upstream.publish(dist(vec![&hello_1, &blocked, &tool_1])?);
    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
    let server = start(dir.path(), url.as_deref(), &[])?;
    let auth = basic(PW);
    let apt = json!({"distributions": ["stable"], "signed_by": signer.public_armored()?});
    let policy = json!({"min_release_age_secs": DAY,
        "rules": [{"id": "no-blocked", "action": "deny", "name": "blocked"}]});
    // A proxy re-signs what its policy filters: it must verify its upstream's signature first;
    // a hosted repository publishes what was uploaded (its groups take a policy).
    for (refused, why) in [
        (
            Repo::proxy("nokey", Format::Apt, &upstream.url)
                .with(json!({"apt": {"distributions": ["stable"]}, "policy": policy})),
            "set apt.signed_by to the upstream's public key",
        ),
        (Repo::hosted("debs", Format::Apt).with(json!({"policy": policy})), "give the group the policy"),
    ] {
        let (s, body) = status_of(
            ureq::post(&format!("{}/api/v1/repositories", server.public))
                .set("Authorization", &auth)
                .send_json(refused.0),
        )?;
        assert!(s == 400 && body.contains("`policy` does not apply to") && body.contains(why), "{s} {body}");
    }
    let ttl = json!({"metadata_ttl_secs": 1});
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("up", Format::Apt, &upstream.url).with(json!({"apt": apt, "proxy": ttl})),
    )?;
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::group("gated", Format::Apt, &["up"])
            .with(json!({"apt": {"distributions": ["stable"]}, "policy": policy})),
    )?;
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("upgated", Format::Apt, &upstream.url).with(json!({"apt": apt, "proxy": ttl, "policy": policy})),
    )?;
    // A group without a policy over the gated proxy lists what the proxy lets through.
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::group("outer", Format::Apt, &["upgated"]).with(json!({"apt": {"distributions": ["stable"]}})),
    )?;
    // What a repository saw first counts as old; the rule leaves `blocked` out and refuses it.
    for (repo, pool) in GATED {
        let listed = until(&server, &packages(repo), repo, |s, b| s == 200 && b.contains("Package: hello"))?;
        assert!(listed.contains("Version: 1.0") && !listed.contains("Package: blocked"), "{repo}: {listed}");
        let (s, body) = text(&server, &format!("/repository/{repo}/{pool}{}", blocked.pool_path()))?;
        assert!(
            s == 403 && body.contains("denied by this repository's quarantine rule \"no-blocked\""),
            "{repo}: {s} {body}"
        );
        assert_eq!(apt_download_hello(&server, repo)?, ["hello_1.0_amd64.deb"], "{repo}");
    }

    // The gated proxy's release says what its upstream's does, signed with its own key.
    let (_, release) = text(&server, "/repository/upgated/dists/stable/Release")?;
    assert!(release.starts_with("Origin: Fake\nLabel: Fake\nSuite: stable\nCodename: stable\n"), "{release}");
    let (_, key) = text(&server, "/repository/upgated/gpg.key")?;
    assert!(key != signer.public_armored()?, "the proxy's own key, not the upstream's");

    // The upstream publishes hello 1.1 now: left out, apt-get takes 1.0, and a direct download
    // says when 1.1 is offered. Its index replaces tool 1.0 by 1.1: the gated repositories
    // carry 1.0 forward (no client asked for it yet: the build fetches it into the cache)…
    let mut files = dist(vec![&hello_1, &hello_2, &blocked, &tool_2])?;
    files.insert(tool_1.pool_path(), tool_1.deb.clone());
    upstream.publish(files);
    for (repo, pool) in GATED {
        let young = format!("/repository/{repo}/{pool}{}", hello_2.pool_path());
        let body = until(&server, &young, repo, |s, b| s == 404 && b.contains("less than 1 day ago"))?;
        assert!(
            body.contains("hello 1.1 was published less than 1 day ago") && body.contains("it is offered from 20"),
            "{body}"
        );
        let (_, listed) = text(&server, &packages(repo))?;
        assert!(listed.contains("Version: 1.0") && !listed.contains("Version: 1.1"), "{repo}: {listed}");
        assert!(listed.contains("Package: tool\nVersion: 1.0\n"), "{repo}: {listed}");
        let (s, body) = text(&server, &format!("/repository/{repo}/{pool}{}", tool_2.pool_path()))?;
        assert!(s == 404 && body.contains("tool 1.1 was published less than 1 day ago"), "{repo}: {s} {body}");
        assert_eq!(apt_download_hello(&server, repo)?, ["hello_1.0_amd64.deb"], "{repo}");
    }
    // …and keep serving it once the upstream's pool dropped it.
    upstream.remove(&tool_1.pool_path());
    for (repo, _) in GATED.iter().chain(&[("outer", "")]) {
        let got = apt_download(&server, repo, "tool")?;
        assert_eq!(got, [("tool_1.0_amd64.deb".to_string(), tool_1.deb.clone())], "{repo}");
    }
    // The preview of a rule on architectures reads each cached package's from its file name.
    let preview = admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories/upgated/policy/preview",
        Some(json!({"rules": [{"id": "no-amd64", "action": "deny", "architectures": ["amd64"]}]})),
    )?;
    let held: Vec<&str> = preview["held"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["message"].as_str().is_some_and(|m| m.contains("\"no-amd64\"")))
        .filter_map(|h| h["name"].as_str())
        .collect();
    assert!(held.contains(&"hello") && held.contains(&"tool"), "{preview}");
    let other = json!({"rules": [{"id": "no-arm", "action": "deny", "architectures": ["arm64"]}]});
    let preview =
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories/upgated/policy/preview", Some(other))?;
    assert_eq!(preview["held"].as_array().map(Vec::len), Some(0), "{preview}");
    // A file of the upstream's pool that no index lists is not served either (through the
    // plain proxy it is: it passes the upstream on).
    let stray = Package::new("stray", "1.0", "amd64");
    upstream.put(&stray.pool_path(), stray.deb.clone());
    assert_eq!(get(&server, &format!("/repository/up/{}", stray.pool_path()))?.0, 200);
    for (repo, pool) in GATED {
        let (s, body) = text(&server, &format!("/repository/{repo}/{pool}{}", stray.pool_path()))?;
        assert!(s == 404 && body.contains("is not listed by") && body.contains(repo), "{repo}: {s} {body}");
    }
    // The group over the gated proxy: the proxy's verdicts, on its index and its downloads.
    let (_, listed) = text(&server, &packages("outer"))?;
    assert!(listed.contains("Version: 1.0") && !listed.contains("Version: 1.1"), "outer: {listed}");
    let (s, body) = text(&server, &format!("/repository/outer/pool/upgated/{}", hello_2.pool_path()))?;
    assert!(s == 404 && body.contains("less than 1 day ago"), "outer: {s} {body}");
    // A break-glass exception lets it in (published again at once)…
    for (repo, pool) in GATED {
        except(&server, repo, "hello", "1.1")?;
        until(&server, &packages(repo), repo, |s, b| s == 200 && b.contains("Version: 1.1"))?;
        assert_eq!(apt_download_hello(&server, repo)?, ["hello_1.1_amd64.deb"], "{repo}");
        assert_eq!(get(&server, &format!("/repository/{repo}/{pool}{}", hello_2.pool_path()))?.0, 200);
    }
    until(&server, &packages("outer"), "outer follows", |s, b| s == 200 && b.contains("Version: 1.1"))?;
    // …and its removal takes it out again.
    for (repo, _) in GATED {
        unexcept(&server, repo, "hello", "1.1")?;
        until(&server, &packages(repo), repo, |s, b| s == 200 && !b.contains("Version: 1.1"))?;
    }

    // Enforce: Debian's advisory of hello before 1.1 (by its source package), imported while
    // the policy enforces, leaves 1.0 out (the import publishes the gated repositories again).
    for (repo, _) in GATED {
        patch(&server, repo, json!({"policy": {"min_release_age_secs": 0, "vulnerabilities": "enforce"}}))?;
        until(&server, &packages(repo), repo, |s, b| {
            s == 200 && b.contains("Version: 1.1") && b.contains("Version: 1.0")
        })?;
    }
    import(
        dir.path(),
        url.as_deref(),
        json!([{"id": "DSA-9999-1", "modified": "2026-01-01T00:00:00Z", "summary": "hello says too much",
            "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
            "affected": [{"package": {"ecosystem": "Debian:12", "name": "hello"},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.1"}]}]}]}]),
    )?;
    for (repo, pool) in GATED {
        let listed = until(&server, &packages(repo), repo, |s, b| {
            s == 200 && b.contains("Version: 1.1") && !b.contains("Version: 1.0")
        })?;
        assert!(!listed.contains("Package: blocked"), "the rule still holds: {listed}");
        let (s, body) = text(&server, &format!("/repository/{repo}/{pool}{}", hello_1.pool_path()))?;
        assert!(
            s == 403 && body.contains("DSA-9999-1 (critical)") && body.contains("vulnerability policy"),
            "{s} {body}"
        );
        assert_eq!(apt_download_hello(&server, repo)?, ["hello_1.1_amd64.deb"], "{repo}");
        // Audit lists everything and names the advisories on the download.
        patch(&server, repo, json!({"policy": {"vulnerabilities": "audit"}}))?;
        until(&server, &packages(repo), repo, |s, b| s == 200 && b.contains("Version: 1.0"))?;
        let r = ureq::get(&format!("{}/repository/{repo}/{pool}{}", server.public, hello_1.pool_path())).call()?;
        assert_eq!((r.status(), r.header("x-packyard-advisories")), (200, Some("DSA-9999-1 (critical)")), "{repo}");
        // A day's minimum again: 1.1 (first seen minutes ago) is held…
        patch(&server, repo, json!({"policy": {"min_release_age_secs": DAY, "vulnerabilities": "off"}}))?;
        until(&server, &packages(repo), repo, |s, b| s == 200 && !b.contains("Version: 1.1"))?;
    }
    drop(server);
    // …until the day has passed: the worker publishes again when 1.1 comes of age.
    let later = (2 * DAY).to_string();
    let server = start(dir.path(), url.as_deref(), &[("PACKYARD_DEBUG__CLOCK_OFFSET_SECS", later)])?;
    for (repo, _) in GATED {
        until(&server, &packages(repo), repo, |s, b| s == 200 && b.contains("Version: 1.1"))?;
        assert_eq!(apt_download_hello(&server, repo)?, ["hello_1.1_amd64.deb"], "{repo}");
    }
    Ok(())
}

#[test]
fn apk_release_age_licenses_and_vulnerabilities() -> anyhow::Result<()> {
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        apk_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

const UNIT: &str = "v3.20/main/x86_64";

fn apk_on(backend: Backend) -> anyhow::Result<()> {
    use packyard_codecs::apk::testing::{build_apk, Fixture};
    use packyard_codecs::apk::{index, package, signing::ApkKey};
    let key = ApkKey::generate(2048)?;
    let key_file = key.file_name("upstream")?;
    let now = packyard_store::db::now_ms() / 1000;
    // hello 2.12 built two days ago, 2.13 now; gpl-tool (GPL) two days ago.
    let build = |name: &str, version: &str, built: i64, license: &str| -> anyhow::Result<(String, Vec<u8>)> {
        let f = Fixture { builddate: built, license: license.into(), ..Fixture::new(name, version, "x86_64") };
        let apk = build_apk(&f)?.bytes;
        let info = package::read_package(&apk[..], package::Limits::default())?;
        Ok((package::index_record(&info, "x86_64", apk.len() as u64), apk))
    };
    let old = build("hello", "2.12-r1", now - 2 * DAY, "MIT")?;
    let new = build("hello", "2.13-r0", now, "MIT")?;
    let gpl = build("gpl-tool", "1.0-r0", now - 2 * DAY, "GPL-2.0-only OR MIT")?;
    // Replaced upstream by 1.1-r0 (built now), whose file the upstream drops a while later.
    let tool_1 = build("tool", "1.0-r0", now - 2 * DAY, "MIT")?;
    let tool_2 = build("tool", "1.1-r0", now, "MIT")?;
    let upstream = Upstream::start()?;
    let publish = |records: &[&(String, Vec<u8>)]| -> anyhow::Result<()> {
        let text: String = records.iter().map(|(r, _)| format!("{r}\n")).collect();
        upstream.put(
            &format!("{UNIT}/APKINDEX.tar.gz"),
            index::signed_index("upstream", &text, &key, &key_file, 1_700_000_000)?,
        );
        Ok(())
    };
    upstream.put(&format!("{UNIT}/hello-2.12-r1.apk"), old.1.clone());
    upstream.put(&format!("{UNIT}/hello-2.13-r0.apk"), new.1.clone());
    upstream.put(&format!("{UNIT}/gpl-tool-1.0-r0.apk"), gpl.1.clone());
    upstream.put(&format!("{UNIT}/tool-1.0-r0.apk"), tool_1.1.clone());
    upstream.put(&format!("{UNIT}/tool-1.1-r0.apk"), tool_2.1.clone());
    publish(&[&old, &gpl, &tool_1])?;

    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
    let server = start(dir.path(), url.as_deref(), &[])?;
    let auth = basic(PW);
    let apk = json!({"architectures": ["x86_64"], "signed_by": key.public_pem()?});
    let ttl = json!({"metadata_ttl_secs": 1});
    let policy = json!({"min_release_age_secs": DAY,
        "rules": [{"id": "no-gpl", "action": "deny", "licenses": ["GPL-*"]}]});
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("up", Format::Apk, &upstream.url).with(json!({"proxy": ttl, "apk": apk})),
    )?;
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::group("gated", Format::Apk, &["up"]).with(json!({"policy": policy})),
    )?;
    common::process::create_repository(
        &server.public,
        &auth,
        Repo::proxy("upgated", Format::Apk, &upstream.url).with(json!({"proxy": ttl, "apk": apk, "policy": policy})),
    )?;
    // A group without a policy over the gated proxy merges what the proxy lets through.
    common::process::create_repository(&server.public, &auth, Repo::group("outer", Format::Apk, &["upgated"]))?;
    let records = |repo: &str| -> anyhow::Result<String> {
        let (s, bytes) = get(&server, &format!("/repository/{repo}/{UNIT}/APKINDEX.tar.gz"))?;
        anyhow::ensure!(s == 200, "{repo}: {s} {}", String::from_utf8_lossy(&bytes));
        Ok(index::apkindex_text(&bytes)?)
    };
    let wait = |repo: &str, what: &str, check: &dyn Fn(&str) -> bool| -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check(&records(repo)?) {
            anyhow::ensure!(Instant::now() < deadline, "{repo}: {what}: never so");
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    };
    let outer = records("outer")?;
    assert!(outer.contains("P:hello\nV:2.12-r1") && !outer.contains("P:gpl-tool"), "outer: {outer}");
    for repo in ["gated", "upgated"] {
        let merged = records(repo)?;
        assert!(merged.contains("P:hello\nV:2.12-r1") && !merged.contains("P:gpl-tool"), "{repo}: {merged}");
        let (s, body) = text(&server, &format!("/repository/{repo}/{UNIT}/gpl-tool-1.0-r0.apk"))?;
        assert!(
            s == 403 && body.contains("denied by this repository's quarantine rule \"no-gpl\""),
            "{repo}: {s} {body}"
        );
        verify(&server, repo, &[("hello-2.12-r1.apk", &old.1), ("tool-1.0-r0.apk", &tool_1.1)])?;
    }

    // hello 2.13 built now: left out, its download says when it is offered. The index
    // replaces tool 1.0-r0 by 1.1-r0 (built now): the gated repositories carry 1.0-r0 forward,
    // and keep serving it once the upstream dropped its file (the build fetched it).
    publish(&[&old, &new, &gpl, &tool_2])?;
    for repo in ["gated", "upgated"] {
        let young = format!("/repository/{repo}/{UNIT}/hello-2.13-r0.apk");
        until(&server, &young, repo, |s, b| s == 404 && b.contains("less than 1 day ago"))?;
    }
    upstream.remove(&format!("{UNIT}/tool-1.0-r0.apk"));
    for repo in ["gated", "upgated"] {
        let young = format!("/repository/{repo}/{UNIT}/hello-2.13-r0.apk");
        let body = until(&server, &young, repo, |s, b| s == 404 && b.contains("less than 1 day ago"))?;
        assert!(body.contains("hello 2.13-r0 was published less than 1 day ago"), "{body}");
        let merged = records(repo)?;
        assert!(merged.contains("V:2.12-r1") && !merged.contains("V:2.13-r0"), "{repo}: {merged}");
        assert!(merged.contains("P:tool\nV:1.0-r0") && !merged.contains("V:1.1-r0"), "{repo}: {merged}");
        let (s, body) = text(&server, &format!("/repository/{repo}/{UNIT}/tool-1.1-r0.apk"))?;
        assert!(s == 404 && body.contains("tool 1.1-r0 was published less than 1 day ago"), "{repo}: {s} {body}");
        verify(&server, repo, &[("hello-2.12-r1.apk", &old.1), ("tool-1.0-r0.apk", &tool_1.1)])?;
        if repo == "upgated" {
            wait("outer", "outer follows the proxy", &|r| r.contains("V:2.12-r1"))?;
            assert!(!records("outer")?.contains("V:2.13-r0"));
        }
        // The exception lets it in.
        except(&server, repo, "hello", "2.13-r0")?;
        wait(repo, "2.13 excepted", &|r| r.contains("V:2.13-r0"))?;
        verify(
            &server,
            repo,
            &[("hello-2.12-r1.apk", &old.1), ("hello-2.13-r0.apk", &new.1), ("tool-1.0-r0.apk", &tool_1.1)],
        )?;
    }
    wait("outer", "outer takes the excepted version", &|r| r.contains("V:2.13-r0"))?;

    // Enforce: Alpine's advisory of hello before 2.13-r0 leaves 2.12-r1 out and refuses it.
    import(
        dir.path(),
        url.as_deref(),
        json!([{"id": "ALPINE-TEST-1", "modified": "2026-01-01T00:00:00Z", "summary": "hello says too much",
            "database_specific": {"severity": "HIGH"},
            "affected": [{"package": {"ecosystem": "Alpine:v3.20", "name": "hello"},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.13-r0"}]}]}]},
          // Another release's entry (v3.19 fixed it later): nothing to v3.20's packages.
          {"id": "ALPINE-TEST-2", "modified": "2026-01-01T00:00:00Z", "summary": "hello in 3.19",
            "database_specific": {"severity": "HIGH"},
            "affected": [{"package": {"ecosystem": "Alpine:v3.19", "name": "hello"},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.14-r0"}]}]}]}]),
    )?;
    for repo in ["gated", "upgated"] {
        patch(&server, repo, json!({"policy": {"vulnerabilities": "enforce"}}))?;
        wait(repo, "2.12-r1 blocked", &|r| !r.contains("V:2.12-r1"))?;
        let (s, body) = text(&server, &format!("/repository/{repo}/{UNIT}/hello-2.12-r1.apk"))?;
        assert!(s == 403 && body.contains("ALPINE-TEST-1 (high)"), "{repo}: {s} {body}");
        verify(&server, repo, &[("hello-2.13-r0.apk", &new.1), ("tool-1.0-r0.apk", &tool_1.1)])?;
    }
    // The preview reads the licenses from what the proxy cached (each `.apk`'s `.PKGINFO`).
    let preview = admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories/upgated/policy/preview",
        Some(json!({"rules": [{"id": "no-mit", "action": "deny", "licenses": ["MIT"]}]})),
    )?;
    let mut held: Vec<(&str, &str)> = preview["held"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h["message"].as_str().is_some_and(|m| m.contains("\"no-mit\"")))
        .filter_map(|h| Some((h["name"].as_str()?, h["version"].as_str()?)))
        .collect();
    held.sort();
    assert_eq!(
        held,
        [("hello", "2.12-r1"), ("hello", "2.13-r0"), ("tool", "1.0-r0")],
        "the MIT packages the proxy cached: {preview}"
    );
    // Allow-only by license: what the proxy cached is all MIT, nothing is held.
    let preview = admin_json(
        &server.public,
        &auth,
        "POST",
        "/api/v1/repositories/upgated/policy/preview",
        Some(json!({"rules": [{"id": "only-mit", "action": "allow", "licenses": ["MIT"]}]})),
    )?;
    assert_eq!(preview["held"].as_array().map(Vec::len), Some(0), "{preview}");
    // A license rule is refused where packages declare no license (APT).
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &auth).send_json(
            Repo::group("apt-gpl", Format::Apt, &[])
                .with(json!({"policy": {"rules": [{"id": "gpl", "action": "deny", "licenses": ["GPL-*"]}]}}))
                .0,
        ),
    )?;
    assert!(s == 400 && body.contains("uses `licenses`"), "{s} {body}");
    Ok(())
}

/// `repo`'s index through the independent verifier (apk's reading of the signature, every
/// record and every package it lists), with the repository's own key and `packages` downloaded
/// through it; it must list exactly those.
fn verify(server: &Server, repo: &str, packages: &[(&str, &Vec<u8>)]) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (_, names) = get(server, &format!("/repository/{repo}/keys/"))?;
    let name = String::from_utf8_lossy(&names).lines().next().unwrap_or_default().to_string();
    let (_, pem) = get(server, &format!("/repository/{repo}/keys/{name}"))?;
    let (_, index) = get(server, &format!("/repository/{repo}/{UNIT}/APKINDEX.tar.gz"))?;
    std::fs::write(dir.path().join("APKINDEX.tar.gz"), &index)?;
    std::fs::write(dir.path().join("key.pem"), &pem)?;
    for (file, bytes) in packages {
        let (s, got) = get(server, &format!("/repository/{repo}/{UNIT}/{file}"))?;
        anyhow::ensure!(s == 200 && got == **bytes, "{repo} {file}: {s}");
        std::fs::write(dir.path().join(file), got)?;
    }
    let out = common::process::apk_verifier(dir.path(), "APKINDEX.tar.gz", "key.pem", &name)?;
    anyhow::ensure!(out.status.success(), "{repo}: {}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(summary["packages"].as_array().map(Vec::len), Some(packages.len()), "{repo}: {summary}");
    Ok(())
}
