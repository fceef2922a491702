//! Alpine version order, as apk compares `pkgver`s: dot-separated numbers (numerically; a
//! missing one is older), then an optional letter, then suffixes in the order `_alpha` <
//! `_beta` < `_pre` < `_rc` < none < `_cvs` < `_svn` < `_git` < `_hg` < `_p`, each with an
//! optional number, then a `~hash` (ignored for order), then the package release `-rN`. What
//! "the newest N versions" of a package means for cleanup.

use std::cmp::Ordering;

/// Suffixes by rank; no suffix ranks between `_rc` and `_cvs`.
const SUFFIXES: [&str; 9] = ["alpha", "beta", "pre", "rc", "cvs", "svn", "git", "hg", "p"];
const NO_SUFFIX: u8 = 4;

#[derive(Debug, Default, PartialEq, Eq)]
struct Parsed {
    numbers: Vec<u64>,
    letter: Option<u8>,
    /// `(rank, number)` of each suffix; a version without one compares as `[(NO_SUFFIX, 0)]`.
    suffixes: Vec<(u8, u64)>,
    release: u64,
}

fn number(s: &str) -> u64 {
    s.parse().unwrap_or(u64::MAX)
}

fn parse(v: &str) -> Parsed {
    let mut p = Parsed::default();
    let (main, release) = match v.rsplit_once("-r") {
        Some((m, r)) if !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()) => (m, number(r)),
        _ => (v, 0),
    };
    p.release = release;
    let main = main.split_once('~').map_or(main, |(m, _hash)| m);
    let (core, suffixes) = main.split_once('_').map_or((main, ""), |(c, s)| (c, s));
    for part in core.split('.') {
        let digits: &str = &part[..part.bytes().take_while(u8::is_ascii_digit).count()];
        p.numbers.push(number(digits));
        if let Some(&letter) = part.as_bytes().get(digits.len()) {
            p.letter = Some(letter);
        }
    }
    for s in suffixes.split('_').filter(|s| !s.is_empty()) {
        let name_len = s.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (name, n) = s.split_at(name_len);
        let rank = SUFFIXES.iter().position(|x| *x == name).map_or(NO_SUFFIX, |i| {
            let i = u8::try_from(i).unwrap_or(NO_SUFFIX);
            if i >= NO_SUFFIX {
                i + 1
            } else {
                i
            }
        });
        p.suffixes.push((rank, if n.is_empty() { 0 } else { number(n) }));
    }
    if p.suffixes.is_empty() {
        p.suffixes.push((NO_SUFFIX, 0));
    }
    p
}

/// Compares two Alpine versions (`pkgver`, with or without `-rN`).
pub fn compare(a: &str, b: &str) -> Ordering {
    let (a, b) = (parse(a), parse(b));
    let numbers = {
        let mut o = Ordering::Equal;
        for i in 0..a.numbers.len().max(b.numbers.len()) {
            o = match (a.numbers.get(i), b.numbers.get(i)) {
                (Some(x), Some(y)) => x.cmp(y),
                (Some(_), None) => Ordering::Greater,
                (None, Some(_)) => Ordering::Less,
                (None, None) => Ordering::Equal,
            };
            if o != Ordering::Equal {
                break;
            }
        }
        o
    };
    numbers
        .then_with(|| a.letter.cmp(&b.letter))
        .then_with(|| {
            for i in 0..a.suffixes.len().max(b.suffixes.len()) {
                let none = (NO_SUFFIX, 0);
                let o = a.suffixes.get(i).unwrap_or(&none).cmp(b.suffixes.get(i).unwrap_or(&none));
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        })
        .then_with(|| a.release.cmp(&b.release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_apk_sorts_them() {
        // Each is older than the next.
        let ascending = [
            "0.9",
            "1.0_alpha",
            "1.0_alpha2",
            "1.0_beta",
            "1.0_pre1",
            "1.0_rc1",
            "1.0",
            "1.0-r1",
            "1.0-r10",
            "1.0_cvs",
            "1.0_git20240101",
            "1.0_p1",
            "1.0a",
            "1.0b",
            "1.0.1",
            "1.1",
            "1.9",
            "1.10",
            "2.0_rc1-r3",
            "2.0",
            "10.0",
        ];
        for w in ascending.windows(2) {
            assert_eq!(compare(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(compare(w[1], w[0]), Ordering::Greater, "{} > {}", w[1], w[0]);
        }
        for (a, b) in [("1.0", "1.0-r0"), ("1.0~abc", "1.0~def"), ("1.2.3-r4", "1.2.3-r4")] {
            assert_eq!(compare(a, b), Ordering::Equal, "{a} = {b}");
        }
    }
}
