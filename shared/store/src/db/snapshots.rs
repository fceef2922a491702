//! A repository's named snapshots (migration 0030): a point-in-time view clients install from.
//! A snapshot is its file list — every path a client may ask for under it, each by its blob — so
//! it is made by copying rows, never bytes: the index files its publication units had published
//! and the catalogue's assets of the repository (or of a group's members, first member first).

use sqlx::Row;

use super::publication::SnapshotFile;
use super::{opt_text, text, Db, DbError, DbResult};
use crate::{insert_id, insert_or_ignore, sql};

/// A snapshot's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositorySnapshot {
    pub id: i64,
    pub repository_id: i64,
    pub name: String,
    pub created_at: i64,
    pub created_by: Option<String>,
    /// How many files it lists (hidden ones too), and the bytes of those clients ask for (a
    /// blob listed twice counts twice).
    pub files: i64,
    pub bytes: i64,
}

impl RepositorySnapshot {
    fn read(r: &sqlx::any::AnyRow) -> DbResult<Self> {
        Ok(Self {
            id: r.try_get("id")?,
            repository_id: r.try_get("repository_id")?,
            name: text(r, "name")?,
            created_at: r.try_get("created_at")?,
            created_by: opt_text(r, "created_by")?,
            files: r.try_get("files")?,
            bytes: r.try_get("bytes")?,
        })
    }
}

/// A file a snapshot lists that belongs to a component (what a diff compares).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedAsset {
    pub path: String,
    pub sha256: String,
    /// The component's group (a Go module's path but its last element, an APK unit, …).
    pub namespace: String,
    pub name: String,
    pub version: String,
}

/// An index file a snapshot lists: `file` at the path clients ask for, published by the unit
/// `unit_id` as `unit_path` (what a rollback publishes again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFile {
    pub file: SnapshotFile,
    pub unit_id: i64,
    pub unit_path: String,
}

/// A publication unit pointed at a snapshot (a rollback): it publishes that snapshot's index
/// files again until it is pointed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitPin {
    pub unit_id: i64,
    pub kind: String,
    pub unit_key: String,
    pub snapshot_id: i64,
    pub snapshot: String,
    pub pinned_at: i64,
    pub pinned_by: Option<String>,
}

