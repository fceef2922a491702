//! Go proxies and groups where their peers misbehave, with the real `go` command through
//! `GOPROXY`: module paths and versions with capital letters (`!`-escaped) through a proxy and a
//! group; upstreams and members that do not have a module (404 and 410) — Packyard answers 404 or
//! 410, never a 5xx, so that the go command's fallback to the next `GOPROXY` entry goes on;
//! `@latest` through a group whose first member lacks the module; and go.mod files the go command
//! refuses, refused at upload with a message naming go.mod and what is wrong, nothing stored.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::process::{basic, create_repository, status_of, Server};
use common::Repo;
use packyard_codecs::go::escape;
use packyard_codecs::go::testing::{module_zip, simple_module, ZipFile};
use packyard_model::repos::Format;

const PW: &str = "peers-go-admin";

fn go_available() -> bool {
    common::process::available("go", "version")
}

/// A server process in a directory of its own (proxies may reach this machine).
fn packyard() -> anyhow::Result<(Server, tempfile::TempDir)> {
    common::process::start_in_scratch(&[
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
    ])
}

fn create(server: &Server, spec: Repo) -> anyhow::Result<()> {
    create_repository(&server.public, &basic(PW), spec)
}

/// `PUT <module>/@v/<version>.zip` (both case-encoded) to `repo`: status and message.
fn put_zip(server: &Server, repo: &str, module: &str, version: &str, zip: &[u8]) -> anyhow::Result<(u16, String)> {
    let url = format!("{}/repository/{repo}/{}/@v/{}.zip", server.public, escape(module), escape(version));
    status_of(ureq::put(&url).set("Authorization", &basic(PW)).send_bytes(zip))
}

fn publish(server: &Server, repo: &str, module: &str, version: &str) -> anyhow::Result<Vec<u8>> {
    let zip = simple_module(module, version, &format!("{module} {version}"), 0)?;
    let (s, text) = put_zip(server, repo, module, version, &zip)?;
    anyhow::ensure!(s == 201, "{module}@{version} to {repo}: {s} {text}");
    Ok(zip)
}

/// GET `url`: status, content type and body.
fn get(url: &str) -> anyhow::Result<(u16, String, Vec<u8>)> {
    let r = match ureq::get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(e.into()),
    };
    let (status, content_type) = (r.status(), r.header("content-type").unwrap_or_default().to_string());
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
    Ok((status, content_type, body))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or_default()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

/// The go command, isolated: its own home, module cache and build cache, no checksum database,
/// and a main module (`example.com/app`, go 1.19) to run in.
struct Go {
    home: tempfile::TempDir,
    app: PathBuf,
}

impl Go {
    fn new() -> anyhow::Result<Self> {
        let home = tempfile::tempdir()?;
        let app = home.path().join("app");
        std::fs::create_dir_all(&app)?;
        std::fs::write(app.join("go.mod"), "module example.com/app\n\ngo 1.19\n")?;
        Ok(Self { home, app })
    }

    /// `go args` with `GOPROXY=proxy`: success, stdout, stderr.
    fn run(&self, proxy: &str, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
        let home = self.home.path();
        let out = common::golang::command(&self.app, home, proxy, args).output()?;
        Ok((out.status.success(), text(&out.stdout), text(&out.stderr)))
    }

    fn ok(&self, proxy: &str, args: &[&str]) -> anyhow::Result<String> {
        let (success, out, err) = self.run(proxy, args)?;
        anyhow::ensure!(success, "GOPROXY={proxy} go {args:?} failed:\n{out}\n{err}");
        Ok(out)
    }

    /// `go mod download -json target`.
    fn download(&self, proxy: &str, target: &str) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.ok(proxy, &["mod", "download", "-json", target])?)?)
    }

    fn go_mod(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.app.join("go.mod"))?)
    }

    fn modcache(&self) -> PathBuf {
        self.home.path().join("modcache")
    }
}

