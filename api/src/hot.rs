//! Hot answers: each worker thread remembers, per path, what a repository's anonymous GET or
//! HEAD was answered from — a file of a current snapshot, or a hosted artifact's blob — and
//! answers the next such request for that path from it, ahead of the dispatcher's work (the
//! caller, the repository, the route table, the snapshot's lookups). A small metadata file
//! (`InRelease`, `APKINDEX.tar.gz`) and a package's HEAD or 304 are the requests a fleet of
//! clients repeats most, and Packyard's own work on them is what keeps it from the framework's
//! ceiling (docs/perf/ceiling.md).
//!
//! What keeps a remembered answer right:
//! - it is remembered under the epochs of the caches it was made from (the security cache's
//!   decisions and repositories, the published snapshots' pointers), read before the request
//!   looked anything up; any move of one of them forgets every answer of the thread, and an
//!   answer is kept no longer than a cached repository is (`auth_cache_ttl_secs`);
//! - only an anonymous request without credentials is answered or remembered, and only after
//!   the route table's access decision allowed it: the decision for anonymous is one per epoch;
//! - no query string (a route may read one) and only what a route offered ([`Slot::offer`]);
//! - before it is remembered, the answer replayed for the request that offered it must equal
//!   what the route answered (status, every header, the body's size): a route that adds a
//!   header of its own after offering (a group naming a failed member) is not remembered;
//! - an answer that hangs on what no epoch covers (a group's file found after another member,
//!   a proxy perhaps, said it had none) is spoiled ([`Slot::spoil`]) and not remembered.
//!
//! A thread keeps at most [`MAX_PATHS`] answers and [`MAX_BYTES`] of files, and lets them all
//! go at the first request that finds an epoch moved.
//!
//! The conditional parts (`If-None-Match`, `If-Modified-Since`) are decided again per request,
//! by the same functions the routes use.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::http::header::HeaderValue;
use actix_web::http::{header, Method};
use actix_web::{HttpRequest, HttpResponse};
use bytes::Bytes;
use packyard_core::publication::cache::{ArtifactRef, ServedFile};
use packyard_core::services::Services;
use packyard_model::repos::Repository;

/// What an answer can be made again from.
pub enum Reusable {
    /// A file of a unit's current snapshot ([`crate::formats::serve_published`]).
    File(ServedFile),
    /// A hosted artifact's blob: its HEAD and 304 need no read of the store
    /// ([`crate::formats::artifact_now`]); a GET goes the whole way.
    Artifact(ArtifactRef, &'static str),
}

impl Reusable {
    /// A copy whose bytes and header values are this thread's own: the answer is cloned per
    /// request, and a reference count that two worker threads both touch moves its cache line
    /// between their cores on every request.
    fn private(&self) -> Self {
        let value = |v: &HeaderValue| HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
        match self {
            Self::File(f) => Self::File(ServedFile {
                bytes: Bytes::copy_from_slice(&f.bytes),
                modified: f.modified,
                last_modified: f.last_modified.as_ref().map(value),
                content_type: value(&f.content_type),
                etag: f.etag.as_ref().map(value),
                settled: f.settled,
            }),
            Self::Artifact(a, content_type) => Self::Artifact(
                ArtifactRef {
                    sha256: Arc::from(&*a.sha256),
                    size: a.size,
                    modified_ms: a.modified_ms,
                    etag: a.etag.as_ref().map(value),
                    last_modified: a.last_modified.as_ref().map(value),
                },
                content_type,
            ),
        }
    }

    /// The bytes it keeps (a file's; an artifact's stay in the store).
    fn bytes(&self) -> usize {
        match self {
            Self::File(f) => f.bytes.len(),
            Self::Artifact(..) => 0,
        }
    }

    /// The answer to `req`, when it needs no I/O.
    fn answer(&self, req: &HttpRequest) -> Option<HttpResponse> {
        match self {
            Self::File(f) => Some(crate::formats::serve_published(req, f.clone())),
            Self::Artifact(a, content_type) => crate::formats::artifact_now(req, a, content_type),
        }
    }
}

/// Where a route offers what its answer was made from (one per request, in [`crate::route::Cx`]).
/// The source is boxed: the slot lives in the dispatcher's future, which a test bounds.
#[derive(Default)]
pub struct Slot {
    offered: Cell<Option<Box<Reusable>>>,
    spoiled: Cell<bool>,
}

impl Slot {
    /// Offers the answer's source. The route's answer must be exactly what it makes: anything
    /// the route adds afterwards makes the replay differ, and then nothing is remembered.
    pub fn offer(&self, answer: Reusable) {
        self.offered.set(Some(Box::new(answer)));
    }

