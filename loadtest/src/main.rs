//! `packyard-loadtest compare …`: side-by-side measurement (see the crate docs and
//! `loadtest/README.md`); `packyard-loadtest fixture apt …`: a deterministic generated `.deb`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use packyard_loadtest::{apt, markdown, run_scenario, Gate, Options, Scenario, Target};

#[derive(Parser)]
#[command(name = "packyard-loadtest", version, about = "Measures servers side by side: same host, same bytes, ratios")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Preflight, warm up and measure every scenario on every target.
    Compare {
        /// NAME=URL (the base every scenario path is relative to); the first is compared with the others.
        #[arg(long = "target", required = true)]
        targets: Vec<String>,
        /// get:PATH, head:PATH, cond:PATH (304 via If-None-Match), range:PATH (bytes=0-65535), upload:apt.
        #[arg(long = "scenario", required = true)]
        scenarios: Vec<String>,
        #[arg(long, default_value_t = 250)]
        requests: usize,
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        #[arg(long, default_value_t = 2000)]
        warmup_requests: usize,
        #[arg(long, default_value_t = 5.0)]
        warmup_seconds: f64,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// user:password for uploads.
        #[arg(long)]
        auth: Option<String>,
        /// user:password for reads (otherwise anonymous).
        #[arg(long)]
        read_auth: Option<String>,
        /// Size of each uploaded package's payload.
        #[arg(long, default_value_t = 4 * 1024 * 1024)]
        upload_bytes: usize,
        #[arg(long, default_value_t = 16)]
        upload_warmup: usize,
        /// Where uploads must become visible (relative to the target).
        #[arg(long, default_value = "dists/stable/main/binary-amd64/Packages")]
        visible_in: String,
        #[arg(long)]
        output: Option<PathBuf>,
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// SCENARIO:min_ratio:max_p95_ratio (the first target against each other one).
        #[arg(long = "gate")]
        gates: Vec<String>,
    },
    /// Mixed reads and uploads through a load balancer with a fault at every interval; then
    /// checks that every acknowledged upload is published (exit status 1 if not).
    Soak {
        /// The load balancer's base URL (e.g. http://127.0.0.1:18080).
        #[arg(long)]
        target: String,
        /// NAME=URL of a process's management listener, sampled for RSS and open fds.
        #[arg(long = "process")]
        processes: Vec<String>,
        /// user:password.
        #[arg(long)]
        auth: String,
        #[arg(long, default_value_t = 600)]
        seconds: u64,
        #[arg(long, default_value_t = 60)]
        fault_every: u64,
        /// A shell command that injects a fault; several are cycled.
        #[arg(long = "fault")]
        faults: Vec<String>,
        #[arg(long, default_value_t = 4)]
        readers: usize,
        #[arg(long, default_value_t = 2)]
        uploaders: usize,
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// One upload at a time into a hosted APT repository (after seeding it with --seed
    /// packages): the time from each 201 until `Release` has changed and `Packages` lists it.
    Visible {
        /// The repository's base URL, e.g. http://127.0.0.1:8080/repository/debs/.
        #[arg(long)]
        target: String,
        /// user:password.
        #[arg(long)]
        auth: String,
        #[arg(long, default_value_t = 0)]
        seed: usize,
        #[arg(long, default_value_t = 256)]
        seed_bytes: usize,
        #[arg(long, default_value_t = 16)]
        seed_concurrency: usize,
        #[arg(long, default_value_t = 20)]
        samples: usize,
        /// Idle time before each upload.
        #[arg(long, default_value_t = 300)]
        pause_ms: u64,
        /// Where to write the samples (JSON).
        #[arg(long)]
        output: Option<PathBuf>,
        /// The repository whose `Packages` must list each upload (a group over the target);
        /// the target itself when not given.
        #[arg(long)]
        watch: Option<String>,
        /// The distribution uploads go to and are looked for in.
        #[arg(long, default_value = "stable")]
        dist: String,
    },
    /// The framework's ceiling: a bare actix-web server answering each --path from memory with
    /// exactly what --from answered for it (status, headers, bytes; 304 on a matching
    /// validator), no middleware and no log. Runs until killed.
    Bare {
        /// Where to listen, e.g. 127.0.0.1:8089.
        #[arg(long)]
        bind: String,
        /// The target whose answers it serves (the base the paths are relative to).
        #[arg(long)]
        from: String,
        #[arg(long = "path", required = true)]
        paths: Vec<String>,
        /// Worker threads (Packyard's `server.workers` default: one per core).
        #[arg(long, default_value_t = 0)]
        workers: usize,
    },
    /// Writes a deterministic generated package.
    Fixture {
        #[command(subcommand)]
        format: Fixture,
    },
}

