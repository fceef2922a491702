use std::path::PathBuf;

use clap::{Parser, Subcommand};
use packyard_core::services::Services;
use packyard_model::config::Loaded;

/// Packyard: APT, Alpine APK, Go module and Conan 2 repositories.
#[derive(Parser)]
#[command(name = "packyard-api", version)]
struct Cli {
    /// Configuration file (default: packyard.toml in the working directory, or PACKYARD_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Blob store commands.
    Blobs {
        #[command(subcommand)]
        command: BlobsCommand,
    },
    /// Back up the database and every blob it lists into DIR (a new or empty directory); the
    /// server may keep running.
    Backup {
        #[arg(long, value_name = "DIR")]
        to: PathBuf,
    },
    /// Restore a backup into the configured database, which must be empty, and blob store (stop
    /// the servers first).
    Restore {
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
    },
    /// Copy another repository's packages into a Packyard repository (resumable: a second run
    /// goes on where the last stopped, and copies only what is new).
    Import {
        /// The source's format, or `nexus` (a Nexus Repository Manager 3: its repositories,
        /// roles, users and packages).
        format: String,
        /// The source: a directory or an http(s) URL (the repository's root; the README says
        /// what each format reads there). Credentials: in the URL, or in
        /// PACKYARD_IMPORT_USERNAME and PACKYARD_IMPORT_PASSWORD.
        #[arg(long, value_name = "DIR|URL", required_unless_present = "url", conflicts_with = "url")]
        from: Option<String>,
        /// The repository to copy into (a hosted one of the format); `import bundle`: by default
        /// the bundle's.
        #[arg(long, value_name = "REPOSITORY", conflicts_with = "url")]
        into: Option<String>,
        /// `import nexus`: the Nexus's root URL (credentials as for --from).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// `import nexus`: only this repository (and its packages; no users or roles).
        #[arg(long, value_name = "NAME", requires = "url")]
        repository: Option<String>,
        /// The public key the source's signed indexes must be signed by.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Only part of the source, as the format names its parts (the README lists them);
        /// may repeat.
        #[arg(long = "only", value_name = "NAME=VALUE")]
        only: Vec<String>,
        #[command(flatten)]
        options: ImportOptions,
    },
    /// Export a repository (or one of its snapshots) as a bundle for another instance: its
    /// components' blobs and a manifest signed with this instance's key (`import bundle` reads
    /// it). Resumable: run it again into the same directory.
    Export {
        #[arg(long, value_name = "NAME")]
        repository: String,
        /// One of the repository's snapshots instead of the repository as it is.
        #[arg(long, value_name = "SNAPSHOT")]
        snapshot: Option<String>,
        /// An earlier export's directory: only the blobs it did not carry are written.
        #[arg(long, value_name = "DIR")]
        since: Option<PathBuf>,
        /// A directory (made if missing), or `-` for a tar stream on standard output.
        #[arg(long, value_name = "DIR|-")]
        to: String,
    },
    /// Vulnerability data (OSV).
    Vulnerabilities {
        #[command(subcommand)]
        command: VulnerabilitiesCommand,
    },
    /// Administration commands.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Subcommand)]
enum VulnerabilitiesCommand {
    /// Import OSV advisories: a record or a list of records (JSON), a zip of record files
    /// (osv.dev's `all.zip`), a directory of record files, or a URL of a file (credentials as
    /// for `import`). Every record is checked before any is
    /// stored: a malformed one changes nothing.
    Import {
        /// FILE, DIR or URL.
        source: String,
    },
    /// Match every catalogued component against the advisories held and say how many each
    /// severity level affects (what `packyard_components_with_advisories` shows), and how long
    /// it took.
    Census,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Give a local user a new generated password (printed once) and end their web UI
    /// sessions; audited. For a lost admin password: run it where the server's configuration is.
    ResetPassword {
        /// The user name, e.g. admin.
        user: String,
    },
}

#[derive(clap::Args)]
struct ImportOptions {
    /// Copy nothing: print what would be copied.
    #[arg(long)]
    dry_run: bool,
    /// Files copied at once.
    #[arg(long, default_value_t = packyard_core::import::DEFAULT_CONCURRENCY)]
    concurrency: usize,
}

#[derive(Subcommand)]
enum BlobsCommand {
    /// Delete the artifact blobs nothing has referenced for `worker.blob_grace_secs`, and the
    /// build blobs no snapshot lists (what the worker does every `worker.blob_gc_secs`).
    Gc {
        /// Change nothing: print what would be freed now, and what is waiting for its grace period.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print every effective value and where it came from, secrets masked.
    Show,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let loaded = match Loaded::load(cli.config.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("packyard-api: {e}");
            std::process::exit(2);
        }
    };
    let result = run(cli, loaded);
    // Log lines still waiting for the writer thread.
    packyard_core::telemetry::flush();
    result
}

fn run(cli: Cli, loaded: Loaded) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Config { command: ConfigCommand::Show } => {
            print!("{}", loaded.show());
            Ok(())
        }
        Command::Migrate => {
            packyard_core::telemetry::init(&loaded.config.log);
            let mut config = loaded.config;
            // This command is the one that migrates, whatever the replicas are told.
            config.database.migrate_on_start = true;
            actix_web::rt::System::new().block_on(async move {
                let services = Services::start(config, true).await?;
                println!("migrations applied ({})", services.db.backend().as_str());
                services.db.close().await;
                Ok(())
            })
        }
        Command::Blobs { command: BlobsCommand::Gc { dry_run } } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(blobs_gc(loaded.config, dry_run))
        }
        Command::Backup { to } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(backup(loaded.config, &to))
        }
        Command::Restore { from } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(restore(loaded.config, &from))
        }
        Command::Import { format, from, into, url, repository, key, only, options } => {
            packyard_core::telemetry::init(&loaded.config.log);
            match (format.as_str(), url, from, into) {
                ("nexus", Some(url), _, _) => {
                    anyhow::ensure!(key.is_none() && only.is_empty(), "import nexus takes --url and --repository");
                    let run = import_nexus(loaded.config, &url, repository.as_deref(), options);
                    actix_web::rt::System::new().block_on(run)
                }
                ("nexus", None, _, _) => anyhow::bail!("import nexus --url URL [--repository NAME]"),
                ("bundle", None, Some(from), into) => {
                    anyhow::ensure!(only.is_empty(), "import bundle takes --from, --into, --key and --dry-run");
                    let run = import_bundle(loaded.config, &from, into, key, options.dry_run);
                    actix_web::rt::System::new().block_on(run)
                }
                (_, None, Some(from), Some(into)) => {
                    let asked = Import { format, from, into, key, only, options };
                    actix_web::rt::System::new().block_on(import(loaded.config, asked))
                }
                _ => anyhow::bail!("import {format} --from DIR|URL --into REPOSITORY (--url is import nexus's)"),
            }
        }
        Command::Export { repository, snapshot, since, to } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(export(loaded.config, repository, snapshot, since, &to))
        }
        Command::Vulnerabilities { command: VulnerabilitiesCommand::Import { source } } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(import_vulnerabilities(loaded.config, &source))
        }
        Command::Vulnerabilities { command: VulnerabilitiesCommand::Census } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(async {
                let services = existing(loaded.config).await?;
                let census = packyard_core::vulnerabilities::census(&services, packyard_formats::registry()).await;
                services.db.close().await;
                println!("{}", census?);
                Ok(())
            })
        }
        Command::Admin { command: AdminCommand::ResetPassword { user } } => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(reset_password(loaded.config, &user))
        }
        Command::Serve => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(packyard_api::startup::run(loaded.config))
        }
    }
}

