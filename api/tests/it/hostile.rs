//! Hostile input against a running server: the proxy SSRF guard and its allowlist, slow
//! clients.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::io::Write;
use std::time::{Duration, Instant};

use common::process::{basic, start, status_of, text_upstream};

fn create(public: &str, body: impl Into<serde_json::Value>) -> anyhow::Result<()> {
    common::process::create_repository(public, &basic("pw"), body)
}

#[test]
fn proxy_upstreams_on_private_addresses_need_the_allowlist() -> anyhow::Result<()> {
    let (upstream, _stop) = text_upstream("v1.0.0\n")?;
    let port = upstream.rsplit(':').next().unwrap_or_default().to_string();
    let dir = tempfile::tempdir()?;
    // Loopback's one address is allowed; the rest of 127.0.0.0/8 and every other private
    // network stay closed.
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)],
    )?;
    server.wait_ready()?;
    for (name, host) in [
        ("allowed-ip", "127.0.0.1"),
        ("other-loopback", "127.0.0.2"),
        ("metadata", "169.254.169.254"),
        ("lan", "10.0.0.1"),
    ] {
        create(&server.public, Repo::proxy(name, Format::Go, &format!("http://{host}:{port}/")))?;
    }
    let list =
        |name: &str| status_of(ureq::get(&format!("{}/repository/{name}/example.com/m/@v/list", server.public)).call());
    assert_eq!(list("allowed-ip")?, (200, "v1.0.0\n".to_string()));
    for refused in ["other-loopback", "metadata", "lan"] {
        let (s, text) = list(refused)?;
        assert_eq!(s, 502, "{refused}: {text}");
        assert!(text.contains("loopback, private or link-local"), "{refused}: {text}");
        assert!(text.contains("proxy.allowed_networks"), "{refused}: {text}");
    }
    // A malformed allowlist is a startup error that names the key.
    let bad = common::process::run_to_end(
        dir.path(),
        &["config", "show"],
        &[("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["10.0.0.0/33"]"#)],
    )?;
    assert_ne!(bad.0, 0);
    assert!(bad.2.contains("proxy.allowed_networks") && bad.2.contains("10.0.0.0/33"), "{}", bad.2);
    Ok(())
}

/// Every file below `dir`, sorted.
fn files_under(dir: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let p = e?.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads what the server sends until it closes the connection (or `limit` passes).
fn read_until_closed(conn: &mut std::net::TcpStream, limit: Duration) -> anyhow::Result<(String, Duration)> {
    let start = Instant::now();
    conn.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match std::io::Read::read(conn, &mut buf) {
            Ok(0) => return Ok((String::from_utf8_lossy(&got).to_string(), start.elapsed())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Ok((String::from_utf8_lossy(&got).to_string(), start.elapsed()))
            }
            Err(e) => return Err(e.into()),
        }
        anyhow::ensure!(start.elapsed() < limit, "still open after {limit:?}; got {:?}", String::from_utf8_lossy(&got));
    }
}

#[test]
fn slow_clients_are_cut_off_and_hold_nothing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
            ("PACKYARD_SERVER__HEADER_TIMEOUT_MS", "1000"),
            ("PACKYARD_SERVER__BODY_IDLE_TIMEOUT_MS", "1000"),
        ],
    )?;
    server.wait_ready()?;
    create(&server.public, Repo::hosted("debs", Format::Apt))?;
    let addr = server.public.trim_start_matches("http://").to_string();

    // Slowloris: 64 connections that trickle a request head one byte at a time.
    let mut lorises = Vec::new();
    for _ in 0..64 {
        let mut c = std::net::TcpStream::connect(&addr)?;
        c.write_all(b"GET /api/v1/repositories HTTP/1.1\r\nHost: x\r\nX-Slow: ")?;
        lorises.push(c);
    }
    let trickle = std::thread::spawn({
        let mut conns: Vec<_> = lorises.iter().map(|c| c.try_clone()).collect::<Result<_, _>>()?;
        move || {
            for _ in 0..30 {
                for c in &mut conns {
                    let _ = c.write_all(b"a");
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    // Meanwhile the server answers everyone else at once.
    let started = Instant::now();
    let (s, _) = status_of(ureq::get(&format!("{}/api/v1/openapi.json", server.public)).call())?;
    assert_eq!(s, 200);
    assert!(started.elapsed() < Duration::from_millis(900), "a normal request waited {:?}", started.elapsed());
    // Each slow connection is answered 408 and closed soon after the header timeout.
    for c in &mut lorises {
        let (answer, after) = read_until_closed(c, Duration::from_secs(3))?;
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(after < Duration::from_secs(3), "closed after {after:?}");
    }
    let _ = trickle.join();

    // A slow body: the head is complete, the body stops after a few bytes.
    let blobs = dir.path().join("data/blobs");
    let before = files_under(&blobs.join("sha256"))?;
    let mut c = std::net::TcpStream::connect(&addr)?;
    write!(
        c,
        "POST /repository/debs/ HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nContent-Length: 1000000\r\n\
         Content-Type: application/vnd.debian.binary-package\r\n\r\n!<arch>\n",
        basic("pw")
    )?;
    let (answer, after) = read_until_closed(&mut c, Duration::from_secs(10))?;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the upload stalled: no data for 1000 ms after 8 bytes"), "{answer}");
    assert!(after >= Duration::from_millis(900), "answered after {after:?}");
    // Nothing of it is left: no temporary, no new blob.
    assert_eq!(std::fs::read_dir(blobs.join("tmp"))?.count(), 0);
    assert_eq!(files_under(&blobs.join("sha256"))?, before);
    let (s, _) = status_of(ureq::get(&format!("{}/api/v1/openapi.json", server.public)).call())?;
    assert_eq!(s, 200);
    Ok(())
}

#[test]
fn credentials_never_reach_logs_errors_or_metrics() -> anyhow::Result<()> {
    // Distinct secrets, so that finding one anywhere is certain to be a leak.
    let secret = |what: &str| format!("{what}{}", hex::encode(rand::random::<[u8; 12]>()));
    let (upstream_pw, admin_pw, alice_pw, wrong_pw) =
        (secret("upstreampw"), secret("adminpw"), secret("alicepw"), secret("wrongpw"));
    let bogus_token = format!("pky_{}_{}", hex::encode([7u8; 6]), secret("bogus"));

    // An upstream that wants credentials, and the server under test proxying it with them.
    let up_dir = tempfile::tempdir()?;
    let upstream =
        start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", &upstream_pw), ("PACKYARD_LOG__LEVEL", "debug")])?;
    upstream.wait_ready()?;
    common::process::create_repository(
        &upstream.public,
        &common::process::basic(&upstream_pw),
        Repo::hosted("conan-up", Format::Conan).with(serde_json::json!({"anonymous_read": false})),
    )?;

    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", &admin_pw),
            ("PACKYARD_LOG__LEVEL", "debug"),
            ("PACKYARD_LOG__FORMAT", "json"),
            ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
        ],
    )?;
    server.wait_ready()?;
    let admin = common::process::basic(&admin_pw);
    let api = |path: &str| format!("{}{path}", server.public);
    for body in [
        Repo::proxy("conan-proxy", Format::Conan, &format!("{}/repository/conan-up/", upstream.public))
            .with(serde_json::json!({"proxy": {"username": "admin", "password": upstream_pw}})),
        Repo::hosted("conan-local", Format::Conan),
    ] {
        common::process::create_repository(&server.public, &admin, body)?;
    }
    let (s, text) = status_of(
        ureq::post(&api("/api/v1/users"))
            .set("Authorization", &admin)
            .send_json(serde_json::json!({"username": "alice", "password": alice_pw, "roles": ["admin"]})),
    )?;
    assert_eq!(s, 201, "{text}");
    let alice = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("alice:{alice_pw}"))
    );
    let (s, text) = status_of(
        ureq::post(&api("/api/v1/tokens")).set("Authorization", &alice).send_json(serde_json::json!({"name": "ci"})),
    )?;
    assert_eq!(s, 201, "{text}");
    let token: serde_json::Value = serde_json::from_str(&text)?;
    let token = token["token"].as_str().unwrap_or_default().to_string();
    assert!(token.starts_with("pky_"), "{text}");
    // Use everything: the token, a Conan login and its bearer token, the proxy's upstream
    // credentials; and get things wrong: a wrong password, a made-up token, a proxy update.
    let (s, _) =
        status_of(ureq::get(&api("/api/v1/repositories")).set("Authorization", &format!("Bearer {token}")).call())?;
    assert_eq!(s, 200);
    let (s, conan_token) = status_of(
        ureq::get(&api("/repository/conan-local/v2/users/authenticate")).set("Authorization", &alice).call(),
    )?;
    assert_eq!(s, 200, "{conan_token}");
    let (s, _) = status_of(
        ureq::get(&api("/repository/conan-local/v2/users/check_credentials"))
            .set("Authorization", &format!("Bearer {conan_token}"))
            .call(),
    )?;
    assert_eq!(s, 200);
    let (s, text) = status_of(ureq::get(&api("/repository/conan-proxy/v2/conans/search?q=zlib")).call())?;
    assert!(s == 200 || s == 404, "{s} {text}");
    let wrong = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, format!("alice:{wrong_pw}"))
    );
    for auth in [wrong.as_str(), &format!("Bearer {bogus_token}"), &format!("Bearer {conan_token}x")] {
        let (s, text) = status_of(ureq::get(&api("/api/v1/repositories")).set("Authorization", auth).call())?;
        assert_eq!(s, 401, "{text}");
        for leaked in [&wrong_pw, &bogus_token, &alice_pw] {
            assert!(!text.contains(leaked.as_str()), "an error message repeats a credential: {text}");
        }
    }
    let (s, text) = status_of(ureq::get(&api("/api/v1/repositories/conan-proxy")).set("Authorization", &admin).call())?;
    assert_eq!(s, 200);
    assert!(!text.contains(&upstream_pw), "the repository record returns the upstream password: {text}");
    let (_, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    let (_, config) = status_of(ureq::get(&format!("{}/metrics", upstream.management)).call())?;

    // A failing start: the database URL's password and the S3 secret stay out of the error.
    let db_pw = secret("dbpw");
    let s3_secret = secret("s3secret");
    let failed = common::process::run_to_end(
        dir.path(),
        &["migrate"],
        &[
            ("PACKYARD_DATABASE__URL", &format!("postgres://packyard:{db_pw}@127.0.0.1:9/packyard")),
            ("PACKYARD_DATABASE__ACQUIRE_TIMEOUT_MS", "500"),
            ("PACKYARD_SECURITY__SECRET", "a-long-enough-test-secret-for-this"),
            ("PACKYARD_BLOBS__KIND", "s3"),
            ("PACKYARD_BLOBS__S3__BUCKET", "b"),
            ("PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY", &s3_secret),
        ],
    )?;
    assert_ne!(failed.0, 0, "a database on a closed port: {}", failed.2);
    let shown = common::process::run_to_end(
        dir.path(),
        &["config", "show"],
        &[
            ("PACKYARD_DATABASE__URL", &format!("postgres://packyard:{db_pw}@127.0.0.1:9/packyard")),
            ("PACKYARD_SECURITY__SECRET", "a-long-enough-test-secret-for-this"),
            ("PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY", &s3_secret),
        ],
    )?;
    assert_eq!(shown.0, 0, "{}", shown.2);

    let server_log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    let upstream_log = upstream.stderr.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(server_log.lines().count() > 20, "debug logs of the whole run:\n{server_log}");
    let secrets =
        [&upstream_pw, &admin_pw, &alice_pw, &wrong_pw, &bogus_token, &token, &conan_token, &db_pw, &s3_secret];
    for (what, text) in [
        ("the server's log", &server_log),
        ("the upstream's log", &upstream_log),
        ("the server's /metrics", &metrics),
        ("the upstream's /metrics", &config),
        ("a failed start's output", &format!("{}{}", failed.1, failed.2)),
        ("config show", &format!("{}{}", shown.1, shown.2)),
    ] {
        for s in secrets {
            // Tokens are checked by their secret part too (what follows the id).
            let part = s.rsplit('_').next().unwrap_or(s);
            assert!(!text.contains(s.as_str()) && !text.contains(part), "{what} contains a credential ({}…)", &s[..8]);
        }
    }
    Ok(())
}

