//! The checksum database of each hosted and group Go repository (`GOSUMDB`): an append-only
//! transparency log of the go.sum lines (`h1:` of the zip and of the `.mod`) of the versions it
//! serves, signed with an Ed25519 note key of its own, in the layout of
//! `packyard_codecs::go::sumdb` (the codec computes; this module stores and reads).
//!
//! - The head row (`go_sumdb_logs`) holds the database's name, its key (the private half sealed
//!   with `security.secret`), its size and tree hash. It is made on first need with
//!   [`default_name`]; its key may be replaced only while the log is empty (clients pin it).
//! - [`append`] runs inside a writer's transaction: it locks the head row (`FOR UPDATE`; on
//!   SQLite the transaction holds the writer lock), so appends serialise, and reads everything
//!   it needs with locking reads, which see past a repeatable-read snapshot on MySQL. A hosted
//!   upload appends in its own transaction, so an acknowledged version is always logged.
//! - A record is never changed or removed: [`append`] of other lines for a logged version is
//!   refused ([`AppendError::Different`]), whatever the write policy, also after a delete.

use sqlx::{Any, Executor, Row};

use packyard_codecs::go::sumdb::tlog::{self, Hash, Tile, TileLevel, Tree};
use packyard_codecs::go::sumdb::{self as codec, Signer, Verifier};
use packyard_core::hosted::Tx;
use packyard_core::proxy::{Elsewhere, FetchRequest, Freshness, ProxyError};
use packyard_core::services::Services;
use packyard_model::repos::{FormatSettings, Repository};

use super::settings::{check_checksum_database_name, GoSettings};
use packyard_store::db::{now_ms, Column, Db, DbError, DbResult};
use packyard_store::{for_update, insert_or_ignore, sql};

packyard_store::row! {
    /// A log's head: what is public of it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LogHead, columns head_columns, trimmed (tree_hash) {
        pub repository_id: i64,
        /// The database's name (its key's name; `sumdb/<name>/…`).
        pub name: String,
        /// The verifier key clients put in `GOSUMDB`.
        pub verifier_key: String,
        /// How many records the log holds.
        pub size: i64,
        /// The tree hash over them, hex.
        pub tree_hash: String,
        pub created_at: i64,
        pub updated_at: i64,
    }
}

