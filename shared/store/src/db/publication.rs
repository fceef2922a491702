//! Storage of publication units, snapshots and the outbox (DESIGN §6).
//!
//! A unit is claimed with a fenced lease: a random token written with the lease; every later
//! write of the claimant is conditional on that token, so a worker whose lease was taken over
//! changes nothing.

use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use super::{now_ms, opt_text, text, Backend, Db, DbError, DbResult};
use crate::{insert_id, insert_or_ignore, skip_locked, sql};

pub const PUBLICATIONS: &str = "publications";

/// A unit's state, as the status API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitRecord {
    pub id: i64,
    pub repository_id: i64,
    pub kind: String,
    pub unit_key: String,
    pub desired_revision: i64,
    pub published_revision: i64,
    pub current_snapshot_id: Option<i64>,
    pub first_pending_at: Option<i64>,
    pub last_change_at: Option<i64>,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<i64>,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub last_error: Option<String>,
    pub last_published_at: Option<i64>,
    /// The `Last-Modified` its files carry (ms, a whole second): the second of its publication,
    /// or one past its predecessor's when that was the same or later, so that two snapshots
    /// never share one (apt revalidates with `If-Modified-Since` alone). A burst of
    /// publications moves it a little ahead of the clock; clients only echo it back.
    pub modified_at: Option<i64>,
    /// How long its builds take, claim to publication (ms, smoothed: the mean of the last
    /// measurement and the one before); `None` before its first publication.
    pub build_ms: Option<i64>,
    /// A build of this revision or a later one is made from nothing (a rebuild asked for it):
    /// nothing of the last build is carried over. Cleared by the publication that did so.
    pub whole_at_revision: Option<i64>,
}

/// A unit claimed by one worker until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub unit: UnitRecord,
    pub token: String,
    /// The revision this build publishes: `desired_revision` at claim time.
    pub revision: i64,
    /// When it was claimed (ms): publication records the build's time from it.
    pub claimed_at: i64,
}

impl Claim {
    /// Whether this build is made from nothing ([`UnitRecord::whole_at_revision`]).
    pub fn whole(&self) -> bool {
        self.unit.whole_at_revision.is_some_and(|r| r <= self.revision)
    }
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub path: String,
    pub sha256: String,
    pub size: i64,
    pub content_type: String,
}

impl SnapshotFile {
    /// A row of `path`, `sha256`, `size` and `content_type`.
    pub(crate) fn read(r: &sqlx::any::AnyRow) -> DbResult<Self> {
        Ok(Self {
            path: text(r, "path")?,
            sha256: text(r, "sha256")?.trim().to_string(),
            size: r.try_get("size")?,
            content_type: text(r, "content_type")?,
        })
    }
}

/// The content-type prefix of a file made of parts ([`SnapshotFile::parts_of`]).
pub const PARTS: &str = "parts;";

impl SnapshotFile {
    /// Whether the file is the concatenation of other blobs: its `sha256` names a part list
    /// (a line `<sha256> <size>` per part, in order), its `size` is the whole file's, and its
    /// content type is [`PARTS`] followed by the type the file is served as.
    pub fn is_composite(&self) -> bool {
        self.content_type.starts_with(PARTS)
    }

    /// The type the file is served as.
    pub fn served_type(&self) -> &str {
        self.content_type.strip_prefix(PARTS).unwrap_or(&self.content_type)
    }

    /// The parts a part list names, in order (`None`: not a part list).
    pub fn parts_of(list: &[u8]) -> Option<Vec<(String, i64)>> {
        let text = std::str::from_utf8(list).ok()?;
        text.lines()
            .map(|line| {
                let (sha, size) = line.split_once(' ')?;
                let ok = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
                Some((sha.to_string(), size.parse().ok().filter(|s: &i64| *s >= 0 && ok)?))
            })
            .collect()
    }
}

/// Timing rules for what is due: a unit is built once no change has come for its quiet window,
/// or once its first pending change is `max_delay_ms` old, or at once when that change came a
/// window or more after its last publication (a change to an idle unit).
#[derive(Debug, Clone, Copy)]
pub struct Due {
    pub debounce_ms: i64,
    pub max_delay_ms: i64,
}

