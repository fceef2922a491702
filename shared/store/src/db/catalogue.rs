//! The catalogue: every stored artifact of every format as a *component* (what people look for:
//! a group, a name, a version) with its *assets* (the files a client downloads, by their path
//! under the repository). The formats say what their artifacts are ([`Entry`]); the hosted
//! engine writes them in the transaction of the format's own rows, the proxy with the file it
//! cached. Searches are keyset pages over it, in the order the caller asked for.

use std::collections::BTreeSet;

use sqlx::{Any, Row, Transaction};

use super::{like_prefix, now_ms, text, Db, DbResult};
use crate::sql::{render, Shape};
use crate::{insert_or_ignore, insert_or_ignore_id, sql, upsert};

/// A component as its format names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// The format's own name for it in its repository (unique there): what a delete names.
    pub key: String,
    pub group: String,
    pub name: String,
    pub version: String,
}

/// A file of a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAsset {
    /// Its path under `/repository/<name>/`.
    pub path: String,
    pub sha256: String,
    pub sha1: Option<String>,
    pub md5: Option<String>,
    pub size: i64,
    pub content_type: String,
}

/// What an upload or a cached file adds: its component (created on first sight) and its assets
/// (replaced by path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub component: Component,
    pub assets: Vec<NewAsset>,
}

/// What a delete takes out of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forget {
    Nothing,
    /// A component (by its key) with its assets.
    Component(String),
    /// The assets whose path starts with `prefix` (Conan's package revisions of a recipe
    /// revision); the component stays.
    Assets {
        prefix: String,
    },
}

crate::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ComponentRow keyed by id, columns component_columns, trimmed () {
        pub repository_id: i64,
        pub format: String,
        pub component_key: String,
        pub namespace: String,
        pub name: String,
        pub version: String,
        pub created_at: i64,
        pub uploaded_by: String,
    }
}

crate::row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AssetRow keyed by id, columns asset_columns, trimmed (sha256) {
        pub repository_id: i64,
        pub component_id: i64,
        pub path: String,
        pub sha256: String,
        pub sha1: Option<String>,
        pub md5: Option<String>,
        pub size: i64,
        pub content_type: String,
        pub created_at: i64,
        pub uploaded_by: String,
        pub last_downloaded: Option<i64>,
        pub download_count: i64,
    }
}

/// The longest keyword kept (longer words are found by name).
const MAX_KEYWORD: usize = 200;

/// The words a keyword search finds a component by: its group, name and version, whole and
/// split at anything that is not a letter or a digit, lower-cased.
pub fn keywords(c: &Component) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for field in [&c.group, &c.name, &c.version] {
        let lower = field.to_lowercase();
        let mut add = |w: &str| {
            if !w.is_empty() && w.len() <= MAX_KEYWORD {
                out.insert(w.to_string());
            }
        };
        add(&lower);
        for part in lower.split(|ch: char| !ch.is_alphanumeric()) {
            add(part);
        }
    }
    out
}

/// A value a search matches: the whole value, or (a trailing `*`) any value starting with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Pattern {
    pub fn parse(s: &str) -> Self {
        match s.strip_suffix('*') {
            Some(prefix) => Self::Prefix(prefix.to_string()),
            None => Self::Exact(s.to_string()),
        }
    }

    fn lower(&self) -> Self {
        match self {
            Self::Exact(s) => Self::Exact(s.to_lowercase()),
            Self::Prefix(s) => Self::Prefix(s.to_lowercase()),
        }
    }
}

/// What a page is ordered by (then by id, so that the order is total).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Catalogue order: what was stored first comes first.
    #[default]
    Id,
    Group,
    Name,
    Version,
    Repository,
}

impl Sort {
    fn column(self) -> Option<&'static str> {
        match self {
            Self::Id => None,
            Self::Group => Some("c.namespace"),
            Self::Name => Some("c.name"),
            Self::Version => Some("c.version"),
            Self::Repository => Some("r.name"),
        }
    }
}

