//! Running the built binaries as separate processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_packyard-api");

/// The worker binary beside the api binary (built by `cargo build --workspace` / nextest).
pub fn worker_bin() -> PathBuf {
    Path::new(BIN).with_file_name("packyard-worker")
}

/// A running server process; killed on drop if the test did not stop it.
pub struct Server {
    pub child: Child,
    pub public: String,
    pub management: String,
    /// The redirect listener (`server.tls.redirect_bind`), or empty.
    pub redirect: String,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn command(dir: &Path, env: &[(&str, &str)]) -> Command {
    command_of(Path::new(BIN), dir, env)
}

pub fn command_of(program: &Path, dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir);
    for (k, _) in std::env::vars() {
        // The outbound proxy variables too: a developer's would carry the tests' loopback fetches.
        let proxy = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"].contains(&k.to_ascii_uppercase().as_str());
        if k.starts_with("PACKYARD_") || k == "RUST_LOG" || proxy {
            cmd.env_remove(k);
        }
    }
    // Ephemeral ports; everything else stays at its default.
    cmd.env("PACKYARD_SERVER__BIND", "127.0.0.1:0").env("PACKYARD_SERVER__MANAGEMENT_BIND", "127.0.0.1:0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

pub fn start(dir: &Path, env: &[(&str, &str)]) -> anyhow::Result<Server> {
    spawn(command(dir, env))
}

/// Starts `packyard-worker` (it reports only its management address; `public` stays empty).
pub fn start_worker(dir: &Path, env: &[(&str, &str)]) -> anyhow::Result<Server> {
    let bin = worker_bin();
    anyhow::ensure!(
        bin.is_file(),
        "{} is missing: build the workspace's binaries (cargo build --workspace --bins)",
        bin.display()
    );
    spawn(command_of(&bin, dir, env))
}

/// Starts a prepared command of either binary and waits until it reports its addresses.
pub fn spawn_command(cmd: Command) -> anyhow::Result<Server> {
    spawn(cmd)
}

fn spawn(mut cmd: Command) -> anyhow::Result<Server> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let stderr_pipe = child.stderr.take().ok_or_else(|| anyhow::anyhow!("no stderr"))?;
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
            if let Ok(mut s) = sink.lock() {
                s.push_str(&line);
                s.push('\n');
            }
        }
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let err = stderr.lock().map(|s| s.clone()).unwrap_or_default();
                anyhow::bail!("server did not report its addresses; stderr:\n{err}");
            }
        };
        if let Some(rest) = line.strip_prefix("packyard-api listening on ") {
            // "http://A (management http://B)", "https://A (management http://B) (redirect from http://C)"
            let mut urls = rest.split_whitespace().filter(|w| w.contains("://"));
            let public = urls.next().unwrap_or_default().trim_matches(|c| c == '(' || c == ')').to_string();
            let management = urls.next().unwrap_or_default().trim_matches(|c| c == '(' || c == ')').to_string();
            let redirect = urls.next().unwrap_or_default().trim_matches(|c| c == '(' || c == ')').to_string();
            return Ok(Server { child, public, management, redirect, stderr });
        }
        if let Some(rest) = line.strip_prefix("packyard-worker listening on management ") {
            return Ok(Server {
                child,
                public: String::new(),
                management: rest.trim().to_string(),
                redirect: String::new(),
                stderr,
            });
        }
    }
}

