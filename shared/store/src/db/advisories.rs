//! OSV advisories as `packyard-api vulnerabilities import` stores them (the migration
//! `0027_advisories`): a row per record and a row per package it affects, replaced whole.

use std::collections::HashMap;

use sqlx::Row;

use super::{now_ms, text, Db, DbResult};
use crate::sql;

/// A record's row.
#[derive(Debug, Clone, PartialEq)]
pub struct AdvisoryRow {
    pub id: String,
    pub modified: String,
    /// `low`, `medium`, `high` or `critical`.
    pub level: String,
    /// The CVSS base score × 10, when the level came from one.
    pub score_tenths: Option<i64>,
    pub summary: String,
    /// JSON list of the record's aliases (CVE ids).
    pub aliases: String,
    /// The record as imported (JSON).
    pub record: String,
    pub withdrawn: bool,
}

/// A package an advisory affects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvisoryPackage {
    /// OSV's ecosystem without its release (`Debian` for `Debian:12`).
    pub ecosystem: String,
    pub name: String,
    /// The entry as JSON (its full ecosystem, ranges, versions, level).
    pub detail: String,
}

fn advisory(r: &sqlx::any::AnyRow) -> DbResult<AdvisoryRow> {
    Ok(AdvisoryRow {
        id: text(r, "id")?,
        modified: text(r, "modified")?,
        level: text(r, "level")?,
        score_tenths: r.try_get::<Option<i64>, _>("score_tenths")?,
        summary: text(r, "summary")?,
        aliases: text(r, "aliases")?,
        record: text(r, "record")?,
        withdrawn: r.try_get::<i64, _>("withdrawn")? != 0,
    })
}

