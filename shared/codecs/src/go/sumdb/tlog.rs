//! The transparency log behind a checksum database (`golang.org/x/mod/sumdb/tlog`): RFC 6962
//! record and node hashes, the dense order in which a log stores its hashes, tree heads, records
//! as served, and tiles.
//!
//! Every function that needs earlier hashes comes in two halves, so that the hashes can live in
//! a database table (stored index → hash) read with one query: `indexes_for_*` names the stored
//! hashes to read, and the function of the same name computes from them, in that order.

use std::fmt;
use std::ops::Range;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::BASE64_LENIENT;

pub const HASH_SIZE: usize = 32;

/// The tile height the go command asks for (`tile/8/…`).
pub const TILE_HEIGHT: u8 = 8;

/// The first line of a tree head note.
const TREE_HEADER: &str = "go.sum database tree\n";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlogError {
    #[error("expected {expected} hashes, got {got}")]
    HashCount { expected: usize, got: usize },
    #[error("expected {expected} records, got {got}")]
    RecordCount { expected: u64, got: u64 },
    #[error("malformed hash")]
    MalformedHash,
    #[error("malformed tree note")]
    MalformedTree,
    #[error("malformed record: {0}")]
    MalformedRecord(&'static str),
    #[error("malformed tile path {0:?}")]
    MalformedTilePath(String),
    #[error("stored hash {index} is not in tile {tile}")]
    NotInTile { index: u64, tile: String },
    #[error("tile {tile} needs {expected} bytes, got {got}")]
    ShortTile { tile: String, expected: usize, got: usize },
}

/// A record hash, node hash or tree hash.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Hash(pub [u8; HASH_SIZE]);

impl Hash {
    pub fn from_slice(bytes: &[u8]) -> Result<Self, TlogError> {
        Ok(Self(bytes.try_into().map_err(|_| TlogError::MalformedHash)?))
    }

    pub fn from_base64(s: &str) -> Result<Self, TlogError> {
        Self::from_slice(&BASE64_LENIENT.decode(s).map_err(|_| TlogError::MalformedHash)?)
    }

    pub fn to_base64(&self) -> String {
        BASE64.encode(self.0)
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({self})")
    }
}

/// A leaf: SHA-256(0x00 ‖ data).
pub fn record_hash(data: &[u8]) -> Hash {
    Hash(Sha256::new().chain_update([0x00]).chain_update(data).finalize().into())
}

/// An interior node: SHA-256(0x01 ‖ left ‖ right).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    Hash(Sha256::new().chain_update([0x01]).chain_update(left.0).chain_update(right.0).finalize().into())
}

/// Where the hash of node `n` at `level` (level 0: records) is stored. Appending record `n`
/// stores its leaf hash and then the hashes of the subtrees it completes, lowest first, so the
/// hashes of the first `n` records fill indexes `0..stored_hash_count(n)`.
pub fn stored_hash_index(level: u8, n: u64) -> u64 {
    // The node is stored right after the last leaf under it: leaf (n + 1)·2^level − 1, whose
    // own index counts every hash stored before it.
    let last_leaf = ((n + 1) << level) - 1;
    let mut index = 0;
    let mut m = last_leaf;
    while m > 0 {
        index += m;
        m >>= 1;
    }
    index + u64::from(level)
}

/// The inverse of [`stored_hash_index`]: the level and node number stored at `index`.
pub fn split_stored_hash_index(index: u64) -> (u8, u64) {
    // stored_hash_index(0, n) < 2n, so the last leaf stored at or before `index` is at least
    // index / 2; walk forward from there.
    let mut n = index / 2;
    let mut leaf_index = stored_hash_index(0, n);
    loop {
        let next = leaf_index + 1 + u64::from((n + 1).trailing_zeros());
        if next > index {
            break;
        }
        n += 1;
        leaf_index = next;
    }
    let level = (index - leaf_index) as u8;
    (level, n >> level)
}

/// How many hashes a log of `size` records stores.
pub fn stored_hash_count(size: u64) -> u64 {
    stored_hash_index(0, size)
}

