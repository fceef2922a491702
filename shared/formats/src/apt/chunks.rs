//! Incremental index files (#22): a hosted repository's `Packages` and `Sources` are kept as
//! chunks of at most [`CHUNK_ROWS`] rows in id order, each chunk's text, gzip member and xz
//! block a blob of its own, and the published files are composites of those parts (gzip members
//! may follow one another in one file, and apt and zlib read them as one; apt reads one xz stream
//! only, so the xz file is one stream of blocks, its header and its index of the blocks written
//! per build: [`xz`]). A build
//! remembers its chunks, and the next build of the unit re-renders only those whose rows changed:
//! one upload adds rows after the last id, so it re-renders the last chunk alone. The `Release`
//! hashes of a whole file continue from the hash state saved after the last unchanged chunk, so
//! an append hashes one chunk, not the file.
//!
//! Which rows changed is not found by reading the index's rows: every write that changes what a
//! distribution lists notes the member in `apt_index_changes` in its own transaction
//! (`rows.rs`), and a build marks the chunks whose id range holds a noted member (a member past
//! the last chunk is rendered with it). A published build's notes are forgotten at the unit's
//! next build, which then sees only what came after.
//!
//! What a build remembers lives in the worker's memory; a build that finds the unit's current
//! snapshot is not the one it remembers (another worker published it, the process restarted)
//! builds every chunk again.
//!
//! A group's index is kept the same way, as each member's contribution in chunks of 1–3 MiB
//! cut where the stanzas' keys say ([`Contribution`], `group.rs`): a merge reads again only the
//! members whose index changed (and those a change ahead of them shadows or unshadows), lists
//! their chunks after the kept ones, whose hash states then carry on, and takes again every
//! chunk whose text the last merge stored ([`Reuse`]).
//!
//! Chunks are compressed side by side ([`Compressing`]); a heavy unit's compression runs on
//! threads of a lower priority (`packyard_core::publication::work`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::index::{blocking, other, xz, Hashed, Hashers, IndexId, TEXT, XZ_KEPT, XZ_OPEN};
use crate::apt::rows::Member;
use packyard_core::publication::{BuildContext, BuildError};
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::Db;

/// How many hosted indexes and group indexes a builder remembers (a group's holds its members'
/// key digests, 16 bytes a package).
const HOSTED_INDEXES: usize = 256;
const MERGES: usize = 32;

/// Rows per chunk: about a MiB of `Packages` text, so that re-rendering the last chunk costs a
/// few milliseconds of compression.
pub(crate) const CHUNK_ROWS: i64 = 1000;

/// The three forms of an index, in the order of every array here: plain, gzip, xz.
const FORMS: [(&str, &str); 3] = [("", TEXT), (".gz", "application/gzip"), (".xz", "application/x-xz")];

/// One chunk as published: ids `(previous chunk's last_id, last_id]` (a group's chunks have no
/// ids).
#[derive(Clone)]
pub(crate) struct Chunk {
    last_id: i64,
    count: i64,
    /// Each form's part: (SHA-256, size); the xz form's is a block ([`xz`]).
    parts: [(String, i64); 3],
    /// The xz block's record for the stream's index (`None`: no text, no block).
    xz: Option<xz::Record>,
    /// Each form's whole-file hash state after this chunk.
    pub(crate) after: [Hashers; 3],
}

/// An index as a build left it.
#[derive(Clone)]
struct Remembered {
    /// The part lists of the three files (which tell whether the unit's current snapshot is
    /// this build's).
    lists: [String; 3],
    chunks: Vec<Chunk>,
}

/// What the builder remembers of the indexes it built, by repository and index path, and of the
/// noted changes each unit's last build consumed, by repository and distribution; and of the
/// indexes of groups it merged, by group and index path.
#[derive(Clone, Default)]
pub struct Memory(
    Arc<Mutex<HashMap<(i64, String), Remembered>>>,
    Arc<Mutex<HashMap<(i64, String), Consumed>>>,
    Arc<Mutex<HashMap<(i64, String), Merged>>>,
);

