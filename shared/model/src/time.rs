//! Timestamps are stored as milliseconds since the Unix epoch and shown as RFC 3339 (UTC).

/// `2026-11-30T12:34:56.789Z`
pub fn rfc3339_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// An instant shown as `2026-11-30T12:34:56.789012Z` (microseconds), written where it is
/// displayed: no string of its own.
#[derive(Debug, Clone, Copy)]
pub struct Rfc3339Micros(pub std::time::SystemTime);

impl std::fmt::Display for Rfc3339Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since = self.0.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
        let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
            sod / 3600,
            sod % 3600 / 60,
            sod % 60,
            since.subsec_micros()
        )
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_796_000_000_123), "2026-11-30T00:53:20.123Z");
        assert_eq!(rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(http_date(1_796_000_000), "Mon, 30 Nov 2026 00:53:20 GMT");
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_796_000_000_123_456);
        assert_eq!(Rfc3339Micros(at).to_string(), "2026-11-30T00:53:20.123456Z");
    }
}

/// Parses a point in time a person writes: RFC 3339 ([`parse_rfc3339`]) with its seconds
/// optional (`2026-12-01T12:00Z`).
pub fn parse_point_in_time(s: &str) -> Option<i64> {
    parse_rfc3339(s).or_else(|| {
        let t = s.find(['T', 't'])?;
        let clock = s.get(t + 1..)?;
        // `hh:mm` then the zone: seconds `:00` put in.
        let zone = clock.find(['Z', 'z', '+', '-'])?;
        (zone == 5).then(|| format!("{}:00{}", &s[..t + 6], &clock[5..])).and_then(|full| parse_rfc3339(&full))
    })
}

/// Parses RFC 3339 (`2026-11-30T12:00:00Z`, optional fraction, `Z` or `±hh:mm`) to epoch ms.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (y, mo, d, h, mi, se) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let frac = s.get(start..i)?;
        if frac.is_empty() {
            return None;
        }
        let padded = format!("{:0<3}", &frac[..frac.len().min(3)]);
        ms = padded.parse().ok()?;
    }
    let offset_min = match s.get(i..)? {
        "Z" | "z" => 0,
        tz if tz.len() == 6 && matches!(tz.as_bytes()[0], b'+' | b'-') && tz.as_bytes()[3] == b':' => {
            let oh: i64 = tz.get(1..3)?.parse().ok()?;
            let om: i64 = tz.get(4..6)?.parse().ok()?;
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo as u32, d as u32);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + ms)
}

/// (year, month, day) → days since 1970-01-01 (inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn parses_what_it_formats() {
        for ms in [0, 951_782_400_000, 1_796_000_000_123, 4_102_444_800_000] {
            assert_eq!(parse_rfc3339(&rfc3339_ms(ms)), Some(ms));
        }
        assert_eq!(parse_rfc3339("2026-11-30T01:00:00+01:00"), parse_rfc3339("2026-11-30T00:00:00Z"));
        assert_eq!(
            parse_rfc3339("2026-11-30T00:00:00.5Z"),
            Some(parse_rfc3339("2026-11-30T00:00:00Z").unwrap_or(0) + 500)
        );
        for bad in ["", "tomorrow", "2026-13-01T00:00:00Z", "2026-11-30T00:00:00", "2026-11-30T00:00:00.Z"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}

/// RFC 1123 in UTC, as APT's `Date` field wants: `Mon, 30 Nov 2026 01:40:00 UTC`.
/// An HTTP date (RFC 9110's IMF-fixdate) of whole seconds since the epoch:
/// `Wed, 02 Dec 2026 04:09:27 GMT`.
pub fn http_date(secs: i64) -> String {
    let mut date = rfc1123_utc(secs.saturating_mul(1000));
    date.truncate(date.len() - "UTC".len());
    date.push_str("GMT");
    date
}

pub fn rfc1123_utc(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let weekday = DAYS[usize::try_from(days.rem_euclid(7)).unwrap_or(0)];
    let month = MONTHS[(m as usize).saturating_sub(1).min(11)];
    format!("{weekday}, {d:02} {month} {y} {:02}:{:02}:{:02} UTC", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// Parses an RFC 1123 date as APT's `Date` and `Valid-Until` carry it — `Mon, 30 Nov 2026
/// 01:40:00 UTC` (also `GMT`, `Z`, `+0000`; the weekday optional) — to epoch ms.
pub fn parse_rfc1123(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let s = s.trim();
    let s = s.split_once(", ").map_or(s, |(_, rest)| rest);
    let mut parts = s.split_whitespace();
    let (day, month, year, clock, zone) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !matches!(zone, "UTC" | "GMT" | "Z" | "+0000") {
        return None;
    }
    let d: u32 = day.parse().ok()?;
    let m = u32::try_from(MONTHS.iter().position(|x| x.eq_ignore_ascii_case(month))? + 1).ok()?;
    let y: i64 = year.parse().ok()?;
    let mut hms = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, se) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 || hms.next().is_some() {
        return None;
    }
    Some((days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60 + se) * 1000)
}

#[cfg(test)]
mod rfc1123_tests {
    #[test]
    fn formats_like_http_dates() {
        assert_eq!(super::rfc1123_utc(0), "Thu, 01 Jan 1970 00:00:00 UTC");
        assert_eq!(super::rfc1123_utc(1_796_000_000_123), "Mon, 30 Nov 2026 00:53:20 UTC");
    }

    #[test]
    fn parses_apt_dates() {
        for ms in [0, 1_796_000_000_000, 4_102_444_800_000] {
            assert_eq!(super::parse_rfc1123(&super::rfc1123_utc(ms)), Some(ms));
        }
        assert_eq!(
            super::parse_rfc1123("Sat, 10 Jun 2023 09:42:55 GMT"),
            super::parse_rfc1123("10 Jun 2023 09:42:55 UTC")
        );
        for bad in
            ["", "Sat, 10 Jun 2023 09:42:55 CEST", "Sat, 10 Foo 2023 09:42:55 UTC", "Sat, 10 Jun 2023 25:00:00 UTC"]
        {
            assert_eq!(super::parse_rfc1123(bad), None, "{bad}");
        }
    }
}

/// A duration in its largest whole unit a person reads at a glance: `90 seconds`, `1 hour`,
/// `3 days` (the rest dropped only when the unit divides it exactly; else the next smaller unit).
pub fn human_duration(secs: u64) -> String {
    let (n, unit) = [(86_400, "day"), (3600, "hour"), (60, "minute")]
        .into_iter()
        .find(|(u, _)| secs >= *u && secs.is_multiple_of(*u))
        .map_or((secs, "second"), |(u, name)| (secs / u, name));
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}
