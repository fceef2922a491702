//! `packyard-api backup --to DIR` and `packyard-api restore --from DIR`: a consistent copy of
//! the database and of every blob it lists, and the way back.
//!
//! A backup directory holds
//! - `database/`: `packyard.db` (SQLite's online copy, `VACUUM INTO`), or `postgres.sql`
//!   (`pg_dump` of the snapshot the blob list is read in), or `mysql.sql` (`mariadb-dump
//!   --single-transaction`);
//! - `blobs.txt`: one `sha256 size` line per row of the copy's `blobs` table, and `blobs/aa/bb/<sha256>`
//!   the bytes of each, checked against their hash as they are copied;
//! - `secret`: the generated `security.secret` (SQLite deployments), which seals the stored keys;
//! - `packyard-backup.json`: written last, so a directory without it is not a backup.
//!
//! Consistency: the blob list is read from the database copy itself (SQLite), or in the same
//! snapshot `pg_dump` exports (PostgreSQL), or right after the dump (MySQL); and while the backup
//! runs, the collectors delete no blob (`Db::hold_blob_collection`, set before the copy is
//! taken), so every blob the copy lists is still there to be copied. Uploads may go on
//! meanwhile: what they add after the snapshot is not in the backup, what the snapshot lists is.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::{Connection, Executor, Row};

use packyard_model::config::Config;
use packyard_store::blobs::{BlobStore, Sha256Hex};
use packyard_store::db::{Backend, Db};

/// `packyard-backup.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// The layout's version (1).
    pub format: u32,
    pub created_at: String,
    /// `sqlite`, `postgres` or `mysql`: a backup restores into the same kind of database.
    pub backend: String,
    pub packyard_version: String,
    /// Below `database/`.
    pub database: String,
    pub blobs: u64,
    pub blob_bytes: u64,
    /// `file`: the generated secret is in `secret`; `configuration`: `security.secret` was set
    /// and must be set to the same value where this is restored.
    pub secret: String,
}

const MANIFEST: &str = "packyard-backup.json";

fn blob_path(root: &Path, sha: &str) -> PathBuf {
    root.join("blobs").join(&sha[0..2]).join(&sha[2..4]).join(sha)
}

/// What a backup did, for the command's last line.
#[derive(Debug)]
pub struct BackupReport {
    pub manifest: Manifest,
    pub dir: PathBuf,
}

