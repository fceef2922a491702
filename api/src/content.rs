//! Content selectors at the edge: what part of a repository a caller may read, delete or list
//! when a privilege reaches it only through a content selector (`packyard_model::selector`).
//! Every decision is made from the caller's principal as it was resolved (selectors compiled
//! in), the repository record and the path — no database query, so a warmed request runs
//! none. A path's component (name, version, group) is what the format's catalogue reads off
//! the path, as for a proxy's cached file.

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

/// How much of `repo` the caller may `action`.
pub(crate) fn reach(caller: &Caller, services: &Services, repo: &Repository, action: Action) -> Reach {
    caller.principal.reach(facts(repo), action, services.security.anonymous_read)
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
    let global = services.security.anonymous_read;
    match caller.principal.reach(facts(repo), action, global) {
        Reach::All => true,
        Reach::Nothing => false,
        Reach::Part => {
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
            let content = Content {
                format: repo.format.as_str(),
                repository: repo.name.as_str(),
                path: &rooted,
                name,
                version,
                group,
            };
            caller.principal.allows_content(facts(repo), action, global, &content)
        }
    }
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