impl Due {
    /// A unit's quiet window: its own recent build time (`build_ms`), at most the debounce —
    /// a build of 17 ms need not wait 100 ms after a change, and changes that come closer
    /// together than a build takes are still coalesced. A unit never built waits the debounce.
    pub fn window(&self, build_ms: Option<i64>) -> i64 {
        build_ms.filter(|b| *b < self.debounce_ms).unwrap_or(self.debounce_ms)
    }
}

macro_rules! unit_columns {
    () => {
        "id, repository_id, kind, unit_key, desired_revision, published_revision, current_snapshot_id, first_pending_at, last_change_at, lease_owner, lease_expires_at, attempts, next_attempt_at, last_error, last_published_at, modified_at, build_ms, whole_at_revision"
    };
}

/// A new snapshot's `Last-Modified` (see [`UnitRecord::modified_at`]): the whole second of
/// `now`, unless the previous snapshot's is that second or later — then the second after it.
pub fn modified_after(previous: Option<i64>, now: i64) -> i64 {
    let second = now - now.rem_euclid(1000);
    match previous {
        Some(p) if p >= second => p - p.rem_euclid(1000) + 1000,
        _ => second,
    }
}

fn parse_unit(r: &AnyRow) -> DbResult<UnitRecord> {
    Ok(UnitRecord {
        id: r.try_get("id")?,
        repository_id: r.try_get("repository_id")?,
        kind: text(r, "kind")?,
        unit_key: text(r, "unit_key")?,
        desired_revision: r.try_get("desired_revision")?,
        published_revision: r.try_get("published_revision")?,
        current_snapshot_id: r.try_get("current_snapshot_id")?,
        first_pending_at: r.try_get("first_pending_at")?,
        last_change_at: r.try_get("last_change_at")?,
        lease_owner: opt_text(r, "lease_owner")?,
        lease_expires_at: r.try_get("lease_expires_at")?,
        attempts: r.try_get("attempts")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        last_error: opt_text(r, "last_error")?,
        last_published_at: r.try_get("last_published_at")?,
        modified_at: r.try_get("modified_at")?,
        build_ms: r.try_get("build_ms")?,
        whole_at_revision: r.try_get("whole_at_revision")?,
    })
}

/// A repository's publication state ([`Db::publication_summary`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublicationSummary {
    pub units: i64,
    pub pending: i64,
    pub failing: i64,
    pub last_error: Option<String>,
    pub last_published_at: Option<i64>,
}

impl Db {
    /// Inside the writer's transaction: creates the unit if needed, bumps its desired revision,
    /// marks it pending, and inserts the outbox event. Returns (unit id, new desired revision).
    pub async fn record_change(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
    ) -> DbResult<(i64, i64)> {
        self.record_change_quiet(tx, repository_id, kind, unit_key, 0).await
    }

    /// [`Db::record_change`] for a change that needs no debounce of its own: its last change
    /// is recorded `quiet_ms` in the past, so a debounce of `quiet_ms` has already passed.
    pub async fn record_change_quiet(
        &self,
        tx: &mut Transaction<'_, Any>,
        repository_id: i64,
        kind: &str,
        unit_key: &str,
        quiet_ms: u64,
    ) -> DbResult<(i64, i64)> {
        let now = now_ms();
        let changed = now.saturating_sub(i64::try_from(quiet_ms).unwrap_or(i64::MAX));
        let soon = now + 1_000;
        // A new change is a new chance for a unit whose last build failed (the change may be the
        // fix): it is due within a second, not after the failure's backoff (which may be a
        // minute) — and no sooner, so that a unit that keeps failing under a stream of changes
        // is not rebuilt for each of them.
        // Update first: the common case takes only the row's exclusive lock. (INSERT IGNORE
        // first would take a shared lock on the duplicate key, and two writers holding it would
        // deadlock on the update in InnoDB.)
        let bump = sql!("publication_units.bump", "UPDATE publication_units SET desired_revision = desired_revision + 1, last_change_at = $1, first_pending_at = COALESCE(first_pending_at, $2), next_attempt_at = CASE WHEN next_attempt_at > $3 THEN $4 ELSE next_attempt_at END WHERE repository_id = $5 AND kind = $6 AND unit_key = $7");
        let bumped = self
            .query(bump)
            .bind(changed)
            .bind(now)
            .bind(soon)
            .bind(soon)
            .bind(repository_id)
            .bind(kind)
            .bind(unit_key)
            .execute(&mut **tx)
            .await?;
        if bumped.rows_affected() == 0 {
            self.query(insert_or_ignore!(
                "publication_units.ensure",
                "INSERT INTO publication_units (repository_id, kind, unit_key) VALUES ($1, $2, $3)"
            ))
            .bind(repository_id)
            .bind(kind)
            .bind(unit_key)
            .execute(&mut **tx)
            .await?;
            self.query(bump)
                .bind(changed)
                .bind(now)
                .bind(soon)
                .bind(soon)
                .bind(repository_id)
                .bind(kind)
                .bind(unit_key)
                .execute(&mut **tx)
                .await?;
        }
        let row = self.query(sql!("publication_units.revision", "SELECT id, desired_revision FROM publication_units WHERE repository_id = $1 AND kind = $2 AND unit_key = $3"))
            .bind(repository_id)
            .bind(kind)
            .bind(unit_key)
            .fetch_one(&mut **tx)
            .await?;
        let (id, revision): (i64, i64) = (row.try_get("id")?, row.try_get("desired_revision")?);
        self.query(sql!("outbox.insert", "INSERT INTO outbox (unit_id, revision, created_at) VALUES ($1, $2, $3)"))
            .bind(id)
            .bind(revision)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok((id, revision))
    }

