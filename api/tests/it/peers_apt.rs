//! The failure modes users of the peers keep hitting with APT proxies and groups, each with the
//! real `apt-get` against a fake Debian upstream that misbehaves on cue (`common::archive`):
//! the upstream moving on in the middle of one `apt-get update`, an upstream that publishes only
//! `Packages.xz`, `Architecture: all` packages listed in every architecture's index, an expired
//! `Valid-Until`, the upstream going offline after a first fetch, and a poisoned stanza upstream.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::archive::{archive_files, Dist, Package, Upstream};
use common::process::{basic, start, status_of, Server};
use common::Repo;
use packyard_codecs::apt::signing::Signer;
use packyard_model::repos::Format;

const PW: &str = "peers-apt-admin";

fn server() -> anyhow::Result<(tempfile::TempDir, Server)> {
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)],
    )?;
    server.wait_ready()?;
    Ok((dir, server))
}

/// A proxy `name` of `upstream`'s `stable`, verified with `signer`'s key, metadata fresh for
/// `ttl` seconds; and a group `<name>-group` over it.
fn proxy_and_group(server: &Server, name: &str, upstream: &Upstream, signer: &Signer, ttl: u64) -> anyhow::Result<()> {
    let key = signer.public_armored()?;
    common::process::create_repository(
        &server.public,
        &basic(PW),
        Repo::proxy(name, Format::Apt, &upstream.url).with(serde_json::json!({
            "apt": {"distributions": ["stable"], "signed_by": key, "architectures": ["amd64", "arm64"]},
            "proxy": {"metadata_ttl_secs": ttl}})),
    )?;
    common::process::create_repository(
        &server.public,
        &basic(PW),
        Repo::group(&format!("{name}-group"), Format::Apt, &[name])
            .with(serde_json::json!({"apt": {"distributions": ["stable"], "architectures": ["amd64", "arm64"]}})),
    )?;
    Ok(())
}

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    common::process::get_bytes(server, path)
}

/// A scratch apt configuration for `repo` on `server` (its key: the repository's own for a
/// group, the upstream's for a proxy), for `arch`.
fn apt_for(server: &Server, repo: &str, key: &[u8], arch: &str) -> anyhow::Result<tempfile::TempDir> {
    let url = format!("{}/repository/{repo}/", server.public);
    common::apt::scratch(key, |k| format!("deb [signed-by={} arch={arch}] {url} stable main", k.display()))
}

/// `apt-get` with `args` in `root`: (success, stdout + stderr). Dates are checked as a stock
/// Debian apt checks them (`Date` not in the future, `Valid-Until` not past): this machine's
/// apt configuration turns both checks off for its snapshot mirror.
fn apt(program: &str, root: &Path, arch: &str, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let mut all = vec![
        "-o",
        "APT::Architecture=amd64",
        "-o",
        "Acquire::Check-Date=true",
        "-o",
        "Acquire::Check-Valid-Until=true",
    ];
    let foreign = format!("APT::Architectures::={arch}");
    if arch != "amd64" {
        all.extend(["-o", &foreign]);
    }
    all.extend(args);
    let out = common::apt::tool(program, root, &all)?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success() && !text.contains("E: ") && !text.contains("W: "), text))
}