/// One member's stanzas in a group's index, as a merge left them: its chunks.
pub(crate) type Contribution = packyard_core::groups::incremental::Contribution<Vec<Chunk>>;

/// A group's index as a merge left it: its members in order, and their contributions in the
/// order the index lists them (which need not be the members' order: a stanza is listed once,
/// from the first member that has it, and apt does not care where).
#[derive(Clone)]
pub(crate) struct Merged {
    lists: [String; 3],
    pub(crate) members: Vec<String>,
    pub(crate) emitted: Vec<Contribution>,
}

/// The ids of the `apt_index_changes` notes a build read, as runs of consecutive ids.
type Consumed = Vec<(i64, i64)>;

/// The rows of one index, as a chunked build reads them.
#[async_trait]
pub(crate) trait IndexRows: Send + Sync {
    /// Renders up to `limit` rows with ids in `(after, upto]`, in id order, onto `text`;
    /// returns the ids rendered (empty: none left in the range).
    async fn render(
        &self,
        db: &Db,
        after: i64,
        upto: i64,
        limit: i64,
        text: &mut String,
    ) -> Result<Vec<i64>, BuildError>;
}

/// What changed since the remembered build.
enum Plan {
    /// Nothing: every chunk is reused.
    Same,
    /// Per remembered chunk whether its rows changed; rows after the last chunk render with it
    /// (so rows only added after it render the last chunk alone).
    Changed(Vec<bool>),
    /// Nothing usable remembered: every chunk is rendered.
    Everything,
}

impl Memory {
    fn recall(&self, repo: i64, path: &str, current: &HashMap<String, String>) -> Option<Remembered> {
        let r = self.0.lock().ok()?.get(&(repo, path.to_string())).cloned()?;
        let published = FORMS
            .iter()
            .zip(&r.lists)
            .all(|((ext, _), list)| current.get(&format!("{path}{ext}")).is_some_and(|sha| sha == list));
        published.then_some(r)
    }

    /// The group index `path` as this builder last merged it, if that merge is the one
    /// published (`current`: the group's current composite files).
    pub(crate) fn recall_merge(&self, group: i64, path: &str, current: &HashMap<String, String>) -> Option<Merged> {
        let m = self.2.lock().ok()?.get(&(group, path.to_string())).cloned()?;
        let published = FORMS
            .iter()
            .zip(&m.lists)
            .all(|((ext, _), list)| current.get(&format!("{path}{ext}")).is_some_and(|sha| sha == list));
        published.then_some(m)
    }

    fn remember(&self, repo: i64, path: &str, r: Remembered) {
        if let Ok(mut m) = self.0.lock() {
            packyard_core::groups::incremental::remember(&mut m, (repo, path.to_string()), r, HOSTED_INDEXES);
        }
    }

    /// Whether the unit's current snapshot is the last one this builder built: every index of
    /// `dist` it remembers is the one published (a build that failed half-way remembers some
    /// indexes that were not).
    fn published(&self, repo: i64, dist: &str, current: &HashMap<String, String>) -> bool {
        let prefix = format!("dists/{dist}/");
        let Ok(m) = self.0.lock() else { return false };
        let mut mine = m.iter().filter(|((r, path), _)| *r == repo && path.starts_with(&prefix)).peekable();
        mine.peek().is_some()
            && mine.all(|((_, path), remembered)| {
                FORMS
                    .iter()
                    .zip(&remembered.lists)
                    .all(|((ext, _), list)| current.get(&format!("{path}{ext}")).is_some_and(|sha| sha == list))
            })
    }

