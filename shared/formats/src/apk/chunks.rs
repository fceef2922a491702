//! Incremental `APKINDEX.tar.gz` (#22): a hosted unit's records are kept as chunks of at most
//! [`CHUNK_ROWS`] rows in id order, each chunk's records deflated on their own and stored as a
//! blob, and the published index is a composite of the signature member with the index member's
//! head (its gzip header and the tar up to the `APKINDEX` header, which holds the size), the
//! chunks, and its tail (the tar's end, the final deflate block, the gzip trailer): one gzip
//! member, as apk reads it ([`packyard_codecs::apk::index::Piece`]). A build remembers its
//! chunks, and the next build of the unit deflates again only those whose rows changed — an
//! upload adds a row after the last id, so only the last chunk — while the SHA-1 that the
//! signature covers is taken over the compressed bytes, a quarter of the text's.
//!
//! Which chunks changed: the unit's ids are read (the index `(repository_id, unit_key, id)`,
//! no records), and a chunk whose count or sum of ids in its range differs from what it holds
//! is rendered again; rows are never changed in place (a new upload of a path is a new row).
//! What a build remembers lives in the worker's memory; a build that finds the unit's current
//! index is not the one it remembers builds every chunk.
//!
//! A group's index is assembled the same way from its members' contributions, each member's
//! merged records in chunks of their own (`group.rs`, [`Contribution`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use packyard_codecs::apk::index::{self as codec, Piece};
use packyard_codecs::apk::signing::ApkKey;
use packyard_core::publication::{BuildContext, BuildError};
use packyard_store::blobs::Sha256Hex;
use sha1::Digest as _;

/// How many hosted units and group units a builder remembers.
const HOSTED_UNITS: usize = 256;
const MERGES: usize = 32;

/// Rows per chunk (a few hundred KiB of records).
pub(crate) const CHUNK_ROWS: usize = 1000;

/// One chunk as published: ids `(previous chunk's last_id, last_id]`.
#[derive(Clone)]
struct Chunk {
    last_id: i64,
    count: usize,
    id_sum: i128,
    /// The deflated records: (SHA-256, size) of the blob, and the records' CRC-32 and length.
    part: (String, i64),
    crc: u32,
    len: u64,
    /// A group's chunk: the SHA-256 of its records' text (by which the next merge takes it
    /// again).
    text: Option<[u8; 32]>,
}

#[derive(Clone)]
struct Remembered {
    /// The published file's part list digest (which tells whether it is still the current one).
    list: String,
    chunks: Vec<Chunk>,
}

/// What the builder remembers of the indexes it built, by repository and unit, and of the
/// group indexes it merged, by group and unit.
#[derive(Clone, Default)]
pub struct Memory(Arc<Mutex<HashMap<(i64, String), Remembered>>>, Arc<Mutex<HashMap<(i64, String), Merged>>>);

/// One member's records in a group's index, as a merge left them
/// ([`packyard_core::groups::incremental`]).
pub(crate) type Contribution = packyard_core::groups::incremental::Contribution<Kept>;

/// What a merge keeps of a member's contribution: its chunks, and the `.members` entries of the
/// records in them.
#[derive(Clone, Default)]
pub(crate) struct Kept {
    chunks: Vec<Chunk>,
    pub(crate) provided: Vec<(String, String)>,
}

/// A group's index as a merge left it.
#[derive(Clone)]
struct Merged {
    list: String,
    members: Vec<String>,
    emitted: Vec<Contribution>,
}

impl Memory {
    /// The contributions of the group's last merge of `unit`, if that merge is the one
    /// published (`current`: its part list digest) and the members are the same (by name, in
    /// order).
    pub(crate) fn recall_merge(
        &self,
        group: i64,
        unit: &str,
        current: Option<&str>,
        members: &[String],
    ) -> Vec<Contribution> {
        let Ok(m) = self.1.lock() else { return Vec::new() };
        m.get(&(group, unit.to_string()))
            .filter(|r| Some(r.list.as_str()) == current && r.members == members)
            .map(|r| r.emitted.clone())
            .unwrap_or_default()
    }

    /// The chunks of the group's last merge of `unit`, if that merge is the one published, by
    /// their text's SHA-256 (whoever the members are now).
    pub(crate) fn reusable(&self, group: i64, unit: &str, current: Option<&str>) -> Reusable {
        let Ok(m) = self.1.lock() else { return Reusable::default() };
        let Some(r) = m.get(&(group, unit.to_string())).filter(|r| Some(r.list.as_str()) == current) else {
            return Reusable::default();
        };
        let chunks = r.emitted.iter().flat_map(|c| &c.kept.chunks);
        Reusable(chunks.filter_map(|c| Some((c.text?, c.clone()))).collect())
    }
}

/// A group's stored chunks by the SHA-256 of their text.
#[derive(Default)]
pub(crate) struct Reusable(HashMap<[u8; 32], Chunk>);

