//! MD5 of several byte streams at once.
//!
//! MD5 is one chain of dependent steps per stream, so no single stream hashes faster than a core
//! runs that chain (~500 MB/s here, a third of an upload's server CPU). The worker hashes the new
//! packages of a publication together: [`Lanes`] keeps one stream per 32-bit lane of a vector
//! (`wide`'s portable types: SSE2 on any x86-64, NEON on aarch64, no `unsafe` here) and runs the
//! chains side by side, ~3.6× the rate of one stream on this machine (`cargo bench -p
//! packyard-shared --bench md5`). Each stream's bytes are taken as they come; [`Lanes::hash_ready`] hashes, in step, the whole blocks the streams have; a stream's
//! last blocks and its padding are hashed alone by [`Lanes::finish`].

/// Streams hashed in step: eight lanes are two SSE registers per state word (sixteen measured
/// no faster here, and leave more lanes idle in a small publication).
pub const WIDTH: usize = 8;

const BLOCK: usize = 64;

/// ⌊|sin(i + 1)| · 2³²⌋ (RFC 1321).
const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8,
    0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340,
    0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87,
    0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039,
    0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92,
    0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
];

const INITIAL: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];

/// Eight 32-bit lanes.
use wide::u32x8 as V;

#[inline(always)]
fn rotl(x: V, l: u32) -> V {
    (x << l) | (x >> (32 - l))
}

/// Vectors per state word.
const VECS: usize = WIDTH / 8;

/// One step for every lane: `a = b + ((a + fun(b, c, d) + m + k) <<< s)`.
macro_rules! step {
    ($fun:ident, $a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
        let k = V::splat($k);
        for j in 0..VECS {
            let t = $a[j] + $m[j] + k + $fun($b[j], $c[j], $d[j]);
            $a[j] = $b[j] + rotl(t, $s);
        }
    };
}

/// Sixteen steps of one round: the state words rotate through the four positions; `g` is the
/// first message word and `dg` how far the next one is (mod 16).
macro_rules! round {
    ($fun:ident, $st:ident, $m:ident, $first:literal, $g:literal, $dg:literal, [$s0:literal, $s1:literal, $s2:literal, $s3:literal]) => {
        let [a, b, c, d] = &mut $st;
        for q in 0..4 {
            let at = $first + 4 * q;
            let word = |j: usize| ($g + $dg * (4 * q + j)) % 16;
            step!($fun, a, b, c, d, $m[word(0)], K[at], $s0);
            step!($fun, d, a, b, c, $m[word(1)], K[at + 1], $s1);
            step!($fun, c, d, a, b, $m[word(2)], K[at + 2], $s2);
            step!($fun, b, c, d, a, $m[word(3)], K[at + 3], $s3);
        }
    };
}

#[inline(always)]
fn f(b: V, c: V, d: V) -> V {
    ((c ^ d) & b) ^ d
}
#[inline(always)]
fn g(b: V, c: V, d: V) -> V {
    ((b ^ c) & d) ^ c
}
#[inline(always)]
fn h(b: V, c: V, d: V) -> V {
    b ^ c ^ d
}
#[inline(always)]
fn i(b: V, c: V, d: V) -> V {
    c ^ (b | (d ^ V::splat(u32::MAX)))
}

/// Hashes one block of each lane into the states (`s[word][vector]`); `m[word][vector]` is the
/// block's message, little-endian words.
#[inline(always)]
fn compress(s: &mut [[V; VECS]; 4], m: &[[V; VECS]; 16]) {
    let mut st = *s;
    round!(f, st, m, 0, 0, 1, [7, 12, 17, 22]);
    round!(g, st, m, 16, 1, 5, [5, 9, 14, 20]);
    round!(h, st, m, 32, 5, 3, [4, 11, 16, 23]);
    round!(i, st, m, 48, 0, 7, [6, 10, 15, 21]);
    for (word, new) in s.iter_mut().zip(st) {
        for j in 0..VECS {
            word[j] += new[j];
        }
    }
}