/// The services of an installation that exists: a command that reads or changes it must not
/// create an empty database where there is none (in the wrong directory, say) nor migrate one.
async fn existing(config: packyard_model::config::Config) -> anyhow::Result<Services> {
    if config.is_sqlite() {
        let path = packyard_store::db::sqlite_file(&config.database.url).unwrap_or_default();
        anyhow::ensure!(
            path.is_file(),
            "no database at {} (database.url): run this where the server's configuration and data are",
            path.display()
        );
    }
    let services = Services::start(config, false).await?;
    anyhow::ensure!(
        services.db.migrations_applied().await.unwrap_or(false),
        "the database is not at this version's schema: start the server (or `packyard-api migrate`) first"
    );
    Ok(services)
}

/// What `packyard-api import` was asked.
struct Import {
    format: String,
    from: String,
    into: String,
    key: Option<PathBuf>,
    only: Vec<String>,
    options: ImportOptions,
}

/// `packyard-api import <format> …`: the plan (`--dry-run`) or the copy's failures and summary;
/// exits non-zero when anything failed.
async fn import(config: packyard_model::config::Config, asked: Import) -> anyhow::Result<()> {
    use packyard_core::import::{Fetcher, ImportArgs, Location, Options};
    let format: packyard_model::repos::Format = asked
        .format
        .parse()
        .map_err(|f| anyhow::anyhow!("{f}: not a format ({})", packyard_model::repos::Format::listed("or")))?;
    let spec = packyard_formats::registry().get(format);
    let key = match &asked.key {
        Some(path) => {
            Some(std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--key {}: {e}", path.display()))?)
        }
        None => None,
    };
    let only = asked
        .only
        .iter()
        .map(|o| o.split_once('=').map(|(n, v)| (n.to_string(), v.to_string())))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| anyhow::anyhow!("--only takes NAME=VALUE"))?;
    let mut from = Location::parse(&asked.from).map_err(|e| anyhow::anyhow!("--from {e}"))?;
    let credentials = credentials(&mut from)?;
    let source = from.name();
    let job = spec
        .import(ImportArgs { from, key, only })
        .ok_or_else(|| anyhow::anyhow!("Packyard has no importer of {format} yet"))?
        .map_err(anyhow::Error::msg)?;
    let services = existing(config).await?;
    let outcome = async {
        let into = &asked.into;
        let repo = services
            .security
            .repository(into)
            .await?
            .ok_or_else(|| anyhow::anyhow!("--into {into}: no such repository"))?;
        anyhow::ensure!(repo.format == format, "--into {into}: a {} repository, not a {format} one", repo.format);
        let o = Options {
            dry_run: asked.options.dry_run,
            concurrency: asked.options.concurrency,
            progress: !asked.options.dry_run,
        };
        let fetcher = Fetcher::new(&services.config)?;
        if let Some((user, password)) = &credentials {
            fetcher.basic(user, password);
        }
        let mut out = std::io::stdout();
        let summary = job.run(&services, (&fetcher, &source), &repo, &o, &mut out).await?;
        if !o.dry_run && summary.copied > 0 {
            // The servers' workers publish what was recorded (they also poll).
            services.wake();
        }
        println!("{summary}");
        anyhow::ensure!(
            summary.failed.is_empty(),
            "{} files were not copied (above); run the import again",
            summary.failed.len()
        );
        Ok(())
    }
    .await;
    services.db.close().await;
    outcome
}