    /// Says that the answer hangs on something no epoch covers (what a proxy's upstream said):
    /// nothing this request offers is remembered.
    pub fn spoil(&self) {
        self.spoiled.set(true);
    }

    fn take(&self) -> Option<Box<Reusable>> {
        self.offered.take().filter(|_| !self.spoiled.get())
    }
}

/// The caches' epochs an answer was made under, and which caches they are (one process may
/// run several apps, as the tests' replicas do, on one thread).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Epochs([u64; 4]);

impl Epochs {
    pub fn now(services: &Services) -> Self {
        let security = &services.security.cache;
        let published = &services.published;
        Self([published.id(), security.security_epoch(), security.repositories_epoch(), published.epoch()])
    }
}

struct Entry {
    repo: Arc<Repository>,
    answer: Reusable,
    at: Instant,
}

struct Answers {
    epochs: Option<Epochs>,
    by_path: hashbrown::HashMap<Box<str>, Entry>,
    /// The bytes of the remembered files.
    bytes: usize,
}

impl Answers {
    fn forget(&mut self) {
        self.by_path.clear();
        self.bytes = 0;
    }
}

thread_local! {
    static ANSWERS: RefCell<Answers> =
        RefCell::new(Answers { epochs: None, by_path: hashbrown::HashMap::new(), bytes: 0 });
}

/// Paths remembered per thread before the map is emptied and refilled.
const MAX_PATHS: usize = 1024;
/// Bytes of files remembered per thread before the map is emptied and refilled (the copies are
/// the thread's own, beside the snapshot cache's).
const MAX_BYTES: usize = 4 << 20;
/// Larger files are not remembered: for them Packyard's own work is a small part of the
/// response.
const MAX_FILE_BYTES: usize = 64 * 1024;

/// Whether a request may be answered from, or remembered in, the hot answers.
fn eligible(req: &HttpRequest) -> bool {
    (req.method() == Method::GET || req.method() == Method::HEAD)
        && req.query_string().is_empty()
        && !req.headers().contains_key(header::AUTHORIZATION)
}

/// The remembered answer to `req` and the repository it is of, if there is one and it is still
/// right (see the module's notes).
pub fn answer(req: &HttpRequest, services: &Services) -> Option<(HttpResponse, Arc<Repository>)> {
    if !eligible(req) {
        return None;
    }
    ANSWERS.with(|a| {
        let mut a = a.borrow_mut();
        if a.epochs != Some(Epochs::now(services)) {
            // What was made under other epochs is never answered again: let it go now.
            if !a.by_path.is_empty() {
                a.forget();
            }
            return None;
        }
        let entry = a.by_path.get(req.path())?;
        if entry.at.elapsed() >= ttl(services) {
            return None;
        }
        let mut res = entry.answer.answer(req)?;
        crate::repository::sandbox(res.headers_mut());
        Some((res, entry.repo.clone()))
    })
}

fn ttl(services: &Services) -> Duration {
    services.security.cache.ttl()
}

/// Remembers what `req`'s answer `res` was made from, when a route offered it, the request is
/// eligible, the caller anonymous, and the replay equals `res`. `epochs`: as read before the
/// request looked anything up.
pub fn remember(
    req: &HttpRequest,
    services: &Services,
    (epochs, anonymous): (Epochs, bool),
    repo: &Arc<Repository>,
    slot: &Slot,
    res: &HttpResponse,
) {
    let Some(answer) = slot.take() else { return };
    if !anonymous || !eligible(req) || Epochs::now(services) != epochs {
        return;
    }
    let size = answer.bytes();
    if size > MAX_FILE_BYTES {
        return;
    }
    if !answer.answer(req).is_some_and(|again| same(&again, res)) {
        return;
    }
    ANSWERS.with(|a| {
        let mut a = a.borrow_mut();
        if a.epochs != Some(epochs) {
            // Only answers made under the current epochs are kept: older ones are forgotten.
            a.forget();
            a.epochs = Some(epochs);
        }
        if a.by_path.len() >= MAX_PATHS || a.bytes + size > MAX_BYTES {
            a.forget();
        }
        let repo = Arc::new(Repository::clone(repo));
        let entry = Entry { repo, answer: answer.private(), at: Instant::now() };
        if let Some(replaced) = a.by_path.insert(req.path().into(), entry) {
            a.bytes = a.bytes.saturating_sub(replaced.answer.bytes());
        }
        a.bytes += size;
    });
}

/// The same status, headers and body size.
fn same(a: &HttpResponse, b: &HttpResponse) -> bool {
    a.status() == b.status()
        && a.headers().len() == b.headers().len()
        && a.headers().iter().all(|(k, v)| b.headers().get_all(k).any(|w| w == v))
        && a.body().size() == b.body().size()
}