/// Hashes the `n` whole blocks at the start of each lane's data in step.
fn blocks(states: &mut [[u32; 4]; WIDTH], data: [&[u8]; WIDTH], n: usize) {
    let lanes = |word: &dyn Fn(usize) -> u32| -> [V; VECS] {
        std::array::from_fn(|j| V::new(std::array::from_fn(|k| word(8 * j + k))))
    };
    let mut s: [[V; VECS]; 4] = std::array::from_fn(|w| lanes(&|l| states[l][w]));
    for b in 0..n {
        let at = b * BLOCK;
        let m: [[V; VECS]; 16] = std::array::from_fn(|w| {
            lanes(&|l| {
                let x = &data[l][at + 4 * w..at + 4 * w + 4];
                u32::from_le_bytes([x[0], x[1], x[2], x[3]])
            })
        });
        compress(&mut s, &m);
    }
    for (w, word) in s.iter().enumerate() {
        for (j, v) in word.iter().enumerate() {
            for (k, x) in v.to_array().into_iter().enumerate() {
                states[8 * j + k][w] = x;
            }
        }
    }
}

/// The same steps for one stream, in plain words.
macro_rules! step1 {
    ($fun:ident, $a:ident, $b:ident, $c:ident, $d:ident, $m:expr, $k:expr, $s:literal) => {
        // The message and constant first: off the chain through `b`.
        $a = $b.wrapping_add($a.wrapping_add($m).wrapping_add($k).wrapping_add($fun($b, $c, $d)).rotate_left($s));
    };
}

macro_rules! round1 {
    ($fun:ident, $st:ident, $m:ident, $first:literal, $g:literal, $dg:literal, [$s0:literal, $s1:literal, $s2:literal, $s3:literal]) => {
        let [mut a, mut b, mut c, mut d] = $st;
        for q in 0..4 {
            let at = $first + 4 * q;
            let word = |j: usize| ($g + $dg * (4 * q + j)) % 16;
            step1!($fun, a, b, c, d, $m[word(0)], K[at], $s0);
            step1!($fun, d, a, b, c, $m[word(1)], K[at + 1], $s1);
            step1!($fun, c, d, a, b, $m[word(2)], K[at + 2], $s2);
            step1!($fun, b, c, d, a, $m[word(3)], K[at + 3], $s3);
        }
        $st = [a, b, c, d];
    };
}

#[inline(always)]
fn f1(b: u32, c: u32, d: u32) -> u32 {
    ((c ^ d) & b) ^ d
}
#[inline(always)]
fn g1(b: u32, c: u32, d: u32) -> u32 {
    ((b ^ c) & d) ^ c
}
#[inline(always)]
fn h1(b: u32, c: u32, d: u32) -> u32 {
    b ^ c ^ d
}
#[inline(always)]
fn i1(b: u32, c: u32, d: u32) -> u32 {
    c ^ (b | !d)
}

/// Hashes whole blocks of one stream alone.
fn blocks_one(state: &mut [u32; 4], data: &[u8]) {
    for block in data.chunks_exact(BLOCK) {
        let m: [u32; 16] = std::array::from_fn(|w| {
            let x = &block[4 * w..4 * w + 4];
            u32::from_le_bytes([x[0], x[1], x[2], x[3]])
        });
        let mut st = *state;
        round1!(f1, st, m, 0, 0, 1, [7, 12, 17, 22]);
        round1!(g1, st, m, 16, 1, 5, [5, 9, 14, 20]);
        round1!(h1, st, m, 32, 5, 3, [4, 11, 16, 23]);
        round1!(i1, st, m, 48, 0, 7, [6, 10, 15, 21]);
        for (x, y) in state.iter_mut().zip(st) {
            *x = x.wrapping_add(y);
        }
    }
}

