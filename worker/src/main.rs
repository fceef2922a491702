use std::path::PathBuf;
use std::time::Duration;

use actix_web::HttpServer;
use clap::Parser;
use packyard_core::services::Services;
use packyard_model::config::Loaded;
use packyard_worker::publisher::Publisher;
use packyard_worker::{management, process};

/// The Packyard publication worker.
#[derive(Parser)]
#[command(name = "packyard-worker", version)]
struct Cli {
    /// Configuration file (default: packyard.toml in the working directory, or PACKYARD_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let loaded = match Loaded::load(cli.config.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("packyard-worker: {e}");
            std::process::exit(2);
        }
    };
    packyard_core::telemetry::init(&loaded.config.log);
    let result = actix_web::rt::System::new().block_on(run(loaded));
    packyard_core::telemetry::flush();
    result
}

async fn run(loaded: Loaded) -> anyhow::Result<()> {
    let services = Services::start(loaded.config, true).await?;
    let cfg = services.config.clone();
    let timeout = Duration::from_secs(cfg.server.shutdown_timeout_secs);
    let listener = process::bind(cfg.server.management_bind, "server.management_bind")?;
    let addr = listener.local_addr()?;
    let s = services.clone();
    let server = HttpServer::new(move || management::app(s.clone()))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(timeout.as_secs())
        .listen(listener)?
        .run();
    tracing::info!(management = %addr, "packyard-worker ready");
    println!("packyard-worker listening on management http://{addr}");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    services.spawn_wakeup_consumer();
    services.spawn_wakeup_relay();
    packyard_worker::spawn_catalogue_backfill(&services);
    packyard_worker::spawn_usage_refresher(&services);
    packyard_worker::spawn_cleanup_scheduler(&services);
    packyard_worker::spawn_snapshot_scheduler(&services);
    packyard_worker::spawn_replicator(&services);
    packyard_worker::spawn_blob_reclaimer(&services);
    packyard_worker::spawn_digester(&services);
    packyard_worker::spawn_webhook_dispatcher(&services);
    packyard_worker::spawn_vulnerability_refresher(&services);
    let publisher = std::sync::Arc::new(Publisher::new(services.clone(), packyard_worker::builders(&services)));
    let worker = publisher.run(async move {
        let _ = stop_rx.await;
    });
    let handle = server.handle();
    let stopper = async move {
        process::stop_on_signal(vec![handle], timeout).await;
        let _ = stop_tx.send(());
    };
    let (served, (), ()) = tokio::join!(server, stopper, worker);
    served?;
    services.db.close().await;
    Ok(())
}
