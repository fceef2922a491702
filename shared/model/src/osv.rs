//! OSV advisories (the Open Source Vulnerability format, schema 1.x): a record read and checked
//! whole, its severity level (DESIGN §5b: the CVSS base score of a vector in `severity[]`,
//! otherwise `database_specific.severity`, otherwise `high`), and whether a version of a package
//! is affected, by the record's ranges and version lists, in the ecosystem's own version order
//! (which the caller supplies: this module knows no ecosystem's order).

use std::cmp::Ordering;

use serde_json::Value;

/// Why a record is refused: the message names the record and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OsvError(pub String);

fn err(s: impl Into<String>) -> OsvError {
    OsvError(s.into())
}

/// A severity level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    Medium,
    High,
    Critical,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Low, Level::Medium, Level::High, Level::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// From a CVSS base score: ≥ 9 critical, ≥ 7 high, ≥ 4 medium, else low.
    pub fn of_score(score: f64) -> Self {
        if score >= 9.0 {
            Self::Critical
        } else if score >= 7.0 {
            Self::High
        } else if score >= 4.0 {
            Self::Medium
        } else {
            Self::Low
        }
    }

    /// A name as databases write it (case-insensitive; `moderate` is medium).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Some(Self::Low),
            "medium" | "moderate" => Some(Self::Medium),
            "high" | "important" => Some(Self::High),
            "critical" => Some(Self::Critical),
            _ => None,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One event of a range.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Introduced(String),
    Fixed(String),
    LastAffected(String),
    Limit(String),
}

/// A range of an affected package: `SEMVER` or `ECOSYSTEM` (a `GIT` range names commits, not
/// versions, and is not kept).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Range {
    pub events: Vec<Event>,
}

/// A package an advisory affects.
/// (As JSON, without its name: the database keeps the name beside it.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Affected {
    /// `Go`, `Debian:12`, `Alpine:v3.20`, `ConanCenter`, …
    pub ecosystem: String,
    #[serde(skip)]
    pub name: String,
    pub ranges: Vec<Range>,
    /// Versions listed one by one.
    pub versions: Vec<String>,
    /// This package's own severity level, when the record gives one for it.
    pub level: Option<Level>,
}

/// A record as Packyard keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Advisory {
    pub id: String,
    pub modified: String,
    pub summary: String,
    pub aliases: Vec<String>,
    pub level: Level,
    /// The CVSS base score the level came from, when it came from one.
    pub score: Option<f64>,
    pub affected: Vec<Affected>,
    /// Withdrawn: kept out of every match.
    pub withdrawn: bool,
}

fn text<'a>(v: &'a Value, field: &str, id: &str) -> Result<Option<&'a str>, OsvError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(format!("{id}: {field} is not a string"))),
    }
}

fn array<'a>(v: &'a Value, field: &str, id: &str) -> Result<&'a [Value], OsvError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(err(format!("{id}: {field} is not a list"))),
    }
}

/// The level a `severity[]` list gives (the highest CVSS base score of its vectors), with the
/// score; `Ok(None)` when it has no vector Packyard scores.
fn level_of_severities(list: &[Value], id: &str) -> Result<Option<(Level, f64)>, OsvError> {
    let mut best: Option<f64> = None;
    for s in list {
        let kind = text(s, "type", id)?.unwrap_or_default();
        let score = text(s, "score", id)?.unwrap_or_default();
        let base = match kind {
            "CVSS_V3" => Some(cvss3(score).map_err(|e| err(format!("{id}: severity {score:?}: {e}")))?),
            "CVSS_V2" => Some(cvss2(score).map_err(|e| err(format!("{id}: severity {score:?}: {e}")))?),
            // CVSS 4.0's score comes from the specification's table of macro vectors, which
            // Packyard does not carry: such a record's level is its database's.
            _ => None,
        };
        if let Some(b) = base {
            best = Some(best.map_or(b, |x: f64| x.max(b)));
        }
    }
    Ok(best.map(|b| (Level::of_score(b), b)))
}

/// `database_specific.severity`, when it is a level's name.
fn database_level(v: &Value) -> Option<Level> {
    v.get("database_specific").and_then(|d| d.get("severity")).and_then(Value::as_str).and_then(Level::parse)
}