/// An upstream of our own on 127.0.0.1 that answers each request with what `answer` says for its
/// path (`(status, body)`) and records the paths it was asked; stopped on drop.
struct Upstream {
    url: String,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Upstream {
    fn start(answer: impl Fn(&str) -> (u16, Vec<u8>) + Send + 'static) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let (asked, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (log, stopped) = (asked.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let Ok((conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let Ok(read) = conn.try_clone() else { continue };
                let mut reader = BufReader::new(read);
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    continue;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let path = request.split_whitespace().nth(1).unwrap_or_default().to_string();
                if let Ok(mut l) = log.lock() {
                    l.push(path.clone());
                }
                let (status, body) = answer(&path);
                let reason = match status {
                    200 => "OK",
                    404 => "Not Found",
                    410 => "Gone",
                    _ => "Other",
                };
                let mut conn = conn;
                let head = format!(
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(&body));
            }
        });
        Ok(Self { url, asked, stop })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// 1. Module paths and versions with capital letters (`example.com/Foo/Bar`, `v1.2.0-RC.1`),
///    case-encoded in every URL, beside their lowercase twin `example.com/foo/bar` (another
///    module: case is never folded, on any backend): a proxy of a second Packyard and a group of a
///    hosted repository and that proxy serve each its own versions and bytes, and the go command
///    resolves them (`go mod download -json`, `go list -m -versions`, `go get …@latest`) with the
///    upstream's own hashes. A URL with a raw capital letter, a `!` before anything but a
///    lowercase letter, or a trailing `!` is a 404 naming what is wrong (the go command never
///    sends one; a 404 lets a `GOPROXY` list go on). On SQLite, PostgreSQL and MariaDB.
#[test]
fn capital_letters_through_a_proxy_and_a_group() -> anyhow::Result<()> {
    if !go_available() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    use packyard_store::db::Backend;
    for backend in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
        capital_letters_on(backend).map_err(|e| e.context(format!("on {}", backend.as_str())))?;
    }
    Ok(())
}

/// A server process on `backend` (`None` when that backend is not configured).
fn packyard_on(backend: packyard_store::db::Backend) -> anyhow::Result<Option<(Server, tempfile::TempDir)>> {
    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(None) };
    let env = [
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
        // An upload on a shared database answers once every replica could have seen it.
        ("PACKYARD_CACHE__WATERMARK_TTL_MS", "100"),
        ("PACKYARD_SECURITY__WATERMARK_TTL_MS", "100"),
    ];
    let server = common::process::start_on(dir.path(), url.as_deref(), &env)?;
    Ok(Some((server, dir)))
}

