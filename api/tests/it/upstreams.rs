//! Proxy repositories in a corporate network: an outbound HTTP proxy (a real `tinyproxy`),
//! extra trusted certificate authorities (a real TLS server, `openssl s_server`), upstream
//! failures that name their cause, the overall deadline of a fetch, storage failures on the
//! proxy path, a changed `remote_url`, and the bound on remembered misses.

use crate::common;
use crate::common::process::free_port;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::app::TestApp;
use common::process::{basic, start, status_of};
use common::Repo;
use packyard_model::repos::Format;
use packyard_store::db::Backend;

const PW: &str = "upstreams-admin";

/// What a local upstream does with a request for a path.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Answers `(status, body)`.
    Answer(fn(&str) -> (u16, String)),
    /// Accepts and never answers.
    Silent,
    /// Sends the head of a 1,000-byte answer, then a byte every 200 ms.
    Trickle,
}

/// A plain HTTP upstream on 127.0.0.1 that records the head of every request it gets.
struct Upstream {
    url: String,
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start(behaviour: Behaviour) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        match conn.read(&mut byte) {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).to_string();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    if let Ok(mut s) = seen.lock() {
                        s.push(head);
                    }
                    match behaviour {
                        Behaviour::Answer(answer) => {
                            let (status, body) = answer(&path);
                            if (300..400).contains(&status) {
                                // A redirect: the body is where to.
                                let _ = write!(conn, "HTTP/1.1 {status} X\r\nLocation: {body}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                                return;
                            }
                            let _ = write!(
                                conn,
                                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n{body}",
                                body.len()
                            );
                        }
                        Behaviour::Silent => std::thread::sleep(Duration::from_secs(30)),
                        Behaviour::Trickle => {
                            let _ =
                                conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n");
                            for _ in 0..1000 {
                                std::thread::sleep(Duration::from_millis(200));
                                if conn.write_all(b"x").is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Ok(Self { url: format!("http://127.0.0.1:{port}/"), port, heads })
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

fn versions(_: &str) -> (u16, String) {
    (200, "v1.0.0\n".into())
}

/// Whether a tool the test drives is installed; under scripts/test.sh or CI it must be.
fn tool(name: &str) -> anyhow::Result<bool> {
    let found = Command::new("sh").args(["-c", &format!("command -v {name}")]).output()?.status.success();
    if !found {
        anyhow::ensure!(
            std::env::var_os("CI").is_none() && std::env::var_os("TEST_TOOLS_VENV").is_none(),
            "{name} is required (scripts/test.sh installs it)"
        );
        eprintln!("skipped: {name} is not installed (scripts/test.sh installs it)");
    }
    Ok(found)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A real outbound HTTP proxy: tinyproxy on 127.0.0.1, marking what it forwards with `Via`.
fn tinyproxy(dir: &Path) -> anyhow::Result<(Killed, u16)> {
    let port = free_port()?;
    let conf = dir.join("tinyproxy.conf");
    let user = if nix_is_root() { "User nobody\nGroup nogroup\n" } else { "" };
    std::fs::write(
        &conf,
        format!(
            "{user}Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 20\nAllow 127.0.0.1\nViaProxyName \"packyard-test-proxy\"\n"
        ),
    )?;
    let child =
        Command::new("tinyproxy").arg("-d").arg("-c").arg(&conf).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "tinyproxy did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((Killed(child), port))
}

fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn list(public: &str, repo: &str) -> anyhow::Result<(u16, String)> {
    status_of(ureq::get(&format!("{public}/repository/{repo}/example.com/m/@v/list")).call())
}

fn create(public: &str, repo: Repo) -> anyhow::Result<()> {
    common::process::create_repository(public, &basic(PW), repo.0)
}

/// Fetches through the outbound proxy (configured, or from the environment), directly for what
/// `no_proxy` names, and a proxy that is down is named as such.
#[test]
fn an_outbound_proxy_carries_the_upstream_fetches() -> anyhow::Result<()> {
    if !tool("tinyproxy")? {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let (_proxy, proxy_port) = tinyproxy(dir.path())?;
    let proxy_url = format!("http://127.0.0.1:{proxy_port}");
    let upstream = Upstream::start(Behaviour::Answer(versions))?;
    let allow = ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#);
    let admin = ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW);
    let via_proxy =
        |heads: &[String]| heads.iter().any(|h| h.to_ascii_lowercase().contains("via: 1.1 packyard-test-proxy"));

    // proxy.http_proxy: through tinyproxy, which marks what it forwards.
    let configured = tempfile::tempdir()?;
    let server = start(configured.path(), &[admin, allow, ("PACKYARD_PROXY__HTTP_PROXY", proxy_url.as_str())])?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("through", Format::Go, &upstream.url))?;
    assert_eq!(list(&server.public, "through")?, (200, "v1.0.0\n".to_string()));
    let heads = upstream.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(via_proxy(&heads), "the fetch did not go through the proxy: {heads:?}");
    drop(server);

    // proxy.no_proxy names the upstream: straight to it.
    let bypass = tempfile::tempdir()?;
    let server = start(
        bypass.path(),
        &[
            admin,
            allow,
            ("PACKYARD_PROXY__HTTP_PROXY", proxy_url.as_str()),
            ("PACKYARD_PROXY__NO_PROXY", r#"["127.0.0.1"]"#),
        ],
    )?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("direct", Format::Go, &upstream.url))?;
    assert_eq!(list(&server.public, "direct")?, (200, "v1.0.0\n".to_string()));
    let heads = upstream.heads();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(!via_proxy(&heads[1..]), "no_proxy was not honoured: {heads:?}");
    drop(server);

    // The environment's HTTP_PROXY when the configuration has none.
    let from_env = tempfile::tempdir()?;
    let server = start(from_env.path(), &[admin, allow, ("HTTP_PROXY", proxy_url.as_str())])?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("env", Format::Go, &upstream.url))?;
    assert_eq!(list(&server.public, "env")?, (200, "v1.0.0\n".to_string()));
    let heads = upstream.heads();
    assert!(via_proxy(&heads[2..]), "HTTP_PROXY was not honoured: {heads:?}");
    drop(server);

    // The address guard still holds through the proxy: a loopback upstream without the
    // allowlist is refused before anything is sent (the proxy itself is the operator's choice).
    let guarded = tempfile::tempdir()?;
    let server = start(guarded.path(), &[admin, ("PACKYARD_PROXY__HTTP_PROXY", proxy_url.as_str())])?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("guarded", Format::Go, &upstream.url))?;
    create(&server.public, Repo::proxy("guarded-name", Format::Go, &format!("http://localhost:{}/", upstream.port)))?;
    for repo in ["guarded", "guarded-name"] {
        let (s, text) = list(&server.public, repo)?;
        assert_eq!(s, 502, "{repo}: {text}");
        assert!(text.contains("loopback, private or link-local"), "{repo}: {text}");
    }
    assert_eq!(upstream.heads().len(), 3, "nothing reached the upstream");
    drop(server);

    // Through the proxy, a redirect to another host is refused (its name would be resolved by
    // the proxy, out of the guard's sight); and the proxy's own host is no upstream.
    fn elsewhere(_: &str) -> (u16, String) {
        (302, "http://intranet.invalid/secret".into())
    }
    let redirecting = Upstream::start(Behaviour::Answer(elsewhere))?;
    let redirected = tempfile::tempdir()?;
    let server = start(redirected.path(), &[admin, allow, ("PACKYARD_PROXY__HTTP_PROXY", proxy_url.as_str())])?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("redirecting", Format::Go, &redirecting.url))?;
    let (s, text) = list(&server.public, "redirecting")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("redirected to another host, intranet.invalid, through the outbound proxy"), "{text}");
    drop(server);
    let named = tempfile::tempdir()?;
    let named_proxy = format!("http://localhost:{proxy_port}");
    let server = start(
        named.path(),
        &[
            admin,
            ("PACKYARD_PROXY__HTTP_PROXY", named_proxy.as_str()),
            ("PACKYARD_PROXY__NO_PROXY", r#"["localhost"]"#),
        ],
    )?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("the-proxy", Format::Go, &format!("http://localhost:{}/", upstream.port)))?;
    let (s, text) = list(&server.public, "the-proxy")?;
    assert_eq!(s, 502, "{text}");
    assert!(
        text.contains("loopback, private or link-local"),
        "a direct request to the proxy's name is guarded: {text}"
    );
    drop(server);

    // The proxy down: named as the proxy, not as the upstream.
    let down_port = free_port()?;
    let down_url = format!("http://127.0.0.1:{down_port}");
    let down = tempfile::tempdir()?;
    let server = start(down.path(), &[admin, allow, ("PACKYARD_PROXY__HTTP_PROXY", down_url.as_str())])?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("proxy-down", Format::Go, &upstream.url))?;
    let (s, text) = list(&server.public, "proxy-down")?;
    assert_eq!(s, 502, "{text}");
    let upstream_base = upstream.url.trim_end_matches('/');
    assert!(
        text.contains(&format!(
            "connection: the outbound proxy {down_url} (for upstream {upstream_base}) refused the connection"
        )),
        "{text}"
    );
    // The configured proxy's password is never shown.
    let (code, out, _) = common::process::run_to_end(
        down.path(),
        &["config", "show"],
        &[("PACKYARD_PROXY__HTTP_PROXY", "http://corp:hunter2@proxy.corp.example:3128")],
    )?;
    assert_eq!(code, 0);
    assert!(out.contains("proxy.http_proxy = \"http://corp:****@proxy.corp.example:3128/\""), "{out}");
    assert!(!out.contains("hunter2"), "{out}");
    Ok(())
}