impl Server {
    pub fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match ureq::get(&format!("{}/readyz", self.management)).call() {
                Ok(r) if r.status() == 200 => return Ok(()),
                _ if Instant::now() > deadline => anyhow::bail!("not ready in time"),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status()?.success();
        anyhow::ensure!(ok, "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            anyhow::ensure!(Instant::now() < deadline, "server did not stop after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Where a server process on `backend` keeps its state: SQLite, its default database in a new
/// directory (URL `None`); PostgreSQL or MariaDB, a fresh database of the test server, and the
/// directory. `None` when that backend is not configured (said on stderr).
pub fn database_for(
    backend: packyard_store::db::Backend,
) -> anyhow::Result<Option<(Option<String>, tempfile::TempDir)>> {
    use packyard_store::db::Backend;
    if backend == Backend::Sqlite {
        return Ok(Some((None, tempfile::tempdir()?)));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match rt.block_on(packyard_store::testing::create_database(backend))? {
        Some((url, dir)) => Ok(Some((Some(url), dir))),
        None => {
            eprintln!("skipped on {}: no server configured", backend.as_str());
            Ok(None)
        }
    }
}

/// Starts the api binary in `dir` on the database [`database_for`] gave (`url`: PostgreSQL or
/// MariaDB, with the shared secret they require; `None`: SQLite) and waits until it is ready.
pub fn start_on(dir: &Path, url: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Server> {
    let mut all = env.to_vec();
    if let Some(url) = url {
        all.push(("PACKYARD_DATABASE__URL", url));
        all.push(("PACKYARD_SECURITY__SECRET", "a-shared-secret-of-enough-length"));
    }
    let server = start(dir, &all)?;
    server.wait_ready()?;
    Ok(server)
}

/// The api binary started with `env` on a fresh database of `backend` ([`database_for`],
/// [`start_on`]), with the directory it runs in; `None`: skipped (no such server configured).
pub fn server_on(
    backend: packyard_store::db::Backend,
    env: &[(&str, &str)],
) -> anyhow::Result<Option<(Server, tempfile::TempDir)>> {
    let Some((url, dir)) = database_for(backend)? else { return Ok(None) };
    let server = start_on(dir.path(), url.as_deref(), env)?;
    Ok(Some((server, dir)))
}

/// A port nobody listens on now, on 127.0.0.1.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn basic(pw: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("admin:{pw}")))
}

pub fn status_of(r: Result<ureq::Response, ureq::Error>) -> anyhow::Result<(u16, String)> {
    match r {
        Ok(r) => Ok((r.status(), r.into_string()?)),
        Err(ureq::Error::Status(code, r)) => Ok((code, r.into_string()?)),
        Err(e) => Err(e.into()),
    }
}

pub fn run_to_end(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<(i32, String, String)> {
    let mut child = command(dir, env).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err)?;
    }
    let status = child.wait()?;
    Ok((status.code().unwrap_or(-1), out, err))
}

/// A plain HTTP upstream on 127.0.0.1 answering every request with `body`, until told to stop.
pub fn text_upstream(body: &'static str) -> anyhow::Result<(String, std::sync::mpsc::Sender<()>)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || loop {
        if stopped.try_recv().is_ok() {
            return; // the listener closes: the next fetch is refused
        }
        match listener.accept() {
            Ok((mut conn, _)) => {
                let _ = conn.set_nonblocking(false);
                let mut reader = BufReader::new(match conn.try_clone() {
                    Ok(c) => c,
                    Err(_) => continue,
                });
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = std::io::Write::write_fmt(&mut conn, format_args!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                ));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    });
    Ok((url, stop))
}

/// Creates a repository through the admin API of `public` with the `Authorization` value `auth`.
pub fn create_repository(public: &str, auth: &str, body: impl Into<serde_json::Value>) -> anyhow::Result<()> {
    let (s, text) = status_of(
        ureq::post(&format!("{public}/api/v1/repositories")).set("Authorization", auth).send_json(body.into()),
    )?;
    anyhow::ensure!(s == 201, "creating a repository: {s} {text}");
    Ok(())
}

/// Reading one sample of a `/metrics` page, as the soak does.
#[allow(unused_imports)]
pub use packyard_loadtest::soak::metric;

/// Nexus's REST API of a spawned server: `GET /service/rest/v1/<query>` as `auth`, its JSON.
pub fn nexus(public: &str, auth: &str, query: &str) -> anyhow::Result<serde_json::Value> {
    let (s, text) =
        status_of(ureq::get(&format!("{public}/service/rest/v1/{query}")).set("Authorization", auth).call())?;
    anyhow::ensure!(s == 200, "GET /service/rest/v1/{query}: {s} {text}");
    Ok(serde_json::from_str(&text)?)
}

/// The one component a Nexus search finds (fails unless exactly one).
pub fn nexus_component(public: &str, auth: &str, search: &str) -> anyhow::Result<serde_json::Value> {
    let found = nexus(public, auth, &format!("search?{search}"))?;
    let items = found["items"].as_array().cloned().unwrap_or_default();
    anyhow::ensure!(items.len() == 1, "search?{search} found {} components: {found}", items.len());
    Ok(items[0].clone())
}

/// `DELETE /service/rest/v1/components/{id}` as `auth` (empty: anonymous): its status.
pub fn nexus_delete(public: &str, auth: &str, id: &str) -> anyhow::Result<u16> {
    let mut req = ureq::delete(&format!("{public}/service/rest/v1/components/{id}"));
    if !auth.is_empty() {
        req = req.set("Authorization", auth);
    }
    Ok(status_of(req.call())?.0)
}

/// An admin API call as `auth`: `method path` with an optional JSON body; its JSON (a 2xx).
#[allow(dead_code)]
pub fn admin_json(
    public: &str,
    auth: &str,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let req = ureq::request(method, &format!("{public}{path}")).set("Authorization", auth);
    let (s, text) = status_of(match body {
        Some(b) => req.send_json(b),
        None => req.call(),
    })?;
    anyhow::ensure!((200..300).contains(&s), "{method} {path}: {s} {text}");
    Ok(serde_json::from_str(&text)?)
}

/// What a repository holds, by Nexus's search: `name version` of each component.
#[allow(dead_code)]
pub fn catalogue(public: &str, auth: &str, repository: &str) -> anyhow::Result<std::collections::BTreeSet<String>> {
    let mut out = std::collections::BTreeSet::new();
    let mut token: Option<String> = None;
    loop {
        let page = match &token {
            Some(t) => nexus(public, auth, &format!("search?repository={repository}&continuationToken={t}"))?,
            None => nexus(public, auth, &format!("search?repository={repository}"))?,
        };
        for c in page["items"].as_array().into_iter().flatten() {
            out.insert(format!(
                "{} {}",
                c["name"].as_str().unwrap_or_default(),
                c["version"].as_str().unwrap_or_default()
            ));
        }
        match page["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(out),
        }
    }
}

/// Creates cleanup policy `policy` (its JSON, which names `repository`), previews it on
/// `repository`, asks the worker to run it now and waits (up to 60 s) until the run finished:
/// the preview's components (`name version`) and the run's status.
#[allow(dead_code)]
pub fn cleanup_now(
    public: &str,
    auth: &str,
    policy: serde_json::Value,
    repository: &str,
) -> anyhow::Result<(std::collections::BTreeSet<String>, serde_json::Value)> {
    let name = policy["name"].as_str().unwrap_or_default().to_string();
    let admin = |method: &str, path: &str, body: Option<&serde_json::Value>| {
        admin_json(public, auth, method, &format!("/api/v1/cleanup-policies{path}"), body.cloned())
    };
    admin("POST", "", Some(&policy))?;
    let mut preview = std::collections::BTreeSet::new();
    let mut token: Option<String> = None;
    loop {
        let q = match &token {
            Some(t) => format!("/{name}/preview?repository={repository}&continuationToken={t}"),
            None => format!("/{name}/preview?repository={repository}"),
        };
        let page = admin("POST", &q, None)?;
        for c in page["items"].as_array().into_iter().flatten() {
            preview.insert(format!(
                "{} {}",
                c["name"].as_str().unwrap_or_default(),
                c["version"].as_str().unwrap_or_default()
            ));
        }
        match page["continuationToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    admin("POST", &format!("/{name}/run?repository={repository}"), None)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let runs = admin("GET", &format!("/{name}/runs"), None)?;
        let run = runs["items"].as_array().into_iter().flatten().find(|r| r["repository"] == repository).cloned();
        if let Some(run) = run.filter(|r| r["state"] == "idle" && r["lastFinished"].is_string()) {
            return Ok((preview, run));
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "the cleanup run of {name} did not finish: {runs}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs SQL against a spawned server's database (as if time had passed, say).
#[allow(dead_code)]
pub fn sql(url: &str, statement: &str) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(url).await?;
        sqlx::query(statement).execute(&pool).await?;
        pool.close().await;
        Ok(())
    })
}

/// A GET of `path` on `server`: (status, body bytes), an error status included.
pub fn get_bytes(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    get_url(&format!("{}{path}", server.public))
}

/// A GET of `url`: (status, body bytes), an error status included.
pub fn get_url(url: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let r = match ureq::get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(e.into()),
    };
    let status = r.status();
    let mut body = Vec::new();
    r.into_reader().read_to_end(&mut body)?;
    Ok((status, body))
}

/// Whether `program` runs here (`program arg` succeeds): a test of a real client skips without it.
pub fn available(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).output().is_ok_and(|o| o.status.success())
}

/// A server process in a directory of its own, ready, with `env`.
pub fn start_in_scratch(env: &[(&str, &str)]) -> anyhow::Result<(Server, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), env)?;
    server.wait_ready()?;
    Ok((server, dir))
}

/// The independent APK index verifier (`tests/apk_verify.py`) on the files in `dir`: the index
/// file, the key file (PEM) and the key's name apk would look it up by.
pub fn apk_verifier(dir: &Path, index: &str, key_pem: &str, key_name: &str) -> anyhow::Result<std::process::Output> {
    Ok(Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apk_verify.py"))
        .arg(dir.join(index))
        .arg(dir.join(key_pem))
        .arg(key_name)
        .arg(dir)
        .output()?)
}