impl LogHead {
    pub fn tree(&self) -> Result<Tree, SumdbError> {
        let bytes = hex::decode(&self.tree_hash).map_err(|_| corrupt("a tree hash that is not hex"))?;
        Ok(Tree { size: u64::try_from(self.size).unwrap_or(0), hash: Hash::from_slice(&bytes).map_err(tlog_error)? })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SumdbError {
    #[error(transparent)]
    Db(#[from] DbError),
    /// The key could not be made, opened or used.
    #[error("the checksum database key of repository {repository}: {message}")]
    Key { repository: String, message: String },
    /// Stored hashes or records that do not add up.
    #[error("the checksum database is inconsistent: {0}")]
    Corrupt(String),
}

fn corrupt(message: impl Into<String>) -> SumdbError {
    SumdbError::Corrupt(message.into())
}

fn tlog_error(e: tlog::TlogError) -> SumdbError {
    SumdbError::Corrupt(e.to_string())
}

/// Why an append did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("repository {0} has no checksum database yet")]
    NoLog(i64),
    /// The version is logged with other lines: never changed.
    #[error("logged as record {id} with other hashes")]
    Different { id: i64, logged: String },
    #[error(transparent)]
    Sumdb(#[from] SumdbError),
}

/// The name a repository's database gets when nobody chose one: `<repository>.<host of
/// server.public_url>` (names are global to a client: the go command keeps what it learnt of
/// each database under its name), or the repository's name without a public URL.
pub fn default_name(services: &Services, repo: &Repository) -> String {
    let host = services
        .config
        .server
        .public_url
        .as_deref()
        .and_then(url_host)
        .map(|h| format!("{}.{h}", repo.name))
        .filter(|n| check_checksum_database_name("name", n).is_ok());
    host.unwrap_or_else(|| repo.name.to_string())
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The key store name a log's private key is sealed under.
fn key_name(repository_id: i64) -> String {
    format!("go/{repository_id}/sumdb")
}

/// The head of a repository's log, if it has one.
pub async fn head(db: &Db, repository_id: i64) -> DbResult<Option<LogHead>> {
    let get =
        sql!("go_sumdb_logs.get", concat!("SELECT ", head_columns!(), " FROM go_sumdb_logs WHERE repository_id = $1"));
    db.optional(db.pool(), get, (repository_id,), LogHead::parse).await
}

/// The head of a repository's log, made (with a new key named [`default_name`]) when it has
/// none; replicas racing to make it all get the one stored first.
pub async fn ensure(services: &Services, repo: &Repository) -> Result<LogHead, SumdbError> {
    if let Some(h) = head(&services.db, repo.id).await? {
        return Ok(h);
    }
    let signer = Signer::generate(&default_name(services, repo))
        .map_err(|e| SumdbError::Key { repository: repo.name.to_string(), message: e.to_string() })?;
    let (nonce, sealed) = seal(services, repo, &signer)?;
    let insert = insert_or_ignore!("go_sumdb_logs.insert", "INSERT INTO go_sumdb_logs (repository_id, name, verifier_key, key_nonce, key_sealed, size, tree_hash, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8)");
    let now = now_ms();
    let empty = hex::encode(Hash::default().0);
    let binds =
        (repo.id, signer.name(), signer.verifier().to_string(), nonce.as_str(), sealed.as_str(), empty.as_str());
    services.db.bound(insert, binds).bind(now).bind(now).execute(services.db.pool()).await.map_err(DbError::from)?;
    head(&services.db, repo.id).await?.ok_or_else(|| corrupt(format!("the log of repository {} vanished", repo.name)))
}

fn seal(services: &Services, repo: &Repository, signer: &Signer) -> Result<(String, String), SumdbError> {
    services
        .security
        .keystore
        .seal(&key_name(repo.id), signer.private_key().as_bytes())
        .map_err(|e| SumdbError::Key { repository: repo.name.to_string(), message: e.to_string() })
}

/// Why a key was not replaced.
#[derive(Debug, thiserror::Error)]
pub enum RekeyError {
    /// The log holds records: clients pin its key.
    #[error("{0}")]
    NotEmpty(String),
    #[error(transparent)]
    Sumdb(#[from] SumdbError),
}

impl From<DbError> for RekeyError {
    fn from(e: DbError) -> Self {
        Self::Sumdb(SumdbError::Db(e))
    }
}

/// Gives an empty log another key (and the key's name): only while it holds no record, since
/// a client that verified anything pinned the key in `GOSUMDB`, and a log under a new key would
/// be a new database that could say other hashes for what the old one logged.
pub async fn replace_key(services: &Services, repo: &Repository, signer: &Signer) -> Result<LogHead, RekeyError> {
    let current = ensure(services, repo).await?;
    let refuse = |size: i64| {
        RekeyError::NotEmpty(format!(
            "the checksum database {} of repository {} holds {size} record(s): its key never changes (clients pin it in GOSUMDB; a new key would be a new database, free to say other hashes for logged versions)",
            current.name, repo.name
        ))
    };
    if current.size > 0 {
        return Err(refuse(current.size));
    }
    let (nonce, sealed) = seal(services, repo, signer)?;
    let rekey = sql!("go_sumdb_logs.rekey", "UPDATE go_sumdb_logs SET name = $1, verifier_key = $2, key_nonce = $3, key_sealed = $4, updated_at = $5 WHERE repository_id = $6 AND size = 0");
    let binds = (signer.name(), signer.verifier().to_string(), nonce.as_str(), sealed.as_str(), now_ms(), repo.id);
    let done = services.db.bound(rekey, binds).execute(services.db.pool()).await.map_err(DbError::from)?;
    let now = head(&services.db, repo.id).await?.ok_or_else(|| corrupt("the log vanished"))?;
    if done.rows_affected() == 0 {
        // An append came first.
        return Err(refuse(now.size));
    }
    Ok(now)
}

/// The log's signing key.
pub async fn signer(services: &Services, repo: &Repository) -> Result<Signer, SumdbError> {
    let key = sql!("go_sumdb_logs.key", "SELECT key_nonce, key_sealed FROM go_sumdb_logs WHERE repository_id = $1");
    let row = services.db.bound(key, (repo.id,)).fetch_optional(services.db.pool()).await.map_err(DbError::from)?;
    let row = row.ok_or_else(|| corrupt(format!("repository {} has no checksum database", repo.name)))?;
    let (nonce, sealed): (String, String) = (Column::read(&row, "key_nonce")?, Column::read(&row, "key_sealed")?);
    let failed = |message: String| SumdbError::Key { repository: repo.name.to_string(), message };
    let bytes =
        services.security.keystore.open(&key_name(repo.id), &nonce, &sealed).map_err(|e| failed(e.to_string()))?;
    Signer::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| failed(e.to_string()))
}

/// The verifier of a head.
pub fn verifier(head: &LogHead) -> Result<Verifier, SumdbError> {
    Verifier::parse(&head.verifier_key).map_err(|e| corrupt(format!("the stored verifier key: {e}")))
}

/// The signed tree head of `head` (its size and hash), as `/latest` serves it.
pub async fn signed_head(services: &Services, repo: &Repository, head: &LogHead) -> Result<String, SumdbError> {
    let signer = signer(services, repo).await?;
    if signer.verifier().to_string() != head.verifier_key {
        return Err(corrupt("the sealed key is not the one the head names"));
    }
    codec::sign_tree(&signer, &head.tree()?).map_err(|e| corrupt(e.to_string()))
}

fn parse_record(r: &sqlx::any::AnyRow) -> DbResult<(i64, String)> {
    Ok((Column::read(r, "id")?, Column::read(r, "record")?))
}

/// A version's record: its id and text.
pub async fn record<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    repository_id: i64,
    module: &str,
    version: &str,
) -> DbResult<Option<(i64, String)>> {
    let get = sql!(
        "go_sumdb_records.get",
        "SELECT id, record FROM go_sumdb_records WHERE repository_id = $1 AND module = $2 AND version = $3"
    );
    db.optional(ex, get, (repository_id, module, version), parse_record).await
}

/// The records `range` of a log, in order.
pub async fn records(db: &Db, repository_id: i64, range: std::ops::Range<u64>) -> Result<Vec<String>, SumdbError> {
    let get = sql!(
        "go_sumdb_records.range",
        "SELECT id, record FROM go_sumdb_records WHERE repository_id = $1 AND id >= $2 AND id < $3 ORDER BY id"
    );
    let (start, end) = (i64::try_from(range.start).unwrap_or(i64::MAX), i64::try_from(range.end).unwrap_or(i64::MAX));
    let rows = db.bound(get, (repository_id, start, end)).fetch_all(db.pool()).await.map_err(DbError::from)?;
    let mut out = Vec::with_capacity(rows.len());
    for (expected, row) in (start..end).zip(&rows) {
        let (id, text) = parse_record(row)?;
        if id != expected {
            return Err(corrupt(format!("record {expected} is missing")));
        }
        out.push(text);
    }
    if out.len() as u64 != range.end - range.start {
        return Err(corrupt(format!("records {}..{} are not all there", range.start, range.end)));
    }
    Ok(out)
}

/// The stored hashes at `indexes`, in that order, with `statement` (locking or not).
async fn read_hashes<'e, E: Executor<'e, Database = Any>>(
    db: &Db,
    ex: E,
    statement: &'static packyard_store::sql::Sql,
    repository_id: i64,
    indexes: &[u64],
) -> Result<Vec<Hash>, SumdbError> {
    let list: Vec<i64> = indexes.iter().map(|&i| i64::try_from(i).unwrap_or(i64::MAX)).collect();
    let rows = db.fetch_listed(ex, statement, repository_id, &list).await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let idx: i64 = row.try_get("idx").map_err(DbError::from)?;
        let hash: String = Column::read(row, "hash")?;
        let bytes = hex::decode(hash.trim()).map_err(|_| corrupt(format!("stored hash {idx} is not hex")))?;
        found.insert(idx, Hash::from_slice(&bytes).map_err(tlog_error)?);
    }
    list.iter().map(|i| found.get(i).copied().ok_or_else(|| corrupt(format!("stored hash {i} is missing")))).collect()
}

/// The stored hashes at `indexes` (committed ones; no lock).
pub async fn hashes(db: &Db, repository_id: i64, indexes: &[u64]) -> Result<Vec<Hash>, SumdbError> {
    let read = sql!(
        "go_sumdb_hashes.read",
        "SELECT idx, hash FROM go_sumdb_hashes WHERE repository_id = $1 AND idx IN ($LIST)"
    );
    read_hashes(db, db.pool(), read, repository_id, indexes).await
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// The record is new, with this id.
    New(i64),
    /// The same lines were logged already, with this id.
    Already(i64),
}

impl Appended {
    pub fn id(self) -> i64 {
        match self {
            Self::New(id) | Self::Already(id) => id,
        }
    }
}

/// Appends `text` as the record of `module@version` to repository `repository_id`'s log, in the
/// writer's transaction `tx`: under the head row's lock, the next record id, the stored hashes it
/// completes and the new tree hash. The same text logged already is no change; other text for a
/// logged version is refused.
pub async fn append(
    db: &Db,
    tx: &mut Tx<'_>,
    repository_id: i64,
    (module, version): (&str, &str),
    text: &str,
) -> Result<Appended, AppendError> {
    tlog::check_record_text(text).map_err(tlog_error)?;
    let lock = for_update!("go_sumdb_logs.lock", "SELECT size FROM go_sumdb_logs WHERE repository_id = $1");
    let row = db.bound(lock, (repository_id,)).fetch_optional(&mut **tx).await.map_err(DbError::from)?;
    let size: i64 = row.ok_or(AppendError::NoLog(repository_id))?.try_get("size").map_err(DbError::from)?;
    let logged = for_update!(
        "go_sumdb_records.get_locked",
        "SELECT id, record FROM go_sumdb_records WHERE repository_id = $1 AND module = $2 AND version = $3"
    );
    if let Some((id, logged)) = db.optional(&mut **tx, logged, (repository_id, module, version), parse_record).await? {
        return if logged == text { Ok(Appended::Already(id)) } else { Err(AppendError::Different { id, logged }) };
    }
    let n = u64::try_from(size).map_err(|_| corrupt("a negative log size"))?;
    let locked = for_update!(
        "go_sumdb_hashes.read_locked",
        "SELECT idx, hash FROM go_sumdb_hashes WHERE repository_id = $1 AND idx IN ($LIST)"
    );
    let siblings = read_hashes(db, &mut **tx, locked, repository_id, &tlog::indexes_for_append(n)).await?;
    let stored = tlog::hashes_for_append(n, tlog::record_hash(text.as_bytes()), &siblings).map_err(tlog_error)?;
    let now = now_ms();
    let insert_record = sql!("go_sumdb_records.insert", "INSERT INTO go_sumdb_records (repository_id, id, module, version, record, created_at) VALUES ($1, $2, $3, $4, $5, $6)");
    db.bound(insert_record, (repository_id, size, module, version, text, now))
        .execute(&mut **tx)
        .await
        .map_err(DbError::from)?;
    let first = tlog::stored_hash_count(n);
    let insert_hash =
        sql!("go_sumdb_hashes.insert", "INSERT INTO go_sumdb_hashes (repository_id, idx, hash) VALUES ($1, $2, $3)");
    for (i, h) in stored.iter().enumerate() {
        let idx = i64::try_from(first + i as u64).map_err(|_| corrupt("a stored hash index past i64"))?;
        db.bound(insert_hash, (repository_id, idx, hex::encode(h.0)))
            .execute(&mut **tx)
            .await
            .map_err(DbError::from)?;
    }
    // The new tree hash: from the hashes just made and the older subtrees' roots.
    let wanted = tlog::indexes_for_tree_hash(n + 1);
    let older: Vec<u64> = wanted.iter().copied().filter(|&i| i < first).collect();
    let read = read_hashes(db, &mut **tx, locked, repository_id, &older).await?;
    let mut read = read.into_iter();
    let mut parts = Vec::with_capacity(wanted.len());
    for i in wanted {
        let h = if i < first { read.next() } else { stored.get((i - first) as usize).copied() };
        parts.push(h.ok_or_else(|| corrupt(format!("stored hash {i} is missing")))?);
    }
    let tree = tlog::tree_hash(n + 1, &parts).map_err(tlog_error)?;
    let grow = sql!(
        "go_sumdb_logs.grow",
        "UPDATE go_sumdb_logs SET size = $1, tree_hash = $2, updated_at = $3 WHERE repository_id = $4"
    );
    db.bound(grow, (size + 1, hex::encode(tree.0), now, repository_id))
        .execute(&mut **tx)
        .await
        .map_err(DbError::from)?;
    Ok(Appended::New(size))
}

/// [`append`] in a transaction of its own (a version logged on its first lookup), run again
/// after a deadlock or a concurrent append of the same version.
pub async fn append_now(
    db: &Db,
    repository_id: i64,
    coordinate: (&str, &str),
    text: &str,
) -> Result<Appended, AppendError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let run = async {
            let mut tx = db.begin().await?;
            let done = append(db, &mut tx, repository_id, coordinate, text).await?;
            tx.commit().await.map_err(DbError::from)?;
            Ok::<_, AppendError>(done)
        };
        match run.await {
            Err(AppendError::Db(DbError::Retry(_) | DbError::Conflict(_))) if attempt < 8 => {
                tokio::time::sleep(std::time::Duration::from_millis(2u64 << attempt)).await;
            }
            other => return other,
        }
    }
}

