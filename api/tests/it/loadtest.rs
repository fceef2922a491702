//! The comparison runner against a real server: every scenario kind preflights, measures and
//! reports; a target serving other bytes fails the preflight; a gate that is not met fails.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use common::process::{basic, start, status_of};
use packyard_loadtest::{apt, run_scenario, Gate, Options, Scenario, Target};

const PW: &str = "loadtest-admin";

fn opts() -> Options {
    Options {
        requests: 40,
        concurrency: 4,
        warmup_requests: 20,
        warmup_seconds: 0.1,
        rounds: 2,
        auth: Some(format!("admin:{PW}")),
        read_auth: None,
        upload_bytes: 64 * 1024,
        upload_warmup: 2,
        visible_in: "dists/stable/main/binary-amd64/Packages".into(),
    }
}

#[test]
fn the_runner_measures_a_real_server() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server = start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    server.wait_ready()?;
    let deb = apt::deb("packyard-bench", "1.0", "amd64", &apt::filler(42, 200_000))?;
    let other = apt::deb("packyard-bench", "1.0", "amd64", &apt::filler(43, 200_000))?;
    for (repo, bytes) in [("debs", &deb), ("copy", &deb), ("other", &other)] {
        let (s, body) = status_of(
            ureq::post(&format!("{}/api/v1/repositories", server.public))
                .set("Authorization", &basic(PW))
                .send_json(Repo::hosted(repo, Format::Apt)),
        )?;
        assert_eq!(s, 201, "{body}");
        let (s, body) = status_of(
            ureq::post(&format!("{}/repository/{repo}/?wait=true", server.public))
                .set("Authorization", &basic(PW))
                .send_bytes(bytes),
        )?;
        assert_eq!(s, 201, "{body}");
    }
    let target = |name: &str, repo: &str| Target::parse(&format!("{name}={}/repository/{repo}/", server.public));
    let targets = vec![target("debs", "debs")?, target("copy", "copy")?];
    let pool = "pool/main/p/packyard-bench/packyard-bench_1.0_amd64.deb";
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut results = Vec::new();
    for s in [
        "get:dists/stable/InRelease".to_string(),
        "get:dists/stable/main/binary-amd64/Packages.gz".into(),
        format!("get:{pool}"),
        format!("head:{pool}"),
        "cond:dists/stable/main/binary-amd64/Packages.gz".into(),
        format!("range:{pool}"),
        "upload:apt".into(),
    ] {
        let scenario = Scenario::parse(&s)?;
        let r = rt.block_on(run_scenario(&scenario, &targets, &opts()))?;
        assert_eq!(r.targets.len(), 2);
        for t in &r.targets {
            assert_eq!(t.rounds.len(), 2, "{s}");
            assert!(t.rounds.iter().all(|f| f.requests >= 40 && f.req_per_sec > 0.0), "{s}: {:?}", t.rounds);
            assert!(
                t.summary.p50_ms > 0.0 && t.summary.p95_ms >= t.summary.p50_ms && t.summary.max_ms >= t.summary.p95_ms
            );
            assert_eq!(t.visible_ms.is_some(), scenario.expected_status() == 201, "{s}");
        }
        assert_eq!(r.ratios.len(), 1);
        assert!(r.ratios[0].throughput > 0.0);
        assert!(!r.preflight.is_empty());
        if s == format!("get:{pool}") {
            // 200 kB bodies: the byte rate follows the request rate.
            let f = &r.targets[0].summary;
            let expected = f.req_per_sec * deb.len() as f64 / 1_048_576.0;
            assert!((f.mib_per_sec / expected - 1.0).abs() < 0.05, "{f:?} for {} bytes", deb.len());
        }
        results.push(r);
    }
    assert!(
        results[1].preflight.iter().any(|n| n.contains("same package set on every target (1 packages)")),
        "{:?}",
        results[1].preflight
    );
    let md = packyard_loadtest::markdown(&results, &opts());
    assert!(md.contains("| `range:pool/main/p/packyard-bench/packyard-bench_1.0_amd64.deb` | copy |"), "{md}");

    // Gates: an impossible one fails with a message, a lenient one passes.
    assert!(Gate::parse("get:dists/stable/InRelease:0.01:100")?.check(&results).is_empty());
    let failed = Gate::parse("get:dists/stable/InRelease:1000:0.001")?.check(&results);
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(failed[0].contains("minimum 1000.00×"), "{failed:?}");
    assert_eq!(
        Gate::parse("get:nope:1:1")?.check(&results),
        vec!["gate get:nope: no such scenario was run".to_string()]
    );

    // Preflight: a target with other bytes at the same path, or without the path, fails the run.
    let mismatched = vec![target("debs", "debs")?, target("other", "other")?];
    let err = rt
        .block_on(run_scenario(&Scenario::parse(&format!("get:{pool}"))?, &mismatched, &opts()))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("other serves other bytes"), "{err}");
    let err = rt
        .block_on(run_scenario(&Scenario::parse("get:dists/nope/InRelease")?, &targets, &opts()))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("debs answered 404 to GET dists/nope/InRelease"), "{err}");

    // Go: module publishes (the runner's generated zips pass the server's checks) and reads.
    let (s, body) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(Repo::hosted("gomods", Format::Go)),
    )?;
    assert_eq!(s, 201, "{body}");
    let go_target = vec![target("gomods", "gomods")?];
    let r = rt.block_on(run_scenario(&Scenario::parse("upload:go")?, &go_target, &opts()))?;
    let t = &r.targets[0];
    assert!(t.rounds.iter().all(|f| f.requests >= 40), "{:?}", t.rounds);
    assert!(t.visible_ms.is_some_and(|v| v >= 0.0));
    assert!(server.terminate()?.success());
    Ok(())
}
