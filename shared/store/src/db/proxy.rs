//! Storage of what proxy repositories fetched: one row per repository and upstream path, pointing
//! at a blob (status 200) or remembering an upstream 404/410 (no blob).

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{like_prefix, opt_text, text, Db, DbResult};
use crate::{sql, upsert};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyEntry {
    pub repository_id: i64,
    pub path: String,
    /// 200 for cached bytes; the upstream's 404 or 410 for a negative entry.
    pub status: i32,
    pub sha256: Option<String>,
    pub size: i64,
    pub content_type: String,
    pub upstream_etag: Option<String>,
    pub upstream_last_modified: Option<String>,
    /// When the upstream last sent or confirmed this (ms).
    pub fetched_at: i64,
}

impl ProxyEntry {
    pub fn is_negative(&self) -> bool {
        self.sha256.is_none()
    }
}

fn parse(r: &AnyRow) -> DbResult<ProxyEntry> {
    Ok(ProxyEntry {
        repository_id: r.try_get("repository_id")?,
        path: text(r, "path")?,
        status: r.try_get("status")?,
        sha256: opt_text(r, "sha256")?.map(|s| s.trim().to_string()),
        size: r.try_get("size")?,
        content_type: text(r, "content_type")?,
        upstream_etag: opt_text(r, "upstream_etag")?,
        upstream_last_modified: opt_text(r, "upstream_last_modified")?,
        fetched_at: r.try_get("fetched_at")?,
    })
}

impl Db {
    pub async fn proxy_entry(&self, repository_id: i64, path: &str) -> DbResult<Option<ProxyEntry>> {
        let row = self.query(sql!("proxy_cache.get", "SELECT repository_id, path, status, sha256, size, content_type, upstream_etag, upstream_last_modified, fetched_at FROM proxy_cache WHERE repository_id = $1 AND path = $2"))
            .bind(repository_id)
            .bind(path)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse).transpose()
    }

    /// A cached file of the repository with these bytes (any path), if one is cached.
    pub async fn proxy_entry_with_sha(&self, repository_id: i64, sha256: &str) -> DbResult<Option<ProxyEntry>> {
        let row = self.query(sql!("proxy_cache.by_sha", "SELECT repository_id, path, status, sha256, size, content_type, upstream_etag, upstream_last_modified, fetched_at FROM proxy_cache WHERE sha256 = $1 AND repository_id = $2 LIMIT 1"))
            .bind(sha256)
            .bind(repository_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse).transpose()
    }

    /// A page of the repository's cached files (not the remembered misses), by path.
    pub async fn cached_files_page(&self, repository_id: i64, after: &str, limit: i64) -> DbResult<Vec<ProxyEntry>> {
        let page = sql!("proxy_cache.page", "SELECT repository_id, path, status, sha256, size, content_type, upstream_etag, upstream_last_modified, fetched_at FROM proxy_cache WHERE repository_id = $1 AND path > $2 AND sha256 IS NOT NULL ORDER BY path LIMIT $3");
        let rows = self.bound(page, (repository_id, after, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(parse).collect()
    }

    /// The repository's cached files (not the remembered misses) whose path ends with `/<name>`,
    /// at most `limit` (an APK proxy's upstream indexes, whatever their branch).
    pub async fn cached_files_named(&self, repository_id: i64, name: &str, limit: i64) -> DbResult<Vec<ProxyEntry>> {
        let named = sql!("proxy_cache.named", "SELECT repository_id, path, status, sha256, size, content_type, upstream_etag, upstream_last_modified, fetched_at FROM proxy_cache WHERE repository_id = $1 AND path LIKE $2 ESCAPE '!' AND sha256 IS NOT NULL ORDER BY path LIMIT $3");
        let escaped = crate::db::like_prefix(name);
        let pattern = format!("%/{}", escaped.trim_end_matches('%'));
        let rows = self.bound(named, (repository_id, pattern.as_str(), limit)).fetch_all(self.pool()).await?;
        rows.iter().map(parse).collect()
    }

    /// Inserts or replaces the entry of `(repository_id, path)`.
    pub async fn put_proxy_entry(&self, e: &ProxyEntry) -> DbResult<()> {
        self.query(upsert!(
            "proxy_cache.put",
            "INSERT INTO proxy_cache (repository_id, path, status, sha256, size, content_type, upstream_etag, upstream_last_modified, fetched_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            on "proxy_cache" ("repository_id, path"),
            set "status = NEW.status, sha256 = NEW.sha256, size = NEW.size, content_type = NEW.content_type, upstream_etag = NEW.upstream_etag, upstream_last_modified = NEW.upstream_last_modified, fetched_at = NEW.fetched_at"
        ))
            .bind(e.repository_id)
            .bind(&e.path)
            .bind(e.status)
            .bind(e.sha256.clone())
            .bind(e.size)
            .bind(&e.content_type)
            .bind(e.upstream_etag.clone())
            .bind(e.upstream_last_modified.clone())
            .bind(e.fetched_at)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Forgets the entry of `(repository_id, path)`.
    pub async fn delete_proxy_entry(&self, repository_id: i64, path: &str) -> DbResult<()> {
        self.query(sql!("proxy_cache.delete", "DELETE FROM proxy_cache WHERE repository_id = $1 AND path = $2"))
            .bind(repository_id)
            .bind(path)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Keeps the `keep` newest remembered misses (404/410) of a proxy repository and deletes
    /// the older ones; how many went.
    pub async fn trim_negative_proxy_entries(&self, repository_id: i64, keep: u64) -> DbResult<u64> {
        let nth = sql!("proxy_cache.negative_nth", "SELECT fetched_at FROM proxy_cache WHERE repository_id = $1 AND sha256 IS NULL ORDER BY fetched_at DESC LIMIT 1 OFFSET $2");
        let offset = i64::try_from(keep).unwrap_or(i64::MAX);
        let Some(row) = self.bound(nth, (repository_id, offset)).fetch_optional(self.pool()).await? else {
            return Ok(0);
        };
        let cutoff: i64 = row.try_get("fetched_at")?;
        let delete = sql!(
            "proxy_cache.negative_trim",
            "DELETE FROM proxy_cache WHERE repository_id = $1 AND sha256 IS NULL AND fetched_at <= $2"
        );
        Ok(self.bound(delete, (repository_id, cutoff)).execute(self.pool()).await?.rows_affected())
    }

    /// The upstream confirmed the cached copy (304): it is fresh again from `at`.
    pub async fn touch_proxy_entry(&self, repository_id: i64, path: &str, at: i64) -> DbResult<()> {
        self.query(sql!(
            "proxy_cache.touch",
            "UPDATE proxy_cache SET fetched_at = $1 WHERE repository_id = $2 AND path = $3"
        ))
        .bind(at)
        .bind(repository_id)
        .bind(path)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Marks every entry under `prefix` except `keep` as due for revalidation (used when an
    /// index's signed root changed, so the files it lists are not served from an older fetch).
    pub async fn expire_proxy_entries(&self, repository_id: i64, prefix: &str, keep: &str) -> DbResult<u64> {
        let done = self.query(sql!("proxy_cache.expire", "UPDATE proxy_cache SET fetched_at = 0 WHERE repository_id = $1 AND path LIKE $2 ESCAPE '!' AND path <> $3"))
        .bind(repository_id)
        .bind(like_prefix(prefix))
        .bind(keep)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }
}