fn capital_letters_on(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    const M: &str = "example.com/Foo/Bar";
    const ESCAPED: &str = "example.com/!foo/!bar";
    const TWIN: &str = "example.com/foo/bar";
    let Some((upstream, _up_dir)) = packyard_on(backend)? else { return Ok(()) };
    let Some((server, _dir)) = packyard_on(backend)? else { return Ok(()) };
    create(&upstream, Repo::hosted("gomods", Format::Go))?;
    let mut zips = BTreeMap::new();
    for v in ["v1.0.0", "v1.1.0", "v1.2.0-RC.1"] {
        zips.insert(v, publish(&upstream, "gomods", M, v)?);
    }
    let twin_zip = publish(&upstream, "gomods", TWIN, "v0.1.0")?;
    create(&server, Repo::proxy("goproxy", Format::Go, &format!("{}/repository/gomods/", upstream.public)))?;
    create(&server, Repo::hosted("golocal", Format::Go))?;
    zips.insert("v0.9.0", publish(&server, "golocal", M, "v0.9.0")?);
    create(&server, Repo::group("goall", Format::Go, &["golocal", "goproxy"]))?;
    let up = format!("{}/repository/gomods", upstream.public);
    let base = |repo: &str| format!("{}/repository/{repo}", server.public);

    // The protocol's reads, case-encoded.
    for (repo, list) in
        [("goproxy", "v1.0.0\nv1.1.0\nv1.2.0-RC.1\n"), ("goall", "v0.9.0\nv1.0.0\nv1.1.0\nv1.2.0-RC.1\n")]
    {
        let b = base(repo);
        let (s, _, body) = get(&format!("{b}/{ESCAPED}/@v/list"))?;
        assert_eq!((s, text(&body).as_str()), (200, list), "{repo}");
        let (s, _, body) = get(&format!("{b}/{ESCAPED}/@latest"))?;
        assert_eq!((s, json(&body)["Version"].as_str()), (200, Some("v1.1.0")), "{repo}: {}", text(&body));
        for v in list.lines() {
            let escaped = escape(v);
            let (s, ct, info) = get(&format!("{b}/{ESCAPED}/@v/{escaped}.info"))?;
            assert_eq!((s, ct.as_str()), (200, "application/json"), "{repo} {v}: {}", text(&info));
            assert_eq!(json(&info)["Version"].as_str(), Some(v), "{repo}: .info names the version, uppercase kept");
            if v != "v0.9.0" {
                let (_, _, want) = get(&format!("{up}/{ESCAPED}/@v/{escaped}.info"))?;
                assert_eq!(info, want, "{repo} {v}: the upstream's .info");
            }
            let (s, _, m) = get(&format!("{b}/{ESCAPED}/@v/{escaped}.mod"))?;
            assert_eq!((s, text(&m).as_str()), (200, "module example.com/Foo/Bar\n\ngo 1.19\n"), "{repo} {v}");
            let (s, ct, zip) = get(&format!("{b}/{ESCAPED}/@v/{escaped}.zip"))?;
            assert_eq!((s, ct.as_str()), (200, "application/zip"), "{repo} {v}");
            assert_eq!(sha256(&zip), sha256(&zips[v]), "{repo} {v}: the zip as published");
        }
        // The lowercase twin is another module, with its own version and bytes.
        let (s, _, body) = get(&format!("{b}/{TWIN}/@v/list"))?;
        assert_eq!((s, text(&body).as_str()), (200, "v0.1.0\n"), "{repo}");
        let (s, _, body) = get(&format!("{b}/{TWIN}/@latest"))?;
        assert_eq!((s, json(&body)["Version"].as_str()), (200, Some("v0.1.0")), "{repo}");
        let (s, _, zip) = get(&format!("{b}/{TWIN}/@v/v0.1.0.zip"))?;
        assert_eq!((s, sha256(&zip)), (200, sha256(&twin_zip)), "{repo}");
        let (s, _, m) = get(&format!("{b}/{TWIN}/@v/v0.1.0.mod"))?;
        assert_eq!((s, text(&m).as_str()), (200, "module example.com/foo/bar\n\ngo 1.19\n"), "{repo}");
        for path in [
            format!("{TWIN}/@v/v1.1.0.zip"),
            format!("{TWIN}/@v/v1.1.0.info"),
            format!("{ESCAPED}/@v/v0.1.0.info"),
            format!("{ESCAPED}/@v/v0.1.0.zip"),
            "example.com/foo/!bar/@v/list".to_string(),
            "example.com/!foo/bar/@latest".to_string(),
        ] {
            let (s, _, body) = get(&format!("{b}/{path}"))?;
            assert_eq!(s, 404, "{repo}/{path}: {}", text(&body));
        }
        // What the go command never sends: a 404 naming what is wrong, never a 400 or 5xx.
        for (path, why) in [
            ("example.com/Foo/Bar/@v/list", "uppercase letter in \"example.com/Foo/Bar\""),
            ("example.com/Foo/Bar/@latest", "uppercase letter"),
            ("example.com/Foo/Bar/@v/v1.0.0.info", "uppercase letter"),
            (&format!("{ESCAPED}/@v/v1.2.0-RC.1.info"), "uppercase letter in \"v1.2.0-RC.1\""),
            (&format!("{ESCAPED}/@v/v1.2.0-RC.1.zip"), "uppercase letter"),
            ("example.com/!Foo/!bar/@v/list", "'!' must be followed by a lowercase letter"),
            ("example.com/!foo/!bar!/@v/list", "ends in '!'"),
        ] {
            let (s, ct, body) = get(&format!("{b}/{path}"))?;
            assert_eq!(s, 404, "{repo}/{path}: {}", text(&body));
            assert!(ct.starts_with("text/plain"), "{repo}/{path}: {ct}");
            assert!(text(&body).contains(why), "{repo}/{path}: {:?} lacks {why:?}", text(&body));
        }
    }

    // The go command: the same module, version and hashes directly and through each.
    let direct = Go::new()?;
    let want = direct.download(&format!("{up}/"), &format!("{M}@v1.1.0"))?;
    assert_eq!((want["Path"].as_str(), want["Version"].as_str()), (Some(M), Some("v1.1.0")), "{want}");
    assert!(want["Sum"].as_str().is_some_and(|s| s.starts_with("h1:")), "{want}");
    let rc = direct.download(&format!("{up}/"), &format!("{M}@v1.2.0-RC.1"))?;
    let twin = direct.download(&format!("{up}/"), &format!("{TWIN}@v0.1.0"))?;
    for (repo, versions) in [
        ("goproxy", "example.com/Foo/Bar v1.0.0 v1.1.0 v1.2.0-RC.1"),
        ("goall", "example.com/Foo/Bar v0.9.0 v1.0.0 v1.1.0 v1.2.0-RC.1"),
    ] {
        let go = Go::new()?;
        let proxy = format!("{}/", base(repo));
        let got = go.download(&proxy, &format!("{M}@v1.1.0"))?;
        for key in ["Path", "Version", "Sum", "GoModSum"] {
            assert_eq!(got[key], want[key], "{repo}: {key} of {got}");
        }
        let got = go.download(&proxy, &format!("{M}@v1.2.0-RC.1"))?;
        assert_eq!((&got["Version"], &got["Sum"]), (&rc["Version"], &rc["Sum"]), "{repo}: {got}");
        let got = go.download(&proxy, &format!("{TWIN}@v0.1.0"))?;
        assert_eq!((&got["Path"], &got["Sum"]), (&twin["Path"], &twin["Sum"]), "{repo}: {got}");
        assert_ne!(got["Sum"], want["Sum"], "{repo}: the twin is another module");
        // The module cache keeps the case-encoded directory the go command made of it.
        assert!(go.modcache().join("example.com/!foo/!bar@v1.2.0-!r!c.1/bar.go").is_file(), "{repo}");
        assert!(go.modcache().join("example.com/foo/bar@v0.1.0/bar.go").is_file(), "{repo}");
        assert_eq!(go.ok(&proxy, &["list", "-m", "-versions", M])?.trim(), versions, "{repo}");
        assert_eq!(go.ok(&proxy, &["list", "-m", "-versions", TWIN])?.trim(), "example.com/foo/bar v0.1.0", "{repo}");
        go.ok(&proxy, &["get", &format!("{M}@latest")])?;
        let go_mod = go.go_mod()?;
        assert!(go_mod.contains("example.com/Foo/Bar v1.1.0"), "{repo}: go get took @latest: {go_mod}");
    }
    Ok(())
}

