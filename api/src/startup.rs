//! Startup of the api process: services, bootstrap admin, both listeners, graceful shutdown.

use std::net::SocketAddr;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::HttpServer;
use packyard_core::auth::{bootstrap_admin, Bootstrap};
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_worker::publisher::Publisher;
use packyard_worker::{management, process};

/// A started api process: its servers and the addresses they listen on.
pub struct Running {
    pub services: Services,
    /// Stops the embedded worker (when `worker.embedded`), and its task (which ends once the
    /// builds in flight are done).
    pub worker_stop: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
    pub public: Server,
    pub management: Server,
    pub public_addr: SocketAddr,
    pub management_addr: SocketAddr,
    /// The plain-HTTP listener that redirects to HTTPS (`server.tls.redirect_bind`).
    pub redirect: Option<(Server, SocketAddr)>,
    /// Whether the public (and the management) listener speaks HTTPS.
    pub https: bool,
    pub management_https: bool,
}

impl Running {
    /// The line a person (and the tests) read to find the listeners:
    /// `packyard-api listening on https://A (management http://B) (redirect from http://C)`.
    pub fn listening_line(&self) -> String {
        let scheme = |tls: bool| if tls { "https" } else { "http" };
        let mut line = format!(
            "packyard-api listening on {}://{} (management {}://{})",
            scheme(self.https),
            self.public_addr,
            scheme(self.management_https),
            self.management_addr
        );
        if let Some((_, addr)) = &self.redirect {
            line.push_str(&format!(" (redirect from http://{addr})"));
        }
        line
    }
}

/// Brings up everything and binds both listeners; the servers run when awaited.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let services = Services::start(config, true).await?;
    let cfg = services.config.clone();
    services.security.ensure_builtin_roles().await?;
    services.poll_watermarks().await?;
    match bootstrap_admin(&services.db, cfg.security.admin_password.as_deref(), &cfg.server.data_dir).await? {
        Bootstrap::AlreadyPresent => {}
        Bootstrap::CreatedFromConfig => {
            tracing::info!("created user admin with the password from security.admin_password");
        }
        Bootstrap::Generated { password, file } => {
            tracing::info!(file = %file.display(), "created user admin with a generated password");
            // Printed once, to the terminal of whoever started the first run.
            println!("Generated password for user admin: {password} (also in {})", file.display());
        }
    }
    let timeout = cfg.server.shutdown_timeout_secs;
    let certificates = match cfg.server.tls.files() {
        Some((certificate, key)) => Some(crate::tls::Certificates::load(certificate, key)?),
        None => None,
    };
    let public_listener = process::bind(cfg.server.bind, "server.bind")?;
    let management_listener = process::bind(cfg.server.management_bind, "server.management_bind")?;
    let public_addr = public_listener.local_addr()?;
    let management_addr = management_listener.local_addr()?;
    let header_timeout = Duration::from_millis(cfg.server.header_timeout_ms);
    let s = services.clone();
    // TCP_NODELAY: the last segment of a response must not wait for the client's delayed ACK
    // (a 1 MiB Go zip had a 43 ms p95 from exactly that stall).
    let mut public = HttpServer::new(move || crate::app::public_app(s.clone()))
        .tcp_nodelay(true)
        .disable_signals()
        .client_request_timeout(header_timeout)
        .tls_handshake_timeout(header_timeout)
        .shutdown_timeout(timeout);
    if cfg.server.workers > 0 {
        public = public.workers(cfg.server.workers);
    }
    let public = match &certificates {
        Some(c) => public.listen_rustls_0_23(public_listener, c.server_config()?)?,
        None => public.listen(public_listener)?,
    }
    .run();
    let s = services.clone();
    let management =
        HttpServer::new(move || management::app(s.clone())).workers(1).disable_signals().shutdown_timeout(timeout);
    let management_https = cfg.server.tls.management && certificates.is_some();
    let management = match &certificates {
        Some(c) if management_https => management.listen_rustls_0_23(management_listener, c.server_config()?)?,
        _ => management.listen(management_listener)?,
    }
    .run();
    let redirect = match (cfg.server.tls.redirect_bind, &certificates) {
        (Some(addr), Some(_)) => {
            let listener = process::bind(addr, "server.tls.redirect_bind")?;
            let addr = listener.local_addr()?;
            let to = crate::tls::RedirectTo::new(cfg.server.public_url.as_deref(), public_addr.port());
            let server = HttpServer::new(move || crate::tls::redirect_app(to.clone()))
                .workers(1)
                .disable_signals()
                .client_request_timeout(header_timeout)
                .shutdown_timeout(timeout)
                .listen(listener)?
                .run();
            Some((server, addr))
        }
        _ => None,
    };
    if let Some(c) = &certificates {
        c.spawn_reloader(Duration::from_millis(cfg.server.tls.reload_check_ms));
    }
    // Keeps cached decisions and repository records in step with the database.
    services.spawn_cache_keepers();
    // Changes this replica commits wake the workers through RabbitMQ, relayed from the outbox.
    services.spawn_wakeup_relay();
    let worker_stop = if cfg.worker.embedded {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let publisher = std::sync::Arc::new(Publisher::new(services.clone(), packyard_worker::builders(&services)));
        services.spawn_wakeup_consumer();
        packyard_worker::spawn_catalogue_backfill(&services);
        packyard_worker::spawn_usage_refresher(&services);
        packyard_worker::spawn_cleanup_scheduler(&services);
        packyard_worker::spawn_snapshot_scheduler(&services);
        packyard_worker::spawn_replicator(&services);
        packyard_worker::spawn_blob_reclaimer(&services);
        packyard_worker::spawn_digester(&services);
        packyard_worker::spawn_webhook_dispatcher(&services);
        packyard_worker::spawn_vulnerability_refresher(&services);
        let task = actix_web::rt::spawn(publisher.run(async move {
            let _ = rx.await;
        }));
        Some((tx, task))
    } else {
        None
    };
    Ok(Running {
        services,
        worker_stop,
        public,
        management,
        public_addr,
        management_addr,
        redirect,
        https: certificates.is_some(),
        management_https,
    })
}

/// Runs until SIGTERM/SIGINT, then stops gracefully.
pub async fn run(config: Config) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(config.server.shutdown_timeout_secs);
    let running = start(config).await?;
    tracing::info!(public = %running.public_addr, management = %running.management_addr, "packyard-api ready");
    println!("{}", running.listening_line());
    let mut handles = vec![running.public.handle(), running.management.handle()];
    let redirect = running.redirect.map(|(server, _)| {
        handles.push(server.handle());
        server
    });
    let stopper = process::stop_on_signal(handles, timeout);
    let redirect = async move {
        match redirect {
            Some(server) => server.await,
            None => Ok(()),
        }
    };
    let (public, management, redirected, ()) = tokio::join!(running.public, running.management, redirect, stopper);
    redirected?;
    if let Some((stop, task)) = running.worker_stop {
        let _ = stop.send(());
        // The builds in flight finish (within the shutdown time-out) before the pool closes.
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "the publication worker failed"),
            Err(_) => tracing::warn!("builds still running at shutdown; their units are built again after the lease"),
        }
    }
    public?;
    management?;
    if let Err(e) = running.services.downloads.flush(&running.services.db).await {
        tracing::warn!(error = %e, "cannot write the last download statistics");
    }
    running.services.db.close().await;
    tracing::info!("stopped");
    Ok(())
}