    /// What changed in hosted distribution `dist` since this builder's last build of it: the
    /// ids of the packages and of the source packages noted since. The notes that build
    /// consumed are forgotten once it is the published one (else they stay pending); the notes
    /// read now are this build's, read in pages (a bulk import may have noted a million) and
    /// kept as runs of consecutive ids.
    pub(crate) async fn changes(
        &self,
        db: &Db,
        repo: i64,
        dist: &str,
        current: &HashMap<String, String>,
    ) -> Result<[Vec<i64>; 2], BuildError> {
        let key = (repo, dist.to_string());
        let consumed = self.1.lock().ok().and_then(|mut m| m.remove(&key)).unwrap_or_default();
        if !consumed.is_empty() && self.published(repo, dist, current) {
            crate::apt::rows::forget_index_changes(db, repo, dist, &consumed).await?;
        }
        let mut changed: [Vec<i64>; 2] = Default::default();
        let mut pending: Consumed = Vec::new();
        let mut after = 0;
        loop {
            let page = crate::apt::rows::index_changes_page(db, repo, dist, after, 10_000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for c in page {
                match pending.last_mut() {
                    Some((_, end)) if *end + 1 == c.seq => *end = c.seq,
                    _ => pending.push((c.seq, c.seq)),
                }
                match c.member {
                    Member::Package(id) => changed[0].push(id),
                    Member::Source(id) => changed[1].push(id),
                }
            }
        }
        if let Ok(mut m) = self.1.lock() {
            m.insert(key, pending);
        }
        Ok(changed)
    }
}

/// Builds one index (its three files, their by-hash names) from `rows`, reusing what the last
/// build of it left when the unit's current snapshot is that build's (`current`: the current
/// snapshot's composite files, path → part list); `changed`: the ids of the rows of the index's
/// kind noted as changed since that build (in any order, perhaps of other indexes too).
pub(crate) async fn build(
    ctx: &mut BuildContext<'_>,
    memory: &Memory,
    repo: i64,
    id: &IndexId<'_>,
    rows: &dyn IndexRows,
    (current, changed): (&HashMap<String, String>, &[i64]),
) -> Result<[Hashed; 3], BuildError> {
    let IndexId { dist, base, stem, .. } = *id;
    let path = format!("dists/{dist}/{base}/{stem}");
    let remembered = memory.recall(repo, &path, current);
    let previous = remembered.as_ref().map(|r| r.chunks.as_slice()).unwrap_or_default();
    let plan = match previous.last() {
        None => Plan::Everything,
        Some(_) if changed.is_empty() => Plan::Same,
        Some(_) => Plan::Changed(changed_chunks(previous, changed)),
    };
    if let (Plan::Same, Some(r)) = (&plan, &remembered) {
        return reuse(ctx, id, r);
    }
    // The first chunk to render, and which later ones changed.
    let (first, changed) = match plan {
        Plan::Same | Plan::Everything => (0, vec![true; previous.len()]),
        Plan::Changed(c) => (c.iter().position(|d| *d).unwrap_or(previous.len() - 1), c),
    };
    let mut chunks: Vec<Chunk> = previous[..first].to_vec();
    let mut hashers: [Hashers; 3] = chunks.last().map(|c| c.after.clone()).unwrap_or_else(start);
    let mut work = Compressing::default();
    for i in first..previous.len().max(1) {
        let lower = if i == 0 { 0 } else { previous[i - 1].last_id };
        let last = i + 1 >= previous.len();
        if last {
            // The last chunk and every row after it, in chunks of CHUNK_ROWS (an empty index is
            // one empty chunk). A full last chunk whose rows did not change stays as it is: the
            // rows after it start the next one.
            let mut after = lower;
            if let Some(full) = previous.get(i).filter(|p| !changed[i] && p.count >= CHUNK_ROWS) {
                // (Nothing is in flight: a changed range finishes its chunks before it ends.)
                debug_assert!(work.is_empty());
                let mut kept = full.clone();
                if i > first {
                    hashers = rehash(ctx, &kept, hashers).await?;
                    kept.after = hashers.clone();
                }
                hashers = kept.after.clone();
                after = kept.last_id;
                chunks.push(kept);
            }
            loop {
                let even_empty = chunks.is_empty() && work.is_empty();
                let Some(rendered) = render_chunk(ctx, rows, (after, i64::MAX), even_empty).await? else { break };
                let full = rendered.count >= CHUNK_ROWS;
                after = rendered.last_id;
                work.push(ctx, (&mut hashers, &mut chunks), rendered).await?;
                if !full {
                    break;
                }
            }
        } else if changed[i] {
            // Every row of its range, in chunks of CHUNK_ROWS: rows may also have joined it (a
            // package of an older id added to the distribution).
            let (mut after, upto) = (lower, previous[i].last_id);
            let first_new = chunks.len();
            while let Some(rendered) = render_chunk(ctx, rows, (after, upto), false).await? {
                let full = rendered.count >= CHUNK_ROWS;
                after = rendered.last_id;
                work.push(ctx, (&mut hashers, &mut chunks), rendered).await?;
                if !full {
                    break;
                }
            }
            work.finish(ctx, (&mut hashers, &mut chunks)).await?;
            // The range stays as it was, even when rows at its end went.
            if let Some(last) = chunks[first_new..].last_mut() {
                last.last_id = upto;
            }
        } else {
            debug_assert!(work.is_empty());
            let mut kept = previous[i].clone();
            hashers = rehash(ctx, &kept, hashers).await?;
            kept.after = hashers.clone();
            chunks.push(kept);
        }
    }
    work.finish(ctx, (&mut hashers, &mut chunks)).await?;
    let (lists, hashed) = publish_files(ctx, id, &chunks.iter().collect::<Vec<_>>(), hashers).await?;
    memory.remember(repo, &path, Remembered { lists, chunks });
    Ok(hashed)
}

/// Publishes a group's merged index: the contributions' chunks in `emitted` order (`hashers`:
/// the whole files' hash states after the last), as composites; remembers the merge.
pub(crate) async fn finish_merge(
    ctx: &mut BuildContext<'_>,
    memory: &Memory,
    (group, id): (i64, &IndexId<'_>),
    members: Vec<String>,
    mut emitted: Vec<Contribution>,
    mut hashers: [Hashers; 3],
) -> Result<[Hashed; 3], BuildError> {
    let IndexId { dist, base, stem, .. } = *id;
    let path = format!("dists/{dist}/{base}/{stem}");
    if emitted.iter().all(|c| c.kept.is_empty()) {
        // No member lists a thing: one empty chunk, so that the compressed forms are valid.
        let mut chunks = Vec::new();
        let mut work = Compressing::default();
        work.push(ctx, (&mut hashers, &mut chunks), Rendered::text(String::new())).await?;
        work.finish(ctx, (&mut hashers, &mut chunks)).await?;
        let chunk = chunks.pop().ok_or_else(|| BuildError::Other("no chunk of the empty index".into()))?;
        emitted.push(Contribution { member: 0, source: String::new(), offered: Arc::default(), kept: vec![chunk] });
    }
    let all: Vec<&Chunk> = emitted.iter().flat_map(|c| &c.kept).collect();
    let (lists, hashed) = publish_files(ctx, id, &all, hashers).await?;
    if let Ok(mut m) = memory.2.lock() {
        packyard_core::groups::incremental::remember(&mut m, (group, path), Merged { lists, members, emitted }, MERGES);
    }
    Ok(hashed)
}

/// The chunks of a group index's published merge, for the next merge to take again those
/// whose text comes again: a member's stanzas are cut into chunks where the stanzas say
/// (`group.rs`), so a member that changed a little makes mostly the chunks it made before, and
/// only the changed ones are compressed and stored.
#[derive(Default)]
pub(crate) struct Reuse {
    /// By the SHA-256 of their text: the chunk, and the marks of the hash states before it.
    by_text: HashMap<String, (Chunk, Marks)>,
}

impl Reuse {
    pub(crate) fn new(previous: &[Contribution]) -> Self {
        let mut by_text = HashMap::new();
        let mut before = marks(&start());
        for chunk in previous.iter().flat_map(|c| &c.kept) {
            by_text.insert(chunk.parts[0].0.clone(), (chunk.clone(), before));
            before = marks(&chunk.after);
        }
        Self { by_text }
    }

    /// Adds `text` (whole stanzas) to `work` as the next chunk of a group's index: the previous
    /// merge's chunk of that text if there is one, else a new one.
    pub(crate) async fn push(
        &self,
        ctx: &mut BuildContext<'_>,
        work: &mut Compressing,
        (hashers, out): (&mut [Hashers; 3], &mut Vec<Chunk>),
        text: String,
    ) -> Result<(), BuildError> {
        let sha = {
            use sha2::Digest as _;
            hex::encode(sha2::Sha256::digest(text.as_bytes()))
        };
        match self.by_text.get(&sha) {
            Some((chunk, before)) => {
                work.queue.push_back(Pending::Stored {
                    chunk: Box::new(chunk.clone()),
                    before: *before,
                    text: Arc::from(text),
                });
                work.limit(ctx, (hashers, out)).await
            }
            None => work.push(ctx, (hashers, out), Rendered::text(text)).await,
        }
    }
}

/// A chunk's text as rendered, before it is compressed.
pub(crate) struct Rendered {
    text: String,
    last_id: i64,
    count: i64,
    /// The xz preset of its block.
    preset: u32,
}

impl Rendered {
    /// Whole stanzas of a group's index (whose chunks have no ids).
    fn text(text: String) -> Self {
        let count = i64::try_from(text.matches("\n\n").count()).unwrap_or(i64::MAX);
        Self { text, last_id: 0, count, preset: XZ_KEPT }
    }
}

/// Chunks on their way to the store: each one's three forms are compressed on blocking threads
/// as soon as its text is known, the next chunks' beside it (as many as there are cores), and
/// finished in order — the whole files' hash states carried on, the parts stored — since each
/// file's hashes run through its chunks in order.
pub(crate) struct Compressing {
    queue: std::collections::VecDeque<Pending>,
    width: usize,
}

impl Default for Compressing {
    fn default() -> Self {
        static WIDTH: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let width = *WIDTH
            .get_or_init(|| std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).clamp(1, 8));
        Self { queue: Default::default(), width }
    }
}

enum Pending {
    /// A stored chunk taken again, and the marks of the hash states it followed.
    Stored { chunk: Box<Chunk>, before: Marks, text: Arc<str> },
    /// A new chunk being compressed.
    New { text: Arc<str>, last_id: i64, count: i64, forms: Forms },
}

type Unreadable = Option<(String, packyard_codecs::apt::fields::FieldError)>;

/// A new chunk's forms in the making: apt's reading of its text, its gzip member, its xz block.
struct Forms {
    check: tokio::task::JoinHandle<Unreadable>,
    gz: tokio::task::JoinHandle<std::io::Result<Vec<u8>>>,
    xz: tokio::task::JoinHandle<std::io::Result<(Vec<u8>, Option<xz::Record>)>>,
}

impl Compressing {
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Starts compressing `rendered`; finishes the oldest chunks while more than the cores are
    /// in flight (onto `out`, carrying `hashers`).
    async fn push(
        &mut self,
        ctx: &mut BuildContext<'_>,
        (hashers, out): (&mut [Hashers; 3], &mut Vec<Chunk>),
        rendered: Rendered,
    ) -> Result<(), BuildError> {
        let Rendered { text, last_id, count, preset } = rendered;
        let text: Arc<str> = Arc::from(text);
        let (t1, t2, t3) = (text.clone(), text.clone(), text.clone());
        let forms = Forms {
            // Read back as apt will read it, beside the compressions: an index apt cannot parse
            // fails `apt-get update` for every client of the repository and of its groups.
            check: packyard_core::publication::work::spawn_blocking(move || {
                packyard_codecs::apt::fields::check_index(&t1).err()
            }),
            gz: packyard_core::publication::work::spawn_blocking(move || {
                use std::io::Write as _;
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(t2.as_bytes())?;
                e.finish()
            }),
            xz: packyard_core::publication::work::spawn_blocking(move || xz::block(t3.as_bytes(), preset)),
        };
        self.queue.push_back(Pending::New { text, last_id, count, forms });
        self.limit(ctx, (hashers, out)).await
    }