impl Db {
    /// Makes the snapshot `name` of a repository in one transaction: `files` (its units' index
    /// files, at the paths clients ask for), then the catalogue's assets of each repository of
    /// `assets_of` in order, then the component files of the snapshots of `pinned`, a path
    /// listed already keeping its first file. A name taken already
    /// is a [`DbError::Conflict`]; then, with `cache_of`, every file that proxy repository
    /// cached.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_repository_snapshot(
        &self,
        repository_id: i64,
        name: &str,
        created_by: Option<&str>,
        created_at: i64,
        files: &[UnitFile],
        (assets_of, pinned): (&[i64], &[i64]),
        cache_of: Option<i64>,
    ) -> DbResult<RepositorySnapshot> {
        let mut tx = self.begin().await?;
        let insert = insert_id!("repository_snapshots.insert", "INSERT INTO repository_snapshots (repository_id, name, created_at, created_by, files, bytes) VALUES ($1, $2, $3, $4, 0, 0)");
        let id = self.insert_id(self.bound(insert, (repository_id, name, created_at, created_by)), &mut *tx).await?;
        const ADD: &str = "INSERT INTO repository_snapshot_files (snapshot_id, path, sha256, size, content_type, unit_id, unit_path) VALUES ($1, $2, $3, $4, $5, $6, $7)";
        let add = insert_or_ignore!("repository_snapshot_files.add", ADD);
        static ADD_MANY: crate::sql::Sql = crate::sql::Sql::with_rows(
            "repository_snapshot_files.add_many",
            ADD,
            crate::sql::Shape::InsertOrIgnore,
            200,
        );
        self.insert_rows(&mut tx, &ADD_MANY, add, files, |q, u| {
            let f = &u.file;
            q.bind(id)
                .bind(f.path.as_str())
                .bind(f.sha256.as_str())
                .bind(f.size)
                .bind(f.content_type.as_str())
                .bind(u.unit_id)
                .bind(u.unit_path.as_str())
        })
        .await?;
        // One statement per repository, however many assets: rows are copied, never bytes.
        let assets = insert_or_ignore!("repository_snapshot_files.add_assets", "INSERT INTO repository_snapshot_files (snapshot_id, path, sha256, size, content_type, namespace, name, version, component_key, component_created_at) SELECT $1, a.path, a.sha256, a.size, a.content_type, c.namespace, c.name, c.version, c.component_key, c.created_at FROM assets a JOIN components c ON c.id = a.component_id WHERE a.repository_id = $2");
        for source in assets_of {
            self.bound(assets, (id, *source)).execute(&mut *tx).await?;
        }
        // The packages the snapshots its units are pointed at list (what their indexes list,
        // which the repository may have deleted since).
        let kept = insert_or_ignore!("repository_snapshot_files.add_pinned", "INSERT INTO repository_snapshot_files (snapshot_id, path, sha256, size, content_type, namespace, name, version, component_key, component_created_at) SELECT $1, f.path, f.sha256, f.size, f.content_type, f.namespace, f.name, f.version, f.component_key, f.component_created_at FROM repository_snapshot_files f WHERE f.snapshot_id = $2 AND f.name IS NOT NULL");
        for source in pinned {
            self.bound(kept, (id, *source)).execute(&mut *tx).await?;
        }
        // A proxy that publishes nothing of its own: the upstream's files it cached, its
        // indexes among them.
        if let Some(proxy) = cache_of {
            let cached = insert_or_ignore!("repository_snapshot_files.add_cached", "INSERT INTO repository_snapshot_files (snapshot_id, path, sha256, size, content_type) SELECT $1, p.path, p.sha256, p.size, p.content_type FROM proxy_cache p WHERE p.repository_id = $2 AND p.status = 200 AND p.sha256 IS NOT NULL");
            self.bound(cached, (id, proxy)).execute(&mut *tx).await?;
        }
        let count = sql!("repository_snapshots.count", "UPDATE repository_snapshots SET files = (SELECT COUNT(*) FROM repository_snapshot_files f WHERE f.snapshot_id = $1), bytes = (SELECT COALESCE(SUM(f.size), 0) FROM repository_snapshot_files f WHERE f.snapshot_id = $2 AND f.path NOT LIKE '.%') WHERE id = $3");
        self.bound(count, (id, id, id)).execute(&mut *tx).await?;
        let read = sql!(
            "repository_snapshots.by_id",
            "SELECT id, repository_id, name, created_at, created_by, files, bytes FROM repository_snapshots WHERE id = $1"
        );
        let row = self.bound(read, (id,)).fetch_one(&mut *tx).await?;
        let snapshot = RepositorySnapshot::read(&row)?;
        tx.commit().await?;
        Ok(snapshot)
    }

    /// A repository's snapshots, newest first.
    pub async fn repository_snapshots(&self, repository_id: i64) -> DbResult<Vec<RepositorySnapshot>> {
        let s = sql!("repository_snapshots.list", "SELECT id, repository_id, name, created_at, created_by, files, bytes FROM repository_snapshots WHERE repository_id = $1 ORDER BY created_at DESC, id DESC");
        let rows = self.bound(s, (repository_id,)).fetch_all(self.pool()).await?;
        rows.iter().map(RepositorySnapshot::read).collect()
    }

    /// The snapshot `name` of a repository.
    pub async fn repository_snapshot(&self, repository_id: i64, name: &str) -> DbResult<Option<RepositorySnapshot>> {
        let s = sql!("repository_snapshots.by_name", "SELECT id, repository_id, name, created_at, created_by, files, bytes FROM repository_snapshots WHERE repository_id = $1 AND name = $2");
        let row = self.bound(s, (repository_id, name)).fetch_optional(self.pool()).await?;
        row.as_ref().map(RepositorySnapshot::read).transpose()
    }

    /// The repository's newest snapshot made at or before `at` (ms): the repository as it was
    /// then, as far as its snapshots tell.
    pub async fn repository_snapshot_at(&self, repository_id: i64, at: i64) -> DbResult<Option<RepositorySnapshot>> {
        let s = sql!("repository_snapshots.at", "SELECT id, repository_id, name, created_at, created_by, files, bytes FROM repository_snapshots WHERE repository_id = $1 AND created_at <= $2 ORDER BY created_at DESC, id DESC LIMIT 1");
        let row = self.bound(s, (repository_id, at)).fetch_optional(self.pool()).await?;
        row.as_ref().map(RepositorySnapshot::read).transpose()
    }

    /// Deletes a snapshot (its files go with it; the collector frees blobs nothing else lists).
    /// False when there was none.
    pub async fn delete_repository_snapshot(&self, id: i64) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let files =
            sql!("repository_snapshot_files.delete", "DELETE FROM repository_snapshot_files WHERE snapshot_id = $1");
        self.bound(files, (id,)).execute(&mut *tx).await?;
        // Not one a unit was pointed at meanwhile (the pin's row keeps it).
        let s = sql!("repository_snapshots.delete", "DELETE FROM repository_snapshots WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM unit_pins p WHERE p.snapshot_id = $2)");
        let done = self.bound(s, (id, id)).execute(&mut *tx).await?;
        if done.rows_affected() == 0 {
            // Its files stay with it.
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// One file of a snapshot.
    pub async fn repository_snapshot_file(&self, snapshot_id: i64, path: &str) -> DbResult<Option<SnapshotFile>> {
        let s = sql!(
            "repository_snapshot_files.one",
            "SELECT path, sha256, size, content_type FROM repository_snapshot_files WHERE snapshot_id = $1 AND path = $2"
        );
        let row = self.bound(s, (snapshot_id, path)).fetch_optional(self.pool()).await?;
        row.as_ref().map(SnapshotFile::read).transpose()
    }

    /// Adds `file` to a snapshot — a proxy's file fetched on its first request through the
    /// snapshot — counted in its totals. A path the snapshot lists already keeps its file, and
    /// a snapshot deleted meanwhile takes nothing. The file the snapshot lists at that path.
    pub async fn add_repository_snapshot_file(
        &self,
        snapshot_id: i64,
        file: &SnapshotFile,
    ) -> DbResult<Option<SnapshotFile>> {
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            // The snapshot's row first, locked: two fills of one snapshot take turns (rather than
            // each holding a shared lock the other's count update waits for), and a deletion
            // under way is waited out.
            let lock = crate::for_update!("repository_snapshots.lock", "SELECT id FROM repository_snapshots WHERE id = $1");
            if self.bound(lock, (snapshot_id,)).fetch_optional(&mut *tx).await?.is_none() {
                return Ok(None);
            }
            let add = insert_or_ignore!("repository_snapshot_files.fill", "INSERT INTO repository_snapshot_files (snapshot_id, path, sha256, size, content_type) VALUES ($1, $2, $3, $4, $5)");
            let binds = (snapshot_id, file.path.as_str(), file.sha256.as_str(), file.size, file.content_type.as_str());
            if self.bound(add, binds).execute(&mut *tx).await?.rows_affected() == 1 {
                let count = sql!(
                    "repository_snapshots.count_one",
                    "UPDATE repository_snapshots SET files = files + 1, bytes = bytes + $1 WHERE id = $2"
                );
                self.bound(count, (file.size, snapshot_id)).execute(&mut *tx).await?;
            }
            let one = sql!(
                "repository_snapshot_files.one_in",
                "SELECT path, sha256, size, content_type FROM repository_snapshot_files WHERE snapshot_id = $1 AND path = $2"
            );
            let row = self.bound(one, (snapshot_id, file.path.as_str())).fetch_optional(&mut *tx).await?;
            tx.commit().await?;
            row.as_ref().map(SnapshotFile::read).transpose()
        })
        .await
    }

    /// A count of the repository's writes that only grows: its publication units' requested
    /// revisions (every write asks for one; a unit is never deleted but with its repository).
    pub async fn repository_generation(&self, repository_id: i64) -> DbResult<i64> {
        let s = sql!("publication_units.generation", "SELECT CAST(COALESCE(SUM(desired_revision), 0) AS BIGINT) AS g FROM publication_units WHERE repository_id = $1");
        Ok(self.bound(s, (repository_id,)).fetch_one(self.pool()).await?.try_get("g")?)
    }

    /// What changes whenever a repository's catalogued files do: their count, the sum and
    /// greatest of their ids (ids only grow), their latest time and their bytes (an asset
    /// replaced at its path keeps its id). What an export's entity tag is made of.
    pub async fn assets_fingerprint(&self, repository_id: i64) -> DbResult<[i64; 5]> {
        let s = sql!("assets.fingerprint", "SELECT CAST(COUNT(*) AS BIGINT) AS n, CAST(COALESCE(SUM(id), 0) AS BIGINT) AS ids, CAST(COALESCE(MAX(id), 0) AS BIGINT) AS last, CAST(COALESCE(MAX(created_at), 0) AS BIGINT) AS latest, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM assets WHERE repository_id = $1");
        let r = self.bound(s, (repository_id,)).fetch_one(self.pool()).await?;
        Ok([r.try_get("n")?, r.try_get("ids")?, r.try_get("last")?, r.try_get("latest")?, r.try_get("bytes")?])
    }

    /// The files of a snapshot that belong to components, by path.
    pub async fn repository_snapshot_assets(&self, snapshot_id: i64) -> DbResult<Vec<ListedAsset>> {
        let s = sql!("repository_snapshot_files.assets", "SELECT path, sha256, namespace, name, version FROM repository_snapshot_files WHERE snapshot_id = $1 AND name IS NOT NULL ORDER BY path");
        let rows = self.bound(s, (snapshot_id,)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| {
                Ok(ListedAsset {
                    path: text(r, "path")?,
                    sha256: text(r, "sha256")?.trim().to_string(),
                    namespace: opt_text(r, "namespace")?.unwrap_or_default(),
                    name: text(r, "name")?,
                    version: text(r, "version")?,
                })
            })
            .collect()
    }
}