#[derive(Subcommand)]
enum Fixture {
    /// A module zip with go.mod and an incompressible payload of --bytes (same arguments, same
    /// bytes).
    Go {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "example.com/bench")]
        module: String,
        #[arg(long, default_value = "v1.0.0")]
        version: String,
        #[arg(long, default_value_t = 1024 * 1024)]
        bytes: usize,
    },
    /// An unsigned apk v2 package with an incompressible payload of --bytes (same arguments,
    /// same bytes).
    Apk {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value = "packyard-bench")]
        name: String,
        #[arg(long, default_value = "1.0-r0")]
        version: String,
        #[arg(long, default_value = "x86_64")]
        arch: String,
        #[arg(long, default_value_t = 4 * 1024 * 1024)]
        bytes: usize,
    },
    /// A .deb with an uncompressed payload of --bytes (same arguments, same bytes); with
    /// --count N, N packages <name>-0 … <name>-(N-1) written into the directory --out.
    Apt {
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        count: Option<usize>,
        #[arg(long, default_value = "packyard-bench")]
        name: String,
        #[arg(long, default_value = "1.0")]
        version: String,
        #[arg(long, default_value = "amd64")]
        arch: String,
        #[arg(long, default_value_t = 4 * 1024 * 1024)]
        bytes: usize,
    },
}