/// Backs up the database `db` and every blob it lists (read from `store`) into `dir`, which must
/// not exist or be empty.
pub async fn backup(config: &Config, db: &Db, store: Arc<dyn BlobStore>, dir: &Path) -> anyhow::Result<BackupReport> {
    if dir.exists() {
        ensure!(
            dir.is_dir() && std::fs::read_dir(dir)?.next().is_none(),
            "{} exists and is not an empty directory: back up into a new one",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir.join("database")).with_context(|| format!("cannot create {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // It holds the password hashes, the sealed keys and perhaps the secret.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    // No blob goes while the copy is taken and its blobs copied (renewed as the copy goes on).
    let hold_for = 3_600_000;
    db.hold_blob_collection(packyard_store::db::now_ms() + hold_for).await?;
    let result = copy_all(config, db, store.as_ref(), dir, hold_for).await;
    if let Err(e) = db.hold_blob_collection(0).await {
        tracing::warn!(error = %e, "cannot release the backup's hold on blob collection; it ends by itself within the hour");
    }
    result
}

async fn copy_all(
    config: &Config,
    db: &Db,
    store: &dyn BlobStore,
    dir: &Path,
    hold_for: i64,
) -> anyhow::Result<BackupReport> {
    let list = dir.join("blobs.txt");
    let database = match db.backend() {
        Backend::Sqlite => {
            let copy = dir.join("database").join("packyard.db");
            let quoted = copy.display().to_string().replace('\'', "''");
            sqlx::query(&format!("VACUUM INTO '{quoted}'"))
                .execute(db.pool())
                .await
                .context("copying the SQLite database (VACUUM INTO)")?;
            let mut conn = sqlx::AnyConnection::connect(&format!("sqlite://{}?mode=ro", copy.display())).await?;
            write_blob_list(&mut conn, &list).await?;
            conn.close().await?;
            "packyard.db"
        }
        Backend::Postgres => {
            let mut conn = db.pool().acquire().await?;
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
            let snapshot: String =
                sqlx::query("SELECT pg_export_snapshot() AS s").fetch_one(&mut *conn).await?.try_get("s")?;
            let out = dir.join("database").join("postgres.sql");
            let mut dump = std::process::Command::new("pg_dump");
            let (url, password) = without_password(&config.database.url)?;
            dump.arg(format!("--snapshot={snapshot}"))
                .args(["--no-owner", "--no-privileges", "--format=plain", "--file"])
                .arg(&out)
                .arg(format!("--dbname={url}"));
            if let Some(p) = password {
                // In its environment, not on its command line where `ps` shows it.
                dump.env("PGPASSWORD", p);
            }
            let status =
                run(dump).await.context("running pg_dump (install the PostgreSQL client of the server's version)")?;
            ensure!(status.success(), "pg_dump failed ({status})");
            write_blob_list(&mut conn, &list).await?;
            conn.execute("COMMIT").await?;
            "postgres.sql"
        }
        Backend::MySql => {
            let out = dir.join("database").join("mysql.sql");
            let target = MySqlTarget::parse(&config.database.url)?;
            let file = std::fs::File::create(&out)?;
            let mut dump = target.command("mariadb-dump");
            dump.args(["--single-transaction", "--routines", "--skip-lock-tables", "--hex-blob"])
                .arg(&target.database)
                .stdout(file);
            let status = run(dump).await.context("running mariadb-dump (install the MariaDB or MySQL client)")?;
            ensure!(status.success(), "mariadb-dump failed ({status})");
            let mut conn = db.pool().acquire().await?;
            write_blob_list(&mut conn, &list).await?;
            "mysql.sql"
        }
    };
    // The bytes of every blob the list names, checked against their hash.
    let (mut blobs, mut bytes) = (0u64, 0u64);
    let mut renewed = std::time::Instant::now();
    for line in std::io::BufReader::new(std::fs::File::open(&list)?).lines() {
        let line = line?;
        let Some((sha, size)) = line.split_once(' ') else { continue };
        let digest = Sha256Hex::parse(sha).map_err(|e| anyhow::anyhow!("blob {sha}: {e}"))?;
        let size: u64 = size.parse()?;
        match copy_out(store, &digest, size, &blob_path(dir, sha)).await {
            Ok(()) => {
                blobs += 1;
                bytes += size;
            }
            Err(e) if e.downcast_ref::<Missing>().is_some() => {
                bail!("blob {sha} is listed by the database but missing from the blob store: the backup is incomplete")
            }
            Err(e) => return Err(e.context(format!("copying blob {sha}"))),
        }
        if renewed.elapsed() > std::time::Duration::from_secs(600) {
            db.hold_blob_collection(packyard_store::db::now_ms() + hold_for).await?;
            renewed = std::time::Instant::now();
        }
    }
    let secret = if config.security.secret.is_some() {
        "configuration"
    } else {
        let from = config.server.data_dir.join("secret");
        let contents =
            std::fs::read(&from).with_context(|| format!("reading the generated secret {}", from.display()))?;
        crate::auth::write_secret_file(&dir.join("secret"), &contents)?;
        "file"
    };
    let manifest = Manifest {
        format: 1,
        created_at: packyard_model::time::rfc3339_ms(packyard_store::db::now_ms()),
        backend: db.backend().as_str().to_string(),
        packyard_version: env!("CARGO_PKG_VERSION").to_string(),
        database: database.to_string(),
        blobs,
        blob_bytes: bytes,
        secret: secret.to_string(),
    };
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&manifest)?)?;
    std::fs::rename(&tmp, dir.join(MANIFEST))?;
    Ok(BackupReport { manifest, dir: dir.to_path_buf() })
}

/// Writes `sha256 size` of every row of `blobs`, in order, as the connection sees them.
async fn write_blob_list(conn: &mut sqlx::AnyConnection, path: &Path) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rows = sqlx::query("SELECT sha256, size FROM blobs ORDER BY sha256").fetch(&mut *conn);
    while let Some(row) = rows.next().await {
        let row = row?;
        let sha = packyard_store::db::text(&row, "sha256").map_err(|e| anyhow::anyhow!("{e}"))?;
        let size: i64 = row.try_get("size")?;
        writeln!(out, "{} {size}", sha.trim())?;
    }
    out.flush()?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
#[error("not in the blob store")]
struct Missing;

/// Copies one blob to `to`, checking its size and hash on the way.
async fn copy_out(store: &dyn BlobStore, digest: &Sha256Hex, size: u64, to: &Path) -> anyhow::Result<()> {
    let read = match store.open(digest, None).await {
        Ok(r) => r,
        Err(packyard_store::blobs::BlobError::NotFound(_)) => return Err(Missing.into()),
        Err(e) => return Err(e.into()),
    };
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let tmp = to.with_extension("tmp");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    let mut hash = Sha256::new();
    let mut written = 0u64;
    let mut body = read.body;
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        hash.update(&chunk);
        file.write_all(&chunk)?;
        written += chunk.len() as u64;
    }
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    let got = hex::encode(hash.finalize());
    ensure!(got == digest.as_str() && written == size, "the store's bytes have SHA-256 {got} and {written} bytes");
    std::fs::rename(&tmp, to)?;
    Ok(())
}