/// A search of the catalogue: a page of components (or of their assets) matching every filter
/// given, from the repositories listed.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// The repositories searched (their own components); none finds nothing.
    pub repositories: Vec<i64>,
    pub format: Option<String>,
    pub group: Option<Pattern>,
    pub name: Option<Pattern>,
    pub version: Option<Pattern>,
    /// A keyword (lower-cased before it is matched).
    pub keyword: Option<Pattern>,
    pub sha256: Option<String>,
    pub sha1: Option<String>,
    pub md5: Option<String>,
    pub sort: Sort,
    pub descending: bool,
    /// Where the previous page ended: its last row's sort value (empty for [`Sort::Id`]) and id.
    pub after: Option<(String, i64)>,
    pub limit: i64,
}

/// A value bound to a statement built at run time.
pub(super) enum Param {
    Int(i64),
    Text(String),
    OptText(Option<String>),
}

/// A statement built at run time from portable text: each placeholder is a new parameter, in
/// the order of the text (MySQL's are positional).
#[derive(Default)]
pub(super) struct Built {
    pub(super) text: String,
    params: Vec<Param>,
}

impl Built {
    pub(super) fn push(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }

    pub(super) fn param(&mut self, p: Param) -> &mut Self {
        self.params.push(p);
        self.text.push_str(&format!("${}", self.params.len()));
        self
    }

    pub(super) fn text(&mut self, s: &str) -> &mut Self {
        self.param(Param::Text(s.to_string()))
    }

    pub(super) fn int(&mut self, i: i64) -> &mut Self {
        self.param(Param::Int(i))
    }

    fn pattern(&mut self, column: &str, p: &Pattern) -> &mut Self {
        match p {
            Pattern::Exact(v) => self.push(&format!(" AND {column} = ")).text(v),
            Pattern::Prefix(v) => self.push(&format!(" AND {column} LIKE ")).text(&like_prefix(v)).push(" ESCAPE '!'"),
        }
    }

    /// The statement with its parameters bound, in order.
    pub(super) fn bind(self, mut q: crate::sql::Query<'_>) -> crate::sql::Query<'_> {
        for p in self.params {
            q = match p {
                Param::Int(i) => q.bind(i),
                Param::Text(s) => q.bind(s),
                Param::OptText(s) => q.bind(s),
            };
        }
        q
    }

    fn ints(&mut self, values: &[i64]) -> &mut Self {
        self.push("(");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.int(*v);
        }
        self.push(")")
    }
}

const COMPONENT_SELECT: &str =
    "c.id, c.repository_id, c.format, c.component_key, c.namespace, c.name, c.version, c.created_at, c.uploaded_by";
const ASSET_SELECT: &str = "a.id, a.repository_id, a.component_id, a.path, a.sha256, a.sha1, a.md5, a.size, a.content_type, a.created_at, a.uploaded_by, a.last_downloaded, a.download_count";

/// What a repository holds, as the worker last counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepositoryUsage {
    /// Components (hosted: uploaded; proxy: cached).
    pub components: i64,
    /// Bytes of their assets.
    pub bytes: i64,
    /// Bytes of the blobs its retained index snapshots hold, each blob once.
    pub index_bytes: i64,
    /// When it was counted (ms).
    pub refreshed_at: i64,
}

fn parse_usage(r: &sqlx::any::AnyRow) -> DbResult<RepositoryUsage> {
    Ok(RepositoryUsage {
        components: r.try_get("components")?,
        bytes: r.try_get("bytes")?,
        index_bytes: r.try_get("index_bytes")?,
        refreshed_at: r.try_get("refreshed_at")?,
    })
}

impl Db {
    /// Runs a statement built at run time (see [`Built`]).
    pub(super) async fn run_statement(&self, op: &'static str, b: Built) -> DbResult<Vec<sqlx::any::AnyRow>> {
        self.run_built(op, b).await
    }

    async fn run_built(&self, op: &'static str, b: Built) -> DbResult<Vec<sqlx::any::AnyRow>> {
        self.count(op);
        let text = render(&b.text, Shape::Plain, self.backend());
        Ok(b.bind(sqlx::query(&text)).fetch_all(self.pool()).await?)
    }