/// The group's key, once the group has published its first snapshot (the worker builds it
/// after the group is created).
fn group_key(server: &Server, group: &str) -> anyhow::Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while get(server, &format!("/repository/{group}/dists/stable/InRelease"))?.0 != 200 {
        anyhow::ensure!(std::time::Instant::now() < deadline, "{group} published nothing in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (s, key) = get(server, &format!("/repository/{group}/gpg.key"))?;
    anyhow::ensure!(s == 200, "no key for {group}");
    Ok(key)
}

fn upstream_with(
    signer: &Signer,
    dist: impl Fn() -> anyhow::Result<HashMap<String, Vec<u8>>>,
) -> anyhow::Result<(Upstream, HashMap<String, Vec<u8>>)> {
    let _ = signer;
    let upstream = Upstream::start()?;
    let files = dist()?;
    upstream.publish(files.clone());
    Ok((upstream, files))
}

/// The upstream moves on between `InRelease` and the index it lists, in one `apt-get update`.
/// Debian keeps the previous generation's `by-hash` files: through the proxy, apt reads the
/// index the `InRelease` it got names — by hash — and the next update sees the new generation.
/// An upstream without `by-hash` no longer has the listed bytes: the proxy never serves the new
/// index under the old `InRelease` (a hash-sum mismatch) but answers 503, and the retry reads
/// the new generation whole. Through a group over the proxy, its snapshot, then the new one.
#[test]
fn an_upstream_moving_on_during_one_update() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let (a1, b1) = (Package::new("alpha", "1.0", "amd64"), Package::new("beta", "1.0", "amd64"));
    let v1 = |by_hash| Dist {
        name: "stable",
        indexes: vec![("amd64", vec![&a1])],
        by_hash,
        forms: &["", ".gz", ".xz"],
        valid_until: None,
    };
    let v2 = |by_hash| Dist {
        name: "stable",
        indexes: vec![("amd64", vec![&a1, &b1])],
        by_hash,
        forms: &["", ".gz", ".xz"],
        valid_until: None,
    };
    let (_dir, server) = server()?;
    let key = signer.public_armored()?;
    for (name, by_hash) in [("hashed", true), ("plain", false)] {
        // Each case's own bytes (none of the other's is in the blob store).
        let (a1, b1) = (Package::new("alpha", &format!("1.0+{name}"), "amd64"), Package::new("beta", "1.0", "amd64"));
        let v1 = |by_hash| Dist {
            name: "stable",
            indexes: vec![("amd64", vec![&a1])],
            by_hash,
            forms: &["", ".gz", ".xz"],
            valid_until: None,
        };
        let v2 = |by_hash| Dist {
            name: "stable",
            indexes: vec![("amd64", vec![&a1, &b1])],
            by_hash,
            forms: &["", ".gz", ".xz"],
            valid_until: None,
        };
        let (upstream, first) = upstream_with(&signer, || archive_files(&v1(by_hash), &signer, None))?;
        common::process::create_repository(
            &server.public,
            &basic(PW),
            Repo::proxy(name, Format::Apt, &upstream.url).with(serde_json::json!({
                "apt": {"distributions": ["stable"], "signed_by": key}, "proxy": {"metadata_ttl_secs": 1}})),
        )?;
        // The proxy's first update: the upstream switches right after serving InRelease.
        upstream.publish_after_next_inrelease(archive_files(&v2(by_hash), &signer, Some(&first))?);
        let root = apt_for(&server, name, key.as_bytes(), "amd64")?;
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
        assert!(!text.contains("Hash Sum mismatch") && !text.contains("File has unexpected size"), "{name}: {text}");
        if by_hash {
            assert!(ok, "{name}: {text}");
            let (_, policy) = apt("apt-cache", root.path(), "amd64", &["policy", "alpha", "beta"])?;
            assert!(policy.contains("alpha:\n  Installed: (none)\n  Candidate: 1.0+hashed"), "{name}: {policy}");
            assert!(!policy.contains("beta:"), "{name}: the generation its InRelease named: {policy}");
            assert!(upstream.requests().iter().any(|r| r.contains("/by-hash/SHA256/")), "{:?}", upstream.requests());
            std::thread::sleep(std::time::Duration::from_millis(1_100));
        } else {
            assert!(!ok && text.contains("503"), "{name}: refused, not mismatched: {text}");
        }
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
        assert!(ok, "{name}, the next update: {text}");
        let (_, policy) = apt("apt-cache", root.path(), "amd64", &["policy", "beta"])?;
        assert!(policy.contains("Candidate: 1.0"), "{name}: the next update sees the new generation: {policy}");
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["download", "beta"])?;
        assert!(ok, "{name}: {text}");
    }
    // A group over a proxy whose upstream moves on: its snapshot, then (once the members'
    // metadata TTL passed: the worker's refresh) the new generation.
    let (upstream, first) = upstream_with(&signer, || archive_files(&v1(true), &signer, None))?;
    proxy_and_group(&server, "moving", &upstream, &signer, 1)?;
    let gkey = group_key(&server, "moving-group")?;
    let groot = apt_for(&server, "moving-group", &gkey, "amd64")?;
    let (ok, text) = apt("apt-get", groot.path(), "amd64", &["update"])?;
    assert!(ok, "{text}");
    upstream.publish(archive_files(&v2(true), &signer, Some(&first))?);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (ok, text) = apt("apt-get", groot.path(), "amd64", &["update"])?;
        assert!(ok, "moving-group: {text}");
        let (found, text) = apt("apt-get", groot.path(), "amd64", &["download", "beta"])?;
        if found {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "moving-group never listed beta: {text}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    Ok(())
}

