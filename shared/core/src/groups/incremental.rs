//! Incremental group merges, written once for the formats whose group index lists each package
//! once from the first member that has it (APT, APK): a merge remembers each member's
//! contribution — the index it read, the keys of every package it offered, and what the format
//! kept of the packages it contributed — and the next merge reads again only the members whose
//! index changed, and a member whose index did not change only when a change ahead of it touched
//! a key it offers (one it shadowed or stopped shadowing). A package is listed once, so where a
//! contribution sits in the index is free: the kept ones come first, the merged ones after.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A package's key in a merge (`name version arch` as the format writes it), remembered as 128
/// bits of its SHA-256: a sixth of the string's memory for a member of 60,000 packages.
pub fn key_digest(key: &str) -> u128 {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(key.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    u128::from_be_bytes(b)
}

/// Whether a member's contribution to a group's index ends a chunk after an entry: where the
/// entries say rather than at a count, so that the same entries make the same chunks whatever
/// was added or removed before them, and the next merge finds them stored. `size`: the chunk so
/// far (bytes or entries, as the format counts); it ends after an entry whose digest's low eight
/// bits are zero once it holds `min`, and at `max` at the latest.
pub fn cut_after(size: usize, (min, max): (usize, usize), digest: u128) -> bool {
    size >= max || (size >= min && digest & 0xff == 0)
}

/// Inserts into a builder's memory, which holds at most `cap` entries: when full, an entry of
/// another key goes (a repository deleted, a unit no longer built; or one still built, whose
/// next build is then a whole one).
pub fn remember<K: Eq + std::hash::Hash + Clone, V>(map: &mut HashMap<K, V>, key: K, value: V, cap: usize) {
    if !map.contains_key(&key) && map.len() >= cap.max(1) {
        if let Some(other) = map.keys().next().cloned() {
            map.remove(&other);
        }
    }
    map.insert(key, value);
}

/// One member's part of a group's index as a merge left it; `T` is what the format keeps of it
/// (its stored chunks, say).
#[derive(Clone)]
pub struct Contribution<T> {
    /// The member's repository id (0: a part of the index that is no member's).
    pub member: i64,
    /// What was merged: the member's name and the SHA-256 of the index read.
    pub source: String,
    /// The keys of every package the member offers, merged or shadowed.
    pub offered: Arc<HashSet<u128>>,
    pub kept: T,
}

/// The members whose index is not the one `previous` read (they must be read to know what they
/// offer now): `inputs` are `(member, source)` in the members' order.
pub fn changed<T>(inputs: &[(i64, String)], previous: &[Contribution<T>]) -> Vec<i64> {
    inputs
        .iter()
        .filter(|(member, source)| previous.iter().find(|c| c.member == *member).is_none_or(|c| c.source != *source))
        .map(|(member, _)| *member)
        .collect()
}

/// The members that keep their contribution: the same index as before, and no changed member
/// ahead of them offers now, or offered then, a key they offer. `now`: what each changed member
/// offers now.
pub fn kept<T>(
    inputs: &[(i64, String)],
    previous: &[Contribution<T>],
    now: &HashMap<i64, HashSet<u128>>,
) -> HashSet<i64> {
    let mut kept = HashSet::new();
    let mut moved: HashSet<u128> = HashSet::new();
    for (member, source) in inputs {
        let Some(was) = previous.iter().find(|c| c.member == *member) else { continue };
        if was.source != *source {
            if let Some(offers) = now.get(member) {
                moved.extend(offers.symmetric_difference(&was.offered).copied());
            }
            continue;
        }
        let shadowed = if moved.len() < was.offered.len() {
            moved.iter().any(|k| was.offered.contains(k))
        } else {
            was.offered.iter().any(|k| moved.contains(k))
        };
        if !shadowed {
            kept.insert(*member);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> HashSet<u128> {
        k.iter().map(|k| key_digest(k)).collect()
    }

    fn was(member: i64, source: &str, offered: &[&str]) -> Contribution<()> {
        Contribution { member, source: source.into(), offered: Arc::new(keys(offered)), kept: () }
    }

    fn inputs(i: &[(i64, &str)]) -> Vec<(i64, String)> {
        i.iter().map(|(m, s)| (*m, s.to_string())).collect()
    }

    #[test]
    fn a_memory_holds_at_most_its_cap() {
        let mut m = HashMap::new();
        for i in 0..10 {
            remember(&mut m, i, i, 4);
        }
        assert_eq!(m.len(), 4);
        assert_eq!(m.get(&9), Some(&9), "the newest is kept");
        remember(&mut m, 9, 90, 4);
        assert_eq!((m.len(), m.get(&9)), (4, Some(&90)), "a key already held is replaced, nothing else goes");
    }

    #[test]
    fn a_member_is_read_again_when_its_index_or_a_key_ahead_of_it_changed() {
        let previous = [was(1, "a 1", &["x 1", "y 1"]), was(2, "b 1", &["y 1", "z 1"]), was(3, "c 1", &["w 1"])];
        let same = inputs(&[(1, "a 1"), (2, "b 1"), (3, "c 1")]);
        assert!(changed(&same, &previous).is_empty());
        assert_eq!(kept(&same, &previous, &HashMap::new()), HashSet::from([1, 2, 3]));
        // a gains a key nobody else has: only a is merged again.
        let a2 = inputs(&[(1, "a 2"), (2, "b 1"), (3, "c 1")]);
        assert_eq!(changed(&a2, &previous), [1]);
        let now = HashMap::from([(1, keys(&["x 1", "y 1", "v 1"]))]);
        assert_eq!(kept(&a2, &previous, &now), HashSet::from([2, 3]));
        // a drops y, which it shadowed in b: b is merged again too.
        let now = HashMap::from([(1, keys(&["x 1"]))]);
        assert_eq!(kept(&a2, &previous, &now), HashSet::from([3]));
        // a gains z, which b offers: b is merged again; c (behind both) is not.
        let now = HashMap::from([(1, keys(&["x 1", "y 1", "z 1"]))]);
        assert_eq!(kept(&a2, &previous, &now), HashSet::from([3]));
        // A change behind a member does not touch it.
        let c2 = inputs(&[(1, "a 1"), (2, "b 1"), (3, "c 2")]);
        let now = HashMap::from([(3, keys(&["x 1"]))]);
        assert_eq!(kept(&c2, &previous, &now), HashSet::from([1, 2]));
        // A member new to the group is merged.
        let new = inputs(&[(1, "a 1"), (4, "d 1")]);
        assert_eq!(changed(&new, &previous), [4]);
    }
}
