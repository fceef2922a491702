//! Starts the built `packyard-api` binary as a user would: no configuration, an empty directory.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{basic, run_to_end, start, status_of};

use packyard_store::db::Backend;

#[test]
fn embedded_default_from_an_empty_directory() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[])?;
    server.wait_ready()?;

    let pw_file = dir.path().join("data/admin.password");
    let password = std::fs::read_to_string(&pw_file)?.trim().to_string();
    assert_eq!(password.len(), 24);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&pw_file)?.permissions().mode() & 0o777, 0o600);
        // The database holds the password hashes and the sealed keys: private like the secret.
        for f in ["packyard.db", "packyard.db-wal", "packyard.db-shm", "secret"] {
            let mode = std::fs::metadata(dir.path().join("data").join(f))?.permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "data/{f} is {mode:o}");
        }
    }
    assert!(dir.path().join("data/packyard.db").is_file());
    assert!(dir.path().join("data/blobs").is_dir());

    let (s, body) = status_of(ureq::get(&format!("{}/healthz", server.management)).call())?;
    assert_eq!((s, body.as_str()), (200, "ok\n"));

    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(&password))
            .send_json(Repo::hosted("debs", Format::Apt)),
    )?;
    assert_eq!(s, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(created["name"], "debs");

    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(&password)).call(),
    )?;
    assert_eq!(s, 200);
    let listed: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["name"], "debs");
    assert_eq!(listed[0]["apt"]["distribution"], "stable");

    let (s, _) = status_of(ureq::get(&format!("{}/api/v1/repositories", server.public)).call())?;
    assert_eq!(s, 401);

    let (s, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert_eq!(s, 200);
    for line in [
        r#"packyard_http_requests_total{format="",method="POST",repository="",status="201"} 1"#,
        r#"packyard_http_requests_total{format="",method="GET",repository="",status="200"} 1"#,
        r#"packyard_http_requests_total{format="",method="GET",repository="",status="401"} 1"#,
        r#"packyard_http_request_duration_seconds_count{format="",method="POST",repository=""} 1"#,
        r#"packyard_db_queries_total{op="repositories.insert"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "missing {line:?} in\n{metrics}");
    }

    let status = server.terminate()?;
    assert!(status.success(), "exit status after SIGTERM: {status}");
    Ok(())
}

#[test]
fn restart_keeps_data_and_the_first_password() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", "first-password")];
    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    assert!(!dir.path().join("data/admin.password").exists(), "a configured password is not written out");
    let (s, _) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic("first-password"))
            .send_json(Repo::hosted("mods", Format::Go)),
    )?;
    assert_eq!(s, 201);
    assert!(server.terminate()?.success());

    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "second-password")])?;
    server.wait_ready()?;
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/mods", server.public))
            .set("Authorization", &basic("first-password"))
            .call(),
    )?;
    assert_eq!(s, 200, "{body}");
    let (s, _) = status_of(
        ureq::get(&format!("{}/api/v1/repositories/mods", server.public))
            .set("Authorization", &basic("second-password"))
            .call(),
    )?;
    assert_eq!(s, 401, "the bootstrap password applies on first start only");
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn sigterm_lets_in_flight_requests_finish() -> anyhow::Result<()> {
    use std::io::Write;
    use std::net::TcpStream;
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw")])?;
    server.wait_ready()?;
    let addr = server.public.trim_start_matches("http://").to_string();
    let body = Repo::hosted("late", Format::Go).0.to_string();
    let (first, rest) = body.split_at(10);
    let mut conn = TcpStream::connect(&addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        conn,
        "POST /api/v1/repositories HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{first}",
        basic("pw"),
        body.len()
    )?;
    conn.flush()?;
    std::thread::sleep(Duration::from_millis(300));
    let pid = server.child.id().to_string();
    anyhow::ensure!(Command::new("kill").args(["-TERM", &pid]).status()?.success());
    std::thread::sleep(Duration::from_millis(500));
    // No new connections are served once shutdown has begun.
    let refused = match TcpStream::connect(&addr) {
        Err(_) => true,
        Ok(mut c) => {
            c.set_read_timeout(Some(Duration::from_secs(2)))?;
            let _ = write!(c, "GET /api/v1/openapi.json HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            let mut buf = [0u8; 16];
            !matches!(c.read(&mut buf), Ok(n) if n > 0)
        }
    };
    assert!(refused, "a new request was served after SIGTERM");
    // The request that was in flight completes.
    conn.write_all(rest.as_bytes())?;
    let mut response = String::new();
    conn.read_to_string(&mut response)?;
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = server.child.try_wait()? {
            break s;
        }
        anyhow::ensure!(Instant::now() < deadline, "server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    Ok(())
}

#[test]
fn bad_configuration_stops_startup_naming_the_key() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (code, _, err) = run_to_end(dir.path(), &[], &[("PACKYARD_SERVER__BINDD", "127.0.0.1:1")])?;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown key `server.bindd`"), "{err}");
    let (code, _, err) = run_to_end(dir.path(), &[], &[("PACKYARD_SERVER__MAX_UPLOAD_BYTES", "a lot")])?;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad value for key `server.max_upload_bytes`"), "{err}");
    std::fs::write(dir.path().join("packyard.toml"), "[database]\nurll = \"sqlite://x.db\"\n")?;
    let (code, _, err) = run_to_end(dir.path(), &[], &[])?;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown key `database.url`") || err.contains("unknown key `database.urll`"), "{err}");
    assert!(err.contains("packyard.toml"), "names the file: {err}");
    assert!(!dir.path().join("data").exists(), "nothing was created");
    Ok(())
}

#[test]
fn config_show_and_migrate() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("packyard.toml"), "[worker]\npoll_ms = 250\n")?;
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", "hunter2-secret"), ("PACKYARD_LOG__FORMAT", "json")];
    let (code, out, err) = run_to_end(dir.path(), &["config", "show"], &env)?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("worker.poll_ms = 250  # TOML file"), "{out}");
    assert!(out.contains("log.format = \"json\"  # environment PACKYARD_LOG__FORMAT"), "{out}");
    assert!(out.contains("security.admin_password = \"********\"  # environment"), "{out}");
    assert!(out.contains("database.url = \"sqlite://data/packyard.db\"  # default"), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    let (code, out, err) = run_to_end(dir.path(), &["migrate"], &[])?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "migrations applied (sqlite)");
    assert!(dir.path().join("data/packyard.db").is_file());
    Ok(())
}

