//! Content selectors at the edge: what part of a repository a caller may read, delete or list
//! when a privilege reaches it only through a content selector (`packyard_model::selector`).
//! Every decision is made from the caller's principal as it was resolved (selectors compiled
//! in), the repository record and the path — no database query, so a warmed request runs
//! none. A path's component (name, version, group) is what the format's catalogue reads off
//! the path, as for a proxy's cached file.
//!
//! A principal whose privileges name content selectors has its decisions remembered per worker
//! thread ([`Remembered`]: how much of a repository it reaches, and each request path's
//! answer), keyed by the principal object itself — the security cache's `Arc`, its allocation
//! kept (a `Weak`) while remembered, so a role or selector change (a new principal object)
//! never meets an old decision — and by the repository record's version, and dropped when the
//! security or repository cache epoch moves. A warmed read
//! through a hundred selectors so costs one lookup, not a hundred evaluations
//! (docs/perf/selectors.md).

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_model::security::{Principal, Reach, RepoFacts};
use packyard_model::selector::Content;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};

use crate::auth::Caller;
use crate::error::ApiError;

fn facts(repo: &Repository) -> RepoFacts<'_> {
    RepoFacts { name: repo.name.as_str(), anonymous_read: repo.anonymous_read }
}

/// The most bytes of keys a worker thread remembers; past it, it starts over.
const REMEMBERED_BYTES: usize = 8 << 20;
/// A longer path's decision is made each time, not remembered.
const LONGEST_REMEMBERED: usize = 1024;

/// A repository record's version is part of a key: a request holding a record older than the
/// cache's epoch neither uses nor stores an answer for the current one.
#[derive(Hash, PartialEq, Eq)]
struct ReachKey {
    repo: (i64, i64),
    action: Action,
}

#[derive(Hash, PartialEq, Eq)]
struct PathKey {
    repo: (i64, i64),
    action: Action,
    path: Box<str>,
}

#[derive(Hash)]
struct PathRef<'a> {
    repo: (i64, i64),
    action: Action,
    path: &'a str,
}

impl hashbrown::Equivalent<PathKey> for PathRef<'_> {
    fn equivalent(&self, k: &PathKey) -> bool {
        self.repo == k.repo && self.action == k.action && self.path == &*k.path
    }
}

/// One principal's remembered decisions.
struct Of {
    /// Keeps the principal's allocation (not its contents) alive, so that its address, the
    /// key, names no other principal while remembered.
    _principal: Weak<Principal>,
    reach: hashbrown::HashMap<ReachKey, Reach>,
    paths: hashbrown::HashMap<PathKey, bool>,
}

/// Decisions of principals with content selectors, remembered on this thread under `epochs`
/// (the instance, its security and repository cache epochs).
#[derive(Default)]
struct Remembered {
    epochs: [u64; 3],
    of: hashbrown::HashMap<usize, Of>,
    bytes: usize,
}

thread_local! {
    static REMEMBERED_HERE: RefCell<Remembered> = RefCell::new(Remembered::default());
}

/// Whether the principal's decisions are worth remembering: it names a content selector
/// (without one, a decision is a few comparisons).
fn narrowed(principal: &Principal) -> bool {
    let privileges = match principal {
        Principal::Anonymous { privileges } | Principal::User { privileges, .. } => privileges,
    };
    privileges.iter().any(|p| p.content_selector.is_some())
}

/// Runs `f` on the caller's remembered decisions on this thread, forgotten first if an epoch
/// moved or the thread remembers too much.
fn remembered<T>(caller: &Caller, services: &Services, f: impl FnOnce(&mut Of, &mut usize) -> T) -> T {
    let security = &services.security.cache;
    let epochs = [services.published.id(), security.security_epoch(), security.repositories_epoch()];
    REMEMBERED_HERE.with(|r| {
        let mut r = r.borrow_mut();
        if r.epochs != epochs || r.bytes > REMEMBERED_BYTES {
            *r = Remembered { epochs, ..Remembered::default() };
        }
        let r = &mut *r;
        let bytes = &mut r.bytes;
        let of = r.of.entry(Arc::as_ptr(&caller.principal) as usize).or_insert_with(|| {
            *bytes += 256;
            Of {
                _principal: Arc::downgrade(&caller.principal),
                reach: hashbrown::HashMap::new(),
                paths: hashbrown::HashMap::new(),
            }
        });
        f(of, bytes)
    })
}

/// How much of `repo` the caller may `action`.
pub(crate) fn reach(caller: &Caller, services: &Services, repo: &Repository, action: Action) -> Reach {
    let decide = || caller.principal.reach(facts(repo), action, services.security.anonymous_read);
    if !narrowed(&caller.principal) {
        return decide();
    }
    remembered(caller, services, |of, bytes| {
        let key = ReachKey { repo: (repo.id, repo.version), action };
        if let Some(r) = of.reach.get(&key) {
            return *r;
        }
        let r = decide();
        *bytes += 64;
        of.reach.insert(key, r);
        r
    })
}