/// An upstream that publishes only `Packages.xz` (its `Release` lists the other forms, which
/// answer 404): the proxy and the group serve it, and apt reads both.
#[test]
fn an_upstream_with_only_packages_xz() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let a = Package::new("alpha", "1.0", "amd64");
    let (upstream, _) = upstream_with(&signer, || {
        archive_files(
            &Dist {
                name: "stable",
                indexes: vec![("amd64", vec![&a])],
                by_hash: false,
                forms: &[".xz"],
                valid_until: None,
            },
            &signer,
            None,
        )
    })?;
    let (_dir, server) = server()?;
    proxy_and_group(&server, "xzonly", &upstream, &signer, 60)?;
    for (repo, key) in
        [("xzonly", signer.public_armored()?.into_bytes()), ("xzonly-group", group_key(&server, "xzonly-group")?)]
    {
        let root = apt_for(&server, repo, &key, "amd64")?;
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
        assert!(ok, "{repo}: {text}");
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["download", "alpha"])?;
        assert!(ok, "{repo}: {text}");
        let got = std::fs::read(root.path().join("downloads/alpha_1.0_amd64.deb"))?;
        assert!(got == a.deb, "{repo}: the package's own bytes");
    }
    assert!(
        !upstream.requests().iter().any(|r| r.ends_with("/Packages") || r.ends_with("/Packages.gz")),
        "only the published form was asked for: {:?}",
        upstream.requests()
    );
    Ok(())
}

/// `Architecture: all` packages an upstream lists in every architecture's `Packages`: the group
/// lists them in each of its architectures' indexes, and apt on amd64 and on arm64 finds and
/// downloads them (once each: the same file).
#[test]
fn architecture_all_in_every_index() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let (docs, tool_amd, tool_arm) = (
        Package::new("docs", "2.0", "all"),
        Package::new("tool", "1.0", "amd64"),
        Package::new("tool", "1.0", "arm64"),
    );
    let (upstream, _) = upstream_with(&signer, || {
        archive_files(
            &Dist {
                name: "stable",
                indexes: vec![("amd64", vec![&docs, &tool_amd]), ("arm64", vec![&docs, &tool_arm])],
                by_hash: true,
                forms: &["", ".gz", ".xz"],
                valid_until: None,
            },
            &signer,
            None,
        )
    })?;
    let (_dir, server) = server()?;
    proxy_and_group(&server, "archall", &upstream, &signer, 60)?;
    let key = group_key(&server, "archall-group")?;
    for arch in ["amd64", "arm64"] {
        for (repo, key) in [("archall", signer.public_armored()?.into_bytes()), ("archall-group", key.clone())] {
            let root = apt_for(&server, repo, &key, arch)?;
            let (ok, text) = apt("apt-get", root.path(), arch, &["update"])?;
            assert!(ok, "{repo} {arch}: {text}");
            let (ok, text) = apt("apt-get", root.path(), arch, &["download", "docs", &format!("tool:{arch}")])?;
            assert!(ok, "{repo} {arch}: {text}");
            assert!(std::fs::read(root.path().join("downloads/docs_2.0_all.deb"))? == docs.deb);
        }
        let (s, packages) =
            get(&server, &format!("/repository/archall-group/dists/stable/main/binary-{arch}/Packages"))?;
        assert_eq!(s, 200);
        let packages = String::from_utf8_lossy(&packages);
        assert_eq!(packages.matches("Package: docs\n").count(), 1, "{arch}: {packages}");
        assert!(packages.contains(&format!("Package: tool\nVersion: 1.0\nArchitecture: {arch}\n")), "{packages}");
    }
    Ok(())
}

