//! Conan 2's version order: `main[-pre][+build]`, the main part's dot-separated items compared
//! one by one — numbers numerically, words as text, a number against a word as text — with
//! trailing zero items ignored (`1.0` is `1`); a pre-release sorts before the release it
//! precedes (`1.0-rc` < `1.0`) and is itself compared as a version, and so is the build part
//! (none before any). What "the newest N versions" of a recipe means for cleanup.

use std::cmp::Ordering;

/// One dot-separated item.
#[derive(Debug, PartialEq, Eq)]
enum Item<'a> {
    Number(u64),
    Word(&'a str),
}

impl Item<'_> {
    fn compare(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Item::Number(a), Item::Number(b)) => a.cmp(b),
            (Item::Word(a), Item::Word(b)) => a.cmp(b),
            (a, b) => a.text().cmp(&b.text()),
        }
    }

    fn text(&self) -> String {
        match self {
            Item::Number(n) => n.to_string(),
            Item::Word(w) => (*w).to_string(),
        }
    }
}

/// The main part's items without the trailing zeros.
fn items(main: &str) -> Vec<Item<'_>> {
    let mut items: Vec<Item<'_>> =
        main.split('.').map(|s| s.parse::<u64>().map_or(Item::Word(s), Item::Number)).collect();
    while items.len() > 1 && items.last() == Some(&Item::Number(0)) {
        items.pop();
    }
    items
}

/// `(main, pre, build)`: the build after the first `+`, the pre-release after the first `-` of
/// what precedes it.
fn split(v: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, build) = match v.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (v, None),
    };
    match rest.split_once('-') {
        Some((main, pre)) => (main, Some(pre), build),
        None => (rest, None, build),
    }
}

fn compare_items(a: &[Item<'_>], b: &[Item<'_>]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = x.compare(y);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Compares two Conan versions as Conan 2 orders them.
pub fn compare(a: &str, b: &str) -> Ordering {
    let (am, apre, abuild) = split(a);
    let (bm, bpre, bbuild) = split(b);
    compare_items(&items(am), &items(bm))
        .then_with(|| match (apre, bpre) {
            (None, None) => Ordering::Equal,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => compare(x, y),
        })
        .then_with(|| match (abuild, bbuild) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => compare(x, y),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_conan_sorts_them() {
        // Each is older than the next.
        let ascending = [
            "0.1",
            "1.0-alpha",
            "1.0-alpha.2",
            "1.0-beta",
            "1.0-rc.1",
            "1.0",
            "1.0+build1",
            "1.0+build2",
            "1.0.1",
            "1.2",
            "1.2.9",
            "1.2.10",
            "1.10",
            "2",
            "2.a",
            "10.0",
        ];
        for w in ascending.windows(2) {
            assert_eq!(compare(w[0], w[1]), Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(compare(w[1], w[0]), Ordering::Greater, "{} > {}", w[1], w[0]);
        }
        for (a, b) in [("1.0", "1"), ("1.0.0", "1"), ("1.2-rc", "1.2.0-rc"), ("x", "x")] {
            assert_eq!(compare(a, b), Ordering::Equal, "{a} = {b}");
        }
        // A number against a word compares as text.
        assert_eq!(compare("1.10", "1.a"), Ordering::Less);
        assert_eq!(compare("1.b", "1.10"), Ordering::Greater);
    }
}