/// A member's records in a group's index are cut into chunks where the records' SHA-256 says
/// (`incremental::Cuts`), of at least [`MIN_ROWS`] and at most [`MAX_ROWS`] records: the
/// next merge finds most of a changed member's chunks already stored ([`Reusable`]).
const MIN_ROWS: usize = CHUNK_ROWS / 2;
const MAX_ROWS: usize = CHUNK_ROWS * 2;
/// The least and most records of a piece of a member's last, open chunk (`incremental::Cuts`).
const TAIL_ROWS: (usize, usize) = (100, 400);

/// A member's records (each ending with a blank line) as chunks cut where the records' hashes
/// say (between [`MIN_ROWS`] and [`MAX_ROWS`]), those of `reusable` taken again, the others
/// stored; `provided`: the `.members` entries of
/// those records.
pub(crate) async fn contribution_chunks(
    ctx: &mut BuildContext<'_>,
    records: &[&str],
    provided: Vec<(String, String)>,
    reusable: &Reusable,
) -> Result<Kept, BuildError> {
    let mut cuts = packyard_core::groups::incremental::Cuts::new((MIN_ROWS, MAX_ROWS), TAIL_ROWS);
    // Where each chunk ends (in records), the open chunk's pieces last.
    let mut ends = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let digest = || {
            let d = sha2::Sha256::digest(record.as_bytes());
            let mut b = [0u8; 16];
            b.copy_from_slice(&d[..16]);
            // Little-endian: the chunk cut reads the first byte (as before pieces), a piece's the next.
            u128::from_le_bytes(b)
        };
        if cuts.after(1, digest) {
            ends.push(i + 1);
        }
    }
    let open = ends.last().copied().unwrap_or(0);
    ends.extend(cuts.pieces().into_iter().map(|e| open + e));
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in ends {
        let text = records.get(start..end).unwrap_or_default().concat();
        let n = end - start;
        start = end;
        let sha: [u8; 32] = sha2::Sha256::digest(text.as_bytes()).into();
        let chunk = match reusable.0.get(&sha) {
            Some(kept) => kept.clone(),
            None => Chunk { text: Some(sha), ..store_chunk(ctx, text, (0, n, 0)).await? },
        };
        chunks.push(chunk);
    }
    Ok(Kept { chunks, provided })
}

/// Signs and adds a group's merged index (`path`) of the `emitted` contributions in order, and
/// remembers the merge.
pub(crate) async fn publish_merge(
    ctx: &mut BuildContext<'_>,
    memory: &Memory,
    (group, unit, path): (i64, &str, &str),
    (members, emitted): (Vec<String>, Vec<Contribution>),
    signing: &Signing<'_>,
) -> Result<(), BuildError> {
    let chunks: Vec<Chunk> = emitted.iter().flat_map(|c| c.kept.chunks.iter().cloned()).collect();
    let list = publish(ctx, path, &chunks, signing).await?;
    if let Ok(mut m) = memory.1.lock() {
        packyard_core::groups::incremental::remember(
            &mut m,
            (group, unit.to_string()),
            Merged { list, members, emitted },
            MERGES,
        );
    }
    Ok(())
}

/// How the index is signed and described.
pub(crate) struct Signing<'a> {
    /// The keys that sign (the current one, and during a rotation's overlap the one it was added
    /// beside) and the file names clients keep them under.
    pub keys: &'a [(ApkKey, String)],
    pub description: &'a str,
    pub mtime: u64,
}

/// Builds and adds the hosted unit's `path` (its `APKINDEX.tar.gz`) from its rows, reusing the
/// chunks of the last build when the unit's current file is that build's (`current`: its part
/// list digest).
pub(crate) async fn build(
    ctx: &mut BuildContext<'_>,
    memory: &Memory,
    (repo, unit_key, path): (i64, &str, &str),
    current: Option<&str>,
    signing: &Signing<'_>,
) -> Result<(), BuildError> {
    let key = (repo, unit_key.to_string());
    let previous = memory
        .0
        .lock()
        .ok()
        .and_then(|m| m.get(&key).cloned())
        .filter(|r| Some(r.list.as_str()) == current)
        .map(|r| r.chunks)
        .unwrap_or_default();
    let ids = crate::apk::rows::unit_ids(ctx.db, repo, unit_key).await?;
    let in_range = |lower: i64, upper: i64| {
        let (from, to) = (ids.partition_point(|i| *i <= lower), ids.partition_point(|i| *i <= upper));
        &ids[from..to]
    };
    let mut chunks: Vec<Chunk> = Vec::with_capacity(previous.len() + 1);
    let mut lower = 0;
    for (i, was) in previous.iter().enumerate() {
        let last = i + 1 == previous.len();
        let upper = if last { i64::MAX } else { was.last_id };
        let now = in_range(lower, upper);
        if now.len() == was.count && now.iter().map(|i| i128::from(*i)).sum::<i128>() == was.id_sum {
            chunks.push(was.clone());
        } else if last {
            render(ctx, (repo, unit_key), now, &mut chunks).await?;
        } else {
            // Rows go from a chunk before the last (or one that committed late joins it):
            // its range stays as it was.
            let mut pieces = Vec::new();
            render(ctx, (repo, unit_key), now, &mut pieces).await?;
            if let Some(last) = pieces.last_mut() {
                last.last_id = was.last_id;
            }
            chunks.extend(pieces);
        }
        lower = was.last_id;
    }
    if previous.is_empty() {
        render(ctx, (repo, unit_key), &ids, &mut chunks).await?;
    }
    let list = publish(ctx, path, &chunks, signing).await?;
    if let Ok(mut m) = memory.0.lock() {
        packyard_core::groups::incremental::remember(&mut m, key, Remembered { list, chunks }, HOSTED_UNITS);
    }
    Ok(())
}

