//! OSV vulnerability data: `packyard-api vulnerabilities import` from a file and from a URL,
//! matched against Go, APT and Conan components in each ecosystem's own version order and shown
//! in Nexus's component API (a field, and the `severity` filter); a malformed file is refused
//! with the record that failed and changes nothing. On SQLite, PostgreSQL and MariaDB.

use crate::common;

use std::collections::BTreeMap;

use common::process::{admin_json, basic, status_of};
use packyard_store::db::Backend;
use serde_json::{json, Value};

const PW: &str = "vulnerabilities-admin";

fn records() -> Value {
    json!([
        {"schema_version": "1.6.0", "id": "GO-2026-0001", "modified": "2026-01-01T00:00:00Z",
         "aliases": ["CVE-2026-0001"], "summary": "Remote code execution in example.com/vuln",
         "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
         "affected": [{"package": {"ecosystem": "Go", "name": "example.com/vuln"},
            "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.2.0"}]}]}]},
        {"id": "DEBIAN-CVE-2026-0002", "modified": "2026-01-02T00:00:00Z", "summary": "Overflow in vulnpkg",
         "affected": [{"package": {"ecosystem": "Debian:12", "name": "vulnpkg"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.0-2"}]}]}]},
        {"id": "CONAN-2026-0003", "modified": "2026-01-03T00:00:00Z", "summary": "Weak defaults in libz",
         "database_specific": {"severity": "MODERATE"},
         "affected": [{"package": {"ecosystem": "ConanCenter", "name": "libz"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0.9"}, {"fixed": "1.1"}]}]}]},
        {"id": "PYSEC-2026-4", "modified": "2026-01-04T00:00:00Z", "summary": "Not Packyard's",
         "affected": [{"package": {"ecosystem": "PyPI", "name": "requests"}, "versions": ["2.0.0"]}]},
        {"id": "DEBIAN-CVE-2026-0006", "modified": "2026-01-06T00:00:00Z", "summary": "In vulnsrc's library",
         "affected": [{"package": {"ecosystem": "Debian:12", "name": "vulnsrc"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.0-1"}]}]}]},
        // Bullseye's entry (fixed there later): nothing to the bookworm repository's vulnpkg 1.0-2.
        {"id": "DEBIAN-CVE-2026-0007", "modified": "2026-01-07T00:00:00Z", "summary": "vulnpkg in bullseye",
         "affected": [{"package": {"ecosystem": "Debian:11", "name": "vulnpkg"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "1.0-3"}]}]}]},
        {"id": "GO-2026-0005", "modified": "2026-01-05T00:00:00Z", "summary": "A major version's own",
         "database_specific": {"severity": "LOW"},
         "affected": [{"package": {"ecosystem": "Go", "name": "example.com/vuln/v2"},
            "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "2.1.0"}]}]}]}
    ])
}

/// Each component's advisories by `name version`: (id, severity) pairs.
fn advisories(public: &str, auth: &str, query: &str) -> anyhow::Result<BTreeMap<String, Vec<(String, String)>>> {
    let page = admin_json(public, auth, "GET", &format!("/service/rest/v1/search?{query}"), None)?;
    let mut out = BTreeMap::new();
    for item in page["items"].as_array().into_iter().flatten() {
        let found = item["advisories"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| (a["id"].as_str().unwrap_or("").to_string(), a["severity"].as_str().unwrap_or("").to_string()))
            .collect();
        // (Go's catalogue splits a module path into group and name.)
        let group = item["group"].as_str().filter(|g| item["format"] == "go" && !g.is_empty());
        let name = item["name"].as_str().unwrap_or("");
        let name = group.map_or(name.to_string(), |g| format!("{g}/{name}"));
        out.insert(format!("{name} {}", item["version"].as_str().unwrap_or("")), found);
    }
    Ok(out)
}

/// Writes `records` to `file` and runs `packyard-api vulnerabilities import` on it in `dir` (where
/// the server's configuration is): its exit code, standard output and error.
fn import_file(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    file: &std::path::Path,
    records: &Value,
) -> anyhow::Result<(i32, String, String)> {
    std::fs::write(file, records.to_string())?;
    let path = file.display().to_string();
    common::process::run_to_end(dir, &["vulnerabilities", "import", &path], env)
}

fn pair(id: &str, level: &str) -> Vec<(String, String)> {
    vec![(id.to_string(), level.to_string())]
}

#[test]
fn osv_data_is_imported_matched_and_shown() -> anyhow::Result<()> {
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

fn on(backend: Backend) -> anyhow::Result<()> {
    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(()) };
    let server = common::process::start_on(
        dir.path(),
        url.as_deref(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_WEBHOOKS__POLL_MS", "50"),
            // The receiver is on loopback, which deliveries may reach only when opened.
            ("PACKYARD_WEBHOOKS__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
        ],
    )?;
    // The commands run where the server's configuration is: its database too.
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    if let Some(url) = url.as_deref() {
        env.extend([
            ("PACKYARD_DATABASE__URL", url),
            ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ]);
    }
    let auth = basic(PW);
    for (name, format) in [("gomods", "go"), ("debs", "apt"), ("recipes", "conan")] {
        let mut body = json!({"name": name, "format": format, "type": "hosted"});
        if format == "apt" {
            body["apt"] = json!({"distribution": "bookworm", "components": ["main"], "architectures": ["amd64"]});
        }
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    }
    for (m, v) in [("example.com/vuln", "v1.0.0"), ("example.com/vuln", "v1.2.0"), ("example.com/vuln/v2", "v2.0.0")] {
        let zip = packyard_codecs::go::testing::simple_module(m, v, v, 0)?;
        let url = format!("{}/repository/gomods/{m}/@v/{v}.zip", server.public);
        let (s, text) = status_of(ureq::put(&url).set("Authorization", &auth).send_bytes(&zip))?;
        anyhow::ensure!(s == 201, "{v}: {s} {text}");
    }
    // (libvuln1 is built from the source package vulnsrc, which Debian's advisories name.)
    for (package, v, source) in
        [("vulnpkg", "1.0-1", ""), ("vulnpkg", "1.0-2", ""), ("libvuln1", "1.5-1", "Source: vulnsrc\n")]
    {
        let control = format!(
            "Package: {package}\n{source}Version: {v}\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: fixture\n"
        );
        let deb = packyard_codecs::apt::testing::deb(&control, ".xz");
        let url = format!("{}/repository/debs/pool/{package}_{v}_amd64.deb?wait=true", server.public);
        let (s, text) = status_of(ureq::put(&url).set("Authorization", &auth).send_bytes(&deb))?;
        anyhow::ensure!(s == 201, "{v}: {s} {text}");
    }
    let info = "[settings]\nos=Linux\n";
    let base = format!("{}/repository/recipes", server.public);
    crate::conan::upload_by_http(&base, &auth, "libz/1.0/_/_", ("r1", "p1", "q1"), info)?;
    crate::conan::upload_by_http(&base, &auth, "libz/1.1/_/_", ("r2", "p2", "q2"), info)?;

    // A subscriber to new matches.
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let hook = format!("http://127.0.0.1:{}/hooks", listener.local_addr()?.port());
    let received = crate::webhooks::receiver(listener, 0);
    let body = json!({"name": "vulns", "url": hook, "events": ["vulnerability.matched"]});
    admin_json(&server.public, &auth, "POST", "/api/v1/webhooks", Some(body))?;

    let work = tempfile::tempdir()?;
    let file = work.path().join("osv.json");
    let path = file.display().to_string();
    let (code, out, err) = import_file(dir.path(), &env, &file, &records())?;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.trim(),
        "7 advisories read: 7 new or changed, stored (6 packages of Packyard's ecosystems), 0 unchanged; 5 components affected by them"
    );
    // Every component matched at once: counted by its highest level.
    let (code, out, err) = common::process::run_to_end(dir.path(), &["vulnerabilities", "census"], &env)?;
    assert_eq!(code, 0, "{out}{err}");
    let (count, levels) = out.trim().split_once(" ms: ").unwrap_or_default();
    assert!(count.starts_with("8 components matched in "), "{out}");
    assert_eq!(levels, "1 critical, 2 high, 1 medium, 1 low", "{out}");
    // Each announced to the subscriber.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let announced: BTreeMap<String, (String, String)> = loop {
        let got: BTreeMap<String, (String, String)> = received
            .lock()
            .map_err(|_| anyhow::anyhow!("receiver"))?
            .iter()
            .filter(|r| r.event == "vulnerability.matched")
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .map(|v| {
                let c = &v["data"]["component"];
                let a = &v["data"]["advisory"];
                let key = format!(
                    "{} {} {}",
                    v["repository"].as_str().unwrap_or(""),
                    c["name"].as_str().unwrap_or(""),
                    c["version"].as_str().unwrap_or("")
                );
                (key, (a["id"].as_str().unwrap_or("").to_string(), a["severity"].as_str().unwrap_or("").to_string()))
            })
            .collect();
        if got.len() >= 5 || std::time::Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let pairs = |id: &str, level: &str| (id.to_string(), level.to_string());
    assert_eq!(
        announced,
        BTreeMap::from([
            ("debs libvuln1 1.5-1".to_string(), pairs("DEBIAN-CVE-2026-0006", "high")),
            ("debs vulnpkg 1.0-1".to_string(), pairs("DEBIAN-CVE-2026-0002", "high")),
            ("gomods vuln v1.0.0".to_string(), pairs("GO-2026-0001", "critical")),
            ("gomods vuln v2.0.0".to_string(), pairs("GO-2026-0005", "low")),
            ("recipes libz 1.0".to_string(), pairs("CONAN-2026-0003", "medium")),
        ])
    );
    let none: Vec<(String, String)> = Vec::new();
    let want: BTreeMap<String, Vec<(String, String)>> = [
        ("example.com/vuln v1.0.0", pair("GO-2026-0001", "critical")),
        ("example.com/vuln v1.2.0", none.clone()),
        // A major version's component is matched as its own module (example.com/vuln/v2).
        ("example.com/vuln v2.0.0", pair("GO-2026-0005", "low")),
        ("vulnpkg 1.0-1", pair("DEBIAN-CVE-2026-0002", "high")),
        ("vulnpkg 1.0-2", none.clone()),
        ("libvuln1 1.5-1", pair("DEBIAN-CVE-2026-0006", "high")),
        ("libz 1.0", pair("CONAN-2026-0003", "medium")),
        ("libz 1.1", none.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut got = BTreeMap::new();
    for repo in ["gomods", "debs", "recipes"] {
        got.extend(advisories(&server.public, &auth, &format!("repository={repo}"))?);
    }
    assert_eq!(got, want);
    // The score and aliases come along.
    let go =
        admin_json(&server.public, &auth, "GET", "/service/rest/v1/search?repository=gomods&version=v1.0.0", None)?;
    assert_eq!(go["items"][0]["advisories"][0]["score"], 9.8, "{go}");
    assert_eq!(go["items"][0]["advisories"][0]["aliases"], json!(["CVE-2026-0001"]), "{go}");
    // "Components with advisories of severity ≥ high".
    let high = advisories(&server.public, &auth, "severity=high")?;
    assert_eq!(high.keys().collect::<Vec<_>>(), ["example.com/vuln v1.0.0", "libvuln1 1.5-1", "vulnpkg 1.0-1"]);
    let (s, text) = status_of(
        ureq::get(&format!("{}/service/rest/v1/search?severity=severe", server.public))
            .set("Authorization", &auth)
            .call(),
    )?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("severity \\\"severe\\\": one of low, medium, high, critical"), "{text}");

    // The same file again: nothing changes.
    let (code, out, _) = common::process::run_to_end(dir.path(), &["vulnerabilities", "import", &path], &env)?;
    assert_eq!(code, 0);
    assert!(out.contains("7 advisories read: 0 new or changed"), "{out}");

    // A malformed file: refused with the record that failed; nothing of it is kept (not even
    // the good record before it).
    let bad = json!([
        {"id": "GO-2026-0001", "modified": "2026-02-01T00:00:00Z", "summary": "Changed",
         "affected": [{"package": {"ecosystem": "Go", "name": "example.com/vuln"},
            "ranges": [{"type": "SEMVER", "events": [{"introduced": "0"}, {"fixed": "1.3.0"}]}]}]},
        {"id": "BAD-1", "modified": "2026-02-01T00:00:00Z",
         "affected": [{"package": {"ecosystem": "Go", "name": "example.com/vuln"},
            "ranges": [{"type": "NUMERIC", "events": [{"introduced": "0"}]}]}]}
    ]);
    let bad_file = work.path().join("bad.json");
    let bad_path = bad_file.display().to_string();
    let (code, out, err) = import_file(dir.path(), &env, &bad_file, &bad)?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!(
            "{bad_path}: record 2 of 2: BAD-1: Go/example.com/vuln: range type \"NUMERIC\" (OSV has SEMVER, ECOSYSTEM, GIT); nothing was imported"
        )),
        "{err}"
    );
    let again = advisories(&server.public, &auth, "repository=gomods")?;
    assert_eq!(again.get("example.com/vuln v1.2.0"), Some(&none), "the previous data is kept");
    let not_json = work.path().join("not.json");
    std::fs::write(&not_json, "{\"id\": ")?;
    let not_path = not_json.display().to_string();
    let (code, _, err) = common::process::run_to_end(dir.path(), &["vulnerabilities", "import", &not_path], &env)?;
    assert_ne!(code, 0);
    assert!(err.contains(&format!("{not_path} is not OSV JSON: ")), "{err}");

    // From a URL, a zip of record files as osv.dev publishes them: a newer GO-2026-0001 (fixed
    // in 1.3.0) replaces the one held.
    let served = work.path().join("served");
    std::fs::create_dir_all(&served)?;
    let mut newer = records();
    newer[0]["modified"] = json!("2026-03-01T00:00:00Z");
    newer[0]["affected"][0]["ranges"][0]["events"][1] = json!({"fixed": "1.3.0"});
    let zip = served.join("all.zip");
    let script = "import json, sys, zipfile\nrecords = json.load(open(sys.argv[1]))\nwith zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as z:\n    for r in records:\n        z.writestr(r['id'] + '.json', json.dumps(r))\n";
    let list = work.path().join("newer.json");
    std::fs::write(&list, newer.to_string())?;
    let made = std::process::Command::new("python3").args(["-c", script]).arg(&list).arg(&zip).status()?;
    anyhow::ensure!(made.success(), "python3 zipfile");
    let web = crate::import::StaticServer::start(&served, "all.zip")?;
    let from = format!("{}all.zip", web.url);
    let (code, out, err) = common::process::run_to_end(dir.path(), &["vulnerabilities", "import", &from], &env)?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("7 advisories read: 1 new or changed"), "{out}");
    assert!(out.trim().ends_with("; 2 components affected by them"), "{out}");
    // Running servers see the import within 2 s (it moved the watermark they poll).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut now = advisories(&server.public, &auth, "repository=gomods")?;
    while now.get("example.com/vuln v1.2.0") != Some(&pair("GO-2026-0001", "critical"))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
        now = advisories(&server.public, &auth, "repository=gomods")?;
    }
    assert_eq!(now.get("example.com/vuln v1.2.0"), Some(&pair("GO-2026-0001", "critical")), "{now:?}");
    let cut = work.path().join("cut.zip");
    let bytes = std::fs::read(&zip)?;
    std::fs::write(&cut, &bytes[..bytes.len() - 30])?;
    let cut_path = cut.display().to_string();
    let (code, _, err) = common::process::run_to_end(dir.path(), &["vulnerabilities", "import", &cut_path], &env)?;
    assert_ne!(code, 0);
    assert!(err.contains(&format!("{cut_path}: not a zip file: no end-of-central-directory record")), "{err}");
    // The refused zip changed nothing.
    let now = advisories(&server.public, &auth, "repository=gomods")?;
    assert_eq!(now.get("example.com/vuln v1.2.0"), Some(&pair("GO-2026-0001", "critical")), "{now:?}");
    Ok(())
}

/// `vulnerabilities.sources`: the worker imports them at start and again every
/// `vulnerabilities.refresh_secs`, so a record the source adds is matched without a command.
#[test]
fn the_worker_refreshes_the_configured_sources() -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    let served = work.path().join("served");
    std::fs::create_dir_all(&served)?;
    let first = records();
    let mut at_start = first[0].clone();
    at_start["id"] = json!("GO-2026-0008");
    at_start["affected"][0]["ranges"][0]["events"] = json!([{"introduced": "1.2.0"}, {"fixed": "1.2.9"}]);
    std::fs::write(served.join("all.json"), json!([at_start]).to_string())?;
    let web = crate::import::StaticServer::start(&served, "all.json")?;
    let sources = format!("[\"{}all.json\"]", web.url);
    let dir = tempfile::tempdir()?;
    let server = common::process::start_on(
        dir.path(),
        None,
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_VULNERABILITIES__SOURCES", &sources),
            ("PACKYARD_VULNERABILITIES__REFRESH_SECS", "1"),
        ],
    )?;
    let auth = basic(PW);
    let body = json!({"name": "gomods", "format": "go", "type": "hosted"});
    admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/vuln", "v1.2.5", "x", 0)?;
    let url = format!("{}/repository/gomods/example.com/vuln/@v/v1.2.5.zip", server.public);
    let (s, text) = status_of(ureq::put(&url).set("Authorization", &auth).send_bytes(&zip))?;
    anyhow::ensure!(s == 201, "{s} {text}");
    let wait_for = |want: Vec<(String, String)>| -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let got = advisories(&server.public, &auth, "repository=gomods")?;
            if got.get("example.com/vuln v1.2.5") == Some(&want) {
                return Ok(());
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{got:?}, not {want:?}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    // Imported at start.
    wait_for(pair("GO-2026-0008", "critical"))?;
    let mut later = first[0].clone();
    later["id"] = json!("GO-2026-0009");
    later["affected"][0]["ranges"][0]["events"] = json!([{"introduced": "1.2.4"}, {"fixed": "1.2.6"}]);
    std::fs::write(served.join("all.json"), json!([at_start, later]).to_string())?;
    // And again after refresh_secs.
    let mut both = pair("GO-2026-0008", "critical");
    both.extend(pair("GO-2026-0009", "critical"));
    wait_for(both)?;
    Ok(())
}

/// The Go vulnerability database a Go repository serves under `vulndb/`: the real `govulncheck`
/// (Debian's, which reads the layout before mid-2023) reports the imported advisory for a
/// module whose code calls the vulnerable function of the version it requires, fetched through
/// the same repository; the current layout's files answer too.
#[test]
fn govulncheck_reads_the_go_vulnerability_database() -> anyhow::Result<()> {
    anyhow::ensure!(
        std::process::Command::new("govulncheck").arg("-h").output().is_ok(),
        "no govulncheck (scripts/test.sh installs it)"
    );
    let dir = tempfile::tempdir()?;
    let server = common::process::start_on(dir.path(), None, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    let auth = basic(PW);
    let body = json!({"name": "gomods", "format": "go", "type": "hosted"});
    admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    for v in ["v1.0.0", "v1.2.0"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/vuln", v, v, 0)?;
        let url = format!("{}/repository/gomods/example.com/vuln/@v/{v}.zip", server.public);
        let (s, text) = status_of(ureq::put(&url).set("Authorization", &auth).send_bytes(&zip))?;
        anyhow::ensure!(s == 201, "{v}: {s} {text}");
    }
    let mut record = records()[0].clone();
    record["affected"][0]["ecosystem_specific"] =
        json!({"imports": [{"path": "example.com/vuln", "symbols": ["Message"]}]});
    let work = tempfile::tempdir()?;
    let file = work.path().join("go.json");
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    let (code, out, err) = import_file(dir.path(), &env, &file, &json!([record]))?;
    assert_eq!(code, 0, "{out}{err}");

    let db = format!("{}/repository/gomods/vulndb", server.public);
    // Both layouts.
    let get = |p: &str| -> anyhow::Result<Value> { Ok(ureq::get(&format!("{db}/{p}")).call()?.into_json()?) };
    assert_eq!(get("index.json")?["example.com/vuln"], "2026-01-01T00:00:00Z");
    assert_eq!(get("example.com/vuln.json")?[0]["id"], "GO-2026-0001");
    assert_eq!(get("ID/index.json")?, json!(["GO-2026-0001"]));
    assert_eq!(get("aliases.json")?, json!({"CVE-2026-0001": ["GO-2026-0001"]}));
    assert_eq!(get("index/db.json")?, json!({"modified": "2026-01-01T00:00:00Z"}));
    assert_eq!(
        get("index/modules.json")?,
        json!([{"path": "example.com/vuln", "vulns": [{"id": "GO-2026-0001", "modified": "2026-01-01T00:00:00Z", "fixed": "1.2.0"}]}])
    );
    assert_eq!(get("ID/GO-2026-0001.json")?, record);
    let gz = ureq::get(&format!("{db}/ID/GO-2026-0001.json.gz")).call()?;
    let mut packed = Vec::new();
    std::io::Read::read_to_end(&mut gz.into_reader(), &mut packed)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&packed[..]), &mut text)?;
    assert_eq!(serde_json::from_str::<Value>(&text)?, record);
    let (s, _) = status_of(ureq::get(&format!("{db}/ID/GO-2099-9999.json")).call())?;
    assert_eq!(s, 404);

    // A module that calls the vulnerable function of v1.0.0.
    let app = work.path().join("app");
    std::fs::create_dir_all(&app)?;
    std::fs::write(app.join("go.mod"), "module example.com/app\n\ngo 1.19\n\nrequire example.com/vuln v1.0.0\n")?;
    std::fs::write(
        app.join("main.go"),
        "package main\n\nimport \"example.com/vuln\"\n\nfunc main() { println(vuln.Message()) }\n",
    )?;
    let home = work.path().join("home");
    let proxy = format!("{}/repository/gomods", server.public);
    let o = common::golang::command(&app, &home, &proxy, &["mod", "download", "example.com/vuln"]).output()?;
    anyhow::ensure!(o.status.success(), "go mod download: {}", String::from_utf8_lossy(&o.stderr));
    let o = common::golang::tool("govulncheck", &app, &home, &proxy, &["./..."]).env("GOVULNDB", &db).output()?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stdout.contains("GO-2026-0001")
            && stdout.contains("Found in: example.com/vuln@v1.0.0")
            && stdout.contains("Fixed in: example.com/vuln@v1.2.0"),
        "{stdout}{stderr}"
    );
    assert!(!o.status.success(), "govulncheck fails the build that calls a vulnerable function: {stdout}{stderr}");
    Ok(())
}

/// `conan audit` with Packyard as its private provider (the repository's URL): the real client
/// lists the imported advisory of a reference, and none for a fixed version.
#[test]
fn conan_audit_lists_the_imported_advisories() -> anyhow::Result<()> {
    anyhow::ensure!(common::process::available("conan", "--version"), "no conan (scripts/test.sh installs it)");
    let dir = tempfile::tempdir()?;
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    let server = common::process::start_on(dir.path(), None, &env)?;
    let auth = basic(PW);
    let body = json!({"name": "recipes", "format": "conan", "type": "hosted"});
    admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    let work = tempfile::tempdir()?;
    let (code, out, err) = import_file(dir.path(), &env, &work.path().join("osv.json"), &records())?;
    assert_eq!(code, 0, "{out}{err}");
    let url = format!("{}/repository/recipes/", server.public);
    let token = ureq::get(&format!("{url}v2/users/authenticate")).set("Authorization", &auth).call()?.into_string()?;
    let home = tempfile::tempdir()?;
    let conan = |args: &[&str]| -> anyhow::Result<String> {
        let o = std::process::Command::new("conan").args(args).env("CONAN_HOME", home.path()).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        anyhow::ensure!(o.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    conan(&["audit", "provider", "add", "packyard", "--url", &url, "--type", "private", "--token", token.trim()])?;
    let out = conan(&["audit", "list", "libz/1.0", "-p", "packyard"])?;
    assert!(out.contains("CONAN-2026-0003") && out.contains("Medium"), "{out}");
    let out = conan(&["audit", "list", "libz/1.1", "-p", "packyard"])?;
    assert!(!out.contains("CONAN-2026-0003"), "{out}");
    Ok(())
}