/// A lost admin password: `packyard-api admin reset-password admin` beside the running server
/// prints a new one; the server takes it (and refuses the old) within the watermark TTL.
#[test]
fn reset_password_of_a_lost_admin() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[])?;
    server.wait_ready()?;
    let old = std::fs::read_to_string(dir.path().join("data/admin.password"))?.trim().to_string();
    let repos = format!("{}/api/v1/repositories", server.public);
    let (s, _) = status_of(ureq::get(&repos).set("Authorization", &basic(&old)).call())?;
    assert_eq!(s, 200);

    let (code, out, err) = run_to_end(dir.path(), &["admin", "reset-password", "admin"], &[("USER", "ops")])?;
    assert_eq!(code, 0, "{err}");
    let new = out.trim().to_string();
    assert_eq!((new.len(), out.lines().count()), (24, 1), "the password alone on stdout: {out:?}");
    assert!(err.contains("the password of admin was reset"), "{err}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (with_old, _) = status_of(ureq::get(&repos).set("Authorization", &basic(&old)).call())?;
        let (with_new, _) = status_of(ureq::get(&repos).set("Authorization", &basic(&new)).call())?;
        if (with_old, with_new) == (401, 200) {
            break;
        }
        assert!(Instant::now() < deadline, "old password {with_old}, new {with_new} after 10 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/audit?action=user.password_reset", server.public))
            .set("Authorization", &basic(&new))
            .call(),
    )?;
    assert_eq!(s, 200, "{body}");
    let audit: serde_json::Value = serde_json::from_str(&body)?;
    assert_eq!(audit["entries"][0]["actor"], "ops (command line)", "{body}");
    assert_eq!(audit["entries"][0]["target"], "admin", "{body}");

    let (code, out, err) = run_to_end(dir.path(), &["admin", "reset-password", "nobody"], &[])?;
    assert_ne!(code, 0);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no local user \"nobody\""), "{err}");
    Ok(())
}

fn external_database(backend: Backend) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some((url, dir)) = rt.block_on(packyard_store::testing::create_database(backend))? else {
        eprintln!("skipped: no {} server configured", backend.as_str());
        return Ok(());
    };
    let env = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "ext-admin"),
        ("PACKYARD_LOG__FORMAT", "json"),
    ];
    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic("ext-admin"))
            .set("X-Request-Id", "test-req-42")
            .send_json(Repo::hosted("conans", Format::Conan)),
    )?;
    assert_eq!(s, 201, "{body}");
    assert!(!dir.path().join("data/packyard.db").exists(), "no SQLite file when a server database is configured");
    let logs = server.stderr.clone();
    assert!(server.terminate()?.success());
    // JSON logs carry the request id on the request's lines.
    let logs = logs.lock().map(|s| s.clone()).unwrap_or_default();
    let line = logs
        .lines()
        .find(|l| l.contains("\"status\":201"))
        .ok_or_else(|| anyhow::anyhow!("no access log line for the 201 in\n{logs}"))?;
    let v: serde_json::Value = serde_json::from_str(line)?;
    assert_eq!(v["span"]["request_id"], "test-req-42", "{line}");
    assert_eq!(v["span"]["path"], "/api/v1/repositories", "{line}");
    Ok(())
}