/// An upstream that keeps a connection open after its answer but closes it when the next
/// request arrives (a keep-alive that ran out just as the proxy reused the connection): the
/// proxy asks again on a new connection, and the client never sees a 502.
#[test]
fn a_closed_keep_alive_connection_is_asked_again() -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let upstream = format!("http://{}/", listener.local_addr()?);
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(conn);
                let mut answered = 0;
                loop {
                    let mut line = String::new();
                    if std::io::BufRead::read_line(&mut reader, &mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut header = String::new();
                    while std::io::BufRead::read_line(&mut reader, &mut header).is_ok_and(|n| n > 2) {
                        header.clear();
                    }
                    if answered == 1 {
                        return; // the second request on this connection: closed unanswered
                    }
                    answered += 1;
                    let body = "v1.0.0\n";
                    let _ = write!(
                        reader.get_mut(),
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}",
                        body.len()
                    );
                }
            });
        }
    });
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)],
    )?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("flaky", Format::Go, &upstream))?;
    // Different modules, so that each is a request upstream on the one pooled connection.
    for module in ["a", "b", "c"] {
        let got =
            status_of(ureq::get(&format!("{}/repository/flaky/example.com/{module}/@v/list", server.public)).call())?;
        assert_eq!(got, (200, "v1.0.0\n".to_string()), "{module}");
    }
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 3);
    Ok(())
}