/// What a restore did.
#[derive(Debug)]
pub struct RestoreReport {
    pub manifest: Manifest,
    pub blobs_written: u64,
    pub blobs_present: u64,
}

/// Restores `dir` into the configured database (which must be empty) and blob store: the blobs
/// first, the database last (in one step), so a restore that fails can be run again.
pub async fn restore(
    config: &Config,
    metrics: Arc<packyard_store::metrics::Metrics>,
    dir: &Path,
) -> anyhow::Result<RestoreReport> {
    let manifest: Manifest = serde_json::from_slice(
        &std::fs::read(dir.join(MANIFEST))
            .with_context(|| format!("{} is not a complete Packyard backup (no {MANIFEST})", dir.display()))?,
    )?;
    ensure!(manifest.format == 1, "backup layout {} is newer than this Packyard understands", manifest.format);
    ensure!(
        !manifest.database.is_empty()
            && !manifest.database.contains(['/', '\\'])
            && !manifest.database.starts_with('.'),
        "the backup names an odd database file {:?}",
        manifest.database
    );
    let backend =
        Backend::from_url(&config.database.url).ok_or_else(|| anyhow::anyhow!("database.url: unsupported scheme"))?;
    ensure!(
        backend.as_str() == manifest.backend,
        "this is a {} backup and database.url is {}: restore into the same kind of database",
        manifest.backend,
        backend.as_str()
    );
    let dump = dir.join("database").join(&manifest.database);
    ensure!(dump.is_file(), "{} is missing from the backup", dump.display());
    // The secret that sealed the stored keys: the backup's, or the configured one it was made with.
    match (manifest.secret.as_str(), config.security.secret.is_some()) {
        ("file", true) => bail!(
            "the backup carries its generated secret, and security.secret is configured: unset security.secret so that the backup's is used (the stored keys open only with it)"
        ),
        ("configuration", false) => bail!(
            "the backup was made with a configured security.secret: set the same value (the stored keys open only with it)"
        ),
        _ => {}
    }
    // The target must be empty: a restore replaces, it never merges.
    match backend {
        Backend::Sqlite => {
            let path = sqlite_path(&config.database.url)?;
            if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
                bail!("{} exists: restore replaces a database, it never merges; move it away first", path.display());
            }
        }
        Backend::Postgres | Backend::MySql => {
            sqlx::any::install_default_drivers();
            let mut conn = sqlx::AnyConnection::connect(&config.database.url).await?;
            let probe = match backend {
                Backend::Postgres => "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'repositories'",
                _ => "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'repositories'",
            };
            let n: i64 = sqlx::query(probe).fetch_one(&mut conn).await?.try_get("n")?;
            conn.close().await?;
            ensure!(
                n == 0,
                "the database of database.url already holds Packyard's tables: restore into an empty database"
            );
        }
    }
    if manifest.secret == "file" {
        let want = std::fs::read(dir.join("secret")).context("the backup's secret is missing")?;
        let path = config.server.data_dir.join("secret");
        match std::fs::read(&path) {
            Ok(have) if have.trim_ascii() != want.trim_ascii() => bail!(
                "{} holds another secret than the backup's: move it away (the backup's database needs its own)",
                path.display()
            ),
            Ok(_) => {}
            Err(_) => crate::auth::write_secret_file(&path, &want)?,
        }
    }
    // The blobs, into the configured store; each checked against its name.
    let store = crate::services::open_blob_store(config, metrics.clone()).await?;
    let (mut written, mut present) = (0u64, 0u64);
    for line in std::io::BufReader::new(std::fs::File::open(dir.join("blobs.txt"))?).lines() {
        let line = line?;
        let Some((sha, size)) = line.split_once(' ') else { continue };
        let digest = Sha256Hex::parse(sha).map_err(|e| anyhow::anyhow!("blob {sha}: {e}"))?;
        let size: u64 = size.parse()?;
        if store.stat(&digest).await? == Some(size) {
            present += 1;
            continue;
        }
        let from = blob_path(dir, sha);
        let mut file = tokio::fs::File::open(&from).await.with_context(|| format!("{} is missing", from.display()))?;
        let mut writer = store.writer(u64::MAX).await?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut file, &mut buf).await?;
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]).await?;
        }
        let stored = writer.finish().await?;
        ensure!(
            stored.sha256.as_str() == sha && stored.size == size,
            "the backup's copy of blob {sha} is damaged (SHA-256 {}, {} bytes)",
            stored.sha256,
            stored.size
        );
        written += 1;
    }
    // The database last, in one step.
    match backend {
        Backend::Sqlite => {
            let path = sqlite_path(&config.database.url)?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            for stale in ["-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
            }
            let tmp = path.with_extension("restoring");
            std::fs::copy(&dump, &tmp)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
            }
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
        }
        Backend::Postgres => {
            let (url, password) = without_password(&config.database.url)?;
            let mut load = std::process::Command::new("psql");
            load.args(["-q", "-X", "--single-transaction", "-v", "ON_ERROR_STOP=1", "-f"])
                .arg(&dump)
                .arg(url)
                .stdout(std::process::Stdio::null());
            if let Some(p) = password {
                load.env("PGPASSWORD", p);
            }
            let status = run(load).await.context("running psql (install the PostgreSQL client)")?;
            ensure!(status.success(), "loading {} failed ({status})", dump.display());
        }
        Backend::MySql => {
            let target = MySqlTarget::parse(&config.database.url)?;
            let mut load = target.command("mariadb");
            load.arg(&target.database).stdin(std::fs::File::open(&dump)?);
            let status = run(load).await.context("running mariadb (install the MariaDB or MySQL client)")?;
            ensure!(status.success(), "loading {} failed ({status})", dump.display());
        }
    }
    // Every blob the restored database lists has its bytes.
    let db = Db::connect(&config.database, metrics).await?;
    let mut after = String::new();
    let mut missing = Vec::new();
    loop {
        let keys = db.blob_keys(&after, 1000).await?;
        let Some(last) = keys.last().cloned() else { break };
        for sha in keys {
            let digest = Sha256Hex::parse(&sha).map_err(|e| anyhow::anyhow!("blob {sha}: {e}"))?;
            if store.stat(&digest).await?.is_none() {
                missing.push(sha);
            }
        }
        after = last;
    }
    db.close().await;
    ensure!(
        missing.is_empty(),
        "{} blobs the database lists are missing after the restore, e.g. {}",
        missing.len(),
        missing[0]
    );
    Ok(RestoreReport { manifest, blobs_written: written, blobs_present: present })
}