#[test]
fn works_on_postgres() -> anyhow::Result<()> {
    external_database(Backend::Postgres)
}

#[test]
fn works_on_mysql() -> anyhow::Result<()> {
    external_database(Backend::MySql)
}

/// A token revoked through one replica is refused by another replica sharing the database
/// within the watermark TTL (1 s by default; the promise is 2 s).
fn revocation_reaches_another_replica(backend: Backend) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some((url, dir)) = rt.block_on(packyard_store::testing::create_database(backend))? else {
        eprintln!("skipped: no {} server configured", backend.as_str());
        return Ok(());
    };
    let env = [
        ("PACKYARD_DATABASE__URL", url.as_str()),
        ("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", "replica-admin"),
    ];
    let a = start(dir.path(), &env)?;
    a.wait_ready()?;
    let b = start(dir.path(), &env)?;
    b.wait_ready()?;

    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/tokens", a.public))
            .set("Authorization", &basic("replica-admin"))
            .send_json(serde_json::json!({"name": "to-revoke"})),
    )?;
    assert_eq!(s, 201, "{body}");
    let created: serde_json::Value = serde_json::from_str(&body)?;
    let token = created["token"].as_str().unwrap_or_default().to_string();
    let id = created["id"].as_str().unwrap_or_default().to_string();
    let on_b = || {
        status_of(
            ureq::get(&format!("{}/api/v1/repositories", b.public))
                .set("Authorization", &format!("Bearer {token}"))
                .call(),
        )
    };
    assert_eq!(on_b()?.0, 200, "the token works on the other replica");
    assert_eq!(on_b()?.0, 200, "and keeps working from its cache");

    let (s, body) = status_of(
        ureq::delete(&format!("{}/api/v1/tokens/{id}", a.public)).set("Authorization", &basic("replica-admin")).call(),
    )?;
    assert_eq!(s, 204, "{body}");
    let revoked_at = Instant::now();
    let elapsed = loop {
        let (s, _) = on_b()?;
        if s == 401 {
            break revoked_at.elapsed();
        }
        assert_eq!(s, 200);
        assert!(revoked_at.elapsed() < Duration::from_secs(5), "replica B still accepts the revoked token after 5 s");
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("{}: revoked token refused by the second replica after {} ms", backend.as_str(), elapsed.as_millis());
    assert!(elapsed <= Duration::from_millis(2_000), "took {} ms, more than the 2 s promise", elapsed.as_millis());
    assert!(a.terminate()?.success());
    assert!(b.terminate()?.success());
    Ok(())
}

#[test]
fn revocation_reaches_another_replica_sqlite() -> anyhow::Result<()> {
    revocation_reaches_another_replica(Backend::Sqlite)
}

#[test]
fn revocation_reaches_another_replica_postgres() -> anyhow::Result<()> {
    revocation_reaches_another_replica(Backend::Postgres)
}

#[test]
fn revocation_reaches_another_replica_mysql() -> anyhow::Result<()> {
    revocation_reaches_another_replica(Backend::MySql)
}