/// One request with exactly these bytes as its target (clients would normalize `..` away).
fn raw(addr: &str, method: &str, target: &str, auth: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        c,
        "{method} {target} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    c.write_all(body)?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut c, &mut out)?;
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, text))
}

/// Upstream that records the paths it is asked for.
fn recording_upstream() -> anyhow::Result<(String, std::sync::Arc<std::sync::Mutex<Vec<String>>>)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/root/", listener.local_addr()?);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(match conn.try_clone() {
                Ok(c) => c,
                Err(_) => continue,
            });
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut reader, &mut line);
            if let (Some(path), Ok(mut l)) = (line.split(' ').nth(1), log.lock()) {
                l.push(path.to_string());
            }
            let mut header = String::new();
            while std::io::BufRead::read_line(&mut reader, &mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    Ok((url, seen))
}

#[test]
fn path_traversal_on_every_route_is_refused() -> anyhow::Result<()> {
    let (upstream, seen) = recording_upstream()?;
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)],
    )?;
    server.wait_ready()?;
    for (name, format, kind) in [
        ("debs", "apt", "hosted"),
        ("apks", "apk", "hosted"),
        ("gomods", "go", "hosted"),
        ("conan", "conan", "hosted"),
        ("aptproxy", "apt", "proxy"),
        ("apkproxy", "apk", "proxy"),
        ("goproxy", "go", "proxy"),
        ("conanproxy", "conan", "proxy"),
    ] {
        let mut body = serde_json::json!({"name": name, "format": format, "type": kind});
        if kind == "proxy" {
            body["proxy"] = serde_json::json!({"remote_url": upstream});
        }
        create(&server.public, body)?;
    }
    let addr = server.public.trim_start_matches("http://").to_string();
    let auth = basic("pw");
    // Ways of climbing out: plain, encoded (both cases), double-encoded, backslashes, absolute,
    // NUL, and an overlong UTF-8 dot.
    let escapes = [
        "../../../../etc/passwd",
        "%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "%252e%252e%252f%252e%252e%252fetc%252fpasswd",
        "..%5c..%5c..%5cetc%5cpasswd",
        "..\\..\\..\\etc\\passwd",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "x%00.deb",
        "%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
    ];
    let mut tried = 0;
    for repo in ["debs", "apks", "gomods", "conan", "aptproxy", "apkproxy", "goproxy", "conanproxy"] {
        for e in escapes {
            let targets = [
                ("GET", format!("/repository/{repo}/{e}")),
                ("GET", format!("/repository/{repo}/dists/{e}")),
                ("GET", format!("/repository/{repo}/pool/main/{e}")),
                ("GET", format!("/repository/{repo}/v3.20/main/x86_64/{e}")),
                ("GET", format!("/repository/{repo}/example.com/m/@v/{e}")),
                ("GET", format!("/repository/{repo}/{e}/@v/list")),
                ("GET", format!("/repository/{repo}/v2/conans/zlib/1.3/_/_/revisions/{e}/files")),
                ("GET", format!("/repository/{repo}/v2/conans/zlib/1.3/_/_/revisions/0123/files/{e}")),
                ("PUT", format!("/repository/{repo}/v3.20/main/x86_64/{e}")),
                ("PUT", format!("/repository/{repo}/example.com/m/@v/{e}")),
                ("PUT", format!("/repository/{repo}/{e}/@v/v1.0.0.zip")),
                ("PUT", format!("/repository/{repo}/v2/conans/zlib/1.3/_/_/revisions/0123/files/{e}")),
                ("DELETE", format!("/repository/{repo}/pool/main/{e}")),
                ("DELETE", format!("/repository/{repo}/v3.20/main/x86_64/{e}")),
                ("POST", format!("/repository/{repo}/{e}")),
            ];
            for (method, target) in targets {
                let (status, text) = raw(&addr, method, &target, &auth, b"PK\x03\x04 not a package")?;
                assert!((400..500).contains(&status), "{method} {target}: {status}\n{text}");
                assert!(!text.contains("root:x:0:0"), "{method} {target} served /etc/passwd");
                tried += 1;
            }
        }
    }
    for target in
        ["/api/v1/repositories/..%2f..%2fetc%2fpasswd", "/api/v1/repositories/%2e%2e/status", "/../../etc/passwd"]
    {
        let (status, text) = raw(&addr, "GET", target, &auth, b"")?;
        assert!((400..500).contains(&status), "GET {target}: {status}\n{text}");
    }
    assert!(tried >= 1000, "{tried}");
    // The proxies never asked their upstream for anything outside its root.
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    for path in &seen {
        assert!(path.starts_with("/root/"), "an upstream request left the remote root: {path}");
        let decoded = path.replace("%2e", ".").replace("%2E", ".");
        assert!(!decoded.split(['/', '\\']).any(|s| s == ".."), "an upstream request climbs: {path}");
    }
    // Nothing was written anywhere: only the repositories' own published files exist.
    let (s, _) = status_of(ureq::get(&format!("{}/readyz", server.management)).call())?;
    assert_eq!(s, 200);
    Ok(())
}

