//! The deployment assets against the real thing: the Helm chart rendered by a real Helm renderer
//! and validated (scripts/check-chart.py), and the Grafana dashboard and Prometheus rules
//! referencing only metrics a running server's `/metrics` exposes.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use packyard_store::db::Backend;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{basic, create_repository, start, status_of, text_upstream};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether `python3` on PATH has the chart tools (scripts/test.sh puts its venv first on PATH).
/// Under scripts/test.sh (`TEST_TOOLS_VENV`) or CI they must be there; a developer's plain
/// `cargo nextest run` skips with a note.
fn chart_tools() -> anyhow::Result<bool> {
    let ok = Command::new("python3").args(["-c", "import helm_python"]).status().is_ok_and(|s| s.success())
        && Command::new("kubernetes-validate").arg("--version").output().is_ok_and(|o| o.status.success())
        && Command::new("yamllint").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        anyhow::ensure!(
            std::env::var_os("CI").is_none() && std::env::var_os("TEST_TOOLS_VENV").is_none(),
            "helm-python-sdk, kubernetes-validate and yamllint are required in CI (scripts/test.sh installs them)"
        );
        eprintln!("skipped: the chart tools are not on PATH (scripts/test.sh installs them into target/test-venv)");
    }
    Ok(ok)
}

#[test]
fn helm_chart_renders_and_validates_with_default_and_ha_values() -> anyhow::Result<()> {
    if !chart_tools()? {
        return Ok(());
    }
    let tomls = tempfile::tempdir()?;
    let out = Command::new("python3")
        .arg("scripts/check-chart.py")
        .arg("--toml-out")
        .arg(tomls.path())
        .current_dir(repo_root())
        .output()?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "check-chart failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("default values: schema ok"), "{stdout}");
    assert!(stdout.contains("ci/ha-values.yaml: schema ok"), "{stdout}");
    assert!(stdout.contains("deploy/prometheus/rules.yaml"), "yamllint must cover the rules: {stdout}");
    // Every packyard.toml the chart renders is one the real binary accepts (unknown keys and
    // wrong types are startup errors), with the values the chart promises.
    let mut checked = 0;
    for entry in std::fs::read_dir(tomls.path())? {
        let path = entry?.path();
        let out = common::process::command(tomls.path(), &[])
            .arg("--config")
            .arg(&path)
            .args(["config", "show"])
            // What the chart passes from Secrets, as environment variables.
            .env("PACKYARD_DATABASE__URL", "postgres://u:p@db.invalid/packyard")
            .env("PACKYARD_SECURITY__SECRET", "a-secret-of-the-chart-s-secret-object")
            .output()?;
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {}\n{shown}", path.display(), String::from_utf8_lossy(&out.stderr));
        let line = |key: &str| shown.lines().find(|l| l.starts_with(key)).unwrap_or_default().to_string();
        assert!(line("database.migrate_on_start").contains("false"), "{}:\n{shown}", path.display());
        assert!(line("server.data_dir").contains("/var/lib/packyard"), "{}:\n{shown}", path.display());
        checked += 1;
    }
    assert!(checked >= 2, "rendered packyard.toml files: {checked}");
    Ok(())
}