#[derive(Debug, Clone)]
struct Lane {
    state: [u32; 4],
    /// Bytes hashed into `state`.
    hashed: u64,
    /// Bytes received and not hashed yet: `pending[start..]`.
    pending: Vec<u8>,
    start: usize,
}

impl Lane {
    fn new() -> Self {
        Lane { state: INITIAL, hashed: 0, pending: Vec::new(), start: 0 }
    }

    fn waiting(&self) -> &[u8] {
        &self.pending[self.start..]
    }

    fn ready_blocks(&self) -> usize {
        self.waiting().len() / BLOCK
    }

    /// At the start of a stream again, keeping the buffer's memory for the next one.
    fn reset(&mut self) {
        self.state = INITIAL;
        self.hashed = 0;
        self.pending.clear();
        self.start = 0;
    }

    fn consumed(&mut self, blocks: usize) {
        self.start += blocks * BLOCK;
        self.hashed += (blocks * BLOCK) as u64;
    }
}

/// MD5 of several streams at once: `update` each lane with its stream's bytes as they come,
/// `hash_ready` between updates (so that a lane holds about one update's bytes), `finish` a
/// lane at its stream's end; `restart` reuses a finished lane for the next stream.
#[derive(Debug, Clone)]
pub struct Lanes {
    lanes: Vec<Lane>,
}

impl Lanes {
    /// `n` lanes, each at the start of a stream.
    pub fn new(n: usize) -> Self {
        Lanes { lanes: vec![Lane::new(); n] }
    }

    /// Bytes a lane holds that are not hashed yet (fewer than 64 after `hash_ready`).
    pub fn waiting(&self, lane: usize) -> usize {
        self.lanes[lane].waiting().len()
    }

    /// More of a lane's stream.
    pub fn update(&mut self, lane: usize, bytes: &[u8]) {
        let l = &mut self.lanes[lane];
        if l.start > 0 {
            l.pending.drain(..l.start);
            l.start = 0;
        }
        l.pending.extend_from_slice(bytes);
    }

    /// Hashes every whole block the lanes hold, up to [`WIDTH`] lanes in step: the lanes with
    /// blocks go together for as many blocks as the shortest of them has, then again without
    /// it, until no lane holds a whole block.
    pub fn hash_ready(&mut self) {
        loop {
            let mut ready: Vec<usize> = (0..self.lanes.len()).filter(|&l| self.lanes[l].ready_blocks() > 0).collect();
            if ready.is_empty() {
                return;
            }
            // The longest first: a group of lanes runs for its shortest member's blocks.
            ready.sort_by_key(|&l| std::cmp::Reverse(self.lanes[l].ready_blocks()));
            for group in ready.chunks(WIDTH) {
                let n = group.iter().map(|&l| self.lanes[l].ready_blocks()).min().unwrap_or(0);
                if group.len() == 1 {
                    let lane = &mut self.lanes[group[0]];
                    let (start, end) = (lane.start, lane.start + n * BLOCK);
                    blocks_one(&mut lane.state, &lane.pending[start..end]);
                    lane.consumed(n);
                    continue;
                }
                // Idle positions in the group hash a copy of its last lane's blocks, discarded.
                let mut states = [INITIAL; WIDTH];
                let mut data: [&[u8]; WIDTH] = [&[]; WIDTH];
                for (k, slot) in data.iter_mut().enumerate() {
                    let lane = &self.lanes[group[k.min(group.len() - 1)]];
                    states[k] = lane.state;
                    *slot = &lane.waiting()[..n * BLOCK];
                }
                blocks(&mut states, data, n);
                for (k, &l) in group.iter().enumerate() {
                    self.lanes[l].state = states[k];
                    self.lanes[l].consumed(n);
                }
            }
        }
    }