    /// A page of what `search` finds: components, or (`assets`) their assets.
    async fn searched<T>(
        &self,
        op: &'static str,
        search: &Search,
        assets: bool,
        parse: fn(&sqlx::any::AnyRow) -> DbResult<T>,
    ) -> DbResult<Vec<T>> {
        if search.repositories.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Built::default();
        b.push(&if assets {
            format!("SELECT {ASSET_SELECT} FROM assets a JOIN components c ON c.id = a.component_id")
        } else {
            format!("SELECT {COMPONENT_SELECT} FROM components c")
        });
        filtered(&mut b, search, assets);
        self.run_built(op, b).await?.iter().map(parse).collect()
    }

    /// Writes `entry` in the writer's transaction, stored by whom and when: the component (kept
    /// when it exists, with its id), its keywords, and its assets (replaced by path, their
    /// download statistics kept).
    pub async fn catalogue_put(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        format: &str,
        entry: &Entry,
        (uploaded_by, now): (&str, i64),
    ) -> DbResult<i64> {
        let c = &entry.component;
        let insert = insert_or_ignore_id!("components.insert", "INSERT INTO components (repository_id, format, component_key, namespace, name, version, created_at, uploaded_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
        let binds = (repository_id, format, c.key.as_str(), c.group.as_str(), c.name.as_str(), c.version.as_str());
        let inserted =
            self.insert_or_ignore_id(self.bound(insert, binds).bind(now).bind(uploaded_by), &mut **tx).await?;
        let id = match inserted {
            Some(id) => id,
            // There already (a Conan recipe revision gaining a package revision).
            None => {
                let id =
                    sql!("components.id", "SELECT id FROM components WHERE repository_id = $1 AND component_key = $2");
                self.bound(id, (repository_id, c.key.as_str())).fetch_one(&mut **tx).await?.try_get("id")?
            }
        };
        // A component that was there has its keywords.
        let words = if inserted.is_some() { keywords(c) } else { BTreeSet::new() };
        if !words.is_empty() {
            let mut b = Built::default();
            b.push("INSERT INTO component_keywords (keyword, component_id) VALUES ");
            for (i, w) in words.iter().enumerate() {
                b.push(if i == 0 { "(" } else { ", (" }).text(w).push(", ").int(id).push(")");
            }
            self.count("component_keywords.insert");
            let text = render(&b.text, Shape::InsertOrIgnore, self.backend());
            b.bind(sqlx::query(&text)).execute(&mut **tx).await?;
        }
        // Every asset in one statement (an entry's paths are distinct).
        if !entry.assets.is_empty() {
            let mut b = Built::default();
            b.push("INSERT INTO assets (repository_id, component_id, path, sha256, sha1, md5, size, content_type, created_at, uploaded_by) VALUES ");
            for (i, a) in entry.assets.iter().enumerate() {
                b.push(if i == 0 { "(" } else { ", (" }).int(repository_id).push(", ").int(id);
                b.push(", ").text(&a.path).push(", ").text(&a.sha256);
                b.push(", ").param(Param::OptText(a.sha1.clone())).push(", ").param(Param::OptText(a.md5.clone()));
                b.push(", ").int(a.size).push(", ").text(&a.content_type).push(", ").int(now);
                b.push(", ").text(uploaded_by).push(")");
            }
            let upsert = Shape::Upsert {
                table: "assets",
                key: "repository_id, path",
                set: "component_id = NEW.component_id, sha256 = NEW.sha256, sha1 = NEW.sha1, md5 = NEW.md5, size = NEW.size, content_type = NEW.content_type, created_at = NEW.created_at, uploaded_by = NEW.uploaded_by",
            };
            self.count("assets.put");
            let text = render(&b.text, upsert, self.backend());
            b.bind(sqlx::query(&text)).execute(&mut **tx).await?;
        }
        Ok(id)
    }

    /// Forgets many components by key in one statement per 500, in the deletes' transaction
    /// (their assets and keywords go with them). Returns how many went.
    pub async fn catalogue_forget_keys(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        keys: &[String],
    ) -> DbResult<u64> {
        let mut gone = 0;
        for chunk in keys.chunks(500) {
            let mut b = Built::default();
            b.push("DELETE FROM components WHERE repository_id = ").int(repository_id).push(" AND component_key IN (");
            for (i, k) in chunk.iter().enumerate() {
                b.push(if i == 0 { "" } else { ", " }).text(k);
            }
            b.push(")");
            self.count("components.delete_many");
            let text = render(&b.text, Shape::Plain, self.backend());
            gone += b.bind(sqlx::query(&text)).execute(&mut **tx).await?.rows_affected();
        }
        Ok(gone)
    }

    /// Takes what a delete removed out of the catalogue, in its transaction.
    pub async fn catalogue_forget(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        forget: &Forget,
    ) -> DbResult<u64> {
        let done = match forget {
            Forget::Nothing => return Ok(0),
            Forget::Component(key) => {
                let delete =
                    sql!("components.delete", "DELETE FROM components WHERE repository_id = $1 AND component_key = $2");
                self.bound(delete, (repository_id, key.as_str())).execute(&mut **tx).await?
            }
            Forget::Assets { prefix } => {
                let delete = sql!(
                    "assets.delete_prefix",
                    "DELETE FROM assets WHERE repository_id = $1 AND path LIKE $2 ESCAPE '!'"
                );
                self.bound(delete, (repository_id, like_prefix(prefix))).execute(&mut **tx).await?
            }
        };
        Ok(done.rows_affected())
    }

    /// Writes a cached file's entry (a proxy's), in a transaction of its own.
    pub async fn catalogue_put_cached(&self, repository_id: i64, format: &str, entry: &Entry) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.catalogue_put(&mut tx, repository_id, format, entry, ("", now_ms())).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the one-time task `name` is done, and marking it done.
    pub async fn maintenance_done(&self, name: &str) -> DbResult<bool> {
        let done = sql!("maintenance.get", "SELECT done_at FROM maintenance WHERE name = $1");
        Ok(self.bound(done, (name,)).fetch_optional(self.pool()).await?.is_some())
    }

    /// Blobs (each once) of assets whose SHA-1 is not known yet, after `after` in digest order,
    /// at most `limit` (the worker computes their SHA-1 and MD5).
    pub async fn assets_without_sha1(&self, limit: i64, after: &str) -> DbResult<Vec<String>> {
        let list = sql!(
            "assets.without_sha1",
            "SELECT DISTINCT sha256 FROM assets WHERE sha1 IS NULL AND sha256 > $1 ORDER BY sha256 LIMIT $2"
        );
        let rows = self.bound(list, (after, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| text(r, "sha256")).collect()
    }

    /// Sets the SHA-1 of every asset of blob `sha256`, and its MD5 where the format gave none.
    pub async fn set_asset_digests(&self, sha256: &str, sha1: &str, md5: &str) -> DbResult<u64> {
        let set = sql!(
            "assets.set_digests",
            "UPDATE assets SET sha1 = $1, md5 = COALESCE(md5, $2) WHERE sha256 = $3 AND sha1 IS NULL"
        );
        Ok(self.bound(set, (sha1, md5, sha256)).execute(self.pool()).await?.rows_affected())
    }

    pub async fn mark_maintenance_done(&self, name: &str) -> DbResult<()> {
        let mark = insert_or_ignore!("maintenance.mark", "INSERT INTO maintenance (name, done_at) VALUES ($1, $2)");
        self.bound(mark, (name, now_ms())).execute(self.pool()).await?;
        Ok(())
    }

    /// Forgets the asset at `path` (a proxy's cached file that is gone), and its component when
    /// it has no other asset.
    pub async fn catalogue_forget_path(&self, repository_id: i64, path: &str) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let find = sql!("assets.by_path", "SELECT component_id FROM assets WHERE repository_id = $1 AND path = $2");
        let Some(row) = self.bound(find, (repository_id, path)).fetch_optional(&mut *tx).await? else {
            return Ok(());
        };
        let component: i64 = row.try_get("component_id")?;
        let delete = sql!("assets.delete", "DELETE FROM assets WHERE repository_id = $1 AND path = $2");
        self.bound(delete, (repository_id, path)).execute(&mut *tx).await?;
        let orphan = sql!(
            "components.delete_empty",
            "DELETE FROM components WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM assets WHERE component_id = $2)"
        );
        self.bound(orphan, (component, component)).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes a proxy's component out of its cache and the catalogue, in the caller's transaction:
    /// its files are fetched again when asked for. Whether it was there.
    pub async fn catalogue_forget_cached(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        component_id: i64,
    ) -> DbResult<bool> {
        let cache = sql!("proxy_cache.delete_component", "DELETE FROM proxy_cache WHERE repository_id = $1 AND path IN (SELECT path FROM assets WHERE component_id = $2)");
        self.bound(cache, (repository_id, component_id)).execute(&mut **tx).await?;
        let delete = sql!("components.delete_id", "DELETE FROM components WHERE id = $1 AND repository_id = $2");
        let done = self.bound(delete, (component_id, repository_id)).execute(&mut **tx).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Adds downloads to assets in one transaction: `(repository, path, count, last download
    /// ms)` each. Returns how many assets it updated (a path that is no asset — metadata, a
    /// file deleted since — updates nothing).
    pub async fn record_downloads(&self, rows: &[(i64, &str, i64, i64)]) -> DbResult<usize> {
        let add = sql!("assets.downloaded", "UPDATE assets SET download_count = download_count + $1, last_downloaded = CASE WHEN last_downloaded IS NULL OR last_downloaded < $2 THEN $3 ELSE last_downloaded END WHERE repository_id = $4 AND path = $5");
        let mut tx = self.begin().await?;
        let mut updated = 0;
        for (repo, path, count, last) in rows {
            let done = self.bound(add, (*count, *last, *last, *repo, *path)).execute(&mut *tx).await?;
            updated += usize::try_from(done.rows_affected()).unwrap_or(0);
        }
        tx.commit().await?;
        Ok(updated)
    }

    /// Counts every repository's components, their assets' bytes and the bytes of the blobs its
    /// retained index snapshots hold (each blob once, however many snapshots list it; only what
    /// builds wrote, not the package files a Go or Conan snapshot points at), and
    /// stores the counts (`repository_usage`; repositories with nothing get zeros).
    pub async fn refresh_usage(&self) -> DbResult<Vec<(i64, RepositoryUsage)>> {
        let components = sql!("components.usage", "SELECT r.id AS repository_id, (SELECT COUNT(*) FROM components c WHERE c.repository_id = r.id) AS n, CAST((SELECT COALESCE(SUM(a.size), 0) FROM assets a WHERE a.repository_id = r.id) AS BIGINT) AS bytes FROM repositories r ORDER BY r.id");
        let index = sql!("snapshot_files.usage", "SELECT x.repository_id AS repository_id, CAST(COALESCE(SUM(b.size), 0) AS BIGINT) AS bytes FROM (SELECT DISTINCT u.repository_id AS repository_id, f.sha256 AS sha256 FROM snapshot_files f JOIN snapshots s ON s.id = f.snapshot_id JOIN publication_units u ON u.id = s.unit_id) x JOIN blobs b ON b.sha256 = x.sha256 WHERE b.origin = 'snapshot' GROUP BY x.repository_id");
        let mut indexes = std::collections::HashMap::new();
        for r in &self.query(index).fetch_all(self.pool()).await? {
            indexes.insert(r.try_get::<i64, _>("repository_id")?, r.try_get::<i64, _>("bytes")?);
        }
        let now = now_ms();
        let rows = self.query(components).fetch_all(self.pool()).await?;
        let mut usage = Vec::with_capacity(rows.len());
        for r in &rows {
            let repository: i64 = r.try_get("repository_id")?;
            let index_bytes = indexes.get(&repository).copied().unwrap_or(0);
            let counted = RepositoryUsage {
                components: r.try_get("n")?,
                bytes: r.try_get("bytes")?,
                index_bytes,
                refreshed_at: now,
            };
            usage.push((repository, counted));
        }
        let put = upsert!(
            "repository_usage.put",
            "INSERT INTO repository_usage (repository_id, components, bytes, index_bytes, refreshed_at) VALUES ($1, $2, $3, $4, $5)",
            on "repository_usage" ("repository_id"),
            set "components = NEW.components, bytes = NEW.bytes, index_bytes = NEW.index_bytes, refreshed_at = NEW.refreshed_at"
        );
        let mut tx = self.begin().await?;
        for (repo, u) in &usage {
            self.bound(put, (*repo, u.components, u.bytes, u.index_bytes, now)).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(usage)
    }

    /// What a repository's components' files hold now, in `tx` (each asset's bytes: a blob
    /// shared with another repository counts in each), after locking the repository's quota row
    /// so that writers to it are counted one after another: what a quota is checked against.
    pub async fn quota_use_in(&self, tx: &mut Transaction<'_, Any>, repository_id: i64) -> DbResult<u64> {
        // SQLite's writing transactions run one at a time already.
        if self.backend() != super::Backend::Sqlite {
            // The repository's row in `quota_locks` (no other row refers to it, so locking it
            // waits for no foreign-key check elsewhere): made if need be on a connection of its
            // own before this transaction reads anything (locking a missing row would take a gap
            // lock on MySQL that the insert would wait for), then locked here first, so that the
            // sums below see every writer that committed before.
            let make = insert_or_ignore!("quota_locks.make", "INSERT INTO quota_locks (repository_id) VALUES ($1)");
            self.bound(make, (repository_id,)).execute(self.pool()).await?;
            let lock = crate::for_update!(
                "quota_locks.lock",
                "SELECT repository_id FROM quota_locks WHERE repository_id = $1"
            );
            self.bound(lock, (repository_id,)).fetch_optional(&mut **tx).await?;
        }
        self.repository_bytes_in(tx, repository_id).await
    }

    /// What a repository's components' files hold now, in `tx`.
    pub async fn repository_bytes_in(&self, tx: &mut Transaction<'_, Any>, repository_id: i64) -> DbResult<u64> {
        let sum = sql!(
            "assets.quota_use",
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM assets WHERE repository_id = $1"
        );
        let bytes: i64 = self.bound(sum, (repository_id,)).fetch_one(&mut **tx).await?.try_get("bytes")?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    /// What a repository's components' files hold now (read on the pool: no writer's lock).
    pub async fn repository_bytes(&self, repository_id: i64) -> DbResult<u64> {
        let sum = sql!(
            "assets.quota_use_now",
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM assets WHERE repository_id = $1"
        );
        let bytes: i64 = self.bound(sum, (repository_id,)).fetch_one(self.pool()).await?.try_get("bytes")?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    }

    /// A repository's usage as last counted.
    pub async fn usage(&self, repository_id: i64) -> DbResult<Option<RepositoryUsage>> {
        let get = sql!(
            "repository_usage.get",
            "SELECT components, bytes, index_bytes, refreshed_at FROM repository_usage WHERE repository_id = $1"
        );
        let row = self.bound(get, (repository_id,)).fetch_optional(self.pool()).await?;
        row.as_ref().map(parse_usage).transpose()
    }

    /// The groups a repository's components are in, in order, after `after` (from the first
    /// when `None`), at most `limit`: one index seek each, however many components there are.
    pub async fn catalogue_groups(
        &self,
        repository_id: i64,
        after: Option<&str>,
        limit: usize,
    ) -> DbResult<Vec<String>> {
        let first =
            sql!("components.first_group", "SELECT MIN(namespace) AS ns FROM components WHERE repository_id = $1");
        let next = sql!(
            "components.next_group",
            "SELECT MIN(namespace) AS ns FROM components WHERE repository_id = $1 AND namespace > $2"
        );
        let mut out: Vec<String> = Vec::new();
        while out.len() < limit {
            let row = match out.last().map(String::as_str).or(after) {
                None => self.bound(first, (repository_id,)).fetch_one(self.pool()).await?,
                Some(prev) => self.bound(next, (repository_id, prev)).fetch_one(self.pool()).await?,
            };
            match row.try_get::<Option<String>, _>("ns")? {
                Some(ns) => out.push(ns),
                None => break,
            }
        }
        Ok(out)
    }

    /// Every repository's usage as last counted, by repository id.
    pub async fn usage_all(&self) -> DbResult<std::collections::HashMap<i64, RepositoryUsage>> {
        let all = sql!(
            "repository_usage.all",
            "SELECT repository_id, components, bytes, index_bytes, refreshed_at FROM repository_usage"
        );
        let rows = self.query(all).fetch_all(self.pool()).await?;
        let mut out = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            out.insert(r.try_get("repository_id")?, parse_usage(r)?);
        }
        Ok(out)
    }

    /// Records the MD5 a worker computed after the upload (APT's).
    pub async fn catalogue_set_md5(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        path: &str,
        md5: &str,
    ) -> DbResult<()> {
        let set = sql!("assets.set_md5", "UPDATE assets SET md5 = $1 WHERE repository_id = $2 AND path = $3");
        self.bound(set, (md5, repository_id, path)).execute(&mut **tx).await?;
        Ok(())
    }

    /// One component by id.
    pub async fn catalogue_component(&self, id: i64) -> DbResult<Option<ComponentRow>> {
        let one = sql!("components.get", concat!("SELECT ", component_columns!(), " FROM components WHERE id = $1"));
        self.optional(self.pool(), one, (id,), ComponentRow::parse).await
    }

    /// One asset by id.
    pub async fn catalogue_asset(&self, id: i64) -> DbResult<Option<AssetRow>> {
        let one = sql!("assets.get", concat!("SELECT ", asset_columns!(), " FROM assets WHERE id = $1"));
        self.optional(self.pool(), one, (id,), AssetRow::parse).await
    }

    /// These components (those that exist), in one statement.
    pub async fn catalogue_components(&self, ids: &[i64]) -> DbResult<Vec<ComponentRow>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Built::default();
        b.push(&format!("SELECT {COMPONENT_SELECT} FROM components c WHERE c.id IN ")).ints(ids);
        self.run_built("components.of_ids", b).await?.iter().map(ComponentRow::parse).collect()
    }

    /// The repository's components keyed `keys` (those it has).
    pub async fn catalogue_components_by_keys(
        &self,
        repository_id: i64,
        keys: &[String],
    ) -> DbResult<Vec<ComponentRow>> {
        let s = sql!(
            "components.by_key",
            concat!(
                "SELECT ",
                component_columns!(),
                " FROM components WHERE repository_id = $1 AND component_key = $2"
            )
        );
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(row) = self.optional(self.pool(), s, (repository_id, key.as_str()), ComponentRow::parse).await?
            {
                out.push(row);
            }
        }
        Ok(out)
    }

    /// In `tx`: the files of the repository's component `key`, `(path, sha256)`, sorted.
    pub async fn catalogue_files_of_key_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        key: &str,
    ) -> DbResult<Vec<(String, String)>> {
        let s = sql!("assets.of_key", "SELECT a.path AS path, a.sha256 AS sha256 FROM assets a JOIN components c ON c.id = a.component_id WHERE c.repository_id = $1 AND c.component_key = $2 ORDER BY a.path");
        let rows = self.bound(s, (repository_id, key)).fetch_all(&mut **tx).await?;
        let mut out: Vec<(String, String)> = rows
            .iter()
            .map(|r| Ok((text(r, "path")?, text(r, "sha256")?.trim().to_string())))
            .collect::<DbResult<_>>()?;
        out.sort();
        Ok(out)
    }

    /// Every component of the repository (a snapshot diff's names resolved to keys).
    pub async fn catalogue_components_named(&self, repository_id: i64) -> DbResult<Vec<ComponentRow>> {
        let s = sql!(
            "components.of_repository",
            concat!("SELECT ", component_columns!(), " FROM components WHERE repository_id = $1 ORDER BY id")
        );
        let rows = self.bound(s, (repository_id,)).fetch_all(self.pool()).await?;
        rows.iter().map(ComponentRow::parse).collect()
    }

    /// The assets of these components, by component then id.
    pub async fn catalogue_assets_of(&self, components: &[i64]) -> DbResult<Vec<AssetRow>> {
        if components.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = Built::default();
        b.push(&format!("SELECT {ASSET_SELECT} FROM assets a WHERE a.component_id IN "))
            .ints(components)
            .push(" ORDER BY a.component_id, a.id");
        self.run_built("assets.of_components", b).await?.iter().map(AssetRow::parse).collect()
    }

    /// A page of the components `search` finds.
    pub async fn catalogue_search(&self, search: &Search) -> DbResult<Vec<ComponentRow>> {
        self.searched("components.search", search, false, ComponentRow::parse).await
    }

    /// The repository's assets whose path begins with `prefix`, at most `limit`, in the order
    /// they were stored (the file browser groups them by folder itself: no collation decides).
    pub async fn assets_under(&self, repository_id: i64, prefix: &str, limit: i64) -> DbResult<Vec<AssetRow>> {
        let under = sql!(
            "assets.under",
            concat!(
                "SELECT ",
                asset_columns!(),
                " FROM assets WHERE repository_id = $1 AND path LIKE $2 ESCAPE '!' ORDER BY id LIMIT $3"
            )
        );
        let pattern = crate::db::like_prefix(prefix);
        let rows = self.bound(under, (repository_id, pattern.as_str(), limit)).fetch_all(self.pool()).await?;
        rows.iter().map(AssetRow::parse).collect()
    }

    /// A page of the assets of the components `search` finds (its checksums match the assets).
    pub async fn catalogue_search_assets(&self, search: &Search) -> DbResult<Vec<AssetRow>> {
        self.searched("assets.search", search, true, AssetRow::parse).await
    }

    /// The sort value of a component, for the token of the page that ends with it.
    pub fn catalogue_sort_value(sort: Sort, c: &ComponentRow, repository_name: &str) -> String {
        match sort {
            Sort::Id => String::new(),
            Sort::Group => c.namespace.clone(),
            Sort::Name => c.name.clone(),
            Sort::Version => c.version.clone(),
            Sort::Repository => repository_name.to_string(),
        }
    }
}

/// The joins, conditions, order and limit of a search (`assets`: rows are assets `a` of the
/// components `c`).
fn filtered(b: &mut Built, s: &Search, assets: bool) {
    let sort = s.sort.column();
    if sort == Some("r.name") {
        b.push(" JOIN repositories r ON r.id = c.repository_id");
    }
    b.push(" WHERE c.repository_id IN ").ints(&s.repositories);
    if let Some(f) = &s.format {
        b.push(" AND c.format = ").text(f);
    }
    if let Some(p) = &s.group {
        b.pattern("c.namespace", p);
    }
    if let Some(p) = &s.name {
        b.pattern("c.name", p);
    }
    if let Some(p) = &s.version {
        b.pattern("c.version", p);
    }
    if let Some(k) = &s.keyword {
        b.push(" AND c.id IN (SELECT k.component_id FROM component_keywords k WHERE 1 = 1");
        b.pattern("k.keyword", &k.lower()).push(")");
    }
    for (column, value) in [("sha256", &s.sha256), ("sha1", &s.sha1), ("md5", &s.md5)] {
        let Some(value) = value else { continue };
        if assets {
            b.push(&format!(" AND a.{column} = ")).text(&value.to_lowercase());
        } else {
            b.push(&format!(" AND c.id IN (SELECT x.component_id FROM assets x WHERE x.{column} = "))
                .text(&value.to_lowercase())
                .push(")");
        }
    }
    let id = if assets { "a.id" } else { "c.id" };
    let (cmp, dir) = if s.descending { ("<", "DESC") } else { (">", "ASC") };
    if let Some((value, after)) = &s.after {
        match sort {
            None => {
                b.push(&format!(" AND {id} {cmp} ")).int(*after);
            }
            Some(col) => {
                // The leading bound gives the index a start: with the OR alone, PostgreSQL
                // reads the range from its beginning and filters (a walk over a repository
                // then costs the square of its size).
                b.push(&format!(" AND {col} {cmp}= ")).text(value);
                b.push(&format!(" AND ({col} {cmp} ")).text(value);
                b.push(&format!(" OR ({col} = ")).text(value);
                b.push(&format!(" AND {id} {cmp} ")).int(*after).push("))");
            }
        }
    }
    match sort {
        None => b.push(&format!(" ORDER BY {id} {dir}")),
        Some(col) => b.push(&format!(" ORDER BY {col} {dir}, {id} {dir}")),
    };
    b.push(" LIMIT ").int(s.limit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_whole_fields_and_their_words() {
        let c = Component {
            key: "k".into(),
            group: "github.com/Acme".into(),
            name: "go-yaml".into(),
            version: "v1.2.0".into(),
        };
        let words: Vec<String> = keywords(&c).into_iter().collect();
        assert_eq!(
            words,
            ["0", "2", "acme", "com", "github", "github.com/acme", "go", "go-yaml", "v1", "v1.2.0", "yaml"]
        );
    }

    #[test]
    fn a_trailing_star_is_a_prefix() {
        assert_eq!(Pattern::parse("lib*"), Pattern::Prefix("lib".into()));
        assert_eq!(Pattern::parse("lib"), Pattern::Exact("lib".into()));
    }
}