/// The server's resident memory, from its `/metrics`.
fn rss(management: &str) -> anyhow::Result<f64> {
    let (_, page) = status_of(ureq::get(&format!("{management}/metrics")).call())?;
    let rss = common::process::metric(&page, "process_resident_memory_bytes");
    anyhow::ensure!(rss.is_finite(), "no process_resident_memory_bytes");
    Ok(rss)
}

/// A `.deb` whose control.tar.gz (well under 1 MiB) unpacks to 128 MiB of zeros, twice the limit.
fn deb_bomb() -> anyhow::Result<Vec<u8>> {
    use std::io::Write as _;
    let size: u64 = 128 << 20;
    let mut header = tar::Header::new_gnu();
    header.set_path("./control")?;
    header.set_size(size);
    header.set_mode(0o644);
    header.set_cksum();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(header.as_bytes())?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(size >> 20) {
        gz.write_all(&zeros)?;
    }
    let control = gz.finish()?;
    let member = |out: &mut Vec<u8>, name: &str, data: &[u8]| {
        out.extend(format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", 0, 0, 0, "100644", data.len()).as_bytes());
        out.extend_from_slice(data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    };
    let mut deb = b"!<arch>\n".to_vec();
    member(&mut deb, "debian-binary", b"2.0\n");
    member(&mut deb, "control.tar.gz", &control);
    Ok(deb)
}

#[test]
fn decompression_bombs_are_refused_before_memory_or_disk_fills() -> anyhow::Result<()> {
    use packyard_codecs::go::testing::{module_zip, ZipFile};
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw")])?;
    server.wait_ready()?;
    create(&server.public, Repo::hosted("debs", Format::Apt))?;
    create(&server.public, Repo::hosted("gomods", Format::Go))?;
    let before = rss(&server.management)?;
    let blobs = dir.path().join("data/blobs");

    let deb = deb_bomb()?;
    assert!(deb.len() < 2 << 20, "{} bytes", deb.len());
    let (s, text) = status_of(
        ureq::post(&format!("{}/repository/debs/", server.public)).set("Authorization", &basic("pw")).send_bytes(&deb),
    )?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("expands beyond") && text.contains("decompression bomb"), "{text}");

    // A module zip whose one file claims 1 KiB and inflates to 64 MiB of zeros.
    let zeros = vec![0u8; 64 << 20];
    let liar = module_zip(
        "example.com/bomb",
        "v1.0.0",
        &[ZipFile { declared_size: Some(1024), ..ZipFile::new("big.txt", &zeros) }],
    )?;
    assert!(liar.len() < 1 << 20);
    let (s, text) = status_of(
        ureq::put(&format!("{}/repository/gomods/example.com/bomb/@v/v1.0.0.zip", server.public))
            .set("Authorization", &basic("pw"))
            .send_bytes(&liar),
    )?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("holds more than its declared 1024 bytes"), "{text}");
    // One that tells the truth about unpacking to more than the Go limit (500 MiB): refused
    // from its central directory, before anything is inflated.
    let files: Vec<ZipFile> =
        (0..9).map(|i| ZipFile { declared_size: Some(60 << 20), ..ZipFile::new(&format!("f{i}.bin"), b"x") }).collect();
    let big = module_zip("example.com/huge", "v1.0.0", &files)?;
    let (s, text) = status_of(
        ureq::put(&format!("{}/repository/gomods/example.com/huge/@v/v1.0.0.zip", server.public))
            .set("Authorization", &basic("pw"))
            .send_bytes(&big),
    )?;
    assert_eq!(s, 413, "{text}");
    assert!(text.contains("the limit is 524288000"), "the message names the limit: {text}");

    // Memory did not follow the bombs, and nothing of them was kept.
    let after = rss(&server.management)?;
    assert!(after - before < 96.0 * 1048576.0, "RSS grew from {before} to {after}");
    let stored: Vec<String> = files_under(&blobs.join("sha256"))?
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .collect();
    for (what, bytes) in [("the .deb", &deb), ("the lying zip", &liar), ("the huge zip", &big)] {
        let digest = hex::encode(sha2::Digest::finalize(sha2::Digest::chain_update(sha2::Sha256::default(), bytes)));
        assert!(!stored.contains(&digest), "{what} was kept as a blob");
    }
    assert_eq!(std::fs::read_dir(blobs.join("tmp"))?.count(), 0);
    Ok(())
}