/// A tile's bytes from a log of at least the tile's extent (the caller checks
/// [`Tile::is_within`] the signed size): hashes from the stored hashes, a data tile from the
/// records.
pub async fn tile(db: &Db, repository_id: i64, tile: &Tile) -> Result<Vec<u8>, SumdbError> {
    match tile.level {
        TileLevel::Data => {
            let texts = records(db, repository_id, tile.range()).await?;
            tile.data_tile(texts.iter().map(String::as_str)).map_err(tlog_error)
        }
        TileLevel::Hashes(_) => {
            let read = hashes(db, repository_id, &tile.hash_indexes()).await?;
            tile.hash_tile(&read).map_err(tlog_error)
        }
    }
}

/// What a checksum database is asked (`sumdb/<name>/…`, as the go command asks a GOPROXY).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SumdbPath {
    /// `supported`: whether this proxy serves the database (200), or the go command should
    /// reach it directly (404).
    Supported,
    /// `latest`: the signed tree head.
    Latest,
    /// `lookup/<module>@<version>` (case-decoded).
    Lookup { module: String, version: String },
    /// `tile/<H>/<L>/<N>[.p/<W>]`.
    Tile(Tile),
}

/// A request to checksum database `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumdbRequest {
    pub name: String,
    pub path: SumdbPath,
}