/// Whether the caller may `action` the file a request names at `path` (below the repository,
/// as the client sent it: decoded here, as the routes decode it). A path that does not decode
/// is refused where a selector decides.
pub(crate) fn allows_request(
    caller: &Caller,
    services: &Services,
    repo: &Repository,
    action: Action,
    path: &str,
) -> bool {
    match reach(caller, services, repo, action) {
        Reach::All => true,
        Reach::Nothing => false,
        Reach::Part => {
            let decide = || {
                crate::route::percent_decode(path)
                    .is_some_and(|decoded| selects(caller, services, repo, action, &decoded, None))
            };
            if path.len() > LONGEST_REMEMBERED {
                return decide();
            }
            remembered(caller, services, |of, bytes| {
                let id = (repo.id, repo.version);
                if let Some(known) = of.paths.get(&PathRef { repo: id, action, path }) {
                    return *known;
                }
                let allowed = decide();
                *bytes += path.len() + 64;
                of.paths.insert(PathKey { repo: id, action, path: path.into() }, allowed);
                allowed
            })
        }
    }
}

/// Whether the caller may `action` the stored file at `path` (below the repository, as stored),
/// of component `component` (`(group, name, version)`) when known; otherwise the format's
/// catalogue names it from the path.
pub(crate) fn allows_path(
    caller: &Caller,
    services: &Services,
    repo: &Repository,
    action: Action,
    path: &str,
    component: Option<(&str, &str, &str)>,
) -> bool {
    match reach(caller, services, repo, action) {
        Reach::All => true,
        Reach::Nothing => false,
        Reach::Part => selects(caller, services, repo, action, path, component),
    }
}

/// Whether a content selector of the caller's selects the file (evaluated).
fn selects(
    caller: &Caller,
    services: &Services,
    repo: &Repository,
    action: Action,
    path: &str,
    component: Option<(&str, &str, &str)>,
) -> bool {
    let derived;
    let (group, name, version) = match component {
        Some((g, n, v)) => (Some(g), Some(n), Some(v)),
        None => {
            derived = packyard_formats::catalogue(repo.format).cached(path);
            match &derived {
                Some(c) => (Some(c.group.as_str()), Some(c.name.as_str()), Some(c.version.as_str())),
                None => (None, None, None),
            }
        }
    };
    let rooted = format!("/{path}");
    let content =
        Content { format: repo.format.as_str(), repository: repo.name.as_str(), path: &rooted, name, version, group };
    caller.principal.allows_content(facts(repo), action, services.security.anonymous_read, &content)
}

/// Whether the caller may `action` the catalogued asset `a` of component `c`, seen through
/// `view` (a group shows its members' components as its own).
pub(crate) fn allows_asset(
    caller: &Caller,
    services: &Services,
    view: &Repository,
    action: Action,
    c: &ComponentRow,
    a: &AssetRow,
) -> bool {
    let component = (c.namespace.as_str(), c.name.as_str(), c.version.as_str());
    allows_path(caller, services, view, action, &a.path, Some(component))
}

/// Whether the caller may `action` component `c` seen through `view`: as Nexus decides it, when
/// it may `action` one of the component's assets (`assets` may hold other components' too).
pub(crate) fn allows_component(
    caller: &Caller,
    services: &Services,
    view: &Repository,
    action: Action,
    c: &ComponentRow,
    assets: &[AssetRow],
) -> bool {
    component_files(caller, services, (view, action), c, assets, false)
}

/// Whether the caller may `action` every file of component `c` in `repo` (what a delete of it
/// removes).
pub(crate) fn allows_whole_component(
    caller: &Caller,
    services: &Services,
    repo: &Repository,
    action: Action,
    c: &ComponentRow,
    assets: &[AssetRow],
) -> bool {
    component_files(caller, services, (repo, action), c, assets, true)
}

/// Whether the caller may `action` one (`every`: each) of the files of component `c` among
/// `assets` — its key as a path when it has none.
fn component_files(
    caller: &Caller,
    services: &Services,
    (repo, action): (&Repository, Action),
    c: &ComponentRow,
    assets: &[AssetRow],
    every: bool,
) -> bool {
    match reach(caller, services, repo, action) {
        Reach::All => true,
        Reach::Nothing => false,
        Reach::Part => {
            let mut own = assets.iter().filter(|a| a.component_id == c.id).peekable();
            if own.peek().is_none() {
                let component = (c.namespace.as_str(), c.name.as_str(), c.version.as_str());
                return allows_path(caller, services, repo, action, &c.component_key, Some(component));
            }
            let allowed = |a: &AssetRow| allows_asset(caller, services, repo, action, c, a);
            if every {
                own.all(allowed)
            } else {
                own.any(allowed)
            }
        }
    }
}

/// The refusal of `action` on content of `repo` that no selector of the caller selects: 401
/// for an anonymous caller (credentials may reach it), 403 naming the selectors otherwise.
pub(crate) fn refusal(caller: &Caller, services: &Services, repo: &Repository, action: Action, what: &str) -> ApiError {
    if caller.principal.is_anonymous() {
        return ApiError::unauthorized(format!(
            "authentication required to {action} {what} in repository {}",
            repo.name
        ));
    }
    let selectors = caller.principal.selectors_for(facts(repo), action, services.security.anonymous_read);
    if selectors.is_empty() {
        return ApiError::forbidden(format!("user {} may not {action} repository {}", caller.username(), repo.name));
    }
    ApiError::forbidden(format!(
        "user {} may not {action} {what} in repository {}: the {action} privilege on it is limited to content selector(s) {}, which do not select it",
        caller.username(),
        repo.name,
        selectors.join(", ")
    ))
}