/// A component a snapshot lists, with its files (what an export of the snapshot names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotComponent {
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub version: String,
    pub created_at: i64,
    /// `(path, sha256, size)`, by path.
    pub files: Vec<(String, String, i64)>,
}

impl Db {
    /// The components snapshot `snapshot_id` lists, by key; `None` when it was made before
    /// snapshots named them (it lists files of components without their keys).
    pub async fn repository_snapshot_components(&self, snapshot_id: i64) -> DbResult<Option<Vec<SnapshotComponent>>> {
        let s = sql!("repository_snapshot_files.components", "SELECT path, sha256, size, namespace, name, version, component_key, component_created_at FROM repository_snapshot_files WHERE snapshot_id = $1 AND name IS NOT NULL ORDER BY component_key, path");
        let rows = self.bound(s, (snapshot_id,)).fetch_all(self.pool()).await?;
        let mut out: Vec<SnapshotComponent> = Vec::new();
        for r in &rows {
            let Some(key) = opt_text(r, "component_key")? else { return Ok(None) };
            let file = (text(r, "path")?, text(r, "sha256")?.trim().to_string(), r.try_get("size")?);
            match out.last_mut() {
                Some(c) if c.key == key => c.files.push(file),
                _ => out.push(SnapshotComponent {
                    key,
                    namespace: opt_text(r, "namespace")?.unwrap_or_default(),
                    name: text(r, "name")?,
                    version: text(r, "version")?,
                    created_at: r.try_get::<Option<i64>, _>("component_created_at")?.unwrap_or(0),
                    files: vec![file],
                }),
            }
        }
        Ok(Some(out))
    }