impl SumdbRequest {
    /// From a path below the repository (`sumdb/<name>/…`, percent-decoded).
    pub fn parse(path: &str) -> Result<Self, String> {
        let rest = path.strip_prefix("sumdb/").ok_or_else(|| format!("{path:?} is not a checksum database path"))?;
        let (name, rest) = rest.split_once('/').ok_or_else(|| format!("{path:?} names no checksum database path"))?;
        check_checksum_database_name("checksum database name", name).map_err(|e| e.0)?;
        let path = match rest {
            "supported" => SumdbPath::Supported,
            "latest" => SumdbPath::Latest,
            _ => {
                if let Some(target) = rest.strip_prefix("lookup/") {
                    let (module, version) = codec::parse_lookup_target(target).map_err(|e| e.0)?;
                    SumdbPath::Lookup { module, version }
                } else if rest.starts_with("tile/") {
                    SumdbPath::Tile(Tile::parse_path(rest).map_err(|e| e.to_string())?)
                } else {
                    return Err(format!(
                        "{rest:?} is not supported, latest, lookup/<module>@<version> or tile/<H>/<L>/<N>"
                    ));
                }
            }
        };
        Ok(Self { name: name.to_string(), path })
    }

    /// The path below the database's URL, canonical (case-encoded).
    pub fn database_path(&self) -> String {
        match &self.path {
            SumdbPath::Supported => "supported".into(),
            SumdbPath::Latest => "latest".into(),
            SumdbPath::Lookup { module, version } => {
                format!("lookup/{}@{}", packyard_codecs::go::escape(module), packyard_codecs::go::escape(version))
            }
            SumdbPath::Tile(t) => t.path(),
        }
    }