/// Reads one OSV record, checked whole: its id, `modified`, every affected package (ecosystem
/// and name), every range's type and events, every severity vector it scores.
pub fn parse(record: &Value) -> Result<Advisory, OsvError> {
    let id = match record.get("id").and_then(Value::as_str) {
        Some(id) if !id.trim().is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic()) => {
            id.to_string()
        }
        Some(id) => {
            return Err(err(format!(
                "the id {:?} is not one of OSV's (printable ASCII, at most 256 characters)",
                id.chars().take(80).collect::<String>()
            )))
        }
        None => return Err(err("a record without an id (OSV records have \"id\": \"<database>-…\")")),
    };
    let modified = text(record, "modified", &id)?
        .ok_or_else(|| err(format!("{id}: no \"modified\" time (OSV requires it)")))?
        .to_string();
    if modified.len() > 64 {
        return Err(err(format!("{id}: \"modified\" is not a time (RFC 3339)")));
    }
    let summary = text(record, "summary", &id)?.or(text(record, "details", &id)?).unwrap_or_default();
    let summary: String = summary.lines().next().unwrap_or_default().chars().take(300).collect();
    let mut aliases = Vec::new();
    for a in array(record, "aliases", &id)? {
        aliases.push(a.as_str().ok_or_else(|| err(format!("{id}: aliases holds a non-string")))?.to_string());
    }
    let withdrawn = text(record, "withdrawn", &id)?.is_some();
    let scored = level_of_severities(array(record, "severity", &id)?, &id)?;
    let mut affected = Vec::new();
    for a in array(record, "affected", &id)? {
        let package = a.get("package").ok_or_else(|| err(format!("{id}: an affected entry without a package")))?;
        let ecosystem = text(package, "ecosystem", &id)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| err(format!("{id}: an affected package without an ecosystem")))?;
        let name = text(package, "name", &id)?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| err(format!("{id}: an affected package of {ecosystem} without a name")))?;
        if name.len() > 500 || ecosystem.len() > 100 {
            return Err(err(format!("{id}: an affected package's name or ecosystem is too long")));
        }
        let at = format!("{id}: {ecosystem}/{name}");
        let mut ranges = Vec::new();
        for r in array(a, "ranges", &at)? {
            let kind = text(r, "type", &at)?.ok_or_else(|| err(format!("{at}: a range without a type")))?;
            let keep = match kind {
                "SEMVER" | "ECOSYSTEM" => true,
                "GIT" => false,
                other => return Err(err(format!("{at}: range type {other:?} (OSV has SEMVER, ECOSYSTEM, GIT)"))),
            };
            let mut events = Vec::new();
            for e in array(r, "events", &at)? {
                let obj = e.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
                    err(format!("{at}: an event is one of introduced, fixed, last_affected or limit"))
                })?;
                let Some((k, v)) = obj.iter().next() else { continue };
                let v = v.as_str().ok_or_else(|| err(format!("{at}: event {k} is not a string")))?.to_string();
                events.push(match k.as_str() {
                    "introduced" => Event::Introduced(v),
                    "fixed" => Event::Fixed(v),
                    "last_affected" => Event::LastAffected(v),
                    "limit" => Event::Limit(v),
                    other => return Err(err(format!("{at}: unknown event {other:?}"))),
                });
            }
            if events.is_empty() {
                return Err(err(format!("{at}: a {kind} range without events")));
            }
            if !events.iter().any(|e| matches!(e, Event::Introduced(_))) {
                return Err(err(format!("{at}: a {kind} range without an introduced event")));
            }
            if keep {
                ranges.push(Range { events });
            }
        }
        let mut versions = Vec::new();
        for v in array(a, "versions", &at)? {
            versions.push(v.as_str().ok_or_else(|| err(format!("{at}: versions holds a non-string")))?.to_string());
        }
        let level = match level_of_severities(array(a, "severity", &at)?, &at)? {
            Some((l, _)) => Some(l),
            None => database_level(a).or_else(|| a.get("ecosystem_specific").and_then(database_level_of_map)),
        };
        affected.push(Affected { ecosystem: ecosystem.to_string(), name: name.to_string(), ranges, versions, level });
    }
    let (level, score) = match scored {
        Some((l, s)) => (l, Some(s)),
        None => (database_level(record).unwrap_or(Level::High), None),
    };
    Ok(Advisory { id, modified, summary, aliases, level, score, affected, withdrawn })
}

/// `ecosystem_specific.severity` (Debian's `urgency` is not a level).
fn database_level_of_map(v: &Value) -> Option<Level> {
    v.get("severity").and_then(Value::as_str).and_then(Level::parse)
}

impl Affected {
    /// The level of this package's entry: its own, else the record's.
    pub fn level_or(&self, record: Level) -> Level {
        self.level.unwrap_or(record)
    }

    /// Whether `version` is affected, in the order `cmp` gives the ecosystem's versions
    /// (`"0"` as an introduced version is before every version).
    pub fn affects(&self, version: &str, cmp: &dyn Fn(&str, &str) -> Ordering) -> bool {
        if self.versions.iter().any(|v| cmp(v, version) == Ordering::Equal || v == version) {
            return true;
        }
        self.ranges.iter().any(|r| r.affects(version, cmp))
    }
}

impl Range {
    /// OSV's evaluation: the events sorted by version (`introduced: "0"` first); going up to
    /// `version`, an introduced event at or below it makes it affected, a fixed one at or below
    /// it, or a last-affected one below it, makes it not; a limit at or below it ends the range.
    pub fn affects(&self, version: &str, cmp: &dyn Fn(&str, &str) -> Ordering) -> bool {
        let key = |e: &Event| match e {
            Event::Introduced(v) | Event::Fixed(v) | Event::LastAffected(v) | Event::Limit(v) => v.clone(),
        };
        let order = |a: &str, b: &str| match (a == "0", b == "0") {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => cmp(a, b),
        };
        let mut events = self.events.clone();
        events.sort_by(|a, b| order(&key(a), &key(b)));
        let mut affected = false;
        for e in &events {
            let at = key(e);
            let relation = order(&at, version);
            match e {
                Event::Introduced(_) if relation != Ordering::Greater => affected = true,
                Event::Fixed(_) if relation != Ordering::Greater => affected = false,
                Event::LastAffected(_) if relation == Ordering::Less => affected = false,
                Event::Limit(_) if relation != Ordering::Greater => return false,
                _ => {}
            }
        }
        affected
    }
}