/// `Valid-Until`: a cached `InRelease` whose `Valid-Until` has passed is never served as fresh
/// (the proxy asks the upstream, which has re-signed it), so apt does not fail with "expired"
/// while the metadata TTL runs (before: it did, for up to the TTL). An upstream whose own
/// `InRelease` has expired is passed on as it is by the proxy (apt refuses it, as it refuses the
/// upstream's), and is not merged into a group — re-signing it would hide the expiry —, which
/// keeps its last snapshot and says why in `/status`.
#[test]
fn an_expired_valid_until() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let (a, b) = (&Package::new("alpha", "1.0", "amd64"), &Package::new("beta", "1.0", "amd64"));
    fn dist(packages: Vec<&Package>, valid_until: i64) -> Dist<'_> {
        Dist {
            name: "stable",
            indexes: vec![("amd64", packages)],
            by_hash: true,
            forms: &["", ".gz", ".xz"],
            valid_until: Some(valid_until),
        }
    }
    let now = packyard_store::db::now_ms;
    let (_dir, server) = server()?;

    // A metadata TTL of an hour: only the expiry makes the proxy ask again.
    let (upstream, _) = upstream_with(&signer, || archive_files(&dist(vec![a], now() + 4_000), &signer, None))?;
    proxy_and_group(&server, "valid", &upstream, &signer, 3_600)?;
    let root = apt_for(&server, "valid", signer.public_armored()?.as_bytes(), "amd64")?;
    let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
    assert!(ok, "{text}");
    upstream.publish(archive_files(&dist(vec![a], now() + 3_600_000), &signer, None)?);
    std::thread::sleep(std::time::Duration::from_millis(4_500));
    let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
    assert!(ok, "the proxy served the re-signed InRelease, not its expired copy: {text}");
    let asked = upstream.requests().iter().filter(|r| r.ends_with("/InRelease")).count();
    assert_eq!(asked, 2, "asked again once its copy expired: {:?}", upstream.requests());

    // An upstream that lets its InRelease expire (and lists beta meanwhile).
    let (upstream, _) = upstream_with(&signer, || archive_files(&dist(vec![a], now() + 3_600_000), &signer, None))?;
    proxy_and_group(&server, "stale", &upstream, &signer, 1)?;
    let key = group_key(&server, "stale-group")?;
    let groot = apt_for(&server, "stale-group", &key, "amd64")?;
    let (ok, text) = apt("apt-get", groot.path(), "amd64", &["update"])?;
    assert!(ok, "{text}");
    upstream.publish(archive_files(&dist(vec![a, b], now() - 60_000), &signer, None)?);
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let proot = apt_for(&server, "stale", signer.public_armored()?.as_bytes(), "amd64")?;
    let (ok, text) = apt("apt-get", proot.path(), "amd64", &["update"])?;
    assert!(!ok && text.contains("is expired"), "the proxy passes the upstream's expired InRelease on: {text}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = common::process::admin_json(
            &server.public,
            &basic(PW),
            "GET",
            "/api/v1/repositories/stale-group/status",
            None,
        )?;
        if status.to_string().contains("expired at") {
            assert!(status.to_string().contains("a group does not re-sign expired metadata"), "{status}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the group never refused the expired upstream: {status}");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let (ok, text) = apt("apt-get", groot.path(), "amd64", &["update"])?;
    assert!(ok, "the group serves its last snapshot: {text}");
    let (_, policy) = apt("apt-cache", groot.path(), "amd64", &["policy", "beta"])?;
    assert!(!policy.contains("Candidate"), "nothing of the expired release was merged: {policy}");
    Ok(())
}

/// The upstream offline after a first fetch: the proxy serves its cached, still valid index
/// (and the packages it fetched), the group its snapshot; `apt-get update` and `download` work.
#[test]
fn the_upstream_offline_after_a_first_fetch() -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let a = Package::new("alpha", "1.0", "amd64");
    let (upstream, _) = upstream_with(&signer, || {
        archive_files(
            &Dist {
                name: "stable",
                indexes: vec![("amd64", vec![&a])],
                by_hash: true,
                forms: &["", ".gz", ".xz"],
                valid_until: None,
            },
            &signer,
            None,
        )
    })?;
    let (_dir, server) = server()?;
    proxy_and_group(&server, "flaky", &upstream, &signer, 1)?;
    let key = group_key(&server, "flaky-group")?;
    let roots = [
        ("flaky", apt_for(&server, "flaky", signer.public_armored()?.as_bytes(), "amd64")?),
        ("flaky-group", apt_for(&server, "flaky-group", &key, "amd64")?),
    ];
    for (repo, root) in &roots {
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
        assert!(ok, "{repo}: {text}");
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["download", "alpha"])?;
        assert!(ok, "{repo}: {text}");
    }
    upstream.set_offline(true);
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    for (repo, root) in &roots {
        std::fs::remove_dir_all(root.path().join("state/lists"))?;
        std::fs::create_dir_all(root.path().join("state/lists/partial"))?;
        std::fs::remove_file(root.path().join("downloads/alpha_1.0_amd64.deb"))?;
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
        assert!(ok, "{repo}, upstream offline: {text}");
        let (ok, text) = apt("apt-get", root.path(), "amd64", &["download", "alpha"])?;
        assert!(ok, "{repo}, upstream offline: {text}");
    }
    let (s, _) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert_eq!(s, 200);
    Ok(())
}

