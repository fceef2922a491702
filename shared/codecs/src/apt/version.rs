//! Debian version order, as dpkg compares versions (deb-version(7)): `[epoch:]upstream[-revision]`,
//! the epoch numerically, then upstream and revision each as alternating non-digit and digit
//! runs — letters sort before other characters, `~` before everything, even the end — and digit
//! runs numerically. What "the newest N versions" of a package means for cleanup.

use std::cmp::Ordering;

/// A version split as dpkg splits it: the epoch (0 when absent), the upstream part, the
/// revision (empty when absent, which compares as `0`).
fn split(v: &str) -> (u64, &str, &str) {
    let (epoch, rest) = match v.split_once(':') {
        Some((e, rest)) if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => {
            (e.parse().unwrap_or(u64::MAX), rest)
        }
        _ => (0, v),
    };
    match rest.rsplit_once('-') {
        Some((upstream, revision)) => (epoch, upstream, revision),
        None => (epoch, rest, ""),
    }
}

/// A character's weight in a non-digit run: the end and digits 0, `~` below them, letters by
/// their code, anything else above every letter.
fn weight(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(b'~') => -1,
        Some(c) if c.is_ascii_alphabetic() => i32::from(c),
        Some(c) => i32::from(c) + 256,
    }
}

/// dpkg's comparison of an upstream part or a revision.
fn compare_part(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        // The non-digit run, character by character.
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let (x, y) = (weight(a.get(i).copied()), weight(b.get(j).copied()));
            if x != y {
                return x.cmp(&y);
            }
            i += 1;
            j += 1;
        }
        // The digit run, numerically: leading zeros skipped, then the longer run is larger, else
        // the first differing digit decides.
        while a.get(i) == Some(&b'0') {
            i += 1;
        }
        while b.get(j) == Some(&b'0') {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while i < a.len() && a[i].is_ascii_digit() && j < b.len() && b[j].is_ascii_digit() {
            if first_diff == Ordering::Equal {
                first_diff = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if i < a.len() && a[i].is_ascii_digit() {
            return Ordering::Greater;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

/// Compares two Debian versions as dpkg does.
pub fn compare(a: &str, b: &str) -> Ordering {
    let (ea, ua, ra) = split(a);
    let (eb, ub, rb) = split(b);
    ea.cmp(&eb).then_with(|| compare_part(ua, ub)).then_with(|| compare_part(ra, rb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_dpkg_sorts_them() {
        // Each is older than the next (deb-version(7)'s examples and dpkg's own test cases).
        let ascending = [
            "~~", "~~a", "~", "0", "0.9", "1.0~rc1", "1.0", "1.0-1", "1.0-1+b1", "1.0-2", "1.0a", "1.0+dfsg", "1.1",
            "1.9", "1.10", "1.10.1", "2.10-3", "10", "1:0.1", "1:0.9", "2:0.0.1",
        ];
        for w in ascending.windows(2) {
            assert_eq!(compare(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(compare(w[1], w[0]), Ordering::Greater, "{} > {}", w[1], w[0]);
        }
        for (a, b) in [("1.0", "1.0-0"), ("0:1.0", "1.0"), ("1.01", "1.1"), ("1.0-1", "1.0-01")] {
            assert_eq!(compare(a, b), Ordering::Equal, "{a} = {b}");
        }
        assert_eq!(compare("1.6-2.1+deb12u3", "1.6-2.1+deb12u2"), Ordering::Greater);
        assert_eq!(compare("5.02-1+b1", "5.02-1"), Ordering::Greater);
    }

    /// Every pair of a pool of tricky versions, against `dpkg --compare-versions` itself (where
    /// dpkg is installed, as on Debian).
    #[test]
    fn every_pair_agrees_with_dpkg() {
        let pool = [
            "0",
            "1",
            "1.0",
            "1.0-0",
            "1.0~",
            "1.0~~",
            "1.0~rc1",
            "1.0a",
            "1.0A",
            "1.0+1",
            "1.0.0",
            "1.00",
            "1.0-1",
            "1.0-1~bpo1",
            "1.0-1+b1",
            "1:1.0",
            "2:0",
            "1.0-a",
            "1.0-~",
            "9.10",
            "10.9",
            "1.2.3-4ubuntu5",
            "0.0.0~git1",
            "1.0+dfsg-2",
            "1.0.dfsg-2",
        ];
        let dpkg = |a: &str, op: &str, b: &str| {
            std::process::Command::new("dpkg").args(["--compare-versions", a, op, b]).status().map(|s| s.success())
        };
        if dpkg("1", "lt", "2").is_err() {
            eprintln!("skipped: no dpkg here");
            return;
        }
        for a in pool {
            for b in pool {
                let want = if dpkg(a, "lt", b).unwrap_or(false) {
                    Ordering::Less
                } else if dpkg(a, "gt", b).unwrap_or(false) {
                    Ordering::Greater
                } else {
                    Ordering::Equal
                };
                assert_eq!(compare(a, b), want, "{a} against {b}");
            }
        }
    }
}