    /// The content type of the answer.
    pub fn content_type(&self) -> &'static str {
        match self.path {
            SumdbPath::Tile(_) => "application/octet-stream",
            _ => "text/plain; charset=utf-8",
        }
    }
}

/// How a proxy answers a checksum database request.
#[derive(Debug)]
pub enum Forward {
    /// It does not serve the database.
    NotServed,
    /// `supported` of a database it reaches at its own URL: yes, without asking anyone.
    Supported,
    /// Through the proxy cache: a full tile never changes (fetched once); `latest`, lookups,
    /// partial tiles and an upstream proxy's `supported` are metadata; 404 and 410 mean "not
    /// there". At the database's URL, or through the upstream proxy (`sumdb/<name>/…` below
    /// its `remote_url`).
    Fetch(Box<FetchRequest>),
}

/// The proxy rule of checksum databases (`go.checksum_databases`).
pub fn forward(repo: &Repository, request: &SumdbRequest) -> Result<Forward, ProxyError> {
    let go = GoSettings::of(repo);
    let databases = go.checksum_databases.as_deref().unwrap_or_default();
    let Some(database) = databases.iter().find(|d| d.name == request.name) else { return Ok(Forward::NotServed) };
    if request.path == SumdbPath::Supported && database.url.is_some() {
        return Ok(Forward::Supported);
    }
    let freshness = match &request.path {
        SumdbPath::Tile(t) if t.is_full() => Freshness::Immutable,
        _ => Freshness::Metadata,
    };
    let below = request.database_path();
    let mut fetch = FetchRequest::new(repo, &format!("sumdb/{}/{below}", request.name), freshness)?;
    fetch.negative_statuses = &[404, 410];
    if let Some(url) = &database.url {
        fetch.elsewhere = Some(Elsewhere { base_url: url.clone(), path: below });
    }
    Ok(Forward::Fetch(Box::new(fetch)))
}