/// The stored hashes to read before appending record `n`: the left siblings of the subtrees it
/// completes, in increasing index order.
pub fn indexes_for_append(n: u64) -> Vec<u64> {
    let completed = (n + 1).trailing_zeros() as u8;
    (0..completed).rev().map(|level| stored_hash_index(level, (n >> level) - 1)).collect()
}

/// The hashes to store, from index `stored_hash_count(n)` on, when appending record `n` whose
/// [`record_hash`] is `leaf`; `read` holds the hashes at [`indexes_for_append`]`(n)`.
pub fn hashes_for_append(n: u64, leaf: Hash, read: &[Hash]) -> Result<Vec<Hash>, TlogError> {
    let completed = (n + 1).trailing_zeros() as usize;
    if read.len() != completed {
        return Err(TlogError::HashCount { expected: completed, got: read.len() });
    }
    let mut hashes = Vec::with_capacity(completed + 1);
    let mut h = leaf;
    hashes.push(h);
    for left in read.iter().rev() {
        h = node_hash(left, &h);
        hashes.push(h);
    }
    Ok(hashes)
}

/// The largest power of two not above `n` (n ≥ 1), as its exponent.
fn log2_floor(n: u64) -> u8 {
    (63 - n.leading_zeros()) as u8
}

/// The complete subtrees that make up records `lo..hi`, largest first: the stored hashes
/// RFC 6962 combines from the right to hash that range.
fn subtree_indexes(mut lo: u64, hi: u64, out: &mut Vec<u64>) {
    while lo < hi {
        let level = log2_floor(hi - lo);
        out.push(stored_hash_index(level, lo >> level));
        lo += 1 << level;
    }
}

/// The stored hashes [`tree_hash`] reads for a log of `size` records.
pub fn indexes_for_tree_hash(size: u64) -> Vec<u64> {
    let mut out = Vec::new();
    subtree_indexes(0, size, &mut out);
    out
}

/// The root hash of the log's first `size` records, from the hashes at
/// [`indexes_for_tree_hash`]`(size)`. The empty tree's hash is all zeros, as the go command has it.
pub fn tree_hash(size: u64, read: &[Hash]) -> Result<Hash, TlogError> {
    let expected = size.count_ones() as usize;
    if read.len() != expected {
        return Err(TlogError::HashCount { expected, got: read.len() });
    }
    let Some((last, rest)) = read.split_last() else { return Ok(Hash::default()) };
    Ok(rest.iter().rev().fold(*last, |right, left| node_hash(left, &right)))
}

/// A tree head: the text a server signs (`go.sum database tree\n<size>\n<base64 hash>\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    pub size: u64,
    pub hash: Hash,
}

impl Tree {
    pub fn text(&self) -> String {
        format!("{TREE_HEADER}{}\n{}\n", self.size, self.hash)
    }

    /// Parses a tree head; lines after the third are ignored, as the go command ignores them.
    pub fn parse(text: &str) -> Result<Self, TlogError> {
        let rest = text.strip_prefix(TREE_HEADER).ok_or(TlogError::MalformedTree)?;
        if text.len() > 1_000_000 {
            return Err(TlogError::MalformedTree);
        }
        let mut lines = rest.splitn(3, '\n');
        let (Some(size), Some(hash), Some(_)) = (lines.next(), lines.next(), lines.next()) else {
            return Err(TlogError::MalformedTree);
        };
        let size = parse_decimal(size).ok_or(TlogError::MalformedTree)?;
        let hash = Hash::from_base64(hash).map_err(|_| TlogError::MalformedTree)?;
        Ok(Self { size, hash })
    }
}

/// A number in canonical decimal (no sign, no leading zeros).
fn parse_decimal(s: &str) -> Option<u64> {
    let canonical = s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    s.parse().ok().filter(|_| canonical)
}

/// Whether `text` may be a record: non-empty lines, each ending in a newline, without control
/// characters.
pub fn check_record_text(text: &str) -> Result<(), TlogError> {
    if !text.ends_with('\n') {
        return Err(TlogError::MalformedRecord("the text must end in a newline"));
    }
    if text.contains("\n\n") {
        return Err(TlogError::MalformedRecord("the text must not contain a blank line"));
    }
    if text.chars().any(|c| c < ' ' && c != '\n') {
        return Err(TlogError::MalformedRecord("the text must not contain control characters"));
    }
    Ok(())
}