/// A proxy switched offline (`proxy.offline`) asks its upstream nothing — counted at the
/// upstream — and serves what it cached, however old, to `apt-get update` and `download`; what
/// it never fetched is a 404, counted; `/status/check` names it. Back online with the upstream
/// down, a cached copy older than `proxy.max_stale_secs` is not served, a younger limit's is.
fn offline_and_stale_limits_on(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let signer = Signer::generate("Fake upstream <fake@example.org>")?;
    let (a, b) = (Package::new("alpha", "1.0", "amd64"), Package::new("beta", "1.0", "amd64"));
    let (upstream, _) = upstream_with(&signer, || {
        let dist = Dist {
            name: "stable",
            indexes: vec![("amd64", vec![&a, &b])],
            by_hash: true,
            forms: &["", ".xz"],
            valid_until: None,
        };
        archive_files(&dist, &signer, None)
    })?;
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)];
    let Some((server, _dir)) = common::process::server_on(backend, &env)? else { return Ok(()) };
    common::process::create_repository(
        &server.public,
        &basic(PW),
        Repo::proxy("cut", Format::Apt, &upstream.url).with(serde_json::json!({
            "apt": {"distributions": ["stable"], "architectures": ["amd64"]},
            "proxy": {"metadata_ttl_secs": 1}})),
    )?;
    let key = signer.public_armored()?;
    let root = apt_for(&server, "cut", key.as_bytes(), "amd64")?;
    let (ok, text) = apt("apt-get", root.path(), "amd64", &["update"])?;
    assert!(ok, "{text}");
    let (ok, text) = apt("apt-get", root.path(), "amd64", &["download", "alpha"])?;
    assert!(ok, "{text}");
    let patch = |proxy: serde_json::Value| -> anyhow::Result<()> {
        let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/cut", server.public))
            .set("Authorization", &basic(PW))
            .set("content-type", "application/merge-patch+json")
            .send_string(&serde_json::json!({ "proxy": proxy }).to_string());
        let (s, text) = status_of(r)?;
        anyhow::ensure!(s == 200, "PATCH: {s} {text}");
        Ok(())
    };

    // Offline: the cached index is past its 1 s freshness and is served all the same.
    patch(serde_json::json!({"offline": true}))?;
    upstream.forget_requests();
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let fresh = apt_for(&server, "cut", key.as_bytes(), "amd64")?;
    let (ok, text) = apt("apt-get", fresh.path(), "amd64", &["update"])?;
    assert!(ok, "offline: {text}");
    let (ok, text) = apt("apt-get", fresh.path(), "amd64", &["download", "alpha"])?;
    assert!(ok, "offline, cached: {text}");
    let (ok, text) = apt("apt-get", fresh.path(), "amd64", &["download", "beta"])?;
    assert!(!ok && text.contains("404"), "offline, never fetched: {text}");
    assert_eq!(upstream.requests(), Vec::<String>::new(), "not one upstream request while offline");
    let metrics = ureq::get(&format!("{}/metrics", server.management)).call()?.into_string()?;
    let misses = metrics
        .lines()
        .find_map(|l| l.strip_prefix("packyard_proxy_offline_misses_total{repository=\"cut\"} "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(misses.is_some_and(|n| n >= 1), "{misses:?}");
    let check = common::process::admin_json(&server.public, &basic(PW), "GET", "/service/rest/v1/status/check", None)?;
    let said = check["Proxy Repositories"]["message"].as_str().unwrap_or_default().to_string();
    assert!(said.contains("proxy.offline") && said.contains("cut"), "{check}");
    let log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(log.contains("no upstream traffic; cached files are served, the rest is a 404"), "the switch is logged");

    // Online, the upstream down: a copy stale for longer than max_stale_secs (past its 1 s
    // freshness by 2 s and more) is refused (502), one within a larger limit served, marked stale.
    patch(serde_json::json!({"offline": false, "max_stale_secs": 1}))?;
    upstream.set_offline(true);
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let release = format!("{}/repository/cut/dists/stable/InRelease", server.public);
    let (s, text) = status_of(ureq::get(&release).call())?;
    assert_eq!(s, 502, "older than max_stale_secs: {text}");
    patch(serde_json::json!({"max_stale_secs": 3600}))?;
    let r = ureq::get(&release).call()?;
    assert_eq!(r.header("X-Packyard-Cache"), Some("stale"));
    assert_eq!(r.status(), 200);
    Ok(())
}

#[test]
fn offline_and_stale_limits_on_sqlite() -> anyhow::Result<()> {
    offline_and_stale_limits_on(packyard_store::db::Backend::Sqlite)
}

#[test]
fn offline_and_stale_limits_on_postgres() -> anyhow::Result<()> {
    offline_and_stale_limits_on(packyard_store::db::Backend::Postgres)
}

#[test]
fn offline_and_stale_limits_on_mariadb() -> anyhow::Result<()> {
    offline_and_stale_limits_on(packyard_store::db::Backend::MySql)
}