/// `helm install --wait` with an external database: each scale-out pod as the chart renders it
/// (its init containers in order, then its process, with its environment and packyard.toml)
/// run with the real binaries against a fresh PostgreSQL database, in the order Kubernetes
/// starts them, becomes ready on its own — no post-install hook has to run first (Helm runs
/// those only after the pods are ready). Without the init container the process waits for the
/// migrations instead.
#[test]
fn scale_out_pods_become_ready_on_their_own() -> anyhow::Result<()> {
    if !chart_tools()? {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some((db_url, dir)) = rt.block_on(packyard_store::testing::create_database(Backend::Postgres))? else {
        eprintln!("skipped: TEST_POSTGRES_URL is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let out_dir = tempfile::tempdir()?;
    let (pods, tomls) = (out_dir.path().join("pods"), out_dir.path().join("tomls"));
    let out = Command::new("python3")
        .arg("scripts/check-chart.py")
        .arg("--pods-out")
        .arg(&pods)
        .arg("--toml-out")
        .arg(&tomls)
        .current_dir(repo_root())
        .output()?;
    assert!(out.status.success(), "check-chart failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let redis = std::env::var("TEST_REDIS_URL").ok();
    let amqp = std::env::var("TEST_AMQP_URL").ok();
    // What the chart's Secrets hold, by variable; the blobs go to files here (the rendered
    // configuration names an S3 bucket of the values file's).
    let data = dir.path().join("data");
    let blobs = dir.path().join("blobs");
    let secrets: Vec<(&str, Option<String>)> = vec![
        ("PACKYARD_DATABASE__URL", Some(db_url.clone())),
        ("PACKYARD_SECURITY__SECRET", Some("a-secret-of-the-chart-s-secret-object".into())),
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", Some("chart-admin".into())),
        ("PACKYARD_BLOBS__S3__ACCESS_KEY_ID", Some("unused".into())),
        ("PACKYARD_BLOBS__S3__SECRET_ACCESS_KEY", Some("unused".into())),
        ("PACKYARD_CACHE__REDIS_URL", redis),
        ("PACKYARD_EVENTS__AMQP_URL", amqp),
    ];
    let program = |path: &str| match path {
        "/usr/local/bin/packyard-api" => Ok(PathBuf::from(common::process::BIN)),
        "/usr/local/bin/packyard-worker" => {
            let bin = common::process::worker_bin();
            anyhow::ensure!(bin.is_file(), "{} is missing: cargo build --workspace --bins", bin.display());
            Ok(bin)
        }
        other => Err(anyhow::anyhow!("the chart runs {other}, which this test does not know")),
    };
    let mut running = Vec::new();
    for deployment in ["packyard-api", "packyard-worker"] {
        let pod: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
            pods.join(format!("ci-ha-values-yaml--{deployment}.json")),
        )?)?;
        let toml = tomls.join(format!("ci-ha-values-yaml--{}.toml", pod["configMap"].as_str().unwrap_or_default()));
        let toml = toml.display().to_string();
        let container_env = |c: &serde_json::Value| -> anyhow::Result<Vec<(String, String)>> {
            let mut env = vec![
                ("PACKYARD_SERVER__DATA_DIR".to_string(), data.display().to_string()),
                ("PACKYARD_BLOBS__KIND".into(), "file".into()),
                ("PACKYARD_BLOBS__PATH".into(), blobs.display().to_string()),
            ];
            for name in c["env"].as_array().into_iter().flatten().filter_map(|n| n.as_str()) {
                if name == "PACKYARD_CONFIG" {
                    env.push((name.into(), toml.clone()));
                    continue;
                }
                let (_, value) = secrets.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                    anyhow::anyhow!("{deployment}: the chart passes {name}, which this test does not know")
                })?;
                if let Some(v) = value {
                    env.push((name.into(), v.clone()));
                }
            }
            Ok(env)
        };
        let command_for = |c: &serde_json::Value| -> anyhow::Result<Command> {
            let path = c["command"][0].as_str().unwrap_or_default();
            let env = container_env(c)?;
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let mut cmd = common::process::command_of(&program(path)?, dir.path(), &env);
            cmd.args(c["args"].as_array().into_iter().flatten().filter_map(|a| a.as_str()));
            Ok(cmd)
        };
        if deployment == "packyard-api" {
            // The process alone, on the empty database: it waits for the migrations.
            let mut alone = command_for(&pod["main"])?
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()?;
            let stderr = std::io::BufReader::new(alone.stderr.take().ok_or_else(|| anyhow::anyhow!("no stderr"))?);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(stderr).map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            let waited = loop {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) if line.contains("waiting for database migrations") => break true,
                    Ok(_) => {}
                    Err(_) => break false,
                }
            };
            let _ = alone.kill();
            let _ = alone.wait();
            assert!(waited, "the api process alone did not wait for the migrations");
        }
        let inits = pod["init"].as_array().cloned().unwrap_or_default();
        assert!(!inits.is_empty(), "{deployment}: no init container");
        for init in &inits {
            let out = command_for(init)?.output()?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{deployment}: init container {} failed: {stdout}{}",
                init["name"],
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(stdout.trim(), "migrations applied (postgres)", "{deployment}: {}", init["name"]);
        }
        let server = common::process::spawn_command(command_for(&pod["main"])?)?;
        server.wait_ready()?;
        running.push(server);
    }
    // The api pod serves with what the init container made: the admin signs in.
    let (s, body) = status_of(
        ureq::get(&format!("{}/api/v1/repositories", running[0].public))
            .set("Authorization", &basic("chart-admin"))
            .call(),
    )?;
    assert_eq!((s, body.as_str()), (200, "[]"));
    for server in running {
        assert!(server.terminate()?.success());
    }
    Ok(())
}