/// A CVSS metric's value from a vector's `NAME:VALUE` parts.
fn metric<'a>(parts: &[(&'a str, &'a str)], name: &str) -> Result<&'a str, String> {
    parts.iter().find(|(k, _)| *k == name).map(|(_, v)| *v).ok_or_else(|| format!("no {name} metric"))
}

fn parts(vector: &str) -> Vec<(&str, &str)> {
    vector.split('/').filter_map(|p| p.split_once(':')).collect()
}

/// CVSS 3.0/3.1's base score of a vector (`CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H`).
pub fn cvss3(vector: &str) -> Result<f64, String> {
    if !vector.starts_with("CVSS:3.") {
        return Err("not a CVSS 3 vector (CVSS:3.x/…)".into());
    }
    let p = parts(vector);
    let bad = |m: &str, v: &str| format!("{m}:{v} is not a CVSS 3 value");
    let pick = |m: &str, table: &[(&str, f64)]| -> Result<f64, String> {
        let v = metric(&p, m)?;
        table.iter().find(|(k, _)| *k == v).map(|(_, x)| *x).ok_or_else(|| bad(m, v))
    };
    let changed = match metric(&p, "S")? {
        "U" => false,
        "C" => true,
        v => return Err(bad("S", v)),
    };
    let av = pick("AV", &[("N", 0.85), ("A", 0.62), ("L", 0.55), ("P", 0.2)])?;
    let ac = pick("AC", &[("L", 0.77), ("H", 0.44)])?;
    let pr = if changed {
        pick("PR", &[("N", 0.85), ("L", 0.68), ("H", 0.5)])?
    } else {
        pick("PR", &[("N", 0.85), ("L", 0.62), ("H", 0.27)])?
    };
    let ui = pick("UI", &[("N", 0.85), ("R", 0.62)])?;
    let cia = [("H", 0.56), ("L", 0.22), ("N", 0.0)];
    let (c, i, a) = (pick("C", &cia)?, pick("I", &cia)?, pick("A", &cia)?);
    let iss = 1.0 - (1.0 - c) * (1.0 - i) * (1.0 - a);
    let impact = if changed { 7.52 * (iss - 0.029) - 3.25 * (iss - 0.02).powi(15) } else { 6.42 * iss };
    let exploitability = 8.22 * av * ac * pr * ui;
    if impact <= 0.0 {
        return Ok(0.0);
    }
    let raw = if changed { 1.08 * (impact + exploitability) } else { impact + exploitability };
    Ok(round_up(raw.min(10.0)))
}

/// CVSS 3.1's Roundup: the smallest number of one decimal at or above `x` (computed on
/// integers, as the specification does, against floating-point error).
fn round_up(x: f64) -> f64 {
    let int = (x * 100_000.0).round() as i64;
    if int % 10_000 == 0 {
        int as f64 / 100_000.0
    } else {
        ((int / 10_000) + 1) as f64 / 10.0
    }
}

/// CVSS 2's base score of a vector (`AV:N/AC:L/Au:N/C:P/I:P/A:P`, with or without `(…)`).
pub fn cvss2(vector: &str) -> Result<f64, String> {
    let trimmed = vector.trim_start_matches('(').trim_end_matches(')');
    let p = parts(trimmed);
    let pick = |m: &str, table: &[(&str, f64)]| -> Result<f64, String> {
        let v = metric(&p, m)?;
        table.iter().find(|(k, _)| *k == v).map(|(_, x)| *x).ok_or_else(|| format!("{m}:{v} is not a CVSS 2 value"))
    };
    let av = pick("AV", &[("L", 0.395), ("A", 0.646), ("N", 1.0)])?;
    let ac = pick("AC", &[("H", 0.35), ("M", 0.61), ("L", 0.71)])?;
    let au = pick("Au", &[("M", 0.45), ("S", 0.56), ("N", 0.704)])?;
    let cia = [("N", 0.0), ("P", 0.275), ("C", 0.660)];
    let (c, i, a) = (pick("C", &cia)?, pick("I", &cia)?, pick("A", &cia)?);
    let impact = 10.41 * (1.0 - (1.0 - c) * (1.0 - i) * (1.0 - a));
    let exploitability = 20.0 * av * ac * au;
    let f = if impact == 0.0 { 0.0 } else { 1.176 };
    let score = ((0.6 * impact) + (0.4 * exploitability) - 1.5) * f;
    Ok(((score * 10.0).round() / 10.0).max(0.0))
}

#[cfg(test)]
mod tests;