/// A record as a lookup answer or a data tile carries it: `<id>\n<text>\n`, the blank line
/// ending it.
pub fn format_record(id: u64, text: &str) -> Result<String, TlogError> {
    check_record_text(text)?;
    Ok(format!("{id}\n{text}\n"))
}

/// Reads a record from the start of `msg`: its id, its text and what follows it.
pub fn parse_record(msg: &str) -> Result<(u64, &str, &str), TlogError> {
    let (id, rest) = msg.split_once('\n').ok_or(TlogError::MalformedRecord("no record id"))?;
    let id = parse_decimal(id).ok_or(TlogError::MalformedRecord("the record id is not a number"))?;
    let end = rest.find("\n\n").ok_or(TlogError::MalformedRecord("no blank line ends the record"))?;
    let (text, after) = (&rest[..end + 1], &rest[end + 2..]);
    check_record_text(text)?;
    Ok((id, text, after))
}

/// Which row of tiles a tile belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileLevel {
    /// Tile level L: hashes of the tree's level L·height (`tile/<H>/<L>/…`).
    Hashes(u8),
    /// The records themselves (`tile/<H>/data/…`).
    Data,
}

/// A tile: `width` consecutive entries, starting at entry `number · 2^height` of its level.
/// A full tile has 2^height entries; a partial one (`.p/<width>`) fewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile {
    pub height: u8,
    pub level: TileLevel,
    pub number: u64,
    pub width: u32,
}

impl Tile {
    /// The full tile's width.
    pub fn full_width(&self) -> u32 {
        1 << self.height
    }

    pub fn is_full(&self) -> bool {
        self.width == self.full_width()
    }

    /// The tree level of its hashes (0 for a data tile: its records are the leaves).
    pub fn tree_level(&self) -> u8 {
        match self.level {
            TileLevel::Hashes(l) => l * self.height,
            TileLevel::Data => 0,
        }
    }

    /// Its entries as node numbers of its tree level: record ids for a data tile.
    pub fn range(&self) -> Range<u64> {
        let start = self.number << self.height;
        start..start + u64::from(self.width)
    }

    /// `tile/<H>/<L or data>/<number>[.p/<width>]`, the number in three-digit elements all but
    /// the last prefixed with `x` (1234067 → `x001/x234/067`).
    pub fn path(&self) -> String {
        let mut number = format!("{:03}", self.number % 1000);
        let mut rest = self.number / 1000;
        while rest > 0 {
            number = format!("x{:03}/{number}", rest % 1000);
            rest /= 1000;
        }
        let level = match self.level {
            TileLevel::Hashes(l) => l.to_string(),
            TileLevel::Data => "data".into(),
        };
        let partial = if self.is_full() { String::new() } else { format!(".p/{}", self.width) };
        format!("tile/{}/{level}/{number}{partial}", self.height)
    }

    /// Parses a tile path (`tile/8/0/x001/234.p/5`); only the canonical spelling is accepted,
    /// and only tiles whose entries a log could hold.
    pub fn parse_path(path: &str) -> Result<Self, TlogError> {
        Self::parse_fields(path).ok_or_else(|| TlogError::MalformedTilePath(path.into()))
    }

    fn parse_fields(path: &str) -> Option<Self> {
        let rest = path.strip_prefix("tile/")?;
        let (height, rest) = rest.split_once('/')?;
        let (level, rest) = rest.split_once('/')?;
        let height: u8 = height.parse().ok().filter(|h| (1..=30).contains(h))?;
        let level = match level {
            "data" => TileLevel::Data,
            l => TileLevel::Hashes(l.parse().ok().filter(|l| *l < 64)?),
        };
        let (number, width) = match rest.split_once(".p/") {
            Some((n, w)) => (n, w.parse().ok().filter(|w| (1..1u32 << height).contains(w))?),
            None => (rest, 1 << height),
        };
        let mut n: u64 = 0;
        for element in number.split('/') {
            let digits: u64 = element.trim_start_matches('x').parse().ok().filter(|d| *d < 1000)?;
            n = n.checked_mul(1000)?.checked_add(digits)?;
        }
        // The records under the tile must fit a log's (i64) record ids.
        let tree_level = match level {
            TileLevel::Hashes(l) => u32::from(l) * u32::from(height),
            TileLevel::Data => 0,
        };
        let leaves = n.checked_add(1).and_then(|n| n.checked_mul(1u64.checked_shl(tree_level + u32::from(height))?))?;
        let tile = Self { height, level, number: n, width };
        (leaves <= 1 << 62 && tile.path() == path).then_some(tile)
    }