/// A TLS upstream signed by a private certificate authority: refused, naming TLS and
/// `proxy.ca_certificates`; trusted once its CA is there.
#[test]
fn private_certificate_authorities_for_upstreams() -> anyhow::Result<()> {
    if !tool("openssl")? {
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let d = dir.path();
    let openssl = |args: &[&str]| -> anyhow::Result<()> {
        let out = Command::new("openssl").args(args).current_dir(d).output()?;
        anyhow::ensure!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=Packyard Test CA",
    ])?;
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=localhost",
    ])?;
    std::fs::write(
        d.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ])?;
    let www = d.join("www");
    std::fs::create_dir_all(www.join("example.com/m/@v"))?;
    std::fs::write(www.join("example.com/m/@v/list"), "v9.9.9\n")?;
    let port = free_port()?;
    let _tls = Killed(
        Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept", &format!("127.0.0.1:{port}")])
            .arg("-cert")
            .arg(d.join("srv.pem"))
            .arg("-key")
            .arg(d.join("srv.key"))
            .current_dir(&www)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(Instant::now() < deadline, "openssl s_server did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let remote = format!("https://localhost:{port}/");
    let env = |extra: &[(&'static str, String)]| -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW.to_string()),
            ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true".to_string()),
        ];
        env.extend(extra.iter().cloned());
        env
    };
    let borrowed = |env: &[(&'static str, String)]| env.iter().map(|(k, v)| (*k, v.clone())).collect::<Vec<_>>();

    let untrusting = tempfile::tempdir()?;
    let e = borrowed(&env(&[]));
    let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = start(untrusting.path(), &e)?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("private-ca", Format::Go, &remote))?;
    let (s, text) = list(&server.public, "private-ca")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains(&format!("TLS: the handshake with upstream https://localhost:{port} failed")), "{text}");
    assert!(text.contains("UnknownIssuer") && text.contains("proxy.ca_certificates"), "{text}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let logs = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        if logs.contains("TLS: the handshake with upstream") {
            break;
        }
        assert!(Instant::now() < deadline, "the log names the cause too:\n{logs}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);

    let trusting = tempfile::tempdir()?;
    let ca = format!("[{:?}]", d.join("ca.pem").display().to_string());
    let e = borrowed(&env(&[("PACKYARD_PROXY__CA_CERTIFICATES", ca)]));
    let e: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = start(trusting.path(), &e)?;
    server.wait_ready()?;
    create(&server.public, Repo::proxy("private-ca", Format::Go, &remote))?;
    assert_eq!(list(&server.public, "private-ca")?, (200, "v9.9.9\n".to_string()));
    drop(server);

    // A file that holds no certificate is a startup error naming the key.
    std::fs::write(d.join("not-a-cert.pem"), "hello\n")?;
    let bad = format!("[{:?}]", d.join("not-a-cert.pem").display().to_string());
    let (code, _, err) =
        common::process::run_to_end(trusting.path(), &[], &[("PACKYARD_PROXY__CA_CERTIFICATES", bad.as_str())])?;
    assert_ne!(code, 0);
    assert!(err.contains("proxy.ca_certificates") && err.contains("no PEM certificate"), "{err}");
    Ok(())
}

/// Each way an upstream fetch fails is named in the answer (and the log): the name does not
/// resolve, the connection is refused, the upstream says nothing, the fetch outlives its deadline.
#[test]
fn upstream_failures_name_their_cause() -> anyhow::Result<()> {
    let refused_port = free_port()?;
    let silent = Upstream::start(Behaviour::Silent)?;
    let trickle = Upstream::start(Behaviour::Trickle)?;
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
            ("PACKYARD_PROXY__READ_TIMEOUT_MS", "700"),
            ("PACKYARD_PROXY__FETCH_DEADLINE_MS", "1500"),
        ],
    )?;
    server.wait_ready()?;
    let cases = [
        (
            "dns",
            "http://no-such-host.invalid/".to_string(),
            502,
            "DNS: cannot resolve upstream host no-such-host.invalid (",
        ),
        (
            "refused",
            format!("http://127.0.0.1:{refused_port}/"),
            502,
            "connection: upstream http://127.0.0.1:{refused_port} refused the connection",
        ),
        ("silent", silent.url.clone(), 504, "sent nothing for proxy.read_timeout_ms (700 ms)"),
        ("trickle", trickle.url.clone(), 504, "took longer than proxy.fetch_deadline_ms (1500 ms)"),
    ];
    for (name, remote, status, want) in cases {
        create(&server.public, Repo::proxy(name, Format::Go, &remote))?;
        let started = Instant::now();
        let (s, text) = list(&server.public, name)?;
        let want = want.replace("{refused_port}", &refused_port.to_string());
        assert_eq!(s, status, "{name}: {text}");
        assert!(text.contains(&want), "{name}: {text:?} lacks {want:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{name}: {:?}", started.elapsed());
        // The log line is written by the log's own thread, a moment later.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let logs = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
            if logs.contains(&want) {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: the log does not say {want:?}:\n{logs}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

/// The database failing on the proxy path is a 503 with a message, never a 500.
async fn storage_failure_is_503(backend: Backend) -> anyhow::Result<()> {
    let upstream = Upstream::start(Behaviour::Answer(versions))?;
    let Some(app) = TestApp::with_config(backend, |c| c.proxy.allowed_networks = vec!["127.0.0.1/32".into()]).await?
    else {
        return Ok(());
    };
    app.create(Repo::proxy("up", Format::Go, &upstream.url)).await?;
    let r = app.get("/repository/up/example.com/m/@v/list").await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (200, "v1.0.0\n"));
    app.services.db.close().await;
    let r = app.get("/repository/up/example.com/other/@v/list").await?;
    assert_eq!(r.status.as_u16(), 503, "{}", r.text);
    assert!(r.text.contains("storage (database or blob store) is unavailable; retry later"), "{}", r.text);
    Ok(())
}
on_every_backend!(storage_failure_is_503);

/// A proxy whose `remote_url` changes forgets what the old upstream served: its cached files,
/// its remembered misses and its components in the catalogue; the next request asks the new one.
async fn a_new_remote_url_forgets_the_old_upstream(backend: Backend) -> anyhow::Result<()> {
    fn old(path: &str) -> (u16, String) {
        if path.ends_with("/v1.0.0.info") {
            (200, r#"{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}"#.into())
        } else if path.ends_with("@v/list") {
            (200, "v1.0.0\n".into())
        } else {
            (404, "no\n".into())
        }
    }
    fn new(path: &str) -> (u16, String) {
        if path.ends_with(".info") {
            (200, r#"{"Version":"v1.0.0","Time":"2025-05-05T00:00:00Z"}"#.into())
        } else {
            (200, "v1.0.0\nv2.0.0\n".into())
        }
    }
    let (a, b) = (Upstream::start(Behaviour::Answer(old))?, Upstream::start(Behaviour::Answer(new))?);
    let Some(app) = TestApp::with_config(backend, |c| c.proxy.allowed_networks = vec!["127.0.0.1/32".into()]).await?
    else {
        return Ok(());
    };
    let repo = app
        .create(
            Repo::proxy("moving", Format::Go, &a.url).with(serde_json::json!({"proxy": {"metadata_ttl_secs": 3600}})),
        )
        .await?;
    let id = app
        .t
        .db
        .repository_by_name(repo["name"].as_str().unwrap_or_default())
        .await?
        .map(|r| r.id)
        .ok_or_else(|| anyhow::anyhow!("no repository {repo}"))?;
    let get = |path: &'static str| {
        let app = &app;
        async move { app.get(&format!("/repository/moving/example.com/m/@v/{path}")).await }
    };
    assert_eq!(get("list").await?.text, "v1.0.0\n");
    assert!(get("v1.0.0.info").await?.text.contains("2024-01-01"));
    assert_eq!(get("v3.0.0.info").await?.status.as_u16(), 404, "remembered as missing");
    for path in ["example.com/m/@v/list", "example.com/m/@v/v1.0.0.info", "example.com/m/@v/v3.0.0.info"] {
        assert!(app.t.db.proxy_entry(id, path).await?.is_some(), "{path} cached");
    }
    let before =
        app.call(actix_web::test::TestRequest::get().uri("/service/rest/v1/components?repository=moving")).await?;
    assert_eq!(before.json["items"].as_array().map(Vec::len), Some(1), "{}", before.text);

    app.patch_repository("moving", serde_json::json!({"proxy": {"remote_url": b.url}})).await?;
    for path in ["example.com/m/@v/list", "example.com/m/@v/v1.0.0.info", "example.com/m/@v/v3.0.0.info"] {
        assert!(app.t.db.proxy_entry(id, path).await?.is_none(), "{path} forgotten");
    }
    let after =
        app.call(actix_web::test::TestRequest::get().uri("/service/rest/v1/components?repository=moving")).await?;
    assert_eq!(after.json["items"].as_array().map(Vec::len), Some(0), "{}", after.text);
    // Metadata within its TTL, an immutable file and a remembered miss: all from the new upstream.
    assert_eq!(get("list").await?.text, "v1.0.0\nv2.0.0\n");
    assert!(get("v1.0.0.info").await?.text.contains("2025-05-05"));
    assert_eq!(get("v3.0.0.info").await?.status.as_u16(), 200);
    // A change that keeps the upstream keeps the cache.
    app.patch_repository("moving", serde_json::json!({"proxy": {"metadata_ttl_secs": 60}})).await?;
    assert!(app.t.db.proxy_entry(id, "example.com/m/@v/v1.0.0.info").await?.is_some());
    app.finish().await
}
on_every_backend!(a_new_remote_url_forgets_the_old_upstream);

/// Remembered 404s are bounded per repository (`proxy.max_negative_entries`): the oldest go.
async fn remembered_misses_are_bounded(backend: Backend) -> anyhow::Result<()> {
    fn missing(_: &str) -> (u16, String) {
        (404, "not here\n".into())
    }
    let upstream = Upstream::start(Behaviour::Answer(missing))?;
    let Some(app) = TestApp::with_config(backend, |c| {
        c.proxy.allowed_networks = vec!["127.0.0.1/32".into()];
        c.proxy.max_negative_entries = 8;
    })
    .await?
    else {
        return Ok(());
    };
    let repo = app.create(Repo::proxy("misses", Format::Go, &upstream.url)).await?;
    let id = app
        .t
        .db
        .repository_by_name(repo["name"].as_str().unwrap_or_default())
        .await?
        .map(|r| r.id)
        .ok_or_else(|| anyhow::anyhow!("no repository {repo}"))?;
    for n in 0..20 {
        let r = app.get(&format!("/repository/misses/example.com/m/@v/v1.0.{n}.info")).await?;
        assert_eq!(r.status.as_u16(), 404, "{}", r.text);
        // Distinct times, so that "the oldest" is well defined.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let mut kept = Vec::new();
    for n in 0..20 {
        if app.t.db.proxy_entry(id, &format!("example.com/m/@v/v1.0.{n}.info")).await?.is_some() {
            kept.push(n);
        }
    }
    assert_eq!(kept, (12..20).collect::<Vec<_>>(), "the 8 newest misses are kept");
    // A forgotten miss is asked again, and remembered again.
    let asked = upstream.heads().len();
    assert_eq!(app.get("/repository/misses/example.com/m/@v/v1.0.0.info").await?.status.as_u16(), 404);
    assert_eq!(upstream.heads().len(), asked + 1);
    assert_eq!(app.get("/repository/misses/example.com/m/@v/v1.0.19.info").await?.status.as_u16(), 404);
    assert_eq!(upstream.heads().len(), asked + 1, "a kept miss is answered from the cache");
    app.finish().await
}
on_every_backend!(remembered_misses_are_bounded);

/// The bound holds for each proxy repository when their misses interleave (#44: one count for
/// the whole process trimmed only the repository whose misses fell on its multiples, and the
/// other's grew without bound).
async fn remembered_misses_are_bounded_per_repository(backend: Backend) -> anyhow::Result<()> {
    fn missing(_: &str) -> (u16, String) {
        (404, "not here\n".into())
    }
    let upstream = Upstream::start(Behaviour::Answer(missing))?;
    let Some(app) = TestApp::with_config(backend, |c| {
        c.proxy.allowed_networks = vec!["127.0.0.1/32".into()];
        // A trim every second miss of a repository.
        c.proxy.max_negative_entries = 32;
    })
    .await?
    else {
        return Ok(());
    };
    let mut ids = Vec::new();
    for name in ["left", "right"] {
        app.create(Repo::proxy(name, Format::Go, &upstream.url)).await?;
        let id = app.t.db.repository_by_name(name).await?.map(|r| r.id);
        ids.push(id.ok_or_else(|| anyhow::anyhow!("no repository {name}"))?);
    }
    for n in 0..40 {
        for name in ["left", "right"] {
            let r = app.get(&format!("/repository/{name}/example.com/m/@v/v1.0.{n}.info")).await?;
            assert_eq!(r.status.as_u16(), 404, "{}", r.text);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for (name, id) in ["left", "right"].iter().zip(&ids) {
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM proxy_cache WHERE repository_id = {id} AND sha256 IS NULL"
        ))
        .fetch_one(app.t.db.pool())
        .await?;
        assert_eq!(n, 32, "{name}: the 32 newest of its 40 misses are kept");
    }
    app.finish().await
}
on_every_backend!(remembered_misses_are_bounded_per_repository);