impl Db {
    /// The `modified` time of every advisory held, by id.
    pub async fn advisory_times(&self) -> DbResult<HashMap<String, String>> {
        let s = sql!("advisories.times", "SELECT id, modified FROM advisories");
        let rows = self.query(s).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((text(r, "id")?, text(r, "modified")?))).collect()
    }

    /// Stores `records` (each replacing the one of its id, with its packages), all or none.
    pub async fn put_advisories(&self, records: &[(AdvisoryRow, Vec<AdvisoryPackage>)]) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        for (a, packages) in records {
            let forget = sql!("advisory_packages.delete", "DELETE FROM advisory_packages WHERE advisory_id = $1");
            self.bound(forget, (a.id.as_str(),)).execute(&mut *tx).await?;
            let drop = sql!("advisories.delete", "DELETE FROM advisories WHERE id = $1");
            self.bound(drop, (a.id.as_str(),)).execute(&mut *tx).await?;
            let insert = sql!(
                "advisories.insert",
                "INSERT INTO advisories (id, modified, level, score_tenths, summary, aliases, record, withdrawn, imported_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            );
            let binds = (
                a.id.as_str(),
                a.modified.as_str(),
                a.level.as_str(),
                a.score_tenths,
                a.summary.as_str(),
                a.aliases.as_str(),
                a.record.as_str(),
                i64::from(a.withdrawn),
                now,
            );
            self.bound(insert, binds).execute(&mut *tx).await?;
            const INSERT: &str =
                "INSERT INTO advisory_packages (advisory_id, ecosystem, name, detail) VALUES ($1, $2, $3, $4)";
            self.insert_rows(
                &mut tx,
                crate::sql_rows!("advisory_packages.insert_many", INSERT, 100),
                sql!("advisory_packages.insert", INSERT),
                packages,
                |q, p| q.bind(a.id.as_str()).bind(p.ecosystem.as_str()).bind(p.name.as_str()).bind(p.detail.as_str()),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// After an import stored records: replicas drop what they remember of the advisories (and
    /// what policies made of them) — the `repositories` watermark moves, once per import.
    pub async fn advisories_changed(&self) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.bump_watermark(&mut tx, super::security::REPOSITORIES).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The advisories (not withdrawn) that name package `name` of `ecosystem`, each with its
    /// entry for it.
    pub async fn advisories_of(&self, ecosystem: &str, name: &str) -> DbResult<Vec<(AdvisoryRow, String)>> {
        let s = sql!(
            "advisories.of_package",
            "SELECT a.id, a.modified, a.level, a.score_tenths, a.summary, a.aliases, a.record, a.withdrawn, p.detail FROM advisory_packages p JOIN advisories a ON a.id = p.advisory_id WHERE p.ecosystem = $1 AND p.name = $2 AND a.withdrawn = 0 ORDER BY a.id"
        );
        let rows = self.bound(s, (ecosystem, name)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((advisory(r)?, text(r, "detail")?))).collect()
    }

    /// Every advisory (not withdrawn) of `ecosystem`, with the names of its packages there, by
    /// id.
    pub async fn advisories_in(&self, ecosystem: &str) -> DbResult<Vec<(AdvisoryRow, Vec<String>)>> {
        let s = sql!(
            "advisories.in_ecosystem",
            "SELECT a.id, a.modified, a.level, a.score_tenths, a.summary, a.aliases, a.record, a.withdrawn, p.name FROM advisory_packages p JOIN advisories a ON a.id = p.advisory_id WHERE p.ecosystem = $1 AND a.withdrawn = 0 ORDER BY a.id, p.name"
        );
        let rows = self.bound(s, (ecosystem,)).fetch_all(self.pool()).await?;
        let mut out: Vec<(AdvisoryRow, Vec<String>)> = Vec::new();
        for r in &rows {
            let name = text(r, "name")?;
            match out.last_mut() {
                Some((a, names)) if a.id == text(r, "id")? => {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                _ => out.push((advisory(r)?, vec![name])),
            }
        }
        Ok(out)
    }

    /// Every package entry (not withdrawn) of `ecosystem`: its advisory, name and entry, in one
    /// read (the census matches every component against them).
    pub async fn advisory_entries_in(&self, ecosystem: &str) -> DbResult<Vec<(AdvisoryRow, String, String)>> {
        let s = sql!(
            "advisories.entries_in_ecosystem",
            "SELECT a.id, a.modified, a.level, a.score_tenths, a.summary, a.aliases, '' AS record, a.withdrawn, p.name, p.detail FROM advisory_packages p JOIN advisories a ON a.id = p.advisory_id WHERE p.ecosystem = $1 AND a.withdrawn = 0"
        );
        let rows = self.bound(s, (ecosystem,)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((advisory(r)?, text(r, "name")?, text(r, "detail")?))).collect()
    }

    /// The time (ms) a mark `name` holds (a periodic task's last run, a follower's last
    /// catch-up), if it was ever set.
    pub async fn mark_at(&self, name: &str) -> DbResult<Option<i64>> {
        let get = sql!("maintenance.get_at", "SELECT done_at FROM maintenance WHERE name = $1");
        let row = self.bound(get, (name,)).fetch_optional(self.pool()).await?;
        Ok(row.map(|r| r.try_get("done_at")).transpose()?)
    }

    /// The marks whose names begin with `prefix`, with their times (ms).
    pub async fn marks_under(&self, prefix: &str) -> DbResult<Vec<(String, i64)>> {
        let list = sql!("maintenance.under", "SELECT name, done_at FROM maintenance WHERE name LIKE $1");
        let rows = self.bound(list, (format!("{prefix}%"),)).fetch_all(self.pool()).await?;
        rows.iter().map(|r| Ok((text(r, "name")?, r.try_get("done_at")?))).collect()
    }

    /// Sets mark `name` to `at` (ms).
    pub async fn set_mark(&self, name: &str, at: i64) -> DbResult<()> {
        let set = crate::upsert!(
            "maintenance.set",
            "INSERT INTO maintenance (name, done_at) VALUES ($1, $2)",
            on "maintenance" ("name"),
            set "done_at = NEW.done_at"
        );
        self.bound(set, (name, at)).execute(self.pool()).await?;
        Ok(())
    }

    /// Sets mark `name` to `at` unless it holds a later time already (a mark that only grows).
    pub async fn raise_mark(&self, name: &str, at: i64) -> DbResult<()> {
        let set = crate::upsert!(
            "maintenance.raise",
            "INSERT INTO maintenance (name, done_at) VALUES ($1, $2)",
            on "maintenance" ("name"),
            set "done_at = CASE WHEN NEW.done_at > OLD.done_at THEN NEW.done_at ELSE OLD.done_at END"
        );
        self.bound(set, (name, at)).execute(self.pool()).await?;
        Ok(())
    }

    /// Takes the lease `name` until `until` (ms) when it was last released (or its lease ran
    /// out) at or before `free_before`: true for one caller. [`Db::set_mark`] renews it (a later
    /// `until`) and releases it (the time the work ended).
    pub async fn claim_lease(&self, name: &str, until: i64, free_before: i64) -> DbResult<bool> {
        let seed = crate::insert_or_ignore!(
            "maintenance.lease_seed",
            "INSERT INTO maintenance (name, done_at) VALUES ($1, $2)"
        );
        self.bound(seed, (name, 0_i64)).execute(self.pool()).await?;
        let claim = sql!("maintenance.lease", "UPDATE maintenance SET done_at = $1 WHERE name = $2 AND done_at <= $3");
        let done = self.bound(claim, (until, name, free_before)).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Claims the periodic task `name` for `period_ms`: true for one caller per period across
    /// the installation (its row's time moves on), false for the others.
    pub async fn claim_periodic(&self, name: &str, period_ms: i64) -> DbResult<bool> {
        let seed =
            crate::insert_or_ignore!("maintenance.seed", "INSERT INTO maintenance (name, done_at) VALUES ($1, $2)");
        self.bound(seed, (name, 0_i64)).execute(self.pool()).await?;
        let now = now_ms();
        let claim = sql!("maintenance.claim", "UPDATE maintenance SET done_at = $1 WHERE name = $2 AND done_at <= $3");
        let done = self.bound(claim, (now, name, now - period_ms)).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }
}
