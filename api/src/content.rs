//! Content selectors at the edge: what part of a repository a caller may read, delete or list
//! when a privilege reaches it only through a content selector (`packyard_model::selector`).
//! Every decision is made from the caller's principal as it was resolved (selectors compiled
//! in), the repository record and the path — no database query, so a warmed request runs
//! none. A path's component (name, version, group) is what the format's catalogue reads off
//! the path, as for a proxy's cached file.
//!
//! A principal whose privileges name content selectors has its decisions remembered per worker
//! thread ([`Remembered`]: how much of a repository it reaches, and each path's answer), under
//! the security and repository cache epochs: a role, selector or repository change (which
//! moves a watermark, so an epoch) forgets them all. A warmed read through a hundred selectors
//! so costs one lookup, not a hundred evaluations (docs/perf/selectors.md).

use std::cell::RefCell;
use std::collections::HashMap;

use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_model::security::{Reach, RepoFacts};
use packyard_model::selector::Content;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};

use crate::auth::Caller;
use crate::error::ApiError;

fn facts(repo: &Repository) -> RepoFacts<'_> {
    RepoFacts { name: repo.name.as_str(), anonymous_read: repo.anonymous_read }
}

/// The most decisions a worker thread remembers; past it, it starts over.
const REMEMBERED: usize = 50_000;

/// Decisions of principals with content selectors, remembered on this thread under `epochs`
/// (the instance, its security and repository cache epochs).
#[derive(Default)]
struct Remembered {
    epochs: [u64; 3],
    reach: HashMap<String, Reach>,
    paths: HashMap<String, bool>,
}

thread_local! {
    static REMEMBERED_HERE: RefCell<Remembered> = RefCell::new(Remembered::default());
}

/// Who a principal is, for the remembered decisions: its privileges are fixed within an epoch
/// for a user (and a token's narrowing by the token); `None` when it names no selector (its
/// decisions are a few comparisons, not worth a lookup).
fn whose(caller: &Caller) -> Option<String> {
    use packyard_model::security::Principal;
    match &*caller.principal {
        Principal::Anonymous { privileges } if privileges.iter().any(|p| p.content_selector.is_some()) => {
            Some("anonymous".to_string())
        }
        Principal::User { id, privileges, token, .. } if privileges.iter().any(|p| p.content_selector.is_some()) => {
            Some(format!("{id}\0{}", token.as_ref().map_or("", |t| t.token_id.as_str())))
        }
        _ => None,
    }
}

/// Runs `f` on this thread's remembered decisions, forgotten first if an epoch moved.
fn remembered<T>(services: &Services, f: impl FnOnce(&mut Remembered) -> T) -> T {
    let security = &services.security.cache;
    let epochs = [services.published.id(), security.security_epoch(), security.repositories_epoch()];
    REMEMBERED_HERE.with(|r| {
        let mut r = r.borrow_mut();
        if r.epochs != epochs || r.reach.len() + r.paths.len() > REMEMBERED {
            *r = Remembered { epochs, ..Remembered::default() };
        }
        f(&mut r)
    })
}

/// How much of `repo` the caller may `action`.
pub(crate) fn reach(caller: &Caller, services: &Services, repo: &Repository, action: Action) -> Reach {
    let decide = || caller.principal.reach(facts(repo), action, services.security.anonymous_read);
    let Some(who) = whose(caller) else { return decide() };
    let key = format!("{who}\0{}\0{action}", repo.name);
    if let Some(r) = remembered(services, |m| m.reach.get(&key).copied()) {
        return r;
    }
    let r = decide();
    remembered(services, |m| m.reach.insert(key, r));
    r
}

/// Whether the caller may `action` the file at `path` (below the repository, no leading `/`),
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
        Reach::Part if component.is_none() => {
            // A request's path: the same answer every time within the epochs.
            let key = whose(caller).map(|who| format!("{who}\0{}\0{action}\0{path}", repo.name));
            if let Some(known) = key.as_ref().and_then(|k| remembered(services, |m| m.paths.get(k).copied())) {
                return known;
            }
            let allowed = selects(caller, services, repo, action, path, None);
            if let Some(k) = key {
                remembered(services, |m| m.paths.insert(k, allowed));
            }
            allowed
        }
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
    match reach(caller, services, view, action) {
        Reach::All => true,
        Reach::Nothing => false,
        Reach::Part => {
            let mut own = assets.iter().filter(|a| a.component_id == c.id).peekable();
            if own.peek().is_none() {
                let component = (c.namespace.as_str(), c.name.as_str(), c.version.as_str());
                return allows_path(caller, services, view, action, &c.component_key, Some(component));
            }
            own.any(|a| allows_asset(caller, services, view, action, c, a))
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