/// `packyard-api export --repository NAME [--snapshot S] [--since DIR] --to DIR|-`.
async fn export(
    config: packyard_model::config::Config,
    repository: String,
    snapshot: Option<String>,
    since: Option<PathBuf>,
    to: &str,
) -> anyhow::Result<()> {
    use packyard_core::bundle::{ExportArgs, ExportTarget};
    let target = if to == "-" {
        ExportTarget::Tar(Box::new(tokio::io::BufWriter::new(std_stream(&std::io::stdout())?)))
    } else {
        let dir = PathBuf::from(to);
        std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("--to {to}: {e}"))?;
        ExportTarget::Dir(dir)
    };
    let services = existing(config).await?;
    let args = ExportArgs { repository, snapshot, since, to: target };
    let done = packyard_core::bundle::export(&services, packyard_formats::registry(), args).await;
    services.db.close().await;
    let report = done?;
    // The tar stream is standard output: the report goes to standard error then.
    if to == "-" {
        eprintln!("{report}");
    } else {
        println!("{report}");
    }
    Ok(())
}

/// Standard input or output as an asynchronous file (a duplicate of its descriptor).
fn std_stream(stream: &impl std::os::fd::AsFd) -> anyhow::Result<tokio::fs::File> {
    let fd = stream.as_fd().try_clone_to_owned()?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(fd)))
}