    /// The narrowest tile of this height holding stored hash `index`.
    pub fn for_stored_index(height: u8, index: u64) -> Self {
        Self::locate(height, index).0
    }

    /// The narrowest tile holding stored hash `index`, and the entries of the tile's bottom
    /// level whose subtree the hash is the root of.
    fn locate(height: u8, index: u64) -> (Self, Range<usize>) {
        let (level, n) = split_stored_hash_index(index);
        let tile_level = level / height;
        let above = level - tile_level * height;
        let first = n << above;
        let number = first >> height;
        let start = (first - (number << height)) as usize;
        let end = start + (1 << above);
        (Self { height, level: TileLevel::Hashes(tile_level), number, width: end as u32 }, start..end)
    }

    /// Whether a log of `size` records has this tile, at least this wide.
    pub fn is_within(&self, size: u64) -> bool {
        self.range().end <= size >> self.tree_level()
    }

    /// The stored hashes a hash tile lists, in order (for a data tile, its records' leaf hashes).
    pub fn hash_indexes(&self) -> Vec<u64> {
        let level = self.tree_level();
        self.range().map(|n| stored_hash_index(level, n)).collect()
    }

    /// A hash tile's bytes: its hashes, read at [`Tile::hash_indexes`], concatenated.
    pub fn hash_tile(&self, read: &[Hash]) -> Result<Vec<u8>, TlogError> {
        let expected = self.width as usize;
        if read.len() != expected {
            return Err(TlogError::HashCount { expected, got: read.len() });
        }
        Ok(read.iter().flat_map(|h| h.0).collect())
    }

    /// A data tile's bytes: each of its records, from id `range().start` on, as
    /// [`format_record`] writes it.
    pub fn data_tile<'a>(&self, records: impl IntoIterator<Item = &'a str>) -> Result<Vec<u8>, TlogError> {
        let records: Vec<&str> = records.into_iter().collect();
        if records.len() != self.width as usize {
            return Err(TlogError::RecordCount { expected: self.width.into(), got: records.len() as u64 });
        }
        let mut out = String::new();
        for (id, text) in self.range().zip(records) {
            out.push_str(&format_record(id, text)?);
        }
        Ok(out.into_bytes())
    }

    /// Stored hash `index`, from this hash tile's bytes: the tile must be
    /// [`Tile::for_stored_index`] or a wider version of it.
    pub fn hash_from_data(&self, data: &[u8], index: u64) -> Result<Hash, TlogError> {
        let expected = self.width as usize * HASH_SIZE;
        if data.len() < expected {
            return Err(TlogError::ShortTile { tile: self.path(), expected, got: data.len() });
        }
        let (narrow, entries) = Self::locate(self.height, index);
        if self.level != narrow.level || self.number != narrow.number || self.width < narrow.width {
            return Err(TlogError::NotInTile { index, tile: self.path() });
        }
        Ok(root_of_entries(&data[entries.start * HASH_SIZE..entries.end * HASH_SIZE]))
    }
}

/// The root over a power-of-two run of concatenated hashes.
fn root_of_entries(data: &[u8]) -> Hash {
    if data.len() <= HASH_SIZE {
        let mut h = Hash::default();
        h.0[..data.len()].copy_from_slice(data);
        return h;
    }
    let (left, right) = data.split_at(data.len() / 2);
    node_hash(&root_of_entries(left), &root_of_entries(right))
}