    pub async fn unit(&self, id: i64) -> DbResult<Option<UnitRecord>> {
        let row = self
            .query(sql!(
                "publication_units.get",
                concat!("SELECT ", unit_columns!(), " FROM publication_units WHERE id = $1")
            ))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_unit).transpose()
    }

    pub async fn unit_by_key(&self, repository_id: i64, kind: &str, unit_key: &str) -> DbResult<Option<UnitRecord>> {
        let row = self
            .query(sql!(
                "publication_units.by_key",
                concat!(
                    "SELECT ",
                    unit_columns!(),
                    " FROM publication_units WHERE repository_id = $1 AND kind = $2 AND unit_key = $3"
                )
            ))
            .bind(repository_id)
            .bind(kind)
            .bind(unit_key)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(parse_unit).transpose()
    }

    /// Each repository's publication state in one pass: its units still to publish, those
    /// whose last attempt failed (with one of their errors), and its latest publication.
    pub async fn publication_summary(&self) -> DbResult<std::collections::HashMap<i64, PublicationSummary>> {
        let rows = self
            .query(sql!("publication_units.summary", "SELECT repository_id, COUNT(*) AS units, CAST(SUM(CASE WHEN desired_revision > published_revision THEN 1 ELSE 0 END) AS BIGINT) AS pending, CAST(SUM(CASE WHEN last_error IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS failing, MAX(last_error) AS last_error, MAX(last_published_at) AS last_published_at FROM publication_units GROUP BY repository_id"))
            .fetch_all(self.pool())
            .await?;
        let mut out = std::collections::HashMap::with_capacity(rows.len());
        for r in &rows {
            let int = |c: &str| -> DbResult<i64> { Ok(r.try_get::<Option<i64>, _>(c)?.unwrap_or(0)) };
            out.insert(
                r.try_get("repository_id")?,
                PublicationSummary {
                    units: int("units")?,
                    pending: int("pending")?,
                    failing: int("failing")?,
                    last_error: r.try_get("last_error")?,
                    last_published_at: r.try_get("last_published_at")?,
                },
            );
        }
        Ok(out)
    }

    pub async fn units_of(&self, repository_id: i64) -> DbResult<Vec<UnitRecord>> {
        let rows = self
            .query(sql!(
                "publication_units.list",
                concat!(
                    "SELECT ",
                    unit_columns!(),
                    " FROM publication_units WHERE repository_id = $1 ORDER BY kind, unit_key"
                )
            ))
            .bind(repository_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(parse_unit).collect()
    }

    /// Claims the unit that has waited longest among those due (see [`Due`]), with a lease of
    /// `lease_ms`. `None` when nothing is due.
    pub async fn claim_due(&self, owner: &str, due: Due, lease_ms: i64) -> DbResult<Option<Claim>> {
        self.claim_due_below(owner, due, lease_ms, i64::MAX).await
    }

    /// [`Db::claim_due`] among the units whose builds take less than `below_ms` (by
    /// `build_ms`; a unit never built counts as quick): the worker's last free slot goes to
    /// them while every other slot builds a heavy unit.
    pub async fn claim_due_below(
        &self,
        owner: &str,
        due: Due,
        lease_ms: i64,
        below_ms: i64,
    ) -> DbResult<Option<Claim>> {
        let now = now_ms();
        let token = hex::encode(rand::random::<[u8; 16]>());
        // Due: pending, not backing off, not leased, and quiet for its window (the unit's own
        // build time, at most the debounce), or pending for longer than the maximum delay, or —
        // the leading edge — its first pending change came a window or more after its last
        // publication: a change to an idle unit is published at once, and what follows it while
        // that build runs is coalesced. Oldest pending first.
        macro_rules! pick {
            ($p:literal, $q:literal, $r:literal, $s:literal, $t:literal, $u:literal, $v:literal, $w:literal) => {
                concat!(
                    " FROM publication_units WHERE desired_revision > published_revision AND next_attempt_at <= ",
                    $p,
                    " AND (lease_expires_at IS NULL OR lease_expires_at < ",
                    $q,
                    ") AND (last_change_at + (CASE WHEN build_ms < ",
                    $r,
                    " THEN build_ms ELSE ",
                    $s,
                    " END) <= ",
                    $t,
                    " OR first_pending_at <= ",
                    $u,
                    " OR first_pending_at >= COALESCE(last_published_at, 0) + (CASE WHEN build_ms < ",
                    $v,
                    " THEN build_ms ELSE ",
                    $w,
                    " END)) AND COALESCE(build_ms, 0) < "
                )
            };
        }
        // The values of `pick!`'s placeholders, in order.
        let d = due.debounce_ms;
        let picked = (now, now, d, d, now, now - due.max_delay_ms, d, d, below_ms);
        if self.backend() == Backend::Sqlite {
            // One writer at a time: one statement picks and leases, so that another worker
            // cannot come between them.
            let lease = self
                .query(sql!(
                    "publication_units.lease",
                    concat!(
                        "UPDATE publication_units SET lease_owner = $1, lease_token = $2, lease_expires_at = $3 WHERE id = (SELECT id",
                        pick!("$4", "$5", "$6", "$7", "$8", "$9", "$10", "$11"),
                        "$12 ORDER BY first_pending_at, id LIMIT 1)"
                    )
                ))
                .bind(owner)
                .bind(token.as_str())
                .bind(now + lease_ms);
            let done = crate::sql::Binds::bind_to(picked, lease).execute(self.pool()).await?;
            if done.rows_affected() != 1 {
                return Ok(None);
            }
            let row = self
                .query(sql!(
                    "publication_units.claimed",
                    concat!("SELECT ", unit_columns!(), " FROM publication_units WHERE lease_token = $1")
                ))
                .bind(token.as_str())
                .fetch_one(self.pool())
                .await?;
            let unit = parse_unit(&row)?;
            let revision = unit.desired_revision;
            return Ok(Some(Claim { unit, token, revision, claimed_at: now }));
        }
        let mut tx = self.begin().await?;
        // Elsewhere the pick locks its row, and concurrent workers skip it for the next.
        let pick = skip_locked!(
            "publication_units.pick",
            concat!(
                "SELECT id, desired_revision",
                pick!("$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8"),
                "$9 ORDER BY first_pending_at, id LIMIT 1"
            )
        );
        let row = self.bound(pick, picked).fetch_optional(&mut *tx).await?;
        let Some(row) = row else {
            tx.commit().await?;
            return Ok(None);
        };
        let (id, revision): (i64, i64) = (row.try_get("id")?, row.try_get("desired_revision")?);
        // The conditions again: on SQLite this UPDATE is the compare-and-swap.
        let done = self.query(sql!("publication_units.lease", "UPDATE publication_units SET lease_owner = $1, lease_token = $2, lease_expires_at = $3 WHERE id = $4 AND (lease_expires_at IS NULL OR lease_expires_at < $5)"))
            .bind(owner)
            .bind(token.as_str())
            .bind(now + lease_ms)
            .bind(id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if done.rows_affected() != 1 {
            return Ok(None);
        }
        let unit = self.unit(id).await?.ok_or(DbError::NotFound)?;
        Ok(Some(Claim { unit, token, revision, claimed_at: now }))
    }

    /// Extends a lease still held; false when it was taken over.
    pub async fn renew_lease(&self, claim: &Claim, lease_ms: i64) -> DbResult<bool> {
        let done = self
            .query(sql!(
                "publication_units.renew",
                "UPDATE publication_units SET lease_expires_at = $1 WHERE id = $2 AND lease_token = $3"
            ))
            .bind(now_ms() + lease_ms)
            .bind(claim.unit.id)
            .bind(claim.token.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// In one transaction: the snapshot and its files, the compare-and-swap of the published
    /// revision (only while this claim's lease holds), superseding older snapshots, delivering
    /// outbox events up to the revision, and the publications watermark. `Ok(None)` when the
    /// lease was lost: nothing was published.
    ///
    /// `rebuilds` (per repository id, `(kind, unit key)`s: the groups over the unit's
    /// repository) are requested in the same transaction, due at once under a debounce of
    /// `quiet_ms` ([`Db::record_change_quiet`]): whoever sees this publication sees them
    /// requested, and a crash cannot publish one without the other.
    pub async fn publish_snapshot(
        &self,
        claim: &Claim,
        files: &[SnapshotFile],
        rebuilds: &[(i64, Vec<(String, String)>)],
        quiet_ms: u64,
    ) -> DbResult<Option<i64>> {
        let now = now_ms();
        let unit_id = claim.unit.id;
        let u = &claim.unit;
        let modified = modified_after(u.modified_at.or(u.last_published_at.map(|t| t - t.rem_euclid(1000))), now);
        let took = (now - claim.claimed_at).max(0);
        let build_ms = u.build_ms.map_or(took, |before| (before + took) / 2);
        let mut tx = self.begin().await?;
        // Lock the unit row first, and only while the lease is ours: inserting the snapshot
        // (whose foreign key takes a shared lock) before the update would invite InnoDB's
        // shared-then-exclusive deadlock with a concurrent writer.
        let held = self
            .query(sql!(
                "publication_units.fence",
                "UPDATE publication_units SET lease_expires_at = lease_expires_at WHERE id = $1 AND lease_token = $2"
            ))
            .bind(unit_id)
            .bind(claim.token.as_str())
            .execute(&mut *tx)
            .await?;
        if held.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        let insert = self
            .query(insert_id!(
                "snapshots.insert",
                "INSERT INTO snapshots (unit_id, revision, created_at) VALUES ($1, $2, $3)"
            ))
            .bind(unit_id)
            .bind(claim.revision)
            .bind(now);
        let snapshot_id = self.insert_id(insert, &mut *tx).await?;
        const INSERT: &str =
            "INSERT INTO snapshot_files (snapshot_id, path, sha256, size, content_type) VALUES ($1, $2, $3, $4, $5)";
        self.insert_rows(
            &mut tx,
            crate::sql_rows!("snapshot_files.insert_many", INSERT, 200),
            sql!("snapshot_files.insert", INSERT),
            files,
            |q, f| {
                q.bind(snapshot_id)
                    .bind(f.path.as_str())
                    .bind(f.sha256.as_str())
                    .bind(f.size)
                    .bind(f.content_type.as_str())
            },
        )
        .await?;
        packyard_model::crash::point("before_cas");
        let swapped = self.query(sql!("publication_units.publish", "UPDATE publication_units SET published_revision = $1, current_snapshot_id = $2, last_published_at = $3, modified_at = $4, build_ms = $5, whole_at_revision = CASE WHEN whole_at_revision <= $6 THEN NULL ELSE whole_at_revision END, last_error = NULL, attempts = 0, next_attempt_at = 0, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, first_pending_at = CASE WHEN desired_revision > $7 THEN last_change_at ELSE NULL END WHERE id = $8 AND lease_token = $9 AND published_revision < $10"))
            .bind(claim.revision)
            .bind(snapshot_id)
            .bind(now)
            .bind(modified)
            .bind(build_ms)
            .bind(claim.revision)
            .bind(claim.revision)
            .bind(unit_id)
            .bind(claim.token.as_str())
            .bind(claim.revision)
            .execute(&mut *tx)
            .await?;
        if swapped.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        self.query(sql!(
            "snapshots.supersede",
            "UPDATE snapshots SET superseded_at = $1 WHERE unit_id = $2 AND id <> $3 AND superseded_at IS NULL"
        ))
        .bind(now)
        .bind(unit_id)
        .bind(snapshot_id)
        .execute(&mut *tx)
        .await?;
        self.query(sql!(
            "outbox.deliver",
            "UPDATE outbox SET delivered_at = $1 WHERE unit_id = $2 AND revision <= $3 AND delivered_at IS NULL"
        ))
        .bind(now)
        .bind(unit_id)
        .bind(claim.revision)
        .execute(&mut *tx)
        .await?;
        self.query(sql!("repositories.bump", "UPDATE repositories SET version = version + 1 WHERE id = $1"))
            .bind(claim.unit.repository_id)
            .execute(&mut *tx)
            .await?;
        for (repository_id, units) in rebuilds {
            for (kind, key) in units {
                self.record_change_quiet(&mut tx, *repository_id, kind, key, quiet_ms).await?;
            }
        }
        self.bump_watermark(&mut tx, PUBLICATIONS).await?;
        tx.commit().await?;
        Ok(Some(snapshot_id))
    }

    /// Records a failed build and when to try again; releases the lease. False if the lease was
    /// already lost.
    pub async fn fail_build(&self, claim: &Claim, error: &str, retry_in_ms: i64) -> DbResult<bool> {
        let msg: String = error.chars().take(1900).collect();
        let done = self.query(sql!("publication_units.fail", "UPDATE publication_units SET last_error = $1, attempts = attempts + 1, next_attempt_at = $2, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL WHERE id = $3 AND lease_token = $4"))
            .bind(msg)
            .bind(now_ms() + retry_in_ms)
            .bind(claim.unit.id)
            .bind(claim.token.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Moves a repository's watermark (and the publications watermark) without a snapshot, so
    /// that replicas drop what they hold of it: a new signing key makes their made files stale.
    pub async fn touch_repository(&self, repository_id: i64) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.query(sql!("repositories.bump", "UPDATE repositories SET version = version + 1 WHERE id = $1"))
            .bind(repository_id)
            .execute(&mut *tx)
            .await?;
        self.bump_watermark(&mut tx, PUBLICATIONS).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every repository's watermark: (id, version).
    pub async fn repository_versions(&self) -> DbResult<Vec<(i64, i64)>> {
        let rows = self
            .query(sql!("repositories.versions", "SELECT id, version FROM repositories"))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("version")?))).collect()
    }

    /// Requests a rebuild of every unit of a repository (new desired revisions and outbox events);
    /// `whole`: from nothing, not continuing what the last build left
    /// ([`UnitRecord::whole_at_revision`]).
    pub async fn request_rebuild(&self, repository_id: i64, whole: bool) -> DbResult<usize> {
        let units: Vec<(String, String)> =
            self.units_of(repository_id).await?.into_iter().map(|u| (u.kind, u.unit_key)).collect();
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            for (kind, key) in &units {
                self.record_change(&mut tx, repository_id, kind, key).await?;
            }
            if whole {
                self.query(sql!(
                    "publication_units.whole",
                    "UPDATE publication_units SET whole_at_revision = desired_revision WHERE repository_id = $1"
                ))
                .bind(repository_id)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await.map_err(DbError::from)
        })
        .await?;
        Ok(units.len())
    }

    /// Records a change of each `(kind, unit key)` of a repository in one transaction of its own
    /// (retried on a deadlock): for changes that are not part of a writer's transaction.
    pub async fn request_changes(&self, repository_id: i64, units: &[(String, String)]) -> DbResult<()> {
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            for (kind, key) in units {
                self.record_change(&mut tx, repository_id, kind, key).await?;
            }
            tx.commit().await.map_err(DbError::from)
        })
        .await
    }

    /// Rebuilds that follow another unit's publication (a group after its member): recorded as
    /// [`Db::record_change_quiet`] changes, due at once under a debounce of `quiet_ms`.
    pub async fn request_rebuilds(
        &self,
        repository_id: i64,
        units: &[(String, String)],
        quiet_ms: u64,
    ) -> DbResult<()> {
        super::retry_conflicts(|| async {
            let mut tx = self.begin().await?;
            for (kind, key) in units {
                self.record_change_quiet(&mut tx, repository_id, kind, key, quiet_ms).await?;
            }
            tx.commit().await.map_err(DbError::from)
        })
        .await
    }

    /// Milliseconds until the next pending unit becomes due (by [`Due`]), if any.
    pub async fn next_due_in(&self, due: Due) -> DbResult<Option<i64>> {
        self.next_due_in_below(due, i64::MAX).await
    }

    /// [`Db::next_due_in`] among the units [`Db::claim_due_below`] would take.
    pub async fn next_due_in_below(&self, due: Due, below_ms: i64) -> DbResult<Option<i64>> {
        let rows = self.query(sql!("publication_units.next_due", "SELECT last_change_at, first_pending_at, next_attempt_at, lease_expires_at, last_published_at, build_ms FROM publication_units WHERE desired_revision > published_revision ORDER BY first_pending_at LIMIT 1000"))
            .fetch_all(self.pool())
            .await?;
        let now = now_ms();
        let mut earliest: Option<i64> = None;
        for r in &rows {
            let lc: Option<i64> = r.try_get("last_change_at")?;
            let fp: Option<i64> = r.try_get("first_pending_at")?;
            let na: i64 = r.try_get("next_attempt_at")?;
            let lease: Option<i64> = r.try_get("lease_expires_at")?;
            let published: Option<i64> = r.try_get("last_published_at")?;
            let build_ms: Option<i64> = r.try_get("build_ms")?;
            let (Some(lc), Some(fp)) = (lc, fp) else { continue };
            if build_ms.unwrap_or(0) >= below_ms {
                continue;
            }
            let window = due.window(build_ms);
            let leading = fp >= published.unwrap_or(0).saturating_add(window);
            let quiet = if leading { fp } else { (lc + window).min(fp + due.max_delay_ms) };
            let at = quiet.max(na).max(lease.map_or(0, |l| l + 1));
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
        Ok(earliest.map(|at| (at - now).max(0)))
    }

    /// Up to `limit` outbox events created at or before `until` that are neither published nor
    /// relayed to the broker yet, oldest first (by state, not by a cursor: an event committed
    /// after a higher id is found all the same).
    pub async fn unrelayed_events(&self, until: i64, limit: i64) -> DbResult<Vec<i64>> {
        let s = sql!(
            "outbox.unrelayed",
            "SELECT id FROM outbox WHERE relayed_at IS NULL AND delivered_at IS NULL AND created_at <= $1 ORDER BY id LIMIT $2"
        );
        let rows = self.bound(s, (until, limit)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok(r.try_get("id")?)).collect()
    }

    /// Notes outbox events relayed (after the broker confirmed their wake-up), each row by its
    /// primary key (never a range: an event in it may have committed after the wake-up went
    /// out) and in a statement of its own: `relayed_at` is a hint, and a transaction over many
    /// rows would hold their locks against a publication marking them delivered (a deadlock on
    /// PostgreSQL, whose rows it takes in another order).
    pub async fn mark_relayed(&self, ids: &[i64], now: i64) -> DbResult<()> {
        let s = sql!("outbox.relayed", "UPDATE outbox SET relayed_at = $1 WHERE id = $2");
        for id in ids {
            self.bound(s, (now, *id)).execute(self.pool()).await?;
        }
        Ok(())
    }

    /// Forgets outbox events published before `before`: every reader looks only at the events
    /// still waiting, and without this the table grew by a row per change for ever; at most
    /// `limit` rows a call, each by its primary key.
    pub async fn prune_outbox(&self, before: i64, limit: i64) -> DbResult<u64> {
        let ids = sql!(
            "outbox.published_before",
            "SELECT id FROM outbox WHERE delivered_at IS NOT NULL AND delivered_at < $1 LIMIT $2"
        );
        let rows = self.bound(ids, (before, limit)).fetch_all(self.pool()).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let delete = sql!("outbox.delete", "DELETE FROM outbox WHERE id = $1");
        let mut n = 0;
        let mut tx = self.begin().await?;
        for r in &rows {
            let id: i64 = r.try_get("id")?;
            n += self.bound(delete, (id,)).execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        Ok(n)
    }

    /// (undelivered outbox events, oldest pending change time).
    pub async fn backlog(&self) -> DbResult<(i64, Option<i64>)> {
        let row = self
            .query(sql!("outbox.backlog", "SELECT COUNT(*) AS n FROM outbox WHERE delivered_at IS NULL"))
            .fetch_one(self.pool())
            .await?;
        let n: i64 = row.try_get("n")?;
        let row = self
            .query(sql!(
                "publication_units.oldest_pending",
                "SELECT MIN(first_pending_at) AS fp FROM publication_units WHERE desired_revision > published_revision"
            ))
            .fetch_one(self.pool())
            .await?;
        Ok((n, row.try_get("fp")?))
    }

    /// The files of a snapshot.
    pub async fn snapshot_files(&self, snapshot_id: i64) -> DbResult<Vec<SnapshotFile>> {
        let rows = self
            .query(sql!(
                "snapshot_files.list",
                "SELECT path, sha256, size, content_type FROM snapshot_files WHERE snapshot_id = $1 ORDER BY path"
            ))
            .bind(snapshot_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(SnapshotFile::read).collect()
    }

    /// The files of the repository's current snapshots whose path begins with `prefix`, at most
    /// `limit` (the file browser's published indexes).
    pub async fn published_files_under(
        &self,
        repository_id: i64,
        prefix: &str,
        limit: i64,
    ) -> DbResult<Vec<SnapshotFile>> {
        let under = sql!("snapshot_files.under", "SELECT f.path AS path, f.sha256 AS sha256, f.size AS size, f.content_type AS content_type FROM publication_units u JOIN snapshot_files f ON f.snapshot_id = u.current_snapshot_id WHERE u.repository_id = $1 AND f.path LIKE $2 ESCAPE '!' ORDER BY f.path LIMIT $3");
        let pattern = crate::db::like_prefix(prefix);
        let rows = self.bound(under, (repository_id, pattern.as_str(), limit)).fetch_all(self.pool()).await?;
        rows.iter().map(SnapshotFile::read).collect()
    }

    /// Snapshot ids of a unit, newest first: the current one and those kept for readers.
    pub async fn snapshot_ids(&self, unit_id: i64) -> DbResult<Vec<(i64, i64, Option<i64>)>> {
        let rows = self
            .query(sql!(
                "snapshots.list",
                "SELECT id, revision, superseded_at FROM snapshots WHERE unit_id = $1 ORDER BY id DESC"
            ))
            .bind(unit_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("revision")?, r.try_get("superseded_at")?))).collect()
    }

    /// Deletes superseded snapshots beyond the newest `keep` older ones per unit that were
    /// superseded before `older_than`. Returns how many went.
    pub async fn collect_snapshots(&self, keep: usize, older_than: i64) -> DbResult<usize> {
        let rows = self.query(sql!("snapshots.superseded", "SELECT id, unit_id, superseded_at FROM snapshots WHERE superseded_at IS NOT NULL ORDER BY unit_id, id DESC"))
            .fetch_all(self.pool())
            .await?;
        let mut doomed = Vec::new();
        let mut current_unit = None;
        let mut seen = 0usize;
        for r in &rows {
            let (id, unit, superseded): (i64, i64, Option<i64>) =
                (r.try_get("id")?, r.try_get("unit_id")?, r.try_get("superseded_at")?);
            if current_unit != Some(unit) {
                current_unit = Some(unit);
                seen = 0;
            }
            seen += 1;
            if seen > keep && superseded.is_some_and(|s| s < older_than) {
                doomed.push(id);
            }
        }
        for id in &doomed {
            let mut tx = self.begin().await?;
            self.query(sql!("snapshot_files.delete", "DELETE FROM snapshot_files WHERE snapshot_id = $1"))
                .bind(*id)
                .execute(&mut *tx)
                .await?;
            self.query(sql!("snapshots.delete", "DELETE FROM snapshots WHERE id = $1"))
                .bind(*id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok(doomed.len())
    }

    /// Build-written blobs and abandoned uploads (a replica that died before the upload's
    /// transaction) recorded before `older_than` that no snapshot file references (artifact
    /// blobs are never listed).
    pub async fn unreferenced_blobs(&self, older_than: i64, limit: i64) -> DbResult<Vec<String>> {
        let rows = self.query(sql!("blobs.unreferenced", "SELECT b.sha256 AS sha256 FROM blobs b WHERE b.origin IN ('snapshot', 'upload') AND b.created_at < $1 AND NOT EXISTS (SELECT 1 FROM snapshot_files f WHERE f.sha256 = b.sha256) AND NOT EXISTS (SELECT 1 FROM repository_snapshot_files f WHERE f.sha256 = b.sha256) ORDER BY b.sha256 LIMIT $2"))
            .bind(older_than)
            .bind(limit)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Ok(text(r, "sha256")?.trim().to_string())).collect()
    }
}
