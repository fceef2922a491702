//! Cleanup policies: what a run may remove from a repository's catalogue. Criteria combine with
//! AND; a policy belongs to one format; a schedule is an interval or a cron expression. The
//! rules here need no database (the repositories a policy names are checked by the API).

use serde::{Deserialize, Serialize};

use crate::repos::Format;

/// What a component must be for a run to remove it (every criterion given must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// Published (stored) more than this many days ago.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published_before_days: Option<u32>,
    /// Last downloaded more than this many days ago (never downloaded: counted from publication).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_downloaded_before_days: Option<u32>,
    /// The component's name matches this regular expression (anchor it to match the whole name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_regex: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_regex: Option<String>,
    /// Only Go pre-release and pseudo-versions, Conan recipe revisions that are not the latest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prereleases_only: bool,
    /// Keeps the newest N versions of each package (APT: name and architecture; APK: name; Go:
    /// module; Conan: reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_latest: Option<u32>,
    /// Conan: keeps the newest N recipe revisions of each reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_latest_revisions: Option<u32>,
}

/// When a policy runs by itself: every `every_secs` seconds, or at the times a cron expression
/// names (five fields, UTC). No schedule: only when asked ("run now").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
}

/// A policy as the admin API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default)]
    pub name: Option<String>,
    pub format: Format,
    #[serde(default)]
    pub description: String,
    pub criteria: Criteria,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// The repositories it cleans (hosted or proxy, of its format).
    #[serde(default)]
    pub repositories: Vec<String>,
}

/// The shortest interval a schedule may have.
pub const MIN_INTERVAL_SECS: u64 = 60;
const MAX_REGEX: usize = 1000;

/// Checks a policy name: 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
pub fn check_name(name: &str) -> Result<(), String> {
    if crate::is_plain_name(name, b"._-") {
        Ok(())
    } else {
        Err(format!(
            "invalid policy name {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
            name.chars().take(80).collect::<String>()
        ))
    }
}

/// What a format's cleanup selects beyond the criteria every format has (its catalogue says).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selectable {
    /// What `prereleases_only` selects in the format, for people; `None`: it does not apply.
    pub prereleases: Option<&'static str>,
    /// What `keep_latest_revisions` keeps in the format, for people; `None`: it does not apply.
    pub revisions: Option<&'static str>,
}

/// The formats a criterion applies to, each shown with what `pick` says of it, joined by "and".
fn applies_to(
    of: &dyn Fn(Format) -> Selectable,
    pick: fn(&Selectable) -> Option<&'static str>,
    show: fn(Format, &str) -> String,
) -> String {
    let list: Vec<String> = Format::ALL.into_iter().filter_map(|f| pick(&of(f)).map(|what| show(f, what))).collect();
    list.join(" and ")
}

impl PolicySpec {
    /// The rules a policy must follow, each broken one named. `selectable` says what each
    /// format's cleanup can select.
    pub fn validate(&self, name: &str, selectable: &dyn Fn(Format) -> Selectable) -> Result<(), String> {
        check_name(name)?;
        if self.description.len() > 1000 {
            return Err("description: at most 1000 characters".into());
        }
        let c = &self.criteria;
        if c == &Criteria::default() {
            return Err("criteria: give at least one (published_before_days, last_downloaded_before_days, \
                        name_regex, version_regex, prereleases_only, keep_latest, keep_latest_revisions)"
                .into());
        }
        for (field, pattern) in [("name_regex", &c.name_regex), ("version_regex", &c.version_regex)] {
            let Some(p) = pattern else { continue };
            if p.len() > MAX_REGEX {
                return Err(format!("criteria.{field}: at most {MAX_REGEX} characters"));
            }
            regex::Regex::new(p).map_err(|e| format!("criteria.{field} is not a regular expression: {e}"))?;
        }
        let own = selectable(self.format);
        if c.prereleases_only && own.prereleases.is_none() {
            let to = applies_to(selectable, |s| s.prereleases, |f, what| format!("{f} ({what})"));
            return Err(format!("criteria.prereleases_only applies to {to}, not to {}", self.format));
        }
        if c.keep_latest_revisions.is_some() && own.revisions.is_none() {
            let to = applies_to(selectable, |s| s.revisions, |f, what| format!("{f} {what}"));
            return Err(format!("criteria.keep_latest_revisions applies to {to}, not to {}", self.format));
        }
        for (field, n) in [("keep_latest", c.keep_latest), ("keep_latest_revisions", c.keep_latest_revisions)] {
            if n == Some(0) {
                return Err(format!("criteria.{field}: keep at least 1 (leave it out to keep none)"));
            }
        }
        if let Some(s) = &self.schedule {
            match (s.every_secs, &s.cron) {
                (Some(secs), None) if secs < MIN_INTERVAL_SECS => {
                    return Err(format!("schedule.every_secs: at least {MIN_INTERVAL_SECS}"));
                }
                (Some(_), None) => {}
                (None, Some(cron)) => {
                    Cron::parse(cron).map_err(|e| format!("schedule.cron: {e}"))?;
                }
                _ => return Err("schedule: give every_secs or cron (not both)".into()),
            }
        }
        Ok(())
    }
}