/// The embedded default publishes by itself: the in-process worker picks up a write at once.
#[test]
fn the_embedded_worker_publishes() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_DEBUG__TEST_FORMAT", "true")])?;
    server.wait_ready()?;
    let (s, _) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic("pw"))
            .send_json(Repo::hosted("t", Format::Sample)),
    )?;
    assert_eq!(s, 201);
    let (s, body) = status_of(ureq::get(&format!("{}/repository/t/_test/main/count.txt", server.public)).call())?;
    assert_eq!((s, body.as_str()), (404, "not found: _test/main/count.txt in repository t\n"));
    for i in 0..5 {
        let (s, body) = status_of(
            ureq::put(&format!("{}/repository/t/_test/main/e{i}", server.public))
                .set("Authorization", &basic("pw"))
                .send_string("x"),
        )?;
        assert_eq!(s, 201, "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, body) = status_of(ureq::get(&format!("{}/repository/t/_test/main/count.txt", server.public)).call())?;
        if (s, body.as_str()) == (200, "5\n") {
            break;
        }
        assert!(Instant::now() < deadline, "not published: {s} {body}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A build that claimed revision 4 may already list the fifth row (written after the claim):
    // the count is there before revision 5 is recorded published.
    let (body, v) = loop {
        let (s, body) = status_of(
            ureq::get(&format!("{}/api/v1/repositories/t/status", server.public))
                .set("Authorization", &basic("pw"))
                .call(),
        )?;
        assert_eq!(s, 200);
        let v: serde_json::Value = serde_json::from_str(&body)?;
        if v["units"][0]["published_revision"] == 5 || Instant::now() >= deadline {
            break (body, v);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(v["units"][0]["published_revision"], 5, "{body}");
    assert_eq!(v["units"][0]["pending"], false, "{body}");
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories/t/rebuild", server.public))
            .set("Authorization", &basic("pw"))
            .call(),
    )?;
    assert_eq!((s, body.as_str()), (202, r#"{"repository":"t","units":1}"#));
    let (_, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    for name in
        ["packyard_outbox_backlog", "packyard_publication_lag_seconds", "packyard_publication_duration_seconds_count"]
    {
        assert!(metrics.contains(name), "{name} missing");
    }
    assert!(server.terminate()?.success());
    Ok(())
}

/// `worker.concurrency` units build at once, and a large build does not hold up a small one:
/// while two slow units (5 s builds) wait, a quick unit's change is published at once; the last
/// free slot is kept from a second slow build while the other slot runs one.
#[test]
fn builds_run_side_by_side_and_a_slow_one_holds_up_no_quick_one() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
            ("PACKYARD_DEBUG__TEST_FORMAT", "true"),
            ("PACKYARD_DEBUG__BUILD_DELAY_MS", "5000"),
            ("PACKYARD_WORKER__CONCURRENCY", "2"),
        ],
    )?;
    server.wait_ready()?;
    let admin = basic("pw");
    let (s, _) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &admin)
            .send_json(Repo::hosted("t", Format::Sample)),
    )?;
    assert_eq!(s, 201);
    let put = |unit: &str, name: &str| -> anyhow::Result<()> {
        let (s, body) = status_of(
            ureq::put(&format!("{}/repository/t/_test/{unit}/{name}", server.public))
                .set("Authorization", &admin)
                .send_string("x"),
        )?;
        anyhow::ensure!(s == 201, "{s} {body}");
        Ok(())
    };
    // (unit, leased, pending) of every unit.
    let status = || -> anyhow::Result<Vec<(String, bool, bool)>> {
        let (s, body) = status_of(
            ureq::get(&format!("{}/api/v1/repositories/t/status", server.public)).set("Authorization", &admin).call(),
        )?;
        anyhow::ensure!(s == 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let units = v["units"].as_array().cloned().unwrap_or_default();
        Ok(units
            .iter()
            .map(|u| {
                (u["unit"].as_str().unwrap_or_default().to_string(), u["leased_by"].is_string(), u["pending"] == true)
            })
            .collect())
    };
    let count = |unit: &str| -> anyhow::Result<(u16, String)> {
        status_of(ureq::get(&format!("{}/repository/t/_test/{unit}/count.txt", server.public)).call())
    };
    // Two slow units: both are built at once (neither has a build time yet).
    put("slow-a", "1")?;
    put("slow-b", "1")?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let units = status()?;
        if units.iter().filter(|(u, leased, _)| u.starts_with("slow-") && *leased).count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "two builds never ran at once: {units:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    for unit in ["slow-a", "slow-b"] {
        while count(unit)? != (200, "1\n".to_string()) {
            assert!(Instant::now() < deadline + Duration::from_secs(10), "{unit} never published");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Now both are known to be slow. Changed again, one builds and the other waits for it: the
    // last slot stays free for a quick unit, whose change is published well within a slow build.
    put("slow-a", "2")?;
    put("slow-b", "2")?;
    std::thread::sleep(Duration::from_millis(300));
    let units = status()?;
    let leased: Vec<&str> = units.iter().filter(|u| u.1).map(|u| u.0.as_str()).collect();
    assert_eq!(leased, ["slow-a"], "the oldest slow unit builds, the other waits: {units:?}");
    let started = Instant::now();
    put("quick", "1")?;
    while count("quick")? != (200, "1\n".to_string()) {
        assert!(started.elapsed() < Duration::from_secs(2), "the quick unit waited behind a slow build");
        std::thread::sleep(Duration::from_millis(10));
    }
    let quick_ms = started.elapsed().as_millis();
    let units = status()?;
    assert!(units.iter().any(|u| u.0 == "slow-a" && u.1), "slow-a still building: {units:?}");
    assert!(units.iter().any(|u| u.0 == "slow-b" && u.2 && !u.1), "slow-b still waiting: {units:?}");
    // The slow ones finish in turn.
    for unit in ["slow-a", "slow-b"] {
        while count(unit)? != (200, "2\n".to_string()) {
            assert!(started.elapsed() < Duration::from_secs(30), "{unit} never published its second change");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!("a quick unit published in {quick_ms} ms beside a 5 s build");
    assert!(server.terminate()?.success());
    Ok(())
}
