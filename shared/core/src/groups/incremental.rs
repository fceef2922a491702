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
fn cut_after(size: usize, (min, max): (usize, usize), digest: u128) -> bool {
    size >= max || (size >= min && digest & 0xff == 0)
}

/// Where a member's contribution to a group's index is cut: into chunks by `cut_after`, and the
/// last, open chunk — the one a member's appended packages grow, merge after merge — into
/// smaller pieces by the same kind of rule (`tail`; after an entry whose digest's next six bits
/// are zero), so that an append stores one small piece again rather than the whole open chunk.
/// Once the open chunk ends, its pieces are one chunk again (large chunks compress better).
pub struct Cuts {
    chunk: (usize, usize),
    tail: (usize, usize),
    /// The open chunk so far, and its open piece.
    size: usize,
    piece: usize,
    /// Where each closed piece of the open chunk ends, from the chunk's start.
    ends: Vec<usize>,
}

impl Cuts {
    /// `chunk`: a chunk's least and most size; `tail`: a piece's of the open chunk.
    pub fn new(chunk: (usize, usize), tail: (usize, usize)) -> Self {
        Self { chunk, tail, size: 0, piece: 0, ends: Vec::new() }
    }

    /// Counts an entry of `len` (bytes or entries) whose key's digest `digest` gives (asked only
    /// when a cut depends on it): whether the chunk ends after it.
    pub fn after(&mut self, len: usize, digest: impl FnOnce() -> u128) -> bool {
        self.size += len;
        self.piece += len;
        let asked = self.size >= self.chunk.0 || self.piece >= self.tail.0;
        // (A placeholder that no cut rule takes for a cut.)
        let digest = if asked { digest() } else { u128::MAX };
        if cut_after(self.size, self.chunk, digest) {
            self.size = 0;
            self.piece = 0;
            self.ends.clear();
            return true;
        }
        if self.piece >= self.tail.1 || (self.piece >= self.tail.0 && (digest >> 8) & 0x3f == 0) {
            self.ends.push(self.size);
            self.piece = 0;
        }
        false
    }

    /// The open chunk's pieces at the end of the entries: where each ends, from the chunk's
    /// start (the last at its end; none when no chunk is open).
    pub fn pieces(&self) -> Vec<usize> {
        let mut ends = self.ends.clone();
        if self.piece > 0 {
            ends.push(self.size);
        }
        ends
    }
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

    /// Chunk ends and the open chunk's piece ends (all from the start) of `n` entries of 400.
    fn cut(n: usize) -> (Vec<usize>, Vec<usize>) {
        let mut cuts = Cuts::new((40_000, 120_000), (4_000, 16_000));
        let (mut ends, mut at) = (Vec::new(), 0);
        for i in 0..n {
            at += 400;
            if cuts.after(400, || key_digest(&format!("p{i} 1 amd64"))) {
                ends.push(at);
            }
        }
        let start = ends.last().copied().unwrap_or(0);
        (ends, cuts.pieces().into_iter().map(|e| start + e).collect())
    }

    #[test]
    fn an_append_changes_only_the_open_chunks_last_piece() {
        let mut pieces_seen = 0;
        for n in 1..1500 {
            let ((ends, pieces), (next_ends, next_pieces)) = (cut(n), cut(n + 1));
            assert!(next_ends.starts_with(&ends), "an append moved a chunk's end at {n}");
            if next_ends.len() == ends.len() {
                // The same open chunk: every piece but its last is the same.
                let kept = pieces.len().saturating_sub(1);
                assert_eq!(next_pieces[..kept], pieces[..kept], "an append moved a closed piece at {n}");
            } else {
                // The appended entry closed the open chunk: nothing is open after it.
                assert_eq!(next_ends.last(), Some(&(n * 400 + 400)));
                assert!(next_pieces.is_empty(), "{next_pieces:?}");
            }
            let start = ends.last().copied().unwrap_or(0);
            let mut from = start;
            for &e in &pieces {
                assert!(e - from <= 16_000, "a piece of {} bytes at {n}", e - from);
                from = e;
            }
            assert_eq!(pieces.last().copied().unwrap_or(start), n * 400, "the pieces cover the open chunk at {n}");
            pieces_seen = pieces_seen.max(pieces.len());
        }
        assert!(pieces_seen >= 4, "the open chunk was cut into {pieces_seen} pieces at most");
        // Closed pieces hold at least the least size, and the keys end some before the most.
        let (ends, pieces) = cut(1400);
        let mut from = ends.last().copied().unwrap_or(0);
        let mut sizes = Vec::new();
        for &e in pieces.iter().take(pieces.len().saturating_sub(1)) {
            sizes.push(e - from);
            from = e;
        }
        assert!(sizes.iter().all(|s| *s >= 4_000), "{sizes:?}");
        assert!(sizes.iter().any(|s| *s < 16_000), "no piece ended where its key said: {sizes:?}");
        let (ends, _) = cut(1500);
        assert!(ends.len() >= 3 && ends.windows(2).all(|w| (40_000..=120_000).contains(&(w[1] - w[0]))), "{ends:?}");
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