/// A five-field cron expression (minute, hour, day of month, month, day of week; UTC): each
/// field `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`, or a comma-separated list of
/// those. Day of week 0 and 7 are Sunday.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    pub minutes: u64,
    pub hours: u64,
    pub days: u64,
    pub months: u64,
    pub weekdays: u64,
    /// Whether day of month and day of week were both restricted (not `*`): a day then matches
    /// when either does, as cron has it.
    pub either_day: bool,
}

impl Cron {
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields.as_slice() else {
            return Err(format!(
                "{text:?} has {} fields; a cron expression has five: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        };
        let mut weekdays = field(weekday, "day of week", 0, 7)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & !(1 << 7);
        }
        Ok(Self {
            minutes: field(minute, "minute", 0, 59)?,
            hours: field(hour, "hour", 0, 23)?,
            days: field(day, "day of month", 1, 31)?,
            months: field(month, "month", 1, 12)?,
            weekdays,
            either_day: !day.starts_with('*') && !weekday.starts_with('*'),
        })
    }

    /// The first instant (ms since the epoch, UTC, on a whole minute) after `after_ms` that
    /// the expression names; `None` if none within eight years (e.g. 31 February).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        const MINUTE: i64 = 60_000;
        const DAY: i64 = 86_400_000;
        let start = after_ms.div_euclid(MINUTE) * MINUTE + MINUTE;
        let first_day = start.div_euclid(DAY);
        for day in first_day..first_day + 8 * 366 {
            let (_, month, dom) = crate::time::civil_from_days(day);
            // 1970-01-01 was a Thursday (4).
            let weekday = (day + 4).rem_euclid(7) as u32;
            let by_dom = self.days & (1 << dom) != 0;
            let by_dow = self.weekdays & (1 << weekday) != 0;
            let day_matches = if self.either_day { by_dom || by_dow } else { by_dom && by_dow };
            if self.months & (1 << month) == 0 || !day_matches {
                continue;
            }
            for hour in 0..24i64 {
                if self.hours & (1 << hour) == 0 {
                    continue;
                }
                for minute in 0..60i64 {
                    let t = day * DAY + hour * 3_600_000 + minute * MINUTE;
                    if self.minutes & (1 << minute) != 0 && t >= start {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

/// One field as a bit set of the values it allows.
fn field(text: &str, what: &str, min: u32, max: u32) -> Result<u64, String> {
    let number = |s: &str| -> Result<u32, String> {
        let n: u32 = s.parse().map_err(|_| format!("{what}: {s:?} is not a number"))?;
        if n < min || n > max {
            return Err(format!("{what}: {n} is outside {min}-{max}"));
        }
        Ok(n)
    };
    let mut set = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("{what}: step {s:?} is not a number"))?;
                if step == 0 {
                    return Err(format!("{what}: a step of 0"));
                }
                (r, step)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None if step > 1 => (number(r)?, max),
                None => {
                    let n = number(r)?;
                    (n, n)
                }
            },
        };
        if from > to {
            return Err(format!("{what}: the range {from}-{to} is empty"));
        }
        let mut v = from;
        while v <= to {
            set |= 1 << v;
            v += step;
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_fields_are_sets() {
        let c = Cron::parse("*/15 3 * * 1-5").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(c.hours, 1 << 3);
        assert_eq!(c.weekdays, 0b11_1110);
        assert_eq!(Cron::parse("0 0 1 1 7").map(|c| c.weekdays), Ok(1), "7 is Sunday");
        for (bad, says) in [
            ("* * * *", "has 4 fields"),
            ("60 * * * *", "minute: 60 is outside 0-59"),
            ("* * 0 * *", "day of month: 0 is outside 1-31"),
            ("*/0 * * * *", "a step of 0"),
            ("5-1 * * * *", "the range 5-1 is empty"),
            ("x * * * *", "\"x\" is not a number"),
        ] {
            let e = Cron::parse(bad).err().unwrap_or_default();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn cron_names_the_next_instant() {
        let at = |text: &str, after: &str| {
            let c = Cron::parse(text).unwrap_or_else(|e| panic!("{e}"));
            let after = crate::time::parse_rfc3339(after).unwrap_or_else(|| panic!("{after}"));
            c.next_after(after).map(crate::time::rfc3339_ms)
        };
        let some = |s: &str| Some(s.to_string());
        assert_eq!(at("0 3 * * *", "2026-12-01T17:52:30Z"), some("2026-12-02T03:00:00.000Z"));
        assert_eq!(at("0 3 * * *", "2026-12-01T02:59:59.999Z"), some("2026-12-01T03:00:00.000Z"));
        assert_eq!(at("0 3 * * *", "2026-12-01T03:00:00Z"), some("2026-12-02T03:00:00.000Z"), "strictly after");
        assert_eq!(at("*/15 * * * *", "2026-12-31T23:50:00Z"), some("2027-01-01T00:00:00.000Z"));
        // 2026-12-01 is a Tuesday: the next Sunday is the 6th.
        assert_eq!(at("30 1 * * 0", "2026-12-01T00:00:00Z"), some("2026-12-06T01:30:00.000Z"));
        assert_eq!(at("0 0 29 2 *", "2026-03-01T00:00:00Z"), some("2028-02-29T00:00:00.000Z"));
        // Day of month or day of week, both restricted: the 15th or a Monday, whichever is first.
        assert_eq!(at("0 12 15 * 1", "2026-12-01T13:00:00Z"), some("2026-12-07T12:00:00.000Z"));
        assert_eq!(at("0 0 31 2 *", "2026-01-01T00:00:00Z"), None);
    }
}