/// The tiles of this height to publish when a log grows from `old_size` to `new_size` records:
/// the tiles completed since, and each level's partial tile at its new width.
pub fn new_tiles(height: u8, old_size: u64, new_size: u64) -> Vec<Tile> {
    let mut tiles = Vec::new();
    for level in (0u8..).take_while(|l| u32::from(*l) * u32::from(height) < 64) {
        let shift = u32::from(level) * u32::from(height);
        let (old_n, new_n) = (old_size >> shift, new_size >> shift);
        if new_n == 0 {
            break;
        }
        if old_n == new_n {
            continue;
        }
        let tile = |number, width| Tile { height, level: TileLevel::Hashes(level), number, width };
        for number in (old_n >> height)..(new_n >> height) {
            tiles.push(tile(number, 1 << height));
        }
        let number = new_n >> height;
        let width = (new_n - (number << height)) as u32;
        if width > 0 {
            tiles.push(tile(number, width));
        }
    }
    tiles
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962's Merkle tree hash, straight from its definition.
    fn merkle(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => Hash::default(),
            1 => leaves[0],
            n => {
                let k = 1 << log2_floor(n as u64 - 1);
                node_hash(&merkle(&leaves[..k]), &merkle(&leaves[k..]))
            }
        }
    }

    fn read(stored: &[Hash], indexes: &[u64]) -> Vec<Hash> {
        indexes.iter().map(|&i| stored[i as usize]).collect()
    }

    /// A log of `size` records `leaf <i>`, appended one by one; its stored hashes and leaves.
    fn build(size: u64) -> Result<(Vec<Hash>, Vec<Hash>), TlogError> {
        let (mut stored, mut leaves) = (Vec::new(), Vec::new());
        for n in 0..size {
            let leaf = record_hash(format!("leaf {n}").as_bytes());
            let reads = indexes_for_append(n);
            assert!(reads.windows(2).all(|w| w[0] < w[1]), "reads in increasing order");
            assert_eq!(stored.len() as u64, stored_hash_count(n));
            stored.extend(hashes_for_append(n, leaf, &read(&stored, &reads))?);
            leaves.push(leaf);
        }
        Ok((stored, leaves))
    }

    #[test]
    fn hashes_are_rfc6962() {
        assert_eq!(
            record_hash(b"hello world").to_base64(),
            "TszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=",
            "x/mod tlog's FormatTree vector"
        );
        let (a, b) = (record_hash(b"a"), record_hash(b"b"));
        let mut input = vec![1u8];
        input.extend(a.0);
        input.extend(b.0);
        assert_eq!(node_hash(&a, &b).0, <[u8; 32]>::from(Sha256::digest(&input)));
    }

    #[test]
    fn stored_hash_layout() {
        // Record 0: leaf; 1: leaf, (1,0); 2: leaf; 3: leaf, (1,1), (2,0); 4: leaf.
        let expected = [(0, 0, 0), (0, 1, 1), (1, 0, 2), (0, 2, 3), (0, 3, 4), (1, 1, 5), (2, 0, 6), (0, 4, 7)];
        for (level, n, index) in expected {
            assert_eq!(stored_hash_index(level, n), index, "({level}, {n})");
        }
        for level in 0..10 {
            for n in 0..100 {
                assert_eq!(split_stored_hash_index(stored_hash_index(level, n)), (level, n));
            }
        }
        assert_eq!(indexes_for_append(0), Vec::<u64>::new());
        assert_eq!(indexes_for_append(3), vec![stored_hash_index(1, 0), stored_hash_index(0, 2)]);
        assert_eq!(hashes_for_append(3, Hash::default(), &[]), Err(TlogError::HashCount { expected: 2, got: 0 }));
    }

    #[test]
    fn tree_hash_matches_a_recursive_merkle_tree() -> Result<(), TlogError> {
        let (stored, leaves) = build(1000)?;
        assert_eq!(stored.len() as u64, stored_hash_count(1000));
        assert_eq!(tree_hash(0, &[])?, Hash::default());
        for size in (1..=20).chain([31, 32, 33, 255, 256, 257, 511, 512, 513, 767, 999, 1000]) {
            let indexes = indexes_for_tree_hash(size);
            assert_eq!(indexes.len() as u32, size.count_ones());
            assert_eq!(tree_hash(size, &read(&stored, &indexes))?, merkle(&leaves[..size as usize]), "size {size}");
        }
        // Every stored node is the RFC 6962 hash of the records under it.
        for (index, hash) in stored.iter().enumerate() {
            let (level, n) = split_stored_hash_index(index as u64);
            let span = 1usize << level;
            assert_eq!(*hash, merkle(&leaves[n as usize * span..(n as usize + 1) * span]), "index {index}");
        }
        assert_eq!(tree_hash(3, &[]), Err(TlogError::HashCount { expected: 2, got: 0 }));
        Ok(())
    }

    #[test]
    fn tile_paths() {
        // x/mod tlog's examples.
        let hashes = |height, level, number, width| Tile { height, level: TileLevel::Hashes(level), number, width };
        for (path, tile) in [
            ("tile/4/0/001", hashes(4, 0, 1, 16)),
            ("tile/4/0/001.p/5", hashes(4, 0, 1, 5)),
            ("tile/3/5/x123/x456/078", hashes(3, 5, 123_456_078, 8)),
            ("tile/3/5/x123/x456/078.p/2", hashes(3, 5, 123_456_078, 2)),
            ("tile/1/0/x003/x057/500", hashes(1, 0, 3_057_500, 2)),
            ("tile/1/data/x003/x057/500", Tile { height: 1, level: TileLevel::Data, number: 3_057_500, width: 2 }),
            ("tile/8/1/x001/x234/067.p/1", hashes(8, 1, 1_234_067, 1)),
            ("tile/8/0/000", hashes(8, 0, 0, 256)),
            ("tile/8/data/002.p/255", Tile { height: 8, level: TileLevel::Data, number: 2, width: 255 }),
        ] {
            assert_eq!(tile.path(), path);
            assert_eq!(Tile::parse_path(path), Ok(tile), "{path}");
        }
        for bad in [
            "tile/3/5/123/456/078",
            "tile/3/-1/123/456/078",
            "tile/8/0/1",
            "tile/8/0/x000/001",
            "tile/8/0/001.p/0",
            "tile/8/0/001.p/256",
            "tile/8/0/001.p/05",
            "tile/08/0/001",
            "tile/0/0/001",
            "tile/31/0/001",
            "tile/8/64/000",
            "tile/8/0/",
            "tile/8/0/xx001/002",
            "/tile/8/0/000",
            "tile/8/data",
            "tile/8/7/x999/x999/x999/x999/x999/x999/999",
            "tile/8/7/001",
            "tile/30/63/000",
        ] {
            assert_eq!(Tile::parse_path(bad), Err(TlogError::MalformedTilePath(bad.into())), "{bad}");
        }
    }

    #[test]
    fn tiles_read_back() -> Result<(), TlogError> {
        let (stored, leaves) = build(1000)?;
        let tile_bytes = |tile: &Tile| tile.hash_tile(&read(&stored, &tile.hash_indexes()));

        let full = Tile::parse_path("tile/8/0/001")?;
        let bytes = tile_bytes(&full)?;
        assert_eq!(bytes.len(), 256 * HASH_SIZE);
        assert_eq!(bytes, leaves[256..512].iter().flat_map(|h| h.0).collect::<Vec<_>>());

        // 1000 = 3·256 + 232: the last level-0 tile is partial, and level 1 has three hashes,
        // the roots of the full level-0 tiles.
        let partial = Tile::parse_path("tile/8/0/003.p/232")?;
        assert!(partial.is_within(1000) && !Tile::parse_path("tile/8/0/003.p/233")?.is_within(1000));
        assert!(!Tile::parse_path("tile/8/0/003")?.is_within(1000));
        assert_eq!(tile_bytes(&partial)?, leaves[768..].iter().flat_map(|h| h.0).collect::<Vec<_>>());
        let upper = Tile::parse_path("tile/8/1/000.p/3")?;
        assert!(upper.is_within(1000) && !Tile::parse_path("tile/8/1/000.p/4")?.is_within(1000));
        let upper_bytes = tile_bytes(&upper)?;
        for i in 0..3 {
            assert_eq!(upper_bytes[i * 32..(i + 1) * 32], merkle(&leaves[i * 256..(i + 1) * 256]).0);
        }
        assert_eq!(full.hash_tile(&[]), Err(TlogError::HashCount { expected: 256, got: 0 }));

        // Every stored hash can be read back from the narrowest tile holding it, or a wider one.
        for height in [2, 8] {
            for (index, hash) in stored.iter().enumerate() {
                let index = index as u64;
                let tile = Tile::for_stored_index(height, index);
                assert!(tile.is_within(1000), "{}", tile.path());
                assert_eq!(tile.hash_from_data(&tile_bytes(&tile)?, index)?, *hash, "{index} in {}", tile.path());
                let wide = Tile { width: tile.full_width(), ..tile };
                if wide.is_within(1000) {
                    assert_eq!(wide.hash_from_data(&tile_bytes(&wide)?, index)?, *hash);
                }
            }
        }
        let tile = Tile::for_stored_index(8, 5);
        assert!(matches!(tile.hash_from_data(&[0; 8], 5), Err(TlogError::ShortTile { .. })));
        assert!(matches!(full.hash_from_data(&bytes, 0), Err(TlogError::NotInTile { .. })));
        Ok(())
    }

    #[test]
    fn data_tiles_are_formatted_records() -> Result<(), TlogError> {
        let tile = Tile::parse_path("tile/8/data/001.p/2")?;
        assert_eq!(tile.range(), 256..258);
        assert_eq!(tile.hash_indexes(), vec![stored_hash_index(0, 256), stored_hash_index(0, 257)]);
        let bytes = tile.data_tile(["a b h1:x\na b/go.mod h1:y\n", "c d h1:z\nc d/go.mod h1:w\n"])?;
        assert_eq!(bytes, b"256\na b h1:x\na b/go.mod h1:y\n\n257\nc d h1:z\nc d/go.mod h1:w\n\n");
        assert_eq!(tile.data_tile(["x\n"]), Err(TlogError::RecordCount { expected: 2, got: 1 }));
        assert!(tile.data_tile(["x\n", "no newline"]).is_err());
        Ok(())
    }

    #[test]
    fn new_tiles_for_growth() {
        // x/mod tlog's TestNewTilesForSize (height 10).
        for (old, new, count) in
            [(1, 1, 0), (100, 101, 1), (1023, 1025, 3), (1024, 1030, 1), (1030, 2000, 1), (1030, 10000, 10)]
        {
            assert_eq!(new_tiles(10, old, new).len(), count, "{old} → {new}");
        }
        assert_eq!(new_tiles(10, 49_516_517, 49_516_586).len(), 3);
        let paths: Vec<String> = new_tiles(8, 255, 257).iter().map(Tile::path).collect();
        assert_eq!(paths, ["tile/8/0/000", "tile/8/0/001.p/1", "tile/8/1/000.p/1"]);
    }

    #[test]
    fn tree_notes() {
        // x/mod tlog's vectors.
        let text = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n";
        let tree = Tree { size: 123_456_789_012, hash: record_hash(b"hello world") };
        assert_eq!(tree.text(), text);
        assert_eq!(Tree::parse(text), Ok(tree));
        for extra in ["JOE", "JOE\n", &"JOE\n".repeat(1000)] {
            assert_eq!(Tree::parse(&format!("{text}{extra}")), Ok(tree));
        }
        for bad in [
            format!("not-{text}"),
            "go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n".into(),
            "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n".into(),
            "go.sum database tree\n0123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n".into(),
            "go.sum database tree\n123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=".into(),
        ] {
            assert_eq!(Tree::parse(&bad), Err(TlogError::MalformedTree), "{bad:?}");
        }
    }

    #[test]
    fn records() {
        // x/mod tlog's vectors.
        assert_eq!(format_record(123_456_789_012, "hello, world\n").as_deref(), Ok("123456789012\nhello, world\n\n"));
        for bad in ["", "hello\nworld", "hello\n\nworld\n", "hello\x01world\n"] {
            assert!(format_record(1, bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_record("123456789012\nhello, world\n\njunk on end\x01\u{ff}"),
            Ok((123_456_789_012, "hello, world\n", "junk on end\x01\u{ff}"))
        );
        assert_eq!(parse_record("123456789012\nhello, world\n\n"), Ok((123_456_789_012, "hello, world\n", "")));
        for bad in ["not-123\nhello\n\n", "123\nhello\x01world\n\n", "123\nhello world\n", "0x123\nhello world\n\n"] {
            assert!(parse_record(bad).is_err(), "{bad:?}");
        }
    }
}