/// `packyard-api import bundle --from DIR|FILE|- [--into NAME] [--key KEY] [--dry-run]`.
async fn import_bundle(
    config: packyard_model::config::Config,
    from: &str,
    into: Option<String>,
    key: Option<PathBuf>,
    dry_run: bool,
) -> anyhow::Result<()> {
    use packyard_core::bundle::{ImportArgs, ImportSource};
    let source = if from == "-" {
        ImportSource::Tar(Box::new(tokio::io::BufReader::new(std_stream(&std::io::stdin())?)))
    } else if std::path::Path::new(from).is_dir() {
        ImportSource::Dir(PathBuf::from(from))
    } else {
        let file = tokio::fs::File::open(from).await.map_err(|e| anyhow::anyhow!("--from {from}: {e}"))?;
        ImportSource::Tar(Box::new(tokio::io::BufReader::new(file)))
    };
    // The exporting instance's public key or fingerprint, or a file holding one (its bundle's
    // manifest.sig too).
    let key = match key {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("--key {}: {e}", path.display()))?;
            let from_sig = serde_json::from_str::<packyard_core::bundle::Signature>(&text).ok().map(|s| s.public_key);
            Some(from_sig.unwrap_or_else(|| text.trim().to_string()))
        }
        None => None,
    };
    let services = existing(config).await?;
    let args = ImportArgs { from: source, into, key, dry_run };
    let done = packyard_core::bundle::import(&services, packyard_formats::registry(), args).await;
    if done.as_ref().is_ok_and(|r| !r.changes.is_empty()) {
        services.wake();
    }
    services.db.close().await;
    let report = done?;
    println!("{}{report}", if dry_run { "dry run: " } else { "" });
    Ok(())
}

/// A source's user name and password: taken out of its URL, or from the environment.
fn credentials(from: &mut packyard_core::import::Location) -> anyhow::Result<Option<(String, String)>> {
    use packyard_core::import::{PASSWORD_ENV, USERNAME_ENV};
    if let Some(found) = from.take_credentials() {
        return Ok(Some(found));
    }
    match (std::env::var(USERNAME_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), password) => Ok(Some((user, password.unwrap_or_default()))),
        (Err(_), Ok(_)) => anyhow::bail!("{PASSWORD_ENV} is set but {USERNAME_ENV} is not: set both"),
        (Err(_), Err(_)) => Ok(None),
    }
}

/// `packyard-api import nexus --url URL [--repository NAME]`: the report, line by line, and its
/// summary; exits non-zero when a package was not copied.
async fn import_nexus(
    config: packyard_model::config::Config,
    url: &str,
    repository: Option<&str>,
    options: ImportOptions,
) -> anyhow::Result<()> {
    use packyard_core::import::{Fetcher, Location, Options};
    let mut at = Location::parse(url).map_err(|e| anyhow::anyhow!("--url {e}"))?;
    anyhow::ensure!(matches!(at, Location::Url(_)), "--url {url}: the Nexus's http(s) URL");
    let credentials = credentials(&mut at)?;
    let services = existing(config).await?;
    let outcome = async {
        let fetcher = Fetcher::new(&services.config)?;
        if let Some((user, password)) = &credentials {
            fetcher.basic(user, password);
        }
        let o = Options { dry_run: options.dry_run, concurrency: options.concurrency, progress: !options.dry_run };
        let mut out = std::io::stdout();
        let report = packyard_api::nexus::import::run(&services, &fetcher, &at, repository, &o, &mut out).await?;
        if !o.dry_run {
            services.wake();
        }
        println!("{report}");
        anyhow::ensure!(
            report.assets.failed.is_empty(),
            "{} packages were not copied (above); run the import again",
            report.assets.failed.len()
        );
        Ok(())
    }
    .await;
    services.db.close().await;
    outcome
}

/// `packyard-api vulnerabilities import FILE|DIR|URL`.
async fn import_vulnerabilities(config: packyard_model::config::Config, source: &str) -> anyhow::Result<()> {
    let services = existing(config).await?;
    let outcome = async {
        let mut at = packyard_core::import::Location::parse(source);
        let credentials = match at.as_mut() {
            Ok(at) => credentials(at)?,
            Err(_) => None,
        };
        let (shown, records) = packyard_worker::read_osv_source(&services, source, credentials).await?;
        let formats = packyard_formats::registry();
        let done = packyard_core::vulnerabilities::import(&services, formats, &records, &shown).await?;
        println!("{done}");
        Ok(())
    }
    .await;
    services.db.close().await;
    outcome
}