    /// The MD5 of the lane's stream, which ends here; the lane is then empty (see `restart`).
    pub fn finish(&mut self, lane: usize) -> [u8; 16] {
        let l = &mut self.lanes[lane];
        let whole = l.ready_blocks();
        let (start, end) = (l.start, l.start + whole * BLOCK);
        blocks_one(&mut l.state, &l.pending[start..end]);
        l.consumed(whole);
        let rest = l.waiting();
        let bits = (l.hashed + rest.len() as u64).wrapping_mul(8);
        let mut tail = Vec::with_capacity(2 * BLOCK);
        tail.extend_from_slice(rest);
        tail.push(0x80);
        while tail.len() % BLOCK != BLOCK - 8 {
            tail.push(0);
        }
        tail.extend_from_slice(&bits.to_le_bytes());
        blocks_one(&mut l.state, &tail);
        let mut digest = [0u8; 16];
        for (out, word) in digest.chunks_exact_mut(4).zip(l.state) {
            out.copy_from_slice(&word.to_le_bytes());
        }
        l.reset();
        digest
    }

    /// The lane starts a new stream (what it held is dropped).
    pub fn restart(&mut self, lane: usize) {
        self.lanes[lane].reset();
    }
}

/// The MD5 of one byte string (the scalar form of the same code).
pub fn digest(bytes: &[u8]) -> [u8; 16] {
    let mut lanes = Lanes::new(1);
    lanes.update(0, bytes);
    lanes.finish(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use md5::Digest as _;

    fn reference(bytes: &[u8]) -> [u8; 16] {
        md5::Md5::digest(bytes).into()
    }

    /// Deterministic filler (xorshift).
    fn bytes(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn known_answers() {
        // RFC 1321's test suite.
        for (input, hex) in [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ] {
            assert_eq!(hex::encode(digest(input.as_bytes())), hex, "MD5 of {input:?}");
        }
    }

    #[test]
    fn every_length_around_the_padding_boundaries() {
        for len in (0..300).chain([1 << 20, (1 << 20) + 55, (1 << 20) + 56, (1 << 20) + 63]) {
            let b = bytes(len as u64, len);
            assert_eq!(digest(&b), reference(&b), "length {len}");
        }
    }

    /// More streams than lanes, of different lengths, fed in pieces of different sizes with
    /// hashing at arbitrary points, some finished early and their lanes reused.
    #[test]
    fn streams_in_step_hash_as_each_alone() {
        let n = 2 * WIDTH + 3;
        let streams: Vec<Vec<u8>> = (0..n).map(|s| bytes(s as u64 + 7, 1000 * s + 37 * (s % 5) + s % 64)).collect();
        let again: Vec<Vec<u8>> = (0..n).map(|s| bytes(s as u64 + 1000, 5000 + 129 * s)).collect();
        let mut lanes = Lanes::new(n);
        let mut pos = vec![0usize; n];
        let mut round = 0usize;
        let mut done = vec![false; n];
        while done.iter().any(|d| !d) {
            for s in 0..n {
                if done[s] {
                    continue;
                }
                let piece = 1 + (round * 31 + s * 17) % 700;
                let end = (pos[s] + piece).min(streams[s].len());
                lanes.update(s, &streams[s][pos[s]..end]);
                pos[s] = end;
                if round % 3 == s % 3 {
                    lanes.hash_ready();
                }
                if pos[s] == streams[s].len() {
                    assert_eq!(lanes.finish(s), reference(&streams[s]), "stream {s}");
                    done[s] = true;
                }
            }
            lanes.hash_ready();
            assert!((0..n).all(|s| lanes.waiting(s) < BLOCK), "every whole block is hashed");
            round += 1;
        }
        // Finished lanes start again from nothing, whole streams at once.
        for (s, b) in again.iter().enumerate() {
            lanes.update(s, b);
        }
        lanes.hash_ready();
        for (s, b) in again.iter().enumerate() {
            assert_eq!(lanes.finish(s), reference(b), "second stream in lane {s}");
        }
        lanes.update(0, b"ab");
        lanes.restart(0);
        lanes.update(0, b"abc");
        assert_eq!(hex::encode(lanes.finish(0)), "900150983cd24fb0d6963f7d28e17f72");
    }
}