/// Renders the rows of `ids` (ascending) as chunks of [`CHUNK_ROWS`], appended to `out`.
async fn render(
    ctx: &mut BuildContext<'_>,
    (repo, unit_key): (i64, &str),
    ids: &[i64],
    out: &mut Vec<Chunk>,
) -> Result<(), BuildError> {
    for group in ids.chunks(CHUNK_ROWS) {
        let (first, last) = (group[0], group[group.len() - 1]);
        let rows = crate::apk::rows::unit_range(ctx.db, repo, unit_key, (first - 1, last)).await?;
        let mut text = String::with_capacity(rows.iter().map(|r| r.record.len() + 1).sum());
        for r in &rows {
            text.push_str(&r.record);
            text.push('\n');
        }
        let id_sum = rows.iter().map(|r| i128::from(r.id)).sum();
        out.push(store_chunk(ctx, text, (rows.last().map_or(last, |r| r.id), rows.len(), id_sum)).await?);
    }
    Ok(())
}

/// Deflates and stores one chunk's records: `(last_id, count, id_sum)` are what it holds.
async fn store_chunk(
    ctx: &mut BuildContext<'_>,
    text: String,
    (last_id, count, id_sum): (i64, usize, i128),
) -> Result<Chunk, BuildError> {
    // Read back as apk will read it: a record apk cannot parse is never published.
    if let Err((record, why)) = packyard_codecs::apk::index::check_records(&text) {
        return Err(BuildError::Refused {
            reason: "apk_index",
            message: format!("apk could not read the index record of {record}: {why}; delete or replace that package"),
        });
    }
    let piece = deflate(text.into_bytes(), false).await?;
    let mut sink = ctx.file(".parts/new", "application/octet-stream").await?;
    sink.write(&piece.bytes).await?;
    let part = ctx.part(sink).await?;
    Ok(Chunk { last_id, count, id_sum, part, crc: piece.crc, len: piece.len, text: None })
}

async fn deflate(data: Vec<u8>, last: bool) -> Result<Piece, BuildError> {
    packyard_core::publication::work::spawn_blocking(move || codec::deflate_piece(&data, last))
        .await
        .map_err(|e| BuildError::Other(e.to_string()))?
        .map_err(|e| BuildError::Other(format!("compressing the index: {e}")))
}

/// Signs and adds the index of `chunks`: the signature member and the index member's head as
/// one part, the chunks, the tail as another. Returns the file's part list digest.
async fn publish(
    ctx: &mut BuildContext<'_>,
    path: &str,
    chunks: &[Chunk],
    signing: &Signing<'_>,
) -> Result<String, BuildError> {
    let other = |e: &dyn std::fmt::Display| BuildError::Other(format!("the index: {e}"));
    let len: u64 = chunks.iter().map(|c| c.len).sum();
    let head = codec::index_head(signing.description, len, signing.mtime).map_err(|e| other(&e))?;
    let head = deflate(head, false).await?;
    let tail = deflate(codec::index_tail(len), true).await?;
    let pieces = std::iter::once((head.crc, head.len))
        .chain(chunks.iter().map(|c| (c.crc, c.len)))
        .chain(std::iter::once((tail.crc, tail.len)));
    let mut back = tail.bytes.clone();
    back.extend_from_slice(&codec::gzip_trailer(pieces));
    let mut front = codec::GZIP_HEADER.to_vec();
    front.extend_from_slice(&head.bytes);
    // The signature covers the index member: its bytes hashed in order, the chunks read back.
    let mut sha1 = sha1::Sha1::new();
    sha1.update(&front);
    for c in chunks {
        let bytes = ctx.blobs().read_all(&Sha256Hex::parse(&c.part.0)?).await?;
        sha1.update(&bytes);
    }
    sha1.update(&back);
    let signature =
        codec::signature_member_of_digest_all(&sha1.finalize(), signing.keys, signing.mtime).map_err(|e| other(&e))?;
    let mut first = signature;
    first.extend_from_slice(&front);
    let mut parts = Vec::with_capacity(chunks.len() + 2);
    for (i, bytes) in [first, back].into_iter().enumerate() {
        let mut sink = ctx.file(".parts/new", "application/octet-stream").await?;
        sink.write(&bytes).await?;
        let part = ctx.part(sink).await?;
        if i == 0 {
            parts.push(part);
            parts.extend(chunks.iter().map(|c| c.part.clone()));
        } else {
            parts.push(part);
        }
    }
    ctx.composite(path, "application/gzip", &parts).await
}