fn environment() -> serde_json::Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    serde_json::json!({
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": kernel,
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
    })
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Soak { target, processes, auth, seconds, fault_every, faults, readers, uploaders, markdown: md } => {
            let processes = processes
                .iter()
                .map(|p| p.split_once('=').map(|(n, u)| (n.to_string(), u.to_string())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| anyhow::anyhow!("--process wants NAME=URL"))?;
            let opts = packyard_loadtest::soak::SoakOptions {
                target,
                processes,
                auth,
                duration: std::time::Duration::from_secs(seconds),
                fault_every: std::time::Duration::from_secs(fault_every.max(1)),
                faults,
                readers,
                uploaders,
            };
            let (report, ok) = packyard_loadtest::soak::run(&opts)?;
            print!("{report}");
            if let Some(path) = md {
                std::fs::write(path, &report)?;
            }
            anyhow::ensure!(ok, "the soak found acknowledged uploads that were not published (or none at all)");
            Ok(())
        }
        Command::Fixture { format: Fixture::Go { out, module, version, bytes } } => {
            std::fs::write(&out, packyard_loadtest::go::module_zip(&module, &version, &apt::filler(42, bytes))?)?;
            Ok(())
        }
        Command::Fixture { format: Fixture::Apk { out, name, version, arch, bytes } } => {
            std::fs::write(&out, packyard_loadtest::apk::apk(&name, &version, &arch, &apt::filler(42, bytes))?)?;
            Ok(())
        }
        Command::Fixture { format: Fixture::Apt { out, count: None, name, version, arch, bytes } } => {
            let deb = apt::deb(&name, &version, &arch, &apt::filler(42, bytes))?;
            std::fs::write(&out, deb)?;
            Ok(())
        }
        Command::Fixture { format: Fixture::Apt { out, count: Some(n), name, version, arch, bytes } } => {
            std::fs::create_dir_all(&out)?;
            let payload = apt::filler(42, bytes);
            for i in 0..n {
                let name = format!("{name}-{i}");
                std::fs::write(
                    out.join(format!("{name}_{version}_{arch}.deb")),
                    apt::deb(&name, &version, &arch, &payload)?,
                )?;
            }
            Ok(())
        }
        Command::Bare { bind, from, paths, workers } => {
            let files = packyard_loadtest::bare::record(&from, &paths)?;
            let workers =
                if workers == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { workers };
            eprintln!("bare: {} paths from {from} on {bind}, {workers} workers", files.len());
            packyard_loadtest::bare::run(&bind, workers, files)
        }
        Command::Visible {
            target,
            auth,
            seed,
            seed_bytes,
            seed_concurrency,
            samples,
            pause_ms,
            output,
            watch,
            dist,
        } => {
            anyhow::ensure!(samples > 0, "--samples must be at least 1");
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            rt.block_on(async {
                if seed > 0 {
                    let took =
                        packyard_loadtest::visibility::seed(&target, &auth, seed, seed_bytes, seed_concurrency).await?;
                    eprintln!("seeded {seed} packages in {:.1} s", took.as_secs_f64());
                }
                let run = format!("{:x}", std::process::id());
                let watch = packyard_loadtest::visibility::Watch {
                    target: &target,
                    watched: watch.as_deref().unwrap_or(&target),
                    dist: &dist,
                };
                let ms = packyard_loadtest::visibility::measure(
                    &watch,
                    &auth,
                    samples,
                    std::time::Duration::from_millis(pause_ms),
                    &run,
                )
                .await?;
                let mut sorted = ms.clone();
                sorted.sort_by(f64::total_cmp);
                let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
                println!(
                    "visible after ms: p50 {:.1} p95 {:.1} max {:.1} ({} samples)",
                    at(0.5),
                    at(0.95),
                    at(1.0),
                    ms.len()
                );
                if let Some(path) = output {
                    std::fs::write(
                        path,
                        serde_json::to_vec_pretty(&serde_json::json!({ "seed": seed, "samples_ms": ms }))?,
                    )?;
                }
                Ok(())
            })
        }
        Command::Compare {
            targets,
            scenarios,
            requests,
            concurrency,
            warmup_requests,
            warmup_seconds,
            rounds,
            auth,
            read_auth,
            upload_bytes,
            upload_warmup,
            visible_in,
            output,
            markdown: md,
            gates,
        } => {
            let targets: Vec<Target> = targets.iter().map(|t| Target::parse(t)).collect::<anyhow::Result<_>>()?;
            let scenarios: Vec<Scenario> =
                scenarios.iter().map(|s| Scenario::parse(s)).collect::<anyhow::Result<_>>()?;
            let gates: Vec<Gate> = gates.iter().map(|g| Gate::parse(g)).collect::<anyhow::Result<_>>()?;
            let opts = Options {
                requests,
                concurrency,
                warmup_requests,
                warmup_seconds,
                rounds,
                auth,
                read_auth,
                upload_bytes,
                upload_warmup,
                visible_in,
            };
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            let mut results = Vec::new();
            for s in &scenarios {
                eprintln!("scenario {} …", s.name);
                let r = rt.block_on(run_scenario(s, &targets, &opts))?;
                for t in &r.targets {
                    eprintln!(
                        "  {:<12} {:>9.0} req/s {:>8.1} MiB/s  p50 {:.2} ms  p95 {:.2} ms",
                        t.target, t.summary.req_per_sec, t.summary.mib_per_sec, t.summary.p50_ms, t.summary.p95_ms
                    );
                }
                results.push(r);
            }
            let failures: Vec<String> = gates.iter().flat_map(|g| g.check(&results)).collect();
            let report = serde_json::json!({
                "environment": environment(),
                "targets": targets,
                "options": {
                    "requests": requests, "concurrency": concurrency, "warmup_requests": warmup_requests,
                    "warmup_seconds": warmup_seconds, "rounds": rounds,
                },
                "scenarios": results,
                "gates": gates,
                "gate_failures": failures,
            });
            if let Some(p) = output {
                std::fs::write(p, serde_json::to_vec_pretty(&report)?)?;
            }
            let table = markdown(&results, &opts);
            match md {
                Some(p) => std::fs::write(p, &table)?,
                None => print!("{table}"),
            }
            for f in &failures {
                eprintln!("{f}");
            }
            anyhow::ensure!(failures.is_empty(), "{} gate(s) failed", failures.len());
            Ok(())
        }
    }
}