/// A module zip whose root holds a go.mod and package `c` (`example.com/a/b` → `example.com/a/b/c`).
fn module_with_package(module: &str, version: &str, package: &str) -> anyhow::Result<Vec<u8>> {
    module_zip(
        module,
        version,
        &[
            ZipFile::new("go.mod", format!("module {module}\n\ngo 1.19\n").as_bytes()),
            ZipFile::new(
                &format!("{package}/{package}.go"),
                format!("package {package}\n\n// Message names the module.\nfunc Message() string {{ return {module:?} }}\n")
                    .as_bytes(),
            ),
        ],
    )
}

/// 2. A proxy whose upstream answers 404 (most modules) or 410 (`example.com/gone`), and a group
///    of it and a hosted repository: every miss — an unknown module, an unknown version of a known
///    one, `@latest` of an unknown module, a branch, each path prefix the go command probes — is a
///    404 or 410 in plain text, never a 5xx (also asked twice: the negative cache answers the
///    same). So with `GOPROXY="<group>,<second source>"` the go command falls through to the
///    second source and succeeds (`go mod download`, `go list -m -versions`, `go get` of a
///    package path), while a module the group has still comes from the group.
#[test]
fn a_miss_lets_the_goproxy_fallback_go_on() -> anyhow::Result<()> {
    if !go_available() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    // The upstream has one module, example.com/up v1.0.0; example.com/gone is gone (410).
    let up_zip = simple_module("example.com/up", "v1.0.0", "up", 0)?;
    let up_mod = b"module example.com/up\n\ngo 1.19\n".to_vec();
    let served = up_zip.clone();
    let upstream = Upstream::start(move |path| {
        let info = br#"{"Version":"v1.0.0","Time":"2024-01-02T03:04:05Z"}"#.to_vec();
        match path {
            "/example.com/up/@v/list" => (200, b"v1.0.0\n".to_vec()),
            "/example.com/up/@latest" | "/example.com/up/@v/v1.0.0.info" => (200, info),
            "/example.com/up/@v/v1.0.0.mod" => (200, up_mod.clone()),
            "/example.com/up/@v/v1.0.0.zip" => (200, served.clone()),
            p if p.starts_with("/example.com/gone/") => (410, b"gone: example.com/gone is no more\n".to_vec()),
            _ => (404, b"not found\n".to_vec()),
        }
    })?;
    let (server, _dir) = packyard()?;
    create(
        &server,
        Repo::proxy("gomissing", Format::Go, &format!("{}/", upstream.url))
            .with(serde_json::json!({"proxy": {"negative_ttl_secs": 60}})),
    )?;
    create(&server, Repo::hosted("golocal", Format::Go))?;
    publish(&server, "golocal", "example.com/local", "v0.1.0")?;
    create(&server, Repo::group("goall", Format::Go, &["golocal", "gomissing"]))?;
    // The second source: a repository outside the group.
    create(&server, Repo::hosted("fallback", Format::Go))?;
    let (s, t) = put_zip(
        &server,
        "fallback",
        "example.com/a/b",
        "v1.0.0",
        &module_with_package("example.com/a/b", "v1.0.0", "c")?,
    )?;
    assert_eq!(s, 201, "{t}");
    publish(&server, "fallback", "example.com/gone", "v1.0.0")?;
    let base = |repo: &str| format!("{}/repository/{repo}", server.public);

    // What Packyard answers itself: 404 or 410, plain text, never a 5xx — twice.
    let misses = [
        "example.com/nothere/@v/list",
        "example.com/nothere/@latest",
        "example.com/nothere/@v/v1.0.0.info",
        "example.com/nothere/@v/v1.0.0.mod",
        "example.com/nothere/@v/v1.0.0.zip",
        "example.com/gone/@v/list",
        "example.com/gone/@latest",
        "example.com/gone/@v/v1.0.0.info",
        "example.com/gone/@v/v1.0.0.zip",
        "example.com/up/@v/v9.9.9.info",
        "example.com/up/@v/v9.9.9.mod",
        "example.com/up/@v/v9.9.9.zip",
        "example.com/up/@v/master.info",
        "example.com/local/@v/v9.9.9.info",
        "example.com/a/b/c/@v/list",
        "example.com/a/b/c/@latest",
        "example.com/a/b/@v/list",
        "example.com/a/@v/list",
        "example.com/@v/list",
        "example.com/up/@v/nonsense",
        "example.com/up/sub/@v/list",
    ];
    for round in 0..2 {
        for repo in ["gomissing", "goall"] {
            for path in misses {
                let (s, ct, body) = get(&format!("{}/{path}", base(repo)))?;
                assert!(s == 404 || s == 410, "round {round}, {repo}/{path}: {s} {}", text(&body));
                assert!(ct.starts_with("text/plain"), "{repo}/{path}: {ct}");
            }
        }
    }
    let asked = upstream.asked();
    for path in ["/example.com/gone/@v/list", "/example.com/nothere/@latest", "/example.com/up/@v/v9.9.9.zip"] {
        assert!(asked.iter().any(|a| a == path), "the proxy asked its upstream for {path}: {asked:?}");
    }
    // What the group and the proxy have, they serve.
    for repo in ["gomissing", "goall"] {
        let (s, _, body) = get(&format!("{}/example.com/up/@v/list", base(repo)))?;
        assert_eq!((s, text(&body).as_str()), (200, "v1.0.0\n"), "{repo}");
        let (s, _, zip) = get(&format!("{}/example.com/up/@v/v1.0.0.zip", base(repo)))?;
        assert_eq!((s, sha256(&zip)), (200, sha256(&up_zip)), "{repo}");
    }

    // The go command, the group first and the second source after it.
    let proxy = format!("{}/,{}/", base("goall"), base("fallback"));
    let go = Go::new()?;
    let ab = go.download(&proxy, "example.com/a/b@v1.0.0")?;
    assert_eq!(ab["Version"], "v1.0.0", "{ab}");
    assert!(ab["Sum"].as_str().is_some_and(|s| s.starts_with("h1:")), "{ab}");
    let gone = go.download(&proxy, "example.com/gone@v1.0.0")?;
    assert_eq!(gone["Version"], "v1.0.0", "{gone}");
    assert_eq!(go.ok(&proxy, &["list", "-m", "-versions", "example.com/gone"])?.trim(), "example.com/gone v1.0.0");
    // A package path: every prefix is probed, the group says 404 for each, the fallback has
    // example.com/a/b.
    go.ok(&proxy, &["get", "example.com/a/b/c"])?;
    let go_mod = go.go_mod()?;
    assert!(go_mod.contains("example.com/a/b v1.0.0"), "{go_mod}");
    assert_eq!(go.ok(&proxy, &["list", "example.com/a/b/c"])?.trim(), "example.com/a/b/c");
    let asked = upstream.asked();
    for path in ["/example.com/a/b/c/@v/list", "/example.com/a/b/@v/list"] {
        assert!(asked.iter().any(|a| a == path), "the go command's probe of {path} reached the upstream: {asked:?}");
    }
    // A module the group has comes from it (the fallback does not have it).
    let up = go.download(&proxy, "example.com/up@v1.0.0")?;
    assert_eq!(up["Version"], "v1.0.0", "{up}");
    let local = go.download(&proxy, "example.com/local@latest")?;
    assert_eq!(local["Version"], "v0.1.0", "{local}");
    // Without the second source, the miss is the go command's error, naming the 404 or 410.
    let (success, out, err) =
        Go::new()?.run(&format!("{}/", base("goall")), &["mod", "download", "-json", "example.com/a/b@v1.0.0"])?;
    assert!(!success, "{out}");
    let said = format!("{out}{err}");
    assert!(said.contains("404") || said.contains("410") || said.contains("not found"), "{said}");
    Ok(())
}