/// Metric names the exposition lists (samples, so `_bucket`/`_sum`/`_count` of histograms).
fn exposed(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// `packyard_…` and `process_…` identifiers in a PromQL expression (recording rules are named
/// `packyard:…`, which this does not match).
fn referenced(expr: &str, into: &mut BTreeSet<String>) {
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &expr[i..];
        let at_word_start = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if at_word_start && (rest.starts_with("packyard_") || rest.starts_with("process_")) {
            let len = rest.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(rest.len());
            into.insert(rest[..len].to_string());
            i += len;
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
}

fn exprs_of(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => exprs_of(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| exprs_of(v, out)),
        _ => {}
    }
}

#[test]
fn dashboard_and_alert_rules_reference_only_exposed_metrics() -> anyhow::Result<()> {
    // A server that has done a bit of everything: requests, an upload and its publication, a
    // cached read, a proxy fetch and a stale copy served when the upstream went away.
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"),
            ("PACKYARD_DEBUG__TEST_FORMAT", "true"),
            ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
            // The usage gauges appear once the worker counted a repository.
            ("PACKYARD_WORKER__USAGE_REFRESH_SECS", "1"),
            ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100"),
            // And the quota gauges once something has a quota.
            ("PACKYARD_BLOBS__QUOTA__SOFT_BYTES", "1"),
        ],
    )?;
    server.wait_ready()?;
    let api = |path: &str| format!("{}{path}", server.public);
    create_repository(&server.public, &basic("pw"), Repo::hosted("t", Format::Sample))?;
    let (s, body) =
        status_of(ureq::put(&api("/repository/t/_test/main/a")).set("Authorization", &basic("pw")).send_string("x"))?;
    assert_eq!(s, 201, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_of(ureq::get(&api("/repository/t/_test/main/count.txt")).call())? != (200, "1\n".to_string()) {
        anyhow::ensure!(Instant::now() < deadline, "not published");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (upstream_url, stop_upstream) = text_upstream("v1.0.0\n")?;
    create_repository(
        &server.public,
        &basic("pw"),
        Repo::proxy("goproxy", Format::Go, &upstream_url).with(serde_json::json!({"proxy": {"metadata_ttl_secs": 1}})),
    )?;
    let list = api("/repository/goproxy/example.com/m/@v/list");
    assert_eq!(status_of(ureq::get(&list).call())?, (200, "v1.0.0\n".to_string()));
    stop_upstream.send(())?;
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(status_of(ureq::get(&list).call())?, (200, "v1.0.0\n".to_string()), "the stale copy");

    // A cleanup run (that finds nothing to remove) shows its counters.
    let policy = serde_json::json!({"name": "nothing", "format": "go", "criteria": {"name_regex": "^none$"}, "repositories": ["goproxy"]});
    let r = ureq::post(&api("/api/v1/cleanup-policies")).set("Authorization", &basic("pw")).send_json(policy);
    assert_eq!(status_of(r)?.0, 201);
    let r = ureq::post(&api("/api/v1/cleanup-policies/nothing/run")).set("Authorization", &basic("pw")).call();
    assert_eq!(status_of(r)?.0, 202);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, runs) = status_of(
            ureq::get(&api("/api/v1/cleanup-policies/nothing/runs")).set("Authorization", &basic("pw")).call(),
        )?;
        if runs.contains("\"lastFinished\":\"") {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the cleanup run did not finish: {runs}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A signing key that expires (the expiry gauge).
    create_repository(&server.public, &basic("pw"), Repo::hosted("debs", Format::Apt))?;
    let key = serde_json::json!({"private_key": crate::rotation::expiring_key(40)?});
    let r =
        ureq::post(&api("/api/v1/repositories/debs/signing-keys")).set("Authorization", &basic("pw")).send_json(key);
    assert_eq!(status_of(r)?.0, 201);

    let (s, metrics) = status_of(ureq::get(&format!("{}/metrics", server.management)).call())?;
    assert_eq!(s, 200);
    let exposed = exposed(&metrics);
    assert!(exposed.contains("packyard_proxy_stale_served_total"), "{metrics}");

    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo_root().join("deploy/grafana/packyard.json"))?)?;
    let mut exprs = Vec::new();
    exprs_of(&dashboard, &mut exprs);
    assert!(exprs.len() >= 20, "the dashboard's queries: {}", exprs.len());
    let rules = std::fs::read_to_string(repo_root().join("deploy/prometheus/rules.yaml"))?;
    for (source, texts) in [("deploy/grafana/packyard.json", exprs), ("deploy/prometheus/rules.yaml", vec![rules])] {
        let mut names = BTreeSet::new();
        texts.iter().for_each(|e| referenced(e, &mut names));
        assert!(names.len() >= 8, "{source} references {names:?}");
        let unknown: Vec<_> = names.iter().filter(|n| !exposed.contains(*n)).collect();
        assert!(unknown.is_empty(), "{source} references metrics /metrics does not expose: {unknown:?}");
    }
    // And the dashboard covers what the issue asks an operator to see.
    let mut names = BTreeSet::new();
    let mut all = Vec::new();
    exprs_of(&dashboard, &mut all);
    all.iter().for_each(|e| referenced(e, &mut names));
    for needed in [
        "packyard_http_requests_total",
        "packyard_http_request_duration_seconds_bucket",
        "packyard_cache_requests_total",
        "packyard_publication_lag_seconds",
        "packyard_publication_duration_seconds_bucket",
        "packyard_outbox_backlog",
        "packyard_proxy_upstream_duration_seconds_bucket",
        "packyard_blob_bytes_total",
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "packyard_repository_components",
        "packyard_repository_bytes",
        "packyard_cleanup_components_deleted_total",
        "packyard_cleanup_bytes_reclaimed_total",
        "packyard_cleanup_last_run_timestamp_seconds",
        "packyard_blob_store_bytes",
    ] {
        assert!(names.contains(needed), "the dashboard has no panel on {needed}");
    }
    assert!(server.terminate()?.success());
    Ok(())
}