/// `url` without its password, and the password (for `PGPASSWORD`).
fn without_password(url: &str) -> anyhow::Result<(String, Option<String>)> {
    let mut u = url::Url::parse(url)?;
    let password = u.password().map(percent_decode);
    if password.is_some() {
        let _ = u.set_password(None);
    }
    Ok((u.to_string(), password))
}

/// Runs a client program on the blocking pool.
async fn run(mut cmd: std::process::Command) -> std::io::Result<std::process::ExitStatus> {
    tokio::task::spawn_blocking(move || cmd.status()).await.map_err(std::io::Error::other)?
}

fn sqlite_path(url: &str) -> anyhow::Result<PathBuf> {
    packyard_store::db::sqlite_file(url).ok_or_else(|| anyhow::anyhow!("database.url {url:?} names no file"))
}

/// The MySQL/MariaDB command-line clients' view of `database.url`.
struct MySqlTarget {
    host: String,
    port: u16,
    user: String,
    password: Option<String>,
    database: String,
}

impl MySqlTarget {
    fn parse(url: &str) -> anyhow::Result<Self> {
        let u = url::Url::parse(url)?;
        let database = u.path().trim_start_matches('/').to_string();
        ensure!(!database.is_empty(), "database.url names no database");
        let decode = |s: &str| Some(percent_decode(s));
        Ok(Self {
            host: u.host_str().unwrap_or("127.0.0.1").to_string(),
            port: u.port().unwrap_or(3306),
            user: decode(u.username()).unwrap_or_default(),
            password: u.password().and_then(decode),
            database,
        })
    }

    /// The client `program` connected as the URL says (the password in its environment, not
    /// on its command line).
    fn command(&self, program: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(program);
        cmd.arg(format!("--host={}", self.host)).arg(format!("--port={}", self.port)).arg("--protocol=TCP");
        if !self.user.is_empty() {
            cmd.arg(format!("--user={}", self.user));
        }
        if let Some(p) = &self.password {
            cmd.env("MYSQL_PWD", p);
        }
        cmd
    }
}

/// `%XX` escapes of a URL's user or password decoded (a malformed escape stays as it is).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%').then(|| s.get(i + 1..i + 3)).flatten().and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