    /// Finishes the oldest chunks while more than the cores are in flight.
    async fn limit(
        &mut self,
        ctx: &mut BuildContext<'_>,
        (hashers, out): (&mut [Hashers; 3], &mut Vec<Chunk>),
    ) -> Result<(), BuildError> {
        while self.queue.len() > self.width {
            self.finish_one(ctx, (hashers, out)).await?;
        }
        Ok(())
    }

    /// Finishes every chunk in flight.
    pub(crate) async fn finish(
        &mut self,
        ctx: &mut BuildContext<'_>,
        (hashers, out): (&mut [Hashers; 3], &mut Vec<Chunk>),
    ) -> Result<(), BuildError> {
        while !self.queue.is_empty() {
            self.finish_one(ctx, (hashers, out)).await?;
        }
        Ok(())
    }

    async fn finish_one(
        &mut self,
        ctx: &mut BuildContext<'_>,
        (hashers, out): (&mut [Hashers; 3], &mut Vec<Chunk>),
    ) -> Result<(), BuildError> {
        let Some(pending) = self.queue.pop_front() else { return Ok(()) };
        let chunk = match pending {
            Pending::Stored { mut chunk, before, text } => {
                if marks(hashers) != before {
                    // It follows other bytes than it did: the text is here, the compressed forms
                    // are read back.
                    let [plain, gz, xz] = std::mem::take(hashers);
                    let plain = hash_on(plain, Arc::<[u8]>::from(text)).await?;
                    let [_, gz, xz] = rehash_forms(ctx, &chunk, [Hashers::default(), gz, xz], 1).await?;
                    chunk.after = [plain, gz, xz];
                }
                *chunk
            }
            Pending::New { text, last_id, count, forms } => {
                if let Some((stanza, why)) = forms.check.await.map_err(other)? {
                    return Err(BuildError::Refused {
                        reason: "apt_index",
                        message: format!(
                            "apt could not read the index: the stanza of {stanza}: {why}; delete or replace that package"
                        ),
                    });
                }
                let gz: Arc<[u8]> = Arc::from(forms.gz.await.map_err(other)?.map_err(other)?);
                let (xz, record) = forms.xz.await.map_err(other)?.map_err(other)?;
                let xz: Arc<[u8]> = Arc::from(xz);
                let [plain_h, gz_h, xz_h] = std::mem::take(hashers);
                let text: Arc<[u8]> = text.into();
                let (plain_h, gz_h, xz_h) =
                    tokio::join!(hash_on(plain_h, text.clone()), hash_on(gz_h, gz.clone()), hash_on(xz_h, xz.clone()));
                let after = [plain_h?, gz_h?, xz_h?];
                let mut parts: [(String, i64); 3] = Default::default();
                for (form, bytes) in [&text, &gz, &xz].into_iter().enumerate() {
                    let mut sink = ctx.file(".parts/new", "application/octet-stream").await?;
                    sink.write(bytes).await?;
                    parts[form] = ctx.part(sink).await?;
                }
                Chunk { last_id, count, parts, xz: record, after }
            }
        };
        *hashers = chunk.after.clone();
        out.push(chunk);
        Ok(())
    }
}

/// `h` carried on over `bytes`, on a blocking thread.
async fn hash_on(mut h: Hashers, bytes: impl AsRef<[u8]> + Send + 'static) -> Result<Hashers, BuildError> {
    blocking(move || {
        h.update(bytes.as_ref());
        Ok(h)
    })
    .await
}

/// Carries the whole files' hashes over remembered chunks that now follow other bytes than they
/// did (their parts read back); their `after` states become the new ones.
pub(crate) async fn carry(
    ctx: &BuildContext<'_>,
    chunks: &mut [Chunk],
    mut hashers: [Hashers; 3],
) -> Result<[Hashers; 3], BuildError> {
    for chunk in chunks {
        hashers = rehash(ctx, chunk, hashers).await?;
        chunk.after = hashers.clone();
    }
    Ok(hashers)
}

/// Per remembered chunk, whether a changed row's id falls in its range (the chunks' ranges
/// follow one another: `(previous last_id, last_id]`).
fn changed_chunks(previous: &[Chunk], changed: &[i64]) -> Vec<bool> {
    let mut out = vec![false; previous.len()];
    for id in changed {
        let i = previous.partition_point(|c| c.last_id < *id);
        if let Some(mark) = out.get_mut(i) {
            *mark = true;
        }
    }
    out
}

/// The index exactly as the remembered build published it (the same part lists).
fn reuse(ctx: &mut BuildContext<'_>, id: &IndexId<'_>, r: &Remembered) -> Result<[Hashed; 3], BuildError> {
    let hashers: [Hashers; 3] = r.chunks.last().map(|c| c.after.clone()).unwrap_or_else(start);
    let IndexId { dist, base, stem, .. } = *id;
    let (parts, hashers, _) = layout(&r.chunks.iter().collect::<Vec<_>>(), hashers);
    for (form, (ext, content_type)) in FORMS.iter().enumerate() {
        ctx.reuse_composite(&format!("dists/{dist}/{base}/{stem}{ext}"), content_type, &r.lists[form], &parts[form]);
    }
    finish(ctx, id, &hashers)
}

/// Each form's parts in order: (SHA-256, size).
type FileParts = [Vec<(String, i64)>; 3];

/// The whole files' hash states before the first chunk: the xz file starts with the stream
/// header.
pub(crate) fn start() -> [Hashers; 3] {
    let mut hashers: [Hashers; 3] = Default::default();
    hashers[2].update(xz::header());
    hashers
}

/// The three files of `chunks`: each one's parts in order — the xz file's between its stream
/// header and its index with the footer, whose bytes are returned to be stored — and the whole
/// files' final hash states (`hashers`: the states after the last chunk).
fn layout(chunks: &[&Chunk], mut hashers: [Hashers; 3]) -> (FileParts, [Hashers; 3], [Vec<u8>; 2]) {
    let named = |bytes: &[u8]| {
        use sha2::Digest as _;
        (hex::encode(sha2::Sha256::digest(bytes)), i64::try_from(bytes.len()).unwrap_or(i64::MAX))
    };
    let records: Vec<xz::Record> = chunks.iter().filter_map(|c| c.xz).collect();
    let (header, tail) = (xz::header().to_vec(), xz::tail(&records));
    hashers[2].update(&tail);
    let mut parts: FileParts = Default::default();
    for (form, list) in parts.iter_mut().enumerate() {
        if form == 2 {
            list.push(named(&header));
        }
        // A chunk without text has no xz block.
        list.extend(chunks.iter().filter(|c| form != 2 || c.xz.is_some()).map(|c| c.parts[form].clone()));
        if form == 2 {
            list.push(named(&tail));
        }
    }
    (parts, hashers, [header, tail])
}

/// Stores and adds the three files of `chunks` (`hashers`: the states after the last), their
/// by-hash names; returns their part lists' digests and what `Release` lists for them.
async fn publish_files(
    ctx: &mut BuildContext<'_>,
    id: &IndexId<'_>,
    chunks: &[&Chunk],
    hashers: [Hashers; 3],
) -> Result<([String; 3], [Hashed; 3]), BuildError> {
    let IndexId { dist, base, stem, .. } = *id;
    let (parts, hashers, ends) = layout(chunks, hashers);
    for bytes in ends {
        let mut sink = ctx.file(".parts/new", "application/octet-stream").await?;
        sink.write(&bytes).await?;
        ctx.part(sink).await?;
    }
    let mut lists: [String; 3] = Default::default();
    for (form, (ext, content_type)) in FORMS.iter().enumerate() {
        lists[form] = ctx.composite(&format!("dists/{dist}/{base}/{stem}{ext}"), content_type, &parts[form]).await?;
    }
    Ok((lists, finish(ctx, id, &hashers)?))
}

/// Release's entries for the three files, and their by-hash names.
fn finish(ctx: &mut BuildContext<'_>, id: &IndexId<'_>, hashers: &[Hashers; 3]) -> Result<[Hashed; 3], BuildError> {
    let IndexId { dist, base, stem, .. } = *id;
    let hashed = [0, 1, 2].map(|form| hashers[form].clone().finish(format!("{base}/{stem}{}", FORMS[form].0)));
    for h in &hashed {
        let full = format!("dists/{dist}/{}", h.path);
        ctx.alias(&format!("dists/{dist}/{base}/by-hash/SHA256/{}", h.sha256), &full)?;
        ctx.alias(&format!("dists/{dist}/{base}/by-hash/SHA512/{}", h.sha512), &full)?;
    }
    Ok(hashed)
}

/// Renders the rows of `(after, upto]` (at most CHUNK_ROWS) as one chunk's text. `None` when
/// the range holds no rows, unless `even_empty`.
async fn render_chunk(
    ctx: &mut BuildContext<'_>,
    rows: &dyn IndexRows,
    (after, upto): (i64, i64),
    even_empty: bool,
) -> Result<Option<Rendered>, BuildError> {
    let mut text = String::new();
    let ids = rows.render(ctx.db, after, upto, CHUNK_ROWS, &mut text).await?;
    if ids.is_empty() && !even_empty {
        return Ok(None);
    }
    let count = i64::try_from(ids.len()).unwrap_or(i64::MAX);
    // The open chunk at the end, which the next append renders again, is compressed quickly.
    let open = upto == i64::MAX && count < CHUNK_ROWS;
    Ok(Some(Rendered {
        text,
        last_id: ids.last().copied().unwrap_or(after),
        count,
        preset: if open { XZ_OPEN } else { XZ_KEPT },
    }))
}

/// What identifies the bytes of the three files before a chunk (the same marks: the same bytes).
type Marks = [[u8; 32]; 3];

fn marks(hashers: &[Hashers; 3]) -> Marks {
    [0, 1, 2].map(|form| hashers[form].mark())
}

/// Carries the whole-file hashes over an unchanged chunk that follows a changed one (its parts
/// read back).
async fn rehash(ctx: &BuildContext<'_>, chunk: &Chunk, hashers: [Hashers; 3]) -> Result<[Hashers; 3], BuildError> {
    rehash_forms(ctx, chunk, hashers, 0).await
}

/// [`rehash`] of the forms from `first` on (the states before it are returned as given).
async fn rehash_forms(
    ctx: &BuildContext<'_>,
    chunk: &Chunk,
    hashers: [Hashers; 3],
    first: usize,
) -> Result<[Hashers; 3], BuildError> {
    let mut out: [Hashers; 3] = Default::default();
    for (form, h) in hashers.into_iter().enumerate() {
        if form < first {
            out[form] = h;
            continue;
        }
        out[form] = hash_on(h, ctx.blobs().read_all(&Sha256Hex::parse(&chunk.parts[form].0)?).await?).await?;
    }
    Ok(out)
}