/// Served content shares the web UI's origin, so it must never run there: every response
/// under `/repository/` — an uploaded file holding a page with a script, an upstream's answer
/// passed through a proxy, an error, a HEAD — carries `X-Content-Type-Options: nosniff` and a
/// policy that sandboxes it, whatever the upstream sent.
#[test]
fn served_content_is_sandboxed() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
    )?;
    server.wait_ready()?;
    let page = "<html><body><script>document.title = document.cookie</script></body></html>";
    common::process::create_repository(&server.public, &basic("pw"), Repo::hosted("cc", Format::Conan))?;
    let base = format!("{}/repository/cc/v2/conans/x/1.0/_/_/revisions/r1/files", server.public);
    let manifest = format!("1\nconanfile.py: {}\n", hex::encode(<md5::Md5 as md5::Digest>::digest(page.as_bytes())));
    for (file, body) in [("conanfile.py", page.to_string()), ("conanmanifest.txt", manifest)] {
        let r = ureq::put(&format!("{base}/{file}")).set("Authorization", &basic("pw")).send_string(&body);
        assert_eq!(status_of(r)?.0, 201, "{file}");
    }
    let (upstream, _stop) = text_upstream("<html><script>alert(1)</script></html>")?;
    common::process::create_repository(&server.public, &basic("pw"), Repo::proxy("goproxy", Format::Go, &upstream))?;
    let want_policy = "default-src 'none'; sandbox; frame-ancestors 'none'";
    for (method, url, status) in [
        ("GET", format!("{base}/conanfile.py"), 200),
        ("HEAD", format!("{base}/conanfile.py"), 200),
        ("GET", format!("{}/repository/goproxy/example.com/m/@v/list", server.public), 200),
        ("GET", format!("{}/repository/nope/anything", server.public), 404),
        ("GET", format!("{}/repository/cc/v2/conans/x/1.0/_/_/revisions/r9/files/a", server.public), 404),
    ] {
        let r = match ureq::request(method, &url).call() {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(e.into()),
        };
        assert_eq!(r.status(), status, "{method} {url}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{method} {url}");
        assert_eq!(r.header("content-security-policy"), Some(want_policy), "{method} {url}");
        if method == "GET" && status == 200 && url.ends_with("conanfile.py") {
            assert_eq!(r.into_string()?, page, "the bytes as uploaded");
        }
    }
    // The admin API is not served content: no sandbox there.
    let r = ureq::get(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic("pw")).call()?;
    assert_eq!(r.header("content-security-policy"), None);
    assert!(server.terminate()?.success());
    Ok(())
}