    /// The size of blob `sha256` when a component of the repository, or one its snapshots
    /// list, has it as a file.
    pub async fn repository_blob(&self, repository_id: i64, sha256: &str) -> DbResult<Option<i64>> {
        let s = sql!(
            "assets.blob_of_repository",
            "SELECT size FROM assets WHERE repository_id = $1 AND sha256 = $2 LIMIT 1"
        );
        if let Some(r) = self.bound(s, (repository_id, sha256)).fetch_optional(self.pool()).await? {
            return Ok(Some(r.try_get("size")?));
        }
        let s = sql!("repository_snapshot_files.blob_of_repository", "SELECT f.size FROM repository_snapshot_files f JOIN repository_snapshots s ON s.id = f.snapshot_id WHERE s.repository_id = $1 AND f.sha256 = $2 AND f.name IS NOT NULL LIMIT 1");
        let row = self.bound(s, (repository_id, sha256)).fetch_optional(self.pool()).await?;
        row.map(|r| Ok(r.try_get("size")?)).transpose()
    }

    /// The units whose index files snapshot `snapshot_id` keeps.
    pub async fn repository_snapshot_units(&self, snapshot_id: i64) -> DbResult<Vec<i64>> {
        let s = sql!("repository_snapshot_files.units", "SELECT DISTINCT unit_id FROM repository_snapshot_files WHERE snapshot_id = $1 AND unit_id IS NOT NULL ORDER BY unit_id");
        let rows = self.bound(s, (snapshot_id,)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(r.try_get("unit_id")?)).collect()
    }