/// Recomputes the tree hash of the first `size` records from the records alone (RFC 6962 over
/// their leaf hashes): what an auditor does, and the tests.
pub fn tree_of_records<S: AsRef<str>>(records: &[S]) -> Hash {
    fn merkle(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => Hash::default(),
            1 => leaves[0],
            n => {
                let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
                tlog::node_hash(&merkle(&leaves[..k]), &merkle(&leaves[k..]))
            }
        }
    }
    let leaves: Vec<Hash> = records.iter().map(|r| tlog::record_hash(r.as_ref().as_bytes())).collect();
    merkle(&leaves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let ok = |p: &str| SumdbRequest::parse(p);
        assert_eq!(ok("sumdb/sum.golang.org/supported").map(|r| r.path), Ok(SumdbPath::Supported));
        assert_eq!(ok("sumdb/sum.golang.org/latest").map(|r| r.name), Ok("sum.golang.org".to_string()));
        let lookup = ok("sumdb/s/lookup/example.com/!m@v1.0.0").map(|r| (r.path.clone(), r.database_path()));
        assert_eq!(
            lookup,
            Ok((
                SumdbPath::Lookup { module: "example.com/M".into(), version: "v1.0.0".into() },
                "lookup/example.com/!m@v1.0.0".to_string()
            ))
        );
        let tile = ok("sumdb/s/tile/8/0/x001/234.p/5").map(|r| r.database_path());
        assert_eq!(tile.as_deref(), Ok("tile/8/0/x001/234.p/5"));
        for bad in [
            "sumdb/",
            "sumdb/s",
            "sumdb/s/",
            "sumdb/a b/latest",
            "sumdb/s/lookup/example.com/m",
            "sumdb/s/lookup/example.com/M@v1.0.0",
            "sumdb/s/tile/8/0/1",
            "sumdb/s/other",
            "sumdb/s/latest/x",
        ] {
            assert!(ok(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts_of_public_urls() {
        assert_eq!(url_host("https://Packages.Example.com:8443/packyard").as_deref(), Some("packages.example.com"));
        assert_eq!(url_host("http://u@h/").as_deref(), Some("h"));
        assert_eq!(url_host("nonsense"), None);
    }

    #[test]
    fn records_hash_to_a_merkle_tree() {
        let records: Vec<String> = (0..5).map(|i| format!("m{i} v1.0.0 h1:x\nm{i} v1.0.0/go.mod h1:y\n")).collect();
        let leaves: Vec<Hash> = records.iter().map(|r| tlog::record_hash(r.as_bytes())).collect();
        let left = tlog::node_hash(&tlog::node_hash(&leaves[0], &leaves[1]), &tlog::node_hash(&leaves[2], &leaves[3]));
        assert_eq!(tree_of_records(&records), tlog::node_hash(&left, &leaves[4]));
        assert_eq!(tree_of_records::<String>(&[]), Hash::default());
    }
}
