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
        Command::Serve => {
            packyard_core::telemetry::init(&loaded.config.log);
            actix_web::rt::System::new().block_on(packyard_api::startup::run(loaded.config))
        }
    }
}