/// `packyard-api backup --to DIR`.
async fn backup(config: packyard_model::config::Config, to: &std::path::Path) -> anyhow::Result<()> {
    let services = existing(config).await?;
    let report = packyard_core::backup::backup(&services.config, &services.db, services.blobs.clone(), to).await;
    services.db.close().await;
    let report = report?;
    let m = &report.manifest;
    println!(
        "backed up the {} database and {} blobs ({} bytes) into {}{}",
        m.backend,
        m.blobs,
        m.blob_bytes,
        report.dir.display(),
        if m.secret == "configuration" { "; security.secret is configured: restore with the same value" } else { "" }
    );
    Ok(())
}

/// `packyard-api restore --from DIR`.
async fn restore(config: packyard_model::config::Config, from: &std::path::Path) -> anyhow::Result<()> {
    let metrics = std::sync::Arc::new(packyard_store::metrics::Metrics::new()?);
    std::fs::create_dir_all(&config.server.data_dir)?;
    let report = packyard_core::backup::restore(&config, metrics, from).await?;
    println!(
        "restored the {} database of {} and {} blobs ({} written, {} already in the blob store); start the server",
        report.manifest.backend,
        report.manifest.created_at,
        report.blobs_written + report.blobs_present,
        report.blobs_written,
        report.blobs_present
    );
    Ok(())
}

/// `packyard-api admin reset-password USER`: the new password on standard output, alone.
async fn reset_password(config: packyard_model::config::Config, user: &str) -> anyhow::Result<()> {
    let services = existing(config).await?;
    let actor = match std::env::var("USER") {
        Ok(u) if !u.is_empty() => format!("{u} (command line)"),
        _ => "(command line)".to_string(),
    };
    let reset = services.security.reset_password(user, &actor).await;
    // Replicas drop cached decisions at their next watermark check, or now through Redis.
    if let (Ok(Some(_)), Some(redis)) = (&reset, &services.redis) {
        redis.announce(packyard_core::events::Changed::Security).await;
    }
    services.db.close().await;
    match reset? {
        Some(password) => {
            println!("{password}");
            eprintln!("the password of {user} was reset; their web UI sessions ended (API tokens stay valid)");
            Ok(())
        }
        None => anyhow::bail!("no local user {user:?}: list them with GET /api/v1/users"),
    }
}

/// `packyard-api blobs gc [--dry-run]`: one line per unreferenced artifact blob, then totals.
async fn blobs_gc(config: packyard_model::config::Config, dry_run: bool) -> anyhow::Result<()> {
    use packyard_core::reclaim::Verdict;
    use packyard_model::time::rfc3339_ms;
    let services = Services::start(config, true).await?;
    let freed = if dry_run { "would free" } else { "freed" };
    let report =
        packyard_core::reclaim::sweep(
            &services,
            packyard_formats::registry(),
            dry_run,
            |blob, verdict| match verdict {
                Verdict::Freed => println!("{freed} {} {} bytes", blob.sha256, blob.size),
                Verdict::Waiting { from } => {
                    println!(
                        "waiting {} {} bytes (unreferenced; free from {})",
                        blob.sha256,
                        blob.size,
                        rfc3339_ms(from)
                    )
                }
            },
        )
        .await?;
    // Bytes in the store that no row names (the store's own listing).
    let strays = packyard_core::reclaim::sweep_strays(&services, dry_run, |blob, verdict| match verdict {
        Verdict::Freed => println!("{freed} {} {} bytes (stored, no row)", blob.digest, blob.size),
        Verdict::Waiting { from } => {
            println!("waiting {} {} bytes (stored, no row; free from {})", blob.digest, blob.size, rfc3339_ms(from))
        }
    })
    .await?;
    println!(
        "{freed} {} blobs, {} bytes; {} unreferenced blobs ({} bytes) within the grace period of {} s (worker.blob_grace_secs); {} build blobs{}",
        report.freed,
        report.freed_bytes,
        report.waiting,
        report.waiting_bytes,
        services.config.worker.blob_grace_secs,
        report.build_blobs,
        if dry_run { " collectable" } else { " collected" },
    );
    println!(
        "{freed} {} stray blobs (stored, no row), {} bytes; {} stray blobs ({} bytes) within the grace period",
        strays.freed, strays.freed_bytes, strays.waiting, strays.waiting_bytes,
    );
    services.db.close().await;
    Ok(())
}