/// 3. `@latest` through a group whose first member has no such module: a hosted repository
///    without it, or a proxy whose upstream answers 404 (`example.com/x`) or 410
///    (`example.com/y`); the second member, a proxy of a second Packyard, has `example.com/x`
///    (releases and a newer pre-release) and `example.com/y` (a pseudo-version only, which no list
///    names). The group's `@latest` is the second member's latest release's `.info` (or its own
///    `@latest`), byte for byte, and the go command resolves `@latest` to it.
#[test]
fn latest_through_a_group_whose_first_member_lacks_the_module() -> anyhow::Result<()> {
    if !go_available() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    const PSEUDO: &str = "v0.0.0-20240102030405-abcdefabcdef";
    let (upstream, _up_dir) = packyard()?;
    create(&upstream, Repo::hosted("gomods", Format::Go))?;
    for v in ["v1.0.0", "v1.1.0", "v1.2.0-rc.1"] {
        publish(&upstream, "gomods", "example.com/x", v)?;
    }
    publish(&upstream, "gomods", "example.com/y", PSEUDO)?;
    let up = format!("{}/repository/gomods", upstream.public);
    let missing = Upstream::start(|path| {
        if path.starts_with("/example.com/y/") {
            (410, b"gone\n".to_vec())
        } else {
            (404, b"not found\n".to_vec())
        }
    })?;
    let (server, _dir) = packyard()?;
    create(&server, Repo::hosted("golocal", Format::Go))?;
    publish(&server, "golocal", "example.com/other", "v0.3.0")?;
    create(&server, Repo::proxy("gomissing", Format::Go, &format!("{}/", missing.url)))?;
    create(&server, Repo::proxy("goproxy", Format::Go, &format!("{up}/")))?;
    create(&server, Repo::group("g-hosted-first", Format::Go, &["golocal", "goproxy"]))?;
    create(&server, Repo::group("g-proxy-first", Format::Go, &["gomissing", "goproxy"]))?;

    let (_, _, x_info) = get(&format!("{up}/example.com/x/@v/v1.1.0.info"))?;
    assert_eq!(json(&x_info)["Version"], "v1.1.0");
    let (s, _, y_latest) = get(&format!("{up}/example.com/y/@latest"))?;
    assert_eq!((s, json(&y_latest)["Version"].as_str()), (200, Some(PSEUDO)), "{}", text(&y_latest));
    for group in ["g-hosted-first", "g-proxy-first"] {
        let b = format!("{}/repository/{group}", server.public);
        let (s, ct, latest) = get(&format!("{b}/example.com/x/@latest"))?;
        assert_eq!((s, ct.as_str()), (200, "application/json"), "{group}: {}", text(&latest));
        assert_eq!(text(&latest), text(&x_info), "{group}: @latest is the second member's v1.1.0 .info");
        let (s, _, list) = get(&format!("{b}/example.com/x/@v/list"))?;
        assert_eq!((s, text(&list).as_str()), (200, "v1.0.0\nv1.1.0\nv1.2.0-rc.1\n"), "{group}");
        // Only a pseudo-version: the list is empty, @latest is the member's own.
        let (s, _, list) = get(&format!("{b}/example.com/y/@v/list"))?;
        assert_eq!((s, text(&list).as_str()), (200, ""), "{group}");
        let (s, _, latest) = get(&format!("{b}/example.com/y/@latest"))?;
        assert_eq!((s, text(&latest)), (200, text(&y_latest)), "{group}: y's @latest");
        let (s, _, _) = get(&format!("{b}/example.com/nothere/@latest"))?;
        assert_eq!(s, 404, "{group}");

        let go = Go::new()?;
        let proxy = format!("{b}/");
        let x = go.download(&proxy, "example.com/x@latest")?;
        assert_eq!(
            (x["Path"].as_str(), x["Version"].as_str()),
            (Some("example.com/x"), Some("v1.1.0")),
            "{group}: {x}"
        );
        let y = go.download(&proxy, "example.com/y@latest")?;
        assert_eq!(y["Version"].as_str(), Some(PSEUDO), "{group}: {y}");
        go.ok(&proxy, &["get", "example.com/x@latest", "example.com/y@latest"])?;
        let go_mod = go.go_mod()?;
        assert!(
            go_mod.contains("example.com/x v1.1.0") && go_mod.contains(&format!("example.com/y {PSEUDO}")),
            "{group}: {go_mod}"
        );
    }
    let asked = missing.asked();
    assert!(asked.iter().any(|a| a == "/example.com/x/@v/list"), "the first member was asked: {asked:?}");
    assert!(asked.iter().any(|a| a == "/example.com/y/@v/list"), "the first member was asked: {asked:?}");
    Ok(())
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// 4. Acceptance: a hosted Go repository `gomods` and a group over it refuse module zips whose
///    go.mod the go command would refuse — a bad `go` or `toolchain` directive, a `require` of a
///    version that is no semantic version or whose major version the path does not carry, a
///    `replace` by a module without a version, `retract banana`, an unterminated block, a `/* */`
///    comment, a second `module` line — each with a 400 whose message names go.mod, the line and
///    what is wrong; nothing is stored (no `.info`, no list, no new blob). A valid module then
///    downloads with the go command through the repository and the group.
#[test]
fn malformed_go_mods_are_refused() -> anyhow::Result<()> {
    if !go_available() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    const M: &str = "example.com/bad";
    let (server, dir) = packyard()?;
    create(&server, Repo::hosted("gomods", Format::Go))?;
    create(&server, Repo::group("goall", Format::Go, &["gomods"]))?;
    publish(&server, "gomods", "example.com/good", "v1.0.0")?;
    let blobs = dir.path().join("data/blobs/sha256");
    let stored = files_under(&blobs);
    assert!(stored > 0, "the blob store is at {}", blobs.display());
    let head = "module example.com/bad\n\ngo 1.19\n";
    let cases: [(String, &str); 10] = [
        ("module example.com/bad\n\ngo 1.21.x\n".into(), "go.mod:3: invalid go version '1.21.x': must match format 1.23.0"),
        (
            format!("{head}\ntoolchain 1.22\n"),
            "go.mod:5: invalid toolchain version '1.22': must match format go1.23.0 or default",
        ),
        (format!("{head}\nrequire example.com/x latest\n"), "go.mod:5: require: version \"latest\" invalid"),
        (format!("{head}\nrequire example.com/x v2.0.0\n"), "go.mod:5: require example.com/x v2.0.0: should be v0 or v1, not v2"),
        (
            format!("{head}\nreplace example.com/x => example.com/y\n"),
            "go.mod:5: replacement module without version must be directory path (rooted or starting with . or ..): example.com/y",
        ),
        (format!("{head}\nretract banana\n"), "go.mod:5: retract: version \"banana\" invalid"),
        (format!("{head}\nrequire (\n\texample.com/x v1.0.0\n"), "go.mod:5: syntax error (unterminated require block)"),
        (format!("{head}\n/* a comment */\n"), "go.mod:5: mod files must use // comments (not /* */ comments)"),
        (format!("{head}module example.com/bad\n"), "go.mod:4: repeated module statement"),
        (format!("{head}\nrequire example.com/x v1.0.0 (\n"), "go.mod:5: unknown block type: require"),
    ];
    let good_go = ZipFile::new("bad.go", b"package bad\n");
    for (go_mod, why) in &cases {
        let zip = module_zip(M, "v1.0.0", &[ZipFile::new("go.mod", go_mod.as_bytes()), good_go.clone()])?;
        let (s, message) = put_zip(&server, "gomods", M, "v1.0.0", &zip)?;
        assert_eq!(s, 400, "{go_mod:?}: {message}");
        assert!(message.contains("the zip's go.mod does not parse: "), "{go_mod:?}: {message}");
        assert!(message.contains(why), "{go_mod:?}: {message:?} lacks {why:?}");
        // Through the Nexus-style route too.
        let url = format!("{}/repository/gomods/v1.0.0.zip", server.public);
        let (s, message) = status_of(ureq::put(&url).set("Authorization", &basic(PW)).send_bytes(&zip))?;
        assert_eq!(s, 400, "{go_mod:?}: {message}");
        assert!(message.contains(why), "{go_mod:?}: {message:?} lacks {why:?}");
    }
    // A group takes no uploads.
    let zip = module_zip(M, "v1.0.0", &[ZipFile::new("go.mod", cases[0].0.as_bytes()), good_go])?;
    let (s, message) = put_zip(&server, "goall", M, "v1.0.0", &zip)?;
    assert_eq!(s, 405, "{message}");
    assert!(message.contains("repository goall is a group repository"), "{message}");
    // Nothing stored.
    assert_eq!(files_under(&blobs), stored, "a refused upload left a blob");
    for repo in ["gomods", "goall"] {
        for path in ["@v/v1.0.0.info", "@v/v1.0.0.mod", "@v/v1.0.0.zip", "@v/list", "@latest"] {
            let (s, _, body) = get(&format!("{}/repository/{repo}/{M}/{path}", server.public))?;
            assert_eq!(s, 404, "{repo}/{M}/{path}: {}", text(&body));
        }
    }
    let audit = common::process::admin_json(&server.public, &basic(PW), "GET", "/api/v1/audit", None)?;
    let targets: Vec<&str> =
        audit["entries"].as_array().into_iter().flatten().filter_map(|e| e["target"].as_str()).collect();
    assert!(!targets.iter().any(|t| t.contains(M)), "{audit}");

    // A valid module still goes through, and downloads through the repository and the group.
    let v2 = format!("{head}\nrequire example.com/good v1.0.0\n\nretract v0.9.0 // published by mistake\n");
    let zip =
        module_zip(M, "v1.0.0", &[ZipFile::new("go.mod", v2.as_bytes()), ZipFile::new("bad.go", b"package bad\n")])?;
    let (s, message) = put_zip(&server, "gomods", M, "v1.0.0", &zip)?;
    assert_eq!(s, 201, "{message}");
    for repo in ["gomods", "goall"] {
        let go = Go::new()?;
        let proxy = format!("{}/repository/{repo}/", server.public);
        let got = go.download(&proxy, &format!("{M}@v1.0.0"))?;
        assert_eq!(got["Version"], "v1.0.0", "{repo}: {got}");
        let go_mod = std::fs::read_to_string(got["GoMod"].as_str().unwrap_or_default())?;
        assert_eq!(go_mod, v2, "{repo}");
        let good = go.download(&proxy, "example.com/good@v1.0.0")?;
        assert_eq!(good["Version"], "v1.0.0", "{repo}: {good}");
        go.ok(&proxy, &["get", &format!("{M}@v1.0.0")])?;
        let all = go.ok(&proxy, &["list", "-m", "all"])?;
        assert_eq!(
            all, "example.com/app\nexample.com/bad v1.0.0\nexample.com/good v1.0.0\n",
            "{repo}: its requirement resolved"
        );
    }
    Ok(())
}