    /// The files unit `unit_id` had published when snapshot `snapshot_id` was made, under the
    /// paths it published them at.
    pub async fn repository_snapshot_unit_files(&self, snapshot_id: i64, unit_id: i64) -> DbResult<Vec<SnapshotFile>> {
        let s = sql!("repository_snapshot_files.of_unit", "SELECT unit_path AS path, sha256, size, content_type FROM repository_snapshot_files WHERE snapshot_id = $1 AND unit_id = $2 ORDER BY unit_path");
        let rows = self.bound(s, (snapshot_id, unit_id)).fetch_all(self.pool()).await?;
        rows.iter().map(SnapshotFile::read).collect()
    }

    /// Points each unit of `units` (of repository `repository_id`: `(id, kind, key)`) at snapshot
    /// `snapshot_id` and requests its publication, in one transaction.
    pub async fn pin_units(
        &self,
        repository_id: i64,
        snapshot_id: i64,
        units: &[(i64, String, String)],
        (by, at): (Option<&str>, i64),
    ) -> DbResult<()> {
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            for (unit, kind, key) in units {
                let drop = sql!("unit_pins.replace", "DELETE FROM unit_pins WHERE unit_id = $1");
                self.bound(drop, (*unit,)).execute(&mut *tx).await?;
                let pin = sql!(
                    "unit_pins.insert",
                    "INSERT INTO unit_pins (unit_id, snapshot_id, pinned_at, pinned_by) VALUES ($1, $2, $3, $4)"
                );
                self.bound(pin, (*unit, snapshot_id, at, by)).execute(&mut *tx).await?;
                self.record_change(&mut tx, repository_id, kind, key).await?;
            }
            tx.commit().await.map_err(DbError::from)
        })
        .await
    }

    /// Points each unit of `units` back at its rows: the pin goes and the unit is built again
    /// from nothing (what it published while pinned is not continued). True for each unit that
    /// was pinned.
    pub async fn unpin_units(&self, repository_id: i64, units: &[(i64, String, String)]) -> DbResult<Vec<bool>> {
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            let mut done = Vec::with_capacity(units.len());
            for (unit, kind, key) in units {
                let drop = sql!("unit_pins.delete", "DELETE FROM unit_pins WHERE unit_id = $1");
                let was = self.bound(drop, (*unit,)).execute(&mut *tx).await?.rows_affected() > 0;
                if was {
                    self.record_change(&mut tx, repository_id, kind, key).await?;
                    let whole = sql!(
                        "publication_units.whole_one",
                        "UPDATE publication_units SET whole_at_revision = desired_revision WHERE id = $1"
                    );
                    self.bound(whole, (*unit,)).execute(&mut *tx).await?;
                }
                done.push(was);
            }
            tx.commit().await?;
            Ok(done)
        })
        .await
    }

    /// The repository's pinned units.
    pub async fn unit_pins(&self, repository_id: i64) -> DbResult<Vec<UnitPin>> {
        let s = sql!("unit_pins.list", "SELECT p.unit_id, u.kind, u.unit_key, p.snapshot_id, s.name, p.pinned_at, p.pinned_by FROM unit_pins p JOIN publication_units u ON u.id = p.unit_id JOIN repository_snapshots s ON s.id = p.snapshot_id WHERE u.repository_id = $1 ORDER BY u.kind, u.unit_key");
        let rows = self.bound(s, (repository_id,)).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|r| {
                Ok(UnitPin {
                    unit_id: r.try_get("unit_id")?,
                    kind: text(r, "kind")?,
                    unit_key: text(r, "unit_key")?,
                    snapshot_id: r.try_get("snapshot_id")?,
                    snapshot: text(r, "name")?,
                    pinned_at: r.try_get("pinned_at")?,
                    pinned_by: opt_text(r, "pinned_by")?,
                })
            })
            .collect()
    }

    /// The snapshot unit `unit_id` is pointed at, if any.
    pub async fn unit_pin(&self, unit_id: i64) -> DbResult<Option<i64>> {
        let s = sql!("unit_pins.of_unit", "SELECT snapshot_id FROM unit_pins WHERE unit_id = $1");
        let row = self.bound(s, (unit_id,)).fetch_optional(self.pool()).await?;
        row.map(|r| Ok(r.try_get("snapshot_id")?)).transpose()
    }

    /// How many units are pointed at snapshot `snapshot_id`.
    pub async fn snapshot_pins(&self, snapshot_id: i64) -> DbResult<i64> {
        let s = sql!("unit_pins.of_snapshot", "SELECT COUNT(*) AS n FROM unit_pins WHERE snapshot_id = $1");
        let row = self.bound(s, (snapshot_id,)).fetch_one(self.pool()).await?;
        Ok(row.try_get("n")?)
    }

    /// A file at `path` in a snapshot one of the repository's units is pointed at (a package
    /// its republished index lists that the repository no longer has), with the snapshot's
    /// time.
    pub async fn pinned_file(&self, repository_id: i64, path: &str) -> DbResult<Option<(SnapshotFile, i64)>> {
        let s = sql!("unit_pins.file", "SELECT f.path, f.sha256, f.size, f.content_type, s.created_at FROM unit_pins p JOIN publication_units u ON u.id = p.unit_id JOIN repository_snapshots s ON s.id = p.snapshot_id JOIN repository_snapshot_files f ON f.snapshot_id = p.snapshot_id AND f.path = $1 AND f.name IS NOT NULL WHERE u.repository_id = $2 ORDER BY s.created_at DESC LIMIT 1");
        let row = self.bound(s, (path, repository_id)).fetch_optional(self.pool()).await?;
        row.map(|r| Ok((SnapshotFile::read(&r)?, r.try_get("created_at")?))).transpose()
    }
}

/// Whether an error is a snapshot name taken already.
pub fn name_taken(e: &DbError) -> bool {
    matches!(e, DbError::Conflict(_))
}
